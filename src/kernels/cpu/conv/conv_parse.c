/* conv_parse.c - what every convolution tactic shares outside its kernel: reading a
 * Conv / nnroute.FusedConv node into the record conv_p (window, shapes, fused
 * activation) and the epilogue helpers (bias, residual and activation applied to a
 * plane, as a pass of its own for conv.epilogue=separate, and a residual added after a
 * kernel that could not fuse it).
 *
 * Key decision: nr_conv_parse is the CPU's single reading of a node, used by
 * supports(), prepare() and the knobs' valid() alike (tactics_conv.c), so they cannot
 * disagree on what a node is; what the node computes (channels, groups, the resolved
 * window, bias, residual, activation) comes from ir/node_desc.h's nr_conv_desc, which
 * the CUDA backend reads too, and only what the CPU kernels can run is checked here. */
#include "kernels/cpu/conv/conv_internal.h"

#include "ir/node_desc.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing -------------------------------------------------------------------- */

bool nr_conv_is_node(const nr_node *n) { return nr_conv_desc_is_node(n); }

static bool fits_u16(int64_t v, int64_t lo) { return v >= lo && v <= UINT16_MAX; }
static bool fits_i32(int64_t v) { return v >= 1 && v <= INT32_MAX; }

/* The description's window in the record: 2-D, a 1-D one (nsp 1: X is [N, C, L])
 * read as the 2-D one of [N, C, 1, L] (kernel, stride, dilation 1 and no padding
 * along H); false when a size does not fit the record's bytes. */
static bool window_of(const nr_conv_desc *d, conv_p *p) {
  const nr_window *w = &d->win;
  int h = w->nsp == 1 ? -1 : 0, x = w->nsp - 1; /* H (-1: none) and W's index */
  int64_t kh = h < 0 ? 1 : w->kernel[h], sh = h < 0 ? 1 : w->stride[h];
  int64_t dh = h < 0 ? 1 : w->dil[h], pt = h < 0 ? 0 : w->pad_b[h];
  if (!fits_u16(kh, 1) || !fits_u16(w->kernel[x], 1) || !fits_u16(sh, 1) ||
      !fits_u16(w->stride[x], 1) || !fits_u16(dh, 1) || !fits_u16(w->dil[x], 1) ||
      !fits_u16(pt, 0) || !fits_u16(w->pad_b[x], 0))
    return false;
  p->kh = (uint16_t)kh, p->kw = (uint16_t)w->kernel[x];
  p->sh = (uint16_t)sh, p->sw = (uint16_t)w->stride[x];
  p->dh = (uint16_t)dh, p->dw = (uint16_t)w->dil[x];
  p->pt = (uint16_t)pt, p->pl = (uint16_t)w->pad_b[x];
  p->h = (int32_t)(h < 0 ? 1 : w->in[h]), p->w = (int32_t)w->in[x];
  p->oh = (int32_t)(h < 0 ? 1 : w->out[h]), p->ow = (int32_t)w->out[x];
  return true;
}

/* FusedConv's activation. A clip without a bound keeps +-inf in the record, as the
 * engines built before the description stored it (the description gives the
 * reference's +-FLT_MAX, which clamps an infinite output). */
static void act_of(const nr_node *n, const nr_conv_desc *d, conv_p *p) {
  p->act = (uint8_t)d->act;
  p->act_a = d->act_a, p->act_b = d->act_b;
  if (d->act == NR_ACT_CLIP && !nr_node_attr(n, "act_alpha"))
    p->act_a = -INFINITY;
  if (d->act == NR_ACT_CLIP && !nr_node_attr(n, "act_beta"))
    p->act_b = INFINITY;
}

/* Whether X, W and Y are float32 of rank `rank` (3 or 4). */
static bool f32_ranks(const nr_slot *x, const nr_slot *w, const nr_slot *y, int rank) {
  return x && w && y && x->dtype == NR_DTYPE_FLOAT && w->dtype == NR_DTYPE_FLOAT &&
         y->dtype == NR_DTYPE_FLOAT && x->rank == rank && w->rank == rank &&
         y->rank == rank;
}

/* What the CPU kernels can run on top of what the description says: float32 of rank
 * 4 (3 with one_d), constant W and B, a 1-D B, R of Y's dims, sizes within int32. */
static bool runnable(const nr_tactic_ctx *c, int rank) {
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *b = nr_step_in(c, 2);
  const nr_slot *r = nr_step_in(c, 3), *y = nr_step_out(c, 0);
  if (!f32_ranks(x, w, y, rank) || w->kind != NR_SLOT_CONST)
    return false;
  if (b && (b->kind != NR_SLOT_CONST || b->dtype != NR_DTYPE_FLOAT || b->rank != 1))
    return false;
  if (r && (r->dtype != NR_DTYPE_FLOAT || !nr_slot_same_dims(r, y)))
    return false;
  for (int d = 0; d < rank; d++)
    if (!fits_i32(x->dims[d]) || !fits_i32(y->dims[d]) || !fits_i32(w->dims[d]))
      return false;
  return true;
}

static bool parse(const nr_tactic_ctx *c, conv_p *p, bool one_d) {
  memset(p, 0, sizeof *p);
  if (!nr_conv_is_node(c->node))
    return false;
  const nr_slot *x = nr_step_in(c, 0), *r = nr_step_in(c, 3);
  if (!runnable(c, x && x->rank == 3 && one_d ? 3 : 4))
    return false;
  nr_node_io io;
  nr_node_io_from_ctx(c, &io);
  nr_conv_desc d;
  if (nr_conv_desc_parse(c->node, &io, &d, NULL) || !window_of(&d, p))
    return false;
  p->n = (int32_t)d.batch, p->c = (int32_t)d.in_c, p->m = (int32_t)d.out_c;
  p->group = (int32_t)d.group;
  act_of(c->node, &d, p);
  p->has_bias = d.bias;
  p->has_res = d.residual;
  p->res_layout = r ? (uint8_t)r->layout : 0;
  return true;
}

bool nr_conv_parse(const nr_tactic_ctx *c, conv_p *p) { return parse(c, p, false); }

bool nr_conv_parse_plain(const nr_tactic_ctx *c, conv_p *p) { return parse(c, p, true); }

/* ---- epilogue ------------------------------------------------------------------- */

void nr_conv_epilogue(float *y, const float *r, int64_t n, float bias, const conv_p *p) {
  if (r)
    for (int64_t i = 0; i < n; i++)
      y[i] += bias + r[i];
  else if (bias != 0.0f)
    for (int64_t i = 0; i < n; i++)
      y[i] += bias;
  float a = p->act_a, b = p->act_b;
  switch ((nr_act)p->act) {
  case NR_ACT_NONE: break;
  case NR_ACT_RELU:
    for (int64_t i = 0; i < n; i++)
      y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    break;
  case NR_ACT_CLIP:
    for (int64_t i = 0; i < n; i++)
      y[i] = y[i] < a ? a : y[i] > b ? b : y[i];
    break;
  case NR_ACT_LEAKY_RELU:
    for (int64_t i = 0; i < n; i++)
      y[i] = y[i] >= 0.0f ? y[i] : a * y[i];
    break;
  default: nr_act_apply((nr_act)p->act, a, b, y, n);
  }
}

typedef struct epi_job {
  const conv_p *p;
  float *y;
  const float *bias, *r;
  int64_t hw;
} epi_job;

/* PLAIN: one (image, channel) plane per index. */
static void epi_planes(void *arg, int64_t begin, int64_t end, int thread) {
  const epi_job *j = arg;
  for (int64_t i = begin; i < end; i++)
    nr_conv_epilogue(j->y + i * j->hw, j->r ? j->r + i * j->hw : NULL, j->hw,
                     j->bias ? j->bias[i % j->p->m] : 0.0f, j->p);
}

/* NHWC: one pixel (all m channels, contiguous) per index. */
static void epi_pixels(void *arg, int64_t begin, int64_t end, int thread) {
  const epi_job *j = arg;
  int64_t m = j->p->m;
  for (int64_t i = begin; i < end; i++) {
    float *y = j->y + i * m;
    const float *r = j->r ? j->r + i * m : NULL;
    for (int64_t c = 0; c < m; c++)
      y[c] += (j->bias ? j->bias[c] : 0.0f) + (r ? r[c] : 0.0f);
    nr_conv_epilogue(y, NULL, m, 0.0f, j->p);
  }
}

void nr_conv_epilogue_pass(const nr_exec_args *a, nr_layout l, const conv_p *p,
                           const float *bias, const float *r, int threads) {
  epi_job j = {p, a->out[0], bias, r, (int64_t)p->oh * p->ow};
  if (l == NR_LAYOUT_NHWC)
    nr_parallel_for(a->pool, (int64_t)p->n * j.hw, 64, threads, epi_pixels, &j);
  else
    nr_parallel_for(a->pool, (int64_t)p->n * p->m, 1, threads, epi_planes, &j);
}

/* Offset of logical (n, c, hw) in a [N, C, HW] tensor stored in layout l. */
static int64_t phys_index(nr_layout l, int64_t n, int64_t c, int64_t hw, int64_t C,
                          int64_t HW) {
  switch (l) {
  case NR_LAYOUT_NHWC: return (n * HW + hw) * C + c;
  case NR_LAYOUT_NCHW8C: return ((n * (nr_ceil8(C) / 8) + c / 8) * HW + hw) * 8 + c % 8;
  default: return (n * C + c) * HW + hw;
  }
}

void nr_conv_residual_post(float *y, nr_layout ly, const float *r, nr_layout lr,
                           const conv_p *p, bool apply_bias, const float *bias) {
  int64_t HW = (int64_t)p->oh * p->ow;
  float row[256];
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->m; c++)
      for (int64_t s = 0; s < HW; s += 256) {
        int64_t len = HW - s < 256 ? HW - s : 256;
        for (int64_t i = 0; i < len; i++)
          row[i] = y[phys_index(ly, n, c, s + i, p->m, HW)] +
                   (r ? r[phys_index(lr, n, c, s + i, p->m, HW)] : 0.0f);
        nr_conv_epilogue(row, NULL, len, apply_bias && bias ? bias[c] : 0.0f, p);
        for (int64_t i = 0; i < len; i++)
          y[phys_index(ly, n, c, s + i, p->m, HW)] = row[i];
      }
}

