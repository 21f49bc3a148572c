/* conv_dw__avx2.c - AVX2 depthwise 3x3 / 5x5, stride 1 and 2, and 7x7 stride 1 (PLAIN
 * only): nr_f32_conv_dw__avx2
 * (PLAIN: 8 output columns per vector; stride 2 de-interleaves two loads that stay
 * inside the row) and nr_f32_conv_dw_nchw8c__avx2 (NCHW8C: one vector is 8 channels
 * of one pixel, so any stride and dilation is a plain load). Compiled with -mavx2 -mfma; called
 * only when nr_cpu_isa() reports AVX2 (the tactics carry NR_ISA_AVX2).
 *
 * Key decision (PLAIN): each plane is first copied into a zero-padded buffer whose rows
 * are split into stride phases (even and odd columns for stride 2), so every tap of 8
 * output columns is one plain vector load with no bounds check, and 4 output rows are
 * computed together (4 independent FMA chains: a 7x7 plane has one vector per row).
 * Planes too large for the buffer keep the in-place kernel: interior columns without
 * bounds checks, border columns on a scalar path, taps in the vertical padding
 * skipped. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/conv_pad_avx2.h"

#include <immintrin.h>
#include <string.h>

typedef struct dw_job {
  const conv_p *p;
  const float *x, *w, *bias, *res;
  float *y;
} dw_job;

/* 8 inputs x[0], x[s], ... for stride s in {1, 2}, reading only x[0..7*s]. */
static inline __m256 load_strided(const float *x, int s) {
  if (s == 1)
    return _mm256_loadu_ps(x);
  __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 7);
  __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
}

static float dw_pixel(const conv_p *p, const float *x, const float *w, int64_t oh,
                      int64_t ow, float b) {
  float acc = b;
  for (int kh = 0; kh < p->kh; kh++) {
    int64_t ih = oh * p->sh - p->pt + kh;
    if (ih < 0 || ih >= p->h)
      continue;
    for (int kw = 0; kw < p->kw; kw++) {
      int64_t iw = ow * p->sw - p->pl + kw;
      if (iw >= 0 && iw < p->w)
        acc += x[ih * p->w + iw] * w[kh * p->kw + kw];
    }
  }
  return acc;
}

static inline __attribute__((always_inline)) void
dw_plane(const conv_p *p, const float *x, const float *w, float b, float *y, const int K,
         const int S) {
  int64_t lo = (p->pl + S - 1) / S, hi = p->w - K + p->pl < 0 ? 0 : (p->w - K + p->pl) / S + 1;
  if (hi > p->ow)
    hi = p->ow;
  if (lo > hi)
    lo = hi = p->ow;
  for (int64_t oh = 0; oh < p->oh; oh++) {
    float *yr = y + oh * p->ow;
    int64_t ow = 0;
    for (; ow < lo; ow++)
      yr[ow] = dw_pixel(p, x, w, oh, ow, b);
    for (; ow + 8 <= hi; ow += 8) {
      __m256 acc = _mm256_set1_ps(b);
      for (int kh = 0; kh < K; kh++) {
        int64_t ih = oh * S - p->pt + kh;
        if (ih < 0 || ih >= p->h)
          continue;
        const float *xr = x + ih * p->w + ow * S - p->pl;
        for (int kw = 0; kw < K; kw++)
          acc = _mm256_fmadd_ps(load_strided(xr + kw, S), _mm256_set1_ps(w[kh * K + kw]),
                                acc);
      }
      _mm256_storeu_ps(yr + ow, acc);
    }
    for (; ow < p->ow; ow++)
      yr[ow] = dw_pixel(p, x, w, oh, ow, b);
  }
}

/* ---- PLAIN through a padded, phase-split copy of the plane ---------------------------- */

#define DW_BUF 16384 /* floats of the padded plane (64 KiB of stack: up to 112x112) */

static bool dw_pad_dims(const conv_p *p, int S, int K, conv_pad *d) {
  return conv_pad_dims(p, S, K, 8, d) && d->rows * d->rs <= DW_BUF;
}

/* R output rows (from oh) x 8 columns (from o) of one plane; R independent FMA chains
 * hide the FMA latency when a row holds a single vector (7x7 and 14x14 planes). */
static inline __attribute__((always_inline)) void
dw_tile(const float *buf, const conv_pad *d, const float *w, float b, float *y, int64_t ow,
        int64_t oh, int64_t o, const int R, const int K, const int S) {
  __m256 acc[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    acc[r] = _mm256_set1_ps(b);
#pragma GCC unroll 5
  for (int kh = 0; kh < K; kh++)
#pragma GCC unroll 5
    for (int kw = 0; kw < K; kw++) {
      __m256 wv = _mm256_broadcast_ss(w + kh * K + kw);
      const float *src = buf + (oh * S + kh) * d->rs + (kw % S) * d->lp + o + kw / S;
#pragma GCC unroll 4
      for (int r = 0; r < R; r++)
        acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(src + r * S * d->rs), wv, acc[r]);
    }
  int64_t left = ow - o;
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    nr_vf_store_first(y + (oh + r) * ow + o, acc[r], left);
}

static inline __attribute__((always_inline)) void
dw_plane_padded(const conv_p *p, const float *x, const float *w, float b, float *y,
                const conv_pad *d, float *buf, float *tmp, const int K, const int S) {
  for (int64_t r = 0; r < d->rows; r++) {
    int64_t ih = r - p->pt;
    if (ih >= 0 && ih < p->h)
      conv_pad_row(p, x + ih * p->w, S, d, buf + r * d->rs, tmp);
  }
  int64_t oh = 0;
  for (; oh + 4 <= p->oh; oh += 4)
    for (int64_t o = 0; o < p->ow; o += 8)
      dw_tile(buf, d, w, b, y, p->ow, oh, o, 4, K, S);
  for (int64_t o = 0; oh < p->oh && o < p->ow; o += 8) /* 1 to 3 rows left */
    switch (p->oh - oh) {
    case 1: dw_tile(buf, d, w, b, y, p->ow, oh, o, 1, K, S); break;
    case 2: dw_tile(buf, d, w, b, y, p->ow, oh, o, 2, K, S); break;
    default: dw_tile(buf, d, w, b, y, p->ow, oh, o, 3, K, S); break;
    }
}

#define DW_TMP (2 * DW_BUF / 64 + 64) /* floats of one padded row before its split */

/* A plane through the padded copy when it fits the buffer, else the in-place kernel.
 * *zeroed: the buffer's padding is in place (set on the task's first plane). */
static void dw_plane_any(const conv_p *p, const float *x, const float *w, float b, float *y,
                         float *buf, float *tmp, bool *zeroed) {
  int K = p->kh, S = p->sh;
  conv_pad d;
  if (!dw_pad_dims(p, S, K, &d) || S * d.lp > DW_TMP) {
    switch (K * 10 + S) {
    case 31: dw_plane(p, x, w, b, y, 3, 1); break;
    case 32: dw_plane(p, x, w, b, y, 3, 2); break;
    case 51: dw_plane(p, x, w, b, y, 5, 1); break;
    case 71: dw_plane(p, x, w, b, y, 7, 1); break;
    default: dw_plane(p, x, w, b, y, 5, 2); break;
    }
    return;
  }
  if (!*zeroed) {
    conv_zero(buf, d.rows * d.rs);
    conv_zero(tmp, d.rs);
    *zeroed = true;
  }
  switch (K * 10 + S) {
  case 31: dw_plane_padded(p, x, w, b, y, &d, buf, tmp, 3, 1); break;
  case 32: dw_plane_padded(p, x, w, b, y, &d, buf, tmp, 3, 2); break;
  case 51: dw_plane_padded(p, x, w, b, y, &d, buf, tmp, 5, 1); break;
  case 71: dw_plane_padded(p, x, w, b, y, &d, buf, tmp, 7, 1); break;
  default: dw_plane_padded(p, x, w, b, y, &d, buf, tmp, 5, 2); break;
  }
}

static void dw_task(void *arg, int64_t begin, int64_t end, int thread) {
  const dw_job *j = arg;
  const conv_p *p = j->p;
  int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
  float buf[DW_BUF] __attribute__((aligned(32))), tmp[DW_TMP];
  bool zeroed = false;
  for (int64_t i = begin; i < end; i++) { /* i = n * C + c */
    int64_t c = i % p->c;
    const float *x = j->x + i * hw, *w = j->w + c * p->kh * p->kw;
    float b = j->bias ? j->bias[c] : 0.0f, *y = j->y + i * ohw;
    dw_plane_any(p, x, w, b, y, buf, tmp, &zeroed);
    nr_conv_epilogue(y, j->res ? j->res + i * ohw : NULL, ohw, 0.0f, p);
  }
}

nr_status nr_conv_dw__avx2_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  dw_job j = {&q, a->in[0], a->in[1], q.has_bias ? a->in[2] : NULL, res, a->out[0]};
  nr_parallel_for(a->pool, (int64_t)q.n * q.c, 1, a->step->threads, dw_task, &j);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}

/* ---- NCHW8C ---------------------------------------------------------------------- */

static void dw8_task(void *arg, int64_t begin, int64_t end, int thread) {
  const dw_job *j = arg;
  const conv_p *p = j->p;
  int64_t cb = nr_ceil8(p->c) / 8, kk = (int64_t)p->kh * p->kw;
  for (int64_t i = begin; i < end; i++) { /* i = (n * cb + b) * oh + oh */
    int64_t oh = i % p->oh, nb = i / p->oh, b = nb % cb;
    const float *x = j->x + nb * (int64_t)p->h * p->w * 8, *w = j->w + b * kk * 8;
    float *y = j->y + i * (int64_t)p->ow * 8;
    __m256 bias = _mm256_loadu_ps(j->bias + b * 8);
    int64_t ih0 = oh * p->sh - p->pt;
    int khl = 0, khh = p->kh;
    while (khl < khh && ih0 + khl * p->dh < 0)
      khl++;
    while (khh > khl && ih0 + (khh - 1) * p->dh >= p->h)
      khh--;
    for (int64_t ow = 0; ow < p->ow; ow++) {
      __m256 acc = bias;
      int64_t iw0 = ow * p->sw - p->pl;
      int kwl = 0, kwh = p->kw;
      while (kwl < kwh && iw0 + kwl * p->dw < 0)
        kwl++;
      while (kwh > kwl && iw0 + (kwh - 1) * p->dw >= p->w)
        kwh--;
      for (int kh = khl; kh < khh; kh++) {
        const float *xr = x + ((ih0 + kh * p->dh) * p->w + iw0) * 8;
        const float *wr = w + kh * p->kw * 8;
        for (int kw = kwl; kw < kwh; kw++)
          acc = _mm256_fmadd_ps(_mm256_loadu_ps(xr + kw * p->dw * 8),
                                _mm256_loadu_ps(wr + kw * 8), acc);
      }
      _mm256_storeu_ps(y + ow * 8, acc);
    }
    nr_conv_epilogue(y, j->res ? j->res + i * (int64_t)p->ow * 8 : NULL, p->ow * 8, 0.0f,
                     p);
    if (b == cb - 1)
      nr_conv_zero_pad8(y, p->ow, p->c % 8);
  }
}

nr_status nr_conv_dw_nchw8c__avx2_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_NCHW8C, &q, &post);
  const float *pk = a->packed;
  dw_job j = {&q, a->in[0], pk, pk + q.extra, res, a->out[0]};
  int64_t rows = (int64_t)q.n * (nr_ceil8(q.c) / 8) * q.oh;
  nr_parallel_for(a->pool, rows, 1, a->step->threads, dw8_task, &j);
  nr_conv_finish(a, NR_LAYOUT_NCHW8C, conv_params(a->step), post);
  return NR_OK;
}
