/* eltwise_knobs.h - the ids of the CPU elementwise family's knobs.
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_KERNELS_CPU_ELTWISE_ELTWISE_KNOBS_H
#define NR_KERNELS_CPU_ELTWISE_ELTWISE_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_cpu_eltwise[], tactics_eltwise.c */
enum {
  NR_KNOB_ELTWISE_MATH = NR_KNOB_ID_BASE(cpu_eltwise), /* eltwise.math */
  NR_KNOB_GELU_APPROX, /* gelu.approx */
  NR_KNOB_ELTWISE_TACTIC, /* eltwise.tactic */
  NR_KNOB_ELTWISE_THREADS, /* eltwise.threads */
  NR_KNOB_CPU_ELTWISE_END
};
extern const nr_knob_def nr_knobs_cpu_eltwise[];

#endif
