/* tactics_conv.c - the convolution family's tables: nr_tactics_conv[] (one row per
 * algorithm x layout x ISA, listed once for Conv and once for nnroute.FusedConv with
 * the same id, since one kernel serves both) and nr_knobs_conv[] (conv.algo and
 * conv.layout per node), plus the shared node parser and epilogue.
 *
 * Key decision: supports() is a pure predicate on the parsed record (conv_p), so the
 * knobs' valid() can ask the very same question from the graph alone, by wrapping the
 * node's tensors in a throwaway plan; a knob value is offered exactly when some
 * tactic of that algorithm (or layout) could run the node on this machine. */
#include "kernels/cpu/conv/conv_internal.h"

#include "kernels/ref/conv_util.h"
#include "kernels/ref/fused.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- parsing -------------------------------------------------------------------- */

static bool is_conv_node(const nr_node *n) {
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

static bool same_dims(const nr_slot *a, const nr_slot *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

static bool f32_rank4(const nr_slot *s) {
  return s && s->dtype == NR_DTYPE_FLOAT && s->rank == 4;
}

/* Window of the node against the slots' shapes; false if inconsistent. */
static bool parse_window(const nr_tactic_ctx *c, const nr_slot *x, const nr_slot *w,
                         const nr_slot *y, conv_p *p) {
  nr_window win;
  nr_op_ctx oc = {.node = c->node, .graph = c->plan ? c->plan->graph : NULL};
  if (nr_window_read(&oc, 2, w->dims + 2, &win) ||
      nr_window_forward(&oc, &win, x->dims + 2))
    return false;
  if (win.out[0] != y->dims[2] || win.out[1] != y->dims[3])
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

bool nr_conv_parse(const nr_tactic_ctx *c, conv_p *p) {
  memset(p, 0, sizeof *p);
  if (!is_conv_node(c->node))
    return false;
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *b = nr_step_in(c, 2);
  const nr_slot *r = nr_step_in(c, 3), *y = nr_step_out(c, 0);
  if (!f32_rank4(x) || !f32_rank4(w) || !f32_rank4(y) || w->kind != NR_SLOT_CONST)
    return false;
  if (b && (b->kind != NR_SLOT_CONST || b->dtype != NR_DTYPE_FLOAT || b->rank != 1 ||
            b->dims[0] != w->dims[0]))
    return false;
  if (r && (r->dtype != NR_DTYPE_FLOAT || !same_dims(r, y)))
    return false;
  for (int d = 0; d < 4; d++)
    if (!fits_i32(x->dims[d]) || !fits_i32(y->dims[d]) || !fits_i32(w->dims[d]))
      return false;
  int64_t group = nr_attr_int(c->node, "group", 1);
  if (group < 1 || x->dims[1] % group || w->dims[0] % group ||
      w->dims[1] * group != x->dims[1] || y->dims[1] != w->dims[0] || y->dims[0] != x->dims[0])
    return false;
  if (!parse_window(c, x, w, y, p))
    return false;
  p->n = (int32_t)x->dims[0], p->c = (int32_t)x->dims[1];
  p->h = (int32_t)x->dims[2], p->w = (int32_t)x->dims[3];
  p->m = (int32_t)y->dims[1], p->oh = (int32_t)y->dims[2], p->ow = (int32_t)y->dims[3];
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

/* ---- supports() predicates ------------------------------------------------------ */

static bool has_gemm(void) { return nr_gemm_ukernel_count() > 0; }

static bool is_1x1_s1(const conv_p *p) {
  return p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 &&
         p->pl == 0 && p->oh == p->h && p->ow == p->w;
}
static bool is_dw(const conv_p *p) {
  return p->group == p->c && p->m == p->c && p->kh == p->kw &&
         (p->kh == 3 || p->kh == 5) && p->sh == p->sw && (p->sh == 1 || p->sh == 2) &&
         p->dh == 1 && p->dw == 1 && p->pt < p->kh && p->pl < p->kw;
}
static bool is_wino(const conv_p *p) {
  return p->kh == 3 && p->kw == 3 && p->sh == 1 && p->sw == 1 && p->dh == 1 &&
         p->dw == 1 && p->group == 1;
}

#define SUPPORTS(name, cond)                                                           \
  static bool name(const nr_tactic_ctx *c) {                                           \
    conv_p p_, *p = &p_;                                                               \
    return nr_conv_parse(c, p) && (cond);                                              \
  }
SUPPORTS(sup_any, true)
SUPPORTS(sup_im2col, has_gemm())
SUPPORTS(sup_1x1, has_gemm() && is_1x1_s1(p))
SUPPORTS(sup_nhwc, has_gemm())
SUPPORTS(sup_nhwc_1x1, has_gemm() && is_1x1_s1(p))
SUPPORTS(sup_dw, is_dw(p))
SUPPORTS(sup_nchw8c, p->group == 1)
SUPPORTS(sup_wino, has_gemm() && is_wino(p))
SUPPORTS(sup_onednn, p->act <= NR_ACT_LEAKY_RELU || p->act == NR_ACT_SIGMOID ||
                         p->act == NR_ACT_TANH || p->act == NR_ACT_SILU ||
                         p->act == NR_ACT_GELU || p->act == NR_ACT_GELU_TANH)

/* ---- prepare() ------------------------------------------------------------------ */

static nr_status store(const nr_tactic_ctx *c, nr_step *st, conv_p *p) {
  if (!nr_conv_parse(c, p)) {
    char b[256];
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s cannot run it",
                     nr_node_describe(c->node, b, sizeof b), st->tactic->id);
  }
  memcpy(st->params, p, sizeof *p);
  return NR_OK;
}

static nr_status prep_direct(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  return store(c, st, &p);
}

static nr_status prep_dw(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  return s ? s : nr_conv_pack_copy(c, plan, st);
}

static nr_status prep_dw8(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  return s ? s : nr_conv_pack_dw8(c, plan, st);
}

static nr_status prep_nchw8c(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  return s ? s : nr_conv_pack_nchw8c(c, plan, st);
}

/* GEMM tactics: m x n x k of one group's product, scratch for the columns. */
static nr_status prep_gemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, bool nhwc) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  int64_t ohw = (int64_t)p.oh * p.ow, mg = p.m / p.group;
  int64_t k = (int64_t)(p.c / p.group) * p.kh * p.kw;
  p.gemm = nhwc ? nr_gemm_default_cfg(ohw, mg, k) : nr_gemm_default_cfg(mg, ohw, k);
  memcpy(st->params, &p, sizeof p);
  uint64_t cols = is_1x1_s1(&p) ? 0 : (uint64_t)(ohw * k) * sizeof(float);
  st->scratch = (cols + 63) / 64 * 64 +
                (nhwc ? nr_gemm_scratch_size(p.gemm, ohw, mg, k, NR_CONV_MAX_THREADS)
                      : nr_gemm_scratch_size(p.gemm, mg, ohw, k, NR_CONV_MAX_THREADS));
  return nhwc ? nr_conv_pack_nhwc_b(c, plan, st) : nr_conv_pack_gemm_a(c, plan, st);
}
static nr_status prep_im2col(const nr_tactic_ctx *c, nr_plan *pl, nr_step *st) {
  return prep_gemm(c, pl, st, false);
}
static nr_status prep_nhwc(const nr_tactic_ctx *c, nr_plan *pl, nr_step *st) {
  return prep_gemm(c, pl, st, true);
}

static nr_status prep_wino(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, int tile) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  int64_t a = tile + 2, th = (p.oh + tile - 1) / tile, tw = (p.ow + tile - 1) / tile;
  int64_t t = th * tw;
  p.extra = (uint32_t)tile;
  p.gemm = nr_gemm_default_cfg(p.m, t, p.c);
  memcpy(st->params, &p, sizeof p);
  uint64_t v = (uint64_t)(a * a * t * (p.c + p.m)) * sizeof(float);
  st->scratch = (v + 63) / 64 * 64 +
                nr_gemm_scratch_size(p.gemm, p.m, t, p.c, NR_CONV_MAX_THREADS);
  return nr_conv_pack_winograd(c, plan, st, tile);
}
static nr_status prep_wino23(const nr_tactic_ctx *c, nr_plan *pl, nr_step *st) {
  return prep_wino(c, pl, st, 2);
}
static nr_status prep_wino43(const nr_tactic_ctx *c, nr_plan *pl, nr_step *st) {
  return prep_wino(c, pl, st, 4);
}

static nr_status prep_onednn(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  return s ? s : nr_conv_onednn_prepare(c, plan, st);
}

/* ---- the table ------------------------------------------------------------------ */

#define P NR_LAYOUT_PLAIN
#define H NR_LAYOUT_NHWC
#define B8 NR_LAYOUT_NCHW8C
#define AVX NR_ISA_AVX2
/* One kernel, two ops: Conv (ai.onnx) and FusedConv (nnroute), same id. */
#define CONV(id, src, algo, lay, isa, prio, sup, prep, run)                            \
  {id, "", "Conv", src, algo, lay, isa, prio, sup, prep, run},                        \
      {id, NR_DOMAIN, "FusedConv", src, algo, lay, isa, prio, sup, prep, run},

#define ONEDNN_ROW                                                                     \
  CONV("onednn_conv", "onednn", "onednn", P, 0, 30, sup_onednn, prep_onednn,           \
       nr_conv_onednn_run)

const nr_tactic nr_tactics_conv[] = {
    /* id                             source     algo   layout isa prio */
    CONV("nr_f32_conv_1x1", "nnroute", "gemm1x1", P, 0, 100, sup_1x1, prep_im2col,
         nr_conv_1x1_run)
    CONV("nr_f32_conv_dw__avx2", "nnroute", "depthwise", P, AVX, 90, sup_dw, prep_dw,
         nr_conv_dw__avx2_run)
    CONV("nr_f32_conv_dw", "nnroute", "depthwise", P, 0, 80, sup_dw, prep_dw,
         nr_conv_dw_run)
    CONV("nr_f32_conv_dw_nchw8c__avx2", "nnroute", "depthwise", B8, AVX, 85, sup_dw,
         prep_dw8, nr_conv_dw_nchw8c__avx2_run)
    CONV("nr_f32_conv_dw_nchw8c", "nnroute", "depthwise", B8, 0, 70, sup_dw, prep_dw8,
         nr_conv_dw_nchw8c_run)
    CONV("nr_f32_conv_winograd_f23", "nnroute", "winograd23", P, 0, 42, sup_wino,
         prep_wino23, nr_conv_winograd_run)
    CONV("nr_f32_conv_winograd_f43", "nnroute", "winograd43", P, 0, 45, sup_wino,
         prep_wino43, nr_conv_winograd_run)
    CONV("nr_f32_conv_im2col", "nnroute", "im2col", P, 0, 50, sup_im2col, prep_im2col,
         nr_conv_im2col_run)
    CONV("nr_f32_conv_nhwc_1x1", "nnroute", "gemm1x1", H, 0, 45, sup_nhwc_1x1, prep_nhwc,
         nr_conv_nhwc_run)
    CONV("nr_f32_conv_nhwc_im2col", "nnroute", "im2col", H, 0, 40, sup_nhwc, prep_nhwc,
         nr_conv_nhwc_run)
    ONEDNN_ROW
    CONV("nr_f32_conv_nchw8c_direct__avx2", "nnroute", "direct", B8, AVX, 20, sup_nchw8c,
         prep_nchw8c, nr_conv_nchw8c_direct__avx2_run)
    CONV("nr_f32_conv_direct", "nnroute", "direct", P, 0, 10, sup_any, prep_direct,
         nr_conv_direct_run)
    {0},
};

/* ---- knobs ---------------------------------------------------------------------- */

static bool conv_applies(const nr_graph *g, const nr_node *n) {
  if (!is_conv_node(n) || n->n_inputs < 2 || n->inputs[0] < 0)
    return false;
  const nr_value *x = &g->tensors[n->inputs[0]].value;
  return x->dtype == NR_DTYPE_FLOAT && x->rank == 4;
}

/* Wraps node n's tensors in a plan of one step so supports() can run on them. */
typedef struct fake_plan {
  nr_plan plan;
  nr_slot slots[NR_STEP_MAX_IO * 2];
  nr_step step;
} fake_plan;

static void fake_slot(const nr_graph *g, int t, nr_slot *s) {
  memset(s, 0, sizeof *s);
  const nr_tensor *ten = &g->tensors[t];
  s->dtype = ten->value.dtype;
  s->rank = ten->value.rank;
  memcpy(s->dims, ten->value.dims, sizeof s->dims);
  s->kind = (ten->flags & NR_TENSOR_CONST) ? NR_SLOT_CONST : NR_SLOT_ARENA;
}

static void fake_build(const nr_graph *g, const nr_node *n, fake_plan *f) {
  memset(f, 0, sizeof *f);
  f->plan.graph = (nr_graph *)g;
  f->plan.slots = f->slots;
  int k = 0;
  f->step.n_in = n->n_inputs < NR_STEP_MAX_IO ? n->n_inputs : NR_STEP_MAX_IO;
  f->step.n_out = n->n_outputs < NR_STEP_MAX_IO ? n->n_outputs : NR_STEP_MAX_IO;
  for (int i = 0; i < f->step.n_in; i++) {
    f->step.in[i] = n->inputs[i] < 0 ? -1 : k;
    if (n->inputs[i] >= 0)
      fake_slot(g, n->inputs[i], &f->slots[k++]);
  }
  for (int o = 0; o < f->step.n_out; o++) {
    f->step.out[o] = n->outputs[o] < 0 ? -1 : k;
    if (n->outputs[o] >= 0)
      fake_slot(g, n->outputs[o], &f->slots[k++]);
  }
  f->plan.n_slots = k;
}

static const char *const algo_values[] = {"auto", "im2col", "gemm1x1", "direct",
                                          "depthwise", "winograd23", "winograd43",
                                          "onednn"};
static const nr_layout layout_values[] = {NR_LAYOUT_ANY, NR_LAYOUT_PLAIN, NR_LAYOUT_NHWC,
                                          NR_LAYOUT_NCHW8C};

/* Bit 0 (auto) always; bit i when a tactic of the value supports n here. */
static uint64_t conv_valid(const nr_graph *g, const nr_node *n, bool by_layout) {
  fake_plan f;
  fake_build(g, n, &f);
  nr_tactic_ctx c = {&f.plan, n, &f.step, NULL, NULL};
  uint64_t bits = 1;
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++) {
    if ((t->isa & ~nr_cpu_isa()) || strcmp(t->op_type, n->op_type) || !t->supports(&c))
      continue;
    int nv = by_layout ? 4 : 8;
    for (int i = 1; i < nv; i++)
      if (by_layout ? t->layout == layout_values[i] : !strcmp(t->algo, algo_values[i]))
        bits |= 1ull << i;
  }
  return bits;
}
static uint64_t algo_valid(const nr_graph *g, const nr_node *n) {
  return conv_valid(g, n, false);
}
static uint64_t layout_valid(const nr_graph *g, const nr_node *n) {
  return conv_valid(g, n, true);
}

const nr_knob_def nr_knobs_conv[] = {
    {"conv.algo", "auto|im2col|gemm1x1|direct|depthwise|winograd23|winograd43|onednn",
     "auto", NR_KNOB_NODE, NR_KNOB_ACCURACY, 1e-4,
     "convolution algorithm (winograd reassociates more: bounded extra error)",
     conv_applies, algo_valid},
    {"conv.layout", "auto|plain|nhwc|nchw8c", "auto", NR_KNOB_NODE, NR_KNOB_LAYOUT, 0.0,
     "activation layout the convolution runs in (the layout pass inserts reorders)",
     conv_applies, layout_valid},
    {0},
};
