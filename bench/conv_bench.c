/* conv_bench.c - GFLOP/s of the PLAIN fp32 convolution tactics (nr_tactics_conv rows
 * this machine runs) on the conv layers of resnet18/50, squeezenet1_1 and the
 * mobilenet/efficientnet stems, each through the tactic's own prepare() and run() on
 * a one-step plan, as an engine runs it. Prints one table; per shape and tactic the
 * best of a short time budget counts (the machine is shared), and the last column is
 * the time relative to nr_f32_conv_im2col measured in the same run (for depthwise
 * layers, relative to nr_f32_conv_dw__avx2, or the first tactic listed without AVX2).
 *
 *   nr_conv_bench [--threads N] [--budget-ms MS] [--shape SUBSTRING] [--tactic SUBSTRING]
 *                 [--act relu|none|clip|silu|hard_swish|...]   (the fused activation)
 *                 [--cold-weights]   (W, its packed forms and Y evicted before each run)
 *
 * Key decision: the plan is built by hand (slots X, W, B, Y and one FusedConv step
 * with a ReLU), so a new tactic row shows up here without any registration; the
 * weights are those of a seeded generator, and only PLAIN tactics are timed (a
 * blocked layout's reorders would be part of its cost in a model, not here). */
#include "ir/fused.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "plan/tactic.h"
#include "util/threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

extern const nr_tactic nr_tactics_conv[];

typedef struct shape {
  const char *what;
  int c, h, m, k, s, pad;
  int group; /* 0: 1; else c (depthwise) */
} shape;

static const shape shapes[] = {
    {"resnet18 stem 7x7/2", 3, 224, 64, 7, 2, 3},
    {"resnet18 3x3 64ch 56x56", 64, 56, 64, 3, 1, 1},
    {"resnet18 3x3/2 64->128", 64, 56, 128, 3, 2, 1},
    {"resnet18 3x3 128ch 28x28", 128, 28, 128, 3, 1, 1},
    {"resnet18 3x3 256ch 14x14", 256, 14, 256, 3, 1, 1},
    {"resnet18 3x3 512ch 7x7", 512, 7, 512, 3, 1, 1},
    {"resnet18 3x3/2 128->256 28->14", 128, 28, 256, 3, 2, 1},
    {"resnet18 3x3/2 256->512 14->7", 256, 14, 512, 3, 2, 1},
    {"resnet50 3x3/2 256ch 28->14", 256, 28, 256, 3, 2, 1},
    {"resnet50 3x3/2 512ch 14->7", 512, 14, 512, 3, 2, 1},
    {"resnet50 3x3/2 128ch 56->28", 128, 56, 128, 3, 2, 1},
    {"resnet18 1x1/2 256->512", 256, 14, 512, 1, 2, 0},
    {"resnet50 1x1 256->64 56x56", 256, 56, 64, 1, 1, 0},
    {"resnet50 1x1 64->256 56x56", 64, 56, 256, 1, 1, 0},
    {"resnet50 1x1 1024->256 14x14", 1024, 14, 256, 1, 1, 0},
    {"resnet50 1x1 64->64 56x56", 64, 56, 64, 1, 1, 0},
    {"resnet50 1x1 64->320 56x56 (conv1+downsample)", 64, 56, 320, 1, 1, 0},
    {"resnet50 1x1 256->128 56x56", 256, 56, 128, 1, 1, 0},
    {"resnet50 1x1 128->512 28x28", 128, 28, 512, 1, 1, 0},
    {"resnet50 1x1 512->128 28x28", 512, 28, 128, 1, 1, 0},
    {"resnet50 1x1 512->256 28x28", 512, 28, 256, 1, 1, 0},
    {"resnet50 1x1 256->1024 14x14", 256, 14, 1024, 1, 1, 0},
    {"resnet50 1x1 1024->512 14x14", 1024, 14, 512, 1, 1, 0},
    {"resnet50 1x1 512->2048 7x7", 512, 7, 2048, 1, 1, 0},
    {"resnet50 1x1 2048->512 7x7", 2048, 7, 512, 1, 1, 0},
    {"resnet50 1x1/2 256->512 56x56", 256, 56, 512, 1, 2, 0},
    {"resnet50 1x1/2 512->1024 28x28", 512, 28, 1024, 1, 2, 0},
    {"resnet50 1x1/2 1024->2048 14x14", 1024, 14, 2048, 1, 2, 0},
    {"squeezenet 1x1 512->1000 13x13", 512, 13, 1000, 1, 1, 0},
    {"squeezenet 1x1 64->16 55x55", 64, 55, 16, 1, 1, 0},
    {"squeezenet 1x1 16->64 55x55", 16, 55, 64, 1, 1, 0},
    {"squeezenet 1x1 256->32 27x27", 256, 27, 32, 1, 1, 0},
    {"squeezenet 1x1 32->128 27x27", 32, 27, 128, 1, 1, 0},
    {"squeezenet 1x1 384->48 13x13", 384, 13, 48, 1, 1, 0},
    {"squeezenet 1x1 64->256 13x13", 64, 13, 256, 1, 1, 0},
    {"squeezenet 3x3 16->64 55x55", 16, 55, 64, 3, 1, 1},
    {"squeezenet 3x3 64->256 13x13", 64, 13, 256, 3, 1, 1},
    {"squeezenet 3x3 48->192 13x13", 48, 13, 192, 3, 1, 1},
    {"squeezenet 3x3 32->128 27x27", 32, 27, 128, 3, 1, 1},
    {"squeezenet stem 3x3/2 3->64", 3, 224, 64, 3, 2, 0},
    {"mobilenet_v2 stem 3x3/2", 3, 224, 32, 3, 2, 1},
    {"mobilenet_v2 1x1 16->96 112", 16, 112, 96, 1, 1, 0},
    {"mobilenet_v2 1x1 24->144 56", 24, 56, 144, 1, 1, 0},
    {"mobilenet_v2 1x1 144->24 56", 144, 56, 24, 1, 1, 0},
    {"mobilenet_v2 1x1 32->192 28", 32, 28, 192, 1, 1, 0},
    {"mobilenet_v2 1x1 192->32 28", 192, 28, 32, 1, 1, 0},
    {"mobilenet_v2 1x1 64->384 14", 64, 14, 384, 1, 1, 0},
    {"mobilenet_v2 1x1 96->576 14", 96, 14, 576, 1, 1, 0},
    {"mobilenet_v2 1x1 160->960 7", 160, 7, 960, 1, 1, 0},
    {"mobilenet_v2 1x1 320->1280 7", 320, 7, 1280, 1, 1, 0},
    {"mobilenet_v2 1x1 960->320 7", 960, 7, 320, 1, 1, 0},
    {"mobilenet_v2 1x1 960->160 7", 960, 7, 160, 1, 1, 0},
    {"mobilenet_v2 1x1 32->16 112", 32, 112, 16, 1, 1, 0},
    {"mobilenet_v2 dw 3x3/2 96ch 112", 96, 112, 96, 3, 2, 1, 1},
    {"mobilenet_v2 dw 3x3 144ch 56", 144, 56, 144, 3, 1, 1, 1},
    {"mobilenet_v2 dw 3x3 192ch 28", 192, 28, 192, 3, 1, 1, 1},
    {"mobilenet_v2 dw 3x3 576ch 14", 576, 14, 576, 3, 1, 1, 1},
    {"mobilenet_v2 dw 3x3 960ch 7", 960, 7, 960, 3, 1, 1, 1},
    {"efficientnet dw 5x5/2 240ch 28", 240, 28, 240, 5, 2, 2, 1},
    {"efficientnet dw 5x5 672ch 14", 672, 14, 672, 5, 1, 2, 1},
    {"efficientnet dw 5x5 1152ch 7", 1152, 7, 1152, 5, 1, 2, 1},
    {"mobilenet_v2 dw 3x3 32ch 112", 32, 112, 32, 3, 1, 1, 1},
    {"mobilenet_v2 dw 3x3/2 144ch 56", 144, 56, 144, 3, 2, 1, 1},
    {"mobilenet_v2 dw 3x3/2 576ch 14", 576, 14, 576, 3, 2, 1, 1},
    {"efficientnet dw 5x5/2 144ch 56", 144, 56, 144, 5, 2, 2, 1},
    {"efficientnet dw 5x5 240ch 28", 240, 28, 240, 5, 1, 2, 1},
    {"efficientnet dw 3x3 480ch 14", 480, 14, 480, 3, 1, 1, 1},
    {"efficientnet dw 5x5/2 672ch 14", 672, 14, 672, 5, 2, 2, 1},
    {"mobilenet_v3 dw 3x3/2 16ch 112", 16, 112, 16, 3, 2, 1, 1},
    {"mobilenet_v3 dw 5x5/2 96ch 28", 96, 28, 96, 5, 2, 2, 1},
    {"mobilenet_v3 dw 5x5 576ch 7", 576, 7, 576, 5, 1, 2, 1},
};

static const char *act_name = "relu"; /* --act: FusedConv's activation */
static bool cold_weights;              /* --cold-weights */

/* Evicts [p, p + n) from every cache level (untimed, before a run). */
static void flush(const void *p, uint64_t n) {
#if defined(__x86_64__)
  for (uint64_t i = 0; i < n; i += 64)
    _mm_clflush((const char *)p + i);
  _mm_mfence();
#else
  (void)p, (void)n;
#endif
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct bench_plan {
  nr_plan plan;
  nr_slot slots[4];
  nr_step step;
  nr_node node;
  nr_attr attrs[5];
  int64_t pads[4], strides[2], dil[2];
} bench_plan;

static void build(bench_plan *b, const shape *s, const float *w, const float *bias) {
  memset(b, 0, sizeof *b);
  int64_t oh = (s->h + 2 * s->pad - s->k) / s->s + 1;
  int64_t xd[4] = {1, s->c, s->h, s->h}, wd[4] = {s->m, s->group ? 1 : s->c, s->k, s->k},
          yd[4] = {1, s->m, oh, oh};
  nr_slot *sl = b->slots;
  sl[0] = (nr_slot){.name = "X", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(sl[0].dims, xd, sizeof xd);
  sl[1] = (nr_slot){.name = "W", .dtype = NR_DTYPE_FLOAT, .rank = 4, .kind = NR_SLOT_CONST};
  memcpy(sl[1].dims, wd, sizeof wd);
  nr_plan_add_weights(&b->plan, w, sizeof(float) * (size_t)(wd[0] * wd[1] * wd[2] * wd[3]),
                      &sl[1].offset, NULL);
  sl[2] = (nr_slot){.name = "B", .dtype = NR_DTYPE_FLOAT, .rank = 1, .kind = NR_SLOT_CONST};
  sl[2].dims[0] = s->m;
  nr_plan_add_weights(&b->plan, bias, sizeof(float) * (size_t)s->m, &sl[2].offset, NULL);
  sl[3] = (nr_slot){.name = "Y", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(sl[3].dims, yd, sizeof yd);
  b->plan.slots = sl;
  b->plan.n_slots = 4;
  for (int i = 0; i < 4; i++)
    b->pads[i] = s->pad;
  b->strides[0] = b->strides[1] = s->s;
  b->dil[0] = b->dil[1] = 1;
  nr_attr *a = b->attrs;
  a[0] = (nr_attr){.name = "pads", .type = NR_ATTR_INTS, .n = 4, .ints = b->pads};
  a[1] = (nr_attr){.name = "strides", .type = NR_ATTR_INTS, .n = 2, .ints = b->strides};
  a[2] = (nr_attr){.name = "dilations", .type = NR_ATTR_INTS, .n = 2, .ints = b->dil};
  a[3] = (nr_attr){.name = "group", .type = NR_ATTR_INT, .i = s->group ? s->c : 1};
  a[4] = (nr_attr){.name = "activation", .type = NR_ATTR_STRING, .s = (char *)act_name,
                    .s_len = strlen(act_name)};
  b->node = (nr_node){.name = "conv", .op_type = "FusedConv", .domain = NR_DOMAIN,
                      .opset = 1, .n_attrs = 5, .attrs = b->attrs};
  b->step.n_in = 3;
  b->step.n_out = 1;
  b->step.in[0] = 0, b->step.in[1] = 1, b->step.in[2] = 2, b->step.out[0] = 3;
}

/* Best seconds per run of tac on s within budget, or a negative value when the tactic
 * does not support the shape. */
static double time_tactic(const nr_tactic *tac, const shape *s, const float *x,
                          const float *w, const float *bias, float *y, double budget,
                          nr_threadpool *pool) {
  bench_plan b;
  build(&b, s, w, bias);
  nr_error err = {0};
  nr_tactic_ctx c = {&b.plan, &b.node, &b.step, NULL, &err};
  double best = -1.0;
  if (!tac->supports(&c))
    goto done;
  b.step.tactic = tac;
  if (tac->prepare(&c, &b.plan, &b.step)) {
    fprintf(stderr, "%s: prepare failed: %s\n", tac->id, err.message);
    goto done;
  }
  void *scratch = aligned_alloc(64, (b.step.scratch + 127) / 64 * 64);
  void *in[3] = {(void *)x, b.plan.weights + b.slots[1].offset,
                 b.plan.weights + b.slots[2].offset};
  void *out[1] = {y};
  const nr_slot *ins[3] = {&b.slots[0], &b.slots[1], &b.slots[2]}, *outs[1] = {&b.slots[3]};
  nr_exec_args a = {&b.plan, &b.step, &b.node, in, out, ins, outs,
                    b.step.packed_size ? b.plan.weights + b.step.packed_offset : NULL,
                    scratch, pool, &err};
  double end = now_s() + budget;
  for (int it = 0; it < 3 || now_s() < end; it++) {
    if (cold_weights) { /* as in a model, whose weights outgrow L3: W from memory */
      flush(b.plan.weights, b.plan.weights_size);
      flush(y, sizeof(float) * (uint64_t)(b.slots[3].dims[1] * b.slots[3].dims[2] *
                                          b.slots[3].dims[3])); /* and Y not cached */
    }
    double t0 = now_s();
    tac->run(&a);
    double d = now_s() - t0;
    if (best < 0 || d < best)
      best = d;
  }
  free(scratch);
done:
  free(b.plan.weights);
  return best;
}

int main(int argc, char **argv) {
  int threads = 1;
  double budget = 0.3;
  const char *only = NULL, *tonly = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--budget-ms") && i + 1 < argc)
      budget = atof(argv[++i]) / 1000.0;
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
      only = argv[++i];
    else if (!strcmp(argv[i], "--tactic") && i + 1 < argc)
      tonly = argv[++i];
    else if (!strcmp(argv[i], "--act") && i + 1 < argc)
      act_name = argv[++i];
    else if (!strcmp(argv[i], "--cold-weights"))
      cold_weights = true;
    else {
      fprintf(stderr, "usage: nr_conv_bench [--threads N] [--budget-ms MS] "
                      "[--shape SUBSTRING] [--tactic SUBSTRING] [--act NAME] "
                      "[--cold-weights]\n");
      return 2;
    }
  }
  nr_threadpool *pool = nr_threadpool_create(threads);
  unsigned seed = 1;
  printf("%-30s %-32s %9s %8s %9s\n", "shape", "tactic", "ms", "GFLOP/s", "/base");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const shape *s = &shapes[i];
    if (only && !strstr(s->what, only))
      continue;
    int64_t oh = (s->h + 2 * s->pad - s->k) / s->s + 1;
    int64_t xn = (int64_t)s->c * s->h * s->h,
            wn = (int64_t)s->m * (s->group ? 1 : s->c) * s->k * s->k;
    float *x = malloc(sizeof(float) * (size_t)xn), *w = malloc(sizeof(float) * (size_t)wn);
    float *bias = malloc(sizeof(float) * (size_t)s->m);
    float *y = aligned_alloc(64, sizeof(float) * (size_t)((s->m * oh * oh + 15) / 16 * 16));
    for (int64_t j = 0; j < xn; j++)
      x[j] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
    for (int64_t j = 0; j < wn; j++)
      w[j] = (float)(rand_r(&seed) % 2001) / 1000.0f - 1.0f;
    for (int j = 0; j < s->m; j++)
      bias[j] = 0.01f * (float)j;
    double flops = 2.0 * (double)wn * (double)(oh * oh), base = -1.0;
    const char *bid = s->group ? "nr_f32_conv_dw__avx2" : "nr_f32_conv_im2col";
    for (int pass = 0; pass < 2; pass++) /* the baseline first */
    for (const nr_tactic *t = nr_tactics_conv; t->id; t++) {
      if ((pass == 0) != !strcmp(t->id, bid))
        continue;
      if (strcmp(t->op_type, "FusedConv") || (t->isa & ~nr_cpu_isa()) ||
          t->layout != NR_LAYOUT_PLAIN || !strcmp(t->id, "nr_f32_conv_direct") ||
          (tonly && !strstr(t->id, tonly) && strcmp(t->id, bid)))
        continue;
      double sec = time_tactic(t, s, x, w, bias, y, budget, pool);
      if (sec < 0)
        continue;
      if (!strcmp(t->id, bid) || base < 0)
        base = sec;
      char rel[16] = "-";
      if (base > 0)
        snprintf(rel, sizeof rel, "%.2f", sec / base);
      printf("%-30s %-32s %9.3f %8.1f %9s\n", s->what, t->id, sec * 1e3, flops / sec * 1e-9,
             rel);
    }
    free(x), free(w), free(bias), free(y);
  }
  nr_threadpool_destroy(pool);
  return 0;
}
