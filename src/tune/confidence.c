/* confidence.c - the incomplete beta function, its quantile and the Clopper-Pearson
 * bound (confidence.h).
 *
 * I_x(a, b) is x^a (1-x)^b / (a B(a, b)) times a continued fraction that converges
 * quickly for x < (a + 1) / (a + b + 2); above that point the symmetry
 * I_x(a, b) = 1 - I_{1-x}(b, a) is used, so the fraction is always evaluated where it
 * converges (in O(sqrt(max(a, b))) terms). The fraction is evaluated forwards with
 * the modified Lentz method, and the prefactor in logarithms, so it neither under-
 * nor overflows for millions of trials; for large parameters the logarithm of the
 * beta function comes from Stirling's series rather than from differences of lgamma
 * values, which lose nine digits at a million trials. The quantile is plain
 * bisection: I_p is monotone in p, so bisection cannot fail to converge; it stops at
 * a relative width of 1e-15 (about 50 halvings for a bound near 1%), which costs
 * milliseconds at most and happens a few times per report. */
#include "tune/confidence.h"

#include <math.h>
#include <stdbool.h>

#define CF_MAX_TERMS 1000000
#define CF_EPS 1e-15
#define CF_TINY 1e-300

/* Lentz's guard: a denominator that cancels to zero is nudged off it. */
static double guard(double v) { return fabs(v) < CF_TINY ? CF_TINY : v; }

/* The continued fraction of I_x(a, b), for x below the switch point. Its terms
 * alternate: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)) and
 * d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)). */
static double beta_fraction(double a, double b, double x) {
  double c = 1, d = 1 / guard(1 - (a + b) * x / (a + 1)), h = d;
  for (int m = 1; m <= CF_MAX_TERMS; m++) {
    double m2 = 2.0 * m;
    double even = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    h *= d * c;
    double odd = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    double step = d * c;
    h *= step;
    if (fabs(step - 1) < CF_EPS)
      break;
  }
  return h;
}

/* lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2), Stirling's series to the x^-9
 * term: its truncation error is below 2e-14 for x >= 10. */
static double stirling_tail(double x) {
  double r = 1 / x, r2 = r * r;
  return r * (1.0 / 12 -
              r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 * (1.0 / 1680 - r2 / 1188))));
}

#define STIRLING_FROM 10.0
#define HALF_LOG_2PI 0.91893853320467274178

/* log(x^a (1-x)^b / B(a, b)). lgamma of a million is about 1.3e7, so the plain
 * lgamma(a + b) - lgamma(a) - lgamma(b) loses 1e-9 to rounding; where a term is
 * large, Stirling's form is used instead and the big logarithms are combined before
 * they are summed: (a - 1/2) log a - (a + b - 1/2) log(a + b) + a log x becomes
 * a log(x (a + b) / a) - log(a) / 2 + ..., whose terms stay small near the mode. */
static double log_front(double a, double b, double x) {
  if (a < STIRLING_FROM && b < STIRLING_FROM)
    return lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
  if (a >= STIRLING_FROM && b >= STIRLING_FROM) {
    double ab = a + b;
    return a * log(x * ab / a) + b * log((1 - x) * ab / b) + 0.5 * log(a * b / ab) -
           HALF_LOG_2PI + stirling_tail(ab) - stirling_tail(a) - stirling_tail(b);
  }
  bool small_a = a < STIRLING_FROM; /* one small (s) and one large (L) parameter */
  double s = small_a ? a : b, L = small_a ? b : a;
  double ls = small_a ? log(x) : log1p(-x), lL = small_a ? log1p(-x) : log(x);
  /* lgamma(s + L) - lgamma(L) = (L - 1/2) log1p(s / L) + s log(s + L) - s + tails */
  double ratio = (L - 0.5) * log1p(s / L) + s * log(s + L) - s + stirling_tail(s + L) -
                 stirling_tail(L);
  return ratio - lgamma(s) + s * ls + L * lL;
}

double nr_beta_inc(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1) || isinf(a) || isinf(b))
    return NAN;
  if (x == 0 || x == 1)
    return x;
  double front = exp(log_front(a, b, x));
  if (x < (a + 1) / (a + b + 2))
    return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double nr_beta_quantile(double a, double b, double q) {
  if (!(a > 0) || !(b > 0) || !(q >= 0) || !(q <= 1) || isinf(a) || isinf(b))
    return NAN;
  if (q == 0 || q == 1)
    return q;
  double lo = 0, hi = 1;
  for (int i = 0; i < 1100; i++) {
    double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi || hi - lo <= hi * 1e-15)
      break; /* adjacent doubles, or as close as the fraction is accurate */
    if (nr_beta_inc(a, b, mid) < q)
      lo = mid;
    else
      hi = mid;
  }
  return hi;
}

double nr_clopper_pearson_upper(int64_t x, int64_t n, double confidence) {
  if (x < 0 || !(confidence > 0) || !(confidence < 1))
    return NAN;
  if (n <= 0 || x >= n)
    return 1;
  return nr_beta_quantile((double)x + 1, (double)(n - x), confidence);
}
