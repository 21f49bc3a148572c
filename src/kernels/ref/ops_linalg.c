/* ops_linalg.c - reference Gemm, MatMul, MatMulInteger and QLinearMatMul (Einsum
 * lives in einsum.c and is listed in this family's table).
 *
 * Every product goes through ref_gemm: float32 natively, double in double, the half
 * types widened to float32, and integers (and the quantized forms, after their zero
 * points are subtracted) exactly in int64. MatMul's numpy broadcasting is one loop
 * over the broadcast batch dims that hands each matrix pair to the GEMM; when the
 * right operand has no batch dims the batch folds into the rows, one large GEMM. */
#include "ir/op.h"
#include "kernels/ref/einsum.h"
#include "kernels/ref/ref_gemm.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_gemm_type(nr_dtype t) {
  return nr_dtype_is_float(t) || t == NR_DTYPE_INT32 || t == NR_DTYPE_INT64 ||
         t == NR_DTYPE_UINT32 || t == NR_DTYPE_UINT64;
}

static nr_status check_type(nr_op_ctx *ctx, const nr_value *v, const char *name,
                            bool (*ok)(nr_dtype)) {
  if (v && v->dtype && !ok(v->dtype))
    return nr_op_fail(ctx, nr_dtype_size(v->dtype) ? NR_ERR_SHAPE : NR_ERR_UNSUPPORTED,
                      "%s has unsupported dtype %s", name, nr_dtype_name(v->dtype));
  return NR_OK;
}

static nr_status same_type(nr_op_ctx *ctx, const nr_value *a, const nr_value *b,
                           const char *na, const char *nb) {
  if (a && b && a->dtype && b->dtype && a->dtype != b->dtype)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s is %s but %s is %s", na,
                      nr_dtype_name(a->dtype), nb, nr_dtype_name(b->dtype));
  return NR_OK;
}

/* Where an element's zero point lives: `group` consecutive elements share one,
 * per_matrix of them serve one matrix of `matrix` elements. A's per-row zero points
 * are {k, m, m*k}, B's per-column ones {1, n, k*n}; a 1-D or scalar zero point simply
 * wraps around (index modulo its count). */
typedef struct zp_layout {
  int64_t group, per_matrix, matrix;
} zp_layout;

/* Copies v's elements into a new int64 array, minus zero point zp (NULL: 0). For
 * element i the zero point index is (i / matrix) * per_matrix + (i / group) %
 * per_matrix, taken modulo the zero point count. */
static int64_t *widen_i64(const nr_value *v, const nr_value *zp, zp_layout l) {
  int64_t n = nr_value_count(v), zn = zp ? nr_value_count(zp) : 1;
  int64_t *d = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; d && i < n; i++) {
    int64_t zi = (i / l.matrix) * l.per_matrix + (i / l.group) % l.per_matrix;
    int64_t z = zp ? nr_load_i64(zp->dtype, zp->data, zn == 1 ? 0 : zi % zn) : 0;
    d[i] = nr_load_i64(v->dtype, v->data, i) - z;
  }
  return d;
}

static const zp_layout no_zp = {1, 1, 1};

static bool known_dim(int64_t d) {
  return d >= 0;
}

/* ---- Gemm ----------------------------------------------------------------------- */

static nr_status gemm_dims(nr_op_ctx *ctx, int64_t *m, int64_t *k, int64_t *n) {
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  bool ta = nr_attr_int(ctx->node, "transA", 0), tb = nr_attr_int(ctx->node, "transB", 0);
  if ((a->rank >= 0 && a->rank != 2) || (b->rank >= 0 && b->rank != 2))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "A and B must be 2-D (ranks %d and %d)", a->rank,
                      b->rank);
  *m = a->rank < 0 ? NR_DIM_UNKNOWN : a->dims[ta ? 1 : 0];
  *k = a->rank < 0 ? NR_DIM_UNKNOWN : a->dims[ta ? 0 : 1];
  int64_t kb = b->rank < 0 ? NR_DIM_UNKNOWN : b->dims[tb ? 1 : 0];
  *n = b->rank < 0 ? NR_DIM_UNKNOWN : b->dims[tb ? 0 : 1];
  if (known_dim(*k) && known_dim(kb) && *k != kb)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "inner dims differ: op(A) is %lldx%lld, op(B) is "
                      "%lldx%lld",
                      (long long)*m, (long long)*k, (long long)kb, (long long)*n);
  if (!known_dim(*k))
    *k = kb;
  return NR_OK;
}

/* C must broadcast one way to [m, n]. */
static nr_status gemm_check_c(nr_op_ctx *ctx, const nr_value *c, int64_t m, int64_t n) {
  if (!c || c->rank < 0)
    return NR_OK;
  int64_t want[2] = {m, n};
  bool ok = c->rank <= 2;
  for (int d = 0; ok && d < c->rank; d++) {
    int64_t cd = c->dims[d], wd = want[2 - c->rank + d];
    ok = cd == 1 || !known_dim(cd) || !known_dim(wd) || cd == wd;
  }
  if (!ok) {
    char buf[128];
    return nr_op_fail(ctx, NR_ERR_SHAPE, "C %s does not broadcast to [%lld, %lld]",
                      nr_value_describe(c, buf, sizeof buf), (long long)m, (long long)n);
  }
  return NR_OK;
}

static nr_status gemm_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  const nr_value *a = nr_op_in(ctx, 0);
  int64_t m, k, n;
  if (!st)
    st = check_type(ctx, a, "A", is_gemm_type);
  if (!st)
    st = same_type(ctx, a, nr_op_in(ctx, 1), "A", "B");
  if (!st)
    st = same_type(ctx, a, nr_op_in(ctx, 2), "A", "C");
  if (!st)
    st = gemm_dims(ctx, &m, &k, &n);
  if (!st)
    st = gemm_check_c(ctx, nr_op_in(ctx, 2), m, n);
  return st ? st : nr_op_set_output(ctx, 0, a->dtype, 2, (int64_t[]){m, n});
}

/* Element (i, j) of C broadcast to [m, n]. */
static int64_t c_index(const nr_value *c, int64_t i, int64_t j) {
  int64_t ci = c->rank == 2 && c->dims[0] > 1 ? i : 0;
  int64_t cj = c->rank >= 1 && c->dims[c->rank - 1] > 1 ? j : 0;
  return ci * (c->rank == 2 ? c->dims[1] : 1) + cj;
}

static nr_status gemm_run_int(nr_op_ctx *ctx, int64_t m, int64_t k, int64_t n) {
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1), *c = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  bool ta = nr_attr_int(ctx->node, "transA", 0), tb = nr_attr_int(ctx->node, "transB", 0);
  double alpha = nr_attr_float(ctx->node, "alpha", 1),
         beta = nr_attr_float(ctx->node, "beta", 1);
  int64_t *ad = widen_i64(a, NULL, no_zp), *bd = widen_i64(b, NULL, no_zp);
  int64_t *acc = calloc((size_t)(m * n + 1), sizeof(int64_t));
  if (!ad || !bd || !acc) {
    free(ad), free(bd), free(acc);
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory for the product");
  }
  nr_ref_igemm(ta, tb, m, n, k, ad, ta ? m : k, bd, tb ? k : n, acc, n);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t cv = c ? nr_load_i64(c->dtype, c->data, c_index(c, i, j)) : 0;
      int64_t v = acc[i * n + j];
      if (alpha == 1 && beta == 1)
        v += cv;
      else
        v = (int64_t)(alpha * (double)v + (c ? beta * (double)cv : 0));
      nr_store_i64(y->dtype, y->data, i * n + j, v);
    }
  free(ad), free(bd), free(acc);
  return NR_OK;
}

/* Float Gemm in work precision: Y = beta * C (broadcast), then Y += alpha * A B. */
static nr_status gemm_run_float(nr_op_ctx *ctx, int64_t m, int64_t k, int64_t n) {
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1), *c = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  bool ta = nr_attr_int(ctx->node, "transA", 0), tb = nr_attr_int(ctx->node, "transB", 0);
  float alpha = nr_attr_float(ctx->node, "alpha", 1),
        beta = nr_attr_float(ctx->node, "beta", 1);
  nr_dtype work = y->dtype == NR_DTYPE_DOUBLE ? NR_DTYPE_DOUBLE : NR_DTYPE_FLOAT;
  bool oa, ob, oy;
  void *ad = nr_ref_stage(a, work, &oa), *bd = nr_ref_stage(b, work, &ob);
  void *yd = nr_ref_stage(y, work, &oy);
  nr_status st = NR_ERR_NOMEM;
  if (ad && bd && yd) {
    for (int64_t i = 0; c && i < m; i++)
      for (int64_t j = 0; j < n; j++)
        nr_store_f64(work, yd, i * n + j,
                     beta * nr_load_f64(c->dtype, c->data, c_index(c, i, j)));
    st = work == NR_DTYPE_FLOAT ? nr_ref_sgemm(ta, tb, m, n, k, alpha, ad, ta ? m : k, bd,
                                               tb ? k : n, c ? 1 : 0, yd, n)
                                : nr_ref_dgemm(ta, tb, m, n, k, alpha, ad, ta ? m : k, bd,
                                               tb ? k : n, c ? 1 : 0, yd, n);
  }
  if (!st)
    nr_ref_unstage(y, yd, work, m * n);
  if (oa)
    free(ad);
  if (ob)
    free(bd);
  if (oy)
    free(yd);
  return st ? nr_op_fail(ctx, st, "out of memory for the product") : NR_OK;
}

static nr_status gemm_run(nr_op_ctx *ctx) {
  int64_t m, k, n;
  nr_status st = gemm_dims(ctx, &m, &k, &n);
  if (st)
    return st;
  if (nr_dtype_is_float(nr_op_in(ctx, 0)->dtype))
    return gemm_run_float(ctx, m, k, n);
  return gemm_run_int(ctx, m, k, n);
}

/* ---- MatMul shapes -------------------------------------------------------------- */

/* numpy matmul geometry: 1-D operands are promoted, batch dims broadcast. */
typedef struct mm_shape {
  int64_t m, k, n;
  int batch_rank;
  int64_t batch[NR_MAX_RANK];
  nr_value a_batch, b_batch, y_batch; /* shapes only, for the broadcast walker */
  int y_rank;
  int64_t y_dims[NR_MAX_RANK];
} mm_shape;

static void mm_operand(const nr_value *v, bool left, int64_t *rows, int64_t *cols,
                       nr_value *batch) {
  memset(batch, 0, sizeof *batch);
  if (v->rank == 1) {
    *rows = left ? 1 : v->dims[0];
    *cols = left ? v->dims[0] : 1;
    return;
  }
  *rows = v->dims[v->rank - 2];
  *cols = v->dims[v->rank - 1];
  batch->rank = v->rank - 2;
  memcpy(batch->dims, v->dims, sizeof(int64_t) * (size_t)batch->rank);
}

static nr_status mm_resolve(nr_op_ctx *ctx, const nr_value *a, const nr_value *b,
                            mm_shape *s) {
  if (a->rank < 0 || b->rank < 0) {
    s->y_rank = -1;
    return NR_OK;
  }
  if (a->rank < 1 || b->rank < 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "MatMul operands must have rank >= 1");
  int64_t kb;
  mm_operand(a, true, &s->m, &s->k, &s->a_batch);
  mm_operand(b, false, &kb, &s->n, &s->b_batch);
  if (known_dim(s->k) && known_dim(kb) && s->k != kb)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "inner dims differ: %lld vs %lld",
                      (long long)s->k, (long long)kb);
  s->k = known_dim(s->k) ? s->k : kb;
  nr_status st = nr_op_broadcast(ctx, &s->a_batch, &s->b_batch, &s->batch_rank, s->batch);
  if (st)
    return st;
  memset(&s->y_batch, 0, sizeof s->y_batch);
  s->y_batch.rank = s->batch_rank;
  memcpy(s->y_batch.dims, s->batch, sizeof(int64_t) * (size_t)s->batch_rank);
  s->y_rank = s->batch_rank;
  memcpy(s->y_dims, s->batch, sizeof(int64_t) * (size_t)s->batch_rank);
  if (a->rank > 1)
    s->y_dims[s->y_rank++] = s->m;
  if (b->rank > 1)
    s->y_dims[s->y_rank++] = s->n;
  return NR_OK;
}

/* Calls mul(user, a_off, b_off, y_off, rows) for each matrix pair (offsets in
 * elements); a right operand without batch dims folds the batch into the rows. */
typedef nr_status (*mm_pair_fn)(void *user, const mm_shape *s, int64_t a_off,
                                int64_t b_off, int64_t y_off, int64_t rows);

static nr_status mm_for_each(const mm_shape *s, mm_pair_fn mul, void *user) {
  int64_t mk = s->m * s->k, kn = s->k * s->n, mn = s->m * s->n;
  int64_t batches = nr_value_count(&s->y_batch);
  if (s->b_batch.rank == 0 && nr_value_count(&s->a_batch) == batches)
    return mul(user, s, 0, 0, 0, s->m * batches);
  nr_bcast it;
  nr_bcast_init(&it, &s->y_batch, 2, (const nr_value *[]){&s->a_batch, &s->b_batch});
  nr_status st = NR_OK;
  for (int64_t i = 0; i < it.count && !st; i++, nr_bcast_next(&it))
    st = mul(user, s, it.off[0] * mk, it.off[1] * kn, i * mn, s->m);
  return st;
}

/* ---- MatMul --------------------------------------------------------------------- */

typedef struct mm_data {
  const void *a, *b;
  void *y;
  nr_dtype work; /* float, double or int64 */
} mm_data;

static nr_status mm_pair(void *user, const mm_shape *s, int64_t ao, int64_t bo,
                         int64_t yo, int64_t rows) {
  mm_data *d = user;
  if (d->work == NR_DTYPE_FLOAT)
    return nr_ref_sgemm(false, false, rows, s->n, s->k, 1, (const float *)d->a + ao, s->k,
                        (const float *)d->b + bo, s->n, 0, (float *)d->y + yo, s->n);
  if (d->work == NR_DTYPE_DOUBLE)
    return nr_ref_dgemm(false, false, rows, s->n, s->k, 1, (const double *)d->a + ao,
                        s->k, (const double *)d->b + bo, s->n, 0, (double *)d->y + yo,
                        s->n);
  nr_ref_igemm(false, false, rows, s->n, s->k, (const int64_t *)d->a + ao, s->k,
               (const int64_t *)d->b + bo, s->n, (int64_t *)d->y + yo, s->n);
  return NR_OK;
}

static nr_status matmul_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  mm_shape s;
  if (!st)
    st = check_type(ctx, a, "A", is_gemm_type);
  if (!st)
    st = same_type(ctx, a, b, "A", "B");
  if (!st)
    st = mm_resolve(ctx, a, b, &s);
  return st ? st : nr_op_set_output(ctx, 0, a->dtype, s.y_rank, s.y_dims);
}

static nr_status matmul_run_int(nr_op_ctx *ctx, const mm_shape *s) {
  nr_value *y = nr_op_out(ctx, 0);
  int64_t count = nr_value_count(y);
  mm_data d = {widen_i64(nr_op_in(ctx, 0), NULL, no_zp),
               widen_i64(nr_op_in(ctx, 1), NULL, no_zp),
               calloc((size_t)(count + 1), sizeof(int64_t)), NR_DTYPE_INT64};
  nr_status st = d.a && d.b && d.y ? mm_for_each(s, mm_pair, &d) : NR_ERR_NOMEM;
  for (int64_t i = 0; !st && i < count; i++)
    nr_store_i64(y->dtype, y->data, i, ((int64_t *)d.y)[i]);
  free((void *)d.a), free((void *)d.b), free(d.y);
  return st ? nr_op_fail(ctx, st, "out of memory for the product") : NR_OK;
}

static nr_status matmul_run(nr_op_ctx *ctx) {
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  mm_shape s;
  nr_status st = mm_resolve(ctx, a, b, &s);
  if (st)
    return st;
  nr_value *y = nr_op_out(ctx, 0);
  if (!nr_dtype_is_float(a->dtype))
    return matmul_run_int(ctx, &s);
  nr_dtype work = a->dtype == NR_DTYPE_DOUBLE ? NR_DTYPE_DOUBLE : NR_DTYPE_FLOAT;
  bool oa, ob, oy;
  mm_data d = {nr_ref_stage(a, work, &oa), nr_ref_stage(b, work, &ob),
               nr_ref_stage(y, work, &oy), work};
  st = d.a && d.b && d.y ? mm_for_each(&s, mm_pair, &d) : NR_ERR_NOMEM;
  if (!st)
    nr_ref_unstage(y, d.y, work, nr_value_count(y));
  if (oa)
    free((void *)d.a);
  if (ob)
    free((void *)d.b);
  if (oy)
    free(d.y);
  return st ? nr_op_fail(ctx, st, "out of memory for the product") : NR_OK;
}

/* ---- MatMulInteger and QLinearMatMul -------------------------------------------- */

static bool is_q8(nr_dtype t) {
  return t == NR_DTYPE_UINT8 || t == NR_DTYPE_INT8;
}

/* A zero point or scale is a scalar, or holds one value per row of A / column of B
 * (len), or (N-D zero points) len values for each matrix of the batch. */
static nr_status check_quant_param(nr_op_ctx *ctx, const nr_value *v, const char *name,
                                   int64_t len, bool nd_ok) {
  if (!v || v->rank < 0)
    return NR_OK;
  int64_t n = nr_value_count(v);
  if (n == 1 || !known_dim(len) || !known_dim(n) || (v->rank == 1 && n == len) ||
      (nd_ok && v->rank > 1 && n % len == 0))
    return NR_OK;
  return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must be a scalar or hold %lld values", name,
                    (long long)len);
}

/* The int64 product of (A - a_zp) and (B - b_zp) into a new array (y's size). */
static nr_status quant_product(nr_op_ctx *ctx, int ia, int iazp, int ib, int ibzp,
                               const mm_shape *s, int64_t **out) {
  nr_value *y = nr_op_out(ctx, 0);
  const nr_value *a = nr_op_in(ctx, ia), *b = nr_op_in(ctx, ib);
  /* a's zero points run along rows, b's along columns; N-D ones per matrix too. */
  zp_layout la = {s->k, s->m, s->m * s->k}, lb = {1, s->n, s->k * s->n};
  mm_data d = {widen_i64(a, nr_op_in(ctx, iazp), la),
               widen_i64(b, nr_op_in(ctx, ibzp), lb),
               calloc((size_t)(nr_value_count(y) + 1), sizeof(int64_t)), NR_DTYPE_INT64};
  nr_status st = d.a && d.b && d.y ? mm_for_each(s, mm_pair, &d) : NR_ERR_NOMEM;
  free((void *)d.a), free((void *)d.b);
  *out = d.y;
  if (st) {
    free(d.y);
    return nr_op_fail(ctx, st, "out of memory for the product");
  }
  return NR_OK;
}

static nr_status quant_infer(nr_op_ctx *ctx, int ia, int iazp, int ib, int ibzp,
                             mm_shape *s) {
  const nr_value *a = nr_op_in(ctx, ia), *b = nr_op_in(ctx, ib);
  nr_status st = check_type(ctx, a, "A", is_q8);
  if (!st)
    st = check_type(ctx, b, "B", is_q8);
  if (!st)
    st = same_type(ctx, a, nr_op_in(ctx, iazp), "A", "its zero point");
  if (!st)
    st = same_type(ctx, b, nr_op_in(ctx, ibzp), "B", "its zero point");
  if (!st)
    st = mm_resolve(ctx, a, b, s);
  if (!st && s->y_rank >= 0)
    st = check_quant_param(ctx, nr_op_in(ctx, iazp), "a_zero_point", s->m, true);
  if (!st && s->y_rank >= 0)
    st = check_quant_param(ctx, nr_op_in(ctx, ibzp), "b_zero_point", s->n, true);
  return st;
}

static nr_status matmul_integer_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 4);
  mm_shape s;
  if (!st)
    st = quant_infer(ctx, 0, 2, 1, 3, &s);
  return st ? st : nr_op_set_output(ctx, 0, NR_DTYPE_INT32, s.y_rank, s.y_dims);
}

static nr_status matmul_integer_run(nr_op_ctx *ctx) {
  mm_shape s;
  int64_t *acc;
  nr_status st = mm_resolve(ctx, nr_op_in(ctx, 0), nr_op_in(ctx, 1), &s);
  if (!st)
    st = quant_product(ctx, 0, 2, 1, 3, &s, &acc);
  if (st)
    return st;
  nr_value *y = nr_op_out(ctx, 0);
  for (int64_t i = 0, n = nr_value_count(y); i < n; i++)
    ((int32_t *)y->data)[i] = (int32_t)acc[i];
  free(acc);
  return NR_OK;
}

enum { QM_A = 0, QM_A_SCALE, QM_A_ZP, QM_B, QM_B_SCALE, QM_B_ZP, QM_Y_SCALE, QM_Y_ZP };

static nr_status qlinear_matmul_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 8, 8);
  mm_shape s;
  if (!st)
    st = quant_infer(ctx, QM_A, QM_A_ZP, QM_B, QM_B_ZP, &s);
  if (!st && s.y_rank >= 0)
    st = check_quant_param(ctx, nr_op_in(ctx, QM_A_SCALE), "a_scale", s.m, false);
  if (!st && s.y_rank >= 0)
    st = check_quant_param(ctx, nr_op_in(ctx, QM_B_SCALE), "b_scale", s.n, false);
  if (!st)
    st = check_quant_param(ctx, nr_op_in(ctx, QM_Y_SCALE), "y_scale", 1, false);
  if (!st)
    st = check_type(ctx, nr_op_in(ctx, QM_Y_ZP), "y_zero_point", is_q8);
  if (!st)
    st = check_type(ctx, nr_op_in(ctx, QM_A_SCALE), "a_scale", nr_dtype_is_float);
  return st ? st
            : nr_op_set_output(ctx, 0, nr_op_in(ctx, QM_Y_ZP)->dtype, s.y_rank, s.y_dims);
}

/* Rounds x to the scale's dtype, so a float16 scale product is computed as ONNX's
 * reference computes it (in float16). */
static double in_scale_type(nr_dtype t, double x) {
  if (t == NR_DTYPE_FLOAT16)
    return nr_f16_to_f32(nr_f32_to_f16((float)x));
  if (t == NR_DTYPE_BFLOAT16)
    return nr_bf16_to_f32(nr_f32_to_bf16((float)x));
  return t == NR_DTYPE_DOUBLE ? x : (double)(float)x;
}

static double scale_at(const nr_value *v, int64_t i) {
  return nr_load_f64(v->dtype, v->data, nr_value_count(v) == 1 ? 0 : i);
}

static nr_status qlinear_matmul_run(nr_op_ctx *ctx) {
  mm_shape s;
  int64_t *acc;
  nr_status st = mm_resolve(ctx, nr_op_in(ctx, QM_A), nr_op_in(ctx, QM_B), &s);
  if (!st)
    st = quant_product(ctx, QM_A, QM_A_ZP, QM_B, QM_B_ZP, &s, &acc);
  if (st)
    return st;
  const nr_value *as = nr_op_in(ctx, QM_A_SCALE), *bs = nr_op_in(ctx, QM_B_SCALE);
  const nr_value *ys = nr_op_in(ctx, QM_Y_SCALE), *yzp = nr_op_in(ctx, QM_Y_ZP);
  nr_value *y = nr_op_out(ctx, 0);
  nr_dtype st_type = as->dtype;
  double lo = y->dtype == NR_DTYPE_INT8 ? -128 : 0,
         hi = y->dtype == NR_DTYPE_INT8 ? 127 : 255;
  double zp = (double)nr_load_i64(yzp->dtype, yzp->data, 0);
  for (int64_t i = 0, n = nr_value_count(y); i < n; i++) {
    int64_t row = (i / s.n) % s.m, col = i % s.n;
    double mult = in_scale_type(st_type, scale_at(as, row) * scale_at(bs, col));
    mult = in_scale_type(st_type, mult / scale_at(ys, 0));
    double v = nearbyint((double)acc[i] * mult + zp);
    v = isnan(v) ? 0 : v; /* a zero scale: 0/0, as QuantizeLinear maps it */
    nr_store_i64(y->dtype, y->data, i, (int64_t)(v < lo ? lo : v > hi ? hi : v));
  }
  free(acc);
  return NR_OK;
}

const nr_op_def nr_ref_ops_linalg[] = {
    {"", "Gemm", 1, gemm_infer, gemm_run, 0},
    {"", "MatMul", 1, matmul_infer, matmul_run, 0},
    {"", "MatMulInteger", 10, matmul_integer_infer, matmul_integer_run, 0},
    {"", "QLinearMatMul", 10, qlinear_matmul_infer, qlinear_matmul_run, 0},
    {"", "Einsum", 12, nr_ref_einsum_infer, nr_ref_einsum_run, 0},
    {0},
};
