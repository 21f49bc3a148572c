/* epilogue__avx512.c - nr_gemm_epilogue__avx512: the GEMM epilogue (gemm.h's
 * nr_epilogue) in one pass over each row of a C block, 16 floats at a time with a
 * mask for the row's tail, so any block width runs without a scalar loop. Bias,
 * beta * residual and the piecewise-linear activations (ReLU, Clip, LeakyReLU) stay
 * in the register between load and store; the other activations run afterwards,
 * through nr_act_apply, on the row while it is in L1.
 *
 * The comparisons are ordered as in gemm.c's portable loops (x > 0 ? x : 0,
 * a > x ? a : x, ...) so NaN inputs give the same results on both paths. Called by
 * nr_gemm_epilogue_apply only when nr_cpu_isa() reports NR_ISA_AVX512. */
#include "kernels/cpu/gemm/gemm_impl.h"

#include <immintrin.h>

static inline __m512 act_vec(nr_act act, __m512 x, __m512 va, __m512 vb) {
  switch (act) {
  case NR_ACT_RELU:
    return _mm512_max_ps(x, _mm512_setzero_ps()); /* x > 0 ? x : 0 */
  case NR_ACT_CLIP:
    return _mm512_min_ps(vb, _mm512_max_ps(va, x)); /* b < v ? b : v, v = a > x ? a : x */
  case NR_ACT_LEAKY_RELU: {
    __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(pos, _mm512_mul_ps(va, x), x);
  }
  default:
    return x;
  }
}

static bool act_in_register(nr_act act) {
  return act == NR_ACT_NONE || act == NR_ACT_RELU || act == NR_ACT_CLIP ||
         act == NR_ACT_LEAKY_RELU;
}

/* One row of n floats; bias_row is the per-row bias (used when the epilogue has one
 * per row), bias_col the per-column bias at this block's first column (or NULL), r
 * the residual row (or NULL). */
static void row_epilogue(const nr_epilogue *ep, float *restrict x, int64_t n,
                         float bias_row, const float *restrict bias_col,
                         const float *restrict r, bool in_reg) {
  bool add_row = ep->bias && ep->bias_per_row;
  __m512 vbias = _mm512_set1_ps(bias_row), vbeta = _mm512_set1_ps(ep->beta);
  __m512 va = _mm512_set1_ps(ep->act_a), vb = _mm512_set1_ps(ep->act_b);
  nr_act act = in_reg ? ep->act : NR_ACT_NONE;
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 m = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    if (bias_col)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias_col + j));
    else if (add_row)
      v = _mm512_add_ps(v, vbias);
    if (r)
      v = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m, r + j), v);
    _mm512_mask_storeu_ps(x + j, m, act_vec(act, v, va, vb));
  }
  if (!in_reg)
    nr_act_apply(ep->act, ep->act_a, ep->act_b, x, n);
}

void nr_gemm_epilogue__avx512(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                              int64_t n, float *c, int64_t ldc) {
  bool in_reg = act_in_register(ep->act);
  const float *bias_col = ep->bias && !ep->bias_per_row ? ep->bias + col : NULL;
  for (int64_t i = 0; i < m; i++) {
    float bias_row = ep->bias && ep->bias_per_row ? ep->bias[row + i] : 0.0f;
    const float *r = ep->residual ? ep->residual + (row + i) * ep->ldr + col : NULL;
    row_epilogue(ep, c + i * ldc, n, bias_row, bias_col, r, in_reg);
  }
}
