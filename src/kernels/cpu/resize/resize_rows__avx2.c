/* resize_rows__avx2.c - the AVX2 inner loops of the Resize tactics
 * (nr_f32_resize_rows__avx2): column gathers with vgatherdps, the vertical blend with
 * FMA, and for nearest upsampling by a whole factor the repeats as shuffles (x2) or
 * broadcasts (x8, x16, ...) instead of gathers. The row loop is resize_rows.c's. */
#include "kernels/cpu/resize/resize.h"

#include <immintrin.h>

/* Each input column twice: 8 in, 16 out. */
static void repeat2(float *y, const float *src, int64_t iw) {
  int64_t i = 0;
  for (; i + 8 <= iw; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    __m256 lo = _mm256_unpacklo_ps(v, v), hi = _mm256_unpackhi_ps(v, v);
    _mm256_storeu_ps(y + 2 * i, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(y + 2 * i + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
  for (; i < iw; i++)
    y[2 * i] = y[2 * i + 1] = src[i];
}

/* Each input column r times, r a multiple of 8. */
static void repeat8n(float *y, const float *src, int64_t iw, int r) {
  for (int64_t i = 0; i < iw; i++) {
    __m256 v = _mm256_set1_ps(src[i]);
    for (int k = 0; k < r; k += 8)
      _mm256_storeu_ps(y + i * r + k, v);
  }
}

static void nearest_avx2(float *y, const float *src, const nr_resize_p *p,
                         const int32_t *i0, int64_t n) {
  if (p->xrep == 2) {
    repeat2(y, src, p->iw);
    return;
  }
  if (p->xrep >= 8 && p->xrep % 8 == 0) {
    repeat8n(y, src, p->iw, p->xrep);
    return;
  }
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256i idx = _mm256_loadu_si256((const __m256i *)(i0 + k));
    _mm256_storeu_ps(y + k, _mm256_i32gather_ps(src, idx, 4));
  }
  for (; k < n; k++)
    y[k] = src[i0[k]];
}

static void blend_avx2(float *t, const float *a, const float *b, float w0, float w1,
                       int64_t n) {
  __m256 v0 = _mm256_set1_ps(w0), v1 = _mm256_set1_ps(w1);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(t + k, _mm256_fmadd_ps(_mm256_loadu_ps(b + k), v1,
                                            _mm256_mul_ps(_mm256_loadu_ps(a + k), v0)));
  for (; k < n; k++)
    t[k] = a[k] * w0 + b[k] * w1;
}

static void linear_avx2(float *y, const float *t, const nr_resize_axis *rx, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 a = _mm256_i32gather_ps(t, _mm256_loadu_si256((const __m256i *)(rx->i0 + k)),
                                   4);
    __m256 b = _mm256_i32gather_ps(t, _mm256_loadu_si256((const __m256i *)(rx->i1 + k)),
                                   4);
    _mm256_storeu_ps(y + k,
                     _mm256_fmadd_ps(b, _mm256_loadu_ps(rx->w1 + k),
                                     _mm256_mul_ps(a, _mm256_loadu_ps(rx->w0 + k))));
  }
  for (; k < n; k++)
    y[k] = t[rx->i0[k]] * rx->w0[k] + t[rx->i1[k]] * rx->w1[k];
}

void nr_f32_resize_rows__avx2(const nr_resize_job *j, int64_t begin, int64_t end,
                              int thread) {
  static const nr_resize_ops ops = {nearest_avx2, blend_avx2, linear_avx2};
  nr_resize_rows(j, begin, end, thread, &ops);
}
