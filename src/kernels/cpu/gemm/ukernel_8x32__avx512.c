/* ukernel_8x32__avx512.c - nr_f32_gemm_8x32__avx512: 8 rows x 32 columns of C in
 * 16 zmm accumulators (body: ukernel_avx512_template.h). */
#define UK_NAME nr_f32_gemm_8x32__avx512
#define UK_MR 8
#define UK_NV 2
#include "kernels/cpu/gemm/ukernel_avx512_template.h"
