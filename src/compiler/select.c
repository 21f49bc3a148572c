/* select.c - tactic selection: for every step, the tactics that implement its op,
 * support its node on this machine, and pass the route's restricting knobs; then
 * either the heuristic (highest priority) or profiling (time each candidate alone,
 * as TensorRT's builder does) picks one.
 *
 * Which knobs restrict candidates, and on which tactic field, is the `restricts` field
 * of their own knob rows (knob.h): a kernel family marks a knob there and its values
 * name tactic ids, algorithm families or layouts. "auto" leaves the choice to
 * selection. */
#include "backends/backend.h"
#include "plan/compile_knobs.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const nr_knob_def nr_knobs_compile[] = {
    [NR_KNOB_ROW(NR_KNOB_COMPILE_TACTIC_SELECTION)] =
    {"compile.tactic_selection", "heuristic|profile", "heuristic", NR_KNOB_GLOBAL,
     NR_KNOB_SLOW_BUILD | NR_KNOB_DATA, 0,
     "pick each node's tactic by priority rules, or by timing every candidate alone",
     NULL, NULL},
    [NR_KNOB_ROW(NR_KNOB_COMPILE_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_compile, NR_KNOB_COMPILE_END);

/* ---- restricting knobs -------------------------------------------------------- */

bool nr_knob_allows(const nr_knob_def *def, const char *value, const nr_tactic *t) {
  if (!def || !value || !strcmp(value, "auto"))
    return true;
  switch (def->restricts) {
  case NR_RESTRICTS_NONE: return true;
  case NR_RESTRICTS_ID: return !strcmp(t->id, value);
  case NR_RESTRICTS_ALGO: return t->algo && !strcmp(t->algo, value);
  case NR_RESTRICTS_LAYOUT: return !strcmp(nr_layout_name(t->layout), value);
  case NR_RESTRICTS_INT8_SOURCE: return t->source && !strcmp(t->source, value);
  case NR_RESTRICTS_PRECISION: return !strcmp(nr_precision_name(t->precision), value);
  }
  return false;
}

uint64_t nr_knob_allowing(const nr_knob_def *def, const nr_tactic *t) {
  uint64_t bits = 0;
  const char *s;
  size_t len;
  for (int i = 0; def && nr_knob_value_at(def->values, i, &s, &len); i++) {
    char v[64];
    snprintf(v, sizeof v, "%.*s", (int)len, s);
    if (strcmp(v, "auto") && nr_knob_allows(def, v, t))
      bits |= 1ull << i;
  }
  return bits;
}

static bool pins(const nr_knob_def *d, const char *v, const nr_tactic *t) {
  return v && strcmp(v, "auto") && nr_knob_allows(d, v, t);
}

/* Effective only where the default's answer differs (route.h, knob use). */
bool nr_route_pins(const nr_route *r, nr_knob_id id, const nr_node *n, const nr_tactic *t) {
  const nr_knob_def *d = nr_knob_def_of(id);
  const nr_node *at = d && d->scope == NR_KNOB_GLOBAL ? NULL : n;
  const char *v = d ? nr_route_peek_def(r, d, at) : NULL;
  bool yes = pins(d, v, t);
  if (v && yes != pins(d, d->dflt, t))
    nr_route_mark_effective(r, d, at);
  return yes;
}

static bool op_matches(const nr_tactic *t, const nr_node *n) {
  if (!t->op_type)
    return false;
  if (!strcmp(t->op_type, "*"))
    return true;
  const char *td = t->domain ? t->domain : "", *nd = n->domain ? n->domain : "";
  return !strcmp(t->op_type, n->op_type) && !strcmp(td, nd);
}

#define MAX_CANDIDATES 64

typedef struct cand_list {
  const nr_tactic *t[MAX_CANDIDATES];
  int n;
  const nr_tactic_ctx *ctx;
} cand_list;

static void collect(const nr_tactic *t, void *user) {
  cand_list *l = user;
  const nr_tactic_ctx *c = l->ctx;
  if (l->n == MAX_CANDIDATES || !op_matches(t, c->node) || (t->isa & ~nr_cpu_isa()))
    return;
  if (t->precision != nr_route_precision(c->route, c->node) || t->device != c->device)
    return;
  if (t->supports && !t->supports(c))
    return;
  l->t[l->n++] = t;
}

static const nr_tactic *by_priority(const cand_list *l) {
  const nr_tactic *best = NULL;
  for (int i = 0; i < l->n; i++)
    if (!best || l->t[i]->priority > best->priority)
      best = l->t[i];
  return best;
}

/* Drops candidates the route's restricting knobs exclude, in table order. Per-node
 * knobs are independent, so a combination may be unsatisfiable (conv.algo=direct with
 * conv.layout=nhwc when no direct tactic runs in NHWC), or a pass may have turned the
 * node into an op the knob's tactics do not implement. Such a restriction is skipped
 * rather than failing the build (every route the knob space admits must build), and
 * so is one that every candidate satisfies: the value is read without effect and the
 * route's record (route.h, knob use) lists it as ignored. So is, under heuristic
 * selection, one the highest-priority candidate satisfies: the same tactic wins. */
static void restrict_by_knobs(const nr_tactic_ctx *c, cand_list *l, bool profile) {
  const nr_knob_def *knobs[NR_KNOB_MAX_RESTRICTING];
  int nk = nr_knob_restricting(knobs, NR_KNOB_MAX_RESTRICTING);
  for (int k = 0; k < nk && k < NR_KNOB_MAX_RESTRICTING; k++) {
    const nr_knob_def *d = knobs[k];
    if (d->restricts == NR_RESTRICTS_PRECISION) /* collect() matched it already */
      continue;
    if (d->restricts == NR_RESTRICTS_INT8_SOURCE &&
        nr_route_precision(c->route, c->node) != NR_PREC_INT8)
      continue;
    const nr_node *at = d->scope == NR_KNOB_GLOBAL ? NULL : c->node;
    const char *v = nr_route_peek_def(c->route, d, at);
    if (!v || !strcmp(v, "auto"))
      continue;
    int w = 0;
    const nr_tactic *kept[MAX_CANDIDATES];
    for (int i = 0; i < l->n; i++)
      if (nr_knob_allows(d, v, l->t[i]))
        kept[w++] = l->t[i];
    if (!w || w == l->n)
      continue;
    if (profile || !nr_knob_allows(d, v, by_priority(l)))
      nr_route_mark_effective(c->route, d, at);
    memcpy(l->t, kept, sizeof(kept[0]) * (size_t)w);
    l->n = w;
  }
}

/* ---- profiling ------------------------------------------------------------------ */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Times tactic t on step k in isolation: inputs get their layout-sized buffers
 * (constants their real data), the tactic prepares into the plan's weights (rolled
 * back afterwards), and the best of a few runs counts. Returns a negative time when
 * the tactic fails. */
static double time_tactic(nr_compile_ctx *cc, int k, const nr_tactic *t) {
  nr_plan *p = cc->plan;
  nr_step saved = p->steps[k], *st = &p->steps[k];
  uint64_t weights_mark = p->weights_size;
  void *in[NR_STEP_MAX_IO] = {0}, *out[NR_STEP_MAX_IO] = {0}, *scratch = NULL;
  const nr_slot *ins[NR_STEP_MAX_IO] = {0}, *outs[NR_STEP_MAX_IO] = {0};
  nr_slot tmp_in[NR_STEP_MAX_IO], tmp_out[NR_STEP_MAX_IO];
  double best = -1;
  nr_error err = {0};
  st->tactic = t;
  nr_tactic_ctx tc = {p, &p->graph->nodes[st->node], st, cc->route, &err, cc->threads,
                      cc->calib};
  if (t->prepare && t->prepare(&tc, p, st))
    goto done;
  for (int i = 0; i < st->n_in; i++) {
    if (st->in[i] < 0)
      continue;
    tmp_in[i] = p->slots[st->in[i]];
    if (tmp_in[i].kind != NR_SLOT_CONST && t->layout != NR_LAYOUT_ANY && i == 0)
      tmp_in[i].layout = t->layout;
    ins[i] = &tmp_in[i];
    in[i] = tmp_in[i].kind == NR_SLOT_CONST
                ? (void *)nr_slot_data(p, &tmp_in[i])
                : calloc(1, nr_slot_bytes(&tmp_in[i], tmp_in[i].layout) + 64);
  }
  for (int o = 0; o < st->n_out; o++) {
    if (st->out[o] < 0)
      continue;
    tmp_out[o] = p->slots[st->out[o]];
    if (t->layout != NR_LAYOUT_ANY && o == 0)
      tmp_out[o].layout = t->layout;
    outs[o] = &tmp_out[o];
    out[o] = calloc(1, nr_slot_bytes(&tmp_out[o], tmp_out[o].layout) + 64);
  }
  scratch = st->scratch ? aligned_alloc(64, (st->scratch + 63) / 64 * 64) : NULL;
  nr_exec_args a = {p, st, tc.node, in, out, ins, outs,
                    st->packed_size ? p->weights + st->packed_offset : NULL,
                    scratch, NULL, &err};
  for (int r = 0; r < 3; r++) {
    double t0 = now_ms();
    if (t->run(&a)) {
      best = -1;
      break;
    }
    double dt = now_ms() - t0;
    if (best < 0 || dt < best)
      best = dt;
  }
done:
  for (int i = 0; i < st->n_in; i++)
    if (ins[i] && ins[i]->kind != NR_SLOT_CONST)
      free(in[i]);
  for (int o = 0; o < st->n_out; o++)
    free(out[o]);
  free(scratch);
  *st = saved;
  assert(p->weights_size >= weights_mark); /* prepare only appends to the weights */
  p->weights_size = weights_mark;
  return best;
}

static const nr_tactic *by_profile(nr_compile_ctx *cc, int k, const cand_list *l) {
  const nr_tactic *best = NULL;
  double best_ms = 0;
  const nr_backend *be = nr_backend_for(cc->device);
  for (int i = 0; i < l->n; i++) {
    double ms = be && be->time_step ? be->time_step(cc, k, l->t[i])
                                    : time_tactic(cc, k, l->t[i]);
    if (ms >= 0 && (!best || ms < best_ms)) {
      best = l->t[i];
      best_ms = ms;
    }
  }
  return best ? best : by_priority(l);
}

static nr_status select_step(nr_compile_ctx *cc, int k, bool profile) {
  nr_plan *p = cc->plan;
  nr_step *st = &p->steps[k];
  if (st->node < 0 || st->tactic)
    return NR_OK;
  nr_tactic_ctx tc = {p, &p->graph->nodes[st->node], st, cc->route, cc->err, cc->threads,
                      cc->calib, cc->device};
  cand_list l = {.ctx = &tc};
  nr_tactic_foreach(collect, &l);
  restrict_by_knobs(&tc, &l, profile);
  nr_precision prec = nr_route_precision(cc->route, tc.node);
  if (!l.n && prec != NR_PREC_FP32) {
    char node[256];
    return nr_errorf(cc->err, NR_ERR_UNSUPPORTED, "%s: no %s tactic supports it on this "
                     "machine (precision@%s=%s)", nr_node_describe(tc.node, node, sizeof node),
                     nr_precision_name(prec), tc.node->name, nr_precision_name(prec));
  }
  if (!l.n) {
    char node[256];
    if (cc->device != NR_DEVICE_CPU)
      return nr_errorf(cc->err, NR_ERR_UNSUPPORTED, "%s: no %s tactic runs op %s with "
                       "these shapes, dtypes and attributes (`nnroute run --reference` "
                       "runs any model)", nr_node_describe(tc.node, node, sizeof node),
                       nr_device_name(cc->device), tc.node->op_type);
    return nr_errorf(cc->err, NR_ERR_UNSUPPORTED,
                     "%s: no tactic can run it (engines need static shapes and no "
                     "subgraphs; `nnroute run --reference` runs any model)",
                     nr_node_describe(tc.node, node, sizeof node));
  }
  st->tactic = profile && l.n > 1 ? by_profile(cc, k, &l) : by_priority(&l);
  return NR_OK;
}

static nr_status run_select(nr_compile_ctx *c) {
  bool profile = nr_route_is(c->route, NR_KNOB_COMPILE_TACTIC_SELECTION, NULL, "profile");
  for (int k = 0; k < c->plan->n_steps; k++) {
    nr_status s = select_step(c, k, profile);
    if (s)
      return s;
  }
  return NR_OK;
}

const nr_pass nr_pass_select = {"select", run_select};
