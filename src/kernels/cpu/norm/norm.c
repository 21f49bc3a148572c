/* norm.c - portable row kernels of the normalization family (see norm.h). The
 * "reassoc" variants keep 8 interleaved partial sums like the vector kernels do, so a
 * route behaves alike with and without AVX2. */
#include "kernels/cpu/norm/norm.h"

#include <math.h>

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

static void moments(const nr_layernorm_cfg *c, const float *x, int64_t n, double *mean,
                    double *var) {
  if (c->one_pass) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) {
      s += x[i];
      q += (double)x[i] * x[i];
    }
    *mean = s / (double)n;
    *var = fmax(q / (double)n - *mean * *mean, 0.0);
    return;
  }
  double m = nr_f32_sum__portable(x, n, c->reassoc) / (double)n, q = 0;
  float p[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    double d = x[i] - m;
    if (c->reassoc)
      p[i & 7] += (float)(d * d);
    else
      q += d * d;
  }
  if (c->reassoc)
    q = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
  *mean = m;
  *var = q / (double)n;
}

void nr_f32_layernorm_row__portable(const nr_layernorm_cfg *c, const float *x,
                                    const float *scale, const float *bias, float *y,
                                    int64_t n, float *mean, float *inv) {
  double m, v;
  moments(c, x, n, &m, &v);
  float is = (float)(1.0 / sqrt(v + c->eps)), mf = (float)m;
  for (int64_t i = 0; i < n; i++) {
    float t = (x[i] - mf) * is * scale[i];
    y[i] = bias ? t + bias[i] : t;
  }
  *mean = mf;
  *inv = is;
}
