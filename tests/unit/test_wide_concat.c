/* test_wide_concat.c - steps with many inputs: a Concat of 24 and of 64 inputs (the
 * dense blocks of DenseNet concatenate dozens) builds, survives an engine round trip
 * through bytes and runs to the reference executor's result; one above
 * NR_STEP_MAX_IO is refused by name, and an engine whose step record claims more
 * inputs than that is refused on load before the count is used. */
#include "engine/engine.h"
#include "graph_build.h"
#include "kernels/ref/executor.h"
#include "plan/knob_internal.h"
#include "rng.h"
#include "unit.h"
#include "util/sha256.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x_k [1, 2, 3, 5] for k < n, concatenated along the channels (each through a Relu, so
 * the Concat reads computed tensors as a dense block does). */
static nr_graph *concat_graph(nr_test_state *t, int n) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 2, 3, 5};
  int *ins = malloc(sizeof(int) * (size_t)n);
  for (int k = 0; k < n; k++) {
    char name[32];
    snprintf(name, sizeof name, "x%d", k);
    int x = tg_input(g, name, 4, xd);
    snprintf(name, sizeof name, "relu%d", k);
    ins[k] = tg_node(g, "Relu", name, 1, &x);
  }
  int y = tg_node(g, "Concat", "concat", n, ins);
  nr_pu_set_attr_int(g, g->n_nodes - 1, "axis", 1, NULL);
  free(ins);
  return tg_finish(t, g, y) ? g : NULL;
}

static nr_engine *wrap(nr_plan *p) {
  nr_engine *e = calloc(1, sizeof *e);
  e->plan = p;
  e->threads = 1;
  nr_fingerprint_current(&e->fingerprint);
  strcpy(e->nnroute_version, NR_VERSION_STRING);
  nr_knob_schema(e->knob_schema);
  nr_sha256("wide concat", 11, e->model_sha256);
  return e;
}

static void check_concat(nr_test_state *t, int n) {
  nr_graph *g = concat_graph(t, n);
  REQUIRE(g, "graph");
  nr_error err = {0};
  nr_value *in = calloc((size_t)n, sizeof *in), want = {0};
  nr_buffer *bin = calloc((size_t)n, sizeof *bin), out = {0};
  nr_rng r = nr_rng_make((uint64_t)n);
  int64_t xd[4] = {1, 2, 3, 5};
  for (int k = 0; k < n; k++) {
    nr_value_alloc(&in[k], NR_DTYPE_FLOAT, 4, xd, NULL);
    nr_rng_fill(&r, in[k].data, 30, -1, 1);
    bin[k] = (nr_buffer){NR_DTYPE_FLOAT, 4, {1, 2, 3, 5}, in[k].data};
  }
  REQUIRE(!nr_ref_exec(g, in, &want, &err), "reference: %s", err.message);
  tg_built b;
  REQUIRE(!tg_compile(g, "", 1, NULL, &b, &err), "%d inputs: %s", n, err.message);
  nr_engine *e = wrap(b.plan), *f = NULL;
  b.plan = NULL;
  uint8_t *bytes = NULL;
  size_t len = 0;
  REQUIRE(!nr_engine_serialize(e, &bytes, &len, &err), "save: %s", err.message);
  REQUIRE(!nr_engine_parse(bytes, len, true, &f, &err), "load: %s", err.message);
  bool wide = false;
  for (int k = 0; k < f->plan->n_steps; k++)
    wide |= f->plan->steps[k].n_in == n;
  CHECK(wide, "no step with %d inputs after the round trip", n);
  nr_context *ctx = NULL;
  REQUIRE(!nr_context_create(f, 1, &ctx, &err), "%s", err.message);
  CHECK(!nr_context_run(ctx, bin, &out, &err), "run: %s", err.message);
  CHECK(out.data && !memcmp(out.data, want.data, nr_value_nbytes(&want)),
        "%d inputs: engine and reference differ", n);
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  free(bytes);
  nr_engine_free(e);
  nr_engine_free(f);
  tg_built_free(&b);
  for (int k = 0; k < n; k++)
    nr_value_free(&in[k]);
  free(in);
  free(bin);
  nr_value_free(&want);
  nr_graph_destroy(g);
}

NR_TEST(wide_concat_24_and_64_inputs) {
  check_concat(t, 24);
  check_concat(t, 64);
}

/* Above the bound the shape rules refuse the node by name (so neither the compiler
 * nor an engine ever sees it). */
NR_TEST(wide_concat_over_the_bound_is_refused) {
  nr_graph *g = tg_graph(13);
  int64_t xd[2] = {1, 2};
  int ins[NR_STEP_MAX_IO + 1];
  for (int k = 0; k <= NR_STEP_MAX_IO; k++) {
    char name[32];
    snprintf(name, sizeof name, "x%d", k);
    ins[k] = tg_input(g, name, 2, xd);
  }
  int y = tg_node(g, "Concat", "concat", NR_STEP_MAX_IO + 1, ins);
  nr_pu_set_attr_int(g, g->n_nodes - 1, "axis", 1, NULL);
  g->outputs = malloc(sizeof(int));
  g->outputs[0] = y;
  g->n_outputs = 1;
  nr_error err = {0};
  nr_status st = nr_graph_toposort(g, &err);
  if (!st)
    st = nr_graph_bind_ops(g, &err);
  if (!st)
    st = nr_graph_infer(g, &err);
  CHECK(st == NR_ERR_UNSUPPORTED && strstr(err.message, "'concat'") &&
            strstr(err.message, "at most 128"), "%d: %s", st, err.message);
  nr_graph_destroy(g);
}

/* An engine whose step record claims more inputs than a step may have is refused on
 * load, naming the step, before the count sizes anything. */
NR_TEST(wide_concat_engine_count_is_bounded) {
  nr_graph *g = concat_graph(t, 3);
  REQUIRE(g, "graph");
  nr_error err = {0};
  tg_built b;
  REQUIRE(!tg_compile(g, "", 1, NULL, &b, &err), "%s", err.message);
  nr_engine *e = wrap(b.plan), *f = NULL;
  b.plan = NULL;
  int k = 0;
  while (k < e->plan->n_steps && e->plan->steps[k].n_in != 3)
    k++;
  REQUIRE(k < e->plan->n_steps, "no Concat step");
  uint8_t *bytes = NULL;
  size_t len = 0;
  REQUIRE(!nr_engine_serialize(e, &bytes, &len, &err), "%s", err.message);
  /* the step record: u32 id length, id, i32 node, u32 n_in (= 3), u32 n_out (= 1) */
  const char *id = e->plan->steps[k].tactic->id;
  size_t idl = strlen(id), at = 0;
  for (size_t i = 0; i + idl + 16 <= len && !at; i++) {
    uint32_t l, n_in, n_out;
    int32_t node;
    memcpy(&l, bytes + i, 4);
    memcpy(&node, bytes + i + 4 + idl, 4);
    memcpy(&n_in, bytes + i + 8 + idl, 4);
    memcpy(&n_out, bytes + i + 12 + idl, 4);
    if (l == idl && !memcmp(bytes + i + 4, id, idl) && node == e->plan->steps[k].node &&
        n_in == 3 && n_out == 1)
      at = i + 8 + idl;
  }
  REQUIRE(at, "step record not found");
  uint32_t big = NR_STEP_MAX_IO + 1;
  memcpy(bytes + at, &big, 4);
  nr_sha256(bytes, len - 32, bytes + len - 32); /* so the count reaches the parser */
  nr_status st = nr_engine_parse(bytes, len, false, &f, &err);
  CHECK(st == NR_ERR_INVALID_MODEL && strstr(err.message, "at most"), "%d: %s", st,
        err.message);
  nr_engine_free(f);
  free(bytes);
  nr_engine_free(e);
  tg_built_free(&b);
  nr_graph_destroy(g);
}
