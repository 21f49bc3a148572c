/* recognize.c - the recognize pass: finds the decomposed forms exporters write for
 * LayerNorm, GELU and scaled-dot-product attention and replaces each by the one
 * standard ONNX operator it computes (LayerNormalization-17, Gelu-20, Attention-23),
 * so later passes and tactics see one node with one fast kernel.
 *
 * Key decision: one matcher per pattern serves both the knob table (applies/valid
 * decide where a knob instance exists) and the pass, so a knob is listed exactly
 * where the pass can act. A matcher only reads the graph; it accepts a pattern only
 * when every interior tensor has a single reader and is no graph output, so the
 * swallowed nodes can all go. The replacement takes over the pattern's last output
 * tensor (readers stay untouched) and the anchor node's name (per-node knobs keep
 * addressing it). All matches are found on the graph as it is, then applied, then
 * the swallowed nodes are removed in one compaction. */
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RZ_LAYERNORM, RZ_GELU, RZ_ATTENTION };

#define RZ_MAX_NODES 16

/* One recognized pattern: what the matcher found, what the rewrite needs. */
typedef struct rz_match {
  int kind;
  int anchor;                /* node index that names the replacement */
  int out;                   /* tensor the replacement writes */
  int nodes[RZ_MAX_NODES];   /* nodes the replacement swallows */
  int n_nodes;
  int x;                     /* LayerNorm / Gelu input */
  int scale, bias;           /* LayerNorm: constants (-1 when absent) */
  double eps;
  bool tanh_form;            /* Gelu: the pattern itself is the tanh approximation */
  int q, kt, v, mask;        /* Attention (mask -1 when absent) */
  double attn_scale;
  /* Attention with its heads folded (recognize.attention_heads=fold): the 3-D tensors
   * the head Reshape+Transposes start from and the 3-D output they end in. */
  bool fold;
  int q3, k3, v3, out3;
  int64_t q_heads, kv_heads;
  int fold_nodes[8];          /* the head Reshape+Transpose pairs of Q, K, V, Y */
} rz_match;

/* ---- small readers of the graph ------------------------------------------------- */

static void take(rz_match *m, int k) {
  if (m->n_nodes < RZ_MAX_NODES)
    m->nodes[m->n_nodes++] = k;
}

static int node_index(const nr_graph *g, const nr_node *n) {
  return n ? (int)(n - g->nodes) : -1;
}

/* The node that alone reads t (t no graph output), or NULL. */
static const nr_node *sole_reader(const nr_graph *g, int t) {
  int k = nr_pu_next_reader(g, t, -1);
  if (k < 0 || nr_pu_is_output(g, t) || nr_pu_next_reader(g, t, k) >= 0)
    return NULL;
  return &g->nodes[k];
}

static const nr_node *producer_op(const nr_graph *g, int t, const char *op) {
  const nr_node *p = t >= 0 ? nr_pu_cproducer(g, t) : NULL;
  return p && nr_pu_is_op(p, op) ? p : NULL;
}

static const nr_value *val(const nr_graph *g, int t) { return &g->tensors[t].value; }

/* A constant float with one element. */
static bool const_scalar(const nr_graph *g, int t, double *v) {
  if (!nr_pu_is_const(g, t) || val(g, t)->dtype != NR_DTYPE_FLOAT ||
      nr_value_count(val(g, t)) != 1)
    return false;
  *v = nr_value_get_f64(val(g, t), 0);
  return true;
}

static bool near(double v, double want, double rel) {
  return fabs(v - want) <= rel * fabs(want);
}

/* n is a two-input `op` with a constant scalar operand: the other input goes to *x
 * and the constant to *c. Div only takes its constant as the divisor. */
static bool bin_const(const nr_graph *g, const nr_node *n, const char *op, int *x,
                      double *c) {
  if (!n || !nr_pu_is_op(n, op) || n->n_inputs != 2 || n->n_outputs != 1)
    return false;
  for (int i = 1; i >= 0; i--) {
    if (i == 0 && !strcmp(op, "Div"))
      break;
    if (const_scalar(g, n->inputs[i], c)) {
      *x = n->inputs[1 - i];
      return true;
    }
  }
  return false;
}

/* The input of two-input n that is not t, or -1 when n does not read t. */
static int other_input(const nr_node *n, int t) {
  if (n->n_inputs != 2)
    return -1;
  return n->inputs[0] == t ? n->inputs[1] : n->inputs[1] == t ? n->inputs[0] : -1;
}

static bool is_float_tensor(const nr_graph *g, int t) {
  return t >= 0 && val(g, t)->dtype == NR_DTYPE_FLOAT && nr_value_shape_known(val(g, t));
}

/* ---- LayerNorm ------------------------------------------------------------------ */

/* ReduceMean over the last axis only, keepdims on; its input goes to *x. */
static bool mean_last_axis(const nr_graph *g, const nr_node *n, int *x) {
  if (!n || !nr_pu_is_op(n, "ReduceMean") || n->n_outputs != 1 ||
      nr_attr_int(n, "keepdims", 1) != 1 || !is_float_tensor(g, n->inputs[0]))
    return false;
  int rank = val(g, n->inputs[0])->rank;
  size_t na = 0;
  const int64_t *axes = nr_attr_ints(n, "axes", &na);
  int64_t axis;
  if (na == 1) {
    axis = axes[0];
  } else if (na == 0 && n->n_inputs == 2 && nr_pu_is_const(g, n->inputs[1]) &&
             nr_value_count(val(g, n->inputs[1])) == 1) {
    axis = nr_value_get_i64(val(g, n->inputs[1]), 0);
  } else {
    return false;
  }
  *x = n->inputs[0];
  return rank >= 1 && (axis == -1 || axis == rank - 1);
}

/* A constant that scales or shifts along the last axis only: count 1 or C, every
 * leading dim 1, rank at most the input's. */
static bool row_param(const nr_graph *g, int t, int rank, int64_t c) {
  if (!nr_pu_is_const(g, t) || val(g, t)->dtype != NR_DTYPE_FLOAT)
    return false;
  const nr_value *p = val(g, t);
  int64_t n = nr_value_count(p);
  if (p->rank > rank || (n != 1 && n != c))
    return false;
  for (int d = 0; d + 1 < p->rank; d++)
    if (p->dims[d] != 1)
      return false;
  return true;
}

/* The square of d: Pow(d, 2) or Mul(d, d). */
static bool is_square(const nr_graph *g, const nr_node *n, int d) {
  double e;
  int x;
  if (bin_const(g, n, "Pow", &x, &e) && n->inputs[0] == d)
    return x == d && e == 2.0;
  return nr_pu_is_op(n, "Mul") && n->n_inputs == 2 && n->inputs[0] == d &&
         n->inputs[1] == d;
}

/* The two readers of d = x - mean: the square and the Div; false otherwise. */
static bool sub_readers(const nr_graph *g, int d, const nr_node **sq, const nr_node **dv) {
  int k1 = nr_pu_next_reader(g, d, -1), k2 = k1 < 0 ? -1 : nr_pu_next_reader(g, d, k1);
  if (k2 < 0 || nr_pu_next_reader(g, d, k2) >= 0 || nr_pu_is_output(g, d))
    return false;
  const nr_node *a = &g->nodes[k1], *b = &g->nodes[k2];
  if (is_square(g, b, d)) {
    const nr_node *t = a;
    a = b;
    b = t;
  }
  *sq = a;
  *dv = b;
  return is_square(g, a, d) && nr_pu_is_op(b, "Div") && b->n_inputs == 2 &&
         b->inputs[0] == d;
}

/* var -> + eps -> Sqrt, ending at the Div's divisor. */
static bool match_denominator(const nr_graph *g, rz_match *m, const nr_node *sq,
                              const nr_node *dv) {
  int x;
  const nr_node *r2 = sole_reader(g, sq->outputs[0]);
  if (!mean_last_axis(g, r2, &x) || x != sq->outputs[0])
    return false;
  const nr_node *ae = sole_reader(g, r2->outputs[0]), *sq_root;
  if (!bin_const(g, ae, "Add", &x, &m->eps) || x != r2->outputs[0] || m->eps < 0)
    return false;
  sq_root = sole_reader(g, ae->outputs[0]);
  if (!nr_pu_is_op(sq_root, "Sqrt") || sole_reader(g, sq_root->outputs[0]) != dv ||
      dv->inputs[1] != sq_root->outputs[0])
    return false;
  take(m, node_index(g, sq));
  take(m, node_index(g, r2));
  take(m, node_index(g, ae));
  take(m, node_index(g, sq_root));
  take(m, node_index(g, dv));
  return true;
}

/* The optional `* gamma` and `+ beta` behind the Div. */
static void match_affine(const nr_graph *g, rz_match *m, const nr_node *dv) {
  const nr_value *xv = val(g, m->x);
  int64_t c = xv->dims[xv->rank - 1];
  int t = dv->outputs[0];
  const nr_node *n = sole_reader(g, t);
  int p = n && nr_pu_is_op(n, "Mul") ? other_input(n, t) : -1;
  if (p >= 0 && row_param(g, p, xv->rank, c)) {
    m->scale = p;
    take(m, node_index(g, n));
    t = n->outputs[0];
    n = sole_reader(g, t);
  }
  p = n && nr_pu_is_op(n, "Add") ? other_input(n, t) : -1;
  if (p >= 0 && row_param(g, p, xv->rank, c)) {
    m->bias = p;
    take(m, node_index(g, n));
    t = n->outputs[0];
  }
  m->out = t;
}

static bool match_layernorm(const nr_graph *g, int k, rz_match *m) {
  const nr_node *r1 = &g->nodes[k], *sub, *sq, *dv;
  memset(m, 0, sizeof *m);
  m->kind = RZ_LAYERNORM;
  m->anchor = k;
  m->scale = m->bias = -1;
  if (!mean_last_axis(g, r1, &m->x) || !(sub = sole_reader(g, r1->outputs[0])) ||
      !nr_pu_is_op(sub, "Sub") || sub->n_inputs != 2 || sub->inputs[0] != m->x ||
      sub->inputs[1] != r1->outputs[0])
    return false;
  if (!sub_readers(g, sub->outputs[0], &sq, &dv))
    return false;
  take(m, k);
  take(m, node_index(g, sub));
  if (!match_denominator(g, m, sq, dv))
    return false;
  match_affine(g, m, dv);
  return true;
}

/* ---- GELU ----------------------------------------------------------------------- */

/* x * 0.5 * (1 + f) behind f (the Erf or Tanh output), in the three orders exporters
 * write it: (x * (1+f)) * 0.5, (x * 0.5) * (1+f), x * ((1+f) * 0.5). */
static bool match_gelu_tail(const nr_graph *g, rz_match *m, int f) {
  int x = m->x, o;
  double c;
  const nr_node *a = sole_reader(g, f), *m1, *m2, *h;
  if (!bin_const(g, a, "Add", &o, &c) || o != f || c != 1.0)
    return false;
  if (!(m1 = sole_reader(g, a->outputs[0])) || !nr_pu_is_op(m1, "Mul"))
    return false;
  int other = other_input(m1, a->outputs[0]);
  take(m, node_index(g, a));
  take(m, node_index(g, m1));
  if (other == x) { /* (x * (1+f)) * 0.5 */
    m2 = sole_reader(g, m1->outputs[0]);
    if (!bin_const(g, m2, "Mul", &o, &c) || o != m1->outputs[0] || c != 0.5)
      return false;
    take(m, node_index(g, m2));
    m->out = m2->outputs[0];
    return true;
  }
  h = other >= 0 ? producer_op(g, other, "Mul") : NULL;
  if (h && bin_const(g, h, "Mul", &o, &c) && o == x && c == 0.5 &&
      sole_reader(g, other) == m1) { /* (x * 0.5) * (1+f) */
    take(m, node_index(g, h));
    m->out = m1->outputs[0];
    return true;
  }
  if (other >= 0 && const_scalar(g, other, &c) && c == 0.5) { /* x * ((1+f) * 0.5) */
    m2 = sole_reader(g, m1->outputs[0]);
    if (!m2 || !nr_pu_is_op(m2, "Mul") || other_input(m2, m1->outputs[0]) != x)
      return false;
    take(m, node_index(g, m2));
    m->out = m2->outputs[0];
    return true;
  }
  return false;
}

/* erf(x / sqrt 2) or erf(x * (1 / sqrt 2)). */
static bool match_gelu_erf(const nr_graph *g, int k, rz_match *m) {
  const nr_node *e = &g->nodes[k];
  int u = e->inputs[0];
  double c;
  const nr_node *p = u >= 0 ? nr_pu_cproducer(g, u) : NULL;
  if (!p || sole_reader(g, u) != e)
    return false;
  bool ok = (bin_const(g, p, "Div", &m->x, &c) && near(c, M_SQRT2, 1e-4)) ||
            (bin_const(g, p, "Mul", &m->x, &c) && near(c, M_SQRT1_2, 1e-4));
  if (!ok || !is_float_tensor(g, m->x))
    return false;
  take(m, node_index(g, p));
  take(m, k);
  return match_gelu_tail(g, m, e->outputs[0]);
}

/* x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x); sets m->x. */
static bool match_cube(const nr_graph *g, rz_match *m, int t) {
  const nr_node *p = producer_op(g, t, "Pow"), *mm;
  double e;
  int x;
  if (p && bin_const(g, p, "Pow", &x, &e) && p->inputs[0] == x && e == 3.0) {
    m->x = x;
    take(m, node_index(g, p));
    return true;
  }
  if (!(p = producer_op(g, t, "Mul")) || p->n_inputs != 2)
    return false;
  for (int i = 0; i < 2; i++) {
    int sq = p->inputs[i], x1 = p->inputs[1 - i];
    mm = producer_op(g, sq, "Mul");
    if (mm && mm->n_inputs == 2 && mm->inputs[0] == x1 && mm->inputs[1] == x1 &&
        sole_reader(g, sq) == p) {
      m->x = x1;
      take(m, node_index(g, mm));
      take(m, node_index(g, p));
      return true;
    }
  }
  return false;
}

/* tanh(sqrt(2/pi) * (x + 0.044715 * x^3)). */
static bool match_gelu_tanh(const nr_graph *g, int k, rz_match *m) {
  const nr_node *t = &g->nodes[k], *p1, *add, *p2;
  int s, cube;
  double c;
  p1 = t->inputs[0] >= 0 ? nr_pu_cproducer(g, t->inputs[0]) : NULL;
  if (!p1 || sole_reader(g, t->inputs[0]) != t || !bin_const(g, p1, "Mul", &s, &c) ||
      !near(c, sqrt(2.0 / M_PI), 1e-4) || !(add = producer_op(g, s, "Add")) ||
      sole_reader(g, s) != p1 || add->n_inputs != 2)
    return false;
  for (int i = 0; i < 2; i++) {
    int x = add->inputs[i], p = add->inputs[1 - i];
    p2 = producer_op(g, p, "Mul");
    if (!p2 || sole_reader(g, p) != add || !bin_const(g, p2, "Mul", &cube, &c) ||
        !near(c, 0.044715, 1e-4) || sole_reader(g, cube) != p2)
      continue;
    int n0 = m->n_nodes;
    if (!match_cube(g, m, cube) || m->x != x || !is_float_tensor(g, x)) {
      m->n_nodes = n0;
      continue;
    }
    take(m, node_index(g, p2));
    take(m, node_index(g, add));
    take(m, node_index(g, p1));
    take(m, k);
    m->tanh_form = true;
    return match_gelu_tail(g, m, t->outputs[0]);
  }
  return false;
}

static bool match_gelu(const nr_graph *g, int k, rz_match *m) {
  const nr_node *n = &g->nodes[k];
  memset(m, 0, sizeof *m);
  m->kind = RZ_GELU;
  m->anchor = k;
  if (n->n_inputs != 1 || n->n_outputs != 1)
    return false;
  if (nr_pu_is_op(n, "Erf"))
    return match_gelu_erf(g, k, m);
  if (nr_pu_is_op(n, "Tanh"))
    return match_gelu_tanh(g, k, m);
  return false;
}

/* ---- attention ------------------------------------------------------------------ */

static bool dims4(const nr_graph *g, int t, int64_t *d) {
  if (!is_float_tensor(g, t) || val(g, t)->rank != 4)
    return false;
  memcpy(d, val(g, t)->dims, sizeof(int64_t) * 4);
  return true;
}

/* Q [B,H,S,D] @ K^T [B,H,D,T], P [B,H,S,T] @ V [B,H,T,Dv]: no broadcasting. */
static bool attention_shapes(const nr_graph *g, const rz_match *m) {
  int64_t q[4], kt[4], v[4];
  if (!dims4(g, m->q, q) || !dims4(g, m->kt, kt) || !dims4(g, m->v, v))
    return false;
  return q[0] == kt[0] && q[1] == kt[1] && q[3] == kt[2] && v[0] == q[0] &&
         v[1] == q[1] && v[2] == kt[3];
}

/* An additive float mask that broadcasts to [B,H,S,T] and covers every key. */
static bool mask_fits(const nr_graph *g, int mask, const int64_t *scores) {
  const nr_value *mv = val(g, mask);
  if (!is_float_tensor(g, mask) || mv->rank < 1 || mv->rank > 4 ||
      mv->dims[mv->rank - 1] != scores[3])
    return false;
  for (int d = 0; d < mv->rank; d++) {
    int64_t md = mv->dims[mv->rank - 1 - d], sd = scores[3 - d];
    if (md != 1 && md != sd)
      return false;
  }
  return true;
}

/* softmax input <- [Add mask] <- Div/Mul by a constant <- MatMul(Q, K^T). */
static bool match_scores(const nr_graph *g, rz_match *m, int t) {
  const nr_node *p = nr_pu_cproducer(g, t), *mm;
  int64_t sd[4];
  int s;
  double c;
  m->mask = -1;
  if (p && nr_pu_is_op(p, "Add") && p->n_inputs == 2 && dims4(g, t, sd)) {
    for (int i = 0; i < 2 && m->mask < 0; i++) {
      const nr_node *sc = nr_pu_cproducer(g, p->inputs[i]);
      if (sc && (nr_pu_is_op(sc, "Div") || nr_pu_is_op(sc, "Mul")) &&
          sole_reader(g, p->inputs[i]) == p && mask_fits(g, p->inputs[1 - i], sd)) {
        m->mask = p->inputs[1 - i];
        take(m, node_index(g, p));
        t = p->inputs[i];
        p = sc;
      }
    }
  }
  bool div = bin_const(g, p, "Div", &s, &c), mul = !div && bin_const(g, p, "Mul", &s, &c);
  if ((!div && !mul) || c == 0 || !isfinite(c) || !(mm = producer_op(g, s, "MatMul")) ||
      sole_reader(g, s) != p || mm->n_inputs != 2)
    return false;
  m->attn_scale = div ? 1.0 / c : c;
  m->q = mm->inputs[0];
  m->kt = mm->inputs[1];
  take(m, node_index(g, p));
  take(m, node_index(g, mm));
  return true;
}

static bool match_attention(const nr_graph *g, int k, rz_match *m) {
  const nr_node *sm = &g->nodes[k], *pv;
  memset(m, 0, sizeof *m);
  m->kind = RZ_ATTENTION;
  m->anchor = k;
  if (!nr_pu_is_op(sm, "Softmax") || sm->n_inputs != 1 || sm->n_outputs != 1 ||
      !is_float_tensor(g, sm->inputs[0]) || val(g, sm->inputs[0])->rank != 4)
    return false;
  int64_t axis = nr_attr_int(sm, "axis", sm->opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3)
    return false;
  if (!(pv = sole_reader(g, sm->outputs[0])) || !nr_pu_is_op(pv, "MatMul") ||
      pv->n_inputs != 2 || pv->inputs[0] != sm->outputs[0])
    return false;
  m->v = pv->inputs[1];
  m->out = pv->outputs[0];
  take(m, k);
  take(m, node_index(g, pv));
  if (sole_reader(g, sm->inputs[0]) != sm || !match_scores(g, m, sm->inputs[0]))
    return false;
  return attention_shapes(g, m);
}

/* ---- attention heads ------------------------------------------------------------ */

static bool perm_is(const nr_node *n, const int64_t *want) {
  size_t np = 0;
  const int64_t *p = nr_attr_ints(n, "perm", &np);
  return p && np == 4 && !memcmp(p, want, sizeof(int64_t) * 4);
}

/* t = Transpose(perm)(Reshape(x)) with x [B, S, C] reshaped to [B, S, H, C / H], both
 * interior tensors read once. Returns x (and H, the two nodes), or -1. */
static int split_heads(const nr_graph *g, int t, const int64_t *perm, int64_t *heads,
                       int *nodes) {
  const nr_node *tp = producer_op(g, t, "Transpose"), *rs;
  if (!tp || tp->n_inputs != 1 || !perm_is(tp, perm) || !sole_reader(g, t) ||
      !(rs = producer_op(g, tp->inputs[0], "Reshape")) || rs->n_inputs < 1 ||
      sole_reader(g, tp->inputs[0]) != tp)
    return -1;
  int x = rs->inputs[0];
  int64_t r[4];
  if (!is_float_tensor(g, x) || val(g, x)->rank != 3 || !dims4(g, tp->inputs[0], r))
    return -1;
  const int64_t *xd = val(g, x)->dims;
  if (r[0] != xd[0] || r[1] != xd[1] || r[2] * r[3] != xd[2])
    return -1;
  *heads = r[2];
  nodes[0] = node_index(g, tp);
  nodes[1] = node_index(g, rs);
  return x;
}

/* The attention output [B, H, S, Dv] -> Transpose(0,2,1,3) -> Reshape [B, S, H * Dv];
 * returns the Reshape's output (and the two nodes), or -1. */
static int merge_heads(const nr_graph *g, int out, int *nodes) {
  static const int64_t perm[4] = {0, 2, 1, 3};
  const nr_node *tp = sole_reader(g, out), *rs;
  int64_t o[4];
  if (!tp || !nr_pu_is_op(tp, "Transpose") || tp->n_outputs != 1 || !perm_is(tp, perm) ||
      !dims4(g, out, o) || !(rs = sole_reader(g, tp->outputs[0])) ||
      !nr_pu_is_op(rs, "Reshape") || rs->inputs[0] != tp->outputs[0] || rs->n_outputs != 1)
    return -1;
  int y = rs->outputs[0];
  const nr_value *yv = val(g, y);
  if (!is_float_tensor(g, y) || yv->rank != 3 || yv->dims[0] != o[0] ||
      yv->dims[1] != o[2] || yv->dims[2] != o[1] * o[3])
    return -1;
  nodes[0] = node_index(g, tp);
  nodes[1] = node_index(g, rs);
  return y;
}

/* Can the matched attention read Q, K, V and write Y as 3-D [B, seq, heads * size]?
 * Q and V come as Transpose(0,2,1,3) of the head Reshape, K^T as Transpose(0,2,3,1)
 * of it (torch's export), Y leaves through Transpose(0,2,1,3) and a Reshape. Fills the
 * fold fields; false when any of the four does not match. */
static bool match_heads(const nr_graph *g, rz_match *m) {
  static const int64_t qv_perm[4] = {0, 2, 1, 3}, kt_perm[4] = {0, 2, 3, 1};
  int64_t vh;
  m->q3 = split_heads(g, m->q, qv_perm, &m->q_heads, m->fold_nodes);
  m->k3 = split_heads(g, m->kt, kt_perm, &m->kv_heads, m->fold_nodes + 2);
  m->v3 = split_heads(g, m->v, qv_perm, &vh, m->fold_nodes + 4);
  m->out3 = merge_heads(g, m->out, m->fold_nodes + 6);
  return m->q3 >= 0 && m->k3 >= 0 && m->v3 >= 0 && m->out3 >= 0 && vh == m->kv_heads;
}

/* ---- knobs ---------------------------------------------------------------------- */

static bool applies_layernorm(const nr_graph *g, const nr_node *n) {
  rz_match m;
  return match_layernorm(g, node_index(g, n), &m);
}

static bool applies_gelu(const nr_graph *g, const nr_node *n) {
  rz_match m;
  return match_gelu(g, node_index(g, n), &m);
}

/* A pattern that already is the tanh approximation has nothing else to become. */
static uint64_t valid_gelu(const nr_graph *g, const nr_node *n) {
  rz_match m;
  if (match_gelu(g, node_index(g, n), &m) && m.tanh_form)
    return 1u << 0 | 1u << 2; /* exact|off */
  return ~0ull;
}

static bool applies_attention(const nr_graph *g, const nr_node *n) {
  rz_match m;
  return match_attention(g, node_index(g, n), &m);
}

static bool applies_attention_heads(const nr_graph *g, const nr_node *n) {
  rz_match m;
  return match_attention(g, node_index(g, n), &m) && match_heads(g, &m);
}

const nr_knob_def nr_knobs_recognize[] = {
    [NR_KNOB_ROW(NR_KNOB_RECOGNIZE_LAYERNORM)] =
    {"recognize.layernorm", "on|off", "on", NR_KNOB_NODE, 0, 0,
     "replace a decomposed LayerNorm (anchored at its first ReduceMean) by one "
     "LayerNormalization",
     applies_layernorm, NULL},
    [NR_KNOB_ROW(NR_KNOB_RECOGNIZE_GELU)] =
    {"recognize.gelu", "exact|tanh|off", "exact", NR_KNOB_NODE, NR_KNOB_ACCURACY, 1e-3,
     "replace a decomposed GELU (anchored at its Erf or Tanh) by one Gelu: exact keeps "
     "what the pattern computes, tanh approximates an erf GELU",
     applies_gelu, valid_gelu},
    [NR_KNOB_ROW(NR_KNOB_RECOGNIZE_ATTENTION)] =
    {"recognize.attention", "on|off", "on", NR_KNOB_NODE, 0, 0,
     "replace MatMul-scale-[mask]-Softmax-MatMul (anchored at the Softmax) by one "
     "Attention",
     applies_attention, NULL},
    [NR_KNOB_ROW(NR_KNOB_RECOGNIZE_ATTENTION_HEADS)] =
    {"recognize.attention_heads", "fold|keep", "fold", NR_KNOB_NODE, 0, 0,
     "fold the Reshape+Transposes that split Q, K, V into heads and merge Y back into a "
     "3-D Attention (read in place), or keep them as steps of their own",
     applies_attention_heads, NULL},
    [NR_KNOB_ROW(NR_KNOB_RECOGNIZE_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_recognize, NR_KNOB_RECOGNIZE_END);

/* ---- rewriting ------------------------------------------------------------------ */

/* A [C] copy of a row parameter that has another shape (or ones when t is -1). */
static int row_const(nr_graph *g, const char *base, const char *suffix, int t, int64_t c,
                     nr_error *err) {
  if (t >= 0 && val(g, t)->rank == 1 && val(g, t)->dims[0] == c)
    return t;
  nr_value v = {0};
  if (nr_value_alloc(&v, NR_DTYPE_FLOAT, 1, &c, err))
    return -1;
  float *d = v.data;
  for (int64_t i = 0; i < c; i++)
    d[i] = t < 0 ? 1.0f : (float)nr_value_get_f64(val(g, t), nr_value_count(val(g, t)) == 1 ? 0 : i);
  int r = nr_pu_add_const(g, base, suffix, &v);
  nr_value_free(&v);
  if (r < 0)
    nr_errorf(err, NR_ERR_NOMEM, "out of memory adding constant '%s%s'", base, suffix);
  return r;
}

/* The replacement node, named after the anchor; returns its index or -1. */
static int add_replacement(nr_graph *g, const rz_match *m, const char *op, int opset,
                           int n_in, const int *ins, nr_error *err) {
  char *name = strdup(g->nodes[m->anchor].name);
  int k = name ? nr_pu_add_node(g, name, op, "", n_in, ins, 1, &m->out) : -1;
  free(name);
  if (k < 0) {
    nr_errorf(err, NR_ERR_NOMEM, "out of memory adding a %s node", op);
    return -1;
  }
  g->nodes[k].opset = opset;
  return k;
}

static nr_status rewrite_layernorm(nr_graph *g, const rz_match *m, nr_error *err) {
  const nr_value *xv = val(g, m->x);
  int64_t c = xv->dims[xv->rank - 1];
  const char *base = g->nodes[m->anchor].name;
  int scale = row_const(g, base, "/ln_scale", m->scale, c, err);
  int bias = m->bias < 0 ? -1 : row_const(g, base, "/ln_bias", m->bias, c, err);
  if (scale < 0 || (m->bias >= 0 && bias < 0))
    return err->status ? err->status : NR_ERR_NOMEM;
  int ins[3] = {m->x, scale, bias};
  int k = add_replacement(g, m, "LayerNormalization", 17, bias < 0 ? 2 : 3, ins, err);
  if (k < 0)
    return NR_ERR_NOMEM;
  nr_status st = nr_pu_set_attr_int(g, k, "axis", -1, err);
  return st ? st : nr_pu_set_attr_float(g, k, "epsilon", (float)m->eps, err);
}

static nr_status rewrite_gelu(nr_graph *g, const rz_match *m, bool tanh, nr_error *err) {
  int k = add_replacement(g, m, "Gelu", 20, 1, &m->x, err);
  if (k < 0)
    return NR_ERR_NOMEM;
  return tanh ? nr_pu_set_attr_string(g, k, "approximate", "tanh", err) : NR_OK;
}

/* K from K^T: fold into the Transpose that made K^T when there is one. Returns the
 * tensor, or -1. The old Transpose joins the swallowed nodes when K^T was its only
 * use (*drop). */
static int key_tensor(nr_graph *g, const rz_match *m, int *drop, nr_error *err) {
  const nr_node *tp = producer_op(g, m->kt, "Transpose");
  int64_t perm[4] = {0, 1, 3, 2};
  int src = m->kt;
  size_t np = 0;
  const int64_t *p = tp ? nr_attr_ints(tp, "perm", &np) : NULL;
  *drop = -1;
  if (tp && np == 4) {
    int64_t r[4] = {p[0], p[1], p[3], p[2]};
    memcpy(perm, r, sizeof r);
    src = tp->inputs[0];
    if (sole_reader(g, m->kt))
      *drop = node_index(g, tp);
  }
  if (perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && perm[3] == 3)
    return src;
  const nr_value *kt = val(g, m->kt);
  int64_t kd[4] = {kt->dims[0], kt->dims[1], kt->dims[3], kt->dims[2]};
  char name[512];
  snprintf(name, sizeof name, "%s/k_transpose", g->nodes[m->anchor].name);
  int t = nr_pu_add_tensor(g, g->nodes[m->anchor].name, "/k", NR_DTYPE_FLOAT, 4, kd);
  int k = t < 0 ? -1 : nr_pu_add_node(g, name, "Transpose", "", 1, &src, 1, &t);
  if (k < 0 || nr_pu_set_attr_ints(g, k, "perm", 4, perm, err)) {
    nr_errorf(err, NR_ERR_NOMEM, "out of memory transposing K for %s", name);
    return -1;
  }
  return t;
}

/* The 3-D Attention over the tensors before the heads were split. */
static nr_status rewrite_attention_3d(nr_graph *g, rz_match *m, nr_error *err) {
  for (int i = 0; i < 8; i++)
    take(m, m->fold_nodes[i]);
  m->out = m->out3;
  int ins[4] = {m->q3, m->k3, m->v3, m->mask};
  int k = add_replacement(g, m, "Attention", 23, m->mask < 0 ? 3 : 4, ins, err);
  if (k < 0)
    return NR_ERR_NOMEM;
  nr_status st = nr_pu_set_attr_float(g, k, "scale", (float)m->attn_scale, err);
  if (!st)
    st = nr_pu_set_attr_int(g, k, "q_num_heads", m->q_heads, err);
  return st ? st : nr_pu_set_attr_int(g, k, "kv_num_heads", m->kv_heads, err);
}

static nr_status rewrite_attention(nr_graph *g, rz_match *m, nr_error *err) {
  if (m->fold)
    return rewrite_attention_3d(g, m, err);
  int drop, key = key_tensor(g, m, &drop, err);
  if (key < 0)
    return err->status ? err->status : NR_ERR_NOMEM;
  if (drop >= 0)
    take(m, drop);
  int ins[4] = {m->q, key, m->v, m->mask};
  int k = add_replacement(g, m, "Attention", 23, m->mask < 0 ? 3 : 4, ins, err);
  if (k < 0)
    return NR_ERR_NOMEM;
  return nr_pu_set_attr_float(g, k, "scale", (float)m->attn_scale, err);
}

/* ---- the pass ------------------------------------------------------------------- */

static const char *knob_value(const nr_compile_ctx *c, nr_knob_id knob, const nr_node *n,
                              const char *dflt) {
  const char *v = nr_route_get(c->route, knob, n);
  return v ? v : dflt;
}

/* The match at node k that the route turns on, if any. *tanh: Gelu's approximation. */
static bool wanted(const nr_compile_ctx *c, int k, rz_match *m, bool *tanh) {
  const nr_graph *g = c->graph;
  const nr_node *n = &g->nodes[k];
  if (match_layernorm(g, k, m))
    return strcmp(knob_value(c, NR_KNOB_RECOGNIZE_LAYERNORM, n, "on"), "off") != 0;
  if (match_attention(g, k, m)) {
    if (!strcmp(knob_value(c, NR_KNOB_RECOGNIZE_ATTENTION, n, "on"), "off"))
      return false;
    m->fold = match_heads(g, m) &&
              strcmp(knob_value(c, NR_KNOB_RECOGNIZE_ATTENTION_HEADS, n, "fold"), "keep") != 0;
    return true;
  }
  if (!match_gelu(g, k, m))
    return false;
  const char *v = knob_value(c, NR_KNOB_RECOGNIZE_GELU, n, "exact");
  *tanh = m->tanh_form || !strcmp(v, "tanh");
  return strcmp(v, "off") != 0;
}

static nr_status apply(nr_graph *g, rz_match *m, bool tanh, nr_error *err) {
  switch (m->kind) {
  case RZ_LAYERNORM: return rewrite_layernorm(g, m, err);
  case RZ_GELU: return rewrite_gelu(g, m, tanh, err);
  default: return rewrite_attention(g, m, err);
  }
}

/* Patterns never share nodes (every interior tensor has one reader), so all matches
 * are taken on the unedited graph and the swallowed nodes removed at the end. */
static nr_status run_recognize(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  int n0 = g->n_nodes, n_done = 0;
  rz_match *found = malloc(sizeof *found * (size_t)(n0 ? n0 : 1));
  bool *tanh = calloc((size_t)(n0 ? n0 : 1), sizeof *tanh), *mark = NULL;
  nr_status st = NR_OK;
  if (!found || !tanh) {
    st = nr_errorf(c->err, NR_ERR_NOMEM, "recognize: out of memory");
    goto done;
  }
  for (int k = 0; k < n0; k++)
    if (wanted(c, k, &found[n_done], &tanh[n_done]))
      n_done++;
  for (int i = 0; i < n_done && !st; i++)
    st = apply(g, &found[i], tanh[i], c->err);
  if (st || !n_done)
    goto done;
  if (!(mark = calloc((size_t)g->n_nodes, sizeof *mark))) {
    st = nr_errorf(c->err, NR_ERR_NOMEM, "recognize: out of memory");
    goto done;
  }
  for (int i = 0; i < n_done; i++)
    for (int j = 0; j < found[i].n_nodes; j++)
      mark[found[i].nodes[j]] = true;
  st = nr_pu_remove_marked(g, mark, c->err);
done:
  free(found);
  free(tanh);
  free(mark);
  return st;
}

const nr_pass nr_pass_recognize = {"recognize", run_recognize};
