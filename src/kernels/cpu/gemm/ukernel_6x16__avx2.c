/* ukernel_6x16__avx2.c - nr_f32_gemm_6x16__avx2: 6 rows x 16 columns of C in
 * 12 ymm accumulators (body: ukernel_template.h). */
#include "kernels/cpu/simd/simd_avx2.h"

#define UK_NAME nr_f32_gemm_6x16__avx2
#define UK_MR 6
#define UK_NV 2
#include "kernels/cpu/gemm/ukernel_template.h"
