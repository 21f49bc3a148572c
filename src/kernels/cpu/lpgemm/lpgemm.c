/* lpgemm.c - the narrow-storage GEMM: micro-kernel list and family record, packing
 * with rounding and the loop nest's hooks (contract: lpgemm.h; blocking, splitting,
 * the packing plan, the dispatch and the loop nest are gemm_common's, shared with
 * gemm and qgemm).
 *
 * Key decisions.
 *  - The nest is gemm.c's order of gemm_common.h's (jc by nc, pc by kc, ic by mc,
 *    then jr / ir micro-tiles; edge tiles through a local tile; the epilogue on each
 *    tile after its last kc block; one part per thread along N or M, no barriers, so
 *    threaded output equals single-threaded output bit for bit). What changes is what
 *    each operand block turns into before the micro-kernels see it:
 *      B packed (narrow, from the engine)  used in place by the kernels
 *      B raw (fp32)                        rounded to narrow into the thread's B buffer
 *      A packed (narrow, from the engine)  widened into the thread's fp32 A buffer
 *      A raw (fp32)                        packed into the A buffer, each value rounded
 *                                          through the narrow type
 *    and, for block-widening kernels, B goes to an fp32 buffer instead (a packed
 *    block widened, a raw one rounded) that an fp32 micro-kernel reads.
 *  - A packed operand has the fp32 layout with 2-byte elements: per kc block at pc a
 *    region at element offset pc * Mpad (A) / pc * Npad (B) of mr-row (nr-column)
 *    panels, so it depends on the kernel and kc only, and is indexed, never copied.
 *  - Packing converts whole rows with the vector routines of lp_convert*.c (one
 *    function pointer chosen per call): rows of B go straight into their panel rows
 *    (interleaved for the bf16 kernels that want it), gathers (A, transposed B)
 *    convert a source row into a small buffer and scatter it. */
#include "kernels/cpu/gemm/gemm_common.h"
#include "kernels/cpu/lpgemm/lpgemm_impl.h"
#include "util/threadpool.h"

#include <string.h>

#define MAX_MR 16
#define MAX_NR 32
/* Below this many multiply-adds a problem runs on one thread (as gemm.c). */
#define PARALLEL_MIN_MACS (64 * 64 * 64)
/* A product of at most SMALL_M rows streams B, so its time follows B's values, not its
 * multiply-adds: it runs on one thread below PARALLEL_MIN_B_VALUES of them, gemm.c's
 * 256 KiB of fp32 B. A 16-bit B of as many values takes no less time, as widening
 * bounds the 1-row kernels, not bytes: mlp's 512x256 fp16 layer, 6.1-6.6 us on one
 * thread, ran on one thread under the MACs rule. */
#define SMALL_M 4
#define PARALLEL_MIN_B_VALUES (64 * 1024)
/* K block of the 1-row kernels: with one row of A there is no A block to keep in L1,
 * so K is cut only to bound the thread's A buffer; every further K block is one more
 * load and store of C's row per panel and one more call per panel. */
#define ROW_KC_MAX 2048
/* Values converted at a time by the gathering packers (a stack buffer). */
#define CHUNK 256

static const nr_lpgemm_ukernel ukernels[] = {
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il)                                      \
  {#name, NR_LP_##type, mr, nr, isa, NR_LP_WIDEN_KERNEL, il},
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa)                                  \
  {#name, NR_LP_##type, mr, nr, isa, NR_LP_WIDEN_BLOCK, 0},
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN
};

static const nr_lpgemm_ukernel_fn lp_fns[] = {
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il) name,
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa) NULL,
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN
};

static const nr_gemm_ukernel_fn f32_fns[] = {
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il) NULL,
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa) f32,
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN
};

static const nr_gemm_kdesc kdescs[] = {
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il) {#name, mr, nr, NR_GEMM_DIM_N},
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa) {#name, mr, nr, NR_GEMM_DIM_N},
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN
};

/* The fp32 family's record, but for the fallback kernel: the same splits and
 * thresholds (B's values counted, not bytes; see PARALLEL_MIN_B_VALUES). */
const nr_gemm_family nr_lpgemm_family = {
    .kernels = kdescs,
    .count = NR_LP_UK_COUNT,
    .fallback = NR_LP_UK_nr_f16w_gemm_4x8,
    .kc_unit = 1,
    .small_m = SMALL_M,
    .min_b_values = PARALLEL_MIN_B_VALUES,
    .min_macs = PARALLEL_MIN_MACS,
    .any_thread = false,
};

_Static_assert(sizeof ukernels / sizeof ukernels[0] == NR_LP_UK_COUNT, "lp ukernel list");
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il)                                      \
  _Static_assert((mr) <= MAX_MR && (nr) <= MAX_NR && (nr) % 8 == 0, #name ": tile");
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa)                                  \
  _Static_assert((mr) <= MAX_MR && (nr) <= MAX_NR, #name ": tile");
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN

int nr_lpgemm_ukernel_count(void) {
  return NR_LP_UK_COUNT;
}

const nr_lpgemm_ukernel *nr_lpgemm_ukernel_get(int i) {
  return nr_gemm_family_has(&nr_lpgemm_family, i) ? &ukernels[i] : NULL;
}

int nr_lpgemm_ukernel_find(const char *name) {
  return nr_gemm_family_find(&nr_lpgemm_family, name);
}

nr_lpgemm_ukernel_fn nr_lpgemm_ukernel_fn_get(int i) {
  return nr_gemm_family_has(&nr_lpgemm_family, i) ? lp_fns[i] : NULL;
}

nr_gemm_ukernel_fn nr_lpgemm_f32_fn_get(int i) {
  return nr_gemm_family_has(&nr_lpgemm_family, i) ? f32_fns[i] : NULL;
}

/* As gemm.c: the largest kc <= max cutting K into equal blocks (rounded up to 8). */
static uint16_t even_kc(int64_t k, int64_t max) {
  return nr_gemm_even_kc(k, max, 8);
}

/* The fp32 GEMM's blocking for the same tiles (gemm.c explains the numbers): the
 * narrow B micro-panel is half the bytes, which leaves L1 room rather than calling
 * for a larger kc (gemm.kc / conv.gemm_kc can ask for one). The 1-row kernels for
 * M = 1 as in gemm.c; block widening only for a runtime B (lpgemm.h says why). */
nr_lpgemm_cfg nr_lpgemm_default_cfg(nr_lp_type t, int64_t m, int64_t n, int64_t k,
                                    bool b_packed) {
  unsigned isa = nr_cpu_isa();
  bool h = t == NR_LP_FP16, row = m == 1, bw = !b_packed && !row;
  int uk;
  if (isa & NR_ISA_AVX512) {
    if (bw)
      uk = h ? NR_LP_UK_nr_f16w_gemm_12x32_bw__avx512 : NR_LP_UK_nr_bf16w_gemm_12x32_bw__avx512;
    else if (row)
      uk = h ? NR_LP_UK_nr_f16w_gemm_1x32__avx512 : NR_LP_UK_nr_bf16w_gemm_1x32__avx512;
    else
      uk = h ? NR_LP_UK_nr_f16w_gemm_12x32__avx512 : NR_LP_UK_nr_bf16w_gemm_12x32__avx512;
    return (nr_lpgemm_cfg){(uint16_t)uk, 144, even_kc(k, row ? ROW_KC_MAX : 256), 512};
  }
  if (isa & NR_ISA_AVX2) {
    if (bw)
      uk = h ? NR_LP_UK_nr_f16w_gemm_6x16_bw__avx2 : NR_LP_UK_nr_bf16w_gemm_6x16_bw__avx2;
    else if (row)
      uk = h ? NR_LP_UK_nr_f16w_gemm_1x16__avx2 : NR_LP_UK_nr_bf16w_gemm_1x16__avx2;
    else
      uk = h ? NR_LP_UK_nr_f16w_gemm_6x16__avx2 : NR_LP_UK_nr_bf16w_gemm_6x16__avx2;
    return (nr_lpgemm_cfg){(uint16_t)uk, 72, row ? even_kc(k, ROW_KC_MAX) : 256, 4080};
  }
  uk = h ? (row ? NR_LP_UK_nr_f16w_gemm_1x8 : NR_LP_UK_nr_f16w_gemm_4x8)
         : (row ? NR_LP_UK_nr_bf16w_gemm_1x8 : NR_LP_UK_nr_bf16w_gemm_4x8);
  return (nr_lpgemm_cfg){(uint16_t)uk, 64, 256, 4096};
}

/* ---- blocking -------------------------------------------------------------------- */

typedef nr_gemm_blocking blocking;

static nr_gemm_cfg gemm_cfg(nr_lpgemm_cfg c) {
  return (nr_gemm_cfg){c.ukernel, c.mc, c.kc, c.nc};
}

static blocking get_blocking(nr_lpgemm_cfg cfg) {
  return nr_gemm_blocking_get(&nr_lpgemm_family, gemm_cfg(cfg));
}

/* The kernel a blocking runs (bl->uk is valid: the fallback replaced a bad index). */
static const nr_lpgemm_ukernel *kernel_of(const blocking *bl) {
  return &ukernels[bl->uk];
}

/* ---- packing ----------------------------------------------------------------------- */

typedef void (*narrow_fn)(nr_lp_type, const float *, uint16_t *, int64_t);
typedef void (*round_fn)(nr_lp_type, const float *, float *, int64_t);
typedef void (*pairs_fn)(const float *, uint16_t *, int);

/* The conversion routines of this machine, looked up once per packing call. */
typedef struct packer {
  nr_lp_type t;
  int width;     /* panel width (mr or nr) */
  int interleave;
  narrow_fn narrow;
  round_fn round;
  pairs_fn pairs;
} packer;

static packer make_packer(const nr_lpgemm_ukernel *u, int width) {
  unsigned isa = nr_cpu_isa();
  packer p = {u->type, width, u->interleave, nr_lp_narrow_portable, nr_lp_round_portable,
              nr_lp_bf16_pairs_portable};
  if (isa & NR_ISA_AVX512) {
    p.narrow = nr_lp_narrow__avx512, p.round = nr_lp_round__avx512;
    if (width % 32 == 0)
      p.pairs = nr_lp_bf16_pairs__avx512;
    else if (width % 16 == 0)
      p.pairs = nr_lp_bf16_pairs__avx2;
  } else if (isa & NR_ISA_AVX2) {
    p.narrow = nr_lp_narrow__avx2, p.round = nr_lp_round__avx2;
    if (width % 16 == 0)
      p.pairs = nr_lp_bf16_pairs__avx2;
  }
  return p;
}

/* Position of column j in a panel row of p's width. */
static inline int lane(const packer *p, int j) {
  int h = p->width / 2;
  return p->interleave ? (j % h) * 2 + j / h : j;
}

/* One full panel row: width floats into width narrow values in lane order. */
static inline void narrow_row(const packer *p, const float *src, uint16_t *dst) {
  if (p->interleave)
    p->pairs(src, dst, p->width / 2);
  else
    p->narrow(p->t, src, dst, p->width);
}

/* Source rows (kb of them, ld apart) hold `cols` contiguous floats each: cut into
 * width-wide narrow panels of kb x width values (the last one zero-padded). */
static void lp_panel_rows(const packer *p, const float *src, int64_t ld, int64_t kb,
                          int64_t cols, uint16_t *out) {
  int w = p->width;
  int64_t full = cols / w, rest = cols - full * w;
  for (int64_t q = 0; q < kb; q++) {
    const float *s = src + q * ld;
    for (int64_t j = 0; j < full; j++)
      narrow_row(p, s + j * w, out + (j * kb + q) * w);
    if (rest) {
      float tmp[MAX_NR] = {0};
      memcpy(tmp, s + full * w, sizeof(float) * (size_t)rest);
      narrow_row(p, tmp, out + (full * kb + q) * w);
    }
  }
}

/* Source rows r (`rows` of them, ld apart) hold kb contiguous floats each: writes the
 * narrow value of row r, column q at out[q * width + lane(r)] of its panel. */
static void lp_panel_gather(const packer *p, const float *src, int64_t ld, int64_t kb,
                            int64_t rows, uint16_t *out) {
  int w = p->width;
  uint16_t tmp[CHUNK];
  for (int64_t i = 0; i < rows; i += w, out += w * kb) {
    int64_t h = nr_gemm_min64(w, rows - i);
    for (int64_t r = 0; r < w; r++) {
      int l = lane(p, (int)r);
      for (int64_t q0 = 0; q0 < kb; q0 += CHUNK) {
        int64_t len = nr_gemm_min64(CHUNK, kb - q0);
        if (r < h)
          p->narrow(p->t, src + (i + r) * ld + q0, tmp, len);
        else
          memset(tmp, 0, sizeof(uint16_t) * (size_t)len);
        for (int64_t q = 0; q < len; q++)
          out[(q0 + q) * w + l] = tmp[q];
      }
    }
  }
}

/* lp_panel_rows into fp32 panels of rounded values. */
static void round_panel_rows(const packer *p, const float *src, int64_t ld, int64_t kb,
                             int64_t cols, float *out) {
  int w = p->width;
  int64_t full = cols / w, rest = cols - full * w;
  for (int64_t q = 0; q < kb; q++) {
    const float *s = src + q * ld;
    for (int64_t j = 0; j < full; j++)
      p->round(p->t, s + j * w, out + (j * kb + q) * w, w);
    if (rest) {
      float *o = out + (full * kb + q) * w;
      p->round(p->t, s + full * w, o, rest);
      memset(o + rest, 0, sizeof(float) * (size_t)(w - rest));
    }
  }
}

/* lp_panel_gather into fp32 panels of rounded values (natural lane order): with
 * zmm transposes where the machine has them, then rounded in place. */
static void round_panel_gather(const packer *p, const float *src, int64_t ld, int64_t kb,
                               int64_t rows, float *out) {
  int w = p->width;
  if (w == 1) { /* the panel is the row */
    for (int64_t r = 0; r < rows; r++)
      p->round(p->t, src + r * ld, out + r * kb, kb);
    return;
  }
  if ((nr_cpu_isa() & NR_ISA_AVX512) && w <= 16) {
    nr_gemm_pack_gather__avx512(src, ld, kb, rows, w, out);
    p->round(p->t, out, out, nr_gemm_round_up(rows, w) * kb);
    return;
  }
  float tmp[CHUNK];
  for (int64_t i = 0; i < rows; i += w, out += w * kb) {
    int64_t h = nr_gemm_min64(w, rows - i);
    for (int64_t r = 0; r < w; r++)
      for (int64_t q0 = 0; q0 < kb; q0 += CHUNK) {
        int64_t len = nr_gemm_min64(CHUNK, kb - q0);
        if (r < h)
          p->round(p->t, src + (i + r) * ld + q0, tmp, len);
        else
          memset(tmp, 0, sizeof(float) * (size_t)len);
        for (int64_t q = 0; q < len; q++)
          out[(q0 + q) * w + r] = tmp[q];
      }
  }
}

/* Rows [r0, r0+rows) x cols [p0, p0+kb) of op(A), rounded, into fp32 mr-row panels. */
static void pack_a_round(const packer *p, const nr_lpgemm_operand *a, int64_t r0,
                         int64_t rows, int64_t p0, int64_t kb, float *out) {
  const float *src = a->data;
  if (a->trans)
    round_panel_rows(p, src + p0 * a->ld + r0, a->ld, kb, rows, out);
  else
    round_panel_gather(p, src + r0 * a->ld + p0, a->ld, kb, rows, out);
}

/* Rows [p0, p0+kb) x cols [c0, c0+cols) of op(B), rounded, into fp32 nr-column panels
 * (block-widening kernels: a raw B goes straight to fp32). */
static void pack_b_round(const packer *p, const nr_lpgemm_operand *b, int64_t p0,
                         int64_t kb, int64_t c0, int64_t cols, float *out) {
  const float *src = b->data;
  if (b->trans)
    round_panel_gather(p, src + c0 * b->ld + p0, b->ld, kb, cols, out);
  else
    round_panel_rows(p, src + p0 * b->ld + c0, b->ld, kb, cols, out);
}

/* Rows [r0, r0+rows) x cols [p0, p0+kb) of op(A) into narrow mr-row panels. */
static void pack_a_narrow(const packer *p, const nr_lpgemm_operand *a, int64_t r0,
                          int64_t rows, int64_t p0, int64_t kb, uint16_t *out) {
  const float *src = a->data;
  if (a->trans)
    lp_panel_rows(p, src + p0 * a->ld + r0, a->ld, kb, rows, out);
  else
    lp_panel_gather(p, src + r0 * a->ld + p0, a->ld, kb, rows, out);
}

/* Rows [p0, p0+kb) x cols [c0, c0+cols) of op(B) into narrow nr-column panels. */
static void pack_b_narrow(const packer *p, const nr_lpgemm_operand *b, int64_t p0,
                          int64_t kb, int64_t c0, int64_t cols, uint16_t *out) {
  const float *src = b->data;
  if (b->trans)
    lp_panel_gather(p, src + c0 * b->ld + p0, b->ld, kb, cols, out);
  else
    lp_panel_rows(p, src + p0 * b->ld + c0, b->ld, kb, cols, out);
}

size_t nr_lpgemm_packed_a_size(nr_lpgemm_cfg cfg, int64_t m, int64_t k) {
  blocking bl = get_blocking(cfg);
  return sizeof(uint16_t) * (size_t)nr_gemm_packed_elems(&nr_lpgemm_family, bl.mr, m, k);
}

size_t nr_lpgemm_packed_b_size(nr_lpgemm_cfg cfg, int64_t k, int64_t n) {
  blocking bl = get_blocking(cfg);
  return sizeof(uint16_t) * (size_t)nr_gemm_packed_elems(&nr_lpgemm_family, bl.nr, n, k);
}

/* A is never interleaved: its panels are widened as a whole, not loaded by lanes. */
void nr_lpgemm_pack_a(nr_lpgemm_cfg cfg, int64_t m, int64_t k, nr_lpgemm_operand a,
                      uint16_t *out) {
  blocking bl = get_blocking(cfg);
  packer p = make_packer(kernel_of(&bl), bl.mr);
  p.interleave = 0;
  int64_t mpad = nr_gemm_round_up(m, bl.mr);
  for (int64_t pc = 0; pc < k; pc += bl.kc)
    pack_a_narrow(&p, &a, 0, m, pc, nr_gemm_min64(bl.kc, k - pc), out + pc * mpad);
}

void nr_lpgemm_pack_b(nr_lpgemm_cfg cfg, int64_t k, int64_t n, nr_lpgemm_operand b,
                      uint16_t *out) {
  blocking bl = get_blocking(cfg);
  packer p = make_packer(kernel_of(&bl), bl.nr);
  int64_t npad = nr_gemm_round_up(n, bl.nr);
  for (int64_t pc = 0; pc < k; pc += bl.kc)
    pack_b_narrow(&p, &b, pc, nr_gemm_min64(bl.kc, k - pc), 0, n, out + pc * npad);
}

/* ---- the nest's hooks (the nest: gemm_common.h) ------------------------------------ */

typedef struct lp_job {
  nr_gemm_nest nest;
  blocking bl;             /* nest.plan.bl */
  nr_lpgemm_ukernel_fn lk; /* NR_LP_WIDEN_KERNEL */
  nr_gemm_ukernel_fn fk;   /* NR_LP_WIDEN_BLOCK */
  packer pa, pb;           /* A (rounding into fp32 panels), B (narrowing) */
  int64_t m, n, k;
  float alpha;
  nr_lpgemm_operand a, b;
  float *c;
  int64_t ldc;
  const nr_epilogue *ep;   /* NULL when it has nothing to do */
  nr_gemm_epilogue_fn epi;
  char *scratch;           /* 64-byte aligned */
  size_t thread_bytes, a_bytes, b_bytes; /* per thread: A (fp32), B (16-bit), W (fp32) */
} lp_job;

/* A thread's block buffers: A (fp32), B (16-bit), W (fp32, block widening). */
typedef struct lp_ws {
  float *abuf;
  uint16_t *bbuf;
  float *wbuf;
} lp_ws;

/* The A block of (pc, ic) in fp32 panels, always in the thread's A buffer. */
static const void *hook_pack_a(const void *job, void *ws, const nr_gemm_at *at) {
  const lp_job *j = job;
  float *abuf = ((lp_ws *)ws)->abuf;
  if (j->a.packed) {
    int64_t mpad = nr_gemm_round_up(j->m, j->bl.mr);
    const uint16_t *ap =
        (const uint16_t *)j->a.data + nr_gemm_packed_at(at->pc, mpad, at->ic, at->kb);
    nr_lp_widen(kernel_of(&j->bl)->type, ap, abuf,
                nr_gemm_round_up(at->mb, j->bl.mr) * at->kb);
  } else {
    pack_a_round(&j->pa, &j->a, at->ic, at->mb, at->pc, at->kb, abuf);
  }
  return abuf;
}

/* The B block of (pc, jc) as the micro-kernels read it: 16-bit panels for the lp
 * kernels, fp32 panels (widened or rounded into the W buffer) for block widening. */
static const void *hook_pack_b(const void *job, void *ws, const nr_gemm_at *at) {
  const lp_job *j = job;
  const lp_ws *w = ws;
  int64_t npad = nr_gemm_round_up(j->n, j->bl.nr);
  const uint16_t *bp =
      (const uint16_t *)j->b.data + nr_gemm_packed_at(at->pc, npad, at->jc, at->kb);
  if (j->fk) {
    if (j->b.packed)
      nr_lp_widen(kernel_of(&j->bl)->type, bp, w->wbuf,
                  nr_gemm_round_up(at->nb, j->bl.nr) * at->kb);
    else
      pack_b_round(&j->pb, &j->b, at->pc, at->kb, at->jc, at->nb, w->wbuf);
    return w->wbuf;
  }
  if (!j->b.packed) {
    pack_b_narrow(&j->pb, &j->b, at->pc, at->kb, at->jc, at->nb, w->bbuf);
    bp = w->bbuf;
  }
  return bp;
}

/* One mr x nr tile at dst (rows ldd apart) from an fp32 A micro-panel and a B
 * micro-panel (16-bit, or fp32 for block widening), then the epilogue. */
static inline void lp_run(const lp_job *j, const nr_gemm_at *at, const nr_gemm_tile *t,
                          float *dst, int64_t ldd) {
  int acc = at->kflags & NR_GEMM_ACC;
  if (j->lk)
    j->lk(at->kb, t->a, t->b, dst, ldd, j->alpha, acc);
  else
    j->fk(at->kb, t->a, t->b, dst, ldd, j->alpha, acc);
  if ((at->kflags & NR_GEMM_LAST) && j->ep)
    j->epi(j->ep, t->row, t->col, t->h, t->w, dst, ldd);
}

static void hook_tile(const void *job, void *ws, const nr_gemm_at *at,
                      const nr_gemm_tile *t) {
  (void)ws;
  const lp_job *j = job;
  lp_run(j, at, t, j->c + t->row * j->ldc + t->col, j->ldc);
}

/* An edge tile through a local mr x nr tile (kernels only see full tiles). */
static void hook_edge(const void *job, void *ws, const nr_gemm_at *at,
                      const nr_gemm_tile *t) {
  (void)ws;
  const lp_job *j = job;
  float tile[MAX_MR * MAX_NR] __attribute__((aligned(64)));
  float *c = j->c + t->row * j->ldc + t->col;
  nr_gemm_edge_load(tile, j->bl.nr, c, j->ldc, t, at->kflags & NR_GEMM_ACC);
  lp_run(j, at, t, tile, j->bl.nr);
  nr_gemm_edge_store(tile, j->bl.nr, c, j->ldc, t);
}

/* gemm.c's order: jc, pc (B block), ic (A block). */
static const nr_gemm_nest_ops lp_ops = {
    .outer = NR_GEMM_DIM_N,
    .pack_a = hook_pack_a,
    .pack_b = hook_pack_b,
    .tile = hook_tile,
    .edge = hook_edge,
};

static void lp_part(void *arg, int64_t begin, int64_t end, int thread) {
  const lp_job *j = arg;
  char *s = j->scratch + (size_t)thread * j->thread_bytes;
  lp_ws ws = {(float *)s, (uint16_t *)(s + j->a_bytes),
              (float *)(s + j->a_bytes + j->b_bytes)};
  nr_gemm_nest_parts(&j->nest, &lp_ops, j, &ws, begin, end);
}

/* ---- scratch and threading ----------------------------------------------------------- */

/* Per-thread buffers, each a multiple of 64 bytes. */
static void buffer_bytes(const blocking *bl, int64_t m, int64_t n, int64_t k, size_t *a,
                         size_t *b, size_t *w) {
  int64_t kb = nr_gemm_block_depth(bl, k), nb = nr_gemm_block_cols(bl, n);
  *a = (size_t)nr_gemm_round_up(nr_gemm_block_rows(bl, m) * kb * 4, 64);
  bool block = kernel_of(bl)->widen == NR_LP_WIDEN_BLOCK;
  *b = block ? 0 : (size_t)nr_gemm_round_up(nb * kb * 2, 64);
  *w = block ? (size_t)nr_gemm_round_up(nb * kb * 4, 64) : 0;
}

size_t nr_lpgemm_scratch_size(nr_lpgemm_cfg cfg, int64_t m, int64_t n, int64_t k,
                              int threads) {
  blocking bl = get_blocking(cfg);
  size_t a, b, w;
  buffer_bytes(&bl, m, n, k, &a, &b, &w);
  return nr_gemm_scratch_total(a + b + w, threads);
}

int nr_lpgemm_threads_for(nr_lpgemm_cfg cfg, int split, int64_t m, int64_t n, int64_t k,
                          int threads) {
  blocking bl = get_blocking(cfg);
  return nr_gemm_parts_for(&nr_lpgemm_family, &bl, split, m, n, k, threads);
}

void nr_lpgemm(nr_lpgemm_cfg cfg, int split, int64_t m, int64_t n, int64_t k, float alpha,
               nr_lpgemm_operand a, nr_lpgemm_operand b, float *c, int64_t ldc,
               const nr_epilogue *ep, void *scratch, nr_threadpool *pool, int threads) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    nr_gemm_zero_k(m, n, c, ldc, ep);
    return;
  }
  int t = nr_gemm_call_threads(pool, threads);
  nr_gemm_plan plan = nr_gemm_plan_make(&nr_lpgemm_family, gemm_cfg(cfg), split, m, n, k, t);
  lp_job j = {.m = m, .n = n, .k = k, .alpha = alpha, .a = a, .b = b, .c = c, .ldc = ldc,
              .ep = nr_gemm_epilogue_active(ep), .epi = nr_gemm_epilogue_pick()};
  j.bl = plan.bl;
  j.lk = nr_lpgemm_ukernel_fn_get(j.bl.uk);
  j.fk = nr_lpgemm_f32_fn_get(j.bl.uk);
  j.nest = (nr_gemm_nest){plan, k, nr_lpgemm_family.kc_unit, sizeof(float),
                          j.lk ? (int)sizeof(uint16_t) : (int)sizeof(float)};
  j.pa = make_packer(kernel_of(&j.bl), j.bl.mr);
  j.pb = make_packer(kernel_of(&j.bl), j.bl.nr);
  size_t wb;
  buffer_bytes(&j.bl, m, n, k, &j.a_bytes, &j.b_bytes, &wb);
  j.thread_bytes = j.a_bytes + j.b_bytes + wb;
  j.scratch = nr_gemm_scratch_align(scratch);
  nr_gemm_plan_run(&plan, pool, nr_lpgemm_family.any_thread, lp_part, &j);
}
