/* fuse_conv.c - the passes fuse_bn and fuse_act: folding BatchNormalization into
 * the weights of the Conv / Gemm / MatMul before it (and a per-channel constant Mul,
 * with the Add after it, into a Conv: the BatchNormalization some exporters spell
 * out), and fusing a Conv, Gemm or
 * MatMul with the constant bias Add, residual Add and activation behind it into
 * nnroute.FusedConv / FusedGemm / FusedMatMul (ir/fused.h).
 *
 * Key decision: one matcher (match_anchor) describes what fuse_act would swallow
 * behind an anchor node for a given knob value. The pass rewrites what it returns,
 * the knobs' applies/valid functions ask it on the prepared graph (so a knob is listed
 * only where a value changes the graph, and a value only where it differs from the
 * others), and nr_fuse_act_absorbs lets the elementwise pass leave alone what fuse_act
 * takes by default. A residual Add is claimed by the anchor feeding its first input
 * when both inputs come from anchors that can add it, so exactly one knob steers each
 * Add. A Gemm/MatMul takes the residual as a Conv does (bert's two residual Adds per
 * layer: on two threads each ran 2.3x its one-thread time, reading the product back
 * from both cores' caches). */
#include "ir/dtype.h"
#include "ir/fused.h"
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum fuse_mode { MODE_NONE, MODE_BIAS_ACT, MODE_RESIDUAL } fuse_mode;

typedef struct fuse_match {
  int anchor;               /* node index of the Conv / Gemm / MatMul */
  int bias_add, bias;       /* constant bias Add and its constant, or -1 */
  int res_add, res;         /* residual Add and the residual tensor, or -1 */
  nr_pu_act act;            /* act.act == NR_ACT_NONE when none */
  int out;                  /* the tensor the fused node produces */
} fuse_match;

static bool is_float_conv(const nr_graph *g, const nr_node *n) {
  int y = n->n_outputs == 1 ? n->outputs[0] : -1;
  return nr_pu_is_op(n, "Conv") && y >= 0 && g->tensors[y].value.dtype == NR_DTYPE_FLOAT &&
         g->tensors[y].value.rank >= 3 && nr_value_shape_known(&g->tensors[y].value);
}

/* Gemm, or MatMul with a constant 2-D B, float; or a FusedGemm the transpose pass
 * made that carries nothing yet. */
static bool is_float_gemm(const nr_graph *g, const nr_node *n) {
  int y = n->n_outputs == 1 ? n->outputs[0] : -1;
  if (y < 0 || g->tensors[y].value.dtype != NR_DTYPE_FLOAT ||
      !nr_value_shape_known(&g->tensors[y].value))
    return false;
  int b = nr_pu_in(n, 1);
  if (nr_pu_is_op(n, "MatMul"))
    return nr_pu_is_const(g, b) && g->tensors[b].value.rank == 2;
  if (nr_pu_is_op(n, "Gemm"))
    return nr_pu_is_const(g, b);
  return !strcmp(n->op_type, "FusedGemm") && !strcmp(n->domain, NR_DOMAIN) &&
         n->n_inputs <= 2 && !strcmp(nr_attr_string(n, "activation", "none"), "none");
}

/* The only reader of t (not a graph output), or -1. */
static int sole_reader(const nr_graph *g, const int *readers, const bool *dead, int t) {
  int r[2];
  if (t < 0 || readers[t] != 1 || nr_pu_reader_nodes(g, dead, t, r, 2) != 1)
    return -1;
  return r[0];
}

/* A constant c broadcasting to y on a single axis `axis` only (others 1). */
static bool per_axis_const(const nr_graph *g, int c, const nr_value *y, int axis) {
  if (!nr_pu_is_const(g, c) || g->tensors[c].value.dtype != NR_DTYPE_FLOAT)
    return false;
  const nr_value *v = &g->tensors[c].value;
  if (v->rank > y->rank)
    return false;
  for (int d = v->rank - 1, e = y->rank - 1; d >= 0; d--, e--)
    if (v->dims[d] != 1 && (e != axis || v->dims[d] != y->dims[e]))
      return false;
  return true;
}

/* An Add reading t and one other input; returns its node and sets *other. */
static int add_after(const nr_graph *g, const int *readers, const bool *dead, int t,
                     int *other) {
  int r = sole_reader(g, readers, dead, t);
  if (r < 0 || !nr_pu_is_op(&g->nodes[r], "Add") || g->nodes[r].n_inputs != 2)
    return -1;
  const nr_node *a = &g->nodes[r];
  if (a->inputs[0] == a->inputs[1])
    return -1;
  *other = a->inputs[0] == t ? a->inputs[1] : a->inputs[0];
  return r;
}

/* Gemm's C as a per-column vector: absent, a scalar, [N] or [1, N]. */
static bool gemm_c_ok(const nr_graph *g, int c, int64_t n);

/* Can anchor n add a residual in its epilogue? A Conv, a MatMul, or a Gemm whose C (if
 * any) is a bias vector: a full C matrix is already the residual operand (the kernels
 * take one), and fuse_act gives it none. */
static bool takes_residual(const nr_graph *g, const nr_node *n) {
  if (is_float_conv(g, n))
    return true;
  if (!is_float_gemm(g, n))
    return false;
  const nr_value *y = &g->tensors[n->outputs[0]].value;
  return !nr_pu_is_op(n, "Gemm") || gemm_c_ok(g, nr_pu_in(n, 2), y->dims[y->rank - 1]);
}

/* Is t's producer an anchor a residual Add could also be claimed by? */
static bool anchor_fed(const nr_graph *g, const int *readers, int t) {
  const nr_node *p = nr_pu_cproducer(g, t);
  return p && readers[t] == 1 && takes_residual(g, p);
}

static void match_bias(const nr_graph *g, const int *readers, const bool *dead,
                       fuse_match *m) {
  const nr_node *a = &g->nodes[m->anchor];
  const nr_value *y = &g->tensors[m->out].value;
  bool conv = is_float_conv(g, a);
  if (!conv && (nr_pu_in(a, 2) >= 0 || nr_pu_is_output(g, m->out)))
    return; /* a Gemm with C keeps its C; the Add stays an Add */
  int c, r = add_after(g, readers, dead, m->out, &c);
  if (r < 0 || !per_axis_const(g, c, y, conv ? 1 : y->rank - 1))
    return;
  if (!conv && nr_pu_is_op(a, "MatMul") && g->tensors[c].value.rank != 1)
    return; /* FusedMatMul's Bias is the vector along the last axis */
  m->bias_add = r;
  m->bias = c;
  m->out = g->nodes[r].outputs[0];
}

static void match_residual(const nr_graph *g, const int *readers, const bool *dead,
                           fuse_match *m) {
  int other, r = add_after(g, readers, dead, m->out, &other);
  if (r < 0 || other < 0)
    return;
  const nr_value *y = &g->tensors[m->out].value, *v = &g->tensors[other].value;
  bool same = v->dtype == y->dtype && v->rank == y->rank;
  for (int d = 0; same && d < y->rank; d++)
    same = v->dims[d] == y->dims[d];
  if (!same || (g->nodes[r].inputs[1] == m->out && anchor_fed(g, readers, other)))
    return;
  m->res_add = r;
  m->res = other;
  m->out = g->nodes[r].outputs[0];
}

/* What fuse_act swallows behind node k in mode, starting from tensor `from` (k's
 * output, or a BatchNormalization's output that fuse_bn will give k); false when
 * nothing. */
static bool match_from(const nr_graph *g, const int *readers, const bool *dead, int k,
                       int from, fuse_mode mode, fuse_match *m) {
  const nr_node *n = &g->nodes[k];
  memset(m, 0, sizeof *m);
  m->anchor = k;
  m->bias_add = m->bias = m->res_add = m->res = -1;
  m->act.act = NR_ACT_NONE;
  bool conv = is_float_conv(g, n);
  if (mode == MODE_NONE || (!conv && !is_float_gemm(g, n)))
    return false;
  m->out = from;
  match_bias(g, readers, dead, m);
  if (mode == MODE_RESIDUAL && takes_residual(g, n))
    match_residual(g, readers, dead, m);
  if (nr_pu_match_act(g, readers, dead, m->out, &m->act))
    m->out = m->act.out;
  else
    m->act.act = NR_ACT_NONE;
  return m->bias_add >= 0 || m->res_add >= 0 || m->act.act != NR_ACT_NONE;
}

static bool match_anchor(const nr_graph *g, const int *readers, const bool *dead, int k,
                         fuse_mode mode, fuse_match *m) {
  return match_from(g, readers, dead, k, g->nodes[k].outputs[0], mode, m);
}

static bool match_differs(const fuse_match *a, const fuse_match *b) {
  return a->bias_add != b->bias_add || a->res_add != b->res_add || a->out != b->out;
}

/* ---- rewriting -------------------------------------------------------------------- */

/* Conv's bias plus the constant bias Add's values, as a new [M] constant. */
static int merged_conv_bias(nr_graph *g, const fuse_match *m, nr_error *err) {
  const nr_node *a = &g->nodes[m->anchor];
  int64_t mch = g->tensors[a->outputs[0]].value.dims[1];
  nr_value b = {0};
  if (nr_value_alloc(&b, NR_DTYPE_FLOAT, 1, &mch, err))
    return -1;
  float *pb = b.data;
  int ob = nr_pu_in(a, 2);
  for (int64_t c = 0; c < mch; c++) {
    float base = ob >= 0 ? (float)nr_value_get_f64(&g->tensors[ob].value, c) : 0.0f;
    const nr_value *cv = &g->tensors[m->bias].value;
    pb[c] = base + (float)nr_value_get_f64(cv, nr_value_count(cv) == 1 ? 0 : c);
  }
  int t = nr_pu_add_const(g, a->name, "/fused_bias", &b);
  if (t < 0)
    nr_errorf(err, NR_ERR_NOMEM, "out of memory adding a fused bias");
  return t;
}

/* Inputs of the fused node: base inputs, then Bias/C, then R. */
static int fused_inputs(nr_graph *g, const fuse_match *m, int *ins, nr_error *err) {
  const nr_node *a = &g->nodes[m->anchor];
  bool conv = is_float_conv(g, a);
  ins[0] = a->inputs[0];
  ins[1] = a->inputs[1];
  ins[2] = nr_pu_in(a, 2);
  if (m->bias >= 0)
    ins[2] = conv ? merged_conv_bias(g, m, err) : m->bias;
  if (m->bias >= 0 && ins[2] < 0)
    return -1;
  ins[3] = m->res;
  int n = 4;
  while (n > 2 && ins[n - 1] < 0)
    n--;
  return n;
}

static const char *fused_type(const nr_node *a) {
  if (nr_pu_is_op(a, "Conv"))
    return "FusedConv";
  return nr_pu_is_op(a, "MatMul") ? "FusedMatMul" : "FusedGemm";
}

static nr_status add_act_attrs(nr_graph *g, int k, const nr_pu_act *act, nr_error *err) {
  nr_status st = nr_pu_set_attr_string(g, k, "activation", nr_act_name(act->act), err);
  if (!st && (act->act == NR_ACT_CLIP || act->act == NR_ACT_LEAKY_RELU ||
              act->act == NR_ACT_HARD_SIGMOID))
    st = nr_pu_set_attr_float(g, k, "act_alpha", act->a, err);
  if (!st && (act->act == NR_ACT_CLIP || act->act == NR_ACT_HARD_SIGMOID))
    st = nr_pu_set_attr_float(g, k, "act_beta", act->b, err);
  return st;
}

static void mark_swallowed(const fuse_match *m, bool *dead) {
  dead[m->anchor] = true;
  if (m->bias_add >= 0)
    dead[m->bias_add] = true;
  if (m->res_add >= 0)
    dead[m->res_add] = true;
  for (int i = 0; m->act.act != NR_ACT_NONE && i < m->act.n_nodes; i++)
    dead[m->act.nodes[i]] = true;
}

static nr_status rewrite(nr_graph *g, const fuse_match *m, bool *dead, nr_error *err) {
  int ins[4];
  int n_in = fused_inputs(g, m, ins, err);
  if (n_in < 0)
    return err ? err->status : NR_ERR_NOMEM;
  const nr_node *a = &g->nodes[m->anchor];
  char *name = strdup(a->name);
  int k = name ? nr_pu_add_node(g, name, fused_type(a), NR_DOMAIN, n_in, ins, 1, &m->out)
               : -1;
  free(name);
  if (k < 0)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory fusing node '%s'", a->name);
  nr_status st = NR_OK;
  for (int i = 0; !st && i < g->nodes[m->anchor].n_attrs; i++)
    if (strcmp(g->nodes[m->anchor].attrs[i].name, "activation"))
      st = nr_pu_copy_attr(g, k, &g->nodes[m->anchor].attrs[i], err);
  if (!st)
    st = add_act_attrs(g, k, &m->act, err);
  mark_swallowed(m, dead);
  return st;
}

static fuse_mode route_mode(const nr_route *r, const nr_node *n) {
  const char *v =
      nr_route_get(r, nr_pu_is_op(n, "Conv") ? NR_KNOB_FUSE_CONV_ACT : NR_KNOB_FUSE_GEMM_ACT, n);
  if (!v || !strcmp(v, "none"))
    return MODE_NONE;
  return !strcmp(v, "bias_act") ? MODE_BIAS_ACT : MODE_RESIDUAL;
}

/* Dead-node marks with room for the nodes a pass appends (each rewrite appends one
 * node and marks at least one, so twice the count plus slack is enough). */
static bool *alloc_marks(const nr_graph *g) {
  return calloc((size_t)(2 * g->n_nodes + 8), sizeof(bool));
}

static nr_status run_fuse_act(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  int n0 = g->n_nodes;
  int *readers = nr_pu_readers(g);
  bool *dead = alloc_marks(g);
  nr_status st = readers && dead ? NR_OK
                                 : nr_errorf(c->err, NR_ERR_NOMEM, "out of memory in fuse_act");
  bool changed = false;
  for (int k = 0; !st && k < n0; k++) {
    fuse_match m;
    if (dead[k] || !match_anchor(g, readers, dead, k, route_mode(c->route, &g->nodes[k]), &m))
      continue;
    if (!(st = nr_pu_import_nnroute(g, c->err)))
      st = rewrite(g, &m, dead, c->err);
    changed = true;
  }
  if (!st && changed)
    st = nr_pu_remove_marked(g, dead, c->err);
  free(readers);
  free(dead);
  return st;
}

const nr_pass nr_pass_fuse_act = {"fuse_act", run_fuse_act};

/* ---- fuse_bn ---------------------------------------------------------------------- */

/* A float constant vector of n elements ([n]). */
static bool const_vec(const nr_graph *g, int t, int64_t n) {
  const nr_value *v = t >= 0 ? &g->tensors[t].value : NULL;
  return nr_pu_is_const(g, t) && nr_dtype_is_float(v->dtype) && v->rank == 1 &&
         v->dims[0] == n;
}

/* Gemm's C as a per-column vector: absent, a scalar, [N] or [1, N]. */
static bool gemm_c_ok(const nr_graph *g, int c, int64_t n) {
  if (c < 0)
    return true;
  const nr_value *v = &g->tensors[c].value;
  if (!nr_pu_is_const(g, c) || !nr_dtype_is_float(v->dtype))
    return false;
  return nr_value_count(v) == 1 || (v->rank == 1 && v->dims[0] == n) ||
         (v->rank == 2 && v->dims[0] == 1 && v->dims[1] == n);
}

/* The producer a BN folds into, checked for its kind; -1 when it cannot take it. */
static int bn_producer(const nr_graph *g, const int *readers, int x, int64_t ch) {
  const nr_node *p = nr_pu_cproducer(g, x);
  if (!p || readers[x] != 1 || nr_pu_is_output(g, x) || p->n_outputs != 1)
    return -1;
  const nr_value *y = &g->tensors[x].value;
  int w = nr_pu_in(p, 1);
  if (!nr_pu_is_const(g, w) || g->tensors[w].value.dtype != NR_DTYPE_FLOAT)
    return -1;
  const nr_value *wv = &g->tensors[w].value;
  if (nr_pu_is_op(p, "Conv") && wv->dims[0] == ch &&
      (nr_pu_in(p, 2) < 0 || const_vec(g, nr_pu_in(p, 2), ch)))
    return g->tensors[x].producer;
  if (y->rank != 2 || wv->rank != 2)
    return -1;
  if (nr_pu_is_op(p, "Gemm") && gemm_c_ok(g, nr_pu_in(p, 2), ch))
    return g->tensors[x].producer;
  if (nr_pu_is_op(p, "MatMul") && g->tensors[nr_pu_in(p, 0)].value.rank == 2)
    return g->tensors[x].producer;
  return -1;
}

/* The producer index when BatchNormalization n can be folded, else -1. */
static int bn_fold_target(const nr_graph *g, const int *readers, const nr_node *n) {
  if (!nr_pu_is_op(n, "BatchNormalization") || n->n_inputs != 5 ||
      nr_attr_int(n, "training_mode", 0) != 0 || nr_attr_int(n, "spatial", 1) != 1)
    return -1;
  for (int o = 1; o < n->n_outputs; o++)
    if (n->outputs[o] >= 0 && readers[n->outputs[o]] > 0)
      return -1;
  int x = n->inputs[0];
  const nr_value *xv = &g->tensors[x].value;
  if (xv->dtype != NR_DTYPE_FLOAT || xv->rank < 2 || !nr_value_shape_known(xv))
    return -1;
  for (int i = 1; i < 5; i++)
    if (!const_vec(g, n->inputs[i], xv->dims[1]))
      return -1;
  return bn_producer(g, readers, x, xv->dims[1]);
}

/* scale = gamma / sqrt(var + eps), shift = beta - mean * scale, in double. */
static bool bn_params(const nr_graph *g, const nr_node *n, int64_t ch, double *scale,
                      double *shift) {
  double eps = nr_attr_float(n, "epsilon", 1e-5f);
  const nr_value *v[4];
  for (int i = 0; i < 4; i++)
    v[i] = &g->tensors[n->inputs[i + 1]].value;
  for (int64_t c = 0; c < ch; c++) {
    scale[c] = nr_value_get_f64(v[0], c) / sqrt(nr_value_get_f64(v[3], c) + eps);
    shift[c] = nr_value_get_f64(v[1], c) - nr_value_get_f64(v[2], c) * scale[c];
  }
  return true;
}

/* A copy of W scaled per output channel; chan_of maps an element to its channel. */
static int scaled_weights(nr_graph *g, int w, const double *scale, int64_t inner,
                          bool per_row, int64_t cols, const char *base, nr_error *err) {
  nr_value nw = {0};
  if (nr_value_copy(&nw, &g->tensors[w].value, err))
    return -1;
  float *p = nw.data;
  int64_t n = nr_value_count(&nw);
  for (int64_t i = 0; i < n; i++)
    p[i] = (float)(p[i] * scale[per_row ? i / inner : i % cols]);
  int t = nr_pu_add_const(g, base, "/bn_weights", &nw);
  if (t < 0)
    nr_errorf(err, NR_ERR_NOMEM, "out of memory folding a BatchNormalization");
  return t;
}

/* New bias: scale * (coef * old) + shift, old read from tensor ob (or 0). */
static int folded_bias(nr_graph *g, int ob, double coef, const double *scale,
                       const double *shift, int64_t ch, const char *base, nr_error *err) {
  nr_value b = {0};
  if (nr_value_alloc(&b, NR_DTYPE_FLOAT, 1, &ch, err))
    return -1;
  const nr_value *ov = ob >= 0 ? &g->tensors[ob].value : NULL;
  for (int64_t c = 0; c < ch; c++) {
    double old = ov ? nr_value_get_f64(ov, nr_value_count(ov) == 1 ? 0 : c) : 0.0;
    ((float *)b.data)[c] = (float)(scale[c] * coef * old + shift[c]);
  }
  int t = nr_pu_add_const(g, base, "/bn_bias", &b);
  if (t < 0)
    nr_errorf(err, NR_ERR_NOMEM, "out of memory folding a BatchNormalization");
  return t;
}

static nr_status set_inputs3(nr_node *p, int w, int b, nr_error *err) {
  if (p->n_inputs < 3) {
    int *ins = realloc(p->inputs, sizeof(int) * 3);
    if (!ins)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory folding a BatchNormalization");
    p->inputs = ins;
    p->n_inputs = 3;
  }
  p->inputs[1] = w;
  p->inputs[2] = b;
  return NR_OK;
}

/* Gemm: beta becomes 1 (it now multiplies the folded C). MatMul becomes that Gemm. */
static nr_status as_gemm(nr_graph *g, int k, nr_error *err) {
  nr_node *p = &g->nodes[k];
  if (nr_pu_is_op(p, "MatMul")) {
    char *op = strdup("Gemm");
    if (!op)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory folding a BatchNormalization");
    free(p->op_type);
    p->op_type = op;
    return NR_OK;
  }
  for (int i = 0; i < p->n_attrs; i++)
    if (!strcmp(p->attrs[i].name, "beta")) {
      p->attrs[i].type = NR_ATTR_FLOAT;
      p->attrs[i].f = 1.0f;
      return NR_OK;
    }
  return NR_OK; /* absent: beta defaults to 1 */
}

static nr_status fold_bn(nr_graph *g, int bn, int k, double *scale, double *shift,
                         nr_error *err) {
  const nr_node *n = &g->nodes[bn];
  const nr_node *p = &g->nodes[k];
  int64_t ch = g->tensors[n->inputs[0]].value.dims[1];
  bn_params(g, n, ch, scale, shift);
  const nr_value *wv = &g->tensors[p->inputs[1]].value;
  bool conv = nr_pu_is_op(p, "Conv"), trans_b = nr_attr_int(p, "transB", 0) != 0;
  double coef = conv || nr_pu_is_op(p, "MatMul") ? 1.0 : nr_attr_float(p, "beta", 1.0f);
  int64_t inner = nr_value_count(wv) / wv->dims[0];
  char *base = strdup(p->name);
  int w = base ? scaled_weights(g, p->inputs[1], scale, inner, conv || trans_b,
                                wv->dims[wv->rank - 1], base, err) : -1;
  int b = w >= 0 ? folded_bias(g, nr_pu_in(&g->nodes[k], 2), coef, scale, shift, ch,
                               base, err) : -1;
  free(base);
  if (w < 0 || b < 0)
    return err && err->status ? err->status : NR_ERR_NOMEM;
  nr_status st = set_inputs3(&g->nodes[k], w, b, err);
  if (!st && !conv)
    st = as_gemm(g, k, err);
  if (!st)
    g->nodes[k].outputs[0] = g->nodes[bn].outputs[0];
  return st;
}

/* ---- fuse_bn: an unfolded BatchNormalization (per-channel Mul, then Add) ---------- */

/* What a per-channel constant Mul after a Conv folds into it: the Mul, the per-channel
 * constant Add reading the Mul's output (or -1), their constants and the last output. */
typedef struct affine_match {
  int conv, mul, add;
  int scale, shift; /* constants; shift -1 when there is no Add */
  int out;
} affine_match;

/* The constant operand of two-input node n whose other input is x, when it broadcasts
 * per channel of x (axis 1; [C,1,1], [1,C,1,1] or a scalar); else -1. */
static int per_channel_operand(const nr_graph *g, const nr_node *n, int x) {
  if (n->n_inputs != 2 || n->n_outputs != 1 || n->inputs[0] == n->inputs[1])
    return -1;
  int c = n->inputs[0] == x ? n->inputs[1] : n->inputs[1] == x ? n->inputs[0] : -1;
  if (c < 0 || !per_axis_const(g, c, &g->tensors[x].value, 1))
    return -1;
  return c;
}

/* Is Mul node k a per-channel scale of a Conv output that only it reads? Fills m. */
static bool affine_target(const nr_graph *g, const int *readers, int k, affine_match *m) {
  const nr_node *n = &g->nodes[k];
  if (!nr_pu_is_op(n, "Mul"))
    return false;
  for (int i = 0; i < n->n_inputs && i < 2; i++) {
    int x = n->inputs[i];
    const nr_node *p = nr_pu_cproducer(g, x);
    if (!p || !is_float_conv(g, p))
      continue;
    int ch = (int)g->tensors[x].value.dims[1];
    if (bn_producer(g, readers, x, ch) < 0 || (m->scale = per_channel_operand(g, n, x)) < 0)
      continue;
    m->conv = g->tensors[x].producer;
    m->mul = k;
    m->out = n->outputs[0];
    m->add = m->shift = -1;
    int r = nr_pu_is_output(g, m->out) ? -1 : sole_reader(g, readers, NULL, m->out);
    if (r >= 0 && nr_pu_is_op(&g->nodes[r], "Add") &&
        (m->shift = per_channel_operand(g, &g->nodes[r], m->out)) >= 0) {
      m->add = r;
      m->out = g->nodes[r].outputs[0];
    }
    return true;
  }
  return false;
}

/* Conv weights times the Mul's constant, bias times it plus the Add's constant. */
static nr_status fold_affine(nr_graph *g, const affine_match *m, nr_error *err) {
  const nr_node *p = &g->nodes[m->conv];
  const nr_value *wv = &g->tensors[p->inputs[1]].value;
  int64_t ch = wv->dims[0];
  double *scale = malloc(sizeof(double) * (size_t)ch);
  double *shift = malloc(sizeof(double) * (size_t)ch);
  char *base = strdup(p->name);
  int w = -1, b = -1;
  if (scale && shift && base) {
    const nr_value *sv = &g->tensors[m->scale].value;
    const nr_value *tv = m->shift >= 0 ? &g->tensors[m->shift].value : NULL;
    for (int64_t c = 0; c < ch; c++) {
      scale[c] = nr_value_get_f64(sv, nr_value_count(sv) == 1 ? 0 : c);
      shift[c] = tv ? nr_value_get_f64(tv, nr_value_count(tv) == 1 ? 0 : c) : 0.0;
    }
    w = scaled_weights(g, p->inputs[1], scale, nr_value_count(wv) / ch, true, 1, base, err);
    if (w >= 0)
      b = folded_bias(g, nr_pu_in(&g->nodes[m->conv], 2), 1.0, scale, shift, ch, base, err);
  }
  free(scale);
  free(shift);
  free(base);
  if (w < 0 || b < 0)
    return err && err->status ? err->status
                              : nr_errorf(err, NR_ERR_NOMEM, "out of memory in fuse_bn");
  nr_status st = set_inputs3(&g->nodes[m->conv], w, b, err);
  if (!st)
    g->nodes[m->conv].outputs[0] = m->out;
  return st;
}

static nr_status run_fuse_affine(nr_compile_ctx *c, const int *readers, bool *dead,
                                 bool *changed) {
  nr_graph *g = c->graph;
  nr_status st = NR_OK;
  for (int k = 0; !st && k < g->n_nodes; k++) {
    affine_match m;
    if (dead[k] || !affine_target(g, readers, k, &m) || dead[m.conv] ||
        (m.add >= 0 && dead[m.add]) ||
        !nr_route_is(c->route, NR_KNOB_FUSE_CONV_SCALE, &g->nodes[k], "on"))
      continue;
    st = fold_affine(g, &m, c->err);
    dead[m.mul] = *changed = true;
    if (m.add >= 0)
      dead[m.add] = true;
  }
  return st;
}

static nr_status run_fuse_bn(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  int *readers = nr_pu_readers(g);
  bool *dead = alloc_marks(g);
  double *scale = NULL, *shift = NULL;
  nr_status st = readers && dead ? NR_OK
                                 : nr_errorf(c->err, NR_ERR_NOMEM, "out of memory in fuse_bn");
  bool changed = false;
  for (int k = 0; !st && k < g->n_nodes; k++) {
    int p = bn_fold_target(g, readers, &g->nodes[k]);
    if (p < 0 || dead[p] || !nr_route_is(c->route, NR_KNOB_FUSE_BN, &g->nodes[k], "on"))
      continue;
    int64_t ch = g->tensors[g->nodes[k].inputs[0]].value.dims[1];
    free(scale);
    free(shift);
    scale = malloc(sizeof(double) * (size_t)ch);
    shift = malloc(sizeof(double) * (size_t)ch);
    st = scale && shift ? fold_bn(g, k, p, scale, shift, c->err)
                        : nr_errorf(c->err, NR_ERR_NOMEM, "out of memory in fuse_bn");
    dead[k] = changed = true;
  }
  if (!st)
    st = run_fuse_affine(c, readers, dead, &changed);
  if (!st && changed)
    st = nr_pu_remove_marked(g, dead, c->err);
  free(scale);
  free(shift);
  free(readers);
  free(dead);
  return st;
}

const nr_pass nr_pass_fuse_bn = {"fuse_bn", run_fuse_bn};

/* ---- knobs ------------------------------------------------------------------------ */

static int node_index(const nr_graph *g, const nr_node *n) {
  return (int)(n - g->nodes);
}

static bool bn_applies(const nr_graph *g, const nr_node *n) {
  int *readers = nr_pu_readers(g);
  bool ok = readers && bn_fold_target(g, readers, n) >= 0;
  free(readers);
  return ok;
}

static bool conv_scale_applies(const nr_graph *g, const nr_node *n) {
  int *readers = nr_pu_readers(g);
  affine_match m;
  bool ok = readers && affine_target(g, readers, node_index(g, n), &m);
  free(readers);
  return ok;
}

/* Is n's output read by a BatchNormalization (or a per-channel Mul and Add) fuse_bn
 * folds into n? Then fuse_act sees the folded output in n's place. */
static bool through_bn(const nr_graph *g, const int *readers, const nr_node *n, int *out) {
  int r[2];
  affine_match m;
  if (n->n_outputs != 1 || nr_pu_reader_nodes(g, NULL, n->outputs[0], r, 2) != 1)
    return false;
  if (affine_target(g, readers, r[0], &m) && m.conv == node_index(g, n)) {
    *out = m.out;
    return true;
  }
  if (bn_fold_target(g, readers, &g->nodes[r[0]]) != node_index(g, n))
    return false;
  *out = g->nodes[r[0]].outputs[0];
  return true;
}

/* match_anchor on the prepared graph, looking through a BN that fuse_bn folds. */
static bool match_prepared(const nr_graph *g, const nr_node *n, fuse_mode mode,
                           fuse_match *m) {
  int *readers = nr_pu_readers(g);
  if (!readers)
    return false;
  bool ok = match_anchor(g, readers, NULL, node_index(g, n), mode, m);
  int bn_out;
  if (!ok && through_bn(g, readers, n, &bn_out))
    ok = match_from(g, readers, NULL, node_index(g, n), bn_out, mode, m);
  free(readers);
  return ok;
}

static bool conv_act_applies(const nr_graph *g, const nr_node *n) {
  fuse_match m;
  return nr_pu_is_op(n, "Conv") && match_prepared(g, n, MODE_RESIDUAL, &m);
}

/* none always; bias_act only where it differs from both other values. */
static uint64_t act_valid(const nr_graph *g, const nr_node *n) {
  fuse_match full, part;
  match_prepared(g, n, MODE_RESIDUAL, &full);
  bool some = match_prepared(g, n, MODE_BIAS_ACT, &part);
  return 1u | 4u | (some && match_differs(&part, &full) ? 2u : 0u);
}

static bool gemm_act_applies(const nr_graph *g, const nr_node *n) {
  fuse_match m;
  return (nr_pu_is_op(n, "Gemm") || nr_pu_is_op(n, "MatMul")) &&
         match_prepared(g, n, MODE_RESIDUAL, &m);
}

/* Is n the Mul or the Add of a per-channel scale and shift fuse_bn folds into a Conv? */
static bool affine_absorbs(const nr_graph *g, const int *readers, const nr_node *n) {
  affine_match m;
  int me = node_index(g, n);
  if (affine_target(g, readers, me, &m))
    return true;
  const nr_node *p = nr_pu_is_op(n, "Add") && n->n_inputs == 2
                         ? nr_pu_cproducer(g, n->inputs[0]) : NULL;
  if (p && !nr_pu_is_op(p, "Mul"))
    p = nr_pu_cproducer(g, n->inputs[1]);
  return p && nr_pu_is_op(p, "Mul") && affine_target(g, readers, node_index(g, p), &m) &&
         m.add == me;
}

/* Anchors within three producers of n whose default fusion swallows n, or the Conv
 * fuse_bn folds n into. */
bool nr_fuse_act_absorbs(const nr_graph *g, const nr_node *n) {
  int *readers = nr_pu_readers(g);
  int frontier[16], nf = 0, me = node_index(g, n);
  bool hit = readers && affine_absorbs(g, readers, n);
  frontier[nf++] = me;
  for (int depth = 0; readers && !hit && depth < 3; depth++) {
    int next[16], nn = 0;
    for (int f = 0; f < nf && !hit; f++)
      for (int i = 0; i < g->nodes[frontier[f]].n_inputs && nn < 16; i++) {
        const nr_node *p = nr_pu_cproducer(g, g->nodes[frontier[f]].inputs[i]);
        fuse_match m;
        if (!p)
          continue;
        next[nn++] = node_index(g, p);
        if (!match_anchor(g, readers, NULL, node_index(g, p), MODE_RESIDUAL, &m))
          continue;
        hit = m.bias_add == me || m.res_add == me ||
              (m.act.act != NR_ACT_NONE &&
               (m.act.nodes[0] == me || (m.act.n_nodes == 2 && m.act.nodes[1] == me)));
      }
    memcpy(frontier, next, sizeof(int) * (size_t)nn);
    nf = nn;
  }
  free(readers);
  return hit;
}

const nr_knob_def nr_knobs_fuse[] = {
    [NR_KNOB_ROW(NR_KNOB_FUSE_BN)] =
    {"fuse.bn", "on|off", "on", NR_KNOB_NODE, 0, 0,
     "fold this BatchNormalization into the Conv/Gemm/MatMul weights before it",
     bn_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_FUSE_CONV_ACT)] =
    {"fuse.conv_act", "none|bias_act|bias_act_residual", "bias_act_residual", NR_KNOB_NODE,
     0, 0,
     "fuse this Conv with the constant bias Add, residual Add and activation after it",
     conv_act_applies, act_valid},
    [NR_KNOB_ROW(NR_KNOB_FUSE_GEMM_ACT)] =
    {"fuse.gemm_act", "none|bias_act|bias_act_residual", "bias_act_residual", NR_KNOB_NODE,
     0, 0,
     "fuse this Gemm/MatMul (constant B) with the bias Add, residual Add and activation "
     "after it",
     gemm_act_applies, act_valid},
    [NR_KNOB_ROW(NR_KNOB_FUSE_CONV_SCALE)] =
    {"fuse.conv_scale", "on|off", "on", NR_KNOB_NODE, 0, 0,
     "fold this per-channel constant Mul (and a per-channel constant Add after it) into "
     "the Conv weights and bias before it (an unfolded BatchNormalization)",
     conv_scale_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_FUSE_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_fuse, NR_KNOB_FUSE_END);
