/* cuda_internal.h - what the CUDA backend's files share: the per-engine and
 * per-context state, the helpers tactics use at run time, and the C entry points of
 * the kernels (*.cu).
 *
 * Key decision: a tactic's run() gets device pointers for every slot and the
 * context's stream (nr_exec_args.stream), enqueues its work and returns without
 * waiting, so a whole run is one stream of launches that a CUDA graph can capture.
 * Whatever a library needs at run time beyond the step's params (cuDNN descriptors,
 * a cuBLASLt matmul description and its algorithm) is made on the step's first run
 * and cached per context in `step_state`; the first run of a context is never
 * captured, so nothing that allocates or synchronizes is recorded into a graph. The
 * kernels' own interface is cuda_kernels.h. */
#ifndef NR_BACKENDS_CUDA_INTERNAL_H
#define NR_BACKENDS_CUDA_INTERNAL_H

#include "backends/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "ir/node_desc.h"
#include "kernels/act.h"
#include "plan/pass.h"
#include "util/error.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <pthread.h>

/* ---- state ------------------------------------------------------------------------ */

/* Per engine: the weights (constants and tactic-packed data) in device memory. */
typedef struct nr_cuda_engine {
  int device;
  uint8_t *weights;
} nr_cuda_engine;

/* What a step keeps between runs of one context; free_fn releases it. */
typedef struct nr_cuda_step_state {
  void *p;
  void (*free_fn)(void *p);
} nr_cuda_step_state;

/* Per context. */
typedef struct nr_cuda_ctx {
  const nr_engine *engine;
  const nr_plan *plan;
  const nr_cuda_engine *dev;
  cudaStream_t stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  cudnnHandle_t dnn;
  uint8_t *arena, *scratch;
  void *blas_ws;               /* cuBLAS's workspace: set, so capture never allocates */
  uint8_t **inputs;            /* device copy of each graph input */
  void **host_in, **host_out;  /* pinned staging for inputs and outputs */
  nr_cuda_step_state *steps;   /* per step */
  cudaEvent_t ev_start, ev_stop;
  bool use_graph;              /* cuda.graphs=on (the plan's route) */
  int runs;                    /* completed runs: the first one is never captured */
  cudaGraphExec_t graph;
  double last_ms;              /* device time of the last run's steps */
  uint8_t *flush;              /* a buffer larger than the L2 (flush_caches) */
  size_t flush_bytes;
} nr_cuda_ctx;

/* ---- errors -------------------------------------------------------------------------- */

/* NR_OK, or NR_ERR_RUNTIME "what: <CUDA error name>: <string>". */
nr_status nr_cuda_check(cudaError_t e, nr_error *err, const char *what);
nr_status nr_cublas_check(cublasStatus_t s, nr_error *err, const char *what);
nr_status nr_cudnn_check(cudnnStatus_t s, nr_error *err, const char *what);

/* ---- run-time helpers ------------------------------------------------------------------ */

static inline nr_cuda_ctx *nr_cuda_of(const nr_exec_args *a) {
  return (nr_cuda_ctx *)a->backend;
}
static inline cudaStream_t nr_cuda_stream(const nr_exec_args *a) {
  return (cudaStream_t)a->stream;
}
/* The step's cached state slot in this context. */
static inline nr_cuda_step_state *nr_cuda_step(const nr_exec_args *a) {
  return &nr_cuda_of(a)->steps[a->step - a->plan->steps];
}
/* Build-time library handles shared by every build of the process (created once,
 * under a lock; NULL with err set when there is no GPU). */
cudnnHandle_t nr_cuda_build_cudnn(nr_error *err);
cublasLtHandle_t nr_cuda_build_lt(nr_error *err);
/* Sets c's stream and library handles to the build-time ones (profiling builds). */
bool nr_cuda_build_handles(nr_cuda_ctx *c, nr_error *err);
/* The workspace limit (cuda.workspace, MiB) of the route, in bytes. */
uint64_t nr_cuda_workspace_limit(const nr_tactic_ctx *c);
/* Whether the canonical route text holds the token -<knob id's name>=value (e.g.
 * "-cuda.graphs=off"): how a context reads a global knob from a loaded engine. */
bool nr_cuda_route_has(const char *route, nr_knob_id id, const char *value);

/* ---- elementwise program helpers (cuda_eltwise.c) ------------------------------------ */

/* Fills prog's dims and strides for an output of `rank` dims and n_ops operands
 * of the given ranks/dims (numpy broadcasting), merging dims where every operand
 * agrees. false when something does not broadcast or the rank is too high. */
bool nr_cuda_ew_layout(nr_cuda_ew_prog *prog, int rank, const int64_t *ydims, int n_ops,
                       const int *op_rank, const int64_t (*op_dims)[NR_MAX_RANK]);
/* The same for operand i given as an explicit per-output-dim stride list (for
 * channel-wise bias over NCHW or NHWC). */
void nr_cuda_ew_set_strides(nr_cuda_ew_prog *prog, int i, const int64_t *strides);
/* The op code of an fused-op activation (NR_EW_IDENTITY for none). */
uint8_t nr_cuda_ew_act(nr_act act);

/* y = act(x + bias + res) over y viewed as [outer, channels, inner] (contiguous), the
 * bias running along channels (NCHW: N, C, H*W; NHWC and GEMM rows: rows, C, 1).
 * x, res and y are fp16 where their flag says, else fp32; the bias is fp32; bias and
 * res may be NULL; x may be y. */
typedef struct nr_cuda_epi {
  int64_t outer, channels, inner;
  int x_half;
  nr_act act;
  float a, b;
  int y_half, res_half;
} nr_cuda_epi;
nr_status nr_cuda_epilogue(const nr_cuda_epi *e, const void *x, const float *bias,
                           const void *res, void *y, cudaStream_t s, nr_error *err);

/* ---- the tactic rows' functions (one file per family) ------------------------------------ */

extern const nr_tactic nr_tactics_cuda_reorder[]; /* cuda_copy.c: PLAIN <-> NHWC */
extern const nr_tactic nr_tactics_cuda_copy[];    /* cuda_copy.c: data movement, casts */

/* The depthwise rows' functions (cuda_dwconv.c; the rows are in cuda_conv.c's table). */
bool nr_cuda_dw_supports(const nr_tactic_ctx *c);
bool nr_cuda_dw_supports_f16(const nr_tactic_ctx *c);
nr_status nr_cuda_dw_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step);
nr_status nr_cuda_dw_run(const nr_exec_args *a);

/* compile.tactic_selection=profile (cuda_profile.c). */
double nr_cuda_time_step(nr_compile_ctx *cc, int k, const nr_tactic *t);

#endif
