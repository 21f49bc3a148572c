/* pass_util.h - private to the graph passes: the graph-editing tools every rewrite
 * needs (who reads a tensor, make a node or a constant, drop dead nodes, import the
 * "nnroute" domain) and the pattern predicates one pass lends another.
 *
 * Key decision: a rewrite never renames a tensor the rest of the graph sees. A fused
 * node takes over the output tensor of the last node of its pattern, so readers and
 * graph outputs stay untouched; the nodes it swallowed are only marked dead and a
 * single compaction (nr_pu_remove_marked) frees them, re-links producers and
 * re-sorts. Patterns are matched on the graph as it is, using a reader count
 * computed once per pass (nr_pu_readers) and kept up to date by the edit helpers. */
#ifndef NR_PASSES_PASS_UTIL_H
#define NR_PASSES_PASS_UTIL_H

#include "ir/act.h"
#include "plan/plan.h"

#include <stdbool.h>
#include <stdint.h>

/* Per tensor: number of node inputs reading it (a node reading it twice counts
 * twice) plus one when it is a graph output, plus enclosing-scope reads of
 * subgraphs. malloc'ed; NULL on allocation failure. */
int *nr_pu_readers(const nr_graph *g);
bool nr_pu_is_output(const nr_graph *g, int t);
/* Index of the first node after `from` (or any node, from = -1) reading tensor t; -1. */
int nr_pu_next_reader(const nr_graph *g, int t, int from);
/* True when t is a constant with data. */
bool nr_pu_is_const(const nr_graph *g, int t);
/* Node's input i, or -1 when absent. */
int nr_pu_in(const nr_node *n, int i);
/* The producer node of tensor t, or NULL. Needs producers current (toposort). */
nr_node *nr_pu_producer(nr_graph *g, int t);
const nr_node *nr_pu_cproducer(const nr_graph *g, int t);
bool nr_pu_is_op(const nr_node *n, const char *op_type); /* ai.onnx op of that type */

/* Adds a node (name copied, domain "" or NR_DOMAIN; opset looked up in g). Inputs and
 * outputs are copied. Returns its index, or -1 on allocation failure. */
int nr_pu_add_node(nr_graph *g, const char *name, const char *op_type, const char *domain,
                   int n_in, const int *ins, int n_out, const int *outs);
/* Sets attribute a on node k (by index: pointers move on add): a copy of a replaces the
 * attribute of that name, or is appended. The nr_pu_set_attr_* below go through it. */
nr_status nr_pu_copy_attr(nr_graph *g, int k, const nr_attr *a, nr_error *err);
nr_status nr_pu_set_attr_int(nr_graph *g, int k, const char *name, int64_t v, nr_error *err);
nr_status nr_pu_set_attr_float(nr_graph *g, int k, const char *name, float v, nr_error *err);
nr_status nr_pu_set_attr_string(nr_graph *g, int k, const char *name, const char *v,
                                nr_error *err);
nr_status nr_pu_set_attr_ints(nr_graph *g, int k, const char *name, int n,
                              const int64_t *v, nr_error *err);
nr_status nr_pu_set_attr_floats(nr_graph *g, int k, const char *name, int n,
                                const float *v, nr_error *err);
nr_status nr_pu_set_attr_strings(nr_graph *g, int k, const char *name, int n,
                                 const char *const *v, nr_error *err);
/* Adds a constant tensor named "<base><suffix>" (made unique) that takes ownership
 * of *v (v is left empty). Returns its index or -1. */
int nr_pu_add_const(nr_graph *g, const char *base, const char *suffix, nr_value *v);
/* Adds an intermediate tensor with the given description; index or -1. */
int nr_pu_add_tensor(nr_graph *g, const char *base, const char *suffix, nr_dtype dt,
                     int rank, const int64_t *dims);
/* Makes sure g (the top-level graph) imports domain NR_DOMAIN at version 1, updating
 * the subgraphs that share its opset array. */
nr_status nr_pu_import_nnroute(nr_graph *g, nr_error *err);

/* Frees the nodes whose mark is set, compacts the node array, then re-sorts and
 * re-binds the graph (new nodes get their operator rows). mark has n_nodes entries. */
nr_status nr_pu_remove_marked(nr_graph *g, const bool *mark, nr_error *err);
/* Re-sorts and re-binds after edits that removed nothing. */
nr_status nr_pu_finish(nr_graph *g, nr_error *err);

/* ---- patterns one pass lends another --------------------------------------------- */

/* True when fuse_act, with its knobs at their defaults, swallows node n (an
 * activation, residual Add or bias Add behind a Conv/Gemm/MatMul), or fuse_bn folds it
 * (a per-channel constant Mul, and the Add after it, behind a Conv). The elementwise
 * pass uses it so that its knob is listed only for chains that survive fuse_act. */
bool nr_fuse_act_absorbs(const nr_graph *g, const nr_node *n);
/* True when the default route's horizontal fusion merges node n into an earlier
 * node of its group (n's own step disappears; knobs on it would be dead). Defined in
 * horizontal.c. */
bool nr_horizontal_absorbs(const nr_graph *g, const nr_node *n);



/* ---- activations ------------------------------------------------------------------ */

/* Node indices (not marked in dead, which may be NULL) reading tensor t, one entry per
 * input slot, up to max; returns the full count. */
int nr_pu_reader_nodes(const nr_graph *g, const bool *dead, int t, int *out, int max);

/* An activation found behind a tensor: the nodes it spans and its output. */
typedef struct nr_pu_act {
  nr_act act;
  float a, b;     /* act_alpha, act_beta */
  int nodes[2];   /* Relu: one node; x * Sigmoid(x): the Sigmoid and the Mul */
  int n_nodes;
  int out;        /* the activation's output tensor */
} nr_pu_act;

/* Matches an activation that is the only consumer of float tensor t: Relu, Clip
 * with constant bounds, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh, Gelu,
 * x * Sigmoid(x) (SiLU) and x * HardSigmoid(x; 1/6, 1/2) (HardSwish). t must not be a
 * graph output; readers is nr_pu_readers(g). */
bool nr_pu_match_act(const nr_graph *g, const int *readers, const bool *dead, int t,
                     nr_pu_act *m);
/* Reads a constant scalar float (any float dtype, one element); false otherwise. */
bool nr_pu_const_scalar(const nr_graph *g, int t, float *v);

#endif
