/* fuse_eltwise.c - the pass eltwise_fuse: a chain of elementwise operators, each
 * reading the previous one's output as its running value and being that output's
 * only reader, becomes one nnroute.EltwiseChain node (encoding in ops_fused.c), so
 * the chain reads and writes memory once instead of once per op.
 *
 * Key decision: chains are defined by links, not searched: node m's predecessor is
 * the first of its inputs produced by a chainable node that m alone reads. Each node
 * then has at most one predecessor and one successor, chains are disjoint paths, and
 * the chain start names the knob instance. The knob space is built on the prepared
 * graph, where fuse_act has not run yet, so applies() links only nodes fuse_act does
 * not swallow by default (nr_fuse_act_absorbs): the chains it lists are the ones this
 * pass meets under the default route.
 *
 * A fused chain runs on the reference tactic, one element at a time, unless a fast
 * tactic takes it: slower than its parts. So each candidate node is probed
 * (nr_node_has_fast_tactic, for the build's device) before the pass keeps it; a chain
 * no fast tactic runs is shortened from the end until one does, and what stays
 * unfused runs on its own tactics. A lone elementwise node that no fast tactic of its
 * own runs becomes a one-step chain when the chain's fast tactic runs it. */
#include "ir/fused.h"
#include "passes/fate.h"
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_MAX_INPUTS 8 /* NR_BCAST_MAX of the reference kernel */
#define CHAIN_MAX_STEPS 64

static const char *const unary_ops[] = {
    "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Erf", "Sqrt", "Neg", "Abs", "Reciprocal",
    "Floor", "Ceil", "Softplus", "HardSwish", "LeakyRelu", "Elu", "HardSigmoid", "Clip",
    "Gelu", NULL,
};
static const char *const binary_ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min",
                                         "PRelu", NULL};

static bool in_list(const char *const *list, const char *op) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(list[i], op))
      return true;
  return false;
}

static bool is_f32(const nr_graph *g, int t) {
  return t >= 0 && g->tensors[t].value.dtype == NR_DTYPE_FLOAT &&
         g->tensors[t].value.rank >= 0;
}

/* Clip's bounds when constant (attributes before opset 11). */
static bool clip_params(const nr_graph *g, const nr_node *n, float *p) {
  p[0] = -FLT_MAX;
  p[1] = FLT_MAX;
  if (n->opset < 11) {
    p[0] = nr_attr_float(n, "min", -FLT_MAX);
    p[1] = nr_attr_float(n, "max", FLT_MAX);
    return true;
  }
  int lo = nr_pu_in(n, 1), hi = nr_pu_in(n, 2);
  return (lo < 0 || nr_pu_const_scalar(g, lo, &p[0])) &&
         (hi < 0 || nr_pu_const_scalar(g, hi, &p[1]));
}

/* The step parameters of a chainable node (ops_fused.c's params). */
static bool step_params(const nr_graph *g, const nr_node *n, float *p) {
  p[0] = p[1] = 0;
  if (!strcmp(n->op_type, "Clip"))
    return clip_params(g, n, p);
  if (!strcmp(n->op_type, "LeakyRelu"))
    p[0] = nr_attr_float(n, "alpha", 0.01f);
  else if (!strcmp(n->op_type, "Elu"))
    p[0] = nr_attr_float(n, "alpha", 1.0f);
  else if (!strcmp(n->op_type, "HardSigmoid")) {
    p[0] = nr_attr_float(n, "alpha", 0.2f);
    p[1] = nr_attr_float(n, "beta", 0.5f);
  } else if (!strcmp(n->op_type, "Gelu"))
    p[0] = !strcmp(nr_attr_string(n, "approximate", "none"), "tanh");
  return true;
}

/* An ai.onnx elementwise op the chain kernel evaluates, on float32 data. */
static bool chainable(const nr_graph *g, const nr_node *n) {
  float p[2];
  bool onnx = !n->domain || !*n->domain;
  if (!onnx || n->n_outputs != 1 || !is_f32(g, n->outputs[0]))
    return false;
  bool unary = in_list(unary_ops, n->op_type), binary = in_list(binary_ops, n->op_type);
  if (!(unary || binary) || !is_f32(g, nr_pu_in(n, 0)))
    return false;
  if (binary)
    return n->n_inputs == 2 && is_f32(g, n->inputs[1]);
  if (!strcmp(n->op_type, "Clip"))
    return clip_params(g, n, p);
  return n->n_inputs == 1 && step_params(g, n, p);
}

/* ---- links ---------------------------------------------------------------------- */

typedef struct chain_ctx {
  const nr_graph *g;
  const int *readers;
  const bool *dead;    /* NULL in applies() */
  bool skip_absorbed;  /* applies(): ignore what fuse_act takes by default */
} chain_ctx;

static bool usable(const chain_ctx *c, int k) {
  if (c->dead && c->dead[k])
    return false;
  if (!chainable(c->g, &c->g->nodes[k]))
    return false;
  return !c->skip_absorbed || !nr_fuse_act_absorbs(c->g, &c->g->nodes[k]);
}

/* The input index of node k that continues a chain from its producer, or -1. */
static int pred_input(const chain_ctx *c, int k) {
  const nr_node *n = &c->g->nodes[k];
  for (int i = 0; i < n->n_inputs; i++) {
    int t = n->inputs[i];
    const nr_node *p = t >= 0 ? nr_pu_cproducer(c->g, t) : NULL;
    if (!p || c->readers[t] != 1 || !usable(c, c->g->tensors[t].producer))
      continue;
    if (i == 1 && !strcmp(n->op_type, "PRelu"))
      continue; /* the slope is not a running value */
    return i;
  }
  return -1;
}

/* The node continuing the chain after node k, or -1. */
static int succ_node(const chain_ctx *c, int k) {
  int r[2], t = c->g->nodes[k].outputs[0];
  if (c->readers[t] != 1 || nr_pu_reader_nodes(c->g, c->dead, t, r, 2) != 1 ||
      !usable(c, r[0]))
    return -1;
  int i = pred_input(c, r[0]);
  return i >= 0 && c->g->nodes[r[0]].inputs[i] == t ? r[0] : -1;
}

/* Fills the chain starting at k (k must have no predecessor); returns its length. */
static int chain_from(const chain_ctx *c, int k, int *nodes) {
  int n = 0;
  if (!usable(c, k) || pred_input(c, k) >= 0)
    return 0;
  for (int s = k; s >= 0 && n < CHAIN_MAX_STEPS; s = succ_node(c, s))
    nodes[n++] = s;
  return n;
}

/* ---- rewriting -------------------------------------------------------------------- */

typedef struct chain_node {
  int ins[CHAIN_MAX_INPUTS], n_ins;
  const char *ops[CHAIN_MAX_STEPS];
  int64_t operand[CHAIN_MAX_STEPS], swapped[CHAIN_MAX_STEPS];
  float params[2 * CHAIN_MAX_STEPS];
  int n_steps;
} chain_node;

static int operand_slot(chain_node *e, int t) {
  for (int i = 0; i < e->n_ins; i++)
    if (e->ins[i] == t)
      return i;
  if (e->n_ins == CHAIN_MAX_INPUTS)
    return -1;
  e->ins[e->n_ins] = t;
  return e->n_ins++;
}

/* Adds node k as a step whose running value is tensor run; false when out of slots. */
static bool add_step(const nr_graph *g, chain_node *e, int k, int run) {
  const nr_node *n = &g->nodes[k];
  int s = e->n_steps;
  e->ops[s] = n->op_type;
  e->operand[s] = -1;
  e->swapped[s] = 0;
  step_params(g, n, &e->params[2 * s]);
  if (in_list(binary_ops, n->op_type)) {
    bool sw = n->inputs[0] != run;
    int slot = operand_slot(e, n->inputs[sw ? 0 : 1]);
    if (slot < 0)
      return false;
    e->operand[s] = slot;
    e->swapped[s] = sw;
  }
  e->n_steps++;
  return true;
}

/* Encodes nodes[0..n) with running input run (X0); returns how many steps fit (the
 * rest start a new chain). */
static int encode(const nr_graph *g, const int *nodes, int n, int run, chain_node *e) {
  memset(e, 0, sizeof *e);
  e->ins[e->n_ins++] = run;
  int k = 0;
  for (; k < n && add_step(g, e, nodes[k], run); k++)
    run = g->nodes[nodes[k]].outputs[0];
  return k;
}

/* Appends the EltwiseChain node of e (steps from nodes[]); returns its index, or -1
 * with *st set on failure. */
static int emit(nr_graph *g, const int *nodes, const chain_node *e, nr_status *st,
                nr_error *err) {
  int last = nodes[e->n_steps - 1];
  int out = g->nodes[last].outputs[0];
  char *name = strdup(g->nodes[nodes[0]].name);
  int k = name ? nr_pu_add_node(g, name, "EltwiseChain", NR_DOMAIN, e->n_ins, e->ins, 1,
                                &out) : -1;
  free(name);
  if (k < 0) {
    *st = nr_errorf(err, NR_ERR_NOMEM, "out of memory fusing an elementwise chain");
    return -1;
  }
  *st = nr_pu_set_attr_strings(g, k, "ops", e->n_steps, e->ops, err);
  if (!*st)
    *st = nr_pu_set_attr_ints(g, k, "operand", e->n_steps, e->operand, err);
  if (!*st)
    *st = nr_pu_set_attr_ints(g, k, "swapped", e->n_steps, e->swapped, err);
  if (!*st)
    *st = nr_pu_set_attr_floats(g, k, "params", 2 * e->n_steps, e->params, err);
  return k;
}

/* Removes node k, the last one, again. */
static void unemit(nr_graph *g, int k) {
  nr_node_free(&g->nodes[k]);
  g->n_nodes--;
}

/* Fuses the longest prefix (at least two nodes) of nodes[0..n) that fits the
 * kernel's input limit and that a fast tactic runs; returns its length, 0 when none
 * does. */
static int fuse_prefix(nr_compile_ctx *c, const int *nodes, int n, int run, bool *dead,
                       nr_status *st) {
  nr_graph *g = c->graph;
  chain_node e;
  for (int len = encode(g, nodes, n, run, &e); len >= 2; len--) {
    encode(g, nodes, len, run, &e);
    if ((*st = nr_pu_import_nnroute(g, c->err)))
      return 0;
    int k = emit(g, nodes, &e, st, c->err);
    if (k >= 0 && !*st && nr_node_has_fast_tactic(g, &g->nodes[k], c->device)) {
      for (int i = 0; i < len; i++)
        dead[nodes[i]] = true;
      return len;
    }
    if (k >= 0)
      unemit(g, k);
    if (*st)
      return 0;
  }
  return 0;
}

/* Fuses nodes[0..n) in pieces that fit the kernel's input limit and run on a fast
 * tactic. */
static nr_status fuse_chain(nr_compile_ctx *c, const int *nodes, int n, int run, bool *dead,
                            bool *changed) {
  while (n >= 2) {
    nr_status st = NR_OK;
    int used = fuse_prefix(c, nodes, n, run, dead, &st);
    if (st)
      return st;
    *changed |= used > 0;
    used = used < 1 ? 1 : used;
    run = c->graph->nodes[nodes[used - 1]].outputs[0];
    nodes += used;
    n -= used;
  }
  return NR_OK;
}

/* A lone elementwise node that no fast tactic of its own runs (Pow by a tensor or a
 * constant, Max, Min, PRelu, Log, Floor, Softplus, ...) becomes a one-step chain when
 * the chain's fast tactic runs that: the running value is the input of the output's
 * shape. Not a fusion choice, so no knob. */
static nr_status wrap_single(nr_compile_ctx *c, int k, bool *dead, bool *changed) {
  nr_graph *g = c->graph;
  if (nr_node_has_fast_tactic(g, &g->nodes[k], c->device))
    return NR_OK;
  const nr_node *n = &g->nodes[k];
  const nr_value *y = &g->tensors[n->outputs[0]].value;
  int run = -1;
  for (int i = 0; i < n->n_inputs && i < 2 && run < 0; i++) {
    const nr_value *x = &g->tensors[n->inputs[i]].value;
    if (x->rank == y->rank && !memcmp(x->dims, y->dims, (size_t)y->rank * sizeof y->dims[0]))
      run = n->inputs[i];
  }
  if (run < 0)
    return NR_OK;
  chain_node e;
  nr_status st = NR_OK;
  if (encode(g, &k, 1, run, &e) != 1 || (st = nr_pu_import_nnroute(g, c->err)))
    return st;
  int m = emit(g, &k, &e, &st, c->err);
  if (m >= 0 && !st && nr_node_has_fast_tactic(g, &g->nodes[m], c->device)) {
    dead[k] = true;
    *changed = true;
    return NR_OK;
  }
  if (m >= 0)
    unemit(g, m);
  return st;
}

/* The chain from its first node that has a knob instance; fused when it says on. */
static nr_status visit(nr_compile_ctx *c, const chain_ctx *cc, int k, bool *dead,
                       bool *changed) {
  int nodes[CHAIN_MAX_STEPS];
  int n = chain_from(cc, k, nodes), first = 0;
  while (first < n && !nr_route_get(c->route, NR_KNOB_ELTWISE_FUSE, &c->graph->nodes[nodes[first]]))
    first++;
  if (n - first < 2 ||
      !nr_route_is(c->route, NR_KNOB_ELTWISE_FUSE, &c->graph->nodes[nodes[first]], "on"))
    return NR_OK;
  const nr_graph *g = c->graph;
  int run = first ? g->nodes[nodes[first - 1]].outputs[0] : g->nodes[nodes[0]].inputs[0];
  return fuse_chain(c, nodes + first, n - first, run, dead, changed);
}

static nr_status run_eltwise_fuse(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  int n0 = g->n_nodes;
  int *readers = nr_pu_readers(g);
  bool *dead = calloc((size_t)(2 * n0 + 8), sizeof(bool));
  nr_status st = readers && dead ? NR_OK
                                 : nr_errorf(c->err, NR_ERR_NOMEM, "out of memory in eltwise_fuse");
  chain_ctx cc = {g, readers, dead, false};
  bool changed = false;
  for (int k = 0; !st && k < n0; k++)
    if (!dead[k])
      st = visit(c, &cc, k, dead, &changed);
  for (int k = 0; !st && k < n0; k++)
    if (!dead[k] && chainable(g, &g->nodes[k]))
      st = wrap_single(c, k, dead, &changed);
  if (!st && changed)
    st = nr_pu_remove_marked(g, dead, c->err);
  free(readers);
  free(dead);
  return st;
}

const nr_pass nr_pass_eltwise_fuse = {"eltwise_fuse", run_eltwise_fuse};

/* ---- knob ------------------------------------------------------------------------- */

/* Listed where a chain of two or more survives fuse_act and recognize at their
 * defaults. */
static bool eltwise_applies(const nr_graph *g, const nr_node *n) {
  int *readers = nr_pu_readers(g);
  int nodes[CHAIN_MAX_STEPS];
  chain_ctx cc = {g, readers, NULL, true};
  int len = readers ? chain_from(&cc, (int)(n - g->nodes), nodes) : 0;
  for (int i = 0; i < len; i++)
    if (nr_fate_recognized(g, &g->nodes[nodes[i]]))
      len = 0;
  free(readers);
  return len >= 2;
}

const nr_knob_def nr_knobs_eltwise_fuse[] = {
    [NR_KNOB_ROW(NR_KNOB_ELTWISE_FUSE)] =
    {"eltwise.fuse", "off|on", "on", NR_KNOB_NODE, 0, 0,
     "evaluate the elementwise chain starting at this node as one EltwiseChain loop",
     eltwise_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_ELTWISE_FUSE_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_eltwise_fuse, NR_KNOB_ELTWISE_FUSE_END);
