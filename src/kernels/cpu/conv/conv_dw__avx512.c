/* conv_dw__avx512.c - nr_f32_conv_dw__avx512: PLAIN depthwise 3x3 / 5x5, stride 1
 * and 2 (and 2 down rows, 1 along them, as text recognizers use), any padding, with
 * AVX-512 (16 output columns per vector). Compiled with the
 * AVX-512 flags; called only after nr_cpu_isa() reported NR_ISA_AVX512.
 *
 * A depthwise layer does 9 or 25 FMAs per output against one input and one output
 * float, so it is bound by moving data (the planes of mobilenet's first layers come
 * from L3) and by whatever runs besides the FMAs. The AVX2 kernel copies each plane
 * into a zero-padded, phase-split buffer, computes, then applies bias and activation
 * in a second pass over the output; this one reads the input in place, once, and
 * writes each output once:
 *
 * - borders and row tails are AVX-512 masked loads (lanes outside the input read as
 *   zero and cannot fault), taps in the vertical padding are skipped: no padded copy;
 * - stride 2 de-interleaves in registers: two loads give the 16 even and the 16 odd
 *   columns (vpermt2ps), a third load's first lanes shifted in (valignd) give the taps
 *   two and four columns on;
 * - a band of up to 8 output rows is computed together, walking the band's input
 *   rows once: each loaded row vector feeds every output row of the band it belongs
 *   to, from registers (10 row loads for 8 rows of a 3x3 instead of 24), and the 8
 *   accumulators are 8 independent FMA chains, which a 7x7 plane (one vector per row)
 *   needs to hide the FMA latency;
 * - bias starts the accumulators; residual, ReLU / Clip / LeakyReLU / HardSigmoid /
 *   HardSwish (the reference's bits) and Sigmoid / SiLU (16-lane exp with vscalefps,
 *   reciprocal by rcp14 and one Newton step) run on them before the masked store;
 *   tanh and the GELUs go through nr_act_apply on the finished plane. Rows of at
 *   most 8 outputs (7x7 planes) go through the epilogue two to a vector.
 *
 * Key decision: one loop nest, specialised at compile time for (K, S, rows) by
 * inlining, so every tap-to-row assignment is resolved statically and the weights
 * are broadcast once per plane (25 of them for 5x5 with 8 accumulators do not all
 * fit the 32 zmm; the rest are FMA memory operands, which the load ports absorb).
 * Measured choices are in docs/performance-notes.md (band height, no prefetch).
 *
 * Not the AVX2 kernel at 16 lanes but another method (in place, masked loads, row
 * bands, fused epilogue), so the two stay separate: it runs in 0.27-0.64 of the
 * AVX2 kernel's time on conv_bench's depthwise shapes (nr_conv_bench --shape dw). */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/eltwise/vmath_avx512.h"

#include <immintrin.h>
#include <math.h>

#define DW_R 8    /* most output rows per band */
#define DW_KMAX 7 /* 3x3, 5x5 (stride 1 and 2) and 7x7 (stride 1) windows */

typedef struct dw_job {
  const conv_p *p;
  const float *x, *w, *bias, *res;
  float *y;
  bool act_in_reg; /* p->act runs on the accumulators (else nr_act_apply after) */
} dw_job;

/* ---- the epilogue's activations, 16 lanes ------------------------------------------ */

#define V16(c) _mm512_set1_ps(c)

/* e^x for x <= 0 (vmath_avx512.h's accurate exp without its upper clamp and NaN
 * fix-up: vmaxps returns operand 2, so a NaN stays NaN through every step). */
static inline __m512 exp_neg16(__m512 x) {
  return nr_v16_exp_core(_mm512_max_ps(V16(-104.0f), x), 0);
}

/* 1 / (1 + e^-x) as e/(1+e) or 1/(1+e) with e = e^-|x|, so both tails keep their
 * relative accuracy; NaN in, NaN out (it runs through every step). */
static inline __m512 sigmoid16(__m512 v) {
  __m512 e = exp_neg16(_mm512_or_ps(v, V16(-0.0f)));
  __m512 d = _mm512_add_ps(e, V16(1.0f)), r = _mm512_rcp14_ps(d);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, V16(2.0f)));
  __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(r, neg, e, r);
}

/* The activations act.c's scalar code defines, operation by operation where it gives
 * exact bits (no FMA contraction, same operand order for the NaN rules of min/max). */
static inline __m512 act16(__m512 v, const conv_p *p) {
  const __m512 zero = _mm512_setzero_ps();
  switch ((nr_act)p->act) {
  case NR_ACT_RELU: return _mm512_max_ps(v, zero); /* NaN -> 0 as x > 0 ? x : 0 */
  case NR_ACT_CLIP: /* x < a ? a : x > b ? b : x; NaN passes */
    return _mm512_min_ps(V16(p->act_b), _mm512_max_ps(V16(p->act_a), v));
  case NR_ACT_LEAKY_RELU:
    return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_NGE_UQ), V16(p->act_a),
                              v);
  case NR_ACT_HARD_SIGMOID: {
    __m512 ax = _mm512_mul_ps(V16(p->act_a), v);
    __asm__("" : "+v"(ax)); /* keeps gcc from contracting a * x + b into an FMA */
    __m512 t = _mm512_add_ps(ax, V16(p->act_b));
    return _mm512_max_ps(_mm512_min_ps(t, V16(1.0f)), zero);
  }
  case NR_ACT_HARD_SWISH: {
    __m512 t = _mm512_add_ps(_mm512_div_ps(v, V16(6.0f)), V16(0.5f));
    return _mm512_mul_ps(v, _mm512_max_ps(_mm512_min_ps(t, V16(1.0f)), zero));
  }
  case NR_ACT_SIGMOID: return sigmoid16(v);
  case NR_ACT_SILU: return _mm512_mul_ps(v, sigmoid16(v));
  default: return v;
  }
}

static bool act_in_reg(nr_act a) {
  return a <= NR_ACT_HARD_SWISH || a == NR_ACT_SILU;
}

/* ---- the band kernel -------------------------------------------------------------- */

/* Lanes i of a 16-float load from column `start` with 0 <= start + i < w. */
static inline __mmask16 col_mask(int64_t start, int64_t w) {
  int64_t lo = start < 0 ? -start : 0, hi = w - start;
  if (hi > 16)
    hi = 16;
  if (lo >= hi)
    return 0;
  return (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
}

/* Stride 2: from three consecutive vectors a, b, c of a row (columns s .. s+47), the
 * taps kw = 0..K-1 of 16 outputs (columns s + kw + 2i). */
static inline __attribute__((always_inline)) void taps_s2(__m512 a, __m512 b, __m512 c,
                                                          __m512 *t, const int K) {
  const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                       28, 30);
  const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27,
                                       29, 31);
  __m512 e = _mm512_permutex2var_ps(a, ev, b), o = _mm512_permutex2var_ps(a, od, b);
  t[0] = e, t[1] = o;
  if (K == 3) { /* column s + 32 is c's lane 0 */
    t[2] = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(c), _mm512_castps_si512(e), 1));
    return;
  }
  __m512 ce = _mm512_permutexvar_ps(ev, c), co = _mm512_permutexvar_ps(od, c);
  __m512i ei = _mm512_castps_si512(e), oi = _mm512_castps_si512(o);
  t[2] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(ce), ei, 1));
  t[3] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(co), oi, 1));
  t[4] = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(ce), ei, 2));
}

/* R output rows from oh0, 16 columns from o, of one plane x -> y. */
static inline __attribute__((always_inline)) void
dw_tile(const dw_job *j, const float *x, const __m512 *wv, __m512 bias, float *y,
        const float *res, int64_t oh0, int64_t o, const int R, const int K, const int SH,
        const int S, const int D) {
  const conv_p *p = j->p;
  int64_t W = p->w, H = p->h, s0 = o * S - p->pl;
  __mmask16 m[DW_KMAX]; /* S == 1: per tap; S == 2: per loaded vector */
  const int nm = S == 1 ? K : 3, step = S == 1 ? D : 16;
#pragma GCC unroll 7
  for (int q = 0; q < nm; q++)
    m[q] = col_mask(s0 + step * q, W);
  __m512 acc[DW_R];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
    acc[r] = bias;
  int64_t ih0 = oh0 * SH - p->pt;
#pragma GCC unroll 19
  for (int jr = 0; jr < (R - 1) * SH + (K - 1) * D + 1; jr++) {
    int64_t ih = ih0 + jr;
    if (ih < 0 || ih >= H)
      continue;
    const float *row = x + ih * W + s0;
    __m512 t[DW_KMAX];
    if (S == 1) {
#pragma GCC unroll 7
      for (int kw = 0; kw < K; kw++)
        t[kw] = _mm512_maskz_loadu_ps(m[kw], row + kw * D);
    } else {
      __m512 a = _mm512_maskz_loadu_ps(m[0], row);
      __m512 b = _mm512_maskz_loadu_ps(m[1], row + 16);
      __m512 c = _mm512_maskz_loadu_ps(m[2], row + 32);
      taps_s2(a, b, c, t, K);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      int dk = jr - r * SH, kh = dk / D; /* row jr is tap kh of output row r */
      if (dk < 0 || dk % D || kh >= K)
        continue;
#pragma GCC unroll 7
      for (int kw = 0; kw < K; kw++)
        acc[r] = _mm512_fmadd_ps(t[kw], wv[kh * K + kw], acc[r]);
    }
  }
  int64_t left = p->ow - o;
  __mmask16 sm = left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
  if (p->ow <= 8 && R > 1) { /* two rows per vector through the epilogue */
    int64_t ow = p->ow;
#pragma GCC unroll 8
    for (int r = 0; r < R; r += 2) {
      int64_t off = (oh0 + r) * ow; /* o is 0; row r + 1 goes to lanes 8.. */
      bool two = r + 1 < R;
      __mmask16 hi = two ? (__mmask16)(sm << 8) : 0;
      __m512 v = two ? _mm512_shuffle_f32x4(acc[r], acc[r + 1], 0x44) : acc[r];
      if (res)
        v = _mm512_add_ps(v, _mm512_or_ps(_mm512_maskz_loadu_ps(sm, res + off),
                                          _mm512_maskz_loadu_ps(hi, res + off + ow - 8)));
      if (j->act_in_reg)
        v = act16(v, p);
      _mm512_mask_storeu_ps(y + off, sm, v);
      _mm512_mask_storeu_ps(y + off + ow - 8, hi, v);
    }
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    int64_t off = (oh0 + r) * p->ow + o;
    __m512 v = acc[r];
    if (res)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(sm, res + off));
    if (j->act_in_reg)
      v = act16(v, p);
    _mm512_mask_storeu_ps(y + off, sm, v);
  }
}

static inline __attribute__((always_inline)) void
dw_band(const dw_job *j, const float *x, const __m512 *wv, __m512 bias, float *y,
        const float *res, int64_t oh0, const int R, const int K, const int SH, const int S,
        const int D) {
  for (int64_t o = 0; o < j->p->ow; o += 16)
    dw_tile(j, x, wv, bias, y, res, oh0, o, R, K, SH, S, D);
}

/* The last rows (fewer than a band) of a plane. */
static inline __attribute__((always_inline)) void
dw_rest(const dw_job *j, const float *x, const __m512 *wv, __m512 bias, float *y,
        const float *res, int64_t oh0, int64_t rows, const int K, const int SH, const int S,
        const int D) {
  switch (rows) {
  case 1: dw_band(j, x, wv, bias, y, res, oh0, 1, K, SH, S, D); break;
  case 2: dw_band(j, x, wv, bias, y, res, oh0, 2, K, SH, S, D); break;
  case 3: dw_band(j, x, wv, bias, y, res, oh0, 3, K, SH, S, D); break;
  case 4: dw_band(j, x, wv, bias, y, res, oh0, 4, K, SH, S, D); break;
  case 5: dw_band(j, x, wv, bias, y, res, oh0, 5, K, SH, S, D); break;
  case 6: dw_band(j, x, wv, bias, y, res, oh0, 6, K, SH, S, D); break;
  case 7: dw_band(j, x, wv, bias, y, res, oh0, 7, K, SH, S, D); break;
  default: break;
  }
}

static inline __attribute__((always_inline)) void
dw_plane(const dw_job *j, const float *x, const float *w, float b, float *y,
         const float *res, const int K, const int SH, const int S, const int D,
         const int RB) {
  const conv_p *p = j->p;
  __m512 wv[DW_KMAX * DW_KMAX];
#pragma GCC unroll 49
  for (int i = 0; i < K * K; i++)
    wv[i] = _mm512_set1_ps(w[i]);
  __m512 bias = _mm512_set1_ps(b);
  int64_t oh = 0;
  for (; oh + RB <= p->oh; oh += RB)
    dw_band(j, x, wv, bias, y, res, oh, RB, K, SH, S, D);
  dw_rest(j, x, wv, bias, y, res, oh, p->oh - oh, K, SH, S, D);
}

static void dw16_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const dw_job *j = arg;
  const conv_p *p = j->p;
  int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
  int kk = p->kh * p->kw;
  for (int64_t i = begin, c = begin % p->c; i < end; i++, c = c + 1 == p->c ? 0 : c + 1) {
    /* i = n * C + c */
    const float *x = j->x + i * hw, *w = j->w + c * kk;
    const float *res = j->res ? j->res + i * ohw : NULL;
    float b = j->bias ? j->bias[c] : 0.0f, *y = j->y + i * ohw;
    switch (p->kh * 1000 + p->sh * 100 + p->sw * 10 + p->dh) {
    case 3111: dw_plane(j, x, w, b, y, res, 3, 1, 1, 1, 8); break;
    case 3221:
      if (p->oh >= 16) /* wide stride-2 planes: 4 rows measured 5-10% faster */
        dw_plane(j, x, w, b, y, res, 3, 2, 2, 1, 4);
      else
        dw_plane(j, x, w, b, y, res, 3, 2, 2, 1, 8);
      break;
    case 3211: dw_plane(j, x, w, b, y, res, 3, 2, 1, 1, 8); break;
    case 3112: dw_plane(j, x, w, b, y, res, 3, 1, 1, 2, 8); break;
    case 5111: dw_plane(j, x, w, b, y, res, 5, 1, 1, 1, 8); break;
    case 5211: dw_plane(j, x, w, b, y, res, 5, 2, 1, 1, 8); break;
    case 5112: dw_plane(j, x, w, b, y, res, 5, 1, 1, 2, 8); break;
    case 7111: dw_plane(j, x, w, b, y, res, 7, 1, 1, 1, 8); break;
    default: dw_plane(j, x, w, b, y, res, 5, 2, 2, 1, 8); break;
    }
    if (!j->act_in_reg)
      nr_act_apply((nr_act)p->act, p->act_a, p->act_b, y, ohw);
  }
}

nr_status nr_conv_dw__avx512_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  dw_job j = {&q, a->in[0], a->in[1], q.has_bias ? a->in[2] : NULL, res, a->out[0],
              act_in_reg((nr_act)q.act)};
  nr_parallel_for(a->pool, (int64_t)q.n * q.c, 1, a->step->threads, dw16_task, &j);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
