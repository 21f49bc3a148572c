/* ukernel_avx512_template.h - the one body of the AVX-512F broadcast micro-kernels,
 * instantiated per register tile by ukernel_<mr>x<nr>__avx512.c (define UK_NAME, UK_MR
 * and UK_NV = nr / 16, then include). The accumulators are a constant-size array that
 * gcc fully unrolls into UK_MR * UK_NV zmm registers (at most 14 x 2 = 28 of the 32:
 * two hold the B row, one the broadcast A value); per k step the kernel loads UK_NV
 * vectors of B and broadcasts UK_MR floats of A (vbroadcastss, a load-port micro-op).
 *
 * A is prefetched into L1 in the k loop: without it, products whose A block comes
 * from L3 or memory (resnet's 512x49x4608: weights larger than L2, few B panels to
 * reuse them) ran at 100 GFLOP/s instead of 150 on the 2.8 GHz Ice Lake (14x32).
 *
 * The k loop is deliberately not unrolled: with 28 live accumulators gcc 12 spills
 * the B row to the stack when it may hoist the next step's loads, and the loop
 * overhead (three adds and a branch per 28 FMAs) is hidden on a 4-wide core anyway.
 * Check `objdump -d` of a new tile for stack references in the loop. */
#include "kernels/cpu/gemm/gemm_impl.h"

#include <immintrin.h>

/* A is prefetched this many k steps ahead (1.5 KiB for 12 rows), into the next
 * micro-panel near the end, which is the next one the loop nest runs. B's micro-panel
 * is reused from L1 across the ir loop and needs none. */
#define PF_A_STEPS 32

void UK_NAME(int64_t k, const float *restrict a, const float *restrict b,
             float *restrict c, int64_t ldc, float alpha, int acc) {
  __m512 v[UK_MR][UK_NV];
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++)
      v[i][j] = _mm512_setzero_ps();
#pragma GCC unroll 1
  for (int64_t p = 0; p < k; p++, a += UK_MR, b += 16 * UK_NV) {
    __m512 bv[UK_NV];
    _mm_prefetch((const char *)(a + UK_MR * PF_A_STEPS), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++)
      bv[j] = _mm512_loadu_ps(b + 16 * j);
#pragma GCC unroll 16
    for (int i = 0; i < UK_MR; i++) {
      __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < UK_NV; j++)
        v[i][j] = _mm512_fmadd_ps(av, bv[j], v[i][j]);
    }
  }
  __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++) {
      float *cp = c + i * ldc + 16 * j;
      __m512 r = acc ? _mm512_fmadd_ps(va, v[i][j], _mm512_loadu_ps(cp))
                     : _mm512_mul_ps(va, v[i][j]);
      _mm512_storeu_ps(cp, r);
    }
}
