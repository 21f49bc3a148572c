/* graph_order.c - topological ordering of a graph's nodes and binding of each node
 * to its operator row.
 *
 * A node that holds subgraphs (If, Loop, Scan) also depends on every enclosing-scope
 * tensor its subgraphs read, so those edges count in the ordering. Validation lives
 * here too: a tensor produced twice, an input nobody produces, and cycles are errors
 * that name the node and tensor. */
#include "ir/ir.h"
#include "ir/op.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Calls fn for each tensor of g read by node n, including outer-scope reads made by
 * its subgraphs (resolved to g's tensor indices). */
static void collect_outer(const nr_graph *sub, const nr_graph *g, int *deps, int *nd,
                          int cap) {
  for (int i = 0; i < sub->n_tensors; i++) {
    if (!(sub->tensors[i].flags & NR_TENSOR_OUTER))
      continue;
    int t = nr_graph_find_tensor(g, sub->tensors[i].name);
    if (t >= 0 && *nd < cap)
      deps[(*nd)++] = t;
  }
  for (int k = 0; k < sub->n_nodes; k++) {
    const nr_node *n = &sub->nodes[k];
    for (int a = 0; a < n->n_attrs; a++)
      if (n->attrs[a].g)
        collect_outer(n->attrs[a].g, g, deps, nd, cap);
  }
}

static int count_outer(const nr_graph *sub) {
  int c = 0;
  for (int i = 0; i < sub->n_tensors; i++)
    c += (sub->tensors[i].flags & NR_TENSOR_OUTER) != 0;
  for (int k = 0; k < sub->n_nodes; k++)
    for (int a = 0; a < sub->nodes[k].n_attrs; a++)
      if (sub->nodes[k].attrs[a].g)
        c += count_outer(sub->nodes[k].attrs[a].g);
  return c;
}

/* The tensors node n depends on: its inputs plus its subgraphs' outer reads. */
int nr_node_deps(const nr_graph *g, const nr_node *n, int **out) {
  int cap = n->n_inputs;
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g)
      cap += count_outer(n->attrs[a].g);
  int *deps = malloc(sizeof(int) * (size_t)(cap ? cap : 1));
  if (!deps)
    return -1;
  int nd = 0;
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] >= 0)
      deps[nd++] = n->inputs[i];
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g)
      collect_outer(n->attrs[a].g, g, deps, &nd, cap);
  *out = deps;
  return nd;
}

static nr_status set_producers(nr_graph *g, nr_error *err) {
  char buf[256];
  for (int t = 0; t < g->n_tensors; t++)
    g->tensors[t].producer = -1;
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    for (int o = 0; o < n->n_outputs; o++) {
      int t = n->outputs[o];
      if (t < 0)
        continue;
      nr_tensor *ten = &g->tensors[t];
      if (ten->producer >= 0 || (ten->flags & (NR_TENSOR_CONST | NR_TENSOR_INPUT)))
        return nr_errorf(err, NR_ERR_INVALID_MODEL,
                         "%s: output '%s' is already defined elsewhere in the graph",
                         nr_node_describe(n, buf, sizeof buf), ten->name);
      ten->producer = k;
    }
  }
  return NR_OK;
}

static nr_status check_defined(const nr_graph *g, const nr_node *n, int t,
                               nr_error *err) {
  char buf[256];
  const nr_tensor *ten = &g->tensors[t];
  if (ten->producer >= 0 ||
      (ten->flags & (NR_TENSOR_CONST | NR_TENSOR_INPUT | NR_TENSOR_OUTER)))
    return NR_OK;
  return nr_errorf(err, NR_ERR_INVALID_MODEL,
                   "%s: input '%s' is not a graph input, an initializer, or the output "
                   "of any node", nr_node_describe(n, buf, sizeof buf), ten->name);
}

/* Kahn's algorithm; keeps the model's order among ready nodes. */
nr_status nr_graph_toposort(nr_graph *g, nr_error *err) {
  nr_status st = set_producers(g, err);
  if (st)
    return st;
  int n = g->n_nodes;
  int *pending = calloc((size_t)(n ? n : 1), sizeof(int));
  int *order = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int **deps = calloc((size_t)(n ? n : 1), sizeof(int *));
  int *ndeps = calloc((size_t)(n ? n : 1), sizeof(int));
  nr_node *sorted = malloc(sizeof(nr_node) * (size_t)(n ? n : 1));
  if (!pending || !order || !deps || !ndeps || !sorted) {
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory ordering the graph");
    goto done;
  }
  for (int k = 0; k < n; k++) {
    ndeps[k] = nr_node_deps(g, &g->nodes[k], &deps[k]);
    if (ndeps[k] < 0) {
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory ordering the graph");
      goto done;
    }
    for (int i = 0; i < ndeps[k]; i++) {
      if ((st = check_defined(g, &g->nodes[k], deps[k][i], err)))
        goto done;
      pending[k] += g->tensors[deps[k][i]].producer >= 0;
    }
  }
  /* Repeated sweeps: simple and stable; graphs are at most a few thousand nodes. */
  int done_count = 0;
  char *placed = calloc((size_t)(n ? n : 1), 1);
  if (!placed) {
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory ordering the graph");
    goto done;
  }
  for (bool progress = true; progress && done_count < n;) {
    progress = false;
    for (int k = 0; k < n; k++) {
      if (placed[k])
        continue;
      int missing = 0;
      for (int i = 0; i < ndeps[k]; i++) {
        int p = g->tensors[deps[k][i]].producer;
        missing += p >= 0 && !placed[p];
      }
      if (missing)
        continue;
      placed[k] = 1;
      order[done_count++] = k;
      progress = true;
    }
  }
  if (done_count < n) {
    char buf[256];
    int k = 0;
    while (placed[k])
      k++;
    st = nr_errorf(err, NR_ERR_INVALID_MODEL, "the graph has a cycle through %s",
                   nr_node_describe(&g->nodes[k], buf, sizeof buf));
    free(placed);
    goto done;
  }
  free(placed);
  for (int k = 0; k < n; k++)
    sorted[k] = g->nodes[order[k]];
  if (n)
    memcpy(g->nodes, sorted, sizeof(nr_node) * (size_t)n);
  st = set_producers(g, err);
done:
  for (int k = 0; deps && k < n; k++)
    free(deps[k]);
  free(deps);
  free(ndeps);
  free(pending);
  free(order);
  free(sorted);
  return st;
}

nr_status nr_graph_bind_ops(nr_graph *g, nr_error *err) {
  char buf[256];
  for (int k = 0; k < g->n_nodes; k++) {
    nr_node *n = &g->nodes[k];
    n->def = nr_op_find(n->domain, n->op_type, n->opset);
    if (!n->def)
      return nr_errorf(err, NR_ERR_UNSUPPORTED,
                       "%s: operator %s of domain '%s' at opset %d is not supported",
                       nr_node_describe(n, buf, sizeof buf), n->op_type,
                       n->domain && *n->domain ? n->domain : "ai.onnx", n->opset);
    for (int a = 0; a < n->n_attrs; a++) {
      if (!n->attrs[a].g)
        continue;
      nr_status st = nr_graph_toposort(n->attrs[a].g, err);
      if (!st)
        st = nr_graph_bind_ops(n->attrs[a].g, err);
      if (st)
        return nr_error_prefix(err, "in subgraph '%s' of %s: ", n->attrs[a].name,
                               nr_node_describe(n, buf, sizeof buf));
    }
  }
  return NR_OK;
}

/* ---- attributes ----------------------------------------------------------------- */

const nr_attr *nr_node_attr(const nr_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (!strcmp(n->attrs[i].name, name))
      return &n->attrs[i];
  return NULL;
}

int64_t nr_attr_int(const nr_node *n, const char *name, int64_t dflt) {
  const nr_attr *a = nr_node_attr(n, name);
  if (!a)
    return dflt;
  if (a->type == NR_ATTR_FLOAT) /* NaN reads as absent; out of range saturates */
    return a->f != a->f ? dflt : a->f >= 0x1p63f ? INT64_MAX
                               : a->f < -0x1p63f ? INT64_MIN : (int64_t)a->f;
  return a->type == NR_ATTR_INT ? a->i : dflt;
}

float nr_attr_float(const nr_node *n, const char *name, float dflt) {
  const nr_attr *a = nr_node_attr(n, name);
  if (!a)
    return dflt;
  if (a->type == NR_ATTR_INT)
    return (float)a->i;
  return a->type == NR_ATTR_FLOAT ? a->f : dflt;
}

const char *nr_attr_string(const nr_node *n, const char *name, const char *dflt) {
  const nr_attr *a = nr_node_attr(n, name);
  return a && a->type == NR_ATTR_STRING && a->s ? a->s : dflt;
}

const int64_t *nr_attr_ints(const nr_node *n, const char *name, size_t *count) {
  const nr_attr *a = nr_node_attr(n, name);
  if (!a || a->type != NR_ATTR_INTS) {
    *count = 0;
    return NULL;
  }
  *count = a->n;
  return a->ints;
}

const float *nr_attr_floats(const nr_node *n, const char *name, size_t *count) {
  const nr_attr *a = nr_node_attr(n, name);
  if (!a || a->type != NR_ATTR_FLOATS) {
    *count = 0;
    return NULL;
  }
  *count = a->n;
  return a->floats;
}
