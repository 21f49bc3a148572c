/* engine_graph.c - the GRAPH section of an engine file: the plan's optimized graph as
 * an ONNX ModelProto (protobuf-c), and back.
 *
 * Key decision: the graph comes back exactly, tensor indices included, because
 * slots, steps and tactics refer to tensors and nodes by index. So every tensor of
 * every graph is listed in value_info in index order, with its IR flags in the
 * metadata entry "nnroute.flags", and the reader creates the tensors in that order and
 * resolves node edges by name inside the one graph (names a subgraph takes from an
 * enclosing scope are listed there too, flagged OUTER). Main-graph constants whose
 * bytes a plain CONST slot already holds are not stored: their value_info names the
 * slot ("nnroute.weights"), and the engine points the tensor at the weights. The rest
 * is said the ONNX way (nodes, attributes of every type the IR holds, subgraphs,
 * opsets, typed graph inputs and outputs, other constants as initializers), so the
 * section opens in ONNX tools. A node whose opset differs from its domain's import
 * carries "nnroute.opset"; a symbolic name on a known dim rides in the dim's
 * denotation. Bytes are parsed with the loader's hostile-input machinery
 * (nr_onnx_unpack: nesting and allocation bounds; nr_onnx_tensor_to_value). */
#include "engine/engine_internal.h"
#include "onnx/onnx_load.h"
#include "util/error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_FLAGS "nnroute.flags"
#define KEY_WEIGHTS "nnroute.weights"
#define KEY_OPSET "nnroute.opset"
#define KNOWN_FLAGS (NR_TENSOR_INPUT | NR_TENSOR_OUTPUT | NR_TENSOR_CONST | NR_TENSOR_OUTER)

/* ---- encoding: protobuf-c structs allocated from a pool, freed after packing ------ */

typedef struct pool {
  void **ptrs;
  size_t n, cap;
  bool oom;
} pool;

static void *pool_zalloc(pool *pl, size_t size) {
  if (pl->oom)
    return NULL;
  if (pl->n == pl->cap) {
    size_t cap = pl->cap ? pl->cap * 2 : 256;
    void **p = realloc(pl->ptrs, cap * sizeof *p);
    if (!p) {
      pl->oom = true;
      return NULL;
    }
    pl->ptrs = p;
    pl->cap = cap;
  }
  void *m = calloc(1, size ? size : 1);
  if (!m) {
    pl->oom = true;
    return NULL;
  }
  return pl->ptrs[pl->n++] = m;
}

static void pool_free(pool *pl) {
  for (size_t i = 0; i < pl->n; i++)
    free(pl->ptrs[i]);
  free(pl->ptrs);
}

#define POOL_NEW(pl, T, init)                                                          \
  ({                                                                                   \
    T *p_ = pool_zalloc((pl), sizeof(T));                                              \
    if (p_) {                                                                          \
      T i_ = init;                                                                     \
      *p_ = i_;                                                                        \
    }                                                                                  \
    p_;                                                                                \
  })
#define POOL_ARR(pl, T, n) ((T *)pool_zalloc((pl), sizeof(T) * (size_t)(n)))

static char *pool_int(pool *pl, long long v) {
  char *s = pool_zalloc(pl, 24);
  if (s)
    snprintf(s, 24, "%lld", v);
  return s;
}

static Onnx__StringStringEntryProto *enc_entry(pool *pl, const char *key, char *value) {
  Onnx__StringStringEntryProto *e = POOL_NEW(pl, Onnx__StringStringEntryProto,
                                             ONNX__STRING_STRING_ENTRY_PROTO__INIT);
  if (e) {
    e->key = (char *)key;
    e->value = value;
  }
  return e;
}

static Onnx__TensorProto *enc_tensor(pool *pl, const nr_value *v, const char *name) {
  Onnx__TensorProto *t = POOL_NEW(pl, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
  if (!t)
    return NULL;
  t->name = (char *)name;
  t->has_data_type = 1;
  t->data_type = (int32_t)v->dtype;
  t->n_dims = (size_t)(v->rank > 0 ? v->rank : 0);
  t->dims = (int64_t *)v->dims;
  t->has_raw_data = 1;
  t->raw_data.len = nr_value_nbytes(v);
  t->raw_data.data = v->data;
  return t;
}

static Onnx__TypeProto *enc_type(pool *pl, const nr_value *v, char *const *dim_params) {
  Onnx__TypeProto *tp = POOL_NEW(pl, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
  Onnx__TypeProto__Tensor *tt =
      POOL_NEW(pl, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
  if (!tp || !tt)
    return NULL;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  tt->has_elem_type = v->dtype != NR_DTYPE_UNDEFINED;
  tt->elem_type = (int32_t)v->dtype;
  if (v->rank < 0)
    return tp;
  int rank = v->rank > NR_MAX_RANK ? NR_MAX_RANK : v->rank;
  Onnx__TensorShapeProto *sp =
      POOL_NEW(pl, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
  Onnx__TensorShapeProto__Dimension **dims =
      POOL_ARR(pl, Onnx__TensorShapeProto__Dimension *, rank);
  if (!sp || !dims)
    return NULL;
  for (int i = 0; i < rank; i++) {
    Onnx__TensorShapeProto__Dimension *d = POOL_NEW(
        pl, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
    if (!d)
      return NULL;
    if (v->dims[i] >= 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = v->dims[i];
      d->denotation = dim_params ? dim_params[i] : NULL;
    } else if (dim_params && dim_params[i]) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = dim_params[i];
    }
    dims[i] = d;
  }
  sp->n_dim = (size_t)rank;
  sp->dim = dims;
  tt->shape = sp;
  return tp;
}

static Onnx__ValueInfoProto *enc_value_info(pool *pl, const nr_tensor *t, bool meta,
                                            int weights_slot) {
  Onnx__ValueInfoProto *vi =
      POOL_NEW(pl, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
  Onnx__StringStringEntryProto **md = POOL_ARR(pl, Onnx__StringStringEntryProto *, 2);
  if (!vi || !md)
    return NULL;
  vi->name = t->name;
  vi->type = enc_type(pl, &t->value, t->dim_params);
  if (meta && t->flags)
    md[vi->n_metadata_props++] = enc_entry(pl, KEY_FLAGS, pool_int(pl, t->flags));
  if (meta && weights_slot >= 0)
    md[vi->n_metadata_props++] = enc_entry(pl, KEY_WEIGHTS, pool_int(pl, weights_slot));
  vi->metadata_props = md;
  return vi;
}

static Onnx__GraphProto *enc_graph(pool *pl, const nr_graph *g, const nr_plan *plan,
                                   nr_error *err, nr_status *st);

static Onnx__AttributeProto *enc_attr(pool *pl, const nr_attr *a, nr_error *err,
                                      nr_status *st) {
  Onnx__AttributeProto *ap =
      POOL_NEW(pl, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
  if (!ap)
    return NULL;
  ap->name = a->name;
  ap->has_type = 1;
  ap->type = (Onnx__AttributeProto__AttributeType)a->type;
  switch (a->type) {
  case NR_ATTR_FLOAT: ap->has_f = 1; ap->f = a->f; break;
  case NR_ATTR_INT: ap->has_i = 1; ap->i = a->i; break;
  case NR_ATTR_STRING:
    ap->has_s = 1;
    ap->s.len = a->s ? a->s_len : 0;
    ap->s.data = (uint8_t *)a->s;
    break;
  case NR_ATTR_TENSOR:
    if (!a->t.data && nr_value_nbytes(&a->t)) {
      *st = nr_errorf(err, NR_ERR_INTERNAL, "attribute '%s' has a tensor without data",
                      a->name);
      return NULL;
    }
    ap->t = enc_tensor(pl, &a->t, "");
    break;
  case NR_ATTR_GRAPH:
    if (!a->g) {
      *st = nr_errorf(err, NR_ERR_INTERNAL, "attribute '%s' has no graph", a->name);
      return NULL;
    }
    ap->g = enc_graph(pl, a->g, NULL, err, st);
    break;
  case NR_ATTR_FLOATS: ap->n_floats = a->n; ap->floats = a->floats; break;
  case NR_ATTR_INTS: ap->n_ints = a->n; ap->ints = a->ints; break;
  case NR_ATTR_STRINGS:
    ap->n_strings = a->n;
    ap->strings = POOL_ARR(pl, ProtobufCBinaryData, a->n);
    for (size_t i = 0; ap->strings && i < a->n; i++) {
      const char *s = a->strings[i] ? a->strings[i] : "";
      ap->strings[i].len = strlen(s);
      ap->strings[i].data = (uint8_t *)s;
    }
    break;
  default:
    *st = nr_errorf(err, NR_ERR_INTERNAL, "attribute '%s' has type %d, which engines "
                    "cannot store", a->name, (int)a->type);
    return NULL;
  }
  return ap;
}

static char *tensor_name(const nr_graph *g, int idx) {
  return idx >= 0 && idx < g->n_tensors ? g->tensors[idx].name : "";
}

static Onnx__NodeProto *enc_node(pool *pl, const nr_graph *g, const nr_node *n,
                                 nr_error *err, nr_status *st) {
  Onnx__NodeProto *np = POOL_NEW(pl, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
  char **in = POOL_ARR(pl, char *, n->n_inputs);
  char **out = POOL_ARR(pl, char *, n->n_outputs);
  Onnx__AttributeProto **attrs = POOL_ARR(pl, Onnx__AttributeProto *, n->n_attrs);
  if (!np || !in || !out || !attrs)
    return NULL;
  for (int i = 0; i < n->n_inputs; i++)
    in[i] = tensor_name(g, n->inputs[i]);
  for (int i = 0; i < n->n_outputs; i++)
    out[i] = tensor_name(g, n->outputs[i]);
  np->n_input = (size_t)n->n_inputs;
  np->input = in;
  np->n_output = (size_t)n->n_outputs;
  np->output = out;
  np->name = n->name;
  np->op_type = n->op_type;
  np->domain = n->domain;
  for (int i = 0; i < n->n_attrs && !*st; i++)
    attrs[i] = enc_attr(pl, &n->attrs[i], err, st);
  np->n_attribute = (size_t)n->n_attrs;
  np->attribute = attrs;
  if (n->opset != nr_graph_opset(g, n->domain)) {
    Onnx__StringStringEntryProto **md = POOL_ARR(pl, Onnx__StringStringEntryProto *, 1);
    if (md) {
      md[0] = enc_entry(pl, KEY_OPSET, pool_int(pl, n->opset));
      np->n_metadata_props = 1;
      np->metadata_props = md;
    }
  }
  return np;
}

/* The CONST slot holding constant tensor ti's exact bytes, or the ABSORBED slot made
 * from it (its bytes live only in packed form), or -1. Slots usually follow tensor
 * order, so slot ti is tried first. */
static int weights_slot(const nr_plan *plan, const nr_tensor *t, int ti) {
  const nr_value *v = &t->value;
  size_t nbytes = nr_value_nbytes(v);
  for (int k = -1; k < plan->n_slots; k++) {
    int si = k < 0 ? ti : k;
    if (si < 0 || si >= plan->n_slots || (k >= 0 && k == ti))
      continue;
    const nr_slot *s = &plan->slots[si];
    if ((s->kind != NR_SLOT_CONST && s->kind != NR_SLOT_ABSORBED) || !s->name ||
        strcmp(s->name, t->name) || s->layout != NR_LAYOUT_PLAIN || s->dtype != v->dtype ||
        s->rank != v->rank || memcmp(s->dims, v->dims, sizeof(int64_t) * (size_t)v->rank) ||
        s->nbytes != nbytes)
      continue;
    if (s->kind == NR_SLOT_ABSORBED) {
      if (s->data == v->data)
        return si;
      continue;
    }
    if ((!v->data && nbytes) || s->offset > plan->weights_size ||
        nbytes > plan->weights_size - s->offset)
      continue;
    if (!nbytes || !memcmp(plan->weights + s->offset, v->data, nbytes))
      return si;
  }
  return -1;
}

static Onnx__ValueInfoProto **enc_io(pool *pl, const nr_graph *g, const int *idx, int n) {
  Onnx__ValueInfoProto **vis = POOL_ARR(pl, Onnx__ValueInfoProto *, n);
  for (int i = 0; vis && i < n; i++)
    vis[i] = enc_value_info(pl, &g->tensors[idx[i]], false, -1);
  return vis;
}

static Onnx__GraphProto *enc_graph(pool *pl, const nr_graph *g, const nr_plan *plan,
                                   nr_error *err, nr_status *st) {
  Onnx__GraphProto *gp = POOL_NEW(pl, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
  Onnx__NodeProto **nodes = POOL_ARR(pl, Onnx__NodeProto *, g->n_nodes);
  Onnx__ValueInfoProto **vis = POOL_ARR(pl, Onnx__ValueInfoProto *, g->n_tensors);
  Onnx__TensorProto **inits = POOL_ARR(pl, Onnx__TensorProto *, g->n_tensors);
  if (!gp || !nodes || !vis || !inits)
    return NULL;
  gp->name = g->name;
  for (int i = 0; i < g->n_nodes && !*st; i++)
    nodes[i] = enc_node(pl, g, &g->nodes[i], err, st);
  gp->n_node = (size_t)g->n_nodes;
  gp->node = nodes;
  for (int i = 0; i < g->n_tensors; i++) {
    const nr_tensor *t = &g->tensors[i];
    int slot = -1;
    if (t->flags & NR_TENSOR_CONST) {
      if (plan)
        slot = weights_slot(plan, t, i);
      if (slot < 0 && t->value.data)
        inits[gp->n_initializer++] = enc_tensor(pl, &t->value, t->name);
    }
    vis[i] = enc_value_info(pl, t, true, slot);
  }
  gp->n_value_info = (size_t)g->n_tensors;
  gp->value_info = vis;
  gp->initializer = inits;
  gp->n_input = (size_t)g->n_inputs;
  gp->input = enc_io(pl, g, g->inputs, g->n_inputs);
  gp->n_output = (size_t)g->n_outputs;
  gp->output = enc_io(pl, g, g->outputs, g->n_outputs);
  return gp;
}

nr_status nr_engine_graph_encode(const nr_plan *plan, uint8_t **out, size_t *len,
                                 nr_error *err) {
  const nr_graph *g = plan->graph;
  if (!g)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "the plan has no graph");
  pool pl = {0};
  nr_status st = NR_OK;
  Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
  m.has_ir_version = 1;
  m.ir_version = g->ir_version;
  m.producer_name = "nnroute";
  m.producer_version = (char *)NR_VERSION_STRING; /* protobuf-c's field is not const */
  m.opset_import = POOL_ARR(&pl, Onnx__OperatorSetIdProto *, g->n_opsets);
  for (int i = 0; m.opset_import && i < g->n_opsets; i++) {
    Onnx__OperatorSetIdProto *op = POOL_NEW(&pl, Onnx__OperatorSetIdProto,
                                            ONNX__OPERATOR_SET_ID_PROTO__INIT);
    if (!op)
      break;
    op->domain = g->opsets[i].domain;
    op->has_version = 1;
    op->version = g->opsets[i].version;
    m.opset_import[m.n_opset_import++] = op;
  }
  m.graph = enc_graph(&pl, g, plan, err, &st);
  if (!st && pl.oom)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory serializing the graph");
  if (!st) {
    *len = protobuf_c_message_get_packed_size(&m.base);
    if (!(*out = malloc(*len ? *len : 1)))
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory serializing the graph");
    else
      protobuf_c_message_pack(&m.base, *out);
  }
  pool_free(&pl);
  return st;
}

/* ---- decoding --------------------------------------------------------------------- */

static nr_status bad(nr_error *err, const char *fmt, ...) NR_PRINTF(2, 3);
static nr_status bad(nr_error *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nr_status st = nr_verrorf(err, NR_ERR_INVALID_MODEL, fmt, ap);
  va_end(ap);
  return st;
}

static nr_status nomem(nr_error *err) {
  return nr_errorf(err, NR_ERR_NOMEM, "out of memory rebuilding the graph");
}

static bool parse_int(const char *s, long long lo, long long hi, long long *out) {
  if (!s || !*s)
    return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

static const char *meta_get(Onnx__StringStringEntryProto **md, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (md[i]->key && !strcmp(md[i]->key, key))
      return md[i]->value ? md[i]->value : "";
  return NULL;
}

static nr_status dec_type(const Onnx__ValueInfoProto *vi, nr_tensor *t, nr_error *err) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp)
    return NR_OK;
  if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return bad(err, "tensor '%.200s' is not a dense tensor", t->name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  if (tt->has_elem_type && tt->elem_type) {
    nr_status st = nr_onnx_dtype(tt->elem_type, "tensor", &t->value.dtype, err);
    if (st)
      return bad(err, "tensor '%.200s' has element type %d, which nnroute cannot hold",
                 t->name, (int)tt->elem_type);
  }
  if (!tt->shape)
    return NR_OK;
  if (tt->shape->n_dim > NR_MAX_RANK)
    return bad(err, "tensor '%.200s' has rank %zu (at most %d)", t->name,
               tt->shape->n_dim, NR_MAX_RANK);
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    const char *param = NULL;
    t->value.dims[i] = NR_DIM_UNKNOWN;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return bad(err, "tensor '%.200s' has negative dim %lld", t->name,
                   (long long)d->dim_value);
      t->value.dims[i] = d->dim_value;
      param = d->denotation;
    } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) {
      param = d->dim_param;
    }
    if (param && *param && !(t->dim_params[i] = strdup(param)))
      return nomem(err);
  }
  t->value.rank = (int)tt->shape->n_dim;
  return NR_OK;
}

static nr_status dec_tensors(const Onnx__GraphProto *gp, nr_graph *g, int *bind,
                             nr_error *err) {
  for (size_t i = 0; i < gp->n_value_info; i++) {
    const Onnx__ValueInfoProto *vi = gp->value_info[i];
    if (!vi->name || !*vi->name)
      return bad(err, "value_info #%zu has no name", i);
    if (nr_graph_find_tensor(g, vi->name) >= 0)
      return bad(err, "tensor '%.200s' is listed twice", vi->name);
    long long flags = 0, slot = -1;
    const char *f = meta_get(vi->metadata_props, vi->n_metadata_props, KEY_FLAGS);
    const char *w = meta_get(vi->metadata_props, vi->n_metadata_props, KEY_WEIGHTS);
    if (f && !parse_int(f, 0, KNOWN_FLAGS, &flags))
      return bad(err, "tensor '%.200s' has invalid flags '%.40s'", vi->name, f);
    if (w && (!bind || !(flags & NR_TENSOR_CONST) || !parse_int(w, 0, INT_MAX, &slot)))
      return bad(err, "tensor '%.200s' has an invalid weights reference", vi->name);
    int idx = nr_graph_add_tensor(g, vi->name, (unsigned)flags);
    if (idx < 0)
      return nomem(err);
    if (bind)
      bind[idx] = (int)slot;
    nr_status st = dec_type(vi, &g->tensors[idx], err);
    if (st)
      return st;
  }
  return NR_OK;
}

static bool same_shape(const nr_value *a, const nr_value *b) {
  return a->dtype == b->dtype && a->rank == b->rank &&
         !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)(a->rank > 0 ? a->rank : 0));
}

static nr_status dec_initializers(const Onnx__GraphProto *gp, nr_graph *g,
                                  const int *bind, size_t limit, nr_error *err) {
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    int idx = tp->name ? nr_graph_find_tensor(g, tp->name) : -1;
    if (idx < 0)
      return bad(err, "initializer #%zu is not listed in value_info", i);
    nr_tensor *t = &g->tensors[idx];
    if (!(t->flags & NR_TENSOR_CONST) || t->value.data || (bind && bind[idx] >= 0))
      return bad(err, "initializer '%.200s' is not a constant without data", t->name);
    nr_value v = {0};
    nr_status st = nr_onnx_tensor_to_value(tp, NULL, limit, &v, err);
    if (st)
      return st == NR_ERR_NOMEM ? st : bad(err, "initializer '%.200s' is invalid", t->name);
    if (!same_shape(&v, &t->value)) {
      nr_value_free(&v);
      return bad(err, "initializer '%.200s' disagrees with its value_info", t->name);
    }
    t->value.data = v.data;
    t->value.owned = true;
  }
  return NR_OK;
}

static nr_status dec_io(Onnx__ValueInfoProto **vis, size_t n, nr_graph *g, unsigned flag,
                        int **out, int *count, nr_error *err) {
  if (!(*out = malloc((n ? n : 1) * sizeof **out)))
    return nomem(err);
  for (size_t i = 0; i < n; i++) {
    int idx = vis[i]->name ? nr_graph_find_tensor(g, vis[i]->name) : -1;
    if (idx < 0 || !(g->tensors[idx].flags & flag))
      return bad(err, "graph %s #%zu ('%.200s') is not a tensor flagged as one",
                 flag == NR_TENSOR_INPUT ? "input" : "output", i,
                 vis[i]->name ? vis[i]->name : "");
    (*out)[(*count)++] = idx;
  }
  return NR_OK;
}

static nr_status dec_graph(const Onnx__GraphProto *gp, nr_graph *g, int *bind,
                           size_t limit, nr_error *err);

static nr_status dec_attr(const Onnx__AttributeProto *ap, nr_graph *g, nr_attr *a,
                          size_t limit, nr_error *err) {
  if (!ap->name || !*ap->name || !ap->has_type)
    return bad(err, "an attribute has no name or no type");
  if (!(a->name = strdup(ap->name)))
    return nomem(err);
  a->type = (nr_attr_type)ap->type;
  switch (ap->type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->f = ap->f; return NR_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->i = ap->i; return NR_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    if (!(a->s = malloc(ap->s.len + 1)))
      return nomem(err);
    if (ap->s.len)
      memcpy(a->s, ap->s.data, ap->s.len);
    a->s[ap->s.len] = '\0';
    a->s_len = ap->s.len;
    return NR_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    if (!ap->t)
      return bad(err, "attribute '%.200s' has no tensor", ap->name);
    return nr_onnx_tensor_to_value(ap->t, NULL, limit, &a->t, err);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    if (!ap->g)
      return bad(err, "attribute '%.200s' has no graph", ap->name);
    if (!(a->g = nr_graph_create(g)))
      return nomem(err);
    return dec_graph(ap->g, a->g, NULL, limit, err);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    if (!(a->floats = malloc(ap->n_floats ? ap->n_floats * sizeof(float) : 1)))
      return nomem(err);
    if (ap->n_floats)
      memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
    a->n = ap->n_floats;
    return NR_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    if (!(a->ints = malloc(ap->n_ints ? ap->n_ints * sizeof(int64_t) : 1)))
      return nomem(err);
    if (ap->n_ints)
      memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
    a->n = ap->n_ints;
    return NR_OK;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    if (!(a->strings = calloc(ap->n_strings ? ap->n_strings : 1, sizeof(char *))))
      return nomem(err);
    a->n = ap->n_strings;
    for (size_t i = 0; i < ap->n_strings; i++) {
      if (!(a->strings[i] = malloc(ap->strings[i].len + 1)))
        return nomem(err);
      if (ap->strings[i].len)
        memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
      a->strings[i][ap->strings[i].len] = '\0';
    }
    return NR_OK;
  default:
    return bad(err, "attribute '%.200s' has type %d, which engines do not hold", ap->name,
               (int)ap->type);
  }
}

static nr_status dec_edges(char **names, size_t n, const nr_graph *g, int **out,
                           int *count, nr_error *err) {
  if (!(*out = malloc((n ? n : 1) * sizeof **out)))
    return nomem(err);
  *count = (int)n;
  for (size_t i = 0; i < n; i++) {
    (*out)[i] = -1;
    if (names[i] && *names[i] && ((*out)[i] = nr_graph_find_tensor(g, names[i])) < 0)
      return bad(err, "edge '%.200s' is not a tensor of this graph", names[i]);
  }
  return NR_OK;
}

static nr_status dec_node(const Onnx__NodeProto *np, nr_graph *g, size_t limit,
                          nr_error *err) {
  int index = g->n_nodes;
  nr_node *n = nr_graph_add_node(g);
  if (!n)
    return nomem(err);
  const char *domain = np->domain && strcmp(np->domain, "ai.onnx") ? np->domain : "";
  n->name = strdup(np->name ? np->name : "");
  n->op_type = strdup(np->op_type ? np->op_type : "");
  n->domain = strdup(domain);
  if (!n->name || !n->op_type || !n->domain)
    return nomem(err);
  if (!*n->op_type)
    return bad(err, "node #%d has no op_type", index);
  long long opset = nr_graph_opset(g, domain);
  const char *o = meta_get(np->metadata_props, np->n_metadata_props, KEY_OPSET);
  if (o && !parse_int(o, 0, INT_MAX, &opset))
    return bad(err, "node #%d has an invalid opset '%.40s'", index, o);
  n->opset = (int)opset;
  nr_status st = dec_edges(np->input, np->n_input, g, &n->inputs, &n->n_inputs, err);
  if (!st)
    st = dec_edges(np->output, np->n_output, g, &n->outputs, &n->n_outputs, err);
  for (int i = 0; !st && i < n->n_outputs; i++) {
    nr_tensor *t = n->outputs[i] >= 0 ? &g->tensors[n->outputs[i]] : NULL;
    if (t && (t->producer >= 0 || (t->flags & (NR_TENSOR_INPUT | NR_TENSOR_CONST |
                                                NR_TENSOR_OUTER))))
      st = bad(err, "tensor '%.200s' cannot be written by node #%d", t->name, index);
    else if (t)
      t->producer = index;
  }
  if (!st && !(n->attrs = calloc(np->n_attribute ? np->n_attribute : 1, sizeof *n->attrs)))
    st = nomem(err);
  if (!st)
    n->n_attrs = (int)np->n_attribute;
  for (size_t i = 0; !st && i < np->n_attribute; i++)
    st = dec_attr(np->attribute[i], g, &n->attrs[i], limit, err);
  if (st && st != NR_ERR_NOMEM)
    nr_error_prefix(err, "node #%d ('%.200s'): ", index, n->name ? n->name : "");
  return st;
}

static nr_status dec_graph(const Onnx__GraphProto *gp, nr_graph *g, int *bind,
                           size_t limit, nr_error *err) {
  if (gp->n_value_info > INT_MAX / 2 || gp->n_node > INT_MAX / 2)
    return bad(err, "graph is too large");
  free(g->name);
  if (!(g->name = strdup(gp->name ? gp->name : "")))
    return nomem(err);
  nr_status st = dec_tensors(gp, g, bind, err);
  if (!st)
    st = dec_initializers(gp, g, bind, limit, err);
  if (!st)
    st = dec_io(gp->input, gp->n_input, g, NR_TENSOR_INPUT, &g->inputs, &g->n_inputs, err);
  if (!st)
    st = dec_io(gp->output, gp->n_output, g, NR_TENSOR_OUTPUT, &g->outputs, &g->n_outputs,
                err);
  for (size_t i = 0; !st && i < gp->n_node; i++)
    st = dec_node(gp->node[i], g, limit, err);
  return st;
}

static nr_status dec_opsets(const Onnx__ModelProto *m, nr_graph *g, nr_error *err) {
  if (!(g->opsets = calloc(m->n_opset_import ? m->n_opset_import : 1, sizeof *g->opsets)))
    return nomem(err);
  g->owns_opsets = true;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *op = m->opset_import[i];
    if (!op->has_version || op->version < 1 || op->version > INT_MAX)
      return bad(err, "opset import #%zu has an invalid version", i);
    if (!(g->opsets[i].domain = strdup(op->domain ? op->domain : "")))
      return nomem(err);
    g->opsets[i].version = (int)op->version;
    g->n_opsets = (int)i + 1;
  }
  return NR_OK;
}

nr_status nr_engine_graph_decode(const uint8_t *data, size_t len, nr_graph **out,
                                 int **bind, nr_error *err) {
  *out = NULL;
  *bind = NULL;
  ProtobufCMessage *msg = NULL;
  nr_status st = nr_onnx_unpack(&onnx__model_proto__descriptor, data, len,
                                "ONNX ModelProto", &msg, err);
  if (st)
    return st;
  const Onnx__ModelProto *m = (const Onnx__ModelProto *)msg;
  nr_graph *g = nr_graph_create(NULL);
  int *b = NULL;
  if (!g)
    st = nomem(err);
  else if (!m->graph)
    st = bad(err, "the ModelProto has no graph");
  else if (!(b = malloc((m->graph->n_value_info ? m->graph->n_value_info : 1) * sizeof *b)))
    st = nomem(err);
  if (!st) {
    g->ir_version = m->ir_version;
    st = dec_opsets(m, g, err);
  }
  if (!st)
    st = dec_graph(m->graph, g, b, len, err);
  if (!st)
    st = nr_graph_bind_ops(g, err);
  nr_onnx_free(msg);
  if (st) {
    nr_graph_destroy(g);
    free(b);
    return st;
  }
  *out = g;
  *bind = b;
  return NR_OK;
}
