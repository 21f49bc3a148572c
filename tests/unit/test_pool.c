/* test_pool.c - unit tests of the reference pooling operators: MaxPool (with Indices
 * and storage_order), AveragePool (count_include_pad), LpPool, the Global forms and
 * MaxUnpool, run through nr_ref_exec_node() and compared with naive 2-D loops written
 * here on seeded random data, plus hand-computed ceil_mode cases. */
#include "kernels/ref/executor.h"
#include "kernels/ref/ref_util.h"
#include "rng.h"
#include "unit.h"
#include "op_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED 77123u

typedef struct pool_case {
  int64_t n, c, h, w, kh, kw, s, d, pb[2], pe[2];
  bool ceil, count_pad;
} pool_case;

static int64_t naive_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb,
                         int64_t pe, bool ceil_mode) {
  int64_t span = in + pb + pe - (d * (k - 1) + 1);
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pb)
    out--;
  return out;
}

/* kind 0: max (idx gets the row-major argmax), 1: average, 2: L2 norm. */
static void naive_pool(const pool_case *p, int kind, const float *x, double *y,
                       int64_t *idx, int64_t *oh, int64_t *ow) {
  *oh = naive_out(p->h, p->kh, p->s, p->d, p->pb[0], p->pe[0], p->ceil);
  *ow = naive_out(p->w, p->kw, p->s, p->d, p->pb[1], p->pe[1], p->ceil);
  for (int64_t pl = 0; pl < p->n * p->c; pl++)
    for (int64_t oy = 0; oy < *oh; oy++)
      for (int64_t ox = 0; ox < *ow; ox++) {
        double acc = kind == 0 ? -INFINITY : 0;
        int64_t best = -1, valid = 0, padded = 0;
        for (int64_t ky = 0; ky < p->kh; ky++)
          for (int64_t kx = 0; kx < p->kw; kx++) {
            int64_t iy = oy * p->s - p->pb[0] + ky * p->d,
                    ix = ox * p->s - p->pb[1] + kx * p->d;
            if (iy < p->h + p->pe[0] && ix < p->w + p->pe[1])
              padded++;
            if (iy < 0 || ix < 0 || iy >= p->h || ix >= p->w)
              continue;
            valid++;
            double v = x[pl * p->h * p->w + iy * p->w + ix];
            if (kind == 0 && v > acc)
              acc = v, best = pl * p->h * p->w + iy * p->w + ix;
            if (kind == 1)
              acc += v;
            if (kind == 2)
              acc += v * v;
          }
        int64_t j = (pl * *oh + oy) * *ow + ox;
        y[j] = kind == 0   ? acc
               : kind == 1 ? acc / (double)(p->count_pad ? padded : valid)
                           : sqrt(acc);
        if (idx)
          idx[j] = best;
      }
}

static void check_pool_case(nr_test_state *t, const pool_case *p, int kind,
                            unsigned seed) {
  static const char *ops[] = {"MaxPool", "AveragePool", "LpPool"};
  unsigned s0 = seed;
  nr_rng rng = nr_rng_make(seed);
  int64_t count = p->n * p->c * p->h * p->w, xd[4] = {p->n, p->c, p->h, p->w};
  float *x = malloc(sizeof(float) * (size_t)count);
  for (int64_t i = 0; i < count; i++)
    x[i] = (float)nr_rng_int(&rng, 0, 20000) / 1000.0f - 10.0f;
  int64_t kern[2] = {p->kh, p->kw}, strides[2] = {p->s, p->s}, dil[2] = {p->d, p->d};
  int64_t pads[4] = {p->pb[0], p->pb[1], p->pe[0], p->pe[1]};
  nr_attr at[] = {
      attr_ints("kernel_shape", 2, kern), attr_ints("strides", 2, strides),
      attr_ints("dilations", 2, dil),     attr_ints("pads", 4, pads),
      attr_i("ceil_mode", p->ceil),       attr_i("count_include_pad", p->count_pad)};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x), out[2] = {0};
  nr_error err = {0};
  int n_out = kind == 0 ? 2 : 1, n_at = kind == 1 ? 6 : 5;
  nr_status st = nr_ref_exec_node(ops[kind], "", kind == 2 ? 18 : 19, n_at, at, 1,
                                  (const nr_value *[]){&xv}, n_out, out, &err);
  CHECK(st == NR_OK, "%s seed %u: %s", ops[kind], s0, err.message);
  if (st == NR_OK) {
    int64_t oh, ow, n = nr_value_count(&out[0]);
    double *want = malloc(sizeof(double) * (size_t)n);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
    naive_pool(p, kind, x, want, idx, &oh, &ow);
    CHECK(out[0].dims[2] == oh && out[0].dims[3] == ow,
          "%s seed %u: %lldx%lld, want %lldx%lld", ops[kind], s0,
          (long long)out[0].dims[2], (long long)out[0].dims[3], (long long)oh,
          (long long)ow);
    for (int64_t i = 0; i < n && out[0].dims[3] == ow; i++) {
      float got = ((float *)out[0].data)[i];
      CHECK(fabs(got - want[i]) <= 1e-5 * (1 + fabs(want[i])),
            "%s seed %u: y[%lld] = %g, want %g", ops[kind], s0, (long long)i, got,
            want[i]);
      if (kind == 0)
        CHECK(((int64_t *)out[1].data)[i] == idx[i], "seed %u: index %lld", s0,
              (long long)i);
    }
    free(want), free(idx);
  }
  nr_value_free(&out[0]), nr_value_free(&out[1]);
  free(x);
}

NR_TEST(pool_2d_matches_naive) {
  pool_case cases[] = {
      {1, 2, 9, 8, 3, 3, 2, 1, {1, 1}, {1, 1}, false, false},
      {2, 3, 10, 11, 3, 2, 2, 1, {0, 1}, {1, 0}, true, false},
      {1, 2, 12, 13, 2, 3, 3, 2, {1, 0}, {0, 2}, true, true},
      {1, 1, 7, 7, 3, 3, 1, 2, {2, 2}, {2, 2}, false, true},
      {1, 4, 8, 8, 2, 2, 2, 1, {0, 0}, {0, 0}, false, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int kind = 0; kind < 3; kind++)
      check_pool_case(t, &cases[i], kind, SEED + 10 * (unsigned)i + (unsigned)kind);
}

/* Runs a 1-D pool over x[5] or x[4] and compares with hand-computed values. */
static void check_1d(nr_test_state *t, const char *op, int n, int64_t pb, int64_t pe,
                     int count_pad, int want_n, const float *want) {
  float x[5] = {1, 2, 3, 4, 5};
  int64_t xd[3] = {1, 1, n}, k[1] = {2}, s[1] = {2}, pads[2] = {pb, pe};
  nr_attr at[] = {attr_ints("kernel_shape", 1, k), attr_ints("strides", 1, s),
                  attr_ints("pads", 2, pads), attr_i("ceil_mode", 1),
                  attr_i("count_include_pad", count_pad)};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 3, xd, x), out = {0};
  nr_error err = {0};
  nr_status st = nr_ref_exec_node(op, "", 19, strcmp(op, "MaxPool") ? 5 : 4, at, 1,
                                  (const nr_value *[]){&xv}, 1, &out, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  REQUIRE(out.dims[2] == want_n, "%s: %lld outputs, want %d", op, (long long)out.dims[2],
          want_n);
  for (int i = 0; i < want_n; i++)
    CHECK(((float *)out.data)[i] == want[i], "%s y[%d] = %g, want %g", op, i,
          ((float *)out.data)[i], want[i]);
  nr_value_free(&out);
}

NR_TEST(pool_ceil_mode_by_hand) {
  check_1d(t, "MaxPool", 5, 0, 0, 0, 3, (const float[]){2, 4, 5});
  check_1d(t, "AveragePool", 5, 0, 0, 0, 3, (const float[]){1.5f, 3.5f, 5});
  /* the last window [5, pad] counts the pad but not the ceil overhang */
  check_1d(t, "AveragePool", 5, 0, 1, 1, 3, (const float[]){1.5f, 3.5f, 2.5f});
  /* a window that would start inside the right padding is dropped */
  check_1d(t, "AveragePool", 4, 0, 1, 0, 2, (const float[]){1.5f, 3.5f});
}

/* storage_order 1 numbers the spatial positions column-major; the (n, c) plane
 * offset is added either way. */
NR_TEST(maxpool_indices_storage_order) {
  float x[12] = {1, 2, 3, 4, 5, 9, /* plane 1: */ 7, 0, 0, 0, 1, 0};
  int64_t xd[4] = {1, 2, 2, 3}, k[2] = {2, 2};
  const int64_t want[2][4] = {{4, 5, 6, 10}, {3, 5, 6, 9}};
  for (int order = 0; order < 2; order++) {
    nr_attr at[] = {attr_ints("kernel_shape", 2, k), attr_i("storage_order", order)};
    nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x), out[2] = {0};
    nr_error err = {0};
    REQUIRE(nr_ref_exec_node("MaxPool", "", 12, 2, at, 1, (const nr_value *[]){&xv}, 2,
                             out, &err) == NR_OK,
            "%s", err.message);
    for (int i = 0; i < 4; i++)
      CHECK(((int64_t *)out[1].data)[i] == want[order][i],
            "order %d: I[%d] = %lld, want %lld", order, i,
            (long long)((int64_t *)out[1].data)[i], (long long)want[order][i]);
    nr_value_free(&out[0]), nr_value_free(&out[1]);
  }
}

NR_TEST(maxpool_uint8_and_int8) {
  uint8_t x[8] = {0, 255, 3, 200, 17, 16, 254, 1};
  int64_t xd[3] = {1, 2, 4}, k[1] = {2}, s[1] = {1};
  nr_attr at[] = {attr_ints("kernel_shape", 1, k), attr_ints("strides", 1, s)};
  for (int signed_ = 0; signed_ < 2; signed_++) {
    nr_dtype dt = signed_ ? NR_DTYPE_INT8 : NR_DTYPE_UINT8;
    nr_value xv = make_value(dt, 3, xd, x), out = {0};
    nr_error err = {0};
    REQUIRE(nr_ref_exec_node("MaxPool", "", 12, 2, at, 1, (const nr_value *[]){&xv}, 1,
                             &out, &err) == NR_OK,
            "%s", err.message);
    CHECK(out.dtype == dt);
    for (int pl = 0; pl < 2; pl++)
      for (int i = 0; i < 3; i++) {
        int64_t a = nr_load_i64(dt, x, pl * 4 + i),
                b = nr_load_i64(dt, x, pl * 4 + i + 1);
        int64_t got = nr_load_i64(dt, out.data, pl * 3 + i);
        CHECK(got == (a > b ? a : b), "%s y[%d,%d] = %lld", nr_dtype_name(dt), pl, i,
              (long long)got);
      }
    nr_value_free(&out);
  }
}

NR_TEST(global_pools_match_naive) {
  nr_rng rng = nr_rng_make(SEED);
  enum { N = 2, C = 3, S = 35 };
  float x[N * C * S];
  for (int i = 0; i < N * C * S; i++)
    x[i] = (float)nr_rng_int(&rng, 0, 2000) / 100.0f - 10.0f;
  int64_t xd[4] = {N, C, 5, 7};
  const char *ops[] = {"GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"};
  for (int kind = 0; kind < 3; kind++) {
    nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x), out = {0};
    nr_error err = {0};
    nr_attr at[] = {attr_i("p", 3)};
    REQUIRE(nr_ref_exec_node(ops[kind], "", 13, kind == 2, at, 1,
                             (const nr_value *[]){&xv}, 1, &out, &err) == NR_OK,
            "%s", err.message);
    CHECK(out.rank == 4 && out.dims[2] == 1 && out.dims[3] == 1, "%s shape", ops[kind]);
    for (int pl = 0; pl < N * C; pl++) {
      double acc = kind == 0 ? -INFINITY : 0;
      for (int i = 0; i < S; i++) {
        double v = x[pl * S + i];
        acc = kind == 0   ? (v > acc ? v : acc)
              : kind == 1 ? acc + v
                          : acc + pow(fabs(v), 3);
      }
      double want = kind == 0 ? acc : kind == 1 ? acc / S : cbrt(acc);
      double got = ((float *)out.data)[pl];
      CHECK(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "%s plane %d: %g, want %g",
            ops[kind], pl, got, want);
    }
    nr_value_free(&out);
  }
}

/* MaxPool's Indices fed to MaxUnpool put each max back where it came from. */
NR_TEST(maxunpool_inverts_maxpool) {
  nr_rng rng = nr_rng_make(SEED + 5);
  enum { H = 6, W = 8 };
  float x[2 * H * W];
  for (int i = 0; i < 2 * H * W; i++)
    x[i] = (float)nr_rng_int(&rng, 0, 999);
  int64_t xd[4] = {1, 2, H, W}, k[2] = {2, 2}, s[2] = {2, 2};
  nr_attr at[] = {attr_ints("kernel_shape", 2, k), attr_ints("strides", 2, s)};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x), pooled[2] = {0}, out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("MaxPool", "", 12, 2, at, 1, (const nr_value *[]){&xv}, 2,
                           pooled, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(nr_ref_exec_node("MaxUnpool", "", 11, 2, at, 2,
                           (const nr_value *[]){&pooled[0], &pooled[1]}, 1, &out,
                           &err) == NR_OK,
          "%s", err.message);
  REQUIRE(nr_value_count(&out) == 2 * H * W);
  int nonzero = 0;
  for (int i = 0; i < 2 * H * W; i++) {
    float got = ((float *)out.data)[i];
    nonzero += got != 0;
    CHECK(got == 0 || got == x[i], "y[%d] = %g, x = %g", i, got, x[i]);
  }
  CHECK(nonzero <= 2 * (H / 2) * (W / 2) && nonzero > 0, "%d values restored", nonzero);
  nr_value_free(&pooled[0]), nr_value_free(&pooled[1]), nr_value_free(&out);
}

/* With output_shape larger than the default, the default-shaped result is placed at
 * the start of each dim (the ONNX reference's reading). */
NR_TEST(maxunpool_output_shape) {
  float x[4] = {5, 6, 7, 8};
  int64_t ind[4] = {5, 7, 13, 15}, xd[4] = {1, 1, 2, 2}, os[4] = {1, 1, 5, 5},
          od[1] = {4};
  int64_t k[2] = {2, 2}, s[2] = {2, 2};
  nr_attr at[] = {attr_ints("kernel_shape", 2, k), attr_ints("strides", 2, s)};
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, x),
           iv = make_value(NR_DTYPE_INT64, 4, xd, ind);
  nr_value sv = make_value(NR_DTYPE_INT64, 1, od, os), out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("MaxUnpool", "", 11, 2, at, 3,
                           (const nr_value *[]){&xv, &iv, &sv}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(out.dims[2] == 5 && out.dims[3] == 5);
  for (int i = 0; i < 25; i++) {
    float want = i == 6 ? 5 : i == 8 ? 6 : i == 16 ? 7 : i == 18 ? 8 : 0;
    CHECK(((float *)out.data)[i] == want, "y[%d] = %g, want %g", i,
          ((float *)out.data)[i], want);
  }
  nr_value_free(&out);
}

/* infer() without data: unknown spatial dims stay unknown, known ones resolve. */
NR_TEST(pool_static_infer) {
  int64_t k[2] = {3, 3}, s[2] = {2, 2};
  nr_attr at[] = {attr_ints("kernel_shape", 2, k), attr_ints("strides", 2, s)};
  nr_value x = {.dtype = NR_DTYPE_FLOAT, .rank = 4, .dims = {-1, 8, 11, -1}};
  nr_value y = {0}, ind = {0};
  nr_value *ins[1] = {&x}, *outs[2] = {&y, &ind};
  nr_node node = {.name = "n",
                  .op_type = "MaxPool",
                  .domain = "",
                  .opset = 12,
                  .n_attrs = 2,
                  .attrs = at};
  nr_error err = {0};
  nr_op_ctx ctx = {.node = &node,
                   .n_inputs = 1,
                   .inputs = ins,
                   .n_outputs = 2,
                   .outputs = outs,
                   .err = &err};
  REQUIRE(nr_op_find("", "MaxPool", 12)->infer(&ctx) == NR_OK, "%s", err.message);
  CHECK(y.rank == 4 && y.dims[0] == -1 && y.dims[1] == 8 && y.dims[2] == 5 &&
        y.dims[3] == -1);
  CHECK(ind.dtype == NR_DTYPE_INT64 && ind.rank == 4);
  x.dims[2] = 2; /* smaller than the kernel */
  CHECK(nr_op_find("", "MaxPool", 12)->infer(&ctx) == NR_ERR_SHAPE,
        "tiny input accepted");
}
