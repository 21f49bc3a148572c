/* test_conv_dw512.c - the PLAIN depthwise tactics (nr_f32_conv_dw__avx512 first, then
 * nr_f32_conv_dw__avx2 and the portable nr_f32_conv_dw on the very same cases, as far
 * as this machine runs them) against the reference executor's Conv, and how the
 * default route picks between the two ISAs.
 *
 * The cases are built around the AVX-512 kernel's geometry: widths around one and two
 * 16-lane vectors (where the masked loads of the left and right borders meet, and the
 * stride-2 kernel's third vector starts), output heights 1 to 20 (every remainder of
 * its 8- and 4-row bands), 3x3 and 5x5, stride 1 and 2, pads 0, 1 and 2, a few
 * asymmetric pads and begin pads up to kernel - 1, with and without bias and
 * residual, every activation. Each run has guard floats after X, R, Y and the
 * scratch, a 2-thread pool, and the seed in the failure message. A second test puts
 * NaN, +-inf and large biases through the in-register activations and compares with
 * act.c's scalar rules: exact bits for ReLU / Clip / LeakyReLU / HardSigmoid /
 * HardSwish, 4e-7 relative for Sigmoid / SiLU (plus 1e-35 absolute: act.c's
 * x / (1 + expf(-x)) is -0 from x = -89 on, where expf overflows, while the vector
 * math gives the true -1e-37). The last test checks the selection: conv.dw_kernel is
 * listed exactly where the AVX-512 kernel is the default, and its value avx2 takes
 * the node back to nr_f32_conv_dw__avx2. (Run the suite with NNROUTE_ISA=avx2 for the
 * AVX2-only machine: the AVX-512 row is then not run and the knob not listed.) */
#include "plan/route.h"
#include "conv_step.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "op_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

#define GUARD 48
static const float SENTINEL = 4321.5f;

typedef struct dw_case {
  int n, c, h, w, k, s, pad;
  bool bias, res;
  nr_act act;
  int dpe; /* end padding minus begin padding (0: symmetric) */
  int sw;  /* stride along the rows (0: s) */
} dw_case;

static float *guarded(int64_t n) { return guarded_floats(n, GUARD, SENTINEL); }
static bool guard_ok(const float *p, int64_t n) { return guard_intact(p, n, GUARD, SENTINEL); }

static float act_alpha(nr_act a) {
  return a == NR_ACT_LEAKY_RELU ? 0.1f : a == NR_ACT_CLIP ? -0.5f : 0.2f;
}

static conv_case to_case(const dw_case *k) {
  int pe = k->pad + k->dpe;
  return (conv_case){k->n, k->c, k->h, k->w, k->c, k->k, k->k, k->s, k->sw ? k->sw : k->s,
                     1, 1, k->pad,
                     k->pad, pe, pe, k->c, k->bias, k->res, k->act, act_alpha(k->act), 0.5f};
}

/* Runs tactic tac on case k: x, w, b, r in, y out (guarded by the caller's sizes).
 * False when tac does not support the case or failed (recorded). */
static bool run_tactic(nr_test_state *t, const nr_tactic *tac, const dw_case *k,
                       const float *x, const float *w, const float *b, const float *r,
                       float *y, nr_threadpool *pool, unsigned seed) {
  conv_case c = to_case(k);
  return conv_run_tactic(t, tac, &c, x, w, b, r, y, pool, NULL, seed);
}

static const char *const dw_ids[] = {"nr_f32_conv_dw__avx512", "nr_f32_conv_dw__avx2",
                                     "nr_f32_conv_dw"};

/* The FusedConv row of tactic id, NULL when this machine does not run it. */
static const nr_tactic *fused_row(const char *id) {
  for (const nr_tactic *tac = nr_tactics_conv; tac->id; tac++)
    if (!strcmp(tac->id, id) && !strcmp(tac->op_type, "FusedConv"))
      return (tac->isa & ~nr_cpu_isa()) ? NULL : tac;
  return NULL;
}

/* Every depthwise tactic this machine runs on case k (the FusedConv rows) against the
 * reference; returns how many ran it. */
static int check_case(nr_test_state *t, const dw_case *k, unsigned seed,
                      nr_threadpool *pool) {
  conv_case c = to_case(k);
  conv_opts o = {.tol = 2e-5 * k->k * k->k};
  int ran = 0;
  for (size_t i = 0; i < sizeof dw_ids / sizeof dw_ids[0]; i++) {
    const nr_tactic *tac = fused_row(dw_ids[i]);
    ran += tac && conv_check(t, tac, &c, seed, pool, &o, false);
  }
  return ran;
}

NR_TEST(test_conv_dw512_vs_reference) {
  static const int widths[] = {1, 2, 7, 15, 16, 17, 24, 31, 32, 33, 47, 64, 65};
  static const int heights[] = {1, 2, 3, 5, 8, 9, 12, 17, 20};
  nr_threadpool *pool = nr_threadpool_create(2);
  bool avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0;
  int cases = 0, runs = 0;
  unsigned seed = 7100;
  for (int k = 3; k <= 5; k += 2)
    for (int s = 1; s <= 2; s++)
      for (int pad = 0; pad <= 2; pad++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
          size_t nh = sizeof heights / sizeof heights[0];
          int hi = (int)((wi + (size_t)pad * 3 + (size_t)s) % nh);
          dw_case c = {1 + (int)(wi % 2), 3 + (int)(wi % 3), heights[hi], widths[wi], k, s,
                       pad, (wi + (size_t)pad) % 3 != 0, wi % 4 == 1,
                       (nr_act)((wi + (size_t)pad + (size_t)k) % NR_ACT_COUNT)};
          if (c.h + 2 * pad < k || c.w + 2 * pad < k)
            continue;
          int ran = check_case(t, &c, seed++, pool);
          CHECK(ran >= (avx512 ? 3 : 1), "only %d tactics ran k%d s%d p%d w%d, seed %u",
                ran, k, s, pad, c.w, seed - 1);
          cases++, runs += ran;
        }
  /* every output height 1..20 (each remainder of the 8- and 4-row bands) */
  for (int oh = 1; oh <= 20; oh++)
    for (int v = 0; v < 6; v++) { /* v 4, 5: rows of 7 and 8 (two to an epilogue vector) */
      int k = v < 2 || v == 4 ? 3 : 5, s = v < 4 ? 1 + v % 2 : 1, pad = k / 2;
      static const int w[6] = {19, 32, 45, 58, 7, 8};
      dw_case c = {1, 2, (oh - 1) * s + k - 2 * pad, w[v], k, s, pad, true, oh % 3 == 0,
                   oh % 2 ? NR_ACT_SILU : v == 5 ? NR_ACT_HARD_SWISH : NR_ACT_CLIP};
      runs += check_case(t, &c, seed++, pool);
      cases++;
    }
  /* asymmetric pads (TF's SAME pads the end only) and begin pads up to kernel - 1 */
  static const dw_case odd[] = {
      {1, 3, 9, 16, 3, 2, 0, true, false, NR_ACT_RELU, 1},
      {1, 3, 10, 33, 3, 2, 0, true, true, NR_ACT_CLIP, 1},
      {1, 2, 9, 31, 3, 2, 1, false, false, NR_ACT_SILU, -1},
      {2, 2, 7, 17, 3, 1, 2, true, false, NR_ACT_HARD_SWISH, -2},
      {1, 3, 6, 17, 5, 1, 4, true, false, NR_ACT_LEAKY_RELU, 0},
      {1, 2, 11, 33, 5, 2, 3, true, true, NR_ACT_SIGMOID, -1},
      {1, 2, 12, 47, 5, 2, 1, true, false, NR_ACT_NONE, 2},
      {1, 3, 5, 5, 5, 1, 4, true, false, NR_ACT_RELU, -4},
  };
  for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
    int ran = check_case(t, &odd[i], seed++, pool);
    CHECK(ran >= (avx512 ? 3 : 1), "only %d tactics ran odd case %zu", ran, i);
    cases++, runs += ran;
  }
  /* stride 2 down the rows and 1 along them (text recognizers): the AVX-512 kernel
   * alone takes it */
  for (int k = 3; k <= 5; k += 2)
    for (int pad = 0; pad < k; pad++)
      for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi += 2) {
        dw_case c = {1, 2 + (int)(wi % 3), heights[(wi + (size_t)pad) % 9], widths[wi], k, 2,
                     pad, wi % 3 != 1, wi % 4 == 2,
                     (nr_act)((wi + (size_t)pad) % NR_ACT_COUNT), (int)(wi % 3) - 1, 1};
        if (c.h + 2 * pad + c.dpe < k || c.w + 2 * pad + c.dpe < k || pad + c.dpe < 0)
          continue;
        int ran = check_case(t, &c, seed++, pool);
        CHECK(ran == (avx512 ? 1 : 0), "%d tactics ran k%d s2x1 p%d w%d, seed %u", ran, k,
              pad, c.w, seed - 1);
        cases++, runs += ran;
      }
  CHECK(cases > 150, "only %d cases", cases);
  if (getenv("NR_TEST_VERBOSE"))
    fprintf(stderr, "dw512: %d cases, %d tactic runs (AVX-512 %s)\n", cases, runs,
            avx512 ? "on" : "off");
  nr_threadpool_destroy(pool);
}

/* NaN, +-inf and large values through each activation the AVX-512 kernel applies in
 * its registers: the step with the activation against act.c's scalar rules applied
 * to the same step's output without it, on 9 rows of width `w` (7: two rows to an
 * epilogue vector). Biases carry the special values (a bias of NaN makes its whole
 * plane NaN before the activation). */
static void check_act_rules(nr_test_state *t, const nr_tactic *tac, int w,
                            nr_threadpool *pool) {
  static const nr_act acts[] = {NR_ACT_RELU, NR_ACT_CLIP, NR_ACT_LEAKY_RELU,
                                NR_ACT_HARD_SIGMOID, NR_ACT_HARD_SWISH, NR_ACT_SIGMOID,
                                NR_ACT_SILU};
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 90.0f, -90.0f,
                            3.0f, -3.0f, 17.0f, -17.0f, 1e-30f};
  enum { C = 12 };
  unsigned sd = 7300;
  dw_case k = {1, C, 9, w, 3, 1, 1, true, false, NR_ACT_NONE};
  int64_t yn = (int64_t)C * 9 * w, xn = yn;
  float *x = random_floats(xn, &sd), *wt = random_floats(C * 9, &sd);
  for (int64_t i = 0; i < xn; i++)
    x[i] *= 4.0f; /* outputs well beyond the hard activations' knees */
  float b[C];
  memcpy(b, specials, sizeof b);
  float *raw = guarded(yn), *got = guarded(yn), *want = malloc(sizeof(float) * (size_t)yn);
  bool ran = run_tactic(t, tac, &k, x, wt, b, NULL, raw, pool, 7300);
  CHECK(ran, "width %d: no raw run", w);
  for (size_t a = 0; ran && a < sizeof acts / sizeof acts[0]; a++) {
    k.act = acts[a];
    if (!run_tactic(t, tac, &k, x, wt, b, NULL, got, pool, 7300)) {
      CHECK(false, "width %d: %s did not run", w, nr_act_name(k.act));
      continue;
    }
    CHECK(guard_ok(got, yn), "width %d, %s: wrote past Y", w, nr_act_name(k.act));
    memcpy(want, raw, sizeof(float) * (size_t)yn);
    nr_act_apply_ref(k.act, act_alpha(k.act), 0.5f, want, yn);
    bool exact = k.act != NR_ACT_SIGMOID && k.act != NR_ACT_SILU;
    int64_t bad = -1;
    for (int64_t i = 0; i < yn && bad < 0; i++) {
      bool same = exact ? !memcmp(&got[i], &want[i], sizeof(float))
                        : (isnan(got[i]) && isnan(want[i])) || got[i] == want[i] ||
                              fabsf(got[i] - want[i]) <= 4e-7f * fabsf(want[i]) + 1e-35f;
      if (!same)
        bad = i;
    }
    CHECK(bad < 0, "width %d, %s: y[%lld] = %a from %a, want %a (bias %g)", w,
          nr_act_name(k.act), (long long)bad, bad >= 0 ? got[bad] : 0.0,
          bad >= 0 ? raw[bad] : 0.0, bad >= 0 ? want[bad] : 0.0,
          bad >= 0 ? b[bad / (9 * w)] : 0.0);
  }
  free(x), free(wt), free(raw), free(got), free(want);
}

NR_TEST(test_conv_dw512_activation_rules) {
  const nr_tactic *tac = fused_row("nr_f32_conv_dw__avx512");
  SKIP_UNLESS(tac, "no AVX-512 (CPU, OS or NNROUTE_ISA)");
  nr_threadpool *pool = nr_threadpool_create(2);
  check_act_rules(t, tac, 21, pool);
  check_act_rules(t, tac, 7, pool);
  nr_threadpool_destroy(pool);
}

/* conv.dw_kernel: listed for a depthwise node exactly when the AVX-512 kernel is its
 * default; =avx2 leaves it to nr_f32_conv_dw__avx2 (the AVX-512 row's supports() says
 * no under that route, the AVX2 row's yes). */
NR_TEST(test_conv_dw512_knob_selects_avx2) {
  int64_t xd[4] = {1, 16, 20, 20}, wd[4] = {16, 1, 3, 3}, pads[4] = {1, 1, 1, 1};
  nr_attr at[2] = {attr_ints("pads", 4, pads), attr_i("group", 16)};
  nr_graph *g = conv_graph("dw", xd, wd, xd, at, 2);
  nr_knob_space sp = {0};
  nr_route r = {0};
  nr_error err = {0};
  REQUIRE(nr_knob_space_build(g, &sp, &err) == NR_OK, "%s", err.message);
  bool avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0;
  CHECK((nr_knob_space_find(&sp, "conv.dw_kernel@dw") >= 0) == avx512,
        "conv.dw_kernel %s listed", avx512 ? "not" : "wrongly");
  REQUIRE(nr_route_init(&r, &sp, &err) == NR_OK, "%s", err.message);
  if (avx512) {
    REQUIRE(nr_route_parse(&r, "-conv.dw_kernel@dw=avx2", &err) == NR_OK, "%s",
            err.message);
    float w[16 * 9] = {0}, b[16] = {0};
    dw_case k = {1, 16, 20, 20, 3, 1, 1, false, false, NR_ACT_NONE};
    conv_case ck = to_case(&k);
    conv_step hs;
    conv_step_build(&hs, &ck, w, b);
    hs.node.name = "dw"; /* the route's node */
    for (int pass = 0; pass < 2; pass++) {
      nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, pass ? &r : NULL, &err};
      for (const nr_tactic *tac = nr_tactics_conv; tac->id; tac++) {
        if (strcmp(tac->op_type, "Conv"))
          continue;
        if (!strcmp(tac->id, "nr_f32_conv_dw__avx512"))
          CHECK(tac->supports(&c) == !pass, "dw__avx512 supports() %d under %s",
                tac->supports(&c), pass ? "conv.dw_kernel=avx2" : "the default route");
        if (!strcmp(tac->id, "nr_f32_conv_dw__avx2"))
          CHECK(tac->supports(&c), "dw__avx2 does not support the node");
      }
    }
    conv_step_free(&hs);
  }
  nr_route_free(&r);
  nr_knob_space_free(&sp);
  conv_graph_destroy(g);
}
