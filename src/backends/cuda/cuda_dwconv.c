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

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(nr_cuda_dwconv) <= NR_TACTIC_PARAMS, "dwconv params too big");

static bool fl(const nr_slot *s, bool half) {
  return s && (s->dtype == NR_DTYPE_FLOAT || (half && s->dtype == NR_DTYPE_FLOAT16));
}

/* The kernel's cases of what nr_conv_desc describes: one filter per channel, a square
 * 3x3 or 5x5 kernel, no dilation, stride 1 or 2 on both axes, begin pads up to 4. */
static bool dw_fits(const nr_conv_desc *d) {
  const nr_window *w = &d->win;
  return d->group == d->in_c && d->out_c == d->in_c && w->kernel[0] == w->kernel[1] &&
         (w->kernel[0] == 3 || w->kernel[0] == 5) && w->dil[0] == 1 && w->dil[1] == 1 &&
         w->stride[0] == w->stride[1] && (w->stride[0] == 1 || w->stride[0] == 2) &&
         w->pad_b[0] <= 4 && w->pad_b[1] <= 4 && d->batch * d->in_c <= INT32_MAX &&
         w->in[0] * w->in[1] <= INT32_MAX;
}

static bool geom_of(const nr_tactic_ctx *c, bool half, nr_cuda_dwconv *p) {
  const nr_node *n = c->node;
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  const nr_slot *b = nr_step_in(c, 2);
  memset(p, 0, sizeof *p);
  if (!n || !x || !w || !y || x->rank != 4 || w->rank != 4 || y->rank != 4 || !fl(x, half) ||
      !fl(y, half) || w->dtype != NR_DTYPE_FLOAT || !nr_step_const(c, 1) ||
      nr_step_in(c, 3))
    return false;
  if (b && (b->dtype != NR_DTYPE_FLOAT || b->rank != 1 || !nr_step_const(c, 2)))
    return false;
  nr_node_io io;
  nr_node_io_from_ctx(c, &io);
  nr_conv_desc d;
  if (nr_conv_desc_parse(n, &io, &d, NULL) || !dw_fits(&d))
    return false;
  *p = (nr_cuda_dwconv){
      .n = (int32_t)d.batch, .c = (int32_t)d.in_c, .h = (int32_t)d.win.in[0],
      .w = (int32_t)d.win.in[1], .oh = (int32_t)d.win.out[0], .ow = (int32_t)d.win.out[1],
      .k = (int16_t)d.win.kernel[0], .stride = (int16_t)d.win.stride[0],
      .pad_t = (int16_t)d.win.pad_b[0], .pad_l = (int16_t)d.win.pad_b[1],
      .x_half = x->dtype == NR_DTYPE_FLOAT16, .y_half = y->dtype == NR_DTYPE_FLOAT16,
      .act = nr_cuda_ew_act(d.act), .p0 = d.act_a, .p1 = d.act_b};
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
