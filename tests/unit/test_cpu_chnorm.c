/* test_cpu_chnorm.c - the per-channel normalization tactics (nr_f32_batchnorm,
 * nr_f32_instancenorm, nr_f32_groupnorm, AVX2 and portable) against the reference
 * kernels over a table of cases: ranks 2 to 5, plane sizes around the vector width,
 * several epsilons, batch sizes above one, group counts with one and several channels
 * per group, scale per group (opset 18) and per channel (opset 21), both values of
 * reduce.reassoc; plus the nodes they leave to the reference (training mode, groups
 * that do not divide C). Uses the one-step plan harness of cpuop.h and seeded data
 * (rng.h). */
#include "cpuop.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ISAS[] = {"__avx2", "__portable"};

/* Runs nr_f32_<stem><isa> on the node for both ISAs and compares output 0 with the
 * reference; expect: whether the tactic must take the node. */
static void check(nr_test_state *t, const char *op, const char *stem, int opset,
                  int n_attrs, const nr_attr *attrs, int n_in, const nr_value *const *ins,
                  const bool *consts, const nr_value *out, const char *route, double tol,
                  bool expect, nr_threadpool *pool, const char *what) {
  for (int k = 0; k < 2; k++) {
    char id[64];
    snprintf(id, sizeof id, "nr_f32_%s%s", stem, ISAS[k]);
    if (k == 0 && !(nr_cpu_isa() & NR_ISA_AVX2))
      continue;
    cpuop *o = cpuop_new();
    REQUIRE(!cpuop_init(o, op, opset, n_attrs, attrs, n_in, ins, consts, 1, out, route),
            "%s", what);
    bool sup = cpuop_supports(o, id);
    CHECK(sup == expect, "%s: %s supports %d, want %d", what, id, sup, expect);
    if (sup) {
      bool g;
      nr_value ref;
      CHECK(!cpuop_run(o, pool, &g) && g, "%s: %s run or guards", what, id);
      REQUIRE(!cpuop_ref(o, n_attrs, attrs, &ref), "%s: reference", what);
      double e = cpuop_err(cpuop_out(o, 0), ref.data, nr_value_count(&ref), tol, tol);
      CHECK(e <= 1.0, "%s: %s route '%s' %.3g of tolerance", what, id, route, e);
      nr_value_free(&ref);
    }
    cpuop_free(o);
    free(o);
  }
}

static int64_t count(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  return n;
}

typedef struct shape_case {
  int rank;
  int64_t dims[5];
} shape_case;

static const shape_case SHAPES[] = {
    {2, {3, 17}},        {3, {1, 5, 1}},       {3, {2, 6, 7}},
    {3, {1, 16, 33}},    {4, {1, 8, 8, 8}},    {4, {2, 12, 5, 9}},
    {4, {1, 4, 31, 31}}, {5, {2, 6, 3, 4, 5}}, {4, {1, 64, 64, 64}},
};
static const float EPS[] = {1e-5f, 1e-3f, 0.1f};

NR_TEST(cpu_chnorm_batchnorm) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
    nr_rng r = nr_rng_make(700 + s);
    const shape_case *sc = &SHAPES[s];
    int64_t c = sc->dims[1], n = count(sc->rank, sc->dims);
    float *x = nr_rng_floats(&r, n, -4, 6), *p[4];
    p[0] = nr_rng_floats(&r, c, 0.5f, 2);
    p[1] = nr_rng_floats(&r, c, -1, 1);
    p[2] = nr_rng_floats(&r, c, -2, 2);
    p[3] = nr_rng_floats(&r, c, 0, 3);
    p[3][0] = 0; /* a zero variance: eps alone */
    nr_value xi = cpuop_fval(sc->rank, sc->dims, x),
             y = cpuop_fval(sc->rank, sc->dims, NULL);
    nr_value pv[4];
    for (int i = 0; i < 4; i++)
      pv[i] = cpuop_fval(1, &c, p[i]);
    const nr_value *ins[] = {&xi, &pv[0], &pv[1], &pv[2], &pv[3]};
    bool consts[5] = {false, true, true, true, true}, vars[5] = {false};
    for (int e = 0; e < 3; e++) {
      char what[96];
      snprintf(what, sizeof what, "BatchNormalization shape %zu eps %g", s, EPS[e]);
      nr_attr at[] = {{.name = "epsilon", .type = NR_ATTR_FLOAT, .f = EPS[e]}};
      check(t, "BatchNormalization", "batchnorm", 15, 1, at, 5, ins, consts, &y, "", 2e-5,
            true, pool, what);
      check(t, "BatchNormalization", "batchnorm", 9, 1, at, 5, ins, vars, &y, "", 2e-5,
            true, pool, what);
    }
    nr_attr train[] = {{.name = "training_mode", .type = NR_ATTR_INT, .i = 1}};
    check(t, "BatchNormalization", "batchnorm", 15, 1, train, 5, ins, consts, &y, "",
          2e-5, false, pool, "BatchNormalization training_mode=1");
    free(x);
    for (int i = 0; i < 4; i++)
      free(p[i]);
  }
  nr_threadpool_destroy(pool);
}

static const char *const ROUTES[] = {"", "-reduce.reassoc=on"};

/* op over shape sc with `groups` groups (InstanceNormalization: groups = C). */
static void gn_case(nr_test_state *t, nr_threadpool *pool, const char *op, int opset,
                    const shape_case *sc, int64_t groups, float eps, uint64_t seed,
                    bool expect) {
  nr_rng r = nr_rng_make(seed);
  int64_t c = sc->dims[1], n = count(sc->rank, sc->dims);
  int64_t pc = !strcmp(op, "GroupNormalization") && opset < 21 ? groups : c;
  float *x = nr_rng_floats(&r, n, -3, 7), *scale = nr_rng_floats(&r, pc, 0.5f, 2),
        *bias = nr_rng_floats(&r, pc, -1, 1);
  for (int64_t i = 0; i < n && i < 40; i++)
    x[i] = 2.5f; /* a nearly constant first plane */
  nr_value xi = cpuop_fval(sc->rank, sc->dims, x),
           y = cpuop_fval(sc->rank, sc->dims, NULL);
  nr_value si = cpuop_fval(1, &pc, scale), bi = cpuop_fval(1, &pc, bias);
  const nr_value *ins[] = {&xi, &si, &bi};
  bool consts[3] = {false, true, true};
  nr_attr at[] = {{.name = "epsilon", .type = NR_ATTR_FLOAT, .f = eps},
                  {.name = "num_groups", .type = NR_ATTR_INT, .i = groups}};
  int n_at = strcmp(op, "GroupNormalization") ? 1 : 2;
  const char *stem = n_at == 1 ? "instancenorm" : "groupnorm";
  for (int k = 0; k < 2; k++) {
    char what[128];
    snprintf(what, sizeof what, "%s-%d rank %d C %lld groups %lld eps %g seed %llu", op,
             opset, sc->rank, (long long)c, (long long)groups, eps,
             (unsigned long long)seed);
    check(t, op, stem, opset, n_at, at, 3, ins, consts, &y, ROUTES[k], k ? 2e-5 : 1e-5,
          expect, pool, what);
  }
  free(x);
  free(scale);
  free(bias);
}

NR_TEST(cpu_chnorm_instancenorm) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
    for (int e = 0; e < 3; e++)
      gn_case(t, pool, "InstanceNormalization", 6, &SHAPES[s], SHAPES[s].dims[1], EPS[e],
              800 + s * 3 + e, true);
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_chnorm_groupnorm) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const shape_case G[] = {{3, {2, 12, 7}},
                                 {4, {1, 32, 9, 9}},
                                 {4, {2, 6, 5, 3}},
                                 {5, {1, 8, 3, 3, 3}},
                                 {4, {1, 64, 32, 32}}};
  for (size_t s = 0; s < sizeof G / sizeof G[0]; s++)
    for (int g = 0; g < 4; g++)
      for (int opset = 18; opset <= 21; opset += 3) {
        int64_t c = G[s].dims[1], groups[4] = {1, 2, c / 2, c}; /* C is even */
        gn_case(t, pool, "GroupNormalization", opset, &G[s], groups[g], EPS[g % 3],
                900 + s * 8 + g * 2 + (opset > 18), true);
      }
  shape_case odd = {4, {1, 10, 3, 3}};
  gn_case(t, pool, "GroupNormalization", 18, &odd, 4, 1e-5f, 990, false);
  nr_threadpool_destroy(pool);
}
