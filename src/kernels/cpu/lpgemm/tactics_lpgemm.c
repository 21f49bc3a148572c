/* tactics_lpgemm.c - the fp16 and bf16 tactics (precision@NODE = fp16 | bf16) on the
 * narrow GEMM: Gemm, MatMul, nnroute.FusedGemm and nnroute.FusedMatMul with a
 * constant B (one tactic per micro-kernel of lpgemm_ukernels.inc, id = kernel name),
 * and Conv / nnroute.FusedConv in PLAIN layout as a 1x1 product or through im2col
 * (nr_<f16w|bf16w>_conv_<1x1|im2col>, algo gemm1x1 / im2col, so conv.algo pins them
 * as it pins the fp32 ones). oneDNN's bf16 primitives are in lp_onednn.c.
 *
 * Key decision: nothing about a node is parsed here. A GEMM node goes through the
 * fp32 family's analysis and params record (gemm_tactic.h: gemm_analyze, the packed
 * bias, gemm_product_get, gemm_epilogue_get), a conv through nr_conv_parse and the
 * conv record (conv_internal.h), so a node means the same products at every
 * precision; only the packing (narrow, at build time, always: the narrow weights are
 * the point, so gemm.prepack / conv.prepack do not apply) and the GEMM called differ.
 * In both records the nr_gemm_cfg field holds an nr_lpgemm_cfg (same four fields,
 * ukernel indexing lpgemm_ukernels.inc). The blocking and threading knobs of the fp32
 * families (gemm.kc/mc/nc/threads/threads_max/epilogue, conv.gemm_kc/mc/nc,
 * conv.epilogue, conv.threads) act here too.
 *
 * Not covered (no fp16/bf16 tactic, so such a node builds only at fp32): runtime or
 * batched B, depthwise and other one-channel-per-group convs, NHWC and NCHW8C.
 * fp16 holds +-65504: a weight or activation beyond it becomes infinity, as with any
 * fp16 storage (bf16 keeps fp32's range); whether a route is accurate enough is the
 * tuner's measurement, not this file's. */
#include "ir/fused.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/conv_knobs.h"
#include "kernels/cpu/gemm/gemm_knobs.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "kernels/cpu/lpgemm/lp_onednn.h"
#include "kernels/cpu/lpgemm/lpgemm_impl.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nr_lpgemm_cfg from_gemm_cfg(nr_gemm_cfg c) {
  return (nr_lpgemm_cfg){c.ukernel, c.mc, c.kc, c.nc};
}
static nr_gemm_cfg to_gemm_cfg(nr_lpgemm_cfg c) {
  return (nr_gemm_cfg){c.ukernel, c.mc, c.kc, c.nc};
}

/* A blocking knob's value, or dflt for auto / absent. */
static int knob_int(const nr_tactic_ctx *c, nr_knob_id id, int dflt) {
  const char *v = nr_route_get(c->route, id, c->node);
  return v && strcmp(v, "auto") ? atoi(v) : dflt;
}

/* cfg for kernel uk on an m x n x k product: the default's blocking, the default's
 * number of row tiles per A block, then the route's blocking knobs (gemm.{mc,kc,nc}
 * or conv.gemm_{mc,kc,nc}: blocking[] holds their ids in that order). */
static const nr_knob_id gemm_blocking[3] = {NR_KNOB_GEMM_MC, NR_KNOB_GEMM_KC,
                                            NR_KNOB_GEMM_NC},
                        conv_blocking[3] = {NR_KNOB_CONV_GEMM_MC, NR_KNOB_CONV_GEMM_KC,
                                            NR_KNOB_CONV_GEMM_NC};
static nr_lpgemm_cfg make_cfg(const nr_tactic_ctx *c, int uk, int64_t m, int64_t n,
                              int64_t k, const nr_knob_id blocking[3]) {
  const nr_lpgemm_ukernel *u = nr_lpgemm_ukernel_get(uk);
  nr_lpgemm_cfg cfg = nr_lpgemm_default_cfg(u->type, m, n, k, u->widen == NR_LP_WIDEN_KERNEL);
  int tiles = cfg.mc / nr_lpgemm_ukernel_get(cfg.ukernel)->mr;
  cfg.ukernel = (uint16_t)uk;
  cfg.mc = (uint16_t)knob_int(c, blocking[0], tiles > 0 ? tiles * u->mr : u->mr);
  cfg.kc = (uint16_t)knob_int(c, blocking[1], cfg.kc);
  cfg.nc = (uint16_t)knob_int(c, blocking[2], cfg.nc);
  return cfg;
}

/* ---- Gemm, MatMul, FusedGemm, FusedMatMul ---------------------------------------------- */

/* A single product with constant B: what the narrow B packing needs. */
static bool gemm_fits(const nr_gemm_step_params *p) {
  return (p->flags & GEMM_F_B_CONST) && !(p->flags & GEMM_F_BATCHED) && p->m > 0 &&
         p->n > 0 && p->k > 0;
}

static bool gemm_problem(const nr_tactic_ctx *c, nr_gemm_step_params *p) {
  gemm_view v;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, p) && gemm_fits(p);
}

/* The 1-row kernels only run products of a few rows (as the fp32 family). */
static bool lp_gemm_supports(const nr_tactic_ctx *c, int uk) {
  nr_gemm_step_params p;
  return gemm_problem(c, &p) && (nr_lpgemm_ukernel_get(uk)->mr > 1 || p.m <= 4);
}

static int step_threads(const nr_tactic_ctx *c, nr_step *st) {
  if (nr_route_is(c->route, NR_KNOB_GEMM_THREADS_MAX, c->node, "1"))
    st->threads = 1;
  int n = nr_threads_or_online(st->threads);
  return n > 65535 ? 65535 : n;
}

/* The packed data: narrow B (nr_lpgemm_pack_b), then the packed bias at bias_off. */
static nr_status pack_gemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                           nr_gemm_step_params *p, nr_lpgemm_cfg cfg) {
  size_t pb = (nr_lpgemm_packed_b_size(cfg, p->k, p->n) + 63) / 64 * 64;
  bool packed_bias = p->bias == GEMM_BIAS_PACKED_COL || p->bias == GEMM_BIAS_PACKED_ROW;
  size_t blen = packed_bias ? (size_t)(p->bias == GEMM_BIAS_PACKED_ROW ? p->m : p->n) : 0;
  size_t total = pb + blen * sizeof(float);
  char *buf = aligned_alloc(64, (total + 63) / 64 * 64);
  if (!buf)
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: %zu bytes of packed weights",
                     st->tactic->id, total);
  nr_lpgemm_operand b = {nr_step_const(c, 1), p->flags & GEMM_F_TB ? p->k : p->n,
                         (p->flags & GEMM_F_TB) != 0, false};
  nr_lpgemm_pack_b(cfg, p->k, p->n, b, (uint16_t *)buf);
  p->flags |= GEMM_F_PB;
  p->bias_off = (uint32_t)(pb / sizeof(float));
  nr_status s = packed_bias ? gemm_bias_build(c, p, (float *)(buf + pb)) : NR_OK;
  if (!s)
    s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
  free(buf);
  st->packed_size = total;
  if (!s) /* run() reads the packed W only */
    nr_step_absorb(st, 1);
  return s;
}

static nr_status lp_gemm_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                                 int uk) {
  nr_gemm_step_params p;
  if (!gemm_problem(c, &p)) {
    char b[256];
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s cannot run it",
                     nr_node_describe(c->node, b, sizeof b), st->tactic->id);
  }
  nr_lpgemm_cfg cfg = make_cfg(c, uk, p.m, p.n, p.k, gemm_blocking);
  p.cfg = to_gemm_cfg(cfg);
  const char *split = nr_route_get(c->route, NR_KNOB_GEMM_THREADS, c->node);
  p.split = split && !strcmp(split, "m")   ? NR_GEMM_SPLIT_M
            : split && !strcmp(split, "n") ? NR_GEMM_SPLIT_N
                                           : NR_GEMM_SPLIT_AUTO;
  if (nr_route_is(c->route, NR_KNOB_GEMM_EPILOGUE, c->node, "separate"))
    p.flags |= GEMM_F_SEP_EP;
  p.threads = (uint16_t)step_threads(c, st);
  st->scratch = (uint64_t)p.threads * nr_lpgemm_scratch_size(cfg, p.m, p.n, p.k, 1);
  nr_status s = pack_gemm(c, plan, st, &p, cfg);
  memset(st->params, 0, sizeof st->params);
  memcpy(st->params, &p, sizeof p);
  return s;
}

static nr_status lp_gemm_run(const nr_exec_args *x) {
  nr_gemm_step_params p, q;
  memcpy(&p, x->step->params, sizeof p);
  int t = nr_threadpool_size(x->pool);
  if (x->step->threads > 0 && x->step->threads < t)
    t = x->step->threads;
  if (t > p.threads)
    t = p.threads;
  /* B is ours (narrow, at offset 0 of the packed data): take A, C and R from the
   * shared helper with B's packing flag off, so it does not size an fp32 B. */
  q = p;
  q.flags &= (uint8_t)~GEMM_F_PB;
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, &q, 0, &pr);
  gemm_epilogue_get(x, &p, pr.r, &ep);
  nr_lpgemm_operand a = {pr.a, p.flags & GEMM_F_TA ? p.m : p.k, (p.flags & GEMM_F_TA) != 0,
                         false};
  nr_lpgemm_operand b = {x->packed, 0, false, true};
  bool sep = (p.flags & GEMM_F_SEP_EP) != 0;
  nr_lpgemm(from_gemm_cfg(p.cfg), p.split, p.m, p.n, p.k, p.alpha, a, b, pr.c, p.n,
            sep ? NULL : &ep, x->scratch, x->pool, t);
  if (sep)
    nr_gemm_epilogue_apply(&ep, 0, 0, p.m, p.n, pr.c, p.n);
  return NR_OK;
}

/* Per-kernel entry points. */
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il)                                      \
  static bool sup_##name(const nr_tactic_ctx *c) {                                     \
    return lp_gemm_supports(c, NR_LP_UK_##name);                                       \
  }                                                                                    \
  static nr_status prep_##name(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {   \
    return lp_gemm_prepare(c, plan, st, NR_LP_UK_##name);                              \
  }
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa) NR_LP_UKERNEL(name, type, mr, nr, isa, 0)
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN

/* ---- Conv, FusedConv ------------------------------------------------------------------- */

static bool is_1x1(const conv_p *p) {
  return p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 &&
         p->pl == 0 && p->oh == p->h && p->ow == p->w;
}

/* One input channel per group (depthwise and the like) makes products of K = kh * kw,
 * nothing for a GEMM to do. */
static bool conv_fits(const conv_p *p, bool only_1x1) {
  return (p->group == 1 || p->c / p->group > 1) && (!only_1x1 || is_1x1(p));
}

/* Per group: Y_g[M/g x OHW] = W_g[M/g x K] * col[K x OHW]. */
static void conv_dims(const conv_p *p, int64_t *m, int64_t *n, int64_t *k) {
  *m = p->m / p->group;
  *n = (int64_t)p->oh * p->ow;
  *k = (int64_t)(p->c / p->group) * p->kh * p->kw;
}

static bool sup_conv(const nr_tactic_ctx *c, bool only_1x1) {
  conv_p p;
  return nr_conv_parse(c, &p) && conv_fits(&p, only_1x1);
}
static bool sup_conv_1x1(const nr_tactic_ctx *c) { return sup_conv(c, true); }
static bool sup_conv_im2col(const nr_tactic_ctx *c) { return sup_conv(c, false); }

/* W_g per group as a narrow packed A, each at a 64-byte aligned unit. */
static size_t conv_unit(const conv_p *p) {
  int64_t m, n, k;
  conv_dims(p, &m, &n, &k);
  return (nr_lpgemm_packed_a_size(from_gemm_cfg(p->gemm), m, k) + 63) / 64 * 64;
}

static nr_status pack_conv(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                           const conv_p *p) {
  int64_t m, n, k;
  conv_dims(p, &m, &n, &k);
  size_t unit = conv_unit(p), total = unit * (size_t)p->group;
  char *buf = aligned_alloc(64, total);
  if (!buf)
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: %zu bytes of packed weights",
                     st->tactic->id, total);
  const float *w = nr_step_const(c, 1);
  for (int g = 0; g < p->group; g++) {
    nr_lpgemm_operand a = {w + g * m * k, k, false, false};
    nr_lpgemm_pack_a(from_gemm_cfg(p->gemm), m, k, a, (uint16_t *)(buf + unit * g));
  }
  nr_status s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
  free(buf);
  st->packed_size = total;
  if (!s) /* run() reads the packed W only */
    nr_step_absorb(st, 1);
  return s;
}

static nr_status lp_conv_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                                 nr_lp_type t) {
  conv_p p;
  if (!nr_conv_parse(c, &p) || !conv_fits(&p, false)) {
    char b[256];
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s cannot run it",
                     nr_node_describe(c->node, b, sizeof b), st->tactic->id);
  }
  p.opts = nr_conv_knob_opts(c) & (uint8_t)~CONV_OPT_RAW_W;
  if (p.opts & CONV_OPT_SERIAL)
    st->threads = 1;
  int64_t m, n, k;
  conv_dims(&p, &m, &n, &k);
  int uk = nr_lpgemm_default_cfg(t, m, n, k, false).ukernel;
  nr_lpgemm_cfg cfg = make_cfg(c, uk, m, n, k, conv_blocking);
  p.gemm = to_gemm_cfg(cfg);
  memcpy(st->params, &p, sizeof p);
  int threads = st->threads > 0 ? st->threads : NR_CONV_MAX_THREADS;
  uint64_t cols = is_1x1(&p) ? 0 : (uint64_t)n * k * sizeof(float);
  st->scratch = (cols + 63) / 64 * 64 + nr_lpgemm_scratch_size(cfg, m, n, k, threads);
  return pack_conv(c, plan, st, &p);
}
static nr_status prep_conv_f16(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return lp_conv_prepare(c, plan, st, NR_LP_FP16);
}
static nr_status prep_conv_bf16(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return lp_conv_prepare(c, plan, st, NR_LP_BF16);
}

/* As nr_conv_im2col_run, with W narrow and the columns rounded while packed. */
static nr_status lp_conv_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post, direct = is_1x1(&q);
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  const float *x = a->in[0], *bias = q.has_bias ? a->in[2] : NULL;
  float *y = a->out[0];
  int64_t mg, ohw, k, cg = q.c / q.group, hw = (int64_t)q.h * q.w;
  conv_dims(&q, &mg, &ohw, &k);
  size_t unit = conv_unit(&q);
  size_t cols = direct ? 0 : (size_t)(ohw * k) * sizeof(float);
  float *col = a->scratch;
  void *gs = (char *)a->scratch + (cols + 63) / 64 * 64;
  int threads = nr_conv_threads(a);
  bool sep = (q.opts & CONV_OPT_SPLIT_EPI) != 0;
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t g = 0; g < q.group; g++) {
      const float *xg = x + (n * q.c + g * cg) * hw;
      if (!direct)
        nr_conv_im2col_plain(&q, xg, col, a->pool, threads);
      int64_t yo = (n * q.m + g * mg) * ohw;
      nr_epilogue ep = {bias ? bias + g * mg : NULL, true, res ? res + yo : NULL, ohw,
                        1.0f, (nr_act)q.act, q.act_a, q.act_b};
      nr_lpgemm_operand A = {(const char *)a->packed + unit * g, k, false, true};
      nr_lpgemm_operand B = {direct ? xg : col, ohw, false, false};
      nr_lpgemm(from_gemm_cfg(q.gemm), NR_GEMM_SPLIT_AUTO, mg, ohw, k, 1.0f, A, B, y + yo,
                ohw, sep ? NULL : &ep, gs, a->pool, threads);
    }
  if (sep)
    nr_conv_epilogue_pass(a, NR_LAYOUT_PLAIN, &q, bias, res, threads);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}

/* ---- the table ------------------------------------------------------------------------- */

#define PREC_FP16 NR_PREC_FP16
#define PREC_BF16 NR_PREC_BF16

/* Heuristic order inside one precision (select only compares tactics of the node's
 * precision): the 1-row kernels for M <= 4 (they support nothing else), then the
 * widest ISA's tile kernel; block widening below in-kernel widening, which streams
 * the weights narrow and measured faster for Gemm/MatMul (lpgemm.h); oneDNN above the
 * portable kernels only, as in the fp32 family (its emulated bf16 measured 0.2-0.3x
 * fp32 on M = 128 and on 1x1 convs, lp_onednn.c). */
#define LP_PRIORITY(mr, isa, bw)                                                       \
  ((bw) ? ((isa) == NR_ISA_AVX512 ? 90 : 80)                                           \
   : (isa) == NR_ISA_AVX512 ? ((mr) == 1 ? 115 : 110)                                  \
   : (isa)                  ? ((mr) == 1 ? 105 : 100)                                  \
                            : ((mr) == 1 ? 25 : 20))

#define NR_LP_UKERNEL(name, type, mr, nr, isa, il)                                      \
  {#name, LP_DOMAIN, LP_OP, "nnroute", "gemm", NR_LAYOUT_PLAIN, isa,                  \
   LP_PRIORITY(mr, isa, 0), sup_##name, prep_##name, lp_gemm_run, PREC_##type,         \
   NR_DEVICE_CPU},
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa)                                  \
  {#name, LP_DOMAIN, LP_OP, "nnroute", "gemm", NR_LAYOUT_PLAIN, isa,                  \
   LP_PRIORITY(mr, isa, 1), sup_##name, prep_##name, lp_gemm_run, PREC_##type,         \
   NR_DEVICE_CPU},

#define LP_CONV(id, dom, op, algo, prio, sup, prep, prec)                              \
  {id, dom, op, "nnroute", algo, NR_LAYOUT_PLAIN, 0, prio, sup, prep, lp_conv_run, prec, \
   NR_DEVICE_CPU},
#define LP_CONV_OPS(id, algo, prio, sup, prep, prec)                                   \
  LP_CONV(id, "", "Conv", algo, prio, sup, prep, prec)                                 \
  LP_CONV(id, NR_DOMAIN, "FusedConv", algo, prio, sup, prep, prec)

const nr_tactic nr_tactics_cpu_lpgemm[] = {
#define LP_DOMAIN ""
#define LP_OP "Gemm"
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
    LP_ONEDNN_GEMM_ROWS("", "Gemm")
#undef LP_OP
#define LP_OP "MatMul"
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
    LP_ONEDNN_GEMM_ROWS("", "MatMul")
#undef LP_OP
#undef LP_DOMAIN
#define LP_DOMAIN NR_DOMAIN
#define LP_OP "FusedGemm"
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
    LP_ONEDNN_GEMM_ROWS(NR_DOMAIN, "FusedGemm")
#undef LP_OP
#define LP_OP "FusedMatMul"
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
    LP_ONEDNN_GEMM_ROWS(NR_DOMAIN, "FusedMatMul")
#undef LP_OP
#undef LP_DOMAIN
    /* id                     algo       prio  supports         prepare */
    LP_CONV_OPS("nr_f16w_conv_1x1", "gemm1x1", 100, sup_conv_1x1, prep_conv_f16, NR_PREC_FP16)
    LP_CONV_OPS("nr_f16w_conv_im2col", "im2col", 50, sup_conv_im2col, prep_conv_f16,
                NR_PREC_FP16)
    LP_CONV_OPS("nr_bf16w_conv_1x1", "gemm1x1", 100, sup_conv_1x1, prep_conv_bf16,
                NR_PREC_BF16)
    LP_CONV_OPS("nr_bf16w_conv_im2col", "im2col", 50, sup_conv_im2col, prep_conv_bf16,
                NR_PREC_BF16)
    LP_ONEDNN_CONV_ROWS
    {0},
};
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN

/* ---- what the precision knob asks ------------------------------------------------------ */

bool nr_lowp_supports_node(const nr_graph *g, const nr_node *n, nr_precision p) {
  if (p != NR_PREC_FP16 && p != NR_PREC_BF16)
    return false;
  if (gemm_node_is_gemm(n)) {
    gemm_view v;
    nr_gemm_step_params gp;
    gemm_view_from_graph(g, n, &v);
    return gemm_analyze(&v, &gp) && gemm_fits(&gp);
  }
  conv_p cp;
  return nr_conv_parse_graph(g, n, &cp) && conv_fits(&cp, false);
}
