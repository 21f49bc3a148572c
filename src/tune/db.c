/* db.c - the tuning database (db.h) on SQLite: the schema, opening, environments,
 * models and sessions, and the statement helpers both files use (db_internal.h);
 * candidates, measurements and priors are in db_candidates.c.
 *
 * The schema is written once, in nr_db_schema below. The file says what it is in two
 * places that are checked before anything is written: PRAGMA application_id in the
 * SQLite header, and an application tag plus schema version in the meta table. A
 * file that is not SQLite, belongs to another program or has a newer schema is
 * refused with a message naming it.
 *
 * Durability is SQLite's, not ours: the journal is WAL with synchronous=FULL, and
 * every write (here and in db_candidates.c) is ONE statement run in autocommit, i.e.
 * one transaction (the schema's creation is one explicit transaction). A process
 * killed at any instant (SIGKILL included) leaves each row whole or absent.
 *
 * Float arrays (losses, timings) are BLOBs of little-endian IEEE-754 doubles: exact
 * to the bit, and +inf and NaN survive (JSON could hold neither). Scalar REAL
 * columns hold NULL for NaN, since SQLite stores a bound NaN as NULL; reading maps
 * NULL back to NaN. Statements are prepared per call instead of cached, so the
 * callback of a foreach may call into the database again without clobbering a
 * statement in use; preparing costs microseconds, a candidate costs seconds.
 *
 * A connection belongs to the process that opened it. SQLite's locks are POSIX
 * advisory locks, which a forked child does not inherit, while it does inherit the
 * connection's memory, its descriptors and the shared mapping of the -shm file: a
 * child that used the connection would read and write the WAL index believing it
 * holds locks it does not, which is how SQLite files get corrupted (sqlite.org,
 * "How To Corrupt An SQLite Database File", 2.6). So each handle records its
 * opener's pid; nr_db_prepare, through which every statement passes, refuses any
 * other process with an error, and nr_db_close in another process leaves the
 * handle alone, never touching the parent's connection. Opening the same file
 * afresh in the child is no way out either: SQLite's per-process record of which
 * locks this process holds on that file (and its -shm mapping) came across fork
 * with the parent's connection, and a new connection would trust it. So every
 * handle is also on a list (db_list), which a child inherits, and nr_db_open
 * refuses a file that a handle of an ancestor process has open. */
#include "tune/db_internal.h"

#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NR_DB_APPLICATION "nnroute-tune"
#define NR_DB_APPLICATION_ID 1852994658 /* 0x6E727462, "nrtb": nnroute tuning base */
#define NR_DB_SCHEMA_VERSION 3
#define NR_DB_BUSY_TIMEOUT_MS 5000
#define NR_DB_STR_(x) #x
#define NR_DB_STR(x) NR_DB_STR_(x)

_Static_assert(NR_DB_APPLICATION_ID == 0x6E727462, "application id is 'nrtb'");

/* Schema version 3 (version 1 lacked the calibrations table, version 2 the knob use
 * of candidates and the aliases table; db_migrate_v1 and db_migrate_v2 add them).
 * Changing anything here means bumping NR_DB_SCHEMA_VERSION and teaching nr_db_open
 * to migrate the older files. The CHECKs tie each BLOB's length
 * to the counts that give its layout, so a row can never disagree with itself. */
/* Calibration tables (src/plan/quant.h's byte form) by SHA-256; a session's
 * settings name the one its int8 candidates were built with. */
#define NR_DB_CALIBRATIONS_TABLE                                                         \
  "CREATE TABLE calibrations (\n"                                                       \
  "  sha256     TEXT PRIMARY KEY,\n"                                                    \
  "  bytes      BLOB NOT NULL,\n"                                                       \
  "  created_at REAL NOT NULL\n"                                                        \
  ") STRICT;\n"
/* Routes a session asked for that build another candidate's plan (the values where
 * they differ were ignored by the build): the route, the candidate's route, and the
 * order they were asked in. */
#define NR_DB_ALIASES_TABLE                                                              \
  "CREATE TABLE aliases (\n"                                                             \
  "  id         INTEGER PRIMARY KEY,\n"                                                  \
  "  session_id INTEGER NOT NULL REFERENCES sessions (id),\n"                            \
  "  seq        INTEGER NOT NULL,\n"                                                     \
  "  route      TEXT NOT NULL,\n"                                                        \
  "  same_as    TEXT NOT NULL,\n"                                                        \
  "  created_at REAL NOT NULL,\n"                                                        \
  "  UNIQUE (session_id, route)\n"                                                       \
  ") STRICT;\n"
/* Version 3's columns of candidates: the values the build ignored (route tokens, NULL
 * when unknown) and per knob instance how the build used it, one digit each
 * (NR_KNOB_USE_* bits; '' when unknown). */
#define NR_DB_CANDIDATE_V3_COLUMNS_DDL                                                   \
  "  ignored         TEXT,\n"                                                            \
  "  knob_use        TEXT NOT NULL DEFAULT '',\n"

static const char nr_db_schema[] =
    "PRAGMA application_id = " NR_DB_STR(NR_DB_APPLICATION_ID) ";\n"
    "CREATE TABLE meta (\n"
    "  key   TEXT PRIMARY KEY,\n"
    "  value TEXT NOT NULL\n"
    ") STRICT;\n"
    "INSERT INTO meta VALUES ('application', '" NR_DB_APPLICATION "'),\n"
    "                        ('schema_version', '" NR_DB_STR(NR_DB_SCHEMA_VERSION) "');\n"
    "CREATE TABLE environments (\n"
    "  id              INTEGER PRIMARY KEY,\n"
    "  fingerprint     TEXT NOT NULL,\n"
    "  nnroute_version TEXT NOT NULL,\n"
    "  knob_schema     TEXT NOT NULL,\n"
    "  created_at      REAL NOT NULL,\n"
    "  UNIQUE (fingerprint, nnroute_version, knob_schema)\n"
    ") STRICT;\n"
    "CREATE TABLE models (\n"
    "  id         INTEGER PRIMARY KEY,\n"
    "  sha256     TEXT NOT NULL,\n"
    "  shapes     TEXT NOT NULL,\n"
    "  created_at REAL NOT NULL,\n"
    "  UNIQUE (sha256, shapes)\n"
    ") STRICT;\n"
    "CREATE TABLE sessions (\n"
    "  id            INTEGER PRIMARY KEY,\n"
    "  env_id        INTEGER NOT NULL REFERENCES environments (id),\n"
    "  model_id      INTEGER NOT NULL REFERENCES models (id),\n"
    "  settings      TEXT NOT NULL,\n"
    "  settings_hash TEXT NOT NULL,\n"
    "  argv          TEXT,\n"
    "  started_at    REAL NOT NULL,\n"
    "  ended_at      REAL NOT NULL DEFAULT 0,\n"
    "  state         TEXT NOT NULL\n"
    "                CHECK (state IN ('running', 'interrupted', 'done', 'failed')),\n"
    "  winner_route  TEXT,\n"
    "  report        TEXT\n"
    ") STRICT;\n"
    "CREATE INDEX sessions_by_model ON sessions (model_id, env_id, settings_hash);\n"
    "CREATE TABLE candidates (\n"
    "  id              INTEGER PRIMARY KEY,\n"
    "  session_id      INTEGER NOT NULL REFERENCES sessions (id),\n"
    "  seq             INTEGER NOT NULL,\n"
    "  route           TEXT NOT NULL,\n"
    "  point           TEXT,\n"
    "  phase           TEXT,\n"
    "  status          TEXT NOT NULL,\n"
    "  signal          INTEGER NOT NULL DEFAULT 0,\n"
    "  message         TEXT,\n"
    "  build_ms        REAL,\n"
    "  engine_bytes    INTEGER NOT NULL DEFAULT 0,\n"
    "  engine_path     TEXT,\n"
    "  n_metrics       INTEGER NOT NULL CHECK (n_metrics > 0),\n"
    "  n_pairs         INTEGER NOT NULL CHECK (n_pairs >= 0),\n"
    "  n_outputs       INTEGER NOT NULL CHECK (n_outputs >= 0),\n"
    "  losses          BLOB NOT NULL,\n"
    "  n_holdout_pairs INTEGER NOT NULL DEFAULT 0 CHECK (n_holdout_pairs >= 0),\n"
    "  holdout_losses  BLOB NOT NULL DEFAULT x'',\n"
    "  n_times         INTEGER NOT NULL CHECK (n_times >= 0),\n"
    "  times_ms        BLOB NOT NULL,\n"
    "  median_ms       REAL,\n"
    "  ci_lo_ms        REAL,\n"
    "  ci_hi_ms        REAL,\n"
    "  created_at      REAL NOT NULL,\n"
    NR_DB_CANDIDATE_V3_COLUMNS_DDL
    "  UNIQUE (session_id, route),\n"
    "  CHECK (length(losses) = 8 * n_pairs * n_outputs * n_metrics),\n"
    "  CHECK (length(holdout_losses) = 8 * n_holdout_pairs * n_outputs * n_metrics),\n"
    "  CHECK (length(times_ms) = 8 * n_times)\n"
    ") STRICT;\n"
    "CREATE INDEX candidates_by_seq ON candidates (session_id, seq);\n"
    "CREATE TABLE measurements (\n"
    "  id           INTEGER PRIMARY KEY,\n"
    "  candidate_id INTEGER NOT NULL REFERENCES candidates (id),\n"
    "  stage        TEXT NOT NULL,\n"
    "  round        INTEGER NOT NULL,\n"
    "  n_times      INTEGER NOT NULL CHECK (n_times >= 0),\n"
    "  times_ms     BLOB NOT NULL,\n"
    "  median_ms    REAL,\n"
    "  ci_lo_ms     REAL,\n"
    "  ci_hi_ms     REAL,\n"
    "  created_at   REAL NOT NULL,\n"
    "  CHECK (length(times_ms) = 8 * n_times)\n"
    ") STRICT;\n"
    "CREATE INDEX measurements_by_candidate ON measurements (candidate_id);\n"
    NR_DB_CALIBRATIONS_TABLE NR_DB_ALIASES_TABLE;

/* ---- errors (db_internal.h) ---- */

static nr_status db_status(int rc) {
  switch (rc & 0xff) { /* the primary code; rc may be an extended one */
  case SQLITE_CONSTRAINT: case SQLITE_NOTADB: case SQLITE_TOOBIG: case SQLITE_MISMATCH:
    return NR_ERR_INVALID_ARGUMENT;
  case SQLITE_NOMEM: return NR_ERR_NOMEM;
  case SQLITE_ERROR: case SQLITE_MISUSE: case SQLITE_RANGE: case SQLITE_INTERNAL:
    return NR_ERR_INTERNAL; /* SQL that does not fit the schema: a bug */
  default: return NR_ERR_IO; /* busy, locked, full, ioerr, cantopen, corrupt, ... */
  }
}

/* sqlite3_errmsg describes the connection's last error, which may not be rc. */
static nr_status db_vfail(nr_db *db, int rc, nr_error *err, const char *fmt, va_list ap) {
  char what[512];
  vsnprintf(what, sizeof what, fmt, ap);
  bool own = (sqlite3_extended_errcode(db->conn) & 0xff) == (rc & 0xff);
  return nr_errorf(err, db_status(rc), "tuning database '%s': %s: %s", db->path, what,
                   own ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
}

nr_status nr_db_fail(nr_db *db, int rc, nr_error *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nr_status s = db_vfail(db, rc, err, fmt, ap);
  va_end(ap);
  return s;
}

nr_status nr_db_invalid(nr_db *db, nr_error *err, const char *what) {
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "tuning database '%s': %s",
                   db ? db->path : "(none)", what);
}

/* ---- values in and out (db_internal.h) ---- */

double nr_db_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Little-endian whatever the host, so a file moves between machines unchanged. */
static void pack_doubles(unsigned char *out, const double *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t bits;
    memcpy(&bits, &x[i], 8);
    for (int b = 0; b < 8; b++)
      out[8 * i + b] = (unsigned char)(bits >> (8 * b));
  }
}

static void unpack_doubles(double *x, const unsigned char *in, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint64_t bits = 0;
    for (int b = 0; b < 8; b++)
      bits |= (uint64_t)in[8 * i + b] << (8 * b);
    memcpy(&x[i], &bits, 8);
  }
}

/* The handle is used by the process that opened it (see the top of this file). */
static nr_status db_check_owner(const nr_db *db, const char *what, nr_error *err) {
  pid_t self = getpid();
  if (self == db->owner)
    return NR_OK;
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "tuning database '%s' (%s): the handle belongs to process %ld and "
                   "this is process %ld, a forked child; a connection must not cross "
                   "fork: close the database before forking and open it in the child",
                   db->path, what, (long)db->owner, (long)self);
}

nr_status nr_db_prepare(nr_db *db, const char *sql, nr_db_stmt *q, const char *what,
                        nr_error *err) {
  *q = (nr_db_stmt){NULL, 0, SQLITE_OK};
  nr_status s = db_check_owner(db, what, err);
  if (s != NR_OK)
    return s;
  int rc = sqlite3_prepare_v2(db->conn, sql, -1, &q->st, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(q->st);
    return nr_db_fail(db, rc, err, "preparing to %s", what);
  }
  return NR_OK;
}

int nr_db_step(nr_db_stmt *q) {
  return q->rc == SQLITE_OK ? sqlite3_step(q->st) : q->rc;
}

void nr_db_bind_int(nr_db_stmt *q, int64_t v) {
  int i = ++q->n;
  if (q->rc == SQLITE_OK)
    q->rc = sqlite3_bind_int64(q->st, i, v);
}

void nr_db_bind_real(nr_db_stmt *q, double v) { /* SQLite stores NaN as NULL */
  int i = ++q->n;
  if (q->rc == SQLITE_OK)
    q->rc = sqlite3_bind_double(q->st, i, v);
}

/* Not copied: every caller steps and finalizes before its strings can go away. */
void nr_db_bind_text(nr_db_stmt *q, const char *s) {
  int i = ++q->n;
  if (q->rc == SQLITE_OK)
    q->rc = s ? sqlite3_bind_text(q->st, i, s, -1, SQLITE_STATIC)
              : sqlite3_bind_null(q->st, i);
}

/* An empty array is a zero-length BLOB, never NULL, so the length CHECKs hold. */
void nr_db_bind_doubles(nr_db_stmt *q, const double *x, size_t n) {
  int i = ++q->n;
  if (q->rc != SQLITE_OK)
    return;
  if (n == 0) {
    q->rc = sqlite3_bind_zeroblob(q->st, i, 0);
    return;
  }
  unsigned char *bytes = malloc(n * 8);
  if (!bytes) {
    q->rc = SQLITE_NOMEM;
    return;
  }
  pack_doubles(bytes, x, n);
  q->rc = sqlite3_bind_blob64(q->st, i, bytes, n * 8, free); /* SQLite frees it */
}

nr_status nr_db_write(nr_db *db, nr_db_stmt *q, const char *no_change, nr_error *err,
                      const char *fmt, ...) {
  int rc = nr_db_step(q);
  nr_status s = NR_OK;
  va_list ap;
  va_start(ap, fmt);
  if (rc != SQLITE_DONE) {
    s = db_vfail(db, rc, err, fmt, ap);
  } else if (no_change && sqlite3_changes(db->conn) == 0) {
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    s = nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "tuning database '%s': %s: %s", db->path,
                  what, no_change);
  }
  va_end(ap);
  sqlite3_finalize(q->st);
  return s;
}

/* Runs a statement that yields at most one integer row; *found false when none. It
 * steps on to SQLITE_DONE: an INSERT ... RETURNING commits only then, and a failure
 * to commit (busy) shows there rather than being lost in the finalize. */
static nr_status db_select_int(nr_db *db, nr_db_stmt *q, int64_t *out, bool *found,
                               const char *what, nr_error *err) {
  int rc = nr_db_step(q);
  nr_status s = NR_OK;
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_int64(q->st, 0);
  while (rc == SQLITE_ROW)
    rc = sqlite3_step(q->st);
  if (rc != SQLITE_DONE)
    s = nr_db_fail(db, rc, err, "%s", what);
  sqlite3_finalize(q->st);
  return s;
}

int64_t nr_db_row_int(nr_db_row *r) { return sqlite3_column_int64(r->st, r->n++); }

double nr_db_row_real(nr_db_row *r) {
  int i = r->n++;
  return sqlite3_column_type(r->st, i) == SQLITE_NULL ? NAN
                                                       : sqlite3_column_double(r->st, i);
}

char *nr_db_row_text(nr_db_row *r) {
  int i = r->n++;
  if (sqlite3_column_type(r->st, i) == SQLITE_NULL)
    return NULL;
  const char *s = (const char *)sqlite3_column_text(r->st, i);
  char *copy = s ? strdup(s) : NULL;
  if (!copy)
    r->oom = true;
  return copy;
}

size_t nr_db_row_count(nr_db_row *r, int64_t a, int64_t b) {
  if (a < 0 || b < 0 || a > NR_DB_MAX_DOUBLES || b > NR_DB_MAX_DOUBLES ||
      (b && a > NR_DB_MAX_DOUBLES / b)) {
    r->bad = "a count is negative or too large";
    return 0;
  }
  return (size_t)(a * b);
}

double *nr_db_row_doubles(nr_db_row *r, size_t n) {
  int i = r->n++;
  const unsigned char *bytes = sqlite3_column_blob(r->st, i);
  size_t len = (size_t)sqlite3_column_bytes(r->st, i);
  if (!r->bad && len != n * 8)
    r->bad = "a float array's length disagrees with its counts";
  if (r->bad || n == 0)
    return NULL;
  double *x = malloc(n * sizeof *x);
  if (!x)
    r->oom = true;
  else
    unpack_doubles(x, bytes, n);
  return x;
}

nr_status nr_db_row_finish(nr_db *db, const nr_db_row *r, const char *what, int64_t id,
                           nr_error *err) {
  if (r->oom)
    return nr_errorf(err, NR_ERR_NOMEM,
                     "tuning database '%s': reading %s %lld: out of memory", db->path,
                     what, (long long)id);
  if (r->bad)
    return nr_errorf(err, NR_ERR_IO, "tuning database '%s': %s %lld is damaged: %s",
                     db->path, what, (long long)id, r->bad);
  return NR_OK;
}

/* ---- opening ---- */

typedef enum nr_db_kind { NR_DB_FRESH, NR_DB_OURS, NR_DB_FOREIGN } nr_db_kind;

/* The first n integer columns of the one row sql gives. */
static int db_query_ints(nr_db *db, const char *sql, int64_t *out, int n) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL);
  if (rc != SQLITE_OK)
    return rc;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    for (int i = 0; i < n; i++)
      out[i] = sqlite3_column_int64(st, i);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

/* What the file is: empty (ours to create), ours, or someone else's (refused). The
 * first read of the header is also where a file that is not SQLite shows. Both
 * values come from one statement, so from one snapshot: read by two, another
 * process's creation of the schema could commit in between, and a new tuning
 * database would look like a foreign one (application_id 0, our tables). */
static nr_status db_identify(nr_db *db, nr_db_kind *kind, nr_error *err) {
  int64_t v[2] = {0, 0};
  int rc = db_query_ints(db,
                         "SELECT (SELECT application_id FROM pragma_application_id),"
                         " (SELECT count(*) FROM sqlite_schema)",
                         v, 2);
  int64_t app_id = v[0], n_objects = v[1];
  if ((rc & 0xff) == SQLITE_NOTADB)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "'%s' is not a tuning database: it is not an SQLite file", db->path);
  if (rc != SQLITE_OK)
    return nr_db_fail(db, rc, err, "reading the header");
  *kind = app_id == NR_DB_APPLICATION_ID        ? NR_DB_OURS
          : app_id == 0 && n_objects == 0 ? NR_DB_FRESH
                                          : NR_DB_FOREIGN;
  if (*kind == NR_DB_FOREIGN)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "'%s' is not a tuning database: it is the SQLite database of another "
                     "application (application_id %lld, %lld schema objects)",
                     db->path, (long long)app_id, (long long)n_objects);
  return NR_OK;
}

/* Creates the schema under the write lock, after looking again: two processes may
 * open the same new file at once, and only the first may create it. */
static nr_status db_create(nr_db *db, nr_error *err) {
  int rc = sqlite3_exec(db->conn, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK)
    return nr_db_fail(db, rc, err, "locking the new file to create the schema");
  nr_db_kind kind;
  nr_status s = db_identify(db, &kind, err);
  if (s == NR_OK && kind == NR_DB_FRESH)
    rc = sqlite3_exec(db->conn, nr_db_schema, NULL, NULL, NULL);
  if (s == NR_OK && rc == SQLITE_OK)
    rc = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
  if (s == NR_OK && rc != SQLITE_OK)
    s = nr_db_fail(db, rc, err, "creating the schema");
  if (s != NR_OK && !sqlite3_get_autocommit(db->conn))
    sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  return s;
}

/* One upgrade step in one transaction, so a crash leaves the old schema or the new. */
static nr_status db_migrate(nr_db *db, const char *sql, int from, nr_error *err) {
  int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
    return nr_db_fail(db, rc, err, "upgrading the database from schema version %d", from);
  }
  return NR_OK;
}

/* Version 1 -> 2: the calibrations table. */
static nr_status db_migrate_v1(nr_db *db, nr_error *err) {
  return db_migrate(db,
                    "BEGIN IMMEDIATE;\n" NR_DB_CALIBRATIONS_TABLE
                    "UPDATE meta SET value = '2' WHERE key = 'schema_version';\n"
                    "COMMIT;",
                    1, err);
}

/* Version 2 -> 3: the candidates' knob use (unknown for the rows already there) and
 * the aliases table. */
static nr_status db_migrate_v2(nr_db *db, nr_error *err) {
  return db_migrate(
      db,
      "BEGIN IMMEDIATE;\n"
      "ALTER TABLE candidates ADD COLUMN ignored TEXT;\n"
      "ALTER TABLE candidates ADD COLUMN knob_use TEXT NOT NULL DEFAULT '';\n" NR_DB_ALIASES_TABLE
      "UPDATE meta SET value = '3' WHERE key = 'schema_version';\n"
      "COMMIT;",
      2, err);
}

/* The meta table of a file that carries our application_id. */
static nr_status db_check_meta(nr_db *db, nr_error *err) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db->conn,
                              "SELECT (SELECT value FROM meta WHERE key = 'application'),"
                              " (SELECT CAST(value AS INTEGER) FROM meta"
                              " WHERE key = 'schema_version')",
                              -1, &st, NULL);
  if (rc == SQLITE_ERROR) /* no meta table: our application_id, not our schema */
    return nr_db_invalid(db, err,
                         "not a tuning database (or a damaged one): no meta table");
  if (rc != SQLITE_OK)
    return nr_db_fail(db, rc, err, "preparing to read the meta table");
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
    nr_status s = nr_db_fail(db, rc, err, "reading the meta table");
    sqlite3_finalize(st);
    return s;
  }
  const char *app = (const char *)sqlite3_column_text(st, 0);
  bool ours = app && strcmp(app, NR_DB_APPLICATION) == 0;
  int64_t version = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  if (!ours)
    return nr_db_invalid(db, err, "not a tuning database: the meta table lacks the "
                               "application tag '" NR_DB_APPLICATION "'");
  if (version > NR_DB_SCHEMA_VERSION)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "tuning database '%s' has schema version %lld, newer than the %d "
                     "this nnroute reads; use the nnroute that wrote it, or a newer one",
                     db->path, (long long)version, NR_DB_SCHEMA_VERSION);
  nr_status s = version == 1 ? db_migrate_v1(db, err) : NR_OK;
  if (s == NR_OK && (version == 1 || version == 2))
    return db_migrate_v2(db, err);
  if (s == NR_OK && version < NR_DB_SCHEMA_VERSION)
    s = nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                  "tuning database '%s' has an unknown schema version %lld", db->path,
                  (long long)version);
  return s;
}

/* PRAGMA journal_mode = WAL, reporting the mode the file is left in. On a file that
 * is not WAL yet, the switch upgrades a read lock to a write lock, and SQLite never
 * waits for that (two readers waiting to write would deadlock): it answers BUSY at
 * once while another connection writes, e.g. a second process opening the same new
 * file during the first one's creation of the schema. So BUSY is retried here, for
 * as long as the busy timeout lets any other lock wait. Once the file is WAL, the
 * pragma takes no lock at all. */
static nr_status db_journal_wal(nr_db *db, char *mode, size_t cap, nr_error *err) {
  int waited = 0;
  for (int delay = 1;; delay = delay < 50 ? 2 * delay : 50) {
    nr_db_stmt q;
    nr_status s =
        nr_db_prepare(db, "PRAGMA journal_mode = WAL", &q, "set the journal", err);
    if (s != NR_OK)
      return s;
    int rc = sqlite3_step(q.st);
    if (rc == SQLITE_ROW) {
      const char *m = (const char *)sqlite3_column_text(q.st, 0);
      snprintf(mode, cap, "%s", m ? m : "?");
    } else if ((rc & 0xff) != SQLITE_BUSY || waited >= NR_DB_BUSY_TIMEOUT_MS) {
      s = nr_db_fail(db, rc, err, "switching to the WAL journal");
    }
    sqlite3_finalize(q.st);
    if (rc == SQLITE_ROW || s != NR_OK)
      return s;
    sqlite3_sleep(delay);
    waited += delay;
  }
}

/* The journal mode is remembered by the file; the rest is per connection. Some file
 * systems (network ones) refuse WAL; there the database is an error rather than a
 * silent loss of the durability db.h promises. */
static nr_status db_configure(nr_db *db, nr_error *err) {
  char mode[32];
  nr_status s = db_journal_wal(db, mode, sizeof mode, err);
  if (s != NR_OK)
    return s;
  if (strcmp(mode, "wal") != 0)
    return nr_errorf(err, NR_ERR_IO,
                     "tuning database '%s': the file system refused the WAL journal (the "
                     "mode stays '%s'); put the database on a local disk",
                     db->path, mode);
  int rc = sqlite3_exec(db->conn, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON",
                        NULL, NULL, NULL);
  return rc == SQLITE_OK
             ? NR_OK
             : nr_db_fail(db, rc, err, "setting synchronous and foreign keys");
}

static nr_status db_connect(nr_db *db, nr_error *err) {
  int rc = sqlite3_open_v2(db->path, &db->conn, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                           NULL);
  if (rc != SQLITE_OK)
    return nr_errorf(err, NR_ERR_IO, "tuning database '%s': cannot open: %s", db->path,
                     db->conn ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
  sqlite3_extended_result_codes(db->conn, 1);
  sqlite3_busy_timeout(db->conn, NR_DB_BUSY_TIMEOUT_MS);
  if (sqlite3_db_readonly(db->conn, "main") == 1)
    return nr_errorf(err, NR_ERR_IO, "tuning database '%s': the file is read-only",
                     db->path);
  return NR_OK;
}

/* Every open handle of this process, and those of its ancestors at the fork (their
 * copies, never used here). */
static pthread_mutex_t db_list_lock = PTHREAD_MUTEX_INITIALIZER;
static nr_db *db_list;

/* The process (an ancestor) whose open handle has this file, or 0. */
static pid_t db_inherited_owner(dev_t dev, ino_t ino) {
  pid_t self = getpid(), owner = 0;
  pthread_mutex_lock(&db_list_lock);
  for (const nr_db *h = db_list; h && !owner; h = h->next)
    if (h->owner != self && h->dev == dev && h->ino == ino)
      owner = h->owner;
  pthread_mutex_unlock(&db_list_lock);
  return owner;
}

static void db_list_add(nr_db *db) {
  pthread_mutex_lock(&db_list_lock);
  db->next = db_list;
  db_list = db;
  pthread_mutex_unlock(&db_list_lock);
}

static void db_list_remove(nr_db *db) {
  pthread_mutex_lock(&db_list_lock);
  for (nr_db **p = &db_list; *p; p = &(*p)->next)
    if (*p == db) {
      *p = db->next;
      break;
    }
  pthread_mutex_unlock(&db_list_lock);
}

/* Refuses a file that an ancestor's handle has open (see the top of this file). */
static nr_status db_check_not_inherited(const char *path, nr_error *err) {
  struct stat st;
  pid_t owner = stat(path, &st) == 0 ? db_inherited_owner(st.st_dev, st.st_ino) : 0;
  if (!owner)
    return NR_OK;
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "tuning database '%s': cannot open it in process %ld: it was forked "
                   "from process %ld while that one had the file open, and SQLite's "
                   "record of this process's locks on the file came along; close the "
                   "database before forking, or open it in a process that is not such a "
                   "fork",
                   path, (long)getpid(), (long)owner);
}

nr_status nr_db_open(const char *path, nr_db **out, nr_error *err) {
  if (!path || !*path || !out) /* "" would be a private temporary database */
    return nr_db_invalid(NULL, err, "opening: no path, or NULL out");
  *out = NULL;
  nr_status s = db_check_not_inherited(path, err);
  if (s != NR_OK)
    return s;
  nr_db *db = calloc(1, sizeof *db);
  if (!db || !(db->path = strdup(path))) {
    free(db);
    return nr_errorf(err, NR_ERR_NOMEM, "tuning database '%s': out of memory", path);
  }
  db->owner = getpid();
  nr_db_kind kind = NR_DB_OURS;
  s = db_connect(db, err);
  if (s == NR_OK)
    s = db_identify(db, &kind, err);
  if (s == NR_OK && kind == NR_DB_FRESH)
    s = db_create(db, err);
  if (s == NR_OK)
    s = db_check_meta(db, err);
  if (s == NR_OK)
    s = db_configure(db, err);
  struct stat st;
  if (s == NR_OK && stat(path, &st) != 0)
    s = nr_errorf(err, NR_ERR_IO, "tuning database '%s': cannot stat it once open: %s",
                  path, strerror(errno));
  if (s != NR_OK) {
    nr_db_close(db);
    return s;
  }
  db->dev = st.st_dev;
  db->ino = st.st_ino;
  db_list_add(db);
  *out = db;
  return NR_OK;
}

void nr_db_close(nr_db *db) {
  /* In a forked child the handle is the parent's: closing its connection could
   * checkpoint or remove the parent's WAL, and the handle stays on the list so the
   * file is still refused here. Its memory goes when the child exits. */
  if (!db || getpid() != db->owner)
    return;
  db_list_remove(db);
  sqlite3_close_v2(db->conn); /* every statement is finalized by now */
  free(db->path);
  free(db);
}

/* ---- environments and models ---- */

/* Get-or-insert in one statement. The upsert's no-op update (rather than DO NOTHING)
 * makes RETURNING give the id of an existing row too; it swallows only the UNIQUE
 * conflict, where INSERT OR IGNORE would swallow a NOT NULL failure as well. */
static nr_status db_get_or_insert(nr_db *db, const char *sql, const char *const *keys,
                                  int n_keys, int64_t *id, const char *what,
                                  nr_error *err) {
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db, sql, &q, what, err);
  if (s != NR_OK)
    return s;
  for (int i = 0; i < n_keys; i++)
    nr_db_bind_text(&q, keys[i]);
  nr_db_bind_real(&q, nr_db_now());
  bool found;
  s = db_select_int(db, &q, id, &found, what, err);
  if (s == NR_OK && !found)
    s = nr_errorf(err, NR_ERR_INTERNAL, "tuning database '%s': %s: no id returned",
                  db->path, what);
  return s;
}

nr_status nr_db_env_id(nr_db *db, const nr_db_env *env, int64_t *id, nr_error *err) {
  if (!db || !env || !id || !env->fingerprint || !env->nnroute_version || !env->knob_schema)
    return nr_db_invalid(db, err, "recording an environment: NULL argument or field");
  const char *keys[] = {env->fingerprint, env->nnroute_version, env->knob_schema};
  return db_get_or_insert(
      db,
      "INSERT INTO environments (fingerprint, nnroute_version, knob_schema, created_at)"
      " VALUES (?, ?, ?, ?) ON CONFLICT (fingerprint, nnroute_version, knob_schema)"
      " DO UPDATE SET fingerprint = excluded.fingerprint RETURNING id",
      keys, 3, id, "recording the environment", err);
}

nr_status nr_db_model_id(nr_db *db, const char *sha256, const char *shapes, int64_t *id,
                         nr_error *err) {
  if (!db || !sha256 || !shapes || !id)
    return nr_db_invalid(db, err, "recording a model: NULL argument");
  const char *keys[] = {sha256, shapes};
  return db_get_or_insert(
      db,
      "INSERT INTO models (sha256, shapes, created_at) VALUES (?, ?, ?)"
      " ON CONFLICT (sha256, shapes) DO UPDATE SET sha256 = excluded.sha256 RETURNING id",
      keys, 2, id, "recording the model", err);
}

/* ---- sessions ---- */

#define NR_DB_SESSION_COLS                                                              \
  "id, env_id, model_id, settings, settings_hash, argv, started_at, ended_at, state,"   \
  " winner_route, report"

void nr_db_session_free(nr_db_session *s) {
  if (!s)
    return;
  free(s->settings);
  free(s->settings_hash);
  free(s->argv);
  free(s->state);
  free(s->winner_route);
  free(s->report);
  s->settings = s->settings_hash = s->argv = s->state = s->winner_route = s->report = NULL;
}

nr_status nr_db_session_begin(nr_db *db, int64_t env_id, int64_t model_id,
                              const char *settings, const char *settings_hash,
                              const char *argv, int64_t *id, nr_error *err) {
  if (!db || !settings || !settings_hash || !id)
    return nr_db_invalid(db, err, "beginning a session: NULL argument");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "INSERT INTO sessions (env_id, model_id, settings,"
                              " settings_hash, argv, started_at, state)"
                              " VALUES (?, ?, ?, ?, ?, ?, 'running')",
                              &q, "begin a session", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, env_id);
  nr_db_bind_int(&q, model_id);
  nr_db_bind_text(&q, settings);
  nr_db_bind_text(&q, settings_hash);
  nr_db_bind_text(&q, argv);
  nr_db_bind_real(&q, nr_db_now());
  s = nr_db_write(db, &q, NULL, err,
                  "beginning a session of environment %lld, model %lld",
                  (long long)env_id, (long long)model_id);
  if (s == NR_OK)
    *id = sqlite3_last_insert_rowid(db->conn);
  return s;
}

nr_status nr_db_session_find_resumable(nr_db *db, int64_t env_id, int64_t model_id,
                                       const char *settings_hash, int64_t *id,
                                       nr_error *err) {
  if (!db || !settings_hash || !id)
    return nr_db_invalid(db, err, "finding a resumable session: NULL argument");
  *id = 0;
  /* Newest is the highest id: ids only grow (rows are never deleted), while the
   * clock may step back between two sessions. */
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "SELECT id FROM sessions WHERE model_id = ? AND env_id = ?"
                              " AND settings_hash = ? AND state <> 'done'"
                              " ORDER BY id DESC LIMIT 1",
                              &q, "find a resumable session", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, model_id);
  nr_db_bind_int(&q, env_id);
  nr_db_bind_text(&q, settings_hash);
  bool found;
  return db_select_int(db, &q, id, &found, "finding a resumable session", err);
}

nr_status nr_db_session_reopen(nr_db *db, int64_t id, nr_error *err) {
  if (!db)
    return nr_db_invalid(db, err, "reopening a session: NULL database");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "UPDATE sessions SET state = 'running', ended_at = 0"
                              " WHERE id = ?",
                              &q, "reopen a session", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_int(&q, id);
  return nr_db_write(db, &q, "no such session", err, "reopening session %lld",
                     (long long)id);
}

nr_status nr_db_session_end(nr_db *db, int64_t id, const char *state,
                            const char *winner_route, const char *report,
                            nr_error *err) {
  if (!db || !state)
    return nr_db_invalid(db, err, "ending a session: NULL argument");
  nr_db_stmt q;
  nr_status s =
      nr_db_prepare(db,
                    "UPDATE sessions SET state = ?1, winner_route = ?2, report = ?3,"
                    " ended_at = CASE WHEN ?1 = 'running' THEN 0 ELSE ?4 END"
                    " WHERE id = ?5",
                    &q, "end a session", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_text(&q, state);
  nr_db_bind_text(&q, winner_route);
  nr_db_bind_text(&q, report);
  nr_db_bind_real(&q, nr_db_now());
  nr_db_bind_int(&q, id);
  return nr_db_write(db, &q, "no such session", err, "ending session %lld as '%.40s'",
                     (long long)id, state);
}

static nr_status db_read_session(nr_db *db, sqlite3_stmt *st, nr_db_session *out,
                                 nr_error *err) {
  nr_db_row r = {st, 0, false, NULL};
  out->id = nr_db_row_int(&r);
  out->env_id = nr_db_row_int(&r);
  out->model_id = nr_db_row_int(&r);
  out->settings = nr_db_row_text(&r);
  out->settings_hash = nr_db_row_text(&r);
  out->argv = nr_db_row_text(&r);
  out->started_at = nr_db_row_real(&r);
  out->ended_at = nr_db_row_real(&r);
  out->state = nr_db_row_text(&r);
  out->winner_route = nr_db_row_text(&r);
  out->report = nr_db_row_text(&r);
  nr_status s = nr_db_row_finish(db, &r, "session", out->id, err);
  if (s != NR_OK)
    nr_db_session_free(out);
  return s;
}

nr_status nr_db_session_get(nr_db *db, int64_t id, nr_db_session *out, bool *found,
                            nr_error *err) {
  if (!db || !out || !found)
    return nr_db_invalid(db, err, "loading a session: NULL argument");
  memset(out, 0, sizeof *out);
  *found = false;
  nr_db_stmt q;
  nr_status s =
      nr_db_prepare(db,
                    id ? "SELECT " NR_DB_SESSION_COLS " FROM sessions WHERE id = ?"
                       : "SELECT " NR_DB_SESSION_COLS " FROM sessions"
                         " ORDER BY id DESC LIMIT 1",
                    &q, "load a session", err);
  if (s != NR_OK)
    return s;
  if (id)
    nr_db_bind_int(&q, id);
  int rc = nr_db_step(&q);
  if (rc == SQLITE_ROW && (s = db_read_session(db, q.st, out, err)) == NR_OK)
    *found = true;
  else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    s = nr_db_fail(db, rc, err, "loading session %lld", (long long)id);
  sqlite3_finalize(q.st);
  return s;
}

/* ---- calibration tables ---- */

nr_status nr_db_calibration_put(nr_db *db, const char *sha256, const void *bytes,
                                size_t len, nr_error *err) {
  if (!db || !sha256 || (!bytes && len))
    return nr_db_invalid(db, err, "recording a calibration table: NULL argument");
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db,
                              "INSERT INTO calibrations (sha256, bytes, created_at)"
                              " VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
                              &q, "record a calibration table", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_text(&q, sha256);
  int i = ++q.n;
  if (q.rc == SQLITE_OK)
    q.rc = sqlite3_bind_blob64(q.st, i, bytes ? bytes : "", len, SQLITE_STATIC);
  nr_db_bind_real(&q, nr_db_now());
  return nr_db_write(db, &q, NULL, err, "recording calibration table %.16s", sha256);
}

nr_status nr_db_calibration_get(nr_db *db, const char *sha256, uint8_t **bytes,
                                size_t *len, nr_error *err) {
  *bytes = NULL;
  *len = 0;
  nr_db_stmt q;
  nr_status s = nr_db_prepare(db, "SELECT bytes FROM calibrations WHERE sha256 = ?", &q,
                              "read a calibration table", err);
  if (s != NR_OK)
    return s;
  nr_db_bind_text(&q, sha256);
  int rc = nr_db_step(&q);
  if (rc == SQLITE_ROW) {
    size_t n = (size_t)sqlite3_column_bytes(q.st, 0);
    const void *p = sqlite3_column_blob(q.st, 0);
    if ((*bytes = malloc(n ? n : 1)))
      memcpy(*bytes, p, n);
    *len = n;
    s = *bytes ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  } else if (rc == SQLITE_DONE) {
    s = nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "tuning database '%s' has no calibration "
                  "table %.16s", db->path, sha256);
  } else {
    s = nr_db_fail(db, rc, err, "reading calibration table %.16s", sha256);
  }
  sqlite3_finalize(q.st);
  return s;
}
