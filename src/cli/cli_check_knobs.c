/* cli_check_knobs.c - `nnroute check-knobs`: proves there are no dead knobs. For every
 * knob instance of a model and every non-default value, it builds the model with only
 * that change and compares the plan with the default route's; a value that builds the
 * same plan is reported DEAD. The tuner relies on this: a dead value would cost a
 * build and a measurement for nothing.
 *
 * A knob whose values matter only under another choice (its `needs` route, e.g.
 * quant.calibration needs int8 nodes) is compared against the plan of that route
 * instead of the default's. Int8 values are built with a calibration from two
 * seeded random input sets.
 *
 * The plan fingerprint (nr_engine_plan_hash) covers what execution depends on: the
 * graph's nodes, every step (tactic id, slots, params, packed data, scratch, threads),
 * every slot (dtype, shape, layout, kind, size, offset, alias) and the weights' bytes. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "tune/pairs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int build_hash(nr_model *m, const char *route, int threads,
                      const nr_calibration *calib, uint64_t *h, nr_error *err) {
  nr_engine *e = NULL;
  nr_build_options o = {sizeof o, route, threads, NR_DEVICE_CPU, calib};
  if (nr_engine_build(m, &o, &e, err))
    return 1;
  *h = nr_engine_plan_hash(e);
  nr_engine_destroy(e);
  return 0;
}

static void check_knobs_usage(FILE *f) {
  fprintf(f, "usage: nnroute check-knobs MODEL [--shape NAME=DIMS]... [--threads N]\n"
             "                            [--filter SUBSTRING]\n\n"
             "Builds MODEL once per non-default value of every knob instance (or of those\n"
             "whose id contains SUBSTRING) and reports a value whose plan equals the\n"
             "default route's as DEAD. Ends with 'N passed, N failed'.\n");
}

/* Checks every non-default value of instance i; returns the number of dead ones. */
static int check_instance(nr_model *m, const nr_knob_info *k, uint64_t base, int threads,
                          const nr_calibration *calib, int *passed) {
  int dead = 0;
  const char *needs = k->needs ? k->needs : "";
  nr_error err = {0};
  if (*needs && build_hash(m, needs, threads, calib, &base, &err)) {
    printf("FAIL %s: its context route '%s' does not build: %s\n", k->id, needs,
           err.message);
    return 1;
  }
  for (int v = 0; v < k->n_values; v++) {
    if (v == k->dflt)
      continue;
    char route[1024];
    snprintf(route, sizeof route, "%s%s-%s=%s", needs, *needs ? " " : "", k->id,
             k->values[v]);
    uint64_t h = 0;
    if (build_hash(m, route, threads, calib, &h, &err)) {
      /* test.fault=build_error fails the build on purpose: that is its effect. */
      bool injected = (k->flags & NR_KNOB_INFO_TEST) && strstr(err.message, "injected");
      printf("%s %s: %s\n", injected ? "ok  " : "FAIL", route, err.message);
      if (injected)
        (*passed)++;
      else
        dead++;
    } else if (h == base && (k->flags & NR_KNOB_INFO_DATA)) {
      printf("same %s: builds the plan of '%s' on this data and machine\n", route,
             *needs ? needs : "the default route");
      (*passed)++;
    } else if (h == base) {
      printf("DEAD %s: builds the plan of '%s'\n", route, *needs ? needs : "the default route");
      dead++;
    } else {
      (*passed)++;
    }
    fflush(stdout);
  }
  return dead;
}

int nr_cli_check_knobs(int argc, char **argv) {
  const char *model = NULL, *filter = NULL, *shapes[64];
  int n_shapes = 0, threads = 0;
  for (int i = 1; i < argc; i++) {
    bool v = i + 1 < argc;
    if (!strcmp(argv[i], "--shape") && v && n_shapes < 64) shapes[n_shapes++] = argv[++i];
    else if (!strcmp(argv[i], "--threads") && v) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && v) filter = argv[++i];
    else if (argv[i][0] != '-' && !model) model = argv[i];
    else {
      bool help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
      check_knobs_usage(help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  if (!model) {
    check_knobs_usage(stderr);
    return 2;
  }
  nr_error err = {0};
  nr_model *m = NULL;
  if (nr_model_load(model, NULL, &m, &err))
    return nr_cli_fail(&err);
  int rc = 0, passed = 0, failed = 0;
  for (int s = 0; !rc && s < n_shapes; s++)
    rc = nr_cli_apply_shape(m, shapes[s], &err);
  uint64_t base = 0;
  nr_knob_list knobs = {0};
  nr_calibration *calib = NULL;
  if (!rc && (build_hash(m, "", threads, NULL, &base, &err) ||
              nr_knob_list_build(m, NULL, &knobs, &err) ||
              nr_calibration_from_spec(m, "random:2", &calib, &err)))
    rc = nr_cli_fail(&err);
  for (int i = 0; !rc && i < knobs.n; i++)
    if (!filter || strstr(knobs.knobs[i].id, filter))
      failed += check_instance(m, &knobs.knobs[i], base, threads, calib, &passed);
  nr_calibration_destroy(calib);
  nr_knob_list_free(&knobs);
  nr_model_destroy(m);
  if (rc)
    return rc;
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
