/* pack__avx512.c - nr_gemm_pack_gather__avx512, gemm.c's panel_gather with zmm
 * registers (same arguments, the same output bit for bit: packing only moves
 * floats): A not transposed into mr-row panels, transposed B into nr-column panels
 * of up to 16. Called by gemm.c only when nr_cpu_isa() reports NR_ISA_AVX512.
 *
 * Per panel it reads 16 floats from each of up to 16 source rows, transposes the
 * 16 x 16 block in registers (unpack, unpack, two 128-bit lane shuffles: 64 shuffles
 * per 256 floats) and stores 16 output rows of `width` floats with a masked store.
 * Measured 2-5x the scalar loop's GB/s (which moves at most a float per cycle). The
 * other packing loop (panel_rows: contiguous runs) gained nothing from zmm copies
 * over the inlined fixed-size memcpy, so it has no twin here. */
#include "kernels/cpu/gemm/gemm_impl.h"

#include <immintrin.h>

/* The first n of 16 lanes (none for n <= 0). */
static inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* In-register transpose of 16 rows of 16 floats. */
static inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; j++) {
      __m512d a = _mm512_castps_pd(t[i + j]), b = _mm512_castps_pd(t[i + j + 2]);
      r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  /* r[4g + c] now holds, in its 128-bit lane L, column 4L + c of rows 4g..4g+3; the
   * lane shuffles gather lane L of r[c], r[4 + c], r[8 + c], r[12 + c] into row
   * 4L + c of the result. */
  /* 0x88: lanes 0, 2 of each source; 0xdd: lanes 1, 3 (immediates even at -O0) */
  for (int i = 0; i < 4; i++) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

void nr_gemm_pack_gather__avx512(const float *src, int64_t ld, int64_t kb, int64_t rows,
                                 int width, float *out) {
  __mmask16 wmask = lanes(width);
  for (int64_t i = 0; i < rows; i += width, out += width * kb) {
    int64_t h = rows - i < width ? rows - i : width;
    const float *s = src + i * ld;
    for (int64_t p = 0; p < kb; p += 16) {
      __mmask16 pm = lanes(kb - p);
      __m512 r[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; q++)
        r[q] = q < h ? _mm512_maskz_loadu_ps(pm, s + q * ld + p) : _mm512_setzero_ps();
      transpose16(r);
      int64_t np = kb - p < 16 ? kb - p : 16;
      for (int q = 0; q < np; q++)
        _mm512_mask_storeu_ps(out + (p + q) * width, wmask, r[q]);
    }
  }
}
