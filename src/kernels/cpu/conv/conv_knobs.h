/* conv_knobs.h - the ids of the convolution family's knobs (conv.*).
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_KERNELS_CPU_CONV_CONV_KNOBS_H
#define NR_KERNELS_CPU_CONV_CONV_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_conv[], tactics_conv.c */
enum {
  NR_KNOB_CONV_ALGO = NR_KNOB_ID_BASE(conv), /* conv.algo */
  NR_KNOB_CONV_LAYOUT, /* conv.layout */
  NR_KNOB_CONV_GEMM_KC, /* conv.gemm_kc */
  NR_KNOB_CONV_GEMM_MC, /* conv.gemm_mc */
  NR_KNOB_CONV_GEMM_NC, /* conv.gemm_nc */
  NR_KNOB_CONV_UKERNEL, /* conv.ukernel */
  NR_KNOB_CONV_PREPACK, /* conv.prepack */
  NR_KNOB_CONV_EPILOGUE, /* conv.epilogue */
  NR_KNOB_CONV_WINOGRAD_FROM, /* conv.winograd_from */
  NR_KNOB_CONV_PW_TILE, /* conv.pw_tile */
  NR_KNOB_CONV_PW_KC, /* conv.pw_kc */
  NR_KNOB_CONV_PW_ORDER, /* conv.pw_order */
  NR_KNOB_CONV_THREADS, /* conv.threads */
  NR_KNOB_CONV_DW_KERNEL, /* conv.dw_kernel */
  NR_KNOB_CONV_END
};
extern const nr_knob_def nr_knobs_conv[];

#endif
