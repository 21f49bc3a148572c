/* ops_norm.c - reference normalization and softmax operators: Softmax, LogSoftmax,
 * Hardmax, LayerNormalization, RMSNormalization, BatchNormalization,
 * InstanceNormalization, GroupNormalization, MeanVarianceNormalization,
 * LpNormalization and LRN (Attention's rows join this table from ops_attention.c).
 *
 * Every operator here is "gather a lane into doubles, normalize it, scatter it back"
 * (see normreduce.h): statistics are always computed in double, which is at least as
 * precise as any stash_type, and results are rounded once into the output dtype.
 * Variance is computed two-pass, as E[(x - mean)^2], which never goes negative. */
#include "kernels/ref/normreduce.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared checks -------------------------------------------------------------- */

/* Arity plus "input 0 is a float tensor"; output 0 gets input 0's description. */
static nr_status float_unary_infer(nr_op_ctx *ctx, int min_in, int max_in) {
  nr_status st = nr_op_check_arity(ctx, min_in, max_in);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype && !nr_dtype_is_float(x->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "needs a float input, got %s",
                      nr_dtype_name(x->dtype));
  return nr_op_same_as_input(ctx, 0, 0);
}

/* Input i, when present, must be a float tensor of `count` elements (if known). */
static nr_status check_param(nr_op_ctx *ctx, int i, const char *what, int64_t count) {
  const nr_value *p = nr_op_in(ctx, i);
  if (!p)
    return NR_OK;
  if (p->dtype && !nr_dtype_is_float(p->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must be float, got %s", what,
                      nr_dtype_name(p->dtype));
  int64_t have = nr_value_count(p);
  if (count >= 0 && have >= 0 && have != count)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s has %lld elements, expected %lld", what,
                      (long long)have, (long long)count);
  return NR_OK;
}

/* Input i as count doubles (NULL input: `dflt` everywhere). */
static double *load_param(nr_op_ctx *ctx, int i, int64_t count, double dflt) {
  const nr_value *p = nr_op_in(ctx, i);
  double *out = nr_ref_scratch(ctx, count);
  for (int64_t j = 0; out && j < count; j++)
    out[j] = p ? nr_load_f64(p->dtype, p->data, j) : dflt;
  return out;
}

/* ---- Softmax, LogSoftmax, Hardmax ----------------------------------------------- */

typedef enum soft_kind { SK_SOFTMAX, SK_LOGSOFTMAX, SK_HARDMAX } soft_kind;

/* Lanes of the softmax family. Before opset 13 the input is coerced to 2-D at axis
 * (default 1) and a lane is a whole row of that matrix; from 13 a lane runs along the
 * single axis (default -1). */
static nr_status soft_layout(nr_op_ctx *ctx, const nr_value *x, int64_t *outer,
                             int64_t *n, int64_t *inner) {
  bool coerce = ctx->node->opset < 13;
  int axis;
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", coerce ? 1 : -1),
                            x->rank, &axis);
  if (st || x->rank < 0)
    return st;
  *outer = nr_ref_dims_prod(x->dims, 0, axis);
  *n = coerce ? nr_ref_dims_prod(x->dims, axis, x->rank)
              : (x->rank ? x->dims[axis] : 1);
  *inner = coerce ? 1 : nr_ref_dims_prod(x->dims, axis + 1, x->rank);
  return NR_OK;
}

static nr_status soft_infer(nr_op_ctx *ctx) {
  nr_status st = float_unary_infer(ctx, 1, 1);
  int64_t outer, n, inner;
  if (st || nr_op_in(ctx, 0)->rank < 0)
    return st;
  return soft_layout(ctx, nr_op_in(ctx, 0), &outer, &n, &inner);
}

static void soft_lane(double *v, int64_t n, soft_kind k) {
  if (k == SK_HARDMAX) {
    int64_t best = nr_ref_arg_best_f64(v, n, true, false);
    for (int64_t j = 0; j < n; j++)
      v[j] = j == best;
    return;
  }
  double m = -INFINITY, s = 0;
  for (int64_t j = 0; j < n; j++)
    m = v[j] > m ? v[j] : m;
  for (int64_t j = 0; j < n; j++)
    s += exp(v[j] - m);
  for (int64_t j = 0; j < n; j++)
    v[j] = k == SK_SOFTMAX ? exp(v[j] - m) / s : v[j] - m - log(s);
}

static nr_status soft_run(nr_op_ctx *ctx, soft_kind k) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t outer, n, inner;
  nr_status st = soft_layout(ctx, x, &outer, &n, &inner);
  if (st)
    return st;
  double *v = nr_ref_scratch(ctx, n);
  if (!v)
    return NR_ERR_NOMEM;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i;
      nr_ref_gather_f64(x, base, inner, n, v);
      soft_lane(v, n, k);
      nr_ref_scatter_f64(y, base, inner, n, v);
    }
  }
  free(v);
  return NR_OK;
}

static nr_status run_softmax(nr_op_ctx *ctx) { return soft_run(ctx, SK_SOFTMAX); }
static nr_status run_logsoftmax(nr_op_ctx *ctx) { return soft_run(ctx, SK_LOGSOFTMAX); }
static nr_status run_hardmax(nr_op_ctx *ctx) { return soft_run(ctx, SK_HARDMAX); }

/* ---- LayerNormalization, RMSNormalization --------------------------------------- */

/* True when p broadcasts unidirectionally to (rank, dims). */
static bool broadcasts_to(const nr_value *p, int rank, const int64_t *dims) {
  if (p->rank > rank)
    return false;
  for (int d = 0; d < p->rank; d++) {
    int64_t pd = p->dims[p->rank - 1 - d], td = dims[rank - 1 - d];
    if (pd != 1 && pd != td && pd >= 0 && td >= 0)
      return false;
  }
  return true;
}

/* p broadcast to (rank, dims), as doubles. */
static double *expand_param(nr_op_ctx *ctx, const nr_value *p, int rank,
                            const int64_t *dims) {
  nr_value t = {.dtype = p->dtype, .rank = rank};
  memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
  int64_t count = nr_ref_dims_prod(dims, 0, rank);
  double *out = nr_ref_scratch(ctx, count);
  nr_bcast it;
  nr_bcast_init(&it, &t, 1, (const nr_value *[]){p});
  for (int64_t i = 0; out && i < count; i++, nr_bcast_next(&it))
    out[i] = nr_load_f64(p->dtype, p->data, it.off[0]);
  return out;
}

/* A row-norm parameter: expanded over one row when it does not vary across rows
 * (then *whole is false), else over the whole input. */
static double *row_param(nr_op_ctx *ctx, int i, const nr_value *x, int axis,
                         bool *whole) {
  const nr_value *p = nr_op_in(ctx, i);
  *whole = false;
  int lead = p->rank - (x->rank - axis);
  for (int d = 0; d < lead; d++)
    if (p->dims[d] != 1)
      *whole = true;
  if (*whole)
    return expand_param(ctx, p, x->rank, x->dims);
  return expand_param(ctx, p, x->rank - axis, x->dims + axis);
}

static nr_status row_norm_infer(nr_op_ctx *ctx, bool rms) {
  nr_status st = float_unary_infer(ctx, 2, rms ? 2 : 3);
  const nr_value *x = nr_op_in(ctx, 0);
  if (st || x->rank < 0)
    return st;
  int axis;
  if ((st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), x->rank, &axis)))
    return st;
  for (int i = 1; i < (rms ? 2 : 3); i++) {
    const nr_value *p = nr_op_in(ctx, i);
    if ((st = check_param(ctx, i, i == 1 ? "Scale" : "B", -1)))
      return st;
    if (p && p->rank >= 0 && !broadcasts_to(p, x->rank, x->dims))
      return nr_op_fail(ctx, NR_ERR_SHAPE, "%s does not broadcast to X",
                        i == 1 ? "Scale" : "B");
  }
  if (rms) { /* Y takes the type of scale (V) */
    nr_dtype v = nr_op_in(ctx, 1)->dtype;
    return nr_op_set_output(ctx, 0, v ? v : x->dtype, x->rank, x->dims);
  }
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    dims[d] = d < axis ? x->dims[d] : 1;
  nr_dtype u = (nr_dtype)nr_attr_int(ctx->node, "stash_type", NR_DTYPE_FLOAT);
  u = nr_dtype_is_float(u) ? u : NR_DTYPE_FLOAT;
  if ((st = nr_op_set_output(ctx, 1, u, x->rank, dims)))
    return st;
  return nr_op_set_output(ctx, 2, u, x->rank, dims);
}

static nr_status infer_layernorm(nr_op_ctx *ctx) { return row_norm_infer(ctx, false); }
static nr_status infer_rmsnorm(nr_op_ctx *ctx) { return row_norm_infer(ctx, true); }

/* Normalizes one row in place; returns its mean (0 for RMS) and 1/stddev. */
static void norm_row(double *v, int64_t n, double eps, bool rms, double *mean,
                     double *inv) {
  double m = 0, var = 0;
  for (int64_t j = 0; j < n && !rms; j++)
    m += v[j];
  m = rms ? 0 : m / (double)n;
  for (int64_t j = 0; j < n; j++)
    var += (v[j] - m) * (v[j] - m);
  double is = 1.0 / sqrt(var / (double)n + eps);
  for (int64_t j = 0; j < n; j++)
    v[j] = (v[j] - m) * is;
  *mean = m;
  *inv = is;
}

static nr_status row_norm_run(nr_op_ctx *ctx, bool rms) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0), *mo = nr_op_out(ctx, 1), *io = nr_op_out(ctx, 2);
  int axis;
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), x->rank, &axis);
  if (st)
    return st;
  double eps = nr_attr_float(ctx->node, "epsilon", 1e-5f);
  int64_t outer = nr_ref_dims_prod(x->dims, 0, axis);
  int64_t n = nr_ref_dims_prod(x->dims, axis, x->rank);
  bool sw = false, bw = false;
  const nr_value *bv = rms ? NULL : nr_op_in(ctx, 2);
  double *scale = row_param(ctx, 1, x, axis, &sw);
  double *bias = bv ? row_param(ctx, 2, x, axis, &bw) : NULL;
  double *v = nr_ref_scratch(ctx, n);
  if (!scale || (bv && !bias) || !v) {
    st = NR_ERR_NOMEM;
    goto done;
  }
  for (int64_t o = 0; o < outer; o++) {
    double mean, inv;
    const double *s = scale + (sw ? o * n : 0), *b = bias ? bias + (bw ? o * n : 0) : NULL;
    nr_ref_gather_f64(x, o * n, 1, n, v);
    norm_row(v, n, eps, rms, &mean, &inv);
    for (int64_t j = 0; j < n; j++)
      v[j] = v[j] * s[j] + (b ? b[j] : 0);
    nr_ref_scatter_f64(y, o * n, 1, n, v);
    if (mo)
      nr_store_f64(mo->dtype, mo->data, o, mean);
    if (io)
      nr_store_f64(io->dtype, io->data, o, inv);
  }
done:
  free(scale);
  free(bias);
  free(v);
  return st;
}

static nr_status run_layernorm(nr_op_ctx *ctx) { return row_norm_run(ctx, false); }
static nr_status run_rmsnorm(nr_op_ctx *ctx) { return row_norm_run(ctx, true); }

/* ---- BatchNormalization --------------------------------------------------------- */

/* Statistics per channel (count C) or, for spatial=0 before opset 9, per element of
 * a sample (count C*S). */
static int64_t bn_param_count(nr_op_ctx *ctx, const nr_value *x) {
  int64_t c = x->rank > 1 ? x->dims[1] : 1;
  if (ctx->node->opset < 9 && nr_attr_int(ctx->node, "spatial", 1) == 0)
    return c * nr_ref_dims_prod(x->dims, 2, x->rank);
  return c;
}

static bool bn_training(const nr_op_ctx *ctx) {
  return ctx->node->opset >= 14 && nr_attr_int(ctx->node, "training_mode", 0) != 0;
}

static nr_status infer_batchnorm(nr_op_ctx *ctx) {
  nr_status st = float_unary_infer(ctx, 5, 5);
  const nr_value *x = nr_op_in(ctx, 0);
  static const char *names[] = {"X", "scale", "B", "mean", "var"};
  if (st || x->rank < 0)
    return st;
  if (x->rank < 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must have rank >= 1");
  int64_t count = nr_value_shape_known(x) ? bn_param_count(ctx, x) : -1;
  for (int i = 1; i < 5; i++)
    if ((st = check_param(ctx, i, names[i], count)))
      return st;
  for (int i = 1; i < ctx->n_outputs; i++) {
    if (!nr_op_out(ctx, i))
      continue;
    if (!bn_training(ctx))
      return nr_op_fail(ctx, NR_ERR_UNSUPPORTED,
                        "training outputs (output %d) are only supported with "
                        "training_mode=1 at opset >= 14", i);
    const nr_value *src = nr_op_in(ctx, i == 1 ? 3 : 4);
    if ((st = nr_op_set_output(ctx, i, src->dtype, src->rank, src->dims)))
      return st;
  }
  return NR_OK;
}

/* Batch mean and population variance per channel (training mode). */
static void bn_batch_stats(const nr_value *x, int64_t nb, int64_t c, int64_t s,
                           double *mean, double *var, double *lane) {
  for (int64_t ch = 0; ch < c; ch++) {
    double m = 0, v = 0;
    for (int64_t b = 0; b < nb; b++) {
      nr_ref_gather_f64(x, (b * c + ch) * s, 1, s, lane);
      for (int64_t j = 0; j < s; j++)
        m += lane[j];
    }
    m /= (double)(nb * s);
    for (int64_t b = 0; b < nb; b++) {
      nr_ref_gather_f64(x, (b * c + ch) * s, 1, s, lane);
      for (int64_t j = 0; j < s; j++)
        v += (lane[j] - m) * (lane[j] - m);
    }
    mean[ch] = m;
    var[ch] = v / (double)(nb * s);
  }
}

static void bn_store_running(nr_op_ctx *ctx, const double *in_mean, const double *in_var,
                             const double *mean, const double *var, int64_t c) {
  double mom = nr_attr_float(ctx->node, "momentum", 0.9f);
  nr_value *rm = nr_op_out(ctx, 1), *rv = nr_op_out(ctx, 2);
  for (int64_t ch = 0; ch < c; ch++) {
    if (rm)
      nr_store_f64(rm->dtype, rm->data, ch, in_mean[ch] * mom + mean[ch] * (1 - mom));
    if (rv)
      nr_store_f64(rv->dtype, rv->data, ch, in_var[ch] * mom + var[ch] * (1 - mom));
  }
}

static void bn_apply(const nr_value *x, nr_value *y, int64_t nb, int64_t c, int64_t s,
                     const double *const *p, bool per_elem, double eps, double *lane) {
  for (int64_t b = 0; b < nb; b++) {
    for (int64_t ch = 0; ch < c; ch++) {
      int64_t base = (b * c + ch) * s;
      nr_ref_gather_f64(x, base, 1, s, lane);
      for (int64_t j = 0; j < s; j++) {
        int64_t q = per_elem ? ch * s + j : ch;
        lane[j] = (lane[j] - p[2][q]) * (p[0][q] / sqrt(p[3][q] + eps)) + p[1][q];
      }
      nr_ref_scatter_f64(y, base, 1, s, lane);
    }
  }
}

static nr_status run_batchnorm(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  int64_t nb = x->dims[0], c = x->rank > 1 ? x->dims[1] : 1;
  int64_t s = nr_ref_dims_prod(x->dims, 2, x->rank), count = bn_param_count(ctx, x);
  double *p[4] = {0}, *stats[2] = {0};
  double *lane = nr_ref_scratch(ctx, s);
  nr_status st = NR_ERR_NOMEM;
  for (int i = 0; i < 4; i++)
    if (!(p[i] = load_param(ctx, i + 1, count, 0)))
      goto done;
  if (!lane)
    goto done;
  double eps = nr_attr_float(ctx->node, "epsilon", 1e-5f);
  if (bn_training(ctx)) {
    if (!(stats[0] = nr_ref_scratch(ctx, c)) || !(stats[1] = nr_ref_scratch(ctx, c)))
      goto done;
    bn_batch_stats(x, nb, c, s, stats[0], stats[1], lane);
    bn_store_running(ctx, p[2], p[3], stats[0], stats[1], c);
    memcpy(p[2], stats[0], sizeof(double) * (size_t)c);
    memcpy(p[3], stats[1], sizeof(double) * (size_t)c);
  }
  bn_apply(x, nr_op_out(ctx, 0), nb, c, s, (const double *const *)p, count != c, eps,
           lane);
  st = NR_OK;
done:
  for (int i = 0; i < 4; i++)
    free(p[i]);
  free(stats[0]);
  free(stats[1]);
  free(lane);
  return st;
}

/* ---- InstanceNormalization, GroupNormalization ---------------------------------- */

/* Normalizes each (sample, group) lane of an N x C x ... input over its C/G channels
 * and spatial extent, then applies scale/bias per channel or per group. */
static nr_status group_norm(nr_op_ctx *ctx, int64_t groups, bool per_channel) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t nb = x->dims[0], c = x->dims[1], s = nr_ref_dims_prod(x->dims, 2, x->rank);
  int64_t cpg = c / groups, n = cpg * s, pc = per_channel ? c : groups;
  double eps = nr_attr_float(ctx->node, "epsilon", 1e-5f), mean, inv;
  double *scale = load_param(ctx, 1, pc, 1), *bias = load_param(ctx, 2, pc, 0);
  double *v = nr_ref_scratch(ctx, n);
  nr_status st = (scale && bias && v) ? NR_OK : NR_ERR_NOMEM;
  for (int64_t b = 0; !st && b < nb; b++) {
    for (int64_t g = 0; g < groups; g++) {
      int64_t base = (b * groups + g) * n;
      nr_ref_gather_f64(x, base, 1, n, v);
      norm_row(v, n, eps, false, &mean, &inv);
      for (int64_t j = 0; j < n; j++) {
        int64_t q = per_channel ? g * cpg + j / s : g;
        v[j] = v[j] * scale[q] + bias[q];
      }
      nr_ref_scatter_f64(y, base, 1, n, v);
    }
  }
  free(scale);
  free(bias);
  free(v);
  return st;
}

static nr_status group_infer(nr_op_ctx *ctx, int64_t groups, bool per_channel) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_status st;
  if (x->rank >= 0 && x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must be N x C x ..., got rank %d", x->rank);
  int64_t c = x->rank >= 2 ? x->dims[1] : -1;
  if (groups <= 0 || (c >= 0 && c % groups))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "num_groups=%lld does not divide %lld channels",
                      (long long)groups, (long long)c);
  int64_t count = per_channel ? c : groups;
  if ((st = check_param(ctx, 1, "scale", count)))
    return st;
  return check_param(ctx, 2, "bias", count);
}

static nr_status infer_instnorm(nr_op_ctx *ctx) {
  nr_status st = float_unary_infer(ctx, 3, 3);
  const nr_value *x = nr_op_in(ctx, 0);
  if (st || x->rank < 0)
    return st;
  if (x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must be N x C x ..., got rank %d", x->rank);
  return group_infer(ctx, x->dims[1] < 0 ? 1 : x->dims[1], true);
}

static nr_status run_instnorm(nr_op_ctx *ctx) {
  return group_norm(ctx, nr_op_in(ctx, 0)->dims[1], true);
}

/* Opset 18 scales per group, opset 21 per channel. */
static nr_status infer_groupnorm(nr_op_ctx *ctx) {
  nr_status st = float_unary_infer(ctx, 3, 3);
  if (st || nr_op_in(ctx, 0)->rank < 0)
    return st;
  return group_infer(ctx, nr_attr_int(ctx->node, "num_groups", 0), ctx->node->opset >= 21);
}

static nr_status run_groupnorm(nr_op_ctx *ctx) {
  return group_norm(ctx, nr_attr_int(ctx->node, "num_groups", 0), ctx->node->opset >= 21);
}

/* ---- MeanVarianceNormalization ---------------------------------------------------- */

static nr_status mvn_axes(nr_op_ctx *ctx, int rank, bool *reduced) {
  static const int64_t dflt[] = {0, 2, 3};
  size_t n;
  const int64_t *axes = nr_attr_ints(ctx->node, "axes", &n);
  const nr_attr *a = nr_node_attr(ctx->node, "axes");
  if (!a) {
    axes = dflt;
    n = 3;
  }
  memset(reduced, 0, sizeof(bool) * NR_MAX_RANK);
  for (size_t i = 0; i < n; i++) {
    int d;
    nr_status st = nr_op_axis(ctx, axes[i], rank, &d);
    if (st)
      return st;
    reduced[d] = true;
  }
  return NR_OK;
}

static nr_status infer_mvn(nr_op_ctx *ctx) {
  bool reduced[NR_MAX_RANK];
  nr_status st = float_unary_infer(ctx, 1, 1);
  if (st || nr_op_in(ctx, 0)->rank < 0)
    return st;
  return mvn_axes(ctx, nr_op_in(ctx, 0)->rank, reduced);
}

static nr_status run_mvn(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  bool reduced[NR_MAX_RANK];
  nr_ref_rplan p;
  nr_status st = mvn_axes(ctx, x->rank, reduced);
  if (st || (st = nr_ref_rplan_init(&p, x->rank, x->dims, reduced, ctx->err)))
    return st;
  double *v = nr_ref_scratch(ctx, p.n_red);
  for (int64_t o = 0; v && o < p.n_out; o++) {
    int64_t base = nr_ref_rplan_base(&p, o);
    double m = 0, var = 0;
    nr_ref_gather_idx_f64(x, base, p.roff, p.n_red, v);
    for (int64_t j = 0; j < p.n_red; j++)
      m += v[j];
    m /= (double)p.n_red;
    for (int64_t j = 0; j < p.n_red; j++)
      var += (v[j] - m) * (v[j] - m);
    double sd = sqrt(var / (double)p.n_red) + 1e-9; /* as the ONNX function body */
    for (int64_t j = 0; j < p.n_red; j++)
      v[j] = (v[j] - m) / sd;
    nr_ref_scatter_idx_f64(nr_op_out(ctx, 0), base, p.roff, p.n_red, v);
  }
  st = v ? NR_OK : NR_ERR_NOMEM;
  free(v);
  nr_ref_rplan_free(&p);
  return st;
}

/* ---- LpNormalization, LRN --------------------------------------------------------- */

static nr_status infer_lpnorm(nr_op_ctx *ctx) {
  nr_status st = float_unary_infer(ctx, 1, 1);
  const nr_value *x = nr_op_in(ctx, 0);
  int axis;
  if (st || x->rank < 0)
    return st;
  if (nr_attr_int(ctx->node, "p", 2) <= 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "p must be positive (1 or 2)");
  return nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1), x->rank, &axis);
}

/* x / ||x||_p along the axis; an all-zero lane stays zero (as the reference). */
static void lp_lane(double *v, int64_t n, int64_t p) {
  double s = 0;
  for (int64_t j = 0; j < n; j++)
    s += p == 1 ? fabs(v[j]) : p == 2 ? v[j] * v[j] : pow(fabs(v[j]), (double)p);
  double norm = p == 1 ? s : p == 2 ? sqrt(s) : pow(s, 1.0 / (double)p);
  for (int64_t j = 0; j < n; j++)
    v[j] = norm == 0 ? 0 : v[j] / norm;
}

/* Applies fn to each lane along `axis` (outer x n x inner layout); fn gets the lane
 * and a scratch lane of the same length. */
static nr_status axis_lanes(nr_op_ctx *ctx, int axis,
                            void (*fn)(double *, double *, int64_t, nr_op_ctx *)) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t n = x->rank ? x->dims[axis] : 1;
  int64_t outer = nr_ref_dims_prod(x->dims, 0, axis);
  int64_t inner = nr_ref_dims_prod(x->dims, axis + 1, x->rank);
  double *v = nr_ref_scratch(ctx, 2 * n);
  if (!v)
    return NR_ERR_NOMEM;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t i = 0; i < inner; i++) {
      nr_ref_gather_f64(x, o * n * inner + i, inner, n, v);
      fn(v, v + n, n, ctx);
      nr_ref_scatter_f64(y, o * n * inner + i, inner, n, v);
    }
  }
  free(v);
  return NR_OK;
}

static void lp_fn(double *v, double *tmp, int64_t n, nr_op_ctx *ctx) {
  lp_lane(v, n, nr_attr_int(ctx->node, "p", 2));
}

static nr_status run_lpnorm(nr_op_ctx *ctx) {
  int axis;
  nr_status st = nr_op_axis(ctx, nr_attr_int(ctx->node, "axis", -1),
                            nr_op_in(ctx, 0)->rank, &axis);
  return st ? st : axis_lanes(ctx, axis, lp_fn);
}

static nr_status infer_lrn(nr_op_ctx *ctx) {
  nr_status st = float_unary_infer(ctx, 1, 1);
  const nr_value *x = nr_op_in(ctx, 0);
  if (st || x->rank < 0)
    return st;
  if (x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must be N x C x ..., got rank %d", x->rank);
  if (nr_attr_int(ctx->node, "size", 0) <= 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute size is missing or not positive");
  return NR_OK;
}

/* Cross-channel normalization of one lane along C. */
static void lrn_fn(double *v, double *sq, int64_t n, nr_op_ctx *ctx) {
  int64_t size = nr_attr_int(ctx->node, "size", 1);
  double alpha = nr_attr_float(ctx->node, "alpha", 1e-4f);
  double beta = nr_attr_float(ctx->node, "beta", 0.75f);
  double bias = nr_attr_float(ctx->node, "bias", 1.0f);
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* floor and ceil of (size-1)/2 */
  for (int64_t c = 0; c < n; c++) {
    sq[c] = 0;
    for (int64_t k = c - lo; k <= c + hi; k++)
      if (k >= 0 && k < n)
        sq[c] += v[k] * v[k];
  }
  for (int64_t c = 0; c < n; c++)
    v[c] = v[c] / pow(bias + alpha / (double)size * sq[c], beta);
}

static nr_status run_lrn(nr_op_ctx *ctx) { return axis_lanes(ctx, 1, lrn_fn); }

/* ---- the table -------------------------------------------------------------------- */

const nr_op_def nr_ref_ops_norm[] = {
    {"", "Softmax", 1, soft_infer, run_softmax, 0},
    {"", "LogSoftmax", 1, soft_infer, run_logsoftmax, 0},
    {"", "Hardmax", 1, soft_infer, run_hardmax, 0},
    {"", "LayerNormalization", 17, infer_layernorm, run_layernorm, 0},
    {"", "RMSNormalization", 23, infer_rmsnorm, run_rmsnorm, 0},
    {"", "BatchNormalization", 1, infer_batchnorm, run_batchnorm, 0},
    {"", "InstanceNormalization", 1, infer_instnorm, run_instnorm, 0},
    {"", "GroupNormalization", 18, infer_groupnorm, run_groupnorm, 0},
    {"", "MeanVarianceNormalization", 9, infer_mvn, run_mvn, 0},
    {"", "LpNormalization", 1, infer_lpnorm, run_lpnorm, 0},
    {"", "LRN", 1, infer_lrn, run_lrn, 0},
    NR_REF_ATTENTION_ROWS
    {0},
};
