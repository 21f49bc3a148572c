/* conv_sp__avx512.c - nr_f32_conv_sp__avx512: PLAIN group-1 convolutions (3x3 and other
 * multi-tap windows, any stride) whose output planes are small (7x7, 13x13, 14x14 and the
 * like) with many channels. Compiled with the AVX-512 flags; called only after
 * nr_cpu_isa() reported NR_ISA_AVX512.
 *
 * igemm (conv_igemm__avx512.c) vectorises over output pixels, counted along the padded
 * row pitch: a 7x7 output is 56 padded pixels, which its 32-pixel tiles cover with 64
 * columns of which 49 are kept. This kernel vectorises over output channels instead: a
 * register tile is 32 output channels (two zmm) x up to 14 output pixels, and each step
 * of the reduction (one input channel, one tap) loads the tile's two weight vectors and
 * broadcasts each of its pixels' inputs once, so every FMA computes a pixel that exists.
 * The pixels of a tile are one row chunk (rows wider than 7 are cut into ceil(OW / 14)
 * near-equal chunks: 13 or 14 pixels for 13x13 and 14x14 planes) or two whole rows of
 * at most 7 (a 7x7 plane is 4 tiles: 3 of 2 x 7 pixels and one of 7). The inputs are
 * read from a zero-padded, stride-phase-split copy of each channel laid out as igemm's
 * (nr_conv_igemm_geo), so a tap's input for pixel (oh, ow) is one float at a fixed
 * offset from oh * lp + ow, whatever the stride, padding or dilation.
 *
 * Key decision: W is packed at build as [ceil(M / 32) panels][C][taps][32] and the
 * reduction over C runs in passes of p->gemm.kc channels, all tiles of a panel per pass,
 * so one pass's weights (kc x taps x 128 bytes, sized to stay in L2) are reused by every
 * tile of the panel instead of streaming 1.2 MB per tile for a 512-channel layer; the
 * tiles' partial sums wait in a per-thread buffer between passes (28 vectors a tile,
 * stored and reloaded once per pass), and each pass's tiles prefetch the next pass's
 * weights into L2, so in a model (weights cold) they stream in under the FMAs. The
 * epilogue (bias, residual, ReLU / Clip / LeakyReLU) runs on the accumulators and
 * writes them to the NCHW output with one 16-lane scatter per accumulator (stride: the
 * plane size), so Y is written once. */
#include "kernels/cpu/conv/conv_avx512.h"
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <string.h>

/* One tile's call: the reduction over one pass and, after the last pass, the epilogue. */
typedef struct sp_tile {
  const float *w;        /* W at (panel, first channel of the pass) */
  const float *x;        /* the padded copy at (first channel, the tile's first pixel) */
  const int64_t *toff;   /* per tap: offset in the copy */
  const float *pfw;      /* this tile's share of the next pass's W, prefetched into L2 */
  int64_t pinc;          /* floats the prefetch moves on per step */
  int64_t cs, xrow;      /* floats between channels, between the tile's two rows */
  int64_t kb;            /* channels of this pass */
  int taps;
  bool first, last;      /* first pass (accumulators start at zero) / last (epilogue) */
  float *part;           /* the tile's partial sums between passes */
  float *y;              /* Y at (panel's first channel, the tile's first pixel) */
  const float *res;      /* R at the same place, or NULL */
  const float *bias;     /* bias of the panel's first channel, or NULL */
  int64_t yrow, ch16;    /* floats between the tile's rows in Y; 16 channels in Y */
  __m512i idx;           /* lane l: l * (OH * OW), the scatter's offsets */
  __mmask16 mask[2];     /* output channels of each vector that exist */
  nr_act act;            /* in-register activation: NONE, RELU, CLIP or LEAKY_RELU */
  float act_a, act_b;
} sp_tile;

typedef void (*sp_tile_fn)(const sp_tile *a);

/* The copy's channel PF_CH ahead is prefetched: a jump of cs floats per channel that
 * the hardware prefetchers do not follow (as in igemm). */
#define PF_CH 2

static inline __attribute__((always_inline)) __m512 act_vec(const sp_tile *a, __m512 v) {
  switch (a->act) {
  case NR_ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
  case NR_ACT_CLIP:
    return _mm512_min_ps(_mm512_set1_ps(a->act_b), _mm512_max_ps(_mm512_set1_ps(a->act_a), v));
  case NR_ACT_LEAKY_RELU:
    return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v,
                              _mm512_set1_ps(a->act_a));
  default: return v;
  }
}

/* acc[i][j] (output channels 16i.. of pixel j) = sum over the pass's channels and taps of
 * w[ci][t][16i..] * x[pixel j of tap t]. Pixels j < NA are the first row's, NA + j the
 * second row's (a->xrow floats further in the copy, a->yrow in Y). Always inlined with
 * constant NA, NB so the accumulators are registers (2 x 14 + 2 weights + 1 broadcast:
 * 31 of the 32 zmm). The tap loop is not unrolled (unrolling spills, as in igemm). */
static inline __attribute__((always_inline)) void sp_body(const int NA, const int NB,
                                                          const sp_tile *a) {
  __m512 acc[2][14];
  const int N = NA + NB;
  if (a->first) {
#pragma GCC unroll 14
    for (int j = 0; j < N; j++)
      acc[0][j] = acc[1][j] = _mm512_setzero_ps();
  } else {
#pragma GCC unroll 14
    for (int j = 0; j < N; j++) {
      acc[0][j] = _mm512_load_ps(a->part + 32 * j);
      acc[1][j] = _mm512_load_ps(a->part + 32 * j + 16);
    }
  }
  const float *restrict w = a->w, *restrict x = a->x;
  const int64_t cs = a->cs, xr = a->xrow;
  const int64_t *toff = a->toff;
  const int taps = a->taps;
  const float *pfw = a->pfw;
  const int64_t pinc = a->pinc;
#pragma GCC unroll 1
  for (int64_t ci = 0; ci < a->kb; ci++, x += cs) {
#pragma GCC unroll 1
    for (int t = 0; t < taps; t++, w += 32) {
      const float *xa = x + toff[t];
      _mm_prefetch((const char *)(xa + PF_CH * cs), _MM_HINT_T0);
      _mm_prefetch((const char *)pfw, _MM_HINT_T1);
      if (pinc > 16)
        _mm_prefetch((const char *)(pfw + 16), _MM_HINT_T1);
      pfw += pinc;
      if (NB)
        _mm_prefetch((const char *)(xa + xr + PF_CH * cs), _MM_HINT_T0);
      __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
#pragma GCC unroll 14
      for (int j = 0; j < NA; j++) {
        __m512 b = _mm512_set1_ps(xa[j]);
        acc[0][j] = _mm512_fmadd_ps(w0, b, acc[0][j]);
        acc[1][j] = _mm512_fmadd_ps(w1, b, acc[1][j]);
      }
#pragma GCC unroll 7
      for (int j = 0; j < NB; j++) {
        __m512 b = _mm512_set1_ps(xa[xr + j]);
        acc[0][NA + j] = _mm512_fmadd_ps(w0, b, acc[0][NA + j]);
        acc[1][NA + j] = _mm512_fmadd_ps(w1, b, acc[1][NA + j]);
      }
    }
  }
  if (!a->last) {
#pragma GCC unroll 14
    for (int j = 0; j < N; j++) {
      _mm512_store_ps(a->part + 32 * j, acc[0][j]);
      _mm512_store_ps(a->part + 32 * j + 16, acc[1][j]);
    }
    return;
  }
  __m512 vb[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++)
    vb[i] = a->bias ? _mm512_maskz_loadu_ps(a->mask[i], a->bias + 16 * i) : _mm512_setzero_ps();
#pragma GCC unroll 14
  for (int j = 0; j < N; j++) {
    int64_t q = j < NA ? j : a->yrow + (j - NA);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
      __mmask16 m = a->mask[i];
      if (!m)
        continue;
      __m512 v = _mm512_add_ps(acc[i][j], vb[i]);
      if (a->res)
        v = _mm512_add_ps(v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, a->idx,
                                                      a->res + i * a->ch16 + q, 4));
      v = act_vec(a, v);
      _mm512_mask_i32scatter_ps(a->y + i * a->ch16 + q, m, a->idx, v, 4);
    }
  }
}

/* The tile functions: one row chunk of NA pixels (1..14), or two rows of NA (1..7). */
#define SP_ONE(na)                                                                     \
  static void sp_1x##na(const sp_tile *a) { sp_body(na, 0, a); }
#define SP_TWO(na)                                                                     \
  static void sp_2x##na(const sp_tile *a) { sp_body(na, na, a); }
SP_ONE(1) SP_ONE(2) SP_ONE(3) SP_ONE(4) SP_ONE(5) SP_ONE(6) SP_ONE(7)
SP_ONE(8) SP_ONE(9) SP_ONE(10) SP_ONE(11) SP_ONE(12) SP_ONE(13) SP_ONE(14)
SP_TWO(1) SP_TWO(2) SP_TWO(3) SP_TWO(4) SP_TWO(5) SP_TWO(6) SP_TWO(7)
static const sp_tile_fn one_row[NR_CONV_SP_MAXPIX + 1] = {
    NULL, sp_1x1, sp_1x2, sp_1x3, sp_1x4, sp_1x5, sp_1x6, sp_1x7,
    sp_1x8, sp_1x9, sp_1x10, sp_1x11, sp_1x12, sp_1x13, sp_1x14};
static const sp_tile_fn two_rows[NR_CONV_SP_MAXPIX / 2 + 1] = {
    NULL, sp_2x1, sp_2x2, sp_2x3, sp_2x4, sp_2x5, sp_2x6, sp_2x7};

/* ---- the padded copy ---------------------------------------------------------------- */

typedef struct sp_job {
  const conv_p *p;
  conv_igemm_geo g;
  conv_sp_geo s;
  const float *x, *w, *bias, *res;
  float *xp, *y, *part;
  int64_t toff[NR_CONV_IGEMM_MAX_TAPS];
  int taps;
} sp_job;

/* Channel ci's sh * sw phase planes, zero where no input lands (igemm's layout: phase
 * (a, b), row r, column c holds input row r*sh + a - pt, column c*sw + b - pl). */
static void pad_channel(const conv_p *p, const conv_igemm_geo *g, const float *x, float *dst) {
  memset(dst, 0, sizeof(float) * (size_t)g->cs);
  for (int64_t ih = 0; ih < p->h; ih++) {
    int64_t rp = ih + p->pt, r = rp / p->sh;
    if (r >= g->rq)
      continue;
    const float *xr = x + ih * p->w;
    float *row = dst + (rp % p->sh) * p->sw * g->pp + r * g->lp;
    if (p->sw == 1) {
      int64_t n = p->w < g->lp - p->pl ? p->w : g->lp - p->pl;
      memcpy(row + p->pl, xr, sizeof(float) * (size_t)(n > 0 ? n : 0));
      continue;
    }
    for (int b = 0; b < p->sw; b++) { /* columns c*sw + b - pl of phase b */
      int64_t c = b >= p->pl ? 0 : (p->pl - b + p->sw - 1) / p->sw;
      float *ph = row + b * g->pp;
      int64_t iw = c * p->sw + b - p->pl;
      if (p->sw == 2 && iw < p->w) {
        int64_t n = (p->w - 1 - iw) / 2 + 1;
        nr_conv_even_floats(ph + c, xr + iw, n < g->lp - c ? n : g->lp - c);
        continue;
      }
      for (; c < g->lp && iw < p->w; c++, iw += p->sw)
        ph[c] = xr[iw];
    }
  }
}

static void pad_task(void *arg, int64_t begin, int64_t end, int thread) {
  const sp_job *j = arg;
  (void)thread;
  for (int64_t ci = begin; ci < end; ci++)
    pad_channel(j->p, &j->g, j->x + ci * (int64_t)j->p->h * j->p->w, j->xp + ci * j->g.cs);
}

/* ---- the tiles ---------------------------------------------------------------------- */

/* Where tile t of a panel lies: its first output row and column, pixels per row (na)
 * and rows (1 or 2), and the function that computes it. */
typedef struct sp_place {
  sp_tile_fn fn;
  int64_t oh, ow0;
  int na, rows;
} sp_place;

static sp_place tile_place(const sp_job *j, int64_t t) {
  const conv_p *p = j->p;
  sp_place pl = {.oh = 2 * t, .na = p->ow, .rows = 2};
  if (j->s.rows == 2) {
    if (pl.oh + 1 >= p->oh)
      pl.rows = 1;
    pl.fn = pl.rows == 2 ? two_rows[pl.na] : one_row[pl.na];
    return pl;
  }
  int64_t ch = t % j->s.chunks, base = p->ow / j->s.chunks, rem = p->ow % j->s.chunks;
  pl.oh = t / j->s.chunks;
  pl.ow0 = ch * base + (ch < rem ? ch : rem);
  pl.na = (int)(base + (ch < rem));
  pl.rows = 1;
  pl.fn = one_row[pl.na];
  return pl;
}

/* The activations the register does not apply, on the tile's rows of every channel. */
static void post_act(const sp_job *j, int64_t pan, const sp_place *pl) {
  const conv_p *p = j->p;
  int64_t ohw = (int64_t)p->oh * p->ow;
  for (int64_t oc = pan * NR_CONV_SP_MR; oc < p->m && oc < (pan + 1) * NR_CONV_SP_MR; oc++)
    for (int64_t r = 0; r < pl->rows; r++)
      nr_conv_epilogue(j->y + oc * ohw + (pl->oh + r) * p->ow + pl->ow0, NULL, pl->na, 0.0f,
                       p);
}

static bool in_register(nr_act a) {
  return a == NR_ACT_NONE || a == NR_ACT_RELU || a == NR_ACT_CLIP || a == NR_ACT_LEAKY_RELU;
}

/* Work item i: panel i / items_per_panel, its tiles [t0, t1); all passes over C. */
static void tile_task(void *arg, int64_t begin, int64_t end, int thread) {
  const sp_job *j = arg;
  const conv_p *p = j->p;
  int64_t ohw = (int64_t)p->oh * p->ow, kc = p->gemm.kc;
  int64_t wpan = (int64_t)NR_CONV_SP_MR * j->taps * p->c;
  float *part = j->part + (int64_t)thread * j->s.tpi * NR_CONV_SP_TILE_FLOATS;
  sp_tile a = {.toff = j->toff, .cs = j->g.cs, .xrow = j->g.lp, .taps = j->taps,
               .yrow = p->ow, .ch16 = 16 * ohw, .act = (nr_act)p->act,
               .act_a = p->act_a, .act_b = p->act_b};
  a.idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                             _mm512_set1_epi32((int)ohw));
  if (!in_register(a.act))
    a.act = NR_ACT_NONE;
  for (int64_t i = begin; i < end; i++) {
    int64_t pan = i / j->s.ipp, t0 = (i % j->s.ipp) * j->s.tpi;
    int64_t t1 = t0 + j->s.tpi < j->s.ntiles ? t0 + j->s.tpi : j->s.ntiles;
    int64_t mv = p->m - pan * NR_CONV_SP_MR;
    a.mask[0] = mv >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << mv) - 1);
    a.mask[1] = mv >= 32 ? (__mmask16)0xFFFF : mv > 16 ? (__mmask16)((1u << (mv - 16)) - 1) : 0;
    a.bias = j->bias ? j->bias + pan * NR_CONV_SP_MR : NULL;
    for (int64_t k0 = 0; k0 < p->c; k0 += kc) {
      a.kb = p->c - k0 < kc ? p->c - k0 : kc;
      a.first = k0 == 0, a.last = k0 + a.kb >= p->c;
      a.w = j->w + pan * wpan + k0 * j->taps * NR_CONV_SP_MR;
      for (int64_t t = t0; t < t1; t++) {
        /* the next pass's W (or the next panel's first) follows this one's in memory;
         * each of the pass's n tiles fetches 1/n of it into L2, spread over its steps,
         * so a layer's weights (9.4 MB at 512 x 512 x 3 x 3) stream from memory while
         * the FMAs run instead of before them (nr_conv_bench --cold-weights, 512 x 7x7:
         * 2.3 -> 1.9 ms; hot it costs up to 10%, the extra prefetch per step) */
        a.pinc = (NR_CONV_SP_MR + (t1 - t0) - 1) / (t1 - t0);
        a.pinc = a.pinc > 32 ? 32 : a.pinc;
        a.pfw = a.w + a.kb * j->taps * NR_CONV_SP_MR + (t - t0) * a.kb * j->taps * a.pinc;
        sp_place pl = tile_place(j, t);
        int64_t y0 = pan * NR_CONV_SP_MR * ohw + pl.oh * p->ow + pl.ow0;
        a.x = j->xp + k0 * j->g.cs + pl.oh * j->g.lp + pl.ow0;
        a.part = part + (t - t0) * NR_CONV_SP_TILE_FLOATS;
        a.y = j->y + y0;
        a.res = j->res ? j->res + y0 : NULL;
        pl.fn(&a);
        if (a.last && !in_register((nr_act)p->act))
          post_act(j, pan, &pl);
      }
    }
  }
}

nr_status nr_conv_sp__avx512_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  sp_job j = {.p = &q, .w = a->packed, .bias = q.has_bias ? a->in[2] : NULL,
              .xp = (float *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63)};
  nr_conv_sp_geo(&q, &j.s, &j.g);
  j.part = j.xp + (int64_t)q.c * j.g.cs;
  j.taps = q.kh * q.kw;
  for (int kh = 0; kh < q.kh; kh++)
    for (int kw = 0; kw < q.kw; kw++) {
      int64_t dy = (int64_t)kh * q.dh, dx = (int64_t)kw * q.dw;
      int64_t phase = (dy % q.sh) * q.sw + dx % q.sw;
      j.toff[kh * q.kw + kw] = phase * j.g.pp + (dy / q.sh) * j.g.lp + dx / q.sw;
    }
  int64_t ohw = (int64_t)q.oh * q.ow;
  int threads = nr_conv_threads(a);
  for (int64_t n = 0; n < q.n; n++) {
    j.x = (const float *)a->in[0] + n * (int64_t)q.c * q.h * q.w;
    j.y = (float *)a->out[0] + n * q.m * ohw;
    j.res = res ? res + n * q.m * ohw : NULL;
    nr_parallel_for(a->pool, q.c, 8, threads, pad_task, &j);
    nr_parallel_for(a->pool, j.s.npan * j.s.ipp, 1, threads, tile_task, &j);
  }
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
