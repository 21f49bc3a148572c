/* ukernel_12x32__avx512.c - nr_f32_gemm_12x32__avx512: 12 rows x 32 columns of C in
 * 24 zmm accumulators (body: ukernel_template.h). */
#include "kernels/cpu/simd/simd_avx512.h"

#define UK_NAME nr_f32_gemm_12x32__avx512
#define UK_MR 12
#define UK_NV 2
#include "kernels/cpu/gemm/ukernel_template.h"
