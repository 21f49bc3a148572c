/* test_weights.c - the weights pass (src/compiler/weights.c): constants that every
 * reader packed at build are left out of the weights (NR_SLOT_ABSORBED), everything
 * still computes the reference's answer, engines with absorbed constants survive a
 * save and load, a file in which a step without packed data reads an absorbed
 * constant is refused by name, and one that marks a constant absorbed that its reader
 * still reads raw runs on zeros instead of a NULL pointer.
 *
 * The graph: x [1,8,12,12] -> Conv (W 16x8x3x3, bias) -> Relu -> Flatten -> Gemm
 * (W2 1600x10, bias) -> y. The conv's and the product's weights are packed by the
 * default tactics; `-conv.algo@*=onednn` reads the conv's raw W at run time, so it
 * must keep it. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "graph_build.h"
#include "kernels/ref/executor.h"
#include "rng.h"

#include <math.h>

typedef struct wnet {
  nr_graph *g;
  float x[8 * 12 * 12];
} wnet;

static int const_tensor(nr_graph *g, const char *name, int rank, const int64_t *dims,
                        nr_rng *r) {
  int t = nr_graph_add_tensor(g, name, NR_TENSOR_CONST);
  nr_value *v = &g->tensors[t].value;
  if (nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL))
    return -1;
  float *f = v->data;
  for (size_t i = 0; i < nr_value_nbytes(v) / sizeof(float); i++)
    f[i] = (float)nr_rng_int(r, -1000, 1000) / 4000.0f;
  return t;
}

static bool wnet_make(nr_test_state *t, wnet *n) {
  nr_rng rng = nr_rng_make(7);
  nr_graph *g = n->g = tg_graph(13);
  g->name = strdup("wnet");
  int x = tg_input(g, "x", 4, (int64_t[]){1, 8, 12, 12});
  int w = const_tensor(g, "W", 4, (int64_t[]){16, 8, 3, 3}, &rng);
  int b = const_tensor(g, "B", 1, (int64_t[]){16}, &rng);
  int w2 = const_tensor(g, "W2", 2, (int64_t[]){1600, 10}, &rng);
  int b2 = const_tensor(g, "B2", 1, (int64_t[]){10}, &rng);
  if (w < 0 || b < 0 || w2 < 0 || b2 < 0)
    return false;
  int c = tg_node(g, "Conv", "conv", 3, (int[]){x, w, b});
  int r = tg_node(g, "Relu", "relu", 1, (int[]){c});
  int f = tg_node(g, "Flatten", "flat", 1, (int[]){r});
  int y = tg_node(g, "Gemm", "fc", 3, (int[]){f, w2, b2});
  for (size_t i = 0; i < sizeof n->x / sizeof *n->x; i++)
    n->x[i] = (float)nr_rng_int(&rng, -1000, 1000) / 1000.0f;
  return tg_finish(t, g, y);
}

static const nr_slot *slot_named(const nr_plan *p, const char *name) {
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].name && !strcmp(p->slots[i].name, name))
      return &p->slots[i];
  return NULL;
}

static nr_plan *compile(nr_test_state *t, const nr_graph *g, const char *text) {
  nr_error err = {0};
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_status st = nr_knob_space_build(g, &space, &err);
  if (!st)
    st = nr_route_init(&r, &space, &err);
  if (!st && text)
    st = nr_route_parse(&r, text, &err);
  if (!st)
    st = nr_compile(g, &r, 1, NULL, &p, &err);
  CHECK(!st, "%s: %s", text ? text : "default", err.message);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  return p;
}

/* Runs engine e on x into y[10]; false (and a failure) when it cannot. */
static bool run(nr_test_state *t, const nr_engine *e, const float *x, float *y) {
  nr_error err = {0};
  nr_context *ctx = NULL;
  nr_buffer in = {NR_DTYPE_FLOAT, 4, {1, 8, 12, 12}, (void *)x}, out = {0};
  bool ok = !nr_context_create(e, 1, &ctx, &err) && !nr_context_run(ctx, &in, &out, &err);
  CHECK(ok, "%s", err.message);
  if (ok)
    memcpy(y, out.data, sizeof(float) * 10);
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  return ok;
}

static float max_rel(const float *a, const float *b, int n) {
  float m = 0;
  for (int i = 0; i < n; i++) {
    float d = fabsf(a[i] - b[i]) / (fabsf(b[i]) > 1e-3f ? fabsf(b[i]) : 1e-3f);
    m = d > m ? d : m;
  }
  return m;
}

static bool reference(nr_test_state *t, const wnet *n, float *y) {
  nr_error err = {0};
  nr_value in = {NR_DTYPE_FLOAT, 4, {1, 8, 12, 12}, (void *)n->x, false}, out = {0};
  nr_status st = nr_ref_exec(n->g, &in, &out, &err);
  CHECK(!st, "reference: %s", err.message);
  if (!st)
    memcpy(y, out.data, sizeof(float) * 10);
  nr_value_free(&out);
  return !st;
}

static void engine_init(nr_engine *e, nr_plan *p) {
  memset(e, 0, sizeof *e);
  e->plan = p;
  e->threads = 1;
  nr_fingerprint_current(&e->fingerprint);
  snprintf(e->nnroute_version, sizeof e->nnroute_version, "%s", NR_VERSION_STRING);
  nr_knob_schema(e->knob_schema);
}

NR_TEST(weights_packed_constants_are_not_stored_twice) {
  wnet n;
  REQUIRE(wnet_make(t, &n));
  float want[10], got[10], raw[10];
  REQUIRE(reference(t, &n, want));
  nr_plan *p = compile(t, n.g, NULL);
  nr_plan *q = compile(t, n.g, "-conv.algo@*=onednn");
  REQUIRE(p && q);
  const nr_slot *w = slot_named(p, "W"), *w2 = slot_named(p, "W2");
  REQUIRE(w && w2);
  CHECK(w->kind == NR_SLOT_ABSORBED, "W has kind %d", (int)w->kind);
  CHECK(w2->kind == NR_SLOT_ABSORBED, "W2 has kind %d", (int)w2->kind);
  uint64_t packed = 0;
  for (int k = 0; k < p->n_steps; k++)
    packed += p->steps[k].packed_size;
  /* packed data plus the few constants still read raw (the conv's bias), not W's
   * 4.6 KB and W2's 64 KB once more */
  CHECK(p->weights_size < packed + w->nbytes / 2, "weights %llu, packed %llu",
        (unsigned long long)p->weights_size, (unsigned long long)packed);
  const nr_slot *qw = slot_named(q, "W");
  REQUIRE(qw);
  CHECK(qw->kind == NR_SLOT_CONST && qw->offset + qw->nbytes <= q->weights_size,
        "with conv.algo=onednn W must stay in the weights (kind %d)", (int)qw->kind);
  nr_engine e, f;
  engine_init(&e, p);
  engine_init(&f, q);
  if (run(t, &e, n.x, got) && run(t, &f, n.x, raw)) {
    CHECK(max_rel(got, want, 10) < 1e-4f, "default: %g", max_rel(got, want, 10));
    CHECK(max_rel(raw, want, 10) < 1e-4f, "onednn: %g", max_rel(raw, want, 10));
  }
  nr_plan_destroy(p);
  nr_plan_destroy(q);
  nr_graph_destroy(n.g);
}

NR_TEST(weights_absorbed_constants_survive_save_and_load) {
  wnet n;
  REQUIRE(wnet_make(t, &n));
  nr_plan *p = compile(t, n.g, NULL);
  REQUIRE(p);
  nr_engine e;
  engine_init(&e, p);
  nr_error err = {0};
  uint8_t *data = NULL;
  size_t len = 0;
  REQUIRE(!nr_engine_serialize(&e, &data, &len, &err), "%s", err.message);
  CHECK(len < p->weights_size + 16384, "file %zu bytes, weights %llu", len,
        (unsigned long long)p->weights_size);
  nr_engine *back = NULL;
  REQUIRE(!nr_engine_parse(data, len, true, &back, &err), "%s", err.message);
  const nr_slot *w = slot_named(back->plan, "W");
  REQUIRE(w);
  CHECK(w->kind == NR_SLOT_ABSORBED && !w->data);
  int wt = nr_graph_find_tensor(back->plan->graph, "W");
  REQUIRE(wt >= 0);
  CHECK((back->plan->graph->tensors[wt].flags & NR_TENSOR_CONST) &&
        !back->plan->graph->tensors[wt].value.data, "the loaded W must have no bytes");
  float a[10], b[10];
  if (run(t, &e, n.x, a) && run(t, back, n.x, b))
    CHECK(!memcmp(a, b, sizeof a), "the loaded engine computes something else");
  uint8_t *again = NULL;
  size_t len2 = 0;
  CHECK(!nr_engine_serialize(back, &again, &len2, &err) && len2 == len &&
        !memcmp(again, data, len), "a loaded engine must serialize to the same bytes");
  free(again);
  nr_engine_free(back);
  free(data);
  nr_plan_destroy(p);
  nr_graph_destroy(n.g);
}

NR_TEST(weights_absorbed_constant_read_without_packed_data_is_refused) {
  wnet n;
  REQUIRE(wnet_make(t, &n));
  nr_plan *p = compile(t, n.g, NULL);
  REQUIRE(p);
  int k = 0;
  while (k < p->n_steps && p->steps[k].absorbed == 0)
    k++;
  REQUIRE(k < p->n_steps, "no step absorbed a constant");
  uint64_t keep = p->steps[k].packed_size;
  p->steps[k].packed_size = 0; /* what a tampered file would say */
  nr_engine e;
  engine_init(&e, p);
  nr_error err = {0};
  uint8_t *data = NULL;
  size_t len = 0;
  REQUIRE(!nr_engine_serialize(&e, &data, &len, &err), "%s", err.message);
  nr_engine *back = NULL;
  CHECK(nr_engine_parse(data, len, true, &back, &err) != NR_OK && !back);
  CHECK(strstr(err.message, "reads absorbed constant slot"), "%s", err.message);
  p->steps[k].packed_size = keep;
  free(data);
  nr_plan_destroy(p);
  nr_graph_destroy(n.g);
}

/* A file that marks a constant absorbed although its reader still reads it raw (here
 * the conv's bias, which the igemm/pointwise kernels read from the slot) must not make
 * the run dereference NULL: the context hands such a slot zeros. */
NR_TEST(weights_tampered_absorbed_slot_reads_zeros) {
  wnet n;
  REQUIRE(wnet_make(t, &n));
  nr_plan *p = compile(t, n.g, NULL);
  REQUIRE(p);
  nr_slot *b = NULL;
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].name && !strcmp(p->slots[i].name, "B"))
      b = &p->slots[i];
  REQUIRE(b && b->kind == NR_SLOT_CONST);
  b->kind = NR_SLOT_ABSORBED;
  b->offset = 0;
  nr_engine e;
  engine_init(&e, p);
  float y[10];
  CHECK(run(t, &e, n.x, y), "the run must complete");
  for (int i = 0; i < 10; i++)
    CHECK(isfinite(y[i]), "y[%d] = %g", i, y[i]);
  nr_plan_destroy(p);
  nr_graph_destroy(n.g);
}
