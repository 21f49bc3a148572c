/* main.c - runs every registered unit test; `nr_unit [FILTER]` runs the tests whose
 * name contains FILTER. Exit status is non-zero when any test failed. */
#include "unit.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TESTS 4096

static struct {
  const char *name;
  nr_test_fn fn;
} tests[MAX_TESTS];
static int n_tests;
/* The test running on this thread: set by main's thread only, so a generator made
 * on a worker thread notes nothing. */
static _Thread_local nr_test_state *current;

void nr_test_register(const char *name, nr_test_fn fn) {
  if (n_tests < MAX_TESTS) {
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
  }
}

void nr_test_note_seed(uint64_t seed) {
  if (current) {
    current->seeded = true;
    current->seed = seed;
  }
}

void nr_test_failf(nr_test_state *t, const char *file, int line, const char *what,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL %s (%s:%d): %s", t->name, file, line, what);
  vfprintf(stderr, fmt, ap);
  if (t->seeded)
    fprintf(stderr, " [last rng seed %llu]", (unsigned long long)t->seed);
  fputc('\n', stderr);
  va_end(ap);
  t->failures++;
}

void nr_test_skipf(nr_test_state *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->skip_reason, sizeof t->skip_reason, fmt, ap);
  va_end(ap);
  t->skipped = true;
}

static int by_name(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  return strcmp(x, y);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  int passed = 0, failed = 0, skipped = 0;
  qsort(tests, n_tests, sizeof tests[0], by_name);
  for (int i = 0; i < n_tests; i++) {
    if (filter && !strstr(tests[i].name, filter))
      continue;
    nr_test_state t = {tests[i].name, 0};
    current = &t;
    tests[i].fn(&t);
    current = NULL;
    if (t.failures) {
      failed++;
    } else if (t.skipped) {
      skipped++;
      printf("SKIP %s: %s\n", t.name, t.skip_reason);
    } else {
      passed++;
    }
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
