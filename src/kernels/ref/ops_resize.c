/* ops_resize.c - reference Resize (opsets 10 to 19) and the deprecated Upsample.
 *
 * Resize is separable: every mode (nearest, n-linear, n-cubic, with or without
 * antialiasing) weights input samples along each axis independently, so the kernel
 * resizes one axis at a time in double precision. Along an axis each output index gets
 * a list of taps (input index, weight), built once from the coordinate transformation;
 * linear and cubic share one windowed-kernel tap builder where antialiasing only
 * stretches the kernel by 1/scale and widens the window. A shared plan (output sizes,
 * per-axis scales and roi) is computed by both infer() and run(), so the shape rule
 * and the kernel cannot disagree. */
#include "ir/op.h"
#include "kernels/ref/ref_util.h"
#include "kernels/ref/resize_rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MODE_NEAREST, MODE_LINEAR, MODE_CUBIC };
enum { KEEP_STRETCH, KEEP_NOT_LARGER, KEEP_NOT_SMALLER };

/* Attributes, decoded once. */
typedef struct resize_attrs {
  int mode, ctm, nearest, keep;
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
} resize_attrs;

/* What the node asks for, resolved against X's shape. */
typedef struct resize_plan {
  int rank;
  int n_axes;
  int axes[NR_MAX_RANK];       /* processing order */
  int64_t out[NR_MAX_RANK];    /* NR_DIM_UNKNOWN where not known statically */
  double scale[NR_MAX_RANK];
  double roi_lo[NR_MAX_RANK], roi_hi[NR_MAX_RANK];
} resize_plan;

/* One axis worth of taps: output j reads n taps idx[j*n + k] with weights w[...]. */
typedef struct axis_taps {
  int64_t n;
  int64_t *idx;
  double *w;
  bool *extrapolate;
} axis_taps;

/* ---- attributes ----------------------------------------------------------------- */

static int lookup(const char *s, const char *const *names, int count) {
  for (int i = 0; i < count; i++)
    if (!strcmp(s, names[i]))
      return i;
  return -1;
}

static nr_status pick(nr_op_ctx *ctx, const char *attr, const char *dflt,
                      const char *const *names, int count, int *out) {
  const char *s = nr_attr_string(ctx->node, attr, dflt);
  *out = lookup(s, names, count);
  if (*out < 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "%s '%s' is not a valid value", attr, s);
  return NR_OK;
}

static bool is_legacy(const nr_op_ctx *ctx) {
  return strcmp(ctx->node->op_type, "Resize") != 0 || ctx->node->opset < 11;
}

static nr_status read_attrs(nr_op_ctx *ctx, resize_attrs *a) {
  static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear"};
  static const char *const keep[] = {"stretch", "not_larger", "not_smaller"};
  nr_status st;
  bool legacy = is_legacy(ctx);
  if ((st = pick(ctx, "mode", "nearest", modes, legacy ? 4 : 3, &a->mode)))
    return st;
  if (a->mode == 3)
    a->mode = MODE_LINEAR; /* Upsample-1's "bilinear" */
  if (legacy && a->mode == MODE_CUBIC)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "mode 'cubic' needs Resize opset 11+");
  a->ctm = NR_RESIZE_CT_ASYMMETRIC;
  a->nearest = NR_RESIZE_NEAREST_LEGACY;
  a->keep = KEEP_STRETCH;
  a->cubic_a = nr_attr_float(ctx->node, "cubic_coeff_a", -0.75f);
  a->extrapolation = nr_attr_float(ctx->node, "extrapolation_value", 0.0f);
  a->exclude_outside = nr_attr_int(ctx->node, "exclude_outside", 0) != 0;
  a->antialias = nr_attr_int(ctx->node, "antialias", 0) != 0 && a->mode != MODE_NEAREST;
  if (legacy)
    return NR_OK;
  if ((st = pick(ctx, "coordinate_transformation_mode", "half_pixel", nr_resize_ctm_names,
                 NR_RESIZE_CT_COUNT, &a->ctm)))
    return st;
  if ((st = pick(ctx, "nearest_mode", "round_prefer_floor", nr_resize_nearest_names, 4,
                 &a->nearest)))
    return st;
  return pick(ctx, "keep_aspect_ratio_policy", "stretch", keep, 3, &a->keep);
}

/* ---- plan ----------------------------------------------------------------------- */

/* Input slots: (scales) for Upsample-9 / Resize-10; (roi, scales, sizes) from 11. */
static const nr_value *plan_input(const nr_op_ctx *ctx, const char *which) {
  if (is_legacy(ctx))
    return !strcmp(which, "scales") ? nr_op_in(ctx, 1) : NULL;
  int i = !strcmp(which, "roi") ? 1 : !strcmp(which, "scales") ? 2 : 3;
  const nr_value *v = nr_op_in(ctx, i);
  if (v && v->rank >= 0 && nr_value_count(v) == 0)
    return NULL; /* an empty tensor stands for an absent input */
  return v;
}

static nr_status plan_axes(nr_op_ctx *ctx, resize_plan *p) {
  size_t n = 0;
  const int64_t *axes = nr_attr_ints(ctx->node, "axes", &n);
  if (!axes) {
    p->n_axes = p->rank;
    for (int d = 0; d < p->rank; d++)
      p->axes[d] = d;
    return NR_OK;
  }
  if (n > (size_t)p->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "axes has %zu entries for rank %d", n, p->rank);
  p->n_axes = (int)n;
  for (size_t i = 0; i < n; i++) {
    nr_status st = nr_op_axis(ctx, axes[i], p->rank, &p->axes[i]);
    if (st)
      return st;
    for (size_t k = 0; k < i; k++)
      if (p->axes[k] == p->axes[i])
        return nr_op_fail(ctx, NR_ERR_SHAPE, "axis %d repeats in axes", p->axes[i]);
  }
  return NR_OK;
}

static nr_status plan_check_count(nr_op_ctx *ctx, const nr_value *v, const char *name,
                                  int64_t want) {
  if (v->rank >= 0 && v->rank != 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must be 1-D, got rank %d", name, v->rank);
  if (v->rank == 1 && v->dims[0] >= 0 && v->dims[0] != want)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s has %lld elements, expected %lld", name,
                      (long long)v->dims[0], (long long)want);
  return NR_OK;
}

static nr_status plan_from_scales(nr_op_ctx *ctx, const nr_value *x, const double *s,
                                  resize_plan *p) {
  for (int i = 0; i < p->n_axes; i++) {
    int d = p->axes[i];
    if (!(s[i] > 0) || !isfinite(s[i]))
      return nr_op_fail(ctx, NR_ERR_SHAPE, "scale %g for axis %d is not positive", s[i], d);
    if (x->dims[d] > 0 && (double)x->dims[d] * s[i] > 0x1p40)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "scale %g makes axis %d absurdly large", s[i], d);
    p->scale[d] = s[i];
    p->out[d] = x->dims[d] < 0 ? NR_DIM_UNKNOWN
                               : (int64_t)floor((double)x->dims[d] * s[i]);
  }
  return NR_OK;
}

static nr_status plan_from_sizes(nr_op_ctx *ctx, const nr_value *x, const nr_value *sz,
                                 int keep, resize_plan *p) {
  double best = 0;
  for (int i = 0; i < p->n_axes; i++) {
    int d = p->axes[i];
    int64_t want = nr_value_get_i64(sz, i);
    if (want < 0)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "size %lld for axis %d is negative",
                        (long long)want, d);
    if (x->dims[d] <= 0) {
      p->out[d] = x->dims[d] < 0 ? NR_DIM_UNKNOWN : want;
      p->scale[d] = 1.0;
      continue;
    }
    p->out[d] = want;
    p->scale[d] = (double)want / (double)x->dims[d];
    if (i == 0 || (keep == KEEP_NOT_LARGER ? p->scale[d] < best : p->scale[d] > best))
      best = p->scale[d];
  }
  if (keep == KEEP_STRETCH)
    return NR_OK;
  for (int i = 0; i < p->n_axes; i++) {
    int d = p->axes[i];
    p->scale[d] = best;
    p->out[d] = x->dims[d] < 0 ? NR_DIM_UNKNOWN
                               : (int64_t)(best * (double)x->dims[d] + 0.5);
  }
  return NR_OK;
}

static nr_status plan_roi(nr_op_ctx *ctx, const resize_attrs *a, resize_plan *p) {
  const nr_value *roi = plan_input(ctx, "roi");
  if (a->ctm != NR_RESIZE_CT_TF_CROP_AND_RESIZE || !roi || !roi->data)
    return NR_OK;
  nr_status st = plan_check_count(ctx, roi, "roi", 2 * (int64_t)p->n_axes);
  if (st)
    return st;
  for (int i = 0; i < p->n_axes; i++) {
    p->roi_lo[p->axes[i]] = nr_value_get_f64(roi, i);
    p->roi_hi[p->axes[i]] = nr_value_get_f64(roi, p->n_axes + i);
  }
  return NR_OK;
}

/* The scales of Upsample-7 live in an attribute; everything else reads inputs. */
static nr_status plan_scales_attr(nr_op_ctx *ctx, const nr_value *x, resize_plan *p) {
  size_t n = 0;
  const float *f = nr_attr_floats(ctx->node, "scales", &n);
  if (!f || n != (size_t)p->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "attribute scales needs %d values, has %zu",
                      p->rank, n);
  double s[NR_MAX_RANK];
  for (size_t i = 0; i < n; i++)
    s[i] = f[i];
  return plan_from_scales(ctx, x, s, p);
}

static nr_status plan_scales_input(nr_op_ctx *ctx, const nr_value *x,
                                   const nr_value *sc, resize_plan *p) {
  nr_status st = plan_check_count(ctx, sc, "scales", p->n_axes);
  if (st || !sc->data)
    return st;
  double s[NR_MAX_RANK];
  for (int i = 0; i < p->n_axes; i++)
    s[i] = nr_value_get_f64(sc, i);
  return plan_from_scales(ctx, x, s, p);
}

static nr_status plan_make(nr_op_ctx *ctx, const resize_attrs *a, resize_plan *p) {
  const nr_value *x = nr_op_in(ctx, 0);
  memset(p, 0, sizeof *p);
  p->rank = x->rank;
  for (int d = 0; d < x->rank; d++) {
    p->out[d] = x->dims[d];
    p->scale[d] = 1.0;
    p->roi_hi[d] = 1.0;
  }
  nr_status st = plan_axes(ctx, p);
  if (st)
    return st;
  if (!strcmp(ctx->node->op_type, "Upsample") && ctx->node->opset < 9)
    return plan_scales_attr(ctx, x, p);
  const nr_value *sc = plan_input(ctx, "scales"), *sz = plan_input(ctx, "sizes");
  for (int i = 0; i < p->n_axes; i++)
    p->out[p->axes[i]] = NR_DIM_UNKNOWN; /* until the data says otherwise */
  if (sc && sz && (nr_value_count(sc) < 0 || nr_value_count(sz) < 0))
    return NR_OK; /* statically we cannot tell which one is the empty one */
  if (sc && sz)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "both scales and sizes are given");
  if (!sc && !sz)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "needs either scales or sizes");
  if ((st = plan_roi(ctx, a, p)))
    return st;
  if (sc)
    return plan_scales_input(ctx, x, sc, p);
  if ((st = plan_check_count(ctx, sz, "sizes", p->n_axes)) || !sz->data)
    return st;
  return plan_from_sizes(ctx, x, sz, a->keep, p);
}

static nr_status resize_infer(nr_op_ctx *ctx) {
  bool upsample7 = !strcmp(ctx->node->op_type, "Upsample") && ctx->node->opset < 9;
  nr_status st = nr_op_check_arity(ctx, 1, upsample7 ? 1 : is_legacy(ctx) ? 2 : 4);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype != NR_DTYPE_UNDEFINED && (!nr_dtype_size(x->dtype) ||
                                         x->dtype == NR_DTYPE_BOOL))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "X dtype %s is not supported",
                      nr_dtype_name(x->dtype));
  resize_attrs a;
  resize_plan p;
  if ((st = read_attrs(ctx, &a)))
    return st;
  if (x->rank < 0)
    return nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  if ((st = plan_make(ctx, &a, &p)))
    return st;
  return nr_op_set_output(ctx, 0, x->dtype, p.rank, p.out);
}

/* ---- taps ----------------------------------------------------------------------- */

static double cubic_kernel(double t, double A) {
  t = fabs(t);
  if (t <= 1)
    return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2)
    return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0;
}

static double tap_kernel(const resize_attrs *a, double t) {
  if (a->mode == MODE_CUBIC)
    return cubic_kernel(t, a->cubic_a);
  double v = 1 - fabs(t);
  return v > 0 ? v : 0;
}

/* Window width of the linear / cubic kernel at an (antialias) stretch of 1/s. */
static int64_t tap_count(const resize_attrs *a, double s) {
  double support = a->mode == MODE_CUBIC ? 2 : 1;
  return -2 * (int64_t)floor(-support / s);
}

/* Taps of output j: the n inputs nearest x, weighted by the (stretched) kernel. */
static void taps_window(const resize_attrs *a, double x, double s, int64_t in,
                        int64_t n, int64_t *idx, double *w) {
  int64_t start = (int64_t)ceil(x) - n / 2;
  double sum = 0;
  for (int64_t k = 0; k < n; k++) {
    int64_t i = start + k;
    w[k] = tap_kernel(a, ((double)i - x) * s);
    if (a->exclude_outside && (i < 0 || i >= in))
      w[k] = 0;
    idx[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
    sum += w[k];
  }
  bool normalize = a->antialias || a->exclude_outside;
  for (int64_t k = 0; normalize && sum != 0 && k < n; k++)
    w[k] /= sum;
}

static void taps_free(axis_taps *t) {
  free(t->idx);
  free(t->w);
  free(t->extrapolate);
}

static nr_status taps_build(nr_op_ctx *ctx, const resize_attrs *a, const resize_plan *p,
                            int d, int64_t in, axis_taps *t) {
  int64_t out = p->out[d];
  double s = a->antialias && p->scale[d] < 1 ? p->scale[d] : 1.0;
  t->n = a->mode == MODE_NEAREST || out == 0 ? 1 : tap_count(a, s);
  size_t cnt = (size_t)(out * t->n) + 1;
  t->idx = malloc(cnt * sizeof *t->idx);
  t->w = malloc(cnt * sizeof *t->w);
  t->extrapolate = calloc((size_t)out + 1, 1);
  if (!t->idx || !t->w || !t->extrapolate) {
    taps_free(t);
    return nr_op_fail(ctx, NR_ERR_NOMEM, "no memory for %lld resize taps",
                      (long long)cnt);
  }
  for (int64_t j = 0; j < out; j++) {
    double x = nr_resize_source_coord(a->ctm, (double)j, in, out, p->scale[d], p->roi_lo[d],
                            p->roi_hi[d]);
    t->extrapolate[j] = a->ctm == NR_RESIZE_CT_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1));
    if (a->mode != MODE_NEAREST) {
      taps_window(a, x, s, in, t->n, t->idx + j * t->n, t->w + j * t->n);
      continue;
    }
    int64_t i = nr_resize_nearest_index(a->nearest, x, p->scale[d]);
    t->idx[j] = i < 0 ? 0 : i >= in ? in - 1 : i;
    t->w[j] = 1.0;
  }
  return NR_OK;
}

/* ---- kernel --------------------------------------------------------------------- */

static bool axis_is_identity(const resize_plan *p, int d, int64_t in) {
  return p->out[d] == in && fabs(p->scale[d] - 1.0) <= 1e-9 && p->roi_lo[d] == 0 &&
         p->roi_hi[d] == 1;
}

/* Resizes axis d of src (dims) into a new buffer; dims[d] becomes the output size. */
static nr_status resize_axis(nr_op_ctx *ctx, const resize_attrs *a, const resize_plan *p,
                             int d, int64_t *dims, double **buf) {
  int64_t in = dims[d], out = p->out[d], outer = 1, inner = 1;
  for (int k = 0; k < d; k++)
    outer *= dims[k];
  for (int k = d + 1; k < p->rank; k++)
    inner *= dims[k];
  axis_taps t = {0};
  nr_status st = taps_build(ctx, a, p, d, in, &t);
  if (st)
    return st;
  double *dst = malloc((size_t)(outer * out * inner + 1) * sizeof *dst), *src = *buf;
  if (!dst) {
    taps_free(&t);
    return nr_op_fail(ctx, NR_ERR_NOMEM, "no memory for the resized tensor");
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < out; j++)
      for (int64_t i = 0; i < inner; i++) {
        double acc = 0;
        for (int64_t k = 0; k < t.n; k++)
          acc += t.w[j * t.n + k] * src[(o * in + t.idx[j * t.n + k]) * inner + i];
        dst[(o * out + j) * inner + i] = t.extrapolate[j] ? a->extrapolation : acc;
      }
  taps_free(&t);
  free(src);
  *buf = dst;
  dims[d] = out;
  return NR_OK;
}

/* Integer outputs round half to even and saturate, as a cast from float would. */
static void store_saturating(nr_dtype t, void *data, int64_t i, double v) {
  if (nr_dtype_is_float(t)) {
    nr_store_f64(t, data, i, v);
    return;
  }
  double lo = 0, hi = 0;
  switch (t) {
  case NR_DTYPE_INT8: lo = -128; hi = 127; break;
  case NR_DTYPE_UINT8: hi = 255; break;
  case NR_DTYPE_INT16: lo = -32768; hi = 32767; break;
  case NR_DTYPE_UINT16: hi = 65535; break;
  case NR_DTYPE_INT32: lo = -2147483648.0; hi = 2147483647.0; break;
  case NR_DTYPE_UINT32: hi = 4294967295.0; break;
  default: lo = -9.2e18; hi = 9.2e18; break;
  }
  v = nearbyint(v);
  nr_store_f64(t, data, i, isnan(v) ? 0 : v < lo ? lo : v > hi ? hi : v);
}

static nr_status resize_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  resize_attrs a;
  resize_plan p;
  nr_status st = read_attrs(ctx, &a);
  if (st || (st = plan_make(ctx, &a, &p)))
    return st;
  int64_t n = nr_value_count(x), dims[NR_MAX_RANK];
  double *buf = malloc((size_t)(n + 1) * sizeof *buf);
  if (!buf)
    return nr_op_fail(ctx, NR_ERR_NOMEM, "no memory for %lld elements", (long long)n);
  for (int64_t i = 0; i < n; i++)
    buf[i] = nr_load_f64(x->dtype, x->data, i);
  memcpy(dims, x->dims, sizeof dims);
  for (int i = 0; i < p.n_axes && !st; i++)
    if (!axis_is_identity(&p, p.axes[i], dims[p.axes[i]]))
      st = resize_axis(ctx, &a, &p, p.axes[i], dims, &buf);
  int64_t m = nr_value_count(y);
  for (int64_t i = 0; i < m && !st; i++)
    store_saturating(y->dtype, y->data, i, buf[i]);
  free(buf);
  return st;
}

const nr_op_def nr_ref_ops_resize[] = {
    {"", "Upsample", 7, resize_infer, resize_run, 0},
    {"", "Resize", 10, resize_infer, resize_run, 0},
    {0},
};
