/* test_reduce.c - unit tests of the reference reductions (Reduce*, ArgMax/ArgMin, TopK,
 * CumSum/CumProd): each kernel runs through nr_ref_exec_node() and is compared with
 * naive loops written here, on seeded random data or hand-computed cases; shape
 * inference is checked with unknown axes and bad inputs. */
#include "kernels/ref/executor.h"
#include "rng.h"
#include "unit.h"
#include "op_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SEED 1234u

static nr_value make_f32(int rank, const int64_t *dims, const float *data) {
  nr_value v = {.dtype = NR_DTYPE_FLOAT, .rank = rank};
  memcpy(v.dims, dims, sizeof(int64_t) * (size_t)rank);
  v.data = (void *)data;
  return v;
}

static nr_value make_i64(int rank, const int64_t *dims, const int64_t *data) {
  nr_value v = make_f32(rank, dims, NULL);
  v.dtype = NR_DTYPE_INT64;
  v.data = (void *)data;
  return v;
}

static void fill_random(float *x, int n, nr_rng *r) {
  for (int i = 0; i < n; i++)
    x[i] = (float)nr_rng_int(r, 0, 1999) / 500.0f - 2.0f;
}

/* Naive reduction of a 3x4x5 tensor over axes 0 and 2 (out[j], j < 4). */
static double naive_reduce(const char *op, const float *x, int j) {
  double s = 0, p = 1, mx = -INFINITY, mn = INFINITY, l1 = 0, sq = 0, se = 0;
  for (int a = 0; a < 3; a++) {
    for (int c = 0; c < 5; c++) {
      double v = x[(a * 4 + j) * 5 + c];
      s += v, p *= v, l1 += fabs(v), sq += v * v, se += exp(v);
      mx = v > mx ? v : mx;
      mn = v < mn ? v : mn;
    }
  }
  if (!strcmp(op, "ReduceSum")) return s;
  if (!strcmp(op, "ReduceMean")) return s / 15;
  if (!strcmp(op, "ReduceMax")) return mx;
  if (!strcmp(op, "ReduceMin")) return mn;
  if (!strcmp(op, "ReduceProd")) return p;
  if (!strcmp(op, "ReduceL1")) return l1;
  if (!strcmp(op, "ReduceL2")) return sqrt(sq);
  if (!strcmp(op, "ReduceLogSum")) return log(s);
  if (!strcmp(op, "ReduceLogSumExp")) return log(se);
  return sq; /* ReduceSumSquare */
}

static const char *const reduce_ops[] = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};

/* Every Reduce op, axes as input (opset 18) and as attribute (opset 11), both
 * keepdims settings, against the naive loop. */
NR_TEST(reduce_ops_match_naive) {
  nr_rng rng = nr_rng_make(SEED);
  float x[60];
  fill_random(x, 60, &rng);
  for (int i = 0; i < 60; i++)
    x[i] = fabsf(x[i]) + 0.1f; /* positive, so LogSum is defined */
  int64_t dims[] = {3, 4, 5}, axes[] = {0, -1}, adims[] = {2};
  nr_value xv = make_f32(3, dims, x), av = make_i64(1, adims, axes);
  for (size_t k = 0; k < sizeof reduce_ops / sizeof *reduce_ops; k++) {
    for (int form = 0; form < 4; form++) {
      bool as_input = form & 1, keep = form & 2;
      nr_attr at[2] = {attr_i("keepdims", keep), attr_ints("axes", 2, axes)};
      nr_value out = {0};
      nr_error err = {0};
      nr_status st = nr_ref_exec_node(reduce_ops[k], "", as_input ? 18 : 11,
                                      as_input ? 1 : 2, at, as_input ? 2 : 1,
                                      (const nr_value *[]){&xv, &av}, 1, &out, &err);
      REQUIRE(st == NR_OK, "%s: %s (seed %u)", reduce_ops[k], err.message, SEED);
      CHECK(out.rank == (keep ? 3 : 1) && out.dims[keep ? 1 : 0] == 4, "%s rank %d",
            reduce_ops[k], out.rank);
      for (int j = 0; j < 4; j++) {
        double want = naive_reduce(reduce_ops[k], x, j), got = ((float *)out.data)[j];
        CHECK(fabs(got - want) <= 1e-5 * fabs(want) + 1e-5, "%s[%d] %g vs %g (seed %u)",
              reduce_ops[k], j, got, want, SEED);
      }
      nr_value_free(&out);
    }
  }
}

NR_TEST(reduce_empty_axes_noop_and_all) {
  float x[] = {1, 2, 3, 4, 5, 6};
  int64_t dims[] = {2, 3}, zero[] = {0}, none[1];
  nr_value xv = make_f32(2, dims, x), av = make_i64(1, zero, none); /* empty, not absent */
  for (int noop = 0; noop < 2; noop++) {
    nr_attr at[] = {attr_i("noop_with_empty_axes", noop)};
    nr_value out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node("ReduceSum", "", 13, 1, at, 2,
                                    (const nr_value *[]){&xv, &av}, 1, &out, &err);
    REQUIRE(st == NR_OK, "%s", err.message);
    if (noop) {
      CHECK(out.rank == 2 && out.dims[0] == 2 && out.dims[1] == 3);
      CHECK(((float *)out.data)[4] == 5.0f);
    } else {
      CHECK(out.rank == 2 && out.dims[0] == 1 && out.dims[1] == 1);
      CHECK(((float *)out.data)[0] == 21.0f);
    }
    nr_value_free(&out);
  }
}

NR_TEST(reduce_empty_set_identities) {
  int64_t dims[] = {2, 0, 4}, adims[] = {1}, axes[] = {1};
  float none[1] = {0}; /* never read: the tensor is empty */
  nr_value xv = make_f32(3, dims, none), av = make_i64(1, adims, axes);
  const char *ops[] = {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceLogSumExp"};
  const double want[] = {-INFINITY, INFINITY, 1, 0, -INFINITY};
  for (int k = 0; k < 5; k++) {
    nr_value out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node(ops[k], "", 20, 0, NULL, 2,
                                    (const nr_value *[]){&xv, &av}, 1, &out, &err);
    REQUIRE(st == NR_OK, "%s: %s", ops[k], err.message);
    REQUIRE(out.rank == 3 && out.dims[1] == 1 && out.dims[2] == 4);
    for (int i = 0; i < 8; i++)
      CHECK(((float *)out.data)[i] == (float)want[k], "%s[%d]", ops[k], i);
    nr_value_free(&out);
  }
}

NR_TEST(reduce_int64_is_exact) {
  int64_t x[] = {(int64_t)1 << 60, 1, -3, 7}, dims[] = {2, 2};
  int64_t axes[] = {1};
  nr_value xv = make_i64(2, dims, x);
  nr_attr at[] = {attr_ints("axes", 1, axes), attr_i("keepdims", 0)};
  nr_value out = {0};
  nr_error err = {0};
  nr_status st = nr_ref_exec_node("ReduceSum", "", 11, 2, at, 1,
                                  (const nr_value *[]){&xv}, 1, &out, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  CHECK(((int64_t *)out.data)[0] == ((int64_t)1 << 60) + 1);
  CHECK(((int64_t *)out.data)[1] == 4);
  nr_value_free(&out);
}

NR_TEST(argmax_argmin_ties_and_last_index) {
  float x[] = {1, 3, 3, 0, 2, 0}; /* rows {1,3,3} and {0,2,0} */
  int64_t dims[] = {2, 3};
  nr_value xv = make_f32(2, dims, x);
  struct { const char *op; int last; int64_t want[2]; } cases[] = {
      {"ArgMax", 0, {1, 1}}, {"ArgMax", 1, {2, 1}},
      {"ArgMin", 0, {0, 0}}, {"ArgMin", 1, {0, 2}}};
  for (int c = 0; c < 4; c++) {
    nr_attr at[] = {attr_i("axis", -1), attr_i("keepdims", 0),
                    attr_i("select_last_index", cases[c].last)};
    nr_value out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node(cases[c].op, "", 13, 3, at, 1,
                                    (const nr_value *[]){&xv}, 1, &out, &err);
    REQUIRE(st == NR_OK, "%s", err.message);
    REQUIRE(out.dtype == NR_DTYPE_INT64 && out.rank == 1 && out.dims[0] == 2);
    for (int i = 0; i < 2; i++)
      CHECK(((int64_t *)out.data)[i] == cases[c].want[i], "%s last=%d [%d]", cases[c].op,
            cases[c].last, i);
    nr_value_free(&out);
  }
}

NR_TEST(topk_sorted_with_ties) {
  float x[] = {5, 1, 5, 3, 1, 0, 9, 0}; /* 2 rows of 4 */
  int64_t dims[] = {2, 4}, kd[] = {1}, k[] = {3};
  nr_value xv = make_f32(2, dims, x), kv = make_i64(1, kd, k);
  for (int largest = 0; largest < 2; largest++) {
    nr_attr at[] = {attr_i("axis", 1), attr_i("largest", largest)};
    nr_value out[2] = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node("TopK", "", 11, 2, at, 2,
                                    (const nr_value *[]){&xv, &kv}, 2, out, &err);
    REQUIRE(st == NR_OK, "%s", err.message);
    REQUIRE(out[0].dims[1] == 3 && out[1].dims[1] == 3);
    const int64_t want_l[] = {0, 2, 3, 2, 0, 1}, want_s[] = {1, 3, 0, 1, 3, 0};
    const int64_t *want = largest ? want_l : want_s;
    for (int i = 0; i < 6; i++) {
      int64_t idx = ((int64_t *)out[1].data)[i];
      CHECK(idx == want[i], "largest=%d [%d]: %lld", largest, i, (long long)idx);
      CHECK(((float *)out[0].data)[i] == x[(i / 3) * 4 + want[i]]);
    }
    nr_value_free(&out[0]);
    nr_value_free(&out[1]);
  }
}

NR_TEST(cumsum_cumprod_modes) {
  float x[] = {1, 2, 3, 4};
  int64_t dims[] = {4}, ax[] = {0};
  nr_value xv = make_f32(1, dims, x), av = make_i64(0, dims, ax);
  struct { const char *op; int excl, rev; float want[4]; } cases[] = {
      {"CumSum", 0, 0, {1, 3, 6, 10}}, {"CumSum", 1, 0, {0, 1, 3, 6}},
      {"CumSum", 0, 1, {10, 9, 7, 4}}, {"CumSum", 1, 1, {9, 7, 4, 0}},
      {"CumProd", 0, 0, {1, 2, 6, 24}}, {"CumProd", 1, 1, {24, 12, 4, 1}}};
  for (int c = 0; c < 6; c++) {
    nr_attr at[] = {attr_i("exclusive", cases[c].excl), attr_i("reverse", cases[c].rev)};
    nr_value out = {0};
    nr_error err = {0};
    nr_status st = nr_ref_exec_node(cases[c].op, "", 26, 2, at, 2,
                                    (const nr_value *[]){&xv, &av}, 1, &out, &err);
    REQUIRE(st == NR_OK, "%s", err.message);
    for (int i = 0; i < 4; i++)
      CHECK(((float *)out.data)[i] == cases[c].want[i], "case %d [%d]", c, i);
    nr_value_free(&out);
  }
}

/* Shape inference straight through the op row, with a hand-built node. */
static nr_status infer_one(const char *op, int opset, int n_attrs, nr_attr *attrs,
                           int n_in, nr_value **ins, nr_value *out, nr_error *err) {
  nr_node node = {.name = "n", .op_type = (char *)op, .domain = "", .opset = opset,
                  .n_attrs = n_attrs, .attrs = attrs};
  nr_op_ctx ctx = {.node = &node, .n_inputs = n_in, .inputs = ins, .n_outputs = 1,
                   .outputs = (nr_value *[]){out}, .err = err};
  const nr_op_def *def = nr_op_find("", op, opset);
  return def ? def->infer(&ctx) : NR_ERR_UNSUPPORTED;
}

NR_TEST(reduce_infer_unknown_axes_and_errors) {
  int64_t dims[] = {2, 3, 4}, adims[] = {1};
  nr_value x = make_f32(3, dims, NULL), axes = make_i64(1, adims, NULL), out = {0};
  nr_error err = {0};
  nr_attr keep0[] = {attr_i("keepdims", 0)};
  REQUIRE(infer_one("ReduceMean", 18, 0, NULL, 2, (nr_value *[]){&x, &axes}, &out, &err) ==
          NR_OK, "%s", err.message);
  CHECK(out.rank == 3 && out.dims[0] == NR_DIM_UNKNOWN);
  REQUIRE(infer_one("ReduceMean", 18, 1, keep0, 2, (nr_value *[]){&x, &axes}, &out,
                    &err) == NR_OK);
  CHECK(out.rank == -1);
  int64_t bad[] = {3};
  nr_attr ab[] = {attr_ints("axes", 1, bad)};
  CHECK(infer_one("ReduceMax", 13, 1, ab, 1, (nr_value *[]){&x}, &out, &err) ==
        NR_ERR_SHAPE);
  CHECK(strstr(err.message, "axis") != NULL, "%s", err.message);
  nr_attr ak[] = {attr_i("axis", 1)};
  int64_t kd[] = {1}, k[] = {9};
  nr_value kv = make_i64(1, kd, k);
  CHECK(infer_one("TopK", 11, 1, ak, 2, (nr_value *[]){&x, &kv}, &out, &err) ==
        NR_ERR_SHAPE);
}
