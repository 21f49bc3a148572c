/* test_cpu_deconv.c - the ConvTranspose tactics (onednn_deconv, nr_f32_deconv_patch)
 * against the reference executor over a table of windows: kernels 1 to 4, strides 1 to 3, pads,
 * output_padding, dilation, output_shape and auto_pad, groups 1, 2 and depthwise,
 * with and without bias, batch 1 and 2, odd sizes, an end pad that output_padding
 * makes negative; and a W that is not a constant, which it leaves to the reference. Uses
 * the one-step harness of cpuop.h with W and B as constants. */
#include "cpuop.h"
#include "rng.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

typedef struct dcase {
  int64_t n, c, h, w, m, k[2], s[2], d[2], pads[4], op[2];
  int group;
  bool bias;
  const char *auto_pad; /* NULL: explicit pads */
  bool shape;           /* output_shape given instead (the computed output) */
  bool expect;
} dcase;

static nr_attr ints(const char *name, int n, const int64_t *v) {
  return (nr_attr){
      .name = (char *)name, .type = NR_ATTR_INTS, .n = (size_t)n, .ints = (int64_t *)v};
}

/* clang-format off */
static const dcase CASES[] = {
    /* n  c  h  w  m  k      s      d      pads          op   grp bias */
    {1, 3, 5, 7, 4, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, NULL, false, true},
    {1, 8, 4, 4, 5, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true, NULL, false, true},
    {2, 4, 6, 5, 6, {4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, 1, false, NULL, false, true},
    {1, 5, 3, 4, 3, {3, 3}, {3, 3}, {1, 1}, {0, 1, 2, 0}, {2, 0}, 1, true, NULL, false, true},
    {1, 3, 7, 6, 2, {3, 2}, {1, 1}, {1, 1}, {1, 0, 1, 0}, {0, 0}, 1, true, NULL, false, true},
    {1, 4, 5, 5, 4, {3, 3}, {1, 2}, {2, 2}, {0, 0, 0, 0}, {0, 1}, 1, true, NULL, false, true},
    {1, 4, 5, 6, 6, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true, NULL, false, true},
    {1, 6, 5, 6, 6, {4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, 6, true, NULL, false, true},
    {2, 3, 4, 5, 3, {1, 1}, {2, 3}, {1, 1}, {0, 0, 0, 0}, {1, 2}, 1, false, NULL, false, true},
    {1, 17, 9, 11, 13, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, NULL, false, true},
    {1, 3, 4, 5, 2, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, "SAME_UPPER", false, true},
    {1, 3, 4, 5, 2, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, "SAME_LOWER", false, true},
    {1, 3, 4, 5, 2, {3, 3}, {2, 2}, {1, 1}, {1, 1, 0, 0}, {1, 1}, 1, false, NULL, true, true},
    /* patches: kernel = stride, no padding (nr_f32_deconv_patch too) */
    {2, 5, 3, 7, 3, {3, 3}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, false, NULL, false, true},
    {1, 9, 5, 4, 7, {2, 3}, {2, 3}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, NULL, false, true},
    {1, 24, 40, 40, 24, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, NULL, false, true},
    {1, 24, 33, 31, 1, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, NULL, false, true},
    {1, 4, 3, 5, 2, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, "SAME_UPPER", false, true},
    /* output_padding past the end pad: a negative end pad (outputs only the bias) */
    {1, 3, 4, 4, 2, {3, 3}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 1, true, NULL, false, true},
    /* not 2-D float32 with a constant W: the reference's */
    {1, 3, 4, 4, 2, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, 1, true, NULL, false, false},
};
/* clang-format on */

/* Output size of spatial dim i (explicit pads, or SAME: in * stride). */
static int64_t out_dim(const dcase *dc, int i, int64_t in) {
  if (dc->auto_pad)
    return in * dc->s[i];
  return dc->s[i] * (in - 1) + dc->op[i] + (dc->k[i] - 1) * dc->d[i] + 1 - dc->pads[i] -
         dc->pads[2 + i];
}

/* Whether nr_f32_deconv_patch takes the case: group 1, kernel = stride, no pads. */
static bool is_patch(const dcase *dc) {
  bool flat = dc->auto_pad || (!dc->pads[0] && !dc->pads[1] && !dc->pads[2] &&
                               !dc->pads[3] && !dc->op[0] && !dc->op[1]);
  return dc->expect && dc->group == 1 && dc->k[0] == dc->s[0] && dc->k[1] == dc->s[1] &&
         dc->d[0] == 1 && dc->d[1] == 1 && flat;
}

static void check_case(nr_test_state *t, const dcase *dc, const char *id, bool expect,
                       uint64_t seed, nr_threadpool *pool) {
  nr_rng r = nr_rng_make(seed);
  int64_t xd[4] = {dc->n, dc->c, dc->h, dc->w};
  int64_t wd[4] = {dc->c, dc->m / dc->group, dc->k[0], dc->k[1]}, bd = dc->m;
  int64_t yd[4] = {dc->n, dc->m, out_dim(dc, 0, dc->h), out_dim(dc, 1, dc->w)};
  int64_t nx = xd[0] * xd[1] * xd[2] * xd[3], nw = wd[0] * wd[1] * wd[2] * wd[3];
  int64_t ny = yd[0] * yd[1] * yd[2] * yd[3], shape[2] = {yd[2], yd[3]};
  float *x = nr_rng_floats(&r, nx, -1, 1), *w = nr_rng_floats(&r, nw, -1, 1),
        *b = nr_rng_floats(&r, bd, -1, 1);
  nr_value xv = cpuop_fval(4, xd, x), wv = cpuop_fval(4, wd, w),
           bv = cpuop_fval(1, &bd, b);
  nr_value yv = cpuop_fval(4, yd, NULL);
  const nr_value *ins[3] = {&xv, &wv, dc->bias ? &bv : NULL};
  bool consts[3] = {false, dc->expect, true};
  nr_attr attrs[8];
  int na = 0;
  attrs[na++] = ints("kernel_shape", 2, dc->k);
  attrs[na++] = ints("strides", 2, dc->s);
  attrs[na++] = ints("dilations", 2, dc->d);
  attrs[na++] = (nr_attr){.name = "group", .type = NR_ATTR_INT, .i = dc->group};
  if (dc->auto_pad)
    attrs[na++] = (nr_attr){.name = "auto_pad",
                            .type = NR_ATTR_STRING,
                            .s = (char *)dc->auto_pad,
                            .s_len = strlen(dc->auto_pad)};
  else if (dc->shape)
    attrs[na++] = ints("output_shape", 2, shape);
  else
    attrs[na++] = ints("pads", 4, dc->pads),
    attrs[na++] = ints("output_padding", 2, dc->op);
  cpuop *o = cpuop_new();
  REQUIRE(!cpuop_init(o, "ConvTranspose", 11, na, attrs, dc->bias ? 3 : 2, ins, consts, 1,
                      &yv, ""));
  bool sup = cpuop_supports(o, id);
  CHECK(sup == expect, "%s seed=%llu: supports %d, expected %d", id,
        (unsigned long long)seed, sup, expect);
  if (sup) {
    bool g;
    nr_value ref;
    nr_status st = cpuop_run(o, pool, &g);
    CHECK(!st && g, "%s seed=%llu: run %d guards %d", id, (unsigned long long)seed, st, g);
    REQUIRE(!cpuop_ref(o, na, attrs, &ref));
    CHECK(nr_value_count(&ref) == ny, "seed=%llu: reference has %lld elements, not %lld",
          (unsigned long long)seed, (long long)nr_value_count(&ref), (long long)ny);
    double e = cpuop_err(cpuop_out(o, 0), ref.data, ny, 1e-5, 1e-4);
    CHECK(e <= 1.0, "%s seed=%llu case c=%lld k=%lld s=%lld g=%d: %.3g of tolerance", id,
          (unsigned long long)seed, (long long)dc->c, (long long)dc->k[0],
          (long long)dc->s[0], dc->group, e);
    nr_value_free(&ref);
  }
  cpuop_free(o);
  free(o);
  free(x), free(w), free(b);
}

NR_TEST(cpu_deconv) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    check_case(t, &CASES[i], "onednn_deconv", CASES[i].expect, 7000 + i, pool);
    check_case(t, &CASES[i], "nr_f32_deconv_patch", is_patch(&CASES[i]), 7000 + i, pool);
  }
  nr_threadpool_destroy(pool);
}
