/* op_helpers.c - the small helpers operator rules share (see op.h): setting output
 * descriptions, arity and axis checks, broadcasting, and node-prefixed errors. */
#include "ir/op.h"
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

nr_status nr_op_fail(nr_op_ctx *ctx, nr_status status, const char *fmt, ...) {
  char msg[768], node[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return nr_errorf(ctx->err, status, "%s: %s",
                   nr_node_describe(ctx->node, node, sizeof node), msg);
}

nr_status nr_op_set_output(nr_op_ctx *ctx, int i, nr_dtype dtype, int rank,
                           const int64_t *dims) {
  nr_value *o = nr_op_out(ctx, i);
  if (!o)
    return NR_OK;
  if (rank > NR_MAX_RANK)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "output %d would have rank %d (limit %d)",
                      i, rank, NR_MAX_RANK);
  int64_t tmp[NR_MAX_RANK];
  if (rank > 0)
    memcpy(tmp, dims, sizeof(int64_t) * (size_t)rank);
  nr_value_free(o);
  o->dtype = dtype;
  o->rank = rank;
  for (int d = 0; d < NR_MAX_RANK; d++)
    o->dims[d] = d < rank ? tmp[d] : 0;
  return NR_OK;
}

nr_status nr_op_same_as_input(nr_op_ctx *ctx, int i, int j) {
  const nr_value *in = nr_op_in(ctx, j);
  if (!in)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "input %d is missing", j);
  return nr_op_set_output(ctx, i, in->dtype, in->rank, in->dims);
}

nr_status nr_op_check_arity(nr_op_ctx *ctx, int min_in, int max_in) {
  if (ctx->n_inputs < min_in || (max_in >= 0 && ctx->n_inputs > max_in))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "has %d inputs, expected %d to %d",
                      ctx->n_inputs, min_in, max_in);
  for (int i = 0; i < min_in; i++)
    if (!ctx->inputs[i])
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "required input %d is missing", i);
  return NR_OK;
}

bool nr_op_in_known(const nr_op_ctx *ctx, int i) {
  const nr_value *v = nr_op_in(ctx, i);
  return v && nr_value_shape_known(v) && (v->data || nr_value_count(v) == 0);
}

nr_status nr_op_axis(nr_op_ctx *ctx, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= (rank ? rank : 1))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld is out of range for rank %d",
                      (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return NR_OK;
}

nr_status nr_op_broadcast(nr_op_ctx *ctx, const nr_value *a, const nr_value *b,
                          int *rank, int64_t *dims) {
  if (a->rank < 0 || b->rank < 0) {
    *rank = -1;
    return NR_OK;
  }
  int r = a->rank > b->rank ? a->rank : b->rank;
  int64_t out[NR_MAX_RANK]; /* dims may alias a->dims or b->dims */
  for (int d = 0; d < r; d++) {
    int ea = d - (r - a->rank), eb = d - (r - b->rank);
    int64_t x = ea >= 0 ? a->dims[ea] : 1, y = eb >= 0 ? b->dims[eb] : 1;
    if (x == 1)
      out[d] = y;
    else if (y == 1)
      out[d] = x;
    else if (x < 0 || y < 0)
      out[d] = x < 0 ? y : x; /* the known one must be it, or the model is wrong */
    else if (x == y)
      out[d] = x;
    else {
      char sa[128], sb[128];
      return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot broadcast %s with %s",
                        nr_value_describe(a, sa, sizeof sa),
                        nr_value_describe(b, sb, sizeof sb));
    }
  }
  memcpy(dims, out, sizeof(int64_t) * (size_t)r);
  *rank = r;
  return NR_OK;
}
