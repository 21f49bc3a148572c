/* ops_fused.c - reference implementations of the "nnroute" domain's fused operators
 * (fused.h), so that a graph the passes rewrote still runs on the reference executor
 * and can be compared with the original.
 *
 * Key decision: a fused op is its base operator plus an epilogue. FusedConv, FusedGemm
 * and FusedMatMul call the registered Conv / Gemm / MatMul rows (shape rule and
 * kernel) on a shadow of the node that names the base op at a current opset, then add
 * Bias and R with broadcasting and apply the activation in place. No convolution or
 * matrix product is written twice, so a fused op can only differ from the unfused
 * graph by the rounding of the epilogue.
 *
 * nnroute.EltwiseChain encoding (opset 1). Inputs: X0 (the value flowing through the
 * chain) and side operands X1..Xk (k <= 7; constants or tensors that broadcast).
 * Attributes, one entry per step, in evaluation order:
 *   ops      STRINGS  the ONNX op type of the step: binary Add Sub Mul Div Pow Max Min
 *                     PRelu; unary Relu Sigmoid Tanh Exp Log Erf Sqrt Neg Abs
 *                     Reciprocal Floor Ceil Softplus HardSwish; with parameters Clip
 *                     (p0 = min, p1 = max), LeakyRelu (p0 = alpha), Elu (p0 = alpha),
 *                     HardSigmoid (p0 = alpha, p1 = beta), Gelu (p0 = 0 exact, 1 tanh)
 *   operand  INTS     the input index (0..k) of a binary step's other operand; -1 for
 *                     unary steps. Index 0 is X0 itself (x * sigmoid(x) reads it).
 *   swapped  INTS     1 when the running value is the right-hand operand
 *                     (c = operand OP value, e.g. 1 - x), else 0
 *   params   FLOATS   two per step (p0, p1 above), 0 where unused
 * Y has X0's dtype and the broadcast shape of all inputs; every element is computed
 * op by op in float, reading each operand at its broadcast position, which equals
 * evaluating the unfused ops one tensor at a time. */
#include "ir/act.h"
#include "ir/fused.h"
#include "ir/op.h"
#include "kernels/ref/ref_util.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the base operator on a shadow node ------------------------------------------- */

typedef enum { BASE_INFER, BASE_RUN } base_phase;

/* Calls op_type's row (opset `since`) on the first n_in inputs of ctx; the node seen
 * by the base kernel is ctx's node with the base op's identity. */
static nr_status base_call(nr_op_ctx *ctx, const char *op_type, int opset, int n_in,
                           base_phase phase) {
  const nr_op_def *def = nr_op_find("", op_type, opset);
  if (!def)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "base operator %s is not registered", op_type);
  nr_node shadow = *ctx->node;
  shadow.op_type = (char *)op_type;
  shadow.domain = "";
  shadow.opset = opset;
  shadow.def = def;
  nr_op_ctx sub = *ctx;
  sub.node = &shadow;
  sub.n_inputs = ctx->n_inputs < n_in ? ctx->n_inputs : n_in;
  sub.n_outputs = 1;
  nr_op_fn fn = phase == BASE_INFER ? def->infer : def->run;
  return fn ? fn(&sub) : NR_OK;
}

/* ---- epilogue: + Bias + R, activation ------------------------------------------- */

static nr_status read_act(nr_op_ctx *ctx, nr_act *act, float *a, float *b) {
  const char *name = nr_attr_string(ctx->node, "activation", "none");
  if (!nr_act_from_name(name, act))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "unknown activation '%s'", name);
  float da = 0, db = 0;
  if (*act == NR_ACT_CLIP) {
    da = -FLT_MAX;
    db = FLT_MAX;
  } else if (*act == NR_ACT_LEAKY_RELU) {
    da = 0.01f;
  } else if (*act == NR_ACT_HARD_SIGMOID) {
    da = 0.2f;
    db = 0.5f;
  }
  *a = nr_attr_float(ctx->node, "act_alpha", da);
  *b = nr_attr_float(ctx->node, "act_beta", db);
  return NR_OK;
}

/* Input i (Bias or R) must have y's dtype and broadcast to y's shape. */
static nr_status check_addend(nr_op_ctx *ctx, int i, const char *what) {
  const nr_value *v = nr_op_in(ctx, i), *y = nr_op_out(ctx, 0);
  if (!v || !y || y->rank < 0 || v->rank < 0)
    return NR_OK;
  if (v->dtype != NR_DTYPE_UNDEFINED && y->dtype != NR_DTYPE_UNDEFINED &&
      v->dtype != y->dtype)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must have the output's dtype", what);
  if (v->rank > y->rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s has rank %d, the output %d", what, v->rank,
                      y->rank);
  for (int d = v->rank - 1, e = y->rank - 1; d >= 0; d--, e--)
    if (v->dims[d] != 1 && v->dims[d] >= 0 && y->dims[e] >= 0 && v->dims[d] != y->dims[e])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "%s does not broadcast to the output", what);
  return NR_OK;
}

static void add_into(nr_value *y, const nr_value *v) {
  nr_bcast it;
  nr_bcast_init(&it, y, 1, (const nr_value *const[]){v});
  if (y->dtype == NR_DTYPE_FLOAT) {
    float *py = y->data;
    const float *pv = v->data;
    for (int64_t i = 0; i < it.count; i++, nr_bcast_next(&it))
      py[i] += pv[it.off[0]];
    return;
  }
  for (int64_t i = 0; i < it.count; i++, nr_bcast_next(&it))
    nr_store_f64(y->dtype, y->data, i,
                 nr_load_f64(y->dtype, y->data, i) + nr_load_f64(v->dtype, v->data, it.off[0]));
}

/* Adds inputs first..last (those present) into output 0, then the activation. */
static nr_status epilogue(nr_op_ctx *ctx, int first, int last) {
  nr_value *y = nr_op_out(ctx, 0);
  nr_act act;
  float a, b;
  nr_status st = read_act(ctx, &act, &a, &b);
  if (st || !y)
    return st;
  for (int i = first; i <= last; i++)
    if (nr_op_in(ctx, i))
      add_into(y, nr_op_in(ctx, i));
  int64_t n = nr_value_count(y);
  if (y->dtype == NR_DTYPE_FLOAT) {
    nr_act_apply_ref(act, a, b, y->data, n);
    return NR_OK;
  }
  for (int64_t i = 0; i < n && act != NR_ACT_NONE; i++) {
    float f = (float)nr_load_f64(y->dtype, y->data, i);
    nr_act_apply_ref(act, a, b, &f, 1);
    nr_store_f64(y->dtype, y->data, i, f);
  }
  return NR_OK;
}

static nr_status fused_infer(nr_op_ctx *ctx, const char *base, int opset, int n_base) {
  nr_status st = nr_op_check_arity(ctx, 2, n_base + (n_base == 2 ? 2 : 1));
  nr_act act;
  float a, b;
  if (!st)
    st = read_act(ctx, &act, &a, &b);
  if (!st)
    st = base_call(ctx, base, opset, n_base, BASE_INFER);
  for (int i = n_base; !st && i < ctx->n_inputs; i++)
    st = check_addend(ctx, i, i == n_base && n_base == 2 ? "Bias" : "R");
  return st;
}

static nr_status fused_conv_infer(nr_op_ctx *ctx) { return fused_infer(ctx, "Conv", 11, 3); }
static nr_status fused_gemm_infer(nr_op_ctx *ctx) { return fused_infer(ctx, "Gemm", 13, 3); }
static nr_status fused_matmul_infer(nr_op_ctx *ctx) {
  return fused_infer(ctx, "MatMul", 13, 2);
}

static nr_status fused_conv_run(nr_op_ctx *ctx) {
  nr_status st = base_call(ctx, "Conv", 11, 3, BASE_RUN);
  return st ? st : epilogue(ctx, 3, 3);
}

static nr_status fused_gemm_run(nr_op_ctx *ctx) {
  nr_status st = base_call(ctx, "Gemm", 13, 3, BASE_RUN);
  return st ? st : epilogue(ctx, 3, 3);
}

static nr_status fused_matmul_run(nr_op_ctx *ctx) {
  nr_status st = base_call(ctx, "MatMul", 13, 2, BASE_RUN);
  return st ? st : epilogue(ctx, 2, 3);
}

/* ---- EltwiseChain ----------------------------------------------------------------- */

typedef enum step_code {
  S_ADD, S_SUB, S_MUL, S_DIV, S_POW, S_MAX, S_MIN, S_PRELU, /* binary */
  S_RELU, S_SIGMOID, S_TANH, S_EXP, S_LOG, S_ERF, S_SQRT, S_NEG, S_ABS, S_RECIP,
  S_FLOOR, S_CEIL, S_SOFTPLUS, S_HARDSWISH, S_CLIP, S_LEAKY, S_ELU, S_HARDSIG, S_GELU,
  S_COUNT,
} step_code;

static const char *const step_names[S_COUNT] = {
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu",
    "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Erf", "Sqrt", "Neg", "Abs", "Reciprocal",
    "Floor", "Ceil", "Softplus", "HardSwish", "Clip", "LeakyRelu", "Elu", "HardSigmoid",
    "Gelu",
};

#define CHAIN_MAX_STEPS 64

typedef struct chain_step {
  step_code code;
  int operand;
  bool swapped;
  float p0, p1;
} chain_step;

static float binary(step_code c, float x, float y) {
  switch (c) {
  case S_ADD: return x + y;
  case S_SUB: return x - y;
  case S_MUL: return x * y;
  case S_DIV: return x / y;
  case S_POW: return powf(x, y);
  case S_MAX: return fmaxf(x, y);
  case S_MIN: return fminf(x, y);
  case S_PRELU: return x < 0 ? y * x : x;
  default: return x;
  }
}

static float unary(const chain_step *s, float x) {
  switch (s->code) {
  case S_RELU: return x > 0 ? x : 0;
  case S_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case S_TANH: return tanhf(x);
  case S_EXP: return expf(x);
  case S_LOG: return logf(x);
  case S_ERF: return erff(x);
  case S_SQRT: return sqrtf(x);
  case S_NEG: return -x;
  case S_ABS: return fabsf(x);
  case S_RECIP: return 1.0f / x;
  case S_FLOOR: return floorf(x);
  case S_CEIL: return ceilf(x);
  case S_SOFTPLUS: return log1pf(expf(-fabsf(x))) + fmaxf(x, 0.0f);
  case S_HARDSWISH: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
  case S_CLIP: return x < s->p0 ? s->p0 : x > s->p1 ? s->p1 : x;
  case S_LEAKY: return x >= 0 ? x : s->p0 * x;
  case S_ELU: return x >= 0 ? x : s->p0 * (expf(x) - 1.0f);
  case S_HARDSIG: return fmaxf(0.0f, fminf(1.0f, s->p0 * x + s->p1));
  case S_GELU:
    if (s->p0 != 0)
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  default: return x;
  }
}

static nr_status chain_step_read(nr_op_ctx *ctx, int i, const char *name, int64_t operand,
                                 int64_t swapped, chain_step *s) {
  int c = 0;
  while (c < S_COUNT && strcmp(step_names[c], name))
    c++;
  if (c == S_COUNT)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "step %d: op '%s' cannot be chained", i, name);
  s->code = (step_code)c;
  s->operand = (int)operand;
  s->swapped = swapped != 0;
  bool is_binary = c <= S_PRELU;
  if (is_binary != (operand >= 0) || operand >= ctx->n_inputs ||
      (operand >= 0 && !nr_op_in(ctx, (int)operand)))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "step %d (%s): bad operand %lld", i, name,
                      (long long)operand);
  return NR_OK;
}

/* Decodes the attributes into steps (at most CHAIN_MAX_STEPS). */
static nr_status chain_read(nr_op_ctx *ctx, chain_step *steps, int *n_steps) {
  const nr_attr *ops = nr_node_attr(ctx->node, "ops");
  size_t n_operand, n_swapped, n_params;
  const int64_t *operand = nr_attr_ints(ctx->node, "operand", &n_operand);
  const int64_t *swapped = nr_attr_ints(ctx->node, "swapped", &n_swapped);
  const float *params = nr_attr_floats(ctx->node, "params", &n_params);
  if (!ops || ops->type != NR_ATTR_STRINGS || ops->n == 0 || ops->n > CHAIN_MAX_STEPS ||
      n_operand != ops->n || n_swapped != ops->n || n_params != 2 * ops->n)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "needs 1..%d steps and ops, operand, swapped (one each) and params "
                      "(two each)", CHAIN_MAX_STEPS);
  for (size_t i = 0; i < ops->n; i++) {
    nr_status st = chain_step_read(ctx, (int)i, ops->strings[i], operand[i], swapped[i],
                                   &steps[i]);
    if (st)
      return st;
    steps[i].p0 = params[2 * i];
    steps[i].p1 = params[2 * i + 1];
  }
  *n_steps = (int)ops->n;
  return NR_OK;
}

static nr_status chain_infer(nr_op_ctx *ctx) {
  chain_step steps[CHAIN_MAX_STEPS];
  int n_steps;
  nr_status st = nr_op_check_arity(ctx, 1, NR_BCAST_MAX);
  if (!st)
    st = chain_read(ctx, steps, &n_steps);
  const nr_value *x = nr_op_in(ctx, 0);
  if (st)
    return st;
  if (x->dtype != NR_DTYPE_UNDEFINED && !nr_dtype_is_float(x->dtype))
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "X0 must be a float tensor");
  nr_value shape = *x;
  for (int i = 1; i < ctx->n_inputs && shape.rank >= 0; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    if (!v)
      continue;
    if (v->rank < 0) {
      shape.rank = -1;
      break;
    }
    if ((st = nr_op_broadcast(ctx, &shape, v, &shape.rank, shape.dims)))
      return st;
  }
  return nr_op_set_output(ctx, 0, x->dtype, shape.rank, shape.dims);
}

static float chain_eval(const chain_step *steps, int n_steps, const float *operands) {
  float v = operands[0];
  for (int s = 0; s < n_steps; s++) {
    const chain_step *st = &steps[s];
    if (st->operand < 0)
      v = unary(st, v);
    else if (st->swapped)
      v = binary(st->code, operands[st->operand], v);
    else
      v = binary(st->code, v, operands[st->operand]);
  }
  return v;
}

static nr_status chain_run(nr_op_ctx *ctx) {
  chain_step steps[CHAIN_MAX_STEPS];
  int n_steps;
  nr_status st = chain_read(ctx, steps, &n_steps);
  if (st)
    return st;
  nr_value *y = nr_op_out(ctx, 0);
  const nr_value *ins[NR_BCAST_MAX];
  nr_value empty = {.rank = 0};
  for (int i = 0; i < ctx->n_inputs; i++)
    ins[i] = nr_op_in(ctx, i) ? nr_op_in(ctx, i) : &empty;
  nr_bcast it;
  nr_bcast_init(&it, y, ctx->n_inputs, ins);
  float operands[NR_BCAST_MAX];
  for (int64_t i = 0; i < it.count; i++, nr_bcast_next(&it)) {
    for (int k = 0; k < ctx->n_inputs; k++)
      operands[k] = ins[k]->data ? (ins[k]->dtype == NR_DTYPE_FLOAT
                                        ? ((const float *)ins[k]->data)[it.off[k]]
                                        : (float)nr_load_f64(ins[k]->dtype, ins[k]->data,
                                                             it.off[k]))
                                 : 0.0f;
    float v = chain_eval(steps, n_steps, operands);
    if (y->dtype == NR_DTYPE_FLOAT)
      ((float *)y->data)[i] = v;
    else
      nr_store_f64(y->dtype, y->data, i, v);
  }
  return NR_OK;
}

const nr_op_def nr_ref_ops_fused[] = {
    {NR_DOMAIN, "FusedConv", 1, fused_conv_infer, fused_conv_run, 0},
    {NR_DOMAIN, "FusedGemm", 1, fused_gemm_infer, fused_gemm_run, 0},
    {NR_DOMAIN, "FusedMatMul", 1, fused_matmul_infer, fused_matmul_run, 0},
    {NR_DOMAIN, "EltwiseChain", 1, chain_infer, chain_run, 0},
    {0},
};
