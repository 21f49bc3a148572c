/* ops_index.c - the index family: its table, and the operators that read or write
 * elements at computed positions (Slice, Gather, GatherElements, GatherND, Scatter,
 * ScatterElements, ScatterND, OneHot).
 *
 * The data-dependent-shape operators (NonZero, Compress, Unique) live in
 * ops_select.c. Index tensors may be int32 or int64; negative indices count from the
 * end where ONNX says so, and every index is range-checked before use, an
 * out-of-range one failing with NR_ERR_RUNTIME that names its value and position.
 * Gathers move elements as bytes; scatter reductions compute in double (float types)
 * or int64 (integers), which is exact for one add, multiply, max or min. */
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <string.h>

static nr_status slice_infer(nr_op_ctx *ctx);
static nr_status slice_run(nr_op_ctx *ctx);
static nr_status gather_infer(nr_op_ctx *ctx);
static nr_status gather_run(nr_op_ctx *ctx);
static nr_status gather_el_infer(nr_op_ctx *ctx);
static nr_status gather_el_run(nr_op_ctx *ctx);
static nr_status gather_nd_infer(nr_op_ctx *ctx);
static nr_status gather_nd_run(nr_op_ctx *ctx);
static nr_status scatter_el_infer(nr_op_ctx *ctx);
static nr_status scatter_el_run(nr_op_ctx *ctx);
static nr_status scatter_nd_infer(nr_op_ctx *ctx);
static nr_status scatter_nd_run(nr_op_ctx *ctx);
static nr_status onehot_infer(nr_op_ctx *ctx);
static nr_status onehot_run(nr_op_ctx *ctx);

const nr_op_def nr_ref_ops_index[] = {
    {"", "Slice", 1, slice_infer, slice_run, 0},
    {"", "Gather", 1, gather_infer, gather_run, 0},
    {"", "GatherElements", 11, gather_el_infer, gather_el_run, 0},
    {"", "GatherND", 11, gather_nd_infer, gather_nd_run, 0},
    {"", "Scatter", 9, scatter_el_infer, scatter_el_run, 0},
    {"", "ScatterElements", 11, scatter_el_infer, scatter_el_run, 0},
    {"", "ScatterND", 11, scatter_nd_infer, scatter_nd_run, 0},
    {"", "OneHot", 9, onehot_infer, onehot_run, 0},
    {"", "NonZero", 9, nr_sx_nonzero_infer, nr_sx_nonzero_run, NR_OP_ALLOCATES_OUTPUTS},
    {"", "Compress", 9, nr_sx_compress_infer, nr_sx_compress_run,
     NR_OP_ALLOCATES_OUTPUTS},
    {"", "Unique", 11, nr_sx_unique_infer, nr_sx_unique_run, NR_OP_ALLOCATES_OUTPUTS},
    {0},
};

/* ---- shared pieces ---------------------------------------------------------------- */

static int64_t product(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++)
    p = (p < 0 || dims[d] < 0) ? NR_DIM_UNKNOWN : p * dims[d];
  return p;
}

static nr_status set_unknown(nr_op_ctx *ctx, int i, nr_dtype dtype, int rank) {
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < NR_MAX_RANK; d++)
    dims[d] = NR_DIM_UNKNOWN;
  if (rank > NR_MAX_RANK)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                      NR_MAX_RANK);
  return nr_op_set_output(ctx, i, dtype, rank, dims);
}

/* Reads index k of an index tensor, wraps a negative one by dim and checks range. */
static nr_status index_at(nr_op_ctx *ctx, const nr_value *ind, int64_t k, int64_t dim,
                          int64_t *out) {
  int64_t i = nr_value_get_i64(ind, k);
  int64_t w = i < 0 ? i + dim : i;
  if (w < 0 || w >= dim)
    return nr_op_fail(ctx, NR_ERR_RUNTIME,
                      "index %lld at position %lld is out of range "
                      "for a dimension of %lld",
                      (long long)i, (long long)k, (long long)dim);
  *out = w;
  return NR_OK;
}

static nr_status check_same_dtype(nr_op_ctx *ctx, int a, int b) {
  const nr_value *x = nr_op_in(ctx, a), *y = nr_op_in(ctx, b);
  if (x->dtype && y->dtype && x->dtype != y->dtype)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is %s but input %d is %s", b,
                      nr_dtype_name(y->dtype), a, nr_dtype_name(x->dtype));
  return NR_OK;
}

/* ---- Slice ------------------------------------------------------------------------- */

typedef struct slice_args {
  int n; /* number of sliced axes */
  int64_t starts[NR_MAX_RANK], ends[NR_MAX_RANK], axes[NR_MAX_RANK], steps[NR_MAX_RANK];
} slice_args;

/* One list of Slice's arguments: attribute before opset 10, input after.
 * Returns *n = -1 when the list is absent. */
static nr_status slice_list(nr_op_ctx *ctx, const char *name, int input, int64_t *out,
                            int *n) {
  *n = -1;
  if (ctx->node->opset < 10) {
    size_t count;
    const int64_t *a = nr_attr_ints(ctx->node, name, &count);
    if (!a)
      return NR_OK;
    if (count > NR_MAX_RANK)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "'%s' has %zu entries", name, count);
    memcpy(out, a, count * sizeof *a);
    *n = (int)count;
    return NR_OK;
  }
  if (!nr_op_in(ctx, input))
    return NR_OK;
  return nr_sx_read_ints(ctx, input, name, out, NR_MAX_RANK, n);
}

static nr_status slice_read(nr_op_ctx *ctx, int rank, slice_args *a) {
  int ns, ne, na, nt;
  nr_status st = slice_list(ctx, "starts", 1, a->starts, &ns);
  if (!st)
    st = slice_list(ctx, "ends", 2, a->ends, &ne);
  if (!st)
    st = slice_list(ctx, "axes", 3, a->axes, &na);
  if (!st)
    st = slice_list(ctx, "steps", 4, a->steps, &nt);
  if (st)
    return st;
  if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "starts, ends, axes and steps differ in length");
  a->n = ns;
  for (int i = 0; i < ns; i++) {
    a->axes[i] = na >= 0 ? a->axes[i] : i;
    a->steps[i] = nt >= 0 ? a->steps[i] : 1;
    if (a->axes[i] < -rank || a->axes[i] >= rank)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld is out of range for rank %d",
                        (long long)a->axes[i], rank);
    a->axes[i] += a->axes[i] < 0 ? rank : 0;
    if (a->steps[i] == 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "step is 0 for axis %lld",
                        (long long)a->axes[i]);
    for (int j = 0; j < i; j++)
      if (a->axes[j] == a->axes[i])
        return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld is sliced twice",
                          (long long)a->axes[i]);
  }
  return NR_OK;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/* Clamped start and element count of one sliced axis of size dim. */
static void slice_axis(int64_t dim, int64_t s, int64_t e, int64_t step, int64_t *start,
                       int64_t *count) {
  s = s < 0 ? s + dim : s;
  e = e < 0 ? e + dim : e;
  if (step > 0) {
    s = clamp(s, 0, dim);
    e = clamp(e, 0, dim);
    *count = e > s ? (e - s - 1) / step + 1 : 0;
  } else {
    s = clamp(s, 0, dim - 1);
    e = clamp(e, -1, dim - 1);
    int64_t back = step == INT64_MIN ? INT64_MAX : -step;
    *count = s > e ? (s - e - 1) / back + 1 : 0;
  }
  *start = s;
}

static bool slice_inputs_known(const nr_op_ctx *ctx) {
  if (ctx->node->opset < 10)
    return true;
  for (int i = 1; i < 5; i++)
    if (nr_op_in(ctx, i) && !nr_op_in_known(ctx, i))
      return false;
  return true;
}

static nr_status slice_infer(nr_op_ctx *ctx) {
  bool old = ctx->node->opset < 10;
  nr_status st = nr_op_check_arity(ctx, old ? 1 : 3, old ? 1 : 5);
  for (int i = 1; i < 5 && !st && !old; i++)
    if (nr_op_in(ctx, i))
      st = nr_sx_need_index(ctx, i, i == 1 ? "starts" : i == 2 ? "ends" : "axes/steps");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->rank < 0 || !slice_inputs_known(ctx))
    return set_unknown(ctx, 0, x->dtype, x->rank);
  slice_args a;
  int64_t dims[NR_MAX_RANK], start;
  if ((st = slice_read(ctx, x->rank, &a)))
    return st;
  memcpy(dims, x->dims, sizeof dims);
  for (int i = 0; i < a.n; i++) {
    int64_t ax = a.axes[i];
    if (x->dims[ax] < 0)
      continue;
    slice_axis(x->dims[ax], a.starts[i], a.ends[i], a.steps[i], &start, &dims[ax]);
  }
  st = nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
  return st ? st : nr_sx_fold_small(ctx, slice_run);
}

static nr_status slice_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  slice_args a;
  nr_status st = slice_read(ctx, x->rank, &a);
  if (st)
    return st;
  int64_t xs[NR_MAX_RANK];
  nr_strides(x->rank, x->dims, xs);
  nr_sx_view v = {.rank = x->rank, .offset = 0};
  for (int d = 0; d < x->rank; d++) {
    v.dims[d] = x->dims[d];
    v.strides[d] = xs[d];
  }
  for (int i = 0; i < a.n; i++) {
    int64_t ax = a.axes[i], start;
    slice_axis(x->dims[ax], a.starts[i], a.ends[i], a.steps[i], &start, &v.dims[ax]);
    if (v.dims[ax] > 0)
      v.offset += start * xs[ax];
    v.strides[ax] = xs[ax] * a.steps[i];
  }
  nr_sx_view_copy(nr_op_out(ctx, 0)->data, x->data, nr_dtype_size(x->dtype), &v);
  return NR_OK;
}

/* ---- Gather ------------------------------------------------------------------------ */

static nr_status gather_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "indices");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  if (x->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "data must have rank >= 1");
  if (x->rank < 0 || ind->rank < 0)
    return set_unknown(ctx, 0, x->dtype, -1);
  int axis, r = 0;
  int64_t dims[2 * NR_MAX_RANK];
  if ((st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, &axis)))
    return st;
  for (int d = 0; d < axis; d++)
    dims[r++] = x->dims[d];
  for (int d = 0; d < ind->rank; d++)
    dims[r++] = ind->dims[d];
  for (int d = axis + 1; d < x->rank; d++)
    dims[r++] = x->dims[d];
  st = nr_op_set_output(ctx, 0, x->dtype, r, dims);
  return st ? st : nr_sx_fold_small(ctx, gather_run);
}

static nr_status gather_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  int axis;
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, &axis);
  if (st)
    return st;
  size_t es = nr_dtype_size(x->dtype);
  int64_t outer = product(x->dims, 0, axis), inner = product(x->dims, axis + 1, x->rank);
  int64_t dim = x->dims[axis], n = nr_value_count(ind);
  size_t block = (size_t)inner * es;
  char *dst = nr_op_out(ctx, 0)->data;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t k = 0; k < n; k++, dst += block) {
      int64_t i = 0;
      if ((st = index_at(ctx, ind, k, dim, &i)))
        return st;
      memcpy(dst, (const char *)x->data + (size_t)((o * dim + i) * inner) * es, block);
    }
  }
  return NR_OK;
}

/* ---- GatherElements ---------------------------------------------------------------- */

/* data and indices have one rank; indices may not exceed data off the axis. */
static nr_status elements_check(nr_op_ctx *ctx, const nr_value *x, const nr_value *ind,
                                int *axis) {
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, axis);
  if (st)
    return st;
  if (ind->rank != x->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "indices rank %d differs from data rank %d",
                      ind->rank, x->rank);
  for (int d = 0; d < x->rank; d++)
    if (d != *axis && x->dims[d] >= 0 && ind->dims[d] > x->dims[d])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "indices dim %d (%lld) exceeds data's %lld", d,
                        (long long)ind->dims[d], (long long)x->dims[d]);
  return NR_OK;
}

static nr_status gather_el_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "indices");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  int axis;
  if (x->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "data must have rank >= 1");
  if (x->rank < 0 || ind->rank < 0)
    return set_unknown(ctx, 0, x->dtype, x->rank >= 0 ? x->rank : ind->rank);
  if ((st = elements_check(ctx, x, ind, &axis)))
    return st;
  return nr_op_set_output(ctx, 0, x->dtype, ind->rank, ind->dims);
}

/* Calls visit(pos, data offset) for every element of indices, in C order. The data
 * offset uses the element's own coordinates, with the axis one taken from indices. */
typedef nr_status (*elements_fn)(nr_op_ctx *ctx, int64_t pos, int64_t off);

static nr_status elements_walk(nr_op_ctx *ctx, int axis, elements_fn visit) {
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  int64_t xs[NR_MAX_RANK], idx[NR_MAX_RANK] = {0}, n = nr_value_count(ind);
  nr_strides(x->rank, x->dims, xs);
  for (int64_t k = 0; k < n; k++) {
    int64_t i = 0, off = 0;
    nr_status st = index_at(ctx, ind, k, x->dims[axis], &i);
    if (st)
      return st;
    for (int d = 0; d < x->rank; d++)
      off += (d == axis ? i : idx[d]) * xs[d];
    if ((st = visit(ctx, k, off)))
      return st;
    for (int d = ind->rank - 1; d >= 0 && ++idx[d] == ind->dims[d]; d--)
      idx[d] = 0;
  }
  return NR_OK;
}

static nr_status gather_el_visit(nr_op_ctx *ctx, int64_t pos, int64_t off) {
  const nr_value *x = nr_op_in(ctx, 0);
  size_t es = nr_dtype_size(x->dtype);
  memcpy((char *)nr_op_out(ctx, 0)->data + (size_t)pos * es,
         (const char *)x->data + (size_t)off * es, es);
  return NR_OK;
}

static nr_status gather_el_run(nr_op_ctx *ctx) {
  int axis;
  nr_status st = elements_check(ctx, nr_op_in(ctx, 0), nr_op_in(ctx, 1), &axis);
  return st ? st : elements_walk(ctx, axis, gather_el_visit);
}

/* ---- GatherND ---------------------------------------------------------------------- */

static nr_status gather_nd_check(nr_op_ctx *ctx, const nr_value *x, const nr_value *ind,
                                 int64_t *batch, int64_t *m) {
  *batch = nr_attr_int(ctx->node, "batch_dims", 0);
  *m = ind->dims[ind->rank - 1];
  if (*batch < 0 || *batch >= x->rank || *batch >= ind->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "batch_dims %lld must be below both ranks",
                      (long long)*batch);
  if (*m >= 0 && (*m < 1 || *m > x->rank - *batch))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "indices' last dim %lld must be in [1, %lld]",
                      (long long)*m, (long long)(x->rank - *batch));
  for (int d = 0; d < *batch; d++)
    if (x->dims[d] >= 0 && ind->dims[d] >= 0 && x->dims[d] != ind->dims[d])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "batch dim %d differs: %lld vs %lld", d,
                        (long long)x->dims[d], (long long)ind->dims[d]);
  return NR_OK;
}

static nr_status gather_nd_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "indices");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  int64_t batch, m, dims[2 * NR_MAX_RANK];
  if (ind->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "indices must have rank >= 1");
  if (x->rank < 0 || ind->rank < 0)
    return set_unknown(ctx, 0, x->dtype, -1);
  if ((st = gather_nd_check(ctx, x, ind, &batch, &m)))
    return st;
  if (m < 0)
    return set_unknown(ctx, 0, x->dtype, -1);
  int r = 0;
  for (int d = 0; d < ind->rank - 1; d++)
    dims[r++] = ind->dims[d];
  for (int d = (int)(batch + m); d < x->rank; d++)
    dims[r++] = x->dims[d];
  return nr_op_set_output(ctx, 0, x->dtype, r, dims);
}

static nr_status gather_nd_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  int64_t b, m, xs[NR_MAX_RANK];
  nr_status st = gather_nd_check(ctx, x, ind, &b, &m);
  if (st)
    return st;
  nr_strides(x->rank, x->dims, xs);
  size_t es = nr_dtype_size(x->dtype);
  int64_t batches = product(x->dims, 0, (int)b);
  int64_t per_batch = product(ind->dims, (int)b, ind->rank - 1);
  int64_t inner = product(x->dims, (int)(b + m), x->rank);
  char *dst = nr_op_out(ctx, 0)->data;
  for (int64_t bi = 0; bi < batches; bi++) {
    for (int64_t t = 0; t < per_batch; t++, dst += (size_t)inner * es) {
      int64_t base = (bi * per_batch + t) * m, off = b > 0 ? bi * xs[b - 1] : 0;
      for (int64_t j = 0; j < m; j++) {
        int64_t i = 0;
        if ((st = index_at(ctx, ind, base + j, x->dims[b + j], &i)))
          return st;
        off += i * xs[b + j];
      }
      memcpy(dst, (const char *)x->data + (size_t)off * es, (size_t)inner * es);
    }
  }
  return NR_OK;
}

/* ---- scatter reductions ------------------------------------------------------------ */

typedef enum reduce_kind { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduce_kind;

static nr_status reduce_kind_of(nr_op_ctx *ctx, reduce_kind *r) {
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  const char *s = nr_attr_string(ctx->node, "reduction", "none");
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, names[i])) {
      *r = (reduce_kind)i;
      return NR_OK;
    }
  return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown reduction '%s'", s);
}

static int64_t reduce_int(nr_dtype t, reduce_kind r, int64_t a, int64_t b) {
  bool u64 = t == NR_DTYPE_UINT64;
  switch (r) {
  case RED_ADD: return (int64_t)((uint64_t)a + (uint64_t)b); /* wraps like the type */
  case RED_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
  case RED_MAX: return (u64 ? (uint64_t)a >= (uint64_t)b : a >= b) ? a : b;
  case RED_MIN: return (u64 ? (uint64_t)a <= (uint64_t)b : a <= b) ? a : b;
  default: return b;
  }
}

static double reduce_float(reduce_kind r, double a, double b) {
  switch (r) {
  case RED_ADD: return a + b;
  case RED_MUL: return a * b;
  case RED_MAX: return (a != a || a >= b) ? a : b; /* NaN stays */
  case RED_MIN: return (a != a || a <= b) ? a : b;
  default: return b;
  }
}

/* out[oi] = reduce(out[oi], upd[ui]) for elements of dtype t. */
static void reduce_into(nr_dtype t, reduce_kind r, void *out, int64_t oi, const void *upd,
                        int64_t ui) {
  size_t es = nr_dtype_size(t);
  if (r == RED_NONE)
    memcpy((char *)out + (size_t)oi * es, (const char *)upd + (size_t)ui * es, es);
  else if (nr_dtype_is_float(t))
    nr_store_f64(t, out, oi,
                 reduce_float(r, nr_load_f64(t, out, oi), nr_load_f64(t, upd, ui)));
  else
    nr_store_i64(t, out, oi,
                 reduce_int(t, r, nr_load_i64(t, out, oi), nr_load_i64(t, upd, ui)));
}

/* ---- Scatter, ScatterElements ------------------------------------------------------ */

static nr_status scatter_el_infer(nr_op_ctx *ctx) {
  reduce_kind r = 0;
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "indices");
  if (!st)
    st = check_same_dtype(ctx, 0, 2);
  if (!st)
    st = reduce_kind_of(ctx, &r);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1), *upd = nr_op_in(ctx, 2);
  int axis;
  if (x->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "data must have rank >= 1");
  if (x->rank >= 0 && ind->rank >= 0 && (st = elements_check(ctx, x, ind, &axis)))
    return st;
  if (ind->rank >= 0 && upd->rank >= 0) {
    bool same = ind->rank == upd->rank;
    for (int d = 0; same && d < ind->rank; d++)
      same = ind->dims[d] < 0 || upd->dims[d] < 0 || ind->dims[d] == upd->dims[d];
    if (!same)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "updates and indices differ in shape");
  }
  return nr_op_same_as_input(ctx, 0, 0);
}

static nr_status scatter_el_visit(nr_op_ctx *ctx, int64_t pos, int64_t off) {
  reduce_kind r = 0;
  nr_status st = reduce_kind_of(ctx, &r);
  nr_value *y = nr_op_out(ctx, 0);
  if (!st)
    reduce_into(y->dtype, r, y->data, off, nr_op_in(ctx, 2)->data, pos);
  return st;
}

static nr_status scatter_el_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int axis;
  nr_status st = elements_check(ctx, x, nr_op_in(ctx, 1), &axis);
  if (st)
    return st;
  memcpy(nr_op_out(ctx, 0)->data, x->data, nr_value_nbytes(x));
  return elements_walk(ctx, axis, scatter_el_visit);
}

/* ---- ScatterND --------------------------------------------------------------------- */

static nr_status scatter_nd_check(nr_op_ctx *ctx, const nr_value *x, const nr_value *ind,
                                  const nr_value *upd) {
  int q = ind->rank;
  int64_t k = ind->dims[q - 1];
  if (k < 0)
    return NR_OK;
  if (k > x->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "indices' last dim %lld exceeds data rank %d",
                      (long long)k, x->rank);
  int want = q - 1 + x->rank - (int)k;
  if (upd->rank < 0)
    return NR_OK;
  bool ok = upd->rank == want;
  for (int d = 0; ok && d < want; d++) {
    int64_t e = d < q - 1 ? ind->dims[d] : x->dims[k + d - (q - 1)];
    ok = e < 0 || upd->dims[d] < 0 || e == upd->dims[d];
  }
  if (!ok)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "updates' shape must be indices.shape[:-1] + "
                      "data.shape[%lld:]",
                      (long long)k);
  return NR_OK;
}

static nr_status scatter_nd_infer(nr_op_ctx *ctx) {
  reduce_kind r = 0;
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "indices");
  if (!st)
    st = check_same_dtype(ctx, 0, 2);
  if (!st)
    st = reduce_kind_of(ctx, &r);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1), *upd = nr_op_in(ctx, 2);
  if (ind->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "indices must have rank >= 1");
  if (x->rank >= 0 && ind->rank > 0 && (st = scatter_nd_check(ctx, x, ind, upd)))
    return st;
  return nr_op_same_as_input(ctx, 0, 0);
}

static nr_status scatter_nd_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1), *upd = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  reduce_kind r = 0;
  nr_status st = reduce_kind_of(ctx, &r);
  if (!st)
    st = scatter_nd_check(ctx, x, ind, upd);
  if (st)
    return st;
  memcpy(y->data, x->data, nr_value_nbytes(x));
  int64_t k = ind->dims[ind->rank - 1], xs[NR_MAX_RANK];
  int64_t n = product(ind->dims, 0, ind->rank - 1),
          inner = product(x->dims, (int)k, x->rank);
  nr_strides(x->rank, x->dims, xs);
  for (int64_t t = 0; t < n; t++) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; j++) {
      int64_t i = 0;
      if ((st = index_at(ctx, ind, t * k + j, x->dims[j], &i)))
        return st;
      off += i * xs[j];
    }
    for (int64_t e = 0; e < inner; e++)
      reduce_into(y->dtype, r, y->data, off + e, upd->data, t * inner + e);
  }
  return NR_OK;
}

/* ---- OneHot ------------------------------------------------------------------------ */

static nr_status onehot_depth(nr_op_ctx *ctx, int64_t *depth) {
  const nr_value *d = nr_op_in(ctx, 1);
  if (nr_value_count(d) != 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "depth must hold one value");
  *depth = nr_value_get_i64(d, 0);
  if (*depth < 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "depth %lld is negative", (long long)*depth);
  return NR_OK;
}

static nr_status onehot_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (st)
    return st;
  const nr_value *ind = nr_op_in(ctx, 0), *d = nr_op_in(ctx, 1), *val = nr_op_in(ctx, 2);
  int64_t depth = NR_DIM_UNKNOWN, dims[NR_MAX_RANK];
  if (val->rank >= 0 && (val->rank != 1 || (val->dims[0] >= 0 && val->dims[0] != 2)))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "values must be [off_value, on_value]");
  if (d->rank > 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "depth must be a scalar");
  if (ind->rank < 0)
    return set_unknown(ctx, 0, val->dtype, -1);
  int r = ind->rank + 1, axis;
  if (r > NR_MAX_RANK)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "output rank %d exceeds %d", r,
                      NR_MAX_RANK);
  if ((st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), r, &axis)))
    return st;
  if (nr_op_in_known(ctx, 1) && (st = onehot_depth(ctx, &depth)))
    return st;
  for (int i = 0, k = 0; i < r; i++)
    dims[i] = i == axis ? depth : ind->dims[k++];
  return nr_op_set_output(ctx, 0, val->dtype, r, dims);
}

static nr_status onehot_run(nr_op_ctx *ctx) {
  const nr_value *ind = nr_op_in(ctx, 0), *val = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t depth = 0;
  int axis;
  nr_status st = onehot_depth(ctx, &depth);
  if (!st)
    st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), y->rank, &axis);
  if (st)
    return st;
  size_t es = nr_dtype_size(y->dtype);
  const char *off_v = val->data, *on_v = (const char *)val->data + es;
  for (int64_t i = 0; i < nr_value_count(y); i++)
    memcpy((char *)y->data + (size_t)i * es, off_v, es);
  int64_t inner = product(ind->dims, axis, ind->rank), n = nr_value_count(ind);
  for (int64_t p = 0; p < n; p++) {
    int64_t k = nr_value_get_i64(ind, p);
    k = k < 0 ? k + depth : k;
    if (k < 0 || k >= depth)
      continue; /* out-of-range indices leave the row all off_value */
    int64_t o = p / inner, i = p % inner;
    memcpy((char *)y->data + (size_t)((o * depth + k) * inner + i) * es, on_v, es);
  }
  return NR_OK;
}
