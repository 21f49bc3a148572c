/* cpuop.h - the one-step harness for the CPU tactics of any one-node op (the
 * elementwise, normalization, attention and data-movement tests): a one-node graph
 * (so knobs resolve through a real knob space and route), a plan of slots and one
 * step built by hand, and the tactic's supports(), prepare() and run() called
 * directly, without the compile driver, so the tactic under test runs even where the
 * select pass would pick another one.
 *
 * Key decision: every input, output and the scratch the tactic asks for carry guard
 * bytes on both sides, and cpuop_run reports whether any moved; the reference output
 * comes from the reference executor on the same node. */
#ifndef NR_TESTS_UNIT_CPUOP_H
#define NR_TESTS_UNIT_CPUOP_H

#include "plan/knob.h"
#include "plan/tactic.h"
#include "util/threadpool.h"

#include <stdbool.h>
#include <stdint.h>

#define MAXIO 8

typedef struct cpuop {
  nr_graph *g;
  nr_knob_space space;
  nr_route route;
  nr_plan plan;
  nr_slot slots[2 * MAXIO];
  nr_step step;
  nr_value in[MAXIO], out[MAXIO]; /* reference values; data allocated with guards */
  int n_in, n_out;
  const nr_tactic *t;
  nr_error err;
} cpuop;

/* Builds graph, knob space and route (route text may be ""), plan slots and step.
 * ins[i] NULL: absent optional input; consts[i]: input i is a constant. op
 * "nnroute.X" names op X of the nnroute domain (ir/fused.h). */
nr_status cpuop_init(cpuop *o, const char *op, int opset, int n_attrs, const nr_attr *attrs,
                     int n_in, const nr_value *const *ins, const bool *consts, int n_out,
                     const nr_value *outs, const char *route);
void cpuop_free(cpuop *o);
/* A zeroed cpuop on the heap (free() it after cpuop_free), and output i's data. */
cpuop *cpuop_new(void);
void *cpuop_out(cpuop *o, int i);
/* Whether tactic id supports the node (and this machine's ISA runs it). */
bool cpuop_supports(cpuop *o, const char *id);
/* prepare() and run() of the tactic cpuop_supports chose; *guards: no guard moved. */
nr_status cpuop_run(cpuop *o, nr_threadpool *pool, bool *guards);
/* The reference outputs (owned values the caller frees). */
nr_status cpuop_ref(cpuop *o, int n_attrs, const nr_attr *attrs, nr_value *ref);
/* Max of |got - want| / (atol + rtol |want|) over n floats; NaN must match NaN. */
double cpuop_err(const float *got, const float *want, int64_t n, double atol, double rtol);

/* A float value of rank and dims viewing data (not owned). */
static inline nr_value cpuop_fval(int rank, const int64_t *dims, const float *data) {
  nr_value v = {.dtype = NR_DTYPE_FLOAT, .rank = rank, .data = (void *)data};
  for (int d = 0; d < rank; d++)
    v.dims[d] = dims[d];
  return v;
}

#endif
