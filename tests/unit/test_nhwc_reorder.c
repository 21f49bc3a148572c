/* test_nhwc_reorder.c - the tiled reorder kernels (reorder.c, transpose.h) against an
 * index-by-index reference written here, exhaustively over small odd shapes: every
 * channel count from 1 to 20 and the ones around the 8-lane register tile and the
 * 64-channel task tile (31..33, 63..65, 129), pixel counts below, at and above 8 and
 * 64, one and two images, all six directions, the portable and (where the machine has
 * it) the AVX2 kernel, on a 1-thread and a 3-thread pool. Every destination starts
 * full of a sentinel, so an element a kernel forgot is caught as surely as a wrong one;
 * NCHW8C pad lanes must come out 0.0f; guard floats after each buffer must survive.
 * Also the transpose and lane-copy kernels alone on strided sub-matrices. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/transpose.h"
#include "plan/tactic.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#define GUARD 37
static const float SENTINEL = -7777.25f;

static const nr_layout dirs[6][2] = {
    {NR_LAYOUT_PLAIN, NR_LAYOUT_NHWC},   {NR_LAYOUT_NHWC, NR_LAYOUT_PLAIN},
    {NR_LAYOUT_PLAIN, NR_LAYOUT_NCHW8C}, {NR_LAYOUT_NCHW8C, NR_LAYOUT_PLAIN},
    {NR_LAYOUT_NHWC, NR_LAYOUT_NCHW8C},  {NR_LAYOUT_NCHW8C, NR_LAYOUT_NHWC}};

static int64_t cpad(nr_layout l, int64_t c) { return l == NR_LAYOUT_NCHW8C ? (c + 7) / 8 * 8 : c; }

/* Physical index of logical (n, c, p) (p = h * W + w) in layout l. */
static int64_t idx(nr_layout l, const int64_t *d, int64_t n, int64_t c, int64_t p) {
  int64_t C = d[1], HW = d[2] * d[3];
  switch (l) {
  case NR_LAYOUT_NHWC: return (n * HW + p) * C + c;
  case NR_LAYOUT_NCHW8C: return ((n * (cpad(l, C) / 8) + c / 8) * HW + p) * 8 + c % 8;
  default: return (n * C + c) * HW + p;
  }
}

static float *filled(int64_t n, float v) {
  float *p = malloc(sizeof(float) * (size_t)(n + GUARD));
  for (int64_t i = 0; i < n + GUARD; i++)
    p[i] = v;
  return p;
}

/* One reorder of one shape; returns false (after recording why) on a mismatch. */
static bool check_one(nr_test_state *t, const int64_t *d, nr_layout from, nr_layout to,
                      unsigned isa, nr_threadpool *pool, unsigned seed) {
  int64_t N = d[0], C = d[1], HW = d[2] * d[3];
  int64_t ns = N * cpad(from, C) * HW, nd = N * cpad(to, C) * HW;
  float *src = filled(ns, SENTINEL), *dst = filled(nd, SENTINEL);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < ns; i++) /* pad lanes of an NCHW8C source get junk on purpose */
    src[i] = (float)nr_rng_int(&rng, 0, 99999) * 0.01f - 500.0f;
  nr_reorder_f32_isa(src, from, dst, to, d, pool, isa);
  bool ok = true;
  for (int64_t n = 0; n < N && ok; n++)
    for (int64_t c = 0; c < cpad(to, C) && ok; c++)
      for (int64_t p = 0; p < HW && ok; p++) {
        float got = dst[idx(to, d, n, c, p)];
        float want = c < C ? src[idx(from, d, n, c, p)] : 0.0f;
        if (memcmp(&got, &want, sizeof got)) { /* bitwise: a -0.0f pad lane fails too */
          CHECK(false, "%s -> %s isa %u dims %lldx%lldx%lldx%lld seed %u: (n %lld, c %lld, "
                "p %lld) = %g, want %g", nr_layout_name(from), nr_layout_name(to), isa,
                (long long)d[0], (long long)d[1], (long long)d[2], (long long)d[3], seed,
                (long long)n, (long long)c, (long long)p, got, want);
          ok = false;
        }
      }
  for (int64_t i = nd; i < nd + GUARD && ok; i++)
    if (dst[i] != SENTINEL) {
      CHECK(false, "%s -> %s isa %u dims %lldx%lldx%lldx%lld: guard %lld overwritten",
            nr_layout_name(from), nr_layout_name(to), isa, (long long)d[0],
            (long long)d[1], (long long)d[2], (long long)d[3], (long long)(i - nd));
      ok = false;
    }
  free(src), free(dst);
  return ok;
}

NR_TEST(nhwc_reorder_exhaustive_small_shapes) {
  static const int64_t cs[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                               15, 16, 17, 18, 19, 20, 31, 32, 33, 63, 64, 65, 129};
  static const int64_t hws[][2] = {{1, 1}, {1, 7}, {2, 4}, {3, 3}, {1, 9},
                                   {7, 9}, {8, 8}, {5, 13}, {3, 43}};
  unsigned isas[2] = {0, NR_ISA_AVX2};
  nr_threadpool *pools[2] = {NULL, nr_threadpool_create(3)};
  REQUIRE(pools[1]);
  int bad = 0, runs = 0;
  for (int ii = 0; ii < 2; ii++) {
    if (isas[ii] & ~nr_cpu_isa())
      continue;
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
      for (size_t h = 0; h < sizeof hws / sizeof hws[0]; h++)
        for (int64_t n = 1; n <= 2; n++)
          for (int k = 0; k < 6 && bad < 5; k++) {
            int64_t d[4] = {n, cs[c], hws[h][0], hws[h][1]};
            unsigned seed = 1000u + (unsigned)(c * 97 + h * 13 + (size_t)n * 5 + (size_t)k);
            bad += !check_one(t, d, dirs[k][0], dirs[k][1], isas[ii], pools[(c + h) % 2], seed);
            runs++;
          }
  }
  CHECK(runs >= 27 * 9 * 2 * 6, "only %d reorders ran", runs);
  nr_threadpool_destroy(pools[1]);
}

/* Larger tensors: several 64 x 64 tiles in both directions, channel and pixel counts
 * that leave partial tiles, through the tactics as the plan runs them. */
NR_TEST(nhwc_reorder_tiles_and_tactics) {
  static const int64_t shapes[][4] = {{1, 200, 9, 15}, {2, 67, 11, 13}, {1, 3, 31, 33},
                                      {1, 130, 1, 1},  {1, 1, 17, 19}};
  nr_threadpool *pool = nr_threadpool_create(2);
  REQUIRE(pool);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int k = 0; k < 6; k++) {
      const int64_t *d = shapes[s];
      unsigned isa = nr_cpu_isa() & NR_ISA_AVX2;
      CHECK(check_one(t, d, dirs[k][0], dirs[k][1], 0, pool, 50u + (unsigned)s),
            "portable, shape %zu", s);
      if (isa)
        CHECK(check_one(t, d, dirs[k][0], dirs[k][1], isa, pool, 60u + (unsigned)s),
              "avx2, shape %zu", s);
      /* the tactic row the layout pass would insert, run as a plan step */
      const nr_tactic *tac = nr_reorder_tactic(dirs[k][0], dirs[k][1]);
      REQUIRE(tac);
      int64_t ns = d[0] * cpad(dirs[k][0], d[1]) * d[2] * d[3];
      int64_t nd = d[0] * cpad(dirs[k][1], d[1]) * d[2] * d[3];
      float *a = filled(ns, 1.5f), *b = filled(nd, SENTINEL);
      nr_slot sa = {.dtype = NR_DTYPE_FLOAT, .rank = 4, .layout = dirs[k][0]};
      memcpy(sa.dims, d, sizeof(int64_t) * 4);
      nr_slot sb = sa;
      sb.layout = dirs[k][1];
      void *in[1] = {a}, *out[1] = {b};
      const nr_slot *ins[1] = {&sa}, *outs[1] = {&sb};
      nr_step st = {.tactic = tac, .node = -1, .n_in = 1, .n_out = 1};
      nr_exec_args ea = {NULL, &st, NULL, in, out, ins, outs, NULL, NULL, pool, NULL};
      CHECK(tac->run(&ea) == NR_OK, "%s", tac->id);
      int64_t wrong = 0;
      for (int64_t n = 0; n < d[0]; n++)
        for (int64_t c = 0; c < cpad(dirs[k][1], d[1]); c++)
          for (int64_t p = 0; p < d[2] * d[3]; p++)
            wrong += b[idx(dirs[k][1], d, n, c, p)] != (c < d[1] ? 1.5f : 0.0f);
      CHECK(!wrong, "%s: %lld wrong elements, shape %zu", tac->id, (long long)wrong, s);
      CHECK(b[nd] == SENTINEL, "%s: guard", tac->id);
      free(a), free(b);
    }
  nr_threadpool_destroy(pool);
}

/* The kernels alone on sub-matrices of larger buffers (lds, ldd wider than the tile),
 * lanes past rows (transpose) and past n (copy_lanes) zeroed, nothing else touched. */
NR_TEST(nhwc_transpose_kernels_strided) {
  typedef void (*fn)(const float *, int64_t, float *, int64_t, int64_t, int64_t, int64_t);
  struct { const char *name; fn f; unsigned isa; bool tr; } ks[] = {
      {"transpose__portable", nr_f32_transpose__portable, 0, true},
      {"transpose__avx2", nr_f32_transpose__avx2, NR_ISA_AVX2, true},
      {"copy_lanes__portable", nr_f32_copy_lanes__portable, 0, false},
      {"copy_lanes__avx2", nr_f32_copy_lanes__avx2, NR_ISA_AVX2, false}};
  const int64_t LD = 80, ROWS = 70;
  for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
    if (ks[k].isa & ~nr_cpu_isa())
      continue;
    for (int64_t rows = 0; rows <= 17; rows++)
      for (int64_t cols = 0; cols <= 17; cols++)
        for (int64_t extra = 0; extra <= 9; extra += 3) {
          int64_t lanes = (ks[k].tr ? rows : cols) + extra;
          float *src = filled(LD * ROWS, 0), *dst = filled(LD * ROWS, SENTINEL);
          for (int64_t i = 0; i < LD * ROWS; i++)
            src[i] = (float)i;
          ks[k].f(src + 3, LD, dst + 5, LD - 1, rows, cols, lanes);
          int64_t wrong = 0;
          for (int64_t r = 0; r < ROWS; r++)
            for (int64_t l = 0; l < LD - 1; l++) {
              int64_t o = 5 + r * (LD - 1) + l; /* dst element (r, l) */
              float want = SENTINEL;
              int64_t dr = ks[k].tr ? cols : rows, n = ks[k].tr ? rows : cols;
              if (r < dr && l < lanes)
                want = l >= n ? 0.0f : ks[k].tr ? src[3 + l * LD + r] : src[3 + r * LD + l];
              wrong += dst[o] != want;
            }
          CHECK(!wrong, "%s rows %lld cols %lld lanes %lld: %lld wrong", ks[k].name,
                (long long)rows, (long long)cols, (long long)lanes, (long long)wrong);
          free(src), free(dst);
        }
  }
}
