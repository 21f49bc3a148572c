/* pool_nhwc.c - portable NHWC pooling kernels (pool_nhwc.h states the numerics).
 *
 * Key decision: channels in chunks of 64 held in small local arrays, taps in the
 * outer loop, so every load is a contiguous run of one tap's channels and the loops
 * are ones a compiler can vectorise; the AVX2 file does the same with registers. */
#include "kernels/cpu/norm/pool_nhwc.h"

#include <math.h>

#define CH 64

static void out_pixel(const nr_pool2d *p, const nr_pool_nhwc_geom *g, const float *x,
                      float *y, int32_t y0, int32_t y1, int64_t iy0, int32_t x0, int32_t x1,
                      int64_t ix0, int64_t count) {
  for (int64_t c0 = 0; c0 < g->c; c0 += CH) {
    int64_t cn = g->c - c0 < CH ? g->c - c0 : CH;
    float acc[CH];
    bool seen[CH];
    for (int64_t j = 0; j < cn; j++)
      acc[j] = p->max ? -INFINITY : 0.0f, seen[j] = false;
    for (int32_t ky = y0; ky < y1; ky++)
      for (int32_t kx = x0; kx < x1; kx++) {
        const float *t = x + ((iy0 + (int64_t)ky * p->dh) * g->iw + ix0 +
                              (int64_t)kx * p->dw) * g->c + c0;
        if (p->max)
          for (int64_t j = 0; j < cn; j++) {
            acc[j] = t[j] > acc[j] ? t[j] : acc[j];
            seen[j] |= !isnan(t[j]);
          }
        else
          for (int64_t j = 0; j < cn; j++)
            acc[j] += t[j];
      }
    bool any = y1 > y0 && x1 > x0;
    for (int64_t j = 0; j < cn; j++)
      y[c0 + j] = p->max ? (!any ? -INFINITY : seen[j] ? acc[j] : NAN)
                         : count ? acc[j] / (float)count : NAN;
  }
}

void nr_f32_pool2d_nhwc__portable(const nr_pool2d *p, const nr_pool_nhwc_geom *g,
                                  const float *x, float *y, int64_t oy0, int64_t oy1) {
  for (int64_t oy = oy0; oy < oy1; oy++) {
    int32_t y0, y1, x0, x1;
    int64_t py, px;
    nr_pool_axis_taps(oy, p->sh, p->dh, p->kh, p->pt, p->pb, g->ih, &y0, &y1, &py);
    for (int64_t ox = 0; ox < g->ow; ox++) {
      nr_pool_axis_taps(ox, p->sw, p->dw, p->kw, p->pl, p->pr, g->iw, &x0, &x1, &px);
      int64_t count = p->count_pad ? py * px : (int64_t)(y1 - y0) * (x1 - x0);
      out_pixel(p, g, x, y + (oy * g->ow + ox) * g->c, y0, y1, oy * p->sh - p->pt, x0, x1,
                ox * p->sw - p->pl, count);
    }
  }
}

void nr_f32_gavgpool_nhwc__portable(const float *x, int64_t hw, int64_t ld, int64_t c,
                                    bool reassoc, float *y) {
  for (int64_t c0 = 0; c0 < c; c0 += CH) {
    int64_t cn = c - c0 < CH ? c - c0 : CH;
    double sd[CH];
    float sf[CH];
    for (int64_t j = 0; j < cn; j++)
      sd[j] = 0.0, sf[j] = 0.0f;
    for (int64_t i = 0; i < hw; i++) {
      const float *t = x + i * ld + c0;
      if (reassoc)
        for (int64_t j = 0; j < cn; j++)
          sf[j] += t[j];
      else
        for (int64_t j = 0; j < cn; j++)
          sd[j] += t[j];
    }
    for (int64_t j = 0; j < cn; j++)
      y[c0 + j] = (float)((reassoc ? (double)sf[j] : sd[j]) / (double)hw);
  }
}
