/* ir.h - nnroute's graph IR: values, tensors, attributes, nodes and graphs.
 *
 * One representation serves the loader, shape inference, the passes and the reference
 * executor. Its key decision: a tensor's static description and a runtime value share
 * one struct, nr_value (dtype + shape + optional data). Shape inference functions take
 * nr_values; statically they see data only for constants, at run time they see every
 * input's data, so each operator's shape rule is written once and used in both places.
 *
 * Tensors are referred to by index into graph->tensors; -1 marks an absent optional
 * input or output. Subgraphs (If, Loop) are nr_graphs held by attributes; names they
 * use from the enclosing scope become tensors flagged NR_TENSOR_OUTER that the
 * executor resolves by name. */
#ifndef NR_IR_IR_H
#define NR_IR_IR_H

#include "nnroute.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values --------------------------------------------------------------------- */

#define NR_DIM_UNKNOWN (-1)

typedef struct nr_value {
  nr_dtype dtype;    /* NR_DTYPE_UNDEFINED while unknown */
  int rank;          /* -1 while unknown */
  int64_t dims[NR_MAX_RANK]; /* NR_DIM_UNKNOWN where unknown */
  void *data;        /* element data in C order, NULL when not known */
  bool owned;        /* data was malloc'ed for this value and is freed with it */
} nr_value;

int64_t nr_value_count(const nr_value *v);      /* -1 if any dim unknown */
size_t nr_value_nbytes(const nr_value *v);       /* 0 if unknown */
bool nr_value_shape_known(const nr_value *v);
void nr_value_free(nr_value *v);                 /* frees data if owned; keeps shape */
/* Sets dtype/shape and allocates zeroed data for it (owned). */
nr_status nr_value_alloc(nr_value *v, nr_dtype dtype, int rank, const int64_t *dims,
                         nr_error *err);
/* Deep copy (data too, when present). */
nr_status nr_value_copy(nr_value *dst, const nr_value *src, nr_error *err);
/* "float32[1x3x224x224]"; writes into buf and returns it. */
const char *nr_value_describe(const nr_value *v, char *buf, size_t cap);
/* Reads element i of an integer or bool or float tensor as int64 / double. */
int64_t nr_value_get_i64(const nr_value *v, int64_t i);
double nr_value_get_f64(const nr_value *v, int64_t i);

/* ---- attributes ----------------------------------------------------------------- */

typedef enum nr_attr_type {
  NR_ATTR_UNDEFINED = 0,
  NR_ATTR_FLOAT = 1,
  NR_ATTR_INT = 2,
  NR_ATTR_STRING = 3,
  NR_ATTR_TENSOR = 4,
  NR_ATTR_GRAPH = 5,
  NR_ATTR_FLOATS = 6,
  NR_ATTR_INTS = 7,
  NR_ATTR_STRINGS = 8,
  NR_ATTR_TENSORS = 9,
  NR_ATTR_GRAPHS = 10,
} nr_attr_type;

struct nr_graph;

typedef struct nr_attr {
  char *name;
  nr_attr_type type;
  float f;
  int64_t i;
  char *s;             /* NUL-terminated copy; s_len bytes before the NUL */
  size_t s_len;
  size_t n;            /* element count of floats / ints / strings */
  float *floats;
  int64_t *ints;
  char **strings;
  nr_value t;          /* NR_ATTR_TENSOR */
  struct nr_graph *g;  /* NR_ATTR_GRAPH (owned) */
} nr_attr;

/* ---- nodes and graphs ----------------------------------------------------------- */

struct nr_op_def;

typedef struct nr_node {
  char *name;          /* never NULL; "" when the model gave none */
  char *op_type;
  char *domain;        /* "" for ai.onnx */
  int opset;           /* the model's opset for this node's domain */
  int n_inputs, n_outputs;
  int *inputs;         /* tensor indices, -1 for an absent optional input */
  int *outputs;
  int n_attrs;
  nr_attr *attrs;
  const struct nr_op_def *def; /* bound by nr_graph_bind_ops() */
} nr_node;

enum {
  NR_TENSOR_INPUT = 1u << 0,  /* graph input the user feeds */
  NR_TENSOR_OUTPUT = 1u << 1, /* graph output */
  NR_TENSOR_CONST = 1u << 2,  /* initializer, Constant or folded: value.data set */
  NR_TENSOR_OUTER = 1u << 3,  /* subgraph reference to an enclosing scope's tensor */
};

typedef struct nr_tensor {
  char *name;
  unsigned flags;
  nr_value value;      /* static description; data for constants */
  char *dim_params[NR_MAX_RANK]; /* symbolic dim names of graph inputs, or NULL */
  int producer;        /* node index, -1 for inputs, constants and outer tensors */
} nr_tensor;

typedef struct nr_opset {
  char *domain;
  int version;
} nr_opset;

typedef struct nr_graph {
  char *name;
  nr_tensor *tensors;
  int n_tensors, cap_tensors;
  nr_node *nodes;      /* in topological order once nr_graph_toposort() ran */
  int n_nodes, cap_nodes;
  int *inputs, n_inputs;   /* graph inputs in declaration order (constants excluded) */
  int *outputs, n_outputs;
  nr_opset *opsets;    /* shared with the parent graph for subgraphs (not owned) */
  int n_opsets;
  bool owns_opsets;
  int64_t ir_version;
  struct nr_graph *parent;
} nr_graph;

nr_graph *nr_graph_create(nr_graph *parent);
/* Deep copy of src (as a subgraph of parent when parent is not NULL). */
nr_status nr_graph_clone(const nr_graph *src, nr_graph *parent, nr_graph **out,
                         nr_error *err);
void nr_graph_destroy(nr_graph *g);
/* Returns the tensor index for name, or -1. */
int nr_graph_find_tensor(const nr_graph *g, const char *name);
/* Adds a tensor with an unknown value; returns its index or -1 on allocation failure. */
int nr_graph_add_tensor(nr_graph *g, const char *name, unsigned flags);
/* Appends a zeroed node; returns a pointer valid until the next add, or NULL. */
nr_node *nr_graph_add_node(nr_graph *g);
/* Orders nodes topologically; fails naming a node on a cycle or dangling input. */
nr_status nr_graph_toposort(nr_graph *g, nr_error *err);
/* Looks up each node's nr_op_def; fails with NR_ERR_UNSUPPORTED naming the op type,
 * domain, opset and node for the first operator nnroute does not implement. */
nr_status nr_graph_bind_ops(nr_graph *g, nr_error *err);
/* Static shape and dtype inference over the graph (and its subgraphs). */
nr_status nr_graph_infer(nr_graph *g, nr_error *err);
/* Evaluates every node whose inputs are all constant and stores its outputs as
 * constants (folding Shape -> Gather -> Concat -> Reshape chains), then drops dead
 * nodes. Needs bound ops and known input shapes. */
nr_status nr_graph_fold_constants(nr_graph *g, nr_error *err);
int nr_graph_opset(const nr_graph *g, const char *domain); /* 0 if not imported */
/* The tensors of g that node n reads: its present inputs, then the enclosing-scope
 * tensors its subgraphs read. *out is malloc'ed (caller frees); returns the count or
 * -1 on allocation failure. */
int nr_node_deps(const nr_graph *g, const nr_node *n, int **out);
/* Deep copy of an attribute (subgraphs excepted: dst->g is left NULL). */
nr_status nr_attr_copy(nr_attr *dst, const nr_attr *src, nr_error *err);
void nr_attr_free(nr_attr *a);
/* Frees what a node owns (names, edges, attributes); keeps the struct. */
void nr_node_free(nr_node *n);

/* ---- attribute access ----------------------------------------------------------- */

const nr_attr *nr_node_attr(const nr_node *n, const char *name);
int64_t nr_attr_int(const nr_node *n, const char *name, int64_t dflt);
float nr_attr_float(const nr_node *n, const char *name, float dflt);
/* NUL-terminated string, or dflt when absent. */
const char *nr_attr_string(const nr_node *n, const char *name, const char *dflt);
/* Pointer to the ints and their count; NULL and *count = 0 when absent. */
const int64_t *nr_attr_ints(const nr_node *n, const char *name, size_t *count);
const float *nr_attr_floats(const nr_node *n, const char *name, size_t *count);

/* "node 'conv1' (Conv, opset 13)" for messages. */
const char *nr_node_describe(const nr_node *n, char *buf, size_t cap);

#endif
