/* test_tune_worker.c - the test-only fault knobs (src/passes/fault.c) and the isolated
 * candidate worker (src/tune/worker.c).
 *
 * The model is built in memory (loader_models.h): Y1 = Relu(X + 0.5) and
 * Y2 = Sigmoid(X + 0.5), two float outputs, so "every output" is really tested. The
 * reference pairs come from a local helper (seeded inputs, outputs from the reference
 * executor), which keeps these tests independent of pairs.c. Every candidate status
 * is produced by a real engine through the fault knobs: the worker is never told what
 * to report. Nothing here asserts a time; runs are counted. */
#include "rng.h"
#include "unit.h"

#include "api/nnroute_tools.h"
#include "engine/engine.h"
#include "loader_models.h"
#include "tune/worker.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROWS 2
#define COLS 8

/* ---- the model and its pairs -------------------------------------------------------- */

/* passthrough: X is also a graph output (an output that lives in the caller's buffer). */
static nr_model *make_model(nr_test_state *t, bool passthrough) {
  static const int64_t dims[] = {ROWS, COLS};
  float half[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; i++)
    half[i] = 0.5f;
  lm_arena a = {0};
  Onnx__GraphProto *g = lm_graph(&a, "worker_test");
  lm_add_input(g, lm_value_info(&a, "X", 1, 2, dims));
  lm_add_init(g, lm_tensor(&a, "C", 1, 2, dims, half, sizeof half));
  lm_add_node(g, lm_node(&a, "Add", "add", "X", "C", "A"));
  lm_add_node(g, lm_node(&a, "Relu", "relu", "A", NULL, "Y1"));
  lm_add_node(g, lm_node(&a, "Sigmoid", "sigmoid", "A", NULL, "Y2"));
  lm_add_output(g, lm_value_info(&a, "Y1", 1, 2, dims));
  lm_add_output(g, lm_value_info(&a, "Y2", 1, 2, dims));
  if (passthrough)
    lm_add_output(g, lm_value_info(&a, "X", 1, 2, dims));
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

static void fill_input(nr_buffer *b, uint64_t seed) {
  b->dtype = NR_DTYPE_FLOAT;
  b->rank = 2;
  b->dims[0] = ROWS;
  b->dims[1] = COLS;
  float *x = malloc(sizeof(float) * ROWS * COLS);
  nr_rng r = nr_rng_make(seed);
  for (int i = 0; i < ROWS * COLS; i++)
    x[i] = nr_rng_pm1(&r);
  b->data = x;
}

static void free_pairs(nr_pair_set *s) {
  for (int p = 0; p < s->n; p++) {
    for (int i = 0; i < s->n_inputs; i++)
      nr_buffer_free(&s->pairs[p].inputs[i]);
    for (int o = 0; o < s->n_outputs; o++)
      nr_buffer_free(&s->pairs[p].outputs[o]);
    free(s->pairs[p].inputs);
    free(s->pairs[p].outputs);
    free(s->pairs[p].origin);
  }
  free(s->pairs);
  memset(s, 0, sizeof *s);
}

/* n seeded pairs, outputs from the reference executor. */
static bool make_pairs(nr_test_state *t, nr_model *m, int n, nr_pair_set *s) {
  memset(s, 0, sizeof *s);
  s->n_inputs = nr_model_input_count(m);
  s->n_outputs = nr_model_output_count(m);
  s->pairs = calloc((size_t)n, sizeof *s->pairs);
  for (int p = 0; p < n; p++, s->n++) {
    nr_pair *pr = &s->pairs[p];
    pr->inputs = calloc(1, sizeof *pr->inputs);
    pr->outputs = calloc((size_t)s->n_outputs, sizeof *pr->outputs);
    pr->origin = strdup("test");
    fill_input(&pr->inputs[0], 1234 + (uint64_t)p);
    nr_error err = {0};
    if (nr_model_run(m, pr->inputs, pr->outputs, &err)) {
      CHECK(false, "reference run: %s", err.message);
      s->n++;
      free_pairs(s);
      return false;
    }
  }
  return true;
}

/* The model, two pairs, and a rel_l2 tolerance of 1e-3 on every output. */
typedef struct fixture {
  nr_model *model;
  nr_pair_set pairs;
  nr_tolerance tol;
  const char *names[4];
} fixture;

static bool setup(nr_test_state *t, fixture *f) {
  memset(f, 0, sizeof *f);
  if (!(f->model = make_model(t, false)))
    return false;
  if (!make_pairs(t, f->model, 2, &f->pairs)) {
    nr_model_destroy(f->model);
    return false;
  }
  f->tol.metric = NR_METRIC_REL_L2;
  f->tol.eps = 1e-3;
  for (int o = 0; o < f->pairs.n_outputs; o++) {
    nr_io_info info;
    nr_model_output_info(f->model, o, &info);
    f->names[o] = info.name;
  }
  return true;
}

static void teardown(fixture *f) {
  free_pairs(&f->pairs);
  nr_model_destroy(f->model);
}

/* A job on the fixture: one thread, few runs, a generous deadline. */
static nr_worker_job job_for(fixture *f, const char *route) {
  nr_worker_job j = {
      .model = f->model, .route = route, .threads = 1, .pairs = &f->pairs,
      .tol = &f->tol, .output_names = f->names, .timeout_s = 60, .measure = true,
      .warmup_runs = 1, .min_runs = 3, .max_runs = 3, .min_time_ms = 1e-9,
  };
  return j;
}

static nr_worker_result run_job(nr_test_state *t, const nr_worker_job *j) {
  nr_worker_result r;
  nr_error err = {0};
  nr_status st = nr_worker_run(j, &r, &err);
  CHECK(st == NR_OK, "nr_worker_run: %s", err.message);
  if (st)
    memset(&r, 0, sizeof r);
  return r;
}

static double loss(const nr_worker_result *r, int pair, int out, nr_metric m) {
  return r->losses[((size_t)pair * (size_t)r->n_outputs + (size_t)out) * NR_METRIC_COUNT +
                   m];
}

static void test_knobs_on(void) { setenv("NNROUTE_TEST_KNOBS", "1", 1); }
static void test_knobs_off(void) { unsetenv("NNROUTE_TEST_KNOBS"); }

/* ---- the fault knobs, in process ---------------------------------------------------- */

static nr_engine *build(nr_test_state *t, nr_model *m, const char *route) {
  nr_build_options o = {sizeof o, route, 1};
  nr_engine *e = NULL;
  nr_error err = {0};
  CHECK(nr_engine_build(m, &o, &e, &err) == NR_OK, "route '%s': %s", route, err.message);
  return e;
}

/* Runs e on in; outs gets nr_engine_output_count buffers (caller frees). */
static nr_status run_engine(const nr_engine *e, const nr_buffer *in, nr_buffer *outs,
                            nr_error *err) {
  nr_context *c = NULL;
  nr_status st = nr_context_create(e, 1, &c, err);
  if (!st)
    st = nr_context_run(c, in, outs, err);
  nr_context_destroy(c);
  return st;
}

static int fault_steps(const nr_engine *e) {
  int n = 0;
  for (int k = 0; k < e->plan->n_steps; k++)
    if (!strcmp(e->plan->steps[k].tactic->id, "nr_test_fault")) {
      n++;
      if (e->plan->steps[k].node != -1)
        return -1;
    }
  return n;
}

NR_TEST(fault_knobs_are_hidden_without_the_environment) {
  test_knobs_off();
  const nr_knob_def *d = nr_knob_find("test.fault");
  REQUIRE(d && (d->flags & NR_KNOB_TEST), "test.fault is a test knob");
  const nr_knob_def *p = nr_knob_find("test.perturb");
  REQUIRE(p && (p->flags & NR_KNOB_ACCURACY) && p->error_bound == 1);
  const nr_knob_def *dl = nr_knob_find("test.delay_ms");
  REQUIRE(dl && !strcmp(dl->dflt, "5"));
  nr_knob_space s;
  nr_error err = {0};
  REQUIRE(nr_knob_space_build(NULL, &s, &err) == NR_OK, "%s", err.message);
  CHECK(nr_knob_space_find(&s, "test.fault") < 0 && nr_knob_space_find(&s, "test.delay_ms") < 0);
  nr_knob_space_free(&s);
  nr_model *m = make_model(t, false);
  REQUIRE(m);
  nr_engine *e = build(t, m, "");
  if (e)
    CHECK(fault_steps(e) == 0, "no fault steps without NNROUTE_TEST_KNOBS");
  nr_engine_destroy(e);
  nr_build_options o = {sizeof o, "-test.fault=nan", 1};
  e = NULL;
  CHECK(nr_engine_build(m, &o, &e, &err) != NR_OK && strstr(err.message, "NNROUTE_TEST_KNOBS"),
        "%s", err.message);
  nr_engine_destroy(e);
  nr_model_destroy(m);
}

NR_TEST(fault_default_route_is_slow_and_delay_zero_is_clean) {
  test_knobs_on();
  nr_model *m = make_model(t, false);
  REQUIRE(m);
  nr_engine *slow = build(t, m, ""), *fast = build(t, m, "-test.delay_ms=0");
  if (slow && fast) {
    CHECK(fault_steps(slow) == 2, "one fault step per output: %d", fault_steps(slow));
    CHECK(fault_steps(fast) == 0, "%d", fault_steps(fast));
  }
  nr_engine_destroy(slow);
  nr_engine_destroy(fast);
  nr_model_destroy(m);
  test_knobs_off();
}

NR_TEST(fault_build_error_fails_the_build) {
  test_knobs_on();
  nr_model *m = make_model(t, false);
  REQUIRE(m);
  nr_build_options o = {sizeof o, "-test.fault=build_error", 1};
  nr_engine *e = NULL;
  nr_error err = {0};
  CHECK(nr_engine_build(m, &o, &e, &err) == NR_ERR_RUNTIME && !e);
  CHECK(strstr(err.message, "injected"), "%s", err.message);
  nr_model_destroy(m);
  test_knobs_off();
}

/* Perturbation multiplies exactly by 1 + p: the relative L2 error is p. */
NR_TEST(fault_perturb_scales_every_float_output) {
  test_knobs_on();
  nr_model *m = make_model(t, false);
  REQUIRE(m);
  nr_engine *base = build(t, m, "-test.delay_ms=0");
  nr_engine *pert = build(t, m, "-test.delay_ms=0 -test.perturb=1e-2");
  nr_buffer in = {0}, want[2] = {{0}}, got[2] = {{0}};
  fill_input(&in, 7);
  nr_error err = {0};
  if (base && pert) {
    REQUIRE(run_engine(base, &in, want, &err) == NR_OK, "%s", err.message);
    REQUIRE(run_engine(pert, &in, got, &err) == NR_OK, "%s", err.message);
    for (int o = 0; o < 2; o++) {
      const float *w = want[o].data, *g = got[o].data;
      double num = 0, den = 0;
      for (int i = 0; i < ROWS * COLS; i++) {
        CHECK(g[i] == (float)((double)w[i] * 1.01), "output %d element %d: %g vs %g", o, i,
              g[i], w[i]);
        num += ((double)g[i] - w[i]) * ((double)g[i] - w[i]);
        den += (double)w[i] * w[i];
      }
      CHECK(fabs(sqrt(num / den) - 1e-2) < 1e-5, "rel_l2 %g", sqrt(num / den));
    }
  }
  for (int o = 0; o < 2; o++) {
    nr_buffer_free(&want[o]);
    nr_buffer_free(&got[o]);
  }
  nr_buffer_free(&in);
  nr_engine_destroy(base);
  nr_engine_destroy(pert);
  nr_model_destroy(m);
  test_knobs_off();
}

/* The fault lives in the step's params: save, load, run still injects it. */
NR_TEST(fault_survives_engine_save_and_load) {
  test_knobs_on();
  nr_model *m = make_model(t, false);
  REQUIRE(m);
  nr_engine *e = build(t, m, "-test.fault=inf -test.delay_ms=0");
  char path[] = "/tmp/nr_fault_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0 && e);
  close(fd);
  nr_error err = {0};
  nr_engine *l = NULL;
  CHECK(nr_engine_save(e, path, &err) == NR_OK, "%s", err.message);
  CHECK(nr_engine_load(path, NULL, &l, &err) == NR_OK, "%s", err.message);
  nr_buffer in = {0}, out[2] = {{0}};
  fill_input(&in, 3);
  if (l) {
    CHECK(fault_steps(l) == 2);
    CHECK(run_engine(l, &in, out, &err) == NR_OK, "%s", err.message);
    for (int o = 0; o < 2 && out[o].data; o++) {
      const float *y = out[o].data;
      CHECK(isinf(y[0]) && y[0] > 0 && isfinite(y[1]), "output %d: %g %g", o, y[0], y[1]);
    }
  }
  for (int o = 0; o < 2; o++)
    nr_buffer_free(&out[o]);
  nr_buffer_free(&in);
  nr_engine_destroy(l);
  nr_engine_destroy(e);
  unlink(path);
  nr_model_destroy(m);
  test_knobs_off();
}

/* An output that is a graph input gets a private copy: the caller's input buffer is
 * never written, and the output still carries the fault. */
NR_TEST(fault_passthrough_output_is_copied_not_written) {
  test_knobs_on();
  nr_model *m = make_model(t, true);
  REQUIRE(m);
  nr_engine *e = build(t, m, "-test.fault=nan -test.delay_ms=0");
  nr_buffer in = {0}, out[3] = {{0}};
  fill_input(&in, 5);
  float x0 = ((float *)in.data)[0];
  nr_error err = {0};
  if (e) {
    CHECK(fault_steps(e) == 3);
    CHECK(run_engine(e, &in, out, &err) == NR_OK, "%s", err.message);
    CHECK(((float *)in.data)[0] == x0, "the input was written");
    for (int o = 0; o < 3 && out[o].data; o++)
      CHECK(isnan(((float *)out[o].data)[0]), "output %d", o);
    if (out[2].data)
      CHECK(!memcmp((float *)out[2].data + 1, (float *)in.data + 1,
                    sizeof(float) * (ROWS * COLS - 1)));
  }
  for (int o = 0; o < 3; o++)
    nr_buffer_free(&out[o]);
  nr_buffer_free(&in);
  nr_engine_destroy(e);
  nr_model_destroy(m);
  test_knobs_off();
}

/* Without a finite address-space limit the oom fault allocates nothing. */
NR_TEST(fault_oom_without_a_limit_reports_at_once) {
  struct rlimit rl;
  SKIP_UNLESS(!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur == RLIM_INFINITY,
              "this process runs under an address-space limit (the worker tests cover it)");
  test_knobs_on();
  nr_model *m = make_model(t, false);
  REQUIRE(m);
  nr_engine *e = build(t, m, "-test.fault=oom -test.delay_ms=0");
  nr_buffer in = {0}, out[2] = {{0}};
  fill_input(&in, 1);
  nr_error err = {0};
  if (e)
    CHECK(run_engine(e, &in, out, &err) == NR_ERR_NOMEM &&
              strstr(err.message, "nothing allocated"), "%s", err.message);
  for (int o = 0; o < 2; o++)
    nr_buffer_free(&out[o]);
  nr_buffer_free(&in);
  nr_engine_destroy(e);
  nr_model_destroy(m);
  test_knobs_off();
}

/* ---- the worker: one test per status ------------------------------------------------ */

NR_TEST(tune_worker_status_names_round_trip) {
  for (int s = 0; s < NR_CAND_STATUS_COUNT; s++) {
    nr_cand_status back = NR_CAND_STATUS_COUNT;
    CHECK(nr_cand_status_parse(nr_cand_status_name((nr_cand_status)s), &back) && back == s);
  }
  nr_cand_status x;
  CHECK(!nr_cand_status_parse("fine", &x) && !nr_cand_status_parse(NULL, &x));
  CHECK(!strcmp(nr_cand_status_name(NR_CAND_ACCURACY_FAIL), "accuracy_fail"));
}

NR_TEST(tune_worker_rejects_a_job_without_model_or_engine) {
  nr_worker_job j = {0};
  nr_worker_result r;
  nr_error err = {0};
  CHECK(nr_worker_run(&j, &r, &err) == NR_ERR_INVALID_ARGUMENT, "%s", err.message);
  CHECK(nr_worker_run(NULL, &r, &err) == NR_ERR_INVALID_ARGUMENT);
}

NR_TEST(tune_worker_ok_records_losses_and_times) {
  fixture f;
  REQUIRE(setup(t, &f));
  nr_worker_job j = job_for(&f, "");
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OK, "%s: %s", nr_cand_status_name(r.status), r.message);
  CHECK(r.n_pairs == 2 && r.n_outputs == 2 && r.losses);
  for (int p = 0; p < r.n_pairs && r.losses; p++)
    for (int o = 0; o < r.n_outputs; o++)
      CHECK(loss(&r, p, o, NR_METRIC_REL_L2) < 1e-6 && loss(&r, p, o, NR_METRIC_LINF) < 1e-5,
            "pair %d output %d: %g", p, o, loss(&r, p, o, NR_METRIC_REL_L2));
  CHECK(r.n_times == 3 && r.times_ms, "%d timed runs", r.n_times);
  for (int i = 0; i < r.n_times; i++)
    CHECK(r.times_ms[i] >= 0);
  CHECK(r.build_ms >= 0 && r.wall_ms > 0 && r.engine_bytes == 0 && r.signal == 0);
  nr_worker_result_free(&r);
  CHECK(!r.losses && !r.times_ms);
  teardown(&f);
}

NR_TEST(tune_worker_build_error_keeps_the_message) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.fault=build_error");
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_BUILD_ERROR, "%s", nr_cand_status_name(r.status));
  CHECK(strstr(r.message, "injected"), "%s", r.message);
  CHECK(!r.losses && !r.times_ms && r.n_times == 0);
  nr_worker_result_free(&r);
  /* A route the parser refuses is a build error too. */
  j = job_for(&f, "-no.such_knob=1");
  r = run_job(t, &j);
  CHECK(r.status == NR_CAND_BUILD_ERROR && strstr(r.message, "no.such_knob"), "%s: %s",
        nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

NR_TEST(tune_worker_crash_records_the_signal) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.fault=crash");
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_CRASH && r.signal == SIGSEGV, "%s, signal %d: %s",
        nr_cand_status_name(r.status), r.signal, r.message);
  CHECK(!r.losses && !r.times_ms);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

NR_TEST(tune_worker_hang_times_out) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.fault=hang");
  j.timeout_s = 1;
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_TIMEOUT, "%s: %s", nr_cand_status_name(r.status), r.message);
  CHECK(r.signal == 0 && !r.losses && !r.times_ms);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

/* Virtual size of this process (the child starts from it). */
static uint64_t own_vsize(void) {
  FILE *fp = fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (fp) {
    if (fscanf(fp, "%llu", &pages) != 1)
      pages = 0;
    fclose(fp);
  }
  return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The limit leaves the child room to build and run (this process's size plus 512 MiB),
 * so it is the fault that exhausts it. */
NR_TEST(tune_worker_oom_under_a_memory_limit) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.fault=oom");
  j.mem_limit = own_vsize() + (512ull << 20);
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OOM, "%s: %s", nr_cand_status_name(r.status), r.message);
  CHECK(strstr(r.message, "test.fault=oom"), "%s", r.message);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

NR_TEST(tune_worker_nan_and_inf_are_nonfinite) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  const char *routes[] = {"-test.fault=nan", "-test.fault=inf -test.delay_ms=0"};
  for (int i = 0; i < 2; i++) {
    nr_worker_job j = job_for(&f, routes[i]);
    nr_worker_result r = run_job(t, &j);
    CHECK(r.status == NR_CAND_NONFINITE, "%s: %s", routes[i], nr_cand_status_name(r.status));
    CHECK(r.n_times == 0 && !r.times_ms, "a nonfinite engine is not timed");
    CHECK(r.losses && r.n_pairs == 2 && isinf(loss(&r, 0, 0, NR_METRIC_REL_L2)));
    nr_worker_result_free(&r);
    j.pairs = NULL; /* no pairs: the timing runs' outputs are checked instead */
    r = run_job(t, &j);
    CHECK(r.status == NR_CAND_NONFINITE && r.n_times == 0 && !r.losses, "%s: %s",
          routes[i], nr_cand_status_name(r.status));
    nr_worker_result_free(&r);
  }
  test_knobs_off();
  teardown(&f);
}

/* A run that returns an error and an output whose shape is not the reference's get
 * statuses of their own, not "nonfinite": the report says what went wrong. */
NR_TEST(tune_worker_run_error_and_shape_mismatch) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.fault=run_error -test.delay_ms=0");
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_RUN_ERROR && strstr(r.message, "run_error"), "%s: %s",
        nr_cand_status_name(r.status), r.message);
  CHECK(r.n_times == 0, "a failing engine is not timed");
  nr_worker_result_free(&r);
  test_knobs_off();
  /* the first reference output one element shorter than the engine's */
  nr_buffer *ref = &f.pairs.pairs[0].outputs[0];
  int d = ref->rank - 1;
  REQUIRE(ref->rank > 0 && ref->dims[d] > 1);
  ref->dims[d]--;
  j = job_for(&f, "");
  r = run_job(t, &j);
  CHECK(r.status == NR_CAND_SHAPE_MISMATCH && strstr(r.message, "shape"), "%s: %s",
        nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  ref->dims[d]++;
  teardown(&f);
}

NR_TEST(tune_worker_perturb_beyond_tolerance_fails_accuracy_but_is_timed) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.perturb=1e-2 -test.delay_ms=0");
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_ACCURACY_FAIL, "%s: %s", nr_cand_status_name(r.status), r.message);
  for (int p = 0; p < r.n_pairs && r.losses; p++)
    for (int o = 0; o < r.n_outputs; o++)
      CHECK(fabs(loss(&r, p, o, NR_METRIC_REL_L2) - 1e-2) < 1e-5, "pair %d output %d: %g", p,
            o, loss(&r, p, o, NR_METRIC_REL_L2));
  CHECK(r.n_pairs == 2 && r.n_times == 3 && r.times_ms, "%d timed runs", r.n_times);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

NR_TEST(tune_worker_perturb_within_tolerance_is_ok) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_worker_job j = job_for(&f, "-test.perturb=1e-4 -test.delay_ms=0");
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OK, "%s: %s", nr_cand_status_name(r.status), r.message);
  if (r.losses)
    CHECK(fabs(loss(&r, 1, 1, NR_METRIC_REL_L2) - 1e-4) < 1e-5, "%g",
          loss(&r, 1, 1, NR_METRIC_REL_L2));
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

static uint64_t file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) ? 0 : (uint64_t)sb.st_size;
}

/* A kept engine is the candidate: re-measuring it from the file gives the same
 * accuracy, and the fault in its plan comes along. */
NR_TEST(tune_worker_engine_out_then_engine_in) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  char path[] = "/tmp/nr_worker_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  nr_worker_job j = job_for(&f, "-test.perturb=1e-4");
  j.engine_out = path;
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OK, "%s: %s", nr_cand_status_name(r.status), r.message);
  CHECK(r.engine_bytes > 0 && r.engine_bytes == file_size(path), "%llu vs %llu",
        (unsigned long long)r.engine_bytes, (unsigned long long)file_size(path));
  nr_worker_result_free(&r);
  nr_worker_job again = job_for(&f, NULL);
  again.model = NULL;
  again.engine_in = path;
  again.min_runs = again.max_runs = 4;
  r = run_job(t, &again);
  CHECK(r.status == NR_CAND_OK && r.n_times == 4, "%s: %s (%d runs)",
        nr_cand_status_name(r.status), r.message, r.n_times);
  if (r.losses)
    CHECK(fabs(loss(&r, 0, 0, NR_METRIC_REL_L2) - 1e-4) < 1e-5);
  CHECK(r.engine_bytes == 0);
  nr_worker_result_free(&r);
  unlink(path);
  again.engine_in = path; /* gone now */
  r = run_job(t, &again);
  CHECK(r.status == NR_CAND_BUILD_ERROR && strstr(r.message, "loading"), "%s: %s",
        nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

/* Run counts follow min_runs, max_runs and min_time_ms; no pairs: zero inputs. */
NR_TEST(tune_worker_measurement_honours_run_counts) {
  fixture f;
  REQUIRE(setup(t, &f));
  struct {
    int min_runs, max_runs;
    double min_time_ms;
    int want;
  } cases[] = {
      {4, 4, 1e9, 4},  /* max_runs stops an endless time budget */
      {6, 50, 1e-9, 6}, /* min_runs reached, time already spent */
      {9, 3, 1e-9, 3},  /* max_runs caps min_runs */
      {2, 7, 1e9, 7},
  };
  for (int c = 0; c < 4; c++) {
    nr_worker_job j = job_for(&f, "");
    j.min_runs = cases[c].min_runs;
    j.max_runs = cases[c].max_runs;
    j.min_time_ms = cases[c].min_time_ms;
    if (c == 3)
      j.pairs = NULL; /* times on zero inputs; no losses */
    nr_worker_result r = run_job(t, &j);
    CHECK(r.status == NR_CAND_OK && r.n_times == cases[c].want, "case %d: %s, %d runs", c,
          nr_cand_status_name(r.status), r.n_times);
    if (c == 3)
      CHECK(!r.losses && r.n_pairs == 0 && r.n_outputs == 2);
    nr_worker_result_free(&r);
  }
  nr_worker_job j = job_for(&f, "");
  j.measure = false;
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OK && r.n_times == 0 && !r.times_ms && r.losses);
  nr_worker_result_free(&r);
  teardown(&f);
}

/* nr_worker_abort from a signal handler ends the run as an interrupted crash. */
static void on_alarm(int sig) {
  (void)sig;
  nr_worker_abort();
}

NR_TEST(tune_worker_abort_from_a_signal_handler) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  struct sigaction sa = {0}, old;
  sa.sa_handler = on_alarm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, &old);
  struct itimerval it = {{0, 0}, {0, 300000}}, off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &it, NULL);
  nr_worker_job j = job_for(&f, "-test.fault=hang");
  j.timeout_s = 120;
  nr_worker_result r = run_job(t, &j);
  setitimer(ITIMER_REAL, &off, NULL);
  sigaction(SIGALRM, &old, NULL);
  CHECK(r.status == NR_CAND_CRASH && r.signal == SIGINT, "%s, signal %d: %s",
        nr_cand_status_name(r.status), r.signal, r.message);
  nr_worker_result_free(&r);
  test_knobs_off();
  teardown(&f);
}

/* ---- the session survives ----------------------------------------------------------- */

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d)
    return -1;
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

NR_TEST(tune_worker_twenty_faulty_jobs_leave_no_fd_or_zombie) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  static const struct {
    const char *route;
    nr_cand_status want;
  } mix[] = {
      {"-test.fault=crash", NR_CAND_CRASH},
      {"-test.fault=nan -test.delay_ms=0", NR_CAND_NONFINITE},
      {"-test.fault=build_error", NR_CAND_BUILD_ERROR},
      {"-test.fault=hang", NR_CAND_TIMEOUT},
      {"-test.perturb=1e-1 -test.delay_ms=0", NR_CAND_ACCURACY_FAIL},
      {"-test.fault=inf", NR_CAND_NONFINITE},
      {"-test.fault=oom", NR_CAND_OOM},
      {"-test.delay_ms=0", NR_CAND_OK},
  };
  int before = count_fds();
  for (int i = 0; i < 20; i++) {
    int k = i % 8;
    nr_worker_job j = job_for(&f, mix[k].route);
    if (mix[k].want == NR_CAND_TIMEOUT)
      j.timeout_s = 0.5;
    if (mix[k].want == NR_CAND_OOM)
      j.mem_limit = own_vsize() + (512ull << 20);
    nr_worker_result r = run_job(t, &j);
    CHECK(r.status == mix[k].want, "job %d '%s': %s (%s)", i, mix[k].route,
          nr_cand_status_name(r.status), r.message);
    nr_worker_result_free(&r);
  }
  CHECK(count_fds() == before, "descriptors: %d before, %d after", before, count_fds());
  int ws;
  errno = 0;
  CHECK(waitpid(-1, &ws, WNOHANG) < 0 && errno == ECHILD, "a child is left over");
  test_knobs_off();
  teardown(&f);
}

/* ---- knob use and builds measured already ----------------------------------------- */

typedef struct same_probe {
  int row; /* the knob row the callback looks at */
  bool answer;
  int calls;
  uint8_t seen;
} same_probe;

static bool same_probe_fn(void *user, const uint8_t *use) {
  same_probe *p = user; /* runs in the child: what it records stays there */
  p->calls++;
  p->seen = use[p->row];
  return p->answer && (use[p->row] & NR_KNOB_USE_EFFECTIVE);
}

/* With the knob list the child reports how the build used every row; when same_as says
 * the build was measured already, the child stops after the build: no engine file, no
 * accuracy run, no timing. */
NR_TEST(tune_worker_reports_knob_use_and_stops_on_a_known_build) {
  fixture f;
  REQUIRE(setup(t, &f));
  test_knobs_on();
  nr_knob_list l = {0};
  nr_error err = {0};
  REQUIRE(!nr_knob_list_build(f.model, NULL, &l, &err), "%s", err.message);
  int row = nr_knob_list_find(&l, "test.delay_ms");
  REQUIRE(row >= 0);
  char path[] = "/tmp/nr_worker_same_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  unlink(path);
  same_probe probe = {row, false, 0, 0};
  nr_worker_job j = job_for(&f, "-test.delay_ms=0");
  j.knobs = &l;
  j.same_as = same_probe_fn;
  j.same_user = &probe;
  j.engine_out = path;
  nr_worker_result r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OK && !r.same, "%s: %s", nr_cand_status_name(r.status),
        r.message);
  CHECK(r.knob_use && r.n_knob_use == l.n, "%d use bytes for %d rows", r.n_knob_use, l.n);
  if (r.knob_use)
    CHECK(r.knob_use[row] == (NR_KNOB_USE_READ | NR_KNOB_USE_EFFECTIVE | NR_KNOB_USE_SET),
          "test.delay_ms: %u", r.knob_use[row]);
  CHECK(r.n_times == 3 && r.losses && access(path, F_OK) == 0, "measured and saved");
  CHECK(probe.calls == 0, "the callback runs in the child only");
  nr_worker_result_free(&r);
  unlink(path);

  probe.answer = true;
  r = run_job(t, &j);
  CHECK(r.status == NR_CAND_OK && r.same, "%s: %s", nr_cand_status_name(r.status),
        r.message);
  CHECK(r.n_times == 0 && !r.times_ms && !r.losses, "%d runs timed", r.n_times);
  CHECK(access(path, F_OK) != 0, "no engine file for a known build");
  CHECK(r.knob_use && r.knob_use[row] & NR_KNOB_USE_EFFECTIVE);
  nr_worker_result_free(&r);

  /* A build error carries no knob use. */
  j = job_for(&f, "-test.fault=build_error");
  j.knobs = &l;
  r = run_job(t, &j);
  CHECK(r.status == NR_CAND_BUILD_ERROR && !r.knob_use && !r.same);
  nr_worker_result_free(&r);
  nr_knob_list_free(&l);
  test_knobs_off();
  teardown(&f);
}
