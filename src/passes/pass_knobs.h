/* pass_knobs.h - the ids of the passes' knobs: one enum per knob table of src/passes/.
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_PASSES_PASS_KNOBS_H
#define NR_PASSES_PASS_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_fold[], fold.c */
enum {
  NR_KNOB_FOLD_CONSTANTS = NR_KNOB_ID_BASE(fold), /* fold.constants */
  NR_KNOB_FOLD_END
};
extern const nr_knob_def nr_knobs_fold[];

/* nr_knobs_fuse[], fuse_conv.c */
enum {
  NR_KNOB_FUSE_BN = NR_KNOB_ID_BASE(fuse), /* fuse.bn */
  NR_KNOB_FUSE_CONV_ACT, /* fuse.conv_act */
  NR_KNOB_FUSE_GEMM_ACT, /* fuse.gemm_act */
  NR_KNOB_FUSE_CONV_SCALE, /* fuse.conv_scale */
  NR_KNOB_FUSE_END
};
extern const nr_knob_def nr_knobs_fuse[];

/* nr_knobs_taps[], conv_taps.c */
enum {
  NR_KNOB_TAPS_TRIM = NR_KNOB_ID_BASE(taps), /* taps.trim */
  NR_KNOB_TAPS_END
};
extern const nr_knob_def nr_knobs_taps[];

/* nr_knobs_eltwise_fuse[], fuse_eltwise.c */
enum {
  NR_KNOB_ELTWISE_FUSE = NR_KNOB_ID_BASE(eltwise_fuse), /* eltwise.fuse */
  NR_KNOB_ELTWISE_FUSE_END
};
extern const nr_knob_def nr_knobs_eltwise_fuse[];

/* nr_knobs_recognize[], recognize.c */
enum {
  NR_KNOB_RECOGNIZE_LAYERNORM = NR_KNOB_ID_BASE(recognize), /* recognize.layernorm */
  NR_KNOB_RECOGNIZE_GELU, /* recognize.gelu */
  NR_KNOB_RECOGNIZE_ATTENTION, /* recognize.attention */
  NR_KNOB_RECOGNIZE_ATTENTION_HEADS, /* recognize.attention_heads */
  NR_KNOB_RECOGNIZE_END
};
extern const nr_knob_def nr_knobs_recognize[];

/* nr_knobs_horizontal[], horizontal.c */
enum {
  NR_KNOB_HORIZONTAL_FUSE = NR_KNOB_ID_BASE(horizontal), /* horizontal.fuse */
  NR_KNOB_HORIZONTAL_END
};
extern const nr_knob_def nr_knobs_horizontal[];

/* nr_knobs_transpose[], transpose.c */
enum {
  NR_KNOB_TRANSPOSE_ELIM = NR_KNOB_ID_BASE(transpose), /* transpose.elim */
  NR_KNOB_TRANSPOSE_END
};
extern const nr_knob_def nr_knobs_transpose[];

/* nr_knobs_memory[], memory.c */
enum {
  NR_KNOB_MEMORY_PLAN = NR_KNOB_ID_BASE(memory), /* memory.plan */
  NR_KNOB_MEMORY_INPLACE, /* memory.inplace */
  NR_KNOB_MEMORY_ALIGN, /* memory.align */
  NR_KNOB_MEMORY_VIEWS, /* memory.views */
  NR_KNOB_MEMORY_END
};
extern const nr_knob_def nr_knobs_memory[];

/* nr_knobs_int8_chain[], int8_chain.c */
enum {
  NR_KNOB_QUANT_CHAIN = NR_KNOB_ID_BASE(int8_chain), /* quant.chain */
  NR_KNOB_INT8_CHAIN_END
};
extern const nr_knob_def nr_knobs_int8_chain[];

/* nr_knobs_fault[], fault.c */
enum {
  NR_KNOB_TEST_FAULT = NR_KNOB_ID_BASE(fault), /* test.fault */
  NR_KNOB_TEST_PERTURB, /* test.perturb */
  NR_KNOB_TEST_DELAY_MS, /* test.delay_ms */
  NR_KNOB_TEST_ON_ZEROS, /* test.on_zeros */
  NR_KNOB_FAULT_END
};
extern const nr_knob_def nr_knobs_fault[];

#endif
