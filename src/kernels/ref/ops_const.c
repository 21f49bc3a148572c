/* ops_const.c - shape-family operators that make tensors from attributes or a few
 * scalars: Constant, ConstantOfShape and Range (listed in ops_shape.c's table).
 *
 * Their outputs are usually small and feed shape computations, so infer() evaluates
 * them right away whenever the inputs are known (nr_sx_fold_small). Constant's string
 * and sparse forms are documented as unsupported. Range computes float, float16 and
 * bfloat16 in float (opset 27's default stash_type) and integers exactly. */
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <math.h>
#include <string.h>

static nr_status set_unknown(nr_op_ctx *ctx, int i, nr_dtype dtype, int rank) {
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < NR_MAX_RANK; d++)
    dims[d] = NR_DIM_UNKNOWN;
  return nr_op_set_output(ctx, i, dtype, rank, dims);
}

/* ---- Constant ---------------------------------------------------------------------- */

/* The one value attribute of a Constant node, checked. */
static nr_status constant_attr(nr_op_ctx *ctx, const nr_attr **out) {
  static const char *const names[] = {"value",         "value_float", "value_floats",
                                      "value_int",     "value_ints",  "value_string",
                                      "value_strings", "sparse_value"};
  *out = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const nr_attr *a = nr_node_attr(ctx->node, names[i]);
    if (!a)
      continue;
    if (*out)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "has both '%s' and '%s'", (*out)->name,
                        a->name);
    if (i >= 5)
      return nr_op_fail(ctx, NR_ERR_UNSUPPORTED,
                        "attribute '%s' is not supported "
                        "(string and sparse constants)",
                        a->name);
    *out = a;
  }
  if (!*out)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "has no value attribute");
  if ((*out)->type == NR_ATTR_TENSOR && nr_dtype_size((*out)->t.dtype) == 0)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "constant of dtype %s is not supported",
                      nr_dtype_name((*out)->t.dtype));
  if ((*out)->type == NR_ATTR_TENSOR && !(*out)->t.data)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "value tensor has no data");
  return NR_OK;
}

nr_status nr_sx_constant_infer(nr_op_ctx *ctx) {
  const nr_attr *a;
  nr_status st = nr_op_check_arity(ctx, 0, 0);
  if (!st)
    st = constant_attr(ctx, &a);
  if (st)
    return st;
  int64_t n = (int64_t)a->n;
  if (a->type == NR_ATTR_TENSOR)
    st = nr_op_set_output(ctx, 0, a->t.dtype, a->t.rank, a->t.dims);
  else if (a->type == NR_ATTR_FLOAT || a->type == NR_ATTR_INT)
    st = nr_op_set_output(
        ctx, 0, a->type == NR_ATTR_INT ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT, 0, NULL);
  else if (a->type == NR_ATTR_FLOATS || a->type == NR_ATTR_INTS)
    st = nr_op_set_output(
        ctx, 0, a->type == NR_ATTR_INTS ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT, 1, &n);
  else
    st = nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute '%s' has the wrong type",
                    a->name);
  return st ? st : nr_sx_fold_small(ctx, nr_sx_constant_run);
}

nr_status nr_sx_constant_run(nr_op_ctx *ctx) {
  const nr_attr *a;
  nr_status st = constant_attr(ctx, &a);
  nr_value *y = nr_op_out(ctx, 0);
  if (st)
    return st;
  if (!y) /* a node without its output names nothing to fill */
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "Constant has no output");
  switch (a->type) {
  case NR_ATTR_TENSOR: memcpy(y->data, a->t.data, nr_value_nbytes(&a->t)); break;
  case NR_ATTR_FLOAT: *(float *)y->data = a->f; break;
  case NR_ATTR_INT: *(int64_t *)y->data = a->i; break;
  case NR_ATTR_FLOATS: memcpy(y->data, a->floats, a->n * sizeof(float)); break;
  case NR_ATTR_INTS: memcpy(y->data, a->ints, a->n * sizeof(int64_t)); break;
  default: break;
  }
  return NR_OK;
}

/* ---- ConstantOfShape --------------------------------------------------------------- */

static nr_status cos_value(nr_op_ctx *ctx, const nr_value **value) {
  const nr_attr *a = nr_node_attr(ctx->node, "value");
  *value = NULL;
  if (!a)
    return NR_OK;
  if (a->type != NR_ATTR_TENSOR || nr_value_count(&a->t) != 1 || !a->t.data)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "'value' must be a one-element tensor");
  if (nr_dtype_size(a->t.dtype) == 0)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "'value' of dtype %s is not supported",
                      nr_dtype_name(a->t.dtype));
  *value = &a->t;
  return NR_OK;
}

nr_status nr_sx_cos_infer(nr_op_ctx *ctx) {
  const nr_value *value;
  int64_t dims[NR_MAX_RANK];
  int n;
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = nr_sx_need_index(ctx, 0, "input");
  if (!st)
    st = cos_value(ctx, &value);
  if (st)
    return st;
  nr_dtype dtype = value ? value->dtype : NR_DTYPE_FLOAT;
  if (!nr_op_in_known(ctx, 0)) {
    const nr_value *s = nr_op_in(ctx, 0);
    return set_unknown(ctx, 0, dtype,
                       s->rank == 1 && s->dims[0] >= 0 ? (int)s->dims[0] : -1);
  }
  if ((st = nr_sx_read_ints(ctx, 0, "input", dims, NR_MAX_RANK, &n)))
    return st;
  for (int d = 0; d < n; d++)
    if (dims[d] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "shape[%d] = %lld is negative", d,
                        (long long)dims[d]);
  st = nr_op_set_output(ctx, 0, dtype, n, dims);
  return st ? st : nr_sx_fold_small(ctx, nr_sx_cos_run);
}

nr_status nr_sx_cos_run(nr_op_ctx *ctx) {
  const nr_value *value;
  nr_status st = cos_value(ctx, &value);
  if (st || !value)
    return st; /* the default is float 0: the output is already zeroed */
  nr_value *y = nr_op_out(ctx, 0);
  size_t es = nr_dtype_size(y->dtype);
  for (int64_t i = 0; i < nr_value_count(y); i++)
    memcpy((char *)y->data + (size_t)i * es, value->data, es);
  return NR_OK;
}

/* ---- Range ------------------------------------------------------------------------- */

/* Element count of an integer range; delta != 0 is checked by the caller. */
static int64_t range_count_int(int64_t start, int64_t limit, int64_t delta) {
  uint64_t span, step;
  if (delta > 0) {
    if (limit <= start)
      return 0;
    span = (uint64_t)limit - (uint64_t)start;
    step = (uint64_t)delta;
  } else {
    if (limit >= start)
      return 0;
    span = (uint64_t)start - (uint64_t)limit;
    step = (uint64_t)0 - (uint64_t)delta;
  }
  uint64_t n = span / step + (span % step != 0);
  return n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* float computes in float, double in double; float16 and bfloat16 in float unless
 * opset 27's stash_type asks for double (11). */
static bool range_in_float(const nr_op_ctx *ctx, nr_dtype t) {
  if (t == NR_DTYPE_FLOAT16 || t == NR_DTYPE_BFLOAT16)
    return nr_attr_int(ctx->node, "stash_type", NR_DTYPE_FLOAT) != NR_DTYPE_DOUBLE;
  return t != NR_DTYPE_DOUBLE;
}

static nr_status range_count(nr_op_ctx *ctx, int64_t *count) {
  const nr_value *s = nr_op_in(ctx, 0), *l = nr_op_in(ctx, 1), *d = nr_op_in(ctx, 2);
  nr_dtype t = s->dtype;
  if (!nr_dtype_is_float(t)) {
    int64_t delta = nr_value_get_i64(d, 0);
    if (delta == 0)
      return nr_op_fail(ctx, NR_ERR_RUNTIME, "delta is 0");
    *count = range_count_int(nr_value_get_i64(s, 0), nr_value_get_i64(l, 0), delta);
    return NR_OK;
  }
  double fs = nr_value_get_f64(s, 0), fl = nr_value_get_f64(l, 0);
  double fd = nr_value_get_f64(d, 0);
  double n = range_in_float(ctx, t) ? ceil((double)(((float)fl - (float)fs) / (float)fd))
                                    : ceil((fl - fs) / fd);
  if (fd == 0 || isnan(n) || n > 1e15)
    return nr_op_fail(ctx, NR_ERR_RUNTIME, "range(%g, %g, %g) has no finite length", fs,
                      fl, fd);
  *count = n > 0 ? (int64_t)n : 0;
  return NR_OK;
}

nr_status nr_sx_range_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (st)
    return st;
  nr_dtype t = nr_op_in(ctx, 0)->dtype;
  for (int i = 0; i < 3; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    if (v->dtype && t && v->dtype != t)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is %s, input 0 is %s", i,
                        nr_dtype_name(v->dtype), nr_dtype_name(t));
    if (nr_value_count(v) > 1 || v->rank > 1)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d must be a scalar", i);
    if (nr_value_count(v) == 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is empty", i);
  }
  if (t == NR_DTYPE_BOOL || (t && nr_dtype_size(t) == 0))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "Range does not take %s", nr_dtype_name(t));
  int64_t n = NR_DIM_UNKNOWN;
  if (nr_op_in_known(ctx, 0) && nr_op_in_known(ctx, 1) && nr_op_in_known(ctx, 2) &&
      (st = range_count(ctx, &n)))
    return st;
  st = nr_op_set_output(ctx, 0, t, 1, &n);
  return st ? st : nr_sx_fold_small(ctx, nr_sx_range_run);
}

nr_status nr_sx_range_run(nr_op_ctx *ctx) {
  const nr_value *s = nr_op_in(ctx, 0), *d = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  nr_dtype t = y->dtype;
  int64_t n = y->dims[0];
  if (!nr_dtype_is_float(t)) {
    uint64_t start = (uint64_t)nr_value_get_i64(s, 0),
             delta = (uint64_t)nr_value_get_i64(d, 0);
    for (int64_t i = 0; i < n; i++)
      nr_store_i64(t, y->data, i, (int64_t)(start + (uint64_t)i * delta));
  } else if (range_in_float(ctx, t)) {
    float start = (float)nr_value_get_f64(s, 0), delta = (float)nr_value_get_f64(d, 0);
    for (int64_t i = 0; i < n; i++)
      nr_store_f64(t, y->data, i, start + (float)i * delta);
  } else {
    double start = nr_value_get_f64(s, 0), delta = nr_value_get_f64(d, 0);
    for (int64_t i = 0; i < n; i++)
      nr_store_f64(t, y->data, i, start + (double)i * delta);
  }
  return NR_OK;
}
