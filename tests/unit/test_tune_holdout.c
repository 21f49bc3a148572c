/* test_tune_holdout.c - holdout data stays out of choosing: pairs that share inputs
 * are found (nr_pair_inputs_equal, nr_pairs_check_disjoint, src/tune/pairs.c), and a
 * session refuses a holdout pair equal to any reference pair, a --calibration folder
 * that is (or lies in, or holds) a --holdout folder, and a --min-margin outside
 * [0, 1) before it builds anything (nr_tune_run, src/tune/tune.c).
 *
 * The model is x float[2,3] + W, built in memory; pairs are generated or written as
 * input_0.pb / output_0.pb files into a temporary folder. Before these checks a
 * session only refused a holdout set equal to the reference set as a whole, so each
 * refusal here went on to tune. */
#include "io/tensor_io.h"
#include "loader_models.h"
#include "tune/pairs.h"
#include "tune/tune.h"
#include "unit.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- model and files ---------------------------------------------------------------- */

static const float hold_w[3] = {0.25f, -1.0f, 3.0f};

/* x float[2,3] + W[3] -> y. */
static nr_model *hold_model(nr_test_state *t) {
  lm_arena a = {0};
  int64_t dims[2] = {2, 3}, wd[1] = {3};
  Onnx__GraphProto *g = lm_graph(&a, "add");
  lm_add_input(g, lm_value_info(&a, "x", NR_DTYPE_FLOAT, 2, dims));
  lm_add_init(g, lm_tensor(&a, "W", NR_DTYPE_FLOAT, 1, wd, hold_w, sizeof hold_w));
  lm_add_node(g, lm_node(&a, "Add", "add", "x", "W", "y"));
  lm_add_output(g, lm_value_info(&a, "y", NR_DTYPE_FLOAT, 2, dims));
  size_t len;
  uint8_t *bytes = lm_pack(&a, lm_model(&a, 8, 13, g), &len);
  nr_model *m = NULL;
  nr_error err = {0};
  nr_status st = nr_model_load_bytes(bytes, len, NULL, &m, &err);
  lm_free(&a);
  CHECK(st == NR_OK, "loading the test model: %s", err.message);
  return m;
}

static int hold_rm_entry(const char *path, const struct stat *sb, int flag,
                         struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void hold_rm_tree(const char *dir) {
  nftw(dir, hold_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* dir/sub (sub may be NULL: dir itself) created, its path in out. */
static const char *folder(char *out, size_t cap, const char *dir, const char *sub) {
  int n = snprintf(out, cap, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
  if (n < 0 || (size_t)n >= cap)
    out[0] = '\0'; /* too long: the writes into it then fail */
  else
    mkdir(out, 0700);
  return out;
}

/* A float[2,3] tensor, element k = base + k, as dir/file (.pb). */
static bool write_23(const char *dir, const char *file, float base) {
  char path[1024];
  float v[6];
  for (int k = 0; k < 6; k++)
    v[k] = base + (float)k;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  nr_value val = {NR_DTYPE_FLOAT, 2, {2, 3}, v, false};
  nr_error err = {0};
  nr_status st = nr_pb_write(path, &val, NULL, &err);
  if (st)
    fprintf(stderr, "writing %s: %s\n", path, err.message);
  return !st;
}

/* ---- equal inputs ------------------------------------------------------------------- */

NR_TEST(tune_holdout_inputs_equal) {
  nr_model *m = hold_model(t);
  REQUIRE(m);
  nr_pair_set a = {0}, c = {0};
  nr_error err = {0};
  if (nr_pairs_generate(m, 3, 7, NULL, 0, &a, &err) ||
      nr_pairs_generate(m, 1, 7, NULL, 0, &c, &err)) {
    CHECK(false, "%s", err.message);
    goto done;
  }
  CHECK(nr_pair_inputs_equal(&c, 0, &a, 0), "pair 0 of seed 7, drawn twice");
  CHECK(!nr_pair_inputs_equal(&c, 0, &a, 1) && !nr_pair_inputs_equal(&c, 0, &a, 2));
  float *y = c.pairs[0].outputs[0].data;
  y[0] += 1; /* outputs do not count */
  CHECK(nr_pair_inputs_equal(&c, 0, &a, 0));
  nr_buffer *x = &c.pairs[0].inputs[0];
  x->dims[0] = 3, x->dims[1] = 2; /* the same bytes in another shape */
  CHECK(!nr_pair_inputs_equal(&c, 0, &a, 0), "a 3x2 input equals a 2x3 one");
  x->dims[0] = 2, x->dims[1] = 3;
  ((unsigned char *)x->data)[5] ^= 1; /* one bit */
  CHECK(!nr_pair_inputs_equal(&c, 0, &a, 0), "inputs one bit apart are equal");
  CHECK(!nr_pair_inputs_equal(&c, 1, &a, 0) && !nr_pair_inputs_equal(&c, -1, &a, 0));
done:
  nr_pair_set_free(&a);
  nr_pair_set_free(&c);
  nr_model_destroy(m);
}

/* Disjoint generated sets pass; a holdout set that holds one reference pair's
 * inputs among others is refused, naming both pairs. */
NR_TEST(tune_holdout_disjoint_check) {
  nr_model *m = hold_model(t);
  REQUIRE(m);
  nr_pair_set ref = {0}, hold = {0};
  nr_error err = {0};
  if (nr_pairs_generate(m, 3, 7, NULL, 0, &ref, &err) ||
      nr_pairs_generate(m, 2, 9, NULL, 0, &hold, &err)) {
    CHECK(false, "%s", err.message);
    goto done;
  }
  CHECK(!nr_pairs_check_disjoint(&hold, "holdout pair", &ref, "reference pair", &err),
        "%s", err.message);
  nr_pair_set extra = {0};
  /* pair 2 of seed 7 is the third reference pair; generate pairs 0..2 and keep only
   * the last, appended after the two disjoint holdout pairs */
  REQUIRE(!nr_pairs_generate(m, 3, 7, NULL, 0, &extra, &err), "%s", err.message);
  REQUIRE(!nr_pairs_generate(m, 1, 9, NULL, 0, &hold, &err), "%s", err.message);
  nr_buffer *dst = &hold.pairs[2].inputs[0], *src = &extra.pairs[2].inputs[0];
  memcpy(dst->data, src->data, nr_buffer_count(src) * sizeof(float));
  free(hold.pairs[2].origin);
  hold.pairs[2].origin = strdup("hold/test_data_set_2");
  nr_pair_set_free(&extra);
  nr_error_clear(&err);
  nr_status st = nr_pairs_check_disjoint(&hold, "holdout pair", &ref, "reference pair",
                                         &err);
  CHECK(st == NR_ERR_INVALID_ARGUMENT, "%s", nr_status_str(st));
  CHECK(strstr(err.message, "holdout pair 'hold/test_data_set_2'") &&
            strstr(err.message, "reference pair 'generated seed 7 #2'"),
        "%s", err.message);
  /* Either side empty: nothing to share. */
  nr_pair_set none = {0};
  CHECK(!nr_pairs_check_disjoint(&none, "holdout pair", &ref, "reference pair", &err));
  CHECK(!nr_pairs_check_disjoint(&hold, "holdout pair", &none, "reference pair", &err));
done:
  nr_pair_set_free(&ref);
  nr_pair_set_free(&hold);
  nr_model_destroy(m);
}

/* The input sets behind a calibration spec: a folder's pairs, random:N's, none for a
 * table file. */
NR_TEST(tune_holdout_calibration_inputs) {
  char dir[] = "/tmp/nr_holdout_XXXXXX", sub[1100], file[1100];
  REQUIRE(mkdtemp(dir));
  nr_model *m = hold_model(t);
  nr_pair_set set = {0};
  nr_error err = {0};
  bool table = true;
  if (!m || !write_23(folder(sub, sizeof sub, dir, "cal"), "input_0.pb", 4))
    goto done;
  CHECK(!nr_calibration_inputs(m, sub, &set, &table, &err), "%s", err.message);
  CHECK(!table && set.n == 1 && ((float *)set.pairs[0].inputs[0].data)[5] == 9.0f);
  nr_pair_set_free(&set);
  CHECK(!nr_calibration_inputs(m, "random:3", &set, &table, &err), "%s", err.message);
  CHECK(!table && set.n == 3 && strstr(set.pairs[2].origin, "#2"));
  nr_pair_set_free(&set);
  snprintf(file, sizeof file, "%s/cal/input_0.pb", dir);
  CHECK(!nr_calibration_inputs(m, file, &set, &table, &err) && table && set.n == 0);
  CHECK(nr_calibration_inputs(m, "random:0", &set, &table, &err) ==
        NR_ERR_INVALID_ARGUMENT);
done:
  nr_pair_set_free(&set);
  nr_model_destroy(m);
  hold_rm_tree(dir);
}

/* ---- the session refuses ------------------------------------------------------------ */

/* nr_tune_run on a fresh model must stop with status before building anything (no
 * database is created) and say each needle. The budget keeps a session that
 * wrongly went on short. */
static void expect_session_refused(nr_test_state *t, nr_tune_options *o, const char *dir,
                                   const char *needle1, const char *needle2) {
  char db[1100];
  snprintf(db, sizeof db, "%s/tune.db", dir);
  o->model = hold_model(t);
  if (!o->model)
    return;
  o->db_path = db;
  o->routes = "";
  o->budget_builds = 1;
  o->threads = 1;
  o->screen_ms = 5;
  o->finalists = 1;
  o->confirm_rounds = 9;
  o->candidate_timeout_s = 30;
  if (!o->tol.eps)
    o->tol = (nr_tolerance){
        .metric = NR_METRIC_REL_L2, .eps = 1e-3, .min_margin = o->tol.min_margin};
  nr_error err = {0};
  bool interrupted = false;
  nr_status st = nr_tune_run(o, &interrupted, &err);
  CHECK(st == NR_ERR_INVALID_ARGUMENT, "%s: %s", nr_status_str(st), err.message);
  CHECK(strstr(err.message, needle1), "'%s' lacks '%s'", err.message, needle1);
  CHECK(strstr(err.message, needle2), "'%s' lacks '%s'", err.message, needle2);
  CHECK(access(db, F_OK) != 0, "the refused session made a database");
  nr_model_destroy(o->model);
}

/* Two reference pairs; the holdout folder holds the second one's inputs (with other
 * outputs). The sets differ as wholes, so only a per-pair check catches it. */
NR_TEST(tune_holdout_overlap_refused) {
  char dir[] = "/tmp/nr_holdout_XXXXXX", ref[1100], s0[1100], s1[1100], hold[1100];
  REQUIRE(mkdtemp(dir));
  folder(ref, sizeof ref, dir, "ref");
  bool ok = write_23(folder(s0, sizeof s0, ref, "test_data_set_0"), "input_0.pb", 0) &&
            write_23(folder(s1, sizeof s1, ref, "test_data_set_1"), "input_0.pb", 10) &&
            write_23(folder(hold, sizeof hold, dir, "hold"), "input_0.pb", 10) &&
            write_23(hold, "output_0.pb", 99);
  REQUIRE(ok);
  nr_tune_options o = {.n_reference_dirs = 1, .n_holdout_dirs = 1};
  o.reference_dirs[0] = ref;
  o.holdout_dirs[0] = hold;
  char want[1200];
  snprintf(want, sizeof want, "holdout pair '%s'", hold);
  expect_session_refused(t, &o, dir, want, "test_data_set_1'");
  hold_rm_tree(dir);
}

/* --calibration naming the holdout folder through a symlink, a folder inside it, and
 * a folder that holds it: refused by real path, whatever the space. */
NR_TEST(tune_holdout_calibration_folder_refused) {
  char dir[] = "/tmp/nr_holdout_XXXXXX", ref[1100], hold[1100], set0[1100], link[1100];
  REQUIRE(mkdtemp(dir));
  bool ok = write_23(folder(ref, sizeof ref, dir, "ref"), "input_0.pb", 0) &&
            write_23(folder(set0, sizeof set0, folder(hold, sizeof hold, dir, "hold"),
                            "test_data_set_0"),
                     "input_0.pb", 10);
  snprintf(link, sizeof link, "%s/elsewhere", dir);
  REQUIRE(ok && !symlink(hold, link));
  nr_tune_options o = {.n_reference_dirs = 1, .n_holdout_dirs = 1};
  o.reference_dirs[0] = ref;
  o.holdout_dirs[0] = hold;
  o.calibration = link;
  expect_session_refused(t, &o, dir, "--calibration", "' is the --holdout folder");
  o.calibration = set0;
  expect_session_refused(t, &o, dir, "' lies inside the --holdout folder",
                         "must never be holdout data");
  o.calibration = dir;
  expect_session_refused(t, &o, dir, "' holds the --holdout folder",
                         "must never be holdout data");
  hold_rm_tree(dir);
}

NR_TEST(tune_holdout_min_margin_refused) {
  char dir[] = "/tmp/nr_holdout_XXXXXX";
  REQUIRE(mkdtemp(dir));
  static const double bad[] = {1.0, 2.5, -0.1};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    nr_tune_options o = {.tol = {.min_margin = bad[i]}};
    expect_session_refused(t, &o, dir, "--min-margin", "0 <= F < 1");
  }
  hold_rm_tree(dir);
}
