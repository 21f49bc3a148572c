/* tune_internal.h - the state one tuning session shares between its files: the
 * search space as the search sees it (dimensions over knob instances), the
 * candidates evaluated so far, and the session's data and database handles. */
#ifndef NR_TUNE_TUNE_INTERNAL_H
#define NR_TUNE_TUNE_INTERNAL_H

#include "api/nnroute_tools.h"
#include "tune/db.h"
#include "tune/tune.h"
#include "tune/worker.h"
#include "util/stats.h"

#include <signal.h>

/* One search dimension. In the default space a per-node knob is ONE dimension whose
 * value is applied to every node where it is valid ("conv.algo@*"); with a route
 * expression each instance the expression leaves free is its own dimension. */
typedef struct tune_dim {
  char *name;
  int n_values;
  char **values;   /* owned copies */
  int dflt;
  int *insts;      /* knob instances this dimension sets */
  int n_insts;
} tune_dim;

typedef struct tune_space {
  nr_knob_list knobs;
  int threads;     /* the session's (resolved): at 1, thread knobs are no dimension */
  int *base;       /* per knob instance: the value the expression pins (else the
                      default route's), a choice vector of knobs */
  tune_dim *dims;
  int n_dims;
} tune_space;

/* threads: the session's, resolved (1: knobs flagged NR_KNOB_INFO_THREADS are no
 * dimension; an expression's value for them stays in the base route). */
nr_status tune_space_build(nr_model *m, const char *expr, nr_device device, int threads,
                           tune_space *s, nr_error *err);
void tune_space_free(tune_space *s);
/* The choice vector of a point (knobs.n entries). */
void tune_space_choice(const tune_space *s, const int *point, int *choice);
/* Canonical route text of a point (malloc'ed). */
char *tune_space_route(const tune_space *s, const int *point);
/* Whether route q builds the plan that route r's build made, given how that build used
 * each knob (use: NR_KNOB_USE_* per row of l): where q differs from r, r's build never
 * read the instance, or read it without effect and q has the default there. */
bool tune_same_build(const nr_knob_list *l, const int *q, const int *r,
                     const uint8_t *use);
/* r with every value that did not act (not NR_KNOB_USE_EFFECTIVE) at its default: the
 * choice vector of r's canonical route, which leaves ignored values out. */
void tune_effective_choice(const nr_knob_list *l, const int *r, const uint8_t *use,
                           int *out);
/* The point as dimension settings ("-conv.algo@*=winograd23"), for people: shorter
 * than the route when a dimension sets many nodes (malloc'ed; "" = all defaults). */
char *tune_space_describe(const tune_space *s, const int *point);
/* "i,j,k" (malloc'ed) and back (false when it does not fit the space). */
char *tune_point_text(const int *point, int n);
bool tune_point_parse(const char *text, int *point, int n);
/* Number of search dimensions where two points differ. */
int tune_point_distance(const int *a, const int *b, int n);

/* A candidate as the session keeps it in memory (the database has everything). */
typedef struct tune_cand {
  int64_t db_id;
  char *route;
  int *point;           /* NULL for candidates outside the search (default, ...) */
  nr_cand_status status;
  bool feasible;        /* within tolerance on the reference pairs */
  double median, lo, hi;/* screening latency (ms); 0 when not measured */
  double worst_loss;    /* max over pairs and outputs, session metric */
  double margin;        /* min over outputs of (bound - loss) */
  double margin_frac;   /* min over outputs of (bound - loss) / bound */
  double build_ms;
  uint64_t engine_bytes;
  char *engine_path;    /* kept engine file, or NULL */
  int changes;          /* non-default knob instances in the route: the effective
                           ones (the route is canonical: ignored values left out) */
  char *phase;
  /* How its build used the route (NULL when unknown: the build failed, or a row from
   * an older database): per knob row NR_KNOB_USE_* bits, the route as asked (choice
   * vector; SET bits say where it left the default), and the ignored values' tokens. */
  uint8_t *use;
  int *asked;
  char *ignored;
} tune_cand;

/* The two ways a rate counts its trials: rows (top1) and elements (l0). */
typedef enum tune_trials {
  NR_TRIALS_ROWS,
  NR_TRIALS_ELEMENTS,
  NR_TRIALS_KINDS
} tune_trials;

/* A route the session asked for that builds candidate `cand`'s plan. */
typedef struct tune_alias {
  char *route;
  int cand;
} tune_alias;

typedef struct tune_session {
  const nr_tune_options *o;
  nr_model *model;
  tune_space space;
  nr_pair_set pairs, holdout;
  const char **output_names;
  int n_outputs;
  nr_db *db;
  int64_t session_id, env_id, model_id;
  char engine_dir[4096];
  tune_cand *cands;
  int n_cands, cap_cands;
  tune_alias *aliases;
  int n_aliases, cap_aliases;
  int default_idx;       /* index of the default route's candidate */
  int builds;            /* candidates evaluated (replayed ones included) */
  double t0;             /* session start (monotonic seconds) */
  double prior_elapsed;  /* search time spent before a resume */
  double timeout_s;
  uint64_t mem_limit;
  int keep;              /* engine files kept for the measurement stages */
  bool noisy;
  double noise_spread, loadavg;
  char *winner_route;
  bool interrupted;
  int default_holdout;   /* the default route on the holdout pairs: 1 passed, -1
                            failed, 0 not checked (no pairs, or interrupted) */
  bool engine_refused;   /* the route to ship failed the holdout: no engine written */
  char settings_hash[65];
  char *settings;        /* the settings JSON text (owned) */
  nr_calibration *calib; /* for int8 candidates; NULL when the space has no precision
                            knob */
  char calib_sha[65];    /* its digest ("" without one) */
  int64_t *hold_trials[NR_TRIALS_KINDS]; /* per output: rows / elements one holdout
                                            pair gives (0: the pairs differ) */
} tune_session;

extern volatile sig_atomic_t nr_tune_stop;

double tune_now(void);
/* Frees the candidates and aliases (tune_cands.c). */
void tune_cands_free(tune_session *s);
/* How tune_candidate answered. */
typedef enum tune_how {
  TUNE_BUILT,    /* evaluated now: a new candidate */
  TUNE_REPLAYED, /* recorded already (this run, or the database of a resumed session) */
  TUNE_SAME,     /* it builds a known candidate's plan (its other values were ignored):
                    that candidate, recorded as an alias, nothing measured */
} tune_how;
/* Evaluates (or replays from the database) a route; returns its index in s->cands
 * (for an alias, the candidate whose plan it builds), or -1 when the parent itself
 * failed (err set). *how tells which. Candidates are named by their canonical route,
 * which leaves out the values the build ignored. */
int tune_candidate(tune_session *s, const char *route, const int *point,
                   const char *phase, tune_how *how, nr_error *err);
/* Measures kept engines again: successive halving over the best screened feasible
 * candidates, then the interleaved confirmation of the finalists against the default
 * route and the holdout check; chooses the winner (s->winner_route). Fills json
 * (a cJSON object) with what it measured. */
/* Index of the candidate with this canonical route in s->cands, or of the one an alias
 * with this route names; -1 when none. */
int tune_find_cand(const tune_session *s, const char *route);
/* The largest output loss under metric m over a [pair][output][metric] table, each
 * output's loss over the pairs as nr_losses_over_pairs takes it (rates pooled, the
 * rest worst-pair); NaN counts as +inf. 0 for an empty table. */
double tune_worst_loss(const double *losses, int n_pairs, int n_outputs, nr_metric m);
/* A worker job for route with the session's settings (screening measurement). */
nr_worker_job tune_job(const tune_session *s, const char *route);
/* Deletes a candidate's kept engine file and forgets it. */
void tune_drop_engine(tune_session *s, tune_cand *c);
struct cJSON;
/* Writes the winner engine and the report, ends the session in the database. */
nr_status tune_finish(tune_session *s, struct cJSON *report, nr_error *err);
nr_status tune_measure_finalists(tune_session *s, struct cJSON *json, nr_error *err);
/* A candidate through halving and confirmation. */
typedef struct tune_entry {
  tune_cand *c;
  double median;        /* latest measurement */
  double ratio, lo, hi; /* confirmation: latency ratio to default and its 95% interval */
  double p, p_holm;     /* confirmation: two-sided p, Holm-adjusted over the finalists */
  bool accepted;
} tune_entry;
/* qsort order of confirmed finalists, the preference for the holdout check. */
int tune_entry_cmp(const void *a, const void *b);
/* ratios[r * n + i]: finalist i's latency ratio to the default route in round r, for
 * `done` rounds. True when enough rounds ran for the decision's error rate
 * (nr_decide_min_rounds: 6 for one finalist, 7 for two or three) and every finalist
 * was at least 10% faster, or at least 10% slower, in every one of them: the
 * confirmation may stop (nr_decide_settled, decide.h). */
bool tune_confirm_settled(const double *ratios, int done, int n);
/* The short noise check of the default route. */
nr_status tune_noise_check(tune_session *s, struct cJSON *json, nr_error *err);
/* The per-candidate JSON (status, losses, timings) read back from the database. */
struct cJSON *tune_candidates_json(tune_session *s, nr_error *err);
/* Pareto frontier of latency against worst loss over measured candidates. */
struct cJSON *tune_pareto_json(const tune_cand *c, int n);

/* ---- the accuracy statement (tune_accuracy.c) ---- */

/* A candidate's accuracy on the reference and the holdout pairs, per output, under
 * one tolerance: what the report states for the winner and `nnroute report` for the
 * candidates it shows. */
typedef struct tune_accuracy {
  const nr_tolerance *tol;
  int n_outputs;
  const char *const *names;    /* may be NULL */
  int n_ref, n_hold;           /* pairs in each set (n_hold 0: not checked) */
  nr_output_accuracy *ref;     /* n_outputs entries */
  nr_output_accuracy *hold;    /* n_outputs entries, or NULL: not checked */
  double ref_margin, ref_frac; /* nr_tolerance_margins over the outputs */
  double hold_margin, hold_frac;
  bool ref_ok, hold_ok; /* within (1 - min_margin) x the bounds */
} tune_accuracy;

/* Fills a from loss tables [pair][output][metric] (hold NULL or n_hold 0: not checked).
 * trials[kind][output] are the counts one holdout pair gives (tune_trials; NULL or 0:
 * unknown, then no confidence bound). False when memory runs out. */
bool tune_accuracy_make(tune_accuracy *a, const nr_tolerance *tol, int n_outputs,
                        const char *const *names, const double *ref, int n_ref,
                        const double *hold, int n_hold, int64_t *const *trials);
void tune_accuracy_free(tune_accuracy *a);
/* The report's "accuracy" object. */
struct cJSON *tune_accuracy_json(const tune_accuracy *a);
/* The statement for people, one line per set and output, each starting with indent. */
void tune_accuracy_print(const tune_accuracy *a, const char *indent);
/* "disagreement <= 2.95% with 95% confidence on 100 held-out inputs" for a rate with
 * a bound, else "" (into out). */
void tune_accuracy_bound_text(const nr_output_accuracy *r, nr_metric m, char *out,
                              size_t cap);

#endif
