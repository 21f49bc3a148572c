/* test_gemm_sources.c - every GEMM tactic source (nnroute micro-kernels, OpenBLAS,
 * oneDNN matmul and inner product) through the whole compiler and runtime: a small
 * fully connected graph (Gemm with transB, bias, and a Relu that fuse.gemm_act folds
 * in) is built along a route pinning gemm.tactic to each valid value, run on a
 * context at 1, 2 and 3 threads (37 rows: onednn_matmul's unequal bands), and
 * compared with the reference executor on the unoptimized graph. The external
 * libraries must keep to a 1-thread engine's one thread (extlib.h). */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "graph_build.h"
#include "kernels/ref/executor.h"
#include "rng.h"
#include "unit.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int openblas_get_num_threads(void);

enum { MAX_M = 37, K = 37, N = 19 };

/* y = relu(x @ w^T + b), with x [m, K], w [N, K] and b [N] constant. */
static nr_graph *fc_graph(nr_test_state *t, int64_t m, float *w, float *b) {
  nr_graph *g = tg_graph(13);
  int x = tg_input(g, "x", 2, (int64_t[]){m, K});
  int wt = tg_borrowed(g, "w", 2, (int64_t[]){N, K}, w);
  int bt = tg_borrowed(g, "b", 1, (int64_t[]){N}, b);
  nr_attr tb = {.name = "transB", .type = NR_ATTR_INT, .i = 1};
  int h = tg_node_attrs(g, "Gemm", "fc", 3, (int[]){x, wt, bt}, 1, &tb);
  int y = tg_node(g, "Relu", "act", 1, &h);
  if (!tg_finish(t, g, y)) {
    nr_graph_destroy(g);
    return NULL;
  }
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

static float w[N * K], b[N], x[MAX_M * K];

static nr_graph *fc_model(nr_test_state *t, int64_t m, nr_value *want) {
  nr_rng rng = nr_rng_make(4242);
  for (int i = 0; i < N * K; i++)
    w[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int i = 0; i < N; i++)
    b[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int i = 0; i < MAX_M * K; i++)
    x[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  nr_graph *g = fc_graph(t, m, w, b);
  nr_error err = {0};
  nr_value in = {NR_DTYPE_FLOAT, 2, {m, K}, x, false};
  if (g && nr_ref_exec(g, &in, want, &err)) {
    nr_test_failf(t, __FILE__, __LINE__, "fc_model", " %s", err.message);
    nr_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* Builds g along `route` for `threads`, runs it and compares with want. */
static void run_route(nr_test_state *t, const nr_graph *g, const nr_knob_space *space,
                      const char *route, int64_t m, int threads, const nr_value *want) {
  nr_error err = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_context *ctx = NULL;
  if (nr_route_init(&r, space, &err) || nr_route_parse(&r, route, &err) ||
      nr_compile(g, &r, threads, NULL, &p, &err)) {
    nr_test_failf(t, __FILE__, __LINE__, "compile", " %s: %s", route, err.message);
    nr_route_free(&r);
    return;
  }
  nr_engine e = {.plan = p, .threads = threads};
  nr_buffer bin = {NR_DTYPE_FLOAT, 2, {m, K}, x}, out = {0};
  CHECK(!nr_context_create(&e, threads, &ctx, &err) && !nr_context_run(ctx, &bin, &out, &err),
        "%s on %d threads: %s", route, threads, err.message);
  if (out.data)
    CHECK(max_rel(out.data, want->data, (int)(m * N)) < 1e-4f,
          "%s, m %lld, %d threads: rel error %g", route, (long long)m, threads,
          max_rel(out.data, want->data, (int)(m * N)));
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  nr_plan_destroy(p);
  nr_route_free(&r);
}

NR_TEST(gemm_every_source_matches_reference) {
  static const struct { int64_t m; int threads; } runs[] = {{5, 2}, {37, 1}, {37, 2}, {37, 3}};
  for (size_t c = 0; c < sizeof runs / sizeof runs[0]; c++) {
    nr_value want = {0};
    nr_graph *g = fc_model(t, runs[c].m, &want);
    REQUIRE(g);
    nr_error err = {0};
    nr_knob_space space = {0};
    REQUIRE(nr_knob_space_build(g, &space, &err) == NR_OK, "%s", err.message);
    int k = nr_knob_space_find(&space, "gemm.tactic@fc");
    REQUIRE(k >= 0, "gemm.tactic@fc is not listed");
    bool saw_ip = false;
    for (int v = 0; v < space.inst[k].n_values; v++) {
      char text[256];
      snprintf(text, sizeof text, "-gemm.tactic@fc=%s", space.inst[k].values[v]);
      saw_ip |= !strcmp(space.inst[k].values[v], "onednn_inner_product");
      run_route(t, g, &space, text, runs[c].m, runs[c].threads, &want);
    }
    CHECK(saw_ip, "onednn_inner_product is not among the values of gemm.tactic@fc");
    nr_knob_space_free(&space);
    nr_value_free(&want);
    nr_graph_destroy(g);
  }
}

static int task_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

/* A 1-thread engine's oneDNN steps start no OpenMP worker and its OpenBLAS step runs
 * on one thread. Only meaningful in a process where no oneDNN step has run on more
 * threads yet (an existing OpenMP team would be reused), so ctest also runs this test
 * alone (tests/CMakeLists.txt, unit_extlib_threads). */
NR_TEST(extlib_one_thread_engine_uses_one_thread) {
  nr_value want = {0};
  nr_graph *g = fc_model(t, 37, &want);
  REQUIRE(g);
  nr_error err = {0};
  nr_knob_space space = {0};
  REQUIRE(nr_knob_space_build(g, &space, &err) == NR_OK, "%s", err.message);
  int before = task_count();
  REQUIRE(before > 0, "cannot read /proc/self/task");
  static const char *routes[] = {"-gemm.tactic@fc=onednn_matmul",
                                 "-gemm.tactic@fc=onednn_inner_product",
                                 "-gemm.tactic@fc=openblas_sgemm"};
  for (int i = 0; i < 3; i++) {
    run_route(t, g, &space, routes[i], 37, 1, &want);
    CHECK(task_count() == before, "%s on 1 thread: the process went from %d to %d threads",
          routes[i], before, task_count());
  }
  CHECK(openblas_get_num_threads() == 1, "openblas_sgemm on 1 thread left OpenBLAS at %d",
        openblas_get_num_threads());
  nr_knob_space_free(&space);
  nr_value_free(&want);
  nr_graph_destroy(g);
}
