/* ukernel_template.h - the one body of the fp32 broadcast micro-kernels, AVX2 and
 * AVX-512 alike, written over the nr_vf_* helpers: a ukernel_<mr>x<nr>__<isa>.c file
 * includes its ISA's kernels/cpu/simd/simd_<isa>.h, defines UK_NAME, UK_MR and
 * UK_NV = nr / NR_VF_LANES, then includes this. The accumulators are a constant-size
 * array that gcc fully unrolls into UK_MR * UK_NV registers (AVX-512: at most 14 x 2 =
 * 28 of the 32 zmm, two hold the B row, one the broadcast A value); per k step the
 * kernel loads UK_NV vectors of B and broadcasts UK_MR floats of A (vbroadcastss, a
 * load-port micro-op). Both ISAs compile to the instructions their former separate
 * templates gave (objdump -d compared), so the same bits and speed.
 *
 * A is prefetched into L1 in the k loop on AVX-512 only (UK_PF_A_STEPS): without it,
 * products whose A block comes from L3 or memory (resnet's 512x49x4608: weights larger
 * than L2, few B panels to reuse them) ran at 100 GFLOP/s instead of 150 on the
 * 2.8 GHz Ice Lake (14x32). The AVX2 kernels never had it and were not re-tuned here.
 *
 * The k loop is deliberately not unrolled: with 28 live accumulators gcc 12 spills
 * the B row to the stack when it may hoist the next step's loads, and the loop
 * overhead (three adds and a branch per 28 FMAs) is hidden on a 4-wide core anyway.
 * Check `objdump -d` of a new tile for stack references in the loop. */
#include "kernels/cpu/gemm/gemm_impl.h"

/* A is prefetched this many k steps ahead (1.5 KiB for 12 rows at AVX-512), into the
 * next micro-panel near the end, which is the next one the loop nest runs. B's
 * micro-panel is reused from L1 across the ir loop and needs none. 0: no prefetch. */
#ifndef UK_PF_A_STEPS
#if NR_VF_LANES == 16
#define UK_PF_A_STEPS 32
#else
#define UK_PF_A_STEPS 0
#endif
#endif

void UK_NAME(int64_t k, const float *restrict a, const float *restrict b,
             float *restrict c, int64_t ldc, float alpha, int acc) {
  nr_vf v[UK_MR][UK_NV];
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++)
      v[i][j] = nr_vf_zero();
#pragma GCC unroll 1
  for (int64_t p = 0; p < k; p++, a += UK_MR, b += NR_VF_LANES * UK_NV) {
    nr_vf bv[UK_NV];
    if (UK_PF_A_STEPS > 0)
      _mm_prefetch((const char *)(a + UK_MR * UK_PF_A_STEPS), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++)
      bv[j] = nr_vf_load(b + NR_VF_LANES * j);
#pragma GCC unroll 16
    for (int i = 0; i < UK_MR; i++) {
      nr_vf av = nr_vf_broadcast(a + i);
#pragma GCC unroll 4
      for (int j = 0; j < UK_NV; j++)
        v[i][j] = nr_vf_fma(av, bv[j], v[i][j]);
    }
  }
  nr_vf va = nr_vf_set1(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < UK_NV; j++) {
      float *cp = c + i * ldc + NR_VF_LANES * j;
      nr_vf r = acc ? nr_vf_fma(va, v[i][j], nr_vf_load(cp)) : nr_vf_mul(va, v[i][j]);
      nr_vf_store(cp, r);
    }
}
