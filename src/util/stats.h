/* stats.h - summary statistics over per-iteration timings (milliseconds), shared by
 * `nnroute bench` and the tuner.
 *
 * Percentiles use linear interpolation between closest ranks (numpy's default), so
 * the median of an even count is the mean of the middle two. The confidence interval
 * of the median is a seeded percentile bootstrap: the same data and seed always give
 * the same interval, which keeps tuning reports reproducible. */
#ifndef NR_UTIL_STATS_H
#define NR_UTIL_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct nr_stats {
  size_t n;
  double median, mean, min, max, p90, p99;
  double stdev;            /* sample standard deviation (n - 1); 0 when n < 2 */
  double ci95_lo, ci95_hi; /* bootstrap 95% confidence interval of the median */
} nr_stats;

#define NR_STATS_RESAMPLES 1000

/* The q-quantile (0..1) of x (n values, any order; x is not modified). 0 when n == 0. */
double nr_stats_quantile(const double *x, size_t n, double q);
double nr_stats_mean(const double *x, size_t n);
/* Sample standard deviation; 0 when n < 2. */
double nr_stats_stdev(const double *x, size_t n);
/* Percentile bootstrap of the median: `resamples` resamples drawn with a generator
 * seeded by seed; writes the 2.5% and 97.5% quantiles of the resampled medians.
 * Returns 0, or -1 when memory runs out (lo = hi = the median then). */
int nr_stats_median_ci(const double *x, size_t n, int resamples, uint64_t seed,
                       double *lo, double *hi);
/* Everything above at once (NR_STATS_RESAMPLES resamples). Returns 0 or -1 (no
 * memory); with n == 0 every field is 0. */
int nr_stats_compute(const double *x, size_t n, uint64_t seed, nr_stats *out);

#endif
