/* ukernel_14x32__avx512.c - nr_f32_gemm_14x32__avx512: 14 rows x 32 columns of C in
 * 28 zmm accumulators (body: ukernel_template.h). */
#include "kernels/cpu/simd/simd_avx512.h"

#define UK_NAME nr_f32_gemm_14x32__avx512
#define UK_MR 14
#define UK_NV 2
#include "kernels/cpu/gemm/ukernel_template.h"
