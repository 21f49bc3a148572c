/* test_conv_tactics.c - every conv tactic (nr_tactics_conv) against the reference
 * executor's Conv on shapes around its tiles and cases, and the reorders' round trips.
 *
 * Each case builds a minimal plan by hand (slots X, W, B, R, Y and one step, by
 * conv_step.h's conv_step_make), calls supports(), prepare() and run() directly, with
 * inputs converted to the tactic's layout, guard bytes after every buffer, a 2-thread
 * pool, and the seed in every failure message. FusedConv's reference is Conv + residual + nr_act_apply. */
#include "ir/fused.h"
#include "kernels/act.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "plan/tactic.h"
#include "conv_step.h"
#include "op_test.h"
#include "util/threadpool.h"
#include "unit.h"

extern const nr_tactic nr_tactics_conv[];

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
static const float SENTINEL = 12345.678f;

typedef struct tac_case {
  int n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw, group;
  bool bias, res;
  nr_act act;
} tac_case;

static float *guarded(int64_t n) { return guarded_floats(n, GUARD, SENTINEL); }
static bool guard_ok(const float *p, int64_t n) { return guard_intact(p, n, GUARD, SENTINEL); }
static int64_t phys_count(nr_layout l, const int64_t *d) {
  return d[0] * (l == NR_LAYOUT_NCHW8C ? nr_ceil8(d[1]) : d[1]) * d[2] * d[3];
}

/* The node's act_alpha for activation a (act_beta is 0.5). */
static float act_alpha(nr_act a) {
  return a == NR_ACT_LEAKY_RELU ? 0.1f : a == NR_ACT_CLIP ? -0.5f : 0.2f;
}

/* Case k as conv_step.h's, with the node's activation parameters. */
static conv_case step_case(const tac_case *k) {
  conv_case cc = CONV_CASE_SYMMETRIC(k);
  cc.act_a = act_alpha(k->act), cc.act_b = 0.5f;
  return cc;
}

/* Reference: Conv through the reference executor (conv_step.h), then residual and
 * activation; ydims gets Y's dims. */
static bool reference(const tac_case *k, const float *x, const float *w, const float *b,
                      const float *r, float *y, int64_t *ydims) {
  conv_case cc = step_case(k);
  if (!conv_case_conv(&cc, x, w, b, y))
    return false;
  int64_t yd[4] = {cc.n, cc.m, conv_case_oh(&cc), conv_case_ow(&cc)};
  memcpy(ydims, yd, sizeof yd);
  int64_t n = conv_case_yn(&cc);
  if (r)
    for (int64_t i = 0; i < n; i++)
      y[i] += r[i];
  nr_act_apply(k->act, act_alpha(k->act), 0.5f, y, n);
  return true;
}

/* The one-step plan of case k (conv_step.h; Y's dims from the window, as the
 * reference's). */
static void build(conv_step *hs, const tac_case *k, const float *w, const float *b,
                  bool fused) {
  conv_case cc = step_case(k);
  conv_step_make(hs, &cc, w, b, &(conv_step_opts){.fused = fused});
}

/* Runs tactic t on case k; returns false when t does not support it. */
static bool run_case(nr_test_state *t, const nr_tactic *tac, const tac_case *k,
                     unsigned seed, nr_threadpool *pool) {
  unsigned sd = seed;
  int64_t xn = (int64_t)k->n * k->c * k->h * k->w;
  int64_t wn = (int64_t)k->m * (k->c / k->group) * k->kh * k->kw;
  float *x = random_floats(xn, &sd), *w = random_floats(wn, &sd), *b = random_floats(k->m, &sd);
  int64_t yd[4] = {0};
  float *want = malloc(sizeof(float) * 4 * (size_t)(k->n * k->m * (k->h + 2 * k->ph) *
                                                   (k->w + 2 * k->pw) + 64));
  /* Y's shape first (residual needs it): reference without residual. */
  tac_case k0 = *k;
  k0.act = NR_ACT_NONE;
  bool ok = reference(&k0, x, w, b, NULL, want, yd);
  int64_t yn = yd[0] * yd[1] * yd[2] * yd[3];
  float *r = random_floats(yn, &sd);
  if (ok)
    ok = reference(k, x, w, b, k->res ? r : NULL, want, yd);
  bool fused = strcmp(tac->op_type, "Conv") != 0;
  conv_step hs;
  bool supported = false;
  if (!ok) {
    CHECK(ok, "reference failed, seed %u", seed);
    goto done;
  }
  build(&hs, k, w, b, fused);
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
  if (!tac->supports(&c))
    goto done_plan;
  supported = true;
  nr_layout l = tac->layout;
  hs.slots[0].layout = hs.slots[3].layout = hs.slots[4].layout = l;
  hs.step.tactic = tac;
  if (tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "%s prepare failed: %s, seed %u", tac->id, err.message, seed);
    goto done_plan;
  }
  int64_t xp = phys_count(l, hs.slots[0].dims), yp = phys_count(l, yd);
  float *px = guarded(xp), *pr = guarded(yp), *py = guarded(yp), *back = malloc(sizeof(float) * (size_t)yn);
  nr_reorder_f32(x, NR_LAYOUT_PLAIN, px, l, hs.slots[0].dims, NULL);
  nr_reorder_f32(r, NR_LAYOUT_PLAIN, pr, l, yd, NULL);
  float *scratch = guarded((int64_t)(hs.step.scratch / 4 + 1));
  void *in[4] = {px, hs.plan.weights + hs.slots[1].offset,
                 k->bias ? hs.plan.weights + hs.slots[2].offset : NULL, k->res ? pr : NULL};
  void *out[1] = {py};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], k->bias ? &hs.slots[2] : NULL,
                           k->res ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args a = {&hs.plan, &hs.step, &hs.node, in, out, ins, outs,
                    hs.step.packed_size ? hs.plan.weights + hs.step.packed_offset : NULL,
                    scratch, pool, &err};
  CHECK(tac->run(&a) == NR_OK, "%s run failed, seed %u", tac->id, seed);
  CHECK(guard_ok(py, yp) && guard_ok(px, xp) && guard_ok(pr, yp),
        "%s wrote past a buffer, seed %u", tac->id, seed);
  CHECK(guard_ok(scratch, (int64_t)(hs.step.scratch / 4 + 1)) || hs.step.scratch == 0,
        "%s overran its scratch, seed %u", tac->id, seed);
  nr_reorder_f32(py, l, back, NR_LAYOUT_PLAIN, yd, NULL);
  double tol = (strstr(tac->id, "winograd") ? 2e-4 : 2e-5) * (k->c / k->group) * k->kh * k->kw;
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabs(back[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      bad = i;
  CHECK(bad < 0,
        "%s: n%d c%d %dx%d m%d k%dx%d s%d,%d p%d,%d d%d,%d g%d bias%d res%d act %s: "
        "y[%lld] = %g, want %g, seed %u",
        tac->id, k->n, k->c, k->h, k->w, k->m, k->kh, k->kw, k->sh, k->sw, k->ph, k->pw,
        k->dh, k->dw, k->group, k->bias, k->res, nr_act_name(k->act), (long long)bad,
        bad >= 0 ? back[bad] : 0, bad >= 0 ? want[bad] : 0, seed);
  if (l == NR_LAYOUT_NCHW8C) /* pad lanes stay zero */
    for (int64_t i = 0; i < yd[0] * (nr_ceil8(yd[1]) / 8) * yd[2] * yd[3]; i++)
      for (int64_t ch = yd[1] % 8 ? yd[1] % 8 : 8; ch < 8; ch++)
        if ((i / (yd[2] * yd[3])) % (nr_ceil8(yd[1]) / 8) == nr_ceil8(yd[1]) / 8 - 1 &&
            py[i * 8 + ch] != 0.0f) {
          CHECK(false, "%s: NCHW8C pad lane not zero, seed %u", tac->id, seed);
          i = INT64_MAX - 1;
          break;
        }
  free(px), free(pr), free(py), free(back), free(scratch);
done_plan:
  free(hs.plan.weights);
done:
  free(x), free(w), free(b), free(r), free(want);
  return supported;
}

static const tac_case cases[] = {
    /* n c  h  w  m  kh kw sh sw ph pw dh dw g  bias res act */
    {1, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_NONE},
    {1, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {2, 9, 11, 10, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true, NR_ACT_CLIP},
    {1, 8, 13, 15, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, NR_ACT_LEAKY_RELU},
    {1, 17, 9, 8, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_SIGMOID},
    {2, 32, 7, 7, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NR_ACT_HARD_SWISH},
    {1, 12, 9, 9, 12, 1, 1, 2, 2, 0, 0, 1, 1, 1, false, false, NR_ACT_TANH},
    {1, 8, 10, 10, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false, NR_ACT_SILU},
    {1, 8, 9, 9, 12, 3, 3, 1, 1, 1, 1, 1, 1, 4, true, true, NR_ACT_GELU},
    {1, 6, 20, 19, 10, 5, 5, 2, 1, 2, 1, 1, 1, 2, true, false, NR_ACT_HARD_SIGMOID},
    {1, 4, 6, 7, 4, 7, 7, 1, 1, 3, 3, 1, 1, 1, true, false, NR_ACT_GELU_TANH},
    /* depthwise around the 8-lane tiles: widths 7, 8, 9, 17, 31; 3x3 and 5x5; s1, s2 */
    {1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, true, false, NR_ACT_RELU},
    {1, 12, 9, 17, 12, 3, 3, 1, 1, 1, 1, 1, 1, 12, true, true, NR_ACT_CLIP},
    {2, 5, 16, 31, 5, 3, 3, 2, 2, 1, 1, 1, 1, 5, false, false, NR_ACT_NONE},
    {1, 16, 15, 33, 16, 5, 5, 1, 1, 2, 2, 1, 1, 16, true, true, NR_ACT_SIGMOID},
    {1, 9, 14, 40, 9, 5, 5, 2, 2, 2, 2, 1, 1, 9, true, false, NR_ACT_RELU},
    {1, 8, 8, 8, 8, 3, 3, 1, 1, 0, 0, 1, 1, 8, true, false, NR_ACT_NONE},
    /* 7x7 depthwise (ConvNeXt): widths 7, 14, 23 (tiles of 8 and 16 and their tails) */
    {1, 6, 7, 7, 6, 7, 7, 1, 1, 3, 3, 1, 1, 6, true, false, NR_ACT_NONE},
    {1, 9, 14, 14, 9, 7, 7, 1, 1, 3, 3, 1, 1, 9, true, true, NR_ACT_RELU},
    {2, 4, 19, 23, 4, 7, 7, 1, 1, 3, 3, 1, 1, 4, false, false, NR_ACT_GELU_TANH},
    {1, 5, 9, 12, 5, 7, 7, 1, 1, 2, 1, 1, 1, 5, true, false, NR_ACT_SIGMOID},
    /* dilation 2, 3x3 and 5x5 (the dilated tail of MobileNetV3): widths 10, 20, 33 */
    {1, 6, 10, 10, 6, 5, 5, 1, 1, 4, 4, 2, 2, 6, true, false, NR_ACT_HARD_SWISH},
    {1, 8, 20, 20, 8, 3, 3, 1, 1, 2, 2, 2, 2, 8, true, true, NR_ACT_RELU},
    {2, 3, 13, 33, 3, 5, 5, 1, 1, 3, 1, 2, 2, 3, false, false, NR_ACT_NONE},
    /* stride 2 down the rows, 1 along them (text recognizers): widths 7, 24, 33 */
    {1, 8, 9, 7, 8, 3, 3, 2, 1, 1, 1, 1, 1, 8, true, false, NR_ACT_HARD_SWISH},
    {1, 13, 6, 24, 13, 5, 5, 2, 1, 2, 2, 1, 1, 13, true, true, NR_ACT_RELU},
    {2, 4, 11, 33, 4, 3, 3, 2, 1, 1, 1, 1, 1, 4, false, false, NR_ACT_NONE},
    /* planes too large for dw__avx2's padded buffer: its in-place path */
    {1, 2, 190, 187, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, false, NR_ACT_RELU},
    {1, 2, 250, 211, 2, 5, 5, 2, 2, 2, 2, 1, 1, 2, true, true, NR_ACT_HARD_SWISH},
    /* stems (C <= 4) around smallc's 4-channel x 24-column tile */
    {1, 3, 23, 57, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, NR_ACT_HARD_SWISH},
    {2, 1, 13, 30, 5, 5, 5, 2, 2, 2, 2, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 4, 9, 50, 7, 5, 5, 1, 1, 2, 2, 1, 1, 1, false, true, NR_ACT_CLIP},
    {1, 2, 6, 8, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1, true, false, NR_ACT_NONE},
    /* igemm's tiles: M around 8 and 12 (8x48 / 12x32 chosen by padded work), padded
     * pixels (oh * (ow + kw - 1)) below, at and above 32 and 48, rows wider than a
     * tile, asymmetric kernels, strides 2 and 3 with dilation, two images, a one
     * column output (a tile spans 32 rows) */
    {1, 5, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 7, 4, 6, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_LEAKY_RELU},
    {1, 3, 9, 9, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true, NR_ACT_NONE},
    {1, 16, 4, 33, 25, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_CLIP},
    {1, 6, 11, 12, 9, 3, 5, 1, 2, 1, 2, 1, 1, 1, true, false, NR_ACT_SIGMOID},
    {1, 4, 12, 12, 10, 3, 3, 2, 2, 2, 2, 2, 2, 1, true, true, NR_ACT_RELU},
    {2, 5, 8, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true, NR_ACT_CLIP},
    {1, 3, 10, 10, 7, 2, 2, 3, 3, 0, 0, 1, 1, 1, true, false, NR_ACT_HARD_SWISH},
    {1, 4, 40, 1, 13, 3, 1, 1, 1, 1, 0, 1, 1, 1, true, true, NR_ACT_RELU}, /* lp = 1 */
    /* sp__avx2 (planes up to 8x8, C >= 48, M >= 64; 28-channel passes at 3x3): stride 2
     * with 7x6 outputs, dilation 2, a scalar activation, two images */
    {1, 64, 13, 11, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, true, NR_ACT_SIGMOID},
    {2, 50, 5, 8, 65, 3, 3, 1, 1, 1, 1, 2, 2, 1, false, true, NR_ACT_HARD_SWISH},
    /* igemm__avx2's tiles (6x16 / 4x24): M around 4 and 6, padded pixels around 16 and
     * 24, and C over one pass of its W piece (75 channels at 3x3 x 6), so partial sums
     * wait between passes, at strides 1 and 2 */
    {1, 80, 5, 6, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 81, 9, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true, NR_ACT_CLIP},
    {1, 7, 3, 22, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_LEAKY_RELU},
    {1, 160, 4, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_SIGMOID},
    /* grouped (igemm__avx2 runs each group as its own convolution): groups of 8 as in
     * RegNet, of 4 as in ResNeXt 32x4d, 6 output channels from 3 input ones (a 6x16
     * tile per group), 2 groups of 80 input channels (two passes each), stride 2, a
     * residual, two images */
    {1, 48, 14, 14, 48, 3, 3, 1, 1, 1, 1, 1, 1, 6, true, true, NR_ACT_RELU},
    {1, 32, 9, 11, 32, 3, 3, 2, 2, 1, 1, 1, 1, 8, true, false, NR_ACT_CLIP},
    {2, 12, 7, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 4, false, true, NR_ACT_NONE},
    {1, 160, 5, 6, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, true, NR_ACT_SIGMOID},
    {1, 16, 8, 8, 64, 5, 5, 1, 1, 2, 2, 1, 1, 4, true, false, NR_ACT_LEAKY_RELU},
    /* 9x9 windows, igemm's largest (fast-neural-style's first and last convs) */
    {1, 32, 21, 19, 3, 9, 9, 1, 1, 4, 4, 1, 1, 1, true, false, NR_ACT_NONE},
    {1, 3, 17, 23, 16, 9, 9, 1, 1, 4, 4, 1, 1, 1, true, true, NR_ACT_RELU},
    /* pw__avx2's tiles (6x16 / 4x24): M around 4 and 6, rows of 16, 24 and partial
     * vectors, two K blocks (C 300 > 256), the panels order (C <= 64, P >= 196), and
     * stride 2 from a plane of odd size */
    {1, 300, 4, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 20, 14, 15, 13, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_LEAKY_RELU},
    {1, 9, 4, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, NR_ACT_CLIP},
    {2, 33, 9, 11, 12, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, NR_ACT_SILU},
    /* a small plane with channels enough for sp__avx512 (test_conv_sp512.c has more) */
    {1, 48, 7, 7, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU},
    /* 1x1 planes (squeeze-excitation): the 1x1 conv runs as one row x^T W^T; M
     * around the 16-column panels, batch 2, groups, residual */
    {1, 96, 1, 1, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NR_ACT_RELU},
    {2, 40, 1, 1, 37, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_SIGMOID},
    {1, 24, 1, 1, 18, 1, 1, 1, 1, 0, 0, 1, 1, 3, false, true, NR_ACT_CLIP},
    /* winograd tiles: outputs not a multiple of 2 or 4, no padding */
    {1, 7, 11, 13, 9, 3, 3, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_RELU},
    {1, 32, 14, 14, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_NONE},
};

NR_TEST(test_conv_tactics_vs_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  unsigned isa = nr_cpu_isa();
  int tested_ids = 0;
  for (const nr_tactic *tac = nr_tactics_conv; tac->id; tac++) {
    if ((tac->isa & ~isa) || !tac->op_type)
      continue;
    bool fused = strcmp(tac->op_type, "Conv") != 0;
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      tac_case k = cases[i];
      if (!fused) {
        k.res = false;
        k.act = NR_ACT_NONE;
      }
      ran += run_case(t, tac, &k, 1000u + (unsigned)i, pool);
    }
    if (strcmp(tac->op_type, "Conv") && strncmp(tac->id, "nr_f32_conv", 11) == 0)
      CHECK(ran > 0, "%s (%s) supported no case", tac->id, tac->op_type);
    tested_ids += ran > 0;
    if (getenv("NR_TEST_VERBOSE"))
      fprintf(stderr, "%-34s %-9s %d cases\n", tac->id, tac->op_type, ran);
  }
  CHECK(tested_ids >= 10, "only %d tactic rows were exercised", tested_ids);
  nr_threadpool_destroy(pool);
}

NR_TEST(test_conv_reorder_round_trip) {
  const int64_t shapes[][4] = {{1, 3, 5, 7}, {2, 8, 4, 4}, {1, 17, 3, 9}, {1, 1, 1, 1}};
  const nr_layout ls[3] = {NR_LAYOUT_PLAIN, NR_LAYOUT_NHWC, NR_LAYOUT_NCHW8C};
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int a = 0; a < 3; a++)
      for (int b = 0; b < 3; b++) {
        if (a == b)
          continue;
        unsigned seed = 77u + (unsigned)s;
        const int64_t *d = shapes[s];
        int64_t n = d[0] * d[1] * d[2] * d[3];
        float *x = random_floats(n, &seed), *pa = guarded(phys_count(ls[a], d));
        float *pb = guarded(phys_count(ls[b], d)), *back = guarded(n);
        nr_reorder_f32(x, NR_LAYOUT_PLAIN, pa, ls[a], d, pool);
        /* through the tactic, as the plan runs it */
        const nr_tactic *tac = nr_reorder_tactic(ls[a], ls[b]);
        REQUIRE(tac, "no reorder %d -> %d", a, b);
        nr_slot sa = {.dtype = NR_DTYPE_FLOAT, .rank = 4, .layout = ls[a]};
        memcpy(sa.dims, d, sizeof(int64_t) * 4);
        nr_slot sb = sa;
        sb.layout = ls[b];
        void *in[1] = {pa}, *out[1] = {pb};
        const nr_slot *ins[1] = {&sa}, *outs[1] = {&sb};
        nr_step st = {.tactic = tac, .node = -1, .n_in = 1, .n_out = 1};
        nr_exec_args ea = {NULL, &st, NULL, in, out, ins, outs, NULL, NULL, pool, NULL};
        CHECK(tac->run(&ea) == NR_OK, "%s", tac->id);
        nr_reorder_f32(pb, ls[b], back, NR_LAYOUT_PLAIN, d, pool);
        CHECK(!memcmp(back, x, sizeof(float) * (size_t)n), "%s round trip, seed %u",
              tac->id, seed);
        CHECK(guard_ok(pb, phys_count(ls[b], d)) && guard_ok(back, n), "%s guard", tac->id);
        if (ls[b] == NR_LAYOUT_NCHW8C && d[1] % 8) {
          bool zero = true;
          int64_t cb = nr_ceil8(d[1]) / 8, hw = d[2] * d[3];
          for (int64_t i = 0; i < hw; i++)
            for (int64_t c = d[1] % 8; c < 8; c++)
              zero &= pb[((cb - 1) * hw + i) * 8 + c] == 0.0f;
          CHECK(zero, "%s: pad lanes not zero", tac->id);
        }
        free(x), free(pa), free(pb), free(back);
      }
  nr_threadpool_destroy(pool);
}

/* igemm's prepare() picks the register tile with less padded work. A 3x3 pad-1 conv
 * has row pitch w + 2: 6x6 outputs are 48 padded pixels, and 8 channels run 8 x 48 (8 x
 * 48 = 384 against 12 x 64 = 768); 4x6 outputs are 32, and 24 channels run 12 x 32 (24
 * x 32 = 768 against 24 x 48). */
NR_TEST(test_conv_igemm_picks_tile) {
  SKIP_UNLESS(nr_cpu_isa() & NR_ISA_AVX512, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  const nr_tactic *tac = NULL;
  for (const nr_tactic *x = nr_tactics_conv; x->id; x++)
    if (!strcmp(x->id, "nr_f32_conv_igemm__avx512") && !strcmp(x->op_type, "Conv"))
      tac = x;
  REQUIRE(tac, "no igemm row");
  const int ms[2] = {8, 24}, hs_[2] = {6, 4};
  const uint32_t want[2] = {1, 0};
  for (int i = 0; i < 2; i++) {
    tac_case k = {1, 5, hs_[i], 6, ms[i], 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false,
                   NR_ACT_NONE};
    unsigned sd = 5;
    float *w = random_floats((int64_t)k.m * k.c * 9, &sd), *b = random_floats(k.m, &sd);
    conv_step hs;
    build(&hs, &k, w, b, false);
    nr_error err = {0};
    nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
    hs.step.tactic = tac;
    REQUIRE(tac->supports(&c) && tac->prepare(&c, &hs.plan, &hs.step) == NR_OK, "%s",
            err.message);
    CHECK(conv_params(&hs.step)->extra == want[i], "m %d: tile %u", ms[i],
          conv_params(&hs.step)->extra);
    free(hs.plan.weights), free(w), free(b);
  }
}

/* nr_f32_conv_1x1 runs a 1x1 plane as one row x^T W^T (the one-row GEMM kernel, which
 * the cases above check against the reference) and a 2x2 plane as W x X. */
NR_TEST(test_conv_1x1_row_product) {
  const nr_tactic *tac = NULL;
  for (const nr_tactic *x = nr_tactics_conv; x->id; x++)
    if (!strcmp(x->id, "nr_f32_conv_1x1") && !strcmp(x->op_type, "Conv"))
      tac = x;
  REQUIRE(tac, "no nr_f32_conv_1x1 row");
  for (int hw = 1; hw <= 2; hw++) {
    tac_case k = {2, 40, hw, hw, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NR_ACT_NONE};
    unsigned sd = 9;
    float *w = random_floats((int64_t)k.m * k.c, &sd), *b = random_floats(k.m, &sd);
    conv_step hs;
    build(&hs, &k, w, b, false);
    nr_error err = {0};
    nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
    hs.step.tactic = tac;
    REQUIRE(tac->supports(&c) && tac->prepare(&c, &hs.plan, &hs.step) == NR_OK, "%s",
            err.message);
    const conv_p *p = conv_params(&hs.step);
    const nr_gemm_ukernel *uk = nr_gemm_ukernel_get(p->gemm.ukernel);
    CHECK(!(p->opts & CONV_OPT_ROW) == (hw > 1), "%dx%d plane: row bit %d", hw, hw,
          !!(p->opts & CONV_OPT_ROW));
    CHECK(uk && (uk->mr == 1) == (hw == 1), "%dx%d plane: micro-kernel %s", hw, hw,
          uk ? uk->name : "?");
    free(hs.plan.weights), free(w), free(b);
  }
}

/* PLAIN im2col builds its column matrix a band of output rows at a time when the
 * whole would pass NR_IM2COL_BAND_BYTES; the record says how many. Every band height
 * from 1 row to all of them gives the reference's output (bias, residual, activation,
 * stride, pads and groups included), and prepare() bands only what is that large. */
static void set_band(nr_step *st, void *user) {
  conv_p *p = (conv_p *)(void *)st->params;
  p->extra = (uint32_t)*(const int *)user;
}

NR_TEST(test_conv_im2col_bands) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const conv_case cases[] = {
      {.n = 1, .c = 6, .h = 9, .w = 11, .m = 5, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
       .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = true, .act = NR_ACT_RELU},
      {.n = 2, .c = 4, .h = 13, .w = 7, .m = 6, .kh = 5, .kw = 3, .sh = 2, .sw = 1,
       .pt = 2, .pl = 0, .pb = 1, .pr = 2, .group = 2, .bias = true, .res = true,
       .act = NR_ACT_CLIP, .act_a = -0.5f, .act_b = 0.5f},
      {.n = 1, .c = 3, .h = 10, .w = 10, .m = 3, .kh = 9, .kw = 9, .sh = 1, .sw = 1,
       .pt = 4, .pl = 4, .pb = 4, .pr = 4, .res = true},
  };
  unsigned seed = 9300;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const conv_case *k = &cases[i];
    const nr_tactic *tac = conv_row("nr_f32_conv_im2col", k, true);
    REQUIRE(tac, "no im2col row");
    for (int band = 1; band <= conv_case_oh(k); band++) {
      char note[32];
      snprintf(note, sizeof note, "band %d", band);
      conv_opts o = {.tweak = set_band, .user = &band, .note = note};
      conv_check(t, tac, k, seed++, pool, &o, true);
    }
  }
  nr_threadpool_destroy(pool);
  /* 9x9, 32 -> 16 channels at 256x256: 680 MB whole */
  conv_p big = {.n = 1, .c = 32, .h = 256, .w = 256, .m = 16, .oh = 256, .ow = 256,
                .group = 1, .kh = 9, .kw = 9, .sh = 1, .sw = 1, .dh = 1, .dw = 1};
  int32_t band = nr_conv_im2col_band(&big);
  uint64_t row = 32ull * 81 * 256 * sizeof(float);
  CHECK(band >= 1 && band < 256 && band * row <= NR_IM2COL_BAND_BYTES &&
            (band + 1) * row > NR_IM2COL_BAND_BYTES,
        "band of %d rows for a 680 MB column matrix", band);
  conv_p small = big;
  small.c = 3, small.kh = small.kw = 3, small.h = small.w = small.oh = small.ow = 64;
  CHECK(nr_conv_im2col_band(&small) == 64, "a small conv is banded: %d rows",
        nr_conv_im2col_band(&small));
  /* what takes the large conv: with AVX-512, im2col with 16 output channels, not with
   * 3; on an AVX2-only host igemm__avx2, which runs 9x9 windows there */
  conv_case wide = {.n = 1, .c = 32, .h = 256, .w = 256, .m = 16, .kh = 9, .kw = 9,
                    .sh = 1, .sw = 1, .pt = 4, .pl = 4, .pb = 4, .pr = 4};
  const char *want = (nr_cpu_isa() & NR_ISA_AVX512) ? "nr_f32_conv_im2col"
                     : (nr_cpu_isa() & NR_ISA_AVX2) ? "nr_f32_conv_igemm__avx2"
                                                    : "nr_f32_conv_im2col";
  CHECK(conv_row("nr_f32_conv_im2col", &wide, true) &&
            !strcmp(conv_default_row(&wide)->id, want),
        "16 output channels: %s, not %s", conv_default_row(&wide)->id, want);
  conv_case narrow = wide;
  narrow.m = 3;
  CHECK(strcmp(conv_default_row(&narrow)->id, "nr_f32_conv_im2col"),
        "3 output channels go to im2col");
}
