/* worker.h - one candidate, evaluated in a child process that may crash, hang or
 * run out of memory without taking the tuning session down.
 *
 * The parent forks (the model and the reference pairs are inherited, nothing is
 * re-read); the child sets its memory limit (RLIMIT_AS), builds the engine along the
 * route (or loads an engine file), saves it, runs every reference pair, computes
 * every loss (accuracy.h), then, when every output is finite, times the engine:
 * warm-up runs, then timed runs until both min_runs and min_time_ms are reached (or
 * max_runs). It writes one result record to a pipe and exits. The parent waits with
 * a wall-clock deadline and kills the child's process group on expiry.
 *
 * Classification (first that applies):
 *   timeout       the deadline passed (the parent killed it)
 *   oom           the build or run reported NR_ERR_NOMEM under the limit, or the
 *                 child died of SIGKILL that the parent did not send (the kernel's
 *                 OOM killer)
 *   crash         the child died of any other signal (recorded), or exited without
 *                 a complete record
 *   build_error   nr_engine_build/nr_engine_load failed (the message is recorded)
 *   nonfinite     a NaN or Inf in any output of any pair (or a run error)
 *   accuracy_fail some loss is outside the tolerance (timings are still measured, so
 *                 `nnroute report` can choose again at a looser tolerance)
 *   ok
 * The parent must be single-threaded when it forks (the CLI is).
 *
 * With the model's knob list, the child also reports how the build used each knob
 * instance (which values it ignored), and may stop right after the build when the
 * caller says that build was measured already (job.same_as).
 *
 * Sequence mode times several engine files in one child, in a given order (the
 * tuner's confirmation rounds: default, finalist, default, ...): one process start
 * (driver, library handles) per round instead of one per timing. */
#ifndef NR_TUNE_WORKER_H
#define NR_TUNE_WORKER_H

#include "nnroute.h"
#include "tune/accuracy.h"
#include "tune/pairs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nr_cand_status {
  NR_CAND_OK = 0,
  NR_CAND_BUILD_ERROR,
  NR_CAND_CRASH,
  NR_CAND_TIMEOUT,
  NR_CAND_OOM,
  NR_CAND_NONFINITE,
  NR_CAND_ACCURACY_FAIL,
  NR_CAND_RUN_ERROR,      /* a run returned an error status */
  NR_CAND_SHAPE_MISMATCH, /* an output's shape or dtype is not the reference's */
  NR_CAND_STATUS_COUNT
} nr_cand_status;

/* "ok", "build_error", "crash", "timeout", "oom", "nonfinite", "accuracy_fail",
 * "run_error", "shape_mismatch". */
const char *nr_cand_status_name(nr_cand_status s);
bool nr_cand_status_parse(const char *text, nr_cand_status *out);

typedef struct nr_worker_job {
  nr_model *model;          /* prepared; used when engine_in is NULL */
  const char *route;        /* build route text ("" = default) */
  int threads;              /* engine and context threads; 0: all CPUs */
  const char *engine_in;    /* load this engine file instead of building */
  const char *engine_out;   /* save the built engine here (NULL: don't keep it) */
  const nr_pair_set *pairs; /* accuracy data; NULL or empty: skip the accuracy check */
  const nr_tolerance *tol;  /* feasibility; NULL: every finite result is ok */
  const char *const *output_names; /* for per-output tolerances (model order) */
  double timeout_s;         /* wall clock for the whole child; <= 0: 600 */
  uint64_t mem_limit;       /* bytes of address space; 0: no limit */
  bool measure;             /* time the engine (on `timing`'s inputs, below) */
  int warmup_runs;          /* default 2 when 0 */
  int min_runs;             /* default 5 when 0 */
  int max_runs;             /* default 1000 when 0 */
  double min_time_ms;       /* default 50 when 0 */
  const nr_calibration *calibration; /* for routes with int8 nodes, or NULL */
  nr_device device;         /* where the candidate is built and run (CPU unless set) */
  /* Sequence mode (n_sequence > 0; model, engine_in, engine_out and pairs unused):
   * the child loads each distinct file of sequence[] once and makes its context, then
   * times the files one after another in this order, each with its own warm-up and
   * min_runs/min_time_ms (a file named twice is timed twice). times_ms holds slot 0's
   * runs, then slot 1's, ...; seq_runs[k] counts slot k's. At most
   * NR_WORKER_MAX_SEQUENCE slots. */
  const char *const *sequence;
  int n_sequence;
  /* The inputs every timed run uses, in both modes: timed run k of a slot (and its
   * warm-up, k = 0) runs pair (timing_first + k) % n of `timing`, so every slot of a
   * round sees the same inputs in the same order. NULL or empty: `pairs` (single
   * mode), and zero-filled inputs only when there are no pairs at all. */
  const nr_pair_set *timing;
  int timing_first;
  /* Single mode, building: the model's knob list for the route's device (NULL: none).
   * The result then carries how the build used each row (nr_engine_knob_use), and
   * same_as (optional, with same_user) is asked in the child right after the build
   * with those bits: when it answers true, the build is one the caller has already
   * measured (its values that changed something are another candidate's), and the
   * child stops there: no engine file, no accuracy run, no timing (result `same`). */
  const struct nr_knob_list *knobs;
  bool (*same_as)(void *user, const uint8_t *use);
  void *same_user;
} nr_worker_job;

#define NR_WORKER_MAX_SEQUENCE 64

typedef struct nr_worker_result {
  nr_cand_status status;
  int signal;               /* crash: the signal number */
  char message[512];        /* build error, run error or crash description */
  double build_ms;          /* building (or loading) the engine */
  uint64_t engine_bytes;    /* size of the saved engine file (0 if not saved) */
  int n_pairs, n_outputs;
  double *losses;           /* [pair][output][NR_METRIC_COUNT] (owned; NULL if none) */
  double *times_ms;         /* per timed run (owned; NULL if not measured) */
  int n_times;
  double wall_ms;           /* the child's whole life */
  int *seq_runs;            /* sequence mode: timed runs per slot (owned), n_seq of them */
  int n_seq;
  /* With job.knobs and a build that succeeded: per knob row its NR_KNOB_USE_* bits
   * (owned; NULL otherwise), and whether same_as answered true (status ok, nothing
   * measured). */
  uint8_t *knob_use;
  int n_knob_use;
  bool same;
} nr_worker_result;

/* Runs one job in a child process and classifies it. Returns NR_OK whenever a
 * result was classified (whatever the candidate's status); an error only when the
 * parent itself failed (fork, pipe, memory). res is overwritten; free it with
 * nr_worker_result_free. */
nr_status nr_worker_run(const nr_worker_job *job, nr_worker_result *res, nr_error *err);
void nr_worker_result_free(nr_worker_result *res);
/* Kills the child of the running nr_worker_run (async-signal-safe; for the SIGINT
 * handler). The interrupted run then reports NR_CAND_CRASH with signal SIGINT and
 * the caller discards it. */
void nr_worker_abort(void);

#endif
