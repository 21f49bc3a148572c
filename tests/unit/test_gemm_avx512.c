/* test_gemm_avx512.c - what the AVX-512 path of the GEMM family adds beyond
 * test_gemm.c (which runs every runnable micro-kernel of gemm_ukernels.inc through
 * the loop nest with small blocking): each *__avx512 micro-kernel called directly on
 * one tile (acc 0/1, alpha, k = 0, 1, odd, long; guard words around the tile and in
 * C's row padding), each through nr_gemm at the blocking the heuristic gives it
 * (M, N, K around its tile and kc; A and B raw, transposed, pre-packed), the AVX-512
 * epilogue against the portable one (every activation and bias form, widths around
 * the 16-lane mask, NaN inputs), the default configuration, and the ISA cap:
 * NNROUTE_ISA=avx2 (in a child process, since detection runs once) must hide
 * AVX-512. Kernel tests skip, saying so, where the CPU or OS lacks AVX-512. */
#include "kernels/cpu/gemm/gemm_impl.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GUARD 32
#define GUARD_BITS 0x7fc0beefu /* a NaN pattern nothing computes */

static bool have_avx512(void) {
  return (nr_cpu_isa() & NR_ISA_AVX512) != 0;
}

static bool is_avx512(const nr_gemm_ukernel *u) {
  return u->isa == NR_ISA_AVX512;
}

/* A buffer of n floats between GUARD guard words on each side. */
static float *guarded(int64_t n) {
  uint32_t *p = malloc(sizeof(uint32_t) * (size_t)(n + 2 * GUARD));
  for (int64_t i = 0; i < n + 2 * GUARD; i++)
    p[i] = GUARD_BITS;
  return (float *)(p + GUARD);
}

static void guarded_free(float *p) {
  free((uint32_t *)p - GUARD);
}

/* True when no word outside the m x n block (leading dimension ld) of a guarded
 * buffer of m * ld floats was written. */
static bool guards_intact(const float *c, int64_t m, int64_t n, int64_t ld) {
  const uint32_t *w = (const uint32_t *)c - GUARD;
  for (int64_t i = 0; i < m * ld + 2 * GUARD; i++) {
    int64_t at = i - GUARD;
    bool inside = at >= 0 && at < m * ld && at % ld < n;
    if (!inside && w[i] != GUARD_BITS)
      return false;
  }
  return true;
}

/* ---- micro-kernels on one tile ---------------------------------------------------- */

/* One direct call: C (mr x nr, ldc = nr + 5) = [C +] alpha * A_panel * B_panel. */
static void check_tile(nr_test_state *t, int uk, int64_t k, float alpha, int acc,
                       uint64_t seed) {
  const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
  nr_rng r = nr_rng_make(seed);
  int mr = u->mr, nr = u->nr;
  int64_t ldc = nr + 5;
  float *a = malloc(sizeof(float) * (size_t)(k * mr + 1));
  float *b = malloc(sizeof(float) * (size_t)(k * nr + 1));
  for (int64_t i = 0; i < k * mr; i++)
    a[i] = nr_rng_pm1(&r);
  for (int64_t i = 0; i < k * nr; i++)
    b[i] = nr_rng_pm1(&r);
  float *c = guarded(mr * ldc), *c0 = malloc(sizeof(float) * (size_t)(mr * nr));
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++)
      c[i * ldc + j] = c0[i * nr + j] = nr_rng_pm1(&r);
  nr_gemm_ukernel_fn_get(uk)(k, a, b, c, ldc, alpha, acc);
  CHECK(guards_intact(c, mr, nr, ldc), "%s k=%lld acc=%d: guard overwritten (seed %llu)",
        u->name, (long long)k, acc, (unsigned long long)seed);
  int bad = 0;
  for (int i = 0; i < mr && !bad; i++)
    for (int j = 0; j < nr && !bad; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += (double)a[p * mr + i] * b[p * nr + j];
      double want = alpha * s + (acc ? c0[i * nr + j] : 0.0);
      float got = c[i * ldc + j];
      if (!(fabs(got - want) <= 1e-5 * (double)(k + 1) * (1 + fabs(want)))) {
        CHECK(false, "%s k=%lld alpha=%g acc=%d: C[%d,%d] = %g, want %g (seed %llu)",
              u->name, (long long)k, alpha, acc, i, j, got, want,
              (unsigned long long)seed);
        bad = 1;
      }
    }
  free(a), free(b), free(c0);
  guarded_free(c);
}

NR_TEST(gemm_avx512_ukernel_tile) {
  SKIP_UNLESS(have_avx512(), "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  uint64_t seed = 5000;
  int64_t ks[] = {0, 1, 2, 3, 7, 64, 255, 257};
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    if (!is_avx512(nr_gemm_ukernel_get(uk)))
      continue;
    for (int ki = 0; ki < 8; ki++)
      for (int acc = 0; acc < 2; acc++, seed++)
        check_tile(t, uk, ks[ki], acc ? 0.75f : 1.0f, acc, seed);
  }
}

/* ---- through nr_gemm at the default blocking ----------------------------------------- */

/* C = alpha * op(A) * op(B) through nr_gemm with cfg, A and B raw, transposed or
 * pre-packed (mode bits), against a double loop; C has guard words and row padding. */
static bool check_gemm(nr_test_state *t, nr_gemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                       int mode, uint64_t seed) {
  bool ta = mode & 1, tb = mode & 2, pa = mode & 4, pb = mode & 8;
  float alpha = (mode & 1) ? 0.5f : 1.0f;
  nr_rng r = nr_rng_make(seed);
  int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
  int64_t na = (ta ? k : m) * lda, nb = (tb ? n : k) * ldb;
  float *a = malloc(sizeof(float) * (size_t)(na + 1)), *b = malloc(sizeof(float) * (size_t)(nb + 1));
  for (int64_t i = 0; i < na; i++)
    a[i] = nr_rng_pm1(&r);
  for (int64_t i = 0; i < nb; i++)
    b[i] = nr_rng_pm1(&r);
  nr_gemm_operand oa = {a, lda, ta, false}, ob = {b, ldb, tb, false};
  float *bufa = NULL, *bufb = NULL;
  if (pa) {
    bufa = aligned_alloc(64, (nr_gemm_packed_a_size(cfg, m, k) + 64) / 64 * 64);
    nr_gemm_pack_a(cfg, m, k, oa, bufa);
    oa = (nr_gemm_operand){bufa, 0, false, true};
  }
  if (pb) {
    bufb = aligned_alloc(64, (nr_gemm_packed_b_size(cfg, k, n) + 64) / 64 * 64);
    nr_gemm_pack_b(cfg, k, n, ob, bufb);
    ob = (nr_gemm_operand){bufb, 0, false, true};
  }
  float *c = guarded(m * ldc);
  void *scratch = malloc(nr_gemm_scratch_size(cfg, m, n, k, 1));
  nr_gemm(cfg, m, n, k, alpha, oa, ob, c, ldc, NULL, scratch, NULL, 1);
  const char *name = nr_gemm_ukernel_get(cfg.ukernel)->name;
  bool ok = guards_intact(c, m, n, ldc);
  CHECK(ok, "%s m=%lld n=%lld k=%lld mode=%d: guard overwritten (seed %llu)", name,
        (long long)m, (long long)n, (long long)k, mode, (unsigned long long)seed);
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
             (tb ? b[j * ldb + p] : b[p * ldb + j]);
      double want = alpha * s;
      if (!(fabs(c[i * ldc + j] - want) <= 1e-5 * (double)(k + 1) * (1 + fabs(want)))) {
        CHECK(false, "%s m=%lld n=%lld k=%lld mode=%d: C[%lld,%lld] = %g, want %g (seed %llu)",
              name, (long long)m, (long long)n, (long long)k, mode, (long long)i,
              (long long)j, c[i * ldc + j], want, (unsigned long long)seed);
        ok = false;
      }
    }
  free(a), free(b), free(bufa), free(bufb), free(scratch);
  guarded_free(c);
  return ok;
}

NR_TEST(gemm_avx512_default_blocking) {
  SKIP_UNLESS(have_avx512(), "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  uint64_t seed = 6000;
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if (!is_avx512(u))
      continue;
    int64_t ms[] = {1, u->mr - 1, u->mr, u->mr + 1, 12 * u->mr + 5};
    int64_t ns[] = {1, 15, 17, u->nr, u->nr + 1, 2 * u->nr + 7};
    int64_t ks[] = {1, 13, 256, 300, 600};
    int fails = 0;
    for (int mi = 0; mi < 5; mi++)
      for (int ni = 0; ni < 6; ni++)
        for (int ki = 0; ki < 5 && fails < 3; ki++) {
          int64_t m = ms[mi], n = ns[ni], k = ks[ki];
          if (m < 1 || (u->mr == 1 && m > 4))
            continue;
          /* big shapes only raw/raw and fully packed: the loop nest is shared */
          int modes = m * n * k > 200000 ? 2 : 16;
          for (int mode = 0; mode < modes; mode++, seed++) {
            int md = modes == 2 ? (mode ? 12 : 0) : mode;
            nr_gemm_cfg cfg = nr_gemm_default_cfg(m, n, k);
            int tiles = cfg.mc / nr_gemm_ukernel_get(cfg.ukernel)->mr;
            cfg.ukernel = (uint16_t)uk;
            cfg.mc = (uint16_t)(tiles * u->mr);
            fails += !check_gemm(t, cfg, m, n, k, md, seed);
          }
        }
  }
}

NR_TEST(gemm_avx512_default_cfg) {
  SKIP_UNLESS(have_avx512(), "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_gemm_cfg d = nr_gemm_default_cfg(128, 784, 1152);
  CHECK(!strcmp(nr_gemm_ukernel_get(d.ukernel)->name, "nr_f32_gemm_12x32__avx512"));
  CHECK(d.kc <= 256 && d.mc % 12 == 0 && d.nc % 32 == 0, "mc %d kc %d nc %d", d.mc, d.kc,
        d.nc);
  CHECK(!strcmp(nr_gemm_ukernel_get(nr_gemm_default_cfg(1, 1000, 2048).ukernel)->name,
                "nr_f32_gemm_1x32__avx512"));
  /* K cut into equal blocks of at most 256 */
  CHECK(nr_gemm_default_cfg(64, 64, 576).kc == 192);
  CHECK(nr_gemm_default_cfg(64, 64, 1024).kc == 256);
  CHECK(nr_gemm_default_cfg(64, 64, 24).kc == 24);
}

/* ---- the epilogue ---------------------------------------------------------------- */

/* The AVX-512 epilogue equals the portable one on an m x n block at (row, col) of a
 * larger C, bit for bit except with a residual (fused multiply-add: one rounding). */
static void check_epilogue(nr_test_state *t, const nr_epilogue *ep, int64_t n,
                           uint64_t seed) {
  enum { M = 3, LDC = 70, COL = 3 };
  nr_rng r = nr_rng_make(seed);
  float *x = guarded(M * LDC), *y = guarded(M * LDC);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < n; j++) {
      float v = 4 * nr_rng_pm1(&r);
      if ((i * n + j) % 11 == 5)
        v = NAN;
      if ((i * n + j) % 13 == 7)
        v = -0.0f;
      x[i * LDC + j] = y[i * LDC + j] = v;
    }
  nr_gemm_epilogue_portable(ep, 1, COL, M, n, x, LDC);
  nr_gemm_epilogue__avx512(ep, 1, COL, M, n, y, LDC);
  CHECK(guards_intact(y, M, n, LDC), "act %s n=%lld: guard overwritten (seed %llu)",
        nr_act_name(ep->act), (long long)n, (unsigned long long)seed);
  int bad = 0;
  for (int64_t i = 0; i < M && !bad; i++)
    for (int64_t j = 0; j < n && !bad; j++) {
      float a = x[i * LDC + j], b = y[i * LDC + j];
      bool same = ep->residual ? (isnan(a) && isnan(b)) || fabsf(a - b) <= 1e-6f * (1 + fabsf(a))
                               : !memcmp(&a, &b, sizeof a) || (isnan(a) && isnan(b));
      if (!same) {
        CHECK(false, "act %s bias %d/%d resid %d n=%lld: [%lld,%lld] avx512 %g, portable %g "
              "(seed %llu)", nr_act_name(ep->act), ep->bias != NULL, ep->bias_per_row,
              ep->residual != NULL, (long long)n, (long long)i, (long long)j, b, a,
              (unsigned long long)seed);
        bad = 1;
      }
    }
  guarded_free(x);
  guarded_free(y);
}

NR_TEST(gemm_avx512_epilogue_matches_portable) {
  SKIP_UNLESS(have_avx512(), "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_rng r = nr_rng_make(7000);
  float bias[80], res[4 * 80];
  for (int i = 0; i < 80; i++)
    bias[i] = nr_rng_pm1(&r);
  for (int i = 0; i < 4 * 80; i++)
    res[i] = nr_rng_pm1(&r);
  int64_t widths[] = {1, 7, 15, 16, 17, 31, 32, 33, 64};
  uint64_t seed = 7001;
  for (int act = 0; act < NR_ACT_COUNT; act++)
    for (int form = 0; form < 5; form++)
      for (int wi = 0; wi < 9; wi++, seed++) {
        nr_epilogue ep = {.act = (nr_act)act, .act_a = 0.1f, .act_b = 0.6f};
        if (act == NR_ACT_CLIP)
          ep.act_a = -0.25f;
        if (act == NR_ACT_HARD_SIGMOID)
          ep.act_a = 0.2f, ep.act_b = 0.5f;
        if (form == 1)
          ep.bias = bias, ep.bias_per_row = true;
        if (form == 2 || form == 4)
          ep.bias = bias;
        if (form >= 3)
          ep.residual = res, ep.ldr = 80, ep.beta = form == 3 ? 1.0f : 0.75f;
        check_epilogue(t, &ep, widths[wi], seed);
      }
}

/* ---- detection and the ISA cap ------------------------------------------------------ */

NR_TEST(gemm_avx512_isa_implies_avx2) {
  unsigned isa = nr_cpu_isa();
  CHECK(!(isa & NR_ISA_AVX512) || (isa & NR_ISA_AVX2));
  /* every AVX-512 kernel is selectable exactly when the ISA bit is set */
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if (is_avx512(u) && !(isa & NR_ISA_AVX512))
      CHECK(nr_gemm_default_cfg(64, 64, 64).ukernel != uk &&
            nr_gemm_default_cfg(1, 64, 64).ukernel != uk);
  }
}

/* Runs in the child that gemm_avx512_isa_cap starts with NNROUTE_ISA=avx2; in a plain
 * run (no NR_UNIT_ISA_PROBE) it does nothing. */
NR_TEST(gemm_avx512_isa_probe) {
  const char *probe = getenv("NR_UNIT_ISA_PROBE");
  SKIP_UNLESS(probe, "runs only as gemm_avx512_isa_cap's child (NR_UNIT_ISA_PROBE)");
  unsigned isa = nr_cpu_isa();
  CHECK(!(isa & NR_ISA_AVX512), "NNROUTE_ISA=%s left AVX-512 on", probe);
  const nr_gemm_ukernel *d = nr_gemm_ukernel_get(nr_gemm_default_cfg(64, 64, 64).ukernel);
  CHECK(!is_avx512(d), "default kernel %s under NNROUTE_ISA=%s", d->name, probe);
  if (!strcmp(probe, "portable"))
    CHECK(isa == 0 && d->isa == 0);
}

NR_TEST(gemm_avx512_isa_cap) {
  static const char *const caps[] = {"avx2", "portable"};
  for (int i = 0; i < 2; i++) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      setenv("NNROUTE_ISA", caps[i], 1);
      setenv("NR_UNIT_ISA_PROBE", caps[i], 1);
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0)
        dup2(devnull, 1); /* the child's "N passed" line */
      execl("/proc/self/exe", "nr_unit", "gemm_avx512_isa_probe", (char *)NULL);
      _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "child with NNROUTE_ISA=%s: status %d", caps[i], status);
  }
}
