/* vmath_avx2.h - 8-lane float math for the *__avx2.c kernels (included only by files
 * compiled with -mavx2 -mfma): exp, tanh, erf and sigmoid in an accurate and a fast
 * variant.
 *
 * Accurate: exp is Cephes' degree-7 reduction on [-ln2/2, ln2/2] with a two-step
 * 2^n scale (so results that are subnormal stay right); tanh is Cephes' odd
 * polynomial below 0.625 and 1 - 2/(e^2x + 1) above; erf is the rational x P(x^2) /
 * Q(x^2) on [-4, 4] (the form Eigen and XLA use); sigmoid is e/(1+e) with e = exp(-|x|)
 * so both tails keep relative accuracy. True divisions throughout.
 * Fast: exp with a degree-4 least-squares polynomial (max rel error 6.2e-6), tanh
 * with a 2-term odd polynomial below 0.4, divisions by rcp + one Newton step.
 * The measured bounds live in docs/kernels-eltwise-norm.md and the tests assert them.
 * The exp polynomials are vmath_exp_poly.h's, shared with vmath_avx512.h. */
#ifndef NR_KERNELS_CPU_ELTWISE_VMATH_AVX2_H
#define NR_KERNELS_CPU_ELTWISE_VMATH_AVX2_H

#include "kernels/cpu/simd/simd_avx2.h"

#include "kernels/cpu/eltwise/vmath_exp_poly.h"

#include <immintrin.h>

#define NR_V8(c) _mm256_set1_ps(c)

/* 2^n for integer-valued float n in [-252, 254], as two factors to reach subnormals. */
static inline __m256 nr_v8_pow2_mul(__m256 p, __m256 n) {
  __m256 n1 = _mm256_round_ps(_mm256_mul_ps(n, NR_V8(0.5f)),
                              _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m256 n2 = _mm256_sub_ps(n, n1);
  __m256i e1 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n1),
                                                  _mm256_set1_epi32(127)), 23);
  __m256i e2 = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n2),
                                                  _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e1)), _mm256_castsi256_ps(e2));
}

/* Range reduction shared by both exps: x = n ln2 + r, |r| <= ln2/2. */
static inline __m256 nr_v8_exp_reduce(__m256 x, __m256 *n) {
  x = _mm256_min_ps(_mm256_max_ps(x, NR_V8(-104.0f)), NR_V8(89.0f));
  *n = _mm256_round_ps(_mm256_mul_ps(x, NR_V8(1.44269504088896341f)),
                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(*n, NR_V8(0.693359375f), x);
  return _mm256_fnmadd_ps(*n, NR_V8(-2.12194440e-4f), x);
}

static inline __m256 nr_v8_exp_acc(__m256 x) {
  __m256 n, r = nr_v8_exp_reduce(x, &n);
  __m256 y = nr_v8_pow2_mul(nr_vf_exp_poly(r, 0), n);
  /* NaN in, NaN out (min/max above dropped it) */
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m256 nr_v8_exp_fast(__m256 x) {
  __m256 n, r = nr_v8_exp_reduce(x, &n);
  __m256 y = nr_v8_pow2_mul(nr_vf_exp_poly(r, 1), n);
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m256 nr_v8_exp(__m256 x, int fast) {
  return fast ? nr_v8_exp_fast(x) : nr_v8_exp_acc(x);
}

/* 1/d: exact division, or rcp refined by one Newton step (~2 ulp). */
static inline __m256 nr_v8_recip(__m256 d, int fast) {
  if (!fast)
    return _mm256_div_ps(NR_V8(1.0f), d);
  __m256 r = _mm256_rcp_ps(d);
  return _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, NR_V8(2.0f)));
}

static inline __m256 nr_v8_abs(__m256 x) {
  return _mm256_andnot_ps(NR_V8(-0.0f), x);
}

static inline __m256 nr_v8_tanh(__m256 x, int fast) {
  __m256 sign = _mm256_and_ps(x, NR_V8(-0.0f));
  __m256 ax = _mm256_min_ps(nr_v8_abs(x), NR_V8(9.0f));
  __m256 z = _mm256_mul_ps(ax, ax), p;
  if (fast) {
    p = _mm256_fmadd_ps(NR_V8(0.1221757947f), z, NR_V8(-0.3327982694f));
  } else {
    p = NR_V8(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, z, NR_V8(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, z, NR_V8(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, z, NR_V8(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, z, NR_V8(-3.33332819422e-1f));
  }
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), ax, ax);
  __m256 e = nr_v8_exp(_mm256_add_ps(ax, ax), fast);
  __m256 big = _mm256_fnmadd_ps(NR_V8(2.0f), nr_v8_recip(_mm256_add_ps(e, NR_V8(1.0f)), fast),
                                NR_V8(1.0f));
  __m256 lim = fast ? NR_V8(0.4f) : NR_V8(0.625f);
  __m256 y = _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, lim, _CMP_LT_OQ));
  y = _mm256_or_ps(y, sign);
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m256 nr_v8_erf(__m256 x, int fast) {
  __m256 c = _mm256_min_ps(_mm256_max_ps(x, NR_V8(-4.0f)), NR_V8(4.0f));
  __m256 z = _mm256_mul_ps(c, c);
  __m256 p = NR_V8(-2.72614225801306e-10f);
  p = _mm256_fmadd_ps(p, z, NR_V8(2.77068142495902e-08f));
  p = _mm256_fmadd_ps(p, z, NR_V8(-2.10102402082508e-06f));
  p = _mm256_fmadd_ps(p, z, NR_V8(-5.69250639462346e-05f));
  p = _mm256_fmadd_ps(p, z, NR_V8(-7.34990630326855e-04f));
  p = _mm256_fmadd_ps(p, z, NR_V8(-2.95459980854025e-03f));
  p = _mm256_fmadd_ps(p, z, NR_V8(-1.60960333262415e-02f));
  __m256 q = NR_V8(-1.45660718464996e-05f);
  q = _mm256_fmadd_ps(q, z, NR_V8(-2.13374055278905e-04f));
  q = _mm256_fmadd_ps(q, z, NR_V8(-1.68282697438203e-03f));
  q = _mm256_fmadd_ps(q, z, NR_V8(-7.37332916720468e-03f));
  q = _mm256_fmadd_ps(q, z, NR_V8(-1.42647390514189e-02f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(c, p), nr_v8_recip(q, fast));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __m256 nr_v8_sigmoid(__m256 x, int fast) {
  __m256 e = nr_v8_exp(_mm256_or_ps(x, NR_V8(-0.0f)), fast); /* exp(-|x|) */
  __m256 r = nr_v8_recip(_mm256_add_ps(e, NR_V8(1.0f)), fast);
  __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(r, _mm256_mul_ps(e, r), neg);
}

#endif
