/* db.h - the tuning database: a SQLite file that records what every tuning session
 * tried and measured, so a session can be resumed exactly, results can be chosen
 * again at another tolerance, and stale results are never mistaken for fresh ones.
 *
 * Tables (the schema is written out in db.c and described in docs/tuner-db.md):
 *   meta          schema version and the application tag
 *   environments  one row per (fingerprint, nnroute version, knob schema)
 *   models        one row per (model sha256, input shapes)
 *   sessions      arguments, settings (JSON), state, start/end time, winner, report
 *   candidates    one row per (session, canonical route): status, every loss of every
 *                 output of every pair (reference and holdout), screening timings
 *                 and their statistics, build time, engine size and file
 *   measurements  later timings of a candidate (halving rounds, confirmation rounds)
 *   aliases       routes a session asked for that build another candidate's plan (they
 *                 differ from it only in values the build ignored), and that route
 *
 * Writes are single transactions, the journal is WAL and synchronous=FULL, so a
 * session killed at any point (kill -9 included) leaves every committed candidate and
 * nothing half-written. A file that is not a tuning database, or one of a newer
 * schema, is refused with a message naming the file. */
#ifndef NR_TUNE_DB_H
#define NR_TUNE_DB_H

#include "nnroute.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct nr_db nr_db;

/* Opens (creating when absent) the database at path. A file that is not SQLite, is
 * another application's database or has a newer schema is refused, unchanged, with
 * NR_ERR_INVALID_ARGUMENT; a file that cannot be opened or written gives NR_ERR_IO.
 * A handle is for one thread of the process that opened it. A connection must not
 * cross fork: in a forked child every call on the parent's handle fails with
 * NR_ERR_INVALID_ARGUMENT, nr_db_close there leaves it alone (the parent's
 * connection is untouched), and opening the same file there is refused too, since
 * SQLite's per-process lock records came along with the parent's connection. Close
 * the database before forking a process that needs it. Several processes may open
 * and write the same file at once: each write is one transaction, and a writer
 * waits up to 5 s for another's lock. */
nr_status nr_db_open(const char *path, nr_db **out, nr_error *err);
void nr_db_close(nr_db *db);

typedef struct nr_db_env {
  const char *fingerprint;     /* the engine fingerprint text (CPU, libraries, ...) */
  const char *nnroute_version;
  const char *knob_schema;
} nr_db_env;

/* Id of the environment row, inserted when new. */
nr_status nr_db_env_id(nr_db *db, const nr_db_env *env, int64_t *id, nr_error *err);
/* Id of the model row (sha256 as hex, shapes as "name=1x3x224x224;..."). */
nr_status nr_db_model_id(nr_db *db, const char *sha256, const char *shapes, int64_t *id,
                         nr_error *err);

typedef struct nr_db_session {
  int64_t id, env_id, model_id;
  char *settings;      /* JSON object of everything that decides results (owned) */
  char *settings_hash; /* hex digest of settings; sessions resume only on equality */
  char *argv;          /* the command line, for people */
  double started_at, ended_at; /* Unix time (s); ended_at 0 while running */
  char *state;         /* "running", "interrupted", "done", "failed" */
  char *winner_route;  /* NULL until chosen */
  char *report;        /* the JSON report (NULL until written) */
} nr_db_session;

void nr_db_session_free(nr_db_session *s); /* frees the strings, not s */

nr_status nr_db_session_begin(nr_db *db, int64_t env_id, int64_t model_id,
                              const char *settings, const char *settings_hash,
                              const char *argv, int64_t *id, nr_error *err);
/* The newest session with this environment, model and settings hash whose state is
 * not "done"; *id = 0 when there is none. */
nr_status nr_db_session_find_resumable(nr_db *db, int64_t env_id, int64_t model_id,
                                       const char *settings_hash, int64_t *id,
                                       nr_error *err);
/* Marks a resumed session running again. */
nr_status nr_db_session_reopen(nr_db *db, int64_t id, nr_error *err);

/* Calibration tables, by the SHA-256 of their bytes (nr_calib_digest); putting one
 * that is already there does nothing. get mallocs *bytes; a missing table is an
 * invalid argument naming it. */
nr_status nr_db_calibration_put(nr_db *db, const char *sha256, const void *bytes,
                                size_t len, nr_error *err);
nr_status nr_db_calibration_get(nr_db *db, const char *sha256, uint8_t **bytes,
                                size_t *len, nr_error *err);
nr_status nr_db_session_end(nr_db *db, int64_t id, const char *state,
                            const char *winner_route, const char *report,
                            nr_error *err);
/* Loads one session; id 0 means the newest session in the file. *found false when
 * there is none. */
nr_status nr_db_session_get(nr_db *db, int64_t id, nr_db_session *out, bool *found,
                            nr_error *err);

typedef struct nr_db_candidate {
  int64_t id, session_id;
  int seq;                /* order in which the search proposed it (0 = first) */
  char *route;            /* canonical route text ("" = default) */
  char *point;            /* the search point, "i,j,k" (value index per dimension) */
  char *phase;            /* search phase ("fast", "full", "evolve:2", "attribution") */
  char *status;           /* nr_cand_status_name() */
  int signal;
  char *message;
  double build_ms;
  uint64_t engine_bytes;
  char *engine_path;      /* kept engine file, or NULL */
  int n_pairs, n_outputs; /* reference losses: [pair][output][NR_METRIC_COUNT] */
  double *losses;
  int n_holdout_pairs;    /* holdout losses, same layout; 0 until validated */
  double *holdout_losses;
  double *times_ms;       /* screening timings */
  int n_times;
  double median_ms, ci_lo_ms, ci_hi_ms; /* of the screening timings (0 when none) */
  double created_at;
  /* How the build used the route (NULL / "" when unknown: it failed, or the row
   * predates schema 3): the route tokens it ignored ("" for none), and per knob
   * instance of the session's knob list, in its order, one digit of NR_KNOB_USE_* bits. */
  char *ignored;
  char *knob_use;
} nr_db_candidate;

void nr_db_candidate_free(nr_db_candidate *c); /* frees the members, not c */

/* Inserts a candidate (id and created_at are filled in). A second candidate with
 * the same (session, route) is refused with NR_ERR_INVALID_ARGUMENT and a message
 * naming the route. Losses are laid out [pair][output][NR_METRIC_COUNT]; every
 * double (inf, NaN) is kept bit for bit; a NaN scalar (build_ms, median_ms, ...)
 * reads back as NaN. */
nr_status nr_db_candidate_put(nr_db *db, nr_db_candidate *c, nr_error *err);
/* Looks a candidate up by route; *found false when absent. */
nr_status nr_db_candidate_get(nr_db *db, int64_t session_id, const char *route,
                              nr_db_candidate *out, bool *found, nr_error *err);
/* Calls fn for every candidate of a session in seq order (insertion order among equal
 * seqs); fn returns nonzero to stop. The candidate passed to fn is freed after fn
 * returns. No statement is open while fn runs, so fn may call into db. */
nr_status nr_db_candidate_foreach(nr_db *db, int64_t session_id,
                                  int (*fn)(const nr_db_candidate *c, void *user),
                                  void *user, nr_error *err);
/* For resume: how many candidates a session holds, and the seq the next one should
 * take (largest seq + 1, 0 when none). Either output may be NULL. */
nr_status nr_db_candidate_count(nr_db *db, int64_t session_id, int *count, int *next_seq,
                                nr_error *err);
nr_status nr_db_candidate_set_engine(nr_db *db, int64_t id, const char *engine_path,
                                     nr_error *err); /* NULL clears it */
/* Holdout losses share the candidate's n_outputs (a candidate recorded with no
 * reference pairs takes the holdout's); n_pairs 0 clears them. */
nr_status nr_db_candidate_set_holdout(nr_db *db, int64_t id, const double *losses,
                                      int n_pairs, int n_outputs, nr_error *err);

/* Records that `route`, asked for as the seq-th question of a session, builds the plan
 * of candidate `same_as` (a candidate's route); a route is recorded once per session. */
nr_status nr_db_alias_put(nr_db *db, int64_t session_id, int seq, const char *route,
                          const char *same_as, nr_error *err);
/* The candidate route an alias names (malloc'ed), or NULL in *same_as when none. */
nr_status nr_db_alias_get(nr_db *db, int64_t session_id, const char *route,
                          char **same_as, nr_error *err);

typedef struct nr_db_measurement {
  int64_t candidate_id;
  char *stage;      /* "halving:1", "confirm", "noise", ... */
  int round;
  double *times_ms;
  int n_times;
  double median_ms, ci_lo_ms, ci_hi_ms;
} nr_db_measurement;

nr_status nr_db_measurement_put(nr_db *db, const nr_db_measurement *m, nr_error *err);
/* In insertion order; m is freed after fn returns; fn returns nonzero to stop. */
nr_status nr_db_measurement_foreach(nr_db *db, int64_t candidate_id,
                                    int (*fn)(const nr_db_measurement *m, void *user),
                                    void *user, nr_error *err);

/* Priors: for the same model sha256 (any shapes) recorded under OTHER environments,
 * calls fn with each ok candidate's route and its screening median divided by the
 * default route's median in the same session (sessions without a timed default
 * route give none). route lives until fn returns. Never used as a measurement. */
nr_status nr_db_priors(nr_db *db, const char *model_sha256, int64_t exclude_env_id,
                       int (*fn)(const char *route, double ratio, void *user),
                       void *user, nr_error *err);

#endif
