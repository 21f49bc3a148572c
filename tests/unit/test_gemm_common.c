/* test_gemm_common.c - the shared GEMM driver (kernels/cpu/gemm/gemm_common.h) on
 * every kernel of the three families (fp32, fp16/bf16, int8): each family's record
 * names the same kernels as its registry; a cfg's blocking obeys the documented rules
 * (mc whole mr tiles, nc whole nr tiles, kc whole kc_unit steps, each at least one);
 * and a plan's parts tile the product exactly: whole panels, no overlap, no gap, on
 * 1 to 16 threads and shapes below, at and above the tiles. The kernels' numbers are
 * checked against the reference by the gemm, lowp and qgemm tests. */
#include "plan/tactic.h"
#include "kernels/cpu/gemm/gemm_common.h"
#include "kernels/cpu/gemm/gemm_impl.h"
#include "kernels/cpu/lpgemm/lpgemm_impl.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "unit.h"

#include <string.h>

static const nr_gemm_family *family_of(int fam) {
  return fam == 0 ? &nr_gemm_f32_family : fam == 1 ? &nr_lpgemm_family : &nr_qgemm_family;
}

NR_TEST(gemm_common_family_records) {
  int counts[3] = {nr_gemm_ukernel_count(), nr_lpgemm_ukernel_count(),
                   nr_qgemm_ukernel_count()};
  for (int fam = 0; fam < 3; fam++) {
    const nr_gemm_family *f = family_of(fam);
    REQUIRE(f->count == counts[fam], "family %d", fam);
    for (int i = 0; i < f->count; i++)
      CHECK(nr_gemm_family_find(f, f->kernels[i].name) == i, "family %d kernel %d", fam, i);
    CHECK(nr_gemm_family_find(f, "nr_no_such_gemm") == -1);
    CHECK(!nr_gemm_family_has(f, f->count) && !nr_gemm_family_has(f, -1));
  }
  for (int i = 0; i < counts[0]; i++)
    CHECK(!strcmp(nr_gemm_f32_family.kernels[i].name, nr_gemm_ukernel_get(i)->name) &&
          nr_gemm_f32_family.kernels[i].mr == nr_gemm_ukernel_get(i)->mr &&
          nr_gemm_f32_family.kernels[i].nr == nr_gemm_ukernel_get(i)->nr);
  for (int i = 0; i < counts[1]; i++)
    CHECK(!strcmp(nr_lpgemm_family.kernels[i].name, nr_lpgemm_ukernel_get(i)->name) &&
          nr_lpgemm_family.kernels[i].mr == nr_lpgemm_ukernel_get(i)->mr &&
          nr_lpgemm_family.kernels[i].nr == nr_lpgemm_ukernel_get(i)->nr);
  for (int i = 0; i < counts[2]; i++)
    CHECK(!strcmp(nr_qgemm_family.kernels[i].name, nr_qgemm_ukernel_get(i)->name) &&
          nr_qgemm_family.kernels[i].mr == nr_qgemm_ukernel_get(i)->mr &&
          nr_qgemm_family.kernels[i].nr == nr_qgemm_ukernel_get(i)->nr);
}

/* The blocking of a cfg, including a zero and an odd one, follows the rules. */
NR_TEST(gemm_common_blocking_rules) {
  static const uint16_t sizes[][3] = {{0, 0, 0}, {1, 1, 1}, {37, 100, 29}, {96, 256, 512},
                                      {500, 1000, 4096}};
  for (int fam = 0; fam < 3; fam++) {
    const nr_gemm_family *f = family_of(fam);
    for (int uk = 0; uk < f->count; uk++) {
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        nr_gemm_cfg g = {(uint16_t)uk, sizes[s][0], sizes[s][1], sizes[s][2]};
        nr_gemm_blocking bl = nr_gemm_blocking_get(f, g);
        CHECK(bl.uk == uk && bl.mr == f->kernels[uk].mr && bl.nr == f->kernels[uk].nr,
              "family %d kernel %d", fam, uk);
        CHECK(bl.mc >= bl.mr && bl.mc % bl.mr == 0 && bl.nc >= bl.nr && bl.nc % bl.nr == 0 &&
                  bl.kc >= 1,
              "family %d kernel %d cfg %u/%u/%u: mc %lld nc %lld kc %lld", fam, uk, g.mc,
              g.kc, g.nc, (long long)bl.mc, (long long)bl.nc, (long long)bl.kc);
      }
    }
    nr_gemm_blocking bad = nr_gemm_blocking_get(f, (nr_gemm_cfg){(uint16_t)f->count, 0, 0, 0});
    CHECK(nr_gemm_family_has(f, bad.uk), "family %d: a bad index falls back", fam);
  }
}

/* Every plan's parts cover [0, m) x [0, n) exactly once, in whole panels. */
NR_TEST(gemm_common_parts_tile_the_product) {
  static const int64_t dims[] = {1, 5, 16, 17, 63, 200, 1000};
  static const int threads[] = {1, 2, 3, 16};
  for (int fam = 0; fam < 3; fam++) {
    const nr_gemm_family *f = family_of(fam);
    for (int uk = 0; uk < f->count; uk++) {
      nr_gemm_cfg g = {(uint16_t)uk, 0, 0, 0};
      for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++) {
        for (size_t b = 0; b < sizeof dims / sizeof dims[0]; b++) {
          for (size_t th = 0; th < sizeof threads / sizeof threads[0]; th++) {
            int64_t m = dims[a], n = dims[b], k = 300;
            nr_gemm_plan p = nr_gemm_plan_make(f, g, NR_GEMM_DIM_AUTO, m, n, k, threads[th]);
            REQUIRE(p.parts >= 1 && p.parts <= threads[th] * 64, "parts %d", p.parts);
            int64_t covered = 0, prev_end = 0;
            bool ok = true;
            for (int q = 0; q < p.parts; q++) {
              int64_t r0, r1, c0, c1;
              nr_gemm_plan_range(&p, q, &r0, &r1, &c0, &c1);
              if (r0 >= r1 || c0 >= c1)
                continue; /* an empty part */
              int64_t lo = p.split == NR_GEMM_DIM_M ? r0 : c0;
              int64_t hi = p.split == NR_GEMM_DIM_M ? r1 : c1;
              bool whole = p.split == NR_GEMM_DIM_M ? (c0 == 0 && c1 == n) : (r0 == 0 && r1 == m);
              ok = ok && whole && lo == prev_end && r0 % p.bl.mr == 0 && c0 % p.bl.nr == 0;
              prev_end = hi;
              covered += (r1 - r0) * (c1 - c0);
            }
            int64_t extent = p.split == NR_GEMM_DIM_M ? m : n;
            CHECK(ok && prev_end == extent && covered == m * n,
                  "family %d kernel %d %lldx%lld on %d threads: %d parts, split %d",
                  fam, uk, (long long)m, (long long)n, threads[th], p.parts, p.split);
          }
        }
      }
    }
  }
}

/* nr_gemm_even_kc: equal blocks, in quanta, never a short remainder. */
NR_TEST(gemm_common_even_kc) {
  CHECK(nr_gemm_even_kc(576, 256, 8) == 192 && nr_gemm_even_kc(1024, 256, 8) == 256);
  CHECK(nr_gemm_even_kc(0, 256, 8) == 8 && nr_gemm_even_kc(3, 1024, 4) == 4);
  CHECK(nr_gemm_even_kc(1030, 1024, 4) == 516 && nr_gemm_even_kc(257, 256, 8) == 136);
}

/* ---- the loop nest ------------------------------------------------------------------ */

/* What a run of the nest did, recorded by hooks that pack nothing. */
typedef struct nest_log {
  int64_t m, n, k, mr, nr;
  int visits[8][8][8];  /* [row tile][column tile][K block] */
  int finals[64][64];   /* per element of C */
  int bad;              /* a tile with wrong flags, extent, panels or kind */
  int packs_a, packs_b;
} nest_log;

#define NEST_KC 8 /* the test's kc */
static char nest_a[1 << 16], nest_b[1 << 16];

static const void *log_pack_a(const void *job, void *ws, const nr_gemm_at *at) {
  (void)job, ((nest_log *)ws)->packs_a++;
  return nest_a + at->ic;
}

static const void *log_pack_b(const void *job, void *ws, const nr_gemm_at *at) {
  (void)job, ((nest_log *)ws)->packs_b++;
  return nest_b + at->jc;
}

static void log_tile(nest_log *g, const nr_gemm_at *at, const nr_gemm_tile *t, bool edge) {
  int64_t kblk = at->pc / NEST_KC, ir = t->row - at->ic, jr = t->col - at->jc;
  int want = (at->pc > 0 ? NR_GEMM_ACC : 0) | (at->pc + at->kb >= g->k ? NR_GEMM_LAST : 0);
  bool ok = at->kflags == want && t->h == nr_gemm_min64(g->mr, g->m - t->row) &&
            t->w == nr_gemm_min64(g->nr, g->n - t->col) &&
            edge == (t->h < g->mr || t->w < g->nr) &&
            t->a == nest_a + at->ic + ir * at->kp * 4 &&
            t->b == nest_b + at->jc + jr * at->kp;
  g->bad += !ok;
  g->visits[t->row / g->mr][t->col / g->nr][kblk]++;
}

static void log_full(const void *job, void *ws, const nr_gemm_at *at,
                     const nr_gemm_tile *t) {
  (void)job, log_tile(ws, at, t, false);
}

static void log_edge(const void *job, void *ws, const nr_gemm_at *at,
                     const nr_gemm_tile *t) {
  (void)job, log_tile(ws, at, t, true);
}

static void log_final(const void *job, void *ws, const nr_gemm_at *at, int64_t col,
                      int64_t cols) {
  nest_log *g = ws;
  (void)job;
  for (int64_t i = at->ic; i < nr_gemm_min64(at->ic + at->mb, g->m); i++)
    for (int64_t j = col; j < nr_gemm_min64(col + cols, g->n); j++)
      g->finals[i][j]++;
}

/* Both orders visit every tile of every part once per K block, with the K-block
 * flags, extents and panel addresses the hooks are promised; every element of C is
 * final once; A and B blocks are prepared as often as each order says. */
NR_TEST(gemm_common_nest_visits_every_tile) {
  static const int64_t dims[][3] = {{1, 1, 1}, {4, 8, 12}, {13, 21, 40}, {24, 40, 9}};
  for (int outer = NR_GEMM_DIM_M; outer <= NR_GEMM_DIM_N; outer++) {
    nr_gemm_nest_ops ops = {outer,    log_pack_a, log_pack_b, log_full,
                            log_edge, log_final,  NULL};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
      for (int parts = 1; parts <= 3; parts++) {
        int64_t m = dims[d][0], n = dims[d][1], k = dims[d][2];
        /* fp32's 4x8 portable kernel, blocks of 2 tiles and K in blocks of 8 */
        nr_gemm_cfg cfg = {
            (uint16_t)nr_gemm_family_find(&nr_gemm_f32_family, "nr_f32_gemm_4x8"), 8,
            NEST_KC, 16};
        nr_gemm_nest nd = {
            nr_gemm_plan_make(&nr_gemm_f32_family, cfg, NR_GEMM_DIM_N, m, n, k, 1), k, 1,
            4, 1};
        nd.plan.parts = parts;
        nest_log g = {.m = m, .n = n, .k = k, .mr = 4, .nr = 8};
        nr_gemm_nest_parts(&nd, &ops, NULL, &g, 0, parts);
        int64_t kblocks = (k + NEST_KC - 1) / NEST_KC, rt = (m + 3) / 4, ct = (n + 7) / 8;
        bool ok = g.bad == 0;
        for (int64_t i = 0; i < rt; i++)
          for (int64_t j = 0; j < ct; j++)
            for (int64_t q = 0; q < kblocks; q++)
              ok = ok && g.visits[i][j][q] == 1;
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++)
            ok = ok && g.finals[i][j] == 1;
        CHECK(ok, "order %d, %lldx%lldx%lld on %d parts: %d bad tiles", outer,
              (long long)m, (long long)n, (long long)k, parts, g.bad);
        CHECK(g.packs_a > 0 && g.packs_b > 0 &&
                  (outer == NR_GEMM_DIM_N ? g.packs_b <= g.packs_a
                                          : g.packs_a <= g.packs_b),
              "order %d: %d A blocks, %d B blocks", outer, g.packs_a, g.packs_b);
      }
    }
  }
}
