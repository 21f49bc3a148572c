/* test_conv_igemm512.c - nr_f32_conv_igemm__avx512 (conv_igemm__avx512.c) on the shapes
 * its run-time geometry cuts differently from the small cases of test_conv_tactics.c:
 * inputs large enough that the pixel tiles are walked in several L2 blocks (the last
 * one partial; 3-tile blocks at 256 channels stride 2, two blocks of 60 and 14 tiles at
 * 64 channels 48x48), and stride-2 rows whose phase copies (the vector even/odd split)
 * are around 16 and 32 floats long with pads 0 to 3, so the masked loads and stores
 * meet every boundary; stems with 3 channels (3x3/2 pad 0 as squeezenet's, 7x7/2 pad 3
 * as resnet's). Against the reference executor's Conv plus residual and activation;
 * buffers carry guard floats, failures print the seed. Without AVX-512 (or with
 * NNROUTE_ISA=avx2) the kernel cannot run and the tests return at once. */
#include "conv_step.h"

typedef struct ig_case {
  int n, c, h, w, m, k, s, pad;
  bool bias, res;
  nr_act act;
} ig_case;

/* Runs tactic `id` on case ig (a k x k window, stride s, pad on every side) on `pool`
 * against the reference. */
static void run_case(nr_test_state *t, const char *id, const ig_case *ig, unsigned seed,
                     nr_threadpool *pool) {
  conv_case k = {ig->n, ig->c, ig->h, ig->w, ig->m, ig->k, ig->k, ig->s, ig->s, 1, 1,
                 ig->pad, ig->pad, ig->pad, ig->pad, 1, ig->bias, ig->res, ig->act,
                 ig->act == NR_ACT_CLIP ? -0.5f : 0.1f, 0.5f};
  const nr_tactic *tac = conv_row(id, &k, false);
  REQUIRE(tac, "no %s row", id);
  /* without supports(): conv.winograd_from=auto takes the larger stride-1 planes */
  conv_opts o = {.skip_supports = true};
  conv_check(t, tac, &k, seed, pool, &o, true);
}

#define IGEMM "nr_f32_conv_igemm__avx512"

/* Copies larger than one L2 block: the tiles run block by block, every panel over one
 * block before the next. */
NR_TEST(test_conv_igemm512_blocks_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2), *one = nr_threadpool_create(1);
  static const ig_case cases[] = {
      /* n c   h   w   m   k s pad bias  res   act */
      {1, 256, 30, 30, 24, 3, 2, 1, true, true, NR_ACT_RELU},  /* blocks of 3, 3, 2 tiles */
      {1, 64, 48, 48, 20, 3, 1, 1, true, false, NR_ACT_CLIP},  /* 60 + 14 tiles */
      {2, 200, 22, 21, 13, 3, 2, 1, false, true, NR_ACT_NONE}, /* two images */
      {1, 160, 40, 40, 36, 3, 2, 0, true, false, NR_ACT_SIGMOID},
      {2, 20, 34, 36, 16, 3, 1, 1, true, true, NR_ACT_RELU}, /* two images, stored direct */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, IGEMM, &cases[i], 900u + (unsigned)i, pool);
    run_case(t, IGEMM, &cases[i], 920u + (unsigned)i, one);
  }
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(pool);
}

/* Stride-2 rows of every length from 13 to 36 and around 64 (phase rows of 7 to 33
 * floats), pads 0 to 3, and the stems. */
NR_TEST(test_conv_igemm512_stride2_rows_vs_reference) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2);
  static const nr_act acts[] = {NR_ACT_RELU, NR_ACT_NONE, NR_ACT_LEAKY_RELU, NR_ACT_HARD_SWISH};
  unsigned seed = 950;
  for (int w = 13; w <= 36; w++) {
    ig_case k = {1, 3 + w % 4, 5 + w % 3, w, 8 + w % 9, 3, 2, w % 4, w % 2 == 0, w % 3 == 0,
                 acts[w % 4]};
    run_case(t, IGEMM, &k, seed++, pool);
  }
  static const ig_case more[] = {
      {1, 2, 6, 63, 12, 3, 2, 1, true, false, NR_ACT_NONE},
      {1, 2, 6, 64, 12, 3, 2, 1, true, false, NR_ACT_RELU},
      {1, 2, 6, 65, 12, 3, 2, 3, false, true, NR_ACT_RELU},
      {1, 3, 57, 57, 64, 3, 2, 0, true, false, NR_ACT_RELU}, /* squeezenet's stem, smaller */
      {1, 3, 45, 46, 64, 7, 2, 3, true, false, NR_ACT_RELU}, /* resnet's stem, smaller */
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
    run_case(t, IGEMM, &more[i], 980u + (unsigned)i, pool);
  nr_threadpool_destroy(pool);
}
