/* infer.c - static shape and dtype inference over a graph, and constant folding.
 *
 * Both walk the nodes in topological order calling each operator's shape rule on the
 * tensors' static descriptions. Folding additionally evaluates, with the reference
 * kernel, every node whose inputs are all constant, so that the shape arithmetic
 * exporters emit (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) turns into
 * constants and the shapes downstream of it become known in the same pass. Folding
 * then drops the copies an inference graph carries (Identity, a Cast to its input's
 * own dtype, Dropout with training off or ratio 0): the producer of a copy's input
 * takes over its output. */
#include "ir/op.h"
#include "util/error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The static description of an enclosing-scope tensor, as a view. */
static nr_value outer_value(const nr_graph *g, const char *name) {
  nr_value v = {.rank = -1};
  for (const nr_graph *p = g->parent; p; p = p->parent) {
    int t = nr_graph_find_tensor(p, name);
    if (t >= 0 && !(p->tensors[t].flags & NR_TENSOR_OUTER)) {
      v = p->tensors[t].value;
      v.owned = false;
      return v;
    }
  }
  return v;
}

static bool node_has_subgraph(const nr_node *n) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g)
      return true;
  return false;
}

/* Folding materialises a node's outputs while the model is prepared. Outputs may be
 * up to 4x the bytes of the constant inputs they come from (a Cast from fp16, a
 * Transpose), plus 64 MiB; beyond that (a ConstantOfShape or Expand of a few bytes
 * into gigabytes) the node is not folded. */
#define FOLD_SLACK_BYTES ((size_t)64 << 20)

static bool fold_fits(nr_value *const *ins, int n_in, nr_value *const *outs, int n_out) {
  size_t in = 0, out = 0;
  for (int i = 0; i < n_in; i++)
    in += ins[i] ? nr_value_nbytes(ins[i]) : 0;
  for (int o = 0; o < n_out; o++) {
    int64_t count = outs[o] ? nr_value_count(outs[o]) : 0;
    size_t elem = outs[o] ? nr_dtype_size(outs[o]->dtype) : 0;
    if (count <= 0 || !elem)
      continue;
    if ((uint64_t)count > (SIZE_MAX / 2 - out) / elem)
      return false;
    out += (size_t)count * elem;
  }
  return out <= FOLD_SLACK_BYTES || out / 4 <= in;
}

static bool all_inputs_const(const nr_graph *g, const nr_node *n) {
  for (int i = 0; i < n->n_inputs; i++) {
    int t = n->inputs[i];
    if (t >= 0 && !(g->tensors[t].flags & NR_TENSOR_CONST))
      return false;
  }
  return true;
}

/* Merges an inferred description into the tensor's: inferred facts win, but a dim
 * the model declared stays when inference could not tell. Data a shape rule computed
 * (Shape, Size) is kept for the rules downstream; only folding, which then drops the
 * producing node, makes the tensor a constant. */
static void merge(nr_tensor *t, nr_value *inferred, bool fold) {
  nr_value *v = &t->value;
  if (inferred->dtype != NR_DTYPE_UNDEFINED)
    v->dtype = inferred->dtype;
  if (inferred->rank >= 0) {
    bool keep = v->rank == inferred->rank;
    for (int d = 0; d < inferred->rank; d++)
      if (inferred->dims[d] >= 0 || !keep)
        v->dims[d] = inferred->dims[d];
    v->rank = inferred->rank;
  }
  if (inferred->data) {
    nr_value_free(v);
    v->data = inferred->data;
    v->owned = inferred->owned;
    inferred->data = NULL;
    inferred->owned = false;
    if (fold)
      t->flags |= NR_TENSOR_CONST;
  }
}

static nr_status infer_node(nr_graph *g, int k, bool fold, bool *folded, nr_error *err) {
  nr_node *n = &g->nodes[k];
  nr_value *ins[NR_OP_MAX_IO], *outs[NR_OP_MAX_IO], tmp_out[NR_OP_MAX_IO];
  nr_value outer[NR_OP_MAX_IO];
  char node[256];
  *folded = false;
  if (n->n_inputs > NR_OP_MAX_IO || n->n_outputs > NR_OP_MAX_IO)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs; a node takes "
                     "at most %d of each (NR_OP_MAX_IO)", nr_node_describe(n, node, sizeof node),
                     n->n_inputs, n->n_outputs, NR_OP_MAX_IO);
  for (int i = 0; i < n->n_inputs; i++) {
    int t = n->inputs[i];
    ins[i] = NULL;
    if (t < 0)
      continue;
    if (g->tensors[t].flags & NR_TENSOR_OUTER) {
      outer[i] = outer_value(g, g->tensors[t].name);
      ins[i] = &outer[i];
    } else {
      ins[i] = &g->tensors[t].value;
    }
  }
  bool evaluate = fold && all_inputs_const(g, n) && !node_has_subgraph(n) &&
                  !(n->def->flags & NR_OP_NO_FOLD) && n->def->run;
  for (int o = 0; o < n->n_outputs; o++) {
    memset(&tmp_out[o], 0, sizeof tmp_out[o]);
    tmp_out[o].rank = -1;
    outs[o] = n->outputs[o] >= 0 ? &tmp_out[o] : NULL;
  }
  nr_op_ctx ctx = {n, n->n_inputs, ins, n->n_outputs, outs, evaluate, NULL, g, err};
  nr_status st = n->def->infer ? n->def->infer(&ctx) : NR_OK;
  if (!st && evaluate && !fold_fits(ins, n->n_inputs, outs, n->n_outputs))
    evaluate = false; /* left to run time, where the memory plan and its limits apply */
  if (!st && evaluate) {
    for (int o = 0; !st && o < n->n_outputs; o++)
      if (outs[o] && !outs[o]->data && !(n->def->flags & NR_OP_ALLOCATES_OUTPUTS))
        st = nr_value_alloc(outs[o], outs[o]->dtype, outs[o]->rank, outs[o]->dims, err);
    if (!st)
      st = n->def->run(&ctx);
    if (!st)
      *folded = true;
  }
  for (int o = 0; o < n->n_outputs; o++) {
    if (!outs[o])
      continue;
    if (!st)
      merge(&g->tensors[n->outputs[o]], outs[o], fold);
    nr_value_free(outs[o]);
  }
  if (st && err && !strstr(err->message, "node '"))
    nr_error_prefix(err, "%s: ", nr_node_describe(n, node, sizeof node));
  return st;
}

/* A node is dead once every output it has is a constant. */
static bool node_dead(const nr_graph *g, const nr_node *n) {
  for (int o = 0; o < n->n_outputs; o++) {
    int t = n->outputs[o];
    if (t >= 0 && !(g->tensors[t].flags & NR_TENSOR_CONST))
      return false;
  }
  return n->n_outputs > 0;
}

static nr_status walk(nr_graph *g, bool fold, nr_error *err) {
  for (int t = 0; t < g->n_tensors; t++) {
    nr_tensor *ten = &g->tensors[t];
    if (ten->flags & NR_TENSOR_OUTER && !ten->value.data) {
      nr_value v = outer_value(g, ten->name);
      ten->value.dtype = v.dtype;
      ten->value.rank = v.rank;
      memcpy(ten->value.dims, v.dims, sizeof v.dims);
    }
  }
  for (int k = 0; k < g->n_nodes; k++) {
    bool folded;
    if (!g->nodes[k].def)
      return nr_errorf(err, NR_ERR_INTERNAL, "node %d is not bound to an operator", k);
    nr_status st = infer_node(g, k, fold, &folded, err);
    if (st)
      return st;
  }
  return NR_OK;
}

nr_status nr_graph_infer(nr_graph *g, nr_error *err) {
  return walk(g, false, err);
}

static void drop_dead_nodes(nr_graph *g) {
  int w = 0;
  for (int k = 0; k < g->n_nodes; k++) {
    nr_node *n = &g->nodes[k];
    if (node_dead(g, n)) {
      for (int o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0)
          g->tensors[n->outputs[o]].producer = -1;
      nr_node_free(n);
      continue;
    }
    g->nodes[w++] = *n;
  }
  g->n_nodes = w;
  for (int k = 0; k < g->n_nodes; k++)
    for (int o = 0; o < g->nodes[k].n_outputs; o++)
      if (g->nodes[k].outputs[o] >= 0)
        g->tensors[g->nodes[k].outputs[o]].producer = k;
}

/* ---- copies: Identity, and Dropout in inference ----------------------------------- */

static bool is_onnx_op(const nr_node *n, const char *op) {
  return (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx")) &&
         !strcmp(n->op_type, op);
}

static bool is_graph_output(const nr_graph *g, int t) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == t)
      return true;
  return false;
}

/* A constant that is false (zero) everywhere. */
static bool const_false(const nr_graph *g, int t) {
  const nr_value *v = &g->tensors[t].value;
  if (!(g->tensors[t].flags & NR_TENSOR_CONST) || !v->data)
    return false;
  for (int64_t i = 0; i < nr_value_count(v); i++)
    if (nr_value_get_f64(v, i) != 0)
      return false;
  return true;
}

/* Identity, a Cast to the dtype its input has, or a Dropout that is one:
 * training_mode absent or constant false, or the ratio constant 0 (torch exports
 * eval-mode attention dropout as ratio 0 in training mode; the spec's scale is then 1
 * and nothing is dropped); the mask unread (reads counts node inputs). */
static bool is_copy(const nr_graph *g, const nr_node *n, const int *reads) {
  if (is_onnx_op(n, "Identity"))
    return n->n_inputs == 1 && n->n_outputs == 1;
  if (is_onnx_op(n, "Cast") && n->n_inputs == 1 && n->n_outputs == 1 && n->inputs[0] >= 0) {
    nr_dtype t = g->tensors[n->inputs[0]].value.dtype;
    return t != NR_DTYPE_UNDEFINED && nr_attr_int(n, "to", -1) == (int64_t)t;
  }
  if (!is_onnx_op(n, "Dropout") || n->n_inputs < 1 || n->n_outputs < 1)
    return false;
  bool no_ratio = n->n_inputs > 1 && n->inputs[1] >= 0 && const_false(g, n->inputs[1]);
  if (n->n_inputs > 2 && n->inputs[2] >= 0 && !const_false(g, n->inputs[2]) && !no_ratio)
    return false;
  int mask = n->n_outputs > 1 ? n->outputs[1] : -1;
  return mask < 0 || (reads[mask] == 0 && !is_graph_output(g, mask));
}

/* The producer of a copy's input takes over its output when the input has no other
 * reader and is no graph output (so graph inputs and outputs keep their names).
 * Producers must be current; they stay so. Graphs with subgraphs are left alone (their
 * bodies may read tensors by name). */
static nr_status drop_copies(nr_graph *g, nr_error *err) {
  for (int k = 0; k < g->n_nodes; k++)
    if (node_has_subgraph(&g->nodes[k]) || g->parent)
      return NR_OK;
  int *reads = calloc((size_t)g->n_tensors + 1, sizeof(int));
  bool *gone = calloc((size_t)g->n_nodes + 1, sizeof(bool));
  if (!reads || !gone) {
    free(reads);
    free(gone);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory dropping copies");
  }
  for (int k = 0; k < g->n_nodes; k++)
    for (int i = 0; i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] >= 0)
        reads[g->nodes[k].inputs[i]]++;
  bool any = false;
  for (int k = 0; k < g->n_nodes; k++) {
    nr_node *n = &g->nodes[k];
    int x = n->inputs[0], y = n->outputs[0];
    int p = x >= 0 ? g->tensors[x].producer : -1;
    if (p < 0 || y < 0 || !is_copy(g, n, reads) || reads[x] != 1 || is_graph_output(g, x))
      continue;
    for (int o = 0; o < g->nodes[p].n_outputs; o++)
      if (g->nodes[p].outputs[o] == x)
        g->nodes[p].outputs[o] = y;
    g->tensors[y].producer = p;
    g->tensors[x].producer = -1;
    reads[x] = 0;
    gone[k] = any = true;
  }
  int w = 0;
  for (int k = 0; any && k < g->n_nodes; k++) {
    if (gone[k]) {
      nr_node_free(&g->nodes[k]);
      continue;
    }
    g->nodes[w] = g->nodes[k];
    for (int o = 0; o < g->nodes[w].n_outputs; o++)
      if (g->nodes[w].outputs[o] >= 0)
        g->tensors[g->nodes[w].outputs[o]].producer = w;
    w++;
  }
  if (any)
    g->n_nodes = w;
  free(reads);
  free(gone);
  return NR_OK;
}

nr_status nr_graph_fold_constants(nr_graph *g, nr_error *err) {
  nr_status st = walk(g, true, err);
  if (!st)
    drop_dead_nodes(g);
  if (!st)
    st = drop_copies(g, err);
  return st;
}

nr_status nr_op_infer_subgraph(nr_op_ctx *ctx, nr_graph *body, int n_inputs,
                               const nr_value *inputs, nr_value *outputs) {
  if (n_inputs != body->n_inputs)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "subgraph takes %d inputs, %d given",
                      body->n_inputs, n_inputs);
  for (int i = 0; i < n_inputs; i++) {
    nr_value *v = &body->tensors[body->inputs[i]].value;
    nr_value_free(v);
    v->dtype = inputs[i].dtype != NR_DTYPE_UNDEFINED ? inputs[i].dtype : v->dtype;
    if (inputs[i].rank >= 0) {
      v->rank = inputs[i].rank;
      memcpy(v->dims, inputs[i].dims, sizeof v->dims);
    }
  }
  nr_status st = walk(body, false, ctx->err);
  for (int i = 0; !st && i < body->n_outputs; i++) {
    outputs[i] = body->tensors[body->outputs[i]].value;
    outputs[i].data = NULL;
    outputs[i].owned = false;
  }
  return st;
}
