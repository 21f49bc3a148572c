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
