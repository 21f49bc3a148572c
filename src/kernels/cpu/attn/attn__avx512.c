/* attn__avx512.c - AVX-512 pieces of the fused attention kernel (attn_impl.h): the two
 * products and the softmax update with 16-lane registers.
 *
 * Q K^T broadcasts q_id and loads two zmm of the packed K^T row d (32 keys, then a
 * 16-key remainder: kt_pad is a multiple of 16); P V broadcasts p_ij and loads V row j
 * 32, 16 or a masked remainder of columns at a time. Both keep the AVX2 kernel's 6-row
 * tile (NR_ATTN_MR, which sizes the work area), now 12 zmm accumulators: per step 12
 * FMAs against 2 loads and 6 broadcasts. The softmax works 16 keys at a time with
 * vmath_avx512.h's exp (the AVX2 exp lane for lane); at 8 lanes it was 40% of a
 * bert_tiny head. One head alone (128 x 128, D 64): 41 us against the AVX2 kernel's 59. */
#include "kernels/cpu/attn/attn_impl.h"
#include "kernels/cpu/eltwise/vmath_avx512.h"

#include <immintrin.h>
#include <math.h>

#define MR NR_ATTN_MR

/* ---- Q K^T ---------------------------------------------------------------------- */

static inline __attribute__((always_inline)) void
scores_tile(const nr_attn_rows *r, const float *const *q, const float *k, float *s,
            int64_t ss, const int nv) {
  __m512 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t d = 0; d < r->d; d++, k += r->kt_pad) {
    __m512 k0 = _mm512_loadu_ps(k), k1 = nv == 2 ? _mm512_loadu_ps(k + 16) : k0;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m512 b = _mm512_set1_ps(q[i][d]);
      acc[i][0] = _mm512_fmadd_ps(b, k0, acc[i][0]);
      if (nv == 2)
        acc[i][1] = _mm512_fmadd_ps(b, k1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_ps(s + i * ss, acc[i][0]);
    if (nv == 2)
      _mm512_storeu_ps(s + i * ss + 16, acc[i][1]);
  }
}

static void scores_avx512(const nr_attn_rows *r, int64_t j0, int64_t nc, float *s,
                          int64_t ss) {
  const float *q[MR];
  for (int i = 0; i < MR; i++)
    q[i] = r->q + (i < r->rows ? i : r->rows - 1) * r->q_rs;
  int64_t c = 0;
  for (; c + 32 <= nc; c += 32)
    scores_tile(r, q, r->kt + j0 + c, s + c, ss, 2);
  if (c < nc)
    scores_tile(r, q, r->kt + j0 + c, s + c, ss, 1);
}

/* ---- softmax update ------------------------------------------------------------- */

/* Lanes [0, n) of a 16-lane block, n clamped to [0, 16]. */
static inline __mmask16 lanes_below(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Scaled and masked scores of keys [j, j + 16) of row i; lanes at or past lim are -inf. */
static inline __m512 masked16(const nr_attn_cfg *c, const nr_attn_rows *r, int i,
                              int64_t j0, int64_t j, int64_t lim, const float *x) {
  __mmask16 in = lanes_below(lim - j);
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

/* nr_attn_softmax__avx2 at 16 lanes: the same steps and exp; the row sums add 16
 * partial sums instead of 8, so they differ from it by reassociation only. */
static void softmax_avx512(const nr_attn_cfg *c, const nr_attn_rows *r, int64_t j0,
                           int64_t n, float *s, int64_t ss, float *m, float *l,
                           float *alpha) {
  int fast = c->math == NR_VMATH_FAST;
  const __m512 ninf = _mm512_set1_ps(-INFINITY);
  for (int i = 0; i < r->rows; i++) {
    float *x = s + i * ss;
    int64_t lim = c->causal && r->i0 + i - j0 + 1 < n ? r->i0 + i - j0 + 1 : n;
    __m512 vmax = ninf;
    for (int64_t j = 0; j < n; j += 16) {
      __m512 v = masked16(c, r, i, j0, j, lim, x);
      _mm512_storeu_ps(x + j, v);
      vmax = _mm512_max_ps(vmax, v);
    }
    float mx = _mm512_reduce_max_ps(vmax), mn = mx > m[i] ? mx : m[i];
    if (mn == -INFINITY) { /* nothing visible yet: keep l = 0, p = 0 */
      for (int64_t j = 0; j < n; j += 16)
        _mm512_storeu_ps(x + j, _mm512_setzero_ps());
      alpha[i] = 1;
      continue;
    }
    alpha[i] = m[i] == -INFINITY ? 0.0f : nr_expf_v(c->math, m[i] - mn);
    __m512 vm = _mm512_set1_ps(mn), sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      __m512 v = _mm512_loadu_ps(x + j);
      __m512 e = nr_v16_exp(_mm512_sub_ps(v, vm), fast);
      e = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_OQ), e); /* masked: 0 */
      _mm512_storeu_ps(x + j, e);
      sum = _mm512_add_ps(sum, e);
    }
    l[i] = l[i] * alpha[i] + _mm512_reduce_add_ps(sum);
    m[i] = mn;
  }
}

/* ---- P V ------------------------------------------------------------------------ */

/* Columns [e, e + 16 * nv) of the output rows; with nv == 1, lanes outside `cols` are
 * neither loaded nor stored. */
static inline __attribute__((always_inline)) void
pv_tile(const nr_attn_rows *r, const float *const *p, int64_t j0, int64_t n,
        const float *const *oin, const float *alpha, float *out, int64_t out_rs,
        const float *post, int64_t e, const int nv, __mmask16 cols) {
  __m512 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    if (oin) {
      __m512 a = _mm512_set1_ps(alpha[i]);
      acc[i][0] = _mm512_mul_ps(a, _mm512_maskz_loadu_ps(cols, oin[i] + e));
      if (nv == 2)
        acc[i][1] = _mm512_mul_ps(a, _mm512_loadu_ps(oin[i] + e + 16));
    }
  }
  const float *v = r->v + j0 * r->v_rs + e;
  for (int64_t j = 0; j < n; j++, v += r->v_rs) {
    __m512 v0 = _mm512_maskz_loadu_ps(cols, v), v1 = v0;
    if (nv == 2)
      v1 = _mm512_loadu_ps(v + 16);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m512 b = _mm512_set1_ps(p[i][j]);
      acc[i][0] = _mm512_fmadd_ps(b, v0, acc[i][0]);
      if (nv == 2)
        acc[i][1] = _mm512_fmadd_ps(b, v1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    if (i >= r->rows)
      break;
    float *y = out + i * out_rs + e;
    __m512 sc = _mm512_set1_ps(post ? post[i] : 1.0f);
    _mm512_mask_storeu_ps(y, cols, _mm512_mul_ps(acc[i][0], sc));
    if (nv == 2)
      _mm512_storeu_ps(y + 16, _mm512_mul_ps(acc[i][1], sc));
  }
}

static void pv_avx512(const nr_attn_rows *r, const float *p, int64_t ps, int64_t j0,
                      int64_t n, const float *oin, const float *alpha, float *out,
                      int64_t out_rs, const float *post) {
  int64_t dvp = (r->dv + 15) & ~(int64_t)15;
  const float *pr[MR], *orow[MR];
  float al[MR];
  for (int i = 0; i < MR; i++) {
    int c = i < r->rows ? i : r->rows - 1;
    pr[i] = p + c * ps;
    orow[i] = oin ? oin + c * dvp : NULL;
    al[i] = alpha[c];
  }
  const float *const *oi = oin ? orow : NULL;
  int64_t e = 0;
  for (; e + 32 <= r->dv; e += 32)
    pv_tile(r, pr, j0, n, oi, al, out, out_rs, post, e, 2, 0xFFFF);
  for (; e < r->dv; e += 16) {
    int64_t w = r->dv - e < 16 ? r->dv - e : 16;
    pv_tile(r, pr, j0, n, oi, al, out, out_rs, post, e, 1, (__mmask16)((1u << w) - 1));
  }
}

static const nr_attn_ops ops_avx512 = {scores_avx512, softmax_avx512, pv_avx512};

void nr_f32_attention_rows__avx512(const nr_attn_cfg *c, const nr_attn_rows *r,
                                   float *work) {
  nr_attn_run_rows(c, r, work, &ops_avx512);
}
