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
 * print the seed. */
#include "compiler/plan.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16
#define GUARD_BITS 0x7fc0dead /* a NaN pattern nothing computes */

typedef struct rng {
  uint64_t s;
} rng;

static uint32_t rnd_u32(rng *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(r->s >> 32);
}

/* Uniform in [lo, hi]. */
static float rnd_f(rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)(rnd_u32(r) >> 8) / (float)(1u << 24);
}

/* Uniform integer in [lo, hi]. */
static int rnd_i(rng *r, int lo, int hi) {
  return lo + (int)(rnd_u32(r) % (uint32_t)(hi - lo + 1));
}

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
  rng r = {seed};
  int mr = u->mr, nr = u->nr;
  bool wa = u->wside == NR_QGEMM_W_A;
  size_t abytes = (size_t)(kq * mr * 4), bbytes = (size_t)(kq * nr * 4);
  uint8_t *a = alloc64(abytes), *b = alloc64(bbytes);
  for (int side = 0; side < 2; side++) {
    uint8_t *x = side ? b : a;
    size_t n = side ? bbytes : abytes;
    bool is_s8 = wa ? side == 0 : side == 1;
    for (size_t i = 0; i < n; i++) {
      int v = is_s8 ? (fill == FILL_RANDOM ? rnd_i(&r, -127, 127)
                       : fill == FILL_MAX  ? 127
                                           : (rnd_u32(&r) & 1 ? 127 : -127))
                    : (fill == FILL_RANDOM ? rnd_i(&r, 0, u->qmax) : u->qmax);
      x[i] = (uint8_t)(int8_t)v;
    }
  }
  int nch = wa ? mr : nr;
  float scale[NR_QGEMM_MAX_NR], bias[NR_QGEMM_MAX_NR];
  int32_t corr[NR_QGEMM_MAX_NR];
  for (int i = 0; i < nch; i++) {
    scale[i] = rnd_f(&r, 1e-4f, 1e-2f);
    bias[i] = rnd_f(&r, -1, 1);
    corr[i] = rnd_i(&r, -100000, 100000);
  }
  int64_t ldr = nr + 5;
  float *res = malloc(sizeof(float) * (size_t)(mr * ldr));
  for (int64_t i = 0; i < mr * ldr; i++)
    res[i] = rnd_f(&r, -200, 200);
  nr_qgemm_out o = {scale, corr, (seed & 1) ? bias : NULL, res, ldr, -50.0f, 75.0f};
  int64_t ldc = nr + 3, words = mr * ldc + 2 * GUARD;
  uint32_t *cbuf = malloc(sizeof(uint32_t) * (size_t)words);
  for (int64_t i = 0; i < words; i++)
    cbuf[i] = GUARD_BITS;
  int32_t *c = (int32_t *)(cbuf + GUARD), prior[NR_QGEMM_MAX_MR * NR_QGEMM_MAX_NR];
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++)
      c[i * ldc + j] = prior[i * nr + j] = rnd_i(&r, -1000000, 1000000);
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
  if (!runs_here(nr_qgemm_ukernel_get(uk)))
    return;
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
  rng r = {11};
  enum { CH = 5, K = 13 };
  float w[CH * K];
  for (int i = 0; i < CH * K; i++)
    w[i] = rnd_f(&r, -2, 2) * (float)(1 + i / K);
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
  rng r = {21};
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
          q[i] = (int8_t)rnd_i(&r, -127, 127);
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
  rng r = {31};
  float x[77];
  const float special[] = {0.5f,     1.5f,      2.5f, -0.5f, -1.5f,  1e30f,  -1e30f,
                           INFINITY, -INFINITY, NAN,  -0.0f, 254.5f, 300.0f, 126.5f};
  for (int trial = 0; trial < 40; trial++) {
    float inv = trial % 3 == 0 ? 1.0f : rnd_f(&r, 0.5f, 40);
    int32_t zp = rnd_i(&r, 0, 200), qmax = trial & 1 ? 255 : 127;
    if (zp > qmax)
      zp = qmax;
    for (int i = 0; i < 77; i++)
      x[i] = i % 5 == 0 ? special[(i / 5) % 14] : rnd_f(&r, -10, 10);
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
  rng r = {seed};
  memset(f, 0, sizeof *f);
  f->ch = wa ? p->m : p->n;
  int64_t tdim = wa ? p->n : p->m, k = p->k;
  bool kmajor = wa ? !p->trans : p->trans;
  f->xr = kmajor ? k : tdim, f->xc = kmajor ? tdim : k, f->xld = f->xc + 3;
  f->w = malloc(sizeof(float) * (size_t)(f->ch * k + 1));
  for (int64_t i = 0; i < f->ch * k; i++)
    f->w[i] = rnd_f(&r, -1, 1) * (float)(1 + (i / (k > 0 ? k : 1)) % 3);
  /* activations on [-0.7, 1.3]; parameters as calibration would give for that range */
  float lo = -0.7f, hi = 1.3f;
  f->xs = (hi - lo) / (float)u->qmax;
  f->zp = (int32_t)nearbyintf(-lo / f->xs);
  int64_t xn = f->xr * f->xld + 1;
  f->x = malloc(sizeof(float) * (size_t)xn);
  f->xq = malloc((size_t)xn);
  for (int64_t i = 0; i < xn; i++) {
    f->x[i] = rnd_f(&r, lo, hi);
    f->xq[i] = nr_qgemm_quantize_x(f->x[i], 1.0f / f->xs, f->zp, u->qmax);
  }
  f->bias = malloc(sizeof(float) * (size_t)f->ch);
  for (int64_t i = 0; i < f->ch; i++)
    f->bias[i] = rnd_f(&r, -1, 1);
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
    rng r = {seed};
    float *bias_r = malloc(sizeof(float) * (size_t)m),
          *bias_c = malloc(sizeof(float) * (size_t)n);
    float *res = malloc(sizeof(float) * (size_t)(m * (n + 5)));
    for (int64_t i = 0; i < m; i++)
      bias_r[i] = rnd_f(&r, -1, 1);
    for (int64_t i = 0; i < n; i++)
      bias_c[i] = rnd_f(&r, -1, 1);
    for (int64_t i = 0; i < m * (n + 5); i++)
      res[i] = rnd_f(&r, -2, 2);
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

/* ---- tactics: one step by hand ----------------------------------------------------- */

/* Each int8 tactic row of nr_tactics_cpu_qgemm runs a hand-built plan of one step
 * (as test_conv_tactics.c does for fp32): slots, a calibration table with the input's
 * statistics, supports(), prepare(), run(). The result is compared tightly with the
 * reference executor run on the operands the tactic quantized (the activation grid
 * read back from the step's header, W through nr_qgemm_quantize_w), which checks the
 * whole plumbing (packing, im2col padding with the zero point, bias, residual,
 * activation), and loosely with the float reference: relative RMS error below 2%
 * (4% for the AVX2 kernels, whose activation grid has half as many steps). */

extern const nr_tactic nr_tactics_cpu_qgemm[];

#include "compiler/quant.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/qgemm/qgemm_tactic.h"
#include "kernels/ref/fused.h"
#include "op_test.h"

static const qt_header *qt_hdr_of(const nr_tactic_ctx *c, const nr_step *st) {
  return (const qt_header *)(c->plan->weights + st->packed_offset);
}

/* Activation grid and weights as the step quantized them: x and w replaced in place by
 * their dequantized values (w: channels x k, channel-major). */
static void dequantize_like(const nr_tactic_ctx *c, const nr_step *st, float *x, int64_t xn,
                            float *w, int64_t ch, int64_t k, int64_t stride_c,
                            int64_t stride_k) {
  const qt_header *h = (const qt_header *)(c->plan->weights + st->packed_offset);
  for (int64_t i = 0; i < xn; i++)
    x[i] = h->x_scale *
           (float)(nr_qgemm_quantize_x(x[i], h->inv_scale, h->zero_point, h->qmax) -
                   h->zero_point);
  int8_t *q = malloc((size_t)(ch * k));
  float *s = malloc(sizeof(float) * (size_t)ch);
  int32_t *sum = malloc(sizeof(int32_t) * (size_t)ch);
  nr_qgemm_quantize_w(ch, k, w, stride_c, stride_k, q, s, sum);
  for (int64_t i = 0; i < ch; i++)
    for (int64_t p = 0; p < k; p++)
      w[i * stride_c + p * stride_k] = s[i] * q[i * k + p];
  free(q), free(s), free(sum);
}

static double rel_rms(const float *got, const float *want, int64_t n) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < n; i++)
    e += (double)(got[i] - want[i]) * (got[i] - want[i]), r += (double)want[i] * want[i];
  return sqrt(e / (r + 1e-30));
}

typedef struct qconv_case {
  int n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw, group;
  bool bias, res;
  nr_act act;
} qconv_case;

/* Conv (+ residual + activation) through the reference executor. */
static bool conv_reference(const qconv_case *k, const float *x, const float *w,
                           const float *b, const float *r, float *y, int64_t *ydims) {
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c / k->group, k->kh, k->kw};
  int64_t bd[1] = {k->m};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, xd, x),
           vw = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value vb = make_value(NR_DTYPE_FLOAT, 1, bd, b);
  const nr_value *ins[3] = {&vx, &vw, k->bias ? &vb : NULL};
  int64_t pads[4] = {k->ph, k->pw, k->ph, k->pw}, st[2] = {k->sh, k->sw},
          dl[2] = {k->dh, k->dw};
  nr_attr at[4] = {attr_ints("pads", 4, pads), attr_ints("strides", 2, st),
                   attr_ints("dilations", 2, dl), attr_i("group", k->group)};
  nr_value out;
  nr_error err = {0};
  if (run_one("Conv", 13, 4, at, k->bias ? 3 : 2, ins, &out, &err))
    return false;
  int64_t n = nr_value_count(&out);
  memcpy(y, out.data, sizeof(float) * (size_t)n);
  memcpy(ydims, out.dims, sizeof(int64_t) * 4);
  nr_value_free(&out);
  for (int64_t i = 0; r && i < n; i++)
    y[i] += r[i];
  nr_act_apply(k->act, k->act == NR_ACT_CLIP ? -0.25f : 0.1f, 0.5f, y, n);
  return true;
}

typedef struct qharness {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[8];
  int64_t pads[4], st[2], dl[2];
  nr_calib calib;
} qharness;

static void qconv_build(qharness *hs, const qconv_case *k, const float *x, const float *w,
                        const float *b, const int64_t *yd, bool fused) {
  memset(hs, 0, sizeof *hs);
  nr_plan *p = &hs->plan;
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c / k->group, k->kh, k->kw};
  nr_slot *s = hs->slots;
  s[0] = (nr_slot){.name = "X", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[0].dims, xd, sizeof xd);
  s[1] = (nr_slot){.name = "W", .dtype = NR_DTYPE_FLOAT, .rank = 4, .kind = NR_SLOT_CONST};
  memcpy(s[1].dims, wd, sizeof wd);
  nr_plan_add_weights(p, w, sizeof(float) * (size_t)(wd[0] * wd[1] * wd[2] * wd[3]),
                      &s[1].offset, NULL);
  s[2] = (nr_slot){.name = "B", .dtype = NR_DTYPE_FLOAT, .rank = 1, .kind = NR_SLOT_CONST};
  s[2].dims[0] = k->m;
  nr_plan_add_weights(p, b, sizeof(float) * (size_t)k->m, &s[2].offset, NULL);
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[3].dims, yd, sizeof(int64_t) * 4);
  s[4] = s[3];
  s[4].name = "Y";
  p->slots = s;
  p->n_slots = 5;
  hs->pads[0] = hs->pads[2] = k->ph, hs->pads[1] = hs->pads[3] = k->pw;
  hs->st[0] = k->sh, hs->st[1] = k->sw, hs->dl[0] = k->dh, hs->dl[1] = k->dw;
  int na = 0;
  hs->attrs[na++] = attr_ints("pads", 4, hs->pads);
  hs->attrs[na++] = attr_ints("strides", 2, hs->st);
  hs->attrs[na++] = attr_ints("dilations", 2, hs->dl);
  hs->attrs[na++] = attr_i("group", k->group);
  if (fused) {
    hs->attrs[na++] = attr_s("activation", nr_act_name(k->act));
    hs->attrs[na++] = attr_f("act_alpha", k->act == NR_ACT_CLIP ? -0.25f : 0.1f);
    hs->attrs[na++] = attr_f("act_beta", 0.5f);
  }
  hs->node = (nr_node){.name = "conv",
                       .op_type = fused ? "FusedConv" : "Conv",
                       .domain = fused ? NR_DOMAIN : "",
                       .opset = fused ? 1 : 13,
                       .n_attrs = na,
                       .attrs = hs->attrs};
  hs->step = (nr_step){.node = 0,
                       .n_in = fused ? 4 : 3,
                       .n_out = 1,
                       .in = {0, 1, k->bias ? 2 : -1, k->res ? 3 : -1},
                       .out = {4}};
  nr_error err = {0};
  nr_calib_observe(&hs->calib, "X", x, (size_t)(xd[0] * xd[1] * xd[2] * xd[3]), &err);
}

/* Runs tactic tac on case k; returns whether it supported it. */
static bool qconv_case_run(nr_test_state *t, const nr_tactic *tac, const qconv_case *k,
                           unsigned seed, nr_threadpool *pool) {
  unsigned sd = seed;
  int64_t xn = (int64_t)k->n * k->c * k->h * k->w, cg = k->c / k->group;
  int64_t kk = cg * k->kh * k->kw, wn = (int64_t)k->m * kk;
  float *x = random_floats(xn, &sd), *w = random_floats(wn, &sd),
        *b = random_floats(k->m, &sd);
  for (int64_t i = 0; i < xn; i++)
    x[i] = 0.5f + 1.5f * x[i]; /* [-1, 2]: an asymmetric range, zero point inside */
  int64_t yd[4], ycap = (int64_t)k->n * k->m * (k->h + 2 * k->ph) * (k->w + 2 * k->pw) + 64;
  float *want = malloc(sizeof(float) * (size_t)ycap),
        *tight = malloc(sizeof(float) * (size_t)ycap);
  qconv_case k0 = *k;
  k0.act = NR_ACT_NONE, k0.res = false;
  bool ok = conv_reference(&k0, x, w, b, NULL, want, yd), supported = false;
  int64_t yn = yd[0] * yd[1] * yd[2] * yd[3];
  float *r = random_floats(yn, &sd);
  ok = ok && conv_reference(k, x, w, b, k->res ? r : NULL, want, yd);
  bool fused = strcmp(tac->op_type, "Conv") != 0;
  qharness hs;
  qconv_build(&hs, k, x, w, b, yd, fused);
  if (!ok) {
    CHECK(false, "conv reference failed (seed %u)", seed);
    goto done;
  }
  nr_error err = {0};
  nr_tactic_ctx c = {.plan = &hs.plan,
                     .node = &hs.node,
                     .step = &hs.step,
                     .err = &err,
                     .calib = &hs.calib};
  if (!tac->supports(&c))
    goto done;
  supported = true;
  hs.step.tactic = tac;
  if (tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "%s prepare: %s (seed %u)", tac->id, err.message, seed);
    goto done;
  }
  /* activations in the tactic's layout (NHWC tactics: X, R and Y reordered) */
  nr_layout l = tac->layout;
  hs.slots[0].layout = hs.slots[3].layout = hs.slots[4].layout = l;
  float *y = malloc(sizeof(float) * (size_t)(yn + GUARD)), *yl = y, *xl = x, *rl = r;
  float *xt = malloc(sizeof(float) * (size_t)xn), *wt = malloc(sizeof(float) * (size_t)wn);
  if (l != NR_LAYOUT_PLAIN) {
    xl = malloc(sizeof(float) * (size_t)xn), rl = malloc(sizeof(float) * (size_t)yn);
    yl = malloc(sizeof(float) * (size_t)(yn + GUARD));
    nr_reorder_f32(x, NR_LAYOUT_PLAIN, xl, l, hs.slots[0].dims, NULL);
    nr_reorder_f32(r, NR_LAYOUT_PLAIN, rl, l, yd, NULL);
  }
  for (int i = 0; i < GUARD; i++)
    yl[yn + i] = 1234.5f;
  uint8_t *scratch = alloc64(hs.step.scratch + GUARD);
  memset(scratch + hs.step.scratch, 0x5a, GUARD);
  void *in[4] = {xl, hs.plan.weights + hs.slots[1].offset,
                 hs.plan.weights + hs.slots[2].offset, rl};
  void *out[1] = {yl};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], k->bias ? &hs.slots[2] : NULL,
                           k->res ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args a = {.plan = &hs.plan,
                    .step = &hs.step,
                    .node = &hs.node,
                    .in = in,
                    .out = out,
                    .in_slot = ins,
                    .out_slot = outs,
                    .packed = hs.plan.weights + hs.step.packed_offset,
                    .scratch = scratch,
                    .pool = pool,
                    .err = &err};
  CHECK(tac->run(&a) == NR_OK, "%s run (seed %u)", tac->id, seed);
  bool guards = true;
  for (int i = 0; i < GUARD; i++)
    guards &= yl[yn + i] == 1234.5f && scratch[hs.step.scratch + i] == 0x5a;
  CHECK(guards, "%s wrote past Y or its scratch (seed %u)", tac->id, seed);
  if (l != NR_LAYOUT_PLAIN) {
    nr_reorder_f32(yl, l, y, NR_LAYOUT_PLAIN, yd, NULL);
    free(xl), free(rl), free(yl);
  }
  memcpy(xt, x, sizeof(float) * (size_t)xn);
  memcpy(wt, w, sizeof(float) * (size_t)wn);
  dequantize_like(&c, &hs.step, xt, xn, wt, k->m, kk, kk, 1);
  conv_reference(k, xt, wt, b, k->res ? r : NULL, tight, yd);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabsf(y[i] - tight[i]) <= 1e-5f * (float)kk * (1 + fabsf(tight[i]))))
      bad = i;
  double rms = rel_rms(y, want, yn), rms_max = 0.02 * 255.0 / qt_hdr_of(&c, &hs.step)->qmax;
  CHECK(
      bad < 0 && rms < rms_max,
      "%s: n%d c%d %dx%d m%d k%dx%d s%d,%d p%d,%d d%d,%d g%d bias%d res%d act %s: y[%lld] "
      "= %g, dequantized reference %g; relative RMS error to float %.4f (seed %u)",
      tac->id, k->n, k->c, k->h, k->w, k->m, k->kh, k->kw, k->sh, k->sw, k->ph, k->pw,
      k->dh, k->dw, k->group, k->bias, k->res, nr_act_name(k->act), (long long)bad,
      bad >= 0 ? y[bad] : 0, bad >= 0 ? tight[bad] : 0, rms, seed);
  free(y), free(xt), free(wt), free(scratch);
done:
  free(hs.plan.weights);
  for (int i = 0; i < hs.calib.n; i++)
    free(hs.calib.t[i].name);
  free(hs.calib.t);
  free(x), free(w), free(b), free(r), free(want), free(tight);
  return supported;
}

/* Geometries for each im2col path: "same" stride 1 (the mask table; rows wider than
 * 64), stride 2 (16-bit loads), valid padding and stride 3 (segments, scalar), dilation,
 * groups, 1x1 stride 1 (the 1x1 tactic) and 2, batches, K not a multiple of 4, and
 * which tactics must decline (depthwise; small products for the 64-column tile). */
static const qconv_case qcases[] = {
    /* n c  h   w   m  kh kw sh sw ph pw dh dw g  bias res act */
    {1, 16, 12, 12, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 5, 9, 70, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_NONE},
    {2, 8, 13, 15, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true, NR_ACT_CLIP},
    {1, 3, 23, 150, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, false, NR_ACT_RELU},
    {1, 7, 11, 13, 12, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, false, NR_ACT_SIGMOID},
    {1, 6, 20, 19, 10, 5, 5, 3, 3, 2, 2, 1, 1, 1, true, true, NR_ACT_LEAKY_RELU},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false, NR_ACT_HARD_SWISH},
    {1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true, NR_ACT_RELU},
    {2, 32, 7, 7, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 17, 9, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false, NR_ACT_CLIP},
    {1, 12, 9, 9, 12, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, NR_ACT_TANH},
    {1, 64, 14, 14, 40, 1, 1, 1, 1, 0, 0, 1, 1, 4, true, false, NR_ACT_NONE},
    {1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, true, false, NR_ACT_NONE}, /* depthwise */
    /* products large enough for the 64-column tile (at least 784 columns, 512 k) */
    {1, 64, 28, 28, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 512, 28, 28, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, NR_ACT_NONE},
};

NR_TEST(qgemm_conv_tactics_vs_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int rows = 0;
  for (const nr_tactic *tac = nr_tactics_cpu_qgemm; tac->id; tac++) {
    if ((tac->isa & ~nr_cpu_isa()) || !strstr(tac->op_type, "Conv"))
      continue;
    bool nhwc = tac->layout == NR_LAYOUT_NHWC;
    CHECK(tac->precision == NR_PREC_INT8 && (nhwc || tac->layout == NR_LAYOUT_PLAIN));
    bool fused = strcmp(tac->op_type, "Conv") != 0, is_1x1 = !strcmp(tac->algo, "gemm1x1");
    /* the id names the micro-kernel: nr_qs8_conv_<algo>_<tile>__<isa> on a W_A one,
     * nr_qs8_conv_nhwc_1x1_<tile>__<isa> on a W_B one */
    char kname[96];
    if (nhwc)
      snprintf(kname, sizeof kname, "nr_qs8_gemm_%s", tac->id + 21);
    else
      snprintf(kname, sizeof kname, "nr_qs8_wgemm_%s", tac->id + (is_1x1 ? 16 : 19));
    int uk = nr_qgemm_ukernel_find(kname), ran = 0;
    REQUIRE(uk >= 0, "%s names no micro-kernel (%s)", tac->id, kname);
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    CHECK(u->wside == (nhwc ? NR_QGEMM_W_B : NR_QGEMM_W_A), "%s", tac->id);
    for (size_t i = 0; i < sizeof qcases / sizeof qcases[0]; i++) {
      qconv_case k = qcases[i];
      if (!fused)
        k.res = false, k.act = NR_ACT_NONE;
      bool sup = qconv_case_run(t, tac, &k, 700u + (unsigned)i, pool);
      int64_t oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
      int64_t ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
      int64_t kk = k.c / k.group * k.kh * k.kw;
      bool want = k.m / k.group >= 4 &&
                  (!is_1x1 ||
                   (k.kh == 1 && k.kw == 1 && k.sh == 1 && k.sw == 1 && !k.ph && !k.pw)) &&
                  (nhwc || u->nr != 64 || (oh * ow >= 784 && kk >= 512)) &&
                  (u->mr != 1 || oh * ow <= 4);
      CHECK(sup == want, "%s: case %zu supported %d, want %d", tac->id, i, sup, want);
      ran += sup;
    }
    rows += ran > 0;
  }
  CHECK(rows >= 6, "only %d conv rows ran", rows); /* PLAIN 1x1, im2col, NHWC 1x1 */
  nr_threadpool_destroy(pool);
}

/* Gemm / MatMul / FusedGemm / FusedMatMul on the W_B rows, against loops written here;
 * the activation grid comes from node attributes (the QDQ path of nr_quant_act_params)
 * where the conv cases use the calibration table. */
typedef struct qgemm_case {
  const char *op;
  int64_t batch, m, k, n; /* MatMul / FusedMatMul: A is [batch, m, k] when batch > 1 */
  bool ta, tb;            /* Gemm, FusedGemm */
  int c;                  /* input 2: 0 none, 1 [n] const, 2 [m, 1] const, 3 scalar const,
                             4 [m, n] runtime, 5 [n] runtime */
  float alpha, beta;
  bool res; /* fused ops: residual input 3 */
  nr_act act;
} qgemm_case;

static const qgemm_case gcases[] = {
    {"Gemm", 1, 5, 37, 19, false, true, 1, 0.5f, 2.0f, false, NR_ACT_NONE},
    {"Gemm", 1, 3, 64, 70, true, false, 2, 1.0f, 1.5f, false, NR_ACT_NONE},
    {"Gemm", 1, 1, 100, 33, false, false, 3, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"Gemm", 1, 20, 50, 40, false, true, 4, 1.0f, 0.5f, false, NR_ACT_NONE},
    {"Gemm", 1, 6, 1500, 17, false, false, 0, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"MatMul", 2, 7, 48, 65, false, false, 0, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"MatMul", 1, 2, 31, 100, false, false, 0, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"FusedGemm", 1, 9, 30, 24, false, true, 1, 1.0f, 1.0f, true, NR_ACT_RELU},
    {"FusedGemm", 1, 13, 21, 33, true, true, 4, 2.0f, 1.0f, false, NR_ACT_SIGMOID},
    {"FusedMatMul", 3, 5, 16, 40, false, false, 1, 1.0f, 1.0f, true, NR_ACT_CLIP},
    {"FusedMatMul", 1, 4, 40, 18, false, false, 5, 1.0f, 1.0f, false, NR_ACT_HARD_SWISH},
};

static bool is_fused(const qgemm_case *g) {
  return !strncmp(g->op, "Fused", 5);
}

/* op(A)[i][p], op(B)[p][j] of the case's storage. */
static float qa_at(const qgemm_case *g, const float *a, int64_t i, int64_t p) {
  return g->ta ? a[p * g->m + i] : a[i * g->k + p];
}
static float qb_at(const qgemm_case *g, const float *b, int64_t p, int64_t j) {
  return g->tb ? b[j * g->k + p] : b[p * g->n + j];
}

static void gemm_reference(const qgemm_case *g, const float *a, const float *b,
                           const float *c, const float *r, float *y) {
  int64_t rows = g->batch * g->m;
  bool mm = strstr(g->op, "MatMul") != NULL;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < g->n; j++) {
      double s = 0;
      for (int64_t p = 0; p < g->k; p++)
        s += (double)qa_at(g, a, i, p) * qb_at(g, b, p, j);
      s *= g->alpha;
      float beta = mm ? 1.0f : g->beta;
      switch (g->c) {
      case 1:
      case 5: s += beta * c[j]; break;
      case 2: s += beta * c[i]; break;
      case 3: s += beta * c[0]; break;
      case 4: s += beta * c[i * g->n + j]; break;
      }
      if (r)
        s += r[i * g->n + j];
      float f = (float)s;
      nr_act_apply(g->act, g->act == NR_ACT_CLIP ? -0.25f : 0.1f, 0.5f, &f, 1);
      y[i * g->n + j] = f;
    }
}

typedef struct gharness {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[10];
  nr_calib calib;
} gharness;

static void gemm_build(gharness *hs, const qgemm_case *g, const float *a, const float *b,
                       const float *c) {
  memset(hs, 0, sizeof *hs);
  nr_slot *s = hs->slots;
  int64_t rows = g->batch * g->m;
  s[0] = (nr_slot){.name = "A", .dtype = NR_DTYPE_FLOAT};
  if (g->batch > 1)
    s[0].rank = 3, s[0].dims[0] = g->batch, s[0].dims[1] = g->m, s[0].dims[2] = g->k;
  else
    s[0].rank = 2, s[0].dims[0] = g->ta ? g->k : g->m, s[0].dims[1] = g->ta ? g->m : g->k;
  s[1] = (nr_slot){.name = "B",
                   .dtype = NR_DTYPE_FLOAT,
                   .rank = 2,
                   .kind = NR_SLOT_CONST,
                   .dims = {g->tb ? g->n : g->k, g->tb ? g->k : g->n}};
  nr_plan_add_weights(&hs->plan, b, sizeof(float) * (size_t)(g->k * g->n), &s[1].offset,
                      NULL);
  s[2] = (nr_slot){.name = "C", .dtype = NR_DTYPE_FLOAT, .rank = 1, .dims = {g->n}};
  if (g->c == 2)
    s[2].rank = 2, s[2].dims[0] = g->m, s[2].dims[1] = 1;
  if (g->c == 3)
    s[2].rank = 0;
  if (g->c == 4)
    s[2].rank = 2, s[2].dims[0] = g->m, s[2].dims[1] = g->n;
  if (g->c >= 1 && g->c <= 3) {
    s[2].kind = NR_SLOT_CONST;
    int64_t cn = g->c == 1 ? g->n : g->c == 2 ? g->m : 1;
    nr_plan_add_weights(&hs->plan, c, sizeof(float) * (size_t)cn, &s[2].offset, NULL);
  }
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = s[0].rank};
  memcpy(s[3].dims, s[0].dims, sizeof s[0].dims);
  s[3].dims[s[3].rank - 1] = g->n;
  if (g->batch == 1)
    s[3].dims[0] = g->m;
  s[4] = s[3];
  s[4].name = "Y";
  hs->plan.slots = s;
  hs->plan.n_slots = 5;
  int na = 0;
  if (strstr(g->op, "Gemm")) {
    hs->attrs[na++] = attr_i("transA", g->ta);
    hs->attrs[na++] = attr_i("transB", g->tb);
    hs->attrs[na++] = attr_f("alpha", g->alpha);
    hs->attrs[na++] = attr_f("beta", g->beta);
  }
  if (is_fused(g)) {
    hs->attrs[na++] = attr_s("activation", nr_act_name(g->act));
    hs->attrs[na++] = attr_f("act_alpha", g->act == NR_ACT_CLIP ? -0.25f : 0.1f);
    hs->attrs[na++] = attr_f("act_beta", 0.5f);
  }
  /* the activation grid as a pre-quantized model's QDQ pass would give it (a few dozen
   * values are too few for the default entropy calibration to see the range) */
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < rows * g->k; i++)
    lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
  hs->attrs[na++] = attr_f("nr_x_scale", (hi - lo) / 255.0f);
  hs->attrs[na++] = attr_i("nr_x_zero_point", lroundf(-lo / ((hi - lo) / 255.0f)));
  hs->node = (nr_node){.name = "gemm",
                       .op_type = (char *)g->op,
                       .domain = is_fused(g) ? NR_DOMAIN : "",
                       .opset = is_fused(g) ? 1 : 13,
                       .n_attrs = na,
                       .attrs = hs->attrs};
  hs->step = (nr_step){.node = 0,
                       .n_in = is_fused(g) ? 4 : 3,
                       .n_out = 1,
                       .in = {0, 1, g->c ? 2 : -1, g->res ? 3 : -1},
                       .out = {4}};
  nr_error err = {0};
  nr_calib_observe(&hs->calib, "A", a, (size_t)(rows * g->k), &err);
}

static bool gemm_case_run(nr_test_state *t, const nr_tactic *tac, const qgemm_case *g,
                          unsigned seed, nr_threadpool *pool) {
  unsigned sd = seed;
  int64_t rows = g->batch * g->m, an = rows * g->k, bn = g->k * g->n, yn = rows * g->n;
  float *a = random_floats(an, &sd), *b = random_floats(bn, &sd);
  float *c = random_floats(yn, &sd), *r = random_floats(yn, &sd);
  float *want = malloc(sizeof(float) * (size_t)yn),
        *tight = malloc(sizeof(float) * (size_t)yn);
  float *y = malloc(sizeof(float) * (size_t)(yn + GUARD));
  for (int64_t i = 0; i < an; i++)
    a[i] = 0.5f + 1.5f * a[i];
  gemm_reference(g, a, b, c, g->res ? r : NULL, want);
  gharness hs;
  gemm_build(&hs, g, a, b, c);
  nr_error err = {0};
  nr_tactic_ctx cx = {.plan = &hs.plan,
                      .node = &hs.node,
                      .step = &hs.step,
                      .err = &err,
                      .calib = &hs.calib};
  bool supported = tac->supports(&cx);
  if (!supported)
    goto done;
  hs.step.tactic = tac;
  if (tac->prepare(&cx, &hs.plan, &hs.step)) {
    CHECK(false, "%s prepare: %s (seed %u)", tac->id, err.message, seed);
    goto done;
  }
  for (int i = 0; i < GUARD; i++)
    y[yn + i] = 1234.5f;
  uint8_t *scratch = alloc64(hs.step.scratch + GUARD);
  memset(scratch + hs.step.scratch, 0x5a, GUARD);
  bool cconst = g->c >= 1 && g->c <= 3;
  void *in[4] = {a, hs.plan.weights + hs.slots[1].offset,
                 cconst ? (void *)(hs.plan.weights + hs.slots[2].offset) : c, r};
  void *out[1] = {y};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], g->c ? &hs.slots[2] : NULL,
                           g->res ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args x = {.plan = &hs.plan,
                    .step = &hs.step,
                    .node = &hs.node,
                    .in = in,
                    .out = out,
                    .in_slot = ins,
                    .out_slot = outs,
                    .packed = hs.plan.weights + hs.step.packed_offset,
                    .scratch = scratch,
                    .pool = pool,
                    .err = &err};
  CHECK(tac->run(&x) == NR_OK, "%s run (seed %u)", tac->id, seed);
  bool guards = true;
  for (int i = 0; i < GUARD; i++)
    guards &= y[yn + i] == 1234.5f && scratch[hs.step.scratch + i] == 0x5a;
  CHECK(guards, "%s wrote past Y or its scratch (seed %u)", tac->id, seed);
  float *at = malloc(sizeof(float) * (size_t)an), *bt = malloc(sizeof(float) * (size_t)bn);
  memcpy(at, a, sizeof(float) * (size_t)an);
  memcpy(bt, b, sizeof(float) * (size_t)bn);
  dequantize_like(&cx, &hs.step, at, an, bt, g->n, g->k, g->tb ? g->k : 1,
                  g->tb ? 1 : g->n);
  gemm_reference(g, at, bt, c, g->res ? r : NULL, tight);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabsf(y[i] - tight[i]) <= 1e-5f * (float)g->k * (1 + fabsf(tight[i]))))
      bad = i;
  double rms = rel_rms(y, want, yn),
         rms_max = 0.02 * 255.0 / qt_hdr_of(&cx, &hs.step)->qmax;
  CHECK(
      bad < 0 && rms < rms_max,
      "%s (%s) %lldx%lldx%lldx%lld ta%d tb%d c%d res%d act %s: "
      "y[%lld] = %g, dequantized reference %g; relative RMS error to float %.4f (seed %u)",
      tac->id, g->op, (long long)g->batch, (long long)g->m, (long long)g->k,
      (long long)g->n, g->ta, g->tb, g->c, g->res, nr_act_name(g->act), (long long)bad,
      bad >= 0 ? y[bad] : 0, bad >= 0 ? tight[bad] : 0, rms, seed);
  free(at), free(bt), free(scratch);
done:
  free(hs.plan.weights);
  for (int i = 0; i < hs.calib.n; i++)
    free(hs.calib.t[i].name);
  free(hs.calib.t);
  free(a), free(b), free(c), free(r), free(want), free(tight), free(y);
  return supported;
}

NR_TEST(qgemm_gemm_tactics_vs_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int rows = 0;
  for (const nr_tactic *tac = nr_tactics_cpu_qgemm; tac->id; tac++) {
    if ((tac->isa & ~nr_cpu_isa()) || strstr(tac->op_type, "Conv"))
      continue;
    CHECK(tac->precision == NR_PREC_INT8 && !strncmp(tac->id, "nr_qs8_gemm_", 12));
    int uk = nr_qgemm_ukernel_find(tac->id), ran = 0;
    REQUIRE(uk >= 0, "%s is not a micro-kernel's name", tac->id);
    for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++) {
      if (strcmp(gcases[i].op, tac->op_type))
        continue;
      bool sup = gemm_case_run(t, tac, &gcases[i], 900u + (unsigned)i, pool);
      bool want = nr_qgemm_ukernel_get(uk)->mr > 1 || gcases[i].batch * gcases[i].m <= 4;
      CHECK(sup == want, "%s: case %zu supported %d, want %d", tac->id, i, sup, want);
      ran += sup;
    }
    rows += ran > 0;
  }
  CHECK(rows >= 4, "only %d gemm rows ran", rows); /* every op, even on a portable CPU */
  nr_threadpool_destroy(pool);
}

/* ---- through the compiler ----------------------------------------------------------- */

#include "compiler/knob.h"
#include "engine/engine.h"
#include "graph_build.h"

static int q_const(nr_graph *g, const char *name, int rank, const int64_t *dims, float lo,
                   float span, unsigned seed) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  nr_value *v = &g->tensors[t].value;
  nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL);
  for (int64_t i = 0; i < nr_value_count(v); i++)
    ((float *)v->data)[i] = lo + span * (float)(rand_r(&seed) % 1000) / 1000.0f;
  return t;
}

static int q_conv(nr_graph *g, const char *name, int x, int64_t cin, int64_t cout, int k,
                  int stride, unsigned seed) {
  char wn[64], bn[64];
  int64_t wd[4] = {cout, cin, k, k};
  snprintf(wn, sizeof wn, "%s_w", name);
  snprintf(bn, sizeof bn, "%s_b", name);
  int ins[3] = {x, q_const(g, wn, 4, wd, -0.5f, 1.0f, seed),
                q_const(g, bn, 1, &cout, -0.2f, 0.4f, seed + 1)};
  int y = tg_node(g, "Conv", name, 3, ins);
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, st[2] = {stride, stride};
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "pads", 4, pads, NULL);
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "strides", 2, st, NULL);
  return y;
}

static nr_status observe_calib(void *user, const nr_graph *g, int t, const nr_value *v) {
  nr_error err = {0};
  if (v->dtype != NR_DTYPE_FLOAT || !v->data)
    return NR_OK;
  return nr_calib_observe(user, g->tensors[t].name, v->data, (size_t)nr_value_count(v),
                          &err);
}

/* A residual block and a classifier, every Conv and the Gemm in int8 (conv2 pinned to
 * im2col by conv.algo, so one of this family's rows must run it, with its residual
 * and activation in a separate pass; conv3 on one thread), calibrated on its own input
 * by the reference executor: the engine agrees with the reference within int8 error,
 * and an engine file written and read back computes the same bits. */
NR_TEST(qgemm_graph_int8_route_and_engine_file) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  g->ir_version = 8;
  int64_t xd[4] = {1, 8, 12, 12}, wfc[2] = {10, 24}, bfc = 10;
  int x = tg_input(g, "x", 4, xd);
  int y = q_conv(g, "conv1", x, 8, 16, 3, 1, 1);
  int r1 = tg_node(g, "Relu", "relu1", 1, &y);
  y = q_conv(g, "conv2", r1, 16, 16, 1, 1, 3);
  y = tg_node(g, "Add", "add", 2, (int[]){y, r1});
  y = tg_node(g, "Relu", "relu2", 1, &y);
  y = q_conv(g, "conv3", y, 16, 24, 3, 2, 5);
  y = tg_node(g, "Relu", "relu3", 1, &y);
  y = tg_node(g, "GlobalAveragePool", "gap", 1, &y);
  y = tg_node(g, "Flatten", "flat", 1, &y);
  y = tg_node(g, "Gemm", "fc", 3,
              (int[]){y, q_const(g, "fc_w", 2, wfc, -0.5f, 1.0f, 7),
                      q_const(g, "fc_b", 1, &bfc, -0.1f, 0.2f, 8)});
  nr_pu_set_attr_int(g, g->n_nodes - 1, "transB", 1, NULL);
  REQUIRE(tg_finish(t, g, y));
  unsigned seed = 99;
  float *xin = random_floats(8 * 12 * 12, &seed);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, xin), want = {0};
  nr_calib *calib = calloc(1, sizeof *calib);
  nr_error err = {0};
  REQUIRE(!nr_ref_exec_observed(g, &in, &want, observe_calib, calib, &err), "%s",
          err.message);
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  const char *route = "-precision@<Conv>=int8 -precision@<Gemm>=int8 "
                      "-quant.calibration=minmax -conv.algo@conv2=im2col "
                      "-conv.epilogue@conv2=separate -conv.threads@conv3=1";
  REQUIRE(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err) &&
              !nr_route_parse(&r, route, &err) && !nr_compile(g, &r, 2, calib, &p, &err),
          "%s", err.message);
  int int8_steps = 0;
  for (int i = 0; i < p->n_steps; i++) {
    const nr_step *st = &p->steps[i];
    const char *op = st->node >= 0 ? p->graph->nodes[st->node].op_type : "";
    if (strstr(op, "Conv") || strstr(op, "Gemm")) {
      CHECK(st->tactic->precision == NR_PREC_INT8, "%s runs %s", op, st->tactic->id);
      int8_steps++;
    }
    if (st->node >= 0 && !strcmp(p->graph->nodes[st->node].name, "conv2"))
      CHECK(!strncmp(st->tactic->id, "nr_qs8_conv_im2col_", 19), "conv2 runs %s",
            st->tactic->id);
  }
  CHECK(int8_steps == 4, "%d int8 steps", int8_steps);
  nr_engine e = {.plan = p, .threads = 2};
  uint8_t *file = NULL;
  size_t len = 0;
  nr_engine *back = NULL;
  REQUIRE(!nr_engine_serialize(&e, &file, &len, &err) &&
              !nr_engine_parse(file, len, false, &back, &err),
          "%s", err.message);
  nr_buffer bin = {NR_DTYPE_FLOAT, 4, {1, 8, 12, 12}, xin}, o1 = {0}, o2 = {0};
  nr_context *c1 = NULL, *c2 = NULL;
  CHECK(!nr_context_create(&e, 2, &c1, &err) && !nr_context_run(c1, &bin, &o1, &err), "%s",
        err.message);
  CHECK(!nr_context_create(back, 1, &c2, &err) && !nr_context_run(c2, &bin, &o2, &err),
        "%s", err.message);
  if (o1.data && o2.data) {
    CHECK(!memcmp(o1.data, o2.data, sizeof(float) * 10),
          "the engine file computes otherwise");
    double rms = rel_rms(o1.data, want.data, 10);
    CHECK(rms < 0.05, "relative RMS error %.4f against the reference", rms);
  }
  nr_buffer_free(&o1), nr_buffer_free(&o2);
  nr_context_destroy(c1), nr_context_destroy(c2);
  nr_engine_free(back);
  free(file);
  nr_plan_destroy(p);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  nr_calib_destroy(calib);
  nr_value_free(&want);
  free(xin);
  nr_graph_destroy(g);
}
