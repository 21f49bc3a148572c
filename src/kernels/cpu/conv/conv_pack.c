/* conv_pack.c - build-time weight packing of the conv tactics. Each packer reads the
 * constant W (and B) through nr_step_const, builds the packed form in a temporary
 * buffer first (nr_plan_add_weights may move the weights, and W lives there), then
 * appends it and records step->packed_offset / packed_size.
 *
 * Layouts: GEMM A per group (im2col, 1x1: W is already [M/g x C/g*kh*kw] row major),
 * GEMM B per group (NHWC: rows ordered (kh, kw, c)), NCHW8C blocks
 * [M/8][C/8][kh][kw][8 in][8 out] + bias padded to 8, depthwise blocks
 * [C/8][kh][kw][8] + bias, implicit GEMM panels [M/mr][C][kh*kw][mr] (small-plane
 * panels the same with mr = 32), pointwise panels
 * [C/kc][M/mr][kc][mr], Winograd U[xi] = (G g G^T)[xi] as M x C per tile
 * position xi, each packed as a GEMM A.
 *
 * The GEMM-based forms (gemm_a, nhwc_b, winograd) are written once as pure functions
 * of (params, raw W, buffers), so conv.prepack=off runs the very same packer into
 * scratch at run time that =on runs into the engine at build time. */
#include "kernels/cpu/conv/conv_internal.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Every run() whose prepare appends packed W reads W from there only (the raw-W
 * fallback of conv.prepack=off never gets here), so the raw W need not be stored. */
static nr_status append(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st, void *buf,
                        uint64_t size) {
  nr_status s = nr_plan_add_weights(plan, buf, size, &st->packed_offset, c->err);
  st->packed_size = size;
  free(buf);
  if (!s)
    nr_step_absorb(st, 1);
  return s;
}

static nr_status oom(const nr_tactic_ctx *c) {
  return nr_errorf(c->err, NR_ERR_NOMEM, "conv: cannot pack weights");
}

static conv_p *params_rw(nr_step *st) { return (conv_p *)(void *)st->params; }

nr_status nr_conv_pack_copy(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  (void)c, (void)plan, (void)st; /* W and B are read in place from the constants */
  return NR_OK;
}

/* Appends bias padded to a multiple of 8 after n floats of packed weights. */
static void put_bias(const nr_tactic_ctx *c, const conv_p *p, float *dst) {
  const float *b = nr_step_const(c, 2);
  memset(dst, 0, sizeof(float) * (size_t)nr_ceil8(p->m));
  if (b)
    memcpy(dst, b, sizeof(float) * (size_t)p->m);
}

/* total zeroed floats, 64-byte aligned (free()), or NULL. */
static float *zeroed_floats(int64_t total) {
  float *buf = aligned_alloc(64, (sizeof(float) * (size_t)total + 63) / 64 * 64);
  if (buf)
    memset(buf, 0, sizeof(float) * (size_t)total);
  return buf;
}

nr_status nr_conv_pack_nchw8c(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p *p = params_rw(st);
  const float *w = nr_step_const(c, 1);
  int64_t mb = nr_ceil8(p->m) / 8, cb = nr_ceil8(p->c) / 8, kk = (int64_t)p->kh * p->kw;
  int64_t nw = mb * cb * kk * 64, total = nw + mb * 8;
  float *buf = zeroed_floats(total);
  if (!buf)
    return oom(c);
  for (int64_t m = 0; m < p->m; m++)
    for (int64_t ci = 0; ci < p->c; ci++)
      for (int64_t q = 0; q < kk; q++)
        buf[(((m / 8) * cb + ci / 8) * kk + q) * 64 + (ci % 8) * 8 + m % 8] =
            w[(m * p->c + ci) * kk + q];
  put_bias(c, p, buf + nw);
  p->extra = (uint32_t)nw;
  return append(c, plan, st, buf, sizeof(float) * total);
}

nr_status nr_conv_pack_dw8(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  conv_p *p = params_rw(st);
  const float *w = nr_step_const(c, 1);
  int64_t cb = nr_ceil8(p->c) / 8, kk = (int64_t)p->kh * p->kw;
  int64_t nw = cb * kk * 8, total = nw + cb * 8;
  float *buf = zeroed_floats(total);
  if (!buf)
    return oom(c);
  for (int64_t ch = 0; ch < p->c; ch++)
    for (int64_t q = 0; q < kk; q++)
      buf[((ch / 8) * kk + q) * 8 + ch % 8] = w[ch * kk + q];
  put_bias(c, p, buf + nw);
  p->extra = (uint32_t)nw;
  return append(c, plan, st, buf, sizeof(float) * total);
}

nr_status nr_conv_pack_igemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  const conv_p *p = conv_params(st);
  conv_igemm_geo g;
  nr_conv_igemm_geo(p, &g);
  const float *w = nr_step_const(c, 1);
  /* per group (one for an ungrouped node): its mg output channels in panels of mr,
   * each [cg][taps][mr]; the groups' packs one after another */
  int64_t groups = p->group > 1 ? p->group : 1, mg = p->m / groups, cg = p->c / groups;
  int64_t taps = (int64_t)p->kh * p->kw, npan = (mg + g.mr - 1) / g.mr;
  int64_t total = groups * npan * g.mr * taps * cg;
  float *buf = zeroed_floats(total);
  if (!buf)
    return oom(c);
  for (int64_t m = 0; m < p->m; m++) {
    int64_t pan = m / mg * npan + m % mg / g.mr, lane = m % mg % g.mr;
    for (int64_t ci = 0; ci < cg; ci++)
      for (int64_t t = 0; t < taps; t++)
        buf[((pan * cg + ci) * taps + t) * g.mr + lane] = w[(m * cg + ci) * taps + t];
  }
  return append(c, plan, st, buf, sizeof(float) * total);
}

nr_status nr_conv_pack_sp(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  const conv_p *p = conv_params(st);
  const float *w = nr_step_const(c, 1);
  int64_t taps = (int64_t)p->kh * p->kw, mr = NR_CONV_SP_MR;
  int64_t total = (p->m + mr - 1) / mr * mr * taps * p->c;
  float *buf = zeroed_floats(total);
  if (!buf)
    return oom(c);
  for (int64_t m = 0; m < p->m; m++)
    for (int64_t ci = 0; ci < p->c; ci++)
      for (int64_t t = 0; t < taps; t++)
        buf[(((m / mr) * p->c + ci) * taps + t) * mr + m % mr] = w[(m * p->c + ci) * taps + t];
  return append(c, plan, st, buf, sizeof(float) * total);
}

nr_status nr_conv_pack_pw(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  const conv_p *p = conv_params(st);
  const float *w = nr_step_const(c, 1);
  int64_t mr = nr_conv_pw_mr(p->extra), mpad = (p->m + mr - 1) / mr * mr;
  int64_t kc = p->gemm.kc, total = mpad * p->c;
  float *buf = zeroed_floats(total);
  if (!buf)
    return oom(c);
  for (int64_t k0 = 0; k0 < p->c; k0 += kc) {
    int64_t kb = p->c - k0 < kc ? p->c - k0 : kc;
    float *blk = buf + k0 * mpad;
    for (int64_t m = 0; m < p->m; m++)
      for (int64_t k = 0; k < kb; k++)
        blk[((m / mr) * kb + k) * mr + m % mr] = w[m * p->c + k0 + k];
  }
  return append(c, plan, st, buf, sizeof(float) * total);
}

/* Winograd weight transform matrices G (alpha x 3). */
static const float g23[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
static const float g43[6][3] = {{1.0f / 4, 0, 0},
                                {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                {0, 0, 1}};

/* U = G g G^T for F(4,3), u[i * 6 + j], from one 3x3 filter g (row major). */
static void wino43_u(const float *g, float *u) {
  float t[6][3]; /* G g */
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 3; j++)
      t[i][j] = g43[i][0] * g[j] + g43[i][1] * g[3 + j] + g43[i][2] * g[6 + j];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++)
      u[i * 6 + j] = t[i][0] * g43[j][0] + t[i][1] * g43[j][1] + t[i][2] * g43[j][2];
}

nr_status nr_conv_pack_w43(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st) {
  const conv_p *p = conv_params(st);
  const float *w = nr_step_const(c, 1);
  int64_t mp = ((int64_t)p->m + 15) / 16 * 16, cn = p->c, total = 36 * cn * mp;
  float *buf = zeroed_floats(total);
  if (!buf)
    return oom(c);
  for (int64_t m = 0; m < p->m; m++) {
    int64_t m0 = m / 64 * 64, cw = mp - m0 < 64 ? mp - m0 : 64;
    for (int64_t ci = 0; ci < cn; ci++) {
      float u[36];
      wino43_u(w + (m * cn + ci) * 9, u);
      for (int xi = 0; xi < 36; xi++)
        buf[xi * cn * mp + m0 * cn + ci * cw + (m - m0)] = u[xi];
    }
  }
  return append(c, plan, st, buf, sizeof(float) * (uint64_t)total);
}

/* ---- the GEMM-based forms ----------------------------------------------------------- */

/* Bytes of one packed matrix (a group's, or a Winograd tile position's), 64-aligned. */
static size_t unit_bytes(const conv_p *p, conv_pack_kind k) {
  int64_t mg = p->m / p->group, k_ = (int64_t)(p->c / p->group) * p->kh * p->kw;
  switch (k) {
  case CONV_PACK_GEMM_A: return nr_conv_align64(nr_gemm_packed_a_size(p->gemm, mg, k_));
  case CONV_PACK_NHWC_B: return nr_conv_align64(nr_gemm_packed_b_size(p->gemm, k_, mg));
  case CONV_PACK_WINOGRAD: return nr_conv_align64(nr_gemm_packed_a_size(p->gemm, p->m, p->c));
  }
  return 0;
}

static int64_t units(const conv_p *p, conv_pack_kind k) {
  int64_t a = (int64_t)p->extra + 2;
  return k == CONV_PACK_WINOGRAD ? a * a : p->group;
}

/* Bytes of the packed form and of the temporary the packer needs beside it. */
static size_t packed_bytes(const conv_p *p, conv_pack_kind k) {
  return unit_bytes(p, k) * (size_t)units(p, k);
}
static size_t tmp_bytes(const conv_p *p, conv_pack_kind k) {
  int64_t mg = p->m / p->group, kk = (int64_t)(p->c / p->group) * p->kh * p->kw;
  int64_t a = (int64_t)p->extra + 2;
  switch (k) {
  case CONV_PACK_GEMM_A: return 0;
  case CONV_PACK_NHWC_B: return nr_conv_align64(sizeof(float) * (size_t)(kk * mg));
  case CONV_PACK_WINOGRAD: return nr_conv_align64(sizeof(float) * (size_t)(a * a * p->m * p->c));
  }
  return 0;
}

static void pack_gemm_a(const conv_p *p, const float *w, char *out) {
  int64_t mg = p->m / p->group, k = (int64_t)(p->c / p->group) * p->kh * p->kw;
  size_t sa = unit_bytes(p, CONV_PACK_GEMM_A);
  for (int g = 0; g < p->group; g++) {
    nr_gemm_operand a = {w + (int64_t)g * mg * k, k, false, false};
    nr_gemm_pack_a(p->gemm, mg, k, a, (float *)(out + sa * g));
  }
}

static void pack_nhwc_b(const conv_p *p, const float *w, float *tmp, char *out) {
  int64_t mg = p->m / p->group, cg = p->c / p->group, kk = (int64_t)p->kh * p->kw;
  int64_t k = cg * kk;
  size_t sb = unit_bytes(p, CONV_PACK_NHWC_B);
  for (int g = 0; g < p->group; g++) {
    for (int64_t m = 0; m < mg; m++)
      for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t q = 0; q < kk; q++)
          tmp[(q * cg + ci) * mg + m] = w[((g * mg + m) * cg + ci) * kk + q];
    nr_gemm_operand b = {tmp, mg, false, false};
    nr_gemm_pack_b(p->gemm, k, mg, b, (float *)(out + sb * g));
  }
}

static void pack_winograd(const conv_p *p, const float *w, float *u, char *out) {
  int a = (int)p->extra + 2;
  const float *G = a == 4 ? &g23[0][0] : &g43[0][0];
  int64_t mc = (int64_t)p->m * p->c;
  for (int64_t mcix = 0; mcix < mc; mcix++) {
    const float *g = w + mcix * 9;
    float t[6][3]; /* G g */
    for (int i = 0; i < a; i++)
      for (int j = 0; j < 3; j++)
        t[i][j] = G[i * 3] * g[j] + G[i * 3 + 1] * g[3 + j] + G[i * 3 + 2] * g[6 + j];
    for (int i = 0; i < a; i++)
      for (int j = 0; j < a; j++)
        u[(i * a + j) * mc + mcix] =
            t[i][0] * G[j * 3] + t[i][1] * G[j * 3 + 1] + t[i][2] * G[j * 3 + 2];
  }
  size_t sa = unit_bytes(p, CONV_PACK_WINOGRAD);
  for (int xi = 0; xi < a * a; xi++) {
    nr_gemm_operand op = {u + xi * mc, p->c, false, false};
    nr_gemm_pack_a(p->gemm, p->m, p->c, op, (float *)(out + sa * xi));
  }
}

static void pack_into(const conv_p *p, conv_pack_kind k, const float *w, void *tmp,
                      void *out) {
  switch (k) {
  case CONV_PACK_GEMM_A: pack_gemm_a(p, w, out); break;
  case CONV_PACK_NHWC_B: pack_nhwc_b(p, w, tmp, out); break;
  case CONV_PACK_WINOGRAD: pack_winograd(p, w, tmp, out); break;
  }
}

nr_status nr_conv_pack_gemm(const nr_tactic_ctx *c, nr_plan *plan, nr_step *st,
                            conv_pack_kind k) {
  const conv_p *p = conv_params(st);
  size_t size = packed_bytes(p, k), tmp = tmp_bytes(p, k);
  if (p->opts & CONV_OPT_RAW_W) { /* the engine keeps only the raw W (a constant slot) */
    st->packed_offset = st->packed_size = 0;
    st->scratch += size + tmp;
    return NR_OK;
  }
  void *t = tmp ? aligned_alloc(64, tmp) : NULL;
  void *buf = aligned_alloc(64, size + 64);
  if ((tmp && !t) || !buf) {
    free(t), free(buf);
    return oom(c);
  }
  pack_into(p, k, nr_step_const(c, 1), t, buf);
  free(t);
  return append(c, plan, st, buf, size);
}

const void *nr_conv_packed_w(const nr_exec_args *a, const conv_p *p, conv_pack_kind k,
                             char **scratch) {
  if (!(p->opts & CONV_OPT_RAW_W))
    return a->packed;
  char *out = *scratch;
  size_t size = packed_bytes(p, k);
  pack_into(p, k, a->in[1], out + size, out);
  *scratch = out + size + tmp_bytes(p, k);
  return out;
}
