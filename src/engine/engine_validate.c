/* engine_validate.c - the semantic check of a loaded engine's steps: after the
 * checksum and every range check of engine_sections.c, and before any kernel sees a
 * step, each step is checked against what the compiler would have produced for it.
 *
 * Key decision: a checksum only proves that the file is the file someone wrote, not
 * that what it says is safe to run, so the loader re-derives what it can instead of
 * trusting it. Generic checks, for every tactic: the tactic runs the node's op type
 * (a reorder or fault step has no node), the ISA it needs is here, the step reads and
 * writes the node's tensors (present where the node's are, slot shapes equal to the
 * graph's), and the output shapes are what the op's own shape rule gives for the input
 * slots. Then the tactic's validate() hook, where it has one, re-derives its params
 * record and packed sizes from those shapes (plan/tactic.h). CUDA engines get the
 * generic checks that hold for their plans (their plan passes rewire steps). */
#include "engine/engine_internal.h"
#include "ir/op.h"
#include "plan/step_infer.h"
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The step's index in its plan, for messages. */
static int step_index(const nr_tactic_ctx *c) {
  return (int)(c->step - c->plan->steps);
}

nr_status nr_step_invalid(const nr_tactic_ctx *c, const char *field, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return nr_errorf(c->err, NR_ERR_INVALID_MODEL, "engine: step %d (%s%s%.200s%s): %s: %s",
                   step_index(c), c->step->tactic->id, c->node ? ", node '" : "",
                   c->node ? c->node->name : "", c->node ? "'" : "", field, why);
}

static bool same_str(const char *a, const char *b) {
  return !strcmp(a ? a : "", b ? b : "");
}

typedef struct runs_query {
  const char *id;
  const nr_node *node;
  bool found;
} runs_query;

static void runs_one(const nr_tactic *t, void *user) {
  runs_query *q = user;
  if (q->found || strcmp(t->id, q->id) || !t->op_type)
    return;
  q->found = (!strcmp(t->op_type, "*") || same_str(t->op_type, q->node->op_type)) &&
             (same_str(t->domain, "*") || same_str(t->domain, q->node->domain));
}

/* Whether a tactic of this id runs n's op type (GEMM ids repeat once per op type). */
static bool tactic_runs(const nr_tactic *t, const nr_node *n) {
  runs_query q = {t->id, n, false};
  nr_tactic_foreach(runs_one, &q);
  return q.found;
}

static nr_status check_tactic(const nr_tactic_ctx *c) {
  const nr_tactic *t = c->step->tactic;
  unsigned isa = nr_cpu_isa();
  if (t->device == NR_DEVICE_CPU && (t->isa & ~isa))
    return nr_step_invalid(c, "tactic", "needs ISA bits 0x%x, this process has 0x%x",
                           t->isa, isa);
  if (!t->run)
    return nr_step_invalid(c, "tactic", "has no kernel");
  if (!t->op_type) {
    if (c->node)
      return nr_step_invalid(c, "node", "a reorder or fault step names node %d",
                             c->step->node);
    if (!strcmp(t->id, "nr_test_fault") && !nr_knob_test_knobs_enabled())
      return nr_step_invalid(c, "tactic", "a test fault step; engines with one load only "
                             "with NNROUTE_TEST_KNOBS=1");
    return NR_OK;
  }
  if (!c->node)
    return nr_step_invalid(c, "node", "-1, but the tactic runs a node");
  if (!tactic_runs(t, c->node))
    return nr_step_invalid(c, "tactic", "does not run %s%s%s nodes", c->node->domain,
                           *c->node->domain ? "." : "", c->node->op_type);
  if (!c->node->def)
    return nr_step_invalid(c, "node", "op %s has no definition", c->node->op_type);
  return NR_OK;
}

/* A reorder, cast or fault step copies one tensor: one input, one output, same shape
 * (and dtype, but for the casts the CUDA fp16 pass places). A fault step with
 * test.on_zeros also reads the graph input it looks at, as a second input. */
static nr_status check_copy_step(const nr_tactic_ctx *c) {
  const nr_step *st = c->step;
  int n_in = !strcmp(st->tactic->id, "nr_test_fault") && st->n_in == 2 ? 2 : 1;
  if (st->n_in != n_in || st->n_out != 1 || st->in[0] < 0 || st->out[0] < 0 ||
      (n_in == 2 && st->in[1] < 0))
    return nr_step_invalid(c, "slots", "%d inputs and %d outputs (one of each, present)",
                           st->n_in, st->n_out);
  const nr_slot *a = &c->plan->slots[st->in[0]], *b = &c->plan->slots[st->out[0]];
  bool cast = st->tactic->algo && !strcmp(st->tactic->algo, "cast");
  if (!nr_slot_same_dims(a, b) || (a->dtype != b->dtype && !cast))
    return nr_step_invalid(c, "slots", "input '%.200s' and output '%.200s' differ in shape "
                           "or dtype", a->name, b->name);
  return NR_OK;
}

/* A slot may carry another dtype than its graph tensor only where a plan pass
 * narrowed it: uint8 activations between int8 steps (io8), fp16/bf16 on devices. */
static bool dtype_ok(const nr_tactic_ctx *c, const nr_slot *s, const nr_value *v) {
  if (s->dtype == v->dtype)
    return true;
  if (v->dtype != NR_DTYPE_FLOAT)
    return false;
  if (s->dtype == NR_DTYPE_UINT8)
    return c->step->tactic->io8 != NULL;
  return c->plan->device != NR_DEVICE_CPU &&
         (s->dtype == NR_DTYPE_FLOAT16 || s->dtype == NR_DTYPE_BFLOAT16);
}

static nr_status check_one_io(const nr_tactic_ctx *c, int k, int tensor, int slot,
                              const char *what) {
  if ((tensor >= 0) != (slot >= 0))
    return nr_step_invalid(c, what, "%d is %s in the node but %s in the step", k,
                           tensor >= 0 ? "present" : "absent",
                           slot >= 0 ? "present" : "absent");
  if (tensor < 0)
    return NR_OK;
  const nr_slot *s = &c->plan->slots[slot];
  const nr_value *v = &c->plan->graph->tensors[tensor].value;
  if (s->rank != v->rank || memcmp(s->dims, v->dims, sizeof s->dims[0] * (size_t)s->rank))
    return nr_step_invalid(c, what, "%d: slot '%.200s' has another shape than tensor "
                           "'%.200s'", k, s->name, c->plan->graph->tensors[tensor].name);
  if (!dtype_ok(c, s, v))
    return nr_step_invalid(c, what, "%d: slot '%.200s' is %s, tensor '%.200s' %s", k,
                           s->name, nr_dtype_name(s->dtype),
                           c->plan->graph->tensors[tensor].name, nr_dtype_name(v->dtype));
  return NR_OK;
}

/* CPU steps read and write exactly their node's tensors, in the node's order. */
static nr_status check_node_io(const nr_tactic_ctx *c) {
  const nr_step *st = c->step;
  const nr_node *n = c->node;
  if (st->n_in != n->n_inputs || st->n_out != n->n_outputs)
    return nr_step_invalid(c, "slots", "%d inputs and %d outputs; the node has %d and %d",
                           st->n_in, st->n_out, n->n_inputs, n->n_outputs);
  nr_status s = NR_OK;
  for (int i = 0; !s && i < n->n_inputs; i++)
    s = check_one_io(c, i, n->inputs[i], st->in[i], "input");
  for (int o = 0; !s && o < n->n_outputs; o++)
    s = check_one_io(c, o, n->outputs[o], st->out[o], "output");
  return s;
}

/* The op's shape rule on the input slots must give the output slots' shapes (where
 * it knows them: a shape read from a run-time tensor stays unknown, and the runtime
 * checks it against the data of each run, context.c). */
static nr_status check_shape_rule(const nr_tactic_ctx *c) {
  nr_value out[NR_STEP_MAX_IO];
  nr_error ie = {0};
  if (nr_step_infer(c->plan, c->step, NULL, 0, out, &ie))
    return nr_step_invalid(c, "slots", "the op's shape rule refuses them (%s)", ie.message);
  int o = nr_step_shape_differs(c->plan, c->step, out, false);
  if (o >= 0)
    return nr_step_invalid(c, "output", "%d: slot '%.200s' has another shape than the op "
                           "gives for the input slots", o,
                           c->plan->slots[c->step->out[o]].name);
  return NR_OK;
}

/* ---- prepare again: tactics without a hook ------------------------------------------ */

/* A copy of the plan that prepare() may write: its own slots (constants as at build
 * time: absorbed ones read zeros of their size, which gives the same params and sizes
 * as the real bytes) and steps, and weights of its own, so the loaded plan is never
 * touched. The engine's route is parsed on a knob space of the engine's graph. */
typedef struct shadow {
  nr_plan plan;
  void *zeros;
  uint64_t zero_bytes; /* steps reading a larger absorbed slot are not prepared again */
  nr_knob_space space;
  nr_route route;
  bool have_route;
} shadow;

static void shadow_free(shadow *sh) {
  free(sh->plan.slots);
  free(sh->plan.steps);
  free(sh->plan.weights);
  free(sh->zeros);
  nr_route_free(&sh->route);
  nr_knob_space_free(&sh->space);
}

static nr_status shadow_init(shadow *sh, const nr_engine *e, nr_error *err) {
  const nr_plan *p = e->plan;
  memset(sh, 0, sizeof *sh);
  sh->plan = *p;
  sh->plan.weights = NULL;
  sh->plan.weights_size = sh->plan.weights_cap = 0;
  sh->plan.slots = malloc(sizeof *p->slots * (size_t)(p->n_slots ? p->n_slots : 1));
  sh->plan.steps = malloc(sizeof *p->steps * (size_t)(p->n_steps ? p->n_steps : 1));
  /* The zeros stand for what the weights held at build time: no more than the
   * weights, or 64 MiB, whichever is larger (a slot's size comes from the file). */
  uint64_t zero = 0, cap = p->weights_size > (64u << 20) ? p->weights_size : (64u << 20);
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].kind == NR_SLOT_ABSORBED && p->slots[i].nbytes > zero &&
        p->slots[i].nbytes <= cap)
      zero = p->slots[i].nbytes;
  sh->zero_bytes = zero;
  sh->zeros = zero ? calloc(1, (size_t)zero) : NULL;
  if (!sh->plan.slots || !sh->plan.steps || (zero && !sh->zeros))
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory validating the engine");
  memcpy(sh->plan.slots, p->slots, sizeof *p->slots * (size_t)p->n_slots);
  memcpy(sh->plan.steps, p->steps, sizeof *p->steps * (size_t)p->n_steps);
  for (int i = 0; i < p->n_slots; i++) {
    nr_slot *s = &sh->plan.slots[i];
    if (s->kind == NR_SLOT_CONST)
      s->data = p->weights + s->offset;
    else if (s->kind == NR_SLOT_ABSORBED)
      s->kind = NR_SLOT_CONST, s->data = sh->zeros;
  }
  nr_error ignored = {0};
  sh->have_route = !nr_knob_space_build_for(p->graph, p->device, &sh->space, &ignored) &&
                   !nr_route_init(&sh->route, &sh->space, &ignored) &&
                   (!p->route || !*p->route || !nr_route_parse(&sh->route, p->route, &ignored));
  return NR_OK;
}

/* An absorbed input whose values (not only its size) prepare() reads: an integer
 * tensor (pads, axes, sizes) or a float one of at most 16 elements (Resize's scales,
 * a clip bound, a small bias). Zeros would not give its params back. */
static bool absorbed_parameter(const nr_slot *s) {
  if (s->kind != NR_SLOT_ABSORBED)
    return false;
  bool fl = s->dtype == NR_DTYPE_FLOAT || s->dtype == NR_DTYPE_FLOAT16 ||
            s->dtype == NR_DTYPE_BFLOAT16;
  int64_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= s->dims[d];
  return !fl || n <= 16;
}

/* Whether step st can be prepared again and compared: a CPU fp32/16-bit step whose
 * prepare() reads only what the file stores (int8 steps also read build-time grid
 * fields of their slots, which engines do not keep; a step with an absorbed parameter
 * input keeps the generic checks only). */
static bool reprepare_applies(const shadow *sh, const nr_plan *p, const nr_step *st) {
  const nr_tactic *t = st->tactic;
  if (!t->prepare || t->validate || t->device != NR_DEVICE_CPU || t->io8 ||
      t->precision == NR_PREC_INT8)
    return false;
  for (int i = 0; i < st->n_in + st->n_out; i++) {
    int s = i < st->n_in ? st->in[i] : st->out[i - st->n_in];
    if (s >= 0 && (p->slots[s].dtype == NR_DTYPE_UINT8 ||
                   (i < st->n_in && absorbed_parameter(&p->slots[s])) ||
                   (p->slots[s].kind == NR_SLOT_ABSORBED &&
                    p->slots[s].nbytes > sh->zero_bytes)))
      return false;
  }
  return true;
}

static nr_status compare_prepared(const nr_tactic_ctx *c, const nr_step *want) {
  const nr_step *got = c->step;
  if (memcmp(got->params, want->params, sizeof got->params)) {
    int b = 0;
    while (got->params[b] == want->params[b])
      b++;
    return nr_step_invalid(c, "params", "byte %d is 0x%02x; prepared again from the slots "
                           "it is 0x%02x", b, got->params[b], want->params[b]);
  }
  if (got->packed_size != want->packed_size)
    return nr_step_invalid(c, "packed_size", "%llu bytes; prepared again %llu",
                           (unsigned long long)got->packed_size,
                           (unsigned long long)want->packed_size);
  if (got->scratch < want->scratch || got->threads != want->threads)
    return nr_step_invalid(c, "scratch/threads", "%llu bytes, %d threads; prepared again "
                           "%llu, %d", (unsigned long long)got->scratch, got->threads,
                           (unsigned long long)want->scratch, want->threads);
  return NR_OK;
}

/* Runs step k's prepare() on the shadow plan and compares what it wrote. */
static nr_status reprepare(const nr_engine *e, shadow *sh, const nr_tactic_ctx *c, int k) {
  nr_step *st = &sh->plan.steps[k];
  *st = c->plan->steps[k];
  memset(st->params, 0, sizeof st->params);
  st->packed_offset = st->packed_size = st->scratch = 0;
  st->threads = 0;
  st->absorbed = 0;
  nr_error pe = {0};
  nr_tactic_ctx sc = {&sh->plan, c->node, st, sh->have_route ? &sh->route : NULL, &pe,
                      e->threads, e->calib, c->device};
  nr_status s = st->tactic->prepare(&sc, &sh->plan, st);
  free(sh->plan.weights);
  sh->plan.weights = NULL;
  sh->plan.weights_size = sh->plan.weights_cap = 0;
  if (s == NR_ERR_NOMEM)
    return nr_errorf(c->err, s, "%s", pe.message);
  if (s)
    return nr_step_invalid(c, "slots", "its tactic refuses them (%s)", pe.message);
  s = compare_prepared(c, st);
  *st = c->plan->steps[k];
  return s;
}

/* Every step of a CPU engine, generically and then by its tactic's hook. */
static nr_status check_step(const nr_engine *e, shadow *sh, int k, nr_error *err) {
  const nr_plan *p = e->plan;
  const nr_step *st = &p->steps[k];
  const nr_node *n = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
  nr_tactic_ctx c = {p, n, st, NULL, err, e->threads, e->calib, p->device};
  nr_status s = check_tactic(&c);
  if (!s && !n)
    s = check_copy_step(&c);
  if (!s && n && p->device == NR_DEVICE_CPU)
    s = check_node_io(&c);
  if (!s && n && p->device == NR_DEVICE_CPU)
    s = check_shape_rule(&c);
  if (!s && st->tactic->validate)
    s = st->tactic->validate(&c);
  else if (!s && sh->have_route && reprepare_applies(sh, p, st))
    s = reprepare(e, sh, &c, k);
  return s;
}

nr_status nr_engine_validate_steps(const nr_engine *e, nr_error *err) {
  shadow sh;
  nr_status s = shadow_init(&sh, e, err);
  for (int k = 0; !s && k < e->plan->n_steps; k++)
    s = check_step(e, &sh, k, err);
  shadow_free(&sh);
  return s;
}
