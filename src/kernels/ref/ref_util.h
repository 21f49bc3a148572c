/* ref_util.h - small shared tools for the reference kernels: a broadcasting index
 * walker and C-order strides, plus the dtype helpers of ir/dtype.h.
 *
 * The reference kernels favour clarity over speed, so generic paths read and write
 * elements through nr_load_f64 / nr_store_f64 (float types, computed in double) or
 * nr_load_i64 / nr_store_i64 (integer types, exact; ir/dtype.h). Hot ops (Conv,
 * MatMul, Gemm, pooling) keep a float32 path of their own so that a resnet50 still
 * runs in seconds. */
#ifndef NR_KERNELS_REF_UTIL_H
#define NR_KERNELS_REF_UTIL_H

#include "ir/dtype.h"
#include "ir/ir.h"

#include <stdbool.h>
#include <stdint.h>

/* Walks the elements of an output shape in C order while tracking, for up to
 * NR_BCAST_MAX inputs, the offset of the broadcast element of each input.
 *
 *   nr_bcast it;
 *   nr_bcast_init(&it, out, 2, (const nr_value *[]){a, b});
 *   for (int64_t i = 0; i < it.count; i++, nr_bcast_next(&it))
 *     y[i] = fa[it.off[0]] + fb[it.off[1]];
 */
#define NR_BCAST_MAX 8
typedef struct nr_bcast {
  int rank, n;
  int64_t count;
  int64_t dims[NR_MAX_RANK];
  int64_t idx[NR_MAX_RANK];
  int64_t strides[NR_BCAST_MAX][NR_MAX_RANK];
  int64_t off[NR_BCAST_MAX];
} nr_bcast;

void nr_bcast_init(nr_bcast *it, const nr_value *out, int n, const nr_value *const *ins);
void nr_bcast_next(nr_bcast *it);

/* C-order strides (in elements) of a shape. */
void nr_strides(int rank, const int64_t *dims, int64_t *strides);

#endif
