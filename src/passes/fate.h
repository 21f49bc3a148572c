/* fate.h - what the default graph passes do to a node of the prepared graph, asked by
 * the knob tables of the CPU kernel families (eltwise, norm, pool, gemm).
 *
 * Kernel knobs are listed on the prepared graph, before fusion and recognition run;
 * a knob on a node those passes swallow at the default route would change nothing.
 * These predicates answer "does this node still exist as itself after the default
 * graph passes?" without rewriting anything: each asks the owning pass through its
 * public knob table (recognize.*, eltwise.fuse) or pass_util (nr_fuse_act_absorbs). */
#ifndef NR_PASSES_FATE_H
#define NR_PASSES_FATE_H

#include "ir/ir.h"

#include <stdbool.h>

/* True when a recognize pattern (GELU, LayerNorm, attention) that the default route
 * replaces contains node n. */
bool nr_fate_recognized(const nr_graph *g, const nr_node *n);
/* True when n is part of an elementwise chain that eltwise_fuse turns into one
 * EltwiseChain node at the default route. */
bool nr_fate_chained(const nr_graph *g, const nr_node *n);
/* True when n keeps its own step under the default route: not absorbed by fuse_act,
 * not chained, not recognized. */
bool nr_fate_survives(const nr_graph *g, const nr_node *n);
/* Number of elements of n's output 0 (-1 if unknown). */
int64_t nr_fate_out_count(const nr_graph *g, const nr_node *n);

#endif
