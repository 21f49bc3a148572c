/* pool.c - portable 2-D MaxPool / AveragePool over one PLAIN NCHW plane.
 *
 * The window geometry (pads, strides, dilations, ceil_mode) was resolved at prepare
 * by the reference's own nr_window code, so only the loop lives here. For each output
 * row the valid kernel rows are computed once; a window whose columns are all inside
 * the input runs without per-element bounds checks. Sums are in double, as the
 * reference does; the max keeps the reference's NaN rule (a NaN is replaced by a
 * later number). */
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/pool_util.h"

#include <math.h>

typedef struct win {
  int64_t n_valid, n_padded;
  double acc;
  bool any;
} win;

static void visit(const nr_pool2d *p, win *w, float v) {
  if (p->max) {
    if (!w->any || v > w->acc || (isnan(w->acc) && !isnan(v)))
      w->acc = v;
  } else {
    w->acc += v;
  }
  w->any = true;
}

static float result(const nr_pool2d *p, const win *w) {
  if (p->max)
    return w->any ? (float)w->acc : -INFINITY;
  int64_t n = p->count_pad ? w->n_padded : w->n_valid;
  return n ? (float)(w->acc / (double)n) : NAN;
}

void nr_f32_pool2d__portable(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                             float *y, int64_t oh, int64_t ow) {
  for (int64_t oy = 0; oy < oh; oy++) {
    int64_t vy, py;
    nr_pool_axis_counts(oy, p->sh, p->dh, p->kh, p->pt, p->pb, ih, &vy, &py);
    for (int64_t ox = 0; ox < ow; ox++) {
      int64_t vx, px;
      nr_pool_axis_counts(ox, p->sw, p->dw, p->kw, p->pl, p->pr, iw, &vx, &px);
      win w = {vy * vx, py * px, 0.0, false};
      int64_t x0 = ox * p->sw - p->pl;
      bool inside = x0 >= 0 && x0 + (int64_t)(p->kw - 1) * p->dw < iw;
      for (int32_t ky = 0; ky < p->kh; ky++) {
        int64_t iy = oy * p->sh - p->pt + (int64_t)ky * p->dh;
        if (iy < 0 || iy >= ih)
          continue;
        const float *row = x + iy * iw;
        if (inside) {
          for (int32_t kx = 0; kx < p->kw; kx++)
            visit(p, &w, row[x0 + (int64_t)kx * p->dw]);
          continue;
        }
        for (int32_t kx = 0; kx < p->kw; kx++) {
          int64_t ix = x0 + (int64_t)kx * p->dw;
          if (ix >= 0 && ix < iw)
            visit(p, &w, row[ix]);
        }
      }
      y[oy * ow + ox] = result(p, &w);
    }
  }
}
