/* test_tune_worker_seq.c - the candidate worker's sequence mode (src/tune/worker.c),
 * which the tuner's confirmation rounds use: several engine files timed one after
 * another in one child process.
 *
 * Engines are real files built from an in-memory model (Y = Relu(X + 0.5)) along
 * routes with the test-only fault knobs (src/passes/fault.c), so a slot that fails
 * fails for real: a NaN engine in the middle of a sequence, a file that is gone. The
 * checks count runs per slot and compare their order with the sequence (a slow
 * engine, test.delay_ms=20, must show up in exactly the slots that name it); nothing
 * asserts an absolute time. */
#include "unit.h"

#include "loader_models.h"
#include "tune/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static nr_model *relu_model(nr_test_state *t) {
  static const int64_t dims[] = {2, 8};
  float half[16];
  for (int i = 0; i < 16; i++)
    half[i] = 0.5f;
  lm_arena a = {0};
  Onnx__GraphProto *g = lm_graph(&a, "worker_seq_test");
  lm_add_input(g, lm_value_info(&a, "X", 1, 2, dims));
  lm_add_init(g, lm_tensor(&a, "C", 1, 2, dims, half, sizeof half));
  lm_add_node(g, lm_node(&a, "Add", "add", "X", "C", "A"));
  lm_add_node(g, lm_node(&a, "Relu", "relu", "A", NULL, "Y"));
  lm_add_output(g, lm_value_info(&a, "Y", 1, 2, dims));
  size_t len;
  uint8_t *bytes = lm_pack(&a, lm_model(&a, 8, 13, g), &len);
  nr_model *m = NULL;
  nr_error err = {0};
  nr_status st = nr_model_load_bytes(bytes, len, NULL, &m, &err);
  if (!st)
    st = nr_model_prepare(m, &err);
  lm_free(&a);
  CHECK(!st, "loading the test model: %s", err.message);
  if (st) {
    nr_model_destroy(m);
    return NULL;
  }
  return m;
}

/* Builds m along route into a fresh temporary file (path: 32 bytes). */
static bool engine_file(nr_test_state *t, nr_model *m, const char *route, char *path) {
  snprintf(path, 32, "/tmp/nr_wseq_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0)
    return false;
  close(fd);
  nr_build_options o = {sizeof o, route, 1};
  nr_engine *e = NULL;
  nr_error err = {0};
  nr_status st = nr_engine_build(m, &o, &e, &err);
  if (!st)
    st = nr_engine_save(e, path, &err);
  nr_engine_destroy(e);
  CHECK(!st, "route '%s': %s", route, err.message);
  return !st;
}

static nr_worker_job seq_job(const char *const *files, int n, int runs) {
  nr_worker_job j = {.threads = 1, .timeout_s = 60, .warmup_runs = 1, .min_runs = runs,
                     .max_runs = runs, .min_time_ms = 1e-9, .sequence = files,
                     .n_sequence = n};
  return j;
}

static nr_worker_result run_seq(nr_test_state *t, const nr_worker_job *j) {
  nr_worker_result r;
  nr_error err = {0};
  nr_status st = nr_worker_run(j, &r, &err);
  CHECK(st == NR_OK, "nr_worker_run: %s", err.message);
  if (st)
    memset(&r, 0, sizeof r);
  return r;
}

/* Median of slot k's runs (the runs are stored slot after slot). */
static double slot_median(const nr_worker_result *r, int k) {
  int at = 0;
  for (int i = 0; i < k; i++)
    at += r->seq_runs[i];
  double v[64];
  int n = r->seq_runs[k] < 64 ? r->seq_runs[k] : 64;
  for (int i = 0; i < n; i++)
    v[i] = r->times_ms[at + i];
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double x = v[j];
      v[j] = v[j - 1], v[j - 1] = x;
    }
  return n ? v[n / 2] : 0;
}

NR_TEST(tune_worker_sequence_times_every_slot_in_order) {
  setenv("NNROUTE_TEST_KNOBS", "1", 1);
  nr_model *m = relu_model(t);
  REQUIRE(m);
  char fast[32], slow[32];
  REQUIRE(engine_file(t, m, "-test.delay_ms=0", fast) &&
          engine_file(t, m, "-test.delay_ms=20", slow));
  /* D F D F D: the fast file three times (loaded once), the slow one twice */
  const char *files[] = {fast, slow, fast, slow, fast};
  nr_worker_job j = seq_job(files, 5, 3);
  nr_worker_result r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_OK, "%s: %s", nr_cand_status_name(r.status), r.message);
  REQUIRE(r.n_seq == 5 && r.seq_runs && r.n_times == 15, "%d slots, %d runs", r.n_seq,
          r.n_times);
  for (int k = 0; k < 5; k++)
    CHECK(r.seq_runs[k] == 3, "slot %d: %d runs", k, r.seq_runs[k]);
  for (int k = 0; k < 5; k++) {
    double med = slot_median(&r, k);
    if (k % 2)
      CHECK(med >= 18.0, "slot %d is the delayed engine: median %.3f ms", k, med);
    else
      CHECK(med < 10.0, "slot %d is the fast engine: median %.3f ms", k, med);
  }
  nr_worker_result_free(&r);
  CHECK(!r.seq_runs && r.n_seq == 0, "freed");
  /* the time budget per slot: min_time_ms keeps each slot going up to max_runs */
  j = seq_job(files, 2, 4);
  j.min_runs = 1;
  j.min_time_ms = 1e9;
  r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_OK && r.n_seq == 2 && r.n_times == 8, "%s: %d slots, %d runs",
        nr_cand_status_name(r.status), r.n_seq, r.n_times);
  nr_worker_result_free(&r);
  unlink(fast), unlink(slow);
  nr_model_destroy(m);
  unsetenv("NNROUTE_TEST_KNOBS");
}

NR_TEST(tune_worker_sequence_failures_name_the_cause) {
  setenv("NNROUTE_TEST_KNOBS", "1", 1);
  nr_model *m = relu_model(t);
  REQUIRE(m);
  char good[32], nan[32], gone[32];
  REQUIRE(engine_file(t, m, "-test.delay_ms=0", good) &&
          engine_file(t, m, "-test.fault=nan -test.delay_ms=0", nan) &&
          engine_file(t, m, "-test.delay_ms=0", gone));
  unlink(gone);
  /* a NaN engine in slot 1: slot 0's runs come back, the status is the NaN's */
  const char *files[] = {good, nan, good};
  nr_worker_job j = seq_job(files, 3, 2);
  nr_worker_result r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_NONFINITE, "%s: %s", nr_cand_status_name(r.status), r.message);
  CHECK(r.n_seq == 3 && r.seq_runs && r.seq_runs[0] == 2 && r.seq_runs[1] == 0 &&
            r.seq_runs[2] == 0 && r.n_times == 2,
        "%d slots, %d runs", r.n_seq, r.n_times);
  nr_worker_result_free(&r);
  /* a file that is gone: nothing is timed, the load error names it */
  const char *missing[] = {good, gone};
  j = seq_job(missing, 2, 2);
  r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_BUILD_ERROR && strstr(r.message, "loading") && r.n_times == 0,
        "%s: %s", nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  /* malformed sequences are the caller's error, not a candidate's */
  nr_worker_result res;
  nr_error err = {0};
  const char *holes[] = {good, NULL};
  j = seq_job(holes, 2, 2);
  CHECK(nr_worker_run(&j, &res, &err) == NR_ERR_INVALID_ARGUMENT);
  j = seq_job(files, NR_WORKER_MAX_SEQUENCE + 1, 2);
  CHECK(nr_worker_run(&j, &res, &err) == NR_ERR_INVALID_ARGUMENT);
  unlink(good), unlink(nan);
  nr_model_destroy(m);
  unsetenv("NNROUTE_TEST_KNOBS");
}

/* The timing inputs (worker.h, `timing`): an engine built with test.on_zeros=nan
 * returns a NaN exactly when its input is all zeros, which the worker reports as
 * nonfinite, so the status says which data the timed runs used. Without a timing set
 * a sequence runs on zeros; with one it runs on its pairs, starting at timing_first. */
NR_TEST(tune_worker_sequence_times_on_the_timing_pairs) {
  setenv("NNROUTE_TEST_KNOBS", "1", 1);
  nr_model *m = relu_model(t);
  REQUIRE(m);
  char zn[32];
  REQUIRE(engine_file(t, m, "-test.on_zeros=nan -test.delay_ms=0", zn));
  float real_x[16], zero_x[16] = {0};
  for (int i = 0; i < 16; i++)
    real_x[i] = 0.25f * (float)(i + 1);
  nr_buffer in[2] = {{.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {2, 8}, .data = real_x},
                     {.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {2, 8}, .data = zero_x}};
  nr_pair pairs[2] = {{.inputs = &in[0]}, {.inputs = &in[1]}};
  nr_pair_set set = {pairs, 2, 1, 1};
  const char *files[] = {zn, zn};
  nr_worker_job j = seq_job(files, 2, 1);
  nr_worker_result r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_NONFINITE, "no timing set: zeros, so NaN (%s: %s)",
        nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  j.timing = &set; /* warm-up on pair 0 (real), the run on pair 1 (zeros, unchecked) */
  r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_OK && r.n_times == 2, "timed on the pairs (%s: %s)",
        nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  j.timing_first = 1; /* rotated: the warm-up now runs pair 1, the zeros */
  r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_NONFINITE, "timing_first 1 starts on the zeros (%s)",
        nr_cand_status_name(r.status));
  nr_worker_result_free(&r);
  j.timing_first = 2; /* wraps to pair 0 */
  r = run_seq(t, &j);
  CHECK(r.status == NR_CAND_OK, "timing_first 2 wraps to pair 0 (%s: %s)",
        nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  unlink(zn);
  nr_model_destroy(m);
  unsetenv("NNROUTE_TEST_KNOBS");
}
