/* rng.h - the one seeded random generator of the unit tests (tests/unit and tests/gpu):
 * Knuth's MMIX linear congruential step on 64 bits of state, and the few ways the
 * tests draw from it (32-bit words, integers in a range, floats in a range or on the
 * [-1, 1) grid of 2^-15, doubles in (0, 1), buffers of floats).
 *
 * Key decision: a generator is a value the test owns (nr_rng r = nr_rng_make(seed)),
 * so a case is reproduced from its seed alone, and threads never share one. Making a
 * generator on the test's own thread also notes its seed with the harness, which
 * prints the last seed made with every failure of that test ("[rng seed 42]"), so a
 * failing case can be rerun even where its message does not name the seed.
 * A weak generator is enough: the tests need reproducible, spread-out data, not
 * statistical quality; the high bits, which are the good ones of an LCG, are the
 * ones handed out. */
#ifndef NR_TESTS_UNIT_RNG_H
#define NR_TESTS_UNIT_RNG_H

#include "unit.h"

#include <stdint.h>
#include <stdlib.h>

typedef struct nr_rng {
  uint64_t s;
} nr_rng;

/* A generator starting from seed; the seed is noted for failure messages. */
static inline nr_rng nr_rng_make(uint64_t seed) {
  nr_test_note_seed(seed);
  return (nr_rng){seed};
}

/* The next 64-bit state (its low bits are weak: take high ones). */
static inline uint64_t nr_rng_next(nr_rng *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return r->s;
}

static inline uint32_t nr_rng_u32(nr_rng *r) {
  return (uint32_t)(nr_rng_next(r) >> 32);
}

/* Uniform integer in [lo, hi] (hi - lo below 2^32). */
static inline int64_t nr_rng_int(nr_rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(nr_rng_u32(r) % (uint64_t)(hi - lo + 1));
}

/* Uniform float in [lo, hi), on a grid of (hi - lo) / 2^24. */
static inline float nr_rng_uniform(nr_rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)(nr_rng_next(r) >> 40) / (float)(1u << 24);
}

/* Uniform in [-1, 1) on a grid of 2^-15 (small enough that fp16 subnormals occur,
 * coarse enough that float sums of a few thousand terms are exact). */
static inline float nr_rng_pm1(nr_rng *r) {
  return (float)((nr_rng_next(r) >> 40) & 0xffff) / 32768.0f - 1.0f;
}

/* Uniform double in (0, 1): never 0, so log() of it is finite. */
static inline double nr_rng_unit(nr_rng *r) {
  return ((double)(nr_rng_next(r) >> 11) + 0.5) * 0x1p-53;
}

/* n floats of nr_rng_uniform(r, lo, hi) into x. */
static inline void nr_rng_fill(nr_rng *r, float *x, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; i++)
    x[i] = nr_rng_uniform(r, lo, hi);
}

/* n floats in [lo, hi) in a new buffer of n + 1 (caller frees). */
static inline float *nr_rng_floats(nr_rng *r, int64_t n, float lo, float hi) {
  float *x = malloc(sizeof(float) * (size_t)(n + 1));
  if (x)
    nr_rng_fill(r, x, n, lo, hi);
  return x;
}

/* n floats of nr_rng_pm1 in a new buffer (at least one float; caller frees). */
static inline float *nr_rng_pm1_floats(nr_rng *r, int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; x && i < n; i++)
    x[i] = nr_rng_pm1(r);
  return x;
}

/* For helpers whose callers pass a 32-bit seed by pointer (op_test.h's
 * random_floats): n floats in [lo, hi) from a generator started at *seed, and *seed
 * moved on, so the next call from the same variable continues rather than repeats.
 * The seed is not noted: the caller's message names the seed it started from. */
static inline float *nr_rng_floats_u32(int64_t n, unsigned *seed, float lo, float hi) {
  nr_rng r = {*seed};
  float *x = nr_rng_floats(&r, n, lo, hi);
  *seed = nr_rng_u32(&r);
  return x;
}

#endif
