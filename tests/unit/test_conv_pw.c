/* test_conv_pw.c - nr_f32_conv_pw__avx512 (conv_pw__avx512.c), the AVX-512 pointwise
 * convolution, against the reference executor's Conv (plus residual and the scalar
 * activation), and the tactic choice around it on both ISAs.
 *
 * Every register tile (12x32, 8x48, 6x64) runs on shapes built around it: output
 * channels one below, at and above the tile's rows; pixel counts below, at and above
 * one, two and three 16-pixel vectors and a tile (7x7 = 49, 14x14 = 196, a one-row
 * image); channels below, at and above the K block, K blocks of 1 and a remainder;
 * strides 2 and 3 (also only along H), two images, one-pixel outputs (the separate
 * vector-per-panel path of squeeze-and-excite convs), the epilogue in a separate pass
 * (conv.epilogue=separate); bias, residual and every kind of
 * activation (in-register ones and the ones applied after the store); both loop
 * orders (column tiles outer, and NR_CONV_PW_PANELS: panels outer, with X cut into
 * column chunks). The oc48x7 tile (48 output channels as three vectors x 7 pixels)
 * runs all of the above too, and on 7x7 / 13x13 / 14x14 / 8x8 / 16x16 planes with
 * output channels around 48 and its 16-lane vectors, K blocks with a remainder, more
 * pixel tiles than one work item's chunk, stride 2, on one and two threads; prepare()
 * must pick it only for resnet50's layer4 conv1s (stride 1, <= 64 pixels, C >= 1024).
 * The tile, order and K block are forced by rewriting the step's
 * record and packing W again, as prepare() does for the conv.pw_tile / conv.pw_order
 * / conv.pw_kc knobs. Buffers carry guard bytes; failures
 * print the seed. On a machine without AVX-512 (or NNROUTE_ISA=avx2) the kernel is not
 * run, and the tests check that the 1x1 nodes fall back to the GEMM tactics. */
#include "ir/fused.h"
#include "kernels/act.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "plan/tactic.h"
#include "conv_step.h"
#include "op_test.h"
#include "util/threadpool.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

#define GUARD 48
static const float SENTINEL = -4321.25f;

typedef struct pw_case {
  int n, c, h, w, m, sh, sw;
  bool bias, res;
  nr_act act;
} pw_case;

static int64_t out_dim(int in, int s) { return (in - 1) / s + 1; }

static float *guarded(int64_t n) { return guarded_floats(n, GUARD, SENTINEL); }
static bool guard_ok(const float *p, int64_t n) { return guard_intact(p, n, GUARD, SENTINEL); }

/* act's parameters as the FusedConv node carries them. */
static float act_a(nr_act a) { return a == NR_ACT_CLIP ? -0.25f : a == NR_ACT_LEAKY_RELU ? 0.1f : 0.2f; }
static float act_b(nr_act a) { return a == NR_ACT_CLIP ? 0.75f : 0.5f; }

/* Case k as conv_step.h's: a 1x1 kernel, no padding, the node's act parameters. */
static conv_case step_case(const pw_case *k) {
  return (conv_case){.n = k->n, .c = k->c, .h = k->h, .w = k->w, .m = k->m, .kh = 1,
                     .kw = 1, .sh = k->sh, .sw = k->sw, .bias = k->bias, .res = k->res,
                     .act = k->act, .act_a = act_a(k->act), .act_b = act_b(k->act)};
}

/* Y = act(Conv(X, W, B) + R) through the reference executor and nr_act_apply_ref. */
static bool reference(const pw_case *k, const float *x, const float *w, const float *b,
                      const float *r, float *y) {
  conv_case cc = step_case(k);
  return conv_case_reference(&cc, x, w, b, r, y);
}

/* One FusedConv (or Conv) step "pw" over slots X, W, B, R, Y (conv_step_make). */
static void build(conv_step *hs, const pw_case *k, const float *w, const float *b,
                  bool fused) {
  conv_case cc = step_case(k);
  conv_step_make(hs, &cc, w, b, &(conv_step_opts){.fused = fused, .name = "pw"});
}

static const nr_tactic *row(const char *id, const char *op) {
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!strcmp(t->id, id) && !strcmp(t->op_type, op))
      return t;
  return NULL;
}

/* Runs the pw row on case k with register tile `tile` (optionally with
 * NR_CONV_PW_ALIGNED) and K block kc (tile < 0: what prepare() chose; kc 0: prepare's
 * is kept). */
static void run_case(nr_test_state *t, const pw_case *k, int tile, int kc, uint8_t opts,
                     unsigned seed, nr_threadpool *pool) {
  bool fused = k->res || k->act != NR_ACT_NONE;
  const nr_tactic *tac = row("nr_f32_conv_pw__avx512", fused ? "FusedConv" : "Conv");
  REQUIRE(tac, "no pw row");
  unsigned sd = seed;
  int64_t oh = out_dim(k->h, k->sh), ow = out_dim(k->w, k->sw);
  int64_t xn = (int64_t)k->n * k->c * k->h * k->w, yn = (int64_t)k->n * k->m * oh * ow;
  float *x = guarded(xn), *r = guarded(yn), *y = guarded(yn), *want = malloc(sizeof(float) * (size_t)yn);
  float *xv = random_floats(xn, &sd), *w = random_floats((int64_t)k->m * k->c, &sd);
  float *b = random_floats(k->m, &sd), *rv = random_floats(yn, &sd);
  memcpy(x, xv, sizeof(float) * (size_t)xn);
  memcpy(r, rv, sizeof(float) * (size_t)yn);
  conv_step hs;
  build(&hs, k, w, b, fused);
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
  float *scratch = NULL;
  REQUIRE(reference(k, xv, w, b, k->res ? rv : NULL, want), "reference failed, seed %u", seed);
  if (!tac->supports(&c)) {
    CHECK(false, "pw does not support c%d %dx%d m%d s%d,%d", k->c, k->h, k->w, k->m, k->sh,
          k->sw);
    goto done;
  }
  hs.step.tactic = tac;
  if (tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "prepare: %s, seed %u", err.message, seed);
    goto done;
  }
  conv_p *p = (conv_p *)(void *)hs.step.params;
  p->opts |= opts;
  if (tile >= 0) {
    p->extra = (uint32_t)tile;
    if (kc > 0)
      p->gemm.kc = (uint16_t)kc;
    hs.step.scratch = nr_conv_pw_scratch(p);
    REQUIRE(nr_conv_pack_pw(&c, &hs.plan, &hs.step) == NR_OK, "repack: %s", err.message);
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
        "wrote past a buffer (tile %u, kc %u), seed %u", p->extra, p->gemm.kc, seed);
  CHECK(!memcmp(x, xv, sizeof(float) * (size_t)xn) && !memcmp(r, rv, sizeof(float) * (size_t)yn),
        "changed an input, seed %u", seed);
  double tol = 2e-5 * (k->c + 4);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabs(y[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      bad = i;
  CHECK(bad < 0,
        "n%d c%d %dx%d m%d s%d,%d bias%d res%d act %s tile %u kc %u: y[%lld] = %g, want %g, "
        "seed %u",
        k->n, k->c, k->h, k->w, k->m, k->sh, k->sw, k->bias, k->res, nr_act_name(k->act),
        p->extra, p->gemm.kc, (long long)bad, bad >= 0 ? y[bad] : 0, bad >= 0 ? want[bad] : 0,
        seed);
done:
  free(hs.plan.weights);
  free(x), free(r), free(y), free(want), free(xv), free(w), free(b), free(rv), free(scratch);
}

/* Pixel counts around 1, 2, 3 and 4 vectors and whole tiles, as h x w. */
static const int pix[][2] = {{1, 15}, {4, 4}, {1, 17}, {4, 8}, {3, 11}, {1, 47},
                             {6, 8}, {7, 7}, {9, 7}, {8, 8}, {5, 13}, {14, 14}};

NR_TEST(test_conv_pw_tiles_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2);
  const nr_act acts[] = {NR_ACT_RELU, NR_ACT_NONE, NR_ACT_CLIP, NR_ACT_LEAKY_RELU,
                         NR_ACT_SIGMOID, NR_ACT_HARD_SWISH};
  unsigned seed = 500;
  for (int tile = 0; tile < NR_CONV_PW_TILES; tile++) {
    int mr = nr_conv_pw_mr((uint32_t)tile);
    const int ms[3] = {mr - 1, mr + 1, 2 * mr + 3};
    for (size_t q = 0; q < sizeof pix / sizeof pix[0]; q++) {
      int m = ms[q % 3];
      nr_act act = acts[q % (sizeof acts / sizeof acts[0])];
      pw_case k = {1, 9 + (int)q, pix[q][0], pix[q][1], m, 1, 1, q % 2 == 0, q % 3 != 1, act};
      run_case(t, &k, tile, 0, 0, seed++, pool);
      /* K blocks: 4 channels (several blocks and a remainder), 1 (one-channel blocks);
       * B copied to rows of whole vectors */
      run_case(t, &k, tile, 4, 0, seed++, pool);
      run_case(t, &k, tile | (int)NR_CONV_PW_ALIGNED, 5, 0, seed++, pool);
      if (q % 4 == 0)
        run_case(t, &k, tile, 1, 0, seed++, pool);
      /* panels outer: one K block, several, and with the aligned copy */
      run_case(t, &k, tile | (int)NR_CONV_PW_PANELS, 0, 0, seed++, pool);
      run_case(t, &k, tile | (int)NR_CONV_PW_PANELS, 4, 0, seed++, pool);
      run_case(t, &k, tile | (int)(NR_CONV_PW_PANELS | NR_CONV_PW_ALIGNED), 5, 0, seed++,
               pool);
    }
  }
  nr_threadpool_destroy(pool);
}

NR_TEST(test_conv_pw_strides_and_batches) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2);
  static const pw_case cases[] = {
      /* n c  h   w  m  sh sw bias  res    act */
      {1, 16, 14, 14, 24, 2, 2, true, true, NR_ACT_RELU},     /* 7x7 out, downsample */
      {1, 5, 9, 9, 13, 2, 2, false, false, NR_ACT_NONE},      /* odd input, Conv op */
      {2, 12, 10, 11, 20, 3, 3, true, true, NR_ACT_CLIP},     /* 4x4, two images */
      {1, 7, 12, 9, 9, 2, 1, true, false, NR_ACT_SILU},       /* strided rows only */
      {2, 33, 8, 8, 17, 1, 1, true, true, NR_ACT_LEAKY_RELU}, /* two images, stride 1 */
      {1, 1, 5, 6, 30, 1, 1, true, false, NR_ACT_RELU},       /* one input channel */
      {1, 70, 3, 30, 40, 1, 1, true, true, NR_ACT_HARD_SWISH},
      /* one output pixel (squeeze-and-excite): the vector-per-panel path */
      {1, 37, 1, 1, 29, 1, 1, true, true, NR_ACT_SILU},
      {2, 21, 1, 1, 13, 1, 1, false, false, NR_ACT_RELU},
      {1, 9, 2, 2, 30, 2, 2, true, false, NR_ACT_CLIP},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, &cases[i], -1, 0, 0, 900u + (unsigned)i, pool);
    for (int tile = 0; tile < NR_CONV_PW_TILES; tile++) {
      run_case(t, &cases[i], tile, 8, 0, 950u + (unsigned)(i * 3 + tile), pool);
      run_case(t, &cases[i], tile | (int)NR_CONV_PW_PANELS, 8, 0,
               1950u + (unsigned)(i * 3 + tile), pool);
    }
    /* conv.epilogue=separate: raw sums, then nr_conv_epilogue_pass */
    run_case(t, &cases[i], -1, 0, CONV_OPT_SPLIT_EPI, 980u + (unsigned)i, pool);
  }
  /* one thread: no panel groups cut for threads */
  nr_threadpool *one = nr_threadpool_create(1);
  run_case(t, &cases[0], -1, 0, 0, 990, one);
  run_case(t, &cases[2], 2, 5, 0, 991, one);
  run_case(t, &cases[2], 2 | (int)NR_CONV_PW_PANELS, 5, 0, 992, one);
  /* panels outer over more than one column chunk of X (512 KiB each: 64 channels x 42
   * tiles of 48 pixels), one and two threads */
  pw_case wide = {1, 64, 56, 58, 20, 1, 1, true, true, NR_ACT_RELU};
  run_case(t, &wide, NR_CONV_PW_TILE_8X48 | NR_CONV_PW_PANELS, 0, 0, 993, one);
  run_case(t, &wide, NR_CONV_PW_TILE_8X48 | NR_CONV_PW_PANELS, 0, 0, 994, pool);
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(pool);
}

/* The tactic the default route runs on k's FusedConv (conv_step.h). */
static const nr_tactic *default_row(const pw_case *k) {
  conv_case cc = step_case(k);
  return conv_default_row(&cc);
}

/* AVX-512: pw runs every unpadded 1x1 (any stride); AVX2: its AVX2 counterpart.
 * Otherwise the GEMM tactics do, as before the pw rows existed: nr_f32_conv_1x1 at
 * stride 1, im2col at stride 2. */
NR_TEST(test_conv_pw_default_choice) {
  bool avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0, avx2 = (nr_cpu_isa() & NR_ISA_AVX2);
  pw_case s1 = {1, 64, 14, 14, 256, 1, 1, true, true, NR_ACT_RELU};
  pw_case s2 = {1, 64, 14, 14, 128, 2, 2, true, false, NR_ACT_NONE};
  const nr_tactic *a = default_row(&s1), *b = default_row(&s2);
  REQUIRE(a && b, "no tactic for a 1x1 conv");
  const char *pw_id = avx512 ? "nr_f32_conv_pw__avx512" : "nr_f32_conv_pw__avx2";
  CHECK(!strcmp(a->id, avx512 || avx2 ? pw_id : "nr_f32_conv_1x1"), "stride 1: %s", a->id);
  CHECK(!strcmp(b->id, avx512 || avx2 ? pw_id : "nr_f32_conv_im2col"), "stride 2: %s",
        b->id);
  /* padded or grouped 1x1 convs are not pointwise products */
  const nr_tactic *pw = row("nr_f32_conv_pw__avx512", "FusedConv");
  REQUIRE(pw, "no pw row");
  pw_case odd = {1, 8, 9, 9, 8, 2, 2, true, false, NR_ACT_NONE};
  conv_step hs;
  unsigned sd = 4;
  float *w = random_floats(64, &sd), *bb = random_floats(8, &sd);
  conv_case padded = step_case(&odd);
  padded.pt = padded.pl = padded.pb = padded.pr = 1; /* Y 6x6 */
  conv_step_make(&hs, &padded, w, bb, &(conv_step_opts){.fused = true, .name = "pw"});
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, NULL};
  CHECK(!pw->supports(&c), "pw claims a padded 1x1 conv");
  free(hs.plan.weights), free(w), free(bb);
}

/* prepare() picks the tile that pads least (resnet's 64-channel multiples: 8x48;
 * mobilenet's 96 channels at 14x14: 12x32) and a K block that covers K in equal
 * blocks of at most 256 / 168 / 128 channels (fewer where the B rows of a column
 * tile would crowd L1 sets: 1024 channels at 14x14, rows of 208 floats, run in 8
 * blocks of 128); B is copied to vector-aligned rows where the pixels are not a
 * multiple of 16 and the copy is made anyway (stride 2) or M is at least 128. Panels
 * go outer (NR_CONV_PW_PANELS) for short reductions (at most 64 channels) over at
 * least 196 pixels (resnet50's 64->256 at 56x56, mobilenet's 64->96 at 14x14), not
 * for 1024->256 or 13x13 planes. */
NR_TEST(test_conv_pw_prepare_picks) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  static const struct {
    pw_case k;
    uint32_t tile;
    int kc;
    bool aligned, panels;
  } want[] = {
      {{1, 64, 56, 56, 256, 1, 1, true, true, NR_ACT_RELU}, NR_CONV_PW_TILE_8X48, 64, false,
       true},
      {{1, 1024, 14, 14, 256, 1, 1, true, false, NR_ACT_RELU}, NR_CONV_PW_TILE_8X48, 128,
       true, false},
      {{1, 64, 14, 14, 96, 1, 1, true, false, NR_ACT_CLIP}, NR_CONV_PW_TILE_12X32, 64, false,
       true},
      {{1, 64, 13, 13, 32, 2, 2, true, false, NR_ACT_NONE}, NR_CONV_PW_TILE_8X48, 64, true,
       false},
      {{1, 64, 13, 13, 256, 1, 1, true, false, NR_ACT_RELU}, NR_CONV_PW_TILE_8X48, 64, true,
       false},
  };
  const nr_tactic *tac = row("nr_f32_conv_pw__avx512", "FusedConv");
  REQUIRE(tac, "no pw row");
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const pw_case *k = &want[i].k;
    unsigned sd = 8;
    float *w = random_floats((int64_t)k->m * k->c, &sd), *b = random_floats(k->m, &sd);
    conv_step hs;
    build(&hs, k, w, b, true);
    nr_error err = {0};
    nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
    hs.step.tactic = tac;
    REQUIRE(tac->supports(&c) && tac->prepare(&c, &hs.plan, &hs.step) == NR_OK, "%s",
            err.message);
    const conv_p *p = conv_params(&hs.step);
    CHECK(nr_conv_pw_tile(p->extra) == want[i].tile && p->gemm.kc == want[i].kc &&
              !(p->extra & NR_CONV_PW_ALIGNED) == !want[i].aligned &&
              !(p->extra & NR_CONV_PW_PANELS) == !want[i].panels,
          "case %zu: tile %u kc %u", i, p->extra, p->gemm.kc);
    CHECK(hs.step.scratch == nr_conv_pw_scratch(p), "case %zu: scratch", i);
    CHECK(hs.step.packed_size == sizeof(float) * (size_t)((k->m + nr_conv_pw_mr(p->extra) - 1) /
                                                          nr_conv_pw_mr(p->extra) *
                                                          nr_conv_pw_mr(p->extra) * k->c),
          "case %zu: packed %llu bytes", i, (unsigned long long)hs.step.packed_size);
    free(hs.plan.weights), free(w), free(b);
  }
}

/* oc48x7 around its shape: 48 output channels x 7-pixel tiles, the last tile of 1..8
 * pixels (49 = 7 x 7, 169 = 24 x 7 + 1, 196 = 28 x 7, 64 = 9 x 7 + 1, 256 = 36 x 7 +
 * 4); more than 9 tiles (one item's chunk) at 13x13 and up; output channels at, below
 * and above 16, 32, 48 and 96; K blocks of 64 with a remainder (130 channels), 7, and
 * one block of C that the kernel walks in pieces of 64 with a remainder (130, 300);
 * fused bias, residual, in-register and after-the-store activations. */
NR_TEST(test_conv_pw_oc_tile_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *two = nr_threadpool_create(2), *one = nr_threadpool_create(1);
  static const pw_case cases[] = {
      /* n c   h   w   m   sh sw bias  res    act */
      {1, 130, 7, 7, 48, 1, 1, true, true, NR_ACT_RELU},
      {1, 64, 7, 7, 47, 1, 1, true, false, NR_ACT_CLIP},
      {1, 70, 7, 7, 113, 1, 1, false, true, NR_ACT_NONE},
      {1, 33, 13, 13, 100, 1, 1, true, true, NR_ACT_LEAKY_RELU},
      {1, 65, 14, 14, 96, 1, 1, true, false, NR_ACT_HARD_SWISH},
      {1, 20, 8, 8, 17, 1, 1, true, true, NR_ACT_RELU},
      {1, 12, 16, 16, 33, 1, 1, false, false, NR_ACT_SIGMOID},
      {1, 40, 14, 14, 49, 2, 2, true, true, NR_ACT_RELU}, /* 14 -> 7, the copy */
      {2, 24, 13, 13, 64, 2, 2, true, false, NR_ACT_CLIP}, /* 13 -> 7, two images */
      {1, 9, 2, 3, 15, 1, 1, true, true, NR_ACT_RELU},     /* one tile of 6 pixels */
      {1, 300, 7, 7, 1000, 1, 1, true, true, NR_ACT_RELU},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    /* K blocks: prepare()'s, 64, 7, and one block of C (walked in pieces of 64) */
    const int kcs[4] = {0, 64, 7, cases[i].c};
    for (int q = 0; q < 4; q++) {
      unsigned seed = 3000u + (unsigned)(i * 4 + q);
      run_case(t, &cases[i], NR_CONV_PW_TILE_OC48X7, kcs[q], 0, seed, q == 1 ? one : two);
    }
  }
  /* conv.epilogue=separate: raw sums scattered, then the epilogue pass */
  run_case(t, &cases[0], NR_CONV_PW_TILE_OC48X7, 64, CONV_OPT_SPLIT_EPI, 3100, two);
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(two);
}

/* prepare()'s default takes oc48x7 on resnet50's layer4 conv1s (7x7, C >= 1024,
 * stride 1) with one K block (W packed as one stream per panel) and no aligned copy,
 * and keeps a pixel tile on the 512->2048 conv3s, mobilenet_v2's 160->960 at 7x7,
 * the 14->7 downsample and 13x13 / 14x14 planes. */
NR_TEST(test_conv_pw_oc_tile_default) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  static const struct {
    pw_case k;
    bool oc;
  } want[] = {
      {{1, 2048, 7, 7, 512, 1, 1, true, false, NR_ACT_RELU}, true},
      {{1, 512, 7, 7, 2048, 1, 1, true, true, NR_ACT_RELU}, false},
      {{1, 1024, 7, 7, 100, 1, 1, true, true, NR_ACT_RELU}, true},
      {{1, 160, 7, 7, 960, 1, 1, true, false, NR_ACT_CLIP}, false},
      {{1, 1024, 14, 14, 2048, 2, 2, true, false, NR_ACT_NONE}, false},
      {{1, 512, 13, 13, 1000, 1, 1, true, false, NR_ACT_RELU}, false},
      {{1, 1024, 14, 14, 512, 1, 1, true, false, NR_ACT_RELU}, false},
  };
  const nr_tactic *tac = row("nr_f32_conv_pw__avx512", "FusedConv");
  REQUIRE(tac, "no pw row");
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const pw_case *k = &want[i].k;
    unsigned sd = 9;
    float *w = random_floats((int64_t)k->m * k->c, &sd), *b = random_floats(k->m, &sd);
    conv_step hs;
    build(&hs, k, w, b, true);
    nr_error err = {0};
    nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
    hs.step.tactic = tac;
    REQUIRE(tac->supports(&c) && tac->prepare(&c, &hs.plan, &hs.step) == NR_OK, "%s",
            err.message);
    const conv_p *p = conv_params(&hs.step);
    bool oc = nr_conv_pw_tile(p->extra) == NR_CONV_PW_TILE_OC48X7;
    CHECK(oc == want[i].oc, "case %zu: tile %u", i, p->extra);
    if (oc)
      CHECK(p->gemm.kc == k->c && !(p->extra & NR_CONV_PW_ALIGNED) &&
                hs.step.packed_size == sizeof(float) * (size_t)((k->m + 47) / 48 * 48 * k->c),
            "case %zu: kc %u extra %#x packed %llu", i, p->gemm.kc, p->extra,
            (unsigned long long)hs.step.packed_size);
    free(hs.plan.weights), free(w), free(b);
  }
}
