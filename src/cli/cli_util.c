/* cli_util.c - argument parsing, tensor-file reading and seeded random inputs shared
 * by the commands. */
#include "cli/cli.h"
#include "io/tensor_io.h"
#include "ir/dtype.h"
#include "tune/pairs.h"
#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool nr_cli_parse_dims(const char *text, int *rank, int64_t *dims) {
  *rank = 0;
  if (!*text || !strcmp(text, "scalar"))
    return true;
  const char *p = text;
  while (*p) {
    if (*rank == NR_MAX_RANK)
      return false;
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (end == p || errno || d < 0)
      return false;
    dims[(*rank)++] = d;
    if (*end == 'x' || *end == ',' || *end == 'X')
      end++;
    else if (*end)
      return false;
    p = end;
  }
  return true;
}

char *nr_cli_split_assign(const char *arg, const char **value) {
  const char *eq = strrchr(arg, '=');
  if (!eq || eq == arg)
    return NULL;
  *value = eq + 1;
  return strndup(arg, (size_t)(eq - arg));
}

void nr_cli_safe_name(const char *name, char *out, size_t cap) {
  size_t i = 0;
  for (; name[i] && i + 1 < cap; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out[i] = ok ? c : '_';
  }
  out[i] = '\0';
  if (!strcmp(out, ".") || !strcmp(out, ".."))
    out[0] = '_';
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

nr_status nr_cli_read_tensor(const char *path, nr_value *out, nr_error *err) {
  if (ends_with(path, ".npy"))
    return nr_npy_read(path, out, err);
  if (ends_with(path, ".pb"))
    return nr_pb_read(path, out, NULL, err);
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "'%s': tensor files must end in .npy or .pb", path);
}

nr_status nr_cli_read_key(const char *path, uint8_t **key, size_t *len, nr_error *err) {
  nr_status st = nr_io_read_file(path, 4096, key, len, err);
  if (st)
    return nr_error_prefix(err, "key file: ");
  if (!*len) {
    free(*key);
    *key = NULL;
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "key file '%s' is empty", path);
  }
  return NR_OK;
}

void nr_cli_free_key(uint8_t *key, size_t len) {
  if (key)
    memset(key, 0, len); /* the last use: the compiler may not drop it before free */
  free(key);
}

nr_status nr_cli_load_engine(const char *path, bool unsafe, const char *verify_key,
                             nr_engine **out, nr_error *err) {
  nr_engine_load_options o = {sizeof o, unsafe};
  uint8_t *key = NULL;
  size_t len = 0;
  nr_status st = verify_key ? nr_cli_read_key(verify_key, &key, &len, err) : NR_OK;
  o.verify_key = key;
  o.verify_key_len = len;
  if (!st)
    st = nr_engine_load(path, &o, out, err);
  nr_cli_free_key(key, len);
  return st;
}

int nr_cli_fail(const nr_error *err) {
  fprintf(stderr, "nnroute: %s: %s\n", nr_status_str(err->status), err->message);
  return 1;
}

uint64_t nr_cli_random_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Floats: uniform in [-1, 1). Integers: [0, 16), a range that is a valid index or
 * token id for most models. Bool: fair coin. */
void nr_cli_random_fill(nr_value *v, uint64_t *state) {
  int64_t n = nr_value_count(v);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = nr_cli_random_u64(state);
    if (nr_dtype_is_float(v->dtype))
      nr_store_f64(v->dtype, v->data, i, (double)(r >> 11) * 0x1p-52 - 1.0);
    else if (v->dtype == NR_DTYPE_BOOL)
      nr_store_i64(v->dtype, v->data, i, (int64_t)(r & 1));
    else
      nr_store_i64(v->dtype, v->data, i, (int64_t)(r % 16));
  }
}

nr_status nr_cli_read_dir_tensor(const char *dir, const char *name, nr_value *v,
                                 nr_error *err) {
  char safe[256], path[4096];
  nr_cli_safe_name(name, safe, sizeof safe);
  snprintf(path, sizeof path, "%s/%s.npy", dir, safe);
  return nr_npy_read(path, v, err);
}

int nr_cli_apply_shape(nr_model *m, const char *spec, nr_error *err) {
  const char *dims_text;
  char *name = nr_cli_split_assign(spec, &dims_text);
  int rank;
  int64_t dims[NR_MAX_RANK];
  if (!name || !nr_cli_parse_dims(dims_text, &rank, dims)) {
    fprintf(stderr, "nnroute: --shape '%s' is not NAME=DIMS (e.g. x=1x3x224x224)\n", spec);
    free(name);
    return 2;
  }
  nr_status st = nr_model_set_input_shape(m, name, rank, dims, err);
  free(name);
  return st ? nr_cli_fail(err) : 0;
}

nr_status nr_cli_calibration(nr_model *m, const char *spec, nr_calibration **out,
                             nr_error *err) {
  *out = NULL;
  return spec ? nr_calibration_from_spec(m, spec, out, err) : NR_OK;
}
