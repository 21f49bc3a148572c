/* tensor_io.h - reading and writing tensors in files: NumPy .npy, serialized ONNX
 * TensorProto (.pb), and the layout of an ONNX backend test folder.
 *
 * Everything read here may be hostile or truncated: headers are parsed by hand with
 * every length checked against the file size before anything is allocated, and a
 * failure returns a status with a message naming the file (and, for .npy headers, the
 * offending key). A value filled by a reader owns its data (free with nr_value_free);
 * on failure the output value is left untouched. */
#ifndef NR_IO_TENSOR_IO_H
#define NR_IO_TENSOR_IO_H

#include "ir/ir.h"
#include "util/error.h"

#include <stddef.h>
#include <stdint.h>

/* Reads a whole file into *data (malloc'ed, caller frees), refusing files over
 * max_len bytes (NR_ERR_NOMEM). */
nr_status nr_io_read_file(const char *path, size_t max_len, uint8_t **data, size_t *len,
                          nr_error *err);

/* ---- .npy --------------------------------------------------------------------------- */

/* Reads a .npy file (format versions 1, 2 and 3). Accepts bool, int8..int64,
 * uint8..uint64, float16/32/64 in little-endian, '|' or '=' byte order; big-endian
 * data is byte-swapped. Fortran order, complex, strings, objects and structured
 * dtypes are refused (NR_ERR_UNSUPPORTED). Malformed or truncated files: NR_ERR_IO. */
nr_status nr_npy_read(const char *path, nr_value *out, nr_error *err);
/* The same from memory; what names the source in messages. */
nr_status nr_npy_parse(const void *data, size_t len, const char *what, nr_value *out,
                       nr_error *err);
/* Writes v (known shape, data present) as a version 1.0 .npy file. bfloat16 has no
 * NumPy type and is refused. */
nr_status nr_npy_write(const char *path, const nr_value *v, nr_error *err);

/* ---- .pb (TensorProto) -------------------------------------------------------------- */

/* Reads a serialized TensorProto. *name_out (when name_out is not NULL) receives the
 * tensor's name, malloc'ed ("" when unnamed); the caller frees it. Files holding a
 * SequenceProto or OptionalProto give NR_ERR_UNSUPPORTED. */
nr_status nr_pb_read(const char *path, nr_value *out, char **name_out, nr_error *err);
/* The same from memory; external data, if any, is looked up under base_dir. */
nr_status nr_pb_parse(const void *data, size_t len, const char *what, const char *base_dir,
                      nr_value *out, char **name_out, nr_error *err);
/* Writes v as a TensorProto with raw_data (little-endian); name may be NULL. */
nr_status nr_pb_write(const char *path, const nr_value *v, const char *name, nr_error *err);

/* ---- ONNX backend test folders ------------------------------------------------------ */

/* One test_data_set_N folder: input_K.pb and output_K.pb paths, in K order. */
typedef struct nr_testdata_set {
  char *dir;
  int index; /* N */
  int n_inputs, n_outputs;
  char **inputs;
  char **outputs;
} nr_testdata_set;

/* A test folder: <dir>/model.onnx and its data sets in numeric order of N. */
typedef struct nr_testdata {
  char *model_path;
  int n_sets;
  nr_testdata_set *sets;
} nr_testdata;

/* Lists test_dir. Fails (NR_ERR_IO) when model.onnx is missing, a folder cannot be
 * read, or the K numbers of a set have a gap. Release with nr_testdata_free(). */
nr_status nr_testdata_open(const char *test_dir, nr_testdata *out, nr_error *err);
void nr_testdata_free(nr_testdata *td);

/* Lists the input_K.pb and output_K.pb files of the one folder set->dir, which the
 * caller sets (malloc'ed; the set owns it from then on); nothing else in the folder
 * is looked at, and no model.onnx is needed. Fails (NR_ERR_IO) when the folder
 * cannot be read or the K numbers have a gap ("<dir>: input_1.pb is missing"). On
 * success or failure, release with nr_testdata_set_free(). */
nr_status nr_testdata_scan_set(nr_testdata_set *set, nr_error *err);
/* Frees the set's dir and paths and clears it; NULL is a no-op. */
void nr_testdata_set_free(nr_testdata_set *set);

#endif
