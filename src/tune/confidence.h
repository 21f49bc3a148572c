/* confidence.h - one-sided Clopper-Pearson bounds on an error rate, and the
 * regularized incomplete beta function they are computed from.
 *
 * The tuner states how often a shipped engine may disagree with the reference (top-1
 * answers, elements outside atol/rtol) from what it saw on held-out data: x
 * disagreements in n trials give the upper bound p_u with P(X <= x | n, p_u) =
 * 1 - confidence. Clopper-Pearson is exact (never below its stated confidence,
 * whatever n and p), where the normal approximation is badly optimistic at the small
 * counts a holdout set gives; its only assumption is that the trials are independent.
 * The binomial tail is I_{1-p}(n - x, x + 1), so p_u is the confidence-quantile of
 * Beta(x + 1, n - x); it is found by bisection on the incomplete beta, which is
 * evaluated by its continued fraction. Nothing here allocates. */
#ifndef NR_TUNE_CONFIDENCE_H
#define NR_TUNE_CONFIDENCE_H

#include <stdint.h>

/* The confidence every bound the tuner reports is stated at. */
#define NR_CONFIDENCE_LEVEL 0.95

/* I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1
 * (accurate to about 1e-13 absolute for the a, b of a few million trials). NaN for
 * arguments outside that domain. */
double nr_beta_inc(double a, double b, double x);

/* The p in [0, 1] with I_p(a, b) = q, for a, b > 0 and 0 <= q <= 1, by bisection to
 * a relative width of 1e-15; of the two ends of the final interval it returns the
 * upper one, so a bound built on it never rounds down. NaN outside the domain. */
double nr_beta_quantile(double a, double b, double q);

/* One-sided upper Clopper-Pearson bound on a rate from x events in n trials at the
 * given confidence (0 < confidence < 1): the largest rate under which seeing x or
 * fewer events still has probability 1 - confidence. 1 when n <= 0 (nothing seen)
 * or x >= n; NaN when x < 0 or the confidence is outside (0, 1). For x = 0 it is
 * 1 - (1 - confidence)^(1/n), for x = n - 1 it is confidence^(1/n). */
double nr_clopper_pearson_upper(int64_t x, int64_t n, double confidence);

#endif
