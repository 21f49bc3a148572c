/* ukernel_1x32__avx512.c - nr_f32_gemm_1x32__avx512, for single-row products (batch-1
 * fully connected layers, token-by-token transformers): the AVX-512 twin of
 * ukernel_1x16__avx2.c. With one row there is no A reuse, so the kernel streams B
 * (two cache lines per k step); k is unrolled by 4 into 8 independent accumulators so
 * the 4-cycle FMA latency does not bound it. */
#include "kernels/cpu/gemm/gemm_impl.h"

#include <immintrin.h>

void nr_f32_gemm_1x32__avx512(int64_t k, const float *restrict a, const float *restrict b,
                              float *restrict c, int64_t ldc, float alpha, int acc) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  __m512 t0 = _mm512_setzero_ps(), t1 = _mm512_setzero_ps();
  __m512 u0 = _mm512_setzero_ps(), u1 = _mm512_setzero_ps();
  __m512 w0 = _mm512_setzero_ps(), w1 = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 4 <= k; p += 4, a += 4, b += 128) {
    __m512 a0 = _mm512_set1_ps(a[0]), a1 = _mm512_set1_ps(a[1]);
    __m512 a2 = _mm512_set1_ps(a[2]), a3 = _mm512_set1_ps(a[3]);
    s0 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b), s0);
    s1 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b + 16), s1);
    t0 = _mm512_fmadd_ps(a1, _mm512_loadu_ps(b + 32), t0);
    t1 = _mm512_fmadd_ps(a1, _mm512_loadu_ps(b + 48), t1);
    u0 = _mm512_fmadd_ps(a2, _mm512_loadu_ps(b + 64), u0);
    u1 = _mm512_fmadd_ps(a2, _mm512_loadu_ps(b + 80), u1);
    w0 = _mm512_fmadd_ps(a3, _mm512_loadu_ps(b + 96), w0);
    w1 = _mm512_fmadd_ps(a3, _mm512_loadu_ps(b + 112), w1);
  }
  for (; p < k; p++, a++, b += 32) {
    __m512 a0 = _mm512_set1_ps(a[0]);
    s0 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b), s0);
    s1 = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b + 16), s1);
  }
  s0 = _mm512_add_ps(_mm512_add_ps(s0, t0), _mm512_add_ps(u0, w0));
  s1 = _mm512_add_ps(_mm512_add_ps(s1, t1), _mm512_add_ps(u1, w1));
  __m512 va = _mm512_set1_ps(alpha);
  if (acc) {
    s0 = _mm512_fmadd_ps(va, s0, _mm512_loadu_ps(c));
    s1 = _mm512_fmadd_ps(va, s1, _mm512_loadu_ps(c + 16));
  } else {
    s0 = _mm512_mul_ps(va, s0);
    s1 = _mm512_mul_ps(va, s1);
  }
  _mm512_storeu_ps(c, s0);
  _mm512_storeu_ps(c + 16, s1);
}
