/* gemm_knobs.h - the ids of the fp32 GEMM family's knobs (gemm.*), which the
 * low-precision and int8 GEMMs read too.
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_KERNELS_CPU_GEMM_GEMM_KNOBS_H
#define NR_KERNELS_CPU_GEMM_GEMM_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_gemm[], tactics_gemm.c */
enum {
  NR_KNOB_GEMM_TACTIC = NR_KNOB_ID_BASE(gemm), /* gemm.tactic */
  NR_KNOB_GEMM_KC, /* gemm.kc */
  NR_KNOB_GEMM_MC, /* gemm.mc */
  NR_KNOB_GEMM_NC, /* gemm.nc */
  NR_KNOB_GEMM_THREADS, /* gemm.threads */
  NR_KNOB_GEMM_THREADS_MAP, /* gemm.threads_map */
  NR_KNOB_GEMM_THREADS_MAX, /* gemm.threads_max */
  NR_KNOB_GEMM_PREPACK, /* gemm.prepack */
  NR_KNOB_GEMM_EPILOGUE, /* gemm.epilogue */
  NR_KNOB_GEMM_END
};
extern const nr_knob_def nr_knobs_gemm[];

#endif
