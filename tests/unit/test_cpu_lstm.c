/* test_cpu_lstm.c - the LSTM tactic (nr_f32_lstm) against the reference executor:
 * every direction, both layouts, batch and sequence of one and more, hidden and input
 * sizes around the GEMM's tiles, each optional input (bias, initial states,
 * peepholes) present and absent, every output present and absent, a product large
 * enough for the thread pool, and the nodes it must leave to the reference (clip,
 * input_forget, other activations, sequence_lens). Uses the one-step harness of
 * cpuop.h with W, R, B and P as constants. */
#include "cpuop.h"
#include "rng.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#define ID "nr_f32_lstm"

typedef struct lcase {
  const char *dir;
  int layout;
  int64_t seq, batch, input, hidden;
  unsigned opt;     /* OPT_* bits: optional inputs present */
  int n_out;        /* outputs present: Y, Y_h, Y_c, a prefix */
  int n_extra;      /* extra attributes */
  nr_attr extra[2];
  bool expect;      /* the tactic should take it */
} lcase;

enum { OPT_B = 1, OPT_H = 2, OPT_C = 4, OPT_P = 8, OPT_SEQ = 16 };

static nr_attr sattr(const char *name, const char *s) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_STRING, .s = (char *)s,
                   .s_len = strlen(s)};
}
static nr_attr iattr(const char *name, int64_t i) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INT, .i = i};
}

static nr_value fval(int rank, const int64_t *d, nr_rng *r, float *store[], int *k) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= d[i];
  store[*k] = nr_rng_floats(r, n, -0.6f, 0.6f);
  return cpuop_fval(rank, d, store[(*k)++]);
}

static void check_lstm(nr_test_state *t, const lcase *lc, uint64_t seed,
                       nr_threadpool *pool) {
  nr_rng r = nr_rng_make(seed);
  int64_t D = strcmp(lc->dir, "bidirectional") ? 1 : 2, T = lc->seq, B = lc->batch;
  int64_t I = lc->input, H = lc->hidden;
  float *store[8] = {0};
  int k = 0;
  int64_t xd[3] = {lc->layout ? B : T, lc->layout ? T : B, I};
  int64_t sd[3] = {lc->layout ? B : D, lc->layout ? D : B, H};
  nr_value v[8];
  v[0] = fval(3, xd, &r, store, &k);
  v[1] = fval(3, (int64_t[]){D, 4 * H, I}, &r, store, &k);
  v[2] = fval(3, (int64_t[]){D, 4 * H, H}, &r, store, &k);
  v[3] = fval(2, (int64_t[]){D, 8 * H}, &r, store, &k);
  int32_t lens[8] = {0};
  for (int64_t b = 0; b < B && b < 8; b++)
    lens[b] = (int32_t)T;
  v[4] = (nr_value){.dtype = NR_DTYPE_INT32, .rank = 1, .dims = {B}, .data = lens};
  v[5] = fval(3, sd, &r, store, &k);
  v[6] = fval(3, sd, &r, store, &k);
  v[7] = fval(2, (int64_t[]){D, 3 * H}, &r, store, &k);
  const nr_value *ins[8] = {&v[0], &v[1], &v[2]};
  static const unsigned bit[8] = {0, 0, 0, OPT_B, OPT_SEQ, OPT_H, OPT_C, OPT_P};
  int n_in = 3;
  for (int i = 3; i < 8; i++)
    if (lc->opt & bit[i])
      ins[i] = &v[i], n_in = i + 1;
  bool consts[8] = {false, true, true, true, true, false, false, true};
  int64_t yd[4] = {lc->layout ? B : T, lc->layout ? T : D, lc->layout ? D : B, H};
  nr_value outs[3] = {cpuop_fval(4, yd, NULL), cpuop_fval(3, sd, NULL),
                      cpuop_fval(3, sd, NULL)};
  int n_out = lc->n_out;
  nr_attr attrs[4] = {sattr("direction", lc->dir), iattr("hidden_size", H),
                      iattr("layout", lc->layout)};
  int n_attrs = 3;
  for (int i = 0; i < lc->n_extra; i++)
    attrs[n_attrs++] = lc->extra[i];
  cpuop *o = cpuop_new();
  REQUIRE(!cpuop_init(o, "LSTM", 14, n_attrs, attrs, n_in, ins, consts, n_out, outs, ""));
  bool sup = cpuop_supports(o, ID);
  CHECK(sup == lc->expect, "seed=%llu dir=%s: supports %d, expected %d",
        (unsigned long long)seed, lc->dir, sup, lc->expect);
  if (sup) {
    bool g;
    nr_value ref[3];
    nr_status st = cpuop_run(o, pool, &g);
    CHECK(!st && g, "seed=%llu: run %d guards %d", (unsigned long long)seed, st, g);
    REQUIRE(!cpuop_ref(o, n_attrs, attrs, ref));
    for (int i = 0; i < n_out; i++) {
      int64_t n = nr_value_count(&ref[i]);
      double e = cpuop_err(cpuop_out(o, i), ref[i].data, n, 1e-5, 1e-4);
      CHECK(e <= 1.0, "seed=%llu %s layout=%d T=%lld B=%lld I=%lld H=%lld opt=%u "
            "output %d: %.3g of tol.", (unsigned long long)seed, lc->dir, lc->layout,
            (long long)T, (long long)B, (long long)I, (long long)H, lc->opt, i, e);
      nr_value_free(&ref[i]);
    }
  }
  cpuop_free(o);
  free(o);
  for (int i = 0; i < k; i++)
    free(store[i]);
}

NR_TEST(cpu_lstm_against_reference) {
  static const char *const dirs[] = {"forward", "reverse", "bidirectional"};
  static const int64_t sizes[][4] = {{1, 1, 1, 1}, {4, 1, 5, 3}, {3, 3, 20, 16},
                                     {2, 2, 7, 33}, {5, 1, 128, 128}};
  static const unsigned opts[] = {0, OPT_B, OPT_B | OPT_H | OPT_C, OPT_H | OPT_P,
                                  OPT_B | OPT_H | OPT_C | OPT_P};
  nr_threadpool *pool = nr_threadpool_create(2);
  uint64_t seed = 7000;
  for (int d = 0; d < 3; d++)
    for (int s = 0; s < 5; s++)
      for (int o = 0; o < 5; o++) {
        lcase lc = {dirs[d], (s + o) % 2, sizes[s][0], sizes[s][1], sizes[s][2],
                    sizes[s][3], opts[o], 3, 0, {{0}}, true};
        check_lstm(t, &lc, seed++, pool);
      }
  nr_threadpool_destroy(pool);
}

/* Outputs left out (Y and Y_h; Y alone), activations named as the defaults, and a
 * product above the serial limit, so the GEMM runs on the pool. */
NR_TEST(cpu_lstm_outputs_and_threads) {
  nr_threadpool *pool = nr_threadpool_create(3);
  nr_attr acts = {.name = "activations", .type = NR_ATTR_STRINGS, .n = 3,
                  .strings = (char *[]){"Sigmoid", "TANH", "tanh"}};
  lcase a = {"forward", 0, 3, 2, 6, 9, OPT_B | OPT_C, 2, 0, {{0}}, true};
  check_lstm(t, &a, 7100, pool);
  lcase b = {"reverse", 1, 2, 2, 6, 9, OPT_H, 1, 1, {acts}, true};
  check_lstm(t, &b, 7101, pool);
  lcase c = {"bidirectional", 0, 2, 4, 256, 160, OPT_B | OPT_H | OPT_C, 3, 0, {{0}}, true};
  check_lstm(t, &c, 7102, pool);
  nr_threadpool_destroy(pool);
}

/* What the tactic leaves to the reference. */
NR_TEST(cpu_lstm_declines) {
  nr_attr relu = {.name = "activations", .type = NR_ATTR_STRINGS, .n = 3,
                  .strings = (char *[]){"Relu", "Tanh", "Tanh"}};
  nr_attr clip = {.name = "clip", .type = NR_ATTR_FLOAT, .f = 2.0f};
  lcase cases[] = {
      {"forward", 0, 2, 1, 4, 3, OPT_B, 3, 1, {clip}, false},
      {"forward", 0, 2, 1, 4, 3, OPT_B, 3, 1, {iattr("input_forget", 1)}, false},
      {"forward", 0, 2, 1, 4, 3, OPT_B, 3, 1, {relu}, false},
      {"forward", 0, 2, 2, 4, 3, OPT_B | OPT_SEQ, 3, 0, {{0}}, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_lstm(t, &cases[i], 7200 + i, NULL);
}
