/* qim2col__avx512.c - segments of the u8 im2col rows (qconv.c) with zmm registers, 64
 * output columns per step: a masked load of the valid input bytes (stride 1), or of
 * 16-bit words narrowed to their low bytes (stride 2: the even bytes), blended over
 * the zero point and stored under the segment's mask. Masked-off lanes touch no
 * memory; a stride-2 word may read the byte after a row's last valid one, which lies
 * inside the quantized image or right after it in the step's scratch. A resnet row of
 * 56, 28, 14 or 7 pixels thus costs a handful of instructions, written into the GEMM's
 * staging area in L1. Where the output rows are as wide as the input's (stride 1,
 * "same" padding: every stride-1 3x3 of resnet and mobilenet) a tap's whole row is
 * the input plane shifted by a constant, so 64 pixels of any number of output rows
 * take one masked load, its mask read from the table prepare() stored in the engine
 * (nr_qconv_masks). Called only where nr_cpu_isa() has NR_ISA_AVX512. */
#include "kernels/cpu/qgemm/qgemm_tactic.h"

#include <immintrin.h>

/* Lanes [from, to) of 64 (either end may lie outside). */
static inline __mmask64 range64(int64_t from, int64_t to) {
  if (to <= from || to <= 0 || from >= 64)
    return 0;
  __mmask64 hi = to >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << to) - 1);
  __mmask64 lo = from <= 0 ? 0 : (((__mmask64)1 << from) - 1);
  return hi & ~lo;
}

/* One output row at d from input row xr (NULL: all padding), with the column masks
 * for up to 64 output columns per step precomputed by the caller when ow <= 64. */
static inline void row64(uint8_t *d, const uint8_t *xr, __mmask64 v, __mmask64 st, int sw,
                         __m512i z) {
  __m512i x;
  if (!xr)
    v = 0;
  if (!v) {
    x = z;
  } else if (sw == 1) {
    x = _mm512_maskz_loadu_epi8(v, xr);
  } else {
    __m256i a = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi16((__mmask32)v, xr));
    __m256i b =
        _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi16((__mmask32)(v >> 32), xr + 64));
    x = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  }
  _mm512_mask_storeu_epi8(d, st, _mm512_mask_blend_epi8(v, z, x));
}

void nr_qconv_col_seg__avx512(uint8_t *out, const uint8_t *xr, int64_t lo, int64_t hi,
                              int64_t a, int64_t b, int sw, uint8_t zp) {
  const __m512i z = _mm512_set1_epi8((char)zp);
  for (int64_t c0 = a; c0 < b; c0 += 64) {
    __mmask64 st = range64(0, b - c0), v = xr ? range64(lo - c0, hi - c0) & st : 0;
    row64(out + (c0 - a), xr ? xr + c0 * sw : NULL, v, st, sw, z);
  }
}

void nr_qconv_col_masked__avx512(uint8_t *out, const uint8_t *x, const uint64_t *masks,
                                 int64_t p0, int64_t n, uint8_t zp) {
  const __m512i z = _mm512_set1_epi8((char)zp);
  for (int64_t p = p0, end = p0 + n; p < end;) {
    int64_t off = p & 63, len = 64 - off < end - p ? 64 - off : end - p;
    __mmask64 st = range64(0, len), m = (masks[p >> 6] >> off) & st;
    __m512i v = _mm512_maskz_loadu_epi8(m, x + p);
    _mm512_mask_storeu_epi8(out + (p - p0), st, _mm512_mask_blend_epi8(m, z, v));
    p += len;
  }
}
