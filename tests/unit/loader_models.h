/* loader_models.h - building small ONNX models in C for the loader tests.
 *
 * The builders fill protobuf-c structs whose memory comes from a test arena (freed in
 * one call), so a test reads like the model it describes. Lists have a fixed capacity
 * (LM_CAP) to keep the builders trivial. test_loader.c exports a handful of finished
 * models through lm_sample_model() for the fuzz test to mutate. */
#ifndef NR_TESTS_LOADER_MODELS_H
#define NR_TESTS_LOADER_MODELS_H

#include "onnx/onnx.pb-c.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LM_CAP 16

typedef struct lm_arena {
  void *ptrs[4096];
  int n;
} lm_arena;

static inline void *lm_alloc(lm_arena *a, size_t size) {
  void *p = calloc(1, size ? size : 1);
  if (p && a->n < 4096)
    a->ptrs[a->n++] = p;
  return p;
}

static inline void lm_free(lm_arena *a) {
  for (int i = 0; i < a->n; i++)
    free(a->ptrs[i]);
  a->n = 0;
}

static inline char *lm_str(lm_arena *a, const char *s) {
  char *d = lm_alloc(a, strlen(s) + 1);
  strcpy(d, s);
  return d;
}

/* A tensor value-info; dims < 0 become the symbolic dim "N". elem 0: no type. */
static inline Onnx__ValueInfoProto *lm_value_info(lm_arena *a, const char *name, int elem,
                                                  int rank, const int64_t *dims) {
  Onnx__ValueInfoProto *vi = lm_alloc(a, sizeof *vi);
  onnx__value_info_proto__init(vi);
  vi->name = lm_str(a, name);
  if (!elem)
    return vi;
  Onnx__TypeProto *tp = lm_alloc(a, sizeof *tp);
  onnx__type_proto__init(tp);
  Onnx__TypeProto__Tensor *tt = lm_alloc(a, sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  tt->has_elem_type = 1;
  tt->elem_type = elem;
  Onnx__TensorShapeProto *sp = lm_alloc(a, sizeof *sp);
  onnx__tensor_shape_proto__init(sp);
  sp->n_dim = (size_t)rank;
  sp->dim = lm_alloc(a, sizeof *sp->dim * (size_t)(rank + 1));
  for (int i = 0; i < rank; i++) {
    Onnx__TensorShapeProto__Dimension *d = lm_alloc(a, sizeof *d);
    onnx__tensor_shape_proto__dimension__init(d);
    if (dims[i] >= 0) {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      d->dim_value = dims[i];
    } else {
      d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      d->dim_param = lm_str(a, "N");
    }
    sp->dim[i] = d;
  }
  tt->shape = sp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  tp->tensor_type = tt;
  vi->type = tp;
  return vi;
}

/* A tensor with raw_data (nbytes copied from data). */
static inline Onnx__TensorProto *lm_tensor(lm_arena *a, const char *name, int elem, int rank,
                                           const int64_t *dims, const void *data,
                                           size_t nbytes) {
  Onnx__TensorProto *t = lm_alloc(a, sizeof *t);
  onnx__tensor_proto__init(t);
  t->name = lm_str(a, name);
  t->has_data_type = 1;
  t->data_type = elem;
  t->n_dims = (size_t)rank;
  t->dims = lm_alloc(a, sizeof(int64_t) * (size_t)(rank + 1));
  if (rank)
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  t->has_raw_data = 1;
  t->raw_data.len = nbytes;
  t->raw_data.data = lm_alloc(a, nbytes);
  if (nbytes)
    memcpy(t->raw_data.data, data, nbytes);
  return t;
}

static inline Onnx__NodeProto *lm_node(lm_arena *a, const char *op, const char *name,
                                       const char *in0, const char *in1, const char *out0) {
  Onnx__NodeProto *n = lm_alloc(a, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = lm_str(a, op);
  n->name = lm_str(a, name);
  n->input = lm_alloc(a, sizeof(char *) * LM_CAP);
  n->output = lm_alloc(a, sizeof(char *) * LM_CAP);
  n->attribute = lm_alloc(a, sizeof(void *) * LM_CAP);
  if (in0)
    n->input[n->n_input++] = lm_str(a, in0);
  if (in1)
    n->input[n->n_input++] = lm_str(a, in1);
  if (out0)
    n->output[n->n_output++] = lm_str(a, out0);
  return n;
}

static inline Onnx__AttributeProto *lm_attr(lm_arena *a, Onnx__NodeProto *n, const char *name,
                                            Onnx__AttributeProto__AttributeType type) {
  Onnx__AttributeProto *at = lm_alloc(a, sizeof *at);
  onnx__attribute_proto__init(at);
  at->name = lm_str(a, name);
  at->has_type = 1;
  at->type = type;
  n->attribute[n->n_attribute++] = at;
  return at;
}

static inline Onnx__GraphProto *lm_graph(lm_arena *a, const char *name) {
  Onnx__GraphProto *g = lm_alloc(a, sizeof *g);
  onnx__graph_proto__init(g);
  g->name = lm_str(a, name);
  g->node = lm_alloc(a, sizeof(void *) * LM_CAP);
  g->input = lm_alloc(a, sizeof(void *) * LM_CAP);
  g->output = lm_alloc(a, sizeof(void *) * LM_CAP);
  g->initializer = lm_alloc(a, sizeof(void *) * LM_CAP);
  return g;
}

#define LM_PUSH(list, count, item) ((list)[(count)++] = (item))
#define lm_add_node(g, n) LM_PUSH((g)->node, (g)->n_node, n)
#define lm_add_input(g, v) LM_PUSH((g)->input, (g)->n_input, v)
#define lm_add_output(g, v) LM_PUSH((g)->output, (g)->n_output, v)
#define lm_add_init(g, t) LM_PUSH((g)->initializer, (g)->n_initializer, t)

static inline Onnx__ModelProto *lm_model(lm_arena *a, int64_t ir, int64_t opset,
                                         Onnx__GraphProto *g) {
  Onnx__ModelProto *m = lm_alloc(a, sizeof *m);
  onnx__model_proto__init(m);
  m->has_ir_version = 1;
  m->ir_version = ir;
  m->opset_import = lm_alloc(a, sizeof(void *) * LM_CAP);
  Onnx__OperatorSetIdProto *op = lm_alloc(a, sizeof *op);
  onnx__operator_set_id_proto__init(op);
  op->domain = lm_str(a, "");
  op->has_version = 1;
  op->version = opset;
  m->opset_import[m->n_opset_import++] = op;
  m->graph = g;
  return m;
}

/* Packs m; the bytes belong to the arena. */
static inline uint8_t *lm_pack(lm_arena *a, const Onnx__ModelProto *m, size_t *len) {
  *len = onnx__model_proto__get_packed_size(m);
  uint8_t *buf = lm_alloc(a, *len);
  onnx__model_proto__pack(m, buf);
  return buf;
}

/* Sample model i (0 <= i < LM_N_SAMPLES) packed into arena memory; defined in
 * test_loader.c. */
#define LM_N_SAMPLES 4
uint8_t *lm_sample_model(lm_arena *a, int i, size_t *len);

#endif
