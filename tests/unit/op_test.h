/* op_test.h - helpers the operator unit tests share: building values and attributes
 * that borrow the caller's storage, running one operator through the reference
 * executor, and comparing results. Everything is static inline so each test file
 * takes only what it uses. */
#ifndef NR_TESTS_OP_TEST_H
#define NR_TESTS_OP_TEST_H

#include "ir/op.h"
#include "kernels/ref/executor.h"
#include "rng.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A value viewing data (not owned). */
static inline nr_value make_value(nr_dtype t, int rank, const int64_t *dims,
                                  const void *data) {
  nr_value v = {.dtype = t, .rank = rank, .data = (void *)data};
  for (int d = 0; d < rank; d++)
    v.dims[d] = dims[d];
  return v;
}

static inline nr_value i64v(int64_t n, const int64_t *data) {
  return make_value(NR_DTYPE_INT64, 1, &n, data);
}

static inline nr_attr attr_i(const char *name, int64_t i) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INT, .i = i};
}
static inline nr_attr attr_f(const char *name, float f) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_FLOAT, .f = f};
}
static inline nr_attr attr_ints(const char *name, size_t n, const int64_t *v) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INTS, .n = n, .ints = (int64_t *)v};
}
static inline nr_attr attr_s(const char *name, const char *s) {
  return (nr_attr){
      .name = (char *)name, .type = NR_ATTR_STRING, .s = (char *)s, .s_len = strlen(s)};
}

/* Runs op (ai.onnx) with one output. */
static inline nr_status run_one(const char *op, int opset, int n_attrs, const nr_attr *attrs,
                            int n_in, const nr_value *const *ins, nr_value *out,
                            nr_error *err) {
  memset(out, 0, sizeof *out);
  return nr_ref_exec_node(op, "", opset, n_attrs, attrs, n_in, ins, 1, out, err);
}

static inline bool dims_are(const nr_value *v, int rank, const int64_t *dims) {
  if (v->rank != rank)
    return false;
  for (int d = 0; d < rank; d++)
    if (v->dims[d] != dims[d])
      return false;
  return true;
}

static inline bool f32_are(const nr_value *v, int64_t n, const float *want) {
  return v->dtype == NR_DTYPE_FLOAT && nr_value_count(v) == n &&
         (n == 0 || memcmp(v->data, want, sizeof(float) * (size_t)n) == 0);
}

static inline bool i64_are(const nr_value *v, int64_t n, const int64_t *want) {
  return v->dtype == NR_DTYPE_INT64 && nr_value_count(v) == n &&
         (n == 0 || memcmp(v->data, want, sizeof(int64_t) * (size_t)n) == 0);
}

/* n floats uniform in [-1, 1) from rng.h's generator started at *seed, which moves
 * on (the next call from the same variable draws new values); caller frees. */
static inline float *random_floats(int64_t n, unsigned *seed) {
  return nr_rng_floats_u32(n, seed, -1.0f, 1.0f);
}

/* n floats followed by `guard` sentinels, 64-byte aligned (free()): a kernel that
 * writes past n changes a sentinel, which guard_intact finds. */
static inline float *guarded_floats(int64_t n, int guard, float sentinel) {
  float *p = aligned_alloc(64, sizeof(float) * (size_t)((n + guard + 15) / 16 * 16));
  for (int64_t i = 0; p && i < n + guard; i++)
    p[i] = sentinel;
  return p;
}
static inline bool guard_intact(const float *p, int64_t n, int guard, float sentinel) {
  for (int64_t i = n; i < n + guard; i++)
    if (p[i] != sentinel)
      return false;
  return true;
}

#endif
