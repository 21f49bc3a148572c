/* weights.c - the weights pass: the last word on which constants an engine stores.
 *
 * Until this pass a constant slot points at its graph tensor's bytes (slot->data) and
 * has no place in the weights; tactics read it there through nr_step_const while they
 * pack. Here every constant that some step still reads at run time gets its bytes
 * appended to the weights, after all packed data. A constant whose every reader said
 * (nr_step_absorb) that it packed it and never reads the original again becomes
 * NR_SLOT_ABSORBED and costs nothing: before this pass a ResNet-50 engine held each
 * convolution's weights twice, raw and packed (189 MB for a 94 MB model), and a GPU
 * engine of an fp16 BERT-base held the fp32 originals beside the fp16 copies its
 * products read. Smaller files load faster, which the tuner's confirmation rounds pay
 * for every round.
 *
 * Key decision: absorption is opt-in per step and input. A tactic that does not call
 * nr_step_absorb keeps the bytes, so forgetting costs space, never correctness. A
 * constant that is a graph output or that another slot aliases is always kept. */
#include "plan/pass.h"
#include "plan/plan.h"
#include "util/error.h"

#include <assert.h>
#include <stdlib.h>

/* needed[s]: does anything read slot s at run time? One pass over the outputs, the
 * aliases and every step's inputs (an input the step absorbed does not count). */
static void mark_needed(const nr_plan *p, bool *needed) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->outputs[i] >= 0 && p->outputs[i] < p->n_slots)
      needed[p->outputs[i]] = true;
  for (int s = 0; s < p->n_slots; s++)
    if (p->slots[s].alias_of >= 0 && p->slots[s].alias_of < p->n_slots)
      needed[p->slots[s].alias_of] = true;
  for (int k = 0; k < p->n_steps; k++) {
    const nr_step *st = &p->steps[k];
    for (int i = 0; i < st->n_in; i++) {
      assert(st->in[i] < p->n_slots);
      if (st->in[i] >= 0 && !(i < 32 && (st->absorbed >> i & 1u)))
        needed[st->in[i]] = true;
    }
    for (int o = 0; o < st->n_out; o++)
      if (st->out[o] >= 0)
        needed[st->out[o]] = true;
  }
}

static nr_status run_weights(nr_compile_ctx *c) {
  nr_plan *p = c->plan;
  bool *needed = calloc((size_t)p->n_slots + 1, sizeof *needed);
  if (!needed)
    return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory");
  mark_needed(p, needed);
  nr_status st = NR_OK;
  for (int s = 0; s < p->n_slots && !st; s++) {
    nr_slot *sl = &p->slots[s];
    if (sl->kind != NR_SLOT_CONST)
      continue;
    if (!needed[s]) {
      sl->kind = NR_SLOT_ABSORBED;
      sl->offset = 0;
      continue;
    }
    st = nr_plan_add_weights(p, sl->data, sl->nbytes, &sl->offset, c->err);
    assert(st || sl->offset + sl->nbytes <= p->weights_size);
    sl->data = NULL;
  }
  free(needed);
  return st;
}

const nr_pass nr_pass_weights = {"weights", run_weights};
