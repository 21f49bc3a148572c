/* lp_convert__avx512.c - the bulk conversions with zmm registers (16 values a step,
 * masked tails): vcvtps2ph / vcvtph2ps for fp16, integer round-to-nearest-even on the
 * upper half for bf16 with NaN lanes taken aside. Bit-identical to the scalar
 * definitions in lpgemm.h (test_lowp.c). Only called where nr_cpu_isa() has
 * NR_ISA_AVX512. Kept apart from lp_convert__avx2.c rather than one body over the
 * nr_vf_* helpers: the work is integer (rounding on the bits, vpmovdw where AVX2
 * packs and extracts) and the tails are k-masked here, scalar there. */
#include "kernels/cpu/lpgemm/lpgemm_impl.h"

#include <immintrin.h>

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __mmask16 tail(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
}

/* fp32 bits rounded to nearest even at bit 16 (the upper half is the bf16); a NaN
 * gets its quiet bit instead, as nr_fp32_to_bf16 does. */
static inline __m512i bf16_rounded(__m512 v) {
  __m512i x = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(x, _mm512_set1_epi32(0x00400000)));
}

static inline __m256i narrow16(nr_lp_type t, __m512 v) {
  if (t == NR_LP_FP16)
    return _mm512_cvtps_ph(v, RNE);
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_rounded(v), 16));
}

static inline __m512 widen16(nr_lp_type t, __m256i h) {
  if (t == NR_LP_FP16)
    return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

void nr_lp_narrow__avx512(nr_lp_type t, const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i), narrow16(t, _mm512_loadu_ps(src + i)));
  if (i < n) {
    __mmask16 m = tail(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, narrow16(t, _mm512_maskz_loadu_ps(m, src + i)));
  }
}

void nr_lp_widen__avx512(nr_lp_type t, const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, widen16(t, _mm256_loadu_si256((const __m256i *)(src + i))));
  if (i < n) {
    __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(dst + i, m, widen16(t, _mm256_maskz_loadu_epi16(m, src + i)));
  }
}

static inline __m512 round16(nr_lp_type t, __m512 v) {
  if (t == NR_LP_FP16)
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, RNE));
  return _mm512_castsi512_ps(
      _mm512_and_si512(bf16_rounded(v), _mm512_set1_epi32((int)0xffff0000u)));
}

void nr_lp_round__avx512(nr_lp_type t, const float *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, round16(t, _mm512_loadu_ps(src + i)));
  if (i < n) {
    __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(dst + i, m, round16(t, _mm512_maskz_loadu_ps(m, src + i)));
  }
}

void nr_lp_bf16_pairs__avx512(const float *src, uint16_t *dst, int h) {
  const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
  for (int j = 0; j < h; j += 16) {
    __m512i lo = _mm512_srli_epi32(bf16_rounded(_mm512_loadu_ps(src + j)), 16);
    __m512i hi = _mm512_and_si512(bf16_rounded(_mm512_loadu_ps(src + h + j)), hi_mask);
    _mm512_storeu_si512(dst + 2 * j, _mm512_or_si512(lo, hi));
  }
}
