/* deconv_onednn.c - onednn_deconv: ConvTranspose through oneDNN 2.6's deconvolution
 * primitive (float32, 2-D, PLAIN, any group, stride, padding, output_padding,
 * output_shape and auto_pad, dilation; bias), and the reading of a ConvTranspose
 * node every deconvolution tactic shares (nr_deconv_parse).
 *
 * Key decision: the same life cycle as onednn_conv (conv_onednn.c): oneDNN primitives
 * cannot be serialized, so prepare() stores only the params record, and the primitive
 * is created on first use and kept in a process-wide, mutex-protected cache keyed by
 * the record and the OpenMP team; the weights are reordered from ONNX's [C, M/group,
 * kh, kw] (oneDNN's iohw / giohw) into the primitive's format in the step's scratch on
 * every run; X and Y are reordered into the blocked formats the primitive picks (its
 * JIT kernels; on plain NCHW it falls back to a GEMM path) and back, in scratch too.
 * ConvTranspose's output_padding and output_shape only move the end
 * padding, which is read back from Y's shape: pad_end = (in - 1) * stride + extent -
 * pad_begin - out. It is negative where output_padding exceeds the end pad (a
 * stride-2 upsample with output_padding 1 and no pads); oneDNN takes that (the
 * outputs past the input's reach get only the bias), but supports() then asks for the
 * primitive itself, so a oneDNN that refuses leaves the node to the reference. */
#include "kernels/cpu/conv/deconv.h"
#include "kernels/cpu/extlib.h"

#include "kernels/ref/conv_util.h"
#include "util/error.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading the node ------------------------------------------------------------- */

static bool fits16(int64_t v, int64_t lo) { return v >= lo && v <= INT16_MAX; }

/* Begin pad of spatial dim i as the reference resolves it against output size out
 * (explicit pads, or auto_pad / output_shape splitting the total). */
static int64_t pad_begin(const nr_window *win, int i, int64_t out_pad, bool target) {
  if (!target && win->auto_pad != NR_AUTO_PAD_SAME_UPPER &&
      win->auto_pad != NR_AUTO_PAD_SAME_LOWER)
    return win->auto_pad == NR_AUTO_PAD_VALID ? 0 : win->pad_b[i];
  int64_t natural = win->stride[i] * (win->in[i] - 1) + out_pad + nr_window_extent(win, i);
  int64_t total = natural - win->out[i];
  int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
  return win->auto_pad == NR_AUTO_PAD_SAME_UPPER ? half : total - half;
}

static bool parse_window(const nr_tactic_ctx *c, const nr_slot *x, const nr_slot *w,
                         const nr_slot *y, deconv_p *p) {
  nr_window win;
  nr_op_ctx oc = {.node = c->node, .graph = c->plan ? c->plan->graph : NULL};
  if (nr_window_read(&oc, 2, w->dims + 2, &win))
    return false;
  size_t n_op = 0, n_os = 0;
  const int64_t *op = nr_attr_ints(c->node, "output_padding", &n_op);
  bool target = nr_attr_ints(c->node, "output_shape", &n_os) != NULL;
  if (op && n_op != 2)
    return false;
  int64_t pb[2], pe[2];
  for (int i = 0; i < 2; i++) {
    win.in[i] = x->dims[2 + i];
    win.out[i] = y->dims[2 + i];
    pb[i] = pad_begin(&win, i, op ? op[i] : 0, target);
    pe[i] = (win.in[i] - 1) * win.stride[i] + nr_window_extent(&win, i) - pb[i] -
            win.out[i];
    if (!fits16(win.kernel[i], 1) || !fits16(win.stride[i], 1) ||
        !fits16(win.dil[i], 1) || !fits16(pb[i], 0) || !fits16(pe[i], -INT16_MAX))
      return false;
  }
  p->kh = (int16_t)win.kernel[0], p->kw = (int16_t)win.kernel[1];
  p->sh = (int16_t)win.stride[0], p->sw = (int16_t)win.stride[1];
  p->dh = (int16_t)win.dil[0], p->dw = (int16_t)win.dil[1];
  p->pt = (int16_t)pb[0], p->pl = (int16_t)pb[1], p->pb = (int16_t)pe[0];
  p->pr = (int16_t)pe[1];
  return true;
}

static bool f32_rank4(const nr_slot *s) {
  if (!s || s->dtype != NR_DTYPE_FLOAT || s->rank != 4)
    return false;
  for (int d = 0; d < 4; d++)
    if (s->dims[d] < 1 || s->dims[d] > INT32_MAX)
      return false;
  return true;
}

bool nr_deconv_parse(const nr_tactic_ctx *c, deconv_p *p) {
  memset(p, 0, sizeof *p);
  const nr_node *n = c->node;
  if (!n || strcmp(n->op_type, "ConvTranspose") || (n->domain && *n->domain))
    return false;
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  const nr_slot *b = c->step->n_in > 2 ? nr_step_in(c, 2) : NULL;
  if (!f32_rank4(x) || !f32_rank4(w) || !f32_rank4(y) || w->kind != NR_SLOT_CONST)
    return false;
  int64_t g = nr_attr_int(n, "group", 1), m = w->dims[1] * g;
  if (g < 1 || x->dims[1] != w->dims[0] || x->dims[1] % g || y->dims[1] != m ||
      y->dims[0] != x->dims[0] || m > INT32_MAX)
    return false;
  if (b && (b->kind != NR_SLOT_CONST || b->dtype != NR_DTYPE_FLOAT || b->rank != 1 ||
            b->dims[0] != m))
    return false;
  p->n = (int32_t)x->dims[0], p->c = (int32_t)x->dims[1];
  p->h = (int32_t)x->dims[2], p->w = (int32_t)x->dims[3];
  p->m = (int32_t)m, p->oh = (int32_t)y->dims[2], p->ow = (int32_t)y->dims[3];
  p->group = (int32_t)g;
  p->has_bias = b != NULL;
  return parse_window(c, x, w, y, p);
}

/* ---- the primitive cache ------------------------------------------------------------ */

typedef struct deconv_entry {
  deconv_p key;
  int team; /* OpenMP threads it was created for */
  dnnl_primitive_t prim, wreorder;
  dnnl_primitive_t xreorder, yreorder; /* NULL where the primitive reads X / writes Y */
  dnnl_memory_desc_t user_w, prim_w, prim_x, prim_y;
  struct deconv_entry *next;
} deconv_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static deconv_entry *cache;
static dnnl_engine_t engine;

static void io_descs(const deconv_p *p, dnnl_memory_desc_t *xm, dnnl_memory_desc_t *ym,
                     dnnl_memory_desc_t *bm) {
  dnnl_dims_t xd = {p->n, p->c, p->h, p->w}, yd = {p->n, p->m, p->oh, p->ow}, bd = {p->m};
  dnnl_memory_desc_init_by_tag(xm, 4, xd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(ym, 4, yd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(bm, 1, bd, dnnl_f32, dnnl_x);
}

/* The user weights (ONNX's [C, M/g, kh, kw]) and the primitive's (format any). */
static void weight_descs(const deconv_p *p, dnnl_memory_desc_t *user,
                         dnnl_memory_desc_t *any) {
  int g = p->group;
  if (g == 1) {
    dnnl_dims_t wd = {p->m, p->c, p->kh, p->kw};
    dnnl_memory_desc_init_by_tag(user, 4, wd, dnnl_f32, dnnl_iohw);
    dnnl_memory_desc_init_by_tag(any, 4, wd, dnnl_f32, dnnl_format_tag_any);
    return;
  }
  dnnl_dims_t wd = {g, p->m / g, p->c / g, p->kh, p->kw};
  dnnl_memory_desc_init_by_tag(user, 5, wd, dnnl_f32, dnnl_giohw);
  dnnl_memory_desc_init_by_tag(any, 5, wd, dnnl_f32, dnnl_format_tag_any);
}

/* A reorder from `from` to `to` into *r; none (NULL) where they are the same layout,
 * unless always. */
static bool make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                         dnnl_primitive_t *r, bool always) {
  *r = NULL;
  if (!always && dnnl_memory_desc_equal(from, to))
    return true;
  dnnl_primitive_desc_t rpd = NULL;
  bool ok = dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, NULL) ==
                dnnl_success &&
            dnnl_primitive_create(r, rpd) == dnnl_success;
  dnnl_primitive_desc_destroy(rpd);
  return ok;
}

/* Creates the deconvolution primitive (X, W and Y in the formats oneDNN picks: its
 * JIT kernels want blocked channels, where plain NCHW leaves it a GEMM path) and the
 * reorders into and out of them (cache_lock held). */
static deconv_entry *create(const deconv_p *p, int team) {
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    return NULL;
  deconv_entry *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->key = *p;
  e->team = team;
  dnnl_memory_desc_t xm, ym, bm, wany, xany, yany;
  io_descs(p, &xm, &ym, &bm);
  weight_descs(p, &e->user_w, &wany);
  xany = xm, yany = ym;
  xany.format_kind = yany.format_kind = dnnl_format_kind_any;
  dnnl_dims_t st = {p->sh, p->sw}, dl = {p->dh - 1, p->dw - 1}, pl = {p->pt, p->pl};
  dnnl_dims_t pr = {p->pb, p->pr};
  dnnl_deconvolution_desc_t dd;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_dilated_deconvolution_forward_desc_init(
                &dd, dnnl_forward_inference, dnnl_deconvolution_direct, &xany, &wany,
                p->has_bias ? &bm : NULL, &yany, st, dl, pl, pr) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &dd, NULL, engine, NULL) == dnnl_success;
  if (ok) {
    e->prim_w = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    e->prim_x = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    e->prim_y = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
         make_reorder(&e->user_w, &e->prim_w, &e->wreorder, true) &&
         make_reorder(&xm, &e->prim_x, &e->xreorder, false) &&
         make_reorder(&e->prim_y, &ym, &e->yreorder, false);
  }
  dnnl_primitive_desc_destroy(pd);
  if (!ok) {
    dnnl_primitive_destroy(e->prim);
    dnnl_primitive_destroy(e->wreorder);
    dnnl_primitive_destroy(e->xreorder);
    dnnl_primitive_destroy(e->yreorder);
    free(e);
    return NULL;
  }
  e->next = cache;
  cache = e;
  return e;
}

static deconv_entry *lookup(const deconv_p *p, int team) {
  pthread_mutex_lock(&cache_lock);
  deconv_entry *e = cache;
  while (e && (e->team != team || memcmp(&e->key, p, sizeof *p)))
    e = e->next;
  if (!e) {
    int old = nr_extlib_team(team);
    e = create(p, team);
    nr_extlib_team(old);
  }
  pthread_mutex_unlock(&cache_lock);
  return e;
}

/* ---- the tactic ----------------------------------------------------------------------- */

bool nr_deconv_onednn_supports(const nr_tactic_ctx *c) {
  deconv_p p;
  if (!nr_deconv_parse(c, &p))
    return false;
  return (p.pb >= 0 && p.pr >= 0) || lookup(&p, nr_extlib_build_threads(c)) != NULL;
}

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* Scratch: the reordered W, then X and Y in the primitive's formats where they differ
 * from NCHW; *ox, *oy: their offsets. */
static size_t entry_scratch(const deconv_entry *e, size_t *ox, size_t *oy) {
  size_t w = align64(dnnl_memory_desc_get_size(&e->prim_w));
  size_t x = e->xreorder ? align64(dnnl_memory_desc_get_size(&e->prim_x)) : 0;
  size_t y = e->yreorder ? align64(dnnl_memory_desc_get_size(&e->prim_y)) : 0;
  *ox = w, *oy = w + x;
  return w + x + y;
}

nr_status nr_deconv_onednn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  deconv_p p;
  if (!nr_deconv_parse(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: the node no longer parses",
                     st->tactic->id);
  deconv_entry *e = lookup(&p, nr_extlib_build_threads(c));
  if (!e)
    return nr_errorf(c->err, NR_ERR_UNSUPPORTED,
                     "oneDNN cannot create this deconvolution");
  memcpy(st->params, &p, sizeof p);
  size_t ox, oy;
  st->scratch = entry_scratch(e, &ox, &oy);
  return NR_OK;
}

nr_status nr_deconv_onednn_run(const nr_exec_args *a) {
  const deconv_p *p = (const deconv_p *)(const void *)a->step->params;
  int team = nr_extlib_threads(a);
  deconv_entry *e = lookup(p, team);
  if (!e)
    return nr_errorf(a->err, NR_ERR_UNSUPPORTED,
                     "oneDNN cannot create this deconvolution");
  size_t ox, oy;
  if (entry_scratch(e, &ox, &oy) > a->step->scratch)
    return nr_errorf(a->err, NR_ERR_RUNTIME,
                     "onednn_deconv: oneDNN wants more scratch on "
                     "%d threads than the engine sized for its build's (rebuild the "
                     "engine for this thread count)",
                     team);
  dnnl_memory_desc_t xm, ym, bm;
  io_descs(p, &xm, &ym, &bm);
  char *sc = a->scratch;
  dnnl_memory_t mx = NULL, my = NULL, mb = NULL, mw = NULL, muw = NULL, mxp = NULL,
                myp = NULL;
  dnnl_stream_t s = NULL;
  bool ok = dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success &&
            dnnl_memory_create(&mx, &xm, engine, a->in[0]) == dnnl_success &&
            dnnl_memory_create(&my, &ym, engine, a->out[0]) == dnnl_success &&
            dnnl_memory_create(&muw, &e->user_w, engine, a->in[1]) == dnnl_success &&
            dnnl_memory_create(&mw, &e->prim_w, engine, sc) == dnnl_success &&
            (!e->xreorder ||
             dnnl_memory_create(&mxp, &e->prim_x, engine, sc + ox) == dnnl_success) &&
            (!e->yreorder ||
             dnnl_memory_create(&myp, &e->prim_y, engine, sc + oy) == dnnl_success) &&
            (!p->has_bias ||
             dnnl_memory_create(&mb, &bm, engine, a->in[2]) == dnnl_success);
  if (ok) {
    dnnl_memory_t src = mxp ? mxp : mx, dst = myp ? myp : my;
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, muw}, {DNNL_ARG_TO, mw}};
    dnnl_exec_arg_t xa[2] = {{DNNL_ARG_FROM, mx}, {DNNL_ARG_TO, mxp}};
    dnnl_exec_arg_t ya[2] = {{DNNL_ARG_FROM, myp}, {DNNL_ARG_TO, my}};
    dnnl_exec_arg_t da[4] = {{DNNL_ARG_SRC, src},
                             {DNNL_ARG_WEIGHTS, mw},
                             {DNNL_ARG_DST, dst},
                             {DNNL_ARG_BIAS, mb}};
    int old = nr_extlib_team(team);
    ok = dnnl_primitive_execute(e->wreorder, s, 2, ra) == dnnl_success &&
         (!e->xreorder || dnnl_primitive_execute(e->xreorder, s, 2, xa) == dnnl_success) &&
         dnnl_primitive_execute(e->prim, s, p->has_bias ? 4 : 3, da) == dnnl_success &&
         (!e->yreorder || dnnl_primitive_execute(e->yreorder, s, 2, ya) == dnnl_success) &&
         dnnl_stream_wait(s) == dnnl_success;
    nr_extlib_team(old);
  }
  dnnl_memory_destroy(mx), dnnl_memory_destroy(my), dnnl_memory_destroy(mb);
  dnnl_memory_destroy(mw), dnnl_memory_destroy(muw), dnnl_memory_destroy(mxp);
  dnnl_memory_destroy(myp);
  dnnl_stream_destroy(s);
  if (!ok)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "oneDNN deconvolution failed");
  return NR_OK;
}
