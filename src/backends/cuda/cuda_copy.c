/* cuda_copy.c - data movement on the GPU: Reshape, Flatten, Squeeze, Unsqueeze and
 * Identity (one device copy, or none when the memory pass placed the output on the
 * input), Concat, Split, Slice (any non-zero steps), Transpose, Gather, and the
 * PLAIN <-> NHWC reorders the layout pass inserts in CUDA plans.
 *
 * Key decision: every copy is described as one strided view per piece and handed to
 * nr_cuda_copy_strided (kernels_copy.cu), which merges it and picks a memcpy, a 2-D
 * memcpy or the generic kernel. The descriptions are the CPU copy tactics' (the same
 * merging and the same "skip when source is destination" rule that memory.views
 * relies on), so any dtype the plan stores moves as words of its size. The fp16
 * pass's conversions (nr_cuda_cast_*, steps of no node like the reorders) live here
 * too: a cast is a copy that changes the word. */
#include "backends/cuda/cuda_internal.h"

#include <string.h>

static void strides_of(const nr_slot *s, int64_t *st) {
  int64_t acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= s->dims[d];
  }
}

static bool plain(const nr_slot *s) {
  return s && s->layout == NR_LAYOUT_PLAIN && nr_dtype_size(s->dtype) > 0;
}

/* Every present slot plain, of input 0's dtype, from input `first` to `last`. */
static bool all_plain(const nr_tactic_ctx *c, int first, int last) {
  const nr_slot *x = nr_step_in(c, 0);
  if (!c->node || !plain(x) || c->step->n_out < 1)
    return false;
  for (int i = first; i <= last && i < c->step->n_in; i++) {
    const nr_slot *s = nr_step_in(c, i);
    if (!plain(s) || s->dtype != x->dtype)
      return false;
  }
  for (int o = 0; o < c->step->n_out; o++) {
    const nr_slot *s = nr_step_out(c, o);
    if (!plain(s) || s->dtype != x->dtype)
      return false;
  }
  return true;
}

static int axis_of(const nr_node *n, int rank, int64_t dflt) {
  int64_t a = nr_attr_int(n, "axis", dflt);
  return (int)(a < 0 ? a + rank : a);
}

static nr_status none_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  return NR_OK;
}

static nr_status copy(const nr_exec_args *a, nr_cuda_copy v, void *dst, const void *src) {
  return nr_cuda_check(nr_cuda_copy_strided(v, dst, src, nr_cuda_stream(a)), a->err,
                       "copy kernel");
}

/* ---- Reshape and friends -------------------------------------------------------------- */

static bool reshape_supports(const nr_tactic_ctx *c) {
  return all_plain(c, 0, 0) && c->step->n_out == 1 &&
         nr_step_out(c, 0)->nbytes == nr_step_in(c, 0)->nbytes;
}

static nr_status reshape_run(const nr_exec_args *a) {
  nr_cuda_copy v = {1, 1, {(int64_t)a->out_slot[0]->nbytes}, {1}, {1}};
  return copy(a, v, a->out[0], a->in[0]);
}

/* ---- Concat and Split ------------------------------------------------------------------ */

static bool concat_supports(const nr_tactic_ctx *c) {
  nr_concat_desc d;
  return all_plain(c, 0, c->step->n_in - 1) && c->step->n_out == 1 &&
         nr_step_pieces_ctx(c, &d);
}

static bool split_supports(const nr_tactic_ctx *c) {
  nr_split_desc d;
  return all_plain(c, 0, 0) && nr_step_pieces_ctx(c, &d);
}

/* Piece i as [outer, extent, inner] inside the whole's [outer, total, inner], at
 * offset[i] along the axis (*whole_off, in bytes). */
static nr_cuda_copy piece_view(const nr_concat_desc *d, int i, int es, bool to_whole,
                               int64_t *whole_off) {
  int64_t ps[3] = {d->extent[i] * d->inner, d->inner, 1};
  int64_t ws[3] = {d->total * d->inner, d->inner, 1};
  nr_cuda_copy v = {.rank = 3, .es = es, .dims = {d->outer, d->extent[i], d->inner}};
  for (int e = 0; e < 3; e++) {
    v.is[e] = to_whole ? ps[e] : ws[e];
    v.os[e] = to_whole ? ws[e] : ps[e];
  }
  *whole_off = d->offset[i] * d->inner * es;
  return v;
}

static nr_status concat_run(const nr_exec_args *a) {
  nr_concat_desc d;
  if (!nr_step_pieces(a->node, a->step, a->in_slot, a->out_slot, &d))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: unexpected shapes",
                     a->step->tactic->id);
  int es = (int)nr_dtype_size(a->out_slot[0]->dtype);
  int64_t off;
  nr_status st = NR_OK;
  for (int i = 0; !st && i < d.n_pieces; i++) {
    nr_cuda_copy v = piece_view(&d, i, es, true, &off);
    st = copy(a, v, (char *)a->out[0] + off, a->in[i]);
  }
  return st;
}

static nr_status split_run(const nr_exec_args *a) {
  nr_split_desc d;
  if (!nr_step_pieces(a->node, a->step, a->in_slot, a->out_slot, &d))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: unexpected shapes",
                     a->step->tactic->id);
  int es = (int)nr_dtype_size(a->in_slot[0]->dtype);
  int64_t off;
  nr_status st = NR_OK;
  for (int o = 0; !st && o < d.n_pieces; o++) {
    nr_cuda_copy v = piece_view(&d, o, es, false, &off);
    st = copy(a, v, a->out[o], (const char *)a->in[0] + off);
  }
  return st;
}

/* ---- Slice ------------------------------------------------------------------------------ */

static bool slice_supports(const nr_tactic_ctx *c) {
  nr_slice_params p;
  return all_plain(c, 0, 0) && nr_step_slice(c, &p);
}

static nr_status slice_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  nr_slice_params p;
  memcpy(&p, a->step->params, sizeof p);
  int64_t xs[NR_MAX_RANK], ys[NR_MAX_RANK], off = 0;
  strides_of(x, xs);
  strides_of(y, ys);
  nr_cuda_copy v = {.rank = x->rank, .es = (int)nr_dtype_size(x->dtype)};
  for (int d = 0; d < x->rank; d++) {
    v.dims[d] = y->dims[d], v.is[d] = xs[d] * nr_slice_step(&p, d), v.os[d] = ys[d];
    off += (int64_t)p.start[d] * xs[d];
  }
  return copy(a, v, a->out[0], (const char *)a->in[0] + off * v.es);
}

/* ---- Transpose -------------------------------------------------------------------------- */

static bool transpose_perm(const nr_node *n, const nr_slot *x, const nr_slot *y,
                           int64_t *perm) {
  size_t np = 0;
  const int64_t *p = nr_attr_ints(n, "perm", &np);
  if (!y || y->rank != x->rank || (p && (int)np != x->rank))
    return false;
  bool seen[NR_MAX_RANK] = {false};
  for (int d = 0; d < x->rank; d++) {
    perm[d] = p ? p[d] : x->rank - 1 - d;
    if (perm[d] < 0 || perm[d] >= x->rank || seen[perm[d]] || y->dims[d] != x->dims[perm[d]])
      return false;
    seen[perm[d]] = true;
  }
  return true;
}

static bool transpose_supports(const nr_tactic_ctx *c) {
  int64_t perm[NR_MAX_RANK];
  return all_plain(c, 0, 0) && c->step->n_in == 1 &&
         transpose_perm(c->node, nr_step_in(c, 0), nr_step_out(c, 0), perm);
}

static nr_status transpose_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  int64_t perm[NR_MAX_RANK], xs[NR_MAX_RANK], ys[NR_MAX_RANK];
  if (!transpose_perm(a->node, x, y, perm))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "transpose no longer supported");
  strides_of(x, xs);
  strides_of(y, ys);
  nr_cuda_copy v = {.rank = x->rank, .es = (int)nr_dtype_size(x->dtype)};
  for (int d = 0; d < x->rank; d++)
    v.dims[d] = y->dims[d], v.is[d] = xs[perm[d]], v.os[d] = ys[d];
  return copy(a, v, a->out[0], a->in[0]);
}

/* ---- Gather ----------------------------------------------------------------------------- */

static bool gather_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *i = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  if (!c->node || !plain(x) || !plain(y) || !i || i->layout != NR_LAYOUT_PLAIN ||
      (i->dtype != NR_DTYPE_INT64 && i->dtype != NR_DTYPE_INT32) || y->dtype != x->dtype)
    return false;
  int axis = axis_of(c->node, x->rank, 0);
  return axis >= 0 && axis < x->rank && y->rank == x->rank - 1 + i->rank &&
         nr_dtype_size(x->dtype) <= 8;
}

static nr_status gather_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *i = a->in_slot[1];
  int axis = axis_of(a->node, x->rank, 0);
  int64_t outer = 1, inner = 1, n_idx = 1;
  for (int d = 0; d < axis; d++)
    outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++)
    inner *= x->dims[d];
  for (int d = 0; d < i->rank; d++)
    n_idx *= i->dims[d];
  return nr_cuda_check(nr_cuda_gather(a->in[0], a->in[1], i->dtype == NR_DTYPE_INT64,
                                      a->out[0], outer, x->dims[axis], n_idx, inner,
                                      (int)nr_dtype_size(x->dtype), nr_cuda_stream(a)),
                       a->err, "gather kernel");
}

/* ---- reorders ---------------------------------------------------------------------------- */

/* Rank-4 tensors: PLAIN is [N, C, H, W], NHWC is [N, H, W, C] in memory. */
static nr_status reorder_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  const int64_t *d = x->dims;
  int64_t n = d[0], ch = d[1], h = d[2], w = d[3];
  int64_t nchw[4] = {ch * h * w, h * w, w, 1}, nhwc[4] = {h * w * ch, 1, w * ch, ch};
  nr_cuda_copy v = {4, (int)nr_dtype_size(x->dtype), {n, ch, h, w}, {0}, {0}};
  bool to_nhwc = y->layout == NR_LAYOUT_NHWC;
  memcpy(v.is, to_nhwc ? nchw : nhwc, sizeof nchw);
  memcpy(v.os, to_nhwc ? nhwc : nchw, sizeof nchw);
  return copy(a, v, a->out[0], a->in[0]);
}

/* ---- casts (cuda_half.c inserts them) --------------------------------------------------- */

/* Slot to slot of the same shape and layout, fp32 <-> fp16 by the slots' dtypes. */
static nr_status cast_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  int64_t n = (int64_t)(y->nbytes / nr_dtype_size(y->dtype));
  cudaError_t e = cudaErrorInvalidValue;
  if (x->dtype == NR_DTYPE_FLOAT && y->dtype == NR_DTYPE_FLOAT16)
    e = nr_cuda_f32_to_f16(a->in[0], a->out[0], n, nr_cuda_stream(a));
  else if (x->dtype == NR_DTYPE_FLOAT16 && y->dtype == NR_DTYPE_FLOAT)
    e = nr_cuda_f16_to_f32(a->in[0], a->out[0], n, nr_cuda_stream(a));
  if (e == cudaErrorInvalidValue && x->dtype == y->dtype)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "cast of '%s' to its own dtype", x->name);
  return nr_cuda_check(e, a->err, "cast kernel");
}

const nr_tactic nr_tactics_cuda_reorder[] = {
    {"nr_cuda_reorder_plain_to_nhwc", "", NULL, "nnroute", "reorder", NR_LAYOUT_NHWC, 0, 0,
     NULL, NULL, reorder_run, NR_PREC_FP32, NR_DEVICE_CUDA},
    {"nr_cuda_reorder_nhwc_to_plain", "", NULL, "nnroute", "reorder", NR_LAYOUT_PLAIN, 0, 0,
     NULL, NULL, reorder_run, NR_PREC_FP32, NR_DEVICE_CUDA},
    {0},
};

#define COPY(id, op, sup, prep, run)                                                   \
  {id, "", op, "nnroute", "copy", NR_LAYOUT_PLAIN, 0, 10, sup, prep, run, NR_PREC_FP32,   \
   NR_DEVICE_CUDA},

const nr_tactic nr_tactics_cuda_copy[] = {
    COPY("nr_cuda_copy_reshape", "Reshape", reshape_supports, none_prepare, reshape_run)
    COPY("nr_cuda_copy_reshape", "Flatten", reshape_supports, none_prepare, reshape_run)
    COPY("nr_cuda_copy_reshape", "Squeeze", reshape_supports, none_prepare, reshape_run)
    COPY("nr_cuda_copy_reshape", "Unsqueeze", reshape_supports, none_prepare, reshape_run)
    COPY("nr_cuda_copy_reshape", "Identity", reshape_supports, none_prepare, reshape_run)
    COPY("nr_cuda_copy_concat", "Concat", concat_supports, none_prepare, concat_run)
    COPY("nr_cuda_copy_split", "Split", split_supports, none_prepare, split_run)
    COPY("nr_cuda_copy_slice", "Slice", slice_supports, nr_step_slice_prepare, slice_run)
    COPY("nr_cuda_copy_transpose", "Transpose", transpose_supports, none_prepare,
         transpose_run)
    COPY("nr_cuda_gather", "Gather", gather_supports, none_prepare, gather_run)
    /* no op: only the fp16 pass places them */
    {"nr_cuda_cast_f32_to_f16", "", NULL, "nnroute", "cast", NR_LAYOUT_ANY, 0, 0, NULL, NULL,
     cast_run, NR_PREC_FP16, NR_DEVICE_CUDA},
    {"nr_cuda_cast_f16_to_f32", "", NULL, "nnroute", "cast", NR_LAYOUT_ANY, 0, 0, NULL, NULL,
     cast_run, NR_PREC_FP16, NR_DEVICE_CUDA},
    {0},
};
