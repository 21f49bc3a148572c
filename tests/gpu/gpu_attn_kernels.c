/* gpu_attn_kernels.c - the tensor-core attention kernels called directly
 * (nr_cuda_attention_tc), against a host reference in double precision on the same
 * fp16-rounded Q, K and V: the register-resident kernel on the shapes that pick each
 * of its block sizes (1, 2 and 4 warps), key counts around its 64-key tiles, 3-D and
 * 4-D layouts, grouped heads, float and bool masks (with a fully masked row, which
 * must give zeros), causality and fp32 or fp16 output; the staged kernel
 * (NR_CUDA_ATTN_STAGED) on the same data as a second opinion.
 *
 * Key decision: kernel level rather than through a compiled graph (gpu_ops.c's
 * transformer cases do that), so the block-size choice, tile edges and the masks are
 * hit on purpose, and a shape the dispatcher would send elsewhere fails loudly
 * (nr_cuda_attention_fl_ok must accept every case here). The output buffer carries
 * guard elements on both sides. */
#include "gpu_close.h"
#include "rng.h"
#include "unit.h"

#include "backends/cuda/cuda_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64

typedef struct fl_case {
  int64_t b, hq, hkv, s, t, d;
  int mask;     /* 0 none, 1 float [s, t], 2 bool [b, 1, s, t] with row 3 all false */
  int causal;
  int four_d;   /* [B, H, S, D] instead of [B, S, H * D] */
  int y_half;
} fl_case;

static void strides(int64_t *st, bool four_d, int64_t heads, int64_t seq, int64_t hd) {
  st[0] = heads * seq * hd;
  st[1] = four_d ? seq * hd : hd;
  st[2] = four_d ? hd : heads * hd;
}

/* n seeded floats in [-1, 1) rounded through fp16 on the device: *dev holds the fp16
 * copy, the returned host array the same values as floats (NULL on failure). */
static float *half_data(int64_t n, unsigned seed, float spread, void **dev) {
  float *h = malloc(sizeof(float) * (size_t)n);
  float *tmp = NULL;
  *dev = NULL;
  if (!h)
    return NULL;
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < n; i++)
    h[i] = spread * ((float)nr_rng_int(&rng, 0, 20000) / 10000.0f - 1.0f);
  bool ok = !cudaMalloc(dev, (size_t)n * 2) && !cudaMalloc((void **)&tmp, (size_t)n * 4) &&
            !cudaMemcpy(tmp, h, (size_t)n * 4, cudaMemcpyHostToDevice) &&
            !nr_cuda_f32_to_f16(tmp, *dev, n, 0) && !nr_cuda_f16_to_f32(*dev, tmp, n, 0) &&
            !cudaMemcpy(h, tmp, (size_t)n * 4, cudaMemcpyDeviceToHost);
  cudaFree(tmp);
  if (!ok) {
    free(h);
    return NULL;
  }
  return h;
}

static void reference(const fl_case *c, const nr_cuda_attn *g, const float *q, const float *k,
                      const float *v, const void *mask, double *y) {
  double *p = malloc(sizeof(double) * (size_t)c->t);
  for (int64_t b = 0; b < c->b; b++)
    for (int64_t h = 0; h < c->hq; h++)
      for (int64_t i = 0; i < c->s; i++) {
        int64_t kvh = h / (c->hq / c->hkv);
        double m = -INFINITY;
        for (int64_t j = 0; j < c->t; j++) {
          double s = 0;
          for (int64_t e = 0; e < c->d; e++)
            s += (double)q[b * g->qs[0] + h * g->qs[1] + i * g->qs[2] + e] *
                 k[b * g->ks[0] + kvh * g->ks[1] + j * g->ks[2] + e];
          s *= g->scale;
          int64_t at = b * g->ms[0] + h * g->ms[1] + i * g->ms[2] + j;
          if (c->causal && j > i)
            s = -INFINITY;
          else if (c->mask == 1)
            s += ((const float *)mask)[at];
          else if (c->mask == 2 && !((const unsigned char *)mask)[at])
            s = -INFINITY;
          p[j] = s;
          m = s > m ? s : m;
        }
        double sum = 0;
        for (int64_t j = 0; j < c->t; j++)
          sum += p[j] = m == -INFINITY ? 0.0 : exp(p[j] - m);
        for (int64_t e = 0; e < c->d; e++) {
          double acc = 0;
          for (int64_t j = 0; j < c->t; j++)
            acc += p[j] * v[b * g->vs[0] + kvh * g->vs[1] + j * g->vs[2] + e];
          y[b * g->ys[0] + h * g->ys[1] + i * g->ys[2] + e] = sum > 0 ? acc / sum : 0.0;
        }
      }
  free(p);
}

static void run_case(nr_test_state *t, const fl_case *c, bool staged) {
  unsigned seed = (unsigned)(c->s * 131 + c->t * 17 + c->d + c->hq * 3 + c->mask);
  nr_cuda_attn g = {.b = c->b, .hq = c->hq, .hkv = c->hkv, .s = c->s, .t = c->t, .d = c->d,
                    .dv = c->d, .causal = c->causal, .mask = c->mask,
                    .scale = 1.0f / sqrtf((float)c->d)};
  strides(g.qs, c->four_d, c->hq, c->s, c->d);
  strides(g.ks, c->four_d, c->hkv, c->t, c->d);
  strides(g.vs, c->four_d, c->hkv, c->t, c->d);
  strides(g.ys, c->four_d, c->hq, c->s, c->d);
  int64_t nq = c->b * c->hq * c->s * c->d, nk = c->b * c->hkv * c->t * c->d;
  int64_t nm = c->mask == 1 ? c->s * c->t : c->mask == 2 ? c->b * c->s * c->t : 0;
  if (c->mask == 1)
    g.ms[2] = c->t;
  else if (c->mask == 2)
    g.ms[0] = c->s * c->t, g.ms[2] = c->t;
  void *dq, *dk, *dv, *dmask = NULL, *dy = NULL;
  float *q = half_data(nq, seed, 2.0f, &dq), *k = half_data(nk, seed + 1, 2.0f, &dk);
  float *v = half_data(nk, seed + 2, 1.0f, &dv);
  void *mask = nm ? malloc((size_t)nm * (c->mask == 1 ? 4 : 1)) : NULL;
  double *want = malloc(sizeof(double) * (size_t)nq);
  size_t es = c->y_half ? 2 : 4, ybytes = (size_t)(nq + 2 * GUARD) * es;
  uint8_t *got = malloc(ybytes);
  REQUIRE(q && k && v && want && got && (!nm || mask), "setup failed (seed %u)", seed);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < nm; i++) {
    if (c->mask == 1)
      ((float *)mask)[i] = (float)nr_rng_int(&rng, -3, 3);
    else
      ((unsigned char *)mask)[i] = (i / c->t) % c->s != 3 && nr_rng_u32(&rng) % 5 != 0;
  }
  memset(got, 0x5a, ybytes);
  bool ok = !cudaMalloc(&dy, ybytes) && !cudaMemcpy(dy, got, ybytes, cudaMemcpyHostToDevice) &&
            (!nm || (!cudaMalloc(&dmask, (size_t)nm * (c->mask == 1 ? 4 : 1)) &&
                     !cudaMemcpy(dmask, mask, (size_t)nm * (c->mask == 1 ? 4 : 1),
                                 cudaMemcpyHostToDevice)));
  REQUIRE(ok, "device buffers (seed %u)", seed);
  void *y = (uint8_t *)dy + GUARD * es;
  int io = NR_CUDA_ATTN_Q_HALF | NR_CUDA_ATTN_K_HALF | NR_CUDA_ATTN_V_HALF |
           (c->y_half ? NR_CUDA_ATTN_Y_HALF : 0) | (staged ? NR_CUDA_ATTN_STAGED : 0);
  if (!staged)
    CHECK(nr_cuda_attention_fl_ok(&g, dq, dk, dv, y, io), "the register kernel refuses "
          "b %lld s %lld t %lld d %lld", (long long)c->b, (long long)c->s, (long long)c->t,
          (long long)c->d);
  cudaError_t e = nr_cuda_attention_tc(&g, dq, dk, dv, dmask, y, io, 0);
  if (!e)
    e = cudaDeviceSynchronize();
  CHECK(!e, "launch: %s", cudaGetErrorString(e));
  if (!e && !cudaMemcpy(got, dy, ybytes, cudaMemcpyDeviceToHost)) {
    reference(c, &g, q, k, v, mask, want);
    int bad = 0;
    float *gy = NULL;
    if (c->y_half) { /* back through the device's conversion */
      float *tmp = NULL;
      gy = malloc(sizeof(float) * (size_t)nq);
      if (gy && !cudaMalloc((void **)&tmp, (size_t)nq * 4) &&
          !nr_cuda_f16_to_f32(y, tmp, nq, 0))
        cudaMemcpy(gy, tmp, (size_t)nq * 4, cudaMemcpyDeviceToHost);
      cudaFree(tmp);
    } else {
      gy = malloc(sizeof(float) * (size_t)nq);
      if (gy)
        memcpy(gy, got + GUARD * es, (size_t)nq * 4);
    }
    for (int64_t i = 0; gy && i < nq && bad < 5; i++) {
      if (!gt_close(gy[i], want[i], 3e-3, 2e-2)) {
        CHECK(false, "%s b %lld hq %lld s %lld t %lld d %lld: y[%lld] = %g, want %g (seed %u)",
              staged ? "staged" : "registers", (long long)c->b, (long long)c->hq,
              (long long)c->s, (long long)c->t, (long long)c->d, (long long)i, gy[i], want[i],
              seed);
        bad++;
      }
    }
    for (size_t i = 0; i < GUARD * es; i++)
      CHECK(got[i] == 0x5a && got[ybytes - 1 - i] == 0x5a, "guard byte %zu overwritten", i);
    free(gy);
  }
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dy), cudaFree(dmask);
  free(q), free(k), free(v), free(mask), free(want), free(got);
}

static const fl_case CASES[] = {
    {1, 12, 12, 128, 128, 64, 0, 0, 0, 1}, /* BERT-base at batch 1: 1 warp a block */
    {1, 12, 12, 128, 128, 64, 0, 0, 0, 0}, /* fp32 output */
    {2, 4, 2, 100, 77, 32, 1, 0, 0, 1},    /* grouped heads, float mask, 77 keys */
    {1, 2, 2, 17, 200, 128, 2, 0, 1, 1},   /* 4-D, bool mask with an empty row, D 128 */
    {3, 8, 8, 129, 129, 64, 0, 1, 0, 1},   /* causal, rows past a tile: 2 warps */
    {1, 1, 1, 1, 1, 64, 0, 0, 0, 0},       /* one query, one key */
    {6, 16, 16, 192, 64, 32, 0, 0, 1, 1},  /* 4 warps a block, exactly one key tile */
    {1, 2, 1, 40, 65, 128, 1, 1, 0, 0},    /* causal with a mask, 65 keys, fp32 out */
};

NR_TEST(gpu_attention_register_kernel) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    run_case(t, &CASES[i], false);
}

NR_TEST(gpu_attention_staged_kernel) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    if (nr_cuda_attention_tc_smem(CASES[i].d, CASES[i].d, CASES[i].t) <= NR_CUDA_ATTN_TC_SMEM_MAX)
      run_case(t, &CASES[i], true);
}
