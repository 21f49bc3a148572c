/* test_cpu_norm.c - the normalization family's tactics (softmax, log-softmax,
 * LayerNormalization, GlobalAveragePool, 2-D pools) against the reference kernels,
 * over row lengths around the vector width and every value of their knobs. Uses the
 * one-step plan harness of cpuop.h (cpuop_*). */
#include "plan/knob_internal.h"
#include "plan/tactic.h"
#include "cpuop.h"
#include "kernels/cpu/norm/norm.h"
#include "kernels/ref/executor.h"
#include "util/threadpool.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const ISAS[] = {"__avx512", "__avx2", "__portable"};

/* Runs tactic stem+ISA on (ins) and compares each output with the reference. An
 * AVX-512 row may decline a node (the pool rows take some windows only): callers
 * that know which it takes check that themselves. */
static void check(nr_test_state *t, const char *op, const char *stem, int opset, int n_attrs,
                  const nr_attr *attrs, int n_in, const nr_value *const *ins, int n_out,
                  const nr_value *outs, const char *route, double atol, double rtol,
                  unsigned seed, nr_threadpool *pool, bool expect_support) {
  for (int k = 0; k < 3; k++) {
    char id[64];
    snprintf(id, sizeof id, "nr_f32_%s%s", stem, ISAS[k]);
    if (!nr_tactic_find(id))
      continue;
    cpuop *o = cpuop_new();
    REQUIRE(!cpuop_init(o, op, opset, n_attrs, attrs, n_in, ins, NULL, n_out, outs, route),
            "%s: route '%s'", id, route);
    bool sup = cpuop_supports(o, id);
    if (!sup) {
      CHECK(!expect_support || k == 0 || (k == 1 && !(nr_cpu_isa() & NR_ISA_AVX2)),
            "%s should support seed=%u", id, seed);
      cpuop_free(o);
      free(o);
      continue;
    }
    CHECK(expect_support, "%s should not support this node", id);
    bool g;
    nr_value ref[3];
    nr_status st = cpuop_run(o, pool, &g);
    CHECK(!st && g, "%s seed=%u: run %d guards %d", id, seed, st, g);
    REQUIRE(!cpuop_ref(o, n_attrs, attrs, ref));
    for (int i = 0; i < n_out; i++) {
      int64_t n = nr_value_count(&ref[i]);
      double e = cpuop_err(cpuop_out(o, i), ref[i].data, n, atol, rtol);
      CHECK(e <= 1.0, "%s output %d seed=%u route='%s': %.3g of tolerance", id, i, seed,
            route, e);
      nr_value_free(&ref[i]);
    }
    cpuop_free(o);
    free(o);
  }
}

static const int64_t ROWS[] = {1, 7, 8, 9, 31, 33, 1000};
static const char *const SOFT_ROUTES[] = {
    "", "-softmax.algo@n0=online", "-reduce.reassoc=on", "-eltwise.math=fast",
    "-softmax.algo@n0=online -reduce.reassoc=on"};

NR_TEST(cpu_norm_softmax) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (int r = 0; r < 7; r++) {
    for (int lg = 0; lg < 2; lg++) {
      unsigned seed = (unsigned)(r * 13 + lg), s0 = seed;
      int64_t dims[3] = {3, 5, ROWS[r]}, n = 15 * ROWS[r];
      float *x = nr_rng_floats_u32(n, &seed, -12, 12);
      nr_value xi = cpuop_fval(3, dims, x), y = cpuop_fval(3, dims, NULL);
      const nr_value *ins[] = {&xi};
      const char *op = lg ? "LogSoftmax" : "Softmax", *stem = lg ? "logsoftmax" : "softmax";
      for (int k = 0; k < 5; k++) {
        double rtol = k == 3 ? 2e-5 : 2e-6;
        check(t, op, stem, 13, 0, NULL, 1, ins, 1, &y, SOFT_ROUTES[k], 1e-6, rtol, s0,
              pool, true);
      }
      nr_attr ax[] = {{.name = "axis", .type = NR_ATTR_INT, .i = 1}};
      check(t, op, stem, 13, 1, ax, 1, ins, 1, &y, "", 1e-6, 2e-6, s0, pool, false);
      check(t, op, stem, 11, 0, NULL, 1, ins, 1, &y, "", 1e-6, 2e-6, s0, pool, false);
      nr_attr ax2[] = {{.name = "axis", .type = NR_ATTR_INT, .i = 2}};
      check(t, op, stem, 11, 1, ax2, 1, ins, 1, &y, "", 1e-6, 2e-6, s0, pool, true);
      free(x);
    }
  }
  int64_t big[2] = {70, 1000}; /* the parallel path */
  unsigned seed = 3;
  float *x = nr_rng_floats_u32(70000, &seed, -5, 5);
  nr_value xi = cpuop_fval(2, big, x), y = cpuop_fval(2, big, NULL);
  const nr_value *ins[] = {&xi};
  check(t, "Softmax", "softmax", 13, 0, NULL, 1, ins, 1, &y, "", 1e-7, 2e-6, 3, pool, true);
  free(x);
  nr_threadpool_destroy(pool);
}

static const char *const LN_ROUTES[] = {"", "-layernorm.algo@n0=one_pass",
                                        "-reduce.reassoc=on",
                                        "-layernorm.algo@n0=one_pass -reduce.reassoc=on"};

NR_TEST(cpu_norm_layernorm) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (int r = 0; r < 7; r++) {
    unsigned seed = (unsigned)(r * 17), s0 = seed;
    int64_t n = ROWS[r], dims[3] = {2, 3, n}, rows = 6, mdims[3] = {2, 3, 1};
    float *x = nr_rng_floats_u32(rows * n, &seed, -3, 5), *sc = nr_rng_floats_u32(n, &seed, 0.5f, 2),
          *b = nr_rng_floats_u32(n, &seed, -1, 1);
    nr_value xi = cpuop_fval(3, dims, x), si = cpuop_fval(1, &n, sc), bi = cpuop_fval(1, &n, b);
    nr_value outs[3] = {cpuop_fval(3, dims, NULL), cpuop_fval(3, mdims, NULL), cpuop_fval(3, mdims, NULL)};
    const nr_value *ins[] = {&xi, &si, &bi}, *ins_nob[] = {&xi, &si, NULL};
    for (int k = 0; k < 4; k++) {
      check(t, "LayerNormalization", "layernorm", 17, 0, NULL, 3, ins, 3, outs, LN_ROUTES[k],
            2e-6, 2e-6, s0, pool, true);
      check(t, "LayerNormalization", "layernorm", 17, 0, NULL, 3, ins_nob, 1, outs,
            LN_ROUTES[k], 2e-6, 2e-6, s0, pool, true);
    }
    /* axis 1: normalized over [3, n] with a [3, n] scale */
    int64_t sd[2] = {3, n};
    float *sc2 = nr_rng_floats_u32(3 * n, &seed, 0.5f, 2);
    nr_value s2 = cpuop_fval(2, sd, sc2), m1 = cpuop_fval(3, (int64_t[]){2, 1, 1}, NULL);
    nr_value outs2[3] = {outs[0], m1, m1};
    const nr_value *ins2[] = {&xi, &s2, NULL};
    nr_attr ax[] = {{.name = "axis", .type = NR_ATTR_INT, .i = 1}};
    check(t, "LayerNormalization", "layernorm", 17, 1, ax, 3, ins2, 3, outs2, "", 2e-6, 2e-6,
          s0, pool, true);
    free(x);
    free(sc);
    free(b);
    free(sc2);
  }
  nr_threadpool_destroy(pool);
}

/* More rows than NR_SEQ_ROWS (19 = 8 + 8 + 3): the side-by-side sequential sums give
 * every row the result it gets alone, bit for bit, and agree with the reference. */
NR_TEST(cpu_norm_layernorm_many_rows) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const int64_t NS[] = {1, 9, 256};
  for (int k = 0; k < 3; k++) {
    unsigned seed = (unsigned)(300 + k), s0 = seed;
    int64_t n = NS[k], rows = 19, dims[2] = {rows, n}, md[2] = {rows, 1};
    float *x = nr_rng_floats_u32(rows * n, &seed, -3, 5), *sc = nr_rng_floats_u32(n, &seed, 0.5f, 2),
          *b = nr_rng_floats_u32(n, &seed, -1, 1);
    nr_value xi = cpuop_fval(2, dims, x), si = cpuop_fval(1, &n, sc), bi = cpuop_fval(1, &n, b);
    nr_value outs[3] = {cpuop_fval(2, dims, NULL), cpuop_fval(2, md, NULL), cpuop_fval(2, md, NULL)};
    const nr_value *ins[] = {&xi, &si, &bi};
    for (int r = 0; r < 4; r++)
      check(t, "LayerNormalization", "layernorm", 17, 0, NULL, 3, ins, 3, outs,
            LN_ROUTES[r], 2e-6, 2e-6, s0, pool, true);
    for (int cfg = 0; cfg < 4; cfg++) {
      nr_layernorm_cfg c = {.one_pass = cfg & 1, .reassoc = (cfg & 2) != 0, .eps = 1e-5f};
      float *all = malloc(sizeof(float) * (size_t)(rows * n + 2 * rows)), *alone = malloc(
          sizeof(float) * (size_t)(rows * n + 2 * rows));
      for (int isa = 0; isa < 2; isa++) {
        if (isa == 0 && !(nr_cpu_isa() & NR_ISA_AVX2))
          continue;
        void (*f)(const nr_layernorm_cfg *, const float *, const float *, const float *,
                  float *, int64_t, int64_t, float *, float *) =
            isa ? nr_f32_layernorm_rows__portable : nr_f32_layernorm_rows__avx2;
        f(&c, x, sc, b, all, n, rows, all + rows * n, all + rows * n + rows);
        for (int64_t i = 0; i < rows; i++)
          f(&c, x + i * n, sc, b, alone + i * n, n, 1, alone + rows * n + i,
            alone + rows * n + rows + i);
        CHECK(!memcmp(all, alone, sizeof(float) * (size_t)(rows * n + 2 * rows)),
              "n=%lld cfg=%d isa=%d: rows together differ from rows alone", (long long)n, cfg,
              isa);
      }
      free(all);
      free(alone);
    }
    free(x);
    free(sc);
    free(b);
  }
  int64_t gd[4] = {2, 19, 3, 11}, god[4] = {2, 19, 1, 1};
  unsigned seed = 9;
  float *x = nr_rng_floats_u32(2 * 19 * 33, &seed, -2, 3);
  nr_value xi = cpuop_fval(4, gd, x), y = cpuop_fval(4, god, NULL);
  const nr_value *ins[] = {&xi};
  check(t, "GlobalAveragePool", "gavgpool", 1, 0, NULL, 1, ins, 1, &y, "", 1e-7, 1e-6, 9,
        pool, true);
  free(x);
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_norm_global_avgpool) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int64_t spatial[] = {1, 7, 8, 9, 33, 49, 1000};
  for (int s = 0; s < 7; s++) {
    unsigned seed = (unsigned)s;
    int64_t dims[4] = {2, 5, 1, spatial[s]}, od[4] = {2, 5, 1, 1};
    float *x = nr_rng_floats_u32(10 * spatial[s], &seed, -2, 3);
    nr_value xi = cpuop_fval(4, dims, x), y = cpuop_fval(4, od, NULL);
    const nr_value *ins[] = {&xi};
    check(t, "GlobalAveragePool", "gavgpool", 1, 0, NULL, 1, ins, 1, &y, "", 1e-7, 1e-6,
          (unsigned)s, pool, true);
    check(t, "GlobalAveragePool", "gavgpool", 1, 0, NULL, 1, ins, 1, &y,
          "-reduce.reassoc=on", 1e-6, 1e-5, (unsigned)s, pool, true);
    free(x);
  }
  /* Enough rows to split across the pool, in whole blocks of the side-by-side sums and
   * a partial last block (37 rows = 4 blocks of 8 and 5). */
  int64_t dims[4] = {1, 37, 30, 40}, od[4] = {1, 37, 1, 1};
  unsigned seed = 77;
  float *x = nr_rng_floats_u32(37 * 1200, &seed, -2, 3);
  nr_value xi = cpuop_fval(4, dims, x), y = cpuop_fval(4, od, NULL);
  const nr_value *ins[] = {&xi};
  check(t, "GlobalAveragePool", "gavgpool", 1, 0, NULL, 1, ins, 1, &y, "", 1e-7, 1e-6, 77,
        pool, true);
  free(x);
  nr_threadpool_destroy(pool);
}

/* ReduceMean over trailing axes runs the global pool's row means; other axes are not
 * its nodes. */
NR_TEST(cpu_norm_reduce_mean_tail) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const struct {
    int rank;
    int64_t dims[4], out[4];
    int out_rank, n_axes;
    int64_t axes[2], keep;
    bool supported;
  } cases[] = {
      {4, {1, 1024, 7, 7}, {1, 1024}, 2, 2, {2, 3}, 0, true},  /* shufflenet_v2's head */
      {4, {2, 5, 3, 11}, {2, 5, 1, 1}, 4, 2, {-1, 2}, 1, true},
      {3, {3, 4, 33}, {3, 4, 1}, 3, 1, {-1}, 1, true},
      {3, {2, 9, 17}, {2}, 1, 2, {1, 2}, 0, true},
      {4, {2, 5, 3, 11}, {2, 1, 3, 11}, 4, 1, {1}, 1, false},  /* not trailing */
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    unsigned seed = 77u + (unsigned)i;
    int64_t n = 1;
    for (int d = 0; d < cases[i].rank; d++)
      n *= cases[i].dims[d];
    float *x = nr_rng_floats_u32(n, &seed, -2, 3);
    nr_value xi = cpuop_fval(cases[i].rank, cases[i].dims, x);
    nr_value y = cpuop_fval(cases[i].out_rank, cases[i].out, NULL);
    const nr_value *ins[] = {&xi};
    nr_attr at[2] = {{.name = "axes", .type = NR_ATTR_INTS, .n = cases[i].n_axes,
                      .ints = (int64_t *)cases[i].axes},
                     {.name = "keepdims", .type = NR_ATTR_INT, .i = cases[i].keep}};
    check(t, "ReduceMean", "reduce_mean_tail", 13, 2, at, 1, ins, 1, &y, "", 1e-7, 1e-6,
          seed, pool, cases[i].supported);
    if (cases[i].supported)
      check(t, "ReduceMean", "reduce_mean_tail", 13, 2, at, 1, ins, 1, &y,
            "-reduce.reassoc=on", 1e-6, 1e-5, seed, pool, true);
    free(x);
  }
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_norm_pool2d) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const struct {
    int64_t k, s, d, pad, ceil, count_pad;
    const char *auto_pad;
  } cases[] = {
      {3, 2, 1, 1, 0, 0, NULL}, {2, 2, 1, 0, 0, 0, NULL}, {3, 1, 1, 1, 0, 1, NULL},
      {3, 2, 1, 0, 1, 0, NULL}, {3, 2, 2, 1, 0, 0, NULL}, {3, 2, 1, 0, 0, 1, "SAME_UPPER"},
      {7, 1, 1, 0, 0, 0, NULL}, {2, 3, 1, 1, 1, 1, NULL},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int h = 7; h <= 10; h++) { /* h = 10: a plane 37 or 38 wide (vector loops) */
      unsigned seed = (unsigned)(c * 10 + (size_t)h), s0 = seed;
      int64_t w = h == 10 ? 37 + (int64_t)(c & 1) : h + 2, dims[4] = {2, 3, h, w};
      float *x = nr_rng_floats_u32(6 * h * w, &seed, -4, 4);
      x[5] = NAN;
      int64_t ks[2] = {cases[c].k, cases[c].k}, st[2] = {cases[c].s, cases[c].s},
              dl[2] = {cases[c].d, cases[c].d},
              pd[4] = {cases[c].pad, cases[c].pad, cases[c].pad, cases[c].pad};
      nr_attr at[8] = {
          {.name = "kernel_shape", .type = NR_ATTR_INTS, .n = 2, .ints = ks},
          {.name = "strides", .type = NR_ATTR_INTS, .n = 2, .ints = st},
          {.name = "dilations", .type = NR_ATTR_INTS, .n = 2, .ints = dl},
          {.name = "ceil_mode", .type = NR_ATTR_INT, .i = cases[c].ceil},
          {.name = "count_include_pad", .type = NR_ATTR_INT, .i = cases[c].count_pad},
      };
      int na = 5;
      if (cases[c].auto_pad)
        at[na++] = (nr_attr){.name = "auto_pad", .type = NR_ATTR_STRING,
                             .s = (char *)cases[c].auto_pad,
                             .s_len = strlen(cases[c].auto_pad)};
      else
        at[na++] = (nr_attr){.name = "pads", .type = NR_ATTR_INTS, .n = 4, .ints = pd};
      nr_value xi = cpuop_fval(4, dims, x);
      const nr_value *ins[] = {&xi};
      for (int m = 0; m < 2; m++) {
        const char *op = m ? "MaxPool" : "AveragePool";
        nr_attr am[8]; /* MaxPool has no count_include_pad (attribute 4): drop it */
        int j = 0;
        for (int i = 0; i < na; i++)
          if (!m || i != 4)
            am[j++] = at[i];
        /* the output shape comes from the reference itself */
        nr_value ref;
        memset(&ref, 0, sizeof ref);
        nr_error err = {0};
        REQUIRE(!nr_ref_exec_node(op, "", m ? 12 : 19, j, am, 1, ins, 1, &ref, &err), "%s",
                err.message);
        nr_value y = cpuop_fval(4, ref.dims, NULL);
        nr_value_free(&ref);
        check(t, op, m ? "maxpool2d" : "avgpool2d", m ? 12 : 19, j, am, 1, ins, 1, &y, "",
              1e-7, 1e-6, s0, pool, true);
        /* the AVX-512 rows take 3-wide windows of dilation 1, stride 1 or 2, left
         * padding up to 2 (auto_pad SAME_UPPER pads 0 or 1 on the left here) */
        if (nr_cpu_isa() & NR_ISA_AVX512) {
          bool takes = cases[c].k == 3 && cases[c].d == 1 && cases[c].s <= 2;
          char id[64];
          snprintf(id, sizeof id, "nr_f32_%s__avx512", m ? "maxpool2d" : "avgpool2d");
          cpuop *o = cpuop_new();
          REQUIRE(!cpuop_init(o, op, m ? 12 : 19, j, am, 1, ins, NULL, 1, &y, ""));
          bool sup = cpuop_supports(o, id);
          CHECK(sup == takes, "%s: case %zu supported %d, want %d", id, c, sup, takes);
          cpuop_free(o);
          free(o);
        }
      }
      free(x);
    }
  }
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_norm_knobs_apply) {
  int64_t dims[2] = {2, 8};
  float x[16] = {0};
  nr_value v = cpuop_fval(2, dims, x);
  const nr_value *ins[] = {&v};
  cpuop *o = cpuop_new();
  REQUIRE(!cpuop_init(o, "Softmax", 13, 0, NULL, 1, ins, NULL, 1, &v,
                      "-softmax.algo@n0=online -reduce.reassoc=on -eltwise.math=fast"));
  cpuop_free(o);
  nr_attr ax[] = {{.name = "axis", .type = NR_ATTR_INT, .i = 0}};
  CHECK(cpuop_init(o, "Softmax", 13, 1, ax, 1, ins, NULL, 1, &v, "-softmax.algo@n0=online"),
        "softmax.algo must not apply off the last axis");
  cpuop_free(o);
  free(o);
}

/* pool.tactic is listed on a supported MaxPool; eltwise.threads only when the pool has
 * two parallel chunks of work, and with it the step runs on one thread and still
 * matches the reference. */
NR_TEST(cpu_norm_pool_knobs) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int64_t ks[2] = {3, 3}, pd[4] = {1, 1, 1, 1};
  nr_attr at[] = {{.name = "kernel_shape", .type = NR_ATTR_INTS, .n = 2, .ints = ks},
                  {.name = "pads", .type = NR_ATTR_INTS, .n = 4, .ints = pd}};
  int64_t big[4] = {1, 8, 64, 64}, small[4] = {1, 1, 8, 8};
  unsigned seed = 11;
  float *x = nr_rng_floats_u32(8 * 64 * 64, &seed, -2, 2);
  for (int k = 0; k < 2; k++) {
    nr_value v = cpuop_fval(4, k ? small : big, x);
    const nr_value *ins[] = {&v};
    cpuop *o = cpuop_new();
    CHECK(!cpuop_init(o, "MaxPool", 12, 2, at, 1, ins, NULL, 1, &v, "-pool.tactic@n0=ref"),
          "pool.tactic must be listed on a 2-D float MaxPool");
    cpuop_free(o);
    nr_status st = cpuop_init(o, "MaxPool", 12, 2, at, 1, ins, NULL, 1, &v,
                              "-eltwise.threads@n0=1");
    CHECK(k ? st != NR_OK : st == NR_OK, "eltwise.threads listed only for large pools");
    cpuop_free(o);
    free(o);
  }
  nr_value v = cpuop_fval(4, big, x);
  const nr_value *ins[] = {&v};
  check(t, "MaxPool", "maxpool2d", 12, 2, at, 1, ins, 1, &v, "-eltwise.threads@n0=1", 0, 0,
        seed, pool, true);
  free(x);
  nr_threadpool_destroy(pool);
}
