/* tactic.h - the tactic interface every kernel implements, and what a tactic sees.
 *
 * A tactic is data (STYLE.md point 5): an id that is also the kernel's name
 * ("nr_f32_conv_im2col__avx2"), the op it implements, its source (nnroute, openblas,
 * onednn, ref), the layout it works in, and three functions: supports() asks whether
 * it can run a node, prepare() runs at build time (packs weights into the engine,
 * fills the step's params record, asks for scratch), run() executes. Everything
 * prepare() writes lands in the engine file, so run() never re-derives it. */
#ifndef NR_PLAN_TACTIC_H
#define NR_PLAN_TACTIC_H

#include "ir/node_desc.h"
#include "plan/plan.h"
#include "util/cpu.h"

struct nr_calibration;
struct nr_threadpool;

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

/* Called after step `step` of a run finished successfully, with its wall time. */
typedef void (*nr_step_hook)(void *user, int step, double ms);

/* Slot i of the step's inputs / outputs, or NULL. */
const nr_slot *nr_step_in(const nr_tactic_ctx *c, int i);
const nr_slot *nr_step_out(const nr_tactic_ctx *c, int i);
/* Data of constant input i at build time (NULL if not constant). */
const void *nr_step_const(const nr_tactic_ctx *c, int i);

/* The shapes of a step's slots (in[0..n_in), out[0..n_out): NULL where absent) as
 * the operand list node_desc.h's parse functions read; the counts are the step's. */
void nr_node_io_from_slots(int n_in, const nr_slot *const *in, int n_out,
                           const nr_slot *const *out, nr_node_io *io);
/* ... of the step a tactic is asked about. */
void nr_node_io_from_ctx(const nr_tactic_ctx *c, nr_node_io *io);
/* The pieces of Concat or Split node n (nr_concat_desc / nr_split_desc) from a step's
 * slots; false when the description refuses them. nr_step_pieces_ctx reads the step
 * a tactic is asked about. */
bool nr_step_pieces(const nr_node *n, const nr_step *st, const nr_slot *const *in,
                    const nr_slot *const *out, nr_concat_desc *d);
bool nr_step_pieces_ctx(const nr_tactic_ctx *c, nr_concat_desc *d);

/* The params record of a Slice step (the CPU and CUDA copy tactics store it; the
 * memory pass reads it): per axis the first index and the step, for every step a
 * constant Slice takes, negative ones included. An axis whose step reads 0 steps by
 * 1 (nr_slice_step). */
typedef struct nr_slice_params {
  int32_t start[NR_MAX_RANK], step[NR_MAX_RANK];
} nr_slice_params;
/* Fills *p for the Slice step a tactic is asked about; false when an argument is not
 * a constant integer list or the plan's output shape is not what they give. */
bool nr_step_slice(const nr_tactic_ctx *c, nr_slice_params *p);
/* A Slice tactic's prepare(): nr_step_slice into the step's params record. */
nr_status nr_step_slice_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step);
int32_t nr_slice_step(const nr_slice_params *p, int d);

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
  /* Optional: checks a loaded engine's step before any kernel sees it. c describes
   * the step as the file gave it (plan, node, step; c->err for the message); the
   * generic checks (engine/engine_validate.c: op type, node, slot shapes against the
   * op's shape rule, ranges) have already passed. The hook re-derives what prepare()
   * derived from the step's slots (the params fields run() indexes memory with, the
   * packed-data and scratch sizes) and refuses a step that disagrees with
   * NR_ERR_INVALID_MODEL naming the field. NULL: the generic checks only. */
  nr_status (*validate)(const nr_tactic_ctx *c);
  /* Optional: the fields of the step's params record that run() reads for this step,
   * as words "name=value" written into buf (cap bytes, NUL-terminated), for the plan
   * summary (nr_engine_plan_summary, which check-knobs compares): a field prepare()
   * fills but run() does not read here is left out, so a knob value that changes only
   * it builds the same summary. NULL: every byte of the record counts. */
  void (*describe)(const nr_step *step, char *buf, size_t cap);
};

/* A validate() failure: NR_ERR_INVALID_MODEL "step K (tactic): field: why". */
nr_status nr_step_invalid(const nr_tactic_ctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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
  nr_slot *slots; /* one per present input and output (heap) */
  nr_tactic_ctx ctx;
} nr_node_probe;
bool nr_node_probe_init(nr_node_probe *p, const nr_graph *g, const nr_node *n);
void nr_node_probe_free(nr_node_probe *p);

/* Whether a tactic other than the reference one, for device, runs node n of graph g
 * in fp32 on this machine at the default route (a node probe asks each candidate's
 * supports()). Fusion passes ask it before fusing, so a fused node never lands on the
 * reference tactic where its parts had fast ones. */
bool nr_node_has_fast_tactic(const nr_graph *g, const nr_node *n, nr_device device);

/* The precision a value of a precision knob names for node n (precision's or
 * cuda.precision's; "auto" is cuda.precision's default: tf32 for a convolution,
 * fp32 for the rest); fp32 for anything else. */
nr_precision nr_precision_of_value(const char *value, const nr_node *n);
/* The precision route r gives node n (fp32 where the knob does not apply): the value
 * of the first knob with an instance there whose row restricts by precision. */
nr_precision nr_route_precision(const nr_route *r, const nr_node *n);
/* Whether value of restricting knob def allows tactic t (the row's restricts field
 * says what the values name); "auto", and knobs that do not restrict, allow all. */
bool nr_knob_allows(const nr_knob_def *def, const char *value, const nr_tactic *t);
/* The bits of def's values other than "auto" that allow tactic t (bit i: value i in
 * table order). */
uint64_t nr_knob_allowing(const nr_knob_def *def, const nr_tactic *t);
/* Whether route r pins knob id on node n (global knobs: any n) to a value other than
 * "auto" that allows tactic t. */
bool nr_route_pins(const nr_route *r, nr_knob_id id, const nr_node *n, const nr_tactic *t);

/* Calls fn for every tactic of every family table. */
void nr_tactic_foreach(void (*fn)(const nr_tactic *t, void *user), void *user);
const nr_tactic *nr_tactic_find(const char *id);

/* Will input i of c's step arrive in layout l? nr_layout_predict from the step's
 * position in the plan; false when layout.propagate=off (the followers' rule), for an
 * absent input, and for a probe step outside the plan (no producer to follow). */
struct nr_tactic_ctx;
bool nr_step_input_arrives(const struct nr_tactic_ctx *c, int i, nr_layout l);

#endif
