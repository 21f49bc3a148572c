/* gemm_common.h - the driver the three GEMM families share: fp32 (gemm/), fp16 and
 * bf16 storage (lpgemm/) and int8 (qgemm/). BLIS-style, a family is a context: a
 * small table it fills in (nr_gemm_family, one nr_gemm_kdesc per line of its
 * enumerator list), and the decisions below are made once from that table, so a
 * shape is blocked, split and packed by the same rules whichever family runs it.
 *
 *   decided here (gemm_common.c)               supplied by a family
 *   --------------------------------------     ---------------------------------------
 *   kernel index -> kernel (fallback on a      the enumerator list: name, mr, nr, the
 *     bad index), lookup by name                 dimension its activations run along
 *   blocking: mc / nc whole tiles, kc in       kc_unit (kc granularity: 1, int8 4),
 *     kc_unit steps, 256 when unset; the         the default cfg per ISA and shape
 *     even-K-block rule of the defaults          (nr_*_default_cfg)
 *   threads: one below the dispatch cost       small_m, min_b_values, min_macs (the
 *     (multiply-adds, or B's values for          cost model's units), any_thread (how
 *     few-row products), else one part per       parts map onto threads)
 *     thread, at most one per panel
 *   split: M or N in whole panels, the         micro-kernels and their packers
 *     preferred one when it has two panels       (formats do differ: fp32 panels,
 *     per thread or the larger extent            16-bit panels with interleaved
 *   packing plan: a packed operand's size,       halves, 4-byte k groups of u8 / s8)
 *     a kc block of it at pc * padded          the nest's hooks (nr_gemm_nest_ops):
 *     extent, panel t0 at t0 * depth; block      what a block turns into before the
 *     extents; scratch = per thread x            kernels see it (packed, indexed,
 *     threads + 64 bytes of alignment            widened, rounded, quantized), a
 *   dispatch: a part on the caller or one        full tile and an edge tile (with
 *     per thread; a part's row / column range    the epilogue in registers or after),
 *   the loop nest (here, inline): BLIS's         what a final block becomes (int8's
 *     five loops over a part, in either          8-bit result), which B panel to
 *     order (columns or rows outermost),         prefetch (fp32), the loop order
 *     K-block flags, full / edge tiles
 *
 * Every function but the nest is pure arithmetic on the record it is given (no
 * allocation, no ISA test), so the decisions can be tabled and held against the
 * drivers' old ones (tests/unit/test_gemm_common.c, tests/data/gemm_decisions.inc).
 * The nest is written once, below, and instantiated per family: it is always inlined
 * into the family's part function with a constant table of hooks, so every hook is a
 * direct call the compiler inlines, and a hook runs per block or per tile, never per
 * element. Against the three hand-written nests it replaced (callgrind, AVX2, one
 * thread, fixed products): 0.3-0.9% fewer instructions in each driver, outputs
 * byte-identical (tests/unit/test_gemm_common.c checks the nest's promises). */
#ifndef NR_KERNELS_CPU_GEMM_COMMON_H
#define NR_KERNELS_CPU_GEMM_COMMON_H

#include "kernels/cpu/gemm/gemm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The threaded dimension; the same values as nr_gemm_split and nr_qgemm_split. */
enum { NR_GEMM_DIM_AUTO = 0, NR_GEMM_DIM_M = 1, NR_GEMM_DIM_N = 2 };

/* What the shared driver needs of one micro-kernel (a line of an enumerator list). */
typedef struct nr_gemm_kdesc {
  const char *name; /* also the tactic id */
  int mr, nr;
  int prefer;       /* NR_GEMM_DIM_M / _N: the activations' own dimension, split
                       first (no activation block is packed twice) */
} nr_gemm_kdesc;

/* A family, as the driver sees it. */
typedef struct nr_gemm_family {
  const nr_gemm_kdesc *kernels;
  int count;
  int fallback;         /* the kernel a bad index runs */
  int kc_unit;          /* kc is cut to a multiple of this; packed K is padded to it */
  int small_m;          /* products of at most this many rows stream B: their cost is
                           B's values (0: no such class) */
  int64_t min_b_values; /* ... below which they run on one thread */
  int64_t min_macs;     /* other products: one thread below this many multiply-adds */
  bool any_thread;      /* parts go to whichever thread claims them (nr_parallel_for),
                           else part i to thread i (nr_parallel_parts) */
} nr_gemm_family;

/* A cfg's blocking after the family's rules: mc a multiple of mr, nc of nr, both at
 * least one tile, kc a multiple of kc_unit (256 where the record leaves it unset). */
typedef struct nr_gemm_blocking {
  int uk; /* the kernel that runs (the fallback for a bad index) */
  int mr, nr, prefer;
  int64_t mc, kc, nc;
} nr_gemm_blocking;

/* How a product runs: its blocking, the threaded dimension and the parts. */
typedef struct nr_gemm_plan {
  nr_gemm_blocking bl;
  int64_t m, n;
  int split; /* NR_GEMM_DIM_M or _N */
  int parts; /* >= 1; 1: the calling thread runs it */
} nr_gemm_plan;

static inline int64_t nr_gemm_round_up(int64_t x, int64_t q) {
  return (x + q - 1) / q * q;
}

static inline int64_t nr_gemm_min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* ---- registry ---------------------------------------------------------------------- */

bool nr_gemm_family_has(const nr_gemm_family *f, int i);
/* Index of the kernel called name, or -1. */
int nr_gemm_family_find(const nr_gemm_family *f, const char *name);

/* ---- blocking ---------------------------------------------------------------------- */

nr_gemm_blocking nr_gemm_blocking_get(const nr_gemm_family *f, nr_gemm_cfg cfg);
/* The largest kc <= max that cuts K into equal blocks, rounded up to a multiple of
 * quantum (at least one quantum), so no block is a short remainder: K = 576 runs as
 * 3 x 192, K = 1024 as 4 x 256. */
uint16_t nr_gemm_even_kc(int64_t k, int64_t max, int quantum);

/* ---- splitting --------------------------------------------------------------------- */

/* The preferred dimension when it has two panels per thread or is the larger extent
 * in whole panels, else the other. */
int nr_gemm_pick_dim(const nr_gemm_blocking *bl, int64_t m, int64_t n, int threads);
/* Parts of `threads` threads for the product (1: too small to pay for the pool's
 * dispatch); split NR_GEMM_DIM_AUTO picks with nr_gemm_pick_dim. */
int nr_gemm_parts_for(const nr_gemm_family *f, const nr_gemm_blocking *bl, int split,
                      int64_t m, int64_t n, int64_t k, int threads);
/* The threads a call may use: threads (0: all online) capped at the pool's size. */
int nr_gemm_call_threads(nr_threadpool *pool, int threads);
/* The plan on `threads` threads (from nr_gemm_call_threads); split as above. */
nr_gemm_plan nr_gemm_plan_make(const nr_gemm_family *f, nr_gemm_cfg cfg, int split,
                               int64_t m, int64_t n, int64_t k, int threads);
/* Rows [*r0, *r1) x columns [*c0, *c1) of part `part`: whole panels, r0 a multiple of
 * mr and c0 of nr (so packed operands are indexed); empty when r0 >= r1 or c0 >= c1. */
void nr_gemm_plan_range(const nr_gemm_plan *p, int64_t part, int64_t *r0, int64_t *r1,
                        int64_t *c0, int64_t *c1);
/* Runs fn(arg, part, part + 1, thread) for every part: on the caller for one part,
 * else on the pool as the family maps parts (any_thread: the split's own flag). */
void nr_gemm_plan_run(const nr_gemm_plan *p, nr_threadpool *pool, bool any_thread,
                      nr_task_fn fn, void *arg);

/* ---- packing plan ------------------------------------------------------------------ */

/* Elements of an operand packed for tiles of `width` (extent channels or rows, depth
 * k padded to kc_unit). */
int64_t nr_gemm_packed_elems(const nr_gemm_family *f, int width, int64_t extent,
                             int64_t k);
/* Element offset of panel t0 of the kc block at pc of a packed operand: the block at
 * pc * padded (padded: the extent rounded up to the tile), the panel at t0 * depth
 * (depth: the block's packed depth). */
static inline int64_t nr_gemm_packed_at(int64_t pc, int64_t padded, int64_t t0,
                                        int64_t depth) {
  return pc * padded + t0 * depth;
}
/* Extents of one thread's blocks: rows of an A block, columns of a B block, depth. */
static inline int64_t nr_gemm_block_rows(const nr_gemm_blocking *bl, int64_t m) {
  return nr_gemm_min64(bl->mc, nr_gemm_round_up(m, bl->mr));
}
static inline int64_t nr_gemm_block_cols(const nr_gemm_blocking *bl, int64_t n) {
  return nr_gemm_min64(bl->nc, nr_gemm_round_up(n, bl->nr));
}
static inline int64_t nr_gemm_block_depth(const nr_gemm_blocking *bl, int64_t k) {
  return nr_gemm_min64(bl->kc, k);
}
/* Scratch bytes for per_thread bytes on each of `threads` threads (0: all online),
 * plus the 64 that nr_gemm_scratch_align may skip. */
size_t nr_gemm_scratch_total(size_t per_thread, int threads);
static inline void *nr_gemm_scratch_align(void *scratch) {
  return (void *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
}

/* ep, or NULL when it has nothing to do. */
static inline const nr_epilogue *nr_gemm_epilogue_active(const nr_epilogue *ep) {
  return !ep || (!ep->bias && !ep->residual && ep->act == NR_ACT_NONE) ? NULL : ep;
}

/* ---- the loop nest ----------------------------------------------------------------- */

/* The K block a tile is in (nr_gemm_at.kflags): ACC, not the first (C holds partial
 * sums to add to); LAST, the last (the epilogue runs after it). The int8 kernels'
 * NR_QGEMM_ACC / _FINAL have these values. */
enum { NR_GEMM_ACC = 1, NR_GEMM_LAST = 2 };

/* What one run of the nest shares with every hook: the part of C it covers and the
 * blocks it is in. Set by the nest, read by the hooks. */
typedef struct nr_gemm_at {
  int64_t r0, r1, c0, c1; /* the part: rows [r0, r1) x columns [c0, c1) of C */
  int64_t jc, nb;         /* the column block [jc, jc + nb) */
  int64_t pc, kb, kp;     /* the K block [pc, pc + kb); kp: kb padded to kc_unit */
  int64_t ic, mb;         /* the row block [ic, ic + mb) */
  int kflags;             /* NR_GEMM_ACC | NR_GEMM_LAST */
} nr_gemm_at;

/* One micro-tile: its packed panels and its h x w place at (row, col) of C (h < mr
 * or w < nr: an edge tile). */
typedef struct nr_gemm_tile {
  const void *a, *b;
  int64_t row, col, h, w;
} nr_gemm_tile;

/* What a family plugs into the nest: job is its own call record, ws its thread's
 * buffers and per-block state. Each hook runs once per block or per tile, never per
 * element. */
typedef struct nr_gemm_nest_ops {
  /* NR_GEMM_DIM_N: columns outermost (jc, pc, ic: a B block is packed once and every
   * row block sweeps it; BLIS's order). NR_GEMM_DIM_M: rows outermost (ic, pc, jc: an
   * A block is packed once and swept against every column of the part; pack_b must
   * then only index, as it runs once per row block). */
  int outer;
  /* The A block (at->ic, mb, pc, kb) / B block (at->jc, nb, pc, kb) in packed panels:
   * packed into ws, widened, or indexed in a pre-packed operand. */
  const void *(*pack_a)(const void *job, void *ws, const nr_gemm_at *at);
  const void *(*pack_b)(const void *job, void *ws, const nr_gemm_at *at);
  /* A full tile and an edge tile, with the epilogue where at->kflags has LAST. */
  void (*tile)(const void *job, void *ws, const nr_gemm_at *at, const nr_gemm_tile *t);
  void (*edge)(const void *job, void *ws, const nr_gemm_at *at, const nr_gemm_tile *t);
  /* Optional: rows [at->ic, + mb) x columns [col, col + cols) are final. */
  void (*final)(const void *job, void *ws, const nr_gemm_at *at, int64_t col,
                int64_t cols);
  /* Optional: the B micro-panel read after panel jr of the block, *bytes long (NULL:
   * none, or B is not pre-packed), prefetched into L2 a slice per row tile while
   * this one's run, on the part's first row block where it has two row tiles. */
  const void *(*next_b)(const void *job, const nr_gemm_at *at, int64_t jr,
                        int64_t *bytes);
} nr_gemm_nest_ops;

/* The shape one call runs the nest over. a_es / b_es: bytes of a packed element as
 * the tiles' panels are indexed (panel i of a block at i * tile * kp * es). */
typedef struct nr_gemm_nest {
  nr_gemm_plan plan;
  int64_t k;
  int kc_unit, a_es, b_es;
} nr_gemm_nest;

#define NR_GEMM_NEST_INLINE static inline __attribute__((always_inline))

/* The micro-tiles of an A block by a B block, jr outer, ir inner. */
NR_GEMM_NEST_INLINE void nr_gemm_nest_tiles(const nr_gemm_nest *nd,
                                            const nr_gemm_nest_ops *ops, const void *job,
                                            void *ws, const nr_gemm_at *at,
                                            const char *ab, const char *bb) {
  const nr_gemm_blocking *bl = &nd->plan.bl;
  int64_t as = at->kp * nd->a_es, bs = at->kp * nd->b_es;
  int64_t tiles = (at->mb + bl->mr - 1) / bl->mr;
  for (int64_t jr = 0; jr < at->nb; jr += bl->nr) {
    int64_t len = 0, pos = 0, step = 0;
    const char *pf = ops->next_b && at->ic == at->r0 && tiles > 1
                         ? (const char *)ops->next_b(job, at, jr, &len)
                         : NULL;
    if (pf)
      step = ((len + 63) / 64 + tiles - 1) / tiles * 64;
    nr_gemm_tile t = {.b = bb + jr * bs, .col = at->jc + jr};
    t.w = nr_gemm_min64(bl->nr, nd->plan.n - t.col);
    for (int64_t ir = 0; ir < at->mb; ir += bl->mr) {
      for (int64_t e = pos + step; pf && pos < e && pos < len; pos += 64)
        __builtin_prefetch(pf + pos, 0, 2);
      t.a = ab + ir * as, t.row = at->ic + ir;
      t.h = nr_gemm_min64(bl->mr, nd->plan.m - t.row);
      if (t.h == bl->mr && t.w == bl->nr)
        ops->tile(job, ws, at, &t);
      else
        ops->edge(job, ws, at, &t);
    }
  }
}

NR_GEMM_NEST_INLINE void nr_gemm_nest_kblock(const nr_gemm_nest *nd, nr_gemm_at *at,
                                             int64_t pc) {
  at->pc = pc, at->kb = nr_gemm_min64(nd->plan.bl.kc, nd->k - pc);
  at->kp = nr_gemm_round_up(at->kb, nd->kc_unit);
  at->kflags = (pc > 0 ? NR_GEMM_ACC : 0) | (pc + at->kb >= nd->k ? NR_GEMM_LAST : 0);
}

/* jc over N in nc steps, pc over K in kc steps (B block), ic over M in mc steps (A
 * block), then the tiles; a row block is final after the last K block. */
NR_GEMM_NEST_INLINE void nr_gemm_nest_cols(const nr_gemm_nest *nd,
                                           const nr_gemm_nest_ops *ops, const void *job,
                                           void *ws, nr_gemm_at *at) {
  const nr_gemm_blocking *bl = &nd->plan.bl;
  for (int64_t jc = at->c0; jc < at->c1; jc += bl->nc) {
    at->jc = jc, at->nb = nr_gemm_min64(bl->nc, at->c1 - jc);
    for (int64_t pc = 0; pc < nd->k; pc += bl->kc) {
      nr_gemm_nest_kblock(nd, at, pc);
      const char *bb = ops->pack_b(job, ws, at);
      for (int64_t ic = at->r0; ic < at->r1; ic += bl->mc) {
        at->ic = ic, at->mb = nr_gemm_min64(bl->mc, at->r1 - ic);
        const char *ab = ops->pack_a(job, ws, at);
        nr_gemm_nest_tiles(nd, ops, job, ws, at, ab, bb);
        if (ops->final && (at->kflags & NR_GEMM_LAST))
          ops->final(job, ws, at, jc, at->nb);
      }
    }
  }
}

/* ic over M in mc steps, pc over K (A block), jc over N in nc steps (B block, indexed),
 * then the tiles; a row block is final, all its columns, after the last K block. */
NR_GEMM_NEST_INLINE void nr_gemm_nest_rows(const nr_gemm_nest *nd,
                                           const nr_gemm_nest_ops *ops, const void *job,
                                           void *ws, nr_gemm_at *at) {
  const nr_gemm_blocking *bl = &nd->plan.bl;
  for (int64_t ic = at->r0; ic < at->r1; ic += bl->mc) {
    at->ic = ic, at->mb = nr_gemm_min64(bl->mc, at->r1 - ic);
    for (int64_t pc = 0; pc < nd->k; pc += bl->kc) {
      nr_gemm_nest_kblock(nd, at, pc);
      at->jc = at->c0, at->nb = nr_gemm_min64(bl->nc, at->c1 - at->c0);
      const char *ab = ops->pack_a(job, ws, at);
      for (int64_t jc = at->c0; jc < at->c1; jc += bl->nc) {
        at->jc = jc, at->nb = nr_gemm_min64(bl->nc, at->c1 - jc);
        nr_gemm_nest_tiles(nd, ops, job, ws, at, ab, ops->pack_b(job, ws, at));
      }
      if (ops->final && (at->kflags & NR_GEMM_LAST))
        ops->final(job, ws, at, at->c0, at->c1 - at->c0);
    }
  }
}

/* The nest over parts [begin, end) of the plan, with the thread's ws. Always inlined
 * into the family's part function with a constant ops table, so the hooks are direct
 * calls the compiler inlines and the nest costs what a hand-written one does. */
NR_GEMM_NEST_INLINE void nr_gemm_nest_parts(const nr_gemm_nest *nd,
                                            const nr_gemm_nest_ops *ops, const void *job,
                                            void *ws, int64_t begin, int64_t end) {
  for (int64_t part = begin; part < end; part++) {
    nr_gemm_at at = {0};
    nr_gemm_plan_range(&nd->plan, part, &at.r0, &at.r1, &at.c0, &at.c1);
    if (at.r0 >= at.r1 || at.c0 >= at.c1)
      continue;
    if (ops->outer == NR_GEMM_DIM_M)
      nr_gemm_nest_rows(nd, ops, job, ws, &at);
    else
      nr_gemm_nest_cols(nd, ops, job, ws, &at);
  }
}

/* Edge tiles of a float C: the h x w tile at c (rows ldc apart) into a local tile of
 * rows nr apart (only when acc: C holds partial sums), and back. */
static inline void nr_gemm_edge_load(float *tile, int nr, const float *c, int64_t ldc,
                                     const nr_gemm_tile *t, bool acc) {
  for (int64_t i = 0; acc && i < t->h; i++)
    memcpy(tile + i * nr, c + i * ldc, sizeof(float) * (size_t)t->w);
}

static inline void nr_gemm_edge_store(const float *tile, int nr, float *c, int64_t ldc,
                                      const nr_gemm_tile *t) {
  for (int64_t i = 0; i < t->h; i++)
    memcpy(c + i * ldc, tile + i * nr, sizeof(float) * (size_t)t->w);
}

#endif
