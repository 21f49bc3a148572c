/* test_rnn.c - unit tests of RNN, GRU and LSTM: a hand-computed RNN, seeded random
 * LSTM (bidirectional, peepholes, sequence_lens) and GRU (both linear_before_reset
 * settings) cases against straightforward per-gate loops written here, the layout
 * attribute checked as a transpose of the default layout, activation attributes and
 * clip, and the shape errors of mismatched weights. */
#include "kernels/ref/executor.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static nr_value nv(nr_dtype t, int rank, const int64_t *dims, void *data) {
  nr_value v = {.dtype = t, .rank = rank, .data = data};
  for (int i = 0; i < rank; i++)
    v.dims[i] = dims[i];
  return v;
}

static uint32_t rng_state;
static float frand(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) & 0xffff) / 65536.0f - 0.5f;
}
static void fill(float *p, int n) {
  for (int i = 0; i < n; i++)
    p[i] = frand();
}

static double sigm(double x) { return 1 / (1 + exp(-x)); }
static bool close_to(double a, double b) { return fabs(a - b) <= 1e-5; }

NR_TEST(rnn_hand_computed_two_steps) {
  float x[2] = {1, 2}, w[1] = {0.5f}, r[1] = {-1}, b[2] = {0.1f, 0.2f};
  nr_value vx = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 1, 1}, x);
  nr_value vw = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 1}, w);
  nr_value vr = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 1}, r);
  nr_value vb = nv(NR_DTYPE_FLOAT, 2, (int64_t[]){1, 2}, b);
  nr_value out[2] = {{0}};
  nr_error err = {0};
  nr_attr hs = {.name = "hidden_size", .type = NR_ATTR_INT, .i = 1};
  REQUIRE(nr_ref_exec_node("RNN", "", 14, 1, &hs, 4,
                           (const nr_value *[]){&vx, &vw, &vr, &vb}, 2, out, &err) == NR_OK,
          "%s", err.message);
  double h1 = tanh(0.5 + 0.3), h2 = tanh(1.0 - h1 + 0.3);
  REQUIRE(out[0].rank == 4 && out[0].dims[0] == 2 && out[0].dims[1] == 1);
  CHECK(close_to(((float *)out[0].data)[0], h1) && close_to(((float *)out[0].data)[1], h2));
  CHECK(close_to(((float *)out[1].data)[0], h2));
  nr_value_free(&out[0]);
  nr_value_free(&out[1]);
}

NR_TEST(rnn_activation_attrs_and_clip) {
  float x[2] = {1, -2}, w[1] = {3}, r[1] = {0};
  nr_value vx = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 1, 1}, x);
  nr_value vw = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 1}, w);
  nr_value vr = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 1}, r);
  char *acts[1] = {"LeakyRelu"};
  float alpha[1] = {0.5f};
  nr_attr at[3] = {
      {.name = "activations", .type = NR_ATTR_STRINGS, .n = 1, .strings = acts},
      {.name = "activation_alpha", .type = NR_ATTR_FLOATS, .n = 1, .floats = alpha},
      {.name = "clip", .type = NR_ATTR_FLOAT, .f = 2.5f}};
  nr_value y = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("RNN", "", 14, 3, at, 3, (const nr_value *[]){&vx, &vw, &vr},
                           1, &y, &err) == NR_OK,
          "%s", err.message);
  /* step 1: clip(3) = 2.5 -> 2.5; step 2: clip(-6) = -2.5 -> -1.25 */
  CHECK(close_to(((float *)y.data)[0], 2.5) && close_to(((float *)y.data)[1], -1.25),
        "%g %g", ((float *)y.data)[0], ((float *)y.data)[1]);
  nr_value_free(&y);
}

enum { S = 4, BT = 3, I = 2, H = 3, D = 2 };

/* One direction of an LSTM over batch row b; writes Y (S, D, BT, H), Y_h and Y_c. */
static void naive_lstm(const float *x, const float *w, const float *r, const float *bias,
                       const float *p, const float *h0, const float *c0, int dir, int b,
                       int len, double *y, double *yh, double *yc) {
  double h[H], c[H];
  const float *W = w + dir * 4 * H * I, *R = r + dir * 4 * H * H;
  const float *Wb = bias + dir * 8 * H, *Rb = Wb + 4 * H, *P = p + dir * 3 * H;
  for (int u = 0; u < H; u++) {
    h[u] = h0[(dir * BT + b) * H + u];
    c[u] = c0[(dir * BT + b) * H + u];
  }
  for (int s = 0; s < len; s++) {
    int t = dir ? len - 1 - s : s;
    double g[4][H], hn[H], cn[H];
    for (int q = 0; q < 4; q++)
      for (int u = 0; u < H; u++) {
        double v = Wb[q * H + u] + Rb[q * H + u];
        for (int k = 0; k < I; k++)
          v += W[(q * H + u) * I + k] * x[(t * BT + b) * I + k];
        for (int k = 0; k < H; k++)
          v += R[(q * H + u) * H + k] * h[k];
        g[q][u] = v;
      }
    for (int u = 0; u < H; u++) {
      double ig = sigm(g[0][u] + P[u] * c[u]), fg = sigm(g[2][u] + P[2 * H + u] * c[u]);
      cn[u] = fg * c[u] + ig * tanh(g[3][u]);
      hn[u] = sigm(g[1][u] + P[H + u] * cn[u]) * tanh(cn[u]);
    }
    memcpy(h, hn, sizeof h);
    memcpy(c, cn, sizeof c);
    for (int u = 0; u < H; u++)
      y[((t * D + dir) * BT + b) * H + u] = h[u];
  }
  for (int u = 0; u < H; u++) {
    yh[(dir * BT + b) * H + u] = len ? h[u] : 0;
    yc[(dir * BT + b) * H + u] = len ? c[u] : 0;
  }
}

NR_TEST(lstm_bidirectional_peepholes_seq_lens) {
  rng_state = 1234;
  float x[S * BT * I], w[D * 4 * H * I], r[D * 4 * H * H], b[D * 8 * H], p[D * 3 * H];
  float h0[D * BT * H], c0[D * BT * H];
  int32_t lens[BT] = {4, 2, 3};
  fill(x, S * BT * I), fill(w, D * 4 * H * I), fill(r, D * 4 * H * H);
  fill(b, D * 8 * H), fill(p, D * 3 * H), fill(h0, D * BT * H), fill(c0, D * BT * H);
  nr_value in[8] = {
      nv(NR_DTYPE_FLOAT, 3, (int64_t[]){S, BT, I}, x),
      nv(NR_DTYPE_FLOAT, 3, (int64_t[]){D, 4 * H, I}, w),
      nv(NR_DTYPE_FLOAT, 3, (int64_t[]){D, 4 * H, H}, r),
      nv(NR_DTYPE_FLOAT, 2, (int64_t[]){D, 8 * H}, b),
      nv(NR_DTYPE_INT32, 1, (int64_t[]){BT}, lens),
      nv(NR_DTYPE_FLOAT, 3, (int64_t[]){D, BT, H}, h0),
      nv(NR_DTYPE_FLOAT, 3, (int64_t[]){D, BT, H}, c0),
      nv(NR_DTYPE_FLOAT, 2, (int64_t[]){D, 3 * H}, p)};
  const nr_value *ins[8];
  for (int i = 0; i < 8; i++)
    ins[i] = &in[i];
  nr_attr at[2] = {{.name = "hidden_size", .type = NR_ATTR_INT, .i = H},
                   {.name = "direction", .type = NR_ATTR_STRING, .s = "bidirectional",
                    .s_len = 13}};
  nr_value out[3] = {{0}};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("LSTM", "", 14, 2, at, 8, ins, 3, out, &err) == NR_OK, "%s",
          err.message);
  double y[S * D * BT * H] = {0}, yh[D * BT * H], yc[D * BT * H];
  for (int dir = 0; dir < D; dir++)
    for (int bi = 0; bi < BT; bi++)
      naive_lstm(x, w, r, b, p, h0, c0, dir, bi, lens[bi], y, yh, yc);
  for (int i = 0; i < S * D * BT * H; i++)
    CHECK(close_to(((float *)out[0].data)[i], y[i]), "Y[%d] got %g want %g (seed 1234)", i,
          ((float *)out[0].data)[i], y[i]);
  for (int i = 0; i < D * BT * H; i++) {
    CHECK(close_to(((float *)out[1].data)[i], yh[i]), "Y_h[%d] (seed 1234)", i);
    CHECK(close_to(((float *)out[2].data)[i], yc[i]), "Y_c[%d] (seed 1234)", i);
  }
  for (int i = 0; i < 3; i++)
    nr_value_free(&out[i]);
}

/* A forward GRU over all rows; Y (S, 1, BT, H). */
static void naive_gru(const float *x, const float *w, const float *r, const float *bias,
                      bool lbr, double *y) {
  for (int b = 0; b < BT; b++) {
    double h[H] = {0};
    for (int t = 0; t < S; t++) {
      double xw[3][H], hr[3][H], hn[H];
      for (int q = 0; q < 3; q++)
        for (int u = 0; u < H; u++) {
          xw[q][u] = bias[q * H + u];
          hr[q][u] = bias[(3 + q) * H + u];
          for (int k = 0; k < I; k++)
            xw[q][u] += w[(q * H + u) * I + k] * x[(t * BT + b) * I + k];
          for (int k = 0; k < H; k++)
            hr[q][u] += r[(q * H + u) * H + k] * h[k];
        }
      for (int u = 0; u < H; u++) {
        double z = sigm(xw[0][u] + hr[0][u]), rg, cand;
        if (lbr) {
          rg = sigm(xw[1][u] + hr[1][u]);
          cand = tanh(xw[2][u] + rg * hr[2][u]);
        } else { /* (r . h) Rh^T needs every unit's reset gate */
          double acc = bias[5 * H + u];
          for (int k = 0; k < H; k++)
            acc += r[(2 * H + u) * H + k] * sigm(xw[1][k] + hr[1][k]) * h[k];
          cand = tanh(xw[2][u] + acc);
        }
        hn[u] = (1 - z) * cand + z * h[u];
      }
      memcpy(h, hn, sizeof h);
      for (int u = 0; u < H; u++)
        y[(t * BT + b) * H + u] = h[u];
    }
  }
}

NR_TEST(gru_both_reset_modes_match_loops) {
  rng_state = 99;
  float x[S * BT * I], w[3 * H * I], r[3 * H * H], b[6 * H];
  fill(x, S * BT * I), fill(w, 3 * H * I), fill(r, 3 * H * H), fill(b, 6 * H);
  nr_value in[4] = {nv(NR_DTYPE_FLOAT, 3, (int64_t[]){S, BT, I}, x),
                    nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 3 * H, I}, w),
                    nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 3 * H, H}, r),
                    nv(NR_DTYPE_FLOAT, 2, (int64_t[]){1, 6 * H}, b)};
  for (int lbr = 0; lbr < 2; lbr++) {
    nr_attr at = {.name = "linear_before_reset", .type = NR_ATTR_INT, .i = lbr};
    nr_value y = {0};
    nr_error err = {0};
    REQUIRE(nr_ref_exec_node("GRU", "", 14, 1, &at, 4,
                             (const nr_value *[]){&in[0], &in[1], &in[2], &in[3]}, 1, &y,
                             &err) == NR_OK,
            "%s", err.message);
    double want[S * BT * H];
    naive_gru(x, w, r, b, lbr, want);
    for (int i = 0; i < S * BT * H; i++)
      CHECK(close_to(((float *)y.data)[i], want[i]), "lbr=%d Y[%d] (seed 99)", lbr, i);
    nr_value_free(&y);
  }
}

NR_TEST(gru_layout1_is_transposed_layout0) {
  rng_state = 7;
  float x[S * BT * I], xt[BT * S * I], w[3 * H * I], r[3 * H * H];
  fill(x, S * BT * I), fill(w, 3 * H * I), fill(r, 3 * H * H);
  for (int ti = 0; ti < S; ti++)
    for (int b = 0; b < BT; b++)
      for (int k = 0; k < I; k++)
        xt[(b * S + ti) * I + k] = x[(ti * BT + b) * I + k];
  nr_value vw = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 3 * H, I}, w);
  nr_value vr = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 3 * H, H}, r);
  nr_value vx = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){S, BT, I}, x);
  nr_value vxt = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){BT, S, I}, xt);
  nr_attr lay = {.name = "layout", .type = NR_ATTR_INT, .i = 1};
  nr_value a[2] = {{0}}, b[2] = {{0}};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("GRU", "", 14, 0, NULL, 3, (const nr_value *[]){&vx, &vw, &vr},
                           2, a, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_ref_exec_node("GRU", "", 14, 1, &lay, 3,
                           (const nr_value *[]){&vxt, &vw, &vr}, 2, b, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(b[0].rank == 4 && b[0].dims[0] == BT && b[0].dims[1] == S && b[0].dims[2] == 1);
  REQUIRE(b[1].dims[0] == BT && b[1].dims[1] == 1);
  for (int ti = 0; ti < S; ti++)
    for (int bi = 0; bi < BT; bi++)
      for (int u = 0; u < H; u++)
        CHECK(((float *)b[0].data)[(bi * S + ti) * H + u] ==
              ((float *)a[0].data)[(ti * BT + bi) * H + u]);
  for (int i = 0; i < BT * H; i++)
    CHECK(((float *)b[1].data)[i] == ((float *)a[1].data)[i]);
  for (int i = 0; i < 2; i++) {
    nr_value_free(&a[i]);
    nr_value_free(&b[i]);
  }
}

NR_TEST(rnn_rejects_mismatched_weights) {
  float x[6] = {0}, w[8] = {0}, r[16] = {0};
  nr_value vx = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 2, 3}, x);
  nr_value vw = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 4, 2}, w); /* input 2, X has 3 */
  nr_value vr = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 4, 4}, r);
  nr_value y = {0};
  nr_error err = {0};
  CHECK(nr_ref_exec_node("RNN", "", 14, 0, NULL, 3, (const nr_value *[]){&vx, &vw, &vr}, 1,
                         &y, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "W") != NULL, "%s", err.message);
  nr_value_free(&y);
  /* A sequence length past the sequence is a runtime error naming sequence_lens. */
  float w3[12] = {0};
  int32_t lens[2] = {1, 5};
  nr_value vw3 = nv(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 4, 3}, w3);
  nr_value vl = nv(NR_DTYPE_INT32, 1, (int64_t[]){2}, lens);
  CHECK(nr_ref_exec_node("RNN", "", 14, 0, NULL, 5,
                         (const nr_value *[]){&vx, &vw3, &vr, NULL, &vl}, 1, &y,
                         &err) == NR_ERR_RUNTIME, "%s", err.message);
  CHECK(strstr(err.message, "sequence_lens") != NULL, "%s", err.message);
  nr_value_free(&y);
}
