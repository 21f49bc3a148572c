/* compile_knobs.h - the ids of the compile driver's knobs: tactic selection (its table,
 * nr_knobs_compile, is in compiler/select.c) and precision (nr_knobs_precision, in
 * passes/precision.c). They sit on the plan floor because the backends, the
 * calibration records (plan/quant.c) and the tuner read them too.
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_PLAN_COMPILE_KNOBS_H
#define NR_PLAN_COMPILE_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_compile[], compiler/select.c */
enum {
  NR_KNOB_COMPILE_TACTIC_SELECTION = NR_KNOB_ID_BASE(compile), /* compile.tactic_selection */
  NR_KNOB_COMPILE_END
};
extern const nr_knob_def nr_knobs_compile[];

/* nr_knobs_precision[], passes/precision.c */
enum {
  NR_KNOB_PREC = NR_KNOB_ID_BASE(precision), /* precision (NR_KNOB_PRECISION is a flag) */
  NR_KNOB_PRECISION_INT8_SOURCE, /* precision.int8_source */
  NR_KNOB_QUANT_CALIBRATION, /* quant.calibration */
  NR_KNOB_PRECISION_END
};
extern const nr_knob_def nr_knobs_precision[];

#endif
