/* conv_util.h - what Conv, ConvTranspose and the pooling operators share: reading the
 * sliding-window attributes (auto_pad, pads, strides, dilations, kernel_shape,
 * ceil_mode) and resolving them into output sizes and concrete pads.
 *
 * Every operator of the family resolves its window once into an nr_window, so the
 * padding rules (SAME_UPPER vs SAME_LOWER, ceil_mode dropping a window that starts in
 * the right padding) live in exactly one place. Sizes may be NR_DIM_UNKNOWN during
 * static inference; the resolution then leaves the matching outputs unknown. */
#ifndef NR_KERNELS_REF_CONV_UTIL_H
#define NR_KERNELS_REF_CONV_UTIL_H

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

/* Product of n dims (1 for n == 0); NR_DIM_UNKNOWN if one is unknown. */
int64_t nr_dims_prod(int n, const int64_t *dims);
/* Advances a C-order multi-index over dims; false after the last position. */
static inline bool nr_index_next(int n, const int64_t *dims, int64_t *idx) {
  for (int d = n - 1; d >= 0; d--) {
    if (++idx[d] < dims[d])
      return true;
    idx[d] = 0;
  }
  return false;
}

/* ---- the convolution engine ------------------------------------------------------
 * im2col + GEMM for Conv, GEMM + col2im for ConvTranspose, and a direct loop for
 * depthwise float convolutions. Tensors are dense NC[spatial] in C order; w is Conv's
 * [M, C/group, k...] or ConvTranspose's [C, M/group, k...]; bias may be NULL. For
 * Conv, win.in / win.out are X's and Y's spatial sizes; for ConvTranspose too (Y is
 * the larger one). Fails only with NR_ERR_NOMEM. */
typedef struct nr_conv_shape {
  nr_window win;
  int64_t batch, in_c, out_c, group;
  int64_t in_size, out_size, ksize; /* spatial element counts */
} nr_conv_shape;

/* Fills the counts of s from s->win and the channel numbers already set. */
void nr_conv_shape_finish(nr_conv_shape *s);
nr_status nr_conv_f32(const nr_conv_shape *s, const float *x, const float *w,
                      const float *bias, float *y);
nr_status nr_conv_f64(const nr_conv_shape *s, const double *x, const double *w,
                      const double *bias, double *y);
nr_status nr_conv_transpose_f32(const nr_conv_shape *s, const float *x, const float *w,
                                const float *bias, float *y);
nr_status nr_conv_transpose_f64(const nr_conv_shape *s, const double *x, const double *w,
                                const double *bias, double *y);

/* ---- the rarer conv-family operators (ops_conv_extra.c, listed in ops_conv.c) ---- */
nr_status nr_ref_deform_conv_infer(nr_op_ctx *ctx);
nr_status nr_ref_deform_conv_run(nr_op_ctx *ctx);
nr_status nr_ref_causal_conv_infer(nr_op_ctx *ctx);
nr_status nr_ref_causal_conv_run(nr_op_ctx *ctx);

#endif
