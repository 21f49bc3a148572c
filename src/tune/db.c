/* db.c - the tuning database (db.h) on SQLite.
 *
 * The schema is written once, in nr_db_schema below. The file says what it is in two
 * places that are checked before anything is written: PRAGMA application_id in the
 * SQLite header, and an application tag plus schema version in the meta table. A
 * file that is not SQLite, belongs to another program or has a newer schema is
 * refused with a message naming it.
 *
 * Durability is SQLite's, not ours: the journal is WAL with synchronous=FULL, and
 * every write below is ONE statement run in autocommit, i.e. one transaction (the
 * schema's creation is one explicit transaction). A process killed at any instant
 * (SIGKILL included) leaves each row whole or absent.
 *
 * Float arrays (losses, timings) are BLOBs of little-endian IEEE-754 doubles: exact
 * to the bit, and +inf and NaN survive (JSON could hold neither). Scalar REAL
 * columns hold NULL for NaN, since SQLite stores a bound NaN as NULL; reading maps
 * NULL back to NaN. Statements are prepared per call instead of cached, so the
 * callback of a foreach may call into the database again without clobbering a
 * statement in use; preparing costs microseconds, a candidate costs seconds. */
#include "tune/db.h"

#include "tune/accuracy.h"
#include "util/error.h"

#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NR_DB_APPLICATION "nnroute-tune"
#define NR_DB_APPLICATION_ID 1852994658 /* 0x6E727462, "nrtb": nnroute tuning base */
#define NR_DB_SCHEMA_VERSION 1
#define NR_DB_BUSY_TIMEOUT_MS 5000
/* No array may exceed SQLite's default blob limit (1e9 bytes). */
#define NR_DB_MAX_DOUBLES (1000000000 / 8)
#define NR_DB_STR_(x) #x
#define NR_DB_STR(x) NR_DB_STR_(x)

_Static_assert(NR_DB_APPLICATION_ID == 0x6E727462, "application id is 'nrtb'");

/* Schema version 1. Changing anything here means bumping NR_DB_SCHEMA_VERSION and
 * teaching nr_db_open to migrate the older files. The CHECKs tie each BLOB's length
 * to the counts that give its layout, so a row can never disagree with itself. */
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
    "CREATE INDEX measurements_by_candidate ON measurements (candidate_id);\n";

struct nr_db {
  sqlite3 *conn;
  char *path; /* for messages */
};

/* ---- errors ---- */

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

/* Records a failed SQLite call: the file, what we were doing, SQLite's words. Must be
 * called before the statement is finalized, while sqlite3_errmsg still holds them;
 * a code that did not come from SQLite (our own NOMEM) is described by errstr. */
static nr_status db_vfail(nr_db *db, int rc, nr_error *err, const char *fmt, va_list ap) {
  char what[512];
  vsnprintf(what, sizeof what, fmt, ap);
  bool own = (sqlite3_extended_errcode(db->conn) & 0xff) == (rc & 0xff);
  return nr_errorf(err, db_status(rc), "tuning database '%s': %s: %s", db->path, what,
                   own ? sqlite3_errmsg(db->conn) : sqlite3_errstr(rc));
}

static nr_status db_fail(nr_db *db, int rc, nr_error *err, const char *fmt, ...)
    NR_PRINTF(4, 5);
static nr_status db_fail(nr_db *db, int rc, nr_error *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nr_status s = db_vfail(db, rc, err, fmt, ap);
  va_end(ap);
  return s;
}

static nr_status db_invalid(nr_db *db, nr_error *err, const char *what) {
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "tuning database '%s': %s",
                   db ? db->path : "(none)", what);
}

/* ---- values in and out ---- */

static double db_now(void) {
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

/* A prepared statement and its parameters, bound left to right. The first failure
 * sticks in rc, so a caller binds everything and checks once, at the step. */
typedef struct nr_db_stmt {
  sqlite3_stmt *st;
  int n;
  int rc;
} nr_db_stmt;

static nr_status db_prepare(nr_db *db, const char *sql, nr_db_stmt *q, const char *what,
                            nr_error *err) {
  *q = (nr_db_stmt){NULL, 0, SQLITE_OK};
  int rc = sqlite3_prepare_v2(db->conn, sql, -1, &q->st, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(q->st);
    return db_fail(db, rc, err, "preparing to %s", what);
  }
  return NR_OK;
}

static int db_step(nr_db_stmt *q) {
  return q->rc == SQLITE_OK ? sqlite3_step(q->st) : q->rc;
}

static void bind_int(nr_db_stmt *q, int64_t v) {
  int i = ++q->n;
  if (q->rc == SQLITE_OK)
    q->rc = sqlite3_bind_int64(q->st, i, v);
}

static void bind_real(nr_db_stmt *q, double v) { /* SQLite stores NaN as NULL */
  int i = ++q->n;
  if (q->rc == SQLITE_OK)
    q->rc = sqlite3_bind_double(q->st, i, v);
}

/* Not copied: every caller steps and finalizes before its strings can go away. */
static void bind_text(nr_db_stmt *q, const char *s) {
  int i = ++q->n;
  if (q->rc == SQLITE_OK)
    q->rc = s ? sqlite3_bind_text(q->st, i, s, -1, SQLITE_STATIC)
              : sqlite3_bind_null(q->st, i);
}

/* An empty array is a zero-length BLOB, never NULL, so the length CHECKs hold. */
static void bind_doubles(nr_db_stmt *q, const double *x, size_t n) {
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

/* Steps a write to completion and finalizes it. With no_change, a write that touched
 * no row (an unknown id) is an invalid argument, and no_change says so. The message
 * is formatted only on failure. */
static nr_status db_write(nr_db *db, nr_db_stmt *q, const char *no_change, nr_error *err,
                          const char *fmt, ...) NR_PRINTF(5, 6);
static nr_status db_write(nr_db *db, nr_db_stmt *q, const char *no_change, nr_error *err,
                          const char *fmt, ...) {
  int rc = db_step(q);
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
  int rc = db_step(q);
  nr_status s = NR_OK;
  *found = rc == SQLITE_ROW;
  if (rc == SQLITE_ROW)
    *out = sqlite3_column_int64(q->st, 0);
  while (rc == SQLITE_ROW)
    rc = sqlite3_step(q->st);
  if (rc != SQLITE_DONE)
    s = db_fail(db, rc, err, "%s", what);
  sqlite3_finalize(q->st);
  return s;
}

/* Reads columns left to right. A failed allocation, or a row that contradicts its own
 * counts, is remembered and reported once by row_finish. */
typedef struct nr_db_row {
  sqlite3_stmt *st;
  int n;
  bool oom;
  const char *bad; /* why the row is unusable, or NULL */
} nr_db_row;

static int64_t row_int(nr_db_row *r) { return sqlite3_column_int64(r->st, r->n++); }

static double row_real(nr_db_row *r) {
  int i = r->n++;
  return sqlite3_column_type(r->st, i) == SQLITE_NULL ? NAN
                                                       : sqlite3_column_double(r->st, i);
}

static char *row_text(nr_db_row *r) {
  int i = r->n++;
  if (sqlite3_column_type(r->st, i) == SQLITE_NULL)
    return NULL;
  const char *s = (const char *)sqlite3_column_text(r->st, i);
  char *copy = s ? strdup(s) : NULL;
  if (!copy)
    r->oom = true;
  return copy;
}

/* a * b elements, or 0 with r->bad set when a count is absurd (a damaged file). The
 * cap keeps every count in an int. */
static size_t row_count(nr_db_row *r, int64_t a, int64_t b) {
  if (a < 0 || b < 0 || a > NR_DB_MAX_DOUBLES || b > NR_DB_MAX_DOUBLES ||
      (b && a > NR_DB_MAX_DOUBLES / b)) {
    r->bad = "a count is negative or too large";
    return 0;
  }
  return (size_t)(a * b);
}

static double *row_doubles(nr_db_row *r, size_t n) {
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

static nr_status row_finish(nr_db *db, const nr_db_row *r, const char *what, int64_t id,
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

static int db_query_int(nr_db *db, const char *sql, int64_t *out) {
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL);
  if (rc != SQLITE_OK)
    return rc;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *out = sqlite3_column_int64(st, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

/* What the file is: empty (ours to create), ours, or someone else's (refused). The
 * first read of the header is also where a file that is not SQLite shows. */
static nr_status db_identify(nr_db *db, nr_db_kind *kind, nr_error *err) {
  int64_t app_id = 0, n_objects = 0;
  int rc = db_query_int(db, "PRAGMA application_id", &app_id);
  if (rc == SQLITE_OK)
    rc = db_query_int(db, "SELECT count(*) FROM sqlite_schema", &n_objects);
  if ((rc & 0xff) == SQLITE_NOTADB)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "'%s' is not a tuning database: it is not an SQLite file", db->path);
  if (rc != SQLITE_OK)
    return db_fail(db, rc, err, "reading the header");
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
    return db_fail(db, rc, err, "locking the new file to create the schema");
  nr_db_kind kind;
  nr_status s = db_identify(db, &kind, err);
  if (s == NR_OK && kind == NR_DB_FRESH)
    rc = sqlite3_exec(db->conn, nr_db_schema, NULL, NULL, NULL);
  if (s == NR_OK && rc == SQLITE_OK)
    rc = sqlite3_exec(db->conn, "COMMIT", NULL, NULL, NULL);
  if (s == NR_OK && rc != SQLITE_OK)
    s = db_fail(db, rc, err, "creating the schema");
  if (s != NR_OK && !sqlite3_get_autocommit(db->conn))
    sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
  return s;
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
    return db_invalid(db, err, "not a tuning database (or a damaged one): no meta table");
  if (rc != SQLITE_OK)
    return db_fail(db, rc, err, "preparing to read the meta table");
  if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
    nr_status s = db_fail(db, rc, err, "reading the meta table");
    sqlite3_finalize(st);
    return s;
  }
  const char *app = (const char *)sqlite3_column_text(st, 0);
  bool ours = app && strcmp(app, NR_DB_APPLICATION) == 0;
  int64_t version = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  if (!ours)
    return db_invalid(db, err, "not a tuning database: the meta table lacks the "
                               "application tag '" NR_DB_APPLICATION "'");
  if (version > NR_DB_SCHEMA_VERSION)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "tuning database '%s' has schema version %lld, newer than the %d "
                     "this nnroute reads; use the nnroute that wrote it, or a newer one",
                     db->path, (long long)version, NR_DB_SCHEMA_VERSION);
  if (version < NR_DB_SCHEMA_VERSION)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "tuning database '%s' has an unknown schema version %lld", db->path,
                     (long long)version);
  return NR_OK;
}

/* The journal mode is remembered by the file; the rest is per connection. Some file
 * systems (network ones) refuse WAL; there the database is an error rather than a
 * silent loss of the durability db.h promises. */
static nr_status db_configure(nr_db *db, nr_error *err) {
  nr_db_stmt q;
  nr_status s = db_prepare(db, "PRAGMA journal_mode = WAL", &q, "set the journal", err);
  if (s != NR_OK)
    return s;
  int rc = sqlite3_step(q.st);
  const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(q.st, 0) : NULL;
  if (rc != SQLITE_ROW)
    s = db_fail(db, rc, err, "switching to the WAL journal");
  else if (!mode || strcmp(mode, "wal") != 0)
    s = nr_errorf(err, NR_ERR_IO,
                  "tuning database '%s': the file system refused the WAL journal (the "
                  "mode stays '%s'); put the database on a local disk",
                  db->path, mode ? mode : "?");
  sqlite3_finalize(q.st);
  if (s != NR_OK)
    return s;
  rc = sqlite3_exec(db->conn, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON", NULL,
                    NULL, NULL);
  return rc == SQLITE_OK ? NR_OK
                         : db_fail(db, rc, err, "setting synchronous and foreign keys");
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

nr_status nr_db_open(const char *path, nr_db **out, nr_error *err) {
  if (!path || !*path || !out) /* "" would be a private temporary database */
    return db_invalid(NULL, err, "opening: no path, or NULL out");
  *out = NULL;
  nr_db *db = calloc(1, sizeof *db);
  if (!db || !(db->path = strdup(path))) {
    free(db);
    return nr_errorf(err, NR_ERR_NOMEM, "tuning database '%s': out of memory", path);
  }
  nr_db_kind kind = NR_DB_OURS;
  nr_status s = db_connect(db, err);
  if (s == NR_OK)
    s = db_identify(db, &kind, err);
  if (s == NR_OK && kind == NR_DB_FRESH)
    s = db_create(db, err);
  if (s == NR_OK)
    s = db_check_meta(db, err);
  if (s == NR_OK)
    s = db_configure(db, err);
  if (s != NR_OK) {
    nr_db_close(db);
    return s;
  }
  *out = db;
  return NR_OK;
}

void nr_db_close(nr_db *db) {
  if (!db)
    return;
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
  nr_status s = db_prepare(db, sql, &q, what, err);
  if (s != NR_OK)
    return s;
  for (int i = 0; i < n_keys; i++)
    bind_text(&q, keys[i]);
  bind_real(&q, db_now());
  bool found;
  s = db_select_int(db, &q, id, &found, what, err);
  if (s == NR_OK && !found)
    s = nr_errorf(err, NR_ERR_INTERNAL, "tuning database '%s': %s: no id returned",
                  db->path, what);
  return s;
}

nr_status nr_db_env_id(nr_db *db, const nr_db_env *env, int64_t *id, nr_error *err) {
  if (!db || !env || !id || !env->fingerprint || !env->nnroute_version || !env->knob_schema)
    return db_invalid(db, err, "recording an environment: NULL argument or field");
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
    return db_invalid(db, err, "recording a model: NULL argument");
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
    return db_invalid(db, err, "beginning a session: NULL argument");
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "INSERT INTO sessions (env_id, model_id, settings,"
                           " settings_hash, argv, started_at, state)"
                           " VALUES (?, ?, ?, ?, ?, ?, 'running')",
                           &q, "begin a session", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, env_id);
  bind_int(&q, model_id);
  bind_text(&q, settings);
  bind_text(&q, settings_hash);
  bind_text(&q, argv);
  bind_real(&q, db_now());
  s = db_write(db, &q, NULL, err, "beginning a session of environment %lld, model %lld",
               (long long)env_id, (long long)model_id);
  if (s == NR_OK)
    *id = sqlite3_last_insert_rowid(db->conn);
  return s;
}

nr_status nr_db_session_find_resumable(nr_db *db, int64_t env_id, int64_t model_id,
                                       const char *settings_hash, int64_t *id,
                                       nr_error *err) {
  if (!db || !settings_hash || !id)
    return db_invalid(db, err, "finding a resumable session: NULL argument");
  *id = 0;
  /* Newest is the highest id: ids only grow (rows are never deleted), while the
   * clock may step back between two sessions. */
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "SELECT id FROM sessions WHERE model_id = ? AND env_id = ?"
                           " AND settings_hash = ? AND state <> 'done'"
                           " ORDER BY id DESC LIMIT 1",
                           &q, "find a resumable session", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, model_id);
  bind_int(&q, env_id);
  bind_text(&q, settings_hash);
  bool found;
  return db_select_int(db, &q, id, &found, "finding a resumable session", err);
}

nr_status nr_db_session_reopen(nr_db *db, int64_t id, nr_error *err) {
  if (!db)
    return db_invalid(db, err, "reopening a session: NULL database");
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "UPDATE sessions SET state = 'running', ended_at = 0"
                           " WHERE id = ?",
                           &q, "reopen a session", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, id);
  return db_write(db, &q, "no such session", err, "reopening session %lld", (long long)id);
}

nr_status nr_db_session_end(nr_db *db, int64_t id, const char *state,
                            const char *winner_route, const char *report,
                            nr_error *err) {
  if (!db || !state)
    return db_invalid(db, err, "ending a session: NULL argument");
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "UPDATE sessions SET state = ?1, winner_route = ?2, report = ?3,"
                           " ended_at = CASE WHEN ?1 = 'running' THEN 0 ELSE ?4 END"
                           " WHERE id = ?5",
                           &q, "end a session", err);
  if (s != NR_OK)
    return s;
  bind_text(&q, state);
  bind_text(&q, winner_route);
  bind_text(&q, report);
  bind_real(&q, db_now());
  bind_int(&q, id);
  return db_write(db, &q, "no such session", err, "ending session %lld as '%.40s'",
                  (long long)id, state);
}

static nr_status db_read_session(nr_db *db, sqlite3_stmt *st, nr_db_session *out,
                                 nr_error *err) {
  nr_db_row r = {st, 0, false, NULL};
  out->id = row_int(&r);
  out->env_id = row_int(&r);
  out->model_id = row_int(&r);
  out->settings = row_text(&r);
  out->settings_hash = row_text(&r);
  out->argv = row_text(&r);
  out->started_at = row_real(&r);
  out->ended_at = row_real(&r);
  out->state = row_text(&r);
  out->winner_route = row_text(&r);
  out->report = row_text(&r);
  nr_status s = row_finish(db, &r, "session", out->id, err);
  if (s != NR_OK)
    nr_db_session_free(out);
  return s;
}

nr_status nr_db_session_get(nr_db *db, int64_t id, nr_db_session *out, bool *found,
                            nr_error *err) {
  if (!db || !out || !found)
    return db_invalid(db, err, "loading a session: NULL argument");
  memset(out, 0, sizeof *out);
  *found = false;
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           id ? "SELECT " NR_DB_SESSION_COLS " FROM sessions WHERE id = ?"
                              : "SELECT " NR_DB_SESSION_COLS " FROM sessions"
                                " ORDER BY id DESC LIMIT 1",
                           &q, "load a session", err);
  if (s != NR_OK)
    return s;
  if (id)
    bind_int(&q, id);
  int rc = db_step(&q);
  if (rc == SQLITE_ROW && (s = db_read_session(db, q.st, out, err)) == NR_OK)
    *found = true;
  else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    s = db_fail(db, rc, err, "loading session %lld", (long long)id);
  sqlite3_finalize(q.st);
  return s;
}

/* ---- candidates ---- */

#define NR_DB_CANDIDATE_COLS                                                            \
  "id, session_id, seq, route, point, phase, status, signal, message, build_ms,"        \
  " engine_bytes, engine_path, n_metrics, n_pairs, n_outputs, losses, n_holdout_pairs," \
  " holdout_losses, n_times, times_ms, median_ms, ci_lo_ms, ci_hi_ms, created_at"

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
    return db_invalid(db, err, "recording a candidate: NULL argument, route or status");
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
  bind_int(q, c->session_id);
  bind_int(q, c->seq);
  bind_text(q, c->route);
  bind_text(q, c->point);
  bind_text(q, c->phase);
  bind_text(q, c->status);
  bind_int(q, c->signal);
  bind_text(q, c->message);
  bind_real(q, c->build_ms);
  bind_int(q, (int64_t)c->engine_bytes);
  bind_text(q, c->engine_path);
  bind_int(q, NR_METRIC_COUNT);
  bind_int(q, c->n_pairs);
  bind_int(q, c->n_outputs);
  bind_doubles(q, c->losses, n[0]);
  bind_int(q, c->n_holdout_pairs);
  bind_doubles(q, c->holdout_losses, n[1]);
  bind_int(q, c->n_times);
  bind_doubles(q, c->times_ms, n[2]);
  bind_real(q, c->median_ms);
  bind_real(q, c->ci_lo_ms);
  bind_real(q, c->ci_hi_ms);
  bind_real(q, now);
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
  return db_fail(db, rc, err, "recording candidate route '%s' of session %lld", c->route,
                 (long long)c->session_id);
}

nr_status nr_db_candidate_put(nr_db *db, nr_db_candidate *c, nr_error *err) {
  size_t n[3] = {0};
  nr_status s = db_check_candidate(db, c, n, err);
  nr_db_stmt q;
  if (s == NR_OK)
    s = db_prepare(db,
                   "INSERT INTO candidates (" NR_DB_CANDIDATE_COLS ") VALUES (NULL,"
                   " ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   &q, "record a candidate", err);
  if (s != NR_OK)
    return s;
  double now = db_now();
  bind_candidate(&q, c, n, now);
  int rc = db_step(&q);
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
  c->id = row_int(&r);
  c->session_id = row_int(&r);
  c->seq = (int)row_int(&r);
  c->route = row_text(&r);
  c->point = row_text(&r);
  c->phase = row_text(&r);
  c->status = row_text(&r);
  c->signal = (int)row_int(&r);
  c->message = row_text(&r);
  c->build_ms = row_real(&r);
  c->engine_bytes = (uint64_t)row_int(&r);
  c->engine_path = row_text(&r);
  if (row_int(&r) != NR_METRIC_COUNT)
    r.bad = "it was recorded with another number of accuracy metrics";
  int64_t n_pairs = row_int(&r), n_outputs = row_int(&r);
  size_t per_pair = row_count(&r, n_outputs, NR_METRIC_COUNT);
  c->losses = row_doubles(&r, row_count(&r, n_pairs, per_pair));
  int64_t n_holdout_pairs = row_int(&r);
  c->holdout_losses = row_doubles(&r, row_count(&r, n_holdout_pairs, per_pair));
  int64_t n_times = row_int(&r);
  c->times_ms = row_doubles(&r, row_count(&r, n_times, 1));
  c->n_pairs = (int)n_pairs; /* row_count capped them all below INT_MAX */
  c->n_outputs = (int)n_outputs;
  c->n_holdout_pairs = (int)n_holdout_pairs;
  c->n_times = (int)n_times;
  c->median_ms = row_real(&r);
  c->ci_lo_ms = row_real(&r);
  c->ci_hi_ms = row_real(&r);
  c->created_at = row_real(&r);
  nr_status s = row_finish(db, &r, "candidate", c->id, err);
  if (s != NR_OK)
    nr_db_candidate_free(c);
  return s;
}

nr_status nr_db_candidate_get(nr_db *db, int64_t session_id, const char *route,
                              nr_db_candidate *out, bool *found, nr_error *err) {
  if (!db || !route || !out || !found)
    return db_invalid(db, err, "looking a candidate up: NULL argument");
  memset(out, 0, sizeof *out);
  *found = false;
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "SELECT " NR_DB_CANDIDATE_COLS " FROM candidates"
                           " WHERE session_id = ? AND route = ?",
                           &q, "look a candidate up", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, session_id);
  bind_text(&q, route);
  int rc = db_step(&q);
  if (rc == SQLITE_ROW && (s = db_read_candidate(db, q.st, out, err)) == NR_OK)
    *found = true;
  else if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    s = db_fail(db, rc, err, "looking up route '%s' of session %lld", route,
                (long long)session_id);
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
    return db_invalid(db, err, "listing candidates: NULL argument");
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "SELECT " NR_DB_CANDIDATE_COLS " FROM candidates"
                           " WHERE session_id = ? AND (seq, id) > (?, ?)"
                           " ORDER BY seq, id LIMIT 1",
                           &q, "list candidates", err);
  for (int64_t last_seq = INT64_MIN, last_id = INT64_MIN; s == NR_OK;) {
    q.n = 0;
    bind_int(&q, session_id);
    bind_int(&q, last_seq);
    bind_int(&q, last_id);
    int rc = db_step(&q);
    nr_db_candidate c;
    if (rc == SQLITE_ROW)
      s = db_read_candidate(db, q.st, &c, err);
    else if (rc != SQLITE_DONE)
      s = db_fail(db, rc, err, "listing candidates of session %lld", (long long)session_id);
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
    return db_invalid(db, err, "counting candidates: NULL database");
  nr_db_stmt q;
  nr_status s = db_prepare(db,
                           "SELECT count(*), coalesce(max(seq) + 1, 0) FROM candidates"
                           " WHERE session_id = ?",
                           &q, "count candidates", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, session_id);
  int rc = db_step(&q);
  if (rc != SQLITE_ROW)
    s = db_fail(db, rc, err, "counting candidates of session %lld", (long long)session_id);
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
    return db_invalid(db, err, "setting an engine file: NULL database");
  nr_db_stmt q;
  nr_status s = db_prepare(db, "UPDATE candidates SET engine_path = ? WHERE id = ?", &q,
                           "set an engine file", err);
  if (s != NR_OK)
    return s;
  bind_text(&q, engine_path);
  bind_int(&q, id);
  return db_write(db, &q, "no such candidate", err,
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
                   : db_invalid(db, err, "setting holdout losses: NULL database");
  nr_db_stmt q;
  if (s == NR_OK)
    s = db_prepare(db,
                   "UPDATE candidates SET n_holdout_pairs = ?1, holdout_losses = ?2,"
                   " n_outputs = CASE WHEN n_pairs = 0 AND ?1 > 0 THEN ?3"
                   " ELSE n_outputs END"
                   " WHERE id = ?4 AND (?1 = 0 OR n_pairs = 0 OR n_outputs = ?3)",
                   &q, "set holdout losses", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, n_pairs);
  bind_doubles(&q, losses, n);
  bind_int(&q, n_outputs);
  bind_int(&q, id);
  return db_write(db, &q, "no such candidate, or its losses have another number of outputs",
                  err, "setting holdout losses (%d pairs x %d outputs) of candidate %lld",
                  n_pairs, n_outputs, (long long)id);
}

/* ---- measurements ---- */

nr_status nr_db_measurement_put(nr_db *db, const nr_db_measurement *m, nr_error *err) {
  size_t n = 0;
  nr_status s = db && m && m->stage
                    ? db_array_len(db, m->times_ms, m->n_times, 1, false,
                                   "measurement timings", &n, err)
                    : db_invalid(db, err, "recording a measurement: NULL argument");
  nr_db_stmt q;
  if (s == NR_OK)
    s = db_prepare(db,
                   "INSERT INTO measurements (candidate_id, stage, round, n_times,"
                   " times_ms, median_ms, ci_lo_ms, ci_hi_ms, created_at)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   &q, "record a measurement", err);
  if (s != NR_OK)
    return s;
  bind_int(&q, m->candidate_id);
  bind_text(&q, m->stage);
  bind_int(&q, m->round);
  bind_int(&q, m->n_times);
  bind_doubles(&q, m->times_ms, n);
  bind_real(&q, m->median_ms);
  bind_real(&q, m->ci_lo_ms);
  bind_real(&q, m->ci_hi_ms);
  bind_real(&q, db_now());
  return db_write(db, &q, NULL, err,
                  "recording measurement '%.40s' round %d of candidate %lld", m->stage,
                  m->round, (long long)m->candidate_id);
}

static nr_status db_read_measurement(nr_db *db, sqlite3_stmt *st, int64_t *id,
                                     nr_db_measurement *m, nr_error *err) {
  nr_db_row r = {st, 0, false, NULL};
  *id = row_int(&r);
  m->candidate_id = row_int(&r);
  m->stage = row_text(&r);
  m->round = (int)row_int(&r);
  int64_t n_times = row_int(&r);
  m->times_ms = row_doubles(&r, row_count(&r, n_times, 1));
  m->n_times = (int)n_times;
  m->median_ms = row_real(&r);
  m->ci_lo_ms = row_real(&r);
  m->ci_hi_ms = row_real(&r);
  return row_finish(db, &r, "measurement", *id, err);
}

nr_status nr_db_measurement_foreach(nr_db *db, int64_t candidate_id,
                                    int (*fn)(const nr_db_measurement *m, void *user),
                                    void *user, nr_error *err) {
  if (!db || !fn)
    return db_invalid(db, err, "listing measurements: NULL argument");
  nr_db_stmt q; /* one row per step, like nr_db_candidate_foreach */
  nr_status s = db_prepare(db,
                           "SELECT id, candidate_id, stage, round, n_times, times_ms,"
                           " median_ms, ci_lo_ms, ci_hi_ms FROM measurements"
                           " WHERE candidate_id = ? AND id > ? ORDER BY id LIMIT 1",
                           &q, "list measurements", err);
  for (int64_t last = INT64_MIN; s == NR_OK;) {
    q.n = 0;
    bind_int(&q, candidate_id);
    bind_int(&q, last);
    int rc = db_step(&q);
    nr_db_measurement m = {0};
    if (rc == SQLITE_ROW)
      s = db_read_measurement(db, q.st, &last, &m, err);
    else if (rc != SQLITE_DONE)
      s = db_fail(db, rc, err, "listing measurements of candidate %lld",
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
  nr_status s = db_prepare(db,
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
  bind_text(&q, model_sha256);
  bind_int(&q, exclude_env_id);
  int rc = db_step(&q);
  for (; rc == SQLITE_ROW; rc = sqlite3_step(q.st))
    if (!priors_push(l, (const char *)sqlite3_column_text(q.st, 0),
                     sqlite3_column_double(q.st, 1))) {
      s = nr_errorf(err, NR_ERR_NOMEM,
                    "tuning database '%s': reading priors: out of memory", db->path);
      break;
    }
  if (s == NR_OK && rc != SQLITE_DONE)
    s = db_fail(db, rc, err, "reading priors of model %.64s", model_sha256);
  sqlite3_finalize(q.st);
  return s;
}

/* The rows are read in full before fn sees any, so that fn runs with no statement
 * active (see nr_db_candidate_foreach); they are small (a route and a ratio). */
nr_status nr_db_priors(nr_db *db, const char *model_sha256, int64_t exclude_env_id,
                       int (*fn)(const char *route, double ratio, void *user),
                       void *user, nr_error *err) {
  if (!db || !model_sha256 || !fn)
    return db_invalid(db, err, "reading priors: NULL argument");
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
