/* transpose.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_transpose[] = {
    {0},
};

static nr_status run_transpose(nr_compile_ctx *c) {
  (void)c;
  return NR_OK;
}

const nr_pass nr_pass_transpose = {"transpose", run_transpose};
