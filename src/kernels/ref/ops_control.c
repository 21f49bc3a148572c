/* ops_control.c - reference operators of the control family (table filled in by its owner). */
#include "ir/op.h"

const nr_op_def nr_ref_ops_control[] = {
    {0},
};
