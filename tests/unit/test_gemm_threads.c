/* test_gemm_threads.c - how the GEMM splits work over threads, for the products with
 * few rows (M = 1..4: batch-1 Gemm layers, classifier heads) that stream B:
 * nr_parallel_parts (every part run exactly once, part i on thread i when its thread
 * is there, owned and claimed jobs back to back on one pool), the threading decision
 * (nr_gemm_threads_for: one thread below the threshold, one part per thread above it,
 * the switch of units between M = 4 and M = 5), and products around the split points
 * (N at one, two and three column panels and not a multiple, K below, at and above the
 * unblocked depth) on 1, 2 and 3 threads against a naive reference in double, with
 * guard words around C and bit-for-bit equality between thread counts. Every 1-row
 * micro-kernel this machine runs is covered; NNROUTE_ISA=avx2 runs the AVX2 defaults.
 * Failures print the seed. */
#include "kernels/cpu/gemm/gemm_impl.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD 24
#define GUARD_BITS 0x7fc0f00du /* a NaN pattern nothing computes */

/* ---- nr_parallel_parts ------------------------------------------------------------ */

typedef struct parts_arg {
  _Atomic int runs[NR_PARALLEL_PARTS_MAX + 8];
  _Atomic int thread_of[NR_PARALLEL_PARTS_MAX + 8];
  _Atomic int started;
  int parts;
  bool hold; /* every part waits until all parts have started */
} parts_arg;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void parts_task(void *p, int64_t b, int64_t e, int thread) {
  parts_arg *a = p;
  for (int64_t i = b; i < e; i++) {
    atomic_fetch_add(&a->runs[i], 1);
    atomic_store(&a->thread_of[i], thread);
    atomic_fetch_add(&a->started, 1);
  }
  /* Holding every part keeps each thread that has one busy, so nobody can take
   * another's part: each worker must come and, preferring its own, run part ==
   * thread. */
  if (a->hold) {
    double t0 = now_s();
    while (atomic_load(&a->started) < a->parts && now_s() - t0 < 10)
      sched_yield(); /* lets a worker that shares this core run */
  }
}

/* Runs parts once on pool; checks each part ran once; returns the parts whose thread
 * was not their index (-1 when a part ran a wrong number of times). */
static int run_parts(nr_test_state *t, nr_threadpool *pool, int parts, bool hold) {
  parts_arg *a = calloc(1, sizeof *a);
  if (!a)
    return -1;
  a->parts = parts;
  a->hold = hold;
  nr_parallel_parts(pool, parts, parts_task, a);
  int moved = 0, bad = 0;
  for (int i = 0; i < parts && i < NR_PARALLEL_PARTS_MAX + 8; i++) {
    bad += atomic_load(&a->runs[i]) != 1;
    moved += atomic_load(&a->thread_of[i]) != i;
  }
  CHECK(!bad, "parts=%d: %d parts did not run exactly once", parts, bad);
  free(a);
  return bad ? -1 : moved;
}

NR_TEST(threadpool_parts_each_once) {
  nr_threadpool *pool = nr_threadpool_create(3);
  REQUIRE(pool);
  for (int parts = 0; parts <= 5; parts++)
    CHECK(run_parts(t, pool, parts, false) >= 0);
  CHECK(run_parts(t, pool, NR_PARALLEL_PARTS_MAX + 3, false) >= 0); /* the fallback */
  CHECK(run_parts(t, NULL, 3, false) == 2, "NULL pool: all parts on thread 0");
  nr_threadpool_destroy(pool);
  nr_threadpool *one = nr_threadpool_create(1);
  REQUIRE(one);
  CHECK(run_parts(t, one, 1, false) == 0);
  CHECK(run_parts(t, one, 2, false) == 1, "a 1-thread pool runs both parts itself");
  nr_threadpool_destroy(one);
}

/* With every thread held in its part, part i can only run on thread i. */
NR_TEST(threadpool_parts_stay_on_their_thread) {
  for (int n = 2; n <= 4; n++) {
    nr_threadpool *pool = nr_threadpool_create(n);
    REQUIRE(pool);
    for (int rep = 0; rep < 20; rep++) {
      int moved = run_parts(t, pool, n, true);
      CHECK(moved == 0, "pool of %d, call %d: %d parts ran off their thread", n, rep, moved);
    }
    nr_threadpool_destroy(pool);
  }
}

static void add_range(void *p, int64_t b, int64_t e, int thread) {
  (void)thread;
  atomic_fetch_add((_Atomic int64_t *)p, e - b);
}

/* Owned and claimed jobs alternate on one pool: the two job slots are refilled in
 * both modes while late workers may still read them. */
NR_TEST(threadpool_parts_mixed_with_parallel_for) {
  nr_threadpool *pool = nr_threadpool_create(3);
  REQUIRE(pool);
  _Atomic int64_t sum = 0;
  int64_t want = 0;
  for (int i = 0; i < 20000; i++) {
    if (i % 3) {
      int parts = 1 + i % 3;
      nr_parallel_parts(pool, parts, add_range, &sum);
      want += parts;
    } else {
      int64_t n = 1 + i % 29;
      nr_parallel_for(pool, n, 1, 0, add_range, &sum);
      want += n;
    }
  }
  CHECK(atomic_load(&sum) == want, "sum %lld, want %lld", (long long)atomic_load(&sum),
        (long long)want);
  nr_threadpool_destroy(pool);
}

/* ---- the threading decision --------------------------------------------------------- */

NR_TEST(gemm_threads_for_small_m) {
  nr_gemm_cfg c1 = nr_gemm_default_cfg(1, 512, 784);
  int nr = nr_gemm_ukernel_get(c1.ukernel)->nr;
  CHECK(nr_gemm_ukernel_get(c1.ukernel)->mr == 1);
  /* mlp's Gemm layers: 784x512 and 512x256 split, 256x10 does not */
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 512, 784, 2) == 2);
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 256, 512, 2) == 2);
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 10, 256, 2) == 1);
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 512, 784, 1) == 1);
  CHECK(nr_gemm_pick_split(c1, 1, 512, 2) == NR_GEMM_SPLIT_N);
  /* at most one part per column panel; the flag changes nothing here */
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, nr, 1 << 16, 4) == 1);
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, nr + 1, 1 << 16, 4) == 2);
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_N | NR_GEMM_SPLIT_ANY_THREAD, 1, 3 * nr,
                            1 << 16, 4) == 3);
  /* the threshold in bytes of B: find it, then both sides of it */
  int64_t k_lo = 1;
  while (nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 4 * nr, k_lo, 2) == 1 && k_lo < 1 << 20)
    k_lo++;
  CHECK(k_lo > 8 && k_lo < 1 << 20, "no threshold found (k %lld)", (long long)k_lo);
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 4, 4 * nr, k_lo, 2) == 2,
        "M = 4 counts B's bytes as M = 1 does");
  CHECK(nr_gemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 4, 4 * nr, k_lo - 1, 2) == 1);
  /* M = 5 is counted in multiply-adds (64^3), whatever the bytes of B */
  nr_gemm_cfg c5 = nr_gemm_default_cfg(5, 4 * nr, k_lo);
  CHECK(nr_gemm_threads_for(c5, NR_GEMM_SPLIT_AUTO, 5, 4 * nr, k_lo, 2) ==
        (5 * 4 * nr * k_lo >= 64 * 64 * 64 ? 2 : 1));
  CHECK(nr_gemm_threads_for(c5, NR_GEMM_SPLIT_AUTO, 5, 4 * nr, 8, 2) == 1);
  CHECK(nr_gemm_threads_for(c5, NR_GEMM_SPLIT_AUTO, 64, 64, 64, 2) == 2);
  CHECK(nr_gemm_threads_for(c5, NR_GEMM_SPLIT_AUTO, 64, 64, 63, 2) == 1);
}

NR_TEST(gemm_row_kernels_k_unblocked) {
  CHECK(nr_gemm_default_cfg(1, 512, 784).kc == 784);
  CHECK(nr_gemm_default_cfg(1, 512, 13).kc == 16);
  CHECK(nr_gemm_default_cfg(1, 1000, 4096).kc == 4096);
  CHECK(nr_gemm_default_cfg(1, 1000, 5000).kc == 2504, "two equal blocks");
  CHECK(nr_gemm_default_cfg(2, 512, 784).kc <= 256, "more rows keep K blocked");
  /* the B block a raw B is packed into stays within 128 Ki floats */
  int64_t ks[] = {1, 784, 4096, 5000};
  for (int i = 0; i < 4; i++) {
    nr_gemm_cfg c = nr_gemm_default_cfg(1, 1000, ks[i]);
    int nr = nr_gemm_ukernel_get(c.ukernel)->nr;
    CHECK(c.nc % nr == 0 && c.nc >= nr && (int64_t)c.nc * c.kc <= 128 * 1024,
          "k=%lld: nc %d kc %d", (long long)ks[i], c.nc, c.kc);
  }
}

/* ---- products around the split points ------------------------------------------------ */

/* C (m x n, ldc) inside guard words: a buffer of m * ldc + 2 * GUARD words. */
static uint32_t *guarded_c(int64_t m, int64_t ldc) {
  uint32_t *w = malloc(sizeof(uint32_t) * (size_t)(m * ldc + 2 * GUARD));
  for (int64_t i = 0; i < m * ldc + 2 * GUARD; i++)
    w[i] = GUARD_BITS;
  return w;
}

static bool guards_intact(const uint32_t *w, int64_t m, int64_t n, int64_t ldc) {
  for (int64_t i = 0; i < m * ldc + 2 * GUARD; i++) {
    int64_t at = i - GUARD;
    bool inside = at >= 0 && at < m * ldc && at % ldc < n;
    if (!inside && w[i] != GUARD_BITS)
      return false;
  }
  return true;
}

typedef struct row_case {
  int64_t m, n, k;
  bool packed, trans_b;
  uint64_t seed;
} row_case;

/* C = relu(A B + bias) for one case on `threads` threads (pool may be NULL); the
 * result in out (m x n). False (reported) on a guard or reference failure. */
static bool run_row_case(nr_test_state *t, nr_gemm_cfg cfg, const row_case *rc,
                         nr_threadpool *pool, int threads, nr_gemm_split split, float *out) {
  nr_rng r = nr_rng_make(rc->seed);
  int64_t m = rc->m, n = rc->n, k = rc->k, lda = k + 1, ldb = (rc->trans_b ? k : n) + 3;
  int64_t ldc = n + 5;
  float *a = nr_rng_pm1_floats(&r, m * lda), *b = nr_rng_pm1_floats(&r, (rc->trans_b ? n : k) * ldb);
  float *bias = nr_rng_pm1_floats(&r, n), *pb = NULL;
  nr_gemm_operand oa = {a, lda, false, false}, ob = {b, ldb, rc->trans_b, false};
  if (rc->packed) {
    pb = aligned_alloc(64, (nr_gemm_packed_b_size(cfg, k, n) + 63) / 64 * 64);
    nr_gemm_pack_b(cfg, k, n, ob, pb);
    ob = (nr_gemm_operand){pb, 0, false, true};
  }
  uint32_t *cw = guarded_c(m, ldc);
  float *c = (float *)(cw + GUARD);
  void *scratch = malloc(nr_gemm_scratch_size(cfg, m, n, k, threads));
  nr_epilogue ep = {.bias = bias, .act = NR_ACT_RELU};
  nr_gemm_split_run(cfg, split, m, n, k, 1.0f, oa, ob, c, ldc, &ep, scratch, pool, threads);
  const char *uk = nr_gemm_ukernel_get(cfg.ukernel)->name;
  bool ok = guards_intact(cw, m, n, ldc);
  CHECK(ok, "%s m=%lld n=%lld k=%lld threads=%d: guard overwritten (seed %llu)", uk,
        (long long)m, (long long)n, (long long)k, threads, (unsigned long long)rc->seed);
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      double s = 0;
      for (int64_t q = 0; q < k; q++)
        s += (double)a[i * lda + q] * (rc->trans_b ? b[j * ldb + q] : b[q * ldb + j]);
      double want = s + bias[j] > 0 ? s + bias[j] : 0;
      float got = c[i * ldc + j];
      out[i * n + j] = got;
      if (!(fabs(got - want) <= 1e-5 * (double)(k + 1) * (1 + fabs(want)))) {
        CHECK(false, "%s m=%lld n=%lld k=%lld packed=%d tb=%d threads=%d: C[%lld,%lld] = "
              "%g, want %g (seed %llu)", uk, (long long)m, (long long)n, (long long)k,
              rc->packed, rc->trans_b, threads, (long long)i, (long long)j, got, want,
              (unsigned long long)rc->seed);
        ok = false;
      }
    }
  free(a), free(b), free(bias), free(pb), free(cw), free(scratch);
  return ok;
}

/* One case on 1, 2 and 3 threads (fixed and any-thread parts): each right, and the
 * threaded results equal the serial one bit for bit (same blocking, same sums). */
static void check_row_case(nr_test_state *t, nr_gemm_cfg cfg, const row_case *rc,
                           nr_threadpool *pool) {
  size_t bytes = sizeof(float) * (size_t)(rc->m * rc->n);
  float *serial = malloc(bytes), *par = malloc(bytes);
  if (!run_row_case(t, cfg, rc, NULL, 1, NR_GEMM_SPLIT_AUTO, serial))
    goto done;
  for (int threads = 2; threads <= 3; threads++)
    for (int any = 0; any < 2; any++) {
      nr_gemm_split split = any ? NR_GEMM_SPLIT_ANY_THREAD : NR_GEMM_SPLIT_AUTO;
      if (!run_row_case(t, cfg, rc, pool, threads, split, par))
        goto done;
      CHECK(!memcmp(serial, par, bytes), "%s m=%lld n=%lld k=%lld: %d threads differ from "
            "one (seed %llu)", nr_gemm_ukernel_get(cfg.ukernel)->name, (long long)rc->m,
            (long long)rc->n, (long long)rc->k, threads, (unsigned long long)rc->seed);
    }
done:
  free(serial), free(par);
}

NR_TEST(gemm_small_m_split_matches_reference) {
  nr_threadpool *pool = nr_threadpool_create(3);
  REQUIRE(pool);
  uint64_t seed = 9100;
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if (u->mr != 1 || (u->isa & nr_cpu_isa()) != u->isa)
      continue;
    int nr = u->nr;
    /* one panel (never split), 2 and 3 panels (one per thread), not multiples */
    int64_t ns[] = {nr, 2 * nr - 1, 2 * nr, 2 * nr + 1, 3 * nr + 5, 16 * nr + 7};
    int64_t ks[] = {1, 7, 784, 4097};
    int fails = 0;
    for (int64_t m = 1; m <= 5; m++)
      for (int ni = 0; ni < 6; ni++)
        for (int ki = 0; ki < 4 && fails < 4; ki++)
          for (int mode = 0; mode < 3; mode++, seed++) {
            if (ks[ki] > 784 && (ni < 5 || m > 2))
              continue; /* the deep K only on the widest N (it crosses the threshold) */
            nr_gemm_cfg cfg = nr_gemm_default_cfg(1, ns[ni], ks[ki]);
            cfg.ukernel = (uint16_t)uk;
            row_case rc = {m, ns[ni], ks[ki], mode > 0, mode == 2, seed};
            int before = t->failures;
            check_row_case(t, cfg, &rc, pool);
            fails += t->failures > before;
          }
  }
  nr_threadpool_destroy(pool);
}
