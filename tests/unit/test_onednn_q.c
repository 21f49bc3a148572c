/* test_onednn_q.c - the oneDNN int8 tactics (onednn_conv_int8, onednn_matmul_int8),
 * each output checked twice:
 *   tight: against a reference computed here from the same quantized operands (the
 *          activation quantized with the scale and zero point the engine recorded,
 *          the weights quantized per output channel by the rule onednn_q.h states,
 *          exact integer sums), which catches an off-by-one in a zero point, a
 *          padding tap or a bias scale;
 *   loose: against the fp32 reference executor, within the error the two
 *          quantization steps can cause for that output (sum over its taps of
 *          |x| s_w / 2 + |w| s_x + s_x s_w / 2, times the activation's slope).
 * Convolutions and GEMMs run directly on hand-built one-step plans (NHWC for convs,
 * guard bytes, a 2-thread pool, the activation's grid given as the node's QDQ
 * attributes, the seed in every message), in one band and in several; convolutions
 * also through the compiler on small graphs with precision@NODE=int8 routes and a
 * calibration observed from the inputs (no knob pins onednn_matmul_int8 among the
 * int8 GEMM tactics, so GEMMs are not tested that way here). Also: the quantize loops
 * against their rule, a record rebuilt into primitives after the cache is emptied,
 * and the failure paths (no calibration, a corrupted packed record). */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "plan/quant.h"
#include "graph_build.h"
#include "ir/fused.h"
#include "kernels/act.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/onednn_q/onednn_q.h"
#include "kernels/ref/executor.h"
#include "conv_step.h"
#include "op_test.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const nr_tactic nr_tactics_onednn_q[];

#define GUARD 64
static const float SENTINEL = 12345.678f;

static const nr_tactic *find_row(const char *id, const char *op) {
  for (const nr_tactic *t = nr_tactics_onednn_q; t->id; t++)
    if (!strcmp(t->id, id) && !strcmp(t->op_type, op))
      return t;
  return NULL;
}

static float *guarded(int64_t n) { return guarded_floats(n, GUARD, SENTINEL); }
static bool guard_ok(const float *p, int64_t n) { return guard_intact(p, n, GUARD, SENTINEL); }

/* n floats uniform in [lo, hi); *seed moves on (random_floats' convention). */
static float *uniform(int64_t n, float lo, float hi, unsigned *seed) {
  return nr_rng_floats_u32(n, seed, lo, hi);
}

/* ---- the quantized reference ---------------------------------------------------- */

/* The activation quantization onednn_q.h states: the zero point joins before the one
 * rounding (so x / s = 76.5 with zp 127 gives 204, not 76 + 127). */
static int quant_x(float x, float scale, int zp) {
  float r = nearbyintf(fmaf(x, 1.0f / scale, (float)zp));
  return r < 0.0f ? 0 : r > 255.0f ? 255 : (int)r;
}

/* Per-row symmetric weights: written independently of nr_onednn_q_weights. */
static void quant_w(const float *w, int64_t rows, int64_t len, int64_t so, int64_t si,
                    int *q, float *s) {
  for (int64_t o = 0; o < rows; o++) {
    float mx = 0;
    for (int64_t i = 0; i < len; i++)
      mx = fmaxf(mx, fabsf(w[o * so + i * si]));
    s[o] = mx > 0 ? mx / 127.0f : 1.0f;
    for (int64_t i = 0; i < len; i++) {
      float r = nearbyintf(w[o * so + i * si] / s[o]);
      q[o * so + i * si] = r > 127 ? 127 : r < -127 ? -127 : (int)r;
    }
  }
}

/* Largest slope of each activation (the bound of the loose check scales by it). */
static float act_slope(nr_act a) {
  switch (a) {
  case NR_ACT_HARD_SWISH: return 1.5f;
  case NR_ACT_SILU: return 1.1f;
  case NR_ACT_GELU: case NR_ACT_GELU_TANH: return 1.13f;
  default: return 1.0f;
  }
}

/* ---- the quantize loops ---------------------------------------------------------- */

typedef void (*quant_fn)(const float *, uint8_t *, int64_t, float, int32_t);

/* Every variant this machine runs, against the rule written out here, on lengths
 * around the 16-, 32- and 64-float tiles, with ties, NaN, infinities and values past
 * the int32 range, and guard bytes after the output. */
NR_TEST(onednn_q_quantize_loops_match_the_rule) {
  static const struct {
    const char *name;
    quant_fn fn;
    unsigned isa;
  } fns[] = {{"portable", nr_quantize_u8_portable, 0},
             {"avx2", nr_quantize_u8__avx2, NR_ISA_AVX2},
             {"avx512", nr_quantize_u8__avx512, NR_ISA_AVX512},
             {"dispatch", nr_quantize_u8, 0}};
  static const int64_t lens[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1031};
  static const float specials[] = {NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 0.5f, 1.5f,
                                   2.5f, -0.5f, 127.5f, 254.5f, 255.5f, 1e-30f, -0.0f};
  const float inv = 2.0f;
  nr_rng rng = nr_rng_make(2024);
  float *x = malloc(sizeof(float) * 1031);
  uint8_t *q = malloc(1031 + GUARD);
  for (int i = 0; i < 1031; i++)
    x[i] = i % 5 == 0 ? specials[(i / 5) % 14] / inv
                      : (float)nr_rng_int(&rng, 0, 4000) / 20.0f - 100.0f;
  int zps[] = {0, 37, 255};
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    if (fns[f].isa & ~nr_cpu_isa())
      continue;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
      for (int z = 0; z < 3; z++) {
        int64_t n = lens[l];
        memset(q, 0xA5, (size_t)n + GUARD);
        fns[f].fn(x, q, n, inv, zps[z]);
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++) {
          float r = fmaf(x[i], inv, (float)zps[z]);
          int want = r != r || r <= 0 ? 0 : r >= 255 ? 255 : (int)nearbyintf(r);
          if (q[i] != want)
            bad = i;
        }
        bool guard = true;
        for (int64_t i = n; i < n + GUARD; i++)
          guard &= q[i] == 0xA5;
        CHECK(bad < 0, "%s n %lld zp %d: q[%lld] = %d for x %g", fns[f].name, (long long)n,
              zps[z], (long long)bad, bad >= 0 ? q[bad] : 0, bad >= 0 ? x[bad] : 0);
        CHECK(guard, "%s n %lld: wrote past the output", fns[f].name, (long long)n);
      }
  }
  free(x), free(q);
}

/* ---- direct convolution harness -------------------------------------------------- */

typedef struct qconv_case {
  int n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw, group;
  bool bias, res;
  nr_act act;
  float lo, hi; /* x's range: lo < 0 gives a zero point */
} qconv_case;

static int64_t out_dim(int in, int k, int s, int p, int d) {
  return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

static void act_params(nr_act a, float *aa, float *bb) {
  *aa = a == NR_ACT_LEAKY_RELU ? 0.1f : a == NR_ACT_CLIP ? 0.0f : 0.2f;
  *bb = a == NR_ACT_CLIP ? 6.0f : 0.5f;
}

/* Case k as conv_step.h's, with the node's activation parameters. */
static conv_case step_case(const qconv_case *k) {
  conv_case cc = CONV_CASE_SYMMETRIC(k);
  act_params(k->act, &cc.act_a, &cc.act_b);
  return cc;
}

/* The one-step plan "qconv" (conv_step.h) in NHWC, the activation's grid as the node's
 * QDQ attributes. */
static void build(conv_step *hs, const qconv_case *k, const float *w, const float *b,
                  bool fused, float xs, int zp) {
  conv_case cc = step_case(k);
  nr_attr grid[2] = {attr_f("nr_x_scale", xs), attr_i("nr_x_zero_point", zp)};
  conv_step_make(hs, &cc, w, b,
                 &(conv_step_opts){.fused = fused, .name = "qconv",
                                   .layout = NR_LAYOUT_NHWC, .extra = grid, .n_extra = 2});
}

typedef struct conv_data {
  const qconv_case *k;
  const float *x, *w, *b, *r;
  int64_t yd[4];
} conv_data;

/* want_q: the quantized operands' output; want_f: fp32; bound: the loose tolerance;
 * mag: the magnitude the tight tolerance scales with. All PLAIN. */
static void conv_reference(const conv_data *d, float xs, int zp, float *want_q,
                           double *mag, double *bound) {
  const qconv_case *k = d->k;
  int cg = k->c / k->group, mg = k->m / k->group;
  int64_t per = (int64_t)cg * k->kh * k->kw;
  int *qw = malloc(sizeof(int) * (size_t)(k->m * per));
  float *sw = malloc(sizeof(float) * (size_t)k->m), aa, bb;
  quant_w(d->w, k->m, per, per, 1, qw, sw);
  act_params(k->act, &aa, &bb);
  int64_t oh = d->yd[2], ow = d->yd[3];
  for (int n = 0; n < k->n; n++)
    for (int o = 0; o < k->m; o++)
      for (int64_t oy = 0; oy < oh; oy++)
        for (int64_t ox = 0; ox < ow; ox++) {
          int64_t acc = 0;
          double err = 0;
          for (int ci = 0; ci < cg; ci++)
            for (int ky = 0; ky < k->kh; ky++)
              for (int kx = 0; kx < k->kw; kx++) {
                int64_t iy = oy * k->sh - k->ph + ky * k->dh, ix = ox * k->sw - k->pw + kx * k->dw;
                if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w)
                  continue;
                int c = o / mg * cg + ci;
                float xv = d->x[((int64_t)(n * k->c + c) * k->h + iy) * k->w + ix];
                int64_t wi = (int64_t)o * per + (ci * k->kh + ky) * k->kw + kx;
                acc += (int64_t)(quant_x(xv, xs, zp) - zp) * qw[wi];
                err += fabs(xv) * sw[o] / 2 + fabs(d->w[wi]) * xs + xs * sw[o] / 2;
              }
          int64_t i = ((n * (int64_t)k->m + o) * oh + oy) * ow + ox;
          float sc = xs * sw[o], bias = k->bias ? d->b[o] : 0.0f;
          double y = (double)sc * (double)acc + bias, r = k->res ? d->r[i] : 0.0;
          mag[i] = fabs((double)sc * (double)acc) + fabs(bias) + fabs(r);
          want_q[i] = (float)(y + r);
          nr_act_apply_ref(k->act, aa, bb, &want_q[i], 1);
          bound[i] = err * act_slope(k->act);
        }
  free(qw), free(sw);
}

/* The fp32 result: Conv through the reference executor, residual, activation. */
static bool conv_fp32(const conv_data *d, float *y) {
  conv_case cc = step_case(d->k);
  return conv_case_reference(&cc, d->x, d->w, d->b, d->k->res ? d->r : NULL, y);
}

/* Compares got with both references; returns the first index that fails, or -1. */
static int64_t compare(const float *got, const float *want_q, const float *want_f,
                       const double *mag, const double *bound, int64_t n, bool *tight) {
  for (int64_t i = 0; i < n; i++) {
    *tight = true;
    if (!(fabs((double)got[i] - want_q[i]) <= 2e-6 * mag[i] + 1e-6))
      return i;
    *tight = false;
    if (!(fabs((double)got[i] - want_f[i]) <= bound[i] + 1e-5 * fabs(want_f[i]) + 1e-5))
      return i;
  }
  return -1;
}

typedef struct run_bufs {
  float *px, *pr, *py, *scratch, *back;
  int64_t xn, yn, sn;
} run_bufs;

static void bufs_free(run_bufs *rb) {
  free(rb->px), free(rb->pr), free(rb->py), free(rb->scratch), free(rb->back);
}

/* Runs the prepared tactic on NHWC copies of x and r; y comes back PLAIN in rb->back. */
static nr_status run_nhwc(conv_step *hs, const conv_data *d, nr_threadpool *pool,
                          run_bufs *rb, nr_error *err) {
  const qconv_case *k = d->k;
  rb->xn = (int64_t)k->n * k->c * k->h * k->w;
  rb->yn = d->yd[0] * d->yd[1] * d->yd[2] * d->yd[3];
  rb->sn = (int64_t)(hs->step.scratch / 4 + 1);
  rb->px = guarded(rb->xn), rb->pr = guarded(rb->yn), rb->py = guarded(rb->yn);
  rb->scratch = guarded(rb->sn);
  rb->back = malloc(sizeof(float) * (size_t)rb->yn);
  nr_reorder_f32(d->x, NR_LAYOUT_PLAIN, rb->px, NR_LAYOUT_NHWC, hs->slots[0].dims, NULL);
  nr_reorder_f32(d->r, NR_LAYOUT_PLAIN, rb->pr, NR_LAYOUT_NHWC, d->yd, NULL);
  bool res = hs->step.in[3] >= 0;
  void *in[4] = {rb->px, hs->plan.weights + hs->slots[1].offset,
                 k->bias ? hs->plan.weights + hs->slots[2].offset : NULL, res ? rb->pr : NULL};
  void *out[1] = {rb->py};
  const nr_slot *ins[4] = {&hs->slots[0], &hs->slots[1], k->bias ? &hs->slots[2] : NULL,
                           res ? &hs->slots[3] : NULL};
  const nr_slot *outs[1] = {&hs->slots[4]};
  nr_exec_args a = {&hs->plan, &hs->step, &hs->node, in, out, ins, outs,
                    hs->plan.weights + hs->step.packed_offset, rb->scratch, pool, err};
  nr_status s = hs->step.tactic->run(&a);
  nr_reorder_f32(rb->py, NR_LAYOUT_NHWC, rb->back, NR_LAYOUT_PLAIN, d->yd, NULL);
  return s;
}

/* Runs case k on an engine built for `threads` (bands from 2 * threads down; 0: the
 * machine's CPUs); returns the bands the record chose (0 when it failed early). */
static uint32_t conv_case_run(nr_test_state *t, const qconv_case *k, bool fused,
                              unsigned seed, nr_threadpool *pool, int threads) {
  unsigned sd = seed;
  int64_t wn = (int64_t)k->m * (k->c / k->group) * k->kh * k->kw;
  conv_data d = {k};
  d.yd[0] = k->n, d.yd[1] = k->m;
  d.yd[2] = out_dim(k->h, k->kh, k->sh, k->ph, k->dh);
  d.yd[3] = out_dim(k->w, k->kw, k->sw, k->pw, k->dw);
  int64_t yn = d.yd[0] * d.yd[1] * d.yd[2] * d.yd[3];
  float *x = uniform((int64_t)k->n * k->c * k->h * k->w, k->lo, k->hi, &sd);
  float *w = random_floats(wn, &sd), *b = random_floats(k->m, &sd), *r = random_floats(yn, &sd);
  d.x = x, d.w = w, d.b = b, d.r = r;
  float lo = fminf(k->lo, 0), hi = fmaxf(k->hi, 0), xs = (hi - lo) / 255.0f;
  int zp = (int)lroundf(-lo / xs);
  conv_step hs;
  build(&hs, k, w, b, fused, xs, zp);
  const nr_tactic *tac = find_row("onednn_conv_int8", fused ? "FusedConv" : "Conv");
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err, threads};
  hs.step.tactic = tac;
  run_bufs rb = {0};
  uint32_t bands = 0;
  float *want_q = malloc(sizeof(float) * (size_t)yn), *want_f = malloc(sizeof(float) * (size_t)yn);
  double *mag = malloc(sizeof(double) * (size_t)yn), *bound = malloc(sizeof(double) * (size_t)yn);
  char what[160];
  snprintf(what, sizeof what, "%s n%d c%d %dx%d m%d k%dx%d s%d,%d p%d,%d d%d,%d g%d bias%d "
           "res%d %s x[%g,%g] t%d", tac->op_type, k->n, k->c, k->h, k->w, k->m, k->kh, k->kw,
           k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, k->group, k->bias, k->res && fused,
           nr_act_name(fused ? k->act : NR_ACT_NONE), k->lo, k->hi, threads);
  if (!tac->supports(&c) || tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "%s: not supported or prepare failed: %s, seed %u", what, err.message, seed);
    goto done;
  }
  const nr_onednn_q_head *h = (const void *)(hs.plan.weights + hs.step.packed_offset);
  bands = h->bands;
  qconv_case kr = *k;
  if (!fused)
    kr.act = NR_ACT_NONE, kr.res = false;
  d.k = &kr;
  conv_reference(&d, h->x_scale, h->x_zp, want_q, mag, bound);
  CHECK(conv_fp32(&d, want_f), "%s: reference failed", what);
  CHECK(run_nhwc(&hs, &d, pool, &rb, &err) == NR_OK, "%s: run: %s, seed %u", what,
        err.message, seed);
  CHECK(guard_ok(rb.py, rb.yn) && guard_ok(rb.px, rb.xn) && guard_ok(rb.pr, rb.yn),
        "%s: wrote past a buffer, seed %u", what, seed);
  CHECK(guard_ok(rb.scratch, rb.sn), "%s: overran its scratch, seed %u", what, seed);
  bool tight;
  int64_t bad = compare(rb.back, want_q, want_f, mag, bound, yn, &tight);
  CHECK(bad < 0, "%s: y[%lld] = %.7g, want %.7g (%s; fp32 %.7g, bound %.3g), x scale %g "
        "zp %d, seed %u", what, (long long)bad, bad >= 0 ? rb.back[bad] : 0,
        bad >= 0 ? want_q[bad] : 0, tight ? "quantized operands" : "fp32 within bound",
        bad >= 0 ? want_f[bad] : 0, bad >= 0 ? bound[bad] : 0, h->x_scale, h->x_zp, seed);
done:
  bufs_free(&rb);
  free(hs.plan.weights);
  free(x), free(w), free(b), free(r), free(want_q), free(want_f), free(mag), free(bound);
  return bands;
}

static const qconv_case conv_cases[] = {
    /* n c  h  w  m  kh kw sh sw ph pw dh dw g  bias res act  lo hi */
    /* 1x1 (GEMM-like): channel counts below, at and above 16 and 64 */
    {1, 16, 7, 9, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NR_ACT_RELU, 0, 2},
    {2, 64, 5, 5, 17, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, NR_ACT_RELU, -1, 3},
    {1, 67, 4, 6, 65, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, NR_ACT_NONE, -0.5f, 0.5f},
    {1, 17, 6, 6, 33, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, NR_ACT_SIGMOID, 0, 1},
    /* 3x3 stride 1 and 2, padded and not, zero point with padding */
    {1, 8, 12, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_NONE, 0, 1},
    {1, 8, 12, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_CLIP, -2, 1},
    {1, 13, 15, 14, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, NR_ACT_LEAKY_RELU, -0.5f, 2},
    {1, 5, 9, 9, 7, 3, 3, 2, 2, 0, 0, 1, 1, 1, true, false, NR_ACT_NONE, 0, 4},
    {2, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU, 0, 3},
    /* stems: 3 channels, 7x7 stride 2 pad 3 and 3x3 stride 2, asymmetric ranges */
    {1, 3, 23, 21, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, false, NR_ACT_RELU, -2.1f, 2.6f},
    {1, 3, 17, 16, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, NR_ACT_CLIP, -1.9f, 2.2f},
    /* dilation, 5x5 */
    {1, 8, 10, 10, 8, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, false, NR_ACT_SILU, -1, 1},
    {1, 6, 11, 12, 10, 5, 5, 1, 2, 2, 1, 1, 1, 1, true, false, NR_ACT_TANH, -1, 1},
    /* groups */
    {1, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 4, true, true, NR_ACT_GELU, 0, 2},
    {1, 9, 7, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 3, false, false, NR_ACT_GELU_TANH, -1, 1},
    /* depthwise (mobilenet's 3x3 s1/s2 with ReLU6), 5x5, channel multiplier 2 */
    {1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true, false, NR_ACT_CLIP, 0, 6},
    {1, 24, 15, 17, 24, 3, 3, 2, 2, 1, 1, 1, 1, 24, true, false, NR_ACT_CLIP, -3, 5},
    {2, 20, 11, 9, 20, 5, 5, 1, 1, 2, 2, 1, 1, 20, true, true, NR_ACT_HARD_SWISH, -1, 2},
    {1, 7, 8, 8, 14, 3, 3, 1, 1, 1, 1, 1, 1, 7, true, false, NR_ACT_HARD_SIGMOID, -1, 1},
};

NR_TEST(onednn_q_conv_matches_quantized_and_fp32_references) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++) {
    const qconv_case *k = &conv_cases[i];
    conv_case_run(t, k, true, 7000 + (unsigned)i, pool, 1);
    if (k->act == NR_ACT_NONE || !k->res)
      conv_case_run(t, k, false, 7100 + (unsigned)i, pool, 1);
  }
  nr_threadpool_destroy(pool);
}

/* Bands: convs of at least 2^18 multiply-adds on an engine built for 3 threads are cut
 * into up to 6 bands of output rows (last band shorter, stride 2 windows, dilated
 * taps, zero-point padding rows, batch 2), run on a 2-thread pool. */
static const qconv_case band_cases[] = {
    /* n c  h  w  m  kh kw sh sw ph pw dh dw g  bias res act  lo hi */
    {1, 32, 29, 29, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, NR_ACT_RELU, 0, 2},
    {1, 16, 33, 31, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, NR_ACT_NONE, -1, 2},
    {1, 64, 40, 40, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, true, false, NR_ACT_CLIP, 0, 6},
    {1, 48, 80, 75, 48, 3, 3, 2, 2, 1, 1, 1, 1, 48, false, false, NR_ACT_CLIP, -2, 3},
    {1, 16, 26, 20, 16, 5, 5, 1, 1, 4, 4, 2, 2, 1, true, true, NR_ACT_NONE, -1, 1},
    {2, 24, 19, 19, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_SILU, -0.5f, 1},
    {1, 3, 64, 60, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, false, NR_ACT_RELU, -2, 2},
};

NR_TEST(onednn_q_conv_bands_match_the_references) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t i = 0; i < sizeof band_cases / sizeof band_cases[0]; i++) {
    uint32_t bands = conv_case_run(t, &band_cases[i], true, 7200 + (unsigned)i, pool, 3);
    CHECK(bands > 1, "case %zu ran in %u band(s)", i, bands);
  }
  nr_threadpool_destroy(pool);
}

/* A record that is not one (wrong magic, offsets past the data) is refused at run
 * time with an error, not read. */
NR_TEST(onednn_q_conv_refuses_a_corrupted_record) {
  qconv_case k = {1, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, NR_ACT_RELU, 0, 1};
  unsigned sd = 99;
  float *w = random_floats(8 * 8 * 9, &sd), *b = random_floats(8, &sd);
  float *x = random_floats(8 * 36, &sd), *r = random_floats(8 * 36, &sd);
  conv_data d = {&k, x, w, b, r, {1, 8, 6, 6}};
  conv_step hs;
  build(&hs, &k, w, b, true, 1.0f / 255, 0);
  hs.step.tactic = find_row("onednn_conv_int8", "FusedConv");
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err};
  REQUIRE(hs.step.tactic->prepare(&c, &hs.plan, &hs.step) == NR_OK, "%s", err.message);
  nr_onednn_q_head *h = (void *)(hs.plan.weights + hs.step.packed_offset);
  run_bufs rb = {0};
  CHECK(run_nhwc(&hs, &d, NULL, &rb, &err) == NR_OK, "%s", err.message);
  bufs_free(&rb);
  h->w_off += 64 * (hs.step.packed_size / 64);
  CHECK(run_nhwc(&hs, &d, NULL, &rb, &err) == NR_ERR_INVALID_ARGUMENT &&
            strstr(err.message, "outside"), "%s", err.message);
  bufs_free(&rb);
  h->magic[0] ^= 1;
  CHECK(run_nhwc(&hs, &d, NULL, &rb, &err) == NR_ERR_INVALID_ARGUMENT &&
            strstr(err.message, "record"), "%s", err.message);
  bufs_free(&rb);
  free(hs.plan.weights);
  free(w), free(b), free(x), free(r);
}

/* The calling thread's OpenMP team size (oneDNN's runtime), where one is loaded. */
static void set_omp_threads(int n) {
  void *f = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  void (*set)(int);
  memcpy(&set, &f, sizeof f);
  if (f)
    set(n);
}

/* The primitives a later process makes from the record are the ones the build made,
 * whatever that process's OpenMP team size: a 1x1 conv whose brgconv weight block
 * depends on oneDNN's thread count (48 or 64 output channels) is built (for 1 thread,
 * then for 2: one band, then several) while the calling thread's team has the other
 * count, then runs after the cache is emptied with the team at the engine's count,
 * as in a process that runs the engine. */
NR_TEST(onednn_q_conv_record_recreates_its_primitive) {
  qconv_case k = {1, 96, 14, 14, 576, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, NR_ACT_NONE,
                  0, 2};
  unsigned sd = 4321;
  float *w = random_floats(576 * 96, &sd), *b = random_floats(576, &sd);
  float *x = uniform(96 * 196, 0, 2, &sd), *r = random_floats(576 * 196, &sd);
  conv_data d = {&k, x, w, b, r, {1, 576, 14, 14}};
  float *want_q = malloc(sizeof(float) * 576 * 196);
  double *mag = malloc(sizeof(double) * 576 * 196), *bound = malloc(sizeof(double) * 576 * 196);
  nr_threadpool *pool = nr_threadpool_create(2);
  for (int threads = 1; threads <= 2; threads++) {
    conv_step hs;
    build(&hs, &k, w, b, false, 2.0f / 255, 0);
    hs.step.tactic = find_row("onednn_conv_int8", "Conv");
    nr_error err = {0};
    nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err, threads};
    set_omp_threads(3 - threads);
    REQUIRE(hs.step.tactic->prepare(&c, &hs.plan, &hs.step) == NR_OK, "%s", err.message);
    const nr_onednn_q_head *h = (const void *)(hs.plan.weights + hs.step.packed_offset);
    CHECK(threads == 1 ? h->bands == 1 : h->bands > 1, "built for %d threads: %u bands",
          threads, h->bands);
    nr_onednn_q_cache_flush();
    set_omp_threads(threads);
    run_bufs rb = {0};
    CHECK(run_nhwc(&hs, &d, threads == 1 ? NULL : pool, &rb, &err) == NR_OK,
          "built for %d threads: %s", threads, err.message);
    conv_reference(&d, h->x_scale, h->x_zp, want_q, mag, bound);
    int64_t bad = -1;
    for (int64_t i = 0; i < 576 * 196 && bad < 0; i++)
      if (!(fabs((double)rb.back[i] - want_q[i]) <= 2e-6 * mag[i] + 1e-6))
        bad = i;
    CHECK(bad < 0, "built for %d threads: y[%lld] = %g, want %g", threads, (long long)bad,
          bad >= 0 ? rb.back[bad] : 0, bad >= 0 ? want_q[bad] : 0);
    bufs_free(&rb);
    free(hs.plan.weights);
  }
  nr_threadpool_destroy(pool);
  free(w), free(b), free(x), free(r), free(want_q), free(mag), free(bound);
}

/* ---- direct GEMM harness -------------------------------------------------------- */

typedef struct qgemm_case {
  const char *op; /* Gemm, FusedGemm, MatMul, FusedMatMul */
  int m, k, n;
  bool tb, bias, res; /* res: R (fused ops) or, for Gemm, a full [M, N] C */
  float alpha, beta;
  nr_act act;
  float lo, hi;
} qgemm_case;

typedef struct gemm_harness {
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  nr_node node;
  nr_attr attrs[9];
} gemm_harness;

static void gemm_build(gemm_harness *hs, const qgemm_case *k, const float *w, const float *b,
                       float xs, int zp) {
  memset(hs, 0, sizeof *hs);
  bool fused = k->op[0] == 'F', gemm = strstr(k->op, "Gemm") != NULL;
  bool c_full = !strcmp(k->op, "Gemm") && k->res;
  nr_slot *s = hs->slots;
  s[0] = (nr_slot){.name = "A", .dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {k->m, k->k}};
  s[1] = (nr_slot){.name = "B", .dtype = NR_DTYPE_FLOAT, .rank = 2, .kind = NR_SLOT_CONST,
                   .dims = {k->tb ? k->n : k->k, k->tb ? k->k : k->n}};
  nr_plan_add_weights(&hs->plan, w, sizeof(float) * (size_t)(k->k * k->n), &s[1].offset, NULL);
  s[2] = (nr_slot){.name = "C", .dtype = NR_DTYPE_FLOAT, .rank = 1, .kind = NR_SLOT_CONST,
                   .dims = {k->n}};
  nr_plan_add_weights(&hs->plan, b, sizeof(float) * (size_t)k->n, &s[2].offset, NULL);
  if (c_full)
    s[2] = (nr_slot){.name = "C", .dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {k->m, k->n}};
  s[3] = (nr_slot){.name = "R", .dtype = NR_DTYPE_FLOAT, .rank = 2, .dims = {k->m, k->n}};
  s[4] = s[3];
  s[4].name = "Y";
  hs->plan.slots = s;
  hs->plan.n_slots = 5;
  int na = 0;
  hs->attrs[na++] = attr_f("nr_x_scale", xs);
  hs->attrs[na++] = attr_i("nr_x_zero_point", zp);
  if (gemm) {
    hs->attrs[na++] = attr_i("transB", k->tb);
    hs->attrs[na++] = attr_f("alpha", k->alpha);
    hs->attrs[na++] = attr_f("beta", k->beta);
  }
  if (fused) {
    float aa, bb;
    act_params(k->act, &aa, &bb);
    hs->attrs[na++] = attr_s("activation", nr_act_name(k->act));
    hs->attrs[na++] = attr_f("act_alpha", aa);
    hs->attrs[na++] = attr_f("act_beta", bb);
  }
  hs->node = (nr_node){.name = "qgemm", .op_type = (char *)k->op,
                       .domain = fused ? NR_DOMAIN : "", .opset = fused ? 1 : 13,
                       .n_attrs = na, .attrs = hs->attrs};
  nr_step *st = &hs->step;
  st->n_in = fused ? 4 : gemm ? 3 : 2;
  st->n_out = 1;
  st->in[0] = 0, st->in[1] = 1;
  st->in[2] = k->bias || c_full ? 2 : -1;
  st->in[3] = fused && k->res ? 3 : -1;
  st->out[0] = 4;
}

static uint32_t gemm_case_run(nr_test_state *t, const qgemm_case *k, unsigned seed,
                              nr_threadpool *pool, int threads) {
  unsigned sd = seed;
  int64_t mn = (int64_t)k->m * k->n;
  float *x = uniform((int64_t)k->m * k->k, k->lo, k->hi, &sd);
  float *w = random_floats((int64_t)k->k * k->n, &sd), *b = random_floats(k->n, &sd);
  float *r = random_floats(mn, &sd), *y = guarded(mn), *xa = guarded((int64_t)k->m * k->k);
  memcpy(xa, x, sizeof(float) * (size_t)(k->m * k->k));
  float lo = fminf(k->lo, 0), hi = fmaxf(k->hi, 0), xs = (hi - lo) / 255.0f;
  int zp = (int)lroundf(-lo / xs);
  bool fused = k->op[0] == 'F', gemm = strstr(k->op, "Gemm") != NULL;
  bool c_full = !strcmp(k->op, "Gemm") && k->res, has_r = fused && k->res;
  gemm_harness hs;
  gemm_build(&hs, k, w, b, xs, zp);
  const nr_tactic *tac = find_row("onednn_matmul_int8", k->op);
  hs.step.tactic = tac;
  nr_error err = {0};
  nr_tactic_ctx c = {&hs.plan, &hs.node, &hs.step, NULL, &err, threads};
  uint32_t bands = 0;
  char what[128];
  snprintf(what, sizeof what, "%s %dx%dx%d tb%d bias%d res%d alpha %g beta %g %s x[%g,%g]",
           k->op, k->m, k->n, k->k, k->tb, k->bias, k->res, k->alpha, k->beta,
           nr_act_name(fused ? k->act : NR_ACT_NONE), k->lo, k->hi);
  float *scratch = NULL;
  if (!tac->supports(&c) || tac->prepare(&c, &hs.plan, &hs.step)) {
    CHECK(false, "%s: not supported or prepare failed: %s, seed %u", what, err.message, seed);
    goto done;
  }
  scratch = guarded((int64_t)(hs.step.scratch / 4 + 1));
  void *in[4] = {xa, hs.plan.weights + hs.slots[1].offset,
                 c_full ? (void *)r : k->bias ? hs.plan.weights + hs.slots[2].offset : NULL,
                 has_r ? r : NULL};
  void *out[1] = {y};
  const nr_slot *ins[4] = {&hs.slots[0], &hs.slots[1], in[2] ? &hs.slots[2] : NULL,
                           has_r ? &hs.slots[3] : NULL};
  const nr_slot *outs[1] = {&hs.slots[4]};
  nr_exec_args a = {&hs.plan, &hs.step, &hs.node, in, out, ins, outs,
                    hs.plan.weights + hs.step.packed_offset, scratch, pool, &err};
  CHECK(tac->run(&a) == NR_OK, "%s: run: %s, seed %u", what, err.message, seed);
  CHECK(guard_ok(y, mn) && guard_ok(xa, (int64_t)k->m * k->k) &&
            guard_ok(scratch, (int64_t)(hs.step.scratch / 4 + 1)),
        "%s: wrote past a buffer, seed %u", what, seed);
  const nr_onednn_q_head *h = (const void *)(hs.plan.weights + hs.step.packed_offset);
  bands = h->bands;
  int *qw = malloc(sizeof(int) * (size_t)(k->k * k->n));
  float *sw = malloc(sizeof(float) * (size_t)k->n), aa, bb;
  quant_w(w, k->n, k->k, k->tb ? k->k : 1, k->tb ? 1 : k->n, qw, sw);
  act_params(fused ? k->act : NR_ACT_NONE, &aa, &bb);
  float alpha = gemm ? k->alpha : 1, beta = gemm ? k->beta : 1;
  int bad = 0;
  for (int i = 0; i < k->m && !bad; i++)
    for (int j = 0; j < k->n && !bad; j++) {
      int64_t acc = 0;
      double f = 0, eb = 0;
      for (int kk = 0; kk < k->k; kk++) {
        int64_t wi = k->tb ? (int64_t)j * k->k + kk : (int64_t)kk * k->n + j;
        float xv = x[i * k->k + kk];
        acc += (int64_t)(quant_x(xv, h->x_scale, h->x_zp) - h->x_zp) * qw[wi];
        f += (double)xv * w[wi];
        eb += fabs(xv) * sw[j] / 2 + fabs(w[wi]) * h->x_scale + h->x_scale * sw[j] / 2;
      }
      float sc = alpha * h->x_scale * sw[j];
      double add = (k->bias ? beta * b[j] : 0) + (c_full ? beta * r[i * k->n + j] : 0) +
                   (has_r ? r[i * k->n + j] : 0);
      float yq = (float)((double)sc * acc + add), yf = (float)(alpha * f + add);
      double mag = fabs((double)sc * acc) + fabs(add);
      nr_act_apply_ref(fused ? k->act : NR_ACT_NONE, aa, bb, &yq, 1);
      nr_act_apply_ref(fused ? k->act : NR_ACT_NONE, aa, bb, &yf, 1);
      float got = y[i * k->n + j];
      double bound = fabs(alpha) * eb * act_slope(fused ? k->act : NR_ACT_NONE);
      bad = !(fabs(got - yq) <= 2e-6 * mag + 1e-6) ? 1
            : !(fabs(got - yf) <= bound + 1e-5 * fabs(yf) + 1e-5) ? 2 : 0;
      CHECK(!bad, "%s: y[%d,%d] = %.7g, quantized operands give %.7g, fp32 %.7g (bound "
            "%.3g), seed %u", what, i, j, got, yq, yf, bound, seed);
    }
  free(qw), free(sw);
done:
  free(scratch), free(hs.plan.weights);
  free(x), free(w), free(b), free(r), free(y), free(xa);
  return bands;
}

static const qgemm_case gemm_cases[] = {
    /* op           m   k    n  tb  bias  res   alpha beta act  lo hi */
    {"Gemm", 1, 2048, 100, true, true, false, 1, 1, NR_ACT_NONE, 0, 4},
    {"Gemm", 7, 70, 33, false, true, false, 0.5f, 2, NR_ACT_NONE, -1, 2},
    {"Gemm", 5, 64, 16, true, false, true, 1.5f, 0.5f, NR_ACT_NONE, -0.3f, 1},
    {"FusedGemm", 9, 33, 65, true, true, true, 1, 1, NR_ACT_RELU, 0, 1},
    {"FusedGemm", 4, 17, 7, false, true, false, 2, 0.25f, NR_ACT_GELU, -2, 2},
    {"MatMul", 16, 128, 64, false, false, false, 1, 1, NR_ACT_NONE, -1, 1},
    {"MatMul", 3, 5, 130, false, false, false, 1, 1, NR_ACT_NONE, 0, 3},
    {"FusedMatMul", 12, 96, 48, false, true, true, 1, 1, NR_ACT_LEAKY_RELU, -2, 1},
    {"FusedMatMul", 2, 40, 24, false, true, false, 1, 1, NR_ACT_HARD_SWISH, -1, 3},
};

NR_TEST(onednn_q_gemm_matches_quantized_and_fp32_references) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t i = 0; i < sizeof gemm_cases / sizeof gemm_cases[0]; i++)
    gemm_case_run(t, &gemm_cases[i], 9000 + (unsigned)i, pool, 1);
  nr_threadpool_destroy(pool);
}

/* Bands of rows of A (engine for 3 threads, 2-thread pool): last band shorter, a
 * zero point, a residual. */
static const qgemm_case gemm_band_cases[] = {
    /* op           m   k    n  tb  bias  res   alpha beta act  lo hi */
    {"MatMul", 61, 128, 96, false, false, false, 1, 1, NR_ACT_NONE, -1, 1},
    {"FusedGemm", 50, 96, 80, true, true, true, 0.5f, 1, NR_ACT_RELU, 0, 2},
    {"FusedMatMul", 37, 256, 64, false, true, true, 1, 1, NR_ACT_GELU, -1, 2},
};

NR_TEST(onednn_q_gemm_bands_match_the_references) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t i = 0; i < sizeof gemm_band_cases / sizeof gemm_band_cases[0]; i++) {
    uint32_t bands = gemm_case_run(t, &gemm_band_cases[i], 9100 + (unsigned)i, pool, 3);
    CHECK(bands > 1, "case %zu ran in %u band(s)", i, bands);
  }
  nr_threadpool_destroy(pool);
}

/* ---- through the compiler: graphs, routes, calibration ------------------------------ */

static nr_calib *calibrate(nr_graph *g, const nr_value *in, int n_in) {
  nr_calib *c = calloc(1, sizeof *c);
  nr_error err = {0};
  for (int i = 0; i < n_in; i++)
    nr_calib_observe(c, g->tensors[g->inputs[i]].name, in[i].data, nr_value_count(&in[i]),
                     &err);
  c->samples = 1;
  return c;
}

/* The engine's output for inputs in (n_in of them); NULL on failure (reported). */
static float *run_plan(nr_test_state *t, nr_plan *p, const nr_value *in, int n_in,
                       const char *what) {
  nr_engine e = {.plan = p, .threads = 2};
  nr_buffer bin[4], out = {0};
  for (int i = 0; i < n_in; i++) {
    bin[i] = (nr_buffer){NR_DTYPE_FLOAT, in[i].rank, {0}, in[i].data};
    memcpy(bin[i].dims, in[i].dims, sizeof(int64_t) * (size_t)in[i].rank);
  }
  nr_context *ctx = NULL;
  nr_error err = {0};
  bool ok = !nr_context_create(&e, 2, &ctx, &err) && !nr_context_run(ctx, bin, &out, &err);
  CHECK(ok, "%s: %s", what, err.message);
  nr_context_destroy(ctx);
  return ok ? out.data : NULL;
}

/* The step that ran tactic id, or NULL. */
static const nr_step *step_of(const nr_plan *p, const char *id) {
  for (int i = 0; i < p->n_steps; i++)
    if (p->steps[i].tactic && !strcmp(p->steps[i].tactic->id, id))
      return &p->steps[i];
  return NULL;
}

/* Conv (stride 2, padding) + Add of a second input + Relu: FusedConv with residual in
 * NHWC, fed by a reorder of the PLAIN graph input (its calibration entry is the graph
 * input's), compared with both references; and a depthwise Conv + Clip(0, 6) on an
 * asymmetric input (zero point with padding). conv.algo=onednn pins the tactic among
 * the int8 ones; without a calibration the build fails naming the node. */
NR_TEST(onednn_q_conv_through_compiler) {
  enum { C = 12, H = 13, W = 11, M = 16, OH = 7, OW = 6 };
  static float w[M * C * 9], b[M], x[C * H * W], r[M * OH * OW], wd[C * 9], bd[C];
  nr_rng rng = nr_rng_make(31337);
  for (int i = 0; i < M * C * 9; i++)
    w[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int i = 0; i < C * 9; i++)
    wd[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int i = 0; i < M; i++)
    b[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int i = 0; i < C; i++)
    bd[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int i = 0; i < C * H * W; i++)
    x[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f * 2.0f - 0.7f; /* [-0.7, 3.3] */
  for (int i = 0; i < M * OH * OW; i++)
    r[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  for (int dw = 0; dw < 2; dw++) {
    nr_graph *g = tg_graph(13);
    int mo = dw ? C : M, oh = dw ? H : OH, ow = dw ? W : OW;
    int xt = tg_input(g, "x", 4, (int64_t[]){1, C, H, W});
    int rt = dw ? -1 : tg_input(g, "r", 4, (int64_t[]){1, M, OH, OW});
    int wt = tg_borrowed(g, "w", 4, (int64_t[]){mo, dw ? 1 : C, 3, 3}, dw ? wd : w);
    int bt = tg_borrowed(g, "b", 1, (int64_t[]){mo}, dw ? bd : b);
    int lo = tg_borrowed(g, "lo", 0, NULL, &(float){0.0f});
    int hi = tg_borrowed(g, "hi", 0, NULL, &(float){6.0f});
    int64_t pads[4] = {1, 1, 1, 1}, st2[2] = {2, 2}, st1[2] = {1, 1};
    nr_attr ca[3] = {attr_ints("pads", 4, pads), attr_ints("strides", 2, dw ? st1 : st2),
                     attr_i("group", dw ? C : 1)};
    int h1 = tg_node_attrs(g, "Conv", "conv", 3, (int[]){xt, wt, bt}, 3, ca), y;
    if (dw) {
      y = tg_node(g, "Clip", "clip", 3, (int[]){h1, lo, hi});
    } else {
      int h2 = tg_node(g, "Add", "add", 2, (int[]){h1, rt});
      y = tg_node(g, "Relu", "relu", 1, &h2);
    }
    REQUIRE(tg_finish(t, g, y));
    nr_value in[2] = {make_value(NR_DTYPE_FLOAT, 4, (int64_t[]){1, C, H, W}, x),
                      make_value(NR_DTYPE_FLOAT, 4, (int64_t[]){1, M, OH, OW}, r)};
    nr_value want = {0};
    nr_error err = {0};
    REQUIRE(nr_ref_exec(g, in, &want, &err) == NR_OK, "%s", err.message);
    nr_calib *cal = calibrate(g, in, dw ? 1 : 2);
    tg_built bl;
    nr_status s = tg_compile(
        g, "-precision@conv=int8 -conv.algo@conv=onednn -quant.calibration=minmax", 2, cal,
        &bl, &err);
    CHECK(!s, "%s", err.message);
    const nr_step *st = s ? NULL : step_of(bl.plan, "onednn_conv_int8");
    CHECK(s || st, "the int8 conv did not get onednn_conv_int8");
    CHECK(!st || bl.plan->graph->nodes[st->node].op_type[0] == 'F',
          "the conv was not fused with its %s", dw ? "clip" : "residual and relu");
    float *got = st ? run_plan(t, bl.plan, in, dw ? 1 : 2, "int8 conv") : NULL;
    if (got) {
      const nr_onednn_q_head *hd = (const void *)(bl.plan->weights + st->packed_offset);
      CHECK(hd->x_zp > 0, "an asymmetric range has zero point %d", hd->x_zp);
      qconv_case k = {1, C, H, W, mo, 3, 3, dw ? 1 : 2, dw ? 1 : 2, 1, 1, 1, 1, dw ? C : 1,
                      true, !dw, dw ? NR_ACT_CLIP : NR_ACT_RELU, 0, 0};
      conv_data d = {&k, x, dw ? wd : w, dw ? bd : b, r, {1, mo, oh, ow}};
      int64_t yn = (int64_t)mo * oh * ow;
      float *want_q = malloc(sizeof(float) * (size_t)yn);
      double *mag = malloc(sizeof(double) * (size_t)yn), *bound = malloc(sizeof(double) * (size_t)yn);
      conv_reference(&d, hd->x_scale, hd->x_zp, want_q, mag, bound);
      bool tight;
      int64_t bad = compare(got, want_q, want.data, mag, bound, yn, &tight);
      CHECK(bad < 0, "%s: y[%lld] = %.7g, want %.7g (%s), fp32 %.7g", dw ? "depthwise" : "conv",
            (long long)bad, bad >= 0 ? got[bad] : 0, bad >= 0 ? want_q[bad] : 0,
            tight ? "quantized operands" : "fp32 within bound",
            bad >= 0 ? ((float *)want.data)[bad] : 0);
      free(want_q), free(mag), free(bound), free(got);
    }
    tg_built_free(&bl);
    /* Without a calibration the build fails and names the node. */
    s = tg_compile(g, "-precision@conv=int8 -conv.algo@conv=onednn", 2, NULL, &bl, &err);
    CHECK(s != NR_OK && strstr(err.message, "'conv'") && strstr(err.message, "calibration"),
          "%s", err.message);
    tg_built_free(&bl);
    nr_calib_destroy(cal);
    nr_value_free(&want);
    nr_graph_destroy(g);
  }
}
