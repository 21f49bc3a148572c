/* tactics_pool_nhwc.c - the NHWC pooling tactics (table nr_tactics_cpu_pool_nhwc):
 * 2-D MaxPool and AveragePool (nr_f32_{max,avg}pool2d_nhwc__{avx2,portable}) and
 * GlobalAveragePool (nr_f32_gavgpool_nhwc__*), float32 rank 4, layout NHWC.
 *
 * Key decision: these tactics follow their input. supports() accepts a step only
 * where the layout pass will hand input 0 over in NHWC (nr_layout_predict: an NHWC
 * conv, or an elementwise step after one, produces it), and their priority is above
 * the PLAIN rows', so an NHWC chain (int8 convs, conv.layout=nhwc) pools in place
 * instead of reordering to PLAIN and back, while a PLAIN network never sees them.
 * layout.propagate=off turns the following off (the knob's "run them PLAIN").
 * Windows are resolved by the same code as the PLAIN rows (nr_pool2d_of_node, the
 * reference's nr_window), so pads, ceil_mode and auto_pad agree with the oracle; the
 * knobs honoured are the PLAIN rows' (pool.tactic through algo "vector",
 * reduce.reassoc, eltwise.threads). */
#include "kernels/cpu/eltwise/eltwise_knobs.h"
#include "kernels/cpu/norm/norm_knobs.h"
#include "kernels/cpu/norm/pool_nhwc.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <string.h>

#define GRAIN 16384

static bool is_f32_4d(const nr_slot *s) {
  return s && s->dtype == NR_DTYPE_FLOAT && s->rank == 4;
}

static void set_threads(const nr_tactic_ctx *c, nr_step *step) {
  if (nr_route_is(c->route, NR_KNOB_ELTWISE_THREADS, c->node, "1"))
    step->threads = 1;
}

static bool layouts_ok(const nr_exec_args *a) {
  return a->in_slot[0]->layout == NR_LAYOUT_NHWC && a->out_slot[0]->layout == NR_LAYOUT_NHWC;
}

static nr_status layout_error(const nr_exec_args *a) {
  return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: input '%s' (%s) and output '%s' (%s) must "
                   "be NHWC", a->step->tactic->id, a->in_slot[0]->name,
                   nr_layout_name(a->in_slot[0]->layout), a->out_slot[0]->name,
                   nr_layout_name(a->out_slot[0]->layout));
}

/* Runs fn over `items` work items of `per_item` elements each, in tasks of about
 * GRAIN elements, serially when the whole is small. */
static void run_items(const nr_exec_args *a, int64_t items, int64_t per_item, nr_task_fn fn,
                      void *job) {
  if (items < 2 || items * per_item < 2 * GRAIN) {
    fn(job, 0, items, 0);
    return;
  }
  int64_t grain = GRAIN / (per_item ? per_item : 1);
  nr_parallel_for(a->pool, items, grain < 1 ? 1 : grain, a->step->threads, fn, job);
}

/* ---- MaxPool / AveragePool -------------------------------------------------------- */

static bool pool_window(const nr_tactic_ctx *c, nr_pool2d *p) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || !is_f32_4d(x) || !is_f32_4d(y) || c->step->n_in != 1 ||
      (c->step->n_out > 1 && nr_step_out(c, 1)))
    return false;
  return nr_pool2d_of_node(c->node, x->dims, y->dims, p);
}

static bool pool_supports(const nr_tactic_ctx *c) {
  nr_pool2d p;
  return pool_window(c, &p) && nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC);
}

static nr_status pool_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  nr_pool2d p;
  if (!pool_window(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: pool window no longer supported",
                     step->tactic->id);
  memcpy(step->params, &p, sizeof p);
  set_threads(c, step);
  return NR_OK;
}

typedef struct pool_job {
  nr_pool2d p;
  nr_pool_nhwc_geom g;
  bool avx2;
  const float *x;
  float *y;
} pool_job;

/* Item i = output row i % oh of image i / oh. */
static void pool_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pool_job *j = arg;
  const nr_pool_nhwc_geom *g = &j->g;
  while (begin < end) {
    int64_t n = begin / g->oh, oy0 = begin % g->oh;
    int64_t oy1 = oy0 + (end - begin) < g->oh ? oy0 + (end - begin) : g->oh;
    const float *x = j->x + n * g->ih * g->iw * g->c;
    float *y = j->y + n * g->oh * g->ow * g->c;
    if (j->avx2)
      nr_f32_pool2d_nhwc__avx2(&j->p, g, x, y, oy0, oy1);
    else
      nr_f32_pool2d_nhwc__portable(&j->p, g, x, y, oy0, oy1);
    begin += oy1 - oy0;
  }
}

static nr_status pool_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  if (!layouts_ok(a))
    return layout_error(a);
  pool_job j = {.avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0, .x = a->in[0],
                .y = a->out[0],
                .g = {x->dims[2], x->dims[3], x->dims[1], y->dims[2], y->dims[3]}};
  memcpy(&j.p, a->step->params, sizeof j.p);
  int64_t per_row = (int64_t)j.p.kh * j.p.kw * j.g.ow * j.g.c;
  run_items(a, x->dims[0] * j.g.oh, per_row, pool_task, &j);
  return NR_OK;
}

/* ---- GlobalAveragePool ------------------------------------------------------------ */

static bool gap_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  return c->node && is_f32_4d(x) && is_f32_4d(y) && c->step->n_out == 1 &&
         y->dims[0] == x->dims[0] && y->dims[1] == x->dims[1] && y->dims[2] == 1 &&
         y->dims[3] == 1 && x->dims[2] * x->dims[3] > 0 &&
         nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC);
}

static nr_status gap_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  step->params[0] = nr_route_is(c->route, NR_KNOB_REDUCE_REASSOC, NULL, "on");
  set_threads(c, step);
  return NR_OK;
}

#define GAP_CH 64 /* channels per work item */

typedef struct gap_job {
  bool avx2, reassoc;
  const float *x;
  float *y;
  int64_t c, hw, chunks;
} gap_job;

/* Item i = channels [64 k, 64 k + 64) of image n, i = n * chunks + k. */
static void gap_task(void *arg, int64_t begin, int64_t end, int thread) {
  const gap_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t n = i / j->chunks, c0 = i % j->chunks * GAP_CH;
    int64_t cn = j->c - c0 < GAP_CH ? j->c - c0 : GAP_CH;
    const float *x = j->x + n * j->hw * j->c + c0;
    float *y = j->y + n * j->c + c0;
    if (j->avx2)
      nr_f32_gavgpool_nhwc__avx2(x, j->hw, j->c, cn, j->reassoc, y);
    else
      nr_f32_gavgpool_nhwc__portable(x, j->hw, j->c, cn, j->reassoc, y);
  }
}

static nr_status gap_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  if (x->layout != NR_LAYOUT_NHWC || a->out_slot[0]->layout == NR_LAYOUT_NCHW8C)
    return layout_error(a);
  gap_job j = {.avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0,
               .reassoc = a->step->params[0] != 0, .x = a->in[0], .y = a->out[0],
               .c = x->dims[1], .hw = x->dims[2] * x->dims[3],
               .chunks = (x->dims[1] + GAP_CH - 1) / GAP_CH};
  run_items(a, x->dims[0] * j.chunks, GAP_CH * j.hw, gap_task, &j);
  return NR_OK;
}

/* ---- the table -------------------------------------------------------------------- */

#define NHWC_ROWS(stem, op, sup, prep, run)                                            \
  {"nr_f32_" stem "_nhwc__avx2", "", op, "nnroute", "vector", NR_LAYOUT_NHWC,          \
   NR_ISA_AVX2, 25, sup, prep, run},                                                   \
  {"nr_f32_" stem "_nhwc__portable", "", op, "nnroute", "vector", NR_LAYOUT_NHWC, 0,   \
   15, sup, prep, run},

const nr_tactic nr_tactics_cpu_pool_nhwc[] = {
    NHWC_ROWS("maxpool2d", "MaxPool", pool_supports, pool_prepare, pool_run)
    NHWC_ROWS("avgpool2d", "AveragePool", pool_supports, pool_prepare, pool_run)
    NHWC_ROWS("gavgpool", "GlobalAveragePool", gap_supports, gap_prepare, gap_run)
    {0},
};
