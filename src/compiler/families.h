/* families.h - the lists of knob tables, tactic tables and passes. Each name X
 * stands for a table `nr_knobs_X[]` (knobs) or `nr_tactics_X[]` (tactics) defined in
 * the file that owns that family; this header is the one place that lists them all,
 * and the registries expand it. Pass order is the order of NR_GRAPH_PASSES and then
 * NR_PLAN_PASSES. */
#ifndef NR_COMPILER_FAMILIES_H
#define NR_COMPILER_FAMILIES_H

/* Knob tables. */
#define NR_KNOB_FAMILIES(X)                                                            \
  X(compile) X(fold) X(fuse) X(eltwise_fuse) X(recognize) X(horizontal) X(transpose)   \
  X(layout) X(memory) X(precision) X(gemm) X(conv) X(cpu_eltwise) X(cpu_norm) X(cpu_attn)   \
  X(fault)

/* Tactic tables. */
#define NR_TACTIC_FAMILIES(X)                                                          \
  X(ref) X(gemm) X(conv) X(reorder) X(cpu_eltwise) X(cpu_norm) X(cpu_attn) X(cpu_copy)   \
  X(fault)

/* Graph passes (rewrite the logical graph), in order. */
#define NR_GRAPH_PASSES(X)                                                             \
  X(fold) X(fuse_bn) X(recognize) X(transpose) X(horizontal) X(fuse_act)               \
  X(eltwise_fuse)

/* Plan passes (after the plan skeleton exists), in order. */
#define NR_PLAN_PASSES(X) X(select) X(layout) X(prepare) X(memory) X(fault)

#endif
