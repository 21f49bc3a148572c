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
 * recomputed from the plane by the reference's rule (nr_pool_exact_max).
 *
 * Windows 3 columns wide at column stride 1 or 2 (nr_pool2d_in_registers: resnet's
 * and squeezenet's 3x3/2) skip the buffer: its reloads straddle the stores just made, which
 * the core cannot forward, and bound the kernel (about 170 cycles an output row of a
 * 111-wide plane in L2). They run pool__avx512.c's method at 8 lanes (registers_row):
 * the rows reduced into vectors A, B, C, the taps being lanes of them (even and odd
 * lanes of (A, B) by shuffle and permute, and the even lanes moved down one with C's
 * first; at stride 1, (A, B) moved down one and two lanes by alignr across the
 * halves). Same reduction order, so the same bits.
 *
 * Why registers_row is not one body with pool__avx512.c's loop over the nr_vf_*
 * helpers (kernels/cpu/simd/): that version was written and gave the same bits and
 * nearly the same instructions (objdump: a dozen reordered, none added), yet measured
 * 6-8% slower here at stride 2 (3x3/2 max, 112x112 plane in L2, 9 interleaved runs:
 * 2.82 -> 2.98 us, 111x111: 2.66 -> 2.85; 3x3/1 5% faster), so both stay as written. */
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/pool_util.h"
#include "kernels/cpu/simd/simd_avx2.h"

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

/* ---- 3-wide windows in registers ----------------------------------------------- */

/* The first n lanes as a vector mask (n clamped to [0, 8]). */
static inline __m256i first_lanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Columns [c, c + 8) of the window's rows reduced, fill outside [0, iw). A block left
 * of the row (c = -1 or -2, the left padding) loads from column 0 and moves its lanes
 * up by -c. */
static inline __m256 column_block8(bool max, const float *const *rows, int n, int64_t c,
                                   int64_t iw, __m256 fill) {
  if (c >= iw)
    return fill;
  if (c >= 0 && c + 8 <= iw) { /* inside the row: plain loads */
    __m256 acc = fill;
    for (int r = 0; r < n; r++)
      acc = op8(max, acc, _mm256_loadu_ps(rows[r] + c));
    return acc;
  }
  int64_t c0 = c < 0 ? 0 : c, cnt = c < 0 ? (iw < 8 + c ? iw : 8 + c) : iw - c;
  __m256i m = first_lanes8(cnt);
  __m256 acc = fill;
  for (int r = 0; r < n; r++) {
    __m256 v = _mm256_blendv_ps(fill, _mm256_maskload_ps(rows[r] + c0, m),
                                _mm256_castsi256_ps(m));
    acc = op8(max, acc, v);
  }
  if (c < 0) { /* lane i takes lane i + c; the first -c lanes are fill */
    __m256i idx = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                   _mm256_set1_epi32((int)c));
    __m256 moved = _mm256_permutevar8x32_ps(acc, idx);
    acc = _mm256_blendv_ps(moved, fill, _mm256_castsi256_ps(first_lanes8(-c)));
  }
  return acc;
}

/* (a, b) moved down by one / two lanes: [a1 .. a7 b0], [a2 .. a7 b0 b1]. */
static inline __m256 down1(__m256 a, __m256 b) {
  __m256i ai = _mm256_castps_si256(a);
  __m256i t = _mm256_permute2x128_si256(ai, _mm256_castps_si256(b), 0x21);
  return _mm256_castsi256_ps(_mm256_alignr_epi8(t, ai, 4));
}
static inline __m256 down2(__m256 a, __m256 b) {
  __m256i ai = _mm256_castps_si256(a);
  __m256i t = _mm256_permute2x128_si256(ai, _mm256_castps_si256(b), 0x21);
  return _mm256_castsi256_ps(_mm256_alignr_epi8(t, ai, 8));
}

/* Output row yr of a 3-wide window from the valid input rows; returns whether some
 * output is -inf (a max). */
static bool registers_row(const nr_pool2d *p, const float *const *rows, int n, int64_t iw,
                          float *yr, int64_t ow) {
  bool max = p->max, s2 = p->sw == 2;
  __m256 fill = _mm256_set1_ps(max ? -INFINITY : 0.0f), neg_inf = _mm256_set1_ps(-INFINITY);
  __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
  int64_t c = -p->pl, step = s2 ? 16 : 8;
  int ninf = 0;
  __m256 a = column_block8(max, rows, n, c, iw, fill);
  for (int64_t o = 0; o < ow; o += 8, c += step) {
    __m256 b = column_block8(max, rows, n, c + 8, iw, fill), r;
    if (s2) {
      __m256 cc = column_block8(max, rows, n, c + 16, iw, fill);
      __m256 e = _mm256_castpd_ps(_mm256_permute4x64_pd(
          _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
          _MM_SHUFFLE(3, 1, 2, 0)));
      __m256 od = _mm256_castpd_ps(_mm256_permute4x64_pd(
          _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))),
          _MM_SHUFFLE(3, 1, 2, 0)));
      __m256 e2 = _mm256_blend_ps(_mm256_permutevar8x32_ps(e, next),
                                  _mm256_broadcastss_ps(_mm256_castps256_ps128(cc)), 0x80);
      r = op8(max, op8(max, e, od), e2);
      a = cc;
    } else {
      r = op8(max, op8(max, a, down1(a, b)), down2(a, b));
      a = b;
    }
    __m256i m = first_lanes8(ow - o);
    if (max)
      ninf |= _mm256_movemask_ps(_mm256_cmp_ps(r, neg_inf, _CMP_EQ_OQ)) &
              _mm256_movemask_ps(_mm256_castsi256_ps(m));
    nr_vf_store_first(yr + o, r, ow - o);
  }
  return ninf != 0;
}

void nr_f32_pool2d__avx2(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                         float *y, int64_t oh, int64_t ow) {
  int64_t span = (ow + 8) * p->sw + (int64_t)(p->kw - 1) * p->dw + 16;
  if (p->pl < 0 || span > BUF || p->pl + iw + 16 > BUF || p->sw < 1) {
    nr_f32_pool2d__portable(p, x, ih, iw, y, oh, ow);
    return;
  }
  if (nr_pool2d_in_registers(p)) {
    for (int64_t oy = 0; oy < oh; oy++) {
      const float *rows[16];
      int n = nr_pool_window_rows(p, x, ih, iw, oy, rows);
      float *yr = y + oy * ow;
      nr_pool_finish_row(p, x, ih, iw, oy, yr, ow, registers_row(p, rows, n, iw, yr, ow));
    }
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
      nr_vf_store_first(yr + o, r, ow - o);
      o = ow;
    }
    for (; o < ow; o++) {
      yr[o] = nr_pool_window1(p, buf, o);
      ninf |= yr[o] == -INFINITY;
    }
    nr_pool_finish_row(p, x, ih, iw, oy, yr, ow, ninf != 0);
  }
}
