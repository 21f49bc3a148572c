/* test_loader.c - the ONNX loader on models built in C: a good model read back in
 * full, the storage variants of initializers, attributes and subgraphs, external
 * data (including escape attempts), and each malformed case, which must fail with the
 * right status and a message naming the culprit. */
#include "loader_models.h"
#include "onnx/onnx_load.h"
#include "unit.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const int64_t dims_n3[2] = {-1, 3};
static const int64_t dims_3[1] = {3};
static const float w_vals[3] = {1.5f, -2.0f, 4.25f};

/* X[N,3] + W -> Y; Y * W -> Z, with the nodes listed out of order. */
static Onnx__ModelProto *basic_model(lm_arena *a) {
  Onnx__GraphProto *g = lm_graph(a, "basic");
  lm_add_input(g, lm_value_info(a, "X", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims_n3));
  lm_add_init(g, lm_tensor(a, "W", 1, 1, dims_3, w_vals, sizeof w_vals));
  lm_add_node(g, lm_node(a, "Mul", "mul", "Y", "W", "Z"));
  lm_add_node(g, lm_node(a, "Add", "add", "X", "W", "Y"));
  lm_add_output(g, lm_value_info(a, "Z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims_n3));
  return lm_model(a, 8, 13, g);
}

static nr_status load_model(lm_arena *a, const Onnx__ModelProto *m, const char *base,
                            size_t max_bytes, nr_graph **g, nr_error *err) {
  size_t len;
  uint8_t *bytes = lm_pack(a, m, &len);
  nr_error_clear(err);
  return nr_onnx_load(bytes, len, base, max_bytes, g, err);
}

/* Loads m expecting failure with status and a message containing needle. */
#define EXPECT_FAIL(m, base, max, status, needle)                                      \
  do {                                                                                 \
    nr_graph *g_ = NULL;                                                               \
    nr_error e_;                                                                       \
    nr_status st_ = load_model(&a, (m), (base), (max), &g_, &e_);                      \
    CHECK(st_ == (status), "status %s, want %s: %s", nr_status_str(st_),               \
          nr_status_str(status), e_.message);                                          \
    CHECK(g_ == NULL);                                                                 \
    CHECK(strstr(e_.message, (needle)) != NULL, "message '%s' lacks '%s'", e_.message, \
          (needle));                                                                   \
    nr_graph_destroy(g_);                                                              \
  } while (0)

NR_TEST(loader_basic_model) {
  lm_arena a = {0};
  nr_graph *g = NULL;
  nr_error err;
  nr_status st = load_model(&a, basic_model(&a), NULL, 0, &g, &err);
  lm_free(&a);
  REQUIRE(st == NR_OK, "%s", err.message);
  CHECK(g->ir_version == 8);
  CHECK(nr_graph_opset(g, "") == 13);
  REQUIRE(g->n_inputs == 1 && g->n_outputs == 1 && g->n_nodes == 2);
  const nr_tensor *x = &g->tensors[g->inputs[0]];
  CHECK(!strcmp(x->name, "X") && (x->flags & NR_TENSOR_INPUT));
  CHECK(x->value.dtype == NR_DTYPE_FLOAT && x->value.rank == 2);
  CHECK(x->value.dims[0] == NR_DIM_UNKNOWN && x->value.dims[1] == 3);
  CHECK(x->dim_params[0] && !strcmp(x->dim_params[0], "N"));
  int w = nr_graph_find_tensor(g, "W");
  REQUIRE(w >= 0);
  CHECK(g->tensors[w].flags & NR_TENSOR_CONST);
  CHECK(g->tensors[w].value.rank == 1 && g->tensors[w].value.dims[0] == 3);
  CHECK(!memcmp(g->tensors[w].value.data, w_vals, sizeof w_vals));
  const nr_node *mul = &g->nodes[0];
  CHECK(!strcmp(mul->op_type, "Mul") && !strcmp(mul->name, "mul") && mul->opset == 13);
  CHECK(!strcmp(mul->domain, ""));
  CHECK(mul->n_inputs == 2 && mul->inputs[0] == nr_graph_find_tensor(g, "Y"));
  CHECK(g->tensors[mul->inputs[0]].producer == 1);
  const nr_tensor *z = &g->tensors[g->outputs[0]];
  CHECK((z->flags & NR_TENSOR_OUTPUT) && z->value.rank == 2 && z->producer == 0);
  nr_graph_destroy(g);
}

NR_TEST(loader_initializer_as_input) {
  lm_arena a = {0};
  Onnx__ModelProto *m = basic_model(&a);
  m->ir_version = 3;
  lm_add_input(m->graph, lm_value_info(&a, "W", 1, 1, dims_3));
  nr_graph *g = NULL;
  nr_error err;
  nr_status st = load_model(&a, m, NULL, 0, &g, &err);
  lm_free(&a);
  REQUIRE(st == NR_OK, "%s", err.message);
  CHECK(g->n_inputs == 1);
  int w = nr_graph_find_tensor(g, "W");
  CHECK(w >= 0 && (g->tensors[w].flags & NR_TENSOR_CONST) &&
        !(g->tensors[w].flags & NR_TENSOR_INPUT));
  nr_graph_destroy(g);
}

/* ---- initializer storage fields ----------------------------------------------------- */

static Onnx__ModelProto *single_init_model(lm_arena *a, Onnx__TensorProto *t) {
  Onnx__GraphProto *g = lm_graph(a, "init");
  lm_add_init(g, t);
  lm_add_node(g, lm_node(a, "Identity", "id", t->name, NULL, "out"));
  lm_add_output(g, lm_value_info(a, "out", 0, 0, NULL));
  return lm_model(a, 8, 13, g);
}

static Onnx__TensorProto *typed_tensor(lm_arena *a, const char *name, int elem, int64_t n) {
  static int64_t dims[1];
  dims[0] = n;
  Onnx__TensorProto *t = lm_tensor(a, name, elem, 1, dims, NULL, 0);
  t->has_raw_data = 0;
  return t;
}

static const void *load_init(nr_test_state *t, lm_arena *a, Onnx__TensorProto *tp,
                             nr_graph **g) {
  nr_error err;
  nr_status st = load_model(a, single_init_model(a, tp), NULL, 0, g, &err);
  CHECK(st == NR_OK, "%s", err.message);
  if (st)
    return NULL;
  int i = nr_graph_find_tensor(*g, tp->name);
  return i >= 0 ? (*g)->tensors[i].value.data : NULL;
}

NR_TEST(loader_typed_fields) {
  lm_arena a = {0};
  nr_graph *g = NULL;
  float f[2] = {1, 2};
  Onnx__TensorProto *tf = typed_tensor(&a, "f", 1, 2);
  tf->n_float_data = 2, tf->float_data = f;
  const float *pf = load_init(t, &a, tf, &g);
  CHECK(pf && pf[0] == 1 && pf[1] == 2);
  nr_graph_destroy(g);

  int32_t i32[3] = {-3, 200, 0x3c00};
  Onnx__TensorProto *ti8 = typed_tensor(&a, "i8", NR_DTYPE_INT8, 2);
  ti8->n_int32_data = 2, ti8->int32_data = i32;
  const int8_t *p8 = load_init(t, &a, ti8, &g);
  CHECK(p8 && p8[0] == -3 && (uint8_t)p8[1] == 200);
  nr_graph_destroy(g);

  Onnx__TensorProto *th = typed_tensor(&a, "h", NR_DTYPE_FLOAT16, 1);
  th->n_int32_data = 1, th->int32_data = &i32[2];
  const uint16_t *ph = load_init(t, &a, th, &g);
  CHECK(ph && ph[0] == 0x3c00);
  nr_graph_destroy(g);

  Onnx__TensorProto *tb = typed_tensor(&a, "b", NR_DTYPE_BOOL, 3);
  tb->n_int32_data = 3, tb->int32_data = i32;
  const uint8_t *pb = load_init(t, &a, tb, &g);
  CHECK(pb && pb[0] == 1 && pb[1] == 1 && pb[2] == 1);
  nr_graph_destroy(g);

  int64_t i64[2] = {-5, INT64_MAX};
  Onnx__TensorProto *tl = typed_tensor(&a, "l", NR_DTYPE_INT64, 2);
  tl->n_int64_data = 2, tl->int64_data = i64;
  const int64_t *pl = load_init(t, &a, tl, &g);
  CHECK(pl && pl[0] == -5 && pl[1] == INT64_MAX);
  nr_graph_destroy(g);

  double d[1] = {0.125};
  Onnx__TensorProto *td = typed_tensor(&a, "d", NR_DTYPE_DOUBLE, 1);
  td->n_double_data = 1, td->double_data = d;
  const double *pd = load_init(t, &a, td, &g);
  CHECK(pd && pd[0] == 0.125);
  nr_graph_destroy(g);

  uint64_t u64[2] = {7, 0xfffffffful};
  Onnx__TensorProto *tu = typed_tensor(&a, "u", NR_DTYPE_UINT32, 2);
  tu->n_uint64_data = 2, tu->uint64_data = u64;
  const uint32_t *pu = load_init(t, &a, tu, &g);
  CHECK(pu && pu[0] == 7 && pu[1] == 0xffffffffu);
  nr_graph_destroy(g);

  Onnx__TensorProto *ts = typed_tensor(&a, "scalar", 1, 0);
  ts->n_dims = 0, ts->n_float_data = 1, ts->float_data = f;
  const float *psc = load_init(t, &a, ts, &g);
  CHECK(psc && psc[0] == 1);
  CHECK(g && g->tensors[nr_graph_find_tensor(g, "scalar")].value.rank == 0);
  nr_graph_destroy(g);

  Onnx__TensorProto *tm = typed_tensor(&a, "short_w", 1, 3);
  tm->n_float_data = 2, tm->float_data = f;
  EXPECT_FAIL(single_init_model(&a, tm), NULL, 0, NR_ERR_INVALID_MODEL, "short_w");
  lm_free(&a);
}

/* ---- attributes and subgraphs ------------------------------------------------------- */

NR_TEST(loader_attributes) {
  lm_arena a = {0};
  Onnx__ModelProto *m = basic_model(&a);
  Onnx__NodeProto *n = m->graph->node[0];
  Onnx__AttributeProto *f = lm_attr(&a, n, "f", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  f->has_f = 1, f->f = 0.5f;
  Onnx__AttributeProto *i = lm_attr(&a, n, "i", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  i->has_i = 1, i->i = -7;
  Onnx__AttributeProto *s = lm_attr(&a, n, "s", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  s->has_s = 1, s->s.data = (uint8_t *)lm_str(&a, "hello"), s->s.len = 5;
  int64_t ints[3] = {1, 2, 3};
  Onnx__AttributeProto *is = lm_attr(&a, n, "is", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  is->n_ints = 3, is->ints = ints;
  ProtobufCBinaryData strs[2] = {{1, (uint8_t *)"a"}, {2, (uint8_t *)"bc"}};
  Onnx__AttributeProto *ss =
      lm_attr(&a, n, "ss", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
  ss->n_strings = 2, ss->strings = strs;
  Onnx__AttributeProto *tv = lm_attr(&a, n, "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  tv->t = lm_tensor(&a, "", 1, 1, dims_3, w_vals, sizeof w_vals);
  nr_graph *g = NULL;
  nr_error err;
  nr_status st = load_model(&a, m, NULL, 0, &g, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  const nr_node *node = &g->nodes[0];
  CHECK(node->n_attrs == 6);
  CHECK(nr_attr_float(node, "f", 0) == 0.5f && nr_attr_int(node, "i", 0) == -7);
  CHECK(!strcmp(nr_attr_string(node, "s", ""), "hello"));
  size_t count = 0;
  const int64_t *got = nr_attr_ints(node, "is", &count);
  CHECK(count == 3 && got && got[2] == 3);
  const nr_attr *sa = nr_node_attr(node, "ss");
  CHECK(sa && sa->n == 2 && !strcmp(sa->strings[1], "bc"));
  const nr_attr *ta = nr_node_attr(node, "t");
  CHECK(ta && ta->type == NR_ATTR_TENSOR && ta->t.rank == 1 &&
        !memcmp(ta->t.data, w_vals, sizeof w_vals));
  nr_graph_destroy(g);

  Onnx__AttributeProto *r = lm_attr(&a, n, "ref", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  r->ref_attr_name = lm_str(&a, "alpha");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "ref");
  n->n_attribute--;
  lm_attr(&a, n, "sp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "SPARSE_TENSOR");
  n->n_attribute--;
  lm_attr(&a, n, "i", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "twice");
  lm_free(&a);
}

/* If(cond) then: Y2 = X + W (outer names); else: a nested If taking X from two levels
 * up. */
static Onnx__ModelProto *if_model(lm_arena *a, const char *then_input) {
  Onnx__GraphProto *g = lm_graph(a, "main");
  lm_add_input(g, lm_value_info(a, "X", 1, 2, dims_n3));
  lm_add_input(g, lm_value_info(a, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL));
  lm_add_init(g, lm_tensor(a, "W", 1, 1, dims_3, w_vals, sizeof w_vals));
  Onnx__NodeProto *ifn = lm_node(a, "If", "if", "cond", NULL, "Y");
  Onnx__GraphProto *then_g = lm_graph(a, "then");
  lm_add_node(then_g, lm_node(a, "Add", "then_add", then_input, "W", "Y1"));
  lm_add_output(then_g, lm_value_info(a, "Y1", 0, 0, NULL));
  Onnx__GraphProto *inner = lm_graph(a, "inner");
  lm_add_node(inner, lm_node(a, "Neg", "inner_neg", "X", NULL, "Y3"));
  lm_add_output(inner, lm_value_info(a, "Y3", 0, 0, NULL));
  Onnx__GraphProto *else_g = lm_graph(a, "else");
  Onnx__NodeProto *nested = lm_node(a, "If", "nested_if", "cond", NULL, "Y2");
  lm_attr(a, nested, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = inner;
  lm_attr(a, nested, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = inner;
  lm_add_node(else_g, nested);
  lm_add_output(else_g, lm_value_info(a, "Y2", 0, 0, NULL));
  lm_attr(a, ifn, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = then_g;
  lm_attr(a, ifn, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = else_g;
  lm_add_node(g, ifn);
  lm_add_output(g, lm_value_info(a, "Y", 1, 2, dims_n3));
  return lm_model(a, 8, 16, g);
}

NR_TEST(loader_subgraphs) {
  lm_arena a = {0};
  nr_graph *g = NULL;
  nr_error err;
  nr_status st = load_model(&a, if_model(&a, "X"), NULL, 0, &g, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  const nr_attr *then_a = nr_node_attr(&g->nodes[0], "then_branch");
  const nr_attr *else_a = nr_node_attr(&g->nodes[0], "else_branch");
  REQUIRE(then_a && then_a->type == NR_ATTR_GRAPH && then_a->g);
  REQUIRE(else_a && else_a->type == NR_ATTR_GRAPH && else_a->g);
  const nr_graph *tg = then_a->g;
  CHECK(tg->parent == g && tg->opsets == g->opsets && !tg->owns_opsets);
  int x = nr_graph_find_tensor(tg, "X");
  CHECK(x >= 0 && (tg->tensors[x].flags & NR_TENSOR_OUTER));
  CHECK(tg->nodes[0].opset == 16);
  /* The else branch lists X too, though only its nested If uses it. */
  const nr_graph *eg = else_a->g;
  x = nr_graph_find_tensor(eg, "X");
  CHECK(x >= 0 && (eg->tensors[x].flags & NR_TENSOR_OUTER));
  const nr_attr *inner = nr_node_attr(&eg->nodes[0], "then_branch");
  CHECK(inner && inner->g && inner->g->parent == eg);
  nr_graph_destroy(g);
  EXPECT_FAIL(if_model(&a, "nowhere"), NULL, 0, NR_ERR_INVALID_MODEL, "nowhere");
  EXPECT_FAIL(if_model(&a, "nowhere"), NULL, 0, NR_ERR_INVALID_MODEL, "then_add");
  lm_free(&a);
}

/* A chain of nested If graphs deeper than the loader allows. */
NR_TEST(loader_deep_nesting) {
  lm_arena a = {0};
  Onnx__GraphProto *g = lm_graph(&a, "g");
  Onnx__GraphProto *top = g;
  for (int i = 0; i < 60; i++) {
    Onnx__NodeProto *n = lm_node(&a, "If", "if", "c", NULL, "y");
    Onnx__GraphProto *sub = lm_graph(&a, "sub");
    lm_attr(&a, n, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = sub;
    lm_add_node(g, n);
    g = sub;
  }
  EXPECT_FAIL(lm_model(&a, 8, 13, top), NULL, 0, NR_ERR_INVALID_MODEL, "nested");
  lm_free(&a);
}

/* ---- malformed models --------------------------------------------------------------- */

NR_TEST(loader_rejects_bad_headers) {
  lm_arena a = {0};
  nr_graph *g = NULL;
  nr_error err;
  const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0x0f, 0x01};
  CHECK(nr_onnx_load(junk, sizeof junk, NULL, 0, &g, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "protobuf parse failed"), "%s", err.message);
  Onnx__ModelProto *m = basic_model(&a);
  m->ir_version = 2;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "IR version 2");
  m->ir_version = 15;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "IR version 15");
  m->ir_version = 8;
  m->opset_import[0]->version = 29;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "opset 29");
  m->opset_import[0]->version = 28;
  m->opset_import[0]->domain = lm_str(&a, "ai.onnx");
  nr_status st = load_model(&a, m, NULL, 0, &g, &err);
  CHECK(st == NR_OK, "%s", err.message);
  nr_graph_destroy(g);
  m->graph->node[0]->domain = lm_str(&a, "com.example");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "com.example");
  m->graph = NULL;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "no graph");
  lm_free(&a);
}

NR_TEST(loader_rejects_bad_tensors) {
  lm_arena a = {0};
  Onnx__ModelProto *m = basic_model(&a);
  Onnx__TensorProto *w = m->graph->initializer[0];
  w->raw_data.len = 8;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'W'");
  w->raw_data.len = 12;
  w->dims[0] = -3;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'W'");
  int64_t huge[3] = {1ll << 40, 1ll << 40, 1ll << 40};
  w->dims = huge, w->n_dims = 3;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_NOMEM, "'W'");
  int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 3};
  w->dims = nine, w->n_dims = 9;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "'W'");
  w->n_dims = 1, w->dims = nine + 8;
  EXPECT_FAIL(m, NULL, 8, NR_ERR_NOMEM, "'W'"); /* 12 bytes over an 8-byte budget */
  w->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "string");
  w->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FN;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "float8e4m3fn");
  w->data_type = 99;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'W'");
  lm_free(&a);
}

NR_TEST(loader_rejects_bad_graphs) {
  lm_arena a = {0};
  Onnx__ModelProto *m = basic_model(&a);
  Onnx__GraphProto *g = m->graph;
  g->node[1]->input[0] = lm_str(&a, "ghost");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'add' (Add) input 'ghost'");
  g->node[1]->input[0] = lm_str(&a, "X");
  g->node[0]->output[0] = lm_str(&a, "Y");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'Y' is produced by two nodes");
  g->node[0]->output[0] = lm_str(&a, "W");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "initializer");
  g->node[0]->output[0] = lm_str(&a, "Z");
  g->output[0]->name = lm_str(&a, "nothing");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'nothing'");
  g->output[0]->name = lm_str(&a, "Z");
  g->input[0]->type->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "complex64");
  g->input[0]->type->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT4;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "'X'");
  Onnx__TypeProto seq = ONNX__TYPE_PROTO__INIT;
  Onnx__TypeProto__Sequence seq_t = ONNX__TYPE_PROTO__SEQUENCE__INIT;
  seq.value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
  seq.sequence_type = &seq_t;
  Onnx__TypeProto *x_type = g->input[0]->type;
  g->input[0]->type = &seq;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_UNSUPPORTED, "sequence");
  g->input[0]->type = x_type;
  x_type->tensor_type->elem_type = 1;
  x_type->tensor_type->shape->dim[1]->dim_value = -2;
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "'X'");
  /* -1, the exporters' spelling of a free dim, loads as an unknown dim */
  x_type->tensor_type->shape->dim[1]->dim_value = -1;
  {
    nr_graph *g1 = NULL;
    nr_error e1;
    nr_status st1 = load_model(&a, m, NULL, 0, &g1, &e1);
    CHECK(st1 == NR_OK, "dim -1: %s", e1.message);
    CHECK(g1 && g1->tensors[g1->inputs[0]].value.dims[1] == NR_DIM_UNKNOWN, "dim -1 is free");
    nr_graph_destroy(g1);
  }
  x_type->tensor_type->shape->dim[1]->dim_value = 3;
  g->node[0]->op_type = lm_str(&a, "");
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_MODEL, "op_type");
  lm_free(&a);
}

/* ---- external data ------------------------------------------------------------------ */

static void set_external(lm_arena *a, Onnx__TensorProto *t, const char *loc,
                         const char *offset, const char *length) {
  t->has_raw_data = 0;
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  t->n_external_data = 0;
  t->external_data = lm_alloc(a, sizeof(void *) * 3);
  const char *keys[3] = {"location", "offset", "length"};
  const char *vals[3] = {loc, offset, length};
  for (int i = 0; i < 3; i++) {
    if (!vals[i])
      continue;
    Onnx__StringStringEntryProto *e = lm_alloc(a, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = lm_str(a, keys[i]);
    e->value = lm_str(a, vals[i]);
    t->external_data[t->n_external_data++] = e;
  }
}

static bool write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  bool ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

NR_TEST(loader_external_data) {
  char root[] = "/tmp/nr_loader_XXXXXX", dir[64], path[128], outside[128];
  REQUIRE(mkdtemp(root));
  snprintf(dir, sizeof dir, "%s/model", root);
  REQUIRE(mkdir(dir, 0700) == 0);
  uint8_t blob[8 + sizeof w_vals];
  memset(blob, 0xee, 8);
  memcpy(blob + 8, w_vals, sizeof w_vals);
  snprintf(path, sizeof path, "%s/w.bin", dir);
  REQUIRE(write_file(path, blob, sizeof blob));
  snprintf(outside, sizeof outside, "%s/secret.bin", root);
  REQUIRE(write_file(outside, blob, sizeof blob));
  snprintf(path, sizeof path, "%s/link.bin", dir);
  REQUIRE(symlink(outside, path) == 0);

  lm_arena a = {0};
  Onnx__ModelProto *m = basic_model(&a);
  Onnx__TensorProto *w = m->graph->initializer[0];
  set_external(&a, w, "w.bin", "8", "12");
  nr_graph *g = NULL;
  nr_error err;
  nr_status st = load_model(&a, m, dir, 0, &g, &err);
  CHECK(st == NR_OK, "%s", err.message);
  int wi = g ? nr_graph_find_tensor(g, "W") : -1;
  CHECK(wi >= 0 && !memcmp(g->tensors[wi].value.data, w_vals, sizeof w_vals));
  nr_graph_destroy(g);

  set_external(&a, w, "./w.bin", "8", NULL);
  st = load_model(&a, m, dir, 0, &g, &err);
  CHECK(st == NR_OK, "%s", err.message);
  nr_graph_destroy(g);
  set_external(&a, w, "w.bin", "8", NULL);
  EXPECT_FAIL(m, NULL, 0, NR_ERR_INVALID_ARGUMENT, "'W'");
  set_external(&a, w, "../secret.bin", "8", NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "leaves");
  set_external(&a, w, "sub/../../secret.bin", NULL, NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "leaves");
  set_external(&a, w, outside, "8", NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "absolute");
  set_external(&a, w, "link.bin", "8", NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "outside");
  set_external(&a, w, "w.bin", "12", NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "outside");
  set_external(&a, w, "w.bin", "18446744073709551615", NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "'W'");
  set_external(&a, w, "w.bin", "-1", NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "offset");
  set_external(&a, w, "w.bin", "8", "11");
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "length");
  set_external(&a, w, "missing.bin", NULL, NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_IO, "missing.bin");
  set_external(&a, w, NULL, NULL, NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_INVALID_MODEL, "location");
  /* a FIFO (or a device) is refused before it is opened: opening one blocks */
  char fifo[128];
  snprintf(fifo, sizeof fifo, "%s/pipe.bin", dir);
  REQUIRE(mkfifo(fifo, 0600) == 0);
  set_external(&a, w, "pipe.bin", NULL, NULL);
  EXPECT_FAIL(m, dir, 0, NR_ERR_IO, "not a regular file");
  unlink(fifo);
  lm_free(&a);

  unlink(path);
  unlink(outside);
  snprintf(path, sizeof path, "%s/w.bin", dir);
  unlink(path);
  rmdir(dir);
  rmdir(root);
}

/* ---- samples for the fuzz test ------------------------------------------------------ */

uint8_t *lm_sample_model(lm_arena *a, int i, size_t *len) {
  Onnx__ModelProto *m = i == 1 ? if_model(a, "X") : basic_model(a);
  if (i == 2) {
    Onnx__NodeProto *n = m->graph->node[0];
    lm_attr(a, n, "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR)->t =
        lm_tensor(a, "c", 1, 1, dims_3, w_vals, sizeof w_vals);
    int64_t *ints = lm_alloc(a, 2 * sizeof *ints);
    Onnx__AttributeProto *is = lm_attr(a, n, "is", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    is->n_ints = 2, is->ints = ints;
  }
  if (i == 3) {
    Onnx__TensorProto *w = m->graph->initializer[0];
    w->has_raw_data = 0;
    w->n_float_data = 3;
    w->float_data = (float *)w_vals;
  }
  return lm_pack(a, m, len);
}
