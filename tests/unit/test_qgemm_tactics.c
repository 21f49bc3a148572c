/* test_qgemm_tactics.c - the int8 tactics of nr_tactics_cpu_qgemm (split from
 * test_qgemm.c, which tests the kernels): every row on a hand-built one-step plan
 * against the reference executor, then an int8 route through the whole compiler and
 * an engine file. Guard words surround outputs and scratch. */
#include "compiler/compile.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16

/* 64-byte aligned, size rounded up as aligned_alloc requires. */
static void *alloc64(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64); }

/* ---- tactics: one step by hand ----------------------------------------------------- */

/* Each int8 tactic row of nr_tactics_cpu_qgemm runs a hand-built plan of one step
 * (as test_conv_tactics.c does for fp32): slots, a calibration table with the input's
 * statistics, supports(), prepare(), run(). The result is compared tightly with the
 * reference executor run on the operands the tactic quantized (the activation grid
 * read back from the step's header, W through nr_qgemm_quantize_w), which checks the
 * whole plumbing (packing, im2col padding with the zero point, bias, residual,
 * activation), and loosely with the float reference: relative RMS error below 2%
 * (4% for the AVX2 kernels, whose activation grid has half as many steps). */

extern const nr_tactic nr_tactics_cpu_qgemm[];

#include "ir/fused.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/qgemm/qgemm_tactic.h"
#include "plan/quant.h"
#include "conv_step.h"
#include "op_test.h"

static const qt_header *qt_hdr_of(const nr_tactic_ctx *c, const nr_step *st) {
  return (const qt_header *)(c->plan->weights + st->packed_offset);
}

/* Activation grid and weights as the step quantized them: x and w replaced in place by
 * their dequantized values (w: channels x k, channel-major). */
static void dequantize_like(const nr_tactic_ctx *c, const nr_step *st, float *x, int64_t xn,
                            float *w, int64_t ch, int64_t k, int64_t stride_c,
                            int64_t stride_k) {
  const qt_header *h = (const qt_header *)(c->plan->weights + st->packed_offset);
  for (int64_t i = 0; i < xn; i++)
    x[i] = h->x_scale *
           (float)(nr_qgemm_quantize_x(x[i], h->inv_scale, h->zero_point, h->qmax) -
                   h->zero_point);
  int8_t *q = malloc((size_t)(ch * k));
  float *s = malloc(sizeof(float) * (size_t)ch);
  int32_t *sum = malloc(sizeof(int32_t) * (size_t)ch);
  nr_qgemm_quantize_w(ch, k, w, stride_c, stride_k, q, s, sum);
  for (int64_t i = 0; i < ch; i++)
    for (int64_t p = 0; p < k; p++)
      w[i * stride_c + p * stride_k] = s[i] * q[i * k + p];
  free(q), free(s), free(sum);
}

static double rel_rms(const float *got, const float *want, int64_t n) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < n; i++)
    e += (double)(got[i] - want[i]) * (got[i] - want[i]), r += (double)want[i] * want[i];
  return sqrt(e / (r + 1e-30));
}

typedef struct qconv_case {
  int n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw, group;
  bool bias, res;
  nr_act act;
} qconv_case;

/* Case k as conv_step.h's, with the node's activation parameters. */
static conv_case step_case(const qconv_case *k) {
  conv_case cc = CONV_CASE_SYMMETRIC(k);
  cc.act_a = k->act == NR_ACT_CLIP ? -0.25f : 0.1f, cc.act_b = 0.5f;
  return cc;
}

/* Conv (+ residual + activation) through the reference executor (conv_step.h). */
static bool conv_reference(const qconv_case *k, const float *x, const float *w,
                           const float *b, const float *r, float *y, int64_t *ydims) {
  conv_case cc = step_case(k);
  if (!conv_case_conv(&cc, x, w, b, y))
    return false;
  int64_t yd[4] = {cc.n, cc.m, conv_case_oh(&cc), conv_case_ow(&cc)};
  memcpy(ydims, yd, sizeof yd);
  int64_t n = conv_case_yn(&cc);
  for (int64_t i = 0; r && i < n; i++)
    y[i] += r[i];
  nr_act_apply(k->act, cc.act_a, 0.5f, y, n);
  return true;
}

/* The one-step plan (conv_step.h) and the calibration table with X's statistics. */
typedef struct qharness {
  conv_step cs;
  nr_calib calib;
} qharness;

static void qconv_build(qharness *hs, const qconv_case *k, const float *x, const float *w,
                        const float *b, bool fused) {
  memset(hs, 0, sizeof *hs);
  conv_case cc = step_case(k);
  conv_step_make(&hs->cs, &cc, w, b, &(conv_step_opts){.fused = fused});
  nr_error err = {0};
  nr_calib_observe(&hs->calib, "X", x, (size_t)conv_case_xn(&cc), &err);
}

/* Runs tactic tac on case k; returns whether it supported it. */
static bool qconv_case_run(nr_test_state *t, const nr_tactic *tac, const qconv_case *k,
                           unsigned seed, nr_threadpool *pool) {
  unsigned sd = seed;
  int64_t xn = (int64_t)k->n * k->c * k->h * k->w, cg = k->c / k->group;
  int64_t kk = cg * k->kh * k->kw, wn = (int64_t)k->m * kk;
  float *x = random_floats(xn, &sd), *w = random_floats(wn, &sd),
        *b = random_floats(k->m, &sd);
  for (int64_t i = 0; i < xn; i++)
    x[i] = 0.5f + 1.5f * x[i]; /* [-1, 2]: an asymmetric range, zero point inside */
  int64_t yd[4], ycap = (int64_t)k->n * k->m * (k->h + 2 * k->ph) * (k->w + 2 * k->pw) + 64;
  float *want = malloc(sizeof(float) * (size_t)ycap),
        *tight = malloc(sizeof(float) * (size_t)ycap);
  qconv_case k0 = *k;
  k0.act = NR_ACT_NONE, k0.res = false;
  bool ok = conv_reference(&k0, x, w, b, NULL, want, yd), supported = false;
  int64_t yn = yd[0] * yd[1] * yd[2] * yd[3];
  float *r = random_floats(yn, &sd);
  ok = ok && conv_reference(k, x, w, b, k->res ? r : NULL, want, yd);
  bool fused = strcmp(tac->op_type, "Conv") != 0;
  qharness hs;
  qconv_build(&hs, k, x, w, b, fused);
  if (!ok) {
    CHECK(false, "conv reference failed (seed %u)", seed);
    goto done;
  }
  nr_error err = {0};
  nr_tactic_ctx c = {.plan = &hs.cs.plan,
                     .node = &hs.cs.node,
                     .step = &hs.cs.step,
                     .err = &err,
                     .calib = &hs.calib};
  if (!tac->supports(&c))
    goto done;
  supported = true;
  hs.cs.step.tactic = tac;
  if (tac->prepare(&c, &hs.cs.plan, &hs.cs.step)) {
    CHECK(false, "%s prepare: %s (seed %u)", tac->id, err.message, seed);
    goto done;
  }
  /* activations in the tactic's layout (NHWC tactics: X, R and Y reordered) */
  nr_layout l = tac->layout;
  hs.cs.slots[0].layout = hs.cs.slots[3].layout = hs.cs.slots[4].layout = l;
  float *y = malloc(sizeof(float) * (size_t)(yn + GUARD)), *yl = y, *xl = x, *rl = r;
  float *xt = malloc(sizeof(float) * (size_t)xn), *wt = malloc(sizeof(float) * (size_t)wn);
  if (l != NR_LAYOUT_PLAIN) {
    xl = malloc(sizeof(float) * (size_t)xn), rl = malloc(sizeof(float) * (size_t)yn);
    yl = malloc(sizeof(float) * (size_t)(yn + GUARD));
    nr_reorder_f32(x, NR_LAYOUT_PLAIN, xl, l, hs.cs.slots[0].dims, NULL);
    nr_reorder_f32(r, NR_LAYOUT_PLAIN, rl, l, yd, NULL);
  }
  for (int i = 0; i < GUARD; i++)
    yl[yn + i] = 1234.5f;
  uint8_t *scratch = alloc64(hs.cs.step.scratch + GUARD);
  memset(scratch + hs.cs.step.scratch, 0x5a, GUARD);
  void *in[4] = {xl, hs.cs.plan.weights + hs.cs.slots[1].offset,
                 hs.cs.plan.weights + hs.cs.slots[2].offset, rl};
  void *out[1] = {yl};
  const nr_slot *ins[4] = {&hs.cs.slots[0], &hs.cs.slots[1], k->bias ? &hs.cs.slots[2] : NULL,
                           k->res ? &hs.cs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.cs.slots[4]};
  nr_exec_args a = {.plan = &hs.cs.plan,
                    .step = &hs.cs.step,
                    .node = &hs.cs.node,
                    .in = in,
                    .out = out,
                    .in_slot = ins,
                    .out_slot = outs,
                    .packed = hs.cs.plan.weights + hs.cs.step.packed_offset,
                    .scratch = scratch,
                    .pool = pool,
                    .err = &err};
  CHECK(tac->run(&a) == NR_OK, "%s run (seed %u)", tac->id, seed);
  bool guards = true;
  for (int i = 0; i < GUARD; i++)
    guards &= yl[yn + i] == 1234.5f && scratch[hs.cs.step.scratch + i] == 0x5a;
  CHECK(guards, "%s wrote past Y or its scratch (seed %u)", tac->id, seed);
  if (l != NR_LAYOUT_PLAIN) {
    nr_reorder_f32(yl, l, y, NR_LAYOUT_PLAIN, yd, NULL);
    free(xl), free(rl), free(yl);
  }
  memcpy(xt, x, sizeof(float) * (size_t)xn);
  memcpy(wt, w, sizeof(float) * (size_t)wn);
  dequantize_like(&c, &hs.cs.step, xt, xn, wt, k->m, kk, kk, 1);
  conv_reference(k, xt, wt, b, k->res ? r : NULL, tight, yd);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabsf(y[i] - tight[i]) <= 1e-5f * (float)kk * (1 + fabsf(tight[i]))))
      bad = i;
  double rms = rel_rms(y, want, yn), rms_max = 0.02 * 255.0 / qt_hdr_of(&c, &hs.cs.step)->qmax;
  CHECK(
      bad < 0 && rms < rms_max,
      "%s: n%d c%d %dx%d m%d k%dx%d s%d,%d p%d,%d d%d,%d g%d bias%d res%d act %s: y[%lld] "
      "= %g, dequantized reference %g; relative RMS error to float %.4f (seed %u)",
      tac->id, k->n, k->c, k->h, k->w, k->m, k->kh, k->kw, k->sh, k->sw, k->ph, k->pw,
      k->dh, k->dw, k->group, k->bias, k->res, nr_act_name(k->act), (long long)bad,
      bad >= 0 ? y[bad] : 0, bad >= 0 ? tight[bad] : 0, rms, seed);
  free(y), free(xt), free(wt), free(scratch);
done:
  free(hs.cs.plan.weights);
  for (int i = 0; i < hs.calib.n; i++)
    free(hs.calib.t[i].name);
  free(hs.calib.t);
  free(x), free(w), free(b), free(r), free(want), free(tight);
  return supported;
}

/* Geometries for each im2col path: "same" stride 1 (the mask table; rows wider than
 * 64), stride 2 (16-bit loads), valid padding and stride 3 (segments, scalar), dilation,
 * groups, 1x1 stride 1 (the 1x1 tactic) and 2, batches, K not a multiple of 4, and
 * which tactics must decline (depthwise; small products for the 64-column tile). */
static const qconv_case qcases[] = {
    /* n c  h   w   m  kh kw sh sw ph pw dh dw g  bias res act */
    {1, 16, 12, 12, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 5, 9, 70, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_NONE},
    {2, 8, 13, 15, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true, NR_ACT_CLIP},
    {1, 3, 23, 150, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, false, NR_ACT_RELU},
    {1, 7, 11, 13, 12, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, false, NR_ACT_SIGMOID},
    {1, 6, 20, 19, 10, 5, 5, 3, 3, 2, 2, 1, 1, 1, true, true, NR_ACT_LEAKY_RELU},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false, NR_ACT_HARD_SWISH},
    {1, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true, NR_ACT_RELU},
    {2, 32, 7, 7, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 17, 9, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, false, NR_ACT_CLIP},
    {1, 12, 9, 9, 12, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, NR_ACT_TANH},
    {1, 64, 14, 14, 40, 1, 1, 1, 1, 0, 0, 1, 1, 4, true, false, NR_ACT_NONE},
    {1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, true, false, NR_ACT_NONE}, /* depthwise */
    /* products large enough for the 64-column tile (at least 784 columns, 512 k) */
    {1, 64, 28, 28, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 512, 28, 28, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, NR_ACT_NONE},
};

NR_TEST(qgemm_conv_tactics_vs_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int rows = 0;
  for (const nr_tactic *tac = nr_tactics_cpu_qgemm; tac->id; tac++) {
    if ((tac->isa & ~nr_cpu_isa()) || !strstr(tac->op_type, "Conv"))
      continue;
    bool nhwc = tac->layout == NR_LAYOUT_NHWC;
    CHECK(tac->precision == NR_PREC_INT8 && (nhwc || tac->layout == NR_LAYOUT_PLAIN));
    bool fused = strcmp(tac->op_type, "Conv") != 0, is_1x1 = !strcmp(tac->algo, "gemm1x1");
    /* the id names the micro-kernel: nr_qs8_conv_<algo>_<tile>__<isa> on a W_A one,
     * nr_qs8_conv_nhwc_1x1_<tile>__<isa> on a W_B one */
    char kname[96];
    if (nhwc)
      snprintf(kname, sizeof kname, "nr_qs8_gemm_%s", tac->id + 21);
    else
      snprintf(kname, sizeof kname, "nr_qs8_wgemm_%s", tac->id + (is_1x1 ? 16 : 19));
    int uk = nr_qgemm_ukernel_find(kname), ran = 0;
    REQUIRE(uk >= 0, "%s names no micro-kernel (%s)", tac->id, kname);
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    CHECK(u->wside == (nhwc ? NR_QGEMM_W_B : NR_QGEMM_W_A), "%s", tac->id);
    for (size_t i = 0; i < sizeof qcases / sizeof qcases[0]; i++) {
      qconv_case k = qcases[i];
      if (!fused)
        k.res = false, k.act = NR_ACT_NONE;
      bool sup = qconv_case_run(t, tac, &k, 700u + (unsigned)i, pool);
      int64_t oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
      int64_t ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
      int64_t kk = k.c / k.group * k.kh * k.kw;
      bool want = k.m / k.group >= 4 &&
                  (!is_1x1 ||
                   (k.kh == 1 && k.kw == 1 && k.sh == 1 && k.sw == 1 && !k.ph && !k.pw)) &&
                  (nhwc || u->nr != 64 || (oh * ow >= 784 && kk >= 512)) &&
                  (u->mr != 1 || oh * ow <= 4);
      CHECK(sup == want, "%s: case %zu supported %d, want %d", tac->id, i, sup, want);
      ran += sup;
    }
    rows += ran > 0;
  }
  CHECK(rows >= 6, "only %d conv rows ran", rows); /* PLAIN 1x1, im2col, NHWC 1x1 */
  nr_threadpool_destroy(pool);
}

/* Gemm / MatMul / FusedGemm / FusedMatMul on the W_B rows, against loops written here;
 * the activation grid comes from node attributes (the QDQ path of nr_quant_act_params)
 * where the conv cases use the calibration table. */
typedef struct qgemm_case {
  const char *op;
  int64_t batch, m, k, n; /* MatMul / FusedMatMul: A is [batch, m, k] when batch > 1 */
  bool ta, tb;            /* Gemm, FusedGemm */
  int c;                  /* input 2: 0 none, 1 [n] const, 2 [m, 1] const, 3 scalar const,
                             4 [m, n] runtime, 5 [n] runtime */
  float alpha, beta;
  bool res; /* fused ops: residual input 3 */
  nr_act act;
} qgemm_case;

static const qgemm_case gcases[] = {
    {"Gemm", 1, 5, 37, 19, false, true, 1, 0.5f, 2.0f, false, NR_ACT_NONE},
    {"Gemm", 1, 3, 64, 70, true, false, 2, 1.0f, 1.5f, false, NR_ACT_NONE},
    {"Gemm", 1, 1, 100, 33, false, false, 3, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"Gemm", 1, 20, 50, 40, false, true, 4, 1.0f, 0.5f, false, NR_ACT_NONE},
    {"Gemm", 1, 6, 1500, 17, false, false, 0, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"MatMul", 2, 7, 48, 65, false, false, 0, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"MatMul", 1, 2, 31, 100, false, false, 0, 1.0f, 1.0f, false, NR_ACT_NONE},
    {"FusedGemm", 1, 9, 30, 24, false, true, 1, 1.0f, 1.0f, true, NR_ACT_RELU},
    {"FusedGemm", 1, 13, 21, 33, true, true, 4, 2.0f, 1.0f, false, NR_ACT_SIGMOID},
    {"FusedMatMul", 3, 5, 16, 40, false, false, 1, 1.0f, 1.0f, true, NR_ACT_CLIP},
    {"FusedMatMul", 1, 4, 40, 18, false, false, 5, 1.0f, 1.0f, false, NR_ACT_HARD_SWISH},
};

static bool is_fused(const qgemm_case *g) {
  return !strncmp(g->op, "Fused", 5);
}

/* op(A)[i][p], op(B)[p][j] of the case's storage. */
static float qa_at(const qgemm_case *g, const float *a, int64_t i, int64_t p) {
  return g->ta ? a[p * g->m + i] : a[i * g->k + p];
}
static float qb_at(const qgemm_case *g, const float *b, int64_t p, int64_t j) {
  return g->tb ? b[j * g->k + p] : b[p * g->n + j];
}

static void gemm_reference(const qgemm_case *g, const float *a, const float *b,
                           const float *c, const float *r, float *y) {
  int64_t rows = g->batch * g->m;
  bool mm = strstr(g->op, "MatMul") != NULL;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < g->n; j++) {
      double s = 0;
      for (int64_t p = 0; p < g->k; p++)
        s += (double)qa_at(g, a, i, p) * qb_at(g, b, p, j);
      s *= g->alpha;
      float beta = mm ? 1.0f : g->beta;
      switch (g->c) {
      case 1:
      case 5: s += beta * c[j]; break;
      case 2: s += beta * c[i]; break;
      case 3: s += beta * c[0]; break;
      case 4: s += beta * c[i * g->n + j]; break;
      }
      if (r)
        s += r[i * g->n + j];
      float f = (float)s;
      nr_act_apply(g->act, g->act == NR_ACT_CLIP ? -0.25f : 0.1f, 0.5f, &f, 1);
      y[i * g->n + j] = f;
    }
}

typedef struct gharness {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[10];
  nr_calib calib;
} gharness;

static void gemm_build(gharness *hs, const qgemm_case *g, const float *a, const float *b,
                       const float *c) {
  memset(hs, 0, sizeof *hs);
  nr_slot *s = hs->slots;
  int64_t rows = g->batch * g->m;
  s[0] = (nr_slot){.name = "A", .dtype = NR_DTYPE_FLOAT};
  if (g->batch > 1)
    s[0].rank = 3, s[0].dims[0] = g->batch, s[0].dims[1] = g->m, s[0].dims[2] = g->k;
  else
    s[0].rank = 2, s[0].dims[0] = g->ta ? g->k : g->m, s[0].dims[1] = g->ta ? g->m : g->k;
  s[1] = (nr_slot){.name = "B",
                   .dtype = NR_DTYPE_FLOAT,
                   .rank = 2,
                   .kind = NR_SLOT_CONST,
                   .dims = {g->tb ? g->n : g->k, g->tb ? g->k : g->n}};
  nr_plan_add_weights(&hs->plan, b, sizeof(float) * (size_t)(g->k * g->n), &s[1].offset,
                      NULL);
  s[2] = (nr_slot){.name = "C", .dtype = NR_DTYPE_FLOAT, .rank = 1, .dims = {g->n}};
  if (g->c == 2)
    s[2].rank = 2, s[2].dims[0] = g->m, s[2].dims[1] = 1;
  if (g->c == 3)
    s[2].rank = 0;
  if (g->c == 4)
    s[2].rank = 2, s[2].dims[0] = g->m, s[2].dims[1] = g->n;
  if (g->c >= 1 && g->c <= 3) {
    s[2].kind = NR_SLOT_CONST;
    int64_t cn = g->c == 1 ? g->n : g->c == 2 ? g->m : 1;
    nr_plan_add_weights(&hs->plan, c, sizeof(float) * (size_t)cn, &s[2].offset, NULL);
  }
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = s[0].rank};
  memcpy(s[3].dims, s[0].dims, sizeof s[0].dims);
  s[3].dims[s[3].rank - 1] = g->n;
  if (g->batch == 1)
    s[3].dims[0] = g->m;
  s[4] = s[3];
  s[4].name = "Y";
  hs->plan.slots = s;
  hs->plan.n_slots = 5;
  int na = 0;
  if (strstr(g->op, "Gemm")) {
    hs->attrs[na++] = attr_i("transA", g->ta);
    hs->attrs[na++] = attr_i("transB", g->tb);
    hs->attrs[na++] = attr_f("alpha", g->alpha);
    hs->attrs[na++] = attr_f("beta", g->beta);
  }
  if (is_fused(g)) {
    hs->attrs[na++] = attr_s("activation", nr_act_name(g->act));
    hs->attrs[na++] = attr_f("act_alpha", g->act == NR_ACT_CLIP ? -0.25f : 0.1f);
    hs->attrs[na++] = attr_f("act_beta", 0.5f);
  }
  /* the activation grid as a pre-quantized model's QDQ pass would give it (a few dozen
   * values are too few for the default entropy calibration to see the range) */
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < rows * g->k; i++)
    lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
  hs->attrs[na++] = attr_f("nr_x_scale", (hi - lo) / 255.0f);
  hs->attrs[na++] = attr_i("nr_x_zero_point", lroundf(-lo / ((hi - lo) / 255.0f)));
  hs->node = (nr_node){.name = "gemm",
                       .op_type = (char *)g->op,
                       .domain = is_fused(g) ? NR_DOMAIN : "",
                       .opset = is_fused(g) ? 1 : 13,
                       .n_attrs = na,
                       .attrs = hs->attrs};
  hs->step = (nr_step){.node = 0,
                       .n_in = is_fused(g) ? 4 : 3,
                       .n_out = 1,
                       .in = {0, 1, g->c ? 2 : -1, g->res ? 3 : -1},
                       .out = {4}};
  nr_error err = {0};
  nr_calib_observe(&hs->calib, "A", a, (size_t)(rows * g->k), &err);
}

static bool gemm_case_run(nr_test_state *t, const nr_tactic *tac, const qgemm_case *g,
                          unsigned seed, nr_threadpool *pool) {
  unsigned sd = seed;
  int64_t rows = g->batch * g->m, an = rows * g->k, bn = g->k * g->n, yn = rows * g->n;
  float *a = random_floats(an, &sd), *b = random_floats(bn, &sd);
  float *c = random_floats(yn, &sd), *r = random_floats(yn, &sd);
  float *want = malloc(sizeof(float) * (size_t)yn),
        *tight = malloc(sizeof(float) * (size_t)yn);
  float *y = malloc(sizeof(float) * (size_t)(yn + GUARD));
  for (int64_t i = 0; i < an; i++)
    a[i] = 0.5f + 1.5f * a[i];
  gemm_reference(g, a, b, c, g->res ? r : NULL, want);
  gharness hs;
  gemm_build(&hs, g, a, b, c);
  nr_error err = {0};
  nr_tactic_ctx cx = {.plan = &hs.plan,
                      .node = &hs.node,
                      .step = &hs.step,
                      .err = &err,
                      .calib = &hs.calib};
  bool supported = tac->supports(&cx);
  if (!supported)
    goto done;
  hs.step.tactic = tac;
  if (tac->prepare(&cx, &hs.plan, &hs.step)) {
    CHECK(false, "%s prepare: %s (seed %u)", tac->id, err.message, seed);
    goto done;
  }
  for (int i = 0; i < GUARD; i++)
    y[yn + i] = 1234.5f;
  uint8_t *scratch = alloc64(hs.step.scratch + GUARD);
  memset(scratch + hs.step.scratch, 0x5a, GUARD);
  bool cconst = g->c >= 1 && g->c <= 3;
  void *in[4] = {a, hs.plan.weights + hs.slots[1].offset,
                 cconst ? (void *)(hs.plan.weights + hs.slots[2].offset) : c, r};
  void *out[1] = {y};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], g->c ? &hs.slots[2] : NULL,
                           g->res ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args x = {.plan = &hs.plan,
                    .step = &hs.step,
                    .node = &hs.node,
                    .in = in,
                    .out = out,
                    .in_slot = ins,
                    .out_slot = outs,
                    .packed = hs.plan.weights + hs.step.packed_offset,
                    .scratch = scratch,
                    .pool = pool,
                    .err = &err};
  CHECK(tac->run(&x) == NR_OK, "%s run (seed %u)", tac->id, seed);
  bool guards = true;
  for (int i = 0; i < GUARD; i++)
    guards &= y[yn + i] == 1234.5f && scratch[hs.step.scratch + i] == 0x5a;
  CHECK(guards, "%s wrote past Y or its scratch (seed %u)", tac->id, seed);
  float *at = malloc(sizeof(float) * (size_t)an), *bt = malloc(sizeof(float) * (size_t)bn);
  memcpy(at, a, sizeof(float) * (size_t)an);
  memcpy(bt, b, sizeof(float) * (size_t)bn);
  dequantize_like(&cx, &hs.step, at, an, bt, g->n, g->k, g->tb ? g->k : 1,
                  g->tb ? 1 : g->n);
  gemm_reference(g, at, bt, c, g->res ? r : NULL, tight);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabsf(y[i] - tight[i]) <= 1e-5f * (float)g->k * (1 + fabsf(tight[i]))))
      bad = i;
  double rms = rel_rms(y, want, yn),
         rms_max = 0.02 * 255.0 / qt_hdr_of(&cx, &hs.step)->qmax;
  CHECK(
      bad < 0 && rms < rms_max,
      "%s (%s) %lldx%lldx%lldx%lld ta%d tb%d c%d res%d act %s: "
      "y[%lld] = %g, dequantized reference %g; relative RMS error to float %.4f (seed %u)",
      tac->id, g->op, (long long)g->batch, (long long)g->m, (long long)g->k,
      (long long)g->n, g->ta, g->tb, g->c, g->res, nr_act_name(g->act), (long long)bad,
      bad >= 0 ? y[bad] : 0, bad >= 0 ? tight[bad] : 0, rms, seed);
  free(at), free(bt), free(scratch);
done:
  free(hs.plan.weights);
  for (int i = 0; i < hs.calib.n; i++)
    free(hs.calib.t[i].name);
  free(hs.calib.t);
  free(a), free(b), free(c), free(r), free(want), free(tight), free(y);
  return supported;
}

NR_TEST(qgemm_gemm_tactics_vs_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int rows = 0;
  for (const nr_tactic *tac = nr_tactics_cpu_qgemm; tac->id; tac++) {
    if ((tac->isa & ~nr_cpu_isa()) || strstr(tac->op_type, "Conv"))
      continue;
    CHECK(tac->precision == NR_PREC_INT8 && !strncmp(tac->id, "nr_qs8_gemm_", 12));
    int uk = nr_qgemm_ukernel_find(tac->id), ran = 0;
    REQUIRE(uk >= 0, "%s is not a micro-kernel's name", tac->id);
    for (size_t i = 0; i < sizeof gcases / sizeof gcases[0]; i++) {
      if (strcmp(gcases[i].op, tac->op_type))
        continue;
      bool sup = gemm_case_run(t, tac, &gcases[i], 900u + (unsigned)i, pool);
      bool want = nr_qgemm_ukernel_get(uk)->mr > 1 || gcases[i].batch * gcases[i].m <= 4;
      CHECK(sup == want, "%s: case %zu supported %d, want %d", tac->id, i, sup, want);
      ran += sup;
    }
    rows += ran > 0;
  }
  CHECK(rows >= 4, "only %d gemm rows ran", rows); /* every op, even on a portable CPU */
  nr_threadpool_destroy(pool);
}

/* ---- through the compiler ----------------------------------------------------------- */

#include "engine/engine.h"
#include "plan/knob.h"
#include "graph_build.h"

static int q_const(nr_graph *g, const char *name, int rank, const int64_t *dims, float lo,
                   float span, unsigned seed) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  nr_value *v = &g->tensors[t].value;
  nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < nr_value_count(v); i++)
    ((float *)v->data)[i] = lo + span * (float)nr_rng_int(&rng, 0, 999) / 1000.0f;
  return t;
}

static int q_conv(nr_graph *g, const char *name, int x, int64_t cin, int64_t cout, int k,
                  int stride, unsigned seed) {
  char wn[64], bn[64];
  int64_t wd[4] = {cout, cin, k, k};
  snprintf(wn, sizeof wn, "%s_w", name);
  snprintf(bn, sizeof bn, "%s_b", name);
  int ins[3] = {x, q_const(g, wn, 4, wd, -0.5f, 1.0f, seed),
                q_const(g, bn, 1, &cout, -0.2f, 0.4f, seed + 1)};
  int y = tg_node(g, "Conv", name, 3, ins);
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, st[2] = {stride, stride};
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "pads", 4, pads, NULL);
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "strides", 2, st, NULL);
  return y;
}

static nr_status observe_calib(void *user, const nr_graph *g, int t, const nr_value *v) {
  nr_error err = {0};
  if (v->dtype != NR_DTYPE_FLOAT || !v->data)
    return NR_OK;
  return nr_calib_observe(user, g->tensors[t].name, v->data, (size_t)nr_value_count(v),
                          &err);
}

/* A residual block and a classifier, every Conv and the Gemm in int8 (conv2 pinned to
 * im2col by conv.algo, so one of this family's rows must run it, with its residual
 * and activation in a separate pass; conv3 on one thread), calibrated on its own input
 * by the reference executor: the engine agrees with the reference within int8 error,
 * and an engine file written and read back computes the same bits. */
NR_TEST(qgemm_graph_int8_route_and_engine_file) {
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, 8, 12, 12}, wfc[2] = {10, 24}, bfc = 10;
  int x = tg_input(g, "x", 4, xd);
  int y = q_conv(g, "conv1", x, 8, 16, 3, 1, 1);
  int r1 = tg_node(g, "Relu", "relu1", 1, &y);
  y = q_conv(g, "conv2", r1, 16, 16, 1, 1, 3);
  y = tg_node(g, "Add", "add", 2, (int[]){y, r1});
  y = tg_node(g, "Relu", "relu2", 1, &y);
  y = q_conv(g, "conv3", y, 16, 24, 3, 2, 5);
  y = tg_node(g, "Relu", "relu3", 1, &y);
  y = tg_node(g, "GlobalAveragePool", "gap", 1, &y);
  y = tg_node(g, "Flatten", "flat", 1, &y);
  y = tg_node(g, "Gemm", "fc", 3,
              (int[]){y, q_const(g, "fc_w", 2, wfc, -0.5f, 1.0f, 7),
                      q_const(g, "fc_b", 1, &bfc, -0.1f, 0.2f, 8)});
  nr_pu_set_attr_int(g, g->n_nodes - 1, "transB", 1, NULL);
  REQUIRE(tg_finish(t, g, y));
  unsigned seed = 99;
  float *xin = random_floats(8 * 12 * 12, &seed);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, xin), want = {0};
  nr_calib *calib = calloc(1, sizeof *calib);
  nr_error err = {0};
  REQUIRE(!nr_ref_exec_observed(g, &in, &want, observe_calib, calib, &err), "%s",
          err.message);
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  const char *route = "-precision@<Conv>=int8 -precision@<Gemm>=int8 "
                      "-quant.calibration=minmax -conv.algo@conv2=im2col "
                      "-conv.epilogue@conv2=separate -conv.threads@conv3=1";
  REQUIRE(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err) &&
              !nr_route_parse(&r, route, &err) && !nr_compile(g, &r, 2, calib, &p, &err),
          "%s", err.message);
  int int8_steps = 0;
  for (int i = 0; i < p->n_steps; i++) {
    const nr_step *st = &p->steps[i];
    const char *op = st->node >= 0 ? p->graph->nodes[st->node].op_type : "";
    if (strstr(op, "Conv") || strstr(op, "Gemm")) {
      CHECK(st->tactic->precision == NR_PREC_INT8, "%s runs %s", op, st->tactic->id);
      int8_steps++;
    }
    if (st->node >= 0 && !strcmp(p->graph->nodes[st->node].name, "conv2"))
      CHECK(!strncmp(st->tactic->id, "nr_qs8_conv_im2col_", 19), "conv2 runs %s",
            st->tactic->id);
  }
  CHECK(int8_steps == 4, "%d int8 steps", int8_steps);
  nr_engine e = {.plan = p, .threads = 2};
  uint8_t *file = NULL;
  size_t len = 0;
  nr_engine *back = NULL;
  REQUIRE(!nr_engine_serialize(&e, &file, &len, &err) &&
              !nr_engine_parse(file, len, false, &back, &err),
          "%s", err.message);
  nr_buffer bin = {NR_DTYPE_FLOAT, 4, {1, 8, 12, 12}, xin}, o1 = {0}, o2 = {0};
  nr_context *c1 = NULL, *c2 = NULL;
  CHECK(!nr_context_create(&e, 2, &c1, &err) && !nr_context_run(c1, &bin, &o1, &err), "%s",
        err.message);
  CHECK(!nr_context_create(back, 1, &c2, &err) && !nr_context_run(c2, &bin, &o2, &err),
        "%s", err.message);
  if (o1.data && o2.data) {
    CHECK(!memcmp(o1.data, o2.data, sizeof(float) * 10),
          "the engine file computes otherwise");
    double rms = rel_rms(o1.data, want.data, 10);
    CHECK(rms < 0.05, "relative RMS error %.4f against the reference", rms);
  }
  nr_buffer_free(&o1), nr_buffer_free(&o2);
  nr_context_destroy(c1), nr_context_destroy(c2);
  nr_engine_free(back);
  free(file);
  nr_plan_destroy(p);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  nr_calib_destroy(calib);
  nr_value_free(&want);
  free(xin);
  nr_graph_destroy(g);
}
