/* test_cpu_resize.c - the Resize tactics (nr_f32_resize__avx2, __portable) against the
 * reference executor: every mode x coordinate transformation x nearest rounding, on
 * odd plane sizes, upsampling and downsampling, scales and sizes, the opset-10 and
 * Upsample forms, the parallel path, and the nodes they must leave to the reference
 * (cubic, antialias, crop-and-resize, a resized channel axis). Uses the one-step
 * harness of cpuop.h with scales / sizes as constants. */
#include "cpuop.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const IDS[] = {"nr_f32_resize__avx2", "nr_f32_resize__portable"};

typedef struct rcase {
  const char *op;
  int opset;
  int n_attrs;
  nr_attr attrs[5];
  int64_t xd[4];
  int rank;
  bool sizes;       /* sizes input (else scales) */
  double s[4];      /* scales, or output sizes when sizes */
  bool expect;      /* the fast tactics should run it */
} rcase;

static nr_attr sattr(const char *name, const char *s) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_STRING, .s = (char *)s,
                   .s_len = strlen(s)};
}
static nr_attr iattr(const char *name, int64_t i) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INT, .i = i};
}

/* Runs case rc on both tactics and the reference. */
static void check_case(nr_test_state *t, const rcase *rc, uint64_t seed,
                       nr_threadpool *pool) {
  nr_rng r = nr_rng_make(seed);
  int rank = rc->rank;
  int64_t n = 1, yd[4], m = 1, cnt = rank;
  float sc[4];
  int64_t sz[4];
  for (int d = 0; d < rank; d++) {
    n *= rc->xd[d];
    sc[d] = (float)rc->s[d];
    sz[d] = (int64_t)rc->s[d];
    yd[d] = rc->sizes ? sz[d] : (int64_t)floor((double)rc->xd[d] * (double)sc[d]);
    m *= yd[d];
  }
  float *x = nr_rng_floats(&r, n, -1, 1);
  nr_value xv = cpuop_fval(rank, rc->xd, x), yv = cpuop_fval(rank, yd, NULL);
  nr_value sv = cpuop_fval(1, &cnt, sc);
  nr_value zv = {.dtype = NR_DTYPE_INT64, .rank = 1, .dims = {cnt}, .data = sz};
  bool legacy = strcmp(rc->op, "Resize") || rc->opset < 11;
  const nr_value *ins[4] = {&xv, NULL, NULL, NULL};
  bool consts[4] = {false, true, true, true};
  int n_in = 2;
  if (legacy)
    ins[1] = &sv;
  else if (rc->sizes)
    ins[3] = &zv, n_in = 4;
  else
    ins[2] = &sv, n_in = 3;
  for (int k = 0; k < 2; k++) {
    cpuop *o = cpuop_new();
    REQUIRE(!cpuop_init(o, rc->op, rc->opset, rc->n_attrs, rc->attrs, n_in, ins, consts,
                        1, &yv, ""));
    bool sup = cpuop_supports(o, IDS[k]);
    bool runs = !(nr_tactic_find(IDS[k])->isa & ~nr_cpu_isa());
    CHECK(sup == (rc->expect && runs), "%s seed=%llu: supports %d, expected %d", IDS[k],
          (unsigned long long)seed, sup, rc->expect && runs);
    if (sup) {
      bool g;
      nr_value ref;
      nr_status st = cpuop_run(o, pool, &g);
      CHECK(!st && g, "%s seed=%llu: run %d guards %d", IDS[k], (unsigned long long)seed,
            st, g);
      REQUIRE(!cpuop_ref(o, rc->n_attrs, rc->attrs, &ref));
      CHECK(nr_value_count(&ref) == m, "%s: reference has %lld elements, expected %lld",
            IDS[k], (long long)nr_value_count(&ref), (long long)m);
      double e = cpuop_err(cpuop_out(o, 0), ref.data, m, 1e-6, 1e-5);
      CHECK(e <= 1.0, "%s seed=%llu %s mode=%s x=[%lld %lld %lld %lld]: %.3g of tol.",
            IDS[k], (unsigned long long)seed, rc->op, rc->n_attrs ? rc->attrs[0].s : "-",
            (long long)rc->xd[0], (long long)rc->xd[1], (long long)rc->xd[2],
            (long long)rc->xd[3], e);
      nr_value_free(&ref);
    }
    cpuop_free(o);
    free(o);
  }
  free(x);
}

static const char *const CTMS[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                   "asymmetric", "tf_half_pixel_for_nn",
                                   "half_pixel_symmetric"};
static const char *const NEAREST[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                      "ceil"};
static const int64_t SHAPES[][4] = {{1, 1, 1, 1}, {1, 2, 5, 7}, {2, 3, 4, 9},
                                    {1, 1, 17, 33}, {1, 2, 8, 8}};
/* (scale h, scale w) and (out h, out w) as multiples and offsets of the input's */
static const double SCALES[][2] = {{2, 2}, {3, 0.5}, {0.75, 1.5}, {1, 2.5},
                                   {0.5, 0.5}, {1, 1}, {8, 8}, {4, 4}};
static const int SIZES[][4] = {{2, 1, 3, -1}, {1, 0, 0, 3}, {0, 1, 0, 2}, {3, 0, 1, 1}};

static void grid(nr_test_state *t, const char *mode, int ctm, int nearest, uint64_t *seed,
                 nr_threadpool *pool) {
  for (int sh = 0; sh < 5; sh++) {
    for (int form = 0; form < 12; form++) {
      rcase rc = {.op = "Resize", .opset = 13, .n_attrs = 3, .rank = 4,
                  .sizes = form >= 8, .s = {1, 1, 0, 0}, .expect = true,
                  .attrs = {sattr("mode", mode),
                            sattr("coordinate_transformation_mode", CTMS[ctm]),
                            sattr("nearest_mode", NEAREST[nearest])}};
      memcpy(rc.xd, SHAPES[sh], sizeof rc.xd);
      if (form < 8) {
        rc.s[2] = SCALES[form][0], rc.s[3] = SCALES[form][1];
        if (floor(rc.xd[2] * rc.s[2]) < 1 || floor(rc.xd[3] * rc.s[3]) < 1)
          continue;
      } else {
        const int *z = SIZES[form - 8];
        rc.s[0] = (double)rc.xd[0], rc.s[1] = (double)rc.xd[1];
        rc.s[2] = (double)(z[0] ? z[0] * rc.xd[2] + z[1] : rc.xd[2] / 2 + z[1]);
        rc.s[3] = (double)(z[2] ? z[2] * rc.xd[3] + z[3] : rc.xd[3] / 2 + z[3]);
        if (rc.s[2] < 1 || rc.s[3] < 1)
          continue;
      }
      check_case(t, &rc, (*seed)++, pool);
    }
  }
}

NR_TEST(cpu_resize_nearest) {
  nr_threadpool *pool = nr_threadpool_create(2);
  uint64_t seed = 1000;
  for (int c = 0; c < 6; c++)
    for (int k = 0; k < 4; k++)
      grid(t, "nearest", c, k, &seed, pool);
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_resize_linear) {
  nr_threadpool *pool = nr_threadpool_create(2);
  uint64_t seed = 2000;
  for (int c = 0; c < 6; c++)
    grid(t, "linear", c, 0, &seed, pool);
  /* exclude_outside renormalizes the taps left inside (the same numbers for linear) */
  rcase rc = {"Resize", 13, 3, {sattr("mode", "linear"), iattr("exclude_outside", 1),
                                sattr("coordinate_transformation_mode", "half_pixel")},
              {1, 2, 5, 6}, 4, false, {1, 1, 2.5, 0.6}, true};
  check_case(t, &rc, seed++, pool);
  nr_threadpool_destroy(pool);
}

/* Large enough for the thread pool's chunks, both modes; opsets 11, 18 and 19. */
NR_TEST(cpu_resize_parallel_and_opsets) {
  nr_threadpool *pool = nr_threadpool_create(3);
  static const char *const modes[] = {"nearest", "linear"};
  static const int opsets[] = {11, 13, 18, 19};
  for (int k = 0; k < 2; k++)
    for (int o = 0; o < 4; o++) {
      rcase rc = {"Resize", opsets[o], 2, {sattr("mode", modes[k]),
                  sattr("coordinate_transformation_mode", "half_pixel")},
                  {2, 8, 61, 83}, 4, false, {1, 1, 2, 2}, true};
      check_case(t, &rc, 3000 + (uint64_t)(k * 4 + o), pool);
      rc.sizes = true;
      rc.s[0] = 2, rc.s[1] = 8, rc.s[2] = 130, rc.s[3] = 41;
      check_case(t, &rc, 3100 + (uint64_t)(k * 4 + o), pool);
    }
  /* a rank-3 tensor resized along its last axis, a rank-2 one in both */
  rcase r3 = {"Resize", 13, 1, {sattr("mode", "linear")}, {2, 3, 11}, 3, false,
              {1, 1, 1.5}, true};
  check_case(t, &r3, 3200, pool);
  rcase r2 = {"Resize", 13, 1, {sattr("mode", "nearest")}, {7, 5}, 2, false, {2, 3},
              true};
  check_case(t, &r2, 3201, pool);
  nr_threadpool_destroy(pool);
}

/* Resize-10 and Upsample-9 (scales as input 1, asymmetric, the legacy rounding). */
NR_TEST(cpu_resize_legacy_forms) {
  static const char *const modes[] = {"nearest", "linear"};
  static const double sc[][2] = {{2, 2}, {0.5, 0.7}, {1.5, 3}};
  uint64_t seed = 4000;
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < 3; s++) {
      rcase a = {"Resize", 10, 1, {sattr("mode", modes[k])}, {1, 2, 6, 7}, 4, false,
                 {1, 1, sc[s][0], sc[s][1]}, true};
      check_case(t, &a, seed++, NULL);
      rcase b = a;
      b.op = "Upsample", b.opset = 9;
      if (sc[s][0] >= 1 && sc[s][1] >= 1)
        check_case(t, &b, seed++, NULL);
    }
}

/* What the fast tactics leave to the reference. */
NR_TEST(cpu_resize_declines) {
  rcase cubic = {"Resize", 13, 1, {sattr("mode", "cubic")}, {1, 2, 5, 7}, 4, false,
                 {1, 1, 2, 2}, false};
  check_case(t, &cubic, 5000, NULL);
  rcase aa = {"Resize", 18, 2, {sattr("mode", "linear"), iattr("antialias", 1)},
              {1, 2, 8, 8}, 4, false, {1, 1, 0.5, 0.5}, false};
  check_case(t, &aa, 5001, NULL);
  rcase chan = {"Resize", 13, 1, {sattr("mode", "nearest")}, {1, 2, 5, 7}, 4, false,
                {1, 2, 2, 2}, false};
  check_case(t, &chan, 5002, NULL);
}
