/* test_conv.c - unit tests of the reference Conv, ConvTranspose, ConvInteger and
 * QLinearConv: each runs through nr_ref_exec_node() on seeded random data and is
 * compared with naive loops written here. The naive convolutions treat 1-D and 2-D
 * as 3-D with leading size-1 dims, so one plain loop nest serves every rank. Shapes
 * straddle the GEMM's blocks (depth 128, width 512) and cover groups, depthwise,
 * pointwise, dilations, asymmetric pads and auto_pad. */
#include "kernels/ref/executor.h"
#include "kernels/ref/ref_util.h"
#include "rng.h"
#include "unit.h"
#include "op_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED 20240611u

typedef struct conv_case {
  int nsp;
  int64_t n, c, m, group;
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], op[3]; /* op: output_padding */
  bool bias;
} conv_case;

static int64_t prod3(const int64_t *v) {
  return v[0] * v[1] * v[2];
}

/* Pads the case's spatial arrays to 3-D (leading unit dims) for the naive loops. */
static conv_case as_3d(const conv_case *c) {
  conv_case e = *c;
  int lead = 3 - c->nsp;
  for (int i = 0; i < 3; i++) {
    bool pad = i < lead;
    int j = i - lead;
    e.in[i] = pad ? 1 : c->in[j];
    e.k[i] = pad ? 1 : c->k[j];
    e.s[i] = pad ? 1 : c->s[j];
    e.d[i] = pad ? 1 : c->d[j];
    e.pb[i] = pad ? 0 : c->pb[j];
    e.pe[i] = pad ? 0 : c->pe[j];
    e.op[i] = pad ? 0 : c->op[j];
  }
  return e;
}

static void conv_out3(const conv_case *e, int64_t *out) {
  for (int i = 0; i < 3; i++)
    out[i] = (e->in[i] + e->pb[i] + e->pe[i] - e->d[i] * (e->k[i] - 1) - 1) / e->s[i] + 1;
}

/* y[n, m, o] = b[m] + sum over c in m's group and kernel k of x[n, c, o*s - pb + k*d]
 * * w[m, c, k]. */
static void naive_conv(const conv_case *c, const float *x, const float *w, const float *b,
                       double *y) {
  conv_case e = as_3d(c);
  int64_t out[3], cg = e.c / e.group, og = e.m / e.group;
  conv_out3(&e, out);
  int64_t osz = prod3(out), ksz = prod3(e.k);
  for (int64_t n = 0; n < e.n; n++)
    for (int64_t m = 0; m < e.m; m++)
      for (int64_t o = 0; o < osz; o++) {
        int64_t oz = o / (out[1] * out[2]), oy = o / out[2] % out[1], ox = o % out[2];
        double acc = b ? b[m] : 0;
        for (int64_t ci = 0; ci < cg; ci++)
          for (int64_t k = 0; k < ksz; k++) {
            int64_t kz = k / (e.k[1] * e.k[2]), ky = k / e.k[2] % e.k[1], kx = k % e.k[2];
            int64_t iz = oz * e.s[0] - e.pb[0] + kz * e.d[0];
            int64_t iy = oy * e.s[1] - e.pb[1] + ky * e.d[1];
            int64_t ix = ox * e.s[2] - e.pb[2] + kx * e.d[2];
            if (iz < 0 || iy < 0 || ix < 0 || iz >= e.in[0] || iy >= e.in[1] ||
                ix >= e.in[2])
              continue;
            int64_t c_in = (m / og) * cg + ci;
            acc += (double)x[((n * e.c + c_in) * e.in[0] + iz) * e.in[1] * e.in[2] +
                             iy * e.in[2] + ix] *
                   w[(m * cg + ci) * ksz + k];
          }
        y[(n * e.m + m) * osz + o] = acc;
      }
}

/* Runs op with attributes from c (explicit pads) and returns the output. */
static nr_status run_conv_op(const char *op, const conv_case *c, int n_in,
                             const nr_value *const *ins, int n_extra, nr_attr *extra,
                             nr_value *out, nr_error *err) {
  int64_t pads[6], strides[3], dil[3], ops[3];
  for (int i = 0; i < c->nsp; i++) {
    pads[i] = c->pb[i];
    pads[c->nsp + i] = c->pe[i];
    strides[i] = c->s[i];
    dil[i] = c->d[i];
    ops[i] = c->op[i];
  }
  nr_attr at[12] = {attr_ints("pads", 2 * c->nsp, pads),
                    attr_ints("strides", c->nsp, strides),
                    attr_ints("dilations", c->nsp, dil), attr_i("group", c->group)};
  int na = 4;
  if (!strcmp(op, "ConvTranspose"))
    at[na++] = attr_ints("output_padding", c->nsp, ops);
  for (int i = 0; i < n_extra; i++)
    at[na++] = extra[i];
  memset(out, 0, sizeof *out);
  return nr_ref_exec_node(op, "", 17, na, at, n_in, ins, 1, out, err);
}

static void conv_shapes(const conv_case *c, int64_t *xd, int64_t *wd) {
  xd[0] = c->n, xd[1] = c->c;
  wd[0] = c->m, wd[1] = c->c / c->group;
  for (int i = 0; i < c->nsp; i++)
    xd[2 + i] = c->in[i], wd[2 + i] = c->k[i];
}

static void check_conv_case(nr_test_state *t, const conv_case *c, unsigned seed) {
  unsigned s0 = seed;
  int64_t xd[5], wd[5], bd[1] = {c->m};
  conv_shapes(c, xd, wd);
  int rank = c->nsp + 2;
  int64_t xn = xd[0] * xd[1], wn = wd[0] * wd[1];
  for (int i = 0; i < c->nsp; i++)
    xn *= c->in[i], wn *= c->k[i];
  float *x = random_floats(xn, &seed);
  float *w = random_floats(wn, &seed), *b = random_floats(c->m, &seed);
  nr_value xv = make_value(NR_DTYPE_FLOAT, rank, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, rank, wd, w);
  nr_value bv = make_value(NR_DTYPE_FLOAT, 1, bd, b), out;
  nr_error err = {0};
  nr_status st = run_conv_op("Conv", c, c->bias ? 3 : 2,
                             (const nr_value *[]){&xv, &wv, &bv}, 0, NULL, &out, &err);
  CHECK(st == NR_OK, "seed %u: %s", s0, err.message);
  if (st == NR_OK) {
    int64_t n = nr_value_count(&out);
    double *want = malloc(sizeof(double) * (size_t)n);
    naive_conv(c, x, w, c->bias ? b : NULL, want);
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
      if (fabs(((float *)out.data)[i] - want[i]) > 1e-4 * (1 + fabs(want[i])) &&
          bad++ < 3)
        CHECK(false, "seed %u: y[%lld] = %g, want %g", s0, (long long)i,
              ((float *)out.data)[i], want[i]);
    free(want);
  }
  nr_value_free(&out);
  free(x), free(w), free(b);
}

#define CASE2(N, C, M, G, H, W, KH, KW, S, D, P0, P1, P2, P3, B)                         \
  (conv_case) {                                                                          \
    .nsp = 2, .n = N, .c = C, .m = M, .group = G, .in = {H, W}, .k = {KH, KW},           \
    .s = {S, S}, .d = {D, D}, .pb = {P0, P1}, .pe = {P2, P3}, .bias = B                  \
  }

NR_TEST(conv_2d_matches_naive) {
  conv_case cases[] = {
      CASE2(2, 5, 7, 1, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1, true),
      CASE2(1, 4, 6, 1, 17, 19, 3, 2, 2, 2, 1, 0, 2, 1, false),  /* asymmetric pads */
      CASE2(1, 6, 4, 2, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, true),     /* groups */
      CASE2(1, 6, 6, 6, 14, 15, 3, 3, 1, 1, 1, 1, 1, 1, true),   /* depthwise */
      CASE2(2, 4, 8, 4, 15, 16, 3, 3, 2, 1, 1, 1, 0, 0, true),   /* depthwise x2 */
      CASE2(1, 130, 9, 1, 24, 24, 1, 1, 1, 1, 0, 0, 0, 0, true), /* pointwise, K>128 */
      CASE2(1, 15, 5, 1, 23, 25, 3, 3, 1, 1, 1, 1, 1, 1, true),  /* K=135, N=575 */
      CASE2(1, 3, 5, 1, 8, 8, 1, 1, 2, 1, 0, 0, 0, 0, false),    /* strided 1x1 */
      CASE2(1, 1, 3, 1, 7, 6, 7, 6, 1, 1, 0, 0, 0, 0, true),     /* kernel = input */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_conv_case(t, &cases[i], SEED + (unsigned)i);
}

NR_TEST(conv_1d_and_3d_match_naive) {
  conv_case c1 = {.nsp = 1,
                  .n = 2,
                  .c = 3,
                  .m = 4,
                  .group = 1,
                  .in = {20},
                  .k = {5},
                  .s = {3},
                  .d = {2},
                  .pb = {2},
                  .pe = {1},
                  .bias = true};
  conv_case c3 = {.nsp = 3,
                  .n = 1,
                  .c = 4,
                  .m = 6,
                  .group = 2,
                  .in = {5, 6, 7},
                  .k = {3, 2, 3},
                  .s = {1, 2, 1},
                  .d = {1, 1, 2},
                  .pb = {1, 0, 2},
                  .pe = {1, 1, 0},
                  .bias = true};
  check_conv_case(t, &c1, SEED);
  check_conv_case(t, &c3, SEED + 1);
}

/* SAME_UPPER puts the odd pad at the end, SAME_LOWER at the start: compare with the
 * explicit pads the spec prescribes. */
NR_TEST(conv_auto_pad_same_and_valid) {
  unsigned seed = SEED;
  int64_t xd[4] = {1, 2, 6, 5}, wd[4] = {3, 2, 2, 2};
  float *x = random_floats(60, &seed), *w = random_floats(24, &seed);
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  const char *modes[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
  for (int mode = 0; mode < 3; mode++) {
    /* stride 2: out = ceil(6/2)=3, ceil(5/2)=3; total pads 0 and 1. */
    int64_t strides[2] = {2, 2};
    nr_attr at[] = {attr_s("auto_pad", modes[mode]), attr_ints("strides", 2, strides)};
    nr_value out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node("Conv", "", 11, 2, at, 2,
                                    (const nr_value *[]){&xv, &wv}, 1, &out, &err);
    REQUIRE(st == NR_OK, "%s: %s", modes[mode], err.message);
    conv_case c = CASE2(1, 2, 3, 1, 6, 5, 2, 2, 2, 1, 0, 0, 0, 0, false);
    if (mode == 0)
      c.pe[1] = 1;
    if (mode == 1)
      c.pb[1] = 1;
    double want[3 * 3 * 3];
    naive_conv(&c, x, w, NULL, want);
    CHECK(out.dims[2] == 3 && out.dims[3] == (mode == 2 ? 2 : 3), "%s: %lldx%lld",
          modes[mode], (long long)out.dims[2], (long long)out.dims[3]);
    for (int64_t i = 0; i < nr_value_count(&out) && out.dims[3] == 3; i++)
      CHECK(fabs(((float *)out.data)[i] - want[i]) < 1e-5, "%s: y[%lld]", modes[mode],
            (long long)i);
    nr_value_free(&out);
  }
  free(x), free(w);
}

NR_TEST(conv_float16_and_double) {
  unsigned seed = SEED;
  conv_case c = CASE2(1, 3, 4, 1, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, true);
  int64_t xd[4], wd[4], bd[1] = {4};
  conv_shapes(&c, xd, wd);
  float *x = random_floats(126, &seed), *w = random_floats(108, &seed),
        *b = random_floats(4, &seed);
  uint16_t xh[126], wh[108], bh[4];
  double xdd[126], wdd[108], bdd[4];
  for (int i = 0; i < 126; i++)
    xh[i] = nr_f32_to_f16(x[i]), xdd[i] = x[i] = nr_f16_to_f32(xh[i]);
  for (int i = 0; i < 108; i++)
    wh[i] = nr_f32_to_f16(w[i]), wdd[i] = w[i] = nr_f16_to_f32(wh[i]);
  for (int i = 0; i < 4; i++)
    bh[i] = nr_f32_to_f16(b[i]), bdd[i] = b[i] = nr_f16_to_f32(bh[i]);
  double want[4 * 42];
  naive_conv(&c, x, w, b, want);
  for (int pass = 0; pass < 2; pass++) {
    nr_dtype dt = pass ? NR_DTYPE_DOUBLE : NR_DTYPE_FLOAT16;
    nr_value xv = make_value(dt, 4, xd, pass ? (void *)xdd : xh);
    nr_value wv = make_value(dt, 4, wd, pass ? (void *)wdd : wh);
    nr_value bv = make_value(dt, 1, bd, pass ? (void *)bdd : bh), out;
    nr_error err = {0};
    nr_status st = run_conv_op("Conv", &c, 3, (const nr_value *[]){&xv, &wv, &bv}, 0,
                               NULL, &out, &err);
    REQUIRE(st == NR_OK, "%s", err.message);
    CHECK(out.dtype == dt);
    double tol = pass ? 1e-12 : 1e-2;
    for (int64_t i = 0; i < 4 * 42; i++) {
      double got = nr_load_f64(dt, out.data, i);
      CHECK(fabs(got - want[i]) <= tol * (1 + fabs(want[i])), "%s y[%lld] = %g, want %g",
            nr_dtype_name(dt), (long long)i, got, want[i]);
    }
    nr_value_free(&out);
  }
  free(x), free(w), free(b);
}

NR_TEST(conv_rejects_bad_shapes) {
  float x[2 * 5 * 5] = {0}, w[3 * 3 * 3 * 3] = {0};
  int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 3, 3, 3};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value out = {0};
  nr_error err = {0};
  nr_status st = nr_ref_exec_node("Conv", "", 13, 0, NULL, 2,
                                  (const nr_value *[]){&xv, &wv}, 1, &out, &err);
  CHECK(st == NR_ERR_SHAPE, "channel mismatch accepted: %d", st);
  CHECK(strstr(err.message, "channels") != NULL, "message: %s", err.message);
  nr_value_free(&out);
  int64_t big[4] = {3, 2, 7, 7}; /* kernel larger than the input */
  wv = make_value(NR_DTYPE_FLOAT, 4, big, w);
  st = nr_ref_exec_node("Conv", "", 13, 0, NULL, 2, (const nr_value *[]){&xv, &wv}, 1,
                        &out, &err);
  CHECK(st == NR_ERR_SHAPE, "oversized kernel accepted: %d", st);
  nr_value_free(&out);
}

/* ---- ConvTranspose -------------------------------------------------------------- */

/* Scatter form: y[n, oc, i*s - pb + k*d] += x[n, c, i] * w[c, oc - group base, k]. */
static void naive_conv_transpose(const conv_case *c, const float *x, const float *w,
                                 const float *b, double *y, int64_t *out) {
  conv_case e = as_3d(c);
  int64_t cg = e.c / e.group, og = e.m / e.group, ksz = prod3(e.k), isz = prod3(e.in);
  for (int i = 0; i < 3; i++)
    out[i] =
        e.s[i] * (e.in[i] - 1) + e.op[i] + e.d[i] * (e.k[i] - 1) + 1 - e.pb[i] - e.pe[i];
  int64_t osz = prod3(out);
  for (int64_t n = 0; n < e.n; n++)
    for (int64_t m = 0; m < e.m; m++)
      for (int64_t o = 0; o < osz; o++)
        y[(n * e.m + m) * osz + o] = b ? b[m] : 0;
  for (int64_t n = 0; n < e.n; n++)
    for (int64_t ci = 0; ci < e.c; ci++)
      for (int64_t i = 0; i < isz; i++)
        for (int64_t oc = 0; oc < og; oc++)
          for (int64_t k = 0; k < ksz; k++) {
            int64_t pos[3],
                ii[3] = {i / (e.in[1] * e.in[2]), i / e.in[2] % e.in[1], i % e.in[2]};
            int64_t kk[3] = {k / (e.k[1] * e.k[2]), k / e.k[2] % e.k[1], k % e.k[2]};
            bool in = true;
            for (int d = 0; d < 3; d++) {
              pos[d] = ii[d] * e.s[d] - e.pb[d] + kk[d] * e.d[d];
              in = in && pos[d] >= 0 && pos[d] < out[d];
            }
            if (!in)
              continue;
            int64_t m = (ci / cg) * og + oc;
            y[(n * e.m + m) * osz + (pos[0] * out[1] + pos[1]) * out[2] + pos[2]] +=
                (double)x[(n * e.c + ci) * isz + i] * w[(ci * og + oc) * ksz + k];
          }
}

static void check_transpose_case(nr_test_state *t, const conv_case *c, unsigned seed) {
  unsigned s0 = seed;
  conv_case e = as_3d(c);
  int64_t xd[5] = {c->n, c->c}, wd[5] = {c->c, c->m / c->group}, bd[1] = {c->m};
  for (int i = 0; i < c->nsp; i++)
    xd[2 + i] = c->in[i], wd[2 + i] = c->k[i];
  float *x = random_floats(c->n * c->c * prod3(e.in), &seed);
  float *w = random_floats(c->c * (c->m / c->group) * prod3(e.k), &seed);
  float *b = random_floats(c->m, &seed);
  nr_value xv = make_value(NR_DTYPE_FLOAT, c->nsp + 2, xd, x);
  nr_value wv = make_value(NR_DTYPE_FLOAT, c->nsp + 2, wd, w);
  nr_value bv = make_value(NR_DTYPE_FLOAT, 1, bd, b), out;
  nr_error err = {0};
  nr_status st = run_conv_op("ConvTranspose", c, c->bias ? 3 : 2,
                             (const nr_value *[]){&xv, &wv, &bv}, 0, NULL, &out, &err);
  CHECK(st == NR_OK, "seed %u: %s", s0, err.message);
  if (st == NR_OK) {
    int64_t od[3];
    double *want = malloc(sizeof(double) * (size_t)nr_value_count(&out));
    naive_conv_transpose(c, x, w, c->bias ? b : NULL, want, od);
    CHECK(nr_value_count(&out) == c->n * c->m * prod3(od), "seed %u: output size", s0);
    int bad = 0;
    for (int64_t i = 0; i < nr_value_count(&out); i++)
      if (fabs(((float *)out.data)[i] - want[i]) > 1e-4 * (1 + fabs(want[i])) &&
          bad++ < 3)
        CHECK(false, "seed %u: y[%lld] = %g, want %g", s0, (long long)i,
              ((float *)out.data)[i], want[i]);
    free(want);
  }
  nr_value_free(&out);
  free(x), free(w), free(b);
}

NR_TEST(conv_transpose_matches_naive) {
  conv_case cases[] = {
      {.nsp = 2,
       .n = 1,
       .c = 3,
       .m = 4,
       .group = 1,
       .in = {5, 4},
       .k = {3, 3},
       .s = {2, 2},
       .d = {1, 1},
       .pb = {1, 0},
       .pe = {0, 1},
       .op = {1, 0},
       .bias = true},
      {.nsp = 2,
       .n = 2,
       .c = 4,
       .m = 6,
       .group = 2,
       .in = {4, 5},
       .k = {2, 3},
       .s = {1, 3},
       .d = {2, 1},
       .pb = {0, 1},
       .pe = {1, 1},
       .op = {0, 2},
       .bias = false},
      {.nsp = 1,
       .n = 1,
       .c = 2,
       .m = 3,
       .group = 1,
       .in = {7},
       .k = {4},
       .s = {3},
       .d = {1},
       .op = {2},
       .bias = true},
      {.nsp = 3,
       .n = 1,
       .c = 2,
       .m = 2,
       .group = 2,
       .in = {3, 4, 2},
       .k = {2, 2, 3},
       .s = {2, 1, 2},
       .d = {1, 2, 1},
       .pb = {1, 0, 0},
       .pe = {0, 0, 1},
       .bias = true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_transpose_case(t, &cases[i], SEED + 7 * (unsigned)i);
}

/* output_shape fixes the size; the spare padding goes to the start except for
 * SAME_UPPER. x = [1, 2], w = [1, 1, 1] stride 2: natural output 5 = [1 1 3 2 2]. */
NR_TEST(conv_transpose_output_shape) {
  float x[2] = {1, 2}, w[3] = {1, 1, 1};
  int64_t xd[3] = {1, 1, 2}, wd[3] = {1, 1, 3}, os[1] = {4}, st2[1] = {2};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 3, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, 3, wd, w);
  const char *modes[] = {"NOTSET", "SAME_UPPER"};
  const float want[2][4] = {{1, 3, 2, 2}, {1, 1, 3, 2}};
  for (int mode = 0; mode < 2; mode++) {
    nr_attr at[] = {attr_ints("output_shape", 1, os), attr_ints("strides", 1, st2),
                    attr_s("auto_pad", modes[mode])};
    nr_value out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node("ConvTranspose", "", 17, 3, at, 2,
                                    (const nr_value *[]){&xv, &wv}, 1, &out, &err);
    REQUIRE(st == NR_OK, "%s", err.message);
    REQUIRE(out.rank == 3 && out.dims[2] == 4, "rank %d", out.rank);
    for (int i = 0; i < 4; i++)
      CHECK(((float *)out.data)[i] == want[mode][i], "%s y[%d] = %g, want %g",
            modes[mode], i, ((float *)out.data)[i], want[mode][i]);
    nr_value_free(&out);
  }
}

/* ---- ConvInteger and QLinearConv ------------------------------------------------ */

static void random_u8(uint8_t *p, int n, nr_rng *r) {
  for (int i = 0; i < n; i++)
    p[i] = (uint8_t)nr_rng_u32(r);
}

/* Per-output-channel weight scales and zero points, int8 weights, uint8 activations,
 * bias: integer accumulation then round-half-even requantization with saturation. */
NR_TEST(qlinear_conv_per_channel_matches_naive) {
  nr_rng rng = nr_rng_make(SEED);
  enum { N = 1, C = 4, M = 3, H = 6, W = 5, K = 3, OH = 4, OW = 3 };
  uint8_t x[N * C * H * W], xzp = 7, yzp = 120;
  int8_t w[M * C * K * K], wzp[M] = {0, 3, -2};
  random_u8(x, sizeof x, &rng);
  random_u8((uint8_t *)w, sizeof w, &rng);
  int32_t bias[M] = {100, -2000, 55};
  float xs = 0.02f, ws[M] = {0.005f, 0.011f, 0.0031f}, ys = 0.07f;
  int64_t xd[4] = {N, C, H, W}, wd[4] = {M, C, K, K}, md[1] = {M}, sd[1] = {0};
  nr_value in[9] = {
      make_value(NR_DTYPE_UINT8, 4, xd, x),    make_value(NR_DTYPE_FLOAT, 0, sd, &xs),
      make_value(NR_DTYPE_UINT8, 0, sd, &xzp), make_value(NR_DTYPE_INT8, 4, wd, w),
      make_value(NR_DTYPE_FLOAT, 1, md, ws),   make_value(NR_DTYPE_INT8, 1, md, wzp),
      make_value(NR_DTYPE_FLOAT, 0, sd, &ys),  make_value(NR_DTYPE_UINT8, 0, sd, &yzp),
      make_value(NR_DTYPE_INT32, 1, md, bias)};
  const nr_value *ins[9];
  for (int i = 0; i < 9; i++)
    ins[i] = &in[i];
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("QLinearConv", "", 10, 0, NULL, 9, ins, 1, &out, &err) ==
              NR_OK,
          "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_UINT8 && out.dims[2] == OH && out.dims[3] == OW);
  for (int m = 0; m < M; m++)
    for (int oy = 0; oy < OH; oy++)
      for (int ox = 0; ox < OW; ox++) {
        int64_t acc = bias[m];
        for (int c = 0; c < C; c++)
          for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++)
              acc += (int64_t)(x[(c * H + oy + ky) * W + ox + kx] - xzp) *
                     (w[((m * C + c) * K + ky) * K + kx] - wzp[m]);
        double v = nearbyint((double)acc * (double)(xs * ws[m] / ys) + yzp);
        int want = v < 0 ? 0 : v > 255 ? 255 : (int)v;
        int got = ((uint8_t *)out.data)[(m * OH + oy) * OW + ox];
        CHECK(got == want, "y[%d,%d,%d] = %d, want %d", m, oy, ox, got, want);
      }
  nr_value_free(&out);
}

NR_TEST(conv_integer_with_zero_points) {
  nr_rng rng = nr_rng_make(SEED + 3);
  enum { C = 2, M = 2, H = 4, W = 4, K = 2 };
  int8_t x[C * H * W], w[M * C * K * K], xzp = -3;
  random_u8((uint8_t *)x, sizeof x, &rng);
  random_u8((uint8_t *)w, sizeof w, &rng);
  int8_t wzp[M] = {5, -1};
  int64_t xd[4] = {1, C, H, W}, wd[4] = {M, C, K, K}, md[1] = {M}, sd[1] = {0},
          pads[4] = {1, 1, 0, 0};
  nr_value xv = make_value(NR_DTYPE_INT8, 4, xd, x),
           wv = make_value(NR_DTYPE_INT8, 4, wd, w);
  nr_value xz = make_value(NR_DTYPE_INT8, 0, sd, &xzp),
           wz = make_value(NR_DTYPE_INT8, 1, md, wzp);
  nr_attr at[] = {attr_ints("pads", 4, pads)};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("ConvInteger", "", 10, 1, at, 4,
                           (const nr_value *[]){&xv, &wv, &xz, &wz}, 1, &out,
                           &err) == NR_OK,
          "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_INT32 && out.dims[2] == 4 && out.dims[3] == 4);
  for (int m = 0; m < M; m++)
    for (int oy = 0; oy < 4; oy++)
      for (int ox = 0; ox < 4; ox++) {
        int32_t acc = 0;
        for (int c = 0; c < C; c++)
          for (int ky = 0; ky < K; ky++)
            for (int kx = 0; kx < K; kx++) {
              int iy = oy - 1 + ky, ix = ox - 1 + kx;
              int xv_ = (iy < 0 || ix < 0) ? xzp : x[(c * H + iy) * W + ix];
              acc += (xv_ - xzp) * (w[((m * C + c) * K + ky) * K + kx] - wzp[m]);
            }
        int32_t got = ((int32_t *)out.data)[(m * 4 + oy) * 4 + ox];
        CHECK(got == acc, "y[%d,%d,%d] = %d, want %d", m, oy, ox, got, acc);
      }
  nr_value_free(&out);
}

/* ---- DeformConv and CausalConvWithState ----------------------------------------- */

/* With zero offsets and no mask DeformConv is Conv. */
NR_TEST(deform_conv_zero_offsets_is_conv) {
  unsigned seed = SEED + 11;
  conv_case c = CASE2(1, 4, 4, 2, 6, 7, 3, 2, 2, 1, 1, 0, 1, 1, true);
  int64_t xd[4], wd[4], bd[1] = {4}, od[4] = {1, 2 * 6 * 2, 3, 4}; /* offset_group 2 */
  conv_shapes(&c, xd, wd);
  float *x = random_floats(4 * 42, &seed), *w = random_floats(4 * 2 * 6, &seed);
  float *b = random_floats(4, &seed), off[24 * 12] = {0};
  int64_t pads[4] = {1, 0, 1, 1}, strides[2] = {2, 2};
  nr_attr at[] = {attr_ints("pads", 4, pads), attr_ints("strides", 2, strides),
                  attr_i("group", 2), attr_i("offset_group", 2)};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value ov = make_value(NR_DTYPE_FLOAT, 4, od, off),
           bv = make_value(NR_DTYPE_FLOAT, 1, bd, b);
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("DeformConv", "", 19, 4, at, 4,
                           (const nr_value *[]){&xv, &wv, &ov, &bv}, 1, &out,
                           &err) == NR_OK,
          "%s", err.message);
  double want[4 * 12];
  naive_conv(&c, x, w, b, want);
  REQUIRE(nr_value_count(&out) == 48, "%lld outputs", (long long)nr_value_count(&out));
  for (int i = 0; i < 48; i++)
    CHECK(fabs(((float *)out.data)[i] - want[i]) < 1e-5, "y[%d] = %g, want %g", i,
          ((float *)out.data)[i], want[i]);
  nr_value_free(&out);
  free(x), free(w), free(b);
}

/* A 1x1 kernel moved by (0.5, 0.5) averages a 2x2 neighbourhood (zeros outside X);
 * the mask scales each tap. */
NR_TEST(deform_conv_bilinear_offsets_and_mask) {
  float x[4] = {1, 2, 3, 4}, w[1] = {1}, off[8], mask[4] = {0.5f, 1, 1, 1};
  for (int i = 0; i < 8; i++)
    off[i] = 0.5f;
  int64_t xd[4] = {1, 1, 2, 2}, wd[4] = {1, 1, 1, 1}, od[4] = {1, 2, 2, 2},
          md[4] = {1, 1, 2, 2};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, 4, wd, w);
  nr_value ov = make_value(NR_DTYPE_FLOAT, 4, od, off),
           mv = make_value(NR_DTYPE_FLOAT, 4, md, mask);
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("DeformConv", "", 19, 0, NULL, 5,
                           (const nr_value *[]){&xv, &wv, &ov, NULL, &mv}, 1, &out,
                           &err) == NR_OK,
          "%s", err.message);
  /* (0.5,0.5): 2.5 * mask 0.5; (0.5,1.5): (2+4)/4; (1.5,0.5): (3+4)/4; (1.5,1.5): 4/4 */
  const float want[4] = {1.25f, 1.5f, 1.75f, 1.0f};
  for (int i = 0; i < 4; i++)
    CHECK(fabs(((float *)out.data)[i] - want[i]) < 1e-6, "y[%d] = %g, want %g", i,
          ((float *)out.data)[i], want[i]);
  nr_value_free(&out);
}

NR_TEST(causal_conv_with_state_by_hand) {
  float x[3] = {1, 2, 3}, w[3] = {1, 10, 100}, past[2] = {5, 6}, bias[1] = {-216};
  int64_t xd[3] = {1, 1, 3}, wd[3] = {1, 1, 3}, pd[3] = {1, 1, 2}, bd[1] = {1};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 3, xd, x),
           wv = make_value(NR_DTYPE_FLOAT, 3, wd, w);
  nr_value pv = make_value(NR_DTYPE_FLOAT, 3, pd, past),
           bv = make_value(NR_DTYPE_FLOAT, 1, bd, bias);
  for (int silu = 0; silu < 2; silu++) {
    nr_attr at[] = {attr_s("activation", silu ? "silu" : "none")};
    nr_value out[2] = {0};
    nr_error err = {0};
    REQUIRE(nr_ref_exec_node("CausalConvWithState", "", 27, 1, at, 4,
                             (const nr_value *[]){&xv, &wv, silu ? &bv : NULL, &pv}, 2,
                             out, &err) == NR_OK,
            "%s", err.message);
    /* padded [5 6 1 2 3]: 5+60+100, 6+10+200, 1+20+300; with bias -216: -51, 0, 105 */
    const double plain[3] = {165, 216, 321}, act[3] = {-51 / (1 + exp(51.0)), 0, 105};
    for (int i = 0; i < 3; i++) {
      double want = silu ? act[i] : plain[i];
      CHECK(fabs(((float *)out[0].data)[i] - want) < 1e-4, "silu %d y[%d] = %g, want %g",
            silu, i, ((float *)out[0].data)[i], want);
    }
    CHECK(out[1].dims[2] == 2 && ((float *)out[1].data)[0] == 2 &&
              ((float *)out[1].data)[1] == 3,
          "present_state");
    nr_value_free(&out[0]), nr_value_free(&out[1]);
  }
}

/* ---- static shape inference ----------------------------------------------------- */

/* Calls the registered infer() of op with data-less inputs, as nr_graph_infer does. */
static nr_status infer_only(const char *op, int n_attrs, nr_attr *attrs, int n_in,
                            nr_value *ins, nr_value *out, nr_error *err) {
  nr_node node = {.name = "n",
                  .op_type = (char *)op,
                  .domain = "",
                  .opset = 13,
                  .n_attrs = n_attrs,
                  .attrs = attrs};
  nr_value *in_ptrs[4] = {&ins[0], &ins[1], n_in > 2 ? &ins[2] : NULL, NULL};
  nr_value *out_ptrs[1] = {out};
  nr_op_ctx ctx = {.node = &node,
                   .n_inputs = n_in,
                   .inputs = in_ptrs,
                   .n_outputs = 1,
                   .outputs = out_ptrs,
                   .err = err};
  const nr_op_def *def = nr_op_find("", op, 13);
  return def ? def->infer(&ctx) : NR_ERR_UNSUPPORTED;
}

NR_TEST(conv_static_infer_keeps_unknowns) {
  int64_t pads[4] = {1, 1, 1, 1};
  nr_attr at[] = {attr_ints("pads", 4, pads)};
  nr_value ins[2] = {{.dtype = NR_DTYPE_FLOAT, .rank = 4, .dims = {-1, 3, -1, 10}},
                     {.dtype = NR_DTYPE_FLOAT, .rank = 4, .dims = {8, 3, 3, 3}}};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(infer_only("Conv", 1, at, 2, ins, &out, &err) == NR_OK, "%s", err.message);
  CHECK(out.rank == 4 && out.dims[0] == -1 && out.dims[1] == 8 && out.dims[2] == -1 &&
            out.dims[3] == 10,
        "got rank %d [%lld %lld %lld %lld]", out.rank, (long long)out.dims[0],
        (long long)out.dims[1], (long long)out.dims[2], (long long)out.dims[3]);
  ins[0].rank = -1;
  REQUIRE(infer_only("Conv", 1, at, 2, ins, &out, &err) == NR_OK, "%s", err.message);
  CHECK(out.rank == 4 && out.dims[1] == 8 && out.dims[3] == -1, "rank from W: %d",
        out.rank);
  ins[1].rank = -1;
  REQUIRE(infer_only("Conv", 1, at, 2, ins, &out, &err) == NR_OK, "%s", err.message);
  CHECK(out.rank == -1, "unknown ranks give rank %d", out.rank);
  nr_value tins[2] = {{.dtype = NR_DTYPE_FLOAT, .rank = 4, .dims = {1, 4, -1, 5}},
                      {.dtype = NR_DTYPE_FLOAT, .rank = 4, .dims = {4, 2, 3, 3}}};
  REQUIRE(infer_only("ConvTranspose", 0, NULL, 2, tins, &out, &err) == NR_OK, "%s",
          err.message);
  CHECK(out.rank == 4 && out.dims[1] == 2 && out.dims[2] == -1 && out.dims[3] == 7,
        "ConvTranspose [%lld %lld %lld]", (long long)out.dims[1], (long long)out.dims[2],
        (long long)out.dims[3]);
  tins[1].dims[0] = 3; /* W's input channels must match X's */
  CHECK(infer_only("ConvTranspose", 0, NULL, 2, tins, &out, &err) == NR_ERR_SHAPE);
}
