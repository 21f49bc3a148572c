/* test_quant.c - unit tests of QuantizeLinear, DequantizeLinear and
 * DynamicQuantizeLinear: hand-computed cases for rounding (half to even) and
 * saturation, per-axis and blocked granularity checked against loops written here,
 * and the shape errors a wrong scale must raise. */
#include "kernels/ref/executor.h"
#include "unit.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static nr_value qv(nr_dtype t, int rank, const int64_t *dims, void *data) {
  nr_value v = {.dtype = t, .rank = rank, .data = data};
  for (int i = 0; i < rank; i++)
    v.dims[i] = dims[i];
  return v;
}

static nr_attr qint(const char *name, int64_t i) {
  return (nr_attr){.name = (char *)name, .type = NR_ATTR_INT, .i = i};
}

NR_TEST(quant_per_tensor_rounds_half_even_and_saturates) {
  float x[8] = {0.0f, 2.5f, 3.5f, -2.5f, 1000.0f, -1000.0f, 7.0f, 0.49f};
  float s = 1.0f;
  uint8_t zp = 10;
  /* x/1 rounded half-to-even, +10, clamped to [0,255]. */
  uint8_t want[8] = {10, 12, 14, 8, 255, 0, 17, 10};
  nr_value vx = qv(NR_DTYPE_FLOAT, 1, (int64_t[]){8}, x);
  nr_value vs = qv(NR_DTYPE_FLOAT, 0, NULL, &s);
  nr_value vz = qv(NR_DTYPE_UINT8, 0, NULL, &zp);
  nr_value out = {0};
  nr_error err = {0};
  nr_status st = nr_ref_exec_node("QuantizeLinear", "", 21, 0, NULL, 3,
                                  (const nr_value *[]){&vx, &vs, &vz}, 1, &out, &err);
  REQUIRE(st == NR_OK, "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_UINT8 && out.rank == 1 && out.dims[0] == 8);
  for (int i = 0; i < 8; i++)
    CHECK(((uint8_t *)out.data)[i] == want[i], "i=%d got %d want %d", i,
          ((uint8_t *)out.data)[i], want[i]);
  nr_value_free(&out);
}

NR_TEST(quant_default_uint8_and_output_dtype_int16) {
  float x[3] = {-4.0f, 3.0f, 100000.0f};
  float s = 2.0f;
  nr_value vx = qv(NR_DTYPE_FLOAT, 1, (int64_t[]){3}, x);
  nr_value vs = qv(NR_DTYPE_FLOAT, 0, NULL, &s);
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("QuantizeLinear", "", 13, 0, NULL, 2,
                           (const nr_value *[]){&vx, &vs}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_UINT8);
  /* -2 -> 0, 1.5 -> 2, 50000 -> 255 */
  CHECK(((uint8_t *)out.data)[0] == 0 && ((uint8_t *)out.data)[1] == 2 &&
        ((uint8_t *)out.data)[2] == 255);
  nr_value_free(&out);
  nr_attr a = qint("output_dtype", NR_DTYPE_INT16);
  REQUIRE(nr_ref_exec_node("QuantizeLinear", "", 21, 1, &a, 2,
                           (const nr_value *[]){&vx, &vs}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  REQUIRE(out.dtype == NR_DTYPE_INT16);
  int16_t *y = out.data;
  CHECK(y[0] == -2 && y[1] == 2 && y[2] == 32767, "%d %d %d", y[0], y[1], y[2]);
  nr_value_free(&out);
}

NR_TEST(quant_per_axis_and_blocked_match_loops) {
  enum { A = 2, B = 5, C = 3 };
  float x[A * B * C];
  for (int i = 0; i < A * B * C; i++)
    x[i] = (float)((i * 37) % 23) - 11.0f + 0.25f * (float)(i % 3);
  float s_axis[B] = {0.5f, 1.0f, 2.0f, 0.25f, 4.0f};
  int8_t z_axis[B] = {0, 1, -2, 3, -4};
  nr_value vx = qv(NR_DTYPE_FLOAT, 3, (int64_t[]){A, B, C}, x);
  nr_value vs = qv(NR_DTYPE_FLOAT, 1, (int64_t[]){B}, s_axis);
  nr_value vz = qv(NR_DTYPE_INT8, 1, (int64_t[]){B}, z_axis);
  nr_value out = {0};
  nr_error err = {0};
  nr_attr ax = qint("axis", 1);
  REQUIRE(nr_ref_exec_node("QuantizeLinear", "", 13, 1, &ax, 3,
                           (const nr_value *[]){&vx, &vs, &vz}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++) {
        int i = (a * B + b) * C + c;
        double q = nearbyint((double)(x[i] / s_axis[b])) + z_axis[b];
        q = q < -128 ? -128 : q > 127 ? 127 : q;
        CHECK(((int8_t *)out.data)[i] == (int8_t)q, "per-axis i=%d", i);
      }
  nr_value_free(&out);
  /* Blocked along axis 1 with block 2: scale shape (A, 3, C); the last block has 1. */
  float s_blk[A * 3 * C];
  uint8_t z_blk[A * 3 * C];
  for (int i = 0; i < A * 3 * C; i++) {
    s_blk[i] = 0.5f * (float)(1 + i % 4);
    z_blk[i] = (uint8_t)(100 + i);
  }
  nr_value bs = qv(NR_DTYPE_FLOAT, 3, (int64_t[]){A, 3, C}, s_blk);
  nr_value bz = qv(NR_DTYPE_UINT8, 3, (int64_t[]){A, 3, C}, z_blk);
  nr_attr at[2] = {qint("axis", 1), qint("block_size", 2)};
  REQUIRE(nr_ref_exec_node("QuantizeLinear", "", 21, 2, at, 3,
                           (const nr_value *[]){&vx, &bs, &bz}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++) {
        int i = (a * B + b) * C + c, k = (a * 3 + b / 2) * C + c;
        double q = nearbyint((double)(x[i] / s_blk[k])) + z_blk[k];
        q = q < 0 ? 0 : q > 255 ? 255 : q;
        CHECK(((uint8_t *)out.data)[i] == (uint8_t)q, "blocked i=%d", i);
      }
  nr_value_free(&out);
}

NR_TEST(dequant_per_axis_int8_and_int32) {
  int8_t x[6] = {-128, 0, 127, 5, -5, 1};
  float s[3] = {0.5f, 2.0f, -1.0f};
  int8_t z[3] = {-128, 1, 0};
  nr_value vx = qv(NR_DTYPE_INT8, 2, (int64_t[]){2, 3}, x);
  nr_value vs = qv(NR_DTYPE_FLOAT, 1, (int64_t[]){3}, s);
  nr_value vz = qv(NR_DTYPE_INT8, 1, (int64_t[]){3}, z);
  nr_value out = {0};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("DequantizeLinear", "", 13, 0, NULL, 3,
                           (const nr_value *[]){&vx, &vs, &vz}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  /* axis defaults to 1: column j uses s[j], z[j]. */
  float want[6] = {0.0f, -2.0f, -127.0f, 66.5f, -12.0f, -1.0f};
  REQUIRE(out.dtype == NR_DTYPE_FLOAT);
  for (int i = 0; i < 6; i++)
    CHECK(((float *)out.data)[i] == want[i], "i=%d got %g", i, ((float *)out.data)[i]);
  nr_value_free(&out);
  int32_t xi[2] = {2000000000, -7};
  float si = 0.5f;
  nr_value vxi = qv(NR_DTYPE_INT32, 1, (int64_t[]){2}, xi);
  nr_value vsi = qv(NR_DTYPE_FLOAT, 0, NULL, &si);
  REQUIRE(nr_ref_exec_node("DequantizeLinear", "", 13, 0, NULL, 2,
                           (const nr_value *[]){&vxi, &vsi}, 1, &out, &err) == NR_OK,
          "%s", err.message);
  CHECK(((float *)out.data)[0] == 1e9f && ((float *)out.data)[1] == -3.5f);
  nr_value_free(&out);
}

NR_TEST(quant_rejects_bad_scale_shapes) {
  float x[6] = {0}, s[4] = {1, 1, 1, 1};
  nr_value vx = qv(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, x);
  nr_value vs = qv(NR_DTYPE_FLOAT, 1, (int64_t[]){4}, s);
  nr_value out = {0};
  nr_error err = {0};
  CHECK(nr_ref_exec_node("QuantizeLinear", "", 13, 0, NULL, 2,
                         (const nr_value *[]){&vx, &vs}, 1, &out, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "QuantizeLinear") != NULL, "%s", err.message);
  int8_t xq[6] = {0};
  nr_value vq = qv(NR_DTYPE_INT8, 2, (int64_t[]){2, 3}, xq);
  nr_value vb = qv(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, s);
  nr_attr at[2] = {qint("axis", 1), qint("block_size", 1)};
  CHECK(nr_ref_exec_node("DequantizeLinear", "", 21, 2, at, 2,
                         (const nr_value *[]){&vq, &vb}, 1, &out, &err) == NR_ERR_SHAPE,
        "%s", err.message);
  CHECK(strstr(err.message, "block") != NULL, "%s", err.message);
  nr_value_free(&out);
}

NR_TEST(dynamic_quantize_matches_formula) {
  float x[6] = {0.0f, 2.0f, -3.0f, -2.5f, 1.34f, 0.5f};
  nr_value vx = qv(NR_DTYPE_FLOAT, 1, (int64_t[]){6}, x);
  nr_value out[3] = {{0}};
  nr_error err = {0};
  REQUIRE(nr_ref_exec_node("DynamicQuantizeLinear", "", 11, 0, NULL, 1,
                           (const nr_value *[]){&vx}, 3, out, &err) == NR_OK,
          "%s", err.message);
  float scale = (2.0f - -3.0f) / 255.0f;
  float zp = nearbyintf(0.0f - -3.0f / scale); /* 153 */
  CHECK(fabsf(((float *)out[1].data)[0] - scale) < 1e-7f);
  CHECK(((uint8_t *)out[2].data)[0] == (uint8_t)zp && zp == 153.0f);
  for (int i = 0; i < 6; i++) {
    float q = nearbyintf(x[i] / scale) + zp;
    q = q < 0 ? 0 : q > 255 ? 255 : q;
    CHECK(((uint8_t *)out[0].data)[i] == (uint8_t)q, "i=%d", i);
  }
  CHECK(((uint8_t *)out[0].data)[2] == 0 && ((uint8_t *)out[0].data)[1] == 255);
  for (int i = 0; i < 3; i++)
    nr_value_free(&out[i]);
}
