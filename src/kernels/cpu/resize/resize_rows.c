/* resize_rows.c - the row loop of the Resize tactics and its portable inner loops
 * (nr_f32_resize_rows__portable); the AVX2 inner loops are in resize_rows__avx2.c.
 *
 * Key decision: linear resizing blends the two source rows first (over the input
 * width, contiguous, into the thread's row of scratch) and then interpolates along
 * the row from that blend, so an upsample does the vertical work once per input
 * column instead of once per output column, and the gather reads one row in L1. */
#include "kernels/cpu/resize/resize.h"

#include <string.h>

static void nearest_portable(float *y, const float *src, const nr_resize_p *p,
                             const int32_t *i0, int64_t n) {
  if (p->xrep > 0) {
    for (int64_t i = 0; i < p->iw; i++)
      for (int32_t k = 0; k < p->xrep; k++)
        y[i * p->xrep + k] = src[i];
    return;
  }
  for (int64_t k = 0; k < n; k++)
    y[k] = src[i0[k]];
}

static void blend_portable(float *t, const float *a, const float *b, float w0, float w1,
                           int64_t n) {
  for (int64_t k = 0; k < n; k++)
    t[k] = a[k] * w0 + b[k] * w1;
}

static void linear_portable(float *y, const float *t, const nr_resize_axis *rx,
                            int64_t n) {
  for (int64_t k = 0; k < n; k++)
    y[k] = t[rx->i0[k]] * rx->w0[k] + t[rx->i1[k]] * rx->w1[k];
}

/* Whether output row oy reads what row oy - 1 read. */
static bool same_as_previous(const nr_resize_job *j, int64_t oy) {
  const nr_resize_axis *r = &j->ry;
  return oy > 0 && r->i0[oy] == r->i0[oy - 1] && r->i1[oy] == r->i1[oy - 1] &&
         r->w0[oy] == r->w0[oy - 1] && r->w1[oy] == r->w1[oy - 1];
}

static void one_row(const nr_resize_job *j, const float *x, int64_t oy, float *y,
                    float *t, const nr_resize_ops *ops) {
  const nr_resize_p *p = j->p;
  const float *a = x + (int64_t)j->ry.i0[oy] * p->iw;
  if (p->mode == NR_RESIZE_NEAREST) {
    ops->nearest(y, a, p, j->rx.i0, p->ow);
    return;
  }
  const float *b = x + (int64_t)j->ry.i1[oy] * p->iw;
  float w0 = j->ry.w0[oy], w1 = j->ry.w1[oy];
  if (w1 == 0.0f && w0 == 1.0f)
    t = (float *)a; /* the row itself: read, never written */
  else
    ops->blend(t, a, b, w0, w1, p->iw);
  ops->linear(y, t, &j->rx, p->ow);
}

void nr_resize_rows(const nr_resize_job *j, int64_t begin, int64_t end, int thread,
                    const nr_resize_ops *ops) {
  const nr_resize_p *p = j->p;
  float *t = j->scratch ? j->scratch + thread * j->rs : NULL;
  for (int64_t r = begin; r < end; r++) {
    int64_t plane = r / p->oh, oy = r % p->oh;
    float *y = j->y + r * p->ow;
    if (r > begin && same_as_previous(j, oy))
      memcpy(y, y - p->ow, sizeof(float) * (size_t)p->ow);
    else
      one_row(j, j->x + plane * p->ih * p->iw, oy, y, t, ops);
  }
}

void nr_f32_resize_rows__portable(const nr_resize_job *j, int64_t begin, int64_t end,
                                  int thread) {
  static const nr_resize_ops ops = {nearest_portable, blend_portable, linear_portable};
  nr_resize_rows(j, begin, end, thread, &ops);
}
