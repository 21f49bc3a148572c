/* fuzz_route.c - libFuzzer harness for the route parser and the route-expression
 * parser (`nnroute build --route`, `nnroute tune --space`), over the knob instances of
 * examples/tiny_cnn (per-node knobs) and over the global knobs alone.
 *
 * Key decision: the first byte picks the parser and the knob list, the rest is the
 * text; a route that parses is printed canonically and parsed again, and the two
 * choice vectors must agree (a disagreement aborts: that is a finding). */
#include "api/nnroute_tools.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nr_model *model;
static nr_knob_list lists[2]; /* [0] tiny_cnn's instances, [1] the global knobs */
static int n_lists;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *path = getenv("NR_FUZZ_ROUTE_MODEL");
  if (!path)
    path = NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx";
  nr_error err = {0};
  if (nr_model_load(path, NULL, &model, &err) ||
      nr_knob_list_build(model, NULL, &lists[0], &err) ||
      nr_knob_list_build(NULL, NULL, &lists[1], &err)) {
    fprintf(stderr, "fuzz_route: %s: %s\n", path, err.message);
    exit(1);
  }
  n_lists = 2;
  return 0;
}

static void route_round_trip(const nr_knob_list *l, const char *text) {
  int *a = calloc((size_t)l->n + 1, sizeof *a), *b = calloc((size_t)l->n + 1, sizeof *b);
  char *canon = NULL;
  if (a && b && !nr_knob_list_parse_route(l, text, a, NULL)) {
    canon = nr_knob_list_route_text(l, a);
    if (canon && (nr_knob_list_parse_route(l, canon, b, NULL) ||
                  memcmp(a, b, (size_t)l->n * sizeof *a)))
      abort(); /* the canonical text does not parse back to the same route */
  }
  free(canon);
  free(a);
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096)
    return 0;
  char *text = malloc(size);
  if (!text)
    return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  const nr_knob_list *l = &lists[(data[0] >> 2) % n_lists];
  switch (data[0] % 3) {
  case 0:
    route_round_trip(l, text);
    break;
  case 1: {
    uint64_t *allowed = calloc((size_t)l->n + 1, sizeof *allowed);
    if (allowed)
      nr_knob_list_parse_expr(l, text, allowed, NULL);
    free(allowed);
    break;
  }
  default: {
    char *out = NULL;
    nr_knob_list_canonical(l, text, &out, NULL);
    free(out);
  }
  }
  free(text);
  return 0;
}
