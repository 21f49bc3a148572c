/* qgemm.c - the int8 GEMM: micro-kernel list and family record, weight quantization
 * and packing, activation quantization while packing, the loop nest's hooks and the
 * epilogue (contract: qgemm.h; blocking, splitting, the packing plan, the dispatch
 * and the loop nest are gemm_common's, shared with gemm and lpgemm).
 *
 * Key decisions.
 *  - Packed format: a panel of `width` rows (A) or columns (B) stores, for each group
 *    of 4 consecutive k, one 4-byte word per row or column: bytes (p * width + i) * 4
 *    + u hold element (i, 4p + u). A block of k starting at pc lives at byte offset
 *    pc * padded_width (kc is a multiple of 4), so W packed at build time is indexed,
 *    never copied, and depends only on the micro-kernel and kc. Padding (k beyond K,
 *    channels beyond the tile) is zero; zero weights make any activation padding
 *    harmless.
 *  - The activation operand is quantized while its block is packed, once per block:
 *    for W_A (convolution) the loop over its columns (jc, nc) is outermost and each
 *    (jc, pc) block of B is packed once and reused by every row block of W; for W_B
 *    (Gemm/MatMul) the loop over its rows (ic, mc) is outermost and each (ic, pc)
 *    block of A is packed once and swept against all of W's columns: the shared
 *    nest's two orders (wa_ops, wb_ops).
 *  - Between k blocks C holds int32 partial sums; the micro-kernel's last k block
 *    dequantizes in registers and writes floats. The usual epilogues (residual with
 *    beta 1, ReLU, Clip) are applied there too, before the store; anything else (a
 *    bias of another shape, other activations) and edge tiles go through the fp32
 *    epilogue while the tile is in L1.
 *  - Threading as the fp32 GEMM: one part per thread along M or N in whole tiles,
 *    each part runs the whole nest with its own scratch, no barriers. The preferred
 *    split is the activation's own dimension (no block is quantized twice).
 *  - An 8-bit result (nr_qgemm_to_u8) runs the same nest, tiles and epilogue into a
 *    float block of the thread's scratch instead of C, and requantizes each block of
 *    rows once it is final, a row at a time: the bytes equal quantizing nr_qgemm's
 *    floats, since they are the same floats. */
#include "kernels/cpu/qgemm/qgemm_impl.h"
/* The fp32 family's epilogue bodies (nr_gemm_epilogue__avx512 / _portable): the int8
 * GEMM applies the very same epilogue, not a copy of it. */
#include "kernels/cpu/gemm/gemm_common.h"
#include "kernels/cpu/gemm/gemm_impl.h"
/* nr_quantize_u8: an 8-bit result for a oneDNN reader rounds as its quantizer. */
#include "kernels/cpu/onednn_q/onednn_q.h"
#include "util/threadpool.h"

#include <math.h>
#include <string.h>

/* Below this many multiply-adds a problem runs on one thread. */
#define PARALLEL_MIN_MACS (64 * 64 * 64)

static const nr_qgemm_ukernel ukernels[] = {
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax) {#name, mr, nr, isa, wside, qmax},
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL
};

static const nr_qgemm_ukernel_fn ukernel_fns[] = {
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax) name,
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL
};

static const nr_gemm_kdesc kdescs[] = {
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax)                                   \
  {#name, mr, nr, (wside) == NR_QGEMM_W_A ? NR_GEMM_DIM_N : NR_GEMM_DIM_M},
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL
};

/* The int8 family for the shared driver: the activations' own dimension split first
 * (N for W_A, M for W_B: no block is quantized twice), kc in whole 4-byte k groups,
 * the multiply-adds rule for every product (no class of few rows), and a part to
 * whichever thread claims it. */
const nr_gemm_family nr_qgemm_family = {
    .kernels = kdescs,
    .count = NR_QGEMM_UK_COUNT,
    .fallback = 0,
    .kc_unit = 4,
    .small_m = 0,
    .min_b_values = 0,
    .min_macs = PARALLEL_MIN_MACS,
    .any_thread = true,
};

_Static_assert(sizeof ukernels / sizeof ukernels[0] == NR_QGEMM_UK_COUNT, "ukernel list");
#define NR_QGEMM_UKERNEL(name, mr, nr, isa, wside, qmax)                                   \
  _Static_assert((mr) <= NR_QGEMM_MAX_MR && (nr) <= NR_QGEMM_MAX_NR,                       \
                 #name ": tile larger than NR_QGEMM_MAX_MR x NR_QGEMM_MAX_NR");
#include "kernels/cpu/qgemm/qgemm_ukernels.inc"
#undef NR_QGEMM_UKERNEL

int nr_qgemm_ukernel_count(void) {
  return NR_QGEMM_UK_COUNT;
}

const nr_qgemm_ukernel *nr_qgemm_ukernel_get(int i) {
  return nr_gemm_family_has(&nr_qgemm_family, i) ? &ukernels[i] : NULL;
}

nr_qgemm_ukernel_fn nr_qgemm_ukernel_fn_get(int i) {
  return nr_gemm_family_has(&nr_qgemm_family, i) ? ukernel_fns[i] : NULL;
}

int nr_qgemm_ukernel_find(const char *name) {
  return nr_gemm_family_find(&nr_qgemm_family, name);
}

/* nr_gemm_even_kc in whole k groups of 4. */
static uint16_t even_kc(int64_t k, int64_t max) {
  return nr_gemm_even_kc(k, max, 4);
}

nr_qgemm_cfg nr_qgemm_default_cfg(int uk, int64_t m, int64_t n, int64_t k) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  if (!u)
    uk = 0, u = &ukernels[0];
  /* A micro-panel of the operand reused across the inner loop (kc x nr or mr x kc
   * bytes) stays in L1 up to kc = 1024 for 32-wide tiles (32 KiB of 48); blocks of
   * 192 rows x kc (W_A's weights, W_B's activations) and W_A's block of activation
   * columns (kc x 512) stay in L2. nc = 1024 measured no faster in nr_qgemm_bench
   * and doubles each thread's scratch. */
  int64_t kmax = u->nr > 32 ? 512 : 1024;
  int64_t mc = nr_gemm_round_up(192, u->mr) / u->mr * u->mr;
  return (nr_qgemm_cfg){(uint16_t)uk, (uint16_t)mc, even_kc(k, kmax), 512};
}

/* ---- blocking -------------------------------------------------------------------- */

typedef nr_gemm_blocking blocking;

static nr_gemm_cfg gemm_cfg(nr_qgemm_cfg c) {
  return (nr_gemm_cfg){c.ukernel, c.mc, c.kc, c.nc};
}

static blocking get_blocking(nr_qgemm_cfg cfg) {
  return nr_gemm_blocking_get(&nr_qgemm_family, gemm_cfg(cfg));
}

static int wside_of(nr_qgemm_cfg cfg) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(cfg.ukernel);
  return u ? u->wside : ukernels[0].wside;
}

/* ---- weights ---------------------------------------------------------------------- */

bool nr_qgemm_quantize_w(int64_t channels, int64_t k, const float *w, int64_t stride_c,
                         int64_t stride_k, int8_t *q, float *scale, int32_t *wsum) {
  for (int64_t ch = 0; ch < channels; ch++) {
    const float *row = w + ch * stride_c;
    float amax = 0.0f;
    for (int64_t p = 0; p < k; p++) {
      float v = fabsf(row[p * stride_k]);
      if (!isfinite(v))
        return false;
      amax = v > amax ? v : amax;
    }
    float s = amax > 0.0f ? amax / 127.0f : 1.0f, inv = 1.0f / s;
    int32_t sum = 0;
    for (int64_t p = 0; p < k; p++) {
      float v = nearbyintf(row[p * stride_k] * inv);
      int32_t iq = (int32_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
      q[ch * k + p] = (int8_t)iq;
      sum += iq;
    }
    scale[ch] = s;
    wsum[ch] = sum;
  }
  return true;
}

static int w_width(nr_qgemm_cfg cfg) {
  blocking bl = get_blocking(cfg);
  return wside_of(cfg) == NR_QGEMM_W_A ? bl.mr : bl.nr;
}

size_t nr_qgemm_packed_w_size(nr_qgemm_cfg cfg, int64_t channels, int64_t k) {
  return (size_t)nr_gemm_packed_elems(&nr_qgemm_family, w_width(cfg), channels, k);
}

void nr_qgemm_pack_w(nr_qgemm_cfg cfg, int64_t channels, int64_t k, const int8_t *q,
                     void *out_) {
  blocking bl = get_blocking(cfg);
  int width = w_width(cfg);
  int64_t cpad = nr_gemm_round_up(channels, width);
  int8_t *out = out_;
  memset(out, 0, nr_qgemm_packed_w_size(cfg, channels, k));
  for (int64_t pc = 0; pc < k; pc += bl.kc) {
    int64_t kb = nr_gemm_min64(bl.kc, k - pc), kb4 = nr_gemm_round_up(kb, 4);
    int8_t *block = out + pc * cpad;
    for (int64_t ch = 0; ch < channels; ch++) {
      int8_t *panel = block + (ch / width) * width * kb4;
      for (int64_t p = 0; p < kb; p++)
        panel[((p / 4) * width + ch % width) * 4 + p % 4] = q[ch * k + pc + p];
    }
  }
}

void nr_qgemm_dequant_build(int64_t channels, const float *w_scale, const int32_t *wsum,
                            float x_scale, int32_t x_zero_point, float alpha,
                            const float *bias_in, int64_t bias_n, float bias_scale,
                            float *scale, int32_t *corr, float *bias) {
  for (int64_t ch = 0; ch < channels; ch++) {
    scale[ch] = alpha * x_scale * w_scale[ch];
    corr[ch] = x_zero_point * wsum[ch];
    bias[ch] = bias_in ? bias_scale * bias_in[bias_n == 1 ? 0 : ch] : 0.0f;
  }
}

/* ---- activations ------------------------------------------------------------------ */

static void quantize_row_portable(const float *x, int64_t stride, int64_t n, float inv,
                                  int32_t zp, int32_t qmax, uint8_t *out) {
  for (int64_t i = 0; i < n; i++)
    out[i] = nr_qgemm_quantize_x(x[i * stride], inv, zp, qmax);
}

void nr_qgemm_quantize_row(const float *x, int64_t stride, int64_t n, float inv_scale,
                           int32_t zero_point, int32_t qmax, uint8_t *out) {
  unsigned isa = nr_cpu_isa();
  if (stride == 1 && (isa & NR_ISA_AVX512))
    nr_qgemm_quantize_row__avx512(x, n, inv_scale, zero_point, qmax, out);
  else if (stride == 1 && (isa & NR_ISA_AVX2))
    nr_qgemm_quantize_row__avx2(x, n, inv_scale, zero_point, qmax, out);
  else
    quantize_row_portable(x, stride, n, inv_scale, zero_point, qmax, out);
}

/* The activation operand as the packers see it. */
typedef struct act_src {
  nr_qgemm_act x;
  bool kmajor; /* element (t, p) at data[p * ld + t], else data[t * ld + p] */
  int32_t qmax;
} act_src;

/* k-major source, portable: rows p0..p0+kb (each holding the tile dimension t) into
 * panels of width t. */
static void pack_kmajor_portable(const act_src *s, int64_t t0, int64_t cols, int64_t p0,
                                 int64_t kb, int width, uint8_t *out) {
  int64_t kq = (kb + 3) / 4;
  for (int64_t t = 0; t < nr_gemm_round_up(cols, width); t++) {
    uint8_t *dst = out + (t / width) * width * kq * 4 + (t % width) * 4;
    for (int64_t p = 0; p < kq * 4; p++) {
      uint8_t v = 0;
      if (t < cols && p < kb) {
        int64_t at = (p0 + p) * s->x.ld + t0 + t;
        v = s->x.u8 ? ((const uint8_t *)s->x.data)[at]
                    : nr_qgemm_quantize_x(((const float *)s->x.data)[at], s->x.inv_scale,
                                          s->x.zero_point, s->qmax);
      }
      dst[(p / 4) * width * 4 + p % 4] = v;
    }
  }
}

/* t-major source: each row t holds kb consecutive k; quantized (or copied) into a
 * staging row, then spread one 4-byte word per k group. */
static void pack_tmajor(const act_src *s, int64_t t0, int64_t cols, int64_t p0, int64_t kb,
                        int width, uint8_t *out, uint8_t *stage) {
  int64_t kq = (kb + 3) / 4;
  memset(stage + kb, 0, (size_t)(kq * 4 - kb));
  for (int64_t t = 0; t < nr_gemm_round_up(cols, width); t++) {
    uint32_t *dst = (uint32_t *)(void *)(out + (t / width) * width * kq * 4) + t % width;
    if (t >= cols) {
      for (int64_t q = 0; q < kq; q++)
        dst[q * width] = 0;
      continue;
    }
    int64_t at = (t0 + t) * s->x.ld + p0;
    if (s->x.u8)
      memcpy(stage, (const uint8_t *)s->x.data + at, (size_t)kb);
    else
      nr_qgemm_quantize_row((const float *)s->x.data + at, 1, kb, s->x.inv_scale,
                            s->x.zero_point, s->qmax, stage);
    for (int64_t q = 0; q < kq; q++) {
      uint32_t w;
      memcpy(&w, stage + 4 * q, 4);
      dst[q * width] = w;
    }
  }
}

/* One group of 4 k-rows (rows of them valid, ld apart, u8) into word q of the panels
 * of a block of kq groups, portable. */
static void pack_quad_portable(const uint8_t *src, int64_t ld, int rows, int64_t cols,
                               int width, int64_t kq, int64_t q, uint8_t *out) {
  for (int64_t t = 0; t < nr_gemm_round_up(cols, width); t++) {
    uint8_t *dst = out + (t / width) * width * kq * 4 + (q * width + t % width) * 4;
    for (int u = 0; u < 4; u++)
      dst[u] = u < rows && t < cols ? src[u * ld + t] : 0;
  }
}

/* Rows made on demand (nr_qgemm_act.rows): four at a time into the staging area (ld
 * = cols rounded up to 64), then packed as one k group. */
static void pack_rows_fn(const act_src *s, int64_t t0, int64_t cols, int64_t p0, int64_t kb,
                         int width, uint8_t *out, uint8_t *stage) {
  int64_t kq = (kb + 3) / 4, ld = nr_gemm_round_up(cols, 64);
  unsigned isa = nr_cpu_isa();
  for (int64_t q = 0; q < kq; q++) {
    int rows = kb - 4 * q >= 4 ? 4 : (int)(kb - 4 * q);
    s->x.rows(s->x.data, p0 + 4 * q, rows, t0, cols, stage, ld);
    if ((isa & NR_ISA_AVX512) && width % 16 == 0)
      nr_qgemm_pack_quad_u8__avx512(stage, ld, rows, cols, width, kq, q, out);
    else if ((isa & NR_ISA_AVX2) && width % 8 == 0)
      nr_qgemm_pack_quad_u8__avx2(stage, ld, rows, cols, width, kq, q, out);
    else
      pack_quad_portable(stage, ld, rows, cols, width, kq, q, out);
  }
}

/* Packs the activation block of tile-dimension range [t0, t0 + cols) and k range
 * [p0, p0 + kb) into panels of `width`. */
static void pack_act(const act_src *s, int64_t t0, int64_t cols, int64_t p0, int64_t kb,
                     int width, uint8_t *out, uint8_t *stage) {
  if (s->x.rows) {
    pack_rows_fn(s, t0, cols, p0, kb, width, out, stage);
    return;
  }
  if (!s->kmajor) {
    pack_tmajor(s, t0, cols, p0, kb, width, out, stage);
    return;
  }
  unsigned isa = nr_cpu_isa();
  const uint8_t *b8 = (const uint8_t *)s->x.data + p0 * s->x.ld + t0;
  const float *bf = (const float *)s->x.data + p0 * s->x.ld + t0;
  if ((isa & NR_ISA_AVX512) && width % 16 == 0) {
    if (s->x.u8)
      nr_qgemm_pack_kmajor_u8__avx512(b8, s->x.ld, kb, cols, width, out);
    else
      nr_qgemm_pack_kmajor_f32__avx512(bf, s->x.ld, kb, cols, width, s->x.inv_scale,
                                       s->x.zero_point, s->qmax, out);
  } else if ((isa & NR_ISA_AVX2) && width % 8 == 0) {
    if (s->x.u8)
      nr_qgemm_pack_kmajor_u8__avx2(b8, s->x.ld, kb, cols, width, out);
    else
      nr_qgemm_pack_kmajor_f32__avx2(bf, s->x.ld, kb, cols, width, s->x.inv_scale,
                                     s->x.zero_point, s->qmax, out);
  } else {
    pack_kmajor_portable(s, t0, cols, p0, kb, width, out);
  }
}

/* ---- the loop nest ---------------------------------------------------------------- */

typedef struct qgemm_job {
  nr_gemm_nest nest;
  blocking bl;          /* nest.plan.bl */
  nr_qgemm_ukernel_fn uk;
  int wside;
  int64_t m, n, k;
  const uint8_t *w;
  act_src x;
  nr_qgemm_dequant dq;
  float *c;
  int64_t ldc;
  const nr_epilogue *ep; /* NULL when it has nothing to do */
  nr_gemm_epilogue_fn epi;
  int fuse;             /* NR_QGEMM_RES/RELU/CLIP when full tiles apply ep in registers */
  const nr_qgemm_y8 *y8; /* NULL: c is the output; else c is unused and each thread's
                            float block (cbuf) stands in for it */
  int64_t cbuf_ld;
  uint8_t *scratch;     /* 64-byte aligned */
  int64_t thread_bytes; /* per thread: the activation block, the staging row, cbuf */
  int64_t block_bytes, cbuf_off;
} qgemm_job;

/* The epilogue in the micro-kernel's registers: no bias (per-channel ones are in the
 * dequantization), the residual with beta 1, ReLU or Clip. 0 when ep needs the fp32
 * epilogue. */
static int fusable(const nr_epilogue *ep) {
  if (!ep)
    return 0;
  if (ep->bias || (ep->residual && ep->beta != 1.0f))
    return -1;
  int f = ep->residual ? NR_QGEMM_RES : 0;
  switch (ep->act) {
  case NR_ACT_NONE: return f;
  case NR_ACT_RELU: return f | NR_QGEMM_RELU;
  case NR_ACT_CLIP: return f | NR_QGEMM_CLIP;
  default: return -1;
  }
}

/* Where the tiles of C live: the output itself (row0 = col0 = 0, ldc of C), or for
 * an 8-bit result a thread's float block whose element (0, 0) is C's (row0, col0). */
typedef struct cview {
  float *c;
  int64_t ldc, row0, col0;
} cview;

static inline float *cview_at(const cview *v, int64_t row, int64_t col) {
  return v->c + (row - v->row0) * v->ldc + (col - v->col0);
}

/* An 8-bit result: the finished h x w float tile at c, rows ldc apart, requantized
 * into the output at (row, col). */
static void requant(const qgemm_job *j, const float *c, int64_t ldc, int64_t row,
                    int64_t col, int64_t h, int64_t w) {
  const nr_qgemm_y8 *y = j->y8;
  for (int64_t i = 0; i < h; i++)
    if (y->fma)
      nr_quantize_u8(c + i * ldc, y->c + (row + i) * y->ldc + col, w, y->inv_scale,
                     y->zero_point);
    else
      nr_qgemm_quantize_row(c + i * ldc, 1, w, y->inv_scale, y->zero_point, y->qmax,
                            y->c + (row + i) * y->ldc + col);
}

/* An edge tile (h x w of mr x nr): through a local tile, with the per-channel arrays
 * copied to padded local ones and the fp32 epilogue after. Out of line: its 5 KiB of
 * locals would make every full tile's call probe the stack. */
static __attribute__((noinline)) void run_edge(const qgemm_job *j, int64_t kq,
                                               const uint8_t *ap, const uint8_t *bp,
                                               float *c, int64_t ldc, int64_t row,
                                               int64_t col, int64_t h, int64_t w,
                                               int flags, nr_qgemm_out o) {
  int32_t tile[NR_QGEMM_MAX_MR * NR_QGEMM_MAX_NR] __attribute__((aligned(64)));
  float scale[NR_QGEMM_MAX_NR] = {0}, bias[NR_QGEMM_MAX_NR] = {0};
  int32_t corr[NR_QGEMM_MAX_NR] = {0};
  int64_t nch = j->wside == NR_QGEMM_W_A ? h : w;
  int nr = j->bl.nr;
  bool last = (flags & NR_QGEMM_FINAL) != 0;
  if (last) {
    memcpy(scale, o.scale, sizeof(float) * (size_t)nch);
    memcpy(corr, o.corr, sizeof(int32_t) * (size_t)nch);
    if (o.bias)
      memcpy(bias, o.bias, sizeof(float) * (size_t)nch);
    o = (nr_qgemm_out){scale, corr, o.bias ? bias : NULL};
  }
  if (flags & NR_QGEMM_ACC)
    for (int64_t i = 0; i < h; i++)
      memcpy(tile + i * nr, c + i * ldc, sizeof(int32_t) * (size_t)w);
  j->uk(kq, ap, bp, tile, nr, flags, &o);
  if (last && j->ep)
    j->epi(j->ep, row, col, h, w, (float *)(void *)tile, nr);
  for (int64_t i = 0; i < h; i++)
    memcpy(c + i * ldc, tile + i * nr, sizeof(int32_t) * (size_t)w);
}

/* An 8-bit result: rows [r0, r0 + h) x columns [c0, c0 + w) of C are final in the
 * float block; requantized a whole row at a time (per tile, the calls cost more
 * than the product on small K), while the block is still in L2. */
static void requant_block(const qgemm_job *j, const cview *v, int64_t r0, int64_t c0,
                          int64_t h, int64_t w) {
  h = nr_gemm_min64(h, j->m - r0), w = nr_gemm_min64(w, j->n - c0);
  if (j->y8 && h > 0 && w > 0)
    requant(j, cview_at(v, r0, c0), v->ldc, r0, c0, h, w);
}

/* ---- the nest's hooks (the nest: gemm_common.h) ------------------------------------ */

_Static_assert((int)NR_QGEMM_ACC == (int)NR_GEMM_ACC &&
                   (int)NR_QGEMM_FINAL == (int)NR_GEMM_LAST,
               "the nest's K block flags are the kernels'");

/* A thread's buffers: the activation block, its staging area, the float block that
 * stands in for C under an 8-bit result, and where C's tiles live for this block. */
typedef struct qgemm_ws {
  uint8_t *xbuf, *stage;
  float *cbuf;
  cview v;
} qgemm_ws;

/* Per-channel arrays at the tile's first channel (its row for W_A, its column for
 * W_B). */
static inline nr_qgemm_out tile_out(const qgemm_job *j, const nr_gemm_tile *t) {
  int64_t ch0 = j->wside == NR_QGEMM_W_A ? t->row : t->col;
  return (nr_qgemm_out){j->dq.scale + ch0, j->dq.corr + ch0,
                        j->dq.bias ? j->dq.bias + ch0 : NULL};
}

/* A full tile straight into C (or its stand-in), with the epilogue in registers when
 * it fits there. */
static inline void hook_tile(const void *job, void *ws, const nr_gemm_at *at,
                             const nr_gemm_tile *t) {
  const qgemm_job *j = job;
  const cview *v = &((const qgemm_ws *)ws)->v;
  nr_qgemm_out o = tile_out(j, t);
  float *c = cview_at(v, t->row, t->col);
  int flags = at->kflags;
  bool last = (flags & NR_QGEMM_FINAL) != 0;
  if (last && j->fuse > 0) {
    flags |= j->fuse;
    o.res = j->ep->residual ? j->ep->residual + t->row * j->ep->ldr + t->col : NULL;
    o.ldr = j->ep->ldr, o.lo = j->ep->act_a, o.hi = j->ep->act_b;
  }
  j->uk(at->kp / 4, t->a, t->b, c, v->ldc, flags, &o);
  if (last && j->ep && j->fuse <= 0)
    j->epi(j->ep, t->row, t->col, t->h, t->w, c, v->ldc);
}

static void hook_edge(const void *job, void *ws, const nr_gemm_at *at,
                      const nr_gemm_tile *t) {
  const qgemm_job *j = job;
  const cview *v = &((const qgemm_ws *)ws)->v;
  run_edge(j, at->kp / 4, t->a, t->b, cview_at(v, t->row, t->col), v->ldc, t->row, t->col,
           t->h, t->w, at->kflags, tile_out(j, t));
}

static void hook_final(const void *job, void *ws, const nr_gemm_at *at, int64_t col,
                       int64_t cols) {
  requant_block(job, &((const qgemm_ws *)ws)->v, at->ic, col, at->mb, cols);
}

/* Where this block's tiles of C live: C itself, or for an 8-bit result the thread's
 * float block, which holds (W_A) every row of the part by the column block, one row
 * block of it when K is one block, or (W_B) the row block by every column of the
 * part. */
static void set_view(const qgemm_job *j, qgemm_ws *w, const nr_gemm_at *at) {
  if (!j->y8)
    w->v = (cview){j->c, j->ldc, 0, 0};
  else if (j->wside == NR_QGEMM_W_B)
    w->v = (cview){w->cbuf, j->cbuf_ld, at->ic, at->c0};
  else
    w->v = (cview){w->cbuf, j->cbuf_ld, j->k <= j->bl.kc ? at->ic : at->r0, at->jc};
}

/* The activation block, quantized while packed: W_A's B (its columns), W_B's A. */
static const void *hook_pack_x(const void *job, void *ws, const nr_gemm_at *at) {
  const qgemm_job *j = job;
  qgemm_ws *w = ws;
  if (j->wside == NR_QGEMM_W_A)
    pack_act(&j->x, at->jc, at->nb, at->pc, at->kb, j->bl.nr, w->xbuf, w->stage);
  else
    pack_act(&j->x, at->ic, at->mb, at->pc, at->kb, j->bl.mr, w->xbuf, w->stage);
  return w->xbuf;
}

/* The weight block: indexed in the packed W (W_A's A rows, W_B's B columns). */
static const void *hook_index_w(const void *job, void *ws, const nr_gemm_at *at) {
  const qgemm_job *j = job;
  bool wa = j->wside == NR_QGEMM_W_A;
  int64_t pad = wa ? nr_gemm_round_up(j->m, j->bl.mr) : nr_gemm_round_up(j->n, j->bl.nr);
  return j->w + nr_gemm_packed_at(at->pc, pad, wa ? at->ic : at->jc, at->kp);
}

/* W_A: the A side is W, so each row block sets where its tiles live; W_B: the A side
 * is the activations. */
static const void *hook_wa_a(const void *job, void *ws, const nr_gemm_at *at) {
  set_view(job, ws, at);
  return hook_index_w(job, ws, at);
}

static const void *hook_wb_a(const void *job, void *ws, const nr_gemm_at *at) {
  set_view(job, ws, at);
  return hook_pack_x(job, ws, at);
}

/* W_A: columns outermost, each (jc, pc) block of activations packed once and reused
 * by every row block of W. W_B: rows outermost, each (ic, pc) block of activations
 * packed once and swept against all of W's columns. */
static const nr_gemm_nest_ops wa_ops = {
    .outer = NR_GEMM_DIM_N,
    .pack_a = hook_wa_a,
    .pack_b = hook_pack_x,
    .tile = hook_tile,
    .edge = hook_edge,
    .final = hook_final,
};

static const nr_gemm_nest_ops wb_ops = {
    .outer = NR_GEMM_DIM_M,
    .pack_a = hook_wb_a,
    .pack_b = hook_index_w,
    .tile = hook_tile,
    .edge = hook_edge,
    .final = hook_final,
};

static void qgemm_part(void *arg, int64_t begin, int64_t end, int thread) {
  const qgemm_job *j = arg;
  qgemm_ws ws = {.xbuf = j->scratch + (int64_t)thread * j->thread_bytes};
  ws.stage = ws.xbuf + j->block_bytes;
  ws.cbuf = (float *)(void *)(ws.xbuf + j->cbuf_off);
  if (j->wside == NR_QGEMM_W_A)
    nr_gemm_nest_parts(&j->nest, &wa_ops, j, &ws, begin, end);
  else
    nr_gemm_nest_parts(&j->nest, &wb_ops, j, &ws, begin, end);
}

/* ---- scratch, threading, entry ---------------------------------------------------- */

/* Bytes of one thread's activation block (W_A: kc x nc columns; W_B: mc rows x kc). */
static int64_t block_bytes(const blocking *bl, int wside, int64_t m, int64_t n, int64_t k) {
  int64_t kb4 = nr_gemm_round_up(nr_gemm_block_depth(bl, k), 4);
  int64_t t = wside == NR_QGEMM_W_A ? nr_gemm_block_cols(bl, n) : nr_gemm_block_rows(bl, m);
  return nr_gemm_round_up(t * kb4, 64);
}

/* The activation block, then a staging area: one row of kc (t-major sources) or four
 * of nc (rows made on demand). */
static int64_t thread_bytes(const blocking *bl, int wside, int64_t m, int64_t n,
                            int64_t k) {
  int64_t stage = nr_gemm_round_up(nr_gemm_block_depth(bl, k) + 4, 64);
  if (wside == NR_QGEMM_W_A) {
    int64_t rows4 = 4 * nr_gemm_round_up(nr_gemm_block_cols(bl, n), 64);
    stage = stage > rows4 ? stage : rows4;
  }
  return block_bytes(bl, wside, m, n, k) + stage;
}

size_t nr_qgemm_scratch_size(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                             int threads) {
  blocking bl = get_blocking(cfg);
  int64_t per = thread_bytes(&bl, wside_of(cfg), m, n, k);
  return nr_gemm_scratch_total((size_t)per, threads);
}

/* The float block standing in for C under an 8-bit result, per thread: every row of
 * a part by one nc block of columns (W_A: partial sums persist across the k blocks of
 * all row blocks; one mc block of rows when K is one block), or one mc block of rows
 * by every column of a part (W_B). */
static void cbuf_dims(const blocking *bl, int wside, int64_t m, int64_t n, int64_t k,
                      int64_t *rows, int64_t *ld) {
  if (wside == NR_QGEMM_W_A) {
    *rows = k <= bl->kc ? nr_gemm_block_rows(bl, m) : nr_gemm_round_up(m, bl->mr);
    *ld = nr_gemm_block_cols(bl, n);
  } else {
    *rows = nr_gemm_block_rows(bl, m);
    *ld = nr_gemm_round_up(n, bl->nr);
  }
}

static int64_t cbuf_bytes(const blocking *bl, int wside, int64_t m, int64_t n, int64_t k) {
  int64_t rows, ld;
  cbuf_dims(bl, wside, m, n, k, &rows, &ld);
  return nr_gemm_round_up(rows * ld * (int64_t)sizeof(float), 64);
}

size_t nr_qgemm_u8_scratch_size(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                                int threads) {
  blocking bl = get_blocking(cfg);
  int64_t per = thread_bytes(&bl, wside_of(cfg), m, n, k) +
                cbuf_bytes(&bl, wside_of(cfg), m, n, k);
  return nr_gemm_scratch_total((size_t)per, threads);
}

/* K = 0, 8-bit result: each row through a small float buffer. */
static void zero_k_u8(const qgemm_job *j) {
  float buf[64];
  for (int64_t i = 0; i < j->m; i++)
    for (int64_t t0 = 0; t0 < j->n; t0 += 64) {
      int64_t w = nr_gemm_min64(64, j->n - t0);
      for (int64_t t = 0; t < w; t++) {
        int64_t ch = j->wside == NR_QGEMM_W_A ? i : t0 + t;
        buf[t] = j->dq.bias ? j->dq.bias[ch] : 0.0f;
      }
      if (j->ep)
        j->epi(j->ep, i, t0, 1, w, buf, 64);
      requant(j, buf, 64, i, t0, 1, w);
    }
}

/* K = 0: every output is its channel's bias. */
static void zero_k(const qgemm_job *j) {
  if (j->y8) {
    zero_k_u8(j);
    return;
  }
  for (int64_t i = 0; i < j->m; i++)
    for (int64_t t = 0; t < j->n; t++) {
      int64_t ch = j->wside == NR_QGEMM_W_A ? i : t;
      j->c[i * j->ldc + t] = j->dq.bias ? j->dq.bias[ch] : 0.0f;
    }
  if (j->ep)
    j->epi(j->ep, 0, 0, j->m, j->n, j->c, j->ldc);
}

/* nr_qgemm_split_run's body; y8 NULL: float C. */
static void run_job(nr_qgemm_cfg cfg, nr_qgemm_split split, int64_t m, int64_t n,
                    int64_t k, const void *w_packed, nr_qgemm_act x,
                    const nr_qgemm_dequant *dq, float *c, int64_t ldc,
                    const nr_qgemm_y8 *y8, const nr_epilogue *ep, void *scratch,
                    nr_threadpool *pool, int threads) {
  if (m <= 0 || n <= 0)
    return;
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(cfg.ukernel);
  if (!u)
    cfg.ukernel = 0, u = &ukernels[0];
  int t = nr_gemm_call_threads(pool, threads);
  nr_gemm_plan plan = nr_gemm_plan_make(&nr_qgemm_family, gemm_cfg(cfg), split, m, n, k, t);
  qgemm_job j = {.nest = {plan, k, nr_qgemm_family.kc_unit, 1, 1},
                 .uk = ukernel_fns[cfg.ukernel],
                 .wside = u->wside,
                 .m = m,
                 .n = n,
                 .k = k,
                 .w = w_packed,
                 .dq = *dq,
                 .c = c,
                 .ldc = ldc,
                 .y8 = y8,
                 .ep = nr_gemm_epilogue_active(ep)};
  j.bl = plan.bl;
  j.epi = nr_gemm_epilogue_pick();
  j.fuse = fusable(j.ep);
  /* op(X) is A (W_B) or B (W_A); k-major when its rows run along k. */
  j.x = (act_src){x, u->wside == NR_QGEMM_W_A ? !x.trans : x.trans, u->qmax};
  if (k <= 0) {
    zero_k(&j);
    return;
  }
  j.block_bytes = block_bytes(&j.bl, j.wside, m, n, k);
  j.thread_bytes = j.cbuf_off = thread_bytes(&j.bl, j.wside, m, n, k);
  if (y8) {
    int64_t rows;
    cbuf_dims(&j.bl, j.wside, m, n, k, &rows, &j.cbuf_ld);
    j.thread_bytes += cbuf_bytes(&j.bl, j.wside, m, n, k);
  }
  j.scratch = nr_gemm_scratch_align(scratch);
  nr_gemm_plan_run(&plan, pool, nr_qgemm_family.any_thread, qgemm_part, &j);
}

void nr_qgemm_split_run(nr_qgemm_cfg cfg, nr_qgemm_split split, int64_t m, int64_t n,
                        int64_t k, const void *w_packed, nr_qgemm_act x,
                        const nr_qgemm_dequant *dq, float *c, int64_t ldc,
                        const nr_epilogue *ep, void *scratch, nr_threadpool *pool,
                        int threads) {
  run_job(cfg, split, m, n, k, w_packed, x, dq, c, ldc, NULL, ep, scratch, pool, threads);
}

void nr_qgemm_to_u8(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k, const void *w_packed,
                    nr_qgemm_act x, const nr_qgemm_dequant *dq, const nr_qgemm_y8 *y,
                    const nr_epilogue *ep, void *scratch, nr_threadpool *pool,
                    int threads) {
  run_job(cfg, NR_QGEMM_SPLIT_AUTO, m, n, k, w_packed, x, dq, NULL, 0, y, ep, scratch, pool,
          threads);
}

void nr_qgemm(nr_qgemm_cfg cfg, int64_t m, int64_t n, int64_t k, const void *w_packed,
              nr_qgemm_act x, const nr_qgemm_dequant *dq, float *c, int64_t ldc,
              const nr_epilogue *ep, void *scratch, nr_threadpool *pool, int threads) {
  nr_qgemm_split_run(cfg, NR_QGEMM_SPLIT_AUTO, m, n, k, w_packed, x, dq, c, ldc, ep,
                     scratch, pool, threads);
}
