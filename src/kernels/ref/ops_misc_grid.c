/* ops_misc_grid.c - reference GridSample (opset 16 4-D, opset 20 N-D) and AffineGrid
 * (opset 20, 2-D and 3-D).
 *
 * GridSample is separable: for each spatial dim an output point gets up to four taps
 * (source index, weight) - one for nearest, two for linear, four for cubic - with the
 * padding mode already applied to the index (zeros marks the tap dead, border clamps,
 * reflection folds it back). The value is the sum over the tap product. This is the
 * same linear combination as the spec's nested 1-D interpolation, computed in double. */
#include "kernels/ref/misc.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- GridSample -------------------------------------------------------------------- */

typedef enum gs_mode { GS_NEAREST, GS_LINEAR, GS_CUBIC } gs_mode;
typedef enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECT } gs_pad;

typedef struct gs_params {
  gs_mode mode;
  gs_pad pad;
  bool align;
} gs_params;

typedef struct gs_taps {
  int n;
  int64_t idx[4]; /* -1: outside with zeros padding */
  double w[4];
} gs_taps;

/* Mode names changed at opset 20 (bilinear -> linear, bicubic -> cubic). */
static nr_status gs_params_of(nr_op_ctx *ctx, gs_params *p) {
  bool v20 = ctx->node->opset >= 20;
  const char *m = nr_attr_string(ctx->node, "mode", v20 ? "linear" : "bilinear");
  const char *pm = nr_attr_string(ctx->node, "padding_mode", "zeros");
  if (!strcmp(m, "nearest"))
    p->mode = GS_NEAREST;
  else if (!strcmp(m, v20 ? "linear" : "bilinear"))
    p->mode = GS_LINEAR;
  else if (!strcmp(m, v20 ? "cubic" : "bicubic"))
    p->mode = GS_CUBIC;
  else
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown mode '%s'", m);
  if (!strcmp(pm, "zeros"))
    p->pad = GS_ZEROS;
  else if (!strcmp(pm, "border"))
    p->pad = GS_BORDER;
  else if (!strcmp(pm, "reflection"))
    p->pad = GS_REFLECT;
  else
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown padding_mode '%s'", pm);
  p->align = nr_attr_int(ctx->node, "align_corners", 0) != 0;
  return NR_OK;
}

nr_status nr_misc_gridsample_infer(nr_op_ctx *ctx) {
  gs_params p;
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_misc_need_float(ctx, 1, "grid");
  if (!st)
    st = gs_params_of(ctx, &p);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *g = nr_op_in(ctx, 1);
  int rank = x->rank >= 0 ? x->rank : g->rank;
  if (rank < 0)
    return nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  if (rank < 3 || (ctx->node->opset < 20 && rank != 4))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must be N x C x spatial (4-D before opset "
                      "20), got rank %d", rank);
  if (g->rank >= 0 && (g->rank != rank || (g->dims[rank - 1] >= 0 &&
                                           g->dims[rank - 1] != rank - 2)))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "grid must be N x spatial x %d", rank - 2);
  int64_t dims[NR_MAX_RANK];
  dims[0] = x->rank >= 0 ? x->dims[0] : g->dims[0];
  if (dims[0] < 0 && g->rank >= 0)
    dims[0] = g->dims[0];
  if (x->rank >= 0 && g->rank >= 0 && x->dims[0] >= 0 && g->dims[0] >= 0 &&
      x->dims[0] != g->dims[0])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X and grid batch sizes differ");
  dims[1] = x->rank >= 0 ? x->dims[1] : NR_DIM_UNKNOWN;
  for (int d = 2; d < rank; d++)
    dims[d] = g->rank >= 0 ? g->dims[d - 1] : NR_DIM_UNKNOWN;
  return nr_op_set_output(ctx, 0, x->dtype, rank, dims);
}

/* Folds x into [lo, hi] by reflecting at the borders (as many times as needed). */
static double gs_reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0)
    return lo;
  if (x < lo || x > hi) {
    double dx = x < lo ? lo - x : x - hi;
    double k = floor(dx / range), r = dx - k * range;
    bool even = fmod(k, 2.0) == 0;
    if (x < lo)
      return even ? lo + r : hi - r;
    return even ? hi - r : lo + r;
  }
  return x;
}

static void gs_cubic_coeffs(double t, double *c) {
  const double a = -0.75;
  double x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
  c[0] = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  c[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

/* Source index for integer position i along a dim of length len (-1: zero pad). */
static int64_t gs_index(int64_t i, int64_t len, const gs_params *p, double lo, double hi) {
  if (i >= 0 && i < len)
    return i;
  if (p->pad == GS_ZEROS)
    return -1;
  if (p->pad == GS_BORDER)
    return i < 0 ? 0 : len - 1;
  int64_t r = (int64_t)gs_reflect((double)i, lo, hi);
  return r < 0 ? 0 : r >= len ? len - 1 : r;
}

/* Taps along one dim for normalized coordinate nc. */
static void gs_dim_taps(double nc, int64_t len, const gs_params *p, gs_taps *t) {
  double x = p->align ? (nc + 1) / 2.0 * (double)(len - 1)
                      : ((nc + 1) * (double)len - 1) / 2.0;
  double lo = p->align ? 0.0 : -0.5, hi = p->align ? (double)len - 1 : (double)len - 0.5;
  if (p->mode == GS_NEAREST)
    x = nearbyint(x);
  if (x < lo || x > hi) {
    if (p->pad == GS_BORDER)
      x = x < 0 ? 0 : x > (double)(len - 1) ? (double)(len - 1) : x;
    else if (p->pad == GS_REFLECT)
      x = gs_reflect(x, lo, hi);
  }
  if (p->mode == GS_NEAREST) {
    t->n = 1;
    t->w[0] = 1;
    t->idx[0] = gs_index((int64_t)x, len, p, lo, hi); /* truncation, as the spec's */
    return;
  }
  double x0 = floor(x), f = x - x0;
  int64_t i0 = (int64_t)x0;
  if (p->mode == GS_LINEAR) {
    t->n = 2;
    t->w[0] = 1 - f;
    t->w[1] = f;
    t->idx[0] = gs_index(i0, len, p, lo, hi);
    t->idx[1] = gs_index(i0 + 1, len, p, lo, hi);
    return;
  }
  t->n = 4;
  gs_cubic_coeffs(f, t->w);
  for (int k = 0; k < 4; k++)
    t->idx[k] = gs_index(i0 - 1 + k, len, p, lo, hi);
}

/* Sum over every combination of taps of the product of weights times the pixel. */
static double gs_combine(const nr_value *x, int64_t base, const int64_t *strides,
                         const gs_taps *taps, int nd) {
  int k[NR_MAX_RANK] = {0};
  double sum = 0;
  for (;;) {
    double w = 1;
    int64_t off = base;
    bool dead = false;
    for (int d = 0; d < nd; d++) {
      w *= taps[d].w[k[d]];
      dead |= taps[d].idx[k[d]] < 0;
      off += taps[d].idx[k[d]] * strides[d];
    }
    if (!dead && w != 0)
      sum += w * nr_load_f64(x->dtype, x->data, off);
    int d = nd - 1;
    while (d >= 0 && ++k[d] == taps[d].n)
      k[d--] = 0;
    if (d < 0)
      return sum;
  }
}

nr_status nr_misc_gridsample_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *g = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  gs_params p;
  nr_status st = gs_params_of(ctx, &p);
  if (st)
    return st;
  int nd = x->rank - 2;
  int64_t n = x->dims[0], c = x->dims[1], in_sp = nr_misc_prod(x->dims, 2, x->rank);
  int64_t out_sp = nr_misc_prod(y->dims, 2, y->rank), strides[NR_MAX_RANK];
  nr_strides(nd, x->dims + 2, strides);
  if (in_sp == 0) { /* an empty image: there is no pixel to sample, every one is 0 */
    for (int64_t i = 0, count = nr_value_count(y); i < count; i++)
      nr_store_f64(y->dtype, y->data, i, 0);
    return NR_OK;
  }
  gs_taps taps[NR_MAX_RANK];
  for (int64_t b = 0; b < n; b++) {
    for (int64_t o = 0; o < out_sp; o++) {
      int64_t gbase = (b * out_sp + o) * nd;
      for (int d = 0; d < nd; d++) /* grid's last axis lists x (W) first */
        gs_dim_taps(nr_load_f64(g->dtype, g->data, gbase + nd - 1 - d), x->dims[2 + d],
                    &p, &taps[d]);
      for (int64_t ch = 0; ch < c; ch++) {
        double v = gs_combine(x, (b * c + ch) * in_sp, strides, taps, nd);
        nr_store_f64(y->dtype, y->data, (b * c + ch) * out_sp + o, v);
      }
    }
  }
  return NR_OK;
}

/* ---- AffineGrid -------------------------------------------------------------------- */

/* Spatial rank from theta ([N,2,3] -> 2, [N,3,4] -> 3) or size ([4] / [5]); -1 unknown. */
static int ag_spatial(const nr_value *theta, const nr_value *size) {
  if (theta->rank == 3 && theta->dims[1] >= 0)
    return (int)theta->dims[1];
  if (size->rank == 1 && size->dims[0] >= 0)
    return (int)size->dims[0] - 2;
  return -1;
}

nr_status nr_misc_affinegrid_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_misc_need_float(ctx, 0, "theta");
  if (st)
    return st;
  const nr_value *th = nr_op_in(ctx, 0), *sz = nr_op_in(ctx, 1);
  if (sz->dtype && sz->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "size must be int64");
  int r = ag_spatial(th, sz);
  if (r < 0)
    return nr_op_set_output(ctx, 0, th->dtype, -1, NULL);
  if ((r != 2 && r != 3) || (th->rank >= 0 && th->rank != 3) ||
      (th->rank == 3 && th->dims[2] >= 0 && th->dims[2] != r + 1) ||
      (sz->rank >= 0 && (sz->rank != 1 || (sz->dims[0] >= 0 && sz->dims[0] != r + 2))))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "theta must be N x 2 x 3 or N x 3 x 4 and "
                      "size [N, C, (D,) H, W]");
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < r + 1; d++)
    dims[d] = NR_DIM_UNKNOWN;
  dims[0] = th->rank == 3 ? th->dims[0] : NR_DIM_UNKNOWN;
  dims[r + 1] = r;
  if (nr_op_in_known(ctx, 1)) {
    for (int d = 0; d <= r; d++)
      dims[d] = d ? nr_value_get_i64(sz, d + 1) : nr_value_get_i64(sz, 0);
    for (int d = 0; d <= r; d++)
      if (dims[d] < 0)
        return nr_op_fail(ctx, NR_ERR_SHAPE, "size holds a negative dim");
    if (th->rank == 3 && th->dims[0] >= 0 && th->dims[0] != dims[0])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "size's N differs from theta's");
  }
  return nr_op_set_output(ctx, 0, th->dtype, r + 2, dims);
}

/* Normalized coordinate of sample i of len. */
static double ag_coord(int64_t i, int64_t len, bool align) {
  if (align)
    return len > 1 ? -1.0 + 2.0 * (double)i / (double)(len - 1) : -1.0;
  return -1.0 + (2.0 * (double)i + 1.0) / (double)len;
}

nr_status nr_misc_affinegrid_run(nr_op_ctx *ctx) {
  const nr_value *th = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  bool align = nr_attr_int(ctx->node, "align_corners", 0) != 0;
  int r = y->rank - 2;
  int64_t n = y->dims[0], sp = nr_misc_prod(y->dims, 1, r + 1);
  for (int64_t b = 0; b < n; b++) {
    for (int64_t s = 0; s < sp; s++) {
      double h[4]; /* homogeneous (x, y, [z,] 1): x runs along the last dim */
      int64_t rem = s;
      for (int d = r - 1; d >= 0; d--) {
        int64_t len = y->dims[1 + d];
        h[r - 1 - d] = ag_coord(rem % len, len, align);
        rem /= len;
      }
      h[r] = 1;
      for (int i = 0; i < r; i++) {
        double v = 0;
        for (int j = 0; j <= r; j++)
          v += nr_load_f64(th->dtype, th->data, (b * r + i) * (r + 1) + j) * h[j];
        nr_store_f64(y->dtype, y->data, (b * sp + s) * r + i, v);
      }
    }
  }
  return NR_OK;
}
