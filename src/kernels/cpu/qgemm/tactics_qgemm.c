/* tactics_qgemm.c - the int8 tactics on nnroute's own int8 GEMM (nr_tactics_cpu_qgemm,
 * precision NR_PREC_INT8): Gemm, MatMul, nnroute.FusedGemm and nnroute.FusedMatMul with
 * a constant B on the W_B micro-kernels (one tactic per kernel, id = kernel name,
 * nr_qs8_gemm_*), and Conv / nnroute.FusedConv in PLAIN layout on the W_A kernels, as
 * a straight GEMM for 1x1 stride-1 unpadded ones (algo "gemm1x1", ids
 * nr_qs8_conv_1x1_<tile>__<isa>) and through u8 im2col columns otherwise (algo
 * "im2col", nr_qs8_conv_im2col_<tile>__<isa>), plus NHWC 1x1 convs on the W_B kernels
 * (nr_qs8_conv_nhwc_1x1_<tile>__<isa>, the pixels as the GEMM's rows), so conv.algo
 * and conv.layout restrict them as they restrict the fp32 tactics.
 *
 * Key decisions. Nodes are parsed by the fp32 families' own analyses (gemm_analyze,
 * nr_conv_parse) into their own params records; run() reuses their batch, epilogue
 * and residual helpers (see qgemm_tactic.h for what int8 adds and where it lives).
 * prepare() quantizes W per output channel, packs it for the tactic's micro-kernel,
 * asks nr_quant_act_params for the activation's scale and zero point on the kernel's
 * grid ([0, 255] for VNNI and portable, [0, 127] for AVX2), and folds alpha, the
 * activation scale, the zero-point correction and a per-channel bias (Gemm's beta * C,
 * FusedMatMul's bias, Conv's B) into three per-channel arrays the micro-kernel applies
 * in registers. Any other bias, the residual and the activation stay the fp32
 * epilogue's. The conv rows also answer io8 (plan.h): they read a uint8 input on
 * their own grid and requantize their output for the next int8 layer when the
 * int8_chain pass gives them uint8 slots; the Gemm rows stay fp32 in and out.
 *
 * Priorities (int8 candidates only compete with each other): VNNI 100-125, AVX2 60-85,
 * portable 10-30; within an ISA the 1x1 conv above im2col and the default tile above
 * the others, which exist for profiling selection and the benchmark. Not covered (no
 * int8 tactic here): batched constant B (rank > 2), K above 65536 (int32 sums could
 * overflow), and convolutions with fewer than 4 output channels per group (depthwise:
 * one GEMM row per group would waste the tile). */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/conv_knobs.h"
#include "kernels/cpu/gemm/gemm_knobs.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "kernels/cpu/qgemm/qgemm_tactic.h"

#include "ir/fused.h"
#include "plan/quant.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(nr_qgemm_cfg) == sizeof(nr_gemm_cfg), "cfg slot of the fp32 records");
_Static_assert(sizeof(qt_header) <= QT_HEADER_BYTES, "the header's room");

/* Largest K whose int32 sums cannot overflow: K * 255 * 127 < 2^31. */
#define QT_MAX_K 65536
/* Fewest output channels per group a conv needs. */
#define QT_MIN_MG 4

static uint64_t align64(uint64_t n) {
  return (n + 63) / 64 * 64;
}

/* ---- the packed data -------------------------------------------------------------- */

/* W as `groups` matrices of ch / groups channels x k: element (c, p) of group g at
 * w[g * group_stride + c * stride_c + p * stride_k]. */
typedef struct qt_weights {
  const float *w;
  int64_t channels, k, groups, stride_c, stride_k, group_stride;
  const float *bias; /* per channel (bias_n of them, 1 = broadcast) times bias_scale */
  int64_t bias_n;
  float bias_scale, alpha;
  const void *extra; /* appended as is: Gemm's per-row bias, conv's im2col masks */
  uint64_t extra_bytes;
  const nr_slot *y8; /* output 0 when the int8_chain pass made it uint8, else NULL */
} qt_weights;

static nr_status qt_fail(const nr_tactic_ctx *c, nr_status s, const char *what) {
  char node[256];
  return nr_errorf(c->err, s, "%s: %s: %s", nr_node_describe(c->node, node, sizeof node),
                   c->step->tactic ? c->step->tactic->id : "int8", what);
}

/* Quantizes and packs W, builds the dequantization arrays for the activation grid q
 * and appends header + W + arrays (+ extra, whose offset the header records) to the
 * engine. *extra_off receives that offset in floats. */
static nr_status qt_pack(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                         nr_qgemm_cfg cfg, const qt_weights *w, nr_qparams q, int qmax,
                         uint32_t *extra_off) {
  if (!isfinite(q.scale) || q.zero_point < 0 || q.zero_point > qmax)
    return qt_fail(c, NR_ERR_INVALID_ARGUMENT, "the activation's range is not finite");
  if (q.scale < 1e-30f)
    q.scale = 1e-30f; /* a range of denormals: keeps 1 / scale finite */
  int64_t chg = w->channels / w->groups, ch = w->channels;
  int8_t *wq = malloc((size_t)(ch * w->k + 1));
  float *ws = malloc(sizeof(float) * (size_t)ch);
  int32_t *wsum = malloc(sizeof(int32_t) * (size_t)ch);
  qt_header h = {q.scale, 1.0f / q.scale, q.zero_point, qmax};
  if (w->y8)
    h.y_inv_scale = 1.0f / w->y8->q8_scale, h.y_zero_point = w->y8->q8_zero_point,
    h.y_qmax = w->y8->q8_qmax, h.y_round = w->y8->q8_round;
  h.w_off = QT_HEADER_BYTES;
  h.w_unit = align64(nr_qgemm_packed_w_size(cfg, chg, w->k));
  h.scale_off = h.w_off + h.w_unit * (uint64_t)w->groups;
  h.corr_off = h.scale_off + align64(sizeof(float) * (uint64_t)ch);
  h.bias_off = h.corr_off + align64(sizeof(int32_t) * (uint64_t)ch);
  uint64_t xoff = h.bias_off + align64(sizeof(float) * (uint64_t)ch);
  uint64_t total = xoff + align64(w->extra_bytes);
  h.extra_off = w->extra_bytes ? xoff : 0;
  char *buf = aligned_alloc(64, total);
  nr_status s = NR_OK;
  if (!wq || !ws || !wsum || !buf) {
    s = qt_fail(c, NR_ERR_NOMEM, "no memory for the quantized weights");
    goto done;
  }
  memset(buf, 0, total);
  for (int64_t g = 0; g < w->groups && !s; g++)
    if (!nr_qgemm_quantize_w(chg, w->k, w->w + g * w->group_stride, w->stride_c,
                             w->stride_k, wq + g * chg * w->k, ws + g * chg,
                             wsum + g * chg))
      s = qt_fail(c, NR_ERR_INVALID_ARGUMENT, "a weight is not finite");
  if (s)
    goto done;
  memcpy(buf, &h, sizeof h);
  for (int64_t g = 0; g < w->groups; g++)
    nr_qgemm_pack_w(cfg, chg, w->k, wq + g * chg * w->k,
                    buf + h.w_off + h.w_unit * (uint64_t)g);
  nr_qgemm_dequant_build(ch, ws, wsum, q.scale, q.zero_point, w->alpha, w->bias, w->bias_n,
                         w->bias_scale, (float *)(buf + h.scale_off),
                         (int32_t *)(buf + h.corr_off), (float *)(buf + h.bias_off));
  if (w->extra_bytes)
    memcpy(buf + xoff, w->extra, w->extra_bytes);
  *extra_off = (uint32_t)(xoff / sizeof(float));
  s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
  st->packed_size = total;
  if (!s) /* run() reads the quantized W only */
    nr_step_absorb(st, 1);
done:
  free(wq), free(ws), free(wsum), free(buf);
  return s;
}

static int default_threads(const nr_step *st) {
  return nr_threads_or_online(st->threads);
}

/* ---- Gemm / MatMul on the W_B kernels ---------------------------------------------- */

static bool gemm_problem(const nr_tactic_ctx *c, nr_gemm_step_params *p) {
  gemm_view v;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, p) && (p->flags & GEMM_F_B_CONST) &&
         !(p->flags & GEMM_F_BATCHED) && p->k <= QT_MAX_K;
}

/* Tiles for some products only, so that they can outrank the default tile there: the
 * 1-row kernels for at most 4 rows (as the fp32 family's), the 64-column W_A tile for
 * products of at least 784 columns and 512 k (resnet's 3x3 convolutions at 56x56 and
 * 28x28: 15% faster than 8x32 in nr_qgemm_bench; on fewer columns or less k it is
 * not faster). */
static bool tile_fits(int uk, int64_t m, int64_t n, int64_t k) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  if (u->mr == 1)
    return m <= 4;
  if (u->wside == NR_QGEMM_W_A && u->nr == 64)
    return n >= 784 && k >= 512;
  return true;
}

static bool gemm_supports(const nr_tactic_ctx *c, int uk) {
  nr_gemm_step_params p;
  return gemm_problem(c, &p) && tile_fits(uk, p.m, p.n, p.k);
}

/* beta * C of Gemm (FusedMatMul's bias: beta is 1) as the per-channel or per-row bias. */
static void gemm_bias(const nr_tactic_ctx *c, const nr_gemm_step_params *p, qt_weights *w,
                      float **row) {
  if (p->bias != GEMM_BIAS_PACKED_COL && p->bias != GEMM_BIAS_PACKED_ROW)
    return;
  const nr_slot *cs = nr_step_in(c, 2);
  int64_t cnt = 1;
  for (int d = 0; d < cs->rank; d++)
    cnt *= cs->dims[d];
  float beta = p->op == GEMM_OP_GEMM || p->op == GEMM_OP_FUSED_GEMM ? p->beta : 1.0f;
  if (p->bias == GEMM_BIAS_PACKED_COL) {
    w->bias = nr_step_const(c, 2), w->bias_n = cnt, w->bias_scale = beta;
    return;
  }
  const float *src = nr_step_const(c, 2);
  *row = malloc(sizeof(float) * (size_t)p->m);
  for (int64_t i = 0; *row && i < p->m; i++)
    (*row)[i] = beta * src[cnt == 1 ? 0 : i];
  w->extra = *row, w->extra_bytes = *row ? sizeof(float) * (uint64_t)p->m : 0;
}

static nr_status gemm_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, int uk) {
  nr_gemm_step_params p;
  if (!gemm_problem(c, &p))
    return qt_fail(c, NR_ERR_INTERNAL, "not an int8 GEMM this tactic runs");
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  nr_qparams q;
  nr_status s = nr_quant_act_params(c, 0, u->qmax, &q);
  if (s)
    return s;
  nr_qgemm_cfg cfg = nr_qgemm_default_cfg(uk, p.m, p.n, p.k);
  bool tb = (p.flags & GEMM_F_TB) != 0;
  qt_weights w = {.w = nr_step_const(c, 1),
                  .channels = p.n,
                  .k = p.k,
                  .groups = 1,
                  .stride_c = tb ? p.k : 1,
                  .stride_k = tb ? 1 : p.n,
                  .alpha = p.alpha};
  float *row = NULL;
  gemm_bias(c, &p, &w, &row);
  if (p.bias == GEMM_BIAS_PACKED_ROW && !row)
    return qt_fail(c, NR_ERR_NOMEM, "no memory for the bias");
  s = qt_pack(c, plan, st, cfg, &w, q, u->qmax, &p.bias_off);
  free(row);
  if (s)
    return s;
  if (nr_route_is(c->route, NR_KNOB_GEMM_THREADS_MAX, c->node, "1"))
    st->threads = 1;
  const char *split = nr_route_get(c->route, NR_KNOB_GEMM_THREADS, c->node);
  p.split = split && !strcmp(split, "m")   ? NR_QGEMM_SPLIT_M
            : split && !strcmp(split, "n") ? NR_QGEMM_SPLIT_N
                                           : NR_QGEMM_SPLIT_AUTO;
  int t = default_threads(st);
  p.threads = (uint16_t)(t > 65535 ? 65535 : t);
  memcpy(&p.cfg, &cfg, sizeof cfg);
  st->scratch = (uint64_t)p.threads * nr_qgemm_scratch_size(cfg, p.m, p.n, p.k, 1);
  memset(st->params, 0, sizeof st->params);
  memcpy(st->params, &p, sizeof p);
  return NR_OK;
}

static nr_status gemm_run(const nr_exec_args *x) {
  nr_gemm_step_params p;
  memcpy(&p, x->step->params, sizeof p);
  int t = nr_threadpool_size(x->pool);
  if (x->step->threads > 0 && x->step->threads < t)
    t = x->step->threads;
  if (t > p.threads)
    t = p.threads;
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, &p, 0, &pr);
  gemm_epilogue_get(x, &p, pr.r, &ep);
  if (p.bias == GEMM_BIAS_PACKED_COL)
    ep.bias = NULL; /* folded into the dequantization */
  nr_qgemm_cfg cfg;
  memcpy(&cfg, &p.cfg, sizeof cfg);
  bool ta = (p.flags & GEMM_F_TA) != 0;
  nr_qgemm_dequant dq = qt_dequant(x, 0);
  nr_qgemm_split_run(cfg, (nr_qgemm_split)p.split, p.m, p.n, p.k,
                     (const char *)x->packed + qt_hdr(x)->w_off,
                     qt_act(x, pr.a, ta ? p.m : p.k, ta, false), &dq, pr.c, p.n, &ep,
                     x->scratch, x->pool, t);
  return NR_OK;
}

/* ---- Conv on the W_A kernels -------------------------------------------------------- */

static bool is_1x1_s1(const conv_p *p) {
  return p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 && p->pl == 0 &&
         p->oh == p->h && p->ow == p->w;
}

static bool conv_problem(const nr_tactic_ctx *c, conv_p *p) {
  nr_f32_view v; /* uint8 activations (the int8_chain pass) parse as float */
  const nr_tactic_ctx *f = nr_f32_view_init(&v, c);
  bool ok = f && nr_conv_parse(f, p);
  nr_f32_view_free(&v);
  if (!ok)
    return false;
  int64_t k = (int64_t)(p->c / p->group) * p->kh * p->kw;
  return k <= QT_MAX_K && p->m / p->group >= QT_MIN_MG;
}

static bool conv_supports(const nr_tactic_ctx *c, int uk, bool is_1x1) {
  conv_p p;
  if (!conv_problem(c, &p) || (is_1x1 && !is_1x1_s1(&p)))
    return false;
  int64_t k = (int64_t)(p.c / p.group) * p.kh * p.kw, ohw = (int64_t)p.oh * p.ow;
  return nr_qgemm_ukernel_get(uk)->wside == NR_QGEMM_W_B
             ? tile_fits(uk, ohw, p.m / p.group, k)
             : tile_fits(uk, p.m / p.group, ohw, k);
}

/* A uint8 input 0 (the int8_chain pass) must hold this step's own grid q. */
static nr_status check_x8(const nr_tactic_ctx *c, nr_qparams q, int qmax) {
  const nr_slot *x = nr_step_in(c, 0);
  if (x->dtype != NR_DTYPE_UINT8 ||
      (x->q8_scale == q.scale && x->q8_zero_point == q.zero_point && x->q8_qmax == qmax &&
       x->q8_round == NR_Q8_ROUND_MUL))
    return NR_OK;
  return qt_fail(c, NR_ERR_INTERNAL, "the uint8 input is on another grid than this step's");
}

/* The 8-bit capability of a conv row (nr_tactic.io8): any input 0 it runs; output 0
 * when the whole epilogue runs inside the GEMM (not conv.epilogue=separate, no
 * residual arriving in another layout); requantized as this family or oneDNN rounds. */
static bool conv_io8(const nr_tactic_ctx *c, int uk, bool is_1x1, nr_io8 *cap) {
  conv_p p;
  if (!conv_supports(c, uk, is_1x1) || !conv_problem(c, &p))
    return false;
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  nr_layout l = u->wside == NR_QGEMM_W_B ? NR_LAYOUT_NHWC : NR_LAYOUT_PLAIN;
  const nr_slot *r = p.has_res ? nr_step_in(c, 3) : NULL;
  cap->in = true;
  cap->out = !nr_route_is(c->route, NR_KNOB_CONV_EPILOGUE, c->node, "separate") &&
             (!r || r->layout == l);
  cap->qmax = u->qmax;
  cap->round = NR_Q8_ROUND_MUL;
  cap->out_rounds = 1u << NR_Q8_ROUND_MUL | 1u << NR_Q8_ROUND_FMA;
  return true;
}

/* PLAIN (W_A kernels: 1x1 or im2col) or NHWC 1x1 (W_B kernels: the pixels as rows). */
static nr_status conv_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, int uk,
                              bool is_1x1) {
  conv_p p;
  if (!conv_problem(c, &p))
    return qt_fail(c, NR_ERR_INTERNAL, "not a convolution this tactic runs");
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  nr_qparams q;
  nr_status s = nr_quant_act_params(c, 0, u->qmax, &q);
  if (!s)
    s = check_x8(c, q, u->qmax);
  if (s)
    return s;
  int64_t mg = p.m / p.group, k = (int64_t)(p.c / p.group) * p.kh * p.kw;
  int64_t ohw = (int64_t)p.oh * p.ow;
  bool nhwc = u->wside == NR_QGEMM_W_B;
  nr_qgemm_cfg cfg =
      nhwc ? nr_qgemm_default_cfg(uk, ohw, mg, k) : nr_qgemm_default_cfg(uk, mg, ohw, k);
  qt_weights w = {.w = nr_step_const(c, 1),
                  .channels = p.m,
                  .k = k,
                  .groups = p.group,
                  .stride_c = k,
                  .stride_k = 1,
                  .group_stride = mg * k,
                  .bias = nr_step_const(c, 2),
                  .bias_n = p.m,
                  .bias_scale = 1.0f,
                  .alpha = 1.0f};
  const nr_slot *y = nr_step_out(c, 0);
  w.y8 = y->dtype == NR_DTYPE_UINT8 ? y : NULL;
  int64_t nmasks = is_1x1 || nhwc ? 0 : nr_qconv_masks(&p, NULL);
  uint64_t *masks = nmasks ? malloc(sizeof(uint64_t) * (size_t)nmasks) : NULL;
  if (nmasks && !masks)
    return qt_fail(c, NR_ERR_NOMEM, "no memory for the im2col masks");
  if (masks)
    nr_qconv_masks(&p, masks);
  w.extra = masks, w.extra_bytes = sizeof(uint64_t) * (uint64_t)nmasks;
  uint32_t unused;
  s = qt_pack(c, plan, st, cfg, &w, q, u->qmax, &unused);
  free(masks);
  if (s)
    return s;
  if (nr_route_is(c->route, NR_KNOB_CONV_EPILOGUE, c->node, "separate"))
    p.opts |= CONV_OPT_SPLIT_EPI;
  if (nr_route_is(c->route, NR_KNOB_CONV_THREADS, c->node, "1"))
    p.opts |= CONV_OPT_SERIAL, st->threads = 1;
  memcpy(&p.gemm, &cfg, sizeof cfg);
  memcpy(st->params, &p, sizeof p);
  int threads = st->threads > 0 ? st->threads : NR_CONV_MAX_THREADS;
  size_t (*size)(nr_qgemm_cfg, int64_t, int64_t, int64_t, int) =
      w.y8 ? nr_qgemm_u8_scratch_size : nr_qgemm_scratch_size;
  st->scratch = nhwc ? size(cfg, ohw, mg, k, threads) : size(cfg, mg, ohw, k, threads);
  if (!is_1x1)
    st->scratch += nr_qconv_im2col_bytes(p.c, p.h, p.w);
  return NR_OK;
}

/* ---- per-kernel entry points and the table ------------------------------------------ */

#define FN_NR_QGEMM_W_B(name)                                                              \
  static bool sup_##name(const nr_tactic_ctx *c) {                                         \
    return gemm_supports(c, NR_QGEMM_UK_##name);                                           \
  }                                                                                        \
  static nr_status prep_##name(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {       \
    return gemm_prepare(c, plan, st, NR_QGEMM_UK_##name);                                  \
  }                                                                                        \
  static bool sup_nhwc_##name(const nr_tactic_ctx *c) {                                    \
    return conv_supports(c, NR_QGEMM_UK_##name, true);                                     \
  }                                                                                        \
  static nr_status prep_nhwc_##name(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {  \
    return conv_prepare(c, plan, st, NR_QGEMM_UK_##name, true);                            \
  }                                                                                        \
  static bool io8_nhwc_##name(const nr_tactic_ctx *c, nr_io8 *cap) {                       \
    return conv_io8(c, NR_QGEMM_UK_##name, true, cap);                                     \
  }
#define FN_NR_QGEMM_W_A(name)                                                              \
  static bool sup_1x1_##name(const nr_tactic_ctx *c) {                                     \
    return conv_supports(c, NR_QGEMM_UK_##name, true);                                     \
  }                                                                                        \
  static bool sup_im2col_##name(const nr_tactic_ctx *c) {                                  \
    return conv_supports(c, NR_QGEMM_UK_##name, false);                                    \
  }                                                                                        \
  static nr_status prep_1x1_##name(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {   \
    return conv_prepare(c, plan, st, NR_QGEMM_UK_##name, true);                            \
  }                                                                                        \
  static nr_status prep_im2col_##name(const nr_tactic_ctx *c, nr_plan *plan,               \
                                      nr_step *st) {                                       \
    return conv_prepare(c, plan, st, NR_QGEMM_UK_##name, false);                           \
  }                                                                                        \
  static bool io8_1x1_##name(const nr_tactic_ctx *c, nr_io8 *cap) {                        \
    return conv_io8(c, NR_QGEMM_UK_##name, true, cap);                                     \
  }                                                                                        \
  static bool io8_im2col_##name(const nr_tactic_ctx *c, nr_io8 *cap) {                     \
    return conv_io8(c, NR_QGEMM_UK_##name, false, cap);                                    \
  }
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax) FN_##wside(name)
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL

/* Priorities of the Gemm rows (G) and the PLAIN 1x1 conv rows (C; im2col 20 less, NHWC
 * 1x1 G - 40: below every PLAIN row, so only conv.layout or profiling picks them). The
 * default tiles: 8x32 (1x64 up to 4 rows; 4x64 for large convs, see tile_fits). */
#define QT_G_NR_ISA_AVX512VNNI(mr) ((mr) == 1 ? 125 : (mr) == 8 ? 120 : 110 - (mr))
#define QT_C_NR_ISA_AVX512VNNI(mr) ((mr) == 4 ? 122 : (mr) == 8 ? 120 : 110 - (mr))
#define QT_G_NR_ISA_AVX2(mr) ((mr) == 1 ? 85 : 80)
#define QT_C_NR_ISA_AVX2(mr) 80
#define QT_G_0(mr) 30
#define QT_C_0(mr) 30
/* Tactic ids of the conv rows: the algorithm, the tile and the ISA suffix. */
#define QT_SUF_NR_ISA_AVX512VNNI "__avx512vnni"
#define QT_SUF_NR_ISA_AVX2 "__avx2"
#define QT_SUF_0 ""

/* clang-format off */
#define QT_ROW(id, dom, op, algo, lay, isa, prio, sup, prep, run, io8)                     \
  {id, dom, op, "nnroute", algo, lay, isa, prio, sup, prep, run, NR_PREC_INT8,             \
   NR_DEVICE_CPU, io8},
/* clang-format on */

#define GEMM_ROWS_NR_QGEMM_W_A(name, mr, nr, isa)
#define P NR_LAYOUT_PLAIN
#define H NR_LAYOUT_NHWC
#define GEMM_ROWS_NR_QGEMM_W_B(name, mr, nr, isa)                                          \
  QT_ROW(#name, GEMM_DOMAIN, GEMM_OP, "gemm", P, isa, QT_G_##isa(mr), sup_##name,          \
         prep_##name, gemm_run, NULL)
#define CONV_ROWS_NR_QGEMM_W_B(name, mr, nr, isa)                                          \
  QT_ROW("nr_qs8_conv_nhwc_1x1_" #mr "x" #nr QT_SUF_##isa, CONV_DOMAIN, CONV_OP,           \
         "gemm1x1", H, isa, QT_G_##isa(mr) - 40, sup_nhwc_##name, prep_nhwc_##name,        \
         nr_qconv_nhwc_1x1_run, io8_nhwc_##name)
#define CONV_ROWS_NR_QGEMM_W_A(name, mr, nr, isa)                                          \
  QT_ROW("nr_qs8_conv_1x1_" #mr "x" #nr QT_SUF_##isa, CONV_DOMAIN, CONV_OP, "gemm1x1", P,  \
         isa, QT_C_##isa(mr), sup_1x1_##name, prep_1x1_##name, nr_qconv_1x1_run,           \
         io8_1x1_##name)                                                                   \
  QT_ROW("nr_qs8_conv_im2col_" #mr "x" #nr QT_SUF_##isa, CONV_DOMAIN, CONV_OP, "im2col",   \
         P, isa, QT_C_##isa(mr) - 20, sup_im2col_##name, prep_im2col_##name,               \
         nr_qconv_im2col_run, io8_im2col_##name)

const nr_tactic nr_tactics_cpu_qgemm[] = {
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax)                                   \
  GEMM_ROWS_##wside(name, mr, nr, isa)
#define GEMM_DOMAIN ""
#define GEMM_OP "Gemm"
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef GEMM_OP
#define GEMM_OP "MatMul"
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef GEMM_OP
#undef GEMM_DOMAIN
#define GEMM_DOMAIN NR_DOMAIN
#define GEMM_OP "FusedGemm"
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef GEMM_OP
#define GEMM_OP "FusedMatMul"
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef GEMM_OP
#undef GEMM_DOMAIN
#undef NR_QGEMM_UKERNEL
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax)                                   \
  CONV_ROWS_##wside(name, mr, nr, isa)
#define CONV_DOMAIN ""
#define CONV_OP "Conv"
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef CONV_OP
#undef CONV_DOMAIN
#define CONV_DOMAIN NR_DOMAIN
#define CONV_OP "FusedConv"
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef CONV_OP
#undef CONV_DOMAIN
#undef NR_QGEMM_UKERNEL
    {0},
};
#undef P
#undef H
