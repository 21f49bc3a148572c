/* unit.h - the tiny unit-test harness: tests register themselves, main runs them
 * (optionally filtered by a substring), prints one line per failure with file:line
 * and the seed where one is used, and closes with "N passed, N failed". */
#ifndef NR_TESTS_UNIT_H
#define NR_TESTS_UNIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct nr_test_state {
  const char *name;
  int failures;
  bool seeded;   /* a generator was made: seed is the last one's */
  uint64_t seed;
} nr_test_state;

typedef void (*nr_test_fn)(nr_test_state *t);
void nr_test_register(const char *name, nr_test_fn fn);
/* Notes the seed of a generator made on the test's thread (rng.h's nr_rng_make);
 * failures of the test print the last one noted. Other threads' seeds are ignored. */
void nr_test_note_seed(uint64_t seed);
void nr_test_failf(nr_test_state *t, const char *file, int line, const char *what,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define NR_TEST(fn)                                                                    \
  static void fn(nr_test_state *t);                                                    \
  __attribute__((constructor)) static void fn##_register(void) {                       \
    nr_test_register(#fn, fn);                                                         \
  }                                                                                    \
  static void fn(nr_test_state *t)

/* CHECK records a failure and continues; REQUIRE also leaves the test. */
#define CHECK(cond, ...)                                                               \
  do {                                                                                 \
    if (!(cond))                                                                       \
      nr_test_failf(t, __FILE__, __LINE__, "CHECK(" #cond ")", " " __VA_ARGS__);           \
  } while (0)
#define REQUIRE(cond, ...)                                                             \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      nr_test_failf(t, __FILE__, __LINE__, "REQUIRE(" #cond ")", " " __VA_ARGS__);         \
      return;                                                                          \
    }                                                                                  \
  } while (0)

#endif
