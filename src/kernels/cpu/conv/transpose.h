/* transpose.h - the two data-movement kernels every float32 layout reorder is made of
 * (reorder.c cuts a tensor into tiles and calls one of them per tile), in a portable
 * and an AVX2 version.
 *
 *   transpose:  dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols; lanes
 *               i in [rows, lanes) of every dst row are written as 0 (NCHW8C pad
 *               lanes). PLAIN <-> NHWC is a [C, HW] <-> [HW, C] transpose per image,
 *               PLAIN <-> NCHW8C one per block of 8 channels.
 *   copy_lanes: dst[r * ldd + l] = src[r * lds + l] for l < n, 0 for l in [n, lanes):
 *               NHWC <-> NCHW8C moves runs of (up to) 8 channels per pixel.
 *
 * Key decision: the AVX2 versions work in 8x8 register tiles (eight loads, the
 * unpack / shuffle / permute2f128 transpose, eight stores); tiles cut by the matrix
 * edge load and store through lane masks, so no element outside [rows x cols] of the
 * source or [cols x lanes] of the destination is touched and a tensor needs no
 * padding. Cache blocking is the caller's: it hands these tiles of at most 64 x 64. */
#ifndef NR_KERNELS_CPU_CONV_TRANSPOSE_H
#define NR_KERNELS_CPU_CONV_TRANSPOSE_H

#include "plan/tactic.h"

#include <stdint.h>

struct nr_threadpool;

/* nr_reorder_f32 (conv_internal.h) with the ISA bits to use instead of nr_cpu_isa():
 * tests and bench/reorder_bench.c run the portable and the AVX2 kernels side by side. */
void nr_reorder_f32_isa(const float *src, nr_layout from, float *dst, nr_layout to,
                        const int64_t *dims, struct nr_threadpool *pool, unsigned isa);

void nr_f32_transpose__portable(const float *src, int64_t lds, float *dst, int64_t ldd,
                                int64_t rows, int64_t cols, int64_t lanes);
void nr_f32_transpose__avx2(const float *src, int64_t lds, float *dst, int64_t ldd,
                            int64_t rows, int64_t cols, int64_t lanes);

void nr_f32_copy_lanes__portable(const float *src, int64_t lds, float *dst, int64_t ldd,
                                 int64_t rows, int64_t n, int64_t lanes);
void nr_f32_copy_lanes__avx2(const float *src, int64_t lds, float *dst, int64_t ldd,
                             int64_t rows, int64_t n, int64_t lanes);

#endif
