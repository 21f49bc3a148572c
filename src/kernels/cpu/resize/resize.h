/* resize.h - what the Resize tactics share (tactics_resize.c) with their row kernels
 * (resize_rows.c, resize_rows__avx2.c): the step's params record, the layout of the
 * index/weight tables packed into the engine, and the kernel entry points.
 *
 * Key decision: a Resize the fast tactics run is a resize of the last two axes only
 * (every leading axis identity), so the tensor is a stack of [ih, iw] planes and both
 * modes are separable into a vertical and a horizontal step. Everything the node's
 * attributes say (coordinate mode, nearest rounding, scales or sizes) is folded at
 * prepare into per-axis tables: output index j reads input indices i0[j], i1[j] with
 * weights w0[j], w1[j] (nearest: i0 only). run() never sees an attribute. */
#ifndef NR_KERNELS_CPU_RESIZE_RESIZE_H
#define NR_KERNELS_CPU_RESIZE_RESIZE_H

#include "plan/tactic.h"

#include <stdint.h>

enum { NR_RESIZE_NEAREST = 0, NR_RESIZE_LINEAR = 1 };

/* The step's params record. */
typedef struct nr_resize_p {
  int32_t mode;           /* NR_RESIZE_* */
  int32_t ih, iw, oh, ow; /* plane sizes in and out */
  int32_t xrep;           /* nearest: columns repeat each input column xrep times
                             (ow = xrep * iw, i0[j] = j / xrep), else 0 */
  int32_t pad_;
  int64_t planes; /* product of the leading (identity) dims */
} nr_resize_p;
_Static_assert(sizeof(nr_resize_p) <= NR_TACTIC_PARAMS, "nr_resize_p must fit params");

/* One axis's table, n entries each (n = oh for rows, ow for columns). */
typedef struct nr_resize_axis {
  const int32_t *i0, *i1;
  const float *w0, *w1;
} nr_resize_axis;

/* Bytes of the packed tables: rows then columns, each i0[n] i1[n] w0[n] w1[n]. */
static inline uint64_t nr_resize_table_bytes(const nr_resize_p *p) {
  return 16u * ((uint64_t)p->oh + (uint64_t)p->ow);
}
static inline nr_resize_axis nr_resize_axis_at(const void *tab, int64_t off, int64_t n) {
  const int32_t *i = (const int32_t *)tab + 4 * off;
  return (nr_resize_axis){i, i + n, (const float *)(i + 2 * n),
                          (const float *)(i + 3 * n)};
}

/* What a row kernel needs: the record, the tables, X and Y. */
typedef struct nr_resize_job {
  const nr_resize_p *p;
  nr_resize_axis ry, rx;
  const float *x;
  float *y;
  float *scratch; /* linear: one row of iw floats per thread, rs floats apart */
  int64_t rs;
} nr_resize_job;

/* Output rows [begin, end) of the whole stack (row r: plane r / oh, row r % oh); a
 * row equal to the one before it in the range is copied, not recomputed. */
/* The inner loops a row kernel brings (n outputs each). */
typedef struct nr_resize_ops {
  void (*nearest)(float *y, const float *src, const nr_resize_p *p, const int32_t *i0,
                  int64_t n);
  void (*blend)(float *t, const float *a, const float *b, float w0, float w1, int64_t n);
  void (*linear)(float *y, const float *t, const nr_resize_axis *rx, int64_t n);
} nr_resize_ops;
/* The row loop both kernels share (resize_rows.c), over ops. */
void nr_resize_rows(const nr_resize_job *j, int64_t begin, int64_t end, int thread,
                    const nr_resize_ops *ops);

void nr_f32_resize_rows__portable(const nr_resize_job *j, int64_t begin, int64_t end,
                                  int thread);
void nr_f32_resize_rows__avx2(const nr_resize_job *j, int64_t begin, int64_t end,
                              int thread);

#endif
