/* tactics_chain.c - the fast tactics of nnroute.EltwiseChain (nr_f32_vchain__avx2,
 * nr_f32_vchain__portable): any chain the eltwise_fuse pass builds, with its side
 * operands broadcast over any axes (bcast.h).
 *
 * Key decision: the chain is evaluated a tile at a time, not an element at a time.
 * A tile of up to TILE output elements (one broadcast run or a piece of one) lives in
 * a stack buffer that stays in L1; each step runs the family's vector kernel over
 * the whole tile (nr_f32_vunary / nr_f32_vbinary with the operand at stride 0 or 1),
 * and the tile is stored once at the end. So every op of the family is written once,
 * the chain costs one read of each input and one write of the output, and reading
 * element i of an input only to compute element i keeps the in-place reuse of the
 * memory pass safe. Steps without a vector kernel (Pow by a non-special exponent,
 * Log, Softplus, ...) are scalar loops over the tile; Pow by the constants 1, 2, 3,
 * -1 and 0.5... are rewritten at prepare into multiplies or a reciprocal. The
 * program (one record per step) is packed into the engine's weights. */
#include "ir/fused.h"
#include "kernels/cpu/eltwise/bcast.h"
#include "kernels/cpu/eltwise/eltwise_knobs.h"
#include "kernels/cpu/eltwise/vmath.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TILE 512
#define GRAIN 16384
#define CHAIN_MAX_STEPS 64 /* the encoding's limit (ops_fused.c) */

/* How a step runs: a unary vector kernel, a binary vector kernel, or a chain-only
 * loop. */
typedef enum chain_kind { CK_UNARY = 0, CK_BINARY = 1, CK_EXTRA = 2 } chain_kind;

typedef enum chain_extra {
  CX_POW = 0, CX_MAX, CX_MIN, CX_PRELU, /* binary */
  CX_LOG, CX_RECIP, CX_FLOOR, CX_CEIL, CX_SOFTPLUS, CX_ELU, CX_SQUARE, CX_CUBE,
} chain_extra;

typedef struct chain_op {
  uint8_t kind, code; /* chain_kind; nr_ewu_op, nr_ewb_op or chain_extra */
  int8_t operand;     /* input index of a binary step's other operand, -1 unary */
  uint8_t swapped;    /* operand OP value */
  float a, b;
} chain_op;

typedef struct chain_prog {
  uint32_t n_steps, math;
  chain_op op[CHAIN_MAX_STEPS];
} chain_prog;

static const struct {
  const char *name;
  uint8_t kind, code;
} step_table[] = {
    {"Add", CK_BINARY, NR_EWB_ADD}, {"Sub", CK_BINARY, NR_EWB_SUB},
    {"Mul", CK_BINARY, NR_EWB_MUL}, {"Div", CK_BINARY, NR_EWB_DIV},
    {"Pow", CK_EXTRA, CX_POW}, {"Max", CK_EXTRA, CX_MAX}, {"Min", CK_EXTRA, CX_MIN},
    {"PRelu", CK_EXTRA, CX_PRELU},
    {"Relu", CK_UNARY, NR_EWU_RELU}, {"Sigmoid", CK_UNARY, NR_EWU_SIGMOID},
    {"Tanh", CK_UNARY, NR_EWU_TANH}, {"Exp", CK_UNARY, NR_EWU_EXP},
    {"Erf", CK_UNARY, NR_EWU_ERF}, {"Sqrt", CK_UNARY, NR_EWU_SQRT},
    {"Neg", CK_UNARY, NR_EWU_NEG}, {"Abs", CK_UNARY, NR_EWU_ABS},
    {"HardSwish", CK_UNARY, NR_EWU_HSWISH}, {"Clip", CK_UNARY, NR_EWU_CLIP},
    {"LeakyRelu", CK_UNARY, NR_EWU_LEAKY}, {"HardSigmoid", CK_UNARY, NR_EWU_HSIG},
    {"Gelu", CK_UNARY, NR_EWU_GELU},
    {"Log", CK_EXTRA, CX_LOG}, {"Reciprocal", CK_EXTRA, CX_RECIP},
    {"Floor", CK_EXTRA, CX_FLOOR}, {"Ceil", CK_EXTRA, CX_CEIL},
    {"Softplus", CK_EXTRA, CX_SOFTPLUS}, {"Elu", CK_EXTRA, CX_ELU},
};
#define N_STEP_TABLE (int)(sizeof step_table / sizeof step_table[0])

static bool is_binary(const chain_op *o) {
  return o->kind == CK_BINARY || (o->kind == CK_EXTRA && o->code <= CX_PRELU);
}

/* ---- decoding the node ------------------------------------------------------------ */

/* A constant scalar operand's value (Pow's exponent). */
static bool const_scalar(const nr_tactic_ctx *c, int i, float *v) {
  const nr_slot *s = nr_step_in(c, i);
  const float *d = nr_step_const(c, i);
  if (!s || !d || s->dtype != NR_DTYPE_FLOAT || nr_slot_bytes(s, NR_LAYOUT_PLAIN) != 4)
    return false;
  *v = d[0];
  return true;
}

/* Pow by a constant the tile loop computes without powf: x^1, x^2, x^3, x^-1. */
static void pow_by_const(const nr_tactic_ctx *c, chain_op *o) {
  float e;
  if (o->swapped || !const_scalar(c, o->operand, &e))
    return;
  if (e == 1.0f)
    *o = (chain_op){CK_UNARY, NR_EWU_CLIP, -1, 0, -INFINITY, INFINITY};
  else if (e == 2.0f)
    *o = (chain_op){CK_EXTRA, CX_SQUARE, -1, 0, 0, 0};
  else if (e == 3.0f)
    *o = (chain_op){CK_EXTRA, CX_CUBE, -1, 0, 0, 0};
  else if (e == -1.0f)
    *o = (chain_op){CK_EXTRA, CX_RECIP, -1, 0, 0, 0};
}

static bool decode_step(const nr_tactic_ctx *c, const char *name, int64_t operand,
                        int64_t swapped, const float *p, chain_op *o) {
  int i = 0;
  while (i < N_STEP_TABLE && strcmp(step_table[i].name, name))
    i++;
  if (i == N_STEP_TABLE || operand >= c->step->n_in || operand < -1)
    return false;
  *o = (chain_op){step_table[i].kind, step_table[i].code, (int8_t)operand, swapped != 0,
                  p[0], p[1]};
  if (is_binary(o) != (operand >= 0) || (operand >= 0 && !nr_step_in(c, (int)operand)))
    return false;
  if (o->kind == CK_UNARY && o->code == NR_EWU_GELU && p[0] != 0)
    o->code = NR_EWU_GELU_TANH;
  if (o->kind == CK_EXTRA && o->code == CX_POW)
    pow_by_const(c, o);
  return true;
}

/* The program of c's node; false when it is not a chain this tactic runs. */
static bool decode(const nr_tactic_ctx *c, chain_prog *prog) {
  const nr_node *n = c->node;
  const nr_attr *ops = nr_node_attr(n, "ops");
  size_t n_operand, n_swapped, n_params;
  const int64_t *operand = nr_attr_ints(n, "operand", &n_operand);
  const int64_t *swapped = nr_attr_ints(n, "swapped", &n_swapped);
  const float *params = nr_attr_floats(n, "params", &n_params);
  memset(prog, 0, sizeof *prog);
  if (!ops || ops->type != NR_ATTR_STRINGS || !ops->n || ops->n > CHAIN_MAX_STEPS ||
      n_operand != ops->n || n_swapped != ops->n || n_params != 2 * ops->n)
    return false;
  prog->n_steps = (uint32_t)ops->n;
  for (size_t i = 0; i < ops->n; i++)
    if (!decode_step(c, ops->strings[i], operand[i], swapped[i], &params[2 * i],
                     &prog->op[i]))
      return false;
  return true;
}

/* ---- supports and prepare ----------------------------------------------------------- */

static bool chain_supports(const nr_tactic_ctx *c) {
  const nr_slot *y = nr_step_out(c, 0), *in[NR_BC_MAX_IN];
  int n_in = c->step->n_in;
  if (!c->node || strcmp(c->node->op_type, "EltwiseChain") || c->step->n_out != 1 || !y ||
      y->dtype != NR_DTYPE_FLOAT || n_in < 1 || n_in > NR_BC_MAX_IN)
    return false;
  for (int i = 0; i < n_in; i++) {
    in[i] = nr_step_in(c, i);
    if (!in[i] || in[i]->dtype != NR_DTYPE_FLOAT)
      return false;
  }
  chain_prog prog;
  nr_bc_geom g;
  return decode(c, &prog) && nr_bc_build(&g, y, n_in, in);
}

static nr_status chain_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  chain_prog prog;
  if (!decode(c, &prog))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: chain no longer decodes",
                     step->tactic->id);
  prog.math = nr_route_is(c->route, NR_KNOB_ELTWISE_MATH, NULL, "fast") ? NR_VMATH_FAST
                                                                        : NR_VMATH_ACCURATE;
  uint64_t size = offsetof(chain_prog, op) + sizeof(chain_op) * prog.n_steps;
  step->packed_size = size;
  return nr_plan_add_weights(plan, &prog, size, &step->packed_offset, c->err);
}

/* ---- the tile loop ------------------------------------------------------------------ */

static float extra1(uint8_t code, float x, float a) {
  switch ((chain_extra)code) {
  case CX_LOG: return logf(x);
  case CX_RECIP: return 1.0f / x;
  case CX_FLOOR: return floorf(x);
  case CX_CEIL: return ceilf(x);
  case CX_SOFTPLUS: return log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f);
  case CX_ELU: return x >= 0 ? x : a * (expf(x) - 1.0f);
  case CX_SQUARE: return x * x;
  case CX_CUBE: return x * x * x;
  default: return x;
  }
}

static float extra2(uint8_t code, float x, float y) {
  switch ((chain_extra)code) {
  case CX_POW: return powf(x, y);
  case CX_MAX: return fmaxf(x, y);
  case CX_MIN: return fminf(x, y);
  case CX_PRELU: return x < 0 ? y * x : x;
  default: return x;
  }
}

/* v[i] = v[i] OP b[i * sb] (or b OP v when swapped) for the chain-only binary ops. */
static void extra_binary(const chain_op *o, float *v, const float *b, int sb, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    float y = b[i * sb];
    v[i] = o->swapped ? extra2(o->code, y, v[i]) : extra2(o->code, v[i], y);
  }
}

typedef struct chain_job {
  const chain_prog *p;
  bool avx2;
  const float *in[NR_BC_MAX_IN];
  float *y;
  nr_bc_geom g;
} chain_job;

static void run_step(const chain_job *j, const chain_op *o, const int64_t *off, int64_t at,
                     float *v, int64_t n) {
  if (o->kind == CK_UNARY) {
    nr_ewu_params p = {o->code, (uint8_t)j->p->math, {0}, o->a, o->b};
    (j->avx2 ? nr_f32_vunary__avx2 : nr_f32_vunary__portable)(&p, v, v, n);
    return;
  }
  if (!is_binary(o)) {
    for (int64_t i = 0; i < n; i++)
      v[i] = extra1(o->code, v[i], o->a);
    return;
  }
  int sb = j->g.rs[o->operand];
  const float *b = j->in[o->operand] + off[o->operand] + at * sb;
  if (o->kind == CK_EXTRA)
    extra_binary(o, v, b, sb, n);
  else if (o->swapped)
    (j->avx2 ? nr_f32_vbinary__avx2 : nr_f32_vbinary__portable)(o->code, b, sb, v, 1, v, n);
  else
    (j->avx2 ? nr_f32_vbinary__avx2 : nr_f32_vbinary__portable)(o->code, v, 1, b, sb, v, n);
}

/* One broadcast run (or piece): tile by tile, X0 in, every step, the tile out. */
static void chain_span(void *arg, const int64_t *off, int64_t out_off, int64_t len) {
  const chain_job *j = arg;
  float v[TILE];
  for (int64_t at = 0; at < len; at += TILE) {
    int64_t n = len - at < TILE ? len - at : TILE;
    const float *x = j->in[0] + off[0];
    if (j->g.rs[0])
      memcpy(v, x + at, sizeof(float) * (size_t)n);
    else
      for (int64_t i = 0; i < n; i++)
        v[i] = x[0];
    for (uint32_t s = 0; s < j->p->n_steps; s++)
      run_step(j, &j->p->op[s], off, at, v, n);
    memcpy(j->y + out_off + at, v, sizeof(float) * (size_t)n);
  }
}

static void chain_task(void *arg, int64_t begin, int64_t end, int thread) {
  chain_job *j = arg;
  nr_bc_walk(&j->g, begin, end, chain_span, j);
}

/* The packed program, checked against the step before use (it comes from a file). */
static const chain_prog *packed_prog(const nr_exec_args *a) {
  const chain_prog *p = a->packed;
  if (!p || a->step->packed_size < offsetof(chain_prog, op) || !p->n_steps ||
      p->n_steps > CHAIN_MAX_STEPS ||
      a->step->packed_size != offsetof(chain_prog, op) + sizeof(chain_op) * p->n_steps)
    return NULL;
  for (uint32_t s = 0; s < p->n_steps; s++) {
    const chain_op *o = &p->op[s];
    bool ok = o->kind == CK_UNARY ? o->code < NR_EWU_COUNT
            : o->kind == CK_BINARY ? o->code <= NR_EWB_DIV
                                   : o->kind == CK_EXTRA && o->code <= CX_CUBE;
    if (!ok || (is_binary(o) ? o->operand < 0 || o->operand >= a->step->n_in
                             : o->operand != -1))
      return NULL;
  }
  return p;
}

static nr_status chain_run(const nr_exec_args *a) {
  chain_job j = {.p = packed_prog(a), .avx2 = (a->step->tactic->isa & NR_ISA_AVX2) != 0,
                 .y = a->out[0]};
  const nr_slot *in[NR_BC_MAX_IN];
  int n_in = a->step->n_in;
  if (!j.p || n_in > NR_BC_MAX_IN)
    return nr_errorf(a->err, NR_ERR_INVALID_MODEL, "%s: bad chain program",
                     a->step->tactic->id);
  for (int i = 0; i < n_in; i++) {
    in[i] = a->in_slot[i];
    j.in[i] = a->in[i];
  }
  if (!nr_bc_build(&j.g, a->out_slot[0], n_in, in))
    return nr_errorf(a->err, NR_ERR_SHAPE, "%s: shapes do not broadcast",
                     a->step->tactic->id);
  if (j.g.count < 2 * GRAIN)
    chain_task(&j, 0, j.g.count, 0);
  else
    nr_parallel_for(a->pool, j.g.count, GRAIN, a->step->threads, chain_task, &j);
  return NR_OK;
}

const nr_tactic nr_tactics_cpu_eltwise_chain[] = {
    {"nr_f32_vchain__avx2", NR_DOMAIN, "EltwiseChain", "nnroute", "vector", NR_LAYOUT_PLAIN,
     NR_ISA_AVX2, 20, chain_supports, chain_prepare, chain_run},
    {"nr_f32_vchain__portable", NR_DOMAIN, "EltwiseChain", "nnroute", "vector",
     NR_LAYOUT_PLAIN, 0, 10, chain_supports, chain_prepare, chain_run},
    {0},
};
