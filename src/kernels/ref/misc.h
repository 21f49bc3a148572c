/* misc.h - private header of the reference "misc" operator family (ops_misc*.c):
 * the infer/run entry points each ops_misc_<group>.c file hands to the one table in
 * ops_misc.c, plus the few helpers they share. Nothing outside that family uses it.
 *
 * Key decision: the family is a grab bag (losses, sampling, windows, ...), so each
 * group keeps its own file and only exports the two functions per operator that the
 * table needs; no shared state. */
#ifndef NR_KERNELS_REF_MISC_H
#define NR_KERNELS_REF_MISC_H

#include "ir/op.h"

/* Input i must be present with a float dtype (or unknown dtype) when required. */
nr_status nr_misc_need_float(nr_op_ctx *ctx, int i, const char *what);
/* Product of dims[from..to). */
int64_t nr_misc_prod(const int64_t *dims, int from, int to);

/* ops_misc_grid.c: GridSample, AffineGrid */
nr_status nr_misc_gridsample_infer(nr_op_ctx *ctx);
nr_status nr_misc_gridsample_run(nr_op_ctx *ctx);
nr_status nr_misc_affinegrid_infer(nr_op_ctx *ctx);
nr_status nr_misc_affinegrid_run(nr_op_ctx *ctx);

/* ops_misc_rotary.c: RotaryEmbedding */
nr_status nr_misc_rotary_infer(nr_op_ctx *ctx);
nr_status nr_misc_rotary_run(nr_op_ctx *ctx);

/* ops_misc_simple.c: windows, CenterCropPad, BitCast, Det, TensorScatter */
nr_status nr_misc_window_infer(nr_op_ctx *ctx);
nr_status nr_misc_hann_run(nr_op_ctx *ctx);
nr_status nr_misc_hamming_run(nr_op_ctx *ctx);
nr_status nr_misc_blackman_run(nr_op_ctx *ctx);
nr_status nr_misc_ccp_infer(nr_op_ctx *ctx);
nr_status nr_misc_ccp_run(nr_op_ctx *ctx);
nr_status nr_misc_bitcast_infer(nr_op_ctx *ctx);
nr_status nr_misc_bitcast_run(nr_op_ctx *ctx);
nr_status nr_misc_det_infer(nr_op_ctx *ctx);
nr_status nr_misc_det_run(nr_op_ctx *ctx);

/* ops_misc_nms.c: NonMaxSuppression */
nr_status nr_misc_nms_infer(nr_op_ctx *ctx);
nr_status nr_misc_nms_run(nr_op_ctx *ctx);

nr_status nr_misc_tensorscatter_infer(nr_op_ctx *ctx);
nr_status nr_misc_tensorscatter_run(nr_op_ctx *ctx);

/* ops_misc_col2im.c: SwiGLU, Col2Im */
nr_status nr_misc_swiglu_infer(nr_op_ctx *ctx);
nr_status nr_misc_swiglu_run(nr_op_ctx *ctx);
nr_status nr_misc_col2im_infer(nr_op_ctx *ctx);
nr_status nr_misc_col2im_run(nr_op_ctx *ctx);

#endif
