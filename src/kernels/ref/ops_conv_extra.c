/* ops_conv_extra.c - the rarer members of the conv family: DeformConv and
 * CausalConvWithState (their rows are in nr_ref_ops_conv[], ops_conv.c).
 *
 * Neither is on a hot path, so both are direct loops in double over the dtype-generic
 * loaders. DeformConv samples X at each kernel tap moved by a learned offset, with
 * multilinear interpolation that reads zeros outside X (the ONNX reference's
 * GridSample with align_corners=1 and zero padding), for any number of spatial dims.
 * CausalConvWithState is a depthwise 1-D conv over [past_state, input] that also
 * returns the last k-1 positions as the next state. */
#include "ir/op.h"
#include "kernels/ref/conv_util.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <string.h>

/* ---- DeformConv ----------------------------------------------------------------- */

typedef struct deform_job {
  nr_window win;
  int64_t batch, in_c, out_c, group, offset_group;
  int64_t ksize, in_size, out_size;
  const nr_value *x, *w, *offset, *bias, *mask;
} deform_job;

/* Checks that v is [N, channels, out...]; name is used in messages. */
static nr_status check_per_position(nr_op_ctx *ctx, const nr_value *v, const char *name,
                                    const deform_job *j, int64_t channels) {
  if (!v || v->rank < 0)
    return NR_OK;
  bool ok = v->rank == j->win.nsp + 2;
  int64_t want[NR_MAX_RANK] = {j->batch, channels};
  memcpy(want + 2, j->win.out, sizeof(int64_t) * (size_t)j->win.nsp);
  for (int d = 0; ok && d < v->rank; d++)
    ok = v->dims[d] < 0 || want[d] < 0 || v->dims[d] == want[d];
  if (!ok) {
    char buf[128];
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s is %s, expected [%lld, %lld, output dims]",
                      name, nr_value_describe(v, buf, sizeof buf), (long long)j->batch,
                      (long long)channels);
  }
  return NR_OK;
}

static nr_status deform_channels(nr_op_ctx *ctx, deform_job *j) {
  const nr_value *x = j->x, *w = j->w;
  j->group = nr_attr_int(ctx->node, "group", 1);
  j->offset_group = nr_attr_int(ctx->node, "offset_group", 1);
  j->batch = x->dims[0];
  j->in_c = x->dims[1];
  j->out_c = w->rank < 0 ? NR_DIM_UNKNOWN : w->dims[0];
  if (j->group < 1 || j->offset_group < 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "group and offset_group must be >= 1");
  if (j->in_c >= 0 && w->rank >= 0 && w->dims[1] >= 0 &&
      (j->in_c != w->dims[1] * j->group || j->in_c % j->offset_group))
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "X has %lld channels; W takes %lld per group x %lld groups and "
                      "offset_group is %lld",
                      (long long)j->in_c, (long long)w->dims[1], (long long)j->group,
                      (long long)j->offset_group);
  if (j->out_c >= 0 && j->out_c % j->group)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "%lld output channels do not split into %lld groups",
                      (long long)j->out_c, (long long)j->group);
  return NR_OK;
}

/* Resolves the job; *rank = -1 when X's rank is unknown. */
static nr_status deform_prepare(nr_op_ctx *ctx, deform_job *j, int *rank, int64_t *dims) {
  memset(j, 0, sizeof *j);
  j->x = nr_op_in(ctx, 0), j->w = nr_op_in(ctx, 1), j->offset = nr_op_in(ctx, 2);
  j->bias = nr_op_in(ctx, 3), j->mask = nr_op_in(ctx, 4);
  int nsp;
  nr_status st = nr_window_check_input(ctx, j->x, "X", &nsp);
  *rank = nsp < 0 ? -1 : nsp + 2;
  if (st || nsp < 0)
    return st;
  if (j->w->rank >= 0 && j->w->rank != nsp + 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "W has rank %d, X has rank %d", j->w->rank,
                      nsp + 2);
  int64_t unknown[NR_MAX_RANK];
  for (int i = 0; i < nsp; i++)
    unknown[i] = NR_DIM_UNKNOWN;
  st = nr_window_read(ctx, nsp, j->w->rank < 0 ? unknown : j->w->dims + 2, &j->win);
  if (!st)
    st = nr_window_forward(ctx, &j->win, j->x->dims + 2);
  if (!st)
    st = deform_channels(ctx, j);
  if (st)
    return st;
  j->ksize = nr_dims_prod(nsp, j->win.kernel);
  j->in_size = nr_dims_prod(nsp, j->win.in);
  j->out_size = nr_dims_prod(nsp, j->win.out);
  int64_t og_k = j->ksize < 0 ? NR_DIM_UNKNOWN : j->offset_group * j->ksize;
  st = check_per_position(ctx, j->offset, "offset", j, og_k < 0 ? og_k : og_k * nsp);
  if (!st)
    st = check_per_position(ctx, j->mask, "mask", j, og_k);
  if (!st && j->bias && j->bias->rank >= 0 &&
      (j->bias->rank != 1 || (j->out_c >= 0 && j->bias->dims[0] != j->out_c)))
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "B must be 1-D with %lld entries",
                    (long long)j->out_c);
  dims[0] = j->batch;
  dims[1] = j->out_c;
  memcpy(dims + 2, j->win.out, sizeof(int64_t) * (size_t)nsp);
  return st;
}

nr_status nr_ref_deform_conv_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 5);
  const nr_value *x = nr_op_in(ctx, 0);
  if (!st && x->dtype && !nr_dtype_is_float(x->dtype))
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "X has dtype %s, expected a float type",
                    nr_dtype_name(x->dtype));
  deform_job j;
  int rank;
  int64_t dims[NR_MAX_RANK];
  if (!st)
    st = deform_prepare(ctx, &j, &rank, dims);
  return st ? st : nr_op_set_output(ctx, 0, x->dtype, rank, dims);
}

/* X's plane (starting at base) sampled at a fractional position, zero outside. */
static double sample(const deform_job *j, int64_t base, const double *pos) {
  int nsp = j->win.nsp;
  double sum = 0;
  for (int corner = 0; corner < (1 << nsp); corner++) {
    double weight = 1;
    int64_t idx = 0;
    bool inside = true;
    for (int d = 0; d < nsp; d++) {
      double f = floor(pos[d]);
      int64_t c = (int64_t)f + ((corner >> d) & 1);
      weight *= 1 - fabs(pos[d] - (double)c);
      inside = inside && c >= 0 && c < j->win.in[d];
      idx = idx * j->win.in[d] + c;
    }
    if (inside && weight != 0)
      sum += weight * nr_load_f64(j->x->dtype, j->x->data, base + idx);
  }
  return sum;
}

/* One output element: output channel m at output position o of image n. */
static double deform_point(const deform_job *j, int64_t n, int64_t m, const int64_t *o,
                           int64_t o_flat) {
  const nr_window *w = &j->win;
  int nsp = w->nsp;
  int64_t cg = j->in_c / j->group, per_og = j->in_c / j->offset_group;
  int64_t first = (m / (j->out_c / j->group)) * cg;
  double acc = j->bias ? nr_load_f64(j->bias->dtype, j->bias->data, m) : 0;
  for (int64_t ci = 0; ci < cg; ci++) {
    int64_t c = first + ci, og = c / per_og, k[NR_MAX_RANK] = {0}, kf = 0;
    do {
      double pos[NR_MAX_RANK];
      int64_t tap = og * j->ksize + kf; /* (offset group, kernel tap) */
      for (int d = 0; d < nsp; d++) {
        int64_t oi =
            ((n * j->offset_group * j->ksize + tap) * nsp + d) * j->out_size + o_flat;
        pos[d] = (double)(o[d] * w->stride[d] - w->pad_b[d] + k[d] * w->dil[d]) +
                 nr_load_f64(j->offset->dtype, j->offset->data, oi);
      }
      double mk =
          j->mask
              ? nr_load_f64(j->mask->dtype, j->mask->data,
                            (n * j->offset_group * j->ksize + tap) * j->out_size + o_flat)
              : 1;
      double wv = nr_load_f64(j->w->dtype, j->w->data, (m * cg + ci) * j->ksize + kf);
      acc += wv * mk * sample(j, (n * j->in_c + c) * j->in_size, pos);
      kf++;
    } while (nr_index_next(nsp, w->kernel, k));
  }
  return acc;
}

nr_status nr_ref_deform_conv_run(nr_op_ctx *ctx) {
  deform_job j;
  int rank;
  int64_t dims[NR_MAX_RANK];
  nr_status st = deform_prepare(ctx, &j, &rank, dims);
  if (st)
    return st;
  nr_value *y = nr_op_out(ctx, 0);
  int64_t i = 0;
  for (int64_t n = 0; n < j.batch; n++)
    for (int64_t m = 0; m < j.out_c; m++) {
      int64_t o[NR_MAX_RANK] = {0}, of = 0;
      do
        nr_store_f64(y->dtype, y->data, i++, deform_point(&j, n, m, o, of++));
      while (nr_index_next(j.win.nsp, j.win.out, o));
    }
  return NR_OK;
}

/* ---- CausalConvWithState -------------------------------------------------------- */

enum { CC_INPUT, CC_WEIGHT, CC_BIAS, CC_PAST };

static nr_status causal_check(nr_op_ctx *ctx, bool *silu) {
  const char *act = nr_attr_string(ctx->node, "activation", "none");
  *silu = !strcmp(act, "silu") || !strcmp(act, "swish");
  if (!*silu && strcmp(act, "none"))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown activation '%s'", act);
  const nr_value *x = nr_op_in(ctx, CC_INPUT), *w = nr_op_in(ctx, CC_WEIGHT);
  const nr_value *b = nr_op_in(ctx, CC_BIAS), *past = nr_op_in(ctx, CC_PAST);
  if (x->dtype && !nr_dtype_is_float(x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input has dtype %s, expected a float type",
                      nr_dtype_name(x->dtype));
  if ((x->rank >= 0 && x->rank != 3) || (w->rank >= 0 && w->rank != 3))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input and weight must be rank 3");
  if (x->rank < 0 || w->rank < 0)
    return NR_OK;
  int64_t c = x->dims[1], k = w->dims[2];
  bool ok =
      (c < 0 || w->dims[0] < 0 || w->dims[0] == c) && (w->dims[1] < 0 || w->dims[1] == 1);
  if (b && b->rank >= 0)
    ok = ok && b->rank == 1 && (b->dims[0] < 0 || c < 0 || b->dims[0] == c);
  if (past && past->rank >= 0)
    ok = ok && past->rank == 3 && (past->dims[2] < 0 || k < 0 || past->dims[2] == k - 1) &&
         (past->dims[0] < 0 || x->dims[0] < 0 || past->dims[0] == x->dims[0]) &&
         (past->dims[1] < 0 || c < 0 || past->dims[1] == c);
  if (!ok || k == 0)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "weight must be [C, 1, k>=1] with C = input's "
                      "channels, bias [C], past_state [N, C, k-1]");
  return NR_OK;
}

nr_status nr_ref_causal_conv_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 4);
  bool silu;
  if (!st)
    st = causal_check(ctx, &silu);
  const nr_value *x = nr_op_in(ctx, CC_INPUT), *w = nr_op_in(ctx, CC_WEIGHT);
  if (st || x->rank < 0)
    return st ? st : nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  int64_t k = w->rank < 0 ? NR_DIM_UNKNOWN : w->dims[2];
  int64_t state[3] = {x->dims[0], x->dims[1], k < 0 ? k : k - 1};
  st = nr_op_set_output(ctx, 0, x->dtype, 3, x->dims);
  return st ? st : nr_op_set_output(ctx, 1, x->dtype, 3, state);
}

/* Element t of the padded sequence [past_state (k-1), input (len)] of plane (n, c). */
static double causal_padded(nr_op_ctx *ctx, int64_t plane, int64_t t, int64_t k,
                            int64_t len) {
  const nr_value *x = nr_op_in(ctx, CC_INPUT), *past = nr_op_in(ctx, CC_PAST);
  if (t >= k - 1)
    return nr_load_f64(x->dtype, x->data, plane * len + t - (k - 1));
  return past ? nr_load_f64(past->dtype, past->data, plane * (k - 1) + t) : 0;
}

/* Rounds v to dtype t (the reference rounds the conv result before the SiLU). */
static double round_to(nr_dtype t, double v) {
  uint8_t tmp[8];
  nr_store_f64(t, tmp, 0, v);
  return nr_load_f64(t, tmp, 0);
}

nr_status nr_ref_causal_conv_run(nr_op_ctx *ctx) {
  bool silu;
  nr_status st = causal_check(ctx, &silu);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, CC_INPUT), *w = nr_op_in(ctx, CC_WEIGHT);
  const nr_value *b = nr_op_in(ctx, CC_BIAS);
  nr_value *y = nr_op_out(ctx, 0), *state = nr_op_out(ctx, 1);
  int64_t channels = x->dims[1], len = x->dims[2], k = w->dims[2];
  for (int64_t plane = 0; plane < x->dims[0] * channels; plane++) {
    int64_t c = plane % channels;
    for (int64_t t = 0; t < len; t++) {
      double acc = b ? nr_load_f64(b->dtype, b->data, c) : 0;
      for (int64_t i = 0; i < k; i++)
        acc += nr_load_f64(w->dtype, w->data, c * k + i) *
               causal_padded(ctx, plane, t + i, k, len);
      if (silu) {
        acc = round_to(y->dtype, acc);
        acc = acc / (1 + exp(-acc));
      }
      nr_store_f64(y->dtype, y->data, plane * len + t, acc);
    }
    for (int64_t i = 0; state && i < k - 1; i++)
      nr_store_f64(state->dtype, state->data, plane * (k - 1) + i,
                   causal_padded(ctx, plane, len + i, k, len));
  }
  return NR_OK;
}
