/* onednn_q.h - what the oneDNN int8 tactics share (onednn_conv_int8 in
 * conv/conv_onednn_q.c, onednn_matmul_int8 in gemm/gemm_onednn_q.c, the table in
 * onednn_q.c): the packed record each step stores in the engine, the weight and
 * activation quantizers, the post-op mapping, a process-wide cache of primitives and
 * the banded executor.
 *
 * The quantization scheme. Activations arrive as fp32 and are quantized in run() (our
 * loop, quantize.c) to u8 with the per-tensor scale and zero point the calibration
 * gives (q = sat_u8(round_half_even(fma(x, 1 / s, zp)))); the zero point goes to the
 * primitive as a src zero-point attribute, so the sum over K sees real zeros. A
 * non-negative tensor (after a ReLU, which is most of them) has zp = 0, and then oneDNN
 * 2.6 uses its fastest kernels (brgconv, brgemm); an asymmetric one keeps all 8 bits
 * (a symmetric s8 shift would leave 7) at the price of oneDNN's zero-point
 * compensation. Weights are s8, symmetric per output channel (scale = max|w| / 127),
 * quantized and reordered at build time into the blocked format the primitive chose,
 * compensation included. The output is fp32: per-channel output scales s_x * s_w[oc]
 * (times Gemm's alpha), then bias, residual (sum post-op) and activation (eltwise
 * post-ops) inside the primitive. Between int8 layers (the int8_chain pass) a conv's
 * input may arrive as uint8 already on its grid (copied where it would have been
 * quantized), and its output may leave as uint8 on the next layer's grid: the
 * primitive still writes fp32, into a band-sized buffer of the thread, which the
 * executor requantizes as the reader would have (onednn_q.c says when it may).
 *
 * Threads: bands on nnroute's pool, not oneDNN's OpenMP team. oneDNN 2.6 here is an
 * OpenMP build whose kernels split work statically and meet at barriers; on a
 * machine with more runnable threads than cores a descheduled team member stalls the
 * others for a scheduler tick at every barrier (a 0.4 ms conv took 7 to 13 ms at 2
 * threads on the shared 2-core machine). So every primitive is created for one thread
 * and a step is cut into independent work items, `bands` slices of output rows per
 * image, that the context's pool hands out one at a time: a late worker's items are
 * simply taken by the caller. oneDNN also chooses the weight format by the problem it
 * sees (and by the thread count, which is why that is always 1), so all bands but the
 * last have the same rows and the band count is one whose band primitives agree on
 * the format (tried from twice the engine's threads down to 1 at build time). Bands
 * run at once, so each primitive takes its scratchpad from the step's scratch (user
 * scratchpad mode), one per thread: oneDNN's own would be shared between them.
 *
 * The record. Primitives cannot be stored in an engine, so everything needed to
 * recreate them lives in the packed record (the activation's scale and zero point,
 * the bands, the output scales, the bias pre-divided by them since oneDNN adds the
 * bias before scaling, the weights and the memory descriptor of their format).
 * Primitives are made on first use and cached for the process, keyed by the step's
 * params record, the activation's quantization, the bands and the output scales;
 * run() checks that the cached primitives still want the weights in the format the
 * engine holds them in. */
#ifndef NR_KERNELS_CPU_ONEDNN_Q_H
#define NR_KERNELS_CPU_ONEDNN_Q_H

#include "kernels/act.h"
#include "plan/quant.h"
#include "plan/tactic.h"

#include <dnnl.h>
#include <stdbool.h>
#include <stdint.h>

/* The start of a step's packed data. Offsets count from the start of the record. */
typedef struct nr_onednn_q_head {
  char magic[8];            /* "NRODNQ1" */
  float x_scale;            /* input 0: x = x_scale * (q - x_zp) */
  int32_t x_zp;
  uint32_t n_out;           /* output channels (conv) or columns (GEMM) */
  uint32_t bands;           /* work items per image */
  uint32_t rows, last_rows; /* output rows of a band, and of the last band */
  uint32_t threads;         /* threads that may run bands at once (scratchpads) */
  uint32_t reserved;
  uint64_t scales_off;      /* n_out floats: s_x * s_w[o] (* alpha) */
  uint64_t bias_off;        /* n_out floats: bias / scale, or 0 without bias */
  uint64_t w_off, w_size;   /* the weights in w_md's format, 64-byte aligned */
  dnnl_memory_desc_t w_md;
  /* Output 0 as uint8 (the int8_chain pass) when y_round is an nr_q8_round: each band
   * runs into a float buffer of its thread and is requantized on this grid. */
  float y_inv_scale;
  int32_t y_zp, y_qmax, y_round;
} nr_onednn_q_head;

/* Per-channel symmetric s8 quantization of n_out rows of `len` weights, element
 * (o, i) at w[o * so + i * si]; q gets the same layout, scale[o] = max|w| / 127 (1
 * for an all-zero row). Rounds half to even. */
void nr_onednn_q_weights(const float *w, int64_t n_out, int64_t len, int64_t so,
                         int64_t si, int8_t *q, float *scale);

/* The largest activation code the primitives take here: 255 where oneDNN multiplies
 * u8 by s8 with VNNI (int32 accumulation), else 127: without VNNI it sums pairs of
 * u8 x s8 products in int16 (vpmaddubsw), which 7-bit activations keep from
 * saturating, and a pre-quantized model's grid is rescaled to them. */
int nr_onednn_q_act_qmax(void);
/* The quantization of the step's input 0 (nr_quant_act_params) on the grid
 * [0, nr_onednn_q_act_qmax()], checked usable. */
nr_status nr_onednn_q_input_params(const nr_tactic_ctx *c, nr_qparams *q);

/* Appends act(a, b) to po as eltwise post-ops; false when oneDNN has no post-op for
 * it (the caller applies it after the primitive). */
bool nr_onednn_q_act_post_ops(dnnl_post_ops_t po, nr_act act, float a, float b);

/* What identifies a step's primitives: the tactic kind, the step's params record with
 * fields that do not shape the primitives zeroed, the activation's quantization, the
 * bands. Zero the whole struct before filling it (it is compared bytewise). */
typedef struct nr_onednn_q_key {
  uint32_t kind; /* NR_ONEDNN_Q_CONV, NR_ONEDNN_Q_MATMUL */
  float x_scale;
  int32_t x_zp;
  uint32_t n_out;
  uint32_t bands, rows, last_rows;
  uint8_t rec[NR_TACTIC_PARAMS];
} nr_onednn_q_key;

enum { NR_ONEDNN_Q_CONV = 1, NR_ONEDNN_Q_MATMUL = 2 };

/* One band's primitive and the (dense) descriptors of its quantized input, its
 * output and its scratchpad. Create functions set the user scratchpad mode. */
typedef struct nr_onednn_q_band {
  dnnl_primitive_t op;
  dnnl_memory_desc_t xq_md, y_md, sp_md;
} nr_onednn_q_band;

/* A step's primitives: band[0] runs `rows` output rows, band[1] the last band's
 * `last_rows` when they differ. */
typedef struct nr_onednn_q_prim {
  nr_onednn_q_band band[2];
  dnnl_memory_desc_t w_md, b_md;
  bool manual_act; /* the activation runs after the primitive (no post-op for it) */
} nr_onednn_q_prim;

/* Makes the primitive for one band of `rows` output rows of key k (one thread): fills
 * *band, the weights' and bias's descriptors and *manual; false when oneDNN refuses. */
typedef bool (*nr_onednn_q_create_fn)(const nr_onednn_q_key *k, const float *scales,
                                      dnnl_engine_t eng, uint32_t rows,
                                      nr_onednn_q_band *band, dnnl_memory_desc_t *w_md,
                                      dnnl_memory_desc_t *b_md, bool *manual);

/* The cached primitives for (k, scales), created by `create` on first use; NULL when
 * oneDNN cannot create them, when the bands disagree on the weight format, or when
 * memory runs out. Entries live until the process exits or nr_onednn_q_cache_flush. */
const nr_onednn_q_prim *nr_onednn_q_lookup(const nr_onednn_q_key *k, const float *scales,
                                           nr_onednn_q_create_fn create);
/* Destroys every cached primitive, as a new process would start (tests); no int8 step
 * may be running. */
void nr_onednn_q_cache_flush(void);

/* Build time: picks the bands for out_rows output rows per image (fills k->bands,
 * rows, last_rows; *threads: how many may run at once) and returns their primitives,
 * or NULL. A problem of fewer than
 * 2^18 multiply-adds (a band's fixed cost is a few microseconds), or a step or engine
 * of one thread, gets one band. */
const nr_onednn_q_prim *nr_onednn_q_choose_bands(const nr_tactic_ctx *c, const nr_step *st,
                                                 nr_onednn_q_key *k, const float *scales,
                                                 nr_onednn_q_create_fn create,
                                                 int64_t out_rows, double macs,
                                                 uint32_t *threads);

/* Build time, after the primitives exist: reorders the s8 weights q (logical layout
 * user_md) into the primitives' format and appends the record (head fields x_scale,
 * x_zp, n_out and the bands already set; scales and bias, bias may be NULL) to the
 * engine. */
nr_status nr_onednn_q_pack(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                           nr_onednn_q_head *h, const nr_onednn_q_prim *p,
                           const dnnl_memory_desc_t *user_md, const int8_t *q,
                           const float *scales, const float *bias);

/* Run time: the step's record after checking its magic and that its offsets lie
 * inside the packed data; NULL (error recorded) otherwise. */
const nr_onednn_q_head *nr_onednn_q_head_get(const nr_exec_args *a, const char *who);

/* Where the work items of a step read and write. Per image the quantized input is
 * pad_top bytes of zero point, the `body` quantized floats of x (x_image floats apart
 * in x), pad_bottom bytes of zero point; band b reads from b * x_band bytes into its
 * image and writes from b * y_band floats into y's image (y_image floats apart). */
typedef struct nr_onednn_q_geom {
  int64_t images;
  int64_t pad_top, body, pad_bottom, x_image;
  int64_t x_band, y_image, y_band;
} nr_onednn_q_geom;

/* Scratch bytes of a step: the quantized input of geometry g, then one scratchpad per
 * thread h->threads, then (uint8 output) one float band per thread
 * (nr_onednn_q_execute lays them out so). */
uint64_t nr_onednn_q_scratch(const nr_onednn_q_geom *g, const nr_onednn_q_prim *p,
                             const nr_onednn_q_head *h);

/* Run time: quantizes x into the scratch (copies it, when the step's input slot is
 * uint8: the int8_chain pass), then runs the images x bands work items into y, both
 * spread over the context's pool (at most h->threads of it, and the step's threads). */
nr_status nr_onednn_q_execute(const nr_exec_args *a, const nr_onednn_q_prim *p,
                              const nr_onednn_q_head *h, const nr_onednn_q_geom *g,
                              const float *x, float *y, const char *who);

/* q[i] = sat_u8(round_half_even(fma(x[i], inv, zp))) for i < n (quantize.c), by the
 * widest loop nr_cpu_isa() allows; every variant gives the same bytes. */
void nr_quantize_u8(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp);
void nr_quantize_u8_portable(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp);
void nr_quantize_u8__avx2(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp);
void nr_quantize_u8__avx512(const float *x, uint8_t *q, int64_t n, float inv, int32_t zp);

/* Conv and GEMM entry points (conv/conv_onednn_q.c, gemm/gemm_onednn_q.c). */
bool nr_conv_onednn_q_supports(const nr_tactic_ctx *c);
nr_status nr_conv_onednn_q_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status nr_conv_onednn_q_run(const nr_exec_args *a);
bool nr_gemm_onednn_q_supports(const nr_tactic_ctx *c);
nr_status nr_gemm_onednn_q_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status nr_gemm_onednn_q_run(const nr_exec_args *a);

#endif
