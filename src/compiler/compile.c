/* compile.c - the compiler driver: graph passes, the plan skeleton, plan passes.
 *
 * nr_compile works on a clone of the prepared graph, so one model can be built along
 * many routes. Graph passes (families.h: NR_GRAPH_PASSES) rewrite the logical graph;
 * then every tensor becomes a slot (constants copied into the plan's weights, graph
 * inputs bound at run time, everything else in the arena) and every node a step; then
 * the plan passes (NR_PLAN_PASSES) choose tactics, layouts, prepare the tactics
 * (weight packing) and plan memory.
 *
 * The passes read a copy of the route that records every read (route.h, knob use);
 * the plan keeps the record: which of the route's values changed nothing, and the
 * route without them. */
#include "compiler/compile.h"
#include "plan/families.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NR_DECLARE(p) extern const nr_pass nr_pass_##p;
NR_GRAPH_PASSES(NR_DECLARE)
NR_PLAN_PASSES(NR_DECLARE)
#undef NR_DECLARE

static const nr_pass *const graph_passes[] = {
#define NR_LIST(p) &nr_pass_##p,
    NR_GRAPH_PASSES(NR_LIST)
#undef NR_LIST
};

static const nr_pass *const plan_passes[] = {
#define NR_LIST(p) &nr_pass_##p,
    NR_PLAN_PASSES(NR_LIST)
#undef NR_LIST
};

/* ---- after the graph passes: order, bind, infer, drop dead nodes ---------------- */

static bool has_subgraph(const nr_node *n) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g)
      return true;
  return false;
}

/* Whether a graph output or a node reads t; the body of an If, Loop or Scan reads the
 * enclosing-scope tensors it names, which are no inputs of the node. */
static bool tensor_read(const nr_graph *g, int t) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == t)
      return true;
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] == t)
        return true;
    if (!has_subgraph(n))
      continue;
    int *deps = NULL, nd = nr_node_deps(g, n, &deps);
    bool read = nd < 0; /* out of memory: keep the node */
    for (int i = 0; i < nd && !read; i++)
      read = deps[i] == t;
    free(deps);
    if (read)
      return true;
  }
  return false;
}

static void drop_dead(nr_graph *g) {
  for (bool changed = true; changed;) {
    changed = false;
    int w = 0;
    for (int k = 0; k < g->n_nodes; k++) {
      nr_node *n = &g->nodes[k];
      bool live = false;
      for (int o = 0; o < n->n_outputs && !live; o++)
        live = n->outputs[o] >= 0 && tensor_read(g, n->outputs[o]);
      if (live) {
        g->nodes[w++] = *n;
      } else {
        /* Cleared, not just freed: tensor_read still walks this slot in this pass. */
        nr_node_free(n);
        memset(n, 0, sizeof *n);
        changed = true;
      }
    }
    g->n_nodes = w;
  }
}

static nr_status settle_graph(nr_graph *g, nr_error *err) {
  drop_dead(g);
  nr_status st = nr_graph_toposort(g, err);
  if (!st)
    st = nr_graph_bind_ops(g, err);
  if (!st)
    st = nr_graph_infer(g, err);
  return st;
}

/* ---- the plan skeleton ---------------------------------------------------------- */

static nr_status add_slot(nr_plan *p, const nr_graph *g, int t, int *slot_of,
                          nr_error *err) {
  const nr_tensor *ten = &g->tensors[t];
  char buf[128];
  if (!nr_value_shape_known(&ten->value) || ten->value.rank > NR_MAX_RANK)
    return nr_errorf(err, NR_ERR_UNSUPPORTED,
                     "tensor '%s' has shape %s: engines need static shapes", ten->name,
                     nr_value_describe(&ten->value, buf, sizeof buf));
  if (!nr_dtype_size(ten->value.dtype))
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "tensor '%s' has dtype %s", ten->name,
                     nr_dtype_name(ten->value.dtype));
  int idx = nr_plan_add_slot(p);
  if (idx < 0)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  nr_slot *s = &p->slots[idx];
  s->name = strdup(ten->name);
  if (!s->name)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  s->dtype = ten->value.dtype;
  s->rank = ten->value.rank;
  memcpy(s->dims, ten->value.dims, sizeof s->dims);
  s->layout = NR_LAYOUT_PLAIN;
  s->nbytes = nr_slot_bytes(s, NR_LAYOUT_PLAIN);
  slot_of[t] = idx;
  if (ten->flags & NR_TENSOR_CONST) { /* weights only at the end (the weights pass) */
    s->kind = NR_SLOT_CONST;
    s->data = ten->value.data;
    return NR_OK;
  }
  s->kind = NR_SLOT_ARENA;
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == t) {
      s->kind = NR_SLOT_INPUT;
      s->offset = (uint64_t)i;
    }
  return NR_OK;
}

static nr_status slot_for(nr_plan *p, const nr_graph *g, int t, int *slot_of,
                          nr_error *err) {
  if (t < 0 || slot_of[t] >= 0)
    return NR_OK;
  return add_slot(p, g, t, slot_of, err);
}

static nr_status add_step(nr_plan *p, const nr_graph *g, int k, int *slot_of,
                          nr_error *err) {
  const nr_node *n = &g->nodes[k];
  char buf[256];
  if (n->n_inputs > NR_STEP_MAX_IO || n->n_outputs > NR_STEP_MAX_IO)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "%s: %d inputs and %d outputs; an engine "
                     "step takes at most %d of each (NR_STEP_MAX_IO)",
                     nr_node_describe(n, buf, sizeof buf), n->n_inputs, n->n_outputs,
                     NR_STEP_MAX_IO);
  nr_step *st = nr_plan_insert_step(p, p->n_steps);
  if (!st)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  st->node = k;
  st->n_in = n->n_inputs;
  st->n_out = n->n_outputs;
  for (int i = 0; i < n->n_inputs; i++) {
    nr_status s = slot_for(p, g, n->inputs[i], slot_of, err);
    if (s)
      return s;
    assert(n->inputs[i] < 0 || slot_of[n->inputs[i]] >= 0);
    st->in[i] = n->inputs[i] >= 0 ? slot_of[n->inputs[i]] : -1;
  }
  for (int o = 0; o < n->n_outputs; o++) {
    nr_status s = slot_for(p, g, n->outputs[o], slot_of, err);
    if (s)
      return s;
    assert(n->outputs[o] < 0 || slot_of[n->outputs[o]] >= 0);
    st->out[o] = n->outputs[o] >= 0 ? slot_of[n->outputs[o]] : -1;
  }
  return NR_OK;
}

static nr_status build_skeleton(nr_plan *p, nr_error *err) {
  const nr_graph *g = p->graph;
  int *slot_of = malloc(sizeof(int) * (size_t)(g->n_tensors + 1));
  p->cap_slots = g->n_tensors + 8;
  p->cap_steps = g->n_nodes + 8;
  p->slots = calloc((size_t)p->cap_slots, sizeof *p->slots);
  p->steps = calloc((size_t)p->cap_steps, sizeof *p->steps);
  p->inputs = calloc((size_t)(g->n_inputs + 1), sizeof(int));
  p->outputs = calloc((size_t)(g->n_outputs + 1), sizeof(int));
  nr_status st = NR_OK;
  if (!slot_of || !p->slots || !p->steps || !p->inputs || !p->outputs)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory planning");
  for (int t = 0; !st && t < g->n_tensors; t++)
    slot_of[t] = -1;
  for (int i = 0; !st && i < g->n_inputs; i++) {
    st = slot_for(p, g, g->inputs[i], slot_of, err);
    p->inputs[p->n_inputs++] = slot_of[g->inputs[i]];
  }
  for (int k = 0; !st && k < g->n_nodes; k++)
    st = add_step(p, g, k, slot_of, err);
  for (int i = 0; !st && i < g->n_outputs; i++) {
    st = slot_for(p, g, g->outputs[i], slot_of, err);
    p->outputs[p->n_outputs++] = slot_of[g->outputs[i]];
  }
  free(slot_of);
  return st;
}

/* ---- prepare: each tactic packs its weights and fills its params ---------------- */

static nr_status run_prepare(nr_compile_ctx *c) {
  nr_plan *p = c->plan;
  char node[256];
  for (int k = 0; k < p->n_steps; k++) {
    nr_step *st = &p->steps[k];
    const nr_node *n = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
    nr_tactic_ctx tc = {p, n, st, c->route, c->err, c->threads, c->calib, c->device};
    if (!st->tactic)
      return nr_errorf(c->err, NR_ERR_INTERNAL, "step %d has no tactic", k);
    nr_status s = st->tactic->prepare ? st->tactic->prepare(&tc, p, st) : NR_OK;
    if (s)
      return nr_error_prefix(c->err, "%s, tactic %s: ",
                             n ? nr_node_describe(n, node, sizeof node) : "reorder step",
                             st->tactic->id);
    if (st->scratch > p->scratch_size)
      p->scratch_size = st->scratch;
  }
  return NR_OK;
}

const nr_pass nr_pass_prepare = {"prepare", run_prepare};

/* ---- the driver ------------------------------------------------------------------ */

static nr_status run_passes(nr_compile_ctx *c, const nr_pass *const *passes, int n) {
  for (int i = 0; i < n; i++) {
    nr_status s = passes[i]->run(c);
    if (s)
      return c->err && !strstr(c->err->message, "pass ")
                 ? nr_error_prefix(c->err, "pass %s: ", passes[i]->name)
                 : s;
  }
  return NR_OK;
}

/* ---- the route's record ---------------------------------------------------------- */

static nr_status keep_use(nr_plan *p, const nr_route *r, int i) {
  const nr_knob_inst *k = &r->space->inst[i];
  nr_plan_knob_use *u = &p->knob_use[p->n_knob_use++];
  bool set = r->choice[i] != k->dflt;
  *u = (nr_plan_knob_use){strdup(k->id), set ? strdup(k->values[r->choice[i]]) : NULL,
                          r->use[i]};
  return u->id && (!set || u->value) ? NR_OK : NR_ERR_NOMEM;
}

/* The canonical text of r's ignored values (ignored) or of r without them. */
static char *tokens(const nr_route *r, bool ignored) {
  nr_route t = {r->space, malloc(sizeof(int) * (size_t)(r->space->n ? r->space->n : 1))};
  if (!t.choice)
    return NULL;
  for (int i = 0; i < r->space->n; i++)
    t.choice[i] = nr_route_ignored(r, i) == ignored ? r->choice[i]
                                                    : r->space->inst[i].dflt;
  char *text = nr_route_canonical(&t);
  free(t.choice);
  return text;
}

/* Copies the record of route r (tracked) into the plan. A run-time knob (knob.h,
 * NR_KNOB_RUNTIME) is read by the context, not by a build step: its value counts as
 * read and effective here. */
static nr_status record_use(nr_plan *p, const nr_route *r, nr_error *err) {
  int n = 0;
  for (int i = 0; i < r->space->n; i++) {
    const nr_knob_inst *k = &r->space->inst[i];
    if (k->def && (k->def->flags & NR_KNOB_RUNTIME) && r->choice[i] != k->dflt)
      r->use[i] |= NR_ROUTE_READ | NR_ROUTE_EFFECTIVE;
    n += r->use[i] || r->choice[i] != r->space->inst[i].dflt;
    p->ignored_knobs += nr_route_ignored(r, i);
  }
  p->knob_use = calloc((size_t)(n ? n : 1), sizeof *p->knob_use);
  nr_status st = p->knob_use ? NR_OK : NR_ERR_NOMEM;
  for (int i = 0; !st && i < r->space->n; i++)
    if (r->use[i] || r->choice[i] != r->space->inst[i].dflt)
      st = keep_use(p, r, i);
  if (!st && (!(p->ignored = tokens(r, true)) || !(p->effective_route = tokens(r, false))))
    st = NR_ERR_NOMEM;
  return st ? nr_errorf(err, NR_ERR_NOMEM, "out of memory recording the route's use")
            : NR_OK;
}

nr_status nr_compile(const nr_graph *src, const nr_route *route, int threads,
                     const struct nr_calibration *calib, nr_plan **out, nr_error *err) {
  nr_plan *p = calloc(1, sizeof *p);
  nr_route r = {0};
  if (!p)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  bool tracked = route && route->space;
  nr_status st = tracked ? nr_route_copy(&r, route, err) : NR_OK;
  if (!st && tracked)
    st = nr_route_track(&r, err);
  if (!st)
    st = nr_graph_clone(src, NULL, &p->graph, err);
  nr_device device = tracked ? route->space->device : NR_DEVICE_CPU;
  nr_compile_ctx c = {p->graph, p, tracked ? &r : route, threads, err, calib, device};
  p->device = device;
  if (!st)
    st = run_passes(&c, graph_passes, (int)(sizeof graph_passes / sizeof *graph_passes));
  if (!st)
    st = settle_graph(p->graph, err);
  c.graph = p->graph;
  if (!st)
    st = build_skeleton(p, err);
  if (!st)
    st = run_passes(&c, plan_passes, (int)(sizeof plan_passes / sizeof *plan_passes));
  if (!st && !(p->route = nr_route_canonical(route)))
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  if (!st && tracked)
    st = record_use(p, &r, err);
  nr_route_free(&r);
  if (st) {
    nr_plan_destroy(p);
    return st;
  }
  *out = p;
  return NR_OK;
}
