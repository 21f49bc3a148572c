/* conv_layout.h - what the layout pass (compiler/layout.c) asks the conv family: the
 * CPU reorder tactic between two layouts, and the layout conv nodes run in by
 * default. */
#ifndef NR_KERNELS_CPU_CONV_LAYOUT_H
#define NR_KERNELS_CPU_CONV_LAYOUT_H

#include "plan/tactic.h"

/* The CPU tactic converting a float32 rank-4 tensor from one layout into another
 * (reorder.c), or NULL. */
const nr_tactic *nr_reorder_tactic(nr_layout from, nr_layout to);

/* The layout the default route's tactic runs conv node n in (PLAIN when no conv
 * tactic applies); the layout pass lists layout.propagate only where a blocked layout
 * is in use by default. */
nr_layout nr_conv_default_layout(const nr_graph *g, const nr_node *n);

#endif
