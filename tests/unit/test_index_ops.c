/* test_index_ops.c - unit tests of the index family (ops_index.c, ops_select.c)
 * through nr_ref_exec_node(): hand-computed cases for Slice's clamping and negative
 * steps in both argument forms, the gathers and scatters with every reduction,
 * OneHot, NonZero, Compress and the four outputs of Unique (the examples of the ONNX
 * spec), out-of-range indices failing cleanly, and static folding of small constant
 * Gather/Slice inputs. */
#include "unit.h"
#include "op_test.h"

#include "ir/op.h"
#include "kernels/ref/executor.h"

#include <string.h>

/* ---- helpers -------------------------------------------------------------------- */

static const float seq12[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

/* ---- Slice ------------------------------------------------------------------------- */

static nr_status slice(const nr_value *x, int n, int64_t *st, int64_t *en, int64_t *ax,
                       int64_t *sp, nr_value *y, nr_error *err) {
  nr_value s = i64v(n, st), e = i64v(n, en), a = i64v(n, ax), p = i64v(n, sp);
  return run_one("Slice", 13, 0, NULL, 5,
             (const nr_value *[]){x, &s, &e, ax ? &a : NULL, sp ? &p : NULL}, y, err);
}

NR_TEST(index_slice_steps_and_clamping) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, seq12), y;
  nr_error err = {0};
  /* rows 1.., columns reversed from the end with step -2 */
  REQUIRE(slice(&x, 2, (int64_t[]){1, -1}, (int64_t[]){100, INT64_MIN}, (int64_t[]){0, 1},
                (int64_t[]){1, -2}, &y, &err) == NR_OK,
          "%s", err.message);
  float w1[] = {7, 5, 11, 9};
  CHECK(dims_are(&y, 2, (int64_t[]){2, 2}) && f32_are(&y, 4, w1));
  nr_value_free(&y);
  /* default axes and steps; start beyond the end gives an empty axis */
  REQUIRE(slice(&x, 1, (int64_t[]){5}, (int64_t[]){10}, NULL, NULL, &y, &err) == NR_OK);
  CHECK(dims_are(&y, 2, (int64_t[]){0, 4}));
  nr_value_free(&y);
  /* negative axis, step 3 */
  REQUIRE(slice(&x, 1, (int64_t[]){0}, (int64_t[]){INT64_MAX}, (int64_t[]){-1},
                (int64_t[]){3}, &y, &err) == NR_OK);
  float w3[] = {0, 3, 4, 7, 8, 11};
  CHECK(f32_are(&y, 6, w3));
  nr_value_free(&y);
  CHECK(slice(&x, 1, (int64_t[]){0}, (int64_t[]){1}, (int64_t[]){0}, (int64_t[]){0}, &y,
              &err) == NR_ERR_SHAPE);
  /* opset 1 attribute form */
  nr_attr a[] = {attr_ints("starts", 1, (int64_t[]){1}),
                 attr_ints("ends", 1, (int64_t[]){-1}),
                 attr_ints("axes", 1, (int64_t[]){1})};
  REQUIRE(run_one("Slice", 9, 3, a, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK, "%s",
          err.message);
  float w4[] = {1, 2, 5, 6, 9, 10};
  CHECK(dims_are(&y, 2, (int64_t[]){3, 2}) && f32_are(&y, 6, w4));
  nr_value_free(&y);
}

NR_TEST(index_slice_static_fold) {
  int64_t shape[] = {8, 3, 224, 224};
  nr_value s = i64v(4, shape), st = i64v(1, (int64_t[]){2}), en = i64v(1, (int64_t[]){4});
  nr_value out = {0};
  nr_error err = {0};
  nr_node node = {.name = "n", .op_type = "Slice", .domain = "", .opset = 13};
  nr_op_ctx ctx = {.node = &node,
                   .n_inputs = 3,
                   .inputs = (nr_value *[]){&s, &st, &en},
                   .n_outputs = 1,
                   .outputs = (nr_value *[]){&out},
                   .err = &err};
  const nr_op_def *def = nr_op_find("", "Slice", 13);
  REQUIRE(def && def->infer(&ctx) == NR_OK, "%s", err.message);
  CHECK(out.data && i64_are(&out, 2, (int64_t[]){224, 224}));
  nr_value_free(&out);
  /* ends unknown: the rank stays, the dims do not */
  nr_value unk = {.dtype = NR_DTYPE_INT64, .rank = 1, .dims = {1}};
  ctx.inputs = (nr_value *[]){&s, &st, &unk};
  REQUIRE(def->infer(&ctx) == NR_OK);
  CHECK(dims_are(&out, 1, (int64_t[]){NR_DIM_UNKNOWN}) && !out.data);
}

/* ---- gathers ----------------------------------------------------------------------- */

NR_TEST(index_gather_axis_and_negative) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, seq12), y;
  int32_t ind[] = {-1, 0, 2, 2};
  nr_value vi = make_value(NR_DTYPE_INT32, 2, (int64_t[]){2, 2}, ind);
  nr_attr ax = attr_i("axis", 1);
  nr_error err = {0};
  REQUIRE(run_one("Gather", 13, 1, &ax, 2, (const nr_value *[]){&x, &vi}, &y, &err) == NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 3, (int64_t[]){3, 2, 2}));
  float want[] = {3, 0, 2, 2, 7, 4, 6, 6, 11, 8, 10, 10};
  CHECK(f32_are(&y, 12, want));
  nr_value_free(&y);
  int64_t scalar = 1;
  nr_value vs = make_value(NR_DTYPE_INT64, 0, NULL, &scalar);
  REQUIRE(run_one("Gather", 13, 0, NULL, 2, (const nr_value *[]){&x, &vs}, &y, &err) ==
          NR_OK);
  CHECK(dims_are(&y, 1, (int64_t[]){4}) && f32_are(&y, 4, seq12 + 4));
  nr_value_free(&y);
  ind[1] = 4;
  CHECK(run_one("Gather", 13, 1, &ax, 2, (const nr_value *[]){&x, &vi}, &y, &err) ==
        NR_ERR_RUNTIME);
  CHECK(strstr(err.message, "out of range") != NULL, "%s", err.message);
}

NR_TEST(index_gather_elements_and_nd) {
  float d[] = {1, 2, 3, 4};
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 2}, d), y;
  int64_t ind[] = {0, 0, 1, 0};
  nr_value vi = make_value(NR_DTYPE_INT64, 2, (int64_t[]){2, 2}, ind);
  nr_attr ax = attr_i("axis", 1);
  nr_error err = {0};
  REQUIRE(run_one("GatherElements", 13, 1, &ax, 2, (const nr_value *[]){&x, &vi}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float w[] = {1, 1, 4, 3};
  CHECK(f32_are(&y, 4, w));
  nr_value_free(&y);
  /* GatherND batch_dims=1: data [2,2,2], indices [2,1] -> out [2,2] */
  float d3[] = {0, 1, 2, 3, 4, 5, 6, 7};
  nr_value x3 = make_value(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 2, 2}, d3);
  int64_t nd[] = {1, 0};
  nr_value vnd = make_value(NR_DTYPE_INT64, 2, (int64_t[]){2, 1}, nd);
  nr_attr b1 = attr_i("batch_dims", 1);
  REQUIRE(run_one("GatherND", 13, 1, &b1, 2, (const nr_value *[]){&x3, &vnd}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float w3[] = {2, 3, 4, 5};
  CHECK(dims_are(&y, 2, (int64_t[]){2, 2}) && f32_are(&y, 4, w3));
  nr_value_free(&y);
  /* batch_dims=0, full index tuples: [[0,1,1],[1,0,-1]] -> [3, 5] */
  int64_t full[] = {0, 1, 1, 1, 0, -1};
  nr_value vf = make_value(NR_DTYPE_INT64, 2, (int64_t[]){2, 3}, full);
  REQUIRE(run_one("GatherND", 13, 0, NULL, 2, (const nr_value *[]){&x3, &vf}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float wf[] = {3, 5};
  CHECK(dims_are(&y, 1, (int64_t[]){2}) && f32_are(&y, 2, wf));
  nr_value_free(&y);
}

/* ---- scatters ---------------------------------------------------------------------- */

NR_TEST(index_scatter_elements_reductions) {
  float d[] = {1, 2, 3, 4, 5};
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){1, 5}, d), y;
  int64_t ind[] = {1, 1};
  float upd[] = {1.5f, 3};
  nr_value vi = make_value(NR_DTYPE_INT64, 2, (int64_t[]){1, 2}, ind);
  nr_value vu = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){1, 2}, upd);
  nr_error err = {0};
  struct {
    const char *red;
    float at1;
  } cases[] = {{"none", 3}, {"add", 6.5f}, {"mul", 9}, {"max", 3}, {"min", 1.5f}};
  for (int c = 0; c < 5; c++) {
    nr_attr a[] = {attr_i("axis", 1), attr_s("reduction", cases[c].red)};
    REQUIRE(run_one("ScatterElements", 18, 2, a, 3, (const nr_value *[]){&x, &vi, &vu}, &y,
                &err) == NR_OK,
            "%s: %s", cases[c].red, err.message);
    float want[] = {1, cases[c].at1, 3, 4, 5};
    CHECK(f32_are(&y, 5, want), "%s", cases[c].red);
    nr_value_free(&y);
  }
  /* Scatter (opset 9) is ScatterElements without reduction; negative indices wrap */
  int64_t neg[] = {-1, 0};
  nr_value vn = make_value(NR_DTYPE_INT64, 2, (int64_t[]){1, 2}, neg);
  nr_attr ax = attr_i("axis", 1);
  REQUIRE(run_one("Scatter", 9, 1, &ax, 3, (const nr_value *[]){&x, &vn, &vu}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float ws[] = {3, 2, 3, 4, 1.5f};
  CHECK(f32_are(&y, 5, ws));
  nr_value_free(&y);
  neg[0] = 5;
  CHECK(run_one("Scatter", 9, 1, &ax, 3, (const nr_value *[]){&x, &vn, &vu}, &y, &err) ==
        NR_ERR_RUNTIME);
}

NR_TEST(index_scatter_nd) {
  int32_t d[] = {1, 2, 3, 4, 5, 6, 7, 8};
  nr_value x = make_value(NR_DTYPE_INT32, 2, (int64_t[]){4, 2}, d), y;
  int64_t ind[] = {3, 1, 3};
  int32_t upd[] = {10, 20, 30, 40, 1, 1};
  nr_value vi = make_value(NR_DTYPE_INT64, 2, (int64_t[]){3, 1}, ind);
  nr_value vu = make_value(NR_DTYPE_INT32, 2, (int64_t[]){3, 2}, upd);
  nr_error err = {0};
  nr_attr add = attr_s("reduction", "add");
  REQUIRE(run_one("ScatterND", 18, 1, &add, 3, (const nr_value *[]){&x, &vi, &vu}, &y,
              &err) == NR_OK,
          "%s", err.message);
  int32_t want[] = {1, 2, 33, 44, 5, 6, 18, 29};
  CHECK(y.dtype == NR_DTYPE_INT32 && !memcmp(y.data, want, sizeof want));
  nr_value_free(&y);
  /* element indices, max */
  int64_t el[] = {0, 1, 2, 0};
  int32_t eu[] = {0, 9};
  nr_value ve = make_value(NR_DTYPE_INT64, 2, (int64_t[]){2, 2}, el);
  nr_value veu = make_value(NR_DTYPE_INT32, 1, (int64_t[]){2}, eu);
  nr_attr mx = attr_s("reduction", "max");
  REQUIRE(run_one("ScatterND", 18, 1, &mx, 3, (const nr_value *[]){&x, &ve, &veu}, &y,
              &err) == NR_OK,
          "%s", err.message);
  int32_t wm[] = {1, 2, 3, 4, 9, 6, 7, 8};
  CHECK(!memcmp(y.data, wm, sizeof wm));
  nr_value_free(&y);
}

/* ---- OneHot, NonZero, Compress ----------------------------------------------------- */

NR_TEST(index_onehot_axis_and_range) {
  int64_t ind[] = {0, -1, 7};
  float depth = 3, vals[] = {-1, 5};
  nr_value vi = i64v(3, ind), vd = make_value(NR_DTYPE_FLOAT, 0, NULL, &depth);
  nr_value vv = make_value(NR_DTYPE_FLOAT, 1, (int64_t[]){2}, vals), y;
  nr_error err = {0};
  nr_attr ax = attr_i("axis", 0);
  REQUIRE(run_one("OneHot", 11, 1, &ax, 3, (const nr_value *[]){&vi, &vd, &vv}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  /* y[k][i] = on where ind[i] (wrapped) == k; index 7 is out of range: all off */
  float want[] = {5, -1, -1, -1, -1, -1, -1, 5, -1};
  CHECK(dims_are(&y, 2, (int64_t[]){3, 3}) && f32_are(&y, 9, want));
  nr_value_free(&y);
  REQUIRE(run_one("OneHot", 11, 0, NULL, 3, (const nr_value *[]){&vi, &vd, &vv}, &y, &err) ==
          NR_OK);
  float w2[] = {5, -1, -1, -1, -1, 5, -1, -1, -1};
  CHECK(f32_are(&y, 9, w2));
  nr_value_free(&y);
}

NR_TEST(index_nonzero_and_compress) {
  float d[] = {0, 1.5f, -0.0f, 2, 0, 3};
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, d), y;
  nr_error err = {0};
  REQUIRE(run_one("NonZero", 13, 0, NULL, 1, (const nr_value *[]){&x}, &y, &err) == NR_OK,
          "%s", err.message);
  int64_t want[] = {0, 1, 1, 1, 0, 2};
  CHECK(dims_are(&y, 2, (int64_t[]){2, 3}) && i64_are(&y, 6, want));
  nr_value_free(&y);
  uint8_t cond[] = {0, 1, 1};
  nr_value vc = make_value(NR_DTYPE_BOOL, 1, (int64_t[]){3}, cond);
  nr_attr ax = attr_i("axis", 1);
  REQUIRE(run_one("Compress", 11, 1, &ax, 2, (const nr_value *[]){&x, &vc}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  float wc[] = {1.5f, -0.0f, 0, 3};
  CHECK(dims_are(&y, 2, (int64_t[]){2, 2}) && f32_are(&y, 4, wc));
  nr_value_free(&y);
  /* no axis: flattened, condition shorter than the input */
  REQUIRE(run_one("Compress", 11, 0, NULL, 2, (const nr_value *[]){&x, &vc}, &y, &err) ==
          NR_OK);
  float wf[] = {1.5f, -0.0f};
  CHECK(dims_are(&y, 1, (int64_t[]){2}) && f32_are(&y, 2, wf));
  nr_value_free(&y);
  uint8_t lng[] = {1, 0, 0, 1};
  nr_value vl = make_value(NR_DTYPE_BOOL, 1, (int64_t[]){4}, lng);
  CHECK(run_one("Compress", 11, 1, &ax, 2, (const nr_value *[]){&x, &vl}, &y, &err) ==
        NR_ERR_RUNTIME);
}

/* ---- Unique ------------------------------------------------------------------------ */

static nr_status unique(const nr_value *x, int n_attrs, const nr_attr *attrs, nr_value *y,
                        nr_error *err) {
  memset(y, 0, 4 * sizeof *y);
  return nr_ref_exec_node("Unique", "", 11, n_attrs, attrs, 1, (const nr_value *[]){x}, 4,
                          y, err);
}

static void free4(nr_value *y) {
  for (int i = 0; i < 4; i++)
    nr_value_free(&y[i]);
}

NR_TEST(index_unique_spec_examples) {
  nr_error err = {0};
  nr_value y[4];
  /* Example 1: unsorted */
  float x1[] = {2, 1, 1, 3, 4, 3};
  nr_value v1 = make_value(NR_DTYPE_FLOAT, 1, (int64_t[]){6}, x1);
  nr_attr unsorted = attr_i("sorted", 0);
  REQUIRE(unique(&v1, 1, &unsorted, y, &err) == NR_OK, "%s", err.message);
  CHECK(f32_are(&y[0], 4, (float[]){2, 1, 3, 4}));
  CHECK(i64_are(&y[1], 4, (int64_t[]){0, 1, 3, 4}));
  CHECK(i64_are(&y[2], 6, (int64_t[]){0, 1, 1, 2, 3, 2}));
  CHECK(i64_are(&y[3], 4, (int64_t[]){1, 2, 2, 1}));
  free4(y);
  /* Example 2: sorted, flattened */
  int32_t x2[] = {1, 3, 2, 3};
  nr_value v2 = make_value(NR_DTYPE_INT32, 2, (int64_t[]){2, 2}, x2);
  REQUIRE(unique(&v2, 0, NULL, y, &err) == NR_OK, "%s", err.message);
  CHECK(!memcmp(y[0].data, (int32_t[]){1, 2, 3}, 12) && y[0].dims[0] == 3);
  CHECK(i64_are(&y[1], 3, (int64_t[]){0, 2, 1}));
  CHECK(i64_are(&y[2], 4, (int64_t[]){0, 2, 1, 2}));
  CHECK(i64_are(&y[3], 3, (int64_t[]){1, 1, 2}));
  free4(y);
  /* Example 4: axis 1 of [2, 4, 2] */
  float x4[] = {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1};
  nr_value v4 = make_value(NR_DTYPE_FLOAT, 3, (int64_t[]){2, 4, 2}, x4);
  nr_attr ax = attr_i("axis", 1);
  REQUIRE(unique(&v4, 1, &ax, y, &err) == NR_OK, "%s", err.message);
  float w4[] = {0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1};
  CHECK(dims_are(&y[0], 3, (int64_t[]){2, 3, 2}) && f32_are(&y[0], 12, w4));
  CHECK(i64_are(&y[1], 3, (int64_t[]){1, 0, 2}));
  CHECK(i64_are(&y[2], 4, (int64_t[]){1, 0, 2, 0}));
  CHECK(i64_are(&y[3], 3, (int64_t[]){2, 1, 1}));
  free4(y);
  /* empty input */
  nr_value v0 = make_value(NR_DTYPE_FLOAT, 1, (int64_t[]){0}, seq12);
  REQUIRE(unique(&v0, 0, NULL, y, &err) == NR_OK, "%s", err.message);
  CHECK(dims_are(&y[0], 1, (int64_t[]){0}) && dims_are(&y[2], 1, (int64_t[]){0}));
  free4(y);
}

/* ---- 0-sized tensors and static inference ------------------------------------------ */

NR_TEST(index_zero_sized_tensors) {
  nr_value x = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){3, 4}, seq12), y;
  nr_error err = {0};
  nr_value none = make_value(NR_DTYPE_INT64, 1, (int64_t[]){0}, seq12);
  REQUIRE(run_one("Gather", 13, 0, NULL, 2, (const nr_value *[]){&x, &none}, &y, &err) ==
              NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 2, (int64_t[]){0, 4}));
  nr_value_free(&y);
  float zeros[4] = {0};
  nr_value z = make_value(NR_DTYPE_FLOAT, 1, (int64_t[]){4}, zeros);
  REQUIRE(run_one("NonZero", 13, 0, NULL, 1, (const nr_value *[]){&z}, &y, &err) == NR_OK);
  CHECK(dims_are(&y, 2, (int64_t[]){1, 0}));
  nr_value_free(&y);
  nr_value e = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){0, 4}, seq12);
  REQUIRE(slice(&e, 1, (int64_t[]){1}, (int64_t[]){3}, (int64_t[]){1}, (int64_t[]){1}, &y,
                &err) == NR_OK,
          "%s", err.message);
  CHECK(dims_are(&y, 2, (int64_t[]){0, 2}));
  nr_value_free(&y);
  nr_value ei = make_value(NR_DTYPE_INT64, 2, (int64_t[]){0, 4}, seq12);
  nr_value eu = make_value(NR_DTYPE_FLOAT, 2, (int64_t[]){0, 4}, seq12);
  REQUIRE(run_one("ScatterElements", 13, 0, NULL, 3, (const nr_value *[]){&x, &ei, &eu}, &y,
              &err) == NR_OK,
          "%s", err.message);
  CHECK(f32_are(&y, 12, seq12));
  nr_value_free(&y);
}

/* Static inference through the op row; inputs keep their data. */
static nr_status infer(const char *op, int opset, int n_attrs, nr_attr *attrs, int n_in,
                       nr_value **ins, int n_out, nr_value *outs, nr_error *err) {
  nr_node node = {.name = "n",
                  .op_type = (char *)op,
                  .domain = "",
                  .opset = opset,
                  .n_attrs = n_attrs,
                  .attrs = attrs};
  nr_value *out_ptrs[4];
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

NR_TEST(index_static_infer) {
  nr_error err = {0};
  nr_value out[4];
  /* Shape -> Gather: a constant shape vector and a scalar index fold to a scalar */
  int64_t shape[] = {8, 3, 224, 224}, two = 2;
  nr_value s = i64v(4, shape), k = make_value(NR_DTYPE_INT64, 0, NULL, &two);
  REQUIRE(infer("Gather", 13, 0, NULL, 2, (nr_value *[]){&s, &k}, 1, out, &err) == NR_OK,
          "%s", err.message);
  CHECK(out[0].rank == 0 && out[0].data && *(int64_t *)out[0].data == 224);
  nr_value_free(&out[0]);
  /* unknown data: exact shapes where they do not depend on values */
  nr_value x = {.dtype = NR_DTYPE_FLOAT, .rank = 3, .dims = {2, NR_DIM_UNKNOWN, 5}};
  nr_value ind = {.dtype = NR_DTYPE_INT32, .rank = 2, .dims = {4, 6}};
  nr_attr ax = attr_i("axis", 1);
  REQUIRE(infer("Gather", 13, 1, &ax, 2, (nr_value *[]){&x, &ind}, 1, out, &err) ==
          NR_OK);
  CHECK(dims_are(&out[0], 4, (int64_t[]){2, 4, 6, 5}) && !out[0].data);
  REQUIRE(infer("Unique", 11, 1, &ax, 1, (nr_value *[]){&x}, 4, out, &err) == NR_OK);
  CHECK(dims_are(&out[0], 3, (int64_t[]){2, NR_DIM_UNKNOWN, 5}));
  CHECK(dims_are(&out[2], 1, (int64_t[]){NR_DIM_UNKNOWN}) &&
        out[3].dtype == NR_DTYPE_INT64);
  REQUIRE(infer("NonZero", 13, 0, NULL, 1, (nr_value *[]){&x}, 1, out, &err) == NR_OK);
  CHECK(dims_are(&out[0], 2, (int64_t[]){3, NR_DIM_UNKNOWN}));
  nr_value bad = {.dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {4, 6}};
  CHECK(infer("Gather", 13, 1, &ax, 2, (nr_value *[]){&x, &bad}, 1, out, &err) ==
        NR_ERR_SHAPE);
  int64_t depth = 10;
  nr_value vd = make_value(NR_DTYPE_INT64, 0, NULL, &depth);
  nr_value vals = {.dtype = NR_DTYPE_FLOAT, .rank = 1, .dims = {2}};
  nr_attr oh = attr_i("axis", 1);
  REQUIRE(infer("OneHot", 11, 1, &oh, 3, (nr_value *[]){&ind, &vd, &vals}, 1, out,
                &err) == NR_OK,
          "%s", err.message);
  CHECK(dims_are(&out[0], 3, (int64_t[]){4, 10, 6}));
}
