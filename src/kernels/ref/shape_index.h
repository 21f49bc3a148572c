/* shape_index.h - private tools of the shape and index operator families
 * (ops_shape.c, ops_layout.c, ops_const.c, ops_dropout.c; ops_index.c,
 * ops_select.c).
 *
 * Most of these operators never look at element values: they move elements of any
 * dtype as bytes, nr_dtype_size() at a time. Most of them are a strided view of their
 * input (Transpose, Slice, Expand, DepthToSpace, ...), so one walker, nr_sx_view_copy(),
 * does the moving and each operator only describes its view. They also compute the
 * shapes of exporters' Shape -> Gather -> Concat -> Reshape chains, so their infer()
 * functions evaluate small all-constant cases right away (nr_sx_fold_small). */
#ifndef NR_KERNELS_REF_SHAPE_INDEX_H
#define NR_KERNELS_REF_SHAPE_INDEX_H

#include "ir/op.h"

#include <stddef.h>
#include <stdint.h>

/* A strided view of a source buffer, walked in C order of dims. Strides are in
 * elements and may be 0 (broadcast) or negative (reversed slices). */
typedef struct nr_sx_view {
  int rank;
  int64_t dims[NR_MAX_RANK];
  int64_t strides[NR_MAX_RANK];
  int64_t offset; /* source element of the first walked element */
} nr_sx_view;

/* Copies the view's elements (es bytes each) into dst, densely in C order. */
void nr_sx_view_copy(void *dst, const void *src, size_t es, const nr_sx_view *v);

/* Reads a scalar or 1-D integer input (int32, int64; other integer types and bool are
 * accepted too) into out[0..*n). Fails with NR_ERR_SHAPE naming `what` when it is not
 * an integer tensor, has rank > 1 or more than cap elements. Data must be known. */
nr_status nr_sx_read_ints(nr_op_ctx *ctx, int input, const char *what, int64_t *out,
                          int cap, int *n);

/* True for the index dtypes ONNX allows (int32, int64). */
bool nr_sx_is_index(nr_dtype t);
/* Fails with NR_ERR_SHAPE unless input i is present with an index dtype. */
nr_status nr_sx_need_index(nr_op_ctx *ctx, int i, const char *what);

/* Statically (ctx->runtime false), when every present input has known data and the
 * outputs' shapes are known and small, allocates the outputs and calls run so that
 * shape-computing chains resolve during inference. Otherwise does nothing. */
nr_status nr_sx_fold_small(nr_op_ctx *ctx, nr_op_fn run);

/* Operators of ops_layout.c, ops_const.c and ops_dropout.c, listed by ops_shape.c's
 * table. */
nr_status nr_sx_transpose_infer(nr_op_ctx *ctx);
nr_status nr_sx_transpose_run(nr_op_ctx *ctx);
nr_status nr_sx_tile_infer(nr_op_ctx *ctx);
nr_status nr_sx_tile_run(nr_op_ctx *ctx);
nr_status nr_sx_pad_infer(nr_op_ctx *ctx);
nr_status nr_sx_pad_run(nr_op_ctx *ctx);
nr_status nr_sx_d2s_infer(nr_op_ctx *ctx);
nr_status nr_sx_d2s_run(nr_op_ctx *ctx);
nr_status nr_sx_s2d_infer(nr_op_ctx *ctx);
nr_status nr_sx_s2d_run(nr_op_ctx *ctx);
nr_status nr_sx_trilu_infer(nr_op_ctx *ctx);
nr_status nr_sx_trilu_run(nr_op_ctx *ctx);
nr_status nr_sx_revseq_infer(nr_op_ctx *ctx);
nr_status nr_sx_revseq_run(nr_op_ctx *ctx);
nr_status nr_sx_eyelike_infer(nr_op_ctx *ctx);
nr_status nr_sx_eyelike_run(nr_op_ctx *ctx);
nr_status nr_sx_constant_infer(nr_op_ctx *ctx);
nr_status nr_sx_constant_run(nr_op_ctx *ctx);
nr_status nr_sx_cos_infer(nr_op_ctx *ctx);
nr_status nr_sx_cos_run(nr_op_ctx *ctx);
nr_status nr_sx_range_infer(nr_op_ctx *ctx);
nr_status nr_sx_range_run(nr_op_ctx *ctx);
nr_status nr_sx_dropout_infer(nr_op_ctx *ctx);
nr_status nr_sx_dropout_run(nr_op_ctx *ctx);

/* Operators of ops_select.c, listed by ops_index.c's table. */
nr_status nr_sx_nonzero_infer(nr_op_ctx *ctx);
nr_status nr_sx_nonzero_run(nr_op_ctx *ctx);
nr_status nr_sx_compress_infer(nr_op_ctx *ctx);
nr_status nr_sx_compress_run(nr_op_ctx *ctx);
nr_status nr_sx_unique_infer(nr_op_ctx *ctx);
nr_status nr_sx_unique_run(nr_op_ctx *ctx);

#endif
