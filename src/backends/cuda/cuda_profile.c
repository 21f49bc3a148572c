/* cuda_profile.c - compile.tactic_selection=profile for CUDA builds: times one tactic
 * on one step alone on the GPU (the select pass's by_profile asks the backend).
 *
 * Key decision: the step runs as it would in an engine, in isolation: the tactic
 * prepares into the plan (rolled back afterwards, like the CPU's time_tactic), its
 * constant inputs and packed data are copied to the device, its other inputs get
 * zeroed device buffers in the layout the tactic wants, and it runs once untimed (its
 * first run makes its library state) and then three times between CUDA events on the
 * build stream; the best of the three counts. Per-kernel timings mislead inside a
 * whole graph (caches, overlap), which is why the tuner measures whole engines; this
 * is the TensorRT-builder-style local choice the knob offers next to the heuristic. */
#include "backends/cuda/cuda_internal.h"
#include "plan/pass.h"

#include <stdlib.h>
#include <string.h>

typedef struct prof_bufs {
  void *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  nr_slot in_slot[NR_STEP_MAX_IO], out_slot[NR_STEP_MAX_IO];
  const nr_slot *ins[NR_STEP_MAX_IO], *outs[NR_STEP_MAX_IO];
  uint8_t *packed, *scratch;
} prof_bufs;

static cudaError_t dev_copy(void **dst, const void *host, uint64_t n, bool zero) {
  cudaError_t e = cudaMalloc(dst, n ? n : 1);
  if (e == cudaSuccess && host && n)
    e = cudaMemcpy(*dst, host, n, cudaMemcpyHostToDevice);
  else if (e == cudaSuccess && zero && n)
    e = cudaMemset(*dst, 0, n);
  return e;
}

static cudaError_t alloc_bufs(const nr_plan *p, const nr_step *st, const nr_tactic *t,
                              prof_bufs *b) {
  cudaError_t e = cudaSuccess;
  for (int i = 0; e == cudaSuccess && i < st->n_in; i++) {
    if (st->in[i] < 0)
      continue;
    nr_slot *s = &b->in_slot[i];
    *s = p->slots[st->in[i]];
    if (s->kind != NR_SLOT_CONST && t->layout != NR_LAYOUT_ANY && i == 0)
      s->layout = t->layout;
    s->nbytes = nr_slot_bytes(s, s->layout);
    b->ins[i] = s;
    e = dev_copy(&b->in[i], nr_slot_data(p, s), s->nbytes, true);
  }
  for (int o = 0; e == cudaSuccess && o < st->n_out; o++) {
    if (st->out[o] < 0)
      continue;
    nr_slot *s = &b->out_slot[o];
    *s = p->slots[st->out[o]];
    if (t->layout != NR_LAYOUT_ANY && o == 0)
      s->layout = t->layout;
    s->nbytes = nr_slot_bytes(s, s->layout);
    b->outs[o] = s;
    e = dev_copy(&b->out[o], NULL, s->nbytes, false);
  }
  if (e == cudaSuccess && st->packed_size)
    e = dev_copy((void **)&b->packed, p->weights + st->packed_offset, st->packed_size, false);
  if (e == cudaSuccess)
    e = dev_copy((void **)&b->scratch, NULL, st->scratch, false);
  return e;
}

static void free_bufs(prof_bufs *b) {
  for (int i = 0; i < NR_STEP_MAX_IO; i++) {
    cudaFree(b->in[i]);
    cudaFree(b->out[i]);
  }
  cudaFree(b->packed);
  cudaFree(b->scratch);
}

/* Runs the step 1 + 3 times; the best timed run in ms, or -1. */
static double time_runs(nr_cuda_ctx *c, const nr_plan *p, const nr_step *st, prof_bufs *b,
                        nr_error *err) {
  nr_exec_args a = {p, st, st->node >= 0 ? &p->graph->nodes[st->node] : NULL, b->in, b->out,
                    b->ins, b->outs, b->packed, b->scratch, NULL, err, c->stream, c};
  cudaEvent_t e0 = NULL, e1 = NULL;
  double best = -1;
  if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess)
    goto done;
  for (int r = 0; r < 4; r++) {
    cudaEventRecord(e0, c->stream);
    if (st->tactic->run(&a)) {
      best = -1;
      break;
    }
    cudaEventRecord(e1, c->stream);
    float ms = 0;
    if (cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
      best = -1;
      break;
    }
    if (r > 0 && (best < 0 || ms < best))
      best = ms;
  }
done:
  if (e0)
    cudaEventDestroy(e0);
  if (e1)
    cudaEventDestroy(e1);
  return best;
}

double nr_cuda_time_step(nr_compile_ctx *cc, int k, const nr_tactic *t) {
  nr_plan *p = cc->plan;
  nr_step saved = p->steps[k], *st = &p->steps[k];
  uint64_t mark = p->weights_size;
  nr_error err = {0};
  double best = -1;
  prof_bufs b;
  memset(&b, 0, sizeof b);
  nr_cuda_ctx c;
  memset(&c, 0, sizeof c);
  c.plan = p;
  c.steps = calloc((size_t)p->n_steps + 1, sizeof *c.steps);
  st->tactic = t;
  nr_tactic_ctx tc = {p, &p->graph->nodes[st->node], st, cc->route, &err, cc->threads,
                      cc->calib, cc->device};
  if (c.steps && nr_cuda_build_handles(&c, &err) && (!t->prepare || !t->prepare(&tc, p, st)) &&
      alloc_bufs(p, st, t, &b) == cudaSuccess)
    best = time_runs(&c, p, st, &b, &err);
  cudaStreamSynchronize(c.stream);
  cudaGetLastError(); /* a failing candidate must not poison later calls */
  if (c.steps && c.steps[k].p && c.steps[k].free_fn)
    c.steps[k].free_fn(c.steps[k].p);
  free(c.steps);
  free_bufs(&b);
  *st = saved;
  p->weights_size = mark;
  return best;
}
