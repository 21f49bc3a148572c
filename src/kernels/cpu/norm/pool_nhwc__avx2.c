/* pool_nhwc__avx2.c - AVX2 NHWC pooling kernels (pool_nhwc.h states the numerics).
 *
 * Key decision: an output pixel is reduced 32 channels (four ymm accumulators) at a
 * time over its valid taps, then the rest 8 at a time, the last 8 through lane masks,
 * so any channel count runs without a scalar loop. The max ignores NaN taps
 * (vmaxps returns its second operand, the accumulator, when the tap is NaN) and keeps
 * a mask of lanes that saw a number, which turns a window of NaNs back into NaN. The
 * global average accumulates 16 channels in four double vectors (cvtps_pd), pixel by
 * pixel, which is the reference's order and precision. */
#include "kernels/cpu/norm/pool_nhwc.h"

#include <immintrin.h>
#include <math.h>

static inline __m256i lane_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

typedef struct taps {
  const float *x; /* the first valid tap's channel c0 */
  int64_t sy, sx; /* floats between taps along ky and kx */
  int32_t ny, nx; /* valid taps along each axis */
} taps;

static inline __m256 finish(const nr_pool2d *p, __m256 acc, __m256 seen, bool any,
                            __m256 div) {
  if (!p->max)
    return _mm256_div_ps(acc, div);
  return any ? _mm256_blendv_ps(_mm256_set1_ps(NAN), acc, seen) : acc;
}

/* 32 channels of one output pixel. */
static inline void chunk32(const nr_pool2d *p, const taps *t, float *y, __m256 div) {
  __m256 init = _mm256_set1_ps(p->max ? -INFINITY : 0.0f), z = _mm256_setzero_ps();
  __m256 a0 = init, a1 = init, a2 = init, a3 = init, s0 = z, s1 = z, s2 = z, s3 = z;
  for (int32_t ky = 0; ky < t->ny; ky++)
    for (int32_t kx = 0; kx < t->nx; kx++) {
      const float *v = t->x + ky * t->sy + kx * t->sx;
      __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
      __m256 v2 = _mm256_loadu_ps(v + 16), v3 = _mm256_loadu_ps(v + 24);
      if (p->max) {
        a0 = _mm256_max_ps(v0, a0), a1 = _mm256_max_ps(v1, a1);
        a2 = _mm256_max_ps(v2, a2), a3 = _mm256_max_ps(v3, a3);
        s0 = _mm256_or_ps(s0, _mm256_cmp_ps(v0, v0, _CMP_ORD_Q));
        s1 = _mm256_or_ps(s1, _mm256_cmp_ps(v1, v1, _CMP_ORD_Q));
        s2 = _mm256_or_ps(s2, _mm256_cmp_ps(v2, v2, _CMP_ORD_Q));
        s3 = _mm256_or_ps(s3, _mm256_cmp_ps(v3, v3, _CMP_ORD_Q));
      } else {
        a0 = _mm256_add_ps(a0, v0), a1 = _mm256_add_ps(a1, v1);
        a2 = _mm256_add_ps(a2, v2), a3 = _mm256_add_ps(a3, v3);
      }
    }
  bool any = t->ny > 0 && t->nx > 0;
  _mm256_storeu_ps(y, finish(p, a0, s0, any, div));
  _mm256_storeu_ps(y + 8, finish(p, a1, s1, any, div));
  _mm256_storeu_ps(y + 16, finish(p, a2, s2, any, div));
  _mm256_storeu_ps(y + 24, finish(p, a3, s3, any, div));
}

/* n <= 8 channels of one output pixel (masked when n < 8). */
static inline void chunk8(const nr_pool2d *p, const taps *t, float *y, int64_t n, __m256 div) {
  __m256i m = lane_mask(n);
  __m256 a = _mm256_set1_ps(p->max ? -INFINITY : 0.0f), s = _mm256_setzero_ps();
  for (int32_t ky = 0; ky < t->ny; ky++)
    for (int32_t kx = 0; kx < t->nx; kx++) {
      const float *src = t->x + ky * t->sy + kx * t->sx;
      __m256 v = n == 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, m);
      if (p->max) {
        a = _mm256_max_ps(v, a);
        s = _mm256_or_ps(s, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
      } else {
        a = _mm256_add_ps(a, v);
      }
    }
  __m256 r = finish(p, a, s, t->ny > 0 && t->nx > 0, div);
  if (n == 8)
    _mm256_storeu_ps(y, r);
  else
    _mm256_maskstore_ps(y, m, r);
}

void nr_f32_pool2d_nhwc__avx2(const nr_pool2d *p, const nr_pool_nhwc_geom *g,
                              const float *x, float *y, int64_t oy0, int64_t oy1) {
  const int64_t C = g->c;
  for (int64_t oy = oy0; oy < oy1; oy++) {
    int32_t y0, y1, x0, x1;
    int64_t py, px;
    nr_pool_axis_taps(oy, p->sh, p->dh, p->kh, p->pt, p->pb, g->ih, &y0, &y1, &py);
    int64_t iy = oy * p->sh - p->pt + (int64_t)y0 * p->dh;
    for (int64_t ox = 0; ox < g->ow; ox++) {
      nr_pool_axis_taps(ox, p->sw, p->dw, p->kw, p->pl, p->pr, g->iw, &x0, &x1, &px);
      int64_t ix = ox * p->sw - p->pl + (int64_t)x0 * p->dw;
      int64_t count = p->count_pad ? py * px : (int64_t)(y1 - y0) * (x1 - x0);
      __m256 div = _mm256_set1_ps(count ? (float)count : NAN);
      bool any = y1 > y0 && x1 > x0;
      taps t = {any ? x + (iy * g->iw + ix) * C : x, (int64_t)p->dh * g->iw * C,
                (int64_t)p->dw * C, y1 - y0, x1 - x0};
      float *out = y + (oy * g->ow + ox) * C;
      int64_t c = 0;
      for (; c + 32 <= C; c += 32, t.x += 32)
        chunk32(p, &t, out + c, div);
      for (; c < C; c += 8, t.x += 8)
        chunk8(p, &t, out + c, C - c < 8 ? C - c : 8, div);
    }
  }
}

void nr_f32_gavgpool_nhwc__avx2(const float *x, int64_t hw, int64_t ld, int64_t c,
                                bool reassoc, float *y) {
  int64_t c0 = 0;
  __m256d n = _mm256_set1_pd((double)hw);
  for (; !reassoc && c0 + 16 <= c; c0 += 16) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < hw; i++) {
      const float *t = x + i * ld + c0;
      __m256 v0 = _mm256_loadu_ps(t), v1 = _mm256_loadu_ps(t + 8);
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
      s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
      s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
    }
    _mm_storeu_ps(y + c0, _mm256_cvtpd_ps(_mm256_div_pd(s0, n)));
    _mm_storeu_ps(y + c0 + 4, _mm256_cvtpd_ps(_mm256_div_pd(s1, n)));
    _mm_storeu_ps(y + c0 + 8, _mm256_cvtpd_ps(_mm256_div_pd(s2, n)));
    _mm_storeu_ps(y + c0 + 12, _mm256_cvtpd_ps(_mm256_div_pd(s3, n)));
  }
  for (; reassoc && c0 + 32 <= c; c0 += 32) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < hw; i++) {
      const float *t = x + i * ld + c0;
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(t));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(t + 8));
      s2 = _mm256_add_ps(s2, _mm256_loadu_ps(t + 16));
      s3 = _mm256_add_ps(s3, _mm256_loadu_ps(t + 24));
    }
    __m256 s[4] = {s0, s1, s2, s3};
    for (int k = 0; k < 4; k++) {
      __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(s[k]));
      __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(s[k], 1));
      _mm_storeu_ps(y + c0 + 8 * k, _mm256_cvtpd_ps(_mm256_div_pd(lo, n)));
      _mm_storeu_ps(y + c0 + 8 * k + 4, _mm256_cvtpd_ps(_mm256_div_pd(hi, n)));
    }
  }
  if (c0 < c) /* the remaining channels (under 16 or 32): the portable loop */
    nr_f32_gavgpool_nhwc__portable(x + c0, hw, ld, c - c0, reassoc, y + c0);
}
