/* conv_direct.c - the portable direct convolutions: nr_f32_conv_direct (PLAIN, any
 * group, stride, dilation and padding: the fallback every 2-D float conv can take),
 * nr_f32_conv_dw (PLAIN depthwise, the same loop nest on one channel) and
 * nr_f32_conv_dw_nchw8c (NCHW8C depthwise, 8 channels per pixel).
 *
 * Key decision: the loop nest is output-plane major and clips each kernel tap's
 * output range once (ow_lo..ow_hi) instead of testing bounds per element, so the
 * innermost loop is a branch-free axpy the compiler vectorizes for stride 1. */
#include "kernels/cpu/conv/conv_internal.h"

#include <string.h>

/* Output positions o in [lo, hi) whose input o*s - pad + k*d lies in [0, n). */
static void tap_range(int64_t n, int64_t out, int64_t s, int64_t pad, int64_t kd,
                      int64_t *lo, int64_t *hi) {
  int64_t off = kd - pad; /* input = o*s + off */
  int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t h = n - 1 - off < 0 ? 0 : (n - 1 - off) / s + 1;
  *lo = l;
  *hi = h < out ? h : out;
  if (*hi < *lo)
    *hi = *lo;
}

typedef struct direct_job {
  const conv_p *p;
  const float *x, *w, *bias, *res;
  float *y;
} direct_job;

/* Accumulates one input channel plane into one output plane. */
static void plane_acc(const conv_p *p, const float *x, const float *w, float *y) {
  for (int64_t kh = 0; kh < p->kh; kh++) {
    int64_t ohl, ohh;
    tap_range(p->h, p->oh, p->sh, p->pt, kh * p->dh, &ohl, &ohh);
    for (int64_t kw = 0; kw < p->kw; kw++) {
      float wv = w[kh * p->kw + kw];
      int64_t owl, owh;
      tap_range(p->w, p->ow, p->sw, p->pl, kw * p->dw, &owl, &owh);
      for (int64_t oh = ohl; oh < ohh; oh++) {
        const float *xr = x + (oh * p->sh - p->pt + kh * p->dh) * p->w +
                          (kw * p->dw - p->pl);
        float *yr = y + oh * p->ow;
        if (p->sw == 1)
          for (int64_t ow = owl; ow < owh; ow++)
            yr[ow] += wv * xr[ow];
        else
          for (int64_t ow = owl; ow < owh; ow++)
            yr[ow] += wv * xr[ow * p->sw];
      }
    }
  }
}

static void direct_task(void *arg, int64_t begin, int64_t end, int thread) {
  const direct_job *j = arg;
  const conv_p *p = j->p;
  int64_t mg = p->m / p->group, cg = p->c / p->group, kk = (int64_t)p->kh * p->kw;
  int64_t hw = (int64_t)p->h * p->w, ohw = (int64_t)p->oh * p->ow;
  for (int64_t i = begin; i < end; i++) { /* i = n * M + m */
    int64_t n = i / p->m, m = i % p->m, g = m / mg;
    float *y = j->y + i * ohw;
    memset(y, 0, sizeof(float) * (size_t)ohw);
    for (int64_t ci = 0; ci < cg; ci++)
      plane_acc(p, j->x + (n * p->c + g * cg + ci) * hw, j->w + (m * cg + ci) * kk, y);
    nr_conv_epilogue(y, j->res ? j->res + i * ohw : NULL, ohw, j->bias ? j->bias[m] : 0.0f,
                     p);
  }
}

nr_status nr_conv_direct_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  direct_job j = {&q, a->in[0], a->in[1], q.has_bias ? a->in[2] : NULL, res, a->out[0]};
  nr_parallel_for(a->pool, (int64_t)q.n * q.m, 1, a->step->threads, direct_task, &j);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}

nr_status nr_conv_dw_run(const nr_exec_args *a) { return nr_conv_direct_run(a); }

/* ---- NCHW8C depthwise, portable ------------------------------------------------- */

static void dw8_task(void *arg, int64_t begin, int64_t end, int thread) {
  const direct_job *j = arg;
  const conv_p *p = j->p;
  int64_t cb = nr_ceil8(p->c) / 8, kk = (int64_t)p->kh * p->kw;
  for (int64_t i = begin; i < end; i++) { /* i = (n * cb + b) * oh + oh */
    int64_t oh = i % p->oh, nb = i / p->oh, b = nb % cb;
    const float *x = j->x + nb * (int64_t)p->h * p->w * 8;
    const float *w = j->w + b * kk * 8, *bias = j->bias + b * 8;
    float *y = j->y + i * (int64_t)p->ow * 8;
    for (int64_t ow = 0; ow < p->ow; ow++) {
      float acc[8];
      for (int l = 0; l < 8; l++)
        acc[l] = bias[l];
      for (int64_t kh = 0; kh < p->kh; kh++) {
        int64_t ih = oh * p->sh - p->pt + kh * p->dh;
        if (ih < 0 || ih >= p->h)
          continue;
        for (int64_t kw = 0; kw < p->kw; kw++) {
          int64_t iw = ow * p->sw - p->pl + kw * p->dw;
          if (iw < 0 || iw >= p->w)
            continue;
          const float *xv = x + (ih * p->w + iw) * 8, *wv = w + (kh * p->kw + kw) * 8;
          for (int l = 0; l < 8; l++)
            acc[l] += xv[l] * wv[l];
        }
      }
      memcpy(y + ow * 8, acc, sizeof acc);
    }
    nr_conv_epilogue(y, j->res ? j->res + i * (int64_t)p->ow * 8 : NULL, p->ow * 8, 0.0f,
                     p);
    if (b == cb - 1)
      nr_conv_zero_pad8(y, p->ow, p->c % 8);
  }
}

nr_status nr_conv_dw_nchw8c_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_NCHW8C, &q, &post);
  const float *pk = a->packed;
  direct_job j = {&q, a->in[0], pk, pk + q.extra, res, a->out[0]};
  int64_t rows = (int64_t)q.n * (nr_ceil8(q.c) / 8) * q.oh;
  nr_parallel_for(a->pool, rows, 1, a->step->threads, dw8_task, &j);
  nr_conv_finish(a, NR_LAYOUT_NCHW8C, conv_params(a->step), post);
  return NR_OK;
}
