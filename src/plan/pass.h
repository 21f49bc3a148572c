/* pass.h - the pass interface: what a graph or plan pass sees, and the pass record.
 * The pass lists are in plan/families.h; the driver that runs them in order is
 * compiler/compile.c. */
#ifndef NR_PLAN_PASS_H
#define NR_PLAN_PASS_H

#include "plan/plan.h"

struct nr_calibration;

typedef struct nr_compile_ctx {
  nr_graph *graph;           /* rewritten in place by graph passes */
  nr_plan *plan;             /* filled by the planning passes */
  const nr_route *route;
  int threads;
  nr_error *err;
  const struct nr_calibration *calib; /* calibration for int8 nodes, or NULL */
  nr_device device;          /* route->space->device: which tactics select keeps */
} nr_compile_ctx;

typedef struct nr_pass {
  const char *name;
  nr_status (*run)(nr_compile_ctx *c);
} nr_pass;

#endif
