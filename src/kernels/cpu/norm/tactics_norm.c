/* tactics_norm.c - the normalization family's tactics (Softmax, LogSoftmax,
 * LayerNormalization over trailing axes, inference BatchNormalization (also NHWC),
 * Instance- and GroupNormalization, GlobalAveragePool, ReduceMean over trailing axes,
 * 2-D MaxPool and AveragePool, all float32 PLAIN unless named) and its knobs
 * (softmax.algo,
 * layernorm.algo, pool.tactic, reduce.reassoc; the prepares also honour
 * eltwise.threads).
 *
 * Key decision: every knob lands in the step's params record at prepare (the row
 * config of norm.h, the resolved pool window), so run() only walks rows. Rows are
 * independent, so a step parallelizes over rows in chunks of about 16K elements; a
 * GlobalAveragePool over few large planes stays one task per plane. Pool windows are
 * resolved with the reference's nr_window code, so pads, ceil_mode and auto_pad agree
 * with the oracle by construction. */
#include "ir/window.h"
#include "kernels/cpu/eltwise/eltwise_knobs.h"
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/norm_knobs.h"
#include "kernels/cpu/norm/norm_seq.h"
#include "passes/fate.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <math.h>
#include <string.h>

#define GRAIN 16384

static bool is_f32(const nr_slot *s) { return s && s->dtype == NR_DTYPE_FLOAT; }

static bool plain_same(const nr_slot *a, const nr_slot *b) {
  if (!a || !b || a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++)
    p *= d[i];
  return p;
}

static bool is_avx2(const nr_exec_args *a) { return (a->step->tactic->isa & NR_ISA_AVX2) != 0; }

static bool reassoc(const nr_tactic_ctx *c) {
  return nr_route_is(c->route, NR_KNOB_REDUCE_REASSOC, NULL, "on");
}

/* eltwise.threads=1 (tactics_eltwise.c's knob): run on the calling thread only. */
static void set_threads(const nr_tactic_ctx *c, nr_step *step) {
  if (nr_route_is(c->route, NR_KNOB_ELTWISE_THREADS, c->node, "1"))
    step->threads = 1;
}

/* Does run_rows split rows x n elements across threads? */
static bool rows_parallel(int64_t rows, int64_t n) {
  return rows >= 2 && rows * n >= 2 * GRAIN;
}

/* Rows of n elements, rows per task so that a task covers ~GRAIN elements. */
static void run_rows(const nr_exec_args *a, int64_t rows, int64_t n, nr_task_fn fn,
                     void *job) {
  if (!rows_parallel(rows, n)) {
    fn(job, 0, rows, 0);
    return;
  }
  int64_t grain = GRAIN / (n ? n : 1);
  nr_parallel_for(a->pool, rows, grain < 1 ? 1 : grain, a->step->threads, fn, job);
}

/* run_rows for kernels that sum NR_SEQ_ROWS rows side by side in the reference's order
 * (reduce.reassoc=off): tasks get whole blocks of NR_SEQ_ROWS rows, as a task of fewer
 * rows runs their chains one after another. efficientnet_b0's first GlobalAveragePool
 * (32 rows of 12544) ran 2.1x slower on two threads than on one, cut into 4-row tasks. */
typedef struct blocks_job {
  nr_task_fn fn;
  void *job;
  int64_t rows;
} blocks_job;

static void blocks_task(void *arg, int64_t begin, int64_t end, int thread) {
  const blocks_job *b = arg;
  int64_t r1 = end * NR_SEQ_ROWS;
  b->fn(b->job, begin * NR_SEQ_ROWS, r1 < b->rows ? r1 : b->rows, thread);
}

static void run_row_blocks(const nr_exec_args *a, int64_t rows, int64_t n, nr_task_fn fn,
                           void *job) {
  int64_t blocks = (rows + NR_SEQ_ROWS - 1) / NR_SEQ_ROWS;
  if (blocks < 2 || !rows_parallel(rows, n)) {
    fn(job, 0, rows, 0);
    return;
  }
  int64_t grain = GRAIN / ((n ? n : 1) * NR_SEQ_ROWS);
  blocks_job b = {fn, job, rows};
  nr_parallel_for(a->pool, blocks, grain < 1 ? 1 : grain, a->step->threads, blocks_task,
                  &b);
}

/* ---- Softmax / LogSoftmax -------------------------------------------------------- */

/* The softmax axis is the last one: opset 13 axis -1, or before 13 an axis that
 * coerces to [prod(dims[:rank-1]), dims[rank-1]]. */
static bool softmax_last_axis(const nr_node *n, int rank) {
  int64_t axis = nr_attr_int(n, "axis", n->opset < 13 ? 1 : -1);
  if (axis < 0)
    axis += rank;
  return rank >= 1 && axis == rank - 1;
}

static bool softmax_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  return c->node && is_f32(x) && is_f32(y) && plain_same(x, y) &&
         softmax_last_axis(c->node, x->rank) && x->dims[x->rank - 1] > 0;
}

static nr_status softmax_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  nr_softmax_cfg cfg = {
      .log = !strcmp(c->node->op_type, "LogSoftmax"),
      .online = nr_route_is(c->route, NR_KNOB_SOFTMAX_ALGO, c->node, "online"),
      .reassoc = reassoc(c),
      .math = nr_route_is(c->route, NR_KNOB_ELTWISE_MATH, NULL, "fast") ? NR_VMATH_FAST
                                                                   : NR_VMATH_ACCURATE,
  };
  memcpy(step->params, &cfg, sizeof cfg);
  set_threads(c, step);
  return NR_OK;
}

typedef struct softmax_job {
  nr_softmax_cfg cfg;
  bool avx2;
  const float *x;
  float *y;
  int64_t n;
} softmax_job;

static void softmax_task(void *arg, int64_t begin, int64_t end, int thread) {
  const softmax_job *j = arg;
  for (int64_t r = begin; r < end; r++) {
    if (j->avx2)
      nr_f32_softmax_row__avx2(&j->cfg, j->x + r * j->n, j->y + r * j->n, j->n);
    else
      nr_f32_softmax_row__portable(&j->cfg, j->x + r * j->n, j->y + r * j->n, j->n);
  }
}

static nr_status softmax_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  softmax_job j = {.avx2 = is_avx2(a), .x = a->in[0], .y = a->out[0],
                   .n = x->dims[x->rank - 1]};
  memcpy(&j.cfg, a->step->params, sizeof j.cfg);
  run_rows(a, prod(x->dims, 0, x->rank - 1), j.n, softmax_task, &j);
  return NR_OK;
}

/* ---- LayerNormalization ----------------------------------------------------------- */

static int ln_axis(const nr_node *n, int rank) {
  int64_t axis = nr_attr_int(n, "axis", -1);
  return (int)(axis < 0 ? axis + rank : axis);
}

/* Scale / B: float32 holding exactly one row (dims equal to X's trailing dims, leading
 * ones allowed), so it never varies across rows. */
static bool ln_param_ok(const nr_slot *p, const nr_slot *x, int axis) {
  if (!is_f32(p) || prod(p->dims, 0, p->rank) != prod(x->dims, axis, x->rank))
    return false;
  for (int d = 0; d < p->rank; d++) {
    int xd = x->rank - p->rank + d;
    if (p->dims[d] != 1 && (xd < axis || p->dims[d] != x->dims[xd]))
      return false;
  }
  return true;
}

static bool ln_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || !is_f32(x) || !is_f32(y) || !plain_same(x, y) || x->rank < 1)
    return false;
  int axis = ln_axis(c->node, x->rank);
  int64_t stash = nr_attr_int(c->node, "stash_type", 1);
  if (axis < 0 || axis >= x->rank || stash != 1 || prod(x->dims, axis, x->rank) < 1)
    return false;
  const nr_slot *s = nr_step_in(c, 1), *b = nr_step_in(c, 2);
  if (!s || !ln_param_ok(s, x, axis) || (b && !ln_param_ok(b, x, axis)))
    return false;
  for (int o = 1; o < c->step->n_out; o++) {
    const nr_slot *m = nr_step_out(c, o);
    if (m && (!is_f32(m) || prod(m->dims, 0, m->rank) != prod(x->dims, 0, axis)))
      return false;
  }
  return true;
}

typedef struct ln_params {
  nr_layernorm_cfg cfg;
  int32_t axis;
} ln_params;

static nr_status ln_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  ln_params p = {
      .cfg = {.one_pass = nr_route_is(c->route, NR_KNOB_LAYERNORM_ALGO, c->node, "one_pass"),
              .reassoc = reassoc(c),
              .eps = nr_attr_float(c->node, "epsilon", 1e-5f)},
      .axis = ln_axis(c->node, nr_step_in(c, 0)->rank),
  };
  memcpy(step->params, &p, sizeof p);
  set_threads(c, step);
  return NR_OK;
}

typedef struct ln_job {
  ln_params p;
  bool avx2;
  const float *x, *scale, *bias;
  float *y, *mean, *inv;
  int64_t n;
} ln_job;

static void ln_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ln_job *j = arg;
  const float *x = j->x + begin * j->n;
  float *y = j->y + begin * j->n, *m = j->mean ? j->mean + begin : NULL,
        *is = j->inv ? j->inv + begin : NULL;
  if (j->avx2)
    nr_f32_layernorm_rows__avx2(&j->p.cfg, x, j->scale, j->bias, y, j->n, end - begin, m, is);
  else
    nr_f32_layernorm_rows__portable(&j->p.cfg, x, j->scale, j->bias, y, j->n, end - begin,
                                    m, is);
}

static nr_status ln_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  ln_job j = {.avx2 = is_avx2(a), .x = a->in[0], .scale = a->in[1],
              .bias = a->step->n_in > 2 ? a->in[2] : NULL, .y = a->out[0],
              .mean = a->step->n_out > 1 ? a->out[1] : NULL,
              .inv = a->step->n_out > 2 ? a->out[2] : NULL};
  memcpy(&j.p, a->step->params, sizeof j.p);
  j.n = prod(x->dims, j.p.axis, x->rank);
  run_row_blocks(a, prod(x->dims, 0, j.p.axis), j.n, ln_task, &j);
  return NR_OK;
}

/* ---- GlobalAveragePool ------------------------------------------------------------ */

static bool gap_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  return c->node && is_f32(x) && is_f32(y) && x->rank >= 3 && y->rank == x->rank &&
         prod(x->dims, 2, x->rank) > 0;
}

static nr_status gap_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  step->params[0] = reassoc(c);
  set_threads(c, step);
  return NR_OK;
}

typedef struct gap_job {
  bool avx2, reassoc;
  const float *x;
  float *y;
  int64_t size;
} gap_job;

static void gap_task(void *arg, int64_t begin, int64_t end, int thread) {
  const gap_job *j = arg;
  double s[16];
  for (int64_t p = begin; p < end; p += 16) {
    int64_t k = end - p < 16 ? end - p : 16;
    const float *x = j->x + p * j->size;
    if (j->avx2)
      nr_f32_sum_rows__avx2(x, j->size, k, j->reassoc, s);
    else
      nr_f32_sum_rows__portable(x, j->size, k, j->reassoc, s);
    for (int64_t i = 0; i < k; i++)
      j->y[p + i] = (float)(s[i] / (double)j->size);
  }
}

static nr_status gap_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  gap_job j = {.avx2 = is_avx2(a), .reassoc = a->step->params[0] != 0, .x = a->in[0],
               .y = a->out[0], .size = prod(x->dims, 2, x->rank)};
  run_row_blocks(a, x->dims[0] * x->dims[1], j.size, gap_task, &j);
  return NR_OK;
}

/* ReduceMean over the trailing axes (a network that ends in x.mean([2, 3]), like
 * shufflenet_v2): the row means of GlobalAveragePool, whatever keepdims says, since
 * the kept dims are ones. Axes as an input (opset 18) stay with the reference.
 * params[1]: the number of trailing axes. */
static int trailing_axes(const nr_node *n, int rank) {
  size_t count = 0;
  const int64_t *ax = nr_attr_ints(n, "axes", &count);
  if (!ax || count == 0 || count > (size_t)rank || (n->n_inputs > 1 && n->inputs[1] >= 0))
    return 0;
  bool seen[NR_MAX_RANK] = {0};
  for (size_t i = 0; i < count; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + rank : ax[i];
    if (a < rank - (int64_t)count || a >= rank || seen[a])
      return 0;
    seen[a] = true;
  }
  return (int)count;
}

static bool rmean_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || !is_f32(x) || !is_f32(y) || x->rank < 1)
    return false;
  int k = trailing_axes(c->node, x->rank);
  return k > 0 && prod(x->dims, x->rank - k, x->rank) > 0 &&
         prod(y->dims, 0, y->rank) == prod(x->dims, 0, x->rank - k);
}

static nr_status rmean_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  step->params[0] = reassoc(c);
  step->params[1] = (uint8_t)trailing_axes(c->node, nr_step_in(c, 0)->rank);
  set_threads(c, step);
  return NR_OK;
}

static nr_status rmean_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  int lead = x->rank - a->step->params[1];
  gap_job j = {.avx2 = is_avx2(a), .reassoc = a->step->params[0] != 0, .x = a->in[0],
               .y = a->out[0], .size = prod(x->dims, lead, x->rank)};
  run_row_blocks(a, prod(x->dims, 0, lead), j.size, gap_task, &j);
  return NR_OK;
}

/* ---- BatchNormalization (inference), Instance- and GroupNormalization ------------- */

/* A float32 parameter of exactly count elements (any shape). */
static bool count_param(const nr_slot *p, int64_t count) {
  return is_f32(p) && p->layout == NR_LAYOUT_PLAIN && prod(p->dims, 0, p->rank) == count;
}

/* N x C x ... float32 PLAIN in and out, same dims, one output. */
static bool nc_io(const nr_tactic_ctx *c, int n_in) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || c->step->n_in != n_in || !is_f32(x) || !is_f32(y) || x->rank < 2 ||
      x->layout != NR_LAYOUT_PLAIN || !plain_same(x, y))
    return false;
  for (int o = 1; o < c->step->n_out; o++)
    if (nr_step_out(c, o))
      return false;
  return true;
}

/* Inference-mode BatchNormalization with per-channel statistics (spatial=1). Its
 * parameters need not be constants: run() derives each plane's coefficients. */
static bool bn_supports(const nr_tactic_ctx *c) {
  const nr_node *n = c->node;
  if (!nc_io(c, 5) || (n->opset >= 14 && nr_attr_int(n, "training_mode", 0)) ||
      (n->opset < 9 && nr_attr_int(n, "spatial", 1) == 0))
    return false;
  int64_t ch = nr_step_in(c, 0)->dims[1];
  for (int i = 1; i < 5; i++)
    if (!count_param(nr_step_in(c, i), ch))
      return false;
  return true;
}

static nr_status bn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  float eps = nr_attr_float(c->node, "epsilon", 1e-5f);
  memcpy(step->params, &eps, sizeof eps);
  set_threads(c, step);
  return NR_OK;
}

typedef struct bn_job {
  bool avx2;
  double eps;
  const float *x, *scale, *bias, *mean, *var;
  float *y;
  int64_t c, s;
} bn_job;

/* Planes (sample, channel) [begin, end): y = (x - mean) * (scale / sqrt(var + eps)) + B,
 * the coefficient in double as the reference computes it. */
static void bn_task(void *arg, int64_t begin, int64_t end, int thread) {
  const bn_job *j = arg;
  for (int64_t p = begin; p < end; p++) {
    int64_t ch = p % j->c;
    float a = (float)(j->scale[ch] / sqrt((double)j->var[ch] + j->eps));
    const float *x = j->x + p * j->s;
    float *y = j->y + p * j->s;
    if (j->avx2)
      nr_f32_affine_row__avx2(x, y, j->s, j->mean[ch], a, j->bias[ch]);
    else
      nr_f32_affine_row__portable(x, y, j->s, j->mean[ch], a, j->bias[ch]);
  }
}

static nr_status bn_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  float eps;
  memcpy(&eps, a->step->params, sizeof eps);
  bn_job j = {.avx2 = is_avx2(a), .eps = eps, .x = a->in[0], .scale = a->in[1],
              .bias = a->in[2], .mean = a->in[3], .var = a->in[4], .y = a->out[0],
              .c = x->dims[1], .s = prod(x->dims, 2, x->rank)};
  run_rows(a, x->dims[0] * j.c, j.s, bn_task, &j);
  return NR_OK;
}

/* The NHWC rows (nr_f32_batchnorm_nhwc__*): a rank-4 BatchNormalization the layout
 * pass hands over in NHWC (after an NHWC conv, conv.layout=nhwc), so a chain of NHWC
 * convs with a BatchNormalization between them needs no reorders around it. Its
 * priority is above the PLAIN rows'; a PLAIN network never sees it. */
static bool bn_nhwc_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  const nr_node *n = c->node;
  if (!n || c->step->n_in != 5 || !is_f32(x) || !is_f32(y) || x->rank != 4 ||
      !plain_same(x, y) || (n->opset >= 14 && nr_attr_int(n, "training_mode", 0)) ||
      (n->opset < 9 && nr_attr_int(n, "spatial", 1) == 0) ||
      !nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC))
    return false;
  for (int o = 1; o < c->step->n_out; o++)
    if (nr_step_out(c, o))
      return false;
  for (int i = 1; i < 5; i++)
    if (!count_param(nr_step_in(c, i), x->dims[1]))
      return false;
  return true;
}

/* m, a and b of every channel in scratch (3 C floats), computed on every run since
 * the parameters need not be constants. */
static nr_status bn_nhwc_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  step->scratch = 3 * (uint64_t)nr_step_in(c, 0)->dims[1] * sizeof(float);
  return bn_prepare(c, plan, step);
}

typedef struct bn_nhwc_job {
  bool avx2;
  const float *x, *m, *a, *b;
  float *y;
  int64_t c;
} bn_nhwc_job;

static void bn_nhwc_task(void *arg, int64_t begin, int64_t end, int thread) {
  const bn_nhwc_job *j = arg;
  const float *x = j->x + begin * j->c;
  float *y = j->y + begin * j->c;
  if (j->avx2)
    nr_f32_affine_rows__avx2(x, y, end - begin, j->c, j->m, j->a, j->b);
  else
    nr_f32_affine_rows__portable(x, y, end - begin, j->c, j->m, j->a, j->b);
}

static nr_status bn_nhwc_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0];
  if (x->layout != NR_LAYOUT_NHWC || a->out_slot[0]->layout != NR_LAYOUT_NHWC)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: '%s' (%s) must arrive and leave in NHWC",
                     a->step->tactic->id, x->name, nr_layout_name(x->layout));
  float eps;
  memcpy(&eps, a->step->params, sizeof eps);
  int64_t ch = x->dims[1];
  float *coef = a->scratch;
  const float *scale = a->in[1], *bias = a->in[2], *mean = a->in[3], *var = a->in[4];
  for (int64_t k = 0; k < ch; k++) {
    coef[k] = mean[k];
    coef[ch + k] = (float)(scale[k] / sqrt((double)var[k] + eps));
    coef[2 * ch + k] = bias[k];
  }
  bn_nhwc_job j = {.avx2 = is_avx2(a), .x = a->in[0], .m = coef, .a = coef + ch,
                   .b = coef + 2 * ch, .y = a->out[0], .c = ch};
  run_rows(a, x->dims[0] * x->dims[2] * x->dims[3], ch, bn_nhwc_task, &j);
  return NR_OK;
}

/* Groups and whether scale/bias are per channel: InstanceNormalization is C groups
 * per channel; GroupNormalization scales per group at opset 18, per channel from 21.
 * 0 groups when the node is not one these kernels run. */
static int64_t gn_groups(const nr_node *n, int64_t ch, bool *per_channel) {
  *per_channel = true;
  if (!strcmp(n->op_type, "InstanceNormalization"))
    return ch;
  int64_t g = nr_attr_int(n, "num_groups", 0);
  *per_channel = n->opset >= 21;
  return g > 0 && ch % g == 0 ? g : 0;
}

static bool gn_supports(const nr_tactic_ctx *c) {
  if (!nc_io(c, 3))
    return false;
  const nr_slot *x = nr_step_in(c, 0);
  bool pc;
  int64_t g = gn_groups(c->node, x->dims[1], &pc), count = pc ? x->dims[1] : g;
  return g > 0 && prod(x->dims, 2, x->rank) > 0 && count_param(nr_step_in(c, 1), count) &&
         count_param(nr_step_in(c, 2), count);
}

static nr_status gn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  const nr_slot *x = nr_step_in(c, 0);
  nr_groupnorm_cfg cfg = {.reassoc = reassoc(c),
                          .eps = nr_attr_float(c->node, "epsilon", 1e-5f),
                          .s = prod(x->dims, 2, x->rank)};
  cfg.groups = gn_groups(c->node, x->dims[1], &cfg.per_channel);
  cfg.cpg = x->dims[1] / cfg.groups;
  _Static_assert(sizeof cfg <= NR_TACTIC_PARAMS, "groupnorm params too big");
  memcpy(step->params, &cfg, sizeof cfg);
  set_threads(c, step);
  return NR_OK;
}

typedef struct gn_job {
  nr_groupnorm_cfg cfg;
  bool avx2;
  const float *x, *scale, *bias;
  float *y;
} gn_job;

static void gn_task(void *arg, int64_t begin, int64_t end, int thread) {
  const gn_job *j = arg;
  if (j->avx2)
    nr_f32_groupnorm_rows__avx2(&j->cfg, j->x, j->scale, j->bias, j->y, begin, end - begin);
  else
    nr_f32_groupnorm_rows__portable(&j->cfg, j->x, j->scale, j->bias, j->y, begin,
                                    end - begin);
}

static nr_status gn_run(const nr_exec_args *a) {
  gn_job j = {.avx2 = is_avx2(a), .x = a->in[0], .scale = a->in[1], .bias = a->in[2],
              .y = a->out[0]};
  memcpy(&j.cfg, a->step->params, sizeof j.cfg);
  run_row_blocks(a, a->in_slot[0]->dims[0] * j.cfg.groups, j.cfg.cpg * j.cfg.s, gn_task,
                 &j);
  return NR_OK;
}

/* ---- MaxPool / AveragePool 2-D ---------------------------------------------------- */

/* Resolves the node's window with the reference's code; false if it is not a plain
 * float32 2-D pool this tactic runs. */
static bool window_of(const nr_node *n, const int64_t *xdims, const int64_t *ydims,
                      nr_pool2d *p) {
  nr_error err = {0};
  nr_op_ctx oc = {.node = n, .err = &err};
  nr_window w;
  if (nr_window_read(&oc, 2, NULL, &w) || nr_window_forward(&oc, &w, xdims + 2))
    return false;
  if (w.out[0] != ydims[2] || w.out[1] != ydims[3])
    return false;
  *p = (nr_pool2d){
      .max = !strcmp(n->op_type, "MaxPool"),
      .count_pad = nr_attr_int(n, "count_include_pad", 0) != 0,
      .kh = (int32_t)w.kernel[0], .kw = (int32_t)w.kernel[1],
      .sh = (int32_t)w.stride[0], .sw = (int32_t)w.stride[1],
      .dh = (int32_t)w.dil[0], .dw = (int32_t)w.dil[1],
      .pt = (int32_t)w.pad_b[0], .pl = (int32_t)w.pad_b[1],
      .pb = (int32_t)w.pad_e[0], .pr = (int32_t)w.pad_e[1]};
  return true;
}

bool nr_pool2d_of_node(const nr_node *n, const int64_t *xdims, const int64_t *ydims,
                       nr_pool2d *p) {
  return window_of(n, xdims, ydims, p);
}

static bool pool_window(const nr_tactic_ctx *c, nr_pool2d *p) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || !is_f32(x) || !is_f32(y) || x->rank != 4 || y->rank != 4 ||
      c->step->n_in != 1 || (c->step->n_out > 1 && nr_step_out(c, 1)))
    return false;
  return window_of(c->node, x->dims, y->dims, p);
}

static bool pool_supports(const nr_tactic_ctx *c) {
  nr_pool2d p;
  return pool_window(c, &p);
}

/* The AVX-512 rows take the windows their kernel runs in registers. */
static bool pool512_supports(const nr_tactic_ctx *c) {
  nr_pool2d p;
  return pool_window(c, &p) && nr_pool2d_in_registers(&p);
}

static nr_status pool_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  nr_pool2d p;
  if (!pool_window(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "pool window no longer supported");
  memcpy(step->params, &p, sizeof p);
  set_threads(c, step);
  return NR_OK;
}

typedef void (*pool_plane_fn)(const nr_pool2d *p, const float *x, int64_t ih, int64_t iw,
                              float *y, int64_t oh, int64_t ow);

typedef struct pool_job {
  nr_pool2d p;
  pool_plane_fn plane; /* the tactic's kernel for one plane */
  const float *x;
  float *y;
  int64_t ih, iw, oh, ow;
} pool_job;

static void pool_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pool_job *j = arg;
  for (int64_t pl = begin; pl < end; pl++)
    j->plane(&j->p, j->x + pl * j->ih * j->iw, j->ih, j->iw, j->y + pl * j->oh * j->ow,
             j->oh, j->ow);
}

static nr_status pool_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  unsigned isa = a->step->tactic->isa;
  pool_job j = {.plane = isa & NR_ISA_AVX512 ? nr_f32_pool2d__avx512
                         : isa & NR_ISA_AVX2 ? nr_f32_pool2d__avx2
                                             : nr_f32_pool2d__portable,
                .x = a->in[0], .y = a->out[0], .ih = x->dims[2],
                .iw = x->dims[3],
                .oh = y->dims[2], .ow = y->dims[3]};
  memcpy(&j.p, a->step->params, sizeof j.p);
  int64_t work = (int64_t)j.p.kh * j.p.kw * j.oh * j.ow;
  run_rows(a, x->dims[0] * x->dims[1], work, pool_task, &j);
  return NR_OK;
}

/* ---- the tables ------------------------------------------------------------------- */

#define ROWS(stem, op, sup, prep, run)                                                 \
  {"nr_f32_" stem "__avx2", "", op, "nnroute", "vector", NR_LAYOUT_PLAIN, NR_ISA_AVX2,  \
   20, sup, prep, run},                                                                \
  {"nr_f32_" stem "__portable", "", op, "nnroute", "vector", NR_LAYOUT_PLAIN, 0, 10,    \
   sup, prep, run},

const nr_tactic nr_tactics_cpu_norm[] = {
    ROWS("softmax", "Softmax", softmax_supports, softmax_prepare, softmax_run)
    ROWS("logsoftmax", "LogSoftmax", softmax_supports, softmax_prepare, softmax_run)
    ROWS("layernorm", "LayerNormalization", ln_supports, ln_prepare, ln_run)
    ROWS("gavgpool", "GlobalAveragePool", gap_supports, gap_prepare, gap_run)
    ROWS("reduce_mean_tail", "ReduceMean", rmean_supports, rmean_prepare, rmean_run)
    ROWS("batchnorm", "BatchNormalization", bn_supports, bn_prepare, bn_run)
    {"nr_f32_batchnorm_nhwc__avx2", "", "BatchNormalization", "nnroute", "vector",
     NR_LAYOUT_NHWC, NR_ISA_AVX2, 22, bn_nhwc_supports, bn_nhwc_prepare, bn_nhwc_run},
    {"nr_f32_batchnorm_nhwc__portable", "", "BatchNormalization", "nnroute", "vector",
     NR_LAYOUT_NHWC, 0, 12, bn_nhwc_supports, bn_nhwc_prepare, bn_nhwc_run},
    ROWS("instancenorm", "InstanceNormalization", gn_supports, gn_prepare, gn_run)
    ROWS("groupnorm", "GroupNormalization", gn_supports, gn_prepare, gn_run)
    {"nr_f32_maxpool2d__avx512", "", "MaxPool", "nnroute", "vector", NR_LAYOUT_PLAIN,
     NR_ISA_AVX512, 21, pool512_supports, pool_prepare, pool_run},
    {"nr_f32_avgpool2d__avx512", "", "AveragePool", "nnroute", "vector", NR_LAYOUT_PLAIN,
     NR_ISA_AVX512, 21, pool512_supports, pool_prepare, pool_run},
    {"nr_f32_maxpool2d__avx2", "", "MaxPool", "nnroute", "vector", NR_LAYOUT_PLAIN,
     NR_ISA_AVX2, 20, pool_supports, pool_prepare, pool_run},
    {"nr_f32_avgpool2d__avx2", "", "AveragePool", "nnroute", "vector", NR_LAYOUT_PLAIN,
     NR_ISA_AVX2, 20, pool_supports, pool_prepare, pool_run},
    {"nr_f32_maxpool2d__portable", "", "MaxPool", "nnroute", "vector", NR_LAYOUT_PLAIN, 0,
     10, pool_supports, pool_prepare, pool_run},
    {"nr_f32_avgpool2d__portable", "", "AveragePool", "nnroute", "vector",
     NR_LAYOUT_PLAIN, 0, 10, pool_supports, pool_prepare, pool_run},
    {0},
};

/* ---- knobs ------------------------------------------------------------------------ */

static bool f32_input(const nr_graph *g, const nr_node *n) {
  return !n->domain[0] && n->n_inputs > 0 && n->inputs[0] >= 0 &&
         g->tensors[n->inputs[0]].value.dtype == NR_DTYPE_FLOAT;
}

static const nr_value *in_value(const nr_graph *g, const nr_node *n, int i) {
  return i < n->n_inputs && n->inputs[i] >= 0 ? &g->tensors[n->inputs[i]].value : NULL;
}

static const nr_value *out_value(const nr_graph *g, const nr_node *n) {
  return n->n_outputs > 0 && n->outputs[0] >= 0 ? &g->tensors[n->outputs[0]].value : NULL;
}

/* A Softmax that recognize.attention turns into Attention is gone by default. */
static bool applies_softmax(const nr_graph *g, const nr_node *n) {
  if (!n || !f32_input(g, n))
    return false;
  if (strcmp(n->op_type, "Softmax") && strcmp(n->op_type, "LogSoftmax"))
    return false;
  return softmax_last_axis(n, in_value(g, n, 0)->rank) && nr_fate_survives(g, n);
}

static bool applies_layernorm(const nr_graph *g, const nr_node *n) {
  return n && f32_input(g, n) && !strcmp(n->op_type, "LayerNormalization");
}

/* The nodes pool.tactic steers: what pool_supports / gap_supports accept. */
static bool applies_pool(const nr_graph *g, const nr_node *n) {
  if (!n || !f32_input(g, n))
    return false;
  const nr_value *x = in_value(g, n, 0), *y = out_value(g, n);
  if (!y || y->dtype != NR_DTYPE_FLOAT || y->rank != x->rank)
    return false;
  if (!strcmp(n->op_type, "GlobalAveragePool"))
    return x->rank >= 3 && prod(x->dims, 2, x->rank) > 0;
  nr_pool2d p;
  if (strcmp(n->op_type, "MaxPool") && strcmp(n->op_type, "AveragePool"))
    return false;
  if (x->rank != 4 || n->n_inputs != 1 || (n->n_outputs > 1 && n->outputs[1] >= 0))
    return false;
  return window_of(n, x->dims, y->dims, &p);
}

/* InstanceNormalization and GroupNormalization on float32 N x C x ... (what
 * gn_supports takes, shapes aside). */
static bool applies_groupnorm(const nr_graph *g, const nr_node *n) {
  if (!n || !f32_input(g, n) || in_value(g, n, 0)->rank < 2)
    return false;
  return !strcmp(n->op_type, "InstanceNormalization") ||
         !strcmp(n->op_type, "GroupNormalization");
}

bool nr_norm_parallel(const nr_graph *g, const nr_node *n) {
  if (!n || !f32_input(g, n))
    return false;
  const nr_value *x = in_value(g, n, 0), *y = out_value(g, n);
  nr_pool2d p;
  if (applies_softmax(g, n))
    return rows_parallel(prod(x->dims, 0, x->rank - 1), x->dims[x->rank - 1]);
  if (applies_layernorm(g, n)) {
    int axis = ln_axis(n, x->rank);
    return axis >= 0 && axis < x->rank &&
           rows_parallel(prod(x->dims, 0, axis), prod(x->dims, axis, x->rank));
  }
  if (applies_groupnorm(g, n)) {
    bool pc;
    int64_t groups = gn_groups(n, x->dims[1], &pc);
    return groups > 0 && rows_parallel(x->dims[0] * groups, prod(x->dims, 1, x->rank) / groups);
  }
  if (!strcmp(n->op_type, "BatchNormalization") && x->rank >= 2)
    return rows_parallel(x->dims[0] * x->dims[1], prod(x->dims, 2, x->rank));
  if (!applies_pool(g, n))
    return false;
  if (!strcmp(n->op_type, "GlobalAveragePool"))
    return rows_parallel(x->dims[0] * x->dims[1], prod(x->dims, 2, x->rank));
  window_of(n, x->dims, y->dims, &p);
  return rows_parallel(x->dims[0] * x->dims[1], (int64_t)p.kh * p.kw * y->dims[2] * y->dims[3]);
}

static bool applies_reduce(const nr_graph *g, const nr_node *n) {
  if (n)
    return applies_softmax(g, n) || applies_layernorm(g, n) || applies_groupnorm(g, n) ||
           (f32_input(g, n) && (!strcmp(n->op_type, "GlobalAveragePool") ||
                                (!strcmp(n->op_type, "ReduceMean") &&
                                 trailing_axes(n, g->tensors[n->inputs[0]].value.rank))));
  for (int i = 0; g && i < g->n_nodes; i++)
    if (applies_reduce(g, &g->nodes[i]))
      return true;
  return !g;
}

const nr_knob_def nr_knobs_cpu_norm[] = {
    [NR_KNOB_ROW(NR_KNOB_SOFTMAX_ALGO)] =
    {"softmax.algo", "three_pass|online", "three_pass", NR_KNOB_NODE, NR_KNOB_ACCURACY,
     2e-6, "online: max and sum in one sweep with per-lane rescaling (reassociated)",
     applies_softmax, NULL},
    [NR_KNOB_ROW(NR_KNOB_LAYERNORM_ALGO)] =
    {"layernorm.algo", "two_pass|one_pass", "two_pass", NR_KNOB_NODE, NR_KNOB_ACCURACY,
     2e-6, "one_pass: mean and variance from sum and sum of squares (double) in one sweep",
     applies_layernorm, NULL},
    [NR_KNOB_ROW(NR_KNOB_POOL_TACTIC)] =
    {"pool.tactic", "auto|ref", "auto", NR_KNOB_NODE, 0, 0,
     "auto = the nr_f32_{max,avg}pool2d / nr_f32_gavgpool tactics (algo \"vector\"), ref "
     "= the reference tactic",
     applies_pool, NULL, .restricts = NR_RESTRICTS_ALGO},
    [NR_KNOB_ROW(NR_KNOB_REDUCE_REASSOC)] =
    {"reduce.reassoc", "off|on", "off", NR_KNOB_GLOBAL, NR_KNOB_ACCURACY, 1e-5,
     "on: softmax/layernorm/instance-/group-norm/global-pool sums in 8 vector partial "
     "sums instead of one sequential double sum", applies_reduce, NULL},
    [NR_KNOB_ROW(NR_KNOB_CPU_NORM_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_cpu_norm, NR_KNOB_CPU_NORM_END);
