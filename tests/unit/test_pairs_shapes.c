/* test_pairs_shapes.c - models that leave input dimensions free take them from the
 * data they are given (nr_pairs_fix_shapes, nr_pairs_load_dir, src/tune/pairs.c).
 *
 * The models are built in memory with free dims ("x:0" [N,3] plus a constant, and a
 * two-input Add whose second input has no shape at all), the data is written as
 * input_K.pb, test_data_set_N/ or .npy files into a temporary folder, and each test
 * checks the shape the model ends with, the pairs read and, on the refusals, that the
 * message names the file and the input and that the model was left as it was. Before
 * the shapes came from the data, every load here stopped with "give it a shape". */
#include "io/tensor_io.h"
#include "loader_models.h"
#include "tune/pairs.h"
#include "unit.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- models and files --------------------------------------------------------------- */

static const float shp_w[3] = {0.5f, -1.0f, 2.0f};

static nr_model *shp_load(nr_test_state *t, lm_arena *a, Onnx__ModelProto *mp) {
  size_t len;
  uint8_t *bytes = lm_pack(a, mp, &len);
  nr_model *m = NULL;
  nr_error err = {0};
  nr_status st = nr_model_load_bytes(bytes, len, NULL, &m, &err);
  lm_free(a);
  CHECK(st == NR_OK, "loading the test model: %s", err.message);
  return m;
}

/* "x:0" float[N,3] + W[3] -> "y". */
static nr_model *model_free_batch(nr_test_state *t) {
  lm_arena a = {0};
  int64_t dims[2] = {-1, 3}, wd[1] = {3};
  Onnx__GraphProto *g = lm_graph(&a, "free_batch");
  lm_add_input(g, lm_value_info(&a, "x:0", NR_DTYPE_FLOAT, 2, dims));
  lm_add_init(g, lm_tensor(&a, "W", NR_DTYPE_FLOAT, 1, wd, shp_w, sizeof shp_w));
  lm_add_node(g, lm_node(&a, "Add", "add", "x:0", "W", "y"));
  lm_add_output(g, lm_value_info(&a, "y", NR_DTYPE_FLOAT, 2, dims));
  return shp_load(t, &a, lm_model(&a, 8, 13, g));
}

/* a float[N,3] + b (float, no shape: even the rank is free) -> "s". */
static nr_model *model_two_free(nr_test_state *t) {
  lm_arena a = {0};
  int64_t dims[2] = {-1, 3};
  Onnx__GraphProto *g = lm_graph(&a, "two_free");
  lm_add_input(g, lm_value_info(&a, "a", NR_DTYPE_FLOAT, 2, dims));
  Onnx__ValueInfoProto *b = lm_value_info(&a, "b", NR_DTYPE_FLOAT, 0, NULL);
  b->type->tensor_type->shape = NULL;
  lm_add_input(g, b);
  lm_add_node(g, lm_node(&a, "Add", "add", "a", "b", "s"));
  lm_add_output(g, lm_value_info(&a, "s", NR_DTYPE_FLOAT, 0, NULL));
  return shp_load(t, &a, lm_model(&a, 8, 13, g));
}

static int shp_rm_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void shp_rm_tree(const char *dir) {
  nftw(dir, shp_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes a float tensor of rows x cols, element k = base + k, as dir/file (.npy or
 * .pb by the name). */
static bool write_rows(const char *dir, const char *file, int64_t rows, int64_t cols,
                       float base) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  float *data = malloc(sizeof *data * (size_t)(rows * cols + 1));
  if (!data)
    return false;
  for (int64_t k = 0; k < rows * cols; k++)
    data[k] = base + (float)k;
  nr_value v = {NR_DTYPE_FLOAT, 2, {rows, cols}, data, false};
  size_t n = strlen(file);
  nr_error err = {0};
  bool npy = n > 4 && !strcmp(file + n - 4, ".npy");
  nr_status st = npy ? nr_npy_write(path, &v, &err) : nr_pb_write(path, &v, NULL, &err);
  if (st)
    fprintf(stderr, "writing %s: %s\n", path, err.message);
  free(data);
  return !st;
}

static void make_sub(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
  mkdir(out, 0700);
}

/* Input i of m is rank 2 with dims d0 x d1 (-1: still free). */
static bool input_is(nr_model *m, int i, int64_t d0, int64_t d1) {
  nr_io_info info;
  return !nr_model_input_info(m, i, &info) && info.rank == 2 && info.dims[0] == d0 &&
         info.dims[1] == d1;
}

/* The pair's output is x + W, worked out here. */
static bool output_is_x_plus_w(const nr_pair *p, int64_t rows) {
  const nr_buffer *y = &p->outputs[0];
  if (y->dtype != NR_DTYPE_FLOAT || y->rank != 2 || y->dims[0] != rows || y->dims[1] != 3)
    return false;
  const float *x = p->inputs[0].data, *v = y->data;
  for (int64_t k = 0; k < rows * 3; k++)
    if (v[k] != x[k] + shp_w[k % 3])
      return false;
  return true;
}

/* nr_pairs_load_dir(m, dir) must fail with status and a message holding both needles,
 * leaving set as it was. */
static void expect_refused(nr_test_state *t, nr_model *m, const char *dir,
                           nr_pair_set *set, nr_status status, const char *needle1,
                           const char *needle2, const char *what) {
  nr_error err = {0};
  int n = set->n;
  nr_status st = nr_pairs_load_dir(m, dir, set, &err);
  CHECK(st == status, "%s: %s (%s), want %s", what, nr_status_str(st), err.message,
        nr_status_str(status));
  CHECK(strstr(err.message, needle1), "%s: '%s' lacks '%s'", what, err.message, needle1);
  CHECK(strstr(err.message, needle2), "%s: '%s' lacks '%s'", what, err.message, needle2);
  CHECK(set->n == n, "%s changed the set", what);
}

/* ---- shapes from the data ----------------------------------------------------------- */

NR_TEST(pairs_shapes_from_input_pb) {
  char dir[] = "/tmp/nr_shapes_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_free_batch(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  if (!m || !write_rows(dir, "input_0.pb", 5, 3, 1))
    goto done;
  CHECK(input_is(m, 0, -1, 3));
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  CHECK(input_is(m, 0, 5, 3), "x:0 did not take 5x3 from input_0.pb");
  REQUIRE(set.n == 1);
  CHECK(output_is_x_plus_w(&set.pairs[0], 5));
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  shp_rm_tree(dir);
}

NR_TEST(pairs_shapes_from_npy) {
  char dir[] = "/tmp/nr_shapes_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_free_batch(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  if (!m || !write_rows(dir, "x_0.npy", 4, 3, -2)) /* "x:0" in its file-safe form */
    goto done;
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  CHECK(input_is(m, 0, 4, 3));
  REQUIRE(set.n == 1);
  CHECK(output_is_x_plus_w(&set.pairs[0], 4));
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  shp_rm_tree(dir);
}

/* test_data_set_N folders: the lowest N gives the shape, the others must have it. */
NR_TEST(pairs_shapes_from_first_set) {
  char dir[] = "/tmp/nr_shapes_XXXXXX", sub[700];
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_free_batch(t), *again = model_free_batch(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  char *first = NULL;
  bool ok = m && again;
  make_sub(sub, sizeof sub, dir, "test_data_set_10");
  ok = ok && write_rows(sub, "input_0.pb", 2, 3, 100);
  make_sub(sub, sizeof sub, dir, "test_data_set_2");
  ok = ok && write_rows(sub, "input_0.pb", 2, 3, 20);
  if (!ok)
    goto done;
  CHECK(!nr_pairs_first_folder(dir, &first, &err), "%s", err.message);
  CHECK(first && !strcmp(first, sub), "first folder '%s', want '%s'", first, sub);
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  CHECK(input_is(m, 0, 2, 3));
  CHECK(set.n == 2, "%d pairs", set.n);
  for (int k = 0; k < set.n; k++)
    CHECK(output_is_x_plus_w(&set.pairs[k], 2), "pair %d", k);
  /* A later set of another batch size is refused, naming its file. */
  make_sub(sub, sizeof sub, dir, "test_data_set_11");
  write_rows(sub, "input_0.pb", 3, 3, 0);
  nr_pair_set other = {0};
  expect_refused(t, again, dir, &other, NR_ERR_SHAPE, "test_data_set_11/input_0.pb",
                 "float32[2x3]", "a later set of another shape");
  nr_pair_set_free(&other);
done:
  free(first);
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  nr_model_destroy(again);
  shp_rm_tree(dir);
}

/* The folder itself when it has no test_data_set_N; a missing folder is an error. */
NR_TEST(pairs_shapes_first_folder_plain) {
  char dir[] = "/tmp/nr_shapes_XXXXXX", sub[700];
  REQUIRE(mkdtemp(dir));
  nr_error err = {0};
  char *first = NULL;
  make_sub(sub, sizeof sub, dir, "test_data_set_x"); /* not a number: not a set */
  CHECK(!nr_pairs_first_folder(dir, &first, &err), "%s", err.message);
  CHECK(first && !strcmp(first, dir), "first folder '%s'", first);
  free(first);
  CHECK(nr_pairs_first_folder("/nonexistent/nr_shapes", &first, &err) == NR_ERR_IO);
  CHECK(strstr(err.message, "/nonexistent/nr_shapes"), "'%s'", err.message);
  shp_rm_tree(dir);
}

/* input_K.pb in graph-input order; an input of unknown rank takes the file's. */
NR_TEST(pairs_shapes_two_inputs_in_order) {
  char dir[] = "/tmp/nr_shapes_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_two_free(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  if (!m || !write_rows(dir, "input_0.pb", 2, 3, 0) ||
      !write_rows(dir, "input_1.pb", 1, 3, 10))
    goto done;
  nr_io_info info;
  nr_model_input_info(m, 1, &info);
  CHECK(info.rank < 0, "b has rank %d before", info.rank);
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  CHECK(input_is(m, 0, 2, 3) && input_is(m, 1, 1, 3));
  REQUIRE(set.n == 1);
  const nr_buffer *s = &set.pairs[0].outputs[0];
  REQUIRE(s->rank == 2 && s->dims[0] == 2 && s->dims[1] == 3);
  for (int k = 0; k < 6; k++) /* a[k] = k, b[c] = 10 + c */
    CHECK(((const float *)s->data)[k] == (float)k + 10.0f + (float)(k % 3), "s[%d]", k);
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  shp_rm_tree(dir);
}

/* A file that contradicts a fixed dimension is refused, naming file and input, and
 * the model keeps its free dims: another folder can still give them. */
NR_TEST(pairs_shapes_contradiction_refused) {
  char dir[] = "/tmp/nr_shapes_XXXXXX", bad[700], good[700];
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_free_batch(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  make_sub(bad, sizeof bad, dir, "bad");
  make_sub(good, sizeof good, dir, "good");
  if (!m || !write_rows(bad, "input_0.pb", 2, 4, 0) ||
      !write_rows(good, "input_0.pb", 6, 3, 0))
    goto done;
  expect_refused(t, m, bad, &set, NR_ERR_SHAPE, "bad/input_0.pb", "'x:0'",
                 "3 columns fixed, 4 given");
  CHECK(input_is(m, 0, -1, 3), "the model changed");
  CHECK(nr_pairs_fix_shapes(m, bad, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "float32[?x3]") && strstr(err.message, "float32[2x4]"),
        "'%s'", err.message);
  CHECK(!nr_pairs_load_dir(m, good, &set, &err), "%s", err.message);
  CHECK(input_is(m, 0, 6, 3) && set.n == 1);
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  shp_rm_tree(dir);
}

/* A shape set first (the CLI's --shape) wins: data that contradicts it is refused. */
NR_TEST(pairs_shapes_explicit_shape_wins) {
  char dir[] = "/tmp/nr_shapes_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_free_batch(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  if (!m || !write_rows(dir, "input_0.pb", 4, 3, 0))
    goto done;
  REQUIRE(!nr_model_set_input_shape(m, "x:0", 2, (const int64_t[]){2, 3}, &err));
  expect_refused(t, m, dir, &set, NR_ERR_SHAPE, "input_0.pb", "float32[2x3]",
                 "--shape 2x3, file 4x3");
  CHECK(input_is(m, 0, 2, 3));
  write_rows(dir, "input_0.pb", 2, 3, 0);
  CHECK(!nr_pairs_load_dir(m, dir, &set, &err), "%s", err.message);
  CHECK(set.n == 1 && output_is_x_plus_w(&set.pairs[0], 2));
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  shp_rm_tree(dir);
}

/* All or nothing: when the second input is refused, the first keeps its free dim; a
 * missing or extra input file is refused before any shape is set. */
NR_TEST(pairs_shapes_all_or_nothing) {
  char dir[] = "/tmp/nr_shapes_XXXXXX", path[700];
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_two_free(t);
  nr_error err = {0};
  if (!m || !write_rows(dir, "input_0.pb", 2, 3, 0))
    goto done;
  CHECK(nr_pairs_fix_shapes(m, dir, &err) == NR_ERR_IO);
  CHECK(strstr(err.message, "input_1.pb") && strstr(err.message, "'b'"), "'%s'",
        err.message);
  CHECK(input_is(m, 0, -1, 3), "a was fixed although b has no file");
  write_rows(dir, "input_1.pb", 1, 3, 0);
  write_rows(dir, "input_2.pb", 1, 3, 0);
  CHECK(nr_pairs_fix_shapes(m, dir, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "input_2.pb") && strstr(err.message, "only 2 inputs"), "'%s'",
        err.message);
  CHECK(input_is(m, 0, -1, 3), "a was fixed from a folder made for another model");
  snprintf(path, sizeof path, "%s/input_2.pb", dir);
  unlink(path);
  CHECK(!nr_pairs_fix_shapes(m, dir, &err), "%s", err.message);
  CHECK(input_is(m, 0, 2, 3) && input_is(m, 1, 1, 3));
  /* Nothing free any more: nothing is read, even from a folder that is not there. */
  CHECK(!nr_pairs_fix_shapes(m, "/nonexistent/nr_shapes", &err), "%s", err.message);
done:
  nr_model_destroy(m);
  shp_rm_tree(dir);
}

/* build and bench take data only through --calibration DIR: the same path. */
NR_TEST(pairs_shapes_calibration_dir) {
  char dir[] = "/tmp/nr_shapes_XXXXXX";
  REQUIRE(mkdtemp(dir));
  nr_model *m = model_free_batch(t);
  nr_calibration *calib = NULL;
  nr_error err = {0};
  if (!m || !write_rows(dir, "x_0.npy", 3, 3, 0))
    goto done;
  CHECK(!nr_calibration_from_spec(m, dir, &calib, &err), "%s", err.message);
  CHECK(calib != NULL && input_is(m, 0, 3, 3));
done:
  nr_calibration_destroy(calib);
  nr_model_destroy(m);
  shp_rm_tree(dir);
}
