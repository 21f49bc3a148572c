/* ops_linalg.c - reference operators of the linalg family (table filled in by its owner). */
#include "ir/op.h"

const nr_op_def nr_ref_ops_linalg[] = {
    {0},
};
