/* attn__avx2.c - nr_f32_attention_rows__avx2: the fused attention kernel's pieces
 * (attn_impl.h) at 8 lanes, body attn_body.h. What stays here is the score masking:
 * a bool mask is widened from bytes copied to a local (only the visible keys are
 * read), a float mask read with vmaskmovps. */
#include "kernels/cpu/simd/simd_avx2.h"

#include "kernels/cpu/attn/attn_impl.h"
#include "kernels/cpu/eltwise/vmath_avx2.h"

#include <math.h>

/* Scaled and masked scores of keys [j, j + 8) of row i; lanes at or past lim are -inf. */
static inline nr_vf masked_block(const nr_attn_cfg *c, const nr_attn_rows *r, int i,
                                 int64_t j0, int64_t j, int64_t lim, const float *x) {
  __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(c->scale));
  __m256i in = nr_vm_first(lim - j);
  if (c->mask == NR_ATTN_MASK_FLOAT) {
    const float *fm = (const float *)r->mask + i * r->mask_rs + j0 + j;
    v = _mm256_add_ps(v, _mm256_maskload_ps(fm, in));
  } else if (c->mask == NR_ATTN_MASK_BOOL) {
    const uint8_t *bm = (const uint8_t *)r->mask + i * r->mask_rs + j0 + j;
    uint8_t b8[8] = {0};
    for (int e = 0; e < 8 && j + e < lim; e++)
      b8[e] = bm[e];
    __m256i bi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)b8));
    in = _mm256_andnot_si256(_mm256_cmpeq_epi32(bi, _mm256_setzero_si256()), in);
  }
  return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(in));
}

#define ATTN_NAME nr_f32_attention_rows__avx2
#define ATTN_EXP nr_v8_exp
#include "kernels/cpu/attn/attn_body.h"
