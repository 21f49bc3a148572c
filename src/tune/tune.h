/* tune.h - a tuning session: from a model, a route space and a tolerance to the
 * fastest engine whose outputs stay within the tolerance, measured so that the win
 * is real.
 *
 * The session (tune.c) proposes routes with a search algorithm (search.h), evaluates
 * each in an isolated child (worker.h), records everything in the database (db.h),
 * then spends measurement where it matters: successive halving over the best
 * screened candidates, and an interleaved confirmation of the finalists against the
 * default route in fresh processes (tune_measure.c). A winner must be significantly
 * faster than the default route (an exact signed-rank test on the per-round ratios,
 * Holm-corrected over the finalists, decide.h) and pass the holdout pairs; otherwise
 * the default route is the result.
 * The report (tune_report.c) holds every candidate, the confirmation, per-knob
 * attribution, the Pareto frontier and the break-even point. */
#ifndef NR_TUNE_TUNE_H
#define NR_TUNE_TUNE_H

#include "nnroute.h"
#include "tune/accuracy.h"
#include "tune/pairs.h"
#include "tune/search.h"

#include <stdbool.h>
#include <stdint.h>

#define NR_TUNE_MAX_DIRS 16
/* Builds after which the random and evolve searches end when --budget-builds sets no
 * number (docs/tuner.md); routes that build another candidate's plan do not count. */
#define NR_TUNE_SEARCH_BUILDS 256

typedef struct nr_tune_options {
  nr_model *model;            /* loaded; the session prepares it, first giving dims
                                 left free the shapes of the first reference (else
                                 holdout, else calibration) folder */
  const char *model_path;     /* for the report */
  const char *argv;           /* the command line, recorded */
  const char *routes;         /* route expression; NULL: the default space */
  nr_search_kind search;
  int budget_builds;          /* candidates built; 0: unlimited, except that random and
                                 evolve (which never end on their own) stop after
                                 NR_TUNE_SEARCH_BUILDS builds */
  double budget_time_s;       /* wall time of the search phase; 0: unlimited */
  uint64_t seed;
  const char *reference_dirs[NR_TUNE_MAX_DIRS];
  int n_reference_dirs;
  const char *holdout_dirs[NR_TUNE_MAX_DIRS];
  int n_holdout_dirs;
  int n_generated;            /* generated reference pairs when no dirs (default 4) */
  int n_holdout_generated;    /* generated holdout pairs when no dirs (default 2) */
  const char *calibration;    /* int8 calibration: a table file or a directory of input
                                 sets; NULL: the reference pairs' inputs (never the
                                 holdout's) */
  nr_input_range ranges[NR_TUNE_MAX_DIRS];
  int n_ranges;
  nr_tolerance tol;           /* with tol.min_margin (--min-margin, 0 <= F < 1): a
                                 candidate is feasible, on the reference and on the
                                 holdout pairs alike, only when every loss is
                                 <= (1 - F) x its bound */
  const char *db_path;        /* default "nnroute-tune.db" */
  bool resume;                /* --continue */
  bool priors;                /* order the search by other environments' results */
  int threads;                /* 0: all CPUs */
  const char *engine_out;     /* -o */
  bool write_unchecked;       /* write the engine even when the route to ship (the
                                 default) fails the holdout pairs */
  const char *report_path;    /* --report */
  bool dry_run;
  double candidate_timeout_s; /* 0: derived from the default route's cost */
  uint64_t mem_limit;         /* bytes; 0: 3/4 of physical memory */
  int finalists;              /* default 3 */
  int confirm_rounds;         /* at least this many (default 9; nr_decide_planned_rounds may plan more) */
  double screen_ms;           /* timed milliseconds per screening (default 40) */
  bool progress;              /* a live progress line (a terminal) or log lines */
  nr_device device;           /* --device: every candidate is built for it */
} nr_tune_options;

/* Runs a session. NR_OK when it completed or was interrupted cleanly (Ctrl-C: the
 * database is consistent and the best confirmed, holdout-checked engine so far, else
 * the default route's, is written); *interrupted tells which. Failing candidates never
 * fail the session. NR_ERR_RUNTIME when the route to ship is the default and it fails
 * the holdout pairs: the report is written, the engine only with write_unchecked. */
nr_status nr_tune_run(const nr_tune_options *o, bool *interrupted, nr_error *err);

/* `nnroute report`: chooses again from recorded losses and screening timings (a
 * database file or a report JSON), at another metric, tolerance or min margin
 * (NULL / < 0: the session's own), and prints the frontier with each shown
 * candidate's margins, and the choice with its accuracy statement. The choice is
 * the fastest feasible candidate that did not fail a recorded holdout check at that
 * tolerance. A min_margin of 1 or more is refused. session 0: the newest. */
nr_status nr_tune_rechoose(const char *path, int64_t session, const char *metric,
                           double tolerance, double min_margin, nr_error *err);

#endif
