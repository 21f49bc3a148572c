/* conv_pw__avx2.c - nr_f32_conv_pw__avx2: PLAIN group-1 unpadded 1x1 ("pointwise")
 * convolutions of any stride with AVX2 register tiles. Compiled with -mavx2 -mfma;
 * called only after nr_cpu_isa() reported NR_ISA_AVX2.
 *
 * The AVX2 counterpart of nr_f32_conv_pw__avx512: Y[M x P] = W[M x C] * X[C x P] per
 * image with B read in place (stride 1) or from a compact copy of the strided pixels,
 * W packed at build per K block as [panels][kc][mr] (nr_conv_pack_pw), the same two
 * loop orders (column tiles outer, every panel of a group reusing one B tile from L1;
 * or, for short reductions over many pixels, panels outer so Y is written as mr
 * sequential streams) and the epilogue (bias, residual, ReLU / Clip / LeakyReLU) in
 * the registers after the last K block. The register tile is 6 output channels x 16
 * pixels or 4 x 24 (12 ymm accumulators; prepare() takes the one with less padded
 * work); the last vector of a row is read with a masked load.
 *
 * Key decision: a row's last, partial vector is written through a small buffer and a
 * scalar copy rather than vmaskmovps stores, which are microcoded on the AMD Zen cores
 * this kernel is for; it is one vector in nv per row, at most one per tile. */
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <string.h>

typedef struct pw2_out {
  float *y;          /* the tile's first output: row oc0, pixel col */
  const float *res;  /* the residual at the same place, or NULL */
  const float *bias; /* bias[oc0], or NULL */
  int64_t ld, ldx;   /* floats between rows of Y and R; of B */
  int rows;          /* rows that exist (< mr only in the last panel) */
  int tail;          /* floats of the last vector that exist (1..8) */
  bool first, last;  /* first K block (start at zero) / last (epilogue) */
  nr_act act;        /* in-register activation: NONE, RELU, CLIP or LEAKY_RELU */
  float act_a, act_b;
} pw2_out;

typedef void (*pw2_tile_fn)(int64_t kb, const float *w, const float *x, const pw2_out *o);

static inline __attribute__((always_inline)) __m256 act_vec(const pw2_out *o, __m256 v) {
  __m256 zero = _mm256_setzero_ps();
  switch (o->act) {
  case NR_ACT_RELU: return _mm256_max_ps(v, zero);
  case NR_ACT_CLIP:
    return _mm256_min_ps(_mm256_set1_ps(o->act_b), _mm256_max_ps(_mm256_set1_ps(o->act_a), v));
  case NR_ACT_LEAKY_RELU:
    return _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(o->act_a)), v,
                            _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
  default: return v;
  }
}

static inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* v = act(acc (+ Y) + bias + R) into Y's row at y (r: the residual's), all 8 floats or,
 * when part, the first o->tail through a buffer. */
static inline __attribute__((always_inline)) void
out_vec(const pw2_out *o, __m256 a, float *y, const float *r, __m256 vb, bool part) {
  __m256i m = tail_mask(part ? o->tail : 8);
  if (!o->first)
    a = _mm256_add_ps(a, part ? _mm256_maskload_ps(y, m) : _mm256_loadu_ps(y));
  if (o->last) {
    a = _mm256_add_ps(a, vb);
    if (r)
      a = _mm256_add_ps(a, part ? _mm256_maskload_ps(r, m) : _mm256_loadu_ps(r));
    a = act_vec(o, a);
  }
  if (!part) {
    _mm256_storeu_ps(y, a);
    return;
  }
  float buf[8];
  _mm256_storeu_ps(buf, a);
  for (int l = 0; l < o->tail; l++)
    y[l] = buf[l];
}

/* One mr x nv*8 tile over kb channels; always inlined with constant MR, NV and MASK
 * (the last vector partial), so the accumulators are registers. Two channels per trip
 * halve the loop's own uops. */
static inline __attribute__((always_inline)) void
pw_body(const int MR, const int NV, const bool MASK, int64_t kb, const float *restrict w,
        const float *restrict x, const pw2_out *o) {
  __m256 acc[6][3];
  const int64_t ldx = o->ldx;
  const __m256i m = tail_mask(MASK ? o->tail : 8);
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      acc[i][v] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int64_t k = 0; k < kb; k++, w += MR, x += ldx) {
    __m256 bv[3];
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      bv[v] = MASK && v == NV - 1 ? _mm256_maskload_ps(x + 8 * v, m) : _mm256_loadu_ps(x + 8 * v);
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
      __m256 av = _mm256_broadcast_ss(w + i);
#pragma GCC unroll 3
      for (int v = 0; v < NV; v++)
        acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) {
    if (i >= o->rows)
      break;
    float *y = o->y + i * o->ld;
    const float *r = o->res && o->last ? o->res + i * o->ld : NULL;
    __m256 vb = _mm256_set1_ps(o->bias && o->last ? o->bias[i] : 0.0f);
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++)
      out_vec(o, acc[i][v], y + 8 * v, r ? r + 8 * v : NULL, vb, MASK && v == NV - 1);
  }
}

#define PW2_TILE(MR, NV)                                                                \
  static void tile_##MR##x##NV(int64_t kb, const float *w, const float *x,             \
                               const pw2_out *o) {                                      \
    pw_body(MR, NV, false, kb, w, x, o);                                                \
  }                                                                                     \
  static void tile_##MR##x##NV##_m(int64_t kb, const float *w, const float *x,         \
                                   const pw2_out *o) {                                  \
    pw_body(MR, NV, true, kb, w, x, o);                                                 \
  }
PW2_TILE(6, 1) PW2_TILE(6, 2)
PW2_TILE(4, 1) PW2_TILE(4, 2) PW2_TILE(4, 3)

/* [4x24?][vectors - 1][masked] */
static const pw2_tile_fn tiles[2][3][2] = {
    {{tile_6x1, tile_6x1_m}, {tile_6x2, tile_6x2_m}},
    {{tile_4x1, tile_4x1_m}, {tile_4x2, tile_4x2_m}, {tile_4x3, tile_4x3_m}},
};

/* ---- the loop nest -------------------------------------------------------------- */

typedef struct pw2_job {
  const conv_p *p;
  const float *x, *w, *bias, *res; /* image n's B rows (X or its copy), packed W, ... */
  float *y;
  const float *xsrc; /* the copy's source: image n's input */
  float *xs;         /* the copy (strided) */
  int64_t np;        /* output pixels P, also the floats between B rows */
  int64_t nvec, ntile, npan;
  int64_t gpan, ngroup, ctile, nchunk; /* work items: panel groups x column chunks */
  int mr, nv;
} pw2_job;

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/* Channel rows of the strided copy: xs[c][oh][ow] = x[c][oh*sh][ow*sw]. */
static void copy_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pw2_job *j = arg;
  const conv_p *p = j->p;
  (void)thread;
  for (int64_t ci = begin; ci < end; ci++) {
    const float *x = j->xsrc + ci * (int64_t)p->h * p->w;
    float *d = j->xs + ci * j->np;
    for (int64_t oh = 0; oh < p->oh; oh++, d += p->ow) {
      const float *xr = x + oh * p->sh * (int64_t)p->w;
      for (int64_t ow = 0; ow < p->ow; ow++)
        d[ow] = xr[ow * p->sw];
    }
  }
}

/* The tile function for column tile jt (narrower and masked at the row's end). */
static pw2_tile_fn tile_fn(const pw2_job *j, int64_t jt, int64_t *ncols) {
  int nvl = (int)min64(j->nv, j->nvec - jt * j->nv);
  *ncols = min64((int64_t)nvl * 8, j->np - jt * j->nv * 8);
  return tiles[j->mr == 4][nvl - 1][*ncols % 8 != 0];
}

static pw2_out out_for(const pw2_job *j, int64_t k0, int64_t kb, bool piecewise) {
  const conv_p *p = j->p;
  return (pw2_out){.ld = j->np, .ldx = j->np, .rows = j->mr, .first = k0 == 0,
                   .last = k0 + kb >= p->c,
                   .act = piecewise ? (nr_act)p->act : NR_ACT_NONE,
                   .act_a = p->act_a, .act_b = p->act_b};
}

/* After the last K block, the activations the registers do not apply. */
static void finish_rows(const pw2_job *j, const pw2_out *o, int64_t ncols, bool piecewise) {
  if (o->last && !piecewise)
    for (int i = 0; i < o->rows; i++)
      nr_act_apply((nr_act)j->p->act, j->p->act_a, j->p->act_b, o->y + i * j->np, ncols);
}

/* Column tile jt of panels [p0, p1): the K block k0 of their channels. */
static void run_tiles(const pw2_job *j, int64_t jt, int64_t p0, int64_t p1, int64_t k0,
                      bool piecewise) {
  const conv_p *p = j->p;
  int64_t col = jt * j->nv * 8, kb = min64(p->gemm.kc, p->c - k0), ncols;
  pw2_tile_fn fn = tile_fn(j, jt, &ncols);
  pw2_out o = out_for(j, k0, kb, piecewise);
  o.tail = ncols % 8 ? (int)(ncols % 8) : 8;
  const float *x = j->x + k0 * j->np + col;
  const float *w = j->w + k0 * j->npan * j->mr + p0 * kb * j->mr;
  int64_t step = (int64_t)j->mr * j->np;
  o.y = j->y + p0 * step + col;
  o.res = j->res ? j->res + p0 * step + col : NULL;
  o.bias = j->bias ? j->bias + p0 * j->mr : NULL;
  for (int64_t pan = p0; pan < p1; pan++) {
    if (pan == j->npan - 1)
      o.rows = (int)(p->m - pan * j->mr);
    fn(kb, w, x, &o);
    finish_rows(j, &o, ncols, piecewise);
    w += kb * j->mr;
    o.y += step;
    o.res = o.res ? o.res + step : NULL;
    o.bias = o.bias ? o.bias + j->mr : NULL;
  }
}

/* Column tiles [t0, t1) of panel pan (panels order): the K block k0. */
static void run_panel(const pw2_job *j, int64_t pan, int64_t t0, int64_t t1, int64_t k0,
                      bool piecewise) {
  const conv_p *p = j->p;
  int64_t kb = min64(p->gemm.kc, p->c - k0), tw = (int64_t)j->nv * 8;
  int64_t off = pan * j->mr * j->np;
  pw2_out o = out_for(j, k0, kb, piecewise);
  o.rows = (int)min64(j->mr, p->m - pan * j->mr);
  const float *w = j->w + k0 * j->npan * j->mr + pan * kb * j->mr;
  for (int64_t jt = t0; jt < t1; jt++) {
    int64_t col = jt * tw, ncols;
    pw2_tile_fn fn = tile_fn(j, jt, &ncols);
    o.tail = ncols % 8 ? (int)(ncols % 8) : 8;
    o.y = j->y + off + col;
    o.res = j->res ? j->res + off + col : NULL;
    o.bias = j->bias ? j->bias + pan * j->mr : NULL;
    fn(kb, w, j->x + k0 * j->np + col, &o);
    finish_rows(j, &o, ncols, piecewise);
  }
}

/* Work item: panel group it / nchunk x column chunk it % nchunk, K blocks outside. */
static void item_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pw2_job *j = arg;
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

/* As the AVX-512 kernel's plan_items, with the L2 budgets halved for a 512 KiB L2:
 * panel groups whose W block (group rows x kc) stays within 64 KiB, column chunks
 * whose Y block stays within 128 KiB between K blocks, in the panels order whose X
 * block (kc x chunk columns) stays within 256 KiB; then, with several threads, chunks
 * (and panels) are cut until there are 4 items per thread. */
static void plan_items(pw2_job *j, int threads) {
  const conv_p *p = j->p;
  int64_t rows = 16384 / p->gemm.kc, tw = (int64_t)j->nv * 8;
  j->ngroup = ceil_div(j->npan, rows / j->mr > 0 ? rows / j->mr : 1);
  j->gpan = ceil_div(j->npan, j->ngroup);
  int64_t ct = 1;
  if (p->extra & NR_CONV_PW_PANELS) {
    ct = 65536 / (p->gemm.kc * tw);
    if (p->gemm.kc < p->c)
      ct = min64(ct, 32768 / (j->gpan * j->mr * tw));
    ct = ct < 1 ? 1 : ct;
  } else if (p->gemm.kc < p->c) {
    ct = 32768 / (j->gpan * j->mr * tw);
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

nr_status nr_conv_pw__avx2_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  const float *bias = q.has_bias ? a->in[2] : NULL;
  conv_p epi = q; /* conv.epilogue=separate: the tiles store raw sums, a pass follows */
  bool split = q.opts & CONV_OPT_SPLIT_EPI;
  if (split)
    q.act = NR_ACT_NONE;
  pw2_job j = {.p = &q, .w = a->packed, .bias = split ? NULL : bias,
               .xs = (float *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63),
               .mr = nr_conv_pw_mr(q.extra), .nv = nr_conv_pw_nv(q.extra)};
  j.np = (int64_t)q.oh * q.ow;
  j.nvec = (j.np + 7) / 8;
  j.ntile = (j.nvec + j.nv - 1) / j.nv;
  j.npan = (q.m + j.mr - 1) / j.mr;
  int threads = nr_conv_threads(a);
  plan_items(&j, threads);
  bool strided = nr_conv_pw_strided(&q);
  for (int64_t n = 0; n < q.n; n++) {
    const float *x = (const float *)a->in[0] + n * (int64_t)q.c * q.h * q.w;
    if (strided) {
      j.xsrc = x;
      nr_parallel_for(a->pool, q.c, 8, threads, copy_task, &j);
    }
    j.x = strided ? j.xs : x;
    j.y = (float *)a->out[0] + n * q.m * j.np;
    j.res = res && !split ? res + n * q.m * j.np : NULL;
    nr_parallel_for(a->pool, j.ngroup * j.nchunk, 1, threads, item_task, &j);
  }
  if (split)
    nr_conv_epilogue_pass(a, NR_LAYOUT_PLAIN, &epi, bias, res, threads);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
