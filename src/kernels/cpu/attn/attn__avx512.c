/* attn__avx512.c - nr_f32_attention_rows__avx512: the fused attention kernel's pieces
 * (attn_impl.h) at 16 lanes, body attn_body.h, with vmath_avx512.h's exp (the AVX2
 * exp lane for lane). What stays here is the score masking: the scores, a float mask
 * and a bool mask are read with k-masked loads of the visible keys only. */
#include "kernels/cpu/simd/simd_avx512.h"

#include "kernels/cpu/attn/attn_impl.h"
#include "kernels/cpu/eltwise/vmath_avx512.h"

#include <math.h>

/* Scaled and masked scores of keys [j, j + 16) of row i; lanes at or past lim are -inf. */
static inline nr_vf masked_block(const nr_attn_cfg *c, const nr_attn_rows *r, int i,
                                 int64_t j0, int64_t j, int64_t lim, const float *x) {
  __mmask16 in = nr_vm_first(lim - j);
  __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, x + j), _mm512_set1_ps(c->scale));
  if (c->mask == NR_ATTN_MASK_FLOAT) {
    const float *fm = (const float *)r->mask + i * r->mask_rs + j0 + j;
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(in, fm));
  } else if (c->mask == NR_ATTN_MASK_BOOL) {
    const uint8_t *bm = (const uint8_t *)r->mask + i * r->mask_rs + j0 + j;
    in &= _mm_test_epi8_mask(_mm_maskz_loadu_epi8(in, bm), _mm_set1_epi8(-1));
  }
  return _mm512_mask_blend_ps(in, _mm512_set1_ps(-INFINITY), v);
}

#define ATTN_NAME nr_f32_attention_rows__avx512
#define ATTN_EXP nr_v16_exp
#include "kernels/cpu/attn/attn_body.h"
