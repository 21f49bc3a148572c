/* test_conv_taps.c - the pass conv_taps (taps.trim): Convs whose dilation reaches past
 * the image lose exactly the kernel taps that read only padding, and the engine still
 * computes what the reference executor computes; Convs where every tap can touch the
 * image, and grouped or depthwise Convs, are left alone and list no knob.
 *
 * Each case is one Conv (seeded weights and input) compiled along the default route
 * and along -taps.trim=off; the knob must be listed exactly where a tap can go, the
 * weight slot of the conv step must have the expected kernel, and both engines must
 * match the reference (the trimmed products were products with zeros, so the error
 * stays at the kernels' own rounding). */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "kernels/ref/executor.h"
#include "passes/pass_util.h"
#include "plan/knob.h"
#include "plan/tactic.h"
#include "cpuop.h"
#include "graph_build.h"
#include "rng.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

typedef struct taps_case {
  const char *what;
  int sp;                              /* spatial rank: 1 or 2 */
  int64_t c, m, size, k[2], s[2], d[2], pads[4]; /* pads in ONNX order */
  int64_t want_k[2];                   /* the kernel left after the pass */
  int64_t group;                       /* 0: 1 */
} taps_case;

static const taps_case cases[] = {
    {"3x3 dilation 12 on 10x10 (ASPP)", 2, 4, 3, 10, {3, 3}, {1, 1}, {12, 12},
     {12, 12, 12, 12}, {1, 1}},
    {"rows only: dilation 12 x 1", 2, 4, 5, 9, {3, 3}, {1, 1}, {12, 1}, {12, 1, 12, 1},
     {1, 3}},
    {"1-D k5 dilation 8 pad 16 on 12", 1, 3, 2, 12, {5, 0}, {1, 0}, {8, 0}, {16, 16, 0, 0},
     {3, 0}},
    {"stride 2 dilation 4: every tap touches", 2, 3, 4, 5, {3, 3}, {2, 2}, {4, 4},
     {4, 4, 4, 4}, {3, 3}},
    {"dilation 6 on 10: every tap touches", 2, 2, 2, 10, {3, 3}, {1, 1}, {6, 6},
     {6, 6, 6, 6}, {3, 3}},
    {"depthwise 5x5 pad 2 on 2x2: grouped convs are left alone", 2, 8, 8, 2, {5, 5},
     {1, 1}, {1, 1}, {2, 2, 2, 2}, {5, 5}, 8},
    {"grouped 3x3 dilation 12 (ASPP-like): left alone", 2, 4, 6, 10, {3, 3}, {1, 1},
     {12, 12}, {12, 12, 12, 12}, {3, 3}, 2},
};

static int64_t group_of(const taps_case *c) { return c->group ? c->group : 1; }

static nr_graph *case_graph(nr_test_state *t, const taps_case *c, float *w) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, c->c, c->size, c->size},
          wd[4] = {c->m, c->c / group_of(c), c->k[0], c->k[1]};
  int x = tg_input(g, "x", 2 + c->sp, xd);
  int wt = tg_borrowed(g, "w", 2 + c->sp, wd, w);
  nr_attr at[4] = {
      {.name = "strides", .type = NR_ATTR_INTS, .n = (size_t)c->sp, .ints = (int64_t *)c->s},
      {.name = "dilations", .type = NR_ATTR_INTS, .n = (size_t)c->sp, .ints = (int64_t *)c->d},
      {.name = "pads", .type = NR_ATTR_INTS, .n = (size_t)(2 * c->sp),
       .ints = (int64_t *)c->pads},
      {.name = "group", .type = NR_ATTR_INT, .i = group_of(c)}};
  int y = tg_node_attrs(g, "Conv", "conv", 2, (int[]){x, wt}, 4, at);
  return tg_finish(t, g, y) ? g : (nr_graph_destroy(g), NULL);
}

/* The kernel the plan's conv step reads: dims 2.. of its weight slot. */
static bool step_kernel(const nr_plan *p, int sp, int64_t *k) {
  for (int s = 0; s < p->n_steps; s++) {
    const nr_step *st = &p->steps[s];
    if (st->n_in < 2 || st->in[1] < 0 || !st->tactic || !st->tactic->op_type ||
        !strstr(st->tactic->op_type, "Conv"))
      continue;
    const nr_slot *w = &p->slots[st->in[1]];
    for (int a = 0; a < sp; a++)
      k[a] = w->dims[2 + a];
    return w->rank == 2 + sp;
  }
  return false;
}

static void run_engine(nr_test_state *t, const taps_case *c, nr_graph *g, const char *route,
                       const nr_value *x, const nr_value *want, bool trimmed) {
  nr_error err = {0};
  tg_built b;
  REQUIRE(!tg_compile(g, route, 1, NULL, &b, &err), "%s '%s': %s", c->what, route,
          err.message);
  int64_t k[2] = {0, 0};
  CHECK(step_kernel(b.plan, c->sp, k), "%s: no conv step", c->what);
  for (int a = 0; a < c->sp; a++) {
    int64_t expect = trimmed ? c->want_k[a] : c->k[a];
    CHECK(k[a] == expect, "%s '%s': kernel axis %d is %lld, want %lld", c->what, route, a,
          (long long)k[a], (long long)expect);
  }
  nr_engine e = {.plan = b.plan, .threads = 1};
  nr_context *ctx = NULL;
  nr_buffer in = {NR_DTYPE_FLOAT, x->rank, {0}, x->data}, out = {0};
  memcpy(in.dims, x->dims, sizeof in.dims);
  CHECK(!nr_context_create(&e, 1, &ctx, &err) && !nr_context_run(ctx, &in, &out, &err),
        "%s '%s': %s", c->what, route, err.message);
  double e_max = out.data ? cpuop_err(out.data, want->data, nr_value_count(want), 1e-5, 1e-5)
                          : 1e30;
  CHECK(e_max <= 1, "%s '%s': engine differs from the reference (%g)", c->what, route, e_max);
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  tg_built_free(&b);
}

NR_TEST(conv_taps_trim) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const taps_case *c = &cases[i];
    int64_t wn = c->m * (c->c / group_of(c)) * c->k[0] * (c->sp == 2 ? c->k[1] : 1);
    int64_t xd[4] = {1, c->c, c->size, c->size};
    nr_rng rng = nr_rng_make(900 + i);
    float *w = malloc(sizeof(float) * (size_t)wn);
    for (int64_t j = 0; j < wn; j++)
      w[j] = (float)nr_rng_int(&rng, -1000, 1000) / 1000.0f;
    nr_graph *g = case_graph(t, c, w);
    REQUIRE(g, "%s: graph", c->what);
    nr_value x = {0}, want = {0};
    nr_value_alloc(&x, NR_DTYPE_FLOAT, 2 + c->sp, xd, NULL);
    for (int64_t j = 0; j < nr_value_count(&x); j++)
      ((float *)x.data)[j] = (float)nr_rng_int(&rng, -1000, 1000) / 500.0f;
    nr_error err = {0};
    REQUIRE(!nr_ref_exec(g, &x, &want, &err), "%s: %s", c->what, err.message);
    bool trims = false;
    for (int a = 0; a < c->sp; a++)
      trims = trims || c->want_k[a] != c->k[a];
    nr_knob_space space = {0};
    REQUIRE(!nr_knob_space_build(g, &space, &err), "%s", err.message);
    CHECK((nr_knob_space_find(&space, "taps.trim@conv") >= 0) == trims,
          "%s: taps.trim listed %d, want %d", c->what,
          nr_knob_space_find(&space, "taps.trim@conv") >= 0, trims);
    nr_knob_space_free(&space);
    run_engine(t, c, g, "", &x, &want, trims);
    if (trims)
      run_engine(t, c, g, "-taps.trim=off", &x, &want, false);
    nr_value_free(&x);
    nr_value_free(&want);
    nr_graph_destroy(g);
    free(w);
  }
}
