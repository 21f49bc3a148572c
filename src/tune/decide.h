/* decide.h - the tuner's decision statistics: whether a confirmed finalist is faster
 * than the default route, and when confirmation may stop early.
 *
 * The data are paired per-round latency ratios (finalist over default, tune_measure.c).
 * The test is the Wilcoxon signed-rank test on their logarithms, with its exact null
 * distribution (midranks for ties, zeros dropped), so its error rate holds at the 6 to
 * 20 rounds a session runs, where a bootstrap interval is too narrow. The interval is
 * the distribution-free one that goes with the test: order statistics of the Walsh
 * averages around the Hodges-Lehmann estimate. With several finalists the p-values get
 * Holm's step-down correction, so a session with no real gain ships a non-default
 * route at most alpha of the time however many finalists it confirmed. The same
 * functions run in the tuner and in bench/tune/select_bench.c, which measures the
 * false-accept rate and the power they give. */
#ifndef NR_TUNE_DECIDE_H
#define NR_TUNE_DECIDE_H

#include <stdbool.h>

/* The two-sided family-wise error rate of a session's decision. */
#define NR_DECIDE_ALPHA 0.05
/* The smallest gain worth a non-default route: a finalist must also be estimated at
 * least this much faster. On a quiet engine (a 5 ms sleep timed to 0.1%) an order or
 * cache effect of 0.1-0.3% is "significant" and meaningless. */
#define NR_DECIDE_MIN_GAIN 0.01
/* Early stop: every round of every finalist at least this far from 1, one side. */
#define NR_DECIDE_MARGIN 0.10
#define NR_DECIDE_MAX_ROUNDS 256

/* P(W+ <= w) under the null for n untied nonzero differences (ranks 1..n), exact; w
 * may be any real. 1 for n <= 0 with w >= 0. */
double nr_signrank_cdf(int n, double w);
/* The largest c with P(W+ <= c) <= alpha / 2 for n untied differences (the lower
 * critical value of a two-sided test at alpha; tables list it as "T"), -1 when even
 * c = 0 is too likely (n too small). */
int nr_signrank_critical(int n, double alpha);
/* The exact two-sided p-value of the signed-rank test that the median of x[0..n) is 0.
 * Zeros and non-finite values are dropped; ties get midranks and the exact
 * conditional distribution. 1 when nothing is left. *w_plus (may be NULL) receives
 * the sum of the ranks of the positive values. */
double nr_signrank_p(const double *x, int n, double *w_plus);
/* The Hodges-Lehmann estimate (median of the Walsh averages) of x's location and its
 * distribution-free confidence interval at 1 - alpha (order statistics of the Walsh
 * averages at the signed-rank critical value); non-finite values are dropped. lo/hi
 * are -inf/+inf when too few values are left for that level. Returns 0, -1 on no
 * memory or no values (everything NaN then). */
int nr_signrank_interval(const double *x, int n, double alpha, double *est, double *lo,
                         double *hi);
/* Holm's step-down adjusted p-values: adj[i] for p[i] (k of them). */
void nr_holm_adjust(const double *p, int k, double *adj);
/* The fewest rounds at which k finalists that all lie on one side in every round are
 * each significant after Holm's correction: the smallest m with 2^(1-m) <= alpha/k. */
int nr_decide_min_rounds(int k, double alpha);
/* The confirmation rounds planned for k finalists (1..8; k outside is clamped): 9 for
 * up to three, 10 for four or five, 11 for six to eight. Holm divides alpha by up to k,
 * so more finalists need more rounds to keep the power at a true 5% gain at 80% or
 * more at the per-round noise of a quiet machine; the table's provenance is in
 * decide.c. */
int nr_decide_planned_rounds(int k);

typedef struct nr_decision {
  int rounds;          /* finite ratios used */
  double ratio;        /* Hodges-Lehmann estimate of the latency ratio */
  double lo, hi;       /* its 95% interval (unadjusted) */
  double p, p_holm;    /* two-sided p, and Holm-adjusted over the finalists */
  bool accepted;       /* faster than the default at the family-wise NR_DECIDE_ALPHA,
                          by at least NR_DECIDE_MIN_GAIN (estimated) */
} nr_decision;

/* Decides n finalists from ratios[r * n + i] (rounds x n, NaN for a failed timing):
 * finalist i is accepted when its Holm-adjusted p is at most NR_DECIDE_ALPHA and its
 * estimate is at most 1 - NR_DECIDE_MIN_GAIN. Returns 0, -1 on no memory (nothing
 * accepted then). */
int nr_decide_finalists(const double *ratios, int rounds, int n, nr_decision *out);
/* Confirmation may stop after `done` rounds: at least nr_decide_min_rounds(n) of
 * them, and every finalist in every round at least NR_DECIDE_MARGIN on the same
 * side of 1 (a NaN round keeps it going). */
bool nr_decide_settled(const double *ratios, int done, int n);

#endif
