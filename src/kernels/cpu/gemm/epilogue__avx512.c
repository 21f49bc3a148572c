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

static inline __attribute__((always_inline)) __m512 act_vec(nr_act act, __m512 x, __m512 va,
                                                             __m512 vb) {
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

/* The block's epilogue with everything but the activation in the register, and the
 * activation too when `act` (a constant at each call site, so each instance is a
 * straight-line loop) is piecewise linear; otherwise act is NONE here and the caller
 * applies the real one. 16 columns per step; only a row's last step is masked. */
static inline __attribute__((always_inline)) void
block(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m, int64_t n, float *c,
      int64_t ldc, const nr_act act) {
  const float *bias_col = ep->bias && !ep->bias_per_row ? ep->bias + col : NULL;
  const float *bias_row = ep->bias && ep->bias_per_row ? ep->bias + row : NULL;
  const __m512 vbeta = _mm512_set1_ps(ep->beta), va = _mm512_set1_ps(ep->act_a),
               vb = _mm512_set1_ps(ep->act_b);
  for (int64_t i = 0; i < m; i++) {
    float *x = c + i * ldc;
    const float *r = ep->residual ? ep->residual + (row + i) * ep->ldr + col : NULL;
    const __m512 vbias = _mm512_set1_ps(bias_row ? bias_row[i] : 0.0f);
    for (int64_t j = 0; j < n; j += 16) {
      __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
      __m512 v = _mm512_maskz_loadu_ps(k, x + j);
      if (bias_col)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias_col + j));
      else if (bias_row)
        v = _mm512_add_ps(v, vbias);
      if (r)
        v = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(k, r + j), v);
      _mm512_mask_storeu_ps(x + j, k, act_vec(act, v, va, vb));
    }
  }
}

void nr_gemm_epilogue__avx512(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                              int64_t n, float *c, int64_t ldc) {
  switch (ep->act) {
  case NR_ACT_NONE: block(ep, row, col, m, n, c, ldc, NR_ACT_NONE); return;
  case NR_ACT_RELU: block(ep, row, col, m, n, c, ldc, NR_ACT_RELU); return;
  case NR_ACT_CLIP: block(ep, row, col, m, n, c, ldc, NR_ACT_CLIP); return;
  case NR_ACT_LEAKY_RELU: block(ep, row, col, m, n, c, ldc, NR_ACT_LEAKY_RELU); return;
  default:
    if (ep->bias || ep->residual)
      block(ep, row, col, m, n, c, ldc, NR_ACT_NONE);
    for (int64_t i = 0; i < m; i++)
      nr_act_apply(ep->act, ep->act_a, ep->act_b, c + i * ldc, n);
  }
}
