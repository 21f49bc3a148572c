/* onnx_internal.h - what the loader's files (onnx_load.c, onnx_attr.c, onnx_tensor.c)
 * share and nobody else needs.
 *
 * The load context carries the tensor data budget through the recursion into
 * subgraphs, so that max_bytes bounds the whole model rather than each tensor. */
#ifndef NR_ONNX_INTERNAL_H
#define NR_ONNX_INTERNAL_H

#include "onnx/onnx_load.h"

typedef struct nr_onnx_ctx {
  const char *base_dir; /* NULL: external data refused */
  size_t max_bytes;     /* budget for all tensor data in the model */
  size_t used_bytes;
  nr_error *err;
} nr_onnx_ctx;

/* nr_onnx_tensor_to_value with an exact byte limit (0 means 0) and a label for
 * messages ("initializer 'w'"); what may be NULL to use the tensor's name. */
nr_status nr_onnx_tensor_convert(const Onnx__TensorProto *t, const char *what,
                                 const char *base_dir, size_t limit, nr_value *out,
                                 nr_error *err);

/* Converts a tensor and charges its size to the context's budget. */
nr_status nr_onnx_ctx_tensor(nr_onnx_ctx *ctx, const Onnx__TensorProto *t,
                             const char *what, nr_value *out);

/* Fills g (already created, parent and opsets set) from gp: initializers, inputs,
 * nodes with their attributes (recursing into subgraphs), outputs. */
nr_status nr_onnx_build_graph(nr_onnx_ctx *ctx, const Onnx__GraphProto *gp, nr_graph *g);

/* Converts one attribute of the node described by node_desc ("node 'n' (If)") into
 * *out, which starts zeroed; subgraphs become children of g. On failure *out may
 * hold partial state that nr_graph_destroy() releases. */
nr_status nr_onnx_convert_attr(nr_onnx_ctx *ctx, nr_graph *g, const char *node_desc,
                               const Onnx__AttributeProto *ap, nr_attr *out);

/* strdup that maps NULL to "". Returns NULL only when out of memory. */
char *nr_onnx_strdup(const char *s);

#endif
