/* cuda_half.c - the fp16 pass of CUDA plans (nr_pass_cuda_half, after layout and
 * before prepare): activations stay in fp16 between steps that can take them, so an
 * fp16 route converts only at fp32 boundaries instead of around every product.
 *
 * Rules. Nothing changes unless some step runs an fp16 product (a CUDA tactic of
 * precision fp16 chosen by cuda.precision), so fp32 and tf32 routes build exactly as
 * before. Walking the steps in order, each gets a role:
 *   product  an fp16 tactic (cuBLAS/cuDNN/depthwise): reads each activation as fp32
 *            or fp16, writes fp16;
 *   follower an fp32 tactic with an fp16 twin row (elementwise, softmax, LayerNorm,
 *            pooling, reductions, attention): when one of its inputs is fp16 it moves
 *            onto the twin (nr_cuda_f16_*: fp16 or fp32 per operand, fp32 math; for
 *            attention the tensor-core kernel) and writes fp16;
 *   copy     data movement and reorders: every data input and output in one dtype,
 *            fp16 when one input is fp16;
 *   other    everything else reads fp32.
 * An output becomes fp16 only when it is not a graph output (those keep the model's
 * fp32) and some reader can take fp16 directly; where a reader needs the other dtype
 * a cast step (node -1, nr_cuda_cast_*) is inserted before it, once per (tensor,
 * dtype), like the layout pass's reorders. Constants keep their fp32 slots (the
 * products pack their own fp16 weights); only a copy with an fp16 input converts a
 * constant piece, into the arena.
 *
 * Key decision: this is a plan pass rather than a choice each tactic makes alone,
 * because a tensor's dtype is shared by its producer and all its readers: deciding it
 * once, with every reader's role known, is what removes the conversions. The twins
 * are data (the table below names each pair) and select never picks them itself
 * (their precision, fp16, is never a follower node's precision), so the heuristic
 * and profiled choices among fp32 tactics are unchanged. */
#include "backends/cuda/cuda_internal.h"
#include "plan/pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ROLE_OTHER, ROLE_PRODUCT, ROLE_FOLLOWER, ROLE_COPY } half_role;

static const struct {
  const char *f32, *f16;
} twins[] = {
    {"nr_cuda_f32_eltwise", "nr_cuda_f16_eltwise"},
    {"nr_cuda_f32_softmax", "nr_cuda_f16_softmax"},
    {"nr_cuda_f32_logsoftmax", "nr_cuda_f16_logsoftmax"},
    {"nr_cuda_f32_layernorm", "nr_cuda_f16_layernorm"},
    {"nr_cuda_f32_reduce_rows", "nr_cuda_f16_reduce_rows"},
    {"nr_cuda_f32_pool2d", "nr_cuda_f16_pool2d"},
    {"nr_cuda_f32_attention", "nr_cuda_f16_attention"},
};

static bool in_table(const nr_tactic *t, const nr_tactic *table) {
  for (const nr_tactic *r = table; r->id; r++)
    if (r == t)
      return true;
  return false;
}

static const char *twin_id(const nr_tactic *t) {
  for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++)
    if (!strcmp(t->id, twins[i].f32))
      return twins[i].f16;
  return NULL;
}

static half_role role_of(const nr_tactic *t) {
  if (!t || t->device != NR_DEVICE_CUDA)
    return ROLE_OTHER;
  if (in_table(t, nr_tactics_cuda_copy) || in_table(t, nr_tactics_cuda_reorder))
    return ROLE_COPY;
  if (t->precision == NR_PREC_FP16)
    return ROLE_PRODUCT;
  return twin_id(t) ? ROLE_FOLLOWER : ROLE_OTHER;
}

/* The twin row of t for node n's op (rows share an id across ops). */
typedef struct twin_find {
  const char *id;
  const nr_node *n;
  const nr_tactic *found;
} twin_find;

static void find_fn(const nr_tactic *t, void *user) {
  twin_find *f = user;
  const char *nd = f->n->domain ? f->n->domain : "", *td = t->domain ? t->domain : "";
  if (!f->found && t->op_type && !strcmp(t->id, f->id) &&
      !strcmp(t->op_type, f->n->op_type) && !strcmp(td, nd))
    f->found = t;
}

static const nr_tactic *twin_of(const nr_tactic *t, const nr_node *n) {
  twin_find f = {twin_id(t), n, NULL};
  if (f.id && n)
    nr_tactic_foreach(find_fn, &f);
  return f.found;
}

/* ---- the walk ------------------------------------------------------------------------ */

typedef struct half_ctx {
  nr_plan *p;
  nr_error *err;
  int (*alt)[2];   /* per slot: the slot holding it as [0] fp32, [1] fp16, or -1 */
  nr_step *steps;  /* the rebuilt step list */
  int n_steps, cap_steps;
  const nr_tactic *to_f16, *to_f32;
} half_ctx;

static nr_status oom(half_ctx *h) {
  return nr_errorf(h->err, NR_ERR_NOMEM, "fp16 pass: out of memory");
}

static bool is_float(const nr_slot *s) {
  return s->dtype == NR_DTYPE_FLOAT || s->dtype == NR_DTYPE_FLOAT16;
}

/* An activation of a floating type (constants are left as they are). */
static bool float_data(const nr_plan *p, int s) {
  return s >= 0 && p->slots[s].kind != NR_SLOT_CONST && is_float(&p->slots[s]);
}

static bool graph_output(const nr_plan *p, int s) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->outputs[i] == s)
      return true;
  return false;
}

static nr_status push_step(half_ctx *h, const nr_step *s) {
  if (h->n_steps == h->cap_steps) {
    int cap = h->cap_steps ? 2 * h->cap_steps : 64;
    nr_step *n = realloc(h->steps, sizeof *n * (size_t)cap);
    if (!n)
      return oom(h);
    h->steps = n, h->cap_steps = cap;
  }
  h->steps[h->n_steps++] = *s;
  return NR_OK;
}

static void set_dtype(nr_slot *s, nr_dtype dt) {
  s->dtype = dt;
  s->nbytes = nr_slot_bytes(s, s->layout);
}

/* A new arena slot holding slot s's tensor as dt; its index, or -1. */
static int add_slot(half_ctx *h, int s, nr_dtype dt) {
  nr_plan *p = h->p;
  nr_slot *slots = realloc(p->slots, sizeof *slots * (size_t)(p->n_slots + 1));
  int (*alt)[2] = realloc(h->alt, sizeof *alt * (size_t)(p->n_slots + 1));
  if (slots)
    p->slots = slots;
  if (alt)
    h->alt = alt;
  if (!slots || !alt)
    return -1;
  nr_slot *ns = &p->slots[p->n_slots], *os = &p->slots[s];
  *ns = *os;
  size_t len = strlen(os->name ? os->name : "") + 8;
  if (!(ns->name = malloc(len)))
    return -1;
  snprintf(ns->name, len, "%s.%s", os->name ? os->name : "",
           dt == NR_DTYPE_FLOAT16 ? "fp16" : "fp32");
  ns->kind = NR_SLOT_ARENA;
  ns->offset = 0;
  ns->first_use = ns->last_use = ns->alias_of = -1;
  set_dtype(ns, dt);
  h->alt[p->n_slots][0] = h->alt[p->n_slots][1] = -1;
  return p->n_slots++;
}

/* The slot holding s as dt, converting (once) with a cast step when needed. */
static nr_status get_as(half_ctx *h, int s, nr_dtype dt, int *out) {
  int want = dt == NR_DTYPE_FLOAT16;
  *out = s;
  if (h->p->slots[s].dtype == dt)
    return NR_OK;
  if (h->alt[s][want] >= 0) {
    *out = h->alt[s][want];
    return NR_OK;
  }
  int t = add_slot(h, s, dt);
  if (t < 0)
    return oom(h);
  h->alt[s][want] = t;
  *out = t;
  nr_step c = {.tactic = want ? h->to_f16 : h->to_f32, .node = -1, .n_in = 1, .n_out = 1};
  c.in[0] = s, c.out[0] = t;
  return push_step(h, &c);
}

/* Every float activation input of st as dt; constants too when consts (a copy moves
 * all its pieces in one dtype). */
static nr_status inputs_as(half_ctx *h, nr_step *st, nr_dtype dt, bool consts) {
  nr_status e = NR_OK;
  for (int i = 0; i < st->n_in && !e; i++) {
    int s = st->in[i];
    if (float_data(h->p, s) || (consts && s >= 0 && is_float(&h->p->slots[s])))
      e = get_as(h, s, dt, &st->in[i]);
  }
  return e;
}

static bool any_half_input(const nr_plan *p, const nr_step *st) {
  for (int i = 0; i < st->n_in; i++)
    if (st->in[i] >= 0 && p->slots[st->in[i]].dtype == NR_DTYPE_FLOAT16)
      return true;
  return false;
}

static bool any_graph_output(const nr_plan *p, const nr_step *st) {
  for (int o = 0; o < st->n_out; o++)
    if (st->out[o] >= 0 && graph_output(p, st->out[o]))
      return true;
  return false;
}

/* Whether a step after `from` that reads slot s can read it as fp16 in place. */
static bool half_reader(const nr_plan *p, int from, int s) {
  for (int k = from + 1; k < p->n_steps; k++) {
    const nr_step *st = &p->steps[k];
    for (int i = 0; i < st->n_in; i++)
      if (st->in[i] == s && role_of(st->tactic) != ROLE_OTHER)
        return true;
  }
  return false;
}

/* Outputs of step k (original index) become fp16 where that pays (see the rules). */
static void outputs_half(half_ctx *h, const nr_step *st, int k, bool copy) {
  for (int o = 0; o < st->n_out; o++) {
    int s = st->out[o];
    if (s < 0 || !float_data(h->p, s) || graph_output(h->p, s) ||
        (!copy && !half_reader(h->p, k, s)))
      continue;
    set_dtype(&h->p->slots[s], NR_DTYPE_FLOAT16);
  }
}

/* A follower with an fp16 input onto its twin, if the twin runs the node. */
static bool to_twin(half_ctx *h, nr_step *st, const nr_compile_ctx *cc) {
  const nr_node *n = st->node >= 0 ? &h->p->graph->nodes[st->node] : NULL;
  const nr_tactic *twin = twin_of(st->tactic, n), *was = st->tactic;
  if (!twin)
    return false;
  st->tactic = twin;
  nr_tactic_ctx tc = {h->p, n, st, cc->route, h->err, cc->threads, cc->calib, cc->device};
  if (twin->supports && !twin->supports(&tc)) {
    st->tactic = was;
    return false;
  }
  return true;
}

static nr_status place(half_ctx *h, int k, const nr_compile_ctx *cc) {
  nr_step st = h->p->steps[k];
  nr_status e = NR_OK;
  bool half_in = any_half_input(h->p, &st);
  switch (role_of(st.tactic)) {
  case ROLE_PRODUCT:
    outputs_half(h, &st, k, false);
    break;
  case ROLE_FOLLOWER:
    if (half_in && to_twin(h, &st, cc))
      outputs_half(h, &st, k, false);
    else
      e = inputs_as(h, &st, NR_DTYPE_FLOAT, false);
    break;
  case ROLE_COPY:
    if (half_in && !any_graph_output(h->p, &st)) {
      e = inputs_as(h, &st, NR_DTYPE_FLOAT16, true);
      outputs_half(h, &st, k, true);
    } else {
      e = inputs_as(h, &st, NR_DTYPE_FLOAT, false);
    }
    break;
  case ROLE_OTHER:
    e = inputs_as(h, &st, NR_DTYPE_FLOAT, false);
    break;
  }
  return e ? e : push_step(h, &st);
}

static bool any_product(const nr_plan *p) {
  for (int k = 0; k < p->n_steps; k++)
    if (role_of(p->steps[k].tactic) == ROLE_PRODUCT)
      return true;
  return false;
}

static nr_status run_half(nr_compile_ctx *cc) {
  nr_plan *p = cc->plan;
  if (p->device != NR_DEVICE_CUDA || !any_product(p))
    return NR_OK;
  half_ctx h = {p, cc->err, NULL, NULL, 0, 0, nr_tactic_find("nr_cuda_cast_f32_to_f16"),
                nr_tactic_find("nr_cuda_cast_f16_to_f32")};
  if (!h.to_f16 || !h.to_f32)
    return nr_errorf(cc->err, NR_ERR_INTERNAL, "fp16 pass: no cast tactics");
  if (!(h.alt = malloc(sizeof *h.alt * (size_t)(p->n_slots + 1))))
    return oom(&h);
  for (int s = 0; s < p->n_slots; s++)
    h.alt[s][0] = h.alt[s][1] = -1;
  nr_status e = NR_OK;
  for (int k = 0; k < p->n_steps && !e; k++)
    e = place(&h, k, cc);
  free(h.alt);
  if (e) {
    free(h.steps);
    return e;
  }
  free(p->steps);
  p->steps = h.steps;
  p->n_steps = h.n_steps;
  p->cap_steps = h.cap_steps;
  return NR_OK;
}

const nr_pass nr_pass_cuda_half = {"cuda_half", run_half};
