/* ops_elementwise_binary.c - two-input elementwise operators with numpy broadcasting
 * (arithmetic, Pow, Mod, PRelu, comparisons, logic, bitwise ops, BitShift), the
 * variadic Sum/Mean/Min/Max built on them, and Where.
 *
 * Every operator is one kernel `kind` evaluated on a row of the nr_ew_rows walker in
 * one of three ways: float32 arrays directly (the arithmetic of real models), doubles
 * for the other float types, or exact int64 arithmetic for integers and bools. Integer
 * arithmetic wraps like the hardware (computed in uint64, truncated on store);
 * division and modulo by zero yield 0, as numpy does, instead of trapping. The
 * variadic operators fold their inputs into the output in place. */
#include "kernels/ref/elementwise.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <string.h>

typedef enum kind {
  K_ADD, K_SUB, K_MUL, K_DIV, K_POW, K_MOD, K_PRELU, K_MIN, K_MAX,
  K_EQ, K_LT, K_GT, K_LE, K_GE, K_AND, K_OR, K_XOR,
  K_BAND, K_BOR, K_BXOR, K_SHIFT,
} kind;

typedef struct bin_op {
  const char *op_type;
  kind k;
  unsigned types; /* classes accepted for input 0 */
  bool to_bool;   /* comparisons */
} bin_op;

typedef struct bparams {
  bool fmod;        /* Mod: C fmod (1) or the sign of the divisor (0) */
  bool shift_left;  /* BitShift direction */
  bool is_unsigned; /* integer inputs are unsigned */
  int bits;         /* BitShift: width of the integer type */
} bparams;

#define FL NR_EW_FLOAT
#define IN NR_EW_INT
#define BO NR_EW_BOOL

static const bin_op bin_ops[] = {
    {"Add", K_ADD, FL | IN}, {"Sub", K_SUB, FL | IN}, {"Mul", K_MUL, FL | IN},
    {"Div", K_DIV, FL | IN}, {"Pow", K_POW, FL | NR_EW_SINT},
    {"Mod", K_MOD, FL | IN}, {"PRelu", K_PRELU, FL | IN},
    {"Min", K_MIN, FL | IN}, {"Max", K_MAX, FL | IN},
    {"Sum", K_ADD, FL}, {"Mean", K_ADD, FL},
    {"Equal", K_EQ, FL | IN | BO | NR_EW_STRING, true},
    {"Less", K_LT, FL | IN, true}, {"Greater", K_GT, FL | IN, true},
    {"LessOrEqual", K_LE, FL | IN, true}, {"GreaterOrEqual", K_GE, FL | IN, true},
    {"And", K_AND, BO, true}, {"Or", K_OR, BO, true}, {"Xor", K_XOR, BO, true},
    {"BitwiseAnd", K_BAND, IN}, {"BitwiseOr", K_BOR, IN}, {"BitwiseXor", K_BXOR, IN},
    {"BitShift", K_SHIFT, IN},
};

static const bin_op *find_bin(const char *op_type) {
  for (size_t k = 0; k < sizeof bin_ops / sizeof bin_ops[0]; k++)
    if (!strcmp(bin_ops[k].op_type, op_type))
      return &bin_ops[k];
  return NULL;
}

/* ---- scalar semantics ----------------------------------------------------------- */

static double f64_mod(double a, double b, bool c_fmod) {
  double r = fmod(a, b);
  if (!c_fmod && r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

static double f64_apply(kind k, double a, double b, const bparams *p) {
  switch (k) {
  case K_ADD: return a + b;
  case K_SUB: return a - b;
  case K_MUL: return a * b;
  case K_DIV: return a / b;
  case K_POW: return pow(a, b);
  case K_MOD: return f64_mod(a, b, p->fmod);
  case K_PRELU: return a < 0 ? a * b : a;
  case K_MIN: return (a < b || isnan(a)) ? a : b;
  case K_MAX: return (a > b || isnan(a)) ? a : b;
  case K_EQ: return a == b;
  case K_LT: return a < b;
  case K_GT: return a > b;
  case K_LE: return a <= b;
  case K_GE: return a >= b;
  default: return NAN; /* integer-only kinds never reach here */
  }
}

static int64_t i64_div(int64_t a, int64_t b, bool u) {
  if (b == 0)
    return 0;
  if (u)
    return (int64_t)((uint64_t)a / (uint64_t)b);
  if (b == -1)
    return (int64_t)(0 - (uint64_t)a);
  return a / b; /* C truncates toward zero, as the spec asks */
}

static int64_t i64_mod(int64_t a, int64_t b, const bparams *p) {
  if (b == 0 || (!p->is_unsigned && b == -1))
    return 0;
  if (p->is_unsigned)
    return (int64_t)((uint64_t)a % (uint64_t)b);
  int64_t r = a % b;
  if (!p->fmod && r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

/* Exact integer power; negative exponents give the truncated real result. */
static int64_t i64_pow(int64_t a, int64_t b) {
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a;
  for (uint64_t e = (uint64_t)b; e; e >>= 1) {
    if (e & 1)
      r *= base;
    base *= base;
  }
  return (int64_t)r;
}

static int64_t i64_shift(int64_t a, int64_t b, const bparams *p) {
  bool in_range = b >= 0 && b < p->bits;
  if (p->shift_left)
    return in_range ? (int64_t)((uint64_t)a << b) : 0;
  if (!in_range)
    return (!p->is_unsigned && a < 0) ? -1 : 0;
  /* Loaded values are sign-extended (signed) or zero-extended (unsigned). */
  return p->is_unsigned ? (int64_t)((uint64_t)a >> b) : a >> b;
}

static int cmp_i64(int64_t a, int64_t b, bool u) {
  if (u)
    return (uint64_t)a < (uint64_t)b ? -1 : (uint64_t)a > (uint64_t)b;
  return a < b ? -1 : a > b;
}

static int64_t i64_apply(kind k, int64_t a, int64_t b, const bparams *p) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (k) {
  case K_ADD: return (int64_t)(ua + ub);
  case K_SUB: return (int64_t)(ua - ub);
  case K_MUL: return (int64_t)(ua * ub);
  case K_DIV: return i64_div(a, b, p->is_unsigned);
  case K_POW: return i64_pow(a, b);
  case K_MOD: return i64_mod(a, b, p);
  case K_PRELU: return a < 0 ? (int64_t)(ua * ub) : a;
  case K_MIN: return cmp_i64(a, b, p->is_unsigned) <= 0 ? a : b;
  case K_MAX: return cmp_i64(a, b, p->is_unsigned) >= 0 ? a : b;
  case K_EQ: return a == b;
  case K_LT: return cmp_i64(a, b, p->is_unsigned) < 0;
  case K_GT: return cmp_i64(a, b, p->is_unsigned) > 0;
  case K_LE: return cmp_i64(a, b, p->is_unsigned) <= 0;
  case K_GE: return cmp_i64(a, b, p->is_unsigned) >= 0;
  case K_AND: return a && b;
  case K_OR: return a || b;
  case K_XOR: return !a != !b;
  case K_BAND: return a & b;
  case K_BOR: return a | b;
  case K_BXOR: return a ^ b;
  case K_SHIFT: return i64_shift(a, b, p);
  }
  return 0;
}

/* ---- rows ----------------------------------------------------------------------- */

static bool has_f32_row(kind k) {
  return k == K_ADD || k == K_SUB || k == K_MUL || k == K_DIV || k == K_MIN ||
         k == K_MAX || k == K_PRELU;
}

/* sa and sb are 0 or 1: a broadcast operand or a walking one. */
static void f32_row(kind k, const float *a, int64_t sa, const float *b, int64_t sb,
                    float *y, int64_t n) {
  switch (k) {
  case K_ADD: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] + b[j * sb]; break;
  case K_SUB: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] - b[j * sb]; break;
  case K_MUL: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] * b[j * sb]; break;
  case K_DIV: for (int64_t j = 0; j < n; j++) y[j] = a[j * sa] / b[j * sb]; break;
  default:
    for (int64_t j = 0; j < n; j++) {
      float x = a[j * sa], s = b[j * sb];
      if (k == K_PRELU)
        y[j] = x < 0 ? x * s : x;
      else if (k == K_MIN)
        y[j] = (x < s || isnan(x)) ? x : s;
      else
        y[j] = (x > s || isnan(x)) ? x : s;
    }
  }
}

typedef enum path { PATH_F32, PATH_F64, PATH_I64 } path;

static path choose_path(kind k, const nr_value *a, const nr_value *b, const nr_value *y) {
  if (a->dtype == NR_DTYPE_FLOAT && b->dtype == NR_DTYPE_FLOAT &&
      y->dtype == NR_DTYPE_FLOAT && has_f32_row(k))
    return PATH_F32;
  if (nr_ew_class(a->dtype) == NR_EW_FLOAT || nr_ew_class(b->dtype) == NR_EW_FLOAT)
    return PATH_F64;
  return PATH_I64;
}

/* y = a (op) b with broadcasting; a may be y itself (in-place folding). */
static void apply(kind k, const bparams *p, const nr_value *a, const nr_value *b,
                  nr_value *y) {
  nr_ew_rows w;
  nr_ew_rows_init(&w, y, 2, (const nr_value *[]){a, b});
  path pa = choose_path(k, a, b, y);
  for (int64_t r = 0; r < w.rows; r++, nr_ew_rows_next(&w)) {
    int64_t yo = r * w.inner;
    if (pa == PATH_F32) {
      f32_row(k, (const float *)a->data + w.off[0], w.step[0],
              (const float *)b->data + w.off[1], w.step[1], (float *)y->data + yo,
              w.inner);
      continue;
    }
    for (int64_t j = 0; j < w.inner; j++) {
      int64_t ia = w.off[0] + j * w.step[0], ib = w.off[1] + j * w.step[1];
      if (pa == PATH_F64) {
        double v = f64_apply(k, nr_load_f64(a->dtype, a->data, ia),
                             nr_load_f64(b->dtype, b->data, ib), p);
        nr_store_f64(y->dtype, y->data, yo + j, v);
      } else {
        int64_t v = i64_apply(k, nr_load_i64(a->dtype, a->data, ia),
                              nr_load_i64(b->dtype, b->data, ib), p);
        nr_store_i64(y->dtype, y->data, yo + j, v);
      }
    }
  }
}

/* ---- Add, Sub, ... BitShift ----------------------------------------------------- */

static nr_status check_direction(nr_op_ctx *ctx) {
  const char *dir = nr_attr_string(ctx->node, "direction", "");
  if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "attribute direction='%s' is not 'LEFT' or 'RIGHT'", dir);
  return NR_OK;
}

static nr_status check_binary_types(nr_op_ctx *ctx, const bin_op *op) {
  nr_status st = nr_ew_check_dtype(ctx, 0, op->types);
  if (st)
    return st;
  if (op->k == K_POW) /* the exponent may have its own numeric type */
    return nr_ew_check_dtype(ctx, 1, FL | IN);
  if (op->k == K_SHIFT && (st = check_direction(ctx)))
    return st;
  return nr_ew_check_same_dtype(ctx, 0, 1);
}

nr_status nr_ew_binary_infer(nr_op_ctx *ctx) {
  const bin_op *op = find_bin(ctx->node->op_type);
  if (!op)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "no binary kernel for this op type");
  nr_status st = nr_op_check_arity(ctx, 2, 2);
  if (!st)
    st = nr_ew_check_legacy_broadcast(ctx);
  if (!st)
    st = check_binary_types(ctx, op);
  if (st)
    return st;
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  int rank;
  int64_t dims[NR_MAX_RANK];
  if ((st = nr_op_broadcast(ctx, a, b, &rank, dims)))
    return st;
  return nr_op_set_output(ctx, 0, op->to_bool ? NR_DTYPE_BOOL : a->dtype, rank, dims);
}

static bparams read_bparams(const nr_op_ctx *ctx, nr_dtype t) {
  bparams p = {0};
  p.fmod = nr_attr_int(ctx->node, "fmod", 0) != 0;
  p.shift_left = !strcmp(nr_attr_string(ctx->node, "direction", ""), "LEFT");
  p.is_unsigned = nr_ew_class(t) == NR_EW_UINT;
  p.bits = (int)(8 * nr_dtype_size(t));
  return p;
}

nr_status nr_ew_binary_run(nr_op_ctx *ctx) {
  const bin_op *op = find_bin(ctx->node->op_type);
  const nr_value *a = nr_op_in(ctx, 0), *b = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  if (!op || !a || !b || !y)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "binary kernel called without its operands");
  bparams p = read_bparams(ctx, a->dtype);
  apply(op->k, &p, a, b, y);
  return NR_OK;
}

/* ---- Sum, Mean, Min, Max -------------------------------------------------------- */

/* The broadcast shape of inputs 0..n-1 (all present), in acc's rank and dims. */
static nr_status broadcast_inputs(nr_op_ctx *ctx, int n, nr_value *acc) {
  *acc = *nr_op_in(ctx, 0);
  acc->data = NULL;
  for (int i = 1; i < n; i++) {
    nr_value prev = *acc; /* nr_op_broadcast must not write the dims it reads */
    nr_status st = nr_op_broadcast(ctx, &prev, nr_op_in(ctx, i), &acc->rank, acc->dims);
    if (st)
      return st;
  }
  return NR_OK;
}

nr_status nr_ew_variadic_infer(nr_op_ctx *ctx) {
  const bin_op *op = find_bin(ctx->node->op_type);
  if (!op)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "no variadic kernel for this op type");
  nr_status st = nr_op_check_arity(ctx, 1, -1);
  for (int i = 0; i < ctx->n_inputs && !st; i++) {
    if (!nr_op_in(ctx, i))
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "input %d is missing", i);
    st = nr_ew_check_dtype(ctx, i, op->types);
    if (!st)
      st = nr_ew_check_same_dtype(ctx, 0, i);
  }
  if (st)
    return st;
  nr_value acc;
  if ((st = broadcast_inputs(ctx, ctx->n_inputs, &acc)))
    return st;
  return nr_op_set_output(ctx, 0, nr_op_in(ctx, 0)->dtype, acc.rank, acc.dims);
}

/* y = x broadcast to y's shape, element by element. */
static void broadcast_copy(const nr_value *x, nr_value *y) {
  size_t es = nr_dtype_size(y->dtype);
  nr_ew_rows w;
  nr_ew_rows_init(&w, y, 1, (const nr_value *[]){x});
  for (int64_t r = 0; r < w.rows; r++, nr_ew_rows_next(&w)) {
    char *dst = (char *)y->data + (size_t)(r * w.inner) * es;
    const char *src = (const char *)x->data + (size_t)w.off[0] * es;
    if (w.step[0])
      memcpy(dst, src, (size_t)w.inner * es);
    else
      for (int64_t j = 0; j < w.inner; j++)
        memcpy(dst + (size_t)j * es, src, es);
  }
}

nr_status nr_ew_variadic_run(nr_op_ctx *ctx) {
  const bin_op *op = find_bin(ctx->node->op_type);
  nr_value *y = nr_op_out(ctx, 0);
  if (!op || !y || !nr_op_in(ctx, 0))
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "variadic kernel called without operands");
  bparams p = read_bparams(ctx, y->dtype);
  broadcast_copy(nr_op_in(ctx, 0), y);
  for (int i = 1; i < ctx->n_inputs; i++)
    apply(op->k, &p, y, nr_op_in(ctx, i), y);
  if (!strcmp(op->op_type, "Mean")) {
    int64_t n = nr_value_count(y);
    for (int64_t i = 0; i < n; i++)
      nr_store_f64(y->dtype, y->data, i,
                   nr_load_f64(y->dtype, y->data, i) / ctx->n_inputs);
  }
  return NR_OK;
}

/* ---- Where ---------------------------------------------------------------------- */

nr_status nr_ew_where_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 3, 3);
  if (!st)
    st = nr_ew_check_dtype(ctx, 0, BO);
  if (!st)
    st = nr_ew_check_dtype(ctx, 1, FL | IN | BO | NR_EW_STRING);
  if (!st)
    st = nr_ew_check_same_dtype(ctx, 1, 2);
  if (st)
    return st;
  nr_value acc;
  if ((st = broadcast_inputs(ctx, 3, &acc)))
    return st;
  return nr_op_set_output(ctx, 0, nr_op_in(ctx, 1)->dtype, acc.rank, acc.dims);
}

nr_status nr_ew_where_run(nr_op_ctx *ctx) {
  const nr_value *c = nr_op_in(ctx, 0), *x = nr_op_in(ctx, 1), *z = nr_op_in(ctx, 2);
  nr_value *y = nr_op_out(ctx, 0);
  if (!c || !x || !z || !y)
    return nr_op_fail(ctx, NR_ERR_INTERNAL, "Where kernel called without its operands");
  size_t es = nr_dtype_size(y->dtype);
  nr_ew_rows w;
  nr_ew_rows_init(&w, y, 3, (const nr_value *[]){c, x, z});
  const uint8_t *cond = c->data;
  for (int64_t r = 0; r < w.rows; r++, nr_ew_rows_next(&w)) {
    for (int64_t j = 0; j < w.inner; j++) {
      bool pick_x = cond[w.off[0] + j * w.step[0]] != 0;
      const nr_value *src = pick_x ? x : z;
      int64_t k = pick_x ? 1 : 2;
      memcpy((char *)y->data + (size_t)(r * w.inner + j) * es,
             (const char *)src->data + (size_t)(w.off[k] + j * w.step[k]) * es, es);
    }
  }
  return NR_OK;
}
