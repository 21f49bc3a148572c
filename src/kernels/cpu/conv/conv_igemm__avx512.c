/* conv_igemm__avx512.c - nr_f32_conv_igemm__avx512: PLAIN group-1 convolution as an
 * implicit GEMM with AVX-512 register tiles, no column matrix. Compiled with the
 * AVX-512 flags; called only after nr_cpu_isa() reported NR_ISA_AVX512.
 *
 * The product is Y[M x pixels] = W[M x C*kh*kw] * col, as nr_f32_conv_im2col runs it,
 * but col is never built: each image is first copied into padded, stride-phase-split
 * channel planes (geometry: nr_conv_igemm_geo in conv_internal.h), about the input's
 * own size instead of kh*kw times it. In that copy one tap's inputs for consecutive
 * output pixels are consecutive floats, also across output rows when pixels are
 * counted with the plane's row pitch lp ("padded pixels"; the lp - OW columns per row
 * that do not exist are computed and dropped). So a register tile of mr output
 * channels x np padded pixels loads its B rows as plain vectors straight from the
 * planes and broadcasts W from panels packed at build time; the accumulators stay in
 * registers over the whole reduction (C x taps), and the epilogue (bias, residual,
 * activation) runs on the finished tile while it is in L1. Tiles of 7x7 and 14x14
 * outputs span rows, which a per-row tiling of 32 or 48 pixels could not fill.
 *
 * Where the activation is none, ReLU, Clip or LeakyReLU and rows are at least 16
 * padded pixels long, the epilogue runs on the accumulators and writes Y with masked
 * stores (each vector touches at most two output rows), without the tile buffer; the
 * tiles are walked in L2-sized blocks of the copy, every panel over one block before
 * the next (tile_task); stride-2 phase planes are filled 16 floats at a time.
 *
 * Key decision: the tile is 12 x 32 (24 zmm accumulators, 2 vector loads and 12
 * broadcasts per 24 FMAs, as the GEMM's 12x32 micro-kernel) or 8 x 48 (3 loads and 8
 * broadcasts), whichever pads M and the padded pixels less (prepare() decides, by
 * the padded work); W's panel for one tile row (at most mr x 64 taps x C floats) is
 * reused from L2 across the pixel tiles of a thread's chunk. */
#include "kernels/cpu/conv/conv_avx512.h"
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <string.h>

typedef struct ig_job {
  const conv_p *p;
  conv_igemm_geo g;
  const float *x, *w, *bias, *res;
  float *xp, *y;
  int64_t ntq; /* pixel tiles per panel */
  int64_t tpb; /* pixel tiles per block (work order, see tile_task) */
  int64_t npan;
  int taps;
  uint64_t phases; /* bit a * sw + b: some tap reads phase plane (a, b) */
  int64_t toff[NR_CONV_IGEMM_MAX_TAPS]; /* per tap: phase plane + row/column shift */
  unsigned char pft[NR_CONV_IGEMM_MAX_TAPS]; /* tap t prefetches (see tile_body) */
} ig_job;

/* ---- the padded copy ------------------------------------------------------------ */

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Phase plane (a, b) of one channel: rq rows of lp columns, then zero slack. */
static void fill_phase(const conv_p *p, const conv_igemm_geo *g, const float *x, int a,
                       int b, float *dst) {
  /* the columns [c0, c1) that hold input: pl - b <= c*sw <= w - 1 + pl - b */
  int64_t lo = p->pl - b, hi = p->w - 1 + p->pl - b;
  int64_t c0 = min64(lo <= 0 ? 0 : (lo + p->sw - 1) / p->sw, g->lp);
  int64_t c1 = min64(hi < 0 ? 0 : hi / p->sw + 1, g->lp);
  if (c1 < c0)
    c1 = c0;
  for (int64_t r = 0; r < g->rq; r++) {
    float *row = dst + r * g->lp;
    int64_t ih = r * p->sh + a - p->pt;
    if (ih < 0 || ih >= p->h || c0 >= c1) {
      memset(row, 0, sizeof(float) * (size_t)g->lp);
      continue;
    }
    const float *xr = x + ih * p->w + (c0 * p->sw + b - p->pl);
    memset(row, 0, sizeof(float) * (size_t)c0);
    if (p->sw == 1)
      memcpy(row + c0, xr, sizeof(float) * (size_t)(c1 - c0));
    else if (p->sw == 2)
      nr_conv_even_floats(row + c0, xr, c1 - c0);
    else
      for (int64_t c = c0; c < c1; c++)
        row[c] = xr[(c - c0) * p->sw];
    memset(row + c1, 0, sizeof(float) * (size_t)(g->lp - c1));
  }
  memset(dst + g->rq * g->lp, 0, sizeof(float) * (size_t)(g->pp - g->rq * g->lp));
}

/* Items are (channel, phase plane) pairs, so a 3-channel stem's stride-2 copy (12
 * planes) is shared by the threads too (by channel it was one item: mobilenet_v2's
 * stem ran 1.33x faster on 2 threads than on 1). */
static void pad_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ig_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  int nph = p->sh * p->sw;
  for (int64_t i = begin; i < end; i++) {
    int64_t ci = i / nph;
    int ph = (int)(i % nph);
    if (j->phases >> ph & 1)
      fill_phase(p, &j->g, j->x + ci * (int64_t)p->h * p->w, ph / p->sw, ph % p->sw,
                 j->xp + ci * j->g.cs + ph * j->g.pp);
  }
}

/* ---- the register tile ---------------------------------------------------------- */

/* The reduction runs channel by channel, all taps of a channel in a row: the taps
 * read the same 2-3 rows of one plane (L1 hits after the first), where taps outside
 * and channels inside read a new plane, cs floats on, every step (measured up to 15%
 * slower on resnet's stem, stride-2 and 28x28 layers). The plane PF_CH channels ahead
 * is prefetched, a jump the hardware prefetchers do not follow (without: 5-25% slower
 * on resnet's 3x3 layers, nr_conv_bench); over the last PF_CH channels, the next
 * tile's first channels (np pixels on), which the next work item reads: with 3 input
 * channels (the stems) there had been nothing to prefetch for most of the reduction,
 * and the 7x7/2 stem ran about 10% slower (nr_conv_bench A/B, 2026-11-30). Only the
 * first tap of each run of taps less than a line apart prefetches, NV + 1 lines (a
 * 3x3's dx = 1, 2 taps read the lines of its dx = 0 tap): half the prefetches, the
 * 7x7 stem 5-8% and the 56x56 layers about 3% faster, 28x28 and stride 2 unchanged. */
#define PF_CH 2

/* Where a finished tile goes when its epilogue runs in the registers: Y,
 * R and the bias at the panel's first output channel, the channels that exist, and
 * per 16-pixel vector v the two output rows it can touch (lp >= 16): lanes m0[v] go to
 * Y + d0[v] + lane (row r), lanes m1[v] to Y + d1[v] + lane (row r + 1). */
typedef struct ig_out {
  float *y;
  const float *res, *bias;
  int64_t ohw;
  int rows;
  int64_t d0[3], d1[3];
  __mmask16 m0[3], m1[3];
  nr_act act;
  float act_a, act_b;
} ig_out;

/* act(acc + bias + r) into Y through the masks: nr_conv_epilogue's order of operations
 * and comparisons (as epi_seg), so results and NaNs match the buffered path. */
static inline __attribute__((always_inline)) void out_vec(const ig_out *o, int i, int v,
                                                          __m512 acc, __m512 vb) {
  __m512 x = _mm512_add_ps(acc, vb), zero = _mm512_setzero_ps();
  int64_t at = i * o->ohw;
  if (o->res) {
    __m512 r = _mm512_maskz_loadu_ps(o->m0[v], o->res + at + o->d0[v]);
    r = _mm512_mask_loadu_ps(r, o->m1[v], o->res + at + o->d1[v]);
    x = _mm512_add_ps(x, r);
  }
  if (o->act == NR_ACT_RELU)
    x = _mm512_max_ps(x, zero);
  else if (o->act == NR_ACT_CLIP)
    x = _mm512_min_ps(_mm512_set1_ps(o->act_b), _mm512_max_ps(_mm512_set1_ps(o->act_a), x));
  else if (o->act == NR_ACT_LEAKY_RELU)
    x = _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x,
                           _mm512_set1_ps(o->act_a));
  _mm512_mask_storeu_ps(o->y + at + o->d0[v], o->m0[v], x);
  _mm512_mask_storeu_ps(o->y + at + o->d1[v], o->m1[v], x);
}

/* out[MR][NV*16] = sum over channels ci and taps t of w[ci][t][MR] x x[ci*cs + toff[t]],
 * or with o, act(that + bias + R) written to Y through o. Always inlined with constant MR, NV, so the accumulators are registers. The tap loop
 * is not unrolled (see gemm/ukernel_template.h: unrolling spills with 24+ live
 * accumulators). */
static inline __attribute__((always_inline)) void
tile_body(const int MR, const int NV, const float *restrict w, const float *restrict x,
          int64_t cs, const int64_t *toff, int taps, int64_t c, float *restrict out,
          const ig_out *o, const unsigned char *pft) {
  __m512 acc[12][3];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      acc[i][v] = _mm512_setzero_ps();
  for (int64_t ci = 0; ci < c; ci++, x += cs) {
    const int64_t pf = ci + PF_CH < c ? PF_CH * cs : 16 * NV + (PF_CH - c) * cs;
#pragma GCC unroll 1
    for (int t = 0; t < taps; t++, w += MR) {
      const float *xb = x + toff[t];
      __m512 bv[3];
      if (pft[t]) {
#pragma GCC unroll 4
        for (int v = 0; v <= NV; v++)
          _mm_prefetch((const char *)(xb + pf + 16 * v), _MM_HINT_T0);
      }
#pragma GCC unroll 3
      for (int v = 0; v < NV; v++)
        bv[v] = _mm512_loadu_ps(xb + 16 * v);
#pragma GCC unroll 12
      for (int i = 0; i < MR; i++) {
        __m512 av = _mm512_set1_ps(w[i]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
          acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
  }
  if (o) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      if (i >= o->rows)
        break;
      __m512 vb = _mm512_set1_ps(o->bias ? o->bias[i] : 0.0f);
#pragma GCC unroll 3
      for (int v = 0; v < NV; v++)
        out_vec(o, i, v, acc[i][v], vb);
    }
    return;
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      _mm512_store_ps(out + (i * NV + v) * 16, acc[i][v]);
}

static void tile_12x32(const float *w, const float *x, int64_t cs, const int64_t *toff,
                       int taps, int64_t c, float *out, const ig_out *o,
                       const unsigned char *pft) {
  tile_body(12, 2, w, x, cs, toff, taps, c, out, o, pft);
}
static void tile_8x48(const float *w, const float *x, int64_t cs, const int64_t *toff,
                      int taps, int64_t c, float *out, const ig_out *o,
                      const unsigned char *pft) {
  tile_body(8, 3, w, x, cs, toff, taps, c, out, o, pft);
}

/* ---- the epilogue --------------------------------------------------------------- */

/* dst[0, len) = act(src + bias + r), comparisons ordered as nr_conv_epilogue's so NaN
 * gives the same result; the activations other than none, relu, clip and leaky relu
 * run after the store, through nr_conv_epilogue (its AVX2 math measured as
 * fast as a 16-lane copy in the register: both are bound by the division). */
static void epi_seg(float *dst, const float *src, const float *r, int64_t len, float bias,
                    const conv_p *p) {
  __m512 vb = _mm512_set1_ps(bias), lo = _mm512_set1_ps(p->act_a),
         hi = _mm512_set1_ps(p->act_b), zero = _mm512_setzero_ps();
  nr_act act = (nr_act)p->act;
  for (int64_t i = 0; i < len; i += 16) {
    __mmask16 m = len - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (len - i)) - 1);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + i), vb);
    if (r)
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, r + i));
    if (act == NR_ACT_RELU)
      v = _mm512_max_ps(v, zero);
    else if (act == NR_ACT_CLIP)
      v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    else if (act == NR_ACT_LEAKY_RELU)
      v = _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, lo);
    _mm512_mask_storeu_ps(dst + i, m, v);
  }
  if (act != NR_ACT_NONE && act != NR_ACT_RELU && act != NR_ACT_CLIP &&
      act != NR_ACT_LEAKY_RELU)
    nr_conv_epilogue(dst, NULL, len, 0.0f, p);
}

/* Rows of the finished tile (panel pan, padded pixels [t0, t0 + np)) into Y, dropping
 * the columns ow >= OW of each padded row. The tile's runs of real pixels (at most one
 * per output row it touches) are found once, with one division, for all mr rows: a
 * stem's reduction is short (27 steps for 3 channels x 3x3), and a division per row
 * and run had cost more than the tile's FMAs there. */
#define MAX_RUNS 50 /* np / lp + 2 runs, lp >= 1 */
static void store_tile(const ig_job *j, int64_t pan, int64_t t0, const float *buf) {
  const conv_p *p = j->p;
  const conv_igemm_geo *g = &j->g;
  int64_t ohw = (int64_t)p->oh * p->ow, qe = t0 + g->np < g->q ? t0 + g->np : g->q;
  int64_t src[MAX_RUNS], dst[MAX_RUNS], len[MAX_RUNS];
  int runs = 0;
  int64_t r = t0 / g->lp, c = t0 - r * g->lp;
  for (int64_t q = t0; q < qe && runs < MAX_RUNS; r++, c = 0) {
    int64_t row_end = (r + 1) * g->lp, stop = row_end < qe ? row_end : qe;
    int64_t last = stop - r * g->lp < p->ow ? stop - r * g->lp : p->ow; /* exclusive */
    if (c < last) {
      src[runs] = q - t0, dst[runs] = r * p->ow + c, len[runs] = last - c;
      runs++;
    }
    q = stop;
  }
  for (int i = 0; i < g->mr; i++) {
    int64_t oc = pan * g->mr + i;
    if (oc >= p->m)
      break;
    float bias = j->bias ? j->bias[oc] : 0.0f;
    for (int k = 0; k < runs; k++) {
      int64_t off = oc * ohw + dst[k];
      epi_seg(j->y + off, buf + i * g->np + src[k], j->res ? j->res + off : NULL, len[k],
              bias, p);
    }
  }
}

static bool in_register(nr_act a) {
  return a == NR_ACT_NONE || a == NR_ACT_RELU || a == NR_ACT_CLIP || a == NR_ACT_LEAKY_RELU;
}

/* Lanes [a, b) of 16, clamped. */
static __mmask16 lanes(int64_t a, int64_t b) {
  a = a < 0 ? 0 : a > 16 ? 16 : a;
  b = b < 0 ? 0 : b > 16 ? 16 : b;
  return b <= a ? 0 : (__mmask16)(((1u << b) - 1) & ~((1u << a) - 1));
}

/* o's places for the tile of panel pan at padded pixels [t0, t0 + np), lp >= 16. */
static void direct_place(const ig_job *j, int64_t pan, int64_t t0, ig_out *o) {
  const conv_p *p = j->p;
  int64_t lp = j->g.lp, ow = p->ow, oh = p->oh, r = t0 / lp;
  int64_t oc = pan * j->g.mr, left = p->m - oc;
  o->rows = left < j->g.mr ? (int)left : j->g.mr;
  o->y = j->y + oc * o->ohw;
  o->res = j->res ? j->res + oc * o->ohw : NULL;
  o->bias = j->bias ? j->bias + oc : NULL;
  for (int v = 0; v * 16 < j->g.np; v++) {
    int64_t q0 = t0 + 16 * v;
    while (q0 >= (r + 1) * lp)
      r++;
    int64_t c0 = q0 - r * lp, split = lp - c0; /* lanes >= split are in row r + 1 */
    o->m0[v] = r < oh ? lanes(0, split < ow - c0 ? split : ow - c0) : 0;
    o->m1[v] = r + 1 < oh ? lanes(split, split + ow) : 0;
    o->d0[v] = r * ow + c0;
    o->d1[v] = (r + 1) * ow + c0 - lp;
  }
}

/* Work items run block by block: a block is tpb consecutive pixel tiles, walked panel
 * by panel (mr output channels), tile by tile within the panel. Consecutive items
 * share the panel, so W's panel is reused from L1/L2; the block's share of the padded
 * copy (under BLOCK_BYTES) stays in L2 across the panels, where walking every panel
 * over the whole copy re-read it from L3 once per panel when the copy outgrows L2
 * (a stride-2 layer's copy is 4x its output: 1.9 MB at 128ch 56->28). (Walking the
 * panels of one tile first, to keep the tile's inputs in L1 instead, measured no
 * faster on resnet18's 56x56 and 28x28 layers.) */
static void tile_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ig_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  float buf[12 * 32] __attribute__((aligned(64)));
  _Static_assert(12 * 32 == 8 * 48, "both tiles fill the same buffer");
  int64_t wpan = (int64_t)j->g.mr * j->taps * p->c, per_blk = j->npan * j->tpb;
  /* the epilogue in the registers, written straight to Y, where the activation is one
   * of epi_seg's and a vector spans at most two rows: no tile buffer, no second pass
   * over it (a stem's reduction is 27 to 147 steps; the pass had cost about a tenth
   * of squeezenet's stem, 0.46-0.50 -> 0.42-0.45 ms, nr_conv_bench) */
  bool direct = j->g.lp >= 16 && in_register((nr_act)p->act);
  ig_out o = {.ohw = (int64_t)p->oh * p->ow, .act = (nr_act)p->act, .act_a = p->act_a,
              .act_b = p->act_b};
  for (int64_t i = begin; i < end; i++) {
    int64_t blk = i / per_blk, r = i - blk * per_blk;
    int64_t nt = j->ntq - blk * j->tpb < j->tpb ? j->ntq - blk * j->tpb : j->tpb;
    int64_t pan = r / nt, t0 = (blk * j->tpb + r % nt) * j->g.np;
    if (direct)
      direct_place(j, pan, t0, &o);
    const float *w = j->w + pan * wpan, *x = j->xp + t0;
    if (j->g.mr == 12)
      tile_12x32(w, x, j->g.cs, j->toff, j->taps, p->c, buf, direct ? &o : NULL, j->pft);
    else
      tile_8x48(w, x, j->g.cs, j->toff, j->taps, p->c, buf, direct ? &o : NULL, j->pft);
    if (!direct)
      store_tile(j, pan, t0, buf);
  }
}

/* Tiles per block: the most whose inputs (np padded pixels' rows in each of the
 * sh * sw phase planes of every channel, plus the window's extra rows) fit in
 * BLOCK_BYTES, under half the 1.25 MB L2 so W's panels fit beside them (resnet50's
 * 128ch 56->28 stride-2 3x3, nr_conv_bench: no blocking 2.43 ms, 1 MB 1.95, 512 KB
 * 2.01, 256 KB 1.93; stride-1 layers, whose copies fit L2 anyway, unchanged). */
#define BLOCK_BYTES (512 << 10)
static int64_t block_tiles(const conv_p *p, const conv_igemm_geo *g, int64_t ntq) {
  int64_t budget = BLOCK_BYTES;
  int64_t halo = (int64_t)(p->kh - 1) * p->dh / p->sh * g->lp;
  int64_t per_tile = (int64_t)p->c * p->sh * p->sw * g->np * 4;
  int64_t fixed = (int64_t)p->c * p->sh * p->sw * halo * 4;
  int64_t t = per_tile > 0 && budget > fixed ? (budget - fixed) / per_tile : 1;
  return t < 1 ? 1 : t > ntq ? ntq : t;
}

nr_status nr_conv_igemm__avx512_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  ig_job j = {.p = &q, .w = a->packed, .bias = q.has_bias ? a->in[2] : NULL,
              .xp = (float *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63)};
  nr_conv_igemm_geo(&q, &j.g);
  j.taps = q.kh * q.kw;
  for (int kh = 0; kh < q.kh; kh++)
    for (int kw = 0; kw < q.kw; kw++) {
      int64_t dy = (int64_t)kh * q.dh, dx = (int64_t)kw * q.dw;
      int64_t phase = (dy % q.sh) * q.sw + dx % q.sw;
      j.toff[kh * q.kw + kw] = phase * j.g.pp + (dy / q.sh) * j.g.lp + dx / q.sw;
      if (phase < 64)
        j.phases |= 1ull << phase;
    }
  j.ntq = (j.g.q + j.g.np - 1) / j.g.np;
  j.npan = (q.m + j.g.mr - 1) / j.g.mr;
  j.tpb = block_tiles(&q, &j.g, j.ntq);
  for (int t = 0; t < j.taps; t++) { /* taps within a line of an earlier one: none */
    j.pft[t] = 1;
    for (int u = 0; u < t; u++)
      if (j.toff[t] - j.toff[u] < 16 && j.toff[u] - j.toff[t] < 16)
        j.pft[t] = 0;
  }
  int64_t npan = j.npan, ohw = (int64_t)q.oh * q.ow;
  int threads = nr_conv_threads(a);
  /* planes per chunk of the copy: at least 4096 floats each */
  int64_t pad_grain = j.g.pp >= 4096 ? 1 : (4096 + j.g.pp - 1) / j.g.pp;
  for (int64_t n = 0; n < q.n; n++) {
    j.x = (const float *)a->in[0] + n * (int64_t)q.c * q.h * q.w;
    j.y = (float *)a->out[0] + n * q.m * ohw;
    j.res = res ? res + n * q.m * ohw : NULL;
    nr_parallel_for(a->pool, q.c * q.sh * q.sw, pad_grain, threads, pad_task, &j);
    nr_parallel_for(a->pool, npan * j.ntq, 1, threads, tile_task, &j);
  }
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
