/* gemm_impl.h - what the GEMM family shares internally (not a contract for other
 * families; gemm.h is): the micro-kernel signature, the declarations expanded from
 * gemm_ukernels.inc, and nr_gemm_split, which is nr_gemm with the threaded loop chosen
 * by the caller (the gemm.threads knob) instead of by the heuristic.
 *
 * A micro-kernel computes one mr x nr tile of C from a packed A panel (k rows of mr
 * floats) and a packed B panel (k rows of nr floats):
 *   C = alpha * A*B          (acc == 0: C is written without being read)
 *   C = C + alpha * A*B      (acc != 0)
 * It only handles full tiles; the loop nest routes edge tiles through a local tile. */
#ifndef NR_KERNELS_CPU_GEMM_IMPL_H
#define NR_KERNELS_CPU_GEMM_IMPL_H

#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/gemm/gemm_common.h"
#include "plan/tactic.h"

typedef void (*nr_gemm_ukernel_fn)(int64_t k, const float *a, const float *b, float *c,
                                   int64_t ldc, float alpha, int acc);

#define NR_GEMM_UKERNEL(name, mr, nr, isa)                                              \
  void name(int64_t k, const float *a, const float *b, float *c, int64_t ldc,         \
            float alpha, int acc);
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL

enum {
#define NR_GEMM_UKERNEL(name, mr, nr, isa) NR_GEMM_UK_##name,
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL
  NR_GEMM_UK_COUNT
};

typedef enum nr_gemm_split {
  NR_GEMM_SPLIT_AUTO = 0, /* heuristic: the larger dimension, in panels */
  NR_GEMM_SPLIT_M = 1,    /* threads take row blocks (B is packed by each thread) */
  NR_GEMM_SPLIT_N = 2,    /* threads take column blocks (A is packed by each thread) */
  /* A flag or'ed onto one of the above (the gemm.threads_map=any knob): a part goes to
   * whichever thread claims it first. Without it part i runs on thread i
   * (nr_parallel_parts), so a thread streams the same slice of a pre-packed B on every
   * call and finds it in its core's L2. */
  NR_GEMM_SPLIT_ANY_THREAD = 4,
} nr_gemm_split;

void nr_gemm_split_run(nr_gemm_cfg cfg, nr_gemm_split split, int64_t m, int64_t n,
                       int64_t k, float alpha, nr_gemm_operand a, nr_gemm_operand b,
                       float *c, int64_t ldc, const nr_epilogue *ep, void *scratch,
                       nr_threadpool *pool, int threads);
/* Which split nr_gemm would use for this problem on `threads` threads. */
nr_gemm_split nr_gemm_pick_split(nr_gemm_cfg cfg, int64_t m, int64_t n, int threads);
/* How many of `threads` threads nr_gemm runs the problem on (1: the calling thread,
 * the pool is not woken): 1 when the work is too small to pay for the pool's
 * dispatch, else at most one per panel of the split dimension. */
int nr_gemm_threads_for(nr_gemm_cfg cfg, nr_gemm_split split, int64_t m, int64_t n,
                        int64_t k, int threads);
/* The family record the shared driver (gemm_common.h) runs this family by. */
extern const nr_gemm_family nr_gemm_f32_family;
/* The micro-kernel of cfg, NULL when the index is out of range. */
nr_gemm_ukernel_fn nr_gemm_ukernel_fn_get(int i);
/* Applies ep (NULL: nothing) to the m x n block of C at (row, col) of the whole C:
 * the AVX-512 body when nr_cpu_isa() has it, else the portable one. */
void nr_gemm_epilogue_apply(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                            int64_t n, float *c, int64_t ldc);
/* K = 0: C = epilogue(0) for the m x n C (what every family's driver writes). */
void nr_gemm_zero_k(int64_t m, int64_t n, float *c, int64_t ldc, const nr_epilogue *ep);
/* The two bodies (ep non-NULL); tests compare them. The AVX-512 one
 * (epilogue__avx512.c) only runs where nr_cpu_isa() has NR_ISA_AVX512. */
typedef void (*nr_gemm_epilogue_fn)(const nr_epilogue *ep, int64_t row, int64_t col,
                                    int64_t m, int64_t n, float *c, int64_t ldc);
void nr_gemm_epilogue_portable(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                               int64_t n, float *c, int64_t ldc);
void nr_gemm_epilogue__avx512(const nr_epilogue *ep, int64_t row, int64_t col, int64_t m,
                              int64_t n, float *c, int64_t ldc);
/* The body nr_gemm_epilogue_apply runs on this machine (the drivers call it per tile). */
nr_gemm_epilogue_fn nr_gemm_epilogue_pick(void);
/* gemm.c's panel_gather with zmm registers (pack__avx512.c; NR_ISA_AVX512 only):
 * packs `rows` source rows of kb floats (ld apart) into width-row panels of kb x
 * width floats, out[p * width + r], the last one zero-padded; width <= 16. */
void nr_gemm_pack_gather__avx512(const float *src, int64_t ld, int64_t kb, int64_t rows,
                                 int width, float *out);

#endif
