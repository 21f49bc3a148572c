/* test_cpu_attn.c - the fused attention tactics (nr_f32_attention__{avx512,avx2,portable})
 * against the reference Attention kernel: query and key counts around the 6-row tile
 * and the 16-key padding, head sizes around the 8/16/32-column tiles, 3-D and 4-D
 * inputs, grouped-query heads, float and bool masks (with fully masked rows), causal
 * masking, every kv_block value (online softmax) and eltwise.math=fast, serial and on
 * a 2-thread pool. Uses the one-step plan harness of cpuop.h (cpuop_*),
 * which also guards the step's scratch. */
#include "cpuop.h"
#include "op_test.h"
#include "plan/tactic.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const IDS[] = {"nr_f32_attention__avx512", "nr_f32_attention__avx2",
                                  "nr_f32_attention__portable"};
#define N_IDS (int)(sizeof IDS / sizeof IDS[0])
/* The ISA each id needs (the portable kernel: none). */
static const unsigned ID_ISA[] = {NR_ISA_AVX512, NR_ISA_AVX2, 0};

typedef struct attn_case {
  int64_t b, hq, hkv, s, t, d, dv;
  bool three_d, causal;
  int mask; /* 0 none, 1 float [S,T], 2 float [B,1,S,T], 3 bool [B,Hq,S,T], 4 float [T] */
  const char *route;
} attn_case;

/* Q, K, V (and Y) of the case in its rank: [B, H, S, D] or [B, S, H * D]. */
static nr_value qkv(const attn_case *c, int64_t heads, int64_t seq, int64_t hd, void *data) {
  int64_t d4[4] = {c->b, heads, seq, hd}, d3[3] = {c->b, seq, heads * hd};
  return c->three_d ? make_value(NR_DTYPE_FLOAT, 3, d3, data) : make_value(NR_DTYPE_FLOAT, 4, d4, data);
}

static nr_value make_mask(const attn_case *c, unsigned *seed, void **data) {
  int64_t st[2] = {c->s, c->t}, b1[4] = {c->b, 1, c->s, c->t},
          full[4] = {c->b, c->hq, c->s, c->t};
  switch (c->mask) {
  case 1: *data = nr_rng_floats_u32(c->s * c->t, seed, -3, 1); return make_value(NR_DTYPE_FLOAT, 2, st, *data);
  case 2: *data = nr_rng_floats_u32(c->b * c->s * c->t, seed, -2, 2); return make_value(NR_DTYPE_FLOAT, 4, b1, *data);
  case 4: *data = nr_rng_floats_u32(c->t, seed, -2, 2); return make_value(NR_DTYPE_FLOAT, 1, &c->t, *data);
  default: break;
  }
  int64_t n = c->b * c->hq * c->s * c->t;
  uint8_t *m = malloc((size_t)n + 1);
  nr_rng r = nr_rng_make(*seed);
  for (int64_t i = 0; i < n; i++)
    m[i] = nr_rng_u32(&r) % 4 != 0;
  *seed = nr_rng_u32(&r);
  for (int64_t j = 0; j < c->t; j++) /* row 0 of head 0 sees nothing: zeros */
    m[j] = 0;
  *data = m;
  return make_value(NR_DTYPE_BOOL, 4, full, m);
}

static void run_case(nr_test_state *t, const attn_case *c, unsigned seed,
                     nr_threadpool *pool) {
  unsigned s0 = seed;
  float *q = nr_rng_floats_u32(c->b * c->hq * c->s * c->d, &seed, -1, 1);
  float *k = nr_rng_floats_u32(c->b * c->hkv * c->t * c->d, &seed, -1, 1);
  float *v = nr_rng_floats_u32(c->b * c->hkv * c->t * c->dv, &seed, -1, 1);
  void *md = NULL;
  nr_value qi = qkv(c, c->hq, c->s, c->d, q), ki = qkv(c, c->hkv, c->t, c->d, k),
           vi = qkv(c, c->hkv, c->t, c->dv, v), y = qkv(c, c->hq, c->s, c->dv, NULL);
  nr_value mi = c->mask ? make_mask(c, &seed, &md) : (nr_value){0};
  const nr_value *ins[4] = {&qi, &ki, &vi, c->mask ? &mi : NULL};
  nr_attr at[4] = {{.name = "q_num_heads", .type = NR_ATTR_INT, .i = c->hq},
                   {.name = "kv_num_heads", .type = NR_ATTR_INT, .i = c->hkv},
                   {.name = "is_causal", .type = NR_ATTR_INT, .i = c->causal}};
  int n_at = c->three_d ? 3 : 0;
  if (!c->three_d)
    at[n_at++] = at[2];
  for (int i = 0; i < N_IDS; i++) {
    cpuop *o = cpuop_new();
    REQUIRE(!cpuop_init(o, "Attention", 23, n_at, at, c->mask ? 4 : 3, ins, NULL, 1, &y,
                        c->route),
            "route '%s'", c->route);
    if (cpuop_supports(o, IDS[i])) {
      bool g;
      nr_value ref;
      nr_status st = cpuop_run(o, pool, &g);
      CHECK(!st && g, "%s seed=%u: run %d guards %d", IDS[i], s0, st, g);
      REQUIRE(!cpuop_ref(o, n_at, at, &ref));
      bool fast = strstr(c->route, "fast") != NULL;
      double e = cpuop_err(cpuop_out(o, 0), ref.data, nr_value_count(&ref), 2e-6,
                           fast ? 1e-4 : 2e-5);
      CHECK(e <= 1.0, "%s seed=%u b%lld hq%lld hkv%lld s%lld t%lld d%lld dv%lld 3d%d "
            "causal%d mask%d route='%s': %.3g of tolerance", IDS[i], s0, (long long)c->b,
            (long long)c->hq, (long long)c->hkv, (long long)c->s, (long long)c->t,
            (long long)c->d, (long long)c->dv, c->three_d, c->causal, c->mask, c->route, e);
      nr_value_free(&ref);
    } else {
      CHECK((ID_ISA[i] & ~nr_cpu_isa()) != 0, "%s should support seed=%u", IDS[i], s0);
    }
    cpuop_free(o);
    free(o);
  }
  free(q), free(k), free(v), free(md);
}

NR_TEST(cpu_attn_shapes) {
  static const int64_t S[] = {1, 5, 6, 7, 13}, T[] = {1, 7, 16, 17, 40};
  static const int64_t D[][2] = {{8, 8}, {13, 5}, {16, 24}, {64, 64}, {3, 40}, {20, 48}};
  nr_threadpool *pool = nr_threadpool_create(2);
  unsigned seed = 1;
  for (int si = 0; si < 5; si++)
    for (int ti = 0; ti < 5; ti++) {
      const int64_t *d = D[(si + ti) % 6];
      attn_case c = {1, 2, 2, S[si], T[ti], d[0], d[1], (si + ti) % 2 == 1, false, 0, ""};
      run_case(t, &c, seed++, (si & 1) ? pool : NULL);
    }
  nr_threadpool_destroy(pool);
}

NR_TEST(cpu_attn_masks_causal_gqa) {
  nr_threadpool *pool = nr_threadpool_create(2);
  unsigned seed = 100;
  for (int mask = 0; mask <= 4; mask++)
    for (int causal = 0; causal < 2; causal++)
      for (int three = 0; three < 2; three++) {
        attn_case c = {2, 4, 2, 9, 21, 12, 10, three, causal, mask, ""};
        run_case(t, &c, seed++, mask & 1 ? pool : NULL);
        attn_case sq = {1, 3, 1, 17, 17, 16, 16, three, causal, mask, ""};
        run_case(t, &sq, seed++, pool);
      }
  nr_threadpool_destroy(pool);
}

/* kv_block splits the keys: online softmax over blocks (rescaling), with masks that
 * hide whole blocks, causal rows that stop early, and a key count off the blocks. */
NR_TEST(cpu_attn_kv_blocks_and_math) {
  static const char *const routes[] = {"-attention.kv_block@n0=64",
                                       "-attention.kv_block@n0=256", "-eltwise.math=fast",
                                       "-attention.kv_block@n0=64 -eltwise.math=fast"};
  nr_threadpool *pool = nr_threadpool_create(2);
  unsigned seed = 200;
  for (int r = 0; r < 4; r++)
    for (int mask = 0; mask <= 3; mask += 3)
      for (int causal = 0; causal < 2; causal++) {
        attn_case c = {1, 2, 2, 13, 300, 16, 24, r & 1, causal, mask, routes[r]};
        run_case(t, &c, seed++, causal ? pool : NULL);
        attn_case bert = {1, 4, 4, 128, 128, 64, 64, true, causal, mask, r == 2 ? routes[2] : ""};
        run_case(t, &bert, seed++, pool);
      }
  nr_threadpool_destroy(pool);
}

/* What the fused tactic leaves to the reference: softcap, present outputs. */
NR_TEST(cpu_attn_unsupported) {
  int64_t d4[4] = {1, 2, 5, 8}, p4[4] = {1, 2, 5, 8}, qk[4] = {1, 2, 5, 5};
  unsigned seed = 7;
  float *q = nr_rng_floats_u32(80, &seed, -1, 1);
  nr_value qi = make_value(NR_DTYPE_FLOAT, 4, d4, q), outs[4] = {
      make_value(NR_DTYPE_FLOAT, 4, d4, NULL), make_value(NR_DTYPE_FLOAT, 4, p4, NULL),
      make_value(NR_DTYPE_FLOAT, 4, p4, NULL), make_value(NR_DTYPE_FLOAT, 4, qk, NULL)};
  const nr_value *ins[3] = {&qi, &qi, &qi};
  nr_attr cap = {.name = "softcap", .type = NR_ATTR_FLOAT, .f = 5.0f};
  for (int i = 0; i < N_IDS; i++) {
    cpuop *o = cpuop_new();
    REQUIRE(!cpuop_init(o, "Attention", 23, 1, &cap, 3, ins, NULL, 1, outs, ""));
    CHECK(!cpuop_supports(o, IDS[i]), "%s: softcap", IDS[i]);
    cpuop_free(o);
    free(o);
    o = cpuop_new();
    REQUIRE(!cpuop_init(o, "Attention", 23, 0, NULL, 3, ins, NULL, 4, outs, ""));
    CHECK(!cpuop_supports(o, IDS[i]), "%s: present and qk outputs", IDS[i]);
    cpuop_free(o);
    free(o);
  }
  free(q);
}
