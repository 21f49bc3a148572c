/* cli_bench.c - `nnroute bench`: times inferences of an engine (or of a model built on
 * the spot) on seeded random inputs and prints a table or JSON.
 *
 * Each iteration is one nr_context_run, timed with the monotonic clock; output
 * buffers are allocated by the first (warm-up) run and reused, so the timed loop does
 * no allocation of its own. Measuring stops once both the duration and the minimum
 * iteration count are reached. The statistics (stats.h) are the ones the tuner uses.
 * --profile installs the context's step hook (nr_context_time_steps) for the timed loop
 * and prints where the time went, step by step and per op and tactic. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "util/device.h"
#include "util/error.h"
#include "util/stats.h"
#include "util/threadpool.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SHAPES 64

typedef struct bench_args {
  const char *path, *route, *shapes[MAX_SHAPES], *calibration, *inputs_dir, *verify;
  int n_shapes, threads, min_iters;
  double warmup_ms, duration_ms;
  uint64_t seed;
  bool json, profile;
  int top;
  nr_device device;
  bool flush_l2;
} bench_args;

/* Device engines: the device time of every timed run (CUDA events around the steps),
 * from the backend, beside the host-visible latency. */
typedef struct dev_timing {
  const char *be; /* the backend's name; NULL for CPU engines */
  double *ms;
  nr_stats stats;
} dev_timing;

/* Device engines rotate this many input sets, so a model whose data fits in the L2
 * does not find this run's inputs there already. */
#define DEVICE_INPUT_SETS 4

/* Per-step totals over the timed iterations (--profile). */
typedef struct step_prof {
  double *ms;   /* total per step */
  int n_steps;
  size_t runs;  /* iterations seen by step 0 */
} step_prof;

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: nnroute bench ENGINE|MODEL [--route ROUTE] [--shape NAME=DIMS]...\n"
          "                     [--threads N] [--warmup-ms MS] [--duration-ms MS]\n"
          "                     [--min-iters N] [--seed N] [--json]\n"
          "                     [--profile [--top N]] [--calibration SPEC]\n"
          "                     [--device cpu|cuda] [--flush-l2] [--inputs-dir DIR]\n"
          "                     [--verify KEYFILE]\n\n"
          "Times inferences of ENGINE (a file from `nnroute build`) or of MODEL (.onnx,\n"
          "built first along ROUTE for N threads) on seeded random inputs: warm-up for\n"
          "MS ms (default 200), then measure for at least --duration-ms (default 1000)\n"
          "and --min-iters iterations (default 10). N defaults to the engine's threads.\n"
          "--json prints {median_ms, mean_ms, min_ms, max_ms, p90_ms, p99_ms, stdev_ms,\n"
          "ci95_median_ms: [lo, hi], iterations, threads}.\n"
          "--profile times every step during the timed loop and prints the N slowest\n"
          "(default 25; 0: all) with their node, op, tactic, output shape, mean ms per\n"
          "run and share, then the totals per op and tactic (--json: a \"profile\" array\n"
          "of every step). --calibration (see `nnroute build --help`) is needed when\n"
          "ROUTE puts nodes in int8. Input dimensions MODEL leaves free come from\n"
          "--shape, else from the first input set of a --calibration directory.\n"
          "--device cuda builds MODEL for the GPU; a GPU engine reports the device time\n"
          "per inference (CUDA events around the steps: gpu_*_ms in --json) beside the\n"
          "host-visible latency, and rotates 4 input sets; --flush-l2 also evicts the\n"
          "GPU's L2 before every timed run (not timed).\n"
          "--inputs-dir times on DIR/<input>.npy instead of random data (token ids and\n"
          "masks that random values would put out of range); a MODEL's input shapes\n"
          "come from those files, an ENGINE's must match them. --verify refuses an\n"
          "ENGINE not signed with KEYFILE (`nnroute build --sign`).\n");
}

static int parse_args(int argc, char **argv, bench_args *a) {
  *a = (bench_args){.warmup_ms = 200, .duration_ms = 1000, .min_iters = 10, .top = 25};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    bool v = i + 1 < argc;
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      bench_usage(stdout);
      exit(0);
    } else if (!strcmp(arg, "--calibration") && v) {
      a->calibration = argv[++i];
    } else if (!strcmp(arg, "--inputs-dir") && v) {
      a->inputs_dir = argv[++i];
    } else if (!strcmp(arg, "--device") && v) {
      if (!nr_device_parse(argv[++i], &a->device)) {
        fprintf(stderr, "nnroute bench: --device '%s': cpu or cuda\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(arg, "--verify") && v) {
      a->verify = argv[++i];
    } else if (!strcmp(arg, "--flush-l2")) {
      a->flush_l2 = true;
    } else if (!strcmp(arg, "--route") && v) {
      a->route = argv[++i];
    } else if (!strcmp(arg, "--shape") && v && a->n_shapes < MAX_SHAPES) {
      a->shapes[a->n_shapes++] = argv[++i];
    } else if (!strcmp(arg, "--threads") && v) {
      a->threads = atoi(argv[++i]);
    } else if (!strcmp(arg, "--warmup-ms") && v) {
      a->warmup_ms = atof(argv[++i]);
    } else if (!strcmp(arg, "--duration-ms") && v) {
      a->duration_ms = atof(argv[++i]);
    } else if (!strcmp(arg, "--min-iters") && v) {
      a->min_iters = atoi(argv[++i]);
    } else if (!strcmp(arg, "--seed") && v) {
      a->seed = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(arg, "--json")) {
      a->json = true;
    } else if (!strcmp(arg, "--profile")) {
      a->profile = true;
    } else if (!strcmp(arg, "--top") && v) {
      a->top = atoi(argv[++i]);
    } else if (arg[0] != '-' && !a->path) {
      a->path = arg;
    } else {
      fprintf(stderr, "nnroute bench: unexpected argument '%s'\n", arg);
      bench_usage(stderr);
      return 2;
    }
  }
  if (!a->path) {
    bench_usage(stderr);
    return 2;
  }
  if (a->min_iters < 1)
    a->min_iters = 1;
  return 0;
}

static bool is_model(const char *path) {
  size_t n = strlen(path);
  return n >= 5 && !strcmp(path + n - 5, ".onnx");
}

/* Builds (MODEL) or loads (ENGINE) the engine; returns an exit code. */
static int get_engine(const bench_args *a, nr_engine **e, nr_error *err) {
  if (!is_model(a->path)) {
    if (a->route || a->n_shapes)
      fprintf(stderr, "nnroute bench: --route and --shape apply to models; '%s' is used "
                      "as built\n", a->path);
    return nr_cli_load_engine(a->path, false, a->verify, e, err) ? nr_cli_fail(err) : 0;
  }
  if (a->verify) {
    fprintf(stderr, "nnroute bench: --verify checks engine files; '%s' is a model\n", a->path);
    return 2;
  }
  nr_model *m = NULL;
  if (nr_model_load(a->path, NULL, &m, err))
    return nr_cli_fail(err);
  int rc = 0;
  for (int s = 0; !rc && s < a->n_shapes; s++)
    rc = nr_cli_apply_shape(m, a->shapes[s], err);
  for (int i = 0; !rc && a->inputs_dir && i < nr_model_input_count(m); i++) {
    nr_io_info info;
    nr_value v = {0};
    nr_model_input_info(m, i, &info);
    if (nr_cli_read_dir_tensor(a->inputs_dir, info.name, &v, err) ||
        nr_model_set_input_shape(m, info.name, v.rank, v.dims, err))
      rc = nr_cli_fail(err);
    nr_value_free(&v);
  }
  nr_calibration *calib = NULL;
  if (!rc && nr_cli_calibration(m, a->calibration, &calib, err))
    rc = nr_cli_fail(err);
  nr_build_options o = {sizeof o, a->route, a->threads, a->device, calib};
  if (!rc && nr_engine_build(m, &o, e, err))
    rc = nr_cli_fail(err);
  nr_calibration_destroy(calib);
  nr_model_destroy(m);
  return rc;
}

static void free_buffers(nr_buffer *b, int n) {
  for (int i = 0; b && i < n; i++)
    nr_buffer_free(&b[i]);
  free(b);
}

/* Input i from --inputs-dir: its file, which must have the engine's dtype and dims. */
static nr_status dir_input(const char *dir, const nr_io_info *info, nr_value *v,
                           nr_error *err) {
  nr_status st = nr_cli_read_dir_tensor(dir, info->name, v, err);
  if (st)
    return st;
  nr_dtype dt = v->dtype;
  int rank = v->rank;
  bool same = dt == info->dtype && rank == info->rank;
  for (int d = 0; same && d < rank; d++)
    same = v->dims[d] == info->dims[d];
  if (same)
    return NR_OK;
  nr_value_free(v);
  return nr_errorf(err, NR_ERR_SHAPE,
                   "--inputs-dir %s: input '%s' is %s of rank %d there; the engine takes %s "
                   "of rank %d with other dims",
                   dir, info->name, nr_dtype_name(dt), rank,
                   nr_dtype_name(info->dtype), info->rank);
}

/* Every engine input: from --inputs-dir, else seeded random. */
static nr_status make_inputs(const nr_engine *e, const char *dir, uint64_t seed,
                             nr_buffer **out, nr_error *err) {
  int n = nr_engine_input_count(e);
  nr_buffer *in = calloc((size_t)n + 1, sizeof *in);
  if (!in)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  uint64_t state = seed;
  for (int i = 0; i < n; i++) {
    nr_io_info info;
    nr_value v = {0};
    nr_status st = nr_engine_input_info(e, i, &info);
    if (!st && dir)
      st = dir_input(dir, &info, &v, err);
    else if (!st && !(st = nr_value_alloc(&v, info.dtype, info.rank, info.dims, err)))
      nr_cli_random_fill(&v, &state);
    if (st) {
      free_buffers(in, n);
      return st;
    }
    in[i] = (nr_buffer){v.dtype, v.rank, {0}, v.data};
    memcpy(in[i].dims, v.dims, sizeof in[i].dims);
  }
  *out = in;
  return NR_OK;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void prof_hook(void *user, int step, double ms) {
  step_prof *p = user;
  p->ms[step] += ms;
  p->runs += step == 0;
}

/* Warm-up, then the timed loop; *times (malloc'ed) receives one entry per iteration.
 * With prof, the timed loop also reports every step to it. */
static nr_status measure(nr_context *ctx, const bench_args *a, const nr_buffer *in,
                         int n_sets, int n_in, nr_buffer *out, step_prof *prof,
                         dev_timing *dt, double **times, size_t *n, nr_error *err) {
  nr_status st = NR_OK;
  double start = now_ms();
  do /* at least once: the first run allocates the output buffers */
    st = nr_context_run(ctx, in, out, err);
  while (!st && now_ms() - start < a->warmup_ms);
  if (prof)
    nr_context_time_steps(ctx, prof_hook, prof);
  size_t cap = 1024, len = 0;
  double *t = malloc(cap * sizeof *t);
  dt->ms = dt->be ? malloc(cap * sizeof *dt->ms) : NULL;
  if (!t || (dt->be && !dt->ms))
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  start = now_ms();
  while (!st && (now_ms() - start < a->duration_ms || len < (size_t)a->min_iters)) {
    if (len == cap) {
      double *g = realloc(t, 2 * cap * sizeof *t);
      double *gd = g && dt->be ? realloc(dt->ms, 2 * cap * sizeof *dt->ms) : NULL;
      if (g)
        t = g;
      if (gd)
        dt->ms = gd;
      if (!g || (dt->be && !gd)) {
        st = nr_errorf(err, NR_ERR_NOMEM, "out of memory after %zu iterations", len);
        break;
      }
      cap *= 2;
    }
    const nr_buffer *cur = in + (len % (size_t)n_sets) * (size_t)n_in;
    if (dt->be && a->flush_l2)
      nr_context_flush_caches(ctx);
    double t0 = now_ms();
    st = nr_context_run(ctx, cur, out, err);
    t[len] = now_ms() - t0;
    if (dt->be)
      dt->ms[len] = nr_context_device_ms(ctx);
    len++;
  }
  nr_context_time_steps(ctx, NULL, NULL);
  *times = t;
  *n = len;
  return st;
}

/* ---- --profile ------------------------------------------------------------------- */

typedef struct step_row {
  int step;
  double ms; /* mean per run */
} step_row;

static int by_ms_desc(const void *x, const void *y) {
  const step_row *a = x, *b = y;
  return a->ms < b->ms ? 1 : a->ms > b->ms ? -1 : a->step - b->step;
}

/* Rows of every step, slowest first; *total receives the sum. NULL when out of memory. */
static step_row *prof_rows(const step_prof *p, double *total) {
  step_row *r = malloc(sizeof *r * ((size_t)p->n_steps + 1));
  *total = 0;
  for (int k = 0; r && k < p->n_steps; k++) {
    r[k] = (step_row){k, p->runs ? p->ms[k] / (double)p->runs : 0};
    *total += r[k].ms;
  }
  if (r)
    qsort(r, (size_t)p->n_steps, sizeof *r, by_ms_desc);
  return r;
}

static nr_step_detail step_at(const nr_engine *e, int k) {
  nr_step_detail st = {sizeof st};
  nr_engine_step(e, k, &st);
  return st;
}

static const char *step_op(const nr_step_detail *st) {
  return st->node >= 0 ? st->op_type : "reorder";
}

static const char *step_name(const nr_step_detail *st) {
  return st->node >= 0 ? st->node_name : "(reorder)";
}

static const char *step_shape(const nr_engine *e, int k, char *buf, size_t cap) {
  nr_slot_info s = {sizeof s};
  if (nr_engine_step_output(e, k, 0, &s))
    return "-";
  nr_value v = {s.dtype, s.rank, {0}, NULL, false};
  memcpy(v.dims, s.dims, sizeof v.dims);
  return nr_value_describe(&v, buf, cap);
}

/* Sums per (op, tactic) pair, printed slowest first. */
static void print_by_op(const nr_engine *e, const step_row *r, int n, double total) {
  step_row *g = calloc((size_t)n + 1, sizeof *g); /* .step: representative step */
  int *count = calloc((size_t)n + 1, sizeof *count);
  int ng = 0;
  for (int i = 0; g && count && i < n; i++) {
    nr_step_detail st = step_at(e, r[i].step);
    int j = 0;
    for (; j < ng; j++) {
      nr_step_detail gj = step_at(e, g[j].step);
      if (!strcmp(step_op(&gj), step_op(&st)) && !strcmp(gj.tactic, st.tactic))
        break;
    }
    if (j == ng)
      g[ng++] = (step_row){r[i].step, 0};
    g[j].ms += r[i].ms;
    count[j]++;
  }
  printf("\n  %-22s %-34s %5s %9s %6s\n", "op", "tactic", "steps", "ms/run", "%");
  for (int j = 0; j < ng; j++) { /* g is in order of each group's slowest step */
    int best = j;
    for (int k = j + 1; k < ng; k++)
      if (g[k].ms > g[best].ms)
        best = k;
    step_row tr = g[j];
    g[j] = g[best], g[best] = tr;
    int tc = count[j];
    count[j] = count[best], count[best] = tc;
    nr_step_detail st = step_at(e, g[j].step);
    printf("  %-22s %-34s %5d %9.4f %5.1f%%\n", step_op(&st), st.tactic, count[j],
           g[j].ms, total > 0 ? 100 * g[j].ms / total : 0);
  }
  free(g);
  free(count);
}

static void print_profile(const bench_args *a, const nr_engine *e, const step_prof *p) {
  double total;
  step_row *r = prof_rows(p, &total);
  if (!r)
    return;
  int n = a->top > 0 && a->top < p->n_steps ? a->top : p->n_steps;
  char shape[128];
  printf("\nprofile: %d steps, %zu runs, %.3f ms per run in steps (mean)\n", p->n_steps,
         p->runs, total);
  printf("  %4s  %-30s %-18s %-30s %-20s %9s %6s\n", "step", "node", "op", "tactic",
         "output", "ms/run", "%");
  for (int i = 0; i < n; i++) {
    nr_step_detail st = step_at(e, r[i].step);
    printf("  %4d  %-30.30s %-18.18s %-30.30s %-20.20s %9.4f %5.1f%%\n", r[i].step,
           step_name(&st), step_op(&st), st.tactic,
           step_shape(e, r[i].step, shape, sizeof shape), r[i].ms,
           total > 0 ? 100 * r[i].ms / total : 0);
  }
  print_by_op(e, r, p->n_steps, total);
  free(r);
}

static cJSON *profile_json(const nr_engine *e, const step_prof *p) {
  double total;
  step_row *r = prof_rows(p, &total);
  cJSON *arr = cJSON_CreateArray();
  char shape[128];
  for (int i = 0; r && arr && i < p->n_steps; i++) {
    nr_step_detail st = step_at(e, r[i].step);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", r[i].step);
    cJSON_AddStringToObject(o, "node", step_name(&st));
    cJSON_AddStringToObject(o, "op", step_op(&st));
    cJSON_AddStringToObject(o, "tactic", st.tactic);
    cJSON_AddStringToObject(o, "output", step_shape(e, r[i].step, shape, sizeof shape));
    cJSON_AddNumberToObject(o, "ms", r[i].ms);
    cJSON_AddNumberToObject(o, "pct", total > 0 ? 100 * r[i].ms / total : 0);
    cJSON_AddItemToArray(arr, o);
  }
  free(r);
  return arr;
}

static void print_json(const nr_stats *s, int threads, const nr_engine *e,
                       const step_prof *prof, const dev_timing *dt) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "median_ms", s->median);
  cJSON_AddNumberToObject(o, "mean_ms", s->mean);
  cJSON_AddNumberToObject(o, "min_ms", s->min);
  cJSON_AddNumberToObject(o, "max_ms", s->max);
  cJSON_AddNumberToObject(o, "p90_ms", s->p90);
  cJSON_AddNumberToObject(o, "p99_ms", s->p99);
  cJSON_AddNumberToObject(o, "stdev_ms", s->stdev);
  double ci[2] = {s->ci95_lo, s->ci95_hi};
  cJSON_AddItemToObject(o, "ci95_median_ms", cJSON_CreateDoubleArray(ci, 2));
  cJSON_AddNumberToObject(o, "iterations", (double)s->n);
  cJSON_AddNumberToObject(o, "threads", threads);
  if (dt->be) {
    cJSON_AddStringToObject(o, "device", dt->be);
    cJSON_AddNumberToObject(o, "gpu_median_ms", dt->stats.median);
    cJSON_AddNumberToObject(o, "gpu_mean_ms", dt->stats.mean);
    cJSON_AddNumberToObject(o, "gpu_min_ms", dt->stats.min);
    cJSON_AddNumberToObject(o, "gpu_p90_ms", dt->stats.p90);
  }
  if (prof)
    cJSON_AddItemToObject(o, "profile", profile_json(e, prof));
  char *text = cJSON_PrintUnformatted(o);
  if (text)
    printf("%s\n", text);
  free(text);
  cJSON_Delete(o);
}

static void print_table(const bench_args *a, const nr_engine *e, const nr_stats *s,
                        int threads, const dev_timing *dt) {
  const char *route = nr_engine_route(e);
  printf("engine:     %s (route: %s), %d threads\n", a->path, *route ? route : "default",
         threads);
  printf("iterations: %zu after %.0f ms of warm-up\n\n", s->n, a->warmup_ms);
  printf("  %10s %10s %10s %10s %10s %10s %10s\n", "median", "mean", "min", "max", "p90",
         "p99", "stdev");
  printf("  %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f   ms%s\n", s->median, s->mean,
         s->min, s->max, s->p90, s->p99, s->stdev, dt->be ? " host-visible" : "");
  const nr_stats *g = &dt->stats;
  nr_environment env = {sizeof env};
  nr_engine_environment(e, &env);
  if (dt->be && g->median >= 0) /* --profile times each step instead */
    printf("  %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f   ms on the %s (%s)\n",
           g->median, g->mean, g->min, g->max, g->p90, g->p99, g->stdev, dt->be, env.gpu);
  printf("\nmedian 95%% CI: [%.3f, %.3f] ms\n", s->ci95_lo, s->ci95_hi);
}

int nr_cli_bench(int argc, char **argv) {
  bench_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc)
    return rc;
  nr_error err = {0};
  nr_engine *e = NULL;
  nr_context *ctx = NULL;
  nr_buffer *in = NULL, *out = NULL;
  double *times = NULL;
  size_t n = 0;
  step_prof prof = {0};
  dev_timing dt = {0};
  if ((rc = get_engine(&a, &e, &err)))
    return rc;
  nr_engine_summary sum = {sizeof sum};
  nr_status st = nr_engine_summarize(e, &sum, &err);
  prof.n_steps = sum.n_steps;
  int n_out = nr_engine_output_count(e), n_in = nr_engine_input_count(e);
  int n_sets = sum.device != NR_DEVICE_CPU ? DEVICE_INPUT_SETS : 1;
  if (!st)
    st = nr_context_create(e, a.threads, &ctx, &err);
  if (!st && sum.device != NR_DEVICE_CPU)
    dt.be = nr_context_device(ctx);
  if (!st && !(in = calloc((size_t)(n_sets * n_in) + 1, sizeof *in)))
    st = nr_errorf(&err, NR_ERR_NOMEM, "out of memory");
  for (int k = 0; !st && k < n_sets; k++) {
    nr_buffer *set = NULL;
    st = make_inputs(e, a.inputs_dir, a.seed + (uint64_t)k, &set, &err);
    if (!st)
      memcpy(in + k * n_in, set, sizeof *in * (size_t)n_in);
    free(set); /* the data now belongs to in[] */
  }
  if (!st && !(out = calloc((size_t)n_out + 1, sizeof *out)))
    st = nr_errorf(&err, NR_ERR_NOMEM, "out of memory");
  if (!st && a.profile && !(prof.ms = calloc((size_t)prof.n_steps + 1, sizeof *prof.ms)))
    st = nr_errorf(&err, NR_ERR_NOMEM, "out of memory");
  if (!st)
    st = measure(ctx, &a, in, n_sets, n_in, out, a.profile ? &prof : NULL, &dt, &times, &n,
                 &err);
  nr_stats s;
  if (!st && (nr_stats_compute(times, n, a.seed, &s) ||
              (dt.be && nr_stats_compute(dt.ms, n, a.seed, &dt.stats))))
    st = nr_errorf(&err, NR_ERR_NOMEM, "out of memory computing statistics");
  if (st) {
    rc = nr_cli_fail(&err);
  } else {
    int threads = a.threads > 0 ? a.threads : nr_threads_or_online(sum.threads);
    if (a.json) {
      print_json(&s, threads, e, a.profile ? &prof : NULL, &dt);
    } else {
      print_table(&a, e, &s, threads, &dt);
      if (a.profile) {
        print_profile(&a, e, &prof);
        nr_cli_warn_reference(e, prof.ms);
      }
    }
  }
  free(prof.ms);
  free(times);
  free(dt.ms);
  free_buffers(in, n_sets * n_in);
  free_buffers(out, n_out);
  nr_context_destroy(ctx);
  nr_engine_destroy(e);
  return rc;
}
