/* attn_body.h - the one body of the fused attention kernel's vector pieces (Q K^T,
 * softmax update, P V: attn_impl.h's nr_attn_ops) for attn__avx2.c and attn__avx512.c
 * alike, over the nr_vf_* helpers. Each file includes its ISA's simd header and vmath
 * header, defines ATTN_NAME (the entry point), ATTN_EXP (its vmath exp) and a static
 * masked_block (the scaled and masked scores of NR_VF_LANES keys: the bool mask is
 * read per ISA, widened bytes at 8 lanes, a k-mask test at 16), then includes this.
 *
 * Both products are broadcast micro-kernels over the 6-row register tile
 * (NR_ATTN_MR, which sizes the work area): Q K^T broadcasts q_id and loads two
 * vectors of the packed K^T row d (2 * NR_VF_LANES keys, then a one-vector remainder;
 * nc is a multiple of 16, so at 8 lanes there is none); P V broadcasts p_ij and loads
 * V row j straight from the activation (no packing: V rows are contiguous),
 * 2 * NR_VF_LANES, NR_VF_LANES or a masked remainder of columns at a time. The
 * accumulators are constant-size arrays gcc unrolls into registers. The softmax works
 * NR_VF_LANES keys at a time and forces masked keys to exactly 0; its row sums add
 * NR_VF_LANES partial sums, so the two ISAs differ by reassociation only (each gives
 * the bits it gave as a separate file). At 8 lanes the softmax was 40% of a bert_tiny
 * head; one head alone (128 x 128, D 64) ran 41 us at 16 lanes against 59 at 8. */
#include "kernels/cpu/attn/attn_impl.h"

#include <math.h>

#define MR NR_ATTN_MR
#define NV_LANES NR_VF_LANES

/* ---- Q K^T ---------------------------------------------------------------------- */

static inline __attribute__((always_inline)) void
scores_tile(const nr_attn_rows *r, const float *const *q, const float *k, float *s,
            int64_t ss, const int nv) {
  nr_vf acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
    acc[i][0] = acc[i][1] = nr_vf_zero();
  for (int64_t d = 0; d < r->d; d++, k += r->kt_pad) {
    nr_vf k0 = nr_vf_load(k), k1 = nv == 2 ? nr_vf_load(k + NV_LANES) : k0;
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      nr_vf b = nr_vf_broadcast(q[i] + d);
      acc[i][0] = nr_vf_fma(b, k0, acc[i][0]);
      if (nv == 2)
        acc[i][1] = nr_vf_fma(b, k1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    nr_vf_store(s + i * ss, acc[i][0]);
    if (nv == 2)
      nr_vf_store(s + i * ss + NV_LANES, acc[i][1]);
  }
}

static void scores_vf(const nr_attn_rows *r, int64_t j0, int64_t nc, float *s,
                      int64_t ss) {
  const float *q[MR];
  for (int i = 0; i < MR; i++)
    q[i] = r->q + (i < r->rows ? i : r->rows - 1) * r->q_rs;
  int64_t c = 0;
  for (; c + 2 * NV_LANES <= nc; c += 2 * NV_LANES)
    scores_tile(r, q, r->kt + j0 + c, s + c, ss, 2);
  if (c < nc)
    scores_tile(r, q, r->kt + j0 + c, s + c, ss, 1);
}

/* ---- softmax update ------------------------------------------------------------- */

static void softmax_vf(const nr_attn_cfg *c, const nr_attn_rows *r, int64_t j0, int64_t n,
                       float *s, int64_t ss, float *m, float *l, float *alpha) {
  int fast = c->math == NR_VMATH_FAST;
  const nr_vf ninf = nr_vf_set1(-INFINITY);
  for (int i = 0; i < r->rows; i++) {
    float *x = s + i * ss;
    int64_t lim = c->causal && r->i0 + i - j0 + 1 < n ? r->i0 + i - j0 + 1 : n;
    nr_vf vmax = ninf;
    for (int64_t j = 0; j < n; j += NV_LANES) {
      nr_vf v = masked_block(c, r, i, j0, j, lim, x);
      nr_vf_store(x + j, v);
      vmax = nr_vf_max(vmax, v);
    }
    float mx = nr_vf_hmax(vmax), mn = mx > m[i] ? mx : m[i];
    if (mn == -INFINITY) { /* nothing visible yet: keep l = 0, p = 0 */
      for (int64_t j = 0; j < n; j += NV_LANES)
        nr_vf_store(x + j, nr_vf_zero());
      alpha[i] = 1;
      continue;
    }
    alpha[i] = m[i] == -INFINITY ? 0.0f : nr_expf_v(c->math, m[i] - mn);
    nr_vf vm = nr_vf_set1(mn), sum = nr_vf_zero();
    for (int64_t j = 0; j < n; j += NV_LANES) {
      nr_vf v = nr_vf_load(x + j);
      nr_vf e = ATTN_EXP(nr_vf_sub(v, vm), fast);
      e = nr_vf_keep_ne(e, v, ninf); /* masked: exactly 0 */
      nr_vf_store(x + j, e);
      sum = nr_vf_add(sum, e);
    }
    l[i] = l[i] * alpha[i] + nr_vf_hsum(sum);
    m[i] = mn;
  }
}

/* ---- P V ------------------------------------------------------------------------ */

/* Columns [e, e + NV_LANES * nv) of the output rows; with nv == 1, lanes outside
 * `cols` are neither loaded nor stored. Every loop over the rows has the constant
 * bound MR (the stores test the row instead), so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
pv_tile(const nr_attn_rows *r, const float *const *p, int64_t j0, int64_t n,
        const float *const *oin, const float *alpha, float *out, int64_t out_rs,
        const float *post, int64_t e, const int nv, nr_vm cols) {
  nr_vf acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    acc[i][0] = acc[i][1] = nr_vf_zero();
    if (oin) {
      nr_vf a = nr_vf_set1(alpha[i]);
      acc[i][0] = nr_vf_mul(a, nv == 2 ? nr_vf_load(oin[i] + e)
                                       : nr_vf_load_tail(oin[i] + e, cols));
      if (nv == 2)
        acc[i][1] = nr_vf_mul(a, nr_vf_load(oin[i] + e + NV_LANES));
    }
  }
  const float *v = r->v + j0 * r->v_rs + e;
  for (int64_t j = 0; j < n; j++, v += r->v_rs) {
    nr_vf v0 = nv == 2 ? nr_vf_load(v) : nr_vf_load_tail(v, cols), v1 = v0;
    if (nv == 2)
      v1 = nr_vf_load(v + NV_LANES);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      nr_vf b = nr_vf_broadcast(p[i] + j);
      acc[i][0] = nr_vf_fma(b, v0, acc[i][0]);
      if (nv == 2)
        acc[i][1] = nr_vf_fma(b, v1, acc[i][1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) {
    if (i >= r->rows)
      break;
    float *y = out + i * out_rs + e;
    nr_vf sc = nr_vf_set1(post ? post[i] : 1.0f);
    if (nv == 2) {
      nr_vf_store(y, nr_vf_mul(acc[i][0], sc));
      nr_vf_store(y + NV_LANES, nr_vf_mul(acc[i][1], sc));
    } else {
      nr_vf_store_tail(y, cols, nr_vf_mul(acc[i][0], sc));
    }
  }
}

static void pv_vf(const nr_attn_rows *r, const float *p, int64_t ps, int64_t j0,
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
  for (; e + 2 * NV_LANES <= r->dv; e += 2 * NV_LANES)
    pv_tile(r, pr, j0, n, oi, al, out, out_rs, post, e, 2, nr_vm_all());
  for (; e < r->dv; e += NV_LANES)
    pv_tile(r, pr, j0, n, oi, al, out, out_rs, post, e, 1, nr_vm_first(r->dv - e));
}

static const nr_attn_ops ops_vf = {scores_vf, softmax_vf, pv_vf};

void ATTN_NAME(const nr_attn_cfg *c, const nr_attn_rows *r, float *work) {
  nr_attn_run_rows(c, r, work, &ops_vf);
}
