/* test_fused_ops.c - the reference kernels of the nnroute domain's fused operators
 * (ir/fused.h) against the unfused ONNX operators they stand for, run one
 * by one through the reference executor, plus their error paths. */
#include "ir/fused.h"
#include "op_test.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>

static double max_diff(const nr_value *a, const nr_value *b) {
  if (nr_value_count(a) != nr_value_count(b))
    return INFINITY;
  double d = 0;
  for (int64_t i = 0; i < nr_value_count(a); i++) {
    double e = fabs(((float *)a->data)[i] - ((float *)b->data)[i]);
    d = e > d ? e : d;
  }
  return d;
}

/* out = a + b (same shape), in place into a. */
static void add_into(nr_value *a, const nr_value *b) {
  for (int64_t i = 0; i < nr_value_count(a); i++)
    ((float *)a->data)[i] += ((float *)b->data)[i];
}

NR_TEST(fused_conv_matches_conv_add_clip) {
  unsigned seed = 3;
  int64_t xd[4] = {1, 3, 7, 7}, wd[4] = {4, 3, 3, 3}, bd[1] = {4}, yd[4] = {1, 4, 4, 4};
  float *x = random_floats(147, &seed), *w = random_floats(108, &seed),
        *b = random_floats(4, &seed), *r = random_floats(64, &seed);
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, xd, x), vw = make_value(NR_DTYPE_FLOAT, 4, wd, w),
           vb = make_value(NR_DTYPE_FLOAT, 1, bd, b), vr = make_value(NR_DTYPE_FLOAT, 4, yd, r);
  int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
  nr_attr attrs[5] = {attr_ints("pads", 4, pads), attr_ints("strides", 2, strides),
                      attr_s("activation", "clip"), attr_f("act_alpha", -0.2f),
                      attr_f("act_beta", 0.3f)};
  nr_value want, got, clipped;
  nr_error err = {0};
  const nr_value *ins[4] = {&vx, &vw, &vb, &vr};
  REQUIRE(!run_one("Conv", 13, 2, attrs, 3, ins, &want, &err), "%s", err.message);
  add_into(&want, &vr);
  float lo = -0.2f, hi = 0.3f;
  nr_value vlo = make_value(NR_DTYPE_FLOAT, 0, NULL, &lo), vhi = make_value(NR_DTYPE_FLOAT, 0, NULL, &hi);
  REQUIRE(!run_one("Clip", 13, 0, NULL, 3, (const nr_value *[]){&want, &vlo, &vhi}, &clipped,
                   &err), "%s", err.message);
  memset(&got, 0, sizeof got);
  REQUIRE(!nr_ref_exec_node("FusedConv", NR_DOMAIN, 1, 5, attrs, 4, ins, 1, &got, &err), "%s",
          err.message);
  CHECK(dims_are(&got, 4, yd), "output shape");
  CHECK(max_diff(&got, &clipped) < 1e-6, "diff %g (seed 3)", max_diff(&got, &clipped));
  nr_value_free(&want);
  nr_value_free(&got);
  nr_value_free(&clipped);
  free(x), free(w), free(b), free(r);
}

NR_TEST(fused_gemm_matches_gemm_relu) {
  unsigned seed = 5;
  int64_t ad[2] = {3, 4}, bd[2] = {5, 4}, cd[1] = {5}, yd[2] = {3, 5};
  float *a = random_floats(12, &seed), *b = random_floats(20, &seed), *c = random_floats(5, &seed),
        *r = random_floats(15, &seed);
  nr_value va = make_value(NR_DTYPE_FLOAT, 2, ad, a), vb = make_value(NR_DTYPE_FLOAT, 2, bd, b),
           vc = make_value(NR_DTYPE_FLOAT, 1, cd, c), vr = make_value(NR_DTYPE_FLOAT, 2, yd, r);
  nr_attr attrs[4] = {attr_i("transB", 1), attr_f("alpha", 1.5f), attr_f("beta", 0.5f),
                      attr_s("activation", "relu")};
  nr_value want, got;
  nr_error err = {0};
  const nr_value *ins[4] = {&va, &vb, &vc, &vr};
  REQUIRE(!run_one("Gemm", 13, 3, attrs, 3, ins, &want, &err), "%s", err.message);
  add_into(&want, &vr);
  for (int i = 0; i < 15; i++)
    ((float *)want.data)[i] = fmaxf(((float *)want.data)[i], 0.0f);
  memset(&got, 0, sizeof got);
  REQUIRE(!nr_ref_exec_node("FusedGemm", NR_DOMAIN, 1, 4, attrs, 4, ins, 1, &got, &err), "%s",
          err.message);
  CHECK(max_diff(&got, &want) < 1e-6, "diff %g (seed 5)", max_diff(&got, &want));
  nr_value_free(&want);
  nr_value_free(&got);
  free(a), free(b), free(c), free(r);
}

NR_TEST(fused_matmul_bias_gelu_batched) {
  unsigned seed = 7;
  int64_t ad[3] = {2, 3, 4}, bd[2] = {4, 5}, cd[1] = {5};
  float *a = random_floats(24, &seed), *b = random_floats(20, &seed), *c = random_floats(5, &seed);
  nr_value va = make_value(NR_DTYPE_FLOAT, 3, ad, a), vb = make_value(NR_DTYPE_FLOAT, 2, bd, b),
           vc = make_value(NR_DTYPE_FLOAT, 1, cd, c);
  nr_attr act = attr_s("activation", "gelu");
  nr_value mm, sum, want, got;
  nr_error err = {0};
  REQUIRE(!run_one("MatMul", 13, 0, NULL, 2, (const nr_value *[]){&va, &vb}, &mm, &err), "%s",
          err.message);
  REQUIRE(!run_one("Add", 13, 0, NULL, 2, (const nr_value *[]){&mm, &vc}, &sum, &err), "%s",
          err.message);
  REQUIRE(!run_one("Gelu", 20, 0, NULL, 1, (const nr_value *[]){&sum}, &want, &err), "%s",
          err.message);
  memset(&got, 0, sizeof got);
  REQUIRE(!nr_ref_exec_node("FusedMatMul", NR_DOMAIN, 1, 1, &act, 3,
                            (const nr_value *[]){&va, &vb, &vc}, 1, &got, &err), "%s",
          err.message);
  CHECK(max_diff(&got, &want) < 1e-6, "diff %g (seed 7)", max_diff(&got, &want));
  nr_value_free(&mm), nr_value_free(&sum), nr_value_free(&want), nr_value_free(&got);
  free(a), free(b), free(c);
}

/* y = clip(x * sigmoid(2 - x * b), -0.4, 0.4) with b broadcast [3, 1]. */
NR_TEST(eltwise_chain_evaluates_steps) {
  int64_t xd[2] = {3, 4}, bd[2] = {3, 1};
  float x[12], b[3] = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 12; i++)
    x[i] = (float)i / 4.0f - 1.5f;
  nr_value vx = make_value(NR_DTYPE_FLOAT, 2, xd, x), vb = make_value(NR_DTYPE_FLOAT, 2, bd, b);
  float two = 2.0f;
  nr_value v2 = make_value(NR_DTYPE_FLOAT, 0, NULL, &two);
  const char *ops[5] = {"Mul", "Sub", "Sigmoid", "Mul", "Clip"};
  int64_t operand[5] = {1, 2, -1, 0, -1}, swapped[5] = {0, 1, 0, 0, 0};
  float params[10] = {0, 0, 0, 0, 0, 0, 0, 0, -0.4f, 0.4f};
  nr_attr attrs[4] = {{.name = "ops", .type = NR_ATTR_STRINGS, .n = 5, .strings = (char **)ops},
                      attr_ints("operand", 5, operand), attr_ints("swapped", 5, swapped),
                      {.name = "params", .type = NR_ATTR_FLOATS, .n = 10, .floats = params}};
  nr_value got = {0};
  nr_error err = {0};
  REQUIRE(!nr_ref_exec_node("EltwiseChain", NR_DOMAIN, 1, 4, attrs, 3,
                            (const nr_value *[]){&vx, &vb, &v2}, 1, &got, &err), "%s",
          err.message);
  CHECK(dims_are(&got, 2, xd), "shape");
  for (int i = 0; i < 12; i++) {
    float xi = x[i], s = 1.0f / (1.0f + expf(-(2.0f - xi * b[i / 4])));
    float want = fminf(fmaxf(xi * s, -0.4f), 0.4f);
    CHECK(fabsf(((float *)got.data)[i] - want) < 1e-6f, "element %d: %g want %g", i,
          ((float *)got.data)[i], want);
  }
  nr_value_free(&got);
}

NR_TEST(fused_ops_reject_bad_attributes) {
  int64_t xd[2] = {2, 2};
  float x[4] = {1, 2, 3, 4};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 2, xd, x);
  nr_value got = {0};
  nr_error err = {0};
  nr_attr bad_act = attr_s("activation", "swishy");
  CHECK(nr_ref_exec_node("FusedMatMul", NR_DOMAIN, 1, 1, &bad_act, 2,
                         (const nr_value *[]){&vx, &vx}, 1, &got, &err) != NR_OK,
        "unknown activation accepted");
  const char *ops[1] = {"Add"};
  int64_t operand[1] = {5}, swapped[1] = {0};
  float params[2] = {0, 0};
  nr_attr attrs[4] = {{.name = "ops", .type = NR_ATTR_STRINGS, .n = 1, .strings = (char **)ops},
                      attr_ints("operand", 1, operand), attr_ints("swapped", 1, swapped),
                      {.name = "params", .type = NR_ATTR_FLOATS, .n = 2, .floats = params}};
  CHECK(nr_ref_exec_node("EltwiseChain", NR_DOMAIN, 1, 4, attrs, 1,
                         (const nr_value *[]){&vx}, 1, &got, &err) != NR_OK,
        "operand out of range accepted");
  CHECK(nr_ref_exec_node("EltwiseChain", NR_DOMAIN, 1, 2, attrs, 1,
                         (const nr_value *[]){&vx}, 1, &got, &err) != NR_OK,
        "missing attributes accepted");
  nr_value_free(&got);
}
