/* gemm_onednn.c - the onednn_matmul tactic: a oneDNN (2.6, C API) matmul primitive
 * with the bias, the residual (a sum post-op over C pre-filled with R) and the
 * activation (an eltwise post-op) fused where oneDNN has them.
 *
 * Key decision: primitives cannot be stored in an engine file and creating one costs
 * far more than a small product, so run() keeps a process-wide cache of created
 * primitives keyed by the step's params record (shape, transposes, epilogue): equal
 * records mean an equal primitive, whichever plan or context asks, and a record never
 * goes stale when a plan is freed. The cache is a mutex-guarded table of
 * ONEDNN_CACHE entries, kept for the life of the process; when it is full, a
 * primitive is created and destroyed per call (correct, slow). What oneDNN cannot
 * fuse (an alpha != 1 together with a bias, hard_sigmoid) runs as nnroute's own
 * epilogue pass after the primitive. */
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "util/error.h"

#include <dnnl.h>
#include <pthread.h>
#include <string.h>

#define ONEDNN_CACHE 256

typedef struct onednn_entry {
  gemm_params key;
  dnnl_primitive_t prim;
  dnnl_memory_desc_t src, wei, bias, dst;
  bool use_bias, use_sum, manual_ep; /* manual_ep: bias/residual/act done by nnroute */
} onednn_entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static onednn_entry cache[ONEDNN_CACHE];
static int cache_n;
static dnnl_engine_t engine;

static bool act_alg(nr_act act, float a, float b, dnnl_alg_kind_t *alg, float *alpha,
                    float *beta) {
  *alpha = 0, *beta = 0;
  switch (act) {
  case NR_ACT_RELU: *alg = dnnl_eltwise_relu; return true;
  case NR_ACT_LEAKY_RELU: *alg = dnnl_eltwise_relu, *alpha = a; return true;
  case NR_ACT_CLIP: *alg = dnnl_eltwise_clip, *alpha = a, *beta = b; return true;
  case NR_ACT_SIGMOID: *alg = dnnl_eltwise_logistic; return true;
  case NR_ACT_TANH: *alg = dnnl_eltwise_tanh; return true;
  case NR_ACT_SILU: *alg = dnnl_eltwise_swish, *alpha = 1; return true;
  case NR_ACT_GELU: *alg = dnnl_eltwise_gelu_erf; return true;
  case NR_ACT_GELU_TANH: *alg = dnnl_eltwise_gelu_tanh; return true;
  case NR_ACT_HARD_SWISH: *alg = dnnl_eltwise_hardswish; return true;
  default: return false;
  }
}

static void md2(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t sr, int64_t sc) {
  dnnl_dims_t dims = {r, c}, strides = {sr, sc};
  dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

/* Creates the primitive of p into e; false on any oneDNN failure. */
static bool create_entry(const gemm_params *p, onednn_entry *e) {
  memset(e, 0, sizeof *e);
  e->key = *p;
  bool ta = p->flags & GEMM_F_TA, tb = p->flags & GEMM_F_TB;
  md2(&e->src, p->m, p->k, ta ? 1 : p->k, ta ? p->m : 1);
  md2(&e->wei, p->k, p->n, tb ? 1 : p->n, tb ? p->k : 1);
  md2(&e->dst, p->m, p->n, p->n, 1);
  bool row = p->bias == GEMM_BIAS_PACKED_ROW || p->bias == GEMM_BIAS_IN_ROW;
  if (row)
    md2(&e->bias, p->m, 1, 1, 1);
  else
    md2(&e->bias, 1, p->n, p->n, 1);
  dnnl_alg_kind_t alg = dnnl_eltwise_relu;
  float ea = 0, eb = 0;
  bool act_ok = p->act == NR_ACT_NONE || act_alg((nr_act)p->act, p->act_a, p->act_b, &alg, &ea, &eb);
  e->manual_ep = p->alpha != 1.0f || !act_ok;
  e->use_bias = p->bias != GEMM_BIAS_NONE && !e->manual_ep;
  e->use_sum = p->resid != GEMM_RES_NONE && !e->manual_ep;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t ops = NULL;
  dnnl_primitive_desc_t pd = NULL;
  bool ok = dnnl_matmul_desc_init(&desc, &e->src, &e->wei, e->use_bias ? &e->bias : NULL,
                                  &e->dst) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_post_ops_create(&ops) == dnnl_success;
  if (ok && p->alpha != 1.0f)
    ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha) == dnnl_success;
  if (ok && e->use_sum)
    ok = dnnl_post_ops_append_sum(ops, p->resid == GEMM_RES_C ? p->beta : 1.0f) == dnnl_success;
  if (ok && !e->manual_ep && p->act != NR_ACT_NONE)
    ok = dnnl_post_ops_append_eltwise(ops, 1.0f, alg, ea, eb) == dnnl_success;
  if (ok)
    ok = dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
  if (ok)
    ok = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) == dnnl_success;
  if (ok)
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
  if (pd)
    dnnl_primitive_desc_destroy(pd);
  if (ops)
    dnnl_post_ops_destroy(ops);
  if (attr)
    dnnl_primitive_attr_destroy(attr);
  return ok;
}

/* The cached entry for p (copied to *out); *owned when it must be destroyed after use. */
static bool get_entry(const gemm_params *p, onednn_entry *out, bool *owned) {
  pthread_mutex_lock(&cache_mu);
  bool ok = true;
  *owned = false;
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    engine = NULL, ok = false;
  int i = 0;
  for (; ok && i < cache_n; i++)
    if (!memcmp(&cache[i].key, p, sizeof *p))
      break;
  if (ok && i < cache_n) {
    *out = cache[i];
  } else if (ok) {
    ok = create_entry(p, out);
    if (ok && cache_n < ONEDNN_CACHE)
      cache[cache_n++] = *out;
    else
      *owned = ok;
  }
  pthread_mutex_unlock(&cache_mu);
  return ok;
}

static nr_status run_entry(const onednn_entry *e, const gemm_product *pr, const float *bias,
                           nr_error *err) {
  dnnl_stream_t stream = NULL;
  dnnl_memory_t m[4] = {0};
  dnnl_exec_arg_t args[4];
  int n = 0;
  bool ok = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
  ok = ok && dnnl_memory_create(&m[n], &e->src, engine, (void *)pr->a) == dnnl_success;
  args[n].arg = DNNL_ARG_SRC, args[n].memory = m[n], n++;
  ok = ok && dnnl_memory_create(&m[n], &e->wei, engine, (void *)pr->b) == dnnl_success;
  args[n].arg = DNNL_ARG_WEIGHTS, args[n].memory = m[n], n++;
  ok = ok && dnnl_memory_create(&m[n], &e->dst, engine, pr->c) == dnnl_success;
  args[n].arg = DNNL_ARG_DST, args[n].memory = m[n], n++;
  if (ok && e->use_bias) {
    ok = dnnl_memory_create(&m[n], &e->bias, engine, (void *)bias) == dnnl_success;
    args[n].arg = DNNL_ARG_BIAS, args[n].memory = m[n], n++;
  }
  ok = ok && dnnl_primitive_execute(e->prim, stream, n, args) == dnnl_success &&
       dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < 4; i++)
    if (m[i])
      dnnl_memory_destroy(m[i]);
  if (stream)
    dnnl_stream_destroy(stream);
  return ok ? NR_OK : nr_errorf(err, NR_ERR_RUNTIME, "onednn_matmul: execution failed");
}

nr_status gemm_onednn_run(const nr_exec_args *x) {
  gemm_params p;
  memcpy(&p, x->step->params, sizeof p);
  onednn_entry e;
  bool owned;
  if (!get_entry(&p, &e, &owned))
    return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_matmul: cannot create a %lldx%lldx%lld "
                     "matmul primitive", (long long)p.m, (long long)p.n, (long long)p.k);
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, &p, 0, &pr);
  gemm_epilogue_get(x, &p, pr.r, &ep);
  if (e.use_sum && pr.r != pr.c)
    memcpy(pr.c, pr.r, sizeof(float) * (size_t)(p.m * p.n));
  nr_status s = run_entry(&e, &pr, ep.bias, x->err);
  if (!s && e.manual_ep)
    nr_gemm_epilogue_apply(&ep, 0, 0, p.m, p.n, pr.c, p.n);
  if (owned)
    dnnl_primitive_destroy(e.prim);
  return s;
}
