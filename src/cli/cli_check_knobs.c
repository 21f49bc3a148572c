/* cli_check_knobs.c - `nnroute check-knobs`: proves there are no dead knobs. For every
 * knob instance of a model and every non-default value, it builds the model with only
 * that change and compares what the plan does with what the default route's plan
 * does; a value whose plan does the same is reported DEAD. The tuner relies on this:
 * a dead value would cost a build and a measurement for nothing.
 *
 * Key decision: plans are compared by meaning, through the tools API's plan summary
 * (nr_engine_plan_summary): tactics per step, layouts, fused ops, the memory plan and
 * the parameters each kernel reads, not the plan's bytes, so a value that only
 * changes bytes no kernel reads (a node's name, where a constant sits in the
 * weights, a params field the chosen kernel ignores) is dead. The check also holds
 * the build's own record to account: a value the build reports as ignored (route.h,
 * knob use; the tuner then never builds it) must build the default's summary, and
 * one that changes the summary while reported ignored fails.
 *
 * A knob whose values matter only under another choice (its `needs` route, e.g.
 * quant.calibration needs int8 nodes) is compared against the plan of that route
 * instead of the default's. Int8 values are built with a calibration from two seeded
 * random input sets. Knobs flagged D (their effect depends on the data or on this
 * machine's timings) may build the same plan on some data: reported, not failed. A
 * knob that narrows the tactics of its node's precision (an algorithm, library or
 * layout) may build the default's plan yet act under another precision of the node
 * (NHWC is the tf32 pick, not the fp32 one): such a value is built again under each
 * of the node's precision values and passes where it acts there.
 * `--device cuda` checks a CUDA build's knobs (it needs the GPU). */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "tune/pairs.h"
#include "util/device.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct check_ctx {
  nr_model *m;
  const nr_knob_list *knobs;
  int threads;
  nr_device device;
  const nr_calibration *calib;
  int passed, failed;
} check_ctx;

/* What one build gave: its plan summary, and whether the build ignored row k's value
 * (k < 0: not asked). */
typedef struct built {
  char *summary;
  bool ignored;
  char ignored_text[512];
} built;

static int build_one(const check_ctx *c, const char *route, int k, built *out,
                     nr_error *err) {
  nr_engine *e = NULL;
  nr_build_options o = {sizeof o, route, c->threads, c->device, c->calib};
  *out = (built){0};
  if (nr_engine_build(c->m, &o, &e, err))
    return 1;
  uint8_t *use = k >= 0 ? calloc((size_t)c->knobs->n + 1, 1) : NULL;
  nr_engine_summary sum = {sizeof sum};
  int rc = (k >= 0 && !use) || !(out->summary = nr_engine_plan_summary(e)) ||
           nr_engine_summarize(e, &sum, err) ||
           (use && nr_engine_knob_use(e, c->knobs, use, err));
  if (!rc && use) {
    out->ignored = (use[k] & NR_KNOB_USE_SET) && !(use[k] & NR_KNOB_USE_EFFECTIVE);
    snprintf(out->ignored_text, sizeof out->ignored_text, "%s", sum.ignored);
  }
  if (rc && !err->message[0])
    nr_errorf(err, NR_ERR_NOMEM, "out of memory summarizing the plan");
  free(use);
  nr_engine_destroy(e);
  return rc;
}

/* The first line where a and b differ, as "a-line | b-line" (for messages). */
static void first_difference(const char *a, const char *b, char *buf, size_t cap) {
  while (*a && *b) {
    size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
    if (la != lb || memcmp(a, b, la)) {
      snprintf(buf, cap, "'%.*s' became '%.*s'", (int)(la > 160 ? 160 : la), a,
               (int)(lb > 160 ? 160 : lb), b);
      return;
    }
    a += la + (a[la] == '\n');
    b += lb + (b[lb] == '\n');
  }
  snprintf(buf, cap, "one summary is longer");
}

/* A value of row k (a knob that narrows the tactics of its node's precision) that
 * builds the default's plan may act under another precision of the node: true, with
 * that precision's token in `under`, when some non-default value of a precision row
 * of the same node builds a different plan with the value than without it, and the
 * build does not report the value ignored there. */
static bool acts_under_precision(const check_ctx *c, int k, const char *value,
                                 char *under, size_t cap) {
  const nr_knob_info *kn = &c->knobs->knobs[k];
  if (!(kn->flags & NR_KNOB_INFO_NARROWS_TACTIC) || !kn->node)
    return false;
  for (int j = 0; j < c->knobs->n; j++) {
    const nr_knob_info *p = &c->knobs->knobs[j];
    if (!(p->flags & NR_KNOB_INFO_SETS_PRECISION) || !p->node || strcmp(p->node, kn->node))
      continue;
    for (int w = 0; w < p->n_values; w++) {
      char base[512], route[1024];
      snprintf(base, sizeof base, "-%s=%s", p->id, p->values[w]);
      snprintf(route, sizeof route, "%s -%s=%s", base, kn->id, value);
      built b0, b1;
      nr_error err = {0};
      if (w == p->dflt || build_one(c, base, -1, &b0, &err))
        continue;
      bool acts = !build_one(c, route, k, &b1, &err) && !b1.ignored &&
                  strcmp(b1.summary, b0.summary);
      free(b0.summary);
      free(b1.summary);
      if (acts) {
        snprintf(under, cap, "%s", base);
        return true;
      }
    }
  }
  return false;
}

/* Judges value `value` of row k built along route against the plan summary base. */
static void judge(check_ctx *c, int row, const char *value, const char *route,
                  const built *b, const char *base, const char *base_name) {
  const nr_knob_info *k = &c->knobs->knobs[row];
  char under[512];
  bool same = !strcmp(b->summary, base);
  if (!same && b->ignored) {
    char diff[400];
    first_difference(base, b->summary, diff, sizeof diff);
    printf(
        "FAIL %s: the build reports the value ignored, but its plan differs from "
        "'%s' (%s)\n",
        route, base_name, diff);
    c->failed++;
  } else if (!same) {
    c->passed++;
  } else if (k->flags & NR_KNOB_INFO_DATA) {
    printf("same %s: builds the plan of '%s' on this data and machine\n", route,
           base_name);
    c->passed++;
  } else if (acts_under_precision(c, row, value, under, sizeof under)) {
    printf("same %s: builds the plan of '%s', and acts under %s\n", route, base_name,
           under);
    c->passed++;
  } else {
    printf("DEAD %s: its plan does what the plan of '%s' does%s%s\n", route, base_name,
           b->ignored ? "; the build reports it ignored: " : "",
           b->ignored ? b->ignored_text : "");
    c->failed++;
  }
}

/* Checks every non-default value of row i against base (the default's summary). */
static void check_instance(check_ctx *c, int i, const char *dflt_summary) {
  const nr_knob_info *k = &c->knobs->knobs[i];
  const char *needs = k->needs ? k->needs : "";
  nr_error err = {0};
  built ctx_build = {0};
  if (*needs && build_one(c, needs, -1, &ctx_build, &err)) {
    printf("FAIL %s: its context route '%s' does not build: %s\n", k->id, needs,
           err.message);
    c->failed++;
    return;
  }
  const char *base = *needs ? ctx_build.summary : dflt_summary;
  for (int v = 0; v < k->n_values; v++) {
    if (v == k->dflt)
      continue;
    char route[1024];
    snprintf(route, sizeof route, "%s%s-%s=%s", needs, *needs ? " " : "", k->id,
             k->values[v]);
    built b;
    err = (nr_error){0};
    if (build_one(c, route, i, &b, &err)) {
      /* test.fault=build_error fails the build on purpose: that is its effect. */
      bool injected = (k->flags & NR_KNOB_INFO_TEST) && strstr(err.message, "injected");
      printf("%s %s: %s\n", injected ? "ok  " : "FAIL", route, err.message);
      injected ? c->passed++ : c->failed++;
    } else {
      judge(c, i, k->values[v], route, &b, base, *needs ? needs : "the default route");
    }
    free(b.summary);
    fflush(stdout);
  }
  free(ctx_build.summary);
}

static void check_knobs_usage(FILE *f) {
  fprintf(f,
          "usage: nnroute check-knobs MODEL [--shape NAME=DIMS]... [--threads N]\n"
          "                            [--filter SUBSTRING] [--device cpu|cuda]\n\n"
          "Builds MODEL once per non-default value of every knob instance (or of those\n"
          "whose id contains SUBSTRING) and reports a value whose plan does what the\n"
          "default route's plan does (same steps, tactics, layouts, fused ops, memory\n"
          "plan and kernel parameters) as DEAD, and a value the build reports ignored\n"
          "whose plan differs as FAIL. An algorithm, library or layout value that only\n"
          "acts under another precision of its node is built under each and passes\n"
          "where it acts. Ends with 'N passed, N failed'.\n");
}

int nr_cli_check_knobs(int argc, char **argv) {
  const char *model = NULL, *filter = NULL, *shapes[64];
  int n_shapes = 0;
  check_ctx c = {.device = NR_DEVICE_CPU};
  for (int i = 1; i < argc; i++) {
    bool v = i + 1 < argc;
    if (!strcmp(argv[i], "--shape") && v && n_shapes < 64) shapes[n_shapes++] = argv[++i];
    else if (!strcmp(argv[i], "--threads") && v)
      c.threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && v) filter = argv[++i];
    else if (!strcmp(argv[i], "--device") && v && nr_device_parse(argv[i + 1], &c.device))
      i++;
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
  if (nr_model_load(model, NULL, &c.m, &err))
    return nr_cli_fail(&err);
  int rc = 0;
  for (int s = 0; !rc && s < n_shapes; s++)
    rc = nr_cli_apply_shape(c.m, shapes[s], &err);
  nr_knob_list knobs = {0};
  nr_knob_list_options lo = {.size = sizeof lo, .device = c.device};
  nr_calibration *calib = NULL;
  built base = {0};
  c.knobs = &knobs;
  if (!rc && (nr_knob_list_build(c.m, &lo, &knobs, &err) ||
              nr_calibration_from_spec(c.m, "random:2", &calib, &err) ||
              build_one(&c, "", -1, &base, &err)))
    rc = nr_cli_fail(&err);
  c.calib = calib;
  for (int i = 0; !rc && i < knobs.n; i++)
    if (!filter || strstr(knobs.knobs[i].id, filter))
      check_instance(&c, i, base.summary);
  free(base.summary);
  nr_calibration_destroy(calib);
  nr_knob_list_free(&knobs);
  nr_model_destroy(c.m);
  if (rc)
    return rc;
  printf("%d passed, %d failed\n", c.passed, c.failed);
  return c.failed ? 1 : 0;
}
