/* conv_winograd__avx512.c - nr_f32_conv_winograd_f43__avx512: Winograd F(4,3)
 * for PLAIN group-1 3x3 stride-1 undilated convolutions with AVX-512,
 * vectorised over 16 channels throughout. Compiled with the AVX-512 flags;
 * called only after nr_cpu_isa() reported NR_ISA_AVX512. Geometry:
 * nr_conv_w43_geo (conv_internal.h).
 *
 * Per image, three parallel passes:
 *  1. the input is copied into channel-blocked, zero-padded rows
 * Xb[C/16][rows][cols][16] (16x16 in-register transposes of 16 channel rows),
 * so a tile's 6x6 window is 36 plain vector loads with no bounds checks;
 *  2. the tiles are cut into blocks (an equal share per thread, at most enough
 * that one block's transformed inputs and products stay in L2, or where U is
 * larger than that, a quarter of U); per block and thread the input transform
 * writes V[36][tiles][C], 36 products O[xi] = V[xi] (tiles x C) * U[xi] (C x M)
 * run as 6-tile x 64-channel register tiles (24 zmm accumulators, 4 vector
 * loads of U and 6 broadcasts of V per 24 FMAs, the whole reduction in
 * registers; the last tiles and channels in smaller tiles), and the output
 * transform writes 4x4 outputs per 16 channels into Yb[M/16][rows][cols][16].
 * Small planes on several threads (the image one block, under 12 tiles per
 * thread) instead run each stage split across the threads (by channel block,
 * tile position, output channel block), so U is read once rather than once per
 * thread;
 *  3. Yb is transposed back to NCHW, 16 pixels of 16 channels at a time, with
 * bias, residual and ReLU applied on the vectors before the (masked) store;
 * other activations run through nr_conv_epilogue on the row while it is in L1.
 *
 * Key decision: channels, not tiles, are the vector lanes. Tiles along a row
 * start 4 columns apart and a 7x7 output has only 4 of them, so tile lanes
 * would need gathers and would idle on small planes; channel lanes cost two
 * transposes (one over X, one over Y: together about a third of the products'
 * time at 64 channels 56x56, perf) and then every transform and product is
 * dense. U (36 x C x M, packed at build by nr_conv_pack_w43 as [36][M/64
 * chunks][C][64]; conv.prepack=off does not apply) is 4x the size of W: on
 * small planes with many channels (7x7 x 512) that stream costs more than the
 * saved products. */
#include "kernels/cpu/conv/conv_internal.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct w43_job {
  const conv_p *p;
  conv_w43_geo g;
  const float *x, *u, *bias, *res;
  float *xb, *yb, *bufs, *y;
  int64_t tb;   /* tiles per block at run time: at most g.tb, an equal share per
                   thread */
  int64_t nblk; /* blocks per image */
  bool epi;     /* bias, residual and activation in pass 3 (not
                   conv.epilogue=separate) */
} w43_job;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* r[i] = column i of the 16x16 matrix whose rows are r[0..15]. */
static void tr16(__m512 r[16]) {
  __m512 u[16];
  for (int g = 0; g < 4; g++) {
    __m512 t0 = _mm512_unpacklo_ps(r[4 * g], r[4 * g + 1]);
    __m512 t1 = _mm512_unpackhi_ps(r[4 * g], r[4 * g + 1]);
    __m512 t2 = _mm512_unpacklo_ps(r[4 * g + 2], r[4 * g + 3]);
    __m512 t3 = _mm512_unpackhi_ps(r[4 * g + 2], r[4 * g + 3]);
    __m512d a0 = _mm512_castps_pd(t0), a1 = _mm512_castps_pd(t1);
    __m512d a2 = _mm512_castps_pd(t2), a3 = _mm512_castps_pd(t3);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
  /* u[4g + j], 128-bit lane k: column 4k + j of rows 4g..4g+3 */
  for (int j = 0; j < 4; j++) {
    __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
    __m512 w = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
    __m512 v2 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    __m512 w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_shuffle_f32x4(v, w, 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v, w, 0xdd);
    r[4 + j] = _mm512_shuffle_f32x4(v2, w2, 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(v2, w2, 0xdd);
  }
}

/* Lanes k of columns off .. off+15 that lie in [0, w). */
static __mmask16 cols_mask(int64_t w, int64_t off) {
  __mmask16 m = 0;
  for (int k = 0; k < 16; k++)
    if (off + k >= 0 && off + k < w)
      m |= (__mmask16)(1u << k);
  return m;
}

/* Columns off .. off+15 of an input row, zero outside mask m (cols_mask). Reads
 * only floats of the row: a partial block expands the valid run into its lanes.
 */
static __m512 load_cols(const float *row, __mmask16 m, int64_t off) {
  if (m == 0xFFFF)
    return _mm512_loadu_ps(row + off);
  return m ? _mm512_maskz_expandloadu_ps(m, row + (off > 0 ? off : 0)) : _mm512_setzero_ps();
}

/* ---- pass 1: the channel-blocked padded copy
 * -------------------------------------- */

/* One Xb row (block cb of 16 channels, padded row r) per index. */
static void pack_task(void *arg, int64_t begin, int64_t end, int thread) {
  const w43_job *j = arg;
  const conv_p *p = j->p;
  const conv_w43_geo *g = &j->g;
  int64_t hw = (int64_t)p->h * p->w;
  (void)thread;
  for (int64_t i = begin; i < end; i++) {
    int64_t cb = i / g->hp, r = i % g->hp, ih = r - p->pt;
    float *dst = j->xb + (cb * g->hp + r) * g->wpp * 16;
    if (ih < 0 || ih >= p->h) {
      memset(dst, 0, sizeof(float) * (size_t)(g->wpp * 16));
      continue;
    }
    int nc = (int)min64(16, p->c - cb * 16);
    const float *src = j->x + cb * 16 * hw + ih * p->w;
    for (int64_t c0 = 0; c0 < g->wpp; c0 += 16) {
      __m512 v[16];
      __mmask16 m = cols_mask(p->w, c0 - p->pl);
      for (int k = 0; k < 16; k++)
        v[k] = k < nc ? load_cols(src + k * hw, m, c0 - p->pl) : _mm512_setzero_ps();
      tr16(v);
      for (int k = 0; k < 16; k++)
        _mm512_storeu_ps(dst + (c0 + k) * 16, v[k]);
    }
  }
}

/* ---- pass 2: transforms and products per tile block
 * ------------------------------- */

/* o = B^T d for one column of 6 (F(4,3)'s input transform). */
static inline void bt6(const __m512 d[6], __m512 o[6]) {
  const __m512 c2 = _mm512_set1_ps(2.0f), c4 = _mm512_set1_ps(4.0f);
  const __m512 c5 = _mm512_set1_ps(5.0f);
  __m512 s12 = _mm512_add_ps(d[1], d[2]), s34 = _mm512_add_ps(d[3], d[4]);
  __m512 d12 = _mm512_sub_ps(d[1], d[2]), d43 = _mm512_sub_ps(d[4], d[3]);
  __m512 d31 = _mm512_sub_ps(d[3], d[1]), d42 = _mm512_sub_ps(d[4], d[2]);
  o[0] = _mm512_fmadd_ps(c4, d[0], _mm512_fnmadd_ps(c5, d[2], d[4]));
  o[1] = _mm512_fnmadd_ps(c4, s12, s34);
  o[2] = _mm512_fmadd_ps(c4, d12, d43);
  o[3] = _mm512_fmadd_ps(c2, d31, d42);
  o[4] = _mm512_fnmadd_ps(c2, d31, d42);
  o[5] = _mm512_fmadd_ps(c4, d[1], _mm512_fnmadd_ps(c5, d[3], d[5]));
}

/* o = A^T m for one column of 6 (the output transform). */
static inline void at6(const __m512 m[6], __m512 o[4]) {
  const __m512 c2 = _mm512_set1_ps(2.0f), c4 = _mm512_set1_ps(4.0f);
  const __m512 c8 = _mm512_set1_ps(8.0f);
  __m512 s12 = _mm512_add_ps(m[1], m[2]), s34 = _mm512_add_ps(m[3], m[4]);
  __m512 d12 = _mm512_sub_ps(m[1], m[2]), d34 = _mm512_sub_ps(m[3], m[4]);
  o[0] = _mm512_add_ps(_mm512_add_ps(m[0], s12), s34);
  o[1] = _mm512_fmadd_ps(c2, d34, d12);
  o[2] = _mm512_fmadd_ps(c4, s34, s12);
  o[3] = _mm512_add_ps(_mm512_fmadd_ps(c8, d34, d12), m[5]);
}

/* V[xi][tl][C] for the block's tiles t0 .. t0+nt, channel blocks cb0 .. cb1. */
static void input_transform(const w43_job *j, int64_t t0, int64_t nt, int64_t cb0, int64_t cb1,
                            float *v) {
  const conv_w43_geo *g = &j->g;
  int64_t plane = j->tb * g->cp, rs = g->wpp * 16;
  for (int64_t tl = 0; tl < nt; tl++) {
    int64_t t = t0 + tl, ty = t / g->tw, tx = t % g->tw;
    for (int64_t cb = cb0; cb < cb1; cb++) {
      const float *s = j->xb + ((cb * g->hp + ty * 4) * g->wpp + tx * 4) * 16;
      __m512 d[6], tmp[6][6], o[6];
      for (int c = 0; c < 6; c++) {
        for (int r = 0; r < 6; r++)
          d[r] = _mm512_loadu_ps(s + r * rs + c * 16);
        bt6(d, o);
        for (int i = 0; i < 6; i++)
          tmp[i][c] = o[i];
      }
      float *dst = v + tl * g->cp + cb * 16;
      for (int i = 0; i < 6; i++) {
        bt6(tmp[i], o);
        for (int k = 0; k < 6; k++)
          _mm512_storeu_ps(dst + (i * 6 + k) * plane, o[k]);
      }
    }
  }
}

/* o[rows x 16nv] = v[rows x k] (rows ldv apart) * u[k x cw]: one register tile,
 * the whole reduction in registers. Inlined with constant rows and nv. */
static inline __attribute__((always_inline)) void mm_tile(const float *v, int64_t ldv,
                                                          const float *u, int64_t cw, int64_t k,
                                                          float *o, int64_t ldo, const int rows,
                                                          const int nv) {
  __m512 acc[6][4];
  for (int i = 0; i < rows; i++)
    for (int q = 0; q < nv; q++)
      acc[i][q] = _mm512_setzero_ps();
  for (int64_t c = 0; c < k; c++) {
    __m512 b[4];
    for (int q = 0; q < nv; q++)
      b[q] = _mm512_loadu_ps(u + c * cw + 16 * q);
    for (int i = 0; i < rows; i++) {
      __m512 a = _mm512_set1_ps(v[i * ldv + c]);
      for (int q = 0; q < nv; q++)
        acc[i][q] = _mm512_fmadd_ps(a, b[q], acc[i][q]);
    }
  }
  for (int i = 0; i < rows; i++)
    for (int q = 0; q < nv; q++)
      _mm512_storeu_ps(o + i * ldo + 16 * q, acc[i][q]);
}

#define MM_CASE(r, q)                                                                              \
  case (r)*8 + (q):                                                                                \
    mm_tile(vt, g->cp, uc, cw, c, ot, mp, r, q);                                                   \
    break;
#define MM_ROWS(r) MM_CASE(r, 1) MM_CASE(r, 2) MM_CASE(r, 3) MM_CASE(r, 4)

/* O[xi] = V[xi] * U[xi] for the block's nt tiles: per tile position, per chunk
 * of 64 output channels (U's chunk, C x 64, stays in L1 or L2), per 6 tiles
 * (the last group the rest, so a block need not be a multiple of 6). */
static void products(const w43_job *j, int64_t nt, int64_t xi0, int64_t xi1, const float *v,
                     float *o) {
  const conv_w43_geo *g = &j->g;
  int64_t c = j->p->c, mp = g->mp;
  for (int64_t xi = xi0; xi < xi1; xi++) {
    const float *vx = v + xi * j->tb * g->cp, *ux = j->u + xi * c * mp;
    float *ox = o + xi * j->tb * mp;
    for (int64_t m0 = 0; m0 < mp; m0 += 64) {
      int64_t cw = min64(64, mp - m0);
      const float *uc = ux + m0 * c;
      for (int64_t t = 0; t < nt; t += 6) {
        const float *vt = vx + t * g->cp;
        float *ot = ox + t * mp + m0;
        switch ((int)min64(6, nt - t) * 8 + (int)(cw / 16)) {
          MM_ROWS(6)
          MM_ROWS(5) MM_ROWS(4) MM_ROWS(3) MM_ROWS(2) MM_ROWS(1) default : break;
        }
      }
    }
  }
}

/* Yb's 4x4 outputs of the block's nt tiles from O, channel blocks mb0 .. mb1.
 */
static void output_transform(const w43_job *j, int64_t t0, int64_t nt, int64_t mb0, int64_t mb1,
                             const float *o) {
  const conv_w43_geo *g = &j->g;
  int64_t plane = j->tb * g->mp, rows = g->th * 4;
  for (int64_t tl = 0; tl < nt; tl++) {
    int64_t t = t0 + tl, ty = t / g->tw, tx = t % g->tw;
    for (int64_t mb = mb0; mb < mb1; mb++) {
      const float *s = o + tl * g->mp + mb * 16;
      __m512 m[6], tmp[4][6], r[4];
      for (int c = 0; c < 6; c++) {
        for (int k = 0; k < 6; k++)
          m[k] = _mm512_loadu_ps(s + (k * 6 + c) * plane);
        at6(m, r);
        for (int i = 0; i < 4; i++)
          tmp[i][c] = r[i];
      }
      float *dst = j->yb + ((mb * rows + ty * 4) * g->yw + tx * 4) * 16;
      for (int i = 0; i < 4; i++) {
        at6(tmp[i], r);
        for (int k = 0; k < 4; k++)
          _mm512_storeu_ps(dst + (i * g->yw + k) * 16, r[k]);
      }
    }
  }
}

static void block_task(void *arg, int64_t begin, int64_t end, int thread) {
  const w43_job *j = arg;
  const conv_w43_geo *g = &j->g;
  float *v = j->bufs + (int64_t)thread * nr_conv_w43_buf_floats(g);
  float *o = v + 36 * g->tb * g->cp;
  for (int64_t b = begin; b < end; b++) {
    int64_t t0 = b * j->tb, nt = min64(j->tb, g->t - t0);
    input_transform(j, t0, nt, 0, g->cp / 16, v);
    products(j, nt, 0, 36, v, o);
    output_transform(j, t0, nt, 0, g->mp / 16, o);
  }
}

/* One block holding every tile, its three stages split across threads by
 * channel block, tile position and output channel block: each thread reads only
 * its share of U (block_task would have every thread stream all of it, for a
 * few tiles each). */
static void whole_in_task(void *arg, int64_t begin, int64_t end, int thread) {
  const w43_job *j = arg;
  (void)thread;
  input_transform(j, 0, j->g.t, begin, end, j->bufs);
}
static void whole_mm_task(void *arg, int64_t begin, int64_t end, int thread) {
  const w43_job *j = arg;
  (void)thread;
  products(j, j->g.t, begin, end, j->bufs, j->bufs + 36 * j->g.tb * j->g.cp);
}
static void whole_out_task(void *arg, int64_t begin, int64_t end, int thread) {
  const w43_job *j = arg;
  (void)thread;
  output_transform(j, 0, j->g.t, begin, end, j->bufs + 36 * j->g.tb * j->g.cp);
}

/* ---- pass 3: back to NCHW with the epilogue
 * ----------------------------------------- */

/* One output row of 16 channels (block mb, row r) per index. */
static void unpack_task(void *arg, int64_t begin, int64_t end, int thread) {
  const w43_job *j = arg;
  const conv_p *p = j->p;
  const conv_w43_geo *g = &j->g;
  int64_t ohw = (int64_t)p->oh * p->ow, rows = g->th * 4;
  bool relu = p->act == NR_ACT_RELU, other = p->act != NR_ACT_NONE && !relu;
  (void)thread;
  for (int64_t i = begin; i < end; i++) {
    int64_t mb = i / p->oh, r = i % p->oh;
    int nm = (int)min64(16, p->m - mb * 16);
    const float *src = j->yb + (mb * rows + r) * g->yw * 16;
    int64_t base = mb * 16 * ohw + r * p->ow;
    for (int64_t c0 = 0; c0 < p->ow; c0 += 16) {
      __m512 v[16];
      for (int k = 0; k < 16; k++)
        v[k] = _mm512_loadu_ps(src + (c0 + k) * 16);
      tr16(v);
      __mmask16 mask = p->ow - c0 >= 16 ? 0xFFFF : (__mmask16)((1u << (p->ow - c0)) - 1);
      for (int k = 0; k < nm; k++) {
        int64_t at = base + k * ohw + c0;
        __m512 y = v[k];
        if (j->epi) {
          if (j->bias)
            y = _mm512_add_ps(y, _mm512_set1_ps(j->bias[mb * 16 + k]));
          if (j->res)
            y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, j->res + at));
          if (relu)
            y = _mm512_max_ps(y, _mm512_setzero_ps());
        }
        _mm512_mask_storeu_ps(j->y + at, mask, y);
      }
    }
    for (int k = 0; j->epi && other && k < nm; k++)
      nr_conv_epilogue(j->y + base + k * ohw, NULL, p->ow, 0.0f, p);
  }
}

nr_status nr_conv_winograd_f43__avx512_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  w43_job j = {.p = &q, .u = (const float *)a->packed};
  nr_conv_w43_geo(&q, &j.g);
  int threads = nr_conv_threads(a);
  /* the whole image in one block shared by the threads, where it fits one block
   * and blocks of an equal share would be under 12 tiles */
  bool whole = threads > 1 && j.g.t <= j.g.tb && j.g.t < 12 * threads;
  j.tb = whole ? j.g.t : min64(j.g.tb, (j.g.t + threads - 1) / threads);
  j.nblk = (j.g.t + j.tb - 1) / j.tb;
  char *s = (char *)(((uintptr_t)a->scratch + 63) & ~(uintptr_t)63);
  j.xb = (float *)s;
  j.yb = (float *)(s + nr_conv_align64(nr_conv_w43_xb_floats(&j.g) * sizeof(float)));
  j.bufs = (float *)((char *)j.yb + nr_conv_align64(nr_conv_w43_yb_floats(&j.g) * sizeof(float)));
  j.bias = q.has_bias ? a->in[2] : NULL;
  j.epi = !(q.opts & CONV_OPT_SPLIT_EPI);
  int64_t hw = (int64_t)q.h * q.w, ohw = (int64_t)q.oh * q.ow;
  for (int64_t n = 0; n < q.n; n++) {
    j.x = (const float *)a->in[0] + n * q.c * hw;
    j.y = (float *)a->out[0] + n * q.m * ohw;
    j.res = res ? res + n * q.m * ohw : NULL;
    nr_parallel_for(a->pool, j.g.cp / 16 * j.g.hp, 1, threads, pack_task, &j);
    if (whole) {
      nr_parallel_for(a->pool, j.g.cp / 16, 1, threads, whole_in_task, &j);
      nr_parallel_for(a->pool, 36, 1, threads, whole_mm_task, &j);
      nr_parallel_for(a->pool, j.g.mp / 16, 1, threads, whole_out_task, &j);
    } else {
      nr_parallel_for(a->pool, j.nblk, 1, threads, block_task, &j);
    }
    nr_parallel_for(a->pool, j.g.mp / 16 * q.oh, 1, threads, unpack_task, &j);
  }
  if (q.opts & CONV_OPT_SPLIT_EPI)
    nr_conv_epilogue_pass(a, NR_LAYOUT_PLAIN, &q, j.bias, res, threads);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
