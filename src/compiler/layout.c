/* layout.c - the layout pass: gives every slot its physical layout from the chosen
 * tactics and inserts reorder steps (node -1) where a consumer needs another layout
 * than its producer gives.
 *
 * Rules. Graph inputs and constants are PLAIN (tactics pack constants themselves);
 * graph outputs leave PLAIN (a producer working in another layout writes a private
 * slot and a reorder fills the output). A tactic's layout applies to activation
 * input 0 and output 0, and to every other non-constant float32 rank-4 input or
 * output whose dims are output 0's except perhaps the channels (FusedConv's residual;
 * the pieces of an NHWC Split or Concat); other inputs and outputs are PLAIN. An
 * NR_LAYOUT_ANY step (elementwise) follows its input 0 when layout.propagate=on and it
 * is a same-shape float32 rank-4 op with no constant operand, else it runs PLAIN; so
 * a Relu or Add between two NCHW8C convs stays blocked. Every (slot, layout) pair is
 * converted at most once: later consumers reuse the converted slot.
 *
 * Key decision: one forward walk over the steps with a table alt[slot][layout] of
 * where each tensor is available in which layout; the step list is rebuilt with the
 * reorders in place, right before their first consumer (or right after a producer
 * that writes a graph output). The rules themselves are plan/layout.c's, which also
 * answers the same question before the pass (nr_layout_predict) for tactics that
 * follow their input's layout (the NHWC pooling and copy rows). */
#include "backends/backend.h"
#include "kernels/cpu/conv/conv_layout.h"
#include "passes/pass_knobs.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* propagate only decides something when, on the default route, a conv runs in a
 * blocked layout and an elementwise step reads its output. */
static bool propagate_applies(const nr_graph *g, const nr_node *unused) {
  (void)unused;
  if (!g)
    return true;
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    if (n->n_outputs < 1 || nr_conv_default_layout(g, n) == NR_LAYOUT_PLAIN)
      continue;
    for (int j = 0; j < g->n_nodes; j++)
      for (int i = 0; i < g->nodes[j].n_inputs; i++)
        if (g->nodes[j].inputs[i] == n->outputs[0] && !strstr(g->nodes[j].op_type, "Conv"))
          return true;
  }
  return false;
}

const nr_knob_def nr_knobs_layout[] = {
    [NR_KNOB_ROW(NR_KNOB_LAYOUT_PROPAGATE)] =
    {"layout.propagate", "on|off", "on", NR_KNOB_GLOBAL, NR_KNOB_LAYOUT, 0.0,
     "layout-agnostic steps keep their input's blocked layout (off: run them PLAIN)",
     propagate_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_LAYOUT_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_layout, NR_KNOB_LAYOUT_END);

#define N_LAYOUTS 3

typedef struct layout_ctx {
  nr_plan *p;
  nr_error *err;
  int (*alt)[N_LAYOUTS]; /* per slot: the slot holding its data in each layout, or -1 */
  nr_step *steps;
  int n_steps, cap_steps;
  bool propagate;
} layout_ctx;

static nr_status oom(layout_ctx *c) {
  return nr_errorf(c->err, NR_ERR_NOMEM, "layout pass: out of memory");
}

static nr_status push_step(layout_ctx *c, const nr_step *s) {
  if (c->n_steps == c->cap_steps) {
    int cap = c->cap_steps ? 2 * c->cap_steps : 64;
    nr_step *n = realloc(c->steps, sizeof *n * (size_t)cap);
    if (!n)
      return oom(c);
    c->steps = n, c->cap_steps = cap;
  }
  c->steps[c->n_steps++] = *s;
  return NR_OK;
}

/* A new arena slot holding slot s's tensor in layout l; returns its index or -1. */
static int add_slot(layout_ctx *c, int s, nr_layout l) {
  nr_plan *p = c->p;
  nr_slot *slots = realloc(p->slots, sizeof *slots * (size_t)(p->n_slots + 1));
  int (*alt)[N_LAYOUTS] = realloc(c->alt, sizeof *alt * (size_t)(p->n_slots + 1));
  if (slots)
    p->slots = slots;
  if (alt)
    c->alt = alt;
  if (!slots || !alt)
    return -1;
  nr_slot *ns = &p->slots[p->n_slots], *os = &p->slots[s];
  *ns = *os;
  size_t len = strlen(os->name ? os->name : "") + 16;
  ns->name = malloc(len);
  if (!ns->name)
    return -1;
  snprintf(ns->name, len, "%s.%s", os->name ? os->name : "", nr_layout_name(l));
  ns->layout = l;
  ns->kind = NR_SLOT_ARENA;
  ns->nbytes = nr_slot_bytes(ns, l);
  ns->offset = 0;
  ns->first_use = ns->last_use = ns->alias_of = -1;
  for (int k = 0; k < N_LAYOUTS; k++)
    c->alt[p->n_slots][k] = -1;
  return p->n_slots++;
}

static nr_status push_reorder(layout_ctx *c, int from, int to) {
  const nr_slot *a = &c->p->slots[from], *b = &c->p->slots[to];
  const nr_backend *be = nr_backend_for(c->p->device); /* device plans reorder there */
  const nr_tactic *t = be ? be->reorder(a->layout, b->layout)
                          : nr_reorder_tactic(a->layout, b->layout);
  if (!t)
    return nr_errorf(c->err, NR_ERR_INTERNAL, "layout pass: no reorder %s -> %s for '%s'",
                     nr_layout_name(a->layout), nr_layout_name(b->layout), a->name);
  nr_step r = {.tactic = t, .node = -1, .n_in = 1, .n_out = 1};
  r.in[0] = from, r.out[0] = to;
  return push_step(c, &r);
}

/* The slot holding s in layout l, converting (once) if needed. */
static nr_status get_in(layout_ctx *c, int s, nr_layout l, int *out) {
  if (c->alt[s][l] >= 0) {
    *out = c->alt[s][l];
    return NR_OK;
  }
  int src = -1;
  for (int k = 0; k < N_LAYOUTS && src < 0; k++)
    src = c->alt[s][k];
  int t = add_slot(c, s, l);
  if (t < 0)
    return oom(c);
  c->alt[s][l] = t;
  *out = t;
  return push_reorder(c, src, t);
}

static bool is_graph_output(const nr_plan *p, int s) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->outputs[i] == s)
      return true;
  return false;
}

/* The layout step st runs in. */
static nr_layout step_layout(const layout_ctx *c, const nr_step *st) {
  const nr_tactic *t = st->tactic;
  if (!t || st->n_out < 1 || st->out[0] < 0)
    return NR_LAYOUT_PLAIN;
  if (t->layout != NR_LAYOUT_ANY)
    return t->layout;
  if (!c->propagate || !nr_layout_any_follows(c->p, st))
    return NR_LAYOUT_PLAIN;
  int s0 = st->in[0];
  for (int k = 0; k < N_LAYOUTS; k++)
    if (c->alt[s0][k] == s0)
      return (nr_layout)k; /* where input 0 was produced */
  return NR_LAYOUT_PLAIN;
}

static nr_status place_step(layout_ctx *c, const nr_step *orig) {
  nr_plan *p = c->p;
  nr_step st = *orig;
  nr_layout l = step_layout(c, &st);
  int y = st.n_out > 0 ? st.out[0] : -1; /* an index: get_in may move p->slots */
  for (int i = 0; i < st.n_in; i++) {
    int s = st.in[i];
    if (s < 0 || p->slots[s].kind == NR_SLOT_CONST)
      continue;
    bool act = i == 0 || (y >= 0 && nr_layout_follows_out0(&p->slots[s], &p->slots[y]));
    nr_status e = get_in(c, s, act ? l : NR_LAYOUT_PLAIN, &st.in[i]);
    if (e)
      return e;
  }
  int post[NR_STEP_MAX_IO][2], n_post = 0;
  for (int o = 0; o < st.n_out; o++) {
    int s = st.out[o];
    if (s < 0)
      continue;
    bool piece = o > 0 && y >= 0 && nr_layout_follows_out0(&p->slots[s], &p->slots[y]);
    nr_layout lo = o == 0 || piece ? l : NR_LAYOUT_PLAIN;
    if (lo != NR_LAYOUT_PLAIN && is_graph_output(p, s)) {
      int t = add_slot(c, s, lo);
      if (t < 0)
        return oom(c);
      c->alt[s][lo] = t;
      c->alt[s][NR_LAYOUT_PLAIN] = s;
      st.out[o] = t;
      post[n_post][0] = t, post[n_post++][1] = s;
      lo = NR_LAYOUT_PLAIN;
    } else {
      for (int k = 0; k < N_LAYOUTS; k++)
        c->alt[s][k] = -1;
      c->alt[s][lo] = s;
    }
    p->slots[s].layout = lo;
    p->slots[s].nbytes = nr_slot_bytes(&p->slots[s], lo);
  }
  nr_status e = push_step(c, &st);
  for (int k = 0; k < n_post && !e; k++)
    e = push_reorder(c, post[k][0], post[k][1]);
  return e;
}

static nr_status run_layout(nr_compile_ctx *cc) {
  nr_plan *p = cc->plan;
  layout_ctx c = {p, cc->err, NULL, NULL, 0, 0, true};
  c.propagate = !cc->route || !nr_route_is(cc->route, NR_KNOB_LAYOUT_PROPAGATE, NULL, "off");
  nr_status e = NR_OK;
  c.alt = malloc(sizeof *c.alt * (size_t)(p->n_slots + 1));
  if (!c.alt)
    return oom(&c);
  for (int s = 0; s < p->n_slots; s++) {
    for (int k = 0; k < N_LAYOUTS; k++)
      c.alt[s][k] = -1;
    p->slots[s].layout = NR_LAYOUT_PLAIN; /* producers set theirs below */
    p->slots[s].nbytes = nr_slot_bytes(&p->slots[s], NR_LAYOUT_PLAIN);
    c.alt[s][NR_LAYOUT_PLAIN] = s;
  }
  for (int k = 0; k < p->n_steps && !e; k++)
    e = place_step(&c, &p->steps[k]);
  free(c.alt);
  if (e) {
    free(c.steps);
    return e;
  }
  free(p->steps);
  p->steps = c.steps;
  p->n_steps = c.n_steps;
  return NR_OK;
}

const nr_pass nr_pass_layout = {"layout", run_layout};
