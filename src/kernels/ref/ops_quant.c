/* ops_quant.c - reference QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.
 *
 * All three granularities (per-tensor, per-axis, blocked) go through one mapping,
 * quant_map, from an element of x to the element of the scale / zero point that
 * applies to it, so the kernels are a single flat loop. Quantized integers are computed
 * exactly in int64 (round half to even, then saturate); dequantization computes
 * (x - zero_point) exactly and multiplies in float, as the spec's float32 arithmetic.
 * Float8, 4-bit and 2-bit types are outside nnroute's dtype set and are refused with
 * NR_ERR_UNSUPPORTED naming the type. */
#include "ir/op.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdint.h>

/* ---- dtypes --------------------------------------------------------------------- */

/* nr_dtype_name also names the ONNX types nnroute cannot hold (float8, 4-bit, ...). */
static const char *any_dtype_name(int t) { return nr_dtype_name((nr_dtype)t); }

/* Saturation range of a quantized integer type; false if t is not one. */
static bool quant_range(int t, bool allow_int32, int64_t *lo, int64_t *hi) {
  switch (t) {
  case NR_DTYPE_UINT8: *lo = 0; *hi = 255; return true;
  case NR_DTYPE_INT8: *lo = -128; *hi = 127; return true;
  case NR_DTYPE_UINT16: *lo = 0; *hi = 65535; return true;
  case NR_DTYPE_INT16: *lo = -32768; *hi = 32767; return true;
  case NR_DTYPE_INT32:
    *lo = INT32_MIN; *hi = INT32_MAX;
    return allow_int32;
  default: return false;
  }
}

static nr_status check_quant_type(nr_op_ctx *ctx, int t, bool allow_int32,
                                  const char *what) {
  int64_t lo = 0, hi = 0;
  if (quant_range(t, allow_int32, &lo, &hi))
    return NR_OK;
  bool exotic = t > NR_DTYPE_BFLOAT16;
  return nr_op_fail(ctx, exotic ? NR_ERR_UNSUPPORTED : NR_ERR_SHAPE,
                    "%s has dtype %s, which nnroute does not support as a quantized type",
                    what, any_dtype_name(t));
}

static nr_status check_float_type(nr_op_ctx *ctx, int t, const char *what) {
  if (t == NR_DTYPE_FLOAT || t == NR_DTYPE_FLOAT16 || t == NR_DTYPE_BFLOAT16 ||
      t == NR_DTYPE_DOUBLE)
    return NR_OK;
  return nr_op_fail(ctx, t > NR_DTYPE_BFLOAT16 ? NR_ERR_UNSUPPORTED : NR_ERR_SHAPE,
                    "%s has dtype %s; expected a float type", what, any_dtype_name(t));
}

/* ---- scale / zero point mapping ------------------------------------------------- */

typedef struct quant_map {
  int64_t inner;   /* product of x's dims after the axis */
  int64_t dim;     /* x's dim at the axis */
  int64_t sdim;    /* scale's dim at the axis (blocked) */
  int64_t block;   /* block size; 0 unless blocked */
  bool per_tensor;
} quant_map;

static int64_t quant_index(const quant_map *m, int64_t i) {
  if (m->per_tensor)
    return 0;
  int64_t a = (i / m->inner) % m->dim;
  if (!m->block)
    return a;
  int64_t outer = i / (m->inner * m->dim), in = i % m->inner;
  return (outer * m->sdim + a / m->block) * m->inner + in;
}

static nr_status check_blocked(nr_op_ctx *ctx, const nr_value *x, const nr_value *s,
                               int axis, int64_t block) {
  if (s->rank != x->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "blocked scale must have x's rank %d, got %d",
                      x->rank, s->rank);
  for (int d = 0; d < x->rank; d++) {
    if (x->dims[d] < 0 || s->dims[d] < 0)
      continue;
    int64_t want = d == axis ? (x->dims[d] + block - 1) / block : x->dims[d];
    if (s->dims[d] != want)
      return nr_op_fail(ctx, NR_ERR_SHAPE,
                        "blocked scale dim %d is %lld, expected %lld (block_size %lld)", d,
                        (long long)s->dims[d], (long long)want, (long long)block);
  }
  return NR_OK;
}

/* Validates the scale (and zero point) shapes against x and fills m when shapes are
 * known. Static calls with unknown shapes check what they can. */
static nr_status quant_map_init(nr_op_ctx *ctx, const nr_value *x, const nr_value *s,
                                const nr_value *zp, quant_map *m) {
  int64_t block = nr_attr_int(ctx->node, "block_size", 0);
  *m = (quant_map){.inner = 1, .dim = 1, .sdim = 1, .block = 0, .per_tensor = true};
  if (block < 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "block_size %lld is negative", (long long)block);
  if (zp && zp->rank >= 0 && s->rank >= 0) {
    bool same = zp->rank == s->rank;
    for (int d = 0; same && d < s->rank; d++)
      same = zp->dims[d] < 0 || s->dims[d] < 0 || zp->dims[d] == s->dims[d];
    if (!same)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "zero point shape differs from scale shape");
  }
  if (x->rank < 0 || s->rank < 0)
    return NR_OK;
  int64_t scount = nr_value_count(s);
  if (s->rank == 0 || scount == 1)
    return NR_OK; /* one scale for everything, whatever block_size says */
  if (!block && s->rank > 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "scale must be a scalar or 1-D (rank %d) unless "
                      "block_size is set", s->rank);
  int axis;
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 1), x->rank, &axis);
  if (st)
    return st;
  if (x->rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "a scalar x needs a scalar scale");
  if (block && (st = check_blocked(ctx, x, s, axis, block)))
    return st;
  if (!block && s->dims[0] >= 0 && x->dims[axis] >= 0 && s->dims[0] != x->dims[axis])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "per-axis scale has %lld elements, x dim %d is %lld",
                      (long long)s->dims[0], axis, (long long)x->dims[axis]);
  m->per_tensor = false;
  m->block = block;
  m->dim = x->dims[axis];
  m->sdim = s->dims[axis < s->rank ? axis : 0];
  for (int d = axis + 1; d < x->rank; d++)
    m->inner *= x->dims[d];
  return NR_OK;
}

/* ---- QuantizeLinear ------------------------------------------------------------- */

/* The output type: the zero point's, else output_dtype, else uint8. */
static nr_status quantize_out_type(nr_op_ctx *ctx, int *out) {
  const nr_value *zp = nr_op_in(ctx, 2);
  int64_t odt = nr_attr_int(ctx->node, "output_dtype", 0);
  if (zp && zp->dtype != NR_DTYPE_UNDEFINED) {
    if (odt && odt != (int64_t)zp->dtype)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "output_dtype %s does not match zero point %s",
                        any_dtype_name((int)odt), any_dtype_name(zp->dtype));
    *out = zp->dtype;
  } else {
    *out = odt ? (int)odt : NR_DTYPE_UINT8;
  }
  return check_quant_type(ctx, *out, false, "the quantized output");
}

static nr_status quantize_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  const nr_value *x = nr_op_in(ctx, 0), *s = nr_op_in(ctx, 1);
  int out_type = NR_DTYPE_UINT8;
  if (st || (st = quantize_out_type(ctx, &out_type)))
    return st;
  if (x->dtype != NR_DTYPE_INT32 && (st = check_float_type(ctx, x->dtype, "x")))
    return st;
  if (s->dtype != NR_DTYPE_INT32 && (st = check_float_type(ctx, s->dtype, "scale")))
    return st;
  int64_t prec = nr_attr_int(ctx->node, "precision", 0);
  if (prec && (st = check_float_type(ctx, (int)prec, "the precision attribute")))
    return st;
  quant_map m;
  if ((st = quant_map_init(ctx, x, s, nr_op_in(ctx, 2), &m)))
    return st;
  return nr_op_set_output(ctx, 0, (nr_dtype)out_type, x->rank, x->dims);
}

/* x / scale in the precision the spec names: the precision attribute, else the
 * scale's type. Half types divide in float and round the quotient to their grid. */
static double quant_divide(nr_dtype prec, double x, double s) {
  switch (prec) {
  case NR_DTYPE_FLOAT: return (float)x / (float)s;
  case NR_DTYPE_FLOAT16: return nr_f16_to_f32(nr_f32_to_f16((float)x / (float)s));
  case NR_DTYPE_BFLOAT16: return nr_bf16_to_f32(nr_f32_to_bf16((float)x / (float)s));
  default: return x / s;
  }
}

static int64_t saturate(double v, int64_t lo, int64_t hi) {
  if (isnan(v))
    return 0;
  return v < (double)lo ? lo : v > (double)hi ? hi : (int64_t)v;
}

static nr_status quantize_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *s = nr_op_in(ctx, 1), *zp = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  quant_map m;
  nr_status st = quant_map_init(ctx, x, s, zp, &m);
  if (st)
    return st;
  int64_t lo = 0, hi = 0;
  quant_range(y->dtype, false, &lo, &hi);
  int64_t prec = nr_attr_int(ctx->node, "precision", 0);
  nr_dtype p = prec ? (nr_dtype)prec : s->dtype;
  int64_t n = nr_value_count(x);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = quant_index(&m, i);
    double q = nearbyint(quant_divide(p, nr_load_f64(x->dtype, x->data, i),
                                      nr_load_f64(s->dtype, s->data, k)));
    if (zp)
      q += (double)nr_load_i64(zp->dtype, zp->data, k);
    nr_store_i64(y->dtype, y->data, i, saturate(q, lo, hi));
  }
  return NR_OK;
}

/* ---- DequantizeLinear ----------------------------------------------------------- */

static nr_status dequantize_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  const nr_value *x = nr_op_in(ctx, 0), *s = nr_op_in(ctx, 1), *zp = nr_op_in(ctx, 2);
  if (st || (st = check_quant_type(ctx, x->dtype, true, "x")))
    return st;
  if ((st = check_float_type(ctx, s->dtype, "scale")))
    return st;
  if (zp && zp->dtype != x->dtype)
    return nr_op_fail(ctx, zp->dtype > NR_DTYPE_BFLOAT16 ? NR_ERR_UNSUPPORTED : NR_ERR_SHAPE,
                      "zero point dtype %s differs from x dtype %s",
                      any_dtype_name(zp->dtype), any_dtype_name(x->dtype));
  int64_t odt = nr_attr_int(ctx->node, "output_dtype", 0);
  if (odt && (st = check_float_type(ctx, (int)odt, "output_dtype")))
    return st;
  quant_map m;
  if ((st = quant_map_init(ctx, x, s, zp, &m)))
    return st;
  return nr_op_set_output(ctx, 0, odt ? (nr_dtype)odt : s->dtype, x->rank, x->dims);
}

static nr_status dequantize_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *s = nr_op_in(ctx, 1), *zp = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  quant_map m;
  nr_status st = quant_map_init(ctx, x, s, zp, &m);
  if (st)
    return st;
  bool dbl = y->dtype == NR_DTYPE_DOUBLE;
  int64_t n = nr_value_count(x);
  for (int64_t i = 0; i < n; i++) {
    int64_t k = quant_index(&m, i);
    int64_t d = nr_load_i64(x->dtype, x->data, i);
    if (zp)
      d -= nr_load_i64(zp->dtype, zp->data, k);
    double sc = nr_load_f64(s->dtype, s->data, k);
    nr_store_f64(y->dtype, y->data, i, dbl ? (double)d * sc : (float)d * (float)sc);
  }
  return NR_OK;
}

/* ---- DynamicQuantizeLinear ------------------------------------------------------ */

static nr_status dynquant_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  const nr_value *x = nr_op_in(ctx, 0);
  if (st || (st = check_float_type(ctx, x->dtype, "x")))
    return st;
  if ((st = nr_op_set_output(ctx, 0, NR_DTYPE_UINT8, x->rank, x->dims)))
    return st;
  if ((st = nr_op_set_output(ctx, 1, NR_DTYPE_FLOAT, 0, NULL)))
    return st;
  return nr_op_set_output(ctx, 2, NR_DTYPE_UINT8, 0, NULL);
}

/* Float arithmetic throughout, as the spec's float32 formulas. */
static nr_status dynquant_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t n = nr_value_count(x);
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float v = (float)nr_load_f64(x->dtype, x->data, i);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  float izp = 0.0f - lo / scale;
  float zp = nearbyintf(izp < 0.0f ? 0.0f : izp > 255.0f ? 255.0f : izp);
  nr_value *y = nr_op_out(ctx, 0), *ys = nr_op_out(ctx, 1), *yz = nr_op_out(ctx, 2);
  for (int64_t i = 0; i < n && y; i++) {
    float q = nearbyintf((float)nr_load_f64(x->dtype, x->data, i) / scale) + zp;
    ((uint8_t *)y->data)[i] = (uint8_t)saturate(q, 0, 255);
  }
  if (ys)
    nr_store_f64(ys->dtype, ys->data, 0, scale);
  if (yz)
    ((uint8_t *)yz->data)[0] = (uint8_t)zp;
  return NR_OK;
}

const nr_op_def nr_ref_ops_quant[] = {
    {"", "QuantizeLinear", 10, quantize_infer, quantize_run, 0},
    {"", "DequantizeLinear", 10, dequantize_infer, dequantize_run, 0},
    {"", "DynamicQuantizeLinear", 11, dynquant_infer, dynquant_run, 0},
    {0},
};
