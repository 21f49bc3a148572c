/* qpack__avx512.c - the activation packers of the int8 GEMM with zmm registers
 * (declared in qgemm_impl.h; called only where nr_cpu_isa() has NR_ISA_AVX512):
 * quantizing a row of floats to u8, and packing a k-major block (rows along k, the
 * tile dimension contiguous: conv's B, a transposed A) into 4-byte k groups.
 *
 * Quantization gives nr_qgemm_quantize_x's bytes in fewer operations: it clamps
 * x * inv_scale to [-zero_point, qmax - zero_point] first (integers, so clamping and
 * rounding commute; vmaxps returns its second operand on NaN, which becomes 0 as in
 * the scalar definition), converts with round-to-nearest-even (the MXCSR default,
 * like nearbyintf) and adds the zero point as an integer. A k group of 4 rows becomes
 * 16 words per step with two saturating packs to bytes and one in-lane byte shuffle.
 *
 * Kept apart from qpack__avx2.c: the block tails are byte-masked loads and stores
 * here and a zero-padded copy there (AVX2 has no byte masks), and the integer
 * packs are not covered by the float nr_vf_* helpers. */
#include "kernels/cpu/qgemm/qgemm_impl.h"

#include <immintrin.h>

typedef struct qconst {
  __m512 inv, lo, hi;
  __m512i zp;
} qconst;

static inline qconst qconst_of(float inv_scale, int32_t zero_point, int32_t qmax) {
  return (qconst){_mm512_set1_ps(inv_scale), _mm512_set1_ps((float)-zero_point),
                  _mm512_set1_ps((float)(qmax - zero_point)),
                  _mm512_set1_epi32(zero_point)};
}

/* Lanes outside k come out 0. */
static inline __m512i quant16(__mmask16 k, __m512 x, const qconst *c) {
  __m512 f = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x, c->inv), c->lo), c->hi);
  return _mm512_maskz_add_epi32(k, _mm512_cvtps_epi32(f), c->zp);
}

static inline __mmask16 tail16(int64_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

void nr_qgemm_quantize_row__avx512(const float *x, int64_t n, float inv_scale,
                                   int32_t zero_point, int32_t qmax, uint8_t *out) {
  const qconst c = qconst_of(inv_scale, zero_point, qmax);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128((__m128i *)(out + i),
                     _mm512_cvtepi32_epi8(quant16(0xffff, _mm512_loadu_ps(x + i), &c)));
  if (i < n) {
    __mmask16 k = tail16(n - i);
    _mm512_mask_cvtepi32_storeu_epi8(out + i, k,
                                     quant16(k, _mm512_maskz_loadu_ps(k, x + i), &c));
  }
}

/* Words (q0[j] | q1[j] << 8 | q2[j] << 16 | q3[j] << 24) of four vectors of 16 values
 * in [0, 255]: the packs leave each 128-bit lane as q0[4 of them], q1[...], q2, q3,
 * and the shuffle interleaves them. */
static inline __m512i word4(__m512i q0, __m512i q1, __m512i q2, __m512i q3) {
  const __m512i order = _mm512_set4_epi32(0x0f0b0703, 0x0e0a0602, 0x0d090501, 0x0c080400);
  __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(q0, q1), _mm512_packus_epi32(q2, q3));
  return _mm512_shuffle_epi8(b, order);
}

/* Where the 16 words of columns [t, t + 16) of group q go. */
static inline uint8_t *dst_of(uint8_t *out, int64_t t, int64_t q, int width, int64_t kq) {
  return out + (t / width) * width * kq * 4 + (q * width + t % width) * 4;
}

void nr_qgemm_pack_kmajor_f32__avx512(const float *src, int64_t ld, int64_t kb,
                                      int64_t cols, int width, float inv_scale,
                                      int32_t zero_point, int32_t qmax, uint8_t *out) {
  const qconst c = qconst_of(inv_scale, zero_point, qmax);
  int64_t kq = (kb + 3) / 4, tpad = (cols + width - 1) / width * width;
  for (int64_t q = 0; q < kq; q++) {
    const float *r = src + 4 * q * ld;
    int rows = kb - 4 * q >= 4 ? 4 : (int)(kb - 4 * q);
    for (int64_t t = 0; t < tpad; t += 16) {
      __mmask16 k = t < cols ? tail16(cols - t) : 0;
      __m512i w[4];
      for (int u = 0; u < 4; u++)
        w[u] = u < rows ? quant16(k, _mm512_maskz_loadu_ps(k, r + u * ld + t), &c)
                        : _mm512_setzero_si512();
      _mm512_storeu_si512(dst_of(out, t, q, width, kq), word4(w[0], w[1], w[2], w[3]));
    }
  }
}

void nr_qgemm_pack_quad_u8__avx512(const uint8_t *r, int64_t ld, int rows, int64_t cols,
                                   int width, int64_t kq, int64_t q, uint8_t *out) {
  int64_t tpad = (cols + width - 1) / width * width;
  for (int64_t t = 0; t < tpad; t += 16) {
    __mmask16 k = t < cols ? tail16(cols - t) : 0;
    __m512i w[4];
    for (int u = 0; u < 4; u++)
      w[u] = u < rows ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, r + u * ld + t))
                      : _mm512_setzero_si512();
    _mm512_storeu_si512(dst_of(out, t, q, width, kq), word4(w[0], w[1], w[2], w[3]));
  }
}

void nr_qgemm_pack_kmajor_u8__avx512(const uint8_t *src, int64_t ld, int64_t kb,
                                     int64_t cols, int width, uint8_t *out) {
  int64_t kq = (kb + 3) / 4;
  for (int64_t q = 0; q < kq; q++)
    nr_qgemm_pack_quad_u8__avx512(src + 4 * q * ld, ld,
                                  kb - 4 * q >= 4 ? 4 : (int)(kb - 4 * q), cols, width, kq,
                                  q, out);
}
