/* gemm_onednn.c - the onednn_matmul tactic: a oneDNN (2.6, C API) matmul primitive
 * with the bias, the residual (a sum post-op over C pre-filled with R) and the
 * activation (an eltwise post-op) fused where oneDNN has them.
 *
 * Key decisions.
 *  - Primitives cannot be stored in an engine file and creating one costs far more
 *    than a small product, so run() keeps a process-wide cache of created primitives
 *    keyed by the step's params record (shape, transposes, epilogue) and the rows of
 *    a band: equal keys mean an equal primitive, whichever plan or context asks, and
 *    a key never goes stale when a plan is freed. The cache is a mutex-guarded table
 *    of ONEDNN_CACHE entries, kept for the life of the process; when it is full, a
 *    primitive is created and destroyed per call (correct, slow).
 *  - The threads are the pool's, not OpenMP's (extlib.h): C is cut into one band of
 *    rows per thread, each band a primitive created and run with an OpenMP team of
 *    one, taking its scratchpad from its own slice of the step's scratch (user
 *    scratchpad mode, since two bands run at once), which prepare() sizes for the
 *    build's thread count (the band primitives are created then, so the first run does
 *    not pay for them). An OpenMP team of two beside the pool's spinning worker measured
 *    slower at 2 threads than at 1 on bert_tiny.
 *  - What oneDNN cannot fuse (an alpha != 1 together with a bias, hard_sigmoid) runs
 *    as nnroute's own epilogue pass after the primitive. */
#include "kernels/cpu/extlib.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define ONEDNN_CACHE 256
/* Rows a band has at least: below this a product runs as one band. */
#define BAND_MIN_ROWS 16

typedef struct onednn_entry {
  nr_gemm_step_params key;
  int64_t rows; /* of the band */
  dnnl_primitive_t prim;
  dnnl_memory_desc_t src, wei, bias, dst;
  size_t scratchpad; /* bytes */
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

/* Creates the primitive of `rows` rows of p into e (the calling thread's OpenMP team
 * size is 1); false on any oneDNN failure. */
static bool create_entry(const nr_gemm_step_params *p, int64_t rows, onednn_entry *e) {
  memset(e, 0, sizeof *e);
  e->key = *p;
  e->rows = rows;
  bool ta = p->flags & GEMM_F_TA, tb = p->flags & GEMM_F_TB;
  md2(&e->src, rows, p->k, ta ? 1 : p->k, ta ? p->m : 1);
  md2(&e->wei, p->k, p->n, tb ? 1 : p->n, tb ? p->k : 1);
  md2(&e->dst, rows, p->n, p->n, 1);
  bool row = p->bias == GEMM_BIAS_PACKED_ROW || p->bias == GEMM_BIAS_IN_ROW;
  if (row)
    md2(&e->bias, rows, 1, 1, 1);
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
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                dnnl_success &&
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
  if (ok) {
    e->scratchpad = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(
        pd, dnnl_query_scratchpad_md, 0));
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
  }
  if (pd)
    dnnl_primitive_desc_destroy(pd);
  if (ops)
    dnnl_post_ops_destroy(ops);
  if (attr)
    dnnl_primitive_attr_destroy(attr);
  return ok;
}

/* The cached entry for `rows` rows of p (copied to *out); *owned when it must be
 * destroyed after use. */
static bool get_entry(const nr_gemm_step_params *p, int64_t rows, onednn_entry *out,
                      bool *owned) {
  pthread_mutex_lock(&cache_mu);
  bool ok = true;
  *owned = false;
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    engine = NULL, ok = false;
  int i = 0;
  for (; ok && i < cache_n; i++)
    if (cache[i].rows == rows && !memcmp(&cache[i].key, p, sizeof *p))
      break;
  if (ok && i < cache_n) {
    *out = cache[i];
  } else if (ok) {
    int old = nr_extlib_team(1);
    ok = create_entry(p, rows, out);
    nr_extlib_team(old);
    if (ok && cache_n < ONEDNN_CACHE)
      cache[cache_n++] = *out;
    else
      *owned = ok;
  }
  pthread_mutex_unlock(&cache_mu);
  return ok;
}

/* Runs e on rows [r0, r0 + e->rows) of the product, with its scratchpad at pad; false
 * on any oneDNN failure. */
static bool run_band(const onednn_entry *e, const gemm_product *pr, const float *bias,
                     int64_t r0, void *pad) {
  const nr_gemm_step_params *p = &e->key;
  bool ta = p->flags & GEMM_F_TA, row_bias = p->bias == GEMM_BIAS_PACKED_ROW ||
                                             p->bias == GEMM_BIAS_IN_ROW;
  dnnl_memory_desc_t sp_md;
  dnnl_dims_t sp_dims = {(int64_t)e->scratchpad};
  dnnl_stream_t stream = NULL;
  dnnl_memory_t m[5] = {0};
  dnnl_exec_arg_t args[5];
  int n = 0;
  bool ok = (!e->scratchpad || dnnl_memory_desc_init_by_tag(&sp_md, 1, sp_dims, dnnl_u8,
                                                            dnnl_x) == dnnl_success) &&
            dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success;
  const float *a = pr->a + (ta ? r0 : r0 * p->k);
  ok = ok && dnnl_memory_create(&m[n], &e->src, engine, (void *)a) == dnnl_success;
  args[n].arg = DNNL_ARG_SRC, args[n].memory = m[n], n++;
  ok = ok && dnnl_memory_create(&m[n], &e->wei, engine, (void *)pr->b) == dnnl_success;
  args[n].arg = DNNL_ARG_WEIGHTS, args[n].memory = m[n], n++;
  ok = ok && dnnl_memory_create(&m[n], &e->dst, engine, pr->c + r0 * p->n) == dnnl_success;
  args[n].arg = DNNL_ARG_DST, args[n].memory = m[n], n++;
  if (ok && e->use_bias) {
    const float *b = bias + (row_bias ? r0 : 0);
    ok = dnnl_memory_create(&m[n], &e->bias, engine, (void *)b) == dnnl_success;
    args[n].arg = DNNL_ARG_BIAS, args[n].memory = m[n], n++;
  }
  if (ok && e->scratchpad) {
    ok = dnnl_memory_create(&m[n], &sp_md, engine, pad) == dnnl_success;
    args[n].arg = DNNL_ARG_SCRATCHPAD, args[n].memory = m[n], n++;
  }
  ok = ok && dnnl_primitive_execute(e->prim, stream, n, args) == dnnl_success &&
       dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < 5; i++)
    if (m[i])
      dnnl_memory_destroy(m[i]);
  if (stream)
    dnnl_stream_destroy(stream);
  return ok;
}

/* The bands of p on `threads` threads: their primitives (the first bands' and the
 * last's, equal when the rows divide evenly) and each band's scratchpad bytes. */
typedef struct band_plan {
  int64_t bands;
  onednn_entry full, last;
  bool owned_full, owned_last;
  uint64_t pad; /* bytes a band's scratchpad takes in the step's scratch (64-aligned) */
} band_plan;

static void plan_release(band_plan *b) {
  if (b->owned_full)
    dnnl_primitive_destroy(b->full.prim);
  if (b->owned_last)
    dnnl_primitive_destroy(b->last.prim);
}

static bool plan_bands(const nr_gemm_step_params *p, int threads, band_plan *b) {
  memset(b, 0, sizeof *b);
  int64_t bands = p->m / BAND_MIN_ROWS < threads ? p->m / BAND_MIN_ROWS : threads;
  bands = bands < 1 ? 1 : bands;
  int64_t rows = (p->m + bands - 1) / bands;
  b->bands = (p->m + rows - 1) / rows;
  int64_t last = p->m - (b->bands - 1) * rows;
  if (!get_entry(p, rows, &b->full, &b->owned_full))
    return false;
  b->last = b->full;
  if (last != rows && !get_entry(p, last, &b->last, &b->owned_last)) {
    plan_release(b);
    return false;
  }
  size_t most = b->full.scratchpad > b->last.scratchpad ? b->full.scratchpad
                                                        : b->last.scratchpad;
  b->pad = (most + 63) / 64 * 64;
  return true;
}

nr_status gemm_onednn_scratch(const nr_gemm_step_params *p, int threads, uint64_t *bytes,
                              nr_error *err) {
  band_plan b;
  if (!plan_bands(p, threads, &b))
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "onednn_matmul: oneDNN cannot build a "
                     "%lldx%lldx%lld matmul", (long long)p->m, (long long)p->n,
                     (long long)p->k);
  *bytes = b.pad ? (uint64_t)b.bands * b.pad + 64 : 0;
  plan_release(&b);
  return NR_OK;
}

typedef struct band_job {
  const band_plan *b;
  const gemm_product *pr;
  const float *bias;
  char *pads; /* band i's scratchpad at pads + i * b->pad */
  _Atomic int failed;
} band_job;

static void band_task(void *arg, int64_t begin, int64_t end, int thread) {
  band_job *j = arg;
  const band_plan *b = j->b;
  (void)thread;
  int old = nr_extlib_team(1);
  for (int64_t i = begin; i < end; i++) {
    const onednn_entry *e = i + 1 < b->bands ? &b->full : &b->last;
    if (!run_band(e, j->pr, j->bias, i * b->full.rows, j->pads + i * (int64_t)b->pad))
      atomic_store(&j->failed, 1);
  }
  nr_extlib_team(old);
}

nr_status gemm_onednn_run(const nr_exec_args *x) {
  nr_gemm_step_params p;
  memcpy(&p, x->step->params, sizeof p);
  /* An engine run on more threads than it was built for has scratch for fewer bands:
   * as many as fit. */
  band_plan b;
  for (int t = nr_extlib_threads(x);; t--) {
    if (!plan_bands(&p, t, &b))
      return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_matmul: cannot create a "
                       "%lldx%lldx%lld matmul primitive", (long long)p.m, (long long)p.n,
                       (long long)p.k);
    if (!b.pad || (uint64_t)b.bands * b.pad + 64 <= x->step->scratch)
      break;
    plan_release(&b);
    if (t <= 1)
      return nr_errorf(x->err, NR_ERR_RUNTIME, "onednn_matmul: this oneDNN wants more "
                       "scratch than the engine holds (rebuild the engine here)");
  }
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, &p, 0, &pr);
  gemm_epilogue_get(x, &p, pr.r, &ep);
  if (b.full.use_sum && pr.r != pr.c)
    memcpy(pr.c, pr.r, sizeof(float) * (size_t)(p.m * p.n));
  band_job j = {.b = &b, .pr = &pr, .bias = ep.bias,
                .pads = (char *)(((uintptr_t)x->scratch + 63) & ~(uintptr_t)63)};
  if (b.bands > 1)
    nr_parallel_for(x->pool, b.bands, 1, (int)b.bands, band_task, &j);
  else
    band_task(&j, 0, 1, 0);
  if (!atomic_load(&j.failed) && b.full.manual_ep)
    nr_gemm_epilogue_apply(&ep, 0, 0, p.m, p.n, pr.c, p.n);
  plan_release(&b);
  return atomic_load(&j.failed) ? nr_errorf(x->err, NR_ERR_RUNTIME,
                                            "onednn_matmul: execution failed")
                                : NR_OK;
}
