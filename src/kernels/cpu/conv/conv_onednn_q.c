/* conv_onednn_q.c - onednn_conv_int8: Conv and nnroute.FusedConv at precision int8
 * through oneDNN 2.6 (u8 activations, s8 per-channel weights, fp32 output; the scheme
 * and the record are in ../onednn_q.h). Any group count (depthwise included), stride,
 * dilation and padding; bias, residual (sum post-op) and activation in the primitive.
 *
 * Key decision: the tactic works in NHWC. oneDNN's int8 kernels (brgconv, jit_int8,
 * brdgmm depthwise) take channels-last activations and fall back to a reference loop
 * for NCHW, so in NHWC the f32 -> u8 quantization is one elementwise pass, the
 * output is written where the next int8 conv reads it, and the layout pass converts
 * only at the network's NCHW edges (pooling, graph inputs and outputs). The work
 * items are bands of output rows (../onednn_q/onednn_q.h says why): the quantized copy
 * of each image carries its top and bottom padding as rows of zero-point bytes, so
 * every band is a convolution without vertical padding on a window of rows, and all
 * bands but the last are one primitive. */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/conv_knobs.h"
#include "kernels/cpu/onednn_q/onednn_q.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* The record part that shapes the primitives (the layout the residual arrives in and
 * the knob bits do not), the activation's quantization and the bands. */
static void conv_key(const conv_p *p, const nr_onednn_q_head *h, nr_onednn_q_key *k) {
  memset(k, 0, sizeof *k);
  conv_p r = *p;
  r.res_layout = 0;
  r.opts = 0;
  k->kind = NR_ONEDNN_Q_CONV;
  k->x_scale = h->x_scale;
  k->x_zp = h->x_zp;
  k->n_out = h->n_out;
  k->bands = h->bands, k->rows = h->rows, k->last_rows = h->last_rows;
  memcpy(k->rec, &r, sizeof r);
}

/* Input rows a band of `rows` output rows reads (the padding rows included). */
static int64_t band_in_rows(const conv_p *p, int64_t rows) {
  return (rows - 1) * p->sh + (int64_t)(p->kh - 1) * p->dh + 1;
}

/* Where the work items read and write: each image's quantized input carries its top
 * and bottom padding rows (zero point bytes), so a band is a conv without vertical
 * padding on a window of rows. */
static nr_onednn_q_geom conv_geom(const conv_p *p, const nr_onednn_q_head *h) {
  int64_t row = (int64_t)p->w * p->c, need = band_in_rows(p, p->oh);
  int64_t total = p->pt + p->h > need ? p->pt + p->h : need;
  return (nr_onednn_q_geom){.images = p->n,
                            .pad_top = p->pt * row,
                            .body = p->h * row,
                            .pad_bottom = (total - p->pt - p->h) * row,
                            .x_image = p->h * row,
                            .x_band = (int64_t)h->rows * p->sh * row,
                            .y_image = (int64_t)p->m * p->oh * p->ow,
                            .y_band = (int64_t)h->rows * p->ow * p->m};
}

static void weights_md(const conv_p *p, dnnl_format_tag_t tag, dnnl_memory_desc_t *md) {
  int g = p->group;
  if (g == 1) {
    dnnl_dims_t d = {p->m, p->c, p->kh, p->kw};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_s8, tag == dnnl_goihw ? dnnl_oihw : tag);
  } else {
    dnnl_dims_t d = {g, p->m / g, p->c / g, p->kh, p->kw};
    dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_s8, tag);
  }
}

/* dst = post_ops(scales * (conv(xq - zp, w) + bias)), post-ops sum then activation. */
static dnnl_primitive_attr_t conv_attr(const conv_p *p, const nr_onednn_q_key *k,
                                       const float *scales, bool *manual) {
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  int32_t zp = k->x_zp;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
            dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                dnnl_success &&
            dnnl_primitive_attr_set_output_scales(attr, p->m, 1 << 1, scales) ==
                dnnl_success &&
            (!zp || dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &zp) ==
                        dnnl_success) &&
            dnnl_post_ops_create(&po) == dnnl_success &&
            (!p->has_res || dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success);
  *manual = ok && !nr_onednn_q_act_post_ops(po, (nr_act)p->act, p->act_a, p->act_b);
  ok = ok && dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  dnnl_post_ops_destroy(po);
  if (!ok) {
    dnnl_primitive_attr_destroy(attr);
    return NULL;
  }
  return attr;
}

/* The primitive of a band of `rows` output rows: one image, no vertical padding. */
static bool create(const nr_onednn_q_key *k, const float *scales, dnnl_engine_t eng,
                   uint32_t rows, nr_onednn_q_band *band, dnnl_memory_desc_t *w_md,
                   dnnl_memory_desc_t *b_md, bool *manual) {
  const conv_p *p = (const conv_p *)(const void *)k->rec;
  dnnl_dims_t xd = {1, p->c, band_in_rows(p, rows), p->w}, yd = {1, p->m, rows, p->ow};
  dnnl_dims_t bd = {p->m}, st = {p->sh, p->sw}, dl = {p->dh - 1, p->dw - 1};
  dnnl_dims_t pl = {0, p->pl};
  dnnl_dims_t pr = {0, (p->ow - 1) * p->sw + (p->kw - 1) * p->dw + 1 - p->w - p->pl};
  pr[1] = pr[1] < 0 ? 0 : pr[1];
  dnnl_memory_desc_t wany;
  dnnl_memory_desc_init_by_tag(&band->xq_md, 4, xd, dnnl_u8, dnnl_nhwc);
  dnnl_memory_desc_init_by_tag(&band->y_md, 4, yd, dnnl_f32, dnnl_nhwc);
  dnnl_memory_desc_init_by_tag(b_md, 1, bd, dnnl_f32, dnnl_x);
  weights_md(p, dnnl_format_tag_any, &wany);
  dnnl_convolution_desc_t cd;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = conv_attr(p, k, scales, manual);
  bool ok = attr &&
            dnnl_dilated_convolution_forward_desc_init(
                &cd, dnnl_forward_inference, dnnl_convolution_direct, &band->xq_md, &wany,
                p->has_bias ? b_md : NULL, &band->y_md, st, dl, pl, pr) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL) == dnnl_success;
  if (ok) {
    *w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    band->sp_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ok = dnnl_primitive_create(&band->op, pd) == dnnl_success;
  }
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  return ok;
}

bool nr_conv_onednn_q_supports(const nr_tactic_ctx *c) {
  conv_p p;
  return nr_conv_parse(c, &p);
}

/* Output scales s_x * s_w[o] and the bias divided by them (oneDNN adds the bias to
 * the int32 sum before scaling). */
static void scales_bias(const conv_p *p, float xs, const float *sw, const float *b,
                        float *scales, float *bias) {
  for (int o = 0; o < p->m; o++) {
    scales[o] = xs * sw[o];
    if (b)
      bias[o] = b[o] / scales[o];
  }
}

nr_status nr_conv_onednn_q_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  char node[256];
  conv_p p;
  if (!nr_conv_parse(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: %s cannot run it",
                     nr_node_describe(c->node, node, sizeof node), st->tactic->id);
  if (nr_route_is(c->route, NR_KNOB_CONV_THREADS, c->node, "1"))
    p.opts |= CONV_OPT_SERIAL, st->threads = 1;
  nr_qparams xq;
  nr_status s = nr_onednn_q_input_params(c, &xq);
  if (s)
    return s;
  int64_t per = (int64_t)(p.c / p.group) * p.kh * p.kw;
  int8_t *wq = malloc((size_t)(p.m * per));
  float *sw = malloc(sizeof(float) * 3 * (size_t)p.m);
  float *scales = sw + p.m, *bias = sw + 2 * p.m;
  if (!wq || !sw) {
    free(wq), free(sw);
    return nr_errorf(c->err, NR_ERR_NOMEM, "%s: out of memory quantizing the weights",
                     nr_node_describe(c->node, node, sizeof node));
  }
  nr_onednn_q_weights(nr_step_const(c, 1), p.m, per, per, 1, wq, sw);
  scales_bias(&p, xq.scale, sw, p.has_bias ? nr_step_const(c, 2) : NULL, scales, bias);
  nr_onednn_q_head h = {.x_scale = xq.scale, .x_zp = xq.zero_point, .n_out = (uint32_t)p.m};
  nr_onednn_q_key k;
  conv_key(&p, &h, &k);
  double macs = (double)p.n * p.m * p.oh * p.ow * (double)per;
  const nr_onednn_q_prim *prim =
      nr_onednn_q_choose_bands(c, st, &k, scales, create, p.oh, macs, &h.threads);
  if (!prim) {
    s = nr_errorf(c->err, NR_ERR_UNSUPPORTED, "%s: oneDNN cannot create this int8 "
                  "convolution", nr_node_describe(c->node, node, sizeof node));
  } else {
    h.bands = k.bands, h.rows = k.rows, h.last_rows = k.last_rows;
    dnnl_memory_desc_t user;
    weights_md(&p, dnnl_goihw, &user);
    s = nr_onednn_q_pack(c, plan, st, &h, prim, &user, wq, scales,
                         p.has_bias ? bias : NULL);
  }
  free(wq), free(sw);
  if (s)
    return s;
  memcpy(st->params, &p, sizeof p);
  nr_onednn_q_geom g = conv_geom(&p, &h);
  st->scratch = nr_onednn_q_scratch(&g, prim, &h);
  return NR_OK;
}

nr_status nr_conv_onednn_q_run(const nr_exec_args *a) {
  const char *who = "onednn_conv_int8";
  const nr_onednn_q_head *h = nr_onednn_q_head_get(a, who);
  if (!h)
    return a->err ? a->err->status : NR_ERR_INVALID_ARGUMENT;
  conv_p q = *conv_params(a->step);
  bool post;
  const float *res = nr_conv_res(a, NR_LAYOUT_NHWC, &q, &post);
  if (post) /* the residual arrives in another layout: added after the primitive */
    q.has_res = 0;
  nr_onednn_q_key k;
  conv_key(&q, h, &k);
  const float *scales = (const float *)((const char *)a->packed + h->scales_off);
  const nr_onednn_q_prim *prim = nr_onednn_q_lookup(&k, scales, create);
  if (!prim)
    return nr_errorf(a->err, NR_ERR_RUNTIME, "%s: oneDNN cannot create the primitive", who);
  int64_t yn = (int64_t)q.n * q.m * q.oh * q.ow;
  if (res && res != a->out[0])
    memcpy(a->out[0], res, sizeof(float) * (size_t)yn);
  nr_onednn_q_geom g = conv_geom(&q, h);
  nr_status s = nr_onednn_q_execute(a, prim, h, &g, a->in[0], a->out[0], who);
  if (s)
    return s;
  if (prim->manual_act && !post)
    nr_act_apply((nr_act)q.act, q.act_a, q.act_b, a->out[0], yn);
  nr_conv_finish(a, NR_LAYOUT_NHWC, conv_params(a->step), post);
  return NR_OK;
}
