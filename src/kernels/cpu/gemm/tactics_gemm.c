/* tactics_gemm.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_gemm[] = {
    {0},
};

const nr_tactic nr_tactics_gemm[] = {
    {0},
};
