/* dtype.c - names and sizes of element types. Names cover every ONNX type number,
 * also those nnroute cannot hold, so messages can say what was refused. A size of 0
 * marks a type nnroute cannot hold in memory (strings, complex, float8, 4-bit), which
 * the loader turns into an "unsupported dtype" error. Then the half-precision
 * conversions and the dtype-generic element access (ir/dtype.h). */
#include "ir/dtype.h"

#include <math.h>
#include <string.h>

const char *nr_dtype_name(nr_dtype t) {
  switch (t) {
  case NR_DTYPE_FLOAT: return "float32";
  case NR_DTYPE_UINT8: return "uint8";
  case NR_DTYPE_INT8: return "int8";
  case NR_DTYPE_UINT16: return "uint16";
  case NR_DTYPE_INT16: return "int16";
  case NR_DTYPE_INT32: return "int32";
  case NR_DTYPE_INT64: return "int64";
  case NR_DTYPE_STRING: return "string";
  case NR_DTYPE_BOOL: return "bool";
  case NR_DTYPE_FLOAT16: return "float16";
  case NR_DTYPE_DOUBLE: return "float64";
  case NR_DTYPE_UINT32: return "uint32";
  case NR_DTYPE_UINT64: return "uint64";
  case NR_DTYPE_COMPLEX64: return "complex64";
  case NR_DTYPE_COMPLEX128: return "complex128";
  case NR_DTYPE_BFLOAT16: return "bfloat16";
  case NR_DTYPE_UNDEFINED: return "undefined";
  }
  switch ((int)t) {
  case 17: return "float8e4m3fn";
  case 18: return "float8e4m3fnuz";
  case 19: return "float8e5m2";
  case 20: return "float8e5m2fnuz";
  case 21: return "uint4";
  case 22: return "int4";
  case 23: return "float4e2m1";
  case 24: return "float8e8m0";
  case 25: return "uint2";
  case 26: return "int2";
  case 27: return "float6e2m3";
  case 28: return "float6e3m2";
  default: return "unknown dtype";
  }
}

size_t nr_dtype_size(nr_dtype t) {
  switch (t) {
  case NR_DTYPE_BOOL: case NR_DTYPE_UINT8: case NR_DTYPE_INT8: return 1;
  case NR_DTYPE_UINT16: case NR_DTYPE_INT16: case NR_DTYPE_FLOAT16:
  case NR_DTYPE_BFLOAT16: return 2;
  case NR_DTYPE_FLOAT: case NR_DTYPE_INT32: case NR_DTYPE_UINT32: return 4;
  case NR_DTYPE_DOUBLE: case NR_DTYPE_INT64: case NR_DTYPE_UINT64: return 8;
  default: return 0;
  }
}

size_t nr_buffer_count(const nr_buffer *b) {
  size_t n = 1;
  for (int i = 0; i < b->rank; i++)
    n *= (size_t)b->dims[i];
  return n;
}

float nr_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: value = man * 2^-24 */
    float f = (float)man * 0x1p-24f;
    return sign ? -f : f;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t nr_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or nan */
    return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0);
  if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
    return sign | 0x7c00u;
  if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
    float a;
    memcpy(&a, &ax, 4);
    /* a * 2^24 rounded to nearest even gives the subnormal mantissa. */
    float m = nearbyintf(a * 0x1p24f);
    return sign | (uint16_t)m;
  }
  uint32_t man = ax & 0x7fffffu;
  uint32_t exp = (ax >> 23) - 112u;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    h++;
  return sign | (uint16_t)h;
}

float nr_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t nr_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u); /* keep NaN a NaN */
  uint32_t round = 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)((x + round) >> 16);
}

bool nr_dtype_is_float(nr_dtype t) {
  return t == NR_DTYPE_FLOAT || t == NR_DTYPE_DOUBLE || t == NR_DTYPE_FLOAT16 ||
         t == NR_DTYPE_BFLOAT16;
}

bool nr_dtype_is_int(nr_dtype t) {
  switch (t) {
  case NR_DTYPE_INT8: case NR_DTYPE_UINT8: case NR_DTYPE_INT16: case NR_DTYPE_UINT16:
  case NR_DTYPE_INT32: case NR_DTYPE_UINT32: case NR_DTYPE_INT64: case NR_DTYPE_UINT64:
    return true;
  default:
    return false;
  }
}

bool nr_dtype_is_signed(nr_dtype t) {
  return nr_dtype_is_float(t) || t == NR_DTYPE_INT8 || t == NR_DTYPE_INT16 ||
         t == NR_DTYPE_INT32 || t == NR_DTYPE_INT64;
}

double nr_load_f64(nr_dtype t, const void *d, int64_t i) {
  switch (t) {
  case NR_DTYPE_FLOAT: return ((const float *)d)[i];
  case NR_DTYPE_DOUBLE: return ((const double *)d)[i];
  case NR_DTYPE_FLOAT16: return nr_f16_to_f32(((const uint16_t *)d)[i]);
  case NR_DTYPE_BFLOAT16: return nr_bf16_to_f32(((const uint16_t *)d)[i]);
  case NR_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
  default: return (double)nr_load_i64(t, d, i);
  }
}

int64_t nr_load_i64(nr_dtype t, const void *d, int64_t i) {
  switch (t) {
  case NR_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
  case NR_DTYPE_UINT8: return ((const uint8_t *)d)[i];
  case NR_DTYPE_INT8: return ((const int8_t *)d)[i];
  case NR_DTYPE_UINT16: return ((const uint16_t *)d)[i];
  case NR_DTYPE_INT16: return ((const int16_t *)d)[i];
  case NR_DTYPE_UINT32: return ((const uint32_t *)d)[i];
  case NR_DTYPE_INT32: return ((const int32_t *)d)[i];
  case NR_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
  case NR_DTYPE_INT64: return ((const int64_t *)d)[i];
  default: {
    double v = nr_load_f64(t, d, i);
    if (isnan(v)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
  }
  }
}

void nr_store_f64(nr_dtype t, void *d, int64_t i, double v) {
  switch (t) {
  case NR_DTYPE_FLOAT: ((float *)d)[i] = (float)v; return;
  case NR_DTYPE_DOUBLE: ((double *)d)[i] = v; return;
  case NR_DTYPE_FLOAT16: ((uint16_t *)d)[i] = nr_f32_to_f16((float)v); return;
  case NR_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = nr_f32_to_bf16((float)v); return;
  case NR_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; return;
  case NR_DTYPE_UINT64:
    ((uint64_t *)d)[i] = (isnan(v) || v <= 0) ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)v;
    return;
  default: {
    int64_t x;
    if (isnan(v)) x = 0;
    else if (v >= 9.2233720368547758e18) x = INT64_MAX;
    else if (v <= -9.2233720368547758e18) x = INT64_MIN;
    else x = (int64_t)v;
    nr_store_i64(t, d, i, x);
  }
  }
}

void nr_store_i64(nr_dtype t, void *d, int64_t i, int64_t v) {
  switch (t) {
  case NR_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; return;
  case NR_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; return;
  case NR_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; return;
  case NR_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; return;
  case NR_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; return;
  case NR_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; return;
  case NR_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; return;
  case NR_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)v; return;
  case NR_DTYPE_INT64: ((int64_t *)d)[i] = v; return;
  default: nr_store_f64(t, d, i, (double)v); return;
  }
}
