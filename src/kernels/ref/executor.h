/* executor.h - the reference executor: runs an nr_graph node by node with the
 * reference kernels. It is the semantic oracle for every faster kernel, so it is
 * plain: each node's shape rule runs on the actual inputs, outputs are allocated,
 * the kernel fills them, and values are freed after their last use. */
#ifndef NR_KERNELS_REF_EXECUTOR_H
#define NR_KERNELS_REF_EXECUTOR_H

#include "ir/op.h"

/* Runs g (ops bound, toposorted). inputs bind g->inputs in order; outputs receive
 * g->outputs as owned values the caller frees with nr_value_free(). */
nr_status nr_ref_exec(const nr_graph *g, const nr_value *inputs, nr_value *outputs,
                      nr_error *err);

/* nr_ref_exec, calling fn for every graph input and every node output of g (not of
 * subgraphs) as soon as it is computed, before any value is freed. A non-OK return
 * from fn stops the run with that status. */
typedef nr_status (*nr_ref_observer)(void *user, const nr_graph *g, int tensor,
                                     const nr_value *v);
nr_status nr_ref_exec_observed(const nr_graph *g, const nr_value *inputs,
                               nr_value *outputs, nr_ref_observer fn, void *user,
                               nr_error *err);

/* Runs one operator on the given inputs, as a graph of one node: the unit tests'
 * way to exercise a kernel. attrs are copied. Absent optional inputs are NULL. */
nr_status nr_ref_exec_node(const char *op_type, const char *domain, int opset,
                           int n_attrs, const nr_attr *attrs, int n_inputs,
                           const nr_value *const *inputs, int n_outputs,
                           nr_value *outputs, nr_error *err);

#endif
