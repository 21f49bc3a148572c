/* lp_ukernel_avx2_template.h - the one body of the AVX2 narrow-B micro-kernels,
 * instantiated by lp_ukernels__avx2.c: define UK_NAME, UK_MR (6, or 1 for the
 * single-row form) and UK_LOAD (a function widening one 16-value B row into two ymm
 * registers), then include. The tile form is the fp32 AVX2 template's (12 ymm
 * accumulators, A broadcast from fp32); the single-row form unrolls k by 4 into 8
 * accumulators against the FMA latency chain and prefetches the B stream 2 KiB ahead
 * (as the AVX-512 one). */
#ifndef PF_B_VALUES
#define PF_B_VALUES 1024
#endif

void UK_NAME(int64_t k, const float *restrict a, const uint16_t *restrict b,
             float *restrict c, int64_t ldc, float alpha, int acc) {
#if UK_MR == 1
  __m256 s[4][2];
#pragma GCC unroll 4
  for (int u = 0; u < 4; u++)
    s[u][0] = s[u][1] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 4 <= k; p += 4, a += 4, b += 64) {
    _mm_prefetch((const char *)(b + PF_B_VALUES), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + PF_B_VALUES + 32), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
      __m256 bv[2], av = _mm256_broadcast_ss(a + u);
      UK_LOAD(b + 16 * u, bv);
      s[u][0] = _mm256_fmadd_ps(av, bv[0], s[u][0]);
      s[u][1] = _mm256_fmadd_ps(av, bv[1], s[u][1]);
    }
  }
  for (; p < k; p++, a++, b += 16) {
    __m256 bv[2], av = _mm256_broadcast_ss(a);
    UK_LOAD(b, bv);
    s[0][0] = _mm256_fmadd_ps(av, bv[0], s[0][0]);
    s[0][1] = _mm256_fmadd_ps(av, bv[1], s[0][1]);
  }
  __m256 v[1][2];
  for (int j = 0; j < 2; j++)
    v[0][j] = _mm256_add_ps(_mm256_add_ps(s[0][j], s[1][j]), _mm256_add_ps(s[2][j], s[3][j]));
#else
  __m256 v[UK_MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
    v[i][0] = v[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; p++, a += UK_MR, b += 16) {
    __m256 bv[2];
    UK_LOAD(b, bv);
#pragma GCC unroll 16
    for (int i = 0; i < UK_MR; i++) {
      __m256 av = _mm256_broadcast_ss(a + i);
      v[i][0] = _mm256_fmadd_ps(av, bv[0], v[i][0]);
      v[i][1] = _mm256_fmadd_ps(av, bv[1], v[i][1]);
    }
  }
#endif
  __m256 va = _mm256_set1_ps(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < UK_MR; i++)
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
      float *cp = c + i * ldc + 8 * j;
      __m256 r = acc ? _mm256_fmadd_ps(va, v[i][j], _mm256_loadu_ps(cp))
                     : _mm256_mul_ps(va, v[i][j]);
      _mm256_storeu_ps(cp, r);
    }
}

#undef UK_NAME
#undef UK_MR
#undef UK_LOAD
