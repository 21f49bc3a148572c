/* precision.c - the per-node precision knob and the calibration-method knob.
 *
 * precision@<node> picks the numeric precision of a Conv, Gemm or MatMul whose
 * weights are constant: fp32 (the default), bf16 or fp16 storage with fp32
 * accumulation, or int8 (per-output-channel weights, per-tensor activations, int32
 * accumulation). The select pass keeps only tactics whose `precision` field equals
 * the node's value, so a precision is offered exactly by writing tactics for it; a
 * node with no tactic at the requested precision fails to build with a message naming
 * both. Reduced precision has no documented error bound (NR_KNOB_PRECISION): whether
 * a route is acceptable is the user's tolerance, measured by the tuner. */
#include "compiler/knob.h"
#include "compiler/plan.h"
#include "kernels/cpu/norm/fate.h"
#include "passes/pass_util.h"

#include <string.h>

static const char *const prec_names[NR_PREC_COUNT] = {"fp32", "bf16", "fp16", "int8"};

const char *nr_precision_name(nr_precision p) {
  return (unsigned)p < NR_PREC_COUNT ? prec_names[p] : "?";
}

/* Conv, Gemm or MatMul of float tensors with a constant weight operand (input 1) that
 * keeps a step of its own at the default route. */
static bool precision_applies(const nr_graph *g, const nr_node *n) {
  if (!nr_pu_is_op(n, "Conv") && !nr_pu_is_op(n, "Gemm") && !nr_pu_is_op(n, "MatMul"))
    return false;
  int w = nr_pu_in(n, 1), y = n->n_outputs > 0 ? n->outputs[0] : -1;
  if (w < 0 || y < 0 || !nr_pu_is_const(g, w) || g->tensors[y].value.dtype != NR_DTYPE_FLOAT)
    return false;
  return !nr_fate_recognized(g, n) && !nr_horizontal_absorbs(g, n);
}

const nr_knob_def nr_knobs_precision[] = {
    {"precision", "fp32|bf16|fp16|int8", "fp32", NR_KNOB_NODE,
     NR_KNOB_ACCURACY | NR_KNOB_PRECISION, 0.0,
     "numeric precision of a Conv/Gemm/MatMul with constant weights (int8 needs "
     "calibration data)",
     precision_applies, NULL},
    {"quant.calibration", "minmax|percentile|entropy", "entropy", NR_KNOB_GLOBAL,
     NR_KNOB_ACCURACY | NR_KNOB_PRECISION, 0.0,
     "how int8 activation ranges come from calibration statistics", NULL, NULL},
    {0},
};

nr_precision nr_route_precision(const nr_route *r, const nr_node *n) {
  const char *v = n ? nr_route_get(r, "precision", n) : NULL;
  for (int p = 0; v && p < NR_PREC_COUNT; p++)
    if (!strcmp(v, prec_names[p]))
      return (nr_precision)p;
  return NR_PREC_FP32;
}
