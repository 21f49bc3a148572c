/* quantize__avx512.c - nr_quantize_u8 with 64 floats per iteration (compiled for
 * AVX-512 F/BW; called only when nr_cpu_isa() has NR_ISA_AVX512). Clamping in float
 * before the conversion keeps values past the int32 range (and NaN, as 0) right; the
 * conversion rounds half to even (MXCSR default), as the portable loop does.
 *
 * Kept apart from quantize__avx2.c: beyond the 64-float loop (AVX2's at twice the
 * width, but with another lane permutation) it has a 16-float and a byte-masked tail
 * (vpmovusdb) where AVX2 hands the tail to the portable loop. */
#include "kernels/cpu/onednn_q/onednn_q.h"

#include <immintrin.h>

static inline __m512i q16(const float *x, __m512 inv, __m512 zp, __m512 hi) {
  __m512 r = _mm512_fmadd_ps(_mm512_loadu_ps(x), inv, zp);
  r = _mm512_min_ps(_mm512_max_ps(r, _mm512_setzero_ps()), hi); /* max(NaN, 0) = 0 */
  return _mm512_cvtps_epi32(r);
}

void nr_quantize_u8__avx512(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp) {
  __m512 vi = _mm512_set1_ps(inv), vz = _mm512_set1_ps((float)zp), hi = _mm512_set1_ps(255);
  /* packs work per 128-bit lane: dwords 0-3 of a, b, c, d land in lane 0 in order
   * a b c d; the permute restores a's 16, then b's, ... */
  const __m512i order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i a = q16(x + i, vi, vz, hi), b = q16(x + i + 16, vi, vz, hi);
    __m512i c = q16(x + i + 32, vi, vz, hi), d = q16(x + i + 48, vi, vz, hi);
    __m512i r = _mm512_packus_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
    _mm512_storeu_si512((void *)(q + i), _mm512_permutexvar_epi32(order, r));
  }
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128((__m128i *)(void *)(q + i),
                     _mm512_cvtusepi32_epi8(q16(x + i, vi, vz, hi)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    __m512 r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), vi, vz);
    r = _mm512_min_ps(_mm512_max_ps(r, _mm512_setzero_ps()), hi);
    _mm512_mask_cvtusepi32_storeu_epi8(q + i, m, _mm512_cvtps_epi32(r));
  }
}
