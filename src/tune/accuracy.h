/* accuracy.h - how far a candidate's outputs are from the reference, and whether
 * that is within the user's tolerance.
 *
 * Every metric is computed for every output of every reference pair and recorded, so
 * `nnroute report` can choose again at another metric or tolerance without running
 * anything. Any NaN or Inf in an output makes the candidate "nonfinite" whatever the
 * metric: no metric may let a NaN pass (TensorRT's tuner does). Losses are "lower is
 * better" and 0 for identical outputs; a shape or dtype mismatch gives +inf.
 * A tolerance may keep a fraction of every bound in reserve (min_margin), and the
 * report states per output what a set of pairs says: the margin, the pair spread
 * and, for the rates, a confidence bound (confidence.h). */
#ifndef NR_TUNE_ACCURACY_H
#define NR_TUNE_ACCURACY_H

#include "nnroute.h"

#include <stdbool.h>
#include <stdint.h>

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
 * bounds (by output name), l0's atol/rtol, and a margin to keep in reserve. */
#define NR_TOL_MAX_OVERRIDES 32
typedef struct nr_tolerance {
  nr_metric metric;
  double eps;                 /* the bound: loss <= (1 - min_margin) * eps is feasible */
  double atol, rtol;          /* used by l0 */
  double min_margin;          /* fraction of every bound kept in reserve, 0 <= F < 1
                                 (0: loss <= eps; 0.2: loss <= 0.8 * eps) */
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
 * over the pairs (nr_losses_over_pairs) within (1 - t->min_margin) times its bound,
 * under t->metric. *worst_margin (may be NULL) gets the smallest (bound - loss) over
 * all of them, against the whole bound (so with a min_margin a candidate can be
 * infeasible at a positive margin). A NaN loss is infeasible with margin -inf; a loss
 * equal to its bound (inf included) has margin 0; an empty table is feasible with
 * margin +inf. output_names may be NULL (no override applies). A NULL t, an unknown
 * metric or a min_margin outside [0, 1): false, margin -inf. */
bool nr_tolerance_check(const nr_tolerance *t, const double *losses, int n_pairs,
                        int n_outputs, const char *const *output_names,
                        double *worst_margin);
/* nr_tolerance_check, also giving *worst_fraction (may be NULL): the smallest
 * nr_margin_fraction over the outputs (+inf for an empty table, -inf when the
 * arguments are bad). A table is feasible when that fraction is at least
 * t->min_margin (up to rounding: the check itself compares loss and bound). */
bool nr_tolerance_margins(const nr_tolerance *t, const double *losses, int n_pairs,
                          int n_outputs, const char *const *output_names,
                          double *worst_margin, double *worst_fraction);
/* The margin as a fraction of the bound, 1 - loss / eps: 1 for an unused tolerance
 * (loss 0, or an infinite bound), 0 at the bound, negative beyond it, -inf for a
 * positive loss against a zero bound and for a NaN. */
double nr_margin_fraction(double eps, double loss);

/* How many trials one pair's output gives a rate metric: rows along the last axis
 * for top1 (as its loss counts them), elements for l0; 0 for the other metrics and
 * for an empty output. */
int64_t nr_metric_trials(nr_metric m, const nr_buffer *ref);

/* What one output's loss over a set of pairs says, for the report. */
typedef struct nr_output_accuracy {
  int n_pairs;
  double bound;    /* the output's tolerance (nr_tolerance_eps) */
  double loss;     /* over the pairs under the metric (nr_losses_over_pairs) */
  double margin;   /* bound - loss (nr_tolerance_check's rules) */
  double fraction; /* nr_margin_fraction(bound, loss) */
  double max, p95; /* the largest and the 95th-percentile pair loss (linear
                      interpolation between closest ranks, numpy's default); NaN
                      when a pair's loss is NaN */
  /* Rates (l0, top1) only, else 0 / NaN: */
  int64_t trials; /* rows or elements over all the pairs (0: unknown) */
  int64_t errors; /* of them, disagreeing: each pair's rate times its trials,
                      rounded; a pair whose rate is not finite counts as all wrong */
  double upper;   /* nr_clopper_pearson_upper(errors, trials) at
                      NR_CONFIDENCE_LEVEL; NaN when trials is unknown */
} nr_output_accuracy;

/* Fills *out for one output of a [pair][output][metric] table under t->metric.
 * trials_per_pair: nr_metric_trials of that output (every pair of a set has the
 * same shapes); 0 or less when unknown. name may be NULL. */
void nr_output_accuracy_compute(const nr_tolerance *t, const double *losses, int n_pairs,
                                int n_outputs, int output, const char *name,
                                int64_t trials_per_pair, nr_output_accuracy *out);

#endif
