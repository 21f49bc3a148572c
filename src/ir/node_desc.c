/* node_desc.c - the parse functions of node_desc.h: a node plus its operands' shapes
 * into the description both backends read.
 *
 * Key decision: each check that a node breaks its operator's rules is made here once,
 * with a message naming the node and the operand, so a backend's supports() never
 * re-derives the meaning of transposes, broadcasts or heads; what stays in a backend
 * is what it can run. */
#include "ir/node_desc.h"

#include "ir/fused.h"
#include "util/error.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- operands --------------------------------------------------------------------- */

static void io_value(const nr_value *src, nr_value *dst) {
  memset(dst, 0, sizeof *dst);
  dst->dtype = src->dtype;
  dst->rank = src->rank;
  memcpy(dst->dims, src->dims, sizeof dst->dims);
}

void nr_node_io_from_graph(const nr_graph *g, const nr_node *n, nr_node_io *io) {
  memset(io, 0, sizeof *io);
  io->n_in = n->n_inputs;
  io->n_out = n->n_outputs;
  for (int i = 0; i < n->n_inputs && i < NR_DESC_MAX_IO; i++)
    if (n->inputs[i] >= 0) {
      io->has_in[i] = true;
      io_value(&g->tensors[n->inputs[i]].value, &io->in[i]);
    }
  for (int o = 0; o < n->n_outputs && o < NR_DESC_MAX_IO; o++)
    if (n->outputs[o] >= 0) {
      io->has_out[o] = true;
      io_value(&g->tensors[n->outputs[o]].value, &io->out[o]);
    }
}

const nr_value *nr_node_io_in(const nr_node_io *io, int i) {
  return i >= 0 && i < io->n_in && i < NR_DESC_MAX_IO && io->has_in[i] ? &io->in[i] : NULL;
}

const nr_value *nr_node_io_out(const nr_node_io *io, int i) {
  return i >= 0 && i < io->n_out && i < NR_DESC_MAX_IO && io->has_out[i] ? &io->out[i]
                                                                         : NULL;
}

static nr_status fail(nr_error *err, nr_status st, const nr_node *n, const char *fmt, ...)
    NR_PRINTF(4, 5);
static nr_status fail(nr_error *err, nr_status st, const nr_node *n, const char *fmt,
                      ...) {
  char msg[512], node[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return nr_errorf(err, st, "%s: %s", nr_node_describe(n, node, sizeof node), msg);
}

static bool known(const nr_value *v) {
  if (!v || v->rank < 0 || v->rank > NR_MAX_RANK)
    return false;
  for (int d = 0; d < v->rank; d++)
    if (v->dims[d] < 0)
      return false;
  return true;
}

static int64_t count_of(const nr_value *v) {
  int64_t c = 1;
  for (int d = 0; d < v->rank; d++)
    c *= v->dims[d];
  return c;
}

static bool is_domain(const nr_node *n, const char *domain) {
  return !strcmp(n->domain ? n->domain : "", domain);
}

static bool counts_fit(const nr_node_io *io) {
  return io->n_in <= NR_DESC_MAX_IO && io->n_out <= NR_DESC_MAX_IO;
}

bool nr_fused_act_read(const nr_node *n, nr_act *act, float *a, float *b) {
  if (!nr_act_from_name(nr_attr_string(n, "activation", "none"), act))
    return false;
  float da = 0.0f, db = 0.0f;
  if (*act == NR_ACT_CLIP)
    da = -FLT_MAX, db = FLT_MAX;
  else if (*act == NR_ACT_LEAKY_RELU)
    da = 0.01f;
  else if (*act == NR_ACT_HARD_SIGMOID)
    da = 0.2f, db = 0.5f;
  *a = nr_attr_float(n, "act_alpha", da);
  *b = nr_attr_float(n, "act_beta", db);
  return true;
}

/* Inputs past the operator's max_in must be absent. */
static nr_status no_inputs_past(const nr_node *n, const nr_node_io *io, int max_in,
                                nr_error *err) {
  for (int i = max_in; i < io->n_in; i++)
    if (nr_node_io_in(io, i))
      return fail(err, NR_ERR_INVALID_MODEL, n, "input %d (at most %d inputs)", i, max_in);
  return NR_OK;
}

/* A fused op's activation, refused when its name is unknown. */
static nr_status fused_act(const nr_node *n, nr_act *act, float *a, float *b,
                           nr_error *err) {
  if (!nr_fused_act_read(n, act, a, b))
    return fail(err, NR_ERR_INVALID_MODEL, n, "unknown activation '%s'",
                nr_attr_string(n, "activation", ""));
  return NR_OK;
}

/* ---- Gemm, MatMul, FusedGemm, FusedMatMul ----------------------------------------- */

bool nr_gemm_desc_is_node(const nr_node *n) {
  if (!n)
    return false;
  if (is_domain(n, ""))
    return !strcmp(n->op_type, "Gemm") || !strcmp(n->op_type, "MatMul");
  return is_domain(n, NR_DOMAIN) &&
         (!strcmp(n->op_type, "FusedGemm") || !strcmp(n->op_type, "FusedMatMul"));
}

static nr_gemm_op gemm_op_of(const nr_node *n) {
  bool fused = !is_domain(n, ""), gemm = strstr(n->op_type, "Gemm") != NULL;
  return gemm ? (fused ? NR_GEMM_OP_FUSED_GEMM : NR_GEMM_OP_GEMM)
              : (fused ? NR_GEMM_OP_FUSED_MATMUL : NR_GEMM_OP_MATMUL);
}

static bool is_gemm_op(nr_gemm_op op) {
  return op == NR_GEMM_OP_GEMM || op == NR_GEMM_OP_FUSED_GEMM;
}

/* Gemm's C, unidirectionally broadcast to [M, N]: COL before ROW before FULL. */
static nr_status gemm_c(const nr_node *n, const nr_value *c, nr_gemm_desc *d,
                        nr_error *err) {
  if (c->rank > 2)
    return fail(err, NR_ERR_INVALID_MODEL, n, "C has rank %d (at most 2)", c->rank);
  int64_t d0 = c->rank > 0 ? c->dims[0] : 1, d1 = c->rank > 1 ? c->dims[1] : 1;
  if (c->rank == 1)
    d1 = d0, d0 = 1;
  if ((d0 != 1 && d0 != d->m) || (d1 != 1 && d1 != d->n))
    return fail(err, NR_ERR_INVALID_MODEL, n,
                "C of shape [%lld, %lld] does not broadcast to [%lld, %lld]",
                (long long)d0, (long long)d1, (long long)d->m, (long long)d->n);
  d->add_rows = d0, d->add_cols = d1;
  d->add = d0 == 1 ? NR_GEMM_ADD_COL : d1 == 1 ? NR_GEMM_ADD_ROW : NR_GEMM_ADD_FULL;
  return NR_OK;
}

static nr_status gemm_dims(const nr_node *n, const nr_value *a, const nr_value *b,
                           nr_gemm_desc *d, nr_error *err) {
  if (a->rank != 2 || b->rank != 2)
    return fail(err, NR_ERR_INVALID_MODEL, n, "A and B must be 2-D (ranks %d, %d)",
                a->rank, b->rank);
  d->trans_a = nr_attr_int(n, "transA", 0) != 0;
  d->trans_b = nr_attr_int(n, "transB", 0) != 0;
  d->m = a->dims[d->trans_a ? 1 : 0];
  d->k = a->dims[d->trans_a ? 0 : 1];
  d->n = b->dims[d->trans_b ? 0 : 1];
  if (b->dims[d->trans_b ? 1 : 0] != d->k)
    return fail(err, NR_ERR_INVALID_MODEL, n, "op(A) has K = %lld, op(B) K = %lld",
                (long long)d->k, (long long)b->dims[d->trans_b ? 1 : 0]);
  d->alpha = nr_attr_float(n, "alpha", 1.0f);
  d->beta = nr_attr_float(n, "beta", 1.0f);
  return NR_OK;
}

/* Y's batch dims: A's and B's dims before their last two, right-aligned, broadcast. */
static nr_status matmul_batch(const nr_node *n, const nr_value *a, const nr_value *b,
                              nr_gemm_desc *d, nr_error *err) {
  int ar = a->rank > 2 ? a->rank - 2 : 0, br = b->rank > 2 ? b->rank - 2 : 0;
  int yr = ar > br ? ar : br;
  d->batch_rank = yr;
  for (int i = 0; i < yr; i++) {
    int64_t ad = i - (yr - ar) >= 0 ? a->dims[i - (yr - ar)] : 1;
    int64_t bd = i - (yr - br) >= 0 ? b->dims[i - (yr - br)] : 1;
    if (ad != bd && ad != 1 && bd != 1)
      return fail(err, NR_ERR_INVALID_MODEL, n,
                  "batch dim %d: A has %lld, B has %lld (no broadcast)", i, (long long)ad,
                  (long long)bd);
    d->a_batch[i] = ad, d->b_batch[i] = bd;
    d->batch_dims[i] = ad == 1 ? bd : ad;
  }
  int64_t as = d->m * d->k, bs = d->k * d->n;
  d->batch = d->a_batch_count = d->b_batch_count = 1;
  for (int i = yr - 1; i >= 0; i--) {
    d->a_stride[i] = d->a_batch[i] == 1 ? 0 : as;
    d->b_stride[i] = d->b_batch[i] == 1 ? 0 : bs;
    as *= d->a_batch[i], bs *= d->b_batch[i];
    d->batch *= d->batch_dims[i];
    d->a_batch_count *= d->a_batch[i], d->b_batch_count *= d->b_batch[i];
  }
  return NR_OK;
}

static nr_status matmul_dims(const nr_node *n, const nr_value *a, const nr_value *b,
                             nr_gemm_desc *d, nr_error *err) {
  if (a->rank < 1 || b->rank < 1)
    return fail(err, NR_ERR_INVALID_MODEL, n, "A and B must have rank 1 or more");
  d->m = a->rank == 1 ? 1 : a->dims[a->rank - 2];
  d->k = a->dims[a->rank - 1];
  d->n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
  int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
  if (kb != d->k)
    return fail(err, NR_ERR_INVALID_MODEL, n, "A has K = %lld, B has K = %lld",
                (long long)d->k, (long long)kb);
  d->alpha = d->beta = 1.0f;
  return matmul_batch(n, a, b, d, err);
}

/* Inputs 2 and 3 and the fused activation. */
static nr_status gemm_extras(const nr_node *n, const nr_node_io *io, nr_gemm_desc *d,
                             nr_error *err) {
  const nr_value *c = nr_node_io_in(io, 2), *r = nr_node_io_in(io, 3);
  bool fused = d->op == NR_GEMM_OP_FUSED_GEMM || d->op == NR_GEMM_OP_FUSED_MATMUL;
  nr_status st = no_inputs_past(n, io, fused ? 4 : d->op == NR_GEMM_OP_GEMM ? 3 : 2, err);
  if (st)
    return st;
  if (c && is_gemm_op(d->op))
    st = gemm_c(n, c, d, err);
  else if (c) { /* FusedMatMul's Bias: one value per column */
    if (count_of(c) != d->n)
      return fail(err, NR_ERR_UNSUPPORTED, n, "Bias has %lld values, N is %lld",
                  (long long)count_of(c), (long long)d->n);
    d->add = NR_GEMM_ADD_COL, d->add_rows = 1, d->add_cols = d->n;
  }
  if (st)
    return st;
  if (r && count_of(r) != d->batch * d->m * d->n)
    return fail(err, NR_ERR_INVALID_MODEL, n, "R has %lld values, Y %lld",
                (long long)count_of(r), (long long)(d->batch * d->m * d->n));
  d->residual = r != NULL;
  return fused ? fused_act(n, &d->act, &d->act_a, &d->act_b, err) : NR_OK;
}

nr_status nr_gemm_desc_parse(const nr_node *n, const nr_node_io *io, nr_gemm_desc *d,
                             nr_error *err) {
  memset(d, 0, sizeof *d);
  if (!nr_gemm_desc_is_node(n))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "not a Gemm/MatMul node");
  if (!counts_fit(io))
    return fail(err, NR_ERR_INVALID_MODEL, n, "too many inputs or outputs");
  const nr_value *a = nr_node_io_in(io, 0), *b = nr_node_io_in(io, 1);
  const nr_value *y = nr_node_io_out(io, 0);
  if (!a || !b)
    return fail(err, NR_ERR_INVALID_MODEL, n, "A and B are required");
  for (int i = 0; i < 4; i++)
    if (nr_node_io_in(io, i) && !known(nr_node_io_in(io, i)))
      return fail(err, NR_ERR_UNSUPPORTED, n, "input %d has an unknown shape", i);
  d->op = gemm_op_of(n);
  d->a_rank = a->rank, d->b_rank = b->rank;
  d->batch = d->a_batch_count = d->b_batch_count = 1;
  nr_status st = is_gemm_op(d->op) ? gemm_dims(n, a, b, d, err)
                                   : matmul_dims(n, a, b, d, err);
  if (!st)
    st = gemm_extras(n, io, d, err);
  if (!st && y && known(y) && count_of(y) != d->batch * d->m * d->n)
    st = fail(err, NR_ERR_INVALID_MODEL, n, "Y has %lld values, the products %lld",
              (long long)count_of(y), (long long)(d->batch * d->m * d->n));
  return st;
}

/* ---- Attention -------------------------------------------------------------------- */

enum { ATTN_Q, ATTN_K, ATTN_V, ATTN_MASK, ATTN_PAST_K };

static bool all_positive(const nr_value *v) {
  if (!known(v))
    return false;
  for (int d = 0; d < v->rank; d++)
    if (v->dims[d] < 1)
      return false;
  return true;
}

static void attn_strides(int64_t *st, bool three, int64_t heads, int64_t seq, int64_t hd) {
  st[0] = heads * seq * hd;
  st[1] = three ? hd : seq * hd;
  st[2] = three ? heads * hd : hd;
}

static nr_status attn_heads(const nr_node *n, const nr_value *q, const nr_value *k,
                            const nr_value *v, nr_attn_desc *g, nr_error *err) {
  bool three = q->rank == 3;
  int sd = three ? 1 : 2, hd = q->rank - 1;
  g->hq = three ? nr_attr_int(n, "q_num_heads", 0) : q->dims[1];
  g->hkv = three ? nr_attr_int(n, "kv_num_heads", 0) : k->dims[1];
  if (g->hq < 1 || g->hkv < 1 || g->hq % g->hkv)
    return fail(err, NR_ERR_INVALID_MODEL, n, "%lld query heads, %lld kv heads",
                (long long)g->hq, (long long)g->hkv);
  g->b = q->dims[0], g->s = q->dims[sd], g->t = k->dims[sd];
  g->d = three ? q->dims[hd] / g->hq : q->dims[hd];
  g->dv = three ? v->dims[hd] / g->hkv : v->dims[hd];
  bool bad3 = three && (q->dims[hd] % g->hq || k->dims[hd] != g->d * g->hkv ||
                        v->dims[hd] % g->hkv);
  bool bad4 = !three && (k->dims[1] != v->dims[1] || k->dims[3] != g->d);
  if (bad3 || bad4 || k->dims[0] != g->b || v->dims[0] != g->b || v->dims[sd] != g->t)
    return fail(err, NR_ERR_INVALID_MODEL, n, "Q, K and V shapes do not fit together");
  attn_strides(g->qs, three, g->hq, g->s, g->d);
  attn_strides(g->ks, three, g->hkv, g->t, g->d);
  attn_strides(g->vs, three, g->hkv, g->t, g->dv);
  attn_strides(g->ys, three, g->hq, g->s, g->dv);
  return NR_OK;
}

/* A float or bool mask broadcastable to [B, Hq, S, T] whose last dim is T. */
static nr_status attn_mask(const nr_node *n, const nr_value *m, nr_attn_desc *g,
                           nr_error *err) {
  if (!m)
    return NR_OK;
  if (!known(m) || m->rank < 1 || m->rank > 4 || m->dims[m->rank - 1] != g->t ||
      (m->dtype != NR_DTYPE_FLOAT && m->dtype != NR_DTYPE_BOOL))
    return fail(err, NR_ERR_UNSUPPORTED, n,
                "attn_mask must be float or bool, of rank 1 to 4, last dim T = %lld",
                (long long)g->t);
  int64_t full[4] = {g->b, g->hq, g->s, g->t}, s = 1;
  for (int d = 3, e = m->rank - 1; e >= 0; d--, e--) {
    if (m->dims[e] != 1 && m->dims[e] != full[d])
      return fail(err, NR_ERR_INVALID_MODEL, n,
                  "attn_mask does not broadcast to [B, Hq, S, T]");
    g->ms[d] = m->dims[e] == 1 ? 0 : s;
    s *= m->dims[e];
  }
  g->mask = m->dtype == NR_DTYPE_BOOL ? NR_ATTN_DESC_MASK_BOOL : NR_ATTN_DESC_MASK_FLOAT;
  return NR_OK;
}

static nr_status attn_covered(const nr_node *n, const nr_node_io *io, nr_error *err) {
  if (n->opset < 23)
    return fail(err, NR_ERR_UNSUPPORTED, n, "Attention before opset 23");
  if (!counts_fit(io) || io->n_in < 3)
    return fail(err, NR_ERR_INVALID_MODEL, n, "%d inputs", io->n_in);
  if (nr_attr_float(n, "softcap", 0.0f) != 0.0f ||
      nr_attr_int(n, "left_window_size", -1) != -1 ||
      nr_attr_int(n, "right_window_size", -1) != -1)
    return fail(err, NR_ERR_UNSUPPORTED, n, "softcap or a sliding window");
  for (int i = ATTN_PAST_K; i < io->n_in; i++)
    if (nr_node_io_in(io, i))
      return fail(err, NR_ERR_UNSUPPORTED, n, "a KV cache (input %d)", i);
  for (int o = 1; o < io->n_out; o++)
    if (nr_node_io_out(io, o))
      return fail(err, NR_ERR_UNSUPPORTED, n, "output %d (KV cache or scores)", o);
  return NR_OK;
}

nr_status nr_attn_desc_parse(const nr_node *n, const nr_node_io *io, nr_attn_desc *d,
                             nr_error *err) {
  memset(d, 0, sizeof *d);
  if (!n || strcmp(n->op_type, "Attention") || !is_domain(n, ""))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "not an Attention node");
  nr_status st = attn_covered(n, io, err);
  if (st)
    return st;
  const nr_value *q = nr_node_io_in(io, ATTN_Q), *k = nr_node_io_in(io, ATTN_K);
  const nr_value *v = nr_node_io_in(io, ATTN_V), *y = nr_node_io_out(io, 0);
  if (!all_positive(q) || !all_positive(k) || !all_positive(v) || !all_positive(y))
    return fail(err, NR_ERR_UNSUPPORTED, n, "Q, K, V or Y absent, unknown or empty");
  if ((q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank)
    return fail(err, NR_ERR_INVALID_MODEL, n, "Q, K, V must all be 3-D or all 4-D");
  d->rank = q->rank;
  st = attn_heads(n, q, k, v, d, err);
  if (!st)
    st = attn_mask(n, nr_node_io_in(io, ATTN_MASK), d, err);
  if (st)
    return st;
  if (y->rank != q->rank || count_of(y) != d->b * d->hq * d->s * d->dv)
    return fail(err, NR_ERR_INVALID_MODEL, n, "Y needs Q's rank and B*Hq*S*Dv values");
  const nr_attr *sc = nr_node_attr(n, "scale");
  d->scale = sc ? sc->f : (float)(1.0 / sqrt((double)d->d));
  d->causal = nr_attr_int(n, "is_causal", 0) != 0;
  return NR_OK;
}

/* ---- Concat, Split ---------------------------------------------------------------- */

/* The pieces have the whole's rank and dims except along the axis, where they add up. */
static nr_status pieces(const nr_node *n, const nr_value *whole, const nr_value *const *p,
                        int count, nr_concat_desc *d, nr_error *err) {
  if (!known(whole))
    return fail(err, NR_ERR_UNSUPPORTED, n, "unknown shape");
  int64_t a = nr_attr_int(n, "axis", 0);
  if (a < -whole->rank || a >= whole->rank)
    return fail(err, NR_ERR_INVALID_MODEL, n, "axis %lld out of range for rank %d",
                (long long)a, whole->rank);
  d->axis = (int)(a < 0 ? a + whole->rank : a);
  d->rank = whole->rank, d->n_pieces = count;
  d->outer = d->inner = 1;
  for (int i = 0; i < whole->rank; i++)
    if (i != d->axis)
      *(i < d->axis ? &d->outer : &d->inner) *= whole->dims[i];
  d->total = whole->dims[d->axis];
  int64_t at = 0;
  for (int i = 0; i < count; i++) {
    if (!p[i] || !known(p[i]) || p[i]->rank != whole->rank)
      return fail(err, NR_ERR_INVALID_MODEL, n, "piece %d absent or of another rank", i);
    for (int e = 0; e < whole->rank; e++)
      if (e != d->axis && p[i]->dims[e] != whole->dims[e])
        return fail(err, NR_ERR_INVALID_MODEL, n, "piece %d differs off the axis", i);
    d->offset[i] = at, d->extent[i] = p[i]->dims[d->axis];
    at += d->extent[i];
  }
  if (at != d->total)
    return fail(err, NR_ERR_INVALID_MODEL, n,
                "pieces add up to %lld along the axis, not %lld", (long long)at,
                (long long)d->total);
  return NR_OK;
}

nr_status nr_concat_desc_parse(const nr_node *n, const nr_node_io *io, nr_concat_desc *d,
                               nr_error *err) {
  memset(d, 0, sizeof *d);
  if (!n || strcmp(n->op_type, "Concat") || !is_domain(n, ""))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "not a Concat node");
  if (!counts_fit(io) || io->n_in < 1 || io->n_out != 1 || !nr_node_io_out(io, 0))
    return fail(err, io->n_in > NR_DESC_MAX_IO ? NR_ERR_UNSUPPORTED : NR_ERR_INVALID_MODEL,
                n, "%d inputs, %d outputs", io->n_in, io->n_out);
  const nr_value *p[NR_DESC_MAX_IO];
  for (int i = 0; i < io->n_in; i++)
    p[i] = nr_node_io_in(io, i);
  return pieces(n, nr_node_io_out(io, 0), p, io->n_in, d, err);
}

nr_status nr_split_desc_parse(const nr_node *n, const nr_node_io *io, nr_split_desc *d,
                              nr_error *err) {
  memset(d, 0, sizeof *d);
  if (!n || strcmp(n->op_type, "Split") || !is_domain(n, ""))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "not a Split node");
  if (!counts_fit(io) || io->n_out < 1 || !nr_node_io_in(io, 0))
    return fail(err,
                io->n_out > NR_DESC_MAX_IO ? NR_ERR_UNSUPPORTED : NR_ERR_INVALID_MODEL, n,
                "%d inputs, %d outputs", io->n_in, io->n_out);
  const nr_value *p[NR_DESC_MAX_IO];
  for (int o = 0; o < io->n_out; o++)
    p[o] = nr_node_io_out(io, o);
  return pieces(n, nr_node_io_in(io, 0), p, io->n_out, d, err);
}

/* ---- Conv, FusedConv -------------------------------------------------------------- */

bool nr_conv_desc_is_node(const nr_node *n) {
  if (!n)
    return false;
  return (!strcmp(n->op_type, "Conv") && is_domain(n, "")) ||
         (!strcmp(n->op_type, "FusedConv") && is_domain(n, NR_DOMAIN));
}

/* X [N, C, in...] and W [M, C / group, kernel...]: ranks, channels, groups. */
static nr_status conv_channels(const nr_node *n, const nr_value *x, const nr_value *w,
                               nr_conv_desc *d, nr_error *err) {
  if (x->rank < 3)
    return fail(err, NR_ERR_INVALID_MODEL, n, "X has rank %d (at least 3)", x->rank);
  if (w->rank != x->rank)
    return fail(err, NR_ERR_INVALID_MODEL, n, "W has rank %d, X has rank %d", w->rank,
                x->rank);
  d->batch = x->dims[0], d->in_c = x->dims[1], d->out_c = w->dims[0];
  d->group = nr_attr_int(n, "group", 1);
  if (d->group < 1 || d->in_c != w->dims[1] * d->group || d->out_c % d->group)
    return fail(err, NR_ERR_INVALID_MODEL, n,
                "group %lld does not fit X's %lld channels and W [%lld, %lld, ...]",
                (long long)d->group, (long long)d->in_c, (long long)w->dims[0],
                (long long)w->dims[1]);
  return NR_OK;
}

/* The window against W's kernel and X's sizes; Y must be [N, M, out...]. */
static nr_status conv_window(const nr_node *n, const nr_value *x, const nr_value *w,
                             const nr_value *y, nr_conv_desc *d, nr_error *err) {
  nr_error werr = {0};
  nr_op_ctx oc = {.node = n, .err = &werr};
  int nsp = x->rank - 2;
  if (nr_window_read(&oc, nsp, w->dims + 2, &d->win) ||
      nr_window_forward(&oc, &d->win, x->dims + 2))
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s", werr.message);
  bool fits = y->rank == x->rank && y->dims[0] == d->batch && y->dims[1] == d->out_c;
  for (int i = 0; fits && i < nsp; i++)
    fits = y->dims[2 + i] == d->win.out[i];
  if (!fits)
    return fail(err, NR_ERR_INVALID_MODEL, n, "Y is not [N, M, the window's outputs]");
  return NR_OK;
}

/* B, R and the activation. */
static nr_status conv_epilogue(const nr_node *n, const nr_node_io *io, const nr_value *y,
                               nr_conv_desc *d, nr_error *err) {
  const nr_value *b = nr_node_io_in(io, 2), *r = nr_node_io_in(io, 3);
  if (b && count_of(b) != d->out_c)
    return fail(err, NR_ERR_INVALID_MODEL, n, "B has %lld values, M is %lld",
                (long long)count_of(b), (long long)d->out_c);
  if (r && count_of(r) != count_of(y))
    return fail(err, NR_ERR_INVALID_MODEL, n, "R has %lld values, Y %lld",
                (long long)count_of(r), (long long)count_of(y));
  d->bias = b != NULL, d->residual = r != NULL;
  return d->fused ? fused_act(n, &d->act, &d->act_a, &d->act_b, err) : NR_OK;
}

nr_status nr_conv_desc_parse(const nr_node *n, const nr_node_io *io, nr_conv_desc *d,
                             nr_error *err) {
  memset(d, 0, sizeof *d);
  if (!nr_conv_desc_is_node(n))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "not a Conv/FusedConv node");
  d->fused = is_domain(n, NR_DOMAIN);
  int max_in = d->fused ? 4 : 3;
  if (!counts_fit(io) || io->n_out != 1)
    return fail(err, NR_ERR_INVALID_MODEL, n, "%d inputs, %d outputs", io->n_in,
                io->n_out);
  nr_status st = no_inputs_past(n, io, max_in, err);
  if (st)
    return st;
  const nr_value *x = nr_node_io_in(io, 0), *w = nr_node_io_in(io, 1);
  const nr_value *y = nr_node_io_out(io, 0);
  if (!x || !w || !y)
    return fail(err, NR_ERR_INVALID_MODEL, n, "X, W and Y are required");
  for (int i = 0; i < max_in; i++)
    if (nr_node_io_in(io, i) && !known(nr_node_io_in(io, i)))
      return fail(err, NR_ERR_UNSUPPORTED, n, "input %d has an unknown shape", i);
  if (!known(y))
    return fail(err, NR_ERR_UNSUPPORTED, n, "Y has an unknown shape");
  st = conv_channels(n, x, w, d, err);
  if (!st)
    st = conv_window(n, x, w, y, d, err);
  if (!st)
    st = conv_epilogue(n, io, y, d, err);
  return st;
}
