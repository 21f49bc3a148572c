/* test_engine_data_shapes.c - graph inputs that decide an output shape (a Reduce's
 * axes, Resize's sizes) in engines: the engine is built for the shape the model
 * declares, and a run whose value gives another shape is refused with NR_ERR_SHAPE
 * naming the input, before the kernel writes a byte. One-node graphs built in C,
 * compiled, saved and loaded again (the loaded engine is what runs). */
#include "engine/engine.h"
#include "graph_build.h"

#include <stdlib.h>
#include <string.h>

/* Engine of g (output tensor out declared with shape dims), through save and load. */
static nr_engine *engine_of(nr_test_state *t, nr_graph *g, int out, int rank,
                            const int64_t *dims) {
  if (!tg_finish(t, g, out))
    return NULL;
  nr_value *v = &g->tensors[out].value; /* what the model's output type declares */
  v->dtype = NR_DTYPE_FLOAT;
  v->rank = rank;
  memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  tg_built b;
  nr_error err = {0};
  nr_engine *e = calloc(1, sizeof *e), *back = NULL;
  uint8_t *data = NULL;
  size_t len = 0;
  nr_status st = tg_compile(g, "", 1, NULL, &b, &err);
  if (!st) {
    e->plan = b.plan;
    b.plan = NULL;
    nr_fingerprint_current(&e->fingerprint);
    strcpy(e->nnroute_version, NR_VERSION_STRING);
    nr_knob_schema(e->knob_schema);
    e->threads = 1;
    st = nr_engine_serialize(e, &data, &len, &err);
  }
  if (!st)
    st = nr_engine_parse(data, len, true, &back, &err);
  CHECK(!st, "building the engine: %s", err.message);
  tg_built_free(&b);
  nr_engine_free(e);
  free(data);
  return back;
}

static int int64_input(nr_graph *g, const char *name, int64_t n) {
  int x = tg_input(g, name, 1, (int64_t[]){n});
  g->tensors[x].value.dtype = NR_DTYPE_INT64;
  return x;
}

/* Runs e on (x, the int64 vector k); the status, message in err. */
static nr_status run_with(nr_engine *e, float *x, const int64_t *xdims, int xrank,
                          int64_t *k, int64_t kn, nr_error *err) {
  nr_context *c = NULL;
  nr_buffer in[2] = {{NR_DTYPE_FLOAT, xrank, {0}, x}, {NR_DTYPE_INT64, 1, {kn}, k}};
  memcpy(in[0].dims, xdims, sizeof(int64_t) * (size_t)xrank);
  nr_buffer out[1] = {{0}};
  nr_status st = nr_context_create(e, 1, &c, err);
  if (!st)
    st = nr_context_run(c, in, out, err);
  nr_buffer_free(&out[0]);
  nr_context_destroy(c);
  return st;
}

NR_TEST(engine_data_shapes_reduce_axes_checked) {
  nr_graph *g = tg_graph(18);
  int x = tg_input(g, "data", 3, (int64_t[]){3, 4, 5});
  int axes = int64_input(g, "axes", 1);
  int y = tg_node(g, "ReduceLogSum", "reduce", 2, (int[]){x, axes});
  nr_engine *e = engine_of(t, g, y, 3, (int64_t[]){3, 1, 5});
  REQUIRE(e);
  float data[60];
  for (int i = 0; i < 60; i++)
    data[i] = 1.0f + (float)i;
  nr_error err = {0};
  int64_t same[] = {-2}, other[] = {0}, bad[] = {7};
  CHECK(run_with(e, data, (int64_t[]){3, 4, 5}, 3, same, 1, &err) == NR_OK, "axes=[-2]: %s",
        err.message);
  CHECK(run_with(e, data, (int64_t[]){3, 4, 5}, 3, other, 1, &err) == NR_ERR_SHAPE &&
            strstr(err.message, "'axes'") && strstr(err.message, "1x4x5"),
        "axes=[0]: %s", err.message);
  CHECK(run_with(e, data, (int64_t[]){3, 4, 5}, 3, bad, 1, &err) == NR_ERR_SHAPE,
        "axes=[7]: %s", err.message);
  nr_engine_free(e);
  nr_graph_destroy(g);
}

NR_TEST(engine_data_shapes_resize_sizes_checked) {
  nr_graph *g = tg_graph(13);
  int x = tg_input(g, "X", 4, (int64_t[]){1, 1, 2, 2});
  int sizes = int64_input(g, "sizes", 4);
  int y = tg_node(g, "Resize", "resize", 4, (int[]){x, -1, -1, sizes});
  nr_engine *e = engine_of(t, g, y, 4, (int64_t[]){1, 1, 7, 8});
  REQUIRE(e);
  float data[4] = {1, 2, 3, 4};
  nr_error err = {0};
  int64_t same[] = {1, 1, 7, 8}, bigger[] = {1, 1, 70, 80}, smaller[] = {1, 1, 1, 1};
  CHECK(run_with(e, data, (int64_t[]){1, 1, 2, 2}, 4, same, 4, &err) == NR_OK,
        "sizes as built: %s", err.message);
  CHECK(run_with(e, data, (int64_t[]){1, 1, 2, 2}, 4, bigger, 4, &err) == NR_ERR_SHAPE &&
            strstr(err.message, "'sizes'"),
        "sizes 70x80: %s", err.message);
  CHECK(run_with(e, data, (int64_t[]){1, 1, 2, 2}, 4, smaller, 4, &err) == NR_ERR_SHAPE,
        "sizes 1x1: %s", err.message);
  nr_engine_free(e);
  nr_graph_destroy(g);
}
