/* db_internal.h - what the two files of the tuning database share, and nothing else
 * includes: db.c (schema, opening, environments, models, sessions, and the helpers
 * below) and db_candidates.c (candidates, measurements, priors). The API is db.h.
 *
 * The helpers give every statement the same shape: prepare it per call, bind its
 * parameters left to right and check once at the step, read its columns left to
 * right and report a damaged row once. They are not static, so they carry the
 * nr_db_ prefix: the library exports no generic name. Every message they write
 * names the database file. */
#ifndef NR_TUNE_DB_INTERNAL_H
#define NR_TUNE_DB_INTERNAL_H

#include "tune/db.h"
#include "util/error.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* No array may exceed SQLite's default blob limit (1e9 bytes). */
#define NR_DB_MAX_DOUBLES (1000000000 / 8)

struct nr_db {
  sqlite3 *conn;
  char *path;     /* for messages */
  pid_t owner;    /* the process that opened conn: the only one that may use it */
  dev_t dev;      /* the file, to know it again under another name */
  ino_t ino;
  nr_db *next;    /* every handle of the process, its parents' included (db.c) */
};

/* ---- errors ---- */

/* Records a failed SQLite call: the file, what we were doing (fmt), SQLite's words.
 * Must be called before the statement is finalized, while sqlite3_errmsg still holds
 * them; a code that did not come from SQLite (our own NOMEM) is described by
 * sqlite3_errstr. Returns the status rc maps to. */
nr_status nr_db_fail(nr_db *db, int rc, nr_error *err, const char *fmt, ...)
    NR_PRINTF(4, 5);
/* NR_ERR_INVALID_ARGUMENT with what; db may be NULL. */
nr_status nr_db_invalid(nr_db *db, nr_error *err, const char *what);

/* ---- values in ---- */

/* Wall-clock seconds since the epoch, the created_at of every row. */
double nr_db_now(void);

/* A prepared statement and its parameters, bound left to right. The first failure
 * sticks in rc, so a caller binds everything and checks once, at the step. To run
 * the statement again, sqlite3_reset it and set n back to 0. */
typedef struct nr_db_stmt {
  sqlite3_stmt *st;
  int n;
  int rc;
} nr_db_stmt;

/* Prepares sql into *q; what ("record a candidate") names it in the message. On
 * failure nothing is left to finalize; on success the caller finalizes q->st. Every
 * statement goes through here, so this is where a handle used by a process other
 * than the one that opened it (a forked child) is refused. */
nr_status nr_db_prepare(nr_db *db, const char *sql, nr_db_stmt *q, const char *what,
                        nr_error *err);
/* sqlite3_step, or the first binding failure without stepping. */
int nr_db_step(nr_db_stmt *q);
void nr_db_bind_int(nr_db_stmt *q, int64_t v);
void nr_db_bind_real(nr_db_stmt *q, double v); /* NaN is stored as NULL */
void nr_db_bind_text(nr_db_stmt *q, const char *s); /* NULL binds NULL; not copied */
/* n doubles as a little-endian BLOB; n 0 is an empty BLOB, never NULL. */
void nr_db_bind_doubles(nr_db_stmt *q, const double *x, size_t n);

/* Steps a write to completion and finalizes it. With no_change, a write that touched
 * no row (an unknown id) is an invalid argument, and no_change says so. The message
 * (fmt) is formatted only on failure. */
nr_status nr_db_write(nr_db *db, nr_db_stmt *q, const char *no_change, nr_error *err,
                      const char *fmt, ...) NR_PRINTF(5, 6);

/* ---- values out ---- */

/* Reads columns of the current row left to right: initialize as
 * {stmt, 0, false, NULL}. A failed allocation, or a row that contradicts its own
 * counts, is remembered and reported once by nr_db_row_finish. */
typedef struct nr_db_row {
  sqlite3_stmt *st;
  int n;
  bool oom;
  const char *bad; /* why the row is unusable, or NULL */
} nr_db_row;

int64_t nr_db_row_int(nr_db_row *r);
double nr_db_row_real(nr_db_row *r); /* NULL reads as NaN */
char *nr_db_row_text(nr_db_row *r);  /* malloc'ed copy; NULL for NULL */
/* a * b elements, or 0 with r->bad set when a count is absurd (a damaged file). The
 * cap keeps every count in an int. */
size_t nr_db_row_count(nr_db_row *r, int64_t a, int64_t b);
/* A BLOB of n doubles (malloc'ed; NULL when n is 0 or the row is bad). */
double *nr_db_row_doubles(nr_db_row *r, size_t n);
/* NR_OK, or the row's first problem: "reading <what> <id>: out of memory" (NOMEM) or
 * "<what> <id> is damaged: ..." (IO). */
nr_status nr_db_row_finish(nr_db *db, const nr_db_row *r, const char *what, int64_t id,
                           nr_error *err);

#endif
