/* conv_pw__avx512.c - nr_f32_conv_pw__avx512: PLAIN group-1 unpadded 1x1 ("pointwise")
 * convolutions of any stride with AVX-512 register tiles. Compiled with the AVX-512
 * flags; called only after nr_cpu_isa() reported NR_ISA_AVX512.
 *
 * The product is Y[M x P] = W[M x C] * X[C x P] per image (P output pixels), as the
 * packed GEMM runs it for nr_f32_conv_1x1, but B is not packed: X's rows already are
 * its rows. B is X itself at stride 1, or a copy in scratch made once per image: at
 * stride 2 the compact strided pixels (which nr_f32_conv_im2col also copied, and the
 * GEMM then packed again), and where P is not a multiple of 16 and M is large, rows
 * padded to whole vectors (NR_CONV_PW_ALIGNED: 7x7 and 14x14 rows otherwise start
 * anywhere in a cache line and most loads span two). A register tile of mr output
 * channels x nv 16-pixel vectors loads B rows as plain vectors and broadcasts W from
 * panels packed at build per K block; its accumulators stay in registers over the kc
 * channels of a block, and after the last block it adds bias and residual and applies
 * ReLU / Clip / LeakyReLU in the register before the only store of Y (other
 * activations follow on the tile's rows while they are in L1). The last vector of a
 * row is masked, so no edge tile goes through a side buffer. A one-pixel output (the
 * squeeze-and-excite convs) takes a path of its own, one vector per W panel.
 *
 * Key decision: the loop nest is BLIS's jr -> ir with B read in place. One column
 * tile (kc x nv*16 floats of B, at most 32 KiB) is reused from L1 by every W panel of
 * a work item while the panels stream from L2; the first panel prefetches the next
 * column tile's B rows, and each call prefetches the next call's Y (first K block)
 * or residual (last) rows, which in a model come from L3 or memory. The tile shape is
 * chosen at build per layer (tactics_conv.c: the one that pads M and the last column
 * tile least), so resnet's 64 to 2048 channels run 8 x 48 without padding. Short
 * reductions over many pixels (by default C <= 64 and P >= 196: resnet50's 64->256
 * at 56x56, mobilenet's expansions) take the other order (NR_CONV_PW_PANELS, knob
 * conv.pw_order): panels outer and column tiles inner over a chunk of X that stays in
 * L2, so Y and the residual are written and read as mr sequential streams instead of
 * a 192-byte piece of each of M rows per column tile. The oc48x7 tile turns the
 * register tile around for small planes (by default 7x7 with C >= 1024): three vectors
 * of 48 output channels x 7 pixels broadcast from X, so a 49-pixel plane wastes no
 * lanes; its sums go through a small block in L1 and Y is written row by row. */
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <string.h>

/* What one call of a tile function writes, besides the K block it reduces. */
typedef struct pw_out {
  float *y;          /* the tile's first output: row oc0, pixel col */
  const float *res;  /* the residual at the same place, or NULL */
  const float *bias; /* bias[oc0], or NULL */
  int64_t ld;        /* floats between rows of Y and R (the pixels P) */
  int64_t ldx;       /* floats between rows of X (P, or the copy's pitch) */
  int64_t pf;        /* X is prefetched pf floats to the right of each row read */
  int rows;          /* rows that exist (< mr only in the last panel) */
  __mmask16 tail;    /* lanes of the last vector that exist */
  bool first, last;  /* first K block (start at zero) / last (epilogue) */
  nr_act act;        /* in-register activation: NONE, RELU, CLIP or LEAKY_RELU */
  float act_a, act_b;
} pw_out;

typedef void (*pw_tile_fn)(int64_t kb, const float *w, const float *x, const pw_out *o);

/* W is prefetched this many channels ahead (as the GEMM micro-kernels do for A): a
 * layer whose weights come from L3 or memory (resnet50's 512 x 2048 at 7x7) would
 * otherwise wait on every panel. */
#define PF_W_STEPS 32

static inline __attribute__((always_inline)) __m512 act_vec(const pw_out *o, __m512 v) {
  switch (o->act) {
  case NR_ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
  case NR_ACT_CLIP:
    return _mm512_min_ps(_mm512_set1_ps(o->act_b), _mm512_max_ps(_mm512_set1_ps(o->act_a), v));
  case NR_ACT_LEAKY_RELU:
    return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v,
                              _mm512_set1_ps(o->act_a));
  default: return v;
  }
}

/* One channel of a tile: nv vectors of X's row times mr broadcasts of W. */
static inline __attribute__((always_inline)) void
pw_step(const int MR, const int NV, const bool MASK, const bool PF, __m512 acc[12][4],
        const float *restrict w, const float *restrict x, const pw_out *o) {
  __m512 bv[4];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++)
    if (PF)
      _mm_prefetch((const char *)(x + o->pf + 16 * v), _MM_HINT_T0);
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++)
    bv[v] = MASK && v == NV - 1 ? _mm512_maskz_loadu_ps(o->tail, x + 16 * v)
                                : _mm512_loadu_ps(x + 16 * v);
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    __m512 av = _mm512_set1_ps(w[i]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
  }
}

/* One mr x nv*16 tile over kb channels. Always inlined with constant MR, NV, MASK
 * (the last vector masked with o->tail) and PF (X rows prefetched o->pf floats to the
 * right: a variant of its own, since a call with nothing to prefetch would otherwise
 * issue nv wasted prefetches per channel), so the accumulators are registers. The
 * channel loop runs two channels per trip, which halves the loop's own uops and the W
 * prefetches (one per 64-byte line instead of one per channel); objdump shows no
 * vector spills, only the trip count on the stack in 6x4. 0.90-0.95x time on most
 * resnet50 shapes warm, 0.92-1.0x cold (nr_conv_bench, 2026-11-30). */
static inline __attribute__((always_inline)) void
pw_body(const int MR, const int NV, const bool MASK, const bool PF, int64_t kb,
        const float *restrict w, const float *restrict x, const pw_out *o) {
  __m512 acc[12][4];
  const int64_t ld = o->ld, ldx = o->ldx;
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      acc[i][v] = _mm512_setzero_ps();
  int64_t k = 0;
#pragma GCC unroll 1
  for (; k + 2 <= kb; k += 2, w += 2 * MR, x += 2 * ldx) {
    /* two channels move W by 2 * MR floats: one prefetch per 64-byte line */
    _mm_prefetch((const char *)(w + MR * PF_W_STEPS), _MM_HINT_T0);
    if (MR > 8)
      _mm_prefetch((const char *)(w + MR * PF_W_STEPS + 16), _MM_HINT_T0);
    pw_step(MR, NV, MASK, PF, acc, w, x, o);
    pw_step(MR, NV, MASK, PF, acc, w + MR, x + ldx, o);
  }
  if (k < kb)
    pw_step(MR, NV, MASK, PF, acc, w, x, o);
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    if (i >= o->rows)
      break;
    float *y = o->y + i * ld;
    const float *r = o->res && o->last ? o->res + i * ld : NULL;
    __m512 vb = _mm512_set1_ps(o->bias && o->last ? o->bias[i] : 0.0f);
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      __mmask16 m = MASK && v == NV - 1 ? o->tail : (__mmask16)0xFFFF;
      __m512 a = acc[i][v];
      if (!o->first)
        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, y + 16 * v));
      if (o->last) {
        a = _mm512_add_ps(a, vb);
        if (r)
          a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, r + 16 * v));
        a = act_vec(o, a);
      }
      _mm512_mask_storeu_ps(y + 16 * v, m, a);
    }
  }
}

/* tile_MRxNV_{plain, masked, prefetching, masked and prefetching}. */
#define PW_TILE(MR, NV)                                                                \
  static void tile_##MR##x##NV(int64_t kb, const float *w, const float *x,            \
                               const pw_out *o) {                                      \
    pw_body(MR, NV, false, false, kb, w, x, o);                                        \
  }                                                                                    \
  static void tile_##MR##x##NV##_m(int64_t kb, const float *w, const float *x,        \
                                   const pw_out *o) {                                  \
    pw_body(MR, NV, true, false, kb, w, x, o);                                         \
  }                                                                                    \
  static void tile_##MR##x##NV##_p(int64_t kb, const float *w, const float *x,        \
                                   const pw_out *o) {                                  \
    pw_body(MR, NV, false, true, kb, w, x, o);                                         \
  }                                                                                    \
  static void tile_##MR##x##NV##_mp(int64_t kb, const float *w, const float *x,       \
                                    const pw_out *o) {                                 \
    pw_body(MR, NV, true, true, kb, w, x, o);                                          \
  }
PW_TILE(12, 1) PW_TILE(12, 2)
PW_TILE(8, 1) PW_TILE(8, 2) PW_TILE(8, 3)
PW_TILE(6, 1) PW_TILE(6, 2) PW_TILE(6, 3) PW_TILE(6, 4)

/* [tile][vectors - 1][masked + 2 * prefetching]: a row's last column tile may hold
 * fewer vectors. */
#define PW_FNS(MR, NV) \
  { tile_##MR##x##NV, tile_##MR##x##NV##_m, tile_##MR##x##NV##_p, tile_##MR##x##NV##_mp }
static const pw_tile_fn tiles[NR_CONV_PW_TILES][4][4] = {
    [NR_CONV_PW_TILE_12X32] = {PW_FNS(12, 1), PW_FNS(12, 2)},
    [NR_CONV_PW_TILE_8X48] = {PW_FNS(8, 1), PW_FNS(8, 2), PW_FNS(8, 3)},
    [NR_CONV_PW_TILE_6X64] = {PW_FNS(6, 1), PW_FNS(6, 2), PW_FNS(6, 3), PW_FNS(6, 4)},
};

/* ---- the loop nest -------------------------------------------------------------- */

typedef struct pw_job {
  const conv_p *p;
  const float *x, *w, *bias, *res; /* image n's B rows (X or its copy), packed W, ... */
  float *y;
  const float *xsrc;               /* the copy's source: image n's input */
  float *xs;                       /* the copy (nr_conv_pw_copies) */
  int64_t ldx;                     /* floats between rows of B */
  int64_t np;                      /* output pixels P */
  int64_t nvec, ntile, npan;       /* 16-pixel vectors, column tiles, W panels */
  int64_t gpan, ngroup, ctile, nchunk; /* work items: panel groups x column chunks */
  int mr, nv;
} pw_job;

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Channel rows of the copy, ldx floats apart: xs[c][oh][ow] = x[c][oh*sh][ow*sw]. */
static void copy_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pw_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  for (int64_t ci = begin; ci < end; ci++) {
    const float *x = j->xsrc + ci * (int64_t)p->h * p->w;
    float *d = j->xs + ci * j->ldx;
    if (!nr_conv_pw_strided(p)) {
      memcpy(d, x, sizeof(float) * (size_t)j->np);
      continue;
    }
    for (int64_t oh = 0; oh < p->oh; oh++, d += p->ow) {
      const float *xr = x + oh * p->sh * (int64_t)p->w;
      if (p->sw == 1)
        memcpy(d, xr, sizeof(float) * (size_t)p->ow);
      else
        for (int64_t ow = 0; ow < p->ow; ow++)
          d[ow] = xr[ow * p->sw];
    }
  }
}

/* Fetches into L1 what the next tile call (panel pan, from column col) reads besides
 * X and W: its Y rows when it is the first K block (the stores would miss) and its
 * residual rows when it is the last. In a model both come from L3 or memory, and a
 * tile's mr x nv*16 outputs missing at once at the end of a short reduction (K = 64:
 * 64 steps) stalled it. */
static void prefetch_out(const pw_job *j, int64_t pan, int64_t col, bool first, bool last) {
  const conv_p *p = j->p;
  if (col >= j->np || (!first && !(last && j->res)))
    return;
  int64_t rows = min64(j->mr, p->m - pan * j->mr), len = min64(j->nv * 16, j->np - col);
  for (int64_t i = 0; i < rows; i++) {
    int64_t off = (pan * j->mr + i) * j->np + col;
    const char *yr = (const char *)(j->y + off);
    const char *rr = j->res ? (const char *)(j->res + off) : yr;
    for (int64_t b = 0; b < len * 4 + 63; b += 64) {
      if (first)
        _mm_prefetch(yr + b, _MM_HINT_T0);
      if (last && j->res)
        _mm_prefetch(rr + b, _MM_HINT_T0);
    }
  }
}

/* The tile function for column tile jt (narrower and masked at the row's end). */
static pw_tile_fn tile_fn(const pw_job *j, int64_t jt, bool pf, int64_t *ncols) {
  int nvl = (int)min64(j->nv, j->nvec - jt * j->nv);
  *ncols = min64((int64_t)nvl * 16, j->np - jt * j->nv * 16);
  return tiles[nr_conv_pw_tile(j->p->extra)][nvl - 1][(*ncols % 16 != 0) + 2 * pf];
}

/* Column tile jt of panels [p0, p1): the K block k0 of their channels. The tile's
 * constants are set once, only the panel's pointers change per call. */
static void run_tiles(const pw_job *j, int64_t jt, int64_t p0, int64_t p1, int64_t k0,
                      bool piecewise) {
  const conv_p *p = j->p;
  int64_t col = jt * j->nv * 16, kb = min64(p->gemm.kc, p->c - k0), ncols;
  bool next = jt + 1 < j->ntile; /* the first panel prefetches the next column tile */
  pw_tile_fn fn = tile_fn(j, jt, false, &ncols), fn0 = tile_fn(j, jt, next, &ncols);
  bool masked = ncols % 16 != 0;
  pw_out o = {.ld = j->np,
              .ldx = j->ldx,
              .rows = j->mr,
              .tail = masked ? (__mmask16)((1u << (ncols % 16)) - 1) : (__mmask16)0xFFFF,
              .first = k0 == 0,
              .last = k0 + kb >= p->c,
              .act = piecewise ? (nr_act)p->act : NR_ACT_NONE,
              .act_a = p->act_a,
              .act_b = p->act_b};
  const float *x = j->x + k0 * j->ldx + col;
  const float *w = j->w + k0 * j->npan * j->mr + p0 * kb * j->mr;
  int64_t step = (int64_t)j->mr * j->np;
  o.y = j->y + p0 * step + col;
  o.res = j->res ? j->res + p0 * step + col : NULL;
  o.bias = j->bias ? j->bias + p0 * j->mr : NULL;
  o.pf = j->nv * 16;
  for (int64_t pan = p0; pan < p1; pan++) {
    if (pan == j->npan - 1)
      o.rows = (int)(p->m - pan * j->mr);
    prefetch_out(j, pan + 1 < p1 ? pan + 1 : p0, pan + 1 < p1 ? col : col + j->nv * 16,
                 o.first, o.last);
    (pan == p0 ? fn0 : fn)(kb, w, x, &o);
    if (o.last && !piecewise)
      for (int i = 0; i < o.rows; i++)
        nr_act_apply((nr_act)p->act, p->act_a, p->act_b, o.y + i * j->np, ncols);
    w += kb * j->mr;
    o.y += step;
    o.res = o.res ? o.res + step : NULL;
    o.bias = o.bias ? o.bias + j->mr : NULL;
  }
}

/* Column tiles [t0, t1) of panel pan (NR_CONV_PW_PANELS order): the K block k0. The
 * panel's W block stays in L1 and the chunk's X rows come from L2; each call
 * prefetches the next column tile's X rows, and Y and the residual are mr sequential
 * streams each, which the hardware prefetchers follow. */
static void run_panel(const pw_job *j, int64_t pan, int64_t t0, int64_t t1, int64_t k0,
                      bool piecewise) {
  const conv_p *p = j->p;
  int64_t kb = min64(p->gemm.kc, p->c - k0), tw = (int64_t)j->nv * 16;
  int64_t off = pan * j->mr * j->np;
  pw_out o = {.ld = j->np,
              .ldx = j->ldx,
              .pf = tw,
              .rows = (int)min64(j->mr, p->m - pan * j->mr),
              .first = k0 == 0,
              .last = k0 + kb >= p->c,
              .act = piecewise ? (nr_act)p->act : NR_ACT_NONE,
              .act_a = p->act_a,
              .act_b = p->act_b};
  const float *w = j->w + k0 * j->npan * j->mr + pan * kb * j->mr;
  const float *bias = j->bias ? j->bias + pan * j->mr : NULL;
  for (int64_t jt = t0; jt < t1; jt++) {
    int64_t col = jt * tw, ncols;
    pw_tile_fn fn = tile_fn(j, jt, jt + 1 < t1, &ncols);
    o.tail = ncols % 16 ? (__mmask16)((1u << (ncols % 16)) - 1) : (__mmask16)0xFFFF;
    o.y = j->y + off + col;
    o.res = j->res ? j->res + off + col : NULL;
    o.bias = bias;
    prefetch_out(j, pan, col + tw, o.first, o.last);
    fn(kb, w, j->x + k0 * j->ldx + col, &o);
    if (o.last && !piecewise)
      for (int i = 0; i < o.rows; i++)
        nr_act_apply((nr_act)p->act, p->act_a, p->act_b, o.y + i * j->np, ncols);
  }
}

/* Work item: panel group it / nchunk x column chunk it % nchunk. K blocks outside,
 * then column tiles, panels inside: a column tile's B rows come from memory for the
 * group's first panel and from L1 for the others, and the group's W block (at most
 * 128 KiB) from L2 for every column tile. NR_CONV_PW_PANELS swaps the inner two:
 * panels, then the chunk's column tiles (run_panel). */
static void item_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pw_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  bool piecewise = p->act == NR_ACT_NONE || p->act == NR_ACT_RELU ||
                   p->act == NR_ACT_CLIP || p->act == NR_ACT_LEAKY_RELU;
  bool panels = p->extra & NR_CONV_PW_PANELS;
  for (int64_t it = begin; it < end; it++) {
    int64_t g = it / j->nchunk, ch = it % j->nchunk;
    int64_t p0 = g * j->gpan, p1 = min64(j->npan, p0 + j->gpan);
    int64_t t0 = ch * j->ctile, t1 = min64(j->ntile, t0 + j->ctile);
    for (int64_t k0 = 0; k0 < p->c; k0 += p->gemm.kc)
      if (panels)
        for (int64_t pan = p0; pan < p1; pan++)
          run_panel(j, pan, t0, t1, k0, piecewise);
      else
        for (int64_t jt = t0; jt < t1; jt++)
          run_tiles(j, jt, p0, p1, k0, piecewise);
  }
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/* Panel groups whose W block (group rows x kc) stays within 128 KiB of L2, and
 * column chunks whose Y block (group rows x chunk columns) stays within 256 KiB
 * between K blocks (one K block: one column tile per chunk); in the panels order,
 * column chunks whose X block (kc x chunk columns) stays within 512 KiB of L2, as it
 * is read once per panel, and the Y block as above. Then, with several
 * threads, chunks are cut until there are 4 items per thread, panels too if the
 * columns run out. Groups and chunks are balanced (equal sizes but the last). */
static void plan_items(pw_job *j, int threads) {
  const conv_p *p = j->p;
  int64_t rows = 32768 / p->gemm.kc, tw = (int64_t)j->nv * 16;
  j->ngroup = ceil_div(j->npan, rows / j->mr > 0 ? rows / j->mr : 1);
  j->gpan = ceil_div(j->npan, j->ngroup);
  int64_t ct = 1;
  if (p->extra & NR_CONV_PW_PANELS) { /* the chunk's X block within 512 KiB of L2 */
    ct = 131072 / (p->gemm.kc * tw);
    if (p->gemm.kc < p->c)
      ct = min64(ct, 65536 / (j->gpan * j->mr * tw));
    ct = ct < 1 ? 1 : ct;
  } else if (p->gemm.kc < p->c) {
    ct = 65536 / (j->gpan * j->mr * tw);
    ct = ct < 1 ? 1 : ct;
  }
  j->nchunk = ceil_div(j->ntile, ct);
  int64_t want = threads > 1 ? 4 * threads : 1;
  if (j->ngroup * j->nchunk < want)
    j->nchunk = min64(j->ntile, ceil_div(want, j->ngroup));
  if (j->ngroup * j->nchunk < want) {
    j->ngroup = min64(j->npan, ceil_div(want, j->nchunk));
    j->gpan = ceil_div(j->npan, j->ngroup);
    j->ngroup = ceil_div(j->npan, j->gpan);
  }
  j->ctile = ceil_div(j->ntile, j->nchunk);
  j->nchunk = ceil_div(j->ntile, j->ctile);
}

/* One output pixel (the squeeze-and-excite convs on a 1x1 map): a tile would use one
 * lane of each accumulator, but Y's column is M contiguous floats, so a panel's mr
 * outputs are one vector: acc += W[k][panel] x X[k] over k, four chains for the FMA
 * latency (efficientnet_b0's 1152 -> 48 ran 1.9x slower as a 12 x 1-pixel tile). */
static void gemv_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pw_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  bool piecewise = p->act == NR_ACT_NONE || p->act == NR_ACT_RELU ||
                   p->act == NR_ACT_CLIP || p->act == NR_ACT_LEAKY_RELU;
  pw_out o = {.act = piecewise ? (nr_act)p->act : NR_ACT_NONE, .act_a = p->act_a,
              .act_b = p->act_b};
  __mmask16 wm = (__mmask16)((1u << j->mr) - 1);
  for (int64_t pan = begin; pan < end; pan++) {
    int64_t oc = pan * j->mr;
    int rows = (int)min64(j->mr, p->m - oc);
    __mmask16 rm = (__mmask16)((1u << rows) - 1);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    for (int64_t k0 = 0; k0 < p->c; k0 += p->gemm.kc) {
      int64_t kb = min64(p->gemm.kc, p->c - k0), k = 0;
      const float *w = j->w + k0 * j->npan * j->mr + pan * kb * j->mr;
      const float *x = j->x + k0 * j->ldx;
      for (; k + 4 <= kb; k += 4)
        for (int u = 0; u < 4; u++)
          acc[u] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(wm, w + (k + u) * j->mr),
                                   _mm512_set1_ps(x[(k + u) * j->ldx]), acc[u]);
      for (; k < kb; k++)
        acc[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(wm, w + k * j->mr),
                                 _mm512_set1_ps(x[k * j->ldx]), acc[0]);
    }
    __m512 v = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    if (j->bias)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rm, j->bias + oc));
    if (j->res)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rm, j->res + oc));
    _mm512_mask_storeu_ps(j->y + oc, rm, act_vec(&o, v));
    if (!piecewise)
      nr_act_apply((nr_act)p->act, p->act_a, p->act_b, j->y + oc, rows);
  }
}

/* ---- output channels as vectors: the oc48x7 tile --------------------------------- */

/* Pixels of one register tile, and tiles of one work item's chunk. A plane whose pixel
 * count leaves a remainder of one takes it into a last tile of 8 (24 accumulators),
 * since a 1-pixel tile has only 3 FMA chains. */
#define OC_NP 7
#define OC_GROUPS 9
#define OC_CHUNK_PIX (OC_GROUPS * OC_NP + 1)
/* W is prefetched OC_PF channels ahead; the first pixel tile of a panel's K block
 * reads it from L2 or memory, the others from L1 (24 channels ahead measured the same,
 * as did K blocks of 128 and 2048 against 64). */
#define OC_PF 8
/* Channels per pass of the pixel tiles over W: 64 x 48 floats (12 KiB) stay in L1 for
 * the chunk's tiles. W is packed by default as one K block (kc = C), so a panel's W is
 * one sequential stream across these pieces. */
#define OC_KB 64

typedef struct oc_job {
  const pw_job *j;
  int64_t ngroup;          /* pixel tiles of the plane */
  int64_t cgroups, nchunk; /* tiles per work item's chunk, chunks */
} oc_job;

/* kb channels of a 48-channel x NP-pixel tile. acc[i][v] holds output channels 16v..
 * 16v+15 of the tile's pixel i: three W vectors and NP broadcasts of X per channel,
 * 3 NP FMAs. The sums start at zero (the first channels) or from s ([pixel][48], in
 * L1), and go back to s: Y is written row by row after the last piece (oc_rows). */
static inline __attribute__((always_inline)) void
oc_body(const int NP, int64_t kb, const float *restrict w, const float *restrict x,
        int64_t ldx, float *restrict s, bool first) {
  __m512 acc[OC_NP + 1][3];
#pragma GCC unroll 8
  for (int i = 0; i < NP; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++)
      acc[i][v] = first ? _mm512_setzero_ps() : _mm512_load_ps(s + i * 48 + 16 * v);
#pragma GCC unroll 1
  for (int64_t k = 0; k < kb; k++, w += 48, x += ldx) {
    _mm_prefetch((const char *)(w + 48 * OC_PF), _MM_HINT_T0);
    _mm_prefetch((const char *)(w + 48 * OC_PF + 16), _MM_HINT_T0);
    _mm_prefetch((const char *)(w + 48 * OC_PF + 32), _MM_HINT_T0);
    __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16), w2 = _mm512_loadu_ps(w + 32);
#pragma GCC unroll 8
    for (int i = 0; i < NP; i++) {
      __m512 b = _mm512_set1_ps(x[i]);
      acc[i][0] = _mm512_fmadd_ps(w0, b, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(w1, b, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(w2, b, acc[i][2]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NP; i++)
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++)
      _mm512_store_ps(s + i * 48 + 16 * v, acc[i][v]);
}

typedef void (*oc_tile_fn)(int64_t, const float *, const float *, int64_t, float *, bool);
#define OC_TILE(NP)                                                                      \
  static void oc_tile_##NP(int64_t kb, const float *w, const float *x, int64_t ldx,      \
                           float *s, bool first) {                                        \
    oc_body(NP, kb, w, x, ldx, s, first);                                                 \
  }
OC_TILE(1) OC_TILE(2) OC_TILE(3) OC_TILE(4) OC_TILE(5) OC_TILE(6) OC_TILE(7) OC_TILE(8)
static const oc_tile_fn oc_tiles[OC_NP + 2] = {NULL,      oc_tile_1, oc_tile_2,
                                               oc_tile_3, oc_tile_4, oc_tile_5,
                                               oc_tile_6, oc_tile_7, oc_tile_8};

/* The epilogue of a chunk (pixels px .. px + len of the panel's rows): each output
 * row's sums are gathered from s (48 floats between pixels, in L1), then bias, the
 * residual and the in-register activation, and Y's row piece is stored as whole
 * vectors. Y and the residual stay sequential streams, as in the pixel tiles; a
 * scatter straight from the registers (16 rows per vector) ran resnet50's 512->2048
 * + residual at 7x7 1.1x slower than 12x32 in the model, where Y and R come from L3. */
static void oc_rows(const pw_job *j, const float *s, int64_t oc, int rows, int64_t px,
                    int64_t len, const pw_out *o) {
  const __m512i lanes = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(48));
  for (int i = 0; i < rows; i++) {
    float *y = j->y + (oc + i) * j->np + px;
    const float *r = j->res ? j->res + (oc + i) * j->np + px : NULL;
    __m512 vb = _mm512_set1_ps(j->bias ? j->bias[oc + i] : 0.0f);
    for (int64_t q = 0; q < len; q += 16) {
      __mmask16 m = len - q >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - q)) - 1);
      __m512 a = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lanes, s + q * 48 + i, 4);
      a = _mm512_add_ps(a, vb);
      if (r)
        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, r + q));
      _mm512_mask_storeu_ps(y + q, m, act_vec(o, a));
    }
  }
}

/* Work item: W panel it / nchunk x pixel chunk it % nchunk, pieces of OC_KB channels
 * outside, the chunk's pixel tiles inside: a piece of the panel's W (12 KiB) stays in
 * L1 for all of them, and the chunk's sums wait in s ([pixel][48]) between pieces. */
static void oc_task(void *arg, int64_t begin, int64_t end, int thread) {
  const oc_job *oj = arg;
  const pw_job *j = oj->j;
  const conv_p *p = j->p;
  (void)thread;
  bool piecewise = p->act == NR_ACT_NONE || p->act == NR_ACT_RELU ||
                   p->act == NR_ACT_CLIP || p->act == NR_ACT_LEAKY_RELU;
  float s[OC_CHUNK_PIX * 48] __attribute__((aligned(64)));
  pw_out o = {.act = piecewise ? (nr_act)p->act : NR_ACT_NONE, .act_a = p->act_a,
              .act_b = p->act_b};
  for (int64_t it = begin; it < end; it++) {
    int64_t pan = it / oj->nchunk, ch = it % oj->nchunk, oc = pan * 48;
    int64_t g0 = ch * oj->cgroups, g1 = min64(oj->ngroup, g0 + oj->cgroups);
    int64_t px = g0 * OC_NP, len = (g1 == oj->ngroup ? j->np : g1 * OC_NP) - px;
    int rows = (int)min64(48, p->m - oc);
    for (int64_t k0 = 0; k0 < p->c; k0 += p->gemm.kc) {
      int64_t kb = min64(p->gemm.kc, p->c - k0);
      const float *w = j->w + k0 * j->npan * 48 + pan * kb * 48;
      for (int64_t k1 = 0; k1 < kb; k1 += OC_KB) { /* a piece of W that stays in L1 */
        int64_t kp = min64(OC_KB, kb - k1);
        for (int64_t g = g0; g < g1; g++) {
          int64_t np = g + 1 < oj->ngroup ? OC_NP : j->np - g * OC_NP;
          oc_tiles[np](kp, w + k1 * 48, j->x + (k0 + k1) * j->ldx + g * OC_NP, j->ldx,
                       s + (g - g0) * OC_NP * 48, k0 + k1 == 0);
        }
      }
    }
    oc_rows(j, s, oc, rows, px, len, &o);
    if (!piecewise)
      for (int i = 0; i < rows; i++)
        nr_act_apply((nr_act)p->act, p->act_a, p->act_b, j->y + (oc + i) * j->np + px, len);
  }
}

/* Pixel tiles of 7 (the last of 1..8 pixels), chunks of at most OC_GROUPS tiles, cut
 * further until there are 4 items per thread. */
static void oc_plan(oc_job *oj, int threads) {
  const pw_job *j = oj->j;
  oj->ngroup = j->np > OC_NP && j->np % OC_NP == 1 ? j->np / OC_NP : ceil_div(j->np, OC_NP);
  oj->nchunk = ceil_div(oj->ngroup, OC_GROUPS);
  int64_t want = threads > 1 ? 4 * threads : 1;
  if (j->npan * oj->nchunk < want)
    oj->nchunk = min64(oj->ngroup, ceil_div(want, j->npan));
  oj->cgroups = ceil_div(oj->ngroup, oj->nchunk);
  oj->nchunk = ceil_div(oj->ngroup, oj->cgroups);
}

nr_status nr_conv_pw__avx512_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  const float *bias = q.has_bias ? a->in[2] : NULL;
  conv_p epi = q; /* conv.epilogue=separate: the tiles store raw sums, a pass follows */
  bool split = q.opts & CONV_OPT_SPLIT_EPI;
  if (split)
    q.act = NR_ACT_NONE;
  pw_job j = {.p = &q, .w = a->packed, .bias = split ? NULL : bias,
              .xs = (float *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63),
              .mr = nr_conv_pw_mr(q.extra), .nv = nr_conv_pw_nv(q.extra)};
  j.np = (int64_t)q.oh * q.ow;
  j.nvec = (j.np + 15) / 16;
  j.ntile = (j.nvec + j.nv - 1) / j.nv;
  j.npan = (q.m + j.mr - 1) / j.mr;
  int threads = nr_conv_threads(a);
  plan_items(&j, threads);
  bool oc = nr_conv_pw_tile(q.extra) == NR_CONV_PW_TILE_OC48X7;
  oc_job oj = {.j = &j};
  if (oc)
    oc_plan(&oj, threads);
  bool strided = nr_conv_pw_copies(&q);
  j.ldx = strided ? nr_conv_pw_ldx(&q) : j.np;
  for (int64_t n = 0; n < q.n; n++) {
    const float *x = (const float *)a->in[0] + n * (int64_t)q.c * q.h * q.w;
    if (strided) {
      j.xsrc = x;
      nr_parallel_for(a->pool, q.c, 8, threads, copy_task, &j);
    }
    j.x = strided ? j.xs : x;
    j.y = (float *)a->out[0] + n * q.m * j.np;
    j.res = res && !split ? res + n * q.m * j.np : NULL;
    if (oc)
      nr_parallel_for(a->pool, j.npan * oj.nchunk, 1, threads, oc_task, &oj);
    else if (j.np == 1)
      nr_parallel_for(a->pool, j.npan, 16, threads, gemv_task, &j);
    else
      nr_parallel_for(a->pool, j.ngroup * j.nchunk, 1, threads, item_task, &j);
  }
  if (split)
    nr_conv_epilogue_pass(a, NR_LAYOUT_PLAIN, &epi, bias, res, threads);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
