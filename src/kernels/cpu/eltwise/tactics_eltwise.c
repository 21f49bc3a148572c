/* tactics_eltwise.c - the elementwise tactics (unary activations and math, Add/Sub/
 * Mul/Div with broadcasting, Where) and the numerics knobs of the family.
 *
 * Key decisions. A tactic is data (STYLE.md point 5): every row comes from the
 * enumerator eltwise.inc, once per ISA, and its id is the kernel's name
 * (nr_f32_vgelu__avx2, nr_f32_vadd_bcast__portable); all rows of the family carry
 * algo "vector", which is what eltwise.tactic=vector selects (select.c matches that
 * knob on the algo field; the reference tactic's algo is "ref"). Broadcasting is never
 * materialized (bcast.h: outer dims times a run in which each input has stride 1
 * or 0). Unary tactics work on the physical buffer,
 * so they run in any layout when f(0) = 0 keeps NCHW8C's padding at zero. */
#include "ir/fused.h"
#include "kernels/cpu/attn/attn.h"
#include "kernels/cpu/eltwise/bcast.h"
#include "kernels/cpu/eltwise/eltwise_knobs.h"
#include "kernels/cpu/eltwise/vmath.h"
#include "kernels/cpu/norm/norm.h"
#include "passes/fate.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/eltwise/eltwise.inc"

#define GRAIN 16384

/* ---- shared checks -------------------------------------------------------------- */

static bool is_f32(const nr_slot *s) { return s && s->dtype == NR_DTYPE_FLOAT; }

static int64_t phys_count(const nr_slot *s) {
  return (int64_t)(nr_slot_bytes(s, s->layout) / (uint64_t)nr_dtype_size(s->dtype));
}

static bool knob_is(const nr_tactic_ctx *c, nr_knob_id id, const nr_node *n,
                    const char *v) {
  return nr_route_is(c->route, id, n, v);
}

/* eltwise.threads=1: the step runs on the calling thread (nr_parallel_for honours
 * step->threads). */
static void set_threads(const nr_tactic_ctx *c, nr_step *step) {
  if (knob_is(c, NR_KNOB_ELTWISE_THREADS, c->node, "1"))
    step->threads = 1;
}

/* Does the op use exp/tanh/erf/sigmoid (and so eltwise.math)? */
static bool uses_math(const char *op) {
  static const char *const ops[] = {"Exp",  "Sigmoid", "Tanh",    "Erf",
                                    "Gelu", "Softmax", "LogSoftmax"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(op, ops[i]))
      return true;
  return false;
}

static bool float_node(const nr_graph *g, const nr_node *n) {
  return n->n_inputs > 0 && n->inputs[0] >= 0 && !n->domain[0] &&
         g->tensors[n->inputs[0]].value.dtype == NR_DTYPE_FLOAT;
}

/* ---- unary ---------------------------------------------------------------------- */

static const struct {
  const char *op;
  nr_ewu_op code;
} unary_codes[] = {
#define X(op, stem, code, lay) {op, code},
    NR_EWU_LIST(X)
#undef X
};

static int unary_code(const char *op) {
  for (size_t i = 0; i < sizeof unary_codes / sizeof unary_codes[0]; i++)
    if (!strcmp(unary_codes[i].op, op))
      return (int)unary_codes[i].code;
  return -1;
}

/* Clip's bounds: attributes before opset 11, optional constant scalar inputs after.
 * False when a bound is not a known float32 scalar. */
static bool clip_bounds(const nr_tactic_ctx *c, float *lo, float *hi) {
  const nr_node *n = c->node;
  if (n->opset < 11) {
    *lo = nr_attr_float(n, "min", -FLT_MAX);
    *hi = nr_attr_float(n, "max", FLT_MAX);
    return true;
  }
  float *b[2] = {lo, hi};
  for (int i = 1; i <= 2; i++) {
    const nr_slot *s = nr_step_in(c, i);
    *b[i - 1] = i == 1 ? -INFINITY : INFINITY;
    if (!s)
      continue;
    const float *v = nr_step_const(c, i);
    if (!v || !is_f32(s) || nr_slot_bytes(s, NR_LAYOUT_PLAIN) != sizeof(float))
      return false;
    *b[i - 1] = v[0];
  }
  return true;
}

static bool unary_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!c->node || !is_f32(x) || !is_f32(y) || !nr_slot_same_dims(x, y) || c->step->n_out != 1)
    return false;
  const char *op = c->node->op_type;
  if (!strcmp(op, "Clip")) {
    float lo, hi;
    /* a blocked input's padding channels hold 0 and must keep it */
    return clip_bounds(c, &lo, &hi) &&
           ((lo <= 0.0f && hi >= 0.0f) || !nr_step_input_arrives(c, 0, NR_LAYOUT_NCHW8C));
  }
  if (!strcmp(op, "Gelu")) {
    const char *ap = nr_attr_string(c->node, "approximate", "none");
    return !strcmp(ap, "none") || !strcmp(ap, "tanh");
  }
  return c->step->n_in == 1 || (c->step->n_in > 1 && !nr_step_in(c, 1));
}

static nr_status unary_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  const nr_node *n = c->node;
  nr_ewu_params p = {0};
  int code = unary_code(n->op_type);
  if (code < 0)
    return nr_errorf(c->err, NR_ERR_INTERNAL, "no unary kernel for %s", n->op_type);
  p.op = (uint8_t)code;
  p.math = knob_is(c, NR_KNOB_ELTWISE_MATH, NULL, "fast") ? NR_VMATH_FAST : NR_VMATH_ACCURATE;
  switch (code) {
  case NR_EWU_CLIP:
    if (!clip_bounds(c, &p.a, &p.b))
      return nr_errorf(c->err, NR_ERR_UNSUPPORTED, "Clip bounds are not constant");
    break;
  case NR_EWU_LEAKY: p.a = nr_attr_float(n, "alpha", 0.01f); break;
  case NR_EWU_HSIG:
    p.a = nr_attr_float(n, "alpha", 0.2f);
    p.b = nr_attr_float(n, "beta", 0.5f);
    break;
  case NR_EWU_GELU:
    if (!strcmp(nr_attr_string(n, "approximate", "none"), "tanh") ||
        knob_is(c, NR_KNOB_GELU_APPROX, n, "tanh"))
      p.op = NR_EWU_GELU_TANH;
    break;
  default: break;
  }
  memcpy(step->params, &p, sizeof p);
  set_threads(c, step);
  return NR_OK;
}

typedef struct unary_job {
  nr_ewu_params p;
  bool avx2;
  const float *x;
  float *y;
} unary_job;

static void unary_task(void *arg, int64_t begin, int64_t end, int thread) {
  const unary_job *j = arg;
  if (j->avx2)
    nr_f32_vunary__avx2(&j->p, j->x + begin, j->y + begin, end - begin);
  else
    nr_f32_vunary__portable(&j->p, j->x + begin, j->y + begin, end - begin);
}

static nr_status unary_run(const nr_exec_args *a) {
  unary_job j = {.avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0,
                 .x = a->in[0], .y = a->out[0]};
  memcpy(&j.p, a->step->params, sizeof j.p);
  if (a->in_slot[0]->layout != a->out_slot[0]->layout)
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: input and output layouts differ",
                     a->step->tactic->id);
  int64_t n = phys_count(a->out_slot[0]);
  if (n < 2 * GRAIN)
    unary_task(&j, 0, n, 0);
  else
    nr_parallel_for(a->pool, n, GRAIN, a->step->threads, unary_task, &j);
  return NR_OK;
}

/* ---- binary --------------------------------------------------------------------- */

static int binary_code(const char *op) {
#define X(name, stem, code, lay)                                                       \
  if (!strcmp(op, name))                                                               \
    return (int)code;
  NR_EWB_LIST(X)
#undef X
  return -1;
}

static bool binary_types(const nr_tactic_ctx *c) {
  return c->node && c->step->n_in == 2 && c->step->n_out == 1 && is_f32(nr_step_in(c, 0)) &&
         is_f32(nr_step_in(c, 1)) && is_f32(nr_step_out(c, 0));
}

static bool same_supports(const nr_tactic_ctx *c) {
  return binary_types(c) && nr_slot_same_dims(nr_step_in(c, 0), nr_step_in(c, 1)) &&
         nr_slot_same_dims(nr_step_in(c, 0), nr_step_out(c, 0));
}

static bool bcast_supports(const nr_tactic_ctx *c) {
  nr_bc_geom g;
  const nr_slot *in[2] = {nr_step_in(c, 0), nr_step_in(c, 1)};
  return binary_types(c) && !same_supports(c) && nr_bc_build(&g, nr_step_out(c, 0), 2, in);
}

static nr_status binary_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  int code = binary_code(c->node->op_type);
  if (code < 0)
    return nr_errorf(c->err, NR_ERR_INTERNAL, "no binary kernel for %s", c->node->op_type);
  step->params[0] = (uint8_t)code;
  set_threads(c, step);
  return NR_OK;
}

typedef struct binary_job {
  nr_ewb_op op;
  bool avx2;
  const float *a, *b;
  float *y;
  nr_bc_geom g;
} binary_job;

static void binary_span(void *arg, const int64_t *off, int64_t out_off, int64_t len) {
  const binary_job *j = arg;
  const float *a = j->a + off[0], *b = j->b + off[1];
  int sa = j->g.rs[0], sb = j->g.rs[1];
  if (j->avx2)
    nr_f32_vbinary__avx2(j->op, a, sa, b, sb, j->y + out_off, len);
  else
    nr_f32_vbinary__portable(j->op, a, sa, b, sb, j->y + out_off, len);
}

static void binary_task(void *arg, int64_t begin, int64_t end, int thread) {
  binary_job *j = arg;
  nr_bc_walk(&j->g, begin, end, binary_span, j);
}

static nr_status binary_run(const nr_exec_args *a) {
  binary_job j = {.op = (nr_ewb_op)a->step->params[0],
                  .avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0,
                  .a = a->in[0], .b = a->in[1], .y = a->out[0]};
  const nr_slot *in[2] = {a->in_slot[0], a->in_slot[1]}, *out = a->out_slot[0];
  int64_t n;
  if (nr_slot_same_dims(in[0], in[1]) && nr_slot_same_dims(in[0], out)) {
    if (in[0]->layout != out->layout || in[1]->layout != out->layout)
      return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: operand layouts differ",
                       a->step->tactic->id);
    n = phys_count(out); /* one run over the physical buffer */
    nr_bc_flat(&j.g, 2, n);
  } else {
    if (!nr_bc_build(&j.g, out, 2, in))
      return nr_errorf(a->err, NR_ERR_SHAPE, "%s: shapes do not broadcast",
                       a->step->tactic->id);
    n = j.g.count;
  }
  if (n < 2 * GRAIN)
    binary_task(&j, 0, n, 0);
  else
    nr_parallel_for(a->pool, n, GRAIN, a->step->threads, binary_task, &j);
  return NR_OK;
}

/* ---- Where ---------------------------------------------------------------------- */

static bool where_supports(const nr_tactic_ctx *c) {
  const nr_slot *in[3] = {nr_step_in(c, 0), nr_step_in(c, 1), nr_step_in(c, 2)};
  nr_bc_geom g;
  return c->node && c->step->n_in == 3 && in[0] && in[0]->dtype == NR_DTYPE_BOOL &&
         is_f32(in[1]) && is_f32(in[2]) && is_f32(nr_step_out(c, 0)) &&
         nr_bc_build(&g, nr_step_out(c, 0), 3, in);
}

static nr_status where_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  set_threads(c, step);
  return NR_OK;
}

typedef struct where_job {
  const uint8_t *c;
  const float *x, *z;
  float *y;
  nr_bc_geom g;
} where_job;

static void where_span(void *arg, const int64_t *off, int64_t out_off, int64_t len) {
  const where_job *j = arg;
  nr_f32_vwhere__portable(j->c + off[0], j->g.rs[0], j->x + off[1], j->g.rs[1],
                          j->z + off[2], j->g.rs[2], j->y + out_off, len);
}

static void where_task(void *arg, int64_t begin, int64_t end, int thread) {
  where_job *j = arg;
  nr_bc_walk(&j->g, begin, end, where_span, j);
}

static nr_status where_run(const nr_exec_args *a) {
  where_job j = {.c = a->in[0], .x = a->in[1], .z = a->in[2], .y = a->out[0]};
  const nr_slot *in[3] = {a->in_slot[0], a->in_slot[1], a->in_slot[2]};
  if (!nr_bc_build(&j.g, a->out_slot[0], 3, in))
    return nr_errorf(a->err, NR_ERR_SHAPE, "%s: shapes do not broadcast",
                     a->step->tactic->id);
  if (j.g.count < 2 * GRAIN)
    where_task(&j, 0, j.g.count, 0);
  else
    nr_parallel_for(a->pool, j.g.count, GRAIN, a->step->threads, where_task, &j);
  return NR_OK;
}

/* ---- NHWC: rows that follow an NHWC producer ------------------------------------ */

/* The ANY rows already run in NHWC after an NHWC step. These cover the rest inside an
 * NHWC chain (int8 convs, conv.layout=nhwc): the unary ops eltwise.inc lists PLAIN
 * because f(0) != 0 would spoil NCHW8C padding (NHWC has none), same-shape Div, and
 * broadcasting Add/Sub/Mul/Div whose small operand has the same bytes in PLAIN and
 * NHWC (C == 1 or H * W == 1: a squeeze-excitation scale [N, C, 1, 1], a scalar).
 * supports() asks nr_layout_predict whether a full-shape input arrives in NHWC, so
 * these rows never pull a PLAIN network into NHWC; layout.propagate=off turns them off
 * like the other followers (tactics_pool_nhwc.c). */

static bool unary_nhwc_supports(const nr_tactic_ctx *c) {
  return unary_supports(c) && nr_step_in(c, 0)->rank == 4 &&
         nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC);
}

static bool same_nhwc_supports(const nr_tactic_ctx *c) {
  return same_supports(c) && nr_step_in(c, 0)->rank == 4 &&
         nr_step_input_arrives(c, 0, NR_LAYOUT_NHWC);
}

/* s as a rank-4 shape (leading ones) in physical NHWC order; false above rank 4. */
static bool nhwc_view(const nr_slot *s, nr_slot *v) {
  int64_t a[4] = {1, 1, 1, 1};
  if (s->rank > 4)
    return false;
  for (int d = 0; d < s->rank; d++)
    a[4 - s->rank + d] = s->dims[d];
  *v = *s;
  v->rank = 4;
  v->dims[0] = a[0], v->dims[1] = a[2], v->dims[2] = a[3], v->dims[3] = a[1];
  return true;
}

/* Do PLAIN bytes of NHWC view v equal its NHWC bytes? */
static bool plain_is_nhwc(const nr_slot *v) {
  return v->dims[3] == 1 || v->dims[1] * v->dims[2] == 1;
}

/* Will the layout pass give input i NHWC (layout.c: input 0, and a rank-4 input whose
 * dims are the output's but for the channels)? */
static bool gets_nhwc(const nr_slot *x, const nr_slot *y, int i) {
  return i == 0 || (x->rank == 4 && x->dims[0] == y->dims[0] && x->dims[2] == y->dims[2] &&
                    x->dims[3] == y->dims[3]);
}

static bool bcast_nhwc_supports(const nr_tactic_ctx *c) {
  if (!binary_types(c) || same_supports(c))
    return false;
  const nr_slot *y = nr_step_out(c, 0), *in[2] = {nr_step_in(c, 0), nr_step_in(c, 1)};
  nr_slot v[2], vy;
  bool follows = false;
  if (y->rank != 4 || in[0]->rank != 4)
    return false;
  for (int i = 0; i < 2; i++) {
    if (!nhwc_view(in[i], &v[i]) || (!gets_nhwc(in[i], y, i) && !plain_is_nhwc(&v[i])))
      return false;
    follows |= nr_slot_same_dims(in[i], y) && nr_step_input_arrives(c, i, NR_LAYOUT_NHWC);
  }
  const nr_slot *vp[2] = {&v[0], &v[1]};
  nr_bc_geom g;
  return follows && nhwc_view(y, &vy) && nr_bc_build(&g, &vy, 2, vp);
}

static nr_status binary_nhwc_run(const nr_exec_args *a) {
  binary_job j = {.op = (nr_ewb_op)a->step->params[0],
                  .avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0,
                  .a = a->in[0], .b = a->in[1], .y = a->out[0]};
  nr_slot v[3];
  const nr_slot *vp[2] = {&v[0], &v[1]};
  bool ok = a->out_slot[0]->layout == NR_LAYOUT_NHWC && nhwc_view(a->out_slot[0], &v[2]);
  for (int i = 0; i < 2 && ok; i++)
    ok = nhwc_view(a->in_slot[i], &v[i]) &&
         (a->in_slot[i]->layout == NR_LAYOUT_NHWC ||
          (a->in_slot[i]->layout == NR_LAYOUT_PLAIN && plain_is_nhwc(&v[i])));
  if (!ok || !nr_bc_build(&j.g, &v[2], 2, vp))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "%s: operands '%s' (%s) and '%s' (%s) do not "
                     "broadcast in NHWC", a->step->tactic->id, a->in_slot[0]->name,
                     nr_layout_name(a->in_slot[0]->layout), a->in_slot[1]->name,
                     nr_layout_name(a->in_slot[1]->layout));
  if (j.g.count < 2 * GRAIN)
    binary_task(&j, 0, j.g.count, 0);
  else
    nr_parallel_for(a->pool, j.g.count, GRAIN, a->step->threads, binary_task, &j);
  return NR_OK;
}

/* ---- the tables ----------------------------------------------------------------- */

#define UNARY_ROWS(op, stem, code, lay)                                                \
  {"nr_f32_v" #stem "__avx2", "", op, "nnroute", "vector", lay, NR_ISA_AVX2, 20,       \
   unary_supports, unary_prepare, unary_run},                                          \
  {"nr_f32_v" #stem "__portable", "", op, "nnroute", "vector", lay, 0, 10,             \
   unary_supports, unary_prepare, unary_run},
#define BINARY_ROWS(op, stem, code, lay)                                               \
  {"nr_f32_v" #stem "__avx2", "", op, "nnroute", "vector", lay, NR_ISA_AVX2, 21,       \
   same_supports, binary_prepare, binary_run},                                         \
  {"nr_f32_v" #stem "__portable", "", op, "nnroute", "vector", lay, 0, 11,             \
   same_supports, binary_prepare, binary_run},                                         \
  {"nr_f32_v" #stem "_bcast__avx2", "", op, "nnroute", "vector", NR_LAYOUT_PLAIN,      \
   NR_ISA_AVX2, 20, bcast_supports, binary_prepare, binary_run},                       \
  {"nr_f32_v" #stem "_bcast__portable", "", op, "nnroute", "vector", NR_LAYOUT_PLAIN,  \
   0, 10, bcast_supports, binary_prepare, binary_run},

#define NHWC_ROWS(op, id, sup, prep, run)                                             \
  {"nr_f32_v" id "_nhwc__avx2", "", op, "nnroute", "vector", NR_LAYOUT_NHWC, NR_ISA_AVX2, \
   22, sup, prep, run},                                                                \
  {"nr_f32_v" id "_nhwc__portable", "", op, "nnroute", "vector", NR_LAYOUT_NHWC, 0, 12, \
   sup, prep, run},
#define UNARY_NHWC(op, id) NHWC_ROWS(op, id, unary_nhwc_supports, unary_prepare, unary_run)
#define BCAST_NHWC(op, stem, code, lay)                                                \
  NHWC_ROWS(op, #stem "_bcast", bcast_nhwc_supports, binary_prepare, binary_nhwc_run)

const nr_tactic nr_tactics_cpu_eltwise[] = {
    NR_EWU_LIST(UNARY_ROWS) NR_EWB_LIST(BINARY_ROWS)
    UNARY_NHWC("HardSigmoid", "hardsigmoid") UNARY_NHWC("Exp", "exp")
    UNARY_NHWC("Sigmoid", "sigmoid")
    NHWC_ROWS("Div", "div", same_nhwc_supports, binary_prepare, binary_run)
    NR_EWB_LIST(BCAST_NHWC)
    {"nr_f32_vwhere_bcast__portable", "", "Where", "nnroute", "vector", NR_LAYOUT_PLAIN, 0,
     10, where_supports, where_prepare, where_run},
    {0},
};

/* ---- knobs ---------------------------------------------------------------------- */

/* Listed when a node using the math functions keeps its own step by default (an Erf
 * inside a recognized GELU does not), or when the fused attention tactic runs one (its
 * softmax's exp follows the knob). */
static bool math_node(const nr_graph *g, const nr_node *n) {
  return (float_node(g, n) && uses_math(n->op_type) && nr_fate_survives(g, n)) ||
         nr_attn_fused(g, n);
}

static bool applies_math(const nr_graph *g, const nr_node *n) {
  if (n)
    return math_node(g, n);
  for (int i = 0; g && i < g->n_nodes; i++)
    if (math_node(g, &g->nodes[i]))
      return true;
  return !g;
}

/* Per-node knobs of this family are listed only on nodes that keep their own step
 * under the default route (fate.h): an activation fused into a Conv/Gemm, a link of
 * an EltwiseChain or a piece of a recognized GELU is gone by then. */
static bool applies_gelu(const nr_graph *g, const nr_node *n) {
  return n && float_node(g, n) && !strcmp(n->op_type, "Gelu") &&
         !strcmp(nr_attr_string(n, "approximate", "none"), "none") &&
         nr_fate_survives(g, n);
}

static bool eltwise_node(const nr_graph *g, const nr_node *n) {
  if (n && !n->domain[0] && !strcmp(n->op_type, "Where"))
    return n->n_inputs == 3 && n->inputs[1] >= 0 &&
           g->tensors[n->inputs[1]].value.dtype == NR_DTYPE_FLOAT;
  return n && float_node(g, n) &&
         (unary_code(n->op_type) >= 0 || binary_code(n->op_type) >= 0);
}

static bool applies_tactic(const nr_graph *g, const nr_node *n) {
  return eltwise_node(g, n) && nr_fate_survives(g, n);
}

/* Where the vector tactics split the work at all: at least two chunks of GRAIN
 * elements (smaller outputs run on the calling thread whatever the knob says). Norm
 * and pool nodes follow their own row rule (nr_norm_parallel, tactics_norm.c). */
static bool applies_threads(const nr_graph *g, const nr_node *n) {
  if (!n)
    return false;
  if (eltwise_node(g, n))
    return nr_fate_out_count(g, n) >= 2 * GRAIN && nr_fate_survives(g, n);
  return nr_norm_parallel(g, n);
}

const nr_knob_def nr_knobs_cpu_eltwise[] = {
    [NR_KNOB_ROW(NR_KNOB_ELTWISE_MATH)] =
    {"eltwise.math", "accurate|fast", "accurate", NR_KNOB_GLOBAL, NR_KNOB_ACCURACY, 2e-5,
     "exp/tanh/erf/sigmoid of the elementwise, GELU, softmax and attention tactics: accurate "
     "(max rel err 4e-7) or fast (low-degree polynomials, rcp+Newton; 9e-6)",
     applies_math, NULL},
    [NR_KNOB_ROW(NR_KNOB_GELU_APPROX)] =
    {"gelu.approx", "exact|tanh", "exact", NR_KNOB_NODE, NR_KNOB_ACCURACY, 1e-3,
     "GELU with erf (exact) or the tanh formula (max abs diff 4.7e-4)", applies_gelu, NULL},
    [NR_KNOB_ROW(NR_KNOB_ELTWISE_TACTIC)] =
    {"eltwise.tactic", "auto|ref", "auto", NR_KNOB_NODE, 0, 0,
     "auto = the vector nr_f32_v<op>[_bcast]__{avx2,portable} tactics (algo \"vector\"), "
     "ref = the reference tactic", applies_tactic, NULL, .restricts = NR_RESTRICTS_ALGO},
    [NR_KNOB_ROW(NR_KNOB_ELTWISE_THREADS)] =
    {"eltwise.threads", "all|1", "all", NR_KNOB_NODE, NR_KNOB_THREADS, 0,
     "threads of an elementwise, softmax, layernorm or pooling step: all of the pool, or "
     "1 (the calling thread only; frees the other cores for parallel steps)",
     applies_threads, NULL},
    [NR_KNOB_ROW(NR_KNOB_CPU_ELTWISE_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_cpu_eltwise, NR_KNOB_CPU_ELTWISE_END);
