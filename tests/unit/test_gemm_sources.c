/* test_gemm_sources.c - every GEMM tactic source (nnroute micro-kernels, OpenBLAS,
 * oneDNN matmul and inner product) through the whole compiler and runtime: a small
 * fully connected graph (Gemm with transB, bias, and a Relu that fuse.gemm_act folds
 * in) is built along a route pinning gemm.tactic to each valid value, run on a
 * context, and compared with the reference executor on the unoptimized graph. */
#include "engine/engine.h"
#include "kernels/ref/executor.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { M = 5, K = 37, N = 19 };

static int tensor(nr_graph *g, const char *name, unsigned flags, int rank,
                  const int64_t *dims, void *data) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, rank, {0}, data, false};
  memcpy(g->tensors[t].value.dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

static void node(nr_graph *g, const char *name, const char *op, int n_in, const int *in,
                 int out, const nr_attr *attr) {
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
  if (attr) {
    n->attrs = calloc(1, sizeof(nr_attr));
    nr_attr_copy(&n->attrs[0], attr, NULL);
    n->n_attrs = 1;
  }
}

/* y = relu(x @ w^T + b), with w [N, K] and b [N] constant. */
static nr_graph *fc_graph(float *w, float *b) {
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int x = tensor(g, "x", NR_TENSOR_INPUT, 2, (int64_t[]){M, K}, NULL);
  int wt = tensor(g, "w", NR_TENSOR_CONST, 2, (int64_t[]){N, K}, w);
  int bt = tensor(g, "b", NR_TENSOR_CONST, 1, (int64_t[]){N}, b);
  int h = nr_graph_add_tensor(g, "h", 0), y = nr_graph_add_tensor(g, "y", NR_TENSOR_OUTPUT);
  nr_attr tb = {.name = "transB", .type = NR_ATTR_INT, .i = 1};
  node(g, "fc", "Gemm", 3, (int[]){x, wt, bt}, h, &tb);
  node(g, "act", "Relu", 1, (int[]){h}, y, NULL);
  g->inputs = malloc(sizeof(int));
  g->inputs[g->n_inputs++] = x;
  g->outputs = malloc(sizeof(int));
  g->outputs[g->n_outputs++] = y;
  return g;
}

static float max_rel(const float *got, const float *want, int n) {
  float worst = 0;
  for (int i = 0; i < n; i++) {
    float d = fabsf(got[i] - want[i]) / (fabsf(want[i]) + 1e-3f);
    if (!(d <= worst))
      worst = d;
  }
  return worst;
}

NR_TEST(gemm_every_source_matches_reference) {
  static float w[N * K], b[N], x[M * K];
  unsigned seed = 4242;
  for (int i = 0; i < N * K; i++)
    w[i] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
  for (int i = 0; i < N; i++)
    b[i] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
  for (int i = 0; i < M * K; i++)
    x[i] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
  nr_graph *g = fc_graph(w, b);
  nr_error err = {0};
  REQUIRE(!nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
              !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err),
          "%s", err.message);
  nr_value in = {NR_DTYPE_FLOAT, 2, {M, K}, x, false}, want = {0};
  REQUIRE(nr_ref_exec(g, &in, &want, &err) == NR_OK, "%s", err.message);
  nr_knob_space space = {0};
  REQUIRE(nr_knob_space_build(g, &space, &err) == NR_OK, "%s", err.message);
  int k = nr_knob_space_find(&space, "gemm.tactic@fc");
  REQUIRE(k >= 0, "gemm.tactic@fc is not listed");
  bool saw_ip = false;
  for (int v = 0; v < space.inst[k].n_values; v++) {
    char text[256];
    snprintf(text, sizeof text, "-gemm.tactic@fc=%s", space.inst[k].values[v]);
    saw_ip |= !strcmp(space.inst[k].values[v], "onednn_inner_product");
    nr_route r = {0};
    nr_plan *p = NULL;
    nr_context *ctx = NULL;
    REQUIRE(!nr_route_init(&r, &space, &err) && !nr_route_parse(&r, text, &err) &&
                !nr_compile(g, &r, 2, NULL, &p, &err),
            "%s: %s", text, err.message);
    nr_engine e = {.plan = p, .threads = 2};
    nr_buffer bin = {NR_DTYPE_FLOAT, 2, {M, K}, x}, out = {0};
    CHECK(!nr_context_create(&e, 2, &ctx, &err) && !nr_context_run(ctx, &bin, &out, &err),
          "%s: %s", text, err.message);
    if (out.data)
      CHECK(max_rel(out.data, want.data, M * N) < 1e-4f, "%s: rel error %g", text,
            max_rel(out.data, want.data, M * N));
    nr_buffer_free(&out);
    nr_context_destroy(ctx);
    nr_plan_destroy(p);
    nr_route_free(&r);
  }
  CHECK(saw_ip, "onednn_inner_product is not among the values of gemm.tactic@fc");
  nr_knob_space_free(&space);
  nr_value_free(&want);
  for (int t = 0; t < g->n_tensors; t++)
    if (g->tensors[t].flags & NR_TENSOR_CONST)
      g->tensors[t].value.data = NULL; /* static storage */
  nr_graph_destroy(g);
}
