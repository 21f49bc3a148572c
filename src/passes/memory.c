/* memory.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_memory[] = {
    {0},
};

static nr_status run_memory(nr_compile_ctx *c) {
  (void)c;
  return NR_OK;
}

const nr_pass nr_pass_memory = {"memory", run_memory};
