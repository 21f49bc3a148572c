/* lp_ukernels_portable.c - the portable narrow-B micro-kernels (any C17 compiler):
 * each k step widens the B row with the scalar definitions of lpgemm.h into a small
 * float row, then runs the fp32 portable kernel's loops on it, which gcc vectorizes
 * for the baseline ISA. The fallback every machine runs, and the kernels the ISA
 * ones are tested beside. Natural column order (no interleaving). */
#include "kernels/cpu/lpgemm/lpgemm_impl.h"

#define PORTABLE_LP_UKERNEL(NAME, MR, NR, WIDEN)                                        \
  void NAME(int64_t k, const float *restrict a, const uint16_t *restrict b,           \
            float *restrict c, int64_t ldc, float alpha, int acc) {                   \
    float v[MR][NR] = {{0}};                                                           \
    for (int64_t p = 0; p < k; p++, a += MR, b += NR) {                                \
      float bw[NR];                                                                    \
      for (int j = 0; j < NR; j++)                                                     \
        bw[j] = WIDEN(b[j]);                                                           \
      for (int i = 0; i < MR; i++)                                                     \
        for (int j = 0; j < NR; j++)                                                   \
          v[i][j] += a[i] * bw[j];                                                     \
    }                                                                                  \
    for (int i = 0; i < MR; i++)                                                       \
      for (int j = 0; j < NR; j++)                                                     \
        c[i * ldc + j] = acc ? c[i * ldc + j] + alpha * v[i][j] : alpha * v[i][j];     \
  }

PORTABLE_LP_UKERNEL(nr_f16w_gemm_4x8, 4, 8, nr_fp16_to_fp32)
PORTABLE_LP_UKERNEL(nr_f16w_gemm_1x8, 1, 8, nr_fp16_to_fp32)
PORTABLE_LP_UKERNEL(nr_bf16w_gemm_4x8, 4, 8, nr_bf16_to_fp32)
PORTABLE_LP_UKERNEL(nr_bf16w_gemm_1x8, 1, 8, nr_bf16_to_fp32)
