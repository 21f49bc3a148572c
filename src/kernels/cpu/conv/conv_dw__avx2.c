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
 * The copy is made of whole-vector stores (conv_pad_row), and two buffers alternate:
 * the next plane is copied before this one is computed, so the kernel's loads do not
 * wait on the copy's stores. On a Zen 3 EPYC (nr_conv_bench, 1 thread) the first took
 * a 576-channel 14x14 -> 7x7 stride-2 layer from 0.165 to 0.060 ms, the second a
 * 96-channel 112x112 stride-2 one from 0.50 to 0.32 ms. The residual and a
 * piecewise activation are applied in the registers before the store. Planes too
 * large for the buffer keep the in-place kernel: interior columns without bounds
 * checks, border columns on a scalar path, taps in the vertical padding skipped. */
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

#define DW_BUF 16384 /* floats of one padded plane (2 x 64 KiB of stack: up to 112x112) */

static bool dw_pad_dims(const conv_p *p, int S, int K, conv_pad *d) {
  return conv_pad_dims(p, S, K, 8, d) && d->rows * d->rs <= DW_BUF;
}

/* Where a plane's tiles store: Y's plane, the residual's (NULL: none), and the
 * activation applied in registers (NR_ACT_NONE when a pass over the plane does it). */
typedef struct dw_out {
  float *y;
  const float *r;
  int64_t ow;
  nr_act act;
  float a, b;
} dw_out;

static inline __attribute__((always_inline)) __m256 dw_act(const dw_out *o, __m256 v) {
  __m256 zero = _mm256_setzero_ps();
  switch (o->act) { /* the reference's NaN rules: relu(NaN) = 0, the others keep it */
  case NR_ACT_RELU: return _mm256_max_ps(v, zero);
  case NR_ACT_CLIP: return _mm256_min_ps(_mm256_set1_ps(o->b), _mm256_max_ps(_mm256_set1_ps(o->a), v));
  case NR_ACT_LEAKY_RELU:
    return _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(o->a)), v,
                            _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
  default: return v;
  }
}

/* R output rows (from oh) x 8 columns (from o) of one plane; R independent FMA chains
 * hide the FMA latency when a row holds a single vector (7x7 and 14x14 planes). The
 * residual and a piecewise activation are applied before the store. */
static inline __attribute__((always_inline)) void
dw_tile(const float *buf, const conv_pad *d, const float *w, float b, const dw_out *out,
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
  int64_t left = out->ow - o;
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) {
    int64_t at = (oh + r) * out->ow + o;
    __m256 v = acc[r];
    if (out->r)
      v = _mm256_add_ps(v, conv_load_first(out->r + at, left));
    nr_vf_store_first(out->y + at, dw_act(out, v), left);
  }
}

static void dw_fill(const conv_p *p, const float *x, const conv_pad *d, float *buf) {
  for (int64_t r = 0; r < d->rows; r++) {
    int64_t ih = r - p->pt;
    if (ih >= 0 && ih < p->h)
      conv_pad_row(p, x + ih * p->w, p->sh, d, buf + r * d->rs);
  }
}

static inline __attribute__((always_inline)) void
dw_tiles(const conv_p *p, const float *w, float b, const dw_out *out, const conv_pad *d,
         const float *buf, const int K, const int S) {
  int64_t oh = 0;
  for (; oh + 4 <= p->oh; oh += 4)
    for (int64_t o = 0; o < p->ow; o += 8)
      dw_tile(buf, d, w, b, out, oh, o, 4, K, S);
  for (int64_t o = 0; oh < p->oh && o < p->ow; o += 8) /* 1 to 3 rows left */
    switch (p->oh - oh) {
    case 1: dw_tile(buf, d, w, b, out, oh, o, 1, K, S); break;
    case 2: dw_tile(buf, d, w, b, out, oh, o, 2, K, S); break;
    default: dw_tile(buf, d, w, b, out, oh, o, 3, K, S); break;
    }
}

/* The planes [begin, end) (i = n * C + c) through two padded buffers: plane i + 1 is
 * copied before plane i is computed, so its stores reach the cache while plane i's
 * FMAs run and no load of the kernel waits on a store just issued. */
static void dw_planes_padded(const dw_job *j, const conv_pad *d, int64_t begin, int64_t end,
                             float *bufs) {
  const conv_p *p = j->p;
  int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow, n = d->rows * d->rs;
  nr_act act = (nr_act)p->act;
  bool inreg = act == NR_ACT_NONE || act == NR_ACT_RELU || act == NR_ACT_CLIP ||
               act == NR_ACT_LEAKY_RELU;
  conv_zero(bufs, 2 * n);
  dw_fill(p, j->x + begin * hw, d, bufs);
  for (int64_t i = begin; i < end; i++) {
    if (i + 1 < end)
      dw_fill(p, j->x + (i + 1) * hw, d, bufs + ((i + 1 - begin) & 1) * n);
    const float *buf = bufs + ((i - begin) & 1) * n;
    int64_t c = i % p->c;
    const float *w = j->w + c * p->kh * p->kw;
    float b = j->bias ? j->bias[c] : 0.0f;
    dw_out out = {j->y + i * ohw, j->res ? j->res + i * ohw : NULL, p->ow,
                  inreg ? act : NR_ACT_NONE, p->act_a, p->act_b};
    switch (p->kh * 10 + p->sh) {
    case 31: dw_tiles(p, w, b, &out, d, buf, 3, 1); break;
    case 32: dw_tiles(p, w, b, &out, d, buf, 3, 2); break;
    case 51: dw_tiles(p, w, b, &out, d, buf, 5, 1); break;
    case 71: dw_tiles(p, w, b, &out, d, buf, 7, 1); break;
    default: dw_tiles(p, w, b, &out, d, buf, 5, 2); break;
    }
    if (!inreg)
      nr_act_apply(act, p->act_a, p->act_b, out.y, ohw);
  }
}

/* Planes too large for the buffers: the in-place kernel, then the epilogue. */
static void dw_planes_inplace(const dw_job *j, int64_t begin, int64_t end) {
  const conv_p *p = j->p;
  int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
  for (int64_t i = begin; i < end; i++) {
    int64_t c = i % p->c;
    const float *x = j->x + i * hw, *w = j->w + c * p->kh * p->kw;
    float b = j->bias ? j->bias[c] : 0.0f, *y = j->y + i * ohw;
    switch (p->kh * 10 + p->sh) {
    case 31: dw_plane(p, x, w, b, y, 3, 1); break;
    case 32: dw_plane(p, x, w, b, y, 3, 2); break;
    case 51: dw_plane(p, x, w, b, y, 5, 1); break;
    case 71: dw_plane(p, x, w, b, y, 7, 1); break;
    default: dw_plane(p, x, w, b, y, 5, 2); break;
    }
    nr_conv_epilogue(y, j->res ? j->res + i * ohw : NULL, ohw, 0.0f, p);
  }
}

static void dw_task(void *arg, int64_t begin, int64_t end, int thread) {
  const dw_job *j = arg;
  conv_pad d;
  if (dw_pad_dims(j->p, j->p->sh, j->p->kh, &d)) {
    float bufs[2 * DW_BUF] __attribute__((aligned(32)));
    dw_planes_padded(j, &d, begin, end, bufs);
  } else {
    dw_planes_inplace(j, begin, end);
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
