/* test_model_inputs.c - what `conformance --engines` does to a node test's model before
 * building it: a graph input turned into a constant (nr_model_set_input_constant),
 * and a tensor that only an If body reads from the enclosing scope, which the
 * compiler must keep (engines do not run If, and say so). */
#include "api/nnroute_tools.h"
#include "loader_models.h"
#include "unit.h"

#include <string.h>

static const int64_t dims_3[1] = {3};

/* Y = X + B, both inputs float[3]. */
static nr_model *add_model(lm_arena *a) {
  Onnx__GraphProto *g = lm_graph(a, "add");
  lm_add_input(g, lm_value_info(a, "X", 1, 1, dims_3));
  lm_add_input(g, lm_value_info(a, "B", 1, 1, dims_3));
  lm_add_node(g, lm_node(a, "Add", "add", "X", "B", "Y"));
  lm_add_output(g, lm_value_info(a, "Y", 1, 1, dims_3));
  size_t len;
  uint8_t *bytes = lm_pack(a, lm_model(a, 8, 13, g), &len);
  nr_model *m = NULL;
  nr_error err;
  return nr_model_load_bytes(bytes, len, NULL, &m, &err) ? NULL : m;
}

NR_TEST(model_input_made_constant) {
  lm_arena a = {0};
  nr_model *m = add_model(&a);
  REQUIRE(m);
  float b[3] = {1, 2, 3}, x[3] = {10, 20, 30};
  nr_buffer bb = {NR_DTYPE_FLOAT, 1, {3}, b}, wrong = {NR_DTYPE_INT64, 1, {3}, b},
            shape = {NR_DTYPE_FLOAT, 1, {4}, b};
  nr_error err;
  CHECK(nr_model_set_input_constant(m, "Z", &bb, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "'Z'"), "%s", err.message);
  CHECK(nr_model_set_input_constant(m, "B", &wrong, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "int64"), "%s", err.message);
  CHECK(nr_model_set_input_constant(m, "B", &shape, &err) == NR_ERR_SHAPE);
  CHECK(nr_model_input_count(m) == 2);
  REQUIRE(nr_model_set_input_constant(m, "B", &bb, &err) == NR_OK, "%s", err.message);
  b[0] = 100; /* the model holds a copy */
  REQUIRE(nr_model_input_count(m) == 1);
  nr_io_info info;
  nr_model_input_info(m, 0, &info);
  CHECK(!strcmp(info.name, "X"));
  nr_buffer in = {NR_DTYPE_FLOAT, 1, {3}, x}, ref = {0}, got = {0};
  REQUIRE(nr_model_run(m, &in, &ref, &err) == NR_OK, "%s", err.message);
  CHECK(((float *)ref.data)[0] == 11 && ((float *)ref.data)[2] == 33);
  CHECK(nr_model_set_input_constant(m, "X", &in, &err) == NR_ERR_INVALID_ARGUMENT,
        "a prepared model keeps its inputs");
  nr_engine *e = NULL;
  nr_context *ctx = NULL;
  nr_build_options o = {sizeof o, NULL, 1};
  REQUIRE(nr_engine_build(m, &o, &e, &err) == NR_OK, "%s", err.message);
  CHECK(nr_engine_input_count(e) == 1);
  REQUIRE(nr_context_create(e, 1, &ctx, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_context_run(ctx, &in, &got, &err) == NR_OK, "%s", err.message);
  CHECK(!memcmp(got.data, ref.data, sizeof x));
  nr_buffer_free(&ref);
  nr_buffer_free(&got);
  nr_context_destroy(ctx);
  nr_engine_destroy(e);
  nr_model_destroy(m);
  lm_free(&a);
}

/* T = Neg(X); If(cond) then Y = T + X, else Y = Neg(T): only the bodies read T. */
NR_TEST(engine_build_keeps_tensors_only_a_subgraph_reads) {
  lm_arena a = {0};
  Onnx__GraphProto *g = lm_graph(&a, "main");
  lm_add_input(g, lm_value_info(&a, "X", 1, 1, dims_3));
  lm_add_input(g, lm_value_info(&a, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL));
  lm_add_node(g, lm_node(&a, "Neg", "neg", "X", NULL, "T"));
  Onnx__GraphProto *then_g = lm_graph(&a, "then");
  lm_add_node(then_g, lm_node(&a, "Add", "then_add", "T", "X", "Y1"));
  lm_add_output(then_g, lm_value_info(&a, "Y1", 0, 0, NULL));
  Onnx__GraphProto *else_g = lm_graph(&a, "else");
  lm_add_node(else_g, lm_node(&a, "Neg", "else_neg", "T", NULL, "Y2"));
  lm_add_output(else_g, lm_value_info(&a, "Y2", 0, 0, NULL));
  Onnx__NodeProto *ifn = lm_node(&a, "If", "if", "cond", NULL, "Y");
  lm_attr(&a, ifn, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = then_g;
  lm_attr(&a, ifn, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = else_g;
  lm_add_node(g, ifn);
  lm_add_output(g, lm_value_info(&a, "Y", 1, 1, dims_3));
  size_t len;
  uint8_t *bytes = lm_pack(&a, lm_model(&a, 8, 16, g), &len);
  nr_model *m = NULL;
  nr_engine *e = NULL;
  nr_error err;
  REQUIRE(nr_model_load_bytes(bytes, len, NULL, &m, &err) == NR_OK, "%s", err.message);
  nr_build_options o = {sizeof o, NULL, 1};
  nr_status st = nr_engine_build(m, &o, &e, &err);
  CHECK(st == NR_ERR_UNSUPPORTED && !e, "%s: %s", nr_status_str(st), err.message);
  CHECK(strstr(err.message, "'if' (If"), "%s", err.message);
  nr_engine_destroy(e);
  nr_model_destroy(m);
  lm_free(&a);
}
