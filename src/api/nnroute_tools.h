/* nnroute_tools.h - the tools API: what the tuner (src/tune) and the commands (src/cli)
 * see of nnroute beyond include/nnroute.h. Four parts:
 *   - a model's prepared graph and the SHA-256 of its bytes;
 *   - knob lists: the knob instances of a model (or the knob definitions), as plain
 *     rows, with route parsing, route expressions and canonical route text over them;
 *   - an engine summary: its record (route, device, sizes, versions, calibration), the
 *     environment it was built for, and per step the node, op, tactic, layout, dtype
 *     and output slots; how a build used its route's knobs (the values it ignored);
 *     and the plan summary `check-knobs` compares, what the plan does;
 *   - what measuring needs of a context: the device timer, the cache flush and the
 *     per-step timing hook; and the environment and calibration digests the tuning
 *     database keys its rows by.
 *
 * Key decision: the floors above api/ include this header, never a header of plan/,
 * engine/, backends/ or runtime/ (scripts/check_layers.py holds that with an
 * allow-list), so the plan, the tactic records and the knob tables can change shape
 * without touching a command. Every value type here is a plain struct of scalars and
 * strings; those that may grow carry a size field (sizeof, set by the caller), as the
 * public options structs do. Strings returned point into the object they describe
 * (the model, the engine, the knob list) and live as long as it does. The functions
 * are internal to the library (no NR_API): the command and the unit tests link the
 * static library. */
#ifndef NR_API_NNROUTE_TOOLS_H
#define NR_API_NNROUTE_TOOLS_H

#include "ir/ir.h"
#include "nnroute.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- models --------------------------------------------------------------------- */

/* The model's prepared graph (shapes known, constants folded, nodes named); owned by
 * the model and valid until nr_model_destroy. */
nr_graph *nr_model_graph(nr_model *m);
/* SHA-256 of the bytes the model was loaded from (32 bytes, owned by the model). */
const uint8_t *nr_model_sha256(const nr_model *m);
/* Makes graph input `name` a constant holding a copy of value, as if the file had it
 * as an initializer: it leaves the model's inputs (later ones move up by one), and
 * preparation folds through it. value must have the input's dtype and a shape its
 * declaration allows; the model must not be prepared yet. `conformance` uses it to
 * build the node tests' weights into engines; the model's SHA-256 stays the file's. */
nr_status nr_model_set_input_constant(nr_model *m, const char *name,
                                      const nr_buffer *value, nr_error *err);

/* ---- knob lists ----------------------------------------------------------------- */

/* Knob flags, as the knob tables declare them (docs/knobs.md explains the letters). */
enum {
  NR_KNOB_INFO_ACCURACY = 1u << 0,       /* A: may change results beyond reassociation */
  NR_KNOB_INFO_LAYOUT = 1u << 1,         /* L: changes activation layout */
  NR_KNOB_INFO_MEMORY = 1u << 2,         /* M: changes memory planning only */
  NR_KNOB_INFO_TEST = 1u << 3,           /* T: test knob (NNROUTE_TEST_KNOBS=1) */
  NR_KNOB_INFO_PRECISION = 1u << 4,      /* P: reduced precision, bounded per value
                                            (def_bounds) or not at all */
  NR_KNOB_INFO_DATA = 1u << 5,           /* D: effect depends on data or timings */
  NR_KNOB_INFO_SLOW_BUILD = 1u << 6,     /* S: a non-default value slows the build */
  NR_KNOB_INFO_APPROX_DEFAULT = 1u << 7, /* E: the default itself may add error */
  NR_KNOB_INFO_THREADS = 1u << 8,        /* C: acts only when a context has 2+ threads */
  NR_KNOB_INFO_RUNTIME = 1u << 9,        /* R: read when a context is created */
  /* Not a table flag: the row is the node's precision knob (precision@NODE), whose
   * int8 value needs a calibration. */
  NR_KNOB_INFO_NODE_PRECISION = 1u << 16,
  /* Not table flags: the knob picks the precision of its node's tactic (precision,
   * cuda.precision), or narrows the tactics of the node's precision (an algorithm,
   * library or layout knob), so its values act within the precision's tactics. */
  NR_KNOB_INFO_SETS_PRECISION = 1u << 17,
  NR_KNOB_INFO_NARROWS_TACTIC = 1u << 18,
};

#define NR_KNOB_LIST_MAX_VALUES 32 /* values one knob may have */

/* One row: a knob instance of a model ("conv.algo@/layer1/Conv", a global knob), or a
 * definition (node and op_type NULL, values the table's). */
typedef struct nr_knob_info {
  const char *id;       /* what a route names: "conv.algo@<node>" or "memory.plan" */
  const char *name;     /* the definition's name ("conv.algo"); unique per knob */
  const char *node;     /* node name of a per-node instance, else NULL */
  const char *op_type;  /* that node's op type, else NULL */
  bool global;          /* scope: a global knob (else per-node) */
  int n_values;
  const char *const *values; /* n_values strings, in table order (valid here only) */
  int dflt;             /* index of the default in values */
  /* The definition's values, all of them in table order (values: those valid here). */
  int n_def_values;
  const char *const *def_values;
  unsigned flags;       /* NR_KNOB_INFO_* */
  double error_bound;   /* accuracy knobs: the documented relative L2 bound */
  /* Precision knobs with a documented bound per value: n_def_values bounds, parallel
   * to def_values; NULL otherwise. nr_knob_info_value_bound reads either. */
  const double *def_bounds;
  const char *help;     /* one line ("" when none) */
  const char *needs;    /* route under which the values matter, or NULL */
} nr_knob_info;

typedef struct nr_knob_list {
  int n;
  const nr_knob_info *knobs;
  struct nr_knob_list_impl *impl; /* owned; the routes below need it */
} nr_knob_list;

typedef struct nr_knob_list_options {
  size_t size;       /* sizeof(nr_knob_list_options) */
  nr_device device;  /* the builds whose knobs are listed */
  /* Definitions only: list every device's knobs (docs/knobs.md) instead of device's,
   * and/or only the per-node definitions. */
  bool all_devices, node_only;
} nr_knob_list_options;

/* The knob instances of model m for builds on o->device (o NULL: CPU), in knob-space
 * order (the order canonical routes list them in): prepares m and names its unnamed
 * nodes first. m NULL: the global knobs only. Test knobs appear only with
 * NNROUTE_TEST_KNOBS=1, as the route parser accepts them. */
nr_status nr_knob_list_build(nr_model *m, const nr_knob_list_options *o, nr_knob_list *out,
                             nr_error *err);
/* Every knob definition of every table (test knobs only with NNROUTE_TEST_KNOBS=1),
 * filtered as o says. A definition list has no routes. */
nr_status nr_knob_list_definitions(const nr_knob_list_options *o, nr_knob_list *out,
                                   nr_error *err);
void nr_knob_list_free(nr_knob_list *l);
/* Index of value in row k, or -1. */
int nr_knob_info_value_index(const nr_knob_info *k, const char *value);
/* Index of the row with this id ("conv.algo@NODE", "memory.plan"), or -1. */
int nr_knob_list_find(const nr_knob_list *l, const char *id);

/* The relative L2 error value v of row k may add where it applies: 0 for the default,
 * the value's entry of def_bounds when there is one, else error_bound (0 for knobs
 * that change no result, and for precision knobs without documented bounds). */
double nr_knob_info_value_bound(const nr_knob_info *k, int v);
/* A hash of every knob table, 16 hex digits written into buf (engines and tuning
 * records carry it; a different one means stale). Returns buf. */
const char *nr_knob_list_schema(char buf[17]);

/* Routes over an instance list are choice vectors: choice[i] indexes knobs[i].values.
 * The default route is every row's dflt. */

/* Parses a concrete route (tokens as docs/knobs.md describes, no [..] or *) into
 * choice (l->n entries, starting from the default route). Errors name the token and
 * list the allowed values. */
nr_status nr_knob_list_parse_route(const nr_knob_list *l, const char *route, int *choice,
                                   nr_error *err);
/* Parses a route expression into allowed (l->n bit sets of value indices); rows the
 * expression does not name allow their default only. */
nr_status nr_knob_list_parse_expr(const nr_knob_list *l, const char *expr,
                                  uint64_t *allowed, nr_error *err);
/* Canonical text of a choice vector (malloc'ed; "" for the default route; NULL when
 * out of memory): the non-default rows in list order, one `-id=value` token each, so
 * equal routes compare equal. */
char *nr_knob_list_route_text(const nr_knob_list *l, const int *choice);
/* The canonical form of route text (parse, then print); *out malloc'ed. */
nr_status nr_knob_list_canonical(const nr_knob_list *l, const char *route, char **out,
                                 nr_error *err);
/* Number of rows of choice not at their default. */
int nr_knob_list_changes(const nr_knob_list *l, const int *choice);

/* ---- engine summary -------------------------------------------------------------- */

typedef struct nr_engine_summary {
  size_t size;                 /* sizeof(nr_engine_summary), set by the caller */
  const char *route;           /* canonical route ("" for the default route) */
  nr_device device;            /* where every step runs */
  int n_steps;
  int reference_steps;         /* steps on the reference tactic (source "ref") */
  int reorder_steps;           /* layout reorders (NR_STEP_INFO_REORDER) */
  int ignored_knobs;           /* how many of the route's values changed nothing (a
                                  build's engine only: not saved in the file) */
  int threads;                 /* thread count the plan was built for */
  uint64_t build_ms;
  uint64_t arena_bytes, scratch_bytes, weights_bytes; /* per context / shared */
  int absorbed_constants;      /* constants kept only as their readers' packed data */
  uint64_t absorbed_bytes;     /* and their logical bytes */
  const char *nnroute_version, *knob_schema;
  const uint8_t *model_sha256; /* 32 bytes */
  /* The calibration the engine carries: tensors, input sets, SHA-256 of its bytes
   * (calib_tensors 0 and calib_sha256 "" without one). */
  int calib_tensors, calib_input_sets;
  char calib_sha256[65];
  /* A build's engine only ("" for a loaded one): the route's values the build ignored,
   * as canonical route tokens ("-conv.layout@/l1/conv=nhwc"; "" for none), and the
   * canonical route without them, which builds the same plan: the tuner's name for the
   * candidate. */
  const char *ignored;
  const char *effective_route;
} nr_engine_summary;

nr_status nr_engine_summarize(const nr_engine *e, nr_engine_summary *out, nr_error *err);

/* The environment an engine is checked against (or this machine's). Strings are
 * copies: the struct stands alone. */
typedef struct nr_environment {
  size_t size; /* sizeof(nr_environment), set by the caller */
  char cpu_vendor[16], cpu_model[64], isa[128];
  int cores;
  char openblas[64], onednn[64], compiler[64];
  nr_device device;  /* device engines add the GPU's fields; "" for CPU ones */
  char gpu[96], gpu_cc[16], gpu_driver[32], cuda_runtime[32], cublas[32], cudnn[32];
} nr_environment;

/* The environment engine e was built for. */
nr_status nr_engine_environment(const nr_engine *e, nr_environment *out);
/* This machine's environment for engines of device d, read in a short-lived child
 * process, so the caller never initializes the device's driver (the tuner forks its
 * workers afterwards, and a CUDA driver initialized before fork() is unusable). */
nr_status nr_environment_current_isolated(nr_device d, nr_environment *out);

enum {
  NR_STEP_INFO_REFERENCE = 1u << 0, /* runs on the reference tactic (source "ref") */
  NR_STEP_INFO_REORDER = 1u << 1,   /* a layout reorder (no node) */
  NR_STEP_INFO_FAULT = 1u << 2,     /* the test fault step (test.fault; no node) */
  NR_STEP_INFO_FUSED = 1u << 3,     /* a fused op of the nnroute domain (FusedConv) */
};

typedef struct nr_step_detail {
  size_t size;            /* sizeof(nr_step_detail), set by the caller */
  int node;               /* index in the engine's graph, -1 for reorder/fault steps */
  const char *node_name;  /* NULL when node < 0 */
  const char *op_domain;  /* "" for ai.onnx; NULL when node < 0 */
  const char *op_type;    /* NULL when node < 0 */
  const char *tactic;     /* tactic id, also the kernel's name */
  const char *source;     /* "nnroute", "openblas", "onednn", "ref" ("" when none) */
  const char *precision;  /* the precision the tactic implements ("fp32", "int8") */
  unsigned flags;         /* NR_STEP_INFO_* */
  const char *layout_in;  /* layout of input 0 and output 0, NULL when absent */
  const char *layout_out;
  nr_dtype dtype;         /* of output 0, else input 0; NR_DTYPE_UNDEFINED when none */
  int n_outputs;
  uint64_t scratch_bytes, packed_bytes;
} nr_step_detail;

/* Step k (0 <= k < n_steps) of engine e. */
nr_status nr_engine_step(const nr_engine *e, int k, nr_step_detail *out);

typedef struct nr_slot_info {
  size_t size;        /* sizeof(nr_slot_info), set by the caller */
  const char *name;
  nr_dtype dtype;
  int rank;
  int64_t dims[NR_MAX_RANK];
  uint64_t offset;    /* in the arena (or weights, for constants) */
  uint64_t nbytes;
} nr_slot_info;

/* How a build read its route, per row of knob list l (the model's, for the engine's
 * device): NR_KNOB_USE_* bits in use[l->n]. A row the build never read can take any
 * value without changing the plan; a SET row that is not EFFECTIVE was ignored.
 * NR_ERR_INVALID_ARGUMENT for an engine without the record (a loaded one). */
enum {
  NR_KNOB_USE_READ = 1u << 0,      /* some read may depend on the value */
  NR_KNOB_USE_EFFECTIVE = 1u << 1, /* the value made the plan differ from its default */
  NR_KNOB_USE_SET = 1u << 2, /* the route sets it to a value other than its default */
};
nr_status nr_engine_knob_use(const nr_engine *e, const nr_knob_list *l, uint8_t *use,
                             nr_error *err);

/* Output o of step k; NR_ERR_INVALID_ARGUMENT when the step has no such output. */
nr_status nr_engine_step_output(const nr_engine *e, int k, int o, nr_slot_info *out);
/* A hash of what execution depends on: the graph's nodes, every step (tactic, slots,
 * params, packed data, scratch, threads), every slot (dtype, shape, layout, kind,
 * size, offset, alias), the arena size and the weights' bytes: the bytes of the plan.
 * Equal hashes mean the same plan byte for byte. */
uint64_t nr_engine_plan_hash(const nr_engine *e);
/* What the plan does, as text (malloc'ed; NULL when out of memory), one line per fact:
 * the device, the arena size and the engine's threads; the route's values of knobs a
 * context reads when it is created (flag R); per step its op (domain, type:
 * fused ops are the nnroute domain's) with a digest of the node's attributes, the
 * tactic, its precision, thread cap, scratch, packed data (size and a digest of its
 * bytes) and the parameters its kernel reads (the tactic's describe hook, else every
 * byte of the record); per input and output of a step its kind, dtype, shape, layout,
 * size and place (arena offset and in-place flag, graph input index, or a digest of a
 * constant's bytes); the graph outputs. Nothing that only names or numbers things
 * (node and tensor names, slot indices, where a constant sits in the weights, the
 * route text) is in it: two builds with equal summaries execute the same steps on the
 * same memory plan, and `check-knobs` calls a value whose summary equals the
 * default's dead. */
char *nr_engine_plan_summary(const nr_engine *e);

/* ---- measuring ---------------------------------------------------------------- */

/* The backend name of a device context ("cuda"), or NULL for a CPU context: only a
 * device context has the two calls below. */
const char *nr_context_device(const nr_context *ctx);
/* Device time of the context's last run in ms (events around the steps). */
double nr_context_device_ms(nr_context *ctx);
/* Evicts the device's caches (the GPU's L2) before a timed run. */
void nr_context_flush_caches(nr_context *ctx);
/* Installs (fn != NULL) or removes (fn == NULL) the per-step timing hook: fn receives
 * every step's index and wall time in ms; user must outlive the runs that use it. */
void nr_context_time_steps(nr_context *ctx, void (*fn)(void *user, int step, double ms),
                           void *user);

/* ---- calibration digests --------------------------------------------------------- */

/* SHA-256 of the table's serialized bytes, as 64 hex digits. */
nr_status nr_calibration_digest(const nr_calibration *c, char hex[65], nr_error *err);
/* The table's bytes (the format nr_calibration_save writes), malloc'ed. */
nr_status nr_calibration_serialize(const nr_calibration *c, uint8_t **bytes, size_t *len,
                                   nr_error *err);

#endif
