/* vmath_avx512.h - 16-lane exp for the *__avx512.c kernels (included only by files
 * compiled with the AVX-512 flags): vmath_avx2.h's two exps, same reduction, same
 * polynomials, lane for lane the same results. The 2^n scale is one vscalefps, which
 * rounds once as the AVX2 version's two multiplies do (the first is exact).
 *
 * Only the polynomials are shared with vmath_avx2.h (vmath_exp_poly.h, over the
 * nr_vf_* helpers); the reduction (vrndscaleps) and the scale (vscalefps in place of
 * vmath_avx2.h's two integer-built multiplies) are each ISA's own. */
#ifndef NR_KERNELS_CPU_ELTWISE_VMATH_AVX512_H
#define NR_KERNELS_CPU_ELTWISE_VMATH_AVX512_H

#include "kernels/cpu/simd/simd_avx512.h"

#include "kernels/cpu/eltwise/vmath_exp_poly.h"

#include <immintrin.h>

#define NR_V16(c) _mm512_set1_ps(c)

/* e^x for x already within [-104, 89] (NaN runs through every step): x = n ln2 + r,
 * |r| <= ln2/2 (vmath_avx2.h's nr_v8_exp_reduce), the polynomial, the 2^n scale. The
 * depthwise conv's sigmoid (conv_dw__avx512.c) calls it directly for x <= 0. */
static inline __m512 nr_v16_exp_core(__m512 x, int fast) {
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, NR_V16(1.44269504088896341f)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, NR_V16(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, NR_V16(-2.12194440e-4f), r);
  return _mm512_scalef_ps(nr_vf_exp_poly(r, fast), n);
}

static inline __m512 nr_v16_exp(__m512 x, int fast) {
  __m512 y = nr_v16_exp_core(
      _mm512_min_ps(_mm512_max_ps(x, NR_V16(-104.0f)), NR_V16(89.0f)), fast);
  /* NaN in, NaN out (min/max above dropped it) */
  return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

#endif
