/* test_linalg.c - unit tests of the shared GEMM (ref_gemm) and the reference Gemm,
 * MatMul, MatMulInteger, QLinearMatMul and Einsum. The GEMM is checked directly on
 * sizes straddling its blocks (depth 128, width 512, four-row groups) with guard
 * values around C; the operators run through nr_ref_exec_node() against naive loops
 * written here, on seeded random data, plus hand-computed rounding cases. */
#include "kernels/ref/executor.h"
#include "kernels/ref/ref_gemm.h"
#include "kernels/ref/ref_util.h"
#include "rng.h"
#include "unit.h"
#include "op_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED 99001u

static bool close_to(double got, double want, double tol) {
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* ---- ref_gemm ------------------------------------------------------------------- */

static void check_sgemm(nr_test_state *t, bool ta, bool tb, int64_t m, int64_t n,
                        int64_t k, float alpha, float beta, unsigned seed) {
  unsigned s0 = seed;
  int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
  float *a = random_floats((ta ? k : m) * lda, &seed),
        *b = random_floats((tb ? n : k) * ldb, &seed);
  float *c = random_floats(m * ldc, &seed),
        *c0 = malloc(sizeof(float) * (size_t)(m * ldc));
  memcpy(c0, c, sizeof(float) * (size_t)(m * ldc));
  REQUIRE(nr_ref_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == NR_OK);
  int bad = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      double want = c0[i * ldc + j]; /* guard columns stay untouched */
      if (j < n) {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
                 (tb ? b[j * ldb + p] : b[p * ldb + j]);
        want = alpha * acc + beta * want;
      }
      if (!close_to(c[i * ldc + j], want, 1e-4) && bad++ < 3)
        CHECK(false, "seed %u ta=%d tb=%d %lldx%lldx%lld: c[%lld,%lld] = %g, want %g", s0,
              ta, tb, (long long)m, (long long)n, (long long)k, (long long)i,
              (long long)j, c[i * ldc + j], want);
    }
  free(a), free(b), free(c), free(c0);
}

NR_TEST(gemm_kernel_block_edges) {
  const int64_t sizes[][3] = {{1, 1, 1},    {3, 511, 127}, {4, 512, 128}, {5, 513, 129},
                              {9, 17, 257}, {8, 1030, 3},  {2, 3, 300}};
  unsigned seed = SEED;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (int tr = 0; tr < 4; tr++)
      check_sgemm(t, tr & 1, tr & 2, sizes[i][0], sizes[i][1], sizes[i][2],
                  tr == 0 ? 1.0f : 0.75f, tr == 3 ? 0.0f : 0.5f, seed++);
}

NR_TEST(dgemm_and_beta_zero_ignores_garbage) {
  double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1},
         c[4] = {NAN, NAN, NAN, NAN};
  /* [2x3] x [3x2] */
  REQUIRE(nr_ref_dgemm(false, false, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2) == NR_OK);
  const double want[4] = {4, 5, 10, 11};
  for (int i = 0; i < 4; i++)
    CHECK(c[i] == want[i], "c[%d] = %g, want %g", i, c[i], want[i]);
}

/* ---- MatMul --------------------------------------------------------------------- */

/* numpy matmul on explicit shapes: a [.., m, k], b [.., k, n] with batch broadcast
 * (1-D operands given here already promoted; batch ranks padded to 2). */
static void naive_matmul(const int64_t *ab, const int64_t *bb, const int64_t *yb,
                         int64_t m, int64_t k, int64_t n, const float *a, const float *b,
                         double *y) {
  for (int64_t i0 = 0; i0 < yb[0]; i0++)
    for (int64_t i1 = 0; i1 < yb[1]; i1++) {
      int64_t ao = ((ab[0] > 1 ? i0 : 0) * ab[1] + (ab[1] > 1 ? i1 : 0)) * m * k;
      int64_t bo = ((bb[0] > 1 ? i0 : 0) * bb[1] + (bb[1] > 1 ? i1 : 0)) * k * n;
      double *yy = y + (i0 * yb[1] + i1) * m * n;
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          double acc = 0;
          for (int64_t p = 0; p < k; p++)
            acc += (double)a[ao + i * k + p] * b[bo + p * n + j];
          yy[i * n + j] = acc;
        }
    }
}

typedef struct mm_case {
  int ra, rb;
  int64_t da[4], db[4];
  int64_t ab[2], bb[2], yb[2], m, k, n; /* for the naive loop */
} mm_case;

NR_TEST(matmul_broadcasting_matches_naive) {
  mm_case cases[] = {
      {1, 1, {7}, {7}, {1, 1}, {1, 1}, {1, 1}, 1, 7, 1},
      {2, 1, {3, 7}, {7}, {1, 1}, {1, 1}, {1, 1}, 3, 7, 1},
      {1, 3, {4}, {2, 4, 5}, {1, 1}, {1, 2}, {1, 2}, 1, 4, 5},
      {4, 3, {2, 1, 3, 4}, {5, 4, 6}, {2, 1}, {1, 5}, {2, 5}, 3, 4, 6},
      {2, 3, {5, 130}, {2, 130, 3}, {1, 1}, {1, 2}, {1, 2}, 5, 130, 3},
      {3, 2, {3, 6, 9}, {9, 520}, {1, 3}, {1, 1}, {1, 3}, 6, 9, 520},
  };
  unsigned seed = SEED;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    mm_case *mc = &cases[c];
    int64_t na = mc->ab[0] * mc->ab[1] * mc->m * mc->k,
            nb = mc->bb[0] * mc->bb[1] * mc->k * mc->n;
    int64_t ny = mc->yb[0] * mc->yb[1] * mc->m * mc->n;
    float *a = random_floats(na, &seed), *b = random_floats(nb, &seed);
    double *want = malloc(sizeof(double) * (size_t)ny);
    naive_matmul(mc->ab, mc->bb, mc->yb, mc->m, mc->k, mc->n, a, b, want);
    nr_value av = make_value(NR_DTYPE_FLOAT, mc->ra, mc->da, a);
    nr_value bv = make_value(NR_DTYPE_FLOAT, mc->rb, mc->db, b), out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node("MatMul", "", 13, 0, NULL, 2,
                                    (const nr_value *[]){&av, &bv}, 1, &out, &err);
    CHECK(st == NR_OK, "case %zu: %s", c, err.message);
    CHECK(st || nr_value_count(&out) == ny, "case %zu: %lld elements", c,
          (long long)nr_value_count(&out));
    for (int64_t i = 0; !st && i < ny; i++)
      CHECK(close_to(((float *)out.data)[i], want[i], 1e-5), "case %zu: y[%lld]", c,
            (long long)i);
    nr_value_free(&out);
    free(a), free(b), free(want);
  }
}

NR_TEST(matmul_int32_and_output_ranks) {
  int32_t a[6] = {1, -2, 3, 4, 5, -6}, b[3] = {7, 8, -9};
  int64_t ad[2] = {2, 3}, bd[1] = {3};
  nr_value av = make_value(NR_DTYPE_INT32, 2, ad, a),
           bv = make_value(NR_DTYPE_INT32, 1, bd, b);
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("MatMul", "", 13, 0, NULL, 2, (const nr_value *[]){&av, &bv},
                           1, &out, &err) == NR_OK,
          "%s", err.message);
  CHECK(out.dtype == NR_DTYPE_INT32 && out.rank == 1 && out.dims[0] == 2);
  CHECK(((int32_t *)out.data)[0] == 7 - 16 - 27 &&
        ((int32_t *)out.data)[1] == 28 + 40 + 54);
  nr_value_free(&out);
  int64_t bad[2] = {2, 3};
  bv = make_value(NR_DTYPE_INT32, 2, bad, a);
  CHECK(nr_ref_exec_node("MatMul", "", 13, 0, NULL, 2, (const nr_value *[]){&av, &bv}, 1,
                         &out, &err) == NR_ERR_SHAPE,
        "inner dim mismatch accepted");
  nr_value_free(&out);
}

/* ---- Gemm ----------------------------------------------------------------------- */

NR_TEST(gemm_attributes_and_bias_broadcast) {
  enum { M = 5, K = 7, N = 6 };
  unsigned seed = SEED + 1;
  float *a = random_floats(M * K, &seed), *b = random_floats(K * N, &seed);
  float *c = random_floats(M * N, &seed);
  const int c_rank[] = {-1, 0, 1, 2, 2};
  const int64_t c_dims[][2] = {{0, 0}, {0, 0}, {N, 0}, {M, 1}, {M, N}};
  for (int tr = 0; tr < 4; tr++)
    for (int ci = 0; ci < 5; ci++) {
      bool ta = tr & 1, tb = tr & 2;
      int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N};
      nr_value av = make_value(NR_DTYPE_FLOAT, 2, ad, a),
               bv = make_value(NR_DTYPE_FLOAT, 2, bd, b);
      nr_value cv =
          make_value(NR_DTYPE_FLOAT, c_rank[ci] < 0 ? 0 : c_rank[ci], c_dims[ci], c);
      nr_attr at[] = {attr_i("transA", ta), attr_i("transB", tb), attr_f("alpha", 0.5f),
                      attr_f("beta", -2.0f)};
      nr_value out = {0};
      nr_error err = {0};
      nr_status st = nr_ref_exec_node("Gemm", "", 13, 4, at, c_rank[ci] < 0 ? 2 : 3,
                                      (const nr_value *[]){&av, &bv, &cv}, 1, &out, &err);
      REQUIRE(st == NR_OK, "%s", err.message);
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          double acc = 0, cval = 0;
          for (int p = 0; p < K; p++)
            acc += (double)(ta ? a[p * M + i] : a[i * K + p]) *
                   (tb ? b[j * K + p] : b[p * N + j]);
          if (ci == 1)
            cval = c[0];
          if (ci == 2)
            cval = c[j];
          if (ci == 3)
            cval = c[i];
          if (ci == 4)
            cval = c[i * N + j];
          double want = 0.5 * acc - 2.0 * cval;
          CHECK(close_to(((float *)out.data)[i * N + j], want, 1e-5),
                "tr %d C %d: y[%d,%d]", tr, ci, i, j);
        }
      nr_value_free(&out);
    }
  free(a), free(b), free(c);
}

NR_TEST(gemm_int64_and_bad_bias) {
  int64_t a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[2] = {100, 200}, d2[2] = {2, 2},
          d1[1] = {2};
  nr_value av = make_value(NR_DTYPE_INT64, 2, d2, a),
           bv = make_value(NR_DTYPE_INT64, 2, d2, b);
  nr_value cv = make_value(NR_DTYPE_INT64, 1, d1, c), out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("Gemm", "", 13, 0, NULL, 3,
                           (const nr_value *[]){&av, &bv, &cv}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  const int64_t want[4] = {19 + 100, 22 + 200, 43 + 100, 50 + 200};
  for (int i = 0; i < 4; i++)
    CHECK(((int64_t *)out.data)[i] == want[i], "y[%d] = %lld", i,
          (long long)((int64_t *)out.data)[i]);
  nr_value_free(&out);
  int64_t d3[1] = {3};
  int64_t c3[3] = {0};
  cv = make_value(NR_DTYPE_INT64, 1, d3, c3);
  CHECK(nr_ref_exec_node("Gemm", "", 13, 0, NULL, 3, (const nr_value *[]){&av, &bv, &cv},
                         1, &out, &err) == NR_ERR_SHAPE,
        "C [3] accepted for [2, 2]");
  nr_value_free(&out);
}

/* ---- MatMulInteger and QLinearMatMul -------------------------------------------- */

NR_TEST(matmul_integer_per_row_and_column_zero_points) {
  enum { M = 3, K = 4, N = 2 };
  nr_rng rng = nr_rng_make(SEED + 2);
  uint8_t a[M * K], azp[M] = {1, 128, 255};
  int8_t b[K * N], bzp[N] = {-3, 4};
  for (int i = 0; i < M * K; i++)
    a[i] = (uint8_t)nr_rng_u32(&rng);
  for (int i = 0; i < K * N; i++)
    b[i] = (int8_t)nr_rng_u32(&rng);
  int64_t ad[2] = {M, K}, bd[2] = {K, N}, md[1] = {M}, nd[1] = {N};
  nr_value in[4] = {
      make_value(NR_DTYPE_UINT8, 2, ad, a), make_value(NR_DTYPE_INT8, 2, bd, b),
      make_value(NR_DTYPE_UINT8, 1, md, azp), make_value(NR_DTYPE_INT8, 1, nd, bzp)};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("MatMulInteger", "", 10, 0, NULL, 4,
                           (const nr_value *[]){&in[0], &in[1], &in[2], &in[3]}, 1, &out,
                           &err) == NR_OK,
          "%s", err.message);
  CHECK(out.dtype == NR_DTYPE_INT32);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      int32_t acc = 0;
      for (int p = 0; p < K; p++)
        acc += (a[i * K + p] - azp[i]) * (b[p * N + j] - bzp[j]);
      CHECK(((int32_t *)out.data)[i * N + j] == acc, "y[%d,%d] = %d, want %d", i, j,
            ((int32_t *)out.data)[i * N + j], acc);
    }
  nr_value_free(&out);
}

/* acc * 0.5 + 200 lands on .5 twice (202.5 -> 202, 203.5 -> 204) and saturates. */
NR_TEST(qlinear_matmul_rounds_half_to_even) {
  uint8_t a[3] = {5, 7, 200}, b[1] = {1}, zero = 0, yzp = 200;
  float as = 0.5f, bs = 1.0f, ys = 1.0f;
  int64_t ad[2] = {3, 1}, bd[2] = {1, 1}, sd[1] = {0};
  nr_value in[8] = {
      make_value(NR_DTYPE_UINT8, 2, ad, a),     make_value(NR_DTYPE_FLOAT, 0, sd, &as),
      make_value(NR_DTYPE_UINT8, 0, sd, &zero), make_value(NR_DTYPE_UINT8, 2, bd, b),
      make_value(NR_DTYPE_FLOAT, 0, sd, &bs),   make_value(NR_DTYPE_UINT8, 0, sd, &zero),
      make_value(NR_DTYPE_FLOAT, 0, sd, &ys),   make_value(NR_DTYPE_UINT8, 0, sd, &yzp)};
  const nr_value *ins[8];
  for (int i = 0; i < 8; i++)
    ins[i] = &in[i];
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("QLinearMatMul", "", 10, 0, NULL, 8, ins, 1, &out, &err) ==
              NR_OK,
          "%s", err.message);
  const uint8_t want[3] = {202, 204, 255};
  for (int i = 0; i < 3; i++)
    CHECK(((uint8_t *)out.data)[i] == want[i], "y[%d] = %d, want %d", i,
          ((uint8_t *)out.data)[i], want[i]);
  nr_value_free(&out);
}

NR_TEST(qlinear_matmul_int8_matches_naive) {
  enum { B = 2, M = 3, K = 5, N = 4 };
  nr_rng rng = nr_rng_make(SEED + 3);
  int8_t a[B * M * K], b[B * K * N], azp = -5, bzp = 3, yzp = -10;
  for (int i = 0; i < B * M * K; i++)
    a[i] = (int8_t)nr_rng_u32(&rng);
  for (int i = 0; i < B * K * N; i++)
    b[i] = (int8_t)nr_rng_u32(&rng);
  float as = 0.03f, bs = 0.02f, ys = 0.05f;
  int64_t ad[3] = {B, M, K}, bd[3] = {B, K, N}, sd[1] = {0};
  nr_value in[8] = {
      make_value(NR_DTYPE_INT8, 3, ad, a),    make_value(NR_DTYPE_FLOAT, 0, sd, &as),
      make_value(NR_DTYPE_INT8, 0, sd, &azp), make_value(NR_DTYPE_INT8, 3, bd, b),
      make_value(NR_DTYPE_FLOAT, 0, sd, &bs), make_value(NR_DTYPE_INT8, 0, sd, &bzp),
      make_value(NR_DTYPE_FLOAT, 0, sd, &ys), make_value(NR_DTYPE_INT8, 0, sd, &yzp)};
  const nr_value *ins[8];
  for (int i = 0; i < 8; i++)
    ins[i] = &in[i];
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("QLinearMatMul", "", 10, 0, NULL, 8, ins, 1, &out, &err) ==
              NR_OK,
          "%s", err.message);
  for (int bb = 0; bb < B; bb++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        int acc = 0;
        for (int p = 0; p < K; p++)
          acc += (a[(bb * M + i) * K + p] - azp) * (b[(bb * K + p) * N + j] - bzp);
        double v = nearbyint(acc * (double)(as * bs / ys) + yzp);
        int want = v < -128 ? -128 : v > 127 ? 127 : (int)v;
        int got = ((int8_t *)out.data)[(bb * M + i) * N + j];
        CHECK(got == want, "y[%d,%d,%d] = %d, want %d", bb, i, j, got, want);
      }
  nr_value_free(&out);
}

/* ---- Einsum --------------------------------------------------------------------- */

/* Runs Einsum on float inputs and compares with want (n values, dims checked). */
static void check_einsum(nr_test_state *t, const char *eq, int n_in,
                         const nr_value *const *ins, int rank, const int64_t *dims,
                         const double *want) {
  nr_attr at[] = {attr_s("equation", eq)};
  nr_value out = {0};
  nr_error err = {0};
  nr_status st = nr_ref_exec_node("Einsum", "", 12, 1, at, n_in, ins, 1, &out, &err);
  CHECK(st == NR_OK, "'%s': %s", eq, err.message);
  if (st == NR_OK) {
    CHECK(out.rank == rank, "'%s': rank %d, want %d", eq, out.rank, rank);
    for (int d = 0; d < rank && out.rank == rank; d++)
      CHECK(out.dims[d] == dims[d], "'%s': dim %d = %lld", eq, d, (long long)out.dims[d]);
    for (int64_t i = 0; out.rank == rank && i < nr_value_count(&out); i++)
      CHECK(close_to(nr_load_f64(out.dtype, out.data, i), want[i], 1e-5),
            "'%s': y[%lld] = %g, want %g", eq, (long long)i,
            nr_load_f64(out.dtype, out.data, i), want[i]);
  }
  nr_value_free(&out);
}

NR_TEST(einsum_common_forms) {
  unsigned seed = SEED + 4;
  float *a = random_floats(2 * 3 * 4, &seed), *b = random_floats(2 * 4 * 5, &seed);
  int64_t ad[3] = {2, 3, 4}, bd[3] = {2, 4, 5};
  nr_value av = make_value(NR_DTYPE_FLOAT, 3, ad, a),
           bv = make_value(NR_DTYPE_FLOAT, 3, bd, b);
  double want[2 * 3 * 5];
  /* batched matmul, explicit and through the ellipsis */
  for (int bb = 0; bb < 2; bb++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 5; j++) {
        double acc = 0;
        for (int p = 0; p < 4; p++)
          acc += (double)a[(bb * 3 + i) * 4 + p] * b[(bb * 4 + p) * 5 + j];
        want[(bb * 3 + i) * 5 + j] = acc;
      }
  const nr_value *ab[] = {&av, &bv};
  check_einsum(t, "bij,bjk->bik", 2, ab, 3, (int64_t[]){2, 3, 5}, want);
  check_einsum(t, "...ij,...jk", 2, ab, 3, (int64_t[]){2, 3, 5}, want);
  /* transpose (implicit output sorts the labels: "kji" -> "ijk") */
  double tr[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        tr[(k * 3 + j) * 2 + i] = a[(i * 3 + j) * 4 + k];
  check_einsum(t, "ijk->kji", 1, ab, 3, (int64_t[]){4, 3, 2}, tr);
  check_einsum(t, "kji", 1, ab, 3, (int64_t[]){4, 3, 2}, tr);
  /* reduction over two labels, and a full sum */
  double red[3] = {0}, total = 0;
  for (int i = 0; i < 24; i++)
    red[i / 4 % 3] += a[i], total += a[i];
  check_einsum(t, "bjk->j", 1, ab, 1, (int64_t[]){3}, red);
  check_einsum(t, "bjk->", 1, ab, 0, NULL, &total);
  free(a), free(b);
}

NR_TEST(einsum_trace_diagonal_outer_int) {
  float m[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, u[2] = {2, 3}, v[3] = {1, 10, 100};
  int64_t md[2] = {3, 3}, ud[1] = {2}, vd[1] = {3};
  nr_value mv = make_value(NR_DTYPE_FLOAT, 2, md, m),
           uv = make_value(NR_DTYPE_FLOAT, 1, ud, u);
  nr_value vv = make_value(NR_DTYPE_FLOAT, 1, vd, v);
  check_einsum(t, "ii", 1, (const nr_value *[]){&mv}, 0, NULL, (const double[]){15});
  check_einsum(t, "ii->i", 1, (const nr_value *[]){&mv}, 1, (int64_t[]){3},
               (const double[]){1, 5, 9});
  check_einsum(t, "i,j", 2, (const nr_value *[]){&uv, &vv}, 2, (int64_t[]){2, 3},
               (const double[]){2, 20, 200, 3, 30, 300});
  check_einsum(t, "i,i->", 2, (const nr_value *[]){&vv, &vv}, 0, NULL,
               (const double[]){10101});
  int32_t mi[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  nr_value miv = make_value(NR_DTYPE_INT32, 2, md, mi);
  check_einsum(t, "ij->j", 1, (const nr_value *[]){&miv}, 1, (int64_t[]){3},
               (const double[]){12, 15, 18});
  nr_attr at[] = {attr_s("equation", "ij,jk->ik")};
  nr_value out = {0};
  nr_error err = {0};
  CHECK(nr_ref_exec_node("Einsum", "", 12, 1, at, 2, (const nr_value *[]){&mv, &uv}, 1,
                         &out, &err) == NR_ERR_SHAPE,
        "rank mismatch accepted");
  nr_value_free(&out);
}

/* infer() without data keeps unknown dims (as nr_graph_infer calls it). */
NR_TEST(matmul_gemm_static_infer) {
  nr_value a = {.dtype = NR_DTYPE_FLOAT, .rank = 3, .dims = {-1, 4, 5}};
  nr_value b = {.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {5, -1}}, out = {0};
  nr_value *ins[2] = {&a, &b}, *outs[1] = {&out};
  nr_node node = {.name = "n", .op_type = "MatMul", .domain = "", .opset = 13};
  nr_error err = {0};
  nr_op_ctx ctx = {.node = &node,
                   .n_inputs = 2,
                   .inputs = ins,
                   .n_outputs = 1,
                   .outputs = outs,
                   .err = &err};
  REQUIRE(nr_op_find("", "MatMul", 13)->infer(&ctx) == NR_OK, "%s", err.message);
  CHECK(out.rank == 3 && out.dims[0] == -1 && out.dims[1] == 4 && out.dims[2] == -1);
  a.rank = 2, a.dims[0] = -1, a.dims[1] = 7; /* Gemm: [?, 7] x [5, ?] cannot fit */
  node.op_type = "Gemm";
  CHECK(nr_op_find("", "Gemm", 13)->infer(&ctx) == NR_ERR_SHAPE, "K mismatch accepted");
  a.dims[1] = 5;
  REQUIRE(nr_op_find("", "Gemm", 13)->infer(&ctx) == NR_OK, "%s", err.message);
  CHECK(out.rank == 2 && out.dims[0] == -1 && out.dims[1] == -1);
}

/* Empty operands may come without data; a zero depth gives zeros (plus beta * C). */
NR_TEST(matmul_gemm_empty_depth) {
  int64_t ad[2] = {2, 0}, bd[2] = {0, 3}, cd[1] = {3};
  float c[3] = {1, 2, 3};
  nr_value a = make_value(NR_DTYPE_FLOAT, 2, ad, NULL),
           b = make_value(NR_DTYPE_FLOAT, 2, bd, NULL);
  nr_value cv = make_value(NR_DTYPE_FLOAT, 1, cd, c), out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("MatMul", "", 13, 0, NULL, 2, (const nr_value *[]){&a, &b}, 1,
                           &out, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(nr_value_count(&out) == 6);
  for (int i = 0; i < 6; i++)
    CHECK(((float *)out.data)[i] == 0, "y[%d] = %g", i, ((float *)out.data)[i]);
  nr_value_free(&out);
  nr_attr at[] = {attr_f("beta", 2.0f)};
  REQUIRE(nr_ref_exec_node("Gemm", "", 13, 1, at, 3, (const nr_value *[]){&a, &b, &cv}, 1,
                           &out, &err) == NR_OK,
          "%s", err.message);
  for (int i = 0; i < 6; i++)
    CHECK(((float *)out.data)[i] == 2 * c[i % 3], "y[%d] = %g", i,
          ((float *)out.data)[i]);
  nr_value_free(&out);
  nr_attr eq[] = {attr_s("equation", "ij,jk->ik")};
  REQUIRE(nr_ref_exec_node("Einsum", "", 12, 1, eq, 2, (const nr_value *[]){&a, &b}, 1,
                           &out, &err) == NR_OK,
          "%s", err.message);
  CHECK(nr_value_count(&out) == 6 && ((float *)out.data)[5] == 0);
  nr_value_free(&out);
}
