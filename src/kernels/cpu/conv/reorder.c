/* reorder.c - the reorder tactics the layout pass inserts (node -1, op_type NULL):
 * float32 rank-4 tensors between PLAIN (NCHW), NHWC and NCHW8C, in all six directions.
 * Each is nr_f32_reorder_<from>_to_<to>; NCHW8C destinations get zeroed pad lanes.
 *
 * Key decision: every direction is a tiled transpose or lane copy (transpose.h). Each
 * image is cut into tiles of up to 64 pixels x 64 channels (16 KiB each way, so a
 * tile's source lines are still in L1 when the next 8 columns read them), the tiles
 * run in parallel over the pool, and the kernel inside a tile is the AVX2 one when
 * nr_cpu_isa() allows it. The six tactics only differ in the two layouts they pass,
 * which run() reads from the slots, so a reorder needs no params. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/transpose.h"

#include <string.h>

#define TILE 64 /* pixels and channels of one task (a multiple of 8) */

typedef struct reorder_job {
  const float *src;
  float *dst;
  nr_layout from, to;
  int64_t n, c, hw, cb; /* cb: blocks of 8 channels */
  int64_t pt, ct;       /* tiles per image along pixels and channels */
  bool avx2;
} reorder_job;

typedef void (*tr_fn)(const float *, int64_t, float *, int64_t, int64_t, int64_t, int64_t);

static void tile_task(const reorder_job *j, int64_t n, int64_t p0, int64_t p1, int64_t c0,
                      int64_t c1) {
  tr_fn tr = j->avx2 ? nr_f32_transpose__avx2 : nr_f32_transpose__portable;
  tr_fn cp = j->avx2 ? nr_f32_copy_lanes__avx2 : nr_f32_copy_lanes__portable;
  const float *s = j->src;
  float *d = j->dst;
  int64_t C = j->c, HW = j->hw, np = p1 - p0;
  if (j->from == NR_LAYOUT_PLAIN && j->to == NR_LAYOUT_NHWC) {
    tr(s + (n * C + c0) * HW + p0, HW, d + (n * HW + p0) * C + c0, C, c1 - c0, np, c1 - c0);
    return;
  }
  if (j->from == NR_LAYOUT_NHWC && j->to == NR_LAYOUT_PLAIN) {
    tr(s + (n * HW + p0) * C + c0, C, d + (n * C + c0) * HW + p0, HW, np, c1 - c0, np);
    return;
  }
  for (int64_t b = c0 / 8; b * 8 < c1; b++) { /* one block of 8 channels at a time */
    int64_t cc = C - b * 8 < 8 ? C - b * 8 : 8;
    float *d8 = d + ((n * j->cb + b) * HW + p0) * 8;
    const float *s8 = s + ((n * j->cb + b) * HW + p0) * 8;
    if (j->from == NR_LAYOUT_PLAIN && j->to == NR_LAYOUT_NCHW8C)
      tr(s + (n * C + b * 8) * HW + p0, HW, d8, 8, cc, np, 8);
    else if (j->from == NR_LAYOUT_NCHW8C && j->to == NR_LAYOUT_PLAIN)
      tr(s8, 8, d + (n * C + b * 8) * HW + p0, HW, np, cc, np);
    else if (j->from == NR_LAYOUT_NHWC && j->to == NR_LAYOUT_NCHW8C)
      cp(s + (n * HW + p0) * C + b * 8, C, d8, 8, np, cc, 8);
    else /* NCHW8C -> NHWC */
      cp(s8, 8, d + (n * HW + p0) * C + b * 8, C, np, cc, cc);
  }
}

/* Task i = (image, pixel tile, channel tile). */
static void reorder_task(void *arg, int64_t begin, int64_t end, int thread) {
  const reorder_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t ct = i % j->ct, pt = (i / j->ct) % j->pt, n = i / (j->ct * j->pt);
    int64_t p0 = pt * TILE, p1 = p0 + TILE < j->hw ? p0 + TILE : j->hw;
    int64_t c0 = ct * TILE, c1 = c0 + TILE < j->c ? c0 + TILE : j->c;
    tile_task(j, n, p0, p1, c0, c1);
  }
}

static bool same_bytes(nr_layout a, nr_layout b, const int64_t *dims) {
  if (a == b)
    return true;
  /* NHWC and PLAIN coincide when one of C and H * W is 1. */
  return a != NR_LAYOUT_NCHW8C && b != NR_LAYOUT_NCHW8C &&
         (dims[1] == 1 || dims[2] * dims[3] == 1);
}

void nr_reorder_f32_isa(const float *src, nr_layout from, float *dst, nr_layout to,
                        const int64_t *dims, nr_threadpool *pool, unsigned isa) {
  int64_t hw = dims[2] * dims[3];
  if (same_bytes(from, to, dims)) {
    uint64_t count = (uint64_t)dims[0] * (uint64_t)(from == NR_LAYOUT_NCHW8C
                                                        ? nr_ceil8(dims[1]) : dims[1]);
    if (dst != src && count > 0 && hw > 0)
      memcpy(dst, src, sizeof(float) * count * (uint64_t)hw);
    return;
  }
  reorder_job j = {src, dst, from, to, dims[0], dims[1], hw, nr_ceil8(dims[1]) / 8,
                   (hw + TILE - 1) / TILE, (dims[1] + TILE - 1) / TILE,
                   (isa & NR_ISA_AVX2) != 0};
  int64_t tasks = j.n * j.pt * j.ct;
  if (tasks > 0)
    nr_parallel_for(pool, tasks, 4, 0, reorder_task, &j);
}

void nr_reorder_f32(const float *src, nr_layout from, float *dst, nr_layout to,
                    const int64_t *dims, nr_threadpool *pool) {
  nr_reorder_f32_isa(src, from, dst, to, dims, pool, nr_cpu_isa());
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
