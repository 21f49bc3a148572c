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
 * Key decision: the tile is 12 x 32 (24 zmm accumulators, 2 vector loads and 12
 * broadcasts per 24 FMAs, as the GEMM's 12x32 micro-kernel) or 8 x 48 (3 loads and 8
 * broadcasts), whichever pads M and the padded pixels less (prepare() decides, by
 * the padded work); W's panel for one tile row (at most mr x 64 taps x C floats) is
 * reused from L2 across the pixel tiles of a thread's chunk. */
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <string.h>

typedef struct ig_job {
  const conv_p *p;
  conv_igemm_geo g;
  const float *x, *w, *bias, *res;
  float *xp, *y;
  int64_t ntq; /* pixel tiles per panel */
  int taps;
  uint64_t phases; /* bit a * sw + b: some tap reads phase plane (a, b) */
  int64_t toff[NR_CONV_IGEMM_MAX_TAPS]; /* per tap: phase plane + row/column shift */
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
    else
      for (int64_t c = c0; c < c1; c++)
        row[c] = xr[(c - c0) * p->sw];
    memset(row + c1, 0, sizeof(float) * (size_t)(g->lp - c1));
  }
  memset(dst + g->rq * g->lp, 0, sizeof(float) * (size_t)(g->pp - g->rq * g->lp));
}

static void pad_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ig_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  for (int64_t ci = begin; ci < end; ci++)
    for (int a = 0; a < p->sh; a++)
      for (int b = 0; b < p->sw; b++)
        if (j->phases >> (a * p->sw + b) & 1)
          fill_phase(p, &j->g, j->x + ci * (int64_t)p->h * p->w, a, b,
                     j->xp + ci * j->g.cs + (a * p->sw + b) * j->g.pp);
}

/* ---- the register tile ---------------------------------------------------------- */

/* The reduction runs channel by channel, all taps of a channel in a row: the taps
 * read the same 2-3 rows of one plane (L1 hits after the first), where taps outside
 * and channels inside read a new plane, cs floats on, every step (measured up to 15%
 * slower on resnet's stem, stride-2 and 28x28 layers). The plane PF_CH channels ahead
 * is prefetched, a jump the hardware prefetchers do not follow (without: 5-25% slower
 * on resnet's 3x3 layers, nr_conv_bench). */
#define PF_CH 2

/* out[MR][NV*16] = sum over channels ci and taps t of w[ci][t][MR] x x[ci*cs + toff[t]].
 * Always inlined with constant MR, NV, so the accumulators are registers. The tap loop
 * is not unrolled (see ukernel_avx512_template.h: unrolling spills with 24+ live
 * accumulators). */
static inline __attribute__((always_inline)) void
tile_body(const int MR, const int NV, const float *restrict w, const float *restrict x,
          int64_t cs, const int64_t *toff, int taps, int64_t c, float *restrict out) {
  __m512 acc[12][3];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      acc[i][v] = _mm512_setzero_ps();
  for (int64_t ci = 0; ci < c; ci++, x += cs) {
#pragma GCC unroll 1
    for (int t = 0; t < taps; t++, w += MR) {
      const float *xb = x + toff[t];
      __m512 bv[3];
#pragma GCC unroll 3
      for (int v = 0; v < NV; v++) {
        _mm_prefetch((const char *)(xb + PF_CH * cs + 16 * v), _MM_HINT_T0);
        bv[v] = _mm512_loadu_ps(xb + 16 * v);
      }
#pragma GCC unroll 12
      for (int i = 0; i < MR; i++) {
        __m512 av = _mm512_set1_ps(w[i]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
          acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      _mm512_store_ps(out + (i * NV + v) * 16, acc[i][v]);
}

static void tile_12x32(const float *w, const float *x, int64_t cs, const int64_t *toff,
                       int taps, int64_t c, float *out) {
  tile_body(12, 2, w, x, cs, toff, taps, c, out);
}
static void tile_8x48(const float *w, const float *x, int64_t cs, const int64_t *toff,
                      int taps, int64_t c, float *out) {
  tile_body(8, 3, w, x, cs, toff, taps, c, out);
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

/* Work item i: panel i / ntq (mr output channels), pixel tile i % ntq; consecutive
 * items share the panel, so a thread's chunk reuses W's panel from cache. (Walking
 * the panels of one tile first, to keep the tile's inputs in L1 instead, measured no
 * faster on resnet18's 56x56 and 28x28 layers.) */
static void tile_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ig_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  float buf[12 * 32] __attribute__((aligned(64)));
  _Static_assert(12 * 32 == 8 * 48, "both tiles fill the same buffer");
  int64_t wpan = (int64_t)j->g.mr * j->taps * p->c;
  for (int64_t i = begin; i < end; i++) {
    int64_t pan = i / j->ntq, t0 = (i % j->ntq) * j->g.np;
    const float *w = j->w + pan * wpan, *x = j->xp + t0;
    if (j->g.mr == 12)
      tile_12x32(w, x, j->g.cs, j->toff, j->taps, p->c, buf);
    else
      tile_8x48(w, x, j->g.cs, j->toff, j->taps, p->c, buf);
    store_tile(j, pan, t0, buf);
  }
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
  int64_t npan = (q.m + j.g.mr - 1) / j.g.mr, ohw = (int64_t)q.oh * q.ow;
  int threads = nr_conv_threads(a);
  for (int64_t n = 0; n < q.n; n++) {
    j.x = (const float *)a->in[0] + n * (int64_t)q.c * q.h * q.w;
    j.y = (float *)a->out[0] + n * q.m * ohw;
    j.res = res ? res + n * q.m * ohw : NULL;
    nr_parallel_for(a->pool, q.c, 4, threads, pad_task, &j);
    nr_parallel_for(a->pool, npan * j.ntq, 1, threads, tile_task, &j);
  }
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
