/* test_cpu_copy.c - the data-movement tactics (nr_copy_*) against the reference
 * kernels, byte for byte: Concat and Split on every axis with pieces of uneven sizes
 * (float32 and int64), Slice with negative and clamped starts (opset 13 inputs and
 * opset 9 attributes), Transpose of ranks 1 to 5 with every kind of permutation, the
 * reshaping ops; plus what they leave to the reference (steps other than 1, a
 * non-constant start). Uses the one-step plan harness of cpuop.h. */
#include "plan/tactic.h"
#include "cpuop.h"
#include "op_test.h"
#include "kernels/ref/executor.h"
#include "util/threadpool.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static int64_t count(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  return n;
}

/* Distinct values of dtype dt (float32 or int64). */
static void *fill(nr_dtype dt, int64_t n, unsigned seed) {
  size_t es = dt == NR_DTYPE_INT64 ? 8 : 4;
  char *p = malloc(es * (size_t)n + 8);
  for (int64_t i = 0; i < n; i++) {
    if (dt == NR_DTYPE_INT64)
      ((int64_t *)p)[i] = (int64_t)seed * 100000 + i;
    else
      ((float *)p)[i] = (float)seed + (float)i * 0.25f;
  }
  return p;
}

static nr_value *int_list(int n, const int64_t *v, int64_t *dims_store) {
  nr_value *r = malloc(sizeof *r);
  dims_store[0] = n;
  *r = make_value(NR_DTYPE_INT64, 1, dims_store, (void *)v);
  return r;
}

/* Runs tactic id on the node and compares every output with the reference byte for
 * byte; expect: whether id must support it. */
static void check(nr_test_state *t, const char *id, const char *op, int opset, int n_attrs,
                  const nr_attr *attrs, int n_in, const nr_value *const *ins,
                  const bool *consts, int n_out, const nr_value *outs, bool expect,
                  nr_threadpool *pool, const char *what) {
  cpuop *o = cpuop_new();
  REQUIRE(!cpuop_init(o, op, opset, n_attrs, attrs, n_in, ins, consts, n_out, outs, ""),
          "%s", what);
  bool sup = cpuop_supports(o, id);
  CHECK(sup == expect, "%s: %s supports %d, want %d", what, id, sup, expect);
  if (sup) {
    bool g;
    nr_value ref[6];
    CHECK(!cpuop_run(o, pool, &g) && g, "%s: run or guards", what);
    REQUIRE(!cpuop_ref(o, n_attrs, attrs, ref), "%s: reference", what);
    for (int i = 0; i < n_out; i++) {
      CHECK(!memcmp(cpuop_out(o, i), ref[i].data, nr_value_nbytes(&ref[i])),
            "%s: output %d differs from the reference", what, i);
      nr_value_free(&ref[i]);
    }
  }
  cpuop_free(o);
  free(o);
}

NR_TEST(cpu_copy_concat_split) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const int64_t base[4] = {2, 3, 5, 7};
  static const int64_t sizes[3] = {1, 4, 2};
  for (int dt = 0; dt < 2; dt++)
    for (int axis = -1; axis < 4; axis++) {
      nr_dtype type = dt ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT;
      int ax = axis < 0 ? 3 : axis;
      int64_t dims[3][4], whole[4];
      memcpy(whole, base, sizeof whole);
      whole[ax] = 0;
      nr_value pieces[3], outs[3];
      void *data[3];
      for (int i = 0; i < 3; i++) {
        memcpy(dims[i], base, sizeof base);
        dims[i][ax] = sizes[i];
        whole[ax] += sizes[i];
        data[i] = fill(type, count(4, dims[i]), (unsigned)(i + 1));
        pieces[i] = make_value(type, 4, dims[i], data[i]);
        outs[i] = make_value(type, 4, dims[i], NULL);
      }
      nr_attr at = {.name = "axis", .type = NR_ATTR_INT, .i = axis};
      const nr_value *ins[3] = {&pieces[0], &pieces[1], &pieces[2]};
      nr_value y = make_value(type, 4, whole, NULL);
      char what[64];
      snprintf(what, sizeof what, "concat axis %d dtype %d", axis, dt);
      check(t, "nr_copy_concat", "Concat", 13, 1, &at, 3, ins, NULL, 1, &y, true, pool, what);
      void *wd = fill(type, count(4, whole), 9);
      nr_value w = make_value(type, 4, whole, wd);
      int64_t sd[1];
      nr_value *split = int_list(3, sizes, sd);
      const nr_value *sins[2] = {&w, split};
      bool consts[2] = {false, true};
      snprintf(what, sizeof what, "split axis %d dtype %d", axis, dt);
      check(t, "nr_copy_split", "Split", 13, 1, &at, 2, sins, consts, 3, outs, true, pool,
            what);
      free(split);
      free(wd);
      for (int i = 0; i < 3; i++)
        free(data[i]);
    }
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_copy_slice) {
  static const struct {
    int n;
    int64_t starts[3], ends[3], axes[3], steps[3];
    bool supported;
  } cases[] = {
      {1, {1}, {3}, {1}, {1}, true},                        /* channel slice */
      {2, {-4, 0}, {100, -2}, {-1, 2}, {1, 1}, true},        /* negative, clamped */
      {3, {0, 1, 2}, {2, 3, 5}, {0, 1, 2}, {1, 1, 1}, true},
      {1, {-100}, {2}, {1}, {1}, true},                      /* start clamped to 0 */
      {1, {0}, {6}, {3}, {2}, false},                        /* step 2: reference */
  };
  int64_t xd[4] = {3, 4, 6, 9};
  void *x = fill(NR_DTYPE_FLOAT, count(4, xd), 3);
  nr_value xi = make_value(NR_DTYPE_FLOAT, 4, xd, x);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int n = cases[c].n;
    /* the output shape from the reference itself */
    int64_t d1[1], d2[1], d3[1], d4[1];
    nr_value *s = int_list(n, cases[c].starts, d1), *e = int_list(n, cases[c].ends, d2),
             *a = int_list(n, cases[c].axes, d3), *st = int_list(n, cases[c].steps, d4);
    const nr_value *ins[5] = {&xi, s, e, a, st};
    bool consts[5] = {false, true, true, true, true};
    nr_value ref = {0};
    nr_error err = {0};
    REQUIRE(!nr_ref_exec_node("Slice", "", 13, 0, NULL, 5, ins, 1, &ref, &err), "%s",
            err.message);
    nr_value y = make_value(NR_DTYPE_FLOAT, 4, ref.dims, NULL);
    nr_value_free(&ref);
    char what[64];
    snprintf(what, sizeof what, "slice case %zu", c);
    check(t, "nr_copy_slice", "Slice", 13, 0, NULL, 5, ins, consts, 1, &y,
          cases[c].supported, NULL, what);
    if (cases[c].supported) /* no steps input */
      check(t, "nr_copy_slice", "Slice", 13, 0, NULL, 4, ins, consts, 1, &y, true, NULL, what);
    bool var[5] = {false, false, true, true, true}; /* starts known only at run time */
    check(t, "nr_copy_slice", "Slice", 13, 0, NULL, 5, ins, var, 1, &y, false, NULL, what);
    nr_attr at[3] = {{.name = "starts", .type = NR_ATTR_INTS, .n = n,
                      .ints = (int64_t *)cases[c].starts},
                     {.name = "ends", .type = NR_ATTR_INTS, .n = n,
                      .ints = (int64_t *)cases[c].ends},
                     {.name = "axes", .type = NR_ATTR_INTS, .n = n,
                      .ints = (int64_t *)cases[c].axes}};
    if (cases[c].supported)
      check(t, "nr_copy_slice", "Slice", 9, 3, at, 1, ins, NULL, 1, &y, true, NULL, what);
    free(s), free(e), free(a), free(st);
  }
  free(x);
}

NR_TEST(cpu_copy_transpose_reshape) {
  static const struct {
    int rank;
    int64_t dims[5], perm[5];
  } cases[] = {
      {1, {7}, {0}},
      {2, {5, 9}, {1, 0}},
      {3, {2, 3, 4}, {0, 2, 1}},
      {4, {1, 4, 3, 5}, {0, 2, 1, 3}},   /* heads split */
      {4, {2, 3, 4, 5}, {0, 2, 3, 1}},   /* torch's K^T */
      {5, {1, 2, 6, 3, 4}, {0, 2, 1, 3, 4}}, /* channel shuffle */
      {4, {2, 3, 4, 5}, {3, 2, 1, 0}},
  };
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int r = cases[c].rank;
    int64_t yd[5];
    for (int d = 0; d < r; d++)
      yd[d] = cases[c].dims[cases[c].perm[d]];
    void *x = fill(NR_DTYPE_FLOAT, count(r, cases[c].dims), 5);
    nr_value xi = make_value(NR_DTYPE_FLOAT, r, cases[c].dims, x), y = make_value(NR_DTYPE_FLOAT, r, yd, NULL);
    const nr_value *ins[1] = {&xi};
    nr_attr at = {.name = "perm", .type = NR_ATTR_INTS, .n = r, .ints = (int64_t *)cases[c].perm};
    char what[64];
    snprintf(what, sizeof what, "transpose case %zu", c);
    check(t, "nr_copy_transpose", "Transpose", 13, 1, &at, 1, ins, NULL, 1, &y, true, pool,
          what);
    /* Flatten at axis 1 and Reshape to the flat shape of the same data */
    int64_t fd[2] = {cases[c].dims[0], count(r, cases[c].dims) / cases[c].dims[0]};
    nr_value f = make_value(NR_DTYPE_FLOAT, 2, fd, NULL);
    check(t, "nr_copy_reshape", "Flatten", 13, 0, NULL, 1, ins, NULL, 1, &f, true, pool, what);
    int64_t sd[1];
    nr_value *shape = int_list(2, fd, sd);
    const nr_value *rins[2] = {&xi, shape};
    bool consts[2] = {false, true};
    check(t, "nr_copy_reshape", "Reshape", 13, 0, NULL, 2, rins, consts, 1, &f, true, pool,
          what);
    free(shape);
    free(x);
  }
  nr_threadpool_destroy(pool);
}

/* Copies of 64 KiB and more are split across the pool (by elements when the merged copy
 * is one contiguous run, else by rows): every way of cutting them must still give the
 * reference's bytes. Concat along channels (each piece one run), Split along the last
 * axis (short strided rows), shufflenet_v2's channel shuffle (rows of a plane), a
 * transpose whose innermost copy is strided, in float32 and int64, on 2 and 3 threads. */
NR_TEST(cpu_copy_large_threaded) {
  for (int threads = 2; threads <= 3; threads++) {
    nr_threadpool *pool = nr_threadpool_create(threads);
    for (int dt = 0; dt < 2; dt++) {
      nr_dtype type = dt ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT;
      char what[80];
      /* Concat of three channel blocks of a 1 x C x 29 x 31 tensor */
      static const int64_t cs[3] = {19, 24, 5};
      int64_t whole[4] = {1, 48, 29, 31}, pd[3][4];
      nr_value pieces[3], outs[3];
      void *data[3];
      for (int i = 0; i < 3; i++) {
        memcpy(pd[i], whole, sizeof whole);
        pd[i][1] = cs[i];
        data[i] = fill(type, count(4, pd[i]), (unsigned)(i + 3));
        pieces[i] = make_value(type, 4, pd[i], data[i]);
      }
      const nr_value *ins[3] = {&pieces[0], &pieces[1], &pieces[2]};
      nr_attr ax1 = {.name = "axis", .type = NR_ATTR_INT, .i = 1};
      nr_value y = make_value(type, 4, whole, NULL);
      snprintf(what, sizeof what, "large concat dtype %d threads %d", dt, threads);
      check(t, "nr_copy_concat", "Concat", 13, 1, &ax1, 3, ins, NULL, 1, &y, true, pool,
            what);
      for (int i = 0; i < 3; i++)
        free(data[i]);
      /* Split of a 128 x 768 product into three 128 x 256 pieces (bert's QKV) */
      int64_t qd[2] = {128, 768}, od[2] = {128, 256}, sizes[3] = {256, 256, 256};
      void *qx = fill(type, count(2, qd), 7);
      nr_value q = make_value(type, 2, qd, qx);
      for (int i = 0; i < 3; i++)
        outs[i] = make_value(type, 2, od, NULL);
      int64_t sd[1];
      nr_value *split = int_list(3, sizes, sd);
      const nr_value *sins[2] = {&q, split};
      bool consts[2] = {false, true};
      nr_attr axl = {.name = "axis", .type = NR_ATTR_INT, .i = -1};
      snprintf(what, sizeof what, "large split dtype %d threads %d", dt, threads);
      check(t, "nr_copy_split", "Split", 13, 1, &axl, 2, sins, consts, 3, outs, true, pool,
            what);
      free(split);
      free(qx);
      /* the channel shuffle, and a 2-D transpose (strided innermost copy) */
      static const struct {
        int rank;
        int64_t dims[5], perm[5];
      } tc[] = {{5, {1, 2, 58, 28, 28}, {0, 2, 1, 3, 4}}, {2, {67, 301}, {1, 0}}};
      for (size_t c = 0; c < sizeof tc / sizeof tc[0]; c++) {
        int r = tc[c].rank;
        int64_t yd[5];
        for (int d = 0; d < r; d++)
          yd[d] = tc[c].dims[tc[c].perm[d]];
        void *x = fill(type, count(r, tc[c].dims), 11);
        nr_value xi = make_value(type, r, tc[c].dims, x), ty = make_value(type, r, yd, NULL);
        const nr_value *tins[1] = {&xi};
        nr_attr at = {.name = "perm", .type = NR_ATTR_INTS, .n = r,
                      .ints = (int64_t *)tc[c].perm};
        snprintf(what, sizeof what, "large transpose %zu dtype %d threads %d", c, dt,
                 threads);
        check(t, "nr_copy_transpose", "Transpose", 13, 1, &at, 1, tins, NULL, 1, &ty, true,
              pool, what);
        free(x);
      }
    }
    nr_threadpool_destroy(pool);
  }
}
