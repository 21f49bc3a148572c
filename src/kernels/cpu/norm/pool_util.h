/* pool_util.h - the scalar pieces the 2-D pool kernels share (pool.c, pool__avx2.c,
 * pool__avx512.c): window counts along one axis, the reference's exact max of one
 * window, the division of an average row by its counts, the valid rows of a window,
 * the finishing of a vector kernel's output row, and one output from a row buffer.
 * Static inline so each kernel file keeps its own copy under its own ISA flags.
 *
 * Key decision: these are the rules every kernel must agree on bit for bit (the NaN
 * rule of the max, which positions an average counts), so they live once here rather
 * than beside each vector loop. */
#ifndef NR_KERNELS_CPU_NORM_POOL_UTIL_H
#define NR_KERNELS_CPU_NORM_POOL_UTIL_H

#include "kernels/cpu/norm/norm.h"

#include <math.h>
#include <stdbool.h>

/* Kernel positions along one axis inside the input (valid), and inside input + pads
 * (padded). */
static inline void nr_pool_axis_counts(int64_t o, int32_t s, int32_t d, int32_t k,
                                       int32_t pb, int32_t pe, int64_t in, int64_t *valid,
                                       int64_t *padded) {
  *valid = *padded = 0;
  for (int32_t t = 0; t < k; t++) {
    int64_t i = o * s - pb + (int64_t)t * d;
    *valid += i >= 0 && i < in;
    *padded += i >= -pb && i < in + pe;
  }
}

/* Output (oy, ox) of a max by the reference's rule, straight from the plane: -inf
 * when no tap is inside the input, NaN when every tap inside is NaN, else the largest
 * number (the first of equal ones). */
static inline float nr_pool_exact_max(const nr_pool2d *p, const float *x, int64_t ih,
                                      int64_t iw, int64_t oy, int64_t ox) {
  float acc = -INFINITY;
  bool any = false;
  for (int32_t ky = 0; ky < p->kh; ky++) {
    int64_t iy = oy * p->sh - p->pt + (int64_t)ky * p->dh;
    if (iy < 0 || iy >= ih)
      continue;
    for (int32_t kx = 0; kx < p->kw; kx++) {
      int64_t ix = ox * p->sw - p->pl + (int64_t)kx * p->dw;
      if (ix < 0 || ix >= iw)
        continue;
      float v = x[iy * iw + ix];
      if (!any || v > acc || (isnan(acc) && !isnan(v)))
        acc = v;
      any = true;
    }
  }
  return acc;
}

/* Averages: divides output row oy by each output's window count (valid or padded). */
static inline void nr_pool_average_row(const nr_pool2d *p, float *y, int64_t oy, int64_t ih,
                                       int64_t iw, int64_t ow) {
  int64_t vy, py;
  nr_pool_axis_counts(oy, p->sh, p->dh, p->kh, p->pt, p->pb, ih, &vy, &py);
  for (int64_t ox = 0; ox < ow; ox++) {
    int64_t vx, px;
    nr_pool_axis_counts(ox, p->sw, p->dw, p->kw, p->pl, p->pr, iw, &vx, &px);
    int64_t n = p->count_pad ? py * px : vy * vx;
    y[ox] = n ? y[ox] / (float)n : NAN;
  }
}

/* The input rows of output row oy's window that lie inside the input (at most
 * p->kh, which callers bound): their count, their starts in rows. */
static inline int nr_pool_window_rows(const nr_pool2d *p, const float *x, int64_t ih,
                                      int64_t iw, int64_t oy, const float **rows) {
  int n = 0;
  for (int32_t ky = 0; ky < p->kh; ky++) {
    int64_t iy = oy * p->sh - p->pt + (int64_t)ky * p->dh;
    if (iy >= 0 && iy < ih)
      rows[n++] = x + iy * iw;
  }
  return n;
}

/* After a vector kernel wrote output row oy: an average divides by the counts; a max
 * whose row holds -inf outputs (ninf) recomputes those by the reference's rule. */
static inline void nr_pool_finish_row(const nr_pool2d *p, const float *x, int64_t ih,
                                      int64_t iw, int64_t oy, float *yr, int64_t ow,
                                      bool ninf) {
  if (!p->max)
    nr_pool_average_row(p, yr, oy, ih, iw, ow);
  else if (ninf)
    for (int64_t i = 0; i < ow; i++)
      if (yr[i] == -INFINITY)
        yr[i] = nr_pool_exact_max(p, x, ih, iw, oy, i);
}

/* Output o of a row from the row buffer (the window's rows already reduced into it):
 * its kw buffer columns reduced. On a max tie the earlier value stays. */
static inline float nr_pool_window1(const nr_pool2d *p, const float *buf, int64_t o) {
  const float *b = buf + o * p->sw;
  float acc = b[0];
  for (int32_t kx = 1; kx < p->kw; kx++) {
    float v = b[(int64_t)kx * p->dw];
    acc = p->max ? (v > acc ? v : acc) : acc + v;
  }
  return acc;
}

#endif
