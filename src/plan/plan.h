/* plan.h - what the compiler produces and the runtime executes: the execution plan.
 *
 * A plan is the optimized graph (logical: shapes in ONNX order, ops possibly fused
 * into the "nnroute" domain) plus, per tensor, a slot (dtype, logical shape, physical
 * layout, size, where it lives) and, per step, the tactic that runs it. Layout is a
 * plan property, not a graph one: a step may read and write NHWC or NCHW8c data, and
 * the layout pass inserts reorder steps (node -1) where neighbours disagree.
 *
 * The layouts and their rules are in plan/layout.h, the tactic interface every
 * kernel implements in plan/tactic.h, the pass interface in plan/pass.h. */
#ifndef NR_PLAN_PLAN_H
#define NR_PLAN_PLAN_H

#include "ir/op.h"
#include "plan/layout.h"
#include "plan/route.h"

#include <stddef.h>
#include <stdint.h>

typedef enum nr_slot_kind {
  NR_SLOT_ARENA = 0, /* intermediate or output: lives in the context's arena */
  NR_SLOT_CONST = 1, /* constant: lives in the engine's weights */
  NR_SLOT_INPUT = 2, /* graph input: the caller's buffer */
  /* constant that no step reads at run time: every reader packed it into its own
   * data at build (nr_step_absorb), so the engine stores no bytes for it */
  NR_SLOT_ABSORBED = 3,
} nr_slot_kind;

typedef struct nr_slot {
  char *name;
  nr_dtype dtype;
  int rank;
  int64_t dims[NR_MAX_RANK]; /* logical shape */
  nr_layout layout;
  nr_slot_kind kind;
  uint64_t nbytes;  /* physical size in bytes */
  uint64_t offset;  /* ARENA: arena offset; CONST: weights offset; INPUT: input index */
  /* CONST and ABSORBED during a build: the graph tensor's bytes (the plan owns the
   * graph). A constant gets weights only at the end of the build (the weights pass),
   * and only if some step reads it at run time; offset means nothing before that.
   * NULL in loaded engines. */
  const void *data;
  int first_use, last_use; /* step indices: producer (or -1) and last reader */
  int alias_of;     /* in-place: slot whose memory this one reuses, or -1 */
  /* uint8 activations between int8 steps (the int8_chain pass): x = q8_scale * (q -
   * q8_zero_point), q in [0, q8_qmax]. Build time only (the producer's packed data
   * holds it in engines); 0 for every other slot. */
  float q8_scale;
  int32_t q8_zero_point, q8_qmax;
  int32_t q8_round; /* nr_q8_round: how the producer must round */
} nr_slot;

/* Inputs or outputs of one step, at most: those of a node (ir/op.h). The skeleton
 * refuses a node above it by name, and engine loading refuses a step record above it
 * before use. */
#define NR_STEP_MAX_IO NR_OP_MAX_IO
#define NR_TACTIC_PARAMS 96

typedef struct nr_tactic nr_tactic;

typedef struct nr_step {
  const nr_tactic *tactic;
  int node;                   /* index in plan->graph->nodes, -1 for reorders */
  int n_in, n_out;
  int in[NR_STEP_MAX_IO];     /* slot indices, -1 for absent optional inputs */
  int out[NR_STEP_MAX_IO];
  uint64_t packed_offset;     /* tactic-packed constant data in the weights */
  uint64_t packed_size;
  uint64_t scratch;           /* bytes of per-context scratch this step needs */
  int threads;                /* threads this step may use (0 = all) */
  uint8_t params[NR_TACTIC_PARAMS]; /* the tactic's own record (tile sizes, ...) */
  uint32_t absorbed;          /* build time: bit i = run() never reads input i (a
                                 constant the prepare packed; inputs 0..31); see
                                 nr_step_absorb */
} nr_step;

/* One knob instance of the build's route as the build used it (nr_route_track). */
typedef struct nr_plan_knob_use {
  char *id;     /* "conv.layout@/layer1/conv1" (owned) */
  char *value;  /* its value, when not the default (owned); else NULL */
  uint8_t bits; /* NR_ROUTE_READ, NR_ROUTE_EFFECTIVE */
} nr_plan_knob_use;

typedef struct nr_plan {
  nr_graph *graph;            /* optimized logical graph (owned) */
  nr_slot *slots;
  int n_slots, cap_slots;
  nr_step *steps;
  int n_steps, cap_steps;
  int *inputs, n_inputs;      /* slot per graph input */
  int *outputs, n_outputs;    /* slot per graph output */
  uint8_t *weights;           /* constants and packed data, 64-byte aligned (owned) */
  uint64_t weights_size;
  uint64_t weights_cap;       /* allocated bytes of weights */
  uint64_t arena_size;
  uint64_t scratch_size;      /* max over steps */
  char *route;                /* canonical route the plan was built with */
  /* The build's record of its route (route.h, knob use; none of it is saved, a loaded
   * engine has none): the values that changed nothing, as canonical route tokens
   * ("" for none), and how many; the canonical route without them, which builds this
   * same plan; and every instance the build read or the route set. */
  int ignored_knobs;
  char *ignored;
  char *effective_route;
  nr_plan_knob_use *knob_use;
  int n_knob_use;
  nr_device device;           /* where every step runs (the engine's META records it) */
} nr_plan;

void nr_plan_destroy(nr_plan *p);
/* Same rank and logical dims. */
bool nr_slot_same_dims(const nr_slot *a, const nr_slot *b);
/* Physical bytes of a tensor of slot s's dtype and shape stored in layout l
 * (NCHW8C pads the channel dim of rank-4 tensors up to a multiple of 8). */
uint64_t nr_slot_bytes(const nr_slot *s, nr_layout l);
/* Appends a slot (zeroed; alias_of, first_use and last_use -1); returns its index, or
 * -1 when out of memory. Slot pointers taken before the call may move. */
int nr_plan_add_slot(nr_plan *p);
/* Inserts a zeroed step at position pos (later steps shift by one); NULL when out of
 * memory. Step pointers taken before the call may move. */
nr_step *nr_plan_insert_step(nr_plan *p, int pos);
/* Appends size bytes (64-byte aligned) to the weights; returns the offset via *off. */
nr_status nr_plan_add_weights(nr_plan *p, const void *data, uint64_t size, uint64_t *off,
                              nr_error *err);
/* The bytes of constant slot s at build time, wherever they are (the graph's tensor
 * or the weights); NULL for a slot that is not a constant with data. */
const void *nr_slot_data(const nr_plan *p, const nr_slot *s);
/* Called by a prepare() whose run() will never read input i (a constant it packed
 * into the step's data): when no other reader needs the constant either (and i < 32),
 * the engine leaves its bytes out (kind NR_SLOT_ABSORBED;
 * the weights pass, src/compiler/weights.c). */
void nr_step_absorb(nr_step *st, int i);

#endif
