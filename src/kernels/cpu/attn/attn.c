/* attn.c - the attention block loop (attn_impl.h) and the portable pieces.
 *
 * The loop walks the keys in blocks of cfg->kv_block (all of them when 0): scores,
 * online softmax update, P V accumulated into the work area's partial output; the
 * last block writes y directly, scaled by 1/l, so a single-block run (the default)
 * touches the partial output never. Causal rows stop at the block holding their
 * diagonal. The portable pieces are plain loops the compiler may vectorize; they sum
 * in the same order as the AVX2 ones only up to reassociation. */
#include "kernels/cpu/attn/attn_impl.h"

#include <math.h>
#include <stddef.h>

static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

static int64_t block_keys(const nr_attn_cfg *c, int64_t t) {
  return c->kv_block > 0 && c->kv_block < t ? c->kv_block : t;
}

int64_t nr_attn_work_floats(const nr_attn_cfg *c, int64_t t, int64_t dv) {
  int64_t kbp = round16(block_keys(c, t));
  return NR_ATTN_MR * (kbp + round16(dv)) + 4 * 16;
}

void nr_attn_run_rows(const nr_attn_cfg *c, const nr_attn_rows *r, float *work,
                      const nr_attn_ops *ops) {
  int64_t kb = block_keys(c, r->t), kbp = round16(kb), dvp = round16(r->dv);
  float *s = work, *o = s + NR_ATTN_MR * kbp, *m = o + NR_ATTN_MR * dvp;
  float *l = m + 16, *alpha = l + 16, *post = alpha + 16;
  int64_t last_row = r->i0 + r->rows - 1; /* causal: no row sees keys beyond it */
  for (int i = 0; i < NR_ATTN_MR; i++)
    m[i] = -INFINITY, l[i] = 0, alpha[i] = 1, post[i] = 0;
  for (int64_t j0 = 0; j0 < r->t; j0 += kb) {
    int64_t n = r->t - j0 < kb ? r->t - j0 : kb;
    bool last = j0 + kb >= r->t || (c->causal && j0 + kb > last_row);
    ops->scores(r, j0, round16(n), s, kbp);
    ops->softmax(c, r, j0, n, s, kbp, m, l, alpha);
    for (int i = 0; last && i < r->rows; i++)
      post[i] = l[i] > 0 ? 1.0f / l[i] : 0.0f;
    ops->pv(r, s, kbp, j0, n, j0 ? o : NULL, alpha, last ? r->y : o,
            last ? r->y_rs : dvp, last ? post : NULL);
    if (last)
      break;
  }
}

/* ---- portable pieces ---------------------------------------------------------- */

static void scores_portable(const nr_attn_rows *r, int64_t j0, int64_t nc, float *s,
                            int64_t ss) {
  for (int i = 0; i < r->rows; i++) {
    const float *q = r->q + i * r->q_rs;
    float *si = s + i * ss;
    for (int64_t j = 0; j < nc; j++)
      si[j] = 0;
    for (int64_t d = 0; d < r->d; d++) {
      const float *k = r->kt + d * r->kt_pad + j0;
      float qd = q[d];
      for (int64_t j = 0; j < nc; j++)
        si[j] += qd * k[j];
    }
  }
}

/* x_j of row i (scaled, masked), written over s; returns the row's max. */
static float masked_row(const nr_attn_cfg *c, const nr_attn_rows *r, int i, int64_t j0,
                        int64_t n, float *x) {
  const float *fm = c->mask == NR_ATTN_MASK_FLOAT ? (const float *)r->mask : NULL;
  const uint8_t *bm = c->mask == NR_ATTN_MASK_BOOL ? (const uint8_t *)r->mask : NULL;
  int64_t vis = c->causal ? r->i0 + i - j0 + 1 : n; /* keys [0, vis) visible */
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    float v = x[j] * c->scale;
    if (fm)
      v += fm[i * r->mask_rs + j0 + j];
    if ((bm && !bm[i * r->mask_rs + j0 + j]) || j >= vis)
      v = -INFINITY;
    x[j] = v;
    mx = v > mx ? v : mx;
  }
  return mx;
}

static void softmax_portable(const nr_attn_cfg *c, const nr_attn_rows *r, int64_t j0,
                             int64_t n, float *s, int64_t ss, float *m, float *l,
                             float *alpha) {
  for (int i = 0; i < r->rows; i++) {
    float *x = s + i * ss;
    float mx = masked_row(c, r, i, j0, n, x), mn = mx > m[i] ? mx : m[i];
    if (mn == -INFINITY) { /* nothing visible yet: keep l = 0, p = 0 */
      for (int64_t j = 0; j < n; j++)
        x[j] = 0;
      alpha[i] = 1;
      continue;
    }
    alpha[i] = m[i] == -INFINITY ? 0.0f : nr_expf_v(c->math, m[i] - mn);
    float sum = 0;
    for (int64_t j = 0; j < n; j++)
      sum += x[j] = nr_expf_v(c->math, x[j] - mn);
    l[i] = l[i] * alpha[i] + sum;
    m[i] = mn;
  }
}

static void pv_portable(const nr_attn_rows *r, const float *p, int64_t ps, int64_t j0,
                        int64_t n, const float *oin, const float *alpha, float *out,
                        int64_t out_rs, const float *post) {
  int64_t dvp = (r->dv + 15) & ~(int64_t)15;
  for (int i = 0; i < r->rows; i++) {
    float *y = out + i * out_rs;
    const float *pi = p + i * ps;
    for (int64_t e = 0; e < r->dv; e++)
      y[e] = oin ? alpha[i] * oin[i * dvp + e] : 0.0f;
    for (int64_t j = 0; j < n; j++) {
      const float *v = r->v + (j0 + j) * r->v_rs;
      for (int64_t e = 0; e < r->dv; e++)
        y[e] += pi[j] * v[e];
    }
    for (int64_t e = 0; post && e < r->dv; e++)
      y[e] *= post[i];
  }
}

static const nr_attn_ops ops_portable = {scores_portable, softmax_portable, pv_portable};

void nr_f32_attention_rows__portable(const nr_attn_cfg *c, const nr_attn_rows *r,
                                     float *work) {
  nr_attn_run_rows(c, r, work, &ops_portable);
}
