/* test_cpu_index.c - nr_copy_pad, nr_copy_gather and nr_copy_expand against the
 * reference kernels, byte for byte, over tables of cases: Pad in every mode on ranks
 * 1 to 5 with positive, zero and negative pads, pads wider than the axis (reflect
 * folds back more than once), a constant_value, an axes input (opset 18) and the
 * opset-2 attributes; Gather on axes 0, 1 and -1 with int64 and int32 indices,
 * negative ones, scalar and 2-D index tensors, float32 and int64 data, and an index
 * out of range (the step fails); Expand with broadcasts on every kind of dim. Uses the
 * one-step plan harness of cpuop.h with seeded data (rng.h). */
#include "cpuop.h"
#include "op_test.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t count(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  return n;
}

/* Seeded data of dtype dt (float32, int64 or int32). */
static void *data_of(nr_dtype dt, int64_t n, uint64_t seed) {
  nr_rng r = nr_rng_make(seed);
  size_t es = nr_dtype_size(dt);
  char *p = malloc(es * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) {
    if (dt == NR_DTYPE_FLOAT)
      ((float *)p)[i] = nr_rng_uniform(&r, -8, 8);
    else if (dt == NR_DTYPE_INT64)
      ((int64_t *)p)[i] = nr_rng_int(&r, -1000000, 1000000);
    else
      ((int32_t *)p)[i] = (int32_t)nr_rng_int(&r, -1000, 1000);
  }
  return p;
}

/* Runs tactic id on the node and compares output 0 with the reference byte for byte;
 * expect: whether id must take the node. */
static void check(nr_test_state *t, const char *id, const char *op, int opset,
                  int n_attrs, const nr_attr *attrs, int n_in, const nr_value *const *ins,
                  const bool *consts, const nr_value *out, bool expect,
                  nr_threadpool *pool, const char *what) {
  cpuop *o = cpuop_new();
  REQUIRE(!cpuop_init(o, op, opset, n_attrs, attrs, n_in, ins, consts, 1, out, ""), "%s",
          what);
  bool sup = cpuop_supports(o, id);
  CHECK(sup == expect, "%s: %s supports %d, want %d", what, id, sup, expect);
  if (sup) {
    bool g;
    nr_value ref;
    CHECK(!cpuop_run(o, pool, &g) && g, "%s: run or guards", what);
    REQUIRE(!cpuop_ref(o, n_attrs, attrs, &ref), "%s: reference", what);
    CHECK(!memcmp(cpuop_out(o, 0), ref.data, nr_value_nbytes(&ref)),
          "%s: output differs from the reference", what);
    nr_value_free(&ref);
  }
  cpuop_free(o);
  free(o);
}

typedef struct pad_case {
  int rank;
  int64_t dims[5];
  int64_t pads[10]; /* begins, then ends */
} pad_case;

static const pad_case PADS[] = {
    {1, {9}, {2, 3}},
    {2, {4, 7}, {1, 0, 2, 5}},
    {3, {2, 5, 6}, {0, 1, 1, 0, 2, 1}},
    {4, {1, 3, 8, 9}, {0, 0, 1, 2, 0, 0, 1, 2}},   /* the usual spatial pad */
    {4, {2, 3, 6, 7}, {0, 0, -1, 2, 0, 1, 3, -2}}, /* crop and pad */
    {4, {1, 2, 3, 4}, {0, 0, 5, 6, 0, 0, 4, 7}},   /* wider than the axis */
    {5, {1, 2, 3, 4, 5}, {0, 1, 1, 0, 2, 0, 1, 0, 2, 1}},
    {4, {1, 4, 33, 35}, {0, 0, 3, 3, 0, 0, 3, 3}}, /* big enough for threads */
    {3, {2, 3, 4}, {0, 0, 0, 0, 0, 0}},            /* nothing to pad */
};
static const char *const MODES[] = {"constant", "reflect", "edge", "wrap"};

static void pad_one(nr_test_state *t, nr_threadpool *pool, const pad_case *pc, int mode,
                    nr_dtype dt, uint64_t seed) {
  int r = pc->rank;
  int64_t yd[5], pd[1] = {2 * r};
  for (int d = 0; d < r; d++)
    yd[d] = pc->dims[d] + pc->pads[d] + pc->pads[r + d];
  void *x = data_of(dt, count(r, pc->dims), seed), *cv = data_of(dt, 1, seed + 1);
  nr_value xi = make_value(dt, r, pc->dims, x), y = make_value(dt, r, yd, NULL);
  nr_value pads = make_value(NR_DTYPE_INT64, 1, pd, (void *)pc->pads);
  nr_value cvi = make_value(dt, 0, NULL, cv);
  nr_attr at = attr_s("mode", MODES[mode]);
  const nr_value *ins[3] = {&xi, &pads, &cvi};
  bool consts[3] = {false, true, true};
  char what[96];
  snprintf(what, sizeof what, "Pad rank %d mode %s dtype %d seed %llu", r, MODES[mode],
           dt, (unsigned long long)seed);
  check(t, "nr_copy_pad", "Pad", 13, 1, &at, 3, ins, consts, &y, true, pool, what);
  check(t, "nr_copy_pad", "Pad", 13, 1, &at, 2, ins, consts, &y, true, pool, what);
  bool var_pads[3] = {false, false, true}; /* pads not constant: the reference */
  check(t, "nr_copy_pad", "Pad", 13, 1, &at, 2, ins, var_pads, &y, false, pool, what);
  if (dt == NR_DTYPE_FLOAT) { /* opset 2: pads and value as attributes */
    nr_attr at2[3] = {at, attr_ints("pads", (size_t)(2 * r), pc->pads),
                      attr_f("value", 1.5f)};
    check(t, "nr_copy_pad", "Pad", 2, 3, at2, 1, ins, consts, &y, true, pool, what);
  }
  free(x);
  free(cv);
}

NR_TEST(cpu_index_pad) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t c = 0; c < sizeof PADS / sizeof PADS[0]; c++)
    for (int m = 0; m < 4; m++) {
      pad_one(t, pool, &PADS[c], m, NR_DTYPE_FLOAT, 100 + c * 8 + m);
      if (m < 2)
        pad_one(t, pool, &PADS[c], m, NR_DTYPE_INT64, 200 + c * 8 + m);
    }
  /* opset 18 axes: pad the last two axes given as -1, 2 */
  int64_t xd[3] = {2, 5, 6}, yd[3] = {2, 8, 7}, pv[4] = {1, 2, 0, 1}, av[2] = {-1, 1};
  int64_t pn[1] = {4}, an[1] = {2};
  void *x = data_of(NR_DTYPE_FLOAT, 60, 7);
  nr_value xi = make_value(NR_DTYPE_FLOAT, 3, xd, x),
           y = make_value(NR_DTYPE_FLOAT, 3, yd, NULL);
  nr_value pads = make_value(NR_DTYPE_INT64, 1, pn, pv),
           axes = make_value(NR_DTYPE_INT64, 1, an, av);
  const nr_value *ins[4] = {&xi, &pads, NULL, &axes};
  bool consts[4] = {false, true, true, true};
  for (int m = 0; m < 4; m++) {
    nr_attr at = attr_s("mode", MODES[m]);
    check(t, "nr_copy_pad", "Pad", 18, 1, &at, 4, ins, consts, &y, true, pool, "Pad axes");
  }
  /* reflect with nothing left to copy from: the reference reports it */
  int64_t cd[2] = {3, 2}, cyd[2] = {3, 1}, cp[4] = {0, 1, 0, -2};
  nr_value ci = make_value(NR_DTYPE_FLOAT, 2, cd, x),
           cy = make_value(NR_DTYPE_FLOAT, 2, cyd, NULL);
  nr_value cpads = make_value(NR_DTYPE_INT64, 1, pn, cp);
  const nr_value *cins[2] = {&ci, &cpads};
  nr_attr refl = attr_s("mode", "reflect");
  check(t, "nr_copy_pad", "Pad", 13, 1, &refl, 2, cins, consts, &cy, false, pool,
        "Pad reflect of an empty extent");
  free(x);
  nr_threadpool_destroy(pool);
}

typedef struct gather_case {
  int rank;
  int64_t dims[4];
  int axis;
  int irank;
  int64_t idims[2];
} gather_case;

static const gather_case GATHERS[] = {
    {2, {50, 16}, 0, 1, {7}},    /* an embedding lookup */
    {2, {50, 16}, 0, 2, {2, 9}}, /* a batch of token ids */
    {2, {30, 33}, 0, 0, {0}},    /* one row: a scalar index */
    {3, {4, 6, 5}, 1, 1, {3}},
    {3, {4, 6, 5}, -1, 2, {2, 2}},
    {4, {2, 3, 4, 5}, 2, 0, {0}},
    {2, {3000, 64}, 0, 2, {4, 128}}, /* big enough for threads */
};

static void gather_one(nr_test_state *t, nr_threadpool *pool, const gather_case *gc,
                       nr_dtype dt, nr_dtype it, uint64_t seed) {
  int ax = gc->axis < 0 ? gc->axis + gc->rank : gc->axis, yr = 0;
  int64_t dim = gc->dims[ax], ni = count(gc->irank, gc->idims), yd[8];
  for (int d = 0; d < ax; d++)
    yd[yr++] = gc->dims[d];
  for (int d = 0; d < gc->irank; d++)
    yd[yr++] = gc->idims[d];
  for (int d = ax + 1; d < gc->rank; d++)
    yd[yr++] = gc->dims[d];
  nr_rng r = nr_rng_make(seed);
  void *x = data_of(dt, count(gc->rank, gc->dims), seed + 1);
  void *ind = malloc(8 * (size_t)ni);
  for (int64_t k = 0; k < ni; k++) { /* negative ones too */
    int64_t i = nr_rng_int(&r, -dim, dim - 1);
    if (it == NR_DTYPE_INT64)
      ((int64_t *)ind)[k] = i;
    else
      ((int32_t *)ind)[k] = (int32_t)i;
  }
  nr_value xi = make_value(dt, gc->rank, gc->dims, x), y = make_value(dt, yr, yd, NULL);
  nr_value ii = make_value(it, gc->irank, gc->idims, ind);
  nr_attr at = attr_i("axis", gc->axis);
  const nr_value *ins[2] = {&xi, &ii};
  bool consts[2] = {true, false};
  char what[96];
  snprintf(what, sizeof what, "Gather rank %d axis %d dtype %d idx %d seed %llu",
           gc->rank, gc->axis, dt, it, (unsigned long long)seed);
  check(t, "nr_copy_gather", "Gather", 13, 1, &at, 2, ins, consts, &y, true, pool, what);
  check(t, "nr_copy_gather", "Gather", 13, 1, &at, 2, ins, NULL, &y, true, pool, what);
  free(x);
  free(ind);
}

NR_TEST(cpu_index_gather) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t c = 0; c < sizeof GATHERS / sizeof GATHERS[0]; c++) {
    gather_one(t, pool, &GATHERS[c], NR_DTYPE_FLOAT, NR_DTYPE_INT64, 300 + c * 4);
    gather_one(t, pool, &GATHERS[c], NR_DTYPE_FLOAT, NR_DTYPE_INT32, 301 + c * 4);
    gather_one(t, pool, &GATHERS[c], NR_DTYPE_INT64, NR_DTYPE_INT64, 302 + c * 4);
  }
  /* an index out of range fails the step instead of reading outside the table */
  int64_t xd[2] = {5, 3}, id[1] = {2}, yd[2] = {2, 3}, bad[2] = {1, 5};
  void *x = data_of(NR_DTYPE_FLOAT, 15, 9);
  nr_value xi = make_value(NR_DTYPE_FLOAT, 2, xd, x),
           ii = make_value(NR_DTYPE_INT64, 1, id, bad);
  nr_value y = make_value(NR_DTYPE_FLOAT, 2, yd, NULL);
  const nr_value *ins[2] = {&xi, &ii};
  cpuop *o = cpuop_new();
  REQUIRE(!cpuop_init(o, "Gather", 13, 0, NULL, 2, ins, NULL, 1, &y, ""));
  REQUIRE(cpuop_supports(o, "nr_copy_gather"));
  bool g;
  CHECK(cpuop_run(o, pool, &g) == NR_ERR_RUNTIME && g, "index 5 of 5 rows must fail");
  CHECK(strstr(o->err.message, "out of range") != NULL, "message: %s", o->err.message);
  cpuop_free(o);
  free(o);
  free(x);
  nr_threadpool_destroy(pool);
}

typedef struct expand_case {
  int xr, yr;
  int64_t xd[4], yd[4];
} expand_case;

NR_TEST(cpu_index_expand) {
  static const expand_case E[] = {
      {4, 4, {2, 1, 1, 7}, {2, 1, 7, 7}}, /* an attention mask */
      {1, 3, {5}, {2, 3, 5}},
      {2, 4, {3, 1}, {2, 2, 3, 4}},
      {3, 3, {1, 4, 1}, {3, 4, 9}},
      {2, 2, {3, 4}, {3, 4}},
      {0, 2, {0}, {3, 5}},
      {2, 3, {1, 1}, {40, 50, 60}}, /* big enough for threads */
  };
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t c = 0; c < sizeof E / sizeof E[0]; c++)
    for (int dt = 0; dt < 2; dt++) {
      nr_dtype type = dt ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT;
      void *x = data_of(type, count(E[c].xr, E[c].xd), 400 + c);
      int64_t sd[1] = {E[c].yr};
      nr_value xi = make_value(type, E[c].xr, E[c].xd, x);
      nr_value shape = make_value(NR_DTYPE_INT64, 1, sd, (void *)E[c].yd);
      nr_value y = make_value(type, E[c].yr, E[c].yd, NULL);
      const nr_value *ins[2] = {&xi, &shape};
      bool consts[2] = {false, true};
      char what[64];
      snprintf(what, sizeof what, "Expand case %zu dtype %d", c, dt);
      check(t, "nr_copy_expand", "Expand", 13, 0, NULL, 2, ins, consts, &y, true, pool,
            what);
      free(x);
    }
  nr_threadpool_destroy(pool);
}
