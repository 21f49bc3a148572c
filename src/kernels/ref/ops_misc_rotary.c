/* ops_misc_rotary.c - reference RotaryEmbedding (opset 23).
 *
 * The input is [B, H, S, D] or [B, S, H*D] (num_heads given); both are addressed
 * through one element-offset function, so no transposed copy is made. Each
 * (b, s, h) row rotates its first rotary_embedding_dim elements as pairs - halves
 * (x[j], x[j + half]) or, interleaved, neighbours (x[2j], x[2j + 1]) - by the angle
 * whose cos/sin come from the caches row position_ids[b, s] (or row (b, s) when
 * there are no position ids). Computed in double, rounded once on store. */
#include "kernels/ref/misc.h"
#include "kernels/ref/ref_util.h"

#include <string.h>

typedef struct rope_geom {
  int64_t b, h, s, d, rdim;
  bool four_d;
} rope_geom;

static nr_status rope_geom_of(nr_op_ctx *ctx, const nr_value *x, rope_geom *g) {
  int64_t heads = nr_attr_int(ctx->node, "num_heads", 0);
  if (x->rank != 3 && x->rank != 4)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must be 3-D or 4-D, got rank %d", x->rank);
  g->four_d = x->rank == 4;
  g->b = x->dims[0];
  g->h = g->four_d ? x->dims[1] : heads;
  g->s = g->four_d ? x->dims[2] : x->dims[1];
  if (!g->four_d && heads <= 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "a 3-D input needs num_heads");
  if (!g->four_d && x->dims[2] >= 0 && x->dims[2] % heads)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "hidden size %lld is not a multiple of "
                      "num_heads %lld", (long long)x->dims[2], (long long)heads);
  g->d = g->four_d ? x->dims[3] : (x->dims[2] >= 0 ? x->dims[2] / heads : -1);
  g->rdim = nr_attr_int(ctx->node, "rotary_embedding_dim", 0);
  if (g->rdim == 0)
    g->rdim = g->d;
  if (g->rdim < 0 || g->rdim % 2 || (g->d >= 0 && g->rdim > g->d))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "rotary_embedding_dim %lld does not fit head "
                      "size %lld", (long long)g->rdim, (long long)g->d);
  return NR_OK;
}

static nr_status rope_check_cache(nr_op_ctx *ctx, int i, const rope_geom *g) {
  const nr_value *c = nr_op_in(ctx, i);
  bool pos = nr_op_in(ctx, 3) != NULL;
  if (c->rank < 0)
    return NR_OK;
  if ((pos && c->rank != 2) || (!pos && c->rank != 2 && c->rank != 3))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s cache has rank %d", i == 1 ? "cos" : "sin",
                      c->rank);
  int64_t last = c->dims[c->rank - 1];
  if (last >= 0 && g->rdim >= 0 && last != g->rdim / 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cache last dim %lld is not rotary dim / 2 "
                      "(%lld)", (long long)last, (long long)(g->rdim / 2));
  /* The kernel reads both caches at one row index: they must agree, and without
   * position_ids their rows must cover (batch, sequence) or the sequence. */
  const nr_value *cos = nr_op_in(ctx, 1);
  bool same = cos->rank < 0 || (cos->rank == c->rank &&
                                !memcmp(cos->dims, c->dims, sizeof(int64_t) * c->rank));
  bool covers = pos || (c->rank == 3 ? (c->dims[0] < 0 || g->b < 0 || c->dims[0] == g->b) &&
                                           (c->dims[1] < 0 || g->s < 0 || c->dims[1] == g->s)
                                     : c->dims[0] < 0 || g->s < 0 || c->dims[0] >= g->s);
  if (!same || !covers)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cos and sin caches must have one shape covering "
                      "every (batch, position) read");
  return NR_OK;
}

nr_status nr_misc_rotary_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 4);
  for (int i = 0; !st && i < 3; i++)
    st = nr_misc_need_float(ctx, i, i == 0 ? "input" : i == 1 ? "cos_cache" : "sin_cache");
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *p = nr_op_in(ctx, 3);
  if (p && p->dtype && p->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "position_ids must be int64");
  if (x->rank >= 0) {
    rope_geom g;
    if ((st = rope_geom_of(ctx, x, &g)) || (st = rope_check_cache(ctx, 1, &g)) ||
        (st = rope_check_cache(ctx, 2, &g)))
      return st;
  }
  return nr_op_same_as_input(ctx, 0, 0);
}

static int64_t rope_off(const rope_geom *g, int64_t b, int64_t s, int64_t h, int64_t j) {
  if (g->four_d)
    return ((b * g->h + h) * g->s + s) * g->d + j;
  return ((b * g->s + s) * g->h + h) * g->d + j;
}

/* Row of the caches for (b, s). */
static nr_status rope_cache_row(nr_op_ctx *ctx, const rope_geom *g, int64_t b, int64_t s,
                                int64_t *row) {
  const nr_value *p = nr_op_in(ctx, 3), *c = nr_op_in(ctx, 1);
  if (p) {
    *row = nr_load_i64(p->dtype, p->data, b * g->s + s);
    if (*row < 0 || *row >= c->dims[0])
      return nr_op_fail(ctx, NR_ERR_RUNTIME, "position id %lld outside the cache",
                        (long long)*row);
  } else {
    *row = c->rank == 3 ? b * g->s + s : s;
  }
  return NR_OK;
}

static void rope_rotate(nr_op_ctx *ctx, const rope_geom *g, int64_t b, int64_t s,
                        int64_t row) {
  const nr_value *x = nr_op_in(ctx, 0), *cc = nr_op_in(ctx, 1), *sc = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  bool inter = nr_attr_int(ctx->node, "interleaved", 0) != 0;
  int64_t half = g->rdim / 2;
  for (int64_t h = 0; h < g->h; h++) {
    for (int64_t j = 0; j < half; j++) {
      double c = nr_load_f64(cc->dtype, cc->data, row * half + j);
      double sn = nr_load_f64(sc->dtype, sc->data, row * half + j);
      int64_t o1 = rope_off(g, b, s, h, inter ? 2 * j : j);
      int64_t o2 = rope_off(g, b, s, h, inter ? 2 * j + 1 : j + half);
      double x1 = nr_load_f64(x->dtype, x->data, o1), x2 = nr_load_f64(x->dtype, x->data, o2);
      nr_store_f64(y->dtype, y->data, o1, c * x1 - sn * x2);
      nr_store_f64(y->dtype, y->data, o2, sn * x1 + c * x2);
    }
    for (int64_t j = g->rdim; j < g->d; j++) {
      int64_t o = rope_off(g, b, s, h, j);
      nr_store_f64(y->dtype, y->data, o, nr_load_f64(x->dtype, x->data, o));
    }
  }
}

nr_status nr_misc_rotary_run(nr_op_ctx *ctx) {
  rope_geom g;
  nr_status st = rope_geom_of(ctx, nr_op_in(ctx, 0), &g);
  const nr_value *c = nr_op_in(ctx, 1);
  if (!st && c->rank == 2 && !nr_op_in(ctx, 3) && c->dims[0] < g.s)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cache has fewer rows than the sequence");
  if (!st && c->rank == 3 && (c->dims[0] != g.b || c->dims[1] != g.s))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "3-D caches must be [batch, seq, rotary/2]");
  const nr_value *pos = nr_op_in(ctx, 3);
  if (!st && pos && nr_value_count(pos) != g.b * g.s)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "position_ids has %lld ids for batch %lld x "
                      "sequence %lld", (long long)nr_value_count(pos), (long long)g.b,
                      (long long)g.s);
  for (int64_t b = 0; !st && b < g.b; b++) {
    for (int64_t s = 0; !st && s < g.s; s++) {
      int64_t row;
      if (!(st = rope_cache_row(ctx, &g, b, s, &row)))
        rope_rotate(ctx, &g, b, s, row);
    }
  }
  return st;
}
