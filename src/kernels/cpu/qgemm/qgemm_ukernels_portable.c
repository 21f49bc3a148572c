/* qgemm_ukernels_portable.c - the portable lines of qgemm_ukernels.inc: plain C over
 * int32, for machines with neither VNNI nor AVX2 (and NNROUTE_ISA=portable). One body,
 * instantiated per tile and weight side; the dequantizing store is the vector
 * kernels' in scalar form, so every kernel rounds the same way (one fused
 * multiply-add per output, then the residual and the clamp in the same order). */
#include "kernels/cpu/qgemm/qgemm_impl.h"

#include <math.h>

/* The dequantizing store of one tile (acc: mr x nr, row-major). */
static void store(const int32_t *acc, void *c, int64_t ldc, int flags,
                  const nr_qgemm_out *o, int mr, int nr, int wa) {
  int32_t *ci = c;
  float *cf = c;
  for (int i = 0; i < mr; i++)
    for (int j = 0; j < nr; j++) {
      int32_t s = acc[i * nr + j] + ((flags & NR_QGEMM_ACC) ? ci[i * ldc + j] : 0);
      if (!(flags & NR_QGEMM_FINAL)) {
        ci[i * ldc + j] = s;
        continue;
      }
      int ch = wa ? i : j;
      float r = fmaf((float)(s - o->corr[ch]), o->scale[ch], o->bias ? o->bias[ch] : 0.0f);
      if (flags & NR_QGEMM_RES)
        r += o->res[i * o->ldr + j];
      if (flags & NR_QGEMM_RELU)
        r = r > 0.0f ? r : 0.0f;
      else if (flags & NR_QGEMM_CLIP)
        r = o->hi < (o->lo > r ? o->lo : r) ? o->hi : (o->lo > r ? o->lo : r);
      cf[i * ldc + j] = r;
    }
}

/* B's group is split by k (b[4j + u] -> bt[u][j]) so that the inner loop runs along
 * nr contiguous int32 and gcc vectorizes it for the baseline ISA, as the fp32
 * portable kernels; SA / SB are the element types of A and B (int8_t or uint8_t). */
#define PORTABLE_QUKERNEL(NAME, MR, NR, SA, SB, WA)                                        \
  void NAME(int64_t kq, const void *a_, const void *b_, void *c, int64_t ldc, int flags,   \
            const nr_qgemm_out *o) {                                                       \
    const SA *a = a_;                                                                      \
    const SB *b = b_;                                                                      \
    int32_t acc[MR][NR] = {{0}}, bt[4][NR];                                                \
    for (int64_t p = 0; p < kq; p++, a += 4 * MR, b += 4 * NR) {                           \
      for (int j = 0; j < NR; j++)                                                         \
        for (int u = 0; u < 4; u++)                                                        \
          bt[u][j] = b[4 * j + u];                                                         \
      for (int i = 0; i < MR; i++)                                                         \
        for (int u = 0; u < 4; u++)                                                        \
          for (int j = 0; j < NR; j++)                                                     \
            acc[i][j] += (int32_t)a[4 * i + u] * bt[u][j];                                 \
    }                                                                                      \
    store(&acc[0][0], c, ldc, flags, o, MR, NR, WA);                                       \
  }

PORTABLE_QUKERNEL(nr_qs8_wgemm_4x8, 4, 8, int8_t, uint8_t, 1)
PORTABLE_QUKERNEL(nr_qs8_gemm_4x8, 4, 8, uint8_t, int8_t, 0)
