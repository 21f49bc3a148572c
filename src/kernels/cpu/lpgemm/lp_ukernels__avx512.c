/* lp_ukernels__avx512.c - the AVX-512 narrow-B micro-kernels of lpgemm_ukernels.inc:
 * 12x32 and 1x32, fp16 and bf16 (body: lp_ukernel_template.h).
 *
 * Widening a 32-value B row costs two vcvtph2ps (fp16), or, for bf16, one 64-byte
 * load of the interleaved row and a shift and an AND: the even 16-bit lanes shifted
 * up are columns 0-15, the odd lanes masked are columns 16-31. Against the 24 FMAs
 * of a 12x32 k step that is 2 extra port-0/5 micro-ops (bf16) or 4 (fp16), yet the
 * 12x32 forms measured ~30% under the fp32 kernel's rate where compute bounds: they
 * earn their place where B streams from memory (nr_lpgemm_default_cfg). */
#include "kernels/cpu/lpgemm/lpgemm_impl.h"

#include "kernels/cpu/simd/simd_avx512.h"

static inline void load_f16(const uint16_t *b, nr_vf bv[2]) {
  bv[0] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b));
  bv[1] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 16)));
}

static inline void load_bf16(const uint16_t *b, nr_vf bv[2]) {
  __m512i x = _mm512_loadu_si512(b);
  bv[0] = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  bv[1] = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u)));
}

#define UK_NAME nr_f16w_gemm_12x32__avx512
#define UK_MR 12
#define UK_LOAD load_f16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"

#define UK_NAME nr_f16w_gemm_1x32__avx512
#define UK_MR 1
#define UK_LOAD load_f16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"

#define UK_NAME nr_bf16w_gemm_12x32__avx512
#define UK_MR 12
#define UK_LOAD load_bf16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"

#define UK_NAME nr_bf16w_gemm_1x32__avx512
#define UK_MR 1
#define UK_LOAD load_bf16
#include "kernels/cpu/lpgemm/lp_ukernel_template.h"
