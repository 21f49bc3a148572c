/* model_internal.h - what the public-API implementations in api/ share about a model
 * handle beyond nnroute_tools.h: the check of run inputs against its graph. */
#ifndef NR_API_MODEL_INTERNAL_H
#define NR_API_MODEL_INTERNAL_H

#include "api/nnroute_tools.h"
#include "nnroute.h"

/* Checks that inputs match the prepared graph's inputs (dtype and shape); the message
 * names the input and lists what the model expects. */
nr_status nr_model_check_inputs(const nr_model *m, const nr_buffer *inputs, nr_error *err);

#endif
