/* pb.c - tensors stored as serialized ONNX TensorProto (.pb), the format of the ONNX
 * backend tests' input_K.pb / output_K.pb files.
 *
 * Reading goes through the loader's hardened parser and tensor conversion, so a .pb
 * gets the same checks as an initializer. A few backend tests store a SequenceProto or
 * OptionalProto instead; when a file does not read as a tensor, it is tried as those
 * and, if it fits, reported as unsupported rather than as corrupt. Writing always uses
 * raw_data, the compact form every ONNX reader accepts. */
#include "io/tensor_io.h"
#include "util/file_out.h"
#include "onnx/onnx_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest .pb file read: tensors beyond this belong in .npy or external data. */
#define NR_PB_MAX_FILE ((size_t)4 << 30)

/* After a failed tensor read: does the file hold a sequence or an optional? */
static nr_status check_container(const void *data, size_t len, const char *what,
                                 nr_error *err) {
  ProtobufCMessage *msg = NULL;
  nr_status found = NR_OK;
  if (!nr_onnx_unpack(&onnx__sequence_proto__descriptor, data, len, "SequenceProto", &msg,
                      NULL)) {
    const Onnx__SequenceProto *s = (const Onnx__SequenceProto *)msg;
    size_t n = s->n_tensor_values + s->n_sparse_tensor_values + s->n_sequence_values +
               s->n_map_values + s->n_optional_values;
    if (n || (s->has_elem_type && s->elem_type >= 1 && s->elem_type <= 5))
      found = nr_errorf(err, NR_ERR_UNSUPPORTED,
                        "%s holds a SequenceProto or OptionalProto (%zu elements); "
                        "sequences and optionals are not supported", what, n);
    nr_onnx_free(msg);
  }
  if (found)
    return found;
  if (!nr_onnx_unpack(&onnx__optional_proto__descriptor, data, len, "OptionalProto", &msg,
                      NULL)) {
    const Onnx__OptionalProto *o = (const Onnx__OptionalProto *)msg;
    if (o->has_elem_type && o->elem_type >= 1 && o->elem_type <= 5)
      found = nr_errorf(err, NR_ERR_UNSUPPORTED,
                        "%s holds an OptionalProto; optionals are not supported", what);
    nr_onnx_free(msg);
  }
  return found;
}

static nr_status tensor_from_bytes(const void *data, size_t len, const char *what,
                                   const char *base_dir, nr_value *out, char **name_out,
                                   nr_error *err) {
  ProtobufCMessage *msg = NULL;
  nr_status st = nr_onnx_unpack(&onnx__tensor_proto__descriptor, data, len, "TensorProto",
                                &msg, err);
  if (st)
    return st;
  const Onnx__TensorProto *t = (const Onnx__TensorProto *)msg;
  char *name = NULL;
  if (name_out && !(name = strdup(t->name ? t->name : "")))
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  if (!st)
    st = nr_onnx_tensor_to_value(t, base_dir, 0, out, err);
  nr_onnx_free(msg);
  if (st) {
    free(name);
    return st;
  }
  if (name_out)
    *name_out = name;
  return NR_OK;
}

nr_status nr_pb_parse(const void *data, size_t len, const char *what, const char *base_dir,
                      nr_value *out, char **name_out, nr_error *err) {
  nr_status st = tensor_from_bytes(data, len, what, base_dir, out, name_out, err);
  if (st) {
    nr_status other = check_container(data, len, what, err);
    if (other)
      return other;
  }
  if (st)
    nr_error_prefix(err, "%s: ", what);
  return st;
}

/* The folder holding path, for external data references ("." when none). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return strdup(".");
  if (slash == path)
    return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

nr_status nr_pb_read(const char *path, nr_value *out, char **name_out, nr_error *err) {
  uint8_t *data = NULL;
  size_t len = 0;
  nr_status st = nr_io_read_file(path, NR_PB_MAX_FILE, &data, &len, err);
  if (st)
    return st;
  char *dir = dir_of(path);
  if (!dir)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  else
    st = nr_pb_parse(data, len, path, dir, out, name_out, err);
  free(dir);
  free(data);
  return st;
}

/* ---- writing ---------------------------------------------------------------------- */

static nr_status value_bytes(const nr_value *v, const char *path, size_t *nbytes,
                             nr_error *err) {
  if (v->rank < 0 || v->rank > NR_MAX_RANK)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: value has no known shape", path);
  size_t n = nr_dtype_size(v->dtype);
  if (!n)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: cannot write %s tensors", path,
                     nr_dtype_name(v->dtype));
  for (int i = 0; i < v->rank; i++) {
    if (v->dims[i] < 0)
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: value has an unknown dim", path);
    n *= (size_t)v->dims[i];
  }
  if (n && !v->data)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: value has no data", path);
  *nbytes = n;
  return NR_OK;
}

static nr_status write_all(const char *path, const uint8_t *buf, size_t len, nr_error *err) {
  return nr_file_write_whole(path, buf, len, ".pb file", err);
}

nr_status nr_pb_write(const char *path, const nr_value *v, const char *name, nr_error *err) {
  size_t nbytes = 0;
  nr_status st = value_bytes(v, path, &nbytes, err);
  if (st)
    return st;
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  int64_t dims[NR_MAX_RANK];
  memcpy(dims, v->dims, sizeof dims);
  t.n_dims = (size_t)v->rank;
  t.dims = dims;
  t.has_data_type = true;
  t.data_type = (int32_t)v->dtype;
  t.name = (char *)(name ? name : "");
  t.has_raw_data = true;
  t.raw_data.len = nbytes;
  t.raw_data.data = v->data;
  size_t len = onnx__tensor_proto__get_packed_size(&t);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf)
    return nr_errorf(err, NR_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, len);
  onnx__tensor_proto__pack(&t, buf);
  st = write_all(path, buf, len, err);
  free(buf);
  return st;
}
