/* qukernel_avx512vnni_template.h - the one body of the AVX-512 VNNI int8 micro-kernels,
 * instantiated per tile by qgemm_ukernels__avx512vnni.c (define QUK_NAME, QUK_MR,
 * QUK_NV = nr / 16 and QUK_WA = 1 for W_A kernels, then include; the macros are
 * undefined at the end). UK_MR * UK_NV zmm accumulators of int32 (at most 24 of the
 * 32), UK_NV B vectors and one broadcast A word per k group of 4.
 *
 * vpdpbusd multiplies its first source as u8 and its second as s8, adding each group
 * of 4 products to an int32 lane without intermediate saturation, so u8 activations
 * may use all of [0, 255]. W_B kernels pass (broadcast A = u8 activations, B = s8
 * weights); W_A kernels (B = u8 activations, broadcast A = s8 weights), where gcc
 * folds the broadcast into the instruction's {1to16} memory operand.
 *
 * The last k block dequantizes in registers, (float)(acc - corr) * scale + bias per row
 * (W_A) or per column vector (W_B), adds the residual and clamps (ReLU, Clip) when the
 * flags ask (qgemm_impl.h), so C is written once as float. */
#include <immintrin.h>

#ifndef QUK_PF_STEPS
/* A is prefetched this many k groups ahead (the fp32 kernels' reason: an A block from
 * L3 otherwise stalls the loop). */
#define QUK_PF_STEPS 16
#endif

void QUK_NAME(int64_t kq, const void *restrict a_, const void *restrict b_,
              void *restrict c, int64_t ldc, int flags, const nr_qgemm_out *o) {
  const int32_t *a = a_;
  const char *b = b_;
  __m512i v[QUK_MR][QUK_NV];
#pragma GCC unroll 16
  for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++)
      v[i][j] = _mm512_setzero_si512();
#pragma GCC unroll 1
  for (int64_t p = 0; p < kq; p++, a += QUK_MR, b += 64 * QUK_NV) {
    __m512i bv[QUK_NV];
    _mm_prefetch((const char *)(a + QUK_MR * QUK_PF_STEPS), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++)
      bv[j] = _mm512_loadu_si512(b + 64 * j);
#pragma GCC unroll 16
    for (int i = 0; i < QUK_MR; i++) {
      __m512i av = _mm512_set1_epi32(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < QUK_NV; j++)
        v[i][j] = QUK_WA ? _mm512_dpbusd_epi32(v[i][j], bv[j], av)
                         : _mm512_dpbusd_epi32(v[i][j], av, bv[j]);
    }
  }
  int32_t *ci = c;
  if (flags & NR_QGEMM_ACC)
#pragma GCC unroll 16
    for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
      for (int j = 0; j < QUK_NV; j++)
        v[i][j] = _mm512_add_epi32(v[i][j], _mm512_loadu_si512(ci + i * ldc + 16 * j));
  if (!(flags & NR_QGEMM_FINAL)) {
#pragma GCC unroll 16
    for (int i = 0; i < QUK_MR; i++)
#pragma GCC unroll 4
      for (int j = 0; j < QUK_NV; j++)
        _mm512_storeu_si512(ci + i * ldc + 16 * j, v[i][j]);
    return;
  }
  float *cf = c;
  const __m512 lo = _mm512_set1_ps(o->lo), hi = _mm512_set1_ps(o->hi);
#if QUK_WA
#pragma GCC unroll 16
  for (int i = 0; i < QUK_MR; i++) {
    __m512i z = _mm512_set1_epi32(o->corr[i]);
    __m512 s = _mm512_set1_ps(o->scale[i]);
    __m512 o_ = _mm512_set1_ps(o->bias ? o->bias[i] : 0.0f);
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++) {
      __m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v[i][j], z)), s, o_);
#else
  __m512i z[QUK_NV];
  __m512 s[QUK_NV], o_[QUK_NV];
#pragma GCC unroll 4
  for (int j = 0; j < QUK_NV; j++) {
    z[j] = _mm512_loadu_si512(o->corr + 16 * j);
    s[j] = _mm512_loadu_ps(o->scale + 16 * j);
    o_[j] = o->bias ? _mm512_loadu_ps(o->bias + 16 * j) : _mm512_setzero_ps();
  }
#pragma GCC unroll 16
  for (int i = 0; i < QUK_MR; i++) {
#pragma GCC unroll 4
    for (int j = 0; j < QUK_NV; j++) {
      __m512 r =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v[i][j], z[j])), s[j], o_[j]);
#endif
      if (flags & NR_QGEMM_RES)
        r = _mm512_add_ps(r, _mm512_loadu_ps(o->res + i * o->ldr + 16 * j));
      if (flags & NR_QGEMM_RELU)
        r = _mm512_max_ps(r, _mm512_setzero_ps());
      else if (flags & NR_QGEMM_CLIP)
        r = _mm512_min_ps(hi, _mm512_max_ps(lo, r));
      _mm512_storeu_ps(cf + i * ldc + 16 * j, r);
    }
  }
}

#undef QUK_NAME
#undef QUK_MR
#undef QUK_NV
#undef QUK_WA
