/* conv_nchw8c__avx2.c - nr_f32_conv_nchw8c_direct__avx2: direct convolution in the
 * blocked NCHW8C layout (group 1, any kernel, stride, dilation, padding). Compiled
 * with -mavx2 -mfma; called only after nr_cpu_isa() reported AVX2.
 *
 * Register tile: 8 output channels (one vector) x RW = 6 output pixels of one row, so
 * 6 accumulators stay in registers over the whole reduction (C/8 blocks x kh x kw x 8
 * input lanes); each weight vector [8 in-lane][8 out] is loaded once per tile and each
 * input value broadcast. Border pixels, where a tap leaves the row, take a one-pixel
 * path with checks. Weights were packed to [M/8][C/8][kh][kw][8][8] at build time. */
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>

#define RW 6

typedef struct b8_job {
  const conv_p *p;
  const float *x, *w, *bias, *res;
  float *y;
} b8_job;

static void pixel1(const conv_p *p, const float *x, const float *w, int64_t oh, int64_t ow,
                   __m256 bias, float *y) {
  int64_t cb = nr_ceil8(p->c) / 8, hw8 = (int64_t)p->h * p->w * 8;
  __m256 acc = bias;
  for (int64_t b = 0; b < cb; b++)
    for (int kh = 0; kh < p->kh; kh++) {
      int64_t ih = oh * p->sh - p->pt + kh * p->dh;
      if (ih < 0 || ih >= p->h)
        continue;
      for (int kw = 0; kw < p->kw; kw++) {
        int64_t iw = ow * p->sw - p->pl + kw * p->dw;
        if (iw < 0 || iw >= p->w)
          continue;
        const float *xv = x + b * hw8 + (ih * p->w + iw) * 8;
        const float *wv = w + ((b * p->kh + kh) * p->kw + kw) * 64;
        for (int l = 0; l < 8; l++)
          acc = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + l), _mm256_loadu_ps(wv + l * 8), acc);
      }
    }
  _mm256_storeu_ps(y, acc);
}

/* RW pixels ow..ow+RW-1, all taps inside the row. */
static void tile(const conv_p *p, const float *x, const float *w, int64_t oh, int64_t ow,
                 __m256 bias, float *y) {
  int64_t cb = nr_ceil8(p->c) / 8, hw8 = (int64_t)p->h * p->w * 8, s8 = p->sw * 8;
  __m256 a0 = bias, a1 = bias, a2 = bias, a3 = bias, a4 = bias, a5 = bias;
  for (int64_t b = 0; b < cb; b++)
    for (int kh = 0; kh < p->kh; kh++) {
      int64_t ih = oh * p->sh - p->pt + kh * p->dh;
      if (ih < 0 || ih >= p->h)
        continue;
      for (int kw = 0; kw < p->kw; kw++) {
        const float *xv = x + b * hw8 + (ih * p->w + ow * p->sw - p->pl + kw * p->dw) * 8;
        const float *wv = w + ((b * p->kh + kh) * p->kw + kw) * 64;
        for (int l = 0; l < 8; l++) {
          __m256 wl = _mm256_loadu_ps(wv + l * 8);
          a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + l), wl, a0);
          a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + s8 + l), wl, a1);
          a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + 2 * s8 + l), wl, a2);
          a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + 3 * s8 + l), wl, a3);
          a4 = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + 4 * s8 + l), wl, a4);
          a5 = _mm256_fmadd_ps(_mm256_broadcast_ss(xv + 5 * s8 + l), wl, a5);
        }
      }
    }
  _mm256_storeu_ps(y, a0);
  _mm256_storeu_ps(y + 8, a1);
  _mm256_storeu_ps(y + 16, a2);
  _mm256_storeu_ps(y + 24, a3);
  _mm256_storeu_ps(y + 32, a4);
  _mm256_storeu_ps(y + 40, a5);
}

static void row_task(void *arg, int64_t begin, int64_t end, int thread) {
  const b8_job *j = arg;
  const conv_p *p = j->p;
  int64_t mb = nr_ceil8(p->m) / 8, cb = nr_ceil8(p->c) / 8, kk = (int64_t)p->kh * p->kw;
  int64_t ext = (int64_t)(p->kw - 1) * p->dw;
  int64_t lo = (p->pl + p->sw - 1) / p->sw;
  int64_t hi = p->w - 1 - ext + p->pl < 0 ? 0 : (p->w - 1 - ext + p->pl) / p->sw + 1;
  if (hi > p->ow)
    hi = p->ow;
  for (int64_t i = begin; i < end; i++) { /* i = (n * mb + o) * oh + oh */
    int64_t oh = i % p->oh, no = i / p->oh, o = no % mb, n = no / mb;
    const float *x = j->x + n * cb * (int64_t)p->h * p->w * 8;
    const float *w = j->w + o * cb * kk * 64;
    __m256 bias = _mm256_loadu_ps(j->bias + o * 8);
    float *y = j->y + i * (int64_t)p->ow * 8;
    int64_t ow = 0;
    for (; ow < p->ow && ow < lo; ow++)
      pixel1(p, x, w, oh, ow, bias, y + ow * 8);
    for (; ow + RW <= hi; ow += RW)
      tile(p, x, w, oh, ow, bias, y + ow * 8);
    for (; ow < p->ow; ow++)
      pixel1(p, x, w, oh, ow, bias, y + ow * 8);
    nr_conv_epilogue(y, j->res ? j->res + i * (int64_t)p->ow * 8 : NULL, p->ow * 8, 0.0f,
                     p);
    if (o == mb - 1)
      nr_conv_zero_pad8(y, p->ow, p->m % 8);
  }
}

nr_status nr_conv_nchw8c_direct__avx2_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_NCHW8C, &q, &post);
  const float *pk = a->packed;
  b8_job j = {&q, a->in[0], pk, pk + q.extra, res, a->out[0]};
  int64_t rows = (int64_t)q.n * (nr_ceil8(q.m) / 8) * q.oh;
  nr_parallel_for(a->pool, rows, 1, a->step->threads, row_task, &j);
  nr_conv_finish(a, NR_LAYOUT_NCHW8C, conv_params(a->step), post);
  return NR_OK;
}
