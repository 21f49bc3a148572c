/* test_pool_nan.c - MaxPool kernels (PLAIN and NHWC, portable, AVX2 and AVX-512) on
 * NaN and -inf inputs, against the reference executor.
 *
 * Key decision: walk the NaN through a window instead of scattering it. For a few
 * chosen outputs (the top-left one, whose window overhangs the padding; one in the
 * middle; the last of a row, in the vector kernels' masked tail; the bottom-right
 * corner) every tap of the window is made NaN in turn, then all taps but one, then all
 * of them, then all of them -inf; after each change the whole output is compared
 * bit for bit with the reference (NaN equals NaN), so the rule "a NaN tap is skipped,
 * NaN only when every tap inside the input is NaN" is checked at the first, middle,
 * last and padding-edge positions of the window and on the neighbours sharing the
 * tap. Outputs are written between guard floats that must survive. */
#include "kernels/cpu/norm/norm.h"
#include "kernels/cpu/norm/pool_nhwc.h"
#include "plan/tactic.h"
#include "op_test.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16
static const float SENTINEL = -1234.5f;

typedef struct nan_case {
  int64_t h, w, k, s, d, pad, ceil;
} nan_case;

/* Around the 8- and 16-wide vectors and the squeezenet / resnet pools (3x3/2, ceil). */
static const nan_case CASES[] = {
    {9, 17, 3, 2, 1, 0, 1}, {8, 9, 3, 2, 1, 1, 0}, {7, 13, 3, 1, 1, 1, 0},
    {6, 24, 2, 2, 1, 0, 0}, {9, 19, 3, 2, 2, 2, 0}, {5, 37, 3, 1, 1, 0, 1},
    {5, 70, 3, 2, 1, 1, 0}, {4, 40, 3, 1, 1, 2, 0},
};

static bool same(float a, float b) {
  return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

typedef struct pool_ctx {
  const nan_case *k;
  int64_t c;        /* channels */
  nr_pool2d p;
  int64_t oh, ow;
  float *x, *xh;    /* [c, h, w] and its NHWC copy */
  float *y;         /* the kernel's output + GUARD */
} pool_ctx;

/* Runs every kernel on ctx->x and compares with the reference; what names the case. */
static void compare(nr_test_state *t, pool_ctx *q, const nr_attr *at, const char *what) {
  const nan_case *k = q->k;
  int64_t xd[4] = {1, q->c, k->h, k->w}, hw = k->h * k->w, ohw = q->oh * q->ow;
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, q->x), want;
  nr_error err = {0};
  REQUIRE(!run_one("MaxPool", 12, 5, at, 1, (const nr_value *[]){&xv}, &want, &err), "%s",
          err.message);
  for (int64_t ci = 0; ci < q->c; ci++)
    for (int64_t i = 0; i < hw; i++)
      q->xh[i * q->c + ci] = q->x[ci * hw + i];
  bool avx2 = (nr_cpu_isa() & NR_ISA_AVX2) != 0, avx512 = (nr_cpu_isa() & NR_ISA_AVX512) != 0;
  for (int kern = 0; kern < 5; kern++) {
    if ((kern % 2 == 1 && !avx2) || (kern == 4 && !avx512))
      continue;
    bool nhwc = kern == 2 || kern == 3;
    int64_t yn = q->c * ohw;
    for (int64_t i = 0; i < yn + GUARD; i++)
      q->y[i] = SENTINEL;
    if (!nhwc) {
      for (int64_t ci = 0; ci < q->c; ci++)
        (kern == 4   ? nr_f32_pool2d__avx512
         : kern == 1 ? nr_f32_pool2d__avx2
                     : nr_f32_pool2d__portable)(&q->p, q->x + ci * hw, k->h, k->w,
                                                q->y + ci * ohw, q->oh, q->ow);
    } else {
      nr_pool_nhwc_geom g = {k->h, k->w, q->c, q->oh, q->ow};
      (kern == 3 ? nr_f32_pool2d_nhwc__avx2 : nr_f32_pool2d_nhwc__portable)(
          &q->p, &g, q->xh, q->y, 0, q->oh);
    }
    const float *wd = want.data;
    int64_t bad = -1;
    float got = 0;
    for (int64_t ci = 0; ci < q->c && bad < 0; ci++)
      for (int64_t o = 0; o < ohw && bad < 0; o++) {
        got = nhwc ? q->y[o * q->c + ci] : q->y[ci * ohw + o];
        if (!same(got, wd[ci * ohw + o]))
          bad = ci * ohw + o;
      }
    static const char *const NAMES[] = {"plain portable", "plain avx2", "nhwc portable",
                                        "nhwc avx2", "plain avx512"};
    CHECK(bad < 0, "%s, %dx%d k%d s%d d%d pad%d ceil%d, %s: y[%lld] = %g, want %g",
          NAMES[kern], (int)k->h, (int)k->w, (int)k->k, (int)k->s, (int)k->d, (int)k->pad,
          (int)k->ceil, what, (long long)bad, bad >= 0 ? got : 0.0,
          bad >= 0 ? wd[bad] : 0.0);
    bool guard = true;
    for (int64_t i = yn; i < yn + GUARD; i++)
      guard &= q->y[i] == SENTINEL;
    CHECK(guard, "%s, %s: guard overwritten", NAMES[kern], what);
  }
  nr_value_free(&want);
}

/* The input offsets (within one plane) of output (oy, ox)'s taps inside the input. */
static int window_taps(const pool_ctx *q, int64_t oy, int64_t ox, int64_t *taps) {
  const nan_case *k = q->k;
  int n = 0;
  for (int64_t ky = 0; ky < k->k; ky++)
    for (int64_t kx = 0; kx < k->k; kx++) {
      int64_t iy = oy * k->s - k->pad + ky * k->d, ix = ox * k->s - k->pad + kx * k->d;
      if (iy >= 0 && iy < k->h && ix >= 0 && ix < k->w)
        taps[n++] = iy * k->w + ix;
    }
  return n;
}

/* Sets plane offset i to v in every channel. */
static void put(pool_ctx *q, int64_t i, float v) {
  for (int64_t ci = 0; ci < q->c; ci++)
    q->x[ci * q->k->h * q->k->w + i] = v;
}

static void run_case(nr_test_state *t, const nan_case *k, int64_t c, unsigned seed) {
  int64_t ks[2] = {k->k, k->k}, st[2] = {k->s, k->s}, dl[2] = {k->d, k->d},
          pd[4] = {k->pad, k->pad, k->pad, k->pad};
  nr_attr at[5] = {attr_ints("kernel_shape", 2, ks), attr_ints("strides", 2, st),
                   attr_ints("dilations", 2, dl), attr_ints("pads", 4, pd),
                   attr_i("ceil_mode", k->ceil)};
  int64_t hw = k->h * k->w, xd[4] = {1, c, k->h, k->w};
  pool_ctx q = {.k = k, .c = c};
  q.x = random_floats(c * hw, &seed);
  float *orig = malloc(sizeof(float) * (size_t)(c * hw));
  memcpy(orig, q.x, sizeof(float) * (size_t)(c * hw));
  q.xh = malloc(sizeof(float) * (size_t)(c * hw));
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, q.x), shape;
  nr_error err = {0};
  REQUIRE(!run_one("MaxPool", 12, 5, at, 1, (const nr_value *[]){&xv}, &shape, &err), "%s",
          err.message);
  nr_node node = {.name = "pool", .op_type = "MaxPool", .domain = "", .opset = 12,
                  .n_attrs = 5, .attrs = at};
  bool ok = nr_pool2d_of_node(&node, xd, shape.dims, &q.p);
  q.oh = shape.dims[2], q.ow = shape.dims[3];
  nr_value_free(&shape);
  CHECK(ok, "window of %dx%d k%d not resolved", (int)k->h, (int)k->w, (int)k->k);
  q.y = malloc(sizeof(float) * (size_t)(c * q.oh * q.ow + GUARD));
  int64_t outs[4][2] = {
      {0, 0}, {q.oh / 2, q.ow / 2}, {q.oh / 2, q.ow - 1}, {q.oh - 1, q.ow - 1}};
  char what[96];
  for (int o = 0; ok && o < 4; o++) {
    int64_t taps[64];
    int n = window_taps(&q, outs[o][0], outs[o][1], taps);
    for (int i = 0; i < n; i++) { /* one NaN, at each tap */
      put(&q, taps[i], NAN);
      snprintf(what, sizeof what, "output (%d,%d), NaN at tap %d of %d", (int)outs[o][0],
               (int)outs[o][1], i, n);
      compare(t, &q, at, what);
      put(&q, taps[i], orig[taps[i]]);
    }
    for (int keep = 0; keep < n; keep++) { /* every tap NaN but one */
      for (int i = 0; i < n; i++)
        put(&q, taps[i], i == keep ? orig[taps[i]] : NAN);
      snprintf(what, sizeof what, "output (%d,%d), all NaN but tap %d of %d",
               (int)outs[o][0], (int)outs[o][1], keep, n);
      compare(t, &q, at, what);
    }
    for (int i = 0; i < n; i++) /* every tap NaN: NaN out */
      put(&q, taps[i], NAN);
    snprintf(what, sizeof what, "output (%d,%d), all %d taps NaN", (int)outs[o][0],
             (int)outs[o][1], n);
    compare(t, &q, at, what);
    for (int i = 0; i < n; i++) /* every tap -inf but one NaN: -inf out */
      put(&q, taps[i], i == n / 2 ? NAN : -INFINITY);
    snprintf(what, sizeof what, "output (%d,%d), -inf taps and one NaN", (int)outs[o][0],
             (int)outs[o][1]);
    compare(t, &q, at, what);
    memcpy(q.x, orig, sizeof(float) * (size_t)(c * hw));
  }
  free(q.y);
  free(q.xh);
  free(orig);
  free(q.x);
}

NR_TEST(pool_nan_every_window_position) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    for (int64_t c = 1; c <= 41; c += 40) /* 1 channel; 41 = 32 + 8 + a masked lane */
      run_case(t, &CASES[i], c, 77u + 3u * (unsigned)i + (unsigned)c);
}

/* A whole plane of NaN and one of -inf, with no number anywhere. */
NR_TEST(pool_nan_whole_plane) {
  static const nan_case k = {7, 11, 3, 2, 1, 1, 1};
  int64_t ks[2] = {3, 3}, st[2] = {2, 2}, dl[2] = {1, 1}, pd[4] = {1, 1, 1, 1};
  nr_attr at[5] = {attr_ints("kernel_shape", 2, ks), attr_ints("strides", 2, st),
                   attr_ints("dilations", 2, dl), attr_ints("pads", 4, pd),
                   attr_i("ceil_mode", 1)};
  int64_t xd[4] = {1, 9, 7, 11}, hw = 77;
  pool_ctx q = {.k = &k, .c = 9};
  q.x = malloc(sizeof(float) * (size_t)(9 * hw));
  q.xh = malloc(sizeof(float) * (size_t)(9 * hw));
  nr_value xv = make_value(NR_DTYPE_FLOAT, 4, xd, q.x), shape;
  nr_error err = {0};
  for (int64_t i = 0; i < 9 * hw; i++)
    q.x[i] = 0.5f;
  REQUIRE(!run_one("MaxPool", 12, 5, at, 1, (const nr_value *[]){&xv}, &shape, &err), "%s",
          err.message);
  nr_node node = {.name = "pool", .op_type = "MaxPool", .domain = "", .opset = 12,
                  .n_attrs = 5, .attrs = at};
  bool ok = nr_pool2d_of_node(&node, xd, shape.dims, &q.p);
  q.oh = shape.dims[2], q.ow = shape.dims[3];
  nr_value_free(&shape);
  q.y = malloc(sizeof(float) * (size_t)(9 * q.oh * q.ow + GUARD));
  CHECK(ok, "window not resolved");
  for (int v = 0; ok && v < 2; v++) {
    for (int64_t i = 0; i < 9 * hw; i++)
      q.x[i] = v ? -INFINITY : NAN;
    compare(t, &q, at, v ? "all -inf" : "all NaN");
  }
  free(q.y);
  free(q.xh);
  free(q.x);
}
