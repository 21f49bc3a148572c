/* onnx_load.c - ModelProto to nr_graph: version checks, opset imports, graph inputs,
 * initializers, nodes and outputs, recursively for subgraphs.
 *
 * Names are resolved in two passes per graph because a valid model may list its nodes
 * out of topological order: the first pass creates every node and the tensors it
 * produces (catching a tensor written twice), the second resolves node inputs and
 * converts attributes, so a subgraph converted in the second pass sees every name its
 * enclosing scopes define. A name a subgraph takes from an enclosing scope becomes an
 * NR_TENSOR_OUTER tensor in that subgraph and in every scope in between, so each graph
 * lists all its free names, those of nested subgraphs included. Ordering and cycles
 * are left to nr_graph_toposort(). */
#include "onnx/onnx_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "node 'conv1' (Conv)" or, when unnamed, "node #3 (Conv)". */
static const char *node_label(const Onnx__NodeProto *np, size_t index, char *buf,
                              size_t cap) {
  const char *op = np->op_type ? np->op_type : "";
  if (np->name && *np->name)
    snprintf(buf, cap, "node '%.200s' (%.100s)", np->name, op);
  else
    snprintf(buf, cap, "node #%zu (%.100s)", index, op);
  return buf;
}

static const char *norm_domain(const char *d) {
  return (!d || !strcmp(d, "ai.onnx")) ? "" : d;
}

static nr_status nomem(nr_onnx_ctx *ctx, const char *what) {
  return nr_errorf(ctx->err, NR_ERR_NOMEM, "out of memory while loading %s", what);
}

/* Adds a named tensor; producer -1, value unknown. */
static int add_tensor(nr_graph *g, const char *name, unsigned flags) {
  int idx = nr_graph_add_tensor(g, name, flags);
  if (idx >= 0) {
    nr_tensor *t = &g->tensors[idx];
    t->producer = -1;
    t->value.dtype = NR_DTYPE_UNDEFINED;
    t->value.rank = -1;
  }
  return idx;
}

/* Finds name in g or, for a subgraph, in an enclosing scope, adding NR_TENSOR_OUTER
 * tensors on the way down. Returns -1 when undefined, -2 when out of memory. */
static int resolve_name(nr_graph *g, const char *name) {
  int idx = nr_graph_find_tensor(g, name);
  if (idx >= 0 || !g->parent)
    return idx;
  int outer = resolve_name(g->parent, name);
  if (outer < 0)
    return outer;
  idx = add_tensor(g, name, NR_TENSOR_OUTER);
  return idx >= 0 ? idx : -2;
}

/* ---- model header ----------------------------------------------------------------- */

static nr_status check_model(const Onnx__ModelProto *m, nr_error *err) {
  int64_t ir = m->has_ir_version ? m->ir_version : 0;
  if (ir < NR_ONNX_MIN_IR_VERSION || ir > NR_ONNX_MAX_IR_VERSION)
    return nr_errorf(err, NR_ERR_UNSUPPORTED,
                     "model has IR version %lld; nnroute reads IR versions %d to %d",
                     (long long)ir, NR_ONNX_MIN_IR_VERSION, NR_ONNX_MAX_IR_VERSION);
  if (!m->graph)
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "model has no graph");
  return NR_OK; /* training_info and functions are ignored: see docs/onnx-support.md */
}

static nr_status check_opset(const Onnx__OperatorSetIdProto *op, const char *domain,
                             const nr_graph *g, nr_error *err) {
  int64_t v = op->has_version ? op->version : 0;
  const char *shown = *domain ? domain : "ai.onnx";
  if (v < 1 || v > INT_MAX)
    return nr_errorf(err, NR_ERR_INVALID_MODEL,
                     "model imports domain '%s' with invalid opset version %lld", shown,
                     (long long)v);
  if (!*domain && v > NR_ONNX_MAX_OPSET)
    return nr_errorf(err, NR_ERR_UNSUPPORTED,
                     "model imports ai.onnx opset %lld; nnroute supports opsets 1 to %d",
                     (long long)v, NR_ONNX_MAX_OPSET);
  for (int i = 0; i < g->n_opsets; i++)
    if (!strcmp(g->opsets[i].domain, domain))
      return nr_errorf(err, NR_ERR_INVALID_MODEL, "model imports domain '%s' twice", shown);
  return NR_OK;
}

static nr_status read_opsets(nr_onnx_ctx *ctx, const Onnx__ModelProto *m, nr_graph *g) {
  g->opsets = calloc(m->n_opset_import ? m->n_opset_import : 1, sizeof *g->opsets);
  if (!g->opsets)
    return nomem(ctx, "opset imports");
  g->owns_opsets = true;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *op = m->opset_import[i];
    const char *domain = norm_domain(op->domain);
    nr_status st = check_opset(op, domain, g, ctx->err);
    if (st)
      return st;
    if (!(g->opsets[g->n_opsets].domain = nr_onnx_strdup(domain)))
      return nomem(ctx, "opset imports");
    g->opsets[g->n_opsets++].version = (int)op->version;
  }
  return NR_OK;
}

/* ---- value infos ------------------------------------------------------------------ */

static nr_status read_shape(nr_onnx_ctx *ctx, const Onnx__TensorShapeProto *sp,
                            const char *what, nr_tensor *t) {
  if (sp->n_dim > NR_MAX_RANK)
    return nr_errorf(ctx->err, NR_ERR_UNSUPPORTED, "%s has rank %zu; nnroute supports up to %d",
                     what, sp->n_dim, NR_MAX_RANK);
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
    t->value.dims[i] = NR_DIM_UNKNOWN;
    /* -1 is what several exporters (Paddle2ONNX among them) write for a free
     * dimension, and ONNX Runtime reads it so: it stays unknown, as an unnamed
     * dim_param would. Other negative values are an error. */
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
        d->dim_value != -1) {
      if (d->dim_value < 0)
        return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has negative dim %lld at axis %zu",
                         what, (long long)d->dim_value, i);
      t->value.dims[i] = d->dim_value;
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
               d->dim_param && *d->dim_param && !t->dim_params[i]) {
      if (!(t->dim_params[i] = nr_onnx_strdup(d->dim_param)))
        return nomem(ctx, what);
    }
  }
  t->value.rank = (int)sp->n_dim;
  return NR_OK;
}

static nr_status type_kind_unsupported(nr_onnx_ctx *ctx, const Onnx__TypeProto *tp,
                                       const char *what) {
  const char *kind = "an opaque value";
  switch (tp->value_case) {
  case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: kind = "a sequence"; break;
  case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: kind = "a map"; break;
  case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: kind = "an optional"; break;
  case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE: kind = "a sparse tensor"; break;
  default: break;
  }
  return nr_errorf(ctx->err, NR_ERR_UNSUPPORTED,
                   "%s is %s; nnroute supports dense tensors only", what, kind);
}

/* Reads a ValueInfo's type into t. need_type: a missing element type is an error
 * (main graph inputs, which the user must be able to feed). */
static nr_status read_value_info(nr_onnx_ctx *ctx, const Onnx__ValueInfoProto *vi,
                                 const char *what, bool need_type, nr_tensor *t) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
    return need_type ? nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has no type", what)
                     : NR_OK;
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return type_kind_unsupported(ctx, tp, what);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  int32_t elem = tt->has_elem_type ? tt->elem_type : 0;
  if (elem || need_type) {
    nr_status st = nr_onnx_dtype(elem, what, &t->value.dtype, ctx->err);
    if (st)
      return st;
  }
  return tt->shape ? read_shape(ctx, tt->shape, what, t) : NR_OK;
}

/* ---- initializers and inputs ------------------------------------------------------ */

static nr_status add_initializers(nr_onnx_ctx *ctx, const Onnx__GraphProto *gp,
                                  nr_graph *g) {
  char what[320];
  if (gp->n_sparse_initializer)
    return nr_errorf(ctx->err, NR_ERR_UNSUPPORTED,
                     "graph '%.200s' has sparse initializers, which nnroute does not support",
                     g->name);
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    snprintf(what, sizeof what, "initializer '%.256s'", tp->name ? tp->name : "");
    if (!tp->name || !*tp->name)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "initializer #%zu has no name", i);
    if (nr_graph_find_tensor(g, tp->name) >= 0)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s is defined twice", what);
    int idx = add_tensor(g, tp->name, NR_TENSOR_CONST);
    if (idx < 0)
      return nomem(ctx, what);
    nr_status st = nr_onnx_ctx_tensor(ctx, tp, what, &g->tensors[idx].value);
    if (st)
      return st;
  }
  return NR_OK;
}

static nr_status add_inputs(nr_onnx_ctx *ctx, const Onnx__GraphProto *gp, nr_graph *g) {
  char what[320];
  if (!(g->inputs = malloc((gp->n_input ? gp->n_input : 1) * sizeof *g->inputs)))
    return nomem(ctx, "graph inputs");
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *name = gp->input[i]->name;
    snprintf(what, sizeof what, "graph input '%.256s'", name ? name : "");
    if (!name || !*name)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "graph input #%zu has no name", i);
    int idx = nr_graph_find_tensor(g, name);
    if (idx >= 0 && (g->tensors[idx].flags & NR_TENSOR_CONST))
      continue; /* an initializer listed as input (IR < 4, or a default value) */
    if (idx >= 0)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s is declared twice", what);
    if ((idx = add_tensor(g, name, NR_TENSOR_INPUT)) < 0)
      return nomem(ctx, what);
    g->inputs[g->n_inputs++] = idx;
    nr_status st = read_value_info(ctx, gp->input[i], what, !g->parent, &g->tensors[idx]);
    if (st)
      return st;
  }
  return NR_OK;
}

/* ---- nodes ------------------------------------------------------------------------ */

static nr_status node_identity(nr_onnx_ctx *ctx, const Onnx__NodeProto *np,
                               const char *label, const nr_graph *g, nr_node *n) {
  const char *domain = norm_domain(np->domain);
  n->name = nr_onnx_strdup(np->name);
  n->op_type = nr_onnx_strdup(np->op_type);
  n->domain = nr_onnx_strdup(domain);
  if (!n->name || !n->op_type || !n->domain)
    return nomem(ctx, label);
  if (!*n->op_type)
    return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has no op_type", label);
  for (int i = 0; i < g->n_opsets; i++)
    if (!strcmp(g->opsets[i].domain, domain)) {
      n->opset = g->opsets[i].version;
      return NR_OK;
    }
  return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL,
                   "%s uses domain '%s', which the model does not import", label,
                   *domain ? domain : "ai.onnx");
}

static nr_status claim_output(nr_onnx_ctx *ctx, nr_graph *g, const char *name,
                              const char *label, int node_index, int *out) {
  int idx = nr_graph_find_tensor(g, name);
  if (idx < 0 && (idx = add_tensor(g, name, 0)) < 0)
    return nomem(ctx, label);
  nr_tensor *t = &g->tensors[idx];
  if (t->flags & (NR_TENSOR_INPUT | NR_TENSOR_CONST))
    return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s writes tensor '%.256s', which is a %s",
                     label, name, (t->flags & NR_TENSOR_INPUT) ? "graph input" : "initializer");
  if (t->producer >= 0)
    return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL,
                     "tensor '%.256s' is produced by two nodes: node #%d ('%.200s') and %s",
                     name, t->producer, g->nodes[t->producer].name, label);
  t->producer = node_index;
  *out = idx;
  return NR_OK;
}

static nr_status make_node(nr_onnx_ctx *ctx, nr_graph *g, const Onnx__NodeProto *np,
                           size_t index) {
  char label[400];
  node_label(np, index, label, sizeof label);
  nr_node *n = nr_graph_add_node(g);
  if (!n)
    return nomem(ctx, label);
  nr_status st = node_identity(ctx, np, label, g, n);
  if (st)
    return st;
  if (!(n->outputs = malloc((np->n_output ? np->n_output : 1) * sizeof *n->outputs)))
    return nomem(ctx, label);
  for (size_t k = 0; k < np->n_output; k++)
    n->outputs[k] = -1;
  n->n_outputs = (int)np->n_output;
  for (size_t k = 0; k < np->n_output && !st; k++)
    if (np->output[k] && *np->output[k])
      st = claim_output(ctx, g, np->output[k], label, (int)index, &n->outputs[k]);
  return st;
}

static nr_status link_inputs(nr_onnx_ctx *ctx, nr_graph *g, const Onnx__NodeProto *np,
                             const char *label, nr_node *n) {
  if (!(n->inputs = malloc((np->n_input ? np->n_input : 1) * sizeof *n->inputs)))
    return nomem(ctx, label);
  for (size_t k = 0; k < np->n_input; k++)
    n->inputs[k] = -1;
  n->n_inputs = (int)np->n_input;
  for (size_t k = 0; k < np->n_input; k++) {
    const char *name = np->input[k];
    if (!name || !*name)
      continue;
    int idx = resolve_name(g, name);
    if (idx == -2)
      return nomem(ctx, label);
    if (idx < 0)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL,
                       "%s input '%.256s' is not a graph input, initializer or node output%s",
                       label, name, g->parent ? " in this or an enclosing graph" : "");
    n->inputs[k] = idx;
  }
  return NR_OK;
}

static nr_status link_attrs(nr_onnx_ctx *ctx, nr_graph *g, const Onnx__NodeProto *np,
                            const char *label, int node_index) {
  nr_node *n = &g->nodes[node_index];
  if (!(n->attrs = calloc(np->n_attribute ? np->n_attribute : 1, sizeof *n->attrs)))
    return nomem(ctx, label);
  n->n_attrs = (int)np->n_attribute;
  for (size_t k = 0; k < np->n_attribute; k++) {
    const char *name = np->attribute[k]->name;
    for (size_t j = 0; j < k && name; j++)
      if (np->attribute[j]->name && !strcmp(np->attribute[j]->name, name))
        return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has attribute '%.256s' twice",
                         label, name);
    /* g->nodes is not reallocated here: subgraphs add nodes to their own graphs. */
    nr_status st = nr_onnx_convert_attr(ctx, g, label, np->attribute[k], &n->attrs[k]);
    if (st)
      return st;
  }
  return NR_OK;
}

static nr_status add_nodes(nr_onnx_ctx *ctx, const Onnx__GraphProto *gp, nr_graph *g) {
  char label[400];
  nr_status st = NR_OK;
  for (size_t i = 0; i < gp->n_node && !st; i++)
    st = make_node(ctx, g, gp->node[i], i);
  for (size_t i = 0; i < gp->n_node && !st; i++) {
    node_label(gp->node[i], i, label, sizeof label);
    st = link_inputs(ctx, g, gp->node[i], label, &g->nodes[i]);
    if (!st)
      st = link_attrs(ctx, g, gp->node[i], label, (int)i);
  }
  return st;
}

/* ---- outputs ---------------------------------------------------------------------- */

/* A produced or outer tensor takes the declared type; inputs and constants keep their
 * own. The declaration is checked either way (sequences etc. are refused). */
static nr_status apply_output_type(nr_onnx_ctx *ctx, const Onnx__ValueInfoProto *vi,
                                   const char *what, nr_graph *g, int idx) {
  nr_tensor scratch;
  memset(&scratch, 0, sizeof scratch);
  scratch.value.rank = -1;
  nr_status st = read_value_info(ctx, vi, what, false, &scratch);
  nr_tensor *t = &g->tensors[idx];
  bool declared_only = !(t->flags & (NR_TENSOR_INPUT | NR_TENSOR_CONST));
  if (!st && declared_only && t->value.rank < 0) {
    t->value.dtype = scratch.value.dtype;
    t->value.rank = scratch.value.rank;
    memcpy(t->value.dims, scratch.value.dims, sizeof t->value.dims);
    for (int i = 0; i < NR_MAX_RANK; i++)
      if (!t->dim_params[i]) {
        t->dim_params[i] = scratch.dim_params[i];
        scratch.dim_params[i] = NULL;
      }
  }
  for (int i = 0; i < NR_MAX_RANK; i++)
    free(scratch.dim_params[i]);
  return st;
}

static nr_status add_outputs(nr_onnx_ctx *ctx, const Onnx__GraphProto *gp, nr_graph *g) {
  char what[320];
  if (!(g->outputs = malloc((gp->n_output ? gp->n_output : 1) * sizeof *g->outputs)))
    return nomem(ctx, "graph outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = gp->output[i]->name;
    snprintf(what, sizeof what, "graph output '%.256s'", name ? name : "");
    if (!name || !*name)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "graph output #%zu has no name", i);
    int idx = resolve_name(g, name);
    if (idx == -2)
      return nomem(ctx, what);
    if (idx < 0)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL,
                       "%s is not produced by any node, input or initializer", what);
    g->tensors[idx].flags |= NR_TENSOR_OUTPUT;
    g->outputs[g->n_outputs++] = idx;
    nr_status st = apply_output_type(ctx, gp->output[i], what, g, idx);
    if (st)
      return st;
  }
  return NR_OK;
}

/* ---- entry points ----------------------------------------------------------------- */

nr_status nr_onnx_build_graph(nr_onnx_ctx *ctx, const Onnx__GraphProto *gp, nr_graph *g) {
  free(g->name);
  if (!(g->name = nr_onnx_strdup(gp->name)))
    return nomem(ctx, "graph name");
  nr_status st = add_initializers(ctx, gp, g);
  if (!st)
    st = add_inputs(ctx, gp, g);
  if (!st)
    st = add_nodes(ctx, gp, g);
  if (!st)
    st = add_outputs(ctx, gp, g);
  return st;
}

nr_status nr_onnx_load(const void *data, size_t len, const char *base_dir,
                       size_t max_bytes, nr_graph **out, nr_error *err) {
  if (!out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_onnx_load: out is NULL");
  *out = NULL;
  ProtobufCMessage *msg = NULL;
  nr_status st = nr_onnx_unpack(&onnx__model_proto__descriptor, data, len, "ONNX model",
                                &msg, err);
  if (st)
    return st;
  const Onnx__ModelProto *m = (const Onnx__ModelProto *)msg;
  nr_onnx_ctx ctx = {base_dir, max_bytes ? max_bytes : NR_ONNX_DEFAULT_MAX_BYTES, 0, err};
  nr_graph *g = NULL;
  st = check_model(m, err);
  if (!st && !(g = nr_graph_create(NULL)))
    st = nomem(&ctx, "the graph");
  if (!st) {
    g->ir_version = m->ir_version;
    st = read_opsets(&ctx, m, g);
  }
  if (!st)
    st = nr_onnx_build_graph(&ctx, m->graph, g);
  nr_onnx_free(msg);
  if (st) {
    nr_graph_destroy(g);
    return st;
  }
  *out = g;
  return NR_OK;
}
