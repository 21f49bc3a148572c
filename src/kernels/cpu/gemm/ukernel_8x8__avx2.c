/* ukernel_8x8__avx2.c - nr_f32_gemm_8x8__avx2: 8 rows x 8 columns of C in
 * 8 ymm accumulators (body: ukernel_template.h). */
#include "kernels/cpu/simd/simd_avx2.h"

#define UK_NAME nr_f32_gemm_8x8__avx2
#define UK_MR 8
#define UK_NV 1
#include "kernels/cpu/gemm/ukernel_template.h"
