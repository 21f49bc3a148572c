/* test_knob_use.c - ignored knob values as data: the route's record of how a build
 * reads it (route.h, knob use), the plan's copy of it (ignored values, the canonical
 * route without them) through the tools API, and the plan summary check-knobs
 * compares. The tuner's side is test_tune_same.c.
 *
 * Built on examples/tiny_cnn (three Conv, two MaxPool, a global pool and a Gemm):
 * conv.algo=direct with conv.layout=nhwc is a restriction no tactic satisfies (no
 * direct convolution runs NHWC), and gemm.epilogue / gemm.prepack steer only the
 * nnroute GEMM kernels, so with gemm.tactic=openblas_sgemm nothing reads them. */
#include "api/nnroute_tools.h"
#include "engine/engine.h"
#include "passes/pass_knobs.h"
#include "plan/compile_knobs.h"
#include "plan/route.h"
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"
#define CONV0 "/0/Conv"
#define GEMM "/13/Gemm"

static nr_model *load_tiny(nr_test_state *t) {
  nr_model *m = NULL;
  nr_error err = {0};
  if (nr_model_load(TINY_CNN, NULL, &m, &err) || nr_model_prepare(m, &err))
    nr_test_failf(t, __FILE__, __LINE__, "load", "%s", err.message);
  return m;
}

static nr_engine *build(nr_test_state *t, nr_model *m, const char *route, int threads) {
  nr_engine *e = NULL;
  nr_error err = {0};
  nr_build_options o = {sizeof o, route, threads, NR_DEVICE_CPU, NULL};
  if (nr_engine_build(m, &o, &e, &err))
    nr_test_failf(t, __FILE__, __LINE__, "build", "'%s': %s", route, err.message);
  return e;
}

static const nr_node *node_named(const nr_graph *g, const char *name) {
  for (int k = 0; k < g->n_nodes; k++)
    if (!strcmp(g->nodes[k].name, name))
      return &g->nodes[k];
  return NULL;
}

/* ---- the route's record ------------------------------------------------------------ */

/* Reads mark READ; a text read of a non-default value and an nr_route_is whose answer
 * differs from the default's mark EFFECTIVE; a peek marks only READ until the reader
 * says the value acted; an instance nobody reads stays unmarked and counts as ignored
 * when set. */
NR_TEST(knob_use_route_records_reads) {
  nr_model *m = load_tiny(t);
  REQUIRE(m);
  nr_graph *g = nr_model_graph(m);
  nr_error err = {0};
  nr_knob_space s = {0};
  nr_route r = {0};
  REQUIRE(!nr_knob_space_build(g, &s, &err) && !nr_route_init(&r, &s, &err), "%s",
          err.message);
  REQUIRE(!nr_route_parse(&r,
                          "-memory.plan=naive -memory.views=off -memory.align=4096 "
                          "-conv.layout@" CONV0 "=nhwc -reduce.reassoc=on",
                          &err),
          "%s", err.message);
  REQUIRE(!nr_route_track(&r, &err), "%s", err.message);
  const nr_knob_def *plan = nr_knob_def_of(NR_KNOB_MEMORY_PLAN);
  const nr_knob_def *views = nr_knob_def_of(NR_KNOB_MEMORY_VIEWS);
  const nr_knob_def *sel = nr_knob_def_of(NR_KNOB_COMPILE_TACTIC_SELECTION);
  const nr_knob_def *align = nr_knob_def_of(NR_KNOB_MEMORY_ALIGN);
  const nr_knob_def *layout = nr_knob_find("conv.layout");
  const nr_node *conv = node_named(g, CONV0);
  REQUIRE(plan && views && sel && align && layout && conv);
  CHECK(nr_route_use(&r, plan, NULL) == 0, "nothing read yet");

  CHECK(!strcmp(nr_route_get(&r, NR_KNOB_MEMORY_PLAN, NULL), "naive"));
  CHECK(nr_route_use(&r, plan, NULL) == (NR_ROUTE_READ | NR_ROUTE_EFFECTIVE));
  /* default "on": asking "is it on?" of "off" answers otherwise than the default */
  CHECK(!nr_route_is(&r, NR_KNOB_MEMORY_VIEWS, NULL, "on"));
  CHECK(nr_route_use(&r, views, NULL) == (NR_ROUTE_READ | NR_ROUTE_EFFECTIVE));
  /* a default value read: READ only */
  CHECK(!nr_route_is(&r, NR_KNOB_COMPILE_TACTIC_SELECTION, NULL, "profile"));
  CHECK(nr_route_use(&r, sel, NULL) == NR_ROUTE_READ);
  /* 4096 asked "is it 256?": the default 64 answers no as well */
  CHECK(!nr_route_is(&r, NR_KNOB_MEMORY_ALIGN, NULL, "256"));
  CHECK(nr_route_use(&r, align, NULL) == NR_ROUTE_READ, "same answer as the default");
  /* a peek, then the reader acts on it */
  CHECK(!strcmp(nr_route_peek_def(&r, layout, conv), "nhwc"));
  CHECK(nr_route_use(&r, layout, conv) == NR_ROUTE_READ);
  int li = nr_knob_space_find(&s, "conv.layout@" CONV0);
  int ai = nr_knob_space_find(&s, "memory.align");
  int ri = nr_knob_space_find(&s, "reduce.reassoc");
  REQUIRE(li >= 0 && ai >= 0 && ri >= 0);
  CHECK(nr_route_ignored(&r, li) && nr_route_ignored(&r, ai), "read without effect");
  CHECK(nr_route_ignored(&r, ri), "set and never read: ignored");
  nr_route_mark_effective(&r, layout, conv);
  CHECK(nr_route_use(&r, layout, conv) == (NR_ROUTE_READ | NR_ROUTE_EFFECTIVE));
  CHECK(!nr_route_ignored(&r, li));
  /* a copy is another route: it records nothing of the original's reads */
  nr_route c = {0};
  REQUIRE(!nr_route_copy(&c, &r, &err));
  CHECK(!c.use && nr_route_use(&c, plan, NULL) == 0);
  nr_route_free(&c);
  nr_route_free(&r);
  nr_knob_space_free(&s);
  nr_model_destroy(m);
}

/* ---- the build's record through the tools API --------------------------------------- */

static uint8_t use_of(const nr_knob_list *l, const uint8_t *use, const char *id) {
  int i = nr_knob_list_find(l, id);
  return i >= 0 ? use[i] : 0xff;
}

NR_TEST(knob_use_build_reports_ignored_values) {
  nr_model *m = load_tiny(t);
  REQUIRE(m);
  const char *route = "-conv.algo@" CONV0 "=direct -conv.layout@" CONV0
                      "=nhwc "
                      "-gemm.tactic@" GEMM "=openblas_sgemm -gemm.epilogue@" GEMM
                      "=separate";
  nr_engine *e = build(t, m, route, 1);
  REQUIRE(e);
  nr_engine_summary s = {sizeof s};
  nr_error err = {0};
  REQUIRE(!nr_engine_summarize(e, &s, &err), "%s", err.message);
  CHECK(s.ignored_knobs == 2, "%d ignored: %s", s.ignored_knobs, s.ignored);
  CHECK(!strcmp(s.ignored, "-conv.layout@" CONV0 "=nhwc -gemm.epilogue@" GEMM "=separate"),
        "ignored '%s'", s.ignored);
  CHECK(!strcmp(s.effective_route,
                "-conv.algo@" CONV0 "=direct -gemm.tactic@" GEMM "=openblas_sgemm"),
        "effective '%s'", s.effective_route);
  CHECK(strstr(s.route, "conv.layout") && strstr(s.route, "gemm.epilogue"),
        "the engine keeps the route it was asked for: '%s'", s.route);

  nr_knob_list l = {0};
  REQUIRE(!nr_knob_list_build(m, NULL, &l, &err), "%s", err.message);
  uint8_t *use = calloc((size_t)l.n, 1);
  REQUIRE(use && !nr_engine_knob_use(e, &l, use, &err), "%s", err.message);
  CHECK(use_of(&l, use, "conv.algo@" CONV0) ==
        (NR_KNOB_USE_READ | NR_KNOB_USE_EFFECTIVE | NR_KNOB_USE_SET));
  CHECK(use_of(&l, use, "conv.layout@" CONV0) == (NR_KNOB_USE_READ | NR_KNOB_USE_SET),
        "read, skipped: %u", use_of(&l, use, "conv.layout@" CONV0));
  CHECK(use_of(&l, use, "gemm.epilogue@" GEMM) == NR_KNOB_USE_SET,
        "the OpenBLAS step never reads it: %u", use_of(&l, use, "gemm.epilogue@" GEMM));
  CHECK(use_of(&l, use, "memory.plan") == NR_KNOB_USE_READ, "default, read");

  /* The route without the ignored values builds the same plan, by meaning and even by
   * bytes; one value that acts (the layout without the algorithm) another. */
  nr_engine *e2 = build(t, m, s.effective_route, 1);
  nr_engine *e3 = build(t, m, "-conv.layout@" CONV0 "=nhwc", 1);
  REQUIRE(e2 && e3);
  char *a = nr_engine_plan_summary(e), *b = nr_engine_plan_summary(e2);
  char *c = nr_engine_plan_summary(e3);
  REQUIRE(a && b && c);
  CHECK(!strcmp(a, b), "ignored values changed the summary");
  CHECK(nr_engine_plan_hash(e) == nr_engine_plan_hash(e2));
  CHECK(strcmp(a, c) && strstr(c, "nhwc"), "a value that acts changes the summary");
  free(a), free(b), free(c);
  nr_engine_destroy(e3);
  nr_engine_destroy(e2);

  /* A loaded engine has no record. */
  char path[] = "/tmp/nr_knob_use_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  nr_engine *loaded = NULL;
  REQUIRE(!nr_engine_save(e, path, &err) && !nr_engine_load(path, NULL, &loaded, &err),
          "%s", err.message);
  CHECK(nr_engine_knob_use(loaded, &l, use, &err) == NR_ERR_INVALID_ARGUMENT);
  nr_engine_summary ls = {sizeof ls};
  CHECK(!nr_engine_summarize(loaded, &ls, &err) && !*ls.ignored && ls.ignored_knobs == 0);
  nr_engine_destroy(loaded);
  unlink(path);
  free(use);
  nr_knob_list_free(&l);
  nr_engine_destroy(e);
  nr_model_destroy(m);
}

/* ---- the plan summary -------------------------------------------------------------- */

/* Renaming nodes changes the plan's bytes, not what it does; a value that changes the
 * memory plan, a layout or a fused op changes the summary. */
NR_TEST(knob_use_plan_summary_is_by_meaning) {
  nr_model *m = load_tiny(t), *m2 = load_tiny(t);
  REQUIRE(m && m2);
  nr_graph *g2 = nr_model_graph(m2);
  for (int k = 0; k < g2->n_nodes; k++) { /* other names, same graph */
    char name[64];
    snprintf(name, sizeof name, "renamed_%d", k);
    free(g2->nodes[k].name);
    g2->nodes[k].name = strdup(name);
  }
  nr_engine *e = build(t, m, "", 1), *e2 = build(t, m2, "", 1);
  nr_engine *naive = build(t, m, "-memory.plan=naive", 1);
  nr_engine *nofuse = build(t, m, "-fuse.conv_act@" CONV0 "=none", 1);
  nr_engine *split = build(t, m, "-gemm.threads@" GEMM "=n", 1);
  REQUIRE(e && e2 && naive && nofuse && split);
  char *a = nr_engine_plan_summary(e), *b = nr_engine_plan_summary(e2);
  char *c = nr_engine_plan_summary(naive), *d = nr_engine_plan_summary(nofuse);
  char *f = nr_engine_plan_summary(split);
  REQUIRE(a && b && c && d && f);
  /* The nnroute GEMM step describes the fields its kernel reads, by name. */
  CHECK(strstr(a, "params{op=") && strstr(a, " kc=") && strstr(a, " split="),
        "the GEMM tactic's describe hook: %s", a);
  CHECK(strcmp(a, f), "a thread split the kernel reads changes the summary");
  CHECK(nr_engine_plan_hash(e) != nr_engine_plan_hash(e2),
        "names are in the plan's bytes");
  CHECK(!strcmp(a, b), "names are not in what the plan does");
  CHECK(strcmp(a, c), "another memory plan, another summary");
  CHECK(strcmp(a, d) && strstr(a, "nnroute:FusedConv"), "a fused op is in it");
  CHECK(!strstr(a, CONV0) && !strstr(a, GEMM), "no node names in it");
  free(a), free(b), free(c), free(d), free(f);
  nr_engine_destroy(split);
  nr_engine_destroy(nofuse);
  nr_engine_destroy(naive);
  nr_engine_destroy(e2);
  nr_engine_destroy(e);
  nr_model_destroy(m2);
  nr_model_destroy(m);
}
