/* op.h - the operator registry: how an ONNX operator's shape rule and reference
 * kernel are declared, found and called.
 *
 * An operator is data: one nr_op_def row (domain, op type, first opset the row covers,
 * shape-inference function, reference kernel, flags). Each family of operators keeps
 * its rows in one table in its own file under src/kernels/ref/ (ops_<family>.c,
 * exporting nr_ref_ops_<family>[], ended by a row with op_type NULL), and
 * op_registry.c lists the family tables. For a node at opset V the row with the same
 * domain and op type and the greatest `since` <= V is used; a kernel that must tell
 * versions apart reads ctx->node->opset.
 *
 * Calling convention. infer() fills each present output's dtype, rank and dims from
 * the inputs (and attributes). Statically an input's data is known only for constants,
 * so infer() must leave what it cannot know as unknown (rank -1 or NR_DIM_UNKNOWN)
 * rather than fail; at run time every input has data. The executor then allocates each
 * output (zeroed) and calls run(), which fills the data. An op whose output shape
 * depends on input data it cannot see in infer() (NonZero, Loop, ...) sets
 * NR_OP_ALLOCATES_OUTPUTS and allocates in run() with nr_value_alloc(). */
#ifndef NR_IR_OP_H
#define NR_IR_OP_H

#include "ir/ir.h"

struct nr_exec_scope;

/* Inputs or outputs of one node, at most, for the shape rules and the reference
 * executor (and so for an engine step, NR_STEP_MAX_IO): a Concat of a densely
 * connected network reads dozens (DenseNet-264's widest block: 65). A node above it
 * is refused by name. */
#define NR_OP_MAX_IO 128

typedef struct nr_op_ctx {
  const nr_node *node;
  int n_inputs;
  nr_value *const *inputs;  /* NULL entries for absent optional inputs */
  int n_outputs;
  nr_value *const *outputs; /* NULL entries for absent optional outputs */
  bool runtime;             /* true when called by the executor: all inputs have data */
  struct nr_exec_scope *scope; /* executor scope, for subgraphs; NULL statically */
  const nr_graph *graph;    /* the graph the node belongs to */
  nr_error *err;
} nr_op_ctx;

typedef nr_status (*nr_op_fn)(nr_op_ctx *ctx);

enum {
  NR_OP_ALLOCATES_OUTPUTS = 1u << 0, /* run() sizes and allocates its outputs */
  NR_OP_NO_FOLD = 1u << 1,           /* never constant-fold (random ops, ...) */
};

typedef struct nr_op_def {
  const char *domain;  /* "" for ai.onnx */
  const char *op_type; /* NULL ends a table */
  int since;           /* first opset version this row covers */
  nr_op_fn infer;
  nr_op_fn run;
  unsigned flags;
} nr_op_def;

/* Finds the row for (domain, op_type, opset); NULL if unsupported. */
const nr_op_def *nr_op_find(const char *domain, const char *op_type, int opset);
/* Calls fn(def, user) for every registered row (for docs and `nnroute ops`). */
void nr_op_foreach(void (*fn)(const nr_op_def *def, void *user), void *user);

/* ---- helpers for infer() and run() ---------------------------------------------- */

/* Input i, or NULL when absent or beyond n_inputs. */
static inline nr_value *nr_op_in(const nr_op_ctx *ctx, int i) {
  return (i >= 0 && i < ctx->n_inputs) ? ctx->inputs[i] : NULL;
}
static inline nr_value *nr_op_out(const nr_op_ctx *ctx, int i) {
  return (i >= 0 && i < ctx->n_outputs) ? ctx->outputs[i] : NULL;
}
/* Sets output i's dtype and shape (dims may hold NR_DIM_UNKNOWN; rank -1 = unknown).
 * A no-op for an absent output. Fails when rank > NR_MAX_RANK. */
nr_status nr_op_set_output(nr_op_ctx *ctx, int i, nr_dtype dtype, int rank,
                           const int64_t *dims);
/* Output i gets input j's dtype and shape. */
nr_status nr_op_same_as_input(nr_op_ctx *ctx, int i, int j);
/* Records an error prefixed with the node's description; returns status. */
nr_status nr_op_fail(nr_op_ctx *ctx, nr_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks input count bounds and that required inputs are present. */
nr_status nr_op_check_arity(nr_op_ctx *ctx, int min_in, int max_in);
/* True when input i is present and its data is known. */
bool nr_op_in_known(const nr_op_ctx *ctx, int i);
/* Normalizes a possibly negative axis against rank; fails naming the attribute. */
nr_status nr_op_axis(nr_op_ctx *ctx, int64_t axis, int rank, int *out);
/* Numpy-style multidirectional broadcast of two shapes; unknown dims stay unknown.
 * dims may be the same array as a->dims or b->dims. */
nr_status nr_op_broadcast(nr_op_ctx *ctx, const nr_value *a, const nr_value *b,
                          int *rank, int64_t *dims);

/* Runs a subgraph (If branch, Loop body) inside the current executor scope.
 * inputs bind body->inputs in order; outputs receive body->outputs (owned copies the
 * caller frees with nr_value_free). Only valid when ctx->runtime. */
nr_status nr_op_run_subgraph(nr_op_ctx *ctx, const nr_graph *body, int n_inputs,
                             const nr_value *inputs, nr_value *outputs);
/* Static inference of a subgraph given its inputs' descriptions; output descriptions
 * (no data) are written to outputs. */
nr_status nr_op_infer_subgraph(nr_op_ctx *ctx, nr_graph *body, int n_inputs,
                               const nr_value *inputs, nr_value *outputs);

#endif
