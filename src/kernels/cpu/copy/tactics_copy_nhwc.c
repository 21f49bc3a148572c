/* tactics_copy_nhwc.c - Split and Concat along the channel axis of NHWC float32
 * tensors (table nr_tactics_cpu_copy_nhwc: nr_copy_split_nhwc, nr_copy_concat_nhwc).
 *
 * Key decision: like the NHWC pooling tactics (tactics_pool_nhwc.c) these follow
 * their input: supports() accepts a step only where the layout pass will hand every
 * activation input over in NHWC, and the layout pass then gives every piece NHWC too
 * (a piece's dims are the whole's but for the channels). In NHWC a channel piece is a
 * run of C_i floats in every pixel, so a Split or Concat is one memcpy per (pixel,
 * piece), parallel over pixels; the memory pass never makes these views (a channel
 * piece of an NHWC tensor is not contiguous), so every byte is moved, once. The
 * horizontal pass's Split after a merged conv (resnet50's layer1.0 conv1 and
 * downsample) stays in an int8 or conv.layout=nhwc chain that way, where the PLAIN
 * nr_copy_split would cost a reorder on each side. */
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <string.h>

#define GRAIN 16384

static bool is_f32_4d(const nr_slot *s) {
  return s && s->dtype == NR_DTYPE_FLOAT && s->rank == 4;
}

static bool channel_axis(const nr_node *n) {
  int64_t a = nr_attr_int(n, "axis", 0);
  return a == 1 || a == -3;
}

/* The pieces have the whole's dims but for the channels, which add up. */
static bool pieces_fit(const nr_slot *whole, const nr_slot *const *pieces, int n) {
  int64_t sum = 0;
  if (!is_f32_4d(whole) || n < 1)
    return false;
  for (int i = 0; i < n; i++) {
    const nr_slot *s = pieces[i];
    if (!is_f32_4d(s) || s->dims[0] != whole->dims[0] || s->dims[2] != whole->dims[2] ||
        s->dims[3] != whole->dims[3])
      return false;
    sum += s->dims[1];
  }
  return sum == whole->dims[1];
}

static bool split_supports(const nr_tactic_ctx *c) {
  const nr_slot *pieces[NR_STEP_MAX_IO];
  if (!c->node || !channel_axis(c->node) || c->step->n_out < 1)
    return false;
  for (int o = 0; o < c->step->n_out; o++)
    pieces[o] = nr_step_out(c, o);
  return pieces_fit(nr_step_in(c, 0), pieces, c->step->n_out) &&
         nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC);
}

static bool concat_supports(const nr_tactic_ctx *c) {
  const nr_slot *pieces[NR_STEP_MAX_IO];
  if (!c->node || !channel_axis(c->node) || c->step->n_out != 1)
    return false;
  for (int i = 0; i < c->step->n_in; i++) {
    pieces[i] = nr_step_in(c, i);
    if (!pieces[i] || pieces[i]->kind == NR_SLOT_CONST ||
        !nr_step_input_arrives(c, i, NR_LAYOUT_NHWC))
      return false;
  }
  return pieces_fit(nr_step_out(c, 0), pieces, c->step->n_in);
}

static nr_status none_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  return NR_OK;
}

/* The whole must be NHWC (the layout pass's promise; a hand-built plan may break it).
 * A piece is NHWC after the layout pass, but compile.tactic_selection=profile times a
 * candidate before that pass with only input 0 and output 0 in the tactic's layout, so
 * a PLAIN piece is copied too (channel by channel, slower). */
static nr_status check_whole(const nr_exec_args *a, const nr_slot *whole) {
  if (whole->layout == NR_LAYOUT_NHWC)
    return NR_OK;
  return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: tensor '%s' is %s, not nhwc",
                   a->step->tactic->id, whole->name ? whole->name : "?",
                   nr_layout_name(whole->layout));
}

typedef struct piece_job {
  int n;                            /* pieces */
  bool split;                       /* whole -> pieces, else pieces -> whole */
  char *whole;
  char *piece[NR_STEP_MAX_IO];
  bool plain[NR_STEP_MAX_IO];       /* the piece is PLAIN (profiling), not NHWC */
  int64_t at[NR_STEP_MAX_IO];       /* first channel of each piece in the whole */
  int64_t c[NR_STEP_MAX_IO], whole_c, hw;
} piece_job;

/* Piece i of pixel px (PLAIN piece): its c channels hw floats apart. */
static void plain_piece(const piece_job *j, int i, int64_t px, float *w) {
  int64_t n = px / j->hw, p = px % j->hw;
  float *pc = (float *)(void *)j->piece[i] + n * j->c[i] * j->hw + p;
  for (int64_t k = 0; k < j->c[i]; k++) {
    if (j->split)
      pc[k * j->hw] = w[j->at[i] + k];
    else
      w[j->at[i] + k] = pc[k * j->hw];
  }
}

/* Pixels [begin, end) of all images. */
static void piece_task(void *arg, int64_t begin, int64_t end, int thread) {
  const piece_job *j = arg;
  const size_t f = sizeof(float);
  for (int64_t px = begin; px < end; px++) {
    char *w = j->whole + (size_t)(px * j->whole_c) * f;
    for (int i = 0; i < j->n; i++) {
      char *pc = j->piece[i] + (size_t)(px * j->c[i]) * f, *wc = w + (size_t)j->at[i] * f;
      if (j->plain[i])
        plain_piece(j, i, px, (float *)(void *)w);
      else if (j->split)
        memcpy(pc, wc, (size_t)j->c[i] * f);
      else
        memcpy(wc, pc, (size_t)j->c[i] * f);
    }
  }
}

static nr_status pieces_run(const nr_exec_args *a, bool split) {
  const nr_slot *whole = split ? a->in_slot[0] : a->out_slot[0];
  nr_status e = check_whole(a, whole);
  if (e)
    return e;
  piece_job j = {.n = split ? a->step->n_out : a->step->n_in, .split = split,
                 .whole = split ? a->in[0] : a->out[0], .whole_c = whole->dims[1],
                 .hw = whole->dims[2] * whole->dims[3]};
  int64_t at = 0;
  for (int i = 0; i < j.n; i++) {
    const nr_slot *s = split ? a->out_slot[i] : a->in_slot[i];
    j.piece[i] = split ? a->out[i] : a->in[i];
    j.plain[i] = s->layout == NR_LAYOUT_PLAIN && s->dims[1] > 1 && j.hw > 1;
    if (s->layout == NR_LAYOUT_NCHW8C)
      return check_whole(a, s);
    j.at[i] = at;
    j.c[i] = s->dims[1];
    at += s->dims[1];
  }
  int64_t pixels = whole->dims[0] * j.hw;
  int64_t per = whole->dims[1] ? whole->dims[1] : 1;
  if (pixels * per < 2 * GRAIN)
    piece_task(&j, 0, pixels, 0);
  else
    nr_parallel_for(a->pool, pixels, (GRAIN + per - 1) / per, a->step->threads, piece_task, &j);
  return NR_OK;
}

static nr_status split_run(const nr_exec_args *a) { return pieces_run(a, true); }
static nr_status concat_run(const nr_exec_args *a) { return pieces_run(a, false); }

const nr_tactic nr_tactics_cpu_copy_nhwc[] = {
    {"nr_copy_split_nhwc", "", "Split", "nnroute", "copy", NR_LAYOUT_NHWC, 0, 20,
     split_supports, none_prepare, split_run},
    {"nr_copy_concat_nhwc", "", "Concat", "nnroute", "copy", NR_LAYOUT_NHWC, 0, 20,
     concat_supports, none_prepare, concat_run},
    {0},
};
