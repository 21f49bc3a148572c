/* tactics_lstm.c - the fast LSTM tactic (nr_f32_lstm): float32, any direction
 * (forward, reverse, bidirectional), either layout, batch and sequence of any length,
 * optional bias, initial states and peepholes, with the default activations
 * (sigmoid, tanh, tanh). A clip, input_forget, sequence_lens or other activations stay
 * on the reference tactic (src/kernels/ref/ops_rnn.c), which defines the semantics.
 *
 * Key decision: a time step is one GEMM. Each batch row keeps [x_t | h_t-1] side by
 * side in scratch, so the four gates of every row come from one product with the
 * packed [W | R]^T of the direction (K = input + hidden, N = 4 hidden), its bias
 * Wb + Rb added as the GEMM's epilogue; the cell then runs over whole gate rows with
 * the kernels' vector activations (kernels/act.h). prepare() packs [W | R]^T, the
 * summed bias and the peepholes of each direction into the engine, so run() reads
 * no constant input. */
#include "kernels/act.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/ref/rnn_rules.h"
#include "plan/tactic.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

enum { IN_X, IN_W, IN_R, IN_B, IN_SEQ, IN_H, IN_C, IN_P };

/* Below this many multiply-adds a step's product runs on the calling thread: waking
 * the pool for a 1-row GEMV costs more than the product. */
#define LSTM_SERIAL_MACS (1 << 20)

/* The step's record (nr_step.params). */
typedef struct lstm_p {
  int32_t seq, batch, input, hidden;
  uint8_t dirs, reverse, layout, peep;
  nr_gemm_cfg cfg;
  uint64_t b_bytes;   /* one direction's packed [W | R]^T */
  uint64_t dir_bytes; /* one direction's packed data: [W | R]^T, bias, peepholes */
} lstm_p;

_Static_assert(sizeof(lstm_p) <= NR_TACTIC_PARAMS, "lstm_p must fit nr_step.params");

static uint64_t align64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

static uint64_t dir_bytes(const lstm_p *p) {
  uint64_t h = (uint64_t)p->hidden * sizeof(float);
  return align64(p->b_bytes) + align64(4 * h) + align64(3 * h);
}

/* Scratch: per row [x | h] and 4 gates, per row c, one row of tanh(c), GEMM packing. */
static uint64_t scratch_bytes(const lstm_p *p, uint64_t gemm) {
  uint64_t b = (uint64_t)p->batch, h = (uint64_t)p->hidden, f = sizeof(float);
  return align64(b * (uint64_t)(p->input + p->hidden) * f) + align64(b * 4 * h * f) +
         align64(b * h * f) + align64(h * f) + gemm;
}

/* ---- reading the node ------------------------------------------------------------- */

/* Whether the activations attribute is absent or names the defaults. */
static bool default_acts(const nr_node *n, int dirs) {
  static const char *const want[3] = {"sigmoid", "tanh", "tanh"};
  const nr_attr *at = nr_node_attr(n, "activations");
  if (!at || at->n == 0)
    return true;
  if (at->n != 3 && at->n != (size_t)(3 * dirs))
    return false;
  for (size_t i = 0; i < at->n; i++) {
    const char *s = at->strings[i], *w = want[i % 3];
    size_t k = 0;
    for (; s[k] && w[k] && tolower((unsigned char)s[k]) == w[k]; k++)
      ;
    if (s[k] || w[k])
      return false;
  }
  return true;
}

static bool f32_rank(const nr_slot *s, int rank) {
  return s && s->dtype == NR_DTYPE_FLOAT && s->rank == rank;
}

static int64_t slot_count(const nr_slot *s) {
  int64_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= s->dims[d];
  return n;
}

static bool const_f32(const nr_tactic_ctx *c, int i, int rank, int64_t d0, int64_t d1,
                      int64_t d2) {
  const nr_slot *s = nr_step_in(c, i);
  if (!f32_rank(s, rank) || s->kind != NR_SLOT_CONST || !nr_step_const(c, i))
    return false;
  int64_t want[3] = {d0, d1, d2};
  for (int d = 0; d < rank; d++)
    if (s->dims[d] != want[d])
      return false;
  return true;
}

static bool state_ok(const nr_slot *s, const lstm_p *p) {
  if (!s)
    return true;
  int64_t a = p->layout ? p->batch : p->dirs, b = p->layout ? p->dirs : p->batch;
  return f32_rank(s, 3) && s->dims[0] == a && s->dims[1] == b && s->dims[2] == p->hidden;
}

/* Fills p from the step; false when the tactic cannot run it. */
static bool decode(const nr_tactic_ctx *c, lstm_p *p) {
  const nr_node *n = c->node;
  memset(p, 0, sizeof *p);
  if (!n || strcmp(n->op_type, "LSTM") || n->domain[0] || c->step->n_in < 3)
    return false;
  const char *dir = nr_attr_string(n, "direction", "forward");
  bool bi = !strcmp(dir, "bidirectional");
  if (!bi && strcmp(dir, "forward") && strcmp(dir, "reverse"))
    return false;
  p->dirs = bi ? 2 : 1, p->reverse = !strcmp(dir, "reverse");
  p->layout = nr_attr_int(n, "layout", 0) != 0;
  if (nr_node_attr(n, "clip") || nr_attr_int(n, "input_forget", 0) ||
      !default_acts(n, p->dirs) || nr_step_in(c, IN_SEQ))
    return false;
  const nr_slot *x = nr_step_in(c, IN_X);
  if (!f32_rank(x, 3))
    return false;
  int64_t seq = x->dims[p->layout ? 1 : 0], batch = x->dims[p->layout ? 0 : 1];
  int64_t in = x->dims[2], h = nr_attr_int(n, "hidden_size", 0);
  if (seq < 1 || batch < 1 || in < 1 || h < 1 || seq > INT32_MAX || batch > INT32_MAX ||
      in > INT32_MAX / 2 || h > INT32_MAX / 8)
    return false;
  p->seq = (int32_t)seq, p->batch = (int32_t)batch, p->input = (int32_t)in;
  p->hidden = (int32_t)h;
  if (!const_f32(c, IN_W, 3, p->dirs, 4 * h, in) || !const_f32(c, IN_R, 3, p->dirs, 4 * h, h))
    return false;
  if (nr_step_in(c, IN_B) && !const_f32(c, IN_B, 2, p->dirs, 8 * h, 0))
    return false;
  p->peep = nr_step_in(c, IN_P) != NULL;
  if (p->peep && !const_f32(c, IN_P, 2, p->dirs, 3 * h, 0))
    return false;
  if (!state_ok(nr_step_in(c, IN_H), p) || !state_ok(nr_step_in(c, IN_C), p))
    return false;
  for (int i = 0; i < c->step->n_out && i < 3; i++) {
    const nr_slot *y = nr_step_out(c, i);
    if (y && y->dtype != NR_DTYPE_FLOAT)
      return false;
  }
  p->cfg = nr_gemm_default_cfg(batch, 4 * h, in + h);
  p->b_bytes = nr_gemm_packed_b_size(p->cfg, in + h, 4 * h);
  p->dir_bytes = dir_bytes(p);
  return true;
}

static bool lstm_supports(const nr_tactic_ctx *c) {
  lstm_p p;
  return decode(c, &p);
}

/* ---- prepare ---------------------------------------------------------------------- */

/* One direction's packed data into out (dir_bytes, zeroed by the caller). */
static void pack_dir(const nr_tactic_ctx *c, const lstm_p *p, int dir, float *wr,
                     uint8_t *out) {
  int64_t h = p->hidden, in = p->input, g = 4 * h, k = in + h;
  const float *w = (const float *)nr_step_const(c, IN_W) + dir * g * in;
  const float *r = (const float *)nr_step_const(c, IN_R) + dir * g * h;
  for (int64_t row = 0; row < g; row++) {
    memcpy(wr + row * k, w + row * in, (size_t)in * sizeof(float));
    memcpy(wr + row * k + in, r + row * h, (size_t)h * sizeof(float));
  }
  nr_gemm_pack_b(p->cfg, k, g, (nr_gemm_operand){wr, k, true, false}, (float *)out);
  float *bias = (float *)(out + align64(p->b_bytes));
  const float *b = nr_step_in(c, IN_B) ? nr_step_const(c, IN_B) : NULL;
  for (int64_t u = 0; b && u < g; u++)
    bias[u] = b[dir * 2 * g + u] + b[dir * 2 * g + g + u];
  float *peep = (float *)((uint8_t *)bias + align64((uint64_t)g * sizeof(float)));
  if (p->peep)
    memcpy(peep, (const float *)nr_step_const(c, IN_P) + dir * 3 * h,
           (size_t)(3 * h) * sizeof(float));
}

static nr_status lstm_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  lstm_p p;
  if (!decode(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: node %s no longer decodes",
                     st->tactic->id, c->node->name);
  int64_t g = 4 * (int64_t)p.hidden, k = (int64_t)p.input + p.hidden;
  uint64_t bytes = p.dirs * p.dir_bytes;
  uint8_t *data = calloc(1, bytes);
  float *wr = malloc((size_t)(g * k) * sizeof(float));
  if (!data || !wr) {
    free(data), free(wr);
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: no memory for %llu bytes of weights",
                     st->tactic->id, (unsigned long long)bytes);
  }
  for (int dir = 0; dir < p.dirs; dir++)
    pack_dir(c, &p, dir, wr, data + dir * p.dir_bytes);
  free(wr);
  nr_status s = nr_plan_add_weights(plan, data, bytes, &st->packed_offset, c->err);
  free(data);
  if (s)
    return s;
  st->packed_size = bytes;
  int threads = nr_threads_or_online(st->threads);
  st->scratch = scratch_bytes(&p, nr_gemm_scratch_size(p.cfg, p.batch, g, k, threads));
  memcpy(st->params, &p, sizeof p);
  static const int consts[] = {IN_W, IN_R, IN_B, IN_P};
  for (size_t i = 0; i < sizeof consts / sizeof consts[0]; i++)
    if (consts[i] < st->n_in && nr_step_in(c, consts[i]))
      nr_step_absorb(st, consts[i]);
  return NR_OK;
}

/* ---- run -------------------------------------------------------------------------- */

typedef struct lstm_run {
  const lstm_p *p;
  const float *x, *h0, *c0;
  float *y, *yh, *yc;
  float *z, *gates, *cell, *tanh_c; /* scratch */
  void *gemm_scratch;
  nr_threadpool *pool;
  int threads;
} lstm_run;

static nr_rnn_dims dims_of(const lstm_p *p) {
  return (nr_rnn_dims){p->layout, p->seq, p->batch, p->dirs, p->input, p->hidden};
}

/* One row's cell: gates g (i, o, f, c pre-activations), state c in place, h out. */
static void cell(const lstm_p *p, float *g, float *c, float *h, float *tc,
                 const float *peep) {
  int64_t H = p->hidden;
  float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
  if (peep) {
    for (int64_t u = 0; u < H; u++)
      gi[u] += peep[u] * c[u], gf[u] += peep[2 * H + u] * c[u];
    nr_act_apply(NR_ACT_SIGMOID, 0, 0, gi, H);
    nr_act_apply(NR_ACT_SIGMOID, 0, 0, gf, H);
  } else {
    nr_act_apply(NR_ACT_SIGMOID, 0, 0, g, 3 * H);
  }
  nr_act_apply(NR_ACT_TANH, 0, 0, gc, H);
  for (int64_t u = 0; u < H; u++)
    c[u] = gf[u] * c[u] + gi[u] * gc[u];
  if (peep) {
    for (int64_t u = 0; u < H; u++)
      go[u] += peep[H + u] * c[u];
    nr_act_apply(NR_ACT_SIGMOID, 0, 0, go, H);
  }
  memcpy(tc, c, (size_t)H * sizeof(float));
  nr_act_apply(NR_ACT_TANH, 0, 0, tc, H);
  for (int64_t u = 0; u < H; u++)
    h[u] = go[u] * tc[u];
}

static void run_dir(const lstm_run *r, const uint8_t *packed, int dir) {
  const lstm_p *p = r->p;
  const nr_rnn_dims d = dims_of(p);
  int64_t B = p->batch, H = p->hidden, I = p->input, k = I + H, g = 4 * H;
  const float *bias = (const float *)(packed + align64(p->b_bytes));
  const float *peep = p->peep ? bias + align64((uint64_t)g * sizeof(float)) / 4 : NULL;
  nr_gemm_operand wr = {(const float *)packed, 0, false, true};
  nr_epilogue ep = {.bias = bias, .act = NR_ACT_NONE};
  for (int64_t b = 0; b < B; b++) {
    float *h = r->z + b * k + I, *c = r->cell + b * H;
    const int64_t s = nr_rnn_s_off(&d, dir, b);
    if (r->h0)
      memcpy(h, r->h0 + s, (size_t)H * sizeof(float));
    else
      memset(h, 0, (size_t)H * sizeof(float));
    if (r->c0)
      memcpy(c, r->c0 + s, (size_t)H * sizeof(float));
    else
      memset(c, 0, (size_t)H * sizeof(float));
  }
  bool backward = p->reverse || dir == 1;
  for (int64_t s = 0; s < p->seq; s++) {
    int64_t t = backward ? p->seq - 1 - s : s;
    for (int64_t b = 0; b < B; b++)
      memcpy(r->z + b * k, r->x + nr_rnn_x_off(&d, t, b), (size_t)I * sizeof(float));
    nr_gemm(p->cfg, B, g, k, 1.0f, (nr_gemm_operand){r->z, k, false, false}, wr, r->gates,
            g, &ep, r->gemm_scratch, r->pool, r->threads);
    for (int64_t b = 0; b < B; b++) {
      float *h = r->z + b * k + I;
      cell(p, r->gates + b * g, r->cell + b * H, h, r->tanh_c, peep);
      if (r->y)
        memcpy(r->y + nr_rnn_y_off(&d, t, dir, b), h, (size_t)H * sizeof(float));
    }
  }
  for (int64_t b = 0; b < B; b++) {
    if (r->yh)
      memcpy(r->yh + nr_rnn_s_off(&d, dir, b), r->z + b * k + I, (size_t)H * sizeof(float));
    if (r->yc)
      memcpy(r->yc + nr_rnn_s_off(&d, dir, b), r->cell + b * H, (size_t)H * sizeof(float));
  }
}

/* The record against the step's slots and data before use (it comes from a file). */
static bool record_ok(const nr_exec_args *a, const lstm_p *p) {
  const nr_step *st = a->step;
  if (p->dirs < 1 || p->dirs > 2 || p->seq < 1 || p->batch < 1 || p->input < 1 ||
      p->hidden < 1 || p->hidden > INT32_MAX / 8 || p->input > INT32_MAX / 2 ||
      st->n_in < 1 || !a->in_slot[IN_X] || !a->in[IN_X] || !a->packed ||
      p->dir_bytes != dir_bytes(p) || st->packed_size != p->dirs * p->dir_bytes ||
      p->b_bytes != nr_gemm_packed_b_size(p->cfg, (int64_t)p->input + p->hidden,
                                          4 * (int64_t)p->hidden) ||
      st->scratch < scratch_bytes(p, 0))
    return false;
  const nr_slot *x = a->in_slot[IN_X];
  if (!f32_rank(x, 3) || x->dims[p->layout ? 1 : 0] != p->seq ||
      x->dims[p->layout ? 0 : 1] != p->batch || x->dims[2] != p->input)
    return false;
  for (int i = IN_H; i <= IN_C; i++)
    if (i < st->n_in && a->in_slot[i] && !state_ok(a->in_slot[i], p))
      return false;
  int64_t need[3] = {(int64_t)p->seq * p->dirs * p->batch * p->hidden,
                     (int64_t)p->dirs * p->batch * p->hidden,
                     (int64_t)p->dirs * p->batch * p->hidden};
  for (int i = 0; i < st->n_out && i < 3; i++) {
    const nr_slot *y = a->out_slot[i];
    if (y && (y->dtype != NR_DTYPE_FLOAT || slot_count(y) != need[i]))
      return false;
  }
  return true;
}

static nr_status lstm_run_step(const nr_exec_args *a) {
  lstm_p p;
  memcpy(&p, a->step->params, sizeof p);
  if (!record_ok(a, &p))
    return nr_errorf(a->err, NR_ERR_INVALID_MODEL, "%s: the step's record does not match "
                     "its tensors", a->step->tactic->id);
  int64_t B = p.batch, H = p.hidden, g = 4 * H, k = (int64_t)p.input + H;
  uint8_t *s = a->scratch;
  lstm_run r = {.p = &p, .x = a->in[IN_X], .pool = a->pool};
  const nr_step *st = a->step;
  r.h0 = IN_H < st->n_in ? a->in[IN_H] : NULL;
  r.c0 = IN_C < st->n_in ? a->in[IN_C] : NULL;
  r.y = st->n_out > 0 ? a->out[0] : NULL;
  r.yh = st->n_out > 1 ? a->out[1] : NULL;
  r.yc = st->n_out > 2 ? a->out[2] : NULL;
  r.z = (float *)s, s += align64((uint64_t)(B * k) * sizeof(float));
  r.gates = (float *)s, s += align64((uint64_t)(B * g) * sizeof(float));
  r.cell = (float *)s, s += align64((uint64_t)(B * H) * sizeof(float));
  r.tanh_c = (float *)s, s += align64((uint64_t)H * sizeof(float));
  r.gemm_scratch = s;
  int threads = nr_threadpool_size(a->pool);
  if (st->threads > 0 && st->threads < threads)
    threads = st->threads;
  uint64_t avail = st->scratch - scratch_bytes(&p, 0);
  while (threads > 1 && nr_gemm_scratch_size(p.cfg, B, g, k, threads) > avail)
    threads--;
  r.threads = B * g * k < LSTM_SERIAL_MACS ? 1 : threads;
  if (nr_gemm_scratch_size(p.cfg, B, g, k, r.threads) > avail)
    return nr_errorf(a->err, NR_ERR_INVALID_MODEL, "%s: scratch too small",
                     st->tactic->id);
  for (int dir = 0; dir < p.dirs; dir++)
    run_dir(&r, (const uint8_t *)a->packed + dir * p.dir_bytes, dir);
  return NR_OK;
}

const nr_tactic nr_tactics_cpu_rnn[] = {
    {"nr_f32_lstm", "", "LSTM", "nnroute", "gemm", NR_LAYOUT_PLAIN, 0, 20, lstm_supports,
     lstm_prepare, lstm_run_step},
    {0},
};
