/* onednn_q_exec.c - the run-time half of the oneDNN int8 family (onednn_q.h): the
 * process-wide primitive cache, the choice of bands at build time, and the executor
 * that quantizes a step's input and runs its bands on the context's pool.
 *
 * Key decision: oneDNN never starts its own OpenMP team for these steps. Primitives
 * are created while the calling thread's OpenMP team size is 1 (so they split no work
 * and agree on one weight format whatever the machine), and every pool thread that
 * runs a band sets its own team size to 1 first, through the omp_set_num_threads
 * that libdnnl's OpenMP runtime exports (nr_extlib_team, extlib.h). The parallelism
 * is the pool's: bands and quantize chunks are claimed one at a time, so a worker
 * the OS deschedules costs its own items only. */
#include "kernels/cpu/extlib.h"
#include "kernels/cpu/onednn_q/onednn_q.h"
#include "kernels/cpu/qgemm/qgemm.h" /* nr_qgemm_quantize_row: requantizing for it */

#include "util/error.h"
#include "util/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- the primitive cache --------------------------------------------------------- */

typedef struct cache_entry {
  nr_onednn_q_key key;
  float *scales;
  nr_onednn_q_prim prim;
  struct cache_entry *next;
} cache_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache;
static dnnl_engine_t engine;

static bool same(const cache_entry *e, const nr_onednn_q_key *k, const float *scales) {
  return !memcmp(&e->key, k, sizeof *k) &&
         !memcmp(e->scales, scales, sizeof(float) * k->n_out);
}

static void prim_destroy(nr_onednn_q_prim *p) {
  dnnl_primitive_destroy(p->band[0].op);
  dnnl_primitive_destroy(p->band[1].op);
}

/* Both bands' primitives, which must want the same weight format. */
static bool create_bands(const nr_onednn_q_key *k, const float *scales,
                         nr_onednn_q_create_fn create, nr_onednn_q_prim *p) {
  dnnl_memory_desc_t w1, b1;
  bool m1;
  if (!create(k, scales, engine, k->rows, &p->band[0], &p->w_md, &p->b_md, &p->manual_act))
    return false;
  if (k->last_rows == k->rows)
    return true;
  return create(k, scales, engine, k->last_rows, &p->band[1], &w1, &b1, &m1) &&
         dnnl_memory_desc_equal(&w1, &p->w_md);
}

/* Creates and links an entry (cache_lock held). */
static cache_entry *add(const nr_onednn_q_key *k, const float *scales,
                        nr_onednn_q_create_fn create) {
  if (!engine && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
    return NULL;
  cache_entry *e = calloc(1, sizeof *e);
  float *s = malloc(sizeof(float) * (k->n_out ? k->n_out : 1));
  int old = nr_extlib_team(1);
  bool ok = e && s && create_bands(k, scales, create, &e->prim);
  nr_extlib_team(old);
  if (!ok) {
    if (e)
      prim_destroy(&e->prim);
    free(e);
    free(s);
    return NULL;
  }
  memcpy(s, scales, sizeof(float) * k->n_out);
  e->key = *k;
  e->scales = s;
  e->next = cache;
  cache = e;
  return e;
}

const nr_onednn_q_prim *nr_onednn_q_lookup(const nr_onednn_q_key *k, const float *scales,
                                           nr_onednn_q_create_fn create) {
  pthread_mutex_lock(&cache_lock);
  cache_entry *e = cache;
  while (e && !same(e, k, scales))
    e = e->next;
  if (!e)
    e = add(k, scales, create);
  pthread_mutex_unlock(&cache_lock);
  return e ? &e->prim : NULL;
}

void nr_onednn_q_cache_flush(void) {
  pthread_mutex_lock(&cache_lock);
  while (cache) {
    cache_entry *e = cache;
    cache = e->next;
    prim_destroy(&e->prim);
    free(e->scales);
    free(e);
  }
  pthread_mutex_unlock(&cache_lock);
}

/* ---- bands ---------------------------------------------------------------------- */

static int build_threads(const nr_tactic_ctx *c, const nr_step *st) {
  if (st->threads > 0)
    return st->threads;
  return nr_threads_or_online(c->threads);
}

/* A band's floats are requantized from a buffer of its thread under a uint8 output
 * (the int8_chain pass; a float view of the step still carries the slot's q8_round):
 * enough bands that the buffer stays in L2. One band of a 96 x 112 x 112 output wrote
 * and read back 4.8 MB and made the step 2x slower than writing fp32. */
#define Y8_BAND_BYTES ((int64_t)256 << 10)

static int64_t y8_least_bands(const nr_tactic_ctx *c, int64_t out_rows) {
  const nr_slot *y = nr_step_out(c, 0);
  if (!y || !y->q8_round || y->rank < 1 || out_rows < 1 || y->dims[0] < 1)
    return 1;
  int64_t n = 1;
  for (int d = 0; d < y->rank; d++)
    n *= y->dims[d];
  int64_t bytes = n / y->dims[0] * (int64_t)sizeof(float);
  return (bytes + Y8_BAND_BYTES - 1) / Y8_BAND_BYTES;
}

const nr_onednn_q_prim *nr_onednn_q_choose_bands(const nr_tactic_ctx *c, const nr_step *st,
                                                 nr_onednn_q_key *k, const float *scales,
                                                 nr_onednn_q_create_fn create,
                                                 int64_t out_rows, double macs,
                                                 uint32_t *threads) {
  int t = macs < (double)(1 << 18) ? 1 : build_threads(c, st);
  *threads = (uint32_t)t;
  int64_t least = y8_least_bands(c, out_rows);
  int64_t tries[3] = {2 * (int64_t)t, t, 1};
  for (int i = t > 1 ? 0 : 2; i < 3; i++) {
    int64_t b = tries[i] > least ? tries[i] : least;
    b = b < out_rows ? b : out_rows;
    b = b < 1 ? 1 : b;
    int64_t rows = (out_rows + b - 1) / b;
    b = (out_rows + rows - 1) / rows;
    k->bands = (uint32_t)b;
    k->rows = (uint32_t)rows;
    k->last_rows = (uint32_t)(out_rows - (b - 1) * rows);
    const nr_onednn_q_prim *p = nr_onednn_q_lookup(k, scales, create);
    if (p)
      return p;
  }
  return NULL;
}

/* ---- the executor ---------------------------------------------------------------- */

static uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

static uint64_t quant_bytes(const nr_onednn_q_geom *g) {
  return align64((uint64_t)g->images * (uint64_t)(g->pad_top + g->body + g->pad_bottom));
}

/* Bytes of one thread's scratchpad (either band's). */
static uint64_t pad_bytes(const nr_onednn_q_prim *p) {
  uint64_t a = dnnl_memory_desc_get_size(&p->band[0].sp_md);
  uint64_t b = p->band[1].op ? dnnl_memory_desc_get_size(&p->band[1].sp_md) : 0;
  return align64(a > b ? a : b);
}

/* Bytes of one thread's float band under a uint8 output, else 0. */
static uint64_t band_bytes(const nr_onednn_q_geom *g, const nr_onednn_q_head *h) {
  return h->y_round ? align64((uint64_t)g->y_band * sizeof(float)) : 0;
}

uint64_t nr_onednn_q_scratch(const nr_onednn_q_geom *g, const nr_onednn_q_prim *p,
                             const nr_onednn_q_head *h) {
  return quant_bytes(g) + (uint64_t)h->threads * (pad_bytes(p) + band_bytes(g, h));
}

typedef struct exec_job {
  const nr_onednn_q_prim *p;
  const nr_onednn_q_head *h;
  const nr_onednn_q_geom *g;
  const float *x;
  bool x8; /* x is uint8 already on the step's grid (the int8_chain pass) */
  uint8_t *xq;
  float *y;
  const void *w, *bias;
  int64_t chunks; /* quantize chunks per image */
  uint8_t *pads;  /* thread i's scratchpad at pads + i * pad */
  uint64_t pad;
  uint8_t *y8;    /* the uint8 output, or NULL */
  float *bands;   /* y8: thread i's float band at bands + i * band floats */
  uint64_t band;
  atomic_int failed;
} exec_job;

#define QUANT_CHUNK ((int64_t)1 << 16)

/* Quantize chunks; chunk 0 of an image also writes its padding rows. */
static void quant_task(void *arg, int64_t begin, int64_t end, int thread) {
  exec_job *j = arg;
  const nr_onednn_q_geom *g = j->g;
  int64_t per = g->pad_top + g->body + g->pad_bottom;
  for (int64_t i = begin; i < end; i++) {
    int64_t img = i / j->chunks, c = i % j->chunks, lo = c * QUANT_CHUNK;
    int64_t n = g->body - lo < QUANT_CHUNK ? g->body - lo : QUANT_CHUNK;
    uint8_t *q = j->xq + img * per;
    if (c == 0) {
      memset(q, j->h->x_zp, (size_t)g->pad_top);
      memset(q + g->pad_top + g->body, j->h->x_zp, (size_t)g->pad_bottom);
    }
    if (j->x8)
      memcpy(q + g->pad_top + lo, (const uint8_t *)(const void *)j->x + img * g->x_image + lo,
             (size_t)n);
    else
      nr_quantize_u8(j->x + img * g->x_image + lo, q + g->pad_top + lo, n,
                     1.0f / j->h->x_scale, j->h->x_zp);
  }
}

/* A uint8 output: band b's n floats requantized as the reader would have quantized
 * them (nr_q8_round). */
static void requant_band(const exec_job *j, const float *y, int64_t img, int64_t b,
                         int64_t n) {
  const nr_onednn_q_head *h = j->h;
  uint8_t *q = j->y8 + img * j->g->y_image + b * j->g->y_band;
  if (h->y_round == NR_Q8_ROUND_FMA)
    nr_quantize_u8(y, q, n, h->y_inv_scale, h->y_zp);
  else
    nr_qgemm_quantize_row(y, 1, n, h->y_inv_scale, h->y_zp, h->y_qmax, q);
}

static bool run_band(const exec_job *j, int64_t img, int64_t b, int thread) {
  const nr_onednn_q_geom *g = j->g;
  bool last = b == j->h->bands - 1 && j->p->band[1].op;
  const nr_onednn_q_band *band = &j->p->band[last];
  uint8_t *xq = j->xq + img * (g->pad_top + g->body + g->pad_bottom) + b * g->x_band;
  float *y = j->y8 ? j->bands + (uint64_t)thread * j->band / sizeof(float)
                   : j->y + img * g->y_image + b * g->y_band;
  dnnl_memory_t mq = NULL, mw = NULL, mb = NULL, my = NULL, ms = NULL;
  dnnl_stream_t s = NULL;
  bool ok = dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success &&
            dnnl_memory_create(&ms, &band->sp_md, engine,
                               j->pads + (uint64_t)thread * j->pad) == dnnl_success &&
            dnnl_memory_create(&mq, &band->xq_md, engine, xq) == dnnl_success &&
            dnnl_memory_create(&mw, &j->p->w_md, engine, (void *)j->w) == dnnl_success &&
            dnnl_memory_create(&my, &band->y_md, engine, y) == dnnl_success &&
            (!j->bias ||
             dnnl_memory_create(&mb, &j->p->b_md, engine, (void *)j->bias) == dnnl_success);
  if (ok) {
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, mq}, {DNNL_ARG_WEIGHTS, mw},
                               {DNNL_ARG_DST, my}, {DNNL_ARG_SCRATCHPAD, ms},
                               {DNNL_ARG_BIAS, mb}};
    ok = dnnl_primitive_execute(band->op, s, j->bias ? 5 : 4, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
  }
  if (ok && j->y8) /* the band's rows: y_band floats, or the last band's share */
    requant_band(j, y, img, b, (int64_t)dnnl_memory_desc_get_size(&band->y_md) /
                                   (int64_t)sizeof(float));
  dnnl_memory_destroy(mq), dnnl_memory_destroy(mw);
  dnnl_memory_destroy(mb), dnnl_memory_destroy(my), dnnl_memory_destroy(ms);
  dnnl_stream_destroy(s);
  return ok;
}

static void band_task(void *arg, int64_t begin, int64_t end, int thread) {
  exec_job *j = arg;
  /* the bands start no OpenMP team; other oneDNN users of this thread get theirs back */
  int old = nr_extlib_team(1);
  for (int64_t i = begin; i < end; i++)
    if (!run_band(j, i / j->h->bands, i % j->h->bands, thread))
      atomic_store(&j->failed, 1);
  nr_extlib_team(old);
}

nr_status nr_onednn_q_execute(const nr_exec_args *a, const nr_onednn_q_prim *p,
                              const nr_onednn_q_head *h, const nr_onednn_q_geom *g,
                              const float *x, float *y, const char *who) {
  if (!dnnl_memory_desc_equal(&p->w_md, &h->w_md))
    return nr_errorf(a->err, NR_ERR_RUNTIME, "%s: this oneDNN wants the int8 weights in "
                     "another format than the engine holds (rebuild the engine here)",
                     who);
  if (nr_onednn_q_scratch(g, p, h) > a->step->scratch)
    return nr_errorf(a->err, NR_ERR_RUNTIME, "%s: the step's %llu bytes of scratch are "
                     "fewer than its primitives need (rebuild the engine here)", who,
                     (unsigned long long)a->step->scratch);
  if (h->y_round && a->out_slot[0]->dtype != NR_DTYPE_UINT8)
    return nr_errorf(a->err, NR_ERR_RUNTIME, "%s: the record requantizes into a float "
                     "output", who);
  exec_job j = {p, h, g, x, a->in_slot[0]->dtype == NR_DTYPE_UINT8, a->scratch, y,
                (const uint8_t *)a->packed + h->w_off,
                h->bias_off ? (const uint8_t *)a->packed + h->bias_off : NULL,
                (g->body + QUANT_CHUNK - 1) / QUANT_CHUNK,
                (uint8_t *)a->scratch + quant_bytes(g), pad_bytes(p)};
  if (h->y_round) {
    j.y8 = (uint8_t *)(void *)y;
    j.bands = (float *)(void *)(j.pads + (uint64_t)h->threads * j.pad);
    j.band = band_bytes(g, h);
  }
  atomic_init(&j.failed, 0);
  int t = (int)h->threads; /* the scratchpads prepare() made room for */
  if (a->step->threads > 0 && a->step->threads < t)
    t = a->step->threads;
  if (j.chunks < 1)
    j.chunks = 1;
  nr_parallel_for(a->pool, g->images * j.chunks, 1, t, quant_task, &j);
  nr_parallel_for(a->pool, g->images * h->bands, 1, t, band_task, &j);
  return atomic_load(&j.failed)
             ? nr_errorf(a->err, NR_ERR_RUNTIME, "%s: oneDNN failed", who)
             : NR_OK;
}
