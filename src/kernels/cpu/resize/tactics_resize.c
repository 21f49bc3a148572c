/* tactics_resize.c - the fast tactics of Resize and Upsample (nr_f32_resize__avx2,
 * nr_f32_resize__portable): float32, modes nearest and linear, every coordinate
 * transformation but tf_crop_and_resize, every nearest rounding, scales or sizes,
 * opsets 7 to 19, on tensors whose leading axes stay as they are (NCHW images resized
 * in H and W, or a last axis alone). Cubic, antialiasing, crop-and-resize and resizes
 * of a leading axis stay on the reference tactic.
 *
 * Key decision: prepare() turns the node into two tables of (index, weight) pairs,
 * one entry per output row and one per output column, computed in double exactly as
 * the reference executor computes its taps (ops_resize.c), and packs them into the
 * engine; run() is a loop over output rows of every (n, c) plane in parallel
 * (resize_rows.c). Scales must be a constant; sizes need not be, since the output
 * shape already holds them. */
#include "kernels/cpu/resize/resize.h"
#include "kernels/ref/resize_rules.h"

#include "util/error.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RZ_MAX_THREADS 16 /* threads a step runs on (its scratch has a row for each) */
#define RZ_GRAIN 16384    /* output floats per chunk of work, at least */


typedef struct rz_attrs {
  int mode, ctm, nearest;
  bool exclude_outside, stretch;
} rz_attrs;

/* ---- reading the node ------------------------------------------------------------- */

static int lookup(const char *s, const char *const *names, int count) {
  for (int i = 0; i < count; i++)
    if (!strcmp(s, names[i]))
      return i;
  return -1;
}

static bool is_legacy(const nr_node *n) {
  return strcmp(n->op_type, "Resize") != 0 || n->opset < 11;
}

static bool read_attrs(const nr_node *n, rz_attrs *a) {
  static const char *const modes[] = {"nearest", "linear", "bilinear"};
  bool legacy = is_legacy(n);
  a->mode = lookup(nr_attr_string(n, "mode", "nearest"), modes, legacy ? 3 : 2);
  if (a->mode == 2)
    a->mode = NR_RESIZE_LINEAR;
  a->exclude_outside = nr_attr_int(n, "exclude_outside", 0) != 0;
  a->stretch = true;
  a->ctm = NR_RESIZE_CT_ASYMMETRIC;
  a->nearest = NR_RESIZE_NEAREST_LEGACY;
  if (a->mode < 0)
    return false;
  if (legacy)
    return true;
  if (a->mode == NR_RESIZE_LINEAR && nr_attr_int(n, "antialias", 0))
    return false;
  /* all but tf_crop_and_resize, the last one: the reference's */
  a->ctm = lookup(nr_attr_string(n, "coordinate_transformation_mode", "half_pixel"),
                  nr_resize_ctm_names, NR_RESIZE_CT_TF_CROP_AND_RESIZE);
  a->nearest = lookup(nr_attr_string(n, "nearest_mode", "round_prefer_floor"),
                      nr_resize_nearest_names, 4);
  a->stretch = !strcmp(nr_attr_string(n, "keep_aspect_ratio_policy", "stretch"),
                       "stretch");
  return a->ctm >= 0 && a->nearest >= 0;
}

static int64_t slot_count(const nr_slot *s) {
  int64_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= s->dims[d];
  return n;
}

/* Input i when present and not empty (an empty tensor stands for an absent one). */
static const nr_slot *given(const nr_tactic_ctx *c, int i) {
  const nr_slot *s = i < c->step->n_in ? nr_step_in(c, i) : NULL;
  return s && slot_count(s) > 0 ? s : NULL;
}

/* The axes the scales or sizes list (attribute axes, else all). */
static bool read_axes(const nr_node *n, int rank, int *axes, int *n_axes) {
  size_t na = 0;
  const int64_t *ax = nr_attr_ints(n, "axes", &na);
  *n_axes = ax ? (int)na : rank;
  if (na > (size_t)rank)
    return false;
  for (int i = 0; i < *n_axes; i++) {
    int64_t d = ax ? (ax[i] < 0 ? ax[i] + rank : ax[i]) : i;
    if (d < 0 || d >= rank)
      return false;
    axes[i] = (int)d;
  }
  return true;
}

/* Scales from constant float input i (count entries). */
static bool const_scales(const nr_tactic_ctx *c, int i, int count, double *s) {
  const nr_slot *sl = given(c, i);
  const float *f = nr_step_const(c, i);
  if (!sl || !f || sl->dtype != NR_DTYPE_FLOAT || sl->rank != 1 || sl->dims[0] != count)
    return false;
  for (int k = 0; k < count; k++)
    s[k] = f[k];
  return true;
}

/* The scale of every axis of X as the reference derives it. */
static bool read_scales(const nr_tactic_ctx *c, const rz_attrs *a, const nr_slot *x,
                        const nr_slot *y, double *scale) {
  const nr_node *n = c->node;
  int axes[NR_MAX_RANK], n_axes;
  double s[NR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    scale[d] = 1.0;
  if (!read_axes(n, x->rank, axes, &n_axes))
    return false;
  if (!strcmp(n->op_type, "Upsample") && n->opset < 9) {
    size_t cnt = 0;
    const float *f = nr_attr_floats(n, "scales", &cnt);
    if (!f || cnt != (size_t)x->rank)
      return false;
    for (int d = 0; d < x->rank; d++)
      scale[d] = f[d];
    return true;
  }
  if (is_legacy(n)) {
    if (!const_scales(c, 1, n_axes, s))
      return false;
  } else if (given(c, 2)) {
    if (given(c, 3) || !const_scales(c, 2, n_axes, s))
      return false;
  } else if (given(c, 3) && a->stretch) {
    for (int i = 0; i < n_axes; i++)
      s[i] = (double)y->dims[axes[i]] / (double)x->dims[axes[i]];
  } else {
    return false;
  }
  for (int i = 0; i < n_axes; i++) {
    if (!(s[i] > 0) || !isfinite(s[i]))
      return false;
    scale[axes[i]] = s[i];
  }
  return true;
}

/* The record of c's step; false when these tactics do not run it. */
static bool decode(const nr_tactic_ctx *c, rz_attrs *a, double *sh, double *sw,
                   nr_resize_p *p) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  double scale[NR_MAX_RANK];
  memset(p, 0, sizeof *p);
  if (!c->node || !x || !y || x->dtype != NR_DTYPE_FLOAT || y->dtype != NR_DTYPE_FLOAT ||
      x->rank < 1 || y->rank != x->rank || c->step->n_out != 1 ||
      !read_attrs(c->node, a) || !read_scales(c, a, x, y, scale))
    return false;
  int r = x->rank;
  p->planes = 1;
  for (int d = 0; d < r; d++) {
    if (x->dims[d] < 1 || y->dims[d] < 1 || x->dims[d] > INT32_MAX ||
        y->dims[d] > INT32_MAX)
      return false;
    if (d < r - 2 && (y->dims[d] != x->dims[d] || fabs(scale[d] - 1.0) > 1e-9))
      return false;
    if (d < r - 2)
      p->planes *= x->dims[d];
  }
  p->mode = a->mode;
  p->ih = r >= 2 ? (int32_t)x->dims[r - 2] : 1;
  p->oh = r >= 2 ? (int32_t)y->dims[r - 2] : 1;
  p->iw = (int32_t)x->dims[r - 1];
  p->ow = (int32_t)y->dims[r - 1];
  *sh = r >= 2 ? scale[r - 2] : 1.0;
  *sw = scale[r - 1];
  return true;
}

static bool resize_supports(const nr_tactic_ctx *c) {
  rz_attrs a;
  double sh, sw;
  nr_resize_p p;
  return decode(c, &a, &sh, &sw, &p);
}

/* ---- the tables --------------------------------------------------------------------- */

static int32_t clamp_index(int64_t i, int64_t in) {
  return (int32_t)(i < 0 ? 0 : i >= in ? in - 1 : i);
}

/* Entry j of one axis: the two linear taps around x (the reference's window of two,
 * weights 1 - |i - x|, renormalized when exclude_outside drops a tap outside). */
static void linear_taps(const rz_attrs *a, double x, int64_t in, int32_t *i0, int32_t *i1,
                        float *w0, float *w1) {
  int64_t start = (int64_t)ceil(x) - 1;
  double w[2], sum = 0;
  for (int k = 0; k < 2; k++) {
    int64_t i = start + k;
    double v = 1 - fabs((double)i - x);
    w[k] = v > 0 ? v : 0;
    if (a->exclude_outside && (i < 0 || i >= in))
      w[k] = 0;
    sum += w[k];
  }
  if (a->exclude_outside && sum != 0)
    w[0] /= sum, w[1] /= sum;
  *i0 = clamp_index(start, in), *i1 = clamp_index(start + 1, in);
  *w0 = (float)w[0], *w1 = (float)w[1];
}

/* One axis of n = out entries at tab (i0[n] i1[n] w0[n] w1[n]). */
static void axis_table(const rz_attrs *a, int64_t in, int64_t out, double scale,
                       int32_t *tab) {
  int32_t *i0 = tab, *i1 = tab + out;
  float *w0 = (float *)(tab + 2 * out), *w1 = (float *)(tab + 3 * out);
  bool identity = out == in && fabs(scale - 1.0) <= 1e-9; /* the reference skips it */
  for (int64_t j = 0; j < out; j++) {
    double x = nr_resize_source_coord(a->ctm, (double)j, in, out, scale, 0, 0);
    if (identity || a->mode == NR_RESIZE_NEAREST) {
      int64_t near = nr_resize_nearest_index(a->nearest, x, scale);
      i0[j] = i1[j] = identity ? (int32_t)j : clamp_index(near, in);
      w0[j] = 1.0f, w1[j] = 0.0f;
    } else {
      linear_taps(a, x, in, &i0[j], &i1[j], &w0[j], &w1[j]);
    }
  }
}

/* Nearest columns that repeat each input column a whole number of times. */
static int32_t column_repeat(const nr_resize_p *p, const int32_t *i0) {
  if (p->mode != NR_RESIZE_NEAREST || p->ow % p->iw)
    return 0;
  int32_t r = p->ow / p->iw;
  for (int64_t j = 0; j < p->ow; j++)
    if (i0[j] != j / r)
      return 0;
  return r;
}

static uint64_t row_floats(const nr_resize_p *p) {
  return ((uint64_t)p->iw + 15) / 16 * 16;
}

static nr_status resize_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  rz_attrs a;
  double sh, sw;
  nr_resize_p p;
  if (!decode(c, &a, &sh, &sw, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: the node no longer decodes",
                     st->tactic->id);
  uint64_t bytes = nr_resize_table_bytes(&p);
  int32_t *tab = malloc(bytes);
  if (!tab)
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: no memory for %llu bytes of tables",
                     st->tactic->id, (unsigned long long)bytes);
  axis_table(&a, p.ih, p.oh, sh, tab);
  axis_table(&a, p.iw, p.ow, sw, tab + 4 * (int64_t)p.oh);
  p.xrep = column_repeat(&p, tab + 4 * (int64_t)p.oh);
  nr_status s = nr_plan_add_weights(plan, tab, bytes, &st->packed_offset, c->err);
  free(tab);
  if (s)
    return s;
  st->packed_size = bytes;
  st->scratch = p.mode == NR_RESIZE_LINEAR ? RZ_MAX_THREADS * row_floats(&p) * 4 : 0;
  memcpy(st->params, &p, sizeof p);
  for (int i = 1; i < st->n_in; i++) {
    const nr_slot *in = nr_step_in(c, i);
    if (in && in->kind == NR_SLOT_CONST)
      nr_step_absorb(st, i);
  }
  return NR_OK;
}

/* ---- run ------------------------------------------------------------------------------ */

static bool axis_ok(const nr_resize_axis *ax, int64_t n, int64_t in) {
  for (int64_t j = 0; j < n; j++)
    if (ax->i0[j] < 0 || ax->i0[j] >= in || ax->i1[j] < 0 || ax->i1[j] >= in)
      return false;
  return true;
}

/* The record and tables, checked against the step before use (they come from a
 * file). */
static bool job_init(const nr_exec_args *a, const nr_resize_p *p, nr_resize_job *j) {
  if (p->ih < 1 || p->iw < 1 || p->oh < 1 || p->ow < 1 || p->planes < 1 ||
      (p->mode != NR_RESIZE_NEAREST && p->mode != NR_RESIZE_LINEAR) || !a->packed ||
      a->step->packed_size != nr_resize_table_bytes(p) ||
      (p->xrep && (p->xrep < 0 || (int64_t)p->xrep * p->iw != p->ow)) ||
      (p->mode == NR_RESIZE_LINEAR &&
       a->step->scratch < RZ_MAX_THREADS * row_floats(p) * 4))
    return false;
  *j = (nr_resize_job){p,
                       nr_resize_axis_at(a->packed, 0, p->oh),
                       nr_resize_axis_at(a->packed, p->oh, p->ow),
                       a->in[0],
                       a->out[0],
                       p->mode == NR_RESIZE_LINEAR ? a->scratch : NULL,
                       (int64_t)row_floats(p)};
  return axis_ok(&j->ry, p->oh, p->ih) && axis_ok(&j->rx, p->ow, p->iw);
}

typedef struct rz_task {
  nr_resize_p p; /* a copy: step->params is not 8-byte aligned */
  nr_resize_job j;
  bool avx2;
} rz_task;

static void resize_task(void *arg, int64_t begin, int64_t end, int thread) {
  const rz_task *t = arg;
  (t->avx2 ? nr_f32_resize_rows__avx2 : nr_f32_resize_rows__portable)(&t->j, begin, end,
                                                                      thread);
}

static nr_status resize_run(const nr_exec_args *a) {
  rz_task t = {.avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0};
  memcpy(&t.p, a->step->params, sizeof t.p);
  if (!job_init(a, &t.p, &t.j))
    return nr_errorf(a->err, NR_ERR_INVALID_MODEL, "%s: bad resize tables",
                     a->step->tactic->id);
  const nr_resize_p *p = t.j.p;
  int64_t rows = p->planes * p->oh, grain = RZ_GRAIN / p->ow + 1;
  int threads = nr_threadpool_size(a->pool);
  if (a->step->threads > 0 && a->step->threads < threads)
    threads = a->step->threads;
  threads = threads < RZ_MAX_THREADS ? threads : RZ_MAX_THREADS;
  if (threads <= 1 || rows < 2 * grain)
    resize_task(&t, 0, rows, 0);
  else
    nr_parallel_for(a->pool, rows, grain, threads, resize_task, &t);
  return NR_OK;
}

#define RESIZE_ROWS(id, isa, prio)                                                       \
  {id,  "",   "Resize",        "nnroute",      "resize",  NR_LAYOUT_PLAIN,               \
   isa, prio, resize_supports, resize_prepare, resize_run},                              \
      {id,  "",   "Upsample",      "nnroute",      "resize",  NR_LAYOUT_PLAIN,           \
       isa, prio, resize_supports, resize_prepare, resize_run},

const nr_tactic nr_tactics_cpu_resize[] = {
    RESIZE_ROWS("nr_f32_resize__avx2", NR_ISA_AVX2, 20)
        RESIZE_ROWS("nr_f32_resize__portable", 0, 10){0},
};
