/* tools_engine.c - the engine half of the tools API (nnroute_tools.h): an engine's
 * record, environment and steps as plain structs, the plan hash, what measuring needs
 * of a context (the backend's device timer and cache flush, the step hook) and the
 * calibration digests.
 *
 * Key decision: this file is the one reader of the plan on behalf of the commands.
 * What a step "is" for people (a reorder, the test fault step, a step on the
 * reference tactic) is decided here once, from the tactic record, so `build`,
 * `inspect` and `bench` cannot disagree about it. */
#include "api/nnroute_tools.h"
#include "backends/backend.h"
#include "engine/engine.h"
#include "ir/fused.h"
#include "plan/quant.h"
#include "runtime/profile.h"
#include "util/error.h"

#include <stdio.h>
#include <string.h>

/* ---- steps ------------------------------------------------------------------------ */

static bool is_fault(const nr_step *s) {
  return s->node < 0 && s->tactic->algo && !strcmp(s->tactic->algo, "fault");
}

static unsigned step_flags(const nr_plan *p, const nr_step *s) {
  unsigned f = 0;
  if (s->tactic->source && !strcmp(s->tactic->source, "ref"))
    f |= NR_STEP_INFO_REFERENCE;
  if (is_fault(s))
    f |= NR_STEP_INFO_FAULT;
  else if (s->node < 0)
    f |= NR_STEP_INFO_REORDER;
  if (s->node >= 0 && !strcmp(p->graph->nodes[s->node].domain, NR_DOMAIN))
    f |= NR_STEP_INFO_FUSED;
  return f;
}

static const nr_slot *io_slot(const nr_plan *p, const nr_step *s, bool out, int i) {
  int n = out ? s->n_out : s->n_in;
  int idx = i < n ? (out ? s->out[i] : s->in[i]) : -1;
  return idx >= 0 ? &p->slots[idx] : NULL;
}

static bool valid_step(const nr_engine *e, int k) {
  return e && e->plan && k >= 0 && k < e->plan->n_steps;
}

nr_status nr_engine_step(const nr_engine *e, int k, nr_step_detail *out) {
  if (!out || !valid_step(e, k))
    return NR_ERR_INVALID_ARGUMENT;
  const nr_plan *p = e->plan;
  const nr_step *s = &p->steps[k];
  const nr_node *n = s->node >= 0 ? &p->graph->nodes[s->node] : NULL;
  const nr_slot *in = io_slot(p, s, false, 0), *o = io_slot(p, s, true, 0);
  const nr_slot *d = o ? o : in;
  *out = (nr_step_detail){
      .size = sizeof *out, .node = s->node, .node_name = n ? n->name : NULL,
      .op_domain = n ? n->domain : NULL, .op_type = n ? n->op_type : NULL,
      .tactic = s->tactic->id, .source = s->tactic->source ? s->tactic->source : "",
      .precision = nr_precision_name(s->tactic->precision), .flags = step_flags(p, s),
      .layout_in = in ? nr_layout_name(in->layout) : NULL,
      .layout_out = o ? nr_layout_name(o->layout) : NULL,
      .dtype = d ? d->dtype : NR_DTYPE_UNDEFINED, .n_outputs = s->n_out,
      .scratch_bytes = s->scratch, .packed_bytes = s->packed_size};
  return NR_OK;
}

nr_status nr_engine_step_output(const nr_engine *e, int k, int o, nr_slot_info *out) {
  if (!out || !valid_step(e, k) || o < 0)
    return NR_ERR_INVALID_ARGUMENT;
  const nr_slot *s = io_slot(e->plan, &e->plan->steps[k], true, o);
  if (!s)
    return NR_ERR_INVALID_ARGUMENT;
  *out = (nr_slot_info){.size = sizeof *out, .name = s->name ? s->name : "",
                        .dtype = s->dtype, .rank = s->rank, .offset = s->offset,
                        .nbytes = s->nbytes};
  memcpy(out->dims, s->dims, sizeof out->dims);
  return NR_OK;
}

/* ---- the record ------------------------------------------------------------------- */

static void count_steps(const nr_plan *p, nr_engine_summary *s) {
  for (int k = 0; k < p->n_steps; k++) {
    unsigned f = step_flags(p, &p->steps[k]);
    s->reference_steps += (f & NR_STEP_INFO_REFERENCE) != 0;
    s->reorder_steps += (f & NR_STEP_INFO_REORDER) != 0;
  }
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].kind == NR_SLOT_ABSORBED) {
      s->absorbed_constants++;
      s->absorbed_bytes += p->slots[i].nbytes;
    }
}

nr_status nr_engine_summarize(const nr_engine *e, nr_engine_summary *out, nr_error *err) {
  if (!e || !e->plan || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "no engine to summarize");
  const nr_plan *p = e->plan;
  *out = (nr_engine_summary){.size = sizeof *out,
                             .route = p->route ? p->route : "",
                             .device = p->device,
                             .n_steps = p->n_steps,
                             .ignored_knobs = p->ignored_knobs,
                             .threads = e->threads,
                             .build_ms = e->build_ms,
                             .arena_bytes = p->arena_size,
                             .scratch_bytes = p->scratch_size,
                             .weights_bytes = p->weights_size,
                             .nnroute_version = e->nnroute_version,
                             .knob_schema = e->knob_schema,
                             .model_sha256 = e->model_sha256,
                             .ignored = p->ignored ? p->ignored : "",
                             .effective_route = p->effective_route ? p->effective_route
                                                                   : ""};
  count_steps(p, out);
  if (e->calib && !nr_calib_digest(e->calib, out->calib_sha256, NULL)) {
    out->calib_tensors = e->calib->n;
    out->calib_input_sets = e->calib->samples;
  } else {
    out->calib_sha256[0] = '\0';
  }
  return NR_OK;
}

nr_status nr_engine_knob_use(const nr_engine *e, const nr_knob_list *l, uint8_t *use,
                             nr_error *err) {
  if (!e || !e->plan || !e->plan->knob_use || !l || !use)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "the engine has no record of its "
                     "route's use (only a build's engine has one)");
  memset(use, 0, (size_t)l->n);
  const nr_plan *p = e->plan;
  for (int i = 0; i < p->n_knob_use; i++) {
    const nr_plan_knob_use *u = &p->knob_use[i];
    int k = nr_knob_list_find(l, u->id);
    if (k < 0)
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                       "knob instance '%s' of the engine "
                       "is not in the knob list (another model or device)",
                       u->id);
    use[k] = (uint8_t)((u->bits & NR_ROUTE_READ ? NR_KNOB_USE_READ : 0) |
                       (u->bits & NR_ROUTE_EFFECTIVE ? NR_KNOB_USE_EFFECTIVE : 0) |
                       (u->value ? NR_KNOB_USE_SET : 0));
  }
  return NR_OK;
}

/* ---- environments ----------------------------------------------------------------- */

#define COPY(field) snprintf(out->field, sizeof out->field, "%s", fp->field)

static void env_from(const nr_fingerprint *fp, nr_environment *out) {
  *out = (nr_environment){.size = sizeof *out, .cores = fp->cores, .device = fp->device};
  COPY(cpu_vendor);
  COPY(cpu_model);
  COPY(isa);
  COPY(openblas);
  COPY(onednn);
  COPY(compiler);
  COPY(gpu);
  COPY(gpu_cc);
  COPY(gpu_driver);
  COPY(cuda_runtime);
  COPY(cublas);
  COPY(cudnn);
}

#undef COPY

nr_status nr_engine_environment(const nr_engine *e, nr_environment *out) {
  if (!e || !out)
    return NR_ERR_INVALID_ARGUMENT;
  env_from(&e->fingerprint, out);
  return NR_OK;
}

nr_status nr_environment_current_isolated(nr_device d, nr_environment *out) {
  if (!out)
    return NR_ERR_INVALID_ARGUMENT;
  nr_fingerprint fp;
  nr_fingerprint_current_isolated(&fp, d);
  env_from(&fp, out);
  return NR_OK;
}

/* ---- plan hash -------------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static uint64_t fnv_str(uint64_t h, const char *s) {
  return fnv(h, s ? s : "", strlen(s ? s : "") + 1);
}

static uint64_t hash_steps(uint64_t h, const nr_plan *p) {
  for (int k = 0; k < p->n_steps; k++) {
    const nr_step *s = &p->steps[k];
    h = fnv_str(h, s->tactic->id);
    h = fnv(h, &s->node, sizeof s->node);
    h = fnv(h, s->in, sizeof(int) * (size_t)s->n_in);
    h = fnv(h, s->out, sizeof(int) * (size_t)s->n_out);
    h = fnv(h, &s->packed_size, sizeof s->packed_size);
    h = fnv(h, &s->scratch, sizeof s->scratch);
    h = fnv(h, &s->threads, sizeof s->threads);
    h = fnv(h, s->params, sizeof s->params);
  }
  return h;
}

static uint64_t hash_slots(uint64_t h, const nr_plan *p) {
  for (int i = 0; i < p->n_slots; i++) {
    const nr_slot *s = &p->slots[i];
    h = fnv(h, &s->dtype, sizeof s->dtype);
    h = fnv(h, s->dims, sizeof(int64_t) * (size_t)s->rank);
    h = fnv(h, &s->layout, sizeof s->layout);
    h = fnv(h, &s->kind, sizeof s->kind);
    h = fnv(h, &s->nbytes, sizeof s->nbytes);
    h = fnv(h, &s->offset, sizeof s->offset);
    h = fnv(h, &s->alias_of, sizeof s->alias_of);
  }
  return h;
}

uint64_t nr_engine_plan_hash(const nr_engine *e) {
  if (!e || !e->plan)
    return 0;
  const nr_plan *p = e->plan;
  uint64_t h = 1469598103934665603ull;
  for (int k = 0; k < p->graph->n_nodes; k++) {
    const nr_node *n = &p->graph->nodes[k];
    h = fnv_str(fnv_str(fnv_str(h, n->domain), n->op_type), n->name);
  }
  h = hash_slots(hash_steps(h, p), p);
  h = fnv(h, &p->arena_size, sizeof p->arena_size);
  return fnv(h, p->weights, (size_t)p->weights_size);
}

/* ---- measuring -------------------------------------------------------------------- */

static const nr_backend *device_backend(const nr_context *ctx) {
  return nr_context_backend(ctx);
}

const char *nr_context_device(const nr_context *ctx) {
  const nr_backend *be = device_backend(ctx);
  return be ? be->name : NULL;
}

double nr_context_device_ms(nr_context *ctx) {
  const nr_backend *be = device_backend(ctx);
  return be ? be->device_ms(nr_context_device_state(ctx)) : -1;
}

void nr_context_flush_caches(nr_context *ctx) {
  const nr_backend *be = device_backend(ctx);
  if (be)
    be->flush_caches(nr_context_device_state(ctx));
}

void nr_context_time_steps(nr_context *ctx, void (*fn)(void *user, int step, double ms),
                           void *user) {
  nr_context_set_step_hook(ctx, fn, user);
}

/* ---- calibration -------------------------------------------------------------------- */

nr_status nr_calibration_digest(const nr_calibration *c, char hex[65], nr_error *err) {
  return nr_calib_digest(c, hex, err);
}

nr_status nr_calibration_serialize(const nr_calibration *c, uint8_t **bytes, size_t *len,
                                   nr_error *err) {
  return nr_calib_serialize(c, bytes, len, err);
}
