/* test_tune_db_fork.c - the tuning database and processes: a handle used in a forked
 * child is refused with an error naming both processes, and closing it there leaves
 * the parent's connection working; several processes writing one file at once, each
 * through its own connection and from the very first open of a new file, lose no row
 * and leave a file that passes PRAGMA integrity_check.
 *
 * Each test works in its own mkdtemp directory under /tmp and removes it. Children
 * leave with _exit and report through their exit status (one bit per failed check),
 * printing the error they got on stderr. */
#include "tune/accuracy.h"
#include "tune/db.h"
#include "scratch_dir.h"
#include "sqlite_int.h"
#include "unit.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef nr_scratch_dir fork_fixture;

static bool ff_make(fork_fixture *f) { return nr_scratch_make(f, "nr_tune_dbf", "tune.db"); }
static void ff_free(fork_fixture *f) { nr_scratch_free(f); }

/* One integer (or -1) from a direct SQLite connection of its own. */
static int64_t ff_int(const char *path, const char *sql) {
  return nr_sqlite_int(path, sql);
}

/* The first column of the first row as text into buf, the same way: PRAGMA
 * integrity_check gives "ok" for a sound file. */
static const char *ff_text(const char *path, const char *sql, char *buf, size_t cap) {
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  snprintf(buf, cap, "(could not run '%s')", sql);
  if (sqlite3_open(path, &c) == SQLITE_OK &&
      sqlite3_prepare_v2(c, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    snprintf(buf, cap, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(c);
  return buf;
}

static int64_t ff_session(nr_db *db, const char *hash, nr_error *err) {
  nr_db_env env = {"cpu:fork-test", "0.1.0", "knobs-1"};
  int64_t env_id, model_id, id;
  if (nr_db_env_id(db, &env, &env_id, err) ||
      nr_db_model_id(db, "ab12", "x=1x3", &model_id, err) ||
      nr_db_session_begin(db, env_id, model_id, "{}", hash, "nnroute tune m.onnx", &id,
                          err))
    return 0;
  return id;
}

static nr_status ff_put(nr_db *db, int64_t sid, int seq, const char *route,
                        nr_error *err) {
  double losses[NR_METRIC_COUNT], times[3] = {seq + 0.25, seq + 0.5, seq + 0.75};
  for (int k = 0; k < NR_METRIC_COUNT; k++)
    losses[k] = seq * 100.0 + k;
  nr_db_candidate c = {.session_id = sid,
                       .seq = seq,
                       .route = (char *)route,
                       .status = "ok",
                       .n_pairs = 1,
                       .n_outputs = 1,
                       .losses = losses,
                       .times_ms = times,
                       .n_times = 3,
                       .median_ms = seq + 0.5};
  return nr_db_candidate_put(db, &c, err);
}

/* ---- a handle does not cross fork ---- */

static bool names_fork(const nr_error *err, pid_t parent) {
  char pid[32];
  snprintf(pid, sizeof pid, "process %ld", (long)parent);
  return strstr(err->message, "forked child") && strstr(err->message, pid);
}

/* The child: every kind of call on the parent's handle (a write, a read, a
 * get-or-insert) must fail with the fork error, and so must opening the same file
 * afresh, under its own name or another; another file opens. Then it closes the
 * parent's handle. */
static _Noreturn void misuse_child(nr_db *db, const fork_fixture *f, int64_t sid,
                                   pid_t parent) {
  nr_error err = {0};
  int bad = 0;
  if (ff_put(db, sid, 1, "from-the-child", &err) != NR_ERR_INVALID_ARGUMENT ||
      !names_fork(&err, parent))
    bad |= 1;
  if (bad & 1)
    fprintf(stderr, "child put: status %d, '%s'\n", (int)err.status, err.message);
  int count = -1;
  if (nr_db_candidate_count(db, sid, &count, NULL, &err) != NR_ERR_INVALID_ARGUMENT ||
      !names_fork(&err, parent))
    bad |= 2;
  nr_db_env env = {"cpu:child", "0.1.0", "knobs-1"};
  int64_t id = 0;
  if (nr_db_env_id(db, &env, &id, &err) != NR_ERR_INVALID_ARGUMENT)
    bad |= 4;
  char other_name[128], other_file[128], why[64];
  snprintf(other_name, sizeof other_name, "%s/./tune.db", f->dir);
  snprintf(other_file, sizeof other_file, "%s/other.db", f->dir);
  snprintf(why, sizeof why, "forked from process %ld", (long)parent);
  for (int k = 0; k < 2; k++) {
    nr_db *again = NULL;
    if (nr_db_open(k ? other_name : f->path, &again, &err) != NR_ERR_INVALID_ARGUMENT ||
        again || !strstr(err.message, why)) {
      bad |= 8;
      fprintf(stderr, "child open %d: '%s'\n", k, err.message);
    }
    nr_db_close(again);
  }
  nr_db *other = NULL;
  if (nr_db_open(other_file, &other, &err) != NR_OK ||
      ff_put(other, ff_session(other, "child", &err), 0, "r", &err) != NR_OK)
    bad |= 16;
  nr_db_close(other);
  nr_db_close(db); /* must leave the parent's connection alone */
  _exit(bad);
}

NR_TEST(tune_db_refuses_a_handle_in_a_forked_child) {
  fork_fixture f;
  REQUIRE(ff_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  int64_t sid = ff_session(db, "h", &err);
  REQUIRE(sid > 0, "%s", err.message);
  REQUIRE(ff_put(db, sid, 0, "before-fork", &err) == NR_OK, "%s", err.message);
  fflush(NULL);
  pid_t parent = getpid(), pid = fork();
  if (pid == 0)
    misuse_child(db, &f, sid, parent);
  int status = -1;
  REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "child status %#x: bit 1 its write, 2 its read, 4 its get-or-insert, 8 its "
        "open of the same file was not refused with the fork error; 16 another file "
        "did not open",
        status);
  /* The parent's connection still works, and nothing of the child's is in the file. */
  CHECK(ff_put(db, sid, 2, "after-fork", &err) == NR_OK, "%s", err.message);
  int count = -1;
  CHECK(nr_db_candidate_count(db, sid, &count, NULL, &err) == NR_OK && count == 2,
        "count %d: %s", count, err.message);
  nr_db_close(db);
  CHECK(ff_int(f.path,
               "SELECT count(*) FROM candidates WHERE route = 'from-the-child'") == 0,
        "the child's row is in the file");
  CHECK(ff_int(f.path, "SELECT count(*) FROM environments") == 1);
  char ic[256];
  CHECK(!strcmp(ff_text(f.path, "PRAGMA integrity_check", ic, sizeof ic), "ok"),
        "integrity_check: %s", ic);
  ff_free(&f);
}

/* ---- many writers ---- */

enum { WRITERS = 4, ROWS = 60 };

/* One writer: waits for the start (the pipe closing), opens its own connection, and
 * writes its session, ROWS candidates with a measurement each, and the session's
 * end. Every writer asks for the same environment and model. */
static _Noreturn void writer_child(const char *path, int w, int start_fd) {
  char c;
  while (read(start_fd, &c, 1) > 0) {
  }
  nr_db *db = NULL;
  nr_error err = {0};
  char hash[16], route[32];
  snprintf(hash, sizeof hash, "w%d", w);
  int64_t sid = 0;
  if (nr_db_open(path, &db, &err) != NR_OK || !(sid = ff_session(db, hash, &err))) {
    fprintf(stderr, "writer %d: open or session: %s\n", w, err.message);
    _exit(1);
  }
  for (int r = 0; r < ROWS; r++) {
    snprintf(route, sizeof route, "w%d-r%d", w, r);
    if (ff_put(db, sid, r, route, &err) != NR_OK) {
      fprintf(stderr, "writer %d row %d: %s\n", w, r, err.message);
      _exit(2);
    }
    nr_db_candidate got;
    bool found = false;
    double t[2] = {r, w};
    nr_db_measurement m = {.stage = "confirm", .round = r, .times_ms = t, .n_times = 2};
    if (nr_db_candidate_get(db, sid, route, &got, &found, &err) != NR_OK || !found) {
      fprintf(stderr, "writer %d row %d: read back: %s\n", w, r, err.message);
      _exit(3);
    }
    m.candidate_id = got.id;
    nr_db_candidate_free(&got);
    if (nr_db_measurement_put(db, &m, &err) != NR_OK) {
      fprintf(stderr, "writer %d row %d: measurement: %s\n", w, r, err.message);
      _exit(4);
    }
  }
  if (nr_db_session_end(db, sid, "done", "", "{}", &err) != NR_OK) {
    fprintf(stderr, "writer %d: end: %s\n", w, err.message);
    _exit(5);
  }
  nr_db_close(db);
  _exit(0);
}

typedef struct rows_seen {
  int n, bad_seq;
  const char *writer;
} rows_seen;

static int on_row(const nr_db_candidate *c, void *user) {
  rows_seen *k = user;
  char route[32];
  snprintf(route, sizeof route, "%s-r%d", k->writer, k->n);
  bool ok = c->seq == k->n && !strcmp(c->route, route) && c->n_times == 3 &&
            c->times_ms[1] == k->n + 0.5 && c->losses && c->losses[1] == k->n * 100.0 + 1;
  if (!ok && k->bad_seq < 0)
    k->bad_seq = k->n;
  k->n++;
  return 0;
}

NR_TEST(tune_db_many_writers_lose_nothing) {
  fork_fixture f;
  REQUIRE(ff_make(&f));
  int start[2];
  REQUIRE(pipe(start) == 0);
  fflush(NULL);
  pid_t pids[WRITERS];
  for (int w = 0; w < WRITERS; w++) {
    pids[w] = fork();
    if (pids[w] == 0) {
      close(start[1]);
      writer_child(f.path, w, start[0]);
    }
  }
  close(start[0]);
  close(start[1]); /* all start at once, on a file none of them has created yet */
  for (int w = 0; w < WRITERS; w++) {
    int status = -1;
    CHECK(pids[w] > 0 && waitpid(pids[w], &status, 0) == pids[w] && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "writer %d ended with status %#x (its message is above)", w, status);
  }
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  for (int w = 0; w < WRITERS; w++) {
    char hash[16];
    snprintf(hash, sizeof hash, "w%d", w);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT id FROM sessions WHERE settings_hash = '%s'", hash);
    int64_t sid = ff_int(f.path, sql);
    rows_seen k = {0, -1, hash};
    CHECK(sid > 0 && nr_db_candidate_foreach(db, sid, on_row, &k, &err) == NR_OK, "%s",
          err.message);
    CHECK(k.n == ROWS && k.bad_seq < 0, "writer %d: %d rows of %d, first wrong seq %d", w,
          k.n, ROWS, k.bad_seq);
  }
  nr_db_close(db);
  CHECK(ff_int(f.path, "SELECT count(*) FROM environments") == 1, "one environment");
  CHECK(ff_int(f.path, "SELECT count(*) FROM models") == 1, "one model");
  CHECK(ff_int(f.path, "SELECT count(*) FROM sessions WHERE state = 'done'") == WRITERS);
  CHECK(ff_int(f.path, "SELECT count(*) FROM candidates") == WRITERS * ROWS);
  CHECK(ff_int(f.path, "SELECT count(*) FROM measurements") == WRITERS * ROWS);
  CHECK(ff_int(f.path,
               "SELECT count(*) FROM measurements m JOIN candidates c ON"
               " c.id = m.candidate_id AND m.round = c.seq") == WRITERS * ROWS,
        "a measurement is attached to another writer's candidate");
  char ic[256];
  CHECK(!strcmp(ff_text(f.path, "PRAGMA integrity_check", ic, sizeof ic), "ok"),
        "integrity_check: %s", ic);
  ff_free(&f);
}

/* ---- the first opens of a new file ---- */

enum { OPEN_ROUNDS = 40, OPENERS = 4 };

/* One opener: waits for the start, opens, records the shared environment, closes. */
static _Noreturn void opener_child(const char *path, int start_fd) {
  char c;
  while (read(start_fd, &c, 1) > 0) {
  }
  nr_db *db = NULL;
  nr_error err = {0};
  nr_db_env env = {"cpu:fork-test", "0.1.0", "knobs-1"};
  int64_t id = 0;
  nr_status st = nr_db_open(path, &db, &err);
  if (!st)
    st = nr_db_env_id(db, &env, &id, &err);
  if (st)
    fprintf(stderr, "opener %ld: %s\n", (long)getpid(), err.message);
  nr_db_close(db);
  _exit(st ? 1 : 0);
}

/* Rounds of OPENERS processes opening one file that none of them has created yet, all
 * at once: each must get a working handle (two races of the first open were seen
 * here: the switch to WAL answered "database is locked", and the file's identity read
 * in two statements straddled another opener's creation of the schema). */
NR_TEST(tune_db_simultaneous_first_opens) {
  int failed_rounds = 0;
  for (int round = 0; round < OPEN_ROUNDS; round++) {
    fork_fixture f;
    REQUIRE(ff_make(&f));
    int start[2];
    REQUIRE(pipe(start) == 0);
    fflush(NULL);
    pid_t pids[OPENERS];
    for (int k = 0; k < OPENERS; k++) {
      pids[k] = fork();
      if (pids[k] == 0) {
        close(start[1]);
        opener_child(f.path, start[0]);
      }
    }
    close(start[0]);
    close(start[1]);
    bool ok = true;
    for (int k = 0; k < OPENERS; k++) {
      int status = -1;
      ok = pids[k] > 0 && waitpid(pids[k], &status, 0) == pids[k] && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0 && ok;
    }
    ok = ok && ff_int(f.path, "SELECT count(*) FROM environments") == 1;
    failed_rounds += !ok;
    ff_free(&f);
  }
  CHECK(failed_rounds == 0, "%d of %d rounds had an open fail (messages above)",
        failed_rounds, OPEN_ROUNDS);
}

/* A file that is ours but not yet WAL (as between another process's creation of the
 * schema and its switch to WAL) while another connection holds the write lock:
 * switching to WAL upgrades a read lock to a write lock, for which SQLite never
 * waits, so the open must wait for the writer itself. The child is forked before the
 * parent opens its connection (a connection open across fork would confuse the
 * child's SQLite about which locks its own process holds); the parent takes BEGIN
 * IMMEDIATE, lets the child open, and commits a little later. */
NR_TEST(tune_db_open_waits_for_a_writer_of_a_new_file) {
  fork_fixture f;
  REQUIRE(ff_make(&f));
  nr_db *db = NULL;
  nr_error err = {0};
  REQUIRE(nr_db_open(f.path, &db, &err) == NR_OK, "%s", err.message);
  nr_db_close(db);
  char mode[64];
  REQUIRE(!strcmp(ff_text(f.path, "PRAGMA journal_mode = DELETE", mode, sizeof mode),
                  "delete"),
          "%s", mode);
  int go[2];
  REQUIRE(pipe(go) == 0);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char r;
    close(go[1]);
    if (read(go[0], &r, 1) != 1)
      _exit(9);
    nr_db *mine = NULL;
    nr_error e = {0};
    nr_status st = nr_db_open(f.path, &mine, &e);
    if (st)
      fprintf(stderr, "child open: %s\n", e.message);
    nr_db_close(mine);
    _exit(st ? 1 : 0);
  }
  close(go[0]);
  sqlite3 *c = NULL;
  bool locked = sqlite3_open(f.path, &c) == SQLITE_OK &&
                sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK;
  CHECK(locked, "%s", sqlite3_errmsg(c));
  CHECK(pid > 0 && write(go[1], "g", 1) == 1);
  close(go[1]);
  usleep(200 * 1000); /* keeps the lock while the child opens; not a measurement */
  CHECK(!locked || sqlite3_exec(c, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(c);
  int status = -1;
  REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the open beside a writer failed (status %#x, its message is above)", status);
  char ic[256];
  CHECK(!strcmp(ff_text(f.path, "PRAGMA integrity_check", ic, sizeof ic), "ok"),
        "integrity_check: %s", ic);
  CHECK(!strcmp(ff_text(f.path, "PRAGMA journal_mode", mode, sizeof mode), "wal"), "%s",
        mode);
  CHECK(ff_int(f.path, "SELECT count(*) FROM meta") == 2);
  ff_free(&f);
}
