/* conv_util.c - sliding-window attribute reading and output-size rules shared by the
 * conv and pool operators (see conv_util.h). The rules follow the ONNX spec:
 * SAME_* keeps ceil(in / stride) outputs and puts the odd pad at the end (UPPER) or
 * the start (LOWER); explicit pads with ceil_mode round up but drop a last window
 * that would start inside the right padding. */
#include "kernels/ref/conv_util.h"

#include "kernels/ref/ref_gemm.h"

#include <stdlib.h>
#include <string.h>

int64_t nr_dims_prod(int n, const int64_t *dims) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0)
      return NR_DIM_UNKNOWN;
    p *= dims[i];
  }
  return p;
}

static nr_status read_auto_pad(nr_op_ctx *ctx, nr_window *w) {
  const char *s = nr_attr_string(ctx->node, "auto_pad", "NOTSET");
  if (!strcmp(s, "NOTSET") || !*s)
    w->auto_pad = NR_AUTO_PAD_NOTSET;
  else if (!strcmp(s, "SAME_UPPER"))
    w->auto_pad = NR_AUTO_PAD_SAME_UPPER;
  else if (!strcmp(s, "SAME_LOWER"))
    w->auto_pad = NR_AUTO_PAD_SAME_LOWER;
  else if (!strcmp(s, "VALID"))
    w->auto_pad = NR_AUTO_PAD_VALID;
  else
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown auto_pad '%s'", s);
  return NR_OK;
}

/* Copies attribute name (n entries, each >= min) into dst, or fills dflt. */
static nr_status read_ints(nr_op_ctx *ctx, const char *name, size_t n, int64_t min,
                           int64_t dflt, int64_t *dst) {
  size_t count;
  const int64_t *v = nr_attr_ints(ctx->node, name, &count);
  if (!v) {
    for (size_t i = 0; i < n; i++)
      dst[i] = dflt;
    return NR_OK;
  }
  if (count != n)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "attribute %s has %zu values, expected %zu",
                      name, count, n);
  for (size_t i = 0; i < n; i++) {
    if (v[i] < min)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "attribute %s[%zu] = %lld is below %lld", name,
                        i, (long long)v[i], (long long)min);
    dst[i] = v[i];
  }
  return NR_OK;
}

static nr_status read_kernel(nr_op_ctx *ctx, int nsp, const int64_t *kernel_from,
                             nr_window *w) {
  if (nr_node_attr(ctx->node, "kernel_shape")) {
    nr_status st = read_ints(ctx, "kernel_shape", nsp, 1, 1, w->kernel);
    if (st || !kernel_from)
      return st;
    for (int i = 0; i < nsp; i++)
      if (kernel_from[i] >= 0 && kernel_from[i] != w->kernel[i])
        return nr_op_fail(ctx, NR_ERR_SHAPE,
                          "kernel_shape[%d] = %lld but the weight has %lld", i,
                          (long long)w->kernel[i], (long long)kernel_from[i]);
    return NR_OK;
  }
  if (!kernel_from)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute kernel_shape is required");
  memcpy(w->kernel, kernel_from, sizeof(int64_t) * nsp);
  return NR_OK;
}

nr_status nr_window_read(nr_op_ctx *ctx, int nsp, const int64_t *kernel_from,
                         nr_window *w) {
  memset(w, 0, sizeof *w);
  w->nsp = nsp;
  int64_t pads[2 * NR_MAX_RANK];
  nr_status st = read_auto_pad(ctx, w);
  if (!st)
    st = read_kernel(ctx, nsp, kernel_from, w);
  if (!st)
    st = read_ints(ctx, "strides", nsp, 1, 1, w->stride);
  if (!st)
    st = read_ints(ctx, "dilations", nsp, 1, 1, w->dil);
  if (!st)
    st = read_ints(ctx, "pads", 2 * nsp, 0, 0, pads);
  if (st)
    return st;
  for (int i = 0; i < nsp; i++) {
    w->pad_b[i] = pads[i];
    w->pad_e[i] = pads[nsp + i];
  }
  w->ceil_mode = nr_attr_int(ctx->node, "ceil_mode", 0) != 0;
  return NR_OK;
}

/* Output size along dim i for explicit pads. */
static int64_t explicit_out(const nr_window *w, int i) {
  int64_t span = w->in[i] + w->pad_b[i] + w->pad_e[i] - nr_window_extent(w, i);
  if (span < 0)
    return 0;
  if (!w->ceil_mode)
    return span / w->stride[i] + 1;
  int64_t out = (span + w->stride[i] - 1) / w->stride[i] + 1;
  if ((out - 1) * w->stride[i] >= w->in[i] + w->pad_b[i])
    out--; /* the last window would start inside the right padding */
  return out;
}

static void resolve_dim(nr_window *w, int i) {
  int64_t in = w->in[i], s = w->stride[i], ext = nr_window_extent(w, i);
  switch (w->auto_pad) {
  case NR_AUTO_PAD_SAME_UPPER:
  case NR_AUTO_PAD_SAME_LOWER: {
    w->out[i] = (in + s - 1) / s;
    int64_t total = (w->out[i] - 1) * s + ext - in;
    if (total < 0)
      total = 0;
    int64_t small = total / 2;
    w->pad_b[i] = w->auto_pad == NR_AUTO_PAD_SAME_UPPER ? small : total - small;
    w->pad_e[i] = total - w->pad_b[i];
    break;
  }
  case NR_AUTO_PAD_VALID:
    w->pad_b[i] = w->pad_e[i] = 0;
    w->out[i] = in >= ext ? (in - ext) / s + 1 : 0;
    break;
  default:
    w->out[i] = explicit_out(w, i);
  }
}

nr_status nr_window_forward(nr_op_ctx *ctx, nr_window *w, const int64_t *in) {
  for (int i = 0; i < w->nsp; i++) {
    w->in[i] = in[i];
    if (in[i] < 0 || w->kernel[i] < 0) {
      w->out[i] = NR_DIM_UNKNOWN;
      continue;
    }
    resolve_dim(w, i);
    if (w->out[i] < 1)
      return nr_op_fail(ctx, NR_ERR_SHAPE,
                        "spatial dim %d: input %lld with pads %lld+%lld is smaller than "
                        "the dilated kernel %lld",
                        i, (long long)in[i], (long long)w->pad_b[i],
                        (long long)w->pad_e[i], (long long)nr_window_extent(w, i));
  }
  return NR_OK;
}

nr_status nr_window_check_input(nr_op_ctx *ctx, const nr_value *x, const char *name,
                                int *nsp) {
  *nsp = -1;
  if (x->rank < 0)
    return NR_OK;
  if (x->rank < 3)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "input %s has rank %d, expected [N, C, ...] "
                      "with at least one spatial dim",
                      name, x->rank);
  *nsp = x->rank - 2;
  return NR_OK;
}

/* ---- the convolution engine ----------------------------------------------------- */

/* One row of the window mapping: positions p in [0, n) of the iterated domain's last
 * dim (starting at iter_off) meet target positions tgt_off + p * step; only p in
 * [lo, hi) are inside the target. Conv iterates output positions and targets the
 * input; ConvTranspose's col2im iterates input positions and targets the output. */
typedef struct conv_row {
  int64_t iter_off, tgt_off, n, lo, hi, step;
} conv_row;

typedef void (*conv_row_fn)(void *user, const conv_row *row);

typedef struct conv_walk {
  int nsp;
  const int64_t *iter, *tgt; /* iterated and target spatial dims */
  const nr_window *win;
} conv_walk;

static int64_t div_floor(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Calls fn for every row of the iterated domain for kernel position kidx. */
static void conv_walk_rows(const conv_walk *cw, const int64_t *kidx, conv_row_fn fn,
                           void *user) {
  int last = cw->nsp - 1;
  const nr_window *w = cw->win;
  int64_t shift = kidx[last] * w->dil[last] - w->pad_b[last];
  int64_t s = w->stride[last], n = cw->iter[last], tn = cw->tgt[last];
  conv_row row = {.n = n, .step = s};
  /* p * s + shift in [0, tn)  <=>  p in [ceil(-shift / s), floor((tn-1-shift)/s)] */
  int64_t lo = -div_floor(shift, s), hi = div_floor(tn - 1 - shift, s) + 1;
  lo = lo < 0 ? 0 : lo > n ? n : lo;
  hi = hi > n ? n : hi < lo ? lo : hi;
  int64_t idx[NR_MAX_RANK] = {0};
  do {
    bool inside = true;
    int64_t off = 0;
    for (int d = 0; d < last; d++) {
      int64_t t = idx[d] * w->stride[d] + kidx[d] * w->dil[d] - w->pad_b[d];
      inside = inside && t >= 0 && t < cw->tgt[d];
      off = off * cw->tgt[d] + t;
    }
    row.iter_off = 0;
    for (int d = 0; d < last; d++)
      row.iter_off = row.iter_off * cw->iter[d] + idx[d];
    row.iter_off *= n;
    row.tgt_off = off * tn + shift;
    row.lo = inside ? lo : 0;
    row.hi = inside ? hi : 0;
    fn(user, &row);
  } while (nr_index_next(last, cw->iter, idx));
}

void nr_conv_shape_finish(nr_conv_shape *s) {
  s->in_size = nr_dims_prod(s->win.nsp, s->win.in);
  s->out_size = nr_dims_prod(s->win.nsp, s->win.out);
  s->ksize = nr_dims_prod(s->win.nsp, s->win.kernel);
}

/* True when the convolution reads X unchanged as its im2col matrix. */
static bool conv_is_pointwise(const nr_conv_shape *s) {
  for (int i = 0; i < s->win.nsp; i++)
    if (s->win.kernel[i] != 1 || s->win.stride[i] != 1 || s->win.pad_b[i] != 0 ||
        s->win.in[i] != s->win.out[i])
      return false;
  return true;
}

/* The engine body, once per element type: row callbacks, im2col, col2im, and the
 * conv / transposed-conv drivers over batch and groups. */
#define NR_DEFINE_CONV_ENGINE(SFX, T, GEMM)                                              \
  typedef struct rowctx_##SFX {                                                          \
    const T *src;                                                                        \
    T *dst;                                                                              \
    T weight;                                                                            \
  } rowctx_##SFX;                                                                        \
                                                                                         \
  /* im2col row: dst[p] = src[tgt_off + p*step], zero outside [lo, hi). */               \
  static void im2col_row_##SFX(void *user, const conv_row *r) {                          \
    rowctx_##SFX *c = user;                                                              \
    T *d = c->dst + r->iter_off;                                                         \
    const T *s = c->src;                                                                 \
    int64_t o = r->tgt_off, st = r->step;                                                \
    for (int64_t p = 0; p < r->lo; p++)                                                  \
      d[p] = 0;                                                                          \
    for (int64_t p = r->lo; p < r->hi; p++)                                              \
      d[p] = s[o + p * st];                                                              \
    for (int64_t p = r->hi; p < r->n; p++)                                               \
      d[p] = 0;                                                                          \
  }                                                                                      \
                                                                                         \
  /* col2im row: dst[tgt_off + p*step] += src[p] inside [lo, hi). */                     \
  static void col2im_row_##SFX(void *user, const conv_row *r) {                          \
    rowctx_##SFX *c = user;                                                              \
    const T *s = c->src + r->iter_off;                                                   \
    T *d = c->dst;                                                                       \
    for (int64_t p = r->lo; p < r->hi; p++)                                              \
      d[r->tgt_off + p * r->step] += s[p];                                                            \
  }                                                                                      \
                                                                                         \
  /* depthwise row: dst[p] += weight * src[tgt_off + p*step] inside [lo, hi). */         \
  static void direct_row_##SFX(void *user, const conv_row *r) {                          \
    rowctx_##SFX *c = user;                                                              \
    T *d = c->dst + r->iter_off;                                                         \
    const T *s = c->src;                                                                 \
    int64_t o = r->tgt_off, st = r->step;                                                \
    T wv = c->weight;                                                                    \
    for (int64_t p = r->lo; p < r->hi; p++)                                              \
      d[p] += wv * s[o + p * st];                                                       \
  }                                                                                      \
                                                                                         \
  /* col[(c, k), out] from the group's channels x[c, in]. */                             \
  static void im2col_##SFX(const nr_conv_shape *s, int64_t channels, const T *x,         \
                           T *col) {                                                     \
    conv_walk cw = {s->win.nsp, s->win.out, s->win.in, &s->win};                         \
    int64_t kidx[NR_MAX_RANK] = {0};                                                     \
    for (int64_t c = 0; c < channels; c++) {                                             \
      int64_t r = 0;                                                                     \
      do {                                                                               \
        rowctx_##SFX rc = {x + c * s->in_size, col + (c * s->ksize + r) * s->out_size,   \
                           0};                                                           \
        conv_walk_rows(&cw, kidx, im2col_row_##SFX, &rc);                                \
        r++;                                                                             \
      } while (nr_index_next(s->win.nsp, s->win.kernel, kidx));                          \
    }                                                                                    \
  }                                                                                      \
                                                                                         \
  /* y[(oc), out] += col[(oc, k), in] scattered through the window. */                   \
  static void col2im_##SFX(const nr_conv_shape *s, int64_t channels, const T *col,       \
                           T *y) {                                                       \
    conv_walk cw = {s->win.nsp, s->win.in, s->win.out, &s->win};                         \
    int64_t kidx[NR_MAX_RANK] = {0};                                                     \
    for (int64_t c = 0; c < channels; c++) {                                             \
      int64_t r = 0;                                                                     \
      do {                                                                               \
        rowctx_##SFX rc = {col + (c * s->ksize + r) * s->in_size, y + c * s->out_size,   \
                           0};                                                           \
        conv_walk_rows(&cw, kidx, col2im_row_##SFX, &rc);                                \
        r++;                                                                             \
      } while (nr_index_next(s->win.nsp, s->win.kernel, kidx));                          \
    }                                                                                    \
  }                                                                                      \
                                                                                         \
  static void add_bias_##SFX(int64_t channels, int64_t size, const T *bias, T *y) {      \
    for (int64_t c = 0; c < channels; c++)                                               \
      for (int64_t i = 0; i < size; i++)                                                 \
        y[c * size + i] += bias[c];                                                      \
  }                                                                                      \
                                                                                         \
  /* Direct depthwise conv (one input channel per group): no im2col matrix. */           \
  static void depthwise_##SFX(const nr_conv_shape *s, const T *x, const T *w, T *y) {    \
    conv_walk cw = {s->win.nsp, s->win.out, s->win.in, &s->win};                         \
    int64_t og = s->out_c / s->group;                                                    \
    memset(y, 0, sizeof(T) * (size_t)(s->batch * s->out_c * s->out_size));               \
    for (int64_t n = 0; n < s->batch; n++)                                               \
      for (int64_t m = 0; m < s->out_c; m++) {                                           \
        int64_t kidx[NR_MAX_RANK] = {0}, r = 0;                                          \
        do {                                                                             \
          rowctx_##SFX rc = {x + (n * s->in_c + m / og) * s->in_size,                    \
                             y + (n * s->out_c + m) * s->out_size, w[m * s->ksize + r]}; \
          conv_walk_rows(&cw, kidx, direct_row_##SFX, &rc);                              \
          r++;                                                                           \
        } while (nr_index_next(s->win.nsp, s->win.kernel, kidx));                        \
      }                                                                                  \
  }                                                                                      \
                                                                                         \
  static nr_status conv_group_##SFX(const nr_conv_shape *s, const T *x, const T *w,      \
                                    T *y, T *col) {                                      \
    int64_t cg = s->in_c / s->group, og = s->out_c / s->group;                           \
    const T *b = x;                                                                      \
    if (col) {                                                                           \
      im2col_##SFX(s, cg, x, col);                                                       \
      b = col;                                                                           \
    }                                                                                    \
    return GEMM(false, false, og, s->out_size, cg * s->ksize, 1, w, cg * s->ksize, b,    \
                s->out_size, 0, y, s->out_size);                                         \
  }                                                                                      \
                                                                                         \
  nr_status nr_conv_##SFX(const nr_conv_shape *s, const T *x, const T *w, const T *bias, \
                          T *y) {                                                        \
    int64_t cg = s->in_c / s->group, og = s->out_c / s->group;                           \
    T *col = NULL;                                                                       \
    if (cg == 1 && !conv_is_pointwise(s)) {                                              \
      depthwise_##SFX(s, x, w, y);                                                       \
      for (int64_t n = 0; bias && n < s->batch; n++)                                     \
        add_bias_##SFX(s->out_c, s->out_size, bias, y + n * s->out_c * s->out_size);     \
      return NR_OK;                                                                      \
    }                                                                                    \
    if (!conv_is_pointwise(s)) {                                                         \
      col = malloc(sizeof(T) * (size_t)(cg * s->ksize * s->out_size + 1));               \
      if (!col)                                                                          \
        return NR_ERR_NOMEM;                                                             \
    }                                                                                    \
    nr_status st = NR_OK;                                                                \
    for (int64_t n = 0; n < s->batch && !st; n++)                                        \
      for (int64_t g = 0; g < s->group && !st; g++)                                      \
        st = conv_group_##SFX(s, x + (n * s->in_c + g * cg) * s->in_size,                \
                              w + g * og * cg * s->ksize,                                \
                              y + (n * s->out_c + g * og) * s->out_size, col);           \
    free(col);                                                                           \
    for (int64_t n = 0; bias && !st && n < s->batch; n++)                                \
      add_bias_##SFX(s->out_c, s->out_size, bias, y + n * s->out_c * s->out_size);       \
    return st;                                                                           \
  }                                                                                      \
                                                                                         \
  nr_status nr_conv_transpose_##SFX(const nr_conv_shape *s, const T *x, const T *w,      \
                                    const T *bias, T *y) {                               \
    int64_t cg = s->in_c / s->group, og = s->out_c / s->group;                           \
    T *col = malloc(sizeof(T) * (size_t)(og * s->ksize * s->in_size + 1));               \
    if (!col)                                                                            \
      return NR_ERR_NOMEM;                                                               \
    memset(y, 0, sizeof(T) * (size_t)(s->batch * s->out_c * s->out_size));               \
    nr_status st = NR_OK;                                                                \
    for (int64_t n = 0; n < s->batch && !st; n++)                                        \
      for (int64_t g = 0; g < s->group && !st; g++) {                                    \
        st = GEMM(true, false, og * s->ksize, s->in_size, cg, 1,                         \
                  w + g * cg * og * s->ksize, og * s->ksize,                             \
                  x + (n * s->in_c + g * cg) * s->in_size, s->in_size, 0, col,           \
                  s->in_size);                                                           \
        if (!st)                                                                         \
          col2im_##SFX(s, og, col, y + (n * s->out_c + g * og) * s->out_size);           \
      }                                                                                  \
    free(col);                                                                           \
    for (int64_t n = 0; bias && !st && n < s->batch; n++)                                \
      add_bias_##SFX(s->out_c, s->out_size, bias, y + n * s->out_c * s->out_size);       \
    return st;                                                                           \
  }

NR_DEFINE_CONV_ENGINE(f32, float, nr_ref_sgemm)
NR_DEFINE_CONV_ENGINE(f64, double, nr_ref_dgemm)
