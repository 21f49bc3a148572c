/* vmath.c - scalar math of both variants and the portable elementwise kernels.
 *
 * The accurate variant is libm's float functions (what the portable build computes
 * when nr_cpu_isa() offers no AVX2); the fast variant is the same low-degree
 * polynomials as vmath_avx2.h evaluated one lane at a time, so a fast route gives
 * the same numbers class on every machine. */
#include "kernels/cpu/eltwise/vmath.h"

#include <math.h>

float nr_expf_fast(float x) {
  if (x != x)
    return x;
  x = fminf(fmaxf(x, -104.0f), 89.0f);
  float n = nearbyintf(x * 1.44269504088896341f);
  float r = fmaf(-n, 0.693359375f, x);
  r = fmaf(-n, -2.12194440e-4f, r);
  float p = fmaf(fmaf(0.0409174029f, r, 0.1675397596f), r, 0.5000893097f);
  p = fmaf(p, r * r, r + 1.0f);
  int n1 = (int)floorf(n * 0.5f);
  return ldexpf(ldexpf(p, n1), (int)n - n1);
}

float nr_tanhf_fast(float x) {
  if (x != x)
    return x;
  float ax = fminf(fabsf(x), 9.0f), y;
  if (ax < 0.4f) {
    float z = ax * ax;
    y = fmaf(fmaf(0.1221757947f, z, -0.3327982694f) * z, ax, ax);
  } else {
    y = 1.0f - 2.0f / (nr_expf_fast(ax + ax) + 1.0f);
  }
  return copysignf(y, x);
}

static float erf_rational(float x) {
  float c = fminf(fmaxf(x, -4.0f), 4.0f), z = c * c;
  float p = -2.72614225801306e-10f;
  p = fmaf(p, z, 2.77068142495902e-08f);
  p = fmaf(p, z, -2.10102402082508e-06f);
  p = fmaf(p, z, -5.69250639462346e-05f);
  p = fmaf(p, z, -7.34990630326855e-04f);
  p = fmaf(p, z, -2.95459980854025e-03f);
  p = fmaf(p, z, -1.60960333262415e-02f);
  float q = -1.45660718464996e-05f;
  q = fmaf(q, z, -2.13374055278905e-04f);
  q = fmaf(q, z, -1.68282697438203e-03f);
  q = fmaf(q, z, -7.37332916720468e-03f);
  q = fmaf(q, z, -1.42647390514189e-02f);
  return c * p / q;
}

float nr_erff_fast(float x) { return x != x ? x : erf_rational(x); }

float nr_expf_v(nr_vmath m, float x) { return m == NR_VMATH_FAST ? nr_expf_fast(x) : expf(x); }
float nr_tanhf_v(nr_vmath m, float x) { return m == NR_VMATH_FAST ? nr_tanhf_fast(x) : tanhf(x); }
float nr_erff_v(nr_vmath m, float x) { return m == NR_VMATH_FAST ? nr_erff_fast(x) : erff(x); }

float nr_sigmoidf_v(nr_vmath m, float x) {
  float e = nr_expf_v(m, -fabsf(x));
  return x < 0 ? e / (1.0f + e) : 1.0f / (1.0f + e);
}

/* ---- portable array kernels ---------------------------------------------------- */

static float gelu_f(nr_vmath m, float x) {
  return 0.5f * x * (1.0f + nr_erff_v(m, x * 0.70710678118654752f));
}

static float gelu_tanh_f(nr_vmath m, float x) {
  float u = 0.79788456080286536f * fmaf(0.044715f * x * x, x, x);
  return 0.5f * x * (1.0f + nr_tanhf_v(m, u));
}

static float unary_f(const nr_ewu_params *p, nr_vmath m, float v) {
  switch ((nr_ewu_op)p->op) {
  case NR_EWU_RELU: return v < 0.0f ? 0.0f : v;
  case NR_EWU_CLIP: v = v < p->a ? p->a : v; return v > p->b ? p->b : v;
  case NR_EWU_LEAKY: return v < 0.0f ? p->a * v : v;
  case NR_EWU_HSIG: return fmaxf(0.0f, fminf(1.0f, p->a * v + p->b));
  case NR_EWU_HSWISH: return v * fmaxf(0.0f, fminf(1.0f, v / 6.0f + 0.5f));
  case NR_EWU_NEG: return -v;
  case NR_EWU_ABS: return fabsf(v);
  case NR_EWU_SQRT: return sqrtf(v);
  case NR_EWU_EXP: return nr_expf_v(m, v);
  case NR_EWU_SIGMOID: return nr_sigmoidf_v(m, v);
  case NR_EWU_TANH: return nr_tanhf_v(m, v);
  case NR_EWU_ERF: return nr_erff_v(m, v);
  case NR_EWU_GELU: return gelu_f(m, v);
  case NR_EWU_GELU_TANH: return gelu_tanh_f(m, v);
  default: return v;
  }
}

void nr_f32_vunary__portable(const nr_ewu_params *p, const float *x, float *y, int64_t n) {
  nr_vmath m = (nr_vmath)p->math;
  for (int64_t i = 0; i < n; i++)
    y[i] = unary_f(p, m, x[i]);
}

#define BINARY_LOOP(EXPR)                                                              \
  for (int64_t i = 0; i < n; i++) {                                                    \
    float u = a[i * sa], v = b[i * sb];                                                \
    y[i] = EXPR;                                                                       \
  }

void nr_f32_vbinary__portable(nr_ewb_op op, const float *a, int sa, const float *b, int sb,
                              float *y, int64_t n) {
  switch (op) {
  case NR_EWB_ADD: BINARY_LOOP(u + v) break;
  case NR_EWB_SUB: BINARY_LOOP(u - v) break;
  case NR_EWB_MUL: BINARY_LOOP(u * v) break;
  case NR_EWB_DIV: BINARY_LOOP(u / v) break;
  }
}

void nr_f32_vwhere__portable(const uint8_t *c, int sc, const float *x, int sx,
                             const float *z, int sz, float *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = c[i * sc] ? x[i * sx] : z[i * sz];
}
