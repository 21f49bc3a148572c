/* qgemm_impl.h - what the int8 GEMM family shares internally (qgemm.h is the contract
 * for other families): the micro-kernel signature, the declarations expanded from
 * qgemm_ukernels.inc, and the vectorized packers behind nr_qgemm's portable ones.
 *
 * A micro-kernel computes one mr x nr tile of C from a packed A panel (kq words of mr
 * 4-byte groups: A[i][4p..4p+3] at byte (p * mr + i) * 4) and a packed B panel (kq
 * words of nr groups: B[4p..4p+3][j] at byte (p * nr + j) * 4), the 4 consecutive k
 * of a group multiplied pairwise and summed into int32 (vpdpbusd's unit). Which panel
 * is s8 (the weights) and which u8 (the activations) is the kernel's wside. Per call:
 *   flags & NR_QGEMM_ACC:   the tile's int32 partial sums in C are added to
 *   flags & NR_QGEMM_FINAL: C = (float)(sum - corr[ch]) * scale[ch] + bias[ch] (out's
 *                           arrays start at the tile's first channel: its row for
 *                           W_A, its column for W_B), then in registers
 *     & NR_QGEMM_RES:       + res[i * ldr + j] (the residual, beta 1)
 *     & NR_QGEMM_RELU:      max(x, 0), or & NR_QGEMM_CLIP: min(hi, max(lo, x))
 *                           (the fp32 epilogue's operand order, so NaN agrees);
 *   else C = sum as int32.
 * ldc is in elements (4 bytes either way). Kernels see only full tiles; the loop
 * nest sends edge tiles through a local tile with padded per-channel arrays and
 * applies residual and activation to them with the fp32 epilogue. */
#ifndef NR_KERNELS_CPU_QGEMM_IMPL_H
#define NR_KERNELS_CPU_QGEMM_IMPL_H

#include "kernels/cpu/gemm/gemm_common.h"
#include "kernels/cpu/qgemm/qgemm.h"
#include "plan/tactic.h"

enum {
  NR_QGEMM_ACC = 1,
  NR_QGEMM_FINAL = 2,
  NR_QGEMM_RES = 4,
  NR_QGEMM_RELU = 8,
  NR_QGEMM_CLIP = 16,
};

/* What the last k block applies (pointers at the tile's first channel / element). */
typedef struct nr_qgemm_out {
  const float *scale;
  const int32_t *corr;
  const float *bias; /* NULL: none */
  const float *res;  /* NR_QGEMM_RES */
  int64_t ldr;
  float lo, hi; /* NR_QGEMM_CLIP */
} nr_qgemm_out;

typedef void (*nr_qgemm_ukernel_fn)(int64_t kq, const void *a, const void *b, void *c,
                                    int64_t ldc, int flags, const nr_qgemm_out *o);

#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax)                                   \
  void name(int64_t kq, const void *a, const void *b, void *c, int64_t ldc, int flags,     \
            const nr_qgemm_out *o);
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL

enum {
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax) NR_QGEMM_UK_##name,
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL
  NR_QGEMM_UK_COUNT
};

/* The family record the shared driver (gemm_common.h) runs this family by. */
extern const nr_gemm_family nr_qgemm_family;
/* The micro-kernel function of list entry i, NULL when out of range. */
nr_qgemm_ukernel_fn nr_qgemm_ukernel_fn_get(int i);

/* The largest tile of the list (edge tiles go through a local one). */
#define NR_QGEMM_MAX_MR 16
#define NR_QGEMM_MAX_NR 64

typedef enum nr_qgemm_split {
  NR_QGEMM_SPLIT_AUTO = 0,
  NR_QGEMM_SPLIT_M = 1, /* threads take row blocks */
  NR_QGEMM_SPLIT_N = 2, /* threads take column blocks */
} nr_qgemm_split;

/* nr_qgemm with the threaded dimension chosen by the caller. */
void nr_qgemm_split_run(nr_qgemm_cfg cfg, nr_qgemm_split split, int64_t m, int64_t n,
                        int64_t k, const void *w_packed, nr_qgemm_act x,
                        const nr_qgemm_dequant *dq, float *c, int64_t ldc,
                        const nr_epilogue *ep, void *scratch, nr_threadpool *pool,
                        int threads);

/* Vectorized activation packers (qpack__avx512.c with NR_ISA_AVX512, qpack__avx2.c
 * with NR_ISA_AVX2; qgemm.c holds the portable ones and picks). "k-major": source row p
 * (kb rows, ld elements apart) holds the tile dimension contiguously; the block is
 * written as panels of `width` (a multiple of 16 for these) columns of kq words each,
 * rows past kb and columns past `cols` zero. Elements are float32 to quantize (f32)
 * or u8 already quantized (u8). */
void nr_qgemm_pack_kmajor_f32__avx512(const float *src, int64_t ld, int64_t kb,
                                      int64_t cols, int width, float inv_scale,
                                      int32_t zero_point, int32_t qmax, uint8_t *out);
void nr_qgemm_pack_kmajor_u8__avx512(const uint8_t *src, int64_t ld, int64_t kb,
                                     int64_t cols, int width, uint8_t *out);
/* One group of `rows` (<= 4) u8 k-rows, ld apart, into word q of the panels of a block
 * of kq groups. */
void nr_qgemm_pack_quad_u8__avx512(const uint8_t *src, int64_t ld, int rows, int64_t cols,
                                   int width, int64_t kq, int64_t q, uint8_t *out);
/* The same three with ymm registers (qpack__avx2.c; width a multiple of 8). */
void nr_qgemm_pack_kmajor_f32__avx2(const float *src, int64_t ld, int64_t kb, int64_t cols,
                                    int width, float inv_scale, int32_t zero_point,
                                    int32_t qmax, uint8_t *out);
void nr_qgemm_pack_kmajor_u8__avx2(const uint8_t *src, int64_t ld, int64_t kb, int64_t cols,
                                   int width, uint8_t *out);
void nr_qgemm_pack_quad_u8__avx2(const uint8_t *src, int64_t ld, int rows, int64_t cols,
                                 int width, int64_t kq, int64_t q, uint8_t *out);
void nr_qgemm_quantize_row__avx512(const float *x, int64_t n, float inv_scale,
                                   int32_t zero_point, int32_t qmax, uint8_t *out);
void nr_qgemm_quantize_row__avx2(const float *x, int64_t n, float inv_scale,
                                 int32_t zero_point, int32_t qmax, uint8_t *out);

#endif
