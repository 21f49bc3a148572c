/* model_internal.h - what the compiler and commands may see of a model handle
 * beyond the public API: its graph and the SHA-256 of the bytes it was loaded from. */
#ifndef NR_RUNTIME_MODEL_INTERNAL_H
#define NR_RUNTIME_MODEL_INTERNAL_H

#include "ir/ir.h"
#include "nnroute.h"

nr_graph *nr_model_graph(nr_model *m);
/* Checks that inputs match the prepared graph's inputs (dtype and shape); the message
 * names the input and lists what the model expects. */
nr_status nr_model_check_inputs(const nr_model *m, const nr_buffer *inputs, nr_error *err);
const uint8_t *nr_model_sha256(const nr_model *m);

#endif
