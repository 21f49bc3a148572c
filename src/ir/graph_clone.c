/* graph_clone.c - deep copy of a graph (tensors with their constant data, nodes,
 * attributes, subgraphs). The compiler rewrites a clone so the model stays intact
 * for further builds along other routes. */
#include "ir/ir.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

static int *dup_ints(const int *v, int n) {
  int *d = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (d && n)
    memcpy(d, v, sizeof(int) * (size_t)n);
  return d;
}

static nr_status clone_tensor(nr_graph *dst, const nr_tensor *t, nr_error *err) {
  int i = nr_graph_add_tensor(dst, t->name, t->flags);
  if (i < 0)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning tensor '%s'", t->name);
  nr_tensor *c = &dst->tensors[i];
  c->producer = t->producer;
  for (int d = 0; d < NR_MAX_RANK; d++)
    if (t->dim_params[d] && !(c->dim_params[d] = strdup(t->dim_params[d])))
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning tensor '%s'", t->name);
  return nr_value_copy(&c->value, &t->value, err);
}

static nr_status clone_node(nr_graph *dst, const nr_node *n, nr_error *err) {
  nr_node *c = nr_graph_add_node(dst);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning a node");
  c->name = strdup(n->name ? n->name : "");
  c->op_type = strdup(n->op_type);
  c->domain = strdup(n->domain ? n->domain : "");
  c->opset = n->opset;
  c->def = n->def;
  c->inputs = dup_ints(n->inputs, n->n_inputs);
  c->outputs = dup_ints(n->outputs, n->n_outputs);
  c->attrs = calloc((size_t)(n->n_attrs ? n->n_attrs : 1), sizeof(nr_attr));
  if (!c->name || !c->op_type || !c->domain || !c->inputs || !c->outputs || !c->attrs)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning node '%s'", n->name);
  c->n_inputs = n->n_inputs;
  c->n_outputs = n->n_outputs;
  for (int a = 0; a < n->n_attrs; a++, c->n_attrs++) {
    nr_status st = nr_attr_copy(&c->attrs[a], &n->attrs[a], err);
    if (!st && n->attrs[a].g)
      st = nr_graph_clone(n->attrs[a].g, dst, &c->attrs[a].g, err);
    if (st)
      return st;
  }
  return NR_OK;
}

static nr_status clone_opsets(nr_graph *dst, const nr_graph *src, nr_error *err) {
  dst->opsets = calloc((size_t)(src->n_opsets ? src->n_opsets : 1), sizeof(nr_opset));
  if (!dst->opsets)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning opsets");
  dst->owns_opsets = true;
  for (int i = 0; i < src->n_opsets; i++, dst->n_opsets++) {
    dst->opsets[i].version = src->opsets[i].version;
    dst->opsets[i].domain = strdup(src->opsets[i].domain ? src->opsets[i].domain : "");
    if (!dst->opsets[i].domain)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning opsets");
  }
  return NR_OK;
}

nr_status nr_graph_clone(const nr_graph *src, nr_graph *parent, nr_graph **out,
                         nr_error *err) {
  nr_graph *g = nr_graph_create(parent);
  if (!g)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning a graph");
  nr_status st = NR_OK;
  g->ir_version = src->ir_version;
  if (!parent || src->owns_opsets)
    st = clone_opsets(g, src, err);
  if (!st && src->name && !(g->name = strdup(src->name)))
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning a graph");
  for (int t = 0; !st && t < src->n_tensors; t++)
    st = clone_tensor(g, &src->tensors[t], err);
  for (int k = 0; !st && k < src->n_nodes; k++)
    st = clone_node(g, &src->nodes[k], err);
  if (!st) {
    g->inputs = dup_ints(src->inputs, src->n_inputs);
    g->outputs = dup_ints(src->outputs, src->n_outputs);
    g->n_inputs = src->n_inputs;
    g->n_outputs = src->n_outputs;
    if (!g->inputs || !g->outputs)
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory cloning a graph");
  }
  if (st) {
    nr_graph_destroy(g);
    return st;
  }
  *out = g;
  return NR_OK;
}
