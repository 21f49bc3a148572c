/* cli_check_routes.c - `nnroute check-routes`: the route property test. Draws seeded
 * random build routes for a model, builds and runs each, and checks every output
 * against the reference executor (or against expected .npy files) within the error
 * bound the route's knobs document. A failure prints the route, so it can be replayed
 * with `nnroute run MODEL --route '...'`.
 *
 * Bound: relative L2 error <= base + the sum of error_bound over the route's
 * non-default accuracy knobs (and once per knob whose default is itself approximate,
 * NR_KNOB_INFO_APPROX_DEFAULT), where base allows floating-point reassociation. A route
 * that fails to build is a failure too: every route the knob space admits must
 * compile.
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
  const char *model, *inputs_dir, *expect_dir;
  int count, threads;
  uint64_t seed;
  double base, change_p;
} check_args;

static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Each instance leaves its default with probability p, to a uniformly drawn value. */
static void draw_route(const nr_knob_list *l, int *choice, double p, uint64_t *state) {
  for (int i = 0; i < l->n; i++) {
    const nr_knob_info *k = &l->knobs[i];
    choice[i] = k->dflt;
    /* Reduced precision has no bound to check against; check-knobs and the tuner's
     * tolerance cover it. */
    if (k->flags & NR_KNOB_INFO_PRECISION)
      continue;
    if (k->n_values < 2 || (double)(next_u64(state) >> 11) * 0x1p-53 >= p)
      continue;
    int v = (int)(next_u64(state) % (uint64_t)(k->n_values - 1));
    choice[i] = v >= k->dflt ? v + 1 : v;
  }
}

/* base, plus error_bound for every accuracy-knob instance off its default, plus once
 * per knob whose default is itself approximate (NR_KNOB_INFO_APPROX_DEFAULT: Winograd
 * where it is faster) and that some instance leaves at that default. */
static double route_bound(const nr_knob_list *l, const int *choice, double base) {
  double b = base;
  const char *counted[64]; /* knob names, unique per knob */
  int n_counted = 0;
  for (int i = 0; i < l->n; i++) {
    const nr_knob_info *k = &l->knobs[i];
    if (!(k->flags & NR_KNOB_INFO_ACCURACY))
      continue;
    if (choice[i] != k->dflt) {
      b += k->error_bound;
      continue;
    }
    if (!(k->flags & NR_KNOB_INFO_APPROX_DEFAULT))
      continue;
    bool seen = false;
    for (int j = 0; j < n_counted && !seen; j++)
      seen = !strcmp(counted[j], k->name);
    if (!seen && n_counted < 64) {
      counted[n_counted++] = k->name;
      b += k->error_bound;
    }
  }
  return b;
}

/* Relative L2 error of got against want (absolute when want is all zeros); NaN or
 * Inf anywhere gives +inf. */
static double rel_l2(const nr_buffer *got, const nr_buffer *want) {
  size_t n = nr_buffer_count(want);
  if (got->dtype != want->dtype || got->rank != want->rank || nr_buffer_count(got) != n)
    return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double x = nr_load_f64(got->dtype, got->data, (int64_t)i);
    double y = nr_load_f64(want->dtype, want->data, (int64_t)i);
    if (!isfinite(x) && !(isnan(x) && isnan(y)) && x != y)
      return INFINITY;
    if (isfinite(x) && isfinite(y)) {
      num += (x - y) * (x - y);
      den += y * y;
    }
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void check_usage(FILE *f) {
  fprintf(f, "usage: nnroute check-routes MODEL [--count N (20)] [--seed S (1)]\n"
             "         [--inputs-dir DIR] [--expect-dir DIR] [--threads N]\n"
             "         [--change-probability P (0.3)] [--base-tolerance T]\n\n"
             "Builds and runs the default route and N-1 seeded random routes of MODEL and\n"
             "compares each output with the reference executor (or DIR/<output>.npy),\n"
             "allowing relative L2 error T plus the error bounds of the route's\n"
             "accuracy knobs. T defaults to 1e-5 x sqrt(P / 8), at least 1e-5, for a\n"
             "model with P Conv/Gemm/MatMul nodes (fp32 reassociation adds up with\n"
             "depth). Prints PASS/FAIL per route, then 'N passed, N failed'.\n");
}

static int parse(int argc, char **argv, check_args *a) {
  *a = (check_args){.count = 20, .seed = 1, .base = -1, .change_p = 0.3};
  for (int i = 1; i < argc; i++) {
    bool v = i + 1 < argc;
    if (!strcmp(argv[i], "--count") && v) a->count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && v) a->seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--inputs-dir") && v) a->inputs_dir = argv[++i];
    else if (!strcmp(argv[i], "--expect-dir") && v) a->expect_dir = argv[++i];
    else if (!strcmp(argv[i], "--threads") && v) a->threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--change-probability") && v) a->change_p = atof(argv[++i]);
    else if (!strcmp(argv[i], "--base-tolerance") && v) a->base = atof(argv[++i]);
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
                           const nr_buffer *ins, const nr_buffer *want, double *worst,
                           nr_error *err) {
  nr_engine *e = NULL;
  nr_context *ctx = NULL;
  int no = nr_model_output_count(m);
  nr_buffer *got = calloc((size_t)(no ? no : 1), sizeof *got);
  nr_build_options o = {sizeof o, route, a->threads};
  nr_status st = got ? nr_engine_build(m, &o, &e, err) : NR_ERR_NOMEM;
  if (!st)
    st = nr_context_create(e, a->threads, &ctx, err);
  if (!st)
    st = nr_context_run(ctx, ins, got, err);
  *worst = 0;
  for (int i = 0; !st && i < no; i++) {
    double d = nr_dtype_is_float(want[i].dtype)
                   ? rel_l2(&got[i], &want[i])
                   : (got[i].dtype == want[i].dtype &&
                      nr_buffer_count(&got[i]) == nr_buffer_count(&want[i]) &&
                      !memcmp(got[i].data, want[i].data,
                              nr_buffer_count(&want[i]) * nr_dtype_size(want[i].dtype)))
                         ? 0 : INFINITY;
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

static int check_all(nr_model *m, const check_args *a, const nr_buffer *ins,
                     const nr_buffer *want) {
  nr_error err = {0};
  nr_knob_list knobs = {0};
  if (nr_knob_list_build(m, NULL, &knobs, &err))
    return nr_cli_fail(&err);
  int *choice = calloc((size_t)knobs.n + 1, sizeof *choice); /* the default route */
  nr_status st = choice ? nr_knob_list_parse_route(&knobs, "", choice, &err)
                        : nr_errorf(&err, NR_ERR_NOMEM, "out of memory");
  if (st) {
    free(choice);
    nr_knob_list_free(&knobs);
    return nr_cli_fail(&err);
  }
  nr_graph *g = nr_model_graph(m);
  uint64_t state = a->seed * 0x2545f4914f6cdd1dull + 1;
  int passed = 0, failed = 0, products = 0;
  double base = a->base;
  if (base < 0) {
    base = depth_base(g, &products);
    printf("base tolerance %.3g (rel_l2; %d Conv/Gemm/MatMul nodes; --base-tolerance "
           "sets it)\n", base, products);
  }
  for (int i = 0; i < a->count; i++) {
    if (i)
      draw_route(&knobs, choice, a->change_p, &state);
    char *text = nr_knob_list_route_text(&knobs, choice);
    double bound = route_bound(&knobs, choice, base), worst = 0;
    nr_error e = {0};
    nr_status st = try_route(m, text ? text : "", a, ins, want, &worst, &e);
    bool ok = !st && worst <= bound;
    ok ? passed++ : failed++;
    if (st)
      printf("FAIL route %d: build or run failed: %s\n  --route '%s'\n", i, e.message, text);
    else
      printf("%s route %d: rel_l2 %.3g (bound %.3g), %d knobs changed%s%s%s\n",
             ok ? "PASS" : "FAIL", i, worst, bound, nr_knob_list_changes(&knobs, choice),
             ok ? "" : "\n  --route '", ok ? "" : text, ok ? "" : "'");
    fflush(stdout);
    free(text);
  }
  free(choice);
  nr_knob_list_free(&knobs);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
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
