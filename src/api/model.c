/* model.c - the public model handle: loading, input shapes, preparation and the
 * reference run (include/nnroute.h).
 *
 * A model owns its graph. Loading also orders the graph and binds every node to its
 * operator, so an unsupported operator is reported when the file is opened. Preparing
 * fixes the input shapes, infers shapes through the graph and folds constant
 * subgraphs; after that the shapes are fixed for the life of the handle. */
#include "nnroute.h"
#include "api/model_internal.h"
#include "io/tensor_io.h"
#include "ir/ir.h"
#include "kernels/ref/executor.h"
#include "onnx/onnx_load.h"
#include "util/error.h"
#include "util/sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nr_model {
  nr_graph *graph;
  bool prepared;
  uint8_t sha256[32]; /* of the ModelProto bytes */
};

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return strdup(".");
  size_t n = (size_t)(slash - path);
  char *d = malloc(n + 2);
  if (d) {
    memcpy(d, path, n ? n : 1);
    d[n ? n : 1] = '\0';
  }
  return d;
}

static nr_status finish_load(nr_graph *g, const void *bytes, size_t len, nr_model **out,
                             nr_error *err) {
  nr_status st = nr_graph_toposort(g, err);
  if (!st)
    st = nr_graph_bind_ops(g, err);
  if (st) {
    nr_graph_destroy(g);
    return st;
  }
  nr_model *m = calloc(1, sizeof *m);
  if (!m) {
    nr_graph_destroy(g);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  }
  m->graph = g;
  nr_sha256(bytes, len, m->sha256);
  *out = m;
  return NR_OK;
}

nr_status nr_model_load_bytes(const void *data, size_t len, const nr_load_options *opts,
                              nr_model **out, nr_error *err) {
  if (!data || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_model_load_bytes: NULL argument");
  *out = NULL;
  const char *base = opts && opts->size >= sizeof *opts ? opts->base_dir : NULL;
  size_t max_bytes = opts && opts->size >= sizeof *opts ? opts->max_bytes : 0;
  nr_graph *g = NULL;
  nr_status st = nr_onnx_load(data, len, base, max_bytes, &g, err);
  if (st)
    return st;
  return finish_load(g, data, len, out, err);
}

nr_status nr_model_load(const char *path, const nr_load_options *opts, nr_model **out,
                        nr_error *err) {
  if (!path || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_model_load: NULL argument");
  *out = NULL;
  uint8_t *data = NULL;
  size_t len = 0;
  nr_status st = nr_io_read_file(path, (size_t)1 << 40, &data, &len, err);
  if (st)
    return st;
  nr_load_options o = {sizeof o, NULL, 0};
  if (opts && opts->size >= sizeof o)
    o = *opts;
  char *dir = o.base_dir ? NULL : dir_of(path);
  if (!o.base_dir)
    o.base_dir = dir;
  st = nr_model_load_bytes(data, len, &o, out, err);
  if (st)
    nr_error_prefix(err, "%s: ", path);
  free(dir);
  free(data);
  return st;
}

void nr_model_destroy(nr_model *m) {
  if (!m)
    return;
  nr_graph_destroy(m->graph);
  free(m);
}

int nr_model_input_count(const nr_model *m) { return m->graph->n_inputs; }
int nr_model_output_count(const nr_model *m) { return m->graph->n_outputs; }

static nr_status io_info(const nr_graph *g, int t, nr_io_info *info) {
  const nr_tensor *ten = &g->tensors[t];
  info->name = ten->name;
  info->dtype = ten->value.dtype;
  info->rank = ten->value.rank;
  memcpy(info->dims, ten->value.dims, sizeof info->dims);
  return NR_OK;
}

nr_status nr_model_input_info(const nr_model *m, int i, nr_io_info *info) {
  if (i < 0 || i >= m->graph->n_inputs)
    return NR_ERR_INVALID_ARGUMENT;
  return io_info(m->graph, m->graph->inputs[i], info);
}

nr_status nr_model_output_info(const nr_model *m, int i, nr_io_info *info) {
  if (i < 0 || i >= m->graph->n_outputs)
    return NR_ERR_INVALID_ARGUMENT;
  return io_info(m->graph, m->graph->outputs[i], info);
}

static int find_input(const nr_model *m, const char *name) {
  for (int i = 0; i < m->graph->n_inputs; i++)
    if (!strcmp(m->graph->tensors[m->graph->inputs[i]].name, name))
      return i;
  return -1;
}

nr_status nr_model_set_input_shape(nr_model *m, const char *name, int rank,
                                   const int64_t *dims, nr_error *err) {
  int i = find_input(m, name);
  if (i < 0)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "the model has no input named '%s'",
                     name);
  if (m->prepared)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "input '%s': shapes are fixed once the model is prepared", name);
  if (rank < 0 || rank > NR_MAX_RANK)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "input '%s': rank %d is not allowed",
                     name, rank);
  nr_value *v = &m->graph->tensors[m->graph->inputs[i]].value;
  char buf[128];
  if (v->rank >= 0 && v->rank != rank)
    return nr_errorf(err, NR_ERR_SHAPE, "input '%s' is declared %s, rank %d given", name,
                     nr_value_describe(v, buf, sizeof buf), rank);
  for (int d = 0; d < rank; d++) {
    if (dims[d] < 0)
      return nr_errorf(err, NR_ERR_SHAPE, "input '%s': dimension %d is negative", name, d);
    if (v->rank == rank && v->dims[d] >= 0 && v->dims[d] != dims[d])
      return nr_errorf(err, NR_ERR_SHAPE,
                       "input '%s' is declared %s; dimension %d cannot be %lld", name,
                       nr_value_describe(v, buf, sizeof buf), d, (long long)dims[d]);
  }
  v->rank = rank;
  if (rank > 0)
    memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  return NR_OK;
}

nr_status nr_model_set_input_constant(nr_model *m, const char *name,
                                      const nr_buffer *value, nr_error *err) {
  if (!m || !name || !value || (!value->data && nr_buffer_count(value)))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "nr_model_set_input_constant: NULL "
                     "argument");
  int i = find_input(m, name);
  nr_status st = nr_model_set_input_shape(m, name, value->rank, value->dims, err);
  if (st)
    return st;
  nr_graph *g = m->graph;
  nr_tensor *t = &g->tensors[g->inputs[i]];
  char buf[128];
  if (value->dtype != t->value.dtype)
    return nr_errorf(err, NR_ERR_SHAPE,
                     "input '%s' is declared %s; a %s constant cannot "
                     "replace it",
                     name, nr_value_describe(&t->value, buf, sizeof buf),
                     nr_dtype_name(value->dtype));
  nr_value v = {0};
  if ((st = nr_value_alloc(&v, value->dtype, value->rank, value->dims, err)))
    return st;
  memcpy(v.data, value->data, nr_value_nbytes(&v));
  nr_value_free(&t->value);
  t->value = v;
  t->flags = (t->flags & ~(unsigned)NR_TENSOR_INPUT) | NR_TENSOR_CONST;
  memmove(g->inputs + i, g->inputs + i + 1,
          sizeof *g->inputs * (size_t)(g->n_inputs - i - 1));
  g->n_inputs--;
  return NR_OK;
}

nr_status nr_model_prepare(nr_model *m, nr_error *err) {
  if (m->prepared)
    return NR_OK;
  char buf[128];
  for (int i = 0; i < m->graph->n_inputs; i++) {
    const nr_tensor *t = &m->graph->tensors[m->graph->inputs[i]];
    if (!nr_value_shape_known(&t->value))
      return nr_errorf(err, NR_ERR_SHAPE,
                       "input '%s' has dynamic shape %s: give it a shape (--shape %s=DIMS)",
                       t->name, nr_value_describe(&t->value, buf, sizeof buf), t->name);
  }
  nr_status st = nr_graph_fold_constants(m->graph, err);
  if (st)
    return st;
  m->prepared = true;
  return NR_OK;
}

/* Lists every input with its expected dtype and shape, for error messages. */
static void describe_inputs(const nr_model *m, char *out, size_t cap) {
  size_t len = 0;
  char buf[128];
  out[0] = '\0';
  for (int i = 0; i < m->graph->n_inputs && len < cap; i++) {
    const nr_tensor *t = &m->graph->tensors[m->graph->inputs[i]];
    len += (size_t)snprintf(out + len, cap - len, "%s'%s' %s", i ? ", " : "", t->name,
                            nr_value_describe(&t->value, buf, sizeof buf));
  }
}

nr_status nr_model_check_inputs(const nr_model *m, const nr_buffer *inputs, nr_error *err) {
  char want[640], got[128];
  for (int i = 0; i < m->graph->n_inputs; i++) {
    const nr_tensor *t = &m->graph->tensors[m->graph->inputs[i]];
    nr_value v = {inputs[i].dtype, inputs[i].rank, {0}, inputs[i].data, false};
    bool ok = v.rank >= 0 && v.rank <= NR_MAX_RANK && v.data &&
              v.dtype == t->value.dtype && v.rank == t->value.rank;
    if (v.rank >= 0 && v.rank <= NR_MAX_RANK)
      memcpy(v.dims, inputs[i].dims, sizeof(int64_t) * (size_t)v.rank);
    for (int d = 0; ok && d < v.rank; d++)
      ok = v.dims[d] == t->value.dims[d];
    if (!ok) {
      describe_inputs(m, want, sizeof want);
      return nr_errorf(err, NR_ERR_SHAPE, "input '%s' is %s; the model expects: %s",
                       t->name,
                       v.rank < 0 || v.rank > NR_MAX_RANK
                           ? "malformed" : nr_value_describe(&v, got, sizeof got),
                       want);
    }
  }
  return NR_OK;
}

nr_status nr_model_run(nr_model *m, const nr_buffer *inputs, nr_buffer *outputs,
                       nr_error *err) {
  if (!m || (!inputs && m->graph->n_inputs) || !outputs)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_model_run: NULL argument");
  nr_status st = nr_model_prepare(m, err);
  if (!st)
    st = nr_model_check_inputs(m, inputs, err);
  if (st)
    return st;
  int ni = m->graph->n_inputs, no = m->graph->n_outputs;
  nr_value *in = calloc((size_t)(ni ? ni : 1), sizeof *in);
  nr_value *out = calloc((size_t)(no ? no : 1), sizeof *out);
  if (!in || !out) {
    free(in);
    free(out);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < ni; i++) {
    in[i].dtype = inputs[i].dtype;
    in[i].rank = inputs[i].rank;
    memcpy(in[i].dims, inputs[i].dims, sizeof in[i].dims);
    in[i].data = inputs[i].data;
  }
  st = nr_ref_exec(m->graph, in, out, err);
  for (int i = 0; i < no; i++) {
    memset(&outputs[i], 0, sizeof outputs[i]);
    if (st) {
      nr_value_free(&out[i]);
      continue;
    }
    outputs[i].dtype = out[i].dtype;
    outputs[i].rank = out[i].rank;
    memcpy(outputs[i].dims, out[i].dims, sizeof outputs[i].dims);
    if (out[i].owned) {
      outputs[i].data = out[i].data;
    } else { /* a view of a constant: give the caller its own copy */
      size_t n = nr_value_nbytes(&out[i]);
      outputs[i].data = malloc(n ? n : 1);
      if (outputs[i].data)
        memcpy(outputs[i].data, out[i].data, n);
      else
        st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    }
  }
  free(in);
  free(out);
  return st;
}

nr_graph *nr_model_graph(nr_model *m) { return m->graph; }
const uint8_t *nr_model_sha256(const nr_model *m) { return m->sha256; }
