/* fuzz_onnx.c - libFuzzer harness for ONNX model bytes, the whole way a user takes
 * them: load from memory, fix free input dims to 1, prepare, build along the default
 * route for one thread, create a context and run once on zeros.
 *
 * Key decision: a model is only built when every tensor of its prepared graph has a
 * known size within the caps of fuzz_util.h; a valid model may ask for gigabytes,
 * and refusing it is the harness's job, not a finding. External data is looked up
 * under a folder that does not exist, so no input reaches the file system. */
#include "api/nnroute_tools.h"
#include "fuzz_util.h"
#include "ir/ir.h"

#include <stdint.h>
#include <string.h>

/* 1 when the prepared graph's tensors are all of known size and within the caps. */
static int graph_fits(const nr_graph *g) {
  size_t total = 0;
  for (int i = 0; i < g->n_tensors; i++) {
    const nr_value *v = &g->tensors[i].value;
    if (v->dtype == NR_DTYPE_UNDEFINED && v->rank < 0)
      continue; /* an unused name */
    size_t nb = fuzz_info_bytes(v->dtype, v->rank, v->dims);
    if (nb > FUZZ_MAX_TENSOR_BYTES || (total += nb) > FUZZ_MAX_TOTAL_BYTES)
      return 0;
  }
  for (int i = 0; i < g->n_nodes; i++) /* loops may run for ever on their own data */
    if (!strcmp(g->nodes[i].op_type, "Loop") || !strcmp(g->nodes[i].op_type, "Scan"))
      return 0;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nr_load_options lo = {sizeof lo, "/nonexistent/nnroute-fuzz", FUZZ_MAX_TOTAL_BYTES};
  nr_model *m = NULL;
  nr_engine *e = NULL;
  if (nr_model_load_bytes(data, size, &lo, &m, NULL) || fuzz_fix_inputs(m) ||
      nr_model_prepare(m, NULL) || !graph_fits(nr_model_graph(m)))
    goto done;
  nr_build_options bo = {sizeof bo, NULL, 1, NR_DEVICE_CPU, NULL};
  if (!nr_engine_build(m, &bo, &e, NULL))
    fuzz_run_engine(e);
done:
  nr_engine_destroy(e);
  nr_model_destroy(m);
  return 0;
}
