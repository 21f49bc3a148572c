/* conv_pad_avx2.h - the zero-padded, stride-phase-split copy of an input plane that the
 * PLAIN AVX2 convolution kernels (depthwise, small-C direct) read instead of the input
 * itself; static inline, included only by *__avx2.c files.
 *
 * Key decision: with the padding materialized and each row split into its stride
 * phases (column c at phase c % S, index c / S), the 8 output columns of one tap are
 * one plain vector load, whatever the stride, the pad or the border: no bounds checks
 * and no gathers in the inner loops. The padding is zeroed once per buffer; filling a
 * plane writes only the columns that hold input. */
#ifndef NR_KERNELS_CPU_CONV_CONV_PAD_AVX2_H
#define NR_KERNELS_CPU_CONV_CONV_PAD_AVX2_H

#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/simd/simd_avx2.h"

#include <immintrin.h>

static inline void conv_copy(float *dst, const float *src, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
  if (i < n) {
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    nr_vf_store_first(dst + i, _mm256_maskload_ps(src + i, m), n - i);
  }
}

static inline void conv_zero(float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_setzero_ps());
  for (; i < n; i++)
    dst[i] = 0.0f;
}

/* Writes input row xr into padded row `row` (its padding already zero); for S == 2 via
 * tmp (rs floats, padding already zero): copy, then split even and odd columns. */
static inline void conv_pad_row(const conv_p *p, const float *xr, int S, const conv_pad *d,
                                float *row, float *tmp) {
  if (S == 1) {
    conv_copy(row + p->pl, xr, p->w);
    return;
  }
  conv_copy(tmp + p->pl, xr, p->w);
  int64_t i = 0;
  for (; i + 8 <= d->lp; i += 8) { /* 16 padded columns -> 8 even, 8 odd */
    __m256 a = _mm256_loadu_ps(tmp + 2 * i), b = _mm256_loadu_ps(tmp + 2 * i + 8);
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(row + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
    _mm256_storeu_ps(row + d->lp + i,
                     _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
  }
  for (; i < d->lp; i++) {
    row[i] = tmp[2 * i];
    row[d->lp + i] = tmp[2 * i + 1];
  }
}

/* A whole plane: zeroes buf (rows * rs) and tmp (rs), then fills the input rows. */
static inline void conv_pad_plane(const conv_p *p, const float *x, int S, const conv_pad *d,
                                  float *buf, float *tmp) {
  conv_zero(buf, d->rows * d->rs);
  conv_zero(tmp, d->rs);
  for (int64_t r = 0; r < d->rows; r++) {
    int64_t ih = r - p->pt;
    if (ih >= 0 && ih < p->h)
      conv_pad_row(p, x + ih * p->w, S, d, buf + r * d->rs, tmp);
  }
}

#endif
