/* ops_index.c - reference operators of the index family (table filled in by its owner). */
#include "ir/op.h"

const nr_op_def nr_ref_ops_index[] = {
    {0},
};
