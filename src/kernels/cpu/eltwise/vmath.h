/* vmath.h - the elementwise kernels' shared vocabulary: unary op codes, the math
 * variant (accurate or fast exp/tanh/erf/sigmoid), the array kernels of each ISA, and
 * the scalar math the portable kernels and the norm family use.
 *
 * Key decision: a kernel is one loop per op over a whole array, chosen by a switch
 * outside the loop; the op code and its constants are the tactic's params record
 * (nr_ewu_params, stored in nr_step.params at prepare), so run() re-derives nothing.
 * Error bounds of every approximation are measured by tests/unit/test_cpu_eltwise.c
 * and documented in docs/kernels-eltwise-norm.md. */
#ifndef NR_KERNELS_CPU_ELTWISE_VMATH_H
#define NR_KERNELS_CPU_ELTWISE_VMATH_H

#include "kernels/act.h"

#include <stdint.h>

typedef enum nr_vmath {
  NR_VMATH_ACCURATE = 0, /* max rel error 4e-7 (measured; see the docs) */
  NR_VMATH_FAST = 1,     /* lower-degree polynomials, rcp+Newton: max rel error 9e-6 */
} nr_vmath;

typedef enum nr_ewu_op {
  NR_EWU_RELU = 0,
  NR_EWU_CLIP,      /* min(max(x, a), b) */
  NR_EWU_LEAKY,     /* x < 0 ? a * x : x */
  NR_EWU_HSIG,      /* max(0, min(1, a * x + b)) */
  NR_EWU_HSWISH,    /* x * max(0, min(1, x / 6 + 1/2)) */
  NR_EWU_NEG,
  NR_EWU_ABS,
  NR_EWU_SQRT,
  NR_EWU_EXP,
  NR_EWU_SIGMOID,
  NR_EWU_TANH,
  NR_EWU_ERF,
  NR_EWU_GELU,      /* 0.5 x (1 + erf(x / sqrt 2)) */
  NR_EWU_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  NR_EWU_COUNT,
} nr_ewu_op;

/* The unary tactics' params record (in nr_step.params). */
typedef struct nr_ewu_params {
  uint8_t op;   /* nr_ewu_op */
  uint8_t math; /* nr_vmath */
  uint8_t pad[2];
  float a, b;
} nr_ewu_params;

typedef enum nr_ewb_op { NR_EWB_ADD = 0, NR_EWB_SUB, NR_EWB_MUL, NR_EWB_DIV } nr_ewb_op;

/* y[i] = f(x[i]) for i < n; x may equal y. */
void nr_f32_vunary__portable(const nr_ewu_params *p, const float *x, float *y, int64_t n);
void nr_f32_vunary__avx2(const nr_ewu_params *p, const float *x, float *y, int64_t n);
/* y[i] = a[i * sa] op b[i * sb] with sa, sb in {0, 1}; y may equal a or b. */
void nr_f32_vbinary__portable(nr_ewb_op op, const float *a, int sa, const float *b, int sb,
                              float *y, int64_t n);
void nr_f32_vbinary__avx2(nr_ewb_op op, const float *a, int sa, const float *b, int sb,
                          float *y, int64_t n);
/* x[i] = act(x[i]) in place: the kernels' epilogue activation (act.h's nr_act_apply
 * calls it when the CPU has AVX2). */
void nr_f32_act__avx2(nr_act act, float a, float b, float *x, int64_t n);
/* y[i] = c[i * sc] ? x[i * sx] : z[i * sz] (Where), strides in {0, 1}. */
void nr_f32_vwhere__portable(const uint8_t *c, int sc, const float *x, int sx,
                             const float *z, int sz, float *y, int64_t n);

/* Scalar math of each variant (portable kernels, tails, tests). */
float nr_expf_v(nr_vmath m, float x);
float nr_tanhf_v(nr_vmath m, float x);
float nr_erff_v(nr_vmath m, float x);
float nr_sigmoidf_v(nr_vmath m, float x);
/* The fast variant's scalar polynomials (what the AVX2 fast kernels compute). */
float nr_expf_fast(float x);
float nr_tanhf_fast(float x);
float nr_erff_fast(float x);

#endif
