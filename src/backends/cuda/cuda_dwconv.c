/* cuda_dwconv.c - depthwise Conv / FusedConv on the project's own kernel
 * (kernels_dwconv.cu): a tactic beside cuDNN's for the 3x3 and 5x5 depthwise layers of
 * mobile networks, in NCHW or NHWC, with the bias and any fused activation applied
 * before the single store.
 *
 * Key decision: the rows live in the convolution family's table (cuda_conv.c) with
 * algo "depthwise", so the knobs that steer convolutions steer these too: the layout
 * knob picks the NCHW or NHWC row, cuda.conv.tactic (cudnn|depthwise) chooses between
 * cuDNN and this kernel, and the precision knob the fp32 or fp16 row. Math is fp32 in
 * both: the fp16 rows differ only in taking and giving fp16 activations where the fp16
 * pass (cuda_half.c) made the slots fp16 (the window sums are short, so fp32 weights
 * cost nothing). A residual input, dilation, other kernel sizes or strides, or a
 * channel multiplier other than 1 are left to cuDNN. */
#include "backends/cuda/cuda_internal.h"
#include "kernels/ref/conv_util.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(nr_cuda_dwconv) <= NR_TACTIC_PARAMS, "dwconv params too big");

static bool is_fused(const nr_node *n) {
  return n->domain && !strcmp(n->domain, "nnroute") && !strcmp(n->op_type, "FusedConv");
}

static bool fl(const nr_slot *s, bool half) {
  return s && (s->dtype == NR_DTYPE_FLOAT || (half && s->dtype == NR_DTYPE_FLOAT16));
}

static bool geom_of(const nr_tactic_ctx *c, bool half, nr_cuda_dwconv *p) {
  const nr_node *n = c->node;
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  const nr_slot *b = c->step->n_in > 2 ? nr_step_in(c, 2) : NULL;
  memset(p, 0, sizeof *p);
  if (!n || !x || !w || !y || x->rank != 4 || w->rank != 4 || y->rank != 4 || !fl(x, half) ||
      !fl(y, half) || w->dtype != NR_DTYPE_FLOAT || !nr_step_const(c, 1) ||
      c->step->n_out != 1 || (c->step->n_in > 3 && nr_step_in(c, 3)))
    return false;
  int64_t ch = x->dims[1];
  if (nr_attr_int(n, "group", 1) != ch || w->dims[0] != ch || w->dims[1] != 1 ||
      y->dims[1] != ch || y->dims[0] != x->dims[0] || w->dims[2] != w->dims[3] ||
      (w->dims[2] != 3 && w->dims[2] != 5))
    return false;
  if (b && (b->dtype != NR_DTYPE_FLOAT || b->rank != 1 || b->dims[0] != ch ||
            !nr_step_const(c, 2)))
    return false;
  nr_error err = {0};
  nr_op_ctx oc = {.node = n, .err = &err};
  nr_window win;
  if (nr_window_read(&oc, 2, w->dims + 2, &win) || nr_window_forward(&oc, &win, x->dims + 2) ||
      win.dil[0] != 1 || win.dil[1] != 1 || win.stride[0] != win.stride[1] ||
      (win.stride[0] != 1 && win.stride[0] != 2) || win.out[0] != y->dims[2] ||
      win.out[1] != y->dims[3] || win.pad_b[0] > 4 || win.pad_b[1] > 4 ||
      x->dims[0] * ch > INT32_MAX || x->dims[2] * x->dims[3] > INT32_MAX)
    return false;
  nr_act act = NR_ACT_NONE;
  float a0 = 0, a1 = 0;
  if (is_fused(n) && !nr_fused_act_read(n, &act, &a0, &a1))
    return false;
  *p = (nr_cuda_dwconv){
      .n = (int32_t)x->dims[0], .c = (int32_t)ch, .h = (int32_t)x->dims[2],
      .w = (int32_t)x->dims[3], .oh = (int32_t)y->dims[2], .ow = (int32_t)y->dims[3],
      .k = (int16_t)w->dims[2], .stride = (int16_t)win.stride[0],
      .pad_t = (int16_t)win.pad_b[0], .pad_l = (int16_t)win.pad_b[1],
      .x_half = x->dtype == NR_DTYPE_FLOAT16, .y_half = y->dtype == NR_DTYPE_FLOAT16,
      .act = nr_cuda_ew_act(act), .p0 = a0, .p1 = a1};
  return true;
}

bool nr_cuda_dw_supports(const nr_tactic_ctx *c) {
  nr_cuda_dwconv p;
  return geom_of(c, false, &p);
}

bool nr_cuda_dw_supports_f16(const nr_tactic_ctx *c) {
  nr_cuda_dwconv p;
  return geom_of(c, true, &p);
}

/* Packed: the weights in the row's layout, then the bias (256-byte aligned). */
nr_status nr_cuda_dw_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  nr_cuda_dwconv p;
  if (!geom_of(c, step->tactic->precision == NR_PREC_FP16, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "node no longer supported");
  p.nhwc = step->tactic->layout == NR_LAYOUT_NHWC;
  int64_t kk = (int64_t)p.k * p.k, nw = kk * p.c;
  uint64_t wbytes = ((uint64_t)nw * 4 + 255) & ~(uint64_t)255;
  const float *w = nr_step_const(c, 1), *b = c->step->n_in > 2 ? nr_step_const(c, 2) : NULL;
  uint64_t size = wbytes + (b ? (uint64_t)p.c * 4 : 0);
  float *buf = calloc(1, (size_t)size);
  if (!buf)
    return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory packing depthwise weights");
  for (int64_t ch = 0; ch < p.c; ch++)
    for (int64_t k = 0; k < kk; k++)
      buf[p.nhwc ? k * p.c + ch : ch * kk + k] = w[ch * kk + k];
  if (b)
    memcpy((uint8_t *)buf + wbytes, b, (size_t)p.c * 4);
  nr_status st = nr_plan_add_weights(plan, buf, size, &step->packed_offset, c->err);
  free(buf);
  step->packed_size = size;
  memcpy(step->params, &p, sizeof p);
  if (!st) { /* the run reads W and the bias from the packed data only */
    nr_step_absorb(step, 1);
    if (b)
      nr_step_absorb(step, 2);
  }
  return st;
}

nr_status nr_cuda_dw_run(const nr_exec_args *a) {
  nr_cuda_dwconv p;
  memcpy(&p, a->step->params, sizeof p);
  uint64_t wbytes = ((uint64_t)p.k * p.k * p.c * 4 + 255) & ~(uint64_t)255;
  const float *bias = a->step->packed_size > wbytes
                          ? (const float *)((const uint8_t *)a->packed + wbytes)
                          : NULL;
  return nr_cuda_check(nr_cuda_dwconv_run(&p, a->in[0], a->packed, bias, a->out[0],
                                          nr_cuda_stream(a)),
                       a->err, "depthwise convolution kernel");
}
