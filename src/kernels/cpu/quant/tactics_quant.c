/* tactics_quant.c - per-tensor QuantizeLinear and DequantizeLinear tactics
 * (nr_quant_f32 / nr_dequant_f32, portable and AVX2), the steps a QDQ model keeps
 * between layers: where a Q -> DQ pair feeds anything but an int8 node, the pair runs
 * as written. On the reference tactic those two steps were three quarters of a QDQ
 * resnet18's time.
 *
 * Key decision: only the per-tensor form (scalar scale and zero point, 8-bit types,
 * float data, no precision or block attributes) has a fast tactic; per-axis and
 * blocked quantization stay on the reference, which is the oracle these kernels are
 * tested against bit for bit (tests/unit/test_quant_tactics.c). Work is split into
 * contiguous chunks over the thread pool. */
#include "kernels/cpu/quant/quant.h"
#include "plan/tactic.h"
#include "util/threadpool.h"

#include <math.h>
#include <string.h>

void nr_quant_f32_portable(const float *x, void *y, size_t n, float scale, int zp,
                           bool is_signed) {
  const int lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
  uint8_t *yu = y;
  for (size_t i = 0; i < n; i++) {
    float v = nearbyintf(x[i] / scale) + (float)zp;
    int q = isnan(v) ? 0 : v < lo ? lo : v > hi ? hi : (int)v;
    yu[i] = (uint8_t)q;
  }
}

void nr_dequant_f32_portable(const void *q, float *y, size_t n, float scale, int zp,
                             bool is_signed) {
  const uint8_t *qu = q;
  for (size_t i = 0; i < n; i++)
    y[i] = (float)((is_signed ? (int)(int8_t)qu[i] : (int)qu[i]) - zp) * scale;
}

/* The per-tensor parameters of node n (inputs 1 and 2), or false. qtype is the
 * 8-bit side's dtype. */
static bool per_tensor(const nr_tactic_ctx *c, nr_dtype qtype) {
  const nr_node *n = c->node;
  const nr_slot *s = nr_step_in(c, 1), *z = nr_step_in(c, 2);
  const float *sv = nr_step_const(c, 1);
  if (!s || !sv || s->dtype != NR_DTYPE_FLOAT || s->rank > 1 || (s->rank == 1 && s->dims[0] != 1))
    return false;
  if (!isfinite(*sv) || *sv == 0)
    return false;
  if (z && (!nr_step_const(c, 2) || z->dtype != qtype || z->rank > 1 ||
            (z->rank == 1 && z->dims[0] != 1)))
    return false;
  return nr_attr_int(n, "block_size", 0) == 0 && nr_attr_int(n, "precision", 0) == 0;
}

static bool is_8bit(nr_dtype t) { return t == NR_DTYPE_UINT8 || t == NR_DTYPE_INT8; }

static bool quant_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  return x && y && x->dtype == NR_DTYPE_FLOAT && is_8bit(y->dtype) &&
         nr_attr_int(c->node, "saturate", 1) == 1 && per_tensor(c, y->dtype);
}

static bool dequant_supports(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  return x && y && is_8bit(x->dtype) && y->dtype == NR_DTYPE_FLOAT && per_tensor(c, x->dtype);
}

typedef struct q_params {
  float scale;
  int32_t zp;
  uint8_t is_signed, avx2;
} q_params;

_Static_assert(sizeof(q_params) <= NR_TACTIC_PARAMS, "q_params fits a step's record");

static nr_status q_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, bool avx2,
                           int qside) {
  (void)plan;
  q_params p = {*(const float *)nr_step_const(c, 1), 0, 0, avx2};
  const nr_slot *q = qside ? nr_step_out(c, 0) : nr_step_in(c, 0);
  const void *z = nr_step_in(c, 2) ? nr_step_const(c, 2) : NULL;
  p.is_signed = q->dtype == NR_DTYPE_INT8;
  if (z)
    p.zp = p.is_signed ? *(const int8_t *)z : *(const uint8_t *)z;
  memcpy(st->params, &p, sizeof p);
  return NR_OK;
}

static nr_status quant_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return q_prepare(c, plan, st, false, 1);
}
static nr_status quant_prepare_avx2(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return q_prepare(c, plan, st, true, 1);
}
static nr_status dequant_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return q_prepare(c, plan, st, false, 0);
}
static nr_status dequant_prepare_avx2(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  return q_prepare(c, plan, st, true, 0);
}

typedef struct q_job {
  const nr_exec_args *a;
  q_params p;
  bool quant;
} q_job;

static void q_task(void *arg, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const q_job *j = arg;
  size_t n = (size_t)(end - begin);
  if (j->quant) {
    const float *x = (const float *)j->a->in[0] + begin;
    uint8_t *y = (uint8_t *)j->a->out[0] + begin;
    (j->p.avx2 ? nr_quant_f32__avx2 : nr_quant_f32_portable)(x, y, n, j->p.scale, j->p.zp,
                                                             j->p.is_signed);
  } else {
    const uint8_t *x = (const uint8_t *)j->a->in[0] + begin;
    float *y = (float *)j->a->out[0] + begin;
    (j->p.avx2 ? nr_dequant_f32__avx2 : nr_dequant_f32_portable)(x, y, n, j->p.scale, j->p.zp,
                                                                 j->p.is_signed);
  }
}

static nr_status q_run(const nr_exec_args *a, bool quant) {
  q_job j = {a, {0}, quant};
  memcpy(&j.p, a->step->params, sizeof j.p);
  const nr_slot *s = a->in_slot[0];
  int64_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= s->dims[d];
  nr_parallel_for(a->pool, n, 1 << 16, a->step->threads, q_task, &j);
  return NR_OK;
}

static nr_status quant_run(const nr_exec_args *a) { return q_run(a, true); }
static nr_status dequant_run(const nr_exec_args *a) { return q_run(a, false); }

#define QROW(id, op, isa, prio, sup, prep, run)                                          \
  {id, "", op, "nnroute", "quant", NR_LAYOUT_PLAIN, isa, prio, sup, prep, run},

const nr_tactic nr_tactics_cpu_quant[] = {
    QROW("nr_quant_f32__avx2", "QuantizeLinear", NR_ISA_AVX2, 20, quant_supports,
         quant_prepare_avx2, quant_run)
    QROW("nr_quant_f32", "QuantizeLinear", 0, 15, quant_supports, quant_prepare, quant_run)
    QROW("nr_dequant_f32__avx2", "DequantizeLinear", NR_ISA_AVX2, 20, dequant_supports,
         dequant_prepare_avx2, dequant_run)
    QROW("nr_dequant_f32", "DequantizeLinear", 0, 15, dequant_supports, dequant_prepare,
         dequant_run)
    {0},
};
