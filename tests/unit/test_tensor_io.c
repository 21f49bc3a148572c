/* test_tensor_io.c - .npy and .pb round trips for every dtype, hand-written NumPy
 * headers (versions 1-3, byte orders), malformed and truncated files, sequence files,
 * and the ordering rules of ONNX test folders. */
#include "io/tensor_io.h"
#include "onnx/onnx.pb-c.h"
#include "rng.h"
#include "unit.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(path);
}

static void rm_tree(const char *dir) {
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool put_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return false;
  bool ok = !n || fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static const nr_dtype all_dtypes[] = {
    NR_DTYPE_FLOAT,  NR_DTYPE_UINT8,  NR_DTYPE_INT8,   NR_DTYPE_UINT16, NR_DTYPE_INT16,
    NR_DTYPE_INT32,  NR_DTYPE_INT64,  NR_DTYPE_BOOL,   NR_DTYPE_FLOAT16, NR_DTYPE_DOUBLE,
    NR_DTYPE_UINT32, NR_DTYPE_UINT64, NR_DTYPE_BFLOAT16};

/* A value of dtype and shape filled with seeded random bytes (bools 0/1). */
static void make_value(nr_value *v, nr_dtype dtype, int rank, const int64_t *dims,
                       uint64_t seed) {
  memset(v, 0, sizeof *v);
  v->dtype = dtype;
  v->rank = rank;
  size_t n = nr_dtype_size(dtype);
  for (int i = 0; i < rank; i++)
    n *= (size_t)(v->dims[i] = dims[i]);
  v->data = malloc(n ? n : 1);
  v->owned = true;
  nr_rng r = nr_rng_make(seed);
  for (size_t i = 0; i < n; i++)
    ((uint8_t *)v->data)[i] = (uint8_t)nr_rng_u32(&r);
  if (dtype == NR_DTYPE_BOOL)
    for (size_t i = 0; i < n; i++)
      ((uint8_t *)v->data)[i] &= 1;
}

static bool same_value(const nr_value *a, const nr_value *b) {
  if (a->dtype != b->dtype || a->rank != b->rank)
    return false;
  size_t n = nr_dtype_size(a->dtype);
  for (int i = 0; i < a->rank; i++) {
    if (a->dims[i] != b->dims[i])
      return false;
    n *= (size_t)a->dims[i];
  }
  return !n || !memcmp(a->data, b->data, n);
}

static const int64_t shapes[4][3] = {{0}, {5}, {2, 3, 4}, {0, 3}};
static const int ranks[4] = {0, 1, 3, 2};

typedef nr_status (*write_fn)(const char *, const nr_value *, nr_error *);
typedef nr_status (*read_fn)(const char *, nr_value *, nr_error *);

static nr_status pb_write_named(const char *p, const nr_value *v, nr_error *e) {
  return nr_pb_write(p, v, "tensor_name", e);
}
static nr_status pb_read_checked(const char *p, nr_value *v, nr_error *e) {
  char *name = NULL;
  nr_status st = nr_pb_read(p, v, &name, e);
  if (!st && strcmp(name, "tensor_name"))
    st = NR_ERR_INTERNAL;
  free(name);
  return st;
}

static void roundtrip(nr_test_state *t, const char *ext, write_fn w, read_fn r) {
  char dir[] = "/tmp/nr_tio_XXXXXX", path[64];
  if (!mkdtemp(dir)) {
    CHECK(false, "mkdtemp");
    return;
  }
  snprintf(path, sizeof path, "%s/t.%s", dir, ext);
  for (size_t d = 0; d < sizeof all_dtypes / sizeof all_dtypes[0]; d++) {
    nr_dtype dt = all_dtypes[d];
    if (dt == NR_DTYPE_BFLOAT16 && !strcmp(ext, "npy"))
      continue;
    for (int s = 0; s < 4; s++) {
      nr_value v, back;
      nr_error err = {0};
      make_value(&v, dt, ranks[s], shapes[s], d * 10 + (uint64_t)s);
      nr_status st = w(path, &v, &err);
      CHECK(st == NR_OK, "%s write %s: %s", ext, nr_dtype_name(dt), err.message);
      st = st ? st : r(path, &back, &err);
      CHECK(st == NR_OK, "%s read %s: %s", ext, nr_dtype_name(dt), err.message);
      if (!st) {
        CHECK(same_value(&v, &back), "%s %s shape #%d differs", ext, nr_dtype_name(dt), s);
        nr_value_free(&back);
      }
      nr_value_free(&v);
    }
  }
  rm_tree(dir);
}

NR_TEST(tensor_io_npy_roundtrip) {
  roundtrip(t, "npy", nr_npy_write, nr_npy_read);
  nr_value v;
  nr_error err;
  make_value(&v, NR_DTYPE_BFLOAT16, 1, shapes[1], 1);
  CHECK(nr_npy_write("/tmp/nr_never.npy", &v, &err) == NR_ERR_UNSUPPORTED);
  nr_value_free(&v);
}

NR_TEST(tensor_io_pb_roundtrip) {
  roundtrip(t, "pb", pb_write_named, pb_read_checked);
}

/* ---- hand-written .npy files -------------------------------------------------------- */

/* Builds a .npy image: version major, header text, then data. */
static size_t npy_image(uint8_t *buf, int major, const char *hdr, const void *data,
                        size_t n) {
  size_t h = strlen(hdr), pre = major == 1 ? 10 : 12;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major, buf[7] = 0;
  buf[8] = (uint8_t)h, buf[9] = (uint8_t)(h >> 8);
  if (major > 1)
    buf[10] = (uint8_t)(h >> 16), buf[11] = (uint8_t)(h >> 24);
  memcpy(buf + pre, hdr, h);
  memcpy(buf + pre + h, data, n);
  return pre + h + n;
}

static nr_status parse_npy(int major, const char *hdr, const void *data, size_t n,
                           nr_value *v, nr_error *err) {
  uint8_t buf[1024];
  size_t len = npy_image(buf, major, hdr, data, n);
  return nr_npy_parse(buf, len, "test.npy", v, err);
}

NR_TEST(tensor_io_npy_headers) {
  const float f[6] = {1, 2, 3, 4, 5, 6};
  nr_value v;
  nr_error err;
  const char *h1 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n";
  REQUIRE(parse_npy(1, h1, f, sizeof f, &v, &err) == NR_OK, "%s", err.message);
  CHECK(v.dtype == NR_DTYPE_FLOAT && v.rank == 2 && v.dims[0] == 2 && v.dims[1] == 3);
  CHECK(((float *)v.data)[5] == 6);
  nr_value_free(&v);
  const char *h2 = "{\"shape\":(6,),\"descr\":\"<f4\",\"fortran_order\":False}";
  for (int major = 2; major <= 3; major++) {
    REQUIRE(parse_npy(major, h2, f, sizeof f, &v, &err) == NR_OK, "%s", err.message);
    CHECK(v.rank == 1 && v.dims[0] == 6);
    nr_value_free(&v);
  }
  const uint8_t be[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe};
  REQUIRE(parse_npy(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, 8,
                    &v, &err) == NR_OK, "%s", err.message);
  CHECK(((int32_t *)v.data)[0] == 258 && ((int32_t *)v.data)[1] == -2);
  nr_value_free(&v);
  const uint8_t b[3] = {1, 0, 1};
  REQUIRE(parse_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b, 3,
                    &v, &err) == NR_OK, "%s", err.message);
  CHECK(v.dtype == NR_DTYPE_BOOL && ((uint8_t *)v.data)[2] == 1);
  nr_value_free(&v);
  REQUIRE(parse_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", f, 8, &v,
                    &err) == NR_OK, "%s", err.message);
  CHECK(v.rank == 0 && v.dtype == NR_DTYPE_DOUBLE);
  nr_value_free(&v);
}

static void expect_bad_npy(nr_test_state *t, int major, const char *hdr, size_t n,
                           nr_status want, const char *needle) {
  static const uint8_t zeros[64];
  nr_value v;
  nr_error err = {0};
  nr_status st = parse_npy(major, hdr, zeros, n, &v, &err);
  CHECK(st == want, "header %s: status %s (%s)", hdr, nr_status_str(st), err.message);
  CHECK(strstr(err.message, needle), "header %s: message '%s' lacks '%s'", hdr, err.message,
        needle);
  if (!st)
    nr_value_free(&v);
}

NR_TEST(tensor_io_npy_rejects) {
  const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  expect_bad_npy(t, 4, ok, 8, NR_ERR_UNSUPPORTED, "version");
  expect_bad_npy(t, 1, ok, 4, NR_ERR_IO, "truncated");
  expect_bad_npy(t, 1, ok, 12, NR_ERR_IO, "8");
  expect_bad_npy(t, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8,
                 NR_ERR_UNSUPPORTED, "Fortran");
  expect_bad_npy(t, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16,
                 NR_ERR_UNSUPPORTED, "<c8");
  expect_bad_npy(t, 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16,
                 NR_ERR_UNSUPPORTED, "|O");
  expect_bad_npy(t, 1, "{'descr': '<f4', 'fortran_order': False}", 8, NR_ERR_IO, "missing");
  expect_bad_npy(t, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8,
                 NR_ERR_IO, "unknown key");
  expect_bad_npy(t, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8,
                 NR_ERR_IO, "non-integer");
  expect_bad_npy(t, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
                 4, NR_ERR_UNSUPPORTED, "rank");
  expect_bad_npy(t, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': "
                 "(99999999999, 99999999999, 99999999999), }", 8, NR_ERR_IO, "truncated");
  expect_bad_npy(t, 1, "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8, NR_ERR_IO,
                 "comma");
  expect_bad_npy(t, 1, "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", 8, NR_ERR_IO,
                 "malformed");
  nr_value v;
  nr_error err;
  CHECK(nr_npy_parse("\x93NUMPX\x01\x00\x00\x00", 10, "x", &v, &err) == NR_ERR_IO);
  CHECK(nr_npy_read("/nonexistent/nr.npy", &v, &err) == NR_ERR_IO);
}

/* Every prefix of a valid file fails cleanly. */
NR_TEST(tensor_io_npy_truncated) {
  const float f[6] = {1, 2, 3, 4, 5, 6};
  uint8_t buf[256];
  size_t len = npy_image(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                         f, sizeof f);
  for (size_t cut = 0; cut < len; cut++) {
    nr_value v;
    nr_error err = {0};
    nr_status st = nr_npy_parse(buf, cut, "cut.npy", &v, &err);
    CHECK(st != NR_OK && err.message[0], "cut %zu", cut);
    if (!st)
      nr_value_free(&v);
  }
}

/* ---- .pb ---------------------------------------------------------------------------- */

static size_t pack_tensor(const Onnx__TensorProto *tp, uint8_t *buf) {
  return onnx__tensor_proto__pack(tp, buf);
}

NR_TEST(tensor_io_pb_variants) {
  uint8_t buf[512];
  float f[3] = {1, 2, 3};
  int64_t dims[1] = {3};
  Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
  tp.has_data_type = 1, tp.data_type = 1;
  tp.n_dims = 1, tp.dims = dims;
  tp.n_float_data = 3, tp.float_data = f;
  size_t len = pack_tensor(&tp, buf);
  nr_value v;
  nr_error err = {0};
  char *name = NULL;
  REQUIRE(nr_pb_parse(buf, len, "f.pb", NULL, &v, &name, &err) == NR_OK, "%s", err.message);
  CHECK(((float *)v.data)[2] == 3 && name && !strcmp(name, ""));
  nr_value_free(&v);
  free(name);
  for (size_t cut = 0; cut < len; cut++) {
    nr_status st = nr_pb_parse(buf, cut, "cut.pb", NULL, &v, NULL, &err);
    CHECK(st != NR_OK && err.message[0], "cut %zu gave %s", cut, nr_status_str(st));
    if (!st)
      nr_value_free(&v);
  }
  tp.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
  len = pack_tensor(&tp, buf);
  CHECK(nr_pb_parse(buf, len, "s.pb", NULL, &v, NULL, &err) == NR_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "string"), "%s", err.message);

  tp.data_type = 1;
  Onnx__TensorProto *items[2] = {&tp, &tp};
  Onnx__SequenceProto seq = ONNX__SEQUENCE_PROTO__INIT;
  seq.name = "seq";
  seq.has_elem_type = 1, seq.elem_type = ONNX__SEQUENCE_PROTO__DATA_TYPE__TENSOR;
  seq.n_tensor_values = 2, seq.tensor_values = items;
  len = onnx__sequence_proto__pack(&seq, buf);
  CHECK(nr_pb_parse(buf, len, "seq.pb", NULL, &v, NULL, &err) == NR_ERR_UNSUPPORTED);
  CHECK(strstr(err.message, "SequenceProto"), "%s", err.message);
  const uint8_t junk[4] = {0xff, 0xff, 0xff, 0xff};
  CHECK(nr_pb_parse(junk, 4, "junk.pb", NULL, &v, NULL, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "junk.pb"), "%s", err.message);
}

/* ---- test folders ------------------------------------------------------------------- */

static void touch(const char *dir, const char *name) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  put_file(path, "", 0);
}

NR_TEST(tensor_io_testdata_order) {
  char root[] = "/tmp/nr_td_XXXXXX", sub[128], name[32];
  REQUIRE(mkdtemp(root));
  nr_testdata td;
  nr_error err = {0};
  CHECK(nr_testdata_open(root, &td, &err) == NR_ERR_IO && strstr(err.message, "model.onnx"));
  touch(root, "model.onnx");
  const int sets[3] = {10, 2, 0};
  for (int s = 0; s < 3; s++) {
    snprintf(sub, sizeof sub, "%s/test_data_set_%d", root, sets[s]);
    mkdir(sub, 0700);
    for (int k = 0; k < 12; k++) {
      snprintf(name, sizeof name, "input_%d.pb", k);
      touch(sub, name);
    }
    touch(sub, "output_0.pb");
    touch(sub, "notes.txt");
  }
  REQUIRE(nr_testdata_open(root, &td, &err) == NR_OK, "%s", err.message);
  CHECK(td.n_sets == 3 && td.sets[0].index == 0 && td.sets[1].index == 2 &&
        td.sets[2].index == 10);
  CHECK(td.sets[1].n_inputs == 12 && td.sets[1].n_outputs == 1);
  CHECK(strstr(td.sets[1].inputs[10], "test_data_set_2/input_10.pb"), "%s",
        td.sets[1].inputs[10]);
  CHECK(strstr(td.sets[1].inputs[2], "/input_2.pb"));
  nr_testdata_free(&td);
  snprintf(sub, sizeof sub, "%s/test_data_set_10/input_5.pb", root);
  remove(sub);
  CHECK(nr_testdata_open(root, &td, &err) == NR_ERR_IO && strstr(err.message, "input_5.pb"),
        "%s", err.message);
  rm_tree(root);
}

/* The conformance suite's own files, when NR_NODE_DIR points at it. */
NR_TEST(tensor_io_node_suite_files) {
  const char *node = getenv("NR_NODE_DIR");
  SKIP_UNLESS(node, "NR_NODE_DIR not set (the unpacked ONNX node suite)");
  const char *tests[] = {"test_abs", "test_sequence_insert_at_back"};
  char dir[512];
  for (int i = 0; i < 2; i++) {
    snprintf(dir, sizeof dir, "%s/%s", node, tests[i]);
    nr_testdata td;
    nr_error err = {0};
    if (nr_testdata_open(dir, &td, &err))
      continue;
    CHECK(td.n_sets >= 1 && td.sets[0].n_inputs >= 1);
    nr_value v;
    nr_status st = nr_pb_read(td.sets[0].inputs[0], &v, NULL, &err);
    CHECK(i == 0 ? st == NR_OK : st == NR_ERR_UNSUPPORTED, "%s: %s", dir, err.message);
    if (!st)
      nr_value_free(&v);
    nr_testdata_free(&td);
  }
}
