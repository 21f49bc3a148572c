/* qpack__avx2.c - the activation packers of the int8 GEMM with ymm registers (declared
 * in qgemm_impl.h; called where nr_cpu_isa() has NR_ISA_AVX2 but not NR_ISA_AVX512):
 * quantizing a row of floats to u8, and packing k-major blocks (float32 quantized, or
 * u8) into 4-byte k groups, 8 columns per step; a block's last partial step goes
 * through a zero-padded copy, since AVX2 has no byte masks.
 *
 * Quantization and the word interleave are qpack__avx512.c's (clamp, convert, add the
 * zero point; two packs and a byte shuffle), so every path gives the bytes of
 * nr_qgemm_quantize_x. */
#include "kernels/cpu/qgemm/qgemm_impl.h"

#include <immintrin.h>
#include <string.h>

typedef struct qconst {
  __m256 inv, lo, hi;
  __m256i zp;
} qconst;

static inline qconst qconst_of(float inv_scale, int32_t zero_point, int32_t qmax) {
  return (qconst){_mm256_set1_ps(inv_scale), _mm256_set1_ps((float)-zero_point),
                  _mm256_set1_ps((float)(qmax - zero_point)),
                  _mm256_set1_epi32(zero_point)};
}

static inline __m256i quant8(__m256 x, const qconst *c) {
  __m256 f = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(x, c->inv), c->lo), c->hi);
  return _mm256_add_epi32(_mm256_cvtps_epi32(f), c->zp);
}

void nr_qgemm_quantize_row__avx2(const float *x, int64_t n, float inv_scale,
                                 int32_t zero_point, int32_t qmax, uint8_t *out) {
  const qconst c = qconst_of(inv_scale, zero_point, qmax);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = quant8(_mm256_loadu_ps(x + i), &c);
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)(out + i), _mm_packus_epi16(w, w));
  }
  for (; i < n; i++)
    out[i] = nr_qgemm_quantize_x(x[i], inv_scale, zero_point, qmax);
}

static inline __m256i word4(const __m256i q[4]) {
  const __m256i order =
      _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1,
                       5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  __m256i b =
      _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
  return _mm256_shuffle_epi8(b, order);
}

/* Where the 8 words of columns [t, t + 8) of group q go. */
static inline uint8_t *dst_of(uint8_t *out, int64_t t, int64_t q, int width, int64_t kq) {
  return out + (t / width) * width * kq * 4 + (q * width + t % width) * 4;
}

void nr_qgemm_pack_kmajor_f32__avx2(const float *src, int64_t ld, int64_t kb, int64_t cols,
                                    int width, float inv_scale, int32_t zero_point,
                                    int32_t qmax, uint8_t *out) {
  const qconst c = qconst_of(inv_scale, zero_point, qmax);
  int64_t kq = (kb + 3) / 4, tpad = (cols + width - 1) / width * width;
  for (int64_t q = 0; q < kq; q++) {
    const float *r = src + 4 * q * ld;
    int rows = kb - 4 * q >= 4 ? 4 : (int)(kb - 4 * q);
    for (int64_t t = 0; t < tpad; t += 8) {
      __m256i w[4];
      for (int u = 0; u < 4; u++) {
        if (u >= rows || t >= cols) {
          w[u] = _mm256_setzero_si256();
        } else if (t + 8 <= cols) {
          w[u] = quant8(_mm256_loadu_ps(r + u * ld + t), &c);
        } else { /* the block's last columns: zero past them */
          float tmp[8] = {0};
          memcpy(tmp, r + u * ld + t, sizeof(float) * (size_t)(cols - t));
          int32_t keep[8];
          for (int l = 0; l < 8; l++)
            keep[l] = t + l < cols ? -1 : 0;
          w[u] = _mm256_and_si256(quant8(_mm256_loadu_ps(tmp), &c),
                                  _mm256_loadu_si256((const __m256i *)keep));
        }
      }
      _mm256_storeu_si256((__m256i *)dst_of(out, t, q, width, kq), word4(w));
    }
  }
}

void nr_qgemm_pack_quad_u8__avx2(const uint8_t *r, int64_t ld, int rows, int64_t cols,
                                 int width, int64_t kq, int64_t q, uint8_t *out) {
  int64_t tpad = (cols + width - 1) / width * width;
  for (int64_t t = 0; t < tpad; t += 8) {
    __m256i w[4];
    for (int u = 0; u < 4; u++) {
      uint64_t b = 0;
      if (u < rows && t < cols)
        memcpy(&b, r + u * ld + t, (size_t)(t + 8 <= cols ? 8 : cols - t));
      w[u] = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)b));
    }
    _mm256_storeu_si256((__m256i *)dst_of(out, t, q, width, kq), word4(w));
  }
}

void nr_qgemm_pack_kmajor_u8__avx2(const uint8_t *src, int64_t ld, int64_t kb, int64_t cols,
                                   int width, uint8_t *out) {
  int64_t kq = (kb + 3) / 4;
  for (int64_t q = 0; q < kq; q++)
    nr_qgemm_pack_quad_u8__avx2(src + 4 * q * ld, ld,
                                kb - 4 * q >= 4 ? 4 : (int)(kb - 4 * q), cols, width, kq, q,
                                out);
}
