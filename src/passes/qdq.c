/* qdq.c - the pass qdq: runs the quantized (QDQ) form of a pre-quantized model in int8.
 *
 * Quantization tools (ONNX Runtime's quantize_static among them) write a quantized
 * Conv as DequantizeLinear(QuantizeLinear(x, s, z), s, z) feeding a float Conv whose
 * weights are DequantizeLinear(w_int8); preparation folds the weight side into float
 * constants, which an int8 tactic re-quantizes exactly (per-channel symmetric scales
 * are what the tools write). For a node the route puts in int8 this pass removes the
 * Q -> DQ pair in front of it and records the pair's scale and zero point on the node
 * (nr_x_scale, nr_x_zero_point, on the unsigned grid); the int8 tactic then quantizes
 * x with exactly the model's parameters (nr_quant_act_params), so the pair's rounding
 * happens once, inside the kernel, and no calibration is needed.
 *
 * Key decision: no knob of its own. Whether a node runs the model's grid in int8 is
 * precision@NODE; at fp32 the pair stays and runs as written (simulated
 * quantization), which is the model's exact semantics. */
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A scalar constant float scale and an optional scalar constant 8-bit zero point
 * (input 1 and 2 of n), with no axis or block attributes. */
static bool scalar_params(const nr_graph *g, const nr_node *n, float *scale, int *zp,
                          nr_dtype *qtype) {
  int s = nr_pu_in(n, 1), z = nr_pu_in(n, 2);
  if (s < 0 || !nr_pu_is_const(g, s))
    return false;
  const nr_value *sv = &g->tensors[s].value;
  if (sv->dtype != NR_DTYPE_FLOAT || nr_value_count(sv) != 1)
    return false;
  *scale = *(const float *)sv->data;
  *zp = 0;
  *qtype = NR_DTYPE_UINT8;
  if (z >= 0) {
    const nr_value *zv = &g->tensors[z].value;
    if (!nr_pu_is_const(g, z) || nr_value_count(zv) != 1 ||
        (zv->dtype != NR_DTYPE_UINT8 && zv->dtype != NR_DTYPE_INT8))
      return false;
    *qtype = zv->dtype;
    *zp = zv->dtype == NR_DTYPE_UINT8 ? *(const uint8_t *)zv->data
                                      : *(const int8_t *)zv->data;
  }
  const nr_attr *bs = nr_node_attr(n, "block_size");
  return isfinite(*scale) && *scale > 0 && !(bs && bs->i);
}

/* Input 0 of node k comes from DQ(Q(x)) with one grid: returns x, else -1. */
static int qdq_source(const nr_graph *g, const nr_node *n, float *scale, int *zp) {
  const nr_node *dq = nr_pu_cproducer(g, nr_pu_in(n, 0));
  if (!dq || !nr_pu_is_op(dq, "DequantizeLinear"))
    return -1;
  const nr_node *q = nr_pu_cproducer(g, nr_pu_in(dq, 0));
  if (!q || !nr_pu_is_op(q, "QuantizeLinear"))
    return -1;
  float s1, s2;
  int z1, z2;
  nr_dtype t1, t2;
  if (!scalar_params(g, dq, &s1, &z1, &t1) || !scalar_params(g, q, &s2, &z2, &t2) ||
      s1 != s2 || z1 != z2 || t1 != t2)
    return -1;
  const nr_attr *sat = nr_node_attr(q, "saturate");
  if (sat && !sat->i)
    return -1;
  int x = nr_pu_in(q, 0);
  if (x < 0 || g->tensors[x].value.dtype != NR_DTYPE_FLOAT)
    return -1;
  *scale = s1;
  *zp = t1 == NR_DTYPE_INT8 ? z1 + 128 : z1; /* int8 grid shifted onto uint8's */
  return x;
}

static nr_status rewrite(nr_compile_ctx *c, int k, int x, float scale, int zp, bool *mark,
                         int *readers) {
  nr_graph *g = c->graph;
  nr_node *n = &g->nodes[k];
  int old = n->inputs[0];
  nr_status st = nr_pu_set_attr_float(g, k, "nr_x_scale", scale, c->err);
  if (!st)
    st = nr_pu_set_attr_int(g, k, "nr_x_zero_point", zp, c->err);
  if (st)
    return st;
  n = &g->nodes[k];
  n->inputs[0] = x;
  readers[old]--;
  readers[x]++;
  /* The DQ and then the Q go when nothing else reads them. */
  for (int t = old, hop = 0; hop < 2 && readers[t] == 0 && !nr_pu_is_output(g, t); hop++) {
    int p = g->tensors[t].producer;
    if (p < 0 || mark[p])
      break;
    mark[p] = true;
    int in = g->nodes[p].inputs[0];
    for (int i = 0; i < g->nodes[p].n_inputs; i++)
      if (g->nodes[p].inputs[i] >= 0)
        readers[g->nodes[p].inputs[i]]--;
    t = in;
  }
  return NR_OK;
}

static nr_status run_qdq(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  bool *mark = calloc((size_t)g->n_nodes + 1, sizeof *mark);
  int *readers = nr_pu_readers(g);
  nr_status st = mark && readers ? NR_OK : nr_errorf(c->err, NR_ERR_NOMEM, "out of memory");
  bool changed = false;
  for (int k = 0; !st && k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    float scale;
    int zp, x;
    if (mark[k] || nr_route_precision(c->route, n) != NR_PREC_INT8 ||
        (x = qdq_source(g, n, &scale, &zp)) < 0)
      continue;
    st = rewrite(c, k, x, scale, zp, mark, readers);
    changed = true;
  }
  if (!st && changed)
    st = nr_pu_remove_marked(g, mark, c->err);
  free(mark);
  free(readers);
  return st;
}

const nr_pass nr_pass_qdq = {"qdq", run_qdq};
