/* ref_util.h - small shared tools for the reference kernels: half-precision
 * conversion, dtype-generic element access, and a broadcasting index walker.
 *
 * The reference kernels favour clarity over speed, so generic paths read and write
 * elements through nr_load_f64 / nr_store_f64 (float types, computed in double) or
 * nr_load_i64 / nr_store_i64 (integer types, exact). Hot ops (Conv, MatMul, Gemm,
 * pooling) keep a float32 path of their own so that a resnet50 still runs in seconds. */
#ifndef NR_KERNELS_REF_UTIL_H
#define NR_KERNELS_REF_UTIL_H

#include "ir/ir.h"

#include <stdbool.h>
#include <stdint.h>

float nr_f16_to_f32(uint16_t h);
uint16_t nr_f32_to_f16(float f);    /* round to nearest even, saturating to inf */
float nr_bf16_to_f32(uint16_t h);
uint16_t nr_f32_to_bf16(float f);   /* round to nearest even */

bool nr_dtype_is_float(nr_dtype t);   /* float, double, float16, bfloat16 */
bool nr_dtype_is_int(nr_dtype t);     /* signed or unsigned integer (not bool) */
bool nr_dtype_is_signed(nr_dtype t);  /* signed integers and floats */

/* Element i of data of type t, converted. Bool reads as 0/1. */
double nr_load_f64(nr_dtype t, const void *data, int64_t i);
int64_t nr_load_i64(nr_dtype t, const void *data, int64_t i);
/* Stores v converted to t (integers: C conversion of the rounded-toward-zero value,
 * saturating only where ONNX says so is the caller's business; bool: v != 0). */
void nr_store_f64(nr_dtype t, void *data, int64_t i, double v);
void nr_store_i64(nr_dtype t, void *data, int64_t i, int64_t v);

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
