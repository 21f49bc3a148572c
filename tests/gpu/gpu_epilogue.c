/* gpu_epilogue.c - the epilogue kernel (nr_cuda_epi_launch) called directly, against
 * the same formula on the host: y = act(x + bias[c] + res) over [outer, channels,
 * inner] with the 8-wide path (channels or inner a multiple of 8, aligned pointers)
 * and the scalar one (odd runs, a pointer one element off), every fp16/fp32 mix of
 * x, res and y, in place (x == y), with and without bias and residual, and ReLU6,
 * erf GELU and no activation. The graphs of gpu_ops.c reach it through cuDNN and
 * cuBLAS steps; here each path is hit on purpose. Guard elements surround y. */
#include "gpu_close.h"
#include "rng.h"
#include "unit.h"

#include "backends/cuda/cuda_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16

typedef struct epi_case {
  int64_t outer, channels, inner;
  int x_half, res_half, y_half;
  int bias, res, op, offset, in_place;
} epi_case;

/* n seeded floats in [-3, 3) in a device buffer of dtype half (plus `pad` elements
 * before them); the host copy holds the values as the device stores them. */
static float *dev_data(int64_t n, int64_t pad, bool half, unsigned seed, void **base, void **at) {
  float *h = malloc(sizeof(float) * (size_t)n);
  float *tmp = NULL;
  size_t es = half ? 2 : 4;
  *base = *at = NULL;
  if (!h)
    return NULL;
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < n; i++)
    h[i] = (float)nr_rng_int(&rng, 0, 60000) / 10000.0f - 3.0f;
  bool ok = !cudaMalloc(base, (size_t)(n + pad + GUARD) * es) &&
            !cudaMalloc((void **)&tmp, (size_t)n * 4) &&
            !cudaMemcpy(tmp, h, (size_t)n * 4, cudaMemcpyHostToDevice);
  *at = ok ? (uint8_t *)*base + pad * es : NULL;
  if (ok && half)
    ok = !nr_cuda_f32_to_f16(tmp, *at, n, 0) && !nr_cuda_f16_to_f32(*at, tmp, n, 0) &&
         !cudaMemcpy(h, tmp, (size_t)n * 4, cudaMemcpyDeviceToHost);
  else if (ok)
    ok = !cudaMemcpy(*at, tmp, (size_t)n * 4, cudaMemcpyDeviceToDevice);
  cudaFree(tmp);
  if (!ok) {
    free(h);
    return NULL;
  }
  return h;
}

static float act(int op, float v) {
  if (op == NR_EW_CLIP)
    return v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;
  if (op == NR_EW_GELU)
    return 0.5f * v * (1.0f + erff(v * 0.70710678f));
  return v;
}

static void run_case(nr_test_state *t, const epi_case *c) {
  unsigned seed = (unsigned)(c->outer * 7 + c->channels * 3 + c->inner + c->op + 64 * c->x_half +
                             32 * c->res_half + 16 * c->y_half + 8 * c->offset);
  int64_t n = c->outer * c->channels * c->inner;
  bool yh = c->in_place ? c->x_half : c->y_half;
  size_t ys = yh ? 2 : 4;
  void *xb, *x, *rb = NULL, *r = NULL, *bd = NULL, *yb = NULL, *y = NULL;
  float *hx = dev_data(n, c->offset, c->x_half, seed, &xb, &x);
  float *hr = c->res ? dev_data(n, c->offset, c->res_half, seed + 1, &rb, &r) : NULL;
  float *hb = malloc(sizeof(float) * (size_t)c->channels);
  uint8_t *got = malloc((size_t)(n + 2 * GUARD) * ys);
  REQUIRE(hx && hb && got && (!c->res || hr), "setup (seed %u)", seed);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < c->channels; i++)
    hb[i] = (float)nr_rng_int(&rng, 0, 2000) / 1000.0f - 1.0f;
  if (c->in_place) {
    y = x;
  } else {
    memset(got, 0x5a, (size_t)(n + 2 * GUARD) * ys);
    REQUIRE(!cudaMalloc(&yb, (size_t)(n + 2 * GUARD) * ys) &&
            !cudaMemcpy(yb, got, (size_t)(n + 2 * GUARD) * ys, cudaMemcpyHostToDevice));
    y = (uint8_t *)yb + GUARD * ys;
  }
  REQUIRE(!cudaMalloc(&bd, sizeof(float) * (size_t)c->channels) &&
          !cudaMemcpy(bd, hb, sizeof(float) * (size_t)c->channels, cudaMemcpyHostToDevice));
  nr_cuda_epi_args a = {c->outer, c->channels, c->inner, c->x_half, yh, c->res_half,
                        c->op, 0.0f, 6.0f};
  cudaError_t e = nr_cuda_epi_launch(&a, x, c->bias ? bd : NULL, r, y, 0);
  if (!e)
    e = cudaDeviceSynchronize();
  CHECK(!e, "launch: %s", cudaGetErrorString(e));
  float *gy = malloc(sizeof(float) * (size_t)n), *tmp = NULL;
  bool ok = !e && gy && !cudaMalloc((void **)&tmp, (size_t)n * 4);
  if (ok && yh)
    ok = !nr_cuda_f16_to_f32(y, tmp, n, 0) && !cudaMemcpy(gy, tmp, (size_t)n * 4, cudaMemcpyDeviceToHost);
  else if (ok)
    ok = !cudaMemcpy(gy, y, (size_t)n * 4, cudaMemcpyDeviceToHost);
  CHECK(ok, "reading y back");
  int bad = 0;
  for (int64_t i = 0; ok && i < n && bad < 5; i++) {
    int64_t ch = (i / c->inner) % c->channels;
    float want = act(c->op, hx[i] + (c->bias ? hb[ch] : 0.0f) + (c->res ? hr[i] : 0.0f));
    double tol = yh ? 2e-3 : 1e-5; /* the same atol and rtol */
    if (!gt_close(gy[i], want, tol, tol)) {
      CHECK(false, "[%lld,%lld,%lld] x%d r%d y%d op %d: y[%lld] = %g, want %g (seed %u)",
            (long long)c->outer, (long long)c->channels, (long long)c->inner, c->x_half,
            c->res_half, yh, c->op, (long long)i, gy[i], want, seed);
      bad++;
    }
  }
  if (!c->in_place &&
      !cudaMemcpy(got, yb, (size_t)(n + 2 * GUARD) * ys, cudaMemcpyDeviceToHost))
    for (size_t i = 0; i < GUARD * ys; i++)
      CHECK(got[i] == 0x5a && got[(size_t)(n + 2 * GUARD) * ys - 1 - i] == 0x5a,
            "guard byte %zu overwritten", i);
  cudaFree(tmp), cudaFree(xb), cudaFree(rb), cudaFree(bd), cudaFree(yb);
  free(hx), free(hr), free(hb), free(got), free(gy);
}

NR_TEST(gpu_epilogue_kernel) {
  static const int64_t shapes[][3] = {
      {3, 16, 1},    /* NHWC / GEMM rows: 8-wide, channels contiguous */
      {2, 3, 64},    /* NCHW: 8-wide within a channel */
      {2, 5, 7},     /* odd: scalar */
      {1000, 24, 1}, /* many rows */
      {5, 40, 9},    /* inner not a multiple of 8: scalar */
  };
  static const int ops[] = {NR_EW_CLIP, NR_EW_GELU, NR_EW_IDENTITY};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int mix = 0; mix < 8; mix++)
      for (size_t o = 0; o < 3; o++) {
        epi_case c = {shapes[s][0], shapes[s][1], shapes[s][2], mix & 1, (mix >> 1) & 1,
                      (mix >> 2) & 1, (int)(o != 2 || mix != 0), mix % 3 != 0, ops[o], 0, 0};
        run_case(t, &c);
      }
  /* one element off: the scalar path on a shape that would be 8-wide */
  epi_case off = {3, 16, 1, 1, 1, 1, 1, 1, NR_EW_CLIP, 1, 0};
  run_case(t, &off);
  off.x_half = off.res_half = off.y_half = 0;
  run_case(t, &off);
  /* in place, as the GEMM and convolution steps call it */
  epi_case inp = {4, 32, 1, 1, 1, 1, 1, 1, NR_EW_GELU, 0, 1};
  run_case(t, &inp);
  inp.x_half = inp.res_half = 0, inp.channels = 6, inp.inner = 5;
  run_case(t, &inp);
}
