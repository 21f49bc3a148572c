/* test_conv_wino512.c - nr_f32_conv_winograd_f43__avx512
 * (conv_winograd__avx512.c) against the reference executor's Conv plus residual
 * and activation, on shapes built around what the kernel cuts: output sizes
 * that are not multiples of the 4x4 tile (the last tile row and column partly
 * dropped), channel counts around the 16-lane blocks (C and M remainders, M
 * over one 64-channel U chunk), pads 0 and 1, several tile blocks per image
 * (the last one partial and its register tile padded with zero rows), two
 * images, 1 and 2 threads, conv.epilogue=separate, and every activation path of
 * the unpack pass (ReLU on the vectors, the others through nr_conv_epilogue).
 * Buffers carry guard floats; failures print the seed. Also checks that the row
 * is what conv.algo=winograd43 reaches on AVX-512 and that without it
 * (NNROUTE_ISA=avx2) the portable row is. Without AVX-512 the kernel tests
 * return at once. */
#include "conv_step.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "op_test.h"

#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

#define W43 "nr_f32_conv_winograd_f43__avx512"

typedef struct w_case {
  int n, c, h, w, m, pad;
  bool bias, res;
  nr_act act;
  bool split; /* conv.epilogue=separate */
} w_case;

static conv_case to_case(const w_case *k) {
  return (conv_case){k->n, k->c, k->h, k->w, k->m, 3, 3, 1, 1, 1, 1, k->pad, k->pad, k->pad,
                     k->pad, 1, k->bias, k->res, k->act,
                     k->act == NR_ACT_CLIP ? -0.5f : 0.1f, 0.5f};
}

/* After prepare(): the epilogue in a pass of its own, as conv.epilogue=separate. */
static void split_epilogue(nr_step *st, void *user) {
  (void)user;
  ((conv_p *)(void *)st->params)->opts |= CONV_OPT_SPLIT_EPI;
}

/* The row on case k against the reference. F(4,3)'s transforms carry constants up to 8
 * (A^T) and 5 (B^T): per element a bound that grows with the reduction, and one on the
 * whole output (measured 0.6-2.3e-6 here; the exact kernels' is about 1e-7). */
static void run_case(nr_test_state *t, const w_case *k, unsigned seed, nr_threadpool *pool) {
  conv_case c = to_case(k);
  const nr_tactic *tac = conv_row(W43, &c, false);
  REQUIRE(tac, "no %s row", W43);
  conv_opts o = {.tweak = k->split ? split_epilogue : NULL,
                 .tol = 1e-5 * ((double)k->c * 9 / 4 + 4),
                 .max_rel_l2 = 5e-6,
                 .note = k->split ? "split" : NULL};
  conv_check(t, tac, &c, seed, pool, &o, true);
}

/* Tile edges and channel remainders, one block per image. */
NR_TEST(test_conv_wino512_edges_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2), *one = nr_threadpool_create(1);
  static const w_case cases[] = {
      /* n c  h   w   m  pad bias  res   act */
      {1, 16, 8, 8, 16, 1, true, false, NR_ACT_NONE},     /* exactly 2x2 tiles */
      {1, 5, 13, 13, 13, 1, true, true, NR_ACT_RELU},     /* 13x13: last tile 1 wide */
      {1, 17, 10, 11, 20, 1, false, true, NR_ACT_CLIP},   /* 10x11 */
      {1, 33, 9, 7, 70, 0, true, false, NR_ACT_SIGMOID},  /* pad 0: 7x5; M over a chunk */
      {2, 7, 6, 6, 9, 1, true, true, NR_ACT_LEAKY_RELU},  /* two images */
      {1, 3, 3, 3, 1, 1, true, false, NR_ACT_HARD_SWISH}, /* one tile, one channel */
      {1, 48, 15, 14, 192, 1, true, true, NR_ACT_RELU},   /* 3 chunks of 64 */
      {1, 20, 19, 18, 100, 0, false, false, NR_ACT_NONE}, /* chunks 64 + 48 */
      {2, 31, 12, 17, 40, 1, true, true, NR_ACT_HARD_SIGMOID},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, &cases[i], 500u + (unsigned)i, pool);
    run_case(t, &cases[i], 520u + (unsigned)i, one);
  }
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(pool);
}

/* Several tile blocks per image (the last partial), the separate epilogue pass,
 * and resnet/squeezenet-like layers, smaller. */
NR_TEST(test_conv_wino512_blocks_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2), *one = nr_threadpool_create(1);
  static const w_case cases[] = {
      /* n c  h   w   m  pad bias  res   act           split */
      {1, 48, 30, 30, 40, 1, true, true, NR_ACT_RELU, false},  /* 64 tiles: 42 + 22 */
      {2, 64, 26, 27, 64, 1, true, false, NR_ACT_NONE, false}, /* 49 tiles, 30 + 19 */
      {1, 48, 30, 30, 40, 1, true, true, NR_ACT_RELU, true},
      {2, 9, 21, 22, 24, 0, true, true, NR_ACT_CLIP, true},
      {1, 128, 14, 14, 128, 1, true, true, NR_ACT_RELU, false}, /* tb 12: 2 blocks */
      {1, 16, 55, 55, 64, 1, true, false, NR_ACT_RELU, false},  /* squeezenet's expand3x3 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, &cases[i], 600u + (unsigned)i, pool);
    run_case(t, &cases[i], 620u + (unsigned)i, one);
  }
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(pool);
}

/* The row conv.algo=winograd43 reaches: this one where the CPU has AVX-512, the
 * portable F(4,3) where it does not (NNROUTE_ISA=avx2), as select.c chooses
 * (highest priority among the rows of that algorithm the CPU runs and that
 * support the node). It stays below im2col, so by default only
 * conv.winograd_from=auto gives it a node: 16+ input channels and 400+ output
 * pixels with AVX-512 (not 12x12, 16 x 18x18 or 8 channels at 24x24). */
NR_TEST(test_conv_wino512_selection) {
  w_case k = {1, 16, 12, 12, 16, 1, true, false, NR_ACT_NONE, false};
  conv_case ck = to_case(&k);
  unsigned sd = 77;
  float *w = random_floats(16 * 16 * 9, &sd), *b = random_floats(16, &sd);
  conv_step hs;
  conv_step_build(&hs, &ck, w, b);
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, NULL};
  const nr_tactic *best = NULL, *im2col = conv_row("nr_f32_conv_im2col", &ck, false);
  const nr_tactic *mine = conv_row(W43, &ck, false);
  REQUIRE(mine && im2col, "rows missing");
  CHECK(mine->isa == NR_ISA_AVX512 && !strcmp(mine->algo, "winograd43") &&
            mine->priority < im2col->priority,
        "%s: isa %u algo %s priority %d", W43, mine->isa, mine->algo, mine->priority);
  for (const nr_tactic *r = nr_tactics_conv; r->id; r++)
    if (!strcmp(r->op_type, "Conv") && !strcmp(r->algo, "winograd43") &&
        !(r->isa & ~nr_cpu_isa()) && r->supports(&c) && (!best || r->priority > best->priority))
      best = r;
  REQUIRE(best, "no winograd43 row supports the node");
  const char *want = (nr_cpu_isa() & NR_ISA_AVX512) ? W43 : "nr_f32_conv_winograd_f43";
  CHECK(!strcmp(best->id, want), "conv.algo=winograd43 reaches %s, want %s", best->id, want);
  conv_step_free(&hs);
  free(w), free(b);
  static const struct {
    int c, hw;
    bool wino;
  } auto_cases[] = {{16, 22, true}, {16, 12, false}, {16, 20, false}, {8, 26, false},
                    {64, 58, true}};
  for (size_t i = 0; i < sizeof auto_cases / sizeof auto_cases[0]; i++) {
    w_case a = {1, auto_cases[i].c, auto_cases[i].hw, auto_cases[i].hw, 32, 0, true, false,
                NR_ACT_RELU, false};
    conv_case ca = to_case(&a);
    const nr_tactic *d = conv_default_row(&ca);
    bool on = auto_cases[i].wino && (nr_cpu_isa() & NR_ISA_AVX512);
    CHECK(d && !strcmp(d->id, W43) == on, "c%d %dx%d (pad 0): default %s", a.c, a.h, a.w,
          d ? d->id : "none");
  }
}
