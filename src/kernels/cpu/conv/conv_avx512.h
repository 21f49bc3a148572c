/* conv_avx512.h - small AVX-512 helpers the AVX-512 convolution kernels share
 * (conv_igemm__avx512.c, conv_sp__avx512.c). Include only from files compiled with the
 * AVX-512 flags (*__avx512.c): the helpers are inline AVX-512 code.
 *
 * Key decision: a header of static inline functions rather than a compiled file, so
 * the helpers inline into each kernel's loops under that kernel's own flags. */
#ifndef NR_KERNELS_CPU_CONV_CONV_AVX512_H
#define NR_KERNELS_CPU_CONV_CONV_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* dst[0, n) = src[0], src[2], ..., src[2n - 2]: the stride-2 phase of a row, 16 outputs
 * from two masked loads and one permute, reading no float past src[2n - 2] (the scalar
 * loop it replaced had cost about a tenth of resnet50's stride-2 3x3 layers, perf). */
static inline void nr_conv_even_floats(float *dst, const float *src, int64_t n) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                        4, 2, 0);
  for (int64_t k = 0; k < n; k += 16) {
    int64_t lo = 2 * (n - k) - 1, hi = lo - 16; /* inputs left from src + 2k */
    __mmask16 ml = lo >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << lo) - 1);
    __mmask16 mh = hi >= 16 ? (__mmask16)0xFFFF : hi <= 0 ? 0 : (__mmask16)((1u << hi) - 1);
    __mmask16 m = n - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - k)) - 1);
    __m512 a = _mm512_maskz_loadu_ps(ml, src + 2 * k);
    __m512 b = _mm512_maskz_loadu_ps(mh, src + 2 * k + 16);
    _mm512_mask_storeu_ps(dst + k, m, _mm512_permutex2var_ps(a, even, b));
  }
}

#endif
