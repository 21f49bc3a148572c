/* lp_onednn.c - oneDNN 2.6's bf16 inner product and convolution as bf16 tactics:
 * onednn_bf16_inner_product (Gemm / MatMul / FusedGemm / FusedMatMul: a 2-D product
 * with constant B, alpha 1, no row bias, A not transposed) and onednn_bf16_conv
 * (Conv / FusedConv, PLAIN, the nodes the nnroute conv tactics of this family take).
 * On avx512_core without native bf16 oneDNN emulates the bf16 dot products
 * (jit_bf16_1x1 / gemm:jit); it creates these primitives (f16 ones it refuses). One
 * thread on a 2.8 GHz Ice Lake (bench/lowp_bench.c): batch-1 1024x1024 inner
 * product 1.8x the nnroute fp32 kernel (nr_bf16w_gemm_1x32__avx512: 2.1x); a
 * 128 x 768 x 3072 product 0.28x fp32 and resnet50 1x1 convs 0.2-0.3x, so these
 * rows rank below the nnroute kernels. oneDNN's bf16 matmul primitive picks the same
 * gemm:jit implementation as the inner product at these shapes (and times the same),
 * so it has no row of its own.
 *
 * Key decisions.
 *  - The weights are converted to bf16 and reordered into the primitive's own format
 *    at build time, into the engine: the point of bf16 weights is reading half the
 *    bytes per run, which a per-run reorder from fp32 (what the fp32 oneDNN tactics
 *    do) would undo. A primitive cannot be stored, so run() recreates it (cached per
 *    process, keyed by the shapes) and checks that oneDNN chose the same weights
 *    format as at build time: the packed data starts with that memory descriptor.
 *  - The primitive computes product + bias only; the residual and activation follow
 *    as the GEMM / conv epilogue pass (one key per shape, no post-op variants).
 *  - The activation input is rounded to bf16 into scratch on each run (the primitive
 *    takes bf16 src); outputs and bias stay fp32. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/extlib.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "kernels/cpu/lpgemm/lp_onednn.h"
#include "kernels/cpu/lpgemm/lpgemm.h"
#include "util/error.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Bytes the weights memory descriptor takes at the start of the packed data. */
#define MD_BYTES ((sizeof(dnnl_memory_desc_t) + 63) / 64 * 64)

enum { KEY_IP = 1, KEY_CONV = 2 };

/* A primitive's identity: its kind and shape numbers (ip: m, n, k, bias, transB;
 * conv: the conv_p geometry and bias). */
typedef struct prim_key {
  int64_t kind;
  int64_t d[18];
  int64_t team; /* the OpenMP threads it is created and run with (extlib.h) */
} prim_key;

typedef struct prim_entry {
  prim_key key;
  dnnl_primitive_t prim;
  dnnl_memory_desc_t src, wei, user_wei, bias, dst;
  struct prim_entry *next;
} prim_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static prim_entry *cache;
static dnnl_engine_t engine;

static void md_strided(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t sr, int64_t sc,
                       dnnl_data_type_t t) {
  dnnl_dims_t dims = {r, c}, strides = {sr, sc};
  dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides);
}

/* Inner product descriptors for key d = {m, n, k, bias, transB}. */
static bool ip_desc(const prim_key *key, prim_entry *e, dnnl_inner_product_desc_t *desc) {
  int64_t m = key->d[0], n = key->d[1], k = key->d[2];
  bool tb = key->d[4] != 0;
  md_strided(&e->src, m, k, k, 1, dnnl_bf16);
  md_strided(&e->user_wei, n, k, tb ? k : 1, tb ? 1 : n, dnnl_bf16);
  md_strided(&e->dst, m, n, n, 1, dnnl_f32);
  dnnl_dims_t bd = {n}, wd = {n, k};
  dnnl_memory_desc_init_by_tag(&e->bias, 1, bd, dnnl_f32, dnnl_x);
  dnnl_memory_desc_t wany;
  dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_bf16, dnnl_format_tag_any);
  return dnnl_inner_product_forward_desc_init(desc, dnnl_forward_inference, &e->src, &wany,
                                              key->d[3] ? &e->bias : NULL,
                                              &e->dst) == dnnl_success;
}

/* Convolution descriptors for a conv key (the conv_p fields in order, then bias). */
static bool conv_desc(const prim_key *key, prim_entry *e, dnnl_convolution_desc_t *desc) {
  const int64_t *d = key->d;
  int64_t n = d[0], c = d[1], h = d[2], w = d[3], m = d[4], oh = d[5], ow = d[6], g = d[7];
  int64_t kh = d[8], kw = d[9], sh = d[10], sw = d[11], dh = d[12], dw = d[13];
  int64_t pt = d[14], pl = d[15];
  dnnl_dims_t xd = {n, c, h, w}, yd = {n, m, oh, ow}, bd = {m};
  dnnl_dims_t wd = {g, m / g, c / g, kh, kw};
  dnnl_dims_t st = {sh, sw}, dl = {dh - 1, dw - 1}, pad_l = {pt, pl};
  dnnl_dims_t pad_r = {(oh - 1) * sh + (kh - 1) * dh + 1 - h - pt,
                       (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl};
  pad_r[0] = pad_r[0] < 0 ? 0 : pad_r[0], pad_r[1] = pad_r[1] < 0 ? 0 : pad_r[1];
  dnnl_memory_desc_init_by_tag(&e->src, 4, xd, dnnl_bf16, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&e->dst, 4, yd, dnnl_f32, dnnl_nchw);
  dnnl_memory_desc_init_by_tag(&e->bias, 1, bd, dnnl_f32, dnnl_x);
  dnnl_memory_desc_init_by_tag(&e->user_wei, 5, wd, dnnl_bf16, dnnl_goihw);
  dnnl_memory_desc_t wany;
  dnnl_memory_desc_init_by_tag(&wany, 5, wd, dnnl_bf16, dnnl_format_tag_any);
  return dnnl_dilated_convolution_forward_desc_init(
             desc, dnnl_forward_inference, dnnl_convolution_direct, &e->src, &wany,
             d[16] ? &e->bias : NULL, &e->dst, st, dl, pad_l, pad_r) == dnnl_success;
}

/* Creates the primitive for key (cache_lock held); NULL when oneDNN cannot. */
static prim_entry *create(const prim_key *key) {
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    return NULL;
  prim_entry *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->key = *key;
  dnnl_inner_product_desc_t ipd;
  dnnl_convolution_desc_t cd;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = key->kind == KEY_IP ? ip_desc(key, e, &ipd) : conv_desc(key, e, &cd);
  ok = ok && dnnl_primitive_desc_create(&pd, key->kind == KEY_IP ? (const void *)&ipd
                                                                  : (const void *)&cd,
                                        NULL, engine, NULL) == dnnl_success;
  if (ok) {
    e->wei = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
  }
  dnnl_primitive_desc_destroy(pd);
  if (!ok) {
    free(e);
    return NULL;
  }
  e->next = cache;
  cache = e;
  return e;
}

/* The cached primitive for key, created on first use; entries live for the process. */
static const prim_entry *lookup(const prim_key *key) {
  pthread_mutex_lock(&cache_lock);
  prim_entry *e = cache;
  while (e && memcmp(&e->key, key, sizeof *key))
    e = e->next;
  if (!e) {
    int old = nr_extlib_team((int)key->team);
    e = create(key);
    nr_extlib_team(old);
  }
  pthread_mutex_unlock(&cache_lock);
  return e;
}

/* Build time: the constant fp32 weights (count values, in user_wei's layout) to bf16,
 * reordered into the primitive's format at out + MD_BYTES, the descriptor at out. */
static bool pack_weights(const prim_entry *e, const float *w, int64_t count, char *out) {
  uint16_t *tmp = malloc(sizeof(uint16_t) * (size_t)count);
  if (!tmp)
    return false;
  nr_lp_narrow(NR_LP_BF16, w, tmp, count);
  memcpy(out, &e->wei, sizeof e->wei);
  dnnl_primitive_desc_t rpd = NULL;
  dnnl_primitive_t r = NULL;
  dnnl_memory_t from = NULL, to = NULL;
  dnnl_stream_t s = NULL;
  bool ok = dnnl_reorder_primitive_desc_create(&rpd, &e->user_wei, engine, &e->wei, engine,
                                               NULL) == dnnl_success &&
            dnnl_primitive_create(&r, rpd) == dnnl_success &&
            dnnl_memory_create(&from, &e->user_wei, engine, tmp) == dnnl_success &&
            dnnl_memory_create(&to, &e->wei, engine, out + MD_BYTES) == dnnl_success &&
            dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    ok = dnnl_primitive_execute(r, s, 2, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
  }
  dnnl_stream_destroy(s);
  dnnl_memory_destroy(from), dnnl_memory_destroy(to);
  dnnl_primitive_destroy(r);
  dnnl_primitive_desc_destroy(rpd);
  free(tmp);
  return ok;
}

static size_t wei_bytes(const prim_entry *e) {
  return (dnnl_memory_desc_get_size(&e->wei) + 63) / 64 * 64;
}

/* Run time: the primitive for key, or an error when oneDNN cannot make it or chose
 * another weights format than the one packed at build time. */
static const prim_entry *run_lookup(const nr_exec_args *x, prim_key *key, const char *id) {
  key->team = nr_extlib_threads(x);
  const prim_entry *e = lookup(key);
  if (!e) {
    nr_errorf(x->err, NR_ERR_RUNTIME, "%s: oneDNN cannot create the primitive", id);
    return NULL;
  }
  dnnl_memory_desc_t built;
  memcpy(&built, x->packed, sizeof built);
  if (!dnnl_memory_desc_equal(&built, &e->wei)) {
    nr_errorf(x->err, NR_ERR_RUNTIME, "%s: oneDNN chose another weights format than when "
              "the engine was built", id);
    return NULL;
  }
  return e;
}

/* Executes e on src (bf16), the packed weights, bias (or NULL) into dst. */
static bool execute(const prim_entry *e, const void *src, const void *packed,
                    const float *bias, float *dst) {
  dnnl_stream_t s = NULL;
  dnnl_memory_t ms = NULL, mw = NULL, mb = NULL, md = NULL;
  bool ok = dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success &&
            dnnl_memory_create(&ms, &e->src, engine, (void *)src) == dnnl_success &&
            dnnl_memory_create(&mw, &e->wei, engine, (char *)packed + MD_BYTES) ==
                dnnl_success &&
            dnnl_memory_create(&md, &e->dst, engine, dst) == dnnl_success &&
            (!bias || dnnl_memory_create(&mb, &e->bias, engine, (void *)bias) == dnnl_success);
  if (ok) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw},
                               {DNNL_ARG_DST, md}, {DNNL_ARG_BIAS, mb}};
    int old = nr_extlib_team((int)e->key.team);
    ok = dnnl_primitive_execute(e->prim, s, bias ? 4 : 3, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
    nr_extlib_team(old);
  }
  dnnl_memory_destroy(ms), dnnl_memory_destroy(mw), dnnl_memory_destroy(mb);
  dnnl_memory_destroy(md);
  dnnl_stream_destroy(s);
  return ok;
}

/* ---- inner product ------------------------------------------------------------------- */

static bool ip_problem(const nr_tactic_ctx *c, nr_gemm_step_params *p) {
  gemm_view v;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, p) && gemm_onednn_ip_fits(p);
}

static prim_key ip_key(const nr_gemm_step_params *p) {
  prim_key k = {KEY_IP, {p->m, p->n, p->k, p->bias != GEMM_BIAS_NONE,
                         (p->flags & GEMM_F_TB) != 0}};
  return k;
}

/* oneDNN 2.6 makes bf16 primitives on avx512_core and up only (emulated below
 * AVX512-BF16); on an AVX2 host prepare() could not create them, so the rows must not
 * claim the node (the knob space would offer a route that cannot build). */
bool lp_onednn_has_bf16(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

bool lp_onednn_ip_supports(const nr_tactic_ctx *c) {
  nr_gemm_step_params p;
  return lp_onednn_has_bf16() && ip_problem(c, &p);
}

static nr_status prep_fail(const nr_tactic_ctx *c, const nr_step *st, nr_status s,
                           const char *why) {
  char b[256];
  return nr_errorf(c->err, s, "%s: %s: %s", nr_node_describe(c->node, b, sizeof b),
                   st->tactic->id, why);
}

/* Packed data: descriptor, weights in the primitive's format, then the packed bias. */
nr_status lp_onednn_ip_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  nr_gemm_step_params p;
  if (!ip_problem(c, &p))
    return prep_fail(c, st, NR_ERR_INTERNAL, "cannot run it");
  prim_key key = ip_key(&p);
  key.team = nr_extlib_build_threads(c);
  const prim_entry *e = lookup(&key);
  if (!e)
    return prep_fail(c, st, NR_ERR_UNSUPPORTED, "oneDNN cannot create the primitive");
  bool packed_bias = p.bias == GEMM_BIAS_PACKED_COL;
  size_t wb = MD_BYTES + wei_bytes(e), total = wb + (packed_bias ? sizeof(float) * p.n : 0);
  char *buf = aligned_alloc(64, (total + 63) / 64 * 64);
  if (!buf || !pack_weights(e, nr_step_const(c, 1), p.k * p.n, buf)) {
    free(buf);
    return prep_fail(c, st, NR_ERR_NOMEM, "cannot pack the bf16 weights");
  }
  p.bias_off = (uint32_t)(wb / sizeof(float));
  nr_status s = packed_bias ? gemm_bias_build(c, &p, (float *)(buf + wb)) : NR_OK;
  if (!s)
    s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
  free(buf);
  st->packed_size = total;
  if (!s) /* run() reads W in oneDNN's format only */
    nr_step_absorb(st, 1);
  st->scratch = (uint64_t)(p.m * p.k) * sizeof(uint16_t) + 64;
  memset(st->params, 0, sizeof st->params);
  memcpy(st->params, &p, sizeof p);
  return s;
}

nr_status lp_onednn_ip_run(const nr_exec_args *x) {
  nr_gemm_step_params p, q;
  memcpy(&p, x->step->params, sizeof p);
  prim_key key = ip_key(&p);
  const prim_entry *e = run_lookup(x, &key, "onednn_bf16_inner_product");
  if (!e)
    return NR_ERR_RUNTIME;
  q = p;
  q.flags &= (uint8_t)~GEMM_F_PB; /* B is ours: do not let the helper size an fp32 B */
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, &q, 0, &pr);
  gemm_epilogue_get(x, &p, pr.r, &ep);
  nr_lp_narrow(NR_LP_BF16, pr.a, x->scratch, p.m * p.k);
  if (!execute(e, x->scratch, x->packed, p.bias != GEMM_BIAS_NONE ? ep.bias : NULL, pr.c))
    return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_bf16_inner_product failed");
  ep.bias = NULL; /* added by the primitive */
  nr_gemm_epilogue_apply(&ep, 0, 0, p.m, p.n, pr.c, p.n);
  return NR_OK;
}

/* ---- convolution --------------------------------------------------------------------- */

static prim_key conv_key(const conv_p *p) {
  prim_key k = {KEY_CONV, {p->n, p->c, p->h, p->w, p->m, p->oh, p->ow, p->group, p->kh,
                           p->kw, p->sh, p->sw, p->dh, p->dw, p->pt, p->pl, p->has_bias}};
  return k;
}

/* The nodes the nnroute conv tactics of this family run (no one-channel groups). */
static bool conv_problem(const nr_tactic_ctx *c, conv_p *p) {
  return nr_conv_parse(c, p) && (p->group == 1 || p->c / p->group > 1);
}

bool lp_onednn_conv_supports(const nr_tactic_ctx *c) {
  conv_p p;
  return lp_onednn_has_bf16() && conv_problem(c, &p);
}

nr_status lp_onednn_conv_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p p;
  if (!conv_problem(c, &p))
    return prep_fail(c, st, NR_ERR_INTERNAL, "cannot run it");
  p.opts = nr_conv_knob_opts(c) & (uint8_t)CONV_OPT_SERIAL;
  if (p.opts & CONV_OPT_SERIAL)
    st->threads = 1;
  prim_key key = conv_key(&p);
  key.team = nr_extlib_build_threads(c);
  const prim_entry *e = lookup(&key);
  if (!e)
    return prep_fail(c, st, NR_ERR_UNSUPPORTED, "oneDNN cannot create the primitive");
  size_t total = MD_BYTES + wei_bytes(e);
  char *buf = aligned_alloc(64, total);
  int64_t count = (int64_t)p.m * (p.c / p.group) * p.kh * p.kw;
  if (!buf || !pack_weights(e, nr_step_const(c, 1), count, buf)) {
    free(buf);
    return prep_fail(c, st, NR_ERR_NOMEM, "cannot pack the bf16 weights");
  }
  nr_status s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
  free(buf);
  st->packed_size = total;
  if (!s) /* run() reads W in oneDNN's format only */
    nr_step_absorb(st, 1);
  st->scratch = (uint64_t)p.n * p.c * p.h * p.w * sizeof(uint16_t) + 64;
  memcpy(st->params, &p, sizeof p);
  return s;
}

nr_status lp_onednn_conv_run(const nr_exec_args *x) {
  conv_p q = *conv_params(x->step);
  prim_key key = conv_key(&q);
  const prim_entry *e = run_lookup(x, &key, "onednn_bf16_conv");
  if (!e)
    return NR_ERR_RUNTIME;
  bool post;
  const float *res = nr_conv_res(x, NR_LAYOUT_PLAIN, &q, &post);
  nr_lp_narrow(NR_LP_BF16, x->in[0], x->scratch, (int64_t)q.n * q.c * q.h * q.w);
  const float *bias = q.has_bias ? x->in[2] : NULL;
  if (!execute(e, x->scratch, x->packed, bias, x->out[0]))
    return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_bf16_conv failed");
  if (res || q.act != NR_ACT_NONE)
    nr_conv_epilogue_pass(x, NR_LAYOUT_PLAIN, &q, NULL, res, nr_conv_threads(x));
  nr_conv_finish(x, NR_LAYOUT_PLAIN, conv_params(x->step), post);
  return NR_OK;
}
