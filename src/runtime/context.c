/* context.c - execution contexts: the memory and threads of one run at a time.
 *
 * Key decision: everything a run writes lives in the context (arena, scratch, thread
 * pool), and the engine's plan is only read, so any number of contexts may run one
 * engine at once on different threads. Slot addresses are resolved per step from the
 * plan (ARENA -> arena + offset, CONST -> weights + offset, INPUT -> the caller's
 * buffer); the memory pass already gave in-place outputs their input's offset, so the
 * runtime knows nothing of aliasing. The plan is checked once at creation (every
 * offset and index in range), because an engine may come from a file.
 *
 * A device engine's context (plan->device != CPU) belongs to its backend
 * (backends/backend.h): the checks and the output buffers are done here, the memory,
 * streams and the running of the steps there. */
#include "backends/backend.h"
#include "plan/engine.h"
#include "plan/step_infer.h"
#include "runtime/profile.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIGN 64u

struct nr_context {
  const nr_engine *engine;
  const nr_plan *plan;
  uint8_t *arena;
  uint8_t *scratch;
  nr_threadpool *pool;
  nr_step_hook hook; /* per-step timing (profile.h); NULL on the normal path */
  void *hook_user;
  const nr_backend *backend; /* device engines: the backend and its context state */
  void *device;
  /* What an absorbed constant's slot points at: zeros the size of the largest one.
   * Its readers use their packed data and never look; if a tampered engine makes a
   * step read one anyway, it reads zeros instead of dereferencing NULL. calloc maps
   * large blocks lazily, so the pages cost nothing until touched. */
  void *absorbed;
  /* Per step: its output shapes depend on the data of a run-time input (a Reshape's
   * shape, a Reduce's axes, Resize's sizes fed as graph inputs), so each run checks
   * that data against the shapes the plan was built for before the step runs. */
  bool *data_shapes;
};

static void *alloc_aligned(uint64_t size) {
  if (size > SIZE_MAX - ALIGN) /* a size from a file: rounding up must not wrap */
    return NULL;
  size = (size + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
  return aligned_alloc(ALIGN, size ? size : ALIGN);
}

static size_t plain_bytes(const nr_slot *s) {
  size_t n = nr_dtype_size(s->dtype);
  for (int d = 0; d < s->rank; d++)
    n *= (size_t)s->dims[d];
  return n;
}

/* ---- plan validation ------------------------------------------------------------ */

static nr_status check_slot(const nr_plan *p, int i, nr_error *err) {
  const nr_slot *s = &p->slots[i];
  uint64_t limit = s->kind == NR_SLOT_ARENA ? p->arena_size : p->weights_size;
  if (s->kind == NR_SLOT_INPUT) {
    if (s->offset >= (uint64_t)p->n_inputs)
      return nr_errorf(err, NR_ERR_INTERNAL, "slot '%s': input index %llu of %d",
                       s->name ? s->name : "?", (unsigned long long)s->offset, p->n_inputs);
    return NR_OK;
  }
  if (s->kind == NR_SLOT_ABSORBED)
    return NR_OK;
  if (s->kind != NR_SLOT_ARENA && s->kind != NR_SLOT_CONST)
    return nr_errorf(err, NR_ERR_INTERNAL, "slot '%s': unknown kind %d",
                     s->name ? s->name : "?", (int)s->kind);
  if (s->offset > limit || s->nbytes > limit - s->offset)
    return nr_errorf(err, NR_ERR_INTERNAL,
                     "slot '%s': bytes [%llu, +%llu) outside the %s (%llu bytes)",
                     s->name ? s->name : "?", (unsigned long long)s->offset,
                     (unsigned long long)s->nbytes,
                     s->kind == NR_SLOT_ARENA ? "arena" : "weights",
                     (unsigned long long)limit);
  return NR_OK;
}

static nr_status check_step(const nr_plan *p, int k, nr_error *err) {
  const nr_step *st = &p->steps[k];
  if (!st->tactic || !st->tactic->run)
    return nr_errorf(err, NR_ERR_INTERNAL, "step %d has no tactic", k);
  if (st->n_in < 0 || st->n_in > NR_STEP_MAX_IO || st->n_out < 0 ||
      st->n_out > NR_STEP_MAX_IO || st->node >= (p->graph ? p->graph->n_nodes : 0) ||
      st->node < -1)
    return nr_errorf(err, NR_ERR_INTERNAL, "step %d (%s): malformed", k, st->tactic->id);
  for (int j = 0; j < st->n_in + st->n_out; j++) {
    int s = j < st->n_in ? st->in[j] : st->out[j - st->n_in];
    if (s < -1 || s >= p->n_slots)
      return nr_errorf(err, NR_ERR_INTERNAL, "step %d (%s): slot %d of %d", k,
                       st->tactic->id, s, p->n_slots);
  }
  if (st->packed_size && (st->packed_offset > p->weights_size ||
                          st->packed_size > p->weights_size - st->packed_offset))
    return nr_errorf(err, NR_ERR_INTERNAL, "step %d (%s): packed data outside the weights",
                     k, st->tactic->id);
  if (st->scratch > p->scratch_size)
    return nr_errorf(err, NR_ERR_INTERNAL, "step %d (%s): needs %llu scratch bytes of %llu",
                     k, st->tactic->id, (unsigned long long)st->scratch,
                     (unsigned long long)p->scratch_size);
  return NR_OK;
}

/* Graph inputs are the caller's plain buffers; graph outputs are copied out plainly. */
static nr_status check_io_slot(const nr_plan *p, int i, nr_error *err) {
  bool is_in = i < p->n_inputs;
  int idx = is_in ? i : i - p->n_inputs;
  int s = is_in ? p->inputs[idx] : p->outputs[idx];
  const char *what = is_in ? "input" : "output";
  if (s < 0 || s >= p->n_slots)
    return nr_errorf(err, NR_ERR_INTERNAL, "graph %s %d has slot %d of %d", what, idx, s,
                     p->n_slots);
  const nr_slot *sl = &p->slots[s];
  if (is_in && (sl->kind != NR_SLOT_INPUT || sl->offset != (uint64_t)idx))
    return nr_errorf(err, NR_ERR_INTERNAL, "graph input %d: slot '%s' is not input %d",
                     idx, sl->name ? sl->name : "?", idx);
  if (sl->layout != NR_LAYOUT_PLAIN || sl->rank < 0 || sl->rank > NR_MAX_RANK ||
      plain_bytes(sl) > sl->nbytes)
    return nr_errorf(err, NR_ERR_INTERNAL, "graph %s '%s': layout %s, %llu bytes: not a "
                     "plain tensor", what, sl->name ? sl->name : "?",
                     nr_layout_name(sl->layout), (unsigned long long)sl->nbytes);
  return NR_OK;
}

static nr_status check_plan(const nr_plan *p, nr_error *err) {
  nr_status st = NR_OK;
  for (int i = 0; !st && i < p->n_slots; i++)
    st = check_slot(p, i, err);
  for (int k = 0; !st && k < p->n_steps; k++)
    st = check_step(p, k, err);
  for (int i = 0; !st && i < p->n_inputs + p->n_outputs; i++)
    st = check_io_slot(p, i, err);
  return st;
}

static const char *slot_describe(const nr_slot *s, char *buf, size_t cap);

/* ---- outputs whose shape a run's data decides --------------------------------------- */

/* The steps whose rule leaves an output shape unknown without run-time data. */
static nr_status find_data_shapes(nr_context *c, nr_error *err) {
  const nr_plan *p = c->plan;
  c->data_shapes = calloc((size_t)p->n_steps + 1, sizeof *c->data_shapes);
  if (!c->data_shapes)
    return nr_errorf(err, NR_ERR_NOMEM, "nr_context_create: out of memory");
  for (int k = 0; k < p->n_steps; k++) {
    nr_value out[NR_STEP_MAX_IO];
    nr_error ie = {0};
    c->data_shapes[k] = !nr_step_infer(p, &p->steps[k], NULL, 0, out, &ie) &&
                        nr_step_shape_differs(p, &p->steps[k], out, true) >= 0;
  }
  return NR_OK;
}

/* The input of step st that decides output o's shape: the first whose data, left
 * out, no longer gives o a shape other than the plan's; -1 if none alone does. */
static int deciding_input(const nr_plan *p, const nr_step *st, void *const *in, int o) {
  for (int i = 0; i < st->n_in && i < 32; i++) {
    nr_value out[NR_STEP_MAX_IO];
    nr_error ie = {0};
    if (st->in[i] < 0 || !in[i] || p->slots[st->in[i]].kind == NR_SLOT_CONST)
      continue;
    if (!nr_step_infer(p, st, in, 1u << i, out, &ie) &&
        nr_step_shape_differs(p, st, out, false) != o)
      return i;
  }
  return -1;
}

/* Before step k runs: the data it is fed must give the output shapes of the plan. */
static nr_status check_data_shapes(const nr_context *c, int k, void *const *in,
                                   nr_error *err) {
  const nr_plan *p = c->plan;
  const nr_step *st = &p->steps[k];
  const nr_node *n = &p->graph->nodes[st->node];
  nr_value out[NR_STEP_MAX_IO];
  nr_error ie = {0};
  char got[128], want[128];
  if (nr_step_infer(p, st, in, 0, out, &ie))
    return nr_errorf(err, NR_ERR_SHAPE, "step %d, node '%s' (%s): the run's inputs do not "
                     "fit the op: %s", k, n->name, n->op_type, ie.message);
  int o = nr_step_shape_differs(p, st, out, false);
  if (o < 0)
    return NR_OK;
  int i = deciding_input(p, st, in, o);
  const nr_slot *y = &p->slots[st->out[o]];
  return nr_errorf(err, NR_ERR_SHAPE, "step %d, node '%s' (%s): input %d '%s' gives output "
                   "'%s' the shape %s, but the engine was built for %s; a value that "
                   "decides a shape is fixed when the engine is built (rebuild it for this "
                   "value)", k, n->name, n->op_type, i,
                   i >= 0 && p->slots[st->in[i]].name ? p->slots[st->in[i]].name : "?",
                   y->name ? y->name : "?", nr_value_describe(&out[o], got, sizeof got),
                   slot_describe(y, want, sizeof want));
}

/* ---- create / destroy ----------------------------------------------------------- */

/* The backend uploads the engine's weights once (its first context) and makes the
 * context's device memory and stream. */
static nr_status create_on_device(nr_context *c, nr_context **out, nr_error *err) {
  nr_device d = c->plan->device;
  nr_status st = nr_backend_check(d, err);
  c->backend = nr_backend_for(d);
  if (!st)
    st = c->backend->engine_attach((nr_engine *)c->engine, err);
  if (!st)
    st = c->backend->context_create(c->engine, &c->device, err);
  if (st) {
    free(c);
    return st;
  }
  *out = c;
  return NR_OK;
}

nr_status nr_context_create(const nr_engine *engine, int threads, nr_context **out,
                            nr_error *err) {
  if (!engine || !engine->plan || !out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_context_create: NULL argument");
  *out = NULL;
  nr_status st = check_plan(engine->plan, err);
  if (st)
    return st;
  nr_context *c = calloc(1, sizeof *c);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "nr_context_create: out of memory");
  c->engine = engine;
  c->plan = engine->plan;
  if (c->plan->device != NR_DEVICE_CPU)
    return create_on_device(c, out, err);
  if (threads <= 0)
    threads = engine->threads; /* <= 0 again: every online CPU */
  c->arena = alloc_aligned(c->plan->arena_size);
  c->scratch = alloc_aligned(c->plan->scratch_size);
  uint64_t absorbed = 0;
  for (int i = 0; i < c->plan->n_slots; i++)
    if (c->plan->slots[i].kind == NR_SLOT_ABSORBED && c->plan->slots[i].nbytes > absorbed)
      absorbed = c->plan->slots[i].nbytes;
  c->absorbed = absorbed ? calloc(1, absorbed) : NULL;
  if ((st = find_data_shapes(c, err))) {
    nr_context_destroy(c);
    return st;
  }
  if (threads != 1)
    c->pool = nr_threadpool_create(threads);
  if (!c->arena || !c->scratch || (threads != 1 && !c->pool) || (absorbed && !c->absorbed)) {
    nr_context_destroy(c);
    return nr_errorf(err, NR_ERR_NOMEM,
                     "nr_context_create: cannot allocate %llu arena + %llu scratch bytes "
                     "or %d threads",
                     (unsigned long long)engine->plan->arena_size,
                     (unsigned long long)engine->plan->scratch_size, threads);
  }
  *out = c;
  return NR_OK;
}

void nr_context_destroy(nr_context *c) {
  if (!c)
    return;
  if (c->device)
    c->backend->context_destroy(c->device);
  nr_threadpool_destroy(c->pool);
  free(c->arena);
  free(c->scratch);
  free(c->absorbed);
  free(c->data_shapes);
  free(c);
}

/* ---- running -------------------------------------------------------------------- */

static const char *slot_describe(const nr_slot *s, char *buf, size_t cap) {
  nr_value v = {s->dtype, s->rank, {0}, NULL, false};
  memcpy(v.dims, s->dims, sizeof v.dims);
  return nr_value_describe(&v, buf, cap);
}

static bool buffer_matches(const nr_buffer *b, const nr_slot *s) {
  if (b->dtype != s->dtype || b->rank != s->rank)
    return false;
  for (int d = 0; d < s->rank; d++)
    if (b->dims[d] != s->dims[d])
      return false;
  return true;
}

/* "'x' float32[1x3x224x224], 'mask' bool[1x8]" */
static void describe_slots(const nr_plan *p, const int *slots, int n, char *out,
                           size_t cap) {
  char buf[128];
  size_t len = 0;
  out[0] = '\0';
  for (int i = 0; i < n && len < cap; i++) {
    const nr_slot *s = &p->slots[slots[i]];
    len += (size_t)snprintf(out + len, cap - len, "%s'%s' %s", i ? ", " : "",
                            s->name ? s->name : "?", slot_describe(s, buf, sizeof buf));
  }
}

static nr_status check_inputs(const nr_plan *p, const nr_buffer *in, nr_error *err) {
  char want[700], got[128];
  for (int i = 0; i < p->n_inputs; i++) {
    const nr_slot *s = &p->slots[p->inputs[i]];
    if (in[i].data && buffer_matches(&in[i], s))
      continue;
    bool sane = in[i].rank >= 0 && in[i].rank <= NR_MAX_RANK;
    nr_value v = {in[i].dtype, sane ? in[i].rank : 0, {0}, NULL, false};
    memcpy(v.dims, in[i].dims, sizeof v.dims);
    describe_slots(p, p->inputs, p->n_inputs, want, sizeof want);
    return nr_errorf(err, NR_ERR_SHAPE, "input %d '%s' is %s; the engine expects: %s", i,
                     s->name ? s->name : "?",
                     !in[i].data ? "missing data"
                     : sane      ? nr_value_describe(&v, got, sizeof got)
                                 : "malformed",
                     want);
  }
  return NR_OK;
}

static nr_status check_outputs(const nr_plan *p, const nr_buffer *out, nr_error *err) {
  char buf[128], got[128];
  for (int i = 0; i < p->n_outputs; i++) {
    const nr_slot *s = &p->slots[p->outputs[i]];
    if (!out[i].data || buffer_matches(&out[i], s))
      continue;
    bool sane = out[i].rank >= 0 && out[i].rank <= NR_MAX_RANK;
    nr_value v = {out[i].dtype, sane ? out[i].rank : 0, {0}, NULL, false};
    memcpy(v.dims, out[i].dims, sizeof v.dims);
    return nr_errorf(err, NR_ERR_SHAPE, "output %d '%s': the buffer given is %s, not %s",
                     i, s->name ? s->name : "?",
                     sane ? nr_value_describe(&v, got, sizeof got) : "malformed",
                     slot_describe(s, buf, sizeof buf));
  }
  return NR_OK;
}

/* base + off, where an empty arena or weights block may be NULL (its slots are empty). */
static void *offset_in(const void *base, uint64_t off) {
  return base ? (uint8_t *)base + off : NULL;
}

static void *slot_data(const nr_context *c, const nr_buffer *inputs, int idx) {
  if (idx < 0 || idx >= c->plan->n_slots) /* check_plan refused such a step already */
    return NULL;
  const nr_slot *s = &c->plan->slots[idx];
  switch (s->kind) {
  case NR_SLOT_ARENA: return offset_in(c->arena, s->offset);
  case NR_SLOT_CONST: return offset_in(c->plan->weights, s->offset);
  case NR_SLOT_INPUT: return inputs[s->offset].data;
  case NR_SLOT_ABSORBED: return c->absorbed; /* its readers use their packed data */
  }
  return NULL; /* a kind check_plan does not admit */
}

static nr_status run_step(nr_context *c, int k, const nr_buffer *inputs, nr_error *err) {
  const nr_plan *p = c->plan;
  const nr_step *st = &p->steps[k];
  void *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  const nr_slot *in_slot[NR_STEP_MAX_IO], *out_slot[NR_STEP_MAX_IO];
  for (int j = 0; j < st->n_in; j++) {
    in[j] = slot_data(c, inputs, st->in[j]);
    in_slot[j] = st->in[j] >= 0 ? &p->slots[st->in[j]] : NULL;
  }
  for (int j = 0; j < st->n_out; j++) {
    out[j] = slot_data(c, inputs, st->out[j]);
    out_slot[j] = st->out[j] >= 0 ? &p->slots[st->out[j]] : NULL;
  }
  const nr_node *node = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
  nr_exec_args a = {
      .plan = p, .step = st, .node = node, .in = in, .out = out,
      .in_slot = in_slot, .out_slot = out_slot,
      .packed = st->packed_size ? p->weights + st->packed_offset : NULL,
      .scratch = c->scratch, .pool = c->pool, .err = err,
  };
  nr_status s = c->data_shapes[k] ? check_data_shapes(c, k, in, err) : NR_OK;
  if (s)
    return s;
  s = st->tactic->run(&a);
  if (s == NR_OK)
    return NR_OK;
  if (err->status == NR_OK)
    err->status = s;
  if (node)
    nr_error_prefix(err, "step %d, node '%s' (%s, tactic %s): ", k, node->name,
                    node->op_type, st->tactic->id);
  else
    nr_error_prefix(err, "step %d (%s, tactic %s): ", k,
                    st->tactic->algo ? st->tactic->algo : "reorder", st->tactic->id);
  return s;
}

/* Gives every output buffer without data its own; on failure frees those again.
 * fresh[i] records which ones were allocated here. */
static nr_status alloc_outputs(const nr_plan *p, nr_buffer *outs, bool *fresh,
                               nr_error *err) {
  for (int i = 0; i < p->n_outputs; i++) {
    if (outs[i].data)
      continue;
    const nr_slot *s = &p->slots[p->outputs[i]];
    size_t n = plain_bytes(s);
    if (!(outs[i].data = malloc(n ? n : 1))) {
      for (int j = 0; j < i; j++)
        if (fresh[j])
          nr_buffer_free(&outs[j]);
      return nr_errorf(err, NR_ERR_NOMEM, "output '%s': %zu bytes", s->name, n);
    }
    fresh[i] = true;
    outs[i].dtype = s->dtype;
    outs[i].rank = s->rank;
    memset(outs[i].dims, 0, sizeof outs[i].dims);
    memcpy(outs[i].dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
  }
  return NR_OK;
}

static nr_status copy_outputs(nr_context *c, const nr_buffer *inputs, nr_buffer *outs,
                              nr_error *err) {
  const nr_plan *p = c->plan;
  bool *fresh = calloc((size_t)p->n_outputs + 1, sizeof *fresh);
  if (!fresh)
    return nr_errorf(err, NR_ERR_NOMEM, "nr_context_run: out of memory");
  nr_status st = alloc_outputs(p, outs, fresh, err);
  for (int i = 0; !st && i < p->n_outputs; i++) {
    size_t n = plain_bytes(&p->slots[p->outputs[i]]);
    if (n) /* an empty output's slot may have no storage */
      memcpy(outs[i].data, slot_data(c, inputs, p->outputs[i]), n);
  }
  free(fresh);
  return st;
}

/* The backend copies inputs in, runs the steps and copies outputs out into the
 * caller's buffers (allocated here when they have no data). */
static nr_status run_on_device(nr_context *c, const nr_buffer *inputs, nr_buffer *outs,
                               nr_error *err) {
  const nr_plan *p = c->plan;
  bool *fresh = calloc((size_t)p->n_outputs + 1, sizeof *fresh);
  if (!fresh)
    return nr_errorf(err, NR_ERR_NOMEM, "nr_context_run: out of memory");
  nr_status st = alloc_outputs(p, outs, fresh, err);
  if (!st)
    st = c->backend->context_run(c->device, inputs, outs, c->hook, c->hook_user, err);
  for (int i = 0; st && i < p->n_outputs; i++)
    if (fresh[i])
      nr_buffer_free(&outs[i]);
  free(fresh);
  return st;
}

void *nr_context_device_state(const nr_context *c) {
  return c ? c->device : NULL;
}

const nr_backend *nr_context_backend(const nr_context *c) {
  return c ? c->backend : NULL;
}

void nr_context_set_step_hook(nr_context *c, nr_step_hook fn, void *user) {
  if (!c)
    return;
  c->hook = fn;
  c->hook_user = fn ? user : NULL;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The profiling loop: the same steps, each timed and reported to the hook. */
static nr_status run_steps_timed(nr_context *c, const nr_buffer *inputs, nr_error *err) {
  nr_status st = NR_OK;
  for (int k = 0; !st && k < c->plan->n_steps; k++) {
    double t0 = now_ms();
    st = run_step(c, k, inputs, err);
    if (!st)
      c->hook(c->hook_user, k, now_ms() - t0);
  }
  return st;
}

nr_status nr_context_run(nr_context *c, const nr_buffer *inputs, nr_buffer *outputs,
                         nr_error *err) {
  nr_error local;
  if (!err)
    err = &local;
  nr_error_clear(err);
  if (!c || (!inputs && c->plan->n_inputs) || (!outputs && c->plan->n_outputs))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_context_run: NULL argument");
  const nr_plan *p = c->plan;
  nr_status st = check_inputs(p, inputs, err);
  if (!st)
    st = check_outputs(p, outputs, err);
  if (!st && c->device)
    return run_on_device(c, inputs, outputs, err);
  if (!st && c->hook)
    st = run_steps_timed(c, inputs, err);
  else
    for (int k = 0; !st && k < p->n_steps; k++)
      st = run_step(c, k, inputs, err);
  if (st)
    return st;
  return copy_outputs(c, inputs, outputs, err);
}
