/* engine_build.c - nr_engine_build: a model, a route and a thread count become an
 * engine (plan + everything it depends on). The route is parsed against the knob
 * space of this model's graph, so per-node knobs name this model's nodes. */
#include "api/model_internal.h"
#include "backends/backend.h"
#include "compiler/compile.h"
#include "engine/engine.h"
#include "plan/quant.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}


static nr_status compile_model(nr_model *m, const char *route_text, int threads,
                               nr_device device, const nr_calibration *calib,
                               nr_plan **plan, nr_error *err) {
  nr_graph *g = nr_model_graph(m);
  nr_knob_space space = {0};
  nr_route route = {0};
  nr_status st = nr_compiler_name_nodes(g, err);
  if (!st)
    st = nr_knob_space_build_for(g, device, &space, err);
  if (!st)
    st = nr_route_init(&route, &space, err);
  if (!st && route_text && *route_text)
    st = nr_route_parse(&route, route_text, err);
  if (!st)
    st = nr_compile(g, &route, threads, calib, plan, err);
  nr_route_free(&route);
  nr_knob_space_free(&space);
  return st;
}

/* An engine with int8 steps keeps its own copy of the calibration it was built
 * from (saved in the CALIB section), so the table travels with the engine. */
static nr_status keep_calibration(nr_engine *e, const nr_calibration *c, nr_error *err) {
  bool int8 = false;
  for (int k = 0; k < e->plan->n_steps; k++)
    int8 |= e->plan->steps[k].tactic->precision == NR_PREC_INT8;
  if (!c || !int8)
    return NR_OK;
  uint8_t *bytes;
  size_t len;
  nr_status st = nr_calib_serialize(c, &bytes, &len, err);
  if (st)
    return st;
  st = nr_calib_deserialize(bytes, len, &e->calib, err);
  free(bytes);
  return st;
}

nr_status nr_engine_build(nr_model *m, const nr_build_options *opts, nr_engine **out,
                          nr_error *err) {
  if (!m || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_engine_build: NULL argument");
  *out = NULL;
  nr_build_options o = {sizeof o, NULL, 0, NR_DEVICE_CPU, NULL};
  if (opts) /* an older caller's smaller struct leaves the newer fields at default */
    memcpy(&o, opts, opts->size < sizeof o ? opts->size : sizeof o);
  nr_status dev_st = o.device != NR_DEVICE_CPU ? nr_backend_check(o.device, err) : NR_OK;
  if (dev_st) { /* a CUDA build needs the GPU: its tactics query the libraries */
    nr_error_prefix(err, "nr_engine_build: ");
    return dev_st;
  }
  int threads = nr_threads_or_online(o.threads);
  uint64_t t0 = now_ms();
  nr_plan *plan = NULL;
  nr_status st = nr_model_prepare(m, err);
  if (!st)
    st = compile_model(m, o.route, threads, o.device, o.calibration, &plan, err);
  if (st)
    return st;
  nr_engine *e = calloc(1, sizeof *e);
  if (!e) {
    nr_plan_destroy(plan);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  }
  e->plan = plan;
  nr_fingerprint_current_for(&e->fingerprint, o.device);
  snprintf(e->nnroute_version, sizeof e->nnroute_version, "%s", NR_VERSION_STRING);
  nr_knob_schema(e->knob_schema);
  memcpy(e->model_sha256, nr_model_sha256(m), sizeof e->model_sha256);
  e->threads = threads;
  st = keep_calibration(e, o.calibration, err);
  if (!st && o.sign_key_len)
    st = nr_engine_set_sign_key(e, o.sign_key, o.sign_key_len, err);
  if (st) {
    nr_engine_destroy(e);
    return st;
  }
  e->build_ms = now_ms() - t0;
  *out = e;
  return NR_OK;
}
