/* test_passes_recognize.c - the recognize and horizontal passes: every pattern
 * variant on small hand-built graphs, and the real exported models.
 *
 * Each check builds the knob space of the graph, then for every instance of the
 * pass's knobs and every value it lists runs the pass along "-<id>=<value>" on a
 * clone, and compares the clone with the original through the reference executor:
 * equal within 1e-5 relative L2 for exact values, within the knob's documented bound
 * for accuracy values. It also checks that the values of one instance build graphs
 * that differ from each other (no dead values) and that every value other than "off"
 * changes the graph. */
#include "io/tensor_io.h"
#include "kernels/ref/executor.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"
#include "graph_build.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const nr_pass nr_pass_recognize, nr_pass_horizontal;
nr_graph *nr_model_graph(nr_model *m);

#define EXACT_BOUND 1e-5

/* ---- building small graphs ------------------------------------------------------ */

static nr_graph *tg_new(int opset) {
  nr_graph *g = tg_graph(opset);
  g->name = strdup("test");
  return g;
}

/* A constant filled from seed (data NULL) or from data. */
static int tg_const(nr_graph *g, const char *name, int rank, const int64_t *dims,
                    const float *data, unsigned seed) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  nr_value *v = &g->tensors[t].value;
  nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL);
  float *d = v->data;
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < nr_value_count(v); i++)
    d[i] = data ? data[i] : (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  return t;
}

static int tg_scalar(nr_graph *g, const char *name, float x) {
  return tg_const(g, name, 0, NULL, &x, 0);
}

/* Adds node `op` named name reading ins, writing a new tensor named after the node. */

#define NODE(g, op, name, ...)                                                         \
  tg_node(g, op, name, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)),              \
          (int[]){__VA_ARGS__})
#define LAST(g) ((g)->n_nodes - 1)

/* Random inputs for g (owned values; free with free_inputs). */
static nr_value *random_inputs(const nr_graph *g, unsigned seed) {
  nr_rng rng = nr_rng_make(seed);
  nr_value *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  for (int i = 0; i < g->n_inputs; i++) {
    const nr_value *d = &g->tensors[g->inputs[i]].value;
    nr_value_alloc(&in[i], d->dtype, d->rank, d->dims, NULL);
    float *x = in[i].data;
    for (int64_t j = 0; j < nr_value_count(&in[i]); j++)
      x[j] = 2.0f * ((float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f);
  }
  return in;
}

/* ---- running a pass along a route ----------------------------------------------- */

typedef struct subject {
  nr_graph *g;
  nr_value *inputs;
  nr_value *ref_out; /* outputs of g, computed once */
  nr_knob_space space;
  const nr_pass *pass;
  bool run_all;      /* execute every instance's values (small graphs) */
} subject;

/* A clone of s->g rewritten by the pass along route text; NULL on failure. */
static nr_graph *rewrite(nr_test_state *t, const subject *s, const char *text) {
  nr_error err = {0};
  nr_graph *c = NULL;
  nr_route r = {0};
  nr_status st = nr_graph_clone(s->g, NULL, &c, &err);
  if (!st)
    st = nr_route_init(&r, &s->space, &err);
  if (!st)
    st = nr_route_parse(&r, text, &err);
  nr_compile_ctx ctx = {.graph = c, .route = &r, .threads = 1, .err = &err};
  if (!st)
    st = s->pass->run(&ctx);
  if (!st)
    st = nr_graph_infer(c, &err);
  nr_route_free(&r);
  CHECK(!st, "%s along '%s': %s", s->pass->name, text, err.message);
  if (st) {
    nr_graph_destroy(c);
    return NULL;
  }
  return c;
}

static double rel_l2(const nr_value *a, const nr_value *b) {
  double num = 0, den = 0;
  int64_t n = nr_value_count(a);
  if (n != nr_value_count(b) || a->dtype != NR_DTYPE_FLOAT || b->dtype != NR_DTYPE_FLOAT)
    return INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
    num += (x - y) * (x - y);
    den += x * x;
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* Largest relative L2 error of c's outputs against the reference outputs. */
static double compare(nr_test_state *t, const subject *s, const nr_graph *c) {
  nr_error err = {0};
  nr_value *out = calloc((size_t)c->n_outputs + 1, sizeof *out);
  nr_status st = nr_ref_exec(c, s->inputs, out, &err);
  CHECK(!st, "running the rewritten graph: %s", err.message);
  double worst = st ? INFINITY : 0;
  for (int i = 0; !st && i < c->n_outputs; i++) {
    double e = rel_l2(&s->ref_out[i], &out[i]);
    worst = e > worst ? e : worst;
  }
  free_values(out, c->n_outputs);
  return worst;
}

/* The node list as text: op types, names and scalar attributes in order. */
static char *signature(const nr_graph *g) {
  size_t cap = 64, len = 0;
  char *s = calloc(cap, 1);
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    char item[1024];
    int w = snprintf(item, sizeof item, "%s:%s", n->op_type, n->name);
    for (int a = 0; a < n->n_attrs && w < 900; a++) {
      const nr_attr *at = &n->attrs[a];
      w += snprintf(item + w, sizeof item - (size_t)w, " %s=%lld/%g/%.40s", at->name,
                    (long long)at->i, (double)at->f, at->s ? at->s : "");
    }
    size_t need = strlen(item) + 2;
    if (len + need >= cap) {
      cap = 2 * (len + need);
      s = realloc(s, cap);
    }
    len += (size_t)sprintf(s + len, "%s;", item);
  }
  return s;
}

static bool setup(nr_test_state *t, subject *s, nr_graph *g, const nr_pass *pass,
                  nr_value *inputs) {
  nr_error err = {0};
  memset(s, 0, sizeof *s);
  s->g = g;
  s->pass = pass;
  s->inputs = inputs ? inputs : random_inputs(g, 7);
  s->ref_out = calloc((size_t)g->n_outputs + 1, sizeof *s->ref_out);
  nr_status st = nr_ref_exec(g, s->inputs, s->ref_out, &err);
  if (!st)
    st = nr_knob_space_build(g, &s->space, &err);
  CHECK(!st, "setting up: %s", err.message);
  return !st;
}

static void teardown(subject *s) {
  free_values(s->ref_out, s->g->n_outputs);
  free_values(s->inputs, s->g->n_inputs);
  nr_knob_space_free(&s->space);
  nr_graph_destroy(s->g);
}

static bool has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static double bound_of(const nr_knob_inst *k, int v) {
  return (k->def->flags & NR_KNOB_ACCURACY) && v != k->dflt ? k->def->error_bound
                                                             : EXACT_BOUND;
}

/* One instance: every value rewrites differently, non-off values change the graph,
 * results stay within bounds (executed when run is set). */
static void check_instance(nr_test_state *t, const subject *s, const nr_knob_inst *k,
                           const char *orig, bool run) {
  char *sig[NR_KNOB_MAX_VALUES] = {0};
  for (int v = 0; v < k->n_values; v++) {
    char text[512];
    snprintf(text, sizeof text, "-%s=%s", k->id, k->values[v]);
    nr_graph *c = rewrite(t, s, text);
    if (!c)
      continue;
    sig[v] = signature(c);
    /* Where "off" is not listed, the default is the value that changes nothing. */
    bool may_keep = !strcmp(k->values[v], "off") ||
                    (nr_knob_value_index(k, "off") < 0 && v == k->dflt);
    if (!may_keep)
      CHECK(strcmp(sig[v], orig), "%s leaves the graph unchanged", text);
    for (int u = 0; u < v; u++)
      CHECK(!sig[u] || strcmp(sig[u], sig[v]), "%s builds the same graph as value %s", text,
            k->values[u]);
    if (run) {
      double e = compare(t, s, c);
      CHECK(e <= bound_of(k, v), "%s: rel L2 %.3g over bound %.3g", text, e, bound_of(k, v));
    }
    nr_graph_destroy(c);
  }
  for (int v = 0; v < k->n_values; v++)
    free(sig[v]);
}

/* Checks every instance of the knobs named prefix*; returns how many there were. */
static int check_knobs(nr_test_state *t, const subject *s, const char *prefix) {
  char *orig = signature(s->g);
  int n = 0;
  for (int i = 0; i < s->space.n; i++) {
    const nr_knob_inst *k = &s->space.inst[i];
    if (!has_prefix(k->id, prefix))
      continue;
    n++;
    check_instance(t, s, k, orig, s->run_all);
  }
  free(orig);
  return n;
}

/* Pins knob `name` to value on every instance and checks the results. */
static void check_global_value(nr_test_state *t, const subject *s, const char *name,
                               const char *value, double bound) {
  char text[256];
  snprintf(text, sizeof text, "-%s=%s", name, value);
  nr_graph *c = rewrite(t, s, text);
  if (!c)
    return;
  double e = compare(t, s, c);
  CHECK(e <= bound, "%s: rel L2 %.3g over bound %.3g", text, e, bound);
  fprintf(stderr, "  %-40s rel L2 %.3g\n", text, e);
  nr_graph_destroy(c);
}

static int count_op(const nr_graph *g, const char *op) {
  int n = 0;
  for (int k = 0; k < g->n_nodes; k++)
    n += !strcmp(g->nodes[k].op_type, op);
  return n;
}

/* The default route's rewrite has `want` nodes of op. */
static void check_default_has(nr_test_state *t, const subject *s, const char *op, int want) {
  nr_graph *c = rewrite(t, s, "");
  if (!c)
    return;
  CHECK(count_op(c, op) == want, "default route: %d %s nodes, want %d", count_op(c, op), op,
        want);
  double e = compare(t, s, c);
  CHECK(e <= EXACT_BOUND, "default route: rel L2 %.3g", e);
  nr_graph_destroy(c);
}

/* Small graphs: every instance and value executed. */
static void check_small(nr_test_state *t, nr_graph *g, const nr_pass *pass,
                        const char *prefix, int want_instances, const char *op, int want_ops) {
  subject s;
  if (!setup(t, &s, g, pass, NULL)) {
    nr_graph_destroy(g);
    return;
  }
  s.run_all = true;
  int n = check_knobs(t, &s, prefix);
  CHECK(n == want_instances, "%d %s instances, want %d", n, prefix, want_instances);
  if (op)
    check_default_has(t, &s, op, want_ops);
  teardown(&s);
}

/* ---- LayerNorm ------------------------------------------------------------------ */

enum { LN_POW = 1, LN_GAMMA = 2, LN_BETA = 4, LN_AXES_INPUT = 8 };

static nr_graph *layernorm_graph(unsigned v) {
  int64_t xd[3] = {2, 5, 16}, c = 16;
  nr_graph *g = tg_new(v & LN_AXES_INPUT ? 18 : 13);
  int x = tg_input(g, "x", 3, xd), ax = -1;
  if (v & LN_AXES_INPUT) {
    int64_t one = 1;
    ax = tg_tensor(g, "axes", NR_TENSOR_CONST, 1, &one);
    nr_value_alloc(&g->tensors[ax].value, NR_DTYPE_INT64, 1, &one, NULL);
    ((int64_t *)g->tensors[ax].value.data)[0] = -1;
  }
  int mean = v & LN_AXES_INPUT ? NODE(g, "ReduceMean", "ln/mean", x, ax)
                               : NODE(g, "ReduceMean", "ln/mean", x);
  if (!(v & LN_AXES_INPUT))
    nr_pu_set_attr_ints(g, LAST(g), "axes", 1, (int64_t[]){-1}, NULL);
  int d = NODE(g, "Sub", "ln/sub", x, mean);
  int sq = v & LN_POW ? NODE(g, "Pow", "ln/pow", d, tg_scalar(g, "two", 2.0f))
                      : NODE(g, "Mul", "ln/sq", d, d);
  int var = v & LN_AXES_INPUT ? NODE(g, "ReduceMean", "ln/var", sq, ax)
                              : NODE(g, "ReduceMean", "ln/var", sq);
  if (!(v & LN_AXES_INPUT))
    nr_pu_set_attr_ints(g, LAST(g), "axes", 1, (int64_t[]){2}, NULL);
  int ve = NODE(g, "Add", "ln/add_eps", tg_scalar(g, "eps", 1e-5f), var);
  int sd = NODE(g, "Sqrt", "ln/sqrt", ve);
  int y = NODE(g, "Div", "ln/div", d, sd);
  if (v & LN_GAMMA)
    y = NODE(g, "Mul", "ln/gamma", y, tg_const(g, "gamma", 1, &c, NULL, 3));
  if (v & LN_BETA)
    y = NODE(g, "Add", "ln/beta", tg_const(g, "beta", 1, &c, NULL, 4), y);
  NODE(g, "Relu", "after", y); /* a reader outside the pattern */
  return g;
}

NR_TEST(recognize_layernorm_variants) {
  unsigned variants[] = {LN_POW | LN_GAMMA | LN_BETA, LN_GAMMA | LN_BETA, LN_POW,
                         LN_POW | LN_BETA, LN_POW | LN_GAMMA | LN_BETA | LN_AXES_INPUT};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    nr_graph *g = layernorm_graph(variants[i]);
    if (tg_finish(t, g, g->n_tensors - 1))
      check_small(t, g, &nr_pass_recognize, "recognize.layernorm", 1, "LayerNormalization", 1);
    else
      nr_graph_destroy(g);
  }
}

/* The mean must be over the last axis only: no instance otherwise. */
NR_TEST(recognize_layernorm_not_last_axis) {
  nr_graph *g = layernorm_graph(LN_POW | LN_GAMMA);
  for (int k = 0; k < g->n_nodes; k++)
    if (!strcmp(g->nodes[k].op_type, "ReduceMean"))
      g->nodes[k].attrs[0].ints[0] = 1;
  if (tg_finish(t, g, g->n_tensors - 1))
    check_small(t, g, &nr_pass_recognize, "recognize.", 0, NULL, 0);
  else
    nr_graph_destroy(g);
}

/* ---- GELU ----------------------------------------------------------------------- */

enum { GE_MUL_SCALE = 1, GE_HALF_FIRST = 2, GE_HALF_INNER = 4 };

/* x * 0.5 * (1 + erf(x / sqrt 2)) in the exporter variants. */
static nr_graph *gelu_erf_graph(unsigned v) {
  int64_t xd[2] = {3, 40};
  nr_graph *g = tg_new(13);
  int x = tg_input(g, "x", 2, xd);
  int u = v & GE_MUL_SCALE ? NODE(g, "Mul", "g/scale", tg_scalar(g, "r2", 0.70710677f), x)
                           : NODE(g, "Div", "g/scale", x, tg_scalar(g, "s2", 1.4142135f));
  int e = NODE(g, "Erf", "g/erf", u);
  int a = NODE(g, "Add", "g/one", e, tg_scalar(g, "one", 1.0f));
  int half = tg_scalar(g, "half", 0.5f), y;
  if (v & GE_HALF_FIRST)
    y = NODE(g, "Mul", "g/mul2", NODE(g, "Mul", "g/mul1", x, half), a);
  else if (v & GE_HALF_INNER)
    y = NODE(g, "Mul", "g/mul2", x, NODE(g, "Mul", "g/mul1", a, half));
  else
    y = NODE(g, "Mul", "g/mul2", NODE(g, "Mul", "g/mul1", x, a), half);
  (void)y;
  return g;
}

/* 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), cube as Pow or Mul. */
static nr_graph *gelu_tanh_graph(bool pow) {
  int64_t xd[2] = {3, 40};
  nr_graph *g = tg_new(13);
  int x = tg_input(g, "x", 2, xd);
  int cube = pow ? NODE(g, "Pow", "g/cube", x, tg_scalar(g, "three", 3.0f))
                 : NODE(g, "Mul", "g/cube", x, NODE(g, "Mul", "g/square", x, x));
  int p = NODE(g, "Mul", "g/c2", cube, tg_scalar(g, "c2", 0.044715f));
  int s = NODE(g, "Add", "g/inner", x, p);
  int u = NODE(g, "Mul", "g/c1", tg_scalar(g, "c1", 0.7978845608f), s);
  int th = NODE(g, "Tanh", "g/tanh", u);
  int a = NODE(g, "Add", "g/one", tg_scalar(g, "one", 1.0f), th);
  NODE(g, "Mul", "g/mul2", NODE(g, "Mul", "g/mul1", x, tg_scalar(g, "half", 0.5f)), a);
  return g;
}

NR_TEST(recognize_gelu_variants) {
  unsigned variants[] = {0, GE_MUL_SCALE, GE_HALF_FIRST, GE_HALF_INNER,
                         GE_MUL_SCALE | GE_HALF_INNER};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    nr_graph *g = gelu_erf_graph(variants[i]);
    if (tg_finish(t, g, g->n_tensors - 1))
      check_small(t, g, &nr_pass_recognize, "recognize.gelu", 1, "Gelu", 1);
    else
      nr_graph_destroy(g);
  }
  for (int pow = 0; pow < 2; pow++) {
    nr_graph *g = gelu_tanh_graph(pow);
    if (tg_finish(t, g, g->n_tensors - 1))
      check_small(t, g, &nr_pass_recognize, "recognize.gelu", 1, "Gelu", 1);
    else
      nr_graph_destroy(g);
  }
}

/* An interior tensor with a second reader blocks the pattern. */
NR_TEST(recognize_gelu_shared_interior) {
  nr_graph *g = gelu_erf_graph(0);
  int erf_out = nr_graph_find_tensor(g, "g/erf_out"), y = g->n_tensors - 1;
  int z = NODE(g, "Add", "extra", erf_out, y);
  if (tg_finish(t, g, z))
    check_small(t, g, &nr_pass_recognize, "recognize.", 0, NULL, 0);
  else
    nr_graph_destroy(g);
}

/* ---- attention ------------------------------------------------------------------ */

enum { AT_MUL = 1, AT_MASK = 2, AT_KT_DIRECT = 4, AT_MASK_FIRST = 8 };

/* [B,S,H*D] projections reshaped to heads, torch 1.13 style: K^T made by one
 * Transpose(0,2,3,1) of the reshaped K, or given already transposed. */
static nr_graph *attention_graph(unsigned v) {
  enum { B = 2, S = 6, H = 2, D = 4 };
  int64_t qd[4] = {B, H, S, D}, ktd[4] = {B, H, D, S}, kd[4] = {B, S, H, D};
  int64_t md[4] = {B, 1, 1, S};
  nr_graph *g = tg_new(13);
  int q = tg_input(g, "q", 4, qd), vv = tg_input(g, "v", 4, qd), kt;
  if (v & AT_KT_DIRECT) {
    kt = tg_input(g, "kt", 4, ktd);
  } else {
    kt = NODE(g, "Transpose", "kt", tg_input(g, "k", 4, kd));
    nr_pu_set_attr_ints(g, LAST(g), "perm", 4, (int64_t[]){0, 2, 3, 1}, NULL);
  }
  int s = NODE(g, "MatMul", "qk", q, kt);
  s = v & AT_MUL ? NODE(g, "Mul", "scale", s, tg_scalar(g, "c", 0.5f))
                 : NODE(g, "Div", "scale", s, tg_scalar(g, "c", 2.0f));
  if (v & AT_MASK) {
    int m = tg_input(g, "mask", 4, md);
    s = v & AT_MASK_FIRST ? NODE(g, "Add", "mask_add", m, s) : NODE(g, "Add", "mask_add", s, m);
  }
  int p = NODE(g, "Softmax", "softmax", s);
  nr_pu_set_attr_int(g, LAST(g), "axis", -1, NULL);
  NODE(g, "MatMul", "pv", p, vv);
  return g;
}

NR_TEST(recognize_attention_variants) {
  unsigned variants[] = {0, AT_MUL, AT_MASK, AT_MASK | AT_MASK_FIRST | AT_MUL, AT_KT_DIRECT,
                         AT_KT_DIRECT | AT_MASK};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    nr_graph *g = attention_graph(variants[i]);
    if (tg_finish(t, g, g->n_tensors - 1))
      check_small(t, g, &nr_pass_recognize, "recognize.attention", 1, "Attention", 1);
    else
      nr_graph_destroy(g);
  }
}

/* The heads as exporters write them: [B,S,H*D] projections reshaped to [B,S,H,D] and
 * transposed (K^T with perm 0,2,3,1), the output transposed back and reshaped to
 * [B,S,H*D]. HD_NO_MERGE leaves the output 4-D, HD_Q_SHARED gives Q's reshape a
 * second reader: neither folds. */
enum { HD_MASK = 1, HD_NO_MERGE = 2, HD_Q_SHARED = 4 };

static int tg_shape(nr_graph *g, const char *name, int n, const int64_t *dims) {
  int64_t len = n;
  int t = tg_tensor(g, name, NR_TENSOR_CONST, 1, &len);
  nr_value_alloc(&g->tensors[t].value, NR_DTYPE_INT64, 1, &len, NULL);
  memcpy(g->tensors[t].value.data, dims, sizeof(int64_t) * (size_t)n);
  return t;
}

static int heads_of(nr_graph *g, const char *name, int x, const int64_t *perm, int *r) {
  enum { B = 2, S = 7, H = 3, D = 4 };
  char rn[64], tn[64];
  snprintf(rn, sizeof rn, "%s/reshape", name);
  snprintf(tn, sizeof tn, "%s/transpose", name);
  *r = NODE(g, "Reshape", rn, x, tg_shape(g, rn, 4, (int64_t[]){B, S, H, D}));
  int tp = NODE(g, "Transpose", tn, *r);
  nr_pu_set_attr_ints(g, LAST(g), "perm", 4, perm, NULL);
  return tp;
}

static nr_graph *heads_graph(unsigned v, int *out) {
  enum { B = 2, S = 7, H = 3, D = 4 };
  static const int64_t qv[4] = {0, 2, 1, 3}, kt[4] = {0, 2, 3, 1};
  int64_t xd[3] = {B, S, H * D}, md[2] = {S, S};
  nr_graph *g = tg_new(13);
  int qr, r;
  int q = heads_of(g, "q", tg_input(g, "xq", 3, xd), qv, &qr);
  int k = heads_of(g, "k", tg_input(g, "xk", 3, xd), kt, &r);
  int vv = heads_of(g, "v", tg_input(g, "xv", 3, xd), qv, &r);
  int s = NODE(g, "MatMul", "qk", q, k);
  s = NODE(g, "Div", "scale", s, tg_scalar(g, "c", 2.0f));
  if (v & HD_MASK)
    s = NODE(g, "Add", "mask_add", s, tg_input(g, "mask", 2, md));
  int p = NODE(g, "Softmax", "softmax", s);
  nr_pu_set_attr_int(g, LAST(g), "axis", -1, NULL);
  int y = NODE(g, "MatMul", "pv", p, vv);
  if (!(v & HD_NO_MERGE)) {
    y = NODE(g, "Transpose", "y/transpose", y);
    nr_pu_set_attr_ints(g, LAST(g), "perm", 4, qv, NULL);
    y = NODE(g, "Reshape", "y/reshape", y, tg_shape(g, "y/shape", 3, xd));
  }
  if (v & HD_Q_SHARED) /* a second reader of Q's reshape */
    y = NODE(g, "Add", "extra", y, NODE(g, "ReduceSum", "qsum", qr));
  *out = y;
  return g;
}

NR_TEST(recognize_attention_heads_fold) {
  for (unsigned v = 0; v < 2; v++) {
    int out;
    nr_graph *g = heads_graph(v, &out);
    if (!tg_finish(t, g, out)) {
      nr_graph_destroy(g);
      continue;
    }
    subject s;
    if (!setup(t, &s, g, &nr_pass_recognize, NULL)) {
      nr_graph_destroy(g);
      continue;
    }
    s.run_all = true;
    CHECK(check_knobs(t, &s, "recognize.attention_heads") == 1, "variant %u", v);
    CHECK(check_knobs(t, &s, "recognize.attention@") == 1, "variant %u", v);
    check_default_has(t, &s, "Attention", 1);
    check_default_has(t, &s, "Transpose", 0);
    check_default_has(t, &s, "Reshape", 0);
    nr_graph *c = rewrite(t, &s, "");
    for (int k = 0; c && k < c->n_nodes; k++)
      if (!strcmp(c->nodes[k].op_type, "Attention"))
        CHECK(nr_attr_int(&c->nodes[k], "q_num_heads", 0) == 3 &&
                  nr_attr_int(&c->nodes[k], "kv_num_heads", 0) == 3 &&
                  c->tensors[c->nodes[k].inputs[0]].value.rank == 3,
              "variant %u: not a 3-D Attention over 3 heads", v);
    nr_graph_destroy(c);
    c = rewrite(t, &s, "-recognize.attention_heads@softmax=keep");
    CHECK(c && count_op(c, "Transpose") == 4 && count_op(c, "Attention") == 1,
          "keep: the head transposes stay");
    nr_graph_destroy(c);
    teardown(&s);
  }
}

/* Without the output merge, or with a shared head reshape, attention stays 4-D. */
NR_TEST(recognize_attention_heads_no_fold) {
  for (unsigned v = HD_NO_MERGE; v <= HD_Q_SHARED; v += HD_Q_SHARED - HD_NO_MERGE) {
    int out;
    nr_graph *g = heads_graph(v, &out);
    if (tg_finish(t, g, out))
      check_small(t, g, &nr_pass_recognize, "recognize.attention_heads", 0, "Attention", 1);
    else
      nr_graph_destroy(g);
  }
}

/* Softmax over another axis is no attention. */
NR_TEST(recognize_attention_wrong_axis) {
  nr_graph *g = attention_graph(0);
  for (int k = 0; k < g->n_nodes; k++)
    if (!strcmp(g->nodes[k].op_type, "Softmax"))
      g->nodes[k].attrs[0].i = 2;
  if (tg_finish(t, g, g->n_tensors - 1))
    check_small(t, g, &nr_pass_recognize, "recognize.", 0, NULL, 0);
  else
    nr_graph_destroy(g);
}

/* ---- horizontal ----------------------------------------------------------------- */

/* Three projections of one input, each with a bias Add (BERT Q/K/V); with
 * `one_plain` the last has no bias, so the Adds stay behind the Split. */
static nr_graph *qkv_graph(bool one_plain) {
  int64_t xd[3] = {2, 5, 8}, wd[2] = {8, 6}, bd = 6;
  nr_graph *g = tg_new(13);
  int x = tg_input(g, "x", 3, xd), sum = -1;
  for (int i = 0; i < 3; i++) {
    char name[32], w[32], b[32];
    snprintf(name, sizeof name, "proj%d", i);
    snprintf(w, sizeof w, "w%d", i);
    snprintf(b, sizeof b, "b%d", i);
    int y = NODE(g, "MatMul", name, x, tg_const(g, w, 2, wd, NULL, 10 + i));
    if (!(one_plain && i == 2)) {
      snprintf(name, sizeof name, "bias%d", i);
      y = NODE(g, "Add", name, tg_const(g, b, 1, &bd, NULL, 20 + i), y);
    }
    sum = sum < 0 ? y : NODE(g, "Mul", i == 1 ? "m1" : "m2", sum, y);
  }
  return g;
}

NR_TEST(horizontal_matmul_groups) {
  for (int plain = 0; plain < 2; plain++) {
    nr_graph *g = qkv_graph(plain);
    if (tg_finish(t, g, g->n_tensors - 1))
      check_small(t, g, &nr_pass_horizontal, "horizontal.fuse", 1, "Split", 1);
    else
      nr_graph_destroy(g);
  }
}

NR_TEST(horizontal_gemm_group) {
  int64_t xd[2] = {4, 8}, wd[2] = {6, 8}, w2d[2] = {3, 8}, cd = 6;
  nr_graph *g = tg_new(13);
  int x = tg_input(g, "x", 2, xd);
  int a = NODE(g, "Gemm", "ga", x, tg_const(g, "wa", 2, wd, NULL, 1), tg_const(g, "ca", 1, &cd, NULL, 2));
  nr_pu_set_attr_int(g, LAST(g), "transB", 1, NULL);
  nr_pu_set_attr_float(g, LAST(g), "alpha", 0.5f, NULL);
  int b = NODE(g, "Gemm", "gb", x, tg_const(g, "wb", 2, w2d, NULL, 3));
  nr_pu_set_attr_int(g, LAST(g), "transB", 1, NULL);
  nr_pu_set_attr_float(g, LAST(g), "alpha", 0.5f, NULL);
  int c = NODE(g, "Concat", "cat", a, b);
  nr_pu_set_attr_int(g, LAST(g), "axis", 1, NULL);
  if (tg_finish(t, g, c))
    check_small(t, g, &nr_pass_horizontal, "horizontal.fuse", 1, "Gemm", 1);
  else
    nr_graph_destroy(g);
}

/* Convs on one input: kernels k[i] with pads p[i] (symmetric), stride s. */
static nr_graph *conv_graph(int n, const int *k, const int *p, int stride, bool bias) {
  int64_t xd[4] = {1, 3, 9, 9};
  nr_graph *g = tg_new(13);
  int x = tg_input(g, "x", 4, xd), outs[8];
  for (int i = 0; i < n; i++) {
    int64_t wd[4] = {2 + i, 3, k[i], k[i]}, bd = 2 + i;
    char name[32], w[32], b[32];
    snprintf(name, sizeof name, "conv%d", i);
    snprintf(w, sizeof w, "w%d", i);
    snprintf(b, sizeof b, "b%d", i);
    int wt = tg_const(g, w, 4, wd, NULL, 30 + i);
    outs[i] = bias && i != 1 ? NODE(g, "Conv", name, x, wt, tg_const(g, b, 1, &bd, NULL, 40 + i))
                             : NODE(g, "Conv", name, x, wt);
    nr_pu_set_attr_ints(g, LAST(g), "pads", 4, (int64_t[]){p[i], p[i], p[i], p[i]}, NULL);
    nr_pu_set_attr_ints(g, LAST(g), "strides", 2, (int64_t[]){stride, stride}, NULL);
    nr_pu_set_attr_ints(g, LAST(g), "kernel_shape", 2, (int64_t[]){k[i], k[i]}, NULL);
    snprintf(name, sizeof name, "pool%d", i); /* output sizes may differ */
    outs[i] = NODE(g, "GlobalAveragePool", name, outs[i]);
  }
  int y = tg_node(g, "Concat", "cat", n, outs);
  nr_pu_set_attr_int(g, LAST(g), "axis", 1, NULL);
  (void)y;
  return g;
}

NR_TEST(horizontal_conv_groups) {
  struct {
    int n, k[3], p[3], stride, instances, convs_after_default;
  } cases[] = {
      {2, {1, 1}, {0, 0}, 1, 1, 1},       /* same kernels: on|off */
      {2, {1, 3}, {0, 1}, 1, 1, 2},       /* squeezenet: on (nothing)|on_pad */
      {2, {3, 1}, {1, 0}, 2, 1, 2},       /* resnet downsample: stride 2 */
      {3, {1, 3, 1}, {0, 1, 0}, 1, 1, 2}, /* on|off|on_pad */
      {2, {1, 3}, {0, 0}, 1, 0, 2},       /* output sizes differ: nothing */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    for (int bias = 0; bias < 2; bias++) {
      nr_graph *g = conv_graph(cases[i].n, cases[i].k, cases[i].p, cases[i].stride, bias);
      if (tg_finish(t, g, g->n_tensors - 1))
        check_small(t, g, &nr_pass_horizontal, "horizontal.fuse", cases[i].instances, "Conv",
                    cases[i].convs_after_default);
      else
        nr_graph_destroy(g);
    }
  }
}

/* ---- real models ---------------------------------------------------------------- */

/* The exported models live in <repo>/build/models; NR_TEST_DATA_DIR is
 * <repo>/tests/data, which need not exist, so the path is cut rather than walked. */
static void model_path(char *buf, size_t cap, const char *rest) {
  const char *env = getenv("NNROUTE_MODELS");
  if (env) {
    snprintf(buf, cap, "%s/%s", env, rest);
    return;
  }
  const char *root = NR_TEST_DATA_DIR;
  const char *cut = strstr(root, "/tests/data");
  snprintf(buf, cap, "%.*s/build/models/%s", cut ? (int)(cut - root) : (int)strlen(root), root,
           rest);
}

/* Loads <name>.onnx, prepares it, names its nodes and reads its one .npy input. */
static nr_model *load_model(nr_test_state *t, const char *name, const char *input,
                            nr_value **inputs) {
  char path[512];
  nr_error err = {0};
  nr_model *m = NULL;
  char rest[256];
  snprintf(rest, sizeof rest, "%s.onnx", name);
  model_path(path, sizeof path, rest);
  FILE *f = fopen(path, "rb");
  if (!f) {
    nr_test_skipf(t, "%s not found (scripts/test.sh's models stage exports it)", path);
    return NULL;
  }
  fclose(f);
  *inputs = calloc(2, sizeof **inputs);
  nr_status st = nr_model_load(path, NULL, &m, &err);
  if (!st)
    st = nr_model_prepare(m, &err);
  if (!st)
    st = nr_compiler_name_nodes(nr_model_graph(m), &err);
  snprintf(rest, sizeof rest, "%s/%s.npy", name, input);
  model_path(path, sizeof path, rest);
  if (!st)
    st = nr_npy_read(path, &(*inputs)[0], &err);
  CHECK(!st, "%s: %s", name, err.message);
  if (st) {
    nr_model_destroy(m);
    free(*inputs);
    return NULL;
  }
  return m;
}

/* A subject on a clone of the model's graph (the model keeps its own). */
static bool model_subject(nr_test_state *t, subject *s, nr_model *m, const nr_pass *pass,
                          nr_value *inputs) {
  nr_graph *g = NULL;
  nr_error err = {0};
  if (nr_graph_clone(nr_model_graph(m), NULL, &g, &err)) {
    CHECK(false, "cloning: %s", err.message);
    return false;
  }
  if (!setup(t, s, g, pass, inputs)) {
    nr_graph_destroy(g);
    return false;
  }
  return true;
}

static int count_prefix(const subject *s, const char *prefix) {
  int n = 0;
  for (int i = 0; i < s->space.n; i++)
    n += has_prefix(s->space.inst[i].id, prefix);
  return n;
}

NR_TEST(recognize_bert_tiny) {
  for (int v = 0; v < 2; v++) {
    const char *name = v ? "bert_tiny_op17" : "bert_tiny_op13";
    nr_value *in;
    subject s;
    nr_model *m = load_model(t, name, "input_ids", &in);
    if (!m || !model_subject(t, &s, m, &nr_pass_recognize, in)) {
      nr_model_destroy(m);
      continue;
    }
    fprintf(stderr, "  %s\n", name);
    CHECK(count_prefix(&s, "recognize.layernorm") == (v ? 0 : 9), "%s: %d layernorm", name,
          count_prefix(&s, "recognize.layernorm"));
    CHECK(count_prefix(&s, "recognize.gelu") == 4, "%s: %d gelu", name,
          count_prefix(&s, "recognize.gelu"));
    CHECK(count_prefix(&s, "recognize.attention@") == 4, "%s: %d attention", name,
          count_prefix(&s, "recognize.attention@"));
    CHECK(count_prefix(&s, "recognize.attention_heads@") == 4, "%s: %d attention_heads",
          name, count_prefix(&s, "recognize.attention_heads@"));
    check_knobs(t, &s, "recognize.");
    check_default_has(t, &s, "Attention", 4);
    check_default_has(t, &s, "Gelu", 4);
    check_default_has(t, &s, "LayerNormalization", 9);
    check_global_value(t, &s, "recognize.gelu", "tanh", 1e-3);
    check_global_value(t, &s, "recognize.gelu", "off", EXACT_BOUND);
    check_global_value(t, &s, "recognize.attention", "off", EXACT_BOUND);
    check_global_value(t, &s, "recognize.attention_heads", "keep", EXACT_BOUND);
    check_default_has(t, &s, "Transpose", 0);
    if (!v)
      check_global_value(t, &s, "recognize.layernorm", "off", EXACT_BOUND);
    teardown(&s);
    nr_model_destroy(m);
  }
}

/* BERT-tiny's Q/K/V come from one exported MatMul already: no horizontal knob. */
NR_TEST(horizontal_bert_tiny_has_no_group) {
  nr_value *in;
  subject s;
  nr_model *m = load_model(t, "bert_tiny_op13", "input_ids", &in);
  if (!m || !model_subject(t, &s, m, &nr_pass_horizontal, in)) {
    nr_model_destroy(m);
    return;
  }
  CHECK(count_prefix(&s, "horizontal.") == 0, "%d horizontal instances",
        count_prefix(&s, "horizontal."));
  teardown(&s);
  nr_model_destroy(m);
}

NR_TEST(horizontal_squeezenet) {
  nr_value *in;
  subject s;
  nr_model *m = load_model(t, "squeezenet1_1_op13", "input", &in);
  if (!m || !model_subject(t, &s, m, &nr_pass_horizontal, in)) {
    nr_model_destroy(m);
    return;
  }
  CHECK(count_prefix(&s, "horizontal.fuse") == 8, "%d horizontal instances",
        count_prefix(&s, "horizontal.fuse"));
  check_knobs(t, &s, "horizontal.");
  check_default_has(t, &s, "Conv", 26);
  check_global_value(t, &s, "horizontal.fuse", "on_pad", EXACT_BOUND);
  teardown(&s);
  nr_model_destroy(m);
}

/* ResNet-18: no recognize pattern; its downsample 1x1 and the block's first 3x3 read
 * the same tensor, which only on_pad merges. The default route changes nothing. */
NR_TEST(passes_resnet18_default_unchanged) {
  nr_value *in;
  subject s;
  nr_model *m = load_model(t, "resnet18_op13", "input", &in);
  if (!m || !model_subject(t, &s, m, &nr_pass_recognize, in)) {
    nr_model_destroy(m);
    return;
  }
  CHECK(count_prefix(&s, "recognize.") == 0, "%d recognize instances",
        count_prefix(&s, "recognize."));
  char *orig = signature(s.g);
  for (int p = 0; p < 2; p++) {
    s.pass = p ? &nr_pass_horizontal : &nr_pass_recognize;
    nr_graph *c = rewrite(t, &s, "");
    char *sig = c ? signature(c) : NULL;
    CHECK(sig && !strcmp(sig, orig), "%s changed resnet18 on the default route", s.pass->name);
    free(sig);
    nr_graph_destroy(c);
  }
  free(orig);
  check_knobs(t, &s, "horizontal.");
  check_global_value(t, &s, "horizontal.fuse", "on_pad", EXACT_BOUND);
  teardown(&s);
  nr_model_destroy(m);
}
