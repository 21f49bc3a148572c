/* test_norm.c - unit tests of the reference normalization and softmax operators: each
 * kernel runs through nr_ref_exec_node() and is compared with naive loops written here
 * (seeded random data) or hand-computed values, including the opset-dependent
 * semantics (softmax coercion before opset 13, GroupNormalization 18 vs 21). */
#include "kernels/ref/executor.h"
#include "kernels/ref/ref_util.h"
#include "rng.h"
#include "unit.h"
#include "op_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED 4321u

static nr_value make_f32(int rank, const int64_t *dims, const float *data) {
  nr_value v = {.dtype = NR_DTYPE_FLOAT, .rank = rank};
  memcpy(v.dims, dims, sizeof(int64_t) * (size_t)rank);
  v.data = (void *)data;
  return v;
}

static void fill_random(float *x, int n, nr_rng *r) {
  for (int i = 0; i < n; i++)
    x[i] = (float)nr_rng_int(r, 0, 1999) / 500.0f - 2.0f;
}

static bool close_to(double got, double want, double tol) {
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* Runs op with one output and returns its float data (caller frees with out). */
static nr_status run1(const char *op, int opset, int n_attrs, nr_attr *attrs, int n_in,
                      const nr_value *const *ins, nr_value *out, nr_error *err) {
  memset(out, 0, sizeof *out);
  return nr_ref_exec_node(op, "", opset, n_attrs, attrs, n_in, ins, 1, out, err);
}

/* Softmax at opset 13 runs along axis 1 only; at opset 11 over dims [1..] together. */
NR_TEST(softmax_axis_and_coercion) {
  nr_rng rng = nr_rng_make(SEED);
  float x[24];
  fill_random(x, 24, &rng);
  int64_t dims[] = {2, 3, 4};
  nr_value xv = make_f32(3, dims, x), out;
  nr_error err = {0};
  nr_attr at[] = {attr_i("axis", 1)};
  REQUIRE(run1("Softmax", 13, 1, at, 1, (const nr_value *[]){&xv}, &out, &err) == NR_OK,
          "%s", err.message);
  for (int a = 0; a < 2; a++) {
    for (int c = 0; c < 4; c++) {
      double s = 0;
      for (int b = 0; b < 3; b++)
        s += exp(x[(a * 3 + b) * 4 + c]);
      for (int b = 0; b < 3; b++) {
        int i = (a * 3 + b) * 4 + c;
        CHECK(close_to(((float *)out.data)[i], exp(x[i]) / s, 1e-6), "seed %u i %d", SEED, i);
      }
    }
  }
  nr_value_free(&out);
  REQUIRE(run1("LogSoftmax", 11, 1, at, 1, (const nr_value *[]){&xv}, &out, &err) == NR_OK,
          "%s", err.message);
  for (int a = 0; a < 2; a++) {
    double s = 0;
    for (int j = 0; j < 12; j++)
      s += exp(x[a * 12 + j]);
    for (int j = 0; j < 12; j++)
      CHECK(close_to(((float *)out.data)[a * 12 + j], x[a * 12 + j] - log(s), 1e-6),
            "seed %u", SEED);
  }
  nr_value_free(&out);
}

NR_TEST(hardmax_first_max_per_version) {
  float x[] = {1, 5, 5, 2, /* row 2 */ 7, 0, 7, 1};
  int64_t dims[] = {2, 2, 2};
  nr_value xv = make_f32(3, dims, x), out;
  nr_error err = {0};
  nr_attr at[] = {attr_i("axis", 1)};
  /* opset 13: along axis 1 (pairs x[a][0][c], x[a][1][c]). */
  REQUIRE(run1("Hardmax", 13, 1, at, 1, (const nr_value *[]){&xv}, &out, &err) == NR_OK);
  const float want13[] = {0, 1, 1, 0, 1, 0, 0, 1};
  for (int i = 0; i < 8; i++)
    CHECK(((float *)out.data)[i] == want13[i], "opset 13 [%d]", i);
  nr_value_free(&out);
  /* opset 11: one hot over the 4 trailing values of each batch row. */
  REQUIRE(run1("Hardmax", 11, 1, at, 1, (const nr_value *[]){&xv}, &out, &err) == NR_OK);
  const float want11[] = {0, 1, 0, 0, 1, 0, 0, 0};
  for (int i = 0; i < 8; i++)
    CHECK(((float *)out.data)[i] == want11[i], "opset 11 [%d]", i);
  nr_value_free(&out);
}

NR_TEST(layernorm_matches_naive_with_stats) {
  nr_rng rng = nr_rng_make(SEED + 1);
  float x[30], w[5], b[5];
  fill_random(x, 30, &rng);
  fill_random(w, 5, &rng);
  fill_random(b, 5, &rng);
  int64_t dims[] = {2, 3, 5}, pd[] = {5};
  nr_value xv = make_f32(3, dims, x), wv = make_f32(1, pd, w), bv = make_f32(1, pd, b);
  nr_value out[3] = {0};
  nr_error err = {0};
  nr_attr at[] = {attr_i("axis", -1), attr_f("epsilon", 1e-3f)};
  nr_status st = nr_ref_exec_node("LayerNormalization", "", 17, 2, at, 3,
                                  (const nr_value *[]){&xv, &wv, &bv}, 3, out, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  REQUIRE(out[1].rank == 3 && out[1].dims[1] == 3 && out[1].dims[2] == 1);
  for (int r = 0; r < 6; r++) {
    double m = 0, v = 0;
    for (int j = 0; j < 5; j++)
      m += x[r * 5 + j] / 5.0;
    for (int j = 0; j < 5; j++)
      v += (x[r * 5 + j] - m) * (x[r * 5 + j] - m) / 5.0;
    double inv = 1 / sqrt(v + 1e-3f);
    CHECK(close_to(((float *)out[1].data)[r], m, 1e-6), "mean row %d seed %u", r, SEED + 1);
    CHECK(close_to(((float *)out[2].data)[r], inv, 1e-6), "inv row %d", r);
    for (int j = 0; j < 5; j++)
      CHECK(close_to(((float *)out[0].data)[r * 5 + j], (x[r * 5 + j] - m) * inv * w[j] + b[j],
                     1e-5), "y row %d col %d", r, j);
  }
  for (int i = 0; i < 3; i++)
    nr_value_free(&out[i]);
}

NR_TEST(rmsnorm_hand_case) {
  float x[] = {3, 4, 0, 0}, w[] = {2, 1};
  int64_t dims[] = {2, 2}, pd[] = {2};
  nr_value xv = make_f32(2, dims, x), wv = make_f32(1, pd, w), out;
  nr_error err = {0};
  nr_attr at[] = {attr_f("epsilon", 0.0f)};
  REQUIRE(run1("RMSNormalization", 23, 1, at, 2, (const nr_value *[]){&xv, &wv}, &out,
               &err) == NR_OK, "%s", err.message);
  double rms = sqrt(12.5);
  CHECK(close_to(((float *)out.data)[0], 3 / rms * 2, 1e-6));
  CHECK(close_to(((float *)out.data)[1], 4 / rms, 1e-6));
  nr_value_free(&out);
}

NR_TEST(batchnorm_inference_hand_case) {
  float x[] = {1, 2, 3, 4, /* n=1 */ 5, 6, 7, 8};
  float s[] = {2, 1}, b[] = {0, 1}, m[] = {1, 2}, v[] = {4, 1};
  int64_t dims[] = {2, 2, 2}, pd[] = {2};
  nr_value xv = make_f32(3, dims, x), sv = make_f32(1, pd, s), bv = make_f32(1, pd, b);
  nr_value mv = make_f32(1, pd, m), vv = make_f32(1, pd, v), out;
  nr_error err = {0};
  nr_attr at[] = {attr_f("epsilon", 0.0f)};
  REQUIRE(run1("BatchNormalization", 15, 1, at, 5,
               (const nr_value *[]){&xv, &sv, &bv, &mv, &vv}, &out, &err) == NR_OK,
          "%s", err.message);
  const float want[] = {0, 1, 2, 3, 4, 5, 6, 7}; /* ch0: (x-1)*2/2; ch1: (x-2)+1 */
  for (int i = 0; i < 8; i++)
    CHECK(close_to(((float *)out.data)[i], want[i], 1e-6), "[%d] %g", i,
          ((float *)out.data)[i]);
  nr_value_free(&out);
}

/* Opset 18 scales per group, opset 21 per channel. */
NR_TEST(groupnorm_scale_per_group_vs_channel) {
  float x[] = {1, 3, 5, 7}; /* N=1, C=4, no spatial dims: 2 groups of 2 channels */
  int64_t dims[] = {1, 4}, g2[] = {2}, c4[] = {4};
  float s2[] = {1, 2}, b2[] = {0, 10}, s4[] = {1, 2, 3, 4}, b4[] = {0, 0, 0, 1};
  nr_value xv = make_f32(2, dims, x), out;
  nr_error err = {0};
  nr_attr at[] = {attr_i("num_groups", 2), attr_f("epsilon", 0.0f)};
  nr_value sv = make_f32(1, g2, s2), bv = make_f32(1, g2, b2);
  REQUIRE(run1("GroupNormalization", 18, 2, at, 3, (const nr_value *[]){&xv, &sv, &bv},
               &out, &err) == NR_OK, "%s", err.message);
  const float want18[] = {-1, 1, 8, 12};
  for (int i = 0; i < 4; i++)
    CHECK(close_to(((float *)out.data)[i], want18[i], 1e-6), "18 [%d]", i);
  nr_value_free(&out);
  sv = make_f32(1, c4, s4), bv = make_f32(1, c4, b4);
  REQUIRE(run1("GroupNormalization", 21, 2, at, 3, (const nr_value *[]){&xv, &sv, &bv},
               &out, &err) == NR_OK, "%s", err.message);
  const float want21[] = {-1, 2, -3, 5};
  for (int i = 0; i < 4; i++)
    CHECK(close_to(((float *)out.data)[i], want21[i], 1e-6), "21 [%d]", i);
  nr_value_free(&out);
  /* per-group scale at opset 21 is a shape error */
  sv = make_f32(1, g2, s2), bv = make_f32(1, g2, b2);
  CHECK(run1("GroupNormalization", 21, 2, at, 3, (const nr_value *[]){&xv, &sv, &bv},
             &out, &err) == NR_ERR_SHAPE);
}

NR_TEST(lpnorm_and_lrn) {
  float x[] = {3, -4, 0, 0};
  int64_t dims[] = {2, 2};
  nr_value xv = make_f32(2, dims, x), out;
  nr_error err = {0};
  nr_attr at[] = {attr_i("p", 1)};
  REQUIRE(run1("LpNormalization", 22, 1, at, 1, (const nr_value *[]){&xv}, &out, &err) ==
          NR_OK, "%s", err.message);
  const float want[] = {3.0f / 7, -4.0f / 7, 0, 0};
  for (int i = 0; i < 4; i++)
    CHECK(close_to(((float *)out.data)[i], want[i], 1e-6), "[%d]", i);
  nr_value_free(&out);

  nr_rng rng = nr_rng_make(SEED + 2);
  float y[40]; /* 2 x 5 x 2 x 2 */
  fill_random(y, 40, &rng);
  int64_t yd[] = {2, 5, 2, 2};
  nr_value yv = make_f32(4, yd, y);
  nr_attr la[] = {attr_i("size", 4), attr_f("alpha", 0.5f), attr_f("beta", 0.6f),
                  attr_f("bias", 1.5f)};
  REQUIRE(run1("LRN", 13, 4, la, 1, (const nr_value *[]){&yv}, &out, &err) == NR_OK);
  for (int n = 0; n < 2; n++)
    for (int c = 0; c < 5; c++)
      for (int s = 0; s < 4; s++) {
        double sq = 0;
        for (int k = c - 1; k <= c + 2; k++) /* floor(3/2)=1 before, ceil(3/2)=2 after */
          if (k >= 0 && k < 5)
            sq += (double)y[(n * 5 + k) * 4 + s] * y[(n * 5 + k) * 4 + s];
        int i = (n * 5 + c) * 4 + s;
        CHECK(close_to(((float *)out.data)[i], y[i] / pow(1.5 + 0.5 / 4 * sq, 0.6), 1e-5),
              "lrn %d seed %u", i, SEED + 2);
      }
  nr_value_free(&out);
}

NR_TEST(softmax_float16_storage) {
  uint16_t x[3];
  const float xf[] = {0.5f, 1.0f, -1.0f};
  for (int i = 0; i < 3; i++)
    x[i] = nr_f32_to_f16(xf[i]);
  int64_t dims[] = {3};
  nr_value xv = {.dtype = NR_DTYPE_FLOAT16, .rank = 1, .dims = {3}, .data = x}, out;
  (void)dims;
  nr_error err = {0};
  REQUIRE(run1("Softmax", 13, 0, NULL, 1, (const nr_value *[]){&xv}, &out, &err) == NR_OK);
  REQUIRE(out.dtype == NR_DTYPE_FLOAT16);
  double s = exp(0.5) + exp(1.0) + exp(-1.0);
  for (int i = 0; i < 3; i++)
    CHECK(close_to(nr_f16_to_f32(((uint16_t *)out.data)[i]), exp(xf[i]) / s, 1e-3));
  nr_value_free(&out);
}

NR_TEST(norm_rejects_bad_shapes) {
  float x[8] = {0}, s[3] = {0};
  int64_t dims[] = {2, 4}, pd[] = {3};
  nr_value xv = make_f32(2, dims, x), sv = make_f32(1, pd, s), out;
  nr_error err = {0};
  CHECK(run1("LayerNormalization", 17, 0, NULL, 2, (const nr_value *[]){&xv, &sv}, &out,
             &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "Scale") != NULL, "%s", err.message);
  nr_attr at[] = {attr_i("axis", 2)};
  CHECK(run1("Softmax", 13, 1, at, 1, (const nr_value *[]){&xv}, &out, &err) ==
        NR_ERR_SHAPE);
}

/* spatial=0 (opset 7) takes statistics per element of a sample, not per channel. */
NR_TEST(batchnorm_spatial0_per_element) {
  float x[] = {1, 2, 3, 4}; /* N=2, C=1, L=2 */
  float s[] = {1, 2}, b[] = {0, 1}, m[] = {1, 0}, v[] = {1, 4};
  int64_t dims[] = {2, 1, 2}, pd[] = {1, 2};
  nr_value xv = make_f32(3, dims, x), sv = make_f32(2, pd, s), bv = make_f32(2, pd, b);
  nr_value mv = make_f32(2, pd, m), vv = make_f32(2, pd, v), out;
  nr_error err = {0};
  nr_attr at[] = {attr_f("epsilon", 0.0f), attr_i("spatial", 0)};
  REQUIRE(run1("BatchNormalization", 7, 2, at, 5,
               (const nr_value *[]){&xv, &sv, &bv, &mv, &vv}, &out, &err) == NR_OK,
          "%s", err.message);
  const float want[] = {0, 3, 2, 5}; /* elem0: x-1; elem1: (x-0)/2*2+1 */
  for (int i = 0; i < 4; i++)
    CHECK(close_to(((float *)out.data)[i], want[i], 1e-6), "[%d] %g", i,
          ((float *)out.data)[i]);
  nr_value_free(&out);
}

/* Naive attention of one (b=0) batch: 4 query heads share 2 KV heads, a past of 2
 * steps, causal masking aligned to the end, and a boolean mask. */
NR_TEST(attention_gqa_causal_past_matches_naive) {
  enum { HQ = 4, HKV = 2, S = 3, P = 2, L = 3, T = P + L, D = 2 };
  nr_rng rng = nr_rng_make(SEED + 3);
  float q[HQ * S * D], k[HKV * L * D], v[HKV * L * D], pk[HKV * P * D], pv[HKV * P * D];
  fill_random(q, HQ * S * D, &rng);
  fill_random(k, HKV * L * D, &rng);
  fill_random(v, HKV * L * D, &rng);
  fill_random(pk, HKV * P * D, &rng);
  fill_random(pv, HKV * P * D, &rng);
  uint8_t mask[S * T];
  for (int i = 0; i < S * T; i++)
    mask[i] = i % 4 != 1;
  int64_t qd[] = {1, HQ, S, D}, kd[] = {1, HKV, L, D}, pd[] = {1, HKV, P, D};
  nr_value qv = make_f32(4, qd, q), kv = make_f32(4, kd, k), vv = make_f32(4, kd, v);
  nr_value pkv = make_f32(4, pd, pk), pvv = make_f32(4, pd, pv);
  nr_value mv = {.dtype = NR_DTYPE_BOOL, .rank = 2, .dims = {S, T}, .data = mask};
  nr_value out[3] = {0};
  nr_error err = {0};
  nr_attr at[] = {attr_i("is_causal", 1)};
  nr_status st = nr_ref_exec_node("Attention", "", 23, 1, at, 6,
                                  (const nr_value *[]){&qv, &kv, &vv, &mv, &pkv, &pvv}, 3,
                                  out, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  REQUIRE(out[1].rank == 4 && out[1].dims[2] == T);
  for (int h = 0; h < HQ; h++) {
    int g = h / (HQ / HKV);
    for (int i = 0; i < S; i++) {
      double w[T], sum = 0;
      for (int j = 0; j < T; j++) {
        const float *kr = j < P ? pk + (g * P + j) * D : k + (g * L + j - P) * D;
        double dot = 0;
        for (int d = 0; d < D; d++)
          dot += q[(h * S + i) * D + d] * kr[d];
        bool ok = mask[i * T + j] && j <= i + P;
        w[j] = ok ? exp(dot / sqrt(D)) : 0;
        sum += w[j];
      }
      for (int e = 0; e < D; e++) {
        double y = 0;
        for (int j = 0; j < T; j++)
          y += w[j] / sum * (j < P ? pv[(g * P + j) * D + e] : v[(g * L + j - P) * D + e]);
        float got = ((float *)out[0].data)[(h * S + i) * D + e];
        CHECK(close_to(got, y, 1e-5), "h %d i %d e %d: %g vs %g (seed %u)", h, i, e, got, y,
              SEED + 3);
      }
    }
  }
  CHECK(((float *)out[1].data)[P * D] == k[0], "present_key continues with K");
  CHECK(((float *)out[2].data)[1] == pv[1], "present_value starts with the past");
  for (int i = 0; i < 3; i++)
    nr_value_free(&out[i]);
}
