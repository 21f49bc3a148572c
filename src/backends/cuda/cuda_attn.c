/* cuda_attn.c - ONNX Attention (opset 23+; what recognize.attention makes of a model's
 * MatMul/Softmax/MatMul pattern) on the GPU with the fused kernel of kernels_attn.cu.
 *
 * Key decision: the same subset as the CPU tactic (nr_f32_attention__*), decided the
 * same way from the slots: fp32, 3-D inputs ([B, S, heads * D], read in place with a
 * head stride of D) or 4-D, grouped-query heads, an optional float or bool mask that
 * broadcasts to [B, Hq, S, T] with T as its last dim, is_causal, scale (default
 * 1/sqrt(D)); no KV cache, softcap, windows or qk_matmul_output. Anything else fails
 * the CUDA build with the node's name. The geometry is recomputed from the slots at
 * run time (a few integer operations), so the params hold only what the node's
 * attributes say.
 *
 * nr_cuda_f32_attention has two kernels, chosen per launch by the global knob
 * cuda.attention.fp32 (params[0]): the row-wise one (8 query rows a block: wide grids
 * at batch 1) or the register-tiled one (kernels_attn_f32.cu: 32 rows a block, each
 * shared-memory read feeding 8 rows; head sizes 32, 64, 128), auto taking the tiled
 * kernel whenever the head size allows.
 *
 * nr_cuda_f16_attention runs on tensor cores (fp16 products, fp32 softmax and
 * accumulation): the register-resident kernel when Q, K and V are fp16 with D == Dv in
 * {32, 64, 128} and aligned rows (decided per launch, kernels_attn.cu), else the staged
 * one (D and Dv multiples of 16 up to 128, all keys' scores in shared memory: what
 * this tactic accepts). Its precision is fp16, so select never picks it: the fp16 pass
 * (cuda_half.c) moves an attention step onto it when Q, K or V arrive in fp16, and Q,
 * K, V and Y are then fp16 or fp32 each, as their slots say. */
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_knobs.h"

#include <math.h>
#include <string.h>

enum { IN_Q, IN_K, IN_V, IN_MASK, IN_PAST_K };

/* A plain fp32 tensor (or fp16 too, when half) with no empty dim. */
static bool fl(const nr_slot *s, bool half) {
  if (!s || s->layout != NR_LAYOUT_PLAIN ||
      (s->dtype != NR_DTYPE_FLOAT && !(half && s->dtype == NR_DTYPE_FLOAT16)))
    return false;
  for (int d = 0; d < s->rank; d++)
    if (s->dims[d] < 1)
      return false;
  return true;
}

static void strides(int64_t *st, bool three, int64_t heads, int64_t seq, int64_t hd) {
  st[0] = heads * seq * hd;
  st[1] = three ? hd : seq * hd;
  st[2] = three ? heads * hd : hd;
}

static bool qkv(const nr_node *n, const nr_slot *q, const nr_slot *k, const nr_slot *v,
                bool half, nr_cuda_attn *g) {
  if (!fl(q, half) || !fl(k, half) || !fl(v, half) || (q->rank != 3 && q->rank != 4) ||
      k->rank != q->rank || v->rank != q->rank)
    return false;
  bool three = q->rank == 3;
  int sd = three ? 1 : 2, hd = q->rank - 1;
  g->hq = three ? nr_attr_int(n, "q_num_heads", 0) : q->dims[1];
  g->hkv = three ? nr_attr_int(n, "kv_num_heads", 0) : k->dims[1];
  if (g->hq < 1 || g->hkv < 1 || g->hq % g->hkv)
    return false;
  g->b = q->dims[0], g->s = q->dims[sd], g->t = k->dims[sd];
  g->d = three ? q->dims[hd] / g->hq : q->dims[hd];
  g->dv = three ? v->dims[hd] / g->hkv : v->dims[hd];
  if (three && (q->dims[hd] % g->hq || k->dims[hd] != g->d * g->hkv || v->dims[hd] % g->hkv))
    return false;
  if (!three && (k->dims[1] != v->dims[1] || k->dims[3] != g->d))
    return false;
  if (k->dims[0] != g->b || v->dims[0] != g->b || v->dims[sd] != g->t || g->dv > 256)
    return false;
  strides(g->qs, three, g->hq, g->s, g->d);
  strides(g->ks, three, g->hkv, g->t, g->d);
  strides(g->vs, three, g->hkv, g->t, g->dv);
  strides(g->ys, three, g->hq, g->s, g->dv);
  return true;
}

static bool mask_of(const nr_slot *m, nr_cuda_attn *g) {
  memset(g->ms, 0, sizeof g->ms);
  g->mask = 0;
  if (!m)
    return true;
  if (m->layout != NR_LAYOUT_PLAIN || m->rank < 1 || m->rank > 4 ||
      m->dims[m->rank - 1] != g->t ||
      (m->dtype != NR_DTYPE_FLOAT && m->dtype != NR_DTYPE_BOOL))
    return false;
  int64_t full[4] = {g->b, g->hq, g->s, g->t}, st[4] = {0}, s = 1;
  for (int d = 3, e = m->rank - 1; e >= 0; d--, e--) {
    if (m->dims[e] != 1 && m->dims[e] != full[d])
      return false;
    st[d] = m->dims[e] == 1 ? 0 : s;
    s *= m->dims[e];
  }
  if (st[3] != 1) /* the kernel reads keys contiguously */
    return false;
  memcpy(g->ms, st, sizeof g->ms);
  g->mask = m->dtype == NR_DTYPE_BOOL ? 2 : 1;
  return true;
}

static bool geom(const nr_node *n, const nr_step *st, const nr_slot *const *in,
                 const nr_slot *const *out, bool half, nr_cuda_attn *g) {
  memset(g, 0, sizeof *g);
  if (!n || strcmp(n->op_type, "Attention") || (n->domain && n->domain[0]) || n->opset < 23 ||
      st->n_in < 3 || nr_attr_float(n, "softcap", 0.0f) != 0.0f ||
      nr_attr_int(n, "left_window_size", -1) != -1 ||
      nr_attr_int(n, "right_window_size", -1) != -1)
    return false;
  for (int i = IN_PAST_K; i < st->n_in; i++)
    if (in[i])
      return false;
  for (int o = 1; o < st->n_out; o++)
    if (out[o])
      return false;
  if (!qkv(n, in[IN_Q], in[IN_K], in[IN_V], half, g) ||
      !mask_of(st->n_in > IN_MASK ? in[IN_MASK] : NULL, g))
    return false;
  const nr_slot *y = st->n_out > 0 ? out[0] : NULL;
  int64_t want = g->b * g->hq * g->s * g->dv, have = 1;
  for (int d = 0; y && d < y->rank; d++)
    have *= y->dims[d];
  const nr_attr *sc = nr_node_attr(n, "scale");
  g->scale = sc ? sc->f : (float)(1.0 / sqrt((double)g->d));
  g->causal = nr_attr_int(n, "is_causal", 0) != 0;
  if (!fl(y, half) || y->rank != in[IN_Q]->rank || have != want)
    return false;
  return !half || (g->d % 16 == 0 && g->dv % 16 == 0 && g->d <= 128 && g->dv <= 128 &&
                   nr_cuda_attention_tc_smem(g->d, g->dv, g->t) <= NR_CUDA_ATTN_TC_SMEM_MAX);
}

static bool supports_prec(const nr_tactic_ctx *c, bool half) {
  const nr_slot *in[NR_STEP_MAX_IO], *out[NR_STEP_MAX_IO];
  nr_cuda_attn g;
  for (int i = 0; i < c->step->n_in; i++)
    in[i] = nr_step_in(c, i);
  for (int o = 0; o < c->step->n_out; o++)
    out[o] = nr_step_out(c, o);
  return geom(c->node, c->step, in, out, half, &g);
}

static bool attn_supports(const nr_tactic_ctx *c) { return supports_prec(c, false); }
static bool attn_supports_tc(const nr_tactic_ctx *c) { return supports_prec(c, true); }

/* params[0] of an fp32 step: which kernel cuda.attention.fp32 asks for. */
enum { F32_AUTO, F32_ROWWISE, F32_TILED };

static nr_status attn_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  (void)plan;
  if (!supports_prec(c, step->tactic->precision == NR_PREC_FP16))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "node no longer supported");
  const char *v = nr_route_get(c->route, NR_KNOB_CUDA_ATTENTION_FP32, NULL);
  step->params[0] = v && !strcmp(v, "rowwise") ? F32_ROWWISE
                    : v && !strcmp(v, "tiled") ? F32_TILED
                                               : F32_AUTO;
  return NR_OK;
}

/* The register-tiled kernel for this launch: asked for, or by default, whenever the
 * head size has an instance (D == Dv in {32, 64, 128}). Measured on an H200 (BERT-base
 * fp32, docs/cuda.md) it wins at batch 32 (24.66 -> 19.97 ms a model) and at batch 1
 * too (1.836 -> 1.384 ms), where its grid of 48 blocks is below one per
 * multiprocessor: the row-wise kernel's wider grid does not make up for reading an
 * operand from shared memory per multiply-add. */
static bool use_tiled(const nr_cuda_attn *g, int want) {
  return want != F32_ROWWISE && nr_cuda_attention_tiled_ok(g);
}

static int io_of(const nr_exec_args *a) {
  int io = 0;
  for (int i = 0; i < 3; i++)
    io |= a->in_slot[i]->dtype == NR_DTYPE_FLOAT16 ? NR_CUDA_ATTN_Q_HALF << i : 0;
  return io | (a->out_slot[0]->dtype == NR_DTYPE_FLOAT16 ? NR_CUDA_ATTN_Y_HALF : 0);
}

static nr_status attn_tc_run(const nr_exec_args *a) {
  nr_cuda_attn g;
  if (!geom(a->node, a->step, a->in_slot, a->out_slot, true, &g))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "unexpected attention shapes");
  return nr_cuda_check(nr_cuda_attention_tc(&g, a->in[IN_Q], a->in[IN_K], a->in[IN_V],
                                            g.mask ? a->in[IN_MASK] : NULL, a->out[0],
                                            io_of(a), nr_cuda_stream(a)),
                       a->err, "tensor-core attention kernel");
}

static nr_status attn_run(const nr_exec_args *a) {
  nr_cuda_attn g;
  if (!geom(a->node, a->step, a->in_slot, a->out_slot, false, &g))
    return nr_errorf(a->err, NR_ERR_INTERNAL, "unexpected attention shapes");
  if (use_tiled(&g, a->step->params[0]))
    return nr_cuda_check(nr_cuda_attention_tiled(&g, a->in[IN_Q], a->in[IN_K], a->in[IN_V],
                                                 g.mask ? a->in[IN_MASK] : NULL, a->out[0],
                                                 nr_cuda_stream(a)),
                         a->err, "tiled attention kernel");
  return nr_cuda_check(nr_cuda_attention(&g, a->in[IN_Q], a->in[IN_K], a->in[IN_V],
                                         g.mask ? a->in[IN_MASK] : NULL, a->out[0],
                                         nr_cuda_stream(a)),
                       a->err, "attention kernel");
}

const nr_tactic nr_tactics_cuda_attn[] = {
    {"nr_cuda_f32_attention", "", "Attention", "nnroute", "fused", NR_LAYOUT_PLAIN, 0, 20,
     attn_supports, attn_prepare, attn_run, NR_PREC_FP32, NR_DEVICE_CUDA},
    {"nr_cuda_f16_attention", "", "Attention", "nnroute", "tensorcore", NR_LAYOUT_PLAIN, 0, 20,
     attn_supports_tc, attn_prepare, attn_tc_run, NR_PREC_FP16, NR_DEVICE_CUDA},
    {0},
};
