/* int8_chain.c - the int8 chain pass (nr_pass_int8_chain, after select and layout,
 * before prepare): a tensor written by an int8 step and read only by int8 steps that
 * would quantize it on one grid becomes a uint8 slot on that grid. The producer then
 * requantizes its int32 sums (after its bias, residual and activation epilogue)
 * straight to 8 bits, and the readers take the bytes without quantizing again, so
 * the fp32 tensor between consecutive int8 layers, its write, its read and the
 * readers' quantization pass disappear, and the memory planner packs the slot 4x
 * smaller.
 *
 * Rules, per arena slot of fp32 data:
 *   - it is not a graph output (those keep the model's dtype);
 *   - its producer writes it as output 0, its only output, and its tactic's io8()
 *     says it can write 8 bits there (e.g. not when a residual arrives in another
 *     layout, which is added after the product);
 *   - every reader reads it as input 0 and nowhere else, its tactic's io8() says it
 *     can read 8 bits, and quantizes like the producer (nr_q8_round);
 *   - every reader's own grid (nr_quant_act_params on its step, with its tactic's
 *     qmax: the calibration entry, or the node's QDQ-folded scale) is the same scale,
 *     zero point and qmax.
 * The grid is recorded in the slot (q8_scale, q8_zero_point, q8_qmax) for the
 * producer's prepare(); each reader's prepare() derives its grid as it always does
 * and checks that it is the slot's. Because the producer rounds exactly as the
 * readers' quantizers would have, quant.chain=on computes the same bytes as
 * quant.chain=off wherever the producer's fp32 epilogue gives the same floats.
 *
 * Key decision: like the fp16 pass of CUDA plans (src/backends/cuda/cuda_half.c), this
 * is a plan pass and not a choice each tactic makes alone: a tensor's dtype is shared
 * by its producer and all its readers, so it is decided once, with all of them known.
 * Capabilities are asked of the tactics (nr_tactic.io8), never listed here by id.
 * Ops between int8 layers (pooling, reshapes, concat) end a chain for now: each
 * would need an 8-bit twin. */
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/knob.h"
#include "plan/pass.h"
#include "plan/quant.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct chain_probe {
  nr_node_probe probe;
  bool found;
} chain_probe;

static void probe_io8(const nr_tactic *t, void *user) {
  chain_probe *v = user;
  const nr_node *n = v->probe.ctx.node;
  nr_io8 cap = {0};
  if (v->found || !t->io8 || t->device != NR_DEVICE_CPU || t->precision != NR_PREC_INT8 ||
      (t->isa & ~nr_cpu_isa()) || !t->op_type || strcmp(t->op_type, n->op_type) ||
      (t->domain && *t->domain) || (t->supports && !t->supports(&v->probe.ctx)))
    return;
  v->probe.step.tactic = t;
  v->found = t->io8(&v->probe.ctx, &cap) && cap.in && cap.out;
  v->probe.step.tactic = NULL;
}

/* "on" always; "off" when some node of g has an int8 tactic (of any source) that can
 * read and write 8 bits, so that some route can chain. */
static uint64_t chain_valid(const nr_graph *g, const nr_node *unused) {
  (void)unused;
  bool found = false;
  for (int k = 0; g && k < g->n_nodes && !found; k++) {
    const nr_node *n = &g->nodes[k];
    int w = n->n_inputs > 1 ? n->inputs[1] : -1;
    if (w < 0 || !nr_pu_is_const(g, w))
      continue;
    chain_probe v = {0};
    if (nr_node_probe_init(&v.probe, g, n))
      nr_tactic_foreach(probe_io8, &v);
    nr_node_probe_free(&v.probe);
    found = v.found;
  }
  return found ? 3 : 2;
}

const nr_knob_def nr_knobs_int8_chain[] = {
    [NR_KNOB_ROW(NR_KNOB_QUANT_CHAIN)] =
    {"quant.chain", "off|on", "on", NR_KNOB_GLOBAL, 0, 0.0,
     "uint8 tensors between consecutive int8 layers: the producer requantizes, the "
     "readers do not quantize again (off: fp32 between every step)",
     NULL, chain_valid, 0, "-precision@*=int8"},
    [NR_KNOB_ROW(NR_KNOB_INT8_CHAIN_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_int8_chain, NR_KNOB_INT8_CHAIN_END);

static bool graph_output(const nr_plan *p, int s) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->outputs[i] == s)
      return true;
  return false;
}

static nr_tactic_ctx step_ctx(const nr_compile_ctx *cc, nr_step *st, nr_error *err) {
  const nr_plan *p = cc->plan;
  const nr_node *n = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
  return (nr_tactic_ctx){p, n, st, cc->route, err, cc->threads, cc->calib, cc->device};
}

/* The step's io8 capability, false when it has none there. */
static bool capability(const nr_compile_ctx *cc, nr_step *st, nr_io8 *cap) {
  nr_error quiet = {0};
  nr_tactic_ctx tc = step_ctx(cc, st, &quiet);
  memset(cap, 0, sizeof *cap);
  return st->tactic && st->tactic->io8 && st->tactic->io8(&tc, cap);
}

/* The only step writing slot s as output 0 and nothing else, or -1. */
static int sole_producer(const nr_plan *p, int s) {
  int found = -1;
  for (int k = 0; k < p->n_steps; k++)
    for (int o = 0; o < p->steps[k].n_out; o++)
      if (p->steps[k].out[o] == s) {
        if (found >= 0 || o != 0 || p->steps[k].n_out != 1)
          return -1;
        found = k;
      }
  return found;
}

typedef struct grid {
  nr_qparams q;
  int qmax;
  nr_q8_round round; /* the first reader's; the others' must agree */
  unsigned rounds;   /* what the producer can write */
  int readers;
} grid;

/* Whether reader step st can take slot s as 8 bits on grid g (set by the first
 * reader, checked against by the others). */
static bool reader_agrees(const nr_compile_ctx *cc, nr_step *st, int s, grid *g) {
  for (int i = 1; i < st->n_in; i++)
    if (st->in[i] == s)
      return false;
  if (st->n_in < 1 || st->in[0] != s)
    return false;
  nr_io8 cap;
  if (!capability(cc, st, &cap) || !cap.in || !(g->rounds >> cap.round & 1u) ||
      (g->readers && cap.round != g->round))
    return false;
  nr_error quiet = {0};
  nr_tactic_ctx tc = step_ctx(cc, st, &quiet);
  nr_qparams q;
  if (nr_quant_act_params(&tc, 0, cap.qmax, &q) || !(q.scale > 0.0f))
    return false;
  if (g->readers++ == 0) {
    g->q = q, g->qmax = cap.qmax, g->round = cap.round;
    return true;
  }
  return !memcmp(&q.scale, &g->q.scale, sizeof q.scale) &&
         q.zero_point == g->q.zero_point && cap.qmax == g->qmax;
}

static bool reads(const nr_step *st, int s) {
  for (int i = 0; i < st->n_in; i++)
    if (st->in[i] == s)
      return true;
  return false;
}

/* Slot s becomes uint8 when its producer and all its readers agree (see the rules). */
static void try_slot(const nr_compile_ctx *cc, int s) {
  nr_plan *p = cc->plan;
  nr_slot *sl = &p->slots[s];
  if (sl->kind != NR_SLOT_ARENA || sl->dtype != NR_DTYPE_FLOAT || graph_output(p, s))
    return;
  int k = sole_producer(p, s);
  nr_io8 pc;
  if (k < 0 || !capability(cc, &p->steps[k], &pc) || !pc.out)
    return;
  grid g = {.rounds = pc.out_rounds};
  for (int j = 0; j < p->n_steps; j++)
    if (j != k && reads(&p->steps[j], s) && !reader_agrees(cc, &p->steps[j], s, &g))
      return;
  if (g.readers == 0 || reads(&p->steps[k], s))
    return;
  sl->dtype = NR_DTYPE_UINT8;
  /* Vector loads of the readers (stride-2 im2col segments) may touch one byte past
   * the end: a uint8 slot keeps a 64-byte tail of its own. */
  sl->nbytes = (nr_slot_bytes(sl, sl->layout) + 1 + 63) / 64 * 64;
  sl->q8_scale = g.q.scale;
  sl->q8_zero_point = g.q.zero_point;
  sl->q8_qmax = g.qmax;
  sl->q8_round = (int32_t)g.round;
}

static nr_status run_chain(nr_compile_ctx *cc) {
  nr_plan *p = cc->plan;
  if (p->device != NR_DEVICE_CPU || nr_route_is(cc->route, NR_KNOB_QUANT_CHAIN, NULL, "off"))
    return NR_OK;
  for (int s = 0; s < p->n_slots; s++)
    try_slot(cc, s);
  return NR_OK;
}

const nr_pass nr_pass_int8_chain = {"int8_chain", run_chain};

static bool u8_slot(const nr_plan *p, int s) {
  return s >= 0 && p->slots[s].dtype == NR_DTYPE_UINT8 && p->slots[s].kind == NR_SLOT_ARENA;
}

const nr_tactic_ctx *nr_f32_view_init(nr_f32_view *v, const nr_tactic_ctx *c) {
  const nr_step *st = c->step;
  const nr_plan *p = c->plan;
  bool any = false;
  memset(v, 0, sizeof *v);
  for (int i = 0; i < st->n_in; i++)
    any |= u8_slot(p, st->in[i]);
  for (int i = 0; i < st->n_out; i++)
    any |= u8_slot(p, st->out[i]);
  if (!any)
    return c;
  if (!(v->slots = malloc(sizeof *v->slots * (size_t)(p->n_slots ? p->n_slots : 1))))
    return NULL;
  memcpy(v->slots, p->slots, sizeof *v->slots * (size_t)p->n_slots);
  for (int s = 0; s < p->n_slots; s++)
    if (u8_slot(p, s))
      v->slots[s].dtype = NR_DTYPE_FLOAT;
  v->plan = *p;
  v->plan.slots = v->slots;
  v->ctx = *c;
  v->ctx.plan = &v->plan;
  return &v->ctx;
}

void nr_f32_view_free(nr_f32_view *v) {
  free(v->slots);
  v->slots = NULL;
}
