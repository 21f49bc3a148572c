/* nnroute_tools.h - what the tuner (src/tune) and the commands (src/cli) use of a
 * model handle beyond include/nnroute.h: the prepared graph that knob spaces are
 * built on, and the SHA-256 of the bytes it was loaded from.
 *
 * Key decision: this is the one header of api/ that the floors above it include.
 * Everything else the tools need (knob tables and spaces, routes, the engine record)
 * comes from the lower floors' own headers, never from another folder's *_internal.h
 * (scripts/check_layers.py holds that). */
#ifndef NR_API_NNROUTE_TOOLS_H
#define NR_API_NNROUTE_TOOLS_H

#include "ir/ir.h"
#include "nnroute.h"

#include <stdint.h>

/* The model's prepared graph (shapes known, constants folded, nodes named); owned by
 * the model and valid until nr_model_destroy. */
nr_graph *nr_model_graph(nr_model *m);
/* SHA-256 of the bytes the model was loaded from (32 bytes, owned by the model). */
const uint8_t *nr_model_sha256(const nr_model *m);

#endif
