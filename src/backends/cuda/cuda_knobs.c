/* cuda_knobs.c - the CUDA backend's knob table (nr_knobs_cuda): the decisions a CUDA
 * build adds to a model's knob space.
 *
 * Key decision: this file is compiled into every build, the CPU-only one included,
 * and holds no CUDA code: the knob tables, and with them the knob schema hash, are
 * the same whether or not this nnroute carries the backend, so `nnroute knobs
 * --device cuda` answers everywhere and engines do not change schema with the build
 * switch. Every row names NR_DEVICE_CUDA in its device mask, so a CPU build's space
 * never lists them; the CPU kernels' tables (families.h: NR_KNOB_CPU_FAMILIES) are in
 * turn absent from CUDA spaces, and the graph passes' knobs are shared.
 *
 * Whether a value works is decided where the knowledge is: which convolution
 * algorithms cuDNN runs for a shape, or how many algorithms cuBLASLt's heuristic
 * returns, is asked at build time on the GPU; a value it refuses falls back to the
 * library's heuristic and the build records the value as ignored (route.h, knob use;
 * like the select pass's restrictions), so every route the space admits builds; so
 * does an algorithm asked for by name that is the one the heuristic picks. Values a
 * node probe of the CUDA tactics shows to build the default's plan are not in the
 * space: the precision auto gives a node, and a library, algorithm family or layout
 * the heuristic's pick has at every precision (one it has at some precisions only
 * acts under the others: `nnroute check-knobs` checks it there); a route that names
 * one sets auto (knob.h, same_as_dflt). Nor is a precision no CUDA tactic runs on the
 * node. */
#include "backends/cuda/cuda_knobs.h"
#include "backends/backend.h"
#include "passes/fate.h"
#include "passes/pass_util.h"
#include "plan/knob.h"
#include "plan/tactic.h"

#include <stdio.h>

#include <string.h>

#define CUDA NR_KNOB_DEVICE(NR_DEVICE_CUDA)

static bool float_out(const nr_graph *g, const nr_node *n) {
  int y = n->n_outputs > 0 ? n->outputs[0] : -1;
  return y >= 0 && g->tensors[y].value.dtype == NR_DTYPE_FLOAT;
}

/* A node that keeps a step of its own at the default route (not absorbed by a
 * recognized pattern or a horizontal fusion). */
static bool own_step(const nr_graph *g, const nr_node *n) {
  return !nr_fate_recognized(g, n) && !nr_horizontal_absorbs(g, n);
}

static bool conv_applies(const nr_graph *g, const nr_node *n) {
  if (!g || !nr_pu_is_op(n, "Conv") || !float_out(g, n))
    return !g;
  int w = nr_pu_in(n, 1);
  return w >= 0 && nr_pu_is_const(g, w) && g->tensors[w].value.rank == 4 && own_step(g, n);
}

static bool gemm_applies(const nr_graph *g, const nr_node *n) {
  if (!g)
    return true;
  return (nr_pu_is_op(n, "Gemm") || nr_pu_is_op(n, "MatMul")) && float_out(g, n) &&
         own_step(g, n);
}

/* A convolution the depthwise kernel can run (cuda_dwconv.c): one filter per
 * channel, 3x3 or 5x5, stride 1 or 2 on both axes, no dilation. */
static bool dw_applies(const nr_graph *g, const nr_node *n) {
  if (!g)
    return true;
  if (!conv_applies(g, n))
    return false;
  const nr_value *x = &g->tensors[n->inputs[0]].value, *w = &g->tensors[n->inputs[1]].value;
  size_t ns = 0, nd = 0;
  const int64_t *st = nr_attr_ints(n, "strides", &ns), *dl = nr_attr_ints(n, "dilations", &nd);
  bool ok = x->rank == 4 && nr_attr_int(n, "group", 1) == x->dims[1] && w->dims[0] == x->dims[1] &&
            w->dims[1] == 1 && w->dims[2] == w->dims[3] && (w->dims[2] == 3 || w->dims[2] == 5);
  for (size_t i = 0; ok && i < ns; i++)
    ok = st[i] == st[0] && (st[i] == 1 || st[i] == 2);
  for (size_t i = 0; ok && i < nd; i++)
    ok = dl[i] == 1;
  return ok;
}

static bool precision_applies(const nr_graph *g, const nr_node *n) {
  return conv_applies(g, n) || gemm_applies(g, n);
}

static bool any_product(const nr_graph *g, const nr_node *unused) {
  for (int k = 0; g && k < g->n_nodes; k++)
    if (precision_applies(g, &g->nodes[k]))
      return true;
  return !g;
}

static bool has_op(const nr_graph *g, const char *op) {
  for (int k = 0; k < g->n_nodes; k++)
    if (nr_pu_is_op(&g->nodes[k], op))
      return true;
  return false;
}

/* A product and a GELU, as the op or as the erf form the exporters write. */
static bool gelu_applies(const nr_graph *g, const nr_node *unused) {
  return !g || (any_product(g, unused) && (has_op(g, "Gelu") || has_op(g, "Erf")));
}

/* An attention, as the op or as the MatMul/Softmax/MatMul pattern recognize.attention
 * turns into one (a Softmax is the cheap sign of it). */
static bool attention_applies(const nr_graph *g, const nr_node *unused) {
  (void)unused;
  return !g || has_op(g, "Attention") || has_op(g, "Softmax");
}

/* cuda.conv.algo values in table order: auto, implicit_gemm, implicit_precomp_gemm,
 * gemm, fft, fft_tiling, winograd, winograd_nonfused. FFT needs unit strides and
 * dilations and one group; Winograd also a 3x3 kernel (nonfused: 3x3 or 5x5). */
static uint64_t conv_algo_valid(const nr_graph *g, const nr_node *n) {
  uint64_t all = 0xf; /* auto, the implicit GEMMs, gemm */
  size_t ns = 0, nd = 0;
  const int64_t *st = nr_attr_ints(n, "strides", &ns), *dl = nr_attr_ints(n, "dilations", &nd);
  bool unit = nr_attr_int(n, "group", 1) == 1;
  for (size_t i = 0; i < ns; i++)
    unit = unit && st[i] == 1;
  for (size_t i = 0; i < nd; i++)
    unit = unit && dl[i] == 1;
  if (!unit)
    return all;
  const nr_value *w = &g->tensors[n->inputs[1]].value;
  int64_t kh = w->dims[2], kw = w->dims[3];
  all |= 0x30; /* fft, fft_tiling */
  if (kh == 3 && kw == 3)
    all |= 0xc0;
  else if (kh == 5 && kw == 5)
    all |= 0x80;
  return all;
}

/* ---- values that can build nothing new -------------------------------------------- */

/* What the CUDA tactics say of node n: per precision, whether some tactic of it
 * supports n, and the one the select pass would pick there with no restriction (the
 * highest priority, first in table order on a tie). */
typedef struct cuda_probe {
  nr_node_probe probe;
  const nr_tactic *best[NR_PREC_COUNT];
} cuda_probe;

static void probe_tactic(const nr_tactic *t, void *user) {
  cuda_probe *v = user;
  const nr_node *n = v->probe.ctx.node;
  if (t->device != NR_DEVICE_CUDA || !t->op_type || strcmp(t->op_type, n->op_type) ||
      strcmp(t->domain ? t->domain : "", n->domain ? n->domain : "") ||
      (unsigned)t->precision >= NR_PREC_COUNT ||
      (t->supports && !t->supports(&v->probe.ctx)))
    return;
  const nr_tactic **b = &v->best[t->precision];
  if (!*b || t->priority > (*b)->priority)
    *b = t;
}

/* False in a build without the CUDA backend (no tactic to ask), or out of memory. */
static bool probe_node(const nr_graph *g, const nr_node *n, cuda_probe *v) {
  *v = (cuda_probe){0};
  bool ok = nr_backend_for(NR_DEVICE_CUDA) && nr_node_probe_init(&v->probe, g, n);
  if (ok) {
    v->probe.ctx.device = NR_DEVICE_CUDA;
    nr_tactic_foreach(probe_tactic, v);
  }
  nr_node_probe_free(&v->probe);
  return ok;
}

/* The values of cuda.precision whose precision is the one auto gives node n (tf32 on a
 * convolution, fp32 on a product): they build auto's plan. */
static uint64_t precision_alias(const nr_graph *g, const nr_node *n) {
  nr_precision auto_prec = nr_precision_of_value("auto", n);
  uint64_t bits = 0;
  const char *s;
  size_t len;
  (void)g;
  for (int i = 1; nr_knob_value_at(nr_knob_def_of(NR_KNOB_CUDA_PRECISION)->values, i, &s,
                                   &len); i++) {
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)len, s);
    if (nr_precision_of_value(name, n) == auto_prec)
      bits |= 1ull << i;
  }
  return bits;
}

/* cuda.precision: auto, and each other precision some CUDA tactic runs n in, except
 * auto's own (precision_alias: a route naming it sets auto). One no tactic runs would
 * leave the node without a tactic. A build without the CUDA backend has no tactic to
 * ask: every precision but auto's. */
static uint64_t precision_valid(const nr_graph *g, const nr_node *n) {
  cuda_probe v;
  bool probed = probe_node(g, n, &v);
  uint64_t bits = 1, alias = precision_alias(g, n);
  const char *s;
  size_t len;
  for (int i = 1; nr_knob_value_at(nr_knob_def_of(NR_KNOB_CUDA_PRECISION)->values, i, &s,
                                   &len); i++) {
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)len, s);
    if (!(alias >> i & 1) && (!probed || v.best[nr_precision_of_value(name, n)]))
      bits |= 1ull << i;
  }
  return bits;
}

/* The values of a restricting knob that the unrestricted pick satisfies at every
 * precision some tactic runs n in (never the default, auto): pinning one keeps that
 * pick whatever the node's precision, so it builds what auto builds (the CPU conv
 * knobs drop theirs the same way). A value that matches the pick of one precision
 * only (NHWC under tf32, plain under fp32) is not among them. 0 without the backend. */
static uint64_t default_pick(const nr_graph *g, const nr_node *n, nr_knob_id id) {
  cuda_probe v;
  if (!probe_node(g, n, &v))
    return 0;
  uint64_t same = ~0ull;
  bool any = false;
  for (int p = 0; p < NR_PREC_COUNT; p++)
    if (v.best[p]) {
      same &= nr_knob_allowing(nr_knob_def_of(id), v.best[p]);
      any = true;
    }
  return any ? same & ~1ull : 0;
}

/* valid(): every value but those; same_as_dflt: those (a route naming one sets auto). */
#define CUDA_RESTRICT_HOOKS(name, id)                                                  \
  static uint64_t name##_valid(const nr_graph *g, const nr_node *n) {                  \
    return ~default_pick(g, n, id);                                                    \
  }                                                                                    \
  static uint64_t name##_alias(const nr_graph *g, const nr_node *n) {                  \
    return default_pick(g, n, id);                                                     \
  }
CUDA_RESTRICT_HOOKS(gemm_tactic, NR_KNOB_CUDA_GEMM_TACTIC)
CUDA_RESTRICT_HOOKS(conv_tactic, NR_KNOB_CUDA_CONV_TACTIC)
CUDA_RESTRICT_HOOKS(conv_layout, NR_KNOB_CUDA_CONV_LAYOUT)
#undef CUDA_RESTRICT_HOOKS

const nr_knob_def nr_knobs_cuda[] = {
    [NR_KNOB_ROW(NR_KNOB_CUDA_PRECISION)] =
    {"cuda.precision", "auto|fp32|tf32|fp16", "auto", NR_KNOB_NODE,
     NR_KNOB_ACCURACY | NR_KNOB_PRECISION, 0.0,
     "numeric precision of a Conv/Gemm/MatMul on the GPU (tf32: tensor cores on fp32 "
     "data; fp16: half operands, fp32 accumulation and output; auto: tf32 for "
     "convolutions, as cuDNN's default math, PyTorch and TensorRT run fp32 ones, and "
     "exact fp32 for Gemm/MatMul, as PyTorch does)",
     precision_applies, precision_valid, CUDA, .restricts = NR_RESTRICTS_PRECISION,
     .same_as_dflt = precision_alias},
    [NR_KNOB_ROW(NR_KNOB_CUDA_GEMM_TACTIC)] =
    {"cuda.gemm.tactic", "auto|cublaslt|cublas", "auto", NR_KNOB_NODE, 0, 0.0,
     "library of a Gemm/MatMul on the GPU: cuBLASLt (bias and ReLU in its epilogue) or "
     "cuBLAS plus an epilogue kernel",
     gemm_applies, gemm_tactic_valid, CUDA, .restricts = NR_RESTRICTS_ALGO,
     .same_as_dflt = gemm_tactic_alias},
    [NR_KNOB_ROW(NR_KNOB_CUDA_GEMM_ALGO)] =
    {"cuda.gemm.algo", "0|1|2|3|4|5|6|7", "0", NR_KNOB_NODE, NR_KNOB_DATA, 0.0,
     "which of the algorithms cuBLASLt's heuristic returns for the shape runs (index; "
     "past the list's end: the first)",
     gemm_applies, NULL, CUDA},
    [NR_KNOB_ROW(NR_KNOB_CUDA_GEMM_GELU)] =
    {"cuda.gemm.gelu", "tanh_fp16|exact", "tanh_fp16", NR_KNOB_GLOBAL, NR_KNOB_ACCURACY, 1e-3,
     "an exact (erf) GELU fused into an fp16 cuBLASLt product runs in its GELU epilogue, "
     "which is the tanh form (tanh_fp16), or as an exact pass after it (exact)",
     gelu_applies, NULL, CUDA, "-cuda.precision@*=fp16"},
    [NR_KNOB_ROW(NR_KNOB_CUDA_CONV_ALGO)] =
    {"cuda.conv.algo",
     "auto|implicit_gemm|implicit_precomp_gemm|gemm|fft|fft_tiling|winograd|winograd_nonfused",
     "auto", NR_KNOB_NODE, NR_KNOB_ACCURACY | NR_KNOB_DATA, 1e-4,
     "cuDNN convolution algorithm (auto: cuDNN's heuristic, or its timed search with "
     "compile.tactic_selection=profile)",
     conv_applies, conv_algo_valid, CUDA},
    [NR_KNOB_ROW(NR_KNOB_CUDA_CONV_TACTIC)] =
    {"cuda.conv.tactic", "auto|cudnn|depthwise", "auto", NR_KNOB_NODE, 0, 0.0,
     "who runs a depthwise convolution on the GPU: cuDNN, or nnroute's depthwise kernel "
     "(bias and activation fused; restricting knob on the tactic's algo)",
     dw_applies, conv_tactic_valid, CUDA, .restricts = NR_RESTRICTS_ALGO,
     .same_as_dflt = conv_tactic_alias},
    [NR_KNOB_ROW(NR_KNOB_CUDA_CONV_LAYOUT)] =
    {"cuda.conv.layout", "auto|plain|nhwc", "auto", NR_KNOB_NODE, NR_KNOB_LAYOUT, 0.0,
     "activation layout a convolution runs in on the GPU (the layout pass inserts "
     "reorders)",
     conv_applies, conv_layout_valid, CUDA, .restricts = NR_RESTRICTS_LAYOUT,
     .same_as_dflt = conv_layout_alias},
    [NR_KNOB_ROW(NR_KNOB_CUDA_ATTENTION_FP32)] =
    {"cuda.attention.fp32", "auto|rowwise|tiled", "auto", NR_KNOB_GLOBAL, 0, 0.0,
     "kernel of an fp32 attention step on the GPU: rowwise (8 query rows a block), tiled "
     "(32 rows a block, register-tiled; head sizes 32/64/128, else rowwise) or auto "
     "(tiled where the head size allows)",
     attention_applies, NULL, CUDA},
    [NR_KNOB_ROW(NR_KNOB_CUDA_GRAPHS)] =
    {"cuda.graphs", "on|off", "on", NR_KNOB_GLOBAL, NR_KNOB_RUNTIME, 0.0,
     "capture a context's steps into a CUDA graph on its second run and replay it",
     NULL, NULL, CUDA},
    [NR_KNOB_ROW(NR_KNOB_CUDA_WORKSPACE)] =
    {"cuda.workspace", "16|64|256", "64", NR_KNOB_GLOBAL, NR_KNOB_DATA, 0.0,
     "MiB of scratch a cuDNN or cuBLASLt step may use as workspace",
     any_product, NULL, CUDA},
    [NR_KNOB_ROW(NR_KNOB_CUDA_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_cuda, NR_KNOB_CUDA_END);
