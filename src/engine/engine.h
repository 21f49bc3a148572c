/* engine.h - the engine file: serializing and parsing an engine (the record is
 * plan/engine.h), and the environment fingerprint it is checked against.
 *
 * The file format is specified at the top of engine_format.c; loading checks every
 * length, offset and the checksum before using a byte, and refuses an engine whose
 * fingerprint, nnroute version or knob schema differs from this process's. */
#ifndef NR_ENGINE_ENGINE_H
#define NR_ENGINE_ENGINE_H

#include "nnroute.h"
#include "plan/engine.h"
#include "plan/tactic.h"

/* The fingerprint of this process's environment (for CPU engines). */
void nr_fingerprint_current(nr_fingerprint *fp);
/* The same for engines of device d: the device's fields filled by its backend (or
 * "none (...)" saying why they cannot be). */
void nr_fingerprint_current_for(nr_fingerprint *fp, nr_device d);
/* NR_OK when equal; otherwise a message naming each field that differs, with both
 * values ("cpu_model: engine 'X', this machine 'Y'"). */
nr_status nr_fingerprint_compare(const nr_fingerprint *engine, const nr_fingerprint *here,
                                 nr_error *err);
/* nr_fingerprint_current_for computed in a short-lived child process, so this process
 * never initializes the device's driver: for callers that fork workers afterwards
 * (the tuner), since a CUDA driver initialized before fork() is unusable in the child. */
void nr_fingerprint_current_isolated(nr_fingerprint *fp, nr_device d);

/* Serializes e into a malloc'ed buffer. */
nr_status nr_engine_serialize(const nr_engine *e, uint8_t **data, size_t *len,
                              nr_error *err);
/* Parses and validates an engine. With check_env, an engine built for another
 * fingerprint, nnroute version or knob schema is refused (NR_ERR_INVALID_ARGUMENT with
 * a message naming what differs); corrupt or truncated data gives NR_ERR_INVALID_MODEL
 * naming the section and offset. */
nr_status nr_engine_parse(const uint8_t *data, size_t len, bool check_env, nr_engine **out,
                          nr_error *err);
void nr_engine_free(nr_engine *e);
/* e signs its file with an HMAC-SHA-256 under a copy of key when serialized
 * (engine_sign.c); nr_engine_clear_sign_key wipes and frees the copy (nr_engine_free
 * calls it). An empty key is NR_ERR_INVALID_ARGUMENT. */
nr_status nr_engine_set_sign_key(nr_engine *e, const void *key, size_t len, nr_error *err);
void nr_engine_clear_sign_key(nr_engine *e);

#endif
