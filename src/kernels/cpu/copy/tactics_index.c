/* tactics_index.c - the data-movement tactics that compute where each piece comes
 * from: Pad (nr_copy_pad: constant, reflect, edge and wrap, negative pads included,
 * pads and constant_value constants) and Gather (nr_copy_gather: any axis, int64 or
 * int32 indices, negative ones wrapped), for any dtype the plan stores, PLAIN.
 *
 * Key decision: both move whole rows. Pad resolves its amounts once at prepare into a
 * packed record (pad_rec) and then, per output row, finds the source row through the
 * reference's index rule (nr_pad_source, kernels/ref/pad_rules.h: the same triangle wave for reflect) and copies
 * the row's interior with one memcpy, only its padded ends element by element.
 * Gather copies one block of the inner dims per (outer, index) pair - an embedding
 * lookup is one row memcpy per token - after checking every index once, so an index
 * out of range fails the step with a message instead of reading outside the table. */
#include "kernels/ref/pad_rules.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <string.h>

/* Outputs from this size on are split across the pool in pieces of at least
 * GRAIN_BYTES (the copy family's rule, tactics_copy.c). */
#define PARALLEL_BYTES (64 * 1024)
#define GRAIN_BYTES (16 * 1024)

static bool plain_sized(const nr_slot *s) {
  return s && s->layout == NR_LAYOUT_PLAIN && nr_dtype_size(s->dtype) > 0;
}

static void strides_of(int rank, const int64_t *dims, int64_t *st) {
  int64_t acc = 1;
  for (int d = rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= dims[d];
  }
}

/* Rows [0, rows) of `bytes_per_row` each through fn, on the pool when big enough. */
static void run_rows(const nr_exec_args *a, int64_t rows, int64_t bytes_per_row,
                     nr_task_fn fn, void *job) {
  if (rows * bytes_per_row < PARALLEL_BYTES || !a->pool || a->step->threads == 1 ||
      rows < 2) {
    fn(job, 0, rows, 0);
    return;
  }
  int64_t grain = (GRAIN_BYTES + bytes_per_row - 1) / (bytes_per_row ? bytes_per_row : 1);
  nr_parallel_for(a->pool, rows, grain, a->step->threads, fn, job);
}

/* ---- Pad --------------------------------------------------------------------------- */


/* What prepare resolves (the step's packed data): mode, per-axis begin and end pads
 * (negative: crop) and the fill element's bytes. */
typedef struct pad_rec {
  int32_t mode, rank;
  int64_t begin[NR_MAX_RANK], end[NR_MAX_RANK];
  uint8_t fill[16];
} pad_rec;

static int pad_mode(const nr_node *n) {
  static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
  const char *m = nr_attr_string(n, "mode", "constant");
  for (int i = 0; i < 4; i++)
    if (!strcmp(m, names[i]))
      return i;
  return -1;
}

/* Constant integer list input i (int64 or int32) into out; false when not one. */
static bool const_ints(const nr_tactic_ctx *c, int i, int64_t *out, int max, int *n) {
  const nr_slot *s = nr_step_in(c, i);
  const void *d = nr_step_const(c, i);
  if (!s || !d || s->rank > 1 ||
      (s->dtype != NR_DTYPE_INT64 && s->dtype != NR_DTYPE_INT32))
    return false;
  int64_t cnt = s->rank == 1 ? s->dims[0] : 1;
  if (cnt > max)
    return false;
  for (int64_t k = 0; k < cnt; k++)
    out[k] = s->dtype == NR_DTYPE_INT64 ? ((const int64_t *)d)[k]
                                        : ((const int32_t *)d)[k];
  *n = (int)cnt;
  return true;
}

/* The pads of the node (attribute before opset 11, else the constant inputs pads and,
 * from opset 18, axes) per axis; false when they are not constants this reads. */
static bool pad_amounts(const nr_tactic_ctx *c, int rank, pad_rec *p) {
  int64_t pads[2 * NR_MAX_RANK], axes[NR_MAX_RANK];
  int np = 0, na = rank;
  for (int d = 0; d < rank; d++)
    axes[d] = d, p->begin[d] = p->end[d] = 0;
  if (c->node->opset < 11) {
    size_t cnt;
    const int64_t *a = nr_attr_ints(c->node, "pads", &cnt);
    if (!a || cnt > 2 * NR_MAX_RANK)
      return false;
    memcpy(pads, a, cnt * sizeof *a);
    np = (int)cnt;
  } else if (!const_ints(c, 1, pads, 2 * NR_MAX_RANK, &np) ||
             (nr_step_in(c, 3) && !const_ints(c, 3, axes, NR_MAX_RANK, &na))) {
    return false;
  }
  if (np != 2 * na)
    return false;
  for (int i = 0; i < na; i++) {
    int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax < 0 || ax >= rank)
      return false;
    p->begin[ax] = pads[i];
    p->end[ax] = pads[na + i];
  }
  return true;
}

/* The fill element: the `value` attribute before opset 11 (float32 data only), else
 * constant_value (a constant of the data's dtype) or zero. */
static bool pad_fill(const nr_tactic_ctx *c, const nr_slot *x, pad_rec *p) {
  size_t es = nr_dtype_size(x->dtype);
  memset(p->fill, 0, sizeof p->fill);
  if (es > sizeof p->fill)
    return false;
  if (c->node->opset < 11) {
    float v = nr_attr_float(c->node, "value", 0.0f);
    if (v != 0.0f && x->dtype != NR_DTYPE_FLOAT)
      return false;
    memcpy(p->fill, &v, x->dtype == NR_DTYPE_FLOAT ? sizeof v : 0);
    return true;
  }
  const nr_slot *cv = nr_step_in(c, 2);
  if (!cv || nr_slot_bytes(cv, NR_LAYOUT_PLAIN) == 0)
    return true;
  const void *d = nr_step_const(c, 2);
  if (!d || cv->dtype != x->dtype)
    return false;
  memcpy(p->fill, d, es);
  return true;
}

static bool pad_resolve(const nr_tactic_ctx *c, pad_rec *p) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  memset(p, 0, sizeof *p);
  if (!c->node || !plain_sized(x) || !plain_sized(y) || y->dtype != x->dtype ||
      c->step->n_out != 1 || x->rank < 1 || y->rank != x->rank)
    return false;
  p->mode = pad_mode(c->node);
  p->rank = x->rank;
  if (p->mode < 0 || !pad_amounts(c, x->rank, p) || !pad_fill(c, x, p))
    return false;
  for (int d = 0; d < x->rank; d++) {
    int64_t b = p->begin[d], e = p->end[d];
    int64_t kept = x->dims[d] - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
    if (y->dims[d] != x->dims[d] + b + e ||
        (p->mode != NR_PAD_CONSTANT && kept <= 0 && (b > 0 || e > 0)))
      return false; /* the reference reports what is wrong */
  }
  return true;
}

static bool pad_supports(const nr_tactic_ctx *c) {
  pad_rec p;
  return pad_resolve(c, &p);
}

static nr_status pad_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  pad_rec p;
  if (!pad_resolve(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: pad no longer supported",
                     step->tactic->id);
  for (int i = 1; i < step->n_in; i++)
    nr_step_absorb(step, i);
  step->packed_size = sizeof p;
  return nr_plan_add_weights(plan, &p, sizeof p, &step->packed_offset, c->err);
}

typedef struct pad_job {
  const pad_rec *p;
  const char *x;
  char *y;
  size_t es;
  int rank;
  int64_t xd[NR_MAX_RANK], yd[NR_MAX_RANK], xs[NR_MAX_RANK];
} pad_job;

static void fill_elems(char *dst, const uint8_t *fill, size_t es, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    memcpy(dst + (size_t)i * es, fill, es);
}

/* Output elements [o0, o1) of a row whose source row starts at src. */
static void pad_ends(const pad_job *j, char *row, const char *src, int64_t o0,
                     int64_t o1) {
  int last = j->rank - 1;
  for (int64_t o = o0; o < o1; o++) {
    int64_t s = nr_pad_source((nr_pad_mode)j->p->mode, o, j->xd[last], j->p->begin[last], j->p->end[last]);
    memcpy(row + (size_t)o * j->es,
           s < 0 ? (const void *)j->p->fill : src + (size_t)s * j->es, j->es);
  }
}

/* One output row (all dims but the last at idx). */
static void pad_row(const pad_job *j, const int64_t *idx, char *row) {
  int last = j->rank - 1;
  int64_t off = 0, w = j->yd[last];
  for (int d = 0; d < last; d++) {
    int64_t s = nr_pad_source((nr_pad_mode)j->p->mode, idx[d], j->xd[d], j->p->begin[d], j->p->end[d]);
    if (s < 0) {
      fill_elems(row, j->p->fill, j->es, w);
      return;
    }
    off += s * j->xs[d];
  }
  const char *src = j->x + (size_t)off * j->es;
  int64_t b = j->p->begin[last], e = j->p->end[last];
  int64_t lo = b < 0 ? -b : 0, hi = j->xd[last] - (e < 0 ? -e : 0);
  int64_t m0 = b + lo < 0 ? 0 : b + lo, m1 = b + hi > w ? w : b + hi;
  if (m1 <= m0) {
    pad_ends(j, row, src, 0, w);
    return;
  }
  pad_ends(j, row, src, 0, m0);
  memcpy(row + (size_t)m0 * j->es, src + (size_t)(m0 - b) * j->es,
         (size_t)(m1 - m0) * j->es);
  pad_ends(j, row, src, m1, w);
}

static void pad_task(void *arg, int64_t begin, int64_t end, int thread) {
  const pad_job *j = arg;
  int last = j->rank - 1;
  int64_t idx[NR_MAX_RANK] = {0};
  for (int64_t d = last - 1, q = begin; d >= 0; d--) {
    idx[d] = q % j->yd[d];
    q /= j->yd[d];
  }
  size_t row_bytes = (size_t)j->yd[last] * j->es;
  for (int64_t r = begin; r < end; r++) {
    pad_row(j, idx, j->y + (size_t)r * row_bytes);
    for (int d = last - 1; d >= 0 && ++idx[d] == j->yd[d]; d--)
      idx[d] = 0;
  }
}

static nr_status pad_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *y = a->out_slot[0];
  const pad_rec *p = a->packed;
  if (!p || a->step->packed_size != sizeof *p || p->rank != x->rank || p->mode < 0 ||
      p->mode > NR_PAD_WRAP)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: bad packed record",
                     a->step->tactic->id);
  pad_job j = {.p = p,
               .x = a->in[0],
               .y = a->out[0],
               .es = nr_dtype_size(x->dtype),
               .rank = x->rank};
  memcpy(j.xd, x->dims, sizeof j.xd);
  memcpy(j.yd, y->dims, sizeof j.yd);
  strides_of(x->rank, x->dims, j.xs);
  int64_t rows = 1;
  for (int d = 0; d < x->rank - 1; d++)
    rows *= y->dims[d];
  int64_t row_bytes = y->dims[x->rank - 1] * (int64_t)j.es;
  if (row_bytes > 0)
    run_rows(a, rows, row_bytes, pad_task, &j);
  return NR_OK;
}

/* ---- Gather ------------------------------------------------------------------------ */

static bool gather_axis(const nr_tactic_ctx *c, int *axis) {
  const nr_slot *x = nr_step_in(c, 0), *ind = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  if (!c->node || c->step->n_in != 2 || c->step->n_out != 1 || !plain_sized(x) ||
      !plain_sized(y) || !ind || ind->layout != NR_LAYOUT_PLAIN || y->dtype != x->dtype ||
      (ind->dtype != NR_DTYPE_INT64 && ind->dtype != NR_DTYPE_INT32) || x->rank < 1)
    return false;
  int64_t ax = nr_attr_int(c->node, "axis", 0);
  ax += ax < 0 ? x->rank : 0;
  if (ax < 0 || ax >= x->rank || y->rank != x->rank + ind->rank - 1)
    return false;
  int r = 0; /* y = x.dims[:axis] + ind.dims + x.dims[axis+1:] */
  for (int d = 0; d < ax; d++)
    if (y->dims[r++] != x->dims[d])
      return false;
  for (int d = 0; d < ind->rank; d++)
    if (y->dims[r++] != ind->dims[d])
      return false;
  for (int d = (int)ax + 1; d < x->rank; d++)
    if (y->dims[r++] != x->dims[d])
      return false;
  *axis = (int)ax;
  return true;
}

static bool gather_supports(const nr_tactic_ctx *c) {
  int axis;
  return gather_axis(c, &axis);
}

static nr_status gather_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  int axis;
  if (!gather_axis(c, &axis))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: gather no longer supported",
                     step->tactic->id);
  step->params[0] = (uint8_t)axis;
  return NR_OK;
}

typedef struct gather_job {
  const char *x;
  char *y;
  const void *ind;
  bool i64;
  int64_t n, dim;
  size_t block; /* bytes of the inner dims */
} gather_job;

static int64_t index_at(const gather_job *j, int64_t k) {
  int64_t i = j->i64 ? ((const int64_t *)j->ind)[k] : ((const int32_t *)j->ind)[k];
  return i < 0 ? i + j->dim : i;
}

/* Output blocks [begin, end): block r is (outer r / n, index r % n). */
static void gather_task(void *arg, int64_t begin, int64_t end, int thread) {
  const gather_job *j = arg;
  for (int64_t r = begin; r < end; r++) {
    int64_t o = r / j->n, i = index_at(j, r % j->n);
    memcpy(j->y + (size_t)r * j->block, j->x + (size_t)(o * j->dim + i) * j->block,
           j->block);
  }
}

static nr_status gather_run(const nr_exec_args *a) {
  const nr_slot *x = a->in_slot[0], *ind = a->in_slot[1];
  int axis = a->step->params[0];
  if (axis >= x->rank)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: bad axis", a->step->tactic->id);
  int64_t outer = 1, inner = 1, n = 1;
  for (int d = 0; d < axis; d++)
    outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++)
    inner *= x->dims[d];
  for (int d = 0; d < ind->rank; d++)
    n *= ind->dims[d];
  gather_job j = {.x = a->in[0],
                  .y = a->out[0],
                  .ind = a->in[1],
                  .i64 = ind->dtype == NR_DTYPE_INT64,
                  .n = n,
                  .dim = x->dims[axis],
                  .block = (size_t)inner * nr_dtype_size(x->dtype)};
  for (int64_t k = 0; k < n; k++) {
    int64_t i = index_at(&j, k);
    if (i < 0 || i >= j.dim)
      return nr_errorf(
          a->err, NR_ERR_RUNTIME,
          "%s: index %lld at position %lld of '%s' is out of range [%lld, %lld)",
          a->step->tactic->id, (long long)(i < 0 ? i - j.dim : i), (long long)k,
          ind->name ? ind->name : "?", (long long)-j.dim, (long long)j.dim);
  }
  if (outer * n > 0 && j.block > 0)
    run_rows(a, outer * n, (int64_t)j.block, gather_task, &j);
  return NR_OK;
}

const nr_tactic nr_tactics_cpu_index[] = {
    {"nr_copy_pad", "", "Pad", "nnroute", "copy", NR_LAYOUT_PLAIN, 0, 10, pad_supports,
     pad_prepare, pad_run},
    {"nr_copy_gather", "", "Gather", "nnroute", "copy", NR_LAYOUT_PLAIN, 0, 10,
     gather_supports, gather_prepare, gather_run},
    {0},
};
