/* step_infer.h - an op's shape rule on a plan step's slots (step_infer.c): used by the
 * engine loader to check stored output shapes, and by the runtime to check, before a
 * step runs, that the data a run feeds it gives the output shapes the plan has. */
#ifndef NR_PLAN_STEP_INFER_H
#define NR_PLAN_STEP_INFER_H

#include "plan/plan.h"

/* Output shapes (out[0..st->n_out), rank -1 where unknown, no data) that the node's
 * infer() gives for the step's input slots: constants with their data; other inputs
 * with data[i] when data is not NULL, bit i of skip is clear, and the slot is plain
 * and of its tensor's dtype. A step without a node or a rule gives all unknown. The
 * rule's own error (status and message in err) when it refuses the inputs. */
nr_status nr_step_infer(const nr_plan *p, const nr_step *st, void *const *data,
                        unsigned skip, nr_value *out, nr_error *err);
/* The first output whose slot shape differs from out's, or -1. Unknown dims (and an
 * unknown rank) count as different only when unknown_differs. */
int nr_step_shape_differs(const nr_plan *p, const nr_step *st, const nr_value *out,
                          bool unknown_differs);

#endif
