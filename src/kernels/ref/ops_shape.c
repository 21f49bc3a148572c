/* ops_shape.c - the shape family: its table, and the operators that only change how
 * elements are grouped (Reshape, Flatten, Squeeze, Unsqueeze, Identity), join or cut
 * tensors (Concat, Split, Expand) or describe shapes (Shape, Size).
 *
 * The rest of the family lives by kind: ops_layout.c reorders elements (Transpose,
 * Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, ReverseSequence, EyeLike),
 * ops_const.c makes constants (Constant, ConstantOfShape, Range) and ops_dropout.c
 * holds Dropout. One row serves every opset of an operator; where an input became an
 * attribute or the reverse (Reshape 5, Split 13, Squeeze 13) the kernel reads
 * node->opset. Values move as bytes, so every dtype nnroute can hold works without
 * per-type code. Shape and Size fill their output data during inference whenever the
 * input shape is known, and the other shape-chain operators evaluate small constant
 * inputs there too, so a model's Shape -> Gather -> Concat -> Reshape chains resolve
 * to exact static shapes. */
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <stdlib.h>
#include <string.h>

static nr_status reshape_infer(nr_op_ctx *ctx);
static nr_status reshape_run(nr_op_ctx *ctx);
static nr_status flatten_infer(nr_op_ctx *ctx);
static nr_status copy_run(nr_op_ctx *ctx);
static nr_status squeeze_infer(nr_op_ctx *ctx);
static nr_status unsqueeze_infer(nr_op_ctx *ctx);
static nr_status concat_infer(nr_op_ctx *ctx);
static nr_status concat_run(nr_op_ctx *ctx);
static nr_status split_infer(nr_op_ctx *ctx);
static nr_status split_run(nr_op_ctx *ctx);
static nr_status expand_infer(nr_op_ctx *ctx);
static nr_status expand_run(nr_op_ctx *ctx);
static nr_status shape_infer(nr_op_ctx *ctx);
static nr_status shape_run(nr_op_ctx *ctx);
static nr_status size_infer(nr_op_ctx *ctx);
static nr_status size_run(nr_op_ctx *ctx);
static nr_status identity_infer(nr_op_ctx *ctx);

#define ROW(name, since, fam)                                                            \
  { "", name, since, fam##_infer, fam##_run, 0 }

const nr_op_def nr_ref_ops_shape[] = {
    {"", "Reshape", 1, reshape_infer, reshape_run, 0},
    {"", "Flatten", 1, flatten_infer, copy_run, 0},
    {"", "Squeeze", 1, squeeze_infer, copy_run, 0},
    {"", "Unsqueeze", 1, unsqueeze_infer, copy_run, 0},
    {"", "Identity", 1, identity_infer, copy_run, 0},
    {"", "Dropout", 7, nr_sx_dropout_infer, nr_sx_dropout_run, NR_OP_NO_FOLD},
    ROW("Concat", 1, concat),
    ROW("Split", 1, split),
    ROW("Expand", 8, expand),
    ROW("Shape", 1, shape),
    ROW("Size", 1, size),
    {"", "Constant", 1, nr_sx_constant_infer, nr_sx_constant_run, 0},
    {"", "ConstantOfShape", 9, nr_sx_cos_infer, nr_sx_cos_run, 0},
    {"", "Range", 11, nr_sx_range_infer, nr_sx_range_run, 0},
    {"", "Transpose", 1, nr_sx_transpose_infer, nr_sx_transpose_run, 0},
    {"", "Tile", 6, nr_sx_tile_infer, nr_sx_tile_run, 0},
    {"", "Pad", 2, nr_sx_pad_infer, nr_sx_pad_run, 0},
    {"", "DepthToSpace", 1, nr_sx_d2s_infer, nr_sx_d2s_run, 0},
    {"", "SpaceToDepth", 1, nr_sx_s2d_infer, nr_sx_s2d_run, 0},
    {"", "Trilu", 14, nr_sx_trilu_infer, nr_sx_trilu_run, 0},
    {"", "ReverseSequence", 10, nr_sx_revseq_infer, nr_sx_revseq_run, 0},
    {"", "EyeLike", 9, nr_sx_eyelike_infer, nr_sx_eyelike_run, 0},
    {0},
};

/* ---- shared pieces ---------------------------------------------------------------- */

/* Output 0 is a byte copy of input 0 (Reshape, Flatten, Squeeze, Unsqueeze, Identity). */
static nr_status copy_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  if (nr_value_nbytes(x) != nr_value_nbytes(y))
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "output size differs from input size");
  if (nr_value_nbytes(x))
    memcpy(y->data, x->data, nr_value_nbytes(x));
  return NR_OK;
}

/* Product of dims[from..to), or NR_DIM_UNKNOWN if one of them is unknown. */
static int64_t dims_product(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++) {
    if (dims[d] < 0)
      return NR_DIM_UNKNOWN;
    p *= dims[d];
  }
  return p;
}

static nr_status set_unknown(nr_op_ctx *ctx, int i, nr_dtype dtype, int rank) {
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < NR_MAX_RANK; d++)
    dims[d] = NR_DIM_UNKNOWN;
  if (rank > NR_MAX_RANK)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                      NR_MAX_RANK);
  return nr_op_set_output(ctx, i, dtype, rank, dims);
}

/* Axes of Squeeze/Unsqueeze: attribute before opset 13, optional input from 13.
 * *known is false when the input exists but its data is not known yet. */
static nr_status read_axes(nr_op_ctx *ctx, int64_t *axes, int *n, bool *given,
                           bool *known) {
  *n = 0;
  *known = true;
  if (ctx->node->opset < 13) {
    size_t count;
    const int64_t *a = nr_attr_ints(ctx->node, "axes", &count);
    *given = a != NULL;
    if (count > NR_MAX_RANK)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "%zu axes given, at most %d", count,
                        NR_MAX_RANK);
    for (size_t i = 0; i < count; i++)
      axes[i] = a[i];
    *n = (int)count;
    return NR_OK;
  }
  *given = nr_op_in(ctx, 1) != NULL;
  if (!*given)
    return NR_OK;
  if (!nr_op_in_known(ctx, 1)) {
    *known = false;
    return NR_OK;
  }
  return nr_sx_read_ints(ctx, 1, "axes", axes, NR_MAX_RANK, n);
}

/* Normalizes axes against rank and rejects duplicates. */
static nr_status normalize_axes(nr_op_ctx *ctx, int64_t *axes, int n, int rank) {
  for (int i = 0; i < n; i++) {
    if (axes[i] < -rank || axes[i] >= rank)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld is out of range for rank %d",
                        (long long)axes[i], rank);
    if (axes[i] < 0)
      axes[i] += rank;
    for (int j = 0; j < i; j++)
      if (axes[j] == axes[i])
        return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld is listed twice",
                          (long long)axes[i]);
  }
  return NR_OK;
}

/* ---- Reshape ----------------------------------------------------------------------- */

/* Resolves 0 (copy, unless allowzero) and -1 (inferred) entries of a target shape. */
static nr_status reshape_resolve(nr_op_ctx *ctx, const nr_value *x, int64_t *dims, int n,
                                 bool allowzero) {
  int neg = -1;
  bool has_zero = false;
  for (int i = 0; i < n; i++) {
    if (dims[i] == 0 && !allowzero) {
      if (x->rank >= 0 && i >= x->rank)
        return nr_op_fail(ctx, NR_ERR_SHAPE,
                          "shape[%d] = 0 copies a dim the rank-%d input "
                          "does not have",
                          i, x->rank);
      dims[i] = x->rank >= 0 ? x->dims[i] : NR_DIM_UNKNOWN;
    } else if (dims[i] == -1) {
      if (neg >= 0)
        return nr_op_fail(ctx, NR_ERR_SHAPE, "shape has more than one -1");
      neg = i;
    } else if (dims[i] < -1) {
      return nr_op_fail(ctx, NR_ERR_SHAPE, "shape[%d] = %lld is invalid", i,
                        (long long)dims[i]);
    }
    has_zero |= dims[i] == 0;
  }
  if (allowzero && has_zero && neg >= 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "shape has both 0 and -1 with allowzero=1");
  int64_t total = nr_value_count(x), rest = 1;
  for (int i = 0; i < n; i++)
    if (i != neg)
      rest = (rest < 0 || dims[i] < 0) ? NR_DIM_UNKNOWN
             : __builtin_mul_overflow(rest, dims[i], &rest) ? INT64_MAX : rest;
  if (neg >= 0) {
    if (total < 0 || rest < 0) {
      dims[neg] = NR_DIM_UNKNOWN;
      return NR_OK;
    }
    if (rest == 0 || total % rest)
      return nr_op_fail(ctx, NR_ERR_SHAPE,
                        "cannot reshape %lld elements with -1 and "
                        "the other dims' product %lld",
                        (long long)total, (long long)rest);
    dims[neg] = total / rest;
  } else if (total >= 0 && rest >= 0 && total != rest) {
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot reshape %lld elements into %lld",
                      (long long)total, (long long)rest);
  }
  return NR_OK;
}

static nr_status reshape_infer(nr_op_ctx *ctx) {
  bool attr_form = ctx->node->opset < 5;
  nr_status st = nr_op_check_arity(ctx, attr_form ? 1 : 2, attr_form ? 1 : 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t dims[NR_MAX_RANK];
  int n = 0;
  if (attr_form) {
    size_t count;
    const int64_t *s = nr_attr_ints(ctx->node, "shape", &count);
    if (count > NR_MAX_RANK)
      return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "target rank %zu exceeds %d", count,
                        NR_MAX_RANK);
    memcpy(dims, s, count * sizeof *dims);
    n = (int)count;
  } else if ((st = nr_sx_need_index(ctx, 1, "shape"))) {
    return st;
  } else if (!nr_op_in_known(ctx, 1)) {
    const nr_value *s = nr_op_in(ctx, 1);
    bool len_known = s->rank == 1 && s->dims[0] >= 0;
    return set_unknown(ctx, 0, x->dtype, len_known ? (int)s->dims[0] : -1);
  } else if ((st = nr_sx_read_ints(ctx, 1, "shape", dims, NR_MAX_RANK, &n))) {
    return st;
  }
  st = reshape_resolve(ctx, x, dims, n, nr_attr_int(ctx->node, "allowzero", 0) != 0);
  if (!st)
    st = nr_op_set_output(ctx, 0, x->dtype, n, dims);
  return st ? st : nr_sx_fold_small(ctx, reshape_run);
}

static nr_status reshape_run(nr_op_ctx *ctx) { return copy_run(ctx); }

/* ---- Flatten, Squeeze, Unsqueeze, Identity ------------------------------------------
 */

static nr_status flatten_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t axis = nr_attr_int(ctx->node, "axis", 1);
  if (x->rank < 0)
    return set_unknown(ctx, 0, x->dtype, 2);
  if (axis < -x->rank || axis > x->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %lld is out of range for rank %d",
                      (long long)axis, x->rank);
  if (axis < 0)
    axis += x->rank;
  int64_t dims[2] = {dims_product(x->dims, 0, (int)axis),
                     dims_product(x->dims, (int)axis, x->rank)};
  st = nr_op_set_output(ctx, 0, x->dtype, 2, dims);
  return st ? st : nr_sx_fold_small(ctx, copy_run);
}

static nr_status squeeze_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, ctx->node->opset < 13 ? 1 : 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t axes[NR_MAX_RANK], dims[NR_MAX_RANK];
  int n, r = 0;
  bool given, known;
  if ((st = read_axes(ctx, axes, &n, &given, &known)))
    return st;
  if (x->rank < 0 || !known)
    return set_unknown(ctx, 0, x->dtype, -1);
  if ((st = normalize_axes(ctx, axes, n, x->rank)))
    return st;
  bool drop[NR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    if (x->dims[axes[i]] > 1 || x->dims[axes[i]] == 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot squeeze axis %lld of size %lld",
                        (long long)axes[i], (long long)x->dims[axes[i]]);
    drop[axes[i]] = true;
  }
  for (int d = 0; d < x->rank; d++) {
    if (!given && x->dims[d] < 0)
      return set_unknown(ctx, 0, x->dtype, -1); /* might or might not be a 1 */
    if (!given)
      drop[d] = x->dims[d] == 1;
    if (!drop[d])
      dims[r++] = x->dims[d];
  }
  st = nr_op_set_output(ctx, 0, x->dtype, r, dims);
  return st ? st : nr_sx_fold_small(ctx, copy_run);
}

static nr_status unsqueeze_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, ctx->node->opset < 13 ? 1 : 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t axes[NR_MAX_RANK], dims[NR_MAX_RANK];
  int n;
  bool given, known;
  if ((st = read_axes(ctx, axes, &n, &given, &known)))
    return st;
  if (!given)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "axes are required");
  if (x->rank < 0 || !known)
    return set_unknown(ctx, 0, x->dtype, -1);
  int r = x->rank + n;
  if (r > NR_MAX_RANK)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "output rank %d exceeds %d", r,
                      NR_MAX_RANK);
  if ((st = normalize_axes(ctx, axes, n, r)))
    return st;
  bool ins[NR_MAX_RANK] = {false};
  for (int i = 0; i < n; i++)
    ins[axes[i]] = true;
  for (int d = 0, k = 0; d < r; d++)
    dims[d] = ins[d] ? 1 : x->dims[k++];
  st = nr_op_set_output(ctx, 0, x->dtype, r, dims);
  return st ? st : nr_sx_fold_small(ctx, copy_run);
}

static nr_status identity_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = nr_op_same_as_input(ctx, 0, 0);
  return st ? st : nr_sx_fold_small(ctx, copy_run);
}

/* ---- Concat ------------------------------------------------------------------------ */

/* Merges input k's dims into the output dims, checking that the non-axis dims agree. */
static nr_status concat_merge(nr_op_ctx *ctx, int k, int axis, int64_t *dims) {
  const nr_value *v = nr_op_in(ctx, k);
  for (int d = 0; d < v->rank; d++) {
    if (d == axis) {
      dims[d] = (dims[d] < 0 || v->dims[d] < 0) ? NR_DIM_UNKNOWN : dims[d] + v->dims[d];
    } else if (dims[d] < 0) {
      dims[d] = v->dims[d];
    } else if (v->dims[d] >= 0 && v->dims[d] != dims[d]) {
      char s[128];
      return nr_op_fail(ctx, NR_ERR_SHAPE,
                        "input %d %s differs from the others in dim %d", k,
                        nr_value_describe(v, s, sizeof s), d);
    }
  }
  return NR_OK;
}

/* Concat's output rank (or -1) after checking that inputs agree in rank and dtype. */
static nr_status concat_check(nr_op_ctx *ctx, int *rank, nr_dtype *dtype) {
  *rank = -1;
  *dtype = NR_DTYPE_UNDEFINED;
  if (ctx->n_inputs < 1)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "needs at least one input");
  for (int k = 0; k < ctx->n_inputs; k++) {
    const nr_value *v = nr_op_in(ctx, k);
    if (!v)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "input %d is missing", k);
    if (*dtype && v->dtype && v->dtype != *dtype)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is %s, input 0 is %s", k,
                        nr_dtype_name(v->dtype), nr_dtype_name(*dtype));
    if (v->dtype)
      *dtype = v->dtype;
    if (*rank >= 0 && v->rank >= 0 && v->rank != *rank)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d has rank %d, others %d", k, v->rank,
                        *rank);
    if (v->rank >= 0)
      *rank = v->rank;
  }
  if (*rank == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot concatenate scalars");
  return NR_OK;
}

static nr_status concat_axis(nr_op_ctx *ctx, int rank, int *axis) {
  const nr_attr *a = nr_node_attr(ctx->node, "axis");
  if (!a && ctx->node->opset >= 4)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute 'axis' is required");
  return nr_op_axis(ctx, a ? a->i : 1, rank, axis);
}

static nr_status concat_infer(nr_op_ctx *ctx) {
  int rank, axis;
  nr_dtype dtype;
  nr_status st = concat_check(ctx, &rank, &dtype);
  if (st || rank < 0)
    return st ? st : set_unknown(ctx, 0, dtype, -1);
  if ((st = concat_axis(ctx, rank, &axis)))
    return st;
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < rank; d++)
    dims[d] = d == axis ? 0 : NR_DIM_UNKNOWN;
  for (int k = 0; k < ctx->n_inputs && !st; k++) {
    if (nr_op_in(ctx, k)->rank >= 0)
      st = concat_merge(ctx, k, axis, dims);
    else
      dims[axis] = NR_DIM_UNKNOWN;
  }
  if (!st)
    st = nr_op_set_output(ctx, 0, dtype, rank, dims);
  return st ? st : nr_sx_fold_small(ctx, concat_run);
}

static nr_status concat_run(nr_op_ctx *ctx) {
  nr_value *y = nr_op_out(ctx, 0);
  int axis;
  nr_status st = concat_axis(ctx, y->rank, &axis);
  if (st)
    return st;
  size_t es = nr_dtype_size(y->dtype);
  int64_t outer = dims_product(y->dims, 0, axis);
  int64_t inner = dims_product(y->dims, axis + 1, y->rank);
  char *dst = y->data;
  for (int64_t o = 0; o < outer; o++) {
    for (int k = 0; k < ctx->n_inputs; k++) {
      const nr_value *v = nr_op_in(ctx, k);
      size_t chunk = (size_t)(v->dims[axis] * inner) * es;
      if (chunk)
        memcpy(dst, (const char *)v->data + (size_t)o * chunk, chunk);
      dst += chunk;
    }
  }
  return NR_OK;
}

/* ---- Split ------------------------------------------------------------------------- */

/* Sizes from the `split` input (opset 13+, or 1) or attribute (opset 2-12).
 * Returns with *given false when neither is there. */
static nr_status split_listed(nr_op_ctx *ctx, int64_t *sizes, bool *given, bool *known) {
  int n = ctx->n_outputs, count = 0;
  *given = *known = true;
  if (nr_op_in(ctx, 1)) {
    if (!nr_op_in_known(ctx, 1)) {
      *known = false;
      return NR_OK;
    }
    nr_status st = nr_sx_read_ints(ctx, 1, "split", sizes, n, &count);
    if (st)
      return st;
  } else {
    size_t c;
    const int64_t *s = nr_attr_ints(ctx->node, "split", &c);
    *given = s != NULL && ctx->node->opset < 13;
    if (!*given)
      return NR_OK;
    count = (int)c;
    if (count == n)
      memcpy(sizes, s, c * sizeof *sizes);
  }
  if (count != n)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "split lists %d sizes for %d outputs", count, n);
  return NR_OK;
}

/* Equal parts (or, with num_outputs from opset 18, parts of ceil(dim / n) with a
 * smaller last one). */
static nr_status split_even(nr_op_ctx *ctx, int64_t dim, int64_t *sizes, bool *known) {
  int n = ctx->n_outputs;
  int64_t num = nr_attr_int(ctx->node, "num_outputs", 0);
  if (num && num != n)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "num_outputs %lld but %d outputs",
                      (long long)num, n);
  if (dim < 0) {
    *known = false;
    return NR_OK;
  }
  if (!num && dim % n)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "dim %lld does not split into %d equal parts",
                      (long long)dim, n);
  int64_t chunk = (dim + n - 1) / n;
  for (int i = 0; i < n; i++) {
    int64_t left = dim - i * chunk;
    sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
  }
  return NR_OK;
}

/* Fills sizes[n_outputs] and checks that they add up to the axis dim. */
static nr_status split_sizes(nr_op_ctx *ctx, const nr_value *x, int axis, int64_t *sizes,
                             bool *known) {
  bool given;
  nr_status st = split_listed(ctx, sizes, &given, known);
  if (st || !*known)
    return st;
  if (!given)
    return split_even(ctx, x->dims[axis], sizes, known);
  int64_t sum = 0;
  for (int i = 0; i < ctx->n_outputs; i++) {
    if (sizes[i] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "split[%d] = %lld is negative", i,
                        (long long)sizes[i]);
    sum += sizes[i];
  }
  if (x->dims[axis] >= 0 && sum != x->dims[axis])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "split sizes add up to %lld, dim %d is %lld",
                      (long long)sum, axis, (long long)x->dims[axis]);
  return NR_OK;
}

static nr_status split_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int axis, n = ctx->n_outputs;
  if (n < 1)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "has no outputs");
  if (x->rank < 0) {
    for (int i = 0; i < n && !st; i++)
      st = set_unknown(ctx, i, x->dtype, -1);
    return st;
  }
  if ((st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, &axis)))
    return st;
  int64_t *sizes = malloc(sizeof *sizes * (size_t)n);
  if (!sizes)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  bool known;
  st = split_sizes(ctx, x, axis, sizes, &known);
  for (int i = 0; i < n && !st; i++) {
    int64_t dims[NR_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = known ? sizes[i] : NR_DIM_UNKNOWN;
    st = nr_op_set_output(ctx, i, x->dtype, x->rank, dims);
  }
  free(sizes);
  return st ? st : nr_sx_fold_small(ctx, split_run);
}

static nr_status split_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int axis;
  bool known;
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", 0), x->rank, &axis);
  int64_t *sizes = malloc(sizeof *sizes * (size_t)ctx->n_outputs);
  if (!st && !sizes)
    st = nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  if (!st)
    st = split_sizes(ctx, x, axis, sizes, &known);
  size_t es = nr_dtype_size(x->dtype);
  int64_t outer = dims_product(x->dims, 0, axis);
  int64_t inner = dims_product(x->dims, axis + 1, x->rank);
  const char *src = x->data;
  for (int64_t o = 0; o < outer && !st; o++) {
    for (int k = 0; k < ctx->n_outputs; k++) {
      nr_value *y = nr_op_out(ctx, k); /* an absent output still consumes its part */
      size_t chunk = (size_t)(sizes[k] * inner) * es;
      if (y && chunk)
        memcpy((char *)y->data + (size_t)o * chunk, src, chunk);
      if (chunk)
        src += chunk; /* src is NULL for an empty input */
    }
  }
  free(sizes);
  return st;
}

/* ---- Expand ------------------------------------------------------------------------ */

static nr_status expand_dims(nr_op_ctx *ctx, const nr_value *x, const int64_t *shape,
                             int n, int *rank, int64_t *dims) {
  int r = n > x->rank ? n : x->rank;
  for (int d = 0; d < r; d++) {
    int ex = d - (r - x->rank), es = d - (r - n);
    int64_t a = ex >= 0 ? x->dims[ex] : 1, b = es >= 0 ? shape[es] : 1;
    if (b < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "shape[%d] = %lld is negative", es,
                        (long long)b);
    if (a == b || b == 1)
      dims[d] = a;
    else if (a == 1)
      dims[d] = b;
    else if (a < 0)
      dims[d] = b; /* the input dim must be 1 or b for a valid model */
    else
      return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot expand dim %lld to %lld", (long long)a,
                        (long long)b);
  }
  *rank = r;
  return NR_OK;
}

static nr_status expand_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "shape");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *s = nr_op_in(ctx, 1);
  int64_t shape[NR_MAX_RANK], dims[NR_MAX_RANK];
  int n = 0, r = 0;
  if (!nr_op_in_known(ctx, 1) || x->rank < 0) {
    bool len_known = s->rank == 1 && s->dims[0] >= 0 && x->rank >= 0;
    int rr = len_known ? (s->dims[0] > x->rank ? (int)s->dims[0] : x->rank) : -1;
    return set_unknown(ctx, 0, x->dtype, rr);
  }
  if ((st = nr_sx_read_ints(ctx, 1, "shape", shape, NR_MAX_RANK, &n)))
    return st;
  if ((st = expand_dims(ctx, x, shape, n, &r, dims)))
    return st;
  st = nr_op_set_output(ctx, 0, x->dtype, r, dims);
  return st ? st : nr_sx_fold_small(ctx, expand_run);
}

static nr_status expand_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t xs[NR_MAX_RANK];
  nr_strides(x->rank, x->dims, xs);
  nr_sx_view v = {.rank = y->rank, .offset = 0};
  for (int d = 0; d < y->rank; d++) {
    int ex = d - (y->rank - x->rank);
    v.dims[d] = y->dims[d];
    v.strides[d] = (ex >= 0 && x->dims[ex] != 1) ? xs[ex] : 0;
  }
  nr_sx_view_copy(y->data, x->data, nr_dtype_size(x->dtype), &v);
  return NR_OK;
}

/* ---- Shape, Size ------------------------------------------------------------------- */

/* The [start, end) range of dims Shape reports, clamped as opset 15 defines. */
static void shape_range(const nr_op_ctx *ctx, int rank, int *start, int *end) {
  int64_t s = nr_attr_int(ctx->node, "start", 0);
  int64_t e = nr_attr_int(ctx->node, "end", rank);
  s = s < 0 ? s + rank : s;
  e = e < 0 ? e + rank : e;
  s = s < 0 ? 0 : s > rank ? rank : s;
  e = e < 0 ? 0 : e > rank ? rank : e;
  *start = (int)s;
  *end = (int)(e > s ? e : s);
}

static nr_status shape_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->rank < 0)
    return set_unknown(ctx, 0, NR_DTYPE_INT64, 1);
  int start, end;
  shape_range(ctx, x->rank, &start, &end);
  int64_t len = end - start;
  if ((st = nr_op_set_output(ctx, 0, NR_DTYPE_INT64, 1, &len)))
    return st;
  for (int d = start; d < end; d++)
    if (x->dims[d] < 0)
      return NR_OK;
  nr_value *y = nr_op_out(ctx, 0);
  if (ctx->runtime || !y)
    return NR_OK;
  st = nr_value_alloc(y, NR_DTYPE_INT64, 1, &len, ctx->err);
  return st ? st : shape_run(ctx);
}

static nr_status shape_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int start, end;
  shape_range(ctx, x->rank, &start, &end);
  for (int d = start; d < end; d++)
    ((int64_t *)y->data)[d - start] = x->dims[d];
  return NR_OK;
}

static nr_status size_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = nr_op_set_output(ctx, 0, NR_DTYPE_INT64, 0, NULL);
  nr_value *y = nr_op_out(ctx, 0);
  if (st || ctx->runtime || !y || nr_value_count(nr_op_in(ctx, 0)) < 0)
    return st;
  st = nr_value_alloc(y, NR_DTYPE_INT64, 0, y->dims, ctx->err);
  return st ? st : size_run(ctx);
}

static nr_status size_run(nr_op_ctx *ctx) {
  *(int64_t *)nr_op_out(ctx, 0)->data = nr_value_count(nr_op_in(ctx, 0));
  return NR_OK;
}
