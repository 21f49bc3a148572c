/* cli_conformance.c - `nnroute conformance`: runs ONNX backend-test directories
 * (model.onnx + test_data_set_N/{input_K,output_K}.pb) and compares with the
 * expected outputs: on the reference executor, and with --engines / --routes K also
 * as compiled engines along the default route and K seeded random routes.
 *
 * Each test runs in a forked child with a time limit, so a crash or a hang in one
 * operator is reported as that test's FAIL and the run goes on; the child reports
 * each stage (the reference, then each route) before it starts it, so a crash or a
 * time-out names the route it happened on. SKIP is reserved for NR_ERR_UNSUPPORTED
 * from the reference, i.e. features docs/operators.md lists as unsupported; once the
 * reference passes, an engine route that fails to build, fails to run or computes
 * other outputs is a FAIL naming the route.
 *
 * Key decision: a test's routes are drawn from a seed that mixes --seed with the
 * test's name and data set, so running one test alone draws the routes it had in the
 * whole suite, and a printed route replays with `nnroute run`. Engine outputs get
 * the reference's rtol/atol per element, plus the route's error bound (cli_routes.c)
 * as a relative L2 budget for what exceeds them. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "io/tensor_io.h"
#include "ir/dtype.h"
#include "util/error.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct conf_opts {
  double rtol, atol;
  bool json;
  int timeout_s;
  long min_tests; /* fewer tests found than this is a failure (--min-tests) */
  bool engines;   /* also build and run engines (--engines, --routes) */
  bool each_value; /* every single-change route too (--each-value) */
  int routes;     /* seeded random routes per data set, after those */
  uint64_t seed;
  double change_p;
  int threads;    /* engine threads; 0: all CPUs */
} conf_opts;

/* The child's stage records go to this descriptor (-1: not isolated). */
static int stage_fd = -1;

typedef enum { RES_PASS, RES_FAIL, RES_SKIP } result_kind;

static const char *result_name[] = {"PASS", "FAIL", "SKIP"};

static bool is_file(const char *path) {
  struct stat sb;
  return !stat(path, &sb) && S_ISREG(sb.st_mode);
}

static bool is_dir(const char *path) {
  struct stat sb;
  return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* ---- finding tests -------------------------------------------------------------- */

typedef struct path_list {
  char **items;
  int n, cap;
} path_list;

static void list_add(path_list *l, const char *p) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->items = realloc(l->items, sizeof(char *) * (size_t)l->cap);
  }
  l->items[l->n++] = strdup(p);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A test directory holds model.onnx; otherwise search below (sorted, no links). */
static void find_tests(const char *path, path_list *out, int depth) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s/model.onnx", path);
  if (is_file(buf)) {
    list_add(out, path);
    return;
  }
  DIR *d = depth < 8 ? opendir(path) : NULL;
  if (!d)
    return;
  path_list sub = {0};
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(buf, sizeof buf, "%s/%s", path, e->d_name);
    if (is_dir(buf))
      list_add(&sub, buf);
  }
  closedir(d);
  qsort(sub.items, (size_t)sub.n, sizeof(char *), cmp_str);
  for (int i = 0; i < sub.n; i++) {
    find_tests(sub.items[i], out, depth + 1);
    free(sub.items[i]);
  }
  free(sub.items);
}


/* ---- comparing ------------------------------------------------------------------ */

/* Floats: every element within atol + rtol |y|, or, with a route bound B > 0, what
 * exceeds that (as a vector) within B times the expected output's L2 norm. NaN must
 * meet NaN and an infinity itself in either case. */
static bool compare_float(const nr_value *got, const nr_value *want, const conf_opts *o,
                          double bound, char *why, size_t cap) {
  int64_t n = nr_value_count(want), first = -1;
  double excess = 0, norm = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = nr_load_f64(got->dtype, got->data, i);
    double y = nr_load_f64(want->dtype, want->data, i);
    if ((isnan(x) && isnan(y)) || (isinf(y) && x == y))
      continue;
    bool special = !isfinite(x) || !isfinite(y);
    double over = special ? INFINITY : fabs(x - y) - (o->atol + o->rtol * fabs(y));
    if (!special)
      norm += y * y;
    if (!(over <= 0)) {
      if (first < 0)
        first = i;
      excess += special ? INFINITY : over * over;
    }
  }
  if (first < 0 || (bound > 0 && sqrt(excess) <= bound * sqrt(norm)))
    return true;
  int len = snprintf(why, cap, "element %lld is %.9g, expected %.9g", (long long)first,
                     nr_load_f64(got->dtype, got->data, first),
                     nr_load_f64(want->dtype, want->data, first));
  if (bound > 0 && len > 0 && (size_t)len < cap)
    snprintf(why + len, cap - (size_t)len, "; past rtol/atol by relative L2 %.3g, over "
             "the route's bound %.3g", norm > 0 ? sqrt(excess / norm) : sqrt(excess), bound);
  return false;
}

static bool compare(const nr_value *got, const nr_value *want, const conf_opts *o,
                    double bound, char *why, size_t cap) {
  char a[128], b[128];
  if (got->dtype != want->dtype || got->rank != want->rank ||
      memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)got->rank)) {
    snprintf(why, cap, "got %s, expected %s", nr_value_describe(got, a, sizeof a),
             nr_value_describe(want, b, sizeof b));
    return false;
  }
  if (nr_dtype_is_float(want->dtype))
    return compare_float(got, want, o, bound, why, cap);
  int64_t n = nr_value_count(want);
  for (int64_t i = 0; i < n; i++) {
    if (want->dtype == NR_DTYPE_UINT64
            ? ((const uint64_t *)got->data)[i] != ((const uint64_t *)want->data)[i]
            : nr_load_i64(got->dtype, got->data, i) !=
                  nr_load_i64(want->dtype, want->data, i)) {
      snprintf(why, cap, "element %lld is %lld, expected %lld", (long long)i,
               (long long)nr_load_i64(got->dtype, got->data, i),
               (long long)nr_load_i64(want->dtype, want->data, i));
      return false;
    }
  }
  return true;
}

static result_kind from_status(const nr_error *err, char *why, size_t cap) {
  snprintf(why, cap, "%s: %.960s", nr_status_str(err->status), err->message);
  return err->status == NR_ERR_UNSUPPORTED ? RES_SKIP : RES_FAIL;
}

/* Output i of the run against the expected values; bound as compare() takes it. */
static result_kind compare_outputs(nr_model *m, const nr_buffer *outs,
                                   const nr_value *want, int no, const conf_opts *o,
                                   double bound, char *why, size_t cap) {
  for (int i = 0; i < no; i++) {
    nr_io_info info;
    nr_model_output_info(m, i, &info);
    nr_value got = {outs[i].dtype, outs[i].rank, {0}, outs[i].data, false};
    memcpy(got.dims, outs[i].dims, sizeof got.dims);
    char detail[640];
    if (!compare(&got, &want[i], o, bound, detail, sizeof detail)) {
      snprintf(why, cap, "output '%s': %s", info.name, detail);
      return RES_FAIL;
    }
  }
  return RES_PASS;
}

/* ---- engines along routes --------------------------------------------------------- */

/* One data set, read and checked on the reference: what every route is run on. */
typedef struct set_data {
  const char *test, *set_dir;
  int set, no;
  const nr_buffer *ins;
  const nr_value *want;
  const char *form; /* how the model was changed: "" or ", inputs 1.. constant" */
} set_data;

/* Tells the parent what the child starts next (isolation names it on a crash). */
static void stage(const char *text) {
  char line[1100];
  int len = snprintf(line, sizeof line, "S%.1000s", text);
  for (int i = 1; i < len; i++)
    line[i] = line[i] == '\n' ? ' ' : line[i];
  line[len++] = '\n';
  if (stage_fd >= 0 && write(stage_fd, line, (size_t)len) < 0)
    stage_fd = -1;
}

/* The seed of a data set's routes: --seed, the test's name and the set's index. */
static uint64_t route_seed(const conf_opts *o, const char *name, int set) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  uint64_t state = o->seed ^ h ^ ((uint64_t)set * 0x9e3779b97f4a7c15ull);
  return nr_cli_random_u64(&state);
}

/* Builds and runs the engine of one route and compares it; a build or run error is a
 * FAIL (the reference passed this data set), except that the default route's build
 * may answer NR_ERR_UNSUPPORTED: engines take static shapes and no subgraphs only
 * (If, Loop, Scan, NonZero, Unique, ...), and that SKIPs the test's engines. */
static result_kind run_route(nr_model *m, const nr_knob_list *l, const int *choice,
                             const char *route, bool is_default, const set_data *d,
                             nr_calibration **calib, const conf_opts *o, char *why,
                             size_t cap) {
  nr_error err = {0};
  nr_engine *e = NULL;
  nr_context *ctx = NULL;
  nr_buffer outs[64] = {0};
  nr_status st = NR_OK;
  if (!*calib && nr_cli_route_needs_calibration(l, choice))
    st = nr_calibration_collect(m, 1, d->ins, calib, &err);
  nr_build_options bo = {sizeof bo, route, o->threads, .calibration = *calib};
  bool skip = false;
  if (!st)
    skip = (st = nr_engine_build(m, &bo, &e, &err)) == NR_ERR_UNSUPPORTED && is_default;
  if (!st)
    st = nr_context_create(e, o->threads, &ctx, &err);
  if (!st)
    st = nr_context_run(ctx, d->ins, outs, &err);
  result_kind r = skip ? RES_SKIP : RES_FAIL;
  if (st)
    snprintf(why, cap, "%s%s: %.900s", skip ? "engines: " : "", nr_status_str(err.status),
             err.message);
  else
    r = compare_outputs(m, outs, d->want, d->no, o, nr_cli_route_bound(l, choice, 0), why,
                        cap);
  for (int i = 0; i < 64; i++)
    nr_buffer_free(&outs[i]);
  nr_context_destroy(ctx);
  nr_engine_destroy(e);
  return r;
}

/* Appends text to the string in buf, as much as fits. */
static void append(char *buf, size_t cap, const char *text) {
  size_t n = strlen(buf);
  while (*text && n + 1 < cap)
    buf[n++] = *text++;
  buf[n] = '\0';
}

/* "route 2 on test_data_set_0: --route '...' [--calibration DIR]": what replays it
 * (`nnroute run TEST/model.onnx --inputs-dir DIR` plus these options). */
static void route_label(const char *name, const char *route, const set_data *d, bool calib,
                        char *out, size_t cap) {
  int len = snprintf(out, cap, "%s on %s%s: --route '%.700s'", name,
                     base_name(d->set_dir), d->form, route);
  if (calib && len > 0 && (size_t)len < cap)
    snprintf(out + len, cap - (size_t)len, " --calibration %s", base_name(d->set_dir));
}

/* --each-value: moves choice from one single-change route to the next (row *row at
 * value *v, both -1 before the first), every value of every knob instance in list
 * order; false after the last, choice back at the default route. Knobs of reduced
 * precision without documented bounds stay out, as in random routes. */
static bool next_single_change(const nr_knob_list *l, int *choice, int *row, int *v) {
  if (*row >= 0)
    choice[*row] = l->knobs[*row].dflt;
  for (int i = *row < 0 ? 0 : *row; i < l->n; i++, *v = -1) {
    const nr_knob_info *k = &l->knobs[i];
    if ((k->flags & NR_KNOB_INFO_PRECISION) && !k->def_bounds)
      continue;
    for (int w = *v + 1; w < k->n_values; w++)
      if (w != k->dflt) {
        *row = i, *v = w;
        choice[i] = w;
        return true;
      }
  }
  return false;
}

/* The default route, every single change (--each-value), then o->routes seeded random
 * ones, on one data set; stops at the first that does not pass. */
static result_kind run_engines(nr_model *m, const set_data *d, const conf_opts *o,
                               char *why, size_t cap) {
  nr_error err = {0};
  nr_knob_list l = {0};
  nr_calibration *calib = NULL;
  int *choice = NULL;
  nr_status st = nr_knob_list_build(m, NULL, &l, &err);
  if (!st && !(choice = calloc((size_t)l.n + 1, sizeof *choice)))
    st = nr_errorf(&err, NR_ERR_NOMEM, "out of memory");
  if (!st)
    st = nr_knob_list_parse_route(&l, "", choice, &err);
  result_kind r = st ? RES_FAIL : RES_PASS;
  if (st)
    snprintf(why, cap, "listing the knobs: %s: %.900s", nr_status_str(err.status),
             err.message);
  uint64_t state = route_seed(o, base_name(d->test), d->set) ^
                   (*d->form ? 0x5bd1e995u : 0);
  enum { DEFAULT_ROUTE, SINGLE_CHANGES, RANDOM_ROUTES } phase = DEFAULT_ROUTE;
  int row = -1, v = -1, drawn = 0;
  while (r == RES_PASS) {
    char name[32] = "default route";
    bool is_default = phase == DEFAULT_ROUTE;
    if (phase == SINGLE_CHANGES && next_single_change(&l, choice, &row, &v)) {
      snprintf(name, sizeof name, "single-change route");
    } else if (!is_default) {
      if (drawn == o->routes)
        break;
      phase = RANDOM_ROUTES;
      nr_cli_draw_route(&l, choice, o->change_p, NR_CLI_PRECISION_CHANGES, &state);
      snprintf(name, sizeof name, "route %d", ++drawn);
    }
    char *text = nr_knob_list_route_text(&l, choice), label[900], detail[1024];
    route_label(name, text ? text : "", d, nr_cli_route_needs_calibration(&l, choice),
                label, sizeof label);
    stage(label);
    r = run_route(m, &l, choice, text ? text : "", is_default, d, &calib, o, detail,
                  sizeof detail);
    if (is_default)
      phase = o->each_value ? SINGLE_CHANGES : RANDOM_ROUTES;
    /* A FAIL gives the label first: a long reason may be cut, never the route. */
    if (r == RES_SKIP) {
      snprintf(why, cap, "%s", detail);
    } else if (r != RES_PASS) {
      snprintf(why, cap, "%s: ", label);
      append(why, cap, detail);
    }
    free(text);
  }
  free(choice);
  nr_calibration_destroy(calib);
  nr_knob_list_free(&l);
  return r;
}

/* ---- one test ----------------------------------------------------------------------- */

/* Reads the data set's inputs (fixing the model's input shapes) and expected outputs. */
static result_kind read_set(nr_model *m, const nr_testdata_set *set, nr_value *in,
                            nr_buffer *ins, nr_value *want, char *why, size_t cap) {
  nr_error err = {0};
  int ni = set->n_inputs, no = set->n_outputs;
  if (ni != nr_model_input_count(m) || no != nr_model_output_count(m) || ni > 64 ||
      no > 64) {
    snprintf(why, cap, "data set has %d inputs and %d outputs, the model %d and %d", ni,
             no, nr_model_input_count(m), nr_model_output_count(m));
    return RES_FAIL;
  }
  for (int i = 0; i < ni; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    if (nr_pb_read(set->inputs[i], &in[i], NULL, &err) ||
        nr_model_set_input_shape(m, info.name, in[i].rank, in[i].dims, &err))
      return from_status(&err, why, cap);
    ins[i] = (nr_buffer){in[i].dtype, in[i].rank, {0}, in[i].data};
    memcpy(ins[i].dims, in[i].dims, sizeof ins[i].dims);
  }
  for (int i = 0; i < no; i++)
    if (nr_pb_read(set->outputs[i], &want[i], NULL, &err))
      return from_status(&err, why, cap);
  return RES_PASS;
}

/* The model with every input but the first made a constant holding the data set's
 * values, as an exported model holds its weights: only then do Conv, Gemm and MatMul
 * run their compiled tactics and carry the precision knob. The reference runs it
 * first (its constant folding included), then the engines do. */
static result_kind constant_form(const nr_testdata *td, const set_data *d, int ni,
                                 const conf_opts *o, char *why, size_t cap) {
  nr_error err = {0};
  nr_model *m = NULL;
  nr_buffer outs[64] = {0};
  set_data c = *d;
  c.form = ", inputs 1.. constant";
  char label[64];
  snprintf(label, sizeof label, "the reference executor%s", c.form);
  stage(label);
  nr_status st = nr_model_load(td->model_path, NULL, &m, &err);
  for (int i = ni - 1; !st && i >= 0; i--) { /* from the last: indices stay valid */
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    st = i ? nr_model_set_input_constant(m, info.name, &d->ins[i], &err)
           : nr_model_set_input_shape(m, info.name, d->ins[0].rank, d->ins[0].dims, &err);
  }
  if (!st)
    st = nr_model_run(m, d->ins, outs, &err);
  char detail[1024];
  result_kind r = st ? from_status(&err, detail, sizeof detail)
                     : compare_outputs(m, outs, d->want, d->no, o, 0, detail,
                                       sizeof detail);
  if (r != RES_PASS) {
    snprintf(why, cap, "%s: ", label);
    append(why, cap, detail);
  } else {
    r = run_engines(m, &c, o, why, cap);
  }
  for (int i = 0; i < 64; i++)
    nr_buffer_free(&outs[i]);
  nr_model_destroy(m);
  return r;
}

/* The engines of the model as the test gives it and, when it has two inputs or more,
 * of its constant form. A FAIL of either fails the test; a test whose engines are
 * unsupported in both forms is a SKIP. */
static result_kind both_forms(nr_model *m, const nr_testdata *td, const set_data *d,
                              int ni, const conf_opts *o, char *why, size_t cap) {
  result_kind given = run_engines(m, d, o, why, cap);
  if (given == RES_FAIL || ni < 2)
    return given;
  char other[1024] = "";
  result_kind constant = constant_form(td, d, ni, o, other, sizeof other);
  if (constant == RES_FAIL || given == RES_SKIP) {
    why[0] = '\0';
    append(why, cap, other);
  }
  return constant == RES_FAIL ? RES_FAIL : given == RES_PASS ? RES_PASS : constant;
}

/* Runs one data set: loads the model afresh (shapes are fixed per preparation), runs
 * the reference, then the engines when asked. */
static result_kind run_set(const char *test, const nr_testdata *td, int s,
                           const conf_opts *o, char *why, size_t cap) {
  const nr_testdata_set *set = &td->sets[s];
  nr_error err = {0};
  nr_model *m = NULL;
  stage("the reference executor");
  if (nr_model_load(td->model_path, NULL, &m, &err))
    return from_status(&err, why, cap);
  nr_value in[64] = {0}, want[64] = {0};
  nr_buffer ins[64] = {0}, outs[64] = {0};
  result_kind res = read_set(m, set, in, ins, want, why, cap);
  if (res == RES_PASS && nr_model_run(m, ins, outs, &err))
    res = from_status(&err, why, cap);
  if (res == RES_PASS)
    res = compare_outputs(m, outs, want, set->n_outputs, o, 0, why, cap);
  set_data d = {test, set->dir, s, set->n_outputs, ins, want, ""};
  if (res == RES_PASS && o->engines)
    res = both_forms(m, td, &d, set->n_inputs, o, why, cap);
  for (int i = 0; i < 64; i++) {
    nr_value_free(&in[i]);
    nr_value_free(&want[i]);
    nr_buffer_free(&outs[i]);
  }
  nr_model_destroy(m);
  return res;
}

static result_kind run_test(const char *test, const conf_opts *o, char *why, size_t cap) {
  nr_testdata td;
  nr_error err = {0};
  if (nr_testdata_open(test, &td, &err))
    return from_status(&err, why, cap);
  result_kind r = RES_PASS;
  if (!td.n_sets) {
    snprintf(why, cap, "no test_data_set_0 directory");
    r = RES_FAIL;
  }
  for (int s = 0; s < td.n_sets && r == RES_PASS; s++)
    r = run_set(test, &td, s, o, why, cap);
  nr_testdata_free(&td);
  return r;
}

/* ---- isolation and reporting ---------------------------------------------------- */

/* The child's last word: "R<result digit><reason>\n" after its "S<stage>\n" lines. */
static void child_report(int fd, result_kind r, const char *reason) {
  char msg[1100];
  int len = snprintf(msg, sizeof msg, "R%d%.1000s", (int)r, reason);
  for (int i = 2; i < len; i++)
    msg[i] = msg[i] == '\n' ? ' ' : msg[i];
  msg[len++] = '\n';
  if (write(fd, msg, (size_t)len) < 0)
    _exit(3);
  _exit(0);
}

/* Reads the child's lines: the last stage it began and its result line (empty when
 * it gave none). */
static void read_child(int fd, char *last_stage, char *result, size_t cap) {
  FILE *f = fdopen(fd, "r");
  char *line = NULL;
  size_t n = 0;
  last_stage[0] = result[0] = '\0';
  for (ssize_t len; f && (len = getline(&line, &n, f)) > 0;) {
    if (line[len - 1] == '\n')
      line[len - 1] = '\0';
    if (line[0] == 'S')
      snprintf(last_stage, cap, "%s", line + 1);
    else if (line[0] == 'R')
      snprintf(result, cap, "%s", line + 1);
  }
  free(line);
  if (f)
    fclose(f);
  else
    close(fd);
}

/* Runs the test in a child; a crash or time-out becomes a FAIL with the reason and
 * the stage it happened in. */
static result_kind run_isolated(const char *test, const conf_opts *o, char *why,
                                size_t cap) {
  int fds[2];
  if (pipe(fds))
    return run_test(test, o, why, cap);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_test(test, o, why, cap);
  }
  if (pid == 0) {
    close(fds[0]);
    stage_fd = fds[1];
    alarm((unsigned)o->timeout_s);
    char reason[1024] = "";
    child_report(fds[1], run_test(test, o, reason, sizeof reason), reason);
  }
  close(fds[1]);
  char stage_text[1100], msg[1100];
  read_child(fds[0], stage_text, msg, sizeof msg);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status), len;
    if (sig == SIGALRM)
      len = snprintf(why, cap, "timed out after %d s", o->timeout_s);
    else
      len = snprintf(why, cap, "crashed with signal %d (%s)", sig, strsignal(sig));
    if (stage_text[0] && len > 0 && (size_t)len < cap)
      snprintf(why + len, cap - (size_t)len, " in %s", stage_text);
    return RES_FAIL;
  }
  if (msg[0] < '0' || msg[0] > '2') {
    snprintf(why, cap, "test process exited without a result (status %d)",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return RES_FAIL;
  }
  snprintf(why, cap, "%.1000s", msg + 1);
  return (result_kind)(msg[0] - '0');
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void conf_usage(FILE *f) {
  fprintf(f, "usage: nnroute conformance PATH... [--json] [--rtol R] [--atol A]\n"
             "         [--timeout S] [--min-tests N] [--engines] [--each-value]\n"
             "         [--routes K] [--seed S (1)] [--change-probability P (0.3)]\n"
             "         [--threads N]\n\n"
             "Finds every test directory (model.onnx + test_data_set_N) under each PATH,\n"
             "runs it on the reference executor and compares with the expected outputs\n"
             "(rtol 1e-3, atol 1e-7 unless given). --engines also builds and runs each\n"
             "data set as an engine along the default route, --each-value along every\n"
             "route that moves one knob instance to one other value, --routes K along K\n"
             "seeded random routes (each knob off its default with probability P); all on\n"
             "the model as given and, with two inputs or more, with the inputs after the\n"
             "first made constants, as an exported model's weights are (the form in\n"
             "which Conv, Gemm and MatMul run compiled kernels and have precision\n"
             "knobs). An engine's outputs get the same rtol/atol plus the route's error\n"
             "bound, a relative L2 budget for what exceeds them. A route that fails to\n"
             "build or run, or computes other outputs, fails the test and is named;\n"
             "routes depend only on S, P and the test's name, so the same options on the\n"
             "one test replay it, and a route of the model as given also replays with\n"
             "  nnroute run TEST/model.onnx --inputs-dir TEST/test_data_set_N --route R\n"
             "(and --calibration TEST/test_data_set_N when the FAIL line names it).\n"
             "Engines that the default route cannot build (subgraphs, data-dependent\n"
             "shapes: NR_ERR_UNSUPPORTED) SKIP the test, with the reason. --threads sets\n"
             "the engines' threads (default: all CPUs). Each test runs in a child process\n"
             "with a limit of S seconds (--timeout, default 120). Prints how many tests\n"
             "it found, PASS, FAIL or SKIP per test, then 'N passed, N failed,\n"
             "N skipped'. Exit status 1 when any test failed, when none was found, or\n"
             "when fewer than N were found (--min-tests).\n");
}

/* A count option's value: a whole number >= lo, else -1. */
static long count_arg(const char *text, long lo) {
  char *end;
  long v = strtol(text, &end, 10);
  return *end || end == text || v < lo ? -1 : v;
}

/* Fills o and the test list; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, conf_opts *o, path_list *tests) {
  int n_paths = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    bool v = i + 1 < argc;
    long n = 0;
    if (!strcmp(arg, "--json")) {
      o->json = true;
    } else if (!strcmp(arg, "--rtol") && v) {
      o->rtol = strtod(argv[++i], NULL);
    } else if (!strcmp(arg, "--atol") && v) {
      o->atol = strtod(argv[++i], NULL);
    } else if (!strcmp(arg, "--timeout") && v) {
      o->timeout_s = atoi(argv[++i]);
    } else if (!strcmp(arg, "--engines")) {
      o->engines = true;
    } else if (!strcmp(arg, "--each-value")) {
      o->engines = o->each_value = true;
    } else if (!strcmp(arg, "--seed") && v) {
      o->seed = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(arg, "--change-probability") && v) {
      o->change_p = strtod(argv[++i], NULL);
    } else if ((!strcmp(arg, "--min-tests") || !strcmp(arg, "--routes") ||
                !strcmp(arg, "--threads")) &&
               v) {
      if ((n = count_arg(argv[++i], arg[2] == 'm')) < 0) {
        fprintf(stderr, "nnroute conformance: %s '%s' is not a %s count\n", arg, argv[i],
                arg[2] == 'm' ? "positive" : "whole");
        return 2;
      }
      if (arg[2] == 'm')
        o->min_tests = n;
      else if (arg[2] == 'r')
        o->routes = (int)n, o->engines = true;
      else
        o->threads = (int)n;
    } else if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      conf_usage(stdout);
      return 0;
    } else if (arg[0] == '-') {
      fprintf(stderr, "nnroute conformance: unknown option '%s'\n", arg);
      conf_usage(stderr);
      return 2;
    } else {
      n_paths++;
      if (!is_dir(arg))
        fprintf(stderr, "nnroute conformance: '%s' is not a directory\n", arg);
      find_tests(arg, tests, 0);
    }
  }
  if (!n_paths) {
    conf_usage(stderr);
    return 2;
  }
  return -1;
}

int nr_cli_conformance(int argc, char **argv) {
  conf_opts o = {1e-3, 1e-7, false, 120, 1, .seed = 1, .change_p = 0.3};
  path_list tests = {0};
  int rc = parse_args(argc, argv, &o, &tests);
  if (rc >= 0) {
    for (int t = 0; t < tests.n; t++)
      free(tests.items[t]);
    free(tests.items);
    return rc;
  }
  int count[3] = {0};
  if (tests.n < o.min_tests)
    fprintf(stderr, "nnroute conformance: found %d tests, expected at least %ld: is the "
                    "test data missing or incomplete?\n", tests.n, o.min_tests);
  else if (!o.json)
    printf("found %d tests\n", tests.n);
  if (o.engines && !o.json)
    printf("engines: the default route%s and %d random route%s per data set (seed %llu)\n",
           o.each_value ? ", every single change" : "", o.routes, o.routes == 1 ? "" : "s",
           (unsigned long long)o.seed);
  if (o.json)
    printf("{\"tests\": [");
  for (int t = 0; t < tests.n; t++) {
    char why[1024] = "";
    result_kind r = run_isolated(tests.items[t], &o, why, sizeof why);
    count[r]++;
    if (o.json) {
      printf("%s\n  {\"name\": ", t ? "," : "");
      json_string(base_name(tests.items[t]));
      printf(", \"result\": \"%s\", \"reason\": ", result_name[r]);
      json_string(why);
      printf("}");
    } else if (r == RES_PASS) {
      printf("PASS %s\n", base_name(tests.items[t]));
    } else {
      printf("%s %s: %s\n", result_name[r], base_name(tests.items[t]), why);
    }
    fflush(stdout);
    free(tests.items[t]);
  }
  free(tests.items);
  if (o.json)
    printf("\n], \"passed\": %d, \"failed\": %d, \"skipped\": %d}\n", count[RES_PASS],
           count[RES_FAIL], count[RES_SKIP]);
  else
    printf("%d passed, %d failed, %d skipped\n", count[RES_PASS], count[RES_FAIL],
           count[RES_SKIP]);
  return count[RES_FAIL] || tests.n < o.min_tests ? 1 : 0;
}
