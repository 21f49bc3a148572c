/* kernels_common.cuh - device helpers the CUDA kernels share: loads and stores of
 * activations that may be fp32 or fp16, and the unary activation formulas.
 *
 * Key decision: the dtype of an activation is a run-time flag, not a template
 * parameter. A plan with fp16 slots (cuda_half.c) mixes fp32 and fp16 operands in
 * any combination (a residual from a graph input, a bias add into an fp16 tensor),
 * and a flag that is the same for every thread costs one uniform branch per element
 * in kernels that are bound by memory or launch latency, where a template per
 * combination would multiply the code. Math is always fp32. */
#ifndef NR_BACKENDS_CUDA_KERNELS_COMMON_CUH
#define NR_BACKENDS_CUDA_KERNELS_COMMON_CUH

#include "backends/cuda/cuda_kernels.h"

#include <cuda_fp16.h>
#include <math.h>

/* Element i of x, an fp16 array when half, else fp32. */
__device__ __forceinline__ float nr_ld(const void *x, int64_t i, bool half) {
  return half ? __half2float(((const __half *)x)[i]) : ((const float *)x)[i];
}

/* y[i] = v, rounded to nearest fp16 when half. */
__device__ __forceinline__ void nr_st(void *y, int64_t i, float v, bool half) {
  if (half)
    ((__half *)y)[i] = __float2half_rn(v);
  else
    ((float *)y)[i] = v;
}

/* The unary op `op` (nr_cuda_ew_op) with parameters p0, p1, in the reference's
 * formulas (erff, expf, tanhf: the accurate library versions). */
__device__ __forceinline__ float nr_unary(int op, float x, float p0, float p1) {
  switch (op) {
  case NR_EW_RELU: return x > 0.0f ? x : 0.0f;
  case NR_EW_SIGMOID: {
    float e = expf(-fabsf(x));
    return x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  }
  case NR_EW_TANH: return tanhf(x);
  case NR_EW_EXP: return expf(x);
  case NR_EW_LOG: return logf(x);
  case NR_EW_ERF: return erff(x);
  case NR_EW_SQRT: return sqrtf(x);
  case NR_EW_NEG: return -x;
  case NR_EW_ABS: return fabsf(x);
  case NR_EW_RECIPROCAL: return 1.0f / x;
  case NR_EW_FLOOR: return floorf(x);
  case NR_EW_CEIL: return ceilf(x);
  case NR_EW_SOFTPLUS: return log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f);
  case NR_EW_HARD_SWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
  case NR_EW_CLIP: return x < p0 ? p0 : x > p1 ? p1 : x;
  case NR_EW_LEAKY_RELU: return x >= 0.0f ? x : p0 * x;
  case NR_EW_ELU: return x >= 0.0f ? x : p0 * expm1f(x);
  case NR_EW_SELU: return p1 * (x > 0.0f ? x : p0 * expm1f(x));
  case NR_EW_HARD_SIGMOID: return fmaxf(0.0f, fminf(1.0f, p0 * x + p1));
  case NR_EW_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case NR_EW_GELU_TANH: {
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
  case NR_EW_SILU: {
    float e = expf(-fabsf(x));
    return x * (x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e));
  }
  default: return x; /* NR_EW_IDENTITY */
  }
}

#endif
