/* lp_ukernels__avx2.c - the AVX2 narrow-B micro-kernels of lpgemm_ukernels.inc: 6x16
 * and 1x16, fp16 (F16C vcvtph2ps) and bf16 (one 32-byte load of the interleaved row,
 * shift for columns 0-7, mask for 8-15); body: lp_ukernel_template.h. */
#include "kernels/cpu/lpgemm/lpgemm_impl.h"

#include "kernels/cpu/simd/simd_avx2.h"

static inline void load_f16(const uint16_t *b, nr_vf bv[2]) {
  bv[0] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b));
  bv[1] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 8)));
}

static inline void load_bf16(const uint16_t *b, nr_vf bv[2]) {
  __m256i x = _mm256_loadu_si256((const __m256i *)b);
  bv[0] = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  bv[1] = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32((int)0xffff0000u)));
}

#define UK_NAME nr_f16w_gemm_6x16__avx2
#define UK_MR 6
#define UK_LOAD load_f16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"

#define UK_NAME nr_f16w_gemm_1x16__avx2
#define UK_MR 1
#define UK_LOAD load_f16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"

#define UK_NAME nr_bf16w_gemm_6x16__avx2
#define UK_MR 6
#define UK_LOAD load_bf16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"

#define UK_NAME nr_bf16w_gemm_1x16__avx2
#define UK_MR 1
#define UK_LOAD load_bf16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"
