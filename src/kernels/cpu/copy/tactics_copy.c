/* tactics_copy.c - the data-movement tactics: Reshape, Flatten, Squeeze, Unsqueeze and
 * Identity (nr_copy_reshape), Concat (nr_copy_concat), Split (nr_copy_split), Slice
 * with any constant steps (nr_copy_slice), Transpose (nr_copy_transpose) and Expand
 * (nr_copy_expand, a copy with stride 0 along the broadcast dims), for any dtype the
 * plan stores, PLAIN.
 *
 * Key decision: every one of them is a strided copy, described once (cp_view: dims with
 * source and destination strides) and walked by one loop that first merges the dims
 * both sides keep contiguous, so a run that is contiguous on both sides becomes one
 * memcpy (a channel slice of a batch-1 tensor is a single memcpy; shufflenet's channel
 * shuffle is 116 copies of a 28x28 plane). A copy whose source and destination are the
 * same bytes is skipped: the memory pass (memory.views) places reshaped tensors, the
 * inputs of a Concat and the outputs of a Split or Slice that are contiguous pieces of
 * one buffer at the same addresses, and these steps then move nothing. Unlike the
 * reference tactic they never clear their outputs first, which is what makes that safe. */
#include "ir/node_desc.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <string.h>

/* A strided copy: element (i_0, ..., i_{r-1}) goes from src + sum i_d * is[d] to
 * dst + sum i_d * os[d] (strides in elements). */
typedef struct cp_view {
  int rank;
  int64_t dims[NR_MAX_RANK], is[NR_MAX_RANK], os[NR_MAX_RANK];
} cp_view;

static void strides_of(const nr_slot *s, int64_t *st) {
  int64_t acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= s->dims[d];
  }
}

/* Drops unit dims and merges neighbours that are contiguous on both sides. */
static void cp_merge(cp_view *v) {
  int r = 0;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] == 1)
      continue;
    if (r > 0 && v->is[r - 1] == v->is[d] * v->dims[d] &&
        v->os[r - 1] == v->os[d] * v->dims[d]) {
      v->dims[r - 1] *= v->dims[d];
      v->is[r - 1] = v->is[d];
      v->os[r - 1] = v->os[d];
      continue;
    }
    v->dims[r] = v->dims[d], v->is[r] = v->is[d], v->os[r] = v->os[d];
    r++;
  }
  if (r == 0) { /* one element */
    v->dims[0] = 1, v->is[0] = v->os[0] = 1;
    r = 1;
  }
  v->rank = r;
}

static void cp_elems(char *dst, const char *src, size_t es, int64_t n, int64_t is,
                     int64_t os) {
  if (es == 4) {
    for (int64_t i = 0; i < n; i++)
      memcpy(dst + (size_t)(i * os) * 4, src + (size_t)(i * is) * 4, 4);
    return;
  }
  for (int64_t i = 0; i < n; i++)
    memcpy(dst + (size_t)(i * os) * es, src + (size_t)(i * is) * es, es);
}

/* Rows [o0, o1) of v (merged; a row is the last dim, the rows are the other dims in
 * order) from src to dst. */
static void cp_rows(void *dst, const void *src, size_t es, const cp_view *v, int64_t o0,
                    int64_t o1) {
  int last = v->rank - 1;
  bool runs = v->is[last] == 1 && v->os[last] == 1;
  int64_t idx[NR_MAX_RANK] = {0};
  for (int64_t d = last - 1, q = o0; d >= 0; d--) {
    idx[d] = q % v->dims[d];
    q /= v->dims[d];
  }
  for (int64_t o = o0; o < o1; o++) {
    int64_t si = 0, di = 0;
    for (int d = 0; d < last; d++)
      si += idx[d] * v->is[d], di += idx[d] * v->os[d];
    char *dp = (char *)dst + (size_t)di * es;
    const char *sp = (const char *)src + (size_t)si * es;
    if (runs && dp != sp)
      memcpy(dp, sp, (size_t)v->dims[last] * es);
    else if (!runs)
      cp_elems(dp, sp, es, v->dims[last], v->is[last], v->os[last]);
    for (int d = last - 1; d >= 0 && ++idx[d] == v->dims[d]; d--)
      idx[d] = 0;
  }
}

typedef struct cp_job {
  void *dst;
  const void *src;
  size_t es;
  cp_view v; /* merged; rank 1 and contiguous: split by elements, else by rows */
} cp_job;

static void cp_task(void *arg, int64_t begin, int64_t end, int thread) {
  const cp_job *j = arg;
  (void)thread;
  if (j->v.rank == 1 && j->v.is[0] == 1 && j->v.os[0] == 1)
    memcpy((char *)j->dst + (size_t)begin * j->es,
           (const char *)j->src + (size_t)begin * j->es, (size_t)(end - begin) * j->es);
  else
    cp_rows(j->dst, j->src, j->es, &j->v, begin, end);
}

/* Copies v from src to dst; nothing when both are the same contiguous bytes. From
 * CP_PARALLEL_BYTES on, the copy is split across the pool in pieces of at least
 * CP_GRAIN_BYTES: on two threads a copy reads a tensor that both cores wrote, half of
 * it from the other core's cache, and one thread alone took 1.3-1.9x its one-thread
 * time (shufflenet_v2's channel shuffles, bert's Split of the QKV product). */
#define CP_PARALLEL_BYTES (64 * 1024)
#define CP_GRAIN_BYTES (16 * 1024)
static void cp_run(const nr_exec_args *a, void *dst, const void *src, size_t es,
                   cp_view v) {
  cp_merge(&v);
  int last = v.rank - 1;
  bool runs = v.is[last] == 1 && v.os[last] == 1;
  if (dst == src && runs && v.rank == 1)
    return;
  int64_t outer = 1;
  for (int d = 0; d < last; d++)
    outer *= v.dims[d];
  int64_t row = v.dims[last] * (int64_t)es;
  cp_job j = {dst, src, es, v};
  if (outer * row < CP_PARALLEL_BYTES || !a->pool || a->step->threads == 1) {
    cp_rows(dst, src, es, &v, 0, outer);
  } else if (v.rank == 1 && runs) {
    nr_parallel_for(a->pool, v.dims[0], CP_GRAIN_BYTES / (int64_t)es, a->step->threads,
                    cp_task, &j);
  } else {
    int64_t grain = (CP_GRAIN_BYTES + row - 1) / row;
    nr_parallel_for(a->pool, outer, grain, a->step->threads, cp_task, &j);
  }
}

/* ---- supports ------------------------------------------------------------------------ */

static bool plain_sized(const nr_slot *s) {
  return s && s->layout == NR_LAYOUT_PLAIN && nr_dtype_size(s->dtype) > 0 && s->rank >= 0;
}

/* Every present slot of the step plain and of input 0's dtype (inputs from first). */
static bool all_plain(const nr_tactic_ctx *c, int in_first, int in_last) {
  const nr_slot *x = nr_step_in(c, 0);
  if (!c->node || !plain_sized(x))
    return false;
  for (int i = in_first; i <= in_last && i < c->step->n_in; i++) {
    const nr_slot *s = nr_step_in(c, i);
    if (!plain_sized(s) || s->dtype != x->dtype)
      return false;
  }
  for (int o = 0; o < c->step->n_out; o++) {
    const nr_slot *s = nr_step_out(c, o);
    if (!plain_sized(s) || s->dtype != x->dtype)
      return false;
  }
  return c->step->n_out >= 1;
}

static bool reshape_supports(const nr_tactic_ctx *c) {
  return all_plain(c, 0, 0) && nr_step_out(c, 0)->nbytes == nr_step_in(c, 0)->nbytes;
}

static bool concat_supports(const nr_tactic_ctx *c) {
  nr_concat_desc d;
  return all_plain(c, 0, c->step->n_in - 1) && c->step->n_out == 1 &&
         nr_step_pieces_ctx(c, &d);
}

static bool split_supports(const nr_tactic_ctx *c) {
  nr_split_desc d;
  return all_plain(c, 0, 0) && nr_step_pieces_ctx(c, &d);
}

static bool transpose_perm(const nr_tactic_ctx *c, int64_t *perm) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  size_t np = 0;
  const int64_t *p = nr_attr_ints(c->node, "perm", &np);
  if (!y || y->rank != x->rank || (p && (int)np != x->rank))
    return false;
  bool seen[NR_MAX_RANK] = {false};
  for (int d = 0; d < x->rank; d++) {
    perm[d] = p ? p[d] : x->rank - 1 - d;
    if (perm[d] < 0 || perm[d] >= x->rank || seen[perm[d]] ||
        y->dims[d] != x->dims[perm[d]])
      return false;
    seen[perm[d]] = true;
  }
  return true;
}

static bool transpose_supports(const nr_tactic_ctx *c) {
  int64_t perm[NR_MAX_RANK];
  return all_plain(c, 0, 0) && c->step->n_in == 1 && transpose_perm(c, perm);
}

/* Expand: input 0 broadcasts to the output (dims aligned on the right, each equal or
 * 1); the shape input is whatever gave the output its dims. */
static bool expand_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!all_plain(c, 0, 0) || c->step->n_out != 1 || y->rank < x->rank)
    return false;
  for (int d = 0; d < x->rank; d++) {
    int64_t xd = x->dims[d], yd = y->dims[y->rank - x->rank + d];
    if (xd != yd && xd != 1)
      return false;
  }
  return true;
}

/* ---- Slice ------------------------------------------------------------------------- */

/* Slice with constant arguments, any steps (plan/slice.c reads them). */
static bool slice_supports(const nr_tactic_ctx *c) {
  nr_slice_params p;
  return all_plain(c, 0, 0) && nr_step_slice(c, &p);
}

static nr_status none_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  return NR_OK;
}

/* ---- run ----------------------------------------------------------------------------- */

static nr_status reshape_run(const nr_exec_args *a) {
  if (a->out[0] != a->in[0])
    memcpy(a->out[0], a->in[0], a->out_slot[0]->nbytes);
  return NR_OK;
}

/* Concat and Split: piece i as [outer, extent, inner] inside the whole's
 * [outer, total, inner], at offset[i] along the axis (*whole_off, in elements). */
static cp_view piece_view(const nr_concat_desc *d, int i, bool to_whole,
                          int64_t *whole_off) {
  int64_t ps[3] = {d->extent[i] * d->inner, d->inner, 1};
  int64_t ws[3] = {d->total * d->inner, d->inner, 1};
  cp_view v = {.rank = 3, .dims = {d->outer, d->extent[i], d->inner}};
  for (int e = 0; e < 3; e++) {
    v.is[e] = to_whole ? ps[e] : ws[e];
    v.os[e] = to_whole ? ws[e] : ps[e];
  }
  *whole_off = d->offset[i] * d->inner;
  return v;
}

static nr_status concat_run(const nr_exec_args *a) {
  nr_concat_desc d;
  if (!nr_step_pieces(a->node, a->step, a->in_slot, a->out_slot, &d))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: unexpected shapes",
                     a->step->tactic->id);
  size_t es = nr_dtype_size(a->out_slot[0]->dtype);
  int64_t off;
  for (int i = 0; i < d.n_pieces; i++) {
    cp_view v = piece_view(&d, i, true, &off);
    cp_run(a, (char *)a->out[0] + (size_t)off * es, a->in[i], es, v);
  }
  return NR_OK;
}

static nr_status split_run(const nr_exec_args *a) {
  nr_split_desc d;
  if (!nr_step_pieces(a->node, a->step, a->in_slot, a->out_slot, &d))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: unexpected shapes",
                     a->step->tactic->id);
  size_t es = nr_dtype_size(a->in_slot[0]->dtype);
  int64_t off;
  for (int o = 0; o < d.n_pieces; o++) {
    cp_view v = piece_view(&d, o, false, &off);
    cp_run(a, a->out[o], (const char *)a->in[0] + (size_t)off * es, es, v);
  }
  return NR_OK;
}

static nr_status slice_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  nr_slice_params p;
  memcpy(&p, a->step->params, sizeof p);
  int64_t xs[NR_MAX_RANK], ys[NR_MAX_RANK], off = 0;
  strides_of(x, xs);
  strides_of(y, ys);
  cp_view v = {.rank = x->rank};
  for (int d = 0; d < x->rank; d++) {
    v.dims[d] = y->dims[d], v.is[d] = xs[d] * nr_slice_step(&p, d), v.os[d] = ys[d];
    off += (int64_t)p.start[d] * xs[d];
  }
  size_t es = nr_dtype_size(x->dtype);
  if (nr_slot_bytes(y, NR_LAYOUT_PLAIN))
    cp_run(a, a->out[0], (const char *)a->in[0] + (size_t)off * es, es, v);
  return NR_OK;
}

static nr_status transpose_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  size_t np = 0;
  const int64_t *p = nr_attr_ints(a->node, "perm", &np);
  int64_t xs[NR_MAX_RANK], ys[NR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  cp_view v = {.rank = x->rank};
  for (int d = 0; d < x->rank; d++) {
    int64_t pd = p ? p[d] : x->rank - 1 - d;
    v.dims[d] = y->dims[d], v.is[d] = xs[pd], v.os[d] = ys[d];
  }
  if (nr_slot_bytes(y, NR_LAYOUT_PLAIN))
    cp_run(a, a->out[0], a->in[0], nr_dtype_size(x->dtype), v);
  return NR_OK;
}

/* The output walked with stride 0 along the dims input 0 broadcasts. */
static nr_status expand_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  int64_t xs[NR_MAX_RANK], ys[NR_MAX_RANK];
  strides_of(x, xs);
  strides_of(y, ys);
  cp_view v = {.rank = y->rank};
  for (int d = 0; d < y->rank; d++) {
    int xd = d - (y->rank - x->rank);
    v.dims[d] = y->dims[d], v.os[d] = ys[d];
    v.is[d] = xd >= 0 && x->dims[xd] == y->dims[d] ? xs[xd] : 0;
  }
  if (y->rank == 0)
    v = (cp_view){.rank = 1, .dims = {1}, .is = {1}, .os = {1}};
  if (nr_slot_bytes(y, NR_LAYOUT_PLAIN))
    cp_run(a, a->out[0], a->in[0], nr_dtype_size(x->dtype), v);
  return NR_OK;
}

#define COPY(id, op, sup, prep, run)                                                   \
  {id, "", op, "nnroute", "copy", NR_LAYOUT_PLAIN, 0, 10, sup, prep, run},

const nr_tactic nr_tactics_cpu_copy[] = {
    COPY("nr_copy_reshape", "Reshape", reshape_supports, none_prepare, reshape_run)
    COPY("nr_copy_reshape", "Flatten", reshape_supports, none_prepare, reshape_run)
    COPY("nr_copy_reshape", "Squeeze", reshape_supports, none_prepare, reshape_run)
    COPY("nr_copy_reshape", "Unsqueeze", reshape_supports, none_prepare, reshape_run)
    COPY("nr_copy_reshape", "Identity", reshape_supports, none_prepare, reshape_run)
    COPY("nr_copy_concat", "Concat", concat_supports, none_prepare, concat_run)
    COPY("nr_copy_split", "Split", split_supports, none_prepare, split_run)
    COPY("nr_copy_slice", "Slice", slice_supports, nr_step_slice_prepare, slice_run)
    COPY("nr_copy_transpose", "Transpose", transpose_supports, none_prepare, transpose_run)
    COPY("nr_copy_expand", "Expand", expand_supports, none_prepare, expand_run)
    {0},
};
