/* decide.c - the tuner's decision statistics (decide.h has the contract).
 *
 * Key decision: every p-value and interval comes from the exact null distribution of
 * the signed-rank statistic, computed by counting (a dynamic program over rank sums,
 * each rank in or out with probability 1/2), never from a normal approximation or a
 * resample, so the stated error rate is the real one at small round counts and the
 * same data always give the same answer. Ties use doubled midranks, which keeps the
 * sums integers and the distribution exact conditional on the ties. */
#include "tune/decide.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* dist[s] = P(sum of the included ranks == s) for integer ranks r[0..n); total is
 * their sum; NULL on no memory. */
static double *rank_sum_dist(const int *r, int n, int total) {
  double *dist = calloc((size_t)total + 1, sizeof *dist);
  if (!dist)
    return NULL;
  dist[0] = 1;
  int reach = 0;
  for (int i = 0; i < n; i++) {
    for (int s = reach; s >= 0; s--)
      if (dist[s] != 0) {
        dist[s + r[i]] += 0.5 * dist[s];
        dist[s] *= 0.5;
      }
    reach += r[i];
  }
  return dist;
}

double nr_signrank_cdf(int n, double w) {
  if (w < 0)
    return 0;
  if (n <= 0)
    return 1;
  int total = n * (n + 1) / 2, *r = malloc(sizeof *r * (size_t)n);
  for (int i = 0; r && i < n; i++)
    r[i] = i + 1;
  double *dist = r ? rank_sum_dist(r, n, total) : NULL, p = 0;
  for (int s = 0; dist && s <= total && s <= w; s++)
    p += dist[s];
  free(r);
  if (!dist)
    return NAN;
  free(dist);
  return p > 1 ? 1 : p;
}

int nr_signrank_critical(int n, double alpha) {
  if (n <= 0)
    return -1;
  int total = n * (n + 1) / 2, *r = malloc(sizeof *r * (size_t)n), c = -1;
  for (int i = 0; r && i < n; i++)
    r[i] = i + 1;
  double *dist = r ? rank_sum_dist(r, n, total) : NULL, p = 0;
  for (int s = 0; dist && s <= total && (p += dist[s]) <= alpha / 2; s++)
    c = s;
  free(r);
  free(dist);
  return c;
}

typedef struct absval {
  double a;
  bool pos;
} absval;

static int absval_cmp(const void *x, const void *y) {
  double a = ((const absval *)x)->a, b = ((const absval *)y)->a;
  return (a > b) - (a < b);
}

/* Doubled midranks of v[0..m) (sorted by |x|) into r2; returns their sum. */
static int midranks2(const absval *v, int m, int *r2) {
  int total = 0;
  for (int i = 0; i < m;) {
    int j = i;
    while (j + 1 < m && v[j + 1].a == v[i].a)
      j++;
    for (int k = i; k <= j; k++) /* ranks i+1..j+1, mean (i+j+2)/2, doubled */
      r2[k] = i + j + 2;
    total += (j - i + 1) * (i + j + 2);
    i = j + 1;
  }
  return total;
}

double nr_signrank_p(const double *x, int n, double *w_plus) {
  absval *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
  int *r2 = malloc(sizeof *r2 * (size_t)(n > 0 ? n : 1)), m = 0;
  double p = 1;
  if (w_plus)
    *w_plus = 0;
  for (int i = 0; v && r2 && i < n; i++)
    if (isfinite(x[i]) && x[i] != 0)
      v[m++] = (absval){fabs(x[i]), x[i] > 0};
  if (!v || !r2 || m == 0) {
    free(v), free(r2);
    return v && r2 ? 1 : NAN;
  }
  qsort(v, (size_t)m, sizeof *v, absval_cmp);
  int total = midranks2(v, m, r2), w2 = 0;
  for (int i = 0; i < m; i++)
    w2 += v[i].pos ? r2[i] : 0;
  double *dist = rank_sum_dist(r2, m, total);
  if (dist) {
    double below = 0, above = 0;
    for (int s = 0; s <= total; s++) {
      below += s <= w2 ? dist[s] : 0;
      above += s >= w2 ? dist[s] : 0;
    }
    p = 2 * (below < above ? below : above);
    p = p > 1 ? 1 : p;
  } else {
    p = NAN;
  }
  if (w_plus)
    *w_plus = w2 / 2.0;
  free(dist), free(v), free(r2);
  return p;
}

static int dbl_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int nr_signrank_interval(const double *x, int n, double alpha, double *est, double *lo,
                         double *hi) {
  *est = *lo = *hi = NAN;
  int m = 0;
  for (int i = 0; i < n; i++)
    m += isfinite(x[i]) != 0;
  size_t walsh = (size_t)m * (size_t)(m + 1) / 2, k = 0;
  double *a = m ? malloc(sizeof *a * walsh) : NULL, *f = m ? malloc(sizeof *f * (size_t)m) : NULL;
  if (!a || !f) {
    free(a), free(f);
    return -1;
  }
  m = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(x[i]))
      f[m++] = x[i];
  for (int i = 0; i < m; i++)
    for (int j = i; j < m; j++)
      a[k++] = 0.5 * (f[i] + f[j]);
  qsort(a, walsh, sizeof *a, dbl_cmp);
  *est = walsh % 2 ? a[walsh / 2] : 0.5 * (a[walsh / 2 - 1] + a[walsh / 2]);
  int c = nr_signrank_critical(m, alpha);
  *lo = c < 0 ? -INFINITY : a[c];
  *hi = c < 0 ? INFINITY : a[walsh - 1 - (size_t)c];
  free(a), free(f);
  return 0;
}

void nr_holm_adjust(const double *p, int k, double *adj) {
  /* selection order by p, ties by index; k is small (the finalists) */
  bool *done = calloc((size_t)(k > 0 ? k : 1), sizeof *done);
  double run = 0;
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int i = 0; done && i < k; i++)
      if (!done[i] && (best < 0 || p[i] < p[best] || (isnan(p[best]) && !isnan(p[i]))))
        best = i;
    if (best < 0) { /* no memory: Bonferroni, which Holm never exceeds */
      for (int i = 0; i < k; i++)
        adj[i] = isnan(p[i]) ? 1 : (p[i] * k > 1 ? 1 : p[i] * k);
      break;
    }
    done[best] = true;
    double v = isnan(p[best]) ? 1 : p[best] * (k - j);
    run = v > run ? v : run;
    adj[best] = run > 1 ? 1 : run;
  }
  free(done);
}

int nr_decide_min_rounds(int k, double alpha) {
  int m = 1;
  while (m < 64 && ldexp(1.0, 1 - m) > alpha / (k > 0 ? k : 1))
    m++;
  return m;
}

/* Measured with bench/tune/select_bench.c at sigma 0.0345 (the per-round log-ratio
 * noise of a tuning session on a loaded 2-core host), 2000 sessions a cell: power at a
 * true 5% gain with 9 rounds is 81% for three finalists but 52-54% for seven or
 * eight; with these rounds every count from 1 to 8 is at 84% or more, and false
 * accepts stay at 1.6-3.0%. */
static const unsigned char planned_rounds[8] = {9, 9, 9, 10, 10, 11, 11, 11};

int nr_decide_planned_rounds(int k) {
  return planned_rounds[k < 1 ? 0 : k > 8 ? 7 : k - 1];
}

/* Finalist i's decision without Holm: estimate, interval, p (1 when no rounds). */
static void decide_one(const double *ratios, int rounds, int n, int i, double *x,
                       nr_decision *d) {
  *d = (nr_decision){0, NAN, NAN, NAN, 1, 1, false};
  int m = 0;
  for (int r = 0; r < rounds; r++) {
    double v = ratios[(size_t)r * n + i];
    if (isfinite(v) && v > 0)
      x[m++] = log(v);
  }
  d->rounds = m;
  double est, lo, hi;
  if (!m || nr_signrank_interval(x, m, NR_DECIDE_ALPHA, &est, &lo, &hi))
    return;
  d->ratio = exp(est), d->lo = exp(lo), d->hi = exp(hi);
  d->p = nr_signrank_p(x, m, NULL);
  if (isnan(d->p)) /* no memory: no evidence */
    d->p = 1;
}

int nr_decide_finalists(const double *ratios, int rounds, int n, nr_decision *out) {
  double *x = malloc(sizeof *x * (size_t)(rounds > 0 ? rounds : 1));
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  double *adj = malloc(sizeof *adj * (size_t)(n > 0 ? n : 1));
  if (!x || !p || !adj) {
    for (int i = 0; i < n; i++)
      out[i] = (nr_decision){0, NAN, NAN, NAN, 1, 1, false};
    free(x), free(p), free(adj);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    decide_one(ratios, rounds, n, i, x, &out[i]);
    p[i] = out[i].p;
  }
  nr_holm_adjust(p, n, adj);
  for (int i = 0; i < n; i++) {
    out[i].p_holm = adj[i];
    out[i].accepted = adj[i] <= NR_DECIDE_ALPHA && out[i].ratio <= 1.0 - NR_DECIDE_MIN_GAIN;
  }
  free(x), free(p), free(adj);
  return 0;
}

static bool one_side(const double *ratios, int done, int n, int i) {
  int below = 0, above = 0;
  for (int r = 0; r < done; r++) {
    double v = ratios[(size_t)r * n + i];
    below += isfinite(v) && v < 1.0 - NR_DECIDE_MARGIN;
    above += isfinite(v) && v > 1.0 + NR_DECIDE_MARGIN;
  }
  return below == done || above == done;
}

bool nr_decide_settled(const double *ratios, int done, int n) {
  if (n <= 0 || done < nr_decide_min_rounds(n, NR_DECIDE_ALPHA) || done > NR_DECIDE_MAX_ROUNDS)
    return false;
  for (int i = 0; i < n; i++)
    if (!one_side(ratios, done, n, i))
      return false;
  return true;
}
