/* cuda_norm.c - row tactics on the GPU: Softmax and LogSoftmax, LayerNormalization,
 * GlobalAveragePool / GlobalMaxPool and ReduceMean / ReduceMax over trailing axes;
 * and 2-D MaxPool / AveragePool (kernels_norm.cu).
 *
 * Key decision: every one of these is "rows of n contiguous floats" once the axes are
 * known, so supports() reduces the node to (rows, n) and refuses what does not fit
 * (a softmax over a middle axis, a reduction over axes that are not the trailing
 * block, LayerNorm's optional Mean/InvStdDev outputs); those nodes fail the CUDA
 * build by name instead of running something slower in secret. Pool windows are
 * resolved with the reference's nr_window code, so pads, ceil_mode and auto_pad mean
 * the same thing on both sides. Each row is twice: nr_cuda_f32_* (fp32 tensors,
 * what select picks) and nr_cuda_f16_* (fp16 precision rows, which select never
 * picks for these ops: the fp16 pass, cuda_half.c, moves a step onto them when one
 * of its inputs became fp16; x and y are then fp16 or fp32 each, math fp32). */
#include "backends/cuda/cuda_internal.h"
#include "ir/window.h"

#include <string.h>

typedef struct rows_params {
  int64_t rows, n;
  float eps;
  int32_t log, max, half; /* half: NR_CUDA_X_HALF | NR_CUDA_Y_HALF */
} rows_params;

_Static_assert(sizeof(rows_params) <= NR_TACTIC_PARAMS, "rows params too big");

/* A plain fp32 tensor, or fp16 too when half. */
static bool plain_fl(const nr_slot *s, bool half) {
  return s && s->layout == NR_LAYOUT_PLAIN &&
         (s->dtype == NR_DTYPE_FLOAT || (half && s->dtype == NR_DTYPE_FLOAT16));
}

static bool plain_f32(const nr_slot *s) { return plain_fl(s, false); }

static int32_t half_bits(const nr_slot *x, const nr_slot *y) {
  return (x->dtype == NR_DTYPE_FLOAT16 ? NR_CUDA_X_HALF : 0) |
         (y->dtype == NR_DTYPE_FLOAT16 ? NR_CUDA_Y_HALF : 0);
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++)
    p *= d[i];
  return p;
}

static int norm_axis(int64_t a, int rank) {
  return (int)(a < 0 ? a + rank : a);
}

/* Softmax/LogSoftmax: opset 13 normalizes one axis (the last only, here); before 13
 * the input is flattened at `axis` (default 1) into rows. */
static bool softmax_rows(const nr_tactic_ctx *c, rows_params *p, bool h) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!plain_fl(x, h) || !plain_fl(y, h) || x->rank < 1 || c->step->n_out != 1)
    return false;
  bool v13 = c->node->opset >= 13;
  int ax = norm_axis(nr_attr_int(c->node, "axis", v13 ? -1 : 1), x->rank);
  if (ax < 0 || ax >= x->rank || (v13 && ax != x->rank - 1))
    return false;
  *p = (rows_params){prod(x->dims, 0, ax), prod(x->dims, ax, x->rank), 0, 0, 0};
  p->log = !strcmp(c->node->op_type, "LogSoftmax");
  return true;
}

static bool layernorm_rows(const nr_tactic_ctx *c, rows_params *p, bool h) {
  const nr_slot *x = nr_step_in(c, 0), *sc = nr_step_in(c, 1), *b = nr_step_in(c, 2);
  const nr_slot *y = nr_step_out(c, 0);
  if (!plain_fl(x, h) || !plain_fl(y, h) || !plain_f32(sc) || (b && !plain_f32(b)))
    return false;
  for (int o = 1; o < c->step->n_out; o++)
    if (nr_step_out(c, o))
      return false;
  int ax = norm_axis(nr_attr_int(c->node, "axis", -1), x->rank);
  if (ax < 0 || ax >= x->rank)
    return false;
  int64_t n = prod(x->dims, ax, x->rank);
  if (prod(sc->dims, 0, sc->rank) != n || (b && prod(b->dims, 0, b->rank) != n))
    return false;
  *p = (rows_params){prod(x->dims, 0, ax), n, nr_attr_float(c->node, "epsilon", 1e-5f), 0, 0};
  return true;
}

/* Global pools: [N, C, spatial...] -> [N, C, 1...]. */
static bool global_rows(const nr_tactic_ctx *c, rows_params *p, bool h) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!plain_fl(x, h) || !plain_fl(y, h) || x->rank < 3 || c->step->n_out != 1)
    return false;
  *p = (rows_params){x->dims[0] * x->dims[1], prod(x->dims, 2, x->rank), 0, 0, 0};
  p->max = !strcmp(c->node->op_type, "GlobalMaxPool");
  return true;
}

/* ReduceMean/ReduceMax over axes that are exactly the trailing dims from some r0. */
static bool reduce_rows(const nr_tactic_ctx *c, rows_params *p, bool h) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!plain_fl(x, h) || !plain_fl(y, h) || x->rank < 1 || c->step->n_out != 1)
    return false;
  int64_t axes[NR_MAX_RANK];
  size_t na = 0;
  bool from_input = c->node->opset >= 18 || (c->node->opset >= 13 &&
                                             !strcmp(c->node->op_type, "ReduceSum"));
  if (from_input) {
    const nr_slot *a = nr_step_in(c, 1);
    const void *d = nr_step_const(c, 1);
    if (!a || !d || a->dtype != NR_DTYPE_INT64 || a->rank != 1 || a->dims[0] > NR_MAX_RANK)
      return false;
    na = (size_t)a->dims[0];
    memcpy(axes, d, na * sizeof(int64_t));
  } else {
    const int64_t *a = nr_attr_ints(c->node, "axes", &na);
    if (!a || na > NR_MAX_RANK)
      return false;
    memcpy(axes, a, na * sizeof(int64_t));
  }
  bool in[NR_MAX_RANK] = {false};
  for (size_t i = 0; i < na; i++) {
    int ax = norm_axis(axes[i], x->rank);
    if (ax < 0 || ax >= x->rank || in[ax])
      return false;
    in[ax] = true;
  }
  int r0 = x->rank - (int)na;
  for (int d = 0; d < x->rank; d++)
    if (in[d] != (d >= r0))
      return false;
  if (!na)
    return false;
  *p = (rows_params){prod(x->dims, 0, r0), prod(x->dims, r0, x->rank), 0, 0, 0};
  p->max = !strcmp(c->node->op_type, "ReduceMax");
  return prod(y->dims, 0, y->rank) == p->rows;
}

/* h: the fp16 rows (x and y may be fp16). */
static bool rows_of(const nr_tactic_ctx *c, rows_params *p, bool h) {
  const char *op = c->node ? c->node->op_type : "";
  bool ok;
  if (!c->node)
    return false;
  if (!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax"))
    ok = softmax_rows(c, p, h);
  else if (!strcmp(op, "LayerNormalization"))
    ok = layernorm_rows(c, p, h);
  else if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool"))
    ok = global_rows(c, p, h);
  else
    ok = reduce_rows(c, p, h);
  if (ok)
    p->half = half_bits(nr_step_in(c, 0), nr_step_out(c, 0));
  return ok;
}

static bool rows_supports(const nr_tactic_ctx *c) {
  rows_params p;
  return rows_of(c, &p, false);
}

static bool rows_supports_f16(const nr_tactic_ctx *c) {
  rows_params p;
  return rows_of(c, &p, true);
}

static nr_status rows_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  rows_params p;
  if (!rows_of(c, &p, step->tactic->precision == NR_PREC_FP16))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "node no longer supported");
  memcpy(step->params, &p, sizeof p);
  return NR_OK;
}

static nr_status softmax_run(const nr_exec_args *a) {
  rows_params p;
  memcpy(&p, a->step->params, sizeof p);
  return nr_cuda_check(nr_cuda_softmax(a->in[0], a->out[0], p.rows, p.n, p.log, p.half,
                                       nr_cuda_stream(a)),
                       a->err, "softmax kernel");
}

static nr_status layernorm_run(const nr_exec_args *a) {
  rows_params p;
  memcpy(&p, a->step->params, sizeof p);
  const float *bias = a->step->n_in > 2 ? a->in[2] : NULL;
  return nr_cuda_check(nr_cuda_layernorm(a->in[0], a->in[1], bias, a->out[0], p.rows, p.n,
                                         p.eps, p.half, nr_cuda_stream(a)),
                       a->err, "layernorm kernel");
}

static nr_status reduce_run(const nr_exec_args *a) {
  rows_params p;
  memcpy(&p, a->step->params, sizeof p);
  return nr_cuda_check(nr_cuda_reduce_rows(a->in[0], a->out[0], p.rows, p.n, p.max, p.half,
                                           nr_cuda_stream(a)),
                       a->err, "reduction kernel");
}

/* ---- 2-D pooling ---------------------------------------------------------------------- */

static bool pool_of(const nr_tactic_ctx *c, nr_cuda_pool2d *p, bool h) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || !plain_fl(x, h) || !plain_fl(y, h) || x->rank != 4 || y->rank != 4 ||
      c->step->n_in != 1 || (c->step->n_out > 1 && nr_step_out(c, 1)))
    return false;
  nr_error err = {0};
  nr_op_ctx oc = {.node = c->node, .err = &err};
  nr_window w;
  if (nr_window_read(&oc, 2, NULL, &w) || nr_window_forward(&oc, &w, x->dims + 2) ||
      w.out[0] != y->dims[2] || w.out[1] != y->dims[3])
    return false;
  *p = (nr_cuda_pool2d){
      .max = !strcmp(c->node->op_type, "MaxPool"),
      .count_pad = nr_attr_int(c->node, "count_include_pad", 0) != 0,
      .kh = (int32_t)w.kernel[0], .kw = (int32_t)w.kernel[1],
      .sh = (int32_t)w.stride[0], .sw = (int32_t)w.stride[1],
      .dh = (int32_t)w.dil[0], .dw = (int32_t)w.dil[1],
      .pt = (int32_t)w.pad_b[0], .pl = (int32_t)w.pad_b[1],
      .pb = (int32_t)w.pad_e[0], .pr = (int32_t)w.pad_e[1],
      .planes = (int32_t)(x->dims[0] * x->dims[1]), .ih = (int32_t)x->dims[2],
      .iw = (int32_t)x->dims[3], .oh = (int32_t)y->dims[2], .ow = (int32_t)y->dims[3]};
  p->x_half = x->dtype == NR_DTYPE_FLOAT16;
  p->y_half = y->dtype == NR_DTYPE_FLOAT16;
  return x->dims[0] * x->dims[1] < INT32_MAX && x->dims[2] * x->dims[3] < INT32_MAX;
}

_Static_assert(sizeof(nr_cuda_pool2d) <= NR_TACTIC_PARAMS, "pool params too big");

static bool pool_supports(const nr_tactic_ctx *c) {
  nr_cuda_pool2d p;
  return pool_of(c, &p, false);
}

static bool pool_supports_f16(const nr_tactic_ctx *c) {
  nr_cuda_pool2d p;
  return pool_of(c, &p, true);
}

static nr_status pool_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  nr_cuda_pool2d p;
  if (!pool_of(c, &p, step->tactic->precision == NR_PREC_FP16))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "pool no longer supported");
  memcpy(step->params, &p, sizeof p);
  return NR_OK;
}

static nr_status pool_run(const nr_exec_args *a) {
  nr_cuda_pool2d p;
  memcpy(&p, a->step->params, sizeof p);
  return nr_cuda_check(nr_cuda_pool2d_run(&p, a->in[0], a->out[0], nr_cuda_stream(a)), a->err,
                       "pool kernel");
}

#define ROW_P(id, op, run, sup, prec)                                                  \
  {id, "", op, "nnroute", "vector", NR_LAYOUT_PLAIN, 0, 10, sup, rows_prepare, run, prec,  \
   NR_DEVICE_CUDA},
#define ROW(name, op, run)                                                              \
  ROW_P("nr_cuda_f32_" name, op, run, rows_supports, NR_PREC_FP32)                       \
  ROW_P("nr_cuda_f16_" name, op, run, rows_supports_f16, NR_PREC_FP16)
#define POOL(op)                                                                        \
  {"nr_cuda_f32_pool2d", "", op, "nnroute", "vector", NR_LAYOUT_PLAIN, 0, 10, pool_supports, \
   pool_prepare, pool_run, NR_PREC_FP32, NR_DEVICE_CUDA},                                 \
  {"nr_cuda_f16_pool2d", "", op, "nnroute", "vector", NR_LAYOUT_PLAIN, 0, 10,              \
   pool_supports_f16, pool_prepare, pool_run, NR_PREC_FP16, NR_DEVICE_CUDA},

const nr_tactic nr_tactics_cuda_norm[] = {
    ROW("softmax", "Softmax", softmax_run)
    ROW("logsoftmax", "LogSoftmax", softmax_run)
    ROW("layernorm", "LayerNormalization", layernorm_run)
    ROW("reduce_rows", "GlobalAveragePool", reduce_run)
    ROW("reduce_rows", "GlobalMaxPool", reduce_run)
    ROW("reduce_rows", "ReduceMean", reduce_run)
    ROW("reduce_rows", "ReduceMax", reduce_run)
    POOL("MaxPool")
    POOL("AveragePool")
    {0},
};
