/* test_nhwc_tactics.c - the NHWC tactics that keep a channels-last chain free of
 * reorders (tactics_pool_nhwc.c, tactics_copy_nhwc.c, the _nhwc rows of
 * tactics_eltwise.c) and the layout prediction they select by (nr_layout_predict).
 *
 *   kernels: the NHWC MaxPool / AveragePool kernels (portable and AVX2) against the
 *     reference executor's operators on shapes around the 8- and 32-channel vector
 *     tiles (1 to 65 channels), kernels 1x1 to 3x3, strides 1 to 3, dilation 2,
 *     asymmetric pads, ceil_mode, count_include_pad, NaN taps (single, and whole
 *     windows), output rows split across two calls, guard floats after the output;
 *     max bit-exact, average within float summation error. GlobalAveragePool bit-exact
 *     (reassoc off) or within 1e-6 (on), on channel sub-ranges as the tactic runs them.
 *   prediction: hand-built plans, NHWC producer -> ANY step -> consumer; graph inputs;
 *     a Split piece; layout.propagate=off; a follower's supports() on such plans.
 *   split / concat steps run directly, with NHWC and PLAIN pieces, round trip.
 *   through the compiler: one graph with every NHWC tactic (MaxPool, Sigmoid, Split,
 *     Relu, Exp, Div, Concat, BatchNormalization, AveragePool, GlobalAveragePool,
 *     HardSigmoid, a squeeze-excitation Mul) between convs, built with
 *     conv.layout=nhwc: exactly two reorders (graph input and output), each NHWC row
 *     chosen, the result against the reference executor; with layout.propagate=off
 *     none of the rows is chosen and the result is the same; the default (PLAIN)
 *     route never picks them; and the same graph at precision int8 (oneDNN convs)
 *     keeps its chain with two reorders and agrees with the PLAIN-follower int8
 *     build. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "graph_build.h"
#include "kernels/cpu/norm/pool_nhwc.h"
#include "kernels/ref/executor.h"
#include "plan/quant.h"
#include "op_test.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16
static const float SENTINEL = 4321.125f;

/* ---- NHWC pooling kernels --------------------------------------------------------- */

typedef struct pcase {
  int64_t n, c, h, w;
  int64_t kh, kw, sh, sw, d;
  int64_t pads[4]; /* top, left, bottom, right */
  int ceil, count_pad;
} pcase;

static const pcase pcases[] = {
    {1, 64, 12, 12, 3, 3, 2, 2, 1, {1, 1, 1, 1}, 0, 0}, /* resnet's stem pool */
    {2, 1, 7, 9, 3, 3, 2, 2, 1, {1, 1, 1, 1}, 0, 1},
    {1, 7, 8, 8, 2, 2, 2, 2, 1, {0, 0, 0, 0}, 0, 0},
    {1, 8, 9, 7, 3, 2, 1, 2, 1, {1, 0, 0, 1}, 1, 0},
    {2, 9, 10, 11, 3, 3, 3, 2, 1, {0, 1, 2, 0}, 1, 1},
    {1, 31, 6, 6, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0, 0},
    {1, 32, 7, 7, 3, 3, 1, 1, 2, {2, 2, 2, 2}, 0, 1},
    {1, 33, 11, 5, 2, 3, 2, 1, 1, {1, 1, 1, 1}, 1, 0},
    {1, 40, 5, 5, 5, 5, 1, 1, 1, {2, 2, 2, 2}, 0, 0},
    {3, 65, 4, 6, 3, 3, 2, 2, 1, {1, 1, 1, 1}, 1, 1},
};

/* [n, c, p] <-> [n, p, c] */
static void to_nhwc(const float *x, float *y, int64_t n, int64_t c, int64_t hw) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < c; k++)
      for (int64_t p = 0; p < hw; p++)
        y[(i * hw + p) * c + k] = x[(i * c + k) * hw + p];
}

static bool same_float(float a, float b) {
  return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

/* One case, one kind (0 max, 1 average), one kernel; NaN taps when nan. */
static void pool_case_run(nr_test_state *t, const pcase *k, int kind, bool avx2, bool nan,
                          unsigned seed) {
  const char *op = kind ? "AveragePool" : "MaxPool";
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, hw = k->h * k->w, xn = k->n * k->c * hw;
  nr_rng rng = nr_rng_make(seed);
  float *x = malloc(sizeof(float) * (size_t)xn), *xh = malloc(sizeof(float) * (size_t)xn);
  for (int64_t i = 0; i < xn; i++)
    x[i] = (float)nr_rng_int(&rng, 0, 20000) / 1000.0f - 10.0f;
  if (nan) { /* scattered NaNs, and a whole 3x3 corner of channel 0 */
    for (int64_t i = 0; i < xn; i += 7)
      x[i] = NAN;
    for (int64_t i = 0; i < 3 && i < k->h; i++)
      for (int64_t j = 0; j < 3 && j < k->w; j++)
        x[i * k->w + j] = NAN;
  }
  to_nhwc(x, xh, k->n, k->c, hw);
  int64_t kern[2] = {k->kh, k->kw}, st[2] = {k->sh, k->sw}, dl[2] = {k->d, k->d};
  nr_attr at[6] = {attr_ints("kernel_shape", 2, kern), attr_ints("strides", 2, st),
                   attr_ints("pads", 4, k->pads), attr_i("ceil_mode", k->ceil),
                   attr_ints("dilations", 2, dl), attr_i("count_include_pad", k->count_pad)};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x), want = {0};
  nr_error err = {0};
  nr_status rs = run_one(op, 19, kind ? 6 : 5, at, 1, (const nr_value *[]){&xv}, &want, &err);
  CHECK(rs == NR_OK, "%s reference, seed %u: %s", op, seed, err.message);
  nr_node node = {.name = "pool", .op_type = (char *)op, .domain = "", .opset = 19,
                  .n_attrs = kind ? 6 : 5, .attrs = at};
  nr_pool2d p;
  bool ok = !rs && nr_pool2d_of_node(&node, xd, want.dims, &p);
  CHECK(ok, "%s seed %u: window not resolved", op, seed);
  if (ok) {
    nr_pool_nhwc_geom g = {k->h, k->w, k->c, want.dims[2], want.dims[3]};
    int64_t per = g.oh * g.ow * g.c, yn = k->n * per;
    float *y = malloc(sizeof(float) * (size_t)(yn + GUARD));
    for (int64_t i = 0; i < yn + GUARD; i++)
      y[i] = SENTINEL;
    for (int64_t i = 0; i < k->n; i++) { /* rows in two calls: [0, mid) and [mid, oh) */
      int64_t mid = g.oh / 2;
      for (int half = 0; half < 2; half++)
        (avx2 ? nr_f32_pool2d_nhwc__avx2 : nr_f32_pool2d_nhwc__portable)(
            &p, &g, xh + i * hw * k->c, y + i * per, half ? mid : 0, half ? g.oh : mid);
    }
    const float *wd = want.data;
    int64_t bad = -1, ohw = g.oh * g.ow;
    for (int64_t i = 0; i < k->n && bad < 0; i++)
      for (int64_t c = 0; c < k->c && bad < 0; c++)
        for (int64_t q = 0; q < ohw && bad < 0; q++) {
          float got = y[(i * ohw + q) * k->c + c], w = wd[(i * k->c + c) * ohw + q];
          bool good = kind ? (isnan(w) ? isnan(got) : fabsf(got - w) <= 1e-5f * (1 + fabsf(w)))
                           : same_float(got, w);
          if (!good)
            bad = (i * k->c + c) * ohw + q;
        }
    CHECK(bad < 0, "%s %s%s seed %u: y[%lld] (NCHW index) = %g, want %g", op,
          avx2 ? "avx2" : "portable", nan ? " with NaN" : "", seed, (long long)bad,
          bad >= 0 ? y[((bad / ohw / k->c) * ohw + bad % ohw) * k->c + bad / ohw % k->c] : 0,
          bad >= 0 ? wd[bad] : 0);
    bool guard = true;
    for (int64_t i = yn; i < yn + GUARD; i++)
      guard &= y[i] == SENTINEL;
    CHECK(guard, "%s %s seed %u: guard overwritten", op, avx2 ? "avx2" : "portable", seed);
    free(y);
  }
  nr_value_free(&want);
  free(x), free(xh);
}

NR_TEST(nhwc_pool_kernels_match_reference) {
  for (int avx2 = 0; avx2 < 2; avx2++) {
    if (avx2 && !(nr_cpu_isa() & NR_ISA_AVX2))
      continue;
    for (size_t i = 0; i < sizeof pcases / sizeof pcases[0]; i++)
      for (int kind = 0; kind < 2; kind++)
        for (int nan = 0; nan < 2 - kind; nan++)
          pool_case_run(t, &pcases[i], kind, avx2, nan, 500u + 10u * (unsigned)i +
                                                            2u * (unsigned)kind + (unsigned)nan);
  }
}

NR_TEST(nhwc_gavgpool_kernels_match_reference) {
  static const int64_t cs[] = {1, 3, 8, 15, 16, 17, 31, 32, 33, 64, 100};
  static const int64_t hws[] = {1, 5, 49};
  for (int avx2 = 0; avx2 < 2; avx2++) {
    if (avx2 && !(nr_cpu_isa() & NR_ISA_AVX2))
      continue;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
      for (size_t hi = 0; hi < sizeof hws / sizeof hws[0]; hi++)
        for (int reassoc = 0; reassoc < 2; reassoc++) {
          unsigned seed = 900u + (unsigned)(ci * 7 + hi * 3) + (unsigned)reassoc;
          int64_t c = cs[ci], hw = hws[hi], xd[4] = {1, c, hw, 1};
          nr_rng rng = nr_rng_make(seed);
          float *x = malloc(sizeof(float) * (size_t)(c * hw)), *xh = malloc(sizeof(float) * (size_t)(c * hw));
          for (int64_t i = 0; i < c * hw; i++)
            x[i] = (float)nr_rng_int(&rng, 0, 200000) / 1000.0f - 100.0f;
          to_nhwc(x, xh, 1, c, hw);
          nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x), want = {0};
          nr_error err = {0};
          REQUIRE(run_one("GlobalAveragePool", 13, 0, NULL, 1, (const nr_value *[]){&xv},
                          &want, &err) == NR_OK, "%s", err.message);
          float y[100 + GUARD];
          for (int i = 0; i < 100 + GUARD; i++)
            y[i] = SENTINEL;
          /* as the tactic calls it: chunks of channels of a wider pixel row */
          for (int64_t c0 = 0; c0 < c; c0 += 40) {
            int64_t cn = c - c0 < 40 ? c - c0 : 40;
            (avx2 ? nr_f32_gavgpool_nhwc__avx2 : nr_f32_gavgpool_nhwc__portable)(
                xh + c0, hw, c, cn, reassoc, y + c0);
          }
          const float *w = want.data;
          int64_t bad = -1;
          for (int64_t i = 0; i < c && bad < 0; i++)
            if (reassoc ? fabsf(y[i] - w[i]) > 1e-6f * (1 + fabsf(w[i])) * 10 : !same_float(y[i], w[i]))
              bad = i;
          CHECK(bad < 0, "gavgpool %s reassoc %d c %lld hw %lld seed %u: y[%lld] = %.9g, "
                "want %.9g", avx2 ? "avx2" : "portable", reassoc, (long long)c, (long long)hw,
                seed, (long long)bad, bad >= 0 ? y[bad] : 0, bad >= 0 ? w[bad] : 0);
          CHECK(y[c] == SENTINEL, "gavgpool c %lld: wrote past the channels", (long long)c);
          nr_value_free(&want);
          free(x), free(xh);
        }
  }
}

/* ---- nr_layout_predict on hand-built plans ------------------------------------------ */

static nr_status none_run(const nr_exec_args *a) { return NR_OK; }
static const nr_tactic nhwc_t = {"test_nhwc", "", "Conv", "nnroute", "x", NR_LAYOUT_NHWC, 0, 0,
                                 NULL, NULL, none_run};
static const nr_tactic any_t = {"test_any", "", "Relu", "nnroute", "x", NR_LAYOUT_ANY, 0, 0,
                                NULL, NULL, none_run};

static void slot4(nr_slot *s, const char *name, nr_slot_kind kind, int64_t c) {
  memset(s, 0, sizeof *s);
  s->name = (char *)name;
  s->dtype = NR_DTYPE_FLOAT;
  s->rank = 4;
  s->dims[0] = 1, s->dims[1] = c, s->dims[2] = 4, s->dims[3] = 4;
  s->kind = kind;
}

NR_TEST(nhwc_layout_predict_follows_producers) {
  /* X(input) -> nhwc step -> A, B (B a channel piece) -> any(A) -> C; any(X) -> D */
  nr_slot slots[6];
  slot4(&slots[0], "X", NR_SLOT_INPUT, 3);
  slot4(&slots[1], "A", NR_SLOT_ARENA, 8);
  slot4(&slots[2], "B", NR_SLOT_ARENA, 5);
  slot4(&slots[3], "C", NR_SLOT_ARENA, 8);
  slot4(&slots[4], "D", NR_SLOT_ARENA, 3);
  slot4(&slots[5], "W", NR_SLOT_CONST, 8);
  nr_step steps[3] = {{.tactic = &nhwc_t, .node = 0, .n_in = 2, .n_out = 2, .in = {0, 5},
                       .out = {1, 2}},
                      {.tactic = &any_t, .node = 1, .n_in = 1, .n_out = 1, .in = {1}, .out = {3}},
                      {.tactic = &any_t, .node = 2, .n_in = 1, .n_out = 1, .in = {0}, .out = {4}}};
  nr_plan p = {.slots = slots, .n_slots = 6, .steps = steps, .n_steps = 3};
  CHECK(nr_layout_predict(&p, NULL, 0, 3) == NR_LAYOUT_PLAIN, "graph input");
  CHECK(nr_layout_predict(&p, NULL, 5, 3) == NR_LAYOUT_PLAIN, "constant");
  CHECK(nr_layout_predict(&p, NULL, 1, 3) == NR_LAYOUT_NHWC, "output 0 of an NHWC step");
  CHECK(nr_layout_predict(&p, NULL, 2, 3) == NR_LAYOUT_NHWC, "a channel piece of it");
  CHECK(nr_layout_predict(&p, NULL, 3, 3) == NR_LAYOUT_NHWC, "an ANY step after it");
  CHECK(nr_layout_predict(&p, NULL, 3, 1) == NR_LAYOUT_PLAIN, "not yet produced");
  CHECK(nr_layout_predict(&p, NULL, 4, 3) == NR_LAYOUT_PLAIN, "an ANY step after an input");
  slots[2].dims[2] = 2; /* no longer a piece: the layout pass leaves it PLAIN */
  CHECK(nr_layout_predict(&p, NULL, 2, 3) == NR_LAYOUT_PLAIN, "other dims differ");
  /* layout.propagate=off: the ANY step runs PLAIN */
  nr_knob_space space = {0};
  nr_route route = {0};
  nr_error err = {0};
  REQUIRE(!nr_knob_space_build(NULL, &space, &err) && !nr_route_init(&route, &space, &err) &&
              !nr_route_parse(&route, "-layout.propagate=off", &err),
          "%s", err.message);
  CHECK(nr_layout_predict(&p, &route, 3, 3) == NR_LAYOUT_PLAIN, "propagate off");
  CHECK(nr_layout_predict(&p, &route, 1, 3) == NR_LAYOUT_NHWC, "the NHWC step itself");
  nr_route_free(&route);
  nr_knob_space_free(&space);
}

/* supports() of a follower: yes after an NHWC producer, no after a PLAIN one, no with
 * layout.propagate=off, no on a probe step that is not in the plan. */
NR_TEST(nhwc_tactics_follow_only_nhwc_inputs) {
  static const nr_tactic plain_t = {"test_plain", "", "Conv", "nnroute", "x", NR_LAYOUT_PLAIN,
                                    0, 0, NULL, NULL, none_run};
  const nr_tactic *pool = nr_tactic_find("nr_f32_maxpool2d_nhwc__portable");
  REQUIRE(pool && pool->layout == NR_LAYOUT_NHWC);
  nr_slot slots[3];
  slot4(&slots[0], "X", NR_SLOT_INPUT, 8);
  slot4(&slots[1], "A", NR_SLOT_ARENA, 8);
  slot4(&slots[2], "Y", NR_SLOT_ARENA, 8);
  slots[2].dims[2] = slots[2].dims[3] = 2;
  nr_step steps[2] = {{.tactic = &nhwc_t, .node = 0, .n_in = 1, .n_out = 1, .in = {0}, .out = {1}},
                      {.tactic = NULL, .node = 1, .n_in = 1, .n_out = 1, .in = {1}, .out = {2}}};
  nr_plan p = {.slots = slots, .n_slots = 3, .steps = steps, .n_steps = 2};
  int64_t k2[2] = {2, 2};
  nr_attr at[2] = {attr_ints("kernel_shape", 2, k2), attr_ints("strides", 2, k2)};
  nr_node node = {.name = "pool", .op_type = "MaxPool", .domain = "", .opset = 13,
                  .n_attrs = 2, .attrs = at};
  nr_error err = {0};
  nr_tactic_ctx c = {.plan = &p, .node = &node, .step = &steps[1], .err = &err};
  CHECK(pool->supports(&c), "after an NHWC producer");
  steps[0].tactic = &plain_t;
  CHECK(!pool->supports(&c), "after a PLAIN producer");
  steps[0].tactic = &nhwc_t;
  nr_step probe = steps[1];
  c.step = &probe;
  CHECK(!pool->supports(&c), "a step outside the plan");
  c.step = &steps[1];
  nr_knob_space space = {0};
  nr_route route = {0};
  REQUIRE(!nr_knob_space_build(NULL, &space, &err) && !nr_route_init(&route, &space, &err) &&
              !nr_route_parse(&route, "-layout.propagate=off", &err),
          "%s", err.message);
  c.route = &route;
  CHECK(!pool->supports(&c), "layout.propagate=off");
  nr_route_free(&route);
  nr_knob_space_free(&space);
}

/* nr_copy_split_nhwc / nr_copy_concat_nhwc run directly: an NHWC whole [2, 11, 3, 5]
 * and pieces of 4, 1 and 6 channels, the last one PLAIN (what profiling hands over
 * before the layout pass), round trip through split and concat; guard floats after
 * every buffer; a PLAIN whole is refused. */
NR_TEST(nhwc_split_concat_steps) {
  const nr_tactic *split = nr_tactic_find("nr_copy_split_nhwc");
  const nr_tactic *concat = nr_tactic_find("nr_copy_concat_nhwc");
  REQUIRE(split && concat);
  enum { N = 2, C = 11, H = 3, W = 5, HW = H * W };
  static const int64_t pc[3] = {4, 1, 6};
  nr_slot whole, pieces[3];
  slot4(&whole, "whole", NR_SLOT_ARENA, C);
  whole.dims[0] = N, whole.dims[2] = H, whole.dims[3] = W;
  whole.layout = NR_LAYOUT_NHWC;
  float *x = malloc(sizeof(float) * (N * C * HW + GUARD)), *back = malloc(sizeof(float) * (N * C * HW + GUARD));
  float *pd[3];
  void *outs[3];
  const nr_slot *ps[3];
  for (int i = 0; i < N * C * HW + GUARD; i++)
    x[i] = (float)i, back[i] = SENTINEL;
  for (int k = 0; k < 3; k++) {
    pieces[k] = whole;
    pieces[k].dims[1] = pc[k];
    pieces[k].layout = k == 2 ? NR_LAYOUT_PLAIN : NR_LAYOUT_NHWC;
    pd[k] = malloc(sizeof(float) * (size_t)(N * pc[k] * HW + GUARD));
    for (int i = 0; i < N * pc[k] * HW + GUARD; i++)
      pd[k][i] = SENTINEL;
    outs[k] = pd[k], ps[k] = &pieces[k];
  }
  nr_threadpool *pool = nr_threadpool_create(2);
  nr_error err = {0};
  nr_step st = {.tactic = split, .node = 0, .n_in = 1, .n_out = 3};
  void *ins[1] = {x};
  const nr_slot *wi[1] = {&whole};
  nr_exec_args a = {.step = &st, .in = ins, .out = outs, .in_slot = wi, .out_slot = ps,
                    .pool = pool, .err = &err};
  CHECK(split->run(&a) == NR_OK, "split: %s", err.message);
  int64_t wrong = 0, at = 0;
  for (int k = 0; k < 3; k++) {
    for (int64_t n = 0; n < N; n++)
      for (int64_t p = 0; p < HW; p++)
        for (int64_t c = 0; c < pc[k]; c++) {
          int64_t i = k == 2 ? (n * pc[k] + c) * HW + p : (n * HW + p) * pc[k] + c;
          wrong += pd[k][i] != x[(n * HW + p) * C + at + c];
        }
    for (int g = 0; g < GUARD; g++)
      wrong += pd[k][N * pc[k] * HW + g] != SENTINEL;
    at += pc[k];
  }
  CHECK(!wrong, "split: %lld wrong elements", (long long)wrong);
  nr_step sc = {.tactic = concat, .node = 0, .n_in = 3, .n_out = 1};
  void *cout[1] = {back};
  nr_exec_args b = {.step = &sc, .in = outs, .out = cout, .in_slot = ps, .out_slot = wi,
                    .pool = pool, .err = &err};
  CHECK(concat->run(&b) == NR_OK, "concat: %s", err.message);
  CHECK(!memcmp(back, x, sizeof(float) * N * C * HW), "concat(split(x)) != x");
  CHECK(back[N * C * HW] == SENTINEL, "concat: guard");
  whole.layout = NR_LAYOUT_PLAIN;
  CHECK(split->run(&a) != NR_OK && strstr(err.message, "not nhwc"), "a PLAIN whole: %s",
        err.message);
  nr_threadpool_destroy(pool);
  for (int k = 0; k < 3; k++)
    free(pd[k]);
  free(x), free(back);
}

/* ---- through the compiler --------------------------------------------------------- */

typedef struct gb {
  nr_graph *g;
  float *store[16];
  int n_store;
  nr_rng rng;
} gb;

static int tensor(gb *b, const char *name, unsigned flags, int rank, const int64_t *dims) {
  int t = nr_graph_add_tensor(b->g, name, flags);
  b->g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, rank, {0}, NULL, false};
  memcpy(b->g->tensors[t].value.dims, dims, sizeof(int64_t) * (size_t)rank);
  if (flags & NR_TENSOR_INPUT) {
    b->g->inputs = realloc(b->g->inputs, sizeof(int) * (size_t)(b->g->n_inputs + 1));
    b->g->inputs[b->g->n_inputs++] = t;
  }
  return t;
}

/* A constant of random values in [lo, hi]. */
static int constant(gb *b, const char *name, int rank, const int64_t *dims, float lo, float hi) {
  int t = tensor(b, name, NR_TENSOR_CONST, rank, dims);
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    v[i] = lo + (hi - lo) * (float)nr_rng_int(&b->rng, 0, 10000) / 10000.0f;
  b->store[b->n_store++] = v;
  b->g->tensors[t].value.data = v;
  return t;
}

static void node(gb *b, const char *name, const char *op, int n_in, const int *in, int n_out,
                 const int *out, int n_attrs, const nr_attr *attrs) {
  nr_node *n = nr_graph_add_node(b->g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
  n->inputs = malloc(sizeof(int) * (size_t)n_in);
  memcpy(n->inputs, in, sizeof(int) * (size_t)n_in);
  n->n_inputs = n_in;
  n->outputs = malloc(sizeof(int) * (size_t)n_out);
  memcpy(n->outputs, out, sizeof(int) * (size_t)n_out);
  n->n_outputs = n_out;
  n->attrs = calloc((size_t)n_attrs + 1, sizeof(nr_attr));
  for (int i = 0; i < n_attrs; i++)
    nr_attr_copy(&n->attrs[i], &attrs[i], NULL);
  n->n_attrs = n_attrs;
}

static int op1(gb *b, const char *name, const char *op, int n_in, const int *in, int n_attrs,
               const nr_attr *attrs) {
  char out[64];
  snprintf(out, sizeof out, "%s_out", name);
  int y = nr_graph_add_tensor(b->g, out, 0);
  node(b, name, op, n_in, in, 1, &y, n_attrs, attrs);
  return y;
}

static int conv(gb *b, const char *name, int x, int64_t c, int64_t m, int64_t k) {
  char w[64], bias[64];
  snprintf(w, sizeof w, "%s_w", name);
  snprintf(bias, sizeof bias, "%s_b", name);
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2};
  nr_attr at[1] = {attr_ints("pads", 4, pads)};
  float r = 1.0f / sqrtf((float)(c * k * k));
  int wt = constant(b, w, 4, (int64_t[]){m, c, k, k}, -r, r);
  int bt = constant(b, bias, 1, (int64_t[]){m}, -0.1f, 0.1f);
  return op1(b, name, "Conv", 3, (int[]){x, wt, bt}, 1, at);
}

/* x [2, 5, 13, 11] -> conv3x3 -> MaxPool 3x3/2 -> Sigmoid -> conv1x1 -> Split [9, 15]
 * -> (Relu | conv3x3 -> Exp) -> Div -> Concat(div, conv) -> BatchNormalization (not
 * after a conv: it stays a step) -> AveragePool 3x2 (ceil,
 * count_include_pad, asymmetric pads) -> GlobalAveragePool -> HardSigmoid ->
 * Mul(scale, pooled) -> conv1x1 -> y. */
static int build_graph(gb *b) {
  b->g = nr_graph_create(NULL);
  nr_graph *g = b->g;
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  b->rng = nr_rng_make(4242);
  int x = tensor(b, "x", NR_TENSOR_INPUT, 4, (int64_t[]){2, 5, 13, 11});
  int c1 = conv(b, "c1", x, 5, 16, 3);
  int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
  nr_attr mp[3] = {attr_ints("kernel_shape", 2, k3), attr_ints("strides", 2, s2),
                   attr_ints("pads", 4, p1)};
  int pool = op1(b, "maxpool", "MaxPool", 1, &c1, 3, mp);
  int sig = op1(b, "sigmoid", "Sigmoid", 1, &pool, 0, NULL);
  int c2 = conv(b, "c2", sig, 16, 24, 1);
  int64_t sizes[2] = {9, 15};
  int sz = tensor(b, "split_sizes", NR_TENSOR_CONST, 1, (int64_t[]){2});
  g->tensors[sz].value = (nr_value){NR_DTYPE_INT64, 1, {2}, malloc(sizeof sizes), true};
  memcpy(g->tensors[sz].value.data, sizes, sizeof sizes);
  int parts[2] = {nr_graph_add_tensor(g, "part_a", 0), nr_graph_add_tensor(g, "part_b", 0)};
  nr_attr ax1[1] = {attr_i("axis", 1)};
  node(b, "split", "Split", 2, (int[]){c2, sz}, 2, parts, 1, ax1);
  int relu = op1(b, "relu", "Relu", 1, &parts[0], 0, NULL);
  int c3 = conv(b, "c3", parts[1], 15, 9, 3);
  int ex = op1(b, "exp", "Exp", 1, &c3, 0, NULL);
  int dv = op1(b, "div", "Div", 2, (int[]){relu, ex}, 0, NULL);
  int cat = op1(b, "concat", "Concat", 2, (int[]){dv, c3}, 1, ax1);
  int64_t k32[2] = {3, 2}, s21[2] = {2, 1}, pa[4] = {1, 0, 0, 1};
  nr_attr ap[5] = {attr_ints("kernel_shape", 2, k32), attr_ints("strides", 2, s21),
                   attr_ints("pads", 4, pa), attr_i("ceil_mode", 1),
                   attr_i("count_include_pad", 1)};
  int bnp[4];
  static const char *const bn_names[4] = {"bn_scale", "bn_b", "bn_mean", "bn_var"};
  for (int i = 0; i < 4; i++)
    bnp[i] = constant(b, bn_names[i], 1, (int64_t[]){18}, i == 3 ? 0.2f : -0.5f, 1.5f);
  int bn = op1(b, "bn", "BatchNormalization", 5,
               (int[]){cat, bnp[0], bnp[1], bnp[2], bnp[3]}, 0, NULL);
  int avg = op1(b, "avgpool", "AveragePool", 1, &bn, 5, ap);
  int gap = op1(b, "gap", "GlobalAveragePool", 1, &avg, 0, NULL);
  int hs = op1(b, "hardsigmoid", "HardSigmoid", 1, &gap, 0, NULL);
  int mul = op1(b, "mul", "Mul", 2, (int[]){hs, avg}, 0, NULL);
  int y = conv(b, "c4", mul, 18, 7, 1);
  g->outputs = malloc(sizeof(int));
  g->outputs[g->n_outputs++] = y;
  g->tensors[y].flags |= NR_TENSOR_OUTPUT;
  return y;
}

static bool graph_ready(nr_test_state *t, gb *b) {
  nr_error err = {0};
  build_graph(b);
  bool ok = !nr_graph_toposort(b->g, &err) && !nr_graph_bind_ops(b->g, &err) &&
            !nr_graph_infer(b->g, &err) && !nr_compiler_name_nodes(b->g, &err);
  CHECK(ok, "test graph: %s", err.message);
  return ok;
}

static void gb_free(gb *b) {
  for (int i = 0; i < b->n_store; i++) {
    for (int k = 0; k < b->g->n_tensors; k++)
      if (b->g->tensors[k].value.data == b->store[i])
        b->g->tensors[k].value.data = NULL;
    free(b->store[i]);
  }
  nr_graph_destroy(b->g);
}

static nr_status observe(void *user, const nr_graph *g, int tn, const nr_value *v) {
  nr_error err = {0};
  if (v->dtype != NR_DTYPE_FLOAT || !v->data)
    return NR_OK;
  return nr_calib_observe(user, g->tensors[tn].name, v->data, (size_t)nr_value_count(v), &err);
}

static float *run_plan(nr_test_state *t, nr_plan *p, const nr_value *in, const char *what) {
  nr_engine e = {.plan = p, .threads = 2};
  nr_buffer bin = {NR_DTYPE_FLOAT, 4, {0}, in->data}, out = {0};
  memcpy(bin.dims, in->dims, sizeof(int64_t) * 4);
  nr_context *ctx = NULL;
  nr_error err = {0};
  bool ok = !nr_context_create(&e, 2, &ctx, &err) && !nr_context_run(ctx, &bin, &out, &err);
  CHECK(ok, "%s: %s", what, err.message);
  nr_context_destroy(ctx);
  return ok ? out.data : NULL;
}

static int count_reorders(const nr_plan *p) {
  int n = 0;
  for (int k = 0; k < p->n_steps; k++)
    n += p->steps[k].node < 0;
  return n;
}

static int count_nhwc_rows(const nr_plan *p) {
  int n = 0;
  for (int k = 0; k < p->n_steps; k++)
    n += p->steps[k].node >= 0 && strstr(p->steps[k].tactic->id, "_nhwc") != NULL;
  return n;
}

static bool has(const nr_plan *p, const char *stem) {
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].tactic && strstr(p->steps[k].tactic->id, stem))
      return true;
  return false;
}

/* Largest |a - b| / (1 + |b|) over n, and where. */
static double worst(const float *a, const float *b, int64_t n, int64_t *at) {
  double w = 0;
  *at = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
    if (!(d <= w)) /* NaN counts as worst */
      w = d, *at = i;
  }
  return w;
}

NR_TEST(nhwc_chain_through_compiler) {
  gb b = {0};
  REQUIRE(graph_ready(t, &b));
  unsigned s = 77;
  int64_t xd[4] = {2, 5, 13, 11}, xn = 2 * 5 * 13 * 11;
  float *x = random_floats(xn, &s);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, x), want = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec(b.g, &in, &want, &err) == NR_OK, "%s", err.message);
  int64_t yn = nr_value_count(&want), at;
  static const char *const rows[] = {"maxpool2d_nhwc", "vsigmoid_nhwc", "copy_split_nhwc",
                                     "vexp_nhwc", "vdiv_nhwc", "copy_concat_nhwc",
                                     "batchnorm_nhwc", "avgpool2d_nhwc", "gavgpool_nhwc",
                                     "vhardsigmoid_nhwc", "vmul_bcast_nhwc"};
  static const char *const routes[3] = {
      "-conv.layout@*=nhwc -eltwise.fuse@*=off",
      "-conv.layout@*=nhwc -eltwise.fuse@*=off -pool.tactic@*=ref -eltwise.tactic@*=ref",
      "-eltwise.fuse@*=off"};
  for (int r = 0; r < 3; r++) {
    tg_built bl;
    nr_status st = tg_compile(b.g, routes[r], 2, NULL, &bl, &err);
    CHECK(!st, "%s: %s", routes[r], err.message);
    if (!st) {
      int nh = count_nhwc_rows(bl.plan), nr = count_reorders(bl.plan);
      if (r == 0) {
        CHECK(nr == 2, "%s: %d reorders, want 2 (graph input and output)", routes[r], nr);
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
          CHECK(has(bl.plan, rows[i]), "%s: no %s step", routes[r], rows[i]);
        CHECK(has(bl.plan, "nr_f32_vrelu__"), "the ANY Relu row runs in the chain");
      } else if (r == 1) { /* the reference tactic (PLAIN) runs pools and elementwise */
        CHECK(!has(bl.plan, "pool2d_nhwc") && !has(bl.plan, "gavgpool_nhwc") &&
                  !has(bl.plan, "vexp_nhwc"), "%s: an NHWC row the knobs exclude", routes[r]);
        CHECK(has(bl.plan, "copy_split_nhwc"), "%s: Split follows its NHWC conv", routes[r]);
        CHECK(nr > 6, "%s: %d reorders", routes[r], nr);
      } else {
        CHECK(nh == 0, "%s: %d NHWC rows chosen, want none", routes[r], nh);
        CHECK(nr == 0, "%s: %d reorders", routes[r], nr);
      }
      float *got = run_plan(t, bl.plan, &in, routes[r]);
      double w = got ? worst(got, want.data, yn, &at) : 0;
      CHECK(!got || w < 1e-5, "%s: y[%lld] = %g, reference %g (rel %.3g)", routes[r],
            (long long)at, got ? got[at] : 0, ((float *)want.data)[at], w);
      free(got);
    }
    tg_built_free(&bl);
  }
  nr_value_free(&want);
  free(x);
  gb_free(&b);
}

/* The same graph with every conv at int8 (oneDNN, NHWC): the chain stays NHWC, and the
 * NHWC followers compute what the reference tactic does (PLAIN, in double) between the
 * same quantized convs. */
NR_TEST(nhwc_int8_chain_through_compiler) {
  gb b = {0};
  REQUIRE(graph_ready(t, &b));
  unsigned s = 99;
  int64_t xd[4] = {2, 5, 13, 11}, xn = 2 * 5 * 13 * 11;
  float *x = random_floats(xn, &s);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, x), want = {0};
  nr_error err = {0};
  nr_calib *cal = calloc(1, sizeof *cal);
  REQUIRE(nr_ref_exec_observed(b.g, &in, &want, observe, cal, &err) == NR_OK, "%s",
          err.message);
  cal->samples = 1;
  const char *base = "-precision@*=int8 -conv.algo@*=onednn -eltwise.fuse@*=off "
                     "-quant.calibration=minmax";
  char off[256];
  snprintf(off, sizeof off, "%s -pool.tactic@*=ref -eltwise.tactic@*=ref", base);
  tg_built a, p;
  nr_status sa = tg_compile(b.g, base, 2, cal, &a, &err);
  CHECK(!sa, "%s: %s", base, err.message);
  nr_status sp = tg_compile(b.g, off, 2, cal, &p, &err);
  CHECK(!sp, "%s: %s", off, err.message);
  if (!sa && !sp && has(a.plan, "onednn_conv_int8")) {
    CHECK(count_reorders(a.plan) == 2, "int8 chain: %d reorders, want 2",
          count_reorders(a.plan));
    CHECK(count_nhwc_rows(a.plan) >= 10, "int8 chain: %d NHWC rows",
          count_nhwc_rows(a.plan));
    CHECK(count_reorders(p.plan) > 6, "ref pools: %d reorders", count_reorders(p.plan));
    float *ya = run_plan(t, a.plan, &in, "int8 nhwc"), *yp = run_plan(t, p.plan, &in, "int8 plain");
    int64_t yn = nr_value_count(&want), at = 0;
    /* Average pooling sums in another order, so a value on a rounding edge of the next
     * conv's quantization may move by one step; the bound allows a few. */
    double w = ya && yp ? worst(ya, yp, yn, &at) : 0;
    CHECK(w < 5e-3, "int8: nhwc y[%lld] = %g, ref tactics %g (rel %.3g)", (long long)at,
          ya ? ya[at] : 0, yp ? yp[at] : 0, w);
    double wr = ya ? worst(ya, want.data, yn, &at) : 0;
    CHECK(wr < 2e-2, "int8 vs fp32 reference: y[%lld] = %g, want %g (rel %.3g)",
          (long long)at, ya ? ya[at] : 0, ((float *)want.data)[at], wr);
    free(ya), free(yp);
  }
  tg_built_free(&a);
  tg_built_free(&p);
  nr_calib_destroy(cal);
  nr_value_free(&want);
  free(x);
  gb_free(&b);
}
