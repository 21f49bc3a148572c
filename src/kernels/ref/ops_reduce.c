/* ops_reduce.c - reference reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,
 * LogSumExp,SumSquare}, ArgMax/ArgMin, TopK, CumSum/CumProd, plus the lane and
 * reduction-plan tools that ops_norm.c and ops_attention.c share (normreduce.h).
 *
 * Float reductions gather each lane into doubles and reduce there, so float32 and
 * float16 inputs lose nothing to accumulation order. Integer inputs take an exact int64
 * path (sums wrap like the C type would); only L2, LogSum and LogSumExp of integers go
 * through double, as the ONNX reference does. Reduction axes come from the `axes`
 * attribute before opset 13 (ReduceSum) or 18 (the others), from the optional second
 * input after; unknown axes leave the output rank or dims unknown. */
#include "kernels/ref/normreduce.h"
#include "kernels/ref/ref_util.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- lanes and plans (shared, see normreduce.h) ---------------------------------- */

void nr_ref_gather_f64(const nr_value *v, int64_t base, int64_t stride, int64_t n,
                       double *dst) {
  if (v->dtype == NR_DTYPE_FLOAT) {
    const float *p = (const float *)v->data + base;
    for (int64_t i = 0; i < n; i++)
      dst[i] = p[i * stride];
    return;
  }
  for (int64_t i = 0; i < n; i++)
    dst[i] = nr_load_f64(v->dtype, v->data, base + i * stride);
}

void nr_ref_scatter_f64(nr_value *v, int64_t base, int64_t stride, int64_t n,
                        const double *src) {
  if (v->dtype == NR_DTYPE_FLOAT) {
    float *p = (float *)v->data + base;
    for (int64_t i = 0; i < n; i++)
      p[i * stride] = (float)src[i];
    return;
  }
  for (int64_t i = 0; i < n; i++)
    nr_store_f64(v->dtype, v->data, base + i * stride, src[i]);
}

void nr_ref_gather_idx_f64(const nr_value *v, int64_t base, const int64_t *off,
                           int64_t n, double *dst) {
  if (v->dtype == NR_DTYPE_FLOAT) {
    const float *p = (const float *)v->data + base;
    for (int64_t i = 0; i < n; i++)
      dst[i] = p[off[i]];
    return;
  }
  for (int64_t i = 0; i < n; i++)
    dst[i] = nr_load_f64(v->dtype, v->data, base + off[i]);
}

void nr_ref_gather_idx_i64(const nr_value *v, int64_t base, const int64_t *off,
                           int64_t n, int64_t *dst) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = nr_load_i64(v->dtype, v->data, base + off[i]);
}

void nr_ref_scatter_idx_f64(nr_value *v, int64_t base, const int64_t *off, int64_t n,
                            const double *src) {
  for (int64_t i = 0; i < n; i++)
    nr_store_f64(v->dtype, v->data, base + off[i], src[i]);
}

nr_status nr_ref_rplan_init(nr_ref_rplan *p, int rank, const int64_t *dims,
                            const bool *reduced, nr_error *err) {
  int64_t strides[NR_MAX_RANK], rdims[NR_MAX_RANK], rstr[NR_MAX_RANK];
  int n_red_axes = 0;
  memset(p, 0, sizeof *p);
  nr_strides(rank, dims, strides);
  p->n_out = 1;
  p->n_red = 1;
  for (int d = 0; d < rank; d++) {
    if (reduced[d]) {
      rdims[n_red_axes] = dims[d];
      rstr[n_red_axes++] = strides[d];
      p->n_red *= dims[d];
    } else {
      p->kdims[p->n_kept] = dims[d];
      p->kstrides[p->n_kept++] = strides[d];
      p->n_out *= dims[d];
    }
  }
  p->roff = malloc(sizeof(int64_t) * (size_t)(p->n_red ? p->n_red : 1));
  if (!p->roff)
    return nr_errorf(err, NR_ERR_NOMEM, "reduction plan of %lld elements",
                     (long long)p->n_red);
  /* Offsets of the reduced elements in C order over the reduced axes. */
  for (int64_t r = 0; r < p->n_red; r++) {
    int64_t rest = r, off = 0;
    for (int a = n_red_axes - 1; a >= 0; a--) {
      off += (rest % rdims[a]) * rstr[a];
      rest /= rdims[a];
    }
    p->roff[r] = off;
  }
  return NR_OK;
}

int64_t nr_ref_rplan_base(const nr_ref_rplan *p, int64_t o) {
  int64_t off = 0;
  for (int a = p->n_kept - 1; a >= 0; a--) {
    off += (o % p->kdims[a]) * p->kstrides[a];
    o /= p->kdims[a];
  }
  return off;
}

void nr_ref_rplan_free(nr_ref_rplan *p) {
  free(p->roff);
  p->roff = NULL;
}

int64_t nr_ref_dims_prod(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++)
    n *= dims[d];
  return n;
}

int64_t nr_ref_arg_best_f64(const double *x, int64_t n, bool want_max, bool last) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++) {
    if (isnan(x[best])) { /* a NaN is the extreme; only a later NaN replaces it */
      if (last && isnan(x[i]))
        best = i;
      continue;
    }
    if (isnan(x[i]) || (want_max ? x[i] > x[best] : x[i] < x[best]) ||
        (last && x[i] == x[best]))
      best = i;
  }
  return best;
}

double *nr_ref_scratch(nr_op_ctx *ctx, int64_t n) {
  double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  if (!p)
    nr_op_fail(ctx, NR_ERR_NOMEM, "cannot allocate %lld scratch values", (long long)n);
  return p;
}

/* ---- Reduce* ---------------------------------------------------------------------- */

typedef enum reduce_kind {
  RK_SUM, RK_MEAN, RK_MAX, RK_MIN, RK_PROD, RK_L1, RK_L2, RK_LOGSUM, RK_LOGSUMEXP,
  RK_SUMSQUARE,
} reduce_kind;

typedef struct reduce_axes {
  bool known; /* false when the axes input has no data yet */
  bool noop;  /* empty axes with noop_with_empty_axes=1: output is the input */
  bool reduced[NR_MAX_RANK];
} reduce_axes;

static bool axes_are_input(const nr_node *n) {
  return n->opset >= (strcmp(n->op_type, "ReduceSum") == 0 ? 13 : 18);
}

static nr_status mark_axis(nr_op_ctx *ctx, int64_t axis, int rank, reduce_axes *ra) {
  int a;
  nr_status st = nr_op_axis(ctx, axis, rank, &a);
  if (st)
    return st;
  if (ra->reduced[a])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld appears twice in axes",
                      (long long)axis);
  ra->reduced[a] = true;
  return NR_OK;
}

/* Resolves the reduced axes of a rank-`rank` input. */
static nr_status reduce_get_axes(nr_op_ctx *ctx, int rank, reduce_axes *ra) {
  memset(ra, 0, sizeof *ra);
  ra->known = true;
  int64_t count = 0;
  const nr_value *a = NULL;
  const int64_t *list = NULL;
  if (axes_are_input(ctx->node)) {
    a = nr_op_in(ctx, 1);
    if (a && a->rank > 1)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "axes input must be 1-D, got rank %d", a->rank);
    count = a ? nr_value_count(a) : 0;
    if (a && (count < 0 || (count > 0 && !a->data))) {
      ra->known = false;
      return NR_OK;
    }
  } else {
    size_t n;
    list = nr_attr_ints(ctx->node, "axes", &n);
    count = (int64_t)n;
  }
  for (int64_t i = 0; i < count; i++) {
    nr_status st = mark_axis(ctx, list ? list[i] : nr_value_get_i64(a, i), rank, ra);
    if (st)
      return st;
  }
  if (count == 0) {
    ra->noop = nr_attr_int(ctx->node, "noop_with_empty_axes", 0) != 0;
    for (int d = 0; d < rank && !ra->noop; d++)
      ra->reduced[d] = true;
  }
  return NR_OK;
}

static bool reduce_dtype_ok(const nr_node *n, nr_dtype t) {
  if (nr_dtype_is_float(t) || nr_dtype_is_int(t))
    return true;
  return t == NR_DTYPE_BOOL && (!strcmp(n->op_type, "ReduceMax") ||
                                !strcmp(n->op_type, "ReduceMin"));
}

static nr_status reduce_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype && !reduce_dtype_ok(ctx->node, x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "does not take %s input", nr_dtype_name(x->dtype));
  if (x->rank < 0)
    return nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  reduce_axes ra;
  if ((st = reduce_get_axes(ctx, x->rank, &ra)))
    return st;
  bool keep = nr_attr_int(ctx->node, "keepdims", 1) != 0;
  int64_t dims[NR_MAX_RANK];
  int r = 0;
  if (!ra.known) {
    for (int d = 0; d < x->rank; d++)
      dims[d] = NR_DIM_UNKNOWN;
    return nr_op_set_output(ctx, 0, x->dtype, keep ? x->rank : -1, dims);
  }
  for (int d = 0; d < x->rank; d++) {
    if (!ra.reduced[d])
      dims[r++] = x->dims[d];
    else if (keep)
      dims[r++] = 1;
  }
  return nr_op_set_output(ctx, 0, x->dtype, r, dims);
}

static double sum_f64(const double *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    s += x[i];
  return s;
}

static double log_sum_exp(const double *x, int64_t n) {
  if (n == 0)
    return -INFINITY;
  double m = x[nr_ref_arg_best_f64(x, n, true, false)];
  if (isnan(m) || isinf(m))
    return m; /* +inf, or all -inf (log 0), or NaN propagate */
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    s += exp(x[i] - m);
  return m + log(s);
}

static double reduce_f64(reduce_kind k, const double *x, int64_t n) {
  double s = 0;
  switch (k) {
  case RK_SUM: return sum_f64(x, n);
  case RK_MEAN: return sum_f64(x, n) / (double)n;
  case RK_MAX: return n ? x[nr_ref_arg_best_f64(x, n, true, false)] : -INFINITY;
  case RK_MIN: return n ? x[nr_ref_arg_best_f64(x, n, false, false)] : INFINITY;
  case RK_PROD:
    s = 1;
    for (int64_t i = 0; i < n; i++)
      s *= x[i];
    return s;
  case RK_L1:
    for (int64_t i = 0; i < n; i++)
      s += fabs(x[i]);
    return s;
  case RK_L2:
  case RK_SUMSQUARE:
    for (int64_t i = 0; i < n; i++)
      s += x[i] * x[i];
    return k == RK_L2 ? sqrt(s) : s;
  case RK_LOGSUM: return log(sum_f64(x, n));
  case RK_LOGSUMEXP: return log_sum_exp(x, n);
  }
  return NAN;
}

/* Lowest and highest value of an integer (or bool) dtype, for empty Max/Min. */
static void int_limits(nr_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
  case NR_DTYPE_BOOL: *lo = 0; *hi = 1; return;
  case NR_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return;
  case NR_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; return;
  case NR_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return;
  case NR_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; return;
  case NR_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return;
  case NR_DTYPE_UINT32: *lo = 0; *hi = UINT32_MAX; return;
  case NR_DTYPE_UINT64: *lo = 0; *hi = -1; return; /* bit pattern of UINT64_MAX */
  default: *lo = INT64_MIN; *hi = INT64_MAX; return;
  }
}

/* Integer max/min; uint64 compares unsigned. */
static int64_t extreme_i64(nr_dtype t, const int64_t *x, int64_t n, bool want_max) {
  int64_t lo, hi;
  int_limits(t, &lo, &hi);
  int64_t best = want_max ? lo : hi;
  for (int64_t i = 0; i < n; i++) {
    bool gt = t == NR_DTYPE_UINT64 ? (uint64_t)x[i] > (uint64_t)best : x[i] > best;
    bool lt = t == NR_DTYPE_UINT64 ? (uint64_t)x[i] < (uint64_t)best : x[i] < best;
    if (want_max ? gt : lt)
      best = x[i];
  }
  return best;
}

/* Exact integer reductions; arithmetic wraps through uint64 like the C types would. */
static int64_t reduce_i64(reduce_kind k, nr_dtype t, const int64_t *x, int64_t n) {
  uint64_t s = k == RK_PROD ? 1 : 0;
  if (k == RK_MAX || k == RK_MIN)
    return extreme_i64(t, x, n, k == RK_MAX);
  for (int64_t i = 0; i < n; i++) {
    uint64_t v = (uint64_t)x[i];
    if (k == RK_PROD)
      s *= v;
    else if (k == RK_L1)
      s += (x[i] < 0 && t != NR_DTYPE_UINT64) ? (uint64_t)0 - v : v;
    else if (k == RK_SUMSQUARE)
      s += v * v;
    else
      s += v;
  }
  if (k == RK_MEAN)
    return n ? (t == NR_DTYPE_UINT64 ? (int64_t)(s / (uint64_t)n) : (int64_t)s / n) : 0;
  return (int64_t)s;
}

static bool reduce_in_double(reduce_kind k, nr_dtype t) {
  return nr_dtype_is_float(t) || k == RK_L2 || k == RK_LOGSUM || k == RK_LOGSUMEXP;
}

static nr_status reduce_lanes(nr_op_ctx *ctx, reduce_kind k, const nr_ref_rplan *p) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  bool dbl = reduce_in_double(k, x->dtype);
  void *buf = malloc(8 * (size_t)(p->n_red ? p->n_red : 1));
  if (!buf)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "lane of %lld elements", (long long)p->n_red);
  for (int64_t o = 0; o < p->n_out; o++) {
    int64_t base = nr_ref_rplan_base(p, o);
    if (dbl) {
      nr_ref_gather_idx_f64(x, base, p->roff, p->n_red, buf);
      nr_store_f64(y->dtype, y->data, o, reduce_f64(k, buf, p->n_red));
    } else {
      nr_ref_gather_idx_i64(x, base, p->roff, p->n_red, buf);
      nr_store_i64(y->dtype, y->data, o, reduce_i64(k, x->dtype, buf, p->n_red));
    }
  }
  free(buf);
  return NR_OK;
}

static nr_status reduce_run(nr_op_ctx *ctx, reduce_kind k) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  reduce_axes ra;
  nr_status st = reduce_get_axes(ctx, x->rank, &ra);
  if (st)
    return st;
  if (ra.noop) {
    if (nr_value_nbytes(x))
      memcpy(y->data, x->data, nr_value_nbytes(x));
    return NR_OK;
  }
  nr_ref_rplan p;
  if ((st = nr_ref_rplan_init(&p, x->rank, x->dims, ra.reduced, ctx->err)))
    return st;
  st = reduce_lanes(ctx, k, &p);
  nr_ref_rplan_free(&p);
  return st;
}

#define NR_REDUCE_RUN(name, kind)                                                      \
  static nr_status name(nr_op_ctx *ctx) { return reduce_run(ctx, kind); }
NR_REDUCE_RUN(run_reduce_sum, RK_SUM)
NR_REDUCE_RUN(run_reduce_mean, RK_MEAN)
NR_REDUCE_RUN(run_reduce_max, RK_MAX)
NR_REDUCE_RUN(run_reduce_min, RK_MIN)
NR_REDUCE_RUN(run_reduce_prod, RK_PROD)
NR_REDUCE_RUN(run_reduce_l1, RK_L1)
NR_REDUCE_RUN(run_reduce_l2, RK_L2)
NR_REDUCE_RUN(run_reduce_log_sum, RK_LOGSUM)
NR_REDUCE_RUN(run_reduce_log_sum_exp, RK_LOGSUMEXP)
NR_REDUCE_RUN(run_reduce_sum_square, RK_SUMSQUARE)
#undef NR_REDUCE_RUN

/* ---- ArgMax / ArgMin ------------------------------------------------------------ */

static nr_status arg_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype && !nr_dtype_is_float(x->dtype) && !nr_dtype_is_int(x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "does not take %s input", nr_dtype_name(x->dtype));
  if (x->rank < 0)
    return nr_op_set_output(ctx, 0, NR_DTYPE_INT64, -1, NULL);
  int axis, r = 0;
  if ((st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, &axis)))
    return st;
  if (x->dims[axis] == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot take an arg-extreme over empty axis %d",
                      axis);
  bool keep = nr_attr_int(ctx->node, "keepdims", 1) != 0;
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    if (d != axis || keep)
      dims[r++] = d == axis ? 1 : x->dims[d];
  return nr_op_set_output(ctx, 0, NR_DTYPE_INT64, r, dims);
}

static int64_t arg_best_i64(nr_dtype t, const int64_t *x, int64_t n, bool want_max,
                            bool last) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++) {
    bool gt = t == NR_DTYPE_UINT64 ? (uint64_t)x[i] > (uint64_t)x[best] : x[i] > x[best];
    bool lt = t == NR_DTYPE_UINT64 ? (uint64_t)x[i] < (uint64_t)x[best] : x[i] < x[best];
    if ((want_max ? gt : lt) || (last && x[i] == x[best]))
      best = i;
  }
  return best;
}

static nr_status arg_run(nr_op_ctx *ctx, bool want_max) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t *y = nr_op_out(ctx, 0)->data;
  int axis;
  bool reduced[NR_MAX_RANK] = {0};
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, &axis);
  if (st)
    return st;
  bool last = nr_attr_int(ctx->node, "select_last_index", 0) != 0;
  reduced[axis] = true;
  nr_ref_rplan p;
  if ((st = nr_ref_rplan_init(&p, x->rank, x->dims, reduced, ctx->err)))
    return st;
  void *buf = nr_ref_scratch(ctx, p.n_red);
  for (int64_t o = 0; buf && o < p.n_out; o++) {
    int64_t base = nr_ref_rplan_base(&p, o);
    if (nr_dtype_is_float(x->dtype)) {
      nr_ref_gather_idx_f64(x, base, p.roff, p.n_red, buf);
      y[o] = nr_ref_arg_best_f64(buf, p.n_red, want_max, last);
    } else {
      nr_ref_gather_idx_i64(x, base, p.roff, p.n_red, buf);
      y[o] = arg_best_i64(x->dtype, buf, p.n_red, want_max, last);
    }
  }
  st = buf ? NR_OK : NR_ERR_NOMEM;
  free(buf);
  nr_ref_rplan_free(&p);
  return st;
}

static nr_status run_argmax(nr_op_ctx *ctx) { return arg_run(ctx, true); }
static nr_status run_argmin(nr_op_ctx *ctx) { return arg_run(ctx, false); }

/* ---- TopK --------------------------------------------------------------------- */

typedef struct topk_item {
  double f;    /* key of float inputs */
  int64_t i;   /* key of integer inputs */
  int64_t idx; /* position along the axis: ties keep the lower one first */
} topk_item;

static int cmp_idx(const topk_item *a, const topk_item *b) {
  return (a->idx > b->idx) - (a->idx < b->idx);
}
/* NaN sorts above every number. */
static int cmp_f(const topk_item *a, const topk_item *b) {
  bool na = isnan(a->f), nb = isnan(b->f);
  if (na || nb)
    return na - nb;
  return (a->f > b->f) - (a->f < b->f);
}
static int cmp_f_desc(const void *a, const void *b) {
  int c = cmp_f(b, a);
  return c ? c : cmp_idx(a, b);
}
static int cmp_f_asc(const void *a, const void *b) {
  int c = cmp_f(a, b);
  return c ? c : cmp_idx(a, b);
}
static int cmp_i(const topk_item *a, const topk_item *b) {
  return (a->i > b->i) - (a->i < b->i);
}
static int cmp_i_desc(const void *a, const void *b) {
  int c = cmp_i(b, a);
  return c ? c : cmp_idx(a, b);
}
static int cmp_i_asc(const void *a, const void *b) {
  int c = cmp_i(a, b);
  return c ? c : cmp_idx(a, b);
}

/* k from the input (opset 10+) or the attribute; -1 when not known yet. */
static nr_status topk_k(nr_op_ctx *ctx, int64_t *k) {
  *k = -1;
  if (ctx->node->opset < 10) {
    *k = nr_attr_int(ctx->node, "k", -1);
    if (*k < 0)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute k is missing or negative");
    return NR_OK;
  }
  const nr_value *kv = nr_op_in(ctx, 1);
  if (kv->rank > 1 || (kv->rank == 1 && kv->dims[0] >= 0 && kv->dims[0] != 1))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "K must hold a single value");
  if (!kv->data)
    return NR_OK;
  *k = nr_value_get_i64(kv, 0);
  if (*k < 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "K is negative (%lld)", (long long)*k);
  return NR_OK;
}

static nr_status topk_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, ctx->node->opset < 10 ? 1 : 2, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t k, dims[NR_MAX_RANK];
  int axis;
  if ((st = topk_k(ctx, &k)))
    return st;
  if (x->rank < 0) {
    nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
    return nr_op_set_output(ctx, 1, NR_DTYPE_INT64, -1, NULL);
  }
  if ((st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), x->rank, &axis)))
    return st;
  if (k >= 0 && x->dims[axis] >= 0 && k > x->dims[axis])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "k=%lld exceeds axis %d of size %lld",
                      (long long)k, axis, (long long)x->dims[axis]);
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = k;
  if ((st = nr_op_set_output(ctx, 0, x->dtype, x->rank, dims)))
    return st;
  return nr_op_set_output(ctx, 1, NR_DTYPE_INT64, x->rank, dims);
}

static void topk_lane(const nr_value *x, int64_t base, int64_t stride, int64_t n,
                      topk_item *it, int (*cmp)(const void *, const void *)) {
  bool flt = nr_dtype_is_float(x->dtype);
  for (int64_t j = 0; j < n; j++) {
    int64_t at = base + j * stride;
    it[j].idx = j;
    it[j].f = flt ? nr_load_f64(x->dtype, x->data, at) : 0;
    it[j].i = flt ? 0 : nr_load_i64(x->dtype, x->data, at);
    if (x->dtype == NR_DTYPE_UINT64) /* order unsigned values as signed ones */
      it[j].i = (int64_t)((uint64_t)it[j].i ^ 0x8000000000000000ull);
  }
  qsort(it, (size_t)n, sizeof *it, cmp);
}

static nr_status topk_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *vals = nr_op_out(ctx, 0), *idxs = nr_op_out(ctx, 1);
  int64_t k;
  int axis;
  nr_status st = topk_k(ctx, &k);
  if (st || (st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), x->rank, &axis)))
    return st;
  bool largest = nr_attr_int(ctx->node, "largest", 1) != 0;
  bool flt = nr_dtype_is_float(x->dtype);
  int (*cmp)(const void *, const void *) =
      flt ? (largest ? cmp_f_desc : cmp_f_asc) : (largest ? cmp_i_desc : cmp_i_asc);
  int64_t n = x->dims[axis], inner = nr_ref_dims_prod(x->dims, axis + 1, x->rank);
  int64_t outer = nr_ref_dims_prod(x->dims, 0, axis);
  size_t es = nr_dtype_size(x->dtype);
  topk_item *it = malloc(sizeof *it * (size_t)(n ? n : 1));
  if (!it)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "TopK lane of %lld", (long long)n);
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      topk_lane(x, o * n * inner + i, inner, n, it, cmp);
      for (int64_t j = 0; j < k; j++) {
        int64_t dst = (o * k + j) * inner + i, src = o * n * inner + it[j].idx * inner + i;
        if (vals)
          memcpy((char *)vals->data + dst * es, (const char *)x->data + src * es, es);
        if (idxs)
          ((int64_t *)idxs->data)[dst] = it[j].idx;
      }
    }
  }
  free(it);
  return NR_OK;
}

/* ---- CumSum / CumProd ----------------------------------------------------------- */

static nr_status cum_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *a = nr_op_in(ctx, 1);
  if (x->dtype && !nr_dtype_is_float(x->dtype) && !nr_dtype_is_int(x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "does not take %s input", nr_dtype_name(x->dtype));
  if (a->dtype && a->dtype != NR_DTYPE_INT32 && a->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis must be int32 or int64, got %s",
                      nr_dtype_name(a->dtype));
  if (a->rank > 1 || (a->rank == 1 && a->dims[0] >= 0 && a->dims[0] != 1))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis must be a scalar or hold one value");
  return nr_op_same_as_input(ctx, 0, 0);
}

/* One lane: y[j] = x[0] (op) ... (op) x[j], shifted by one when exclusive, walked
 * from the end when reverse. Floats accumulate in double, integers exactly. */
static void cum_lane(const nr_value *x, nr_value *y, int64_t base, int64_t stride,
                     int64_t n, bool prod, bool excl, bool rev) {
  bool flt = nr_dtype_is_float(x->dtype);
  double fa = prod ? 1 : 0;
  uint64_t ia = prod ? 1 : 0;
  for (int64_t s = 0; s < n; s++) {
    int64_t at = base + (rev ? n - 1 - s : s) * stride;
    if (excl) {
      flt ? nr_store_f64(y->dtype, y->data, at, fa)
          : nr_store_i64(y->dtype, y->data, at, (int64_t)ia);
    }
    if (flt) {
      double v = nr_load_f64(x->dtype, x->data, at);
      fa = prod ? fa * v : fa + v;
    } else {
      uint64_t v = (uint64_t)nr_load_i64(x->dtype, x->data, at);
      ia = prod ? ia * v : ia + v;
    }
    if (!excl) {
      flt ? nr_store_f64(y->dtype, y->data, at, fa)
          : nr_store_i64(y->dtype, y->data, at, (int64_t)ia);
    }
  }
}

static nr_status cum_run(nr_op_ctx *ctx, bool prod) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int axis;
  nr_status st = nr_op_axis(ctx, nr_value_get_i64(nr_op_in(ctx, 1), 0), x->rank, &axis);
  if (st)
    return st;
  bool excl = nr_attr_int(ctx->node, "exclusive", 0) != 0;
  bool rev = nr_attr_int(ctx->node, "reverse", 0) != 0;
  if (x->rank == 0) { /* a scalar is its own running total */
    cum_lane(x, y, 0, 1, 1, prod, excl, rev);
    return NR_OK;
  }
  int64_t n = x->dims[axis], inner = nr_ref_dims_prod(x->dims, axis + 1, x->rank);
  int64_t outer = nr_ref_dims_prod(x->dims, 0, axis);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++)
      cum_lane(x, y, o * n * inner + i, inner, n, prod, excl, rev);
  return NR_OK;
}

static nr_status run_cumsum(nr_op_ctx *ctx) { return cum_run(ctx, false); }
static nr_status run_cumprod(nr_op_ctx *ctx) { return cum_run(ctx, true); }

/* ---- the table -------------------------------------------------------------------- */

const nr_op_def nr_ref_ops_reduce[] = {
    {"", "ReduceSum", 1, reduce_infer, run_reduce_sum, 0},
    {"", "ReduceMean", 1, reduce_infer, run_reduce_mean, 0},
    {"", "ReduceMax", 1, reduce_infer, run_reduce_max, 0},
    {"", "ReduceMin", 1, reduce_infer, run_reduce_min, 0},
    {"", "ReduceProd", 1, reduce_infer, run_reduce_prod, 0},
    {"", "ReduceL1", 1, reduce_infer, run_reduce_l1, 0},
    {"", "ReduceL2", 1, reduce_infer, run_reduce_l2, 0},
    {"", "ReduceLogSum", 1, reduce_infer, run_reduce_log_sum, 0},
    {"", "ReduceLogSumExp", 1, reduce_infer, run_reduce_log_sum_exp, 0},
    {"", "ReduceSumSquare", 1, reduce_infer, run_reduce_sum_square, 0},
    {"", "ArgMax", 1, arg_infer, run_argmax, 0},
    {"", "ArgMin", 1, arg_infer, run_argmin, 0},
    {"", "TopK", 1, topk_infer, topk_run, 0},
    {"", "CumSum", 11, cum_infer, run_cumsum, 0},
    {"", "CumProd", 26, cum_infer, run_cumprod, 0},
    {0},
};
