/* transpose.c - portable versions of the reorder kernels of transpose.h.
 *
 * Key decision: the same 8x8 blocking as the AVX2 kernels, in plain loops, so the
 * portable path (NNROUTE_ISA=portable, non-x86 builds) keeps the cache behaviour of
 * the fast one: within a block, eight source rows are read and eight destination rows
 * written, each a short contiguous run. */
#include "kernels/cpu/conv/transpose.h"

#include <string.h>

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

void nr_f32_transpose__portable(const float *src, int64_t lds, float *dst, int64_t ldd,
                                int64_t rows, int64_t cols, int64_t lanes) {
  for (int64_t j0 = 0; j0 < cols; j0 += 8) {
    int64_t j1 = min64(j0 + 8, cols);
    for (int64_t i0 = 0; i0 < rows; i0 += 8) {
      int64_t i1 = min64(i0 + 8, rows);
      for (int64_t j = j0; j < j1; j++)
        for (int64_t i = i0; i < i1; i++)
          dst[j * ldd + i] = src[i * lds + j];
    }
    if (lanes > rows)
      for (int64_t j = j0; j < j1; j++)
        memset(dst + j * ldd + rows, 0, sizeof(float) * (size_t)(lanes - rows));
  }
}

void nr_f32_copy_lanes__portable(const float *src, int64_t lds, float *dst, int64_t ldd,
                                 int64_t rows, int64_t n, int64_t lanes) {
  for (int64_t r = 0; r < rows; r++) {
    memcpy(dst + r * ldd, src + r * lds, sizeof(float) * (size_t)n);
    if (lanes > n)
      memset(dst + r * ldd + n, 0, sizeof(float) * (size_t)(lanes - n));
  }
}
