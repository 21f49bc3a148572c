/* test_graph.c - the graph IR and the executor core: ordering, validation, operator
 * binding, constant folding and value lifetimes, on graphs built by hand. */
#include "unit.h"

#include "ir/op.h"
#include "kernels/ref/executor.h"

#include <stdlib.h>
#include <string.h>

/* Adds node op(inputs...) -> outputs..., creating tensors by name as needed. */
static nr_node *add(nr_graph *g, const char *op, const char *name, int n_in,
                    const char **ins, int n_out, const char **outs) {
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
  n->inputs = malloc(sizeof(int) * (size_t)n_in);
  n->outputs = malloc(sizeof(int) * (size_t)n_out);
  for (int i = 0; i < n_in; i++) {
    int t = nr_graph_find_tensor(g, ins[i]);
    n->inputs[i] = t >= 0 ? t : nr_graph_add_tensor(g, ins[i], 0);
  }
  for (int o = 0; o < n_out; o++) {
    int t = nr_graph_find_tensor(g, outs[o]);
    n->outputs[o] = t >= 0 ? t : nr_graph_add_tensor(g, outs[o], 0);
  }
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  return n;
}

static nr_graph *new_graph(void) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  return g;
}

static int add_input(nr_graph *g, const char *name, int64_t n) {
  int t = nr_graph_add_tensor(g, name, NR_TENSOR_INPUT);
  g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, 1, {n}, NULL, false};
  g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
  g->inputs[g->n_inputs++] = t;
  return t;
}

static void add_output(nr_graph *g, const char *name) {
  int t = nr_graph_find_tensor(g, name);
  g->tensors[t].flags |= NR_TENSOR_OUTPUT;
  g->outputs = realloc(g->outputs, sizeof(int) * (size_t)(g->n_outputs + 1));
  g->outputs[g->n_outputs++] = t;
}

NR_TEST(graph_name_lookup_survives_growth) {
  nr_graph *g = new_graph();
  char name[32];
  for (int i = 0; i < 1000; i++) {
    snprintf(name, sizeof name, "t%d", i);
    REQUIRE(nr_graph_add_tensor(g, name, 0) == i);
  }
  CHECK(nr_graph_find_tensor(g, "t0") == 0);
  CHECK(nr_graph_find_tensor(g, "t999") == 999);
  CHECK(nr_graph_find_tensor(g, "t1000") == -1);
  nr_graph_destroy(g);
}

NR_TEST(graph_toposort_reorders_nodes) {
  nr_graph *g = new_graph();
  add_input(g, "x", 4);
  add(g, "Relu", "second", 1, (const char *[]){"a"}, 1, (const char *[]){"b"});
  add(g, "Neg", "first", 1, (const char *[]){"x"}, 1, (const char *[]){"a"});
  add_output(g, "b");
  nr_error err = {0};
  REQUIRE(nr_graph_toposort(g, &err) == NR_OK, "%s", err.message);
  CHECK(!strcmp(g->nodes[0].name, "first"));
  CHECK(!strcmp(g->nodes[1].name, "second"));
  CHECK(g->tensors[nr_graph_find_tensor(g, "b")].producer == 1);
  nr_graph_destroy(g);
}

NR_TEST(graph_cycle_is_an_error_naming_a_node) {
  nr_graph *g = new_graph();
  add_input(g, "x", 4);
  add(g, "Add", "loop_a", 2, (const char *[]){"x", "b"}, 1, (const char *[]){"a"});
  add(g, "Relu", "loop_b", 1, (const char *[]){"a"}, 1, (const char *[]){"b"});
  add_output(g, "b");
  nr_error err = {0};
  CHECK(nr_graph_toposort(g, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "cycle") && strstr(err.message, "loop_"), "%s", err.message);
  nr_graph_destroy(g);
}

NR_TEST(graph_dangling_input_is_named) {
  nr_graph *g = new_graph();
  add_input(g, "x", 4);
  add(g, "Add", "adder", 2, (const char *[]){"x", "ghost"}, 1, (const char *[]){"y"});
  add_output(g, "y");
  nr_error err = {0};
  CHECK(nr_graph_toposort(g, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "ghost") && strstr(err.message, "adder"), "%s", err.message);
  nr_graph_destroy(g);
}

NR_TEST(graph_double_producer_is_an_error) {
  nr_graph *g = new_graph();
  add_input(g, "x", 4);
  add(g, "Relu", "one", 1, (const char *[]){"x"}, 1, (const char *[]){"y"});
  add(g, "Neg", "two", 1, (const char *[]){"x"}, 1, (const char *[]){"y"});
  add_output(g, "y");
  nr_error err = {0};
  CHECK(nr_graph_toposort(g, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "'y'"), "%s", err.message);
  nr_graph_destroy(g);
}

NR_TEST(graph_unknown_operator_names_type_domain_opset_node) {
  nr_graph *g = new_graph();
  add_input(g, "x", 4);
  add(g, "FrobnicateV7", "frob", 1, (const char *[]){"x"}, 1, (const char *[]){"y"});
  add_output(g, "y");
  nr_error err = {0};
  REQUIRE(nr_graph_toposort(g, &err) == NR_OK);
  CHECK(nr_graph_bind_ops(g, &err) == NR_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "FrobnicateV7") && strstr(err.message, "ai.onnx") &&
            strstr(err.message, "13") && strstr(err.message, "frob"),
        "%s", err.message);
  nr_graph_destroy(g);
}

/* y = relu(x) + (c1 + c2): the constant sum folds away, the rest runs. */
NR_TEST(graph_fold_and_execute) {
  nr_graph *g = new_graph();
  add_input(g, "x", 3);
  static float c1[3] = {1, 2, 3}, c2[3] = {10, 20, 30};
  int t1 = nr_graph_add_tensor(g, "c1", NR_TENSOR_CONST);
  int t2 = nr_graph_add_tensor(g, "c2", NR_TENSOR_CONST);
  g->tensors[t1].value = (nr_value){NR_DTYPE_FLOAT, 1, {3}, c1, false};
  g->tensors[t2].value = (nr_value){NR_DTYPE_FLOAT, 1, {3}, c2, false};
  add(g, "Add", "csum", 2, (const char *[]){"c1", "c2"}, 1, (const char *[]){"c"});
  add(g, "Relu", "relu", 1, (const char *[]){"x"}, 1, (const char *[]){"r"});
  add(g, "Add", "out", 2, (const char *[]){"r", "c"}, 1, (const char *[]){"y"});
  add_output(g, "y");
  nr_error err = {0};
  REQUIRE(nr_graph_toposort(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_graph_bind_ops(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_graph_fold_constants(g, &err) == NR_OK, "%s", err.message);
  CHECK(g->n_nodes == 2, "folding left %d nodes", g->n_nodes);
  const nr_value *y = &g->tensors[nr_graph_find_tensor(g, "y")].value;
  CHECK(y->dtype == NR_DTYPE_FLOAT && y->rank == 1 && y->dims[0] == 3);
  float x[3] = {-1, 0.5f, 2};
  nr_value in = {NR_DTYPE_FLOAT, 1, {3}, x, false}, out = {0};
  REQUIRE(nr_ref_exec(g, &in, &out, &err) == NR_OK, "%s", err.message);
  const float *o = out.data;
  CHECK(o[0] == 11.0f && o[1] == 22.5f && o[2] == 35.0f, "%g %g %g", o[0], o[1], o[2]);
  nr_value_free(&out);
  nr_graph_destroy(g);
}

/* Folding drops Identity and inference Dropout (mask unread, training_mode constant
 * false or ratio constant 0): their producers take over the outputs, graph inputs and outputs keep their
 * names. A Dropout in training mode and an Identity of a graph input stay. */
static float run_first(nr_graph *g, float xv, nr_error *err) {
  float x[3] = {xv, xv, xv};
  nr_value in[2] = {{NR_DTYPE_FLOAT, 1, {3}, x, false}, {NR_DTYPE_FLOAT, 1, {3}, x, false}};
  nr_value out[2] = {{0}};
  nr_status st = nr_ref_exec(g, in, out, err);
  float r = st ? -999.0f : ((const float *)out[0].data)[0];
  for (int i = 0; i < g->n_outputs; i++)
    nr_value_free(&out[i]);
  return r;
}

NR_TEST(graph_fold_drops_copies) {
  nr_graph *g = new_graph();
  add_input(g, "x", 3);
  static bool off = false;
  int tm = nr_graph_add_tensor(g, "tm", NR_TENSOR_CONST);
  g->tensors[tm].value = (nr_value){NR_DTYPE_BOOL, 0, {0}, &off, false};
  static float ratio = 0.3f;
  int tr = nr_graph_add_tensor(g, "ratio", NR_TENSOR_CONST);
  g->tensors[tr].value = (nr_value){NR_DTYPE_FLOAT, 0, {0}, &ratio, false};
  add(g, "Relu", "relu", 1, (const char *[]){"x"}, 1, (const char *[]){"r"});
  add(g, "Dropout", "drop", 3, (const char *[]){"r", "ratio", "tm"}, 2,
      (const char *[]){"d", "mask"});
  static float zero = 0.0f;
  static bool on = true;
  int tz = nr_graph_add_tensor(g, "zero", NR_TENSOR_CONST);
  g->tensors[tz].value = (nr_value){NR_DTYPE_FLOAT, 0, {0}, &zero, false};
  int ton = nr_graph_add_tensor(g, "on", NR_TENSOR_CONST);
  g->tensors[ton].value = (nr_value){NR_DTYPE_BOOL, 0, {0}, &on, false};
  add(g, "Dropout", "drop0", 3, (const char *[]){"d", "zero", "on"}, 2,
      (const char *[]){"d0", "mask0"});
  add(g, "Identity", "id", 1, (const char *[]){"d0"}, 1, (const char *[]){"i"});
  add(g, "Add", "add", 2, (const char *[]){"i", "x"}, 1, (const char *[]){"s"});
  add(g, "Identity", "id_out", 1, (const char *[]){"s"}, 1, (const char *[]){"y"});
  add(g, "Identity", "id_in", 1, (const char *[]){"x"}, 1, (const char *[]){"x2"});
  add_output(g, "y");
  add_output(g, "x2");
  nr_error err = {0};
  REQUIRE(nr_graph_toposort(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_graph_bind_ops(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_graph_fold_constants(g, &err) == NR_OK, "%s", err.message);
  CHECK(g->n_nodes == 3, "folding left %d nodes, want Relu, Add, Identity", g->n_nodes);
  CHECK(g->tensors[g->outputs[0]].producer >= 0 &&
            !strcmp(g->nodes[g->tensors[g->outputs[0]].producer].op_type, "Add"),
        "the Add produces y");
  CHECK(!strcmp(g->tensors[g->outputs[0]].name, "y"), "graph output keeps its name");
  float y = run_first(g, 1.5f, &err);
  CHECK(y == 3.0f, "y = relu(1.5) + 1.5 = %g (%s)", y, err.message);
  nr_graph_destroy(g);
}

NR_TEST(graph_fold_keeps_training_dropout) {
  nr_graph *g = new_graph();
  add_input(g, "x", 3);
  static bool on = true;
  int tm = nr_graph_add_tensor(g, "tm", NR_TENSOR_CONST);
  g->tensors[tm].value = (nr_value){NR_DTYPE_BOOL, 0, {0}, &on, false};
  static float ratio = 0.5f;
  int tr = nr_graph_add_tensor(g, "ratio", NR_TENSOR_CONST);
  g->tensors[tr].value = (nr_value){NR_DTYPE_FLOAT, 0, {0}, &ratio, false};
  add(g, "Relu", "relu", 1, (const char *[]){"x"}, 1, (const char *[]){"r"});
  add(g, "Dropout", "drop", 3, (const char *[]){"r", "ratio", "tm"}, 1,
      (const char *[]){"d"});
  add(g, "Relu", "relu2", 1, (const char *[]){"d"}, 1, (const char *[]){"y"});
  add(g, "Relu", "relu3", 1, (const char *[]){"x"}, 1, (const char *[]){"r3"});
  add(g, "Dropout", "drop_mask", 1, (const char *[]){"r3"}, 2, (const char *[]){"d3", "m3"});
  add_output(g, "y");
  add_output(g, "m3");
  nr_error err = {0};
  REQUIRE(nr_graph_toposort(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_graph_bind_ops(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_graph_fold_constants(g, &err) == NR_OK, "%s", err.message);
  CHECK(g->n_nodes == 5, "folding left %d nodes, want all 5", g->n_nodes);
  nr_graph_destroy(g);
}

NR_TEST(exec_node_reports_shape_errors) {
  float a[2] = {1, 2}, b[3] = {1, 2, 3};
  nr_value va = {NR_DTYPE_FLOAT, 1, {2}, a, false}, vb = {NR_DTYPE_FLOAT, 1, {3}, b, false};
  nr_value out = {0};
  nr_error err = {0};
  nr_status st = nr_ref_exec_node("Add", "", 13, 0, NULL, 2,
                                  (const nr_value *[]){&va, &vb}, 1, &out, &err);
  CHECK(st == NR_ERR_SHAPE, "status %d: %s", st, err.message);
  CHECK(strstr(err.message, "Add"), "%s", err.message);
  nr_value_free(&out);
}
