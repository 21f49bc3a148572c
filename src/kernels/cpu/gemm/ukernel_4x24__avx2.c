/* ukernel_4x24__avx2.c - nr_f32_gemm_4x24__avx2: 4 rows x 24 columns of C in
 * 12 ymm accumulators (body: ukernel_template.h). */
#include "kernels/cpu/simd/simd_avx2.h"

#define UK_NAME nr_f32_gemm_4x24__avx2
#define UK_MR 4
#define UK_NV 3
#include "kernels/cpu/gemm/ukernel_template.h"
