/* resize_rules.h - the coordinate rules of ONNX Resize, written once for the reference
 * operator (ops_resize.c) and the fast CPU tactics (kernels/cpu/resize/): how an
 * output index maps to an input coordinate under each coordinate_transformation_mode,
 * and which input index nearest mode picks. Both compute their tables through these
 * functions, in double, so the tactics agree with the oracle by construction. */
#ifndef NR_KERNELS_REF_RESIZE_RULES_H
#define NR_KERNELS_REF_RESIZE_RULES_H

#include <stdint.h>

/* coordinate_transformation_mode, in the order of nr_resize_ctm_names. */
enum {
  NR_RESIZE_CT_HALF_PIXEL,
  NR_RESIZE_CT_HALF_PIXEL_SYMMETRIC,
  NR_RESIZE_CT_PYTORCH_HALF_PIXEL,
  NR_RESIZE_CT_ALIGN_CORNERS,
  NR_RESIZE_CT_ASYMMETRIC,
  NR_RESIZE_CT_TF_HALF_PIXEL_FOR_NN,
  NR_RESIZE_CT_TF_CROP_AND_RESIZE,
  NR_RESIZE_CT_COUNT
};
/* nearest_mode, in the order of nr_resize_nearest_names; LEGACY: Upsample and
 * Resize-10 (floor when upsampling, ceil when downsampling). */
enum {
  NR_RESIZE_NEAREST_ROUND_FLOOR,
  NR_RESIZE_NEAREST_ROUND_CEIL,
  NR_RESIZE_NEAREST_FLOOR,
  NR_RESIZE_NEAREST_CEIL,
  NR_RESIZE_NEAREST_LEGACY
};

extern const char *const nr_resize_ctm_names[NR_RESIZE_CT_COUNT];
extern const char *const nr_resize_nearest_names[4];

/* Output index j's coordinate in the input along an axis of extent in (out outputs,
 * scale out/in as given); lo, hi: the axis's roi (tf_crop_and_resize only). */
double nr_resize_source_coord(int ctm, double j, int64_t in, int64_t out, double scale,
                              double lo, double hi);
/* The input index nearest mode takes for coordinate x (not clamped). */
int64_t nr_resize_nearest_index(int mode, double x, double scale);

#endif
