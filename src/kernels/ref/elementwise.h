/* elementwise.h - private to the elementwise operator family: the shape rules and
 * kernels each ops_elementwise_*.c file lends to the family table in
 * ops_elementwise.c, and the helpers they share.
 *
 * Key decision: every elementwise kernel walks its output in rows. nr_ew_rows merges
 * the output dims that broadcast alike for all inputs, so a same-shape operation is
 * one long row and a per-channel bias is rows of one plane each; inside a row each
 * input advances by 0 or 1 element. Kernels then run a tight loop per row, which keeps
 * the float32 paths fast without special cases for every broadcast pattern. */
#ifndef NR_KERNELS_REF_ELEMENTWISE_H
#define NR_KERNELS_REF_ELEMENTWISE_H

#include "ir/op.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- dtype classes -------------------------------------------------------------- */

enum {
  NR_EW_FLOAT = 1u << 0, /* float, double, float16, bfloat16 */
  NR_EW_SINT = 1u << 1,  /* int8 .. int64 */
  NR_EW_UINT = 1u << 2,  /* uint8 .. uint64 */
  NR_EW_BOOL = 1u << 3,
  NR_EW_STRING = 1u << 4, /* the spec allows strings; nnroute does not store them */
  NR_EW_INT = NR_EW_SINT | NR_EW_UINT,
  NR_EW_NUM = NR_EW_FLOAT | NR_EW_INT,
};

/* The class bit of a dtype; 0 for undefined, complex and types nnroute lacks. */
unsigned nr_ew_class(nr_dtype t);
/* Checks that input i's dtype is in `allowed`: unknown dtypes pass (statically),
 * strings the spec allows fail with NR_ERR_UNSUPPORTED, the rest with NR_ERR_SHAPE. */
nr_status nr_ew_check_dtype(nr_op_ctx *ctx, int i, unsigned allowed);
/* Checks that inputs i and j have the same dtype (when both are known). */
nr_status nr_ew_check_same_dtype(nr_op_ctx *ctx, int i, int j);
/* Fails with NR_ERR_UNSUPPORTED for the legacy (opset < 7) broadcast with an axis. */
nr_status nr_ew_check_legacy_broadcast(nr_op_ctx *ctx);

/* ---- the row walker ------------------------------------------------------------- */

#define NR_EW_MAX_IN 3

typedef struct nr_ew_rows {
  int rank, n;
  int64_t rows, inner;                   /* rows * inner = output element count */
  int64_t dims[NR_MAX_RANK];             /* merged outer dims (inner one dropped) */
  int64_t idx[NR_MAX_RANK];
  int64_t strides[NR_EW_MAX_IN][NR_MAX_RANK];
  int64_t off[NR_EW_MAX_IN];             /* element offset of the row start, per input */
  int64_t step[NR_EW_MAX_IN];            /* 0 or 1: advance per element within a row */
} nr_ew_rows;

/* ins[k] must broadcast to out's shape (numpy rules); n <= NR_EW_MAX_IN. */
void nr_ew_rows_init(nr_ew_rows *w, const nr_value *out, int n,
                     const nr_value *const *ins);
/* Moves the offsets to the next row. */
void nr_ew_rows_next(nr_ew_rows *w);

/* ---- shape rules and kernels lent to the family table --------------------------- */

nr_status nr_ew_unary_infer(nr_op_ctx *ctx);
nr_status nr_ew_unary_run(nr_op_ctx *ctx);
nr_status nr_ew_clip_infer(nr_op_ctx *ctx);
nr_status nr_ew_clip_run(nr_op_ctx *ctx);

nr_status nr_ew_binary_infer(nr_op_ctx *ctx);
nr_status nr_ew_binary_run(nr_op_ctx *ctx);
nr_status nr_ew_variadic_infer(nr_op_ctx *ctx);
nr_status nr_ew_variadic_run(nr_op_ctx *ctx);
nr_status nr_ew_where_infer(nr_op_ctx *ctx);
nr_status nr_ew_where_run(nr_op_ctx *ctx);

nr_status nr_ew_cast_infer(nr_op_ctx *ctx);
nr_status nr_ew_cast_run(nr_op_ctx *ctx);

#endif
