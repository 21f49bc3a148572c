/* conv_parse.c - what every convolution tactic shares outside its kernel: reading a
 * Conv / nnroute.FusedConv node into the record conv_p (window, shapes, fused
 * activation) and the epilogue helpers (bias, residual and activation applied to a
 * plane, as a pass of its own for conv.epilogue=separate, and a residual added after a
 * kernel that could not fuse it).
 *
 * Key decision: nr_conv_parse is the single reading of a node, used by supports(),
 * prepare() and the knobs' valid() alike (tactics_conv.c), so they cannot disagree on
 * what a node is. */
#include "kernels/cpu/conv/conv_internal.h"

#include "ir/fused.h"
#include "kernels/ref/conv_util.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing -------------------------------------------------------------------- */

bool nr_conv_is_node(const nr_node *n) {
  if (!n)
    return false;
  const char *d = n->domain ? n->domain : "";
  return (!strcmp(n->op_type, "Conv") && !*d) ||
         (!strcmp(n->op_type, "FusedConv") && !strcmp(d, NR_DOMAIN));
}

void nr_conv_read_act(const nr_node *n, nr_act *act, float *a, float *b) {
  *act = NR_ACT_NONE;
  *a = 0.0f;
  *b = 0.0f;
  if (strcmp(n->op_type, "FusedConv"))
    return;
  if (!nr_act_from_name(nr_attr_string(n, "activation", "none"), act))
    *act = NR_ACT_COUNT; /* unknown: no tactic supports it */
  float da = 0.0f, db = 0.0f;
  switch (*act) {
  case NR_ACT_CLIP: da = -INFINITY; db = INFINITY; break;
  case NR_ACT_LEAKY_RELU: da = 0.01f; break;
  case NR_ACT_HARD_SIGMOID: da = 0.2f; db = 0.5f; break;
  default: break;
  }
  *a = nr_attr_float(n, "act_alpha", da);
  *b = nr_attr_float(n, "act_beta", db);
}

static bool fits_u8(int64_t v, int64_t lo) { return v >= lo && v <= 255; }
static bool fits_i32(int64_t v) { return v >= 1 && v <= INT32_MAX; }

/* Window of the node against the slots' shapes; false if inconsistent. A 1-D window
 * (nsp 1: X is [N, C, L]) is read as the 2-D one of [N, C, 1, L]: kernel, stride,
 * dilation 1 and no padding along H. */
static bool parse_window(const nr_tactic_ctx *c, const nr_slot *x, const nr_slot *w,
                         const nr_slot *y, int nsp, conv_p *p) {
  nr_window win;
  nr_op_ctx oc = {.node = c->node, .graph = c->plan ? c->plan->graph : NULL};
  if (nr_window_read(&oc, nsp, w->dims + 2, &win) ||
      nr_window_forward(&oc, &win, x->dims + 2))
    return false;
  if (nsp == 1) {
    win.kernel[1] = win.kernel[0], win.stride[1] = win.stride[0];
    win.dil[1] = win.dil[0], win.pad_b[1] = win.pad_b[0], win.out[1] = win.out[0];
    win.kernel[0] = win.stride[0] = win.dil[0] = win.out[0] = 1;
    win.pad_b[0] = 0;
  }
  if (win.out[1] != y->dims[nsp + 1] || (nsp == 2 && win.out[0] != y->dims[2]))
    return false;
  if (!fits_u8(win.kernel[0], 1) || !fits_u8(win.kernel[1], 1) ||
      !fits_u8(win.stride[0], 1) || !fits_u8(win.stride[1], 1) ||
      !fits_u8(win.dil[0], 1) || !fits_u8(win.dil[1], 1) || !fits_u8(win.pad_b[0], 0) ||
      !fits_u8(win.pad_b[1], 0))
    return false;
  p->kh = (uint8_t)win.kernel[0], p->kw = (uint8_t)win.kernel[1];
  p->sh = (uint8_t)win.stride[0], p->sw = (uint8_t)win.stride[1];
  p->dh = (uint8_t)win.dil[0], p->dw = (uint8_t)win.dil[1];
  p->pt = (uint8_t)win.pad_b[0], p->pl = (uint8_t)win.pad_b[1];
  return true;
}

/* Whether X, W and Y are float32 of rank `rank` (3 or 4). */
static bool f32_ranks(const nr_slot *x, const nr_slot *w, const nr_slot *y, int rank) {
  return x && w && y && x->dtype == NR_DTYPE_FLOAT && w->dtype == NR_DTYPE_FLOAT &&
         y->dtype == NR_DTYPE_FLOAT && x->rank == rank && w->rank == rank &&
         y->rank == rank;
}

/* Logical dim d of [N, C, H, W] from a slot of rank 4, or of rank 3 read as H = 1. */
static int64_t dim4(const nr_slot *s, int d) {
  if (s->rank == 4)
    return s->dims[d];
  return d < 2 ? s->dims[d] : d == 2 ? 1 : s->dims[2];
}

static bool parse(const nr_tactic_ctx *c, conv_p *p, bool one_d) {
  memset(p, 0, sizeof *p);
  if (!nr_conv_is_node(c->node))
    return false;
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *b = nr_step_in(c, 2);
  const nr_slot *r = nr_step_in(c, 3), *y = nr_step_out(c, 0);
  int rank = x && x->rank == 3 && one_d ? 3 : 4;
  if (!f32_ranks(x, w, y, rank) || w->kind != NR_SLOT_CONST)
    return false;
  if (b && (b->kind != NR_SLOT_CONST || b->dtype != NR_DTYPE_FLOAT || b->rank != 1 ||
            b->dims[0] != w->dims[0]))
    return false;
  if (r && (r->dtype != NR_DTYPE_FLOAT || !nr_slot_same_dims(r, y)))
    return false;
  for (int d = 0; d < rank; d++)
    if (!fits_i32(x->dims[d]) || !fits_i32(y->dims[d]) || !fits_i32(w->dims[d]))
      return false;
  int64_t group = nr_attr_int(c->node, "group", 1);
  if (group < 1 || x->dims[1] % group || w->dims[0] % group ||
      w->dims[1] * group != x->dims[1] || y->dims[1] != w->dims[0] || y->dims[0] != x->dims[0])
    return false;
  if (!parse_window(c, x, w, y, rank - 2, p))
    return false;
  p->n = (int32_t)x->dims[0], p->c = (int32_t)x->dims[1];
  p->h = (int32_t)dim4(x, 2), p->w = (int32_t)dim4(x, 3);
  p->m = (int32_t)y->dims[1], p->oh = (int32_t)dim4(y, 2), p->ow = (int32_t)dim4(y, 3);
  p->group = (int32_t)group;
  nr_act act;
  nr_conv_read_act(c->node, &act, &p->act_a, &p->act_b);
  if (act >= NR_ACT_COUNT)
    return false;
  p->act = (uint8_t)act;
  p->has_bias = b != NULL;
  p->has_res = r != NULL;
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

