/* onednn_q.c - the oneDNN int8 family: its tactic table (nr_tactics_onednn_q) and
 * the build-time parts its conv and GEMM tactics share (onednn_q.h): weight
 * quantization, the activation's parameters, the post-op mapping, packing the record
 * into the engine and checking it at run time. The primitive cache and the banded
 * executor are in onednn_q_exec.c.
 *
 * Key decision: one record for both kinds, written by nr_onednn_q_pack after the
 * primitives exist, so the weights are reordered exactly once, at build time, into the
 * format the primitives chose, and run() only points oneDNN at engine memory. */
#include "kernels/cpu/onednn_q/onednn_q.h"

#include "kernels/cpu/conv/conv_internal.h" /* conv_p: the conv rows' params record */
#include "ir/fused.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char head_magic[8] = "NRODNQ1";

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

/* ---- weights -------------------------------------------------------------------- */

void nr_onednn_q_weights(const float *w, int64_t n_out, int64_t len, int64_t so,
                         int64_t si, int8_t *q, float *scale) {
  for (int64_t o = 0; o < n_out; o++) {
    float mx = 0.0f;
    for (int64_t i = 0; i < len; i++) {
      float v = fabsf(w[o * so + i * si]);
      mx = v > mx ? v : mx;
    }
    float s = mx > 0.0f && isfinite(mx) ? mx / 127.0f : 1.0f;
    scale[o] = s;
    for (int64_t i = 0; i < len; i++) {
      float r = nearbyintf(w[o * so + i * si] / s);
      q[o * so + i * si] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
    }
  }
}

int nr_onednn_q_act_qmax(void) {
  dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  bool vnni = (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
              (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
  return vnni ? 255 : 127;
}

nr_status nr_onednn_q_input_params(const nr_tactic_ctx *c, nr_qparams *q) {
  int qmax = nr_onednn_q_act_qmax();
  nr_status s = nr_quant_act_params(c, 0, qmax, q);
  if (s)
    return s;
  if (!(q->scale > 0.0f) || !isfinite(1.0f / q->scale) || q->zero_point < 0 ||
      q->zero_point > qmax) {
    char b[256];
    return nr_errorf(c->err, NR_ERR_INVALID_ARGUMENT, "%s: unusable int8 quantization "
                     "of input '%s' (scale %g, zero point %d)",
                     nr_node_describe(c->node, b, sizeof b),
                     nr_step_in(c, 0) ? nr_step_in(c, 0)->name : "?", (double)q->scale,
                     (int)q->zero_point);
  }
  return NR_OK;
}

/* ---- post-ops ------------------------------------------------------------------- */

bool nr_onednn_q_act_post_ops(dnnl_post_ops_t po, nr_act act, float a, float b) {
  dnnl_alg_kind_t alg;
  float al = 0.0f, be = 0.0f;
  switch (act) {
  case NR_ACT_NONE: return true;
  case NR_ACT_RELU: alg = dnnl_eltwise_relu; break;
  case NR_ACT_LEAKY_RELU: alg = dnnl_eltwise_relu, al = a; break;
  case NR_ACT_CLIP: alg = dnnl_eltwise_clip_v2, al = a, be = b; break;
  case NR_ACT_SIGMOID: alg = dnnl_eltwise_logistic; break;
  case NR_ACT_TANH: alg = dnnl_eltwise_tanh; break;
  case NR_ACT_SILU: alg = dnnl_eltwise_swish, al = 1.0f; break;
  case NR_ACT_GELU: alg = dnnl_eltwise_gelu_erf; break;
  case NR_ACT_GELU_TANH: alg = dnnl_eltwise_gelu_tanh; break;
  case NR_ACT_HARD_SWISH: alg = dnnl_eltwise_hardswish; break;
  case NR_ACT_HARD_SIGMOID: /* oneDNN 2.6 has none: clip(a x + b, 0, 1) */
    return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, a, b) ==
               dnnl_success &&
           dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip_v2, 0.0f, 1.0f) ==
               dnnl_success;
  default: return false;
  }
  return dnnl_post_ops_append_eltwise(po, 1.0f, alg, al, be) == dnnl_success;
}

/* ---- build time: the packed record -------------------------------------------------- */

static bool reorder_weights(const dnnl_memory_desc_t *from, const int8_t *q,
                            const dnnl_memory_desc_t *to, void *dst) {
  dnnl_engine_t engine = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t r = NULL;
  dnnl_memory_t mf = NULL, mt = NULL;
  dnnl_stream_t s = NULL;
  bool ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success &&
            dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, NULL) ==
                dnnl_success &&
            dnnl_primitive_create(&r, pd) == dnnl_success &&
            dnnl_memory_create(&mf, from, engine, (void *)q) == dnnl_success &&
            dnnl_memory_create(&mt, to, engine, dst) == dnnl_success &&
            dnnl_stream_create(&s, engine, dnnl_stream_default_flags) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, mf}, {DNNL_ARG_TO, mt}};
    ok = dnnl_primitive_execute(r, s, 2, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
  }
  dnnl_stream_destroy(s);
  dnnl_memory_destroy(mf);
  dnnl_memory_destroy(mt);
  dnnl_primitive_destroy(r);
  dnnl_primitive_desc_destroy(pd);
  dnnl_engine_destroy(engine);
  return ok;
}

nr_status nr_onednn_q_pack(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                           nr_onednn_q_head *h, const nr_onednn_q_prim *p,
                           const dnnl_memory_desc_t *user_md, const int8_t *q,
                           const float *scales, const float *bias) {
  size_t n = h->n_out;
  memcpy(h->magic, head_magic, sizeof h->magic);
  h->w_md = p->w_md;
  h->scales_off = align64(sizeof *h);
  h->bias_off = bias ? h->scales_off + n * sizeof(float) : 0;
  h->w_off = align64(h->scales_off + (bias ? 2 : 1) * n * sizeof(float));
  h->w_size = dnnl_memory_desc_get_size(&p->w_md);
  size_t total = h->w_off + h->w_size;
  uint8_t *buf = aligned_alloc(64, align64(total));
  if (!buf)
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: %zu bytes of int8 weights",
                     st->tactic->id, total);
  memset(buf, 0, align64(total));
  memcpy(buf, h, sizeof *h);
  memcpy(buf + h->scales_off, scales, n * sizeof(float));
  if (bias)
    memcpy(buf + h->bias_off, bias, n * sizeof(float));
  nr_status s = NR_OK;
  if (!reorder_weights(user_md, q, &p->w_md, buf + h->w_off)) {
    char b[256];
    s = nr_errorf(c->err, NR_ERR_UNSUPPORTED, "%s: %s: oneDNN cannot reorder the int8 "
                  "weights into its format", nr_node_describe(c->node, b, sizeof b),
                  st->tactic->id);
  }
  if (!s)
    s = nr_plan_add_weights(plan, buf, total, &st->packed_offset, c->err);
  free(buf);
  if (!s)
    st->packed_size = total;
  if (!s) /* W (input 1 of the conv and of the product) lives on in oneDNN's format */
    nr_step_absorb(st, 1);
  return s;
}

/* ---- run time ------------------------------------------------------------------- */

const nr_onednn_q_head *nr_onednn_q_head_get(const nr_exec_args *a, const char *who) {
  const nr_onednn_q_head *h = a->packed;
  uint64_t size = a->step->packed_size;
  if (!h || size < sizeof *h || memcmp(h->magic, head_magic, sizeof h->magic)) {
    nr_errorf(a->err, NR_ERR_INVALID_ARGUMENT, "%s: the step's packed int8 record is "
              "missing or not one", who);
    return NULL;
  }
  uint64_t n4 = (uint64_t)h->n_out * sizeof(float);
  bool ok = h->scales_off >= sizeof *h && h->scales_off <= size &&
            n4 <= size - h->scales_off &&
            (!h->bias_off || (h->bias_off <= size && n4 <= size - h->bias_off)) &&
            h->w_off % 64 == 0 && h->w_off <= size && h->w_size <= size - h->w_off &&
            h->w_size == dnnl_memory_desc_get_size(&h->w_md) && h->x_scale > 0.0f &&
            h->bands >= 1 && h->rows >= 1 && h->last_rows >= 1 && h->last_rows <= h->rows &&
            h->threads >= 1 && h->y_round >= 0 && h->y_round <= NR_Q8_ROUND_FMA &&
            (!h->y_round || (h->y_qmax >= 1 && h->y_qmax <= 255 && h->y_inv_scale > 0.0f));
  if (!ok) {
    nr_errorf(a->err, NR_ERR_INVALID_ARGUMENT, "%s: the step's packed int8 record has "
              "offsets or sizes outside its %llu bytes", who, (unsigned long long)size);
    return NULL;
  }
  return h;
}

/* ---- 8-bit activations (the int8_chain pass) ---------------------------------------- */

/* Whether oneDNN applies activation act itself (no pass over Y afterwards). */
static bool act_in_primitive(nr_act act, float a, float b) {
  dnnl_post_ops_t po = NULL;
  bool ok = dnnl_post_ops_create(&po) == dnnl_success && nr_onednn_q_act_post_ops(po, act, a, b);
  dnnl_post_ops_destroy(po);
  return ok;
}

/* The conv rows read a uint8 input 0 that a producer requantized on this step's own
 * grid, rounding as nr_quantize_u8 does: the executor copies the bytes where it would
 * have quantized the floats. They write a uint8 output 0 when nothing runs over Y
 * after the primitive (no residual, whose sum post-op reads Y, and an activation
 * oneDNN applies): each band runs into a float buffer and is requantized there, for
 * either family's reader. */
static bool conv_io8(const nr_tactic_ctx *c, nr_io8 *cap) {
  nr_f32_view v;
  conv_p p;
  const nr_tactic_ctx *f = nr_f32_view_init(&v, c);
  bool ok = f && nr_conv_parse(f, &p);
  nr_f32_view_free(&v);
  if (!ok)
    return false;
  *cap = (nr_io8){.in = true,
                  .out = !p.has_res && act_in_primitive((nr_act)p.act, p.act_a, p.act_b),
                  .qmax = nr_onednn_q_act_qmax(),
                  .round = NR_Q8_ROUND_FMA,
                  .out_rounds = 1u << NR_Q8_ROUND_MUL | 1u << NR_Q8_ROUND_FMA};
  return true;
}

static bool has_u8(const nr_tactic_ctx *c) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  return (x && x->dtype == NR_DTYPE_UINT8) || (y && y->dtype == NR_DTYPE_UINT8);
}

/* A uint8 output: the record gets the slot's grid, and the scratch a float band per
 * thread (nr_onednn_q_scratch's last term, for the head prepare() made). */
static void set_y8(nr_plan *plan, nr_step *st, const nr_slot *y) {
  nr_onednn_q_head *h = (nr_onednn_q_head *)(void *)(plan->weights + st->packed_offset);
  conv_p p;
  memcpy(&p, st->params, sizeof p);
  h->y_inv_scale = 1.0f / y->q8_scale;
  h->y_zp = y->q8_zero_point, h->y_qmax = y->q8_qmax, h->y_round = y->q8_round;
  uint64_t band = (uint64_t)h->rows * (uint64_t)p.ow * (uint64_t)p.m * sizeof(float);
  st->scratch += (uint64_t)h->threads * align64(band);
}

/* nr_conv_onednn_q_prepare parses float tensors only: it sees the step's uint8 slots
 * as float (the input's grid is the same either way), after checking that the input
 * slot holds this step's grid; a uint8 output then gets its grid in the record. */
static nr_status conv_prepare8(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  if (!has_u8(c))
    return nr_conv_onednn_q_prepare(c, plan, st); /* the real ctx: the calibration lookup
                                                     follows reorders through its steps */
  if (x->dtype == NR_DTYPE_UINT8) {
    nr_qparams q;
    nr_status s = nr_onednn_q_input_params(c, &q);
    if (s)
      return s;
    if (q.scale != x->q8_scale || q.zero_point != x->q8_zero_point ||
        x->q8_qmax != nr_onednn_q_act_qmax() || x->q8_round != NR_Q8_ROUND_FMA) {
      char b[256];
      return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s: the uint8 input '%s' is on "
                       "another grid than this step's", nr_node_describe(c->node, b, sizeof b),
                       st->tactic->id, x->name);
    }
  }
  nr_f32_view v;
  const nr_tactic_ctx *f = nr_f32_view_init(&v, c);
  nr_status s = f ? nr_conv_onednn_q_prepare(f, plan, st)
                  : nr_errorf(c->err, NR_ERR_NOMEM, "%s: out of memory", st->tactic->id);
  nr_f32_view_free(&v);
  if (!s && y->dtype == NR_DTYPE_UINT8)
    set_y8(plan, st, y);
  return s;
}

/* ---- the table ------------------------------------------------------------------ */

/* Priorities against nnroute's own int8 kernels (kernels/cpu/qgemm: VNNI 100-125, AVX2
 * 60-85, portable 10-30), from whole-model runs at 1 and 2 threads on the 2-core
 * AVX-512 VNNI machine. Convs: above them all. resnet50 ran as fast either way and
 * mobilenet_v2 2.5x faster here, since only this tactic runs depthwise convs and mixing
 * it with the PLAIN qgemm convs costs two reorders per depthwise conv. GEMMs: below
 * the SIMD qgemm kernels, which tie or win on the M = 1 classifier layers of the CNN
 * models (this tactic wins by 10-40% on 64-128-row products). */
#define CONV_PRIO 130
#define GEMM_PRIO 50
#define Q NR_PREC_INT8, NR_DEVICE_CPU
#define CONV_ROW(dom, op)                                                              \
  {"onednn_conv_int8", dom, op, "onednn", "onednn", NR_LAYOUT_NHWC, 0, CONV_PRIO,        \
   nr_conv_onednn_q_supports, conv_prepare8, nr_conv_onednn_q_run, Q, conv_io8},
#define GEMM_ROW(dom, op)                                                              \
  {"onednn_matmul_int8", dom, op, "onednn", "gemm", NR_LAYOUT_PLAIN, 0, GEMM_PRIO,       \
   nr_gemm_onednn_q_supports, nr_gemm_onednn_q_prepare, nr_gemm_onednn_q_run, Q},

const nr_tactic nr_tactics_onednn_q[] = {
    CONV_ROW("", "Conv")
    CONV_ROW(NR_DOMAIN, "FusedConv")
    GEMM_ROW("", "Gemm")
    GEMM_ROW("", "MatMul")
    GEMM_ROW(NR_DOMAIN, "FusedGemm")
    GEMM_ROW(NR_DOMAIN, "FusedMatMul")
    {0},
};
