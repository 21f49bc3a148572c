/* qgemm_tactic.h - what the int8 tactics (tactics_qgemm.c, qconv.c) share: the record
 * at the start of a step's packed data and the conv run functions.
 *
 * Key decision: the step params stay the fp32 family's own record (nr_gemm_step_params from
 * gemm_tactic.h, conv_p from conv_internal.h, each exactly 64 bytes and filled by the
 * same parsers), with the int8 blocking (nr_qgemm_cfg, the same four uint16 as
 * nr_gemm_cfg) in its cfg slot, so the fp32 run-time helpers (batch walk, epilogue,
 * residual layout) serve unchanged. What int8 adds, the activation's scale and zero
 * point and where the packed W and the per-channel dequantization arrays lie, is a
 * qt_header at the start of the packed data; prepare() writes it into the engine with
 * the weights, so run() derives nothing. */
#ifndef NR_KERNELS_CPU_QGEMM_TACTIC_H
#define NR_KERNELS_CPU_QGEMM_TACTIC_H

#include "kernels/cpu/qgemm/qgemm.h"
#include "plan/tactic.h"

typedef struct qt_header {
  float x_scale, inv_scale; /* the activation (input 0): x = x_scale * (q - zero_point) */
  int32_t zero_point, qmax;
  uint64_t w_off, w_unit;                 /* packed W: byte offset, bytes per conv group */
  uint64_t scale_off, corr_off, bias_off; /* per-channel arrays (float, int32, float) */
  uint64_t extra_off; /* Gemm: per-row bias (floats); conv: im2col masks, or 0 */
  /* Output 0 as uint8 (the int8_chain pass; the output slot's dtype says when): its
   * grid and how the reader rounds onto it (nr_q8_round). */
  float y_inv_scale;
  int32_t y_zero_point, y_qmax, y_round;
} qt_header;

/* Bytes reserved for the header at the start of the packed data. */
#define QT_HEADER_BYTES 128

/* The header of the step's packed data. */
static inline const qt_header *qt_hdr(const nr_exec_args *a) {
  return (const qt_header *)a->packed;
}

/* The dequantization arrays from channel ch0 on. */
static inline nr_qgemm_dequant qt_dequant(const nr_exec_args *a, int64_t ch0) {
  const qt_header *h = qt_hdr(a);
  const char *base = a->packed;
  return (nr_qgemm_dequant){(const float *)(base + h->scale_off) + ch0,
                            (const int32_t *)(base + h->corr_off) + ch0,
                            (const float *)(base + h->bias_off) + ch0};
}

/* The activation operand of a step, data at `data` with leading dimension ld. */
static inline nr_qgemm_act qt_act(const nr_exec_args *a, const void *data, int64_t ld,
                                  bool trans, bool u8) {
  const qt_header *h = qt_hdr(a);
  return (nr_qgemm_act){data, ld, trans, u8, h->inv_scale, h->zero_point};
}

/* The 8-bit output of the step (the int8_chain pass gave output 0 a uint8 slot) at
 * byte offset `at` of it, rows ldc bytes apart; false when the output is float. */
static inline bool qt_y8(const nr_exec_args *a, int64_t at, int64_t ldc, nr_qgemm_y8 *y) {
  const qt_header *h = qt_hdr(a);
  if (a->out_slot[0]->dtype != NR_DTYPE_UINT8)
    return false;
  *y = (nr_qgemm_y8){(uint8_t *)a->out[0] + at, ldc, h->y_inv_scale, h->y_zero_point,
                     h->y_qmax, h->y_round == NR_Q8_ROUND_FMA};
  return true;
}

/* PLAIN convolutions on the W_A kernels (qconv.c): 1x1 stride 1 unpadded straight on
 * X, anything else through u8 im2col rows made as the GEMM packs them. Each reads X
 * as float32 or, when its input slot is uint8 (the int8_chain pass), as bytes already
 * on its grid, and writes Y as float32 or requantized to uint8 (qt_y8). */
nr_status nr_qconv_1x1_run(const nr_exec_args *a);
nr_status nr_qconv_im2col_run(const nr_exec_args *a);
/* NHWC 1x1 stride 1 unpadded convolutions on the W_B kernels: the pixels as a GEMM's
 * rows, so they run between NHWC neighbours (oneDNN's) without reorders. */
nr_status nr_qconv_nhwc_1x1_run(const nr_exec_args *a);
/* The im2col masks of a stride-1 conv whose output rows are as wide as its input's:
 * for every tap (kh, kw) and every 64 output pixels (p = 64 * chunk + bit), bit set
 * when the tap reads inside the image. Count of uint64 (0: the geometry does not
 * qualify, or the table would pass 64 KiB) and the table itself (out NULL: count
 * only). */
struct conv_p;
int64_t nr_qconv_masks(const struct conv_p *p, uint64_t *out);
/* Scratch bytes of the im2col tactic besides the GEMM's: the image quantized. */
uint64_t nr_qconv_im2col_bytes(int64_t c, int64_t h, int64_t w);
/* out[i - a] for output columns i in [a, b) of one im2col row: xr[i * sw] when xr is
 * not NULL and lo <= i < hi, else zp; sw 1 or 2 (qim2col__avx512.c, NR_ISA_AVX512
 * only; stride 2 may read the byte after xr[(hi - 1) * 2]). */
void nr_qconv_col_seg__avx512(uint8_t *out, const uint8_t *xr, int64_t lo, int64_t hi,
                              int64_t a, int64_t b, int sw, uint8_t zp);
/* out[i] = x[p0 + i] where bit (p0 + i) % 64 of masks[(p0 + i) / 64] is set, else zp,
 * for i < n: one row of a conv with an im2col mask table, x already shifted by the
 * tap's offset (qim2col__avx512.c, NR_ISA_AVX512 only). */
void nr_qconv_col_masked__avx512(uint8_t *out, const uint8_t *x, const uint64_t *masks,
                                 int64_t p0, int64_t n, uint8_t zp);

#endif
