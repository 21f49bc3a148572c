/* quantize__avx2.c - nr_quantize_u8 with 32 floats per iteration (compiled for
 * AVX2 + FMA; called only when nr_cpu_isa() has NR_ISA_AVX2). Same clamping and
 * rounding as the portable loop, so the bytes are the same. */
#include "kernels/cpu/onednn_q/onednn_q.h"

#include <immintrin.h>

static inline __m256i q8(const float *x, __m256 inv, __m256 zp, __m256 hi) {
  __m256 r = _mm256_fmadd_ps(_mm256_loadu_ps(x), inv, zp);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_setzero_ps()), hi); /* max(NaN, 0) = 0 */
  return _mm256_cvtps_epi32(r);
}

void nr_quantize_u8__avx2(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp) {
  __m256 vi = _mm256_set1_ps(inv), vz = _mm256_set1_ps((float)zp), hi = _mm256_set1_ps(255);
  /* packs work per 128-bit lane: dwords of a, b, c, d come out in the order
   * a0 b0 c0 d0 a1 b1 c1 d1 (4 each); the permute restores a b c d. */
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i a = q8(x + i, vi, vz, hi), b = q8(x + i + 8, vi, vz, hi);
    __m256i c = q8(x + i + 16, vi, vz, hi), d = q8(x + i + 24, vi, vz, hi);
    __m256i r = _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256((__m256i *)(void *)(q + i), _mm256_permutevar8x32_epi32(r, order));
  }
  if (i < n)
    nr_quantize_u8_portable(x + i, q + i, n - i, inv, zp);
}
