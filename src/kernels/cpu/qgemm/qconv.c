/* qconv.c - the int8 PLAIN convolutions: nr_qs8_conv_1x1_* (Y_g = W_g x X_g, X read
 * as float32 and quantized while the GEMM packs it) and nr_qs8_conv_im2col_* (Y_g =
 * W_g x col_g with the columns in u8), both on the W_A micro-kernels of
 * qgemm_ukernels.inc.
 *
 * Key decisions. im2col quantizes each input element once, not once per kernel tap:
 * the image is first quantized into a u8 plane (every channel in parallel), and the
 * columns are byte copies of it, padding written as the zero point (what a real 0
 * quantizes to). A 3x3 convolution thus quantizes 1/9 of what quantizing float
 * columns would. The columns are never stored whole: the GEMM asks for each k-row of
 * the block it packs (nr_qgemm_act.rows) and packs it from a staging area in L1, so
 * the 1.8 MB column matrix of a resnet 56x56 layer is neither written to nor read back
 * from memory (it was a tenth of resnet50's int8 time). Bias is folded into the
 * dequantization; the residual and activation run in the GEMM's epilogue
 * (conv.epilogue=separate: in nr_conv_epilogue_pass afterwards), through the fp32 conv
 * helpers.
 *
 * Between int8 layers (the int8_chain pass) X may arrive as uint8 on this step's grid:
 * the 1x1 GEMMs pack the bytes as they are, and im2col reads them in place of its
 * quantized plane. Y may leave as uint8 on the next layer's grid (nr_qgemm_to_u8),
 * which the pass allows only where the whole epilogue runs inside the GEMM. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/qgemm/qgemm_tactic.h"
#include "util/error.h"

#include <string.h>

static nr_qgemm_cfg qcfg(const conv_p *p) {
  nr_qgemm_cfg c;
  memcpy(&c, &p->gemm, sizeof c);
  return c;
}

static uint64_t align64(uint64_t n) {
  return (n + 63) / 64 * 64;
}

uint64_t nr_qconv_im2col_bytes(int64_t c, int64_t h, int64_t w) {
  return align64((uint64_t)(c * h * w) + 1); /* + the byte a stride-2 load may touch */
}

/* The epilogue the GEMM applies after dequantization (the bias is in it already). */
static nr_epilogue conv_ep(const conv_p *q, const float *res, int64_t ldr) {
  nr_epilogue ep = {NULL, false, res, ldr, 1.0f, (nr_act)q->act, q->act_a, q->act_b};
  nr_epilogue none = {0};
  return (q->opts & CONV_OPT_SPLIT_EPI) ? none : ep;
}

/* Bytes per element of the step's input 0: 1 when the int8_chain pass made it uint8. */
static int64_t x_size(const nr_exec_args *a) {
  return a->in_slot[0]->dtype == NR_DTYPE_UINT8 ? 1 : (int64_t)sizeof(float);
}

/* One group's GEMM into Y from element yo on (rows ldc apart), float or requantized. */
static void group_gemm(const nr_exec_args *a, const conv_p *q, int64_t m, int64_t n,
                       int64_t k, const char *w, nr_qgemm_act act,
                       const nr_qgemm_dequant *dq, int64_t yo, int64_t ldc,
                       const nr_epilogue *ep, void *scratch, int threads) {
  nr_qgemm_y8 y8;
  if (qt_y8(a, yo, ldc, &y8))
    nr_qgemm_to_u8(qcfg(q), m, n, k, w, act, dq, &y8, ep, scratch, a->pool, threads);
  else
    nr_qgemm(qcfg(q), m, n, k, w, act, dq, (float *)a->out[0] + yo, ldc, ep, scratch,
             a->pool, threads);
}

/* A uint8 Y leaves no room for work after the GEMM (the pass never asks for it). */
static nr_status check_y8(const nr_exec_args *a, const conv_p *q, bool post) {
  if (a->out_slot[0]->dtype != NR_DTYPE_UINT8 || (!post && !(q->opts & CONV_OPT_SPLIT_EPI)))
    return NR_OK;
  return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: a uint8 output with an epilogue after "
                   "the product", a->step->tactic->id);
}

/* conv.epilogue=separate: residual and activation over all of Y afterwards (bias was
 * applied by the dequantization); then a residual that arrived in another layout. */
static void finish(const nr_exec_args *a, nr_layout l, const conv_p *q, const float *res,
                   bool post, int threads) {
  if (q->opts & CONV_OPT_SPLIT_EPI)
    nr_conv_epilogue_pass(a, l, q, NULL, res, threads);
  nr_conv_finish(a, l, conv_params(a->step), post);
}

nr_status nr_qconv_1x1_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  nr_status s = check_y8(a, &q, post);
  if (s)
    return s;
  const char *x = a->in[0];
  int64_t xs = x_size(a);
  const qt_header *h = qt_hdr(a);
  int64_t mg = q.m / q.group, cg = q.c / q.group, hw = (int64_t)q.h * q.w;
  int threads = nr_conv_threads(a);
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t g = 0; g < q.group; g++) {
      int64_t yo = (n * q.m + g * mg) * hw;
      nr_epilogue ep = conv_ep(&q, res ? res + yo : NULL, hw);
      nr_qgemm_dequant dq = qt_dequant(a, g * mg);
      const char *w = (const char *)a->packed + h->w_off + h->w_unit * (uint64_t)g;
      nr_qgemm_act act = qt_act(a, x + xs * (n * q.c + g * cg) * hw, hw, false, xs == 1);
      group_gemm(a, &q, mg, hw, cg, w, act, &dq, yo, hw, &ep, a->scratch, threads);
    }
  finish(a, NR_LAYOUT_PLAIN, &q, res, post, threads);
  return NR_OK;
}

/* NHWC: Y_g[HW x M/g] = X_g[HW x C/g] x W_g^T on the W_B kernels, X rows C floats
 * apart and Y rows M apart, so groups are column ranges of the same matrices. */
nr_status nr_qconv_nhwc_1x1_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_NHWC, &q, &post);
  nr_status s = check_y8(a, &q, post);
  if (s)
    return s;
  const char *x = a->in[0];
  int64_t xs = x_size(a);
  const qt_header *h = qt_hdr(a);
  int64_t mg = q.m / q.group, cg = q.c / q.group, hw = (int64_t)q.h * q.w;
  int threads = nr_conv_threads(a);
  for (int64_t n = 0; n < q.n; n++)
    for (int64_t g = 0; g < q.group; g++) {
      int64_t yo = n * hw * q.m + g * mg;
      nr_epilogue ep = conv_ep(&q, res ? res + yo : NULL, q.m);
      nr_qgemm_dequant dq = qt_dequant(a, g * mg);
      const char *w = (const char *)a->packed + h->w_off + h->w_unit * (uint64_t)g;
      nr_qgemm_act act = qt_act(a, x + xs * (n * hw * q.c + g * cg), q.c, false, xs == 1);
      group_gemm(a, &q, hw, mg, cg, w, act, &dq, yo, q.m, &ep, a->scratch, threads);
    }
  finish(a, NR_LAYOUT_NHWC, &q, res, post, threads);
  return NR_OK;
}

/* ---- u8 im2col ------------------------------------------------------------------- */

typedef struct quant_job {
  const float *x;
  uint8_t *xq;
  int64_t hw;
  const qt_header *h;
} quant_job;

static void quant_planes(void *arg, int64_t begin, int64_t end, int thread) {
  const quant_job *j = arg;
  nr_qgemm_quantize_row(j->x + begin * j->hw, 1, (end - begin) * j->hw, j->h->inv_scale,
                        j->h->zero_point, j->h->qmax, j->xq + begin * j->hw);
}

typedef struct col_ctx {
  const conv_p *p;
  const uint8_t *xq;     /* the group's first channel plane */
  const uint64_t *masks; /* nr_qconv_masks' table when in use, else NULL */
  int64_t chunks;        /* mask words per tap */
  uint8_t zp;
  bool vec; /* the AVX-512 segments */
} col_ctx;

/* Output columns [*lo, *hi) whose input column ow * sw + off lies inside [0, w). */
static void valid_cols(const conv_p *p, int64_t off, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + p->sw - 1) / p->sw;
  int64_t b = p->w - off <= 0 ? 0 : (p->w - off - 1) / p->sw + 1;
  *lo = a < p->ow ? a : p->ow;
  *hi = b < *lo ? *lo : b > p->ow ? p->ow : b;
}

/* Output rows [*lo, *hi) whose input row oh * sh + off lies inside [0, h). */
static void valid_rows(const conv_p *p, int64_t off, int64_t *lo, int64_t *hi) {
  int64_t a = off >= 0 ? 0 : (-off + p->sh - 1) / p->sh;
  int64_t b = p->h - off <= 0 ? 0 : (p->h - off - 1) / p->sh + 1;
  *lo = a < p->oh ? a : p->oh;
  *hi = b < *lo ? *lo : b > p->oh ? p->oh : b;
}

int64_t nr_qconv_masks(const conv_p *p, uint64_t *out) {
  int64_t ohw = (int64_t)p->oh * p->ow, chunks = (ohw + 63) / 64;
  int64_t taps = (int64_t)p->kh * p->kw;
  if (p->sw != 1 || p->sh != 1 || p->ow != p->w || taps * chunks > 8192)
    return 0;
  for (int64_t t = 0; out && t < taps; t++) {
    int64_t kh = t / p->kw, kw = t % p->kw, c0, c1, r0, r1;
    valid_cols(p, kw * p->dw - p->pl, &c0, &c1);
    valid_rows(p, kh * p->dh - p->pt, &r0, &r1);
    uint64_t *m = out + t * chunks;
    memset(m, 0, sizeof(uint64_t) * (size_t)chunks);
    for (int64_t px = r0 * p->ow; px < r1 * p->ow; px++)
      if (px % p->ow >= c0 && px % p->ow < c1)
        m[px / 64] |= (uint64_t)1 << (px % 64);
  }
  return taps * chunks;
}

static void seg_portable(uint8_t *out, const uint8_t *xr, int64_t lo, int64_t hi, int64_t a,
                         int64_t b, int sw, uint8_t zp) {
  int64_t v0 = lo > a ? lo : a, v1 = hi < b ? hi : b;
  if (!xr || v0 >= v1) {
    memset(out, zp, (size_t)(b - a));
    return;
  }
  memset(out, zp, (size_t)(v0 - a));
  if (sw == 1)
    memcpy(out + (v0 - a), xr + v0, (size_t)(v1 - v0));
  else
    for (int64_t i = v0; i < v1; i++)
      out[i - a] = xr[i * sw];
  memset(out + (v1 - a), zp, (size_t)(b - v1));
}

/* One row: tap (kh, kw) of input plane x, output pixels [p0, p0 + n). */
static void col_row(const col_ctx *j, const uint8_t *x, int64_t kh, int64_t kw, int64_t p0,
                    int64_t n, uint8_t *out) {
  const conv_p *p = j->p;
  if (j->masks) { /* stride 1, output rows as wide as the input's: x shifted */
    int64_t shift = (kh * p->dh - p->pt) * p->w + kw * p->dw - p->pl;
    nr_qconv_col_masked__avx512(out, x + shift, j->masks + (kh * p->kw + kw) * j->chunks,
                                p0, n, j->zp);
    return;
  }
  int64_t off = kw * p->dw - p->pl, lo, hi;
  valid_cols(p, off, &lo, &hi);
  int64_t oh = p0 / p->ow, ow0 = p0 % p->ow;
  while (n > 0) {
    int64_t len = p->ow - ow0 < n ? p->ow - ow0 : n;
    int64_t ih = oh * p->sh - p->pt + kh * p->dh;
    const uint8_t *xr = ih >= 0 && ih < p->h ? x + ih * p->w + off : NULL;
    if (j->vec)
      nr_qconv_col_seg__avx512(out, xr, lo, hi, ow0, ow0 + len, p->sw, j->zp);
    else
      seg_portable(out, xr, lo, hi, ow0, ow0 + len, p->sw, j->zp);
    out += len, n -= len, oh++, ow0 = 0;
  }
}

/* nr_qgemm_rows_fn: rows r = (ci, kh, kw) of the columns, output pixels [p0, p0 + n):
 * each tap's input byte for every pixel. */
static void col_rows(const void *ctx, int64_t r, int count, int64_t p0, int64_t n,
                     uint8_t *out, int64_t ld) {
  const col_ctx *j = ctx;
  const conv_p *p = j->p;
  int64_t kk = (int64_t)p->kh * p->kw, ci = r / kk, kh = (r % kk) / p->kw, kw = r % p->kw;
  for (int u = 0; u < count; u++, out += ld) {
    col_row(j, j->xq + ci * (int64_t)p->h * p->w, kh, kw, p0, n, out);
    if (++kw == p->kw && (kw = 0, ++kh == p->kh))
      kh = 0, ci++;
  }
}

nr_status nr_qconv_im2col_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  nr_status s = check_y8(a, &q, post);
  if (s)
    return s;
  const float *x = a->in[0];
  bool x8 = x_size(a) == 1; /* already the quantized image: no plane to make */
  const qt_header *h = qt_hdr(a);
  int64_t mg = q.m / q.group, cg = q.c / q.group, k = cg * q.kh * q.kw;
  int64_t hw = (int64_t)q.h * q.w, ohw = (int64_t)q.oh * q.ow;
  uint8_t *xq = a->scratch;
  void *gs = xq + nr_qconv_im2col_bytes(q.c, q.h, q.w);
  int threads = nr_conv_threads(a);
  bool vec = q.sw <= 2 && (nr_cpu_isa() & NR_ISA_AVX512);
  const uint64_t *masks = vec && h->extra_off
                              ? (const uint64_t *)((const char *)a->packed + h->extra_off)
                              : NULL;
  for (int64_t n = 0; n < q.n; n++) {
    if (x8) {
      xq = (uint8_t *)a->in[0] + n * q.c * hw;
    } else {
      quant_job qj = {x + n * q.c * hw, xq, hw, h};
      nr_parallel_for(a->pool, q.c, hw >= 4096 ? 1 : 4096 / hw, threads, quant_planes, &qj);
    }
    for (int64_t g = 0; g < q.group; g++) {
      col_ctx cc = {
          &q, xq + g * cg * hw, masks, masks ? (ohw + 63) / 64 : 0, (uint8_t)h->zero_point,
          vec};
      nr_qgemm_act act = qt_act(a, &cc, 0, false, true);
      act.rows = col_rows;
      int64_t yo = (n * q.m + g * mg) * ohw;
      nr_epilogue ep = conv_ep(&q, res ? res + yo : NULL, ohw);
      nr_qgemm_dequant dq = qt_dequant(a, g * mg);
      const char *w = (const char *)a->packed + h->w_off + h->w_unit * (uint64_t)g;
      group_gemm(a, &q, mg, ohw, k, w, act, &dq, yo, ohw, &ep, gs, threads);
    }
  }
  finish(a, NR_LAYOUT_PLAIN, &q, res, post, threads);
  return NR_OK;
}
