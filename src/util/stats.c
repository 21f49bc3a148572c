/* stats.c - timing statistics (see stats.h). Sorting copies keeps the callers' arrays
 * in measurement order, which the tuner uses to spot drift. The bootstrap uses its
 * own splitmix64 generator so results do not depend on the C library's rand(). */
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Quantile of already sorted data. */
static double sorted_quantile(const double *s, size_t n, double q) {
  if (n == 0)
    return 0;
  if (q <= 0)
    return s[0];
  if (q >= 1)
    return s[n - 1];
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double frac = pos - (double)i;
  return i + 1 < n ? s[i] + (s[i + 1] - s[i]) * frac : s[i];
}

static double *sorted_copy(const double *x, size_t n) {
  double *s = malloc((n ? n : 1) * sizeof *s);
  if (!s)
    return NULL;
  memcpy(s, x, n * sizeof *s);
  qsort(s, n, sizeof *s, cmp_double);
  return s;
}

double nr_stats_quantile(const double *x, size_t n, double q) {
  double *s = sorted_copy(x, n);
  if (!s)
    return NAN;
  double v = sorted_quantile(s, n, q);
  free(s);
  return v;
}

double nr_stats_mean(const double *x, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += x[i];
  return n ? sum / (double)n : 0;
}

double nr_stats_stdev(const double *x, size_t n) {
  if (n < 2)
    return 0;
  double m = nr_stats_mean(x, n), ss = 0;
  for (size_t i = 0; i < n; i++)
    ss += (x[i] - m) * (x[i] - m);
  return sqrt(ss / (double)(n - 1));
}

/* k-th smallest of a[0..n) by quickselect (reorders a): O(n) per bootstrap resample
 * instead of a sort, which matters for the tens of thousands of iterations a small
 * model produces in a second. */
static double select_kth(double *a, size_t n, size_t k) {
  size_t lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = a[lo + (hi - lo) / 2];
    size_t i = lo, j = hi;
    while (i <= j) {
      while (a[i] < pivot)
        i++;
      while (a[j] > pivot)
        j--;
      if (i <= j) {
        double t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        if (j == 0)
          break;
        j--;
      }
    }
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      return a[k];
  }
  return a[k];
}

/* Median of a[0..n) (reorders a), interpolated as sorted_quantile(.., 0.5). */
static double select_median(double *a, size_t n) {
  double hi = select_kth(a, n, n / 2);
  if (n % 2)
    return hi;
  double lo = a[0]; /* after selection a[0..n/2) are all <= hi: take their max */
  for (size_t i = 1; i < n / 2; i++)
    if (a[i] > lo)
      lo = a[i];
  return lo + (hi - lo) * 0.5;
}

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int nr_stats_median_ci(const double *x, size_t n, int resamples, uint64_t seed,
                       double *lo, double *hi) {
  *lo = *hi = nr_stats_quantile(x, n, 0.5);
  if (n < 2 || resamples < 1)
    return 0;
  double *sample = malloc(n * sizeof *sample);
  double *medians = malloc((size_t)resamples * sizeof *medians);
  if (!sample || !medians) {
    free(sample);
    free(medians);
    return -1;
  }
  uint64_t state = seed;
  for (int r = 0; r < resamples; r++) {
    for (size_t i = 0; i < n; i++)
      sample[i] = x[splitmix64(&state) % n];
    medians[r] = select_median(sample, n);
  }
  qsort(medians, (size_t)resamples, sizeof *medians, cmp_double);
  *lo = sorted_quantile(medians, (size_t)resamples, 0.025);
  *hi = sorted_quantile(medians, (size_t)resamples, 0.975);
  free(sample);
  free(medians);
  return 0;
}

int nr_stats_compute(const double *x, size_t n, uint64_t seed, nr_stats *out) {
  memset(out, 0, sizeof *out);
  out->n = n;
  if (n == 0)
    return 0;
  double *s = sorted_copy(x, n);
  if (!s)
    return -1;
  out->median = sorted_quantile(s, n, 0.5);
  out->p90 = sorted_quantile(s, n, 0.90);
  out->p99 = sorted_quantile(s, n, 0.99);
  out->min = s[0];
  out->max = s[n - 1];
  free(s);
  out->mean = nr_stats_mean(x, n);
  out->stdev = nr_stats_stdev(x, n);
  return nr_stats_median_ci(x, n, NR_STATS_RESAMPLES, seed, &out->ci95_lo, &out->ci95_hi);
}
