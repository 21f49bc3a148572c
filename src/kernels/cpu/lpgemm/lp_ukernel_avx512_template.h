/* lp_ukernel_avx512_template.h - the one body of the AVX-512 narrow-B micro-kernels,
 * instantiated by lp_ukernels__avx512.c: define UK_NAME, UK_MR (12, or 1 for the
 * single-row form) and UK_LOAD (a function widening one 32-value B row into two zmm
 * registers), then include. The tile form is the fp32 template's (24 accumulators,
 * A broadcast from fp32, A prefetched 32 k steps ahead) with the B loads replaced by
 * UK_LOAD; the single-row form unrolls k by 4 into 8 accumulators, as the fp32 1x32
 * kernel does, because with one row the FMA latency chain would bound it.
 *
 * The single-row form streams B from memory (batch-1 layers: no reuse) and prefetches
 * it PF_B_VALUES values (2 KiB) ahead: measured ~10% off a batch-1 1024x1024 Gemm
 * whose weights come from DRAM (lowp_bench cold), against 1 KiB and 4 KiB no better. */
#ifndef PF_B_VALUES
#define PF_B_VALUES 1024
#endif

void UK_NAME(int64_t k, const float *restrict a, const uint16_t *restrict b,
             float *restrict c, int64_t ldc, float alpha, int acc) {
#if UK_MR == 1
  __m512 s[4][2];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++)
    s[u][0] = s[u][1] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 4 <= k; p += 4, a += 4, b += 128) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++)
      _mm_prefetch((const char *)(b + PF_B_VALUES + 32 * u), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      __m512 bv[2], av = _mm512_set1_ps(a[u]);
      UK_LOAD(b + 32 * u, bv);
      s[u][0] = _mm512_fmadd_ps(av, bv[0], s[u][0]);
      s[u][1] = _mm512_fmadd_ps(av, bv[1], s[u][1]);
    }
  }
  for (; p < k; p++, a++, b += 32) {
    __m512 bv[2], av = _mm512_set1_ps(a[0]);
    UK_LOAD(b, bv);
    s[0][0] = _mm512_fmadd_ps(av, bv[0], s[0][0]);
    s[0][1] = _mm512_fmadd_ps(av, bv[1], s[0][1]);
  }
  __m512 v[1][2];
  for (int j = 0; j < 2; j++)
    v[0][j] = _mm512_add_ps(_mm512_add_ps(s[0][j], s[1][j]), _mm512_add_ps(s[2][j], s[3][j]));
#else
  __m512 v[UK_MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
    v[i][0] = v[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 1
  for (int64_t p = 0; p < k; p++, a += UK_MR, b += 32) {
    __m512 bv[2];
    _mm_prefetch((const char *)(a + UK_MR * 32), _MM_HINT_T0);
    UK_LOAD(b, bv);
#pragma GCC unroll 16
    for (int i = 0; i < UK_MR; i++) {
      __m512 av = _mm512_set1_ps(a[i]);
      v[i][0] = _mm512_fmadd_ps(av, bv[0], v[i][0]);
      v[i][1] = _mm512_fmadd_ps(av, bv[1], v[i][1]);
    }
  }
#endif
  __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
      float *cp = c + i * ldc + 16 * j;
      __m512 r = acc ? _mm512_fmadd_ps(va, v[i][j], _mm512_loadu_ps(cp))
                     : _mm512_mul_ps(va, v[i][j]);
      _mm512_storeu_ps(cp, r);
    }
}

#undef UK_NAME
#undef UK_MR
#undef UK_LOAD
