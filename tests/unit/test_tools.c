/* test_tools.c - the tools API (src/api/nnroute_tools.h) against the records it
 * summarizes: knob lists equal the knob space row by row and their routes are the
 * route parser's, the engine summary and step rows equal the plan, and the plan hash
 * tells different plans apart. Built on examples/tiny_cnn (Conv, MaxPool, BN, Gemm). */
#include "api/nnroute_tools.h"
#include "engine/engine.h"
#include "plan/route.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"

static nr_model *load_tiny(nr_test_state *t) {
  nr_model *m = NULL;
  nr_error err = {0};
  if (nr_model_load(TINY_CNN, NULL, &m, &err))
    nr_test_failf(t, __FILE__, __LINE__, "load", "%s", err.message);
  return m;
}

NR_TEST(tools_knob_list_is_the_knob_space) {
  nr_model *m = load_tiny(t);
  REQUIRE(m, "tiny_cnn loads");
  nr_error err = {0};
  nr_knob_list l = {0};
  REQUIRE(!nr_knob_list_build(m, NULL, &l, &err), "%s", err.message);
  nr_knob_space s = {0};
  REQUIRE(!nr_knob_space_build(nr_model_graph(m), &s, &err), "%s", err.message);
  CHECK(l.n == s.n && l.n > 0, "%d rows, %d instances", l.n, s.n);
  for (int i = 0; i < l.n && i < s.n; i++) {
    const nr_knob_info *k = &l.knobs[i];
    const nr_knob_inst *in = &s.inst[i];
    CHECK(!strcmp(k->id, in->id) && !strcmp(k->name, in->def->name), "row %d: %s", i, k->id);
    CHECK(k->n_values == in->n_values && k->dflt == in->dflt, "row %d values", i);
    CHECK((k->flags & 0xffffu) == (in->def->flags & 0xffffu), "row %d flags", i);
    CHECK(!(k->flags & NR_KNOB_INFO_SETS_PRECISION) ==
              (in->def->restricts != NR_RESTRICTS_PRECISION),
          "row %d: sets-precision flag", i);
    CHECK(!(k->flags & NR_KNOB_INFO_NARROWS_TACTIC) ==
              (in->def->restricts == NR_RESTRICTS_NONE ||
               in->def->restricts == NR_RESTRICTS_PRECISION),
          "row %d: narrows-tactic flag", i);
    CHECK(k->global == (in->def->scope == NR_KNOB_GLOBAL), "row %d scope", i);
    CHECK(k->n_def_values >= k->n_values, "row %d: %d definition values", i,
          k->n_def_values);
    for (int v = 0; v < k->n_values; v++) {
      CHECK(!strcmp(k->values[v], in->values[v]), "row %d value %d", i, v);
      int d = 0; /* the value's index in its definition */
      while (d < k->n_def_values && strcmp(k->def_values[d], k->values[v]))
        d++;
      CHECK(nr_knob_info_value_bound(k, v) ==
                (v == k->dflt ? 0 : nr_knob_value_bound(in->def, d)),
            "row %d value %d: bound %g", i, v, nr_knob_info_value_bound(k, v));
    }
    CHECK(!k->def_bounds == !in->def->value_bounds, "row %d: bounds per value", i);
  }
  nr_knob_space_free(&s);
  nr_knob_list_free(&l);
  nr_knob_list_free(&l); /* freeing twice is a no-op */
  nr_model_destroy(m);
}

NR_TEST(tools_routes_are_canonical_and_errors_name_the_token) {
  nr_model *m = load_tiny(t);
  REQUIRE(m, "tiny_cnn loads");
  nr_error err = {0};
  nr_knob_list l = {0};
  REQUIRE(!nr_knob_list_build(m, NULL, &l, &err), "%s", err.message);
  char *text = NULL;
  REQUIRE(!nr_knob_list_canonical(&l, "-memory.align=4096 -memory.plan=naive", &text, &err),
          "%s", err.message);
  CHECK(!strcmp(text, "-memory.plan=naive -memory.align=4096"), "canonical '%s'", text);
  free(text);
  REQUIRE(!nr_knob_list_canonical(&l, "-memory.plan=greedy_size", &text, &err), "%s",
          err.message);
  CHECK(!strcmp(text, ""), "a default value is the default route: '%s'", text);
  free(text);
  CHECK(nr_knob_list_canonical(&l, "-memory.plan=bogus", &text, &err) &&
            strstr(err.message, "bogus") && strstr(err.message, "greedy_size"),
        "error '%s'", err.message);
  int *choice = calloc((size_t)l.n, sizeof *choice);
  uint64_t *allowed = calloc((size_t)l.n, sizeof *allowed);
  REQUIRE(choice && allowed, "memory");
  REQUIRE(!nr_knob_list_parse_route(&l, "-conv.algo@*=onednn", choice, &err), "%s",
          err.message);
  int convs = nr_knob_list_changes(&l, choice);
  CHECK(convs >= 3, "onednn on every Conv: %d changes", convs);
  REQUIRE(!nr_knob_list_parse_expr(&l, "-memory.plan=*", allowed, &err), "%s", err.message);
  for (int i = 0; i < l.n; i++) {
    const nr_knob_info *k = &l.knobs[i];
    uint64_t want = !strcmp(k->id, "memory.plan") ? (1ull << k->n_values) - 1
                                                  : 1ull << k->dflt;
    CHECK(allowed[i] == want, "%s allows %llx", k->id, (unsigned long long)allowed[i]);
  }
  free(allowed);
  free(choice);
  nr_knob_list defs = {0};
  CHECK(nr_knob_list_parse_route(&defs, "", NULL, &err) == NR_ERR_INVALID_ARGUMENT,
        "an empty list has no routes");
  nr_knob_list_free(&l);
  nr_model_destroy(m);
}

NR_TEST(tools_definitions_filter_devices_and_scopes) {
  nr_error err = {0};
  nr_knob_list all = {0}, cpu_node = {0};
  nr_knob_list_options o = {.size = sizeof o, .all_devices = true};
  REQUIRE(!nr_knob_list_definitions(&o, &all, &err), "%s", err.message);
  o = (nr_knob_list_options){.size = sizeof o, .device = NR_DEVICE_CPU, .node_only = true};
  REQUIRE(!nr_knob_list_definitions(&o, &cpu_node, &err), "%s", err.message);
  CHECK(cpu_node.n > 0 && cpu_node.n < all.n, "%d of %d", cpu_node.n, all.n);
  bool cuda = false;
  for (int i = 0; i < all.n; i++)
    cuda |= !strncmp(all.knobs[i].name, "cuda.", 5);
  CHECK(cuda, "every device's definitions include cuda.*");
  for (int i = 0; i < cpu_node.n; i++) {
    const nr_knob_info *k = &cpu_node.knobs[i];
    CHECK(!k->global && strncmp(k->name, "cuda.", 5), "%s is a CPU per-node knob", k->name);
    CHECK(k->values == k->def_values && k->n_values == k->n_def_values, "%s", k->name);
    CHECK(!strcmp(k->values[k->dflt], nr_knob_find(k->name)->dflt), "%s default", k->name);
  }
  nr_knob_list_free(&all);
  nr_knob_list_free(&cpu_node);
}

NR_TEST(tools_engine_summary_and_steps_are_the_plan) {
  nr_model *m = load_tiny(t);
  REQUIRE(m, "tiny_cnn loads");
  nr_error err = {0};
  nr_engine *e = NULL, *e2 = NULL;
  nr_build_options o = {sizeof o, "", 1, NR_DEVICE_CPU, NULL};
  REQUIRE(!nr_engine_build(m, &o, &e, &err), "%s", err.message);
  const nr_plan *p = e->plan;
  nr_engine_summary s = {sizeof s};
  REQUIRE(!nr_engine_summarize(e, &s, &err), "%s", err.message);
  CHECK(s.n_steps == p->n_steps && s.arena_bytes == p->arena_size &&
            s.weights_bytes == p->weights_size && s.scratch_bytes == p->scratch_size,
        "sizes");
  CHECK(!strcmp(s.route, "") && s.device == NR_DEVICE_CPU && s.threads == e->threads,
        "route '%s'", s.route);
  CHECK(!strcmp(s.knob_schema, e->knob_schema) && !*s.calib_sha256, "schema, calibration");
  int refs = 0;
  for (int k = 0; k < p->n_steps; k++) {
    nr_step_detail st = {sizeof st};
    REQUIRE(!nr_engine_step(e, k, &st), "step %d", k);
    const nr_step *ps = &p->steps[k];
    CHECK(!strcmp(st.tactic, ps->tactic->id) && st.node == ps->node, "step %d", k);
    CHECK(st.node < 0 || !strcmp(st.node_name, p->graph->nodes[ps->node].name), "step %d", k);
    refs += (st.flags & NR_STEP_INFO_REFERENCE) != 0;
    CHECK(!(st.flags & NR_STEP_INFO_FUSED) || !strncmp(st.op_type, "Fused", 5),
          "step %d: %s", k, st.op_type);
    nr_slot_info out = {sizeof out};
    REQUIRE(!nr_engine_step_output(e, k, 0, &out), "step %d output", k);
    CHECK(out.nbytes == p->slots[ps->out[0]].nbytes && !strcmp(out.name, p->slots[ps->out[0]].name),
          "step %d output", k);
    CHECK(nr_engine_step_output(e, k, ps->n_out, &out) == NR_ERR_INVALID_ARGUMENT,
          "step %d: no output %d", k, ps->n_out);
  }
  CHECK(refs == s.reference_steps, "%d reference steps, summary %d", refs, s.reference_steps);
  nr_step_detail none = {sizeof none};
  CHECK(nr_engine_step(e, p->n_steps, &none) == NR_ERR_INVALID_ARGUMENT, "past the end");
  nr_environment env = {sizeof env};
  REQUIRE(!nr_engine_environment(e, &env), "environment");
  CHECK(!strcmp(env.cpu_model, e->fingerprint.cpu_model) && env.cores == e->fingerprint.cores,
        "environment");
  uint64_t h = nr_engine_plan_hash(e);
  CHECK(h && h == nr_engine_plan_hash(e), "the hash is a function of the plan");
  nr_build_options o2 = {sizeof o2, "-memory.plan=naive", 1, NR_DEVICE_CPU, NULL};
  REQUIRE(!nr_engine_build(m, &o2, &e2, &err), "%s", err.message);
  CHECK(nr_engine_plan_hash(e2) != h, "another memory plan, another hash");
  nr_engine_destroy(e2);
  nr_context *ctx = NULL;
  REQUIRE(!nr_context_create(e, 1, &ctx, &err), "%s", err.message);
  CHECK(!nr_context_device(ctx), "a CPU context has no device timer");
  nr_context_destroy(ctx);
  nr_engine_destroy(e);
  nr_model_destroy(m);
}
