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
 *   split: M or N in whole panels, the         micro-kernels, their packers (formats
 *     preferred one when it has two panels       do differ: fp32 panels, 16-bit panels
 *     per thread or the larger extent            with interleaved halves, 4-byte k
 *   packing plan: a packed operand's size,       groups of u8 / s8), the loop nest
 *     a kc block of it at pc * padded           over a part and its edge tiles, the
 *     extent, panel t0 at t0 * depth; block     epilogue's place (registers or after)
 *     extents; scratch = per thread x
 *     threads + 64 bytes of alignment
 *   dispatch: a part on the caller or one
 *     per thread; a part's row / column range
 *
 * Every function is pure arithmetic on the record it is given (no allocation, no
 * ISA test), so the decisions can be tabled and held against the drivers' old ones
 * (tests/unit/test_gemm_common.c, tests/data/gemm_decisions.inc). */
#ifndef NR_KERNELS_CPU_GEMM_COMMON_H
#define NR_KERNELS_CPU_GEMM_COMMON_H

#include "kernels/cpu/gemm/gemm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
