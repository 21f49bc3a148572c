/* cli_build.c - `nnroute build`: compiles a model along a route into an engine file
 * and says what the route changed, how long the build took and how much memory a
 * context will need. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "util/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 64

static void build_usage(FILE *f) {
  fprintf(f, "usage: nnroute build MODEL [--route ROUTE] [--shape NAME=DIMS]...\n"
             "                     [--threads N] [--calibration SPEC]\n"
             "                     [--save-calibration FILE] [--device cpu|cuda]\n"
             "                     [--sign KEYFILE] -o ENGINE\n\n"
             "Compiles MODEL along ROUTE (\"-knob=value ...\"; default: the default route,\n"
             "see `nnroute knobs MODEL`) into ENGINE for N threads (default: all CPUs).\n"
             "Nodes the route puts in int8 (precision@NODE=int8) are quantized with the\n"
             "activation ranges of SPEC: a directory of input sets (ONNX test-data layout\n"
             "or .npy), a table file written by --save-calibration, or random:N.\n"
             "Input dimensions MODEL leaves free come from --shape, else from the\n"
             "first input set of a SPEC directory (data contradicting --shape is an\n"
             "error).\n"
             "--device cuda builds a GPU engine (CUDA tactics and knobs; see docs/cuda.md).\n"
             "--sign signs ENGINE with an HMAC-SHA-256 under the bytes of KEYFILE; `run`,\n"
             "`bench` and `inspect` check it with --verify KEYFILE (docs/engine-format.md).\n");
}

/* Prints route tokens one per line. */
static void print_changes_list(const char *route) {
  const char *p = route;
  while (*p) {
    const char *sp = strchr(p, ' ');
    size_t n = sp ? (size_t)(sp - p) : strlen(p);
    printf("  %.*s\n", (int)n, p);
    p += n;
    while (*p == ' ')
      p++;
  }
}

/* The route's tokens: what differs from the default route. */
static void print_changes(const char *route) {
  if (!*route) {
    printf("route:   default (no knob changed)\n");
    return;
  }
  printf("route changes:\n");
  print_changes_list(route);
}

static void print_summary(const nr_engine *e, const char *path) {
  nr_engine_summary sum = {sizeof sum};
  if (nr_engine_summarize(e, &sum, NULL))
    return;
  print_changes(sum.route);
  if (sum.ignored_knobs) {
    printf(
        "ignored: %d value(s) of the route changed nothing in this build (a tactic "
        "that was not chosen, a restriction no tactic left satisfies); the route "
        "without them builds the same plan:\n",
        sum.ignored_knobs);
    print_changes_list(sum.ignored);
  }
  if (sum.device != NR_DEVICE_CPU) {
    nr_environment env = {sizeof env};
    nr_engine_environment(e, &env);
    printf("build:   %.3f s, %d steps (%d reorders) for %s (%s)\n", sum.build_ms / 1000.0,
           sum.n_steps, sum.reorder_steps, nr_device_name(sum.device), env.gpu);
  } else {
    printf("build:   %.3f s, %d steps (%d on the reference tactic, %d reorders), %d threads\n",
           sum.build_ms / 1000.0, sum.n_steps, sum.reference_steps, sum.reorder_steps,
           sum.threads);
  }
  printf("memory:  arena %.2f MiB + scratch %.2f MiB per context, weights %.2f MiB\n",
         sum.arena_bytes / 1048576.0, sum.scratch_bytes / 1048576.0,
         sum.weights_bytes / 1048576.0);
  printf("engine:  %s\n", path);
}

int nr_cli_build(int argc, char **argv) {
  const char *model = NULL, *route = NULL, *out = NULL, *shapes[MAX_SHAPES];
  const char *calib_spec = NULL, *calib_out = NULL, *sign = NULL;
  int n_shapes = 0, threads = 0;
  nr_device device = NR_DEVICE_CPU;
  for (int i = 1; i < argc; i++) {
    bool v = i + 1 < argc;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      build_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--route") && v) {
      route = argv[++i];
    } else if (!strcmp(argv[i], "--shape") && v && n_shapes < MAX_SHAPES) {
      shapes[n_shapes++] = argv[++i];
    } else if (!strcmp(argv[i], "--threads") && v) {
      threads = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--calibration") && v) {
      calib_spec = argv[++i];
    } else if (!strcmp(argv[i], "--save-calibration") && v) {
      calib_out = argv[++i];
    } else if (!strcmp(argv[i], "--device") && v) {
      if (!nr_device_parse(argv[++i], &device)) {
        fprintf(stderr, "nnroute build: --device '%s': cpu or cuda\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--sign") && v) {
      sign = argv[++i];
    } else if (!strcmp(argv[i], "-o") && v) {
      out = argv[++i];
    } else if (argv[i][0] != '-' && !model) {
      model = argv[i];
    } else {
      fprintf(stderr, "nnroute build: unexpected argument '%s'\n", argv[i]);
      build_usage(stderr);
      return 2;
    }
  }
  if (!model || !out) {
    build_usage(stderr);
    return 2;
  }
  nr_error err = {0};
  nr_model *m = NULL;
  nr_engine *e = NULL;
  int rc = 0;
  if (nr_model_load(model, NULL, &m, &err))
    return nr_cli_fail(&err);
  for (int s = 0; !rc && s < n_shapes; s++)
    rc = nr_cli_apply_shape(m, shapes[s], &err);
  nr_calibration *calib = NULL;
  if (!rc && nr_cli_calibration(m, calib_spec, &calib, &err))
    rc = nr_cli_fail(&err);
  if (!rc && calib_out && !calib) {
    fprintf(stderr, "nnroute build: --save-calibration needs --calibration\n");
    rc = 2;
  }
  if (!rc && calib_out && nr_calibration_save(calib, calib_out, &err))
    rc = nr_cli_fail(&err);
  nr_build_options o = {sizeof o, route, threads, device, calib};
  uint8_t *key = NULL;
  if (!rc && sign && nr_cli_read_key(sign, &key, &o.sign_key_len, &err))
    rc = nr_cli_fail(&err);
  o.sign_key = key;
  if (!rc && nr_engine_build(m, &o, &e, &err))
    rc = nr_cli_fail(&err);
  nr_cli_free_key(key, o.sign_key_len);
  nr_calibration_destroy(calib);
  if (!rc && nr_engine_save(e, out, &err))
    rc = nr_cli_fail(&err);
  if (!rc)
    print_summary(e, out);
  if (!rc && nr_engine_reference_steps(e)) {
    nr_engine_summary sum = {sizeof sum};
    bool cpu = !nr_engine_summarize(e, &sum, &err) && sum.device == NR_DEVICE_CPU;
    double *ms = cpu ? nr_cli_step_times(e, threads) : NULL;
    nr_cli_warn_reference(e, ms);
    free(ms);
  }
  nr_engine_destroy(e);
  nr_model_destroy(m);
  return rc;
}
