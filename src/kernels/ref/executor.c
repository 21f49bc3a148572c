/* executor.c - the reference executor (see executor.h).
 *
 * A scope holds one nr_value per tensor of its graph. Constants and graph inputs are
 * views (not owned); node outputs are owned and freed after their last reader. For
 * each node the operator's shape rule runs on the actual inputs, missing outputs are
 * allocated, and the kernel fills them. Subgraphs (If, Loop, Scan) run in a child
 * scope whose enclosing-scope reads resolve by name through the parent chain. */
#include "kernels/ref/executor.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct nr_exec_scope {
  const nr_graph *g;
  nr_value *vals;
  int *last_use;  /* index of the last node reading each tensor, -1 if none */
  struct nr_exec_scope *parent;
  nr_ref_observer observe; /* top-level scope only: sees every computed tensor */
  void *observe_user;
} nr_exec_scope;

static nr_value *resolve(nr_exec_scope *s, int t) {
  const nr_tensor *ten = &s->g->tensors[t];
  if (!(ten->flags & NR_TENSOR_OUTER))
    return &s->vals[t];
  for (nr_exec_scope *p = s->parent; p; p = p->parent) {
    int u = nr_graph_find_tensor(p->g, ten->name);
    if (u < 0)
      continue;
    if (!(p->g->tensors[u].flags & NR_TENSOR_OUTER))
      return &p->vals[u];
    s = p;
    t = u;
    ten = &p->g->tensors[u];
  }
  return NULL;
}

static nr_status scope_init(nr_exec_scope *s, const nr_graph *g, nr_exec_scope *parent,
                            nr_error *err) {
  memset(s, 0, sizeof *s);
  s->g = g;
  s->parent = parent;
  s->vals = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *s->vals);
  s->last_use = malloc(sizeof(int) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  if (!s->vals || !s->last_use)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory setting up the executor");
  for (int t = 0; t < g->n_tensors; t++) {
    s->last_use[t] = -1;
    s->vals[t].rank = -1;
    if (g->tensors[t].flags & NR_TENSOR_CONST) {
      s->vals[t] = g->tensors[t].value;
      s->vals[t].owned = false;
    }
  }
  for (int k = 0; k < g->n_nodes; k++) {
    int *deps;
    int nd = nr_node_deps(g, &g->nodes[k], &deps);
    if (nd < 0)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory setting up the executor");
    for (int i = 0; i < nd; i++)
      s->last_use[deps[i]] = k;
    free(deps);
  }
  for (int i = 0; i < g->n_outputs; i++)
    s->last_use[g->outputs[i]] = g->n_nodes; /* never freed by the node loop */
  return NR_OK;
}

static void scope_free(nr_exec_scope *s) {
  if (s->vals)
    for (int t = 0; t < s->g->n_tensors; t++)
      nr_value_free(&s->vals[t]);
  free(s->vals);
  free(s->last_use);
}

static nr_status alloc_outputs(nr_op_ctx *ctx) {
  char buf[128];
  for (int o = 0; o < ctx->n_outputs; o++) {
    nr_value *v = ctx->outputs[o];
    if (!v || v->data)
      continue;
    if (!nr_value_shape_known(v))
      return nr_op_fail(ctx, NR_ERR_INTERNAL, "output %d has no concrete shape (%s)", o,
                        nr_value_describe(v, buf, sizeof buf));
    nr_status st = nr_value_alloc(v, v->dtype, v->rank, v->dims, ctx->err);
    if (st) {
      char node[256];
      return nr_error_prefix(ctx->err, "%s: ",
                             nr_node_describe(ctx->node, node, sizeof node));
    }
  }
  return NR_OK;
}

/* Runs one node of scope s. */
static nr_status run_node(nr_exec_scope *s, int k, nr_error *err) {
  const nr_node *n = &s->g->nodes[k];
  nr_value *ins[NR_OP_MAX_IO], *outs[NR_OP_MAX_IO];
  char node[256];
  if (n->n_inputs > NR_OP_MAX_IO || n->n_outputs > NR_OP_MAX_IO)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs; a node takes "
                     "at most %d of each (NR_OP_MAX_IO)", nr_node_describe(n, node, sizeof node),
                     n->n_inputs, n->n_outputs, NR_OP_MAX_IO);
  for (int i = 0; i < n->n_inputs; i++) {
    ins[i] = n->inputs[i] >= 0 ? resolve(s, n->inputs[i]) : NULL;
    if (n->inputs[i] >= 0 && (!ins[i] || (!ins[i]->data && nr_value_count(ins[i]) != 0)))
      return nr_errorf(err, NR_ERR_INTERNAL, "%s: input '%s' has no value",
                       nr_node_describe(n, node, sizeof node),
                       s->g->tensors[n->inputs[i]].name);
  }
  for (int o = 0; o < n->n_outputs; o++) {
    outs[o] = n->outputs[o] >= 0 ? &s->vals[n->outputs[o]] : NULL;
    if (outs[o]) {
      nr_value_free(outs[o]);
      memset(outs[o], 0, sizeof *outs[o]);
      outs[o]->rank = -1;
    }
  }
  nr_op_ctx ctx = {n, n->n_inputs, ins, n->n_outputs, outs, true, s, s->g, err};
  if (!n->def)
    return nr_errorf(err, NR_ERR_INTERNAL, "%s: operator not bound",
                     nr_node_describe(n, node, sizeof node));
  nr_status st = n->def->infer ? n->def->infer(&ctx) : NR_OK;
  if (!st && !(n->def->flags & NR_OP_ALLOCATES_OUTPUTS))
    st = alloc_outputs(&ctx);
  if (!st && n->def->run)
    st = n->def->run(&ctx);
  return st;
}

static void release_inputs(nr_exec_scope *s, int k) {
  int *deps;
  int nd = nr_node_deps(s->g, &s->g->nodes[k], &deps);
  for (int i = 0; i < nd; i++) {
    int t = deps[i];
    if (s->last_use[t] == k && !(s->g->tensors[t].flags & NR_TENSOR_OUTER))
      nr_value_free(&s->vals[t]);
  }
  if (nd >= 0)
    free(deps);
  /* Outputs nobody reads (unused optional results) can go at once. */
  const nr_node *n = &s->g->nodes[k];
  for (int o = 0; o < n->n_outputs; o++) {
    int t = n->outputs[o];
    if (t >= 0 && s->last_use[t] < 0)
      nr_value_free(&s->vals[t]);
  }
}

static nr_status scope_run(nr_exec_scope *s, const nr_value *inputs, nr_value *outputs,
                           nr_error *err) {
  const nr_graph *g = s->g;
  for (int i = 0; i < g->n_inputs; i++) {
    s->vals[g->inputs[i]] = inputs[i];
    s->vals[g->inputs[i]].owned = false;
  }
  for (int i = 0; s->observe && i < g->n_inputs; i++) {
    nr_status st = s->observe(s->observe_user, g, g->inputs[i], &s->vals[g->inputs[i]]);
    if (st)
      return st;
  }
  for (int k = 0; k < g->n_nodes; k++) {
    nr_status st = run_node(s, k, err);
    for (int o = 0; !st && s->observe && o < g->nodes[k].n_outputs; o++) {
      int t = g->nodes[k].outputs[o];
      if (t >= 0 && s->vals[t].data)
        st = s->observe(s->observe_user, g, t, &s->vals[t]);
    }
    if (st)
      return st;
    release_inputs(s, k);
  }
  for (int i = 0; i < g->n_outputs; i++) {
    nr_value *v = resolve(s, g->outputs[i]);
    if (!v || !v->data)
      return nr_errorf(err, NR_ERR_INTERNAL, "graph output '%s' was not computed",
                       g->tensors[g->outputs[i]].name);
    memset(&outputs[i], 0, sizeof outputs[i]);
    if (v->owned && v == &s->vals[g->outputs[i]]) {
      outputs[i] = *v; /* move */
      v->owned = false;
      v->data = NULL;
    } else {
      nr_status st = nr_value_copy(&outputs[i], v, err);
      if (st)
        return st;
    }
  }
  return NR_OK;
}

static nr_status exec_in(const nr_graph *g, nr_exec_scope *parent, const nr_value *inputs,
                         nr_value *outputs, nr_error *err) {
  nr_exec_scope s;
  nr_status st = scope_init(&s, g, parent, err);
  if (!st)
    st = scope_run(&s, inputs, outputs, err);
  scope_free(&s);
  return st;
}

nr_status nr_ref_exec(const nr_graph *g, const nr_value *inputs, nr_value *outputs,
                      nr_error *err) {
  return exec_in(g, NULL, inputs, outputs, err);
}

nr_status nr_ref_exec_observed(const nr_graph *g, const nr_value *inputs,
                               nr_value *outputs, nr_ref_observer fn, void *user,
                               nr_error *err) {
  nr_exec_scope s;
  nr_status st = scope_init(&s, g, NULL, err);
  s.observe = fn;
  s.observe_user = user;
  if (!st)
    st = scope_run(&s, inputs, outputs, err);
  scope_free(&s);
  return st;
}

nr_status nr_op_run_subgraph(nr_op_ctx *ctx, const nr_graph *body, int n_inputs,
                             const nr_value *inputs, nr_value *outputs) {
  if (!ctx->runtime || !ctx->scope)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "subgraph run outside the executor");
  if (n_inputs != body->n_inputs)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "subgraph '%s' takes %d inputs, %d given",
                      body->name ? body->name : "", body->n_inputs, n_inputs);
  return exec_in(body, ctx->scope, inputs, outputs, ctx->err);
}
