/* ops_fused.c - placeholder until the fused-op family lands. */
#include "ir/op.h"

const nr_op_def nr_ref_ops_fused[] = {
    {0},
};
