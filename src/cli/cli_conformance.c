/* cli_conformance.c - `nnroute conformance`: runs ONNX backend-test directories
 * (model.onnx + test_data_set_N/{input_K,output_K}.pb) and compares with the
 * expected outputs.
 *
 * Each test runs in a forked child with a time limit, so a crash or a hang in one
 * operator is reported as that test's FAIL and the run goes on. SKIP is reserved for
 * NR_ERR_UNSUPPORTED, i.e. features docs/operators.md lists as unsupported. */
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
} conf_opts;

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

static bool compare(const nr_value *got, const nr_value *want, const conf_opts *o,
                    char *why, size_t cap) {
  char a[128], b[128];
  if (got->dtype != want->dtype || got->rank != want->rank ||
      memcmp(got->dims, want->dims, sizeof(int64_t) * (size_t)got->rank)) {
    snprintf(why, cap, "got %s, expected %s", nr_value_describe(got, a, sizeof a),
             nr_value_describe(want, b, sizeof b));
    return false;
  }
  int64_t n = nr_value_count(want);
  bool fl = nr_dtype_is_float(want->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (fl) {
      double x = nr_load_f64(got->dtype, got->data, i);
      double y = nr_load_f64(want->dtype, want->data, i);
      if (isnan(x) && isnan(y))
        continue;
      if (isinf(y) && x == y)
        continue;
      if (!(fabs(x - y) <= o->atol + o->rtol * fabs(y))) {
        snprintf(why, cap, "element %lld is %.9g, expected %.9g", (long long)i, x, y);
        return false;
      }
    } else if (want->dtype == NR_DTYPE_UINT64
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

/* Runs one data set: loads the model afresh (shapes are fixed per preparation). */
static result_kind run_set(const nr_testdata *td, const nr_testdata_set *set,
                           const conf_opts *o, char *why, size_t cap) {
  nr_error err = {0};
  nr_model *m = NULL;
  if (nr_model_load(td->model_path, NULL, &m, &err))
    return from_status(&err, why, cap);
  int ni = set->n_inputs, no = set->n_outputs;
  result_kind res = RES_PASS;
  nr_value in[64] = {0}, want[64] = {0};
  nr_buffer ins[64] = {0}, outs[64] = {0};
  if (ni != nr_model_input_count(m) || no != nr_model_output_count(m) || ni > 64 ||
      no > 64) {
    snprintf(why, cap, "data set has %d inputs and %d outputs, the model %d and %d", ni,
             no, nr_model_input_count(m), nr_model_output_count(m));
    res = RES_FAIL;
    goto done;
  }
  for (int i = 0; i < ni && res == RES_PASS; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    if (nr_pb_read(set->inputs[i], &in[i], NULL, &err) ||
        nr_model_set_input_shape(m, info.name, in[i].rank, in[i].dims, &err)) {
      res = from_status(&err, why, cap);
      break;
    }
    ins[i] = (nr_buffer){in[i].dtype, in[i].rank, {0}, in[i].data};
    memcpy(ins[i].dims, in[i].dims, sizeof ins[i].dims);
  }
  for (int i = 0; i < no && res == RES_PASS; i++)
    if (nr_pb_read(set->outputs[i], &want[i], NULL, &err))
      res = from_status(&err, why, cap);
  if (res == RES_PASS && nr_model_run(m, ins, outs, &err))
    res = from_status(&err, why, cap);
  for (int i = 0; i < no && res == RES_PASS; i++) {
    nr_io_info info;
    nr_model_output_info(m, i, &info);
    nr_value got = {outs[i].dtype, outs[i].rank, {0}, outs[i].data, false};
    memcpy(got.dims, outs[i].dims, sizeof got.dims);
    char detail[512];
    if (!compare(&got, &want[i], o, detail, sizeof detail)) {
      snprintf(why, cap, "output '%s': %s", info.name, detail);
      res = RES_FAIL;
    }
  }
done:
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
    r = run_set(&td, &td.sets[s], o, why, cap);
  nr_testdata_free(&td);
  return r;
}

/* ---- isolation and reporting ---------------------------------------------------- */

/* Runs the test in a child; a crash or time-out becomes a FAIL with the reason. */
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
    alarm((unsigned)o->timeout_s);
    char reason[1024] = "";
    result_kind r = run_test(test, o, reason, sizeof reason);
    char msg[1100];
    int len = snprintf(msg, sizeof msg, "%d%s", (int)r, reason);
    if (write(fds[1], msg, (size_t)(len < (int)sizeof msg ? len : (int)sizeof msg - 1)) < 0)
      _exit(3);
    _exit(0);
  }
  close(fds[1]);
  char msg[1100];
  size_t got = 0;
  for (ssize_t r; got < sizeof msg - 1 && (r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0;)
    got += (size_t)r;
  msg[got] = '\0';
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      snprintf(why, cap, "timed out after %d s", o->timeout_s);
    else
      snprintf(why, cap, "crashed with signal %d (%s)", sig, strsignal(sig));
    return RES_FAIL;
  }
  if (got < 1 || msg[0] < '0' || msg[0] > '2') {
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

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static void conf_usage(FILE *f) {
  fprintf(f, "usage: nnroute conformance PATH... [--json] [--rtol R] [--atol A]"
             " [--timeout S] [--min-tests N]\n\n"
             "Finds every test directory (model.onnx + test_data_set_N) under each PATH,\n"
             "runs it and compares with the expected outputs (rtol 1e-3, atol 1e-7 unless\n"
             "given). Prints how many tests it found, PASS, FAIL or SKIP per test, then\n"
             "'N passed, N failed, N skipped'. Exit status 1 when any test failed, when\n"
             "none was found, or when fewer than N were found (--min-tests).\n");
}

int nr_cli_conformance(int argc, char **argv) {
  conf_opts o = {1e-3, 1e-7, false, 120, 1};
  path_list tests = {0};
  int n_paths = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      o.json = true;
    } else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) {
      o.rtol = strtod(argv[++i], NULL);
    } else if (!strcmp(argv[i], "--atol") && i + 1 < argc) {
      o.atol = strtod(argv[++i], NULL);
    } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
      o.timeout_s = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--min-tests") && i + 1 < argc) {
      char *end;
      o.min_tests = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || o.min_tests < 1) {
        fprintf(stderr, "nnroute conformance: --min-tests '%s' is not a positive count\n",
                argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      conf_usage(stdout);
      return 0;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "nnroute conformance: unknown option '%s'\n", argv[i]);
      conf_usage(stderr);
      return 2;
    } else {
      n_paths++;
      if (!is_dir(argv[i]))
        fprintf(stderr, "nnroute conformance: '%s' is not a directory\n", argv[i]);
      find_tests(argv[i], &tests, 0);
    }
  }
  if (!n_paths) {
    conf_usage(stderr);
    return 2;
  }
  int count[3] = {0};
  if (tests.n < o.min_tests)
    fprintf(stderr, "nnroute conformance: found %d tests, expected at least %ld: is the "
                    "test data missing or incomplete?\n", tests.n, o.min_tests);
  else if (!o.json)
    printf("found %d tests\n", tests.n);
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
