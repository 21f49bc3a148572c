/* test_engine_trust.c - engine files as a trust boundary: a step edited behind a valid
 * checksum is refused at load with a message naming the step and the field, never run.
 * Each case edits one field of a compiled tiny_cnn engine (Conv, MaxPool, BN, Gemm),
 * serializes it (the serializer computes the checksum) and parses it back; the
 * random structure-aware campaign is test_engine_tamper.c. */
#include "engine/engine.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"

static nr_engine *build_tiny(nr_test_state *t, const char *route) {
  nr_model *m = NULL;
  nr_engine *e = NULL;
  nr_error err = {0};
  nr_build_options o = {sizeof o, route, 1, NR_DEVICE_CPU, NULL};
  if (nr_model_load(TINY_CNN, NULL, &m, &err) || nr_engine_build(m, &o, &e, &err))
    nr_test_failf(t, __FILE__, __LINE__, "build tiny_cnn", "%s", err.message);
  nr_model_destroy(m);
  return e;
}

/* The first step whose node is of op type op, or -1. */
static int step_of(const nr_engine *e, const char *op) {
  const nr_plan *p = e->plan;
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].node >= 0 && strstr(p->graph->nodes[p->steps[k].node].op_type, op))
      return k;
  return -1;
}

/* Serializes e (checksum recomputed) and parses the bytes; the status, message in err. */
static nr_status reload(const nr_engine *e, nr_error *err) {
  uint8_t *data = NULL;
  size_t len = 0;
  nr_engine *back = NULL;
  nr_status st = nr_engine_serialize(e, &data, &len, err);
  if (!st)
    st = nr_engine_parse(data, len, true, &back, err);
  nr_engine_free(back);
  free(data);
  return st;
}

NR_TEST(engine_trust_untouched_engine_loads) {
  nr_engine *e = build_tiny(t, "");
  REQUIRE(e);
  nr_error err = {0};
  CHECK(reload(e, &err) == NR_OK, "%s", err.message);
  nr_engine_free(e);
}

/* The known crash: GEMM's n edited in the params record made `nnroute run` SIGSEGV. */
NR_TEST(engine_trust_gemm_params_edit_is_refused) {
  nr_engine *e = build_tiny(t, "");
  REQUIRE(e);
  int k = step_of(e, "Gemm");
  REQUIRE(k >= 0, "tiny_cnn has a Gemm step");
  nr_gemm_step_params p;
  memcpy(&p, e->plan->steps[k].params, sizeof p);
  static const int64_t deltas[] = {1000, -1, 1};
  for (int i = 0; i < 3; i++) {
    nr_gemm_step_params q = p;
    q.n += deltas[i];
    memcpy(e->plan->steps[k].params, &q, sizeof q);
    nr_error err = {0};
    CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "params.m/n/k") &&
              strstr(err.message, e->plan->steps[k].tactic->id),
          "n %+lld: %s", (long long)deltas[i], err.message);
  }
  nr_gemm_step_params q = p;
  q.cfg.ukernel = (uint16_t)(q.cfg.ukernel + 1);
  memcpy(e->plan->steps[k].params, &q, sizeof q);
  nr_error err = {0};
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL, "ukernel edit: %s", err.message);
  memcpy(e->plan->steps[k].params, &p, sizeof p);
  e->plan->steps[k].scratch = 0;
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "scratch"),
        "scratch 0: %s", err.message);
  nr_engine_free(e);
}

/* A step on the reference tactic with node -1 reached a->node->def->run (NULL). */
NR_TEST(engine_trust_node_edits_are_refused) {
  nr_engine *e = build_tiny(t, "");
  REQUIRE(e);
  nr_plan *p = e->plan;
  nr_step saved = p->steps[0];
  p->steps[0].tactic = nr_tactic_find("ref");
  p->steps[0].node = -1;
  nr_error err = {0};
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "step 0"),
        "ref, node -1: %s", err.message);
  p->steps[0] = saved;
  int g = step_of(e, "Gemm"), c = step_of(e, "Conv");
  REQUIRE(g >= 0 && c >= 0 && g != c);
  /* The Gemm's tactic on the Conv's node. */
  int gnode = p->steps[g].node;
  p->steps[g].node = p->steps[c].node;
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "does not run"),
        "gemm tactic on a conv node: %s", err.message);
  p->steps[g].node = gnode;
  CHECK(reload(e, &err) == NR_OK, "restored: %s", err.message);
  nr_engine_free(e);
}

/* Slots: a step reading another tensor than its node's, an output shape the op does
 * not give, an input made absent. */
NR_TEST(engine_trust_slot_edits_are_refused) {
  nr_engine *e = build_tiny(t, "");
  REQUIRE(e);
  nr_plan *p = e->plan;
  int g = step_of(e, "Gemm");
  REQUIRE(g >= 0);
  nr_step *st = &p->steps[g];
  nr_error err = {0};
  int in0 = st->in[0];
  st->in[0] = st->out[0];
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "input"),
        "input 0 names the output slot: %s", err.message);
  st->in[0] = -1;
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "absent"),
        "input 0 absent: %s", err.message);
  st->in[0] = in0;
  nr_slot *y = &p->slots[st->out[0]];
  int64_t d = y->dims[y->rank - 1];
  y->dims[y->rank - 1] = d - 1;
  CHECK(reload(e, &err) == NR_ERR_INVALID_MODEL && strstr(err.message, "shape"),
        "output dim edited: %s", err.message);
  y->dims[y->rank - 1] = d;
  CHECK(reload(e, &err) == NR_OK, "restored: %s", err.message);
  nr_engine_free(e);
}
