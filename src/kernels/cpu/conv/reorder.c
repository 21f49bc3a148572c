/* reorder.c - the reorder tactics the layout pass inserts (node -1, op_type NULL):
 * float32 rank-4 tensors between PLAIN (NCHW), NHWC and NCHW8C, in all six directions.
 * Each is nr_f32_reorder_<from>_to_<to>; NCHW8C destinations get zeroed pad lanes.
 *
 * Key decision: one conversion routine indexed by (n, c-block, h) rows and
 * parallelized over them; the six tactics only differ in the two layouts they pass,
 * which run() reads from the slots, so a reorder needs no params. */
#include "kernels/cpu/conv/conv_internal.h"

#include <string.h>

typedef struct reorder_job {
  const float *src;
  float *dst;
  nr_layout from, to;
  int64_t n, c, h, w, cb;
} reorder_job;

static int64_t at(const reorder_job *j, nr_layout l, int64_t n, int64_t c, int64_t h,
                  int64_t w) {
  switch (l) {
  case NR_LAYOUT_NHWC: return ((n * j->h + h) * j->w + w) * j->c + c;
  case NR_LAYOUT_NCHW8C: return (((n * j->cb + c / 8) * j->h + h) * j->w + w) * 8 + c % 8;
  default: return ((n * j->c + c) * j->h + h) * j->w + w;
  }
}

/* Row i = (n, c-block, h): 8 channels (or fewer) of one image row. */
static void reorder_task(void *arg, int64_t begin, int64_t end, int thread) {
  const reorder_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t h = i % j->h, nb = i / j->h, b = nb % j->cb, n = nb / j->cb;
    int64_t c0 = b * 8, c1 = c0 + 8 < j->c ? c0 + 8 : j->c;
    if (j->to == NR_LAYOUT_NCHW8C && c1 - c0 < 8)
      memset(j->dst + at(j, NR_LAYOUT_NCHW8C, n, c0, h, 0), 0,
             sizeof(float) * 8 * (size_t)j->w);
    for (int64_t c = c0; c < c1; c++)
      for (int64_t w = 0; w < j->w; w++)
        j->dst[at(j, j->to, n, c, h, w)] = j->src[at(j, j->from, n, c, h, w)];
  }
}

void nr_reorder_f32(const float *src, nr_layout from, float *dst, nr_layout to,
                    const int64_t *dims, nr_threadpool *pool) {
  reorder_job j = {src, dst, from, to, dims[0], dims[1], dims[2], dims[3],
                   nr_ceil8(dims[1]) / 8};
  nr_parallel_for(pool, j.n * j.cb * j.h, 4, 0, reorder_task, &j);
}

static bool reorder_supports(const nr_tactic_ctx *c) {
  const nr_slot *s = nr_step_in(c, 0), *d = nr_step_out(c, 0);
  return s && d && s->dtype == NR_DTYPE_FLOAT && s->rank == 4 && d->rank == 4 &&
         !memcmp(s->dims, d->dims, sizeof(int64_t) * 4);
}

static nr_status reorder_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return NR_OK;
}

static nr_status reorder_run(const nr_exec_args *a) {
  const nr_slot *s = a->in_slot[0], *d = a->out_slot[0];
  nr_reorder_f32(a->in[0], s->layout, a->out[0], d->layout, s->dims, a->pool);
  return NR_OK;
}

#define REORDER(from, to, lf, lt)                                                      \
  {"nr_f32_reorder_" from "_to_" to, "", NULL, "nnroute", "reorder", lt, 0, 0,         \
   reorder_supports, reorder_prepare, reorder_run},

/* The layout field is the destination layout (what output 0 is). */
const nr_tactic nr_tactics_reorder[] = {
    REORDER("plain", "nhwc", NR_LAYOUT_PLAIN, NR_LAYOUT_NHWC)
    REORDER("nhwc", "plain", NR_LAYOUT_NHWC, NR_LAYOUT_PLAIN)
    REORDER("plain", "nchw8c", NR_LAYOUT_PLAIN, NR_LAYOUT_NCHW8C)
    REORDER("nchw8c", "plain", NR_LAYOUT_NCHW8C, NR_LAYOUT_PLAIN)
    REORDER("nhwc", "nchw8c", NR_LAYOUT_NHWC, NR_LAYOUT_NCHW8C)
    REORDER("nchw8c", "nhwc", NR_LAYOUT_NCHW8C, NR_LAYOUT_NHWC)
    {0},
};

const nr_tactic *nr_reorder_tactic(nr_layout from, nr_layout to) {
  static const nr_layout pairs[6][2] = {
      {NR_LAYOUT_PLAIN, NR_LAYOUT_NHWC},   {NR_LAYOUT_NHWC, NR_LAYOUT_PLAIN},
      {NR_LAYOUT_PLAIN, NR_LAYOUT_NCHW8C}, {NR_LAYOUT_NCHW8C, NR_LAYOUT_PLAIN},
      {NR_LAYOUT_NHWC, NR_LAYOUT_NCHW8C},  {NR_LAYOUT_NCHW8C, NR_LAYOUT_NHWC}};
  for (int i = 0; i < 6; i++)
    if (pairs[i][0] == from && pairs[i][1] == to)
      return &nr_tactics_reorder[i];
  return NULL;
}
