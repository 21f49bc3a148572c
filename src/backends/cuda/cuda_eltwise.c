/* cuda_eltwise.c - elementwise tactics on the GPU: unary activations, broadcasting
 * binary ops and nnroute.EltwiseChain, all as programs of the one elementwise kernel
 * (kernels_eltwise.cu); plus the epilogue programs the GEMM and convolution tactics
 * append (bias, residual, activation, fp16 -> fp32).
 *
 * Key decision: a node becomes a program (op codes, operand indices, two float
 * parameters per step) and a broadcast layout (merged dims, per-operand strides),
 * built on the step's first run from the node and its slots and cached per context,
 * so the plan stores nothing beyond the node and a later run does no host work but
 * the launch. The rows are NR_LAYOUT_ANY: the layout pass gives them a non-plain
 * layout only when every operand has the output's shape, and then the program is one
 * flat pass over the physical bytes, whatever the layout. nr_cuda_f32_eltwise reads
 * and writes fp32; nr_cuda_f16_eltwise (fp16 precision, so select never picks it:
 * the fp16 pass, cuda_half.c, moves a step onto it) takes each operand and the
 * output in fp32 or fp16 as the slots say, a bit each in the program. */
#include "backends/cuda/cuda_internal.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* ---- broadcast layouts ------------------------------------------------------------------- */

bool nr_cuda_ew_layout(nr_cuda_ew_prog *p, int rank, const int64_t *ydims, int n_ops,
                       const int *op_rank, const int64_t (*op_dims)[NR_MAX_RANK]) {
  int64_t st[NR_CUDA_EW_MAX_OPS][NR_MAX_RANK];
  if (n_ops > NR_CUDA_EW_MAX_OPS || rank > NR_MAX_RANK)
    return false;
  p->n_ops = n_ops;
  p->n = 1;
  for (int d = 0; d < rank; d++)
    p->n *= ydims[d];
  for (int k = 0; k < n_ops; k++) { /* numpy: align trailing dims */
    int64_t s = 1;
    if (op_rank[k] > rank)
      return false;
    for (int d = rank - 1, e = op_rank[k] - 1; d >= 0; d--, e--) {
      int64_t od = e >= 0 ? op_dims[k][e] : 1;
      if (od != 1 && od != ydims[d])
        return false;
      st[k][d] = od == 1 ? 0 : s;
      s *= od;
    }
  }
  int r = 0; /* merge: drop size-1 dims, join d into the previous when all agree */
  for (int d = 0; d < rank; d++) {
    if (ydims[d] == 1)
      continue;
    bool join = r > 0;
    for (int k = 0; join && k < n_ops; k++)
      join = p->stride[k][r - 1] == st[k][d] * ydims[d];
    if (join) {
      p->dims[r - 1] *= ydims[d];
      for (int k = 0; k < n_ops; k++)
        p->stride[k][r - 1] = st[k][d];
      continue;
    }
    if (r == NR_CUDA_EW_MAX_DIMS)
      return false;
    p->dims[r] = ydims[d];
    for (int k = 0; k < n_ops; k++)
      p->stride[k][r] = st[k][d];
    r++;
  }
  if (r == 0) {
    p->dims[0] = 1;
    for (int k = 0; k < n_ops; k++)
      p->stride[k][0] = 1;
    r = 1;
  }
  p->rank = r;
  return true;
}

void nr_cuda_ew_set_strides(nr_cuda_ew_prog *p, int i, const int64_t *strides) {
  for (int d = 0; d < p->rank; d++)
    p->stride[i][d] = strides[d];
}

uint8_t nr_cuda_ew_act(nr_act act) {
  switch (act) {
  case NR_ACT_RELU: return NR_EW_RELU;
  case NR_ACT_CLIP: return NR_EW_CLIP;
  case NR_ACT_LEAKY_RELU: return NR_EW_LEAKY_RELU;
  case NR_ACT_SIGMOID: return NR_EW_SIGMOID;
  case NR_ACT_HARD_SIGMOID: return NR_EW_HARD_SIGMOID;
  case NR_ACT_HARD_SWISH: return NR_EW_HARD_SWISH;
  case NR_ACT_TANH: return NR_EW_TANH;
  case NR_ACT_SILU: return NR_EW_SILU;
  case NR_ACT_GELU: return NR_EW_GELU;
  case NR_ACT_GELU_TANH: return NR_EW_GELU_TANH;
  default: return NR_EW_IDENTITY;
  }
}

/* ---- programs from nodes -------------------------------------------------------------- */

static const struct {
  const char *op;
  uint8_t code;
  float p0, p1; /* attribute defaults */
  const char *a0, *a1;
} unary_ops[] = {
    {"Relu", NR_EW_RELU, 0, 0, NULL, NULL},
    {"Sigmoid", NR_EW_SIGMOID, 0, 0, NULL, NULL},
    {"Tanh", NR_EW_TANH, 0, 0, NULL, NULL},
    {"Exp", NR_EW_EXP, 0, 0, NULL, NULL},
    {"Log", NR_EW_LOG, 0, 0, NULL, NULL},
    {"Erf", NR_EW_ERF, 0, 0, NULL, NULL},
    {"Sqrt", NR_EW_SQRT, 0, 0, NULL, NULL},
    {"Neg", NR_EW_NEG, 0, 0, NULL, NULL},
    {"Abs", NR_EW_ABS, 0, 0, NULL, NULL},
    {"Reciprocal", NR_EW_RECIPROCAL, 0, 0, NULL, NULL},
    {"Floor", NR_EW_FLOOR, 0, 0, NULL, NULL},
    {"Ceil", NR_EW_CEIL, 0, 0, NULL, NULL},
    {"Softplus", NR_EW_SOFTPLUS, 0, 0, NULL, NULL},
    {"HardSwish", NR_EW_HARD_SWISH, 0, 0, NULL, NULL},
    {"LeakyRelu", NR_EW_LEAKY_RELU, 0.01f, 0, "alpha", NULL},
    {"Elu", NR_EW_ELU, 1.0f, 0, "alpha", NULL},
    {"Selu", NR_EW_SELU, 1.67326319217681884765625f, 1.05070102214813232421875f, "alpha",
     "gamma"},
    {"HardSigmoid", NR_EW_HARD_SIGMOID, 0.2f, 0.5f, "alpha", "beta"},
    {"Identity", NR_EW_IDENTITY, 0, 0, NULL, NULL},
};

static const struct {
  const char *op;
  uint8_t code;
} binary_ops[] = {
    {"Add", NR_EW_ADD}, {"Sub", NR_EW_SUB}, {"Mul", NR_EW_MUL}, {"Div", NR_EW_DIV},
    {"Pow", NR_EW_POW}, {"Max", NR_EW_MAX}, {"Min", NR_EW_MIN}, {"PRelu", NR_EW_PRELU},
};

/* EltwiseChain step names, in the order of ops_fused.c's encoding. */
static const struct {
  const char *op;
  uint8_t code;
} chain_ops[] = {
    {"Add", NR_EW_ADD}, {"Sub", NR_EW_SUB}, {"Mul", NR_EW_MUL}, {"Div", NR_EW_DIV},
    {"Pow", NR_EW_POW}, {"Max", NR_EW_MAX}, {"Min", NR_EW_MIN}, {"PRelu", NR_EW_PRELU},
    {"Relu", NR_EW_RELU}, {"Sigmoid", NR_EW_SIGMOID}, {"Tanh", NR_EW_TANH},
    {"Exp", NR_EW_EXP}, {"Log", NR_EW_LOG}, {"Erf", NR_EW_ERF}, {"Sqrt", NR_EW_SQRT},
    {"Neg", NR_EW_NEG}, {"Abs", NR_EW_ABS}, {"Reciprocal", NR_EW_RECIPROCAL},
    {"Floor", NR_EW_FLOOR}, {"Ceil", NR_EW_CEIL}, {"Softplus", NR_EW_SOFTPLUS},
    {"HardSwish", NR_EW_HARD_SWISH}, {"Clip", NR_EW_CLIP}, {"LeakyRelu", NR_EW_LEAKY_RELU},
    {"Elu", NR_EW_ELU}, {"HardSigmoid", NR_EW_HARD_SIGMOID}, {"Gelu", NR_EW_GELU},
};

/* Clip's bounds: attributes before opset 11, optional constant scalar inputs after. */
static bool clip_bounds(const nr_node *n, const nr_slot *const *in_slot, int n_in,
                        const void *const *consts, float *lo, float *hi) {
  *lo = -FLT_MAX;
  *hi = FLT_MAX;
  if (n->opset < 11) {
    *lo = nr_attr_float(n, "min", -FLT_MAX);
    *hi = nr_attr_float(n, "max", FLT_MAX);
    return true;
  }
  for (int i = 1; i < 3 && i < n_in; i++) {
    if (!in_slot[i])
      continue;
    if (!consts[i] || in_slot[i]->dtype != NR_DTYPE_FLOAT || in_slot[i]->nbytes < 4)
      return false;
    float v;
    memcpy(&v, consts[i], 4);
    *(i == 1 ? lo : hi) = v;
  }
  return true;
}

/* The steps of node n; false when it is not an op these tactics run. consts[i] is
 * the build-time data of constant input i (NULL otherwise). */
static bool node_steps(const nr_node *n, const nr_slot *const *in_slot, int n_in,
                       const void *const *consts, nr_cuda_ew_prog *p) {
  p->n_steps = 1;
  nr_cuda_ew_step *s = &p->step[0];
  memset(s, 0, sizeof *s);
  s->operand = -1;
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
    if (!strcmp(n->op_type, unary_ops[i].op)) {
      s->op = unary_ops[i].code;
      s->p0 = unary_ops[i].a0 ? nr_attr_float(n, unary_ops[i].a0, unary_ops[i].p0) : 0;
      s->p1 = unary_ops[i].a1 ? nr_attr_float(n, unary_ops[i].a1, unary_ops[i].p1) : 0;
      return n_in == 1;
    }
  if (!strcmp(n->op_type, "Gelu")) {
    s->op = strcmp(nr_attr_string(n, "approximate", "none"), "tanh") ? NR_EW_GELU
                                                                      : NR_EW_GELU_TANH;
    return n_in == 1;
  }
  if (!strcmp(n->op_type, "Clip")) {
    s->op = NR_EW_CLIP;
    return clip_bounds(n, in_slot, n_in, consts, &s->p0, &s->p1);
  }
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
    if (!strcmp(n->op_type, binary_ops[i].op)) {
      s->op = binary_ops[i].code;
      s->operand = 1;
      return n_in == 2 && in_slot[0] && in_slot[1];
    }
  return false;
}

static bool chain_steps(const nr_node *n, int n_in, nr_cuda_ew_prog *p) {
  const nr_attr *ops = nr_node_attr(n, "ops");
  size_t n_operand, n_swapped, n_params;
  const int64_t *operand = nr_attr_ints(n, "operand", &n_operand);
  const int64_t *swapped = nr_attr_ints(n, "swapped", &n_swapped);
  const float *params = nr_attr_floats(n, "params", &n_params);
  if (!ops || ops->type != NR_ATTR_STRINGS || !ops->n || ops->n > NR_CUDA_EW_MAX_STEPS ||
      n_operand != ops->n || n_swapped != ops->n || n_params != 2 * ops->n)
    return false;
  p->n_steps = (int)ops->n;
  for (size_t i = 0; i < ops->n; i++) {
    nr_cuda_ew_step *s = &p->step[i];
    size_t c = 0;
    while (c < sizeof chain_ops / sizeof chain_ops[0] && strcmp(chain_ops[c].op, ops->strings[i]))
      c++;
    if (c == sizeof chain_ops / sizeof chain_ops[0] || operand[i] >= n_in)
      return false;
    s->op = chain_ops[c].code;
    if (s->op == NR_EW_GELU && params[2 * i] != 0)
      s->op = NR_EW_GELU_TANH;
    s->operand = (int8_t)operand[i];
    s->swapped = swapped[i] != 0;
    s->p0 = params[2 * i];
    s->p1 = params[2 * i + 1];
    if ((s->op < NR_EW_RELU) != (operand[i] >= 0))
      return false;
  }
  return true;
}

static bool is_chain(const nr_node *n) {
  return !strcmp(n->op_type, "EltwiseChain") && n->domain && !strcmp(n->domain, "nnroute");
}

static bool float_slot(const nr_slot *s, bool half) {
  return s && (s->dtype == NR_DTYPE_FLOAT || (half && s->dtype == NR_DTYPE_FLOAT16));
}

static int64_t elems(const nr_slot *s) {
  int64_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= s->dims[d];
  return n;
}

/* The whole program of a step from its node and slots. Operands: the node's present
 * inputs that the steps read (for Clip only X). half: operands and output may be
 * fp16 (the fp16 rows). */
static bool build_prog(const nr_node *n, const nr_step *st, const nr_slot *const *in_slot,
                       const nr_slot *const *out_slot, const void *const *consts, bool half,
                       nr_cuda_ew_prog *p) {
  const nr_slot *y = st->n_out == 1 ? out_slot[0] : NULL;
  memset(p, 0, sizeof *p);
  if (!n || !float_slot(y, half) || !in_slot[0])
    return false;
  bool ok = is_chain(n) ? chain_steps(n, st->n_in, p)
                        : node_steps(n, in_slot, st->n_in, consts, p);
  int n_ops = !strcmp(n->op_type, "Clip") ? 1 : st->n_in;
  int ranks[NR_CUDA_EW_MAX_OPS];
  int64_t dims[NR_CUDA_EW_MAX_OPS][NR_MAX_RANK];
  bool same = true;
  for (int k = 0; ok && k < n_ops; k++) {
    const nr_slot *s = in_slot[k];
    ok = k < NR_CUDA_EW_MAX_OPS && float_slot(s, half);
    if (!ok)
      break;
    ranks[k] = s->rank;
    memcpy(dims[k], s->dims, sizeof dims[k]);
    same = same && elems(s) == elems(y) && s->layout == y->layout &&
           s->nbytes / nr_dtype_size(s->dtype) == y->nbytes / nr_dtype_size(y->dtype);
    p->half_mask |= (uint8_t)((s->dtype == NR_DTYPE_FLOAT16) << k);
  }
  p->y_half = y->dtype == NR_DTYPE_FLOAT16;
  if (!ok)
    return false;
  if (y->layout != NR_LAYOUT_PLAIN) { /* same shapes only: one flat pass */
    int64_t flat = (int64_t)(y->nbytes / nr_dtype_size(y->dtype));
    for (int k = 0; k < n_ops; k++)
      ranks[k] = 1, dims[k][0] = flat;
    return same && nr_cuda_ew_layout(p, 1, &flat, n_ops, ranks, (const void *)dims);
  }
  for (int k = 0; k < n_ops; k++)
    if (in_slot[k]->layout != NR_LAYOUT_PLAIN)
      return false;
  return nr_cuda_ew_layout(p, y->rank, y->dims, n_ops, ranks, (const void *)dims);
}

/* ---- the tactic functions --------------------------------------------------------------- */

static bool supports_prec(const nr_tactic_ctx *c, bool half) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  const void *consts[NR_STEP_MAX_IO];
  if (!c->node || c->step->n_in > NR_CUDA_EW_MAX_OPS)
    return false;
  for (int i = 0; i < c->step->n_in; i++) {
    in[i] = nr_step_in(c, i);
    consts[i] = nr_step_const(c, i);
  }
  for (int o = 0; o < c->step->n_out; o++)
    out[o] = nr_step_out(c, o);
  nr_cuda_ew_prog p;
  return build_prog(c->node, c->step, in, out, consts, half, &p);
}

static bool ew_supports(const nr_tactic_ctx *c) { return supports_prec(c, false); }
static bool ew_supports_f16(const nr_tactic_ctx *c) { return supports_prec(c, true); }

static nr_status ew_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  return NR_OK;
}

/* Clip's constant bounds are read from the plan's host weights at the first run. */
static nr_status ew_run(const nr_exec_args *a) {
  nr_cuda_step_state *ss = nr_cuda_step(a);
  if (!ss->p) {
    const void *consts[NR_STEP_MAX_IO] = {0};
    for (int i = 0; i < a->step->n_in; i++)
      if (a->in_slot[i] && a->in_slot[i]->kind == NR_SLOT_CONST)
        consts[i] = nr_slot_data(a->plan, a->in_slot[i]);
    nr_cuda_ew_prog *p = malloc(sizeof *p);
    if (!p)
      return nr_errorf(a->err, NR_ERR_NOMEM, "out of memory");
    bool half = a->step->tactic->precision == NR_PREC_FP16;
    if (!build_prog(a->node, a->step, a->in_slot, a->out_slot, consts, half, p)) {
      free(p);
      return nr_errorf(a->err, NR_ERR_INTERNAL, "elementwise step no longer supported");
    }
    ss->p = p;
    ss->free_fn = free;
  }
  return nr_cuda_check(nr_cuda_ew_launch(ss->p, (const void *const *)a->in, a->out[0],
                                         nr_cuda_stream(a)),
                       a->err, "elementwise kernel");
}

#define EW(op, dom)                                                                     \
  {"nr_cuda_f32_eltwise", dom, op, "nnroute", "vector", NR_LAYOUT_ANY, 0, 10,           \
   ew_supports, ew_prepare, ew_run, NR_PREC_FP32, NR_DEVICE_CUDA},                        \
  {"nr_cuda_f16_eltwise", dom, op, "nnroute", "vector", NR_LAYOUT_ANY, 0, 10,           \
   ew_supports_f16, ew_prepare, ew_run, NR_PREC_FP16, NR_DEVICE_CUDA},

const nr_tactic nr_tactics_cuda_eltwise[] = {
    EW("Relu", "") EW("Sigmoid", "") EW("Tanh", "") EW("Exp", "") EW("Log", "")
    EW("Erf", "") EW("Sqrt", "") EW("Neg", "") EW("Abs", "") EW("Reciprocal", "")
    EW("Floor", "") EW("Ceil", "") EW("Softplus", "") EW("HardSwish", "")
    EW("LeakyRelu", "") EW("Elu", "") EW("Selu", "") EW("HardSigmoid", "")
    EW("Identity", "") EW("Gelu", "") EW("Clip", "") EW("Add", "") EW("Sub", "")
    EW("Mul", "") EW("Div", "") EW("Pow", "") EW("Max", "") EW("Min", "")
    EW("PRelu", "") EW("EltwiseChain", "nnroute")
    {0},
};

/* ---- epilogues ----------------------------------------------------------------------------- */

nr_status nr_cuda_epilogue(const nr_cuda_epi *e, const void *x, const float *bias,
                           const void *res, void *y, cudaStream_t s, nr_error *err) {
  /* the epilogue kernel; the program kernel only past its 2^31 elements */
  nr_cuda_epi_args ka = {e->outer, e->channels, e->inner, e->x_half != 0, e->y_half != 0,
                         e->res_half != 0, nr_cuda_ew_act(e->act), e->a, e->b};
  cudaError_t ke = nr_cuda_epi_launch(&ka, x, bias, res, y, s);
  if (ke != cudaErrorNotSupported)
    return nr_cuda_check(ke, err, "epilogue kernel");
  nr_cuda_ew_prog p;
  memset(&p, 0, sizeof p);
  p.n = e->outer * e->channels * e->inner;
  /* without a bias every operand is the full tensor: one flat dim, the linear kernel */
  p.rank = bias ? 3 : 1;
  p.dims[0] = bias ? e->outer : p.n, p.dims[1] = e->channels, p.dims[2] = e->inner;
  p.half_mask = (uint8_t)(e->x_half != 0);
  p.y_half = (uint8_t)(e->y_half != 0);
  const void *ops[3] = {x, NULL, NULL};
  int64_t full[3] = {bias ? e->channels * e->inner : 1, e->inner, 1}, chan[3] = {0, 1, 0};
  int n = 1;
  nr_cuda_ew_set_strides(&p, 0, full);
  if (bias) {
    nr_cuda_ew_set_strides(&p, n, chan);
    ops[n] = bias;
    p.step[p.n_steps++] = (nr_cuda_ew_step){NR_EW_ADD, (int8_t)n, 0, 0, 0, 0};
    n++;
  }
  if (res) {
    nr_cuda_ew_set_strides(&p, n, full);
    p.half_mask |= (uint8_t)((e->res_half != 0) << n);
    ops[n] = res;
    p.step[p.n_steps++] = (nr_cuda_ew_step){NR_EW_ADD, (int8_t)n, 0, 0, 0, 0};
    n++;
  }
  p.n_ops = n;
  if (e->act != NR_ACT_NONE)
    p.step[p.n_steps++] = (nr_cuda_ew_step){nr_cuda_ew_act(e->act), -1, 0, 0, e->a, e->b};
  return nr_cuda_check(nr_cuda_ew_launch(&p, ops, y, s), err, "epilogue kernel");
}
