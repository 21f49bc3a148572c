/* compiler_knobs.h - the ids of the compiler's own knobs: tactic selection (select.c)
 * and precision (precision.c).
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_COMPILER_COMPILER_KNOBS_H
#define NR_COMPILER_COMPILER_KNOBS_H

#include "compiler/knob.h"

/* nr_knobs_compile[], select.c */
enum {
  NR_KNOB_COMPILE_TACTIC_SELECTION = NR_KNOB_ID_BASE(compile), /* compile.tactic_selection */
  NR_KNOB_COMPILE_END
};
extern const nr_knob_def nr_knobs_compile[];

/* nr_knobs_precision[], precision.c */
enum {
  NR_KNOB_PREC = NR_KNOB_ID_BASE(precision), /* precision (NR_KNOB_PRECISION is a flag) */
  NR_KNOB_PRECISION_INT8_SOURCE, /* precision.int8_source */
  NR_KNOB_QUANT_CALIBRATION, /* quant.calibration */
  NR_KNOB_PRECISION_END
};
extern const nr_knob_def nr_knobs_precision[];

#endif
