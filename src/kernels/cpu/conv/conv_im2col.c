/* conv_im2col.c - convolution as GEMM: nr_f32_conv_im2col and nr_f32_conv_1x1 (PLAIN:
 * Y_g[M/g x OHW] = W_g[M/g x K] * col[K x OHW], W pre-packed as the GEMM's A) and
 * nr_f32_conv_nhwc_im2col / nr_f32_conv_nhwc_1x1 (NHWC: Y[OHW x M] = col[OHW x K] *
 * W^T[K x M], W pre-packed as B).
 *
 * A PLAIN 1x1 conv over a 1x1 plane (a squeeze-excitation block's two convs) runs the
 * NHWC way, the two layouts being the same bytes there: its PLAIN product W x X has
 * one column, on which the 6x16 micro-kernel computes 16 columns for 1 (3.6 GFLOP/s
 * on a 960 -> 240 conv, a quarter of what a one-row product x^T W^T reaches on the
 * 1x16 kernel, its weights streamed once).
 *
 * Key decision: a 1x1 stride-1 unpadded conv needs no copy at all, X itself is the B
 * (PLAIN, [C x HW]) or A (NHWC, [HW x C], lda = C per group) operand; otherwise the
 * column matrix of one image and group is built in scratch (rows in parallel), a band
 * of output rows at a time when the whole matrix would pass NR_IM2COL_BAND_BYTES (a
 * 9x9 conv over 256x256 needs 680 MB), and the GEMM's epilogue adds bias and residual
 * and applies the activation while C is hot
 * (conv.epilogue=separate: the GEMM writes raw products and nr_conv_epilogue_pass
 * follows). With conv.prepack=off W is packed into the front of scratch on each run. */
#include "kernels/cpu/conv/conv_internal.h"
#include "util/error.h"

#include <string.h>

typedef struct col_job {
  const conv_p *p;
  const float *x; /* image n, group g (PLAIN: first channel plane; NHWC: image base) */
  float *col;
  int64_t c0;     /* NHWC: first channel of the group */
  int64_t oh0, oh1; /* PLAIN: the band of output rows the columns cover */
} col_job;

/* Output columns [*lo, *hi) whose input column ow * sw + off lies inside [0, w). */
static void valid_cols(const conv_p *p, int64_t off, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + p->sw - 1) / p->sw; /* first ow with iw >= 0 */
  int64_t b = p->w - off <= 0 ? 0 : (p->w - off - 1) / p->sw + 1; /* first with iw >= w */
  *lo = a < p->ow ? a : p->ow;
  *hi = b < *lo ? *lo : b > p->ow ? p->ow : b;
}

/* PLAIN: row r = (ci, kh, kw) of col holds the tap's input for every output pixel. The
 * columns that read padding are found once per row, so the copy itself has no bounds
 * checks (a memcpy at stride 1). */
static void col_rows_plain(void *arg, int64_t begin, int64_t end, int thread) {
  const col_job *j = arg;
  const conv_p *p = j->p;
  int64_t kk = (int64_t)p->kh * p->kw, band = (j->oh1 - j->oh0) * p->ow;
  for (int64_t r = begin; r < end; r++) {
    int64_t ci = r / kk, kh = (r % kk) / p->kw, kw = r % p->kw;
    const float *x = j->x + ci * (int64_t)p->h * p->w;
    float *dst = j->col + r * band;
    int64_t off = kw * p->dw - p->pl, lo, hi;
    valid_cols(p, off, &lo, &hi);
    for (int64_t oh = j->oh0; oh < j->oh1; oh++) {
      int64_t ih = oh * p->sh - p->pt + kh * p->dh;
      float *d = dst + (oh - j->oh0) * p->ow;
      if (ih < 0 || ih >= p->h) {
        memset(d, 0, sizeof(float) * (size_t)p->ow);
        continue;
      }
      const float *xr = x + ih * p->w + off;
      memset(d, 0, sizeof(float) * (size_t)lo);
      if (p->sw == 1)
        memcpy(d + lo, xr + lo, sizeof(float) * (size_t)(hi - lo));
      else
        for (int64_t ow = lo; ow < hi; ow++)
          d[ow] = xr[ow * p->sw];
      memset(d + hi, 0, sizeof(float) * (size_t)(p->ow - hi));
    }
  }
}

/* NHWC: row of output pixel (oh, ow) holds (kh, kw, ci) patches, C/g runs contiguous. */
static void col_rows_nhwc(void *arg, int64_t begin, int64_t end, int thread) {
  const col_job *j = arg;
  const conv_p *p = j->p;
  int64_t cg = p->c / p->group, k = cg * p->kh * p->kw;
  for (int64_t px = begin; px < end; px++) {
    int64_t oh = px / p->ow, ow = px % p->ow;
    float *d = j->col + px * k;
    for (int64_t kh = 0; kh < p->kh; kh++)
      for (int64_t kw = 0; kw < p->kw; kw++, d += cg) {
        int64_t ih = oh * p->sh - p->pt + kh * p->dh, iw = ow * p->sw - p->pl + kw * p->dw;
        if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w)
          memset(d, 0, sizeof(float) * (size_t)cg);
        else
          memcpy(d, j->x + (ih * p->w + iw) * p->c + j->c0, sizeof(float) * (size_t)cg);
      }
  }
}

void nr_conv_im2col_plain(const conv_p *p, const float *x, float *col, nr_threadpool *pool,
                          int threads) {
  col_job j = {p, x, col, 0, 0, p->oh};
  int64_t rows = (int64_t)(p->c / p->group) * p->kh * p->kw;
  nr_parallel_for(pool, rows, 1, threads, col_rows_plain, &j);
}

/* The GEMM's epilogue: the whole of it, or nothing with conv.epilogue=separate. */
static nr_epilogue make_ep(const conv_p *q, const float *bias, bool per_row,
                           const float *res, int64_t ldr) {
  nr_epilogue ep = {bias, per_row, res, ldr, 1.0f, (nr_act)q->act, q->act_a, q->act_b};
  nr_epilogue none = {0};
  return (q->opts & CONV_OPT_SPLIT_EPI) ? none : ep;
}

static bool is_direct(const conv_p *q) {
  return q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->pt == 0 && q->pl == 0 &&
         q->oh == q->h && q->ow == q->w;
}

int32_t nr_conv_im2col_band(const conv_p *p) {
  uint64_t row = (uint64_t)(p->c / p->group) * p->kh * p->kw * (uint64_t)p->ow * sizeof(float);
  uint64_t rows = row ? NR_IM2COL_BAND_BYTES / row : (uint64_t)p->oh;
  return rows < 1 ? 1 : rows > (uint64_t)p->oh ? p->oh : (int32_t)rows;
}

/* One group's product over the band of output rows [oh0, oh1): the band's columns,
 * then Y_g[:, band] = W_g * col with the epilogue, at leading dimension oh * ow. */
static void im2col_band(nr_threadpool *pool, const conv_p *q, const float *xg,
                        nr_gemm_operand w, float *col, void *gs, float *yg, const float *bg,
                        const float *rg, int64_t oh0, int64_t oh1, int threads) {
  int64_t mg = q->m / q->group, k = (int64_t)(q->c / q->group) * q->kh * q->kw;
  int64_t ohw = (int64_t)q->oh * q->ow, off = oh0 * q->ow, n = (oh1 - oh0) * q->ow;
  col_job j = {q, xg, col, 0, oh0, oh1};
  nr_parallel_for(pool, k, 1, threads, col_rows_plain, &j);
  nr_epilogue ep = make_ep(q, bg, true, rg ? rg + off : NULL, ohw);
  nr_gemm(q->gemm, mg, n, k, 1.0f, w, (nr_gemm_operand){col, n, false, false}, yg + off, ohw,
          &ep, gs, pool, threads);
}

#define GROUP_WORKER_MAX_BYTES (64ull << 20)

uint64_t nr_conv_im2col_worker_bytes(const conv_p *p) {
  int64_t mg = p->m / p->group, k = (int64_t)(p->c / p->group) * p->kh * p->kw;
  uint64_t col = (uint64_t)nr_conv_im2col_band(p) * p->ow * k * sizeof(float);
  return nr_conv_align64(col) +
         nr_conv_align64(nr_gemm_scratch_size(p->gemm, mg, (int64_t)p->oh * p->ow, k, 1));
}

int nr_conv_im2col_workers(const conv_p *p, int threads) {
  int64_t items = (int64_t)p->n * p->group;
  int w = items < threads ? (int)items : threads;
  if (p->group < 2 || w < 2 || (uint64_t)w * nr_conv_im2col_worker_bytes(p) >
                                   GROUP_WORKER_MAX_BYTES)
    return 0;
  return w;
}

typedef struct group_job {
  const nr_exec_args *a;
  const conv_p *q;
  const float *res;   /* the residual in PLAIN layout (nr_conv_res), or NULL */
  const char *packed; /* the packed W of every group */
  char *scratch;      /* one worker's buffers after another */
  bool direct;
} group_job;

/* Items [begin, end) = (image, group) pairs, on this thread's own buffers. */
static void group_task(void *arg, int64_t begin, int64_t end, int thread) {
  const group_job *j = arg;
  const conv_p *q = j->q;
  const float *x = j->a->in[0], *bias = q->has_bias ? j->a->in[2] : NULL;
  const float *res = j->res;
  int64_t mg = q->m / q->group, cg = q->c / q->group, k = cg * q->kh * q->kw;
  int64_t hw = (int64_t)q->h * q->w, ohw = (int64_t)q->oh * q->ow, band = q->extra;
  size_t sa = nr_conv_align64(nr_gemm_packed_a_size(q->gemm, mg, k));
  char *s = j->scratch + (size_t)thread * nr_conv_im2col_worker_bytes(q);
  size_t cols = nr_conv_align64((size_t)(band * q->ow * k) * sizeof(float));
  for (int64_t i = begin; i < end; i++) {
    int64_t n = i / q->group, g = i % q->group, yo = (n * q->m + g * mg) * ohw;
    const float *xg = x + (n * q->c + g * cg) * hw;
    const float *bg = bias ? bias + g * mg : NULL, *rg = res ? res + yo : NULL;
    float *y = (float *)j->a->out[0] + yo;
    nr_gemm_operand A = {(const float *)(j->packed + sa * g), k, false, true};
    if (j->direct) {
      nr_epilogue ep = make_ep(q, bg, true, rg, ohw);
      nr_gemm(q->gemm, mg, ohw, k, 1.0f, A, (nr_gemm_operand){xg, ohw, false, false}, y,
              ohw, &ep, s, NULL, 1);
      continue;
    }
    for (int64_t oh0 = 0; oh0 < q->oh; oh0 += band)
      im2col_band(NULL, q, xg, A, (float *)s, s + cols, y, bg, rg, oh0,
                  oh0 + band < q->oh ? oh0 + band : q->oh, 1);
  }
}

nr_status nr_conv_im2col_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post, direct = is_direct(&q);
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  const float *x = a->in[0], *bias = q.has_bias ? a->in[2] : NULL;
  float *y = a->out[0];
  int64_t mg = q.m / q.group, cg = q.c / q.group, k = cg * q.kh * q.kw;
  int64_t hw = (int64_t)q.h * q.w, ohw = (int64_t)q.oh * q.ow;
  char *s = a->scratch;
  const char *packed = nr_conv_packed_w(a, &q, CONV_PACK_GEMM_A, &s);
  size_t sa = nr_conv_align64(nr_gemm_packed_a_size(q.gemm, mg, k));
  int64_t band = q.extra;
  if (!direct && (band < 1 || band > nr_conv_im2col_band(&q)))
    return nr_errorf(a->err, NR_ERR_INVALID_MODEL,
                     "%s: band of %lld output rows (at most %d for this conv)",
                     a->step->tactic->id, (long long)band, nr_conv_im2col_band(&q));
  size_t cols = direct ? 0 : nr_conv_align64(sizeof(float) * (size_t)(band * q.ow * k));
  float *col = (float *)s;
  void *gs = s + cols;
  int threads = nr_conv_threads(a);
  int workers = nr_conv_im2col_workers(&q, threads);
  uint64_t used = (uint64_t)(s - (char *)a->scratch);
  if (a->step->scratch < used + workers * nr_conv_im2col_worker_bytes(&q))
    workers = 0; /* built for fewer threads than this pool has */
  if (workers) {
    group_job j = {a, &q, res, packed, s, direct};
    nr_parallel_for(a->pool, (int64_t)q.n * q.group, 1, workers, group_task, &j);
  }
  for (int64_t n = 0; n < q.n && !workers; n++)
    for (int64_t g = 0; g < q.group; g++) {
      const float *xg = x + (n * q.c + g * cg) * hw;
      int64_t yo = (n * q.m + g * mg) * ohw;
      const float *bg = bias ? bias + g * mg : NULL, *rg = res ? res + yo : NULL;
      nr_gemm_operand A = {(const float *)(packed + sa * g), k, false, true};
      if (!direct) {
        for (int64_t oh0 = 0; oh0 < q.oh; oh0 += band)
          im2col_band(a->pool, &q, xg, A, col, gs, y + yo, bg, rg, oh0,
                      oh0 + band < q.oh ? oh0 + band : q.oh, threads);
        continue;
      }
      nr_epilogue ep = make_ep(&q, bg, true, rg, ohw);
      nr_gemm(q.gemm, mg, ohw, k, 1.0f, A, (nr_gemm_operand){xg, ohw, false, false}, y + yo,
              ohw, &ep, gs, a->pool, threads);
    }
  if (q.opts & CONV_OPT_SPLIT_EPI)
    nr_conv_epilogue_pass(a, NR_LAYOUT_PLAIN, &q, bias, res, threads);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}

/* NHWC, or (CONV_OPT_ROW) a PLAIN tensor with a 1x1 plane, whose bytes are NHWC's. */
static nr_status run_nhwc(const nr_exec_args *a, nr_layout layout) {
  conv_p q = *conv_params(a->step);
  bool post, direct = is_direct(&q);
  const float *res = nr_conv_res(a, layout, &q, &post);
  const float *x = a->in[0], *bias = q.has_bias ? a->in[2] : NULL;
  float *y = a->out[0];
  int64_t mg = q.m / q.group, cg = q.c / q.group, k = cg * q.kh * q.kw;
  int64_t hw = (int64_t)q.h * q.w, ohw = (int64_t)q.oh * q.ow;
  char *s = a->scratch;
  const char *packed = nr_conv_packed_w(a, &q, CONV_PACK_NHWC_B, &s);
  size_t sb = nr_conv_align64(nr_gemm_packed_b_size(q.gemm, k, mg));
  size_t cols = direct ? 0 : nr_conv_align64(sizeof(float) * (size_t)(ohw * k));
  float *col = (float *)s;
  void *gs = s + cols;
  int threads = nr_conv_threads(a);
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t g = 0; g < q.group; g++) {
      const float *xn = x + n * hw * q.c;
      if (!direct) {
        col_job j = {&q, xn, col, g * cg};
        nr_parallel_for(a->pool, ohw, 16, threads, col_rows_nhwc, &j);
      }
      int64_t yo = n * ohw * q.m + g * mg;
      nr_epilogue ep = make_ep(&q, bias ? bias + g * mg : NULL, false,
                               res ? res + yo : NULL, q.m);
      nr_gemm_operand A = {direct ? xn + g * cg : col, direct ? q.c : k, false, false};
      nr_gemm_operand B = {(const float *)(packed + sb * g), mg, false, true};
      nr_gemm(q.gemm, ohw, mg, k, 1.0f, A, B, y + yo, q.m, &ep, gs, a->pool, threads);
    }
  if (q.opts & CONV_OPT_SPLIT_EPI)
    nr_conv_epilogue_pass(a, layout, &q, bias, res, threads);
  nr_conv_finish(a, layout, conv_params(a->step), post);
  return NR_OK;
}

nr_status nr_conv_nhwc_run(const nr_exec_args *a) {
  return run_nhwc(a, NR_LAYOUT_NHWC);
}

nr_status nr_conv_1x1_run(const nr_exec_args *a) {
  if (conv_params(a->step)->opts & CONV_OPT_ROW)
    return run_nhwc(a, NR_LAYOUT_PLAIN);
  return nr_conv_im2col_run(a);
}
