/* test_stats.c - timing statistics on data with known answers, the bootstrap's
 * determinism and coverage, and the quickselect median against a sort. */
#include "rng.h"
#include "util/stats.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>

#define NEAR(a, b) (fabs((double)(a) - (b)) <= 1e-9 * (1 + fabs((double)(b))))

NR_TEST(stats_known_values) {
  const double x[] = {5, 1, 4, 2, 3}; /* unsorted on purpose */
  nr_stats s;
  REQUIRE(nr_stats_compute(x, 5, 1, &s) == 0);
  CHECK(s.n == 5);
  CHECK(NEAR(s.median, 3) && NEAR(s.mean, 3) && NEAR(s.min, 1) && NEAR(s.max, 5));
  CHECK(NEAR(s.stdev, sqrt(2.5)), "stdev %g", s.stdev);
  CHECK(NEAR(s.p90, 4.6), "p90 %g", s.p90);   /* 1 + 0.9 * 4 = pos 3.6 -> 4.6 */
  CHECK(NEAR(s.p99, 4.96), "p99 %g", s.p99);
  CHECK(s.ci95_lo <= s.median && s.median <= s.ci95_hi);
  CHECK(s.ci95_lo >= 1 && s.ci95_hi <= 5);
  CHECK(x[0] == 5 && x[4] == 3, "input reordered");

  const double even[] = {4, 1, 3, 2};
  CHECK(NEAR(nr_stats_quantile(even, 4, 0.5), 2.5));
  CHECK(NEAR(nr_stats_quantile(even, 4, 0), 1) && NEAR(nr_stats_quantile(even, 4, 1), 4));
  const double one[] = {7};
  REQUIRE(nr_stats_compute(one, 1, 1, &s) == 0);
  CHECK(s.median == 7 && s.stdev == 0 && s.ci95_lo == 7 && s.ci95_hi == 7);
  REQUIRE(nr_stats_compute(NULL, 0, 1, &s) == 0);
  CHECK(s.n == 0 && s.median == 0);
}

NR_TEST(stats_bootstrap_is_seeded_and_covers) {
  enum { N = 501 };
  double x[N];
  uint64_t seed = 12345;
  nr_rng r = nr_rng_make(seed);
  for (int i = 0; i < N; i++) { /* skewed timings: 1 ms plus an exponential tail */
    double u = nr_rng_unit(&r);
    x[i] = 1.0 - 0.2 * log(u);
  }
  double lo1, hi1, lo2, hi2, lo3, hi3;
  REQUIRE(nr_stats_median_ci(x, N, 1000, 7, &lo1, &hi1) == 0);
  REQUIRE(nr_stats_median_ci(x, N, 1000, 7, &lo2, &hi2) == 0);
  REQUIRE(nr_stats_median_ci(x, N, 1000, 8, &lo3, &hi3) == 0);
  double med = nr_stats_quantile(x, N, 0.5);
  CHECK(lo1 == lo2 && hi1 == hi2, "seed %llu: same seed, different interval",
        (unsigned long long)seed);
  CHECK(lo1 < med && med < hi1, "seed %llu: [%g, %g] misses the median %g",
        (unsigned long long)seed, lo1, hi1, med);
  /* The true median of 1 + Exp(mean 0.2) is 1 + 0.2 ln 2; the interval is narrow. */
  CHECK(hi1 - lo1 < 0.1 && lo1 < 1 + 0.2 * log(2) + 0.05 && hi1 > 1 + 0.2 * log(2) - 0.05,
        "seed %llu: [%g, %g]", (unsigned long long)seed, lo1, hi1);
  CHECK(fabs(lo3 - lo1) < 0.05 && fabs(hi3 - hi1) < 0.05);
}

/* The bootstrap's quickselect median must agree with the sorted quantile, with ties. */
NR_TEST(stats_median_with_ties_matches_sort) {
  nr_rng r = nr_rng_make(99);
  for (int n = 1; n < 40; n++) {
    double x[40];
    for (int i = 0; i < n; i++) {
      x[i] = (double)(nr_rng_u32(&r) % 5);
    }
    double lo, hi;
    nr_stats_median_ci(x, (size_t)n, 50, 3, &lo, &hi);
    double med = nr_stats_quantile(x, (size_t)n, 0.5);
    CHECK(lo <= hi && lo >= 0 && hi <= 4, "n=%d: [%g, %g] median %g", n, lo, hi, med);
    /* a resample of identical values has that value as its median */
    for (int i = 0; i < n; i++)
      x[i] = 2;
    nr_stats_median_ci(x, (size_t)n, 20, 3, &lo, &hi);
    CHECK(lo == 2 && hi == 2, "n=%d: constant data gave [%g, %g]", n, lo, hi);
  }
}
