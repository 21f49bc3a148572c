/* backend.h - device backends as function tables (STYLE.md point 8): what the
 * compiler, the engine and the runtime ask of a device other than the CPU.
 *
 * Key decision: the CPU is not a backend here. Its path (host arena, thread pool,
 * tactics called in turn) is the runtime itself, and stays exactly as it was; a
 * device backend takes over at the few seams where a device plan differs: whether
 * the device is usable at all, its part of the engine fingerprint, the reorder
 * tactics the layout pass inserts, the engine's weights on the device, a context's
 * memory and stream, one run, and timing one tactic during a profiling build. Which
 * nodes a device runs is not a backend decision: the select pass keeps the tactics
 * whose `device` field is the build's (tactics are data), and `supports` below only
 * answers "can any of my tactics run this node?" for tools and messages.
 *
 * A build without the backend (no nvcc: NR_CUDA=OFF) still knows the device by name,
 * so asking for it gives a message saying so instead of a missing symbol. */
#ifndef NR_BACKENDS_BACKEND_H
#define NR_BACKENDS_BACKEND_H

#include "plan/engine.h"
#include "plan/pass.h"
#include "plan/tactic.h"

typedef struct nr_backend {
  nr_device device;
  const char *name; /* "cuda" */
  /* NR_OK when this process can run the device (driver, a device, libraries);
   * otherwise NR_ERR_UNSUPPORTED with a message that says what is missing. */
  nr_status (*check)(nr_error *err);
  /* Whether any of the backend's tactics supports the node (select does the real
   * choice). */
  bool (*supports)(const nr_tactic_ctx *c);
  /* Fills the device's fingerprint fields (fp->device is already set). */
  void (*fingerprint)(nr_fingerprint *fp);
  /* The tactic converting one layout into another on the device, or NULL. */
  const nr_tactic *(*reorder)(nr_layout from, nr_layout to);
  /* Makes the engine's per-engine device state (the weights, uploaded once) unless it
   * exists; safe to call from several threads. */
  nr_status (*engine_attach)(nr_engine *e, nr_error *err);
  void (*engine_detach)(nr_engine *e);
  /* One context: device arena, scratch, input buffers, stream, library handles. */
  nr_status (*context_create)(const nr_engine *e, void **state, nr_error *err);
  void (*context_destroy)(void *state);
  /* Copies inputs in, runs every step, copies the outputs into outs[i].data (host
   * buffers of the outputs' plain size) and waits for the stream. With hook, each
   * step is timed on the device and reported (no graph replay then). */
  nr_status (*context_run)(void *state, const nr_buffer *inputs, nr_buffer *outs,
                           nr_step_hook hook, void *hook_user, nr_error *err);
  /* Milliseconds the last run's steps took on the device (its events), or < 0. */
  double (*device_ms)(void *state);
  /* Evicts the engine's data from the device caches (bench: runs are not measured
   * hot); synchronous. */
  void (*flush_caches)(void *state);
  /* compile.tactic_selection=profile: times tactic t on step k alone on the device
   * (ms; < 0 when it fails). */
  double (*time_step)(nr_compile_ctx *cc, int k, const nr_tactic *t);
} nr_backend;

/* The backend of device d; NULL for the CPU and for a device this build lacks. */
const nr_backend *nr_backend_for(nr_device d);
/* NR_OK when d can run here: the CPU always; a device when its backend is built in
 * and its check passes. Otherwise NR_ERR_UNSUPPORTED naming what is missing. */
nr_status nr_backend_check(nr_device d, nr_error *err);

#endif
