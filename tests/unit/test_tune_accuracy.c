/* test_tune_accuracy.c - the tuner's loss metrics, tolerance check and reference
 * pairs (src/tune/accuracy.c, src/tune/pairs.c).
 *
 * Every expected loss is worked out by hand in the comment beside it, on tensors
 * small enough to check on paper; the numerically hard cases (near-identical
 * outputs for cos, values whose squares overflow or underflow) have closed forms.
 * The pair tests build two tiny models in memory (x + W, and a Gather over a
 * constant table), write .pb / .npy files into a temporary folder, and check what
 * was read, generated or computed against values the test derives itself. */
#include "io/tensor_io.h"
#include "loader_models.h"
#include "tune/accuracy.h"
#include "tune/pairs.h"
#include "unit.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------ */

static nr_buffer buf_f32(int rank, const int64_t *dims, float *data) {
  nr_buffer b = {NR_DTYPE_FLOAT, rank, {0}, data};
  for (int d = 0; d < rank; d++)
    b.dims[d] = dims[d];
  return b;
}

static bool near(double got, double want, double rel) {
  if (got == want)
    return true;
  return fabs(got - want) <= rel * fabs(want);
}

/* ---- metric names ------------------------------------------------------------------- */

NR_TEST(tune_acc_metric_names) {
  static const char *const names[] = {"l0", "l1", "l2", "linf", "rel_l2", "cos", "top1"};
  CHECK(NR_METRIC_COUNT == 7);
  for (int m = 0; m < NR_METRIC_COUNT; m++) {
    nr_metric back = NR_METRIC_COUNT;
    CHECK(!strcmp(nr_metric_name((nr_metric)m), names[m]), "metric %d is '%s'", m,
          nr_metric_name((nr_metric)m));
    CHECK(nr_metric_parse(names[m], &back) && back == (nr_metric)m, "parse '%s'",
          names[m]);
  }
  nr_metric m = NR_METRIC_L1;
  CHECK(!nr_metric_parse("mse", &m) && m == NR_METRIC_L1);
  CHECK(!nr_metric_parse("", &m) && !nr_metric_parse("l2 ", &m));
  CHECK(!nr_metric_parse(NULL, &m));
  CHECK(!strcmp(nr_metric_name(NR_METRIC_COUNT), "unknown"));
}

/* ---- losses ------------------------------------------------------------------------- */

NR_TEST(tune_acc_identical_is_zero) {
  float a[6] = {0.5f, -3, 7, 1e-3f, 2, -2};
  float b[6];
  memcpy(b, a, sizeof b);
  int64_t dims[2] = {2, 3};
  nr_buffer got = buf_f32(2, dims, a), ref = buf_f32(2, dims, b);
  double l[NR_METRIC_COUNT];
  bool mismatch = true;
  CHECK(nr_losses_compute(&got, &ref, 0, 0, l, &mismatch));
  CHECK(!mismatch);
  for (int m = 0; m < NR_METRIC_COUNT; m++)
    CHECK(l[m] == 0, "%s = %g", nr_metric_name((nr_metric)m), l[m]);
}

/* ref = [1, 2, 3, 4], got = [1, 2, 3, 6]: the difference is [0, 0, 0, 2]. */
NR_TEST(tune_acc_hand_computed) {
  float r[4] = {1, 2, 3, 4}, g[4] = {1, 2, 3, 6};
  int64_t dims[1] = {4};
  nr_buffer got = buf_f32(1, dims, g), ref = buf_f32(1, dims, r);
  double l[NR_METRIC_COUNT];
  REQUIRE(nr_losses_compute(&got, &ref, 0.1, 0, l, NULL));
  CHECK(l[NR_METRIC_L0] == 0.25, "l0 %g", l[NR_METRIC_L0]); /* one of four off */
  CHECK(l[NR_METRIC_L1] == 0.5, "l1 %g", l[NR_METRIC_L1]);   /* 2 / 4 */
  CHECK(l[NR_METRIC_L2] == 1.0, "l2 %g", l[NR_METRIC_L2]);   /* 2^2 / 4 */
  CHECK(l[NR_METRIC_LINF] == 2.0, "linf %g", l[NR_METRIC_LINF]);
  /* ||d|| = 2, ||ref|| = sqrt(1 + 4 + 9 + 16) = sqrt(30). */
  CHECK(near(l[NR_METRIC_REL_L2], 2 / sqrt(30.0), 1e-14), "rel_l2 %.17g",
        l[NR_METRIC_REL_L2]);
  /* got.ref = 1 + 4 + 9 + 24 = 38, ||got|| = sqrt(50): 1 - 38 / sqrt(1500). */
  CHECK(near(l[NR_METRIC_COS], 1 - 38 / sqrt(1500.0), 1e-12), "cos %.17g",
        l[NR_METRIC_COS]);
  CHECK(l[NR_METRIC_TOP1] == 0, "top1 %g", l[NR_METRIC_TOP1]); /* both argmax 3 */
  /* l0's bound is atol + rtol * |ref|: 0.1 + 0.5 * 4 = 2.1 >= 2, so none is off. */
  REQUIRE(nr_losses_compute(&got, &ref, 0.1, 0.5, l, NULL));
  CHECK(l[NR_METRIC_L0] == 0, "l0 with rtol %g", l[NR_METRIC_L0]);
  /* 0.1 + 0.45 * 4 = 1.9 < 2. */
  REQUIRE(nr_losses_compute(&got, &ref, 0.1, 0.45, l, NULL));
  CHECK(l[NR_METRIC_L0] == 0.25, "l0 with rtol 0.45: %g", l[NR_METRIC_L0]);
}

NR_TEST(tune_acc_top1_rows) {
  /* Row 0 agrees (index 1), row 1 does not (ref 0, got 1), row 2 agrees on a tie in
   * the reference (ref has 0.9 twice; got picks index 2, one of them). */
  float r[9] = {0.1f, 0.7f, 0.2f, 0.5f, 0.4f, 0.1f, 0.9f, 0.0f, 0.9f};
  float g[9] = {0.1f, 0.6f, 0.3f, 0.3f, 0.4f, 0.1f, 0.0f, 0.0f, 1.0f};
  int64_t dims[2] = {3, 3};
  nr_buffer got = buf_f32(2, dims, g), ref = buf_f32(2, dims, r);
  double l[NR_METRIC_COUNT];
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(near(l[NR_METRIC_TOP1], 1.0 / 3, 1e-15), "top1 %g", l[NR_METRIC_TOP1]);
  /* The same nine values as one row: argmax of got is 8, a maximum of ref. */
  int64_t flat[1] = {9};
  got = buf_f32(1, flat, g), ref = buf_f32(1, flat, r);
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_TOP1] == 0, "top1 one row %g", l[NR_METRIC_TOP1]);
  /* Columns instead ([9, 1]): every row has one element, so argmaxes always agree. */
  int64_t col[2] = {9, 1};
  got = buf_f32(2, col, g), ref = buf_f32(2, col, r);
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_TOP1] == 0, "top1 columns %g", l[NR_METRIC_TOP1]);
  /* A scalar is one row of one element. */
  float s1 = 3, s2 = 5;
  got = buf_f32(0, NULL, &s1), ref = buf_f32(0, NULL, &s2);
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_TOP1] == 0 && l[NR_METRIC_LINF] == 2 && l[NR_METRIC_L2] == 4);
  CHECK(near(l[NR_METRIC_REL_L2], 0.4, 1e-15));
  CHECK(l[NR_METRIC_COS] == 0, "parallel scalars: cos %g", l[NR_METRIC_COS]);
}

NR_TEST(tune_acc_nonfinite_got) {
  float r[3] = {1, 2, 3};
  float bad[3][3] = {{1, NAN, 3}, {INFINITY, 2, 3}, {1, 2, -INFINITY}};
  int64_t dims[1] = {3};
  for (int k = 0; k < 3; k++) {
    nr_buffer got = buf_f32(1, dims, bad[k]), ref = buf_f32(1, dims, r);
    double l[NR_METRIC_COUNT];
    bool mismatch = true;
    CHECK(!nr_losses_compute(&got, &ref, 1e9, 1e9, l, &mismatch), "case %d", k);
    CHECK(!mismatch, "case %d is not a shape mismatch", k);
    for (int m = 0; m < NR_METRIC_COUNT; m++)
      CHECK(isinf(l[m]) && l[m] > 0, "case %d: %s = %g", k,
            nr_metric_name((nr_metric)m), l[m]);
  }
}

NR_TEST(tune_acc_nonfinite_ref) {
  /* A reference that overflowed: the finite candidate is judged infinitely far. */
  float r[3] = {1, INFINITY, 3}, g[3] = {1, 2, 3};
  int64_t dims[1] = {3};
  nr_buffer got = buf_f32(1, dims, g), ref = buf_f32(1, dims, r);
  double l[NR_METRIC_COUNT];
  CHECK(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  for (int m = 0; m < NR_METRIC_COUNT; m++)
    CHECK(isinf(l[m]) && l[m] > 0, "%s = %g", nr_metric_name((nr_metric)m), l[m]);
}

NR_TEST(tune_acc_shape_and_dtype_mismatch) {
  float a[6] = {0}, b[6] = {0};
  int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d6[1] = {6};
  nr_buffer ref = buf_f32(2, d23, b);
  nr_buffer cases[3] = {buf_f32(2, d32, a), buf_f32(1, d6, a), buf_f32(2, d23, a)};
  cases[2].dtype = NR_DTYPE_INT32; /* same bytes, another dtype */
  for (int k = 0; k < 3; k++) {
    double l[NR_METRIC_COUNT];
    bool mismatch = false;
    CHECK(!nr_losses_compute(&cases[k], &ref, 0, 0, l, &mismatch), "case %d", k);
    CHECK(mismatch, "case %d", k);
    for (int m = 0; m < NR_METRIC_COUNT; m++)
      CHECK(isinf(l[m]) && l[m] > 0, "case %d: %s = %g", k,
            nr_metric_name((nr_metric)m), l[m]);
  }
  double l[NR_METRIC_COUNT];
  bool mismatch = false;
  CHECK(!nr_losses_compute(NULL, &ref, 0, 0, l, &mismatch) && mismatch);
}

NR_TEST(tune_acc_empty_is_zero) {
  int64_t dims[2] = {0, 3};
  float dummy = 0;
  nr_buffer got = buf_f32(2, dims, &dummy), ref = buf_f32(2, dims, NULL);
  double l[NR_METRIC_COUNT];
  CHECK(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  for (int m = 0; m < NR_METRIC_COUNT; m++)
    CHECK(l[m] == 0, "%s = %g", nr_metric_name((nr_metric)m), l[m]);
}

NR_TEST(tune_acc_zero_reference) {
  float z[2] = {0, 0}, z2[2] = {0, 0}, g[2] = {3, 4};
  int64_t dims[1] = {2};
  nr_buffer got = buf_f32(1, dims, g), ref = buf_f32(1, dims, z);
  double l[NR_METRIC_COUNT];
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_REL_L2] == 5, "rel_l2 falls back to ||got - ref|| = 5: %g",
        l[NR_METRIC_REL_L2]);
  CHECK(l[NR_METRIC_COS] == 1, "one side all zeros: cos %g", l[NR_METRIC_COS]);
  CHECK(l[NR_METRIC_L2] == 12.5, "(9 + 16) / 2: %g", l[NR_METRIC_L2]);
  /* got zeros against a nonzero ref: cosine similarity 0 as well. */
  REQUIRE(nr_losses_compute(&ref, &got, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_COS] == 1 && l[NR_METRIC_REL_L2] == 1);
  nr_buffer zz = buf_f32(1, dims, z2);
  REQUIRE(nr_losses_compute(&zz, &ref, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_COS] == 0 && l[NR_METRIC_REL_L2] == 0);
}

NR_TEST(tune_acc_cos_near_identical) {
  /* got = [1, 1e-6], ref = [1, 0]: cos = 1 / sqrt(1 + x) with x = 1e-12, so
   * 1 - cos = x/2 - 3x^2/8 + ... = 5e-13 to 25 digits. Forming 1 - cos directly
   * would keep only about 4 correct digits of it. */
  double g[2] = {1, 1e-6}, r[2] = {1, 0};
  nr_buffer got = {NR_DTYPE_DOUBLE, 1, {2}, g}, ref = {NR_DTYPE_DOUBLE, 1, {2}, r};
  double l[NR_METRIC_COUNT];
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(near(l[NR_METRIC_COS], 5e-13, 1e-9), "cos %.17g", l[NR_METRIC_COS]);
  /* Opposite vectors: cos = -1, the loss is 2. */
  double n[2] = {-1, -1e-6}, p[2] = {1, 1e-6};
  got.data = n, ref.data = p;
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(near(l[NR_METRIC_COS], 2, 1e-15), "cos %.17g", l[NR_METRIC_COS]);
  /* Parallel, twice as long: cos distance 0, relative error 1. */
  double twice[2] = {2, 2e-6};
  got.data = twice;
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(fabs(l[NR_METRIC_COS]) < 1e-15 && near(l[NR_METRIC_REL_L2], 1, 1e-15),
        "cos %g rel_l2 %.17g", l[NR_METRIC_COS], l[NR_METRIC_REL_L2]);
}

NR_TEST(tune_acc_extreme_magnitudes) {
  /* ref = [1e200, 1e200], got = [1e200, 2e200]: squares overflow a double, yet
   * rel_l2 = 1e200 / (sqrt(2) 1e200) = 1/sqrt(2) and cos = 3 / sqrt(10). The mean
   * squared error itself (5e399) is beyond a double: +inf is its honest value. */
  double r[2] = {1e200, 1e200}, g[2] = {1e200, 2e200};
  nr_buffer got = {NR_DTYPE_DOUBLE, 1, {2}, g}, ref = {NR_DTYPE_DOUBLE, 1, {2}, r};
  double l[NR_METRIC_COUNT];
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(near(l[NR_METRIC_REL_L2], 1 / sqrt(2.0), 1e-14), "rel_l2 %.17g",
        l[NR_METRIC_REL_L2]);
  CHECK(near(l[NR_METRIC_COS], 1 - 3 / sqrt(10.0), 1e-13), "cos %.17g",
        l[NR_METRIC_COS]);
  CHECK(near(l[NR_METRIC_L1], 0.5e200, 1e-15) && l[NR_METRIC_LINF] == 1e200);
  CHECK(isinf(l[NR_METRIC_L2]));
  /* ref = [1e-200, 0], got = [0, 1e-200]: squares underflow to 0, yet rel_l2 =
   * sqrt(2), cos = 1 (orthogonal) and mse = 1e-400 ... which is below a double's
   * range too, so only the first two are checked. */
  double r2[2] = {1e-200, 0}, g2[2] = {0, 1e-200};
  got.data = g2, ref.data = r2;
  REQUIRE(nr_losses_compute(&got, &ref, 0, 0, l, NULL));
  CHECK(near(l[NR_METRIC_REL_L2], sqrt(2.0), 1e-14), "rel_l2 %.17g",
        l[NR_METRIC_REL_L2]);
  CHECK(near(l[NR_METRIC_COS], 1, 1e-15), "cos %.17g", l[NR_METRIC_COS]);
}

NR_TEST(tune_acc_integer_outputs) {
  /* Compared as numbers: d = [0, 3, 0]; argmax 1 against 2. */
  int32_t r[3] = {1, 2, 3}, g[3] = {1, 5, 3};
  nr_buffer got = {NR_DTYPE_INT32, 1, {3}, g}, ref = {NR_DTYPE_INT32, 1, {3}, r};
  double l[NR_METRIC_COUNT];
  REQUIRE(nr_losses_compute(&got, &ref, 0.5, 0, l, NULL));
  CHECK(near(l[NR_METRIC_L0], 1.0 / 3, 1e-15) && l[NR_METRIC_L1] == 1);
  CHECK(l[NR_METRIC_L2] == 3 && l[NR_METRIC_LINF] == 3 && l[NR_METRIC_TOP1] == 1);
  /* bool: two of four differ. */
  uint8_t bg[4] = {1, 0, 1, 1}, br[4] = {1, 1, 0, 1};
  nr_buffer gb = {NR_DTYPE_BOOL, 1, {4}, bg}, rb = {NR_DTYPE_BOOL, 1, {4}, br};
  REQUIRE(nr_losses_compute(&gb, &rb, 0, 0, l, NULL));
  CHECK(l[NR_METRIC_L0] == 0.5 && l[NR_METRIC_L1] == 0.5 && l[NR_METRIC_LINF] == 1);
}

NR_TEST(tune_acc_many_elements) {
  /* 3,000,001 elements, ref all 1 and got all 1 + 2^-10 (exact in float): every
   * difference is 2^-10, so l1 = linf = 2^-10, l2 = 2^-20 and rel_l2 = 2^-10, with
   * no drift from summing millions of terms. */
  int64_t n = 3000001;
  float *r = malloc(sizeof(float) * (size_t)n), *g = malloc(sizeof(float) * (size_t)n);
  REQUIRE(r && g);
  for (int64_t i = 0; i < n; i++)
    r[i] = 1, g[i] = 1 + 0x1p-10f;
  int64_t dims[1] = {n};
  nr_buffer got = buf_f32(1, dims, g), ref = buf_f32(1, dims, r);
  double l[NR_METRIC_COUNT];
  bool ok = nr_losses_compute(&got, &ref, 0, 0, l, NULL);
  free(r);
  free(g);
  REQUIRE(ok);
  CHECK(near(l[NR_METRIC_L1], 0x1p-10, 1e-14), "l1 %.17g", l[NR_METRIC_L1]);
  CHECK(near(l[NR_METRIC_L2], 0x1p-20, 1e-14), "l2 %.17g", l[NR_METRIC_L2]);
  CHECK(near(l[NR_METRIC_REL_L2], 0x1p-10, 1e-14), "rel_l2 %.17g", l[NR_METRIC_REL_L2]);
  CHECK(l[NR_METRIC_LINF] == 0x1p-10 && l[NR_METRIC_L0] == 1);
  CHECK(fabs(l[NR_METRIC_COS]) < 1e-14, "parallel: cos %g", l[NR_METRIC_COS]);
}

/* ---- tolerances --------------------------------------------------------------------- */

NR_TEST(tune_acc_tolerance_eps) {
  nr_tolerance tol = {.metric = NR_METRIC_LINF, .eps = 0.1, .n_overrides = 2,
                      .override_name = {"logits", "boxes"}, .override_eps = {0.5, 2}};
  CHECK(nr_tolerance_eps(&tol, "logits") == 0.5);
  CHECK(nr_tolerance_eps(&tol, "boxes") == 2);
  CHECK(nr_tolerance_eps(&tol, "scores") == 0.1);
  CHECK(nr_tolerance_eps(&tol, "logit") == 0.1);
  CHECK(nr_tolerance_eps(&tol, NULL) == 0.1);
}

/* Two pairs, two outputs ("a" with eps 0.1, "b" overridden to 0.5), checked on
 * linf; the other metrics hold decoys that must be ignored. */
static void fill_losses(double *l, const double linf[4]) {
  for (int k = 0; k < 4; k++)
    for (int m = 0; m < NR_METRIC_COUNT; m++)
      l[k * NR_METRIC_COUNT + m] = m == NR_METRIC_LINF ? linf[k] : 1e9;
}

NR_TEST(tune_acc_tolerance_check) {
  const char *names[2] = {"a", "b"};
  nr_tolerance tol = {.metric = NR_METRIC_LINF, .eps = 0.1, .n_overrides = 1,
                      .override_name = {"b"}, .override_eps = {0.5}};
  double l[4 * NR_METRIC_COUNT], worst = 0;
  /* [pair0 a, pair0 b, pair1 a, pair1 b]: margins 0.05, 0.2, 0.1, 0.5 - 0.45. */
  fill_losses(l, (const double[4]){0.05, 0.3, 0.0, 0.45});
  CHECK(nr_tolerance_check(&tol, l, 2, 2, names, &worst));
  CHECK(near(worst, 0.05, 1e-12), "worst %.17g", worst);
  /* pair 1 output b at 0.6: infeasible by 0.1. */
  fill_losses(l, (const double[4]){0.05, 0.3, 0.0, 0.6});
  CHECK(!nr_tolerance_check(&tol, l, 2, 2, names, &worst));
  CHECK(near(worst, -0.1, 1e-12), "worst %.17g", worst);
  /* Without names no override applies: 0.3 exceeds 0.1 by 0.2, 0.6 by 0.5. */
  CHECK(!nr_tolerance_check(&tol, l, 2, 2, NULL, &worst));
  CHECK(near(worst, -0.5, 1e-12), "worst %.17g", worst);
  /* Exactly at the bound is feasible with margin 0. */
  fill_losses(l, (const double[4]){0.1, 0.5, 0.1, 0.5});
  CHECK(nr_tolerance_check(&tol, l, 2, 2, names, &worst) && worst == 0);
  /* A NaN loss never passes, whatever the bound. */
  fill_losses(l, (const double[4]){0.0, NAN, 0.0, 0.0});
  tol.eps = INFINITY;
  tol.override_eps[0] = INFINITY;
  CHECK(!nr_tolerance_check(&tol, l, 2, 2, names, &worst));
  CHECK(isinf(worst) && worst < 0, "worst %g", worst);
  /* An unbounded tolerance accepts an infinite loss, margin 0. */
  fill_losses(l, (const double[4]){0.0, INFINITY, 0.0, 0.0});
  CHECK(nr_tolerance_check(&tol, l, 2, 2, names, &worst) && worst == 0);
  /* Other metric selected: the decoys (1e9) now count. */
  tol = (nr_tolerance){.metric = NR_METRIC_COS, .eps = 1e10};
  CHECK(nr_tolerance_check(&tol, l, 2, 2, names, &worst) && near(worst, 9e9, 1e-15));
  /* Nothing to check: feasible, nothing limits the margin. */
  CHECK(nr_tolerance_check(&tol, NULL, 0, 2, names, &worst) && isinf(worst) && worst > 0);
  CHECK(nr_tolerance_check(&tol, l, 2, 2, names, NULL));
  tol.metric = NR_METRIC_COUNT;
  CHECK(!nr_tolerance_check(&tol, l, 2, 2, names, &worst));
}

/* ---- pairs: test models and files --------------------------------------------------- */

static const float add_w[3] = {1.5f, -2.0f, 4.25f};

static nr_model *load_lm(nr_test_state *t, lm_arena *a, Onnx__ModelProto *mp) {
  size_t len;
  uint8_t *bytes = lm_pack(a, mp, &len);
  nr_model *m = NULL;
  nr_error err = {0};
  nr_status st = nr_model_load_bytes(bytes, len, NULL, &m, &err);
  lm_free(a);
  CHECK(st == NR_OK, "loading the test model: %s", err.message);
  return m;
}

/* "x:0" float[2,3] + W[3] -> "y/out" (names that need the file-safe rule); with
 * dynamic set, x is [N,3]. */
static nr_model *model_add(nr_test_state *t, bool dynamic) {
  lm_arena a = {0};
  int64_t dims[2] = {dynamic ? -1 : 2, 3}, wd[1] = {3};
  Onnx__GraphProto *g = lm_graph(&a, "add");
  lm_add_input(g, lm_value_info(&a, "x:0", NR_DTYPE_FLOAT, 2, dims));
  lm_add_init(g, lm_tensor(&a, "W", NR_DTYPE_FLOAT, 1, wd, add_w, sizeof add_w));
  lm_add_node(g, lm_node(&a, "Add", "add", "x:0", "W", "y/out"));
  lm_add_output(g, lm_value_info(&a, "y/out", NR_DTYPE_FLOAT, 2, dims));
  return load_lm(t, &a, lm_model(&a, 8, 13, g));
}

/* ids int64[2,4] -> Cast(int32) -> Gather(E[5,2]) -> emb; other int64[8] twice added
 * -> twice. E[r][c] = 10 r + c. */
static nr_model *model_gather(nr_test_state *t) {
  lm_arena a = {0};
  static const float table[10] = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41};
  int64_t ids_d[2] = {2, 4}, other_d[1] = {8}, e_d[2] = {5, 2}, emb_d[3] = {2, 4, 2};
  Onnx__GraphProto *g = lm_graph(&a, "gather");
  lm_add_input(g, lm_value_info(&a, "ids", NR_DTYPE_INT64, 2, ids_d));
  lm_add_input(g, lm_value_info(&a, "other", NR_DTYPE_INT64, 1, other_d));
  lm_add_init(g, lm_tensor(&a, "E", NR_DTYPE_FLOAT, 2, e_d, table, sizeof table));
  Onnx__NodeProto *cast = lm_node(&a, "Cast", "cast", "ids", NULL, "ids32");
  Onnx__AttributeProto *to =
      lm_attr(&a, cast, "to", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  to->has_i = 1, to->i = NR_DTYPE_INT32;
  lm_add_node(g, cast);
  lm_add_node(g, lm_node(&a, "Gather", "gather", "E", "ids32", "emb"));
  lm_add_node(g, lm_node(&a, "Add", "add", "other", "other", "twice"));
  lm_add_output(g, lm_value_info(&a, "emb", NR_DTYPE_FLOAT, 3, emb_d));
  lm_add_output(g, lm_value_info(&a, "twice", NR_DTYPE_INT64, 1, other_d));
  return load_lm(t, &a, lm_model(&a, 8, 13, g));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(path);
}

static void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static bool write_tensor(const char *dir, const char *file, nr_dtype dt, int rank,
                         const int64_t *dims, const void *data) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  nr_value v = {dt, rank, {0}, (void *)data, false};
  for (int d = 0; d < rank; d++)
    v.dims[d] = dims[d];
  size_t n = strlen(file);
  bool npy = n > 4 && !strcmp(file + n - 4, ".npy");
  nr_error err = {0};
  nr_status st = npy ? nr_npy_write(path, &v, &err) : nr_pb_write(path, &v, NULL, &err);
  if (st)
    fprintf(stderr, "writing %s: %s\n", path, err.message);
  return !st;
}

static const int64_t x_dims[2] = {2, 3};

/* x of model_add filled with base, base + 1, ... */
static bool write_x(const char *dir, const char *file, float base) {
  float x[6];
  for (int i = 0; i < 6; i++)
    x[i] = base + (float)i;
  return write_tensor(dir, file, NR_DTYPE_FLOAT, 2, x_dims, x);
}

static void subdir(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
  mkdir(out, 0700);
}

/* The pair's output equals x + W, computed here in float. */
static bool output_is_x_plus_w(const nr_pair *p) {
  const float *x = p->inputs[0].data, *y = p->outputs[0].data;
  if (p->outputs[0].dtype != NR_DTYPE_FLOAT || p->outputs[0].rank != 2 ||
      p->outputs[0].dims[0] != 2 || p->outputs[0].dims[1] != 3)
    return false;
  for (int i = 0; i < 6; i++)
    if (y[i] != x[i] + add_w[i % 3])
      return false;
  return true;
}

/* The documented generator (splitmix64), written out again here. */
static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static bool same_buffer(const nr_buffer *a, const nr_buffer *b) {
  if (a->dtype != b->dtype || a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return !memcmp(a->data, b->data, nr_buffer_count(a) * nr_dtype_size(a->dtype));
}

/* ---- pairs: generated --------------------------------------------------------------- */

NR_TEST(tune_pairs_generate_defaults) {
  nr_model *m = model_add(t, false);
  REQUIRE(m);
  nr_pair_set set = {0}, two = {0}, again = {0}, other = {0};
  nr_error err = {0};
  nr_status st = nr_pairs_generate(m, 3, 7, NULL, 0, &set, &err);
  CHECK(st == NR_OK, "%s", err.message);
  CHECK(set.n == 3 && set.n_inputs == 1 && set.n_outputs == 1);
  for (int p = 0; !st && p < set.n; p++) {
    const nr_buffer *x = &set.pairs[p].inputs[0];
    CHECK(x->dtype == NR_DTYPE_FLOAT && x->rank == 2);
    CHECK(x->dims[0] == 2 && x->dims[1] == 3);
    for (int i = 0; i < 6; i++)
      CHECK(((float *)x->data)[i] >= -1 && ((float *)x->data)[i] <= 1);
    CHECK(output_is_x_plus_w(&set.pairs[p]), "pair %d output is not x + W", p);
  }
  REQUIRE(st == NR_OK);
  CHECK(!strcmp(set.pairs[1].origin, "generated seed 7 #1"), "'%s'", set.pairs[1].origin);
  /* Pair 0 starts from state 7, as the CLI's random inputs: u in [0, 1) from the top
   * 53 bits, value 2u - 1. */
  uint64_t state = 7;
  for (int i = 0; i < 6; i++) {
    float want = (float)((double)(splitmix(&state) >> 11) * 0x1p-52 - 1.0);
    CHECK(((float *)set.pairs[0].inputs[0].data)[i] == want, "element %d", i);
  }
  CHECK(!same_buffer(&set.pairs[0].inputs[0], &set.pairs[1].inputs[0]));
  /* Deterministic, and pair k does not depend on the count asked for. */
  CHECK(!nr_pairs_generate(m, 2, 7, NULL, 0, &two, &err));
  CHECK(!nr_pairs_generate(m, 3, 7, NULL, 0, &again, &err));
  CHECK(!nr_pairs_generate(m, 3, 8, NULL, 0, &other, &err));
  REQUIRE(two.n == 2 && again.n == 3 && other.n == 3);
  for (int p = 0; p < 2; p++)
    CHECK(same_buffer(&two.pairs[p].inputs[0], &set.pairs[p].inputs[0]), "pair %d", p);
  CHECK(nr_pairs_hash(&again) == nr_pairs_hash(&set));
  CHECK(nr_pairs_hash(&other) != nr_pairs_hash(&set));
  CHECK(nr_pairs_hash(&two) != nr_pairs_hash(&set));
  /* Appending: count 0 adds nothing, more pairs go after the first. */
  CHECK(!nr_pairs_generate(m, 0, 9, NULL, 0, &two, &err) && two.n == 2);
  CHECK(!nr_pairs_generate(m, 1, 9, NULL, 0, &two, &err) && two.n == 3);
  CHECK(!strcmp(two.pairs[2].origin, "generated seed 9 #0"));
  nr_pair_set_free(&set);
  nr_pair_set_free(&two);
  nr_pair_set_free(&again);
  nr_pair_set_free(&other);
  CHECK(set.n == 0 && set.pairs == NULL);
  nr_pair_set_free(NULL);
  nr_model_destroy(m);
}

NR_TEST(tune_pairs_generate_float_range) {
  nr_model *m = model_add(t, false);
  REQUIRE(m);
  nr_pair_set set = {0};
  nr_error err = {0};
  nr_input_range r[2] = {{"x:0", 10, 20}, {NULL, 0.5, 0.5}};
  REQUIRE(!nr_pairs_generate(m, 2, 1, r, 1, &set, &err), "%s", err.message);
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < 6; i++) {
      float v = ((float *)set.pairs[p].inputs[0].data)[i];
      CHECK(v >= 10 && v <= 20, "%g", v);
    }
  REQUIRE(!nr_pairs_generate(m, 1, 1, r + 1, 1, &set, &err), "%s", err.message);
  for (int i = 0; i < 6; i++)
    CHECK(((float *)set.pairs[2].inputs[0].data)[i] == 0.5f);
  CHECK(output_is_x_plus_w(&set.pairs[2]));
  nr_pair_set_free(&set);
  nr_model_destroy(m);
}

/* Over every generated pair, every element of input i lies in [lo, hi); *seen gets a
 * bit per value lo..lo+63 that occurred. */
static bool ints_within(const nr_pair_set *set, int i, int64_t lo, int64_t hi,
                        uint64_t *seen) {
  *seen = 0;
  for (int p = 0; p < set->n; p++) {
    const nr_buffer *b = &set->pairs[p].inputs[i];
    for (size_t k = 0; k < nr_buffer_count(b); k++) {
      int64_t v = ((const int64_t *)b->data)[k];
      if (v < lo || v >= hi)
        return false;
      if (v - lo < 64)
        *seen |= 1ull << (v - lo);
    }
  }
  return true;
}

NR_TEST(tune_pairs_generate_tables) {
  nr_model *m = model_gather(t);
  REQUIRE(m);
  nr_pair_set set = {0};
  nr_error err = {0};
  REQUIRE(!nr_pairs_generate(m, 4, 3, NULL, 0, &set, &err), "%s", err.message);
  uint64_t seen;
  /* ids index E's 5 rows (through the Cast); other keeps the default [0, 16). */
  CHECK(ints_within(&set, 0, 0, 5, &seen) && seen == 0x1f, "ids seen %llx",
        (unsigned long long)seen);
  CHECK(ints_within(&set, 1, 0, 16, &seen) && (seen >> 5) != 0, "other seen %llx",
        (unsigned long long)seen);
  for (int p = 0; p < set.n; p++) {
    const int64_t *ids = set.pairs[p].inputs[0].data, *other = set.pairs[p].inputs[1].data;
    const float *emb = set.pairs[p].outputs[0].data;
    const int64_t *twice = set.pairs[p].outputs[1].data;
    for (int k = 0; k < 8; k++) {
      CHECK(emb[2 * k] == 10.0f * (float)ids[k] && emb[2 * k + 1] == emb[2 * k] + 1,
            "pair %d emb %d", p, k);
      CHECK(twice[k] == 2 * other[k], "pair %d twice %d", p, k);
    }
  }
  nr_pair_set_free(&set);
  /* A named range beats the one for every input; ints take lo <= k < hi. */
  nr_input_range r[2] = {{NULL, -2, 0.5}, {"ids", 1, 3}};
  REQUIRE(!nr_pairs_generate(m, 4, 3, r, 2, &set, &err), "%s", err.message);
  CHECK(ints_within(&set, 0, 1, 3, &seen) && seen == 0x3, "ids seen %llx",
        (unsigned long long)seen);
  CHECK(ints_within(&set, 1, -2, 1, &seen) && seen == 0x7, "other seen %llx",
        (unsigned long long)seen);
  nr_pair_set_free(&set);
  /* [0.5, 1.5) holds the one integer 1; [-2, 0.5) used alone: -2, -1, 0 (negative
   * ids are valid Gather indices). */
  nr_input_range one = {"other", 0.5, 1.5};
  REQUIRE(!nr_pairs_generate(m, 2, 3, &one, 1, &set, &err), "%s", err.message);
  CHECK(ints_within(&set, 1, 1, 2, &seen));
  REQUIRE(!nr_pairs_generate(m, 2, 3, r, 1, &set, &err), "%s", err.message);
  nr_pair_set_free(&set);
  nr_model_destroy(m);
}

NR_TEST(tune_pairs_generate_errors) {
  nr_model *m = model_gather(t);
  REQUIRE(m);
  nr_pair_set set = {0};
  nr_error err = {0};
  REQUIRE(!nr_pairs_generate(m, 1, 1, NULL, 0, &set, &err));
  uint64_t before = nr_pairs_hash(&set);
  struct {
    nr_input_range r;
    const char *needle;
  } bad[] = {
      {{"nope", 0, 1}, "'nope'"},          /* a typo is not ignored */
      {{"ids", 0.2, 0.8}, "no integer"},   /* no integer in [0.2, 0.8) */
      {{"ids", 3, 1}, "lo <= hi"},
      {{"ids", 0, INFINITY}, "lo <= hi"},
      {{"other", 0, 1e30}, "leaves int64"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    nr_status st = nr_pairs_generate(m, 2, 1, &bad[k].r, 1, &set, &err);
    CHECK(st == NR_ERR_INVALID_ARGUMENT, "case %zu: %s", k, nr_status_str(st));
    CHECK(strstr(err.message, bad[k].needle), "case %zu: '%s'", k, err.message);
    CHECK(set.n == 1 && nr_pairs_hash(&set) == before, "case %zu left pairs", k);
  }
  CHECK(nr_pairs_generate(m, -1, 1, NULL, 0, &set, &err) == NR_ERR_INVALID_ARGUMENT);
  /* A set holds the pairs of one model. */
  nr_model *add = model_add(t, false);
  REQUIRE(add);
  CHECK(nr_pairs_generate(add, 1, 1, NULL, 0, &set, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(set.n == 1 && set.n_inputs == 2);
  nr_pair_set_free(&set);
  nr_model_destroy(add);
  nr_model_destroy(m);
  /* Shapes must be fixed first. */
  nr_model *dyn = model_add(t, true);
  REQUIRE(dyn);
  CHECK(nr_pairs_generate(dyn, 1, 1, NULL, 0, &set, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "x:0"), "'%s'", err.message);
  CHECK(set.n == 0);
  nr_model_destroy(dyn);
}

/* ---- pairs: folders ----------------------------------------------------------------- */

NR_TEST(tune_pairs_load_pb) {
  char dir[] = "/tmp/nr_pairs_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_add(t, false);
  float y[6] = {42, 42, 42, 42, 42, 42};
  nr_pair_set set = {0};
  nr_error err = {0};
  if (!m || !write_x(dir, "input_0.pb", 1) ||
      !write_tensor(dir, "output_0.pb", NR_DTYPE_FLOAT, 2, x_dims, y))
    goto done;
  /* Outputs given: taken as they are (the executor would say x + W). */
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  REQUIRE(set.n == 1 && set.n_inputs == 1 && set.n_outputs == 1);
  CHECK(!strcmp(set.pairs[0].origin, dir), "origin '%s'", set.pairs[0].origin);
  for (int i = 0; i < 6; i++) {
    CHECK(((float *)set.pairs[0].inputs[0].data)[i] == 1 + i);
    CHECK(((float *)set.pairs[0].outputs[0].data)[i] == 42);
  }
  /* Outputs absent: computed. */
  char out[600];
  snprintf(out, sizeof out, "%s/output_0.pb", dir);
  unlink(out);
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  REQUIRE(set.n == 2);
  CHECK(output_is_x_plus_w(&set.pairs[1]));
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  rm_tree(dir);
}

NR_TEST(tune_pairs_load_sets) {
  char dir[] = "/tmp/nr_pairs_XXXXXX", sub[600];
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_add(t, false);
  nr_pair_set set = {0};
  nr_error err = {0};
  static const int order[4] = {0, 1, 2, 10};
  bool ok = m != NULL;
  for (int k = 3; ok && k >= 0; k--) {
    char name[64];
    snprintf(name, sizeof name, "test_data_set_%d", order[k]);
    subdir(sub, sizeof sub, dir, name);
    ok = write_x(sub, "input_0.pb", 100.0f * (float)order[k]);
  }
  /* Not data sets: a folder whose number is not a number, a plain file. */
  subdir(sub, sizeof sub, dir, "test_data_set_x");
  ok = ok && write_x(sub, "input_0.pb", -1) && write_x(dir, "test_data_set_3", -1);
  if (ok) {
    CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
    CHECK(set.n == 4, "%d pairs", set.n);
  }
  for (int k = 0; ok && k < set.n && k < 4; k++) {
    CHECK(((float *)set.pairs[k].inputs[0].data)[0] == 100.0f * (float)order[k],
          "pair %d holds %g", k, ((float *)set.pairs[k].inputs[0].data)[0]);
    CHECK(output_is_x_plus_w(&set.pairs[k]));
    char tail[64];
    snprintf(tail, sizeof tail, "/test_data_set_%d", order[k]);
    const char *o = set.pairs[k].origin;
    size_t lo = strlen(o), lt = strlen(tail);
    CHECK(lo > lt && !strcmp(o + lo - lt, tail), "%s", o);
  }
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  rm_tree(dir);
}

NR_TEST(tune_pairs_load_npy) {
  char dir[] = "/tmp/nr_pairs_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_add(t, false);
  nr_pair_set set = {0};
  nr_error err = {0};
  float y[6] = {7, 7, 7, 7, 7, 7};
  /* "x:0" is read from x_0.npy and "y/out" from y_out.npy. */
  if (!m || !write_x(dir, "x_0.npy", 5))
    goto done;
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  REQUIRE(set.n == 1);
  CHECK(((float *)set.pairs[0].inputs[0].data)[5] == 10);
  CHECK(output_is_x_plus_w(&set.pairs[0]));
  if (write_tensor(dir, "y_out.npy", NR_DTYPE_FLOAT, 2, x_dims, y)) {
    CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
    REQUIRE(set.n == 2);
    CHECK(((float *)set.pairs[1].outputs[0].data)[3] == 7);
  }
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  rm_tree(dir);
}

/* Loading dir must fail with status and a message holding needle, leaving set as
 * it was. */
static void expect_load_fail(nr_test_state *t, nr_model *m, const char *dir,
                             nr_pair_set *set, nr_status status, const char *needle,
                             const char *what) {
  nr_error err = {0};
  int n = set->n;
  uint64_t h = nr_pairs_hash(set);
  nr_status st = nr_pairs_load_dir(m, dir, set, &err);
  CHECK(st == status, "%s: %s (%s), want %s", what, nr_status_str(st), err.message,
        nr_status_str(status));
  CHECK(strstr(err.message, needle), "%s: '%s' lacks '%s'", what, err.message, needle);
  CHECK(set->n == n && nr_pairs_hash(set) == h, "%s changed the set", what);
}

NR_TEST(tune_pairs_load_errors) {
  char dir[] = "/tmp/nr_pairs_XXXXXX", sub[600], path[700];
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_add(t, false), *g = model_gather(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  if (!m || !g || nr_pairs_generate(m, 1, 1, NULL, 0, &set, &err))
    goto done;
  subdir(sub, sizeof sub, dir, "a");
  expect_load_fail(t, m, sub, &set, NR_ERR_IO, "no reference data", "empty folder");
  expect_load_fail(t, m, "/nonexistent/nr", &set, NR_ERR_IO, "/nonexistent/nr",
                   "no folder");
  int64_t d32[2] = {3, 2};
  float x[6] = {0};
  double xd[6] = {0};
  write_tensor(sub, "input_0.pb", NR_DTYPE_FLOAT, 2, d32, x);
  expect_load_fail(t, m, sub, &set, NR_ERR_SHAPE, "float32[2x3]", "wrong shape");
  expect_load_fail(t, m, sub, &set, NR_ERR_SHAPE, "input_0.pb", "wrong shape names file");
  write_tensor(sub, "input_0.pb", NR_DTYPE_DOUBLE, 2, x_dims, xd);
  expect_load_fail(t, m, sub, &set, NR_ERR_SHAPE, "float64[2x3]", "wrong dtype");
  write_x(sub, "input_0.pb", 0);
  write_x(sub, "input_1.pb", 0);
  expect_load_fail(t, m, sub, &set, NR_ERR_INVALID_ARGUMENT, "input_1.pb", "extra input");
  snprintf(path, sizeof path, "%s/input_1.pb", sub);
  unlink(path);
  write_tensor(sub, "output_0.pb", NR_DTYPE_FLOAT, 2, d32, x);
  expect_load_fail(t, m, sub, &set, NR_ERR_SHAPE, "output_0.pb", "wrong output shape");
  /* A file that is not a TensorProto. */
  snprintf(path, sizeof path, "%s/output_0.pb", sub);
  FILE *f = fopen(path, "wb");
  if (f) {
    fputs("\xff\xff\xff\xff garbage", f);
    fclose(f);
  }
  expect_load_fail(t, m, sub, &set, NR_ERR_INVALID_MODEL, "output_0.pb", "corrupt file");
  /* Part of the outputs: model_gather has two. */
  int64_t ids_d[2] = {2, 4}, other_d[1] = {8}, emb_d[3] = {2, 4, 2};
  int64_t ids[8] = {0}, other[8] = {0};
  float emb[16] = {0};
  subdir(sub, sizeof sub, dir, "b");
  write_tensor(sub, "input_0.pb", NR_DTYPE_INT64, 2, ids_d, ids);
  write_tensor(sub, "input_1.pb", NR_DTYPE_INT64, 1, other_d, other);
  write_tensor(sub, "output_0.pb", NR_DTYPE_FLOAT, 3, emb_d, emb);
  nr_pair_set gs = {0};
  expect_load_fail(t, g, sub, &gs, NR_ERR_IO, "output_1.pb", "part of the outputs");
  /* .npy layout: the second input is missing. */
  subdir(sub, sizeof sub, dir, "c");
  write_tensor(sub, "ids.npy", NR_DTYPE_INT64, 2, ids_d, ids);
  expect_load_fail(t, g, sub, &gs, NR_ERR_IO, "other.npy", "missing .npy input");
  /* Complete now; but a set holds the pairs of one model. */
  write_tensor(sub, "other.npy", NR_DTYPE_INT64, 1, other_d, other);
  CHECK(!nr_pairs_load_dir(g, sub, &gs, &err) && gs.n == 1, "%s", err.message);
  expect_load_fail(t, g, sub, &set, NR_ERR_INVALID_ARGUMENT, "this one has 2 and 2",
                   "other model");
  expect_load_fail(t, m, sub, &gs, NR_ERR_INVALID_ARGUMENT, "this one has 1 and 1",
                   "other model");
  /* All or nothing across data sets: set 0 is good, set 1 is not. */
  subdir(sub, sizeof sub, dir, "d");
  char set0[700];
  subdir(set0, sizeof set0, sub, "test_data_set_0");
  write_x(set0, "input_0.pb", 0);
  subdir(set0, sizeof set0, sub, "test_data_set_1");
  write_tensor(set0, "input_0.pb", NR_DTYPE_FLOAT, 2, d32, x);
  expect_load_fail(t, m, sub, &set, NR_ERR_SHAPE, "test_data_set_1", "bad second set");
  nr_pair_set_free(&gs);
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  nr_model_destroy(g);
  rm_tree(dir);
}

/* ---- pairs: hash -------------------------------------------------------------------- */

NR_TEST(tune_pairs_hash) {
  /* FNV-1a 64 over the header of an empty set: three 8-byte zeros. */
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 24; i++)
    h = (h ^ 0) * 0x100000001b3ull;
  nr_pair_set empty = {0};
  CHECK(nr_pairs_hash(&empty) == h, "%016llx", (unsigned long long)nr_pairs_hash(&empty));
  CHECK(nr_pairs_hash(NULL) == 0xcbf29ce484222325ull);
  nr_model *m = model_add(t, false);
  REQUIRE(m);
  nr_pair_set a = {0}, b = {0};
  nr_error err = {0};
  REQUIRE(!nr_pairs_generate(m, 2, 5, NULL, 0, &a, &err));
  REQUIRE(!nr_pairs_generate(m, 2, 5, NULL, 0, &b, &err));
  /* The origin is not data. */
  free(b.pairs[0].origin);
  b.pairs[0].origin = strdup("somewhere else");
  CHECK(nr_pairs_hash(&a) == nr_pairs_hash(&b));
  /* One bit of one output. */
  uint8_t *bytes = b.pairs[1].outputs[0].data;
  bytes[23] ^= 1;
  CHECK(nr_pairs_hash(&a) != nr_pairs_hash(&b));
  bytes[23] ^= 1;
  /* Same bytes, another shape or dtype. */
  b.pairs[0].inputs[0].dims[0] = 3, b.pairs[0].inputs[0].dims[1] = 2;
  CHECK(nr_pairs_hash(&a) != nr_pairs_hash(&b));
  b.pairs[0].inputs[0].dims[0] = 2, b.pairs[0].inputs[0].dims[1] = 3;
  CHECK(nr_pairs_hash(&a) == nr_pairs_hash(&b));
  b.pairs[0].inputs[0].dtype = NR_DTYPE_INT32;
  CHECK(nr_pairs_hash(&a) != nr_pairs_hash(&b));
  b.pairs[0].inputs[0].dtype = NR_DTYPE_FLOAT;
  nr_pair_set_free(&a);
  nr_pair_set_free(&b);
  nr_model_destroy(m);
}

/* Rates pool over pairs, other metrics take the worst pair: four batch-1 pairs of which
 * one changed its top-1 answer have a top-1 loss of 0.25, while their rel_l2 loss is
 * the worst pair's. */
NR_TEST(tune_acc_rates_pool_over_pairs) {
  enum { P = 4, O = 1 };
  double losses[P * O * NR_METRIC_COUNT] = {0};
  for (int p = 0; p < P; p++) {
    losses[p * NR_METRIC_COUNT + NR_METRIC_TOP1] = p == 2 ? 1.0 : 0.0;
    losses[p * NR_METRIC_COUNT + NR_METRIC_REL_L2] = 0.01 * (p + 1);
    losses[p * NR_METRIC_COUNT + NR_METRIC_L0] = p == 0 ? 0.5 : 0.1;
  }
  CHECK(nr_losses_over_pairs(losses, P, O, 0, NR_METRIC_TOP1) == 0.25);
  CHECK(fabs(nr_losses_over_pairs(losses, P, O, 0, NR_METRIC_L0) - 0.2) < 1e-12);
  CHECK(nr_losses_over_pairs(losses, P, O, 0, NR_METRIC_REL_L2) == 0.04);
  nr_tolerance tol = {.metric = NR_METRIC_TOP1, .eps = 0.3};
  double margin;
  CHECK(nr_tolerance_check(&tol, losses, P, O, NULL, &margin) && fabs(margin - 0.05) < 1e-12);
  tol.eps = 0.2;
  CHECK(!nr_tolerance_check(&tol, losses, P, O, NULL, &margin) && margin < 0);
  tol = (nr_tolerance){.metric = NR_METRIC_REL_L2, .eps = 0.035};
  CHECK(!nr_tolerance_check(&tol, losses, P, O, NULL, NULL), "the worst pair decides rel_l2");
  losses[3 * NR_METRIC_COUNT + NR_METRIC_TOP1] = NAN;
  tol = (nr_tolerance){.metric = NR_METRIC_TOP1, .eps = 1.0};
  CHECK(isnan(nr_losses_over_pairs(losses, P, O, 0, NR_METRIC_TOP1)) &&
        !nr_tolerance_check(&tol, losses, P, O, NULL, NULL), "a NaN loss is never pooled away");
}
