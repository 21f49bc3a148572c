/* cli_check_routes.c - `nnroute check-routes`: the route property test. Draws seeded
 * random build routes for a model, builds and runs each, and checks every output
 * against the reference executor (or against expected .npy files) within the error
 * bound the route's knobs document. A failure prints the route, so it can be replayed
 * with `nnroute run MODEL --route '...'`.
 *
 * Bound: relative L2 error <= base + the bounds of the route's non-default accuracy
 * knobs (error_bound, or for precision@NODE the bound of its value; and once per knob
 * whose default is itself approximate, NR_KNOB_INFO_APPROX_DEFAULT), where base allows
 * floating-point reassociation (cli_routes.c adds them up). A route that fails to
 * build is a failure too: every route the knob space admits must compile. A route
 * with int8 nodes is built with a calibration of the inputs it is checked on (or
 * --calibration SPEC): the bound of int8 assumes ranges taken from such data.
 *
 * Key decision: the default base grows with the network's depth in products (Conv,
 * Gemm, MatMul and their fused forms): 1e-5 x sqrt(products / 8), at least 1e-5.
 * Each product's reassociation leaves an independent rounding difference, so they add
 * in quadrature: resnet50 (54 products) differs from the reference by 1.1-1.6e-5 on
 * every route, as ONNX Runtime itself does (1.7e-5), and gets 2.6e-5; an 8-product
 * model keeps 1e-5. --base-tolerance sets it outright. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "io/tensor_io.h"
#include "ir/dtype.h"
#include "util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct check_args {
  const char *model, *inputs_dir, *expect_dir, *calibration, *each;
  int count, threads;
  uint64_t seed;
  double base, change_p, precision_changes;
} check_args;

static void check_usage(FILE *f) {
  fprintf(f,
          "usage: nnroute check-routes MODEL [--count N (20)] [--seed S (1)]\n"
          "         [--inputs-dir DIR] [--expect-dir DIR] [--threads N]\n"
          "         [--change-probability P (0.3)] [--base-tolerance T]\n"
          "         [--calibration SPEC] [--precision-changes M (2)] [--each KNOB]\n\n"
          "Builds and runs the default route and N-1 seeded random routes of MODEL and\n"
          "compares each output with the reference executor (or DIR/<output>.npy),\n"
          "allowing relative L2 error T plus the error bounds of the route's\n"
          "accuracy knobs (precision@NODE: the bound of fp16, bf16 or int8). T\n"
          "defaults to 1e-5 x sqrt(K / 8), at least 1e-5, for a model with K\n"
          "Conv/Gemm/MatMul nodes (fp32 reassociation adds up with depth). Each knob\n"
          "leaves its default with probability P, precision@NODE with probability\n"
          "min(P, M / its instances), so a route has about M nodes in fp16, bf16 or\n"
          "int8. Routes with int8 nodes are calibrated on the checked inputs, or on\n"
          "--calibration SPEC (as `nnroute build`). --each KNOB replaces the random\n"
          "routes by every instance of KNOB at each of its other values, one change\n"
          "per route, and prints the largest error per value. Prints PASS/FAIL per\n"
          "route, then 'N passed, N failed'.\n");
}

static int parse(int argc, char **argv, check_args *a) {
  *a = (check_args){.count = 20,
                    .seed = 1,
                    .base = -1,
                    .change_p = 0.3,
                    .precision_changes = NR_CLI_PRECISION_CHANGES};
  for (int i = 1; i < argc; i++) {
    bool v = i + 1 < argc;
    if (!strcmp(argv[i], "--count") && v) a->count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && v) a->seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--inputs-dir") && v) a->inputs_dir = argv[++i];
    else if (!strcmp(argv[i], "--expect-dir") && v) a->expect_dir = argv[++i];
    else if (!strcmp(argv[i], "--threads") && v) a->threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--change-probability") && v) a->change_p = atof(argv[++i]);
    else if (!strcmp(argv[i], "--base-tolerance") && v) a->base = atof(argv[++i]);
    else if (!strcmp(argv[i], "--calibration") && v) a->calibration = argv[++i];
    else if (!strcmp(argv[i], "--each") && v) a->each = argv[++i];
    else if (!strcmp(argv[i], "--precision-changes") && v)
      a->precision_changes = atof(argv[++i]);
    else if (argv[i][0] != '-' && !a->model) a->model = argv[i];
    else {
      check_usage(argv[i][1] == 'h' ? stdout : stderr);
      return argv[i][1] == 'h' ? -1 : 2;
    }
  }
  if (!a->model || a->count < 1) {
    check_usage(stderr);
    return 2;
  }
  return 0;
}

/* Inputs from --inputs-dir or seeded random; fixes the model's input shapes. */
static nr_status make_inputs(nr_model *m, const check_args *a, nr_value *vals,
                             nr_buffer *ins, nr_error *err) {
  uint64_t state = a->seed;
  for (int i = 0; i < nr_model_input_count(m); i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    nr_status st;
    if (a->inputs_dir) {
      st = nr_cli_read_dir_tensor(a->inputs_dir, info.name, &vals[i], err);
      if (!st)
        st = nr_model_set_input_shape(m, info.name, vals[i].rank, vals[i].dims, err);
    } else {
      st = nr_value_alloc(&vals[i], info.dtype, info.rank, info.dims, err);
      if (!st)
        nr_cli_random_fill(&vals[i], &state);
    }
    if (st)
      return st;
    ins[i] = (nr_buffer){vals[i].dtype, vals[i].rank, {0}, vals[i].data};
    memcpy(ins[i].dims, vals[i].dims, sizeof ins[i].dims);
  }
  return NR_OK;
}

static nr_status make_expected(nr_model *m, const check_args *a, const nr_buffer *ins,
                               nr_buffer *want, nr_error *err) {
  if (!a->expect_dir)
    return nr_model_run(m, ins, want, err);
  for (int o = 0; o < nr_model_output_count(m); o++) {
    nr_io_info info;
    nr_model_output_info(m, o, &info);
    nr_value v = {0};
    nr_status st = nr_cli_read_dir_tensor(a->expect_dir, info.name, &v, err);
    if (st)
      return st;
    want[o] = (nr_buffer){v.dtype, v.rank, {0}, v.data};
    memcpy(want[o].dims, v.dims, sizeof want[o].dims);
  }
  return NR_OK;
}

/* Builds and runs one route; *worst gets the largest error over the outputs. */
static nr_status try_route(nr_model *m, const char *route, const check_args *a,
                           const nr_calibration *calib, const nr_buffer *ins,
                           const nr_buffer *want, double *worst, nr_error *err) {
  nr_engine *e = NULL;
  nr_context *ctx = NULL;
  int no = nr_model_output_count(m);
  nr_buffer *got = calloc((size_t)(no ? no : 1), sizeof *got);
  nr_build_options o = {sizeof o, route, a->threads, .calibration = calib};
  nr_status st = got ? nr_engine_build(m, &o, &e, err) : NR_ERR_NOMEM;
  if (!st)
    st = nr_context_create(e, a->threads, &ctx, err);
  if (!st)
    st = nr_context_run(ctx, ins, got, err);
  *worst = 0;
  for (int i = 0; !st && i < no; i++) {
    double d = nr_dtype_is_float(want[i].dtype) ? nr_cli_rel_l2(&got[i], &want[i])
               : (got[i].dtype == want[i].dtype &&
                  nr_buffer_count(&got[i]) == nr_buffer_count(&want[i]) &&
                  !memcmp(got[i].data, want[i].data,
                          nr_buffer_count(&want[i]) * nr_dtype_size(want[i].dtype)))
                   ? 0
                   : INFINITY;
    if (d > *worst || isnan(d))
      *worst = isnan(d) ? INFINITY : d;
  }
  for (int i = 0; got && i < no; i++)
    nr_buffer_free(&got[i]);
  free(got);
  nr_context_destroy(ctx);
  nr_engine_destroy(e);
  return st;
}

/* The default base tolerance (the file's header): 1e-5 x sqrt(products / 8). */
static double depth_base(const nr_graph *g, int *products) {
  static const char *const OPS[] = {"Conv",      "ConvTranspose", "Gemm",       "MatMul",
                                    "FusedConv", "FusedGemm",     "FusedMatMul"};
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (size_t k = 0; k < sizeof OPS / sizeof OPS[0]; k++)
      n += !strcmp(g->nodes[i].op_type, OPS[k]);
  *products = n;
  return n > 8 ? 1e-5 * sqrt(n / 8.0) : 1e-5;
}

/* What every route of one run is checked with. The calibration is collected the
 * first time a route puts a node in int8. */
typedef struct check_run {
  nr_model *m;
  const check_args *a;
  const nr_buffer *ins, *want;
  nr_knob_list knobs;
  nr_calibration *calib;
  double base;
  int passed, failed;
  /* --each: per definition value, the routes tried and the largest error seen */
  int each_n[NR_KNOB_LIST_MAX_VALUES];
  double each_worst[NR_KNOB_LIST_MAX_VALUES];
  const char *each_at[NR_KNOB_LIST_MAX_VALUES];
} check_run;

/* --calibration SPEC, or else the inputs the routes are checked on (one set). */
static nr_status need_calibration(check_run *r, nr_error *err) {
  if (r->calib)
    return NR_OK;
  if (r->a->calibration)
    return nr_cli_calibration(r->m, r->a->calibration, &r->calib, err);
  return nr_calibration_collect(r->m, 1, r->ins, &r->calib, err);
}

/* Builds, runs and judges one route; returns its error (or +inf when it failed). */
static double check_route(check_run *r, int i, const int *choice) {
  char *text = nr_knob_list_route_text(&r->knobs, choice);
  double bound = nr_cli_route_bound(&r->knobs, choice, r->base), worst = INFINITY;
  nr_error e = {0};
  nr_status st = nr_cli_route_needs_calibration(&r->knobs, choice)
                     ? need_calibration(r, &e)
                     : NR_OK;
  if (!st)
    st = try_route(r->m, text ? text : "", r->a, r->calib, r->ins, r->want, &worst, &e);
  bool ok = !st && worst <= bound;
  ok ? r->passed++ : r->failed++;
  if (st)
    printf("FAIL route %d: build or run failed: %s\n  --route '%s'\n", i, e.message, text);
  else
    printf("%s route %d: rel_l2 %.3g (bound %.3g), %d knobs changed%s%s%s\n",
           ok ? "PASS" : "FAIL", i, worst, bound, nr_knob_list_changes(&r->knobs, choice),
           ok ? "" : "\n  --route '", ok ? "" : text, ok ? "" : "'");
  fflush(stdout);
  free(text);
  return st ? INFINITY : worst;
}

static void random_routes(check_run *r, int *choice) {
  uint64_t state = r->a->seed * 0x2545f4914f6cdd1dull + 1;
  for (int i = 0; i < r->a->count; i++) {
    if (i)
      nr_cli_draw_route(&r->knobs, choice, r->a->change_p, r->a->precision_changes,
                        &state);
    check_route(r, i, choice);
  }
}

/* --each KNOB: the default route, then every instance of KNOB at every other value
 * it may take there, one change at a time. */
static void each_routes(check_run *r, int *choice) {
  int n = 0;
  check_route(r, n++, choice);
  for (int i = 0; i < r->knobs.n; i++) {
    const nr_knob_info *k = &r->knobs.knobs[i];
    if (strcmp(k->name, r->a->each))
      continue;
    for (int v = 0; v < k->n_values; v++) {
      int d = 0;
      while (d < k->n_def_values && strcmp(k->def_values[d], k->values[v]))
        d++;
      if (v == k->dflt || d == k->n_def_values)
        continue;
      choice[i] = v;
      double worst = check_route(r, n++, choice);
      choice[i] = k->dflt;
      if (++r->each_n[d] == 1 || !(worst <= r->each_worst[d])) {
        r->each_worst[d] = worst;
        r->each_at[d] = k->id;
      }
    }
  }
}

static void each_summary(const check_run *r) {
  for (int i = 0; i < r->knobs.n; i++) {
    const nr_knob_info *k = &r->knobs.knobs[i];
    if (strcmp(k->name, r->a->each))
      continue;
    for (int d = 0; d < k->n_def_values; d++)
      if (r->each_n[d])
        printf("%s=%s: %d routes, largest rel_l2 %.3g at %s (bound of one change %.3g)\n",
               k->name, k->def_values[d], r->each_n[d], r->each_worst[d], r->each_at[d],
               r->base + (k->def_bounds ? k->def_bounds[d] : k->error_bound));
    return; /* one summary per knob: the first instance has every definition value */
  }
  printf("%s: the model has no instance of this knob\n", r->a->each);
}

static int check_all(nr_model *m, const check_args *a, const nr_buffer *ins,
                     const nr_buffer *want) {
  nr_error err = {0};
  check_run r = {m, a, ins, want, .base = a->base};
  if (nr_knob_list_build(m, NULL, &r.knobs, &err))
    return nr_cli_fail(&err);
  int *choice = calloc((size_t)r.knobs.n + 1, sizeof *choice); /* the default route */
  nr_status st = choice ? nr_knob_list_parse_route(&r.knobs, "", choice, &err)
                        : nr_errorf(&err, NR_ERR_NOMEM, "out of memory");
  if (st) {
    free(choice);
    nr_knob_list_free(&r.knobs);
    return nr_cli_fail(&err);
  }
  if (r.base < 0) {
    int products = 0;
    r.base = depth_base(nr_model_graph(m), &products);
    printf(
        "base tolerance %.3g (rel_l2; %d Conv/Gemm/MatMul nodes; --base-tolerance "
        "sets it)\n",
        r.base, products);
  }
  if (a->each) {
    each_routes(&r, choice);
    each_summary(&r);
  } else {
    random_routes(&r, choice);
  }
  free(choice);
  nr_calibration_destroy(r.calib);
  nr_knob_list_free(&r.knobs);
  printf("%d passed, %d failed\n", r.passed, r.failed);
  return r.failed ? 1 : 0;
}

int nr_cli_check_routes(int argc, char **argv) {
  check_args a;
  int rc = parse(argc, argv, &a);
  if (rc)
    return rc < 0 ? 0 : rc;
  nr_error err = {0};
  nr_model *m = NULL;
  if (nr_model_load(a.model, NULL, &m, &err))
    return nr_cli_fail(&err);
  int ni = nr_model_input_count(m), no = nr_model_output_count(m);
  nr_value *vals = calloc((size_t)(ni ? ni : 1), sizeof *vals);
  nr_buffer *ins = calloc((size_t)(ni ? ni : 1), sizeof *ins);
  nr_buffer *want = calloc((size_t)(no ? no : 1), sizeof *want);
  if (!vals || !ins || !want)
    rc = 1;
  else if (make_inputs(m, &a, vals, ins, &err) || make_expected(m, &a, ins, want, &err))
    rc = nr_cli_fail(&err);
  else
    rc = check_all(m, &a, ins, want);
  for (int i = 0; vals && i < ni; i++)
    nr_value_free(&vals[i]);
  for (int o = 0; want && o < no; o++)
    nr_buffer_free(&want[o]);
  free(vals);
  free(ins);
  free(want);
  nr_model_destroy(m);
  return rc;
}
