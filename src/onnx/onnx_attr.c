/* onnx_attr.c - AttributeProto to nr_attr, including tensor-valued attributes and
 * subgraphs (If branches, Loop and Scan bodies).
 *
 * A subgraph is built as a child nr_graph of the node's graph, sharing the model's
 * opset table; names it uses from enclosing scopes become NR_TENSOR_OUTER tensors
 * (see onnx_load.c). Attribute kinds the IR has no storage for (lists of tensors or
 * graphs, sparse tensors, type protos) and function-body references are reported as
 * unsupported rather than dropped, so a model never loads with a missing attribute. */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *attr_type_name(int type) {
  static const char *const names[] = {
      "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS",
      "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
      "TYPE_PROTOS"};
  return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "?";
}

/* Old exporters sometimes leave `type` unset; infer it from the field that is set. */
static int guess_type(const Onnx__AttributeProto *ap) {
  if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
    return ap->type;
  if (ap->has_f) return NR_ATTR_FLOAT;
  if (ap->has_i) return NR_ATTR_INT;
  if (ap->has_s) return NR_ATTR_STRING;
  if (ap->t) return NR_ATTR_TENSOR;
  if (ap->g) return NR_ATTR_GRAPH;
  if (ap->n_floats) return NR_ATTR_FLOATS;
  if (ap->n_ints) return NR_ATTR_INTS;
  if (ap->n_strings) return NR_ATTR_STRINGS;
  if (ap->n_tensors) return NR_ATTR_TENSORS;
  if (ap->n_graphs) return NR_ATTR_GRAPHS;
  if (ap->sparse_tensor || ap->n_sparse_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR;
  if (ap->tp || ap->n_type_protos) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
  return NR_ATTR_UNDEFINED;
}

static char *copy_bytes(ProtobufCBinaryData b, size_t *len) {
  char *s = malloc(b.len + 1);
  if (!s)
    return NULL;
  if (b.len)
    memcpy(s, b.data, b.len);
  s[b.len] = '\0';
  if (len)
    *len = b.len;
  return s;
}

static nr_status copy_strings(const Onnx__AttributeProto *ap, nr_attr *a, const char *what,
                              nr_error *err) {
  a->strings = calloc(ap->n_strings ? ap->n_strings : 1, sizeof *a->strings);
  if (!a->strings)
    return nr_errorf(err, NR_ERR_NOMEM, "%s: out of memory", what);
  a->n = ap->n_strings; /* NULL entries left by a failure are fine to free */
  for (size_t i = 0; i < ap->n_strings; i++)
    if (!(a->strings[i] = copy_bytes(ap->strings[i], NULL)))
      return nr_errorf(err, NR_ERR_NOMEM, "%s: out of memory", what);
  return NR_OK;
}

static nr_status copy_numbers(const Onnx__AttributeProto *ap, nr_attr *a, const char *what,
                              nr_error *err) {
  size_t n = a->type == NR_ATTR_FLOATS ? ap->n_floats : ap->n_ints;
  size_t size = a->type == NR_ATTR_FLOATS ? sizeof(float) : sizeof(int64_t);
  void *p = malloc(n ? n * size : 1);
  if (!p)
    return nr_errorf(err, NR_ERR_NOMEM, "%s: out of memory", what);
  if (n)
    memcpy(p, a->type == NR_ATTR_FLOATS ? (void *)ap->floats : (void *)ap->ints, n * size);
  if (a->type == NR_ATTR_FLOATS)
    a->floats = p;
  else
    a->ints = p;
  a->n = n;
  return NR_OK;
}

static nr_status convert_graph(nr_onnx_ctx *ctx, nr_graph *g, const char *what,
                               const Onnx__GraphProto *gp, nr_attr *a) {
  nr_graph *sub = nr_graph_create(g);
  if (!sub)
    return nr_errorf(ctx->err, NR_ERR_NOMEM, "%s: out of memory", what);
  a->g = sub;
  sub->parent = g;
  sub->opsets = g->opsets;
  sub->n_opsets = g->n_opsets;
  sub->owns_opsets = false;
  sub->ir_version = g->ir_version;
  nr_status st = nr_onnx_build_graph(ctx, gp, sub);
  if (st)
    nr_error_prefix(ctx->err, "in %s: ", what);
  return st;
}

static nr_status convert_value(nr_onnx_ctx *ctx, nr_graph *g, const char *what,
                               const Onnx__AttributeProto *ap, nr_attr *a) {
  switch (a->type) {
  case NR_ATTR_FLOAT:
    a->f = ap->f;
    return NR_OK;
  case NR_ATTR_INT:
    a->i = ap->i;
    return NR_OK;
  case NR_ATTR_STRING:
    a->s = copy_bytes(ap->s, &a->s_len);
    return a->s ? NR_OK : nr_errorf(ctx->err, NR_ERR_NOMEM, "%s: out of memory", what);
  case NR_ATTR_TENSOR:
    if (!ap->t)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has type TENSOR but no tensor",
                       what);
    return nr_onnx_ctx_tensor(ctx, ap->t, what, &a->t);
  case NR_ATTR_GRAPH:
    if (!ap->g)
      return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has type GRAPH but no graph",
                       what);
    return convert_graph(ctx, g, what, ap->g, a);
  case NR_ATTR_FLOATS:
  case NR_ATTR_INTS:
    return copy_numbers(ap, a, what, ctx->err);
  case NR_ATTR_STRINGS:
    return copy_strings(ap, a, what, ctx->err);
  default:
    return nr_errorf(ctx->err, NR_ERR_UNSUPPORTED,
                     "%s has type %s, which nnroute does not support", what,
                     attr_type_name(a->type));
  }
}

nr_status nr_onnx_convert_attr(nr_onnx_ctx *ctx, nr_graph *g, const char *node_desc,
                               const Onnx__AttributeProto *ap, nr_attr *out) {
  char what[600];
  snprintf(what, sizeof what, "%s attribute '%.256s'", node_desc, ap->name ? ap->name : "");
  if (!ap->name || !*ap->name)
    return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has an attribute without a name",
                     node_desc);
  if (ap->ref_attr_name && *ap->ref_attr_name)
    return nr_errorf(ctx->err, NR_ERR_UNSUPPORTED,
                     "%s refers to function attribute '%.256s'; function bodies are not "
                     "supported", what, ap->ref_attr_name);
  if (!(out->name = nr_onnx_strdup(ap->name)))
    return nr_errorf(ctx->err, NR_ERR_NOMEM, "%s: out of memory", what);
  int type = guess_type(ap);
  if (type == NR_ATTR_UNDEFINED)
    return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has no type and no value", what);
  if (type < 0 || type > ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS)
    return nr_errorf(ctx->err, NR_ERR_INVALID_MODEL, "%s has unknown type %d", what, type);
  if (type >= NR_ATTR_TENSORS)
    return nr_errorf(ctx->err, NR_ERR_UNSUPPORTED,
                     "%s has type %s, which nnroute does not support", what,
                     attr_type_name(type));
  out->type = (nr_attr_type)type;
  return convert_value(ctx, g, what, ap, out);
}
