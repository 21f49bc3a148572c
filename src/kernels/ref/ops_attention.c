/* ops_attention.c - reference Attention (opset 23/24); rows join nr_ref_ops_norm[]. */
#include "kernels/ref/normreduce.h"

nr_status nr_ref_attention_infer(nr_op_ctx *ctx) {
  return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "Attention is not implemented yet");
}
nr_status nr_ref_attention_run(nr_op_ctx *ctx) { return nr_ref_attention_infer(ctx); }
