/* cuda_fuse.c - the residual pass of CUDA plans (nr_pass_cuda_fuse, after layout and
 * before the fp16 pass): a product whose only reader is an Add of a same-shaped
 * activation takes that activation as its residual (cuBLASLt's C matrix, beta 1), and
 * the Add's step goes away. A transformer's two residual Adds per layer are then no
 * steps at all: each cost a launch and a read and write of the whole activation,
 * about a tenth of a batch-1 BERT layer on the GPU.
 *
 * Rules. The knob cuda.gemm.residual (global: on, off) turns the pass off. A pair is
 * merged when the product step runs a CUDA GEMM tactic with no activation fused (the
 * Add would come after it, cuBLASLt's epilogue before), writes one PLAIN tensor that
 * is not a graph output and that exactly one step reads, that step is the fp32
 * elementwise tactic on a plain ONNX Add of two tensors of the output's shape, and
 * the other addend is an activation (graph input or produced by a step before the
 * product: the product reads it when it runs). The product's step then reads the
 * addend as input 3 (nodes of fewer inputs get -1 in between) and writes the Add's
 * output; the GEMM tactic must still accept the rewritten step, else the pair is left
 * as it was. The product's old output slot stays in the plan unused (the memory pass
 * gives it no space).
 *
 * Key decision: a plan pass rather than a graph rewrite, because only the CUDA
 * GEMM tactics take a residual operand (the CPU's FusedMatMul does not), and because
 * it must see the chosen tactics: it runs before the fp16 pass, so the dtype of the
 * residual and of the output are decided afterwards exactly as for any product's
 * inputs and outputs (a residual whose dtype differs from the output's is added by
 * the GEMM's epilogue pass instead of being C). */
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_knobs.h"
#include "plan/pass.h"

#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_cuda_gemm[];

static bool in_table(const nr_tactic *t, const nr_tactic *table) {
  for (const nr_tactic *r = table; r->id; r++)
    if (r == t)
      return true;
  return false;
}

static bool graph_output(const nr_plan *p, int s) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->outputs[i] == s)
      return true;
  return false;
}

/* The one step reading slot s after step k, or -1 (none, or more than one). */
static int sole_reader(const nr_plan *p, int k, int s) {
  int found = -1;
  for (int j = 0; j < p->n_steps; j++) {
    const nr_step *st = &p->steps[j];
    for (int i = 0; i < st->n_in; i++) {
      if (st->in[i] != s)
        continue;
      if (found >= 0 || j <= k)
        return -1;
      found = j;
      break;
    }
  }
  return found;
}

/* The step writing slot s, or -1. */
static int producer(const nr_plan *p, int s) {
  for (int j = 0; j < p->n_steps; j++)
    for (int o = 0; o < p->steps[j].n_out; o++)
      if (p->steps[j].out[o] == s)
        return j;
  return -1;
}

static bool plain_float(const nr_slot *s) {
  return s->layout == NR_LAYOUT_PLAIN && s->dtype == NR_DTYPE_FLOAT;
}

/* Whether step k is a CUDA product with no activation and one output. */
static bool bare_product(const nr_plan *p, const nr_step *st) {
  if (!st->tactic || !in_table(st->tactic, nr_tactics_cuda_gemm) || st->node < 0 ||
      st->n_out != 1 || st->out[0] < 0 || st->n_in > 3)
    return false;
  const nr_node *n = &p->graph->nodes[st->node];
  nr_act act = NR_ACT_NONE;
  float a, b;
  return nr_fused_act_read(n, &act, &a, &b) && act == NR_ACT_NONE;
}

/* Whether step j is the fp32 elementwise tactic on a plain Add. */
static bool plain_add(const nr_plan *p, const nr_step *st) {
  if (!st->tactic || strcmp(st->tactic->id, "nr_cuda_f32_eltwise") || st->node < 0 ||
      st->n_in != 2 || st->n_out != 1)
    return false;
  const nr_node *n = &p->graph->nodes[st->node];
  return !strcmp(n->op_type, "Add") && (!n->domain || !n->domain[0]);
}

/* Tries to merge the Add reading product k's output into k; true when it did. */
static bool merge(nr_compile_ctx *cc, int k) {
  nr_plan *p = cc->plan;
  nr_step *st = &p->steps[k];
  int y = st->out[0];
  if (!bare_product(p, st) || graph_output(p, y) || !plain_float(&p->slots[y]))
    return false;
  int j = sole_reader(p, k, y);
  if (j < 0 || !plain_add(p, &p->steps[j]))
    return false;
  const nr_step *add = &p->steps[j];
  int r = add->in[0] == y ? add->in[1] : add->in[0], z = add->out[0];
  if (r < 0 || r == y || z < 0 || p->slots[r].kind == NR_SLOT_CONST ||
      !plain_float(&p->slots[r]) || !plain_float(&p->slots[z]) ||
      !nr_slot_same_dims(&p->slots[r], &p->slots[y]) || !nr_slot_same_dims(&p->slots[z], &p->slots[y]))
    return false;
  int pr = producer(p, r);
  if (pr >= k || (pr < 0 && p->slots[r].kind != NR_SLOT_INPUT))
    return false;
  nr_step was = *st;
  for (int i = st->n_in; i < 3; i++)
    st->in[i] = -1;
  st->in[3] = r;
  st->n_in = 4;
  st->out[0] = z;
  const nr_node *n = &p->graph->nodes[st->node];
  nr_error e = {0};
  nr_tactic_ctx tc = {p, n, st, cc->route, &e, cc->threads, cc->calib, cc->device};
  if (st->tactic->supports && !st->tactic->supports(&tc)) {
    *st = was;
    return false;
  }
  memmove(&p->steps[j], &p->steps[j + 1], sizeof *p->steps * (size_t)(p->n_steps - j - 1));
  p->n_steps--;
  return true;
}

static nr_status run_fuse(nr_compile_ctx *cc) {
  nr_plan *p = cc->plan;
  if (p->device != NR_DEVICE_CUDA ||
      nr_route_is(cc->route, NR_KNOB_CUDA_GEMM_RESIDUAL, NULL, "off"))
    return NR_OK;
  for (int k = 0; k < p->n_steps; k++)
    merge(cc, k);
  return NR_OK;
}

const nr_pass nr_pass_cuda_fuse = {"cuda_fuse", run_fuse};
