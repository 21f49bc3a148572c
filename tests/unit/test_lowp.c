/* test_lowp.c - the fp16 / bf16 family (src/kernels/cpu/lpgemm).
 *
 *  - Conversions: every one of the 65536 fp16 patterns widened against its value by
 *    definition and narrowed back; fp32 -> fp16 rounding against a reference written
 *    here (the nearest binary16 found in double arithmetic) on every rounding
 *    boundary (each half, each midpoint and its fp32 neighbours, both signs) plus
 *    overflow, underflow, denormal and NaN inputs; fp32 -> bf16 against a reference
 *    that picks the nearer of the two bf16 neighbours in double (ties to the even
 *    one), on hand-written cases (ties, overflow, NaN, Inf, denormals) and on the
 *    boundaries of every bf16 pattern. The AVX2 and AVX-512 bulk forms must equal
 *    the scalar definitions bit for bit.
 *  - Kernels: every micro-kernel of lpgemm_ukernels.inc this machine runs, on shapes
 *    below, at and above its tile with small blocking (every loop turns), raw /
 *    transposed / pre-packed operands, epilogues, guard words around C; against a
 *    double reference on the narrow-rounded operands (tight: fp32 accumulation
 *    error only) and on the fp32 operands (loose: the rounding bound below), and
 *    threaded runs equal to the single-threaded run bit for bit.
 *  - Tactics: small graphs built along precision@NODE=fp16|bf16 routes, run on a
 *    context and compared with the reference executor (tight against the graph with
 *    narrow-rounded weights and inputs, loose against the fp32 graph); the oneDNN
 *    and block-widening tactics swapped into the plan; nodes without a tactic.
 *
 * Loose bound. With u the unit roundoff of the narrow type (2^-11 fp16, 2^-8 bf16),
 * a' = a(1+d1), b' = b(1+d2), |d| <= u, so |a'b' - ab| <= (2u + u^2)|ab|, plus, for
 * fp16, an absolute 2^-25 per operand where a value falls in the subnormal range
 * (below 2^-14). The tests use operands in [-1, 1], so per output
 *   |C - C_fp32| <= tight + |alpha| ((2u + u^2) sum |a b| + k 2^-24 [fp16]).
 * At the graph level sum |a b| <= K max|x| max|w| stands in for the sum. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "plan/knob.h"
#include "graph_build.h"
#include "kernels/cpu/lpgemm/lp_onednn.h"
#include "kernels/cpu/lpgemm/lpgemm_impl.h"
#include "kernels/ref/executor.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float f) { return nr_lp_f32_bits(f); }
static float bitsf(uint32_t u) { return nr_lp_bits_f32(u); }

/* ---- conversions: fp16 ---------------------------------------------------------------- */

/* The value of binary16 pattern h by definition (NaN for NaNs). */
static double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* The nearest binary16 of f, found in double: the value in units of its binade's
 * spacing, rounded with nearbyint (ties to even in the default rounding mode). */
static uint16_t ref_to_f16(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (isnan(f))
    return (uint16_t)(sign | 0x7e00 | ((fbits(f) >> 13) & 0x3ff));
  double a = fabs((double)f);
  if (a >= 65520.0) /* max 65504 plus half its spacing rounds away */
    return sign | 0x7c00;
  int e = 0;
  frexp(a, &e);
  int binade = a == 0 || e - 1 < -14 ? -14 : e - 1;
  double q = nearbyint(ldexp(a, 10 - binade));
  if (q >= 2048)
    binade++, q /= 2;
  if (q < 1024)
    return (uint16_t)(sign | (uint16_t)q);
  return (uint16_t)(sign | ((binade + 15) << 10) | ((int)q - 1024));
}

static bool have(unsigned isa) { return (nr_cpu_isa() & isa) == isa; }

NR_TEST(lowp_fp16_every_pattern_widens_exactly_and_round_trips) {
  enum { N = 65536 };
  uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *h);
  float *w = malloc(N * sizeof *w), *wv = malloc(N * sizeof *w);
  REQUIRE(h && back && w && wv);
  for (int i = 0; i < N; i++)
    h[i] = (uint16_t)i;
  int bad = 0;
  for (int i = 0; i < N && bad < 5; i++) {
    float f = nr_fp16_to_fp32(h[i]);
    double want = f16_value(h[i]);
    bool nan = isnan(want);
    bool ok = nan ? isnan(f) && (fbits(f) & 0x400000) && !!signbit(f) == !!(h[i] & 0x8000)
                  : (double)f == want && !!signbit(f) == !!(h[i] & 0x8000);
    uint16_t rt = nr_fp32_to_fp16(f), want_rt = nan ? (uint16_t)(h[i] | 0x200) : h[i];
    if (!ok || rt != want_rt) {
      CHECK(false, "fp16 %04x: widened to %08x (%g), narrowed back to %04x", h[i], fbits(f),
            (double)f, rt);
      bad++;
    }
  }
  nr_lp_widen_portable(NR_LP_FP16, h, w, N);
  for (int isa = 0; isa < 2; isa++) {
    if (!have(isa ? NR_ISA_AVX512 : NR_ISA_AVX2))
      continue;
    (isa ? nr_lp_widen__avx512 : nr_lp_widen__avx2)(NR_LP_FP16, h, wv, N);
    CHECK(!memcmp(w, wv, N * sizeof *w), "%s fp16 widen differs from the scalar one",
          isa ? "avx512" : "avx2");
    (isa ? nr_lp_narrow__avx512 : nr_lp_narrow__avx2)(NR_LP_FP16, w, back, N);
    for (int i = 0; i < N; i++)
      if (back[i] != nr_fp32_to_fp16(w[i])) {
        CHECK(false, "%s fp16 narrow of %08x: %04x, scalar %04x", isa ? "avx512" : "avx2",
              fbits(w[i]), back[i], nr_fp32_to_fp16(w[i]));
        break;
      }
  }
  free(h), free(back), free(w), free(wv);
}

/* Every rounding decision of fp32 -> fp16: each finite half, the midpoint to the next
 * one and the fp32 values either side of it, a value in between, both signs; then
 * the edges of the range and NaNs. */
static float *f16_boundary_inputs(int64_t *count) {
  float *in = malloc(sizeof(float) * 0x7c00 * 10 + 64 * sizeof(float));
  int64_t n = 0;
  nr_rng r = nr_rng_make(99);
  for (uint32_t h = 0; h < 0x7c00; h++) {
    double lo = f16_value((uint16_t)h), hi = h + 1 < 0x7c00 ? f16_value((uint16_t)(h + 1)) : 65536.0;
    float mid = (float)((lo + hi) / 2); /* exact: one bit more than a half */
    float between = (float)(lo + (hi - lo) * ((nr_rng_u32(&r) & 0xffff) / 65536.0));
    float v[5] = {(float)lo, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), between};
    for (int i = 0; i < 5; i++)
      in[n++] = v[i], in[n++] = -v[i];
  }
  static const uint32_t special[] = {
      0x7f800000, 0xff800000, 0x7f7fffff, 0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001,
      0x47800000, 0x33000000, 0x33000001, 0x32ffffff, 0x32800000, 0x00000001, 0x007fffff,
      0x80000001, 0x387fe000, 0x387ff000, 0x387fffff, 0x38800000, 0x7f800001, 0x7fc00000,
      0xffc00001, 0x7fbfffff, 0xffffffff, 0x7f802000, 0x00000000, 0x80000000};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
    in[n++] = bitsf(special[i]);
  *count = n;
  return in;
}

NR_TEST(lowp_fp32_to_fp16_rounds_to_nearest_even) {
  int64_t n;
  float *in = f16_boundary_inputs(&n);
  uint16_t *got = malloc(sizeof(uint16_t) * (size_t)n), *vec = malloc(sizeof(uint16_t) * (size_t)n);
  REQUIRE(in && got && vec);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; i++) {
    got[i] = nr_fp32_to_fp16(in[i]);
    uint16_t want = ref_to_f16(in[i]);
    if (got[i] != want) {
      CHECK(false, "fp32 %08x (%.9g) -> fp16 %04x, reference %04x", fbits(in[i]),
            (double)in[i], got[i], want);
      bad++;
    }
  }
  CHECK(nr_fp32_to_fp16(65504.0f) == 0x7bff && nr_fp32_to_fp16(65520.0f) == 0x7c00);
  CHECK(nr_fp32_to_fp16(0x1p-24f) == 0x0001 && nr_fp32_to_fp16(0x1p-25f) == 0x0000);
  CHECK(nr_fp32_to_fp16(0x1.8p-25f) == 0x0001 && nr_fp32_to_fp16(-0x1p-14f) == 0x8400);
  for (int isa = 0; isa < 2; isa++) {
    if (!have(isa ? NR_ISA_AVX512 : NR_ISA_AVX2))
      continue;
    (isa ? nr_lp_narrow__avx512 : nr_lp_narrow__avx2)(NR_LP_FP16, in, vec, n);
    for (int64_t i = 0; i < n; i++)
      if (vec[i] != nr_fp32_to_fp16(in[i])) {
        CHECK(false, "%s narrow of %08x: %04x, scalar %04x", isa ? "avx512" : "avx2",
              fbits(in[i]), vec[i], nr_fp32_to_fp16(in[i]));
        break;
      }
  }
  free(in), free(got), free(vec);
}

/* ---- conversions: bf16 ---------------------------------------------------------------- */

/* The value of fp32 pattern x (sign aside) with an unbounded exponent: 0x7f800000 is
 * 2^128, the bf16 neighbour above the largest finite value. */
static double unbounded_value(uint32_t x) {
  uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffff;
  return e == 0 ? ldexp(m, -149) : ldexp(0x800000 + m, (int)e - 150);
}

/* The nearer of the two bf16 neighbours of f (ties: the one with an even last bit);
 * a result of 2^128 is infinity. */
static uint16_t ref_to_bf16(float f) {
  uint32_t x = fbits(f), sign = x & 0x80000000u, ax = x & 0x7fffffffu;
  if (isnan(f))
    return (uint16_t)((x >> 16) | 0x40);
  if (ax >= 0x7f800000u)
    return (uint16_t)(x >> 16);
  uint32_t lo = ax & 0xffff0000u, hi = lo + 0x10000u;
  double a = unbounded_value(ax), dl = a - unbounded_value(lo), dh = unbounded_value(hi) - a;
  uint32_t pick = dl < dh ? lo : dh < dl ? hi : ((lo >> 16) & 1) ? hi : lo;
  return (uint16_t)((sign | pick) >> 16);
}

NR_TEST(lowp_bf16_rounding_cases) {
  static const struct {
    uint32_t in;
    uint16_t want;
    const char *what;
  } cases[] = {
      {0x3f800000, 0x3f80, "1.0 exact"},
      {0x3f808000, 0x3f80, "tie, even below"},
      {0x3f818000, 0x3f82, "tie, even above"},
      {0x3f808001, 0x3f81, "just above the tie"},
      {0x3f807fff, 0x3f80, "just below the tie"},
      {0xbf818000, 0xbf82, "negative tie"},
      {0x7f7f7fff, 0x7f7f, "largest that stays finite"},
      {0x7f7f8000, 0x7f80, "tie at the top rounds to infinity"},
      {0x7f7fffff, 0x7f80, "FLT_MAX overflows"},
      {0x7f800000, 0x7f80, "+inf"},
      {0xff800000, 0xff80, "-inf"},
      {0x7fc00000, 0x7fc0, "quiet NaN"},
      {0x7f800001, 0x7fc0, "signaling NaN, payload below bit 16: quieted"},
      {0x7fffffff, 0x7fff, "NaN that the rounding add would carry into the sign"},
      {0xff810000, 0xffc1, "negative NaN keeps its upper payload"},
      {0x00000001, 0x0000, "smallest denormal"},
      {0x00008000, 0x0000, "denormal tie, even below"},
      {0x00018000, 0x0002, "denormal tie, even above"},
      {0x007fffff, 0x0080, "largest denormal rounds to the smallest normal"},
      {0x80000000, 0x8000, "-0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = nr_fp32_to_bf16(bitsf(cases[i].in));
    CHECK(got == cases[i].want, "%s: %08x -> %04x, want %04x", cases[i].what, cases[i].in,
          got, cases[i].want);
    CHECK(ref_to_bf16(bitsf(cases[i].in)) == cases[i].want, "reference: %s", cases[i].what);
  }
}

NR_TEST(lowp_bf16_every_pattern_and_its_boundaries) {
  enum { N = 65536 };
  float *in = malloc(sizeof(float) * N * 6), *w = malloc(sizeof(float) * N);
  uint16_t *h = malloc(sizeof(uint16_t) * N), *got = malloc(sizeof(uint16_t) * N * 6);
  REQUIRE(in && w && h && got);
  int64_t n = 0, bad = 0;
  nr_rng r = nr_rng_make(7);
  for (uint32_t b = 0; b < N; b++) {
    h[b] = (uint16_t)b;
    float f = nr_bf16_to_fp32((uint16_t)b);
    bool nan = isnan(f);
    CHECK(fbits(f) == b << 16, "bf16 %04x widens to %08x", b, fbits(f));
    if (nr_fp32_to_bf16(f) != (nan ? (b | 0x40) : b) && bad++ < 5)
      CHECK(false, "bf16 %04x does not round-trip: %04x", b, nr_fp32_to_bf16(f));
    uint32_t x = b << 16;
    uint32_t v[6] = {x, x | 0x7fff, x | 0x8000, x | 0x8001, x | (nr_rng_u32(&r) & 0xffff), x | 0xffff};
    for (int i = 0; i < 6; i++)
      in[n++] = bitsf(v[i]);
  }
  for (int64_t i = 0; i < n && bad < 10; i++) {
    got[i] = nr_fp32_to_bf16(in[i]);
    if (got[i] != ref_to_bf16(in[i]) && bad++ < 10)
      CHECK(false, "fp32 %08x -> bf16 %04x, reference %04x", fbits(in[i]), got[i],
            ref_to_bf16(in[i]));
  }
  uint16_t *vec = malloc(sizeof(uint16_t) * (size_t)n);
  float *rv = malloc(sizeof(float) * (size_t)n), *rp = malloc(sizeof(float) * (size_t)n);
  REQUIRE(vec && rv && rp);
  nr_lp_round_portable(NR_LP_BF16, in, rp, n);
  for (int isa = 0; isa < 2; isa++) {
    if (!have(isa ? NR_ISA_AVX512 : NR_ISA_AVX2))
      continue;
    const char *name = isa ? "avx512" : "avx2";
    (isa ? nr_lp_narrow__avx512 : nr_lp_narrow__avx2)(NR_LP_BF16, in, vec, n);
    CHECK(!memcmp(vec, got, sizeof(uint16_t) * (size_t)n), "%s bf16 narrow differs", name);
    (isa ? nr_lp_round__avx512 : nr_lp_round__avx2)(NR_LP_BF16, in, rv, n);
    CHECK(!memcmp(rv, rp, sizeof(float) * (size_t)n), "%s bf16 round differs", name);
    (isa ? nr_lp_widen__avx512 : nr_lp_widen__avx2)(NR_LP_BF16, h, w, N);
    for (int b = 0; b < N; b++)
      if (fbits(w[b]) != (uint32_t)b << 16) {
        CHECK(false, "%s bf16 widen of %04x: %08x", name, b, fbits(w[b]));
        break;
      }
  }
  free(in), free(w), free(h), free(got), free(vec), free(rv), free(rp);
}

NR_TEST(lowp_fp16_round_and_bf16_pairs_match_scalar) {
  enum { N = 1000 };
  float in[2 * 32 + N], rp[N], rv[N];
  nr_rng r = nr_rng_make(3);
  for (int i = 0; i < 2 * 32 + N; i++)
    in[i] = bitsf(nr_rng_u32(&r)); /* every class: NaNs, denormals, huge */
  nr_lp_round_portable(NR_LP_FP16, in, rp, N);
  for (int i = 0; i < N; i++) {
    float want = nr_fp16_to_fp32(nr_fp32_to_fp16(in[i]));
    CHECK(fbits(rp[i]) == fbits(want), "round %08x", fbits(in[i]));
  }
  uint16_t pp[64], pv[64];
  nr_lp_bf16_pairs_portable(in, pp, 32);
  for (int j = 0; j < 32; j++)
    CHECK(pp[2 * j] == nr_fp32_to_bf16(in[j]) && pp[2 * j + 1] == nr_fp32_to_bf16(in[32 + j]),
          "pairs lane %d", j);
  for (int isa = 0; isa < 2; isa++) {
    if (!have(isa ? NR_ISA_AVX512 : NR_ISA_AVX2))
      continue;
    (isa ? nr_lp_round__avx512 : nr_lp_round__avx2)(NR_LP_FP16, in, rv, N);
    CHECK(!memcmp(rp, rv, sizeof rp), "%s fp16 round differs", isa ? "avx512" : "avx2");
    int h = isa ? 32 : 16;
    nr_lp_bf16_pairs_portable(in, pp, h);
    (isa ? nr_lp_bf16_pairs__avx512 : nr_lp_bf16_pairs__avx2)(in, pv, h);
    CHECK(!memcmp(pp, pv, sizeof(uint16_t) * 2 * (size_t)h), "%s bf16 pairs differ",
          isa ? "avx512" : "avx2");
  }
}

/* ---- kernels ---------------------------------------------------------------------------- */

#define GUARD 16
#define GUARD_BITS 0x7fc0dead

typedef struct problem {
  int64_t m, n, k;
  bool ta, tb, pa, pb;
  float alpha;
  nr_epilogue ep;
} problem;

static float round_to(nr_lp_type t, float x) {
  return t == NR_LP_FP16 ? nr_fp16_to_fp32(nr_fp32_to_fp16(x)) : nr_bf16_to_fp32(nr_fp32_to_bf16(x));
}

/* C in double over operands rounded (round) or not; *sum_abs gets |alpha| sum |a b|. */
static void reference(const problem *p, nr_lp_type t, bool round, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float *c, double *sum_abs) {
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t j = 0; j < p->n; j++) {
      double s = 0, sa = 0;
      for (int64_t q = 0; q < p->k; q++) {
        float x = p->ta ? a[q * lda + i] : a[i * lda + q];
        float y = p->tb ? b[j * ldb + q] : b[q * ldb + j];
        if (round)
          x = round_to(t, x), y = round_to(t, y);
        s += (double)x * y;
        sa += fabs((double)x * y);
      }
      float v = (float)(p->alpha * s);
      const nr_epilogue *e = &p->ep;
      double extra = 0;
      if (e->bias)
        v += e->bias_per_row ? e->bias[i] : e->bias[j], extra += 1;
      if (e->residual)
        v += e->beta * e->residual[i * e->ldr + j], extra += fabs(e->beta);
      nr_act_apply(e->act, e->act_a, e->act_b, &v, 1);
      c[i * p->n + j] = v;
      if (sum_abs)
        sum_abs[i * p->n + j] = fabs(p->alpha) * sa + extra;
    }
}

static const char *uk_name(nr_lpgemm_cfg cfg) { return nr_lpgemm_ukernel_get(cfg.ukernel)->name; }

/* Runs one problem and checks guards, the tight and the loose bound; the output goes
 * to *out (malloc'ed, m x n) when out is not NULL. */
static bool check_problem(nr_test_state *t, nr_lpgemm_cfg cfg, const problem *p,
                          uint64_t seed, nr_threadpool *pool, int threads, int split,
                          float **out) {
  nr_lp_type type = nr_lpgemm_ukernel_get(cfg.ukernel)->type;
  nr_rng r = nr_rng_make(seed);
  int64_t m = p->m, n = p->n, k = p->k;
  int64_t lda = (p->ta ? m : k) + 1, ldb = (p->tb ? k : n) + 2, ldc = n + 3;
  float *a = malloc(sizeof(float) * (size_t)((p->ta ? k : m) * lda));
  float *b = malloc(sizeof(float) * (size_t)((p->tb ? n : k) * ldb));
  for (int64_t i = 0; i < (p->ta ? k : m) * lda; i++)
    a[i] = nr_rng_pm1(&r);
  for (int64_t i = 0; i < (p->tb ? n : k) * ldb; i++)
    b[i] = nr_rng_pm1(&r);
  int64_t csize = m * ldc + 2 * GUARD;
  uint32_t *cbuf = malloc(sizeof(float) * (size_t)csize);
  for (int64_t i = 0; i < csize; i++)
    cbuf[i] = GUARD_BITS;
  float *c = (float *)(cbuf + GUARD);
  float *tight = malloc(sizeof(float) * (size_t)(m * n)), *loose = malloc(sizeof(float) * (size_t)(m * n));
  double *sum_abs = malloc(sizeof(double) * (size_t)(m * n));
  reference(p, type, true, a, lda, b, ldb, tight, sum_abs);
  reference(p, type, false, a, lda, b, ldb, loose, NULL);

  nr_lpgemm_operand oa = {a, lda, p->ta, false}, ob = {b, ldb, p->tb, false};
  uint16_t *pa = NULL, *pb = NULL;
  if (p->pa) {
    pa = aligned_alloc(64, (nr_lpgemm_packed_a_size(cfg, m, k) + 64) / 64 * 64);
    nr_lpgemm_pack_a(cfg, m, k, oa, pa);
    oa = (nr_lpgemm_operand){pa, 0, false, true};
  }
  if (p->pb) {
    pb = aligned_alloc(64, (nr_lpgemm_packed_b_size(cfg, k, n) + 64) / 64 * 64);
    nr_lpgemm_pack_b(cfg, k, n, ob, pb);
    ob = (nr_lpgemm_operand){pb, 0, false, true};
  }
  void *scratch = malloc(nr_lpgemm_scratch_size(cfg, m, n, k, threads));
  nr_lpgemm(cfg, split, m, n, k, p->alpha, oa, ob, c, ldc, &p->ep, scratch, pool, threads);

  double u = type == NR_LP_FP16 ? 0x1p-11 : 0x1p-8;
  double sub = type == NR_LP_FP16 ? 0x1p-24 * (double)k * fabs(p->alpha) : 0;
  bool ok = true;
  for (int64_t i = 0; i < csize && ok; i++) {
    bool inside = i >= GUARD && i < GUARD + m * ldc && (i - GUARD) % ldc < n;
    if (!inside && cbuf[i] != GUARD_BITS) {
      CHECK(false, "%s m=%lld n=%lld k=%lld: guard word %lld overwritten (seed %llu)",
            uk_name(cfg), (long long)m, (long long)n, (long long)k, (long long)i,
            (unsigned long long)seed);
      ok = false;
    }
  }
  for (int64_t i = 0; i < m && ok; i++)
    for (int64_t j = 0; j < n && ok; j++) {
      double g = c[i * ldc + j], s = sum_abs[i * n + j];
      double tol_t = 2.4e-7 * (double)(k + 4) * (s + 1);
      double tol_l = tol_t + (2 * u + u * u) * s + sub + 1e-6;
      double et = fabs(g - tight[i * n + j]), el = fabs(g - loose[i * n + j]);
      if (!(et <= tol_t) || !(el <= tol_l)) {
        CHECK(false,
              "%s m=%lld n=%lld k=%lld ta=%d tb=%d pa=%d pb=%d act=%s: C[%lld,%lld] = %.9g, "
              "rounded-operand reference %.9g (tol %.3g), fp32 reference %.9g (tol %.3g) "
              "(seed %llu)",
              uk_name(cfg), (long long)m, (long long)n, (long long)k, p->ta, p->tb, p->pa,
              p->pb, nr_act_name(p->ep.act), (long long)i, (long long)j, g,
              (double)tight[i * n + j], tol_t, (double)loose[i * n + j], tol_l,
              (unsigned long long)seed);
        ok = false;
      }
    }
  if (out) {
    *out = malloc(sizeof(float) * (size_t)(m * n));
    for (int64_t i = 0; i < m; i++)
      memcpy(*out + i * n, c + i * ldc, sizeof(float) * (size_t)n);
  }
  free(a), free(b), free(cbuf), free(tight), free(loose), free(sum_abs), free(pa), free(pb);
  free(scratch);
  return ok;
}

static bool uk_runs_here(const nr_lpgemm_ukernel *u) { return have(u->isa); }

/* Small blocking so the mc, kc and nc loops all turn on small shapes. */
static nr_lpgemm_cfg small_cfg(int uk) {
  const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(uk);
  return (nr_lpgemm_cfg){(uint16_t)uk, (uint16_t)(2 * u->mr), 32, (uint16_t)(2 * u->nr)};
}

NR_TEST(lowp_ukernels_around_tile) {
  uint64_t seed = 1;
  int ran = 0;
  for (int uk = 0; uk < nr_lpgemm_ukernel_count(); uk++) {
    const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(uk);
    if (!uk_runs_here(u))
      continue;
    ran++;
    nr_lpgemm_cfg cfg = small_cfg(uk);
    int64_t ms[] = {1, u->mr > 1 ? u->mr - 1 : 2, u->mr, u->mr + 1, 2 * u->mr + 3};
    int64_t ns[] = {u->nr - 1, u->nr, u->nr + 1, 2 * u->nr + 5};
    int64_t ks[] = {1, 7, 32, 41};
    int combo = 0;
    for (int mi = 0; mi < 5; mi++)
      for (int ni = 0; ni < 4; ni++)
        for (int ki = 0; ki < 4; ki++, combo++) {
          problem p = {ms[mi], ns[ni], ks[ki], combo & 1, (combo >> 1) & 1, (combo >> 2) & 1,
                       (combo / 3) & 1, combo % 5 ? 1.0f : 0.5f, {0}};
          if (!check_problem(t, cfg, &p, seed++, NULL, 1, 0, NULL))
            return;
        }
  }
  CHECK(ran >= 4, "only %d lp kernels run here", ran);
}

NR_TEST(lowp_ukernels_epilogues) {
  float bias[80], res[80 * 80];
  nr_rng r = nr_rng_make(11);
  for (int i = 0; i < 80; i++)
    bias[i] = nr_rng_pm1(&r);
  for (int i = 0; i < 80 * 80; i++)
    res[i] = nr_rng_pm1(&r);
  nr_act acts[] = {NR_ACT_NONE, NR_ACT_RELU, NR_ACT_SIGMOID, NR_ACT_CLIP};
  uint64_t seed = 500;
  for (int uk = 0; uk < nr_lpgemm_ukernel_count(); uk++) {
    const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(uk);
    if (!uk_runs_here(u))
      continue;
    for (int v = 0; v < 4; v++) {
      problem p = {u->mr == 1 ? 1 : 2 * u->mr + 1, u->nr + 3, 45, false, v & 1, true, true,
                   1.0f, {0}};
      p.ep = (nr_epilogue){bias, v & 1, v & 2 ? res : NULL, 80, 0.75f, acts[v], -0.25f, 0.5f};
      if (!check_problem(t, small_cfg(uk), &p, seed++, NULL, 1, 0, NULL))
        return;
    }
  }
}

/* The default configurations on problems larger than a block (B packed, as Gemm
 * weights: in-kernel widening; A packed and B raw, as conv: block widening),
 * threaded along N and M: the same sums in the same order as one thread, bit for bit. */
NR_TEST(lowp_threads_match_single_thread) {
  nr_threadpool *pool = nr_threadpool_create(3);
  REQUIRE(pool);
  uint64_t seed = 900;
  for (int type = 0; type < 2; type++)
    for (int mode = 0; mode < 3; mode++) {
      bool row = mode == 0, b_packed = mode != 2;
      int64_t m = row ? 1 : 150, n = 1100, k = 300;
      nr_lpgemm_cfg cfg = nr_lpgemm_default_cfg((nr_lp_type)type, m, n, k, b_packed);
      const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(cfg.ukernel);
      bool bw = u->widen == NR_LP_WIDEN_BLOCK;
      CHECK(u->type == (nr_lp_type)type && uk_runs_here(u) && (u->mr == 1) == row &&
                (bw == !b_packed || !have(NR_ISA_AVX2)),
            "default kernel %s for type %d m=%lld b_packed=%d", u->name, type, (long long)m,
            b_packed);
      problem p = {m, n, k, false, type == 1, !b_packed, b_packed, 1.0f, {0}};
      float *one = NULL, *many = NULL;
      bool ok = check_problem(t, cfg, &p, seed, NULL, 1, 0, &one);
      for (int split = 1; ok && split <= 2; split++) {
        ok = check_problem(t, cfg, &p, seed, pool, 3, split, &many);
        CHECK(ok && !memcmp(one, many, sizeof(float) * (size_t)(m * n)),
              "%s: split %d on 3 threads differs from 1 thread", u->name, split);
        free(many);
        many = NULL;
      }
      free(one);
      seed++;
    }
  nr_threadpool_destroy(pool);
}

/* The threading decision: products of one to four rows stream B, so they split by B's
 * values (mlp's 512x256 fp16 layer, 128 Ki multiply-adds, splits; its 256x10 head does
 * not), larger ones by multiply-adds; never more parts than panels or threads. */
NR_TEST(lowp_threads_for_small_m) {
  for (int type = 0; type < 2; type++) {
    nr_lpgemm_cfg c1 = nr_lpgemm_default_cfg((nr_lp_type)type, 1, 512, 784, true);
    const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(c1.ukernel);
    REQUIRE(u);
    int nr = u->nr;
    CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 512, 784, 2) == 2);
    CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 256, 512, 2) == 2,
          "%s: a 1-row product over 128 Ki values of B runs on one thread", u->name);
    CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 10, 256, 2) == 1);
    CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 512, 784, 1) == 1);
    CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, nr, 1 << 16, 4) == 1);
    CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_AUTO, 1, 3 * nr, 1 << 16, 4) == 3);
    /* the B threshold: both sides of it, one row and four */
    for (int64_t m = 1; m <= 4; m += 3) {
      CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_N, m, 4 * nr, (64 * 1024) / (4 * nr), 2) == 2);
      CHECK(nr_lpgemm_threads_for(c1, NR_GEMM_SPLIT_N, m, 4 * nr, (64 * 1024) / (4 * nr) - 1, 2) == 1);
    }
    /* five rows count multiply-adds: 5 x 256 x 128 is below 64^3 */
    nr_lpgemm_cfg c5 = nr_lpgemm_default_cfg((nr_lp_type)type, 5, 256, 128, true);
    CHECK(nr_lpgemm_threads_for(c5, NR_GEMM_SPLIT_AUTO, 5, 256, 128, 2) == 1);
    CHECK(nr_lpgemm_threads_for(c5, NR_GEMM_SPLIT_AUTO, 64, 256, 128, 2) == 2);
  }
}

/* Packing rounds: a packed operand widened back holds exactly the rounded values,
 * zero padding included, in the lane order the kernel reads (interleaved halves). */
NR_TEST(lowp_packed_b_layout) {
  for (int uk = 0; uk < nr_lpgemm_ukernel_count(); uk++) {
    const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(uk);
    nr_lpgemm_cfg cfg = {(uint16_t)uk, (uint16_t)u->mr, 16, (uint16_t)u->nr};
    int64_t k = 20, n = u->nr + 5, npad = 2 * u->nr;
    float b[20 * 64];
    nr_rng r = nr_rng_make((uint64_t)uk + 40);
    for (int i = 0; i < k * n; i++)
      b[i] = nr_rng_pm1(&r) * 1000.0f;
    uint16_t pb[20 * 64];
    REQUIRE(nr_lpgemm_packed_b_size(cfg, k, n) == sizeof(uint16_t) * (size_t)(npad * k));
    nr_lpgemm_pack_b(cfg, k, n, (nr_lpgemm_operand){b, n, false, false}, pb);
    bool ok = true;
    for (int64_t q = 0; q < k && ok; q++)
      for (int64_t j = 0; j < npad && ok; j++) {
        int64_t pc = q / 16 * 16, kb = k - pc < 16 ? k - pc : 16, panel = j / u->nr;
        int jj = (int)(j % u->nr), h = u->nr / 2;
        int lane = u->interleave ? (jj % h) * 2 + jj / h : jj;
        uint16_t got = pb[pc * npad + panel * u->nr * kb + (q - pc) * u->nr + lane];
        float want = j < n ? b[q * n + j] : 0.0f;
        uint16_t w16 = u->type == NR_LP_FP16 ? nr_fp32_to_fp16(want) : nr_fp32_to_bf16(want);
        if (got != w16) {
          CHECK(false, "%s: packed B[%lld][%lld] = %04x, want %04x", u->name, (long long)q,
                (long long)j, got, w16);
          ok = false;
        }
      }
  }
}

/* ---- tactics ---------------------------------------------------------------------------- */

static nr_graph *graph_new(void) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(2, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  return g;
}

/* A constant of random values in [-1, 1), rounded to `round` when it is >= 0. */
static int const_rand(nr_graph *g, const char *name, int rank, const int64_t *dims,
                      uint64_t seed, int round) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  nr_value *v = &g->tensors[t].value;
  int64_t n = nr_value_count(v);
  float *d = malloc(sizeof(float) * (size_t)n);
  nr_rng r = nr_rng_make(seed);
  for (int64_t i = 0; i < n; i++)
    d[i] = nr_rng_pm1(&r);
  if (round >= 0)
    nr_lp_round_portable((nr_lp_type)round, d, d, n);
  v->data = d;
  v->owned = true;
  return t;
}

static int node_idx(nr_graph *g) { return g->n_nodes - 1; }

/* The graphs: each names the node whose precision the route sets. `round` >= 0
 * rounds that node's weights (the graph the tight reference runs). */
typedef struct lp_case {
  const char *what, *node;
  nr_graph *(*build)(nr_test_state *t, int round);
  int n_in;
  int64_t in_dims[2][4];
  int in_rank[2];
  bool round_in[2]; /* inputs the narrow storage rounds (the GEMM / conv operand) */
  int64_t k;        /* products' K: the loose bound */
  const char *onednn; /* the oneDNN bf16 tactic that takes the node, or NULL */
} lp_case;

/* y = relu(x @ W^T + b): FusedGemm after fuse.gemm_act, M = 5. */
static nr_graph *build_fc(nr_test_state *t, int round) {
  nr_graph *g = graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){5, 37});
  int w = const_rand(g, "w", 2, (int64_t[]){19, 37}, 1, round);
  int b = const_rand(g, "b", 1, (int64_t[]){19}, 2, -1);
  int h = tg_node(g, "Gemm", "fc", 3, (int[]){x, w, b});
  nr_pu_set_attr_int(g, node_idx(g), "transB", 1, NULL);
  int y = tg_node(g, "Relu", "act", 1, (int[]){h});
  return tg_finish(t, g, y) ? g : (nr_graph_destroy(g), NULL);
}

/* y = 0.5 x W + 2 C, M = 1 (the 1-row kernels), C a [1, N] constant. */
static nr_graph *build_fc1(nr_test_state *t, int round) {
  nr_graph *g = graph_new();
  int x = tg_input(g, "x", 2, (int64_t[]){1, 70});
  int w = const_rand(g, "w", 2, (int64_t[]){70, 45}, 3, round);
  int c = const_rand(g, "c", 2, (int64_t[]){1, 45}, 4, -1);
  int y = tg_node(g, "Gemm", "fc1", 3, (int[]){x, w, c});
  nr_pu_set_attr_float(g, node_idx(g), "alpha", 0.5f, NULL);
  nr_pu_set_attr_float(g, node_idx(g), "beta", 2.0f, NULL);
  return tg_finish(t, g, y) ? g : (nr_graph_destroy(g), NULL);
}

/* y = x W + b over a [2, 3, 40] x (batch folded into M = 6). */
static nr_graph *build_mm(nr_test_state *t, int round) {
  nr_graph *g = graph_new();
  int x = tg_input(g, "x", 3, (int64_t[]){2, 3, 40});
  int w = const_rand(g, "w", 2, (int64_t[]){40, 33}, 5, round);
  int b = const_rand(g, "b", 1, (int64_t[]){33}, 6, -1);
  int h = tg_node(g, "MatMul", "mm", 2, (int[]){x, w});
  int y = tg_node(g, "Add", "bias", 2, (int[]){h, b});
  return tg_finish(t, g, y) ? g : (nr_graph_destroy(g), NULL);
}

/* y = relu(conv3x3/s2/p1/g2(x) + b + r): im2col with groups, residual, activation. */
static nr_graph *build_conv(nr_test_state *t, int round) {
  nr_graph *g = graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 8, 9, 10});
  int r = tg_input(g, "r", 4, (int64_t[]){1, 12, 5, 5});
  int w = const_rand(g, "w", 4, (int64_t[]){12, 4, 3, 3}, 7, round);
  int b = const_rand(g, "b", 1, (int64_t[]){12}, 8, -1);
  int h = tg_node(g, "Conv", "conv", 3, (int[]){x, w, b});
  int k = node_idx(g);
  nr_pu_set_attr_ints(g, k, "pads", 4, (int64_t[]){1, 1, 1, 1}, NULL);
  nr_pu_set_attr_ints(g, k, "strides", 2, (int64_t[]){2, 2}, NULL);
  nr_pu_set_attr_int(g, k, "group", 2, NULL);
  int s = tg_node(g, "Add", "res", 2, (int[]){h, r});
  int y = tg_node(g, "Relu", "act", 1, (int[]){s});
  return tg_finish(t, g, y) ? g : (nr_graph_destroy(g), NULL);
}

/* y = sigmoid(conv1x1(x) + b) over two images. */
static nr_graph *build_pw(nr_test_state *t, int round) {
  nr_graph *g = graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){2, 16, 6, 7});
  int w = const_rand(g, "w", 4, (int64_t[]){24, 16, 1, 1}, 9, round);
  int b = const_rand(g, "b", 1, (int64_t[]){24}, 10, -1);
  int h = tg_node(g, "Conv", "pw", 3, (int[]){x, w, b});
  int y = tg_node(g, "Sigmoid", "act", 1, (int[]){h});
  return tg_finish(t, g, y) ? g : (nr_graph_destroy(g), NULL);
}

static const lp_case cases[] = {
    {"fc", "fc", build_fc, 1, {{5, 37}}, {2}, {true}, 37, "onednn_bf16_inner_product"},
    {"fc1", "fc1", build_fc1, 1, {{1, 70}}, {2}, {true}, 70, NULL},
    {"mm", "mm", build_mm, 1, {{2, 3, 40}}, {3}, {true}, 40, "onednn_bf16_inner_product"},
    {"conv", "conv", build_conv, 2, {{1, 8, 9, 10}, {1, 12, 5, 5}}, {4, 4}, {true, false},
     36, "onednn_bf16_conv"},
    {"pw", "pw", build_pw, 1, {{2, 16, 6, 7}}, {4}, {true}, 16, "onednn_bf16_conv"},
};

typedef struct inputs {
  nr_value v[2];
  nr_buffer b[2];
  float *data[2], *rounded[2];
} inputs;

static void inputs_make(const lp_case *c, nr_lp_type type, inputs *in) {
  memset(in, 0, sizeof *in);
  nr_rng r = nr_rng_make(77);
  for (int i = 0; i < c->n_in; i++) {
    int64_t n = 1;
    for (int d = 0; d < c->in_rank[i]; d++)
      n *= c->in_dims[i][d];
    in->data[i] = malloc(sizeof(float) * (size_t)n);
    in->rounded[i] = malloc(sizeof(float) * (size_t)n);
    for (int64_t j = 0; j < n; j++)
      in->data[i][j] = nr_rng_pm1(&r);
    memcpy(in->rounded[i], in->data[i], sizeof(float) * (size_t)n);
    if (c->round_in[i])
      nr_lp_round_portable(type, in->rounded[i], in->rounded[i], n);
    in->v[i] = (nr_value){NR_DTYPE_FLOAT, c->in_rank[i], {0}, in->data[i], false};
    memcpy(in->v[i].dims, c->in_dims[i], sizeof c->in_dims[i]);
    in->b[i] = (nr_buffer){NR_DTYPE_FLOAT, c->in_rank[i], {0}, in->data[i]};
    memcpy(in->b[i].dims, c->in_dims[i], sizeof c->in_dims[i]);
  }
}

static void inputs_free(inputs *in) {
  for (int i = 0; i < 2; i++)
    free(in->data[i]), free(in->rounded[i]);
}

/* Reference outputs of the case's graph (weights rounded to `round` when >= 0) on the
 * inputs (rounded ones when `round` >= 0). */
static bool ref_run(nr_test_state *t, const lp_case *c, int round, inputs *in,
                    nr_value *out) {
  nr_graph *g = c->build(t, round);
  if (!g)
    return false;
  nr_value v[2];
  for (int i = 0; i < c->n_in; i++) {
    v[i] = in->v[i];
    v[i].data = round >= 0 ? in->rounded[i] : in->data[i];
  }
  nr_error err = {0};
  nr_status s = nr_ref_exec(g, v, out, &err);
  CHECK(!s, "%s: reference: %s", c->what, err.message);
  nr_graph_destroy(g);
  return !s;
}

static int step_of(const nr_plan *p, const char *node) {
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].node >= 0 && !strcmp(p->graph->nodes[p->steps[k].node].name, node))
      return k;
  return -1;
}

typedef struct swap_find {
  const char *id;
  const nr_node *node;
  const nr_tactic *found;
} swap_find;

static void find_row(const nr_tactic *t, void *user) {
  swap_find *f = user;
  const char *d = t->domain ? t->domain : "";
  if (!f->found && t->op_type && !strcmp(t->id, f->id) && !strcmp(t->op_type, f->node->op_type) &&
      !strcmp(d, f->node->domain))
    f->found = t;
}

/* Replaces the tactic of step k with row `id` (same op) and prepares it, as the
 * profiling selector does: the way to run a tactic the heuristic does not pick. */
static bool swap_tactic(nr_test_state *t, nr_plan *p, int k, const nr_route *r,
                        const char *id) {
  nr_step *st = &p->steps[k];
  swap_find f = {id, &p->graph->nodes[st->node], NULL};
  nr_tactic_foreach(find_row, &f);
  nr_error err = {0};
  /* The built plan stores no bytes for weights the old tactic packed (the weights
   * pass); give them back from the graph, as a build with the new tactic would. */
  for (int i = 0; i < st->n_in; i++) {
    nr_slot *s = st->in[i] >= 0 ? &p->slots[st->in[i]] : NULL;
    if (s && s->kind == NR_SLOT_ABSORBED) {
      if (!s->data || nr_plan_add_weights(p, s->data, s->nbytes, &s->offset, &err)) {
        CHECK(false, "%s: constant '%s' has no bytes to give back", id, s->name);
        return false;
      }
      s->kind = NR_SLOT_CONST;
      s->data = NULL;
    }
  }
  nr_tactic_ctx c = {p, f.node, st, r, &err, 2};
  if (!f.found || !f.found->supports(&c)) {
    CHECK(false, "%s does not support node %s (%s)", id, f.node->name, f.node->op_type);
    return false;
  }
  st->tactic = f.found;
  st->scratch = 0;
  if (f.found->prepare(&c, p, st)) {
    CHECK(false, "%s: prepare: %s", id, err.message);
    return false;
  }
  if (st->scratch > p->scratch_size)
    p->scratch_size = st->scratch;
  return true;
}

static const char *prec_name(nr_lp_type type) { return type == NR_LP_FP16 ? "fp16" : "bf16"; }

/* Compares engine output y with the two references of case c (see the top). */
static void compare(nr_test_state *t, const lp_case *c, nr_lp_type type, const char *route,
                    const char *tactic, const float *y, const nr_value *tight,
                    const nr_value *loose) {
  double u = type == NR_LP_FP16 ? 0x1p-11 : 0x1p-8, k = (double)c->k;
  double tol_t = 2.4e-7 * (k + 4) * (k + 3);
  double tol_l = tol_t + (2 * u + u * u) * k + (type == NR_LP_FP16 ? k * 0x1p-24 : 0);
  int64_t n = nr_value_count(tight);
  for (int64_t i = 0; i < n; i++) {
    double et = fabs(y[i] - ((float *)tight->data)[i]), el = fabs(y[i] - ((float *)loose->data)[i]);
    if (!(et <= tol_t) || !(el <= tol_l)) {
      CHECK(false, "%s %s (%s): y[%lld] = %.9g, rounded-operand reference %.9g (tol %.3g), "
            "fp32 reference %.9g (tol %.3g)", c->what, route, tactic, (long long)i,
            (double)y[i], (double)((float *)tight->data)[i], tol_t,
            (double)((float *)loose->data)[i], tol_l);
      return;
    }
  }
}

/* Builds case c along `-precision@NODE=<type> <extra>`, optionally swaps tactic
 * `swap` into the node's step, runs on a context of two threads and compares with the
 * references; the node's tactic id must start with want_prefix. */
static void run_case(nr_test_state *t, const lp_case *c, nr_lp_type type, const char *extra,
                     const char *swap, const char *want_prefix) {
  inputs in;
  inputs_make(c, type, &in);
  nr_value loose = {0}, tight = {0};
  nr_graph *g = NULL;
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_context *ctx = NULL;
  nr_buffer out = {0};
  nr_error err = {0};
  char route[256];
  snprintf(route, sizeof route, "-precision@%s=%s %s", c->node, prec_name(type), extra);
  if (!ref_run(t, c, -1, &in, &loose) || !ref_run(t, c, (int)type, &in, &tight))
    goto done;
  g = c->build(t, -1);
  if (!g)
    goto done;
  bool ok = !nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err) &&
            !nr_route_parse(&r, route, &err) && !nr_compile(g, &r, 2, NULL, &p, &err);
  CHECK(ok, "%s %s: %s", c->what, route, err.message);
  if (!ok)
    goto done;
  int k = step_of(p, c->node);
  CHECK(k >= 0, "%s: no step runs node %s", c->what, c->node);
  if (k < 0 || (swap && !swap_tactic(t, p, k, &r, swap)))
    goto done;
  const nr_tactic *tac = p->steps[k].tactic;
  nr_precision want = type == NR_LP_FP16 ? NR_PREC_FP16 : NR_PREC_BF16;
  /* With NNROUTE_ISA=portable the bf16 oneDNN tactic outranks the portable kernels. */
  bool lib = !have(NR_ISA_AVX2) && !swap && c->onednn && !strcmp(tac->id, c->onednn);
  CHECK(tac->precision == want && (lib || !strncmp(tac->id, want_prefix, strlen(want_prefix))),
        "%s %s: node ran %s (%s)", c->what, route, tac->id, nr_precision_name(tac->precision));
  nr_engine e = {.plan = p, .threads = 2};
  ok = !nr_context_create(&e, 2, &ctx, &err) && !nr_context_run(ctx, in.b, &out, &err);
  CHECK(ok, "%s %s (%s): %s", c->what, route, tac->id, err.message);
  if (ok)
    compare(t, c, type, route, tac->id, out.data, &tight, &loose);
done:
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  nr_plan_destroy(p);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  if (g)
    nr_graph_destroy(g);
  nr_value_free(&tight), nr_value_free(&loose);
  inputs_free(&in);
}

NR_TEST(lowp_tactics_match_reference) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, &cases[i], NR_LP_FP16, "", NULL, "nr_f16w_");
    run_case(t, &cases[i], NR_LP_BF16, "", NULL, "nr_bf16w_");
  }
}

/* The fp32 families' blocking, threading and epilogue knobs act on these tactics. */
NR_TEST(lowp_tactics_follow_gemm_and_conv_knobs) {
  const char *fc_knobs = "-gemm.epilogue@fc=separate -gemm.threads@fc=m";
  run_case(t, &cases[0], NR_LP_FP16, fc_knobs, NULL, "nr_f16w_gemm_");
  run_case(t, &cases[0], NR_LP_BF16, "-gemm.threads_max@fc=1", NULL, "nr_bf16w_gemm_");
  /* conv.epilogue is a knob of convs whose fp32 tactic is a GEMM one: on AVX2 hosts
   * igemm__avx2 runs this grouped conv in fp32, and only conv.threads is left */
  nr_graph *cg = cases[3].build(t, -1);
  nr_knob_space cs = {0};
  nr_error cerr = {0};
  REQUIRE(cg && !nr_knob_space_build(cg, &cs, &cerr), "%s", cerr.message);
  bool epi = nr_knob_space_find(&cs, "conv.epilogue@conv") >= 0;
  CHECK(epi || (nr_cpu_isa() & NR_ISA_AVX512) == 0, "conv.epilogue@conv on AVX-512");
  nr_knob_space_free(&cs);
  nr_graph_destroy(cg);
  const char *conv_knobs = epi ? "-conv.epilogue@conv=separate -conv.threads@conv=1"
                               : "-conv.threads@conv=1";
  run_case(t, &cases[3], NR_LP_BF16, conv_knobs, NULL, "nr_bf16w_conv_im2col");
  run_case(t, &cases[4], NR_LP_FP16, "", NULL, "nr_f16w_conv_1x1");
  run_case(t, &cases[4], NR_LP_FP16, "-conv.algo@pw=im2col", NULL, "nr_f16w_conv_im2col");
}

/* oneDNN creates bf16 inner products and convolutions on AVX-512 CPUs without native
 * bf16 (emulated); each one must agree with the references like the nnroute ones. */
NR_TEST(lowp_onednn_bf16_tactics) {
  SKIP_UNLESS(lp_onednn_has_bf16(), "oneDNN makes no bf16 primitive below avx512_core");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (cases[i].onednn)
      run_case(t, &cases[i], NR_LP_BF16, "", cases[i].onednn, cases[i].onednn);
}

/* The block-widening kernels as tactics (never the heuristic's pick). */
NR_TEST(lowp_block_widening_tactics) {
  for (int uk = 0; uk < nr_lpgemm_ukernel_count(); uk++) {
    const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(uk);
    if (u->widen != NR_LP_WIDEN_BLOCK || !uk_runs_here(u))
      continue;
    run_case(t, &cases[0], u->type, "", u->name, u->name);
    run_case(t, &cases[2], u->type, "", u->name, u->name);
  }
}

/* y = depthwise3x3(x): no fp16/bf16 tactic; the predicate says so, the precision knob
 * does not offer the value there, and a route asking for it is refused with a message
 * naming the value; a plan compiled past the knob space (a route the space was not
 * asked about) fails in select naming the precision. */
NR_TEST(lowp_uncovered_nodes) {
  nr_graph *g = graph_new();
  int x = tg_input(g, "x", 4, (int64_t[]){1, 8, 6, 6});
  int w = const_rand(g, "w", 4, (int64_t[]){8, 1, 3, 3}, 12, -1);
  int y = tg_node(g, "Conv", "dw", 2, (int[]){x, w});
  nr_pu_set_attr_int(g, node_idx(g), "group", 8, NULL);
  nr_pu_set_attr_ints(g, node_idx(g), "pads", 4, (int64_t[]){1, 1, 1, 1}, NULL);
  REQUIRE(tg_finish(t, g, y));
  const nr_node *dw = &g->nodes[0];
  CHECK(!nr_lowp_supports_node(g, dw, NR_PREC_FP16) && !nr_lowp_supports_node(g, dw, NR_PREC_BF16));
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_error err = {0};
  REQUIRE(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err));
  int k = nr_knob_space_find(&space, "precision@dw");
  REQUIRE(k >= 0);
  CHECK(nr_knob_value_index(&space.inst[k], "fp16") < 0 &&
        nr_knob_value_index(&space.inst[k], "bf16") < 0, "fp16/bf16 offered on a depthwise conv");
  CHECK(nr_route_parse(&r, "-precision@dw=fp16", &err) && strstr(err.message, "fp16"), "%s",
        err.message);
  /* Force the value past the knob space, as a hand-edited route or a stale table would. */
  if (space.inst[k].n_values >= 2)
    free(space.inst[k].values[1]);
  space.inst[k].values[1] = strdup("fp16");
  space.inst[k].n_values = space.inst[k].n_values < 2 ? 2 : space.inst[k].n_values;
  r.choice[k] = 1;
  nr_status s = nr_compile(g, &r, 1, NULL, &p, &err);
  CHECK(s == NR_ERR_UNSUPPORTED && strstr(err.message, "fp16"), "status %d: %s", s,
        err.message);
  nr_plan_destroy(p);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  nr_graph_destroy(g);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    nr_graph *cg = cases[i].build(t, -1);
    REQUIRE(cg);
    const nr_node *n = NULL;
    for (int k = 0; k < cg->n_nodes; k++)
      if (!strcmp(cg->nodes[k].name, cases[i].node))
        n = &cg->nodes[k];
    CHECK(n && nr_lowp_supports_node(cg, n, NR_PREC_FP16) &&
              nr_lowp_supports_node(cg, n, NR_PREC_BF16) &&
              !nr_lowp_supports_node(cg, n, NR_PREC_FP32) &&
              !nr_lowp_supports_node(cg, n, NR_PREC_INT8),
          "%s", cases[i].what);
    nr_graph_destroy(cg);
  }
}
