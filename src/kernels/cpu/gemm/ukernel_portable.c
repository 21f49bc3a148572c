/* ukernel_portable.c - the portable micro-kernels (any C17 compiler, no intrinsics):
 * fixed-size accumulator arrays whose inner loop runs along nr contiguous floats, so
 * gcc vectorizes them for the baseline ISA (SSE2 on x86-64, NEON on arm64). They are
 * the fallback every machine can run and the reference the ISA kernels are tested
 * beside. */
#include "kernels/cpu/gemm/gemm_impl.h"

#define PORTABLE_UKERNEL(NAME, MR, NR)                                                  \
  void NAME(int64_t k, const float *restrict a, const float *restrict b,              \
            float *restrict c, int64_t ldc, float alpha, int acc) {                   \
    float v[MR][NR] = {{0}};                                                           \
    for (int64_t p = 0; p < k; p++, a += MR, b += NR)                                  \
      for (int i = 0; i < MR; i++)                                                     \
        for (int j = 0; j < NR; j++)                                                   \
          v[i][j] += a[i] * b[j];                                                      \
    for (int i = 0; i < MR; i++)                                                       \
      for (int j = 0; j < NR; j++)                                                     \
        c[i * ldc + j] = acc ? c[i * ldc + j] + alpha * v[i][j] : alpha * v[i][j];     \
  }

PORTABLE_UKERNEL(nr_f32_gemm_4x8, 4, 8)
PORTABLE_UKERNEL(nr_f32_gemm_1x8, 1, 8)
