/* gemm.h - the packed float32 GEMM every dense tactic builds on (Gemm, MatMul,
 * FusedGemm, Conv via im2col or 1x1, Winograd's batched products).
 *
 * BLIS-style: the operands are packed into panels that match a register-tiled
 * micro-kernel (mr x nr), the loop nest is written once and parameterized by a
 * tactic record (micro-kernel + cache blocking mc/kc/nc), and the epilogue (bias,
 * activation, residual add) is applied while C is still in cache so outputs are
 * written once. A constant operand can be packed at build time (into the engine) and
 * passed pre-packed; a runtime operand is packed into the caller's scratch.
 *
 *   C[M x N] = act(alpha * op(A)[M x K] * op(B)[K x N] + bias + beta * R)
 */
#ifndef NR_KERNELS_CPU_GEMM_H
#define NR_KERNELS_CPU_GEMM_H

#include "kernels/act.h"
#include "util/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nr_epilogue {
  const float *bias;   /* NULL, or per row (bias_per_row) / per column of C */
  bool bias_per_row;
  const float *residual; /* NULL, or R with leading dimension ldr, added with beta */
  int64_t ldr;
  float beta;
  nr_act act;
  float act_a, act_b;
} nr_epilogue;

/* A micro-kernel variant: one line of the enumerator list gemm_ukernels.inc. */
typedef struct nr_gemm_ukernel {
  const char *name;  /* "nr_f32_gemm_6x16__avx2" */
  int mr, nr;
  unsigned isa;      /* NR_ISA_* bits it needs (util/cpu.h) */
} nr_gemm_ukernel;

/* A GEMM tactic record: micro-kernel + cache blocking. Stored in engines. */
typedef struct nr_gemm_cfg {
  uint16_t ukernel;  /* index into the micro-kernel list */
  uint16_t mc, kc, nc;
} nr_gemm_cfg;

int nr_gemm_ukernel_count(void);
const nr_gemm_ukernel *nr_gemm_ukernel_get(int i);
/* The default configuration for a problem on this machine. */
nr_gemm_cfg nr_gemm_default_cfg(int64_t m, int64_t n, int64_t k);

/* A matrix operand: raw (row-major with leading dimension ld, optionally transposed)
 * or pre-packed by nr_gemm_pack_a / nr_gemm_pack_b with the same cfg and shape. */
typedef struct nr_gemm_operand {
  const float *data;
  int64_t ld;
  bool trans;
  bool packed;
} nr_gemm_operand;

/* Bytes of a packed A (M x K) / packed B (K x N) for cfg. */
size_t nr_gemm_packed_a_size(nr_gemm_cfg cfg, int64_t m, int64_t k);
size_t nr_gemm_packed_b_size(nr_gemm_cfg cfg, int64_t k, int64_t n);
void nr_gemm_pack_a(nr_gemm_cfg cfg, int64_t m, int64_t k, nr_gemm_operand a, float *out);
void nr_gemm_pack_b(nr_gemm_cfg cfg, int64_t k, int64_t n, nr_gemm_operand b, float *out);
/* Scratch bytes nr_gemm needs for packing raw operands with `threads` threads. */
size_t nr_gemm_scratch_size(nr_gemm_cfg cfg, int64_t m, int64_t n, int64_t k, int threads);

/* C = epilogue(alpha * A * B). pool may be NULL; threads 0 = all of the pool. */
void nr_gemm(nr_gemm_cfg cfg, int64_t m, int64_t n, int64_t k, float alpha,
             nr_gemm_operand a, nr_gemm_operand b, float *c, int64_t ldc,
             const nr_epilogue *ep, void *scratch, nr_threadpool *pool, int threads);

#endif
