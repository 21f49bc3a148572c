/* tactics_gemm.c - the GEMM family's tactics and knobs: Gemm, MatMul,
 * nnroute.FusedGemm and nnroute.FusedMatMul on the packed nnroute kernels (one tactic
 * per micro-kernel of gemm_ukernels.inc, id = kernel name), OpenBLAS (gemm_openblas.c)
 * and oneDNN (gemm_onednn.c).
 *
 * Key decisions. Every engine shares one analysis (gemm_analyze) and one params record
 * (gemm_tactic.h), so a node means the same products whoever runs it. A constant B
 * (or a constant A with a runtime B) is packed at build time into the engine for the
 * chosen micro-kernel and kc; a constant C of Gemm is pre-scaled by beta and
 * pre-broadcast into a bias vector next to it. Runtime operands (attention's
 * Q K^T) are packed into per-thread scratch at run time. Tactic ids repeat once per
 * op type with the same functions, so finding a tactic by id alone is safe.
 *
 * Knobs are listed on the prepared graph, so a MatMul that recognize.attention
 * swallows by default gets none (passes/fate.h); gemm.prepack=off keeps
 * the constant operand raw (packed into scratch on every run), gemm.epilogue=separate
 * applies bias/residual/activation in a second pass over C, gemm.threads_max=1 sets
 * step->threads so the step runs on the calling thread, gemm.threads_map=any lets any
 * thread take any part of the split (default: part i on thread i, gemm.c). */
#include "ir/fused.h"
#include "kernels/cpu/extlib.h"
#include "kernels/cpu/gemm/gemm_knobs.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "passes/fate.h"
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- analysis -------------------------------------------------------------------- */

bool gemm_node_is_gemm(const nr_node *n) { return nr_gemm_desc_is_node(n); }

/* A runtime C is used in place, so it must not need scaling or broadcasting; a
 * constant one is pre-scaled by beta into the packed data (gemm_bias_build). */
static bool gemm_addend(const gemm_view *v, const nr_gemm_desc *d,
                        nr_gemm_step_params *p) {
  bool is_const = v->is_const[2];
  switch (d->add) {
  case NR_GEMM_ADD_NONE: return true;
  case NR_GEMM_ADD_COL:
    p->bias = is_const ? GEMM_BIAS_PACKED_COL : GEMM_BIAS_IN_COL;
    return is_const || (p->beta == 1.0f && d->add_cols == d->n);
  case NR_GEMM_ADD_ROW:
    p->bias = is_const ? GEMM_BIAS_PACKED_ROW : GEMM_BIAS_IN_ROW;
    return is_const || p->beta == 1.0f;
  case NR_GEMM_ADD_FULL: p->resid = GEMM_RES_C; return true;
  }
  return false;
}

/* The record's shape of the products: a MatMul whose B has no batch dims folds A's
 * batch into M; otherwise one product per element of Y's batch. */
static bool products_of(const nr_gemm_desc *d, nr_gemm_step_params *p) {
  p->m = d->m, p->n = d->n, p->k = d->k, p->batch = 1;
  p->alpha = d->alpha, p->beta = d->beta;
  p->flags |= d->trans_a ? GEMM_F_TA : 0;
  p->flags |= d->trans_b ? GEMM_F_TB : 0;
  bool matmul = d->op == NR_GEMM_OP_MATMUL || d->op == NR_GEMM_OP_FUSED_MATMUL;
  if (matmul && d->b_rank <= 2) {
    p->m = d->m * d->batch;
  } else if (matmul) {
    if (d->batch > INT32_MAX)
      return false;
    p->batch = (int32_t)d->batch;
    p->flags |= GEMM_F_BATCHED;
  }
  return true;
}

static bool float_operands(const gemm_view *v) {
  for (int i = 0; i < 4; i++) {
    const nr_value *x = nr_node_io_in(&v->io, i);
    if (x && x->dtype != NR_DTYPE_FLOAT)
      return false;
  }
  const nr_value *y = nr_node_io_out(&v->io, 0);
  return y && y->dtype == NR_DTYPE_FLOAT;
}

bool gemm_analyze(const gemm_view *v, nr_gemm_step_params *p) {
  memset(p, 0, sizeof *p);
  nr_gemm_desc d;
  if (!gemm_node_is_gemm(v->node) || !float_operands(v) ||
      nr_gemm_desc_parse(v->node, &v->io, &d, NULL) || !products_of(&d, p) ||
      !gemm_addend(v, &d, p))
    return false;
  p->op = (uint8_t)d.op;
  p->flags |= v->is_const[0] ? GEMM_F_A_CONST : 0;
  p->flags |= v->is_const[1] ? GEMM_F_B_CONST : 0;
  p->act = (uint8_t)d.act;
  p->act_a = d.act_a;
  p->act_b = d.act_b;
  if (d.residual) {
    if (p->resid != GEMM_RES_NONE)
      return false;
    p->resid = GEMM_RES_R;
  }
  return true;
}

void gemm_view_from_ctx(const nr_tactic_ctx *c, gemm_view *v) {
  memset(v, 0, sizeof *v);
  v->node = c->node;
  nr_node_io_from_ctx(c, &v->io);
  for (int i = 0; i < 4; i++) {
    const nr_slot *s = nr_step_in(c, i);
    /* absorbed: a constant of a loaded engine stored only as packed data */
    v->is_const[i] = s && (s->kind == NR_SLOT_CONST || s->kind == NR_SLOT_ABSORBED);
  }
}

void gemm_view_from_graph(const nr_graph *g, const nr_node *n, gemm_view *v) {
  memset(v, 0, sizeof *v);
  v->node = n;
  nr_node_io_from_graph(g, n, &v->io);
  for (int i = 0; i < 4 && i < n->n_inputs; i++)
    v->is_const[i] = n->inputs[i] >= 0 &&
                     (g->tensors[n->inputs[i]].flags & NR_TENSOR_CONST);
}

/* ---- run-time helpers ------------------------------------------------------------ */

/* Matrix indices of A and B for batch element i, broadcasting their batch dims. */
static void batch_index(const nr_slot *as, const nr_slot *bs, int64_t i, int64_t *ai,
                        int64_t *bi) {
  int ar = as->rank > 2 ? as->rank - 2 : 0, br = bs->rank > 2 ? bs->rank - 2 : 0;
  int yr = ar > br ? ar : br;
  int64_t astride = 1, bstride = 1;
  *ai = *bi = 0;
  for (int d = yr - 1; d >= 0; d--) {
    int64_t ad = d - (yr - ar) >= 0 ? as->dims[d - (yr - ar)] : 1;
    int64_t bd = d - (yr - br) >= 0 ? bs->dims[d - (yr - br)] : 1;
    int64_t yd = ad > bd ? ad : bd, coord = i % yd;
    i /= yd;
    *ai += (ad == 1 ? 0 : coord) * astride;
    *bi += (bd == 1 ? 0 : coord) * bstride;
    astride *= ad, bstride *= bd;
  }
}

void gemm_product_get(const nr_exec_args *x, const nr_gemm_step_params *p, int64_t i,
                      gemm_product *o) {
  int64_t ai = 0, bi = 0;
  if (p->flags & GEMM_F_BATCHED)
    batch_index(x->in_slot[0], x->in_slot[1], i, &ai, &bi);
  /* An operand packed at build may have no raw bytes at run time (NR_SLOT_ABSORBED:
   * x->in[i] is NULL); callers that packed it read x->packed instead. */
  o->a = x->in[0] ? (const float *)x->in[0] + ai * p->m * p->k : NULL;
  if (p->flags & GEMM_F_PB)
    o->b = (const float *)x->packed + bi * (int64_t)(nr_gemm_packed_b_size(p->cfg, p->k, p->n) / 4);
  else
    o->b = x->in[1] ? (const float *)x->in[1] + bi * p->k * p->n : NULL;
  o->c = (float *)x->out[0] + i * p->m * p->n;
  o->r = NULL;
  if (p->resid == GEMM_RES_C)
    o->r = x->in[2];
  else if (p->resid == GEMM_RES_R)
    o->r = (const float *)x->in[3] + i * p->m * p->n;
}

void gemm_epilogue_get(const nr_exec_args *x, const nr_gemm_step_params *p,
                       const float *r, nr_epilogue *ep) {
  memset(ep, 0, sizeof *ep);
  switch (p->bias) {
  case GEMM_BIAS_PACKED_ROW: ep->bias_per_row = true; /* fall through */
  case GEMM_BIAS_PACKED_COL: ep->bias = (const float *)x->packed + p->bias_off; break;
  case GEMM_BIAS_IN_ROW: ep->bias_per_row = true; /* fall through */
  case GEMM_BIAS_IN_COL: ep->bias = x->in[2]; break;
  }
  ep->residual = r;
  ep->ldr = p->n;
  ep->beta = p->resid == GEMM_RES_C ? p->beta : 1.0f;
  ep->act = (nr_act)p->act;
  ep->act_a = p->act_a;
  ep->act_b = p->act_b;
}

/* ---- prepare: shared by every engine ------------------------------------------------ */

nr_status gemm_bias_build(const nr_tactic_ctx *c, const nr_gemm_step_params *p,
                          float *out) {
  gemm_view v;
  gemm_view_from_ctx(c, &v);
  nr_gemm_desc d;
  nr_status st = nr_gemm_desc_parse(c->node, &v.io, &d, c->err);
  if (st)
    return st;
  const float *src = nr_step_const(c, 2);
  bool scalar = d.add_rows * d.add_cols == 1; /* one value broadcast to all */
  int64_t len = p->bias == GEMM_BIAS_PACKED_ROW ? p->m : p->n;
  float beta = p->op == GEMM_OP_GEMM || p->op == GEMM_OP_FUSED_GEMM ? p->beta : 1.0f;
  for (int64_t i = 0; i < len; i++)
    out[i] = beta * src[scalar ? 0 : i];
  return NR_OK;
}

/* gemm.threads_max=1: the step runs on the calling thread (nn_run and the epilogue
 * pass cap their threads at step->threads). */
static void set_threads(const nr_tactic_ctx *c, nr_step *st) {
  if (nr_route_is(c->route, NR_KNOB_GEMM_THREADS_MAX, c->node, "1"))
    st->threads = 1;
}

static int default_threads(const nr_step *st) {
  return nr_threads_or_online(st->threads);
}

/* Packs constant operands (pack_ops) and the bias into the engine; fills step. */
static nr_status prepare_common(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                                nr_gemm_step_params *p, bool pack_ops) {
  int64_t bs_batch = 1;
  if (pack_ops && (p->flags & GEMM_F_B_CONST)) {
    p->flags |= GEMM_F_PB;
    const nr_slot *bs = nr_step_in(c, 1);
    for (int d = 0; d + 2 < bs->rank; d++)
      bs_batch *= bs->dims[d];
  } else if (pack_ops && (p->flags & GEMM_F_A_CONST) && !(p->flags & GEMM_F_BATCHED)) {
    p->flags |= GEMM_F_PA;
  }
  size_t pb = (p->flags & GEMM_F_PB) ? nr_gemm_packed_b_size(p->cfg, p->k, p->n) : 0;
  size_t pa = (p->flags & GEMM_F_PA) ? nr_gemm_packed_a_size(p->cfg, p->m, p->k) : 0;
  size_t ops = pb * (size_t)bs_batch + pa;
  bool packed_bias = p->bias == GEMM_BIAS_PACKED_COL || p->bias == GEMM_BIAS_PACKED_ROW;
  size_t blen = packed_bias ? (size_t)(p->bias == GEMM_BIAS_PACKED_ROW ? p->m : p->n) : 0;
  size_t total = ops + blen * sizeof(float);
  p->bias_off = (uint32_t)(ops / sizeof(float));
  if (total) {
    float *buf = aligned_alloc(64, (total + 63) / 64 * 64);
    if (!buf)
      return nr_errorf(c->err, NR_ERR_NOMEM, "gemm: %zu bytes of packed weights", total);
    for (int64_t i = 0; i < bs_batch && pb; i++) {
      const float *b = (const float *)nr_step_const(c, 1) + i * p->k * p->n;
      int64_t ldb = p->flags & GEMM_F_TB ? p->k : p->n;
      nr_gemm_pack_b(p->cfg, p->k, p->n, (nr_gemm_operand){b, ldb, p->flags & GEMM_F_TB, false},
                     buf + i * (int64_t)(pb / sizeof(float)));
    }
    if (pa) {
      int64_t lda = p->flags & GEMM_F_TA ? p->m : p->k;
      nr_gemm_pack_a(p->cfg, p->m, p->k,
                     (nr_gemm_operand){nr_step_const(c, 0), lda, p->flags & GEMM_F_TA, false},
                     buf);
    }
    nr_status s = packed_bias ? gemm_bias_build(c, p, buf + p->bias_off) : NR_OK;
    if (!s)
      s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
    free(buf);
    if (s)
      return s;
    if (pb) /* run() reads the packed operand only (gemm_product_get, run_product) */
      nr_step_absorb(st, 1);
    if (pa)
      nr_step_absorb(st, 0);
  }
  st->packed_size = total;
  memset(st->params, 0, sizeof st->params);
  memcpy(st->params, p, sizeof *p);
  return NR_OK;
}

/* ---- nnroute kernels ------------------------------------------------------------- */

/* The 1-row kernels only run problems with few rows (M = 1 is their point). */
static bool nn_supports(const nr_tactic_ctx *c, int uk) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  if (!gemm_analyze(&v, &p))
    return false;
  return nr_gemm_ukernel_get(uk)->mr > 1 || p.m <= 4;
}

/* A blocking knob's value, or dflt for auto / absent. */
static int knob_int(const nr_tactic_ctx *c, nr_knob_id id, int dflt) {
  const char *v = nr_route_get(c->route, id, c->node);
  return v && strcmp(v, "auto") ? atoi(v) : dflt;
}

static nr_status nn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, int uk) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  if (!gemm_analyze(&v, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "gemm: node %s not supported", c->node->name);
  p.cfg = nr_gemm_default_cfg(p.m, p.n, p.k);
  /* Another kernel than the default keeps the default's number of row tiles per
   * A block. */
  int tiles = p.cfg.mc / nr_gemm_ukernel_get(p.cfg.ukernel)->mr;
  const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
  p.cfg.ukernel = (uint16_t)uk;
  /* A 1-row kernel on M = 2..4 blocks K as for one row: unblocked (default_cfg). */
  if (u->mr == 1)
    p.cfg.kc = nr_gemm_default_cfg(1, p.n, p.k).kc;
  p.cfg.mc = (uint16_t)knob_int(c, NR_KNOB_GEMM_MC, tiles > 0 ? tiles * u->mr : u->mr);
  p.cfg.kc = (uint16_t)knob_int(c, NR_KNOB_GEMM_KC, p.cfg.kc);
  p.cfg.nc = (uint16_t)knob_int(c, NR_KNOB_GEMM_NC, p.cfg.nc);
  const char *split = nr_route_get(c->route, NR_KNOB_GEMM_THREADS, c->node);
  p.split = split && !strcmp(split, "m")   ? NR_GEMM_SPLIT_M
            : split && !strcmp(split, "n") ? NR_GEMM_SPLIT_N
                                           : NR_GEMM_SPLIT_AUTO;
  if (nr_route_is(c->route, NR_KNOB_GEMM_THREADS_MAP, c->node, "any"))
    p.split |= NR_GEMM_SPLIT_ANY_THREAD;
  if (nr_route_is(c->route, NR_KNOB_GEMM_EPILOGUE, c->node, "separate"))
    p.flags |= GEMM_F_SEP_EP;
  set_threads(c, st);
  int t = default_threads(st);
  p.threads = (uint16_t)(t > 65535 ? 65535 : t);
  st->scratch = (uint64_t)p.threads * nr_gemm_scratch_size(p.cfg, p.m, p.n, p.k, 1);
  return prepare_common(c, plan, st, &p,
                        !nr_route_is(c->route, NR_KNOB_GEMM_PREPACK, c->node, "off"));
}

typedef struct batch_job {
  const nr_exec_args *x;
  const nr_gemm_step_params *p;
  size_t per_thread;
} batch_job;

typedef struct ep_job {
  const nr_epilogue *ep;
  float *c;
  int64_t n;
} ep_job;

static void ep_task(void *arg, int64_t begin, int64_t end, int thread) {
  const ep_job *j = arg;
  nr_gemm_epilogue_apply(j->ep, begin, 0, end - begin, j->n, j->c + begin * j->n, j->n);
}

/* gemm.epilogue=separate: the epilogue as its own pass over the m x n C, by rows. */
static void epilogue_pass(const nr_epilogue *ep, int64_t m, int64_t n, float *c,
                          nr_threadpool *pool, int threads) {
  if (!ep->bias && !ep->residual && ep->act == NR_ACT_NONE)
    return;
  ep_job j = {ep, c, n};
  int64_t grain = n > 0 && n < 16384 ? 16384 / n : 1;
  nr_parallel_for(pool, m, grain, threads, ep_task, &j);
}

static void run_product(const nr_exec_args *x, const nr_gemm_step_params *p, int64_t i,
                        void *scratch, nr_threadpool *pool, int threads) {
  gemm_product pr;
  nr_epilogue ep;
  gemm_product_get(x, p, i, &pr);
  gemm_epilogue_get(x, p, pr.r, &ep);
  nr_gemm_operand a = {pr.a, p->flags & GEMM_F_TA ? p->m : p->k, p->flags & GEMM_F_TA, false};
  nr_gemm_operand b = {pr.b, p->flags & GEMM_F_TB ? p->k : p->n, p->flags & GEMM_F_TB, false};
  if (p->flags & GEMM_F_PA)
    a = (nr_gemm_operand){x->packed, 0, false, true};
  if (p->flags & GEMM_F_PB)
    b.packed = true, b.trans = false;
  bool sep = (p->flags & GEMM_F_SEP_EP) != 0;
  nr_gemm_split_run(p->cfg, (nr_gemm_split)p->split, p->m, p->n, p->k, p->alpha, a, b,
                    pr.c, p->n, sep ? NULL : &ep, scratch, pool, threads);
  if (sep)
    epilogue_pass(&ep, p->m, p->n, pr.c, pool, threads);
}

static void batch_task(void *arg, int64_t begin, int64_t end, int thread) {
  batch_job *j = arg;
  void *s = (char *)j->x->scratch + (size_t)thread * j->per_thread;
  for (int64_t i = begin; i < end; i++)
    run_product(j->x, j->p, i, s, NULL, 1);
}

static nr_status nn_run(const nr_exec_args *x) {
  nr_gemm_step_params p;
  memcpy(&p, x->step->params, sizeof p);
  int t = nr_threadpool_size(x->pool);
  if (x->step->threads > 0 && x->step->threads < t)
    t = x->step->threads;
  if (t > p.threads)
    t = p.threads;
  /* Many small products (attention heads): one product per thread at a time. */
  if (p.batch >= t && t > 1 && p.m * p.n * p.k < (int64_t)1 << 22) {
    batch_job j = {x, &p, nr_gemm_scratch_size(p.cfg, p.m, p.n, p.k, 1)};
    nr_parallel_for(x->pool, p.batch, 1, t, batch_task, &j);
    return NR_OK;
  }
  for (int64_t i = 0; i < p.batch; i++)
    run_product(x, &p, i, x->scratch, x->pool, t);
  return NR_OK;
}

/* Per-micro-kernel entry points: supports() and prepare() must know their kernel. */
#define NR_GEMM_UKERNEL(name, mr, nr, isa)                                              \
  static bool sup_##name(const nr_tactic_ctx *c) {                                     \
    return nn_supports(c, NR_GEMM_UK_##name);                                          \
  }                                                                                    \
  static nr_status prep_##name(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {   \
    return nn_prepare(c, plan, st, NR_GEMM_UK_##name);                                 \
  }
#include "kernels/cpu/gemm/gemm_ukernels.inc"
#undef NR_GEMM_UKERNEL

/* ---- OpenBLAS and oneDNN ---------------------------------------------------------- */

static bool lib_supports(const nr_tactic_ctx *c) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, &p);
}

static bool onednn_supports(const nr_tactic_ctx *c) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, &p) && !(p.flags & GEMM_F_BATCHED) && p.m > 0 && p.n > 0 &&
         p.k > 0;
}

static nr_status lib_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  if (!gemm_analyze(&v, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "gemm: node %s not supported", c->node->name);
  st->scratch = 0;
  set_threads(c, st);
  return prepare_common(c, plan, st, &p, false);
}

/* onednn_matmul: lib_prepare, then room for its bands' scratchpads. */
static nr_status onednn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  nr_status s = lib_prepare(c, plan, st);
  nr_gemm_step_params q;
  memcpy(&q, st->params, sizeof q); /* the record as run() will read it */
  return s ? s : gemm_onednn_scratch(&q, nr_extlib_build_threads(c), &st->scratch, c->err);
}

static bool ip_supports(const nr_tactic_ctx *c) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, &p) && gemm_onednn_ip_fits(&p);
}

static nr_status ip_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  gemm_view v;
  nr_gemm_step_params p;
  gemm_view_from_ctx(c, &v);
  if (!gemm_analyze(&v, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "gemm: node %s not supported", c->node->name);
  set_threads(c, st);
  nr_status s = prepare_common(c, plan, st, &p, false);
  nr_gemm_step_params q;
  memcpy(&q, st->params, sizeof q); /* the record as run() will read it */
  return s ? s : gemm_onednn_ip_scratch(&q, nr_extlib_build_threads(c), &st->scratch,
                                        c->err);
}

/* ---- validate: a loaded step against its slots ------------------------------------ */

/* The analysis fields of the stored record must be what the slots give. */
static nr_status check_analysis(const nr_tactic_ctx *c, const nr_gemm_step_params *p,
                                const nr_gemm_step_params *q) {
  const unsigned derived = GEMM_F_TA | GEMM_F_TB | GEMM_F_BATCHED | GEMM_F_A_CONST |
                           GEMM_F_B_CONST;
  if (p->m != q->m || p->n != q->n || p->k != q->k || p->batch != q->batch)
    return nr_step_invalid(c, "params.m/n/k/batch", "%lld x %lld x %lld (batch %d); the "
                           "slots give %lld x %lld x %lld (batch %d)", (long long)p->m,
                           (long long)p->n, (long long)p->k, p->batch, (long long)q->m,
                           (long long)q->n, (long long)q->k, q->batch);
  if ((p->flags & derived) != (q->flags & derived) || p->op != q->op || p->bias != q->bias ||
      p->resid != q->resid || p->act != q->act)
    return nr_step_invalid(c, "params.flags", "flags 0x%x, op %u, bias %u, resid %u, act %u; "
                           "the node gives 0x%x, %u, %u, %u, %u", p->flags & derived, p->op,
                           p->bias, p->resid, p->act, q->flags & derived, q->op, q->bias,
                           q->resid, q->act);
  if (memcmp(&p->alpha, &q->alpha, sizeof p->alpha) ||
      memcmp(&p->beta, &q->beta, sizeof p->beta) ||
      memcmp(&p->act_a, &q->act_a, sizeof p->act_a) ||
      memcmp(&p->act_b, &q->act_b, sizeof p->act_b))
    return nr_step_invalid(c, "params.alpha/beta/act", "differ from the node's attributes");
  return NR_OK;
}

/* Packed operands and bias: sizes as prepare_common computed them. */
static nr_status check_packing(const nr_tactic_ctx *c, const nr_gemm_step_params *p,
                               bool may_pack) {
  bool pa = (p->flags & GEMM_F_PA) != 0, pb = (p->flags & GEMM_F_PB) != 0;
  if ((pa || pb) && (!may_pack || (pa && pb) ||
                     (pb && !(p->flags & GEMM_F_B_CONST)) ||
                     (pa && (!(p->flags & GEMM_F_A_CONST) || (p->flags & GEMM_F_BATCHED)))))
    return nr_step_invalid(c, "params.flags", "packs %s, which this tactic and node do "
                           "not allow", pa ? "A" : "B");
  for (int i = 0; i < 2; i++) {
    const nr_slot *s = nr_step_in(c, i);
    if (s && s->kind == NR_SLOT_ABSORBED && !(i ? pb : pa))
      return nr_step_invalid(c, "params.flags", "input %d has no stored bytes but is not "
                             "packed", i);
  }
  int64_t bs_batch = 1;
  const nr_slot *bs = nr_step_in(c, 1);
  for (int d = 0; pb && bs && d + 2 < bs->rank; d++)
    bs_batch *= bs->dims[d];
  uint64_t ops = (pb ? nr_gemm_packed_b_size(p->cfg, p->k, p->n) * (uint64_t)bs_batch : 0) +
                 (pa ? nr_gemm_packed_a_size(p->cfg, p->m, p->k) : 0);
  bool packed_bias = p->bias == GEMM_BIAS_PACKED_COL || p->bias == GEMM_BIAS_PACKED_ROW;
  uint64_t blen = packed_bias ? (uint64_t)(p->bias == GEMM_BIAS_PACKED_ROW ? p->m : p->n) : 0;
  if (c->step->packed_size != ops + blen * sizeof(float) ||
      p->bias_off != (uint32_t)(ops / sizeof(float)))
    return nr_step_invalid(c, "packed_size", "%llu bytes (bias at float %u); the record "
                           "needs %llu (bias at %llu)",
                           (unsigned long long)c->step->packed_size, p->bias_off,
                           (unsigned long long)(ops + blen * sizeof(float)),
                           (unsigned long long)(ops / sizeof(float)));
  return NR_OK;
}

/* The nnroute kernels: the record's micro-kernel is the tactic's, and the scratch holds
 * a packing buffer per thread the record says it may use. */
static nr_status check_nn(const nr_tactic_ctx *c, const nr_gemm_step_params *p) {
  int uk = p->cfg.ukernel;
  if (uk >= nr_gemm_ukernel_count() || strcmp(nr_gemm_ukernel_get(uk)->name, c->step->tactic->id))
    return nr_step_invalid(c, "params.cfg.ukernel", "%d is not the tactic's micro-kernel", uk);
  if (!p->cfg.mc || !p->cfg.kc || !p->cfg.nc || !p->threads)
    return nr_step_invalid(c, "params.cfg", "mc %u, kc %u, nc %u, threads %u (all must be "
                           "positive)", p->cfg.mc, p->cfg.kc, p->cfg.nc, p->threads);
  uint64_t need = (uint64_t)p->threads * nr_gemm_scratch_size(p->cfg, p->m, p->n, p->k, 1);
  if (c->step->scratch < need)
    return nr_step_invalid(c, "scratch", "%llu bytes; %u threads need %llu",
                           (unsigned long long)c->step->scratch, p->threads,
                           (unsigned long long)need);
  return NR_OK;
}

/* oneDNN's scratchpads, sized again for the threads the engine was built for. */
static nr_status check_lib_scratch(const nr_tactic_ctx *c, const nr_gemm_step_params *p) {
  uint64_t need = 0;
  nr_status s = NR_OK;
  if (c->step->tactic->run == gemm_onednn_run)
    s = gemm_onednn_scratch(p, nr_extlib_build_threads(c), &need, c->err);
  else if (c->step->tactic->run == gemm_onednn_ip_run)
    s = gemm_onednn_ip_fits(p) ? gemm_onednn_ip_scratch(p, nr_extlib_build_threads(c),
                                                        &need, c->err)
                               : nr_step_invalid(c, "params", "not an inner product");
  if (s)
    return s;
  if (c->step->scratch < need)
    return nr_step_invalid(c, "scratch", "%llu bytes; the library needs %llu",
                           (unsigned long long)c->step->scratch, (unsigned long long)need);
  return NR_OK;
}

static nr_status gemm_validate(const nr_tactic_ctx *c) {
  gemm_view v;
  nr_gemm_step_params p, q;
  memcpy(&p, c->step->params, sizeof p);
  gemm_view_from_ctx(c, &v);
  if (!gemm_analyze(&v, &q))
    return nr_step_invalid(c, "slots", "no GEMM tactic runs a node of these shapes");
  bool nn = c->step->tactic->run == nn_run;
  nr_status s = check_analysis(c, &p, &q);
  if (!s)
    s = check_packing(c, &p, nn);
  if (!s && (p.split & ~NR_GEMM_SPLIT_ANY_THREAD) > NR_GEMM_SPLIT_N)
    s = nr_step_invalid(c, "params.split", "%u", p.split);
  if (!s)
    s = nn ? check_nn(c, &p) : check_lib_scratch(c, &p);
  return s;
}

/* ---- the plan summary ------------------------------------------------------------ */

/* The params nn_run reads (nr_tactic.describe): the problem, the epilogue (an
 * activation's parameters only for the activations that take them, the packed bias's
 * offset only when there is one) and the blocking, thread split and scratch threads. */
static void nn_describe(const nr_step *st, char *buf, size_t cap) {
  nr_gemm_step_params p;
  memcpy(&p, st->params, sizeof p);
  bool act_ab = p.act == NR_ACT_CLIP || p.act == NR_ACT_LEAKY_RELU ||
                p.act == NR_ACT_HARD_SIGMOID;
  bool packed_bias = p.bias == GEMM_BIAS_PACKED_COL || p.bias == GEMM_BIAS_PACKED_ROW;
  int n = snprintf(buf, cap, "op=%u flags=%#x m=%lld n=%lld k=%lld batch=%d alpha=%a "
                   "beta=%a act=%u bias=%u resid=%u ukernel=%s mc=%u kc=%u nc=%u split=%#x "
                   "threads=%u", p.op, p.flags, (long long)p.m, (long long)p.n,
                   (long long)p.k, p.batch, p.alpha, p.beta, p.act, p.bias, p.resid,
                   nr_gemm_ukernel_get(p.cfg.ukernel)->name, p.cfg.mc, p.cfg.kc, p.cfg.nc,
                   p.split, p.threads);
  if (n > 0 && (size_t)n < cap && act_ab)
    n += snprintf(buf + n, cap - (size_t)n, " act_a=%a act_b=%a", p.act_a, p.act_b);
  if (n > 0 && (size_t)n < cap && packed_bias)
    snprintf(buf + n, cap - (size_t)n, " bias_off=%u", p.bias_off);
}

/* ---- the table ------------------------------------------------------------------- */

/* Heuristic order: on AVX-512, 1x32 for M <= 4 (the 1-row kernels only support
 * those), then 12x32; on AVX2 (or NNROUTE_ISA=avx2), 1x16 then 6x16. The other tiles
 * exist for the tuner. Libraries beat the portable kernels. */
#define NN_PRIORITY(mr, isa)                                                           \
  ((isa) == NR_ISA_AVX512 ? ((mr) == 1 ? 115 : (mr) == 12 ? 110 : 80 - (mr))           \
   : (isa)                ? ((mr) == 1 ? 105 : (mr) == 6 ? 100 : 60 - (mr))            \
                          : ((mr) == 1 ? 25 : 20))

#define NR_GEMM_UKERNEL(name, mr, nr, isa)                                              \
  {#name, GEMM_DOMAIN, GEMM_OP, "nnroute", "gemm", NR_LAYOUT_PLAIN, isa,               \
   NN_PRIORITY(mr, isa), sup_##name, prep_##name, nn_run, .validate = gemm_validate,   \
   .describe = nn_describe},
#define LIB_ROWS                                                                       \
  {"openblas_sgemm", GEMM_DOMAIN, GEMM_OP, "openblas", "gemm", NR_LAYOUT_PLAIN, 0, 40,   \
   lib_supports, lib_prepare, gemm_openblas_run, .validate = gemm_validate},                                      \
  {"onednn_matmul", GEMM_DOMAIN, GEMM_OP, "onednn", "gemm", NR_LAYOUT_PLAIN, 0, 30,      \
   onednn_supports, onednn_prepare, gemm_onednn_run, .validate = gemm_validate},                                  \
  {"onednn_inner_product", GEMM_DOMAIN, GEMM_OP, "onednn", "gemm", NR_LAYOUT_PLAIN, 0,   \
   29, ip_supports, ip_prepare, gemm_onednn_ip_run, .validate = gemm_validate},

const nr_tactic nr_tactics_gemm[] = {
#define GEMM_DOMAIN ""
#define GEMM_OP "Gemm"
#include "kernels/cpu/gemm/gemm_ukernels.inc"
    LIB_ROWS
#undef GEMM_OP
#define GEMM_OP "MatMul"
#include "kernels/cpu/gemm/gemm_ukernels.inc"
    LIB_ROWS
#undef GEMM_OP
#undef GEMM_DOMAIN
#define GEMM_DOMAIN NR_DOMAIN
#define GEMM_OP "FusedGemm"
#include "kernels/cpu/gemm/gemm_ukernels.inc"
    LIB_ROWS
#undef GEMM_OP
#define GEMM_OP "FusedMatMul"
#include "kernels/cpu/gemm/gemm_ukernels.inc"
    LIB_ROWS
#undef GEMM_OP
#undef GEMM_DOMAIN
    {0},
};
#undef NR_GEMM_UKERNEL

/* ---- knobs ----------------------------------------------------------------------- */

/* A float GEMM node that keeps its step by default (not part of a recognized
 * attention). */
static bool knob_applies(const nr_graph *g, const nr_node *n) {
  gemm_view v;
  nr_gemm_step_params p;
  if (!gemm_node_is_gemm(n))
    return false;
  gemm_view_from_graph(g, n, &v);
  return gemm_analyze(&v, &p) && !nr_fate_recognized(g, n) && !nr_horizontal_absorbs(g, n);
}

static bool node_problem(const nr_graph *g, const nr_node *n, nr_gemm_step_params *p) {
  gemm_view v;
  gemm_view_from_graph(g, n, &v);
  return gemm_analyze(&v, p);
}

/* A constant operand the nnroute tactics pack at build time (prepare_common). */
static bool applies_prepack(const nr_graph *g, const nr_node *n) {
  nr_gemm_step_params p;
  if (!knob_applies(g, n) || !node_problem(g, n, &p))
    return false;
  return (p.flags & GEMM_F_B_CONST) ||
         ((p.flags & GEMM_F_A_CONST) && !(p.flags & GEMM_F_BATCHED));
}

/* Something for the epilogue to do: the node's own bias / residual / activation, or
 * the bias Add and activation fuse.gemm_act gives it at the default route. */
static bool applies_epilogue(const nr_graph *g, const nr_node *n) {
  nr_gemm_step_params p;
  if (!knob_applies(g, n) || !node_problem(g, n, &p))
    return false;
  if (p.bias != GEMM_BIAS_NONE || p.resid != GEMM_RES_NONE || p.act != NR_ACT_NONE)
    return true;
  const nr_knob_def *fuse = nr_knob_def_of(NR_KNOB_FUSE_GEMM_ACT);
  return fuse && fuse->applies && fuse->applies(g, n);
}

#define NR_GEMM_UKERNEL(name, mr, nr, isa) "|" #name
static const char tactic_values[] = "auto"
#include "kernels/cpu/gemm/gemm_ukernels.inc"
    "|openblas_sgemm|onednn_matmul|onednn_inner_product";
#undef NR_GEMM_UKERNEL

/* Values in table order: auto, the micro-kernels, openblas, onednn matmul, onednn
 * inner product. */
static uint64_t tactic_valid(const nr_graph *g, const nr_node *n) {
  nr_gemm_step_params p;
  uint64_t bits = 1;
  if (!node_problem(g, n, &p))
    return bits;
  /* The micro-kernel the heuristic picks is what "auto" already builds. */
  int dflt = nr_gemm_default_cfg(p.m, p.n, p.k).ukernel;
  for (int i = 0; i < nr_gemm_ukernel_count(); i++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(i);
    if ((u->isa & nr_cpu_isa()) == u->isa && (u->mr > 1 || p.m <= 4) && i != dflt)
      bits |= 1ull << (1 + i);
  }
  int lib = 1 + nr_gemm_ukernel_count();
  bits |= 1ull << lib;
  if (!(p.flags & GEMM_F_BATCHED) && p.m > 0 && p.n > 0 && p.k > 0)
    bits |= 1ull << (lib + 1);
  if (gemm_onednn_ip_fits(&p))
    bits |= 1ull << (lib + 2);
  return bits;
}

/* A blocking value at or above the problem's extent acts like the whole extent, and
 * one whose effective block (rounded down to the tile `unit`) equals the default's
 * builds what "auto" builds, so only the rest are distinct choices. */
static uint64_t below(const int *vals, int nvals, int64_t extent, int64_t unit,
                      int64_t dflt) {
  uint64_t bits = 1;
  int64_t d = dflt < extent ? dflt / unit * unit : extent;
  for (int i = 0; i < nvals; i++) {
    int64_t v = vals[i] / unit * unit;
    if (v < unit)
      v = unit;
    if (vals[i] < extent && v != d)
      bits |= 1ull << (1 + i);
  }
  return bits;
}

static const int kc_vals[] = {128, 256, 384, 512}, mc_vals[] = {48, 72, 96, 144},
                 nc_vals[] = {256, 512, 1024, 2048, 4096};

static uint64_t kc_valid(const nr_graph *g, const nr_node *n) {
  nr_gemm_step_params p;
  if (!node_problem(g, n, &p))
    return 1;
  return below(kc_vals, 4, p.k, 1, nr_gemm_default_cfg(p.m, p.n, p.k).kc);
}
static uint64_t mc_valid(const nr_graph *g, const nr_node *n) {
  nr_gemm_step_params p;
  if (!node_problem(g, n, &p))
    return 1;
  nr_gemm_cfg c = nr_gemm_default_cfg(p.m, p.n, p.k);
  return below(mc_vals, 4, p.m, nr_gemm_ukernel_get(c.ukernel)->mr, c.mc);
}
static uint64_t nc_valid(const nr_graph *g, const nr_node *n) {
  nr_gemm_step_params p;
  if (!node_problem(g, n, &p))
    return 1;
  nr_gemm_cfg c = nr_gemm_default_cfg(p.m, p.n, p.k);
  return below(nc_vals, 5, p.n, nr_gemm_ukernel_get(c.ukernel)->nr, c.nc);
}

const nr_knob_def nr_knobs_gemm[] = {
    [NR_KNOB_ROW(NR_KNOB_GEMM_TACTIC)] =
    {"gemm.tactic", tactic_values, "auto", NR_KNOB_NODE, 0, 0,
     "GEMM engine and micro-kernel of a Gemm/MatMul/FusedGemm/FusedMatMul node",
     knob_applies, tactic_valid, .restricts = NR_RESTRICTS_ID},
    [NR_KNOB_ROW(NR_KNOB_GEMM_KC)] =
    {"gemm.kc", "auto|128|256|384|512", "auto", NR_KNOB_NODE, 0, 0,
     "K blocking of the nnroute GEMM kernels (only acts when one of them runs the node)",
     knob_applies, kc_valid},
    [NR_KNOB_ROW(NR_KNOB_GEMM_MC)] =
    {"gemm.mc", "auto|48|72|96|144", "auto", NR_KNOB_NODE, 0, 0,
     "M blocking (rounded down to the tile) of the nnroute GEMM kernels",
     knob_applies, mc_valid},
    [NR_KNOB_ROW(NR_KNOB_GEMM_NC)] =
    {"gemm.nc", "auto|256|512|1024|2048|4096", "auto", NR_KNOB_NODE, 0, 0,
     "N blocking (rounded down to the tile) of the nnroute GEMM kernels",
     knob_applies, nc_valid},
    [NR_KNOB_ROW(NR_KNOB_GEMM_THREADS)] =
    {"gemm.threads", "auto|m|n", "auto", NR_KNOB_NODE, NR_KNOB_THREADS, 0,
     "which dimension the nnroute GEMM kernels split across threads", knob_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_GEMM_THREADS_MAP)] =
    {"gemm.threads_map", "fixed|any", "fixed", NR_KNOB_NODE, NR_KNOB_THREADS, 0,
     "fixed: part i of the nnroute GEMM's thread split runs on thread i (a thread "
     "streams the same slice of the packed weights on every run); any: whichever "
     "thread comes first takes the next part",
     knob_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_GEMM_THREADS_MAX)] =
    {"gemm.threads_max", "all|1", "all", NR_KNOB_NODE, NR_KNOB_THREADS, 0,
     "threads of this GEMM step: all of the pool, or 1 (the calling thread; OpenBLAS "
     "and oneDNN run on one thread)",
     knob_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_GEMM_PREPACK)] =
    {"gemm.prepack", "on|off", "on", NR_KNOB_NODE, 0, 0,
     "on: the constant operand is packed for the micro-kernel at build time; off: the "
     "engine keeps it raw and each run packs it into scratch",
     applies_prepack, NULL},
    [NR_KNOB_ROW(NR_KNOB_GEMM_EPILOGUE)] =
    {"gemm.epilogue", "fused|separate", "fused", NR_KNOB_NODE, 0, 0,
     "bias/residual/activation on each C tile while it is in cache, or as a second "
     "pass over C",
     applies_epilogue, NULL},
    [NR_KNOB_ROW(NR_KNOB_GEMM_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_gemm, NR_KNOB_GEMM_END);
