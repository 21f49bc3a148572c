/* qgemm_bench.c - GOP/s (2 ops per multiply-add) of every int8 GEMM micro-kernel of
 * qgemm_ukernels.inc this machine runs against the default fp32 GEMM on the same
 * products, from resnet50 (1x1 convolutions and 3x3 ones as im2col), mobilenet_v2 and
 * bert-base, with each operand in the form the tactics hand it over:
 *   conv 1x1:    fp32 W pre-packed, X raw (packed per call);  int8: W_A kernels, X
 *                float32 quantized while packed
 *   conv im2col: as 1x1, but int8 gets the columns already quantized (u8), as the
 *                im2col tactic builds them
 *   matmul:      fp32 A raw, W pre-packed;  int8: W_B kernels, A quantized while packed
 * Prints one row per (shape, kernel) with the ratio to fp32 measured in the same run;
 * the best of a short time budget counts (the machine is shared). One thread unless
 * --threads N.
 *
 *   nr_qgemm_bench [--threads N] [--budget-ms MS] [--shape SUBSTRING] */
#include "kernels/cpu/gemm/gemm_impl.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "plan/tactic.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { CONV_1X1, CONV_IM2COL, MATMUL } kind;

typedef struct shape {
  const char *what;
  kind kind;
  int64_t m, n, k; /* conv: M = output channels, N = pixels, K = C * kh * kw */
} shape;

static const shape shapes[] = {
    {"resnet50 1x1 64->256 56x56", CONV_1X1, 256, 3136, 64},
    {"resnet50 1x1 256->64 56x56", CONV_1X1, 64, 3136, 256},
    {"resnet50 1x1 512->128 28x28", CONV_1X1, 128, 784, 512},
    {"resnet50 1x1 256->1024 14x14", CONV_1X1, 1024, 196, 256},
    {"resnet50 1x1 1024->256 14x14", CONV_1X1, 256, 196, 1024},
    {"resnet50 1x1 2048->512 7x7", CONV_1X1, 512, 49, 2048},
    {"resnet50 3x3 64ch 56x56", CONV_IM2COL, 64, 3136, 576},
    {"resnet50 3x3 128ch 28x28", CONV_IM2COL, 128, 784, 1152},
    {"resnet50 3x3 256ch 14x14", CONV_IM2COL, 256, 196, 2304},
    {"resnet50 3x3 512ch 7x7", CONV_IM2COL, 512, 49, 4608},
    {"mobilenet_v2 1x1 24->144 56x56", CONV_1X1, 144, 3136, 24},
    {"mobilenet_v2 1x1 96->576 14x14", CONV_1X1, 576, 196, 96},
    {"bert-base MatMul 768x768 (M 128)", MATMUL, 128, 768, 768},
    {"bert-base FFN 768->3072 (M 128)", MATMUL, 128, 3072, 768},
    {"resnet50 FC (batch 1)", MATMUL, 1, 1000, 2048},
};

static clockid_t timer = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(timer, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *alloc64(size_t n) {
  return aligned_alloc(64, (n + 63) / 64 * 64);
}

static float *rnd(int64_t n, float lo, float hi) {
  float *p = alloc64(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    p[i] = lo + (hi - lo) * (float)(rand() % 10001) / 10000.0f;
  return p;
}

typedef struct bench_ctx {
  const shape *s;
  float *w, *x, *c; /* W: M x K (conv) or K x N (matmul); X: K x N or M x K */
  uint8_t *xq;      /* X quantized (im2col columns) */
  nr_threadpool *pool;
  int threads;
  double budget;
} bench_ctx;

/* Repeats fn until the budget is spent; the best time counts. */
#define BEST_OF(x, body)                                                                   \
  ({                                                                                       \
    double best_ = 1e30, end_ = now_s() + (x)->budget;                                     \
    for (int r_ = 0; r_ < 3 || now_s() < end_; r_++) {                                     \
      double t0_ = now_s();                                                                \
      body;                                                                                \
      double dt_ = now_s() - t0_;                                                          \
      best_ = dt_ < best_ ? dt_ : best_;                                                   \
    }                                                                                      \
    best_;                                                                                 \
  })

static double gops(const shape *s, double seconds) {
  return 2.0 * s->m * s->n * s->k / seconds * 1e-9;
}

static double run_f32(const bench_ctx *x) {
  const shape *s = x->s;
  nr_gemm_cfg cfg = nr_gemm_default_cfg(s->m, s->n, s->k);
  bool conv = s->kind != MATMUL;
  nr_gemm_operand w = conv ? (nr_gemm_operand){x->w, s->k, false, false}
                           : (nr_gemm_operand){x->w, s->n, false, false};
  size_t bytes = conv ? nr_gemm_packed_a_size(cfg, s->m, s->k)
                      : nr_gemm_packed_b_size(cfg, s->k, s->n);
  float *packed = alloc64(bytes);
  if (conv)
    nr_gemm_pack_a(cfg, s->m, s->k, w, packed);
  else
    nr_gemm_pack_b(cfg, s->k, s->n, w, packed);
  nr_gemm_operand pw = {packed, 0, false, true};
  nr_gemm_operand xo = {x->x, conv ? s->n : s->k, false, false};
  void *scratch = malloc(nr_gemm_scratch_size(cfg, s->m, s->n, s->k, x->threads));
  double t = BEST_OF(x, nr_gemm(cfg, s->m, s->n, s->k, 1, conv ? pw : xo, conv ? xo : pw,
                                x->c, s->n, NULL, scratch, x->pool, x->threads));
  free(packed), free(scratch);
  return gops(s, t);
}

static double run_q(const bench_ctx *x, int uk) {
  const shape *s = x->s;
  nr_qgemm_cfg cfg = nr_qgemm_default_cfg(uk, s->m, s->n, s->k);
  bool conv = s->kind != MATMUL;
  int64_t ch = conv ? s->m : s->n;
  int8_t *q = malloc((size_t)(ch * s->k));
  float *ws = malloc(sizeof(float) * (size_t)ch),
        *scale = malloc(sizeof(float) * (size_t)ch);
  float *bias = calloc((size_t)ch, sizeof(float));
  int32_t *wsum = malloc(sizeof(int32_t) * (size_t)ch),
          *corr = malloc(sizeof(int32_t) * (size_t)ch);
  if (conv)
    nr_qgemm_quantize_w(ch, s->k, x->w, s->k, 1, q, ws, wsum);
  else
    nr_qgemm_quantize_w(ch, s->k, x->w, 1, s->n, q, ws, wsum);
  void *packed = alloc64(nr_qgemm_packed_w_size(cfg, ch, s->k));
  nr_qgemm_pack_w(cfg, ch, s->k, q, packed);
  int qmax = nr_qgemm_ukernel_get(uk)->qmax, zp = qmax / 4;
  float xs = 2.0f / (float)qmax;
  nr_qgemm_dequant_build(ch, ws, wsum, xs, zp, 1.0f, NULL, 0, 0, scale, corr, bias);
  nr_qgemm_dequant dq = {scale, corr, bias};
  nr_qgemm_act a = {x->x, conv ? s->n : s->k, false, false, 1.0f / xs, zp};
  if (s->kind == CONV_IM2COL)
    a.data = x->xq, a.u8 = true;
  void *scratch = malloc(nr_qgemm_scratch_size(cfg, s->m, s->n, s->k, x->threads));
  double t = BEST_OF(x, nr_qgemm(cfg, s->m, s->n, s->k, packed, a, &dq, x->c, s->n, NULL,
                                 scratch, x->pool, x->threads));
  free(q), free(ws), free(scale), free(bias), free(wsum), free(corr), free(packed);
  free(scratch);
  return gops(s, t);
}

static void bench_shape(const bench_ctx *x) {
  const shape *s = x->s;
  double f32 = run_f32(x);
  printf("%-34s %5lld %5lld %5lld  %-32s %7.1f\n", s->what, (long long)s->m,
         (long long)s->n, (long long)s->k, "fp32 default", f32);
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    bool conv = s->kind != MATMUL;
    if ((u->isa & nr_cpu_isa()) != u->isa || (u->wside == NR_QGEMM_W_A) != conv)
      continue;
    if (u->mr == 1 && s->m > 4)
      continue;
    double g = run_q(x, uk);
    printf("%-34s %5s %5s %5s  %-32s %7.1f  %5.2fx\n", "", "", "", "", u->name, g, g / f32);
  }
}

int main(int argc, char **argv) {
  int threads = 1;
  double budget_ms = 150;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc)
      budget_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--threads N] [--budget-ms MS] [--shape SUBSTRING]\n",
              argv[0]);
      return 2;
    }
  }
  if (threads == 1)
    timer = CLOCK_THREAD_CPUTIME_ID;
  nr_threadpool *pool = threads > 1 ? nr_threadpool_create(threads) : NULL;
  printf("%-34s %5s %5s %5s  %-32s %7s  %6s\n", "product", "M", "N", "K", "kernel", "GOP/s",
         "vs fp32");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const shape *s = &shapes[i];
    if (only && !strstr(s->what, only))
      continue;
    bool conv = s->kind != MATMUL;
    bench_ctx x = {s,
                   rnd(s->k * (conv ? s->m : s->n), -1, 1),
                   rnd((conv ? s->n : s->m) * s->k, -0.5f, 1.5f),
                   alloc64(sizeof(float) * (size_t)(s->m * s->n)),
                   alloc64((size_t)(s->k * s->n)),
                   pool,
                   threads,
                   budget_ms * 1e-3};
    for (int64_t j = 0; j < s->k * s->n; j++)
      x.xq[j] = (uint8_t)(rand() % 128);
    bench_shape(&x);
    free(x.w), free(x.x), free(x.c), free(x.xq);
  }
  nr_threadpool_destroy(pool);
  return 0;
}
