/* lp_convert__avx2.c - the bulk conversions with ymm registers (8 values a step,
 * scalar tails): F16C's vcvtps2ph / vcvtph2ps for fp16, integer round-to-nearest-even
 * on the upper half for bf16 with NaN lanes blended aside. Bit-identical to the
 * scalar definitions in lpgemm.h (test_lowp.c). Only called where nr_cpu_isa() has
 * NR_ISA_AVX2 (which includes F16C). */
#include "kernels/cpu/lpgemm/lpgemm_impl.h"

#include <immintrin.h>

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __m256i bf16_rounded(__m256 v) {
  __m256i x = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  __m256i q = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan));
}

static inline __m128i narrow8(nr_lp_type t, __m256 v) {
  if (t == NR_LP_FP16)
    return _mm256_cvtps_ph(v, RNE);
  __m256i r = _mm256_srli_epi32(bf16_rounded(v), 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

static inline __m256 widen8(nr_lp_type t, __m128i h) {
  if (t == NR_LP_FP16)
    return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

void nr_lp_narrow__avx2(nr_lp_type t, const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i), narrow8(t, _mm256_loadu_ps(src + i)));
  nr_lp_narrow_portable(t, src + i, dst + i, n - i);
}

void nr_lp_widen__avx2(nr_lp_type t, const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, widen8(t, _mm_loadu_si128((const __m128i *)(src + i))));
  nr_lp_widen_portable(t, src + i, dst + i, n - i);
}

void nr_lp_round__avx2(nr_lp_type t, const float *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i), r;
    if (t == NR_LP_FP16)
      r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, RNE));
    else
      r = _mm256_castsi256_ps(
          _mm256_and_si256(bf16_rounded(v), _mm256_set1_epi32((int)0xffff0000u)));
    _mm256_storeu_ps(dst + i, r);
  }
  nr_lp_round_portable(t, src + i, dst + i, n - i);
}

void nr_lp_bf16_pairs__avx2(const float *src, uint16_t *dst, int h) {
  const __m256i hi_mask = _mm256_set1_epi32((int)0xffff0000u);
  for (int j = 0; j < h; j += 8) {
    __m256i lo = _mm256_srli_epi32(bf16_rounded(_mm256_loadu_ps(src + j)), 16);
    __m256i hi = _mm256_and_si256(bf16_rounded(_mm256_loadu_ps(src + h + j)), hi_mask);
    _mm256_storeu_si256((__m256i *)(dst + 2 * j), _mm256_or_si256(lo, hi));
  }
}
