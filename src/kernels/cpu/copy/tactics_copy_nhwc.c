/* tactics_copy_nhwc.c - Split and Concat along the channel axis of NHWC float32
 * tensors (table nr_tactics_cpu_copy_nhwc: nr_copy_split_nhwc, nr_copy_concat_nhwc).
 *
 * Key decision: like the NHWC pooling tactics (tactics_pool_nhwc.c) these follow
 * their input: supports() accepts a step only where the layout pass will hand every
 * activation input over in NHWC, and the layout pass then gives every piece NHWC too
 * (a piece's dims are the whole's but for the channels). In NHWC a channel piece is a
 * run of C_i floats in every pixel, so a Split or Concat is one memcpy per (pixel,
 * piece), parallel over pixels; the memory pass never makes these views (a channel
 * piece of an NHWC tensor is not contiguous), so every byte is moved, once. Which
 * nodes those are is the node's nr_concat_desc (ir/node_desc.h, as the PLAIN copies
 * read it) with the channels as its axis; run() then walks the slots' channel counts
 * (it needs no node, so hand-built steps run too). The
 * horizontal pass's Split after a merged conv (resnet50's layer1.0 conv1 and
 * downsample) stays in an int8 or conv.layout=nhwc chain that way, where the PLAIN
 * nr_copy_split would cost a reorder on each side. */
#include "ir/node_desc.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <string.h>

#define GRAIN 16384

static bool is_f32_4d(const nr_slot *s) {
  return s && s->dtype == NR_DTYPE_FLOAT && s->rank == 4;
}

/* The node's description (ir/node_desc.h) when it splits or joins the channels of
 * float32 4-D tensors. */
static bool channel_pieces(const nr_node *n, const nr_step *st, const nr_slot *const *in,
                           const nr_slot *const *out, nr_concat_desc *d) {
  nr_node_io io;
  bool split = !strcmp(n->op_type, "Split");
  const nr_slot *const *pieces = split ? out : in;
  int count = split ? st->n_out : st->n_in;
  if (!is_f32_4d(split ? in[0] : out[0]))
    return false;
  for (int i = 0; i < count; i++)
    if (!is_f32_4d(pieces[i]))
      return false;
  nr_node_io_from_slots(st->n_in, in, st->n_out, out, &io);
  nr_status e = split ? nr_split_desc_parse(n, &io, d, NULL)
                      : nr_concat_desc_parse(n, &io, d, NULL);
  return !e && d->axis == 1;
}

static bool ctx_pieces(const nr_tactic_ctx *c, nr_concat_desc *d) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  for (int i = 0; i < c->step->n_in; i++)
    in[i] = nr_step_in(c, i);
  for (int o = 0; o < c->step->n_out; o++)
    out[o] = nr_step_out(c, o);
  return channel_pieces(c->node, c->step, in, out, d);
}

static bool split_supports(const nr_tactic_ctx *c) {
  nr_split_desc d;
  return c->node && c->step->n_out >= 1 && ctx_pieces(c, &d) &&
         nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC);
}

static bool concat_supports(const nr_tactic_ctx *c) {
  nr_concat_desc d;
  if (!c->node || c->step->n_out != 1)
    return false;
  for (int i = 0; i < c->step->n_in; i++) {
    const nr_slot *s = nr_step_in(c, i);
    if (!s || s->kind == NR_SLOT_CONST || !nr_step_input_arrives(c, i, NR_LAYOUT_NHWC))
      return false;
  }
  return ctx_pieces(c, &d);
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
