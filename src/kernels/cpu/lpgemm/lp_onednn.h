/* lp_onednn.h - oneDNN's bf16 primitives as a second source of bf16 tactics
 * (lp_onednn.c): onednn_bf16_inner_product for Gemm / MatMul / FusedGemm /
 * FusedMatMul with constant B, onednn_bf16_conv for Conv / FusedConv. oneDNN 2.6 has
 * no f16 primitives on CPUs without AVX512-FP16, so there are no fp16 rows.
 *
 * The row macros expand inside tactics_lpgemm.c's table. */
#ifndef NR_KERNELS_CPU_LPGEMM_ONEDNN_H
#define NR_KERNELS_CPU_LPGEMM_ONEDNN_H

#include "ir/fused.h"
#include "plan/tactic.h"

/* Whether oneDNN makes bf16 primitives here: its effective ISA (ONEDNN_MAX_CPU_ISA
 * included) has avx512_core; below it the rows claim no node. */
bool lp_onednn_has_bf16(void);
bool lp_onednn_ip_supports(const nr_tactic_ctx *c);
nr_status lp_onednn_ip_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status lp_onednn_ip_run(const nr_exec_args *x);
bool lp_onednn_conv_supports(const nr_tactic_ctx *c);
nr_status lp_onednn_conv_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status lp_onednn_conv_run(const nr_exec_args *x);

/* Below the nnroute kernels of the same ISA (heuristic selection never prefers a
 * library that measured slower), above the portable ones. */
#define LP_ONEDNN_PRIORITY 30

#define LP_ONEDNN_GEMM_ROWS(dom, op)                                                   \
  {"onednn_bf16_inner_product", dom, op, "onednn", "gemm", NR_LAYOUT_PLAIN, 0,          \
   LP_ONEDNN_PRIORITY, lp_onednn_ip_supports, lp_onednn_ip_prepare, lp_onednn_ip_run,   \
   NR_PREC_BF16, NR_DEVICE_CPU},
#define LP_ONEDNN_CONV_ROWS                                                            \
  {"onednn_bf16_conv", "", "Conv", "onednn", "onednn", NR_LAYOUT_PLAIN, 0,              \
   LP_ONEDNN_PRIORITY, lp_onednn_conv_supports, lp_onednn_conv_prepare,                \
   lp_onednn_conv_run, NR_PREC_BF16, NR_DEVICE_CPU},                                   \
      {"onednn_bf16_conv", NR_DOMAIN, "FusedConv", "onednn", "onednn", NR_LAYOUT_PLAIN, \
       0, LP_ONEDNN_PRIORITY, lp_onednn_conv_supports, lp_onednn_conv_prepare,         \
       lp_onednn_conv_run, NR_PREC_BF16, NR_DEVICE_CPU},

#endif
