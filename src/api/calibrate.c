/* calibrate.c - nr_calibration_collect and the calibration file (include/nnroute.h).
 *
 * Calibration runs the reference executor, not an engine: the ranges must describe
 * the model's true activations, independent of whatever route is later built. Every
 * float tensor the top-level graph computes is observed, so one table serves every
 * choice of int8 nodes. */
#include "api/model_internal.h"
#include "kernels/ref/executor.h"
#include "plan/quant.h"
#include "util/error.h"
#include "util/file_out.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct observe_ctx {
  nr_calib *calib;
  nr_error *err;
} observe_ctx;

static nr_status observe(void *user, const nr_graph *g, int t, const nr_value *v) {
  observe_ctx *o = user;
  if (v->dtype != NR_DTYPE_FLOAT || !v->data)
    return NR_OK;
  return nr_calib_observe(o->calib, g->tensors[t].name, v->data, nr_value_count(v), o->err);
}

static nr_status run_set(nr_model *m, const nr_buffer *inputs, observe_ctx *o,
                         nr_error *err) {
  nr_graph *g = nr_model_graph(m);
  nr_status st = nr_model_check_inputs(m, inputs, err);
  if (st)
    return st;
  nr_value *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  nr_value *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return nr_errorf(err, NR_ERR_NOMEM, "calibration: out of memory");
  }
  for (int i = 0; i < g->n_inputs; i++) {
    in[i].dtype = inputs[i].dtype;
    in[i].rank = inputs[i].rank;
    memcpy(in[i].dims, inputs[i].dims, sizeof in[i].dims);
    in[i].data = inputs[i].data;
  }
  st = nr_ref_exec_observed(g, in, out, observe, o, err);
  for (int i = 0; i < g->n_outputs; i++)
    nr_value_free(&out[i]);
  free(in);
  free(out);
  return st;
}

nr_status nr_calibration_collect(nr_model *m, int n_sets, const nr_buffer *inputs,
                                 nr_calibration **out, nr_error *err) {
  if (!m || !out || n_sets < 1 || !inputs)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_calibration_collect: needs a "
                     "model, at least one input set and an output pointer");
  *out = NULL;
  nr_status st = nr_model_prepare(m, err);
  if (st)
    return st;
  nr_calib *c = calloc(1, sizeof *c);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "calibration: out of memory");
  observe_ctx o = {c, err};
  int ni = nr_model_input_count(m);
  for (int s = 0; !st && s < n_sets; s++) {
    st = run_set(m, inputs + (size_t)s * (size_t)ni, &o, err);
    if (st)
      nr_error_prefix(err, "calibration input set %d: ", s);
    c->samples++;
  }
  if (st) {
    nr_calib_destroy(c);
    return st;
  }
  *out = c;
  return NR_OK;
}

nr_status nr_calibration_save(const nr_calibration *c, const char *path, nr_error *err) {
  if (!c || !path)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_calibration_save: NULL argument");
  uint8_t *bytes;
  size_t len;
  nr_status st = nr_calib_serialize(c, &bytes, &len, err);
  if (st)
    return st;
  st = nr_file_write_whole(path, bytes, len, "calibration table", err);
  free(bytes);
  return st;
}

nr_status nr_calibration_load(const char *path, nr_calibration **out, nr_error *err) {
  if (!path || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_calibration_load: NULL argument");
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return nr_errorf(err, NR_ERR_IO, "%s: %s", path, strerror(errno));
  uint8_t *bytes = NULL;
  size_t len = 0, cap = 0, got;
  nr_status st = NR_OK;
  do {
    if (len == cap) {
      cap = cap ? 2 * cap : 1 << 16;
      uint8_t *nb = cap < (1u << 30) ? realloc(bytes, cap) : NULL;
      if (!nb) {
        st = nr_errorf(err, NR_ERR_NOMEM, "%s: too large for a calibration table", path);
        break;
      }
      bytes = nb;
    }
    got = fread(bytes + len, 1, cap - len, f);
    len += got;
  } while (got);
  fclose(f);
  if (!st) {
    st = nr_calib_deserialize(bytes, len, out, err);
    if (st)
      nr_error_prefix(err, "%s: ", path);
  }
  free(bytes);
  return st;
}
