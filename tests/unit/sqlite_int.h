/* sqlite_int.h - one integer from a tuning-database file, read through a direct
 * SQLite connection of the test's own (not nnroute's), so a test can look at what was
 * really written. */
#ifndef NR_TEST_SQLITE_INT_H
#define NR_TEST_SQLITE_INT_H

#include <sqlite3.h>
#include <stdint.h>

/* The first column of the first row of sql on the file at path; -1 on any failure. */
static inline int64_t nr_sqlite_int(const char *path, const char *sql) {
  sqlite3 *c = NULL;
  sqlite3_stmt *st = NULL;
  int64_t v = -1;
  if (sqlite3_open(path, &c) == SQLITE_OK &&
      sqlite3_prepare_v2(c, sql, -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(c);
  return v;
}

#endif
