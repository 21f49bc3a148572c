/* exec_node.c - runs a single operator through the reference executor by wrapping it
 * in a one-node graph; the unit tests' way to exercise one kernel with the same code
 * path a whole model takes. */
#include "kernels/ref/executor.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nr_status build_graph(nr_graph *g, const char *op_type, const char *domain,
                             int opset, int n_attrs, const nr_attr *attrs, int n_inputs,
                             const nr_value *const *inputs, int n_outputs, nr_error *err) {
  g->opsets = calloc(1, sizeof *g->opsets);
  if (!g->opsets)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  g->owns_opsets = true;
  g->n_opsets = 1;
  g->opsets[0].domain = strdup(domain ? domain : "");
  g->opsets[0].version = opset;
  nr_node *n = nr_graph_add_node(g);
  if (!n || !g->opsets[0].domain)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  n->name = strdup("node");
  n->op_type = strdup(op_type);
  n->domain = strdup(domain ? domain : "");
  n->opset = opset;
  n->inputs = malloc(sizeof(int) * (size_t)(n_inputs + 1));
  n->outputs = malloc(sizeof(int) * (size_t)(n_outputs + 1));
  n->attrs = calloc((size_t)(n_attrs + 1), sizeof(nr_attr));
  if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs || !n->attrs)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int a = 0; a < n_attrs; a++, n->n_attrs++) {
    nr_status st = nr_attr_copy(&n->attrs[a], &attrs[a], err);
    if (st)
      return st;
    n->attrs[a].g = attrs[a].g; /* borrowed; detached before destroy */
  }
  g->inputs = malloc(sizeof(int) * (size_t)(n_inputs + 1));
  g->outputs = malloc(sizeof(int) * (size_t)(n_outputs + 1));
  if (!g->inputs || !g->outputs)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  char name[32];
  for (int i = 0; i < n_inputs; i++, n->n_inputs++) {
    n->inputs[i] = -1;
    if (!inputs[i])
      continue;
    snprintf(name, sizeof name, "input%d", i);
    int t = nr_graph_add_tensor(g, name, NR_TENSOR_INPUT);
    if (t < 0)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    g->tensors[t].value = *inputs[i];
    g->tensors[t].value.data = NULL;
    g->tensors[t].value.owned = false;
    n->inputs[i] = t;
    g->inputs[g->n_inputs++] = t;
  }
  for (int o = 0; o < n_outputs; o++, n->n_outputs++) {
    snprintf(name, sizeof name, "output%d", o);
    int t = nr_graph_add_tensor(g, name, NR_TENSOR_OUTPUT);
    if (t < 0)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    g->nodes[0].outputs[o] = t;
    g->outputs[g->n_outputs++] = t;
  }
  return NR_OK;
}

nr_status nr_ref_exec_node(const char *op_type, const char *domain, int opset,
                           int n_attrs, const nr_attr *attrs, int n_inputs,
                           const nr_value *const *inputs, int n_outputs,
                           nr_value *outputs, nr_error *err) {
  nr_graph *g = nr_graph_create(NULL);
  if (!g)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  nr_value present[64];
  int np = 0;
  nr_status st = n_inputs > 64 || n_outputs > 64
                     ? nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "too many inputs")
                     : build_graph(g, op_type, domain, opset, n_attrs, attrs, n_inputs,
                                   inputs, n_outputs, err);
  if (!st)
    st = nr_graph_toposort(g, err);
  if (!st)
    st = nr_graph_bind_ops(g, err);
  for (int i = 0; !st && i < n_inputs; i++)
    if (inputs[i])
      present[np++] = *inputs[i];
  if (!st)
    st = nr_ref_exec(g, present, outputs, err);
  for (int a = 0; g->n_nodes && a < g->nodes[0].n_attrs; a++)
    g->nodes[0].attrs[a].g = NULL;
  nr_graph_destroy(g);
  return st;
}
