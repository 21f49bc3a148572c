/* fuse_conv.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_fuse[] = {
    {0},
};

static nr_status run_fuse_bn(nr_compile_ctx *c) {
  (void)c;
  return NR_OK;
}

const nr_pass nr_pass_fuse_bn = {"fuse_bn", run_fuse_bn};

static nr_status run_fuse_act(nr_compile_ctx *c) {
  (void)c;
  return NR_OK;
}

const nr_pass nr_pass_fuse_act = {"fuse_act", run_fuse_act};
