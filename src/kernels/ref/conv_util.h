/* conv_util.h - what Conv, ConvTranspose and the pooling operators of the reference
 * share beyond the window (ir/window.h, included here for them): dims products and
 * C-order index walks, and the one convolution engine (im2col + GEMM, GEMM + col2im,
 * a direct depthwise loop) every conv-family operator runs. */
#ifndef NR_KERNELS_REF_CONV_UTIL_H
#define NR_KERNELS_REF_CONV_UTIL_H

#include "ir/op.h"
#include "ir/window.h"

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
