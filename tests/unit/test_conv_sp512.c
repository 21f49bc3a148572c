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
#include "plan/knob.h"
#include "plan/route.h"
#include "conv_step.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "op_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sp_case {
  int n, c, h, w, m;
  int k, kw;       /* window k x kw (kw 0: k x k) */
  int s, pad, dil; /* stride, pad (all sides), dilation (0: 1) */
  int pad_end;     /* extra pad at the bottom and right */
  bool bias, res;
  nr_act act;
} sp_case;

static conv_case to_case(const sp_case *k) {
  nr_act a = k->act;
  return (conv_case){k->n, k->c, k->h, k->w, k->m, k->k, k->kw ? k->kw : k->k, k->s, k->s,
                     k->dil, k->dil, k->pad, k->pad, k->pad + k->pad_end,
                     k->pad + k->pad_end, 1, k->bias, k->res, a,
                     a == NR_ACT_CLIP ? -0.25f : a == NR_ACT_LEAKY_RELU ? 0.1f : 0.2f,
                     a == NR_ACT_CLIP ? 0.75f : 0.5f};
}

/* After prepare(): kc input channels per pass, as prepare() picks for larger layers. */
static void set_kc(nr_step *st, void *user) {
  conv_p *p = (conv_p *)(void *)st->params;
  p->gemm.kc = (uint16_t)*(const int *)user;
  st->scratch = nr_conv_sp_scratch(p, NR_CONV_MAX_THREADS);
}

/* Runs the sp row's prepare() and run() on case k (kc > 0: that many input channels
 * per pass instead of prepare's choice) on `pool`, against the reference. */
static void run_case(nr_test_state *t, const sp_case *k, int kc, unsigned seed,
                     nr_threadpool *pool) {
  conv_case c = to_case(k);
  const nr_tactic *tac = conv_row("nr_f32_conv_sp__avx512", &c, false);
  REQUIRE(tac, "no sp row");
  char note[32];
  snprintf(note, sizeof note, "kc %d", kc);
  conv_opts o = {.tweak = kc > 0 ? set_kc : NULL, .user = &kc, .note = note,
                 .skip_supports = true};
  conv_check(t, tac, &c, seed, pool, &o, true);
}

static const nr_act acts[] = {NR_ACT_RELU, NR_ACT_NONE, NR_ACT_CLIP, NR_ACT_LEAKY_RELU,
                              NR_ACT_SIGMOID, NR_ACT_HARD_SWISH};
#define N_ACTS ((int)(sizeof acts / sizeof acts[0]))

/* 3x3 pad 1 stride 1: every output plane from 1x1 to 16x16 (square, and a few with
 * other widths), output channels around the panels, one pass and several. */
NR_TEST(test_conv_sp512_planes_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
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
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
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

static const nr_tactic *default_row(const sp_case *k) {
  conv_case c = to_case(k);
  return conv_default_row(&c);
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
    /* conv.winograd_from=auto: stride-1 outputs of 400+ pixels with 16+ channels */
    const sp_case *k = &want[i].k;
    conv_case c = to_case(k);
    bool wino = k->s == 1 && k->c >= 16 && conv_case_oh(&c) * conv_case_ow(&c) >= 400;
    if (avx512 && !want[i].sp && k->c > 4)
      CHECK(!strcmp(d->id, wino ? "nr_f32_conv_winograd_f43__avx512"
                                : "nr_f32_conv_igemm__avx512"),
            "case %zu: default %s", i, d->id);
    if (!avx512)
      CHECK(!(d->isa & NR_ISA_AVX512), "case %zu: %s needs AVX-512", i, d->id);
  }
}

/* conv.algo on a small-plane node: where sp is the default, the knob offers igemm and
 * im2col (the ways back) and not smallplane (it would build the default); without
 * AVX-512 it offers neither smallplane nor igemm (im2col is the default there). */
NR_TEST(test_conv_sp512_algo_knob) {
  int64_t xd[4] = {1, 256, 7, 7}, wd[4] = {256, 256, 3, 3}, pads[4] = {1, 1, 1, 1};
  nr_attr at[1] = {attr_ints("pads", 4, pads)};
  nr_graph *g = conv_graph("c", xd, wd, xd, at, 1);
  nr_knob_space sp = {0};
  nr_error err = {0};
  REQUIRE(nr_knob_space_build(g, &sp, &err) == NR_OK, "%s", err.message);
  bool avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0, avx2 = (nr_cpu_isa() & NR_ISA_AVX2);
  int ai = nr_knob_space_find(&sp, "conv.algo@c");
  bool igemm = false, im2col = false, small = false;
  for (int v = 0; ai >= 0 && v < sp.inst[ai].n_values; v++) {
    igemm |= !strcmp(sp.inst[ai].values[v], "igemm");
    im2col |= !strcmp(sp.inst[ai].values[v], "im2col");
    small |= !strcmp(sp.inst[ai].values[v], "smallplane");
  }
  CHECK(ai >= 0, "conv.algo@c not listed");
  CHECK(!small, "conv.algo offers smallplane");
  /* AVX2: sp__avx2 is the default (igemm__avx2 and im2col the others); portable: im2col */
  CHECK(im2col || !(avx512 || avx2), "conv.algo does not offer im2col");
  CHECK(igemm == (avx512 || avx2), "conv.algo %s igemm", igemm ? "offers" : "does not offer");
  nr_knob_space_free(&sp);
  conv_graph_destroy(g);
}
