/* fate.c - whether a node of the prepared graph survives the default graph passes
 * (contract: fate.h).
 *
 * Key decision: membership in a recognized pattern is probed, not re-matched. The
 * recognize knobs' applies() answer "does a pattern anchored here match?"; a node
 * belongs to that pattern exactly when the match fails once the node is replaced by
 * an op no matcher accepts. The probe edits a shallow copy of the node array (node
 * structs share their arrays with g), so g is never touched and nothing is cloned.
 * Candidate anchors are the nodes within a few edges of n: patterns are local.
 * Elementwise chains follow eltwise_fuse's links (a producer whose only reader is the
 * next node, first such input wins) back to the chain start, where the eltwise.fuse
 * knob says whether the default route fuses it. */
#include "passes/fate.h"
#include "passes/pass_knobs.h"

#include "passes/pass_util.h"
#include "plan/knob.h"

#include <stdlib.h>
#include <string.h>

#define NEAR 10     /* edges from n to a pattern anchor that may contain it (a
                       * decomposed LayerNorm spans 8 from ReduceMean to the bias Add) */
#define MAX_NEAR 128 /* nodes examined around n */
#define CHAIN_MAX 64

static int idx_of(const nr_graph *g, const nr_node *n) { return (int)(n - g->nodes); }

/* Readers of t as eltwise_fuse counts them: node inputs plus graph outputs. */
static int readers_of(const nr_graph *g, int t) {
  int c = nr_pu_reader_nodes(g, NULL, t, NULL, 0);
  for (int i = 0; i < g->n_outputs; i++)
    c += g->outputs[i] == t;
  return c;
}

/* Nodes within NEAR edges of node k (both directions), k first. */
static int near_nodes(const nr_graph *g, int k, int *out) {
  int n = 0, head = 0, depth[MAX_NEAR];
  out[n] = k, depth[n++] = 0;
  while (head < n) {
    int cur = out[head], d = depth[head++];
    if (d == NEAR)
      continue;
    const nr_node *nd = &g->nodes[cur];
    int cand[32], nc = 0;
    for (int i = 0; i < nd->n_inputs && nc < 16; i++)
      if (nd->inputs[i] >= 0 && g->tensors[nd->inputs[i]].producer >= 0)
        cand[nc++] = g->tensors[nd->inputs[i]].producer;
    for (int o = 0; o < nd->n_outputs && nc < 24; o++)
      if (nd->outputs[o] >= 0) {
        int r[8], m = nr_pu_reader_nodes(g, NULL, nd->outputs[o], r, 8);
        for (int i = 0; i < m && i < 8 && nc < 32; i++)
          cand[nc++] = r[i];
      }
    for (int c = 0; c < nc && n < MAX_NEAR; c++) {
      bool seen = false;
      for (int i = 0; i < n && !seen; i++)
        seen = out[i] == cand[c];
      if (!seen)
        out[n] = cand[c], depth[n++] = d + 1;
    }
  }
  return n;
}

static bool probe_recognized(const nr_graph *g, const nr_node *n);

/* An optional tail of a pattern (LayerNorm's gamma Mul and beta Add) does not stop the
 * pattern matching when probed away, so the probe cannot see it: a Mul or Add with a
 * constant operand whose other operand comes from a recognized node read only by it is
 * part of that pattern too. */
static bool recognized_tail(const nr_graph *g, const nr_node *n, int depth) {
  if (depth > 2 || n->domain[0] || n->n_inputs != 2 ||
      (strcmp(n->op_type, "Mul") && strcmp(n->op_type, "Add")))
    return false;
  for (int i = 0; i < 2; i++) {
    int x = n->inputs[i], c = n->inputs[1 - i];
    if (x < 0 || c < 0 || !(g->tensors[c].flags & NR_TENSOR_CONST))
      continue;
    int p = g->tensors[x].producer, readers[2];
    if (p < 0 || nr_pu_reader_nodes(g, NULL, x, readers, 2) != 1)
      continue;
    if (probe_recognized(g, &g->nodes[p]) || recognized_tail(g, &g->nodes[p], depth + 1))
      return true;
  }
  return false;
}

bool nr_fate_recognized(const nr_graph *g, const nr_node *n) {
  return probe_recognized(g, n) || recognized_tail(g, n, 0);
}

static bool probe_recognized(const nr_graph *g, const nr_node *n) {
  static const nr_knob_id knobs[] = {NR_KNOB_RECOGNIZE_GELU, NR_KNOB_RECOGNIZE_LAYERNORM,
                                     NR_KNOB_RECOGNIZE_ATTENTION,
                                     NR_KNOB_RECOGNIZE_ATTENTION_HEADS};
  const nr_knob_def *defs[4];
  for (int i = 0; i < 4; i++)
    defs[i] = nr_knob_def_of(knobs[i]);
  int me = idx_of(g, n), near[MAX_NEAR], nn = near_nodes(g, me, near);
  nr_node *copy = NULL;
  nr_graph probe = *g;
  bool hit = false;
  for (int a = 0; a < nn && !hit; a++)
    for (int i = 0; i < 4 && !hit; i++) {
      if (!defs[i] || !defs[i]->applies || !defs[i]->applies(g, &g->nodes[near[a]]))
        continue;
      if (!copy) {
        copy = malloc(sizeof *copy * (size_t)(g->n_nodes ? g->n_nodes : 1));
        if (!copy)
          return false;
        memcpy(copy, g->nodes, sizeof *copy * (size_t)g->n_nodes);
        copy[me].op_type = (char *)"nnroute_fate_probe";
        probe.nodes = copy;
      }
      hit = !defs[i]->applies(&probe, &copy[near[a]]);
    }
  free(copy);
  return hit;
}

/* ---- elementwise chains ------------------------------------------------------------ */

static bool in_list(const char *const *list, const char *op) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(list[i], op))
      return true;
  return false;
}

/* The ops eltwise_fuse chains (fuse_eltwise.c's lists), on float32. */
static bool chain_op(const nr_graph *g, const nr_node *n) {
  static const char *const ops[] = {
      "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Erf", "Sqrt", "Neg", "Abs", "Reciprocal",
      "Floor", "Ceil", "Softplus", "HardSwish", "LeakyRelu", "Elu", "HardSigmoid", "Clip",
      "Gelu", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu", NULL};
  if (n->domain[0] || n->n_outputs != 1 || n->outputs[0] < 0 || !in_list(ops, n->op_type))
    return false;
  return g->tensors[n->outputs[0]].value.dtype == NR_DTYPE_FLOAT;
}

static bool usable(const nr_graph *g, const nr_node *n) {
  return chain_op(g, n) && !nr_fuse_act_absorbs(g, n);
}

/* The producer continuing the chain into n (eltwise_fuse's pred_input), or -1. */
static int chain_pred(const nr_graph *g, const nr_node *n) {
  for (int i = 0; i < n->n_inputs; i++) {
    int t = n->inputs[i];
    if (t < 0 || g->tensors[t].producer < 0 || (i == 1 && !strcmp(n->op_type, "PRelu")))
      continue;
    if (readers_of(g, t) == 1 && usable(g, &g->nodes[g->tensors[t].producer]))
      return g->tensors[t].producer;
  }
  return -1;
}

bool nr_fate_chained(const nr_graph *g, const nr_node *n) {
  const nr_knob_def *fuse = nr_knob_def_of(NR_KNOB_ELTWISE_FUSE);
  if (!fuse || !fuse->applies || !usable(g, n))
    return false;
  int start = idx_of(g, n);
  for (int hops = 0, p; hops < CHAIN_MAX && (p = chain_pred(g, &g->nodes[start])) >= 0;
       hops++)
    start = p;
  return fuse->applies(g, &g->nodes[start]);
}

bool nr_fate_survives(const nr_graph *g, const nr_node *n) {
  return !nr_fuse_act_absorbs(g, n) && !nr_fate_chained(g, n) &&
         !nr_fate_recognized(g, n);
}

int64_t nr_fate_out_count(const nr_graph *g, const nr_node *n) {
  if (n->n_outputs < 1 || n->outputs[0] < 0)
    return -1;
  const nr_value *v = &g->tensors[n->outputs[0]].value;
  int64_t c = 1;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] < 0)
      return -1;
    c *= v->dims[d];
  }
  return v->rank < 0 ? -1 : c;
}
