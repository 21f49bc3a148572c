/* test_qgemm.c - the int8 GEMM (src/kernels/cpu/qgemm) against references written
 * here: every micro-kernel of qgemm_ukernels.inc this machine runs, alone, against an
 * int64 sum over random and extreme operands (every weight +-127, every activation at
 * the kernel's qmax: where AVX2's int16 pair sums are closest to saturating); the
 * weight quantizer and packer element by element; the activation quantizer's vector
 * paths against its scalar definition on ties, infinities and NaN; and the whole GEMM
 * for every kernel, both weight sides, raw / transposed / pre-quantized activations,
 * every epilogue and 1 or 2 threads, on shapes around each tile with small blocking
 * so every loop turns. The GEMM is checked twice: tightly against the product of the
 * dequantized operands in double (what the kernel must compute up to float rounding)
 * and loosely against the unquantized float product, within the bound that
 * quantization itself allows (see quant_bound). Guard words surround C; failures
 * print the seed. The tactics built on these kernels are tested in
 * test_qgemm_tactics.c. */
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16
#define GUARD_BITS 0x7fc0dead /* a NaN pattern nothing computes */

/* 64-byte aligned, size rounded up as aligned_alloc requires. */
static void *alloc64(size_t n) {
  return aligned_alloc(64, (n + 63) / 64 * 64);
}

static bool runs_here(const nr_qgemm_ukernel *u) {
  return (u->isa & nr_cpu_isa()) == u->isa;
}

/* ---- micro-kernels ---------------------------------------------------------------- */

enum { FILL_RANDOM, FILL_MAX, FILL_SIGNS };

/* One call of micro-kernel uk on kq groups; the s8 side gets [-127, 127] (FILL_MAX:
 * all 127; FILL_SIGNS: random +-127), the u8 side [0, qmax] (extremes: all qmax). */
static void check_ukernel(nr_test_state *t, int uk, int64_t kq, int flags, int fill,
                          uint64_t seed) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  nr_rng r = nr_rng_make(seed);
  int mr = u->mr, nr = u->nr;
  bool wa = u->wside == NR_QGEMM_W_A;
  size_t abytes = (size_t)(kq * mr * 4), bbytes = (size_t)(kq * nr * 4);
  uint8_t *a = alloc64(abytes), *b = alloc64(bbytes);
  for (int side = 0; side < 2; side++) {
    uint8_t *x = side ? b : a;
    size_t n = side ? bbytes : abytes;
    bool is_s8 = wa ? side == 0 : side == 1;
    for (size_t i = 0; i < n; i++) {
      int v = is_s8 ? (fill == FILL_RANDOM ? (int)nr_rng_int(&r, -127, 127)
                       : fill == FILL_MAX  ? 127
                                           : (nr_rng_u32(&r) & 1 ? 127 : -127))
                    : (fill == FILL_RANDOM ? (int)nr_rng_int(&r, 0, u->qmax) : u->qmax);
      x[i] = (uint8_t)(int8_t)v;
    }
  }
  int nch = wa ? mr : nr;
  float scale[NR_QGEMM_MAX_NR], bias[NR_QGEMM_MAX_NR];
  int32_t corr[NR_QGEMM_MAX_NR];
  for (int i = 0; i < nch; i++) {
    scale[i] = nr_rng_uniform(&r, 1e-4f, 1e-2f);
    bias[i] = nr_rng_uniform(&r, -1, 1);
    corr[i] = (int)nr_rng_int(&r, -100000, 100000);
  }
  int64_t ldr = nr + 5;
  float *res = malloc(sizeof(float) * (size_t)(mr * ldr));
  for (int64_t i = 0; i < mr * ldr; i++)
    res[i] = nr_rng_uniform(&r, -200, 200);
  nr_qgemm_out o = {scale, corr, (seed & 1) ? bias : NULL, res, ldr, -50.0f, 75.0f};
  int64_t ldc = nr + 3, words = mr * ldc + 2 * GUARD;
  uint32_t *cbuf = malloc(sizeof(uint32_t) * (size_t)words);
  for (int64_t i = 0; i < words; i++)
    cbuf[i] = GUARD_BITS;
  int32_t *c = (int32_t *)(cbuf + GUARD), prior[NR_QGEMM_MAX_MR * NR_QGEMM_MAX_NR];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++)
      c[i * ldc + j] = prior[i * nr + j] = (int)nr_rng_int(&r, -1000000, 1000000);
  nr_qgemm_ukernel_fn_get(uk)(kq, a, b, c, ldc, flags, &o);
  int bad = 0;
  for (int64_t i = 0; i < words && !bad; i++) {
    int64_t at = i - GUARD;
    if (at >= 0 && at < mr * ldc && at % ldc < nr)
      continue;
    if (cbuf[i] != GUARD_BITS) {
      CHECK(false, "%s kq=%lld: guard word %lld overwritten (seed %llu)", u->name,
            (long long)kq, (long long)i, (unsigned long long)seed);
      bad = 1;
    }
  }
  for (int i = 0; i < mr && !bad; i++)
    for (int j = 0; j < nr && !bad; j++) {
      int64_t s = (flags & NR_QGEMM_ACC) ? prior[i * nr + j] : 0;
      for (int64_t p = 0; p < kq; p++)
        for (int e = 0; e < 4; e++) {
          uint8_t av = a[(p * mr + i) * 4 + e], bv = b[(p * nr + j) * 4 + e];
          s += wa ? (int64_t)(int8_t)av * bv : (int64_t)av * (int8_t)bv;
        }
      int ch = wa ? i : j;
      if (!(flags & NR_QGEMM_FINAL)) {
        CHECK(c[i * ldc + j] == s,
              "%s kq=%lld flags=%d fill=%d: C[%d,%d] = %d, want %lld "
              "(seed %llu)",
              u->name, (long long)kq, flags, fill, i, j, c[i * ldc + j], (long long)s,
              (unsigned long long)seed);
        bad = c[i * ldc + j] != s;
        continue;
      }
      float want =
          fmaf((float)(int32_t)(s - corr[ch]), scale[ch], o.bias ? bias[ch] : 0.0f);
      if (flags & NR_QGEMM_RES)
        want += res[i * ldr + j];
      if (flags & NR_QGEMM_RELU)
        want = want > 0 ? want : 0;
      else if (flags & NR_QGEMM_CLIP)
        want = want < o.lo ? o.lo : want > o.hi ? o.hi : want;
      float got;
      memcpy(&got, &c[i * ldc + j], sizeof got);
      CHECK(got == want,
            "%s kq=%lld flags=%d fill=%d: C[%d,%d] = %.9g, want %.9g "
            "(seed %llu)",
            u->name, (long long)kq, flags, fill, i, j, got, want, (unsigned long long)seed);
      bad = got != want;
    }
  free(res);
  free(a), free(b), free(cbuf);
}

NR_TEST(qgemm_ukernels_vs_int64) {
  uint64_t seed = 1;
  int64_t kqs[] = {1, 2, 7, 64, 300};
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    if (!runs_here(nr_qgemm_ukernel_get(uk)))
      continue;
    for (int ki = 0; ki < 5; ki++)
      for (int flags = 0; flags < 4; flags++)
        for (int fill = 0; fill < 3; fill++)
          check_ukernel(t, uk, kqs[ki], flags, fill, seed++);
    /* the epilogue in registers: residual, ReLU, Clip, with and without partial sums */
    const int epi[] = {NR_QGEMM_RES, NR_QGEMM_RELU, NR_QGEMM_CLIP,
                       NR_QGEMM_RES | NR_QGEMM_RELU, NR_QGEMM_RES | NR_QGEMM_CLIP};
    for (int e = 0; e < 5; e++)
      for (int acc = 0; acc < 2; acc++)
        check_ukernel(t, uk, 13, NR_QGEMM_FINAL | epi[e] | acc, FILL_RANDOM, seed++);
  }
}

/* The AVX2 bound at work: with every weight 127 and every activation 127 a pair sums
 * to 32258, just below int16's 32767, and the result is exact over a long k. */
NR_TEST(qgemm_avx2_pairs_at_the_limit) {
  int uk = nr_qgemm_ukernel_find("nr_qs8_gemm_4x16__avx2");
  REQUIRE(uk >= 0);
  SKIP_UNLESS(runs_here(nr_qgemm_ukernel_get(uk)), "no AVX2 (CPU, OS or NNROUTE_ISA)");
  CHECK(nr_qgemm_ukernel_get(uk)->qmax == 127);
  int64_t kq = 1000;
  uint8_t *a = alloc64((size_t)(kq * 4 * 4)), *b = alloc64((size_t)(kq * 16 * 4));
  memset(a, 127, (size_t)(kq * 16));
  for (int s = 0; s < 2; s++) {
    memset(b, s ? 0x81 : 0x7f, (size_t)(kq * 64)); /* all -127, or all 127 */
    int32_t c[4 * 16];
    nr_qgemm_ukernel_fn_get(uk)(kq, a, b, c, 16, 0,
                                NULL); /* int32 out: no dequantization */
    int64_t want = (s ? -1 : 1) * 127 * 127 * 4 * kq;
    for (int i = 0; i < 64; i++)
      CHECK(c[i] == want, "C[%d] = %d, want %lld", i, c[i], (long long)want);
  }
  free(a), free(b);
}

/* ---- weights ----------------------------------------------------------------------- */

NR_TEST(qgemm_quantize_weights) {
  nr_rng r = nr_rng_make(11);
  enum { CH = 5, K = 13 };
  float w[CH * K];
  for (int i = 0; i < CH * K; i++)
    w[i] = nr_rng_uniform(&r, -2, 2) * (float)(1 + i / K);
  for (int p = 0; p < K; p++)
    w[3 * K + p] = 0; /* an all-zero channel */
  /* the same matrix stored channel-major and k-major gives the same result */
  float wt[K * CH];
  for (int ch = 0; ch < CH; ch++)
    for (int p = 0; p < K; p++)
      wt[p * CH + ch] = w[ch * K + p];
  int8_t q[CH * K], q2[CH * K];
  float s[CH], s2[CH];
  int32_t sum[CH], sum2[CH];
  REQUIRE(nr_qgemm_quantize_w(CH, K, w, K, 1, q, s, sum));
  REQUIRE(nr_qgemm_quantize_w(CH, K, wt, 1, CH, q2, s2, sum2));
  CHECK(!memcmp(q, q2, sizeof q) && !memcmp(s, s2, sizeof s) &&
        !memcmp(sum, sum2, sizeof sum));
  for (int ch = 0; ch < CH; ch++) {
    float amax = 0;
    int32_t want_sum = 0;
    for (int p = 0; p < K; p++) {
      amax = fmaxf(amax, fabsf(w[ch * K + p]));
      want_sum += q[ch * K + p];
      CHECK(q[ch * K + p] >= -127 && q[ch * K + p] <= 127);
      CHECK(fabsf(q[ch * K + p] * s[ch] - w[ch * K + p]) <= 0.5f * s[ch] * 1.0001f,
            "channel %d, k %d: %d * %g vs %g", ch, p, q[ch * K + p], s[ch], w[ch * K + p]);
    }
    CHECK(sum[ch] == want_sum);
    CHECK(ch == 3 ? s[ch] == 1.0f : s[ch] == amax / 127.0f, "channel %d scale %g", ch,
          s[ch]);
  }
  w[7] = NAN;
  CHECK(!nr_qgemm_quantize_w(CH, K, w, K, 1, q, s, sum), "NaN weight accepted");
  w[7] = INFINITY;
  CHECK(!nr_qgemm_quantize_w(CH, K, w, K, 1, q, s, sum), "infinite weight accepted");
}

/* Packed W element by element: block pc at pc * padded channels, panels of the tile
 * width, groups of 4 k, zero padding, nothing written past the size. */
NR_TEST(qgemm_pack_weights_layout) {
  nr_rng r = nr_rng_make(21);
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    int width = u->wside == NR_QGEMM_W_A ? u->mr : u->nr;
    nr_qgemm_cfg cfg = {(uint16_t)uk, (uint16_t)(2 * u->mr), 12, (uint16_t)(2 * u->nr)};
    int64_t chs[] = {1, width - 1, width + 1, 2 * width + 3}, ks[] = {1, 5, 12, 13, 27};
    for (int ci = 0; ci < 4; ci++)
      for (int ki = 0; ki < 5; ki++) {
        int64_t ch = chs[ci], k = ks[ki];
        if (ch < 1)
          continue;
        int8_t *q = malloc((size_t)(ch * k));
        for (int64_t i = 0; i < ch * k; i++)
          q[i] = (int8_t)(int)nr_rng_int(&r, -127, 127);
        size_t size = nr_qgemm_packed_w_size(cfg, ch, k);
        int64_t cpad = (ch + width - 1) / width * width, k4 = (k + 3) / 4 * 4;
        CHECK(size == (size_t)(cpad * k4), "%s: size %zu", u->name, size);
        uint8_t *out = malloc(size + GUARD);
        memset(out, 0xa5, size + GUARD);
        nr_qgemm_pack_w(cfg, ch, k, q, out);
        int bad = 0;
        for (int64_t pc = 0; pc < k && !bad; pc += cfg.kc) {
          int64_t kb = k - pc < cfg.kc ? k - pc : cfg.kc, kb4 = (kb + 3) / 4 * 4;
          for (int64_t c = 0; c < cpad && !bad; c++)
            for (int64_t p = 0; p < kb4 && !bad; p++) {
              int8_t want = c < ch && p < kb ? q[c * k + pc + p] : 0;
              int8_t got = (int8_t)out[pc * cpad + (c / width) * width * kb4 +
                                       ((p / 4) * width + c % width) * 4 + p % 4];
              bad = got != want;
              CHECK(!bad, "%s ch=%lld k=%lld: (%lld, %lld) = %d, want %d", u->name,
                    (long long)ch, (long long)k, (long long)c, (long long)(pc + p), got,
                    want);
            }
        }
        for (int i = 0; i < GUARD; i++)
          CHECK(out[size + i] == 0xa5, "%s: wrote past the packed size", u->name);
        free(q), free(out);
      }
  }
}

/* ---- activation quantizer ---------------------------------------------------------- */

NR_TEST(qgemm_quantize_row_matches_scalar) {
  nr_rng r = nr_rng_make(31);
  float x[77];
  const float special[] = {0.5f,     1.5f,      2.5f, -0.5f, -1.5f,  1e30f,  -1e30f,
                           INFINITY, -INFINITY, NAN,  -0.0f, 254.5f, 300.0f, 126.5f};
  for (int trial = 0; trial < 40; trial++) {
    float inv = trial % 3 == 0 ? 1.0f : nr_rng_uniform(&r, 0.5f, 40);
    int32_t zp = (int)nr_rng_int(&r, 0, 200), qmax = trial & 1 ? 255 : 127;
    if (zp > qmax)
      zp = qmax;
    for (int i = 0; i < 77; i++)
      x[i] = i % 5 == 0 ? special[(i / 5) % 14] : nr_rng_uniform(&r, -10, 10);
    for (int n = 1; n <= 77; n += 1 + n / 8) {
      uint8_t got[80], want[80];
      memset(got, 0xee, sizeof got);
      nr_qgemm_quantize_row(x, 1, n, inv, zp, qmax, got);
      for (int i = 0; i < n; i++)
        want[i] = nr_qgemm_quantize_x(x[i], inv, zp, qmax);
      CHECK(!memcmp(got, want, (size_t)n), "trial %d n=%d: vector and scalar differ", trial,
            n);
      CHECK(got[n] == 0xee, "trial %d n=%d: wrote past n", trial, n);
    }
  }
  /* the definition itself: ties to even, clamping, NaN to 0 */
  CHECK(nr_qgemm_quantize_x(2.5f, 1, 10, 255) == 12 &&
        nr_qgemm_quantize_x(3.5f, 1, 10, 255) == 14);
  CHECK(nr_qgemm_quantize_x(-20, 1, 10, 255) == 0 &&
        nr_qgemm_quantize_x(500, 1, 10, 255) == 255);
  CHECK(nr_qgemm_quantize_x(500, 1, 10, 127) == 127 &&
        nr_qgemm_quantize_x(NAN, 1, 10, 255) == 0);
}

/* ---- the whole GEMM ---------------------------------------------------------------- */

typedef struct problem {
  int uk;
  int64_t m, n, k;
  bool trans, u8; /* op(X) = X^T; X handed over already quantized */
  bool dq_bias;   /* per-channel bias folded into the dequantization */
  float alpha;
  nr_epilogue ep; /* bias (rows or columns), residual, activation */
} problem;

/* Everything one run needs, built from the problem and a seed. */
typedef struct fixture {
  int64_t ch, wrows, xr, xc, xld; /* channels; X stored as xr rows of xc (ld xld) */
  float *w, *x, *bias;            /* W channel-major [ch x k]; X as stored */
  uint8_t *xq;                    /* X quantized as stored */
  int8_t *wq;
  float *ws, *scale, *dbias;
  int32_t *wsum, *corr;
  void *packed;
  float xs;
  int32_t zp;
} fixture;

static void fixture_free(fixture *f) {
  free(f->w), free(f->x), free(f->bias), free(f->xq), free(f->wq), free(f->ws);
  free(f->scale), free(f->dbias), free(f->wsum), free(f->corr), free(f->packed);
}

/* op(X)[i][p] for W_B (x is A, M x K) or op(X)[p][j] for W_A (x is B, K x N): the
 * element at tile coordinate tt and depth p. */
static int64_t x_at(const problem *p, const fixture *f, int64_t tt, int64_t d) {
  bool wa = nr_qgemm_ukernel_get(p->uk)->wside == NR_QGEMM_W_A;
  bool kmajor = wa ? !p->trans : p->trans;
  return kmajor ? d * f->xld + tt : tt * f->xld + d;
}

static void fixture_build(const problem *p, uint64_t seed, fixture *f) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(p->uk);
  bool wa = u->wside == NR_QGEMM_W_A;
  nr_rng r = nr_rng_make(seed);
  memset(f, 0, sizeof *f);
  f->ch = wa ? p->m : p->n;
  int64_t tdim = wa ? p->n : p->m, k = p->k;
  bool kmajor = wa ? !p->trans : p->trans;
  f->xr = kmajor ? k : tdim, f->xc = kmajor ? tdim : k, f->xld = f->xc + 3;
  f->w = malloc(sizeof(float) * (size_t)(f->ch * k + 1));
  for (int64_t i = 0; i < f->ch * k; i++)
    f->w[i] = nr_rng_uniform(&r, -1, 1) * (float)(1 + (i / (k > 0 ? k : 1)) % 3);
  /* activations on [-0.7, 1.3]; parameters as calibration would give for that range */
  float lo = -0.7f, hi = 1.3f;
  f->xs = (hi - lo) / (float)u->qmax;
  f->zp = (int32_t)nearbyintf(-lo / f->xs);
  int64_t xn = f->xr * f->xld + 1;
  f->x = malloc(sizeof(float) * (size_t)xn);
  f->xq = malloc((size_t)xn);
  for (int64_t i = 0; i < xn; i++) {
    f->x[i] = nr_rng_uniform(&r, lo, hi);
    f->xq[i] = nr_qgemm_quantize_x(f->x[i], 1.0f / f->xs, f->zp, u->qmax);
  }
  f->bias = malloc(sizeof(float) * (size_t)f->ch);
  for (int64_t i = 0; i < f->ch; i++)
    f->bias[i] = nr_rng_uniform(&r, -1, 1);
  f->wq = malloc((size_t)(f->ch * k + 1));
  f->ws = malloc(sizeof(float) * (size_t)f->ch);
  f->wsum = malloc(sizeof(int32_t) * (size_t)f->ch);
  nr_qgemm_quantize_w(f->ch, k, f->w, k, 1, f->wq, f->ws, f->wsum);
  nr_qgemm_cfg cfg = {(uint16_t)p->uk, (uint16_t)(2 * u->mr), 8, (uint16_t)(2 * u->nr)};
  f->packed = alloc64(nr_qgemm_packed_w_size(cfg, f->ch, k));
  nr_qgemm_pack_w(cfg, f->ch, k, f->wq, f->packed);
  f->scale = malloc(sizeof(float) * (size_t)f->ch);
  f->dbias = malloc(sizeof(float) * (size_t)f->ch);
  f->corr = malloc(sizeof(int32_t) * (size_t)f->ch);
  nr_qgemm_dequant_build(f->ch, f->ws, f->wsum, f->xs, f->zp, p->alpha,
                         p->dq_bias ? f->bias : NULL, f->ch, 1.0f, f->scale, f->corr,
                         f->dbias);
}

/* Lipschitz constant of the activations on the tested range (hard swish: 1.5). */
#define ACT_LIP 1.5

/* Epilogue of the reference, in double except the activation (nr_act_apply). */
static double ref_epilogue(const problem *p, int64_t i, int64_t j, double v) {
  const nr_epilogue *e = &p->ep;
  if (e->bias)
    v += e->bias_per_row ? e->bias[i] : e->bias[j];
  if (e->residual)
    v += (double)e->beta * e->residual[i * e->ldr + j];
  float f = (float)v;
  nr_act_apply(e->act, e->act_a, e->act_b, &f, 1);
  return f;
}

/* Runs p with the small blocking on `threads` threads of pool; checks guards and both
 * references; C (m x n, packed rows) is copied to *out when non-NULL. */
static bool check_gemm(nr_test_state *t, const problem *p, uint64_t seed,
                       nr_threadpool *pool, int threads, nr_qgemm_split split, float *out) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(p->uk);
  bool wa = u->wside == NR_QGEMM_W_A;
  fixture f;
  fixture_build(p, seed, &f);
  nr_qgemm_cfg cfg = {(uint16_t)p->uk, (uint16_t)(2 * u->mr), 8, (uint16_t)(2 * u->nr)};
  int64_t m = p->m, n = p->n, k = p->k, ldc = n + 3;
  int64_t words = m * ldc + 2 * GUARD;
  uint32_t *cbuf = malloc(sizeof(uint32_t) * (size_t)words);
  for (int64_t i = 0; i < words; i++)
    cbuf[i] = GUARD_BITS;
  float *c = (float *)(cbuf + GUARD);
  nr_qgemm_act x = {p->u8 ? (const void *)f.xq : (const void *)f.x,
                    f.xld,
                    p->trans,
                    p->u8,
                    1.0f / f.xs,
                    f.zp};
  nr_qgemm_dequant dq = {f.scale, f.corr, f.dbias};
  void *scratch = malloc(nr_qgemm_scratch_size(cfg, m, n, k, threads));
  nr_qgemm_split_run(cfg, split, m, n, k, f.packed, x, &dq, c, ldc, &p->ep, scratch, pool,
                     threads);
  bool ok = true;
  for (int64_t i = 0; i < words && ok; i++) {
    int64_t o = i - GUARD;
    if (o >= 0 && o < m * ldc && o % ldc < n)
      continue;
    if (cbuf[i] != GUARD_BITS) {
      CHECK(false, "%s m=%lld n=%lld k=%lld: guard word %lld overwritten (seed %llu)",
            u->name, (long long)m, (long long)n, (long long)k, (long long)i,
            (unsigned long long)seed);
      ok = false;
    }
  }
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      int64_t ch = wa ? i : j, tt = wa ? j : i;
      double dq_sum = 0, mag = 0, exact = 0, bound = 0;
      for (int64_t d = 0; d < k; d++) {
        int64_t at = x_at(p, &f, tt, d);
        double wd = (double)f.ws[ch] * f.wq[ch * k + d], w = f.w[ch * k + d];
        double xd = (double)f.xs * ((int)f.xq[at] - f.zp), xv = f.x[at];
        dq_sum += wd * xd;
        mag += fabs(wd * xd);
        exact += w * xv;
        /* |w x - w' x'| <= |w| |x - x'| + |x'| |w - w'|; |x - x'| <= x_scale (half a
         * step, plus up to half a step of clipping where the rounded zero point moves
         * the grid's ends), |w - w'| <= w_scale / 2 */
        bound += fabs(w) * f.xs + fabs(xd) * 0.5 * f.ws[ch];
      }
      double extra = p->dq_bias ? f.bias[ch] : 0.0;
      double want = ref_epilogue(p, i, j, p->alpha * dq_sum + extra);
      double loose = ref_epilogue(p, i, j, p->alpha * exact + extra);
      double tol = 4e-6 * (fabs(p->alpha) * mag + fabs(extra) + 1) +
                   (p->ep.residual ? 1e-6 * fabs(p->ep.residual[i * p->ep.ldr + j]) : 0);
      double ltol = ACT_LIP * fabs(p->alpha) * bound * 1.001 + tol;
      float got = c[i * ldc + j];
      if (!(fabs(got - want) <= tol) || !(fabs(got - loose) <= ltol)) {
        CHECK(false,
              "%s m=%lld n=%lld k=%lld trans=%d u8=%d act=%s threads=%d: C[%lld,%lld] "
              "= %.7g, dequantized product %.7g (tol %.2g), float product %.7g (bound "
              "%.2g) (seed %llu)",
              u->name, (long long)m, (long long)n, (long long)k, p->trans, p->u8,
              nr_act_name(p->ep.act), threads, (long long)i, (long long)j, got, want, tol,
              loose, ltol, (unsigned long long)seed);
        ok = false;
      }
    }
  if (out)
    for (int64_t i = 0; i < m; i++)
      memcpy(out + i * n, c + i * ldc, sizeof(float) * (size_t)n);
  free(cbuf), free(scratch);
  fixture_free(&f);
  return ok;
}

/* Shapes below, at, above and not a multiple of the tile in both dimensions, and k
 * below, at and above the block (kc = 8) and not a multiple of 4. */
NR_TEST(qgemm_around_tile) {
  uint64_t seed = 100;
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    if (!runs_here(u))
      continue;
    int64_t ms[] = {1, u->mr - 1, u->mr, u->mr + 1, 2 * u->mr + 3};
    int64_t ns[] = {1, u->nr - 1, u->nr, u->nr + 1, 2 * u->nr + 3};
    int64_t ks[] = {1, 3, 4, 5, 8, 9, 19};
    int fails = 0;
    for (int mi = 0; mi < 5; mi++)
      for (int ni = 0; ni < 5; ni++)
        for (int ki = 0; ki < 7 && fails < 3; ki++, seed++) {
          if (ms[mi] < 1 || ns[ni] < 1)
            continue;
          problem p = {uk,       ms[mi],   ns[ni],
                       ks[ki],   seed & 1, u->wside == NR_QGEMM_W_A && (seed & 2),
                       seed & 4, 1.0f,     {0}};
          fails += !check_gemm(t, &p, seed, NULL, 1, NR_QGEMM_SPLIT_AUTO, NULL);
        }
  }
}

NR_TEST(qgemm_epilogues) {
  uint64_t seed = 5000;
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    if (!runs_here(u))
      continue;
    int64_t m = 2 * u->mr + 3, n = 2 * u->nr + 3, k = 21;
    nr_rng r = nr_rng_make(seed);
    float *bias_r = malloc(sizeof(float) * (size_t)m),
          *bias_c = malloc(sizeof(float) * (size_t)n);
    float *res = malloc(sizeof(float) * (size_t)(m * (n + 5)));
    for (int64_t i = 0; i < m; i++)
      bias_r[i] = nr_rng_uniform(&r, -1, 1);
    for (int64_t i = 0; i < n; i++)
      bias_c[i] = nr_rng_uniform(&r, -1, 1);
    for (int64_t i = 0; i < m * (n + 5); i++)
      res[i] = nr_rng_uniform(&r, -2, 2);
    for (int act = 0; act < NR_ACT_COUNT; act++)
      for (int form = 0; form < 5; form++, seed++) {
        nr_epilogue ep = {.act = (nr_act)act, .act_a = 0.1f, .act_b = 0.6f};
        if (act == NR_ACT_CLIP)
          ep.act_a = -0.25f;
        if (act == NR_ACT_HARD_SIGMOID)
          ep.act_a = 0.2f, ep.act_b = 0.5f;
        if (form == 1)
          ep.bias = bias_r, ep.bias_per_row = true;
        if (form == 2)
          ep.bias = bias_c;
        if (form >= 3)
          ep.residual = res, ep.ldr = n + 5, ep.beta = form == 3 ? 1.0f : 0.75f;
        problem p = {uk, m, n, k, form == 4, false, form != 1, form == 2 ? 0.5f : 1.0f, ep};
        check_gemm(t, &p, seed, NULL, 1, NR_QGEMM_SPLIT_AUTO, NULL);
      }
    free(bias_r), free(bias_c), free(res);
  }
}

/* Any split on 2 threads gives the single-threaded result bit for bit: every output
 * is the same int32 sum and the same float operations. */
NR_TEST(qgemm_threaded_equals_serial) {
  nr_threadpool *pool = nr_threadpool_create(2);
  REQUIRE(pool);
  uint64_t seed = 9000;
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    if (!runs_here(u))
      continue;
    int64_t m = 5 * u->mr + 1, n = 4 * u->nr + 5, k = 77;
    nr_epilogue ep = {.act = NR_ACT_RELU};
    problem p = {uk, m, n, k, false, false, true, 1.0f, ep};
    float *c1 = malloc(sizeof(float) * (size_t)(m * n)),
          *c2 = malloc(sizeof(float) * (size_t)(m * n));
    check_gemm(t, &p, seed, NULL, 1, NR_QGEMM_SPLIT_AUTO, c1);
    for (int split = 0; split < 3; split++) {
      check_gemm(t, &p, seed, pool, 2, (nr_qgemm_split)split, c2);
      CHECK(!memcmp(c1, c2, sizeof(float) * (size_t)(m * n)),
            "%s split %d differs (seed %llu)", u->name, split, (unsigned long long)seed);
    }
    free(c1), free(c2);
    seed++;
  }
  nr_threadpool_destroy(pool);
}

NR_TEST(qgemm_degenerate_and_registry) {
  CHECK(nr_qgemm_ukernel_get(-1) == NULL &&
        nr_qgemm_ukernel_get(nr_qgemm_ukernel_count()) == NULL);
  CHECK(nr_qgemm_ukernel_find("nr_qs8_gemm_4x8") >= 0 && nr_qgemm_ukernel_find("nope") < 0);
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    CHECK(u->qmax == ((u->isa & NR_ISA_AVX2) && !(u->isa & NR_ISA_AVX512VNNI) ? 127 : 255),
          "%s: qmax %d", u->name, u->qmax);
    nr_qgemm_cfg d = nr_qgemm_default_cfg(uk, 100, 100, 1000);
    CHECK(d.ukernel == uk && d.kc % 4 == 0 && d.kc >= 4 && d.mc % u->mr == 0);
  }
  /* K = 0: every output is its channel's bias, then the epilogue */
  int uk = nr_qgemm_ukernel_find("nr_qs8_gemm_4x8");
  nr_qgemm_cfg cfg = nr_qgemm_default_cfg(uk, 2, 3, 0);
  float c[6] = {9, 9, 9, 9, 9, 9}, bias[3] = {1, -2, 3}, scale[3] = {1, 1, 1};
  int32_t corr[3] = {0};
  nr_qgemm_dequant dq = {scale, corr, bias};
  nr_epilogue ep = {.act = NR_ACT_RELU};
  nr_qgemm_act x = {c, 0, false, false, 1, 0};
  nr_qgemm(cfg, 2, 3, 0, NULL, x, &dq, c, 3, &ep, NULL, NULL, 1);
  CHECK(c[0] == 1 && c[1] == 0 && c[2] == 3 && c[3] == 1 && c[5] == 3);
}
