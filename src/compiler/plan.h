/* plan.h - what the compiler produces and the runtime executes: the execution plan,
 * the tactic interface every kernel implements, and the pass interface.
 *
 * A plan is the optimized graph (logical: shapes in ONNX order, ops possibly fused
 * into the "nnroute" domain) plus, per tensor, a slot (dtype, logical shape, physical
 * layout, size, where it lives) and, per step, the tactic that runs it. Layout is a
 * plan property, not a graph one: a step may read and write NHWC or NCHW8c data, and
 * the layout pass inserts reorder steps (node -1) where neighbours disagree.
 *
 * A tactic is data (STYLE.md point 5): an id that is also the kernel's name
 * ("nr_f32_conv_im2col__avx2"), the op it implements, its source (nnroute, openblas,
 * onednn, ref), the layout it works in, and three functions: supports() asks whether
 * it can run a node, prepare() runs at build time (packs weights into the engine,
 * fills the step's params record, asks for scratch), run() executes. Everything
 * prepare() writes lands in the engine file, so run() never re-derives it. */
#ifndef NR_COMPILER_PLAN_H
#define NR_COMPILER_PLAN_H

#include "compiler/route.h"
#include "ir/op.h"
#include "util/cpu.h"

#include <stddef.h>
#include <stdint.h>

struct nr_threadpool;

typedef enum nr_layout {
  NR_LAYOUT_PLAIN = 0,  /* ONNX order (NCHW for images) */
  NR_LAYOUT_NHWC = 1,   /* channels last (rank-4 tensors) */
  NR_LAYOUT_NCHW8C = 2, /* blocked: N, C/8, H, W, 8 (C padded with zeros to 8) */
  NR_LAYOUT_ANY = 255,  /* tactic.layout only: works in whatever layout it is given */
} nr_layout;

const char *nr_layout_name(nr_layout l);

struct nr_plan;
/* The layout the layout pass will give slot s, judged from the tactics chosen so far
 * for steps [0, before) (layout.c, by the pass's own rules; route r gives
 * layout.propagate, NULL: on). Select calls it through supports(), which lets a tactic
 * that works in one layout (the NHWC pooling and copy tactics) offer itself only where
 * its input already arrives in that layout. PLAIN for graph inputs, constants and
 * slots no step before `before` writes. */
nr_layout nr_layout_predict(const struct nr_plan *p, const nr_route *r, int s,
                            int before);
/* Will input i of c's step arrive in layout l? nr_layout_predict from the step's
 * position in the plan; false when layout.propagate=off (the followers' rule), for an
 * absent input, and for a probe step outside the plan (no producer to follow). */
struct nr_tactic_ctx;
bool nr_step_input_arrives(const struct nr_tactic_ctx *c, int i, nr_layout l);

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

#define NR_STEP_MAX_IO 16
#define NR_TACTIC_PARAMS 64

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
                                 constant the prepare packed); see nr_step_absorb */
} nr_step;

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
  int ignored_knobs;          /* restrictions the build could not honour (not saved) */
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
 * into the step's data): when no other reader needs the constant either, the engine
 * leaves its bytes out (kind NR_SLOT_ABSORBED; the weights pass, src/compiler/weights.c). */
void nr_step_absorb(nr_step *st, int i);

/* ---- tactics -------------------------------------------------------------------- */

struct nr_calibration;

/* Numeric precision a tactic computes in (the per-node knob `precision`). Reduced
 * precisions store weights (and round activations) in the narrow type and accumulate
 * in fp32 (int8: int32); every tactic reads and writes fp32 tensors unless it says
 * otherwise. */
typedef enum nr_precision {
  NR_PREC_FP32 = 0,
  NR_PREC_BF16 = 1,
  NR_PREC_FP16 = 2,
  NR_PREC_INT8 = 3,
  NR_PREC_TF32 = 4, /* fp32 tensors, products on TF32 tensor cores (CUDA) */
  NR_PREC_COUNT
} nr_precision;

/* "fp32", "bf16", "fp16", "int8", "tf32". */
const char *nr_precision_name(nr_precision p);

/* How an int8 family rounds when it quantizes an activation x to q on a grid:
 * MUL q = clamp(rint(x * (1 / scale)) + zero_point, 0, qmax) (nnroute's int8 GEMM),
 * FMA q = clamp(rint(fma(x, 1 / scale, zero_point)), 0, qmax) (the oneDNN family). A
 * producer requantizing for a reader must round as that reader would have. */
typedef enum nr_q8_round { NR_Q8_ROUND_MUL = 1, NR_Q8_ROUND_FMA = 2 } nr_q8_round;

/* A tactic's 8-bit activation capability on one step (nr_tactic.io8; the int8_chain
 * pass, src/passes/int8_chain.c). */
typedef struct nr_io8 {
  bool in;           /* reads input 0 as uint8 on its own grid (nr_quant_act_params
                        with qmax), without quantizing it again */
  bool out;          /* writes output 0 as uint8 on the grid its slot records
                        (q8_scale, q8_zero_point, q8_qmax, q8_round) */
  int qmax;          /* the top of input 0's grid: 255, or 127 (AVX2 kernels) */
  nr_q8_round round; /* how it quantizes its input */
  unsigned out_rounds; /* bits 1 << nr_q8_round it can requantize its output with */
} nr_io8;

/* What a tactic sees at build time about one step. */
typedef struct nr_tactic_ctx {
  const nr_plan *plan;
  const nr_node *node;       /* NULL for reorder steps */
  const nr_step *step;
  const nr_route *route;
  nr_error *err;
  int threads;               /* threads the engine is built for (0: unknown) */
  const struct nr_calibration *calib; /* activation ranges for int8 tactics, or NULL */
  nr_device device;          /* the device the plan is built for */
} nr_tactic_ctx;

/* Slot i of the step's inputs / outputs, or NULL. */
const nr_slot *nr_step_in(const nr_tactic_ctx *c, int i);
const nr_slot *nr_step_out(const nr_tactic_ctx *c, int i);
/* Data of constant input i at build time (NULL if not constant). */
const void *nr_step_const(const nr_tactic_ctx *c, int i);

/* What a tactic sees at run time. */
typedef struct nr_exec_args {
  const nr_plan *plan;
  const nr_step *step;
  const nr_node *node;       /* NULL for reorder steps */
  void *const *in;           /* physical data of the step's inputs (NULL if absent) */
  void *const *out;
  const nr_slot *const *in_slot;
  const nr_slot *const *out_slot;
  const void *packed;        /* the step's packed data in the weights, or NULL */
  void *scratch;             /* step->scratch bytes, 64-byte aligned */
  struct nr_threadpool *pool;
  nr_error *err;
  /* Device steps (tactic device != CPU): every pointer above is device memory, and
   * run() enqueues its work on `stream` (a cudaStream_t) without waiting for it.
   * `backend` is the context's backend state (library handles, per-step caches). */
  void *stream;
  void *backend;
} nr_exec_args;

struct nr_tactic {
  const char *id;        /* the kernel name, also in engines and reports */
  const char *domain;    /* of the op it implements ("" for ai.onnx) */
  const char *op_type;   /* NULL for reorder tactics */
  const char *source;    /* "nnroute", "openblas", "onednn", "ref" */
  const char *algo;      /* algorithm family for knobs ("im2col", "winograd23", ...) */
  nr_layout layout;      /* layout of activation input 0 and output 0 */
  unsigned isa;          /* required NR_ISA_* bits */
  int priority;          /* higher wins in heuristic selection among supported ones */
  bool (*supports)(const nr_tactic_ctx *c);
  nr_status (*prepare)(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step);
  nr_status (*run)(const nr_exec_args *a);
  /* Zero for existing rows: fp32 on the CPU. */
  nr_precision precision; /* the precision knob value this tactic implements */
  nr_device device;       /* where run() executes and its buffers live */
  /* Optional (int8 tactics): fills *cap and returns true when the step could take or
   * give 8-bit activations; asked by the int8_chain pass after layout, before prepare,
   * which then sees the slots' dtypes. NULL: fp32 in and out. */
  bool (*io8)(const nr_tactic_ctx *c, nr_io8 *cap);
};

/* A view of c's plan in which the uint8 activation slots (the int8_chain pass) read
 * as float32, for code that accepts float tensors only (nr_conv_parse, a prepare()
 * written for fp32 input): same slot indices and steps, so lookups that walk the plan
 * (the calibration's) still work. Returns c itself when c's step has no uint8 slot,
 * else &v->ctx over a copy of the slots; NULL when out of memory. Free with
 * nr_f32_view_free (src/passes/int8_chain.c). */
typedef struct nr_f32_view {
  nr_plan plan;
  nr_slot *slots; /* the copy (names shared with c's plan), or NULL */
  nr_tactic_ctx ctx;
} nr_f32_view;
const nr_tactic_ctx *nr_f32_view_init(nr_f32_view *v, const nr_tactic_ctx *c);
void nr_f32_view_free(nr_f32_view *v);

/* A throwaway plan of one step around node n of graph g, for knob valid() functions
 * that ask tactics' supports() before any plan exists: one slot per tensor of the
 * node (ONNX layout), constants pointing at the graph's bytes (nothing is copied) so
 * nr_step_const() works. ctx has no route (every knob at its default), no calibration,
 * CPU device. False when out of memory; free with nr_node_probe_free either way. */
typedef struct nr_node_probe {
  nr_plan plan;
  nr_step step;
  nr_slot slots[2 * NR_STEP_MAX_IO];
  nr_tactic_ctx ctx;
} nr_node_probe;
bool nr_node_probe_init(nr_node_probe *p, const nr_graph *g, const nr_node *n);
void nr_node_probe_free(nr_node_probe *p);

/* The precision route r gives node n (fp32 where the knob does not apply). */
nr_precision nr_route_precision(const nr_route *r, const nr_node *n);

/* Calls fn for every tactic of every family table. */
void nr_tactic_foreach(void (*fn)(const nr_tactic *t, void *user), void *user);
const nr_tactic *nr_tactic_find(const char *id);

/* ---- passes --------------------------------------------------------------------- */

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

/* Builds a plan for graph g (prepared: shapes known, constants folded, nodes named)
 * along route. g is not modified. The plan is for the device of the route's knob
 * space (nr_knob_space_build_for): only that device's tactics are selected. */
nr_status nr_compile(const nr_graph *g, const nr_route *route, int threads,
                     const struct nr_calibration *calib, nr_plan **out, nr_error *err);

#endif
