/* cuda_knobs.h - the ids of the CUDA backend's knobs (cuda_knobs.c; in every build,
 * like the table).
 *
 * Each enum lists its table's rows in table order (the table places every row at
 * its id and checks its length against the enum: knob.h, knob ids). Code reads these
 * knobs by id; only routes spell their names. */
#ifndef NR_BACKENDS_CUDA_CUDA_KNOBS_H
#define NR_BACKENDS_CUDA_CUDA_KNOBS_H

#include "plan/knob.h"

/* nr_knobs_cuda[], cuda_knobs.c */
enum {
  NR_KNOB_CUDA_PRECISION = NR_KNOB_ID_BASE(cuda), /* cuda.precision */
  NR_KNOB_CUDA_GEMM_TACTIC, /* cuda.gemm.tactic */
  NR_KNOB_CUDA_GEMM_ALGO, /* cuda.gemm.algo */
  NR_KNOB_CUDA_GEMM_GELU, /* cuda.gemm.gelu */
  NR_KNOB_CUDA_CONV_ALGO, /* cuda.conv.algo */
  NR_KNOB_CUDA_CONV_TACTIC, /* cuda.conv.tactic */
  NR_KNOB_CUDA_CONV_LAYOUT, /* cuda.conv.layout */
  NR_KNOB_CUDA_ATTENTION_FP32, /* cuda.attention.fp32 */
  NR_KNOB_CUDA_GRAPHS, /* cuda.graphs */
  NR_KNOB_CUDA_WORKSPACE, /* cuda.workspace */
  NR_KNOB_CUDA_END
};
extern const nr_knob_def nr_knobs_cuda[];

#endif
