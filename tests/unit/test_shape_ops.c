/* test_shape_ops.c - unit tests of the shape family (ops_shape.c, ops_layout.c)
 * through nr_ref_exec_node(): hand-computed small cases for every operator and its
 * attribute forms across opsets, 0-sized tensors, and static inference directly
 * through the op rows (unknown dims stay unknown, constant inputs give exact shapes,
 * Shape and Size fill their data), plus the failure paths. */
#include "unit.h"
#include "op_test.h"

#include "ir/op.h"
#include "kernels/ref/executor.h"

#include <string.h>

/* ---- helpers -------------------------------------------------------------------- */

/* Static shape inference straight through the op row; inputs keep their data. */
static nr_status infer(const char *op, int opset, int n_attrs, nr_attr *attrs, int n_in,
                       nr_value **ins, int n_out, nr_value *outs, nr_error *err) {
  nr_node node = {.name = "n",
                  .op_type = (char *)op,
                  .domain = "",
                  .opset = opset,
                  .n_attrs = n_attrs,
                  .attrs = attrs};
  nr_value *out_ptrs[8];
  for (int i = 0; i < n_out; i++) {
    memset(&outs[i], 0, sizeof outs[i]);
    out_ptrs[i] = &outs[i];
  }
  nr_op_ctx ctx = {.node = &node,
                   .n_inputs = n_in,
                   .inputs = ins,
                   .n_outputs = n_out,
                   .outputs = out_ptrs,
                   .err = err};
  const nr_op_def *def = nr_op_find("", op, opset);
  return def ? def->infer(&ctx) : NR_ERR_UNSUPPORTED;
}

static const float seq12[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

/* ---- Reshape, Flatten, Squeeze, Unsqueeze ----------------------------------------- */

NR_TEST(shape_reshape_zero_and_minus_one) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 3, 2}, seq12), y;
  nr_error err = {0};
  int64_t s1[] = {0, -1};
  nr_value shape = i64v(2, s1);
  REQUIRE(run_one("Reshape", 14, 0, NULL, 2, (const nr_value *[]){&x, &shape}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 2, (int64_t[]){2, 6}) && f32_are(&y, 12, seq12));
  nr_value_free(&y);
  /* allowzero=1 keeps a literal 0: 12 elements cannot become [0, 12]. */
  int64_t s2[] = {0, 12};
  nr_attr az = attr_i("allowzero", 1);
  shape = i64v(2, s2);
  CHECK(run_one("Reshape", 14, 1, &az, 2, (const nr_value *[]){&x, &shape}, &y, &err) ==
        NR_ERR_SHAPE);
  int64_t s3[] = {5, -1};
  shape = i64v(2, s3);
  CHECK(run_one("Reshape", 14, 0, NULL, 2, (const nr_value *[]){&x, &shape}, &y, &err) ==
        NR_ERR_SHAPE);
  /* opset 1 attribute form */
  nr_attr sa = attr_ints("shape", 1, (int64_t[]){12});
  REQUIRE(run_one("Reshape", 1, 1, &sa, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK, "%s",
          err.message);
  CHECK(dims_are(&y, 1, (int64_t[]){12}));
  nr_value_free(&y);
  /* 0-sized: [0, 3] -> [-1, 3, 1] */
  nr_value e = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){0, 3}, seq12);
  int64_t s4[] = {-1, 3, 1};
  shape = i64v(3, s4);
  REQUIRE(run_one("Reshape", 14, 0, NULL, 2, (const nr_value *[]){&e, &shape}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 3, (int64_t[]){0, 3, 1}));
  nr_value_free(&y);
}

NR_TEST(shape_reshape_static_infer) {
  nr_value x = {.dtype = NR_DTYPE_FLOAT, .rank = 3, .dims = {NR_DIM_UNKNOWN, 3, 4}};
  int64_t s[] = {0, -1};
  nr_value shape = i64v(2, s), out;
  nr_error err = {0};
  REQUIRE(infer("Reshape", 14, 0, NULL, 2, (nr_value *[]){&x, &shape}, 1, &out, &err) ==
              NR_OK,
          "%s", err.message);
  /* 0 copies the unknown batch dim; -1 cannot be known without it */
  CHECK(dims_are(&out, 2, (int64_t[]){NR_DIM_UNKNOWN, NR_DIM_UNKNOWN}));
  int64_t s2[] = {-1, 12};
  shape = i64v(2, s2);
  REQUIRE(infer("Reshape", 14, 0, NULL, 2, (nr_value *[]){&x, &shape}, 1, &out, &err) ==
          NR_OK);
  CHECK(dims_are(&out, 2, (int64_t[]){NR_DIM_UNKNOWN, 12}));
  /* shape without data: only the rank is known */
  nr_value nodata = {.dtype = NR_DTYPE_INT64, .rank = 1, .dims = {3}};
  REQUIRE(infer("Reshape", 14, 0, NULL, 2, (nr_value *[]){&x, &nodata}, 1, &out, &err) ==
          NR_OK);
  CHECK(out.rank == 3 && out.dims[0] == NR_DIM_UNKNOWN);
  /* constant data folds right away */
  int64_t d[] = {1, 2, 3, 4};
  nr_value c = make_value(NR_DTYPE_INT64, 2, (int64_t[]){2, 2}, d);
  int64_t s3[] = {4};
  shape = i64v(1, s3);
  REQUIRE(infer("Reshape", 14, 0, NULL, 2, (nr_value *[]){&c, &shape}, 1, &out, &err) ==
          NR_OK);
  CHECK(out.data && i64_are(&out, 4, d));
  nr_value_free(&out);
}

NR_TEST(shape_flatten_axes) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 3, 2}, seq12), y;
  nr_error err = {0};
  int64_t axes[] = {0, 1, 2, 3, -1};
  int64_t want[][2] = {{1, 12}, {2, 6}, {6, 2}, {12, 1}, {6, 2}};
  for (int i = 0; i < 5; i++) {
    nr_attr a = attr_i("axis", axes[i]);
    REQUIRE(run_one("Flatten", 13, 1, &a, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK,
            "%s", err.message);
    CHECK(dims_are(&y, 2, want[i]) && f32_are(&y, 12, seq12), "axis %lld",
          (long long)axes[i]);
    nr_value_free(&y);
  }
  nr_attr bad = attr_i("axis", 4);
  CHECK(run_one("Flatten", 13, 1, &bad, 1, (const nr_value *[]){&x}, &y, &err) ==
        NR_ERR_SHAPE);
}

NR_TEST(shape_squeeze_unsqueeze_forms) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 3, 1, 4}, seq12), y;
  nr_error err = {0};
  int64_t ax[] = {-2};
  nr_value axes = i64v(1, ax);
  REQUIRE(run_one("Squeeze", 13, 0, NULL, 2, (const nr_value *[]){&x, &axes}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 3, (int64_t[]){1, 3, 4}) && f32_are(&y, 12, seq12));
  nr_value_free(&y);
  REQUIRE(run_one("Squeeze", 13, 0, NULL, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK);
  CHECK(dims_are(&y, 2, (int64_t[]){3, 4}));
  nr_value_free(&y);
  nr_attr a11 = attr_ints("axes", 1, (int64_t[]){0});
  REQUIRE(run_one("Squeeze", 11, 1, &a11, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK);
  CHECK(dims_are(&y, 3, (int64_t[]){3, 1, 4}));
  nr_value_free(&y);
  nr_attr a_bad = attr_ints("axes", 1, (int64_t[]){1});
  CHECK(run_one("Squeeze", 11, 1, &a_bad, 1, (const nr_value *[]){&x}, &y, &err) ==
        NR_ERR_SHAPE);
  /* Unsqueeze: axes refer to the output; unsorted and negative are fine. */
  nr_value v = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, seq12);
  int64_t ua[] = {-1, 0};
  axes = i64v(2, ua);
  REQUIRE(run_one("Unsqueeze", 13, 0, NULL, 2, (const nr_value *[]){&v, &axes}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 4, (int64_t[]){1, 3, 4, 1}) && f32_are(&y, 12, seq12));
  nr_value_free(&y);
  nr_attr u11 = attr_ints("axes", 2, (int64_t[]){1, 1});
  CHECK(run_one("Unsqueeze", 11, 1, &u11, 1, (const nr_value *[]){&v}, &y, &err) ==
        NR_ERR_SHAPE);
}

/* ---- Concat, Split, Expand --------------------------------------------------------- */

NR_TEST(shape_concat_axis_and_empty) {
  int32_t a[] = {1, 2, 3, 4}, b[] = {5, 6};
  nr_value va = make_value(NR_DTYPE_INT32, 2, (int64_t[]){2, 2}, a);
  nr_value vb = make_value(NR_DTYPE_INT32, 2, (int64_t[]){2, 1}, b);
  nr_value ve = make_value(NR_DTYPE_INT32, 2, (int64_t[]){2, 0}, seq12), y;
  nr_error err = {0};
  nr_attr ax = attr_i("axis", -1);
  REQUIRE(run_one("Concat", 13, 1, &ax, 3, (const nr_value *[]){&va, &ve, &vb}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  int32_t want[] = {1, 2, 5, 3, 4, 6};
  CHECK(dims_are(&y, 2, (int64_t[]){2, 3}) && !memcmp(y.data, want, sizeof want));
  nr_value_free(&y);
  nr_attr ax0 = attr_i("axis", 0);
  CHECK(run_one("Concat", 13, 1, &ax0, 2, (const nr_value *[]){&va, &vb}, &y, &err) ==
        NR_ERR_SHAPE);
  CHECK(run_one("Concat", 13, 0, NULL, 2, (const nr_value *[]){&va, &va}, &y, &err) ==
        NR_ERR_INVALID_MODEL);
}

NR_TEST(shape_split_forms) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 6}, seq12), y[4];
  nr_error err = {0};
  int64_t parts[] = {2, 4};
  nr_value sp = i64v(2, parts);
  nr_attr ax = attr_i("axis", 1);
  memset(y, 0, sizeof y);
  REQUIRE(nr_ref_exec_node("Split", "", 13, 1, &ax, 2, (const nr_value *[]){&x, &sp}, 2,
                           y, &err) == NR_OK,
          "%s", err.message);
  float w0[] = {0, 1, 6, 7}, w1[] = {2, 3, 4, 5, 8, 9, 10, 11};
  CHECK(dims_are(&y[0], 2, (int64_t[]){2, 2}) && f32_are(&y[0], 4, w0));
  CHECK(dims_are(&y[1], 2, (int64_t[]){2, 4}) && f32_are(&y[1], 8, w1));
  nr_value_free(&y[0]);
  nr_value_free(&y[1]);
  /* opset 18 num_outputs: 6 into 4 parts of ceil(6/4) = 2 -> 2, 2, 2, 0 */
  nr_attr a18[] = {attr_i("axis", 1), attr_i("num_outputs", 4)};
  REQUIRE(nr_ref_exec_node("Split", "", 18, 2, a18, 1, (const nr_value *[]){&x}, 4, y,
                           &err) == NR_OK,
          "%s", err.message);
  CHECK(y[2].dims[1] == 2 && y[3].dims[1] == 0);
  float w2[] = {4, 5, 10, 11};
  CHECK(f32_are(&y[2], 4, w2));
  for (int i = 0; i < 4; i++)
    nr_value_free(&y[i]);
  /* opset 11 attribute and even default */
  nr_attr a11[] = {attr_i("axis", 0), attr_ints("split", 2, (int64_t[]){1, 1})};
  REQUIRE(nr_ref_exec_node("Split", "", 11, 2, a11, 1, (const nr_value *[]){&x}, 2, y,
                           &err) == NR_OK,
          "%s", err.message);
  CHECK(f32_are(&y[1], 6, seq12 + 6));
  nr_value_free(&y[0]);
  nr_value_free(&y[1]);
  nr_attr a13 = attr_i("axis", 1);
  CHECK(nr_ref_exec_node("Split", "", 13, 1, &a13, 1, (const nr_value *[]){&x}, 4, y,
                         &err) == NR_ERR_SHAPE); /* 6 does not split evenly in 4 */
}

NR_TEST(shape_expand_broadcasts) {
  float x[] = {1, 2, 3};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 1}, x), y;
  int64_t s[] = {2, 1, 2};
  nr_value shape = i64v(3, s);
  nr_error err = {0};
  REQUIRE(run_one("Expand", 13, 0, NULL, 2, (const nr_value *[]){&vx, &shape}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float want[] = {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3};
  CHECK(dims_are(&y, 3, (int64_t[]){2, 3, 2}) && f32_are(&y, 12, want));
  nr_value_free(&y);
  int64_t bad[] = {2, 2};
  shape = i64v(2, bad);
  CHECK(run_one("Expand", 13, 0, NULL, 2, (const nr_value *[]){&vx, &shape}, &y, &err) ==
        NR_ERR_SHAPE);
}

/* ---- Shape, Size, constants ------------------------------------------------------- */

NR_TEST(shape_shape_slices_and_static_data) {
  nr_value x = {.dtype = NR_DTYPE_FLOAT, .rank = 4, .dims = {NR_DIM_UNKNOWN, 3, 5, 7}};
  nr_value out;
  nr_error err = {0};
  nr_attr se[] = {attr_i("start", 1), attr_i("end", -1)};
  REQUIRE(infer("Shape", 15, 2, se, 1, (nr_value *[]){&x}, 1, &out, &err) == NR_OK, "%s",
          err.message);
  CHECK(i64_are(&out, 2, (int64_t[]){3, 5}) && out.data);
  nr_value_free(&out);
  REQUIRE(infer("Shape", 15, 0, NULL, 1, (nr_value *[]){&x}, 1, &out, &err) == NR_OK);
  CHECK(dims_are(&out, 1, (int64_t[]){4}) && !out.data); /* dim 0 is unknown */
  nr_attr clip[] = {attr_i("start", -10), attr_i("end", 10)};
  x.dims[0] = 2;
  REQUIRE(infer("Shape", 15, 2, clip, 1, (nr_value *[]){&x}, 1, &out, &err) == NR_OK);
  CHECK(i64_are(&out, 4, (int64_t[]){2, 3, 5, 7}));
  nr_value_free(&out);
  nr_attr rev[] = {attr_i("start", 3), attr_i("end", 1)};
  REQUIRE(infer("Shape", 15, 2, rev, 1, (nr_value *[]){&x}, 1, &out, &err) == NR_OK);
  CHECK(dims_are(&out, 1, (int64_t[]){0}));
  nr_value_free(&out);
  REQUIRE(infer("Size", 13, 0, NULL, 1, (nr_value *[]){&x}, 1, &out, &err) == NR_OK);
  CHECK(out.rank == 0 && out.data && *(int64_t *)out.data == 210);
  nr_value_free(&out);
  /* at run time */
  nr_value rx = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, seq12);
  REQUIRE(run_one("Shape", 13, 0, NULL, 1, (const nr_value *[]){&rx}, &out, &err) == NR_OK);
  CHECK(i64_are(&out, 2, (int64_t[]){3, 4}));
  nr_value_free(&out);
}

NR_TEST(shape_constant_forms) {
  nr_value y;
  nr_error err = {0};
  int64_t iv[] = {4, -5, 6};
  nr_attr ints = attr_ints("value_ints", 3, iv);
  REQUIRE(run_one("Constant", 13, 1, &ints, 0, NULL, &y, &err) == NR_OK, "%s", err.message);
  CHECK(i64_are(&y, 3, iv));
  nr_value_free(&y);
  nr_attr fl = attr_f("value_float", 2.5f);
  REQUIRE(run_one("Constant", 13, 1, &fl, 0, NULL, &y, &err) == NR_OK);
  CHECK(y.rank == 0 && *(float *)y.data == 2.5f);
  nr_value_free(&y);
  float tv[] = {1, 2};
  nr_attr ta = {.name = "value",
                .type = NR_ATTR_TENSOR,
                .t = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){1, 2}, tv)};
  REQUIRE(run_one("Constant", 13, 1, &ta, 0, NULL, &y, &err) == NR_OK, "%s", err.message);
  CHECK(dims_are(&y, 2, (int64_t[]){1, 2}) && f32_are(&y, 2, tv));
  nr_value_free(&y);
  nr_attr s = attr_s("value_string", "hi");
  CHECK(run_one("Constant", 13, 1, &s, 0, NULL, &y, &err) == NR_ERR_UNSUPPORTED);
}

NR_TEST(shape_constant_of_shape) {
  int64_t s[] = {2, 3};
  int32_t seven = 7;
  nr_value shape = i64v(2, s), y;
  nr_error err = {0};
  nr_attr v = {.name = "value",
               .type = NR_ATTR_TENSOR,
               .t = make_value(NR_DTYPE_INT32, 1, (int64_t[]){1}, &seven)};
  REQUIRE(run_one("ConstantOfShape", 9, 1, &v, 1, (const nr_value *[]){&shape}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_INT32 && dims_are(&y, 2, s));
  for (int i = 0; i < 6; i++)
    CHECK(((int32_t *)y.data)[i] == 7);
  nr_value_free(&y);
  int64_t z[] = {0};
  shape = i64v(1, z);
  REQUIRE(run_one("ConstantOfShape", 9, 0, NULL, 1, (const nr_value *[]){&shape}, &y, &err) ==
          NR_OK);
  CHECK(y.dtype == NR_DTYPE_FLOAT && dims_are(&y, 1, z));
  nr_value_free(&y);
}

NR_TEST(shape_range_types) {
  int32_t s = 10, l = 4, d = -3;
  nr_value vs = make_value(NR_DTYPE_INT32, 0, NULL, &s),
           vl = make_value(NR_DTYPE_INT32, 0, NULL, &l);
  nr_value vd = make_value(NR_DTYPE_INT32, 0, NULL, &d), y;
  nr_error err = {0};
  REQUIRE(run_one("Range", 11, 0, NULL, 3, (const nr_value *[]){&vs, &vl, &vd}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_INT32 && dims_are(&y, 1, (int64_t[]){2}) &&
        ((int32_t *)y.data)[0] == 10 && ((int32_t *)y.data)[1] == 7);
  nr_value_free(&y);
  float fs = 1, fl = 2, fd = 0.25f;
  nr_value a = make_value(NR_DTYPE_FLOAT, 0, NULL, &fs),
           b = make_value(NR_DTYPE_FLOAT, 0, NULL, &fl);
  nr_value c = make_value(NR_DTYPE_FLOAT, 0, NULL, &fd);
  REQUIRE(run_one("Range", 11, 0, NULL, 3, (const nr_value *[]){&a, &b, &c}, &y, &err) ==
          NR_OK);
  float want[] = {1, 1.25f, 1.5f, 1.75f};
  CHECK(f32_are(&y, 4, want));
  nr_value_free(&y);
  fd = 0;
  CHECK(run_one("Range", 11, 0, NULL, 3, (const nr_value *[]){&a, &b, &c}, &y, &err) !=
        NR_OK);
}

NR_TEST(shape_dropout_inference_and_mask) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 1, (int64_t[]){4}, seq12), y[2];
  float ratio = 0.7f;
  nr_value r = make_value(NR_DTYPE_FLOAT, 0, NULL, &ratio);
  nr_error err = {0};
  memset(y, 0, sizeof y);
  REQUIRE(nr_ref_exec_node("Dropout", "", 13, 0, NULL, 2, (const nr_value *[]){&x, &r}, 2,
                           y, &err) == NR_OK,
          "%s", err.message);
  CHECK(f32_are(&y[0], 4, seq12) && y[1].dtype == NR_DTYPE_BOOL);
  for (int i = 0; i < 4; i++)
    CHECK(((uint8_t *)y[1].data)[i] == 1);
  nr_value_free(&y[0]);
  nr_value_free(&y[1]);
  /* training mode: numpy.random.seed(0).uniform(0, 1, 6) is .549 .715 .603 .545 .424
   * .646, so ratio .5 drops element 4 only; kept elements are scaled by 2 */
  uint8_t on = 1;
  float half = 0.5f;
  nr_value train = make_value(NR_DTYPE_BOOL, 0, NULL, &on);
  nr_value vr = make_value(NR_DTYPE_FLOAT, 0, NULL, &half);
  nr_value six = make_value(NR_DTYPE_FLOAT, 1, (int64_t[]){6}, seq12 + 1);
  nr_attr seed = attr_i("seed", 0);
  REQUIRE(nr_ref_exec_node("Dropout", "", 13, 1, &seed, 3,
                           (const nr_value *[]){&six, &vr, &train}, 2, y, &err) == NR_OK,
          "%s", err.message);
  float want[] = {2, 4, 6, 8, 0, 12};
  uint8_t keep[] = {1, 1, 1, 1, 0, 1};
  CHECK(f32_are(&y[0], 6, want) && !memcmp(y[1].data, keep, 6));
  nr_value_free(&y[0]);
  nr_value_free(&y[1]);
}

/* ---- layout ops -------------------------------------------------------------------- */

NR_TEST(shape_transpose_against_index_formula) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 3, 2}, seq12), y;
  nr_error err = {0};
  nr_attr p = attr_ints("perm", 3, (int64_t[]){2, 0, 1});
  REQUIRE(run_one("Transpose", 13, 1, &p, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(dims_are(&y, 3, (int64_t[]){2, 2, 3}));
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int c = 0; c < 3; c++) /* y[a][b][c] = x[b][c][a] */
        CHECK(((float *)y.data)[(a * 2 + b) * 3 + c] == seq12[(b * 3 + c) * 2 + a]);
  nr_value_free(&y);
  REQUIRE(run_one("Transpose", 13, 0, NULL, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK);
  CHECK(dims_are(&y, 3, (int64_t[]){2, 3, 2}) && ((float *)y.data)[1] == 6);
  nr_value_free(&y);
  nr_value e = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){0, 3}, seq12);
  REQUIRE(run_one("Transpose", 13, 0, NULL, 1, (const nr_value *[]){&e}, &y, &err) == NR_OK);
  CHECK(dims_are(&y, 2, (int64_t[]){3, 0}));
  nr_value_free(&y);
  nr_attr bad = attr_ints("perm", 3, (int64_t[]){0, 0, 1});
  CHECK(run_one("Transpose", 13, 1, &bad, 1, (const nr_value *[]){&x}, &y, &err) ==
        NR_ERR_SHAPE);
}

NR_TEST(shape_tile_repeats) {
  int16_t x[] = {1, 2, 3, 4};
  nr_value vx = make_value(NR_DTYPE_INT16, 2, (int64_t[]){2, 2}, x), y;
  int64_t r[] = {2, 2};
  nr_value reps = i64v(2, r);
  nr_error err = {0};
  REQUIRE(run_one("Tile", 13, 0, NULL, 2, (const nr_value *[]){&vx, &reps}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  int16_t want[] = {1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4};
  CHECK(dims_are(&y, 2, (int64_t[]){4, 4}) && !memcmp(y.data, want, sizeof want));
  nr_value_free(&y);
  int64_t z[] = {1, 0};
  reps = i64v(2, z);
  REQUIRE(run_one("Tile", 13, 0, NULL, 2, (const nr_value *[]){&vx, &reps}, &y, &err) ==
          NR_OK);
  CHECK(dims_are(&y, 2, (int64_t[]){2, 0}));
  nr_value_free(&y);
}

static nr_status pad1(int opset, const char *mode, const float *x, int64_t n, int64_t b,
                      int64_t e, nr_value *y, nr_error *err) {
  nr_value vx = make_value(NR_DTYPE_FLOAT, 1, &n, x);
  int64_t p[] = {b, e};
  nr_value pads = i64v(2, p);
  nr_attr m = attr_s("mode", mode);
  return run_one("Pad", opset, 1, &m, 2, (const nr_value *[]){&vx, &pads}, y, err);
}

NR_TEST(shape_pad_modes_1d) {
  const float x[] = {1, 2, 3, 4};
  struct {
    const char *mode;
    int64_t b, e;
    int64_t n;
    float want[10];
  } cases[] = {
      {"constant", 2, 1, 7, {0, 0, 1, 2, 3, 4, 0}},
      {"constant", -1, 2, 5, {2, 3, 4, 0, 0}},
      {"reflect", 2, 2, 8, {3, 2, 1, 2, 3, 4, 3, 2}},
      {"reflect", 4, 0, 8, {3, 4, 3, 2, 1, 2, 3, 4}},
      {"edge", 2, 1, 7, {1, 1, 1, 2, 3, 4, 4}},
      {"wrap", 2, 3, 9, {3, 4, 1, 2, 3, 4, 1, 2, 3}},
      {"wrap", -1, 1, 4, {2, 3, 4, 2}}, /* crop first, then wrap the rest */
      {"edge", 0, -3, 1, {1}},
  };
  nr_error err = {0};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    nr_value y;
    REQUIRE(pad1(19, cases[c].mode, x, 4, cases[c].b, cases[c].e, &y, &err) == NR_OK,
            "case %zu: %s", c, err.message);
    CHECK(f32_are(&y, cases[c].n, cases[c].want), "case %zu (%s)", c, cases[c].mode);
    nr_value_free(&y);
  }
  nr_value y;
  CHECK(pad1(19, "constant", x, 4, -3, -2, &y, &err) == NR_ERR_SHAPE);
  CHECK(pad1(19, "edge", x, 0, 1, 1, &y, &err) == NR_ERR_SHAPE);
}

NR_TEST(shape_pad_2d_value_and_axes) {
  float x[] = {1, 2, 3, 4, 5, 6};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, x), y;
  nr_error err = {0};
  /* opset 2: pads and value attributes */
  nr_attr a2[] = {attr_ints("pads", 4, (int64_t[]){1, 0, 0, 1}), attr_f("value", 9)};
  REQUIRE(run_one("Pad", 2, 2, a2, 1, (const nr_value *[]){&vx}, &y, &err) == NR_OK, "%s",
          err.message);
  float w2[] = {9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9};
  CHECK(dims_are(&y, 2, (int64_t[]){3, 4}) && f32_are(&y, 12, w2));
  nr_value_free(&y);
  /* opset 18: axes input picks axis -1 only; constant_value input */
  int64_t p[] = {1, 1}, ax[] = {-1};
  float cv = -1;
  nr_value pads = i64v(2, p), axes = i64v(1, ax);
  nr_value vcv = make_value(NR_DTYPE_FLOAT, 0, NULL, &cv);
  REQUIRE(run_one("Pad", 18, 0, NULL, 4, (const nr_value *[]){&vx, &pads, &vcv, &axes}, &y,
              &err) == NR_OK,
          "%s", err.message);
  float w18[] = {-1, 1, 2, 3, -1, -1, 4, 5, 6, -1};
  CHECK(dims_are(&y, 2, (int64_t[]){2, 5}) && f32_are(&y, 10, w18));
  nr_value_free(&y);
}

NR_TEST(shape_depth_space_modes) {
  float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 8, 1, 1}, x), y, back;
  nr_error err = {0};
  nr_attr dcr[] = {attr_i("blocksize", 2), attr_s("mode", "DCR")};
  nr_attr crd[] = {attr_i("blocksize", 2), attr_s("mode", "CRD")};
  REQUIRE(run_one("DepthToSpace", 13, 2, dcr, 1, (const nr_value *[]){&vx}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float wd[] = {0, 2, 4, 6, 1, 3, 5, 7};
  CHECK(dims_are(&y, 4, (int64_t[]){1, 2, 2, 2}) && f32_are(&y, 8, wd));
  REQUIRE(run_one("SpaceToDepth", 13, 1, dcr, 1, (const nr_value *[]){&y}, &back, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(dims_are(&back, 4, (int64_t[]){1, 8, 1, 1}) && f32_are(&back, 8, x));
  nr_value_free(&y);
  nr_value_free(&back);
  REQUIRE(run_one("DepthToSpace", 13, 2, crd, 1, (const nr_value *[]){&vx}, &y, &err) ==
          NR_OK);
  CHECK(f32_are(&y, 8, x)); /* CRD keeps c outermost: c=0 -> 0..3, c=1 -> 4..7 */
  REQUIRE(run_one("SpaceToDepth", 28, 2, crd, 1, (const nr_value *[]){&y}, &back, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(f32_are(&back, 8, x));
  nr_value_free(&y);
  nr_value_free(&back);
  /* a real spatial case: 1x4x1x2 DCR -> 1x1x2x4 */
  nr_value v2 = make_value(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 4, 1, 2}, x);
  REQUIRE(run_one("DepthToSpace", 13, 2, dcr, 1, (const nr_value *[]){&v2}, &y, &err) ==
          NR_OK);
  float w2[] = {0, 2, 1, 3, 4, 6, 5, 7}; /* y[b1][w*2+b2] = x[b1*2+b2][w] */
  CHECK(f32_are(&y, 8, w2));
  nr_value_free(&y);
  nr_attr odd = attr_i("blocksize", 3);
  CHECK(run_one("DepthToSpace", 13, 1, &odd, 1, (const nr_value *[]){&vx}, &y, &err) ==
        NR_ERR_SHAPE);
}

NR_TEST(shape_trilu_eyelike) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, seq12), y;
  nr_error err = {0};
  int64_t k1 = 1, km1 = -1;
  nr_value vk = make_value(NR_DTYPE_INT64, 0, NULL, &k1);
  REQUIRE(run_one("Trilu", 14, 0, NULL, 2, (const nr_value *[]){&x, &vk}, &y, &err) == NR_OK,
          "%s", err.message);
  float up[] = {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11};
  CHECK(f32_are(&y, 12, up));
  nr_value_free(&y);
  nr_attr lower = attr_i("upper", 0);
  vk = make_value(NR_DTYPE_INT64, 0, NULL, &km1);
  REQUIRE(run_one("Trilu", 14, 1, &lower, 2, (const nr_value *[]){&x, &vk}, &y, &err) ==
          NR_OK);
  float lo[] = {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0};
  CHECK(f32_are(&y, 12, lo));
  nr_value_free(&y);
  nr_attr ea[] = {attr_i("k", 1), attr_i("dtype", NR_DTYPE_INT32)};
  REQUIRE(run_one("EyeLike", 9, 2, ea, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK, "%s",
          err.message);
  int32_t eye[] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  CHECK(y.dtype == NR_DTYPE_INT32 && !memcmp(y.data, eye, sizeof eye));
  nr_value_free(&y);
}

NR_TEST(shape_reverse_sequence) {
  float x[16];
  for (int i = 0; i < 16; i++)
    x[i] = (float)i;
  nr_value vx = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){4, 4}, x), y;
  int64_t lens[] = {1, 2, 3, 4};
  nr_value vl = i64v(4, lens);
  nr_attr a[] = {attr_i("time_axis", 1), attr_i("batch_axis", 0)};
  nr_error err = {0};
  REQUIRE(run_one("ReverseSequence", 10, 2, a, 2, (const nr_value *[]){&vx, &vl}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float want[] = {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12};
  CHECK(f32_are(&y, 16, want));
  nr_value_free(&y);
  lens[0] = 5;
  CHECK(run_one("ReverseSequence", 10, 2, a, 2, (const nr_value *[]){&vx, &vl}, &y, &err) ==
        NR_ERR_RUNTIME);
}

/* ---- static chains ----------------------------------------------------------------- */

NR_TEST(shape_static_unknowns_stay_unknown) {
  nr_value x = {.dtype = NR_DTYPE_FLOAT, .rank = -1}, out[2];
  nr_value s = {.dtype = NR_DTYPE_INT64, .rank = 1, .dims = {NR_DIM_UNKNOWN}};
  nr_error err = {0};
  REQUIRE(infer("Reshape", 14, 0, NULL, 2, (nr_value *[]){&x, &s}, 1, out, &err) ==
          NR_OK);
  CHECK(out[0].rank == -1);
  REQUIRE(infer("Shape", 15, 0, NULL, 1, (nr_value *[]){&x}, 1, out, &err) == NR_OK);
  CHECK(dims_are(&out[0], 1, (int64_t[]){NR_DIM_UNKNOWN}) && !out[0].data);
  nr_value x2 = {.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {NR_DIM_UNKNOWN, 4}};
  REQUIRE(infer("Tile", 13, 0, NULL, 2, (nr_value *[]){&x2, &s}, 1, out, &err) == NR_OK);
  CHECK(dims_are(&out[0], 2, (int64_t[]){NR_DIM_UNKNOWN, NR_DIM_UNKNOWN}));
  nr_value sp = {.dtype = NR_DTYPE_INT64, .rank = 1, .dims = {2}};
  nr_attr ax = attr_i("axis", 1);
  REQUIRE(infer("Split", 13, 1, &ax, 2, (nr_value *[]){&x2, &sp}, 2, out, &err) == NR_OK);
  CHECK(dims_are(&out[1], 2, (int64_t[]){NR_DIM_UNKNOWN, NR_DIM_UNKNOWN}));
  nr_attr cax = attr_i("axis", 0);
  REQUIRE(infer("Concat", 13, 1, &cax, 2, (nr_value *[]){&x2, &x2}, 1, out, &err) ==
          NR_OK);
  CHECK(dims_are(&out[0], 2, (int64_t[]){NR_DIM_UNKNOWN, 4}));
  nr_value x3 = {.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {3, 5}};
  REQUIRE(infer("Concat", 13, 1, &cax, 2, (nr_value *[]){&x2, &x3}, 1, out, &err) ==
          NR_ERR_SHAPE);
}
