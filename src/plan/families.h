/* families.h - the lists of knob tables, tactic tables and passes. Each name X
 * stands for a table `nr_knobs_X[]` (knobs) or `nr_tactics_X[]` (tactics) defined in
 * the file that owns that family; this header is the one place that lists them all,
 * and the registries expand it. Pass order is the order of NR_GRAPH_PASSES and then
 * NR_PLAN_PASSES. */
#ifndef NR_PLAN_FAMILIES_H
#define NR_PLAN_FAMILIES_H

/* Knob tables. */
#define NR_KNOB_FAMILIES(X)                                                            \
  X(compile) X(fold) X(fuse) X(taps) X(eltwise_fuse) X(recognize) X(horizontal) X(transpose)   \
  X(layout) X(memory) X(precision) X(gemm) X(conv) X(cpu_eltwise) X(cpu_norm) X(cpu_attn)   \
  X(cuda) X(int8_chain) X(fault)

/* Knob tables whose rows (unless a row names its devices) steer CPU kernels and so
 * appear only in CPU builds' knob spaces; every other table is shared by all devices. */
#define NR_KNOB_CPU_FAMILIES(X)                                                        \
  X(layout) X(precision) X(gemm) X(conv) X(cpu_eltwise) X(cpu_norm) X(cpu_attn)          \
  X(int8_chain)

/* Tactic tables (cuda_* only in builds with the CUDA backend, NR_HAVE_CUDA). */
#ifdef NR_HAVE_CUDA
#define NR_TACTIC_FAMILIES_CUDA(X)                                                     \
  X(cuda_eltwise) X(cuda_norm) X(cuda_copy) X(cuda_gemm) X(cuda_conv) X(cuda_attn)        \
  X(cuda_reorder)
#else
#define NR_TACTIC_FAMILIES_CUDA(X)
#endif
#define NR_TACTIC_FAMILIES(X)                                                          \
  X(ref) X(gemm) X(conv) X(reorder) X(cpu_eltwise) X(cpu_eltwise_chain) X(cpu_norm)     \
  X(cpu_attn) X(cpu_resize) X(cpu_rnn) X(cpu_deconv) X(cpu_copy) X(cpu_index) X(cpu_pool_nhwc)     \
  X(cpu_copy_nhwc) X(onednn_q) X(cpu_lpgemm) X(cpu_qgemm) X(cpu_quant)                  \
  NR_TACTIC_FAMILIES_CUDA(X) X(fault)

/* Graph passes (rewrite the logical graph), in order. */
#define NR_GRAPH_PASSES(X)                                                             \
  X(fold) X(qdq) X(fuse_bn) X(conv_taps) X(recognize) X(transpose) X(horizontal) X(fuse_act)       \
  X(eltwise_fuse)

/* Plan passes (after the plan skeleton exists), in order. cuda_half (CUDA builds):
 * fp16 slots between fp16 steps, src/backends/cuda/cuda_half.c; int8_chain: uint8
 * slots between int8 steps, src/passes/int8_chain.c. */
#ifdef NR_HAVE_CUDA
#define NR_PLAN_PASSES_CUDA(X) X(cuda_half)
#else
#define NR_PLAN_PASSES_CUDA(X)
#endif
#define NR_PLAN_PASSES(X)                                                              \
  X(select) X(layout) NR_PLAN_PASSES_CUDA(X) X(int8_chain) X(prepare) X(memory) X(fault) \
  X(weights)

#endif
