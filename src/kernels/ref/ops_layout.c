/* ops_layout.c - shape-family operators that reorder elements: Transpose, Tile, Pad,
 * DepthToSpace, SpaceToDepth, Trilu, ReverseSequence and EyeLike (listed in
 * ops_shape.c's table).
 *
 * Transpose, DepthToSpace and SpaceToDepth are each one strided view of the input
 * (DepthToSpace is a reshape to 6-D, a transpose and a reshape back). Pad maps every
 * output coordinate, axis by axis, to a source coordinate or to "fill"; one table per
 * axis holds that map, which makes the four modes and negative pads (cropping) the
 * same loop. Elements move as bytes, so every dtype works. */
#include "kernels/ref/pad_rules.h"
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <stdlib.h>
#include <string.h>

static nr_status unknown_like(nr_op_ctx *ctx, nr_dtype dtype, int rank) {
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < NR_MAX_RANK; d++)
    dims[d] = NR_DIM_UNKNOWN;
  return nr_op_set_output(ctx, 0, dtype, rank, dims);
}

/* ---- Transpose --------------------------------------------------------------------- */

static nr_status transpose_perm(nr_op_ctx *ctx, int rank, int *perm) {
  size_t n;
  const int64_t *p = nr_attr_ints(ctx->node, "perm", &n);
  if (!p) {
    for (int d = 0; d < rank; d++)
      perm[d] = rank - 1 - d;
    return NR_OK;
  }
  if ((int)n != rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "perm has %zu entries for rank %d", n, rank);
  bool seen[NR_MAX_RANK] = {false};
  for (int d = 0; d < rank; d++) {
    int64_t a = p[d] < 0 ? p[d] + rank : p[d]; /* tolerate negative entries */
    if (a < 0 || a >= rank || seen[a])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "perm is not a permutation of 0..%d",
                        rank - 1);
    seen[a] = true;
    perm[d] = (int)a;
  }
  return NR_OK;
}

nr_status nr_sx_transpose_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->rank < 0) {
    size_t n;
    return nr_attr_ints(ctx->node, "perm", &n) ? unknown_like(ctx, x->dtype, (int)n)
                                               : unknown_like(ctx, x->dtype, -1);
  }
  int perm[NR_MAX_RANK];
  int64_t dims[NR_MAX_RANK];
  if ((st = transpose_perm(ctx, x->rank, perm)))
    return st;
  for (int d = 0; d < x->rank; d++)
    dims[d] = x->dims[perm[d]];
  st = nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
  return st ? st : nr_sx_fold_small(ctx, nr_sx_transpose_run);
}

nr_status nr_sx_transpose_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int perm[NR_MAX_RANK];
  int64_t xs[NR_MAX_RANK];
  nr_status st = transpose_perm(ctx, x->rank, perm);
  if (st)
    return st;
  nr_strides(x->rank, x->dims, xs);
  nr_sx_view v = {.rank = x->rank, .offset = 0};
  for (int d = 0; d < x->rank; d++) {
    v.dims[d] = x->dims[perm[d]];
    v.strides[d] = xs[perm[d]];
  }
  nr_sx_view_copy(nr_op_out(ctx, 0)->data, x->data, nr_dtype_size(x->dtype), &v);
  return NR_OK;
}

/* ---- Tile -------------------------------------------------------------------------- */

static nr_status tile_repeats(nr_op_ctx *ctx, int rank, int64_t *reps) {
  int n;
  nr_status st = nr_sx_read_ints(ctx, 1, "repeats", reps, NR_MAX_RANK, &n);
  if (st)
    return st;
  if (n != rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "repeats has %d entries for rank %d", n, rank);
  for (int d = 0; d < n; d++)
    if (reps[d] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "repeats[%d] = %lld is negative", d,
                        (long long)reps[d]);
  return NR_OK;
}

nr_status nr_sx_tile_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_sx_need_index(ctx, 1, "repeats");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t reps[NR_MAX_RANK], dims[NR_MAX_RANK];
  if (x->rank < 0 || !nr_op_in_known(ctx, 1))
    return unknown_like(ctx, x->dtype, x->rank);
  if ((st = tile_repeats(ctx, x->rank, reps)))
    return st;
  for (int d = 0; d < x->rank; d++)
    dims[d] = x->dims[d] < 0 ? NR_DIM_UNKNOWN : x->dims[d] * reps[d];
  st = nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
  return st ? st : nr_sx_fold_small(ctx, nr_sx_tile_run);
}

typedef struct tile_job {
  int rank;
  size_t es;
  const int64_t *dims, *reps;
  int64_t strides[NR_MAX_RANK];
} tile_job;

/* Writes the tiled block of dims d.. whose source starts at src; returns the end. */
static char *tile_block(const tile_job *t, int d, const char *src, char *dst) {
  char *start = dst;
  if (d == t->rank) {
    memcpy(dst, src, t->es);
    return dst + t->es;
  }
  if (d == t->rank - 1) {
    memcpy(dst, src, (size_t)t->dims[d] * t->es);
    dst += (size_t)t->dims[d] * t->es;
  } else {
    for (int64_t i = 0; i < t->dims[d]; i++)
      dst = tile_block(t, d + 1, src + (size_t)(i * t->strides[d]) * t->es, dst);
  }
  size_t block = (size_t)(dst - start);
  for (int64_t r = 1; r < t->reps[d]; r++, dst += block)
    memcpy(dst, start, block);
  return t->reps[d] == 0 ? start : dst;
}

nr_status nr_sx_tile_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t reps[NR_MAX_RANK];
  nr_status st = tile_repeats(ctx, x->rank, reps);
  if (st || nr_value_count(nr_op_out(ctx, 0)) == 0)
    return st;
  tile_job t = {x->rank, nr_dtype_size(x->dtype), x->dims, reps, {0}};
  nr_strides(x->rank, x->dims, t.strides);
  tile_block(&t, 0, x->data, nr_op_out(ctx, 0)->data);
  return NR_OK;
}

/* ---- Pad --------------------------------------------------------------------------- */

typedef nr_pad_mode pad_mode;

static nr_status pad_mode_of(nr_op_ctx *ctx, pad_mode *mode) {
  const char *m = nr_attr_string(ctx->node, "mode", "constant");
  static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(m, names[i])) {
      *mode = (pad_mode)i;
      return NR_OK;
    }
  return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown mode '%s'", m);
}

/* Reads per-axis begin/end pads (attribute before opset 11, inputs `pads` and, from
 * opset 18, `axes` after). *known is false when an input's data is not known. */
static nr_status pad_amounts(nr_op_ctx *ctx, int rank, int64_t *begin, int64_t *end,
                             bool *known) {
  int64_t pads[2 * NR_MAX_RANK], axes[NR_MAX_RANK];
  int np = 0, na = rank;
  nr_status st = NR_OK;
  *known = true;
  for (int d = 0; d < rank; d++)
    axes[d] = d;
  if (ctx->node->opset < 11) {
    size_t n;
    const int64_t *p = nr_attr_ints(ctx->node, "pads", &n);
    if (!p || n > 2 * NR_MAX_RANK)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                        "attribute 'pads' is missing or too long");
    memcpy(pads, p, n * sizeof *p);
    np = (int)n;
  } else if (!nr_op_in_known(ctx, 1) || (nr_op_in(ctx, 3) && !nr_op_in_known(ctx, 3))) {
    *known = false;
    return NR_OK;
  } else if (!(st = nr_sx_read_ints(ctx, 1, "pads", pads, 2 * NR_MAX_RANK, &np)) &&
             nr_op_in(ctx, 3)) {
    st = nr_sx_read_ints(ctx, 3, "axes", axes, NR_MAX_RANK, &na);
  }
  if (st)
    return st;
  if (np != 2 * na)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%d pads for %d axes", np, na);
  for (int d = 0; d < rank; d++)
    begin[d] = end[d] = 0;
  for (int i = 0; i < na; i++) {
    int a;
    if ((st = nr_op_axis(ctx, axes[i], rank, &a)))
      return st;
    begin[a] = pads[i];
    end[a] = pads[na + i];
  }
  return NR_OK;
}

nr_status nr_sx_pad_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, ctx->node->opset < 11 ? 1 : 4);
  pad_mode mode = 0;
  if (!st && ctx->node->opset >= 11)
    st = nr_sx_need_index(ctx, 1, "pads");
  if (!st)
    st = pad_mode_of(ctx, &mode);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *cv = nr_op_in(ctx, 2);
  if (ctx->node->opset >= 11 && cv && cv->dtype && x->dtype && cv->dtype != x->dtype)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "constant_value is %s, data is %s",
                      nr_dtype_name(cv->dtype), nr_dtype_name(x->dtype));
  int64_t begin[NR_MAX_RANK], end[NR_MAX_RANK], dims[NR_MAX_RANK];
  bool known;
  if (x->rank < 0)
    return unknown_like(ctx, x->dtype, -1);
  if ((st = pad_amounts(ctx, x->rank, begin, end, &known)) || !known)
    return st ? st : unknown_like(ctx, x->dtype, x->rank);
  for (int d = 0; d < x->rank; d++) {
    dims[d] = x->dims[d] < 0 ? NR_DIM_UNKNOWN : x->dims[d] + begin[d] + end[d];
    if (x->dims[d] >= 0 && dims[d] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "pads remove more than dim %d's %lld elements",
                        d, (long long)x->dims[d]);
  }
  st = nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
  return st ? st : nr_sx_fold_small(ctx, nr_sx_pad_run);
}

/* Non-negative remainder. */
static int64_t pmod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

int64_t nr_pad_source(nr_pad_mode mode, int64_t o, int64_t dim, int64_t b, int64_t e) {
  if (mode == NR_PAD_CONSTANT)
    return (o - b >= 0 && o - b < dim) ? o - b : -1;
  int64_t lo = b < 0 ? -b : 0, hi = dim - (e < 0 ? -e : 0), n = hi - lo;
  int64_t i = o - (b > 0 ? b : 0);
  if (i >= 0 && i < n)
    return lo + i;
  if (mode == NR_PAD_EDGE)
    return lo + (i < 0 ? 0 : n - 1);
  if (mode == NR_PAD_WRAP)
    return lo + pmod(i, n);
  if (n == 1)
    return lo;
  int64_t m = pmod(i, 2 * (n - 1)); /* reflect: a triangle wave of period 2(n-1) */
  return lo + (m < n ? m : 2 * (n - 1) - m);
}

/* Fill value bytes: the `value` attribute before opset 11, else constant_value. */
static void pad_fill(nr_op_ctx *ctx, nr_dtype t, unsigned char *fill) {
  const nr_value *cv = nr_op_in(ctx, 2);
  memset(fill, 0, 8);
  if (ctx->node->opset < 11)
    nr_store_f64(t, fill, 0, nr_attr_float(ctx->node, "value", 0.0f));
  else if (cv && nr_value_count(cv) > 0)
    memcpy(fill, cv->data, nr_dtype_size(t));
}

/* Builds map[d][o] for every axis; fails when a non-constant mode must pad an axis
 * that has nothing left to copy from. */
static nr_status pad_maps(nr_op_ctx *ctx, pad_mode mode, const int64_t *begin,
                          const int64_t *end, int64_t **map) {
  const nr_value *x = nr_op_in(ctx, 0);
  const nr_value *y = nr_op_out(ctx, 0);
  for (int d = 0; d < x->rank; d++) {
    int64_t dim = x->dims[d], b = begin[d], e = end[d];
    int64_t kept = dim - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
    if (mode != NR_PAD_CONSTANT && kept <= 0 && (b > 0 || e > 0))
      return nr_op_fail(ctx, NR_ERR_SHAPE,
                        "cannot pad axis %d in this mode: no "
                        "elements left to copy",
                        d);
    map[d] = malloc(sizeof(int64_t) * (size_t)(y->dims[d] ? y->dims[d] : 1));
    if (!map[d])
      return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < y->dims[d]; o++)
      map[d][o] = nr_pad_source(mode, o, dim, b, e);
  }
  return NR_OK;
}

/* Walks the output in C order; each coordinate's source comes from the axis maps. */
static void pad_walk(const nr_value *x, nr_value *y, int64_t *const *map,
                     const unsigned char *fill) {
  size_t es = nr_dtype_size(x->dtype);
  int64_t xs[NR_MAX_RANK], idx[NR_MAX_RANK] = {0}, n = nr_value_count(y);
  nr_strides(x->rank, x->dims, xs);
  char *dst = y->data;
  for (int64_t k = 0; k < n; k++, dst += es) {
    int64_t off = 0;
    bool filled = false;
    for (int d = 0; d < x->rank && !filled; d++) {
      int64_t s = map[d][idx[d]];
      filled = s < 0;
      off += s * xs[d];
    }
    memcpy(dst, filled ? (const void *)fill : (const char *)x->data + (size_t)off * es,
           es);
    for (int d = x->rank - 1; d >= 0 && ++idx[d] == y->dims[d]; d--)
      idx[d] = 0;
  }
}

nr_status nr_sx_pad_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t begin[NR_MAX_RANK], end[NR_MAX_RANK], *map[NR_MAX_RANK] = {NULL};
  unsigned char fill[8];
  pad_mode mode = 0;
  bool known;
  nr_status st = pad_mode_of(ctx, &mode);
  if (!st)
    st = pad_amounts(ctx, x->rank, begin, end, &known);
  if (!st)
    st = pad_maps(ctx, mode, begin, end, map);
  if (!st) {
    pad_fill(ctx, x->dtype, fill);
    pad_walk(x, y, map, fill);
  }
  for (int d = 0; d < NR_MAX_RANK; d++)
    free(map[d]);
  return st;
}

/* ---- DepthToSpace, SpaceToDepth ---------------------------------------------------- */

/* blocksize and mode (DCR unless "CRD"), validated. */
static nr_status block_params(nr_op_ctx *ctx, int64_t *bs, bool *crd) {
  *bs = nr_attr_int(ctx->node, "blocksize", 0);
  const char *mode = nr_attr_string(ctx->node, "mode", "DCR");
  *crd = !strcmp(mode, "CRD");
  if (*bs <= 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "blocksize must be positive, is %lld",
                      (long long)*bs);
  if (!*crd && strcmp(mode, "DCR"))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
  return NR_OK;
}

static nr_status block_check(nr_op_ctx *ctx, const nr_value *x) {
  nr_status st = nr_op_check_arity(ctx, 1, 1); /* first: x is NULL without an input */
  if (!st && x->rank != 4 && x->rank >= 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must be 4-D, has rank %d", x->rank);
  return st;
}

nr_status nr_sx_d2s_infer(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t bs, dims[4];
  bool crd;
  nr_status st = block_check(ctx, x);
  if (!st)
    st = block_params(ctx, &bs, &crd);
  if (st || x->rank < 0)
    return st ? st : unknown_like(ctx, x->dtype, 4);
  if (x->dims[1] >= 0 && x->dims[1] % (bs * bs))
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "channels %lld not divisible by blocksize^2 %lld",
                      (long long)x->dims[1], (long long)(bs * bs));
  dims[0] = x->dims[0];
  dims[1] = x->dims[1] < 0 ? NR_DIM_UNKNOWN : x->dims[1] / (bs * bs);
  dims[2] = x->dims[2] < 0 ? NR_DIM_UNKNOWN : x->dims[2] * bs;
  dims[3] = x->dims[3] < 0 ? NR_DIM_UNKNOWN : x->dims[3] * bs;
  return nr_op_set_output(ctx, 0, x->dtype, 4, dims);
}

/* Output viewed as [n, c, h, bs1, w, bs2]; each stride says where that step lands in
 * the input [n, C, h, w]. DCR splits C as [bs1, bs2, c], CRD as [c, bs1, bs2]. */
nr_status nr_sx_d2s_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t bs;
  bool crd;
  nr_status st = block_params(ctx, &bs, &crd);
  if (st)
    return st;
  int64_t n = x->dims[0], c = x->dims[1] / (bs * bs), h = x->dims[2], w = x->dims[3];
  int64_t hw = h * w;
  nr_sx_view v = {.rank = 6, .dims = {n, c, h, bs, w, bs}, .offset = 0};
  int64_t strides[6] = {
      x->dims[1] * hw,  crd ? bs * bs * hw : hw, w, crd ? bs * hw : bs * c * hw, 1,
      crd ? hw : c * hw};
  memcpy(v.strides, strides, sizeof strides);
  nr_sx_view_copy(nr_op_out(ctx, 0)->data, x->data, nr_dtype_size(x->dtype), &v);
  return NR_OK;
}

nr_status nr_sx_s2d_infer(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t bs, dims[4];
  bool crd;
  nr_status st = block_check(ctx, x);
  if (!st)
    st = block_params(ctx, &bs, &crd);
  if (st || x->rank < 0)
    return st ? st : unknown_like(ctx, x->dtype, 4);
  for (int d = 2; d < 4; d++)
    if (x->dims[d] >= 0 && x->dims[d] % bs)
      return nr_op_fail(ctx, NR_ERR_SHAPE,
                        "dim %d (%lld) not divisible by blocksize %lld", d,
                        (long long)x->dims[d], (long long)bs);
  dims[0] = x->dims[0];
  dims[1] = x->dims[1] < 0 ? NR_DIM_UNKNOWN : x->dims[1] * bs * bs;
  dims[2] = x->dims[2] < 0 ? NR_DIM_UNKNOWN : x->dims[2] / bs;
  dims[3] = x->dims[3] < 0 ? NR_DIM_UNKNOWN : x->dims[3] / bs;
  return nr_op_set_output(ctx, 0, x->dtype, 4, dims);
}

/* Input viewed as [n, C, h, bs1, w, bs2]; the output walks [n, bs1, bs2, C, h, w]
 * (DCR) or [n, C, bs1, bs2, h, w] (CRD, opset 28). */
nr_status nr_sx_s2d_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t bs;
  bool crd;
  nr_status st = block_params(ctx, &bs, &crd);
  if (st)
    return st;
  int64_t n = x->dims[0], c = x->dims[1], h = x->dims[2] / bs, w = x->dims[3] / bs;
  int64_t W = x->dims[3], sn = c * x->dims[2] * W, sc = x->dims[2] * W;
  int64_t sh = bs * W, sb1 = W, sw = bs, sb2 = 1;
  nr_sx_view v = {.rank = 6, .offset = 0};
  int64_t dcr_dims[6] = {n, bs, bs, c, h, w}, dcr_str[6] = {sn, sb1, sb2, sc, sh, sw};
  int64_t crd_dims[6] = {n, c, bs, bs, h, w}, crd_str[6] = {sn, sc, sb1, sb2, sh, sw};
  memcpy(v.dims, crd ? crd_dims : dcr_dims, sizeof dcr_dims);
  memcpy(v.strides, crd ? crd_str : dcr_str, sizeof dcr_str);
  nr_sx_view_copy(nr_op_out(ctx, 0)->data, x->data, nr_dtype_size(x->dtype), &v);
  return NR_OK;
}

/* ---- Trilu ------------------------------------------------------------------------- */

nr_status nr_sx_trilu_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 2);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *k = nr_op_in(ctx, 1);
  if (x->rank >= 0 && x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must have rank >= 2, has %d", x->rank);
  if (k && ((k->dtype && k->dtype != NR_DTYPE_INT64) || nr_value_count(k) > 1))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "k must be an int64 scalar");
  return nr_op_same_as_input(ctx, 0, 0);
}

nr_status nr_sx_trilu_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *kv = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t k = kv && nr_value_count(kv) == 1 ? nr_value_get_i64(kv, 0) : 0;
  bool upper = nr_attr_int(ctx->node, "upper", 1) != 0;
  size_t es = nr_dtype_size(x->dtype);
  int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  int64_t count = nr_value_count(x);
  memcpy(y->data, x->data, nr_value_nbytes(x));
  for (int64_t i = 0; i < count; i++) {
    int64_t r = (i / cols) % rows, c = i % cols; /* count > 0 implies rows, cols > 0 */
    bool keep = upper ? c - r >= k : c - r <= k;
    if (!keep)
      memset((char *)y->data + (size_t)i * es, 0, es);
  }
  return NR_OK;
}

/* ---- ReverseSequence --------------------------------------------------------------- */

static nr_status revseq_axes(nr_op_ctx *ctx, int *batch, int *time) {
  int64_t b = nr_attr_int(ctx->node, "batch_axis", 1);
  int64_t t = nr_attr_int(ctx->node, "time_axis", 0);
  if ((b != 0 && b != 1) || (t != 0 && t != 1) || b == t)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "batch_axis %lld and time_axis %lld must "
                      "be 0 and 1 in some order",
                      (long long)b, (long long)t);
  *batch = (int)b;
  *time = (int)t;
  return NR_OK;
}

nr_status nr_sx_revseq_infer(nr_op_ctx *ctx) {
  int batch = 0, time = 0;
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = revseq_axes(ctx, &batch, &time);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *l = nr_op_in(ctx, 1);
  if (x->rank >= 0 && x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must have rank >= 2, has %d", x->rank);
  if (l->dtype && !nr_sx_is_index(l->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "sequence_lens must be int64");
  if (l->rank > 1 || (l->rank == 1 && x->rank >= 0 && l->dims[0] >= 0 &&
                      x->dims[batch] >= 0 && l->dims[0] != x->dims[batch]))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "sequence_lens must be 1-D of the batch size");
  return nr_op_same_as_input(ctx, 0, 0);
}

nr_status nr_sx_revseq_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *l = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  int batch = 0, time = 0;
  nr_status st = revseq_axes(ctx, &batch, &time);
  if (st)
    return st;
  size_t es = nr_dtype_size(x->dtype);
  int64_t xs[NR_MAX_RANK], steps = x->dims[time];
  nr_strides(x->rank, x->dims, xs);
  int64_t inner = xs[1]; /* the block of dims 2.. is contiguous */
  if (nr_value_count(l) != x->dims[batch])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "sequence_lens must have the batch size");
  memcpy(y->data, x->data, nr_value_nbytes(x));
  for (int64_t b = 0; b < x->dims[batch]; b++) {
    int64_t len = nr_value_get_i64(l, b);
    if (len < 0 || len > steps)
      return nr_op_fail(ctx, NR_ERR_RUNTIME,
                        "sequence_lens[%lld] = %lld is outside "
                        "[0, %lld]",
                        (long long)b, (long long)len, (long long)steps);
    for (int64_t t = 0; t < len; t++) {
      size_t to = (size_t)(b * xs[batch] + t * xs[time]) * es;
      size_t from = (size_t)(b * xs[batch] + (len - 1 - t) * xs[time]) * es;
      memcpy((char *)y->data + to, (const char *)x->data + from, (size_t)inner * es);
    }
  }
  return NR_OK;
}

/* ---- EyeLike ----------------------------------------------------------------------- */

static nr_status eyelike_dtype(nr_op_ctx *ctx, nr_dtype *t) {
  const nr_value *x = nr_op_in(ctx, 0);
  *t = (nr_dtype)nr_attr_int(ctx->node, "dtype", x->dtype);
  if (*t != NR_DTYPE_UNDEFINED && nr_dtype_size(*t) == 0)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "output dtype %s is not supported",
                      nr_dtype_name(*t));
  return NR_OK;
}

nr_status nr_sx_eyelike_infer(nr_op_ctx *ctx) {
  nr_dtype t;
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  if (!st)
    st = eyelike_dtype(ctx, &t);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->rank >= 0 && x->rank != 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must be 2-D, has rank %d", x->rank);
  if (x->rank < 0)
    return unknown_like(ctx, t, 2);
  return nr_op_set_output(ctx, 0, t, 2, x->dims);
}

nr_status nr_sx_eyelike_run(nr_op_ctx *ctx) {
  nr_value *y = nr_op_out(ctx, 0);
  int64_t k = nr_attr_int(ctx->node, "k", 0), rows = y->dims[0], cols = y->dims[1];
  memset(y->data, 0, nr_value_nbytes(y));
  if (k >= cols || k <= -rows)
    return NR_OK;
  for (int64_t r = 0; r < rows; r++)
    if (r + k >= 0 && r + k < cols)
      nr_store_f64(y->dtype, y->data, r * cols + r + k, 1.0);
  return NR_OK;
}
