/* test_conv_sp512.c - nr_f32_conv_sp__avx512 (conv_sp__avx512.c), the AVX-512
 * small-plane convolution, against the reference executor's Conv (plus residual and
 * the scalar activation), and the tactic choice and knob around it on both ISAs.
 *
 * Shapes are built around the kernel's tiles: output planes from 1x1 to 16x16 (rows of
 * 1 to 7 pixels run two rows a tile, odd row counts end in a one-row tile; 8 to 14 one
 * chunk a row; 15 and 16 two chunks of 7-8), 7x7, 13x13 and 14x14 among them; output
 * channels below, at and above one and two 32-channel panels, and panels whose second
 * vector is empty or partial; input channels in one pass and in several (the pass size
 * forced down to 1, 5 and 16 channels by rewriting the step's record, as prepare()
 * would for a larger layer, so the partial-sum buffer is used); stride 1 and 2, pads 0
 * to 2 and asymmetric ones, dilation 2, 5x5 and 1x3 windows, two images; bias,
 * residual and every kind of activation (in-register ones and the ones applied after
 * the scatter). Buffers carry guard floats; failures print the seed. On a machine
 * without AVX-512 (or NNROUTE_ISA=avx2) the kernel is not run, and the tests check that
 * the small-plane nodes keep the tactics they had before the row existed. */
#include "compiler/knob.h"
#include "compiler/plan.h"
#include "compiler/route.h"
#include "kernels/act.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/ref/fused.h"
#include "op_test.h"
#include "runtime/threadpool.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

#define GUARD 48
static const float SENTINEL = -1234.5f;

typedef struct sp_case {
  int n, c, h, w, m;
  int k, kw;       /* window k x kw (kw 0: k x k) */
  int s, pad, dil; /* stride, pad (all sides), dilation (0: 1) */
  int pad_end;     /* extra pad at the bottom and right */
  bool bias, res;
  nr_act act;
} sp_case;

static int kwid(const sp_case *k) { return k->kw ? k->kw : k->k; }
static int dil(const sp_case *k) { return k->dil ? k->dil : 1; }
static int64_t out_dim(const sp_case *k, int in, int kern) {
  return (in + 2 * k->pad + k->pad_end - (int64_t)dil(k) * (kern - 1) - 1) / k->s + 1;
}
static int64_t oh_of(const sp_case *k) { return out_dim(k, k->h, k->k); }
static int64_t ow_of(const sp_case *k) { return out_dim(k, k->w, kwid(k)); }

static float *guarded(int64_t n) { return guarded_floats(n, GUARD, SENTINEL); }
static bool guard_ok(const float *p, int64_t n) { return guard_intact(p, n, GUARD, SENTINEL); }

static float act_a(nr_act a) { return a == NR_ACT_CLIP ? -0.25f : a == NR_ACT_LEAKY_RELU ? 0.1f : 0.2f; }
static float act_b(nr_act a) { return a == NR_ACT_CLIP ? 0.75f : 0.5f; }

/* The node's window attributes, shared by the reference and the step. */
typedef struct win_attrs {
  int64_t pads[4], st[2], dl[2];
  nr_attr at[3];
} win_attrs;
static void win_fill(win_attrs *wa, const sp_case *k) {
  wa->pads[0] = wa->pads[1] = k->pad;
  wa->pads[2] = wa->pads[3] = k->pad + k->pad_end;
  wa->st[0] = wa->st[1] = k->s;
  wa->dl[0] = wa->dl[1] = dil(k);
  wa->at[0] = attr_ints("pads", 4, wa->pads);
  wa->at[1] = attr_ints("strides", 2, wa->st);
  wa->at[2] = attr_ints("dilations", 2, wa->dl);
}

/* Y = act(Conv(X, W, B) + R) through the reference executor and nr_act_apply_ref. */
static bool reference(const sp_case *k, const float *x, const float *w, const float *b,
                      const float *r, float *y) {
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c, k->k, kwid(k)}, bd[1] = {k->m};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, xd, x), vw = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value vb = make_value(NR_DTYPE_FLOAT, 1, bd, b);
  const nr_value *ins[3] = {&vx, &vw, &vb};
  win_attrs wa;
  win_fill(&wa, k);
  nr_value out;
  nr_error err = {0};
  if (run_one("Conv", 13, 3, wa.at, k->bias ? 3 : 2, ins, &out, &err))
    return false;
  int64_t n = nr_value_count(&out);
  memcpy(y, out.data, sizeof(float) * (size_t)n);
  nr_value_free(&out);
  for (int64_t i = 0; r && i < n; i++)
    y[i] += r[i];
  nr_act_apply_ref(k->act, act_a(k->act), act_b(k->act), y, n);
  return true;
}

/* One FusedConv (or Conv) step over slots X, W, B, R, Y, built by hand. */
typedef struct harness {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[6];
  win_attrs wa;
} harness;

static void build(harness *hs, const sp_case *k, const float *w, const float *b, bool fused) {
  memset(hs, 0, sizeof *hs);
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c, k->k, kwid(k)};
  int64_t yd[4] = {k->n, k->m, oh_of(k), ow_of(k)};
  nr_slot *s = hs->slots;
  s[0] = (nr_slot){.name = "X", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[0].dims, xd, sizeof xd);
  s[1] = (nr_slot){.name = "W", .dtype = NR_DTYPE_FLOAT, .rank = 4, .kind = NR_SLOT_CONST};
  memcpy(s[1].dims, wd, sizeof wd);
  nr_plan_add_weights(&hs->plan, w, sizeof(float) * (size_t)(wd[0] * wd[1] * wd[2] * wd[3]),
                      &s[1].offset, NULL);
  s[2] = (nr_slot){.name = "B", .dtype = NR_DTYPE_FLOAT, .rank = 1, .kind = NR_SLOT_CONST};
  s[2].dims[0] = k->m;
  nr_plan_add_weights(&hs->plan, b, sizeof(float) * (size_t)k->m, &s[2].offset, NULL);
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[3].dims, yd, sizeof yd);
  s[4] = s[3];
  s[4].name = "Y";
  hs->plan.slots = s;
  hs->plan.n_slots = 5;
  win_fill(&hs->wa, k);
  int na = 0;
  for (int i = 0; i < 3; i++)
    hs->attrs[na++] = hs->wa.at[i];
  if (fused) {
    hs->attrs[na++] = attr_s("activation", nr_act_name(k->act));
    hs->attrs[na++] = attr_f("act_alpha", act_a(k->act));
    hs->attrs[na++] = attr_f("act_beta", act_b(k->act));
  }
  hs->node = (nr_node){.name = "sp", .op_type = fused ? "FusedConv" : "Conv",
                       .domain = fused ? NR_DOMAIN : "", .opset = fused ? 1 : 13,
                       .n_attrs = na, .attrs = hs->attrs};
  hs->step.n_in = fused ? 4 : 3;
  hs->step.n_out = 1;
  hs->step.in[0] = 0, hs->step.in[1] = 1, hs->step.in[2] = k->bias ? 2 : -1;
  hs->step.in[3] = fused && k->res ? 3 : -1;
  hs->step.out[0] = 4;
}

static const nr_tactic *row(const char *id, const char *op) {
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!strcmp(t->id, id) && !strcmp(t->op_type, op))
      return t;
  return NULL;
}

/* Runs the sp row's prepare() and run() on case k (kc > 0: that many input channels
 * per pass instead of prepare's choice) on `pool`, against the reference. */
static void run_case(nr_test_state *t, const sp_case *k, int kc, unsigned seed,
                     nr_threadpool *pool) {
  bool fused = k->res || k->act != NR_ACT_NONE;
  const nr_tactic *tac = row("nr_f32_conv_sp__avx512", fused ? "FusedConv" : "Conv");
  REQUIRE(tac, "no sp row");
  unsigned sd = seed;
  int64_t xn = (int64_t)k->n * k->c * k->h * k->w, yn = (int64_t)k->n * k->m * oh_of(k) * ow_of(k);
  int64_t wn = (int64_t)k->m * k->c * k->k * kwid(k);
  float *x = guarded(xn), *r = guarded(yn), *y = guarded(yn), *want = malloc(sizeof(float) * (size_t)yn);
  float *xv = random_floats(xn, &sd), *w = random_floats(wn, &sd);
  float *b = random_floats(k->m, &sd), *rv = random_floats(yn, &sd);
  memcpy(x, xv, sizeof(float) * (size_t)xn);
  memcpy(r, rv, sizeof(float) * (size_t)yn);
  harness hs;
  build(&hs, k, w, b, fused);
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
  float *scratch = NULL;
  REQUIRE(reference(k, xv, w, b, k->res ? rv : NULL, want), "reference failed, seed %u", seed);
  hs.step.tactic = tac;
  if (tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "prepare: %s, seed %u", err.message, seed);
    goto done;
  }
  conv_p *p = (conv_p *)(void *)hs.step.params;
  if (kc > 0) {
    p->gemm.kc = (uint16_t)kc;
    hs.step.scratch = nr_conv_sp_scratch(p, NR_CONV_MAX_THREADS);
  }
  int64_t sn = (int64_t)(hs.step.scratch / sizeof(float)) + 1;
  scratch = guarded(sn);
  void *in[4] = {x, hs.plan.weights + hs.slots[1].offset,
                 k->bias ? hs.plan.weights + hs.slots[2].offset : NULL, k->res ? r : NULL};
  void *out[1] = {y};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], k->bias ? &hs.slots[2] : NULL,
                           k->res ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args a = {&hs.plan, &hs.step, &hs.node, in, out, ins, outs,
                    hs.plan.weights + hs.step.packed_offset, scratch, pool, &err};
  CHECK(tac->run(&a) == NR_OK, "run failed, seed %u", seed);
  CHECK(guard_ok(y, yn) && guard_ok(x, xn) && guard_ok(r, yn) && guard_ok(scratch, sn),
        "wrote past a buffer (kc %u), seed %u", p->gemm.kc, seed);
  CHECK(!memcmp(x, xv, sizeof(float) * (size_t)xn) && !memcmp(r, rv, sizeof(float) * (size_t)yn),
        "changed an input, seed %u", seed);
  double tol = 2e-5 * ((double)k->c * k->k * kwid(k) / 4 + 4);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabs(y[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      bad = i;
  CHECK(bad < 0,
        "n%d c%d %dx%d m%d k%dx%d s%d pad%d+%d dil%d bias%d res%d act %s kc %u: y[%lld] = %g, "
        "want %g, seed %u",
        k->n, k->c, k->h, k->w, k->m, k->k, kwid(k), k->s, k->pad, k->pad_end, dil(k), k->bias,
        k->res, nr_act_name(k->act), p->gemm.kc, (long long)bad, bad >= 0 ? y[bad] : 0,
        bad >= 0 ? want[bad] : 0, seed);
done:
  free(hs.plan.weights);
  free(x), free(r), free(y), free(want), free(xv), free(w), free(b), free(rv), free(scratch);
}

static const nr_act acts[] = {NR_ACT_RELU, NR_ACT_NONE, NR_ACT_CLIP, NR_ACT_LEAKY_RELU,
                              NR_ACT_SIGMOID, NR_ACT_HARD_SWISH};
#define N_ACTS ((int)(sizeof acts / sizeof acts[0]))

/* 3x3 pad 1 stride 1: every output plane from 1x1 to 16x16 (square, and a few with
 * other widths), output channels around the panels, one pass and several. */
NR_TEST(test_conv_sp512_planes_vs_reference) {
  if (!(nr_cpu_isa() & NR_ISA_AVX512))
    return;
  nr_threadpool *pool = nr_threadpool_create(2);
  static const int ms[] = {64, 33, 80, 95, 16, 72, 97, 31};
  unsigned seed = 700;
  for (int hw = 1; hw <= 16; hw++) {
    int m = ms[hw % 8];
    sp_case k = {1, 20 + hw, hw, hw, m, 3, 0, 1, 1, 0, 0, hw % 2 == 0, hw % 3 != 1,
                 acts[hw % N_ACTS]};
    run_case(t, &k, 0, seed++, pool);
    run_case(t, &k, 5, seed++, pool); /* several passes and a short last one */
    if (hw % 4 == 3)
      run_case(t, &k, 1, seed++, pool);
    sp_case wide = k; /* rows of another width than the plane's height */
    wide.w = 17 - hw;
    run_case(t, &wide, hw % 2 ? 16 : 0, seed++, pool);
  }
  nr_threadpool_destroy(pool);
}

/* Strides, pads, dilation, other windows, images; each on the default pass size and
 * on passes of 16 channels. */
NR_TEST(test_conv_sp512_windows_vs_reference) {
  if (!(nr_cpu_isa() & NR_ISA_AVX512))
    return;
  nr_threadpool *pool = nr_threadpool_create(2);
  static const sp_case cases[] = {
      /* n c  h   w   m   k kw s pad dil end bias  res   act */
      {1, 64, 14, 14, 96, 3, 0, 2, 1, 0, 0, true, true, NR_ACT_RELU},    /* 14 -> 7, /2 */
      {1, 48, 28, 28, 64, 3, 0, 2, 1, 0, 0, true, false, NR_ACT_NONE},   /* 28 -> 14, /2 */
      {1, 50, 27, 27, 70, 3, 0, 2, 0, 0, 0, false, true, NR_ACT_CLIP},   /* 27 -> 13, pad 0 */
      {2, 49, 13, 13, 65, 3, 0, 1, 1, 0, 0, true, true, NR_ACT_LEAKY_RELU}, /* two images */
      {1, 40, 9, 9, 64, 3, 0, 1, 2, 2, 0, true, false, NR_ACT_RELU},     /* dilation 2 */
      {1, 33, 11, 11, 40, 5, 0, 1, 2, 0, 0, true, true, NR_ACT_SILU},    /* 5x5 */
      {1, 36, 7, 12, 64, 1, 3, 1, 1, 0, 0, false, false, NR_ACT_TANH},   /* 1x3, pad 1 rows */
      {1, 52, 8, 8, 64, 3, 0, 1, 0, 0, 1, true, true, NR_ACT_RELU},      /* pads 0 / 1 (SAME) */
      {1, 48, 16, 16, 32, 3, 0, 2, 0, 0, 1, true, false, NR_ACT_HARD_SIGMOID}, /* /2 SAME */
      {1, 64, 7, 7, 512, 3, 0, 1, 1, 0, 0, true, true, NR_ACT_RELU},     /* resnet layer4 */
      {1, 48, 15, 15, 100, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_GELU},  /* 8 + 7 chunks */
      /* stride-2 rows over 32 inputs: the vector even/odd copy's second vector */
      {1, 48, 9, 40, 64, 3, 0, 2, 1, 0, 0, true, false, NR_ACT_RELU},    /* 40 -> 20 */
      {1, 50, 8, 35, 40, 3, 0, 2, 0, 0, 0, false, true, NR_ACT_CLIP},    /* 35 -> 17, pad 0 */
      {1, 49, 6, 33, 33, 5, 0, 2, 2, 0, 0, true, false, NR_ACT_NONE},    /* 5x5 pad 2 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, &cases[i], 0, 800u + (unsigned)i, pool);
    run_case(t, &cases[i], 16, 830u + (unsigned)i, pool);
  }
  /* one thread (every panel's items on one partial buffer), and more threads than
   * items */
  nr_threadpool *one = nr_threadpool_create(1), *four = nr_threadpool_create(4);
  run_case(t, &cases[0], 7, 860, one);
  run_case(t, &cases[3], 0, 861, one);
  run_case(t, &cases[6], 9, 862, four);
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(four);
  nr_threadpool_destroy(pool);
}

/* The tactic the default route runs (the highest priority among the rows this
 * machine's ISA allows that support the step), as select.c picks it. */
static const nr_tactic *default_row(const sp_case *k) {
  unsigned sd = 3;
  float *w = random_floats((int64_t)k->m * k->c * k->k * kwid(k), &sd);
  float *b = random_floats(k->m, &sd);
  harness hs;
  build(&hs, k, w, b, true);
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, NULL};
  const nr_tactic *best = NULL;
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!(t->isa & ~nr_cpu_isa()) && !strcmp(t->op_type, "FusedConv") && t->supports(&c) &&
        (!best || t->priority > best->priority))
      best = t;
  free(hs.plan.weights), free(w), free(b);
  return best;
}

/* AVX-512: sp runs resnet's and squeezenet's small-plane 3x3 layers (stride 1 and 2),
 * igemm the large planes, the stems and the few-channel small ones. Without AVX-512
 * no sp row is offered and those nodes keep the tactics they had. */
NR_TEST(test_conv_sp512_default_choice) {
  bool avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0;
  static const struct {
    sp_case k;
    bool sp;
  } want[] = {
      {{1, 512, 7, 7, 512, 3, 0, 1, 1, 0, 0, true, true, NR_ACT_RELU}, true},
      {{1, 256, 14, 14, 256, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_RELU}, true},
      {{1, 256, 14, 14, 512, 3, 0, 2, 1, 0, 0, true, false, NR_ACT_RELU}, true},
      {{1, 64, 13, 13, 256, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_RELU}, true},
      {{1, 48, 13, 13, 192, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_RELU}, true},
      {{1, 64, 56, 56, 64, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_RELU}, false},
      {{1, 128, 28, 28, 128, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_RELU}, false},
      {{1, 3, 14, 14, 64, 3, 0, 1, 1, 0, 0, true, false, NR_ACT_RELU}, false},
      {{1, 32, 10, 12, 48, 3, 0, 1, 1, 0, 0, true, true, NR_ACT_RELU}, false},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const nr_tactic *d = default_row(&want[i].k);
    REQUIRE(d, "case %zu: no tactic", i);
    bool is_sp = !strcmp(d->id, "nr_f32_conv_sp__avx512");
    CHECK(is_sp == (avx512 && want[i].sp), "case %zu: default %s", i, d->id);
    if (avx512 && !want[i].sp && want[i].k.c > 4)
      CHECK(!strcmp(d->id, "nr_f32_conv_igemm__avx512"), "case %zu: default %s", i, d->id);
    if (!avx512)
      CHECK(!(d->isa & NR_ISA_AVX512), "case %zu: %s needs AVX-512", i, d->id);
  }
}

/* conv.algo on a small-plane node: where sp is the default, the knob offers igemm and
 * im2col (the ways back) and not smallplane (it would build the default); without
 * AVX-512 it offers neither smallplane nor igemm (im2col is the default there). */
NR_TEST(test_conv_sp512_algo_knob) {
  int64_t xd[4] = {1, 256, 7, 7}, wd[4] = {256, 256, 3, 3}, pads[4] = {1, 1, 1, 1};
  nr_graph *g = nr_graph_create(NULL);
  int ins[2] = {nr_graph_add_tensor(g, "X", NR_TENSOR_INPUT),
                nr_graph_add_tensor(g, "W", NR_TENSOR_CONST)};
  int y = nr_graph_add_tensor(g, "Y", NR_TENSOR_OUTPUT);
  g->tensors[ins[0]].value = make_value(NR_DTYPE_FLOAT, 4, xd, NULL);
  g->tensors[ins[1]].value = make_value(NR_DTYPE_FLOAT, 4, wd, NULL);
  g->tensors[y].value = make_value(NR_DTYPE_FLOAT, 4, xd, NULL);
  nr_attr at[1] = {attr_ints("pads", 4, pads)};
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup("c");
  n->op_type = strdup("Conv");
  n->domain = strdup("");
  n->opset = 13;
  n->n_inputs = 2;
  n->inputs = malloc(sizeof(int) * 2);
  memcpy(n->inputs, ins, sizeof ins);
  n->n_outputs = 1;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = y;
  n->attrs = at;
  n->n_attrs = 1;
  nr_knob_space sp = {0};
  nr_error err = {0};
  REQUIRE(nr_knob_space_build(g, &sp, &err) == NR_OK, "%s", err.message);
  bool avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0;
  int ai = nr_knob_space_find(&sp, "conv.algo@c");
  bool igemm = false, im2col = false, small = false;
  for (int v = 0; ai >= 0 && v < sp.inst[ai].n_values; v++) {
    igemm |= !strcmp(sp.inst[ai].values[v], "igemm");
    im2col |= !strcmp(sp.inst[ai].values[v], "im2col");
    small |= !strcmp(sp.inst[ai].values[v], "smallplane");
  }
  CHECK(ai >= 0, "conv.algo@c not listed");
  CHECK(!small, "conv.algo offers smallplane");
  CHECK(im2col || !avx512, "conv.algo does not offer im2col"); /* AVX2: im2col is the default */
  CHECK(igemm == avx512, "conv.algo %s igemm", igemm ? "offers" : "does not offer");
  nr_knob_space_free(&sp);
  g->nodes[0].attrs = NULL;
  g->nodes[0].n_attrs = 0;
  nr_graph_destroy(g);
}
