/* einsum.h - the reference Einsum operator's entry points, listed in the linalg
 * family table (ops_linalg.c) but kept in its own file, einsum.c, because the
 * equation parser is a piece of its own. */
#ifndef NR_KERNELS_REF_EINSUM_H
#define NR_KERNELS_REF_EINSUM_H

#include "ir/op.h"

nr_status nr_ref_einsum_infer(nr_op_ctx *ctx);
nr_status nr_ref_einsum_run(nr_op_ctx *ctx);

#endif
