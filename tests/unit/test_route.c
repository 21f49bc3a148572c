/* test_route.c - build routes and route expressions on a knob space built from local
 * tables: parsing, canonical round trips, overrides, selectors (@NODE, @*, @OpType),
 * lookups, expression counts, and error messages that name the token and list the
 * allowed values. */
#include "unit.h"

#include "passes/pass_knobs.h"
#include "plan/knob_internal.h"
#include "plan/route.h"

#include <stdlib.h>
#include <string.h>

static bool is_conv(const nr_graph *g, const nr_node *n) {
  return n && !strcmp(n->op_type, "Conv");
}
static bool is_gemm(const nr_graph *g, const nr_node *n) {
  return n && (!strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "Gemm"));
}
static bool never(const nr_graph *g, const nr_node *n) { return false; }
/* Depthwise convolutions ("dw" in the name) only allow auto|direct. */
static uint64_t conv_valid(const nr_graph *g, const nr_node *n) {
  return strstr(n->name, "dw") ? 0x3 : ~0ull;
}
/* ... where im2col builds what auto builds (a route naming it there sets auto). */
static uint64_t conv_same(const nr_graph *g, const nr_node *n) {
  return strstr(n->name, "dw") ? 0x4 : 0;
}

static const nr_knob_def rt_tables_a[] = {
    {"rt.mode", "fast|safe|off", "safe", NR_KNOB_GLOBAL, 0, 0, "a global"},
    {"rt.algo", "auto|direct|im2col|winograd", "auto", NR_KNOB_NODE, 0, 0, "conv algo",
     is_conv, conv_valid, .same_as_dflt = conv_same},
    {0},
};
static const nr_knob_def rt_tables_b[] = {
    {"rt.tile", "1|2|4", "1", NR_KNOB_NODE, 0, 0, "tile", is_gemm},
    {"rt.crash", "off|on", "off", NR_KNOB_GLOBAL, NR_KNOB_TEST, 0, "fault injection"},
    {"rt.never", "x|y", "x", NR_KNOB_GLOBAL, 0, 0, "applies to no graph", never},
    {"rt.unused", "p|q", "p", NR_KNOB_NODE, 0, 0, "no node has it", never},
    {0},
};
static const nr_knob_def *const rt_tables[] = {rt_tables_a, rt_tables_b};

/* The odd name checks that node names may hold '/', ':', '.' and even '@' or '='. */
#define ODD "/layer1/conv.0:1@x=y"

typedef struct fixture {
  nr_graph *g;
  nr_knob_space s;
  nr_route r;
  nr_error err;
} fixture;

static void add_node(nr_graph *g, const char *op, const char *name) {
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
}

/* Space: rt.mode, rt.algo@conv1, rt.algo@conv_dw, rt.tile@mm, rt.algo@ODD,
 * rt.tile@Gemm_5. */
static bool setup(fixture *f) {
  memset(f, 0, sizeof *f);
  f->g = nr_graph_create(NULL);
  add_node(f->g, "Conv", "conv1");
  add_node(f->g, "Relu", "relu");
  add_node(f->g, "Conv", "conv_dw");
  add_node(f->g, "MatMul", "mm");
  add_node(f->g, "Conv", ODD);
  add_node(f->g, "Gemm", "");
  return nr_compiler_name_nodes(f->g, &f->err) == NR_OK &&
         nr_knob_space_build_tables(rt_tables, 2, f->g, false, &f->s, &f->err) == NR_OK &&
         f->s.n == 6 && nr_route_init(&f->r, &f->s, &f->err) == NR_OK;
}

static void teardown(fixture *f) {
  nr_route_free(&f->r);
  nr_knob_space_free(&f->s);
  nr_graph_destroy(f->g);
}

/* Parses text into a fresh default route and returns its canonical form (static). */
static const char *canon(fixture *f, const char *text) {
  static char out[1100];
  nr_route r;
  nr_route_init(&r, &f->s, NULL);
  if (nr_route_parse(&r, text, &f->err)) {
    snprintf(out, sizeof out, "ERROR: %s", f->err.message);
  } else {
    char *c = nr_route_canonical(&r);
    snprintf(out, sizeof out, "%s", c ? c : "(null)");
    free(c);
  }
  nr_route_free(&r);
  return out;
}

#define CHECK_CANON(f, text, want)                                                     \
  do {                                                                                 \
    const char *got_ = canon(f, text);                                                 \
    CHECK(!strcmp(got_, want), "'%s' -> '%s', want '%s'", text, got_, want);           \
  } while (0)

NR_TEST(route_default_is_empty) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  char *c = nr_route_canonical(&f.r);
  CHECK(c && !strcmp(c, ""), "%s", c);
  free(c);
  CHECK(nr_route_changes(&f.r) == 0);
  CHECK_CANON(&f, "", "");
  CHECK_CANON(&f, "   \t\n ", "");
  CHECK_CANON(&f, "-rt.mode=safe -rt.algo@conv1=auto", "");
  teardown(&f);
}

NR_TEST(route_parse_canonical_round_trip) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  const char *text = "-rt.tile@Gemm_5=4  -rt.algo@" ODD "=winograd\t-rt.mode=fast";
  const char *want = "-rt.mode=fast -rt.algo@" ODD "=winograd -rt.tile@Gemm_5=4";
  CHECK_CANON(&f, text, want);
  CHECK_CANON(&f, want, want);
  REQUIRE(nr_route_parse(&f.r, text, &f.err) == NR_OK, "%s", f.err.message);
  CHECK(nr_route_changes(&f.r) == 3);
  nr_route copy;
  REQUIRE(nr_route_copy(&copy, &f.r, &f.err) == NR_OK);
  char *a = nr_route_canonical(&f.r), *b = nr_route_canonical(&copy);
  CHECK(a && b && !strcmp(a, b) && !strcmp(a, want), "%s / %s", a, b);
  free(a);
  free(b);
  nr_route_free(&copy);
  teardown(&f);
}

NR_TEST(route_later_tokens_override) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  CHECK_CANON(&f, "-rt.mode=fast -rt.mode=safe", "");
  CHECK_CANON(&f, "-rt.mode=fast -rt.mode=off", "-rt.mode=off");
  CHECK_CANON(&f, "-rt.algo=direct -rt.algo@conv_dw=auto",
              "-rt.algo@conv1=direct -rt.algo@" ODD "=direct");
  /* Parsing applies on top of what the route holds. */
  REQUIRE(nr_route_parse(&f.r, "-rt.mode=fast", &f.err) == NR_OK);
  REQUIRE(nr_route_parse(&f.r, "-rt.tile@mm=2", &f.err) == NR_OK);
  char *c = nr_route_canonical(&f.r);
  CHECK(c && !strcmp(c, "-rt.mode=fast -rt.tile@mm=2"), "%s", c);
  free(c);
  teardown(&f);
}

NR_TEST(route_selectors) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  const char *all = "-rt.algo@conv1=direct -rt.algo@conv_dw=direct -rt.algo@" ODD "=direct";
  CHECK_CANON(&f, "-rt.algo=direct", all);
  CHECK_CANON(&f, "-rt.algo@*=direct", all);
  CHECK_CANON(&f, "-rt.algo@Conv=direct", all);
  CHECK_CANON(&f, "-rt.algo@<Conv>=direct", all);
  CHECK_CANON(&f, "-rt.tile@MatMul=2", "-rt.tile@mm=2");
  CHECK_CANON(&f, "-rt.tile@<Gemm>=4", "-rt.tile@Gemm_5=4");
  CHECK_CANON(&f, "-rt.tile=2", "-rt.tile@mm=2 -rt.tile@Gemm_5=2");
  /* several instances: those that offer the value take it (conv_dw has no winograd) */
  CHECK_CANON(&f, "-rt.algo=winograd", "-rt.algo@conv1=winograd -rt.algo@" ODD "=winograd");
  CHECK_CANON(&f, "-rt.algo@Conv=winograd",
              "-rt.algo@conv1=winograd -rt.algo@" ODD "=winograd");
  /* a value that means the default at a node sets the default there */
  CHECK_CANON(&f, "-rt.algo@conv_dw=im2col", "");
  CHECK_CANON(&f, "-rt.algo=direct -rt.algo@conv_dw=im2col",
              "-rt.algo@conv1=direct -rt.algo@" ODD "=direct");
  teardown(&f);
}

NR_TEST(route_get) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  REQUIRE(nr_route_parse(&f.r, "-rt.algo@conv1=im2col -rt.mode=off", &f.err) == NR_OK);
  const nr_node *conv1 = &f.g->nodes[0], *relu = &f.g->nodes[1], *dw = &f.g->nodes[2];
  const nr_knob_def *mode = &rt_tables_a[0], *algo = &rt_tables_a[1];
  /* same name as rt.algo, but not a row of the space's tables */
  static const nr_knob_def other = {"rt.algo", "auto|direct", "auto", NR_KNOB_NODE, 0, 0, "x"};
  CHECK(!strcmp(nr_route_get_def(&f.r, mode, NULL), "off"));
  CHECK(!strcmp(nr_route_get_def(&f.r, algo, conv1), "im2col"));
  CHECK(!strcmp(nr_route_get_def(&f.r, algo, dw), "auto"));
  CHECK(nr_route_get_def(&f.r, algo, relu) == NULL, "not applicable");
  CHECK(nr_route_get_def(&f.r, algo, NULL) == NULL, "per-node knob has no global id");
  CHECK(nr_route_get_def(&f.r, &rt_tables_b[2], NULL) == NULL, "rt.never");
  CHECK(nr_route_get_def(&f.r, &other, conv1) == NULL, "a definition is its row");
  CHECK(nr_route_get_def(&f.r, NULL, NULL) == NULL);
  CHECK(nr_route_get_def(NULL, mode, NULL) == NULL);
  CHECK(!strcmp(nr_route_get_def(&f.r, &rt_tables_b[0], &f.g->nodes[5]), "1"), "%s",
        f.g->nodes[5].name);
  /* a real knob id has no instance in a space of local tables */
  CHECK(nr_route_get(&f.r, NR_KNOB_FOLD_CONSTANTS, NULL) == NULL);
  CHECK(nr_route_get(&f.r, -1, NULL) == NULL && !nr_route_is(&f.r, -1, NULL, "off"));
  teardown(&f);
}

/* The route must stay unchanged and the message hold every needle. */
static void expect_error(nr_test_state *t, fixture *f, const char *text,
                         const char *const *needles) {
  nr_error err = {0};
  CHECK(nr_route_parse(&f->r, text, &err) == NR_ERR_INVALID_ARGUMENT, "%s", text);
  for (; *needles; needles++)
    CHECK(strstr(err.message, *needles), "'%s' not in: %s", *needles, err.message);
  char *c = nr_route_canonical(&f->r);
  CHECK(c && !strcmp(c, "-rt.mode=fast"), "route changed by '%s': %s", text, c);
  free(c);
}

#define EXPECT_ERROR(f, text, ...)                                                     \
  expect_error(t, f, text, (const char *const[]){__VA_ARGS__, NULL})

NR_TEST(route_errors_name_the_token) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  REQUIRE(nr_route_parse(&f.r, "-rt.mode=fast", &f.err) == NR_OK);
  EXPECT_ERROR(&f, "-rt.mode=off -rt.algo@conv_dw=winograd", "'-rt.algo@conv_dw=winograd'",
               "rt.algo@conv_dw", "auto|direct");
  EXPECT_ERROR(&f, "-rt.mode=bogus", "'-rt.mode=bogus'", "fast|safe|off");
  EXPECT_ERROR(&f, "-rt.mode=fast|off", "'-rt.mode=fast|off'", "fast|safe|off");
  EXPECT_ERROR(&f, "-rt.mode=[fast|off]", "'-rt.mode=[fast|off]'", "expressions");
  EXPECT_ERROR(&f, "-rt.mode=*", "'-rt.mode=*'", "expressions");
  EXPECT_ERROR(&f, "-rt.algo@conv_dw=winograd", "'-rt.algo@conv_dw=winograd'",
               "auto|direct");
  EXPECT_ERROR(&f, "-rt.algo@nosuch=direct", "'-rt.algo@nosuch=direct'", "nosuch",
               "rt.algo@conv1");
  EXPECT_ERROR(&f, "-rt.algo@<MatMul>=direct", "'-rt.algo@<MatMul>=direct'");
  EXPECT_ERROR(&f, "-rt.mod=fast", "'-rt.mod=fast'", "unknown knob 'rt.mod'", "rt.mode");
  EXPECT_ERROR(&f, "-zz.qq=1", "'-zz.qq=1'", "nnroute knobs");
  EXPECT_ERROR(&f, "rt.mode=fast", "'rt.mode=fast'", "-KNOB=VALUE");
  EXPECT_ERROR(&f, "-rt.mode", "'-rt.mode'", "-KNOB=VALUE");
  EXPECT_ERROR(&f, "-rt.mode=", "'-rt.mode='");
  EXPECT_ERROR(&f, "-rt.algo@=auto", "'-rt.algo@=auto'");
  EXPECT_ERROR(&f, "-rt.mode@conv1=fast", "'-rt.mode@conv1=fast'", "global");
  EXPECT_ERROR(&f, "-rt.crash=on", "'-rt.crash=on'", "NNROUTE_TEST_KNOBS=1");
  EXPECT_ERROR(&f, "-rt.never=y", "'-rt.never=y'", "rt.never");
  EXPECT_ERROR(&f, "-rt.unused=q", "'-rt.unused=q'", "no node");
  teardown(&f);
}

/* ---- expressions ---------------------------------------------------------------- */

static uint64_t count(fixture *f, const char *text) {
  nr_route_expr e;
  if (nr_route_expr_parse(&e, &f->s, text, &f->err))
    return 0;
  uint64_t n = nr_route_expr_count(&e);
  nr_route_expr_free(&e);
  return n;
}

NR_TEST(route_expressions) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  CHECK(count(&f, "") == 1);
  CHECK(count(&f, "-rt.mode=*") == 3);
  CHECK(count(&f, "-rt.mode=[fast|off]") == 2);
  CHECK(count(&f, "-rt.mode=fast") == 1);
  CHECK(count(&f, "-rt.algo@*=*") == 4 * 2 * 4, "%llu",
        (unsigned long long)count(&f, "-rt.algo@*=*"));
  CHECK(count(&f, "-rt.algo=[im2col|direct]") == 2 * 1 * 2, "invalid values dropped");
  CHECK(count(&f, "-rt.algo@Conv=* -rt.algo@conv1=direct") == 2 * 4, "override");
  CHECK(count(&f, "-rt.mode=* -rt.tile@mm=[2|4]") == 6);
  nr_route_expr e;
  REQUIRE(nr_route_expr_parse(&e, &f.s, "-rt.algo=[im2col|direct]", &f.err) == NR_OK);
  int dw = nr_knob_space_find(&f.s, "rt.algo@conv_dw");
  CHECK(e.allowed[dw] == 0x2, "conv_dw keeps only direct: %llx",
        (unsigned long long)e.allowed[dw]);
  CHECK(e.allowed[0] == 1u << f.s.inst[0].dflt, "unnamed instances pinned to default");
  nr_route_expr_free(&e);
  REQUIRE(nr_route_expr_all(&e, &f.s, &f.err) == NR_OK);
  CHECK(nr_route_expr_count(&e) == 3ull * 4 * 2 * 3 * 4 * 3);
  nr_route_expr_free(&e);
  teardown(&f);
}

NR_TEST(route_expression_errors) {
  fixture f;
  REQUIRE(setup(&f), "%s", f.err.message);
  nr_route_expr e;
  nr_error err = {0};
  CHECK(nr_route_expr_parse(&e, &f.s, "-rt.algo@conv_dw=[im2col|winograd]", &err));
  CHECK(strstr(err.message, "'-rt.algo@conv_dw=[im2col|winograd]'") &&
        strstr(err.message, "auto|direct"), "%s", err.message);
  CHECK(e.allowed == NULL);
  CHECK(nr_route_expr_parse(&e, &f.s, "-rt.algo=[im2col|typo]", &err));
  CHECK(strstr(err.message, "typo") && strstr(err.message, "auto|direct|im2col|winograd"),
        "%s", err.message);
  CHECK(nr_route_expr_parse(&e, &f.s, "-rt.algo=[]", &err));
  CHECK(nr_route_expr_parse(&e, &f.s, "-rt.mode=[fast", &err));
  teardown(&f);
}

NR_TEST(route_expression_count_saturates) {
  nr_graph *g = nr_graph_create(NULL);
  for (int i = 0; i < 40; i++)
    add_node(g, "Conv", "");
  nr_error err = {0};
  nr_knob_space s;
  REQUIRE(nr_compiler_name_nodes(g, &err) == NR_OK);
  REQUIRE(nr_knob_space_build_tables(rt_tables, 2, g, false, &s, &err) == NR_OK);
  nr_route_expr e;
  REQUIRE(nr_route_expr_all(&e, &s, &err) == NR_OK);
  CHECK(nr_route_expr_count(&e) == UINT64_MAX, "4^40 * 3 saturates");
  nr_route_expr_free(&e);
  REQUIRE(nr_route_expr_parse(&e, &s, "-rt.algo@Conv_0=*", &err) == NR_OK);
  CHECK(nr_route_expr_count(&e) == 4);
  nr_route_expr_free(&e);
  nr_knob_space_free(&s);
  nr_graph_destroy(g);
}

NR_TEST(route_lookup_scales) {
  /* A BERT-sized space: thousands of instances, each found through the hash. */
  nr_graph *g = nr_graph_create(NULL);
  for (int i = 0; i < 4000; i++)
    add_node(g, i % 2 ? "MatMul" : "Conv", "");
  nr_error err = {0};
  nr_knob_space s;
  nr_route r;
  REQUIRE(nr_compiler_name_nodes(g, &err) == NR_OK);
  REQUIRE(nr_knob_space_build_tables(rt_tables, 2, g, false, &s, &err) == NR_OK);
  REQUIRE(s.n == 4001, "n=%d", s.n);
  REQUIRE(nr_route_init(&r, &s, &err) == NR_OK);
  REQUIRE(nr_route_parse(&r, "-rt.tile@MatMul_3999=4 -rt.algo@Conv_2=direct", &err) == NR_OK,
          "%s", err.message);
  int bad = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const char *want = i == 3999 ? "4" : i == 2 ? "direct" : i % 2 ? "1" : "auto";
    const char *v = nr_route_get_def(&r, i % 2 ? &rt_tables_b[0] : &rt_tables_a[1], &g->nodes[i]);
    bad += !v || strcmp(v, want);
  }
  CHECK(bad == 0, "%d lookups wrong", bad);
  nr_route_free(&r);
  nr_knob_space_free(&s);
  nr_graph_destroy(g);
}
