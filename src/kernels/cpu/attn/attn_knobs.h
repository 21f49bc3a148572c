/* attn_knobs.h - the ids of the CPU attention family's knobs.
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_KERNELS_CPU_ATTN_ATTN_KNOBS_H
#define NR_KERNELS_CPU_ATTN_ATTN_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_cpu_attn[], tactics_attn.c */
enum {
  NR_KNOB_ATTENTION_TACTIC = NR_KNOB_ID_BASE(cpu_attn), /* attention.tactic */
  NR_KNOB_ATTENTION_KV_BLOCK, /* attention.kv_block */
  NR_KNOB_CPU_ATTN_END
};
extern const nr_knob_def nr_knobs_cpu_attn[];

#endif
