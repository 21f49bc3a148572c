/* ops_dropout.c - Dropout (listed in ops_shape.c's table): a copy with an all-true
 * mask at inference, random zeroing and 1 / (1 - ratio) scaling in training mode.
 *
 * Training mode is random by definition, but ONNX's reference and its conformance
 * tests draw the keep mask as numpy.random.seed(seed); uniform(0, 1) >= ratio. We use
 * the same generator (MT19937 with its classic seeding and numpy's 53-bit doubles) so
 * that a given seed reproduces the reference exactly; without a seed attribute the
 * seed is 0, which keeps runs repeatable. The row is flagged NR_OP_NO_FOLD. */
#include "kernels/ref/ref_util.h"
#include "kernels/ref/shape_index.h"

#include <stdlib.h>
#include <string.h>

/* ---- MT19937 ----------------------------------------------------------------------- */

#define MT_N 624
#define MT_M 397

typedef struct mt19937 {
  uint32_t s[MT_N];
  int pos;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
  m->s[0] = seed;
  for (uint32_t i = 1; i < MT_N; i++)
    m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + i;
  m->pos = MT_N;
}

static void mt_refill(mt19937 *m) {
  for (int i = 0; i < MT_N; i++) {
    uint32_t y = (m->s[i] & 0x80000000u) | (m->s[(i + 1) % MT_N] & 0x7fffffffu);
    m->s[i] = m->s[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }
  m->pos = 0;
}

static uint32_t mt_next(mt19937 *m) {
  if (m->pos >= MT_N)
    mt_refill(m);
  uint32_t y = m->s[m->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

/* A double in [0, 1) from 27 + 26 random bits, as numpy's random_sample(). */
static double mt_uniform(mt19937 *m) {
  uint32_t a = mt_next(m) >> 5, b = mt_next(m) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

/* ---- Dropout ----------------------------------------------------------------------- */

/* Mask dtype: bool from opset 10, the data's type before. */
static nr_dtype mask_type(const nr_op_ctx *ctx) {
  return ctx->node->opset >= 10 ? NR_DTYPE_BOOL : nr_op_in(ctx, 0)->dtype;
}

nr_status nr_sx_dropout_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, ctx->node->opset >= 12 ? 3 : 1);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *r = nr_op_in(ctx, 1), *t = nr_op_in(ctx, 2);
  if (x->dtype != NR_DTYPE_UNDEFINED && !nr_dtype_is_float(x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "data must be a float tensor, not %s",
                      nr_dtype_name(x->dtype));
  if ((r && r->dtype && !nr_dtype_is_float(r->dtype)) ||
      (t && t->dtype && t->dtype != NR_DTYPE_BOOL))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "ratio must be float and training_mode bool");
  st = nr_op_same_as_input(ctx, 0, 0);
  return st ? st : nr_op_set_output(ctx, 1, mask_type(ctx), x->rank, x->dims);
}

static nr_status dropout_train(nr_op_ctx *ctx, double ratio) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0), *mask = nr_op_out(ctx, 1);
  if (ratio < 0 || ratio >= 1)
    return nr_op_fail(ctx, NR_ERR_RUNTIME, "ratio %g is outside [0, 1)", ratio);
  mt19937 *rng = malloc(sizeof *rng); /* 2.5 KB: keep it off the stack */
  if (!rng)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  mt_seed(rng, (uint32_t)nr_attr_int(ctx->node, "seed", 0));
  /* Scale in the data's precision (float for the 16-bit types), as the reference. */
  bool wide = x->dtype == NR_DTYPE_DOUBLE;
  double scale = wide ? 1.0 / (1.0 - ratio) : (double)(1.0f / (1.0f - (float)ratio));
  int64_t n = nr_value_count(x);
  for (int64_t i = 0; i < n; i++) {
    bool keep = mt_uniform(rng) >= ratio;
    double v = nr_load_f64(x->dtype, x->data, i) * scale;
    nr_store_f64(x->dtype, y->data, i, keep ? (wide ? v : (double)(float)v) : 0.0);
    if (mask)
      nr_store_i64(mask->dtype, mask->data, i, keep);
  }
  free(rng);
  return NR_OK;
}

nr_status nr_sx_dropout_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0), *mask = nr_op_out(ctx, 1);
  double ratio = nr_attr_float(ctx->node, "ratio", 0.5f);
  bool training = false;
  if (ctx->node->opset >= 12) {
    const nr_value *r = nr_op_in(ctx, 1), *t = nr_op_in(ctx, 2);
    ratio = r && nr_value_count(r) > 0 ? nr_value_get_f64(r, 0) : 0.5;
    training = t && nr_value_count(t) > 0 && nr_value_get_i64(t, 0) != 0;
  }
  if (training && ratio != 0)
    return dropout_train(ctx, ratio);
  if (mask)
    for (int64_t i = 0; i < nr_value_count(mask); i++)
      nr_store_i64(mask->dtype, mask->data, i, 1);
  if (nr_value_nbytes(x))
    memcpy(y->data, x->data, nr_value_nbytes(x));
  return NR_OK;
}
