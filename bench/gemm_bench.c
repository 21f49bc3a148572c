/* gemm_bench.c - GFLOP/s of the nnroute GEMM micro-kernels (gemm_ukernels.inc) and
 * of cache-blocking choices against OpenBLAS sgemm, on products from resnet50 and
 * bert. B is pre-packed, as for weights in an engine; one thread unless --threads N.
 * Prints a table; the best of a short time budget counts (the machine is shared).
 *
 *   nr_gemm_bench [--threads N] [--budget-ms MS] */
#include "compiler/plan.h"
#include "kernels/cpu/gemm/gemm_impl.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int);

typedef struct shape {
  const char *what;
  int64_t m, n, k;
} shape;

static const shape shapes[] = {
    {"resnet50 conv3x3 (64ch, 56x56)", 64, 3136, 576},
    {"resnet50 conv3x3 (128ch, 28x28)", 128, 784, 1152},
    {"bert-base FFN slice (seq 128)", 128, 768, 256},
    {"bert-base QKV (seq 128)", 128, 2304, 768},
    {"resnet50 FC (batch 1)", 1, 1000, 2048},
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
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
} bench_ctx;

/* Best GFLOP/s of cfg over the time budget. */
static double run_nr(const bench_ctx *x, nr_gemm_cfg cfg) {
  const shape *s = x->s;
  float *pb = aligned_alloc(64, (nr_gemm_packed_b_size(cfg, s->k, s->n) + 63) / 64 * 64);
  nr_gemm_pack_b(cfg, s->k, s->n, (nr_gemm_operand){x->b, s->n, false, false}, pb);
  void *scratch = malloc(nr_gemm_scratch_size(cfg, s->m, s->n, s->k, x->threads));
  nr_gemm_operand a = {x->a, s->k, false, false}, b = {pb, 0, false, true};
  double best = 1e30, t_end = now_s() + x->budget;
  for (int r = 0; r < 3 || now_s() < t_end; r++) {
    double t0 = now_s();
    nr_gemm(cfg, s->m, s->n, s->k, 1, a, b, x->c, s->n, NULL, scratch, x->pool, x->threads);
    double dt = now_s() - t0;
    best = dt < best ? dt : best;
  }
  free(pb), free(scratch);
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

int main(int argc, char **argv) {
  int threads = 1;
  double budget = 0.15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--budget-ms"))
      budget = atof(argv[i + 1]) / 1e3;
  }
  openblas_set_num_threads(threads);
  nr_threadpool *pool = threads > 1 ? nr_threadpool_create(threads) : NULL;
  printf("threads %d; GFLOP/s, best of %.0f ms; B pre-packed for nnroute\n\n", threads,
         budget * 1e3);
  printf("%-34s %-26s %5s %5s %5s %8s\n", "shape (MxNxK)", "kernel", "mc", "kc", "nc",
         "GFLOP/s");
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const shape *s = &shapes[si];
    bench_ctx x = {s, rnd(s->m * s->k), rnd(s->k * s->n), rnd(s->m * s->n), pool, threads,
                   budget};
    char label[96];
    snprintf(label, sizeof label, "%lldx%lldx%lld", (long long)s->m, (long long)s->n,
             (long long)s->k);
    printf("-- %s\n", s->what);
    printf("%-34s %-26s %5s %5s %5s %8.1f\n", label, "openblas_sgemm", "-", "-", "-",
           run_openblas(&x));
    nr_gemm_cfg d = nr_gemm_default_cfg(s->m, s->n, s->k);
    for (int uk = 0; uk < nr_gemm_ukernel_count(); uk++) {
      const nr_gemm_ukernel *u = nr_gemm_ukernel_get(uk);
      if ((u->isa & nr_cpu_isa()) != u->isa || (u->mr == 1 && s->m > 4))
        continue;
      nr_gemm_cfg cfg = {(uint16_t)uk, (uint16_t)(d.mc / 6 * u->mr), d.kc, d.nc};
      printf("%-34s %-26s %5d %5d %5d %8.1f\n", label, u->name, cfg.mc, cfg.kc, cfg.nc,
             run_nr(&x, cfg));
    }
    /* blocking around the default, on the default kernel */
    static const uint16_t kcs[] = {128, 384, 512}, mcs[] = {48, 144}, ncs[] = {1024};
    for (int i = 0; i < 3 && s->m > 1; i++) {
      nr_gemm_cfg cfg = d;
      cfg.kc = kcs[i];
      printf("%-34s %-26s %5d %5d %5d %8.1f\n", label, nr_gemm_ukernel_get(d.ukernel)->name,
             cfg.mc, cfg.kc, cfg.nc, run_nr(&x, cfg));
    }
    for (int i = 0; i < 3 && s->m > 1; i++) {
      nr_gemm_cfg cfg = d;
      if (i < 2)
        cfg.mc = mcs[i];
      else
        cfg.nc = ncs[0];
      printf("%-34s %-26s %5d %5d %5d %8.1f\n", label, nr_gemm_ukernel_get(d.ukernel)->name,
             cfg.mc, cfg.kc, cfg.nc, run_nr(&x, cfg));
    }
    free(x.a), free(x.b), free(x.c);
  }
  nr_threadpool_destroy(pool);
  return 0;
}
