/* ops_attention.c - reference Attention (ai.onnx opsets 23-25): scaled dot-product
 * attention with 3-D or 4-D inputs, grouped-query heads, a KV cache (past/present),
 * boolean or additive masks, causal masking, softcap, nonpad_kv_seqlen (24), sliding
 * windows (25) and the optional qk_matmul_output. Its rows join nr_ref_ops_norm[]
 * (see normreduce.h).
 *
 * Key decision: one query row at a time. For each (batch, query head, position) the
 * kernel builds the row's additive bias (mask + causal + window + padding), its
 * logits, the softmax and the weighted sum of V, in double. The semantics follow the
 * ONNX reference: causal masking is bottom-right aligned (a query at i sees keys
 * j <= i + offset, offset = past length, or nonpad_kv_seqlen[b] - q_len), a row whose
 * bias is entirely -inf yields zeros, softcap applies before the bias, and
 * qk_matmul_output mode 0/1 is the (softcapped) scaled QK, mode 2 adds the bias,
 * mode 3 is the softmax. Half-precision inputs are rounded where the reference
 * rounds (scaled Q and K, the logits, the probabilities) so fp16 results track it. */
#include "kernels/ref/normreduce.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { IN_Q, IN_K, IN_V, IN_MASK, IN_PAST_K, IN_PAST_V, IN_NONPAD };
enum { OUT_Y, OUT_PRESENT_K, OUT_PRESENT_V, OUT_QK };

/* Everything about one Attention call that the loops need. */
typedef struct attn_dims {
  bool three_d;
  int64_t b, hq, hkv, s, l, p, t, d, dv; /* t = p + l: total keys */
  int64_t qs[3], ks[3], vs[3];           /* batch, head, position strides (d is 1) */
} attn_dims;

/* ---- shapes --------------------------------------------------------------------- */

static void set_strides(int64_t *st, bool three_d, int64_t heads, int64_t seq,
                        int64_t hd) {
  st[0] = heads * seq * hd;
  st[1] = three_d ? hd : seq * hd;
  st[2] = three_d ? heads * hd : hd;
}

static nr_status attn_heads(nr_op_ctx *ctx, const nr_value *q, const nr_value *k,
                            attn_dims *a) {
  if (!a->three_d) {
    a->hq = q->dims[1];
    a->hkv = k->dims[1];
    return NR_OK;
  }
  a->hq = nr_attr_int(ctx->node, "q_num_heads", 0);
  a->hkv = nr_attr_int(ctx->node, "kv_num_heads", 0);
  if (a->hq <= 0 || a->hkv <= 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "3-D inputs need positive q_num_heads and kv_num_heads");
  return NR_OK;
}

/* past_key (B, Hkv, P, d) or past_value (B, Hkv, P, dv): 4-D, each known dim as Q, K
 * and V say (the cache kernels index it by those dims). */
static bool past_fits(const nr_value *past, const attn_dims *a, int64_t head) {
  if (!past)
    return true;
  if (past->rank != 4)
    return false;
  int64_t want[4] = {a->b, a->hkv, a->p, head};
  for (int i = 0; i < 4; i++)
    if (want[i] >= 0 && past->dims[i] >= 0 && past->dims[i] != want[i])
      return false;
  return true;
}

/* Reads and checks the dims; unknown dims stay -1 (static inference). */
static nr_status attn_shape(nr_op_ctx *ctx, attn_dims *a) {
  const nr_value *q = nr_op_in(ctx, IN_Q), *k = nr_op_in(ctx, IN_K);
  const nr_value *v = nr_op_in(ctx, IN_V), *pk = nr_op_in(ctx, IN_PAST_K);
  memset(a, 0, sizeof *a);
  if ((q->rank != 3 && q->rank != 4) || k->rank != q->rank || v->rank != q->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "Q, K, V must all be 3-D or all 4-D (ranks %d %d %d)",
                      q->rank, k->rank, v->rank);
  a->three_d = q->rank == 3;
  nr_status st = attn_heads(ctx, q, k, a);
  if (st)
    return st;
  int sd = a->three_d ? 1 : 2, hd = q->rank - 1;
  a->b = q->dims[0];
  a->s = q->dims[sd];
  a->l = k->dims[sd];
  a->d = a->three_d ? (q->dims[hd] < 0 ? -1 : q->dims[hd] / a->hq) : q->dims[hd];
  a->dv = a->three_d ? (v->dims[hd] < 0 ? -1 : v->dims[hd] / a->hkv) : v->dims[hd];
  a->p = pk ? (pk->rank == 4 ? pk->dims[2] : -1) : 0;
  a->t = a->p < 0 || a->l < 0 ? -1 : a->p + a->l;
  if (a->hq > 0 && a->hkv > 0 && a->hq % a->hkv)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "q heads (%lld) not a multiple of kv heads (%lld)",
                      (long long)a->hq, (long long)a->hkv);
  if (a->three_d && ((q->dims[hd] > 0 && q->dims[hd] % a->hq) ||
                     (k->dims[hd] > 0 && k->dims[hd] != a->d * a->hkv && a->d >= 0)))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "hidden sizes of Q and K do not match the heads");
  if (!a->three_d && k->dims[hd] >= 0 && a->d >= 0 && k->dims[hd] != a->d)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "Q and K head sizes differ");
  const int64_t vh = a->three_d ? -1 : v->dims[1]; /* 3-D: heads come from attributes */
  if ((k->dims[0] >= 0 && a->b >= 0 && k->dims[0] != a->b) ||
      (v->dims[0] >= 0 && a->b >= 0 && v->dims[0] != a->b) ||
      (v->dims[sd] >= 0 && a->l >= 0 && v->dims[sd] != a->l) ||
      (vh >= 0 && a->hkv >= 0 && vh != a->hkv))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "K and V must agree with Q in batch and with each "
                      "other in heads and sequence length");
  if (!past_fits(pk, a, a->d) || !past_fits(nr_op_in(ctx, IN_PAST_V), a, a->dv))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "past_key and past_value must be 4-D (batch, kv "
                      "heads, past length, head size) and agree with K and V");
  set_strides(a->qs, a->three_d, a->hq, a->s, a->d);
  set_strides(a->ks, a->three_d, a->hkv, a->l, a->d);
  set_strides(a->vs, a->three_d, a->hkv, a->l, a->dv);
  return NR_OK;
}

nr_status nr_ref_attention_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 7);
  const nr_value *q = nr_op_in(ctx, IN_Q);
  if (st)
    return st;
  if (q->dtype && !nr_dtype_is_float(q->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "Q must be float, got %s", nr_dtype_name(q->dtype));
  if (!nr_op_in(ctx, IN_PAST_K) != !nr_op_in(ctx, IN_PAST_V))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "past_key and past_value go together");
  if (q->rank < 0 || nr_op_in(ctx, IN_K)->rank < 0 || nr_op_in(ctx, IN_V)->rank < 0) {
    for (int i = 0; i < 4; i++)
      nr_op_set_output(ctx, i, q->dtype, -1, NULL);
    return NR_OK;
  }
  attn_dims a;
  if ((st = attn_shape(ctx, &a)))
    return st;
  int64_t y3[] = {a.b, a.s, a.dv < 0 ? -1 : a.hq * a.dv}, y4[] = {a.b, a.hq, a.s, a.dv};
  int64_t pk[] = {a.b, a.hkv, a.t, a.d}, pv[] = {a.b, a.hkv, a.t, a.dv};
  int64_t qk[] = {a.b, a.hq, a.s, a.t};
  if ((st = nr_op_set_output(ctx, OUT_Y, q->dtype, q->rank, a.three_d ? y3 : y4)) ||
      (st = nr_op_set_output(ctx, OUT_PRESENT_K, q->dtype, 4, pk)) ||
      (st = nr_op_set_output(ctx, OUT_PRESENT_V, q->dtype, 4, pv)))
    return st;
  return nr_op_set_output(ctx, OUT_QK, q->dtype, 4, qk);
}

/* ---- the KV cache --------------------------------------------------------------- */

/* present = concat(past, new) along the sequence, as (B, Hkv, T, hd) doubles. */
static double *attn_cache(nr_op_ctx *ctx, const attn_dims *a, int in_new, int in_past,
                          int64_t hd, const int64_t *ns) {
  const nr_value *nv = nr_op_in(ctx, in_new), *pv = nr_op_in(ctx, in_past);
  double *c = nr_ref_scratch(ctx, a->b * a->hkv * a->t * hd);
  for (int64_t b = 0; c && b < a->b; b++) {
    for (int64_t h = 0; h < a->hkv; h++) {
      double *row = c + (b * a->hkv + h) * a->t * hd;
      if (pv)
        nr_ref_gather_f64(pv, (b * a->hkv + h) * a->p * hd, 1, a->p * hd, row);
      for (int64_t j = 0; j < a->l; j++)
        nr_ref_gather_f64(nv, b * ns[0] + h * ns[1] + j * ns[2], 1, hd,
                          row + (a->p + j) * hd);
    }
  }
  return c;
}

/* ---- one query row ---------------------------------------------------------------- */

typedef struct attn_row_ctx {
  const attn_dims *a;
  const nr_value *mask, *nonpad;
  int64_t mstr[4], mlast; /* mask strides over (b, h, i, j); its last dim */
  bool causal, has_past;
  int64_t left, right; /* sliding window bounds (opset 25), -1: unbounded */
  double scale, softcap;
  nr_dtype dtype;
} attn_row_ctx;

/* Rounds x to the model's dtype when that is a 16-bit float, as the reference does. */
static double round_to(nr_dtype t, double x) {
  if (t == NR_DTYPE_FLOAT16)
    return nr_f16_to_f32(nr_f32_to_f16((float)x));
  if (t == NR_DTYPE_BFLOAT16)
    return nr_bf16_to_f32(nr_f32_to_bf16((float)x));
  return x;
}

static void mask_strides(attn_row_ctx *r) {
  const nr_value *m = r->mask;
  int64_t s = 1;
  memset(r->mstr, 0, sizeof r->mstr);
  for (int d = 3, e = m->rank - 1; e >= 0; d--, e--) {
    r->mstr[d] = m->dims[e] == 1 && d < 3 ? 0 : s;
    s *= m->dims[e];
  }
  r->mlast = m->rank ? m->dims[m->rank - 1] : 1;
}

/* Additive bias of row (b, h, i) over all t keys. */
static void attn_bias(const attn_row_ctx *r, int64_t b, int64_t h, int64_t i,
                      double *bias) {
  const attn_dims *a = r->a;
  int64_t np = r->nonpad ? nr_value_get_i64(r->nonpad, b) : a->t;
  int64_t off = r->has_past || !r->nonpad ? a->p : np - a->s;
  for (int64_t j = 0; j < a->t; j++) {
    double v = 0;
    if (r->mask && j >= r->mlast) {
      v = -INFINITY; /* a short mask is padded with "masked" */
    } else if (r->mask) {
      int64_t at = b * r->mstr[0] + h * r->mstr[1] + i * r->mstr[2] + j * r->mstr[3];
      v = nr_load_f64(r->mask->dtype, r->mask->data, at);
      if (r->mask->dtype == NR_DTYPE_BOOL)
        v = v != 0 ? 0 : -INFINITY;
    }
    int64_t diff = i + off - j;
    if ((r->causal && diff < 0) || j >= np || (r->left >= 0 && diff > r->left) ||
        (r->right >= 0 && -diff > r->right))
      v += -INFINITY;
    bias[j] = v;
  }
}

/* Softmax of logits + bias with the reference's conventions: an all -inf row gives
 * zeros, and a row whose bias is all -inf is zeroed whatever its logits. */
static void attn_softmax(const double *logit, const double *bias, double *p, int64_t t) {
  double m = -INFINITY, bm = -INFINITY, s = 0;
  for (int64_t j = 0; j < t; j++) {
    p[j] = logit[j] + bias[j];
    m = p[j] > m ? p[j] : m;
    bm = bias[j] > bm ? bias[j] : bm;
  }
  if (m == -INFINITY)
    m = 0;
  for (int64_t j = 0; j < t; j++)
    s += p[j] = exp(p[j] - m);
  for (int64_t j = 0; j < t; j++)
    p[j] = bm == -INFINITY ? 0 : p[j] / (s == 0 ? 1 : s);
}

/* x[i] = round(x[i] * sqrt(scale)): the reference scales Q and K by sqrt(scale) each,
 * in the model's dtype. */
static void attn_prescale(const attn_row_ctx *r, double *x, int64_t n) {
  double sq = round_to(r->dtype, sqrt(r->scale));
  for (int64_t i = 0; i < n; i++)
    x[i] = round_to(r->dtype, x[i] * sq);
}

/* logit[j] = softcap(q . k_j) for one prescaled query row and prescaled keys. */
static void attn_logits(const attn_row_ctx *r, const double *q, const double *ks,
                        double *logit) {
  const attn_dims *a = r->a;
  for (int64_t j = 0; j < a->t; j++) {
    double dot = 0;
    for (int64_t d = 0; d < a->d; d++)
      dot += q[d] * ks[j * a->d + d];
    dot = round_to(r->dtype, dot);
    if (r->softcap > 0)
      dot = r->softcap * tanh(dot / r->softcap);
    logit[j] = dot;
  }
}

/* ---- run ---------------------------------------------------------------------- */

static void store_row(nr_value *v, int64_t base, int64_t n, const double *src) {
  if (v)
    nr_ref_scatter_f64(v, base, 1, n, src);
}

static nr_status attn_rows(nr_op_ctx *ctx, attn_row_ctx *r, const double *ks,
                           const double *vc, double *buf) {
  const attn_dims *a = r->a;
  const nr_value *q = nr_op_in(ctx, IN_Q);
  nr_value *y = nr_op_out(ctx, OUT_Y), *qk = nr_op_out(ctx, OUT_QK);
  int64_t mode = nr_attr_int(ctx->node, "qk_matmul_output_mode", 0), t = a->t;
  double *qrow = buf, *bias = qrow + a->d, *logit = bias + t, *p = logit + t;
  double *yrow = p + t, *extra = yrow + a->dv;
  int64_t ys[3];
  set_strides(ys, a->three_d, a->hq, a->s, a->dv);
  for (int64_t b = 0; b < a->b; b++)
    for (int64_t h = 0; h < a->hq; h++) {
      int64_t kvh = h / (a->hq / a->hkv);
      const double *kh = ks + (b * a->hkv + kvh) * t * a->d;
      const double *vh = vc + (b * a->hkv + kvh) * t * a->dv;
      for (int64_t i = 0; i < a->s; i++) {
        nr_ref_gather_f64(q, b * a->qs[0] + h * a->qs[1] + i * a->qs[2], 1, a->d, qrow);
        attn_prescale(r, qrow, a->d);
        attn_bias(r, b, h, i, bias);
        attn_logits(r, qrow, kh, logit);
        attn_softmax(logit, bias, p, t);
        for (int64_t j = 0; j < t; j++) {
          extra[j] = mode == 3 ? p[j] : mode == 2 ? logit[j] + bias[j] : logit[j];
          p[j] = round_to(r->dtype, p[j]);
        }
        store_row(qk, ((b * a->hq + h) * a->s + i) * t, t, extra);
        for (int64_t e = 0; e < a->dv; e++) {
          double s = 0;
          for (int64_t j = 0; j < t; j++)
            s += p[j] * vh[j * a->dv + e];
          yrow[e] = s;
        }
        nr_ref_scatter_f64(y, b * ys[0] + h * ys[1] + i * ys[2], 1, a->dv, yrow);
      }
    }
  return NR_OK;
}

static nr_status attn_init_row(nr_op_ctx *ctx, const attn_dims *a, attn_row_ctx *r) {
  memset(r, 0, sizeof *r);
  r->a = a;
  r->mask = nr_op_in(ctx, IN_MASK);
  r->nonpad = nr_op_in(ctx, IN_NONPAD);
  r->causal = nr_attr_int(ctx->node, "is_causal", 0) != 0;
  r->has_past = nr_op_in(ctx, IN_PAST_K) != NULL;
  r->left = nr_attr_int(ctx->node, "left_window_size", -1);
  r->right = nr_attr_int(ctx->node, "right_window_size", -1);
  if (r->left < -1 || r->right < -1)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "window sizes must be -1 or >= 0");
  r->softcap = nr_attr_float(ctx->node, "softcap", 0.0f);
  r->dtype = nr_op_in(ctx, IN_Q)->dtype;
  const nr_attr *sc = nr_node_attr(ctx->node, "scale");
  r->scale = sc ? (double)sc->f : 1.0 / sqrt((double)a->d);
  if (r->mask && r->mask->rank > 4)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "attn_mask has rank %d (at most 4)", r->mask->rank);
  /* Broadcast to (batch, q heads, q length, keys): each leading dim is 1 or the size. */
  const int64_t want[3] = {a->b, a->hq, a->s};
  for (int d = 0, e = r->mask ? r->mask->rank - 4 : 0; r->mask && d < 3; d++, e++)
    if (e >= 0 && r->mask->dims[e] != 1 && r->mask->dims[e] != want[d])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "attn_mask dim %d is %lld; it must be 1 or %lld",
                        e, (long long)r->mask->dims[e], (long long)want[d]);
  if (r->mask)
    mask_strides(r);
  if (r->mask && r->mlast > a->t)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "attn_mask covers %lld keys, only %lld exist",
                      (long long)r->mlast, (long long)a->t);
  if (r->nonpad && nr_value_count(r->nonpad) != a->b)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "nonpad_kv_seqlen needs one value per batch");
  return NR_OK;
}

nr_status nr_ref_attention_run(nr_op_ctx *ctx) {
  attn_dims a;
  attn_row_ctx r;
  nr_status st = attn_shape(ctx, &a);
  if (st || (st = attn_init_row(ctx, &a, &r)))
    return st;
  double *kc = attn_cache(ctx, &a, IN_K, IN_PAST_K, a.d, a.ks);
  double *vc = attn_cache(ctx, &a, IN_V, IN_PAST_V, a.dv, a.vs);
  double *buf = nr_ref_scratch(ctx, a.d + 4 * a.t + a.dv);
  int64_t nk = a.b * a.hkv * a.t * a.d;
  double *ks = kc ? nr_ref_scratch(ctx, nk) : NULL;
  if (ks) {
    store_row(nr_op_out(ctx, OUT_PRESENT_K), 0, nk, kc);
    memcpy(ks, kc, sizeof(double) * (size_t)nk);
    attn_prescale(&r, ks, nk);
  }
  st = ks && vc && buf ? attn_rows(ctx, &r, ks, vc, buf) : NR_ERR_NOMEM;
  if (!st)
    store_row(nr_op_out(ctx, OUT_PRESENT_V), 0, a.b * a.hkv * a.t * a.dv, vc);
  free(ks);
  free(kc);
  free(vc);
  free(buf);
  return st;
}
