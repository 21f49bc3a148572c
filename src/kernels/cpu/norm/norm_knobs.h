/* norm_knobs.h - the ids of the CPU softmax, normalization, pooling and reduction
 * knobs.
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_KERNELS_CPU_NORM_NORM_KNOBS_H
#define NR_KERNELS_CPU_NORM_NORM_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_cpu_norm[], tactics_norm.c */
enum {
  NR_KNOB_SOFTMAX_ALGO = NR_KNOB_ID_BASE(cpu_norm), /* softmax.algo */
  NR_KNOB_LAYERNORM_ALGO, /* layernorm.algo */
  NR_KNOB_POOL_TACTIC, /* pool.tactic */
  NR_KNOB_REDUCE_REASSOC, /* reduce.reassoc */
  NR_KNOB_CPU_NORM_END
};
extern const nr_knob_def nr_knobs_cpu_norm[];

#endif
