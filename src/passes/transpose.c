/* transpose.c - the pass transpose: removes Transposes that do nothing, cancels
 * pairs that compose to the identity, merges consecutive ones into one, and folds a
 * Transpose that swaps the two axes of a 2-D MatMul operand into a FusedGemm's
 * transA / transB (FusedMatMul has no transpose flag, so batched ones stay).
 *
 * Key decision: one scanner (scan) finds the patterns; the knob's applies() runs it
 * without editing, the pass runs it editing, until nothing changes (three Transposes
 * in a row merge in two rounds). Readers keep their tensors: a cancelled pair's
 * readers are pointed at the pair's input, a merged Transpose reads the first one's
 * input, and a Transpose left without readers is dropped. */
#include "ir/fused.h"
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Transpose n's permutation (default: reversed axes); false when the rank is unknown. */
static bool perm_of(const nr_graph *g, const nr_node *n, int64_t *perm, int *rank) {
  if (!nr_pu_is_op(n, "Transpose") || n->n_inputs != 1 || n->n_outputs != 1)
    return false;
  int r = g->tensors[n->inputs[0]].value.rank;
  size_t np;
  const int64_t *p = nr_attr_ints(n, "perm", &np);
  if (r < 0 || r > NR_MAX_RANK || (p && (int)np != r))
    return false;
  for (int i = 0; i < r; i++)
    perm[i] = p ? p[i] : r - 1 - i;
  *rank = r;
  return true;
}

static bool is_identity(const int64_t *perm, int rank) {
  for (int i = 0; i < rank; i++)
    if (perm[i] != i)
      return false;
  return true;
}

/* Points every node input reading `from` at `to`. */
static void replace_uses(nr_graph *g, const bool *dead, int from, int to) {
  for (int k = 0; k < g->n_nodes; k++)
    for (int i = 0; !dead[k] && i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] == from)
        g->nodes[k].inputs[i] = to;
}

typedef struct scan_ctx {
  nr_graph *g;
  bool *dead;  /* NULL: only look */
  bool *changed;
  nr_error *err;
} scan_ctx;

/* Transpose k whose result equals its input (itself identity, or undoing the
 * Transpose before it); rewires its readers. */
static bool try_cancel(scan_ctx *s, int k, const int64_t *perm, int rank) {
  nr_graph *g = s->g;
  const nr_node *n = &g->nodes[k];
  int src = n->inputs[0];
  int64_t p1[NR_MAX_RANK];
  int r1;
  const nr_node *prev = nr_pu_cproducer(g, src);
  if (!is_identity(perm, rank)) {
    if (!prev || !perm_of(g, prev, p1, &r1) || r1 != rank)
      return false;
    for (int i = 0; i < rank; i++)
      if (p1[perm[i]] != i)
        return false;
    src = prev->inputs[0];
  }
  if (nr_pu_is_output(g, n->outputs[0]))
    return false;
  if (s->dead) {
    replace_uses(g, s->dead, n->outputs[0], src);
    s->dead[k] = *s->changed = true;
  }
  return true;
}

/* Transpose k after another Transpose: reads the first one's input with the composed
 * permutation. */
static bool try_merge(scan_ctx *s, int k, const int64_t *perm, int rank) {
  nr_graph *g = s->g;
  nr_node *n = &g->nodes[k];
  int64_t p1[NR_MAX_RANK];
  int r1;
  const nr_node *prev = nr_pu_cproducer(g, n->inputs[0]);
  if (!prev || (s->dead && s->dead[prev - g->nodes]) || !perm_of(g, prev, p1, &r1) ||
      r1 != rank)
    return false;
  if (!s->dead)
    return true;
  int64_t composed[NR_MAX_RANK];
  for (int i = 0; i < rank; i++)
    composed[i] = p1[perm[i]];
  for (int a = 0; a < n->n_attrs; a++)
    if (!strcmp(n->attrs[a].name, "perm")) {
      memcpy(n->attrs[a].ints, composed, sizeof(int64_t) * (size_t)rank);
      n->inputs[0] = prev->inputs[0];
      *s->changed = true;
      return true;
    }
  nr_status st = nr_pu_set_attr_ints(g, k, "perm", rank, composed, s->err);
  if (!st) {
    g->nodes[k].inputs[0] = prev->inputs[0];
    *s->changed = true;
  }
  return !st;
}

/* Is tensor t a 2-D float Transpose output (the axes swapped)? Its input, or -1. */
static int swapped_2d(const nr_graph *g, const bool *dead, int t) {
  const nr_node *p = nr_pu_cproducer(g, t);
  int64_t perm[NR_MAX_RANK];
  int rank;
  if (!p || (dead && dead[p - g->nodes]) || !perm_of(g, p, perm, &rank) || rank != 2 ||
      perm[0] != 1 || g->tensors[t].value.dtype != NR_DTYPE_FLOAT)
    return -1;
  return p->inputs[0];
}

/* MatMul k on 2-D operands, one of them transposed: FusedGemm with transA/transB. */
static bool try_matmul(scan_ctx *s, int k) {
  nr_graph *g = s->g;
  const nr_node *n = &g->nodes[k];
  if (!nr_pu_is_op(n, "MatMul") || n->n_inputs != 2 ||
      g->tensors[n->inputs[0]].value.rank != 2 || g->tensors[n->inputs[1]].value.rank != 2)
    return false;
  int a = swapped_2d(g, s->dead, n->inputs[0]), b = swapped_2d(g, s->dead, n->inputs[1]);
  if (a < 0 && b < 0)
    return false;
  if (!s->dead)
    return true;
  int ins[2] = {a >= 0 ? a : n->inputs[0], b >= 0 ? b : n->inputs[1]};
  char *name = strdup(n->name);
  nr_status st = name ? nr_pu_import_nnroute(g, s->err)
                      : nr_errorf(s->err, NR_ERR_NOMEM, "out of memory");
  int out = g->nodes[k].outputs[0];
  int f = st ? -1 : nr_pu_add_node(g, name, "FusedGemm", NR_DOMAIN, 2, ins, 1, &out);
  free(name);
  if (!st && f < 0)
    st = nr_errorf(s->err, NR_ERR_NOMEM, "out of memory folding a Transpose");
  if (!st)
    st = nr_pu_set_attr_int(g, f, "transA", a >= 0, s->err);
  if (!st)
    st = nr_pu_set_attr_int(g, f, "transB", b >= 0, s->err);
  s->dead[k] = *s->changed = true;
  return !st;
}

/* One sweep; returns whether any pattern was seen. */
static bool scan(scan_ctx *s) {
  bool seen = false;
  int n0 = s->g->n_nodes;
  for (int k = 0; k < n0; k++) {
    int64_t perm[NR_MAX_RANK];
    int rank;
    if (s->dead && s->dead[k])
      continue;
    if (try_matmul(s, k)) {
      seen = true;
      continue;
    }
    if (!perm_of(s->g, &s->g->nodes[k], perm, &rank))
      continue;
    seen |= try_cancel(s, k, perm, rank) || try_merge(s, k, perm, rank);
  }
  return seen;
}

/* Marks Transposes nobody reads any more. */
static nr_status drop_unread(nr_graph *g, bool *dead) {
  int *readers = nr_pu_readers(g);
  if (!readers)
    return NR_ERR_NOMEM;
  for (int k = 0; k < g->n_nodes; k++)
    if (nr_pu_is_op(&g->nodes[k], "Transpose") && !readers[g->nodes[k].outputs[0]])
      dead[k] = true;
  free(readers);
  return NR_OK;
}

static nr_status run_transpose(nr_compile_ctx *c) {
  if (!nr_route_is(c->route, NR_KNOB_TRANSPOSE_ELIM, NULL, "on"))
    return NR_OK;
  nr_status st = NR_OK;
  for (bool changed = true; changed && !st;) {
    changed = false;
    bool *dead = calloc((size_t)(2 * c->graph->n_nodes + 8), sizeof(bool));
    if (!dead)
      return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory in transpose");
    scan_ctx s = {c->graph, dead, &changed, c->err};
    scan(&s);
    /* Removing dead nodes first frees the readers of Transposes they read. */
    if (changed && !(st = nr_pu_remove_marked(c->graph, dead, c->err))) {
      memset(dead, 0, sizeof(bool) * (size_t)c->graph->n_nodes);
      if ((st = drop_unread(c->graph, dead)) == NR_ERR_NOMEM)
        nr_errorf(c->err, st, "out of memory in transpose");
      if (!st)
        st = nr_pu_remove_marked(c->graph, dead, c->err);
    }
    free(dead);
  }
  return st;
}

const nr_pass nr_pass_transpose = {"transpose", run_transpose};

static bool transpose_applies(const nr_graph *g, const nr_node *n) {
  bool changed = false;
  scan_ctx s = {(nr_graph *)g, NULL, &changed, NULL};
  return scan(&s);
}

const nr_knob_def nr_knobs_transpose[] = {
    [NR_KNOB_ROW(NR_KNOB_TRANSPOSE_ELIM)] =
    {"transpose.elim", "off|on", "on", NR_KNOB_GLOBAL, 0, 0,
     "cancel and merge Transposes; fold 2-D MatMul operand transposes into FusedGemm",
     transpose_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_TRANSPOSE_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_transpose, NR_KNOB_TRANSPOSE_END);
