/* reorder.c - placeholder tables until this family lands. */
#include "compiler/plan.h"

const nr_tactic nr_tactics_reorder[] = {
    {0},
};
