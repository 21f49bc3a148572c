/* qukernel_avx2_template.h - the one body of the AVX2 int8 micro-kernels, instantiated
 * by qgemm_ukernels__avx2.c (define QUK_NAME, QUK_MR, QUK_NV = nr / 8 and QUK_WA, then
 * include; the macros are undefined at the end). Per k group of 4 and accumulator:
 * vpmaddubsw (u8 x s8 pairs summed into int16), vpmaddwd with ones (int16 pairs into
 * int32) and vpaddd. Why that is exact only for activations in [0, 127]: see
 * qgemm_ukernels__avx2.c. The dequantizing store (residual, clamp) is the VNNI template's.
 */
#include <immintrin.h>

void QUK_NAME(int64_t kq, const void *restrict a_, const void *restrict b_,
              void *restrict c, int64_t ldc, int flags, const nr_qgemm_out *o) {
  const int32_t *a = a_;
  const char *b = b_;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i v[QUK_MR][QUK_NV];
#pragma GCC unroll 16
  for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++)
      v[i][j] = _mm256_setzero_si256();
#pragma GCC unroll 1
  for (int64_t p = 0; p < kq; p++, a += QUK_MR, b += 32 * QUK_NV) {
    __m256i bv[QUK_NV];
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++)
      bv[j] = _mm256_loadu_si256((const __m256i *)(b + 32 * j));
#pragma GCC unroll 16
    for (int i = 0; i < QUK_MR; i++) {
      __m256i av = _mm256_set1_epi32(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < QUK_NV; j++) {
        __m256i t =
            QUK_WA ? _mm256_maddubs_epi16(bv[j], av) : _mm256_maddubs_epi16(av, bv[j]);
        v[i][j] = _mm256_add_epi32(v[i][j], _mm256_madd_epi16(t, ones));
      }
    }
  }
  int32_t *ci = c;
  if (flags & NR_QGEMM_ACC)
#pragma GCC unroll 16
    for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
      for (int j = 0; j < QUK_NV; j++)
        v[i][j] = _mm256_add_epi32(
            v[i][j], _mm256_loadu_si256((const __m256i *)(ci + i * ldc + 8 * j)));
  if (!(flags & NR_QGEMM_FINAL)) {
#pragma GCC unroll 16
    for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
      for (int j = 0; j < QUK_NV; j++)
        _mm256_storeu_si256((__m256i *)(ci + i * ldc + 8 * j), v[i][j]);
    return;
  }
  float *cf = c;
  const __m256 lo = _mm256_set1_ps(o->lo), hi = _mm256_set1_ps(o->hi);
#pragma GCC unroll 16
  for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++) {
#if QUK_WA
      __m256i z = _mm256_set1_epi32(o->corr[i]);
      __m256 s = _mm256_set1_ps(o->scale[i]);
      __m256 o_ = _mm256_set1_ps(o->bias ? o->bias[i] : 0.0f);
#else
      __m256i z = _mm256_loadu_si256((const __m256i *)(o->corr + 8 * j));
      __m256 s = _mm256_loadu_ps(o->scale + 8 * j);
      __m256 o_ = o->bias ? _mm256_loadu_ps(o->bias + 8 * j) : _mm256_setzero_ps();
#endif
      __m256 r = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v[i][j], z)), s, o_);
      if (flags & NR_QGEMM_RES)
        r = _mm256_add_ps(r, _mm256_loadu_ps(o->res + i * o->ldr + 8 * j));
      if (flags & NR_QGEMM_RELU)
        r = _mm256_max_ps(r, _mm256_setzero_ps());
      else if (flags & NR_QGEMM_CLIP)
        r = _mm256_min_ps(hi, _mm256_max_ps(lo, r));
      _mm256_storeu_ps(cf + i * ldc + 8 * j, r);
    }
}

#undef QUK_NAME
#undef QUK_MR
#undef QUK_NV
#undef QUK_WA
