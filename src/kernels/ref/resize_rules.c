/* resize_rules.c - ONNX Resize's coordinate and nearest-index rules (resize_rules.h). */
#include "kernels/ref/resize_rules.h"

#include <math.h>

const char *const nr_resize_ctm_names[NR_RESIZE_CT_COUNT] = {
    "half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
    "asymmetric",    "tf_half_pixel_for_nn", "tf_crop_and_resize"};
const char *const nr_resize_nearest_names[4] = {"round_prefer_floor", "round_prefer_ceil",
                                                "floor", "ceil"};

double nr_resize_source_coord(int ctm, double j, int64_t in, int64_t out, double scale,
                              double lo, double hi) {
  double out_w = scale * (double)in; /* fractional when a scale was given */
  switch (ctm) {
  case NR_RESIZE_CT_HALF_PIXEL_SYMMETRIC: {
    double offset = (double)in / 2 * (1 - (double)out / out_w);
    return offset + (j + 0.5) / scale - 0.5;
  }
  case NR_RESIZE_CT_PYTORCH_HALF_PIXEL: return out_w > 1 ? (j + 0.5) / scale - 0.5 : 0.0;
  case NR_RESIZE_CT_ALIGN_CORNERS:
    return out_w == 1 ? 0.0 : j * (double)(in - 1) / (out_w - 1);
  case NR_RESIZE_CT_ASYMMETRIC: return j / scale;
  case NR_RESIZE_CT_TF_HALF_PIXEL_FOR_NN: return (j + 0.5) / scale;
  case NR_RESIZE_CT_TF_CROP_AND_RESIZE:
    if (out_w == 1)
      return (hi - lo) * (double)(in - 1) / 2 + lo * (double)(in - 1);
    return j * (hi - lo) * (double)(in - 1) / (out_w - 1) + lo * (double)(in - 1);
  default: return (j + 0.5) / scale - 0.5;
  }
}

int64_t nr_resize_nearest_index(int mode, double x, double scale) {
  double f = floor(x), frac = x - f;
  if (frac == 0)
    return (int64_t)f;
  switch (mode) {
  case NR_RESIZE_NEAREST_ROUND_FLOOR: return (int64_t)(frac <= 0.5 ? f : f + 1);
  case NR_RESIZE_NEAREST_ROUND_CEIL: return (int64_t)(frac < 0.5 ? f : f + 1);
  case NR_RESIZE_NEAREST_FLOOR: return (int64_t)f;
  case NR_RESIZE_NEAREST_CEIL: return (int64_t)f + 1;
  default: return (int64_t)(scale < 1 ? f + 1 : f);
  }
}
