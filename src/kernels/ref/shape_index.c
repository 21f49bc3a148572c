/* shape_index.c - the strided-view walker, integer-list reading and small constant
 * evaluation shared by the shape and index families (see shape_index.h).
 *
 * The walker keeps the innermost dimension as a loop of its own so that a view whose
 * last stride is 1 (most slices, concatenations, broadcasts of rows) moves whole rows
 * with memcpy; everything else goes element by element. */
#include "kernels/ref/shape_index.h"

#include <string.h>

/* Largest output (in elements, all outputs together) evaluated during inference. */
#define NR_SX_FOLD_LIMIT 4096

static void copy_row(char *dst, const char *src, size_t es, int64_t n, int64_t stride) {
  if (stride == 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    memcpy(dst + (size_t)i * es, src + (ptrdiff_t)(i * stride) * (ptrdiff_t)es, es);
}

void nr_sx_view_copy(void *dst, const void *src, size_t es, const nr_sx_view *v) {
  int64_t count = 1;
  for (int d = 0; d < v->rank; d++)
    count *= v->dims[d];
  if (count == 0)
    return;
  const char *s = (const char *)src;
  char *o = (char *)dst;
  if (v->rank == 0) {
    memcpy(o, s + v->offset * (int64_t)es, es);
    return;
  }
  int last = v->rank - 1;
  int64_t row = v->dims[last], idx[NR_MAX_RANK] = {0}, off = v->offset;
  for (int64_t done = 0; done < count; done += row) {
    copy_row(o, s + off * (int64_t)es, es, row, v->strides[last]);
    o += (size_t)row * es;
    for (int d = last - 1; d >= 0; d--) { /* odometer over the outer dims */
      off += v->strides[d];
      if (++idx[d] < v->dims[d])
        break;
      off -= v->strides[d] * v->dims[d];
      idx[d] = 0;
    }
  }
}

bool nr_sx_is_index(nr_dtype t) { return t == NR_DTYPE_INT32 || t == NR_DTYPE_INT64; }

nr_status nr_sx_need_index(nr_op_ctx *ctx, int i, const char *what) {
  const nr_value *v = nr_op_in(ctx, i);
  if (!v)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "input '%s' is missing", what);
  if (v->dtype != NR_DTYPE_UNDEFINED && !nr_sx_is_index(v->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input '%s' must be int32 or int64, not %s",
                      what, nr_dtype_name(v->dtype));
  return NR_OK;
}

static bool int_like(nr_dtype t) {
  switch (t) {
  case NR_DTYPE_INT8:
  case NR_DTYPE_UINT8:
  case NR_DTYPE_INT16:
  case NR_DTYPE_UINT16:
  case NR_DTYPE_INT32:
  case NR_DTYPE_UINT32:
  case NR_DTYPE_INT64:
  case NR_DTYPE_UINT64:
  case NR_DTYPE_BOOL: return true;
  default: return false;
  }
}

nr_status nr_sx_read_ints(nr_op_ctx *ctx, int input, const char *what, int64_t *out,
                          int cap, int *n) {
  const nr_value *v = nr_op_in(ctx, input);
  if (!v || !v->data)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "input '%s' has no data", what);
  if (!int_like(v->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input '%s' must be an integer tensor, not %s",
                      what, nr_dtype_name(v->dtype));
  if (v->rank > 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input '%s' must be 1-D, got rank %d", what,
                      v->rank);
  int64_t count = nr_value_count(v);
  if (count > cap)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input '%s' has %lld elements, at most %d fit",
                      what, (long long)count, cap);
  for (int64_t i = 0; i < count; i++)
    out[i] = nr_value_get_i64(v, i);
  *n = (int)count;
  return NR_OK;
}

/* True when the outputs' shapes are known and, together, small enough to evaluate. */
static bool outputs_small(const nr_op_ctx *ctx) {
  int64_t total = 0;
  for (int i = 0; i < ctx->n_outputs; i++) {
    const nr_value *o = ctx->outputs[i];
    if (!o)
      continue;
    int64_t n = nr_value_count(o);
    if (n < 0 || nr_dtype_size(o->dtype) == 0)
      return false;
    total += n;
  }
  return total <= NR_SX_FOLD_LIMIT;
}

nr_status nr_sx_fold_small(nr_op_ctx *ctx, nr_op_fn run) {
  if (ctx->runtime)
    return NR_OK;
  for (int i = 0; i < ctx->n_inputs; i++)
    if (ctx->inputs[i] && !nr_op_in_known(ctx, i))
      return NR_OK;
  if (!outputs_small(ctx))
    return NR_OK;
  nr_status st = NR_OK;
  for (int i = 0; i < ctx->n_outputs && !st; i++) {
    nr_value *o = ctx->outputs[i];
    if (o)
      st = nr_value_alloc(o, o->dtype, o->rank, o->dims, ctx->err);
  }
  if (!st)
    st = run(ctx);
  if (st)
    for (int i = 0; i < ctx->n_outputs; i++)
      if (ctx->outputs[i])
        nr_value_free(ctx->outputs[i]);
  return st;
}
