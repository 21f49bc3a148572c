/* ops_elementwise.c - the elementwise operator family: its table, and the helpers its
 * files share (dtype classes and checks, the row walker of elementwise.h).
 *
 * The kernels live by kind: ops_elementwise_unary.c (math and activations, Clip),
 * ops_elementwise_binary.c (arithmetic, comparison, logic, bits, the variadic
 * Sum/Mean/Min/Max and Where) and ops_elementwise_cast.c (Cast, CastLike). One row
 * serves every opset of an operator; a kernel that must tell versions apart (Clip's
 * attributes before opset 11, Cast's string `to` in opset 1) reads node->opset. */
#include "kernels/ref/elementwise.h"

#include <string.h>

#define UNARY(name, since) {"", name, since, nr_ew_unary_infer, nr_ew_unary_run, 0}
#define BINARY(name, since) {"", name, since, nr_ew_binary_infer, nr_ew_binary_run, 0}
#define VARIADIC(name) {"", name, 1, nr_ew_variadic_infer, nr_ew_variadic_run, 0}

const nr_op_def nr_ref_ops_elementwise[] = {
    /* unary math and activations */
    UNARY("Relu", 1), UNARY("LeakyRelu", 1), UNARY("Sigmoid", 1),
    UNARY("HardSigmoid", 1), UNARY("HardSwish", 14), UNARY("Tanh", 1), UNARY("Erf", 9),
    UNARY("Gelu", 20), UNARY("Softplus", 1), UNARY("Softsign", 1), UNARY("Elu", 1),
    UNARY("Selu", 1), UNARY("Celu", 12), UNARY("ThresholdedRelu", 10),
    UNARY("Shrink", 9), UNARY("Mish", 18), UNARY("Swish", 24), UNARY("Exp", 1),
    UNARY("Log", 1), UNARY("Sqrt", 1), UNARY("Reciprocal", 1), UNARY("Abs", 1),
    UNARY("Neg", 1), UNARY("Floor", 1), UNARY("Ceil", 1), UNARY("Round", 11),
    UNARY("Sign", 9), UNARY("Sin", 7), UNARY("Cos", 7), UNARY("Tan", 7),
    UNARY("Asin", 7), UNARY("Acos", 7), UNARY("Atan", 7), UNARY("Sinh", 9),
    UNARY("Cosh", 9), UNARY("Asinh", 9), UNARY("Acosh", 9), UNARY("Atanh", 9),
    UNARY("IsNaN", 9), UNARY("IsInf", 10), UNARY("Not", 1), UNARY("BitwiseNot", 18),
    {"", "Clip", 1, nr_ew_clip_infer, nr_ew_clip_run, 0},
    /* binary, numpy broadcasting */
    BINARY("Add", 1), BINARY("Sub", 1), BINARY("Mul", 1), BINARY("Div", 1),
    BINARY("Pow", 1), BINARY("Mod", 10), BINARY("PRelu", 1), BINARY("Equal", 1),
    BINARY("Less", 1), BINARY("Greater", 1), BINARY("LessOrEqual", 12),
    BINARY("GreaterOrEqual", 12), BINARY("And", 1), BINARY("Or", 1), BINARY("Xor", 1),
    BINARY("BitwiseAnd", 18), BINARY("BitwiseOr", 18), BINARY("BitwiseXor", 18),
    BINARY("BitShift", 11),
    /* variadic and ternary */
    VARIADIC("Sum"), VARIADIC("Mean"), VARIADIC("Min"), VARIADIC("Max"),
    {"", "Where", 9, nr_ew_where_infer, nr_ew_where_run, 0},
    /* conversions */
    {"", "Cast", 1, nr_ew_cast_infer, nr_ew_cast_run, 0},
    {"", "CastLike", 15, nr_ew_cast_infer, nr_ew_cast_run, 0},
    {0},
};

/* ---- dtype classes -------------------------------------------------------------- */

unsigned nr_ew_class(nr_dtype t) {
  switch (t) {
  case NR_DTYPE_FLOAT: case NR_DTYPE_DOUBLE: case NR_DTYPE_FLOAT16:
  case NR_DTYPE_BFLOAT16:
    return NR_EW_FLOAT;
  case NR_DTYPE_INT8: case NR_DTYPE_INT16: case NR_DTYPE_INT32: case NR_DTYPE_INT64:
    return NR_EW_SINT;
  case NR_DTYPE_UINT8: case NR_DTYPE_UINT16: case NR_DTYPE_UINT32:
  case NR_DTYPE_UINT64:
    return NR_EW_UINT;
  case NR_DTYPE_BOOL:
    return NR_EW_BOOL;
  case NR_DTYPE_STRING:
    return NR_EW_STRING;
  default:
    return 0;
  }
}

nr_status nr_ew_check_dtype(nr_op_ctx *ctx, int i, unsigned allowed) {
  const nr_value *v = nr_op_in(ctx, i);
  if (!v || v->dtype == NR_DTYPE_UNDEFINED)
    return NR_OK;
  unsigned c = nr_ew_class(v->dtype);
  if (c & allowed & ~NR_EW_STRING)
    return NR_OK;
  if (c == NR_EW_STRING && (allowed & NR_EW_STRING))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED,
                      "string tensors are not supported (input %d)", i);
  if (c == 0 && v->dtype > NR_DTYPE_BFLOAT16)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "input %d has dtype %d, not supported", i,
                      (int)v->dtype);
  return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d has dtype %s, which %s does not accept",
                    i, nr_dtype_name(v->dtype), ctx->node->op_type);
}

nr_status nr_ew_check_same_dtype(nr_op_ctx *ctx, int i, int j) {
  const nr_value *a = nr_op_in(ctx, i), *b = nr_op_in(ctx, j);
  if (!a || !b || a->dtype == NR_DTYPE_UNDEFINED || b->dtype == NR_DTYPE_UNDEFINED ||
      a->dtype == b->dtype)
    return NR_OK;
  return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is %s but input %d is %s", i,
                    nr_dtype_name(a->dtype), j, nr_dtype_name(b->dtype));
}

nr_status nr_ew_check_legacy_broadcast(nr_op_ctx *ctx) {
  /* Before opset 7, broadcast=1 aligned B to A's trailing dims (numpy-compatible)
   * unless `axis` named another position, which numpy rules cannot express. */
  if (ctx->node->opset < 7 && nr_attr_int(ctx->node, "broadcast", 0) &&
      nr_node_attr(ctx->node, "axis"))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED,
                      "legacy broadcast with attribute 'axis' (opset < 7) is not supported");
  return NR_OK;
}

/* ---- the row walker ------------------------------------------------------------- */

/* Strides of input v aligned to the output dims; broadcast dims get stride 0. */
static void aligned_strides(const nr_value *v, int rank, const int64_t *dims,
                            int64_t *strides) {
  int64_t s = 1;
  for (int d = rank - 1, e = v->rank - 1; d >= 0; d--, e--) {
    if (e >= 0 && v->dims[e] != 1 && dims[d] != 1) {
      strides[d] = s;
      s *= v->dims[e];
    } else {
      strides[d] = 0;
    }
  }
}

/* Merges dim d into d+1 when every input walks them as one: then the pair behaves
 * like a single dim of their product. Returns the new rank. */
static int merge_dims(nr_ew_rows *w, int rank, int64_t *dims) {
  int out = 0;
  for (int d = 0; d < rank; d++) {
    bool merge = out > 0;
    for (int k = 0; k < w->n && merge; k++)
      merge = w->strides[k][out - 1] == w->strides[k][d] * dims[d];
    if (merge) {
      dims[out - 1] *= dims[d];
      for (int k = 0; k < w->n; k++)
        w->strides[k][out - 1] = w->strides[k][d];
    } else {
      dims[out] = dims[d];
      for (int k = 0; k < w->n; k++)
        w->strides[k][out] = w->strides[k][d];
      out++;
    }
  }
  return out;
}

void nr_ew_rows_init(nr_ew_rows *w, const nr_value *out, int n,
                     const nr_value *const *ins) {
  int64_t dims[NR_MAX_RANK];
  memset(w, 0, sizeof *w);
  w->n = n;
  int rank = 0;
  for (int d = 0; d < out->rank; d++)
    if (out->dims[d] != 1) /* dims of 1 change nothing; dropping them helps merging */
      dims[rank++] = out->dims[d];
  for (int k = 0; k < n; k++) {
    int64_t full[NR_MAX_RANK];
    aligned_strides(ins[k], out->rank, out->dims, full);
    for (int d = 0, e = 0; d < out->rank; d++)
      if (out->dims[d] != 1)
        w->strides[k][e++] = full[d];
  }
  rank = merge_dims(w, rank, dims);
  w->inner = rank > 0 ? dims[rank - 1] : 1;
  for (int k = 0; k < n; k++)
    w->step[k] = rank > 0 ? w->strides[k][rank - 1] : 0;
  w->rank = rank > 0 ? rank - 1 : 0;
  w->rows = 1;
  for (int d = 0; d < w->rank; d++) {
    w->dims[d] = dims[d];
    w->rows *= dims[d];
  }
  for (int d = 0; d < out->rank; d++)
    if (out->dims[d] == 0)
      w->rows = 0, w->inner = 0;
}

void nr_ew_rows_next(nr_ew_rows *w) {
  for (int d = w->rank - 1; d >= 0; d--) {
    w->idx[d]++;
    for (int k = 0; k < w->n; k++)
      w->off[k] += w->strides[k][d];
    if (w->idx[d] < w->dims[d])
      return;
    for (int k = 0; k < w->n; k++)
      w->off[k] -= w->strides[k][d] * w->dims[d];
    w->idx[d] = 0;
  }
}
