/* ops_misc_simple.c - small reference operators of the misc family that need no
 * shared machinery: the window generators (HannWindow, HammingWindow,
 * BlackmanWindow), CenterCropPad, BitCast and Det.
 *
 * CenterCropPad and BitCast move raw elements (memcpy of the dtype's size), so they
 * accept every fixed-size dtype; strings are rejected. Det uses Gaussian elimination
 * with partial pivoting in double. */
#include "kernels/ref/misc.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- HannWindow, HammingWindow, BlackmanWindow ------------------------------------- */

nr_status nr_misc_window_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *s = nr_op_in(ctx, 0);
  nr_dtype t = (nr_dtype)nr_attr_int(ctx->node, "output_datatype", NR_DTYPE_FLOAT);
  if (s->dtype && s->dtype != NR_DTYPE_INT32 && s->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "size must be int32 or int64");
  if (s->rank > 0 && nr_value_count(s) != 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "size must be a scalar");
  if (!nr_dtype_is_float(t) && !nr_dtype_is_int(t))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "output_datatype %d is not numeric", (int)t);
  int64_t n = nr_op_in_known(ctx, 0) ? nr_value_get_i64(s, 0) : NR_DIM_UNKNOWN;
  if (nr_op_in_known(ctx, 0) && n < 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "size %lld is negative", (long long)n);
  return nr_op_set_output(ctx, 0, t, 1, &n);
}

static nr_status window_run(nr_op_ctx *ctx, double a0, double a1, double a2) {
  nr_value *y = nr_op_out(ctx, 0);
  int64_t n = y->dims[0];
  double n1 = (double)(nr_attr_int(ctx->node, "periodic", 1) ? n : n - 1);
  for (int64_t i = 0; i < n; i++) {
    double w = 2.0 * M_PI * (double)i / n1;
    nr_store_f64(y->dtype, y->data, i, a0 - a1 * cos(w) + a2 * cos(2 * w));
  }
  return NR_OK;
}

nr_status nr_misc_hann_run(nr_op_ctx *ctx) { return window_run(ctx, 0.5, 0.5, 0); }
nr_status nr_misc_hamming_run(nr_op_ctx *ctx) {
  return window_run(ctx, 25.0 / 46.0, 21.0 / 46.0, 0);
}
nr_status nr_misc_blackman_run(nr_op_ctx *ctx) { return window_run(ctx, 0.42, 0.5, 0.08); }

/* ---- CenterCropPad ----------------------------------------------------------------- */

/* Marks the axes attribute (default: all) and checks the shape input's length. */
static nr_status ccp_axes(nr_op_ctx *ctx, int rank, int *axes, int *n_axes) {
  size_t n;
  const int64_t *a = nr_attr_ints(ctx->node, "axes", &n);
  bool seen[NR_MAX_RANK] = {0};
  *n_axes = a ? (int)n : rank;
  for (int i = 0; i < *n_axes; i++) {
    nr_status st = a ? nr_op_axis(ctx, a[i], rank, &axes[i]) : NR_OK;
    if (st)
      return st;
    if (!a)
      axes[i] = i;
    if (seen[axes[i]])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %d repeats", axes[i]);
    seen[axes[i]] = true;
  }
  const nr_value *sh = nr_op_in(ctx, 1);
  if (sh->rank >= 0 && (sh->rank != 1 || (sh->dims[0] >= 0 && sh->dims[0] != *n_axes)))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "shape must list one size per axis (%d)", *n_axes);
  return NR_OK;
}

nr_status nr_misc_ccp_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *sh = nr_op_in(ctx, 1);
  if (x->dtype == NR_DTYPE_STRING)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "string tensors are not supported");
  if (sh->dtype && sh->dtype != NR_DTYPE_INT32 && sh->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "shape must be int32 or int64");
  if (x->rank < 0)
    return nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  int axes[NR_MAX_RANK], n_axes;
  int64_t dims[NR_MAX_RANK];
  if ((st = ccp_axes(ctx, x->rank, axes, &n_axes)))
    return st;
  memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int i = 0; i < n_axes; i++) {
    dims[axes[i]] = nr_op_in_known(ctx, 1) ? nr_value_get_i64(sh, i) : NR_DIM_UNKNOWN;
    if (nr_op_in_known(ctx, 1) && dims[axes[i]] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "shape holds a negative size");
  }
  return nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
}

nr_status nr_misc_ccp_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t shift[NR_MAX_RANK], xs[NR_MAX_RANK], idx[NR_MAX_RANK] = {0};
  size_t es = nr_dtype_size(x->dtype);
  nr_strides(x->rank, x->dims, xs);
  for (int d = 0; d < x->rank; d++) { /* input index = output index + shift */
    int64_t in = x->dims[d], out = y->dims[d];
    shift[d] = in > out ? (in - out) / 2 : -((out - in) / 2);
  }
  int64_t count = nr_value_count(y);
  for (int64_t o = 0; o < count; o++) {
    int64_t off = 0;
    bool inside = true;
    for (int d = 0; d < x->rank; d++) {
      int64_t i = idx[d] + shift[d];
      inside &= i >= 0 && i < x->dims[d];
      off += i * xs[d];
    }
    if (inside)
      memcpy((char *)y->data + (size_t)o * es, (const char *)x->data + (size_t)off * es, es);
    for (int d = x->rank - 1; d >= 0 && ++idx[d] == y->dims[d]; d--)
      idx[d] = 0;
  }
  return NR_OK;
}

/* ---- BitCast ----------------------------------------------------------------------- */

nr_status nr_misc_bitcast_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  nr_dtype to = (nr_dtype)nr_attr_int(ctx->node, "to", 0);
  if (to == NR_DTYPE_STRING || x->dtype == NR_DTYPE_STRING)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "BitCast does not take strings");
  if (!nr_dtype_size(to))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "'to' = %d is not a supported dtype", (int)to);
  if (x->dtype && nr_dtype_size(x->dtype) != nr_dtype_size(to))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s and %s differ in bit width",
                      nr_dtype_name(x->dtype), nr_dtype_name(to));
  return nr_op_set_output(ctx, 0, to, x->rank, x->dims);
}

nr_status nr_misc_bitcast_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  size_t n = nr_value_nbytes(x);
  if (n)
    memcpy(y->data, x->data, n);
  return NR_OK;
}

/* ---- Det --------------------------------------------------------------------------- */

nr_status nr_misc_det_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = nr_misc_need_float(ctx, 0, "X");
  const nr_value *x = nr_op_in(ctx, 0);
  if (st || x->rank < 0)
    return st ? st : nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  if (x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must be [*, M, M], got rank %d", x->rank);
  int64_t m = x->dims[x->rank - 1], m2 = x->dims[x->rank - 2];
  if (m >= 0 && m2 >= 0 && m != m2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "matrices are %lld x %lld, not square",
                      (long long)m2, (long long)m);
  return nr_op_set_output(ctx, 0, x->dtype, x->rank - 2, x->dims);
}

/* Determinant of the m x m matrix a (destroyed). */
static double det_lu(double *a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; k++) {
    int64_t p = k;
    for (int64_t i = k + 1; i < m; i++)
      if (fabs(a[i * m + k]) > fabs(a[p * m + k]))
        p = i;
    if (a[p * m + k] == 0)
      return 0;
    if (p != k) {
      for (int64_t j = 0; j < m; j++) {
        double t = a[k * m + j];
        a[k * m + j] = a[p * m + j];
        a[p * m + j] = t;
      }
      det = -det;
    }
    det *= a[k * m + k];
    for (int64_t i = k + 1; i < m; i++) {
      double f = a[i * m + k] / a[k * m + k];
      for (int64_t j = k; j < m; j++)
        a[i * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

nr_status nr_misc_det_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t m = x->dims[x->rank - 1], batch = nr_misc_prod(x->dims, 0, x->rank - 2);
  double *a = malloc(sizeof(double) * (size_t)(m > 0 ? m * m : 1));
  if (!a)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < m * m; i++)
      a[i] = nr_load_f64(x->dtype, x->data, b * m * m + i);
    nr_store_f64(y->dtype, y->data, b, det_lu(a, m));
  }
  free(a);
  return NR_OK;
}

/* ---- TensorScatter ------------------------------------------------------------------ */

static nr_status ts_axis(nr_op_ctx *ctx, int rank, int *axis, bool *circular) {
  const char *m = nr_attr_string(ctx->node, "mode", "linear");
  if (strcmp(m, "linear") && strcmp(m, "circular"))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown mode '%s'", m);
  *circular = !strcmp(m, "circular");
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -2), rank, axis);
  if (!st && *axis == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis must not be the batch axis");
  return st;
}

nr_status nr_misc_tensorscatter_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  if (st)
    return st;
  const nr_value *p = nr_op_in(ctx, 0), *u = nr_op_in(ctx, 1), *w = nr_op_in(ctx, 2);
  int axis;
  bool circ;
  if (p->dtype == NR_DTYPE_STRING || (u->dtype && p->dtype && u->dtype != p->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "update must have past_cache's (non-string) dtype");
  if (w && w->dtype && w->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "write_indices must be int64");
  if (p->rank >= 0) {
    if (p->rank < 2 || (st = ts_axis(ctx, p->rank, &axis, &circ)))
      return st ? st : nr_op_fail(ctx, NR_ERR_SHAPE, "past_cache must have rank >= 2");
    for (int d = 0; u->rank >= 0 && d < p->rank; d++) {
      int64_t a = p->dims[d], b = u->rank == p->rank ? u->dims[d] : -2;
      if (b == -2 || (a >= 0 && b >= 0 && (d == axis ? b > a : a != b)))
        return nr_op_fail(ctx, NR_ERR_SHAPE, "update does not fit past_cache at dim %d", d);
    }
  }
  return nr_op_same_as_input(ctx, 0, 0);
}

nr_status nr_misc_tensorscatter_run(nr_op_ctx *ctx) {
  const nr_value *p = nr_op_in(ctx, 0), *u = nr_op_in(ctx, 1), *w = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  int axis;
  bool circ;
  nr_status st = ts_axis(ctx, p->rank, &axis, &circ);
  if (st)
    return st;
  size_t es = nr_dtype_size(p->dtype);
  int64_t outer = nr_misc_prod(p->dims, 0, axis), per_b = nr_misc_prod(p->dims, 1, axis);
  int64_t inner = nr_misc_prod(p->dims, axis + 1, p->rank);
  int64_t max = p->dims[axis], seq = u->dims[axis];
  if (nr_value_nbytes(p))
    memcpy(y->data, p->data, nr_value_nbytes(p));
  for (int64_t o = 0; o < outer; o++) {
    int64_t start = w ? nr_load_i64(w->dtype, w->data, o / per_b) : 0;
    for (int64_t s = 0; s < seq; s++) {
      int64_t pos = circ ? ((start + s) % max + max) % max : start + s;
      if (pos < 0 || pos >= max)
        return nr_op_fail(ctx, NR_ERR_RUNTIME, "write position %lld outside [0, %lld)",
                          (long long)pos, (long long)max);
      memcpy((char *)y->data + (size_t)((o * max + pos) * inner) * es,
             (const char *)u->data + (size_t)((o * seq + s) * inner) * es, (size_t)inner * es);
    }
  }
  return NR_OK;
}
