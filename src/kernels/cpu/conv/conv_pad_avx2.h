/* conv_pad_avx2.h - the zero-padded, stride-phase-split copy of an input plane that the
 * PLAIN AVX2 convolution kernels (depthwise, small-C direct) read instead of the input
 * itself; static inline, included only by *__avx2.c files.
 *
 * Key decision: with the padding materialized and each row split into its stride
 * phases (column c at phase c % S, index c / S), the 8 output columns of one tap are
 * one plain vector load, whatever the stride, the pad or the border: no bounds checks
 * and no gathers in the inner loops. The padding is zeroed once per buffer; filling a
 * plane writes the columns that hold input and zeros after them. */
#ifndef NR_KERNELS_CPU_CONV_CONV_PAD_AVX2_H
#define NR_KERNELS_CPU_CONV_CONV_PAD_AVX2_H

#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/simd/simd_avx2.h"

#include <immintrin.h>

/* The first n floats of src (all 8 when n >= 8, none when n <= 0), zeros in the other
 * lanes; nothing past them is read. */
static inline __m256 conv_load_first(const float *src, int64_t n) {
  if (n >= 8)
    return _mm256_loadu_ps(src);
  return n > 0 ? nr_vf_load_tail(src, nr_vm_first(n)) : _mm256_setzero_ps();
}

static inline void conv_zero(float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_setzero_ps());
  for (; i < n; i++)
    dst[i] = 0.0f;
}

/* Writes input row xr into padded row `row` (its padding already zero), in whole
 * vector stores whose lanes past the input are zero (conv_pad_dims leaves room for
 * them): partial stores, or a split through a second buffer, would make the kernel's
 * loads of the row wait for the stores to reach the cache instead of forwarding from
 * them. S 2: 16 input columns at a time, split into the even and odd columns; input
 * column c goes to phase (c + pl) % 2, index (c + pl) / 2. */
static inline void conv_pad_row(const conv_p *p, const float *xr, int S, const conv_pad *d,
                                float *row) {
  int64_t w = p->w;
  if (S == 1) {
    for (int64_t i = 0; i < w; i += 8)
      _mm256_storeu_ps(row + p->pl + i, conv_load_first(xr + i, w - i));
    return;
  }
  float *ev = row + (p->pl & 1) * d->lp + (p->pl >> 1);       /* even input columns */
  float *od = row + ((p->pl + 1) & 1) * d->lp + ((p->pl + 1) >> 1); /* odd ones */
  for (int64_t c = 0; c < w; c += 16) {
    __m256 a = conv_load_first(xr + c, w - c), b = conv_load_first(xr + c + 8, w - c - 8);
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(ev + c / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
    _mm256_storeu_ps(od + c / 2, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
  }
}

/* A whole plane: zeroes buf (rows * rs), then fills the input rows. */
static inline void conv_pad_plane(const conv_p *p, const float *x, int S, const conv_pad *d,
                                  float *buf) {
  conv_zero(buf, d->rows * d->rs);
  for (int64_t r = 0; r < d->rows; r++) {
    int64_t ih = r - p->pt;
    if (ih >= 0 && ih < p->h)
      conv_pad_row(p, x + ih * p->w, S, d, buf + r * d->rs);
  }
}

#endif
