/* attn_impl.h - what the portable, AVX2 and AVX-512 attention kernels share: the three
 * inner pieces each ISA implements and the block loop (attn.c) that strings them
 * together, written once.
 *
 * Row pointers of rows >= r->rows are clamped to the last valid row, so the pieces
 * always compute NR_ATTN_MR rows and only the stores look at r->rows. */
#ifndef NR_KERNELS_CPU_ATTN_ATTN_IMPL_H
#define NR_KERNELS_CPU_ATTN_ATTN_IMPL_H

#include "kernels/cpu/attn/attn.h"

typedef struct nr_attn_ops {
  /* s[i * ss + c] = q_i . k_(j0 + c) for c < nc (a multiple of 16, within kt_pad). */
  void (*scores)(const nr_attn_rows *r, int64_t j0, int64_t nc, float *s, int64_t ss);
  /* Row i over keys [j0, j0 + n): x = scale * s + mask (causal: -inf past the
   * diagonal); m_i grows to max(m_i, max x), alpha_i = exp(m_old - m_new) (0 while m
   * was -inf), s = exp(x - m_new), l_i = l_i * alpha_i + sum s. */
  void (*softmax)(const nr_attn_cfg *c, const nr_attn_rows *r, int64_t j0, int64_t n,
                  float *s, int64_t ss, float *m, float *l, float *alpha);
  /* out_i = (oin ? alpha_i * oin_i : 0) + sum_(j < n) p_ij v_(j0 + j), times post_i
   * when post is given; oin rows are dv apart, out rows out_rs apart; only rows
   * < r->rows are stored. */
  void (*pv)(const nr_attn_rows *r, const float *p, int64_t ps, int64_t j0, int64_t n,
             const float *oin, const float *alpha, float *out, int64_t out_rs,
             const float *post);
} nr_attn_ops;

/* The block loop over the keys with the given pieces. */
void nr_attn_run_rows(const nr_attn_cfg *c, const nr_attn_rows *r, float *work,
                      const nr_attn_ops *ops);

#endif
