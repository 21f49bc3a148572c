/* test_resize.c - unit tests of Resize and Upsample: hand-computed cases from the
 * ONNX spec examples, cubic and antialiased linear checked against direct formulas
 * written here (a sum over every input sample, not the kernel's tap windows),
 * crop-and-resize extrapolation, keep_aspect_ratio_policy shapes, static inference
 * with unknown sizes, and the errors of malformed scales. */
#include "ir/op.h"
#include "kernels/ref/executor.h"
#include "unit.h"

#include <math.h>
#include <string.h>

static nr_value rv(nr_dtype t, int rank, const int64_t *dims, void *data) {
  nr_value v = {.dtype = t, .rank = rank, .data = data};
  for (int i = 0; i < rank; i++)
    v.dims[i] = dims[i];
  return v;
}

static nr_attr rstr(const char *name, const char *s) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_STRING, .s = (char *)s,
                   .s_len = strlen(s)};
}

static nr_attr rint_(const char *name, int64_t i) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INT, .i = i};
}

static nr_status resize(int n_attrs, const nr_attr *attrs, const nr_value *x,
                        const nr_value *roi, const nr_value *scales, const nr_value *sizes,
                        nr_value *out, nr_error *err) {
  return nr_ref_exec_node("Resize", "", 19, n_attrs, attrs, 4,
                          (const nr_value *[]){x, roi, scales, sizes}, 1, out, err);
}

static bool near(double a, double b) { return fabs(a - b) <= 1e-5 * (1 + fabs(b)); }

NR_TEST(resize_linear_half_pixel_upsample) {
  float x[4] = {1, 2, 3, 4}, s[4] = {1, 1, 2, 2};
  float want[16] = {1, 1.25f, 1.75f, 2,   1.5f, 1.75f, 2.25f, 2.5f,
                    2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4};
  nr_value vx = rv(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 1, 2, 2}, x);
  nr_value vs = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){4}, s);
  nr_value out = {0};
  nr_error err = {0};
  nr_attr a = rstr("mode", "linear");
  REQUIRE(resize(1, &a, &vx, NULL, &vs, NULL, &out, &err) == NR_OK, "%s", err.message);
  REQUIRE(out.rank == 4 && out.dims[2] == 4 && out.dims[3] == 4);
  for (int i = 0; i < 16; i++)
    CHECK(near(((float *)out.data)[i], want[i]), "i=%d got %g", i, ((float *)out.data)[i]);
  nr_value_free(&out);
}

NR_TEST(resize_nearest_downsample_uses_given_scale) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, s[4] = {1, 1, 0.6f, 0.6f};
  nr_value vx = rv(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 1, 2, 4}, x);
  nr_value vs = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){4}, s);
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(resize(0, NULL, &vx, NULL, &vs, NULL, &out, &err) == NR_OK, "%s", err.message);
  REQUIRE(out.dims[2] == 1 && out.dims[3] == 2);
  CHECK(((float *)out.data)[0] == 1 && ((float *)out.data)[1] == 3);
  nr_value_free(&out);
}

/* Keys cubic kernel, written out from the paper's piecewise form. */
static double keys(double t, double a) {
  t = fabs(t);
  if (t < 1)
    return (a + 2) * t * t * t - (a + 3) * t * t + 1;
  if (t < 2)
    return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
  return 0;
}

static void check_cubic(nr_test_state *t, bool exclude) {
  double in[5] = {1, 4, 2, 8, 3};
  int64_t sizes[1] = {8};
  nr_value vx = rv(NR_DTYPE_DOUBLE, 1, (int64_t[]){5}, in);
  nr_value vz = rv(NR_DTYPE_INT64, 1, (int64_t[]){1}, sizes);
  nr_attr at[3] = {rstr("mode", "cubic"), rint_("exclude_outside", exclude),
                   {.name = "cubic_coeff_a", .type = NR_ATTR_FLOAT, .f = -0.5f}};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(resize(3, at, &vx, NULL, NULL, &vz, &out, &err) == NR_OK, "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_DOUBLE && out.dims[0] == 8);
  for (int j = 0; j < 8; j++) {
    double x = (j + 0.5) / (8.0 / 5.0) - 0.5, acc = 0, wsum = 0;
    for (int i = (int)floor(x) - 1; i <= (int)floor(x) + 2; i++) {
      if (exclude && (i < 0 || i > 4))
        continue;
      double w = keys(x - i, -0.5);
      acc += w * in[i < 0 ? 0 : i > 4 ? 4 : i];
      wsum += w;
    }
    double want = exclude ? acc / wsum : acc;
    CHECK(near(((double *)out.data)[j], want), "j=%d got %g want %g", j,
          ((double *)out.data)[j], want);
  }
  nr_value_free(&out);
}

NR_TEST(resize_cubic_matches_keys_formula) {
  check_cubic(t, false);
  check_cubic(t, true);
}

NR_TEST(resize_linear_antialias_is_triangle_filter) {
  float in[9] = {3, 1, 4, 1, 5, 9, 2, 6, 5}, s[1] = {0.4f};
  nr_value vx = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){9}, in);
  nr_value vs = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){1}, s);
  nr_attr at[2] = {rstr("mode", "linear"), rint_("antialias", 1)};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(resize(2, at, &vx, NULL, &vs, NULL, &out, &err) == NR_OK, "%s", err.message);
  REQUIRE(out.dims[0] == 3); /* floor(9 * 0.4) */
  double scale = (double)0.4f;
  for (int j = 0; j < 3; j++) {
    double x = (j + 0.5) / scale - 0.5, acc = 0, wsum = 0;
    for (int i = -20; i < 30; i++) { /* edge-padded input, filter width 2/scale */
      double w = 1 - fabs(i - x) * scale;
      if (w <= 0)
        continue;
      acc += w * in[i < 0 ? 0 : i > 8 ? 8 : i];
      wsum += w;
    }
    CHECK(near(((float *)out.data)[j], acc / wsum), "j=%d got %g want %g", j,
          ((float *)out.data)[j], acc / wsum);
  }
  nr_value_free(&out);
}

NR_TEST(resize_tf_crop_and_resize_extrapolates) {
  float in[4] = {1, 2, 3, 4}, roi[2] = {0.4f, 1.2f};
  int64_t sz[1] = {3};
  nr_value vx = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){4}, in);
  nr_value vr = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){2}, roi);
  nr_value vz = rv(NR_DTYPE_INT64, 1, (int64_t[]){1}, sz);
  nr_attr at[3] = {rstr("mode", "linear"),
                   rstr("coordinate_transformation_mode", "tf_crop_and_resize"),
                   {.name = "extrapolation_value", .type = NR_ATTR_FLOAT, .f = 10}};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(resize(3, at, &vx, &vr, NULL, &vz, &out, &err) == NR_OK, "%s", err.message);
  /* x = 0.4*3 + j*0.8*3/2 = 1.2, 2.4, 3.6 (outside [0, 3]). */
  float *y = out.data;
  CHECK(near(y[0], 2.2) && near(y[1], 3.4) && y[2] == 10, "%g %g %g", y[0], y[1], y[2]);
  nr_value_free(&out);
}

NR_TEST(resize_keep_aspect_ratio_and_axes) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t sz[2] = {7, 8};
  nr_value vx = rv(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 1, 2, 4}, x);
  nr_value vz = rv(NR_DTYPE_INT64, 1, (int64_t[]){2}, sz);
  int64_t axes[2] = {2, 3};
  nr_attr at[2] = {rstr("keep_aspect_ratio_policy", "not_larger"),
                   {.name = "axes", .type = NR_ATTR_INTS, .n = 2, .ints = axes}};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(resize(2, at, &vx, NULL, NULL, &vz, &out, &err) == NR_OK, "%s", err.message);
  /* scale = min(7/2, 8/4) = 2: output 4 x 8, each input pixel repeated 2 x 2. */
  REQUIRE(out.dims[0] == 1 && out.dims[1] == 1 && out.dims[2] == 4 && out.dims[3] == 8);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 8; c++)
      CHECK(((float *)out.data)[r * 8 + c] == x[(r / 2) * 4 + c / 2], "r=%d c=%d", r, c);
  nr_value_free(&out);
  at[0] = rstr("keep_aspect_ratio_policy", "not_smaller");
  REQUIRE(resize(2, at, &vx, NULL, NULL, &vz, &out, &err) == NR_OK, "%s", err.message);
  CHECK(out.dims[2] == 7 && out.dims[3] == 14); /* scale 3.5 */
  nr_value_free(&out);
}

NR_TEST(resize_integer_nearest_and_upsample7) {
  uint8_t x[4] = {10, 20, 30, 40};
  float sc[4] = {1, 1, 2, 3};
  nr_value vx = rv(NR_DTYPE_UINT8, 4, (int64_t[]){1, 1, 2, 2}, x);
  nr_attr at = {.name = "scales", .type = NR_ATTR_FLOATS, .n = 4, .floats = sc};
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("Upsample", "", 7, 1, &at, 1, (const nr_value *[]){&vx}, 1,
                           &out, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_UINT8 && out.dims[2] == 4 && out.dims[3] == 6);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 6; c++)
      CHECK(((uint8_t *)out.data)[r * 6 + c] == x[(r / 2) * 2 + c / 3], "r=%d c=%d", r, c);
  nr_value_free(&out);
}

NR_TEST(resize_rejects_bad_scales) {
  float x[4] = {0}, s3[3] = {1, 2, 2}, s2[2] = {1, -1};
  int64_t sz[2] = {2, 2};
  nr_value vx = rv(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, x);
  nr_value v3 = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){3}, s3);
  nr_value v2 = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){2}, s2);
  nr_value vz = rv(NR_DTYPE_INT64, 1, (int64_t[]){2}, sz);
  nr_value out = {0};
  nr_error err = {0};
  CHECK(resize(0, NULL, &vx, NULL, &v3, NULL, &out, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "scales") != NULL, "%s", err.message);
  CHECK(resize(0, NULL, &vx, NULL, &v2, NULL, &out, &err) == NR_ERR_SHAPE);
  CHECK(resize(0, NULL, &vx, NULL, &v2, &vz, &out, &err) == NR_ERR_SHAPE);
  CHECK(resize(0, NULL, &vx, NULL, NULL, NULL, &out, &err) == NR_ERR_SHAPE);
  float huge[2] = {1, INFINITY};
  nr_value vh = rv(NR_DTYPE_FLOAT, 1, (int64_t[]){2}, huge);
  CHECK(resize(0, NULL, &vx, NULL, &vh, NULL, &out, &err) == NR_ERR_SHAPE);
  nr_attr bad = rstr("mode", "bicubic");
  CHECK(resize(1, &bad, &vx, NULL, &v3, NULL, &out, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "bicubic") != NULL, "%s", err.message);
  nr_value_free(&out);
}

NR_TEST(resize_infer_unknown_sizes_leaves_dims_unknown) {
  const nr_op_def *def = nr_op_find("", "Resize", 19);
  REQUIRE(def && def->infer);
  nr_node node = {.name = "r", .op_type = "Resize", .domain = "", .opset = 19};
  nr_value x = rv(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 3, 8, 8}, NULL);
  nr_value sizes = rv(NR_DTYPE_INT64, 1, (int64_t[]){4}, NULL);
  nr_value y = {.rank = -1};
  nr_value *ins[4] = {&x, NULL, NULL, &sizes}, *outs[1] = {&y};
  nr_error err = {0};
  nr_op_ctx ctx = {.node = &node, .n_inputs = 4, .inputs = ins, .n_outputs = 1,
                   .outputs = outs, .err = &err};
  REQUIRE(def->infer(&ctx) == NR_OK, "%s", err.message);
  CHECK(y.dtype == NR_DTYPE_FLOAT && y.rank == 4);
  for (int d = 0; d < 4; d++)
    CHECK(y.dims[d] == NR_DIM_UNKNOWN, "d=%d is %lld", d, (long long)y.dims[d]);
}
