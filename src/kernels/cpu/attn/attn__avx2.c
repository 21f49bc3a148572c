/* attn__avx2.c - AVX2+FMA pieces of the fused attention kernel (attn_impl.h).
 *
 * Both products are broadcast micro-kernels over a 6-row register tile, like the
 * GEMM's 6x16: Q K^T broadcasts q_id and loads two vectors of the packed K^T row d;
 * P V broadcasts p_ij and loads V row j straight from the activation (no packing:
 * V rows are contiguous), 16, 8 or a masked remainder of columns at a time. The
 * accumulators are constant-size arrays gcc unrolls into ymm registers. The softmax
 * piece works 8 keys at a time and forces masked keys to exactly 0. */
#include "kernels/cpu/attn/attn_impl.h"
#include "kernels/cpu/eltwise/vmath_avx2.h"

#include <math.h>

#define MR NR_ATTN_MR

static inline __m256i lanes_below(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 8 ? (n < 0 ? 0 : n) : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* ---- Q K^T ---------------------------------------------------------------------- */

static void scores_avx2(const nr_attn_rows *r, int64_t j0, int64_t nc, float *s,
                        int64_t ss) {
  const float *q[MR];
  for (int i = 0; i < MR; i++)
    q[i] = r->q + (i < r->rows ? i : r->rows - 1) * r->q_rs;
  for (int64_t c = 0; c < nc; c += 16) {
    __m256 acc[MR][2];
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++)
      acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    const float *k = r->kt + j0 + c;
    for (int64_t d = 0; d < r->d; d++, k += r->kt_pad) {
      __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8);
#pragma GCC unroll 8
      for (int i = 0; i < MR; i++) {
        __m256 b = _mm256_broadcast_ss(q[i] + d);
        acc[i][0] = _mm256_fmadd_ps(b, k0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(b, k1, acc[i][1]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      _mm256_storeu_ps(s + i * ss + c, acc[i][0]);
      _mm256_storeu_ps(s + i * ss + c + 8, acc[i][1]);
    }
  }
}

/* ---- softmax update ------------------------------------------------------------- */

/* Scaled and masked scores of keys [j, j + 8) of row i; lanes at or past lim are -inf. */
static inline __m256 masked8(const nr_attn_cfg *c, const nr_attn_rows *r, int i,
                             int64_t j0, int64_t j, int64_t lim, const float *x) {
  __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_set1_ps(c->scale));
  __m256i in = lanes_below(lim - j);
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

static void softmax_avx2(const nr_attn_cfg *c, const nr_attn_rows *r, int64_t j0,
                         int64_t n, float *s, int64_t ss, float *m, float *l,
                         float *alpha) {
  int fast = c->math == NR_VMATH_FAST;
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  for (int i = 0; i < r->rows; i++) {
    float *x = s + i * ss;
    int64_t lim = c->causal && r->i0 + i - j0 + 1 < n ? r->i0 + i - j0 + 1 : n;
    __m256 vmax = ninf;
    for (int64_t j = 0; j < n; j += 8) {
      __m256 v = masked8(c, r, i, j0, j, lim, x);
      _mm256_storeu_ps(x + j, v);
      vmax = _mm256_max_ps(vmax, v);
    }
    float mx = hmax8(vmax), mn = mx > m[i] ? mx : m[i];
    if (mn == -INFINITY) { /* nothing visible yet: keep l = 0, p = 0 */
      for (int64_t j = 0; j < n; j += 8)
        _mm256_storeu_ps(x + j, _mm256_setzero_ps());
      alpha[i] = 1;
      continue;
    }
    alpha[i] = m[i] == -INFINITY ? 0.0f : nr_expf_v(c->math, m[i] - mn);
    __m256 vm = _mm256_set1_ps(mn), sum = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
      __m256 v = _mm256_loadu_ps(x + j);
      __m256 e = nr_v8_exp(_mm256_sub_ps(v, vm), fast);
      e = _mm256_and_ps(e, _mm256_cmp_ps(v, ninf, _CMP_NEQ_OQ)); /* masked: exactly 0 */
      _mm256_storeu_ps(x + j, e);
      sum = _mm256_add_ps(sum, e);
    }
    l[i] = l[i] * alpha[i] + hsum8(sum);
    m[i] = mn;
  }
}

/* ---- P V ------------------------------------------------------------------------ */

/* Columns [e, e + 8 * NV) of the output rows; with NV == 1, lanes outside `cols` are
 * neither loaded nor stored. Every loop over the rows has the constant bound MR (the
 * stores test the row instead), so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
pv_tile(const nr_attn_rows *r, const float *const *p, int64_t j0, int64_t n,
        const float *const *oin, const float *alpha, float *out, int64_t out_rs,
        const float *post, int64_t e, const int nv, __m256i cols) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    if (oin) {
      __m256 a = _mm256_set1_ps(alpha[i]);
      acc[i][0] = _mm256_mul_ps(a, nv == 2 ? _mm256_loadu_ps(oin[i] + e)
                                           : _mm256_maskload_ps(oin[i] + e, cols));
      if (nv == 2)
        acc[i][1] = _mm256_mul_ps(a, _mm256_loadu_ps(oin[i] + e + 8));
    }
  }
  const float *v = r->v + j0 * r->v_rs + e;
  for (int64_t j = 0; j < n; j++, v += r->v_rs) {
    __m256 v0 = nv == 2 ? _mm256_loadu_ps(v) : _mm256_maskload_ps(v, cols), v1 = v0;
    if (nv == 2)
      v1 = _mm256_loadu_ps(v + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m256 b = _mm256_broadcast_ss(p[i] + j);
      acc[i][0] = _mm256_fmadd_ps(b, v0, acc[i][0]);
      if (nv == 2)
        acc[i][1] = _mm256_fmadd_ps(b, v1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    if (i >= r->rows)
      break;
    float *y = out + i * out_rs + e;
    __m256 sc = _mm256_set1_ps(post ? post[i] : 1.0f);
    if (nv == 2) {
      _mm256_storeu_ps(y, _mm256_mul_ps(acc[i][0], sc));
      _mm256_storeu_ps(y + 8, _mm256_mul_ps(acc[i][1], sc));
    } else {
      _mm256_maskstore_ps(y, cols, _mm256_mul_ps(acc[i][0], sc));
    }
  }
}

static void pv_avx2(const nr_attn_rows *r, const float *p, int64_t ps, int64_t j0,
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
  const __m256i all = _mm256_set1_epi32(-1);
  const float *const *oi = oin ? orow : NULL;
  int64_t e = 0;
  for (; e + 16 <= r->dv; e += 16)
    pv_tile(r, pr, j0, n, oi, al, out, out_rs, post, e, 2, all);
  for (; e < r->dv; e += 8)
    pv_tile(r, pr, j0, n, oi, al, out, out_rs, post, e, 1, lanes_below(r->dv - e));
}

static const nr_attn_ops ops_avx2 = {scores_avx2, softmax_avx2, pv_avx2};

void nr_f32_attention_rows__avx2(const nr_attn_cfg *c, const nr_attn_rows *r,
                                 float *work) {
  nr_attn_run_rows(c, r, work, &ops_avx2);
}
