/* ops_rnn.c - reference recurrent operators: RNN, GRU and LSTM.
 *
 * The three share everything but the cell: argument checking, the layout attribute,
 * per-direction activation functions (with activation_alpha / activation_beta consumed
 * in order by the functions that take them), clip, sequence_lens and the output
 * writing. A cell function advances one batch row by one time step, so the driver is
 * a plain loop over direction, batch row and time step. Every tensor is converted to
 * double once; float16 and float32 inputs compute in double and are rounded on store.
 * Steps past a row's sequence length leave Y zero, and Y_h / Y_c hold the state after
 * the row's last valid step (for the reverse direction: after time step 0). */
#include "ir/op.h"
#include "kernels/ref/ref_util.h"
#include "kernels/ref/rnn_rules.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { KIND_RNN, KIND_GRU, KIND_LSTM };
enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ, IN_H, IN_C, IN_P };

/* ---- activation functions ------------------------------------------------------- */

typedef enum act_kind {
  ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU,
  ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS, ACT_COUNT
} act_kind;

typedef struct act_info {
  const char *name;
  int n_alpha, n_beta;
  double alpha, beta; /* defaults, as the standalone ONNX operators */
} act_info;

static const act_info act_table[ACT_COUNT] = {
    [ACT_RELU] = {"relu", 0, 0, 0, 0},
    [ACT_TANH] = {"tanh", 0, 0, 0, 0},
    [ACT_SIGMOID] = {"sigmoid", 0, 0, 0, 0},
    [ACT_AFFINE] = {"affine", 1, 1, 1.0, 0.0},
    [ACT_LEAKY_RELU] = {"leakyrelu", 1, 0, 0.01, 0},
    [ACT_THRESHOLDED_RELU] = {"thresholdedrelu", 1, 0, 1.0, 0},
    [ACT_SCALED_TANH] = {"scaledtanh", 1, 1, 1.0, 1.0},
    [ACT_HARD_SIGMOID] = {"hardsigmoid", 1, 1, 0.2, 0.5},
    [ACT_ELU] = {"elu", 1, 0, 1.0, 0},
    [ACT_SOFTSIGN] = {"softsign", 0, 0, 0, 0},
    [ACT_SOFTPLUS] = {"softplus", 0, 0, 0, 0},
};

typedef struct act_fn {
  act_kind kind;
  double alpha, beta;
} act_fn;

static double act_apply(const act_fn *f, double x) {
  double a = f->alpha, b = f->beta;
  switch (f->kind) {
  case ACT_RELU: return x > 0 ? x : 0;
  case ACT_TANH: return tanh(x);
  case ACT_SIGMOID: return 1 / (1 + exp(-x));
  case ACT_AFFINE: return a * x + b;
  case ACT_LEAKY_RELU: return x >= 0 ? x : a * x;
  case ACT_THRESHOLDED_RELU: return x > a ? x : 0;
  case ACT_SCALED_TANH: return a * tanh(b * x);
  case ACT_HARD_SIGMOID: { double v = a * x + b; return v < 0 ? 0 : v > 1 ? 1 : v; }
  case ACT_ELU: return x >= 0 ? x : a * (exp(x) - 1);
  case ACT_SOFTSIGN: return x / (1 + fabs(x));
  case ACT_SOFTPLUS: return x > 30 ? x : log1p(exp(x));
  default: return x;
  }
}

/* Case-insensitive lookup; -1 if unknown. */
static int act_lookup(const char *name) {
  char low[32];
  size_t n = strlen(name);
  if (n >= sizeof low)
    return -1;
  for (size_t i = 0; i <= n; i++)
    low[i] = (char)tolower((unsigned char)name[i]);
  for (int k = 0; k < ACT_COUNT; k++)
    if (!strcmp(low, act_table[k].name))
      return k;
  return -1;
}

/* ---- configuration -------------------------------------------------------------- */

typedef struct rnn_cfg {
  int kind, gates, n_act, dirs;
  bool reverse, layout, input_forget, linear_before_reset, has_clip;
  double clip;
  int64_t seq, batch, input, hidden;
  act_fn act[2][3];
} rnn_cfg;

static nr_status cfg_defaults(nr_op_ctx *ctx, rnn_cfg *c) {
  static const act_kind dflt[3][3] = {{ACT_TANH}, {ACT_SIGMOID, ACT_TANH},
                                      {ACT_SIGMOID, ACT_TANH, ACT_TANH}};
  const char *op = ctx->node->op_type;
  c->kind = !strcmp(op, "LSTM") ? KIND_LSTM : !strcmp(op, "GRU") ? KIND_GRU : KIND_RNN;
  c->gates = c->kind == KIND_LSTM ? 4 : c->kind == KIND_GRU ? 3 : 1;
  c->n_act = c->kind + 1;
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < c->n_act; k++)
      c->act[d][k] = (act_fn){dflt[c->kind][k], 0, 0};
  const char *dir = nr_attr_string(ctx->node, "direction", "forward");
  if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "direction '%s' is not valid", dir);
  c->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
  c->reverse = !strcmp(dir, "reverse");
  c->layout = nr_attr_int(ctx->node, "layout", 0) != 0;
  c->input_forget = nr_attr_int(ctx->node, "input_forget", 0) != 0;
  c->linear_before_reset = nr_attr_int(ctx->node, "linear_before_reset", 0) != 0;
  c->has_clip = nr_node_attr(ctx->node, "clip") != NULL;
  c->clip = nr_attr_float(ctx->node, "clip", 0.0f);
  if (c->has_clip && !(c->clip > 0))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "clip %g must be positive", c->clip);
  return NR_OK;
}

/* activations / activation_alpha / activation_beta: one list for both directions. */
static nr_status cfg_activations(nr_op_ctx *ctx, rnn_cfg *c) {
  const nr_attr *at = nr_node_attr(ctx->node, "activations");
  if (!at || at->n == 0)
    return NR_OK;
  size_t n = at->n, na = 0, nb = 0, ia = 0, ib = 0;
  if (n != (size_t)c->n_act && n != (size_t)(c->n_act * c->dirs))
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "activations has %zu names, expected %d",
                      n, c->n_act * c->dirs);
  const float *alpha = nr_attr_floats(ctx->node, "activation_alpha", &na);
  const float *beta = nr_attr_floats(ctx->node, "activation_beta", &nb);
  for (size_t i = 0; i < n; i++) {
    int k = act_lookup(at->strings[i]);
    if (k < 0)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "activation '%s' is not an ONNX one",
                        at->strings[i]);
    const act_info *inf = &act_table[k];
    act_fn f = {(act_kind)k, inf->alpha, inf->beta};
    if (inf->n_alpha && ia < na)
      f.alpha = alpha[ia++];
    if (inf->n_beta && ib < nb)
      f.beta = beta[ib++];
    c->act[i / (size_t)c->n_act][i % (size_t)c->n_act] = f;
  }
  if (n == (size_t)c->n_act && c->dirs == 2)
    memcpy(c->act[1], c->act[0], sizeof c->act[0]);
  return NR_OK;
}

/* ---- shape checks --------------------------------------------------------------- */

/* Checks v against the expected dims (< 0: any) and its dtype against t. */
static nr_status check_arg(nr_op_ctx *ctx, int i, const char *name, nr_dtype t, int rank,
                           const int64_t *want) {
  const nr_value *v = nr_op_in(ctx, i);
  if (!v)
    return NR_OK;
  if (v->dtype != NR_DTYPE_UNDEFINED && t != NR_DTYPE_UNDEFINED && v->dtype != t)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s has dtype %s, expected %s", name,
                      nr_dtype_name(v->dtype), nr_dtype_name(t));
  if (v->rank < 0)
    return NR_OK;
  if (v->rank != rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "%s must have rank %d, got %d", name, rank,
                      v->rank);
  for (int d = 0; d < rank; d++)
    if (want[d] >= 0 && v->dims[d] >= 0 && v->dims[d] != want[d])
      return nr_op_fail(ctx, NR_ERR_SHAPE, "%s dim %d is %lld, expected %lld", name, d,
                        (long long)v->dims[d], (long long)want[d]);
  return NR_OK;
}

static int64_t dim_or_unknown(const nr_value *v, int d) {
  return v && v->rank > d ? v->dims[d] : NR_DIM_UNKNOWN;
}

/* Reads seq, batch, input and hidden sizes (NR_DIM_UNKNOWN where not known). */
static nr_status cfg_sizes(nr_op_ctx *ctx, rnn_cfg *c) {
  const nr_value *x = nr_op_in(ctx, IN_X), *r = nr_op_in(ctx, IN_R);
  if (x->rank >= 0 && x->rank != 3)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X must have rank 3, got %d", x->rank);
  c->seq = dim_or_unknown(x, c->layout ? 1 : 0);
  c->batch = dim_or_unknown(x, c->layout ? 0 : 1);
  c->input = dim_or_unknown(x, 2);
  c->hidden = nr_attr_int(ctx->node, "hidden_size", NR_DIM_UNKNOWN);
  if (c->hidden < 0)
    c->hidden = dim_or_unknown(r, 2);
  if (c->hidden == 0)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "hidden_size is 0");
  /* gates x hidden x 2 (B's length) must stay an int64 */
  if (c->hidden > INT32_MAX)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "hidden_size %lld is too large",
                      (long long)c->hidden);
  return NR_OK;
}

static nr_status cfg_check_inputs(nr_op_ctx *ctx, const rnn_cfg *c) {
  nr_dtype t = nr_op_in(ctx, IN_X)->dtype;
  int64_t gh = c->hidden < 0 ? -1 : c->gates * c->hidden, h = c->hidden;
  int64_t state[3] = {c->dirs, c->batch, h}, state_t[3] = {c->batch, c->dirs, h};
  nr_status st;
  if (t != NR_DTYPE_UNDEFINED && t != NR_DTYPE_FLOAT && t != NR_DTYPE_DOUBLE &&
      t != NR_DTYPE_FLOAT16)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "X has dtype %s; expected float, double or "
                      "float16", nr_dtype_name(t));
  if ((st = check_arg(ctx, IN_W, "W", t, 3, (int64_t[]){c->dirs, gh, c->input})) ||
      (st = check_arg(ctx, IN_R, "R", t, 3, (int64_t[]){c->dirs, gh, h})) ||
      (st = check_arg(ctx, IN_B, "B", t, 2, (int64_t[]){c->dirs, gh < 0 ? -1 : 2 * gh})) ||
      (st = check_arg(ctx, IN_SEQ, "sequence_lens", NR_DTYPE_INT32, 1,
                      (int64_t[]){c->batch})) ||
      (st = check_arg(ctx, IN_H, "initial_h", t, 3, c->layout ? state_t : state)))
    return st;
  if (c->kind != KIND_LSTM)
    return NR_OK;
  if ((st = check_arg(ctx, IN_C, "initial_c", t, 3, c->layout ? state_t : state)))
    return st;
  return check_arg(ctx, IN_P, "P", t, 2, (int64_t[]){c->dirs, h < 0 ? -1 : 3 * h});
}

static nr_status cfg_make(nr_op_ctx *ctx, rnn_cfg *c) {
  int max_in = 6;
  if (!strcmp(ctx->node->op_type, "LSTM"))
    max_in = 8;
  nr_status st = nr_op_check_arity(ctx, 3, max_in);
  if (st || (st = cfg_defaults(ctx, c)) || (st = cfg_activations(ctx, c)))
    return st;
  if ((st = cfg_sizes(ctx, c)))
    return st;
  return cfg_check_inputs(ctx, c);
}

static nr_status rnn_infer(nr_op_ctx *ctx) {
  rnn_cfg c;
  nr_status st = cfg_make(ctx, &c);
  if (st)
    return st;
  nr_dtype t = nr_op_in(ctx, IN_X)->dtype;
  int64_t y[4] = {c.seq, c.dirs, c.batch, c.hidden};
  int64_t yt[4] = {c.batch, c.seq, c.dirs, c.hidden};
  int64_t s[3] = {c.dirs, c.batch, c.hidden}, stt[3] = {c.batch, c.dirs, c.hidden};
  if ((st = nr_op_set_output(ctx, 0, t, 4, c.layout ? yt : y)) ||
      (st = nr_op_set_output(ctx, 1, t, 3, c.layout ? stt : s)))
    return st;
  if (c.kind == KIND_LSTM)
    return nr_op_set_output(ctx, 2, t, 3, c.layout ? stt : s);
  return NR_OK;
}

/* ---- run ------------------------------------------------------------------------ */

/* The tensors of one run, as doubles, and scratch for one step. */
typedef struct rnn_data {
  double *w, *r, *b, *h0, *c0, *p; /* NULL where the input is absent */
  double *x;
  double *gx, *gh;                 /* gate pre-activations from x and from h */
  double *h, *c, *tmp;             /* state of the row being run */
} rnn_data;

static double *to_f64(const nr_value *v, bool *oom) {
  if (!v)
    return NULL;
  int64_t n = nr_value_count(v);
  double *d = malloc((size_t)(n + 1) * sizeof *d);
  if (!d) {
    *oom = true;
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    d[i] = nr_load_f64(v->dtype, v->data, i);
  return d;
}

static void data_free(rnn_data *d) {
  double *all[] = {d->w, d->r, d->b, d->h0, d->c0, d->p, d->x, d->gx, d->gh,
                   d->h, d->c, d->tmp};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    free(all[i]);
}

static nr_status data_load(nr_op_ctx *ctx, const rnn_cfg *c, rnn_data *d) {
  bool oom = false, lstm = c->kind == KIND_LSTM;
  size_t gh = (size_t)(c->gates * c->hidden) + 1, h = (size_t)c->hidden + 1;
  memset(d, 0, sizeof *d);
  d->x = to_f64(nr_op_in(ctx, IN_X), &oom);
  d->w = to_f64(nr_op_in(ctx, IN_W), &oom);
  d->r = to_f64(nr_op_in(ctx, IN_R), &oom);
  d->b = to_f64(nr_op_in(ctx, IN_B), &oom);
  d->h0 = to_f64(nr_op_in(ctx, IN_H), &oom);
  d->c0 = lstm ? to_f64(nr_op_in(ctx, IN_C), &oom) : NULL;
  d->p = lstm ? to_f64(nr_op_in(ctx, IN_P), &oom) : NULL;
  d->gx = malloc(gh * sizeof(double));
  d->gh = malloc(gh * sizeof(double));
  d->h = malloc(h * sizeof(double));
  d->c = malloc(h * sizeof(double));
  d->tmp = malloc(h * sizeof(double));
  if (oom || !d->gx || !d->gh || !d->h || !d->c || !d->tmp) {
    data_free(d);
    return nr_op_fail(ctx, NR_ERR_NOMEM, "no memory for the recurrent state");
  }
  return NR_OK;
}

static nr_rnn_dims dims_of(const rnn_cfg *c) {
  return (nr_rnn_dims){c->layout, c->seq, c->batch, c->dirs, c->input, c->hidden};
}
static int64_t x_off(const rnn_cfg *c, int64_t t, int64_t b) {
  nr_rnn_dims d = dims_of(c);
  return nr_rnn_x_off(&d, t, b);
}
static int64_t y_off(const rnn_cfg *c, int64_t t, int dir, int64_t b) {
  nr_rnn_dims d = dims_of(c);
  return nr_rnn_y_off(&d, t, dir, b);
}
static int64_t s_off(const rnn_cfg *c, int dir, int64_t b) {
  nr_rnn_dims d = dims_of(c);
  return nr_rnn_s_off(&d, dir, b);
}

/* out[g] = bias[g] + sum_k m[g][k] * v[k] for rows g of an (rows x cols) matrix. */
static void matvec(const double *m, const double *v, const double *bias, int64_t rows,
                   int64_t cols, double *out) {
  for (int64_t g = 0; g < rows; g++) {
    double acc = bias ? bias[g] : 0;
    for (int64_t k = 0; k < cols; k++)
      acc += m[g * cols + k] * v[k];
    out[g] = acc;
  }
}

static double clip(const rnn_cfg *c, double v) {
  if (!c->has_clip)
    return v;
  return v < -c->clip ? -c->clip : v > c->clip ? c->clip : v;
}

/* Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi). */
static void cell_rnn(const rnn_cfg *c, rnn_data *d, int dir) {
  for (int64_t u = 0; u < c->hidden; u++)
    d->h[u] = act_apply(&c->act[dir][0], clip(c, d->gx[u] + d->gh[u]));
}

/* Gates z, r, h. gh holds Ht-1 R^T + Rb for all three gates. */
static void cell_gru(const rnn_cfg *c, rnn_data *d, int dir, const double *r_mat,
                     const double *rb) {
  int64_t H = c->hidden;
  double *z = d->c, *r = d->tmp; /* c is free scratch in a GRU */
  for (int64_t u = 0; u < H; u++) {
    z[u] = act_apply(&c->act[dir][0], clip(c, d->gx[u] + d->gh[u]));
    r[u] = act_apply(&c->act[dir][0], clip(c, d->gx[H + u] + d->gh[H + u]));
  }
  if (!c->linear_before_reset) {
    /* (r . Ht-1) Rh^T + Rbh replaces the h-gate part of gh. */
    for (int64_t u = 0; u < H; u++)
      r[u] *= d->h[u];
    matvec(r_mat + 2 * H * H, r, rb ? rb + 2 * H : NULL, H, H, d->gh + 2 * H);
  }
  for (int64_t u = 0; u < H; u++) {
    double rec = c->linear_before_reset ? r[u] * d->gh[2 * H + u] : d->gh[2 * H + u];
    double hh = act_apply(&c->act[dir][1], clip(c, d->gx[2 * H + u] + rec));
    d->h[u] = (1 - z[u]) * hh + z[u] * d->h[u];
  }
}

/* Gates i, o, f, c; peepholes P = [Pi, Po, Pf]. */
static void cell_lstm(const rnn_cfg *c, rnn_data *d, int dir, const double *p) {
  int64_t H = c->hidden;
  const act_fn *f = &c->act[dir][0], *g = &c->act[dir][1], *h = &c->act[dir][2];
  for (int64_t u = 0; u < H; u++) {
    double ct = d->c[u], *a = d->gx, *b = d->gh;
    double pi = p ? p[u] : 0, po = p ? p[H + u] : 0, pf = p ? p[2 * H + u] : 0;
    double i = act_apply(f, clip(c, a[u] + b[u] + pi * ct));
    double fg = act_apply(f, clip(c, a[2 * H + u] + b[2 * H + u] + pf * ct));
    if (c->input_forget)
      fg = 1 - i;
    double cc = act_apply(g, clip(c, a[3 * H + u] + b[3 * H + u]));
    double cn = fg * ct + i * cc;
    double o = act_apply(f, clip(c, a[H + u] + b[H + u] + po * cn));
    d->c[u] = cn;
    d->h[u] = o * act_apply(h, cn);
  }
}

/* Runs direction dir over batch row bi for len steps, writing Y as it goes. */
static void run_row(const rnn_cfg *c, rnn_data *d, int dir, int64_t bi, int64_t len,
                    nr_value *y) {
  int64_t G = c->gates * c->hidden, H = c->hidden;
  const double *w = d->w + dir * G * c->input, *r = d->r + dir * G * H;
  const double *wb = d->b ? d->b + dir * 2 * G : NULL, *rb = wb ? wb + G : NULL;
  const double *p = d->p ? d->p + dir * 3 * H : NULL;
  bool backward = c->reverse || dir == 1;
  for (int64_t u = 0; u < H; u++) {
    d->h[u] = d->h0 ? d->h0[s_off(c, dir, bi) + u] : 0;
    d->c[u] = d->c0 ? d->c0[s_off(c, dir, bi) + u] : 0;
  }
  for (int64_t s = 0; s < len; s++) {
    int64_t t = backward ? len - 1 - s : s;
    matvec(w, d->x + x_off(c, t, bi), wb, G, c->input, d->gx);
    matvec(r, d->h, rb, G, H, d->gh);
    if (c->kind == KIND_RNN)
      cell_rnn(c, d, dir);
    else if (c->kind == KIND_GRU)
      cell_gru(c, d, dir, r, rb);
    else
      cell_lstm(c, d, dir, p);
    for (int64_t u = 0; y && u < H; u++)
      nr_store_f64(y->dtype, y->data, y_off(c, t, dir, bi) + u, d->h[u]);
  }
}

static nr_status row_length(nr_op_ctx *ctx, const rnn_cfg *c, int64_t b, int64_t *len) {
  const nr_value *sl = nr_op_in(ctx, IN_SEQ);
  *len = sl ? nr_value_get_i64(sl, b) : c->seq;
  if (*len < 0 || *len > c->seq)
    return nr_op_fail(ctx, NR_ERR_RUNTIME, "sequence_lens[%lld] = %lld is outside [0, %lld]",
                      (long long)b, (long long)*len, (long long)c->seq);
  return NR_OK;
}

static nr_status rnn_run(nr_op_ctx *ctx) {
  rnn_cfg c;
  rnn_data d;
  nr_status st = cfg_make(ctx, &c);
  if (st || (st = data_load(ctx, &c, &d)))
    return st;
  nr_value *y = nr_op_out(ctx, 0), *yh = nr_op_out(ctx, 1);
  nr_value *yc = c.kind == KIND_LSTM ? nr_op_out(ctx, 2) : NULL;
  for (int dir = 0; dir < c.dirs && !st; dir++)
    for (int64_t b = 0; b < c.batch && !st; b++) {
      int64_t len;
      if ((st = row_length(ctx, &c, b, &len)))
        break;
      run_row(&c, &d, dir, b, len, y);
      for (int64_t u = 0; u < c.hidden; u++) {
        if (yh)
          nr_store_f64(yh->dtype, yh->data, s_off(&c, dir, b) + u, len ? d.h[u] : 0);
        if (yc)
          nr_store_f64(yc->dtype, yc->data, s_off(&c, dir, b) + u, len ? d.c[u] : 0);
      }
    }
  data_free(&d);
  return st;
}

const nr_op_def nr_ref_ops_rnn[] = {
    {"", "RNN", 7, rnn_infer, rnn_run, 0},
    {"", "GRU", 7, rnn_infer, rnn_run, 0},
    {"", "LSTM", 7, rnn_infer, rnn_run, 0},
    {0},
};
