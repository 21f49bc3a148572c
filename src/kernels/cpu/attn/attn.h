/* attn.h - the fused attention kernels: scaled dot-product attention for a block of
 * query rows of one (batch, head), in a portable, an AVX2 and an AVX-512 version.
 *
 * Key decision: the scores never exist for more than NR_ATTN_MR query rows at a time.
 * A block computes its rows' scores against one block of keys (Q K^T from K^T packed
 * per head, kt_pad columns zero-padded to a multiple of 16), scales and masks them,
 * exponentiates against the running row maximum and accumulates P V; with kv_block
 * shorter than the key count the softmax is online (flash attention: the running sum
 * and the partial output are rescaled when the maximum grows), so memory stays
 * O(MR x kv_block) whatever the sequence length. The tactic (tactics_attn.c) packs
 * K^T, splits the rows across threads and gives every thread its own work area. */
#ifndef NR_KERNELS_CPU_ATTN_ATTN_H
#define NR_KERNELS_CPU_ATTN_ATTN_H

#include "kernels/cpu/eltwise/vmath.h"

#include <stdbool.h>
#include <stdint.h>

#define NR_ATTN_MR 6 /* query rows per block (the register tile's rows) */

/* What stays fixed for a step: its params record holds one. */
typedef struct nr_attn_cfg {
  float scale;      /* applied to Q K^T */
  int32_t kv_block; /* keys per block; 0: all keys in one block */
  uint8_t math;     /* nr_vmath of the exp */
  uint8_t causal;   /* key j visible to query i only when j <= i */
  uint8_t mask;     /* NR_ATTN_MASK_* */
  uint8_t pad;
} nr_attn_cfg;

enum { NR_ATTN_MASK_NONE = 0, NR_ATTN_MASK_FLOAT, NR_ATTN_MASK_BOOL };

/* One block of rows (<= NR_ATTN_MR) of one head. Strides are in elements. */
typedef struct nr_attn_rows {
  int rows;           /* 1..NR_ATTN_MR */
  int64_t i0;         /* query index of the first row (causal masking) */
  int64_t t, d, dv;   /* keys, head size of Q/K, head size of V */
  const float *q;     /* row r at q + r * q_rs, d contiguous floats */
  int64_t q_rs;
  const float *kt;    /* K^T of the head: d rows of kt_pad floats (zero padding) */
  int64_t kt_pad;
  const float *v;     /* key row j at v + j * v_rs, dv contiguous floats */
  int64_t v_rs;
  const void *mask;   /* row r's mask at mask + r * mask_rs (t contiguous), or NULL */
  int64_t mask_rs;
  float *y;           /* row r at y + r * y_rs */
  int64_t y_rs;
} nr_attn_rows;

/* Floats of work area one block needs (scores, partial output, max and sum). */
int64_t nr_attn_work_floats(const nr_attn_cfg *c, int64_t t, int64_t dv);

/* y rows = softmax(scale * q k^T + mask) v; work holds nr_attn_work_floats floats,
 * 32-byte aligned. A row whose keys are all masked gets zeros (the reference's rule). */
void nr_f32_attention_rows__portable(const nr_attn_cfg *c, const nr_attn_rows *r,
                                     float *work);
void nr_f32_attention_rows__avx2(const nr_attn_cfg *c, const nr_attn_rows *r,
                                 float *work);
void nr_f32_attention_rows__avx512(const nr_attn_cfg *c, const nr_attn_rows *r,
                                   float *work);

/* Knob listing (tactics_attn.c): does the fused tactic run an attention at node n of
 * the prepared graph under the default route (a supported Attention, or the Softmax
 * anchor of a pattern recognize.attention replaces)? eltwise.math lists it then. */
struct nr_graph;
struct nr_node;
bool nr_attn_fused(const struct nr_graph *g, const struct nr_node *n);

#endif
