/* ops_conv.c - reference Conv, ConvTranspose, ConvInteger and QLinearConv.
 *
 * All four resolve their geometry into an nr_conv_shape (conv_util.h) and run the one
 * convolution engine there. float32 runs natively; float16 and bfloat16 are widened
 * to float32 and narrowed back; double runs in double. The integer convolutions
 * subtract zero points, run in double (exact: every partial sum of 8-bit products
 * stays far below 2^53) and then store int32 or requantize with round-half-to-even
 * and saturation. */
#include "ir/op.h"
#include "kernels/ref/conv_util.h"
#include "kernels/ref/ref_gemm.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared shape rules --------------------------------------------------------- */

static bool is_conv_float(nr_dtype t) {
  return nr_dtype_is_float(t);
}
static bool is_q8(nr_dtype t) {
  return t == NR_DTYPE_UINT8 || t == NR_DTYPE_INT8;
}

/* Fills *s (except batch / channel checks that need data) and the output dims for a
 * forward convolution of x [N, C, ...] by w [M, C/group, k...]. *rank = -1 when the
 * spatial rank is not known yet. */
static nr_status conv_resolve(nr_op_ctx *ctx, const nr_value *x, const nr_value *w,
                              nr_conv_shape *s, int *rank, int64_t *dims) {
  int nsp;
  nr_status st = nr_window_check_input(ctx, x, "X", &nsp);
  if (st)
    return st;
  if (nsp < 0 && w->rank >= 3)
    nsp = w->rank - 2;
  *rank = nsp < 0 ? -1 : nsp + 2;
  if (nsp < 0)
    return NR_OK;
  if (w->rank >= 0 && w->rank != nsp + 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "weight W has rank %d, X has rank %d", w->rank,
                      nsp + 2);
  int64_t unknown[NR_MAX_RANK], in[NR_MAX_RANK];
  for (int i = 0; i < nsp; i++) {
    unknown[i] = NR_DIM_UNKNOWN;
    in[i] = x->rank < 0 ? NR_DIM_UNKNOWN : x->dims[2 + i];
  }
  st = nr_window_read(ctx, nsp, w->rank < 0 ? unknown : w->dims + 2, &s->win);
  if (!st)
    st = nr_window_forward(ctx, &s->win, in);
  if (st)
    return st;
  s->group = nr_attr_int(ctx->node, "group", 1);
  s->batch = x->rank < 0 ? NR_DIM_UNKNOWN : x->dims[0];
  s->in_c = x->rank < 0 ? NR_DIM_UNKNOWN : x->dims[1];
  s->out_c = w->rank < 0 ? NR_DIM_UNKNOWN : w->dims[0];
  if (s->group < 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "group %lld must be >= 1", (long long)s->group);
  if (s->in_c >= 0 && w->rank >= 0 && w->dims[1] >= 0 && s->in_c != w->dims[1] * s->group)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "X has %lld channels but W expects %lld per group x %lld groups",
                      (long long)s->in_c, (long long)w->dims[1], (long long)s->group);
  if (s->out_c >= 0 && s->out_c % s->group)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "%lld output channels do not split into %lld groups",
                      (long long)s->out_c, (long long)s->group);
  dims[0] = s->batch;
  dims[1] = s->out_c;
  memcpy(dims + 2, s->win.out, sizeof(int64_t) * nsp);
  nr_conv_shape_finish(s);
  return NR_OK;
}

/* A bias (or per-channel parameter) must be 1-D with `channels` entries. */
static nr_status check_per_channel(nr_op_ctx *ctx, const nr_value *v, const char *name,
                                   int64_t channels, bool scalar_ok) {
  if (!v || v->rank < 0)
    return NR_OK;
  int64_t n = nr_value_count(v);
  if (scalar_ok && v->rank <= 1 && n == 1)
    return NR_OK;
  if (v->rank != 1 || (channels >= 0 && v->dims[0] >= 0 && v->dims[0] != channels))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must be %s1-D with %lld entries", name,
                      scalar_ok ? "a scalar or " : "", (long long)channels);
  return NR_OK;
}

static nr_status check_dtype(nr_op_ctx *ctx, const nr_value *v, const char *name,
                             bool (*ok)(nr_dtype), const char *what) {
  if (v && v->dtype != NR_DTYPE_UNDEFINED && !ok(v->dtype))
    return nr_op_fail(ctx, nr_dtype_size(v->dtype) ? NR_ERR_SHAPE : NR_ERR_UNSUPPORTED,
                      "%s has dtype %s, expected %s", name, nr_dtype_name(v->dtype),
                      what);
  return NR_OK;
}

/* ---- Conv ----------------------------------------------------------------------- */

/* Conv and ConvTranspose: X is a float type and W has the same one. */
static nr_status check_float_xw(nr_op_ctx *ctx, const nr_value *x, const nr_value *w) {
  nr_status st = check_dtype(ctx, x, "X", is_conv_float, "a float type");
  if (!st && w->dtype && x->dtype && w->dtype != x->dtype)
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "W is %s but X is %s", nr_dtype_name(w->dtype),
                    nr_dtype_name(x->dtype));
  return st;
}

static nr_status conv_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *w = nr_op_in(ctx, 1), *b = nr_op_in(ctx, 2);
  st = check_float_xw(ctx, x, w);
  if (!st && b && b->dtype && x->dtype && b->dtype != x->dtype)
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "B is %s but X is %s", nr_dtype_name(b->dtype),
                    nr_dtype_name(x->dtype));
  nr_conv_shape s;
  int rank;
  int64_t dims[NR_MAX_RANK];
  if (!st)
    st = conv_resolve(ctx, x, w, &s, &rank, dims);
  if (!st && rank >= 0)
    st = check_per_channel(ctx, b, "B", s.out_c, false);
  if (st)
    return st;
  return nr_op_set_output(ctx, 0, x->dtype, rank, dims);
}

/* Runs the engine for float-typed x, w, b, y: natively in float32 or double, widened
 * to float32 for the half types. */
typedef nr_status (*conv_f32_fn)(const nr_conv_shape *, const float *, const float *,
                                 const float *, float *);
typedef nr_status (*conv_f64_fn)(const nr_conv_shape *, const double *, const double *,
                                 const double *, double *);

static nr_status run_float_conv(nr_op_ctx *ctx, const nr_conv_shape *s, conv_f32_fn f32,
                                conv_f64_fn f64) {
  const nr_value *x = nr_op_in(ctx, 0), *w = nr_op_in(ctx, 1), *b = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  nr_dtype work = x->dtype == NR_DTYPE_DOUBLE ? NR_DTYPE_DOUBLE : NR_DTYPE_FLOAT;
  bool ox = false, ow = false, ob = false, oy = false;
  void *xd = nr_ref_stage(x, work, &ox), *wd = nr_ref_stage(w, work, &ow);
  void *bd = b ? nr_ref_stage(b, work, &ob) : NULL;
  void *yd = y->dtype == work ? y->data : nr_ref_stage(y, work, &oy);
  nr_status st = NR_ERR_NOMEM;
  if (xd && wd && yd && (bd || !b))
    st = work == NR_DTYPE_FLOAT ? f32(s, xd, wd, bd, yd) : f64(s, xd, wd, bd, yd);
  if (!st)
    nr_ref_unstage(y, yd, work, nr_value_count(y));
  if (ox)
    free(xd);
  if (ow)
    free(wd);
  if (ob)
    free(bd);
  if (oy)
    free(yd);
  return st ? nr_op_fail(ctx, st, "out of memory for the convolution buffers") : NR_OK;
}

static nr_status conv_run(nr_op_ctx *ctx) {
  nr_conv_shape s;
  int rank;
  int64_t dims[NR_MAX_RANK];
  nr_status st = conv_resolve(ctx, nr_op_in(ctx, 0), nr_op_in(ctx, 1), &s, &rank, dims);
  if (st)
    return st;
  return run_float_conv(ctx, &s, nr_conv_f32, nr_conv_f64);
}

/* ---- ConvTranspose -------------------------------------------------------------- */

/* Output size and pads of spatial dim i; target < 0 when output_shape is absent. */
static void transpose_dim(nr_window *win, int i, int64_t out_pad, int64_t target) {
  int64_t natural =
      win->stride[i] * (win->in[i] - 1) + out_pad + nr_window_extent(win, i);
  if (target < 0 && win->auto_pad != NR_AUTO_PAD_SAME_UPPER &&
      win->auto_pad != NR_AUTO_PAD_SAME_LOWER) {
    if (win->auto_pad == NR_AUTO_PAD_VALID)
      win->pad_b[i] = win->pad_e[i] = 0;
    win->out[i] = natural - win->pad_b[i] - win->pad_e[i];
    return;
  }
  if (target < 0)
    target = win->in[i] * win->stride[i];
  int64_t total = natural - target;
  int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor */
  if (win->auto_pad == NR_AUTO_PAD_SAME_UPPER) {
    win->pad_b[i] = half;
    win->pad_e[i] = total - half;
  } else {
    win->pad_b[i] = total - half;
    win->pad_e[i] = half;
  }
  win->out[i] = target;
}

/* Reads output_padding and output_shape (spatial part) for nsp dims. */
static nr_status transpose_attrs(nr_op_ctx *ctx, int nsp, int64_t *out_pad,
                                 int64_t *target) {
  size_t n_pad, n_shape;
  const int64_t *op = nr_attr_ints(ctx->node, "output_padding", &n_pad);
  const int64_t *os = nr_attr_ints(ctx->node, "output_shape", &n_shape);
  if (op && n_pad != (size_t)nsp)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "output_padding has %zu values for %d spatial dims", n_pad, nsp);
  if (os && n_shape != (size_t)nsp && n_shape != (size_t)nsp + 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "output_shape has %zu values for %d spatial dims", n_shape, nsp);
  for (int i = 0; i < nsp; i++) {
    out_pad[i] = op ? op[i] : 0;
    target[i] = os ? os[n_shape - nsp + i] : NR_DIM_UNKNOWN;
  }
  return NR_OK;
}

static nr_status transpose_channels(nr_op_ctx *ctx, const nr_value *x, const nr_value *w,
                                    nr_conv_shape *s) {
  s->group = nr_attr_int(ctx->node, "group", 1);
  if (s->group < 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "group %lld must be >= 1", (long long)s->group);
  s->batch = x->dims[0];
  s->in_c = x->dims[1];
  s->out_c = w->rank < 0 || w->dims[1] < 0 ? NR_DIM_UNKNOWN : w->dims[1] * s->group;
  if (w->rank >= 0 && s->in_c >= 0 && w->dims[0] >= 0 &&
      (w->dims[0] != s->in_c || s->in_c % s->group))
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "W has %lld input channels, X has %lld (group %lld)",
                      (long long)w->dims[0], (long long)s->in_c, (long long)s->group);
  return NR_OK;
}

static nr_status transpose_resolve(nr_op_ctx *ctx, const nr_value *x, const nr_value *w,
                                   nr_conv_shape *s, int *rank, int64_t *dims) {
  int nsp;
  nr_status st = nr_window_check_input(ctx, x, "X", &nsp);
  *rank = nsp < 0 ? -1 : nsp + 2;
  if (st || nsp < 0)
    return st;
  if (w->rank >= 0 && w->rank != nsp + 2)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "weight W has rank %d, X has rank %d", w->rank,
                      nsp + 2);
  int64_t unknown[NR_MAX_RANK], out_pad[NR_MAX_RANK], target[NR_MAX_RANK];
  for (int i = 0; i < nsp; i++)
    unknown[i] = NR_DIM_UNKNOWN;
  st = nr_window_read(ctx, nsp, w->rank < 0 ? unknown : w->dims + 2, &s->win);
  if (!st)
    st = transpose_attrs(ctx, nsp, out_pad, target);
  if (!st)
    st = transpose_channels(ctx, x, w, s);
  for (int i = 0; !st && i < nsp; i++) {
    s->win.in[i] = x->dims[2 + i];
    s->win.out[i] = NR_DIM_UNKNOWN;
    if (s->win.in[i] == 0) { /* (in - 1) * stride would place the window before 0 */
      st = nr_op_fail(ctx, NR_ERR_SHAPE, "spatial dim %d of X is 0", i);
      break;
    }
    if (s->win.in[i] >= 0 && s->win.kernel[i] >= 0)
      transpose_dim(&s->win, i, out_pad[i], target[i]);
    if (s->win.in[i] >= 0 && s->win.kernel[i] >= 0 && s->win.out[i] < 1)
      st = nr_op_fail(ctx, NR_ERR_SHAPE, "spatial dim %d of the output would be %lld", i,
                      (long long)s->win.out[i]);
    dims[2 + i] = s->win.out[i];
  }
  dims[0] = s->batch;
  dims[1] = s->out_c;
  nr_conv_shape_finish(s);
  return st;
}

static nr_status transpose_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  if (st)
    return st;
  const nr_value *x = nr_op_in(ctx, 0), *w = nr_op_in(ctx, 1), *b = nr_op_in(ctx, 2);
  st = check_float_xw(ctx, x, w);
  nr_conv_shape s;
  int rank;
  int64_t dims[NR_MAX_RANK];
  if (!st)
    st = transpose_resolve(ctx, x, w, &s, &rank, dims);
  if (!st && rank >= 0)
    st = check_per_channel(ctx, b, "B", s.out_c, false);
  if (st)
    return st;
  return nr_op_set_output(ctx, 0, x->dtype, rank, dims);
}

static nr_status transpose_run(nr_op_ctx *ctx) {
  nr_conv_shape s;
  int rank;
  int64_t dims[NR_MAX_RANK];
  nr_status st =
      transpose_resolve(ctx, nr_op_in(ctx, 0), nr_op_in(ctx, 1), &s, &rank, dims);
  if (st)
    return st;
  return run_float_conv(ctx, &s, nr_conv_transpose_f32, nr_conv_transpose_f64);
}

/* ---- ConvInteger and QLinearConv ------------------------------------------------ */

/* The input positions of the quantized convolutions. */
typedef struct qconv_io {
  int x, x_zp, w, w_zp, bias; /* -1 when the op has no such input */
} qconv_io;

static const qconv_io conv_integer_io = {0, 2, 1, 3, -1};
static const qconv_io qlinear_conv_io = {0, 2, 3, 5, 8};

/* Zero point of channel c (0 when absent; one value or one per channel). */
static int64_t zero_point(const nr_value *zp, int64_t c) {
  if (!zp)
    return 0;
  return nr_load_i64(zp->dtype, zp->data, nr_value_count(zp) == 1 ? 0 : c);
}

/* Widens v to double, subtracting its zero point; per_channel spreads the zero point
 * over dim 0 blocks (weights). NULL on allocation failure. */
static double *widen_q(const nr_value *v, const nr_value *zp) {
  int64_t n = nr_value_count(v), block = v->dims[0] > 0 ? n / v->dims[0] : 1;
  double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  if (!d)
    return NULL;
  for (int64_t i = 0; i < n; i++)
    d[i] = (double)(nr_load_i64(v->dtype, v->data, i) - zero_point(zp, i / block));
  return d;
}

static nr_status qconv_infer_common(nr_op_ctx *ctx, const qconv_io *io, nr_dtype out) {
  const nr_value *x = nr_op_in(ctx, io->x), *w = nr_op_in(ctx, io->w);
  const nr_value *xzp = nr_op_in(ctx, io->x_zp), *wzp = nr_op_in(ctx, io->w_zp);
  nr_status st = check_dtype(ctx, x, "x", is_q8, "uint8 or int8");
  if (!st)
    st = check_dtype(ctx, w, "w", is_q8, "uint8 or int8");
  if (!st && xzp && xzp->dtype && x->dtype && xzp->dtype != x->dtype)
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "x_zero_point's dtype differs from x's");
  if (!st && wzp && wzp->dtype && w->dtype && wzp->dtype != w->dtype)
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "w_zero_point's dtype differs from w's");
  nr_conv_shape s;
  int rank;
  int64_t dims[NR_MAX_RANK];
  if (!st)
    st = conv_resolve(ctx, x, w, &s, &rank, dims);
  if (!st)
    st = check_per_channel(ctx, xzp, "x_zero_point", 1, true);
  if (!st && rank >= 0)
    st = check_per_channel(ctx, wzp, "w_zero_point", s.out_c, true);
  if (!st && io->bias >= 0 && rank >= 0)
    st = check_per_channel(ctx, nr_op_in(ctx, io->bias), "B", s.out_c, false);
  if (st)
    return st;
  return nr_op_set_output(ctx, 0, out, rank, dims);
}

static nr_status conv_integer_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 4);
  return st ? st : qconv_infer_common(ctx, &conv_integer_io, NR_DTYPE_INT32);
}

/* Runs the integer convolution into acc (N x M x out, exact integers in double). */
static nr_status qconv_accumulate(nr_op_ctx *ctx, const qconv_io *io, double **acc) {
  const nr_value *x = nr_op_in(ctx, io->x), *w = nr_op_in(ctx, io->w);
  nr_conv_shape s;
  int rank;
  int64_t dims[NR_MAX_RANK];
  nr_status st = conv_resolve(ctx, x, w, &s, &rank, dims);
  if (st)
    return st;
  double *xd = widen_q(x, nr_op_in(ctx, io->x_zp));
  double *wd = widen_q(w, nr_op_in(ctx, io->w_zp));
  *acc = malloc(sizeof(double) * (size_t)(s.batch * s.out_c * s.out_size + 1));
  st = xd && wd && *acc ? nr_conv_f64(&s, xd, wd, NULL, *acc) : NR_ERR_NOMEM;
  free(xd);
  free(wd);
  if (st) {
    free(*acc);
    *acc = NULL;
    return nr_op_fail(ctx, st, "out of memory for the convolution buffers");
  }
  return NR_OK;
}

static nr_status conv_integer_run(nr_op_ctx *ctx) {
  double *acc;
  nr_status st = qconv_accumulate(ctx, &conv_integer_io, &acc);
  if (st)
    return st;
  nr_value *y = nr_op_out(ctx, 0);
  int32_t *yd = y->data;
  for (int64_t i = 0, n = nr_value_count(y); i < n; i++)
    yd[i] = (int32_t)acc[i];
  free(acc);
  return NR_OK;
}

enum { QC_X_SCALE = 1, QC_W_SCALE = 4, QC_Y_SCALE = 6, QC_Y_ZP = 7 };

static nr_status qlinear_conv_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 8, 9);
  if (st)
    return st;
  const nr_value *yzp = nr_op_in(ctx, QC_Y_ZP), *b = nr_op_in(ctx, 8);
  nr_dtype out = yzp && yzp->dtype ? yzp->dtype : nr_op_in(ctx, 0)->dtype;
  if (out && !is_q8(out))
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "y_zero_point has dtype %s, expected uint8 or int8",
                      nr_dtype_name(out));
  if (b && b->dtype && b->dtype != NR_DTYPE_INT32)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "B has dtype %s, expected int32",
                      nr_dtype_name(b->dtype));
  const nr_value *ws = nr_op_in(ctx, QC_W_SCALE), *w = nr_op_in(ctx, 3);
  st = check_per_channel(ctx, ws, "w_scale", w->rank > 0 ? w->dims[0] : -1, true);
  if (!st)
    st = check_per_channel(ctx, nr_op_in(ctx, QC_X_SCALE), "x_scale", 1, true);
  if (!st)
    st = check_per_channel(ctx, nr_op_in(ctx, QC_Y_SCALE), "y_scale", 1, true);
  return st ? st : qconv_infer_common(ctx, &qlinear_conv_io, out);
}

/* Rounds half to even and saturates to y's 8-bit range; NaN (a zero scale) is 0, as
 * QuantizeLinear maps it. */
static void store_q8(nr_value *y, int64_t i, double v) {
  double lo = y->dtype == NR_DTYPE_INT8 ? -128 : 0,
         hi = y->dtype == NR_DTYPE_INT8 ? 127 : 255;
  v = isnan(v) ? 0 : nearbyint(v);
  v = v < lo ? lo : v > hi ? hi : v;
  nr_store_i64(y->dtype, y->data, i, (int64_t)v);
}

static nr_status qlinear_conv_run(nr_op_ctx *ctx) {
  double *acc;
  nr_status st = qconv_accumulate(ctx, &qlinear_conv_io, &acc);
  if (st)
    return st;
  const nr_value *xs = nr_op_in(ctx, QC_X_SCALE), *ws = nr_op_in(ctx, QC_W_SCALE);
  const nr_value *ys = nr_op_in(ctx, QC_Y_SCALE), *b = nr_op_in(ctx, 8);
  nr_value *y = nr_op_out(ctx, 0);
  if (nr_value_count(y) == 0) { /* a zero batch or zero output channels */
    free(acc);
    return NR_OK;
  }
  int64_t m_count = y->dims[1], size = nr_value_count(y) / (y->dims[0] * m_count);
  float x_scale = (float)nr_load_f64(xs->dtype, xs->data, 0);
  float y_scale = (float)nr_load_f64(ys->dtype, ys->data, 0);
  double y_zp = (double)zero_point(nr_op_in(ctx, QC_Y_ZP), 0);
  for (int64_t i = 0, n = nr_value_count(y); i < n; i++) {
    int64_t m = (i / size) % m_count;
    float w_scale =
        (float)nr_load_f64(ws->dtype, ws->data, nr_value_count(ws) == 1 ? 0 : m);
    double multiplier = (double)(x_scale * w_scale / y_scale);
    double v = acc[i] + (b ? (double)((const int32_t *)b->data)[m] : 0);
    store_q8(y, i, v * multiplier + y_zp);
  }
  free(acc);
  return NR_OK;
}

const nr_op_def nr_ref_ops_conv[] = {
    {"", "Conv", 1, conv_infer, conv_run, 0},
    {"", "ConvTranspose", 1, transpose_infer, transpose_run, 0},
    {"", "ConvInteger", 10, conv_integer_infer, conv_integer_run, 0},
    {"", "QLinearConv", 10, qlinear_conv_infer, qlinear_conv_run, 0},
    {"", "DeformConv", 19, nr_ref_deform_conv_infer, nr_ref_deform_conv_run, 0},
    {"", "CausalConvWithState", 27, nr_ref_causal_conv_infer, nr_ref_causal_conv_run, 0},
    {0},
};
