/* act.c - the dispatch of the kernels' epilogue activations (act.h) to the AVX2 array
 * kernel, or to the scalar reference (ir/act.c) without AVX2. */
#include "kernels/act.h"

#include "kernels/cpu/eltwise/vmath.h"
#include "util/cpu.h"

void nr_act_apply(nr_act act, float a, float b, float *x, int64_t n) {
  if (act == NR_ACT_NONE || n <= 0)
    return;
  if (nr_cpu_isa() & NR_ISA_AVX2)
    nr_f32_act__avx2(act, a, b, x, n);
  else
    nr_act_apply_ref(act, a, b, x, n);
}
