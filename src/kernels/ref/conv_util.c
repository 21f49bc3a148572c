/* conv_util.c - the reference's conv-family helpers of conv_util.h: dims products and
 * the convolution engine over an nr_conv_shape (the window rules are in ir/window.c). */
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
