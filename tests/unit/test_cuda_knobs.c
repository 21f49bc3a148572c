/* test_cuda_knobs.c - what the CUDA backend's foundation does without a GPU: knob
 * spaces per device (CUDA rows only in CUDA spaces, the CPU kernels' rows only in CPU
 * spaces, graph-pass knobs in both), the schema hash covering the device masks, the
 * route parser's message for a knob of the other device, the select pass keeping only
 * the build's device's tactics, and the refusals (building a CUDA engine where the
 * backend or the GPU is missing, loading one whose GPU fields differ).
 *
 * These run in CI, which has nvcc but no GPU: with the backend built (NR_HAVE_CUDA)
 * the refusal is "no usable GPU", without it "built without the CUDA backend"; both
 * are checked for being the right one. tests/gpu/ runs everything that needs a GPU. */
#include "unit.h"

#include "backends/backend.h"
#include "compiler/compile.h"
#include "engine/engine_internal.h"
#include "kernels/ref/executor.h"
#include "plan/knob_internal.h"

#include <stdlib.h>
#include <string.h>

/* x [1,4,8,8] -> Conv(w [8,4,3,3] const) -> Relu -> Flatten -> Gemm(wf [512,10]). */
typedef struct small_net {
  nr_graph *g;
  float *w, *wf;
} small_net;

static int tensor(nr_graph *g, const char *name, unsigned flags, int rank, const int64_t *d,
                  void *data) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, rank, {0}, data, false};
  memcpy(g->tensors[t].value.dims, d, sizeof(int64_t) * (size_t)rank);
  return t;
}

static void node(nr_graph *g, const char *name, const char *op, int n_in, const int *in,
                 int out) {
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
}

static bool small_net_make(nr_test_state *t, small_net *s, bool relu_only) {
  s->w = calloc(8 * 4 * 9, sizeof(float));
  s->wf = calloc(512 * 10, sizeof(float));
  nr_graph *g = s->g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int x = tensor(g, "x", NR_TENSOR_INPUT, 4, (int64_t[]){1, 4, 8, 8}, NULL), y;
  if (relu_only) {
    y = nr_graph_add_tensor(g, "y", NR_TENSOR_OUTPUT);
    node(g, "relu", "Relu", 1, (int[]){x}, y);
  } else {
    int w = tensor(g, "w", NR_TENSOR_CONST, 4, (int64_t[]){8, 4, 3, 3}, s->w);
    int wf = tensor(g, "wf", NR_TENSOR_CONST, 2, (int64_t[]){512, 10}, s->wf);
    int c = nr_graph_add_tensor(g, "c", 0), r = nr_graph_add_tensor(g, "r", 0);
    int f = nr_graph_add_tensor(g, "f", 0);
    y = nr_graph_add_tensor(g, "y", NR_TENSOR_OUTPUT);
    node(g, "conv", "Conv", 2, (int[]){x, w}, c);
    nr_node *cn = &g->nodes[g->n_nodes - 1];
    cn->attrs = calloc(1, sizeof(nr_attr));
    cn->attrs[0] = (nr_attr){.name = strdup("pads"), .type = NR_ATTR_INTS, .n = 4,
                             .ints = calloc(4, sizeof(int64_t))};
    for (int i = 0; i < 4; i++)
      cn->attrs[0].ints[i] = 1;
    cn->n_attrs = 1;
    node(g, "relu", "Relu", 1, (int[]){c}, r);
    node(g, "flat", "Flatten", 1, (int[]){r}, f);
    node(g, "fc", "MatMul", 2, (int[]){f, wf}, y);
  }
  g->inputs = malloc(sizeof(int));
  g->inputs[g->n_inputs++] = x;
  g->outputs = malloc(sizeof(int));
  g->outputs[g->n_outputs++] = y;
  nr_error err = {0};
  bool ok = !nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
            !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err);
  CHECK(ok, "building the test graph: %s", err.message);
  return ok;
}

static void small_net_free(small_net *s) {
  for (int t = 0; s->g && t < s->g->n_tensors; t++)
    if (s->g->tensors[t].flags & NR_TENSOR_CONST)
      s->g->tensors[t].value.data = NULL; /* ours */
  nr_graph_destroy(s->g);
  free(s->w);
  free(s->wf);
}

static bool has(const nr_knob_space *s, const char *id) {
  return nr_knob_space_find(s, id) >= 0;
}

/* ---- knob spaces -------------------------------------------------------------------- */

NR_TEST(cuda_knobs_spaces_per_device) {
  small_net net;
  REQUIRE(small_net_make(t, &net, false));
  nr_error err = {0};
  nr_knob_space cpu, cuda;
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CPU, &cpu, &err), "%s", err.message);
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CUDA, &cuda, &err), "%s", err.message);
  CHECK(cpu.device == NR_DEVICE_CPU && cuda.device == NR_DEVICE_CUDA);
  /* the CUDA family */
  CHECK(has(&cuda, "cuda.precision@conv") && has(&cuda, "cuda.precision@fc"));
  CHECK(has(&cuda, "cuda.conv.algo@conv") && has(&cuda, "cuda.conv.layout@conv"));
  CHECK(has(&cuda, "cuda.gemm.tactic@fc") && has(&cuda, "cuda.gemm.algo@fc"));
  CHECK(has(&cuda, "cuda.graphs") && has(&cuda, "cuda.workspace"));
  CHECK(!has(&cuda, "cuda.conv.algo@fc") && !has(&cuda, "cuda.gemm.tactic@conv"));
  for (int i = 0; i < cpu.n; i++)
    CHECK(strncmp(cpu.inst[i].id, "cuda.", 5), "CPU space lists %s", cpu.inst[i].id);
  /* the CPU kernels' families are absent from CUDA spaces, the passes' are shared */
  CHECK(has(&cpu, "conv.algo@conv") && !has(&cuda, "conv.algo@conv"));
  CHECK(has(&cpu, "precision@conv") && !has(&cuda, "precision@conv"));
  for (int i = 0; i < cuda.n; i++)
    CHECK(nr_knob_devices(cuda.inst[i].def) & NR_KNOB_DEVICE(NR_DEVICE_CUDA),
          "%s", cuda.inst[i].id);
  int shared = 0;
  for (int i = 0; i < cpu.n; i++)
    if (nr_knob_devices(cpu.inst[i].def) & NR_KNOB_DEVICE(NR_DEVICE_CUDA)) {
      shared++;
      CHECK(has(&cuda, cpu.inst[i].id), "shared knob %s missing from the CUDA space",
            cpu.inst[i].id);
    }
  CHECK(shared > 0, "no knob is shared between the devices");
  /* FFT/Winograd are offered for a 3x3 stride-1 single-group convolution */
  int k = nr_knob_space_find(&cuda, "cuda.conv.algo@conv");
  REQUIRE(k >= 0);
  CHECK(nr_knob_value_index(&cuda.inst[k], "winograd") >= 0 &&
        nr_knob_value_index(&cuda.inst[k], "fft") >= 0);
  nr_knob_space_free(&cpu);
  nr_knob_space_free(&cuda);
  small_net_free(&net);
}

static const nr_knob_def dev_table[] = {
    {"dv.any", "a|b", "a", NR_KNOB_GLOBAL, 0, 0, "every device"},
    {"dv.cpu", "a|b", "a", NR_KNOB_GLOBAL, 0, 0, "cpu only", NULL, NULL,
     NR_KNOB_DEVICE(NR_DEVICE_CPU)},
    {"dv.gpu", "a|b", "a", NR_KNOB_GLOBAL, 0, 0, "cuda only", NULL, NULL,
     NR_KNOB_DEVICE(NR_DEVICE_CUDA)},
    {0},
};

NR_TEST(cuda_knobs_device_mask_filters_and_hashes) {
  const nr_knob_def *const tables[] = {dev_table};
  nr_error err = {0};
  nr_knob_space cpu, gpu;
  REQUIRE(!nr_knob_space_build_tables_for(tables, 1, NULL, false, NR_DEVICE_CPU, &cpu, &err));
  REQUIRE(!nr_knob_space_build_tables_for(tables, 1, NULL, false, NR_DEVICE_CUDA, &gpu, &err));
  CHECK(has(&cpu, "dv.any") && has(&cpu, "dv.cpu") && !has(&cpu, "dv.gpu"));
  CHECK(has(&gpu, "dv.any") && !has(&gpu, "dv.cpu") && has(&gpu, "dv.gpu"));
  nr_knob_space_free(&cpu);
  nr_knob_space_free(&gpu);
  /* the schema changes when a row's devices change */
  nr_knob_def copy[4];
  memcpy(copy, dev_table, sizeof copy);
  const nr_knob_def *const mod[] = {copy};
  uint64_t h = nr_knob_hash_tables(tables, 1);
  CHECK(h == nr_knob_hash_tables(mod, 1));
  copy[1].devices = NR_KNOB_DEVICE(NR_DEVICE_CUDA);
  CHECK(h != nr_knob_hash_tables(mod, 1), "devices are not part of the schema");
}

NR_TEST(cuda_knobs_route_names_the_other_device) {
  small_net net;
  REQUIRE(small_net_make(t, &net, false));
  nr_error err = {0};
  nr_knob_space cuda, cpu;
  nr_route r = {0}, rc = {0};
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CUDA, &cuda, &err));
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CPU, &cpu, &err));
  REQUIRE(!nr_route_init(&r, &cuda, &err) && !nr_route_init(&rc, &cpu, &err));
  CHECK(nr_route_parse(&r, "-conv.algo@conv=im2col", &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "does not steer cuda builds"), "%s", err.message);
  CHECK(nr_route_parse(&rc, "-cuda.graphs=off", &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "does not steer cpu builds"), "%s", err.message);
  CHECK(!nr_route_parse(&r, "-cuda.precision@conv=fp16 -cuda.conv.layout@conv=nhwc", &err),
        "%s", err.message);
  CHECK(nr_route_precision(&r, &net.g->nodes[0]) == NR_PREC_FP16 ||
        nr_route_precision(&r, &net.g->nodes[1]) == NR_PREC_FP16);
  CHECK(!strcmp(nr_precision_name(NR_PREC_TF32), "tf32"));
  nr_route_free(&r);
  nr_route_free(&rc);
  nr_knob_space_free(&cuda);
  nr_knob_space_free(&cpu);
  small_net_free(&net);
}

/* ---- select keeps the build's device -------------------------------------------------- */

NR_TEST(cuda_knobs_select_keeps_the_device) {
  small_net net;
  REQUIRE(small_net_make(t, &net, true));
  nr_error err = {0};
  nr_knob_space s;
  nr_route r = {0};
  nr_plan *p = NULL;
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CUDA, &s, &err) &&
          !nr_route_init(&r, &s, &err));
  nr_status st = nr_compile(net.g, &r, 1, NULL, &p, &err);
#ifdef NR_HAVE_CUDA
  /* the elementwise tactic needs no GPU to be chosen and prepared */
  REQUIRE(!st, "%s", err.message);
  CHECK(p->device == NR_DEVICE_CUDA);
  for (int k = 0; k < p->n_steps; k++)
    CHECK(p->steps[k].tactic->device == NR_DEVICE_CUDA, "step %d: %s", k,
          p->steps[k].tactic->id);
#else
  CHECK(st == NR_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "'relu'") && strstr(err.message, "no cuda tactic") &&
            strstr(err.message, "Relu"),
        "the message must name the node and op: %s", err.message);
#endif
  nr_plan_destroy(p);
  p = NULL;
  nr_knob_space cpu;
  nr_route rc = {0};
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CPU, &cpu, &err) &&
          !nr_route_init(&rc, &cpu, &err));
  REQUIRE(!nr_compile(net.g, &rc, 1, NULL, &p, &err), "%s", err.message);
  for (int k = 0; k < p->n_steps; k++)
    CHECK(p->steps[k].tactic->device == NR_DEVICE_CPU, "%s", p->steps[k].tactic->id);
  nr_plan_destroy(p);
  nr_route_free(&rc);
  nr_knob_space_free(&cpu);
  nr_route_free(&r);
  nr_knob_space_free(&s);
  small_net_free(&net);
}

/* ---- refusals ------------------------------------------------------------------------ */

static bool gpu_here(void) {
  return nr_backend_check(NR_DEVICE_CUDA, NULL) == NR_OK;
}

NR_TEST(cuda_knobs_build_refused_without_backend_or_gpu) {
  SKIP_UNLESS(!gpu_here(), "a GPU machine: tests/gpu covers building");
  nr_model *m = NULL;
  nr_error err = {0};
  REQUIRE(!nr_model_load(NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx", NULL, &m, &err),
          "%s", err.message);
  nr_build_options o = {sizeof o, NULL, 1, NR_DEVICE_CUDA, NULL};
  nr_engine *e = NULL;
  CHECK(nr_engine_build(m, &o, &e, &err) == NR_ERR_UNSUPPORTED && !e);
#ifdef NR_HAVE_CUDA
  CHECK(strstr(err.message, "no usable GPU") || strstr(err.message, "reports no GPU"),
        "%s", err.message);
#else
  CHECK(strstr(err.message, "built without the CUDA backend"), "%s", err.message);
#endif
  CHECK(!strncmp(err.message, "nr_engine_build: device cuda", 28), "%s", err.message);
  o.device = NR_DEVICE_CPU; /* the CPU path is untouched */
  CHECK(!nr_engine_build(m, &o, &e, &err), "%s", err.message);
  CHECK(e && e->plan->device == NR_DEVICE_CPU && e->fingerprint.device == NR_DEVICE_CPU);
  nr_engine_destroy(e);
  nr_model_destroy(m);
}

NR_TEST(cuda_knobs_fingerprint_names_gpu_fields) {
  nr_fingerprint a, b;
  nr_fingerprint_current_for(&a, NR_DEVICE_CUDA);
  CHECK(a.device == NR_DEVICE_CUDA && *a.gpu && *a.cudnn && *a.cublas);
  b = a;
  nr_error err = {0};
  CHECK(!nr_fingerprint_compare(&a, &b, &err), "%s", err.message);
  snprintf(b.gpu, sizeof b.gpu, "NVIDIA H200");
  snprintf(b.gpu_cc, sizeof b.gpu_cc, "9.0");
  snprintf(a.gpu, sizeof a.gpu, "NVIDIA A100-SXM4-80GB");
  snprintf(a.gpu_cc, sizeof a.gpu_cc, "8.0");
  b.cores = a.cores + 1; /* CPU fields are not compared for a device engine */
  CHECK(nr_fingerprint_compare(&a, &b, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "gpu: engine 'NVIDIA A100-SXM4-80GB', this machine 'NVIDIA H200'") &&
            strstr(err.message, "gpu_compute_capability: engine '8.0', this machine '9.0'") &&
            !strstr(err.message, "cores"),
        "%s", err.message);
  nr_fingerprint_current(&b); /* a CPU process cannot take a CUDA engine */
  CHECK(nr_fingerprint_compare(&a, &b, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "device: engine 'cuda', this machine 'cpu'"), "%s", err.message);
}

#ifdef NR_HAVE_CUDA
/* A CUDA engine (of a Relu: no GPU needed to build the plan) saved with a GPU that is
 * not this machine's is refused on load, naming the GPU; the device survives the file. */
NR_TEST(cuda_knobs_engine_file_keeps_device_and_refuses_other_gpu) {
  small_net net;
  REQUIRE(small_net_make(t, &net, true));
  nr_error err = {0};
  nr_knob_space s;
  nr_route r = {0};
  nr_engine *e = calloc(1, sizeof *e);
  REQUIRE(!nr_knob_space_build_for(net.g, NR_DEVICE_CUDA, &s, &err) &&
          !nr_route_init(&r, &s, &err) && !nr_compile(net.g, &r, 1, NULL, &e->plan, &err),
          "%s", err.message);
  nr_fingerprint_current_for(&e->fingerprint, NR_DEVICE_CUDA);
  snprintf(e->fingerprint.gpu, sizeof e->fingerprint.gpu, "NVIDIA H200 (test)");
  snprintf(e->nnroute_version, sizeof e->nnroute_version, "%s", NR_VERSION_STRING);
  nr_knob_schema(e->knob_schema);
  uint8_t *data = NULL;
  size_t len = 0;
  REQUIRE(!nr_engine_serialize(e, &data, &len, &err), "%s", err.message);
  nr_engine *back = NULL;
  CHECK(nr_engine_parse(data, len, true, &back, &err) == NR_ERR_INVALID_ARGUMENT && !back);
  CHECK(strstr(err.message, "gpu: engine 'NVIDIA H200 (test)'"), "%s", err.message);
  REQUIRE(!nr_engine_parse(data, len, false, &back, &err), "%s", err.message);
  CHECK(back->plan->device == NR_DEVICE_CUDA && back->fingerprint.device == NR_DEVICE_CUDA);
  CHECK(!strcmp(back->fingerprint.gpu, "NVIDIA H200 (test)") &&
        !strcmp(back->fingerprint.cudnn, e->fingerprint.cudnn));
  nr_context *ctx = NULL; /* without a GPU a context is refused with a message */
  if (!gpu_here()) {
    CHECK(nr_context_create(back, 1, &ctx, &err) == NR_ERR_UNSUPPORTED && !ctx);
    CHECK(strstr(err.message, "GPU"), "%s", err.message);
  }
  nr_engine_free(back);
  free(data);
  nr_engine_free(e);
  nr_route_free(&r);
  nr_knob_space_free(&s);
  small_net_free(&net);
}
#endif
