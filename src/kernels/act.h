/* act.h - the kernels' epilogue version of the fused activations (ir/act.h): one call
 * over an array, dispatched once per call to the AVX2 array kernel when the CPU has
 * it. */
#ifndef NR_KERNELS_ACT_H
#define NR_KERNELS_ACT_H

#include "ir/act.h"

/* The kernels' epilogue version: the same function through the 8-lane kernel
 * nr_f32_act__avx2 when the CPU has AVX2 (NNROUTE_ISA=portable: the scalar one).
 * Relu, clip, leaky relu, hard sigmoid and hard swish give the reference's bits (NaN
 * rules included); sigmoid, silu, tanh and the GELUs use the accurate vector math
 * (vmath_avx2.h: max rel error 3e-7, GELU 1.5e-6 of max(|y|, 1)). */
void nr_act_apply(nr_act act, float a, float b, float *x, int64_t n);

#endif
