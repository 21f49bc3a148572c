/* gpu_harness.c - see gpu_harness.h: hand-built graphs compiled for CUDA and compared
 * with the reference executor. */
#include "gpu_harness.h"
#include "gpu_close.h"
#include "rng.h"

#include "backends/backend.h"
#include "compiler/compile.h"
#include "engine/engine.h"
#include "kernels/ref/executor.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xa5

gt_graph gt_new(int opset) {
  gt_graph b = {nr_graph_create(NULL)};
  nr_graph *g = b.g;
  g->opsets = calloc(2, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = opset;
  g->opsets[1].domain = strdup("nnroute");
  g->opsets[1].version = 1;
  g->n_opsets = 2;
  g->owns_opsets = true;
  return b;
}

static int add_tensor(gt_graph *b, const char *name, unsigned flags, nr_dtype dt, int rank,
                      const int64_t *dims) {
  int t = nr_graph_add_tensor(b->g, name, flags);
  nr_value *v = &b->g->tensors[t].value;
  v->dtype = dt;
  v->rank = rank;
  for (int d = 0; d < rank; d++)
    v->dims[d] = dims[d];
  return t;
}

int gt_input(gt_graph *b, const char *name, nr_dtype dt, int rank, const int64_t *dims) {
  int t = add_tensor(b, name, NR_TENSOR_INPUT, dt, rank, dims);
  nr_graph *g = b->g;
  g->inputs = realloc(g->inputs, sizeof(int) * (size_t)(g->n_inputs + 1));
  g->inputs[g->n_inputs++] = t;
  return t;
}

int gt_const(gt_graph *b, const char *name, nr_dtype dt, int rank, const int64_t *dims,
             const void *data) {
  int t = add_tensor(b, name, NR_TENSOR_CONST, dt, rank, dims);
  nr_value *v = &b->g->tensors[t].value;
  size_t n = nr_dtype_size(dt);
  for (int d = 0; d < rank; d++)
    n *= (size_t)dims[d];
  v->data = malloc(n ? n : 1);
  memcpy(v->data, data, n);
  v->owned = true;
  return t;
}

int gt_const_rand(gt_graph *b, const char *name, int rank, const int64_t *dims,
                  unsigned *seed, float lo, float hi) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  float *x = nr_rng_floats_u32(n, seed, lo, hi);
  int t = gt_const(b, name, NR_DTYPE_FLOAT, rank, dims, x);
  free(x);
  return t;
}

int gt_node(gt_graph *b, const char *op, const char *name, int n_in, const int *ins,
            int n_attrs, const nr_attr *attrs) {
  char out[256];
  snprintf(out, sizeof out, "%s_out", name);
  int y = nr_graph_add_tensor(b->g, out, 0);
  nr_node *n = nr_graph_add_node(b->g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = b->g->opsets[0].version;
  n->inputs = malloc(sizeof(int) * (size_t)(n_in + 1));
  memcpy(n->inputs, ins, sizeof(int) * (size_t)n_in);
  n->n_inputs = n_in;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = y;
  n->n_outputs = 1;
  n->attrs = calloc((size_t)n_attrs + 1, sizeof(nr_attr));
  for (int i = 0; i < n_attrs; i++)
    nr_attr_copy(&n->attrs[i], &attrs[i], NULL);
  n->n_attrs = n_attrs;
  return y;
}

bool gt_finish(nr_test_state *t, gt_graph *b, int n_out, const int *outs) {
  nr_graph *g = b->g;
  nr_error err = {0};
  g->outputs = malloc(sizeof(int) * (size_t)n_out);
  for (int i = 0; i < n_out; i++) {
    g->outputs[i] = outs[i];
    g->tensors[outs[i]].flags |= NR_TENSOR_OUTPUT;
  }
  g->n_outputs = n_out;
  nr_status st = nr_graph_toposort(g, &err);
  if (!st)
    st = nr_graph_bind_ops(g, &err);
  if (!st)
    st = nr_graph_infer(g, &err);
  if (!st)
    st = nr_compiler_name_nodes(g, &err);
  CHECK(!st, "building the test graph: %s", err.message);
  return !st;
}

nr_attr gt_i(const char *name, int64_t v) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INT, .i = v};
}
nr_attr gt_f(const char *name, float v) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_FLOAT, .f = v};
}
nr_attr gt_ints(const char *name, size_t n, const int64_t *v) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INTS, .n = n, .ints = (int64_t *)v};
}
nr_attr gt_s(const char *name, const char *v) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_STRING, .s = (char *)v,
                   .s_len = strlen(v)};
}

void gt_inputs_make(const gt_graph *b, unsigned seed, float lo, float hi, gt_inputs *in) {
  memset(in, 0, sizeof *in);
  const nr_graph *g = b->g;
  nr_rng rng = nr_rng_make(seed);
  for (int i = 0; i < g->n_inputs && i < 8; i++) {
    const nr_value *d = &g->tensors[g->inputs[i]].value;
    nr_value *v = &in->v[in->n++];
    nr_value_alloc(v, d->dtype, d->rank, d->dims, NULL);
    int64_t n = nr_value_count(v);
    for (int64_t k = 0; k < n; k++) {
      uint32_t r = nr_rng_u32(&rng);
      if (nr_dtype_is_float(d->dtype))
        nr_store_f64(d->dtype, v->data, k, lo + (hi - lo) * (double)(r % 100000) / 1e5);
      else if (d->dtype == NR_DTYPE_BOOL)
        nr_store_i64(d->dtype, v->data, k, (int64_t)(r % 4 != 0));
      else
        nr_store_i64(d->dtype, v->data, k, (int64_t)(r % (unsigned)(hi > 1 ? hi : 2)));
    }
  }
}

void gt_inputs_free(gt_inputs *in) {
  for (int i = 0; i < in->n; i++)
    nr_value_free(&in->v[i]);
  in->n = 0;
}

void gt_free(gt_graph *b) {
  nr_graph_destroy(b->g);
  b->g = NULL;
}

/* ---- the check -------------------------------------------------------------------- */

static bool plan_has_one(const nr_plan *p, const char *want, size_t len) {
  for (int k = 0; k < p->n_steps; k++) {
    for (const char *at = p->steps[k].tactic->id; *at; at++)
      if (!strncmp(at, want, len))
        return true;
  }
  return false;
}

/* Every comma-separated substring of want names some step's tactic; one written
 * !substring names none. */
static bool plan_has(const nr_plan *p, const char *want) {
  for (const char *w = want; *w;) {
    size_t len = strcspn(w, ",");
    bool no = len && w[0] == '!';
    if (len > no && plan_has_one(p, w + no, len - no) == no)
      return false;
    w += len + (w[len] == ',');
  }
  return true;
}

static void plan_tactics(const nr_plan *p, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = '\0';
  for (int k = 0; k < p->n_steps && n + 1 < cap; k++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? " " : "", p->steps[k].tactic->id);
}

/* Worst gt_excess over the elements (gpu_close.h: a NaN or infinity that the reference
 * does not have is INFINITY, never NaN), and where it is. */
static double worst_ratio(const float *got, const nr_value *want, double atol, double rtol,
                          int64_t *at) {
  double worst = 0;
  int64_t n = nr_value_count(want);
  for (int64_t i = 0; i < n; i++) {
    double r = gt_excess(got[i], nr_load_f64(want->dtype, want->data, i), atol, rtol);
    if (r > worst) {
      worst = r;
      *at = i;
    }
  }
  return worst;
}

/* Output buffers inside guarded allocations; the context writes in place. */
static void *guarded(size_t n) {
  uint8_t *p = malloc(n + 2 * GUARD);
  memset(p, GUARD_BYTE, n + 2 * GUARD);
  return p + GUARD;
}

static bool guards_ok(void *data, size_t n) {
  uint8_t *p = (uint8_t *)data - GUARD;
  for (size_t i = 0; i < GUARD; i++)
    if (p[i] != GUARD_BYTE || p[GUARD + n + i] != GUARD_BYTE)
      return false;
  return true;
}

static void compare_run(nr_test_state *t, const nr_plan *p, nr_buffer *outs,
                        const nr_value *want, double atol, double rtol, const char *what) {
  for (int o = 0; o < p->n_outputs; o++) {
    size_t n = nr_dtype_size(want[o].dtype) * (size_t)nr_value_count(&want[o]);
    CHECK(guards_ok(outs[o].data, n), "%s: output %d: guard bytes overwritten", what, o);
    if (want[o].dtype != NR_DTYPE_FLOAT) {
      CHECK(!memcmp(outs[o].data, want[o].data, n), "%s: output %d differs", what, o);
      continue;
    }
    int64_t at = 0;
    double r = worst_ratio(outs[o].data, &want[o], atol, rtol, &at);
    CHECK(r <= 1.0, "%s: output %d: %.3g of the tolerance at element %lld (got %.8g, "
          "want %.8g)", what, o, r, (long long)at, ((float *)outs[o].data)[at],
          nr_load_f64(want[o].dtype, want[o].data, at));
  }
}

static nr_status compile_cuda(const nr_graph *g, const char *route, nr_plan **p,
                              nr_error *err) {
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_status st = nr_knob_space_build_for(g, NR_DEVICE_CUDA, &space, err);
  if (!st)
    st = nr_route_init(&r, &space, err);
  if (!st && route && *route)
    st = nr_route_parse(&r, route, err);
  if (!st)
    st = nr_compile(g, &r, 1, NULL, p, err);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  return st;
}

void gt_check(nr_test_state *t, const gt_graph *b, const gt_inputs *in, const char *route,
              double atol, double rtol, const char *want_tactic, unsigned seed) {
  const nr_graph *g = b->g;
  nr_error err = {0};
  nr_value want[8] = {0};
  char what[512];
  snprintf(what, sizeof what, "route '%s' seed=%u", route ? route : "", seed);
  REQUIRE(g->n_outputs <= 8);
  REQUIRE(!nr_ref_exec(g, in->v, want, &err), "%s: reference: %s", what, err.message);
  nr_engine *e = calloc(1, sizeof *e);
  nr_status st = compile_cuda(g, route, &e->plan, &err);
  CHECK(!st, "%s: build: %s", what, err.message);
  nr_context *ctx = NULL;
  nr_buffer ins[8], outs[8];
  if (!st) {
    char tactics[1024];
    plan_tactics(e->plan, tactics, sizeof tactics);
    CHECK(!want_tactic || plan_has(e->plan, want_tactic), "%s: no %s step in [%s]", what,
          want_tactic, tactics);
    for (int k = 0; k < e->plan->n_steps; k++)
      CHECK(e->plan->steps[k].tactic->device == NR_DEVICE_CUDA, "%s: step %d runs %s", what,
            k, e->plan->steps[k].tactic->id);
    nr_fingerprint_current_for(&e->fingerprint, NR_DEVICE_CUDA);
    e->threads = 1;
    st = nr_context_create(e, 1, &ctx, &err);
    CHECK(!st, "%s: context: %s", what, err.message);
  }
  for (int i = 0; i < in->n; i++) {
    ins[i] = (nr_buffer){in->v[i].dtype, in->v[i].rank, {0}, in->v[i].data};
    memcpy(ins[i].dims, in->v[i].dims, sizeof ins[i].dims);
  }
  for (int o = 0; !st && o < g->n_outputs; o++) {
    outs[o] = (nr_buffer){want[o].dtype, want[o].rank, {0}, NULL};
    memcpy(outs[o].dims, want[o].dims, sizeof outs[o].dims);
    outs[o].data = guarded(nr_dtype_size(want[o].dtype) * (size_t)nr_value_count(&want[o]));
  }
  for (int run = 0; !st && run < 3; run++) { /* run 1 captures, run 2 replays */
    char label[600];
    snprintf(label, sizeof label, "%s run %d", what, run);
    st = nr_context_run(ctx, ins, outs, &err);
    CHECK(!st, "%s: %s", label, err.message);
    if (!st)
      compare_run(t, e->plan, outs, want, atol, rtol, label);
  }
  for (int o = 0; e->plan && ctx && o < g->n_outputs; o++)
    free((uint8_t *)outs[o].data - GUARD);
  nr_context_destroy(ctx);
  nr_engine_free(e);
  for (int o = 0; o < g->n_outputs; o++)
    nr_value_free(&want[o]);
}
