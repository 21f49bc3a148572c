/* test_tune_confidence.c - the confidence bounds and margins of the tuner's accuracy
 * report (src/tune/confidence.c, the margin and per-output summary parts of
 * src/tune/accuracy.c).
 *
 * No expected value here comes from the code under test. The incomplete beta is
 * checked on its closed forms (I_x(1,1) = x, I_x(a,1) = x^a, I_x(1,b) = 1-(1-x)^b,
 * I_1/2(a,a) = 1/2, the reflection I_x(a,b) = 1 - I_1-x(b,a)). The Clopper-Pearson
 * bound is checked on its closed forms (x = 0: 1 - 0.05^(1/n); x = n - 1:
 * 0.95^(1/n); x = n: 1) and, for every x < n on a grid of n, against its definition:
 * the binomial probability of x or fewer events at the bound, summed here term by
 * term in long double (a pmf recurrence, no gamma function), must be 5%. Margins and
 * quantiles use dyadic numbers so every comparison is exact. */
#include "tune/accuracy.h"
#include "tune/confidence.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool close_rel(double got, double want, double rel) {
  return fabs(got - want) <= rel * fabs(want);
}

/* P(X <= x) for X ~ Binomial(n, p), by the recurrence
 * pmf(k + 1) = pmf(k) (n - k) / (k + 1) p / (1 - p). */
static long double binom_cdf(int x, int n, long double p) {
  long double pmf = powl(1 - p, n), sum = pmf;
  for (int k = 0; k < x; k++) {
    pmf *= (long double)(n - k) / (k + 1) * p / (1 - p);
    sum += pmf;
  }
  return sum;
}

/* ---- the incomplete beta ------------------------------------------------------------ */

NR_TEST(tune_conf_beta_closed_forms) {
  static const double xs[] = {1e-9, 0.01, 0.2, 0.5, 0.77, 0.999};
  for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) {
    double x = xs[i];
    CHECK(close_rel(nr_beta_inc(1, 1, x), x, 1e-12), "I_%g(1,1) = %.17g", x,
          nr_beta_inc(1, 1, x));
    CHECK(close_rel(nr_beta_inc(2.5, 1, x), pow(x, 2.5), 1e-11), "I_%g(2.5,1) = %.17g", x,
          nr_beta_inc(2.5, 1, x));
    double want = -expm1(7.25 * log1p(-x)); /* 1 - (1-x)^7.25 */
    CHECK(close_rel(nr_beta_inc(1, 7.25, x), want, 1e-11),
          "I_%g(1,7.25) = %.17g, want %.17g", x, nr_beta_inc(1, 7.25, x), want);
    double left = nr_beta_inc(3.5, 9, x), right = nr_beta_inc(9, 3.5, 1 - x);
    CHECK(fabs(left - (1 - right)) <= 1e-13, "reflection at %g: %.17g vs 1 - %.17g", x,
          left, right);
  }
  static const double as[] = {1, 3, 40.5, 1000, 250000};
  for (size_t i = 0; i < sizeof as / sizeof *as; i++)
    CHECK(fabs(nr_beta_inc(as[i], as[i], 0.5) - 0.5) <= 1e-12, "I_1/2(%g,%g) = %.17g",
          as[i], as[i], nr_beta_inc(as[i], as[i], 0.5));
  CHECK(nr_beta_inc(2, 3, 0) == 0 && nr_beta_inc(2, 3, 1) == 1);
  CHECK(isnan(nr_beta_inc(0, 1, 0.5)) && isnan(nr_beta_inc(1, -1, 0.5)));
  CHECK(isnan(nr_beta_inc(1, 1, -0.1)) && isnan(nr_beta_inc(1, 1, 1.5)));
  CHECK(isnan(nr_beta_inc(NAN, 1, 0.5)) && isnan(nr_beta_inc(1, INFINITY, 0.5)));
}

/* The quantile inverts the closed form I_p(a, 1) = p^a: p = q^(1/a). */
NR_TEST(tune_conf_beta_quantile) {
  static const double qs[] = {0.01, 0.05, 0.5, 0.95};
  for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
    double want = pow(qs[i], 1 / 3.0), got = nr_beta_quantile(3, 1, qs[i]);
    CHECK(close_rel(got, want, 1e-12) && got >= want * (1 - 1e-15),
          "quantile %g of Beta(3,1) = %.17g, want %.17g", qs[i], got, want);
  }
  CHECK(nr_beta_quantile(2, 2, 0) == 0 || nr_beta_quantile(2, 2, 0) < 1e-300);
  CHECK(nr_beta_quantile(2, 2, 1) == 1);
  CHECK(isnan(nr_beta_quantile(2, 2, 1.5)) && isnan(nr_beta_quantile(-2, 2, 0.5)));
}

/* ---- Clopper-Pearson ---------------------------------------------------------------- */

/* No event in n trials: the bound solves (1 - p)^n = 0.05. */
NR_TEST(tune_conf_cp_no_event) {
  static const int64_t ns[] = {1, 2, 10, 100, 1000, 12345, 10000000};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
    double want = -expm1(log(0.05) / (double)ns[i]);
    double got = nr_clopper_pearson_upper(0, ns[i], 0.95);
    CHECK(close_rel(got, want, 1e-11), "x=0 n=%lld: %.17g, want %.17g", (long long)ns[i],
          got, want);
  }
  /* The "rule of three" table value: 0 of 100 gives 2.95%. */
  CHECK(fabs(nr_clopper_pearson_upper(0, 100, 0.95) - 0.0295) < 5e-5);
}

/* All but one: 1 - p^n = 0.05, so p = 0.95^(1/n); all of them: 1. */
NR_TEST(tune_conf_cp_extremes) {
  static const int64_t ns[] = {1, 2, 7, 100, 1000000};
  for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
    int64_t n = ns[i];
    CHECK(nr_clopper_pearson_upper(n, n, 0.95) == 1, "x=n=%lld", (long long)n);
    CHECK(nr_clopper_pearson_upper(n + 3, n, 0.95) == 1);
    if (n < 2)
      continue;
    double want_gap = -expm1(log(0.95) / (double)n); /* 1 - 0.95^(1/n) */
    double gap = 1 - nr_clopper_pearson_upper(n - 1, n, 0.95);
    CHECK(close_rel(gap, want_gap, 1e-6), "x=n-1, n=%lld: 1 - bound = %.17g, want %.17g",
          (long long)n, gap, want_gap);
  }
  CHECK(nr_clopper_pearson_upper(0, 0, 0.95) == 1, "nothing seen: nothing known");
  CHECK(isnan(nr_clopper_pearson_upper(-1, 10, 0.95)));
  CHECK(isnan(nr_clopper_pearson_upper(1, 10, 1.0)) &&
        isnan(nr_clopper_pearson_upper(1, 10, 0)));
}

/* Every x < n on a grid of n: at the bound, x or fewer events have probability 5%,
 * and the bound grows with x. */
NR_TEST(tune_conf_cp_matches_binomial) {
  int ns[48], count = 0;
  for (int n = 1; n <= 40; n++)
    ns[count++] = n;
  ns[count++] = 57, ns[count++] = 100, ns[count++] = 250;
  for (int i = 0; i < count; i++) {
    int n = ns[i];
    double before = 0;
    for (int x = 0; x < n; x++) {
      double u = nr_clopper_pearson_upper(x, n, 0.95);
      long double tail = binom_cdf(x, n, (long double)u);
      CHECK(u > before && u < 1, "x=%d n=%d: bound %.17g after %.17g", x, n, u, before);
      CHECK(fabsl(tail - 0.05L) <= 1e-9L, "x=%d n=%d: P(X <= x) at %.17g is %.12Lg", x, n,
            u, tail);
      before = u;
    }
  }
  /* A textbook value: 1 of 10 gives 39.4%. */
  CHECK(fabs(nr_clopper_pearson_upper(1, 10, 0.95) - 0.394) < 5e-4);
}

/* ---- margins ------------------------------------------------------------------------ */

/* One pair, two outputs: a (bound 1, loss 0.75) and b (bound 2 by override, loss 1). */
NR_TEST(tune_conf_min_margin_rule) {
  double l[2 * NR_METRIC_COUNT] = {0};
  l[NR_METRIC_LINF] = 0.75;
  l[NR_METRIC_COUNT + NR_METRIC_LINF] = 1.0;
  const char *names[2] = {"a", "b"};
  nr_tolerance tol = {.metric = NR_METRIC_LINF,
                      .eps = 1,
                      .n_overrides = 1,
                      .override_name = {"b"},
                      .override_eps = {2}};
  double margin = 0, frac = 0;
  /* a leaves 0.25 of 1 (25%), b 1 of 2 (50%): the smallest of each. */
  CHECK(nr_tolerance_margins(&tol, l, 1, 2, names, &margin, &frac));
  CHECK(margin == 0.25 && frac == 0.25, "margin %g fraction %g", margin, frac);
  tol.min_margin = 0.25; /* a at exactly (1 - 0.25) x 1 */
  CHECK(nr_tolerance_margins(&tol, l, 1, 2, names, &margin, &frac));
  tol.min_margin = 0.375;
  CHECK(!nr_tolerance_margins(&tol, l, 1, 2, names, &margin, &frac), "a is over 0.625");
  CHECK(margin == 0.25 && frac == 0.25, "the margin stays against the whole bound");
  CHECK(!nr_tolerance_check(&tol, l, 1, 2, names, NULL));
  l[NR_METRIC_LINF] = 0.5; /* a at 50%, b at 50%: within 0.375 */
  CHECK(nr_tolerance_check(&tol, l, 1, 2, names, NULL));
  tol.min_margin = 0.5;
  CHECK(nr_tolerance_check(&tol, l, 1, 2, names, NULL), "b at exactly 1 of 2");
  tol.min_margin = 0.625;
  CHECK(!nr_tolerance_check(&tol, l, 1, 2, names, NULL));
  static const double bad[] = {1.0, 1.5, -0.125, NAN};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tol.min_margin = bad[i];
    CHECK(!nr_tolerance_margins(&tol, l, 1, 2, names, &margin, &frac) &&
              margin == -INFINITY && frac == -INFINITY,
          "min_margin %g accepted", bad[i]);
  }
}

NR_TEST(tune_conf_margin_fraction) {
  CHECK(nr_margin_fraction(1e-3, 2.5e-4) == 1 - 0.25);
  CHECK(nr_margin_fraction(4, 5) == -0.25);
  CHECK(nr_margin_fraction(4, 4) == 0);
  CHECK(nr_margin_fraction(0, 0) == 1 && nr_margin_fraction(1, 0) == 1);
  CHECK(nr_margin_fraction(INFINITY, 7) == 1 &&
        nr_margin_fraction(INFINITY, INFINITY) == 1);
  CHECK(nr_margin_fraction(0, 1e-30) == -INFINITY);
  CHECK(nr_margin_fraction(NAN, 0) == -INFINITY &&
        nr_margin_fraction(1, NAN) == -INFINITY);
}

/* ---- one output over a set of pairs ------------------------------------------------- */

NR_TEST(tune_conf_metric_trials) {
  float data[15] = {0};
  nr_buffer b = {NR_DTYPE_FLOAT, 2, {3, 5}, data}, scalar = {NR_DTYPE_FLOAT, 0, {0}, data};
  nr_buffer empty = {NR_DTYPE_FLOAT, 1, {0}, data};
  CHECK(nr_metric_trials(NR_METRIC_TOP1, &b) == 3, "rows along the last axis");
  CHECK(nr_metric_trials(NR_METRIC_L0, &b) == 15, "elements");
  CHECK(nr_metric_trials(NR_METRIC_TOP1, &scalar) == 1 &&
        nr_metric_trials(NR_METRIC_L0, &scalar) == 1);
  CHECK(nr_metric_trials(NR_METRIC_TOP1, &empty) == 0 &&
        nr_metric_trials(NR_METRIC_L0, &empty) == 0);
  CHECK(nr_metric_trials(NR_METRIC_REL_L2, &b) == 0 &&
        nr_metric_trials(NR_METRIC_L0, NULL) == 0);
}

/* 100 batch-1 pairs, one changed answer (pair 37): 1 of 100 rows, and the bound is
 * the p where P(X <= 1 | 100, p) = 5%. With 4 rows a pair, rates 0.25 and 0.5 are one
 * and two rows. */
NR_TEST(tune_conf_top1_counts_and_bound) {
  enum { P = 100 };
  double *l = calloc(P * NR_METRIC_COUNT, sizeof *l);
  REQUIRE(l);
  l[37 * NR_METRIC_COUNT + NR_METRIC_TOP1] = 1;
  nr_tolerance tol = {.metric = NR_METRIC_TOP1, .eps = 0.02};
  nr_output_accuracy a;
  nr_output_accuracy_compute(&tol, l, P, 1, 0, NULL, 1, &a);
  CHECK(a.n_pairs == P && a.trials == 100 && a.errors == 1, "%lld of %lld",
        (long long)a.errors, (long long)a.trials);
  CHECK(a.loss == 0.01 && a.bound == 0.02 && a.max == 1, "loss %g max %g", a.loss, a.max);
  CHECK(fabs(a.fraction - 0.5) < 1e-15 && fabs(a.margin - 0.01) < 1e-15);
  long double tail = binom_cdf(1, 100, (long double)a.upper);
  CHECK(fabsl(tail - 0.05L) < 1e-9L, "bound %.17g: P(X <= 1) = %.12Lg", a.upper, tail);
  l[37 * NR_METRIC_COUNT + NR_METRIC_TOP1] = 0.25;
  l[50 * NR_METRIC_COUNT + NR_METRIC_TOP1] = 0.5;
  nr_output_accuracy_compute(&tol, l, P, 1, 0, NULL, 4, &a);
  CHECK(a.trials == 400 && a.errors == 3, "%lld of %lld", (long long)a.errors,
        (long long)a.trials);
  tail = binom_cdf(3, 400, (long double)a.upper);
  CHECK(fabsl(tail - 0.05L) < 1e-9L, "bound %.17g: P(X <= 3) = %.12Lg", a.upper, tail);
  /* A pair whose rate is not finite counts as all wrong; unknown trials, no bound. */
  l[60 * NR_METRIC_COUNT + NR_METRIC_TOP1] = INFINITY;
  nr_output_accuracy_compute(&tol, l, P, 1, 0, NULL, 4, &a);
  CHECK(a.errors == 7, "%lld", (long long)a.errors);
  nr_output_accuracy_compute(&tol, l, P, 1, 0, NULL, 0, &a);
  CHECK(a.trials == 0 && isnan(a.upper));
  free(l);
}

/* A continuous metric over 20 pairs holding 1..20 in a scrambled order: max 20, and
 * the 95th percentile between closest ranks is 19 + 0.05 * (20 - 19) = 19.05. No
 * trials, no bound. Output 1 (bound 32 by override) is read, not output 0. */
NR_TEST(tune_conf_continuous_quantiles) {
  enum { P = 20 };
  double l[P * 2 * NR_METRIC_COUNT] = {0};
  for (int p = 0; p < P; p++) {
    l[(p * 2 + 1) * NR_METRIC_COUNT + NR_METRIC_L1] = (double)((p * 7) % P + 1);
    l[(p * 2) * NR_METRIC_COUNT + NR_METRIC_L1] = 1000;
  }
  nr_tolerance tol = {.metric = NR_METRIC_L1,
                      .eps = 1,
                      .n_overrides = 1,
                      .override_name = {"y"},
                      .override_eps = {32}};
  nr_output_accuracy a;
  nr_output_accuracy_compute(&tol, l, P, 2, 1, "y", 0, &a);
  CHECK(a.max == 20 && fabs(a.p95 - 19.05) < 1e-12, "max %g p95 %.17g", a.max, a.p95);
  CHECK(a.loss == 20 && a.bound == 32 && a.margin == 12 && a.fraction == 0.375,
        "loss %g bound %g margin %g fraction %g", a.loss, a.bound, a.margin, a.fraction);
  CHECK(a.trials == 0 && isnan(a.upper));
  nr_output_accuracy_compute(&tol, l, P, 2, 1, "y", 50, &a);
  CHECK(a.trials == 0 && isnan(a.upper), "a continuous metric has no trials");
  l[(3 * 2 + 1) * NR_METRIC_COUNT + NR_METRIC_L1] = NAN;
  nr_output_accuracy_compute(&tol, l, P, 2, 1, "y", 0, &a);
  CHECK(isnan(a.max) && isnan(a.p95) && isnan(a.loss) && a.fraction == -INFINITY);
  nr_output_accuracy_compute(&tol, l, 1, 2, 1, "y", 0, &a); /* pair 0 alone: 1 */
  CHECK(a.max == 1 && a.p95 == 1);
}
