/* pool_nhwc.h - 2-D MaxPool / AveragePool and GlobalAveragePool over NHWC images
 * (channels last), a portable and an AVX2 version of each; the tactics that run them
 * are in tactics_pool_nhwc.c.
 *
 * Key decision: vectorise over channels. In NHWC every window tap is a contiguous run
 * of C floats, so an output pixel is C independent reductions done a vector of
 * channels at a time, with no gathers, no row buffer and no special case for stride,
 * dilation or padding: the valid taps of each output are a rectangle of (ky, kx)
 * computed once per output row and column. The numerics are the reference's:
 *   max      -inf when no tap is inside the input; otherwise the largest number among
 *            the taps, NaN only when every tap is NaN (ops_pool.c's rule: a NaN is
 *            replaced by a later number, a number never by a NaN); ties keep the
 *            first, so -0.0 / +0.0 come out as the reference's;
 *   average  the taps summed in float (at most kh * kw terms, as pool__avx2.c does),
 *            divided by the valid or the padded tap count (count_include_pad); a
 *            window with no counted tap gives NaN;
 *   global   per channel, the pixels summed in order in double (reassoc = 0: the
 *            reference's order and precision, so the result is bit-exact), or in float
 *            (reassoc = 1), then divided by H * W in double. */
#ifndef NR_KERNELS_CPU_NORM_POOL_NHWC_H
#define NR_KERNELS_CPU_NORM_POOL_NHWC_H

#include "kernels/cpu/norm/norm.h"

#include <stdint.h>

/* One NHWC image x [ih, iw, c] -> output rows [oy0, oy1) of y [oh, ow, c]. */
typedef struct nr_pool_nhwc_geom {
  int64_t ih, iw, c, oh, ow;
} nr_pool_nhwc_geom;

void nr_f32_pool2d_nhwc__portable(const nr_pool2d *p, const nr_pool_nhwc_geom *g,
                                  const float *x, float *y, int64_t oy0, int64_t oy1);
void nr_f32_pool2d_nhwc__avx2(const nr_pool2d *p, const nr_pool_nhwc_geom *g,
                              const float *x, float *y, int64_t oy0, int64_t oy1);

/* y[c] = mean over the hw pixels of x [hw, ld] (channel stride 1, pixel stride ld)
 * for the c channels starting at x; see above for reassoc. */
void nr_f32_gavgpool_nhwc__portable(const float *x, int64_t hw, int64_t ld, int64_t c,
                                    bool reassoc, float *y);
void nr_f32_gavgpool_nhwc__avx2(const float *x, int64_t hw, int64_t ld, int64_t c,
                                bool reassoc, float *y);

/* The valid taps of output position o along one axis: t in [*lo, *hi) has input
 * o * s - pb + t * d inside [0, in); *padded counts the taps inside [-pb, in + pe). */
static inline void nr_pool_axis_taps(int64_t o, int32_t s, int32_t d, int32_t k, int32_t pb,
                                     int32_t pe, int64_t in, int32_t *lo, int32_t *hi,
                                     int64_t *padded) {
  *lo = k, *hi = 0, *padded = 0;
  for (int32_t t = 0; t < k; t++) {
    int64_t i = o * s - pb + (int64_t)t * d;
    if (i >= 0 && i < in) {
      *lo = t < *lo ? t : *lo;
      *hi = t + 1;
    }
    *padded += i >= -pb && i < in + pe;
  }
  if (*hi <= *lo)
    *lo = *hi = 0;
}

#endif
