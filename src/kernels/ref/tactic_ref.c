/* tactic_ref.c - the reference tactic: runs any node of static shape through its
 * reference kernel (the same code the reference executor uses), on plain-layout
 * buffers the plan provides. It has the lowest priority, so it only runs what no
 * faster tactic supports, and it keeps every model compilable. */
#include "plan/tactic.h"

#include <string.h>

static bool has_subgraph(const nr_node *n) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].g)
      return true;
  return false;
}

static bool ref_supports(const nr_tactic_ctx *c) {
  const nr_node *n = c->node;
  if (!n || !n->def || !n->def->run || (n->def->flags & NR_OP_ALLOCATES_OUTPUTS) ||
      has_subgraph(n))
    return false;
  for (int i = 0; i < c->step->n_in; i++) {
    const nr_slot *s = nr_step_in(c, i);
    if (s && s->layout != NR_LAYOUT_PLAIN)
      return false;
  }
  return true;
}

static nr_status ref_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  (void)c;
  (void)plan;
  (void)step;
  return NR_OK;
}

/* A loaded step: a kernel that writes the buffers it is given, and plain inputs and
 * outputs (the reference kernels index every buffer in ONNX order). A subgraph op
 * fails cleanly at run time (no executor scope), so it is not refused here. */
static nr_status ref_validate(const nr_tactic_ctx *c) {
  const nr_node *n = c->node;
  if (!n || !n->def || !n->def->run || (n->def->flags & NR_OP_ALLOCATES_OUTPUTS))
    return nr_step_invalid(c, "node", "the reference tactic has no kernel for it that "
                           "writes the plan's buffers");
  for (int i = 0; i < c->step->n_in; i++) {
    const nr_slot *s = nr_step_in(c, i);
    if (s && s->layout != NR_LAYOUT_PLAIN)
      return nr_step_invalid(c, "input", "%d is in layout %s, not plain", i,
                             nr_layout_name(s->layout));
  }
  for (int o = 0; o < c->step->n_out; o++) {
    const nr_slot *s = nr_step_out(c, o);
    if (s && s->layout != NR_LAYOUT_PLAIN)
      return nr_step_invalid(c, "output", "%d is in layout %s, not plain", o,
                             nr_layout_name(s->layout));
  }
  return NR_OK;
}

static void to_value(const nr_slot *s, void *data, nr_value *v) {
  memset(v, 0, sizeof *v);
  v->dtype = s->dtype;
  v->rank = s->rank;
  memcpy(v->dims, s->dims, sizeof v->dims);
  v->data = data;
}

static nr_status ref_run(const nr_exec_args *a) {
  const nr_step *st = a->step;
  nr_value vin[NR_STEP_MAX_IO], vout[NR_STEP_MAX_IO];
  nr_value *ins[NR_STEP_MAX_IO], *outs[NR_STEP_MAX_IO];
  for (int i = 0; i < st->n_in; i++) {
    ins[i] = a->in_slot[i] ? &vin[i] : NULL;
    if (ins[i])
      to_value(a->in_slot[i], a->in[i], &vin[i]);
  }
  for (int o = 0; o < st->n_out; o++) {
    outs[o] = a->out_slot[o] ? &vout[o] : NULL;
    if (!outs[o])
      continue;
    to_value(a->out_slot[o], a->out[o], &vout[o]);
    /* Reference kernels may accumulate into their outputs, which the executor hands
     * them zeroed; arena memory is reused, so clear it. */
    memset(a->out[o], 0, a->out_slot[o]->nbytes);
  }
  nr_op_ctx ctx = {a->node, st->n_in, ins, st->n_out, outs, true, NULL, a->plan->graph,
                   a->err};
  return a->node->def->run(&ctx);
}

const nr_tactic nr_tactics_ref[] = {
    {"ref", "*", "*", "ref", "ref", NR_LAYOUT_PLAIN, 0, -1000, ref_supports, ref_prepare,
     ref_run, .validate = ref_validate},
    {0},
};
