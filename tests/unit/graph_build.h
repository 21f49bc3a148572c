/* graph_build.h - building small graphs by hand for the pass tests: tensors, inputs,
 * constants over the caller's data, nodes (through pass_util, with attributes), and
 * finishing a graph (order, bind, infer, name nodes).
 * Static inline, shared by the pass, tactic and chain tests. */
#ifndef NR_TESTS_GRAPH_BUILD_H
#define NR_TESTS_GRAPH_BUILD_H

#include "compiler/compile.h"
#include "ir/ir.h"
#include "passes/pass_util.h"
#include "plan/knob.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An empty graph of the default domain at `opset`, IR version 8. */
static inline nr_graph *tg_graph(int opset) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = opset;
  g->n_opsets = 1;
  g->owns_opsets = true;
  g->ir_version = 8;
  return g;
}

static inline int tg_tensor(nr_graph *g, const char *name, unsigned flags, int rank,
                     const int64_t *dims) {
  int t = nr_graph_add_tensor(g, name, flags);
  nr_value *v = &g->tensors[t].value;
  v->dtype = NR_DTYPE_FLOAT;
  v->rank = rank;
  for (int d = 0; d < rank; d++)
    v->dims[d] = dims[d];
  return t;
}

static inline int tg_input(nr_graph *g, const char *name, int rank, const int64_t *dims) {
  int t = tg_tensor(g, name, NR_TENSOR_INPUT, rank, dims);
  g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
  g->inputs[g->n_inputs++] = t;
  return t;
}

static inline int tg_node(nr_graph *g, const char *op, const char *name, int n_in, const int *ins) {
  char out[256];
  snprintf(out, sizeof out, "%s_out", name);
  int t = nr_graph_add_tensor(g, out, 0);
  nr_pu_add_node(g, name, op, "", n_in, ins, 1, &t);
  return t;
}

/* A float constant over the caller's data (not owned: the graph never frees it). */
static inline int tg_borrowed(nr_graph *g, const char *name, int rank, const int64_t *dims,
                              float *data) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  g->tensors[t].value.data = data;
  return t;
}

/* tg_node with n_attrs attributes (copied). */
static inline int tg_node_attrs(nr_graph *g, const char *op, const char *name, int n_in,
                                const int *ins, int n_attrs, const nr_attr *attrs) {
  int out = tg_node(g, op, name, n_in, ins);
  nr_error err = {0};
  for (int i = 0; i < n_attrs; i++)
    nr_pu_copy_attr(g, g->n_nodes - 1, &attrs[i], &err);
  return out;
}

static inline bool tg_finish(nr_test_state *t, nr_graph *g, int out) {
  nr_error err = {0};
  g->outputs = malloc(sizeof(int));
  g->outputs[0] = out;
  g->n_outputs = 1;
  g->tensors[out].flags |= NR_TENSOR_OUTPUT;
  nr_status st = nr_graph_toposort(g, &err);
  if (!st)
    st = nr_graph_bind_ops(g, &err);
  if (!st)
    st = nr_graph_infer(g, &err);
  if (!st)
    st = nr_compiler_name_nodes(g, &err);
  CHECK(!st, "building the test graph: %s", err.message);
  return !st;
}

/* A plan compiled from g along route text on `threads` (calibrated when calib is
 * set), with the knob space and route it was built from; tg_built_free frees all. */
typedef struct tg_built {
  nr_knob_space space;
  nr_route route;
  nr_plan *plan;
} tg_built;

static inline nr_status tg_compile(nr_graph *g, const char *text, int threads,
                                   const struct nr_calibration *calib, tg_built *b,
                                   nr_error *err) {
  memset(b, 0, sizeof *b);
  nr_status s = nr_knob_space_build(g, &b->space, err);
  if (!s)
    s = nr_route_init(&b->route, &b->space, err);
  if (!s)
    s = nr_route_parse(&b->route, text, err);
  if (!s)
    s = nr_compile(g, &b->route, threads, calib, &b->plan, err);
  return s;
}

static inline void tg_built_free(tg_built *b) {
  nr_plan_destroy(b->plan);
  nr_route_free(&b->route);
  nr_knob_space_free(&b->space);
}

static inline void free_values(nr_value *v, int n) {
  for (int i = 0; v && i < n; i++)
    nr_value_free(&v[i]);
  free(v);
}

#endif
