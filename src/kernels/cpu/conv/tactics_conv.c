/* tactics_conv.c - the convolution family's tables: nr_tactics_conv[] (one row per
 * algorithm x layout x ISA, listed once for Conv and once for nnroute.FusedConv with
 * the same id, since one kernel serves both) and nr_knobs_conv[] (conv.algo and
 * conv.layout per node); the node parser and epilogue they share are in conv_parse.c.
 *
 * Key decision: supports() is a pure predicate on the parsed record (conv_p), so the
 * knobs' valid() can ask the very same question from the graph alone, by wrapping the
 * node's tensors in a throwaway plan; a knob value is offered exactly when some
 * tactic of that algorithm (or layout) could run the node on this machine. */
#include "kernels/cpu/conv/conv_fits.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/conv_knobs.h"
#include "passes/pass_util.h"

#include "ir/fused.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- supports() predicates ------------------------------------------------------ */

static bool has_gemm(void) { return nr_gemm_ukernel_count() > 0; }

/* SUPPORTS: a PLAIN-layout row, which also runs a 1-D conv as H = 1
 * (nr_conv_parse_plain); SUPPORTS_2D: a row in a blocked layout, 2-D only (the layout
 * pass reorders rank-4 tensors only). */
#define SUPPORTS(name, cond)                                                           \
  static bool name(const nr_tactic_ctx *c) {                                           \
    conv_p p_, *p = &p_;                                                               \
    return nr_conv_parse_plain(c, p) && (cond);                                        \
  }
#define SUPPORTS_2D(name, cond)                                                        \
  static bool name(const nr_tactic_ctx *c) {                                           \
    conv_p p_, *p = &p_;                                                               \
    return nr_conv_parse(c, p) && (cond);                                              \
  }
/* conv.winograd_from=auto (the default): where the AVX-512 Winograd F(4,3) runs a 3x3
 * stride-1 node faster than igemm / sp in the model: output planes of at least 400
 * pixels (20x20) with at least 16 input channels. nr_conv_bench (2026-11-30), F(4,3)
 * time / the default's, 1 thread warm / cold weights: 64ch 56x56 0.40 / 0.45, 128ch
 * 28x28 0.45 / 0.55, squeezenet 16->64 55x55 0.60 / 0.68 and 32->128 27x27 0.51 /
 * 0.63; at 14x14 0.55 / 0.87 and in resnet50 within 5% of sp, at 13x13 0.62-1.04, at
 * 7x7 1.25-1.93 (a few tiles, 4x the weight bytes): those keep igemm / sp. Error:
 * resnet50's logits 1.25e-5 -> 2.5e-5 relative L2 from the reference with every 3x3
 * stride-1 node on it (ONNX Runtime is 1.7e-5 from it), within the knob's bound. */
static bool wino_auto(const conv_p *p) {
  return (nr_cpu_isa() & NR_ISA_AVX512) && is_wino(p) && p->c >= 16 &&
         (int64_t)p->oh * p->ow >= 400 && nr_conv_w43_scratch(p, 1) <= (512u << 20);
}

extern const nr_tactic nr_tactics_conv[];
static bool sup_im2col(const nr_tactic_ctx *c);
static bool sup_igemm(const nr_tactic_ctx *c);
static bool sup_sp(const nr_tactic_ctx *c);
static bool sup_igemm2(const nr_tactic_ctx *c);
static bool sup_sp2(const nr_tactic_ctx *c);

/* The tactics that step aside for Winograd F(4,3): PLAIN im2col, igemm and sp. */
static bool steps_aside(const nr_tactic *t) {
  return t->supports == sup_im2col || t->supports == sup_igemm || t->supports == sup_sp ||
         t->supports == sup_igemm2 || t->supports == sup_sp2;
}

/* Whether the route pins conv.algo to a value that allows one of those tactics (the
 * knob's row says which tactics a value allows): then none of them steps aside. */
static bool pins_stepping_aside(const nr_tactic_ctx *c) {
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (steps_aside(t) && nr_route_pins(c->route, NR_KNOB_CONV_ALGO, c->node, t))
      return true;
  return false;
}

/* conv.winograd_from: auto (wino_auto), never, or a 3x3 stride-1 node with at least
 * that many input channels leaves PLAIN im2col, igemm and sp to Winograd F(4,3) (next
 * in priority). A conv.algo pinned to one of them outranks it. */
static bool wino_preferred(const nr_tactic_ctx *c, const conv_p *p) {
  const char *v = nr_route_get(c->route, NR_KNOB_CONV_WINOGRAD_FROM, c->node);
  bool on = !v || !strcmp(v, "auto") ? wino_auto(p)
            : strcmp(v, "never")     ? is_wino(p) && p->c >= atoi(v)
                                     : false;
  return on && !pins_stepping_aside(c);
}

SUPPORTS(sup_any, true)
SUPPORTS(sup_im2col,
         has_gemm() && (im2col_fits(p) || p->m / p->group >= 8) && !wino_preferred(c, p))
SUPPORTS_2D(sup_nhwc_im2col, has_gemm() && im2col_fits(p))
SUPPORTS(sup_1x1, has_gemm() && is_1x1_s1(p))
SUPPORTS_2D(sup_nhwc_1x1, has_gemm() && is_1x1_s1(p))
SUPPORTS(sup_dw, is_dw(p) || is_dw7(p))
/* The NCHW8C depthwise kernels read any stride pair and dilation: the AVX2 hosts'
 * path for the 2x1-strided and dilation-2 windows. */
SUPPORTS_2D(sup_dw8, is_dw(p) || is_dw_s21(p) || is_dw_dil2(p))
/* conv.dw_kernel=avx2 leaves a depthwise node to nr_f32_conv_dw__avx2 where the AVX-512
 * kernel would run it (A/B runs on one binary, triage). */
SUPPORTS(sup_dw512,
         (is_dw(p) || is_dw7(p) || is_dw_dil2(p) || is_dw_s21(p)) &&
             !nr_route_is(c->route, NR_KNOB_CONV_DW_KERNEL, c->node, "avx2"))
SUPPORTS(sup_smallc, is_smallc(p))
SUPPORTS_2D(sup_nchw8c, p->group == 1)
SUPPORTS(sup_wino, has_gemm() && is_wino(p))
/* winograd_f43__avx512: any 3x3 stride-1 group-1 node whose scratch (padded copies and
 * one thread's block buffers) stays under 512 MiB. */
SUPPORTS(sup_wino512, is_wino(p) && nr_conv_w43_scratch(p, 1) <= (512u << 20))
SUPPORTS(sup_onednn, p->act < NR_ACT_COUNT) /* others run after the primitive */
/* igemm: a group-1 window of 2 to 64 taps, at most 8 x 8 stride
 * phases, whose padded copy stays under 256 MiB; steps aside for conv.winograd_from as
 * im2col does. Not 1x1: there the packed GEMM reads X (or its strided copy) as
 * contiguous panels, where igemm's loads stride across C planes (measured 1.2-1.9x
 * slower on resnet's 1x1 layers, nr_conv_bench). */
static bool igemm_taps_fit(const conv_p *p, int max_taps) {
  int taps = (int)p->kh * p->kw;
  return p->group == 1 && taps > 1 && taps <= max_taps && p->sh * p->sw <= 64 &&
         nr_conv_igemm_scratch(p) <= (256u << 20);
}
static bool igemm_fits(const conv_p *p) { return igemm_taps_fit(p, 64); }
/* Not for a dilated window: its taps read rows of the padded copy that no other tap
 * shares, and the copy (C planes) is streamed once per tap. DeepLabV3's ASPP conv
 * (960 -> 256 channels, 3x3, dilation 12 on 20x20) took 2.3x im2col's time and 2.7x
 * onednn's in the model (nnroute bench --profile, 1 thread, conv.algo pinned per node);
 * the zoo has no other dilated conv. Both ISAs' igemm read the copy the same way. */
SUPPORTS(sup_igemm, igemm_fits(p) && p->dh == 1 && p->dw == 1 && !wino_preferred(c, p))
/* igemm__avx2: the same windows (its tiles are smaller, so the same copy fits); where
 * AVX-512 is off (measured there only: docs/performance-notes.md), also 9x9 ones and
 * grouped convs of 4+ output and 2+ input channels a group, one group-1 igemm each. */
static bool igemm2_fits(const conv_p *p) {
  bool avx2_host = !(nr_cpu_isa() & NR_ISA_AVX512); /* measured there only */
  int max_taps = avx2_host ? NR_CONV_IGEMM_MAX_TAPS : 64;
  if (p->group <= 1)
    return igemm_taps_fit(p, max_taps);
  if (!avx2_host)
    return false;
  conv_p q = *p;
  q.group = 1, q.c = p->c / p->group, q.m = p->m / p->group;
  return q.m >= 4 && q.c >= 2 && igemm_taps_fit(&q, max_taps) &&
         nr_conv_igemm_scratch(p) <= (256u << 20);
}
SUPPORTS(sup_igemm2, igemm2_fits(p) && p->dh == 1 && p->dw == 1 && !wino_preferred(c, p))
/* sp: igemm's windows where the output plane is small (at most 16 x 16) and there are
 * enough channels for its 32-channel panels and its reduction to pay (measured against
 * igemm: docs/performance-notes.md, small planes). Ahead of igemm in priority, so
 * conv.algo=igemm (or im2col) pins a node back. */
static bool sp_fits(const conv_p *p) {
  return igemm_fits(p) && p->oh <= 16 && p->ow <= 16 && p->m >= 64 && p->c >= 48;
}
SUPPORTS(sup_sp, sp_fits(p) && !wino_preferred(c, p))
/* sp__avx2: igemm__avx2's sixteen-channel turned-around tile, on output planes of at
 * most 8 x 8 (resnet's 7x7 layers) with sp's channel counts. nr_conv_bench, NNROUTE_ISA=
 * avx2, 1 thread, CPU time, sp__avx2 / igemm__avx2: 512ch 7x7 0.79-0.89, 256->512
 * 14->7 0.87-0.90, 512ch 14->7 0.63-0.93; at 13x13 and 14x14 1.02-1.14 (igemm's rows
 * of 15-16 padded pixels waste little there): those keep igemm. */
SUPPORTS(sup_sp2, sp_fits(p) && p->oh <= 8 && p->ow <= 8 && !wino_preferred(c, p))
/* pw: group-1 1x1 without padding, any stride (no end padding either: the output is
 * exactly the strided input pixels). */
static bool is_pw(const conv_p *p) {
  return p->group == 1 && p->kh == 1 && p->kw == 1 && p->pt == 0 && p->pl == 0 &&
         p->oh == (p->h - 1) / p->sh + 1 && p->ow == (p->w - 1) / p->sw + 1;
}
SUPPORTS(sup_pw, is_pw(p))
/* pw__avx2: the same nodes but a one-pixel output (the squeeze-and-excite convs), which
 * nr_f32_conv_1x1 runs as a matrix-vector product. */
SUPPORTS(sup_pw2, is_pw(p) && (int64_t)p->oh * p->ow > 1)

/* ---- prepare() ------------------------------------------------------------------ */

/* conv.prepack / conv.epilogue / conv.threads as opts bits; threads=1 also sets
 * step->threads, which every kernel passes to nr_parallel_for and nr_gemm. */
uint8_t nr_conv_knob_opts(const nr_tactic_ctx *c) {
  uint8_t o = 0;
  if (nr_route_is(c->route, NR_KNOB_CONV_PREPACK, c->node, "off"))
    o |= CONV_OPT_RAW_W;
  if (nr_route_is(c->route, NR_KNOB_CONV_EPILOGUE, c->node, "separate"))
    o |= CONV_OPT_SPLIT_EPI;
  if (nr_route_is(c->route, NR_KNOB_CONV_THREADS, c->node, "1"))
    o |= CONV_OPT_SERIAL;
  return o;
}

static nr_status store(const nr_tactic_ctx *c, nr_step *st, conv_p *p) {
  if (!nr_conv_parse_plain(c, p)) {
    char b[256];
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s cannot run it",
                     nr_node_describe(c->node, b, sizeof b), st->tactic->id);
  }
  p->opts = nr_conv_knob_opts(c);
  if (p->opts & CONV_OPT_SERIAL)
    st->threads = 1;
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

static nr_status prep_smallc(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (!s)
    st->scratch = nr_conv_smallc_scratch(&p);
  return s;
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

/* ---- the GEMM blocking knobs ---------------------------------------------------- */

/* One product of a GEMM-based tactic: M x N x K. */
typedef struct gemm_dims {
  int64_t m, n, k;
} gemm_dims;

/* The tactics whose products run nr_gemm with conv.gemm_* blocking: not the AVX-512
 * Winograd, which packs and multiplies on its own. */
static bool is_gemm_algo(const nr_tactic *t) {
  return !strcmp(t->algo, "im2col") || !strcmp(t->algo, "gemm1x1") ||
         (!strncmp(t->algo, "winograd", 8) && !(t->isa & NR_ISA_AVX512));
}

/* A PLAIN 1x1 conv over a 1x1 plane runs as one row x^T W_g^T (CONV_OPT_ROW). */
static bool row_product(const nr_tactic *t, const conv_p *p) {
  return t->layout == NR_LAYOUT_PLAIN && !strcmp(t->algo, "gemm1x1") && is_1x1_s1(p) &&
         p->h == 1 && p->w == 1;
}

/* Per group (PLAIN: W_g x col, NHWC or a row: col x W_g^T) or per Winograd tile. */
static gemm_dims gemm_shape(const nr_tactic *t, const conv_p *p) {
  int64_t ohw = (int64_t)p->oh * p->ow, mg = p->m / p->group;
  int64_t k = (int64_t)(p->c / p->group) * p->kh * p->kw;
  if (!strncmp(t->algo, "winograd", 8)) {
    int tile = !strcmp(t->algo, "winograd23") ? 2 : 4;
    int64_t tiles = (int64_t)((p->oh + tile - 1) / tile) * ((p->ow + tile - 1) / tile);
    return (gemm_dims){p->m, tiles, p->c};
  }
  return t->layout == NR_LAYOUT_NHWC || row_product(t, p) ? (gemm_dims){ohw, mg, k}
                                                          : (gemm_dims){mg, ohw, k};
}

static int ukernel_index(const char *name) {
  for (int i = 0; name && i < nr_gemm_ukernel_count(); i++)
    if (!strcmp(nr_gemm_ukernel_get(i)->name, name))
      return i;
  return -1;
}

static int knob_int(const nr_tactic_ctx *c, nr_knob_id id, int dflt) {
  const char *v = nr_route_get(c->route, id, c->node);
  return v && strcmp(v, "auto") ? atoi(v) : dflt;
}

/* The default cfg for the product, then conv.ukernel and conv.gemm_{mc,kc,nc}. */
static nr_gemm_cfg gemm_cfg(const nr_tactic_ctx *c, gemm_dims d) {
  nr_gemm_cfg cfg = nr_gemm_default_cfg(d.m, d.n, d.k);
  int uk = ukernel_index(nr_route_get(c->route, NR_KNOB_CONV_UKERNEL, c->node));
  if (uk >= 0 && !(nr_gemm_ukernel_get(uk)->isa & ~nr_cpu_isa()))
    cfg.ukernel = (uint16_t)uk;
  cfg.mc = (uint16_t)knob_int(c, NR_KNOB_CONV_GEMM_MC, cfg.mc);
  cfg.kc = (uint16_t)knob_int(c, NR_KNOB_CONV_GEMM_KC, cfg.kc);
  cfg.nc = (uint16_t)knob_int(c, NR_KNOB_CONV_GEMM_NC, cfg.nc);
  return cfg;
}

static int scratch_threads(const nr_step *st) {
  return st->threads > 0 ? st->threads : NR_CONV_MAX_THREADS;
}

/* GEMM tactics: m x n x k of one group's product, scratch for the columns. */
static nr_status prep_gemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, bool nhwc) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  gemm_dims d = gemm_shape(st->tactic, &p);
  p.gemm = gemm_cfg(c, d);
  if (row_product(st->tactic, &p)) {
    p.opts |= CONV_OPT_ROW;
    nhwc = true;
  }
  uint64_t rows = p.oh;
  if (!nhwc && !is_1x1_s1(&p))
    rows = (uint64_t)(p.extra = (uint32_t)nr_conv_im2col_band(&p));
  memcpy(st->params, &p, sizeof p);
  uint64_t cols = is_1x1_s1(&p) ? 0 : rows * p.ow * d.k * sizeof(float);
  st->scratch = (cols + 63) / 64 * 64 +
                nr_gemm_scratch_size(p.gemm, d.m, d.n, d.k, scratch_threads(st));
  uint64_t workers = nhwc ? 0 : (uint64_t)nr_conv_im2col_workers(&p, scratch_threads(st));
  if (workers * nr_conv_im2col_worker_bytes(&p) > st->scratch)
    st->scratch = workers * nr_conv_im2col_worker_bytes(&p);
  return nr_conv_pack_gemm(c, plan, st, nhwc ? CONV_PACK_NHWC_B : CONV_PACK_GEMM_A);
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
  int64_t a = tile + 2;
  p.extra = (uint32_t)tile;
  gemm_dims d = gemm_shape(st->tactic, &p);
  p.gemm = gemm_cfg(c, d);
  memcpy(st->params, &p, sizeof p);
  uint64_t v = (uint64_t)(a * a * d.n * (p.c + p.m)) * sizeof(float);
  st->scratch = (v + 63) / 64 * 64 +
                nr_gemm_scratch_size(p.gemm, d.m, d.n, d.k, scratch_threads(st));
  return nr_conv_pack_gemm(c, plan, st, CONV_PACK_WINOGRAD);
}
static nr_status prep_wino23(const nr_tactic_ctx *c, nr_plan *pl, nr_step *st) {
  return prep_wino(c, pl, st, 2);
}
static nr_status prep_wino43(const nr_tactic_ctx *c, nr_plan *pl, nr_step *st) {
  return prep_wino(c, pl, st, 4);
}
/* winograd_f43__avx512: its own U packing; the GEMM blocking knobs do not reach it. */
static nr_status prep_wino43_512(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  p.extra = 4;
  memcpy(st->params, &p, sizeof p);
  st->scratch = nr_conv_w43_scratch(&p, scratch_threads(st));
  return nr_conv_pack_w43(c, plan, st);
}

/* igemm's register tile: the one with less padded work (output channels rounded up to
 * mr times padded pixels rounded up to np); 12x32 on a tie. */
static uint32_t igemm_variant(conv_p p, uint32_t first) {
  int64_t work[2];
  if (p.group > 1) /* the tile covers one group's output channels */
    p.m /= p.group;
  for (int v = 0; v < 2; v++) {
    conv_igemm_geo g;
    p.extra = first + (uint32_t)v;
    nr_conv_igemm_geo(&p, &g);
    work[v] = (p.m + g.mr - 1) / g.mr * g.mr * ((g.q + g.np - 1) / g.np * g.np);
  }
  return first + (work[1] < work[0] ? 1u : 0u);
}

static nr_status prep_igemm_tiles(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                                  uint32_t first) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  p.extra = igemm_variant(p, first);
  memcpy(st->params, &p, sizeof p);
  st->scratch = nr_conv_igemm_scratch(&p);
  return nr_conv_pack_igemm(c, plan, st);
}
/* igemm__avx512: 12x32 or 8x48; igemm__avx2: 6x16 or 4x24. */
static nr_status prep_igemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return prep_igemm_tiles(c, plan, st, NR_CONV_IGEMM_TILE_12X32);
}
static nr_status prep_igemm2(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return prep_igemm_tiles(c, plan, st, NR_CONV_IGEMM_TILE_6X16);
}
/* sp__avx2: igemm__avx2's copy and packing with the 16-channel tile. */
static nr_status prep_sp2(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  p.extra = NR_CONV_IGEMM_TILE_SP16;
  memcpy(st->params, &p, sizeof p);
  st->scratch = nr_conv_igemm_scratch(&p);
  return nr_conv_pack_igemm(c, plan, st);
}

/* sp: input channels per pass, the most whose weights (kc x taps x 32 floats) stay
 * within 192 KiB of L2 next to the pass's inputs, cut into equal passes. */
static uint16_t sp_kc(const conv_p *p) {
  int64_t max = (192 << 10) / ((int64_t)p->kh * p->kw * NR_CONV_SP_MR * 4);
  max = max < 8 ? 8 : max;
  int64_t passes = (p->c + max - 1) / max, kc = (p->c + passes - 1) / passes;
  return (uint16_t)(kc > 65535 ? 65535 : kc);
}

static nr_status prep_sp(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  p.gemm.kc = sp_kc(&p);
  memcpy(st->params, &p, sizeof p);
  st->scratch = nr_conv_sp_scratch(&p, scratch_threads(st));
  return nr_conv_pack_sp(c, plan, st);
}

/* ---- pw: register tile and K block -------------------------------------------------- */

static const char *const pw_tile_names[NR_CONV_PW_TILES] = {"12x32", "8x48", "6x64",
                                                             "oc48x7"};

/* Cycles per channel of an mr x nv tile on a core with two FMA and two load ports
 * and a 4-cycle FMA latency: the larger of FMA issue, loads (nv vectors + mr
 * broadcasts) and one FMA latency per accumulator chain. Twice the cycles, integer. */
static int64_t pw_step_cost(int mr, int nv) {
  int64_t fma = (int64_t)mr * nv, ld = mr + nv, lat = 8;
  return fma > ld ? (fma > lat ? fma : lat) : (ld > lat ? ld : lat);
}

/* Padded M (whole panels) times the columns' tiles, the last one narrower. */
static int64_t pw_cost(const conv_p *p, uint32_t tile) {
  int mr = nr_conv_pw_mr(tile), nv = nr_conv_pw_nv(tile);
  int64_t nvec = ((int64_t)p->oh * p->ow + 15) / 16, full = nvec / nv;
  int rest = (int)(nvec - full * nv);
  int64_t per = full * pw_step_cost(mr, nv) + (rest ? pw_step_cost(mr, rest) : 0);
  return (p->m + mr - 1) / mr * per;
}

/* oc48x7 (output channels as vectors) by default on planes of at most 64 pixels that
 * are not whole vectors, at stride 1 with C >= 1024: resnet50's layer4 conv1s
 * (2048->512 at 7x7). nr_conv_bench, oc48x7 / pw_cost's 12x32: 0.84-0.91x time warm,
 * 0.93-0.98x with --cold-weights at 2048->512 and 512->2048; in resnet50 0.89x (1
 * thread) and 0.85x (2) on the 2048->512 steps, but 1.03-1.06x on the 512->2048 +
 * residual ones, which keep 12x32. mobilenet_v2's 7x7 (C 160, 320), the 14->7
 * downsample and 13x13 / 14x14 planes were mixed or slower (0.9-1.6x), 28x28 and up
 * 1.3-3x. */
static bool pw_oc_auto(const conv_p *p) {
  int64_t np = (int64_t)p->oh * p->ow;
  return np > 1 && np <= 64 && np % 16 && p->c >= 1024 && !nr_conv_pw_strided(p);
}

/* The cheapest tile by pw_cost (the first on a tie), or oc48x7 where pw_oc_auto says. */
static uint32_t pw_tile_auto(const conv_p *p) {
  uint32_t best = 0;
  if (pw_oc_auto(p))
    return NR_CONV_PW_TILE_OC48X7;
  for (uint32_t t = 1; t < NR_CONV_PW_TILE_OC48X7; t++)
    if (pw_cost(p, t) < pw_cost(p, best))
      best = t;
  return best;
}
/* conv.pw_tile, or the cheapest. */
static uint32_t pw_tile(const nr_tactic_ctx *c, const conv_p *p) {
  const char *v = nr_route_get(c->route, NR_KNOB_CONV_PW_TILE, c->node);
  for (uint32_t t = 0; v && t < NR_CONV_PW_TILES; t++)
    if (!strcmp(v, pw_tile_names[t]))
      return t;
  return pw_tile_auto(p);
}

/* Most B rows (ld floats apart, nv*16 floats each) that share an L1 set, over the
 * first kc rows of a 48 KiB 12-way L1 (64 sets of 64-byte lines). */
static int pw_set_load(int64_t ld, int nv, int64_t kc) {
  int sets[64] = {0}, most = 0;
  for (int64_t r = 0; r < kc; r++) {
    int64_t b0 = r * ld * 4, b1 = b0 + nv * 64 - 1;
    for (int64_t l = b0 / 64; l <= b1 / 64; l++)
      if (++sets[l % 64] > most)
        most = sets[l % 64];
  }
  return most;
}

/* The K block: the largest that keeps one column tile's B rows in half of L1 (32
 * KiB: 256 channels at 32 pixels, 168 at 48, 128 at 64) and at most 8 of an L1
 * set's 12 ways (row pitches near a multiple of 4 KiB alias), cut into equal blocks
 * so no block is a short remainder; conv.pw_kc caps it instead. */
static uint16_t pw_kc_for(const conv_p *p, int knob) {
  if (nr_conv_pw_tile(p->extra) == NR_CONV_PW_TILE_OC48X7) {
    /* oc48x7: one K block, so that a panel's W is one sequential stream; the kernel
     * walks it in pieces of 64 channels that stay in L1 (OC_KB) */
    int64_t max = knob > 0 ? knob : p->c, blocks = (p->c + max - 1) / max;
    return (uint16_t)((p->c + blocks - 1) / blocks);
  }
  int nv = nr_conv_pw_nv(p->extra);
  int64_t max = 32768 / (nv * 64) / 8 * 8;
  int64_t ld = nr_conv_pw_copies(p) ? nr_conv_pw_ldx(p) : (int64_t)p->oh * p->ow;
  if (knob > 0)
    max = knob;
  else
    while (max > 16 && pw_set_load(ld, nv, max) > 8)
      max -= 8;
  int64_t blocks = (p->c + max - 1) / max;
  int64_t kc = (p->c + blocks - 1) / blocks;
  return (uint16_t)(kc < 1 ? 1 : kc);
}
static uint16_t pw_kc(const nr_tactic_ctx *c, const conv_p *p) {
  return pw_kc_for(p, knob_int(c, NR_KNOB_CONV_PW_KC, 0));
}

/* B rows of whole vectors (NR_CONV_PW_ALIGNED): when the pixels are not a multiple of
 * 16, every row of X starts at another offset in its cache line, so most vector loads
 * span two lines. A copy with rows padded to 16 floats costs one pass over X, which
 * pays where M is large (nr_conv_bench: 0.90-0.94x time at 14x14 and 13x13 with 128 to
 * 1024 output channels, 1.2-1.6x with 16 to 48); a strided copy is made anyway. */
static bool pw_aligned(const conv_p *p) {
  if (nr_conv_pw_tile(p->extra) == NR_CONV_PW_TILE_OC48X7)
    return false; /* it broadcasts X: no vector loads to align */
  return ((int64_t)p->oh * p->ow) % 16 && (nr_conv_pw_strided(p) || p->m >= 128);
}

/* Loop order NR_CONV_PW_PANELS (panels outer) by default for short reductions over
 * many pixels (C <= 64, P >= 196): there the tiles order's stores, a piece of every
 * one of M rows per column tile, are streams the hardware prefetchers cannot follow,
 * while X (C x P) fits L2. nr_conv_bench --cold-weights: 0.50x time at mobilenet_v2's
 * 16->96 112x112, 0.69-0.73x at 24->144 and 64->256 56x56, 0.86-0.88x at 32->192
 * 28x28 and 64->384 14x14, 0.95-1.03x where M <= C; 1.04-1.4x slower at K >= 128 and
 * on 7x7 (and warm, on most shapes). M is left out of the rule on purpose: horizontal
 * fusion changes it after the knob space is built (resnet50's layer1.0 conv1 and
 * downsample run as one 64->320 step), and the knob's values are listed from it. */
static bool pw_panels_auto(const conv_p *p) {
  return p->c <= 64 && (int64_t)p->oh * p->ow >= 196;
}
/* conv.pw_order, or the default above. */
static bool pw_panels(const nr_tactic_ctx *c, const conv_p *p) {
  const char *v = nr_route_get(c->route, NR_KNOB_CONV_PW_ORDER, c->node);
  if (v && !strcmp(v, "panels"))
    return true;
  if (v && !strcmp(v, "tiles"))
    return false;
  return pw_panels_auto(p);
}

static nr_status prep_pw(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  p.extra = pw_tile(c, &p);
  p.extra |= pw_aligned(&p) ? NR_CONV_PW_ALIGNED : 0;
  p.extra |= pw_panels(c, &p) ? NR_CONV_PW_PANELS : 0;
  p.gemm.kc = pw_kc(c, &p);
  memcpy(st->params, &p, sizeof p);
  st->scratch = nr_conv_pw_scratch(&p);
  return nr_conv_pack_pw(c, plan, st);
}

/* pw__avx2's tile: 6x16 or 4x24, the one with less padded work (panels times the
 * row's tiles, each costed as pw_step_cost with 8-pixel vectors: a one-vector tile has
 * too few accumulator chains to hide the FMA latency); 6x16 on a tie. */
static int64_t pw2_cost(const conv_p *p, int mr, int nv) {
  int64_t nvec = ((int64_t)p->oh * p->ow + 7) / 8, full = nvec / nv;
  int rest = (int)(nvec - full * nv);
  int64_t per = full * pw_step_cost(mr, nv) + (rest ? pw_step_cost(mr, rest) : 0);
  return (p->m + mr - 1) / mr * per;
}

/* pw__avx2's K block: the largest whose column tile of B (kc x nv*8 floats) fills at
 * most half a 32 KiB L1 (256 channels at 16 pixels, 168 at 24), cut into equal blocks. */
static uint16_t pw2_kc(const conv_p *p) {
  int64_t max = 16384 / (nr_conv_pw_nv(p->extra) * 32) / 8 * 8;
  int64_t blocks = (p->c + max - 1) / max, kc = (p->c + blocks - 1) / blocks;
  return (uint16_t)(kc < 1 ? 1 : kc);
}

static nr_status prep_pw2(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  nr_status s = store(c, st, &p);
  if (s)
    return s;
  p.extra = pw2_cost(&p, 4, 3) < pw2_cost(&p, 6, 2) ? NR_CONV_PW2_TILE_4X24
                                                   : NR_CONV_PW2_TILE_6X16;
  p.extra |= pw_panels_auto(&p) ? NR_CONV_PW_PANELS : 0;
  p.gemm.kc = pw2_kc(&p);
  memcpy(st->params, &p, sizeof p);
  st->scratch = nr_conv_pw_scratch(&p);
  return nr_conv_pack_pw(c, plan, st);
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
#define A512 NR_ISA_AVX512
/* One kernel, two ops: Conv (ai.onnx) and FusedConv (nnroute), same id. */
#define CONV(id, src, algo, lay, isa, prio, sup, prep, run)                            \
  {id, "", "Conv", src, algo, lay, isa, prio, sup, prep, run},                        \
      {id, NR_DOMAIN, "FusedConv", src, algo, lay, isa, prio, sup, prep, run},

#define ONEDNN_ROW                                                                     \
  CONV("onednn_conv", "onednn", "onednn", P, 0, 30, sup_onednn, prep_onednn,           \
       nr_conv_onednn_run)

const nr_tactic nr_tactics_conv[] = {
    /* id                             source     algo   layout isa prio */
    CONV("nr_f32_conv_pw__avx512", "nnroute", "pointwise", P, A512, 105, sup_pw, prep_pw,
         nr_conv_pw__avx512_run)
    /* below the AVX-512 pw, above the GEMM 1x1: docs/performance-notes.md (AVX2) */
    CONV("nr_f32_conv_pw__avx2", "nnroute", "pointwise", P, AVX, 104, sup_pw2, prep_pw2,
         nr_conv_pw__avx2_run)
    CONV("nr_f32_conv_1x1", "nnroute", "gemm1x1", P, 0, 100, sup_1x1, prep_im2col,
         nr_conv_1x1_run)
    CONV("nr_f32_conv_dw__avx512", "nnroute", "depthwise", P, A512, 95, sup_dw512,
         prep_dw, nr_conv_dw__avx512_run)
    CONV("nr_f32_conv_dw__avx2", "nnroute", "depthwise", P, AVX, 90, sup_dw, prep_dw,
         nr_conv_dw__avx2_run)
    CONV("nr_f32_conv_dw", "nnroute", "depthwise", P, 0, 80, sup_dw, prep_dw,
         nr_conv_dw_run)
    CONV("nr_f32_conv_dw_nchw8c__avx2", "nnroute", "depthwise", B8, AVX, 85, sup_dw8,
         prep_dw8, nr_conv_dw_nchw8c__avx2_run)
    CONV("nr_f32_conv_dw_nchw8c", "nnroute", "depthwise", B8, 0, 70, sup_dw8, prep_dw8,
         nr_conv_dw_nchw8c_run)
    CONV("nr_f32_conv_smallc__avx2", "nnroute", "direct", P, AVX, 60, sup_smallc,
         prep_smallc, nr_conv_smallc__avx2_run)
    CONV("nr_f32_conv_igemm__avx512", "nnroute", "igemm", P, A512, 62, sup_igemm,
         prep_igemm, nr_conv_igemm__avx512_run)
    CONV("nr_f32_conv_sp__avx512", "nnroute", "smallplane", P, A512, 64, sup_sp, prep_sp,
         nr_conv_sp__avx512_run)
    /* below the AVX-512 igemm, above im2col: see docs/performance-notes.md (AVX2) */
    CONV("nr_f32_conv_igemm__avx2", "nnroute", "igemm", P, AVX, 61, sup_igemm2,
         prep_igemm2, nr_conv_igemm__avx2_run)
    CONV("nr_f32_conv_sp__avx2", "nnroute", "smallplane", P, AVX, 63, sup_sp2, prep_sp2,
         nr_conv_igemm__avx2_run)
    CONV("nr_f32_conv_winograd_f23", "nnroute", "winograd23", P, 0, 42, sup_wino,
         prep_wino23, nr_conv_winograd_run)
    CONV("nr_f32_conv_winograd_f43", "nnroute", "winograd43", P, 0, 45, sup_wino,
         prep_wino43, nr_conv_winograd_run)
    /* below im2col: conv.winograd_from (auto by default) or conv.algo=winograd43 */
    CONV("nr_f32_conv_winograd_f43__avx512", "nnroute", "winograd43", P, A512, 47,
         sup_wino512, prep_wino43_512, nr_conv_winograd_f43__avx512_run)
    CONV("nr_f32_conv_im2col", "nnroute", "im2col", P, 0, 50, sup_im2col, prep_im2col,
         nr_conv_im2col_run)
    CONV("nr_f32_conv_nhwc_1x1", "nnroute", "gemm1x1", H, 0, 45, sup_nhwc_1x1, prep_nhwc,
         nr_conv_nhwc_run)
    CONV("nr_f32_conv_nhwc_im2col", "nnroute", "im2col", H, 0, 40, sup_nhwc_im2col, prep_nhwc,
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
  if (!nr_conv_is_node(n) || n->n_inputs < 2 || n->inputs[0] < 0)
    return false;
  const nr_value *x = &g->tensors[n->inputs[0]].value;
  return x->dtype == NR_DTYPE_FLOAT && (x->rank == 3 || x->rank == 4) &&
         !nr_horizontal_absorbs(g, n);
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

bool nr_conv_parse_graph(const nr_graph *g, const nr_node *n, conv_p *p) {
  fake_plan f;
  fake_build(g, n, &f);
  nr_tactic_ctx c = {&f.plan, n, &f.step, NULL, NULL};
  return nr_conv_parse(&c, p);
}

/* Bit 0 (auto) always; bit i when a tactic that value i allows supports n here. */
static uint64_t conv_valid(const nr_graph *g, const nr_node *n, nr_knob_id knob) {
  fake_plan f;
  fake_build(g, n, &f);
  nr_tactic_ctx c = {&f.plan, n, &f.step, NULL, NULL};
  uint64_t bits = 1;
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++) {
    if ((t->isa & ~nr_cpu_isa()) || strcmp(t->op_type, n->op_type) || !t->supports(&c))
      continue;
    bits |= nr_knob_allowing(nr_knob_def_of(knob), t);
  }
  return bits;
}
static const nr_tactic *default_tactic(const nr_graph *g, const nr_node *n, conv_p *p);

/* Restricting to the default tactic's own algorithm or layout keeps the default
 * tactic the best candidate, so that value builds what "auto" builds: drop it. */
static uint64_t without_default(const nr_graph *g, const nr_node *n, nr_knob_id knob,
                                uint64_t bits) {
  conv_p p;
  const nr_tactic *t = default_tactic(g, n, &p);
  return t ? bits & ~nr_knob_allowing(nr_knob_def_of(knob), t) : bits;
}

static uint64_t algo_valid(const nr_graph *g, const nr_node *n) {
  return without_default(g, n, NR_KNOB_CONV_ALGO, conv_valid(g, n, NR_KNOB_CONV_ALGO));
}
static uint64_t layout_valid(const nr_graph *g, const nr_node *n) {
  return without_default(g, n, NR_KNOB_CONV_LAYOUT, conv_valid(g, n, NR_KNOB_CONV_LAYOUT));
}

/* ---- knobs on the GEMM the default tactic runs -------------------------------------- */

/* The tactic the heuristic picks for n on the default route (select.c: the highest
 * priority among those that support it); NULL when none does. *p is its record. */
static const nr_tactic *default_tactic(const nr_graph *g, const nr_node *n, conv_p *p) {
  fake_plan f;
  fake_build(g, n, &f);
  nr_tactic_ctx c = {&f.plan, n, &f.step, NULL, NULL};
  const nr_tactic *best = NULL;
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!(t->isa & ~nr_cpu_isa()) && !strcmp(t->op_type, n->op_type) && t->supports(&c) &&
        (!best || t->priority > best->priority))
      best = t;
  if (best && !nr_conv_parse_plain(&c, p))
    best = NULL;
  return best;
}

nr_layout nr_conv_default_layout(const nr_graph *g, const nr_node *n) {
  conv_p p;
  const nr_tactic *t = conv_applies(g, n) ? default_tactic(g, n, &p) : NULL;
  return t ? t->layout : NR_LAYOUT_PLAIN;
}

/* The default tactic's product when it is GEMM-based (the blocking knobs only act
 * there; a depthwise or direct node does not list them). */
static bool default_gemm(const nr_graph *g, const nr_node *n, conv_p *p, gemm_dims *d,
                         nr_gemm_cfg *cfg) {
  if (!conv_applies(g, n))
    return false;
  const nr_tactic *t = default_tactic(g, n, p);
  if (!t || !is_gemm_algo(t))
    return false;
  *d = gemm_shape(t, p);
  *cfg = nr_gemm_default_cfg(d->m, d->n, d->k);
  return true;
}

static bool gemm_applies(const nr_graph *g, const nr_node *n) {
  conv_p p;
  gemm_dims d;
  nr_gemm_cfg cfg;
  return default_gemm(g, n, &p, &d, &cfg);
}

/* A blocking value acts as min(v rounded down to the tile, extent rounded up to it);
 * only values whose effective block differs from the default's are choices. */
static int64_t eff_block(int64_t v, int64_t extent, int tile) {
  int64_t b = v < tile ? tile : v / tile * tile, e = (extent + tile - 1) / tile * tile;
  return b < e ? b : e;
}
static uint64_t blocking_bits(const int *vals, int nvals, int64_t dflt, int64_t extent,
                              int tile) {
  uint64_t bits = 1;
  for (int i = 0; i < nvals; i++)
    if (eff_block(vals[i], extent, tile) != eff_block(dflt, extent, tile))
      bits |= 1ull << (1 + i);
  return bits;
}

static const int kc_vals[] = {128, 256, 384, 512}, mc_vals[] = {48, 72, 96, 144},
                 nc_vals[] = {512, 1024, 2048, 4096};

#define BLOCKING_VALID(name, vals, field, ext, tile)                                   \
  static uint64_t name(const nr_graph *g, const nr_node *n) {                          \
    conv_p p;                                                                          \
    gemm_dims d;                                                                       \
    nr_gemm_cfg cfg;                                                                   \
    if (!default_gemm(g, n, &p, &d, &cfg))                                             \
      return 1;                                                                        \
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(cfg.ukernel);                       \
    (void)u;                                                                           \
    return blocking_bits(vals, 4, cfg.field, d.ext, tile);                             \
  }
BLOCKING_VALID(kc_valid, kc_vals, kc, k, 1)
BLOCKING_VALID(mc_valid, mc_vals, mc, m, u->mr)
BLOCKING_VALID(nc_valid, nc_vals, nc, n, u->nr)

#define NR_GEMM_UKERNEL(name, mr, nr, isa) "|" #name
static const char ukernel_values[] = "auto"
#include "kernels/cpu/gemm/gemm_ukernels.inc"
    ;
#undef NR_GEMM_UKERNEL

/* Micro-kernels this machine runs, other than the default one; the 1-row kernels
 * only for products of at most 4 rows (as gemm.tactic). */
static uint64_t ukernel_valid(const nr_graph *g, const nr_node *n) {
  conv_p p;
  gemm_dims d;
  nr_gemm_cfg cfg;
  uint64_t bits = 1;
  if (!default_gemm(g, n, &p, &d, &cfg))
    return bits;
  for (int i = 0; i < nr_gemm_ukernel_count(); i++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(i);
    if (!(u->isa & ~nr_cpu_isa()) && i != cfg.ukernel && (u->mr > 1 || d.m <= 4))
      bits |= 1ull << (1 + i);
  }
  return bits;
}

/* Something for the epilogue to apply: a bias, FusedConv's activation or residual, or
 * a reader the default fusion passes fold into the conv (BatchNormalization becomes a
 * bias; Add and activations join FusedConv). */
static bool has_epilogue(const nr_graph *g, const nr_node *n, const conv_p *p) {
  static const char *const fold[] = {"BatchNormalization", "Add", "Relu", "Clip",
                                     "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish",
                                     "Tanh", NULL};
  if (p->has_bias || p->has_res || p->act != NR_ACT_NONE)
    return true;
  int y = n->n_outputs > 0 ? n->outputs[0] : -1;
  for (int k = 0; y >= 0 && k < g->n_nodes; k++)
    for (int i = 0; i < g->nodes[k].n_inputs; i++)
      for (int f = 0; fold[f] && g->nodes[k].inputs[i] == y; f++)
        if (!strcmp(g->nodes[k].op_type, fold[f]) && !g->nodes[k].domain[0])
          return true;
  return false;
}

static bool pw_default(const nr_graph *g, const nr_node *n, conv_p *p);
/* The default tactic is nr_f32_conv_pw__avx2 (which takes conv.epilogue, not the
 * AVX-512 pw's tile, K block and order knobs). */
static bool pw2_default(const nr_graph *g, const nr_node *n, conv_p *p) {
  const nr_tactic *t = conv_applies(g, n) ? default_tactic(g, n, p) : NULL;
  return t && !strcmp(t->id, "nr_f32_conv_pw__avx2");
}
/* The GEMM-based tactics and both pw take conv.epilogue=separate. */
static bool epilogue_applies(const nr_graph *g, const nr_node *n) {
  conv_p p;
  gemm_dims d;
  nr_gemm_cfg cfg;
  return (default_gemm(g, n, &p, &d, &cfg) || pw_default(g, n, &p) ||
          pw2_default(g, n, &p)) &&
         has_epilogue(g, n, &p);
}

/* conv.winograd_from (values auto, never, 32, 64, 128): on a Winograd-able node whose
 * default is PLAIN im2col, igemm or sp, or the AVX-512 Winograd that auto chose. Where
 * auto chose it, never is the one other choice (a threshold the node passes builds the
 * same); elsewhere never builds what auto builds, and the thresholds it passes are
 * the choices. */
static const int wino_from_vals[] = {32, 64, 128};
static uint64_t wino_from_valid(const nr_graph *g, const nr_node *n) {
  conv_p p;
  uint64_t bits = 1;
  const nr_tactic *t = conv_applies(g, n) ? default_tactic(g, n, &p) : NULL;
  bool from = t && (!strcmp(t->id, "nr_f32_conv_im2col") ||
                    !strcmp(t->id, "nr_f32_conv_igemm__avx512") ||
                    !strcmp(t->id, "nr_f32_conv_igemm__avx2") ||
                    !strcmp(t->id, "nr_f32_conv_sp__avx2") ||
                    !strcmp(t->id, "nr_f32_conv_sp__avx512") ||
                    !strcmp(t->id, "nr_f32_conv_winograd_f43__avx512"));
  if (!from || !has_gemm() || !is_wino(&p))
    return bits;
  if (wino_auto(&p))
    return bits | 1ull << 1;
  for (int i = 0; i < 3; i++)
    if (p.c >= wino_from_vals[i])
      bits |= 1ull << (2 + i);
  return bits;
}
static bool wino_from_applies(const nr_graph *g, const nr_node *n) {
  return wino_from_valid(g, n) > 1;
}

/* conv.pw_tile / conv.pw_kc: where the default tactic is pw; the values whose tile or
 * K block differs from the default's. */
static bool pw_default(const nr_graph *g, const nr_node *n, conv_p *p) {
  const nr_tactic *t = conv_applies(g, n) ? default_tactic(g, n, p) : NULL;
  return t && !strcmp(t->id, "nr_f32_conv_pw__avx512");
}
static bool pw_applies(const nr_graph *g, const nr_node *n) {
  conv_p p;
  return pw_default(g, n, &p);
}
static uint64_t pw_tile_valid(const nr_graph *g, const nr_node *n) {
  conv_p p;
  uint64_t bits = 1;
  if (!pw_default(g, n, &p))
    return bits;
  int64_t np = (int64_t)p.oh * p.ow;
  for (uint32_t t = 0; t < NR_CONV_PW_TILES; t++)
    if (t != pw_tile_auto(&p) && (t != NR_CONV_PW_TILE_OC48X7 || (np > 1 && np <= 256)))
      bits |= 1ull << (1 + t); /* oc48x7: 1.3-3x slower from 28x28 up, not listed */
  return bits;
}
/* conv.pw_order: the order the default does not take. */
static uint64_t pw_order_valid(const nr_graph *g, const nr_node *n) {
  conv_p p;
  if (!pw_default(g, n, &p))
    return 1;
  return 1 | (pw_panels_auto(&p) ? 1ull << 1 : 1ull << 2);
}
static const int pw_kc_vals[] = {32, 64, 128, 256};
static uint64_t pw_kc_valid(const nr_graph *g, const nr_node *n) {
  conv_p p;
  uint64_t bits = 1;
  if (!pw_default(g, n, &p))
    return bits;
  p.extra = pw_tile_auto(&p);
  p.extra |= pw_aligned(&p) ? NR_CONV_PW_ALIGNED : 0;
  for (int i = 0; i < 4; i++)
    if (pw_kc_for(&p, pw_kc_vals[i]) != pw_kc_for(&p, 0))
      bits |= 1ull << (1 + i);
  return bits;
}

/* conv.dw_kernel: where the default runs nr_f32_conv_dw__avx512. */
static bool dw_kernel_applies(const nr_graph *g, const nr_node *n) {
  conv_p p;
  const nr_tactic *t = conv_applies(g, n) ? default_tactic(g, n, &p) : NULL;
  return t && !strcmp(t->id, "nr_f32_conv_dw__avx512");
}

const nr_knob_def nr_knobs_conv[] = {
    [NR_KNOB_ROW(NR_KNOB_CONV_ALGO)] =
    {"conv.algo",
     "auto|im2col|gemm1x1|direct|depthwise|winograd23|winograd43|onednn|igemm|pointwise|"
     "smallplane",
     "auto", NR_KNOB_NODE, NR_KNOB_ACCURACY, 1e-4,
     "convolution algorithm (winograd reassociates more: bounded extra error)",
     conv_applies, algo_valid, .restricts = NR_RESTRICTS_ALGO},
    [NR_KNOB_ROW(NR_KNOB_CONV_LAYOUT)] =
    {"conv.layout", "auto|plain|nhwc|nchw8c", "auto", NR_KNOB_NODE, NR_KNOB_LAYOUT, 0.0,
     "activation layout the convolution runs in (the layout pass inserts reorders)",
     conv_applies, layout_valid, .restricts = NR_RESTRICTS_LAYOUT},
    [NR_KNOB_ROW(NR_KNOB_CONV_GEMM_KC)] =
    {"conv.gemm_kc", "auto|128|256|384|512", "auto", NR_KNOB_NODE, 0, 0.0,
     "K blocking of the conv's GEMM (im2col, 1x1, NHWC, Winograd products)",
     gemm_applies, kc_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_GEMM_MC)] =
    {"conv.gemm_mc", "auto|48|72|96|144", "auto", NR_KNOB_NODE, 0, 0.0,
     "M blocking (rounded down to the micro-tile) of the conv's GEMM", gemm_applies,
     mc_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_GEMM_NC)] =
    {"conv.gemm_nc", "auto|512|1024|2048|4096", "auto", NR_KNOB_NODE, 0, 0.0,
     "N blocking (rounded down to the micro-tile) of the conv's GEMM", gemm_applies,
     nc_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_UKERNEL)] =
    {"conv.ukernel", ukernel_values, "auto", NR_KNOB_NODE, 0, 0.0,
     "GEMM micro-kernel of the conv's GEMM (weights are packed for it)", gemm_applies,
     ukernel_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_PREPACK)] =
    {"conv.prepack", "on|off", "on", NR_KNOB_NODE, 0, 0.0,
     "pack the conv's GEMM weights into the engine (off: raw weights, packed per run)",
     gemm_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_CONV_EPILOGUE)] =
    {"conv.epilogue", "fused|separate", "fused", NR_KNOB_NODE, 0, 0.0,
     "bias/residual/activation inside the GEMM (or pointwise) epilogue, or in a second "
     "pass over Y",
     epilogue_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_CONV_WINOGRAD_FROM)] =
    {"conv.winograd_from", "auto|never|32|64|128", "auto", NR_KNOB_NODE,
     NR_KNOB_ACCURACY | NR_KNOB_APPROX_DEFAULT, 1e-4,
     "3x3 stride-1 convs that use Winograd F(4,3): auto = the AVX-512 kernel where it is "
     "faster (outputs of 20x20 and up, 16+ input channels), never, or those with at least "
     "this many input channels",
     wino_from_applies, wino_from_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_PW_TILE)] =
    {"conv.pw_tile", "auto|12x32|8x48|6x64|oc48x7", "auto", NR_KNOB_NODE, 0, 0.0,
     "register tile of the AVX-512 pointwise conv: output channels x pixels", pw_applies,
     pw_tile_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_PW_KC)] =
    {"conv.pw_kc", "auto|32|64|128|256", "auto", NR_KNOB_NODE, 0, 0.0,
     "K block (input channels per pass over Y) of the AVX-512 pointwise conv",
     pw_applies, pw_kc_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_PW_ORDER)] =
    {"conv.pw_order", "auto|tiles|panels", "auto", NR_KNOB_NODE, 0, 0.0,
     "loop order of the AVX-512 pointwise conv: column tiles outer (W panels reuse an "
     "X tile from L1) or W panels outer (Y written as sequential streams)",
     pw_applies, pw_order_valid},
    [NR_KNOB_ROW(NR_KNOB_CONV_THREADS)] =
    {"conv.threads", "auto|1", "auto", NR_KNOB_NODE, NR_KNOB_THREADS, 0.0,
     "threads of the conv step: the whole pool, or the calling thread only",
     conv_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_CONV_DW_KERNEL)] =
    {"conv.dw_kernel", "auto|avx2", "auto", NR_KNOB_NODE, 0, 0.0,
     "depthwise kernel: auto (AVX-512 where the CPU has it) or the AVX2 one",
     dw_kernel_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_CONV_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_conv, NR_KNOB_CONV_END);
