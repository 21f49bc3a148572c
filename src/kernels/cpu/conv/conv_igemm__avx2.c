/* conv_igemm__avx2.c - nr_f32_conv_igemm__avx2: PLAIN group-1 convolution as an implicit
 * GEMM with AVX2 register tiles, no column matrix. Compiled with -mavx2 -mfma; called
 * only after nr_cpu_isa() reported NR_ISA_AVX2.
 *
 * The AVX2 counterpart of nr_f32_conv_igemm__avx512 on the same data: the padded,
 * stride-phase-split copy of each image (nr_conv_igemm_geo in conv_internal.h), W
 * packed by nr_conv_pack_igemm as [panels][C][taps][mr], and the same work order
 * (blocks of pixel tiles whose share of the copy stays in L2, every panel over one
 * block before the next). Only the register tile differs: with 16 ymm registers it is
 * 6 output channels x 16 padded pixels (12 accumulators, 2 vector loads and 6
 * broadcasts per 12 FMAs) or 4 x 24 (12 accumulators, 3 loads and 4 broadcasts),
 * whichever pads M and the padded pixels less (prepare() decides). On small planes
 * (nr_f32_conv_sp__avx2, tile NR_CONV_IGEMM_TILE_SP16) the tile turns around: 16
 * output channels (two vectors of W) x 6 real output pixels, each broadcast from the
 * copy, so a 7x7 plane computes 49 pixels instead of igemm's 64 padded ones (8-wide
 * rows of 2 x 8 lanes, of which 7 exist); its sums are written to Y pixel by pixel.
 * A grouped convolution is its groups' group-1 convolutions over consecutive channels
 * of X, W and Y: one padded copy of every channel, each group's W packed after the
 * previous group's, and the tasks of all groups in one parallel loop.
 *
 * Key decision: the finished tile goes through a buffer in L1 and its real pixels (at
 * most one run per output row it touches) are written with the epilogue (bias,
 * residual, activation) in vectors, rather than straight from the registers through
 * masked stores as the AVX-512 kernel does: vmaskmovps stores are microcoded on the
 * AMD cores this kernel is for, and a tile's reduction (C x taps steps, 576 at 64
 * channels x 3x3) dwarfs one pass over 96 floats in L1. The L2 block is 256 KiB, half
 * of a Zen 3 core's 512 KiB L2, so W's panel fits beside it. */
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <string.h>

typedef struct ig2_job {
  const conv_p *p; /* the tile tasks': one group's convolution (group 1) */
  const conv_p *all; /* the node's (the padded copy covers all its channels) */
  int64_t groups, wgrp; /* groups; floats of packed W per group */
  conv_igemm_geo g;
  const float *x, *w, *bias, *res;
  float *xp, *y;
  int64_t ntq, tpb, npan; /* pixel tiles per panel, per block; panels */
  int64_t kc;             /* input channels per pass (see tile_task) */
  int taps;
  uint64_t phases;                           /* bit a * sw + b: a tap reads plane (a, b) */
  int64_t toff[NR_CONV_IGEMM_MAX_TAPS];      /* per tap: phase plane + row/column shift */
  unsigned char pft[NR_CONV_IGEMM_MAX_TAPS]; /* tap t prefetches (see tile_body) */
} ig2_job;

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* ---- the padded copy ------------------------------------------------------------ */

/* dst[0, n) = src[0], src[2], ..., src[2n - 2], reading no float past src[2n - 2]:
 * 8 outputs per two loads and a shuffle while a whole 16-float window fits. */
static void even_floats(float *dst, const float *src, int64_t n) {
  int64_t k = 0;
  for (; k + 8 < n; k += 8) {
    __m256 a = _mm256_loadu_ps(src + 2 * k), b = _mm256_loadu_ps(src + 2 * k + 8);
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    _mm256_storeu_ps(dst + k,
                     _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
  }
  for (; k < n; k++)
    dst[k] = src[2 * k];
}

/* Phase plane (a, b) of one channel: rq rows of lp columns, then zero slack. */
static void fill_phase(const conv_p *p, const conv_igemm_geo *g, const float *x, int a,
                       int b, float *dst) {
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
      even_floats(row + c0, xr, c1 - c0);
    else
      for (int64_t c = c0; c < c1; c++)
        row[c] = xr[(c - c0) * p->sw];
    memset(row + c1, 0, sizeof(float) * (size_t)(g->lp - c1));
  }
  memset(dst + g->rq * g->lp, 0, sizeof(float) * (size_t)(g->pp - g->rq * g->lp));
}

/* Items are (channel, phase plane) pairs, as in the AVX-512 kernel. */
static void pad_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ig2_job *j = arg;
  const conv_p *p = j->all;
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

/* Channels ahead whose plane is prefetched (a jump the hardware prefetchers do not
 * follow); over the last PF_CH channels, the next tile's first ones. */
#define PF_CH 2

/* out[MR][NV*8] (+)= sum over channels ci and taps t of w[ci][t][MR] x x[ci*cs +
 * toff[t]]: from zero when first, else onto out's partial sums. Always inlined with
 * constant MR, NV, so the accumulators are registers; the tap loop is not unrolled. */
static inline __attribute__((always_inline)) void
tile_body(const int MR, const int NV, const float *restrict w, const float *restrict x,
          int64_t cs, const int64_t *toff, int taps, int64_t c, float *restrict out,
          const unsigned char *pft, bool first) {
  __m256 acc[6][3];
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      acc[i][v] = first ? _mm256_setzero_ps() : _mm256_load_ps(out + (i * NV + v) * 8);
  for (int64_t ci = 0; ci < c; ci++, x += cs) {
    const int64_t pf = ci + PF_CH < c ? PF_CH * cs : 8 * NV + (PF_CH - c) * cs;
#pragma GCC unroll 1
    for (int t = 0; t < taps; t++, w += MR) {
      const float *xb = x + toff[t];
      __m256 bv[3];
      if (pft[t])
        for (int v = 0; v <= NV * 8 / 16; v++)
          _mm_prefetch((const char *)(xb + pf + 16 * v), _MM_HINT_T0);
#pragma GCC unroll 3
      for (int v = 0; v < NV; v++)
        bv[v] = _mm256_loadu_ps(xb + 8 * v);
#pragma GCC unroll 6
      for (int i = 0; i < MR; i++) {
        __m256 av = _mm256_broadcast_ss(w + i);
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
          acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      _mm256_store_ps(out + (i * NV + v) * 8, acc[i][v]);
}

static void tile_6x16(const float *w, const float *x, int64_t cs, const int64_t *toff,
                      int taps, int64_t c, float *out, const unsigned char *pft,
                      bool first) {
  tile_body(6, 2, w, x, cs, toff, taps, c, out, pft, first);
}
/* sp: out[NP][16] (+)= sum over ci, t of w[ci][t][16] x x[ci*cs + toff[t] + po[i]] for
 * the tile's NP real pixels at padded offsets po; from zero when first. */
static inline __attribute__((always_inline)) void
sp_body(const int NP, const float *restrict w, const float *restrict x, int64_t cs,
        const int64_t *toff, int taps, int64_t c, const int64_t *po, float *restrict out,
        bool first) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (int i = 0; i < NP; i++)
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++)
      acc[i][v] = first ? _mm256_setzero_ps() : _mm256_load_ps(out + i * 16 + 8 * v);
  for (int64_t ci = 0; ci < c; ci++, x += cs)
#pragma GCC unroll 1
    for (int t = 0; t < taps; t++, w += 16) {
      const float *xb = x + toff[t];
      __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 6
      for (int i = 0; i < NP; i++) {
        __m256 b = _mm256_broadcast_ss(xb + po[i]);
        acc[i][0] = _mm256_fmadd_ps(w0, b, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(w1, b, acc[i][1]);
      }
    }
#pragma GCC unroll 6
  for (int i = 0; i < NP; i++)
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++)
      _mm256_store_ps(out + i * 16 + 8 * v, acc[i][v]);
}
typedef void (*sp_fn)(const float *, const float *, int64_t, const int64_t *, int, int64_t,
                      const int64_t *, float *, bool);
#define SP_TILE(NP)                                                                      \
  static void sp_##NP(const float *w, const float *x, int64_t cs, const int64_t *toff,   \
                      int taps, int64_t c, const int64_t *po, float *out, bool first) {   \
    sp_body(NP, w, x, cs, toff, taps, c, po, out, first);                                 \
  }
SP_TILE(1) SP_TILE(2) SP_TILE(3) SP_TILE(4) SP_TILE(5) SP_TILE(6)
static const sp_fn sp_tiles[7] = {NULL, sp_1, sp_2, sp_3, sp_4, sp_5, sp_6};
#define SP_NP 6

static void tile_4x24(const float *w, const float *x, int64_t cs, const int64_t *toff,
                      int taps, int64_t c, float *out, const unsigned char *pft,
                      bool first) {
  tile_body(4, 3, w, x, cs, toff, taps, c, out, pft, first);
}

/* ---- the epilogue --------------------------------------------------------------- */

static bool in_register(nr_act a) {
  return a == NR_ACT_NONE || a == NR_ACT_RELU || a == NR_ACT_CLIP || a == NR_ACT_LEAKY_RELU;
}

/* act(v): nr_conv_epilogue's comparisons, so NaN gives the same result. */
static inline __m256 act_vec(nr_act act, __m256 v, __m256 lo, __m256 hi) {
  __m256 zero = _mm256_setzero_ps();
  if (act == NR_ACT_RELU)
    return _mm256_max_ps(v, zero);
  if (act == NR_ACT_CLIP)
    return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
  if (act == NR_ACT_LEAKY_RELU)
    return _mm256_blendv_ps(_mm256_mul_ps(v, lo), v, _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
  return v;
}

/* dst[0, len) = act(src + (bias + r)), nr_conv_epilogue's order of operations; the
 * activations other than the in-register ones follow through nr_conv_epilogue. */
static void epi_seg(float *dst, const float *src, const float *r, int64_t len, float bias,
                    const conv_p *p) {
  nr_act act = (nr_act)p->act;
  bool reg = in_register(act);
  __m256 vb = _mm256_set1_ps(bias), lo = _mm256_set1_ps(p->act_a), hi = _mm256_set1_ps(p->act_b);
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    __m256 add = r ? _mm256_add_ps(vb, _mm256_loadu_ps(r + i)) : vb;
    __m256 v = _mm256_add_ps(_mm256_loadu_ps(src + i), add);
    _mm256_storeu_ps(dst + i, reg ? act_vec(act, v, lo, hi) : v);
  }
  for (; i < len; i++) {
    float v = src[i] + (r ? bias + r[i] : bias);
    if (reg && act == NR_ACT_RELU)
      v = v > 0.0f ? v : 0.0f;
    else if (reg && act == NR_ACT_CLIP)
      v = v < p->act_a ? p->act_a : v > p->act_b ? p->act_b : v;
    else if (reg && act == NR_ACT_LEAKY_RELU)
      v = v >= 0.0f ? v : p->act_a * v;
    dst[i] = v;
  }
  if (!reg)
    nr_conv_epilogue(dst, NULL, len, 0.0f, p);
}

/* Rows of the finished tile (panel pan, padded pixels [t0, t0 + np)) into Y, dropping
 * the columns ow >= OW of each padded row; the runs are found once for all mr rows. */
#define MAX_RUNS 26 /* np / lp + 2 runs, np <= 24, lp >= 1 */
static void store_tile(const ig2_job *j, int64_t pan, int64_t t0, const float *buf) {
  const conv_p *p = j->p;
  const conv_igemm_geo *g = &j->g;
  int64_t ohw = (int64_t)p->oh * p->ow, qe = t0 + g->np < g->q ? t0 + g->np : g->q;
  int64_t src[MAX_RUNS], dst[MAX_RUNS], len[MAX_RUNS];
  int runs = 0;
  int64_t r = t0 / g->lp, c = t0 - r * g->lp;
  for (int64_t q = t0; q < qe && runs < MAX_RUNS; r++, c = 0) {
    int64_t row_end = (r + 1) * g->lp, stop = row_end < qe ? row_end : qe;
    int64_t last = stop - r * g->lp < p->ow ? stop - r * g->lp : p->ow;
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

/* sp: the finished tile (panel pan, real pixels [px0, px0 + np)) into Y: per output
 * channel one run of np pixels, through epi_seg in place. */
static void store_sp(const ig2_job *j, int64_t pan, int64_t px0, int np, const float *buf) {
  const conv_p *p = j->p;
  int64_t ohw = (int64_t)p->oh * p->ow;
  for (int l = 0; l < 16; l++) {
    int64_t oc = pan * 16 + l;
    if (oc >= p->m)
      break;
    float *y = j->y + oc * ohw + px0;
    for (int i = 0; i < np; i++)
      y[i] = buf[i * 16 + l];
    epi_seg(y, y, j->res ? j->res + oc * ohw + px0 : NULL, np,
            j->bias ? j->bias[oc] : 0.0f, p);
  }
}

/* sp: pixel tile t's real pixels (from *px0) and their padded offsets. */
static int sp_pixels(const ig2_job *j, int64_t t, int64_t *px0, int64_t *po) {
  const conv_p *p = j->p;
  int64_t ohw = (int64_t)p->oh * p->ow;
  *px0 = t * SP_NP;
  int np = (int)min64(SP_NP, ohw - *px0);
  for (int i = 0; i < np; i++) {
    int64_t k = *px0 + i;
    po[i] = k / p->ow * j->g.lp + k % p->ow;
  }
  return np;
}

/* Most tiles of a block when C takes more than one pass: their partial sums wait in a
 * buffer on the stack (24 KiB) between passes. */
#define TILE_FLOATS (6 * 16)
#define MAX_BLOCK_TILES 64

/* The job of group g: its packed W, its channels of the padded copy, of Y and of the
 * residual, its biases (groups run one after another in the task index). */
static void group_job(const ig2_job *all, int64_t g, ig2_job *j) {
  *j = *all;
  int64_t ohw = (int64_t)all->p->oh * all->p->ow, mg = all->p->m;
  j->w += g * all->wgrp;
  j->xp += g * all->p->c * all->g.cs;
  j->y += g * mg * ohw;
  j->res = all->res ? all->res + g * mg * ohw : NULL;
  j->bias = all->bias ? all->bias + g * mg : NULL;
}

/* Work item: one panel (mr output channels) over one block of tpb consecutive pixel
 * tiles. Input channels run in passes of kc outside, the block's tiles inside, so one
 * pass's piece of the panel's W (kc x taps x mr floats, at most 16 KiB) stays in L1
 * across the tiles; in one pass over all of C (C x 9 x 6 floats: 110 KiB at 512
 * channels) every tile re-read W from L2, 4 bytes per FMA, and resnet's 512-channel
 * 7x7 layers ran at a quarter of the peak. */
static void tile_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ig2_job *j0 = arg, *j = j0;
  const conv_p *p = j0->p;
  (void)thread;
  float buf[MAX_BLOCK_TILES * TILE_FLOATS] __attribute__((aligned(32)));
  _Static_assert(6 * 16 == 4 * 24, "both tiles fill the same buffer");
  int64_t wpan = (int64_t)j0->g.mr * j0->taps * p->c;
  bool passes = j0->kc < p->c;
  int64_t per_group = j0->npan * ((j0->ntq + j0->tpb - 1) / j0->tpb), cur = -1;
  ig2_job gj;
  for (int64_t i0 = begin; i0 < end; i0++) {
    int64_t grp = i0 / per_group, i = i0 - grp * per_group;
    if (j0->groups > 1 && grp != cur) {
      group_job(j0, grp, &gj);
      j = &gj;
      cur = grp;
    }
    int64_t blk = i / j->npan, pan = i - blk * j->npan;
    int64_t nt = j->ntq - blk * j->tpb < j->tpb ? j->ntq - blk * j->tpb : j->tpb;
    for (int64_t k0 = 0; k0 < p->c; k0 += j->kc) {
      int64_t kb = min64(j->kc, p->c - k0);
      const float *w = j->w + pan * wpan + k0 * j->taps * j->g.mr;
      for (int64_t t = 0; t < nt; t++) {
        int64_t t0 = (blk * j->tpb + t) * j->g.np;
        const float *x = j->xp + k0 * j->g.cs + t0;
        float *out = buf + (passes ? t * TILE_FLOATS : 0);
        if (j->g.mr == 16) {
          int64_t px0, po[SP_NP];
          int np = sp_pixels(j, blk * j->tpb + t, &px0, po);
          sp_tiles[np](w, j->xp + k0 * j->g.cs, j->g.cs, j->toff, j->taps, kb, po, out,
                       k0 == 0);
          if (k0 + kb >= p->c)
            store_sp(j, pan, px0, np, out);
          continue;
        }
        if (j->g.mr == 6)
          tile_6x16(w, x, j->g.cs, j->toff, j->taps, kb, out, j->pft, k0 == 0);
        else
          tile_4x24(w, x, j->g.cs, j->toff, j->taps, kb, out, j->pft, k0 == 0);
        if (k0 + kb >= p->c)
          store_tile(j, pan, t0, out);
      }
    }
  }
}

/* Input channels per pass: the most whose piece of a W panel fits W_L1_BYTES, cut into
 * equal passes. */
#define W_L1_BYTES (16 << 10)
static int64_t pass_channels(const conv_p *p, const conv_igemm_geo *g, int taps) {
  int64_t max = W_L1_BYTES / ((int64_t)taps * g->mr * 4);
  max = max < 8 ? 8 : max;
  int64_t n = (p->c + max - 1) / max;
  return (p->c + n - 1) / n;
}

/* Tiles per block: the most whose inputs (every phase plane's rows under the tiles,
 * plus the window's extra rows) fit in BLOCK_BYTES, half of a Zen 3 core's L2. */
#define BLOCK_BYTES (256 << 10)
static int64_t block_tiles(const conv_p *p, const conv_igemm_geo *g, int64_t ntq) {
  int64_t halo = (int64_t)(p->kh - 1) * p->dh / p->sh * g->lp;
  int64_t per_tile = (int64_t)p->c * p->sh * p->sw * g->np * 4;
  int64_t fixed = (int64_t)p->c * p->sh * p->sw * halo * 4;
  int64_t t = per_tile > 0 && BLOCK_BYTES > fixed ? (BLOCK_BYTES - fixed) / per_tile : 1;
  t = t < 1 ? 1 : t > ntq ? ntq : t;
  return t > MAX_BLOCK_TILES ? MAX_BLOCK_TILES : t;
}

/* Per tap: its phase plane and shift in the copy; which taps prefetch (the first of
 * each run of taps less than a line apart). */
static void plan_taps(ig2_job *j, const conv_p *q) {
  j->taps = q->kh * q->kw;
  for (int kh = 0; kh < q->kh; kh++)
    for (int kw = 0; kw < q->kw; kw++) {
      int64_t dy = (int64_t)kh * q->dh, dx = (int64_t)kw * q->dw;
      int64_t phase = (dy % q->sh) * q->sw + dx % q->sw;
      j->toff[kh * q->kw + kw] = phase * j->g.pp + (dy / q->sh) * j->g.lp + dx / q->sw;
      if (phase < 64)
        j->phases |= 1ull << phase;
    }
  for (int t = 0; t < j->taps; t++) {
    j->pft[t] = 1;
    for (int u = 0; u < t; u++)
      if (j->toff[t] - j->toff[u] < 16 && j->toff[u] - j->toff[t] < 16)
        j->pft[t] = 0;
  }
}

nr_status nr_conv_igemm__avx2_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  /* a grouped convolution is q.group group-1 ones over consecutive channels */
  conv_p qg = q;
  qg.c = q.c / q.group, qg.m = q.m / q.group, qg.group = 1;
  ig2_job j = {.p = &qg, .all = &q, .groups = q.group, .w = a->packed,
               .bias = q.has_bias ? a->in[2] : NULL,
               .xp = (float *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63)};
  nr_conv_igemm_geo(&q, &j.g);
  plan_taps(&j, &q);
  bool sp = j.g.mr == 16;
  j.ntq = sp ? ((int64_t)q.oh * q.ow + SP_NP - 1) / SP_NP : (j.g.q + j.g.np - 1) / j.g.np;
  j.npan = (qg.m + j.g.mr - 1) / j.g.mr;
  j.wgrp = j.npan * j.g.mr * j.taps * qg.c;
  j.tpb = sp ? min64(j.ntq, MAX_BLOCK_TILES) : block_tiles(&qg, &j.g, j.ntq);
  j.kc = pass_channels(&qg, &j.g, j.taps);
  int64_t ohw = (int64_t)q.oh * q.ow;
  int threads = nr_conv_threads(a);
  int64_t pad_grain = j.g.pp >= 4096 ? 1 : (4096 + j.g.pp - 1) / j.g.pp;
  for (int64_t n = 0; n < q.n; n++) {
    j.x = (const float *)a->in[0] + n * (int64_t)q.c * q.h * q.w;
    j.y = (float *)a->out[0] + n * q.m * ohw;
    j.res = res ? res + n * q.m * ohw : NULL;
    nr_parallel_for(a->pool, q.c * q.sh * q.sw, pad_grain, threads, pad_task, &j);
    nr_parallel_for(a->pool, q.group * j.npan * ((j.ntq + j.tpb - 1) / j.tpb), 1, threads,
                    tile_task, &j);
  }
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
