/* conv_internal.h - what the convolution tactics share (private to src/kernels/cpu/conv
 * and src/compiler/layout.c): the params record every conv tactic stores in its step,
 * the node parser that fills it, the epilogue helpers and the kernel entry points.
 *
 * Key decision: one record (conv_p, within NR_TACTIC_PARAMS bytes) describes every
 * 2-D float convolution, whatever the algorithm; each tactic only adds its own few
 * fields (GEMM cfg, tile counts) in the tail. prepare() fills it once from the node
 * and the slots, run() never looks at attributes again. Conv and nnroute.FusedConv
 * parse the same way; plain Conv simply has no residual and activation "none". */
#ifndef NR_KERNELS_CPU_CONV_INTERNAL_H
#define NR_KERNELS_CPU_CONV_INTERNAL_H

#include "kernels/act.h"
#include "kernels/cpu/conv/conv_layout.h"
#include "kernels/cpu/gemm/gemm.h"
#include "plan/tactic.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct conv_p {
  int32_t n, c, h, w;        /* input X (logical NCHW) */
  int32_t m, oh, ow, group;  /* output Y channels and size; groups */
  /* kernel, stride, dilation, top/left pad: 16 bits, as a 1-D front end's window (a
   * 256- or 400-tap STFT conv with stride 128 or 160) passes 255 */
  uint16_t kh, kw, sh, sw, dh, dw, pt, pl;
  uint8_t act, res_layout;   /* res_layout: layout R arrives in */
  uint8_t has_bias : 1, has_res : 1;
  uint8_t opts;              /* CONV_OPT_*: the per-node knobs' choices */
  float act_a, act_b;
  nr_gemm_cfg gemm;          /* GEMM-based tactics */
  uint32_t extra;            /* tactic specific (winograd: output tile 2|4; NCHW8C and
                                dw NCHW8C: float offset of the packed bias; PLAIN
                                im2col: output rows per band) */
} conv_p;

_Static_assert(sizeof(conv_p) <= NR_TACTIC_PARAMS, "conv_p must fit nr_step.params");

/* conv_p.opts bits, set by prepare() from the node's knobs (tactics_conv.c). */
enum {
  CONV_OPT_RAW_W = 1u << 0,     /* conv.prepack=off: pack W into scratch on every run */
  CONV_OPT_SPLIT_EPI = 1u << 1, /* conv.epilogue=separate: a second pass applies it */
  CONV_OPT_SERIAL = 1u << 2,    /* conv.threads=1 (step->threads is 1 too) */
  CONV_OPT_ROW = 1u << 3,       /* PLAIN 1x1 over a 1x1 plane: run as NHWC (see
                                   conv_im2col.c), W packed as CONV_PACK_NHWC_B */
};

/* What a GEMM-based tactic packs W into (conv_pack.c). */
typedef enum conv_pack_kind {
  CONV_PACK_GEMM_A,   /* im2col, 1x1 (PLAIN): W_g as the GEMM's A, per group */
  CONV_PACK_NHWC_B,   /* NHWC: W_g^T with rows (kh, kw, c) as the GEMM's B, per group */
  CONV_PACK_WINOGRAD, /* U[xi] = G g G^T per tile position, each as a GEMM A */
} conv_pack_kind;

/* Fills p from a Conv / FusedConv step. False when the step is not a 2-D float32
 * conv with constant weights (and constant bias) whose numbers fit the record. */
bool nr_conv_parse(const nr_tactic_ctx *c, conv_p *p);
/* nr_conv_parse that also takes a 1-D conv (X [N, C, L], W [M, C/group, K]) as the
 * 2-D one of [N, C, 1, L] (h = oh = kh = sh = dh = 1, pt = 0): for tactics working in
 * PLAIN layout, where both are the same bytes. The layouts with reorders (NHWC,
 * NCHW8C) and the other families keep nr_conv_parse, rank 4 only. */
bool nr_conv_parse_plain(const nr_tactic_ctx *c, conv_p *p);
/* A Conv or nnroute.FusedConv node (conv_parse.c). */
bool nr_conv_is_node(const nr_node *n);
static inline const conv_p *conv_params(const nr_step *s) {
  return (const conv_p *)(const void *)s->params;
}

/* Epilogue on n contiguous outputs of one channel: y = act(y + bias + r) (r may be
 * NULL). Vectorizable for the common activations. */
void nr_conv_epilogue(float *y, const float *r, int64_t n, float bias, const conv_p *p);
/* y = act(y + r) where y (layout ly) and r (layout lr) may differ; used when the
 * residual arrives in another layout than the tactic's (profiling, hand-built
 * plans). Shape of Y: p->n, p->m, p->oh, p->ow. */
void nr_conv_residual_post(float *y, nr_layout ly, const float *r, nr_layout lr,
                           const conv_p *p, bool apply_bias, const float *bias);

/* conv.epilogue=separate: bias (when apply_bias), residual r (same layout l as y, or
 * NULL) and p's activation over the whole output y, in parallel on `threads`. */
void nr_conv_epilogue_pass(const nr_exec_args *a, nr_layout l, const conv_p *p,
                           const float *bias, const float *r, int threads);

/* The zero-padded, stride-phase-split plane the PLAIN AVX2 kernels read
 * (conv_pad_avx2.h fills it): rows (oh-1)*S + K from input row -pt (zero rows outside
 * the input); each row holds its padded columns c (input column c - pl, zero outside)
 * split into S phases (c at phase c % S, index c / S), lp floats apart. */
typedef struct conv_pad {
  int64_t rows, lp, rs; /* rows, floats per phase, floats per row (S * lp) */
} conv_pad;

/* Geometry for output columns read in vectors up to a multiple of `tile`; false when a
 * row would need more than 2048 floats. */
static inline bool conv_pad_dims(const conv_p *p, int S, int K, int tile, conv_pad *d) {
  int64_t owt = (p->ow + tile - 1) / tile * tile, need = owt + (K - 1) / S + 1;
  int64_t cols = ((int64_t)p->pl + p->w + S - 1) / S;
  /* conv_pad_row writes whole vectors: up to pl + ceil8(w) (S 1), or 8 floats of each
   * phase per 16 input columns from index (pl + 1) / 2 (S 2). */
  int64_t fill = S == 1 ? p->pl + (p->w + 7) / 8 * 8 : (p->pl + 1) / 2 + (p->w + 15) / 16 * 8;
  d->lp = (need > cols ? need : cols) + 1;
  if (d->lp < fill)
    d->lp = fill;
  d->rs = S * d->lp;
  d->rows = (int64_t)(p->oh - 1) * S + K;
  return d->rs <= 2048;
}

/* nr_f32_conv_smallc__avx2 (conv_smallc__avx2.c): its tile of output columns, and the
 * bytes of scratch its padded planes and its packed W need (0: geometry unsupported). */
#define NR_CONV_SMALLC_COLS 24
static inline uint64_t nr_conv_smallc_scratch(const conv_p *p) {
  conv_pad d;
  if (!conv_pad_dims(p, p->sh, p->kh, NR_CONV_SMALLC_COLS, &d))
    return 0;
  uint64_t w = (uint64_t)(p->m + 3) / 4 * 4 * p->c * p->kh * p->kw; /* packed W */
  return ((uint64_t)p->n * p->c * (uint64_t)(d.rows * d.rs) + w) * sizeof(float);
}

/* nr_f32_conv_igemm__avx512 (conv_igemm__avx512.c): implicit GEMM on a padded,
 * stride-phase-split copy of each input channel. Per channel, sh * sw phase planes of
 * rq rows x lp columns (phase (a, b), row r, column c holds input row r*sh + a - pt,
 * column c*sw + b - pl, zero outside), pp floats apart (slack after the rows, zero,
 * so a tile may read past the last row); cs floats per channel. Output pixel (oh, ow)
 * is "padded pixel" oh * lp + ow: a tap's inputs for consecutive padded pixels are
 * consecutive floats of one phase plane, so a register tile of np padded pixels
 * (columns ow >= OW are computed and dropped) loads them as plain vectors. A tap
 * that reads past the end of a row lands in the next row's leading zero columns (its
 * left padding), so lp only needs OW + (kw-1)*dw/sw minus those: a 3x3 pad-1 conv has
 * lp = OW + 1, not OW + 2 (7x7 outputs: 1 dropped column in 8 instead of 2 in 9).
 * p->extra picks the register tile: 0 = 12 output channels x 32 pixels, 1 = 8 x 48
 * (AVX-512), 2 = 6 x 16, 3 = 4 x 24 (nr_f32_conv_igemm__avx2, 16 ymm registers), 4 =
 * 16 output channels x 6 real pixels broadcast from the copy (nr_f32_conv_sp__avx2, for
 * small planes: no padded pixels computed; np is then only the copy's slack). */
typedef struct conv_igemm_geo {
  int64_t lp, rq, pp, cs, q; /* q: padded pixels, oh * lp */
  int mr, np;
} conv_igemm_geo;
#define NR_CONV_IGEMM_MAX_TAPS 81 /* 9x9: fast-neural-style's first and last convs */
enum {
  NR_CONV_IGEMM_TILE_12X32,
  NR_CONV_IGEMM_TILE_8X48,
  NR_CONV_IGEMM_TILE_6X16, /* AVX2 */
  NR_CONV_IGEMM_TILE_4X24, /* AVX2 */
  NR_CONV_IGEMM_TILE_SP16, /* AVX2, small planes */
  NR_CONV_IGEMM_TILES
};
static inline void nr_conv_igemm_geo(const conv_p *p, conv_igemm_geo *g) {
  static const int mrs[NR_CONV_IGEMM_TILES] = {12, 8, 6, 4, 16}, nps[] = {32, 48, 16, 24, 8};
  uint32_t t = p->extra < NR_CONV_IGEMM_TILES ? p->extra : 0;
  g->mr = mrs[t];
  g->np = nps[t];
  /* per column phase b: zero columns [0, c0) before the input's [c0, c1) */
  int64_t z = INT64_MAX, c1 = 0;
  for (int b = 0; b < p->sw; b++) {
    int64_t lo = p->pl - b, hi = p->w - 1 + p->pl - b;
    int64_t c0b = lo <= 0 ? 0 : (lo + p->sw - 1) / p->sw, c1b = hi < 0 ? 0 : hi / p->sw + 1;
    z = c0b < z ? c0b : z;
    c1 = c1b > c1 ? c1b : c1;
  }
  g->lp = p->ow + (int64_t)(p->kw - 1) * p->dw / p->sw - z;
  if (g->lp < c1)
    g->lp = c1;
  if (g->lp < p->ow)
    g->lp = p->ow;
  g->rq = p->oh + (int64_t)(p->kh - 1) * p->dh / p->sh;
  g->pp = (g->rq * g->lp + g->lp + g->np + 15) / 16 * 16;
  g->cs = g->pp * p->sh * p->sw;
  g->q = (int64_t)p->oh * g->lp;
}
/* Scratch bytes: one image's padded channels. */
static inline uint64_t nr_conv_igemm_scratch(const conv_p *p) {
  conv_igemm_geo g;
  nr_conv_igemm_geo(p, &g);
  return (uint64_t)p->c * (uint64_t)g.cs * sizeof(float) + 64;
}

/* nr_f32_conv_sp__avx512 (conv_sp__avx512.c): igemm's windows on small output planes,
 * vectorised over output channels. It reads igemm's padded copy (nr_conv_igemm_geo with
 * extra 0, which sp does not use) by broadcasting pixels; a register tile is
 * NR_CONV_SP_MR output channels x one row chunk of at most NR_CONV_SP_MAXPIX pixels
 * (rows split into ceil(OW / 14) near-equal chunks), or x two whole rows when OW <= 7.
 * W is packed as [ceil(M / 32) panels][C][taps][32] (nr_conv_pack_sp); p->gemm.kc input
 * channels per pass, the tiles' partial sums kept in scratch between passes (one
 * buffer of tpi tiles per thread). A work item is tpi tiles of one panel: a whole
 * panel, or a part of it where there are fewer than 8 panels. */
#define NR_CONV_SP_MR 32
#define NR_CONV_SP_MAXPIX 14
#define NR_CONV_SP_TILE_FLOATS (NR_CONV_SP_MR * NR_CONV_SP_MAXPIX)
typedef struct conv_sp_geo {
  int rows, chunks;  /* output rows per tile (1 or 2), column chunks per row */
  int64_t ntiles;    /* tiles per panel */
  int64_t npan;      /* panels of 32 output channels */
  int64_t ipp, tpi;  /* work items per panel, tiles per item */
} conv_sp_geo;
static inline void nr_conv_sp_geo(const conv_p *p, conv_sp_geo *s, conv_igemm_geo *g) {
  conv_p q = *p;
  q.extra = 0;
  nr_conv_igemm_geo(&q, g);
  s->rows = p->ow <= NR_CONV_SP_MAXPIX / 2 ? 2 : 1;
  s->chunks = s->rows == 2 ? 1 : (p->ow + NR_CONV_SP_MAXPIX - 1) / NR_CONV_SP_MAXPIX;
  s->ntiles = s->rows == 2 ? (p->oh + 1) / 2 : (int64_t)p->oh * s->chunks;
  s->npan = (p->m + NR_CONV_SP_MR - 1) / NR_CONV_SP_MR;
  s->ipp = s->npan >= 8 ? 1 : (8 + s->npan - 1) / s->npan;
  if (s->ipp > s->ntiles)
    s->ipp = s->ntiles;
  s->tpi = (s->ntiles + s->ipp - 1) / s->ipp;
  s->ipp = (s->ntiles + s->tpi - 1) / s->tpi;
}
/* Scratch bytes for `threads` threads: the padded copy, and where C takes more than one
 * pass (p->gemm.kc < C) the partial sums. */
static inline uint64_t nr_conv_sp_scratch(const conv_p *p, int threads) {
  conv_sp_geo s;
  conv_igemm_geo g;
  nr_conv_sp_geo(p, &s, &g);
  uint64_t part = p->gemm.kc < p->c ? (uint64_t)threads * (uint64_t)s.tpi *
                                          NR_CONV_SP_TILE_FLOATS * sizeof(float)
                                    : 0;
  return (uint64_t)p->c * (uint64_t)g.cs * sizeof(float) + 64 + part;
}

/* nr_f32_conv_pw__avx512 (conv_pw__avx512.c): a group-1 unpadded 1x1 convolution of
 * any stride as Y[M x P] = W[M x C] * X[C x P] (P output pixels) with X read in place
 * (stride 1) or from a copy in scratch (strided, or NR_CONV_PW_ALIGNED: rows padded to
 * whole vectors). p->extra's low byte picks the register tile, mr output channels x
 * nv 16-pixel vectors (NR_CONV_PW_TILE_*); p->gemm.kc is
 * the K block (a register tile accumulates kc channels between passes over Y). W is
 * packed at build per K block as [ceil(M/mr) panels][kc][mr] (nr_conv_pack_pw), so
 * the panels one K block's pass reads are one sequential stream. */
/* NR_CONV_PW_TILE_OC48X7 turns the tile around: 48 output channels (three vectors)
 * x 7 pixels broadcast from X, for planes that are not a multiple of 16 (7x7 = 49
 * pixels fill 49 of 64 lanes as pixel vectors); W is packed the same way, mr = 48. */
enum {
  NR_CONV_PW_TILE_12X32,
  NR_CONV_PW_TILE_8X48,
  NR_CONV_PW_TILE_6X64,
  NR_CONV_PW_TILE_OC48X7,
  NR_CONV_PW_TILES
};
/* nr_f32_conv_pw__avx2's tiles (conv_pw__avx2.c): mr output channels x nv 8-pixel
 * vectors; not values of conv.pw_tile, which names the AVX-512 tiles. */
enum { NR_CONV_PW2_TILE_6X16 = 0x10, NR_CONV_PW2_TILE_4X24 = 0x11 };
static inline uint32_t nr_conv_pw_tile(uint32_t extra) { return extra & 0xFFu; }
static inline int nr_conv_pw_mr(uint32_t extra) {
  uint32_t t = nr_conv_pw_tile(extra);
  return t == NR_CONV_PW2_TILE_6X16   ? 6
         : t == NR_CONV_PW2_TILE_4X24 ? 4
         : t == NR_CONV_PW_TILE_8X48  ? 8
         : t == NR_CONV_PW_TILE_6X64  ? 6
         : t == NR_CONV_PW_TILE_OC48X7 ? 48
                                      : 12;
}
static inline int nr_conv_pw_nv(uint32_t extra) {
  uint32_t t = nr_conv_pw_tile(extra);
  return t == NR_CONV_PW_TILE_8X48 || t == NR_CONV_PW2_TILE_4X24 ? 3
         : t == NR_CONV_PW_TILE_6X64                           ? 4
                                                               : 2;
}
#define NR_CONV_PW_ALIGNED 0x100u /* p->extra: copy X to rows of whole vectors */
/* p->extra: panels outer, column tiles inner (conv.pw_order=panels), not the reverse */
#define NR_CONV_PW_PANELS 0x200u
static inline bool nr_conv_pw_strided(const conv_p *p) { return p->sh > 1 || p->sw > 1; }
/* B is a copy in scratch (strided, or stride 1 with NR_CONV_PW_ALIGNED) rather than X. */
static inline bool nr_conv_pw_copies(const conv_p *p) {
  return nr_conv_pw_strided(p) || (p->extra & NR_CONV_PW_ALIGNED);
}
/* Floats between the copy's rows: the output pixels, or if aligned an odd number of
 * 64-byte lines (an even one would leave half of L1's sets unused: 7x7 rows of 64
 * floats put every 16th row in the same set, so 7x7 rows take 80). */
static inline int64_t nr_conv_pw_ldx(const conv_p *p) {
  int64_t np = (int64_t)p->oh * p->ow, lines = (np + 15) / 16;
  if (!(p->extra & NR_CONV_PW_ALIGNED))
    return np;
  return (lines % 2 ? lines : lines + 1) * 16;
}
/* Scratch bytes: the copy of one image's input (none when B is X itself). */
static inline uint64_t nr_conv_pw_scratch(const conv_p *p) {
  if (!nr_conv_pw_copies(p))
    return 0;
  return (uint64_t)p->c * (uint64_t)nr_conv_pw_ldx(p) * sizeof(float) + 64;
}

/* nr_f32_conv_winograd_f43__avx512 (conv_winograd__avx512.c): F(4,3) with 16 channels
 * per vector. Per image: th x tw tiles of 4x4 outputs; the input copy Xb[Cp/16][hp]
 * [wpp][16] (zero-padded rows and columns, wpp a multiple of 16), the outputs
 * Yb[Mp/16][th*4][yw][16], and per thread V[36][tb][Cp] and O[36][tb][Mp] for one
 * block of at most tb tiles (a multiple of 6, sized so V and O fill about 640 KiB of
 * L2, more where U is larger). Cp, Mp: C and M rounded up to 16. */
typedef struct conv_w43_geo {
  int64_t th, tw, t; /* tile rows, tile columns, tiles per image */
  int64_t cp, mp;    /* C and M rounded up to 16 */
  int64_t hp, wpp;   /* Xb rows and row pitch (pixels of 16 floats) */
  int64_t yw;        /* Yb row pitch (pixels) */
  int64_t tb;        /* most tiles per block */
} conv_w43_geo;
static inline void nr_conv_w43_geo(const conv_p *p, conv_w43_geo *g) {
  g->th = (p->oh + 3) / 4, g->tw = (p->ow + 3) / 4, g->t = g->th * g->tw;
  g->cp = ((int64_t)p->c + 15) / 16 * 16, g->mp = ((int64_t)p->m + 15) / 16 * 16;
  g->hp = g->th * 4 + 2, g->wpp = (g->tw * 4 + 2 + 15) / 16 * 16;
  g->yw = (g->tw * 4 + 15) / 16 * 16;
  /* V and O in about 640 KiB of L2, or where U (streamed once per block from L3) is
   * larger, in up to a quarter of U's size (at most 4 MiB): fewer blocks on small
   * planes */
  int64_t u = 36 * 4 * (int64_t)p->c * g->mp;
  int64_t budget = u / 4 > (640 << 10) ? u / 4 : 640 << 10;
  budget = budget < (4 << 20) ? budget : 4 << 20;
  int64_t tb = budget / (36 * 4 * (g->cp + g->mp)) / 6 * 6, most = (g->t + 5) / 6 * 6;
  g->tb = tb < 6 ? 6 : tb > most ? most : tb;
}
static inline int64_t nr_conv_w43_xb_floats(const conv_w43_geo *g) {
  return g->cp * g->hp * g->wpp;
}
static inline int64_t nr_conv_w43_yb_floats(const conv_w43_geo *g) {
  return g->mp * g->th * 4 * g->yw;
}
static inline int64_t nr_conv_w43_buf_floats(const conv_w43_geo *g) {
  return 36 * g->tb * (g->cp + g->mp);
}
/* Scratch bytes for `threads` threads (64-byte aligned pieces, 64 bytes of slack). */
static inline uint64_t nr_conv_w43_scratch(const conv_p *p, int threads) {
  conv_w43_geo g;
  nr_conv_w43_geo(p, &g);
  uint64_t xb = (uint64_t)nr_conv_w43_xb_floats(&g) * 4;
  uint64_t yb = (uint64_t)nr_conv_w43_yb_floats(&g) * 4;
  return (xb + 63) / 64 * 64 + (yb + 63) / 64 * 64 +
         (uint64_t)threads * (uint64_t)nr_conv_w43_buf_floats(&g) * 4 + 64;
}

/* PLAIN column matrix of one image and group (conv_im2col.c): x is the group's first
 * input channel plane, col receives [C/g * kh * kw] rows of oh * ow floats, rows
 * built in parallel. Shared with the fp16/bf16 tactics (kernels/cpu/lpgemm). */
void nr_conv_im2col_plain(const conv_p *p, const float *x, float *col, nr_threadpool *pool,
                          int threads);
/* nr_f32_conv_im2col builds the column matrix a band of output rows at a time (its
 * record's `extra`): all oh rows while the whole matrix stays within
 * NR_IM2COL_BAND_BYTES, else as many rows as fit (at least one). */
#define NR_IM2COL_BAND_BYTES (256ull << 20)
int32_t nr_conv_im2col_band(const conv_p *p);
/* A grouped PLAIN im2col runs whole groups on each thread (its own band of columns and
 * a one-thread GEMM) when `threads` > 1 and their buffers stay within 64 MiB: the
 * number of such workers (0: groups one after the other, each on all threads), and
 * the scratch bytes of one. */
int nr_conv_im2col_workers(const conv_p *p, int threads);
uint64_t nr_conv_im2col_worker_bytes(const conv_p *p);
/* The CONV_OPT_* bits the route's conv.prepack / conv.epilogue / conv.threads give
 * the step's node (tactics_conv.c). */
uint8_t nr_conv_knob_opts(const nr_tactic_ctx *c);
/* nr_conv_parse on a graph node's tensors (no plan): what knob valid() functions and
 * the precision knob ask before any plan exists. */
bool nr_conv_parse_graph(const nr_graph *g, const nr_node *n, conv_p *p);

/* Conv kernels (conv_*.c), one per algorithm; all take the step's exec args. */
nr_status nr_conv_direct_run(const nr_exec_args *a);
nr_status nr_conv_dw_run(const nr_exec_args *a);          /* PLAIN, portable */
nr_status nr_conv_dw_nchw8c_run(const nr_exec_args *a);   /* NCHW8C, portable */
nr_status nr_conv_im2col_run(const nr_exec_args *a);
nr_status nr_conv_1x1_run(const nr_exec_args *a);
nr_status nr_conv_nhwc_run(const nr_exec_args *a);
nr_status nr_conv_winograd_run(const nr_exec_args *a);
nr_status nr_conv_onednn_run(const nr_exec_args *a);
nr_status nr_conv_onednn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step);

/* AVX2 kernels (files *__avx2.c; call only when nr_cpu_isa() has NR_ISA_AVX2). */
nr_status nr_conv_dw__avx2_run(const nr_exec_args *a);
nr_status nr_conv_dw_nchw8c__avx2_run(const nr_exec_args *a);
nr_status nr_conv_nchw8c_direct__avx2_run(const nr_exec_args *a);
nr_status nr_conv_smallc__avx2_run(const nr_exec_args *a);
nr_status nr_conv_igemm__avx2_run(const nr_exec_args *a); /* also nr_f32_conv_sp__avx2 */
nr_status nr_conv_pw__avx2_run(const nr_exec_args *a);
/* AVX-512 kernels (files *__avx512.c; call only when nr_cpu_isa() has NR_ISA_AVX512). */
nr_status nr_conv_igemm__avx512_run(const nr_exec_args *a);
nr_status nr_conv_dw__avx512_run(const nr_exec_args *a); /* PLAIN depthwise */
nr_status nr_conv_pw__avx512_run(const nr_exec_args *a);
nr_status nr_conv_sp__avx512_run(const nr_exec_args *a); /* small planes */
nr_status nr_conv_winograd_f43__avx512_run(const nr_exec_args *a);

/* Packing at build time (conv_pack.c). Each reads the constant W (and B) and appends
 * the packed form to the weights; sets step->packed_*. */
/* GEMM-based tactics: packs W of kind k (params already in st) into the engine, or,
 * with CONV_OPT_RAW_W, only adds the room for packing at run time to st->scratch. */
nr_status nr_conv_pack_gemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                            conv_pack_kind k);
/* Run time: the packed W of kind k: the engine's, or (CONV_OPT_RAW_W) packed from the
 * raw W into the start of *scratch, which then advances past it. */
const void *nr_conv_packed_w(const nr_exec_args *a, const conv_p *p, conv_pack_kind k,
                             char **scratch);
nr_status nr_conv_pack_nchw8c(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status nr_conv_pack_dw8(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
/* igemm: W as [ceil(M/mr) panels][C][kh*kw taps][mr] (zero rows past M), mr from
 * p->extra (nr_conv_igemm_geo). */
nr_status nr_conv_pack_igemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
/* sp: W as [ceil(M/32) panels][C][kh*kw taps][32] (zero rows past M). */
nr_status nr_conv_pack_sp(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
/* pw: W per K block of p->gemm.kc channels, each [ceil(M/mr) panels][kb][mr] (zero
 * rows past M; block k0 at float k0 * Mpad), mr from p->extra. */
nr_status nr_conv_pack_pw(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
/* winograd_f43__avx512: U = G g G^T as [36][ceil(M/64) chunks][C][cw] (cw = 64, the
 * last chunk the rest of M rounded up to 16; zero columns past M). */
nr_status nr_conv_pack_w43(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);
nr_status nr_conv_pack_copy(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st);

/* Threads the GEMM-based tactics size their scratch for. */
#define NR_CONV_MAX_THREADS 16
static inline int nr_conv_threads(const nr_exec_args *a) {
  int t = a->step->threads > 0 ? a->step->threads : NR_CONV_MAX_THREADS;
  int n = nr_threadpool_size(a->pool);
  return n < t ? n : t;
}
static inline int64_t nr_ceil8(int64_t c) { return (c + 7) / 8 * 8; }
/* Zeroes lanes [valid, 8) of npix blocked pixels (the padding channels of NCHW8C,
 * which an activation like sigmoid would otherwise make non-zero). */
static inline void nr_conv_zero_pad8(float *y, int64_t npix, int valid) {
  if (valid <= 0 || valid >= 8)
    return;
  for (int64_t i = 0; i < npix; i++)
    for (int l = valid; l < 8; l++)
      y[i * 8 + l] = 0.0f;
}
static inline size_t nr_conv_align64(size_t n) { return (n + 63) / 64 * 64; }

/* The residual input for a kernel working in layout l: when R arrives in another
 * layout, the kernel runs without residual and activation (q) and *post asks for
 * nr_conv_residual_post afterwards. NULL when there is no residual. */
static inline const float *nr_conv_res(const nr_exec_args *a, nr_layout l, conv_p *q,
                                       bool *post) {
  *post = false;
  if (!q->has_res || a->step->n_in < 4 || !a->in[3])
    return NULL;
  if (a->in_slot[3]->layout == l)
    return (const float *)a->in[3];
  *post = true;
  q->act = NR_ACT_NONE;
  return NULL;
}
static inline void nr_conv_finish(const nr_exec_args *a, nr_layout l, const conv_p *p,
                                  bool post) {
  if (post)
    nr_conv_residual_post((float *)a->out[0], l, (const float *)a->in[3],
                          a->in_slot[3]->layout, p, false, NULL);
}

/* Reorders (reorder.c). */
/* Converts a float32 [n, c, h, w] tensor between layouts (pad lanes zeroed). */
void nr_reorder_f32(const float *src, nr_layout from, float *dst, nr_layout to,
                    const int64_t *dims, nr_threadpool *pool);

#endif
