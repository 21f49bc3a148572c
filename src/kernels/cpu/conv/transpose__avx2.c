/* transpose__avx2.c - AVX2 versions of the reorder kernels of transpose.h.
 *
 * Key decision: one 8x8 register transpose (unpacklo/hi, shuffle, permute2f128: 24
 * shuffles for 64 floats) serves every tile; a tile at the matrix edge reads its
 * missing rows as zeros and its short rows through maskload, and writes its short rows
 * in plain 16-, 8- and 4-byte stores (nr_vf_store_first: AMD microcodes vmaskmovps
 * stores), so the edge costs a few instructions rather than a scalar loop,
 * and the 3-channel image input of a CNN (rows = 3) still moves 8 pixels at a time. */
#include "kernels/cpu/conv/transpose.h"
#include "kernels/cpu/simd/simd_avx2.h"

#include <immintrin.h>

static inline __m256i lane_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* r[k] <- column k of the 8x8 matrix whose rows are r[0..7]. */
static inline void tr8x8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

static inline void tile_full(const float *s, int64_t lds, float *d, int64_t ldd) {
  __m256 r[8];
  for (int k = 0; k < 8; k++)
    r[k] = _mm256_loadu_ps(s + k * lds);
  tr8x8(r);
  for (int k = 0; k < 8; k++)
    _mm256_storeu_ps(d + k * ldd, r[k]);
}

/* An edge tile: ib source rows of jb floats in, jb destination rows of lb lanes out
 * (lanes past ib are zero). */
static inline void tile_edge(const float *s, int64_t lds, float *d, int64_t ldd, int64_t ib,
                             int64_t jb, int64_t lb) {
  __m256 r[8];
  __m256i cm = lane_mask(jb);
  for (int k = 0; k < 8; k++)
    r[k] = k >= ib    ? _mm256_setzero_ps()
           : jb == 8 ? _mm256_loadu_ps(s + k * lds)
                     : _mm256_maskload_ps(s + k * lds, cm);
  tr8x8(r);
  for (int k = 0; k < jb; k++)
    nr_vf_store_first(d + k * ldd, r[k], lb);
}

void nr_f32_transpose__avx2(const float *src, int64_t lds, float *dst, int64_t ldd,
                            int64_t rows, int64_t cols, int64_t lanes) {
  for (int64_t j = 0; j < cols; j += 8) {
    int64_t jb = cols - j < 8 ? cols - j : 8;
    for (int64_t i = 0; i < lanes; i += 8) {
      int64_t ib = rows - i < 0 ? 0 : rows - i < 8 ? rows - i : 8;
      int64_t lb = lanes - i < 8 ? lanes - i : 8;
      const float *s = src + (ib ? i * lds + j : 0);
      if (ib == 8 && jb == 8 && lb == 8)
        tile_full(s, lds, dst + j * ldd + i, ldd);
      else
        tile_edge(s, lds, dst + j * ldd + i, ldd, ib, jb, lb);
    }
  }
}

void nr_f32_copy_lanes__avx2(const float *src, int64_t lds, float *dst, int64_t ldd,
                             int64_t rows, int64_t n, int64_t lanes) {
  if (n == 8 && lanes == 8) {
    for (int64_t r = 0; r < rows; r++)
      _mm256_storeu_ps(dst + r * ldd, _mm256_loadu_ps(src + r * lds));
    return;
  }
  for (int64_t l = 0; l < lanes; l += 8) {
    int64_t nb = n - l < 0 ? 0 : n - l < 8 ? n - l : 8;
    int64_t lb = lanes - l < 8 ? lanes - l : 8;
    __m256i nm = lane_mask(nb);
    for (int64_t r = 0; r < rows; r++) {
      __m256 v = nb == 8 ? _mm256_loadu_ps(src + r * lds + l)
                 : nb    ? _mm256_maskload_ps(src + r * lds + l, nm)
                         : _mm256_setzero_ps();
      nr_vf_store_first(dst + r * ldd + l, v, lb);
    }
  }
}
