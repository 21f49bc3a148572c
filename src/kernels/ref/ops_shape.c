/* ops_shape.c - the shape family: its table, and the operators that only change how
 * elements are grouped (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout),
 * join or cut tensors (Concat, Split, Expand), describe shapes (Shape, Size) or make
 * constants (Constant, ConstantOfShape, Range).
 *
 * The operators that reorder elements (Transpose, Tile, Pad, DepthToSpace,
 * SpaceToDepth, Trilu, ReverseSequence, EyeLike) live in ops_layout.c. One row serves
 * every opset of an operator; where an input became an attribute or the reverse
 * (Reshape 5, Split 13, Squeeze 13) the kernel reads node->opset. Values move as
 * bytes, so every dtype nnroute can hold works without per-type code. Shape and Size
 * fill their output data during inference whenever the input shape is known, and the
 * other shape-chain operators evaluate small constant inputs there too, so a model's
 * Shape -> Gather -> Concat -> Reshape chains resolve to exact static shapes. */
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <math.h>
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
static nr_status dropout_infer(nr_op_ctx *ctx);
static nr_status dropout_run(nr_op_ctx *ctx);
static nr_status constant_infer(nr_op_ctx *ctx);
static nr_status constant_run(nr_op_ctx *ctx);
static nr_status cos_infer(nr_op_ctx *ctx);
static nr_status cos_run(nr_op_ctx *ctx);
static nr_status range_infer(nr_op_ctx *ctx);
static nr_status range_run(nr_op_ctx *ctx);

#define ROW(name, since, fam) {"", name, since, fam##_infer, fam##_run, 0}

const nr_op_def nr_ref_ops_shape[] = {
    {"", "Reshape", 1, reshape_infer, reshape_run, 0},
    {"", "Flatten", 1, flatten_infer, copy_run, 0},
    {"", "Squeeze", 1, squeeze_infer, copy_run, 0},
    {"", "Unsqueeze", 1, unsqueeze_infer, copy_run, 0},
    {"", "Identity", 1, identity_infer, copy_run, 0},
    {"", "Dropout", 7, dropout_infer, dropout_run, NR_OP_NO_FOLD},
    ROW("Concat", 1, concat),
    ROW("Split", 1, split),
    ROW("Expand", 8, expand),
    ROW("Shape", 1, shape),
    ROW("Size", 1, size),
    ROW("Constant", 1, constant),
    {"", "ConstantOfShape", 9, cos_infer, cos_run, 0},
    ROW("Range", 11, range),
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
        return nr_op_fail(ctx, NR_ERR_SHAPE, "shape[%d] = 0 copies a dim the rank-%d input "
                          "does not have", i, x->rank);
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
      rest = (rest < 0 || dims[i] < 0) ? NR_DIM_UNKNOWN : rest * dims[i];
  if (neg >= 0) {
    if (total < 0 || rest < 0) {
      dims[neg] = NR_DIM_UNKNOWN;
      return NR_OK;
    }
    if (rest == 0 || total % rest)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot reshape %lld elements with -1 and "
                        "the other dims' product %lld", (long long)total, (long long)rest);
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

/* ---- Flatten, Squeeze, Unsqueeze, Identity ------------------------------------------ */

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

/* ---- Dropout ----------------------------------------------------------------------- */

/* Mask dtype: bool from opset 10, the data's type before. */
static nr_dtype dropout_mask_type(const nr_op_ctx *ctx) {
  return ctx->node->opset >= 10 ? NR_DTYPE_BOOL : nr_op_in(ctx, 0)->dtype;
}

static nr_status dropout_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, ctx->node->opset >= 12 ? 3 : 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype != NR_DTYPE_UNDEFINED && !nr_dtype_is_float(x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "data must be a float tensor, not %s",
                      nr_dtype_name(x->dtype));
  st = nr_op_same_as_input(ctx, 0, 0);
  return st ? st : nr_op_set_output(ctx, 1, dropout_mask_type(ctx), x->rank, x->dims);
}

/* A small seeded generator (splitmix64): training-mode dropout is random by
 * definition, so only the distribution has to be right, not numpy's stream. */
static double next_uniform(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1p-53;
}

static nr_status dropout_train(nr_op_ctx *ctx, double ratio) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0), *mask = nr_op_out(ctx, 1);
  if (ratio < 0 || ratio >= 1)
    return nr_op_fail(ctx, NR_ERR_RUNTIME, "ratio %g is outside [0, 1)", ratio);
  uint64_t state = (uint64_t)nr_attr_int(ctx->node, "seed", 0x5eed);
  double scale = 1.0 / (1.0 - ratio);
  int64_t n = nr_value_count(x);
  for (int64_t i = 0; i < n; i++) {
    bool keep = next_uniform(&state) >= ratio;
    nr_store_f64(x->dtype, y->data, i, keep ? nr_load_f64(x->dtype, x->data, i) * scale : 0);
    if (mask)
      nr_store_i64(mask->dtype, mask->data, i, keep);
  }
  return NR_OK;
}

static nr_status dropout_run(nr_op_ctx *ctx) {
  double ratio = nr_attr_float(ctx->node, "ratio", 0.5f);
  bool training = false;
  if (ctx->node->opset >= 12) {
    const nr_value *r = nr_op_in(ctx, 1), *t = nr_op_in(ctx, 2);
    ratio = r && nr_value_count(r) > 0 ? nr_value_get_f64(r, 0) : 0.5;
    training = t && nr_value_count(t) > 0 && nr_value_get_i64(t, 0) != 0;
  }
  if (training && ratio != 0)
    return dropout_train(ctx, ratio);
  nr_value *mask = nr_op_out(ctx, 1);
  if (mask)
    for (int64_t i = 0; i < nr_value_count(mask); i++)
      nr_store_i64(mask->dtype, mask->data, i, 1);
  return copy_run(ctx);
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
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d %s differs from the others in dim %d",
                        k, nr_value_describe(v, s, sizeof s), d);
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
      src += chunk;
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
      return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot expand dim %lld to %lld",
                        (long long)a, (long long)b);
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
  int n, r;
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
  st = nr_value_alloc(y, NR_DTYPE_INT64, 0, NULL, ctx->err);
  return st ? st : size_run(ctx);
}

static nr_status size_run(nr_op_ctx *ctx) {
  *(int64_t *)nr_op_out(ctx, 0)->data = nr_value_count(nr_op_in(ctx, 0));
  return NR_OK;
}

/* ---- Constant ---------------------------------------------------------------------- */

/* The one value attribute of a Constant node, checked. */
static nr_status constant_attr(nr_op_ctx *ctx, const nr_attr **out) {
  static const char *const names[] = {"value", "value_float", "value_floats",
                                      "value_int", "value_ints", "value_string",
                                      "value_strings", "sparse_value"};
  *out = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const nr_attr *a = nr_node_attr(ctx->node, names[i]);
    if (!a)
      continue;
    if (*out)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "has both '%s' and '%s'",
                        (*out)->name, a->name);
    if (i >= 5)
      return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "attribute '%s' is not supported "
                        "(string and sparse constants)", a->name);
    *out = a;
  }
  if (!*out)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "has no value attribute");
  if ((*out)->type == NR_ATTR_TENSOR && nr_dtype_size((*out)->t.dtype) == 0)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "constant of dtype %s is not supported",
                      nr_dtype_name((*out)->t.dtype));
  if ((*out)->type == NR_ATTR_TENSOR && !(*out)->t.data)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "value tensor has no data");
  return NR_OK;
}

static nr_status constant_infer(nr_op_ctx *ctx) {
  const nr_attr *a;
  nr_status st = nr_op_check_arity(ctx, 0, 0);
  if (!st)
    st = constant_attr(ctx, &a);
  if (st)
    return st;
  int64_t n = (int64_t)a->n;
  if (a->type == NR_ATTR_TENSOR)
    st = nr_op_set_output(ctx, 0, a->t.dtype, a->t.rank, a->t.dims);
  else if (a->type == NR_ATTR_FLOAT || a->type == NR_ATTR_INT)
    st = nr_op_set_output(ctx, 0, a->type == NR_ATTR_INT ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT,
                          0, NULL);
  else if (a->type == NR_ATTR_FLOATS || a->type == NR_ATTR_INTS)
    st = nr_op_set_output(ctx, 0, a->type == NR_ATTR_INTS ? NR_DTYPE_INT64 : NR_DTYPE_FLOAT,
                          1, &n);
  else
    st = nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute '%s' has the wrong type", a->name);
  return st ? st : nr_sx_fold_small(ctx, constant_run);
}

static nr_status constant_run(nr_op_ctx *ctx) {
  const nr_attr *a;
  nr_status st = constant_attr(ctx, &a);
  nr_value *y = nr_op_out(ctx, 0);
  if (st)
    return st;
  switch (a->type) {
  case NR_ATTR_TENSOR: memcpy(y->data, a->t.data, nr_value_nbytes(&a->t)); break;
  case NR_ATTR_FLOAT: *(float *)y->data = a->f; break;
  case NR_ATTR_INT: *(int64_t *)y->data = a->i; break;
  case NR_ATTR_FLOATS: memcpy(y->data, a->floats, a->n * sizeof(float)); break;
  case NR_ATTR_INTS: memcpy(y->data, a->ints, a->n * sizeof(int64_t)); break;
  default: break;
  }
  return NR_OK;
}

/* ---- ConstantOfShape --------------------------------------------------------------- */

static nr_status cos_value(nr_op_ctx *ctx, const nr_value **value) {
  const nr_attr *a = nr_node_attr(ctx->node, "value");
  *value = NULL;
  if (!a)
    return NR_OK;
  if (a->type != NR_ATTR_TENSOR || nr_value_count(&a->t) != 1 || !a->t.data)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "'value' must be a one-element tensor");
  if (nr_dtype_size(a->t.dtype) == 0)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "'value' of dtype %s is not supported",
                      nr_dtype_name(a->t.dtype));
  *value = &a->t;
  return NR_OK;
}

static nr_status cos_infer(nr_op_ctx *ctx) {
  const nr_value *value;
  int64_t dims[NR_MAX_RANK];
  int n;
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = nr_sx_need_index(ctx, 0, "input");
  if (!st)
    st = cos_value(ctx, &value);
  if (st)
    return st;
  nr_dtype dtype = value ? value->dtype : NR_DTYPE_FLOAT;
  if (!nr_op_in_known(ctx, 0)) {
    const nr_value *s = nr_op_in(ctx, 0);
    return set_unknown(ctx, 0, dtype, s->rank == 1 && s->dims[0] >= 0 ? (int)s->dims[0] : -1);
  }
  if ((st = nr_sx_read_ints(ctx, 0, "input", dims, NR_MAX_RANK, &n)))
    return st;
  for (int d = 0; d < n; d++)
    if (dims[d] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "shape[%d] = %lld is negative", d,
                        (long long)dims[d]);
  st = nr_op_set_output(ctx, 0, dtype, n, dims);
  return st ? st : nr_sx_fold_small(ctx, cos_run);
}

static nr_status cos_run(nr_op_ctx *ctx) {
  const nr_value *value;
  nr_status st = cos_value(ctx, &value);
  if (st || !value)
    return st; /* the default is float 0: the output is already zeroed */
  nr_value *y = nr_op_out(ctx, 0);
  size_t es = nr_dtype_size(y->dtype);
  for (int64_t i = 0; i < nr_value_count(y); i++)
    memcpy((char *)y->data + (size_t)i * es, value->data, es);
  return NR_OK;
}

/* ---- Range ------------------------------------------------------------------------- */

/* Element count of an integer range; delta != 0 is checked by the caller. */
static int64_t range_count_int(int64_t start, int64_t limit, int64_t delta) {
  uint64_t span, step;
  if (delta > 0) {
    if (limit <= start)
      return 0;
    span = (uint64_t)limit - (uint64_t)start;
    step = (uint64_t)delta;
  } else {
    if (limit >= start)
      return 0;
    span = (uint64_t)start - (uint64_t)limit;
    step = (uint64_t)0 - (uint64_t)delta;
  }
  uint64_t n = span / step + (span % step != 0);
  return n > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)n;
}

/* float, float16 and bfloat16 compute in float (opset 27's default stash_type),
 * double in double. */
static bool range_in_float(nr_dtype t) { return t != NR_DTYPE_DOUBLE; }

static nr_status range_count(nr_op_ctx *ctx, int64_t *count) {
  const nr_value *s = nr_op_in(ctx, 0), *l = nr_op_in(ctx, 1), *d = nr_op_in(ctx, 2);
  nr_dtype t = s->dtype;
  if (!nr_dtype_is_float(t)) {
    int64_t delta = nr_value_get_i64(d, 0);
    if (delta == 0)
      return nr_op_fail(ctx, NR_ERR_RUNTIME, "delta is 0");
    *count = range_count_int(nr_value_get_i64(s, 0), nr_value_get_i64(l, 0), delta);
    return NR_OK;
  }
  double fs = nr_value_get_f64(s, 0), fl = nr_value_get_f64(l, 0);
  double fd = nr_value_get_f64(d, 0);
  double n = range_in_float(t) ? ceil((double)(((float)fl - (float)fs) / (float)fd))
                               : ceil((fl - fs) / fd);
  if (fd == 0 || isnan(n) || n > 1e15)
    return nr_op_fail(ctx, NR_ERR_RUNTIME, "range(%g, %g, %g) has no finite length", fs,
                      fl, fd);
  *count = n > 0 ? (int64_t)n : 0;
  return NR_OK;
}

static nr_status range_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (st)
    return st;
  nr_dtype t = nr_op_in(ctx, 0)->dtype;
  for (int i = 0; i < 3; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    if (v->dtype && t && v->dtype != t)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is %s, input 0 is %s", i,
                        nr_dtype_name(v->dtype), nr_dtype_name(t));
    if (nr_value_count(v) > 1 || v->rank > 1)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d must be a scalar", i);
    if (nr_value_count(v) == 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is empty", i);
  }
  if (t == NR_DTYPE_BOOL || (t && nr_dtype_size(t) == 0))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "Range does not take %s", nr_dtype_name(t));
  int64_t n = NR_DIM_UNKNOWN;
  if (nr_op_in_known(ctx, 0) && nr_op_in_known(ctx, 1) && nr_op_in_known(ctx, 2) &&
      (st = range_count(ctx, &n)))
    return st;
  st = nr_op_set_output(ctx, 0, t, 1, &n);
  return st ? st : nr_sx_fold_small(ctx, range_run);
}

static nr_status range_run(nr_op_ctx *ctx) {
  const nr_value *s = nr_op_in(ctx, 0), *d = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  nr_dtype t = y->dtype;
  int64_t n = y->dims[0];
  if (!nr_dtype_is_float(t)) {
    uint64_t start = (uint64_t)nr_value_get_i64(s, 0), delta = (uint64_t)nr_value_get_i64(d, 0);
    for (int64_t i = 0; i < n; i++)
      nr_store_i64(t, y->data, i, (int64_t)(start + (uint64_t)i * delta));
  } else if (range_in_float(t)) {
    float start = (float)nr_value_get_f64(s, 0), delta = (float)nr_value_get_f64(d, 0);
    for (int64_t i = 0; i < n; i++)
      nr_store_f64(t, y->data, i, start + (float)i * delta);
  } else {
    double start = nr_value_get_f64(s, 0), delta = nr_value_get_f64(d, 0);
    for (int64_t i = 0; i < n; i++)
      ((double *)y->data)[i] = start + (double)i * delta;
  }
  return NR_OK;
}
