/* conv_step.c - the single-step convolution harness of conv_step.h: reference output,
 * hand-built plan, and one tactic row run against both with guard floats. */
#include "conv_step.h"

#include "ir/fused.h"
#include "ir/ir.h"
#include "op_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

#define GUARD 48
static const float SENTINEL = -4321.625f;

static int one(int v) { return v ? v : 1; }

static int64_t out_dim(int in, int pb, int pe, int kern, int dil, int s) {
  return ((int64_t)in + pb + pe - (int64_t)one(dil) * (kern - 1) - 1) / one(s) + 1;
}

int64_t conv_case_oh(const conv_case *k) {
  return out_dim(k->h, k->pt, k->pb, k->kh, k->dh, k->sh);
}
int64_t conv_case_ow(const conv_case *k) {
  return out_dim(k->w, k->pl, k->pr, k->kw, k->dw, k->sw);
}
int64_t conv_case_xn(const conv_case *k) { return (int64_t)k->n * k->c * k->h * k->w; }
int64_t conv_case_wn(const conv_case *k) {
  return (int64_t)k->m * (k->c / one(k->group)) * k->kh * k->kw;
}
int64_t conv_case_yn(const conv_case *k) {
  return (int64_t)k->n * k->m * conv_case_oh(k) * conv_case_ow(k);
}
bool conv_case_fused(const conv_case *k) { return k->res || k->act != NR_ACT_NONE; }

const char *conv_case_text(const conv_case *k, char *buf, size_t cap) {
  snprintf(buf, cap,
           "n%d c%d %dx%d m%d k%dx%d s%dx%d d%dx%d pad %d,%d,%d,%d g%d bias%d res%d %s",
           k->n, k->c, k->h, k->w, k->m, k->kh, k->kw, one(k->sh), one(k->sw), one(k->dh),
           one(k->dw), k->pt, k->pl, k->pb, k->pr, one(k->group), k->bias, k->res,
           nr_act_name(k->act));
  return buf;
}

/* The window attributes of the node and of the reference call; returns how many. */
static int window_attrs(conv_step *cs, const conv_case *k) {
  cs->pads[0] = k->pt, cs->pads[1] = k->pl, cs->pads[2] = k->pb, cs->pads[3] = k->pr;
  cs->st[0] = one(k->sh), cs->st[1] = one(k->sw);
  cs->dl[0] = one(k->dh), cs->dl[1] = one(k->dw);
  cs->attrs[0] = attr_ints("pads", 4, cs->pads);
  cs->attrs[1] = attr_ints("strides", 2, cs->st);
  cs->attrs[2] = attr_ints("dilations", 2, cs->dl);
  cs->attrs[3] = attr_i("group", one(k->group));
  return 4;
}

bool conv_case_conv(const conv_case *k, const float *x, const float *w, const float *b,
                    float *y) {
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, bd[1] = {k->m};
  int64_t wd[4] = {k->m, k->c / one(k->group), k->kh, k->kw};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, xd, x), vw = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value vb = make_value(NR_DTYPE_FLOAT, 1, bd, b);
  const nr_value *ins[3] = {&vx, &vw, &vb};
  conv_step cs;
  int na = window_attrs(&cs, k);
  nr_value out;
  nr_error err = {0};
  if (run_one("Conv", 13, na, cs.attrs, k->bias ? 3 : 2, ins, &out, &err))
    return false;
  memcpy(y, out.data, sizeof(float) * (size_t)nr_value_count(&out));
  nr_value_free(&out);
  return true;
}

bool conv_case_reference(const conv_case *k, const float *x, const float *w, const float *b,
                         const float *r, float *y) {
  if (!conv_case_conv(k, x, w, b, y))
    return false;
  int64_t n = conv_case_yn(k);
  for (int64_t i = 0; r && i < n; i++)
    y[i] += r[i];
  nr_act_apply_ref(k->act, k->act_a, k->act_b, y, n);
  return true;
}

/* Slots X, W, B, R, Y of case k, the constants in cs->plan.weights. */
static void build_slots(conv_step *cs, const conv_case *k, const float *w, const float *b,
                        nr_layout l) {
  int64_t xd[4] = {k->n, k->c, k->h, k->w};
  int64_t wd[4] = {k->m, k->c / one(k->group), k->kh, k->kw};
  int64_t yd[4] = {k->n, k->m, conv_case_oh(k), conv_case_ow(k)};
  nr_slot *s = cs->slots;
  s[0] = (nr_slot){.name = "X", .dtype = NR_DTYPE_FLOAT, .rank = 4, .layout = l};
  memcpy(s[0].dims, xd, sizeof xd);
  s[1] = (nr_slot){.name = "W", .dtype = NR_DTYPE_FLOAT, .rank = 4, .kind = NR_SLOT_CONST};
  memcpy(s[1].dims, wd, sizeof wd);
  nr_plan_add_weights(&cs->plan, w, sizeof(float) * (size_t)conv_case_wn(k), &s[1].offset,
                      NULL);
  s[2] = (nr_slot){.name = "B", .dtype = NR_DTYPE_FLOAT, .rank = 1, .kind = NR_SLOT_CONST};
  s[2].dims[0] = k->m;
  nr_plan_add_weights(&cs->plan, b, sizeof(float) * (size_t)k->m, &s[2].offset, NULL);
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = 4, .layout = l};
  memcpy(s[3].dims, yd, sizeof yd);
  s[4] = s[3];
  s[4].name = "Y";
  cs->plan.slots = s;
  cs->plan.n_slots = 5;
}

void conv_step_make(conv_step *cs, const conv_case *k, const float *w, const float *b,
                    const conv_step_opts *o) {
  memset(cs, 0, sizeof *cs);
  build_slots(cs, k, w, b, o->layout);
  int na = window_attrs(cs, k);
  for (int i = 0; i < o->n_extra; i++)
    cs->attrs[na++] = o->extra[i];
  if (o->fused) {
    cs->attrs[na++] = attr_s("activation", nr_act_name(k->act));
    cs->attrs[na++] = attr_f("act_alpha", k->act_a);
    cs->attrs[na++] = attr_f("act_beta", k->act_b);
  }
  cs->node = (nr_node){.name = (char *)(o->name ? o->name : "conv"),
                       .op_type = o->fused ? "FusedConv" : "Conv",
                       .domain = o->fused ? NR_DOMAIN : "", .opset = o->fused ? 1 : 13,
                       .n_attrs = na, .attrs = cs->attrs};
  nr_step *st = &cs->step;
  st->n_in = o->fused ? 4 : 3;
  st->n_out = 1;
  st->in[0] = 0, st->in[1] = 1, st->in[2] = k->bias ? 2 : -1;
  st->in[3] = o->fused && k->res ? 3 : -1;
  st->out[0] = 4;
}

/* The node and slots; `fused` picks FusedConv (4 inputs, activation attributes). */
static void build(conv_step *cs, const conv_case *k, const float *w, const float *b,
                  bool fused) {
  conv_step_make(cs, k, w, b, &(conv_step_opts){.fused = fused});
}

void conv_step_build(conv_step *cs, const conv_case *k, const float *w, const float *b) {
  build(cs, k, w, b, conv_case_fused(k));
}

void conv_step_free(conv_step *cs) {
  free(cs->plan.weights);
  cs->plan.weights = NULL;
}

const nr_tactic *conv_row(const char *id, const conv_case *k, bool runnable) {
  const char *op = conv_case_fused(k) ? "FusedConv" : "Conv";
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!strcmp(t->id, id) && !strcmp(t->op_type, op))
      return runnable && (t->isa & ~nr_cpu_isa()) ? NULL : t;
  return NULL;
}

nr_graph *conv_graph(const char *name, const int64_t xd[4], const int64_t wd[4],
                     const int64_t yd[4], nr_attr *attrs, int n_attrs) {
  nr_graph *g = nr_graph_create(NULL);
  int ins[2] = {nr_graph_add_tensor(g, "X", NR_TENSOR_INPUT),
                nr_graph_add_tensor(g, "W", NR_TENSOR_CONST)};
  int y = nr_graph_add_tensor(g, "Y", NR_TENSOR_OUTPUT);
  g->tensors[ins[0]].value = make_value(NR_DTYPE_FLOAT, 4, xd, NULL);
  g->tensors[ins[1]].value = make_value(NR_DTYPE_FLOAT, 4, wd, NULL);
  g->tensors[y].value = make_value(NR_DTYPE_FLOAT, 4, yd, NULL);
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup("Conv");
  n->domain = strdup("");
  n->opset = 13;
  n->n_inputs = 2;
  n->inputs = malloc(sizeof(int) * 2);
  memcpy(n->inputs, ins, sizeof ins);
  n->n_outputs = 1;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = y;
  n->attrs = attrs;
  n->n_attrs = n_attrs;
  return g;
}

void conv_graph_destroy(nr_graph *g) {
  g->nodes[0].attrs = NULL;
  g->nodes[0].n_attrs = 0;
  nr_graph_destroy(g);
}

const nr_tactic *conv_default_row(const conv_case *k) {
  unsigned sd = 3;
  float *w = random_floats(conv_case_wn(k), &sd), *b = random_floats(k->m, &sd);
  conv_step cs;
  build(&cs, k, w, b, true);
  nr_tactic_ctx c = {&cs.plan, &cs.node, &cs.step, NULL, NULL};
  const nr_tactic *best = NULL;
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!(t->isa & ~nr_cpu_isa()) && !strcmp(t->op_type, "FusedConv") && t->supports(&c) &&
        (!best || t->priority > best->priority))
      best = t;
  conv_step_free(&cs);
  free(w), free(b);
  return best;
}

static const char *note(const conv_opts *o) { return o && o->note ? o->note : ""; }

bool conv_run_tactic(nr_test_state *t, const nr_tactic *tac, const conv_case *k,
                     const float *x, const float *w, const float *b, const float *r,
                     float *y, nr_threadpool *pool, const conv_opts *o, unsigned seed) {
  conv_step cs;
  build(&cs, k, w, b, strcmp(tac->op_type, "Conv") != 0);
  nr_error err = {0};
  nr_tactic_ctx c = {&cs.plan, &cs.node, &cs.step, o ? o->route : NULL, &err};
  float *scratch = NULL;
  bool ok = (o && o->skip_supports) || tac->supports(&c);
  if (!ok)
    goto done;
  cs.step.tactic = tac;
  if (tac->prepare(&c, &cs.plan, &cs.step)) {
    CHECK(false, "%s prepare failed: %s %s, seed %u", tac->id, err.message, note(o), seed);
    ok = false;
    goto done;
  }
  if (o && o->tweak)
    o->tweak(&cs.step, o->user);
  int64_t sn = (int64_t)(cs.step.scratch / sizeof(float)) + 1;
  scratch = guarded_floats(sn, GUARD, SENTINEL);
  void *in[4] = {(void *)x, cs.plan.weights + cs.slots[1].offset,
                 k->bias ? cs.plan.weights + cs.slots[2].offset : NULL, (void *)r};
  void *out[1] = {y};
  const nr_slot *ins[4] = {&cs.slots[0], &cs.slots[1], k->bias ? &cs.slots[2] : NULL,
                           r ? &cs.slots[3] : NULL};
  const nr_slot *outs[1] = {&cs.slots[4]};
  nr_exec_args a = {&cs.plan, &cs.step, &cs.node, in, out, ins, outs,
                    cs.step.packed_size ? cs.plan.weights + cs.step.packed_offset : NULL,
                    scratch, pool, &err};
  if (tac->run(&a) != NR_OK) {
    CHECK(false, "%s run failed: %s %s, seed %u", tac->id, err.message, note(o), seed);
    ok = false;
  }
  if (!guard_intact(scratch, sn, GUARD, SENTINEL)) {
    CHECK(false, "%s overran its scratch %s, seed %u", tac->id, note(o), seed);
    ok = false;
  }
done:
  free(scratch);
  conv_step_free(&cs);
  return ok;
}

bool conv_check(nr_test_state *t, const nr_tactic *tac, const conv_case *k, unsigned seed,
                nr_threadpool *pool, const conv_opts *o, bool must_support) {
  unsigned sd = seed;
  int64_t xn = conv_case_xn(k), yn = conv_case_yn(k), wn = conv_case_wn(k);
  float *x = guarded_floats(xn, GUARD, SENTINEL), *r = guarded_floats(yn, GUARD, SENTINEL);
  float *y = guarded_floats(yn, GUARD, SENTINEL), *want = malloc(sizeof(float) * (size_t)yn);
  float *xv = random_floats(xn, &sd), *w = random_floats(wn, &sd);
  float *b = random_floats(k->m, &sd), *rv = random_floats(yn, &sd);
  memcpy(x, xv, sizeof(float) * (size_t)xn);
  memcpy(r, rv, sizeof(float) * (size_t)yn);
  char what[160];
  conv_case_text(k, what, sizeof what);
  bool ran = false;
  if (!conv_case_reference(k, xv, w, b, k->res ? rv : NULL, want)) {
    CHECK(false, "the reference refuses %s, seed %u", what, seed);
    goto done;
  }
  int failures_before = t->failures;
  ran = conv_run_tactic(t, tac, k, x, w, b, k->res ? r : NULL, y, pool, o, seed);
  if (!ran) {
    CHECK(!must_support || t->failures > failures_before, "%s does not support %s %s, seed %u",
          tac->id, what, note(o), seed);
    goto done;
  }
  CHECK(guard_intact(y, yn, GUARD, SENTINEL) && guard_intact(x, xn, GUARD, SENTINEL) &&
            guard_intact(r, yn, GUARD, SENTINEL),
        "%s wrote past a buffer: %s %s, seed %u", tac->id, what, note(o), seed);
  CHECK(!memcmp(x, xv, sizeof(float) * (size_t)xn) &&
            !memcmp(r, rv, sizeof(float) * (size_t)yn),
        "%s changed an input: %s %s, seed %u", tac->id, what, note(o), seed);
  double taps = (double)(k->c / one(k->group)) * k->kh * k->kw;
  double tol = o && o->tol > 0 ? o->tol : 2e-5 * (taps / 4 + 4);
  int64_t bad = -1;
  double num = 0, den = 0;
  for (int64_t i = 0; i < yn; i++) {
    double d = (double)y[i] - want[i];
    num += d * d, den += (double)want[i] * want[i];
    if (bad < 0 && !(fabs(d) <= tol * (1 + fabs(want[i]))))
      bad = i;
  }
  CHECK(bad < 0, "%s %s %s: y[%lld] = %g, want %g, seed %u", tac->id, what, note(o),
        (long long)bad, bad >= 0 ? y[bad] : 0.0, bad >= 0 ? want[bad] : 0.0, seed);
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  CHECK(!(o && o->max_rel_l2 > 0) || rel <= o->max_rel_l2,
        "%s %s %s: relative L2 error %g over %g, seed %u", tac->id, what, note(o), rel,
        o ? o->max_rel_l2 : 0.0, seed);
done:
  free(x), free(r), free(y), free(want), free(xv), free(w), free(b), free(rv);
  return ran;
}
