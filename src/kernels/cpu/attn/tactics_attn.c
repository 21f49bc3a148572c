/* tactics_attn.c - the fused attention tactics
 * (nr_f32_attention__{avx512,avx2,portable}) for ONNX Attention (opset 23+: what
 * recognize.attention produces, or a model's own) and the family's knobs
 * (attention.tactic, attention.kv_block).
 *
 * Key decision: the node's description (nr_attn_desc, ir/node_desc.h, which the CUDA
 * tactic reads too) is the one geometry, read from Q, K, V, the mask and Y as
 * nr_values, so the same code decides supports() from plan slots, the knobs' applies()
 * from graph tensors and the run's strides. 3-D inputs ([B, S, heads * D], heads from
 * q_num_heads / kv_num_heads) are read in place with a head stride of D, which is what
 * lets recognize fold the exporters' Reshape+Transpose of the heads away. The run packs
 * K^T per (batch, kv head) into scratch once, then splits blocks of NR_ATTN_MR query
 * rows across threads; each thread has its own work area for scores and the partial
 * output. Supported: float32, 3-D or 4-D, grouped-query heads, no KV cache (past_*,
 * present_*, nonpad_kv_seqlen), no softcap or sliding window, no qk_matmul_output, an
 * optional float (additive) or bool mask covering every key, is_causal. */
#include "kernels/cpu/attn/attn.h"
#include "kernels/cpu/attn/attn_knobs.h"
#include "kernels/cpu/eltwise/eltwise_knobs.h"
#include "passes/pass_knobs.h"
#include "plan/knob.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <stdlib.h>
#include <string.h>

enum { IN_Q, IN_K, IN_V, IN_MASK, IN_PAST_K, IN_PAST_V, IN_NONPAD };

typedef nr_attn_desc attn_geom;

_Static_assert((int)NR_ATTN_DESC_MASK_FLOAT == (int)NR_ATTN_MASK_FLOAT &&
                   (int)NR_ATTN_DESC_MASK_BOOL == (int)NR_ATTN_MASK_BOOL,
               "the description's mask kinds are the kernel's");

/* ---- geometry ----------------------------------------------------------------------- */

/* The node's description (ir/node_desc.h) when these tactics run it: Q, K, V and Y in
 * float32. */
static bool attn_geom_of(const nr_node *n, const nr_node_io *io, attn_geom *g) {
  if (!n || nr_attn_desc_parse(n, io, g, NULL))
    return false;
  for (int i = IN_Q; i <= IN_V; i++)
    if (nr_node_io_in(io, i)->dtype != NR_DTYPE_FLOAT)
      return false;
  return nr_node_io_out(io, 0)->dtype == NR_DTYPE_FLOAT;
}

/* The geometry of a step from its slots (build time or run time). */
static bool step_geom(const nr_node *n, const nr_step *st, const nr_slot *const *in_slot,
                      const nr_slot *const *out_slot, attn_geom *g) {
  nr_node_io io;
  for (int i = 0; i < st->n_in; i++)
    if (in_slot[i] && in_slot[i]->layout != NR_LAYOUT_PLAIN)
      return false;
  nr_node_io_from_slots(st->n_in, in_slot, st->n_out, out_slot, &io);
  return attn_geom_of(n, &io, g);
}

/* ---- the tactic ---------------------------------------------------------------------- */

typedef struct attn_params {
  nr_attn_cfg cfg;
  uint16_t threads; /* threads the scratch is sized for */
} attn_params;

_Static_assert(sizeof(attn_params) <= NR_TACTIC_PARAMS, "attention params too big");

static bool attn_supports(const nr_tactic_ctx *c) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  attn_geom g;
  for (int i = 0; i < c->step->n_in; i++)
    in[i] = nr_step_in(c, i);
  for (int o = 0; o < c->step->n_out; o++)
    out[o] = nr_step_out(c, o);
  return c->node && step_geom(c->node, c->step, in, out, &g);
}

static int64_t kt_pad(const attn_geom *g) { return (g->t + 15) & ~(int64_t)15; }

static uint64_t align64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

static uint64_t kt_bytes(const attn_geom *g) {
  return align64((uint64_t)(g->b * g->hkv * g->d * kt_pad(g)) * sizeof(float));
}

static uint64_t work_bytes(const nr_attn_cfg *c, const attn_geom *g) {
  return align64((uint64_t)nr_attn_work_floats(c, g->t, g->dv) * sizeof(float));
}

/* attention.kv_block: keys per block (0 = all). */
static int32_t kv_block_of(const nr_tactic_ctx *c) {
  const char *v = nr_route_get(c->route, NR_KNOB_ATTENTION_KV_BLOCK, c->node);
  return v && strcmp(v, "full") ? (int32_t)strtol(v, NULL, 10) : 0;
}

static nr_status attn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  attn_geom g;
  for (int i = 0; i < step->n_in; i++)
    in[i] = nr_step_in(c, i);
  for (int o = 0; o < step->n_out; o++)
    out[o] = nr_step_out(c, o);
  if (!step_geom(c->node, step, in, out, &g))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: node no longer supported",
                     step->tactic->id);
  attn_params p = {
      .cfg = {.scale = g.scale,
              .kv_block = kv_block_of(c),
              .math = nr_route_is(c->route, NR_KNOB_ELTWISE_MATH, NULL, "fast")
                          ? NR_VMATH_FAST
                          : NR_VMATH_ACCURATE,
              .causal = g.causal,
              .mask = (uint8_t)g.mask},
  };
  int t = nr_threads_or_online(c->threads);
  p.threads = (uint16_t)(t > 1024 ? 1024 : t);
  memcpy(step->params, &p, sizeof p);
  step->scratch = kt_bytes(&g) + (uint64_t)p.threads * work_bytes(&p.cfg, &g);
  return NR_OK;
}

typedef struct attn_job {
  const attn_params *p;
  const attn_geom *g;
  void (*rows)(const nr_attn_cfg *, const nr_attn_rows *, float *);
  const float *q, *k, *v;
  const void *mask;
  float *y, *kt;
  uint8_t *work;
  uint64_t work_bytes;
  int64_t blocks; /* row blocks per head */
} attn_job;

/* K^T of (batch, kv head) h: d rows of kt_pad floats, zero past t. */
static void pack_task(void *arg, int64_t begin, int64_t end, int thread) {
  const attn_job *j = arg;
  const attn_geom *g = j->g;
  int64_t tp = kt_pad(g);
  for (int64_t bh = begin; bh < end; bh++) {
    const float *k = j->k + (bh / g->hkv) * g->ks[0] + (bh % g->hkv) * g->ks[1];
    float *kt = j->kt + bh * g->d * tp;
    for (int64_t d = 0; d < g->d; d++) {
      float *row = kt + d * tp;
      for (int64_t t = 0; t < g->t; t++)
        row[t] = k[t * g->ks[2] + d];
      for (int64_t t = g->t; t < tp; t++)
        row[t] = 0;
    }
  }
}

static void rows_task(void *arg, int64_t begin, int64_t end, int thread) {
  const attn_job *j = arg;
  const attn_geom *g = j->g;
  float *work = (float *)(j->work + (uint64_t)thread * j->work_bytes);
  size_t esz = j->p->cfg.mask == NR_ATTN_MASK_BOOL ? 1 : sizeof(float);
  for (int64_t task = begin; task < end; task++) {
    int64_t blk = task % j->blocks, bh = task / j->blocks;
    int64_t b = bh / g->hq, h = bh % g->hq, kvh = h / (g->hq / g->hkv);
    int64_t i0 = blk * NR_ATTN_MR;
    nr_attn_rows r = {
        .rows = (int)(g->s - i0 < NR_ATTN_MR ? g->s - i0 : NR_ATTN_MR),
        .i0 = i0, .t = g->t, .d = g->d, .dv = g->dv,
        .q = j->q + b * g->qs[0] + h * g->qs[1] + i0 * g->qs[2], .q_rs = g->qs[2],
        .kt = j->kt + (b * g->hkv + kvh) * g->d * kt_pad(g), .kt_pad = kt_pad(g),
        .v = j->v + b * g->vs[0] + kvh * g->vs[1], .v_rs = g->vs[2],
        .mask = j->mask ? (const uint8_t *)j->mask +
                              esz * (size_t)(b * g->ms[0] + h * g->ms[1] + i0 * g->ms[2])
                        : NULL,
        .mask_rs = g->ms[2],
        .y = j->y + b * g->ys[0] + h * g->ys[1] + i0 * g->ys[2], .y_rs = g->ys[2],
    };
    j->rows(&j->p->cfg, &r, work);
  }
}

static nr_status attn_run(const nr_exec_args *a) {
  attn_params p;
  attn_geom g;
  memcpy(&p, a->step->params, sizeof p);
  if (!step_geom(a->node, a->step, a->in_slot, a->out_slot, &g))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: unexpected shapes", a->step->tactic->id);
  unsigned isa = a->step->tactic->isa;
  attn_job j = {&p, &g,
                (isa & NR_ISA_AVX512) ? nr_f32_attention_rows__avx512
                : (isa & NR_ISA_AVX2) ? nr_f32_attention_rows__avx2
                                      : nr_f32_attention_rows__portable,
                a->in[IN_Q],
                a->in[IN_K], a->in[IN_V], g.mask ? a->in[IN_MASK] : NULL, a->out[0],
                a->scratch, (uint8_t *)a->scratch + kt_bytes(&g), work_bytes(&p.cfg, &g),
                (g.s + NR_ATTN_MR - 1) / NR_ATTN_MR};
  int t = nr_threadpool_size(a->pool);
  if (a->step->threads > 0 && a->step->threads < t)
    t = a->step->threads;
  if (t > p.threads)
    t = p.threads;
  int64_t heads = g.b * g.hkv, tasks = g.b * g.hq * j.blocks;
  if (t > 1 && heads > 1 && heads * g.t * g.d >= 16384)
    nr_parallel_for(a->pool, heads, 1, t, pack_task, &j);
  else
    pack_task(&j, 0, heads, 0);
  if (t > 1 && tasks > 1)
    nr_parallel_for(a->pool, tasks, 1, t, rows_task, &j);
  else
    rows_task(&j, 0, tasks, 0);
  return NR_OK;
}

const nr_tactic nr_tactics_cpu_attn[] = {
    {"nr_f32_attention__avx512", "", "Attention", "nnroute", "fused", NR_LAYOUT_PLAIN,
     NR_ISA_AVX512, 30, attn_supports, attn_prepare, attn_run},
    {"nr_f32_attention__avx2", "", "Attention", "nnroute", "fused", NR_LAYOUT_PLAIN,
     NR_ISA_AVX2, 20, attn_supports, attn_prepare, attn_run},
    {"nr_f32_attention__portable", "", "Attention", "nnroute", "fused", NR_LAYOUT_PLAIN, 0,
     10, attn_supports, attn_prepare, attn_run},
    {0},
};

/* ---- knobs ---------------------------------------------------------------------------- */

static const nr_value *tensor(const nr_graph *g, const nr_node *n, int i) {
  int t = i < n->n_inputs ? n->inputs[i] : -1;
  return t >= 0 ? &g->tensors[t].value : NULL;
}

/* Keys of the attention the fused tactic runs at node n under the default route: a
 * model's own Attention it supports, or the Softmax anchor of a pattern
 * recognize.attention replaces. 0 when there is none. */
static int64_t fused_keys(const nr_graph *g, const nr_node *n) {
  if (!n)
    return 0;
  if (!strcmp(n->op_type, "Attention") && !n->domain[0]) {
    nr_node_io io;
    attn_geom geo;
    nr_node_io_from_graph(g, n, &io);
    return attn_geom_of(n, &io, &geo) ? geo.t : 0;
  }
  const nr_knob_def *rz = nr_knob_def_of(NR_KNOB_RECOGNIZE_ATTENTION);
  if (!rz || !rz->applies || !rz->applies(g, n) || !tensor(g, n, 0))
    return 0;
  const nr_value *sc = tensor(g, n, 0); /* the scores [B, H, S, T] */
  return sc->rank == 4 ? sc->dims[3] : 0;
}

bool nr_attn_fused(const nr_graph *g, const nr_node *n) { return fused_keys(g, n) > 0; }

static bool applies_attn(const nr_graph *g, const nr_node *n) { return nr_attn_fused(g, n); }

/* A block size is offered only where it is shorter than the keys. */
static uint64_t valid_kv_block(const nr_graph *g, const nr_node *n) {
  static const int64_t blocks[] = {0, 64, 256}; /* the values, in table order */
  int64_t t = fused_keys(g, n);
  uint64_t bits = 1;
  for (int i = 1; i < 3; i++)
    if (blocks[i] < t)
      bits |= 1ull << i;
  return bits;
}

static bool applies_kv_block(const nr_graph *g, const nr_node *n) {
  return fused_keys(g, n) > 64;
}

const nr_knob_def nr_knobs_cpu_attn[] = {
    [NR_KNOB_ROW(NR_KNOB_ATTENTION_TACTIC)] =
    {"attention.tactic", "auto|ref", "auto", NR_KNOB_NODE, 0, 0,
     "auto = the fused nr_f32_attention__{avx512,avx2,portable} tactics (algo \"fused\"), "
     "ref = the reference tactic", applies_attn, NULL, .restricts = NR_RESTRICTS_ALGO},
    [NR_KNOB_ROW(NR_KNOB_ATTENTION_KV_BLOCK)] =
    {"attention.kv_block", "full|64|256", "full", NR_KNOB_NODE, NR_KNOB_ACCURACY, 2e-6,
     "keys per block of the fused attention: full = one block (all scores of 6 query rows "
     "at once), 64/256 = online softmax over key blocks (flash attention; less memory "
     "for long sequences)", applies_kv_block, valid_kv_block},
    [NR_KNOB_ROW(NR_KNOB_CPU_ATTN_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_cpu_attn, NR_KNOB_CPU_ATTN_END);
