/* tactics_conv.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_knob_def nr_knobs_conv[] = {
    {0},
};

const nr_tactic nr_tactics_conv[] = {
    {0},
};
