/* pool__avx512.c - AVX-512 2-D MaxPool / AveragePool over one PLAIN NCHW plane for
 * windows 3 columns wide (dilation 1) at column stride 1 or 2: resnet's and
 * squeezenet's 3x3/2 max pools, 3x3/1 pools. Compiled with the AVX-512 flags; called
 * only after nr_cpu_isa() reported NR_ISA_AVX512. Other windows go to the AVX2 kernel.
 *
 * Key decision: no row buffer. The buffer method (pool__avx2.c's, now only for other
 * windows) reduces a window's rows into a buffer and reads it back with unaligned
 * loads straddling the stores just made, which the core cannot forward: a 3x3/2 plane
 * of 111x111 took 3.4 us with the data in L2 (about 170 cycles an output row). Here
 * one pass does both directions in registers: for 16
 * outputs, the rows' columns are reduced into three vectors A, B, C (C becomes the
 * next block's A), and the three taps of each output are lanes of them: at stride 2
 * the even and odd lanes of (A, B) (vpermt2ps) and the even lanes shifted by one
 * (valignd with C); at stride 1, (A, B) shifted by one and by two. Columns outside the
 * input are masked loads that read the neutral value, so padding needs no branches.
 *
 * The NaN rule and the tie rule are pool__avx2.c's: a reduction starts from the
 * neutral value through the same vmaxps, so a NaN tap never enters it; outputs that
 * come out -inf are recomputed by the reference's rule; rows are reduced in window
 * order, then columns, as the AVX2 kernel does, so both give the same bits.
 *
 * Written twice, not once over the nr_vf_* helpers: see the end of pool__avx2.c's
 * opening comment (the shared version measured slower on AVX2). */
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/pool_util.h"

#include <immintrin.h>
#include <math.h>

/* acc op v; on a max tie the accumulator (the earlier value) stays, as in pool.c. */
static inline __m512 op16(bool max, __m512 acc, __m512 v) {
  return max ? _mm512_max_ps(v, acc) : _mm512_add_ps(acc, v);
}

/* The first n lanes. */
static inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* Columns [c, c + 16) of the window's rows reduced, fill where a column is outside
 * [0, iw). Loads start inside the row: a block that begins left of it (c = -1 or -2,
 * the left padding) loads from column 0 and moves its lanes up by -c. */
static inline __m512 column_block(bool max, const float *const *rows, int n, int64_t c,
                                  int64_t iw, __m512 fill) {
  if (c >= iw)
    return fill;
  if (c >= 0 && c + 16 <= iw) { /* inside the row: plain loads */
    __m512 acc = fill;
    for (int r = 0; r < n; r++)
      acc = op16(max, acc, _mm512_loadu_ps(rows[r] + c));
    return acc;
  }
  int64_t c0 = c < 0 ? 0 : c;
  __mmask16 m = first_lanes(c < 0 ? (iw < 16 + c ? iw : 16 + c) : iw - c);
  __m512 acc = fill;
  for (int r = 0; r < n; r++)
    acc = op16(max, acc, _mm512_mask_loadu_ps(fill, m, rows[r] + c0));
  __m512i ai = _mm512_castps_si512(acc), fi = _mm512_castps_si512(fill);
  if (c == -1)
    return _mm512_castsi512_ps(_mm512_alignr_epi32(ai, fi, 15));
  if (c == -2)
    return _mm512_castsi512_ps(_mm512_alignr_epi32(ai, fi, 14));
  return acc;
}

void nr_f32_pool2d__avx512(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                           float *y, int64_t oh, int64_t ow) {
  if (!nr_pool2d_in_registers(p)) {
    nr_f32_pool2d__avx2(p, x, ih, iw, y, oh, ow);
    return;
  }
  bool max = p->max, s2 = p->sw == 2;
  __m512 fill = _mm512_set1_ps(max ? -INFINITY : 0.0f), neg_inf = _mm512_set1_ps(-INFINITY);
  __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int64_t step = s2 ? 32 : 16; /* input columns per 16 outputs */
  for (int64_t oy = 0; oy < oh; oy++) {
    const float *rows[16];
    int n = nr_pool_window_rows(p, x, ih, iw, oy, rows);
    float *yr = y + oy * ow;
    __mmask16 ninf = 0;
    int64_t c = -p->pl; /* first input column of output 0's window */
    __m512 a = column_block(max, rows, n, c, iw, fill);
    for (int64_t o = 0; o < ow; o += 16, c += step) {
      __m512 b = column_block(max, rows, n, c + 16, iw, fill), r;
      if (s2) {
        __m512 cc = column_block(max, rows, n, c + 32, iw, fill);
        __m512 e = _mm512_permutex2var_ps(a, even, b);
        r = op16(max, e, _mm512_permutex2var_ps(a, odd, b));
        r = op16(max, r, _mm512_castsi512_ps(_mm512_alignr_epi32(
                             _mm512_castps_si512(cc), _mm512_castps_si512(e), 1)));
        a = cc;
      } else {
        __m512i ai = _mm512_castps_si512(a), bi = _mm512_castps_si512(b);
        r = op16(max, a, _mm512_castsi512_ps(_mm512_alignr_epi32(bi, ai, 1)));
        r = op16(max, r, _mm512_castsi512_ps(_mm512_alignr_epi32(bi, ai, 2)));
        a = b;
      }
      __mmask16 m = (__mmask16)(ow - o >= 16 ? 0xFFFF : (1u << (ow - o)) - 1);
      if (max)
        ninf |= _mm512_mask_cmp_ps_mask(m, r, neg_inf, _CMP_EQ_OQ);
      _mm512_mask_storeu_ps(yr + o, m, r);
    }
    nr_pool_finish_row(p, x, ih, iw, oy, yr, ow, ninf != 0);
  }
}
