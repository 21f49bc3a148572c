/* ops_elementwise_unary.c - one-input elementwise operators: math, activations,
 * IsNaN/IsInf, Not, BitwiseNot, and Clip.
 *
 * Each operator is a row of `unary_ops`: which dtype classes it accepts, a function
 * on doubles for float types and, where the spec allows integers, an exact function on
 * int64. Attributes are read once per run into a params struct whose defaults come
 * from the row. Float16 and bfloat16 are computed in double and rounded on store;
 * float32 reads and writes its arrays directly (Relu and Clip get plain loops), which
 * is what keeps real models quick on the reference path. */
#include "kernels/ref/elementwise.h"
#include "kernels/ref/ref_util.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct params {
  double alpha, beta, gamma, lambd, bias;
  bool tanh_approx;            /* Gelu approximate="tanh" */
  bool detect_neg, detect_pos; /* IsInf */
  bool is_unsigned;            /* integer input is unsigned */
} params;

typedef double (*f64_fn)(double x, const params *p);
typedef int64_t (*i64_fn)(int64_t x, const params *p);

typedef struct unary_op {
  const char *op_type;
  unsigned types;  /* NR_EW_* classes accepted */
  f64_fn f;        /* float types (and integers when i is NULL) */
  i64_fn i;        /* integer and bool types, exact */
  params dflt;     /* attribute defaults */
  bool to_bool;    /* output is bool (IsNaN, IsInf) */
} unary_op;

/* ---- float functions ------------------------------------------------------------ */

static double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double f_relu(double x, const params *p) { return x < 0 ? 0.0 : x; }
static double f_leaky(double x, const params *p) { return x < 0 ? p->alpha * x : x; }
static double f_sigmoid(double x, const params *p) { return sigmoid(x); }
static double f_hardsigmoid(double x, const params *p) {
  return fmax(0.0, fmin(1.0, p->alpha * x + p->beta));
}
static double f_hardswish(double x, const params *p) {
  return x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
}
static double f_tanh(double x, const params *p) { return tanh(x); }
static double f_erf(double x, const params *p) { return erf(x); }
static double f_gelu(double x, const params *p) {
  if (p->tanh_approx) {
    double k = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + erf(x / M_SQRT2));
}
static double f_softplus(double x, const params *p) { return softplus(x); }
static double f_softsign(double x, const params *p) { return x / (1.0 + fabs(x)); }
static double f_elu(double x, const params *p) { return x < 0 ? p->alpha * expm1(x) : x; }
static double f_selu(double x, const params *p) {
  return p->gamma * (x > 0 ? x : p->alpha * expm1(x));
}
static double f_celu(double x, const params *p) {
  return fmax(0.0, x) + fmin(0.0, p->alpha * expm1(x / p->alpha));
}
static double f_thresholded(double x, const params *p) { return x > p->alpha ? x : 0.0; }
static double f_shrink(double x, const params *p) {
  return x < -p->lambd ? x + p->bias : x > p->lambd ? x - p->bias : 0.0;
}
static double f_mish(double x, const params *p) { return x * tanh(softplus(x)); }
static double f_swish(double x, const params *p) { return x * sigmoid(p->alpha * x); }
static double f_exp(double x, const params *p) { return exp(x); }
static double f_log(double x, const params *p) { return log(x); }
static double f_sqrt(double x, const params *p) { return sqrt(x); }
static double f_reciprocal(double x, const params *p) { return 1.0 / x; }
static double f_abs(double x, const params *p) { return fabs(x); }
static double f_neg(double x, const params *p) { return -x; }
static double f_floor(double x, const params *p) { return floor(x); }
static double f_ceil(double x, const params *p) { return ceil(x); }
static double f_round(double x, const params *p) { return nearbyint(x); } /* ties even */
static double f_sign(double x, const params *p) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* keeps 0 and NaN */
}
static double f_sin(double x, const params *p) { return sin(x); }
static double f_cos(double x, const params *p) { return cos(x); }
static double f_tan(double x, const params *p) { return tan(x); }
static double f_asin(double x, const params *p) { return asin(x); }
static double f_acos(double x, const params *p) { return acos(x); }
static double f_atan(double x, const params *p) { return atan(x); }
static double f_sinh(double x, const params *p) { return sinh(x); }
static double f_cosh(double x, const params *p) { return cosh(x); }
static double f_asinh(double x, const params *p) { return asinh(x); }
static double f_acosh(double x, const params *p) { return acosh(x); }
static double f_atanh(double x, const params *p) { return atanh(x); }
static double f_isnan(double x, const params *p) { return isnan(x); }
static double f_isinf(double x, const params *p) {
  return isinf(x) && ((x > 0 && p->detect_pos) || (x < 0 && p->detect_neg));
}

/* ---- integer functions (two's complement wrap, as the hardware does) ------------ */

static int64_t i_relu(int64_t x, const params *p) { return x < 0 ? 0 : x; }
static int64_t i_abs(int64_t x, const params *p) {
  return (x < 0 && !p->is_unsigned) ? (int64_t)(0 - (uint64_t)x) : x;
}
static int64_t i_neg(int64_t x, const params *p) { return (int64_t)(0 - (uint64_t)x); }
static int64_t i_sign(int64_t x, const params *p) {
  if (p->is_unsigned)
    return x != 0;
  return x > 0 ? 1 : x < 0 ? -1 : 0;
}
static int64_t i_not(int64_t x, const params *p) { return !x; }
static int64_t i_bitnot(int64_t x, const params *p) { return ~x; }

#define FL NR_EW_FLOAT
#define SI NR_EW_SINT
#define UI NR_EW_UINT

static const unary_op unary_ops[] = {
    {"Relu", FL | SI, f_relu, i_relu},
    {"LeakyRelu", FL, f_leaky, NULL, {.alpha = 0.01f}},
    {"Sigmoid", FL, f_sigmoid},
    {"HardSigmoid", FL, f_hardsigmoid, NULL, {.alpha = 0.2f, .beta = 0.5f}},
    {"HardSwish", FL, f_hardswish},
    {"Tanh", FL, f_tanh},
    {"Erf", FL, f_erf},
    {"Gelu", FL, f_gelu},
    {"Softplus", FL, f_softplus},
    {"Softsign", FL, f_softsign},
    {"Elu", FL, f_elu, NULL, {.alpha = 1.0}},
    {"Selu", FL, f_selu, NULL, {.alpha = 1.67326319217681884765625f,
                                .gamma = 1.05070102214813232421875f}},
    {"Celu", FL, f_celu, NULL, {.alpha = 1.0}},
    {"ThresholdedRelu", FL, f_thresholded, NULL, {.alpha = 1.0}},
    {"Shrink", FL | SI | UI, f_shrink, NULL, {.lambd = 0.5}},
    {"Mish", FL, f_mish},
    {"Swish", FL, f_swish, NULL, {.alpha = 1.0}},
    {"Exp", FL, f_exp},
    {"Log", FL, f_log},
    {"Sqrt", FL, f_sqrt},
    {"Reciprocal", FL, f_reciprocal},
    {"Abs", FL | SI | UI, f_abs, i_abs},
    {"Neg", FL | SI, f_neg, i_neg},
    {"Floor", FL, f_floor},
    {"Ceil", FL, f_ceil},
    {"Round", FL, f_round},
    {"Sign", FL | SI | UI, f_sign, i_sign},
    {"Sin", FL, f_sin},
    {"Cos", FL, f_cos},
    {"Tan", FL, f_tan},
    {"Asin", FL, f_asin},
    {"Acos", FL, f_acos},
    {"Atan", FL, f_atan},
    {"Sinh", FL, f_sinh},
    {"Cosh", FL, f_cosh},
    {"Asinh", FL, f_asinh},
    {"Acosh", FL, f_acosh},
    {"Atanh", FL, f_atanh},
    {"IsNaN", FL, f_isnan, NULL, {0}, true},
    {"IsInf", FL, f_isinf, NULL, {.detect_neg = true, .detect_pos = true}, true},
    {"Not", NR_EW_BOOL, NULL, i_not},
    {"BitwiseNot", SI | UI, NULL, i_bitnot},
};

static const unary_op *find_unary(const char *op_type) {
  for (size_t k = 0; k < sizeof unary_ops / sizeof unary_ops[0]; k++)
    if (!strcmp(unary_ops[k].op_type, op_type))
      return &unary_ops[k];
  return NULL;
}

static nr_status read_params(nr_op_ctx *ctx, const unary_op *op, params *p) {
  const nr_node *n = ctx->node;
  *p = op->dflt;
  p->alpha = nr_attr_float(n, "alpha", (float)p->alpha);
  p->beta = nr_attr_float(n, "beta", (float)p->beta);
  p->gamma = nr_attr_float(n, "gamma", (float)p->gamma);
  p->lambd = nr_attr_float(n, "lambd", (float)p->lambd);
  p->bias = nr_attr_float(n, "bias", (float)p->bias);
  p->detect_neg = nr_attr_int(n, "detect_negative", p->detect_neg) != 0;
  p->detect_pos = nr_attr_int(n, "detect_positive", p->detect_pos) != 0;
  const char *approx = nr_attr_string(n, "approximate", "none");
  p->tanh_approx = !strcmp(approx, "tanh");
  if (!p->tanh_approx && strcmp(approx, "none"))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute approximate='%s' is not "
                      "'none' or 'tanh'", approx);
  if (!strcmp(op->op_type, "Celu") && p->alpha == 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute alpha must not be 0");
  return NR_OK;
}

nr_status nr_ew_unary_infer(nr_op_ctx *ctx) {
  const unary_op *op = find_unary(ctx->node->op_type);
  if (!op)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "no unary kernel for this op type");
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = nr_ew_check_dtype(ctx, 0, op->types);
  params p;
  if (!st)
    st = read_params(ctx, op, &p); /* rejects bad attribute values statically */
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  return nr_op_set_output(ctx, 0, op->to_bool ? NR_DTYPE_BOOL : x->dtype, x->rank,
                          x->dims);
}

/* float32 in, float32 out: the hot path of activations in real models. */
static void run_f32(const unary_op *op, const params *p, const float *x, float *y,
                    int64_t n) {
  if (op->f == f_relu) {
    for (int64_t i = 0; i < n; i++)
      y[i] = x[i] < 0.0f ? 0.0f : x[i];
    return;
  }
  for (int64_t i = 0; i < n; i++)
    y[i] = (float)op->f(x[i], p);
}

static void run_generic(const unary_op *op, const params *p, const nr_value *x,
                        nr_value *y, int64_t n) {
  bool exact = op->i && nr_ew_class(x->dtype) != NR_EW_FLOAT;
  for (int64_t i = 0; i < n; i++) {
    if (exact)
      nr_store_i64(y->dtype, y->data, i, op->i(nr_load_i64(x->dtype, x->data, i), p));
    else
      nr_store_f64(y->dtype, y->data, i, op->f(nr_load_f64(x->dtype, x->data, i), p));
  }
}

nr_status nr_ew_unary_run(nr_op_ctx *ctx) {
  const unary_op *op = find_unary(ctx->node->op_type);
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  if (!op || !x || !y)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "unary kernel called without its operands");
  params p;
  nr_status st = read_params(ctx, op, &p);
  if (st)
    return st;
  p.is_unsigned = nr_ew_class(x->dtype) == NR_EW_UINT;
  int64_t n = nr_value_count(x);
  if (x->dtype == NR_DTYPE_FLOAT && y->dtype == NR_DTYPE_FLOAT)
    run_f32(op, &p, x->data, y->data, n);
  else
    run_generic(op, &p, x, y, n);
  return NR_OK;
}

/* ---- Clip ----------------------------------------------------------------------- */

/* Bounds come from attributes before opset 11 and from optional scalar inputs after. */
nr_status nr_ew_clip_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, ctx->node->opset < 11 ? 1 : 3);
  if (!st)
    st = nr_ew_check_dtype(ctx, 0, ctx->node->opset < 12 ? FL : FL | SI | UI);
  for (int i = 1; i < 3 && !st; i++) {
    const nr_value *b = nr_op_in(ctx, i);
    st = nr_ew_check_same_dtype(ctx, 0, i);
    if (!st && b && nr_value_count(b) > 1)
      st = nr_op_fail(ctx, NR_ERR_SHAPE, "input %d (%s) must be a scalar", i,
                      i == 1 ? "min" : "max");
  }
  return st ? st : nr_op_same_as_input(ctx, 0, 0);
}

static void clip_f32(const float *x, float *y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    v = v < lo ? lo : v;
    y[i] = v > hi ? hi : v;
  }
}

static void clip_f64(const nr_value *x, nr_value *y, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) {
    double v = nr_load_f64(x->dtype, x->data, i);
    v = v < lo ? lo : v;
    nr_store_f64(y->dtype, y->data, i, v > hi ? hi : v);
  }
}

/* Integers compare exactly; uint64 compares as unsigned. */
static void clip_int(const nr_value *x, nr_value *y, int64_t n, const nr_value *lo,
                     const nr_value *hi) {
  bool u = x->dtype == NR_DTYPE_UINT64;
  int64_t l = lo ? nr_load_i64(lo->dtype, lo->data, 0) : (u ? 0 : INT64_MIN);
  int64_t h = hi ? nr_load_i64(hi->dtype, hi->data, 0) : (u ? -1 : INT64_MAX);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = nr_load_i64(x->dtype, x->data, i);
    if (u ? (uint64_t)v < (uint64_t)l : v < l)
      v = l;
    if (u ? (uint64_t)v > (uint64_t)h : v > h)
      v = h;
    nr_store_i64(y->dtype, y->data, i, v);
  }
}

static double clip_bound(const nr_op_ctx *ctx, int i, const char *attr, double dflt) {
  const nr_value *b = nr_op_in(ctx, i);
  if (ctx->node->opset < 11) /* attribute defaults: the float32 limits */
    return nr_attr_float(ctx->node, attr, dflt < 0 ? -FLT_MAX : FLT_MAX);
  if (b && nr_value_count(b) == 1)
    return nr_load_f64(b->dtype, b->data, 0);
  return dflt;
}

nr_status nr_ew_clip_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t n = nr_value_count(x);
  for (int i = 1; i < 3 && ctx->node->opset >= 11; i++) {
    const nr_value *b = nr_op_in(ctx, i);
    if (b && nr_value_count(b) != 1)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d must hold one value", i);
  }
  if (nr_ew_class(x->dtype) != NR_EW_FLOAT) {
    clip_int(x, y, n, nr_op_in(ctx, 1), nr_op_in(ctx, 2));
    return NR_OK;
  }
  double lo = clip_bound(ctx, 1, "min", -INFINITY);
  double hi = clip_bound(ctx, 2, "max", INFINITY);
  if (x->dtype == NR_DTYPE_FLOAT)
    clip_f32(x->data, y->data, n, (float)lo, (float)hi);
  else
    clip_f64(x, y, n, lo, hi);
  return NR_OK;
}
