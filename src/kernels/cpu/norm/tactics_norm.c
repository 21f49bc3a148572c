/* tactics_norm.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_cpu_norm[] = {
    {0},
};

const nr_tactic nr_tactics_cpu_norm[] = {
    {0},
};
