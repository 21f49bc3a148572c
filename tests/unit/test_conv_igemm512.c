/* test_conv_igemm512.c - nr_f32_conv_igemm__avx512 (conv_igemm__avx512.c) on the shapes
 * its run-time geometry cuts differently from the small cases of test_conv_tactics.c:
 * inputs large enough that the pixel tiles are walked in several L2 blocks (the last
 * one partial; 3-tile blocks at 256 channels stride 2, two blocks of 60 and 14 tiles at
 * 64 channels 48x48), and stride-2 rows whose phase copies (the vector even/odd split)
 * are around 16 and 32 floats long with pads 0 to 3, so the masked loads and stores
 * meet every boundary; stems with 3 channels (3x3/2 pad 0 as squeezenet's, 7x7/2 pad 3
 * as resnet's). Against the reference executor's Conv plus residual and activation;
 * buffers carry guard floats, failures print the seed. Without AVX-512 (or with
 * NNROUTE_ISA=avx2) the kernel cannot run and the tests return at once. */
#include "compiler/plan.h"
#include "kernels/act.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/ref/fused.h"
#include "op_test.h"
#include "runtime/threadpool.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

#define GUARD 40
static const float SENTINEL = 4321.25f;

typedef struct ig_case {
  int n, c, h, w, m, k, s, pad;
  bool bias, res;
  nr_act act;
} ig_case;

static int64_t out_dim(const ig_case *k, int in) { return (in + 2 * k->pad - k->k) / k->s + 1; }
static float act_a(nr_act a) { return a == NR_ACT_CLIP ? -0.5f : 0.1f; }
static float act_b(nr_act a) { return a == NR_ACT_CLIP ? 0.5f : 0.5f; }

typedef struct ig_harness {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[6];
  int64_t pads[4], st[2], dl[2];
} ig_harness;

static void ig_attrs(ig_harness *hs, const ig_case *k) {
  for (int i = 0; i < 4; i++)
    hs->pads[i] = k->pad;
  hs->st[0] = hs->st[1] = k->s;
  hs->dl[0] = hs->dl[1] = 1;
  hs->attrs[0] = attr_ints("pads", 4, hs->pads);
  hs->attrs[1] = attr_ints("strides", 2, hs->st);
  hs->attrs[2] = attr_ints("dilations", 2, hs->dl);
}

/* Y = act(Conv(X, W, B) + R) by the reference executor. */
static bool reference(const ig_case *k, const float *x, const float *w, const float *b,
                      const float *r, float *y) {
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c, k->k, k->k}, bd[1] = {k->m};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, xd, x), vw = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value vb = make_value(NR_DTYPE_FLOAT, 1, bd, b);
  const nr_value *ins[3] = {&vx, &vw, &vb};
  ig_harness hs;
  ig_attrs(&hs, k);
  nr_value out;
  nr_error err = {0};
  if (run_one("Conv", 13, 3, hs.attrs, k->bias ? 3 : 2, ins, &out, &err))
    return false;
  int64_t n = nr_value_count(&out);
  memcpy(y, out.data, sizeof(float) * (size_t)n);
  nr_value_free(&out);
  for (int64_t i = 0; r && i < n; i++)
    y[i] += r[i];
  nr_act_apply_ref(k->act, act_a(k->act), act_b(k->act), y, n);
  return true;
}

/* A one-step plan (FusedConv when there is a residual or activation, else Conv) over
 * slots X, W, B, R, Y. */
static void build(ig_harness *hs, const ig_case *k, const float *w, const float *b, bool fused) {
  memset(hs, 0, sizeof *hs);
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c, k->k, k->k};
  int64_t yd[4] = {k->n, k->m, out_dim(k, k->h), out_dim(k, k->w)};
  nr_slot *s = hs->slots;
  s[0] = (nr_slot){.name = "X", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[0].dims, xd, sizeof xd);
  s[1] = (nr_slot){.name = "W", .dtype = NR_DTYPE_FLOAT, .rank = 4, .kind = NR_SLOT_CONST};
  memcpy(s[1].dims, wd, sizeof wd);
  nr_plan_add_weights(&hs->plan, w, sizeof(float) * (size_t)(wd[0] * wd[1] * wd[2] * wd[3]),
                      &s[1].offset, NULL);
  s[2] = (nr_slot){.name = "B", .dtype = NR_DTYPE_FLOAT, .rank = 1, .kind = NR_SLOT_CONST};
  s[2].dims[0] = k->m;
  nr_plan_add_weights(&hs->plan, b, sizeof(float) * (size_t)k->m, &s[2].offset, NULL);
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[3].dims, yd, sizeof yd);
  s[4] = s[3];
  s[4].name = "Y";
  hs->plan.slots = s;
  hs->plan.n_slots = 5;
  ig_attrs(hs, k);
  int na = 3;
  if (fused) {
    hs->attrs[na++] = attr_s("activation", nr_act_name(k->act));
    hs->attrs[na++] = attr_f("act_alpha", act_a(k->act));
    hs->attrs[na++] = attr_f("act_beta", act_b(k->act));
  }
  hs->node = (nr_node){.name = "ig", .op_type = fused ? "FusedConv" : "Conv",
                       .domain = fused ? NR_DOMAIN : "", .opset = fused ? 1 : 13,
                       .n_attrs = na, .attrs = hs->attrs};
  hs->step.n_in = fused ? 4 : 3;
  hs->step.n_out = 1;
  hs->step.in[0] = 0, hs->step.in[1] = 1, hs->step.in[2] = k->bias ? 2 : -1;
  hs->step.in[3] = fused && k->res ? 3 : -1;
  hs->step.out[0] = 4;
}

static const nr_tactic *row(const char *id, const char *op) {
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!strcmp(t->id, id) && !strcmp(t->op_type, op))
      return t;
  return NULL;
}

/* Runs tactic `id` on case k on `pool` against the reference. */
static void run_case(nr_test_state *t, const char *id, const ig_case *k, unsigned seed,
                     nr_threadpool *pool) {
  bool fused = k->res || k->act != NR_ACT_NONE;
  const nr_tactic *tac = row(id, fused ? "FusedConv" : "Conv");
  REQUIRE(tac, "no %s row", id);
  unsigned sd = seed;
  int64_t oh = out_dim(k, k->h), ow = out_dim(k, k->w);
  int64_t xn = (int64_t)k->n * k->c * k->h * k->w, yn = (int64_t)k->n * k->m * oh * ow;
  int64_t wn = (int64_t)k->m * k->c * k->k * k->k;
  float *x = guarded_floats(xn, GUARD, SENTINEL), *r = guarded_floats(yn, GUARD, SENTINEL);
  float *y = guarded_floats(yn, GUARD, SENTINEL), *want = malloc(sizeof(float) * (size_t)yn);
  float *xv = random_floats(xn, &sd), *w = random_floats(wn, &sd);
  float *b = random_floats(k->m, &sd), *rv = random_floats(yn, &sd), *scratch = NULL;
  memcpy(x, xv, sizeof(float) * (size_t)xn);
  memcpy(r, rv, sizeof(float) * (size_t)yn);
  ig_harness hs;
  build(&hs, k, w, b, fused);
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
  REQUIRE(reference(k, xv, w, b, k->res ? rv : NULL, want), "reference failed, seed %u", seed);
  CHECK(tac->supports(&c), "%s does not support the case, seed %u", id, seed);
  hs.step.tactic = tac;
  if (tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "prepare: %s, seed %u", err.message, seed);
    goto done;
  }
  int64_t sn = (int64_t)(hs.step.scratch / sizeof(float)) + 1;
  scratch = guarded_floats(sn, GUARD, SENTINEL);
  void *in[4] = {x, hs.plan.weights + hs.slots[1].offset,
                 k->bias ? hs.plan.weights + hs.slots[2].offset : NULL, k->res ? r : NULL};
  void *out[1] = {y};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], k->bias ? &hs.slots[2] : NULL,
                           k->res ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args a = {&hs.plan, &hs.step, &hs.node, in, out, ins, outs,
                    hs.plan.weights + hs.step.packed_offset, scratch, pool, &err};
  CHECK(tac->run(&a) == NR_OK, "run failed, seed %u", seed);
  CHECK(guard_intact(y, yn, GUARD, SENTINEL) && guard_intact(x, xn, GUARD, SENTINEL) &&
            guard_intact(r, yn, GUARD, SENTINEL) && guard_intact(scratch, sn, GUARD, SENTINEL),
        "%s wrote past a buffer, seed %u", id, seed);
  CHECK(!memcmp(x, xv, sizeof(float) * (size_t)xn), "changed X, seed %u", seed);
  double tol = 2e-5 * ((double)k->c * k->k * k->k / 4 + 4);
  int64_t bad = -1;
  for (int64_t i = 0; i < yn && bad < 0; i++)
    if (!(fabs(y[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      bad = i;
  CHECK(bad < 0,
        "%s n%d c%d %dx%d m%d k%d s%d pad%d bias%d res%d act %s: y[%lld] = %g, want %g, "
        "seed %u",
        id, k->n, k->c, k->h, k->w, k->m, k->k, k->s, k->pad, k->bias, k->res,
        nr_act_name(k->act), (long long)bad, bad >= 0 ? y[bad] : 0, bad >= 0 ? want[bad] : 0,
        seed);
done:
  free(hs.plan.weights);
  free(x), free(r), free(y), free(want), free(xv), free(w), free(b), free(rv), free(scratch);
}

#define IGEMM "nr_f32_conv_igemm__avx512"

/* Copies larger than one L2 block: the tiles run block by block, every panel over one
 * block before the next. */
NR_TEST(test_conv_igemm512_blocks_vs_reference) {
  if (!(nr_cpu_isa() & NR_ISA_AVX512))
    return;
  nr_threadpool *pool = nr_threadpool_create(2), *one = nr_threadpool_create(1);
  static const ig_case cases[] = {
      /* n c   h   w   m   k s pad bias  res   act */
      {1, 256, 30, 30, 24, 3, 2, 1, true, true, NR_ACT_RELU},  /* blocks of 3, 3, 2 tiles */
      {1, 64, 48, 48, 20, 3, 1, 1, true, false, NR_ACT_CLIP},  /* 60 + 14 tiles */
      {2, 200, 22, 21, 13, 3, 2, 1, false, true, NR_ACT_NONE}, /* two images */
      {1, 160, 40, 40, 36, 3, 2, 0, true, false, NR_ACT_SIGMOID},
      {2, 20, 34, 36, 16, 3, 1, 1, true, true, NR_ACT_RELU}, /* two images, stored direct */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case(t, IGEMM, &cases[i], 900u + (unsigned)i, pool);
    run_case(t, IGEMM, &cases[i], 920u + (unsigned)i, one);
  }
  nr_threadpool_destroy(one);
  nr_threadpool_destroy(pool);
}

/* Stride-2 rows of every length from 13 to 36 and around 64 (phase rows of 7 to 33
 * floats), pads 0 to 3, and the stems. */
NR_TEST(test_conv_igemm512_stride2_rows_vs_reference) {
  if (!(nr_cpu_isa() & NR_ISA_AVX512))
    return;
  nr_threadpool *pool = nr_threadpool_create(2);
  static const nr_act acts[] = {NR_ACT_RELU, NR_ACT_NONE, NR_ACT_LEAKY_RELU, NR_ACT_HARD_SWISH};
  unsigned seed = 950;
  for (int w = 13; w <= 36; w++) {
    ig_case k = {1, 3 + w % 4, 5 + w % 3, w, 8 + w % 9, 3, 2, w % 4, w % 2 == 0, w % 3 == 0,
                 acts[w % 4]};
    run_case(t, IGEMM, &k, seed++, pool);
  }
  static const ig_case more[] = {
      {1, 2, 6, 63, 12, 3, 2, 1, true, false, NR_ACT_NONE},
      {1, 2, 6, 64, 12, 3, 2, 1, true, false, NR_ACT_RELU},
      {1, 2, 6, 65, 12, 3, 2, 3, false, true, NR_ACT_RELU},
      {1, 3, 57, 57, 64, 3, 2, 0, true, false, NR_ACT_RELU}, /* squeezenet's stem, smaller */
      {1, 3, 45, 46, 64, 7, 2, 3, true, false, NR_ACT_RELU}, /* resnet's stem, smaller */
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
    run_case(t, IGEMM, &more[i], 980u + (unsigned)i, pool);
  nr_threadpool_destroy(pool);
}
