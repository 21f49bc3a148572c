/* test_conv1d.c - 1-D convolutions (X [N, C, L], W [M, C/group, K]) on the PLAIN conv
 * tactics, which read them as the 2-D problem [N, C, 1, L] (nr_conv_parse_plain): every
 * row of nr_tactics_conv that takes a case is held to the reference executor, over
 * lengths below, at and above the vector widths, with strides, dilations, pads,
 * groups, batches and bias; the rows in blocked layouts must decline rank 3. Uses the
 * one-step plan harness of cpuop.h. */
#include "cpuop.h"
#include "op_test.h"
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"
#include "util/threadpool.h"

#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_conv[];

typedef struct c1d {
  int n, c, l, m, k, s, d, pb, pe, group;
  bool bias;
} c1d;

static int64_t c1d_out(const c1d *k) {
  if ((int64_t)k->l + k->pb + k->pe < (int64_t)k->d * (k->k - 1) + 1)
    return 0;
  return ((int64_t)k->l + k->pb + k->pe - (int64_t)k->d * (k->k - 1) - 1) / k->s + 1;
}

/* Runs every Conv row that supports case k against the reference; *fast: how many
 * rows other than nr_f32_conv_direct took it. */
static void check_case(nr_test_state *t, const c1d *k, unsigned seed, nr_threadpool *pool,
                       int *fast_out) {
  int64_t xd[3] = {k->n, k->c, k->l}, wd[3] = {k->m, k->c / k->group, k->k}, bd[1] = {k->m};
  int64_t yd[3] = {k->n, k->m, c1d_out(k)};
  unsigned s = seed;
  float *x = nr_rng_floats_u32(xd[0] * xd[1] * xd[2], &s, -1, 1);
  float *w = nr_rng_floats_u32(wd[0] * wd[1] * wd[2], &s, -1, 1);
  float *b = nr_rng_floats_u32(k->m, &s, -1, 1);
  nr_value vx = cpuop_fval(3, xd, x), vw = cpuop_fval(3, wd, w), vb = cpuop_fval(1, bd, b);
  nr_value vy = cpuop_fval(3, yd, NULL);
  const nr_value *ins[3] = {&vx, &vw, &vb};
  bool consts[3] = {false, true, true};
  int64_t pads[2] = {k->pb, k->pe}, st[1] = {k->s}, dl[1] = {k->d};
  nr_attr attrs[4] = {attr_ints("pads", 2, pads), attr_ints("strides", 1, st),
                      attr_ints("dilations", 1, dl), attr_i("group", k->group)};
  int fast = 0;
  for (const nr_tactic *tac = nr_tactics_conv; tac->id; tac++) {
    if (strcmp(tac->op_type, "Conv") || (tac->isa & ~nr_cpu_isa()))
      continue;
    cpuop *o = cpuop_new();
    REQUIRE(!cpuop_init(o, "Conv", 13, 4, attrs, k->bias ? 3 : 2, ins, consts, 1, &vy, ""));
    if (!cpuop_supports(o, tac->id)) {
      cpuop_free(o);
      free(o);
      continue;
    }
    CHECK(tac->layout == NR_LAYOUT_PLAIN, "%s (layout %d) took a rank-3 conv", tac->id,
          (int)tac->layout);
    fast += strcmp(tac->id, "nr_f32_conv_direct") != 0;
    bool g;
    nr_value ref;
    nr_status rs = cpuop_run(o, pool, &g);
    CHECK(!rs && g, "%s seed=%u: run %d guards %d", tac->id, seed, rs, g);
    REQUIRE(!cpuop_ref(o, 4, attrs, &ref));
    double e = cpuop_err(cpuop_out(o, 0), ref.data, nr_value_count(&ref), 1e-5, 1e-4);
    CHECK(e <= 1.0, "%s n%d c%d l%d m%d k%d s%d d%d pad %d,%d g%d seed=%u: %.3g of tol",
          tac->id, k->n, k->c, k->l, k->m, k->k, k->s, k->d, k->pb, k->pe, k->group, seed, e);
    nr_value_free(&ref);
    cpuop_free(o);
    free(o);
  }
  free(x);
  free(w);
  free(b);
  *fast_out = fast;
}

static const int LENS[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 65, 400};

NR_TEST(conv1d_tactics_vs_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  /* n c l m k s d pb pe group bias; l is replaced by each of LENS that fits */
  static const c1d CASES[] = {
      {1, 1, 0, 16, 10, 5, 1, 0, 0, 1, false},  /* wav2vec2's first layer */
      {1, 16, 0, 24, 3, 2, 1, 0, 0, 1, false},  /* its strided layers */
      {1, 16, 0, 16, 2, 2, 1, 0, 0, 1, true},
      {2, 8, 0, 12, 3, 1, 1, 1, 1, 1, true},    /* Whisper's stem, batch 2 */
      {1, 12, 0, 20, 3, 2, 1, 1, 1, 1, true},
      {1, 8, 0, 8, 3, 1, 2, 2, 2, 1, true},     /* dilation */
      {1, 8, 0, 16, 5, 3, 2, 1, 3, 1, false},   /* uneven pads, stride 3 */
      {1, 8, 0, 8, 3, 1, 1, 1, 1, 4, true},     /* grouped */
      {1, 16, 0, 16, 5, 1, 1, 2, 2, 16, true},  /* depthwise */
      {1, 64, 0, 48, 1, 1, 1, 0, 0, 1, true},   /* pointwise */
      {1, 32, 0, 40, 1, 2, 1, 0, 0, 1, false},  /* strided pointwise */
      {1, 48, 0, 64, 3, 1, 1, 1, 1, 1, true},   /* enough channels for every GEMM row */
      {1, 1, 0, 258, 256, 128, 1, 0, 0, 1, false}, /* Silero's STFT: window above 255 */
      {1, 2, 0, 8, 3, 1, 1, 300, 260, 1, true}, /* pads above 255 */
  };
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    for (size_t j = 0; j < sizeof LENS / sizeof LENS[0]; j++) {
      c1d k = CASES[i];
      k.l = LENS[j];
      if (c1d_out(&k) < 1)
        continue;
      int fast = 0;
      check_case(t, &k, (unsigned)(i * 31 + j), pool, &fast);
      CHECK(fast > 0, "case %zu l%d: only the direct row took it", i, k.l);
    }
  nr_threadpool_destroy(pool);
}
