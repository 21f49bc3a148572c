/* compile.h - the build of a plan from a prepared graph: the graph passes, then the
 * plan passes (select, layout, prepare, memory, weights ...; plan/families.h), steered
 * by a route. */
#ifndef NR_COMPILER_COMPILE_H
#define NR_COMPILER_COMPILE_H

#include "plan/tactic.h"

struct nr_calibration;

/* Builds a plan for graph g (prepared: shapes known, constants folded, nodes named)
 * along route. g is not modified. The plan is for the device of the route's knob
 * space (nr_knob_space_build_for): only that device's tactics are selected. */
nr_status nr_compile(const nr_graph *g, const nr_route *route, int threads,
                     const struct nr_calibration *calib, nr_plan **out, nr_error *err);

#endif
