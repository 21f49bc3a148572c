/* step_infer.c - an op's shape rule applied to a plan step's slots: what the output
 * shapes are for the input slots' shapes and, where given, their data. The engine
 * loader asks it with the constants' data only (engine_validate.c), the runtime with
 * the data a run actually feeds a step whose output shape depends on it (context.c).
 *
 * Key decision: the rule is the operator's own infer() (the one the compiler used), so
 * a plan is checked against the same semantics that built it, and no per-op table of
 * "shape-deciding inputs" has to be kept in step with the operators. */
#include "plan/step_infer.h"

#include "ir/op.h"
#include "util/error.h"

#include <string.h>

/* The value the rule sees for input i: the graph's dtype (a narrowed slot, uint8 or
 * fp16, is described as its tensor), the slot's shape, data when known. */
static void input_value(const nr_plan *p, const nr_step *st, const nr_node *n, int i,
                        void *const *data, nr_value *v) {
  const nr_slot *s = &p->slots[st->in[i]];
  const nr_value *t = &p->graph->tensors[n->inputs[i]].value;
  memset(v, 0, sizeof *v);
  v->dtype = t->dtype;
  v->rank = s->rank;
  memcpy(v->dims, s->dims, sizeof v->dims);
  if (s->kind == NR_SLOT_CONST || s->kind == NR_SLOT_ABSORBED)
    v->data = (void *)(nr_slot_data(p, s) ? nr_slot_data(p, s) : t->data);
  else if (data && s->dtype == t->dtype && s->layout == NR_LAYOUT_PLAIN)
    v->data = data[i];
}

nr_status nr_step_infer(const nr_plan *p, const nr_step *st, void *const *data,
                        unsigned skip, nr_value *out, nr_error *err) {
  const nr_node *n = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
  for (int o = 0; o < st->n_out; o++) {
    memset(&out[o], 0, sizeof out[o]);
    out[o].rank = -1;
  }
  if (!n || !n->def || !n->def->infer || st->n_in != n->n_inputs ||
      st->n_out != n->n_outputs)
    return NR_OK;
  nr_value vin[NR_STEP_MAX_IO];
  nr_value *ins[NR_STEP_MAX_IO], *outs[NR_STEP_MAX_IO];
  for (int i = 0; i < st->n_in; i++) {
    ins[i] = st->in[i] >= 0 && n->inputs[i] >= 0 ? &vin[i] : NULL;
    if (ins[i])
      input_value(p, st, n, i, i < 32 && ((skip >> i) & 1) ? NULL : data, &vin[i]);
  }
  for (int o = 0; o < st->n_out; o++)
    outs[o] = st->out[o] >= 0 ? &out[o] : NULL;
  nr_op_ctx ctx = {(nr_node *)n, st->n_in, ins, st->n_out, outs, false, NULL, p->graph,
                   err};
  nr_status s = n->def->infer(&ctx);
  for (int o = 0; o < st->n_out; o++)
    nr_value_free(&out[o]); /* shapes only: drops any data a rule computed */
  return s;
}

int nr_step_shape_differs(const nr_plan *p, const nr_step *st, const nr_value *out,
                          bool unknown_differs) {
  for (int o = 0; o < st->n_out; o++) {
    const nr_slot *y = st->out[o] >= 0 ? &p->slots[st->out[o]] : NULL;
    if (!y)
      continue;
    if (out[o].rank < 0) {
      if (unknown_differs)
        return o;
      continue;
    }
    if (out[o].rank != y->rank)
      return o;
    for (int d = 0; d < y->rank; d++)
      if (out[o].dims[d] < 0 ? unknown_differs : out[o].dims[d] != y->dims[d])
        return o;
  }
  return -1;
}
