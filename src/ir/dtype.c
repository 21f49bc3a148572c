/* dtype.c - names and sizes of element types. Names cover every ONNX type number,
 * also those nnroute cannot hold, so messages can say what was refused. A size of 0
 * marks a type nnroute cannot hold in memory (strings, complex, float8, 4-bit), which
 * the loader turns into an "unsupported dtype" error. */
#include "nnroute.h"

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
