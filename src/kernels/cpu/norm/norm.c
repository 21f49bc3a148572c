/* norm.c - portable row kernels of the normalization family (see norm.h). The
 * "reassoc" variants keep 8 interleaved partial sums like the vector kernels do, so a
 * route behaves alike with and without AVX2. */
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/norm_seq.h"

#include <math.h>
#include <stddef.h>

double nr_f32_sum__portable(const float *x, int64_t n, bool reassoc) {
  if (!reassoc) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
      s += x[i];
    return s;
  }
  float p[8] = {0};
  for (int64_t i = 0; i < n; i++)
    p[i & 7] += x[i];
  return (double)(((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7])));
}

static double exp_sum(const nr_softmax_cfg *c, const float *x, float *e, int64_t n,
                      float m) {
  for (int64_t i = 0; i < n; i++)
    e[i] = nr_expf_v(c->math, x[i] - m);
  return nr_f32_sum__portable(e, n, c->reassoc);
}

/* Max and sum in one sweep; the sum is rescaled whenever the max grows. */
static void online_max_sum(const nr_softmax_cfg *c, const float *x, int64_t n, float *m,
                           double *s) {
  float mx = -INFINITY;
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] > mx) {
      sum = sum * (double)nr_expf_v(c->math, mx - x[i]) + 1.0;
      mx = x[i];
    } else {
      sum += nr_expf_v(c->math, x[i] - mx);
    }
  }
  *m = mx;
  *s = sum;
}

void nr_f32_softmax_row__portable(const nr_softmax_cfg *c, const float *x, float *y,
                                  int64_t n) {
  float m = -INFINITY;
  double s;
  if (c->online) {
    online_max_sum(c, x, n, &m, &s);
  } else {
    for (int64_t i = 0; i < n; i++)
      m = x[i] > m ? x[i] : m;
    if (c->log) { /* y would be overwritten: sum without storing when x == y */
      s = 0;
      for (int64_t i = 0; i < n; i++)
        s += nr_expf_v(c->math, x[i] - m);
    } else {
      s = exp_sum(c, x, y, n, m);
    }
  }
  if (c->log) {
    float off = (float)((double)m + log(s));
    for (int64_t i = 0; i < n; i++)
      y[i] = x[i] - off;
    return;
  }
  float inv = (float)(1.0 / s);
  if (c->online)
    for (int64_t i = 0; i < n; i++)
      y[i] = nr_expf_v(c->math, x[i] - m) * inv;
  else
    for (int64_t i = 0; i < n; i++)
      y[i] = y[i] * inv;
}

/* Mean and variance of one row with 8 interleaved float partial sums (reassoc=on);
 * without reassociation rows go through nr_seq_moments (norm_seq.h). */
static void moments_reassoc(const nr_layernorm_cfg *c, const float *x, int64_t n,
                            double *mean, double *var) {
  if (c->one_pass) { /* the one-pass sums stay double and sequential, as before */
    nr_seq_moments(true, x, n, 1, mean, var);
    return;
  }
  double m = nr_f32_sum__portable(x, n, true) / (double)n;
  float p[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    double d = x[i] - m;
    p[i & 7] += (float)(d * d);
  }
  *mean = m;
  *var = (double)(((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]))) /
         (double)n;
}

static void ln_apply(const float *x, const float *scale, const float *bias, float *y,
                     int64_t n, double m, double v, float eps, float *mean, float *inv) {
  float is = (float)(1.0 / sqrt(v + eps)), mf = (float)m;
  for (int64_t i = 0; i < n; i++) {
    float t = (x[i] - mf) * is * scale[i];
    y[i] = bias ? t + bias[i] : t;
  }
  if (mean)
    *mean = mf;
  if (inv)
    *inv = is;
}

void nr_f32_layernorm_rows__portable(const nr_layernorm_cfg *c, const float *x,
                                     const float *scale, const float *bias, float *y,
                                     int64_t n, int64_t rows, float *mean, float *inv) {
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

void nr_f32_sum_rows__portable(const float *x, int64_t n, int64_t rows, bool reassoc,
                               double *out) {
  for (int64_t r0 = 0; r0 < rows; r0 += NR_SEQ_ROWS) {
    int k = rows - r0 < NR_SEQ_ROWS ? (int)(rows - r0) : NR_SEQ_ROWS;
    if (!reassoc)
      nr_seq_sums(x + r0 * n, n, n, k, out + r0);
    for (int i = 0; reassoc && i < k; i++)
      out[r0 + i] = nr_f32_sum__portable(x + (r0 + i) * n, n, true);
  }
}

void nr_f32_affine_row__portable(const float *x, float *y, int64_t n, float m, float a,
                                 float b) {
  for (int64_t i = 0; i < n; i++)
    y[i] = fmaf(x[i] - m, a, b);
}

void nr_f32_affine_rows__portable(const float *x, float *y, int64_t rows, int64_t c,
                                  const float *m, const float *a, const float *b) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < c; j++)
      y[r * c + j] = fmaf(x[r * c + j] - m[j], a[j], b[j]);
}

void nr_f32_groupnorm_rows__portable(const nr_groupnorm_cfg *c, const float *x,
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
        nr_f32_affine_row__portable(x + off, y + off, c->s, (float)m[i], a, b);
      }
    }
  }
}
