/* plan.c - owning and querying a plan: weights storage, slot access for tactics,
 * layout names, teardown. */
#include "plan/plan.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const char *nr_layout_name(nr_layout l) {
  switch (l) {
  case NR_LAYOUT_PLAIN: return "plain";
  case NR_LAYOUT_NHWC: return "nhwc";
  case NR_LAYOUT_NCHW8C: return "nchw8c";
  case NR_LAYOUT_ANY: return "any";
  }
  return "unknown";
}

uint64_t nr_slot_bytes(const nr_slot *s, nr_layout l) {
  uint64_t n = nr_dtype_size(s->dtype);
  for (int d = 0; d < s->rank; d++) {
    int64_t dim = s->dims[d];
    if (l == NR_LAYOUT_NCHW8C && s->rank == 4 && d == 1)
      dim = (dim + 7) / 8 * 8;
    n *= (uint64_t)dim;
  }
  return n;
}

void nr_plan_destroy(nr_plan *p) {
  if (!p)
    return;
  nr_graph_destroy(p->graph);
  for (int i = 0; i < p->n_slots; i++)
    free(p->slots[i].name);
  free(p->slots);
  free(p->steps);
  free(p->inputs);
  free(p->outputs);
  free(p->weights);
  free(p->route);
  free(p->ignored);
  free(p->effective_route);
  for (int i = 0; i < p->n_knob_use; i++) {
    free(p->knob_use[i].id);
    free(p->knob_use[i].value);
  }
  free(p->knob_use);
  free(p);
}

#define WEIGHT_ALIGN 64

nr_status nr_plan_add_weights(nr_plan *p, const void *data, uint64_t size, uint64_t *off,
                              nr_error *err) {
  uint64_t start = (p->weights_size + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN;
  uint64_t end = start + size;
  assert(start >= p->weights_size && start % WEIGHT_ALIGN == 0);
  if (end < start)
    return nr_errorf(err, NR_ERR_NOMEM, "weights overflow");
  if (end > p->weights_cap) { /* grow geometrically, keeping 64-byte alignment */
    uint64_t cap = p->weights_cap ? p->weights_cap : (1u << 16);
    while (cap < end)
      cap *= 2;
    uint8_t *w = aligned_alloc(WEIGHT_ALIGN, cap);
    if (!w)
      return nr_errorf(err, NR_ERR_NOMEM, "cannot hold %llu bytes of weights",
                       (unsigned long long)cap);
    if (p->weights_size)
      memcpy(w, p->weights, p->weights_size);
    free(p->weights);
    p->weights = w;
    p->weights_cap = cap;
  }
  if (start > p->weights_size) /* zero the alignment gap (weights may still be NULL) */
    memset(p->weights + p->weights_size, 0, start - p->weights_size);
  if (size)
    data ? memcpy(p->weights + start, data, size) : memset(p->weights + start, 0, size);
  p->weights_size = end;
  assert(p->weights_size <= p->weights_cap);
  *off = start;
  return NR_OK;
}

int nr_plan_add_slot(nr_plan *p) {
  assert(p->n_slots >= 0 && p->n_slots <= p->cap_slots);
  if (p->n_slots == p->cap_slots) {
    int cap = p->cap_slots ? p->cap_slots * 2 : 64;
    nr_slot *s = realloc(p->slots, sizeof *s * (size_t)cap);
    if (!s)
      return -1;
    p->slots = s;
    p->cap_slots = cap;
  }
  nr_slot *s = &p->slots[p->n_slots];
  memset(s, 0, sizeof *s);
  s->alias_of = s->first_use = s->last_use = -1;
  return p->n_slots++;
}

nr_step *nr_plan_insert_step(nr_plan *p, int pos) {
  if (pos < 0 || pos > p->n_steps)
    return NULL;
  assert(p->n_steps <= p->cap_steps);
  if (p->n_steps == p->cap_steps) {
    int cap = p->cap_steps ? p->cap_steps * 2 : 64;
    nr_step *s = realloc(p->steps, sizeof *s * (size_t)cap);
    if (!s)
      return NULL;
    p->steps = s;
    p->cap_steps = cap;
  }
  memmove(&p->steps[pos + 1], &p->steps[pos], sizeof(nr_step) * (size_t)(p->n_steps - pos));
  memset(&p->steps[pos], 0, sizeof(nr_step));
  p->n_steps++;
  return &p->steps[pos];
}

const nr_slot *nr_step_in(const nr_tactic_ctx *c, int i) {
  if (i < 0 || i >= c->step->n_in || c->step->in[i] < 0)
    return NULL;
  return &c->plan->slots[c->step->in[i]];
}

const nr_slot *nr_step_out(const nr_tactic_ctx *c, int i) {
  if (i < 0 || i >= c->step->n_out || c->step->out[i] < 0)
    return NULL;
  return &c->plan->slots[c->step->out[i]];
}

_Static_assert(NR_STEP_MAX_IO <= NR_DESC_MAX_IO, "a step's operands must fit nr_node_io");

static void io_value(const nr_slot *s, nr_value *v) {
  memset(v, 0, sizeof *v);
  v->dtype = s->dtype;
  v->rank = s->rank;
  memcpy(v->dims, s->dims, sizeof v->dims);
}

void nr_node_io_from_slots(int n_in, const nr_slot *const *in, int n_out,
                           const nr_slot *const *out, nr_node_io *io) {
  memset(io, 0, offsetof(nr_node_io, in));
  io->n_in = n_in, io->n_out = n_out;
  for (int i = 0; i < n_in && i < NR_DESC_MAX_IO; i++)
    if ((io->has_in[i] = in[i] != NULL))
      io_value(in[i], &io->in[i]);
  for (int o = 0; o < n_out && o < NR_DESC_MAX_IO; o++)
    if ((io->has_out[o] = out[o] != NULL))
      io_value(out[o], &io->out[o]);
}

void nr_node_io_from_ctx(const nr_tactic_ctx *c, nr_node_io *io) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  for (int i = 0; i < c->step->n_in; i++)
    in[i] = nr_step_in(c, i);
  for (int o = 0; o < c->step->n_out; o++)
    out[o] = nr_step_out(c, o);
  nr_node_io_from_slots(c->step->n_in, in, c->step->n_out, out, io);
}

bool nr_step_pieces(const nr_node *n, const nr_step *st, const nr_slot *const *in,
                    const nr_slot *const *out, nr_concat_desc *d) {
  nr_node_io io;
  nr_node_io_from_slots(st->n_in, in, st->n_out, out, &io);
  bool concat = !strcmp(n->op_type, "Concat");
  return !(concat ? nr_concat_desc_parse(n, &io, d, NULL)
                  : nr_split_desc_parse(n, &io, d, NULL));
}

bool nr_step_pieces_ctx(const nr_tactic_ctx *c, nr_concat_desc *d) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  for (int i = 0; i < c->step->n_in; i++)
    in[i] = nr_step_in(c, i);
  for (int o = 0; o < c->step->n_out; o++)
    out[o] = nr_step_out(c, o);
  return nr_step_pieces(c->node, c->step, in, out, d);
}

const void *nr_slot_data(const nr_plan *p, const nr_slot *s) {
  if (!s || (s->kind != NR_SLOT_CONST && s->kind != NR_SLOT_ABSORBED))
    return NULL;
  if (s->data)
    return s->data;
  return s->kind == NR_SLOT_CONST && p->weights ? p->weights + s->offset : NULL;
}

const void *nr_step_const(const nr_tactic_ctx *c, int i) {
  return nr_slot_data(c->plan, nr_step_in(c, i));
}

void nr_step_absorb(nr_step *st, int i) {
  /* A tactic names one of its own inputs; an engine's step prepared again at load
   * (engine_validate.c) may have fewer, and is then refused by its comparison. */
  if (i >= 0 && i < st->n_in && i < 32) /* a later input stays stored: correct, only larger */
    st->absorbed |= 1u << i;
}

/* ---- node probes (plan.h) ---------------------------------------------------------- */

static bool probe_slot(nr_node_probe *p, const nr_graph *g, int t, int k) {
  const nr_tensor *ten = &g->tensors[t];
  nr_slot *s = &p->slots[k];
  memset(s, 0, sizeof *s);
  s->name = ten->name;
  s->dtype = ten->value.dtype;
  s->rank = ten->value.rank;
  memcpy(s->dims, ten->value.dims, sizeof s->dims);
  s->alias_of = s->first_use = s->last_use = -1;
  s->kind = (ten->flags & NR_TENSOR_CONST) ? NR_SLOT_CONST : NR_SLOT_ARENA;
  s->nbytes = nr_slot_bytes(s, NR_LAYOUT_PLAIN);
  s->data = s->kind == NR_SLOT_CONST ? ten->value.data : NULL;
  return true;
}

bool nr_node_probe_init(nr_node_probe *p, const nr_graph *g, const nr_node *n) {
  memset(p, 0, sizeof *p);
  p->slots = calloc((size_t)(n->n_inputs + n->n_outputs) + 1, sizeof *p->slots);
  if (!p->slots)
    return false;
  p->plan.graph = (nr_graph *)g;
  p->plan.slots = p->slots;
  p->step.node = (int)(n - g->nodes);
  p->step.n_in = n->n_inputs < NR_STEP_MAX_IO ? n->n_inputs : NR_STEP_MAX_IO;
  p->step.n_out = n->n_outputs < NR_STEP_MAX_IO ? n->n_outputs : NR_STEP_MAX_IO;
  p->ctx = (nr_tactic_ctx){&p->plan, n, &p->step, NULL, NULL, 0, NULL, NR_DEVICE_CPU};
  int k = 0;
  bool ok = true;
  for (int i = 0; i < p->step.n_in; i++) {
    p->step.in[i] = n->inputs[i] < 0 ? -1 : k;
    if (n->inputs[i] >= 0)
      ok &= probe_slot(p, g, n->inputs[i], k++);
  }
  for (int o = 0; o < p->step.n_out; o++) {
    p->step.out[o] = n->outputs[o] < 0 ? -1 : k;
    if (n->outputs[o] >= 0)
      ok &= probe_slot(p, g, n->outputs[o], k++);
  }
  p->plan.n_slots = k;
  return ok;
}

void nr_node_probe_free(nr_node_probe *p) {
  free(p->plan.weights);
  p->plan.weights = NULL;
  free(p->slots);
  p->slots = NULL;
}

bool nr_slot_same_dims(const nr_slot *a, const nr_slot *b) {
  return a->rank == b->rank && !memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank);
}
