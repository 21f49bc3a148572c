/* test_misc.c - unit tests of the reference misc-family operators (ops_misc*.c):
 * small cases whose expected values are worked out by hand in the comments, plus
 * the shape and dtype checks that must fail with NR_ERR_SHAPE. */
#include "kernels/ref/executor.h"
#include "unit.h"
#include "util/version.h"
#include "op_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nr_value make(nr_dtype t, int rank, const int64_t *dims, const void *data) {
  nr_value v = {.dtype = t, .rank = rank};
  if (rank > 0)
    memcpy(v.dims, dims, sizeof(int64_t) * (size_t)rank);
  v.data = (void *)data;
  return v;
}

static bool near(double got, double want) { return fabs(got - want) <= 1e-5 * (1 + fabs(want)); }

static nr_status run(const char *op, int opset, int n_attrs, nr_attr *attrs, int n_in,
                     const nr_value *const *ins, int n_out, nr_value *outs, nr_error *err) {
  memset(outs, 0, sizeof *outs * (size_t)n_out);
  return nr_ref_exec_node(op, "", opset, n_attrs, attrs, n_in, ins, n_out, outs, err);
}

/* X = [[-1,-2,-3],[-4,-5,-6]], targets [2, 0], weight [1, 2, 3], ignore target 0:
 * none -> [3*3, 0]; mean -> 9 / 3 = 3; sum -> 9. */
NR_TEST(nllloss_weight_ignore) {
  float x[] = {-1, -2, -3, -4, -5, -6}, w[] = {1, 2, 3};
  int64_t tg[] = {2, 0};
  nr_value xv = make(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, x);
  nr_value tv = make(NR_DTYPE_INT64, 1, (int64_t[]){2}, tg);
  nr_value wv = make(NR_DTYPE_FLOAT, 1, (int64_t[]){3}, w), y;
  nr_error err = {0};
  const char *red[] = {"none", "mean", "sum"};
  double want[][2] = {{9, 0}, {3, 0}, {9, 0}};
  for (int r = 0; r < 3; r++) {
    nr_attr at[] = {attr_s("reduction", red[r]), attr_i("ignore_index", 0)};
    REQUIRE(run("NegativeLogLikelihoodLoss", 13, 2, at, 3,
                (const nr_value *[]){&xv, &tv, &wv}, 1, &y, &err) == NR_OK, "%s", err.message);
    CHECK(y.rank == (r ? 0 : 1));
    CHECK(near(((float *)y.data)[0], want[r][0]), "%s", red[r]);
    if (!r)
      CHECK(near(((float *)y.data)[1], 0));
    nr_value_free(&y);
  }
}

/* Two classes with equal scores: log_prob = log(1/2) everywhere, loss = log 2. */
NR_TEST(sce_uniform_scores) {
  float x[] = {1, 1, 5, 5};
  int64_t tg[] = {0, 1};
  nr_value xv = make(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, x);
  nr_value tv = make(NR_DTYPE_INT64, 1, (int64_t[]){2}, tg), y[2];
  nr_error err = {0};
  REQUIRE(run("SoftmaxCrossEntropyLoss", 13, 0, NULL, 2, (const nr_value *[]){&xv, &tv}, 2,
              y, &err) == NR_OK, "%s", err.message);
  CHECK(near(((float *)y[0].data)[0], log(2.0)));
  for (int i = 0; i < 4; i++)
    CHECK(near(((float *)y[1].data)[i], -log(2.0)));
  nr_value_free(&y[0]);
  nr_value_free(&y[1]);
}

NR_TEST(nllloss_rejects_bad_target_rank) {
  float x[6] = {0};
  int64_t tg[] = {0, 0, 0, 0};
  nr_value xv = make(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, x);
  nr_value tv = make(NR_DTYPE_INT64, 2, (int64_t[]){2, 2}, tg), y;
  nr_error err = {0};
  CHECK(run("NegativeLogLikelihoodLoss", 13, 0, NULL, 2, (const nr_value *[]){&xv, &tv}, 1,
            &y, &err) == NR_ERR_SHAPE);
}

/* 1x1x2x2 image [[1,2],[3,4]], align_corners=1: grid (0,0) is the centre, mean 2.5;
 * (-1,-1) is pixel (0,0) = 1; (1,-1) is x=1,y=0 -> 2. Nearest at (0.2, 0.8) -> x=1,y=1. */
NR_TEST(gridsample_bilinear_and_nearest) {
  float x[] = {1, 2, 3, 4}, g[] = {0, 0, -1, -1, 1, -1, 0.2f, 0.8f};
  nr_value xv = make(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 1, 2, 2}, x);
  nr_value gv = make(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 1, 4, 2}, g), y;
  nr_error err = {0};
  nr_attr at[] = {attr_i("align_corners", 1), attr_s("mode", "bilinear")};
  REQUIRE(run("GridSample", 16, 2, at, 2, (const nr_value *[]){&xv, &gv}, 1, &y, &err) == NR_OK,
          "%s", err.message);
  float *o = y.data;
  CHECK(near(o[0], 2.5) && near(o[1], 1) && near(o[2], 2), "%g %g %g", o[0], o[1], o[2]);
  nr_value_free(&y);
  at[1] = attr_s("mode", "nearest");
  REQUIRE(run("GridSample", 16, 2, at, 2, (const nr_value *[]){&xv, &gv}, 1, &y, &err) == NR_OK);
  CHECK(near(((float *)y.data)[3], 4));
  nr_value_free(&y);
}

/* Identity theta on a 2x2 grid without align_corners: coordinates +-0.5. */
NR_TEST(affinegrid_identity) {
  float th[] = {1, 0, 0, 0, 1, 0};
  int64_t sz[] = {1, 1, 2, 2};
  nr_value tv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 2, 3}, th);
  nr_value sv = make(NR_DTYPE_INT64, 1, (int64_t[]){4}, sz), y;
  nr_error err = {0};
  REQUIRE(run("AffineGrid", 20, 0, NULL, 2, (const nr_value *[]){&tv, &sv}, 1, &y, &err) == NR_OK,
          "%s", err.message);
  float want[] = {-0.5f, -0.5f, 0.5f, -0.5f, -0.5f, 0.5f, 0.5f, 0.5f};
  for (int i = 0; i < 8; i++)
    CHECK(near(((float *)y.data)[i], want[i]), "i %d", i);
  nr_value_free(&y);
}

/* Rotating (1, 0) by 90 degrees (cos 0, sin 1) gives (0, 1); the pair is halves. */
NR_TEST(rotary_quarter_turn) {
  float x[] = {1, 0}, c[] = {0}, s[] = {1};
  nr_value xv = make(NR_DTYPE_FLOAT, 4, (int64_t[]){1, 1, 1, 2}, x);
  nr_value cv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 1}, c);
  nr_value sv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 1}, s), y;
  nr_error err = {0};
  REQUIRE(run("RotaryEmbedding", 23, 0, NULL, 3, (const nr_value *[]){&xv, &cv, &sv}, 1, &y,
              &err) == NR_OK, "%s", err.message);
  CHECK(near(((float *)y.data)[0], 0) && near(((float *)y.data)[1], 1));
  nr_value_free(&y);
}

/* Boxes 0 and 1 overlap with IoU 0.81/1.19 > 0.5, box 2 is apart: keep 1 (top), 2. */
NR_TEST(nms_suppresses_overlap) {
  float b[] = {0, 0, 1, 1, 0.1f, 0.1f, 1, 1, 5, 5, 6, 6}, s[] = {0.8f, 0.9f, 0.7f};
  float iou[] = {0.5f};
  int64_t mx[] = {10};
  nr_value bv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 3, 4}, b);
  nr_value sv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 1, 3}, s);
  nr_value mv = make(NR_DTYPE_INT64, 1, (int64_t[]){1}, mx);
  nr_value iv = make(NR_DTYPE_FLOAT, 1, (int64_t[]){1}, iou), y;
  nr_error err = {0};
  REQUIRE(run("NonMaxSuppression", 11, 0, NULL, 4, (const nr_value *[]){&bv, &sv, &mv, &iv}, 1,
              &y, &err) == NR_OK, "%s", err.message);
  REQUIRE(y.rank == 2 && y.dims[0] == 2 && y.dims[1] == 3);
  int64_t *o = y.data;
  CHECK(o[2] == 1 && o[5] == 2);
  nr_value_free(&y);
}

/* det [[2,1],[1,3]] = 5; det [[0,1],[1,0]] = -1 (needs a pivot swap). */
NR_TEST(det_batch) {
  float x[] = {2, 1, 1, 3, 0, 1, 1, 0};
  nr_value xv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 2, 2}, x), y;
  nr_error err = {0};
  REQUIRE(run("Det", 22, 0, NULL, 1, (const nr_value *[]){&xv}, 1, &y, &err) == NR_OK);
  CHECK(near(((float *)y.data)[0], 5) && near(((float *)y.data)[1], -1));
  nr_value_free(&y);
}

/* Hann periodic size 4: 0.5 - 0.5 cos(pi n / 2) = 0, 0.5, 1, 0.5. */
NR_TEST(hann_window_periodic) {
  int64_t n[] = {4};
  nr_value nv = make(NR_DTYPE_INT64, 0, NULL, n), y;
  nr_error err = {0};
  REQUIRE(run("HannWindow", 17, 0, NULL, 1, (const nr_value *[]){&nv}, 1, &y, &err) == NR_OK);
  float want[] = {0, 0.5f, 1, 0.5f};
  for (int i = 0; i < 4; i++)
    CHECK(near(((float *)y.data)[i], want[i]));
  nr_value_free(&y);
}

/* [1,2,3,4,5] cropped to 3 -> [2,3,4]; padded to 7 -> [0,1,2,3,4,5,0]. */
NR_TEST(center_crop_pad_1d) {
  int32_t x[] = {1, 2, 3, 4, 5};
  int64_t s3[] = {3}, s7[] = {7};
  nr_value xv = make(NR_DTYPE_INT32, 1, (int64_t[]){5}, x);
  nr_value a = make(NR_DTYPE_INT64, 1, (int64_t[]){1}, s3), y;
  nr_value b = make(NR_DTYPE_INT64, 1, (int64_t[]){1}, s7);
  nr_error err = {0};
  REQUIRE(run("CenterCropPad", 18, 0, NULL, 2, (const nr_value *[]){&xv, &a}, 1, &y, &err) == NR_OK);
  CHECK(((int32_t *)y.data)[0] == 2 && ((int32_t *)y.data)[2] == 4);
  nr_value_free(&y);
  REQUIRE(run("CenterCropPad", 18, 0, NULL, 2, (const nr_value *[]){&xv, &b}, 1, &y, &err) == NR_OK);
  CHECK(((int32_t *)y.data)[0] == 0 && ((int32_t *)y.data)[1] == 1 && ((int32_t *)y.data)[6] == 0);
  nr_value_free(&y);
}

/* 1.0f is 0x3f800000; int64 -> float (size mismatch) is a shape error. */
NR_TEST(bitcast_float_bits) {
  float x[] = {1.0f};
  nr_value xv = make(NR_DTYPE_FLOAT, 1, (int64_t[]){1}, x), y;
  nr_error err = {0};
  nr_attr at[] = {attr_i("to", NR_DTYPE_INT32)};
  REQUIRE(run("BitCast", 26, 1, at, 1, (const nr_value *[]){&xv}, 1, &y, &err) == NR_OK);
  CHECK(((int32_t *)y.data)[0] == 0x3f800000);
  nr_value_free(&y);
  at[0] = attr_i("to", NR_DTYPE_INT64);
  CHECK(run("BitCast", 26, 1, at, 1, (const nr_value *[]){&xv}, 1, &y, &err) == NR_ERR_SHAPE);
}

/* a = 0: swish 0; a = 1 with b = 2: 2 * sigmoid(1) = 1.4621172. */
NR_TEST(swiglu_values) {
  float a[] = {0, 1}, b[] = {3, 2};
  nr_value av = make(NR_DTYPE_FLOAT, 1, (int64_t[]){2}, a);
  nr_value bv = make(NR_DTYPE_FLOAT, 1, (int64_t[]){2}, b), y;
  nr_error err = {0};
  REQUIRE(run("SwiGLU", 28, 0, NULL, 2, (const nr_value *[]){&av, &bv}, 1, &y, &err) == NR_OK);
  CHECK(near(((float *)y.data)[0], 0) && near(((float *)y.data)[1], 1.4621172));
  nr_value_free(&y);
}

/* 1-D image of 3 with block 2, stride 1: columns [[1,2],[10,20]] (k x l) add up to
 * pixel0 = 1, pixel1 = 2 + 10, pixel2 = 20. */
NR_TEST(col2im_overlap_adds) {
  float x[] = {1, 2, 10, 20};
  int64_t im[] = {3}, bl[] = {2};
  nr_value xv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 2, 2}, x);
  nr_value iv = make(NR_DTYPE_INT64, 1, (int64_t[]){1}, im);
  nr_value bv = make(NR_DTYPE_INT64, 1, (int64_t[]){1}, bl), y;
  nr_error err = {0};
  REQUIRE(run("Col2Im", 18, 0, NULL, 3, (const nr_value *[]){&xv, &iv, &bv}, 1, &y, &err) == NR_OK,
          "%s", err.message);
  float *o = y.data;
  CHECK(near(o[0], 1) && near(o[1], 12) && near(o[2], 20), "%g %g %g", o[0], o[1], o[2]);
  nr_value_free(&y);
}

/* Cache [1, 3, 1] = [1,2,3], update [1, 2, 1] = [8,9] at index 2, circular, axis 1:
 * writes positions 2 and 0 -> [9, 2, 8]. */
NR_TEST(tensorscatter_circular) {
  float p[] = {1, 2, 3}, u[] = {8, 9};
  int64_t wi[] = {2};
  nr_value pv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 3, 1}, p);
  nr_value uv = make(NR_DTYPE_FLOAT, 3, (int64_t[]){1, 2, 1}, u);
  nr_value wv = make(NR_DTYPE_INT64, 1, (int64_t[]){1}, wi), y;
  nr_error err = {0};
  nr_attr at[] = {attr_s("mode", "circular"), attr_i("axis", 1)};
  REQUIRE(run("TensorScatter", 24, 2, at, 3, (const nr_value *[]){&pv, &uv, &wv}, 1, &y,
              &err) == NR_OK, "%s", err.message);
  float *o = y.data;
  CHECK(o[0] == 9 && o[1] == 2 && o[2] == 8, "%g %g %g", o[0], o[1], o[2]);
  nr_value_free(&y);
}

/* The version names the commit the library was built from (cmake/nr_version.cmake):
 * nr_version() carries "-g" and 12 hex digits of a commit that the source tree's git
 * knows (a build older than HEAD names an older commit, still a real one), and the
 * sources hash is 16 hex digits. SKIP without git or outside a checkout. */
NR_TEST(version_names_the_commit) {
  const char *v = nr_version(), *h = nr_version_sources();
  CHECK(v && !strncmp(v, "0.", 2) && strlen(v) < 32, "version '%s' (engines hold 31 chars)", v);
  CHECK(h && strlen(h) == 16 && strspn(h, "0123456789abcdef") == 16, "sources '%s'", h);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --git-dir >/dev/null 2>&1", NR_SOURCE_DIR);
  if (system(cmd) != 0)
    SKIP("no git checkout at %s", NR_SOURCE_DIR);
  const char *g = v ? strstr(v, "-g") : NULL;
  REQUIRE(g && strspn(g + 2, "0123456789abcdef") == 12, "version '%s' names no commit", v);
  snprintf(cmd, sizeof cmd, "git -C '%s' cat-file -e '%.12s^{commit}' 2>/dev/null",
           NR_SOURCE_DIR, g + 2);
  CHECK(system(cmd) == 0, "version '%s': %.12s is not a commit of %s", v, g + 2,
        NR_SOURCE_DIR);
}
