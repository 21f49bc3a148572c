/* cuda_attn.c - ONNX Attention (opset 23+; what recognize.attention makes of a model's
 * MatMul/Softmax/MatMul pattern) on the GPU with the fused kernel of kernels_attn.cu.
 *
 * Key decision: the same subset as the CPU tactic (nr_f32_attention__*), decided by
 * the same description (ir/node_desc.h) of the slots: fp32, 3-D inputs ([B, S, heads * D], read in place with a
 * head stride of D) or 4-D, grouped-query heads, an optional float or bool mask that
 * broadcasts to [B, Hq, S, T] with T as its last dim, is_causal, scale (default
 * 1/sqrt(D)); no KV cache, softcap, windows or qk_matmul_output. Anything else fails
 * the CUDA build with the node's name. The geometry (the node's nr_attn_desc, as the
 * CPU tactic reads it) is recomputed from the slots at run time (a few integer operations), so the params hold only what the node's
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

#include <string.h>

enum { IN_Q, IN_K, IN_V, IN_MASK };

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

/* The kernels' geometry from the node's description (ir/node_desc.h, the one the CPU
 * tactic reads), when these kernels run it: Q, K, V, Y plain fp32 (or fp16 too, when
 * half), a mask read along contiguous keys, Dv <= 256, and for the tensor-core kernel
 * head sizes that are multiples of 16 up to 128 with the scores fitting shared
 * memory. */
static bool geom(const nr_node *n, const nr_step *st, const nr_slot *const *in,
                 const nr_slot *const *out, bool half, nr_cuda_attn *g) {
  memset(g, 0, sizeof *g);
  if (!n || st->n_in < 3 || !fl(in[IN_Q], half) || !fl(in[IN_K], half) ||
      !fl(in[IN_V], half) || st->n_out < 1 || !fl(out[0], half))
    return false;
  const nr_slot *m = st->n_in > IN_MASK ? in[IN_MASK] : NULL;
  if (m && m->layout != NR_LAYOUT_PLAIN)
    return false;
  nr_node_io io;
  nr_attn_desc d;
  nr_node_io_from_slots(st->n_in, in, st->n_out, out, &io);
  if (nr_attn_desc_parse(n, &io, &d, NULL) || d.dv > 256 || (d.mask && d.ms[3] != 1))
    return false; /* the kernel reads keys contiguously */
  g->b = d.b, g->hq = d.hq, g->hkv = d.hkv, g->s = d.s, g->t = d.t;
  g->d = d.d, g->dv = d.dv;
  g->mask = d.mask, g->causal = d.causal, g->scale = d.scale;
  memcpy(g->qs, d.qs, sizeof g->qs);
  memcpy(g->ks, d.ks, sizeof g->ks);
  memcpy(g->vs, d.vs, sizeof g->vs);
  memcpy(g->ys, d.ys, sizeof g->ys);
  memcpy(g->ms, d.ms, sizeof g->ms);
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
