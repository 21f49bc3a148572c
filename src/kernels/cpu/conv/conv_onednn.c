/* conv_onednn.c - onednn_conv: convolution through oneDNN 2.6's C API (PLAIN, any
 * group/stride/dilation/padding; bias, residual as a sum post-op, activation as an
 * eltwise post-op).
 *
 * oneDNN primitives cannot be serialized into an engine, so prepare() only stores the
 * params record; the primitive is created lazily on the first run and cached in a
 * process-wide, mutex-protected table keyed by the whole record (shape, window,
 * activation): two steps with equal records share one primitive, a destroyed plan
 * leaves a still-valid entry, and nothing in the cache refers to plan memory. The
 * primitive's weights format is chosen by oneDNN (format_tag any); the weights are
 * reordered into it on every run into the step's scratch (cheap next to the conv,
 * keeps the cache free of data). oneDNN runs on an OpenMP team of the step's threads
 * (extlib.h), which is part of the key, not on the step's pool. Entries live until
 * process exit. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/extlib.h"

#include "util/error.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct dnnl_entry {
  conv_p key;
  int team; /* OpenMP threads it was created for */
  dnnl_primitive_t conv, wreorder;
  dnnl_memory_desc_t user_w, prim_w;
  struct dnnl_entry *next;
} dnnl_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_entry *cache;
static dnnl_engine_t engine;

static dnnl_alg_kind_t act_alg(const conv_p *p, float *al, float *be) {
  *al = 0, *be = 0;
  switch ((nr_act)p->act) {
  case NR_ACT_RELU: return dnnl_eltwise_relu;
  case NR_ACT_LEAKY_RELU: *al = p->act_a; return dnnl_eltwise_relu;
  case NR_ACT_CLIP: *al = p->act_a, *be = p->act_b; return dnnl_eltwise_clip_v2;
  case NR_ACT_SIGMOID: return dnnl_eltwise_logistic;
  case NR_ACT_TANH: return dnnl_eltwise_tanh;
  case NR_ACT_SILU: *al = 1.0f; return dnnl_eltwise_swish;
  case NR_ACT_GELU: return dnnl_eltwise_gelu_erf;
  case NR_ACT_GELU_TANH: return dnnl_eltwise_gelu_tanh;
  default: return dnnl_alg_kind_undef;
  }
}

/* Creates the conv and weight-reorder primitives for p (cache_lock held; the calling
 * thread's OpenMP team is the entry's). */
static dnnl_entry *create(const conv_p *p, int team) {
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    return NULL;
  dnnl_entry *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->key = *p;
  e->team = team;
  int g = p->group;
  dnnl_dims_t xd = {p->n, p->c, p->h, p->w}, yd = {p->n, p->m, p->oh, p->ow}, bd = {p->m};
  dnnl_dims_t wd = {g, p->m / g, p->c / g, p->kh, p->kw};
  dnnl_dims_t st = {p->sh, p->sw}, dl = {p->dh - 1, p->dw - 1}, pl = {p->pt, p->pl};
  dnnl_dims_t pr = {(p->oh - 1) * p->sh + (p->kh - 1) * p->dh + 1 - p->h - p->pt,
                    (p->ow - 1) * p->sw + (p->kw - 1) * p->dw + 1 - p->w - p->pl};
  pr[0] = pr[0] < 0 ? 0 : pr[0], pr[1] = pr[1] < 0 ? 0 : pr[1];
  dnnl_memory_desc_t xm, ym, bm, wany;
  dnnl_memory_desc_init_by_tag(&xm, 4, xd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&ym, 4, yd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&bm, 1, bd, dnnl_f32, dnnl_x);
  dnnl_memory_desc_init_by_tag(&e->user_w, 5, wd, dnnl_f32, dnnl_goihw);
  dnnl_memory_desc_init_by_tag(&wany, 5, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_convolution_desc_t cd;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL, rpd = NULL;
  float al, be;
  dnnl_alg_kind_t alg = act_alg(p, &al, &be);
  bool ok = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                               dnnl_convolution_direct, &xm, &wany,
                                               p->has_bias ? &bm : NULL, &ym, st, dl, pl,
                                               pr) == dnnl_success &&
            dnnl_post_ops_create(&po) == dnnl_success &&
            (!p->has_res || dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) &&
            (alg == dnnl_alg_kind_undef ||
             dnnl_post_ops_append_eltwise(po, 1.0f, alg, al, be) == dnnl_success) &&
            dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &cd, attr, engine, NULL) == dnnl_success;
  if (ok) {
    e->prim_w = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    ok = dnnl_primitive_create(&e->conv, pd) == dnnl_success &&
         dnnl_reorder_primitive_desc_create(&rpd, &e->user_w, engine, &e->prim_w, engine,
                                            NULL) == dnnl_success &&
         dnnl_primitive_create(&e->wreorder, rpd) == dnnl_success;
  }
  dnnl_primitive_desc_destroy(rpd);
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  dnnl_post_ops_destroy(po);
  if (!ok) {
    dnnl_primitive_destroy(e->conv);
    dnnl_primitive_destroy(e->wreorder);
    free(e);
    return NULL;
  }
  e->next = cache;
  cache = e;
  return e;
}

static dnnl_entry *lookup(const conv_p *p, int team) {
  pthread_mutex_lock(&cache_lock);
  dnnl_entry *e = cache;
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

nr_status nr_conv_onednn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p *p = (conv_p *)(void *)st->params;
  p->res_layout = 0; /* not part of the primitive */
  dnnl_entry *e = lookup(p, nr_extlib_build_threads(c));
  if (!e)
    return nr_errorf(c->err, NR_ERR_UNSUPPORTED, "oneDNN cannot create this convolution");
  st->scratch = nr_conv_align64(dnnl_memory_desc_get_size(&e->prim_w));
  return NR_OK;
}

nr_status nr_conv_onednn_run(const nr_exec_args *a) {
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_PLAIN, &q, &post);
  if (post) /* the primitive was made with the sum post-op; run without it is another key */
    q.has_res = 0;
  int team = nr_extlib_threads(a);
  dnnl_entry *e = lookup(&q, team);
  if (!e)
    return nr_errorf(a->err, NR_ERR_UNSUPPORTED, "oneDNN cannot create this convolution");
  if (nr_conv_align64(dnnl_memory_desc_get_size(&e->prim_w)) > a->step->scratch)
    return nr_errorf(a->err, NR_ERR_RUNTIME, "onednn_conv: oneDNN wants more scratch on "
                     "%d threads than the engine sized for its build's (rebuild the "
                     "engine for this thread count)", team);
  int64_t yn = (int64_t)q.n * q.m * q.oh * q.ow;
  if (res && res != a->out[0])
    memcpy(a->out[0], res, sizeof(float) * (size_t)yn);
  dnnl_memory_desc_t xm, ym, bm;
  dnnl_dims_t xd = {q.n, q.c, q.h, q.w}, yd = {q.n, q.m, q.oh, q.ow}, bd = {q.m};
  dnnl_memory_desc_init_by_tag(&xm, 4, xd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&ym, 4, yd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&bm, 1, bd, dnnl_f32, dnnl_x);
  dnnl_memory_t mx = NULL, my = NULL, mb = NULL, mw = NULL, muw = NULL;
  dnnl_stream_t s = NULL;
  bool ok = dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success &&
            dnnl_memory_create(&mx, &xm, engine, a->in[0]) == dnnl_success &&
            dnnl_memory_create(&my, &ym, engine, a->out[0]) == dnnl_success &&
            dnnl_memory_create(&muw, &e->user_w, engine, a->in[1]) == dnnl_success &&
            dnnl_memory_create(&mw, &e->prim_w, engine, a->scratch) == dnnl_success &&
            (!q.has_bias ||
             dnnl_memory_create(&mb, &bm, engine, a->in[2]) == dnnl_success);
  if (ok) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, muw}, {DNNL_ARG_TO, mw}};
    dnnl_exec_arg_t ca[4] = {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw},
                             {DNNL_ARG_DST, my}, {DNNL_ARG_BIAS, mb}};
    int old = nr_extlib_team(team);
    ok = dnnl_primitive_execute(e->wreorder, s, 2, ra) == dnnl_success &&
         dnnl_primitive_execute(e->conv, s, q.has_bias ? 4 : 3, ca) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
    nr_extlib_team(old);
  }
  dnnl_memory_destroy(mx), dnnl_memory_destroy(my), dnnl_memory_destroy(mb);
  dnnl_memory_destroy(mw), dnnl_memory_destroy(muw);
  dnnl_stream_destroy(s);
  if (!ok)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "oneDNN convolution failed");
  /* An activation oneDNN has no eltwise kind for (hard_sigmoid, hard_swish) runs after
   * the primitive, which already added bias and residual. */
  float al, be;
  if (q.act != NR_ACT_NONE && act_alg(&q, &al, &be) == dnnl_alg_kind_undef && !post)
    nr_act_apply((nr_act)q.act, q.act_a, q.act_b, a->out[0], yn);
  nr_conv_finish(a, NR_LAYOUT_PLAIN, conv_params(a->step), post);
  return NR_OK;
}
