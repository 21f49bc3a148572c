/* test_passes_fusion.c - the passes fold, fuse_bn, transpose, fuse_act and
 * eltwise_fuse on small hand-built graphs and on the real exported models.
 *
 * A subject is a prepared graph, its knob space, inputs and reference outputs. The
 * rewrite runs the five passes in pipeline order along a route on a clone. For each
 * instance of the fusion knobs and each value it lists, the clone must differ from
 * the clones of the other values (no dead values), must differ from the original
 * unless the value is off/none, and (small graphs: always; models: one route per
 * value pinning every instance) must match the reference outputs within 1e-5
 * relative L2. */
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

extern const nr_pass nr_pass_fold, nr_pass_fuse_bn, nr_pass_transpose, nr_pass_fuse_act,
    nr_pass_eltwise_fuse;
nr_graph *nr_model_graph(nr_model *m);

static const nr_pass *const passes[] = {&nr_pass_fold, &nr_pass_fuse_bn, &nr_pass_transpose,
                                        &nr_pass_fuse_act, &nr_pass_eltwise_fuse, NULL};
static const char *const knob_names[] = {"fold.constants", "fuse.bn", "fuse.conv_act",
                                         "fuse.gemm_act", "fuse.conv_scale",
                                         "transpose.elim", "eltwise.fuse", NULL};

#define BOUND 1e-5

/* ---- small graphs ---------------------------------------------------------------- */

/* A constant of values in [lo, lo + span) drawn from seed. */
static int fg_const(nr_graph *g, const char *name, int rank, const int64_t *dims,
                    float lo, float span, unsigned seed) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  nr_value *v = &g->tensors[t].value;
  nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < nr_value_count(v); i++)
    ((float *)v->data)[i] = lo + span * (float)nr_rng_int(&rng, 0, 999) / 1000.0f;
  return t;
}

static int fg_scalar(nr_graph *g, const char *name, float x) {
  int t = fg_const(g, name, 0, NULL, x, 0, 1);
  return t;
}

static int last_node(const nr_graph *g) { return g->n_nodes - 1; }

/* ---- subjects ---------------------------------------------------------------------- */

typedef struct subject {
  nr_graph *g;
  nr_value *inputs, *ref_out;
  nr_knob_space space;
} subject;

static nr_value *random_inputs(const nr_graph *g, unsigned seed) {
  nr_rng rng = nr_rng_make(seed);
  nr_value *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  for (int i = 0; i < g->n_inputs; i++) {
    const nr_value *d = &g->tensors[g->inputs[i]].value;
    nr_value_alloc(&in[i], d->dtype, d->rank, d->dims, NULL);
    for (int64_t j = 0; j < nr_value_count(&in[i]); j++)
      ((float *)in[i].data)[j] = (float)nr_rng_int(&rng, 0, 2000) / 500.0f - 2.0f;
  }
  return in;
}

static bool setup(nr_test_state *t, subject *s, nr_graph *g, nr_value *inputs) {
  nr_error err = {0};
  memset(s, 0, sizeof *s);
  s->g = g;
  s->inputs = inputs ? inputs : random_inputs(g, 11);
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

/* A clone of s->g through the fusion passes along route text; NULL on failure. */
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
  for (int p = 0; !st && passes[p]; p++)
    if ((st = passes[p]->run(&ctx)))
      nr_error_prefix(&err, "pass %s: ", passes[p]->name);
  if (!st)
    st = nr_graph_infer(c, &err);
  nr_route_free(&r);
  CHECK(!st, "along '%.200s': %s", text, err.message);
  if (st) {
    nr_graph_destroy(c);
    return NULL;
  }
  return c;
}

static double rel_l2(const nr_value *a, const nr_value *b) {
  double num = 0, den = 0;
  int64_t n = nr_value_count(a);
  if (n != nr_value_count(b) || a->dtype != b->dtype)
    return INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double x = nr_value_get_f64(a, i), y = nr_value_get_f64(b, i);
    num += (x - y) * (x - y);
    den += x * x;
  }
  return sqrt(num / (den > 0 ? den : 1));
}

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

/* Op types and names in order, and the nodes' input lists: equal strings mean equal
 * graphs for these passes. */
static char *signature(const nr_graph *g) {
  size_t cap = 256, len = 0;
  char *s = calloc(cap, 1);
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    size_t need = strlen(n->op_type) + strlen(n->name) + 16 * (size_t)(n->n_inputs + 1);
    if (len + need >= cap) {
      cap = 2 * (len + need);
      s = realloc(s, cap);
    }
    len += (size_t)sprintf(s + len, "%s:%s(", n->op_type, n->name);
    for (int i = 0; i < n->n_inputs; i++)
      len += (size_t)sprintf(s + len, "%d,", n->inputs[i]);
    len += (size_t)sprintf(s + len, ");");
  }
  return s;
}

static bool mine(const nr_knob_inst *k) {
  for (int i = 0; knob_names[i]; i++)
    if (!strcmp(k->def->name, knob_names[i]))
      return true;
  return false;
}

static bool is_off(const char *v) { return !strcmp(v, "off") || !strcmp(v, "none"); }

/* Every value of instance k builds its own graph; non-off values change the graph;
 * with run, every value keeps the results. */
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
    for (int u = 0; u < v; u++)
      CHECK(!sig[u] || strcmp(sig[u], sig[v]), "%s builds the graph of value %s", text,
            k->values[u]);
    if (run) {
      double e = compare(t, s, c);
      CHECK(e <= BOUND, "%s: rel L2 %.3g", text, e);
    }
    nr_graph_destroy(c);
  }
  (void)orig;
  for (int v = 0; v < k->n_values; v++)
    free(sig[v]);
}

static int check_knobs(nr_test_state *t, const subject *s, bool run) {
  char *orig = signature(s->g);
  int n = 0;
  for (int i = 0; i < s->space.n; i++)
    if (mine(&s->space.inst[i])) {
      n++;
      check_instance(t, s, &s->space.inst[i], orig, run);
    }
  free(orig);
  return n;
}

static int count_op(const nr_graph *g, const char *op) {
  int n = 0;
  for (int k = 0; k < g->n_nodes; k++)
    n += !strcmp(g->nodes[k].op_type, op);
  return n;
}

static int count_inst(const subject *s, const char *knob) {
  int n = 0;
  for (int i = 0; i < s->space.n; i++)
    n += !strcmp(s->space.inst[i].def->name, knob);
  return n;
}

/* The route text giving every instance of knob the value v (where it lists v). */
static char *pin_all(const subject *s, const char *knob, const char *v) {
  size_t cap = 64, len = 0;
  char *text = calloc(cap, 1);
  for (int i = 0; i < s->space.n; i++) {
    const nr_knob_inst *k = &s->space.inst[i];
    if (strcmp(k->def->name, knob) || nr_knob_value_index(k, v) < 0)
      continue;
    size_t need = strlen(k->id) + strlen(v) + 4;
    if (len + need >= cap) {
      cap = 2 * (len + need);
      text = realloc(text, cap);
    }
    len += (size_t)sprintf(text + len, "%s-%s=%s", len ? " " : "", k->id, v);
  }
  return text;
}

/* Runs one route per value of knob (every instance that lists it pinned) and compares
 * results; values other than off/none must change the node count. */
static void check_pinned(nr_test_state *t, const subject *s, const char *knob) {
  const nr_knob_def *d = nr_knob_find(knob);
  REQUIRE(d, "no knob %s", knob);
  int off_nodes = -1, nodes[NR_KNOB_MAX_VALUES];
  const char *p = d->values;
  for (int v = 0; *p && v < NR_KNOB_MAX_VALUES; v++) {
    char val[64];
    size_t len = strcspn(p, "|");
    snprintf(val, sizeof val, "%.*s", (int)len, p);
    p += len + (p[len] == '|');
    char *text = pin_all(s, knob, val);
    nr_graph *c = rewrite(t, s, text);
    nodes[v] = c ? c->n_nodes : -1;
    if (is_off(val))
      off_nodes = nodes[v];
    if (c) {
      double e = compare(t, s, c);
      CHECK(e <= BOUND, "%s=%s everywhere: rel L2 %.3g", knob, val, e);
      fprintf(stderr, "    %-20s %-18s %4d nodes  rel L2 %.3g\n", knob, val, c->n_nodes, e);
    }
    nr_graph_destroy(c);
    free(text);
    if (off_nodes >= 0 && !is_off(val))
      CHECK(nodes[v] != off_nodes, "%s=%s leaves %d nodes", knob, val, nodes[v]);
  }
}

/* Small graph: every instance and value executed; want instances of knob. */
static void check_small(nr_test_state *t, nr_graph *g, const char *knob, int want,
                        const char *op, int want_ops) {
  subject s;
  if (!setup(t, &s, g, NULL)) {
    nr_graph_destroy(g);
    return;
  }
  CHECK(count_inst(&s, knob) == want, "%d %s instances, want %d", count_inst(&s, knob), knob,
        want);
  check_knobs(t, &s, true);
  nr_graph *c = rewrite(t, &s, "");
  if (c && op)
    CHECK(count_op(c, op) == want_ops, "default: %d %s, want %d", count_op(c, op), op,
          want_ops);
  if (c)
    CHECK(compare(t, &s, c) <= BOUND, "default route differs");
  nr_graph_destroy(c);
  teardown(&s);
}

/* ---- fuse_bn and fuse_act ------------------------------------------------------------ */

static int conv(nr_graph *g, const char *name, int x, int64_t cin, int64_t cout, int k,
                bool bias, unsigned seed) {
  char wn[64], bn[64];
  int64_t wd[4] = {cout, cin, k, k};
  snprintf(wn, sizeof wn, "%s_w", name);
  snprintf(bn, sizeof bn, "%s_b", name);
  int ins[3] = {x, fg_const(g, wn, 4, wd, -0.5f, 1.0f, seed),
                bias ? fg_const(g, bn, 1, &cout, -0.2f, 0.4f, seed + 1) : -1};
  int y = tg_node(g, "Conv", name, bias ? 3 : 2, ins);
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2};
  nr_pu_set_attr_ints(g, last_node(g), "pads", 4, pads, NULL);
  return y;
}

static int batchnorm(nr_graph *g, const char *name, int x, int64_t c, unsigned seed) {
  char n[4][64];
  const char *part[4] = {"scale", "shift", "mean", "var"};
  for (int i = 0; i < 4; i++)
    snprintf(n[i], sizeof n[i], "%s_%s", name, part[i]);
  int ins[5] = {x, fg_const(g, n[0], 1, &c, 0.5f, 1.0f, seed),
                fg_const(g, n[1], 1, &c, -0.5f, 1.0f, seed + 1),
                fg_const(g, n[2], 1, &c, -0.3f, 0.6f, seed + 2),
                fg_const(g, n[3], 1, &c, 0.2f, 1.0f, seed + 3)};
  return tg_node(g, "BatchNormalization", name, 5, ins);
}

NR_TEST(fusion_conv_bn_relu) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 3, 8, 8};
  int y = conv(g, "conv", tg_input(g, "x", 4, xd), 3, 4, 3, true, 1);
  y = batchnorm(g, "bn", y, 4, 5);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.bn", 1, "FusedConv", 1);
}

NR_TEST(fusion_conv_bn_without_bias) {
  nr_graph *g = tg_graph(15);
  int64_t xd[4] = {2, 3, 5, 5};
  int y = conv(g, "conv", tg_input(g, "x", 4, xd), 3, 6, 1, false, 2);
  y = batchnorm(g, "bn", y, 6, 9);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.bn", 1, "BatchNormalization", 0);
}

/* Conv -> Mul(x, [C,1,1]) -> Add([1,C,1,1]) -> Relu, the BatchNormalization PaddleOCR
 * spells out: both fold into the Conv, and fuse_act then takes the Relu. */
NR_TEST(fusion_conv_scale_shift) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 3, 7, 7}, sd[3] = {5, 1, 1}, td[4] = {1, 5, 1, 1};
  int y = conv(g, "conv", tg_input(g, "x", 4, xd), 3, 5, 3, true, 21);
  int m[2] = {fg_const(g, "scale", 3, sd, -1.5f, 3.0f, 22), y};
  y = tg_node(g, "Mul", "mul", 2, m);
  int a[2] = {y, fg_const(g, "shift", 4, td, -1.0f, 2.0f, 23)};
  y = tg_node(g, "Add", "add", 2, a);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.conv_scale", 1, "FusedConv", 1);
}

/* A scalar Mul with no Add after it, on a Conv without bias; a grouped Conv. */
NR_TEST(fusion_conv_scale_scalar_grouped) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {2, 4, 5, 5}, wd[4] = {6, 2, 3, 3};
  int ins[2] = {tg_input(g, "x", 4, xd), fg_const(g, "w", 4, wd, -0.5f, 1.0f, 24)};
  int y = tg_node(g, "Conv", "conv", 2, ins);
  nr_pu_set_attr_int(g, last_node(g), "group", 2, NULL);
  int m[2] = {y, fg_scalar(g, "scale", 0.75f)};
  y = tg_node(g, "Mul", "mul", 2, m);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.conv_scale", 1, "Mul", 0);
}

/* Not folded: the Conv output has a second reader; the constant runs along the last
 * axis, not the channels. */
NR_TEST(fusion_conv_scale_refused) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 2, 6, 6}, sd[1] = {6};
  int y = conv(g, "conv", tg_input(g, "x", 4, xd), 2, 3, 3, true, 25);
  int m[2] = {y, fg_const(g, "scale", 1, sd, 0.5f, 1.0f, 26)};
  int z = tg_node(g, "Mul", "mul", 2, m);
  int a[2] = {z, tg_node(g, "Sigmoid", "sig", 1, &y)};
  y = tg_node(g, "Add", "add", 2, a);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.conv_scale", 0, "Conv", 1);
}

/* Conv -> Add(per-channel constant) -> Add(residual) -> Relu: all three values differ. */
NR_TEST(fusion_conv_bias_residual) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 4, 6, 6}, bd[3] = {4, 1, 1};
  int r = tg_input(g, "r", 4, xd);
  int y = conv(g, "conv", tg_input(g, "x", 4, xd), 4, 4, 1, true, 3);
  int a[2] = {y, fg_const(g, "bias", 3, bd, -1, 2, 4)};
  a[0] = tg_node(g, "Add", "add_bias", 2, a);
  a[1] = r;
  y = tg_node(g, "Add", "add_res", 2, a);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (!tg_finish(t, g, y))
    return;
  subject s;
  if (!setup(t, &s, g, NULL))
    return;
  int i = nr_knob_space_find(&s.space, "fuse.conv_act@conv");
  CHECK(i >= 0 && s.space.inst[i].n_values == 3, "conv_act lists all three values");
  check_knobs(t, &s, true);
  nr_graph *c = rewrite(t, &s, "");
  CHECK(c && count_op(c, "FusedConv") == 1 && c->n_nodes == 1, "default: one FusedConv");
  nr_graph_destroy(c);
  teardown(&s);
}

/* Add(convA, convB): the Conv feeding input 0 claims the Add; convB has no knob. */
NR_TEST(fusion_residual_claimed_once) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 2, 5, 5};
  int x = tg_input(g, "x", 4, xd);
  int a[2] = {conv(g, "conv_a", x, 2, 3, 3, true, 5), conv(g, "conv_b", x, 2, 3, 1, true, 6)};
  int y = tg_node(g, "Add", "add", 2, a);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.conv_act", 1, "FusedConv", 1);
}

NR_TEST(fusion_conv_without_epilogue_has_no_knob) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 2, 5, 5};
  int y = conv(g, "conv", tg_input(g, "x", 4, xd), 2, 3, 3, true, 7);
  y = tg_node(g, "MaxPool", "pool", 1, &y);
  int64_t ks[2] = {2, 2};
  nr_pu_set_attr_ints(g, last_node(g), "kernel_shape", 2, ks, NULL);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.conv_act", 0, "Conv", 1);
}

enum { ACT_RELU, ACT_CLIP, ACT_LEAKY, ACT_SIGMOID, ACT_HSIG, ACT_TANH, ACT_SILU, ACT_HSWISH,
       ACT_COUNT_ };

static int activation(nr_graph *g, int kind, int x) {
  static const char *const ops[] = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid",
                                    "Tanh", "Sigmoid", "HardSigmoid"};
  int ins[3] = {x, -1, -1};
  if (kind == ACT_CLIP) {
    ins[1] = fg_scalar(g, "lo", 0.0f);
    ins[2] = fg_scalar(g, "hi", 0.5f);
  }
  int y = tg_node(g, ops[kind], "act", kind == ACT_CLIP ? 3 : 1, ins);
  if (kind == ACT_LEAKY)
    nr_pu_set_attr_float(g, last_node(g), "alpha", 0.1f, NULL);
  if (kind == ACT_HSWISH) {
    nr_pu_set_attr_float(g, last_node(g), "alpha", 1.0f / 6, NULL);
    nr_pu_set_attr_float(g, last_node(g), "beta", 0.5f, NULL);
  }
  if (kind == ACT_SILU || kind == ACT_HSWISH) {
    int m[2] = {x, y};
    y = tg_node(g, "Mul", "gate", 2, m);
  }
  return y;
}

NR_TEST(fusion_conv_activations) {
  for (int kind = 0; kind < ACT_COUNT_; kind++) {
    nr_graph *g = tg_graph(13);
    int64_t xd[4] = {1, 3, 6, 6};
    int y = conv(g, "conv", tg_input(g, "x", 4, xd), 3, 4, 3, true, 10 + (unsigned)kind);
    y = activation(g, kind, y);
    if (tg_finish(t, g, y))
      check_small(t, g, "fuse.conv_act", 1, "FusedConv", 1);
  }
}

static int matmul(nr_graph *g, const char *op, int x, int64_t k, int64_t n, bool trans_b) {
  int64_t wd[2] = {trans_b ? n : k, trans_b ? k : n};
  int ins[2] = {x, fg_const(g, "w", 2, wd, -0.5f, 1.0f, 21)};
  int y = tg_node(g, op, "mm", 2, ins);
  if (trans_b)
    nr_pu_set_attr_int(g, last_node(g), "transB", 1, NULL);
  return y;
}

NR_TEST(fusion_gemm_bias_relu) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {3, 8}, n = 5;
  int a[2] = {matmul(g, "Gemm", tg_input(g, "x", 2, xd), 8, 5, false),
              fg_const(g, "c", 1, &n, -1, 2, 3)};
  int y = tg_node(g, "Add", "add", 2, a);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.gemm_act", 1, "FusedGemm", 1);
}

NR_TEST(fusion_matmul_bias_sigmoid_3d) {
  nr_graph *g = tg_graph(13);
  int64_t xd[3] = {2, 3, 8}, n = 5;
  int a[2] = {matmul(g, "MatMul", tg_input(g, "x", 3, xd), 8, 5, false),
              fg_const(g, "c", 1, &n, -1, 2, 3)};
  int y = tg_node(g, "Add", "add", 2, a);
  y = tg_node(g, "Sigmoid", "sig", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.gemm_act", 1, "FusedMatMul", 1);
}

/* MatMul -> Add(bias) -> Add(residual) -> Relu, as a transformer's sublayer ends: the
 * three values of fuse.gemm_act differ, and by default one FusedMatMul takes all. */
NR_TEST(fusion_matmul_bias_residual_3d) {
  nr_graph *g = tg_graph(13);
  int64_t xd[3] = {2, 3, 8}, rd[3] = {2, 3, 5}, n = 5;
  int r = tg_input(g, "r", 3, rd);
  int a[2] = {matmul(g, "MatMul", tg_input(g, "x", 3, xd), 8, 5, false),
              fg_const(g, "c", 1, &n, -1, 2, 3)};
  a[0] = tg_node(g, "Add", "add_bias", 2, a);
  a[1] = a[0], a[0] = r; /* the residual comes first, as in x + proj(x) */
  int y = tg_node(g, "Add", "add_res", 2, a);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (!tg_finish(t, g, y))
    return;
  subject s;
  if (!setup(t, &s, g, NULL))
    return;
  int i = nr_knob_space_find(&s.space, "fuse.gemm_act@mm");
  CHECK(i >= 0 && s.space.inst[i].n_values == 3, "gemm_act lists all three values");
  check_knobs(t, &s, true);
  nr_graph *c = rewrite(t, &s, "");
  CHECK(c && count_op(c, "FusedMatMul") == 1 && c->n_nodes == 1,
        "default: one FusedMatMul");
  CHECK(c && c->nodes[0].n_inputs == 4, "the residual is the fused node's input 3");
  nr_graph_destroy(c);
  teardown(&s);
}

/* A Gemm with its bias as C takes a residual too; one with a full C matrix does not
 * (C already is the residual operand), and the Add stays. */
NR_TEST(fusion_gemm_residual_and_c) {
  for (int full = 0; full < 2; full++) {
    nr_graph *g = tg_graph(13);
    int64_t xd[2] = {3, 8}, rd[2] = {3, 5}, cd[2] = {3, 5}, n = 5;
    int x = tg_input(g, "x", 2, xd), r = tg_input(g, "r", 2, rd);
    int64_t wd[2] = {8, 5};
    int c = full ? fg_const(g, "c", 2, cd, -1, 2, 3) : fg_const(g, "c", 1, &n, -1, 2, 3);
    int ins[3] = {x, fg_const(g, "w", 2, wd, -0.5f, 1.0f, 21), c};
    int a[2] = {tg_node(g, "Gemm", "mm", 3, ins), r};
    int y = tg_node(g, "Add", "add_res", 2, a);
    if (tg_finish(t, g, y))
      check_small(t, g, "fuse.gemm_act", full ? 0 : 1, full ? "Add" : "FusedGemm", 1);
  }
}

/* Add(mmA, mmB): the MatMul feeding input 0 claims the Add; mmB has no knob. */
NR_TEST(fusion_gemm_residual_claimed_once) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {3, 8}, wd[2] = {8, 5};
  int x = tg_input(g, "x", 2, xd);
  int ia[2] = {x, fg_const(g, "wa", 2, wd, -0.5f, 1.0f, 21)};
  int ib[2] = {x, fg_const(g, "wb", 2, wd, -0.5f, 1.0f, 22)};
  int a[2] = {tg_node(g, "MatMul", "mm_a", 2, ia), tg_node(g, "MatMul", "mm_b", 2, ib)};
  int y = tg_node(g, "Add", "add", 2, a);
  y = tg_node(g, "Relu", "relu", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.gemm_act", 1, "FusedMatMul", 1);
}

/* MatMul + BN becomes a Gemm, which fuse_act then fuses with the Tanh. */
NR_TEST(fusion_matmul_bn_tanh) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {4, 8};
  int y = matmul(g, "MatMul", tg_input(g, "x", 2, xd), 8, 6, false);
  y = batchnorm(g, "bn", y, 6, 31);
  y = tg_node(g, "Tanh", "tanh", 1, &y);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.bn", 1, "FusedGemm", 1);
}

NR_TEST(fusion_gemm_transb_bias_bn) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {4, 8}, n = 6;
  int y = matmul(g, "Gemm", tg_input(g, "x", 2, xd), 8, 6, true);
  nr_node *mm = &g->nodes[last_node(g)];
  int c = fg_const(g, "c", 1, &n, -1, 2, 41);
  mm = &g->nodes[last_node(g)];
  mm->inputs = realloc(mm->inputs, sizeof(int) * 3);
  mm->inputs[mm->n_inputs++] = c;
  nr_pu_set_attr_float(g, last_node(g), "beta", 0.5f, NULL);
  nr_pu_set_attr_float(g, last_node(g), "alpha", 1.5f, NULL);
  y = batchnorm(g, "bn", y, 6, 43);
  if (tg_finish(t, g, y))
    check_small(t, g, "fuse.bn", 1, "BatchNormalization", 0);
}

/* ---- eltwise_fuse -------------------------------------------------------------------- */

NR_TEST(fusion_eltwise_chain) {
  nr_graph *g = tg_graph(13);
  int64_t xd[3] = {2, 3, 4}, yd[2] = {3, 1};
  int x = tg_input(g, "x", 3, xd), b = tg_input(g, "b", 2, yd);
  int a[3] = {fg_scalar(g, "one", 1.0f), x};
  int v = tg_node(g, "Sub", "sub", 2, a); /* 1 - x: swapped */
  a[0] = v, a[1] = b;
  v = tg_node(g, "Mul", "mul", 2, a); /* broadcast input */
  v = tg_node(g, "Sigmoid", "sig", 1, &v);
  a[0] = v, a[1] = fg_scalar(g, "two", 2.0f);
  v = tg_node(g, "Pow", "pow", 2, a);
  a[0] = x, a[1] = v;
  v = tg_node(g, "Mul", "mulx", 2, a); /* reads X0 again */
  a[0] = v, a[1] = fg_scalar(g, "lo", -0.3f), a[2] = fg_scalar(g, "hi", 0.3f);
  v = tg_node(g, "Clip", "clip", 3, a);
  if (tg_finish(t, g, v))
    check_small(t, g, "eltwise.fuse", 1, "EltwiseChain", 1);
}

/* A value read twice ends a chain: Relu -> (Neg, Abs) -> Add. */
NR_TEST(fusion_eltwise_branch) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {3, 5};
  int x = tg_input(g, "x", 2, xd);
  int r = tg_node(g, "Relu", "relu", 1, &x);
  int a[2] = {tg_node(g, "Neg", "neg", 1, &r), tg_node(g, "Abs", "abs", 1, &r)};
  int v = tg_node(g, "Add", "add", 2, a);
  v = tg_node(g, "Exp", "exp", 1, &v);
  if (tg_finish(t, g, v))
    check_small(t, g, "eltwise.fuse", 1, "EltwiseChain", 1);
}

/* A lone Pow (no fast tactic of its own) runs as a one-step chain, with its running
 * value the input of the output's shape (here the second: swapped), and no knob; a
 * lone Add keeps its own fast tactic. */
NR_TEST(fusion_eltwise_single) {
  for (int k = 0; k < 2; k++) {
    nr_graph *g = tg_graph(13);
    int64_t xd[3] = {2, 3, 4}, yd[2] = {3, 1};
    int x = tg_input(g, "x", 3, xd), b = tg_input(g, "b", 2, yd);
    int a[2] = {b, x};
    int v = tg_node(g, k ? "Add" : "Pow", "op", 2, a);
    if (tg_finish(t, g, v))
      check_small(t, g, "eltwise.fuse", 0, "EltwiseChain", k ? 0 : 1);
  }
}

/* A Cast to its input's own dtype is a copy that preparing the model drops
 * (nr_graph_fold_constants), so Sqrt and Neg around it make one chain. */
static nr_graph *cast_between(nr_test_state *t, int *out) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {3, 5};
  int x = tg_input(g, "x", 2, xd);
  int v = tg_node(g, "Sqrt", "sqrt", 1, &x);
  v = tg_node(g, "Cast", "cast", 1, &v);
  nr_pu_set_attr_int(g, last_node(g), "to", NR_DTYPE_FLOAT, NULL);
  *out = tg_node(g, "Neg", "neg", 1, &v);
  if (!tg_finish(t, g, *out))
    return NULL;
  nr_error err = {0};
  CHECK(!nr_graph_fold_constants(g, &err), "%s", err.message); /* as loading does */
  return g;
}

NR_TEST(fusion_cast_to_same_dtype) {
  int v;
  nr_graph *g = cast_between(t, &v);
  if (g)
    check_small(t, g, "eltwise.fuse", 1, "Cast", 0);
  if ((g = cast_between(t, &v)))
    check_small(t, g, "eltwise.fuse", 1, "EltwiseChain", 1);
}

/* ---- transpose and fold ---------------------------------------------------------------- */

static int transpose(nr_graph *g, const char *name, int x, int rank, const int64_t *perm) {
  int y = tg_node(g, "Transpose", name, 1, &x);
  nr_pu_set_attr_ints(g, last_node(g), "perm", rank, perm, NULL);
  return y;
}

NR_TEST(fusion_transpose_patterns) {
  static const int64_t p021[3] = {0, 2, 1}, p102[3] = {1, 0, 2}, p012[3] = {0, 1, 2};
  const int64_t *firsts[3] = {p021, p102, p012};
  int want[3] = {0, 1, 0};
  for (int v = 0; v < 3; v++) {
    nr_graph *g = tg_graph(13);
    int64_t xd[3] = {2, 3, 4};
    int y = transpose(g, "t1", tg_input(g, "x", 3, xd), 3, firsts[v]);
    if (v < 2)
      y = transpose(g, "t2", y, 3, p021);
    y = tg_node(g, "Relu", "relu", 1, &y);
    if (tg_finish(t, g, y))
      check_small(t, g, "transpose.elim", 1, "Transpose", want[v]);
  }
}

NR_TEST(fusion_transpose_into_gemm) {
  static const int64_t p10[2] = {1, 0};
  for (int side = 0; side < 2; side++) {
    nr_graph *g = tg_graph(13);
    int64_t ad[2] = {side ? 6 : 4, side ? 4 : 6}, bd[2] = {5, 6};
    int a = tg_input(g, "a", 2, ad), b = tg_input(g, "b", 2, bd);
    int ins[2] = {side ? transpose(g, "ta", a, 2, p10) : a, transpose(g, "tb", b, 2, p10)};
    int y = tg_node(g, "MatMul", "mm", 2, ins);
    if (tg_finish(t, g, y))
      check_small(t, g, "transpose.elim", 1, "FusedGemm", 1);
  }
}

NR_TEST(fusion_fold_constants) {
  static const int64_t p10[2] = {1, 0};
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {2, 6}, wd[2] = {6, 2};
  int a[2] = {tg_input(g, "x", 2, xd),
              transpose(g, "tw", fg_const(g, "w", 2, wd, -1, 2, 5), 2, p10)};
  int y = tg_node(g, "Add", "add", 2, a);
  if (tg_finish(t, g, y))
    check_small(t, g, "fold.constants", 1, "Transpose", 0);
}

/* ---- real models ---------------------------------------------------------------------- */

/* build/models of the source tree (NR_MODELS_DIR overrides). */
static const char *models_dir(char *buf, size_t cap) {
  const char *env = getenv("NR_MODELS_DIR");
  const char *cut = strstr(__FILE__, "/tests/unit/");
  if (env)
    snprintf(buf, cap, "%s", env);
  else
    snprintf(buf, cap, "%.*s/build/models", cut ? (int)(cut - __FILE__) : 1,
             cut ? __FILE__ : ".");
  return buf;
}

static nr_model *load_model(nr_test_state *t, const char *name, const char *input,
                            nr_value **inputs) {
  char path[1024], dir[512];
  nr_error err = {0};
  nr_model *m = NULL;
  models_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
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
  snprintf(path, sizeof path, "%s/%s/%s.npy", dir, name, input);
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

typedef struct model_case {
  const char *name, *input;
  int conv_act, gemm_act, eltwise; /* expected instance counts */
  const char *fused_op;            /* the default route makes some of these */
} model_case;

static void check_model(nr_test_state *t, const model_case *mc) {
  nr_value *in;
  nr_model *m = load_model(t, mc->name, mc->input, &in);
  nr_graph *g = NULL;
  nr_error err = {0};
  subject s;
  if (!m)
    return;
  if (nr_graph_clone(nr_model_graph(m), NULL, &g, &err) || !setup(t, &s, g, in)) {
    CHECK(false, "%s: %s", mc->name, err.message);
    nr_graph_destroy(g);
    nr_model_destroy(m);
    return;
  }
  fprintf(stderr, "  %s: conv_act %d gemm_act %d eltwise %d bn %d transpose %d fold %d\n",
          mc->name, count_inst(&s, "fuse.conv_act"), count_inst(&s, "fuse.gemm_act"),
          count_inst(&s, "eltwise.fuse"), count_inst(&s, "fuse.bn"),
          count_inst(&s, "transpose.elim"), count_inst(&s, "fold.constants"));
  CHECK(count_inst(&s, "fuse.conv_act") == mc->conv_act, "%s conv_act", mc->name);
  CHECK(count_inst(&s, "fuse.gemm_act") == mc->gemm_act, "%s gemm_act", mc->name);
  CHECK(count_inst(&s, "eltwise.fuse") == mc->eltwise, "%s eltwise", mc->name);
  check_knobs(t, &s, false);
  for (int i = 0; knob_names[i]; i++)
    if (count_inst(&s, knob_names[i]))
      check_pinned(t, &s, knob_names[i]);
  nr_graph *c = rewrite(t, &s, "");
  CHECK(c && count_op(c, mc->fused_op) > 0, "%s: no %s by default", mc->name, mc->fused_op);
  nr_graph_destroy(c);
  teardown(&s);
  nr_model_destroy(m);
}

NR_TEST(fusion_model_resnet18) {
  check_model(t, &(model_case){"resnet18_op13", "input", 17, 0, 0, "FusedConv"});
}

NR_TEST(fusion_model_mobilenet_v2) {
  check_model(t, &(model_case){"mobilenet_v2_op13", "input", 45, 0, 0, "FusedConv"});
}

NR_TEST(fusion_model_efficientnet_b0) {
  check_model(t, &(model_case){"efficientnet_b0_op13", "input", 74, 0, 0, "FusedConv"});
}

NR_TEST(fusion_model_bert_tiny) {
  check_model(t, &(model_case){"bert_tiny_op17", "input_ids", 0, 16, 0, "FusedMatMul"});
}
