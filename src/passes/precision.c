/* precision.c - the per-node precision knob and the calibration-method knob.
 *
 * precision@<node> picks the numeric precision of a Conv, Gemm or MatMul whose
 * weights are constant: fp32 (the default), bf16 or fp16 storage with fp32
 * accumulation, or int8 (per-output-channel weights, per-tensor activations, int32
 * accumulation). The select pass keeps only tactics whose `precision` field equals
 * the node's value, so a precision is offered exactly by writing tactics for it; a
 * node with no tactic at the requested precision fails to build with a message naming
 * both. Each reduced precision has a documented bound (value_bounds): the relative L2
 * error one node in it may add to the model's outputs, the largest measured over the
 * model suite (`check-routes --each precision`, docs/precision.md) with a margin. The
 * suite's random weights amplify a layer's error up to ~50x by the output, so these
 * bounds catch a wrong kernel, not a lost bit; whether a route is acceptable for an
 * application is still the user's tolerance, measured by the tuner. */
#include "plan/compile_knobs.h"
#include "passes/fate.h"
#include "passes/pass_util.h"
#include "plan/knob.h"
#include "plan/tactic.h"

#include <string.h>

static const char *const prec_names[NR_PREC_COUNT] = {"fp32", "bf16", "fp16", "int8",
                                                      "tf32"};

const char *nr_precision_name(nr_precision p) {
  return (unsigned)p < NR_PREC_COUNT ? prec_names[p] : "?";
}

/* Conv, Gemm or MatMul of float tensors with a constant weight operand (input 1) that
 * keeps a step of its own at the default route. */
static bool precision_applies(const nr_graph *g, const nr_node *n) {
  if (!nr_pu_is_op(n, "Conv") && !nr_pu_is_op(n, "Gemm") && !nr_pu_is_op(n, "MatMul"))
    return false;
  int w = nr_pu_in(n, 1), y = n->n_outputs > 0 ? n->outputs[0] : -1;
  if (w < 0 || y < 0 || !nr_pu_is_const(g, w) || g->tensors[y].value.dtype != NR_DTYPE_FLOAT)
    return false;
  return !nr_fate_recognized(g, n) && !nr_horizontal_absorbs(g, n);
}

typedef struct valid_probe {
  nr_node_probe probe;
  uint64_t bits;
} valid_probe;

static void probe_tactic(const nr_tactic *t, void *user) {
  valid_probe *v = user;
  const nr_node *n = v->probe.ctx.node;
  if (t->device != NR_DEVICE_CPU || t->precision == NR_PREC_FP32 ||
      t->precision >= NR_PREC_COUNT || (t->isa & ~nr_cpu_isa()) || !t->op_type ||
      strcmp(t->op_type, n->op_type) || (t->domain && *t->domain) ||
      (v->bits >> t->precision & 1))
    return;
  if (!t->supports || t->supports(&v->probe.ctx))
    v->bits |= 1ull << t->precision;
}

/* fp32 always; a reduced precision when some tactic of it supports the node on this
 * machine (asked of the node as the model has it, before fusion: fusion only adds an
 * epilogue, which every precision family handles alike). */
static uint64_t precision_valid(const nr_graph *g, const nr_node *n) {
  valid_probe v = {.bits = 1};
  if (nr_node_probe_init(&v.probe, g, n))
    nr_tactic_foreach(probe_tactic, &v);
  nr_node_probe_free(&v.probe);
  return v.bits;
}

/* ---- precision.int8_source ---------------------------------------------------------- */

static const char *const int8_sources[] = {"auto", "nnroute", "onednn"};

typedef struct source_probe {
  nr_node_probe probe;
  const nr_tactic *best;  /* what "auto" picks: the highest priority */
  unsigned sources;       /* bit i: some int8 tactic of int8_sources[i] supports it */
} source_probe;

static void probe_int8(const nr_tactic *t, void *user) {
  source_probe *v = user;
  const nr_node *n = v->probe.ctx.node;
  if (t->device != NR_DEVICE_CPU || t->precision != NR_PREC_INT8 || (t->isa & ~nr_cpu_isa()) ||
      !t->op_type || strcmp(t->op_type, n->op_type) || (t->domain && *t->domain) ||
      (t->supports && !t->supports(&v->probe.ctx)))
    return;
  for (int i = 1; i < 3; i++)
    if (t->source && !strcmp(t->source, int8_sources[i]))
      v->sources |= 1u << i;
  if (!v->best || t->priority > v->best->priority)
    v->best = t;
}

/* "auto" always; a source when on some node it has an int8 tactic and is not what
 * "auto" picks there (otherwise the value would build auto's plan). */
static uint64_t int8_source_valid(const nr_graph *g, const nr_node *unused) {
  (void)unused;
  uint64_t bits = 1;
  for (int k = 0; g && k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    if (!precision_applies(g, n))
      continue;
    source_probe v = {0};
    if (nr_node_probe_init(&v.probe, g, n))
      nr_tactic_foreach(probe_int8, &v);
    nr_node_probe_free(&v.probe);
    for (int i = 1; i < 3; i++)
      if ((v.sources >> i & 1) && strcmp(v.best->source, int8_sources[i]))
        bits |= 1ull << i;
  }
  return bits;
}

const nr_knob_def nr_knobs_precision[] = {
    [NR_KNOB_ROW(NR_KNOB_PREC)] =
    {"precision", "fp32|bf16|fp16|int8", "fp32", NR_KNOB_NODE,
     NR_KNOB_ACCURACY | NR_KNOB_PRECISION, 0.0,
     "numeric precision of a Conv/Gemm/MatMul with constant weights (int8 needs "
     "calibration data)",
     precision_applies, precision_valid, .restricts = NR_RESTRICTS_PRECISION,
     .value_bounds = "0|0.15|0.03|0.3"},
    [NR_KNOB_ROW(NR_KNOB_PRECISION_INT8_SOURCE)] =
    {"precision.int8_source", "auto|nnroute|onednn", "auto", NR_KNOB_GLOBAL, 0, 0.0,
     "which implementation runs int8 nodes: the priority rule, nnroute's own int8 GEMM, "
     "or oneDNN's",
     NULL, int8_source_valid, 0, "-precision@*=int8",
     .restricts = NR_RESTRICTS_INT8_SOURCE},
    [NR_KNOB_ROW(NR_KNOB_QUANT_CALIBRATION)] =
    {"quant.calibration", "minmax|percentile|entropy", "percentile", NR_KNOB_GLOBAL,
     NR_KNOB_ACCURACY | NR_KNOB_PRECISION | NR_KNOB_DATA, 0.0,
     "how int8 activation ranges come from calibration statistics", NULL, NULL, 0,
     "-precision@*=int8"},
    [NR_KNOB_ROW(NR_KNOB_PRECISION_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_precision, NR_KNOB_PRECISION_END);

nr_precision nr_precision_of_value(const char *v, const nr_node *n) {
  if (v && !strcmp(v, "auto")) { /* its default: TF32 convolutions, exact products */
    bool conv = nr_pu_is_op(n, "Conv") ||
                (n->domain && !strcmp(n->domain, "nnroute") && !strcmp(n->op_type, "FusedConv"));
    return conv ? NR_PREC_TF32 : NR_PREC_FP32;
  }
  for (int p = 0; v && p < NR_PREC_COUNT; p++)
    if (!strcmp(v, prec_names[p]))
      return (nr_precision)p;
  return NR_PREC_FP32;
}

/* Effective only where the value gives another precision than the default does
 * (cuda.precision=fp32 on a Gemm is what auto gives: route.h, knob use). */
nr_precision nr_route_precision(const nr_route *r, const nr_node *n) {
  /* precision, and in CUDA builds cuda.precision (cuda_knobs.c) */
  const nr_knob_def *knobs[NR_KNOB_MAX_RESTRICTING];
  int nk = n ? nr_knob_restricting(knobs, NR_KNOB_MAX_RESTRICTING) : 0;
  for (int i = 0; i < nk && i < NR_KNOB_MAX_RESTRICTING; i++) {
    const char *v = knobs[i]->restricts == NR_RESTRICTS_PRECISION
                        ? nr_route_peek_def(r, knobs[i], n)
                        : NULL;
    if (!v)
      continue;
    nr_precision p = nr_precision_of_value(v, n);
    if (p != nr_precision_of_value(knobs[i]->dflt, n))
      nr_route_mark_effective(r, knobs[i], n);
    return p;
  }
  return NR_PREC_FP32;
}
