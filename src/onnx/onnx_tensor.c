/* onnx_tensor.c - TensorProto to nr_value: element types, shape checks, the typed
 * storage fields, raw little-endian data and external data files.
 *
 * Every size is checked before anything is allocated: dims must be non-negative, their
 * product must not overflow, and the byte size must fit the caller's budget, so a
 * hostile header cannot make the loader allocate more than it was allowed. External
 * data is confined to the model's folder: absolute paths, '..' components and
 * symlinks that resolve outside base_dir are refused. */
#include "onnx/onnx_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- element types ---------------------------------------------------------------- */

/* The ONNX type numbers known to this schema (0 to float6e3m2); NULL beyond. */
static const char *onnx_type_name(int32_t t) {
  return t >= 0 && t <= 28 ? nr_dtype_name((nr_dtype)t) : NULL;
}

nr_status nr_onnx_dtype(int32_t onnx_type, const char *what, nr_dtype *out, nr_error *err) {
  const char *name = onnx_type_name(onnx_type);
  if (!name)
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s has unknown element type %d", what,
                     (int)onnx_type);
  if (onnx_type == 0)
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s has no element type", what);
  if (nr_dtype_size((nr_dtype)onnx_type) == 0)
    return nr_errorf(err, NR_ERR_UNSUPPORTED,
                     "%s has element type %s, which nnroute does not support", what, name);
  *out = (nr_dtype)onnx_type;
  return NR_OK;
}

/* ---- shape ------------------------------------------------------------------------ */

/* Fills v's dtype and shape and *nbytes, refusing absurd sizes. */
static nr_status tensor_shape(const Onnx__TensorProto *t, const char *what, size_t limit,
                              nr_value *v, size_t *nbytes, nr_error *err) {
  nr_status st = nr_onnx_dtype(t->has_data_type ? t->data_type : 0, what, &v->dtype, err);
  if (st)
    return st;
  if (t->n_dims > NR_MAX_RANK)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s has rank %zu; nnroute supports up to %d",
                     what, t->n_dims, NR_MAX_RANK);
  size_t size = nr_dtype_size(v->dtype);
  uint64_t count = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    int64_t d = t->dims[i];
    if (d < 0)
      return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s has negative dim %lld at axis %zu",
                       what, (long long)d, i);
    if (d && count > UINT64_MAX / size / (uint64_t)d)
      return nr_errorf(err, NR_ERR_NOMEM, "%s has absurd dims (size overflows)", what);
    count *= (uint64_t)d;
    v->dims[i] = d;
  }
  v->rank = (int)t->n_dims;
  if (count * size > limit)
    return nr_errorf(err, NR_ERR_NOMEM,
                     "%s needs %llu bytes, over the tensor data limit (%zu bytes left)", what,
                     (unsigned long long)(count * size), limit);
  *nbytes = (size_t)(count * size);
  return NR_OK;
}

/* ---- typed storage fields --------------------------------------------------------- */

static bool host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

/* Raw data is little-endian on the wire; swap in place on a big-endian host. */
static void le_to_host(void *data, size_t nbytes, size_t size) {
  if (host_is_little_endian() || size == 1)
    return;
  uint8_t *p = data;
  for (size_t i = 0; i + size <= nbytes; i += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      uint8_t tmp = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = tmp;
    }
}

static nr_status count_mismatch(const char *what, size_t want, const char *field,
                                size_t got, nr_error *err) {
  return nr_errorf(err, NR_ERR_INVALID_MODEL,
                   "%s has %zu elements but %s holds %zu values", what, want, field, got);
}

/* The narrow types stored one per int32_data entry (bit patterns for float16/bf16). */
static void from_int32(nr_dtype dtype, const int32_t *src, size_t n, void *dst) {
  for (size_t i = 0; i < n; i++) {
    switch (nr_dtype_size(dtype)) {
    case 1:
      ((uint8_t *)dst)[i] = dtype == NR_DTYPE_BOOL ? (src[i] != 0) : (uint8_t)src[i];
      break;
    case 2:
      ((uint16_t *)dst)[i] = (uint16_t)src[i];
      break;
    default:
      ((int32_t *)dst)[i] = src[i];
      break;
    }
  }
}

static nr_status from_typed(const Onnx__TensorProto *t, const char *what, nr_value *v,
                            size_t n, nr_error *err) {
  switch (v->dtype) {
  case NR_DTYPE_FLOAT:
    if (t->n_float_data != n)
      return count_mismatch(what, n, "float_data", t->n_float_data, err);
    if (n)
      memcpy(v->data, t->float_data, n * sizeof(float));
    return NR_OK;
  case NR_DTYPE_DOUBLE:
    if (t->n_double_data != n)
      return count_mismatch(what, n, "double_data", t->n_double_data, err);
    if (n)
      memcpy(v->data, t->double_data, n * sizeof(double));
    return NR_OK;
  case NR_DTYPE_INT64:
    if (t->n_int64_data != n)
      return count_mismatch(what, n, "int64_data", t->n_int64_data, err);
    if (n)
      memcpy(v->data, t->int64_data, n * sizeof(int64_t));
    return NR_OK;
  case NR_DTYPE_UINT32:
  case NR_DTYPE_UINT64:
    if (t->n_uint64_data != n)
      return count_mismatch(what, n, "uint64_data", t->n_uint64_data, err);
    for (size_t i = 0; i < n; i++) {
      if (v->dtype == NR_DTYPE_UINT32)
        ((uint32_t *)v->data)[i] = (uint32_t)t->uint64_data[i];
      else
        ((uint64_t *)v->data)[i] = t->uint64_data[i];
    }
    return NR_OK;
  default:
    if (t->n_int32_data != n)
      return count_mismatch(what, n, "int32_data", t->n_int32_data, err);
    from_int32(v->dtype, t->int32_data, n, v->data);
    return NR_OK;
  }
}

/* ---- external data ---------------------------------------------------------------- */

typedef struct external_ref {
  const char *location;
  uint64_t offset, length;
  bool has_length;
} external_ref;

static bool parse_u64(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (!s || !*s)
    return false;
  for (; *s; s++) {
    if (!isdigit((unsigned char)*s) || v > (UINT64_MAX - 9) / 10)
      return false;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  return true;
}

static nr_status external_keys(const Onnx__TensorProto *t, const char *what,
                               external_ref *ref, nr_error *err) {
  memset(ref, 0, sizeof *ref);
  for (size_t i = 0; i < t->n_external_data; i++) {
    const char *k = t->external_data[i]->key ? t->external_data[i]->key : "";
    const char *val = t->external_data[i]->value;
    if (!strcmp(k, "location"))
      ref->location = val;
    else if (!strcmp(k, "offset") && !parse_u64(val, &ref->offset))
      return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s has bad external data offset '%s'",
                       what, val ? val : "");
    else if (!strcmp(k, "length")) {
      if (!parse_u64(val, &ref->length))
        return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s has bad external data length '%s'",
                         what, val ? val : "");
      ref->has_length = true;
    }
  }
  if (!ref->location || !*ref->location)
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s has external data without a location",
                     what);
  return NR_OK;
}

/* Refuses absolute paths and any '..' component, whatever the separator. */
static nr_status check_location(const char *loc, const char *what, nr_error *err) {
  if (loc[0] == '/' || loc[0] == '\\' || (isalpha((unsigned char)loc[0]) && loc[1] == ':'))
    return nr_errorf(err, NR_ERR_INVALID_MODEL,
                     "%s: external data location '%s' is an absolute path", what, loc);
  for (const char *p = loc; *p;) {
    size_t n = strcspn(p, "/\\");
    if (n == 2 && p[0] == '.' && p[1] == '.')
      return nr_errorf(err, NR_ERR_INVALID_MODEL,
                       "%s: external data location '%s' leaves the model's folder", what, loc);
    p += n;
    if (*p)
      p++;
  }
  return NR_OK;
}

/* Resolves base_dir/loc and checks that symlinks did not lead outside base_dir. */
static nr_status resolve_location(const char *base_dir, const char *loc, const char *what,
                                  char *out, nr_error *err) {
  char joined[PATH_MAX], base_real[PATH_MAX];
  if (snprintf(joined, sizeof joined, "%s/%s", base_dir, loc) >= (int)sizeof joined)
    return nr_errorf(err, NR_ERR_INVALID_MODEL, "%s: external data path too long", what);
  if (!realpath(base_dir, base_real))
    return nr_errorf(err, NR_ERR_IO, "%s: cannot resolve model folder '%s': %s", what,
                     base_dir, strerror(errno));
  if (!realpath(joined, out))
    return nr_errorf(err, NR_ERR_IO, "%s: cannot open external data file '%s': %s", what,
                     joined, strerror(errno));
  size_t n = strlen(base_real);
  bool inside = !strncmp(out, base_real, n) &&
                (out[n] == '/' || (n > 0 && base_real[n - 1] == '/'));
  if (!inside)
    return nr_errorf(err, NR_ERR_INVALID_MODEL,
                     "%s: external data file '%s' resolves outside the model's folder", what,
                     loc);
  return NR_OK;
}

/* Reads nbytes at offset of the regular file path into dst; with dst NULL only checks
 * that the file is one and holds the range (before the caller allocates for it). */
static nr_status read_range(const char *path, const char *loc, const char *what,
                            uint64_t offset, size_t nbytes, void *dst, nr_error *err) {
  struct stat pre;
  if (stat(path, &pre) == 0 && !S_ISREG(pre.st_mode)) /* fopen of a FIFO would block */
    return nr_errorf(err, NR_ERR_IO, "%s: external data '%s' is not a regular file", what,
                     loc);
  FILE *f = fopen(path, "rb");
  if (!f)
    return nr_errorf(err, NR_ERR_IO, "%s: cannot open external data file '%s': %s", what,
                     loc, strerror(errno));
  struct stat sb;
  nr_status st = NR_OK;
  if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode))
    st = nr_errorf(err, NR_ERR_IO, "%s: external data '%s' is not a regular file", what, loc);
  else if (offset > (uint64_t)sb.st_size || nbytes > (uint64_t)sb.st_size - offset)
    st = nr_errorf(err, NR_ERR_INVALID_MODEL,
                   "%s: external data range [%llu, +%zu) lies outside '%s' (%lld bytes)",
                   what, (unsigned long long)offset, nbytes, loc, (long long)sb.st_size);
  else if (dst && (fseeko(f, (off_t)offset, SEEK_SET) || fread(dst, 1, nbytes, f) != nbytes))
    st = nr_errorf(err, NR_ERR_IO, "%s: reading external data '%s' failed", what, loc);
  fclose(f);
  return st;
}

static nr_status from_external(const Onnx__TensorProto *t, const char *what,
                               const char *base_dir, void *dst, size_t nbytes,
                               nr_error *err) {
  external_ref ref;
  char path[PATH_MAX];
  nr_status st = external_keys(t, what, &ref, err);
  if (!st)
    st = check_location(ref.location, what, err);
  if (st)
    return st;
  if (!base_dir)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "%s has external data '%s' but no base folder was given", what,
                     ref.location);
  if (ref.has_length && ref.length != nbytes)
    return nr_errorf(err, NR_ERR_INVALID_MODEL,
                     "%s: external data length %llu does not match its %zu bytes", what,
                     (unsigned long long)ref.length, nbytes);
  st = resolve_location(base_dir, ref.location, what, path, err);
  if (!st)
    st = read_range(path, ref.location, what, ref.offset, nbytes, dst, err);
  return st;
}

/* ---- conversion ------------------------------------------------------------------- */

/* Elements the typed field that holds dtype carries, and that field's name. */
static size_t typed_count(const Onnx__TensorProto *t, nr_dtype dtype, const char **field) {
  switch (dtype) {
  case NR_DTYPE_FLOAT: *field = "float_data"; return t->n_float_data;
  case NR_DTYPE_DOUBLE: *field = "double_data"; return t->n_double_data;
  case NR_DTYPE_INT64: *field = "int64_data"; return t->n_int64_data;
  case NR_DTYPE_UINT32:
  case NR_DTYPE_UINT64: *field = "uint64_data"; return t->n_uint64_data;
  default: *field = "int32_data"; return t->n_int32_data;
  }
}

/* Refuses inline data (raw_data or a typed field) that cannot fill nbytes before
 * anything is allocated: a few bytes of dims must not cost gigabytes of zeros. */
static nr_status check_inline(const Onnx__TensorProto *t, const char *what, nr_dtype dtype,
                              size_t nbytes, nr_error *err) {
  if (t->segment)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s is a segment of a larger tensor", what);
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return NR_OK; /* checked against its file before the allocation */
  if (t->has_raw_data)
    return t->raw_data.len == nbytes
               ? NR_OK
               : nr_errorf(err, NR_ERR_INVALID_MODEL,
                           "%s needs %zu bytes of data but raw_data holds %zu", what, nbytes,
                           t->raw_data.len);
  const char *field;
  size_t n = nbytes / nr_dtype_size(dtype), have = typed_count(t, dtype, &field);
  return have == n ? NR_OK : count_mismatch(what, n, field, have, err);
}

static nr_status fill_data(const Onnx__TensorProto *t, const char *what,
                           const char *base_dir, nr_value *v, size_t nbytes, nr_error *err) {
  size_t size = nr_dtype_size(v->dtype);
  if (t->segment)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s is a segment of a larger tensor", what);
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    nr_status st = from_external(t, what, base_dir, v->data, nbytes, err);
    if (!st)
      le_to_host(v->data, nbytes, size);
    return st;
  }
  if (t->has_raw_data) {
    if (t->raw_data.len != nbytes)
      return nr_errorf(err, NR_ERR_INVALID_MODEL,
                       "%s needs %zu bytes of data but raw_data holds %zu", what, nbytes,
                       t->raw_data.len);
    if (nbytes)
      memcpy(v->data, t->raw_data.data, nbytes);
    le_to_host(v->data, nbytes, size);
    return NR_OK;
  }
  return from_typed(t, what, v, nbytes / size, err);
}

nr_status nr_onnx_tensor_convert(const Onnx__TensorProto *t, const char *what,
                                 const char *base_dir, size_t limit, nr_value *out,
                                 nr_error *err) {
  char label[320];
  if (!what) {
    snprintf(label, sizeof label, "tensor '%.256s'", t->name ? t->name : "");
    what = label;
  }
  nr_value v;
  memset(&v, 0, sizeof v);
  size_t nbytes = 0;
  nr_status st = tensor_shape(t, what, limit, &v, &nbytes, err);
  if (!st)
    st = check_inline(t, what, v.dtype, nbytes, err);
  if (!st && t->has_data_location &&
      t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL && !t->segment)
    st = from_external(t, what, base_dir, NULL, nbytes, err); /* the file holds it */
  if (st)
    return st;
  v.data = calloc(1, nbytes ? nbytes : 1);
  if (!v.data)
    return nr_errorf(err, NR_ERR_NOMEM, "%s: cannot allocate %zu bytes", what, nbytes);
  v.owned = true;
  st = fill_data(t, what, base_dir, &v, nbytes, err);
  if (st) {
    free(v.data);
    return st;
  }
  *out = v;
  return NR_OK;
}

nr_status nr_onnx_tensor_to_value(const Onnx__TensorProto *t, const char *base_dir,
                                  size_t max_bytes, nr_value *out, nr_error *err) {
  if (!t || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_onnx_tensor_to_value: NULL argument");
  return nr_onnx_tensor_convert(t, NULL, base_dir,
                                max_bytes ? max_bytes : NR_ONNX_DEFAULT_MAX_BYTES, out, err);
}

nr_status nr_onnx_ctx_tensor(nr_onnx_ctx *ctx, const Onnx__TensorProto *t,
                             const char *what, nr_value *out) {
  nr_status st = nr_onnx_tensor_convert(t, what, ctx->base_dir,
                                        ctx->max_bytes - ctx->used_bytes, out, ctx->err);
  if (!st) {
    size_t n = nr_dtype_size(out->dtype);
    for (int i = 0; i < out->rank; i++)
      n *= (size_t)out->dims[i];
    ctx->used_bytes += n;
  }
  return st;
}
