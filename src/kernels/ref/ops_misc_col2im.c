/* ops_misc_col2im.c - reference SwiGLU (opset 28) and Col2Im (opset 18).
 *
 * Col2Im is the adjoint of im2col: each column entry (channel, block offset k, sliding
 * position l) is added to image pixel l * stride - pad_begin + k * dilation when that
 * pixel lies inside the image, for any number of spatial dims. Sums are accumulated
 * in a double image and rounded once on store. */
#include "kernels/ref/misc.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- SwiGLU ------------------------------------------------------------------------ */

nr_status nr_misc_swiglu_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_misc_need_float(ctx, 0, "A");
  if (st)
    return st;
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  if (a->dtype && b->dtype && a->dtype != b->dtype)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "A and B dtypes differ");
  bool differ = a->rank >= 0 && b->rank >= 0 && a->rank != b->rank;
  for (int d = 0; !differ && a->rank >= 0 && d < a->rank && b->rank >= 0; d++)
    differ = a->dims[d] >= 0 && b->dims[d] >= 0 && a->dims[d] != b->dims[d];
  if (differ)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "A and B must have the same shape");
  return nr_op_same_as_input(ctx, 0, a->rank >= 0 ? 0 : 1);
}

nr_status nr_misc_swiglu_run(nr_op_ctx *ctx) {
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  double alpha = nr_attr_float(ctx->node, "alpha", 1.0f);
  int64_t n = nr_value_count(a);
  for (int64_t i = 0; i < n; i++) {
    double x = nr_load_f64(a->dtype, a->data, i), g = nr_load_f64(b->dtype, b->data, i);
    nr_store_f64(y->dtype, y->data, i, x / (1 + exp(-alpha * x)) * g);
  }
  return NR_OK;
}

/* ---- Col2Im ------------------------------------------------------------------------ */

typedef struct c2i_geom {
  int r;
  int64_t img[NR_MAX_RANK], blk[NR_MAX_RANK], dil[NR_MAX_RANK], str[NR_MAX_RANK];
  int64_t pad[2 * NR_MAX_RANK], slide[NR_MAX_RANK];
  int64_t blk_count, l_count;
} c2i_geom;

/* Reads the attributes (and, when known, image/block shapes) for r spatial dims. */
static nr_status c2i_attrs(nr_op_ctx *ctx, c2i_geom *g) {
  size_t nd, np, ns;
  const int64_t *dil = nr_attr_ints(ctx->node, "dilations", &nd);
  const int64_t *pad = nr_attr_ints(ctx->node, "pads", &np);
  const int64_t *str = nr_attr_ints(ctx->node, "strides", &ns);
  if ((dil && nd != (size_t)g->r) || (pad && np != 2 * (size_t)g->r) ||
      (str && ns != (size_t)g->r))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "dilations/pads/strides do not fit %d dims", g->r);
  for (int d = 0; d < g->r; d++) {
    g->dil[d] = dil ? dil[d] : 1;
    g->str[d] = str ? str[d] : 1;
    g->pad[d] = pad ? pad[d] : 0;
    g->pad[g->r + d] = pad ? pad[g->r + d] : 0;
    if (g->dil[d] <= 0 || g->str[d] <= 0 || g->pad[d] < 0 || g->pad[g->r + d] < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "dilations and strides must be positive, "
                        "pads non-negative");
  }
  return NR_OK;
}

/* Fills image and block shapes and sliding counts from known data. */
static nr_status c2i_geom_of(nr_op_ctx *ctx, c2i_geom *g) {
  const nr_value *im = nr_op_in(ctx, 1), *bl = nr_op_in(ctx, 2);
  g->blk_count = g->l_count = 1;
  for (int d = 0; d < g->r; d++) {
    g->img[d] = nr_value_get_i64(im, d);
    g->blk[d] = nr_value_get_i64(bl, d);
    int64_t span = g->dil[d] * (g->blk[d] - 1) + 1;
    int64_t room = g->img[d] + g->pad[d] + g->pad[g->r + d] - span;
    if (g->img[d] <= 0 || g->blk[d] <= 0 || room < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "block %lld does not fit image dim %lld",
                        (long long)g->blk[d], (long long)g->img[d]);
    g->slide[d] = room / g->str[d] + 1;
    g->blk_count *= g->blk[d];
    g->l_count *= g->slide[d];
  }
  return NR_OK;
}

nr_status nr_misc_col2im_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *im = nr_op_in(ctx, 1), *bl = nr_op_in(ctx, 2);
  if ((im->dtype && im->dtype != NR_DTYPE_INT64) || (bl->dtype && bl->dtype != NR_DTYPE_INT64))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "image_shape and block_shape must be int64");
  if ((x->rank >= 0 && x->rank != 3) || (im->rank >= 0 && im->rank != 1) ||
      (bl->rank >= 0 && bl->rank != 1))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must be [N, C*prod(block), L] and the "
                      "shapes 1-D");
  c2i_geom g = {.r = im->rank == 1 ? (int)im->dims[0] : -1};
  if (g.r < 0 || g.r + 2 > NR_MAX_RANK)
    return g.r < 0 ? nr_op_set_output(ctx, 0, x->dtype, -1, NULL)
                   : nr_op_fail(ctx, NR_ERR_SHAPE, "too many spatial dims");
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < g.r + 2; d++)
    dims[d] = NR_DIM_UNKNOWN;
  dims[0] = x->rank == 3 ? x->dims[0] : NR_DIM_UNKNOWN;
  if ((st = c2i_attrs(ctx, &g)))
    return st;
  if (nr_op_in_known(ctx, 1) && nr_op_in_known(ctx, 2)) {
    if ((st = c2i_geom_of(ctx, &g)))
      return st;
    for (int d = 0; d < g.r; d++)
      dims[2 + d] = g.img[d];
    if (x->rank == 3 && x->dims[1] >= 0) {
      if (x->dims[1] % g.blk_count)
        return nr_op_fail(ctx, NR_ERR_SHAPE, "input dim 1 is not a multiple of the block");
      dims[1] = x->dims[1] / g.blk_count;
    }
    if (x->rank == 3 && x->dims[2] >= 0 && x->dims[2] != g.l_count)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input has %lld blocks, the geometry gives "
                        "%lld", (long long)x->dims[2], (long long)g.l_count);
  }
  return nr_op_set_output(ctx, 0, x->dtype, g.r + 2, dims);
}

/* Image offset for block offset k and sliding position l, or -1 outside. */
static int64_t c2i_target(const c2i_geom *g, int64_t k, int64_t l) {
  int64_t off = 0, stride = 1;
  for (int d = g->r - 1; d >= 0; d--) {
    int64_t kd = k % g->blk[d], ld = l % g->slide[d];
    k /= g->blk[d];
    l /= g->slide[d];
    int64_t i = ld * g->str[d] - g->pad[d] + kd * g->dil[d];
    if (i < 0 || i >= g->img[d])
      return -1;
    off += i * stride;
    stride *= g->img[d];
  }
  return off;
}

nr_status nr_misc_col2im_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  c2i_geom g = {.r = (int)nr_op_in(ctx, 1)->dims[0]};
  nr_status st = c2i_attrs(ctx, &g);
  if (st || (st = c2i_geom_of(ctx, &g)))
    return st;
  int64_t nc = x->dims[0] * (x->dims[1] / g.blk_count);
  int64_t img = nr_misc_prod(g.img, 0, g.r);
  double *acc = calloc((size_t)(img > 0 ? img : 1), sizeof(double));
  if (!acc)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  for (int64_t c = 0; c < nc; c++) {
    memset(acc, 0, sizeof(double) * (size_t)img);
    for (int64_t k = 0; k < g.blk_count; k++) {
      for (int64_t l = 0; l < g.l_count; l++) {
        int64_t t = c2i_target(&g, k, l);
        if (t >= 0)
          acc[t] += nr_load_f64(x->dtype, x->data, (c * g.blk_count + k) * g.l_count + l);
      }
    }
    for (int64_t i = 0; i < img; i++)
      nr_store_f64(y->dtype, y->data, c * img + i, acc[i]);
  }
  free(acc);
  return NR_OK;
}
