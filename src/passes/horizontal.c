/* horizontal.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_horizontal[] = {
    {0},
};

static nr_status run_horizontal(nr_compile_ctx *c) {
  (void)c;
  return NR_OK;
}

const nr_pass nr_pass_horizontal = {"horizontal", run_horizontal};
