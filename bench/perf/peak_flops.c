/* peak_flops.c - the machine's measured peak fp32 FMA throughput, the denominator of the
 * "% peak" columns in docs/performance.md (bench/perf/run_perf.py runs it at the start
 * and the end of the session whose models it is compared with).
 *
 * Key decision: measure, don't compute. Nominal peak (cores x GHz x flop/cycle) is wrong
 * on a shared, turbo-scaled, virtualised machine; what a kernel can reach right now is
 * what 12 independent FMA chains per thread reach right now. Twelve, because the FMA
 * latency (4 cycles) times the FMA ports (2) needs at least 8 chains in flight, and 12
 * leave headroom without spilling the 16 ymm registers. The reference ISA is AVX2+FMA,
 * the one nnroute's own kernels use; where the CPU has AVX-512 the same loop is measured
 * on zmm registers too and reported beside it, because libraries compared with nnroute
 * (ONNX Runtime's MLAS, OpenBLAS SkylakeX) do use it and can exceed the AVX2 peak.
 *
 * Each thread is timed by its own CPU time (CLOCK_THREAD_CPUTIME_ID), not the wall clock,
 * and the threads' rates are summed: the development machine is shared, and a peak that
 * dropped whenever someone compiled would make "% peak" measure the neighbours. The peak
 * is what the cores can do; the latencies it is compared with, in wall time, carry the
 * contention. Each thread count is still measured several times and the best repetition
 * kept: noise only ever lowers a peak.
 *
 * usage: nr_peak_flops [--threads N] [--ms MS] [--reps R] [--json]
 * Reports 1 thread and N threads (default: all online CPUs) for each ISA. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setaffinity_np and CPU_SET, when built without CMake */
#endif
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_ACC 12
#define MAX_LANES 16
#define CHUNK_ITERS 100000L /* ~0.5 ms between clock reads, so reading it costs nothing */

typedef void (*chains_fn)(float state[N_ACC][MAX_LANES], long iters);

/* acc = acc * m + a converges to a fixed point, so no chain overflows or goes denormal
 * (denormals take a slow microcode path and would understate the peak). The chains live
 * in `state` between calls: a function of its arguments alone would be "const" to the
 * compiler, which would then call it once per thread instead of once per chunk. One
 * macro writes both widths so the two ISAs run exactly the same loop. */
#define CHAINS(name, isa_attr, vec, set1, load, store, fmadd)                                \
  __attribute__((target(isa_attr))) static void name(float s[N_ACC][MAX_LANES], long n) {\
    const vec m = set1(0.999999f), a = set1(1e-6f);                                         \
    vec c0 = load(s[0]), c1 = load(s[1]), c2 = load(s[2]), c3 = load(s[3]);                 \
    vec c4 = load(s[4]), c5 = load(s[5]), c6 = load(s[6]), c7 = load(s[7]);                 \
    vec c8 = load(s[8]), c9 = load(s[9]), c10 = load(s[10]), c11 = load(s[11]);             \
    for (long i = 0; i < n; i++) {                                                          \
      c0 = fmadd(c0, m, a), c1 = fmadd(c1, m, a), c2 = fmadd(c2, m, a);                     \
      c3 = fmadd(c3, m, a), c4 = fmadd(c4, m, a), c5 = fmadd(c5, m, a);                     \
      c6 = fmadd(c6, m, a), c7 = fmadd(c7, m, a), c8 = fmadd(c8, m, a);                     \
      c9 = fmadd(c9, m, a), c10 = fmadd(c10, m, a), c11 = fmadd(c11, m, a);                 \
    }                                                                                       \
    store(s[0], c0), store(s[1], c1), store(s[2], c2), store(s[3], c3);                     \
    store(s[4], c4), store(s[5], c5), store(s[6], c6), store(s[7], c7);                     \
    store(s[8], c8), store(s[9], c9), store(s[10], c10), store(s[11], c11);                 \
  }

CHAINS(chains_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps,
       _mm256_fmadd_ps)
CHAINS(chains_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps,
       _mm512_fmadd_ps)

static int has_avx2(void) {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }

typedef struct isa {
  const char *name;
  int (*supported)(void); /* __builtin_cpu_supports takes only literals, hence a function */
  chains_fn fn;
  int lanes;
} isa;

static const isa isas[] = {
    {"avx2+fma", has_avx2, chains_avx2, 8},
    {"avx512f", has_avx512, chains_avx512, 16},
};
#define N_ISAS ((int)(sizeof isas / sizeof isas[0]))

typedef struct worker {
  pthread_t tid;
  const isa *isa;
  int cpu;
  double ms;             /* how long to run, in this thread's CPU time */
  pthread_barrier_t *go; /* all threads start together so they really overlap */
  double flops, cpu_ms;
  float state[N_ACC][MAX_LANES];
} worker;

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  cpu_set_t set; /* pinning keeps two threads off one core when the OS would not */
  CPU_ZERO(&set);
  CPU_SET(w->cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  for (int k = 0; k < N_ACC; k++)
    for (int l = 0; l < MAX_LANES; l++)
      w->state[k][l] = 0.1f + 0.01f * k;
  pthread_barrier_wait(w->go);
  double t0 = thread_cpu_ms(), t = t0;
  long chunks = 0;
  while (t - t0 < w->ms) {
    w->isa->fn(w->state, CHUNK_ITERS);
    chunks++;
    t = thread_cpu_ms();
  }
  w->flops = (double)chunks * CHUNK_ITERS * N_ACC * w->isa->lanes * 2; /* mul + add */
  w->cpu_ms = t - t0;
  return NULL;
}

/* One repetition at `threads` threads running together (two threads on one core would
 * show in their rates even in CPU time); returns GFLOP/s. */
static double run_once(const isa *is, int threads, double ms, int n_cpus) {
  worker *w = calloc((size_t)threads, sizeof *w);
  pthread_barrier_t go;
  if (!w || pthread_barrier_init(&go, NULL, (unsigned)threads)) {
    free(w);
    return 0;
  }
  for (int i = 0; i < threads; i++) {
    w[i] = (worker){.isa = is, .cpu = i % n_cpus, .ms = ms, .go = &go};
    if (pthread_create(&w[i].tid, NULL, worker_main, &w[i])) {
      /* The started threads wait on a barrier that will never open: a bench program,
       * not the library, so exiting is the clean way out. */
      fprintf(stderr, "nr_peak_flops: could not start %d threads\n", threads);
      exit(1);
    }
  }
  double gflops = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(w[i].tid, NULL);
    gflops += w[i].cpu_ms > 0 ? w[i].flops / (w[i].cpu_ms * 1e6) : 0;
  }
  pthread_barrier_destroy(&go);
  free(w);
  return gflops;
}

static double best_of(const isa *is, int threads, double ms, int reps, int n_cpus) {
  double best = 0;
  for (int r = 0; r < reps; r++) {
    double g = run_once(is, threads, ms, n_cpus);
    best = g > best ? g : best;
  }
  return best;
}

static void usage(FILE *f) {
  fprintf(f, "usage: nr_peak_flops [--threads N] [--ms MS] [--reps R] [--json]\n\n"
             "Measures fp32 FMA throughput (12 independent chains per thread) with AVX2\n"
             "and, where the CPU has it, AVX-512, at 1 thread and at N threads (default:\n"
             "all online CPUs); each thread runs MS ms of its CPU time (default 300) and\n"
             "its rate is taken over that time; best of R repetitions (default 3).\n"
             "Prints GFLOP/s; --json prints {\"results\": [{\"isa\",\n"
             "\"threads\", \"gflops\"}...]}.\n");
}

static int parse(int argc, char **argv, int *threads, double *ms, int *reps, int *json) {
  for (int i = 1; i < argc; i++) {
    int v = i + 1 < argc;
    if (!strcmp(argv[i], "--threads") && v)
      *threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ms") && v)
      *ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && v)
      *reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json"))
      *json = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      exit(0);
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (*threads < 1 || *reps < 1 || *ms <= 0) {
    usage(stderr);
    return 2;
  }
  return 0;
}

int main(int argc, char **argv) {
  int n_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 3, json = 0;
  n_cpus = n_cpus < 1 ? 1 : n_cpus;
  int threads = n_cpus;
  double ms = 300;
  if (parse(argc, argv, &threads, &ms, &reps, &json))
    return 2;
  __builtin_cpu_init();
  if (!has_avx2()) {
    fprintf(stderr, "nr_peak_flops: this CPU has no AVX2+FMA; no peak to measure\n");
    return 1;
  }
  int counts[2] = {1, threads}, n_counts = threads > 1 ? 2 : 1;
  if (json)
    printf("{\"accumulators\": %d, \"cpus\": %d, \"ms\": %g, \"reps\": %d, \"results\": [",
           N_ACC, n_cpus, ms, reps);
  else
    printf("peak fp32 FMA throughput, %d chains per thread, best of %d x %g ms CPU time\n"
           "  %-10s %7s %10s\n", N_ACC, reps, ms, "isa", "threads", "GFLOP/s");
  const char *sep = "";
  for (int k = 0; k < N_ISAS; k++) {
    if (!isas[k].supported())
      continue;
    for (int c = 0; c < n_counts; c++) {
      double g = best_of(&isas[k], counts[c], ms, reps, n_cpus);
      if (json)
        printf("%s{\"isa\": \"%s\", \"threads\": %d, \"gflops\": %.3f}", sep, isas[k].name,
               counts[c], g);
      else
        printf("  %-10s %7d %10.1f\n", isas[k].name, counts[c], g);
      sep = ", ";
      fflush(stdout);
    }
  }
  if (json)
    printf("]}\n");
  return 0;
}
