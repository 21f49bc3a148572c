/* qgemm.h - nnroute's int8 GEMM, the one the int8 Gemm/MatMul/Conv tactics build on
 * (tactics_qgemm.c): s8 weights times u8 activations, int32 accumulation, written out
 * as float32 through the fp32 family's epilogue (kernels/cpu/gemm/gemm.h), or
 * requantized to u8 for a following int8 layer (nr_qgemm_to_u8).
 *
 *   C[M x N] = epilogue( dequant( A * B ) )     one of A, B is the weight matrix W
 *
 * Weights are symmetric per output channel: w = w_scale[ch] * q, q in [-127, 127]
 * (nr_qgemm_quantize_w), quantized and packed at build time. Activations are per
 * tensor, asymmetric u8: x = x_scale * (q - zero_point), q in [0, qmax]; they arrive
 * as float32 and are quantized *while they are packed* for the micro-kernel (or
 * arrive already quantized, as conv's u8 im2col columns do). The product of channel
 * ch is then
 *   sum_k w[ch][k] x[k] = x_scale * w_scale[ch] * (sum_k q_w q_x - zero_point * wsum[ch])
 * with wsum[ch] = sum_k q_w[ch][k] precomputed at build time, so the zero-point
 * correction costs one subtraction per output (nr_qgemm_dequant_build folds scales,
 * alpha, bias and the correction into three per-channel arrays).
 *
 * Key decision: which operand is W is a property of the micro-kernel (its `wside`).
 * A micro-kernel computes an mr x nr tile with the nr columns in vector lanes, so the
 * lanes must run along C's contiguous dimension: for a PLAIN convolution (C = W x
 * col, rows = output channels, columns = pixels) W is A, broadcast per row, and the
 * activations fill the lanes (NR_QGEMM_W_A); for Gemm/MatMul with constant weights
 * (C = X x W, columns = output channels) W is B, in the lanes, and the activations
 * are broadcast (NR_QGEMM_W_B). Both kinds share the packed format (4 consecutive k
 * of one row or column form one 32-bit word, the unit vpdpbusd consumes), the loop
 * nest, the threading and the epilogue; they differ only in which side is signed. */
#ifndef NR_KERNELS_CPU_QGEMM_H
#define NR_KERNELS_CPU_QGEMM_H

#include "kernels/cpu/gemm/gemm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nr_qgemm_wside {
  NR_QGEMM_W_A = 0, /* W is A (M = output channels): PLAIN convolution */
  NR_QGEMM_W_B = 1, /* W is B (N = output channels): Gemm / MatMul */
} nr_qgemm_wside;

/* A micro-kernel variant: one line of the enumerator list qgemm_ukernels.inc. */
typedef struct nr_qgemm_ukernel {
  const char *name; /* "nr_qs8_gemm_8x32__avx512vnni" */
  int mr, nr;
  unsigned isa; /* NR_ISA_* bits it needs (util/cpu.h) */
  int wside;    /* nr_qgemm_wside */
  int qmax;     /* activations must lie in [0, qmax]: 255, or 127 where pairwise
                   u8 x s8 sums must fit int16 (AVX2) */
} nr_qgemm_ukernel;

/* A tactic record: micro-kernel + cache blocking (kc a multiple of 4). Stored in
 * engines; `ukernel` indexes the list, which is append-only. */
typedef struct nr_qgemm_cfg {
  uint16_t ukernel;
  uint16_t mc, kc, nc;
} nr_qgemm_cfg;

int nr_qgemm_ukernel_count(void);
const nr_qgemm_ukernel *nr_qgemm_ukernel_get(int i);
/* Index of the micro-kernel called name, or -1. */
int nr_qgemm_ukernel_find(const char *name);
/* Blocking for micro-kernel uk on an m x n x k problem (the default tactic data). */
nr_qgemm_cfg nr_qgemm_default_cfg(int uk, int64_t m, int64_t n, int64_t k);

/* ---- weights (build time) ------------------------------------------------------- */

/* Quantizes a float weight matrix per channel: element (ch, p) is w[ch * stride_c +
 * p * stride_k] (so W_A's [M x K] has stride_c = K, stride_k = 1, and W_B's [K x N]
 * has stride_c = 1, stride_k = N). Writes q[ch * k + p] = round(w / scale[ch])
 * clamped to [-127, 127], with scale[ch] = max |w[ch][:]| / 127 (1 for an all-zero
 * channel), and wsum[ch] = sum_p q[ch * k + p]. A non-finite weight fails (false). */
bool nr_qgemm_quantize_w(int64_t channels, int64_t k, const float *w, int64_t stride_c,
                         int64_t stride_k, int8_t *q, float *scale, int32_t *wsum);

/* Bytes of W packed for cfg's micro-kernel: channels padded to its tile (mr for W_A,
 * nr for W_B), k to a multiple of 4. */
size_t nr_qgemm_packed_w_size(nr_qgemm_cfg cfg, int64_t channels, int64_t k);
/* Packs q (channels x k, row-major, from nr_qgemm_quantize_w) for cfg. */
void nr_qgemm_pack_w(nr_qgemm_cfg cfg, int64_t channels, int64_t k, const int8_t *q,
                     void *out);

/* What the micro-kernel's last k block turns int32 sums into floats with, per output
 * channel: c = (float)(acc - corr[ch]) * scale[ch] + bias[ch] (bias may be NULL). */
typedef struct nr_qgemm_dequant {
  const float *scale;
  const int32_t *corr;
  const float *bias;
} nr_qgemm_dequant;

/* Fills the per-channel arrays of a dequant record: scale[ch] = alpha * x_scale *
 * w_scale[ch], corr[ch] = x_zero_point * wsum[ch], bias[ch] = bias_scale * bias_in[ch]
 * (bias_in NULL: zeros; bias_n 1: broadcast). */
void nr_qgemm_dequant_build(int64_t channels, const float *w_scale, const int32_t *wsum,
                            float x_scale, int32_t x_zero_point, float alpha,
                            const float *bias_in, int64_t bias_n, float bias_scale,
                            float *scale, int32_t *corr, float *bias);

/* ---- activations (run time) ----------------------------------------------------- */

/* Produces rows [p, p + count) of a k-major op(X) (W_A's B), columns [t0, t0 + n), as
 * u8 in [0, qmax] into out (rows ld bytes apart); ctx is nr_qgemm_act.data. */
typedef void (*nr_qgemm_rows_fn)(const void *ctx, int64_t p, int count, int64_t t0,
                                 int64_t n, uint8_t *out, int64_t ld);

/* The activation operand: op(X) is A (M x K) for W_B kernels and B (K x N) for W_A
 * kernels. Float32 data is quantized while packed, q = clamp(round_even(x *
 * inv_scale) + zero_point, 0, qmax) in float arithmetic (NaN gives 0); u8 data (u8 =
 * true) is already quantized and must lie in [0, qmax]. Row-major with leading
 * dimension ld (elements); trans: op(X) = X^T. With `rows` set (W_A only, trans
 * false), nothing is stored: each k-row of a block is produced on demand into a small
 * staging area in L1 and packed from there (conv's implicit im2col). */
typedef struct nr_qgemm_act {
  const void *data;
  int64_t ld;
  bool trans;
  bool u8;
  float inv_scale; /* 1 / x_scale, as a float */
  int32_t zero_point;
  nr_qgemm_rows_fn rows;
} nr_qgemm_act;

/* One activation quantized as the packers do (the tests' and im2col's definition). */
static inline uint8_t nr_qgemm_quantize_x(float x, float inv_scale, int32_t zero_point,
                                          int32_t qmax) {
  float v = __builtin_nearbyintf(x * inv_scale) + (float)zero_point;
  v = v > 0.0f ? v : 0.0f; /* also NaN -> 0 */
  return (uint8_t)(v < (float)qmax ? v : (float)qmax);
}
/* n floats x[i * stride] quantized into out[0..n) (vectorized for stride 1). */
void nr_qgemm_quantize_row(const float *x, int64_t stride, int64_t n, float inv_scale,
                           int32_t zero_point, int32_t qmax, uint8_t *out);

/* Scratch bytes nr_qgemm needs on `threads` threads. */
size_t nr_qgemm_scratch_size(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                             int threads);

/* C = epilogue(dequant(op(A) * op(B))) where W (packed by nr_qgemm_pack_w with this
 * cfg) is A or B as the micro-kernel's wside says and x is the other operand; dq's
 * arrays are indexed by output channel (row for W_A, column for W_B) and ep (bias,
 * residual, activation; may be NULL) runs after it on each tile while it is in cache.
 * C is written once (between k blocks it holds int32 partial sums). pool may be
 * NULL; threads 0 = all of the pool. */
void nr_qgemm(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k, const void *w_packed,
              nr_qgemm_act x, const nr_qgemm_dequant *dq, float *c, int64_t ldc,
              const nr_epilogue *ep, void *scratch, nr_threadpool *pool, int threads);

/* An 8-bit result (the int8_chain pass): C requantized on the reader's grid, rows ldc
 * bytes apart, as the reader would have quantized the float C: q = clamp(rint(c *
 * inv_scale) + zero_point, 0, qmax) (nr_qgemm_quantize_x: this family's packers), or
 * with fma the oneDNN family's nr_quantize_u8 (rint(fma(c, inv_scale, zero_point))
 * clamped to [0, 255]). */
typedef struct nr_qgemm_y8 {
  uint8_t *c;
  int64_t ldc;
  float inv_scale;
  int32_t zero_point, qmax;
  bool fma;
} nr_qgemm_y8;

/* Scratch bytes of nr_qgemm_to_u8 on `threads` threads: nr_qgemm's, plus per thread
 * the float block of C that holds partial sums and the tile before requantization. */
size_t nr_qgemm_u8_scratch_size(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                                int threads);

/* nr_qgemm with C written as y->c: every tile is computed (dequantized, epilogue
 * applied) in floats exactly as nr_qgemm computes it, in a per-thread block of the
 * scratch, and requantized while it is in L1. The epilogue's residual, bias and
 * activation see the same row and column indices as in nr_qgemm. */
void nr_qgemm_to_u8(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k, const void *w_packed,
                    nr_qgemm_act x, const nr_qgemm_dequant *dq, const nr_qgemm_y8 *y,
                    const nr_epilogue *ep, void *scratch, nr_threadpool *pool,
                    int threads);

#endif
