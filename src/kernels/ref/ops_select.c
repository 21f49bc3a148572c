/* ops_select.c - index-family operators whose output size depends on input values:
 * NonZero, Compress and Unique (listed in ops_index.c's table, flagged
 * NR_OP_ALLOCATES_OUTPUTS).
 *
 * Their infer() gives rank and the dims that do not depend on values; run() counts
 * first and then allocates exact outputs. Unique compares elements by value (floats as
 * doubles with NaN after everything and equal to itself, uint64 unsigned, other
 * integers and bool as int64) and sorts with a stable merge sort, so the first
 * element of each group of equal slices is its first occurrence. */
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <stdlib.h>
#include <string.h>

static bool truthy(const nr_value *v, int64_t i) {
  if (nr_dtype_is_float(v->dtype))
    return nr_load_f64(v->dtype, v->data, i) != 0; /* -0.0 is zero, NaN is not */
  size_t es = nr_dtype_size(v->dtype);
  const unsigned char *p = (const unsigned char *)v->data + (size_t)i * es;
  for (size_t b = 0; b < es; b++)
    if (p[b])
      return true;
  return false;
}

static int64_t product(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++)
    p *= dims[d];
  return p;
}

/* ---- NonZero ----------------------------------------------------------------------- */

nr_status nr_sx_nonzero_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t dims[2] = {x->rank >= 0 ? x->rank : NR_DIM_UNKNOWN, NR_DIM_UNKNOWN};
  return nr_op_set_output(ctx, 0, NR_DTYPE_INT64, 2, dims);
}

/* Output [rank, nnz]: row d holds coordinate d of each non-zero, in C order. A scalar
 * gives [0, nnz], as the ONNX reference does. */
nr_status nr_sx_nonzero_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t n = nr_value_count(x), nnz = 0, idx[NR_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++)
    nnz += truthy(x, i);
  int64_t dims[2] = {x->rank, nnz};
  nr_status st = nr_value_alloc(y, NR_DTYPE_INT64, 2, dims, ctx->err);
  if (st)
    return st;
  int64_t *out = y->data, k = 0;
  for (int64_t i = 0; i < n; i++) {
    if (truthy(x, i)) {
      for (int d = 0; d < x->rank; d++)
        out[d * nnz + k] = idx[d];
      k++;
    }
    for (int d = x->rank - 1; d >= 0 && ++idx[d] == x->dims[d]; d--)
      idx[d] = 0;
  }
  return NR_OK;
}

/* ---- Compress ---------------------------------------------------------------------- */

/* The axis (-1 for "flatten first") and the length the condition selects along it. */
static nr_status compress_axis(nr_op_ctx *ctx, const nr_value *x, int *axis,
                               int64_t *len) {
  const nr_attr *a = nr_node_attr(ctx->node, "axis");
  *axis = -1;
  *len = nr_value_count(x);
  if (a) {
    nr_status st = nr_op_axis(ctx, a->i, x->rank, axis);
    if (st)
      return st;
    *len = x->dims[*axis];
  }
  return NR_OK;
}

/* Number of selected positions among the first len; trues beyond len are an error. */
static nr_status compress_count(nr_op_ctx *ctx, int64_t len, int64_t *count) {
  const nr_value *c = nr_op_in(ctx, 1);
  int64_t n = nr_value_count(c);
  *count = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!truthy(c, i))
      continue;
    if (i >= len)
      return nr_op_fail(ctx, NR_ERR_RUNTIME,
                        "condition selects index %lld of an axis of "
                        "%lld",
                        (long long)i, (long long)len);
    (*count)++;
  }
  return NR_OK;
}

nr_status nr_sx_compress_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *c = nr_op_in(ctx, 1);
  if (c->dtype && c->dtype != NR_DTYPE_BOOL)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "condition must be bool, not %s",
                      nr_dtype_name(c->dtype));
  if (c->rank > 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "condition must be 1-D, has rank %d", c->rank);
  int64_t dims[NR_MAX_RANK], len, count = NR_DIM_UNKNOWN;
  int axis;
  bool flat = !nr_node_attr(ctx->node, "axis");
  if (x->rank < 0)
    return nr_op_set_output(ctx, 0, x->dtype, flat ? 1 : -1, &count);
  if ((st = compress_axis(ctx, x, &axis, &len)))
    return st;
  if (len >= 0 && nr_op_in_known(ctx, 1) && (st = compress_count(ctx, len, &count)))
    return st;
  if (flat)
    return nr_op_set_output(ctx, 0, x->dtype, 1, &count);
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = count;
  return nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
}

nr_status nr_sx_compress_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *c = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t len, count, dims[NR_MAX_RANK];
  int axis;
  nr_status st = compress_axis(ctx, x, &axis, &len);
  if (!st)
    st = compress_count(ctx, len, &count);
  if (st)
    return st;
  memcpy(dims, x->dims, sizeof dims);
  dims[axis < 0 ? 0 : axis] = count;
  if ((st = nr_value_alloc(y, x->dtype, axis < 0 ? 1 : x->rank, dims, ctx->err)))
    return st;
  size_t es = nr_dtype_size(x->dtype);
  int64_t outer = axis < 0 ? 1 : product(x->dims, 0, axis);
  int64_t inner = axis < 0 ? 1 : product(x->dims, axis + 1, x->rank);
  int64_t n = nr_value_count(c) < len ? nr_value_count(c) : len;
  size_t block = (size_t)inner * es;
  char *dst = y->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < n; i++)
      if (truthy(c, i)) {
        memcpy(dst, (const char *)x->data + (size_t)(o * len + i) * block, block);
        dst += block;
      }
  return NR_OK;
}

/* ---- Unique ------------------------------------------------------------------------ */

/* The input seen as n slices of len elements along an axis (or n single elements). */
typedef struct unique_view {
  const nr_value *x;
  int64_t n, len, inner; /* slice count, elements per slice, elements after the axis */
} unique_view;

static int64_t slice_elem(const unique_view *u, int64_t s, int64_t j) {
  int64_t o = j / u->inner, i = j % u->inner;
  return (o * u->n + s) * u->inner + i;
}

static int compare_elems(const nr_value *x, int64_t a, int64_t b) {
  nr_dtype t = x->dtype;
  if (nr_dtype_is_float(t)) {
    double p = nr_load_f64(t, x->data, a), q = nr_load_f64(t, x->data, b);
    if (p != p || q != q)
      return (p != p) - (q != q); /* NaN last, NaNs equal */
    return (p > q) - (p < q);
  }
  int64_t p = nr_load_i64(t, x->data, a), q = nr_load_i64(t, x->data, b);
  if (t == NR_DTYPE_UINT64)
    return ((uint64_t)p > (uint64_t)q) - ((uint64_t)p < (uint64_t)q);
  return (p > q) - (p < q);
}

static int compare_slices(const unique_view *u, int64_t a, int64_t b) {
  for (int64_t j = 0; j < u->len; j++) {
    int c = compare_elems(u->x, slice_elem(u, a, j), slice_elem(u, b, j));
    if (c)
      return c;
  }
  return 0;
}

/* Stable bottom-up merge sort of order[0..n) by slice contents. */
static void sort_slices(const unique_view *u, int64_t *order, int64_t *tmp) {
  for (int64_t w = 1; w < u->n; w *= 2) {
    for (int64_t lo = 0; lo < u->n; lo += 2 * w) {
      int64_t mid = lo + w < u->n ? lo + w : u->n;
      int64_t hi = lo + 2 * w < u->n ? lo + 2 * w : u->n, i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        tmp[k++] = compare_slices(u, order[j], order[i]) < 0 ? order[j++] : order[i++];
      while (i < mid)
        tmp[k++] = order[i++];
      while (j < hi)
        tmp[k++] = order[j++];
    }
    memcpy(order, tmp, sizeof *order * (size_t)u->n);
  }
}

/* Groups of equal slices: first[g] is the group's first occurrence, count[g] its
 * size, group_of[s] slice s's group. Groups come in sorted order, or in order of
 * first occurrence when !sorted. Returns the group count. */
static int64_t unique_groups(const unique_view *u, int64_t *order, int64_t *tmp,
                             bool sorted, int64_t *first, int64_t *count,
                             int64_t *group_of) {
  int64_t g = -1;
  for (int64_t s = 0; s < u->n; s++)
    order[s] = s;
  sort_slices(u, order, tmp);
  for (int64_t k = 0; k < u->n; k++) {
    if (k == 0 || compare_slices(u, order[k - 1], order[k])) {
      first[++g] = order[k];
      count[g] = 0;
    }
    count[g]++;
    group_of[order[k]] = g;
  }
  int64_t groups = g + 1;
  if (!sorted) { /* renumber groups by first occurrence: walk slices in order */
    int64_t next = 0;
    for (int64_t k = 0; k < groups; k++)
      tmp[k] = -1;
    for (int64_t s = 0; s < u->n; s++)
      if (tmp[group_of[s]] < 0)
        tmp[group_of[s]] = next++;
    for (int64_t k = 0; k < groups; k++) {
      order[tmp[k]] = first[k];
      group_of[u->n + tmp[k]] = count[k];
    }
    for (int64_t s = 0; s < u->n; s++)
      group_of[s] = tmp[group_of[s]];
    memcpy(first, order, sizeof *first * (size_t)groups);
    memcpy(count, group_of + u->n, sizeof *count * (size_t)groups);
  }
  return groups;
}

static nr_status unique_view_of(nr_op_ctx *ctx, unique_view *u, int *axis) {
  const nr_value *x = nr_op_in(ctx, 0);
  const nr_attr *a = nr_node_attr(ctx->node, "axis");
  u->x = x;
  *axis = -1;
  if (!a) {
    u->n = nr_value_count(x);
    u->len = u->inner = 1;
    return NR_OK;
  }
  nr_status st = nr_op_axis(ctx, a->i, x->rank, axis);
  if (st)
    return st;
  if (x->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis given for a scalar");
  u->n = x->dims[*axis];
  u->inner = product(x->dims, *axis + 1, x->rank);
  u->len = product(x->dims, 0, *axis) * u->inner;
  return NR_OK;
}

nr_status nr_sx_unique_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  bool flat = !nr_node_attr(ctx->node, "axis");
  int64_t dims[NR_MAX_RANK], unknown = NR_DIM_UNKNOWN;
  int axis = -1;
  if (!flat && x->rank >= 0 &&
      (st = nr_op_axis(ctx, nr_node_attr(ctx->node, "axis")->i, x->rank, &axis)))
    return st;
  int64_t n = flat ? nr_value_count(x) : x->rank >= 0 ? x->dims[axis] : NR_DIM_UNKNOWN;
  memcpy(dims, x->dims, sizeof dims);
  if (axis >= 0)
    dims[axis] = NR_DIM_UNKNOWN;
  st = flat ? nr_op_set_output(ctx, 0, x->dtype, 1, &unknown)
            : nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
  if (!st)
    st = nr_op_set_output(ctx, 1, NR_DTYPE_INT64, 1, &unknown);
  if (!st)
    st = nr_op_set_output(ctx, 2, NR_DTYPE_INT64, 1, &n);
  if (!st)
    st = nr_op_set_output(ctx, 3, NR_DTYPE_INT64, 1, &unknown);
  return st;
}

/* Allocates and fills Y (the first occurrence of every group) and the int64 outputs. */
static nr_status unique_write(nr_op_ctx *ctx, const unique_view *u, int axis,
                              int64_t groups, const int64_t *first, const int64_t *count,
                              const int64_t *group_of) {
  const nr_value *x = u->x;
  int64_t dims[NR_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis < 0 ? 0 : axis] = groups;
  nr_value *y = nr_op_out(ctx, 0);
  nr_status st = nr_value_alloc(y, x->dtype, axis < 0 ? 1 : x->rank, dims, ctx->err);
  size_t es = nr_dtype_size(x->dtype);
  for (int64_t g = 0; g < groups && !st; g++)
    for (int64_t j = 0; j < u->len; j++) {
      unique_view out = {y, groups, u->len, u->inner};
      memcpy((char *)y->data + (size_t)slice_elem(&out, g, j) * es,
             (const char *)x->data + (size_t)slice_elem(u, first[g], j) * es, es);
    }
  const int64_t *src[3] = {first, group_of, count};
  int64_t lens[3] = {groups, u->n, groups};
  for (int k = 0; k < 3 && !st; k++) {
    nr_value *o = nr_op_out(ctx, k + 1);
    if (o && !(st = nr_value_alloc(o, NR_DTYPE_INT64, 1, &lens[k], ctx->err)))
      memcpy(o->data, src[k], sizeof(int64_t) * (size_t)lens[k]);
  }
  return st;
}

nr_status nr_sx_unique_run(nr_op_ctx *ctx) {
  unique_view u = {0};
  int axis;
  nr_status st = unique_view_of(ctx, &u, &axis);
  if (st)
    return st;
  size_t n = (size_t)(u.n ? u.n : 1);
  int64_t *buf = malloc(sizeof(int64_t) * n * 6);
  if (!buf)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory for %lld slices", (long long)u.n);
  int64_t *order = buf, *tmp = buf + n, *first = buf + 2 * n, *count = buf + 3 * n;
  int64_t *group_of = buf + 4 * n; /* 2n: the second half is scratch */
  bool sorted = nr_attr_int(ctx->node, "sorted", 1) != 0;
  int64_t groups = unique_groups(&u, order, tmp, sorted, first, count, group_of);
  st = unique_write(ctx, &u, axis, groups, first, count, group_of);
  free(buf);
  return st;
}
