/* ukernel_avx2_template.h - the one body of the AVX2/FMA broadcast micro-kernels,
 * instantiated per register tile by ukernel_<mr>x<nr>__avx2.c (define UK_NAME, UK_MR
 * and UK_NV = nr / 8, then include). The accumulators are a constant-size array that
 * gcc fully unrolls into UK_MR * UK_NV ymm registers; per k step the kernel loads
 * UK_NV vectors of B and broadcasts UK_MR floats of A. */
#include "kernels/cpu/gemm/gemm_impl.h"

#include <immintrin.h>

void UK_NAME(int64_t k, const float *restrict a, const float *restrict b,
             float *restrict c, int64_t ldc, float alpha, int acc) {
  __m256 v[UK_MR][UK_NV];
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++)
      v[i][j] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; p++) {
    __m256 bv[UK_NV];
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++)
      bv[j] = _mm256_loadu_ps(b + 8 * j);
#pragma GCC unroll 16
    for (int i = 0; i < UK_MR; i++) {
      __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 4
      for (int j = 0; j < UK_NV; j++)
        v[i][j] = _mm256_fmadd_ps(av, bv[j], v[i][j]);
    }
    a += UK_MR;
    b += 8 * UK_NV;
  }
  __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++) {
      float *cp = c + i * ldc + 8 * j;
      __m256 r = acc ? _mm256_fmadd_ps(va, v[i][j], _mm256_loadu_ps(cp))
                     : _mm256_mul_ps(va, v[i][j]);
      _mm256_storeu_ps(cp, r);
    }
}
