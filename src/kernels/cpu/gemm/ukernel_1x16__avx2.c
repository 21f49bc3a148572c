/* ukernel_1x16__avx2.c - nr_f32_gemm_1x16__avx2, for single-row products (batch-1
 * fully connected layers, token-by-token transformers). With one row there is no A
 * reuse, so the kernel is bound by streaming B; k is unrolled by 4 into 8 independent
 * accumulators so the FMA latency chain does not limit it. */
#include "kernels/cpu/gemm/gemm_impl.h"

#include <immintrin.h>

void nr_f32_gemm_1x16__avx2(int64_t k, const float *restrict a, const float *restrict b,
                            float *restrict c, int64_t ldc, float alpha, int acc) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
  __m256 u0 = _mm256_setzero_ps(), u1 = _mm256_setzero_ps();
  __m256 w0 = _mm256_setzero_ps(), w1 = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 4 <= k; p += 4, a += 4, b += 64) {
    __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + 1);
    __m256 a2 = _mm256_broadcast_ss(a + 2), a3 = _mm256_broadcast_ss(a + 3);
    s0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b), s0);
    s1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + 8), s1);
    t0 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + 16), t0);
    t1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + 24), t1);
    u0 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b + 32), u0);
    u1 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b + 40), u1);
    w0 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b + 48), w0);
    w1 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b + 56), w1);
  }
  for (; p < k; p++, a++, b += 16) {
    __m256 a0 = _mm256_broadcast_ss(a);
    s0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b), s0);
    s1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + 8), s1);
  }
  s0 = _mm256_add_ps(_mm256_add_ps(s0, t0), _mm256_add_ps(u0, w0));
  s1 = _mm256_add_ps(_mm256_add_ps(s1, t1), _mm256_add_ps(u1, w1));
  __m256 va = _mm256_set1_ps(alpha);
  if (acc) {
    s0 = _mm256_fmadd_ps(va, s0, _mm256_loadu_ps(c));
    s1 = _mm256_fmadd_ps(va, s1, _mm256_loadu_ps(c + 8));
  } else {
    s0 = _mm256_mul_ps(va, s0);
    s1 = _mm256_mul_ps(va, s1);
  }
  _mm256_storeu_ps(c, s0);
  _mm256_storeu_ps(c + 8, s1);
}
