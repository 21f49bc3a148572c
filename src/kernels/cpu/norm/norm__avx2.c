/* norm__avx2.c - AVX2+FMA row kernels of the normalization family (norm.h).
 *
 * Max, exp and the normalizing sweep are always 8-wide (max is exact in any order);
 * only the sums honour reassoc: off keeps the reference's sequential double sum over
 * a vector-computed row, on keeps 8 partial sums in vector lanes. The online softmax
 * keeps a running max and sum per lane and merges the lanes at the end, so it is
 * reassociated by construction (its knob is an accuracy knob). */
#include "kernels/cpu/eltwise/vmath_avx2.h"
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/norm_seq.h"

#include <float.h>
#include <math.h>

static inline __m256i tail_mask(int64_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Loads lanes [i, min(i+8, n)) and fills the rest with fill. */
static inline __m256 load_fill(const float *x, int64_t i, int64_t n, float fill) {
  if (i + 8 <= n)
    return _mm256_loadu_ps(x + i);
  __m256i m = tail_mask(n - i);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(x + i, m),
                          _mm256_castsi256_ps(m));
}

static inline void store_n(float *y, int64_t i, int64_t n, __m256 v) {
  nr_vf_store_first(y + i, v, n - i);
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

double nr_f32_sum__avx2(const float *x, int64_t n, bool reassoc) {
  if (!reassoc) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
      s += x[i];
    return s;
  }
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8)
    acc = _mm256_add_ps(acc, load_fill(x, i, n, 0.0f));
  return hsum8(acc);
}

static float row_max(const float *x, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 8)
    m = _mm256_max_ps(m, load_fill(x, i, n, -INFINITY));
  return hmax8(m);
}

/* Sum of exp(x - m); stores the exps into e unless e is NULL. */
static double exp_sum(const nr_softmax_cfg *c, const float *x, float *e, int64_t n,
                      float m) {
  int f = c->math == NR_VMATH_FAST;
  __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
  float tmp[8];
  double s = 0;
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = nr_v8_exp(_mm256_sub_ps(load_fill(x, i, n, -INFINITY), vm), f);
    if (e)
      store_n(e, i, n, v);
    if (c->reassoc) {
      acc = _mm256_add_ps(acc, v);
      continue;
    }
    _mm256_storeu_ps(tmp, v);
    for (int k = 0; k < 8 && i + k < n; k++)
      s += tmp[k];
  }
  return c->reassoc ? hsum8(acc) : s;
}

/* Per-lane running max and sum, merged at the end. */
static void online_max_sum(const nr_softmax_cfg *c, const float *x, int64_t n, float *m,
                           double *s) {
  int f = c->math == NR_VMATH_FAST;
  __m256 vm = _mm256_set1_ps(-FLT_MAX), vs = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = load_fill(x, i, n, -INFINITY);
    __m256 nm = _mm256_max_ps(vm, v);
    vs = _mm256_fmadd_ps(vs, nr_v8_exp(_mm256_sub_ps(vm, nm), f),
                         nr_v8_exp(_mm256_sub_ps(v, nm), f));
    vm = nm;
  }
  float lm[8], ls[8];
  _mm256_storeu_ps(lm, vm);
  _mm256_storeu_ps(ls, vs);
  float mx = hmax8(vm);
  double sum = 0;
  for (int k = 0; k < 8; k++)
    sum += ls[k] * (double)expf(lm[k] - mx);
  *m = mx;
  *s = sum;
}

void nr_f32_softmax_row__avx2(const nr_softmax_cfg *c, const float *x, float *y, int64_t n) {
  float m;
  double s;
  if (c->online) {
    online_max_sum(c, x, n, &m, &s);
  } else {
    m = row_max(x, n);
    s = exp_sum(c, x, c->log ? NULL : y, n, m);
  }
  if (c->log) {
    __m256 off = _mm256_set1_ps((float)((double)m + log(s)));
    for (int64_t i = 0; i < n; i += 8)
      store_n(y, i, n, _mm256_sub_ps(load_fill(x, i, n, 0.0f), off));
    return;
  }
  __m256 inv = _mm256_set1_ps((float)(1.0 / s)), vm = _mm256_set1_ps(m);
  int f = c->math == NR_VMATH_FAST;
  for (int64_t i = 0; i < n; i += 8) {
    __m256 e = c->online ? nr_v8_exp(_mm256_sub_ps(load_fill(x, i, n, 0.0f), vm), f)
                         : load_fill(y, i, n, 0.0f);
    store_n(y, i, n, _mm256_mul_ps(e, inv));
  }
}

/* Sum and sum of squares in double lanes (4 + 4 partial sums each). */
static void sums_pd(const float *x, int64_t n, double *s, double *q) {
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, q0 = s0, q1 = s0;
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = load_fill(x, i, n, 0.0f);
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    s0 = _mm256_add_pd(s0, lo);
    s1 = _mm256_add_pd(s1, hi);
    q0 = _mm256_fmadd_pd(lo, lo, q0);
    q1 = _mm256_fmadd_pd(hi, hi, q1);
  }
  double a[4], b[4];
  _mm256_storeu_pd(a, _mm256_add_pd(s0, s1));
  _mm256_storeu_pd(b, _mm256_add_pd(q0, q1));
  *s = (a[0] + a[1]) + (a[2] + a[3]);
  *q = (b[0] + b[1]) + (b[2] + b[3]);
}

/* Mean and variance of one row with vector partial sums (reduce.reassoc=on); without
 * reassociation the rows go through nr_seq_moments (norm_seq.h), several at a time. */
static void moments_reassoc(const nr_layernorm_cfg *c, const float *x, int64_t n,
                            double *mean, double *var) {
  double s = 0, q = 0;
  if (c->one_pass) {
    sums_pd(x, n, &s, &q);
    *mean = s / (double)n;
    *var = fmax(q / (double)n - *mean * *mean, 0.0);
    return;
  }
  double m = nr_f32_sum__avx2(x, n, true) / (double)n;
  __m256 vm = _mm256_set1_ps((float)m), acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    __m256 d = _mm256_sub_ps(load_fill(x, i, n, (float)m), vm);
    acc = _mm256_fmadd_ps(d, d, acc);
  }
  *mean = m;
  *var = hsum8(acc) / (double)n;
}

static void ln_apply(const float *x, const float *scale, const float *bias, float *y,
                     int64_t n, double m, double v, float eps, float *mean, float *inv) {
  float is = (float)(1.0 / sqrt(v + eps)), mf = (float)m;
  __m256 vm = _mm256_set1_ps(mf), vi = _mm256_set1_ps(is);
  for (int64_t i = 0; i < n; i += 8) {
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(load_fill(x, i, n, 0.0f), vm), vi),
                             load_fill(scale, i, n, 0.0f));
    if (bias)
      t = _mm256_add_ps(t, load_fill(bias, i, n, 0.0f));
    store_n(y, i, n, t);
  }
  if (mean)
    *mean = mf;
  if (inv)
    *inv = is;
}

void nr_f32_layernorm_rows__avx2(const nr_layernorm_cfg *c, const float *x,
                                 const float *scale, const float *bias, float *y, int64_t n,
                                 int64_t rows, float *mean, float *inv) {
  for (int64_t r0 = 0; r0 < rows; r0 += NR_SEQ_ROWS) {
    int k = rows - r0 < NR_SEQ_ROWS ? (int)(rows - r0) : NR_SEQ_ROWS;
    double m[NR_SEQ_ROWS], v[NR_SEQ_ROWS];
    if (c->reassoc)
      for (int i = 0; i < k; i++)
        moments_reassoc(c, x + (r0 + i) * n, n, &m[i], &v[i]);
    else
      nr_seq_moments(c->one_pass, x + r0 * n, n, k, m, v);
    for (int i = 0; i < k; i++)
      ln_apply(x + (r0 + i) * n, scale, bias, y + (r0 + i) * n, n, m[i], v[i], c->eps,
               mean ? mean + r0 + i : NULL, inv ? inv + r0 + i : NULL);
  }
}

void nr_f32_sum_rows__avx2(const float *x, int64_t n, int64_t rows, bool reassoc,
                           double *out) {
  for (int64_t r0 = 0; r0 < rows; r0 += NR_SEQ_ROWS) {
    int k = rows - r0 < NR_SEQ_ROWS ? (int)(rows - r0) : NR_SEQ_ROWS;
    if (!reassoc)
      nr_seq_sums(x + r0 * n, n, n, k, out + r0);
    for (int i = 0; reassoc && i < k; i++)
      out[r0 + i] = nr_f32_sum__avx2(x + (r0 + i) * n, n, true);
  }
}

void nr_f32_affine_row__avx2(const float *x, float *y, int64_t n, float m, float a, float b) {
  __m256 vm = _mm256_set1_ps(m), va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_sub_ps(x0, vm), va, vb));
    _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(_mm256_sub_ps(x1, vm), va, vb));
  }
  for (; i < n; i += 8)
    store_n(y, i, n, _mm256_fmadd_ps(_mm256_sub_ps(load_fill(x, i, n, 0.0f), vm), va, vb));
}

void nr_f32_affine_rows__avx2(const float *x, float *y, int64_t rows, int64_t c,
                              const float *m, const float *a, const float *b) {
  for (int64_t r = 0; r < rows; r++, x += c, y += c)
    for (int64_t j = 0; j < c; j += 8) {
      __m256 v = _mm256_sub_ps(load_fill(x, j, c, 0.0f), load_fill(m, j, c, 0.0f));
      store_n(y, j, c, _mm256_fmadd_ps(v, load_fill(a, j, c, 0.0f), load_fill(b, j, c, 0.0f)));
    }
}

void nr_f32_groupnorm_rows__avx2(const nr_groupnorm_cfg *c, const float *x,
                                 const float *scale, const float *bias, float *y,
                                 int64_t r0, int64_t rows) {
  int64_t n = c->cpg * c->s;
  nr_layernorm_cfg lc = {.reassoc = true};
  for (int64_t b0 = r0; b0 < r0 + rows; b0 += NR_SEQ_ROWS) {
    int k = r0 + rows - b0 < NR_SEQ_ROWS ? (int)(r0 + rows - b0) : NR_SEQ_ROWS;
    double m[NR_SEQ_ROWS], v[NR_SEQ_ROWS];
    if (c->reassoc)
      for (int i = 0; i < k; i++)
        moments_reassoc(&lc, x + (b0 + i) * n, n, &m[i], &v[i]);
    else
      nr_seq_moments(false, x + b0 * n, n, k, m, v);
    for (int i = 0; i < k; i++) {
      double inv = 1.0 / sqrt(v[i] + c->eps);
      for (int64_t ch = 0; ch < c->cpg; ch++) {
        float a, b;
        int64_t off = (b0 + i) * n + ch * c->s;
        nr_groupnorm_coef(c, scale, bias, b0 + i, ch, inv, &a, &b);
        nr_f32_affine_row__avx2(x + off, y + off, c->s, (float)m[i], a, b);
      }
    }
  }
}
