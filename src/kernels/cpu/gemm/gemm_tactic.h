/* gemm_tactic.h - what the GEMM tactics (tactics_gemm.c, gemm_openblas.c,
 * gemm_onednn.c) share: the step params record every engine stores, the analysis that
 * maps a Gemm / MatMul / FusedGemm / FusedMatMul node onto products C = op(A) op(B)
 * plus an epilogue, and the run-time helpers that walk the batch and build the
 * epilogue. The analysis reads an abstract view of the operands so the same code
 * answers the knobs' valid() (graph shapes) and the tactics' supports() (plan slots).
 */
#ifndef NR_KERNELS_CPU_GEMM_TACTIC_H
#define NR_KERNELS_CPU_GEMM_TACTIC_H

#include "kernels/cpu/gemm/gemm_impl.h"

enum { GEMM_OP_GEMM, GEMM_OP_MATMUL, GEMM_OP_FUSED_GEMM, GEMM_OP_FUSED_MATMUL };

enum {
  GEMM_F_TA = 1u << 0,      /* op(A) = A^T */
  GEMM_F_TB = 1u << 1,      /* op(B) = B^T */
  GEMM_F_PA = 1u << 2,      /* A is constant and packed in the step's packed data */
  GEMM_F_PB = 1u << 3,      /* B is constant and packed (one packed matrix per B batch) */
  GEMM_F_BATCHED = 1u << 4, /* MatMul over broadcast batch dims: one product each */
  GEMM_F_A_CONST = 1u << 5,
  GEMM_F_B_CONST = 1u << 6,
  GEMM_F_SEP_EP = 1u << 7,  /* gemm.epilogue=separate: epilogue as a second pass over C */
};

enum {
  GEMM_BIAS_NONE,
  GEMM_BIAS_PACKED_COL, /* beta * C pre-broadcast to N floats at bias_off */
  GEMM_BIAS_PACKED_ROW, /* ... to M floats */
  GEMM_BIAS_IN_COL,     /* input 2 as is, N floats (beta == 1) */
  GEMM_BIAS_IN_ROW,     /* input 2 as is, M floats (beta == 1) */
};

enum { GEMM_RES_NONE, GEMM_RES_C, GEMM_RES_R }; /* input 2 * beta, input 3 */

/* The step params record (step->params), identical for every engine. */
typedef struct nr_gemm_step_params {
  nr_gemm_cfg cfg;
  int64_t m, n, k;  /* per product; m covers the flattened batch unless BATCHED */
  int32_t batch;    /* products (1 unless BATCHED) */
  float alpha, beta;
  float act_a, act_b;
  uint32_t bias_off; /* float offset of a packed bias in the packed data */
  uint16_t threads;  /* threads the scratch was sized for */
  uint8_t op, flags, act, split, bias, resid;
} nr_gemm_step_params;

_Static_assert(sizeof(nr_gemm_step_params) <= NR_TACTIC_PARAMS, "gemm params too big");

/* A node's operands as the analysis sees them: their shapes (ir/node_desc.h) and
 * which of inputs 0-3 are constants. */
typedef struct gemm_view {
  const nr_node *node;
  nr_node_io io;
  bool is_const[4];
} gemm_view;

/* Fills p (not cfg, split, threads, bias_off) for the node; false when no GEMM tactic
 * can run it (non-float, unknown shapes, an unsupported broadcast of C, ...). */
bool gemm_analyze(const gemm_view *v, nr_gemm_step_params *p);
/* The view of a step's node from plan slots. */
void gemm_view_from_ctx(const nr_tactic_ctx *c, gemm_view *v);
/* The view of a graph node from its tensors (for knob valid()). */
void gemm_view_from_graph(const nr_graph *g, const nr_node *n, gemm_view *v);
bool gemm_node_is_gemm(const nr_node *n);

/* Run time: operand pointers of product i (matrix offsets from batch broadcasting). */
typedef struct gemm_product {
  const float *a, *b, *r; /* b is packed when GEMM_F_PB */
  float *c;
} gemm_product;
void gemm_product_get(const nr_exec_args *x, const nr_gemm_step_params *p, int64_t i,
                      gemm_product *out);
/* The epilogue of product i (r from gemm_product_get). */
void gemm_epilogue_get(const nr_exec_args *x, const nr_gemm_step_params *p,
                       const float *r, nr_epilogue *ep);

/* Prepare: beta * C (input 2, constant) broadcast to the M (GEMM_BIAS_PACKED_ROW) or
 * N (GEMM_BIAS_PACKED_COL) floats the epilogue adds, written to out; C's extents come
 * from the node's nr_gemm_desc (an error only where the description refuses the node,
 * which supports() has already ruled out). */
nr_status gemm_bias_build(const nr_tactic_ctx *c, const nr_gemm_step_params *p,
                          float *out);

/* Engines other than the nnroute kernels (gemm_openblas.c, gemm_onednn.c). */
nr_status gemm_openblas_run(const nr_exec_args *x);
nr_status gemm_onednn_run(const nr_exec_args *x);
/* onednn_matmul's scratch on `threads` threads: one scratchpad per row band. */
nr_status gemm_onednn_scratch(const nr_gemm_step_params *p, int threads, uint64_t *bytes,
                              nr_error *err);
/* oneDNN inner product (gemm_onednn_ip.c): a 2-D product with constant B, bias per
 * column, alpha 1; the scratch its weight reorder needs; the run. */
bool gemm_onednn_ip_fits(const nr_gemm_step_params *p);
nr_status gemm_onednn_ip_scratch(const nr_gemm_step_params *p, int team, uint64_t *bytes,
                                 nr_error *err);
nr_status gemm_onednn_ip_run(const nr_exec_args *x);

#endif
