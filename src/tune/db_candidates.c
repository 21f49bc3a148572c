/* db_candidates.c - the rows a tuning session writes as it goes (db.h): candidates,
 * their later measurements, and the priors read back from earlier sessions. The
 * schema, opening and the statement helpers are in db.c (db_internal.h).
 *
 * Every array is checked against the counts that give its layout before it is
 * written (the schema's CHECKs would refuse it anyway, in SQLite's words rather than
 * ours), and again when it is read back, so a damaged row is an error naming it
 * rather than a wrong loss. The foreach functions hold no statement open while the
 * caller's callback runs (see nr_db_candidate_foreach), so a callback may write to
 * the database it is reading. */
#include "tune/db_internal.h"

#include "tune/accuracy.h"
#include "util/error.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- candidates ---- */

#define NR_DB_CANDIDATE_COLS                                                             \
  "id, session_id, seq, route, point, phase, status, signal, message, build_ms,"         \
  " engine_bytes, engine_path, n_metrics, n_pairs, n_outputs, losses, n_holdout_pairs,"  \
  " holdout_losses, n_times, times_ms, median_ms, ci_lo_ms, ci_hi_ms, created_at,"       \
  " ignored, knob_use"

void nr_db_candidate_free(nr_db_candidate *c) {
  if (!c)
    return;
  free(c->route);
  free(c->point);
  free(c->phase);
  free(c->status);
  free(c->message);
  free(c->engine_path);
  free(c->losses);
  free(c->holdout_losses);
  free(c->times_ms);
  free(c->ignored);
  free(c->knob_use);
  c->ignored = c->knob_use = NULL;
  c->route = c->point = c->phase = c->status = c->message = c->engine_path = NULL;
  c->losses = c->holdout_losses = c->times_ms = NULL;
}

/* Element count of an a x b array (x NR_METRIC_COUNT for losses), checked against
 * the pointer that should hold it. */
static nr_status db_array_len(nr_db *db, const double *x, int a, int b, bool losses,
                              const char *what, size_t *n, nr_error *err) {
  int64_t per = (int64_t)b * (losses ? NR_METRIC_COUNT : 1);
  *n = 0;
  if (a < 0 || b < 0 || (per && a > NR_DB_MAX_DOUBLES / per))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "tuning database '%s': %s: bad size %d x %d", db->path, what, a, b);
  *n = (size_t)(a * per);
  if (*n && !x)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "tuning database '%s': %s: %zu values but a NULL array", db->path,
                     what, *n);
  return NR_OK;
}

static nr_status db_check_candidate(nr_db *db, const nr_db_candidate *c, size_t n[3],
                                    nr_error *err) {
  if (!db || !c || !c->route || !c->status)
    return nr_db_invalid(db, err,
                         "recording a candidate: NULL argument, route or status");
  nr_status s = db_array_len(db, c->losses, c->n_pairs, c->n_outputs, true,
                             "candidate losses", &n[0], err);
  if (s == NR_OK)
    s = db_array_len(db, c->holdout_losses, c->n_holdout_pairs, c->n_outputs, true,
                     "candidate holdout losses", &n[1], err);
  if (s == NR_OK)
    s = db_array_len(db, c->times_ms, c->n_times, 1, false, "candidate timings", &n[2],
                     err);
  return s;
}

/* In the order of NR_DB_CANDIDATE_COLS, after id. */
static void bind_candidate(nr_db_stmt *q, const nr_db_candidate *c, const size_t n[3],
                           double now) {
  nr_db_bind_int(q, c->session_id);
  nr_db_bind_int(q, c->seq);
  nr_db_bind_text(q, c->route);
  nr_db_bind_text(q, c->point);
  nr_db_bind_text(q, c->phase);
  nr_db_bind_text(q, c->status);
  nr_db_bind_int(q, c->signal);
  nr_db_bind_text(q, c->message);
  nr_db_bind_real(q, c->build_ms);
  nr_db_bind_int(q, (int64_t)c->engine_bytes);
  nr_db_bind_text(q, c->engine_path);
  nr_db_bind_int(q, NR_METRIC_COUNT);
  nr_db_bind_int(q, c->n_pairs);
  nr_db_bind_int(q, c->n_outputs);
  nr_db_bind_doubles(q, c->losses, n[0]);
  nr_db_bind_int(q, c->n_holdout_pairs);
  nr_db_bind_doubles(q, c->holdout_losses, n[1]);
  nr_db_bind_int(q, c->n_times);
  nr_db_bind_doubles(q, c->times_ms, n[2]);
  nr_db_bind_real(q, c->median_ms);
  nr_db_bind_real(q, c->ci_lo_ms);
  nr_db_bind_real(q, c->ci_hi_ms);
  nr_db_bind_real(q, now);
  nr_db_bind_text(q, c->ignored);
  nr_db_bind_text(q, c->knob_use ? c->knob_use : "");
}

/* The only UNIQUE constraint of candidates is (session_id, route): a violation is the
 * caller's duplicate, said in the tuner's words. */
static nr_status db_candidate_put_fail(nr_db *db, const nr_db_candidate *c, int rc,
                                       nr_error *err) {
  if (rc == SQLITE_CONSTRAINT_UNIQUE)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "tuning database '%s': session %lld already has a candidate with "
                     "route '%s'",
                     db->path, (long long)c->session_id, c->route);
  return nr_db_fail(db, rc, err, "recording candidate route '%s' of session %lld",
                    c->route, (long long)c->session_id);
}

nr_status nr_db_candidate_put(nr_db *db, nr_db_candidate *c, nr_error *err) {
  size_t n[3] = {0};
  nr_status s = db_check_candidate(db, c, n, err);
  nr_db_stmt q;
  if (s == NR_OK)
    s = nr_db_prepare(
        db,
        "INSERT INTO candidates (" NR_DB_CANDIDATE_COLS
        ") VALUES (NULL,"
        " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &q, "record a candidate", err);
  if (s != NR_OK)
    return s;
  double now = nr_db_now();
  bind_candidate(&q, c, n, now);
  int rc = nr_db_step(&q);
  if (rc == SQLITE_DONE) {
    c->id = sqlite3_last_insert_rowid(db->conn);
    c->created_at = now;
  } else {
    s = db_candidate_put_fail(db, c, rc, err);
  }
  sqlite3_finalize(q.st);
  return s;
}

static nr_status db_read_candidate(nr_db *db, sqlite3_stmt *st, nr_db_candidate *c,
                                   nr_error *err) {
  nr_db_row r = {st, 0, false, NULL};
  memset(c, 0, sizeof *c);
  c->id = nr_db_row_int(&r);
  c->session_id = nr_db_row_int(&r);
  c->seq = (int)nr_db_row_int(&r);
  c->route = nr_db_row_text(&r);
  c->point = nr_db_row_text(&r);
  c->phase = nr_db_row_text(&r);
  c->status = nr_db_row_text(&r);
  c->signal = (int)nr_db_row_int(&r);
  c->message = nr_db_row_text(&r);
  c->build_ms = nr_db_row_real(&r);
  c->engine_bytes = (uint64_t)nr_db_row_int(&r);
  c->engine_path = nr_db_row_text(&r);
  if (nr_db_row_int(&r) != NR_METRIC_COUNT)
    r.bad = "it was recorded with another number of accuracy metrics";
  int64_t n_pairs = nr_db_row_int(&r), n_outputs = nr_db_row_int(&r);
  size_t per_pair = nr_db_row_count(&r, n_outputs, NR_METRIC_COUNT);
  c->losses = nr_db_row_doubles(&r, nr_db_row_count(&r, n_pairs, per_pair));
  int64_t n_holdout_pairs = nr_db_row_int(&r);
  c->holdout_losses =
      nr_db_row_doubles(&r, nr_db_row_count(&r, n_holdout_pairs, per_pair));
  int64_t n_times = nr_db_row_int(&r);
  c->times_ms = nr_db_row_doubles(&r, nr_db_row_count(&r, n_times, 1));
  c->n_pairs = (int)n_pairs; /* nr_db_row_count capped them all below INT_MAX */
  c->n_outputs = (int)n_outputs;
  c->n_holdout_pairs = (int)n_holdout_pairs;
  c->n_times = (int)n_times;
  c->median_ms = nr_db_row_real(&r);
  c->ci_lo_ms = nr_db_row_real(&r);
  c->ci_hi_ms = nr_db_row_real(&r);
  c->created_at = nr_db_row_real(&r);
  c->ignored = nr_db_row_text(&r);
  c->knob_use = nr_db_row_text(&r);
  nr_status s = nr_db_row_finish(db, &r, "candidate", c->id, err);
  if (s != NR_OK)
    nr_db_candidate_free(c);
  return s;
}

nr_status nr_db_candidate_get(nr_db *db, int64_t session_id, const char *route,
                              nr_db_candidate *out, bool *found, nr_error *err) {
  if (!db || !route || !out || !found)
    return nr_db_invalid(db, err, "looking a candidate up: NULL argument");
  memset(out, 0, sizeof *out);
  *found = false;
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "SELECT " NR_DB_CANDIDATE_COLS " FROM candidates"
                              " WHERE session_id = ? AND route = ?",
                              &q, "look a candidate up", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, session_id);
  nr_db_bind_text(&q, route);
  int rc = nr_db_step(&q);
  if (rc == SQLITE_ROW && (s = db_read_candidate(db, q.st, out, err)) == NR_OK)
    *found = true;
  else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    s = nr_db_fail(db, rc, err, "looking up route '%s' of session %lld", route,
                   (long long)session_id);
  sqlite3_finalize(q.st);
  return s;
}

/* ---- aliases ---- */

nr_status nr_db_alias_put(nr_db *db, int64_t session_id, int seq, const char *route,
                          const char *same_as, nr_error *err) {
  if (!db || !route || !same_as)
    return nr_db_invalid(db, err, "recording an alias: NULL argument");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "INSERT INTO aliases (session_id, seq, route, same_as,"
                              " created_at) VALUES (?, ?, ?, ?, ?)",
                              &q, "record an alias", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, session_id);
  nr_db_bind_int(&q, seq);
  nr_db_bind_text(&q, route);
  nr_db_bind_text(&q, same_as);
  nr_db_bind_real(&q, nr_db_now());
  return nr_db_write(db, &q, NULL, err, "recording route '%s' of session %lld as '%s'",
                     route, (long long)session_id, same_as);
}

nr_status nr_db_alias_get(nr_db *db, int64_t session_id, const char *route,
                          char **same_as, nr_error *err) {
  if (!db || !route || !same_as)
    return nr_db_invalid(db, err, "looking an alias up: NULL argument");
  *same_as = NULL;
  nr_db_stmt q;
  nr_status s = nr_db_prepare(
      db, "SELECT same_as FROM aliases WHERE session_id = ? AND route = ?", &q,
      "look an alias up", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, session_id);
  nr_db_bind_text(&q, route);
  int rc = nr_db_step(&q);
  if (rc == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(q.st, 0);
    if (!(*same_as = strdup(t ? (const char *)t : "")))
      s = nr_errorf(err, NR_ERR_NOMEM, "out of memory reading an alias");
  } else if (rc != SQLITE_DONE) {
    s = nr_db_fail(db, rc, err, "looking up alias '%s' of session %lld", route,
                   (long long)session_id);
  }
  sqlite3_finalize(q.st);
  return s;
}

/* The foreach functions fetch one row per step and reset the statement before
 * calling fn, resuming after the last key ((seq, id) here: seq may repeat when a
 * resumed search proposes in another order). So nothing is open while the caller's
 * code runs: no read transaction pins the WAL (a checkpoint cannot pass a reader's
 * snapshot, and a long resume would let the WAL grow), and fn may write to the
 * table being walked or re-enter the database without disturbing the walk. */
nr_status nr_db_candidate_foreach(nr_db *db, int64_t session_id,
                                  int (*fn)(const nr_db_candidate *c, void *user),
                                  void *user, nr_error *err) {
  if (!db || !fn)
    return nr_db_invalid(db, err, "listing candidates: NULL argument");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "SELECT " NR_DB_CANDIDATE_COLS " FROM candidates"
                              " WHERE session_id = ? AND (seq, id) > (?, ?)"
                              " ORDER BY seq, id LIMIT 1",
                              &q, "list candidates", err);
  for (int64_t last_seq = INT64_MIN, last_id = INT64_MIN; s == NR_OK;) {
    q.n = 0;
    nr_db_bind_int(&q, session_id);
    nr_db_bind_int(&q, last_seq);
    nr_db_bind_int(&q, last_id);
    int rc = nr_db_step(&q);
    nr_db_candidate c;
    if (rc == SQLITE_ROW)
      s = db_read_candidate(db, q.st, &c, err);
    else if (rc != SQLITE_DONE)
      s = nr_db_fail(db, rc, err, "listing candidates of session %lld",
                     (long long)session_id);
    sqlite3_reset(q.st);
    if (rc != SQLITE_ROW || s != NR_OK)
      break;
    last_seq = c.seq;
    last_id = c.id;
    int stop = fn(&c, user);
    nr_db_candidate_free(&c);
    if (stop)
      break;
  }
  sqlite3_finalize(q.st);
  return s;
}

nr_status nr_db_candidate_count(nr_db *db, int64_t session_id, int *count, int *next_seq,
                                nr_error *err) {
  if (!db)
    return nr_db_invalid(db, err, "counting candidates: NULL database");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "SELECT count(*), coalesce(max(seq) + 1, 0) FROM candidates"
                              " WHERE session_id = ?",
                              &q, "count candidates", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, session_id);
  int rc = nr_db_step(&q);
  if (rc != SQLITE_ROW)
    s = nr_db_fail(db, rc, err, "counting candidates of session %lld",
                   (long long)session_id);
  if (rc == SQLITE_ROW && count)
    *count = sqlite3_column_int(q.st, 0);
  if (rc == SQLITE_ROW && next_seq)
    *next_seq = sqlite3_column_int(q.st, 1);
  sqlite3_finalize(q.st);
  return s;
}

nr_status nr_db_candidate_set_engine(nr_db *db, int64_t id, const char *engine_path,
                                     nr_error *err) {
  if (!db)
    return nr_db_invalid(db, err, "setting an engine file: NULL database");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db, "UPDATE candidates SET engine_path = ? WHERE id = ?",
                              &q, "set an engine file", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_text(&q, engine_path);
  nr_db_bind_int(&q, id);
  return nr_db_write(db, &q, "no such candidate", err,
                     "setting the engine file of candidate %lld", (long long)id);
}

/* Holdout losses share n_outputs with the reference losses. A candidate recorded
 * without reference pairs (n_pairs 0) takes the holdout's n_outputs; otherwise the
 * two must agree, unless the holdout is being cleared (n_pairs 0). */
nr_status nr_db_candidate_set_holdout(nr_db *db, int64_t id, const double *losses,
                                      int n_pairs, int n_outputs, nr_error *err) {
  size_t n = 0;
  nr_status s = db ? db_array_len(db, losses, n_pairs, n_outputs, true, "holdout losses",
                                  &n, err)
                   : nr_db_invalid(db, err, "setting holdout losses: NULL database");
  nr_db_stmt q;
  if (s == NR_OK)
    s = nr_db_prepare(db,
                      "UPDATE candidates SET n_holdout_pairs = ?1, holdout_losses = ?2,"
                      " n_outputs = CASE WHEN n_pairs = 0 AND ?1 > 0 THEN ?3"
                      " ELSE n_outputs END"
                      " WHERE id = ?4 AND (?1 = 0 OR n_pairs = 0 OR n_outputs = ?3)",
                      &q, "set holdout losses", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, n_pairs);
  nr_db_bind_doubles(&q, losses, n);
  nr_db_bind_int(&q, n_outputs);
  nr_db_bind_int(&q, id);
  return nr_db_write(
      db, &q, "no such candidate, or its losses have another number of outputs", err,
      "setting holdout losses (%d pairs x %d outputs) of candidate %lld", n_pairs,
      n_outputs, (long long)id);
}

/* ---- measurements ---- */

nr_status nr_db_measurement_put(nr_db *db, const nr_db_measurement *m, nr_error *err) {
  size_t n = 0;
  nr_status s = db && m && m->stage
                    ? db_array_len(db, m->times_ms, m->n_times, 1, false,
                                   "measurement timings", &n, err)
                    : nr_db_invalid(db, err, "recording a measurement: NULL argument");
  nr_db_stmt q;
  if (s == NR_OK)
    s = nr_db_prepare(db,
                      "INSERT INTO measurements (candidate_id, stage, round, n_times,"
                      " times_ms, median_ms, ci_lo_ms, ci_hi_ms, created_at)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      &q, "record a measurement", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, m->candidate_id);
  nr_db_bind_text(&q, m->stage);
  nr_db_bind_int(&q, m->round);
  nr_db_bind_int(&q, m->n_times);
  nr_db_bind_doubles(&q, m->times_ms, n);
  nr_db_bind_real(&q, m->median_ms);
  nr_db_bind_real(&q, m->ci_lo_ms);
  nr_db_bind_real(&q, m->ci_hi_ms);
  nr_db_bind_real(&q, nr_db_now());
  return nr_db_write(db, &q, NULL, err,
                     "recording measurement '%.40s' round %d of candidate %lld", m->stage,
                     m->round, (long long)m->candidate_id);
}

static nr_status db_read_measurement(nr_db *db, sqlite3_stmt *st, int64_t *id,
                                     nr_db_measurement *m, nr_error *err) {
  nr_db_row r = {st, 0, false, NULL};
  *id = nr_db_row_int(&r);
  m->candidate_id = nr_db_row_int(&r);
  m->stage = nr_db_row_text(&r);
  m->round = (int)nr_db_row_int(&r);
  int64_t n_times = nr_db_row_int(&r);
  m->times_ms = nr_db_row_doubles(&r, nr_db_row_count(&r, n_times, 1));
  m->n_times = (int)n_times;
  m->median_ms = nr_db_row_real(&r);
  m->ci_lo_ms = nr_db_row_real(&r);
  m->ci_hi_ms = nr_db_row_real(&r);
  return nr_db_row_finish(db, &r, "measurement", *id, err);
}

nr_status nr_db_measurement_foreach(nr_db *db, int64_t candidate_id,
                                    int (*fn)(const nr_db_measurement *m, void *user),
                                    void *user, nr_error *err) {
  if (!db || !fn)
    return nr_db_invalid(db, err, "listing measurements: NULL argument");
  nr_db_stmt q; /* one row per step, like nr_db_candidate_foreach */
  nr_status s = nr_db_prepare(db,
                              "SELECT id, candidate_id, stage, round, n_times, times_ms,"
                              " median_ms, ci_lo_ms, ci_hi_ms FROM measurements"
                              " WHERE candidate_id = ? AND id > ? ORDER BY id LIMIT 1",
                              &q, "list measurements", err);
  for (int64_t last = INT64_MIN; s == NR_OK;) {
    q.n = 0;
    nr_db_bind_int(&q, candidate_id);
    nr_db_bind_int(&q, last);
    int rc = nr_db_step(&q);
    nr_db_measurement m = {0};
    if (rc == SQLITE_ROW)
      s = db_read_measurement(db, q.st, &last, &m, err);
    else if (rc != SQLITE_DONE)
      s = nr_db_fail(db, rc, err, "listing measurements of candidate %lld",
                     (long long)candidate_id);
    sqlite3_reset(q.st);
    int stop = rc != SQLITE_ROW || s != NR_OK || fn(&m, user);
    free(m.stage);
    free(m.times_ms);
    if (stop)
      break;
  }
  sqlite3_finalize(q.st);
  return s;
}

/* ---- priors ---- */

typedef struct nr_db_priors_list {
  int n, cap;
  char **route;
  double *ratio;
} nr_db_priors_list;

static bool priors_push(nr_db_priors_list *l, const char *route, double ratio) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    char **r = realloc(l->route, cap * sizeof *r);
    if (r)
      l->route = r;
    double *x = realloc(l->ratio, cap * sizeof *x);
    if (x)
      l->ratio = x;
    if (!r || !x)
      return false;
    l->cap = cap;
  }
  if (!route || !(l->route[l->n] = strdup(route)))
    return false;
  l->ratio[l->n++] = ratio;
  return true;
}

/* The default route (route '') of the same session is the denominator whatever its
 * status: its timings are measured even when its accuracy fails. A NaN median is
 * NULL, and NULL > 0 is not true, so it drops out. */
static nr_status db_priors_read(nr_db *db, const char *model_sha256, int64_t exclude_env_id,
                                nr_db_priors_list *l, nr_error *err) {
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "SELECT c.route, c.median_ms / d.median_ms FROM models m"
                              " JOIN sessions s ON s.model_id = m.id"
                              " JOIN candidates d ON d.session_id = s.id AND d.route = ''"
                              " JOIN candidates c ON c.session_id = s.id"
                              " WHERE m.sha256 = ? AND s.env_id <> ? AND c.status = 'ok'"
                              " AND c.median_ms > 0 AND d.median_ms > 0"
                              " ORDER BY s.id, c.seq",
                              &q, "read priors", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_text(&q, model_sha256);
  nr_db_bind_int(&q, exclude_env_id);
  int rc = nr_db_step(&q);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(q.st))
    if (!priors_push(l, (const char *)sqlite3_column_text(q.st, 0),
                     sqlite3_column_double(q.st, 1))) {
      s = nr_errorf(err, NR_ERR_NOMEM,
                    "tuning database '%s': reading priors: out of memory", db->path);
      break;
    }
  if (s == NR_OK && rc != SQLITE_DONE)
    s = nr_db_fail(db, rc, err, "reading priors of model %.64s", model_sha256);
  sqlite3_finalize(q.st);
  return s;
}

/* The rows are read in full before fn sees any, so that fn runs with no statement
 * active (see nr_db_candidate_foreach); they are small (a route and a ratio). */
nr_status nr_db_priors(nr_db *db, const char *model_sha256, int64_t exclude_env_id,
                       int (*fn)(const char *route, double ratio, void *user),
                       void *user, nr_error *err) {
  if (!db || !model_sha256 || !fn)
    return nr_db_invalid(db, err, "reading priors: NULL argument");
  nr_db_priors_list l = {0};
  nr_status s = db_priors_read(db, model_sha256, exclude_env_id, &l, err);
  for (int i = 0; i < l.n && s == NR_OK; i++)
    if (fn(l.route[i], l.ratio[i], user))
      break;
  for (int i = 0; i < l.n; i++)
    free(l.route[i]);
  free(l.route);
  free(l.ratio);
  return s;
}
