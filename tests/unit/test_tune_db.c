/* test_tune_db.c - the tuning database: every field survives a close and reopen bit
 * for bit (inf and NaN losses, empty arrays, NULL strings), duplicates are refused,
 * resume and priors find the right rows, strangers' files are refused untouched, and
 * a writer killed with SIGKILL mid-stream leaves every committed row whole.
 *
 * Each test works in its own mkdtemp directory under /tmp and removes it. */
#include "tune/accuracy.h"
#include "tune/db.h"
#include "scratch_dir.h"
#include "sqlite_int.h"
#include "unit.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef nr_scratch_dir db_fixture;

static bool fixture_make(db_fixture *f) { return nr_scratch_make(f, "nr_tune_db", "tune.db"); }
static void fixture_free(db_fixture *f) { nr_scratch_free(f); }

static bool same_bits(const double *a, const double *b, size_t n) {
  return n == 0 || (a && b && memcmp(a, b, n * sizeof *a) == 0);
}

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

/* Direct SQLite access, to build files nnroute would never write. */
static bool sqlite_exec(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  bool ok = sqlite3_open(path, &c) == SQLITE_OK &&
            sqlite3_exec(c, sql, NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(c);
  return ok;
}

static int64_t sqlite_int(const char *path, const char *sql) {
  return nr_sqlite_int(path, sql);
}

/* A session of a fresh environment and model; 0 on failure. */
static int64_t make_session(nr_db *db, const char *fingerprint, const char *sha256,
                            const char *shapes, const char *hash) {
  nr_db_env env = {fingerprint, "0.1.0", "knobs-1"};
  int64_t env_id, model_id, id;
  if (nr_db_env_id(db, &env, &env_id, NULL) ||
      nr_db_model_id(db, sha256, shapes, &model_id, NULL) ||
      nr_db_session_begin(db, env_id, model_id, "{\"tol\":1e-3}", hash,
                          "nnroute tune m.onnx", &id, NULL))
    return 0;
  return id;
}

/* A candidate with only the fields the tests care about; the rest empty. */
static nr_status put_timed(nr_db *db, int64_t session, int seq, const char *route,
                           const char *status, double median_ms) {
  nr_db_candidate c = {0};
  c.session_id = session;
  c.seq = seq;
  c.route = (char *)route;
  c.status = (char *)status;
  c.median_ms = median_ms;
  return nr_db_candidate_put(db, &c, NULL);
}

NR_TEST(tune_db_candidate_round_trip) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu:avx2", "ab12", "x=1x3", "h1");
  REQUIRE(sid > 0);

  enum { P = 2, O = 3, N = P * O * NR_METRIC_COUNT, T = 5 };
  double losses[N], holdout[N], times[T] = {1.25, 1.5, 0x1p-1074, -0.0, 1e300};
  for (int i = 0; i < N; i++) {
    losses[i] = i * 0.1 + 1e-17;
    holdout[i] = -i / 3.0;
  }
  losses[0] = INFINITY;
  losses[1] = NAN;
  losses[2] = -INFINITY;
  holdout[N - 1] = NAN;
  nr_db_candidate c = {.session_id = sid, .seq = 0, .route = "conv.algo=winograd",
                       .point = "1,0,2", .phase = "fast", .status = "accuracy_fail",
                       .signal = 11, .message = "loss 0.3 > 0.01", .build_ms = 123.456,
                       .engine_bytes = 5000000000ull, .engine_path = "/tmp/e.nre",
                       .n_pairs = P, .n_outputs = O, .losses = losses,
                       .n_holdout_pairs = P, .holdout_losses = holdout, .times_ms = times,
                       .n_times = T, .median_ms = 1.5, .ci_lo_ms = 1.25,
                       .ci_hi_ms = INFINITY};
  REQUIRE(nr_db_candidate_put(db, &c, &err) == NR_OK, "%s", err.message);
  CHECK(c.id > 0 && c.created_at > 1.6e9, "id %lld created_at %f", (long long)c.id,
        c.created_at);
  nr_db_close(db); /* read back from the file, not from the connection */
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);

  nr_db_candidate g;
  bool found = false;
  REQUIRE(nr_db_candidate_get(db, sid, "conv.algo=winograd", &g, &found, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(found);
  CHECK(g.id == c.id && g.session_id == sid && g.seq == 0 && g.signal == 11);
  CHECK(same_str(g.route, c.route) && same_str(g.point, "1,0,2"));
  CHECK(same_str(g.phase, "fast"));
  CHECK(same_str(g.status, "accuracy_fail") && same_str(g.message, c.message));
  CHECK(same_str(g.engine_path, "/tmp/e.nre") && g.engine_bytes == 5000000000ull);
  CHECK(g.build_ms == 123.456 && g.median_ms == 1.5 && g.ci_lo_ms == 1.25);
  CHECK(isinf(g.ci_hi_ms) && g.ci_hi_ms > 0 && g.created_at == c.created_at);
  CHECK(g.n_pairs == P && g.n_outputs == O && g.n_holdout_pairs == P && g.n_times == T);
  CHECK(same_bits(g.losses, losses, N), "losses differ");
  CHECK(isinf(g.losses[0]) && isnan(g.losses[1]) && g.losses[2] < 0);
  CHECK(same_bits(g.holdout_losses, holdout, N), "holdout losses differ");
  CHECK(same_bits(g.times_ms, times, T) && signbit(g.times_ms[3]), "times differ");
  nr_db_candidate_free(&g);
  found = true;
  CHECK(nr_db_candidate_get(db, sid, "absent", &g, &found, &err) == NR_OK && !found);
  nr_db_close(db);
  fixture_free(&f);
}

NR_TEST(tune_db_candidate_empty_arrays_and_null_strings) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu", "ab", "", "h");
  REQUIRE(sid > 0);
  /* A crashed build: no losses, no timings, NULL point/phase/message/engine, and a
   * NaN scalar, which SQLite keeps as NULL. */
  nr_db_candidate c = {.session_id = sid, .seq = 3, .route = "", .status = "crash",
                       .signal = 9, .build_ms = NAN, .n_outputs = 4};
  REQUIRE(nr_db_candidate_put(db, &c, &err) == NR_OK, "%s", err.message);
  nr_db_candidate g;
  bool found = false;
  REQUIRE(nr_db_candidate_get(db, sid, "", &g, &found, &err) == NR_OK && found, "%s",
          err.message);
  CHECK(same_str(g.route, "") && same_str(g.status, "crash"));
  CHECK(g.seq == 3 && g.signal == 9);
  CHECK(!g.point && !g.phase && !g.message && !g.engine_path);
  CHECK(g.n_pairs == 0 && g.n_outputs == 4 && g.n_holdout_pairs == 0 && g.n_times == 0);
  CHECK(!g.losses && !g.holdout_losses && !g.times_ms);
  CHECK(isnan(g.build_ms) && g.median_ms == 0 && g.engine_bytes == 0);
  nr_db_candidate_free(&g);
  nr_db_candidate_free(&g); /* freeing twice is harmless */

  c.route = "x";
  c.seq = 4;
  c.n_pairs = 1; /* a count without its array */
  CHECK(nr_db_candidate_put(db, &c, &err) == NR_ERR_INVALID_ARGUMENT);
  c.n_pairs = -1;
  CHECK(nr_db_candidate_put(db, &c, &err) == NR_ERR_INVALID_ARGUMENT);
  nr_db_close(db);
  fixture_free(&f);
}

NR_TEST(tune_db_holdout_engine_and_count) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu", "ab", "", "h");
  REQUIRE(sid > 0);
  int count = -1, next = -1;
  REQUIRE(nr_db_candidate_count(db, sid, &count, &next, &err) == NR_OK, "%s", err.message);
  CHECK(count == 0 && next == 0);

  double loss[2 * NR_METRIC_COUNT] = {[0] = INFINITY, [5] = 0.5};
  nr_db_candidate c = {.session_id = sid, .seq = 0, .route = "a", .status = "ok",
                       .n_pairs = 1, .n_outputs = 2, .losses = loss};
  REQUIRE(nr_db_candidate_put(db, &c, &err) == NR_OK, "%s", err.message);
  c.route = "b";
  c.seq = 7;
  REQUIRE(nr_db_candidate_put(db, &c, &err) == NR_OK, "%s", err.message);
  CHECK(nr_db_candidate_count(db, sid, &count, &next, &err) == NR_OK);
  CHECK(count == 2 && next == 8, "count %d, next %d", count, next);

  double hold[3 * 2 * NR_METRIC_COUNT];
  for (int i = 0; i < 3 * 2 * NR_METRIC_COUNT; i++)
    hold[i] = i == 4 ? NAN : i;
  CHECK(nr_db_candidate_set_holdout(db, c.id, hold, 3, 2, &err) == NR_OK, "%s",
        err.message);
  CHECK(nr_db_candidate_set_holdout(db, c.id, hold, 1, 3, &err) == NR_ERR_INVALID_ARGUMENT,
        "another number of outputs");
  CHECK(nr_db_candidate_set_holdout(db, 999, hold, 1, 2, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(nr_db_candidate_set_engine(db, c.id, "/tmp/b.nre", &err) == NR_OK, "%s",
        err.message);
  CHECK(nr_db_candidate_set_engine(db, 999, "/tmp/x", &err) == NR_ERR_INVALID_ARGUMENT);

  nr_db_candidate g;
  bool found;
  REQUIRE(nr_db_candidate_get(db, sid, "b", &g, &found, &err) == NR_OK && found);
  CHECK(g.n_holdout_pairs == 3 && same_bits(g.holdout_losses, hold, 6 * NR_METRIC_COUNT));
  CHECK(same_str(g.engine_path, "/tmp/b.nre"));
  CHECK(same_bits(g.losses, loss, 2 * NR_METRIC_COUNT));
  nr_db_candidate_free(&g);
  CHECK(nr_db_candidate_set_engine(db, c.id, NULL, &err) == NR_OK);
  CHECK(nr_db_candidate_set_holdout(db, c.id, NULL, 0, 0, &err) == NR_OK, "%s",
        err.message);
  REQUIRE(nr_db_candidate_get(db, sid, "b", &g, &found, &err) == NR_OK && found);
  CHECK(!g.engine_path && g.n_holdout_pairs == 0 && !g.holdout_losses && g.n_outputs == 2);
  nr_db_candidate_free(&g);
  nr_db_close(db);
  fixture_free(&f);
}

typedef struct writer_state {
  nr_db *db;
  const char *path;
  int visited, committed, checkpointed;
  char order[8]; /* last letter of each route visited */
} writer_state;

/* Writes from inside the callback and checks from other connections that the write
 * is committed and that nothing is left open while fn runs. */
static int on_candidate_write(const nr_db_candidate *c, void *user) {
  writer_state *w = user;
  char engine[32];
  snprintf(engine, sizeof engine, "/e/%d", c->seq);
  w->visited++;
  if (nr_db_candidate_set_engine(w->db, c->id, engine, NULL) != NR_OK)
    return 1;
  nr_db *other = NULL;
  nr_db_candidate g;
  bool found = false;
  if (nr_db_open(w->path, &other, NULL) == NR_OK &&
      nr_db_candidate_get(other, c->session_id, c->route, &g, &found, NULL) == NR_OK &&
      found) {
    w->committed += same_str(g.engine_path, engine);
    nr_db_candidate_free(&g);
  }
  nr_db_close(other);
  /* A checkpoint that must wait for no reader completes (busy 0) only when foreach
   * holds no read transaction open: a long callback must not pin the WAL. */
  w->checkpointed += sqlite_int(w->path, "PRAGMA wal_checkpoint(TRUNCATE)") == 0;
  w->order[w->visited - 1] = c->route[0] ? c->route[strlen(c->route) - 1] : '?';
  return w->visited == 3; /* stop before the last */
}

NR_TEST(tune_db_foreach_callback_may_write) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu", "ab", "", "h");
  REQUIRE(sid > 0);
  /* Inserted out of seq order, and seq 1 twice (a resumed search may propose in
   * another order): foreach goes by seq, then by insertion. */
  CHECK(!put_timed(db, sid, 2, "c", "ok", 1) && !put_timed(db, sid, 0, "a", "ok", 1));
  CHECK(!put_timed(db, sid, 1, "b", "ok", 1) && !put_timed(db, sid, 1, "b2", "ok", 1));
  writer_state w = {db, f.path, 0, 0, 0, ""};
  REQUIRE(nr_db_candidate_foreach(db, sid, on_candidate_write, &w, &err) == NR_OK, "%s",
          err.message);
  CHECK(w.visited == 3 && w.committed == 3 && w.checkpointed == 3,
        "visited %d, committed %d, checkpointed %d", w.visited, w.committed,
        w.checkpointed);
  CHECK(strcmp(w.order, "ab2") == 0, "order %s", w.order);
  nr_db_candidate g;
  bool found;
  REQUIRE(nr_db_candidate_get(db, sid, "a", &g, &found, &err) == NR_OK && found);
  CHECK(same_str(g.engine_path, "/e/0"), "seq 0 first");
  nr_db_candidate_free(&g);
  REQUIRE(nr_db_candidate_get(db, sid, "c", &g, &found, &err) == NR_OK && found);
  CHECK(!g.engine_path, "stopped before seq 2");
  nr_db_candidate_free(&g);
  int count = 0, next = 0;
  CHECK(nr_db_candidate_count(db, sid, &count, &next, &err) == NR_OK);
  CHECK(count == 4 && next == 3, "count %d, next %d", count, next);
  nr_db_close(db);
  fixture_free(&f);
}

NR_TEST(tune_db_session_round_trip) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_session s;
  bool found = true;
  CHECK(nr_db_session_get(db, 0, &s, &found, &err) == NR_OK && !found, "empty file");

  nr_db_env env = {"cpu", "0.1.0", "k1"};
  int64_t env_id, model_id, id;
  REQUIRE(nr_db_env_id(db, &env, &env_id, &err) == NR_OK);
  REQUIRE(nr_db_model_id(db, "ab", "x=1", &model_id, &err) == NR_OK);
  time_t before = time(NULL);
  REQUIRE(nr_db_session_begin(db, env_id, model_id, "{\"a\":1}", "f00d", NULL, &id, &err) ==
              NR_OK, "%s", err.message);
  REQUIRE(nr_db_session_get(db, id, &s, &found, &err) == NR_OK && found, "%s", err.message);
  CHECK(s.id == id && s.env_id == env_id && s.model_id == model_id);
  CHECK(same_str(s.settings, "{\"a\":1}") && same_str(s.settings_hash, "f00d") && !s.argv);
  CHECK(same_str(s.state, "running") && s.ended_at == 0 && !s.winner_route && !s.report);
  CHECK(s.started_at >= before - 1 && s.started_at <= time(NULL) + 1, "%f", s.started_at);
  nr_db_session_free(&s);

  CHECK(nr_db_session_end(db, id, "bogus", NULL, NULL, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(nr_db_session_end(db, id + 1, "done", NULL, NULL, &err) == NR_ERR_INVALID_ARGUMENT);
  REQUIRE(nr_db_session_end(db, id, "done", "r=1", "{\"winner\":\"r=1\"}", &err) == NR_OK,
          "%s", err.message);
  REQUIRE(nr_db_session_get(db, 0, &s, &found, &err) == NR_OK && found);
  CHECK(s.id == id && same_str(s.state, "done") && same_str(s.winner_route, "r=1"));
  CHECK(same_str(s.report, "{\"winner\":\"r=1\"}") && s.ended_at >= s.started_at);
  nr_db_session_free(&s);
  REQUIRE(nr_db_session_reopen(db, id, &err) == NR_OK);
  REQUIRE(nr_db_session_get(db, id, &s, &found, &err) == NR_OK && found);
  CHECK(same_str(s.state, "running") && s.ended_at == 0);
  nr_db_session_free(&s);
  CHECK(nr_db_session_reopen(db, id + 5, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(nr_db_session_get(db, id + 5, &s, &found, &err) == NR_OK && !found);
  nr_db_close(db);
  fixture_free(&f);
}

typedef struct seen_measurements {
  int n;
  int rounds[4];
  bool ok;
} seen_measurements;

static int on_measurement(const nr_db_measurement *m, void *user) {
  seen_measurements *seen = user;
  const double t[3] = {2.5, INFINITY, NAN};
  if (seen->n < 4)
    seen->rounds[seen->n] = m->round;
  if (m->round == 1)
    seen->ok &= strcmp(m->stage, "halving:1") == 0 && m->n_times == 3 &&
                same_bits(m->times_ms, t, 3) && m->median_ms == 2.5 && isnan(m->ci_hi_ms);
  else
    seen->ok &= strcmp(m->stage, "confirm") == 0 && m->n_times == 0 && !m->times_ms;
  seen->n++;
  return 0;
}

NR_TEST(tune_db_measurement_round_trip) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu", "ab", "", "h");
  nr_db_candidate c = {.session_id = sid, .route = "r", .status = "ok"};
  REQUIRE(sid > 0 && nr_db_candidate_put(db, &c, &err) == NR_OK);
  double times[3] = {2.5, INFINITY, NAN};
  nr_db_measurement m = {c.id, "halving:1", 1, times, 3, 2.5, 1.0, NAN};
  REQUIRE(nr_db_measurement_put(db, &m, &err) == NR_OK, "%s", err.message);
  nr_db_measurement e = {c.id, "confirm", 2, NULL, 0, 0, 0, 0};
  REQUIRE(nr_db_measurement_put(db, &e, &err) == NR_OK, "%s", err.message);
  e.candidate_id = c.id + 100; /* the foreign key refuses an unknown candidate */
  CHECK(nr_db_measurement_put(db, &e, &err) == NR_ERR_INVALID_ARGUMENT);
  nr_db_close(db);
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  seen_measurements seen = {.ok = true};
  REQUIRE(nr_db_measurement_foreach(db, c.id, on_measurement, &seen, &err) == NR_OK);
  CHECK(seen.n == 2 && seen.rounds[0] == 1 && seen.rounds[1] == 2 && seen.ok);
  nr_db_close(db);
  fixture_free(&f);
}

NR_TEST(tune_db_duplicate_route_refused) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t s1 = make_session(db, "cpu", "ab", "", "h1");
  int64_t s2 = make_session(db, "cpu", "ab", "", "h2");
  REQUIRE(s1 > 0 && s2 > 0);
  REQUIRE(put_timed(db, s1, 0, "gemm.tile=6x16", "ok", 1) == NR_OK);
  nr_db_candidate c = {.session_id = s1, .seq = 1, .route = "gemm.tile=6x16",
                       .status = "ok"};
  CHECK(nr_db_candidate_put(db, &c, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "'gemm.tile=6x16'") && strstr(err.message, f.path), "%s",
        err.message);
  c.route = "";
  CHECK(nr_db_candidate_put(db, &c, &err) == NR_OK, "%s", err.message);
  CHECK(nr_db_candidate_put(db, &c, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "route ''"), "%s", err.message);
  CHECK(put_timed(db, s2, 0, "gemm.tile=6x16", "ok", 1) == NR_OK, "another session");
  c.session_id = 12345; /* no such session: the foreign key */
  CHECK(nr_db_candidate_put(db, &c, &err) == NR_ERR_INVALID_ARGUMENT);
  int count = 0;
  CHECK(nr_db_candidate_count(db, s1, &count, NULL, &err) == NR_OK && count == 2);
  nr_db_close(db);
  fixture_free(&f);
}

/* The resumable session's id, 0 when none, -1 on error. */
static int64_t resumable(nr_db *db, int64_t env, int64_t model, const char *hash) {
  int64_t id = -1;
  if (nr_db_session_find_resumable(db, env, model, hash, &id, NULL) != NR_OK)
    return -1;
  return id;
}

NR_TEST(tune_db_find_resumable) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_env env = {"cpu", "0.1.0", "k1"}, other_env = {"gpu", "0.1.0", "k1"};
  int64_t e1, e2, m1, m2, s_done, s_other_hash, s_interrupted, s_newest;
  REQUIRE(nr_db_env_id(db, &env, &e1, &err) == NR_OK);
  REQUIRE(nr_db_env_id(db, &other_env, &e2, &err) == NR_OK);
  REQUIRE(nr_db_model_id(db, "ab", "", &m1, &err) == NR_OK);
  REQUIRE(nr_db_model_id(db, "cd", "", &m2, &err) == NR_OK);
  REQUIRE(nr_db_session_begin(db, e1, m1, "{}", "A", NULL, &s_done, &err) == NR_OK);
  REQUIRE(nr_db_session_end(db, s_done, "done", NULL, NULL, &err) == NR_OK);
  REQUIRE(nr_db_session_begin(db, e1, m1, "{}", "B", NULL, &s_other_hash, &err) == NR_OK);
  REQUIRE(nr_db_session_begin(db, e1, m1, "{}", "A", NULL, &s_interrupted, &err) == NR_OK);
  REQUIRE(nr_db_session_end(db, s_interrupted, "interrupted", NULL, NULL, &err) == NR_OK);
  REQUIRE(nr_db_session_begin(db, e1, m1, "{}", "A", NULL, &s_newest, &err) == NR_OK);

  REQUIRE(resumable(db, e1, m1, "A") == s_newest, "the newest");
  REQUIRE(nr_db_session_end(db, s_newest, "done", NULL, NULL, &err) == NR_OK);
  CHECK(resumable(db, e1, m1, "A") == s_interrupted, "then the interrupted one");
  REQUIRE(nr_db_session_end(db, s_interrupted, "done", NULL, NULL, &err) == NR_OK);
  CHECK(resumable(db, e1, m1, "A") == 0, "every A session done");
  CHECK(resumable(db, e1, m1, "B") == s_other_hash);
  CHECK(resumable(db, e2, m1, "B") == 0, "other environment");
  CHECK(resumable(db, e1, m2, "B") == 0, "other model");
  nr_db_close(db);
  fixture_free(&f);
}

NR_TEST(tune_db_env_and_model_ids) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_env a = {"cpu:avx2 dnnl 3.1", "0.1.0", "k1"}, b = a;
  int64_t ia, ia2, ib, ic, m1, m1b, m2, m3;
  REQUIRE(nr_db_env_id(db, &a, &ia, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_db_env_id(db, &a, &ia2, &err) == NR_OK);
  b.knob_schema = "k2";
  REQUIRE(nr_db_env_id(db, &b, &ib, &err) == NR_OK);
  b.knob_schema = "k1";
  b.nnroute_version = "0.2.0";
  REQUIRE(nr_db_env_id(db, &b, &ic, &err) == NR_OK);
  CHECK(ia > 0 && ia == ia2 && ib != ia && ic != ia && ic != ib);
  REQUIRE(nr_db_model_id(db, "ab", "x=1x3", &m1, &err) == NR_OK);
  REQUIRE(nr_db_model_id(db, "ab", "x=2x3", &m2, &err) == NR_OK);
  REQUIRE(nr_db_model_id(db, "cd", "x=1x3", &m3, &err) == NR_OK);
  nr_db_close(db); /* ids persist */
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_db_model_id(db, "ab", "x=1x3", &m1b, &err) == NR_OK);
  CHECK(m1 == m1b && m1 != m2 && m1 != m3 && m2 != m3);
  REQUIRE(nr_db_env_id(db, &a, &ia2, &err) == NR_OK);
  CHECK(ia2 == ia);
  b.fingerprint = NULL;
  CHECK(nr_db_env_id(db, &b, &ib, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(nr_db_model_id(db, NULL, "", &m1, &err) == NR_ERR_INVALID_ARGUMENT);
  nr_db_close(db);
  CHECK(sqlite_int(f.path, "SELECT count(*) FROM environments") == 3);
  CHECK(sqlite_int(f.path, "SELECT count(*) FROM models") == 3);
  fixture_free(&f);
}

typedef struct seen_priors {
  int n;
  char route[8][32];
  double ratio[8];
} seen_priors;

static int on_prior(const char *route, double ratio, void *user) {
  seen_priors *p = user;
  if (p->n < 8) {
    snprintf(p->route[p->n], sizeof p->route[0], "%s", route);
    p->ratio[p->n] = ratio;
  }
  p->n++;
  return 0;
}

static bool prior_is(const seen_priors *p, int i, const char *route, double ratio) {
  return i < p->n && strcmp(p->route[i], route) == 0 && fabs(p->ratio[i] - ratio) < 1e-12;
}

NR_TEST(tune_db_priors) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t s1 = make_session(db, "envA", "aaa", "x=1", "h");  /* counted */
  int64_t s2 = make_session(db, "envB", "aaa", "x=2", "h");  /* same sha, other shapes */
  int64_t s3 = make_session(db, "envC", "aaa", "x=1", "h");  /* the excluded env */
  int64_t s4 = make_session(db, "envA", "bbb", "x=1", "h");  /* another model */
  int64_t s5 = make_session(db, "envA", "aaa", "x=1", "h2"); /* no default route */
  REQUIRE(s1 && s2 && s3 && s4 && s5);
  CHECK(!put_timed(db, s1, 0, "", "ok", 10) && !put_timed(db, s1, 1, "r1", "ok", 5));
  CHECK(!put_timed(db, s1, 2, "r2", "crash", 2) && !put_timed(db, s1, 3, "r3", "ok", 0));
  CHECK(!put_timed(db, s1, 4, "r4", "ok", NAN));
  /* The default's accuracy failed: still the denominator, never a prior itself. */
  CHECK(!put_timed(db, s2, 0, "", "accuracy_fail", 4));
  CHECK(!put_timed(db, s2, 1, "r5", "ok", 6));
  CHECK(!put_timed(db, s3, 0, "", "ok", 10) && !put_timed(db, s3, 1, "r1", "ok", 1));
  CHECK(!put_timed(db, s4, 0, "", "ok", 10) && !put_timed(db, s4, 1, "r7", "ok", 1));
  CHECK(!put_timed(db, s5, 0, "r6", "ok", 3));
  nr_db_env env_c = {"envC", "0.1.0", "knobs-1"}, env_a = {"envA", "0.1.0", "knobs-1"};
  int64_t c_id, a_id;
  REQUIRE(nr_db_env_id(db, &env_c, &c_id, &err) == NR_OK);
  REQUIRE(nr_db_env_id(db, &env_a, &a_id, &err) == NR_OK);

  seen_priors p = {0};
  REQUIRE(nr_db_priors(db, "aaa", c_id, on_prior, &p, &err) == NR_OK, "%s", err.message);
  CHECK(p.n == 3, "%d priors", p.n);
  CHECK(prior_is(&p, 0, "", 1.0) && prior_is(&p, 1, "r1", 0.5) &&
            prior_is(&p, 2, "r5", 1.5),
        "%s %g, %s %g, %s %g", p.route[0], p.ratio[0], p.route[1], p.ratio[1], p.route[2],
        p.ratio[2]);
  memset(&p, 0, sizeof p);
  REQUIRE(nr_db_priors(db, "aaa", a_id, on_prior, &p, &err) == NR_OK);
  CHECK(p.n == 3 && prior_is(&p, 0, "r5", 1.5) && prior_is(&p, 1, "", 1.0) &&
            prior_is(&p, 2, "r1", 0.1), "%d priors", p.n);
  memset(&p, 0, sizeof p);
  REQUIRE(nr_db_priors(db, "zzz", 0, on_prior, &p, &err) == NR_OK);
  CHECK(p.n == 0);
  nr_db_close(db);
  fixture_free(&f);
}

/* ---- files that are not ours ---- */

static bool file_equals(const char *path, const char *bytes, size_t n) {
  char buf[8192];
  FILE *fp = fopen(path, "rb");
  size_t got = fp ? fread(buf, 1, sizeof buf, fp) : 0;
  if (fp)
    fclose(fp);
  return got == n && memcmp(buf, bytes, n) == 0;
}

NR_TEST(tune_db_refuses_non_database) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = "this is not a database\n"[i % 23];
  FILE *fp = fopen(f.path, "wb");
  REQUIRE(fp);
  fwrite(junk, 1, sizeof junk, fp);
  fclose(fp);
  nr_db *db = (nr_db *)&f; /* any non-NULL value: a refusal must set it to NULL */
  nr_error err = {0};
  nr_status s = nr_db_open(f.path, &db, &err);
  CHECK(s == NR_ERR_INVALID_ARGUMENT && !db, "status %d", s);
  CHECK(strstr(err.message, f.path) && strstr(err.message, "not an SQLite file"), "%s",
        err.message);
  CHECK(file_equals(f.path, junk, sizeof junk), "the file was changed");
  char missing[128];
  snprintf(missing, sizeof missing, "%s/no/such/dir/t.db", f.dir);
  CHECK(nr_db_open(missing, &db, &err) == NR_ERR_IO && strstr(err.message, missing), "%s",
        err.message);
  fixture_free(&f);
}

NR_TEST(tune_db_refuses_foreign_sqlite) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  REQUIRE(sqlite_exec(f.path, "PRAGMA application_id = 1234;"
                              "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT);"));
  nr_db *db = NULL;
  nr_error err = {0};
  CHECK(nr_db_open(f.path, &db, &err) == NR_ERR_INVALID_ARGUMENT && !db);
  CHECK(strstr(err.message, f.path) && strstr(err.message, "another application"), "%s",
        err.message);
  CHECK(sqlite_int(f.path, "SELECT count(*) FROM sqlite_schema WHERE name = 'meta'") == 0);
  CHECK(sqlite_int(f.path, "PRAGMA application_id") == 1234, "header rewritten");
  nr_db_close(db);

  /* No application_id, but tables: a plain SQLite file of someone else. */
  char plain[96];
  snprintf(plain, sizeof plain, "%s/plain.db", f.dir);
  REQUIRE(sqlite_exec(plain, "CREATE TABLE t (x INT)"));
  CHECK(nr_db_open(plain, &db, &err) == NR_ERR_INVALID_ARGUMENT && !db, "%s", err.message);
  CHECK(strstr(err.message, plain), "%s", err.message);
  fixture_free(&f);
}

NR_TEST(tune_db_refuses_newer_schema) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_close(db);
  REQUIRE(sqlite_exec(f.path, "UPDATE meta SET value = '4' WHERE key = 'schema_version'"));
  db = NULL;
  CHECK(nr_db_open(f.path, &db, &err) == NR_ERR_INVALID_ARGUMENT && !db);
  CHECK(strstr(err.message, f.path) && strstr(err.message, "schema version 4"), "%s",
        err.message);
  /* Our application_id but no meta table: damaged, refused too. */
  REQUIRE(sqlite_exec(f.path, "DROP TABLE meta"));
  CHECK(nr_db_open(f.path, &db, &err) == NR_ERR_INVALID_ARGUMENT && !db);
  CHECK(strstr(err.message, "meta"), "%s", err.message);
  fixture_free(&f);
}

NR_TEST(tune_db_file_is_wal_and_tagged) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_close(db);
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "reopen: %s", err.message);
  nr_db_close(db);
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  REQUIRE(sqlite3_open(f.path, &c) == SQLITE_OK);
  bool wal = sqlite3_prepare_v2(c, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW &&
             strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
  sqlite3_finalize(st);
  sqlite3_close(c);
  CHECK(wal, "journal mode is not WAL");
  CHECK(sqlite_int(f.path, "PRAGMA application_id") == 0x6E727462);
  CHECK(sqlite_int(f.path, "SELECT value FROM meta WHERE key = 'schema_version'") == 3);
  fixture_free(&f);
}

/* What a version-2 file lacks: the candidates' knob use and the aliases table. */
#define NR_TEST_SCHEMA_2_SQL                                                             \
  "DROP TABLE aliases; ALTER TABLE candidates DROP COLUMN ignored;"                      \
  " ALTER TABLE candidates DROP COLUMN knob_use;"                                        \
  " UPDATE meta SET value = '2' WHERE key = 'schema_version'"

/* A version-2 file keeps its candidates through the upgrade (their knob use unknown)
 * and gains the aliases table: an alias round-trips, a route is aliased once. */
NR_TEST(tune_db_upgrades_version_2_and_keeps_candidates) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu", "ab", "", "h");
  REQUIRE(sid > 0);
  nr_db_candidate c = {.session_id = sid,
                       .route = "-a=1",
                       .status = "ok",
                       .ignored = "-b@n=2",
                       .knob_use = "0152"};
  REQUIRE(nr_db_candidate_put(db, &c, &err) == NR_OK, "%s", err.message);
  nr_db_candidate g;
  bool found = false;
  REQUIRE(nr_db_candidate_get(db, sid, "-a=1", &g, &found, &err) == NR_OK && found);
  CHECK(same_str(g.ignored, "-b@n=2") && same_str(g.knob_use, "0152"), "%s %s",
        g.ignored ? g.ignored : "NULL", g.knob_use ? g.knob_use : "NULL");
  nr_db_candidate_free(&g);
  nr_db_close(db);
  REQUIRE(sqlite_exec(f.path, NR_TEST_SCHEMA_2_SQL));
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "upgrade: %s", err.message);
  REQUIRE(nr_db_candidate_get(db, sid, "-a=1", &g, &found, &err) == NR_OK && found, "%s",
          err.message);
  CHECK(!g.ignored && same_str(g.knob_use, ""), "an old row's use is unknown");
  nr_db_candidate_free(&g);
  char *same = NULL;
  CHECK(nr_db_alias_put(db, sid, 1, "-a=1 -b@n=2", "-a=1", &err) == NR_OK, "%s",
        err.message);
  CHECK(nr_db_alias_put(db, sid, 2, "-a=1 -b@n=2", "-a=1", &err) != NR_OK,
        "a route is aliased once");
  CHECK(nr_db_alias_get(db, sid, "-a=1 -b@n=2", &same, &err) == NR_OK &&
            same_str(same, "-a=1"),
        "%s", err.message);
  free(same);
  CHECK(nr_db_alias_get(db, sid, "-a=2", &same, &err) == NR_OK && !same);
  nr_db_close(db);
  CHECK(sqlite_int(f.path, "SELECT value FROM meta WHERE key = 'schema_version'") == 3);
  fixture_free(&f);
}

/* A version-1 file (no calibrations table) is upgraded in place on open, and the
 * table then round-trips a calibration blob; an unknown digest is named. */
NR_TEST(tune_db_upgrades_version_1_and_keeps_calibrations) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_close(db);
  REQUIRE(sqlite_exec(f.path, NR_TEST_SCHEMA_2_SQL
                      "; DROP TABLE calibrations;"
                      " UPDATE meta SET value = '1' WHERE key = 'schema_version'"));
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "upgrade: %s", err.message);
  const uint8_t blob[5] = {1, 2, 0, 4, 5};
  CHECK(nr_db_calibration_put(db, "abc", blob, 5, &err) == NR_OK, "%s", err.message);
  CHECK(nr_db_calibration_put(db, "abc", blob, 5, &err) == NR_OK, "a second put: %s",
        err.message);
  uint8_t *got = NULL;
  size_t len = 0;
  CHECK(nr_db_calibration_get(db, "abc", &got, &len, &err) == NR_OK && len == 5 &&
        !memcmp(got, blob, 5), "%s", err.message);
  free(got);
  CHECK(nr_db_calibration_get(db, "missing", &got, &len, &err) == NR_ERR_INVALID_ARGUMENT &&
        strstr(err.message, "missing"), "%s", err.message);
  nr_db_close(db);
  CHECK(sqlite_int(f.path, "SELECT value FROM meta WHERE key = 'schema_version'") == 3);
  CHECK(sqlite_int(f.path, "SELECT count(*) FROM calibrations") == 1);
  CHECK(sqlite_int(f.path, "SELECT count(*) FROM aliases") == 0);
  fixture_free(&f);
}

/* ---- durability ---- */

enum {
  CRASH_PAIRS = 4,
  CRASH_OUTPUTS = 8,
  CRASH_LOSSES = CRASH_PAIRS * CRASH_OUTPUTS * NR_METRIC_COUNT
};

/* The content of candidate seq, a function of seq alone, so a reader can check every
 * value of every row; big enough that a row spans several pages. */
static void crash_fill(int seq, double *losses, double *times, int *n_times) {
  for (int k = 0; k < CRASH_LOSSES; k++)
    losses[k] = k == 0 ? INFINITY : k == 1 ? NAN : seq * 1e4 + k + 0.125;
  *n_times = seq % 17;
  for (int k = 0; k < *n_times; k++)
    times[k] = seq + k / 16.0;
}

/* The child: appends candidates from first_seq on and acknowledges each commit on
 * the pipe, until it is killed. It never returns into the test harness. */
static void crash_child(const char *path, int64_t sid, int first_seq, int ack_fd) {
  nr_db *db = NULL;
  if (nr_db_open(path, &db, NULL) != NR_OK)
    _exit(2);
  static double losses[CRASH_LOSSES], times[17];
  char route[32];
  for (int seq = first_seq; seq < first_seq + 100000; seq++) {
    nr_db_candidate c = {.session_id = sid, .seq = seq, .route = route, .status = "ok",
                         .n_pairs = CRASH_PAIRS, .n_outputs = CRASH_OUTPUTS,
                         .losses = losses, .times_ms = times, .median_ms = seq};
    snprintf(route, sizeof route, "r%d", seq);
    crash_fill(seq, losses, times, &c.n_times);
    if (nr_db_candidate_put(db, &c, NULL) != NR_OK)
      _exit(3);
    if (write(ack_fd, &seq, sizeof seq) != sizeof seq || getppid() == 1)
      _exit(4);
  }
  _exit(0);
}

/* Runs one child until it has acknowledged `acks` commits, then kills it. Returns the
 * highest acknowledged seq, or -1. */
static int crash_round(const char *path, int64_t sid, int first_seq, int acks, int *how) {
  int fds[2], seq = -1, got = 0;
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    crash_child(path, sid, first_seq, fds[1]);
  }
  close(fds[1]);
  while (pid > 0 && got < acks && read(fds[0], &seq, sizeof seq) == sizeof seq)
    got++;
  if (pid > 0)
    kill(pid, SIGKILL);
  int status = 0;
  if (pid > 0)
    waitpid(pid, &status, 0);
  close(fds[0]);
  *how = WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
  return got == acks ? seq : -1;
}

typedef struct crash_check {
  int n;
  int bad_seq; /* first seq whose row is wrong, or -1 */
} crash_check;

static int on_crash_candidate(const nr_db_candidate *c, void *user) {
  crash_check *k = user;
  static double losses[CRASH_LOSSES], times[17];
  int n_times;
  char route[32];
  crash_fill(k->n, losses, times, &n_times);
  snprintf(route, sizeof route, "r%d", k->n);
  bool ok = c->seq == k->n && strcmp(c->route, route) == 0 && c->n_pairs == CRASH_PAIRS &&
            c->n_outputs == CRASH_OUTPUTS && same_bits(c->losses, losses, CRASH_LOSSES) &&
            c->n_times == n_times && same_bits(c->times_ms, times, n_times) &&
            c->median_ms == k->n && strcmp(c->status, "ok") == 0;
  if (!ok && k->bad_seq < 0)
    k->bad_seq = k->n;
  k->n++;
  return 0;
}

NR_TEST(tune_db_survives_sigkill) {
  db_fixture f;
  REQUIRE(fixture_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = make_session(db, "cpu", "ab", "", "h");
  REQUIRE(sid > 0);
  nr_db_close(db); /* a connection must not cross fork */

  /* Three rounds, each resuming where the last one's file says it stopped. */
  int acked = -1;
  for (int round = 0; round < 3; round++) {
    int next = -1, how = 0;
    REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "round %d: %s", round, err.message);
    REQUIRE(nr_db_candidate_count(db, sid, NULL, &next, &err) == NR_OK);
    nr_db_close(db);
    CHECK(next > acked, "round %d: acknowledged seq %d lost (next %d)", round, acked, next);
    acked = crash_round(f.path, sid, next, 40, &how);
    CHECK(acked >= next + 39 && how == SIGKILL, "round %d: acked %d, child ended %d", round,
          acked, how);
  }
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  crash_check k = {0, -1};
  REQUIRE(nr_db_candidate_foreach(db, sid, on_crash_candidate, &k, &err) == NR_OK, "%s",
          err.message);
  int count = -1, next = -1;
  CHECK(nr_db_candidate_count(db, sid, &count, &next, &err) == NR_OK);
  CHECK(k.bad_seq < 0, "row of seq %d is wrong or out of order", k.bad_seq);
  CHECK(k.n > acked && count == k.n && next == k.n, "rows %d, acked up to %d, count %d",
        k.n, acked, count);
  nr_db_close(db);
  fixture_free(&f);
}
