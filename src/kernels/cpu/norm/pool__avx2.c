/* pool__avx2.c - AVX2 2-D MaxPool / AveragePool over one PLAIN NCHW plane.
 *
 * Key decision: separable windows. For each output row the kernel first reduces the
 * valid input rows of its window into one row buffer (8 columns at a time), padded on
 * both sides with the reduction's neutral value (-inf for max, 0 for the sum), then
 * reduces each output's kw buffer columns: 8 outputs at once for stride 1 (unaligned
 * loads) and stride 2 (two loads de-interleaved to the even columns), one at a time
 * otherwise. The buffer makes padding, ceil_mode and dilation branch-free. Averages
 * divide by the same counts as the portable kernel (pool.c); sums are in float here
 * (at most kh * kw terms) where pool.c sums in double. A row too wide for the buffer
 * goes to the portable kernel.
 *
 * NaN without a pre-scan: the reference's max skips NaN taps (a NaN is replaced by a
 * later number, a number never by a NaN) and gives NaN only when every valid tap is
 * NaN. vmaxps(v, acc) returns acc when either operand is NaN, so as long as acc is
 * never NaN the vector max skips NaN taps by itself: the buffer starts at -inf and the
 * first row enters it through the same max. A window whose taps were all NaN then
 * comes out -inf, as does a window of real -inf values or of padding only; those
 * outputs (one compare per 8 outputs finds them, and real data rarely has them) are
 * recomputed from the plane by the reference's rule (nr_pool_exact_max). */
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/pool_util.h"

#include <immintrin.h>
#include <math.h>

#define BUF 4096 /* floats of the row buffer (on the stack) */

/* acc op v; on a max tie the accumulator (the earlier value) stays, as in pool.c. */
static inline __m256 op8(bool max, __m256 acc, __m256 v) {
  return max ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
}

/* buf[pl + ix] = reduction over the valid window rows of x[iy][ix]; the rest keeps
 * the neutral value. Returns the number of valid rows. */
static int64_t reduce_rows(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                           int64_t oy, float *buf) {
  int64_t n = 0;
  float *b = buf + p->pl;
  for (int32_t ky = 0; ky < p->kh; ky++) {
    int64_t iy = oy * p->sh - p->pt + (int64_t)ky * p->dh;
    if (iy < 0 || iy >= ih)
      continue;
    const float *row = x + iy * iw;
    int64_t i = 0;
    if (n++ == 0 && !p->max) {
      for (; i + 8 <= iw; i += 8)
        _mm256_storeu_ps(b + i, _mm256_loadu_ps(row + i));
      for (; i < iw; i++)
        b[i] = row[i];
      continue;
    }
    if (n == 1) { /* max, first row: NaN becomes -inf (vmaxps returns -inf then) */
      __m256 lo = _mm256_set1_ps(-INFINITY);
      for (; i + 8 <= iw; i += 8)
        _mm256_storeu_ps(b + i, _mm256_max_ps(_mm256_loadu_ps(row + i), lo));
      for (; i < iw; i++)
        b[i] = row[i] > -INFINITY ? row[i] : -INFINITY;
      continue;
    }
    for (; i + 8 <= iw; i += 8)
      _mm256_storeu_ps(b + i, op8(p->max, _mm256_loadu_ps(b + i), _mm256_loadu_ps(row + i)));
    for (; i < iw; i++)
      b[i] = p->max ? (row[i] > b[i] ? row[i] : b[i]) : b[i] + row[i];
  }
  return n;
}

/* Elements b[0], b[2], ..., b[14]. */
static inline __m256 evens(const float *b) {
  __m256 t = _mm256_shuffle_ps(_mm256_loadu_ps(b), _mm256_loadu_ps(b + 8),
                               _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* out[ox] for ox in [o, o + 8): the kw buffer columns of each output reduced. */
static inline __m256 window8(const nr_pool2d *p, const float *buf, int64_t o) {
  const float *b = buf + o * p->sw;
  __m256 acc = p->sw == 1 ? _mm256_loadu_ps(b) : evens(b);
  for (int32_t kx = 1; kx < p->kw; kx++) {
    const float *c = b + (int64_t)kx * p->dw;
    acc = op8(p->max, acc, p->sw == 1 ? _mm256_loadu_ps(c) : evens(c));
  }
  return acc;
}

void nr_f32_pool2d__avx2(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                         float *y, int64_t oh, int64_t ow) {
  int64_t span = (ow + 8) * p->sw + (int64_t)(p->kw - 1) * p->dw + 16;
  if (p->pl < 0 || span > BUF || p->pl + iw + 16 > BUF || p->sw < 1) {
    nr_f32_pool2d__portable(p, x, ih, iw, y, oh, ow);
    return;
  }
  float buf[BUF] __attribute__((aligned(32)));
  float fill = p->max ? -INFINITY : 0.0f;
  int64_t len = span > p->pl + iw + 16 ? span : p->pl + iw + 16;
  for (int64_t i = 0; i < len; i++)
    buf[i] = fill;
  bool vec = p->sw == 1 || p->sw == 2;
  __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  for (int64_t oy = 0; oy < oh; oy++) {
    float *yr = y + oy * ow;
    if (reduce_rows(p, x, ih, iw, oy, buf) == 0)
      for (int64_t i = 0; i < iw; i++)
        buf[p->pl + i] = fill;
    int64_t o = 0;
    int ninf = 0; /* max: some output of the row is -inf (see the top of the file) */
    for (; vec && o + 8 <= ow; o += 8) {
      __m256 r = window8(p, buf, o);
      ninf |= _mm256_movemask_ps(_mm256_cmp_ps(r, neg_inf, _CMP_EQ_OQ));
      _mm256_storeu_ps(yr + o, r);
    }
    if (vec && o < ow) {
      __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(ow - o)), lanes);
      __m256 r = window8(p, buf, o);
      ninf |= _mm256_movemask_ps(_mm256_cmp_ps(r, neg_inf, _CMP_EQ_OQ)) &
              _mm256_movemask_ps(_mm256_castsi256_ps(m));
      _mm256_maskstore_ps(yr + o, m, r);
      o = ow;
    }
    for (; o < ow; o++) {
      yr[o] = nr_pool_window1(p, buf, o);
      ninf |= yr[o] == -INFINITY;
    }
    if (!p->max)
      nr_pool_average_row(p, yr, oy, ih, iw, ow);
    else if (ninf)
      for (int64_t i = 0; i < ow; i++)
        if (yr[i] == -INFINITY)
          yr[i] = nr_pool_exact_max(p, x, ih, iw, oy, i);
  }
}
