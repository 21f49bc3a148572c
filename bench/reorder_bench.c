/* reorder_bench.c - GB/s (bytes read + bytes written, per second) of the float32
 * layout reorders the layout pass inserts, in all six directions between PLAIN, NHWC
 * and NCHW8C, on the activation shapes where resnet50, mobilenet_v2 and the image
 * input meet a layout change. Three kernels per row, measured in the same run:
 *   naive     the element-at-a-time loop reorder.c used before the tiled kernels
 *             (kept here as the baseline: one index computation per element)
 *   portable  nr_reorder_f32_isa with no ISA bits (8x8-blocked scalar tiles)
 *   avx2      nr_reorder_f32_isa with NR_ISA_AVX2 (8x8 register transposes)
 * plus the ratio avx2 / naive. The best of a short time budget counts (the machine is
 * shared). One thread unless --threads N.
 *
 *   reorder_bench [--threads N] [--budget-ms MS] [--shape SUBSTRING] */
#include "kernels/cpu/conv/conv_internal.h"
#include "kernels/cpu/conv/transpose.h"
#include "plan/tactic.h"
#include "util/threadpool.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
  const char *what;
  int64_t dims[4];
} shape;

static const shape shapes[] = {
    {"image input 3x224x224", {1, 3, 224, 224}},
    {"resnet50 conv1 out 64x112x112", {1, 64, 112, 112}},
    {"resnet50 layer1 256x56x56", {1, 256, 56, 56}},
    {"resnet50 layer1 hz 320x56x56", {1, 320, 56, 56}},
    {"resnet50 layer4 2048x7x7", {1, 2048, 7, 7}},
    {"mobilenet_v2 stem 32x112x112", {1, 32, 112, 112}},
    {"mobilenet_v2 head 1280x7x7", {1, 1280, 7, 7}},
    {"odd 2x13x17x19", {2, 13, 17, 19}},
};

static const nr_layout dirs[6][2] = {
    {NR_LAYOUT_PLAIN, NR_LAYOUT_NHWC},   {NR_LAYOUT_NHWC, NR_LAYOUT_PLAIN},
    {NR_LAYOUT_PLAIN, NR_LAYOUT_NCHW8C}, {NR_LAYOUT_NCHW8C, NR_LAYOUT_PLAIN},
    {NR_LAYOUT_NHWC, NR_LAYOUT_NCHW8C},  {NR_LAYOUT_NCHW8C, NR_LAYOUT_NHWC}};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the baseline: the element loop reorder.c had ------------------------------------ */

typedef struct naive_job {
  const float *src;
  float *dst;
  nr_layout from, to;
  int64_t n, c, h, w, cb;
} naive_job;

static int64_t at(const naive_job *j, nr_layout l, int64_t n, int64_t c, int64_t h, int64_t w) {
  switch (l) {
  case NR_LAYOUT_NHWC: return ((n * j->h + h) * j->w + w) * j->c + c;
  case NR_LAYOUT_NCHW8C: return (((n * j->cb + c / 8) * j->h + h) * j->w + w) * 8 + c % 8;
  default: return ((n * j->c + c) * j->h + h) * j->w + w;
  }
}

static void naive_task(void *arg, int64_t begin, int64_t end, int thread) {
  const naive_job *j = arg;
  for (int64_t i = begin; i < end; i++) {
    int64_t h = i % j->h, nb = i / j->h, b = nb % j->cb, n = nb / j->cb;
    int64_t c0 = b * 8, c1 = c0 + 8 < j->c ? c0 + 8 : j->c;
    if (j->to == NR_LAYOUT_NCHW8C && c1 - c0 < 8)
      memset(j->dst + at(j, NR_LAYOUT_NCHW8C, n, c0, h, 0), 0, sizeof(float) * 8 * (size_t)j->w);
    for (int64_t c = c0; c < c1; c++)
      for (int64_t w = 0; w < j->w; w++)
        j->dst[at(j, j->to, n, c, h, w)] = j->src[at(j, j->from, n, c, h, w)];
  }
}

static void naive_reorder(const float *src, nr_layout from, float *dst, nr_layout to,
                          const int64_t *d, nr_threadpool *pool) {
  naive_job j = {src, dst, from, to, d[0], d[1], d[2], d[3], nr_ceil8(d[1]) / 8};
  nr_parallel_for(pool, j.n * j.cb * j.h, 4, 0, naive_task, &j);
}

/* ---- timing --------------------------------------------------------------------------- */

typedef struct run_cfg {
  const float *src;
  float *dst;
  nr_layout from, to;
  const int64_t *dims;
  nr_threadpool *pool;
} run_cfg;

/* kind 0 naive, 1 portable, 2 avx2: best seconds per call within budget. */
static double best_time(const run_cfg *r, int kind, double budget) {
  double best = 1e30, t_end = now_s() + budget;
  int reps = 0;
  do {
    double t0 = now_s();
    if (kind == 0)
      naive_reorder(r->src, r->from, r->dst, r->to, r->dims, r->pool);
    else
      nr_reorder_f32_isa(r->src, r->from, r->dst, r->to, r->dims, r->pool,
                         kind == 2 ? NR_ISA_AVX2 : 0);
    double dt = now_s() - t0;
    best = dt < best ? dt : best;
    reps++;
  } while (now_s() < t_end || reps < 3);
  return best;
}

static uint64_t phys(nr_layout l, const int64_t *d) {
  int64_t c = l == NR_LAYOUT_NCHW8C ? nr_ceil8(d[1]) : d[1];
  return (uint64_t)(d[0] * c * d[2] * d[3]) * sizeof(float);
}

int main(int argc, char **argv) {
  int threads = 1;
  double budget = 0.15;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc)
      budget = atof(argv[++i]) / 1000.0;
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
      filter = argv[++i];
    else {
      fprintf(stderr, "usage: reorder_bench [--threads N] [--budget-ms MS] [--shape S]\n");
      return 2;
    }
  }
  bool avx2 = (nr_cpu_isa() & NR_ISA_AVX2) != 0;
  nr_threadpool *pool = threads > 1 ? nr_threadpool_create(threads) : NULL;
  printf("reorder GB/s (read + written), %d thread(s), best of %.0f ms per kernel\n",
         threads, budget * 1e3);
  printf("%-32s %-16s %9s %9s %9s %8s\n", "shape", "direction", "naive", "portable",
         avx2 ? "avx2" : "(no avx2)", "avx2/nv");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    if (filter && !strstr(shapes[s].what, filter))
      continue;
    const int64_t *d = shapes[s].dims;
    size_t cap = (size_t)phys(NR_LAYOUT_NCHW8C, d);
    float *src = aligned_alloc(64, (cap + 63) / 64 * 64), *dst = aligned_alloc(64, (cap + 63) / 64 * 64);
    for (size_t i = 0; i < cap / sizeof(float); i++)
      src[i] = (float)(i % 1000) * 0.5f;
    for (int k = 0; k < 6; k++) {
      run_cfg r = {src, dst, dirs[k][0], dirs[k][1], d, pool};
      double bytes = (double)(phys(r.from, d) + phys(r.to, d)), gbs[3] = {0, 0, 0};
      for (int kind = 0; kind < 3; kind++)
        if (kind < 2 || avx2)
          gbs[kind] = bytes / best_time(&r, kind, budget) / 1e9;
      char dir[32];
      snprintf(dir, sizeof dir, "%s>%s", nr_layout_name(r.from), nr_layout_name(r.to));
      printf("%-32s %-16s %9.2f %9.2f %9.2f %7.1fx\n", shapes[s].what, dir, gbs[0], gbs[1],
             gbs[2], avx2 ? gbs[2] / gbs[0] : 0.0);
    }
    free(src), free(dst);
  }
  nr_threadpool_destroy(pool);
  return 0;
}
