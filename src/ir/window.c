/* window.c - sliding-window attribute reading and output-size rules shared by the
 * conv and pool operators and the conv description (see window.h). The rules follow
 * the ONNX spec: SAME_* keeps ceil(in / stride) outputs and puts the odd pad at the end
 * (UPPER) or the start (LOWER); explicit pads with ceil_mode round up but drop a last
 * window that would start inside the right padding. */
#include "ir/window.h"

#include <string.h>

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
  for (int i = 0; i < nsp; i++)
    if (kernel_from[i] == 0) /* an empty window: every kernel walks it out of bounds */
      return nr_op_fail(ctx, NR_ERR_SHAPE, "the weight's kernel dim %d is 0", i);
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
