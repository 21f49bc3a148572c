/* qgemm_ukernels__avx2.c - the AVX2 lines of qgemm_ukernels.inc, each an instance of
 * qukernel_avx2_template.h. Compiled with -mavx2 -mfma; called only where nr_cpu_isa()
 * has NR_ISA_AVX2.
 *
 * Why activations must lie in [0, 127] here (these kernels' qmax, which the tactics
 * pass to nr_quant_act_params): AVX2 has no vpdpbusd, so a group of 4 products goes
 * through vpmaddubsw, which multiplies u8 by s8 and adds *pairs* into int16 with
 * signed saturation, then vpmaddwd by ones (pairs of int16 into exact int32). A pair
 * a0 * b0 + a1 * b1 with weights in [-127, 127] (nr_qgemm_quantize_w never makes
 * -128) stays within +-2 * 127 * 127 = +-32258 < 32767 exactly when the activations
 * stay within [0, 127]; with [0, 255] it could reach 64770 and saturate silently.
 * So these kernels trade one bit of activation resolution for exactness; the unit
 * tests run them at the extremes (every weight -127 or 127, every activation 127)
 * against an int64 reference. */
#include "kernels/cpu/qgemm/qgemm_impl.h"

#define QUK_NAME nr_qs8_wgemm_4x16__avx2
#define QUK_MR 4
#define QUK_NV 2
#define QUK_WA 1
#include "kernels/cpu/qgemm/qukernel_avx2_template.h"

#define QUK_NAME nr_qs8_gemm_4x16__avx2
#define QUK_MR 4
#define QUK_NV 2
#define QUK_WA 0
#include "kernels/cpu/qgemm/qukernel_avx2_template.h"

#define QUK_NAME nr_qs8_gemm_1x32__avx2
#define QUK_MR 1
#define QUK_NV 4
#define QUK_WA 0
#include "kernels/cpu/qgemm/qukernel_avx2_template.h"
