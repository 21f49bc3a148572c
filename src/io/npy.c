/* npy.c - NumPy .npy files: the format users hand to `nnroute run` and the one it
 * writes results in.
 *
 * The header is a Python dict literal; rather than trusting its layout (numpy writes
 * keys in a fixed order, other writers do not), a small parser reads any order of the
 * three keys and checks each value. The declared shape is checked against the bytes
 * actually present before any allocation, so a header claiming terabytes costs
 * nothing. */
#include "io/tensor_io.h"
#include "util/file_out.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_header {
  char descr[32];
  bool fortran;
  int rank;
  int64_t dims[NR_MAX_RANK];
  unsigned seen; /* bit 0 descr, 1 fortran_order, 2 shape */
} npy_header;

typedef struct cursor {
  const char *p, *end;
  const char *what;
  nr_error *err;
} cursor;

static nr_status bad(cursor *c, const char *why) {
  return nr_errorf(c->err, NR_ERR_IO, "%s: malformed .npy header (%s)", c->what, why);
}

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

static nr_status parse_str(cursor *c, char *buf, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
    return bad(c, "expected a quoted string");
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (*c->p == '\\' || n + 1 >= cap)
      return bad(c, "string too long or escaped");
    buf[n++] = *c->p++;
  }
  if (c->p >= c->end)
    return bad(c, "unterminated string");
  c->p++;
  buf[n] = '\0';
  return NR_OK;
}

static nr_status parse_bool(cursor *c, bool *out) {
  skip_ws(c);
  size_t left = (size_t)(c->end - c->p);
  if (left >= 4 && !memcmp(c->p, "True", 4)) {
    c->p += 4;
    *out = true;
  } else if (left >= 5 && !memcmp(c->p, "False", 5)) {
    c->p += 5;
    *out = false;
  } else {
    return bad(c, "fortran_order is not True or False");
  }
  return NR_OK;
}

static nr_status parse_dim(cursor *c, int64_t *out) {
  int64_t v = 0;
  skip_ws(c);
  if (c->p >= c->end || *c->p < '0' || *c->p > '9')
    return bad(c, "shape holds a non-integer");
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    if (v > (INT64_MAX - 9) / 10)
      return bad(c, "shape dim too large");
    v = v * 10 + (*c->p++ - '0');
  }
  if (c->p < c->end && *c->p == 'L') /* Python 2 longs */
    c->p++;
  *out = v;
  return NR_OK;
}

static nr_status parse_shape(cursor *c, npy_header *h) {
  if (!eat(c, '('))
    return bad(c, "shape is not a tuple");
  h->rank = 0;
  while (!eat(c, ')')) {
    if (h->rank == NR_MAX_RANK)
      return nr_errorf(c->err, NR_ERR_UNSUPPORTED, "%s: rank over %d", c->what, NR_MAX_RANK);
    nr_status st = parse_dim(c, &h->dims[h->rank++]);
    if (st)
      return st;
    if (!eat(c, ',') && !(skip_ws(c), c->p < c->end && *c->p == ')'))
      return bad(c, "shape tuple is not comma separated");
  }
  return NR_OK;
}

static nr_status parse_entry(cursor *c, npy_header *h) {
  char key[32];
  nr_status st = parse_str(c, key, sizeof key);
  if (st)
    return st;
  if (!eat(c, ':'))
    return bad(c, "expected ':'");
  if (!strcmp(key, "descr")) {
    h->seen |= 1;
    return parse_str(c, h->descr, sizeof h->descr);
  }
  if (!strcmp(key, "fortran_order")) {
    h->seen |= 2;
    return parse_bool(c, &h->fortran);
  }
  if (!strcmp(key, "shape")) {
    h->seen |= 4;
    return parse_shape(c, h);
  }
  return bad(c, "unknown key");
}

static nr_status parse_dict(cursor *c, npy_header *h) {
  if (!eat(c, '{'))
    return bad(c, "expected '{'");
  while (!eat(c, '}')) {
    nr_status st = parse_entry(c, h);
    if (st)
      return st;
    if (!eat(c, ',') && !(skip_ws(c), c->p < c->end && *c->p == '}'))
      return bad(c, "entries are not comma separated");
  }
  if (h->seen != 7)
    return bad(c, "descr, fortran_order or shape missing");
  return NR_OK;
}

/* ---- dtypes ----------------------------------------------------------------------- */

static const struct {
  const char *code; /* descr without the byte-order character */
  nr_dtype dtype;
} npy_types[] = {
    {"b1", NR_DTYPE_BOOL},    {"?", NR_DTYPE_BOOL},     {"i1", NR_DTYPE_INT8},
    {"u1", NR_DTYPE_UINT8},   {"i2", NR_DTYPE_INT16},   {"u2", NR_DTYPE_UINT16},
    {"i4", NR_DTYPE_INT32},   {"u4", NR_DTYPE_UINT32},  {"i8", NR_DTYPE_INT64},
    {"u8", NR_DTYPE_UINT64},  {"f2", NR_DTYPE_FLOAT16}, {"f4", NR_DTYPE_FLOAT},
    {"f8", NR_DTYPE_DOUBLE},
};

/* Maps a descr ("<f4") to a dtype; *swap set for big-endian multi-byte data. */
static nr_status descr_dtype(const char *descr, const char *what, nr_dtype *out, bool *swap,
                             nr_error *err) {
  char order = descr[0];
  const char *code = descr;
  if (order == '<' || order == '>' || order == '|' || order == '=')
    code++;
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (!strcmp(code, npy_types[i].code)) {
      *out = npy_types[i].dtype;
      *swap = order == '>' && nr_dtype_size(*out) > 1;
      return NR_OK;
    }
  return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is not supported", what,
                   descr);
}

static const char *dtype_code(nr_dtype t) {
  for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
    if (npy_types[i].dtype == t && npy_types[i].code[0] != '?')
      return npy_types[i].code;
  return NULL;
}

static void byte_swap(uint8_t *p, size_t nbytes, size_t size) {
  for (size_t i = 0; i + size <= nbytes; i += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      uint8_t tmp = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = tmp;
    }
}

/* ---- reading ---------------------------------------------------------------------- */

/* Splits the preamble: returns the header text and the offset of the data. */
static nr_status split_preamble(const uint8_t *d, size_t len, const char *what,
                                size_t *hdr_off, size_t *hdr_len, nr_error *err) {
  if (len < 10 || memcmp(d, npy_magic, sizeof npy_magic))
    return nr_errorf(err, NR_ERR_IO, "%s: not a .npy file (bad magic or too short)", what);
  unsigned major = d[6];
  if (major < 1 || major > 3)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: .npy format version %u.%u not supported",
                     what, major, d[7]);
  if (major == 1) {
    *hdr_off = 10;
    *hdr_len = (size_t)d[8] | (size_t)d[9] << 8;
  } else {
    if (len < 12)
      return nr_errorf(err, NR_ERR_IO, "%s: truncated .npy header", what);
    *hdr_off = 12;
    *hdr_len = (size_t)d[8] | (size_t)d[9] << 8 | (size_t)d[10] << 16 | (size_t)d[11] << 24;
  }
  if (*hdr_len > len - *hdr_off)
    return nr_errorf(err, NR_ERR_IO, "%s: truncated .npy header (%zu bytes declared)", what,
                     *hdr_len);
  return NR_OK;
}

static nr_status header_to_value(const npy_header *h, const char *what, size_t avail,
                                 nr_value *v, bool *swap, size_t *nbytes, nr_error *err) {
  if (h->fortran)
    return nr_errorf(err, NR_ERR_UNSUPPORTED,
                     "%s: Fortran-order .npy arrays are not supported (save C-order)", what);
  nr_status st = descr_dtype(h->descr, what, &v->dtype, swap, err);
  if (st)
    return st;
  uint64_t n = nr_dtype_size(v->dtype);
  bool empty = false; /* a zero dim makes any other dim legal, however large */
  for (int i = 0; i < h->rank; i++)
    empty |= h->dims[i] == 0;
  for (int i = 0; i < h->rank; i++) {
    if (!empty && n > avail / (uint64_t)h->dims[i])
      return nr_errorf(err, NR_ERR_IO, "%s: .npy data truncated (shape needs more than the "
                       "%zu bytes present)", what, avail);
    n = empty ? 0 : n * (uint64_t)h->dims[i];
    v->dims[i] = h->dims[i];
  }
  v->rank = h->rank;
  if (n != avail)
    return nr_errorf(err, NR_ERR_IO, "%s: .npy data is %zu bytes, shape needs %llu", what,
                     avail, (unsigned long long)n);
  *nbytes = (size_t)n;
  return NR_OK;
}

nr_status nr_npy_parse(const void *data, size_t len, const char *what, nr_value *out,
                       nr_error *err) {
  const uint8_t *d = data;
  size_t hdr_off = 0, hdr_len = 0, nbytes = 0;
  nr_status st = split_preamble(d, len, what, &hdr_off, &hdr_len, err);
  if (st)
    return st;
  npy_header h;
  memset(&h, 0, sizeof h);
  cursor c = {(const char *)d + hdr_off, (const char *)d + hdr_off + hdr_len, what, err};
  if ((st = parse_dict(&c, &h)))
    return st;
  nr_value v;
  memset(&v, 0, sizeof v);
  bool swap = false;
  size_t data_off = hdr_off + hdr_len;
  if ((st = header_to_value(&h, what, len - data_off, &v, &swap, &nbytes, err)))
    return st;
  if (!(v.data = malloc(nbytes ? nbytes : 1)))
    return nr_errorf(err, NR_ERR_NOMEM, "%s: cannot allocate %zu bytes", what, nbytes);
  v.owned = true;
  if (nbytes)
    memcpy(v.data, d + data_off, nbytes);
  if (swap)
    byte_swap(v.data, nbytes, nr_dtype_size(v.dtype));
  *out = v;
  return NR_OK;
}

nr_status nr_npy_read(const char *path, nr_value *out, nr_error *err) {
  uint8_t *data = NULL;
  size_t len = 0;
  nr_status st = nr_io_read_file(path, SIZE_MAX, &data, &len, err);
  if (!st)
    st = nr_npy_parse(data, len, path, out, err);
  free(data);
  return st;
}

/* ---- writing ---------------------------------------------------------------------- */

static nr_status format_header(const nr_value *v, const char *code, char *buf, size_t cap,
                               size_t *len) {
  int n = snprintf(buf, cap, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                   nr_dtype_size(v->dtype) == 1 ? '|' : '<', code);
  for (int i = 0; i < v->rank; i++)
    n += snprintf(buf + n, cap - (size_t)n, "%lld,%s", (long long)v->dims[i],
                  i + 1 < v->rank ? " " : "");
  n += snprintf(buf + n, cap - (size_t)n, "), }");
  /* Pad so that magic + length + header is a multiple of 64, ending in '\n'. */
  size_t total = 10 + (size_t)n + 1;
  size_t padded = (total + 63) / 64 * 64;
  memset(buf + n, ' ', padded - total);
  buf[padded - 10 - 1] = '\n';
  *len = padded - 10;
  return NR_OK;
}

static nr_status check_writable(const nr_value *v, const char *path, const char **code,
                                nr_error *err) {
  if (v->rank < 0 || v->rank > NR_MAX_RANK)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: value has no known shape", path);
  for (int i = 0; i < v->rank; i++)
    if (v->dims[i] < 0)
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: value has an unknown dim", path);
  if (!(*code = dtype_code(v->dtype)))
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: %s has no .npy equivalent", path,
                     nr_dtype_name(v->dtype));
  return NR_OK;
}

nr_status nr_npy_write(const char *path, const nr_value *v, nr_error *err) {
  const char *code;
  nr_status st = check_writable(v, path, &code, err);
  if (st)
    return st;
  size_t nbytes = nr_dtype_size(v->dtype);
  for (int i = 0; i < v->rank; i++)
    nbytes *= (size_t)v->dims[i];
  if (nbytes && !v->data)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: value has no data", path);
  char hdr[512];
  size_t hdr_len;
  format_header(v, code, hdr, sizeof hdr, &hdr_len);
  uint8_t pre[10];
  memcpy(pre, npy_magic, 6);
  pre[6] = 1, pre[7] = 0, pre[8] = (uint8_t)(hdr_len & 0xff), pre[9] = (uint8_t)(hdr_len >> 8);
  nr_file_out out;
  st = nr_file_out_open(&out, path, ".npy file", err);
  if (st)
    return st;
  bool ok = fwrite(pre, 1, 10, out.f) == 10 && fwrite(hdr, 1, hdr_len, out.f) == hdr_len &&
            (!nbytes || fwrite(v->data, 1, nbytes, out.f) == nbytes);
  if (!ok) {
    nr_file_out_abort(&out);
    return nr_errorf(err, NR_ERR_IO, "writing '%s' failed", path);
  }
  return nr_file_out_commit(&out, err);
}
