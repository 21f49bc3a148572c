/* gemm_onednn_q.c - onednn_matmul_int8: Gemm, MatMul, nnroute.FusedGemm and
 * nnroute.FusedMatMul at precision int8 through oneDNN 2.6's matmul primitive (u8
 * activations, s8 weights per output column, fp32 output; the scheme and the record
 * are in ../onednn_q.h).
 *
 * Key decision: matmul rather than inner product, because oneDNN 2.6's inner product
 * refuses a src zero point while matmul takes one (and still picks its brgemm kernel):
 * the activation keeps its calibrated asymmetric grid. The node goes through the GEMM
 * family's shared analysis (gemm_tactic.h), so it means the same product here as in
 * every fp32 GEMM tactic; what this tactic runs is the 2-D case with a constant B
 * (the weights): A not transposed, a MatMul's batch folded into M, a bias that is a
 * constant column vector, any residual and activation. alpha joins the output scales,
 * beta scales the bias (and a residual C, through the sum post-op's scale). */
#include "kernels/cpu/gemm/gemm_knobs.h"
#include "kernels/cpu/gemm/gemm_tactic.h"
#include "kernels/cpu/onednn_q/onednn_q.h"

#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool fits(const nr_gemm_step_params *p) {
  return (p->flags & GEMM_F_B_CONST) && !(p->flags & (GEMM_F_A_CONST | GEMM_F_TA |
                                                      GEMM_F_BATCHED)) &&
         p->m > 0 && p->n > 0 && p->k > 0 && p->n <= INT32_MAX &&
         (p->bias == GEMM_BIAS_NONE || p->bias == GEMM_BIAS_PACKED_COL) &&
         p->alpha != 0.0f && isfinite(p->alpha) && isfinite(p->beta);
}

static bool analyze(const nr_tactic_ctx *c, nr_gemm_step_params *p) {
  gemm_view v;
  gemm_view_from_ctx(c, &v);
  return gemm_analyze(&v, p) && fits(p);
}

bool nr_gemm_onednn_q_supports(const nr_tactic_ctx *c) {
  nr_gemm_step_params p;
  return analyze(c, &p);
}

static void matmul_key(const nr_gemm_step_params *p, const nr_onednn_q_head *h,
                       nr_onednn_q_key *k) {
  memset(k, 0, sizeof *k);
  k->kind = NR_ONEDNN_Q_MATMUL;
  k->x_scale = h->x_scale;
  k->x_zp = h->x_zp;
  k->n_out = h->n_out;
  k->bands = h->bands, k->rows = h->rows, k->last_rows = h->last_rows;
  memcpy(k->rec, p, sizeof *p);
}

static void md2(dnnl_memory_desc_t *md, int64_t r, int64_t c, dnnl_data_type_t t,
                dnnl_format_tag_t tag) {
  dnnl_dims_t d = {r, c};
  dnnl_memory_desc_init_by_tag(md, 2, d, t, tag);
}

/* dst = post_ops(scales * (xq - zp) w + bias'), post-ops sum (residual) then
 * activation. */
static dnnl_primitive_attr_t matmul_attr(const nr_gemm_step_params *p,
                                         const nr_onednn_q_key *k, const float *scales,
                                         bool *manual) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  int32_t zp = k->x_zp;
  float sum = p->resid == GEMM_RES_C ? p->beta : 1.0f;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                dnnl_success &&
            dnnl_primitive_attr_set_output_scales(attr, p->n, 1 << 1, scales) ==
                dnnl_success &&
            (!zp || dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &zp) ==
                        dnnl_success) &&
            dnnl_post_ops_create(&po) == dnnl_success &&
            (p->resid == GEMM_RES_NONE ||
             dnnl_post_ops_append_sum(po, sum) == dnnl_success);
  *manual = ok && !nr_onednn_q_act_post_ops(po, (nr_act)p->act, p->act_a, p->act_b);
  ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  dnnl_post_ops_destroy(po);
  if (!ok) {
    dnnl_primitive_attr_destroy(attr);
    return NULL;
  }
  return attr;
}

/* The primitive of a band of `rows` rows of A. */
static bool create(const nr_onednn_q_key *k, const float *scales, dnnl_engine_t eng,
                   uint32_t rows, nr_onednn_q_band *band, dnnl_memory_desc_t *w_md,
                   dnnl_memory_desc_t *b_md, bool *manual) {
  nr_gemm_step_params p;
  memcpy(&p, k->rec, sizeof p);
  dnnl_memory_desc_t wany;
  md2(&band->xq_md, rows, p.k, dnnl_u8, dnnl_ab);
  md2(&band->y_md, rows, p.n, dnnl_f32, dnnl_ab);
  md2(b_md, 1, p.n, dnnl_f32, dnnl_ab);
  md2(&wany, p.k, p.n, dnnl_s8, dnnl_format_tag_any);
  dnnl_matmul_desc_t md;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = matmul_attr(&p, k, scales, manual);
  bool ok = attr &&
            dnnl_matmul_desc_init(&md, &band->xq_md, &wany,
                                  p.bias != GEMM_BIAS_NONE ? b_md : NULL,
                                  &band->y_md) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL) == dnnl_success;
  if (ok) {
    *w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    band->sp_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ok = dnnl_primitive_create(&band->op, pd) == dnnl_success;
  }
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  return ok;
}

/* Bands of rows of A and C. */
static nr_onednn_q_geom matmul_geom(const nr_gemm_step_params *p,
                                    const nr_onednn_q_head *h) {
  return (nr_onednn_q_geom){.images = 1,
                            .body = p->m * p->k,
                            .x_image = p->m * p->k,
                            .x_band = (int64_t)h->rows * p->k,
                            .y_image = p->m * p->n,
                            .y_band = (int64_t)h->rows * p->n};
}

/* Output scales alpha s_x s_w[j]; the bias beta C[j] (Gemm) or C[j] (FusedMatMul),
 * divided by them. */
static void scales_bias(const nr_tactic_ctx *c, const nr_gemm_step_params *p, float xs,
                        const float *sw, float *scales, float *bias) {
  const float *cb = p->bias != GEMM_BIAS_NONE ? nr_step_const(c, 2) : NULL;
  const nr_slot *cs = nr_step_in(c, 2);
  int64_t cnt = 1;
  for (int d = 0; cb && d < cs->rank; d++)
    cnt *= cs->dims[d];
  float beta = p->op == GEMM_OP_GEMM || p->op == GEMM_OP_FUSED_GEMM ? p->beta : 1.0f;
  for (int64_t j = 0; j < p->n; j++) {
    scales[j] = p->alpha * xs * sw[j];
    if (cb)
      bias[j] = beta * cb[cnt == 1 ? 0 : j] / scales[j];
  }
}

nr_status nr_gemm_onednn_q_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  char node[256];
  nr_gemm_step_params p;
  if (!analyze(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s cannot run it",
                     nr_node_describe(c->node, node, sizeof node), st->tactic->id);
  if (nr_route_is(c->route, NR_KNOB_GEMM_THREADS_MAX, c->node, "1"))
    st->threads = 1;
  nr_qparams xq;
  nr_status s = nr_onednn_q_input_params(c, &xq);
  if (s)
    return s;
  bool tb = (p.flags & GEMM_F_TB) != 0; /* B stored [N, K] */
  int8_t *wq = malloc((size_t)(p.n * p.k));
  float *sw = malloc(sizeof(float) * 3 * (size_t)p.n);
  float *scales = sw + p.n, *bias = sw + 2 * p.n;
  if (!wq || !sw) {
    free(wq), free(sw);
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: out of memory quantizing the weights",
                     nr_node_describe(c->node, node, sizeof node));
  }
  /* Column j of op(B) is row j of a [N, K] B, or column j of a [K, N] one. */
  nr_onednn_q_weights(nr_step_const(c, 1), p.n, p.k, tb ? p.k : 1, tb ? 1 : p.n, wq, sw);
  scales_bias(c, &p, xq.scale, sw, scales, bias);
  nr_onednn_q_head h = {.x_scale = xq.scale, .x_zp = xq.zero_point, .n_out = (uint32_t)p.n};
  nr_onednn_q_key k;
  matmul_key(&p, &h, &k);
  double macs = (double)p.m * (double)p.n * (double)p.k;
  const nr_onednn_q_prim *prim =
      nr_onednn_q_choose_bands(c, st, &k, scales, create, p.m, macs, &h.threads);
  if (!prim) {
    s = nr_errorf(c->err, NR_ERR_UNSUPPORTED, "%s: oneDNN cannot create this int8 "
                  "matmul (%lldx%lldx%lld)", nr_node_describe(c->node, node, sizeof node),
                  (long long)p.m, (long long)p.n, (long long)p.k);
  } else {
    h.bands = k.bands, h.rows = k.rows, h.last_rows = k.last_rows;
    dnnl_memory_desc_t user;
    dnnl_dims_t d = {p.k, p.n}, strides = {tb ? 1 : p.n, tb ? p.k : 1};
    dnnl_memory_desc_init_by_strides(&user, 2, d, dnnl_s8, strides);
    s = nr_onednn_q_pack(c, plan, st, &h, prim, &user, wq, scales,
                         p.bias != GEMM_BIAS_NONE ? bias : NULL);
  }
  free(wq), free(sw);
  if (s)
    return s;
  memset(st->params, 0, sizeof st->params);
  memcpy(st->params, &p, sizeof p);
  nr_onednn_q_geom g = matmul_geom(&p, &h);
  st->scratch = nr_onednn_q_scratch(&g, prim, &h);
  return NR_OK;
}

nr_status nr_gemm_onednn_q_run(const nr_exec_args *a) {
  const char *who = "onednn_matmul_int8";
  const nr_onednn_q_head *h = nr_onednn_q_head_get(a, who);
  if (!h)
    return a->err ? a->err->status : NR_ERR_INVALID_ARGUMENT;
  nr_gemm_step_params p;
  memcpy(&p, a->step->params, sizeof p);
  nr_onednn_q_key k;
  matmul_key(&p, h, &k);
  const float *scales = (const float *)((const char *)a->packed + h->scales_off);
  const nr_onednn_q_prim *prim = nr_onednn_q_lookup(&k, scales, create);
  if (!prim)
    return nr_errorf(a->err, NR_ERR_RUNTIME, "%s: oneDNN cannot create the primitive", who);
  gemm_product pr;
  gemm_product_get(a, &p, 0, &pr);
  if (p.resid != GEMM_RES_NONE && pr.r != pr.c)
    memcpy(pr.c, pr.r, sizeof(float) * (size_t)(p.m * p.n));
  nr_onednn_q_geom g = matmul_geom(&p, h);
  nr_status s = nr_onednn_q_execute(a, prim, h, &g, pr.a, pr.c, who);
  if (!s && prim->manual_act)
    nr_act_apply((nr_act)p.act, p.act_a, p.act_b, pr.c, p.m * p.n);
  return s;
}
