/* simd_avx2.h - the 8-lane float vector of the *__avx2.c kernels (AVX2 + FMA), for
 * kernel bodies written once over nr_vf_* and compiled at each ISA's width: a
 * translation unit includes exactly one of simd_avx2.h and simd_avx512.h (its file
 * name gives it that ISA's -m flags, CMakeLists.txt), then the shared body.
 *
 * Key decision: every helper is the one intrinsic the hand-written AVX2 kernels used
 * before (vbroadcastss from memory, vmaskmovps for tail loads, the same horizontal
 * reduction order), so a body moved onto these helpers gives the same bits; tail
 * stores are split into plain stores (nr_vf_store_first), which write the same
 * bytes. A tail mask is a vector here (nr_vm: the
 * lanes' sign bits) and a __mmask16 in the AVX-512 header; bodies only pass it on. */
#ifndef NR_KERNELS_CPU_SIMD_AVX2_H
#define NR_KERNELS_CPU_SIMD_AVX2_H
#ifdef NR_SIMD_AVX512
#error "simd_avx2.h and simd_avx512.h in one translation unit"
#endif
#define NR_SIMD_AVX2 1

#include <immintrin.h>
#include <stdint.h>

typedef __m256 nr_vf;  /* 8 floats */
typedef __m256i nr_vm; /* lane mask: all ones in the lanes that take part */
#define NR_VF_LANES 8

static inline nr_vf nr_vf_zero(void) { return _mm256_setzero_ps(); }
static inline nr_vf nr_vf_set1(float x) { return _mm256_set1_ps(x); }
/* All lanes = *p, straight from memory (vbroadcastss m32). */
static inline nr_vf nr_vf_broadcast(const float *p) { return _mm256_broadcast_ss(p); }
static inline nr_vf nr_vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void nr_vf_store(float *p, nr_vf v) { _mm256_storeu_ps(p, v); }

static inline nr_vf nr_vf_add(nr_vf a, nr_vf b) { return _mm256_add_ps(a, b); }
static inline nr_vf nr_vf_sub(nr_vf a, nr_vf b) { return _mm256_sub_ps(a, b); }
static inline nr_vf nr_vf_mul(nr_vf a, nr_vf b) { return _mm256_mul_ps(a, b); }
/* a * b + c, rounded once. */
static inline nr_vf nr_vf_fma(nr_vf a, nr_vf b, nr_vf c) {
  return _mm256_fmadd_ps(a, b, c);
}
/* vmaxps / vminps: b when either operand is NaN. */
static inline nr_vf nr_vf_max(nr_vf a, nr_vf b) { return _mm256_max_ps(a, b); }
static inline nr_vf nr_vf_min(nr_vf a, nr_vf b) { return _mm256_min_ps(a, b); }

/* e in the lanes where a != b (ordered: a NaN lane compares equal to nothing and
 * gives 0), 0 in the others. */
static inline nr_vf nr_vf_keep_ne(nr_vf e, nr_vf a, nr_vf b) {
  return _mm256_and_ps(e, _mm256_cmp_ps(a, b, _CMP_NEQ_OQ));
}

/* Lanes [0, n), n clamped to [0, 8]. */
static inline nr_vm nr_vm_first(int64_t n) {
  int k = (int)(n < 0 ? 0 : n > 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline nr_vm nr_vm_all(void) { return _mm256_set1_epi32(-1); }
/* The lanes of m from p, 0 elsewhere; lanes outside m are not read. */
static inline nr_vf nr_vf_load_tail(const float *p, nr_vm m) {
  return _mm256_maskload_ps(p, m);
}
/* The first n lanes of v (0 <= n <= 8) to p, nothing past them, in 16-, 8- and 4-byte
 * stores: vmaskmovps stores are microcoded on AMD's cores (about 18 cycles a store on
 * a Zen 3 EPYC, 3 for this sequence). */
static inline void nr_vf_store_first(float *p, nr_vf v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
    return;
  }
  __m128 h = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(p, h);
    p += 4, n -= 4;
    h = _mm256_extractf128_ps(v, 1);
  }
  if (n >= 2) {
    _mm_storel_pi((__m64 *)p, h);
    p += 2, n -= 2;
    h = _mm_movehl_ps(h, h);
  }
  if (n)
    _mm_store_ss(p, h);
}
/* The lanes of m to p; memory outside m is not written. A mask of the first lanes
 * (nr_vm_first's) goes through nr_vf_store_first, any other through vmaskmovps. */
static inline void nr_vf_store_tail(float *p, nr_vm m, nr_vf v) {
  unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(m));
  if (!(bits & (bits + 1)))
    nr_vf_store_first(p, v, __builtin_popcount(bits));
  else
    _mm256_maskstore_ps(p, m, v);
}

/* Sum of the lanes: halves, then pairs, then the last two. */
static inline float nr_vf_hsum(nr_vf v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
/* Largest lane, in nr_vf_hsum's order. */
static inline float nr_vf_hmax(nr_vf v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#endif
