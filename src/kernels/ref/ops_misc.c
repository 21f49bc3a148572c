/* ops_misc.c - the table of the reference "misc" operator family, and its loss
 * operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. The other
 * operators of the family live in ops_misc_<group>.c and reach the table through
 * misc.h.
 *
 * Both losses share one kernel: SoftmaxCrossEntropyLoss is log-softmax over the class
 * axis followed by NegativeLogLikelihoodLoss. Each element gets a weight w (the
 * class weight, or 1; 0 where the label is ignore_index); "mean" divides the weighted
 * sum by the sum of w, which is the plain mean when there are no weights and nothing
 * is ignored. Everything is computed in double and rounded once on store. */
#include "kernels/ref/misc.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers shared by the family ----------------------------------------------- */

nr_status nr_misc_need_float(nr_op_ctx *ctx, int i, const char *what) {
  const nr_value *v = nr_op_in(ctx, i);
  if (v && v->dtype && !nr_dtype_is_float(v->dtype))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must be a float tensor, got %s", what,
                      nr_dtype_name(v->dtype));
  return NR_OK;
}

int64_t nr_misc_prod(const int64_t *dims, int from, int to) {
  int64_t p = 1;
  for (int d = from; d < to; d++)
    p *= dims[d];
  return p;
}

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ------------------------- */

typedef enum loss_reduction { LR_NONE, LR_SUM, LR_MEAN } loss_reduction;

static nr_status loss_reduction_of(nr_op_ctx *ctx, loss_reduction *r) {
  const char *s = nr_attr_string(ctx->node, "reduction", "mean");
  if (!strcmp(s, "none"))
    *r = LR_NONE;
  else if (!strcmp(s, "sum"))
    *r = LR_SUM;
  else if (!strcmp(s, "mean"))
    *r = LR_MEAN;
  else
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown reduction '%s'", s);
  return NR_OK;
}

/* X is [N, C, d1..dk], target [N, d1..dk] of int32/int64, weight [C]. */
static nr_status loss_check_shapes(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *t = nr_op_in(ctx, 1), *w = nr_op_in(ctx, 2);
  if (t->dtype && t->dtype != NR_DTYPE_INT32 && t->dtype != NR_DTYPE_INT64)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "target must be int32 or int64, got %s",
                      nr_dtype_name(t->dtype));
  if (w && w->dtype && x->dtype && w->dtype != x->dtype)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "weight dtype differs from the input's");
  if (x->rank >= 0 && x->rank < 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "input must be N x C x ..., got rank %d", x->rank);
  if (w && w->rank >= 0 && w->rank != 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "weight must be 1-D, got rank %d", w->rank);
  if (x->rank < 0 || t->rank < 0)
    return NR_OK;
  if (t->rank != x->rank - 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "target rank %d does not fit input rank %d",
                      t->rank, x->rank);
  for (int d = 0; d < t->rank; d++) {
    int64_t a = t->dims[d], b = x->dims[d ? d + 1 : 0];
    if (a >= 0 && b >= 0 && a != b)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "target dim %d is %lld, input has %lld", d,
                        (long long)a, (long long)b);
  }
  if (w && w->rank == 1 && w->dims[0] >= 0 && x->dims[1] >= 0 && w->dims[0] != x->dims[1])
    return nr_op_fail(ctx, NR_ERR_SHAPE, "weight has %lld entries for %lld classes",
                      (long long)w->dims[0], (long long)x->dims[1]);
  return NR_OK;
}

static nr_status loss_infer(nr_op_ctx *ctx) {
  loss_reduction r = 0;
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  if (!st)
    st = nr_misc_need_float(ctx, 0, "input");
  if (!st)
    st = loss_reduction_of(ctx, &r);
  if (!st)
    st = loss_check_shapes(ctx);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *t = nr_op_in(ctx, 1);
  if (r != LR_NONE)
    st = nr_op_set_output(ctx, 0, x->dtype, 0, NULL);
  else
    st = nr_op_set_output(ctx, 0, x->dtype, t->rank, t->dims);
  return st ? st : nr_op_same_as_input(ctx, 1, 0); /* SCE's log_prob */
}

/* In-place log-softmax over the class axis of lp ([N, C, D] in C order). */
static void log_softmax_classes(double *lp, int64_t n, int64_t c, int64_t d) {
  for (int64_t i = 0; i < n; i++) {
    for (int64_t k = 0; k < d; k++) {
      double *p = lp + i * c * d + k, m = -INFINITY, s = 0;
      for (int64_t j = 0; j < c; j++)
        m = p[j * d] > m ? p[j * d] : m;
      for (int64_t j = 0; j < c; j++)
        s += exp(p[j * d] - m);
      for (int64_t j = 0; j < c; j++)
        p[j * d] = p[j * d] - m - log(s);
    }
  }
}

/* The NLL over lp ([N, C, D]); writes per-element losses to out (none) or the
 * reduced scalar. */
static nr_status nll_core(nr_op_ctx *ctx, const double *lp, int64_t n, int64_t c,
                          int64_t d, loss_reduction r) {
  const nr_value *t = nr_op_in(ctx, 1), *w = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  const nr_attr *ia = nr_node_attr(ctx->node, "ignore_index");
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < n * d; i++) {
    int64_t label = nr_load_i64(t->dtype, t->data, i), b = i / d, k = i % d;
    double loss = 0, wt = 0;
    if (!(ia && label == ia->i)) {
      if (label < 0 || label >= c)
        return nr_op_fail(ctx, NR_ERR_RUNTIME, "target %lld is outside [0, %lld)",
                          (long long)label, (long long)c);
      wt = w ? nr_load_f64(w->dtype, w->data, label) : 1.0;
      loss = -lp[(b * c + label) * d + k] * wt;
    }
    if (r == LR_NONE)
      nr_store_f64(y->dtype, y->data, i, loss);
    sum += loss;
    wsum += wt;
  }
  if (r != LR_NONE)
    nr_store_f64(y->dtype, y->data, 0, r == LR_SUM ? sum : sum / wsum);
  return NR_OK;
}

static nr_status loss_run(nr_op_ctx *ctx, bool softmax) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *lp_out = nr_op_out(ctx, 1);
  loss_reduction r = 0;
  nr_status st = loss_reduction_of(ctx, &r);
  if (st)
    return st;
  int64_t n = x->dims[0], c = x->dims[1], d = nr_misc_prod(x->dims, 2, x->rank);
  int64_t count = n * c * d;
  double *lp = malloc(sizeof(double) * (size_t)(count ? count : 1));
  if (!lp)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < count; i++)
    lp[i] = nr_load_f64(x->dtype, x->data, i);
  if (softmax)
    log_softmax_classes(lp, n, c, d);
  for (int64_t i = 0; softmax && lp_out && i < count; i++)
    nr_store_f64(lp_out->dtype, lp_out->data, i, lp[i]);
  st = nll_core(ctx, lp, n, c, d, r);
  free(lp);
  return st;
}

static nr_status run_nll(nr_op_ctx *ctx) { return loss_run(ctx, false); }
static nr_status run_sce(nr_op_ctx *ctx) { return loss_run(ctx, true); }

/* ---- the table -------------------------------------------------------------------- */

const nr_op_def nr_ref_ops_misc[] = {
    {"", "NegativeLogLikelihoodLoss", 12, loss_infer, run_nll, 0},
    {"", "SoftmaxCrossEntropyLoss", 12, loss_infer, run_sce, 0},
    {"", "GridSample", 16, nr_misc_gridsample_infer, nr_misc_gridsample_run, 0},
    {"", "AffineGrid", 20, nr_misc_affinegrid_infer, nr_misc_affinegrid_run, 0},
    {"", "RotaryEmbedding", 23, nr_misc_rotary_infer, nr_misc_rotary_run, 0},
    {"", "HannWindow", 17, nr_misc_window_infer, nr_misc_hann_run, 0},
    {"", "HammingWindow", 17, nr_misc_window_infer, nr_misc_hamming_run, 0},
    {"", "BlackmanWindow", 17, nr_misc_window_infer, nr_misc_blackman_run, 0},
    {"", "CenterCropPad", 18, nr_misc_ccp_infer, nr_misc_ccp_run, 0},
    {"", "BitCast", 26, nr_misc_bitcast_infer, nr_misc_bitcast_run, 0},
    {"", "Det", 11, nr_misc_det_infer, nr_misc_det_run, 0},
    {"", "NonMaxSuppression", 10, nr_misc_nms_infer, nr_misc_nms_run,
     NR_OP_ALLOCATES_OUTPUTS},
    {"", "SwiGLU", 28, nr_misc_swiglu_infer, nr_misc_swiglu_run, 0},
    {"", "Col2Im", 18, nr_misc_col2im_infer, nr_misc_col2im_run, 0},
    {"", "TensorScatter", 24, nr_misc_tensorscatter_infer, nr_misc_tensorscatter_run, 0},
    {0},
};
