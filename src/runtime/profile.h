/* profile.h - the per-step timing hook of a context (internal: `nnroute bench
 * --profile` and tests use it; it is not part of the public API).
 *
 * Key decision: the hook is chosen once per run, not tested per step. Without a hook
 * nr_context_run walks the steps exactly as before; with one it takes a second loop
 * that reads the monotonic clock around every step and reports the step index and
 * its wall time. Steps run in order on the calling thread, so the times of one run
 * add up to the run's time minus the input checks and the output copies. */
#ifndef NR_RUNTIME_PROFILE_H
#define NR_RUNTIME_PROFILE_H

#include "nnroute.h"
#include "plan/tactic.h"

/* Installs (fn != NULL) or removes (fn == NULL) the context's step hook. user is
 * passed back unchanged and must outlive the runs that use it. */
void nr_context_set_step_hook(nr_context *ctx, nr_step_hook fn, void *user);
/* The backend state of a device context (NULL for a CPU context): for the commands
 * that use device_ms and flush_caches. */
void *nr_context_device_state(const nr_context *c);
/* The backend of a device context (NULL for a CPU context). */
const struct nr_backend *nr_context_backend(const nr_context *c);

#endif
