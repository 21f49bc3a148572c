/* test_knobs.c - the knob registry: the real tables validate, the schema hash tracks
 * every table field, and knob spaces built from local tables on a hand-made graph
 * follow the order, applies/valid filtering and test-knob rules; node naming.
 *
 * Local tables go through knob_internal.h, so these tests do not depend on which
 * real knobs exist. */
#include "unit.h"

#include "plan/knob_internal.h"

#include <stdlib.h>
#include <string.h>

static bool is_conv(const nr_graph *g, const nr_node *n) {
  return n && !strcmp(n->op_type, "Conv");
}
static bool is_matmul(const nr_graph *g, const nr_node *n) {
  return n && !strcmp(n->op_type, "MatMul");
}
static bool never(const nr_graph *g, const nr_node *n) { return false; }
/* Depthwise convolutions ("dw" in the name) only allow auto|direct. */
static uint64_t conv_valid(const nr_graph *g, const nr_node *n) {
  return strstr(n->name, "dw") ? 0x3 : ~0ull;
}
static uint64_t only_default(const nr_graph *g, const nr_node *n) { return 0x1; }
static uint64_t no_default(const nr_graph *g, const nr_node *n) { return 0x2; }

static const nr_knob_def table_a[] = {
    {"ta.mode", "fast|safe|off", "safe", NR_KNOB_GLOBAL, 0, 0, "a global"},
    {"ta.algo", "auto|direct|im2col|winograd", "auto", NR_KNOB_NODE, 0, 0, "conv algo",
     is_conv, conv_valid},
    {0},
};
static const nr_knob_def table_b[] = {
    {"tb.tile", "1|2|4", "1", NR_KNOB_NODE, NR_KNOB_LAYOUT, 0, "tile", is_matmul},
    {"tb.approx", "off|on", "off", NR_KNOB_GLOBAL, NR_KNOB_ACCURACY, 1e-3, "approx"},
    {"tb.crash", "off|on", "off", NR_KNOB_GLOBAL, NR_KNOB_TEST, 0, "fault injection"},
    {"tb.never", "x|y", "x", NR_KNOB_GLOBAL, 0, 0, "applies to no graph", never},
    {"tb.single", "a|b", "a", NR_KNOB_NODE, 0, 0, "one valid value", is_conv,
     only_default},
    {0},
};
static const nr_knob_def *const tables[] = {table_a, table_b};

static void add_node(nr_graph *g, const char *op, const char *name) {
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
}

static nr_graph *test_graph(void) {
  nr_graph *g = nr_graph_create(NULL);
  add_node(g, "Conv", "conv1");
  add_node(g, "Relu", "");
  add_node(g, "Conv", "conv_dw");
  add_node(g, "MatMul", "mm");
  add_node(g, "Conv", "");
  return g;
}

/* ---- tables --------------------------------------------------------------------- */

NR_TEST(knobs_real_tables_validate) {
  nr_error err = {0};
  nr_knob_space s;
  REQUIRE(nr_knob_space_build(NULL, &s, &err) == NR_OK, "%s", err.message);
  for (int i = 0; i < s.n; i++)
    CHECK(s.inst[i].def->scope == NR_KNOB_GLOBAL && s.inst[i].node == NULL);
  nr_knob_space_free(&s);
  char a[17], b[17];
  nr_knob_schema(a);
  nr_knob_schema(b);
  CHECK(strlen(a) == 16 && strspn(a, "0123456789abcdef") == 16, "%s", a);
  CHECK(!strcmp(a, b));
}

static void check_find(const nr_knob_def *d, void *user) {
  int *bad = user;
  *bad += nr_knob_find(d->name) != d;
}

NR_TEST(knobs_find_every_definition) {
  int bad = 0;
  nr_knob_foreach(check_find, &bad);
  CHECK(bad == 0);
  CHECK(nr_knob_find("no.such_knob") == NULL);
  CHECK(nr_knob_find(NULL) == NULL);
}

static void expect_invalid(nr_test_state *t, const nr_knob_def *rows, const char *needle) {
  const nr_knob_def *const list[] = {table_a, rows};
  nr_error err = {0};
  CHECK(nr_knob_tables_validate(list, 2, &err) == NR_ERR_INTERNAL, "%s", needle);
  CHECK(strstr(err.message, needle), "'%s' not in: %s", needle, err.message);
}

NR_TEST(knobs_validation_errors) {
  nr_error err = {0};
  CHECK(nr_knob_tables_validate(tables, 2, &err) == NR_OK, "%s", err.message);
  expect_invalid(t, (nr_knob_def[]){{"ta.mode", "a|b", "a"}, {0}}, "'ta.mode' is defined twice");
  expect_invalid(t, (nr_knob_def[]){{"x.y", "a|b", "c"}, {0}}, "default 'c'");
  expect_invalid(t, (nr_knob_def[]){{"x.y", "a||b", "a"}, {0}}, "x.y");
  expect_invalid(t, (nr_knob_def[]){{"x.y", "", "a"}, {0}}, "'x.y' has no values");
  expect_invalid(t, (nr_knob_def[]){{"x.y", "a|b|a", "a"}, {0}}, "listed twice");
  expect_invalid(t, (nr_knob_def[]){{"x@y", "a|b", "a"}, {0}}, "x@y");
  expect_invalid(t, (nr_knob_def[]){{"x.y", "a|b", "a", 0, NR_KNOB_ACCURACY, 0}, {0}},
                 "error_bound");
  expect_invalid(t, (nr_knob_def[]){{"x.y", "a|b", "a", 0, 0, 0.5}, {0}}, "error_bound");
  char many[200] = "v0";
  for (int i = 1; i <= NR_KNOB_MAX_VALUES; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "|v%d", i);
  expect_invalid(t, (nr_knob_def[]){{"x.many", many, "v0"}, {0}}, "33 values");
}

/* A precision knob may carry one bound per value; what a bad list looks like. */
NR_TEST(knobs_value_bounds_validation) {
  const unsigned P = NR_KNOB_ACCURACY | NR_KNOB_PRECISION;
  nr_knob_def ok[] = {{"x.prec", "fp32|half|int8", "fp32", NR_KNOB_NODE, P, 0, "p"}, {0}};
  ok[0].value_bounds = "0|0.01|0.2";
  const nr_knob_def *const list[] = {table_a, ok};
  nr_error err = {0};
  CHECK(nr_knob_tables_validate(list, 2, &err) == NR_OK, "%s", err.message);
  CHECK(nr_knob_value_bound(&ok[0], 0) == 0 && nr_knob_value_bound(&ok[0], 1) == 0.01 &&
        nr_knob_value_bound(&ok[0], 2) == 0.2);
  CHECK(nr_knob_value_bound(&table_b[1], 1) == 1e-3 &&
            nr_knob_value_bound(&table_b[1], 0) == 0,
        "without value_bounds: error_bound off the default");
  static const char *const bad[] = {"0|0.01",  "0|0.01|0.2|1", "0.1|0.01|0.2",
                                    "0|0|0.2", "0|x|0.2",      "0|-1|0.2",
                                    "0||0.2",  "0|inf|0.2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    nr_knob_def b[] = {{"x.prec", "fp32|half|int8", "fp32", NR_KNOB_NODE, P, 0, "p"}, {0}};
    b[0].value_bounds = bad[i];
    expect_invalid(t, b, "value_bounds");
  }
  nr_knob_def not_prec[] = {{"x.y", "a|b", "a", 0, NR_KNOB_ACCURACY, 0.5}, {0}};
  not_prec[0].value_bounds = "0|0.5";
  expect_invalid(t, not_prec, "precision knobs");
}

NR_TEST(knobs_schema_hash_tracks_every_field) {
  nr_knob_def copy[3];
  memcpy(copy, table_a, sizeof copy);
  const nr_knob_def *const list[] = {copy, table_b};
  uint64_t h = nr_knob_hash_tables(tables, 2);
  CHECK(h == nr_knob_hash_tables(list, 2));
  copy[0].dflt = "fast";
  CHECK(h != nr_knob_hash_tables(list, 2), "default");
  copy[0].dflt = "safe";
  copy[1].error_bound = 1e-300;
  CHECK(h != nr_knob_hash_tables(list, 2), "error bound");
  copy[1].error_bound = 0;
  copy[1].flags = NR_KNOB_MEMORY;
  CHECK(h != nr_knob_hash_tables(list, 2), "flags");
  copy[1].flags = 0;
  copy[1].scope = NR_KNOB_GLOBAL;
  CHECK(h != nr_knob_hash_tables(list, 2), "scope");
  copy[1].scope = NR_KNOB_NODE;
  copy[1].values = "auto|direct|im2col";
  CHECK(h != nr_knob_hash_tables(list, 2), "values");
  copy[1].values = table_a[1].values;
  copy[1].value_bounds = "0|1|2|3";
  CHECK(h != nr_knob_hash_tables(list, 2), "value bounds");
  copy[1].value_bounds = NULL;
  copy[1].help = "other help";
  CHECK(h == nr_knob_hash_tables(list, 2), "help text is not part of the schema");
  const nr_knob_def *const swapped[] = {table_b, table_a};
  CHECK(h != nr_knob_hash_tables(swapped, 2), "table order");
}

/* ---- spaces --------------------------------------------------------------------- */

static const char *const expected_ids[] = {
    "ta.mode", "tb.approx", "ta.algo@conv1", "ta.algo@conv_dw", "tb.tile@mm",
    "ta.algo@Conv_4",
};

NR_TEST(knobs_space_order_and_filtering) {
  nr_graph *g = test_graph();
  nr_error err = {0};
  nr_knob_space s;
  REQUIRE(nr_compiler_name_nodes(g, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_knob_space_build_tables(tables, 2, g, false, &s, &err) == NR_OK, "%s",
          err.message);
  CHECK(s.n == 6, "n=%d", s.n);
  for (int i = 0; i < s.n && i < 6; i++) {
    CHECK(!strcmp(s.inst[i].id, expected_ids[i]), "%d: %s", i, s.inst[i].id);
    CHECK(nr_knob_space_find(&s, expected_ids[i]) == i, "%s", expected_ids[i]);
  }
  const nr_knob_inst *dw = &s.inst[3];
  CHECK(dw->n_values == 2 && !strcmp(dw->values[1], "direct"));
  CHECK(!strcmp(dw->node, "conv_dw") && !strcmp(dw->op_type, "Conv"));
  CHECK(s.inst[0].dflt == 1 && s.inst[0].node == NULL && s.inst[0].op_type == NULL);
  CHECK(nr_knob_value_index(&s.inst[4], "4") == 2);
  CHECK(nr_knob_value_index(&s.inst[4], "8") == -1);
  CHECK(nr_knob_space_find(&s, "tb.single@conv1") == -1, "single-valued instance");
  CHECK(nr_knob_space_find(&s, "tb.never") == -1);
  CHECK(nr_knob_space_find(&s, "tb.crash") == -1, "test knob hidden");
  CHECK(nr_knob_space_find(&s, "ta.algo@mm") == -1);
  CHECK(nr_knob_space_find(&s, "ta.algo") == -1);
  nr_knob_space_free(&s);
  nr_knob_space_free(&s); /* freed spaces are empty */
  REQUIRE(nr_knob_space_build_tables(tables, 2, g, true, &s, &err) == NR_OK);
  CHECK(nr_knob_space_find(&s, "tb.crash") == 2, "test knob listed on request");
  nr_knob_space_free(&s);
  nr_graph_destroy(g);
}

NR_TEST(knobs_space_without_graph_lists_all_globals) {
  nr_error err = {0};
  nr_knob_space s;
  REQUIRE(nr_knob_space_build_tables(tables, 2, NULL, false, &s, &err) == NR_OK);
  CHECK(s.n == 3, "n=%d", s.n);
  CHECK(nr_knob_space_find(&s, "tb.never") == 2);
  nr_knob_space_free(&s);
}

NR_TEST(knobs_space_errors) {
  static const nr_knob_def bad[] = {
      {"tc.bad", "a|b|c", "a", NR_KNOB_NODE, 0, 0, "valid() drops the default", is_conv,
       no_default},
      {0},
  };
  const nr_knob_def *const list[] = {bad};
  nr_graph *g = test_graph();
  nr_error err = {0};
  nr_knob_space s;
  CHECK(nr_knob_space_build_tables(tables, 2, g, false, &s, &err) == NR_ERR_INVALID_ARGUMENT,
        "unnamed nodes");
  CHECK(strstr(err.message, "nr_compiler_name_nodes"), "%s", err.message);
  nr_compiler_name_nodes(g, &err);
  CHECK(nr_knob_space_build_tables(list, 1, g, false, &s, &err) == NR_ERR_INTERNAL);
  CHECK(strstr(err.message, "tc.bad@conv1") && strstr(err.message, "default"), "%s",
        err.message);
  CHECK(s.n == 0 && s.inst == NULL);
  nr_graph_destroy(g);
}

/* ---- naming --------------------------------------------------------------------- */

NR_TEST(knobs_name_nodes) {
  nr_graph *g = nr_graph_create(NULL);
  add_node(g, "Relu", "");       /* Relu_0 */
  add_node(g, "Add", "x");
  add_node(g, "Add", "x");       /* x_2 */
  add_node(g, "Mul", "x_2");     /* explicit name wins; the duplicate above takes x_3 */
  add_node(g, "Relu", "");       /* Relu_4 */
  add_node(g, "Sub", "Relu_4");  /* explicit; the unnamed Relu above takes Relu_4_2 */
  add_node(g, "If", "branch");
  add_node(g, "Neg", "a b");     /* whitespace cannot appear in a route token */
  nr_node *n = &g->nodes[6];
  n->attrs = calloc(1, sizeof *n->attrs);
  n->n_attrs = 1;
  n->attrs[0].name = strdup("then_branch");
  n->attrs[0].type = NR_ATTR_GRAPH;
  n->attrs[0].g = nr_graph_create(g);
  add_node(n->attrs[0].g, "Identity", "");
  add_node(n->attrs[0].g, "Identity", "x");
  nr_error err = {0};
  REQUIRE(nr_compiler_name_nodes(g, &err) == NR_OK, "%s", err.message);
  const char *want[] = {"Relu_0", "x", "x_3", "x_2", "Relu_4_2", "Relu_4", "branch", "a_b"};
  for (int i = 0; i < 8; i++)
    CHECK(!strcmp(g->nodes[i].name, want[i]), "%d: %s", i, g->nodes[i].name);
  nr_graph *sub = g->nodes[6].attrs[0].g;
  CHECK(!strcmp(sub->nodes[0].name, "Identity_0"), "%s", sub->nodes[0].name);
  CHECK(!strcmp(sub->nodes[1].name, "x_4"), "%s", sub->nodes[1].name);
  REQUIRE(nr_compiler_name_nodes(g, &err) == NR_OK);
  CHECK(!strcmp(g->nodes[2].name, "x_3"), "naming is idempotent");
  nr_graph_destroy(g);
}
