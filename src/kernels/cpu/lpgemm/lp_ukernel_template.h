/* lp_ukernel_template.h - the one body of the narrow-B (fp16 / bf16 weight) micro-
 * kernels, AVX2 and AVX-512 alike, over the nr_vf_* helpers: lp_ukernels__<isa>.c
 * includes its ISA's kernels/cpu/simd/simd_<isa>.h, then per kernel defines UK_NAME,
 * UK_MR (6 or 12, or 1 for the single-row form) and UK_LOAD (a function widening one
 * B row of 2 * NR_VF_LANES values into two nr_vf), and includes this. The widening
 * stays per ISA (vcvtph2ps, or the bf16 shift and mask); only the loops are shared,
 * and both ISAs compile to their former separate templates' instructions.
 *
 * The tile form is the fp32 template's (ukernel_template.h: 2 * UK_MR accumulators,
 * A broadcast from fp32, A prefetched 32 k steps ahead on AVX-512 only) with the B
 * loads replaced by UK_LOAD; the single-row form unrolls k by 4 into 8 accumulators,
 * as the fp32 1x16 / 1x32 kernels do, because with one row the FMA latency chain
 * would bound it.
 *
 * The single-row form streams B from memory (batch-1 layers: no reuse) and prefetches
 * it PF_B_VALUES values (2 KiB) ahead, every cache line of the 4 k steps: measured
 * ~10% off a batch-1 1024x1024 Gemm whose weights come from DRAM (lowp_bench cold,
 * AVX-512), against 1 KiB and 4 KiB no better. */
#ifndef PF_B_VALUES
#define PF_B_VALUES 1024
#endif
#ifndef LP_PF_A_STEPS
#if NR_VF_LANES == 16
#define LP_PF_A_STEPS 32
#else
#define LP_PF_A_STEPS 0
#endif
#endif

#define LP_ROW (2 * NR_VF_LANES)   /* B values per k step */
#define LP_LINES (NR_VF_LANES / 4) /* 64-byte lines of B per 4 k steps */

void UK_NAME(int64_t k, const float *restrict a, const uint16_t *restrict b,
             float *restrict c, int64_t ldc, float alpha, int acc) {
#if UK_MR == 1
  nr_vf s[4][2];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++)
    s[u][0] = s[u][1] = nr_vf_zero();
  int64_t p = 0;
  for (; p + 4 <= k; p += 4, a += 4, b += 4 * LP_ROW) {
#pragma GCC unroll 4
    for (int u = 0; u < LP_LINES; u++)
      _mm_prefetch((const char *)(b + PF_B_VALUES + 32 * u), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      nr_vf bv[2], av = nr_vf_broadcast(a + u);
      UK_LOAD(b + LP_ROW * u, bv);
      s[u][0] = nr_vf_fma(av, bv[0], s[u][0]);
      s[u][1] = nr_vf_fma(av, bv[1], s[u][1]);
    }
  }
  for (; p < k; p++, a++, b += LP_ROW) {
    nr_vf bv[2], av = nr_vf_broadcast(a);
    UK_LOAD(b, bv);
    s[0][0] = nr_vf_fma(av, bv[0], s[0][0]);
    s[0][1] = nr_vf_fma(av, bv[1], s[0][1]);
  }
  nr_vf v[1][2];
  for (int j = 0; j < 2; j++)
    v[0][j] = nr_vf_add(nr_vf_add(s[0][j], s[1][j]), nr_vf_add(s[2][j], s[3][j]));
#else
  nr_vf v[UK_MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
    v[i][0] = v[i][1] = nr_vf_zero();
#pragma GCC unroll 1
  for (int64_t p = 0; p < k; p++, a += UK_MR, b += LP_ROW) {
    nr_vf bv[2];
    if (LP_PF_A_STEPS > 0)
      _mm_prefetch((const char *)(a + UK_MR * LP_PF_A_STEPS), _MM_HINT_T0);
    UK_LOAD(b, bv);
#pragma GCC unroll 16
    for (int i = 0; i < UK_MR; i++) {
      nr_vf av = nr_vf_broadcast(a + i);
      v[i][0] = nr_vf_fma(av, bv[0], v[i][0]);
      v[i][1] = nr_vf_fma(av, bv[1], v[i][1]);
    }
  }
#endif
  nr_vf va = nr_vf_set1(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
      float *cp = c + i * ldc + NR_VF_LANES * j;
      nr_vf r = acc ? nr_vf_fma(va, v[i][j], nr_vf_load(cp)) : nr_vf_mul(va, v[i][j]);
      nr_vf_store(cp, r);
    }
}

#undef UK_NAME
#undef UK_MR
#undef UK_LOAD
#undef LP_ROW
#undef LP_LINES
