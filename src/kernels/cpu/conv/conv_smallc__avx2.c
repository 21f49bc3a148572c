/* conv_smallc__avx2.c - nr_f32_conv_smallc__avx2: direct PLAIN convolution for few
 * input channels (C <= 4, group 1: the RGB stem of a mobile network), 3x3 or 5x5,
 * stride 1 or 2.
 *
 * Key decision: im2col + GEMM is a poor fit there (K = C * k * k is 27: the column
 * matrix is as large as 9 copies of the image and the product is short). Instead the
 * C input planes are copied once into zero-padded, stride-phase-split buffers
 * (conv_pad_avx2.h) in scratch, W is packed there as [m / 4][c][kh][kw][4], and a
 * register tile of 4 output channels x 24 output columns (12 accumulators) loads 3
 * input vectors per tap and broadcasts 4 adjacent weights.
 * Threads split the output rows in bands; each band applies the epilogue (bias,
 * residual, activation) to its rows while they are in cache. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/conv_pad_avx2.h"
#include "util/error.h"

#define MB 4  /* output channels per tile */
#define NV (NR_CONV_SMALLC_COLS / 8) /* vectors of 8 output columns per tile */
#define BAND 4 /* output rows per task */

typedef struct sc_job {
  const conv_p *p;
  conv_pad d;
  const float *x, *w, *bias, *res;
  float *y, *buf; /* buf: n * c padded planes of d.rows * d.rs floats */
  float *wp;      /* W as [m / MB][c][kh][kw][MB] (zeros past m) */
} sc_job;

/* Packs W so a tile's MB weights of one tap are adjacent and its taps consecutive. */
static void pack_w(const sc_job *j) {
  const conv_p *p = j->p;
  int64_t kk = (int64_t)p->kh * p->kw, blocks = (p->m + MB - 1) / MB;
  for (int64_t b = 0; b < blocks; b++)
    for (int64_t c = 0; c < p->c; c++)
      for (int64_t t = 0; t < kk; t++)
        for (int64_t i = 0; i < MB; i++) {
          int64_t m = b * MB + i;
          j->wp[((b * p->c + c) * kk + t) * MB + i] =
              m < p->m ? j->w[(m * p->c + c) * kk + t] : 0.0f;
        }
}

static void pad_task(void *arg, int64_t begin, int64_t end, int thread) {
  const sc_job *j = arg;
  const conv_p *p = j->p;
  for (int64_t i = begin; i < end; i++) /* i = n * C + c */
    conv_pad_plane(p, j->x + i * (int64_t)p->h * p->w, p->sh, &j->d,
                   j->buf + i * j->d.rows * j->d.rs);
}

/* mb output channels (from m) x nv vectors (from column o) of output row oh; the last
 * vector stores only the columns below ow. */
static inline __attribute__((always_inline)) void
sc_tile(const sc_job *j, const float *planes, float *y, int64_t m, int64_t oh, int64_t o,
        const int mb, const int nv, const int K, const int S) {
  const conv_p *p = j->p;
  const conv_pad *d = &j->d;
  __m256 acc[MB][NV];
#pragma GCC unroll 4
  for (int i = 0; i < MB; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      acc[i][v] = _mm256_setzero_ps();
  int64_t kk = (int64_t)K * K, plane = d->rows * d->rs;
  for (int64_t c = 0; c < p->c; c++) {
    const float *wc = j->wp + ((m / MB) * p->c + c) * kk * MB;
#pragma GCC unroll 5
    for (int kh = 0; kh < K; kh++)
#pragma GCC unroll 5
      for (int kw = 0; kw < K; kw++) {
        const float *src =
            planes + c * plane + (oh * S + kh) * d->rs + (kw % S) * d->lp + o + kw / S;
        __m256 xv[NV];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
          xv[v] = _mm256_loadu_ps(src + 8 * v);
#pragma GCC unroll 4
        for (int i = 0; i < mb; i++) {
          __m256 wv = _mm256_broadcast_ss(wc + (kh * K + kw) * MB + i);
#pragma GCC unroll 3
          for (int v = 0; v < nv; v++)
            acc[i][v] = _mm256_fmadd_ps(xv[v], wv, acc[i][v]);
        }
      }
  }
  int64_t ohw = (int64_t)p->oh * p->ow;
#pragma GCC unroll 4
  for (int i = 0; i < mb; i++) {
    float *yr = y + (m + i) * ohw + oh * p->ow + o;
#pragma GCC unroll 3
    for (int v = 0; v < nv; v++) {
      int64_t left = p->ow - o - 8 * v;
      nr_vf_store_first(yr + 8 * v, acc[i][v], left);
    }
  }
}

/* Dispatch on the tile's channel count mb (1..4) and vector count nv (1..3). */
static inline __attribute__((always_inline)) void
sc_any(const sc_job *j, const float *planes, float *y, int64_t m, int64_t oh, int64_t o,
       int mb, int nv, const int K, const int S) {
#define SC(MBV, NVV)                                                                   \
  case MBV * 4 + NVV: sc_tile(j, planes, y, m, oh, o, MBV, NVV, K, S); break;
  switch (mb * 4 + nv) {
    SC(4, 3) SC(4, 2) SC(4, 1) SC(3, 3) SC(3, 2) SC(3, 1)
    SC(2, 3) SC(2, 2) SC(2, 1) SC(1, 3) SC(1, 2) SC(1, 1)
  default: break;
  }
#undef SC
}

static inline __attribute__((always_inline)) void
sc_band(const sc_job *j, int64_t n, int64_t oh0, int64_t oh1, const int K, const int S) {
  const conv_p *p = j->p;
  const float *planes = j->buf + n * p->c * j->d.rows * j->d.rs;
  float *y = j->y + n * (int64_t)p->m * p->oh * p->ow;
  for (int64_t m = 0; m < p->m; m += MB) {
    int mb = p->m - m < MB ? (int)(p->m - m) : MB;
    for (int64_t oh = oh0; oh < oh1; oh++)
      for (int64_t o = 0; o < p->ow; o += 8 * NV) {
        int64_t left = p->ow - o;
        int nv = left >= 8 * NV ? NV : (int)((left + 7) / 8);
        sc_any(j, planes, y, m, oh, o, mb, nv, K, S);
      }
  }
}

static void band_task(void *arg, int64_t begin, int64_t end, int thread) {
  const sc_job *j = arg;
  const conv_p *p = j->p;
  int64_t bands = (p->oh + BAND - 1) / BAND, ohw = (int64_t)p->oh * p->ow;
  for (int64_t t = begin; t < end; t++) { /* t = n * bands + band */
    int64_t n = t / bands, oh0 = (t % bands) * BAND;
    int64_t oh1 = oh0 + BAND < p->oh ? oh0 + BAND : p->oh;
    switch (p->kh * 10 + p->sh) {
    case 31: sc_band(j, n, oh0, oh1, 3, 1); break;
    case 32: sc_band(j, n, oh0, oh1, 3, 2); break;
    case 51: sc_band(j, n, oh0, oh1, 5, 1); break;
    default: sc_band(j, n, oh0, oh1, 5, 2); break;
    }
    for (int64_t m = 0; m < p->m; m++) {
      int64_t at = (n * p->m + m) * ohw + oh0 * p->ow;
      nr_conv_epilogue(j->y + at, j->res ? j->res + at : NULL, (oh1 - oh0) * p->ow,
                       j->bias ? j->bias[m] : 0.0f, p);
    }
  }
}

nr_status nr_conv_smallc__avx2_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  sc_job j = {&q, {0}, a->in[0], a->in[1], q.has_bias ? a->in[2] : NULL, res, a->out[0],
              a->scratch, NULL};
  if (!conv_pad_dims(&q, q.sh, q.kh, 8 * NV, &j.d))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: unexpected geometry", a->step->tactic->id);
  j.wp = j.buf + (int64_t)q.n * q.c * j.d.rows * j.d.rs;
  pack_w(&j);
  int threads = a->step->threads;
  nr_parallel_for(a->pool, (int64_t)q.n * q.c, 1, threads, pad_task, &j);
  int64_t bands = (q.oh + BAND - 1) / BAND;
  nr_parallel_for(a->pool, q.n * bands, 1, threads, band_task, &j);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
