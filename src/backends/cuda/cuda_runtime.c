/* cuda_runtime.c - the CUDA backend's function table (backends/backend.h): device
 * check, fingerprint, the engine's weights on the GPU, contexts (device arena,
 * stream, library handles), running a plan, CUDA graphs and timing one tactic.
 *
 * Key decision: a context owns one stream and runs every step on it, so the steps
 * need no synchronization between them and the sequence can be captured once into a
 * CUDA graph and replayed (cuda.graphs=on, the default): the first run of a context
 * executes the steps directly (tactics create their cached library state then, which
 * must not happen under capture), the second captures them and every run from then
 * on launches the graph. Graph inputs are copied into the context's own device
 * buffers first, so the pointers recorded in the graph stay valid. The engine's
 * weights are uploaded once, by its first context (engine_attach, under a lock), and
 * shared by every context of the engine. NNROUTE_CUDA_SYNC=1 waits after every step
 * and names the step whose kernels failed (no graphs then): for triage only. */
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_knobs.h"
#include "plan/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;

/* cuBLAS's own workspace per context (NVIDIA's advice for Hopper: 32 MiB). */
#define BLAS_WORKSPACE ((size_t)32 << 20)

/* ---- errors ------------------------------------------------------------------------- */

nr_status nr_cuda_check(cudaError_t e, nr_error *err, const char *what) {
  if (e == cudaSuccess)
    return NR_OK;
  return nr_errorf(err, NR_ERR_RUNTIME, "%s: %s: %s", what, cudaGetErrorName(e),
                   cudaGetErrorString(e));
}

nr_status nr_cublas_check(cublasStatus_t s, nr_error *err, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return NR_OK;
  return nr_errorf(err, NR_ERR_RUNTIME, "%s: cuBLAS status %d (%s)", what, (int)s,
                   cublasGetStatusString(s));
}

nr_status nr_cudnn_check(cudnnStatus_t s, nr_error *err, const char *what) {
  if (s == CUDNN_STATUS_SUCCESS)
    return NR_OK;
  return nr_errorf(err, NR_ERR_RUNTIME, "%s: cuDNN status %d (%s)", what, (int)s,
                   cudnnGetErrorString(s));
}

/* ---- route and knob helpers ------------------------------------------------------------ */

bool nr_cuda_route_has(const char *route, nr_knob_id id, const char *value) {
  char token[128];
  snprintf(token, sizeof token, "-%s=%s", nr_knob_name(id), value);
  size_t n = strlen(token);
  for (const char *p = route ? strstr(route, token) : NULL; p; p = strstr(p + 1, token))
    if ((p == route || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
      return true;
  return false;
}

uint64_t nr_cuda_workspace_limit(const nr_tactic_ctx *c) {
  const char *v = nr_route_get(c->route, NR_KNOB_CUDA_WORKSPACE, NULL);
  return (uint64_t)(v ? strtoull(v, NULL, 10) : 64) << 20;
}

/* ---- check and fingerprint ---------------------------------------------------------- */

static nr_status cuda_check(nr_error *err) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "device cuda: no usable GPU here "
                     "(cudaGetDeviceCount: %s)", cudaGetErrorString(e));
  if (n < 1)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "device cuda: the driver reports no GPU");
  return NR_OK;
}

static void version3(char *out, size_t cap, int a, int b, int c) {
  snprintf(out, cap, "%d.%d.%d", a, b, c);
}

static void cuda_fingerprint(nr_fingerprint *fp) {
  int v = 0, dev = 0;
  nr_error err = {0};
  if (cuda_check(&err) == NR_OK && cudaGetDevice(&dev) == cudaSuccess) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess) {
      snprintf(fp->gpu, sizeof fp->gpu, "%.95s", prop.name);
      snprintf(fp->gpu_cc, sizeof fp->gpu_cc, "%d.%d", prop.major, prop.minor);
    }
  } else {
    snprintf(fp->gpu, sizeof fp->gpu, "none (%.80s)", err.message);
    strcpy(fp->gpu_cc, "none");
  }
  if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
    snprintf(fp->gpu_driver, sizeof fp->gpu_driver, "%d.%d", v / 1000, v % 1000 / 10);
  else
    strcpy(fp->gpu_driver, "none");
  v = 0;
  cudaRuntimeGetVersion(&v);
  snprintf(fp->cuda_runtime, sizeof fp->cuda_runtime, "%d.%d", v / 1000, v % 1000 / 10);
  int ma = 0, mi = 0, pa = 0;
  cublasGetProperty(MAJOR_VERSION, &ma);
  cublasGetProperty(MINOR_VERSION, &mi);
  cublasGetProperty(PATCH_LEVEL, &pa);
  version3(fp->cublas, sizeof fp->cublas, ma, mi, pa);
  size_t dn = cudnnGetVersion(); /* 91900 for 9.19.0 */
  version3(fp->cudnn, sizeof fp->cudnn, (int)(dn / 10000), (int)(dn / 100 % 100),
           (int)(dn % 100));
}

/* ---- build-time handles ------------------------------------------------------------------ */

/* One set per process, made on first use and kept (builds are rare and may run on
 * several threads: the tuner's workers are processes, not threads). The cuDNN handle
 * is made apart, when a convolution (or a profiling context) first asks for it:
 * creating it loads cuDNN's sub-libraries, which a model without convolutions never
 * needs (every tuner candidate of a BERT paid for it). */
static struct {
  pthread_mutex_t lock;
  bool tried, dnn_tried;
  nr_error err, dnn_err;
  cudnnHandle_t dnn;
  cublasLtHandle_t lt;
  cublasHandle_t blas;
  cudaStream_t stream;
} build = {PTHREAD_MUTEX_INITIALIZER, false, false, {0}, {0}, NULL, NULL, NULL, NULL};

static void build_handles(void) {
  pthread_mutex_lock(&build.lock);
  if (!build.tried) {
    build.tried = true;
    nr_error *e = &build.err;
    if (!cuda_check(e) &&
        !nr_cuda_check(cudaStreamCreateWithFlags(&build.stream, cudaStreamNonBlocking), e,
                       "cudaStreamCreate") &&
        !nr_cublas_check(cublasCreate(&build.blas), e, "cublasCreate") &&
        !nr_cublas_check(cublasSetStream(build.blas, build.stream), e, "cublasSetStream"))
      nr_cublas_check(cublasLtCreate(&build.lt), e, "cublasLtCreate");
    if (build.err.status) { /* all or nothing */
      build.lt = NULL, build.blas = NULL;
    }
  }
  pthread_mutex_unlock(&build.lock);
}

/* The build-time cuDNN handle, on the build stream (after build_handles). */
static void build_dnn(void) {
  pthread_mutex_lock(&build.lock);
  if (!build.dnn_tried) {
    build.dnn_tried = true;
    nr_error *e = &build.dnn_err;
    if (!build.lt)
      *e = build.err;
    else if (!nr_cudnn_check(cudnnCreate(&build.dnn), e, "cudnnCreate") &&
             nr_cudnn_check(cudnnSetStream(build.dnn, build.stream), e, "cudnnSetStream")) {
      cudnnDestroy(build.dnn);
      build.dnn = NULL;
    }
  }
  pthread_mutex_unlock(&build.lock);
}

bool nr_cuda_build_handles(nr_cuda_ctx *c, nr_error *err) {
  build_handles();
  build_dnn();
  if (!build.lt || !build.dnn) {
    if (err)
      *err = build.lt ? build.dnn_err : build.err;
    return false;
  }
  c->stream = build.stream, c->dnn = build.dnn, c->lt = build.lt, c->blas = build.blas;
  return true;
}

cudnnHandle_t nr_cuda_build_cudnn(nr_error *err) {
  build_handles();
  build_dnn();
  if (!build.dnn && err)
    *err = build.dnn_err;
  return build.dnn;
}

cublasLtHandle_t nr_cuda_build_lt(nr_error *err) {
  build_handles();
  if (!build.lt && err)
    *err = build.err;
  return build.lt;
}

/* ---- engine ------------------------------------------------------------------------------ */

static nr_status engine_attach(nr_engine *e, nr_error *err) {
  pthread_mutex_lock(&attach_lock);
  nr_status st = NR_OK;
  if (!e->device_state) {
    nr_cuda_engine *d = calloc(1, sizeof *d);
    const nr_plan *p = e->plan;
    if (!d)
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    if (!st)
      st = nr_cuda_check(cudaGetDevice(&d->device), err, "cudaGetDevice");
    if (!st && p->weights_size)
      st = nr_cuda_check(cudaMalloc((void **)&d->weights, p->weights_size), err,
                         "uploading the engine's weights: cudaMalloc");
    if (!st && p->weights_size)
      st = nr_cuda_check(cudaMemcpy(d->weights, p->weights, p->weights_size,
                                    cudaMemcpyHostToDevice),
                         err, "uploading the engine's weights");
    if (st && d) {
      cudaFree(d->weights);
      free(d);
    } else if (!st) {
      e->device_state = d;
    }
  }
  pthread_mutex_unlock(&attach_lock);
  return st;
}

static void engine_detach(nr_engine *e) {
  nr_cuda_engine *d = e->device_state;
  if (!d)
    return;
  cudaFree(d->weights);
  free(d);
  e->device_state = NULL;
}

/* ---- contexts ------------------------------------------------------------------------------ */

static size_t plain_bytes(const nr_slot *s) {
  size_t n = nr_dtype_size(s->dtype);
  for (int d = 0; d < s->rank; d++)
    n *= (size_t)s->dims[d];
  return n;
}

static void context_destroy(void *state) {
  nr_cuda_ctx *c = state;
  if (!c)
    return;
  if (c->stream)
    cudaStreamSynchronize(c->stream);
  for (int k = 0; c->steps && k < c->plan->n_steps; k++)
    if (c->steps[k].p && c->steps[k].free_fn)
      c->steps[k].free_fn(c->steps[k].p);
  free(c->steps);
  if (c->graph)
    cudaGraphExecDestroy(c->graph);
  for (int i = 0; c->inputs && i < c->plan->n_inputs; i++) {
    cudaFree(c->inputs[i]);
    cudaFreeHost(c->host_in[i]);
  }
  for (int i = 0; c->host_out && i < c->plan->n_outputs; i++)
    cudaFreeHost(c->host_out[i]);
  free(c->inputs);
  free(c->host_in);
  free(c->host_out);
  cudaFree(c->arena);
  cudaFree(c->scratch);
  cudaFree(c->blas_ws);
  cudaFree(c->flush);
  if (c->dnn)
    cudnnDestroy(c->dnn);
  if (c->lt)
    cublasLtDestroy(c->lt);
  if (c->blas)
    cublasDestroy(c->blas);
  if (c->ev_start)
    cudaEventDestroy(c->ev_start);
  if (c->ev_stop)
    cudaEventDestroy(c->ev_stop);
  if (c->stream)
    cudaStreamDestroy(c->stream);
  free(c);
}

static nr_status alloc_io(nr_cuda_ctx *c, nr_error *err) {
  const nr_plan *p = c->plan;
  c->inputs = calloc((size_t)p->n_inputs + 1, sizeof *c->inputs);
  c->host_in = calloc((size_t)p->n_inputs + 1, sizeof *c->host_in);
  c->host_out = calloc((size_t)p->n_outputs + 1, sizeof *c->host_out);
  c->steps = calloc((size_t)p->n_steps + 1, sizeof *c->steps);
  if (!c->inputs || !c->host_in || !c->host_out || !c->steps)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  nr_status st = NR_OK;
  for (int i = 0; !st && i < p->n_inputs; i++) {
    size_t n = plain_bytes(&p->slots[p->inputs[i]]);
    st = nr_cuda_check(cudaMalloc((void **)&c->inputs[i], n ? n : 1), err, "input buffer");
    if (!st)
      st = nr_cuda_check(cudaMallocHost(&c->host_in[i], n ? n : 1), err, "pinned input");
  }
  for (int i = 0; !st && i < p->n_outputs; i++) {
    size_t n = plain_bytes(&p->slots[p->outputs[i]]);
    st = nr_cuda_check(cudaMallocHost(&c->host_out[i], n ? n : 1), err, "pinned output");
  }
  return st;
}

/* Some step runs a cuDNN tactic: only then does a context make a cuDNN handle, whose
 * creation loads cuDNN's sub-libraries (a cost every fresh tuner process paid for
 * models without a convolution). */
static bool uses_cudnn(const nr_plan *p) {
  for (int i = 0; i < p->n_steps; i++) {
    const nr_tactic *t = p->steps[i].tactic;
    if (t && t->source && !strcmp(t->source, "cudnn"))
      return true;
  }
  return false;
}

static nr_status make_handles(nr_cuda_ctx *c, nr_error *err) {
  nr_status st = nr_cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                               err, "cudaStreamCreate");
  if (!st)
    st = nr_cuda_check(cudaEventCreate(&c->ev_start), err, "cudaEventCreate");
  if (!st)
    st = nr_cuda_check(cudaEventCreate(&c->ev_stop), err, "cudaEventCreate");
  if (!st)
    st = nr_cublas_check(cublasCreate(&c->blas), err, "cublasCreate");
  if (!st)
    st = nr_cublas_check(cublasSetStream(c->blas, c->stream), err, "cublasSetStream");
  if (!st)
    st = nr_cuda_check(cudaMalloc(&c->blas_ws, BLAS_WORKSPACE), err, "cuBLAS workspace");
  if (!st)
    st = nr_cublas_check(cublasSetWorkspace(c->blas, c->blas_ws, BLAS_WORKSPACE), err,
                         "cublasSetWorkspace");
  if (!st)
    st = nr_cublas_check(cublasLtCreate(&c->lt), err, "cublasLtCreate");
  if (!st && uses_cudnn(c->plan))
    st = nr_cudnn_check(cudnnCreate(&c->dnn), err, "cudnnCreate");
  if (!st && c->dnn)
    st = nr_cudnn_check(cudnnSetStream(c->dnn, c->stream), err, "cudnnSetStream");
  return st;
}

static nr_status context_create(const nr_engine *e, void **state, nr_error *err) {
  nr_cuda_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  c->engine = e;
  c->plan = e->plan;
  c->dev = e->device_state;
  c->last_ms = -1;
  const char *sync = getenv("NNROUTE_CUDA_SYNC");
  c->use_graph = !nr_cuda_route_has(c->plan->route, NR_KNOB_CUDA_GRAPHS, "off") &&
                 !(sync && !strcmp(sync, "1"));
  nr_status st = make_handles(c, err);
  if (!st)
    st = nr_cuda_check(cudaMalloc((void **)&c->arena, c->plan->arena_size + 256), err,
                       "arena");
  if (!st)
    st = nr_cuda_check(cudaMalloc((void **)&c->scratch, c->plan->scratch_size + 256), err,
                       "scratch");
  if (!st)
    st = alloc_io(c, err);
  if (st) {
    nr_error_prefix(err, "CUDA context (arena %llu, scratch %llu bytes): ",
                    (unsigned long long)c->plan->arena_size,
                    (unsigned long long)c->plan->scratch_size);
    context_destroy(c);
    return st;
  }
  *state = c;
  return NR_OK;
}

/* ---- running ------------------------------------------------------------------------------ */

static void *slot_data(const nr_cuda_ctx *c, int idx) {
  if (idx < 0)
    return NULL;
  const nr_slot *s = &c->plan->slots[idx];
  switch (s->kind) {
  case NR_SLOT_ARENA: return c->arena + s->offset;
  case NR_SLOT_CONST: return c->dev->weights + s->offset;
  case NR_SLOT_INPUT: return c->inputs[s->offset];
  case NR_SLOT_ABSORBED: return NULL;
  }
  return NULL;
}

static nr_status run_step(nr_cuda_ctx *c, int k, nr_error *err) {
  const nr_plan *p = c->plan;
  const nr_step *st = &p->steps[k];
  void *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  const nr_slot *in_slot[NR_STEP_MAX_IO], *out_slot[NR_STEP_MAX_IO];
  for (int j = 0; j < st->n_in; j++) {
    in[j] = slot_data(c, st->in[j]);
    in_slot[j] = st->in[j] >= 0 ? &p->slots[st->in[j]] : NULL;
  }
  for (int j = 0; j < st->n_out; j++) {
    out[j] = slot_data(c, st->out[j]);
    out_slot[j] = st->out[j] >= 0 ? &p->slots[st->out[j]] : NULL;
  }
  const nr_node *node = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
  nr_exec_args a = {
      .plan = p, .step = st, .node = node, .in = in, .out = out, .in_slot = in_slot,
      .out_slot = out_slot,
      .packed = st->packed_size ? c->dev->weights + st->packed_offset : NULL,
      .scratch = c->scratch, .err = err, .stream = c->stream, .backend = c,
  };
  nr_status s = st->tactic->run(&a);
  if (!s && !c->use_graph && getenv("NNROUTE_CUDA_SYNC"))
    s = nr_cuda_check(cudaStreamSynchronize(c->stream), err, "after the step");
  if (!s)
    return NR_OK;
  if (node)
    nr_error_prefix(err, "step %d, node '%s' (%s, tactic %s): ", k, node->name,
                    node->op_type, st->tactic->id);
  else
    nr_error_prefix(err, "step %d (reorder or cast, tactic %s): ", k, st->tactic->id);
  return s;
}

static nr_status run_steps(nr_cuda_ctx *c, nr_error *err) {
  nr_status st = NR_OK;
  for (int k = 0; !st && k < c->plan->n_steps; k++)
    st = run_step(c, k, err);
  return st;
}

/* Records the steps into a graph; on failure (a tactic the capture refuses) the
 * context stops using graphs and the caller runs the steps directly. */
static nr_status capture(nr_cuda_ctx *c, nr_error *err) {
  cudaGraph_t g = NULL;
  nr_status st = nr_cuda_check(cudaStreamBeginCapture(c->stream,
                                                      cudaStreamCaptureModeThreadLocal),
                               err, "cudaStreamBeginCapture");
  if (st)
    return st;
  nr_status run = run_steps(c, err);
  cudaError_t e = cudaStreamEndCapture(c->stream, &g);
  if (run)
    st = run;
  else
    st = nr_cuda_check(e, err, "capturing the steps into a CUDA graph");
  if (!st)
    st = nr_cuda_check(cudaGraphInstantiate(&c->graph, g, 0), err, "cudaGraphInstantiate");
  if (g)
    cudaGraphDestroy(g);
  if (st) {
    c->graph = NULL;
    c->use_graph = false;
    cudaGetLastError(); /* clear a sticky capture error */
  }
  return st;
}

static nr_status run_timed_steps(nr_cuda_ctx *c, nr_step_hook hook, void *user,
                                 nr_error *err) {
  int n = c->plan->n_steps;
  cudaEvent_t *ev = calloc((size_t)n + 1, sizeof *ev);
  nr_status st = ev ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int k = 0; !st && k <= n; k++)
    st = nr_cuda_check(cudaEventCreate(&ev[k]), err, "cudaEventCreate");
  for (int k = 0; !st && k < n; k++) {
    cudaEventRecord(ev[k], c->stream);
    st = run_step(c, k, err);
  }
  if (!st)
    cudaEventRecord(ev[n], c->stream);
  if (!st)
    st = nr_cuda_check(cudaEventSynchronize(ev[n]), err, "running the steps");
  for (int k = 0; !st && k < n; k++) {
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[k], ev[k + 1]);
    hook(user, k, ms);
  }
  for (int k = 0; ev && k <= n; k++)
    if (ev[k])
      cudaEventDestroy(ev[k]);
  free(ev);
  return st;
}

static nr_status copy_in(nr_cuda_ctx *c, const nr_buffer *inputs, nr_error *err) {
  const nr_plan *p = c->plan;
  nr_status st = NR_OK;
  for (int i = 0; !st && i < p->n_inputs; i++) {
    size_t n = plain_bytes(&p->slots[p->inputs[i]]);
    memcpy(c->host_in[i], inputs[i].data, n);
    st = nr_cuda_check(cudaMemcpyAsync(c->inputs[i], c->host_in[i], n,
                                       cudaMemcpyHostToDevice, c->stream),
                       err, "copying an input to the GPU");
  }
  return st;
}

static nr_status copy_out(nr_cuda_ctx *c, nr_buffer *outs, nr_error *err) {
  const nr_plan *p = c->plan;
  nr_status st = NR_OK;
  for (int i = 0; !st && i < p->n_outputs; i++)
    st = nr_cuda_check(cudaMemcpyAsync(c->host_out[i], slot_data(c, p->outputs[i]),
                                       plain_bytes(&p->slots[p->outputs[i]]),
                                       cudaMemcpyDeviceToHost, c->stream),
                       err, "copying an output from the GPU");
  if (!st)
    st = nr_cuda_check(cudaStreamSynchronize(c->stream), err, "running the engine");
  for (int i = 0; !st && i < p->n_outputs; i++)
    memcpy(outs[i].data, c->host_out[i], plain_bytes(&p->slots[p->outputs[i]]));
  return st;
}

static nr_status context_run(void *state, const nr_buffer *inputs, nr_buffer *outs,
                             nr_step_hook hook, void *hook_user, nr_error *err) {
  nr_cuda_ctx *c = state;
  c->last_ms = -1;
  nr_status st = nr_cuda_check(cudaSetDevice(c->dev->device), err, "cudaSetDevice");
  if (!st)
    st = copy_in(c, inputs, err);
  if (!st && hook) {
    st = run_timed_steps(c, hook, hook_user, err);
  } else if (!st) {
    if (c->use_graph && c->runs > 0 && !c->graph && capture(c, err))
      nr_error_clear(err); /* graphs off for this context: run directly */
    cudaEventRecord(c->ev_start, c->stream);
    if (c->graph)
      st = nr_cuda_check(cudaGraphLaunch(c->graph, c->stream), err, "cudaGraphLaunch");
    else
      st = run_steps(c, err);
    cudaEventRecord(c->ev_stop, c->stream);
  }
  if (!st)
    st = copy_out(c, outs, err);
  if (st) {
    cudaStreamSynchronize(c->stream);
    cudaGetLastError();
    return st;
  }
  float ms = 0;
  if (!hook && cudaEventElapsedTime(&ms, c->ev_start, c->ev_stop) == cudaSuccess)
    c->last_ms = ms;
  c->runs++;
  return NR_OK;
}

static double device_ms(void *state) {
  return ((nr_cuda_ctx *)state)->last_ms;
}

/* Writes a buffer of twice the L2 size so the next run finds none of its data there. */
static void flush_caches(void *state) {
  nr_cuda_ctx *c = state;
  if (!c->flush) {
    int l2 = 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, c->dev->device);
    c->flush_bytes = (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
    if (cudaMalloc((void **)&c->flush, c->flush_bytes) != cudaSuccess) {
      c->flush = NULL;
      return;
    }
  }
  nr_cuda_touch(c->flush, c->flush_bytes, c->stream);
  cudaStreamSynchronize(c->stream);
}

/* ---- the table ------------------------------------------------------------------------------- */

static bool supports_any(const nr_tactic_ctx *c);
double nr_cuda_time_step(nr_compile_ctx *cc, int k, const nr_tactic *t);

static const nr_tactic *reorder(nr_layout from, nr_layout to) {
  for (const nr_tactic *t = nr_tactics_cuda_reorder; t->id; t++)
    if (from != to && t->layout == to && (from == NR_LAYOUT_PLAIN || to == NR_LAYOUT_PLAIN))
      return t;
  return NULL;
}

typedef struct any_ctx {
  const nr_tactic_ctx *c;
  bool found;
} any_ctx;

static void any_fn(const nr_tactic *t, void *user) {
  any_ctx *a = user;
  const char *nd = a->c->node->domain ? a->c->node->domain : "";
  if (a->found || t->device != NR_DEVICE_CUDA || !t->op_type ||
      strcmp(t->op_type, a->c->node->op_type) || strcmp(t->domain ? t->domain : "", nd))
    return;
  a->found = !t->supports || t->supports(a->c);
}

static bool supports_any(const nr_tactic_ctx *c) {
  any_ctx a = {c, false};
  if (c && c->node)
    nr_tactic_foreach(any_fn, &a);
  return a.found;
}

const nr_backend nr_backend_cuda = {
    .device = NR_DEVICE_CUDA,
    .name = "cuda",
    .check = cuda_check,
    .supports = supports_any,
    .fingerprint = cuda_fingerprint,
    .reorder = reorder,
    .engine_attach = engine_attach,
    .engine_detach = engine_detach,
    .context_create = context_create,
    .context_destroy = context_destroy,
    .context_run = context_run,
    .device_ms = device_ms,
    .flush_caches = flush_caches,
    .time_step = nr_cuda_time_step,
};
