/* dtype.h - element-type helpers below the public nr_dtype_name / nr_dtype_size:
 * half-precision conversion, type classes, and dtype-generic element access.
 *
 * Generic code (the reference kernels, constant folding, test-data comparison) reads
 * and writes elements through nr_load_f64 / nr_store_f64 (float types, computed in
 * double) or nr_load_i64 / nr_store_i64 (integer types, exact), so one loop serves
 * every dtype. */
#ifndef NR_IR_DTYPE_H
#define NR_IR_DTYPE_H

#include "nnroute.h"

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

#endif
