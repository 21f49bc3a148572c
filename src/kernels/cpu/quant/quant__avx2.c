/* quant__avx2.c - AVX2 per-tensor quantize / dequantize (see quant.h): eight floats
 * per step, dividing (not multiplying by a reciprocal) in float so the rounding
 * matches the reference bit for bit. */
#include "kernels/cpu/quant/quant.h"

#include <immintrin.h>

void nr_quant_f32__avx2(const float *x, void *y, size_t n, float scale, int zp, bool is_signed) {
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps((float)zp);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  uint8_t *yu = y;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), s);
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, z), vlo), vhi);
    v = _mm256_andnot_ps(nan, v); /* NaN saturates to 0, as the reference does */
    __m256i iv = _mm256_cvtps_epi32(v);
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(iv), _mm256_extracti128_si256(iv, 1));
    __m128i bytes = is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
    _mm_storel_epi64((__m128i *)(yu + i), bytes);
  }
  nr_quant_f32_portable(x + i, yu + i, n - i, scale, zp, is_signed);
}

void nr_dequant_f32__avx2(const void *q, float *y, size_t n, float scale, int zp,
                          bool is_signed) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256i z = _mm256_set1_epi32(zp);
  const uint8_t *qu = q;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadl_epi64((const __m128i *)(qu + i));
    __m256i v = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(v, z));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(f, s));
  }
  for (; i < n; i++)
    y[i] = (float)((is_signed ? (int)(int8_t)qu[i] : (int)qu[i]) - zp) * scale;
}
