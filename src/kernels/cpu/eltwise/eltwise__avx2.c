/* eltwise__avx2.c - AVX2+FMA elementwise array kernels (nr_f32_v*__avx2 tactics).
 *
 * One loop per op: the switch on the op code sits outside the loop, and each loop
 * body is an 8-lane expression; the last n % 8 elements go through masked loads and
 * stores, so no scalar tail (and no second code path to test) exists. Compiled with
 * -mavx2 -mfma -mf16c; called only after nr_cpu_isa() reported NR_ISA_AVX2. */
#include "kernels/cpu/eltwise/vmath.h"
#include "kernels/cpu/eltwise/vmath_avx2.h"

#include <math.h>

static inline __m256i tail_mask(int64_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define UNARY_LOOP(EXPR)                                                               \
  do {                                                                                 \
    int64_t i = 0;                                                                     \
    for (; i + 8 <= n; i += 8) {                                                       \
      __m256 v = _mm256_loadu_ps(x + i);                                               \
      _mm256_storeu_ps(y + i, EXPR);                                                   \
    }                                                                                  \
    if (i < n) {                                                                       \
      __m256i m = tail_mask(n - i);                                                    \
      __m256 v = _mm256_maskload_ps(x + i, m);                                         \
      _mm256_maskstore_ps(y + i, m, EXPR);                                             \
    }                                                                                  \
  } while (0)

static inline __m256 gelu8(__m256 v, int fast) {
  __m256 e = nr_v8_erf(_mm256_mul_ps(v, NR_V8(0.70710678118654752f)), fast);
  return _mm256_mul_ps(_mm256_mul_ps(NR_V8(0.5f), v), _mm256_add_ps(NR_V8(1.0f), e));
}

static inline __m256 gelu_tanh8(__m256 v, int fast) {
  __m256 v2 = _mm256_mul_ps(_mm256_mul_ps(NR_V8(0.044715f), v), v);
  __m256 u = _mm256_mul_ps(NR_V8(0.79788456080286536f), _mm256_fmadd_ps(v2, v, v));
  __m256 t = nr_v8_tanh(u, fast);
  return _mm256_mul_ps(_mm256_mul_ps(NR_V8(0.5f), v), _mm256_add_ps(NR_V8(1.0f), t));
}

static inline __m256 clamp01(__m256 v) {
  return _mm256_max_ps(_mm256_min_ps(v, NR_V8(1.0f)), _mm256_setzero_ps());
}

/* Ops that compare keep the reference's NaN behaviour: x < lo ? lo : x passes NaN. */
static inline __m256 clip8(__m256 v, __m256 lo, __m256 hi) {
  v = _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
}

static void unary_math(const nr_ewu_params *p, const float *x, float *y, int64_t n) {
  int f = p->math == NR_VMATH_FAST;
  switch ((nr_ewu_op)p->op) {
  case NR_EWU_EXP: UNARY_LOOP(nr_v8_exp(v, f)); break;
  case NR_EWU_SIGMOID: UNARY_LOOP(nr_v8_sigmoid(v, f)); break;
  case NR_EWU_TANH: UNARY_LOOP(nr_v8_tanh(v, f)); break;
  case NR_EWU_ERF: UNARY_LOOP(nr_v8_erf(v, f)); break;
  case NR_EWU_GELU: UNARY_LOOP(gelu8(v, f)); break;
  case NR_EWU_GELU_TANH: UNARY_LOOP(gelu_tanh8(v, f)); break;
  default: break;
  }
}

void nr_f32_vunary__avx2(const nr_ewu_params *p, const float *x, float *y, int64_t n) {
  const __m256 a = NR_V8(p->a), b = NR_V8(p->b), zero = _mm256_setzero_ps();
  switch ((nr_ewu_op)p->op) {
  case NR_EWU_RELU:
    UNARY_LOOP(_mm256_blendv_ps(v, zero, _mm256_cmp_ps(v, zero, _CMP_LT_OQ)));
    break;
  case NR_EWU_CLIP: UNARY_LOOP(clip8(v, a, b)); break;
  case NR_EWU_LEAKY:
    UNARY_LOOP(_mm256_blendv_ps(v, _mm256_mul_ps(a, v), _mm256_cmp_ps(v, zero, _CMP_LT_OQ)));
    break;
  case NR_EWU_HSIG: UNARY_LOOP(clamp01(_mm256_fmadd_ps(a, v, b))); break;
  case NR_EWU_HSWISH:
    UNARY_LOOP(_mm256_mul_ps(v, clamp01(_mm256_add_ps(_mm256_div_ps(v, NR_V8(6.0f)),
                                                      NR_V8(0.5f)))));
    break;
  case NR_EWU_NEG: UNARY_LOOP(_mm256_xor_ps(v, NR_V8(-0.0f))); break;
  case NR_EWU_ABS: UNARY_LOOP(nr_v8_abs(v)); break;
  case NR_EWU_SQRT: UNARY_LOOP(_mm256_sqrt_ps(v)); break;
  default: unary_math(p, x, y, n); break;
  }
}

/* ---- fused activations (act.h), in place -------------------------------------------- */

/* Each expression mirrors act.c's scalar act1 operation by operation (no FMA where it
 * has none), so the compare-based ones give its exact bits and NaN rules: relu maps NaN
 * to 0, clip and leaky relu pass it, fminf(1, NaN) = 1 in the hard ones. */
static inline __m256 act_hsig(__m256 v, __m256 a, __m256 b) {
  __m256 ax = _mm256_mul_ps(a, v);
  __asm__("" : "+x"(ax)); /* keeps gcc from contracting a * x + b into an FMA */
  __m256 t = _mm256_add_ps(ax, b);
  return _mm256_max_ps(_mm256_min_ps(t, NR_V8(1.0f)), _mm256_setzero_ps());
}

static inline __m256 act_hswish(__m256 v) {
  __m256 t = _mm256_add_ps(_mm256_div_ps(v, NR_V8(6.0f)), NR_V8(0.5f));
  return _mm256_mul_ps(v, _mm256_max_ps(_mm256_min_ps(t, NR_V8(1.0f)), _mm256_setzero_ps()));
}

static inline __m256 act_gelu_tanh(__m256 v) {
  __m256 c = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(NR_V8(0.044715f), v), v), v);
  __m256 t = nr_v8_tanh(_mm256_mul_ps(NR_V8(0.79788456080286536f), _mm256_add_ps(v, c)), 0);
  /* tanh(+-inf) is exactly +-1 there, so -inf gives -inf * 0 = NaN as in act.c */
  __m256 inf = _mm256_cmp_ps(nr_v8_abs(v), NR_V8(INFINITY), _CMP_EQ_OQ);
  t = _mm256_blendv_ps(t, _mm256_or_ps(NR_V8(1.0f), _mm256_and_ps(v, NR_V8(-0.0f))), inf);
  return _mm256_mul_ps(_mm256_mul_ps(NR_V8(0.5f), v), _mm256_add_ps(NR_V8(1.0f), t));
}

void nr_f32_act__avx2(nr_act act, float pa, float pb, float *x, int64_t n) {
  float *y = x;
  const __m256 a = NR_V8(pa), b = NR_V8(pb), zero = _mm256_setzero_ps();
  switch (act) {
  case NR_ACT_NONE: break;
  case NR_ACT_RELU:
    UNARY_LOOP(_mm256_blendv_ps(zero, v, _mm256_cmp_ps(v, zero, _CMP_GT_OQ)));
    break;
  case NR_ACT_CLIP: UNARY_LOOP(clip8(v, a, b)); break;
  case NR_ACT_LEAKY_RELU:
    UNARY_LOOP(_mm256_blendv_ps(_mm256_mul_ps(a, v), v, _mm256_cmp_ps(v, zero, _CMP_GE_OQ)));
    break;
  case NR_ACT_SIGMOID: UNARY_LOOP(nr_v8_sigmoid(v, 0)); break;
  case NR_ACT_HARD_SIGMOID: UNARY_LOOP(act_hsig(v, a, b)); break;
  case NR_ACT_HARD_SWISH: UNARY_LOOP(act_hswish(v)); break;
  case NR_ACT_TANH: UNARY_LOOP(nr_v8_tanh(v, 0)); break;
  case NR_ACT_SILU: UNARY_LOOP(_mm256_mul_ps(v, nr_v8_sigmoid(v, 0))); break;
  case NR_ACT_GELU: UNARY_LOOP(gelu8(v, 0)); break;
  case NR_ACT_GELU_TANH: UNARY_LOOP(act_gelu_tanh(v)); break;
  default: nr_act_apply_ref(act, pa, pb, x, n); break;
  }
}

#define BINARY_LOOP(OP)                                                                \
  do {                                                                                 \
    int64_t i = 0;                                                                     \
    if (sa && sb) {                                                                    \
      for (; i + 8 <= n; i += 8)                                                       \
        _mm256_storeu_ps(y + i, OP(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));   \
    } else if (sa) {                                                                   \
      __m256 vb = _mm256_set1_ps(b[0]);                                                \
      for (; i + 8 <= n; i += 8)                                                       \
        _mm256_storeu_ps(y + i, OP(_mm256_loadu_ps(a + i), vb));                       \
    } else {                                                                           \
      __m256 va = _mm256_set1_ps(a[0]);                                                \
      for (; i + 8 <= n; i += 8)                                                       \
        _mm256_storeu_ps(y + i, OP(va, _mm256_loadu_ps(b + i)));                       \
    }                                                                                  \
    if (i < n) {                                                                       \
      __m256i m = tail_mask(n - i);                                                    \
      __m256 va = sa ? _mm256_maskload_ps(a + i, m) : _mm256_set1_ps(a[0]);            \
      __m256 vb = sb ? _mm256_maskload_ps(b + i, m) : _mm256_set1_ps(b[0]);            \
      _mm256_maskstore_ps(y + i, m, OP(va, vb));                                       \
    }                                                                                  \
  } while (0)

void nr_f32_vbinary__avx2(nr_ewb_op op, const float *a, int sa, const float *b, int sb,
                          float *y, int64_t n) {
  if (n <= 0)
    return;
  switch (op) {
  case NR_EWB_ADD: BINARY_LOOP(_mm256_add_ps); break;
  case NR_EWB_SUB: BINARY_LOOP(_mm256_sub_ps); break;
  case NR_EWB_MUL: BINARY_LOOP(_mm256_mul_ps); break;
  case NR_EWB_DIV: BINARY_LOOP(_mm256_div_ps); break;
  }
}
