/* gemm_bench.c - GFLOP/s of the nnroute GEMM micro-kernels (every line of
 * gemm_ukernels.inc this machine runs) and of cache-blocking choices against OpenBLAS
 * sgemm, on products from resnet18/50, mobilenet_v2 and bert. By default A is raw
 * (packed on every call) and B pre-packed, as a MatMul/Gemm with constant weights
 * runs; --conv packs A (the conv weights) ahead and B (the im2col columns) on every
 * call, as PLAIN im2col and 1x1 convolutions run. One thread unless --threads N. Prints a table; the best of a short
 * time budget counts (the machine is shared).
 *
 *   nr_gemm_bench [--threads N] [--budget-ms MS] [--conv] [--shape SUBSTRING]
 *                 [--sweep]
 *
 * --shape keeps the shapes whose description or MxNxK contains SUBSTRING; --sweep
 * adds kc, mc and nc variants of the default kernel. NNROUTE_ISA=avx2 shows the
 * AVX2 defaults on an AVX-512 machine. */
#include "kernels/cpu/gemm/gemm_impl.h"
#include "plan/tactic.h"

#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int);

typedef struct shape {
  const char *what;
  int64_t m, n, k;
} shape;

/* Conv products are PLAIN im2col/1x1: M = output channels, N = output pixels,
 * K = input channels x kernel area. */
static const shape shapes[] = {
    {"resnet18 conv3x3 (64ch, 56x56)", 64, 3136, 576},
    {"resnet18 conv3x3 (128ch, 28x28)", 128, 784, 1152},
    {"resnet18 conv3x3 (256ch, 14x14)", 256, 196, 2304},
    {"resnet18 conv3x3 (512ch, 7x7)", 512, 49, 4608},
    {"mobilenet_v2 conv1x1 (24->144, 56x56)", 144, 3136, 24},
    {"mobilenet_v2 conv1x1 (96->576, 14x14)", 576, 196, 96},
    {"bert_tiny FFN up (seq 128)", 128, 1024, 256},
    {"bert_tiny FFN down (seq 128)", 128, 256, 1024},
    {"bert-base QKV (seq 128)", 128, 2304, 768},
    {"resnet50 FC (batch 1)", 1, 1000, 2048},
    {"mobilenet_v2 FC (batch 1)", 1, 1000, 1280},
};

/* With one thread, the thread's CPU time: a neighbour that takes the core away does
 * not count against the kernel (its cache pollution still does). */
static clockid_t timer = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(timer, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *rnd(int64_t n) {
  float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));
  for (int64_t i = 0; i < n; i++)
    p[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
  return p;
}

typedef struct bench_ctx {
  const shape *s;
  float *a, *b, *c;
  nr_threadpool *pool;
  int threads;
  double budget;
  bool conv; /* A pre-packed, B raw */
} bench_ctx;

/* Best GFLOP/s of cfg over the time budget. */
static double run_nr(const bench_ctx *x, nr_gemm_cfg cfg) {
  const shape *s = x->s;
  nr_gemm_operand a = {x->a, s->k, false, false}, b = {x->b, s->n, false, false};
  float *packed;
  if (x->conv) {
    packed = aligned_alloc(64, (nr_gemm_packed_a_size(cfg, s->m, s->k) + 63) / 64 * 64);
    nr_gemm_pack_a(cfg, s->m, s->k, a, packed);
    a = (nr_gemm_operand){packed, 0, false, true};
  } else {
    packed = aligned_alloc(64, (nr_gemm_packed_b_size(cfg, s->k, s->n) + 63) / 64 * 64);
    nr_gemm_pack_b(cfg, s->k, s->n, b, packed);
    b = (nr_gemm_operand){packed, 0, false, true};
  }
  void *scratch = malloc(nr_gemm_scratch_size(cfg, s->m, s->n, s->k, x->threads));
  double best = 1e30, t_end = now_s() + x->budget;
  for (int r = 0; r < 3 || now_s() < t_end; r++) {
    double t0 = now_s();
    nr_gemm(cfg, s->m, s->n, s->k, 1, a, b, x->c, s->n, NULL, scratch, x->pool, x->threads);
    double dt = now_s() - t0;
    best = dt < best ? dt : best;
  }
  free(packed), free(scratch);
  return 2.0 * s->m * s->n * s->k / best * 1e-9;
}

static double run_openblas(const bench_ctx *x) {
  const shape *s = x->s;
  double best = 1e30, t_end = now_s() + x->budget;
  for (int r = 0; r < 3 || now_s() < t_end; r++) {
    double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)s->m, (blasint)s->n,
                (blasint)s->k, 1, x->a, (blasint)s->k, x->b, (blasint)s->n, 0, x->c,
                (blasint)s->n);
    double dt = now_s() - t0;
    best = dt < best ? dt : best;
  }
  return 2.0 * s->m * s->n * s->k / best * 1e-9;
}

static void row(const char *label, const char *kernel, nr_gemm_cfg cfg, double gflops) {
  printf("%-16s %-28s %5d %5d %5d %8.1f\n", label, kernel, cfg.mc, cfg.kc, cfg.nc, gflops);
}

/* Every runnable micro-kernel with the default blocking (mc scaled to its tile), then
 * with --sweep blocking variants of the default kernel. */
static void bench_shape(const bench_ctx *x, bool sweep) {
  const shape *s = x->s;
  char label[64];
  snprintf(label, sizeof label, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
           (long long)s->k);
  printf("-- %s\n", s->what);
  printf("%-16s %-28s %5s %5s %5s %8.1f\n", label, "openblas_sgemm", "-", "-", "-",
         run_openblas(x));
  nr_gemm_cfg d = nr_gemm_default_cfg(s->m, s->n, s->k);
  int tiles = d.mc / nr_gemm_ukernel_get(d.ukernel)->mr;
  for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
    const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
    if ((u->isa & nr_cpu_isa()) != u->isa || (u->mr == 1 && s->m > 4))
      continue;
    nr_gemm_cfg cfg = {(uint16_t)uk, (uint16_t)(tiles * u->mr), d.kc, d.nc};
    char name[40];
    snprintf(name, sizeof name, "%s%s", u->name, uk == d.ukernel ? "*" : "");
    row(label, name, cfg, run_nr(x, cfg));
  }
  if (!sweep || s->m == 1)
    return;
  const char *dn = nr_gemm_ukernel_get(d.ukernel)->name;
  static const uint16_t kcs[] = {128, 192, 256, 384, 512}, tl[] = {4, 6, 8, 12, 16},
                        ncs[] = {512, 1024, 2048};
  int mr = nr_gemm_ukernel_get(d.ukernel)->mr;
  for (int i = 0; i < 5; i++)
    if (kcs[i] != d.kc)
      row(label, dn, (nr_gemm_cfg){d.ukernel, d.mc, kcs[i], d.nc},
          run_nr(x, (nr_gemm_cfg){d.ukernel, d.mc, kcs[i], d.nc}));
  for (int i = 0; i < 5; i++)
    if (tl[i] * mr != d.mc && tl[i] * mr < s->m + mr) {
      nr_gemm_cfg cfg = {d.ukernel, (uint16_t)(tl[i] * mr), d.kc, d.nc};
      row(label, dn, cfg, run_nr(x, cfg));
    }
  for (int i = 0; i < 3; i++)
    if (ncs[i] < s->n) {
      nr_gemm_cfg cfg = {d.ukernel, d.mc, d.kc, ncs[i]};
      row(label, dn, cfg, run_nr(x, cfg));
    }
}

int main(int argc, char **argv) {
  int threads = 1;
  double budget = 0.15;
  bool conv = false, sweep = false;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc)
      budget = atof(argv[++i]) / 1e3;
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
      filter = argv[++i];
    else if (!strcmp(argv[i], "--conv"))
      conv = true;
    else if (!strcmp(argv[i], "--sweep"))
      sweep = true;
    else {
      fprintf(stderr, "usage: nr_gemm_bench [--threads N] [--budget-ms MS] [--conv] "
                      "[--shape SUBSTRING] [--sweep]\n");
      return 2;
    }
  }
  if (threads == 1)
    timer = CLOCK_THREAD_CPUTIME_ID;
  openblas_set_num_threads(threads);
  nr_threadpool *pool = threads > 1 ? nr_threadpool_create(threads) : NULL;
  printf("threads %d; GFLOP/s, best of %.0f ms of %s time; %s; * = default kernel\n\n",
         threads, budget * 1e3, threads == 1 ? "thread CPU" : "wall",
         conv ? "A pre-packed, B packed per call (conv)"
              : "A packed per call, B pre-packed (MatMul)");
  printf("%-16s %-28s %5s %5s %5s %8s\n", "MxNxK", "kernel", "mc", "kc", "nc", "GFLOP/s");
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape *s = &shapes[si];
    char mnk[64];
    snprintf(mnk, sizeof mnk, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
             (long long)s->k);
    if (filter && !strstr(s->what, filter) && !strstr(mnk, filter))
      continue;
    bench_ctx x = {s, rnd(s->m * s->k), rnd(s->k * s->n), rnd(s->m * s->n), pool, threads,
                   budget, conv};
    bench_shape(&x, sweep);
    free(x.a), free(x.b), free(x.c);
  }
  nr_threadpool_destroy(pool);
  return 0;
}
