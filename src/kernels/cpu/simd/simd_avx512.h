/* simd_avx512.h - the 16-lane float vector of the *__avx512.c kernels (AVX-512 F/BW/
 * DQ/VL + FMA), the twin of simd_avx2.h: the same nr_vf_* names at twice the width, so
 * a kernel body written once over them compiles for either ISA. A translation unit
 * includes exactly one of the two headers (CMakeLists.txt gives a file named
 * *__avx512.c these flags).
 *
 * Key decision: each helper is the intrinsic the hand-written AVX-512 kernels used
 * before, so bodies moved onto them keep their instructions and their bits. Tails are
 * k-register masks (nr_vm = __mmask16): a masked load reads nothing and a masked store
 * writes nothing outside the mask, as vmaskmovps does in the AVX2 header. The
 * horizontal reductions are gcc's _mm512_reduce_*_ps, the order the AVX-512 kernels
 * always had; they are not the AVX2 order, which no kernel needs to match. */
#ifndef NR_KERNELS_CPU_SIMD_AVX512_H
#define NR_KERNELS_CPU_SIMD_AVX512_H
#ifdef NR_SIMD_AVX2
#error "simd_avx2.h and simd_avx512.h in one translation unit"
#endif
#define NR_SIMD_AVX512 1

#include <immintrin.h>
#include <stdint.h>

typedef __m512 nr_vf;    /* 16 floats */
typedef __mmask16 nr_vm; /* lane mask: bit i set when lane i takes part */
#define NR_VF_LANES 16

static inline nr_vf nr_vf_zero(void) { return _mm512_setzero_ps(); }
static inline nr_vf nr_vf_set1(float x) { return _mm512_set1_ps(x); }
/* All lanes = *p (vbroadcastss m32, or an embedded {1to16} operand). */
static inline nr_vf nr_vf_broadcast(const float *p) { return _mm512_set1_ps(*p); }
static inline nr_vf nr_vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void nr_vf_store(float *p, nr_vf v) { _mm512_storeu_ps(p, v); }

static inline nr_vf nr_vf_add(nr_vf a, nr_vf b) { return _mm512_add_ps(a, b); }
static inline nr_vf nr_vf_sub(nr_vf a, nr_vf b) { return _mm512_sub_ps(a, b); }
static inline nr_vf nr_vf_mul(nr_vf a, nr_vf b) { return _mm512_mul_ps(a, b); }
/* a * b + c, rounded once. */
static inline nr_vf nr_vf_fma(nr_vf a, nr_vf b, nr_vf c) {
  return _mm512_fmadd_ps(a, b, c);
}
/* vmaxps / vminps: b when either operand is NaN. */
static inline nr_vf nr_vf_max(nr_vf a, nr_vf b) { return _mm512_max_ps(a, b); }
static inline nr_vf nr_vf_min(nr_vf a, nr_vf b) { return _mm512_min_ps(a, b); }

/* e in the lanes where a != b (ordered: a NaN lane compares equal to nothing and
 * gives 0), 0 in the others. */
static inline nr_vf nr_vf_keep_ne(nr_vf e, nr_vf a, nr_vf b) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, b, _CMP_NEQ_OQ), e);
}

/* Lanes [0, n), n clamped to [0, 16]. */
static inline nr_vm nr_vm_first(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}
static inline nr_vm nr_vm_all(void) { return (__mmask16)0xFFFF; }
/* The lanes of m from p, 0 elsewhere; lanes outside m are not read. */
static inline nr_vf nr_vf_load_tail(const float *p, nr_vm m) {
  return _mm512_maskz_loadu_ps(m, p);
}
/* The lanes of m to p; memory outside m is not written. */
static inline void nr_vf_store_tail(float *p, nr_vm m, nr_vf v) {
  _mm512_mask_storeu_ps(p, m, v);
}

static inline float nr_vf_hsum(nr_vf v) { return _mm512_reduce_add_ps(v); }
static inline float nr_vf_hmax(nr_vf v) { return _mm512_reduce_max_ps(v); }

#endif
