/* test_tune_same.c - the tuner's side of ignored knob values: the rule that says two
 * routes build the same plan (tune_same_build) from how one build used each knob, the
 * canonical choice that leaves ignored values out (tune_effective_choice), and the
 * search space at --threads 1, where the knobs that act only on 2+ threads are no
 * dimension. On examples/tiny_cnn for the space. */
#include "api/nnroute_tools.h"
#include "tune/tune_internal.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"

static nr_model *load_tiny(nr_test_state *t) {
  nr_model *m = NULL;
  nr_error err = {0};
  if (nr_model_load(TINY_CNN, NULL, &m, &err) || nr_model_prepare(m, &err))
    nr_test_failf(t, __FILE__, __LINE__, "load", "%s", err.message);
  return m;
}

/* ---- the tuner's rule ------------------------------------------------------------- */

/* A list of four rows, each with values {0, 1, 2} and default 0. */
static nr_knob_list four_rows(nr_knob_info rows[4]) {
  for (int i = 0; i < 4; i++)
    rows[i] = (nr_knob_info){.id = "k", .n_values = 3, .dflt = 0};
  return (nr_knob_list){4, rows, NULL};
}

NR_TEST(tune_same_build_rule) {
  nr_knob_info rows[4];
  nr_knob_list l = four_rows(rows);
  enum { R = NR_KNOB_USE_READ, E = NR_KNOB_USE_EFFECTIVE, S = NR_KNOB_USE_SET };
  /* row 0 acted (1), row 1 read without effect (2), row 2 never read (1), row 3 read
   * at its default */
  const int r[4] = {1, 2, 1, 0};
  const uint8_t use[4] = {R | E | S, R | S, S, R};
  int eff[4];
  tune_effective_choice(&l, r, use, eff);
  CHECK(eff[0] == 1 && eff[1] == 0 && eff[2] == 0 && eff[3] == 0, "the canonical choice");
  CHECK(tune_same_build(&l, r, r, use), "itself");
  CHECK(tune_same_build(&l, eff, r, use), "its canonical route");
  CHECK(tune_same_build(&l, (const int[]){1, 0, 2, 0}, r, use), "unread row: any value");
  CHECK(!tune_same_build(&l, (const int[]){1, 1, 1, 0}, r, use),
        "a third value of a row read without effect may act");
  CHECK(!tune_same_build(&l, (const int[]){2, 2, 1, 0}, r, use), "a value that acted");
  CHECK(!tune_same_build(&l, (const int[]){0, 2, 1, 0}, r, use), "its default too");
  CHECK(!tune_same_build(&l, (const int[]){1, 2, 1, 1}, r, use), "a row read at default");
}

/* At --threads 1 the knobs that act only with 2+ threads are no search dimension; at
 * 2 threads they are. */
NR_TEST(tune_same_thread_knobs_leave_a_one_thread_space) {
  nr_model *m = load_tiny(t);
  REQUIRE(m);
  nr_error err = {0};
  tune_space one = {0}, two = {0};
  REQUIRE(!tune_space_build(m, NULL, NR_DEVICE_CPU, 1, &one, &err), "%s", err.message);
  REQUIRE(!tune_space_build(m, NULL, NR_DEVICE_CPU, 2, &two, &err), "%s", err.message);
  int threads_one = 0, threads_two = 0;
  for (int d = 0; d < one.n_dims; d++)
    threads_one += strstr(one.dims[d].name, "threads") != NULL;
  for (int d = 0; d < two.n_dims; d++)
    threads_two += strstr(two.dims[d].name, "threads") != NULL;
  CHECK(threads_one == 0 && threads_two == 4, "%d and %d thread dimensions", threads_one,
        threads_two);
  CHECK(one.n_dims == two.n_dims - 4, "%d and %d dimensions", one.n_dims, two.n_dims);
  tune_space_free(&two);
  /* an expression that frees them leaves them at the default, in the base route */
  REQUIRE(!tune_space_build(m, "-conv.threads@*=* -memory.plan=*", NR_DEVICE_CPU, 1, &two,
                            &err),
          "%s", err.message);
  CHECK(two.n_dims == 1 && !strcmp(two.dims[0].name, "memory.plan"), "%d dimensions",
        two.n_dims);
  char *route = tune_space_route(&two, (const int[]){0});
  CHECK(route && !strstr(route, "threads"), "'%s'", route ? route : "");
  free(route);
  tune_space_free(&two);
  tune_space_free(&one);
  nr_model_destroy(m);
}
