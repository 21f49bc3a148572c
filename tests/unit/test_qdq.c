/* test_qdq.c - the qdq pass (src/passes/qdq.c) and every int8 convolution tactic on a
 * pre-quantized graph: x -> QuantizeLinear -> DequantizeLinear -> Conv, with weights
 * on an exact per-channel int8 grid. With precision@conv=int8 the pass must drop the
 * Q/DQ pair and hand the model's scale and zero point to the tactic, which then
 * computes the very products the reference executor computes in float: the outputs
 * agree to fp32 rounding (kernels that keep activations on 7 bits, oneDNN's without
 * VNNI among them, re-quantize the grid, and get the tolerance of one 7-bit step).
 * At fp32 the pair stays. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "kernels/cpu/onednn_q/onednn_q.h"
#include "kernels/ref/executor.h"
#include "plan/knob.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C = 8, O = 4, H = 6, W = 6, KH = 3 };

static int tensor(nr_graph *g, const char *name, unsigned flags, nr_dtype dt, int rank,
                  const int64_t *dims, void *data) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = (nr_value){dt, rank, {0}, data, false};
  for (int d = 0; d < rank; d++)
    g->tensors[t].value.dims[d] = dims[d];
  return t;
}

static void node(nr_graph *g, const char *name, const char *op, int n_in, const int *in,
                 int out, int n_attrs, const nr_attr *attrs) {
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
  n->inputs = malloc(sizeof(int) * (size_t)n_in);
  memcpy(n->inputs, in, sizeof(int) * (size_t)n_in);
  n->n_inputs = n_in;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = out;
  n->n_outputs = 1;
  n->attrs = calloc((size_t)n_attrs + 1, sizeof(nr_attr));
  for (int i = 0; i < n_attrs; i++)
    nr_attr_copy(&n->attrs[i], &attrs[i], NULL);
  n->n_attrs = n_attrs;
}

typedef struct qdq_data {
  float w[O * C * KH * KH], b[O], x[C * H * W], scale;
  uint8_t zp;
} qdq_data;

static nr_graph *qdq_graph(qdq_data *d) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int x = tensor(g, "x", NR_TENSOR_INPUT, NR_DTYPE_FLOAT, 4, (int64_t[]){1, C, H, W}, NULL);
  int s = tensor(g, "s", NR_TENSOR_CONST, NR_DTYPE_FLOAT, 0, NULL, &d->scale);
  int z = tensor(g, "z", NR_TENSOR_CONST, NR_DTYPE_UINT8, 0, NULL, &d->zp);
  int w = tensor(g, "w", NR_TENSOR_CONST, NR_DTYPE_FLOAT, 4, (int64_t[]){O, C, KH, KH}, d->w);
  int b = tensor(g, "b", NR_TENSOR_CONST, NR_DTYPE_FLOAT, 1, (int64_t[]){O}, d->b);
  int q = nr_graph_add_tensor(g, "xq", 0), dq = nr_graph_add_tensor(g, "xdq", 0);
  int y = nr_graph_add_tensor(g, "y", NR_TENSOR_OUTPUT);
  node(g, "q", "QuantizeLinear", 3, (int[]){x, s, z}, q, 0, NULL);
  node(g, "dq", "DequantizeLinear", 3, (int[]){q, s, z}, dq, 0, NULL);
  nr_attr pads = {.name = "pads", .type = NR_ATTR_INTS, .n = 4,
                  .ints = (int64_t[]){1, 1, 1, 1}};
  node(g, "conv", "Conv", 3, (int[]){dq, w, b}, y, 1, &pads);
  g->inputs = malloc(sizeof(int));
  g->inputs[g->n_inputs++] = x;
  g->outputs = malloc(sizeof(int));
  g->outputs[g->n_outputs++] = y;
  return g;
}

static void fill(qdq_data *d) {
  nr_rng rng = nr_rng_make(99);
  d->scale = 0.05f;
  d->zp = 128;
  for (int o = 0; o < O; o++) {
    float so = 0.01f * (float)(o + 1);
    for (int i = 0; i < C * KH * KH; i++) {
      int q = i == o ? (o & 1 ? -127 : 127) : (int)nr_rng_int(&rng, -127, 127);
      d->w[o * C * KH * KH + i] = so * (float)q;
    }
    d->b[o] = (float)nr_rng_int(&rng, 0, 199) / 100.0f - 1.0f;
  }
  for (int i = 0; i < C * H * W; i++)
    d->x[i] = (float)nr_rng_int(&rng, 0, 1399) / 100.0f - 7.0f; /* some beyond the grid */
}

/* Builds along route, runs, and returns the worst |got - want| / (|want| + 1e-3), or
 * for a kernel on 7-bit activations (*loose) the worst |got - want| / max |want|;
 * *plan_ok says whether the plan has the expected shape for the route. */
static float run_route(nr_test_state *t, nr_graph *g, nr_knob_space *space, const char *text,
                       const float *x, const float *want, bool int8, bool *loose) {
  nr_error err = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_context *ctx = NULL;
  float worst = INFINITY;
  if (nr_route_init(&r, space, &err) || nr_route_parse(&r, text, &err) ||
      nr_compile(g, &r, 2, NULL, &p, &err)) {
    nr_test_failf(t, __FILE__, __LINE__, "build", " %s: %s", text, err.message);
    nr_route_free(&r);
    return worst;
  }
  int quant_steps = 0, conv_prec = -1;
  *loose = false;
  for (int k = 0; k < p->n_steps; k++) {
    const nr_tactic *tc = p->steps[k].tactic;
    const char *op = p->steps[k].node >= 0 ? p->graph->nodes[p->steps[k].node].op_type : "";
    if (getenv("QDQ_DEBUG"))
      fprintf(stderr, "%s: step %d %s %s\n", text, k, op, tc->id);
    if (strstr(op, "uantizeLinear")) /* Q and DQ */
      quant_steps++;
    if (strstr(op, "Conv")) {
      conv_prec = (int)tc->precision;
      *loose = strstr(tc->id, "avx2") || strstr(tc->id, "portable") || strstr(tc->id, "u7") ||
               (strstr(tc->id, "onednn") && nr_onednn_q_act_qmax() < 255);
    }
  }
  CHECK(int8 ? quant_steps == 0 && conv_prec == NR_PREC_INT8
             : quant_steps == 2 && conv_prec == NR_PREC_FP32,
        "%s: %d quantize steps, conv precision %d", text, quant_steps, conv_prec);
  nr_engine e = {.plan = p, .threads = 2};
  nr_buffer in = {NR_DTYPE_FLOAT, 4, {1, C, H, W}, (void *)x}, out = {0};
  if (!nr_context_create(&e, 2, &ctx, &err) && !nr_context_run(ctx, &in, &out, &err)) {
    /* exact kernels: elementwise relative error; 7-bit ones: error over the output's
     * range (one 7-bit step of each of the 72 inputs moves an output near 0 by far more
     * than its own size) */
    float range = 0;
    for (int i = 0; i < O * H * W; i++)
      range = fabsf(want[i]) > range ? fabsf(want[i]) : range;
    worst = 0;
    for (int i = 0; i < O * H * W; i++) {
      float d = fabsf(((float *)out.data)[i] - want[i]) /
                (*loose ? range : fabsf(want[i]) + 1e-3f);
      worst = d > worst || d != d ? d : worst;
    }
  } else {
    nr_test_failf(t, __FILE__, __LINE__, "run", " %s: %s", text, err.message);
  }
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  nr_plan_destroy(p);
  nr_route_free(&r);
  return worst;
}

NR_TEST(qdq_conv_runs_the_models_grid_in_every_int8_tactic) {
  static qdq_data d;
  fill(&d);
  nr_graph *g = qdq_graph(&d);
  nr_error err = {0};
  REQUIRE(!nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
              !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err),
          "%s", err.message);
  nr_value in = {NR_DTYPE_FLOAT, 4, {1, C, H, W}, d.x, false}, want = {0};
  REQUIRE(nr_ref_exec(g, &in, &want, &err) == NR_OK, "%s", err.message);
  nr_knob_space space = {0};
  REQUIRE(nr_knob_space_build(g, &space, &err) == NR_OK, "%s", err.message);
  bool loose;
  float e = run_route(t, g, &space, "", d.x, want.data, false, &loose);
  CHECK(e < 1e-4f, "fp32: rel error %g", e);
  e = run_route(t, g, &space, "-precision@conv=int8", d.x, want.data, true, &loose);
  CHECK(e < (loose ? 0.05f : 1e-4f), "int8 default tactic: rel error %g", e);
  int k = nr_knob_space_find(&space, "conv.algo@conv");
  REQUIRE(k >= 0);
  int tried = 0;
  for (int v = 0; v < space.inst[k].n_values; v++) {
    char text[256];
    snprintf(text, sizeof text, "-precision@conv=int8 -conv.algo@conv=%s",
             space.inst[k].values[v]);
    nr_route r = {0};
    nr_plan *p = NULL;
    bool builds = !nr_route_init(&r, &space, &err) && !nr_route_parse(&r, text, &err) &&
                  !nr_compile(g, &r, 2, NULL, &p, &err) && p->ignored_knobs == 0;
    nr_plan_destroy(p);
    nr_route_free(&r);
    if (!builds) /* no int8 tactic of that algorithm: the knob was ignored or failed */
      continue;
    tried++;
    e = run_route(t, g, &space, text, d.x, want.data, true, &loose);
    CHECK(e < (loose ? 0.05f : 1e-4f), "%s: rel error %g", text, e);
  }
  CHECK(tried >= 1, "no conv.algo value has an int8 tactic");
  nr_knob_space_free(&space);
  nr_value_free(&want);
  for (int i = 0; i < g->n_tensors; i++)
    if (g->tensors[i].flags & NR_TENSOR_CONST)
      g->tensors[i].value.data = NULL; /* static storage */
  nr_graph_destroy(g);
}
