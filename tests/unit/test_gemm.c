/* test_gemm.c - the packed GEMM (src/kernels/cpu/gemm) against a naive triple loop in
 * double: every micro-kernel of gemm_ukernels.inc that this machine can run, on
 * shapes around its tile (M, N, K below, at and above mr, nr and kc, with small mc/nc
 * so every blocking loop turns), raw / transposed / pre-packed operands, every
 * epilogue, guard bytes around C (and in its row padding), and threaded runs that
 * must equal the single-threaded result bit for bit. Failures print the seed. */
#include "kernels/cpu/gemm/gemm_impl.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16
#define GUARD_BITS 0x7fc0dead /* a NaN pattern nothing computes */

static bool uk_runs_here(const nr_gemm_ukernel *u) {
  return (u->isa & nr_cpu_isa()) == u->isa;
}

typedef struct problem {
  int64_t m, n, k;
  bool ta, tb, pa, pb; /* transposed / pre-packed */
  float alpha;
  nr_epilogue ep;
} problem;

/* Naive reference of the whole contract, in double. */
static void reference(const problem *p, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float *c, int64_t ldc) {
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t j = 0; j < p->n; j++) {
      double s = 0;
      for (int64_t q = 0; q < p->k; q++) {
        double x = p->ta ? a[q * lda + i] : a[i * lda + q];
        double y = p->tb ? b[j * ldb + q] : b[q * ldb + j];
        s += x * y;
      }
      float v = (float)(p->alpha * s);
      const nr_epilogue *e = &p->ep;
      if (e->bias)
        v += e->bias_per_row ? e->bias[i] : e->bias[j];
      if (e->residual)
        v += e->beta * e->residual[i * e->ldr + j];
      nr_act_apply(e->act, e->act_a, e->act_b, &v, 1);
      c[i * ldc + j] = v;
    }
}

/* Runs one problem with cfg and compares; returns false on failure (reported). */
static bool check_problem(nr_test_state *t, nr_gemm_cfg cfg, const problem *p,
                          uint64_t seed, nr_threadpool *pool, int threads,
                          nr_gemm_split split) {
  nr_rng r = nr_rng_make(seed);
  int64_t m = p->m, n = p->n, k = p->k;
  int64_t lda = (p->ta ? m : k) + 1, ldb = (p->tb ? k : n) + 2, ldc = n + 3;
  float *a = nr_rng_pm1_floats(&r, (p->ta ? k : m) * lda);
  float *b = nr_rng_pm1_floats(&r, (p->tb ? n : k) * ldb);
  int64_t csize = m * ldc + 2 * GUARD;
  uint32_t *cbuf = malloc(sizeof(float) * (size_t)csize);
  for (int64_t i = 0; i < csize; i++)
    cbuf[i] = GUARD_BITS;
  float *c = (float *)(cbuf + GUARD);
  float *want = malloc(sizeof(float) * (size_t)(m * n + 1));
  reference(p, a, lda, b, ldb, want, n);

  nr_gemm_operand oa = {a, lda, p->ta, false}, ob = {b, ldb, p->tb, false};
  float *pa = NULL, *pb = NULL;
  if (p->pa) {
    pa = aligned_alloc(64, (nr_gemm_packed_a_size(cfg, m, k) + 64) / 64 * 64);
    nr_gemm_pack_a(cfg, m, k, oa, pa);
    oa = (nr_gemm_operand){pa, 0, false, true};
  }
  if (p->pb) {
    pb = aligned_alloc(64, (nr_gemm_packed_b_size(cfg, k, n) + 64) / 64 * 64);
    nr_gemm_pack_b(cfg, k, n, ob, pb);
    ob = (nr_gemm_operand){pb, 0, false, true};
  }
  void *scratch = malloc(nr_gemm_scratch_size(cfg, m, n, k, threads));
  nr_gemm_split_run(cfg, split, m, n, k, p->alpha, oa, ob, c, ldc, &p->ep, scratch, pool,
                    threads);

  bool ok = true;
  const char *uk = nr_gemm_ukernel_get(cfg.ukernel)->name;
  for (int64_t i = 0; i < csize && ok; i++) {
    bool inside = i >= GUARD && i < GUARD + m * ldc && (i - GUARD) % ldc < n;
    if (inside)
      continue;
    if (cbuf[i] != GUARD_BITS) {
      CHECK(false, "%s m=%lld n=%lld k=%lld: guard word %lld overwritten (seed %llu)", uk,
            (long long)m, (long long)n, (long long)k, (long long)i,
            (unsigned long long)seed);
      ok = false;
    }
  }
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      float g = c[i * ldc + j], w = want[i * n + j];
      float tol = 1e-5f * (float)(k + 1) * (1 + fabsf(w));
      if (!(fabsf(g - w) <= tol)) {
        CHECK(false,
              "%s m=%lld n=%lld k=%lld ta=%d tb=%d pa=%d pb=%d act=%s: C[%lld,%lld] = %g, "
              "want %g (seed %llu)",
              uk, (long long)m, (long long)n, (long long)k, p->ta, p->tb, p->pa, p->pb,
              nr_act_name(p->ep.act), (long long)i, (long long)j, g, w,
              (unsigned long long)seed);
        ok = false;
      }
    }
  free(a), free(b), free(cbuf), free(want), free(pa), free(pb), free(scratch);
  return ok;
}

/* Small blocking so the mc, kc and nc loops all turn on small shapes. */
static nr_gemm_cfg small_cfg(int uk) {
  const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
  return (nr_gemm_cfg){(uint16_t)uk, (uint16_t)(2 * u->mr), 32, (uint16_t)(2 * u->nr)};
}

NR_TEST(gemm_ukernels_around_tile) {
  uint64_t seed = 1;
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if (!uk_runs_here(u))
      continue;
    nr_gemm_cfg cfg = small_cfg(uk);
    int64_t ms[] = {1, u->mr - 1, u->mr, u->mr + 1, 2 * u->mr + 3};
    int64_t ns[] = {1, u->nr - 1, u->nr, u->nr + 1, 2 * u->nr + 3};
    int64_t ks[] = {1, 7, cfg.kc, cfg.kc + 1};
    int fails = 0;
    for (int mi = 0; mi < 5; mi++)
      for (int ni = 0; ni < 5; ni++)
        for (int ki = 0; ki < 4; ki++)
          for (int mode = 0; mode < 16 && fails < 5; mode++, seed++) {
            if (ms[mi] < 1)
              continue;
            problem p = {ms[mi], ns[ni], ks[ki], mode & 1, mode & 2, mode & 4, mode & 8,
                         (mode & 1) ? 0.5f : 1.0f, {0}};
            fails += !check_problem(t, cfg, &p, seed, NULL, 1, NR_GEMM_SPLIT_AUTO);
          }
  }
}

NR_TEST(gemm_epilogues) {
  uint64_t seed = 1000;
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if (!uk_runs_here(u))
      continue;
    nr_gemm_cfg cfg = small_cfg(uk);
    int64_t m = 2 * u->mr + 3, n = 2 * u->nr + 3, k = cfg.kc + 1;
    nr_rng r = nr_rng_make(seed);
    float *bias_r = nr_rng_pm1_floats(&r, m), *bias_c = nr_rng_pm1_floats(&r, n), *res = nr_rng_pm1_floats(&r, m * (n + 5));
    for (int act = 0; act < NR_ACT_COUNT; act++)
      for (int form = 0; form < 4; form++, seed++) {
        nr_epilogue ep = {.act = (nr_act)act, .act_a = 0.1f, .act_b = 0.6f};
        if (act == NR_ACT_CLIP)
          ep.act_a = -0.25f;
        if (act == NR_ACT_HARD_SIGMOID)
          ep.act_a = 0.2f, ep.act_b = 0.5f;
        if (form == 1)
          ep.bias = bias_r, ep.bias_per_row = true;
        if (form == 2)
          ep.bias = bias_c;
        if (form == 3)
          ep.bias = bias_c, ep.residual = res, ep.ldr = n + 5, ep.beta = 0.75f;
        problem p = {m, n, k, false, form & 1, false, form == 2, 1.5f, ep};
        check_problem(t, cfg, &p, seed, NULL, 1, NR_GEMM_SPLIT_AUTO);
      }
    free(bias_r), free(bias_c), free(res);
  }
}

/* Same blocking, any split and thread count: the same sums in the same order. */
NR_TEST(gemm_threaded_equals_serial) {
  nr_threadpool *pool = nr_threadpool_create(3);
  REQUIRE(pool);
  nr_gemm_cfg cfg = nr_gemm_default_cfg(70, 300, 300);
  int64_t m = 70, n = 300, k = 300;
  nr_rng r = nr_rng_make(77);
  float *a = nr_rng_pm1_floats(&r, m * k), *b = nr_rng_pm1_floats(&r, k * n), *bias = nr_rng_pm1_floats(&r, n);
  float *c1 = malloc(sizeof(float) * (size_t)(m * n)), *c2 = malloc(sizeof(float) * (size_t)(m * n));
  nr_epilogue ep = {.bias = bias, .act = NR_ACT_RELU};
  void *s = malloc(nr_gemm_scratch_size(cfg, m, n, k, 3));
  nr_gemm_operand oa = {a, k, false, false}, ob = {b, n, false, false};
  nr_gemm(cfg, m, n, k, 1, oa, ob, c1, n, &ep, s, NULL, 1);
  for (int split = 0; split < 3; split++) {
    memset(c2, 0, sizeof(float) * (size_t)(m * n));
    nr_gemm_split_run(cfg, (nr_gemm_split)split, m, n, k, 1, oa, ob, c2, n, &ep, s, pool, 3);
    CHECK(!memcmp(c1, c2, sizeof(float) * (size_t)(m * n)), "split %d differs (seed 77)",
          split);
  }
  /* and through the checker, with packed operands and odd shapes */
  for (int split = 1; split < 3; split++) {
    problem p = {37, 91, 300, true, false, split == 1, split == 2, 1.0f, ep};
    p.ep.bias = NULL;
    check_problem(t, cfg, &p, 78 + split, pool, 3, (nr_gemm_split)split);
  }
  free(a), free(b), free(bias), free(c1), free(c2), free(s);
  nr_threadpool_destroy(pool);
}

NR_TEST(gemm_degenerate_and_registry) {
  CHECK(nr_gemm_ukernel_count() >= 2);
  CHECK(nr_gemm_ukernel_get(-1) == NULL && nr_gemm_ukernel_get(nr_gemm_ukernel_count()) == NULL);
  nr_gemm_cfg d = nr_gemm_default_cfg(64, 64, 64);
  CHECK(uk_runs_here(nr_gemm_ukernel_get(d.ukernel)));
  CHECK(nr_gemm_ukernel_get(nr_gemm_default_cfg(1, 1000, 2048).ukernel)->mr == 1);
  /* K = 0: C = epilogue(0) */
  float c[6] = {9, 9, 9, 9, 9, 9}, bias[3] = {1, -2, 3};
  nr_epilogue ep = {.bias = bias, .act = NR_ACT_RELU};
  nr_gemm_operand z = {c, 0, false, false};
  nr_gemm(d, 2, 3, 0, 1, z, z, c, 3, &ep, NULL, NULL, 1);
  CHECK(c[0] == 1 && c[1] == 0 && c[2] == 3 && c[3] == 1 && c[5] == 3);
}

/* The packed layout, element by element, for every runnable kernel (so every packing
 * loop: contiguous runs, the gather, the AVX-512 gather where the CPU has it):
 * region pc * Mpad per kc block, mr-row panels of kb x mr, zero rows past M (B:
 * nr-column panels), and not a float written past the packed size. */
static void check_pack(nr_test_state *t, nr_gemm_cfg cfg, bool is_a, int64_t rows,
                       int64_t k, bool trans, uint64_t seed) {
  const nr_gemm_ukernel *u = nr_gemm_ukernel_get(cfg.ukernel);
  int64_t w = is_a ? u->mr : u->nr, pad = (rows + w - 1) / w * w;
  /* depth-major storage (src[p * ld + i]): transposed A, or B as it is */
  bool deep = is_a ? trans : !trans;
  int64_t ld = (deep ? rows : k) + 3;
  nr_rng r = nr_rng_make(seed);
  float *src = nr_rng_pm1_floats(&r, (deep ? k : rows) * ld);
  size_t bytes = is_a ? nr_gemm_packed_a_size(cfg, rows, k) : nr_gemm_packed_b_size(cfg, k, rows);
  CHECK(bytes == sizeof(float) * (size_t)(pad * k), "%s: packed size %zu", u->name, bytes);
  int64_t nf = (int64_t)(bytes / sizeof(float));
  uint32_t *out = malloc(sizeof(float) * (size_t)(nf + GUARD));
  for (int64_t i = 0; i < nf + GUARD; i++)
    out[i] = GUARD_BITS;
  nr_gemm_operand op = {src, ld, trans, false};
  if (is_a)
    nr_gemm_pack_a(cfg, rows, k, op, (float *)out);
  else
    nr_gemm_pack_b(cfg, k, rows, op, (float *)out);
  int bad = 0;
  for (int64_t pc = 0; pc < k && !bad; pc += cfg.kc) {
    int64_t kb = k - pc < cfg.kc ? k - pc : cfg.kc;
    for (int64_t i = 0; i < pad && !bad; i++)
      for (int64_t p = 0; p < kb && !bad; p++) {
        /* element (row i, depth pc + p) of op(A), or (depth, column i) of op(B) */
        float want = 0;
        if (i < rows)
          want = deep ? src[(pc + p) * ld + i] : src[i * ld + pc + p];
        float got;
        memcpy(&got, &out[pc * pad + (i / w) * w * kb + p * w + i % w], sizeof got);
        if (memcmp(&got, &want, sizeof got)) {
          CHECK(false, "%s pack_%c rows=%lld k=%lld trans=%d: [%lld,%lld] = %g, want %g "
                "(seed %llu)", u->name, is_a ? 'a' : 'b', (long long)rows, (long long)k,
                op.trans, (long long)i, (long long)(pc + p), got, want,
                (unsigned long long)seed);
          bad = 1;
        }
      }
  }
  for (int64_t i = nf; i < nf + GUARD; i++)
    if (out[i] != GUARD_BITS && !bad) {
      CHECK(false, "%s pack_%c rows=%lld k=%lld: wrote past the packed size (seed %llu)",
            u->name, is_a ? 'a' : 'b', (long long)rows, (long long)k,
            (unsigned long long)seed);
      bad = 1;
    }
  free(src), free(out);
}

NR_TEST(gemm_pack_layout) {
  uint64_t seed = 3000;
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if (!uk_runs_here(u))
      continue;
    nr_gemm_cfg cfg = {(uint16_t)uk, (uint16_t)(4 * u->mr), 40, (uint16_t)(4 * u->nr)};
    int64_t ks[] = {1, 15, 16, 17, 40, 83};
    for (int is_a = 0; is_a < 2; is_a++) {
      int w = is_a ? u->mr : u->nr;
      int64_t rows[] = {1, w - 1, w, w + 1, 15, 17, 2 * w + 3};
      for (int ri = 0; ri < 7; ri++)
        for (int ki = 0; ki < 6; ki++)
          for (int trans = 0; trans < 2; trans++, seed++)
            if (rows[ri] > 0)
              check_pack(t, cfg, is_a, rows[ri], ks[ki], trans, seed);
    }
  }
}
