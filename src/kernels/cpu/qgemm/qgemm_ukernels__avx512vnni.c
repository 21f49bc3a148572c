/* qgemm_ukernels__avx512vnni.c - the AVX-512 VNNI lines of qgemm_ukernels.inc, each an
 * instance of qukernel_avx512vnni_template.h (its comment has the design). Compiled
 * with -mavx512vnni; called only where nr_cpu_isa() has NR_ISA_AVX512VNNI. */
#include "kernels/cpu/qgemm/qgemm_impl.h"

#define QUK_NAME nr_qs8_wgemm_8x32__avx512vnni
#define QUK_MR 8
#define QUK_NV 2
#define QUK_WA 1
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"

#define QUK_NAME nr_qs8_wgemm_12x32__avx512vnni
#define QUK_MR 12
#define QUK_NV 2
#define QUK_WA 1
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"

#define QUK_NAME nr_qs8_wgemm_4x64__avx512vnni
#define QUK_MR 4
#define QUK_NV 4
#define QUK_WA 1
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"

#define QUK_NAME nr_qs8_gemm_8x32__avx512vnni
#define QUK_MR 8
#define QUK_NV 2
#define QUK_WA 0
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"

#define QUK_NAME nr_qs8_gemm_12x32__avx512vnni
#define QUK_MR 12
#define QUK_NV 2
#define QUK_WA 0
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"

#define QUK_NAME nr_qs8_gemm_6x64__avx512vnni
#define QUK_MR 6
#define QUK_NV 4
#define QUK_WA 0
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"

#define QUK_NAME nr_qs8_gemm_1x64__avx512vnni
#define QUK_MR 1
#define QUK_NV 4
#define QUK_WA 0
#include "kernels/cpu/qgemm/qukernel_avx512vnni_template.h"
