/* layout.c - the layout rules (layout.h) and nr_layout_predict: where the layout pass
 * (compiler/layout.c) will put a tensor, answered before it runs from the producers'
 * tactics, for tactics that follow their input's layout (the NHWC pooling and copy
 * rows). */
#include "plan/layout.h"

#include "plan/tactic.h"

bool nr_layout_blockable(const nr_slot *s) {
  return s->dtype == NR_DTYPE_FLOAT && s->rank == 4;
}

bool nr_layout_follows_out0(const nr_slot *s, const nr_slot *y) {
  if (!nr_layout_blockable(s) || y->rank != 4)
    return false;
  for (int d = 0; d < 4; d++)
    if (d != 1 && s->dims[d] != y->dims[d])
      return false;
  return true;
}

bool nr_layout_any_follows(const nr_plan *p, const nr_step *st) {
  if (st->n_in < 1 || st->in[0] < 0 || st->n_out != 1 || st->out[0] < 0)
    return false;
  const nr_slot *y = &p->slots[st->out[0]];
  if (!nr_layout_blockable(y))
    return false;
  for (int i = 0; i < st->n_in; i++) {
    if (st->in[i] < 0)
      continue;
    const nr_slot *x = &p->slots[st->in[i]];
    if (x->kind == NR_SLOT_CONST || !nr_layout_blockable(x) || !nr_slot_same_dims(x, y))
      return false;
  }
  return true;
}

/* The same rules, before the pass: the producer's tactic decides; an ANY producer
 * passes on where its input 0 comes from. */
nr_layout nr_layout_predict(const nr_plan *p, const nr_route *r, int s, int before) {
  bool propagate = !r || !nr_route_is(r, NR_KNOB_LAYOUT_PROPAGATE, NULL, "off");
  for (int k = before - 1; s >= 0 && k >= 0; k--) {
    const nr_step *st = &p->steps[k];
    for (int o = 0; o < st->n_out; o++) {
      if (st->out[o] != s)
        continue;
      const nr_tactic *t = st->tactic;
      if (!t || st->out[0] < 0)
        return NR_LAYOUT_PLAIN;
      if (t->layout != NR_LAYOUT_ANY)
        return o == 0 || nr_layout_follows_out0(&p->slots[s], &p->slots[st->out[0]])
                   ? t->layout
                   : NR_LAYOUT_PLAIN;
      if (o != 0 || !propagate || !nr_layout_any_follows(p, st))
        return NR_LAYOUT_PLAIN;
      return nr_layout_predict(p, r, st->in[0], k);
    }
  }
  return NR_LAYOUT_PLAIN;
}

bool nr_step_input_arrives(const nr_tactic_ctx *c, int i, nr_layout l) {
  const nr_plan *p = c->plan;
  if (!p || !c->step || i >= c->step->n_in || c->step->in[i] < 0 ||
      (c->route && nr_route_is(c->route, NR_KNOB_LAYOUT_PROPAGATE, NULL, "off")))
    return false;
  for (int k = 0; k < p->n_steps; k++)
    if (&p->steps[k] == c->step)
      return nr_layout_predict(p, c->route, c->step->in[i], k) == l;
  return false; /* a probe step outside the plan: no producer to follow */
}
