/* test_elementwise.c - unit tests of the elementwise operator family through
 * nr_ref_exec_node(): activations against formulas written out here in float, exact
 * integer semantics (division, modulo, shifts, wrap, uint64 order), broadcasting on
 * seeded random shapes against a naive index computation, Cast rounding, static shape
 * inference with unknown dims, and the failure paths (wrong dtypes and shapes,
 * unsupported types). */
#include "unit.h"
#include "op_test.h"

#include "ir/op.h"
#include "kernels/ref/executor.h"
#include "kernels/ref/ref_util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers -------------------------------------------------------------------- */

static nr_value tensor(nr_dtype t, int rank, const int64_t *dims, void *data) {
  nr_value v = {.dtype = t, .rank = rank, .data = data};
  for (int d = 0; d < rank; d++)
    v.dims[d] = dims[d];
  return v;
}

static nr_value vec(nr_dtype t, int64_t n, void *data) { return tensor(t, 1, &n, data); }

static nr_status run_op(const char *op, int opset, int n_attrs, const nr_attr *attrs,
                        int n_in, const nr_value *const *ins, nr_value *out,
                        nr_error *err) {
  memset(out, 0, sizeof *out);
  return nr_ref_exec_node(op, "", opset, n_attrs, attrs, n_in, ins, 1, out, err);
}

static nr_status run1(const char *op, int opset, int n_attrs, const nr_attr *attrs,
                      nr_value x, nr_value *out, nr_error *err) {
  return run_op(op, opset, n_attrs, attrs, 1, (const nr_value *[]){&x}, out, err);
}

static nr_status run2(const char *op, int opset, int n_attrs, const nr_attr *attrs,
                      nr_value a, nr_value b, nr_value *out, nr_error *err) {
  return run_op(op, opset, n_attrs, attrs, 2, (const nr_value *[]){&a, &b}, out, err);
}

static uint32_t rng_state;
static float frand(float lo, float hi) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return lo + (hi - lo) * (float)(rng_state >> 8) / 16777216.0f;
}

static bool close_f(double got, double want, double tol) {
  if (isnan(want))
    return isnan(got);
  return fabs(got - want) <= tol * (1.0 + fabs(want));
}

/* ---- unary activations ---------------------------------------------------------- */

typedef struct act_case {
  const char *op;
  float (*ref)(float x);
  int n_attrs;
  nr_attr attrs[2];
} act_case;

static float r_relu(float x) { return x > 0 ? x : 0; }
static float r_sigmoid(float x) { return 1 / (1 + expf(-x)); }
static float r_tanh(float x) { return (expf(x) - expf(-x)) / (expf(x) + expf(-x)); }
static float r_leaky(float x) { return x >= 0 ? x : 0.1f * x; }
static float r_elu(float x) { return x >= 0 ? x : 2.0f * (expf(x) - 1); }
static float r_selu(float x) {
  return x > 0 ? 1.0507009873554805f * x : 1.0507009873554805f * 1.6732632423543772f *
                                               (expf(x) - 1);
}
static float r_hardsigmoid(float x) { return fmaxf(0, fminf(1, 0.2f * x + 0.5f)); }
static float r_hardswish(float x) { return x * fmaxf(0, fminf(1, x / 6 + 0.5f)); }
static float r_gelu(float x) { return x * 0.5f * (1 + erff(x / sqrtf(2))); }
static float r_gelu_tanh(float x) {
  return 0.5f * x * (1 + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
static float r_softplus(float x) { return logf(1 + expf(x)); }
static float r_softsign(float x) { return x / (1 + fabsf(x)); }
static float r_mish(float x) { return x * tanhf(logf(1 + expf(x))); }
static float r_swish(float x) { return x / (1 + expf(-0.5f * x)); }
static float r_celu(float x) { return x > 0 ? x : 1.5f * (expf(x / 1.5f) - 1); }
static float r_thresh(float x) { return x > 1.0f ? x : 0; }
static float r_shrink(float x) { return x < -1 ? x + 0.25f : x > 1 ? x - 0.25f : 0; }

NR_TEST(elementwise_activations_f32) {
  const act_case cases[] = {
      {"Relu", r_relu},
      {"Sigmoid", r_sigmoid},
      {"Tanh", r_tanh},
      {"LeakyRelu", r_leaky, 1, {attr_f("alpha", 0.1f)}},
      {"Elu", r_elu, 1, {attr_f("alpha", 2.0f)}},
      {"Selu", r_selu},
      {"HardSigmoid", r_hardsigmoid},
      {"HardSwish", r_hardswish},
      {"Gelu", r_gelu},
      {"Gelu", r_gelu_tanh, 1, {attr_s("approximate", "tanh")}},
      {"Softplus", r_softplus},
      {"Softsign", r_softsign},
      {"Mish", r_mish},
      {"Swish", r_swish, 1, {attr_f("alpha", 0.5f)}},
      {"Celu", r_celu, 1, {attr_f("alpha", 1.5f)}},
      {"ThresholdedRelu", r_thresh},
      {"Shrink", r_shrink, 2, {attr_f("lambd", 1.0f), attr_f("bias", 0.25f)}},
  };
  rng_state = 1234;
  float x[257];
  for (int i = 0; i < 257; i++)
    x[i] = frand(-6, 6);
  x[0] = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    nr_value y;
    nr_error err = {0};
    nr_status st = run1(cases[c].op, 24, cases[c].n_attrs, cases[c].attrs,
                        vec(NR_DTYPE_FLOAT, 257, x), &y, &err);
    CHECK(st == NR_OK, "%s: %s (seed 1234)", cases[c].op, err.message);
    if (st)
      continue;
    CHECK(y.dtype == NR_DTYPE_FLOAT && y.rank == 1 && y.dims[0] == 257);
    const float *yd = y.data;
    for (int i = 0; i < 257; i++)
      if (!close_f(yd[i], cases[c].ref(x[i]), 1e-5)) {
        CHECK(false, "%s(%g) = %g, want %g (seed 1234)", cases[c].op, x[i], yd[i],
              cases[c].ref(x[i]));
        break;
      }
    nr_value_free(&y);
  }
}

NR_TEST(elementwise_unary_float16_and_double) {
  uint16_t h[4] = {nr_f32_to_f16(-2.0f), nr_f32_to_f16(0.5f), nr_f32_to_f16(3.0f),
                   nr_f32_to_f16(-0.25f)};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run1("Exp", 13, 0, NULL, vec(NR_DTYPE_FLOAT16, 4, h), &y, &err) == NR_OK,
          "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_FLOAT16);
  const float want[4] = {expf(-2.0f), expf(0.5f), expf(3.0f), expf(-0.25f)};
  for (int i = 0; i < 4; i++)
    CHECK(close_f(nr_f16_to_f32(((uint16_t *)y.data)[i]), want[i], 1e-3), "i=%d", i);
  nr_value_free(&y);

  double d[3] = {0.25, -0.5, 0.9};
  REQUIRE(run1("Asin", 22, 0, NULL, vec(NR_DTYPE_DOUBLE, 3, d), &y, &err) == NR_OK);
  for (int i = 0; i < 3; i++)
    CHECK(fabs(((double *)y.data)[i] - asin(d[i])) < 1e-15);
  nr_value_free(&y);
}

NR_TEST(elementwise_round_half_even_and_sign) {
  float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f, -2.6f, NAN};
  const float want_round[8] = {0, 2, 2, -0.0f, -2, 2, -3, NAN};
  const float want_sign[8] = {1, 1, 1, -1, -1, 1, -1, NAN};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run1("Round", 11, 0, NULL, vec(NR_DTYPE_FLOAT, 8, x), &y, &err) == NR_OK);
  for (int i = 0; i < 8; i++)
    CHECK(close_f(((float *)y.data)[i], want_round[i], 0), "Round(%g)", x[i]);
  nr_value_free(&y);
  REQUIRE(run1("Sign", 13, 0, NULL, vec(NR_DTYPE_FLOAT, 8, x), &y, &err) == NR_OK);
  for (int i = 0; i < 8; i++)
    CHECK(close_f(((float *)y.data)[i], want_sign[i], 0), "Sign(%g)", x[i]);
  nr_value_free(&y);
}

NR_TEST(elementwise_unary_integers) {
  int8_t x[5] = {-128, -3, 0, 5, 127};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run1("Abs", 13, 0, NULL, vec(NR_DTYPE_INT8, 5, x), &y, &err) == NR_OK);
  const int8_t abs_want[5] = {-128, 3, 0, 5, 127}; /* -128 wraps, as in numpy */
  CHECK(!memcmp(y.data, abs_want, 5));
  nr_value_free(&y);
  REQUIRE(run1("Neg", 13, 0, NULL, vec(NR_DTYPE_INT8, 5, x), &y, &err) == NR_OK);
  const int8_t neg_want[5] = {-128, 3, 0, -5, -127};
  CHECK(!memcmp(y.data, neg_want, 5));
  nr_value_free(&y);
  REQUIRE(run1("Sign", 13, 0, NULL, vec(NR_DTYPE_INT8, 5, x), &y, &err) == NR_OK);
  const int8_t sign_want[5] = {-1, -1, 0, 1, 1};
  CHECK(!memcmp(y.data, sign_want, 5));
  nr_value_free(&y);

  uint64_t u[2] = {UINT64_MAX, 0};
  REQUIRE(run1("Sign", 13, 0, NULL, vec(NR_DTYPE_UINT64, 2, u), &y, &err) == NR_OK);
  CHECK(((uint64_t *)y.data)[0] == 1 && ((uint64_t *)y.data)[1] == 0);
  nr_value_free(&y);

  int32_t r[3] = {-7, 0, 9};
  REQUIRE(run1("Relu", 14, 0, NULL, vec(NR_DTYPE_INT32, 3, r), &y, &err) == NR_OK);
  CHECK(((int32_t *)y.data)[0] == 0 && ((int32_t *)y.data)[2] == 9);
  nr_value_free(&y);

  uint16_t b[2] = {0x00ff, 0xf0f0};
  REQUIRE(run1("BitwiseNot", 18, 0, NULL, vec(NR_DTYPE_UINT16, 2, b), &y, &err) ==
          NR_OK);
  CHECK(((uint16_t *)y.data)[0] == 0xff00 && ((uint16_t *)y.data)[1] == 0x0f0f);
  nr_value_free(&y);

  uint8_t nb[3] = {1, 0, 1};
  REQUIRE(run1("Not", 1, 0, NULL, vec(NR_DTYPE_BOOL, 3, nb), &y, &err) == NR_OK);
  CHECK(y.dtype == NR_DTYPE_BOOL && !memcmp(y.data, (uint8_t[]){0, 1, 0}, 3));
  nr_value_free(&y);
}

NR_TEST(elementwise_isnan_isinf) {
  float x[5] = {INFINITY, -INFINITY, NAN, 1.0f, -FLT_MAX};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run1("IsNaN", 13, 0, NULL, vec(NR_DTYPE_FLOAT, 5, x), &y, &err) == NR_OK);
  CHECK(y.dtype == NR_DTYPE_BOOL && !memcmp(y.data, (uint8_t[]){0, 0, 1, 0, 0}, 5));
  nr_value_free(&y);
  REQUIRE(run1("IsInf", 20, 0, NULL, vec(NR_DTYPE_FLOAT, 5, x), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){1, 1, 0, 0, 0}, 5));
  nr_value_free(&y);
  nr_attr a = attr_i("detect_positive", 0);
  REQUIRE(run1("IsInf", 20, 1, &a, vec(NR_DTYPE_FLOAT, 5, x), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){0, 1, 0, 0, 0}, 5));
  nr_value_free(&y);
}

/* ---- Clip ----------------------------------------------------------------------- */

NR_TEST(elementwise_clip) {
  float x[5] = {-3, -0.5f, 0.25f, 2, 9};
  nr_value y;
  nr_error err = {0};
  nr_attr a[2] = {attr_f("min", -1), attr_f("max", 1)};
  REQUIRE(run1("Clip", 6, 2, a, vec(NR_DTYPE_FLOAT, 5, x), &y, &err) == NR_OK,
          "%s", err.message);
  CHECK(!memcmp(y.data, (float[]){-1, -0.5f, 0.25f, 1, 1}, 20));
  nr_value_free(&y);

  float lo = 2, hi = 1; /* min > max: everything becomes max, like numpy.clip */
  nr_value xv = vec(NR_DTYPE_FLOAT, 5, x), lv = tensor(NR_DTYPE_FLOAT, 0, NULL, &lo),
           hv = tensor(NR_DTYPE_FLOAT, 0, NULL, &hi);
  REQUIRE(run_op("Clip", 13, 0, NULL, 3, (const nr_value *[]){&xv, &lv, &hv}, &y,
                 &err) == NR_OK, "%s", err.message);
  for (int i = 0; i < 5; i++)
    CHECK(((float *)y.data)[i] == 1.0f);
  nr_value_free(&y);

  int8_t xi[4] = {-128, -5, 5, 127}, mn = -4;
  nr_value xiv = vec(NR_DTYPE_INT8, 4, xi), mv = tensor(NR_DTYPE_INT8, 0, NULL, &mn);
  REQUIRE(run_op("Clip", 13, 0, NULL, 3, (const nr_value *[]){&xiv, &mv, NULL}, &y,
                 &err) == NR_OK, "%s", err.message);
  CHECK(!memcmp(y.data, (int8_t[]){-4, -4, 5, 127}, 4));
  nr_value_free(&y);
}

/* ---- binary arithmetic and broadcasting ----------------------------------------- */

/* Offset of output element i in an input of shape (r, d), aligned to (orank, odims). */
static int64_t naive_offset(int64_t i, int orank, const int64_t *odims, int r,
                            const int64_t *d) {
  int64_t off = 0, stride = 1;
  for (int k = orank - 1, e = r - 1; k >= 0; k--, e--) {
    int64_t coord = i % odims[k];
    i /= odims[k];
    if (e >= 0) {
      if (d[e] != 1)
        off += coord * stride;
      stride *= d[e];
    }
  }
  return off;
}

NR_TEST(elementwise_broadcast_random_f32) {
  static const int64_t shapes[][2][4] = {
      /* {rank_a, dims...}, {rank_b, dims...} packed as [0] = rank */
      {{3, 2, 3, 4}, {2, 3, 1}},   {{3, 2, 3, 4}, {1, 4}},   {{3, 2, 1, 4}, {3, 1, 3, 1}},
      {{1, 5}, {3, 2, 1, 5}},      {{3, 2, 3, 4}, {3, 2, 3, 4}}, {{0}, {3, 2, 3, 4}},
      {{3, 1, 3, 1}, {3, 2, 1, 4}}, {{2, 7, 1}, {1, 1}},
  };
  const char *ops[4] = {"Add", "Sub", "Mul", "Div"};
  uint32_t seed = 99;
  rng_state = seed;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int ra = (int)shapes[s][0][0], rb = (int)shapes[s][1][0];
    const int64_t *da = &shapes[s][0][1], *db = &shapes[s][1][1];
    float a[64], b[64];
    for (int i = 0; i < 64; i++)
      a[i] = frand(-4, 4), b[i] = frand(0.5f, 3);
    for (int o = 0; o < 4; o++) {
      nr_value y;
      nr_error err = {0};
      nr_status st = run2(ops[o], 14, 0, NULL, tensor(NR_DTYPE_FLOAT, ra, da, a),
                          tensor(NR_DTYPE_FLOAT, rb, db, b), &y, &err);
      REQUIRE(st == NR_OK, "%s case %zu: %s", ops[o], s, err.message);
      int64_t n = nr_value_count(&y);
      for (int64_t i = 0; i < n; i++) {
        float x1 = a[naive_offset(i, y.rank, y.dims, ra, da)];
        float x2 = b[naive_offset(i, y.rank, y.dims, rb, db)];
        float want = o == 0 ? x1 + x2 : o == 1 ? x1 - x2 : o == 2 ? x1 * x2 : x1 / x2;
        if (((float *)y.data)[i] != want) {
          CHECK(false, "%s case %zu element %lld (seed %u)", ops[o], s, (long long)i,
                seed);
          break;
        }
      }
      nr_value_free(&y);
    }
  }
}

NR_TEST(elementwise_add_double_and_float16) {
  double a[3] = {1.5, -2.25, 1e300}, b = 0.25;
  nr_value y;
  nr_error err = {0};
  REQUIRE(run2("Add", 14, 0, NULL, vec(NR_DTYPE_DOUBLE, 3, a),
               tensor(NR_DTYPE_DOUBLE, 0, NULL, &b), &y, &err) == NR_OK);
  CHECK(((double *)y.data)[0] == 1.75 && ((double *)y.data)[1] == -2.0);
  nr_value_free(&y);
  uint16_t h[2] = {nr_f32_to_f16(1.0f), nr_f32_to_f16(-3.0f)}, g = nr_f32_to_f16(0.5f);
  REQUIRE(run2("Mul", 14, 0, NULL, vec(NR_DTYPE_FLOAT16, 2, h),
               tensor(NR_DTYPE_FLOAT16, 0, NULL, &g), &y, &err) == NR_OK);
  CHECK(nr_f16_to_f32(((uint16_t *)y.data)[0]) == 0.5f);
  CHECK(nr_f16_to_f32(((uint16_t *)y.data)[1]) == -1.5f);
  nr_value_free(&y);
}

NR_TEST(elementwise_integer_arithmetic) {
  int32_t a[6] = {7, -7, 7, -7, 5, INT32_MIN}, b[6] = {2, 2, -2, -2, 0, -1};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run2("Div", 14, 0, NULL, vec(NR_DTYPE_INT32, 6, a), vec(NR_DTYPE_INT32, 6, b),
               &y, &err) == NR_OK, "%s", err.message);
  /* truncation toward zero; x/0 gives 0; INT_MIN/-1 wraps */
  CHECK(!memcmp(y.data, (int32_t[]){3, -3, -3, 3, 0, INT32_MIN}, 24));
  nr_value_free(&y);

  uint8_t u1[2] = {250, 3}, u2[2] = {10, 5};
  REQUIRE(run2("Add", 14, 0, NULL, vec(NR_DTYPE_UINT8, 2, u1), vec(NR_DTYPE_UINT8, 2, u2),
               &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){4, 8}, 2)); /* wraps mod 256 */
  nr_value_free(&y);
  REQUIRE(run2("Sub", 14, 0, NULL, vec(NR_DTYPE_UINT8, 2, u1), vec(NR_DTYPE_UINT8, 2, u2),
               &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){240, 254}, 2));
  nr_value_free(&y);

  uint64_t big[2] = {UINT64_MAX, 1ull << 63}, d[2] = {3, 1ull << 62};
  REQUIRE(run2("Div", 14, 0, NULL, vec(NR_DTYPE_UINT64, 2, big),
               vec(NR_DTYPE_UINT64, 2, d), &y, &err) == NR_OK);
  CHECK(((uint64_t *)y.data)[0] == UINT64_MAX / 3 && ((uint64_t *)y.data)[1] == 2);
  nr_value_free(&y);

  int64_t m1[2] = {INT64_MAX, 3}, m2[2] = {2, -4};
  REQUIRE(run2("Mul", 14, 0, NULL, vec(NR_DTYPE_INT64, 2, m1), vec(NR_DTYPE_INT64, 2, m2),
               &y, &err) == NR_OK);
  CHECK(((int64_t *)y.data)[0] == -2 && ((int64_t *)y.data)[1] == -12);
  nr_value_free(&y);
}

NR_TEST(elementwise_mod) {
  int32_t a[5] = {-4, 7, -7, 7, 5}, b[5] = {3, -3, -3, 3, 0};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run2("Mod", 13, 0, NULL, vec(NR_DTYPE_INT32, 5, a), vec(NR_DTYPE_INT32, 5, b),
               &y, &err) == NR_OK, "%s", err.message);
  CHECK(!memcmp(y.data, (int32_t[]){2, -2, -1, 1, 0}, 20)); /* sign of the divisor */
  nr_value_free(&y);
  nr_attr f = attr_i("fmod", 1);
  REQUIRE(run2("Mod", 13, 1, &f, vec(NR_DTYPE_INT32, 5, a), vec(NR_DTYPE_INT32, 5, b),
               &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (int32_t[]){-1, 1, -1, 1, 0}, 20)); /* sign of the dividend */
  nr_value_free(&y);
  float fa[3] = {-4.5f, 5.5f, 3.0f}, fb[3] = {2.0f, -2.0f, 1.5f};
  REQUIRE(run2("Mod", 13, 1, &f, vec(NR_DTYPE_FLOAT, 3, fa), vec(NR_DTYPE_FLOAT, 3, fb),
               &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (float[]){-0.5f, 1.5f, 0.0f}, 12));
  nr_value_free(&y);
  REQUIRE(run2("Mod", 13, 0, NULL, vec(NR_DTYPE_FLOAT, 3, fa), vec(NR_DTYPE_FLOAT, 3, fb),
               &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (float[]){1.5f, -0.5f, 0.0f}, 12));
  nr_value_free(&y);
}

NR_TEST(elementwise_pow_mixed_types) {
  int64_t base[4] = {2, -3, 10, 2}, ex[4] = {10, 3, 0, -1};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run2("Pow", 15, 0, NULL, vec(NR_DTYPE_INT64, 4, base), vec(NR_DTYPE_INT64, 4, ex),
               &y, &err) == NR_OK, "%s", err.message);
  CHECK(!memcmp(y.data, (int64_t[]){1024, -27, 1, 0}, 32));
  nr_value_free(&y);
  int32_t ib[2] = {3, 5};
  float fe[2] = {0.5f, 2.0f};
  REQUIRE(run2("Pow", 15, 0, NULL, vec(NR_DTYPE_INT32, 2, ib), vec(NR_DTYPE_FLOAT, 2, fe),
               &y, &err) == NR_OK);
  CHECK(y.dtype == NR_DTYPE_INT32 && ((int32_t *)y.data)[0] == 1 &&
        ((int32_t *)y.data)[1] == 25);
  nr_value_free(&y);
  float fb[2] = {1.5f, -2.0f};
  uint64_t ue[2] = {2, 3};
  REQUIRE(run2("Pow", 15, 0, NULL, vec(NR_DTYPE_FLOAT, 2, fb), vec(NR_DTYPE_UINT64, 2, ue),
               &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (float[]){2.25f, -8.0f}, 8));
  nr_value_free(&y);
}

NR_TEST(elementwise_bitshift) {
  uint8_t x[4] = {16, 4, 1, 255}, s[4] = {1, 2, 7, 8};
  nr_value y;
  nr_error err = {0};
  nr_attr right = attr_s("direction", "RIGHT"), left = attr_s("direction", "LEFT");
  REQUIRE(run2("BitShift", 11, 1, &right, vec(NR_DTYPE_UINT8, 4, x),
               vec(NR_DTYPE_UINT8, 4, s), &y, &err) == NR_OK, "%s", err.message);
  CHECK(!memcmp(y.data, (uint8_t[]){8, 1, 0, 0}, 4));
  nr_value_free(&y);
  REQUIRE(run2("BitShift", 11, 1, &left, vec(NR_DTYPE_UINT8, 4, x),
               vec(NR_DTYPE_UINT8, 4, s), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){32, 16, 128, 0}, 4));
  nr_value_free(&y);
  int16_t sx[3] = {-16, -1, -5}, ss[3] = {2, 20, -1};
  REQUIRE(run2("BitShift", 11, 1, &right, vec(NR_DTYPE_INT16, 3, sx),
               vec(NR_DTYPE_INT16, 3, ss), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (int16_t[]){-4, -1, -1}, 6)); /* arithmetic, sign fill */
  nr_value_free(&y);
  nr_attr bad = attr_s("direction", "UP");
  CHECK(run2("BitShift", 11, 1, &bad, vec(NR_DTYPE_UINT8, 4, x), vec(NR_DTYPE_UINT8, 4, s),
             &y, &err) == NR_ERR_INVALID_MODEL);
}

NR_TEST(elementwise_compare_and_logic) {
  uint64_t a[3] = {UINT64_MAX, 5, 7}, b[3] = {1, 5, 8};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run2("Greater", 13, 0, NULL, vec(NR_DTYPE_UINT64, 3, a),
               vec(NR_DTYPE_UINT64, 3, b), &y, &err) == NR_OK);
  CHECK(y.dtype == NR_DTYPE_BOOL && !memcmp(y.data, (uint8_t[]){1, 0, 0}, 3));
  nr_value_free(&y);
  REQUIRE(run2("LessOrEqual", 16, 0, NULL, vec(NR_DTYPE_UINT64, 3, a),
               vec(NR_DTYPE_UINT64, 3, b), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){0, 1, 1}, 3));
  nr_value_free(&y);
  float f[3] = {NAN, 1, 2}, g = 1;
  REQUIRE(run2("Equal", 19, 0, NULL, vec(NR_DTYPE_FLOAT, 3, f),
               tensor(NR_DTYPE_FLOAT, 0, NULL, &g), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){0, 1, 0}, 3));
  nr_value_free(&y);
  uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1};
  const char *ops[3] = {"And", "Or", "Xor"};
  const uint8_t want[3][4] = {{0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 1, 0}};
  for (int o = 0; o < 3; o++) {
    REQUIRE(run2(ops[o], 7, 0, NULL, vec(NR_DTYPE_BOOL, 4, p), vec(NR_DTYPE_BOOL, 4, q),
                 &y, &err) == NR_OK);
    CHECK(!memcmp(y.data, want[o], 4), "%s", ops[o]);
    nr_value_free(&y);
  }
}

NR_TEST(elementwise_prelu_broadcast_slope) {
  float x[2][3][2] = {{{-1, 2}, {-3, 4}, {-5, 6}}, {{1, -2}, {3, -4}, {5, -6}}};
  float slope[3][1] = {{0.5f}, {0.25f}, {2}};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run2("PRelu", 16, 0, NULL, tensor(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 3, 2}, x),
               tensor(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 1}, slope), &y, &err) == NR_OK,
          "%s", err.message);
  const float *yd = y.data;
  for (int i = 0; i < 12; i++) {
    float xv = (&x[0][0][0])[i], s = slope[(i / 2) % 3][0];
    CHECK(yd[i] == (xv < 0 ? xv * s : xv), "element %d", i);
  }
  nr_value_free(&y);
}

/* ---- variadic and Where --------------------------------------------------------- */

NR_TEST(elementwise_variadic) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, c = 100;
  nr_value av = tensor(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, a), bv = vec(NR_DTYPE_FLOAT, 3, b),
           cv = tensor(NR_DTYPE_FLOAT, 0, NULL, &c);
  const nr_value *ins[3] = {&av, &bv, &cv};
  nr_value y;
  nr_error err = {0};
  REQUIRE(run_op("Sum", 13, 0, NULL, 3, ins, &y, &err) == NR_OK, "%s", err.message);
  REQUIRE(y.rank == 2 && y.dims[0] == 2 && y.dims[1] == 3);
  for (int i = 0, j = 0; i < 6; i++, j = (j + 1) == 3 ? 0 : j + 1)
    CHECK(((float *)y.data)[i] == a[i] + b[j] + c, "element %d", i);
  nr_value_free(&y);
  REQUIRE(run_op("Mean", 13, 0, NULL, 3, ins, &y, &err) == NR_OK);
  for (int i = 0, j = 0; i < 6; i++, j = (j + 1) == 3 ? 0 : j + 1)
    CHECK(close_f(((float *)y.data)[i], (a[i] + b[j] + c) / 3, 1e-6), "element %d", i);
  nr_value_free(&y);
  REQUIRE(run_op("Max", 13, 0, NULL, 2, ins, &y, &err) == NR_OK);
  for (int i = 0, j = 0; i < 6; i++, j = (j + 1) == 3 ? 0 : j + 1)
    CHECK(((float *)y.data)[i] == b[j], "element %d", i);
  nr_value_free(&y);
  REQUIRE(run_op("Min", 13, 0, NULL, 1, ins, &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, a, sizeof a));
  nr_value_free(&y);

  float n[2] = {NAN, 1}, m[2] = {0, NAN};
  nr_value nv = vec(NR_DTYPE_FLOAT, 2, n), mv = vec(NR_DTYPE_FLOAT, 2, m);
  REQUIRE(run_op("Max", 13, 0, NULL, 2, (const nr_value *[]){&nv, &mv}, &y, &err) == NR_OK);
  CHECK(isnan(((float *)y.data)[0]) && isnan(((float *)y.data)[1]), "NaN propagates");
  nr_value_free(&y);

  uint32_t u1[2] = {UINT32_MAX, 3}, u2[2] = {5, 9};
  nr_value u1v = vec(NR_DTYPE_UINT32, 2, u1), u2v = vec(NR_DTYPE_UINT32, 2, u2);
  REQUIRE(run_op("Min", 13, 0, NULL, 2, (const nr_value *[]){&u1v, &u2v}, &y, &err) ==
          NR_OK);
  CHECK(((uint32_t *)y.data)[0] == 5 && ((uint32_t *)y.data)[1] == 3);
  nr_value_free(&y);
}

NR_TEST(elementwise_where) {
  uint8_t cond[2][1] = {{1}, {0}};
  int64_t x[3] = {1, 2, 3}, z = -9;
  nr_value cv = tensor(NR_DTYPE_BOOL, 2, (int64_t[]){2, 1}, cond),
           xv = vec(NR_DTYPE_INT64, 3, x), zv = tensor(NR_DTYPE_INT64, 0, NULL, &z);
  nr_value y;
  nr_error err = {0};
  REQUIRE(run_op("Where", 16, 0, NULL, 3, (const nr_value *[]){&cv, &xv, &zv}, &y,
                 &err) == NR_OK, "%s", err.message);
  REQUIRE(y.rank == 2 && y.dims[0] == 2 && y.dims[1] == 3 && y.dtype == NR_DTYPE_INT64);
  CHECK(!memcmp(y.data, (int64_t[]){1, 2, 3, -9, -9, -9}, 48));
  nr_value_free(&y);

  /* The condition has the lowest rank and a later input the highest: the broadcast
   * shape grows while it is computed. */
  uint8_t c2[2] = {0, 1};
  float one = 1, big[2][3][2];
  for (int i = 0; i < 12; i++)
    (&big[0][0][0])[i] = (float)i;
  nr_value c2v = vec(NR_DTYPE_BOOL, 2, c2), ov = tensor(NR_DTYPE_FLOAT, 0, NULL, &one),
           bv = tensor(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 3, 2}, big);
  REQUIRE(run_op("Where", 16, 0, NULL, 3, (const nr_value *[]){&c2v, &ov, &bv}, &y,
                 &err) == NR_OK, "%s", err.message);
  REQUIRE(y.rank == 3 && y.dims[0] == 2 && y.dims[1] == 3 && y.dims[2] == 2);
  for (int i = 0; i < 12; i++)
    CHECK(((float *)y.data)[i] == ((i & 1) ? 1.0f : (float)i), "element %d", i);
  nr_value_free(&y);
}

/* ---- Cast ----------------------------------------------------------------------- */

NR_TEST(elementwise_cast) {
  float x[6] = {-2.7f, 2.7f, 0.0f, NAN, 300.0f, 65519.0f};
  nr_value y;
  nr_error err = {0};
  nr_attr to = attr_i("to", NR_DTYPE_INT32);
  REQUIRE(run1("Cast", 13, 1, &to, vec(NR_DTYPE_FLOAT, 3, x), &y, &err) == NR_OK,
          "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_INT32 && !memcmp(y.data, (int32_t[]){-2, 2, 0}, 12));
  nr_value_free(&y);
  to = attr_i("to", NR_DTYPE_BOOL);
  REQUIRE(run1("Cast", 13, 1, &to, vec(NR_DTYPE_FLOAT, 4, x), &y, &err) == NR_OK);
  CHECK(!memcmp(y.data, (uint8_t[]){1, 1, 0, 1}, 4));
  nr_value_free(&y);
  to = attr_i("to", NR_DTYPE_FLOAT16);
  REQUIRE(run1("Cast", 13, 1, &to, vec(NR_DTYPE_FLOAT, 6, x), &y, &err) == NR_OK);
  const uint16_t *h = y.data;
  CHECK(h[4] == 0x5cb0);             /* 300 exactly */
  CHECK(h[5] == 0x7bff);             /* 65519 rounds down to the largest half */
  CHECK(nr_f16_to_f32(h[0]) == -2.69921875f);
  nr_value_free(&y);

  /* 1 + 2^-11 + 2^-40 lies just above the half tie: double rounding via float would
   * land on the tie and round to even (1.0); the correct result is 1 + 2^-10. */
  double d = 1.0 + 0x1p-11 + 0x1p-40;
  REQUIRE(run1("Cast", 13, 1, &to, vec(NR_DTYPE_DOUBLE, 1, &d), &y, &err) == NR_OK);
  CHECK(*(uint16_t *)y.data == 0x3c01, "got 0x%04x", *(uint16_t *)y.data);
  nr_value_free(&y);

  int64_t big = (1ll << 40) + 1;
  to = attr_i("to", NR_DTYPE_FLOAT);
  REQUIRE(run1("Cast", 13, 1, &to, vec(NR_DTYPE_INT64, 1, &big), &y, &err) == NR_OK);
  CHECK(*(float *)y.data == 0x1p40f);
  nr_value_free(&y);

  nr_attr name = attr_s("to", "INT8"); /* Cast-1 names the type */
  int32_t wide[2] = {300, -129};
  REQUIRE(run1("Cast", 1, 1, &name, vec(NR_DTYPE_INT32, 2, wide), &y, &err) == NR_OK,
          "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_INT8 && !memcmp(y.data, (int8_t[]){44, 127}, 2));
  nr_value_free(&y);

  double like = 0;
  nr_value xv = vec(NR_DTYPE_INT32, 2, wide), lv = tensor(NR_DTYPE_DOUBLE, 0, NULL, &like);
  REQUIRE(run_op("CastLike", 15, 0, NULL, 2, (const nr_value *[]){&xv, &lv}, &y, &err) ==
          NR_OK, "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_DOUBLE && ((double *)y.data)[0] == 300.0);
  nr_value_free(&y);

  to = attr_i("to", 17); /* float8e4m3fn */
  CHECK(run1("Cast", 19, 1, &to, vec(NR_DTYPE_FLOAT, 3, x), &y, &err) ==
        NR_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "float8e4m3fn") != NULL, "%s", err.message);
}

/* ---- failure paths and static inference ----------------------------------------- */

NR_TEST(elementwise_rejects_bad_inputs) {
  float f[3] = {1, 2, 3};
  int32_t i[3] = {1, 2, 3};
  uint8_t u[3] = {1, 2, 3};
  nr_value y;
  nr_error err = {0};
  CHECK(run2("Add", 14, 0, NULL, vec(NR_DTYPE_FLOAT, 3, f), vec(NR_DTYPE_INT32, 3, i), &y,
             &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "Add") != NULL, "message names the node: %s", err.message);
  CHECK(run2("Mul", 14, 0, NULL, vec(NR_DTYPE_FLOAT, 3, f),
             tensor(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 1}, f), &y, &err) == NR_OK);
  nr_value_free(&y);
  CHECK(run2("Mul", 14, 0, NULL, vec(NR_DTYPE_FLOAT, 3, f), vec(NR_DTYPE_FLOAT, 2, f), &y,
             &err) == NR_ERR_SHAPE);
  CHECK(run1("Relu", 14, 0, NULL, vec(NR_DTYPE_UINT8, 3, u), &y, &err) == NR_ERR_SHAPE);
  CHECK(run1("Sigmoid", 13, 0, NULL, vec(NR_DTYPE_INT32, 3, i), &y, &err) == NR_ERR_SHAPE);
  CHECK(run2("And", 7, 0, NULL, vec(NR_DTYPE_INT32, 3, i), vec(NR_DTYPE_INT32, 3, i), &y,
             &err) == NR_ERR_SHAPE);
  nr_attr gelu = attr_s("approximate", "fast");
  CHECK(run1("Gelu", 20, 1, &gelu, vec(NR_DTYPE_FLOAT, 3, f), &y, &err) != NR_OK);
}

/* Calls an op's shape rule directly, as static inference does (no data). */
static nr_status infer(const char *op, int opset, int n_in, nr_value *ins, nr_value *out,
                       nr_error *err) {
  const nr_op_def *def = nr_op_find("", op, opset);
  if (!def)
    return NR_ERR_UNSUPPORTED;
  nr_node node = {.name = "n", .op_type = (char *)op, .domain = "", .opset = opset};
  nr_value *in_ptrs[4];
  for (int k = 0; k < n_in; k++)
    in_ptrs[k] = &ins[k];
  nr_value *out_ptrs[1] = {out};
  nr_op_ctx ctx = {.node = &node, .n_inputs = n_in, .inputs = in_ptrs, .n_outputs = 1,
                   .outputs = out_ptrs, .err = err};
  memset(out, 0, sizeof *out);
  return def->infer(&ctx);
}

NR_TEST(elementwise_static_infer_unknown_dims) {
  nr_value ins[3] = {
      {.dtype = NR_DTYPE_FLOAT, .rank = 3, .dims = {NR_DIM_UNKNOWN, 1, 4}},
      {.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {5, 1}},
      {.dtype = NR_DTYPE_FLOAT, .rank = -1},
  };
  nr_value out;
  nr_error err = {0};
  REQUIRE(infer("Add", 14, 2, ins, &out, &err) == NR_OK, "%s", err.message);
  CHECK(out.rank == 3 && out.dims[0] == NR_DIM_UNKNOWN && out.dims[1] == 5 &&
        out.dims[2] == 4);
  REQUIRE(infer("Less", 13, 2, ins, &out, &err) == NR_OK);
  CHECK(out.dtype == NR_DTYPE_BOOL);
  REQUIRE(infer("Sum", 13, 3, ins, &out, &err) == NR_OK);
  CHECK(out.rank == -1);
  REQUIRE(infer("Relu", 14, 1, &ins[2], &out, &err) == NR_OK);
  CHECK(out.rank == -1 && out.dtype == NR_DTYPE_FLOAT);
  nr_value like[2] = {ins[0], {.dtype = NR_DTYPE_UNDEFINED, .rank = -1}};
  REQUIRE(infer("CastLike", 21, 2, like, &out, &err) == NR_OK);
  CHECK(out.dtype == NR_DTYPE_UNDEFINED && out.rank == 3);
}
