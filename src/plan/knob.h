/* knob.h - knobs: every scheduling decision of the compiler as named data.
 *
 * A knob has a name ("conv.algo"), a finite list of values, a default, a scope (global,
 * or one instance per node it applies to: "conv.algo@/layer1/conv1"), flags and one
 * line of help. Each pass or kernel family declares its knobs in one static table
 * (nr_knob_def[], ended by a row with name NULL) in its own file; families.h lists
 * the tables and knob.c expands that list. `nnroute knobs`, the route parser, the
 * tuner's search space and the docs are all generated from them, so adding a knob is
 * adding one row.
 *
 * For a given graph the knob space is the list of instances: every global knob, and
 * every per-node knob once per node it applies to, each with the values valid there.
 * Per-node knobs name nodes of the prepared model graph; passes keep the name of the
 * node that anchors a fusion, so a knob keeps addressing the same decision. */
#ifndef NR_PLAN_KNOB_H
#define NR_PLAN_KNOB_H

#include "ir/ir.h"
#include "plan/families.h"
#include "util/device.h" /* nr_device_name, nr_device_parse */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum nr_knob_scope { NR_KNOB_GLOBAL = 0, NR_KNOB_NODE = 1 } nr_knob_scope;

enum {
  NR_KNOB_ACCURACY = 1u << 0,   /* a value may change results beyond fp reassociation */
  NR_KNOB_LAYOUT = 1u << 1,     /* changes memory layout of activations */
  NR_KNOB_MEMORY = 1u << 2,     /* changes memory planning only */
  NR_KNOB_TEST = 1u << 3,       /* fault injection for tests; hidden unless
                                 NNROUTE_TEST_KNOBS=1 is set in the environment */
  NR_KNOB_PRECISION = 1u << 4, /* reduced precision (error_bound 0): each value has
                                 its own bound in value_bounds, or, without that
                                 list, none is documented and only the user's
                                 tolerance decides. Implies NR_KNOB_ACCURACY */
  NR_KNOB_DATA = 1u << 5,     /* what a value changes depends on calibration data,
                                 on this machine's timings or on its libraries
                                 (the algorithms cuDNN and cuBLASLt offer for a
                                 shape on this GPU): on some data or machines two
                                 values build the same plan (a percentile clip that
                                 is the maximum; profiling that picks the heuristic's
                                 tactics), which check-knobs then reports but does
                                 not fail */
  NR_KNOB_SLOW_BUILD = 1u << 6, /* a non-default value makes the build itself much
                                 slower (it times candidates): the tuner tries it
                                 after the other one-change routes */
  NR_KNOB_APPROX_DEFAULT = 1u << 7, /* with NR_KNOB_ACCURACY: the default value itself
                                 may add up to error_bound where it applies
                                 (conv.winograd_from=auto), so the default route's own
                                 bound includes it once */
  NR_KNOB_THREADS = 1u << 8, /* only acts when a context runs 2+ threads (it splits,
                                 maps or caps a step's threads): a tuning session at
                                 --threads 1 measures no difference and leaves it out
                                 of its space */
  NR_KNOB_RUNTIME = 1u << 9, /* read when a context is created, from the engine's route
                                 (cuda.graphs): no build step reads it, so a build
                                 counts a non-default value as effective, and the plan
                                 summary lists it */
};

#define NR_KNOB_MAX_VALUES 32

/* What a restricting knob's values name: the row says which tactics a value allows
 * (nr_knob_allows, select.c), and tactic selection keeps only the candidates a pinned
 * value allows ("auto" leaves the choice open). Restrictions apply in table order. */
typedef enum nr_knob_restricts {
  NR_RESTRICTS_NONE = 0,    /* the knob does not restrict tactic choice */
  NR_RESTRICTS_ID,          /* values are tactic ids */
  NR_RESTRICTS_ALGO,        /* values are tactics' algorithm families (nr_tactic.algo) */
  NR_RESTRICTS_LAYOUT,      /* values are layout names (nr_layout_name) */
  NR_RESTRICTS_INT8_SOURCE, /* values are tactics' sources, on nodes in int8 only */
  NR_RESTRICTS_PRECISION,   /* values are precisions: the node's precision knob, which
                               nr_route_precision reads and every candidate must match */
} nr_knob_restricts;

typedef struct nr_knob_def {
  const char *name;   /* "<family>.<decision>", e.g. "conv.algo"; NULL ends a table */
  const char *values; /* allowed values separated by '|': "auto|direct|im2col" */
  const char *dflt;   /* one of the values: what the default route uses */
  nr_knob_scope scope;
  unsigned flags;
  /* Accuracy knobs: the documented bound on the relative L2 error (against the
   * reference executor) that a non-default value may add. 0 for exact knobs, whose
   * only allowed difference is floating-point reassociation. */
  double error_bound;
  const char *help;   /* one line */
  /* Per-node knobs: does the knob apply to node n? */
  bool (*applies)(const nr_graph *g, const nr_node *n);
  /* Optional: bit i set when value i is valid for node n (per-node) or on this
   * machine (global). NULL: all values. The default must always be valid. */
  uint64_t (*valid)(const nr_graph *g, const nr_node *n);
  /* NR_KNOB_DEVICE(d) bits of the devices whose builds list this knob; 0: the
   * family's default (families.h: NR_KNOB_CPU_FAMILIES steer CPU kernels only, every
   * other family is shared, like the graph passes' fuse.*). */
  unsigned devices;
  /* Optional: a route under which this knob's values matter (quant.calibration
   * changes nothing unless some node is int8). check-knobs compares against that
   * route's plan instead of the default's. NULL: the default route. */
  const char *needs;
  /* Whether and how the knob's values restrict tactic choice; not part of the schema
   * hash (it changes no value a route can hold). */
  nr_knob_restricts restricts;
  /* Precision knobs only, optional: the documented relative L2 bound each value may
   * add where it applies, a '|' list parallel to values ("0|2e-2|4e-3|5e-2"; the
   * default's entry 0, every other > 0). NULL: no documented bound. */
  const char *value_bounds;
  /* Optional, per-node knobs: the table bits of values valid() leaves out at node n
   * because there they build what the default builds (cuda.precision's fp32 on a
   * product, where auto is fp32). A route naming one at n sets the default instead of
   * failing: -cuda.precision@*=fp16 -cuda.precision@fc=fp32 means what a user means.
   * Route expressions (the tuner's spaces) leave such values out. */
  uint64_t (*same_as_dflt)(const nr_graph *g, const nr_node *n);
} nr_knob_def;

#define NR_KNOB_DEVICE(d) (1u << (unsigned)(d))

/* ---- knob ids ------------------------------------------------------------------
 * Code reads a knob by id, never by its name: a misspelt id does not compile, where a
 * misspelt name silently meant "not steerable". An id is its table's index in
 * NR_KNOB_FAMILIES (families.h) times 256 plus its row's index. The header next to
 * each table declares an enum of the table's rows, from NR_KNOB_ID_BASE(family) up
 * to a last entry <FAMILY>_END, as ggml's GGML_OP_COUNT; the table places each row
 * at its id ([NR_KNOB_ROW(id)] = {...}) and checks its length against the enum with
 * NR_KNOB_TABLE_CHECK. Only user text (routes, the route parser) spells names. */
typedef enum nr_knob_family {
#define NR_KNOB_FAMILY_ENUM(f) NR_KNOB_FAMILY_##f,
  NR_KNOB_FAMILIES(NR_KNOB_FAMILY_ENUM)
#undef NR_KNOB_FAMILY_ENUM
  NR_KNOB_FAMILY_COUNT
} nr_knob_family;

typedef int nr_knob_id;
#define NR_KNOB_ID_BASE(family) (NR_KNOB_FAMILY_##family << 8)
#define NR_KNOB_ROW(id) ((id) & 0xff)
/* The table holds one row per id of its enum and the terminator, nothing else. */
#define NR_KNOB_TABLE_CHECK(table, end)                                                \
  _Static_assert(sizeof(table) / sizeof((table)[0]) == NR_KNOB_ROW(end) + 1,             \
                #table ": one row per id of its enum, then the terminator")

/* The row of id; NULL for an id no table has. */
const nr_knob_def *nr_knob_def_of(nr_knob_id id);
/* The id of a row of the real tables; -1 for any other definition. */
nr_knob_id nr_knob_id_of(const nr_knob_def *def);
/* The name of id ("gemm.mc"); "?" for an id no table has. */
const char *nr_knob_name(nr_knob_id id);

/* One knob as it exists for one graph. */
typedef struct nr_knob_inst {
  const nr_knob_def *def;
  char *id;            /* "conv.algo" or "conv.algo@<node name>" (owned) */
  const char *node;    /* the node name inside id, NULL for a global knob */
  const char *op_type; /* the node's op type, NULL for a global knob */
  int n_values;
  char *values[NR_KNOB_MAX_VALUES]; /* the values valid here, in table order (owned) */
  int dflt;            /* index of the default in values */
  uint64_t alias;      /* table bits of values that mean the default here (same_as_dflt) */
} nr_knob_inst;

typedef struct nr_knob_space {
  nr_knob_inst *inst;
  int n;
  nr_device device; /* the builds this space steers (routes parsed on it carry it) */
} nr_knob_space;

/* Builds the knob space of graph g (NULL: global knobs only) for CPU builds. Nodes
 * without a name must have been named first (nr_compiler_name_nodes). */
nr_status nr_knob_space_build(const nr_graph *g, nr_knob_space *out, nr_error *err);
/* The same for builds on device d: only knobs whose (effective) device mask holds d. */
nr_status nr_knob_space_build_for(const nr_graph *g, nr_device d, nr_knob_space *out,
                                  nr_error *err);
/* The device mask a knob has in effect (its own, or its family's default). */
unsigned nr_knob_devices(const nr_knob_def *def);
void nr_knob_space_free(nr_knob_space *s);
/* Index of the instance with this id, or -1. */
int nr_knob_space_find(const nr_knob_space *s, const char *id);
/* Index of value in instance i, or -1. */
int nr_knob_value_index(const nr_knob_inst *k, const char *value);

/* Whether NNROUTE_TEST_KNOBS=1 is set. */
bool nr_knob_test_knobs_enabled(void);
/* Value i of a '|' list: sets *start and *len; false past the end. */
bool nr_knob_value_at(const char *values, int i, const char **start, size_t *len);
/* The bound a non-default value i of d may add: entry i of value_bounds, else
 * error_bound (0 for the default value). */
double nr_knob_value_bound(const nr_knob_def *d, int i);
/* Calls fn for every knob definition of every table (test knobs included). */
void nr_knob_foreach(void (*fn)(const nr_knob_def *def, void *user), void *user);
/* The rows of every table whose restricts field is not NR_RESTRICTS_NONE, in table
 * order; returns their number (at most cap are written to out). */
int nr_knob_restricting(const nr_knob_def **out, int cap);
#define NR_KNOB_MAX_RESTRICTING 32 /* a cap enough for every table */
/* Finds a definition by name; NULL if none. */
const nr_knob_def *nr_knob_find(const char *name);
/* A hash of every knob table (names, values, defaults, scopes, flags, bounds); it
 * changes whenever any table changes, so stale engines and tuning records are refused.
 * Written as 16 hex digits into buf. */
const char *nr_knob_schema(char buf[17]);

/* Gives every unnamed node a stable name "<op_type>_<index>" and makes duplicate
 * names unique, so per-node knobs can address every node. */
nr_status nr_compiler_name_nodes(nr_graph *g, nr_error *err);

#endif
