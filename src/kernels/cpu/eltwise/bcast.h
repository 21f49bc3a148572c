/* bcast.h - the broadcasting geometry of the elementwise tactics (binary ops, Where,
 * EltwiseChain): the output as outer dims times an innermost run, and per input the
 * element strides over the outer dims and a stride of 0 or 1 along the run.
 *
 * Key decision: broadcasting is never materialized. Output dims of size 1 are
 * dropped, adjacent dims in which every input either varies or is broadcast are
 * merged, and the innermost merged dim becomes the run - a trailing vector, a scalar,
 * an NCHW per-channel operand and a broadcast over any middle axis all reduce to
 * that, and the kernels see only contiguous or constant operands. */
#ifndef NR_KERNELS_CPU_ELTWISE_BCAST_H
#define NR_KERNELS_CPU_ELTWISE_BCAST_H

#include "plan/plan.h"

#define NR_BC_MAX_IN 8 /* the EltwiseChain encoding's input limit */

typedef struct nr_bc_geom {
  int n_in, nd; /* nd outer dims */
  int64_t dims[NR_MAX_RANK];
  int64_t st[NR_BC_MAX_IN][NR_MAX_RANK];
  int64_t run;
  int rs[NR_BC_MAX_IN];
  int64_t count;
} nr_bc_geom;

/* Fills g for output out and inputs in[0..n_in) (n_in <= NR_BC_MAX_IN); false when an
 * input does not broadcast to out. */
bool nr_bc_build(nr_bc_geom *g, const nr_slot *out, int n_in, const nr_slot *const *in);
/* One run over n elements whose inputs all have stride 1 (same-shape operands on
 * their physical buffers). */
void nr_bc_flat(nr_bc_geom *g, int n_in, int64_t n);

/* Called on every (partial) run: off[k] is input k's element offset at its start. */
typedef void (*nr_bc_fn)(void *arg, const int64_t *off, int64_t out_off, int64_t len);
/* Calls fn on the runs covering output elements [begin, end). */
void nr_bc_walk(const nr_bc_geom *g, int64_t begin, int64_t end, nr_bc_fn fn, void *arg);

#endif
