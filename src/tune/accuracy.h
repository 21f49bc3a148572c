/* accuracy.h - how far a candidate's outputs are from the reference, and whether
 * that is within the user's tolerance.
 *
 * Every metric is computed for every output of every reference pair and recorded, so
 * `nnroute report` can choose again at another metric or tolerance without running
 * anything. Any NaN or Inf in an output makes the candidate "nonfinite" whatever the
 * metric: no metric may let a NaN pass (TensorRT's tuner does). Losses are "lower is
 * better" and 0 for identical outputs; a shape or dtype mismatch gives +inf. */
#ifndef NR_TUNE_ACCURACY_H
#define NR_TUNE_ACCURACY_H

#include "nnroute.h"

#include <stdbool.h>

typedef enum nr_metric {
  NR_METRIC_L0 = 0, /* fraction of elements with |out - ref| > atol + rtol * |ref| */
  NR_METRIC_L1,     /* mean absolute error */
  NR_METRIC_L2,     /* mean squared error */
  NR_METRIC_LINF,   /* max absolute error */
  NR_METRIC_REL_L2, /* ||out - ref|| / ||ref|| (||out - ref|| when ref is all zeros) */
  NR_METRIC_COS,    /* 1 - cosine similarity (0 when both are all zeros) */
  NR_METRIC_TOP1,   /* fraction of rows (last axis) whose argmax differs */
  NR_METRIC_COUNT
} nr_metric;

/* "l0", "l1", "l2", "linf", "rel_l2", "cos", "top1"; static storage. */
const char *nr_metric_name(nr_metric m);
/* Parses a metric name; false when unknown. */
bool nr_metric_parse(const char *text, nr_metric *out);

/* Every metric of got against ref into out[NR_METRIC_COUNT]. Returns false (and
 * fills out with +inf) when got holds a NaN or Inf, or when shape or dtype differ
 * (then *shape_mismatch is set when non-NULL; it is cleared otherwise). Integer and
 * bool outputs are compared as numbers. atol and rtol only matter for l0.
 * Edge cases: empty tensors give 0 for every loss; a NaN or Inf in ref alone gives
 * +inf for every loss but returns true (the candidate is finite, it just cannot be
 * shown close); top1 counts a row as agreeing when got's argmax is one of ref's
 * maxima (ties in ref are not disagreements). */
bool nr_losses_compute(const nr_buffer *got, const nr_buffer *ref, double atol,
                       double rtol, double out[NR_METRIC_COUNT], bool *shape_mismatch);

/* What the user accepts: one metric, a bound for every output, optional per-output
 * bounds (by output name), and l0's atol/rtol. */
#define NR_TOL_MAX_OVERRIDES 32
typedef struct nr_tolerance {
  nr_metric metric;
  double eps;                 /* loss <= eps is feasible */
  double atol, rtol;          /* used by l0 */
  int n_overrides;
  const char *override_name[NR_TOL_MAX_OVERRIDES]; /* not owned */
  double override_eps[NR_TOL_MAX_OVERRIDES];
} nr_tolerance;

/* The bound for an output: its override (first match by name), else t->eps.
 * NULL name: t->eps; NULL t: +inf. */
double nr_tolerance_eps(const nr_tolerance *t, const char *output_name);
/* An output's loss over a set of pairs, from a table laid out [pair][output][metric]:
 * the rates (l0, top1) pool over the pairs, i.e. their mean, since every pair has the
 * same shapes: a top-1 tolerance of 0.01 over 100 batch-1 pairs allows one changed
 * answer. The other metrics take the worst pair. A NaN anywhere gives NaN; no pairs
 * give 0. */
double nr_losses_over_pairs(const double *losses, int n_pairs, int n_outputs, int output,
                            nr_metric m);
/* Feasibility of a loss table laid out [pair][output][metric]: every output's loss
 * over the pairs (nr_losses_over_pairs) within its bound under t->metric. *worst_margin (may be NULL) gets the
 * smallest (bound - loss) over all of them (negative when infeasible). A NaN loss
 * is infeasible with margin -inf; a loss equal to its bound (inf included) has
 * margin 0; an empty table is feasible with margin +inf. output_names may be NULL
 * (no override applies). A NULL t or an unknown metric: false, margin -inf. */
bool nr_tolerance_check(const nr_tolerance *t, const double *losses, int n_pairs,
                        int n_outputs, const char *const *output_names,
                        double *worst_margin);

#endif
