/* ops_elementwise_cast.c - Cast and CastLike: element type conversion between every
 * dtype nnroute stores (floats incl. float16/bfloat16, integers, bool).
 *
 * Conversions follow the spec and numpy: float to integer truncates toward zero (out of
 * range is undefined by the spec; we saturate to int64, then wrap to the width),
 * anything to bool is `x != 0` (NaN is true), integer to integer wraps, and integers
 * become float32 with one rounding. Strings, float8, 4- and 2-bit types are documented
 * as unsupported; the `saturate` and `round_mode` attributes only concern float8 types
 * and so have nothing to act on. */
#include "kernels/ref/elementwise.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <string.h>

/* Names of TensorProto types, also those nnroute cannot hold, for messages. */
static const char *onnx_type_name(int64_t t) {
  return t >= 0 && t <= 28 ? nr_dtype_name((nr_dtype)t) : "unknown";
}

static bool storable(int64_t t) {
  return t > 0 && t <= NR_DTYPE_BFLOAT16 && nr_dtype_size((nr_dtype)t) > 0 &&
         t != NR_DTYPE_STRING && t != NR_DTYPE_COMPLEX64 && t != NR_DTYPE_COMPLEX128;
}

/* Cast-1 names its target as a string ("FLOAT", "INT64", ...). */
static int64_t type_from_name(const char *s) {
  static const struct { const char *name; nr_dtype t; } map[] = {
      {"FLOAT", NR_DTYPE_FLOAT}, {"UINT8", NR_DTYPE_UINT8}, {"INT8", NR_DTYPE_INT8},
      {"UINT16", NR_DTYPE_UINT16}, {"INT16", NR_DTYPE_INT16},
      {"INT32", NR_DTYPE_INT32}, {"INT64", NR_DTYPE_INT64}, {"STRING", NR_DTYPE_STRING},
      {"BOOL", NR_DTYPE_BOOL}, {"FLOAT16", NR_DTYPE_FLOAT16},
      {"DOUBLE", NR_DTYPE_DOUBLE}, {"UINT32", NR_DTYPE_UINT32},
      {"UINT64", NR_DTYPE_UINT64}, {"BFLOAT16", NR_DTYPE_BFLOAT16}};
  for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
    if (!strcmp(map[k].name, s))
      return map[k].t;
  return -1;
}

/* The target dtype: Cast's `to`, or CastLike's second input (UNDEFINED if unknown). */
static nr_status target_dtype(nr_op_ctx *ctx, nr_dtype *out) {
  int64_t t;
  if (!strcmp(ctx->node->op_type, "CastLike")) {
    t = nr_op_in(ctx, 1)->dtype;
    if (t == NR_DTYPE_UNDEFINED) {
      *out = NR_DTYPE_UNDEFINED;
      return NR_OK;
    }
  } else {
    const nr_attr *to = nr_node_attr(ctx->node, "to");
    if (!to)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute 'to' is missing");
    t = to->type == NR_ATTR_STRING ? type_from_name(to->s) : to->i;
    if (t < 0)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute to='%s' names no type",
                        to->s);
  }
  if (!storable(t))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "casting to %s (type %lld) is not "
                      "supported", onnx_type_name(t), (long long)t);
  *out = (nr_dtype)t;
  return NR_OK;
}

nr_status nr_ew_cast_infer(nr_op_ctx *ctx) {
  bool like = !strcmp(ctx->node->op_type, "CastLike");
  nr_status st = nr_op_check_arity(ctx, like ? 2 : 1, like ? 2 : 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype != NR_DTYPE_UNDEFINED && !storable(x->dtype))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "casting from %s (type %d) is not "
                      "supported", onnx_type_name(x->dtype), (int)x->dtype);
  nr_dtype to = NR_DTYPE_UNDEFINED;
  if ((st = target_dtype(ctx, &to)))
    return st;
  return nr_op_set_output(ctx, 0, to, x->rank, x->dims);
}

/* double -> float rounded to odd: the float keeps a sticky bit, so rounding it on to
 * float16 or bfloat16 gives the correctly rounded result of the double (no double
 * rounding at ties). */
static float to_float_odd(double v) {
  float f = (float)v;
  if (!isfinite(f) || (double)f == v)
    return f;
  if (fabs((double)f) > fabs(v))
    f = nextafterf(f, 0.0f);
  uint32_t bits;
  memcpy(&bits, &f, 4);
  bits |= 1u;
  memcpy(&f, &bits, 4);
  return f;
}

static void store_half(nr_dtype t, void *data, int64_t i, double v) {
  float f = to_float_odd(v);
  ((uint16_t *)data)[i] = t == NR_DTYPE_FLOAT16 ? nr_f32_to_f16(f) : nr_f32_to_bf16(f);
}

static void convert(const nr_value *x, nr_value *y, int64_t n) {
  unsigned from = nr_ew_class(x->dtype), to = nr_ew_class(y->dtype);
  bool half = y->dtype == NR_DTYPE_FLOAT16 || y->dtype == NR_DTYPE_BFLOAT16;
  for (int64_t i = 0; i < n; i++) {
    if (half) {
      store_half(y->dtype, y->data, i, nr_load_f64(x->dtype, x->data, i));
    } else if (from == NR_EW_FLOAT || (to == NR_EW_FLOAT && y->dtype != NR_DTYPE_FLOAT)) {
      nr_store_f64(y->dtype, y->data, i, nr_load_f64(x->dtype, x->data, i));
    } else if (to == NR_EW_FLOAT) { /* integer -> float32, rounded once */
      int64_t v = nr_load_i64(x->dtype, x->data, i);
      ((float *)y->data)[i] =
          x->dtype == NR_DTYPE_UINT64 ? (float)(uint64_t)v : (float)v;
    } else {
      nr_store_i64(y->dtype, y->data, i, nr_load_i64(x->dtype, x->data, i));
    }
  }
}

nr_status nr_ew_cast_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  if (!x || !y)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "Cast kernel called without its operands");
  int64_t n = nr_value_count(x);
  if (x->dtype == y->dtype) {
    memcpy(y->data, x->data, nr_value_nbytes(x));
    return NR_OK;
  }
  convert(x, y, n);
  return NR_OK;
}
