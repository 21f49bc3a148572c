/* lpgemm.h - the narrow-storage GEMM behind the fp16 and bf16 tactics (precision@NODE
 * = fp16 | bf16) of Gemm, MatMul, FusedGemm, FusedMatMul and Conv (1x1, im2col):
 * operands stored as 16-bit floats, products accumulated in fp32.
 *
 *   C[M x N] = act(alpha * op(A) * op(B) + bias + beta * R)      (C, bias, R: fp32)
 *
 * Key decision: A, the broadcast side of the micro-kernels, is always fp32 in the
 * thread's A buffer; B, the vector side, is where widening is cheap (a narrow
 * broadcast side would cost a convert per FMA row). So:
 *  - B: a constant B (Gemm/MatMul weights) is packed narrow at build time, streamed
 *    narrow from the engine and widened inside the k loop (one vcvtph2ps, or for bf16
 *    one shift and one mask per two vectors); a runtime B (conv's im2col columns) is
 *    rounded to the narrow type while its block is packed, into fp32 panels that the
 *    fp32 micro-kernels read ("block widening": nr_lpgemm_default_cfg says why).
 *  - A: a constant A (conv weights) is packed narrow at build time and widened once
 *    per mc x kc cache block into the A buffer, where every micro-panel of B reuses
 *    it; a runtime A (Gemm/MatMul activations) is rounded to the narrow type while it
 *    is packed there.
 * Either way both operands carry exactly the values of narrow storage, and the
 * constant one costs half the bytes of fp32 in the engine and in memory traffic.
 *
 * The loop nest, blocking, threading and epilogue are those of the fp32 GEMM
 * (gemm.h); packed layouts are too, with 2-byte elements, except that the bf16
 * kernels with two vectors per B row store each row's two halves interleaved
 * (column j of a 2h-wide panel row at 2j for j < h and 2(j-h)+1 above), so one load
 * gives both vectors: x << 16 and x & 0xffff0000. */
#ifndef NR_KERNELS_CPU_LPGEMM_H
#define NR_KERNELS_CPU_LPGEMM_H

#include "kernels/cpu/gemm/gemm.h"
#include "plan/tactic.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- conversions --------------------------------------------------------------- */

typedef enum nr_lp_type {
  NR_LP_FP16 = 0, /* IEEE binary16: 5-bit exponent, 10-bit mantissa */
  NR_LP_BF16 = 1, /* bfloat16: the upper half of a binary32 */
} nr_lp_type;

static inline uint32_t nr_lp_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float nr_lp_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* fp32 -> fp16, round to nearest even (what vcvtps2ph with imm 0 does): overflow to
 * infinity from 65520 up, binary16 subnormals below 2^-14, NaNs stay NaN (quieted,
 * sign and the top payload bits kept). */
static inline uint16_t nr_fp32_to_fp16(float f) {
  uint32_t x = nr_lp_f32_bits(f), ax = x & 0x7fffffffu;
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  if (ax > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) /* 65520 and up, infinity included */
    return (uint16_t)(sign | 0x7c00u);
  if (ax >= 0x38800000u) { /* normal: round at mantissa bit 13, rebias 127 -> 15 */
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
  }
  if (ax < 0x33000000u) /* at most 2^-25, the tie with zero: zero */
    return sign;
  /* subnormal result: the value in units of 2^-24, rounded; a carry into 0x400 is
   * the smallest normal, which the encoding gets right by itself */
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  int shift = 126 - (int)(ax >> 23);
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  q += rem > half || (rem == half && (q & 1u));
  return (uint16_t)(sign | q);
}

/* fp16 -> fp32, exact (subnormals included); a NaN keeps sign and payload and comes
 * out quiet, as vcvtph2ps makes it. */
static inline float nr_fp16_to_fp32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f)
    return nr_lp_bits_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
  if (e == 0) {
    float v = (float)m * 0x1p-24f;
    return sign ? -v : v;
  }
  return nr_lp_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* fp32 -> bf16, round to nearest even on the upper 16 bits (overflow to infinity,
 * subnormals rounded like any other value); NaNs stay NaN (quiet bit set). */
static inline uint16_t nr_fp32_to_bf16(float f) {
  uint32_t x = nr_lp_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float nr_bf16_to_fp32(uint16_t h) {
  return nr_lp_bits_f32((uint32_t)h << 16);
}

/* Bulk forms: the widest ISA nr_cpu_isa() allows (bit-identical to the scalar ones).
 * round = widen(narrow(x)): the fp32 value narrow storage would give back. */
void nr_lp_narrow(nr_lp_type t, const float *src, uint16_t *dst, int64_t n);
void nr_lp_widen(nr_lp_type t, const uint16_t *src, float *dst, int64_t n);
void nr_lp_round(nr_lp_type t, const float *src, float *dst, int64_t n);

/* ---- the GEMM -------------------------------------------------------------------- */

/* How a kernel gets fp32 out of the narrow B panels. */
typedef enum nr_lp_widen_mode {
  NR_LP_WIDEN_KERNEL = 0, /* in the micro-kernel's k loop (the lp kernels) */
  NR_LP_WIDEN_BLOCK = 1,  /* per kc x nc block into a per-thread fp32 buffer (a packed
                             B widened, a raw one rounded), then an fp32 micro-kernel
                             of gemm_ukernels.inc */
} nr_lp_widen_mode;

/* A micro-kernel variant: one line of lpgemm_ukernels.inc. */
typedef struct nr_lpgemm_ukernel {
  const char *name;   /* "nr_f16w_gemm_12x32__avx512": also the tactic id */
  nr_lp_type type;
  int mr, nr;
  unsigned isa;       /* NR_ISA_* bits it needs */
  nr_lp_widen_mode widen;
  int interleave;     /* B rows stored as interleaved halves (bf16, 2 vectors a row) */
} nr_lpgemm_ukernel;

/* Micro-kernel + cache blocking; the same shape as nr_gemm_cfg, but ukernel indexes
 * lpgemm_ukernels.inc. Stored in engines. */
typedef struct nr_lpgemm_cfg {
  uint16_t ukernel;
  uint16_t mc, kc, nc;
} nr_lpgemm_cfg;

int nr_lpgemm_ukernel_count(void);
const nr_lpgemm_ukernel *nr_lpgemm_ukernel_get(int i);
/* Index of the kernel named `name`, or -1. */
int nr_lpgemm_ukernel_find(const char *name);
/* The default configuration of type t for a problem on this machine. b_packed: B is
 * a constant packed at build time (Gemm / MatMul weights), else a runtime operand
 * packed per call (conv's columns). A packed B is widened in the kernel, which streams
 * half the bytes from memory; a runtime B is already in cache when the kernels read
 * it, and block widening then keeps the fp32 kernels' full FMA rate. Measured on a
 * 2.8 GHz Ice Lake, one thread: widening in the 12x32 kernel loop costs ~30% of its
 * FMA rate where compute bounds (a resnet50 1x1 conv), block widening ~5%; with a
 * packed B streamed from memory in-kernel widening wins (MatMul M x 768 x 3072,
 * M = 8..64: in-kernel 1.1-1.9x fp32, block 1.05-1.15x; M = 128: both about 1.1x),
 * and for M = 1 block widening is 4x slower than the 1x32 in-kernel form. */
nr_lpgemm_cfg nr_lpgemm_default_cfg(nr_lp_type t, int64_t m, int64_t n, int64_t k,
                                    bool b_packed);

/* An operand: raw fp32 (row-major, leading dimension ld, optionally transposed) or
 * pre-packed (16-bit panels from nr_lpgemm_pack_a / _b with the same cfg and shape). */
typedef struct nr_lpgemm_operand {
  const void *data;
  int64_t ld;
  bool trans;
  bool packed;
} nr_lpgemm_operand;

/* Bytes of a packed A (M x K) / packed B (K x N) for cfg. */
size_t nr_lpgemm_packed_a_size(nr_lpgemm_cfg cfg, int64_t m, int64_t k);
size_t nr_lpgemm_packed_b_size(nr_lpgemm_cfg cfg, int64_t k, int64_t n);
/* Rounds the raw fp32 operand to cfg's narrow type and packs it. */
void nr_lpgemm_pack_a(nr_lpgemm_cfg cfg, int64_t m, int64_t k, nr_lpgemm_operand a,
                      uint16_t *out);
void nr_lpgemm_pack_b(nr_lpgemm_cfg cfg, int64_t k, int64_t n, nr_lpgemm_operand b,
                      uint16_t *out);
/* Scratch bytes nr_lpgemm needs with `threads` threads. */
size_t nr_lpgemm_scratch_size(nr_lpgemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                              int threads);

/* The parts nr_lpgemm splits a product into on `threads` threads (1: it runs on the
 * caller): one below the size threshold (multiply-adds, or B's values for products of
 * at most 4 rows, which stream B), else one per thread, at most one per panel. */
int nr_lpgemm_threads_for(nr_lpgemm_cfg cfg, int split, int64_t m, int64_t n, int64_t k,
                          int threads);
/* C = epilogue(alpha * A * B), split across threads as `split` says (AUTO: the
 * heuristic). pool may be NULL; threads 0 = all of the pool. */
void nr_lpgemm(nr_lpgemm_cfg cfg, int split, int64_t m, int64_t n, int64_t k, float alpha,
               nr_lpgemm_operand a, nr_lpgemm_operand b, float *c, int64_t ldc,
               const nr_epilogue *ep, void *scratch, nr_threadpool *pool, int threads);

/* ---- what the compiler asks -------------------------------------------------------- */

/* True when some fp16 (bf16) tactic of this family runs node n of graph g on this
 * machine at precision p; false for fp32 and int8 (not this family's business) and
 * for nodes it does not cover (depthwise convs, runtime weights, batched MatMul).
 * For the precision knob's valid(), which can then offer only values that build. */
bool nr_lowp_supports_node(const nr_graph *g, const nr_node *n, nr_precision p);

#endif
