/* gemm_onednn_ip.c - the onednn_inner_product tactic: a fully connected layer
 * (Y = X W^T + b with constant weights) as oneDNN's inner-product primitive, which
 * picks its own blocked weight format; bias per output column, the residual as a sum
 * post-op and the activation as an eltwise post-op where oneDNN has one.
 *
 * Key decision: like onednn_matmul, primitives live in a process-wide cache keyed by
 * the step's params record (they cannot be stored in an engine). The weights stay in
 * the engine in ONNX layout; each run reorders them into the primitive's format in
 * the step's scratch, whose size prepare() asks oneDNN for. oneDNN runs on an OpenMP
 * team of the step's threads (extlib.h), a part of the key: the pool's worker rests
 * meanwhile only by spinning out, so at 2 threads this tactic shares the second core
 * (onednn_matmul cuts bands for the pool instead). */
#include "kernels/cpu/extlib.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "util/error.h"

#include <dnnl.h>
#include <pthread.h>
#include <string.h>

#define IP_CACHE 128

typedef struct ip_entry {
  nr_gemm_step_params key;
  int team; /* OpenMP threads it was created for */
  dnnl_primitive_t prim, wreorder;
  dnnl_memory_desc_t src, user_w, prim_w, bias, dst;
  bool manual_act;
} ip_entry;

static pthread_mutex_t ip_mu = PTHREAD_MUTEX_INITIALIZER;
static ip_entry ip_cache[IP_CACHE];
static int ip_n;
static dnnl_engine_t ip_engine;

bool gemm_onednn_ip_fits(const nr_gemm_step_params *p) {
  return !(p->flags & (GEMM_F_BATCHED | GEMM_F_TA)) && (p->flags & GEMM_F_B_CONST) &&
         p->m > 0 && p->n > 0 && p->k > 0 && p->alpha == 1.0f &&
         p->bias != GEMM_BIAS_PACKED_ROW && p->bias != GEMM_BIAS_IN_ROW;
}

static bool eltwise_kind(const nr_gemm_step_params *p, dnnl_alg_kind_t *alg, float *a,
                         float *b) {
  *a = 0, *b = 0;
  switch ((nr_act)p->act) {
  case NR_ACT_RELU: *alg = dnnl_eltwise_relu; return true;
  case NR_ACT_LEAKY_RELU: *alg = dnnl_eltwise_relu, *a = p->act_a; return true;
  case NR_ACT_CLIP: *alg = dnnl_eltwise_clip, *a = p->act_a, *b = p->act_b; return true;
  case NR_ACT_SIGMOID: *alg = dnnl_eltwise_logistic; return true;
  case NR_ACT_TANH: *alg = dnnl_eltwise_tanh; return true;
  case NR_ACT_GELU: *alg = dnnl_eltwise_gelu_erf; return true;
  case NR_ACT_GELU_TANH: *alg = dnnl_eltwise_gelu_tanh; return true;
  default: return false;
  }
}

static void md2(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t sr, int64_t sc) {
  dnnl_dims_t dims = {r, c}, strides = {sr, sc};
  dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

static bool build(const nr_gemm_step_params *p, ip_entry *e) {
  memset(e, 0, sizeof *e);
  e->key = *p;
  bool tb = p->flags & GEMM_F_TB; /* B stored [N, K] */
  md2(&e->src, p->m, p->k, p->k, 1);
  md2(&e->user_w, p->n, p->k, tb ? p->k : 1, tb ? 1 : p->n);
  md2(&e->dst, p->m, p->n, p->n, 1);
  dnnl_dims_t bd = {p->n};
  dnnl_memory_desc_init_by_tag(&e->bias, 1, bd, dnnl_f32, dnnl_x);
  dnnl_dims_t wd = {p->n, p->k};
  dnnl_memory_desc_t wany;
  dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_alg_kind_t alg = dnnl_eltwise_relu;
  float ea = 0, eb = 0;
  e->manual_act = p->act != NR_ACT_NONE && !eltwise_kind(p, &alg, &ea, &eb);
  dnnl_inner_product_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL, rpd = NULL;
  bool use_bias = p->bias != GEMM_BIAS_NONE;
  bool ok = dnnl_inner_product_forward_desc_init(&desc, dnnl_forward_inference, &e->src,
                                                 &wany, use_bias ? &e->bias : NULL,
                                                 &e->dst) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_post_ops_create(&ops) == dnnl_success;
  if (ok && p->resid != GEMM_RES_NONE)
    ok = dnnl_post_ops_append_sum(ops, p->resid == GEMM_RES_C ? p->beta : 1.0f) ==
         dnnl_success;
  if (ok && p->act != NR_ACT_NONE && !e->manual_act)
    ok = dnnl_post_ops_append_eltwise(ops, 1.0f, alg, ea, eb) == dnnl_success;
  ok = ok && dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success &&
       dnnl_primitive_desc_create(&pd, &desc, attr, ip_engine, NULL) == dnnl_success;
  if (ok) {
    e->prim_w = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
         dnnl_reorder_primitive_desc_create(&rpd, &e->user_w, ip_engine, &e->prim_w,
                                            ip_engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&e->wreorder, rpd) == dnnl_success;
  }
  dnnl_primitive_desc_destroy(rpd);
  dnnl_primitive_desc_destroy(pd);
  dnnl_post_ops_destroy(ops);
  dnnl_primitive_attr_destroy(attr);
  if (!ok) {
    dnnl_primitive_destroy(e->prim);
    dnnl_primitive_destroy(e->wreorder);
  }
  return ok;
}

/* The cached entry for p; NULL when oneDNN cannot build it. Entries live for the
 * process (a full cache builds one that the caller must not keep: *owned). */
static bool lookup(const nr_gemm_step_params *p, int team, ip_entry *out, bool *owned) {
  pthread_mutex_lock(&ip_mu);
  bool ok = ip_engine || dnnl_engine_create(&ip_engine, dnnl_cpu, 0) == dnnl_success;
  *owned = false;
  int i = 0;
  for (; ok && i < ip_n; i++)
    if (ip_cache[i].team == team && !memcmp(&ip_cache[i].key, p, sizeof *p))
      break;
  if (ok && i < ip_n) {
    *out = ip_cache[i];
  } else if (ok) {
    int old = nr_extlib_team(team);
    ok = build(p, out);
    nr_extlib_team(old);
    out->team = team;
  }
  if (ok && i == ip_n) {
    if (ip_n < IP_CACHE)
      ip_cache[ip_n++] = *out;
    else
      *owned = true;
  }
  pthread_mutex_unlock(&ip_mu);
  return ok;
}

static void release(ip_entry *e, bool owned) {
  if (owned) {
    dnnl_primitive_destroy(e->prim);
    dnnl_primitive_destroy(e->wreorder);
  }
}

nr_status gemm_onednn_ip_scratch(const nr_gemm_step_params *p, int team, uint64_t *bytes,
                                 nr_error *err) {
  ip_entry e;
  bool owned;
  if (!lookup(p, team, &e, &owned))
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "onednn_inner_product: oneDNN cannot build "
                     "a %lldx%lldx%lld inner product", (long long)p->m, (long long)p->n,
                     (long long)p->k);
  *bytes = (dnnl_memory_desc_get_size(&e.prim_w) + 63) / 64 * 64;
  release(&e, owned);
  return NR_OK;
}

static bool execute(const ip_entry *e, const gemm_product *pr, const float *bias,
                    void *scratch) {
  dnnl_stream_t s = NULL;
  dnnl_memory_t mx = NULL, mw = NULL, muw = NULL, my = NULL, mb = NULL;
  bool ok = dnnl_stream_create(&s, ip_engine, dnnl_stream_default_flags) == dnnl_success &&
            dnnl_memory_create(&mx, &e->src, ip_engine, (void *)pr->a) == dnnl_success &&
            dnnl_memory_create(&muw, &e->user_w, ip_engine, (void *)pr->b) == dnnl_success &&
            dnnl_memory_create(&mw, &e->prim_w, ip_engine, scratch) == dnnl_success &&
            dnnl_memory_create(&my, &e->dst, ip_engine, pr->c) == dnnl_success &&
            (!bias ||
             dnnl_memory_create(&mb, &e->bias, ip_engine, (void *)bias) == dnnl_success);
  if (ok) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, muw}, {DNNL_ARG_TO, mw}};
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw},
                               {DNNL_ARG_DST, my}, {DNNL_ARG_BIAS, mb}};
    ok = dnnl_primitive_execute(e->wreorder, s, 2, ra) == dnnl_success &&
         dnnl_primitive_execute(e->prim, s, bias ? 4 : 3, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
  }
  dnnl_memory_destroy(mx), dnnl_memory_destroy(muw), dnnl_memory_destroy(mw);
  dnnl_memory_destroy(my), dnnl_memory_destroy(mb);
  dnnl_stream_destroy(s);
  return ok;
}

nr_status gemm_onednn_ip_run(const nr_exec_args *x) {
  nr_gemm_step_params p;
  memcpy(&p, x->step->params, sizeof p);
  ip_entry e;
  bool owned;
  int team = nr_extlib_threads(x);
  if (!lookup(&p, team, &e, &owned))
    return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_inner_product: cannot build the "
                     "primitive");
  if (dnnl_memory_desc_get_size(&e.prim_w) > x->step->scratch) {
    release(&e, owned);
    return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_inner_product: oneDNN wants more "
                     "scratch on %d threads than the engine sized for its build's "
                     "(rebuild the engine for this thread count)", team);
  }
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, &p, 0, &pr);
  gemm_epilogue_get(x, &p, pr.r, &ep);
  if (p.resid != GEMM_RES_NONE && pr.r != pr.c)
    memcpy(pr.c, pr.r, sizeof(float) * (size_t)(p.m * p.n));
  int old = nr_extlib_team(team);
  bool ok = execute(&e, &pr, p.bias != GEMM_BIAS_NONE ? ep.bias : NULL, x->scratch);
  nr_extlib_team(old);
  if (ok && e.manual_act)
    nr_act_apply((nr_act)p.act, p.act_a, p.act_b, pr.c, p.m * p.n);
  release(&e, owned);
  return ok ? NR_OK : nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_inner_product failed");
}
