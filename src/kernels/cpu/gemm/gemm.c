/* gemm.c - the packed float32 GEMM: its micro-kernel list and family record, packing,
 * the loop nest's hooks and the epilogue (contract: gemm.h; blocking, splitting, the
 * packing plan, the dispatch and the loop nest are gemm_common's, shared with lpgemm
 * and qgemm).
 *
 * Key decisions.
 *  - The loop nest (gemm_common.h) runs in BLIS's order, parameterized by the cfg
 *    record: jc over N in nc steps, pc over K in kc steps (B block packed: kc x nc),
 *    ic over M in mc steps (A block packed: mc x kc), then jr/ir over nr/mr
 *    micro-tiles. Edge tiles go through a local mr x nr tile, so kernels only see
 *    full tiles and packed panels are zero-padded.
 *  - A packed operand is laid out exactly as the nest consumes it: for each kc block
 *    starting at pc, a region of (Mpad * kb) floats at offset pc * Mpad, holding mr-row
 *    panels of kb x mr floats (B: pc * Npad, nr-column panels of kb x nr). So a
 *    pre-packed operand (weights packed at build time) is indexed, never copied, and
 *    depends only on the micro-kernel and kc (not on mc, nc or threads).
 *  - The epilogue (bias, beta * residual, activation) runs on each C tile right after
 *    its last kc block, while the tile is in L1, so C is written once.
 *  - Threading is coarse: the problem is cut into one part per thread along N (whole
 *    nr panels; each thread packs its own A) or along M (whole mr panels; each thread
 *    packs its own B), each part runs the whole nest with its own slice of scratch.
 *    No barriers; the redundant packing is O(1/N_part) resp. O(1/M_part) of the work.
 *    Part i runs on thread i (nr_parallel_parts) unless that thread is late, so with
 *    a pre-packed B split along N each core streams the same slice of the weights on
 *    every call: a batch-1 layer whose weights are too big for one core's L2 fits in
 *    two (mlp's 784x512 Gemm: 1.6 MB, 0.8 MB a core).
 *  - Whether to thread at all is a cost model in two units: products of more than
 *    SMALL_M rows by their multiply-adds, products of at most SMALL_M rows (batch-1
 *    Gemm, classifier heads: bound by streaming B) by the bytes of B. Below the
 *    threshold the step runs on the calling thread and the pool is never woken.
 */
#include "kernels/cpu/gemm/gemm_common.h"
#include "kernels/cpu/gemm/gemm_impl.h"
#include "util/threadpool.h"

#include <string.h>

#define MAX_MR 16
#define MAX_NR 32
/* The thresholds below come from one measurement (2026-11-30; docs/
 * performance-notes.md, "Small products on two threads"): a 2-thread dispatch of
 * the pool (publish, the worker's claim, the join) costs 0.1-0.4 us with the worker
 * spinning (as much after a 20 us gap, 7 us once it has gone to sleep) on the 2.8 GHz
 * Xeon VM, 0.7-0.8 us on an idle 16-core host pinned to 2 cores; splitting a product
 * in two costs about 0.8-1.3 us in all (T2 = T1 / 2 + that). A product is split only
 * when its 1-thread time T1 is at least about 4x that, so the split saves >= 25%.
 *
 * Below this many multiply-adds a product runs on one thread: 64^3 is 5.0 us at one
 * thread (64x64x64, B pre-packed, 12x32), 6x the dispatch. */
#define PARALLEL_MIN_MACS (64 * 64 * 64)
/* Rows up to which a product counts as a stream of B (each element of B is used at
 * most this many times; the 1-row kernels run these). */
#define SMALL_M 4
/* Bytes of B below which a product of at most SMALL_M rows runs on one thread. M = 1,
 * B pre-packed, forced 2-thread split / 1 thread, median of 5-7 rounds: 64 KiB
 * (1.0 us) 1.08 / 1.53-1.63 (VM / idle host), 128 KiB 0.90 / 1.15-1.19, 256 KiB
 * (3 us) 0.77 / 0.88-0.97, 512 KiB 0.68 / 0.81-0.89, 1.5 MiB 0.43-0.76 on the idle
 * host (each core keeps its half in L2). */
#define PARALLEL_MIN_B_BYTES (256 * 1024)
/* K is left unblocked up to this depth for the 1-row kernels (see default_cfg). */
#define ROW_KC_MAX 4096
/* Floats of the B block (nc x kc) the 1-row kernels' nc is cut to: the scratch a raw
 * B is packed into stays at 512 KiB a thread whatever K is. */
#define ROW_B_BLOCK (128 * 1024)

static const nr_gemm_ukernel ukernels[] = {
#define NR_GEMM_UKERNEL(name, mr, nr, isa) {#name, mr, nr, isa},
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL
};

static const nr_gemm_ukernel_fn ukernel_fns[] = {
#define NR_GEMM_UKERNEL(name, mr, nr, isa) name,
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL
};

static const nr_gemm_kdesc kdescs[] = {
#define NR_GEMM_UKERNEL(name, mr, nr, isa) {#name, mr, nr, NR_GEMM_DIM_N},
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL
};

/* The fp32 family for the shared driver: N split first (A is packed per thread,
 * B's panels stream once either way); the thresholds above, B's bytes in floats. */
const nr_gemm_family nr_gemm_f32_family = {
    .kernels = kdescs,
    .count = NR_GEMM_UK_COUNT,
    .fallback = 0,
    .kc_unit = 1,
    .small_m = SMALL_M,
    .min_b_values = PARALLEL_MIN_B_BYTES / (int64_t)sizeof(float),
    .min_macs = PARALLEL_MIN_MACS,
    .any_thread = false,
};

_Static_assert(sizeof ukernels / sizeof ukernels[0] == NR_GEMM_UK_COUNT, "ukernel list");
/* Edge tiles go through a local MAX_MR x MAX_NR tile (run_tile). */
#define NR_GEMM_UKERNEL(name, mr, nr, isa)                                              \
  _Static_assert((mr) <= MAX_MR && (nr) <= MAX_NR, #name ": tile larger than MAX_MR x MAX_NR");
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL

int nr_gemm_ukernel_count(void) {
  return NR_GEMM_UK_COUNT;
}

const nr_gemm_ukernel *nr_gemm_ukernel_get(int i) {
  return nr_gemm_family_has(&nr_gemm_f32_family, i) ? &ukernels[i] : NULL;
}

nr_gemm_ukernel_fn nr_gemm_ukernel_fn_get(int i) {
  return nr_gemm_family_has(&nr_gemm_f32_family, i) ? ukernel_fns[i] : NULL;
}

/* nr_gemm_even_kc in multiples of 8 floats (a 32-byte row of A's panels). */
static uint16_t even_kc(int64_t k, int64_t max) {
  return nr_gemm_even_kc(k, max, 8);
}

/* nc for a 1-row kernel of nr columns at depth kc: the B block within ROW_B_BLOCK
 * floats, at most 4096 columns. With a pre-packed B it only orders the loop (the
 * packed layout depends on kc alone). */
static uint16_t row_nc(int64_t kc, int nr) {
  int64_t nc = ROW_B_BLOCK / kc / nr * nr;
  return (uint16_t)(nc < nr ? nr : nc > 4096 ? 4096 : nc);
}

nr_gemm_cfg nr_gemm_default_cfg(int64_t m, int64_t n, int64_t k) {
  unsigned isa = nr_cpu_isa();
  /* 12x32 AVX-512 on a 48 KiB L1 / 1.25 MiB L2 core: a B micro-panel (kc x 32, at
   * most 32 KiB) stays in L1 while the A micro-panels (12 x kc) stream past it from
   * the A block (144 x kc, at most 144 KiB, L2); the B block (kc x 512, at most
   * 512 KiB) also fits L2, so B packed per call (conv's im2col columns) is read back
   * from L2, not L3: nc = 512 measured 5-15% faster than 4096 there and no slower
   * with pre-packed B. 12 rows rather than 14: channel and token counts are
   * multiples of 8 or 16 far more often than of 14 (64 pads to 72 / 70, 128 to 132 /
   * 140, 48, 96 and 144 not at all / to 56, 98, 154), which outweighs 14x32's ~2%
   * better full-tile throughput on resnet18 and bert shapes. */
  /* One row: no A reuse to block for (the A row, 16 KiB at most, stays in L1), so K is
   * not cut and the packed B is one run of nr-column panels of depth K: a thread's
   * column slice of it is contiguous. */
  uint16_t kc1 = even_kc(k, ROW_KC_MAX);
  if (isa & NR_ISA_AVX512) {
    if (m == 1)
      return (nr_gemm_cfg){NR_GEMM_UK_nr_f32_gemm_1x32__avx512, 144, kc1, row_nc(kc1, 32)};
    return (nr_gemm_cfg){NR_GEMM_UK_nr_f32_gemm_12x32__avx512, 144, even_kc(k, 256), 512};
  }
  /* 6x16 AVX2: an A panel (6 x 256) and a B panel (256 x 16) fit L1 (22 KiB), the A
   * block (72 x 256, 72 KiB) fits L2, the B block (256 x 4080, 4 MiB) L3. */
  if (isa & NR_ISA_AVX2) {
    if (m == 1)
      return (nr_gemm_cfg){NR_GEMM_UK_nr_f32_gemm_1x16__avx2, 72, kc1, row_nc(kc1, 16)};
    return (nr_gemm_cfg){NR_GEMM_UK_nr_f32_gemm_6x16__avx2, 72, 256, 4080};
  }
  if (m == 1)
    return (nr_gemm_cfg){NR_GEMM_UK_nr_f32_gemm_1x8, 64, kc1, row_nc(kc1, 8)};
  return (nr_gemm_cfg){NR_GEMM_UK_nr_f32_gemm_4x8, 64, 256, 4096};
}

/* ---- blocking -------------------------------------------------------------------- */

typedef nr_gemm_blocking blocking;

static blocking get_blocking(nr_gemm_cfg cfg) {
  return nr_gemm_blocking_get(&nr_gemm_f32_family, cfg);
}

/* ---- packing ----------------------------------------------------------------------- */

/* Rows of a source block copied per pass over its panels: enough rows that each
 * panel receives a contiguous run (16 x 128 B for nr = 32), few enough that the
 * source rows stay a handful of sequential streams the prefetchers follow. Walking
 * one panel at a time instead touches kb rows (kb pages) per panel, and packing the
 * im2col columns of resnet18's first 3x3 convs ran at 2 GB/s. */
#define PACK_ROWS 16

/* One row of a full panel: a copy of compile-time size the compiler inlines. */
static inline void copy_full(float *restrict dst, const float *restrict src, int width) {
  switch (width) {
  case 8: memcpy(dst, src, 8 * sizeof(float)); return;
  case 16: memcpy(dst, src, 16 * sizeof(float)); return;
  case 24: memcpy(dst, src, 24 * sizeof(float)); return;
  case 32: memcpy(dst, src, 32 * sizeof(float)); return;
  default: memcpy(dst, src, sizeof(float) * (size_t)width);
  }
}

/* Source rows p (kb of them, ld apart) hold `cols` contiguous floats each; cuts them
 * into width-wide panels of kb x width floats (the last one zero-padded). This is
 * B (not transposed) into nr-column panels and transposed A into mr-row panels. */
static void panel_rows(const float *src, int64_t ld, int64_t kb, int64_t cols, int width,
                       float *out) {
  int64_t full = cols / width, w = cols - full * width;
  for (int64_t p0 = 0; p0 < kb; p0 += PACK_ROWS) {
    int64_t pe = nr_gemm_min64(p0 + PACK_ROWS, kb);
    for (int64_t j = 0; j < full; j++) {
      float *dst = out + j * width * kb;
      for (int64_t p = p0; p < pe; p++)
        copy_full(dst + p * width, src + p * ld + j * width, width);
    }
    if (!w)
      continue;
    float *dst = out + full * width * kb;
    for (int64_t p = p0; p < pe; p++) {
      memcpy(dst + p * width, src + p * ld + full * width, sizeof(float) * (size_t)w);
      memset(dst + p * width + w, 0, sizeof(float) * (size_t)(width - w));
    }
  }
}

/* Source rows r (`rows` of them, ld apart) hold kb contiguous floats each; writes
 * out[p * width + r] per width-row panel (zero-padded): A (not transposed) into
 * mr-row panels and transposed B into nr-column panels. Row by row, reading each
 * source row once in order (measured faster than writing the panel in order). */
static void panel_gather(const float *src, int64_t ld, int64_t kb, int64_t rows,
                         int width, float *out) {
  if ((nr_cpu_isa() & NR_ISA_AVX512) && width <= 16) {
    nr_gemm_pack_gather__avx512(src, ld, kb, rows, width, out);
    return;
  }
  for (int64_t i = 0; i < rows; i += width, out += width * kb) {
    int64_t h = nr_gemm_min64(width, rows - i);
    for (int64_t r = 0; r < h; r++) {
      const float *s = src + (i + r) * ld;
      for (int64_t p = 0; p < kb; p++)
        out[p * width + r] = s[p];
    }
    for (int64_t r = h; r < width; r++)
      for (int64_t p = 0; p < kb; p++)
        out[p * width + r] = 0;
  }
}

/* Packs rows [r0, r0+rows) x cols [p0, p0+kb) of op(A) into mr-row panels. */
static void pack_a_block(const nr_gemm_operand *a, int mr, int64_t r0, int64_t rows,
                         int64_t p0, int64_t kb, float *out) {
  if (a->trans)
    panel_rows(a->data + p0 * a->ld + r0, a->ld, kb, rows, mr, out);
  else
    panel_gather(a->data + r0 * a->ld + p0, a->ld, kb, rows, mr, out);
}

/* Packs rows [p0, p0+kb) x cols [c0, c0+cols) of op(B) into nr-column panels. */
static void pack_b_block(const nr_gemm_operand *b, int nr, int64_t p0, int64_t kb,
                         int64_t c0, int64_t cols, float *out) {
  if (b->trans)
    panel_gather(b->data + c0 * b->ld + p0, b->ld, kb, cols, nr, out);
  else
    panel_rows(b->data + p0 * b->ld + c0, b->ld, kb, cols, nr, out);
}

size_t nr_gemm_packed_a_size(nr_gemm_cfg cfg, int64_t m, int64_t k) {
  blocking bl = get_blocking(cfg);
  return sizeof(float) * (size_t)nr_gemm_packed_elems(&nr_gemm_f32_family, bl.mr, m, k);
}

size_t nr_gemm_packed_b_size(nr_gemm_cfg cfg, int64_t k, int64_t n) {
  blocking bl = get_blocking(cfg);
  return sizeof(float) * (size_t)nr_gemm_packed_elems(&nr_gemm_f32_family, bl.nr, n, k);
}

void nr_gemm_pack_a(nr_gemm_cfg cfg, int64_t m, int64_t k, nr_gemm_operand a, float *out) {
  blocking bl = get_blocking(cfg);
  int64_t mpad = nr_gemm_round_up(m, bl.mr);
  for (int64_t pc = 0; pc < k; pc += bl.kc)
    pack_a_block(&a, bl.mr, 0, m, pc, nr_gemm_min64(bl.kc, k - pc), out + pc * mpad);
}

void nr_gemm_pack_b(nr_gemm_cfg cfg, int64_t k, int64_t n, nr_gemm_operand b, float *out) {
  blocking bl = get_blocking(cfg);
  int64_t npad = nr_gemm_round_up(n, bl.nr);
  for (int64_t pc = 0; pc < k; pc += bl.kc)
    pack_b_block(&b, bl.nr, pc, nr_gemm_min64(bl.kc, k - pc), 0, n, out + pc * npad);
}

/* ---- epilogue ---------------------------------------------------------------------- */

static void act_row(nr_act act, float a, float b, float *x, int64_t n) {
  switch (act) {
  case NR_ACT_NONE:
    return;
  case NR_ACT_RELU:
    for (int64_t j = 0; j < n; j++)
      x[j] = x[j] > 0 ? x[j] : 0;
    return;
  case NR_ACT_CLIP:
    for (int64_t j = 0; j < n; j++) {
      float v = x[j] < a ? a : x[j];
      x[j] = v > b ? b : v;
    }
    return;
  case NR_ACT_LEAKY_RELU:
    for (int64_t j = 0; j < n; j++)
      x[j] = x[j] >= 0 ? x[j] : a * x[j];
    return;
  default:
    nr_act_apply(act, a, b, x, n);
  }
}

void nr_gemm_epilogue_portable(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                               int64_t n, float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; i++) {
    float *restrict x = c + i * ldc;
    if (ep->bias && ep->bias_per_row) {
      float bv = ep->bias[row + i];
      for (int64_t j = 0; j < n; j++)
        x[j] += bv;
    } else if (ep->bias) {
      const float *restrict bv = ep->bias + col;
      for (int64_t j = 0; j < n; j++)
        x[j] += bv[j];
    }
    if (ep->residual) {
      const float *restrict r = ep->residual + (row + i) * ep->ldr + col;
      float beta = ep->beta;
      for (int64_t j = 0; j < n; j++)
        x[j] += beta * r[j];
    }
    act_row(ep->act, ep->act_a, ep->act_b, x, n);
  }
}

nr_gemm_epilogue_fn nr_gemm_epilogue_pick(void) {
  return (nr_cpu_isa() & NR_ISA_AVX512) ? nr_gemm_epilogue__avx512 : nr_gemm_epilogue_portable;
}

void nr_gemm_epilogue_apply(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                            int64_t n, float *c, int64_t ldc) {
  if (nr_gemm_epilogue_active(ep))
    nr_gemm_epilogue_pick()(ep, row, col, m, n, c, ldc);
}

void nr_gemm_zero_k(int64_t m, int64_t n, float *c, int64_t ldc, const nr_epilogue *ep) {
  for (int64_t i = 0; i < m; i++)
    memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
  nr_gemm_epilogue_apply(ep, 0, 0, m, n, c, ldc);
}

/* ---- the nest's hooks (the nest: gemm_common.h) ------------------------------------ */

typedef struct gemm_job {
  nr_gemm_nest nest;
  blocking bl;           /* nest.plan.bl */
  nr_gemm_ukernel_fn uk;
  int64_t m, n, k;
  float alpha;
  nr_gemm_operand a, b;
  float *c;
  int64_t ldc;
  const nr_epilogue *ep; /* NULL when it has nothing to do */
  nr_gemm_epilogue_fn epi;
  float *scratch;        /* 64-byte aligned */
  int64_t thread_floats; /* per-thread scratch: A block, then B block */
  int64_t a_floats;
} gemm_job;

/* A thread's block buffers. */
typedef struct gemm_ws {
  float *abuf, *bbuf;
} gemm_ws;

static const void *hook_pack_a(const void *job, void *ws, const nr_gemm_at *at) {
  const gemm_job *j = job;
  if (!j->a.packed) {
    float *abuf = ((gemm_ws *)ws)->abuf;
    pack_a_block(&j->a, j->bl.mr, at->ic, at->mb, at->pc, at->kb, abuf);
    return abuf;
  }
  int64_t mpad = nr_gemm_round_up(j->m, j->bl.mr);
  return j->a.data + nr_gemm_packed_at(at->pc, mpad, at->ic, at->kb);
}

static const void *hook_pack_b(const void *job, void *ws, const nr_gemm_at *at) {
  const gemm_job *j = job;
  if (!j->b.packed) {
    float *bbuf = ((gemm_ws *)ws)->bbuf;
    pack_b_block(&j->b, j->bl.nr, at->pc, at->kb, at->jc, at->nb, bbuf);
    return bbuf;
  }
  int64_t npad = nr_gemm_round_up(j->n, j->bl.nr);
  return j->b.data + nr_gemm_packed_at(at->pc, npad, at->jc, at->kb);
}

/* A full tile straight into C. */
static void hook_tile(const void *job, void *ws, const nr_gemm_at *at,
                      const nr_gemm_tile *t) {
  (void)ws;
  const gemm_job *j = job;
  float *c = j->c + t->row * j->ldc + t->col;
  j->uk(at->kb, t->a, t->b, c, j->ldc, j->alpha, at->kflags & NR_GEMM_ACC);
  if ((at->kflags & NR_GEMM_LAST) && j->ep)
    j->epi(j->ep, t->row, t->col, t->h, t->w, c, j->ldc);
}

/* An edge tile through a local mr x nr tile (kernels only see full tiles). */
static void hook_edge(const void *job, void *ws, const nr_gemm_at *at,
                      const nr_gemm_tile *t) {
  (void)ws;
  const gemm_job *j = job;
  float tile[MAX_MR * MAX_NR] __attribute__((aligned(64)));
  float *c = j->c + t->row * j->ldc + t->col;
  int nr = j->bl.nr, acc = at->kflags & NR_GEMM_ACC;
  nr_gemm_edge_load(tile, nr, c, j->ldc, t, acc);
  j->uk(at->kb, t->a, t->b, tile, nr, j->alpha, acc);
  if ((at->kflags & NR_GEMM_LAST) && j->ep)
    j->epi(j->ep, t->row, t->col, t->h, t->w, tile, nr);
  nr_gemm_edge_store(tile, nr, c, j->ldc, t);
}

/* The pre-packed B micro-panel the nest reads after panel jr of block (jc, pc) of the
 * part's columns [c0, c1); NULL after the last or for a B packed per call. While the
 * row tiles of a pre-packed B micro-panel run, the next panel is prefetched into L2, a
 * slice per tile: weights that come from memory (a model's are read once per
 * inference, more than L3 holds) otherwise stall the first tile of every panel.
 * bert_tiny_op13 on one thread, 21 interleaved rounds: 0.97x the time (median of
 * rounds), 0.98x (their minimum). Not where a panel has one row tile (a batch-1
 * layer): there the kernel streams the panel once with its own prefetch, and a whole
 * panel requested up front made mlp's fp32 route 1.2x slower. Write prefetches of the
 * next tile's C rows measured nothing. */
static const void *hook_next_b(const void *job, const nr_gemm_at *at, int64_t jr,
                               int64_t *bytes) {
  const gemm_job *j = job;
  const blocking *bl = &j->bl;
  if (!j->b.packed)
    return NULL;
  int64_t npad = nr_gemm_round_up(j->n, bl->nr), fl = (int64_t)sizeof(float);
  if (jr + bl->nr < at->nb) {
    *bytes = at->kb * bl->nr * fl;
    return j->b.data + at->pc * npad + (at->jc + jr + bl->nr) * at->kb;
  }
  if (at->pc + at->kb < j->k) {
    int64_t kn = nr_gemm_min64(bl->kc, j->k - at->pc - at->kb);
    *bytes = kn * bl->nr * fl;
    return j->b.data + (at->pc + at->kb) * npad + at->jc * kn;
  }
  if (at->jc + bl->nc < at->c1) {
    int64_t k0 = nr_gemm_min64(bl->kc, j->k);
    *bytes = k0 * bl->nr * fl;
    return j->b.data + (at->jc + bl->nc) * k0;
  }
  return NULL;
}

/* BLIS's order: jc, pc (B block packed: kc x nc), ic (A block packed: mc x kc). */
static const nr_gemm_nest_ops gemm_ops = {
    .outer = NR_GEMM_DIM_N,
    .pack_a = hook_pack_a,
    .pack_b = hook_pack_b,
    .tile = hook_tile,
    .edge = hook_edge,
    .next_b = hook_next_b,
};

static void gemm_part(void *arg, int64_t begin, int64_t end, int thread) {
  const gemm_job *j = arg;
  gemm_ws ws = {j->scratch + (int64_t)thread * j->thread_floats, NULL};
  ws.bbuf = ws.abuf + j->a_floats;
  nr_gemm_nest_parts(&j->nest, &gemm_ops, j, &ws, begin, end);
}

/* ---- scratch and threading ----------------------------------------------------------- */

/* Per thread: an A block of floats, then a B block, each a multiple of 16 floats. */
static int64_t a_buf_floats(const blocking *bl, int64_t m, int64_t k) {
  return nr_gemm_round_up(nr_gemm_block_rows(bl, m) * nr_gemm_block_depth(bl, k), 16);
}

static int64_t b_buf_floats(const blocking *bl, int64_t n, int64_t k) {
  return nr_gemm_round_up(nr_gemm_block_cols(bl, n) * nr_gemm_block_depth(bl, k), 16);
}

size_t nr_gemm_scratch_size(nr_gemm_cfg cfg, int64_t m, int64_t n, int64_t k, int threads) {
  blocking bl = get_blocking(cfg);
  int64_t per = a_buf_floats(&bl, m, k) + b_buf_floats(&bl, n, k);
  return nr_gemm_scratch_total(sizeof(float) * (size_t)per, threads);
}

nr_gemm_split nr_gemm_pick_split(nr_gemm_cfg cfg, int64_t m, int64_t n, int threads) {
  blocking bl = get_blocking(cfg);
  return (nr_gemm_split)nr_gemm_pick_dim(&bl, m, n, threads);
}

int nr_gemm_threads_for(nr_gemm_cfg cfg, nr_gemm_split split, int64_t m, int64_t n,
                        int64_t k, int threads) {
  blocking bl = get_blocking(cfg);
  split = (nr_gemm_split)(split & ~NR_GEMM_SPLIT_ANY_THREAD);
  return nr_gemm_parts_for(&nr_gemm_f32_family, &bl, split, m, n, k, threads);
}

void nr_gemm_split_run(nr_gemm_cfg cfg, nr_gemm_split split, int64_t m, int64_t n,
                       int64_t k, float alpha, nr_gemm_operand a, nr_gemm_operand b,
                       float *c, int64_t ldc, const nr_epilogue *ep, void *scratch,
                       nr_threadpool *pool, int threads) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) {
    nr_gemm_zero_k(m, n, c, ldc, ep);
    return;
  }
  int t = nr_gemm_call_threads(pool, threads);
  bool any_thread = (split & NR_GEMM_SPLIT_ANY_THREAD) != 0;
  int dim = split & ~NR_GEMM_SPLIT_ANY_THREAD;
  nr_gemm_plan plan = nr_gemm_plan_make(&nr_gemm_f32_family, cfg, dim, m, n, k, t);
  int kcu = nr_gemm_f32_family.kc_unit;
  gemm_job j = {.nest = {plan, k, kcu, sizeof(float), sizeof(float)},
                .m = m, .n = n, .k = k, .alpha = alpha, .a = a, .b = b, .c = c,
                .ldc = ldc, .ep = nr_gemm_epilogue_active(ep),
                .epi = nr_gemm_epilogue_pick()};
  j.bl = plan.bl;
  j.uk = ukernel_fns[j.bl.uk];
  j.a_floats = a_buf_floats(&j.bl, m, k);
  j.thread_floats = j.a_floats + b_buf_floats(&j.bl, n, k);
  j.scratch = nr_gemm_scratch_align(scratch);
  nr_gemm_plan_run(&plan, pool, any_thread, gemm_part, &j);
}

void nr_gemm(nr_gemm_cfg cfg, int64_t m, int64_t n, int64_t k, float alpha,
             nr_gemm_operand a, nr_gemm_operand b, float *c, int64_t ldc,
             const nr_epilogue *ep, void *scratch, nr_threadpool *pool, int threads) {
  nr_gemm_split_run(cfg, NR_GEMM_SPLIT_AUTO, m, n, k, alpha, a, b, c, ldc, ep, scratch,
                    pool, threads);
}
