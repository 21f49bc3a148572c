/* unit.h - the one unit-test harness of nnroute (nr_unit over the tests/unit files, and
 * nr_gpu_test over the tests/gpu files, both run by tests/unit/main.c).
 *
 * Writing a test:
 *   NR_TEST(name) { ... }        defines and registers a test; its body sees
 *                                `nr_test_state *t`. Names are unique across files.
 *   CHECK(cond, fmt, ...)        records a failure (file:line, the condition, the
 *                                message) and goes on.
 *   REQUIRE(cond, fmt, ...)      the same, then leaves the test.
 *   SKIP(fmt, ...)               leaves the test counted as skipped, never as passed,
 *   SKIP_UNLESS(cond, fmt, ...)  with the reason printed. Only for what this machine or
 *                                this run legitimately lacks: an ISA (NNROUTE_ISA=avx2
 *                                forces the AVX2 paths on an AVX-512 host), a GPU,
 *                                optional data (exported models, NR_FUZZ_DIR). A test
 *                                that failed before SKIP stays failed.
 *   rng.h                        the seeded generator: nr_rng r = nr_rng_make(seed).
 *                                Every failure message ends with the last seed made
 *                                on the test's thread: "[last rng seed N]".
 * Shared pieces for the tests of one step or one graph: op_test.h (values, attributes,
 * one reference op), graph_build.h (small graphs, tg_*), conv_step.h (one Conv step
 * against the reference), cpuop.h (any one-node CPU step, cpuop_*).
 *
 * Running: `nr_unit [FILTER]` runs the tests whose name contains FILTER, in name order,
 * one at a time on the main thread. It prints `FAIL name (file:line): ...` on stderr
 * per failed check, `SKIP name: reason` per skipped test, and ends with the line
 * `N passed, N failed, N skipped`; the exit status is non-zero when any test failed
 * (ctest and scripts/test.sh read only the status; tests/gpu/run.sh reads the line). */
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
  bool skipped;  /* SKIP ran: the test did not run here, for skip_reason */
  char skip_reason[160];
} nr_test_state;

typedef void (*nr_test_fn)(nr_test_state *t);
void nr_test_register(const char *name, nr_test_fn fn);
/* Notes the seed of a generator made on the test's thread (rng.h's nr_rng_make);
 * failures of the test print the last one noted. Other threads' seeds are ignored. */
void nr_test_note_seed(uint64_t seed);
/* Marks the test skipped with a reason (printf format); SKIP also leaves it. */
void nr_test_skipf(nr_test_state *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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

/* SKIP leaves the test, counted as skipped, never as passed, with a reason: only for
 * what this machine or this run legitimately lacks (an ISA, a GPU, optional data). A
 * test that already failed stays failed. */
#define SKIP(...)                                                                      \
  do {                                                                                 \
    nr_test_skipf(t, __VA_ARGS__);                                                     \
    return;                                                                            \
  } while (0)
#define SKIP_UNLESS(cond, ...)                                                         \
  do {                                                                                 \
    if (!(cond))                                                                       \
      SKIP(__VA_ARGS__);                                                               \
  } while (0)

#endif
