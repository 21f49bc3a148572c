/* cli_tune.c - `nnroute tune` and `nnroute report`: argument parsing only; the
 * session lives in src/tune/. Exit codes: 0 done (or interrupted cleanly, with the
 * best engine so far written), 1 error, 2 bad arguments, 130 interrupted. */
#include "cli/cli.h"
#include "tune/decide.h"
#include "tune/tune.h"
#include "util/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SHAPES 64

static void tune_usage(FILE *f) {
  fprintf(f,
    "usage: nnroute tune MODEL [--routes EXPR | --routes-file FILE]\n"
    "         [--search fast|full|mixed|random|evolve|greedy]\n"
    "         [--budget-builds N]\n"
    "         [--budget-time SECONDS] [--seed N] [--reference DIR]... [--holdout DIR]...\n"
    "         [--metric l0|l1|l2|linf|rel_l2|cos|top1] [--tolerance EPS]\n"
    "         [--atol A --rtol R] [--output-tolerance NAME=EPS]... [--min-margin F]\n"
    "         [--db FILE]\n"
    "         [--continue] [--priors] [--threads N] [-o ENGINE] [--report FILE.json]\n"
    "         [--dry-run] [--write-unchecked] [--shape NAME=DIMS]...\n"
    "         [--input-range [NAME=]LO:HI]...\n"
    "         [--pairs N] [--holdout-pairs N] [--candidate-timeout S] [--mem-limit MB]\n"
    "         [--finalists N] [--confirm-rounds N] [--screen-ms MS]\n"
    "         [--calibration DIR|FILE|random:N] [--device cpu|cuda]\n\n"
    "Builds candidate engines along routes of MODEL, each in its own process, drops\n"
    "those that fail, crash, hang, run out of memory, produce NaN/Inf or leave the\n"
    "tolerance, measures the rest, confirms the finalists against the default route\n"
    "in interleaved rounds and writes the fastest significantly faster route's engine\n"
    "(else the default route's). Every route that can be shipped is checked on the\n"
    "holdout pairs: when the default route fails them and nothing faster passed,\n"
    "tune exits non-zero and writes no engine unless --write-unchecked.\n"
    "--min-margin F (0 <= F < 1, default 0) keeps a fraction of the tolerance in\n"
    "reserve: a route is feasible only when every loss is <= (1 - F) x its bound,\n"
    "on the reference pairs and on the holdout pairs alike. Holdout pairs must not\n"
    "share inputs with the reference pairs, nor calibration data with the holdout\n"
    "pairs. The report states each margin and, for top1 and l0, a 95%% upper\n"
    "confidence bound on the disagreement rate from the holdout pairs. Defaults:\n"
    "the default space (every knob that applies, per-node knobs as one dimension\n"
    "each; at --threads 1 without the knobs that act only on 2+ threads), --search\n"
    "mixed, --budget-time 300, no --budget-builds limit but random and evolve stop\n"
    "after 256 builds (routes that build a known candidate's plan, their other values\n"
    "ignored by the build, are neither built nor counted),\n"
    "--metric rel_l2 --tolerance 1e-3, 4 generated reference pairs and 2 holdout pairs,\n"
    "--db nnroute-tune.db. Ctrl-C stops cleanly, writing the best confirmed and\n"
    "holdout-checked engine so far (else the default route's); --continue resumes.\n"
    "int8 routes are calibrated on the reference inputs unless --calibration gives\n"
    "input sets (or a table from `nnroute build --save-calibration`); the holdout\n"
    "inputs are never used. --device cuda tunes GPU engines: the knob space and every\n"
    "candidate are the CUDA build's.\n"
    "A --reference DIR holds input_K.pb files (K: the input's position, from 0) with\n"
    "optional output_K.pb, or test_data_set_N/ folders of them (one pair each), or\n"
    "one <name>.npy per input (and per output). Input dims MODEL leaves free come\n"
    "from --shape, else from the first pair of the first --reference (else --holdout,\n"
    "else --calibration) folder; every pair must then have those shapes.\n");
}

static void report_usage(FILE *f) {
  fprintf(f, "usage: nnroute report DB|REPORT.json [--session N] [--metric M]\n"
             "                      [--tolerance EPS] [--min-margin F]\n\n"
             "Chooses again from a tuning session's recorded losses and screening times,\n"
             "at another metric, tolerance or margin (default: the session's), without\n"
             "building anything; prints the Pareto frontier with each candidate's margin\n"
             "on the reference and the holdout pairs, and the choice with its accuracy\n"
             "statement (for top1 and l0 a 95%% upper confidence bound on the\n"
             "disagreement rate on the holdout pairs).\n");
}

typedef struct tune_args {
  nr_tune_options o;
  const char *model, *routes_file, *shapes[MAX_SHAPES];
  int n_shapes;
  char *routes_text;
} tune_args;

static bool parse_range(const char *spec, nr_input_range *r) {
  const char *eq = strrchr(spec, '='), *text = eq ? eq + 1 : spec;
  char *end;
  r->name = NULL;
  if (eq) {
    char *name = strndup(spec, (size_t)(eq - spec));
    if (!name)
      return false;
    r->name = name; /* lives until exit */
  }
  r->lo = strtod(text, &end);
  if (*end != ':')
    return false;
  r->hi = strtod(end + 1, &end);
  return *end == '\0' && r->lo < r->hi;
}

static bool parse_override(const char *spec, nr_tolerance *t) {
  const char *v;
  char *name = nr_cli_split_assign(spec, &v);
  char *end;
  double eps = name ? strtod(v, &end) : 0;
  if (!name || *end || t->n_overrides >= NR_TOL_MAX_OVERRIDES || eps < 0) {
    free(name);
    return false;
  }
  t->override_name[t->n_overrides] = name; /* lives until exit */
  t->override_eps[t->n_overrides++] = eps;
  return true;
}

/* --min-margin F: a fraction of the tolerance, 0 <= F < 1. */
static bool parse_margin(const char *v, double *out) {
  char *end;
  double f = strtod(v, &end);
  if (end == v || *end || !(f >= 0 && f < 1))
    return false;
  *out = f;
  return true;
}

static int bad_margin(const char *value) {
  fprintf(stderr, "nnroute: bad value for --min-margin: '%s' (a fraction of the tolerance "
          "to keep in reserve, 0 <= F < 1: 0.2 accepts losses up to 0.8 x the "
          "tolerance)\n", value);
  return 2;
}

static int bad(const char *what, const char *value) {
  fprintf(stderr, "nnroute tune: bad value for %s: '%s'\n", what, value);
  return 2;
}

/* One option with a value; returns 0, 2 (bad), or -1 when it is not one of these. */
static int parse_valued(tune_args *a, const char *opt, const char *v) {
  nr_tune_options *o = &a->o;
  char *end = NULL;
  if (!strcmp(opt, "--routes")) o->routes = v;
  else if (!strcmp(opt, "--routes-file")) a->routes_file = v;
  else if (!strcmp(opt, "--search")) { if (!nr_search_parse(v, &o->search)) return bad(opt, v); }
  else if (!strcmp(opt, "--budget-builds")) o->budget_builds = (int)strtol(v, &end, 10);
  else if (!strcmp(opt, "--budget-time")) o->budget_time_s = strtod(v, &end);
  else if (!strcmp(opt, "--seed")) o->seed = strtoull(v, &end, 10);
  else if (!strcmp(opt, "--metric")) { if (!nr_metric_parse(v, &o->tol.metric)) return bad(opt, v); }
  else if (!strcmp(opt, "--tolerance")) o->tol.eps = strtod(v, &end);
  else if (!strcmp(opt, "--atol")) o->tol.atol = strtod(v, &end);
  else if (!strcmp(opt, "--rtol")) o->tol.rtol = strtod(v, &end);
  else if (!strcmp(opt, "--output-tolerance")) { if (!parse_override(v, &o->tol)) return bad(opt, v); }
  else if (!strcmp(opt, "--min-margin")) { if (!parse_margin(v, &o->tol.min_margin)) return bad_margin(v); }
  else if (!strcmp(opt, "--db")) o->db_path = v;
  else if (!strcmp(opt, "--calibration")) o->calibration = v;
  else if (!strcmp(opt, "--threads")) o->threads = (int)strtol(v, &end, 10);
  else if (!strcmp(opt, "--device")) { if (!nr_device_parse(v, &o->device)) return bad(opt, v); }
  else if (!strcmp(opt, "-o")) o->engine_out = v;
  else if (!strcmp(opt, "--report")) o->report_path = v;
  else if (!strcmp(opt, "--pairs")) o->n_generated = (int)strtol(v, &end, 10);
  else if (!strcmp(opt, "--holdout-pairs")) o->n_holdout_generated = (int)strtol(v, &end, 10);
  else if (!strcmp(opt, "--candidate-timeout")) o->candidate_timeout_s = strtod(v, &end);
  else if (!strcmp(opt, "--mem-limit")) o->mem_limit = strtoull(v, &end, 10) << 20;
  else if (!strcmp(opt, "--finalists")) o->finalists = (int)strtol(v, &end, 10);
  else if (!strcmp(opt, "--confirm-rounds")) o->confirm_rounds = (int)strtol(v, &end, 10);
  else if (!strcmp(opt, "--screen-ms")) o->screen_ms = strtod(v, &end);
  else if (!strcmp(opt, "--reference") && o->n_reference_dirs < NR_TUNE_MAX_DIRS)
    o->reference_dirs[o->n_reference_dirs++] = v;
  else if (!strcmp(opt, "--holdout") && o->n_holdout_dirs < NR_TUNE_MAX_DIRS)
    o->holdout_dirs[o->n_holdout_dirs++] = v;
  else if (!strcmp(opt, "--input-range") && o->n_ranges < NR_TUNE_MAX_DIRS) {
    if (!parse_range(v, &o->ranges[o->n_ranges++])) return bad(opt, v);
  } else if (!strcmp(opt, "--shape") && a->n_shapes < MAX_SHAPES)
    a->shapes[a->n_shapes++] = v;
  else
    return -1;
  return end && (*end || end == v) ? bad(opt, v) : 0;
}

static int parse_tune(int argc, char **argv, tune_args *a) {
  nr_tune_options *o = &a->o;
  *o = (nr_tune_options){.search = NR_SEARCH_MIXED, .budget_time_s = 300, .seed = 1,
                         .tol = {.metric = NR_METRIC_REL_L2, .eps = 1e-3, .atol = 1e-5,
                                 .rtol = 1e-3},
                         .db_path = "nnroute-tune.db", .finalists = 3,
                         .confirm_rounds = 9, .screen_ms = 40};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
      tune_usage(stdout);
      return -1;
    }
    if (!strcmp(arg, "--continue")) o->resume = true;
    else if (!strcmp(arg, "--dry-run")) o->dry_run = true;
    else if (!strcmp(arg, "--priors")) o->priors = true;
    else if (!strcmp(arg, "--write-unchecked")) o->write_unchecked = true;
    else if (arg[0] != '-' && !a->model) a->model = arg;
    else if (i + 1 < argc) {
      int rc = parse_valued(a, arg, argv[i + 1]);
      if (rc > 0)
        return rc;
      if (rc < 0) {
        fprintf(stderr, "nnroute tune: unknown option '%s'\n\n", arg);
        tune_usage(stderr);
        return 2;
      }
      i++;
    } else {
      fprintf(stderr, "nnroute tune: option '%s' needs a value (or is unknown)\n", arg);
      return 2;
    }
  }
  if (!a->model || (o->routes && a->routes_file) || o->tol.eps < 0 || o->threads < 0) {
    tune_usage(stderr);
    return 2;
  }
  /* A noisy machine doubles the rounds, and the decision takes at most
   * NR_DECIDE_MAX_ROUNDS. */
  if (o->confirm_rounds < 1 || o->confirm_rounds > NR_DECIDE_MAX_ROUNDS / 2) {
    fprintf(stderr, "nnroute tune: --confirm-rounds must be 1 to %d (got %d)\n",
            NR_DECIDE_MAX_ROUNDS / 2, o->confirm_rounds);
    return 2;
  }
  return 0;
}

/* --routes-file: one expression, possibly spread over lines; '#' starts a comment. */
static int read_routes_file(tune_args *a) {
  FILE *f = fopen(a->routes_file, "r");
  if (!f) {
    fprintf(stderr, "nnroute tune: cannot read %s\n", a->routes_file);
    return 1;
  }
  size_t cap = 4096, used = 0;
  a->routes_text = malloc(cap);
  char line[4096];
  while (a->routes_text && fgets(line, sizeof line, f)) {
    char *hash = strchr(line, '#');
    if (hash)
      *hash = '\0';
    line[strcspn(line, "\r\n")] = ' ';
    size_t n = strlen(line);
    if (used + n + 2 > cap) {
      char *t = realloc(a->routes_text, cap = 2 * (used + n + 2));
      if (!t) {
        free(a->routes_text);
        a->routes_text = NULL;
        break;
      }
      a->routes_text = t;
    }
    memcpy(a->routes_text + used, line, n);
    used += n;
    a->routes_text[used++] = ' ';
  }
  fclose(f);
  if (!a->routes_text)
    return 1;
  a->routes_text[used] = '\0';
  a->o.routes = a->routes_text;
  return 0;
}

static char *join_argv(int argc, char **argv) {
  size_t n = 16;
  for (int i = 0; i < argc; i++)
    n += strlen(argv[i]) + 1;
  char *s = malloc(n);
  if (!s)
    return NULL;
  strcpy(s, "nnroute tune");
  for (int i = 1; i < argc; i++)
    strcat(strcat(s, " "), argv[i]);
  return s;
}

int nr_cli_tune(int argc, char **argv) {
  tune_args a = {0};
  int rc = parse_tune(argc, argv, &a);
  if (rc)
    return rc < 0 ? 0 : rc;
  if (a.routes_file && (rc = read_routes_file(&a)))
    return rc;
  nr_error err = {0};
  nr_model *m = NULL;
  if (nr_model_load(a.model, NULL, &m, &err)) {
    free(a.routes_text);
    return nr_cli_fail(&err);
  }
  for (int i = 0; i < a.n_shapes && !rc; i++)
    rc = nr_cli_apply_shape(m, a.shapes[i], &err);
  char *line = join_argv(argc, argv);
  a.o.model = m;
  a.o.model_path = a.model;
  a.o.argv = line;
  a.o.progress = isatty(STDERR_FILENO);
  bool interrupted = false;
  if (!rc && nr_tune_run(&a.o, &interrupted, &err))
    rc = nr_cli_fail(&err);
  else if (!rc && interrupted) {
    fprintf(stderr, "nnroute tune: interrupted; the database is consistent and "
            "`--continue` resumes the session\n");
    rc = 130;
  }
  free(line);
  free(a.routes_text);
  nr_model_destroy(m);
  return rc;
}

int nr_cli_report(int argc, char **argv) {
  const char *path = NULL, *metric = NULL;
  double tol = -1, margin = -1;
  long long session = 0;
  for (int i = 1; i < argc; i++) {
    bool v = i + 1 < argc;
    if (!strcmp(argv[i], "--metric") && v) metric = argv[++i];
    else if (!strcmp(argv[i], "--min-margin") && v) {
      if (!parse_margin(argv[++i], &margin))
        return bad_margin(argv[i]);
    }
    else if (!strcmp(argv[i], "--tolerance") && v) tol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--session") && v) session = atoll(argv[++i]);
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else {
      bool help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
      report_usage(help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  if (!path) {
    report_usage(stderr);
    return 2;
  }
  nr_error err = {0};
  if (nr_tune_rechoose(path, session, metric, tol, margin, &err))
    return nr_cli_fail(&err);
  return 0;
}
