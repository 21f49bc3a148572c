/* test_cpu_eltwise.c - the elementwise tactics against the reference kernels, and
 * the measured error of every approximation against its documented bound.
 *
 * Tactics are tested without the compile driver: cpuop.h's harness builds a one-node
 * graph (so knobs resolve through a real knob space and route), a plan of slots and
 * one step by hand, then calls supports(), prepare() and run() directly. Buffers
 * carry guard bytes on both sides; data comes from a printed seed. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "plan/knob_internal.h"
#include "plan/tactic.h"
#include "cpuop.h"
#include "graph_build.h"
#include "kernels/cpu/eltwise/vmath.h"
#include "kernels/ref/executor.h"
#include "passes/pass_util.h"
#include "util/threadpool.h"
#include "rng.h"
#include "unit.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


static const char *const ISAS[] = {"__avx2", "__portable"};

/* Runs op on one input of n elements through every ISA of tactic stem and compares
 * with the reference within (atol, rtol); returns false after reporting. */
static void check_unary(nr_test_state *t, const char *op, const char *stem, int opset,
                        int n_attrs, const nr_attr *attrs, int64_t n, float lo, float hi,
                        const char *route, double atol, double rtol, nr_threadpool *pool) {
  unsigned seed = (unsigned)(n * 7919 + strlen(op)), s0 = seed;
  float *x = nr_rng_floats_u32(n, &seed, lo, hi);
  if (n > 3) {
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = NAN;
  }
  int64_t dims[1] = {n};
  nr_value xi = cpuop_fval(1, dims, x), yo = cpuop_fval(1, dims, NULL);
  const nr_value *ins[] = {&xi};
  for (int k = 0; k < 2; k++) {
    char id[64];
    snprintf(id, sizeof id, "nr_f32_v%s%s", stem, ISAS[k]);
    cpuop o;
    nr_status st = cpuop_init(&o, op, opset, n_attrs, attrs, 1, ins, NULL, 1, &yo, route);
    CHECK(!st, "%s: init: %s", id, o.err.message);
    if (!st && cpuop_supports(&o, id)) {
      bool guards;
      nr_value ref;
      st = cpuop_run(&o, pool, &guards);
      CHECK(!st && guards, "%s n=%lld seed=%u: run %d guards %d", id, (long long)n, s0,
            st, guards);
      REQUIRE(!cpuop_ref(&o, n_attrs, attrs, &ref), "ref: %s", o.err.message);
      double e = cpuop_err(o.out[0].data, ref.data, n, atol, rtol);
      CHECK(e <= 1.0, "%s n=%lld seed=%u route='%s': error %.3g of tolerance", id,
            (long long)n, s0, route, e);
      nr_value_free(&ref);
    } else if (!st) {
      CHECK(!(nr_cpu_isa() & NR_ISA_AVX2) && k == 0, "%s does not support n=%lld", id,
            (long long)n);
    }
    cpuop_free(&o);
  }
  free(x);
}

static const int64_t SIZES[] = {0, 1, 7, 8, 9, 31, 33, 1000, 70000};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

NR_TEST(cpu_eltwise_unary_exact_ops) {
  nr_threadpool *pool = nr_threadpool_create(2);
  nr_attr leaky[] = {{.name = "alpha", .type = NR_ATTR_FLOAT, .f = 0.3f}};
  nr_attr hsig[] = {{.name = "alpha", .type = NR_ATTR_FLOAT, .f = 0.25f},
                    {.name = "beta", .type = NR_ATTR_FLOAT, .f = 0.4f}};
  nr_attr clip6[] = {{.name = "min", .type = NR_ATTR_FLOAT, .f = 0.0f},
                     {.name = "max", .type = NR_ATTR_FLOAT, .f = 6.0f}};
  for (int s = 0; s < NSIZES; s++) {
    int64_t n = SIZES[s];
    check_unary(t, "Relu", "relu", 14, 0, NULL, n, -5, 5, "", 0, 0, pool);
    check_unary(t, "Neg", "neg", 13, 0, NULL, n, -5, 5, "", 0, 0, pool);
    check_unary(t, "Abs", "abs", 13, 0, NULL, n, -5, 5, "", 0, 0, pool);
    check_unary(t, "Sqrt", "sqrt", 13, 0, NULL, n, 0, 50, "", 0, 0, pool);
    check_unary(t, "LeakyRelu", "leakyrelu", 16, 1, leaky, n, -5, 5, "", 0, 0, pool);
    check_unary(t, "Clip", "clip", 6, 2, clip6, n, -9, 9, "", 0, 0, pool);
    check_unary(t, "HardSigmoid", "hardsigmoid", 6, 2, hsig, n, -6, 6, "", 1e-7, 2.5e-7,
                pool);
    check_unary(t, "HardSwish", "hardswish", 14, 0, NULL, n, -6, 6, "", 1e-7, 2.5e-7,
                pool);
    check_unary(t, "Exp", "exp", 13, 0, NULL, n, -80, 80, "", 0, 4e-7, pool);
    check_unary(t, "Sigmoid", "sigmoid", 13, 0, NULL, n, -30, 30, "", 0, 4e-7, pool);
    check_unary(t, "Tanh", "tanh", 13, 0, NULL, n, -10, 10, "", 0, 4e-7, pool);
    check_unary(t, "Erf", "erf", 13, 0, NULL, n, -5, 5, "", 0, 4e-7, pool);
    check_unary(t, "Gelu", "gelu", 20, 0, NULL, n, -8, 8, "", 1e-6, 4e-7, pool);
  }
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_eltwise_unary_knobs) {
  nr_threadpool *pool = nr_threadpool_create(2);
  nr_attr tanh_attr[] = {{.name = "approximate", .type = NR_ATTR_STRING, .s = "tanh",
                          .s_len = 4}};
  int64_t sizes[] = {9, 1000, 70000};
  for (int s = 0; s < 3; s++) {
    int64_t n = sizes[s];
    check_unary(t, "Exp", "exp", 13, 0, NULL, n, -80, 80, "-eltwise.math=fast", 0, 1.5e-5,
                pool);
    check_unary(t, "Sigmoid", "sigmoid", 13, 0, NULL, n, -30, 30, "-eltwise.math=fast", 0,
                1.5e-5, pool);
    check_unary(t, "Tanh", "tanh", 13, 0, NULL, n, -10, 10, "-eltwise.math=fast", 0,
                1.5e-5, pool);
    check_unary(t, "Erf", "erf", 13, 0, NULL, n, -5, 5, "-eltwise.math=fast", 0, 1.5e-5,
                pool);
    /* the tanh formula against the erf reference: the documented GELU bound */
    check_unary(t, "Gelu", "gelu", 20, 0, NULL, n, -8, 8, "-gelu.approx@n0=tanh", 5e-4, 0,
                pool);
    check_unary(t, "Gelu", "gelu", 20, 1, tanh_attr, n, -8, 8, "", 1e-6, 4e-7, pool);
  }
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_eltwise_clip_inputs) {
  float lo = -1.0f, hi = 2.5f, out_lo = 1.0f;
  int64_t n = 33, one = 1;
  unsigned seed = 5;
  float *x = nr_rng_floats_u32(n, &seed, -4, 4);
  nr_value xi = cpuop_fval(1, &n, x), l = cpuop_fval(0, &one, &lo), h = cpuop_fval(0, &one, &hi),
           y = cpuop_fval(1, &n, NULL), l2 = cpuop_fval(0, &one, &out_lo);
  bool consts[] = {false, true, true};
  const nr_value *ins[] = {&xi, &l, &h}, *ins_nomin[] = {&xi, NULL, &h},
                 *ins_bad[] = {&xi, &l2, &h};
  const nr_value *const *cases[] = {ins, ins_nomin, ins_bad}; /* ins_bad: min 1 */
  for (int c = 0; c < 3; c++) {
    cpuop o;
    REQUIRE(!cpuop_init(&o, "Clip", 13, 0, NULL, 3, cases[c], consts, 1, &y, ""));
    REQUIRE(cpuop_supports(&o, "nr_f32_vclip__portable"));
    bool g;
    nr_value ref;
    CHECK(!cpuop_run(&o, NULL, &g) && g);
    REQUIRE(!cpuop_ref(&o, 0, NULL, &ref));
    CHECK(cpuop_err(o.out[0].data, ref.data, n, 0, 0) == 0, "case %d", c);
    nr_value_free(&ref);
    cpuop_free(&o);
  }
  cpuop o;
  bool notconst[] = {false, false, true};
  REQUIRE(!cpuop_init(&o, "Clip", 13, 0, NULL, 3, ins, notconst, 1, &y, ""));
  CHECK(!cpuop_supports(&o, "nr_f32_vclip__portable"));
  cpuop_free(&o);
  free(x);
}

/* ---- binary ops ----------------------------------------------------------------- */

static void check_binary(nr_test_state *t, const char *op, const char *stem, int ra,
                         const int64_t *da, int rb, const int64_t *db, int ry,
                         const int64_t *dy, nr_threadpool *pool, bool where) {
  unsigned seed = (unsigned)(da[0] * 31 + ra * 7 + rb), s0 = seed;
  int64_t na = 1, nb = 1, ny = 1;
  for (int d = 0; d < ra; d++)
    na *= da[d];
  for (int d = 0; d < rb; d++)
    nb *= db[d];
  for (int d = 0; d < ry; d++)
    ny *= dy[d];
  float *a = nr_rng_floats_u32(na, &seed, -3, 3), *b = nr_rng_floats_u32(nb, &seed, 0.5f, 3);
  uint8_t *cond = malloc((size_t)na + 1);
  nr_rng r = nr_rng_make(seed);
  for (int64_t i = 0; i < na; i++)
    cond[i] = nr_rng_u32(&r) & 1;
  nr_value va = cpuop_fval(ra, da, a), vb = cpuop_fval(rb, db, b), vy = cpuop_fval(ry, dy, NULL);
  nr_value vc = va, vx = vb, vz = vb;
  vc.dtype = NR_DTYPE_BOOL;
  vc.data = cond;
  const nr_value *ins2[] = {&va, &vb}, *ins3[] = {&vc, &vx, &vz};
  const char *suffix[] = {"", "_bcast"};
  for (int k = 0; k < 4; k++) {
    char id[64];
    snprintf(id, sizeof id, "nr_f32_v%s%s%s", stem, suffix[k / 2], ISAS[k % 2]);
    cpuop o;
    REQUIRE(!cpuop_init(&o, op, 14, 0, NULL, where ? 3 : 2, where ? ins3 : ins2, NULL, 1,
                        &vy, ""));
    if (cpuop_supports(&o, id)) {
      bool g;
      nr_value ref;
      nr_status st = cpuop_run(&o, pool, &g);
      CHECK(!st && g, "%s seed=%u: run %d guards %d", id, s0, st, g);
      REQUIRE(!cpuop_ref(&o, 0, NULL, &ref), "%s", o.err.message);
      CHECK(cpuop_err(o.out[0].data, ref.data, ny, 0, 0) == 0, "%s seed=%u differs", id, s0);
      nr_value_free(&ref);
    }
    cpuop_free(&o);
  }
  free(a);
  free(b);
  free(cond);
}

NR_TEST(cpu_eltwise_binary) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const char *const ops[][2] = {{"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"},
                                       {"Div", "div"}};
  for (int o = 0; o < 4; o++) {
    for (int s = 0; s < NSIZES; s++) { /* same shapes */
      int64_t n = SIZES[s];
      check_binary(t, ops[o][0], ops[o][1], 1, &n, 1, &n, 1, &n, pool, false);
    }
    int64_t x4[] = {2, 3, 5, 7}, ch[] = {3, 1, 1}, vec[] = {7}, one[] = {1},
            y4[] = {2, 3, 5, 7}, row[] = {1, 5, 1}, big[] = {4, 33, 600}, bigv[] = {600},
            col[] = {2, 1, 5, 1}, r9[] = {9};
    check_binary(t, ops[o][0], ops[o][1], 4, x4, 3, ch, 4, y4, pool, false);   /* NCHW */
    check_binary(t, ops[o][0], ops[o][1], 4, x4, 1, vec, 4, y4, pool, false);  /* vector */
    check_binary(t, ops[o][0], ops[o][1], 4, x4, 0, one, 4, y4, pool, false);  /* scalar */
    check_binary(t, ops[o][0], ops[o][1], 1, vec, 4, x4, 4, y4, pool, false);  /* left */
    check_binary(t, ops[o][0], ops[o][1], 0, one, 4, x4, 4, y4, pool, false);
    check_binary(t, ops[o][0], ops[o][1], 4, x4, 3, row, 4, y4, pool, false);  /* middle */
    check_binary(t, ops[o][0], ops[o][1], 4, col, 1, vec, 4, (int64_t[]){2, 1, 5, 7},
                 pool, false); /* both broadcast */
    check_binary(t, ops[o][0], ops[o][1], 3, big, 1, bigv, 3, big, pool, false);
    check_binary(t, ops[o][0], ops[o][1], 1, one, 1, r9, 1, r9, pool, false);
  }
  int64_t x4[] = {2, 3, 5, 7}, vec[] = {7}, big[] = {4, 33, 600};
  check_binary(t, "Where", "where", 4, x4, 1, vec, 4, x4, pool, true);
  check_binary(t, "Where", "where", 3, big, 3, big, 3, big, pool, true);
  nr_threadpool_destroy(pool);
}

/* ---- the approximations over dense sweeps --------------------------------------- */

typedef double (*ref_fn)(double);
static double sig_d(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static double gelu_d(double x) { return 0.5 * x * (1 + erf(x / M_SQRT2)); }

/* Max relative error (results below FLT_MIN in magnitude count against FLT_MIN). */
static double sweep(nr_ewu_op op, nr_vmath m, bool avx2, ref_fn f, double lo, double hi,
                    int64_t n, double floor_abs) {
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)(lo + (hi - lo) * (double)i / (double)(n - 1));
  nr_ewu_params p = {.op = (uint8_t)op, .math = (uint8_t)m};
  if (avx2)
    nr_f32_vunary__avx2(&p, x, y, n);
  else
    nr_f32_vunary__portable(&p, x, y, n);
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = f(x[i]), e = fabs(y[i] - r) / fmax(fabs(r), floor_abs);
    worst = e > worst ? e : worst;
  }
  free(x);
  free(y);
  return worst;
}

/* Documented in docs/kernels-eltwise-norm.md; keep both in step. */
NR_TEST(cpu_eltwise_math_bounds) {
  static const struct {
    const char *name;
    nr_ewu_op op;
    ref_fn f;
    double lo, hi, floor_abs, acc_bound, fast_bound;
  } fns[] = {
      {"exp", NR_EWU_EXP, exp, -88, 88, FLT_MIN, 2e-7, 7e-6},
      {"tanh", NR_EWU_TANH, tanh, -20, 20, FLT_MIN, 2e-7, 9e-6},
      {"sigmoid", NR_EWU_SIGMOID, sig_d, -20, 20, FLT_MIN, 3e-7, 7e-6},
      {"erf", NR_EWU_ERF, erf, -20, 20, FLT_MIN, 4e-7, 5e-7},
      /* GELU: relative to max(|y|, 1); 1 + erf cancels for x << 0 */
      {"gelu", NR_EWU_GELU, gelu_d, -20, 20, 1.0, 1.5e-6, 1.5e-6},
  };
  bool verbose = getenv("NR_TEST_VERBOSE") != NULL;
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    for (int isa = 0; isa < 2; isa++) {
      if (isa == 0 && !(nr_cpu_isa() & NR_ISA_AVX2))
        continue;
      double acc = sweep(fns[k].op, NR_VMATH_ACCURATE, isa == 0, fns[k].f, fns[k].lo,
                         fns[k].hi, 2000001, fns[k].floor_abs);
      double fast = sweep(fns[k].op, NR_VMATH_FAST, isa == 0, fns[k].f, fns[k].lo,
                          fns[k].hi, 2000001, fns[k].floor_abs);
      if (verbose)
        printf("%-8s %-9s accurate %.3g fast %.3g\n", fns[k].name, ISAS[isa] + 2, acc, fast);
      CHECK(acc <= fns[k].acc_bound, "%s %s accurate: %.3g > %.3g", fns[k].name, ISAS[isa],
            acc, fns[k].acc_bound);
      CHECK(fast <= fns[k].fast_bound, "%s %s fast: %.3g > %.3g", fns[k].name, ISAS[isa],
            fast, fns[k].fast_bound);
    }
  }
  /* GELU tanh formula against exact GELU: max abs difference */
  double worst = 0;
  for (int i = 0; i <= 400000; i++) {
    float x = -20.0f + 40.0f * (float)i / 400000.0f;
    nr_ewu_params p = {.op = NR_EWU_GELU_TANH};
    float y;
    nr_f32_vunary__portable(&p, &x, &y, 1);
    double e = fabs(y - gelu_d(x));
    worst = e > worst ? e : worst;
  }
  if (verbose)
    printf("gelu_tanh vs gelu max abs %.3g\n", worst);
  CHECK(worst <= 5e-4, "gelu tanh formula: %.3g", worst);
}

/* ---- knob tables ---------------------------------------------------------------- */

/* The kernels' epilogue activation (act.h's nr_act_apply, AVX2 when available)
 * against the scalar reference nr_act_apply_ref: bit for bit (NaN rules included) for
 * the compare-based ones, within the vector math's measured bound for the others
 * (relative to max(|y|, 1)), on a sweep plus NaN, infinities and signed zeros, at
 * lengths that leave every tail size. */
NR_TEST(cpu_eltwise_act_epilogue) {
  static const struct {
    nr_act act;
    float a, b;
    double bound; /* 0: exact */
  } acts[] = {
      {NR_ACT_RELU, 0, 0, 0},          {NR_ACT_CLIP, -1.5f, 2.5f, 0},
      {NR_ACT_LEAKY_RELU, 0.1f, 0, 0}, {NR_ACT_HARD_SIGMOID, 0.2f, 0.5f, 0},
      {NR_ACT_HARD_SWISH, 0, 0, 0},    {NR_ACT_SIGMOID, 0, 0, 4e-7},
      {NR_ACT_TANH, 0, 0, 3e-7},       {NR_ACT_SILU, 0, 0, 5e-7},
      {NR_ACT_GELU, 0, 0, 1.5e-6},     {NR_ACT_GELU_TANH, 0, 0, 1e-6},
  };
  enum { N = 20003 };
  float *x = malloc(sizeof(float) * N), *want = malloc(sizeof(float) * N),
        *got = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++)
    x[i] = -25.0f + 50.0f * (float)i / (float)(N - 1);
  x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 0.0f, x[4] = -0.0f, x[5] = -NAN;
  for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
    for (int len = N - 7; len <= N; len++) {
      memcpy(want, x, sizeof(float) * (size_t)len);
      memcpy(got, x, sizeof(float) * (size_t)len);
      nr_act_apply_ref(acts[k].act, acts[k].a, acts[k].b, want, len);
      nr_act_apply(acts[k].act, acts[k].a, acts[k].b, got, len);
      double worst = 0;
      int bad = -1;
      for (int i = 0; i < len; i++) {
        if (isnan(want[i]) || isnan(got[i])) {
          if (isnan(want[i]) != isnan(got[i]))
            bad = i;
          continue;
        }
        if (acts[k].bound == 0) {
          if (memcmp(&want[i], &got[i], sizeof(float)))
            bad = i;
          continue;
        }
        double e = fabs((double)got[i] - want[i]) / fmax(fabs((double)want[i]), 1.0);
        worst = e > worst ? e : worst;
      }
      CHECK(bad < 0, "%s len %d: x=%g ref %g got %g", nr_act_name(acts[k].act), len,
            bad < 0 ? 0.0 : x[bad], bad < 0 ? 0.0 : want[bad], bad < 0 ? 0.0 : got[bad]);
      CHECK(worst <= acts[k].bound, "%s len %d: error %.3g > %.3g", nr_act_name(acts[k].act),
            len, worst, acts[k].bound);
    }
  }
  free(x), free(want), free(got);
}

NR_TEST(cpu_eltwise_knobs_apply) {
  int64_t n = 4;
  float x[4] = {0};
  nr_value v = cpuop_fval(1, &n, x);
  const nr_value *ins[] = {&v};
  cpuop o;
  REQUIRE(!cpuop_init(&o, "Relu", 14, 0, NULL, 1, ins, NULL, 1, &v, ""));
  CHECK(nr_knob_space_find(&o.space, "eltwise.tactic@n0") >= 0);
  CHECK(nr_knob_space_find(&o.space, "eltwise.math") < 0, "Relu uses no exp");
  CHECK(nr_knob_space_find(&o.space, "gelu.approx@n0") < 0);
  cpuop_free(&o);
  REQUIRE(!cpuop_init(&o, "Gelu", 20, 0, NULL, 1, ins, NULL, 1, &v, ""));
  CHECK(nr_knob_space_find(&o.space, "eltwise.math") >= 0);
  CHECK(nr_knob_space_find(&o.space, "gelu.approx@n0") >= 0);
  CHECK(nr_knob_space_find(&o.space, "reduce.reassoc") < 0);
  cpuop_free(&o);
}

/* eltwise.threads=1: the step records one thread and still matches the reference; a
 * tensor below two parallel chunks does not list the knob (it would change nothing). */
NR_TEST(cpu_eltwise_threads_knob) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int64_t big[1] = {70000}, small[1] = {1000};
  unsigned seed = 7;
  float *x = nr_rng_floats_u32(big[0], &seed, -3, 3);
  for (int k = 0; k < 2; k++) {
    nr_value v = cpuop_fval(1, k ? small : big, x);
    const nr_value *ins[] = {&v};
    cpuop *o = cpuop_new();
    nr_status st = cpuop_init(o, "Relu", 14, 0, NULL, 1, ins, NULL, 1, &v,
                              "-eltwise.threads@n0=1");
    if (k) {
      CHECK(st, "eltwise.threads must not be listed for %lld elements", (long long)small[0]);
    } else {
      REQUIRE(!st, "%s", o->err.message);
      REQUIRE(cpuop_supports(o, "nr_f32_vrelu__portable"));
      bool g;
      nr_value ref[1];
      CHECK(!cpuop_run(o, pool, &g) && g);
      CHECK(o->step.threads == 1, "step->threads = %d", o->step.threads);
      REQUIRE(!cpuop_ref(o, 0, NULL, ref));
      CHECK(cpuop_err(cpuop_out(o, 0), ref[0].data, big[0], 0, 0) <= 1.0);
      nr_value_free(&ref[0]);
    }
    cpuop_free(o);
    free(o);
  }
  free(x);
  nr_threadpool_destroy(pool);
}

/* ---- listing on whole graphs ------------------------------------------------------ */

static int lg_tensor(nr_graph *g, const char *name, unsigned flags, int rank,
                     const int64_t *dims) {
  int t = nr_graph_add_tensor(g, name, flags);
  nr_value *v = &g->tensors[t].value;
  v->dtype = NR_DTYPE_FLOAT;
  v->rank = rank;
  memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  if (flags & NR_TENSOR_CONST) {
    nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL);
    for (int64_t i = 0; i < nr_value_count(v); i++)
      ((float *)v->data)[i] = 0.01f * (float)(i % 17) - 0.08f;
  }
  if (flags & NR_TENSOR_INPUT) {
    g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
    g->inputs[g->n_inputs++] = t;
  }
  return t;
}

/* X -> Conv -> Relu -> Y1 (the Relu is fused by fuse.conv_act by default), and
 * X -> Relu -> Y2 (a standalone Relu on a graph input). */
static nr_graph *conv_relu_graph(void) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  g->ir_version = 8;
  int64_t xd[4] = {1, 4, 128, 128}, wd[4] = {4, 4, 1, 1};
  int x = lg_tensor(g, "x", NR_TENSOR_INPUT, 4, xd), w = lg_tensor(g, "w", NR_TENSOR_CONST, 4, wd);
  int c = nr_graph_add_tensor(g, "c", 0), y1 = nr_graph_add_tensor(g, "y1", 0),
      y2 = nr_graph_add_tensor(g, "y2", 0);
  int cin[2] = {x, w};
  nr_pu_add_node(g, "conv", "Conv", "", 2, cin, 1, &c);
  nr_pu_add_node(g, "fused_relu", "Relu", "", 1, &c, 1, &y1);
  nr_pu_add_node(g, "lone_relu", "Relu", "", 1, &x, 1, &y2);
  g->outputs = malloc(2 * sizeof(int));
  g->outputs[0] = y1, g->outputs[1] = y2;
  g->n_outputs = 2;
  g->tensors[y1].flags |= NR_TENSOR_OUTPUT;
  g->tensors[y2].flags |= NR_TENSOR_OUTPUT;
  nr_error err = {0};
  if (nr_graph_toposort(g, &err) || nr_graph_bind_ops(g, &err) || nr_graph_infer(g, &err) ||
      nr_compiler_name_nodes(g, &err)) {
    nr_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* Conv (6 output channels) -> Clip(min 1) with the fusion off: bounds that exclude 0
 * would write 1 into the padding channels of a blocked input, so the Clip step runs on
 * a PLAIN input (the layout pass reorders), and the engine matches the reference. */
NR_TEST(cpu_eltwise_clip_off_zero_stays_plain) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 5, 12, 12}, wd[4] = {6, 5, 3, 3}, one = 1;
  int x = lg_tensor(g, "x", NR_TENSOR_INPUT, 4, xd), w = lg_tensor(g, "w", NR_TENSOR_CONST, 4, wd);
  int lo = lg_tensor(g, "lo", NR_TENSOR_CONST, 0, &one);
  ((float *)g->tensors[lo].value.data)[0] = 1.0f;
  nr_value xin = {0};
  nr_value_alloc(&xin, NR_DTYPE_FLOAT, 4, xd, NULL);
  for (int64_t i = 0; i < nr_value_count(&xin); i++) /* conv outputs around 1 */
    ((float *)xin.data)[i] = (float)((i * 37) % 101) / 20.0f - 2.0f;
  int c = nr_graph_add_tensor(g, "c", 0), y = nr_graph_add_tensor(g, "y", 0);
  nr_pu_add_node(g, "conv", "Conv", "", 2, (int[]){x, w}, 1, &c);
  nr_pu_add_node(g, "clip", "Clip", "", 2, (int[]){c, lo}, 1, &y);
  g->outputs = malloc(sizeof(int));
  g->outputs[0] = y, g->n_outputs = 1;
  g->tensors[y].flags |= NR_TENSOR_OUTPUT;
  nr_error err = {0};
  REQUIRE(!nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
              !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err),
          "%s", err.message);
  tg_built b;
  REQUIRE(!tg_compile(g, "-fuse.conv_act=none", 1, NULL, &b, &err), "%s", err.message);
  int k = 0;
  while (k < b.plan->n_steps && !(b.plan->steps[k].tactic->op_type &&
                                  !strcmp(b.plan->steps[k].tactic->op_type, "Clip")))
    k++;
  REQUIRE(k < b.plan->n_steps, "no Clip step");
  const nr_step *st = &b.plan->steps[k];
  CHECK(b.plan->slots[st->in[0]].layout == NR_LAYOUT_PLAIN,
        "Clip(min 1) on %s reads a %s input", st->tactic->id,
        nr_layout_name(b.plan->slots[st->in[0]].layout));
  nr_value want = {0};
  nr_value *xv = &xin;
  REQUIRE(!nr_ref_exec(g, xv, &want, &err), "%s", err.message);
  nr_engine e = {.plan = b.plan, .threads = 1};
  nr_context *ctx = NULL;
  nr_buffer bin = {NR_DTYPE_FLOAT, 4, {1, 5, 12, 12}, xv->data}, out = {0};
  CHECK(!nr_context_create(&e, 1, &ctx, &err) && !nr_context_run(ctx, &bin, &out, &err),
        "%s", err.message);
  CHECK(out.data && cpuop_err(out.data, want.data, nr_value_count(&want), 1e-5, 1e-5) <= 1,
        "engine differs from the reference");
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  nr_value_free(&want);
  nr_value_free(&xin);
  tg_built_free(&b);
  nr_graph_destroy(g);
}

NR_TEST(cpu_eltwise_listing_skips_fused_nodes) {
  nr_graph *g = conv_relu_graph();
  REQUIRE(g, "building the graph");
  nr_knob_space s;
  nr_error err = {0};
  REQUIRE(!nr_knob_space_build(g, &s, &err), "%s", err.message);
  CHECK(nr_knob_space_find(&s, "eltwise.tactic@fused_relu") < 0,
        "a Relu fuse.conv_act absorbs must not be listed");
  CHECK(nr_knob_space_find(&s, "eltwise.threads@fused_relu") < 0);
  CHECK(nr_knob_space_find(&s, "eltwise.tactic@lone_relu") >= 0, "standalone Relu listed");
  CHECK(nr_knob_space_find(&s, "eltwise.threads@lone_relu") >= 0, "65536 elements: listed");
  CHECK(nr_knob_space_find(&s, "fuse.conv_act@conv") >= 0, "the fusion that absorbs it");
  nr_knob_space_free(&s);
  nr_graph_destroy(g);
}
