/* test_gemm_common.c - the shared GEMM driver (kernels/cpu/gemm/gemm_common.h) makes
 * the decisions the three drivers made before they shared it, for every kernel of
 * every family: the normalized blocking, the threaded dimension and the number of
 * parts, the scratch and packed sizes, and the default cfgs of this machine's ISA
 * level. The expected values are tests/data/gemm_decisions.inc, printed by a
 * throwaway program built against the old drivers (commit 810347f; the file's opening
 * comment says how), so a drift in any rule fails here even where the kernel tests
 * still pass. The split is compared only where there is more than one part: with one
 * part the whole product is the part, whatever the split says (and qgemm.c used to
 * pick it for one thread, the others for all of them). */
#include "compiler/plan.h"
#include "kernels/cpu/gemm/gemm_common.h"
#include "kernels/cpu/gemm/gemm_impl.h"
#include "kernels/cpu/lpgemm/lpgemm_impl.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "unit.h"

#include <string.h>

typedef struct plan_row {
  int fam, uk, mc, kc, nc, split_in;
  int64_t m, n, k;
  int threads;
  int64_t bl_mc, bl_kc, bl_nc;
  int split, parts;
  size_t s[4];
} plan_row;

typedef struct default_row {
  const char *isa;
  int fam, a, b;
  int64_t m, k;
  int uk, mc, kc, nc;
} default_row;

#define GP(fam, uk, mc, kc, nc, si, m, n, k, t, bmc, bkc, bnc, sp, parts, s1, s2, s3, s4) \
  {fam, uk, mc, kc, nc, si, m, n, k, t, bmc, bkc, bnc, sp, parts, {s1, s2, s3, s4}},
#define GD(isa, fam, a, b, m, k, uk, mc, kc, nc)
static const plan_row plans[] = {
#include "../data/gemm_decisions.inc"
};
#undef GP
#undef GD
#define GP(fam, uk, mc, kc, nc, si, m, n, k, t, bmc, bkc, bnc, sp, parts, s1, s2, s3, s4)
#define GD(isa, fam, a, b, m, k, uk, mc, kc, nc) {isa, fam, a, b, m, k, uk, mc, kc, nc},
static const default_row defaults[] = {
#include "../data/gemm_decisions.inc"
};
#undef GP
#undef GD

static const nr_gemm_family *family_of(int fam) {
  return fam == 0 ? &nr_gemm_f32_family : fam == 1 ? &nr_lpgemm_family : &nr_qgemm_family;
}

/* The family's own size functions on the row's shape (the packing plan). */
static void sizes_of(const plan_row *r, nr_gemm_cfg g, size_t s[4]) {
  if (r->fam == 0) {
    s[0] = nr_gemm_scratch_size(g, r->m, r->n, r->k, r->threads);
    s[1] = nr_gemm_packed_a_size(g, r->m, r->k), s[2] = nr_gemm_packed_b_size(g, r->k, r->n);
    s[3] = 0;
  } else if (r->fam == 1) {
    nr_lpgemm_cfg c = {g.ukernel, g.mc, g.kc, g.nc};
    s[0] = nr_lpgemm_scratch_size(c, r->m, r->n, r->k, r->threads);
    s[1] = nr_lpgemm_packed_a_size(c, r->m, r->k);
    s[2] = nr_lpgemm_packed_b_size(c, r->k, r->n), s[3] = 0;
  } else {
    nr_qgemm_cfg c = {g.ukernel, g.mc, g.kc, g.nc};
    s[0] = nr_qgemm_scratch_size(c, r->m, r->n, r->k, r->threads);
    s[1] = nr_qgemm_u8_scratch_size(c, r->m, r->n, r->k, r->threads);
    s[2] = nr_qgemm_packed_w_size(c, r->m, r->k), s[3] = nr_qgemm_packed_w_size(c, r->n, r->k);
  }
}

/* The parts the family's public decision function reports (int8 has none). */
static int public_parts(const plan_row *r, nr_gemm_cfg g, int split) {
  if (r->fam == 0)
    return nr_gemm_threads_for(g, (nr_gemm_split)r->split_in, r->m, r->n, r->k, r->threads);
  if (r->fam == 1) {
    nr_lpgemm_cfg c = {g.ukernel, g.mc, g.kc, g.nc};
    return nr_lpgemm_threads_for(c, split, r->m, r->n, r->k, r->threads);
  }
  return -1;
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

NR_TEST(gemm_common_old_decisions) {
  int bad = 0;
  for (size_t i = 0; i < sizeof plans / sizeof plans[0] && bad < 20; i++) {
    const plan_row *r = &plans[i];
    const nr_gemm_family *f = family_of(r->fam);
    nr_gemm_cfg g = {(uint16_t)r->uk, (uint16_t)r->mc, (uint16_t)r->kc, (uint16_t)r->nc};
    int split = r->split_in & ~NR_GEMM_SPLIT_ANY_THREAD;
    nr_gemm_plan p = nr_gemm_plan_make(f, g, split, r->m, r->n, r->k, r->threads);
    size_t s[4];
    sizes_of(r, g, s);
    int pub = public_parts(r, g, p.split);
    bool ok = p.bl.mc == r->bl_mc && p.bl.kc == r->bl_kc && p.bl.nc == r->bl_nc &&
              p.parts == r->parts && (r->parts <= 1 || p.split == r->split) &&
              (pub < 0 || pub == r->parts) && !memcmp(s, r->s, sizeof s);
    CHECK(ok,
          "row %zu: family %d kernel %d cfg %d/%d/%d split %d, %lldx%lldx%lld on %d "
          "threads: blocking %lld/%lld/%lld split %d parts %d (public %d) sizes %zu %zu "
          "%zu %zu, the old drivers %lld/%lld/%lld %d %d, %zu %zu %zu %zu",
          i, r->fam, r->uk, r->mc, r->kc, r->nc, r->split_in, (long long)r->m,
          (long long)r->n, (long long)r->k, r->threads, (long long)p.bl.mc,
          (long long)p.bl.kc, (long long)p.bl.nc, p.split, p.parts, pub, s[0], s[1], s[2],
          s[3], (long long)r->bl_mc, (long long)r->bl_kc, (long long)r->bl_nc, r->split,
          r->parts, r->s[0], r->s[1], r->s[2], r->s[3]);
    bad += !ok;
  }
}

/* The default cfgs of the rows printed under this machine's level (NNROUTE_ISA caps
 * it, so each level can be run here). */
NR_TEST(gemm_common_old_defaults) {
  unsigned isa = nr_cpu_isa();
  const char *level = (isa & NR_ISA_AVX512) ? "avx512" : (isa & NR_ISA_AVX2) ? "avx2"
                                                                            : "portable";
  int seen = 0;
  for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
    const default_row *r = &defaults[i];
    if (strcmp(r->isa, level))
      continue;
    nr_gemm_cfg g;
    if (r->fam == 0) {
      g = nr_gemm_default_cfg(r->m, 100, r->k);
    } else if (r->fam == 1) {
      nr_lpgemm_cfg c = nr_lpgemm_default_cfg((nr_lp_type)r->a, r->m, 100, r->k, r->b);
      g = (nr_gemm_cfg){c.ukernel, c.mc, c.kc, c.nc};
    } else {
      nr_qgemm_cfg c = nr_qgemm_default_cfg(r->a, r->m, 100, r->k);
      g = (nr_gemm_cfg){c.ukernel, c.mc, c.kc, c.nc};
    }
    CHECK(g.ukernel == r->uk && g.mc == r->mc && g.kc == r->kc && g.nc == r->nc,
          "%s family %d (%d, %d) M %lld K %lld: %u %u %u %u, the old drivers %d %d %d %d",
          level, r->fam, r->a, r->b, (long long)r->m, (long long)r->k, g.ukernel, g.mc,
          g.kc, g.nc, r->uk, r->mc, r->kc, r->nc);
    seen++;
  }
  CHECK(seen == 270, "%d rows for %s", seen, level);
}

/* nr_gemm_even_kc: equal blocks, in quanta, never a short remainder. */
NR_TEST(gemm_common_even_kc) {
  CHECK(nr_gemm_even_kc(576, 256, 8) == 192 && nr_gemm_even_kc(1024, 256, 8) == 256);
  CHECK(nr_gemm_even_kc(0, 256, 8) == 8 && nr_gemm_even_kc(3, 1024, 4) == 4);
  CHECK(nr_gemm_even_kc(1030, 1024, 4) == 516 && nr_gemm_even_kc(257, 256, 8) == 136);
}
