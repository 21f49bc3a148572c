/* lpgemm_impl.h - what the narrow GEMM family shares internally (lpgemm.h is the
 * contract for other families): the micro-kernel signature and the declarations
 * expanded from lpgemm_ukernels.inc, and the per-ISA conversion routines behind the
 * bulk forms of lpgemm.h, declared here so the tests can hold each one against the
 * scalar definition.
 *
 * A micro-kernel computes one mr x nr tile of C from an fp32 A micro-panel (k rows of
 * mr floats) and a 16-bit B micro-panel (k rows of nr values, interleaved halves when
 * the kernel's list line says so):
 *   C = alpha * A*B          (acc == 0: C is written without being read)
 *   C = C + alpha * A*B      (acc != 0)
 * Full tiles only; the loop nest routes edge tiles through a local tile. */
#ifndef NR_KERNELS_CPU_LPGEMM_IMPL_H
#define NR_KERNELS_CPU_LPGEMM_IMPL_H

#include "kernels/cpu/gemm/gemm_impl.h"
#include "kernels/cpu/lpgemm/lpgemm.h"

typedef void (*nr_lpgemm_ukernel_fn)(int64_t k, const float *a, const uint16_t *b,
                                     float *c, int64_t ldc, float alpha, int acc);

#define NR_LP_UKERNEL(name, type, mr, nr, isa, il)                                      \
  void name(int64_t k, const float *a, const uint16_t *b, float *c, int64_t ldc,      \
            float alpha, int acc);
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa)
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN

enum {
#define NR_LP_UKERNEL(name, type, mr, nr, isa, il) NR_LP_UK_##name,
#define NR_LP_BLOCKWIDEN(name, type, f32, mr, nr, isa) NR_LP_UK_##name,
#include "kernels/cpu/lpgemm/lpgemm_ukernels.inc"
#undef NR_LP_UKERNEL
#undef NR_LP_BLOCKWIDEN
  NR_LP_UK_COUNT
};

/* The family record the shared driver (gemm_common.h) runs this family by. */
extern const nr_gemm_family nr_lpgemm_family;
/* The lp kernel of list entry i (NULL for block-widening entries and bad indices). */
nr_lpgemm_ukernel_fn nr_lpgemm_ukernel_fn_get(int i);
/* The fp32 kernel a block-widening entry runs (NULL otherwise). */
nr_gemm_ukernel_fn nr_lpgemm_f32_fn_get(int i);

/* Conversions per ISA (call the __avx2 / __avx512 ones only where nr_cpu_isa() has
 * the ISA). Every one is bit-identical to the scalar definitions in lpgemm.h. */
void nr_lp_narrow_portable(nr_lp_type t, const float *src, uint16_t *dst, int64_t n);
void nr_lp_widen_portable(nr_lp_type t, const uint16_t *src, float *dst, int64_t n);
void nr_lp_round_portable(nr_lp_type t, const float *src, float *dst, int64_t n);
void nr_lp_narrow__avx2(nr_lp_type t, const float *src, uint16_t *dst, int64_t n);
void nr_lp_widen__avx2(nr_lp_type t, const uint16_t *src, float *dst, int64_t n);
void nr_lp_round__avx2(nr_lp_type t, const float *src, float *dst, int64_t n);
void nr_lp_narrow__avx512(nr_lp_type t, const float *src, uint16_t *dst, int64_t n);
void nr_lp_widen__avx512(nr_lp_type t, const uint16_t *src, float *dst, int64_t n);
void nr_lp_round__avx512(nr_lp_type t, const float *src, float *dst, int64_t n);
/* bf16 of src[0..2h) as interleaved halves: dst[2j] = src[j], dst[2j+1] = src[h+j]. */
void nr_lp_bf16_pairs_portable(const float *src, uint16_t *dst, int h);
void nr_lp_bf16_pairs__avx2(const float *src, uint16_t *dst, int h);   /* h % 8 == 0 */
void nr_lp_bf16_pairs__avx512(const float *src, uint16_t *dst, int h); /* h % 16 == 0 */
/* Dispatching form of the above. */
void nr_lp_bf16_pairs(const float *src, uint16_t *dst, int h);

#endif
