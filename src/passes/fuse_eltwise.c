/* fuse_eltwise.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_eltwise_fuse[] = {
    {0},
};

static nr_status run_eltwise_fuse(nr_compile_ctx *c) {
  (void)c;
  return NR_OK;
}

const nr_pass nr_pass_eltwise_fuse = {"eltwise_fuse", run_eltwise_fuse};
