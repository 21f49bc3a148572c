/* kernel_bench.c - GPU time of the CUDA backend's own kernels alone, on the shapes of
 * the models in bench/gpu/compare.py: the fp32 attention kernel against the
 * tensor-core ones (the staged kernel with fp16 and fp32 operands, the register-
 * resident one with fp16 operands), LayerNorm and softmax rows, and the
 * depthwise convolution. Prints one table; needs a GPU (`build/bench/nr_cuda_kernel_bench`).
 *
 * Key decision: each kernel is captured 50 times into one CUDA graph and the graph
 * replayed, so the figure is device time per launch without the host's launch cost
 * (which `nnroute bench --profile`, timing steps one by one without graphs, mostly
 * measures for kernels this small). Data is seeded random, never zeros; the median
 * of 7 replays counts. */
#include "backends/cuda/cuda_kernels.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAUNCHES 50
#define REPLAYS 7

typedef cudaError_t (*launch_fn)(const void *user, cudaStream_t s);

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Microseconds per launch of fn, or -1 when something fails. */
static double time_us(launch_fn fn, const void *user) {
  cudaStream_t s;
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  cudaEvent_t a, b;
  float ms[REPLAYS];
  double us = -1;
  if (cudaStreamCreate(&s) || cudaEventCreate(&a) || cudaEventCreate(&b))
    return -1;
  bool ok = fn(user, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess; /* warm */
  ok = ok && cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  for (int i = 0; ok && i < LAUNCHES; i++)
    ok = fn(user, s) == cudaSuccess;
  if (cudaStreamEndCapture(s, &g) != cudaSuccess)
    ok = false;
  ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
  for (int r = 0; ok && r < REPLAYS; r++) {
    cudaEventRecord(a, s);
    ok = cudaGraphLaunch(ge, s) == cudaSuccess;
    cudaEventRecord(b, s);
    ok = ok && cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&ms[r], a, b) == 0;
  }
  if (ok) {
    qsort(ms, REPLAYS, sizeof ms[0], cmp_float);
    us = ms[REPLAYS / 2] * 1000.0 / LAUNCHES;
  }
  if (ge)
    cudaGraphExecDestroy(ge);
  if (g)
    cudaGraphDestroy(g);
  cudaGetLastError();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  return us;
}

/* A device buffer of n elements (fp16 when half) of seeded values in [-1, 1). */
static void *dev_rand(int64_t n, bool half, unsigned seed) {
  size_t es = half ? 2 : 4;
  float *h = malloc(sizeof(float) * (size_t)n);
  void *d = NULL, *tmp = NULL;
  for (int64_t i = 0; i < n; i++)
    h[i] = (float)(rand_r(&seed) % 20001) / 10000.0f - 1.0f;
  if (cudaMalloc(&d, (size_t)n * es) || cudaMalloc(&tmp, (size_t)n * 4) ||
      cudaMemcpy(tmp, h, (size_t)n * 4, cudaMemcpyHostToDevice))
    d = NULL;
  else if (half)
    nr_cuda_f32_to_f16(tmp, d, n, 0);
  else
    cudaMemcpy(d, tmp, (size_t)n * 4, cudaMemcpyDeviceToDevice);
  cudaDeviceSynchronize();
  cudaFree(tmp);
  free(h);
  return d;
}

/* ---- attention ------------------------------------------------------------------------ */

typedef struct attn_case {
  nr_cuda_attn g;
  void *q, *k, *v, *y;
  int io; /* tensor-core kernel: NR_CUDA_ATTN_*_HALF */
} attn_case;

static cudaError_t run_f32(const void *u, cudaStream_t s) {
  const attn_case *c = u;
  return nr_cuda_attention(&c->g, c->q, c->k, c->v, NULL, c->y, s);
}

static cudaError_t run_tc(const void *u, cudaStream_t s) {
  const attn_case *c = u;
  return nr_cuda_attention_tc(&c->g, c->q, c->k, c->v, NULL, c->y, c->io, s);
}

/* [B, S, H * D] tensors (recognize.attention_heads=fold's layout). */
static double attn_time(int64_t b, int64_t h, int64_t s, int64_t d, int kind) {
  attn_case c = {.g = {.b = b, .hq = h, .hkv = h, .s = s, .t = s, .d = d, .dv = d,
                       .scale = 0.125f}};
  for (int i = 0; i < 3; i++) {
    int64_t *st = i == 0 ? c.g.qs : i == 1 ? c.g.ks : c.g.vs;
    st[0] = h * s * d, st[1] = d, st[2] = h * d;
  }
  memcpy(c.g.ys, c.g.qs, sizeof c.g.ys);
  bool half = kind == 1 || kind == 3; /* 1: staged, 2: staged fp32 io, 3: registers */
  c.io = half ? NR_CUDA_ATTN_Q_HALF | NR_CUDA_ATTN_K_HALF | NR_CUDA_ATTN_V_HALF | NR_CUDA_ATTN_Y_HALF
              : 0;
  c.io |= kind == 1 ? NR_CUDA_ATTN_STAGED : 0;
  int64_t n = b * s * h * d;
  c.q = dev_rand(n, half, 1), c.k = dev_rand(n, half, 2), c.v = dev_rand(n, half, 3);
  c.y = dev_rand(n, half, 4);
  double us = c.q && c.k && c.v && c.y ? time_us(kind == 0 ? run_f32 : run_tc, &c) : -1;
  cudaFree(c.q), cudaFree(c.k), cudaFree(c.v), cudaFree(c.y);
  return us;
}

/* ---- rows and depthwise ------------------------------------------------------------------- */

typedef struct rows_case {
  void *x, *y;
  float *scale;
  int64_t rows, n;
  int half;
} rows_case;

static cudaError_t run_ln(const void *u, cudaStream_t s) {
  const rows_case *c = u;
  return nr_cuda_layernorm(c->x, c->scale, c->scale, c->y, c->rows, c->n, 1e-5f, c->half, s);
}

static cudaError_t run_sm(const void *u, cudaStream_t s) {
  const rows_case *c = u;
  return nr_cuda_softmax(c->x, c->y, c->rows, c->n, 0, c->half, s);
}

static double rows_time(int64_t rows, int64_t n, bool half, bool ln) {
  rows_case c = {dev_rand(rows * n, half, 5), dev_rand(rows * n, half, 6),
                 dev_rand(n, false, 7), rows, n, half ? NR_CUDA_X_HALF | NR_CUDA_Y_HALF : 0};
  double us = c.x && c.y && c.scale ? time_us(ln ? run_ln : run_sm, &c) : -1;
  cudaFree(c.x), cudaFree(c.y), cudaFree(c.scale);
  return us;
}

typedef struct dw_case {
  nr_cuda_dwconv p;
  void *x, *y;
  float *w, *b;
} dw_case;

static cudaError_t run_dw(const void *u, cudaStream_t s) {
  const dw_case *c = u;
  return nr_cuda_dwconv_run(&c->p, c->x, c->w, c->b, c->y, s);
}

static double dw_time(int32_t ch, int32_t hw, int16_t stride, bool nhwc, bool half) {
  int32_t o = (hw + 2 - 3) / stride + 1;
  dw_case c = {.p = {1, ch, hw, hw, o, o, 3, stride, 1, 1, nhwc, half, half, NR_EW_CLIP, 0, 6}};
  c.x = dev_rand((int64_t)ch * hw * hw, half, 8), c.y = dev_rand((int64_t)ch * o * o, half, 9);
  c.w = dev_rand(9 * ch, false, 10), c.b = dev_rand(ch, false, 11);
  double us = c.x && c.y && c.w && c.b ? time_us(run_dw, &c) : -1;
  cudaFree(c.x), cudaFree(c.y), cudaFree(c.w), cudaFree(c.b);
  return us;
}

int main(void) {
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    fprintf(stderr, "nr_cuda_kernel_bench: no usable GPU\n");
    return 1;
  }
  printf("# %s, microseconds per launch (CUDA graph of %d launches, median of %d)\n",
         prop.name, LAUNCHES, REPLAYS);
  printf("| attention B,H,S,D | fp32 kernel | staged fp16 | staged fp32 io | registers fp16 |\n"
         "|---|---|---|---|---|\n");
  static const int64_t shapes[][4] = {{1, 4, 128, 64}, {1, 12, 128, 64}, {32, 12, 128, 64},
                                      {1, 12, 512, 64}, {1, 8, 256, 128}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t *d = shapes[i];
    printf("| %lld,%lld,%lld,%lld | %.2f | %.2f | %.2f | %.2f |\n", (long long)d[0],
           (long long)d[1], (long long)d[2], (long long)d[3], attn_time(d[0], d[1], d[2], d[3], 0),
           attn_time(d[0], d[1], d[2], d[3], 1), attn_time(d[0], d[1], d[2], d[3], 2),
           attn_time(d[0], d[1], d[2], d[3], 3));
  }
  printf("\n| rows x n | LayerNorm fp32 | LayerNorm fp16 | softmax fp32 | softmax fp16 |\n"
         "|---|---|---|---|---|\n");
  static const int64_t rows[][2] = {{128, 768}, {4096, 768}, {1536, 128}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    printf("| %lld x %lld | %.2f | %.2f | %.2f | %.2f |\n", (long long)rows[i][0],
           (long long)rows[i][1], rows_time(rows[i][0], rows[i][1], false, true),
           rows_time(rows[i][0], rows[i][1], true, true),
           rows_time(rows[i][0], rows[i][1], false, false),
           rows_time(rows[i][0], rows[i][1], true, false));
  printf("\n| depthwise 3x3 C,HW,stride | NCHW fp32 | NHWC fp32 | NHWC fp16 |\n|---|---|---|---|\n");
  static const int32_t dws[][3] = {{144, 56, 1}, {144, 56, 2}, {576, 14, 1}, {960, 7, 1}};
  for (size_t i = 0; i < sizeof dws / sizeof dws[0]; i++)
    printf("| %d,%d,%d | %.2f | %.2f | %.2f |\n", dws[i][0], dws[i][1], dws[i][2],
           dw_time(dws[i][0], dws[i][1], (int16_t)dws[i][2], false, false),
           dw_time(dws[i][0], dws[i][1], (int16_t)dws[i][2], true, false),
           dw_time(dws[i][0], dws[i][1], (int16_t)dws[i][2], true, true));
  return 0;
}
