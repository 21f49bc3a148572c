/* window.h - the sliding window of Conv, ConvTranspose and the pooling operators:
 * reading its attributes (auto_pad, pads, strides, dilations, kernel_shape,
 * ceil_mode) and resolving them into output sizes and concrete pads.
 *
 * Key decision: every reader of a window (the reference's conv and pool operators,
 * node_desc.h's nr_conv_desc, the CPU and CUDA pool tactics) resolves it through
 * these functions into an nr_window, so the padding rules (SAME_UPPER vs SAME_LOWER,
 * ceil_mode dropping a window that starts in the right padding) live in exactly one
 * place. Sizes may be NR_DIM_UNKNOWN during static inference; the resolution then
 * leaves the matching outputs unknown. Errors go through nr_op_fail on the caller's
 * nr_op_ctx (only its node and err are read). */
#ifndef NR_IR_WINDOW_H
#define NR_IR_WINDOW_H

#include "ir/op.h"

typedef enum nr_auto_pad {
  NR_AUTO_PAD_NOTSET,
  NR_AUTO_PAD_SAME_UPPER,
  NR_AUTO_PAD_SAME_LOWER,
  NR_AUTO_PAD_VALID,
} nr_auto_pad;

typedef struct nr_window {
  int nsp; /* number of spatial dims */
  nr_auto_pad auto_pad;
  bool ceil_mode;
  int64_t kernel[NR_MAX_RANK]; /* NR_DIM_UNKNOWN when not known yet */
  int64_t stride[NR_MAX_RANK];
  int64_t dil[NR_MAX_RANK];
  int64_t pad_b[NR_MAX_RANK]; /* explicit pads, replaced by resolved ones */
  int64_t pad_e[NR_MAX_RANK];
  int64_t in[NR_MAX_RANK];  /* spatial input sizes */
  int64_t out[NR_MAX_RANK]; /* spatial output sizes once resolved */
} nr_window;

/* Reads the window attributes of ctx->node for nsp spatial dims. kernel_from gives
 * the kernel when the kernel_shape attribute is absent (a weight's spatial dims, may
 * hold unknowns); NULL makes kernel_shape required (pools). */
nr_status nr_window_read(nr_op_ctx *ctx, int nsp, const int64_t *kernel_from,
                         nr_window *w);
/* Sets w->in from in and resolves pads and output sizes of a forward window (Conv,
 * pools). Unknown input or kernel sizes give unknown outputs. */
nr_status nr_window_forward(nr_op_ctx *ctx, nr_window *w, const int64_t *in);
/* Dilated kernel extent of spatial dim i. */
static inline int64_t nr_window_extent(const nr_window *w, int i) {
  return w->dil[i] * (w->kernel[i] - 1) + 1;
}

/* Checks X is [N, C, spatial...] with a known rank >= 3 (unless rank is unknown,
 * which sets *nsp to -1). name is the input's name in messages. */
nr_status nr_window_check_input(nr_op_ctx *ctx, const nr_value *x, const char *name,
                                int *nsp);

#endif
