/* gpu_attn_f32.c - the two fp32 attention kernels called directly: the row-wise one
 * (nr_cuda_attention) and the register-tiled one (nr_cuda_attention_tiled,
 * cuda.attention.fp32=tiled), against a host reference in double precision on the
 * same seeded Q, K and V: head sizes 32, 64 and 128, key counts around the 32-key
 * tiles (1, 31, 33, 77, 128), query counts around the tiled kernel's 32-row blocks,
 * 3-D and 4-D layouts, grouped heads, float and bool masks (with a fully masked row,
 * which must give zeros), causality, and a BERT-base layer at batch 4.
 *
 * Key decision: kernel level, like gpu_attn_kernels.c, so the tile edges are hit on
 * purpose whatever the dispatcher's heuristic would pick; the tolerance is fp32's
 * (2e-5 + 1e-4 |ref|), so a wrong rescale or a lost key shows. The output buffer
 * carries guard elements on both sides, and nr_cuda_attention_tiled_ok must refuse
 * a head size the tiled kernel has no instance for. */
#include "gpu_close.h"
#include "rng.h"
#include "unit.h"

#include "backends/cuda/cuda_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64

typedef struct f32_case {
  int64_t b, hq, hkv, s, t, d;
  int mask;   /* 0 none, 1 float [s, t], 2 bool [b, 1, s, t] with row 3 all false */
  int causal;
  int four_d; /* [B, H, S, D] instead of [B, S, H * D] */
} f32_case;

static void strides(int64_t *st, bool four_d, int64_t heads, int64_t seq, int64_t hd) {
  st[0] = heads * seq * hd;
  st[1] = four_d ? seq * hd : hd;
  st[2] = four_d ? hd : heads * hd;
}

static float *seeded(int64_t n, unsigned seed, float spread) {
  float *h = malloc(sizeof(float) * (size_t)n);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; h && i < n; i++)
    h[i] = spread * ((float)nr_rng_int(&rng, 0, 20000) / 10000.0f - 1.0f);
  return h;
}

static void *to_device(const void *h, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1))
    return NULL;
  if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)) {
    cudaFree(d);
    return NULL;
  }
  return d;
}

static void reference(const f32_case *c, const nr_cuda_attn *g, const float *q, const float *k,
                      const float *v, const void *mask, double *y) {
  double *p = malloc(sizeof(double) * (size_t)c->t);
  for (int64_t b = 0; p && b < c->b; b++)
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

static void run_case(nr_test_state *t, const f32_case *c, bool tiled) {
  unsigned seed = (unsigned)(c->s * 131 + c->t * 17 + c->d + c->hq * 3 + c->mask + 7);
  nr_cuda_attn g = {.b = c->b, .hq = c->hq, .hkv = c->hkv, .s = c->s, .t = c->t, .d = c->d,
                    .dv = c->d, .causal = c->causal, .mask = c->mask,
                    .scale = 1.0f / sqrtf((float)c->d)};
  strides(g.qs, c->four_d, c->hq, c->s, c->d);
  strides(g.ks, c->four_d, c->hkv, c->t, c->d);
  strides(g.vs, c->four_d, c->hkv, c->t, c->d);
  strides(g.ys, c->four_d, c->hq, c->s, c->d);
  int64_t nq = c->b * c->hq * c->s * c->d, nk = c->b * c->hkv * c->t * c->d;
  int64_t nm = c->mask == 1 ? c->s * c->t : c->mask == 2 ? c->b * c->s * c->t : 0;
  size_t mbytes = (size_t)nm * (c->mask == 1 ? 4 : 1);
  if (c->mask == 1)
    g.ms[2] = c->t;
  else if (c->mask == 2)
    g.ms[0] = c->s * c->t, g.ms[2] = c->t;
  float *q = seeded(nq, seed, 2.0f), *k = seeded(nk, seed + 1, 2.0f);
  float *v = seeded(nk, seed + 2, 1.0f);
  void *mask = nm ? malloc(mbytes) : NULL;
  double *want = malloc(sizeof(double) * (size_t)nq);
  size_t ybytes = (size_t)(nq + 2 * GUARD) * 4;
  float *got = malloc(ybytes);
  REQUIRE(q && k && v && want && got && (!nm || mask), "setup failed (seed %u)", seed);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < nm; i++) {
    if (c->mask == 1)
      ((float *)mask)[i] = (float)nr_rng_int(&rng, -3, 3);
    else
      ((unsigned char *)mask)[i] = (i / c->t) % c->s != 3 && nr_rng_u32(&rng) % 5 != 0;
  }
  memset(got, 0x5a, ybytes);
  void *dq = to_device(q, (size_t)nq * 4), *dk = to_device(k, (size_t)nk * 4);
  void *dv = to_device(v, (size_t)nk * 4), *dy = to_device(got, ybytes);
  void *dmask = nm ? to_device(mask, mbytes) : NULL;
  REQUIRE(dq && dk && dv && dy && (!nm || dmask), "device buffers (seed %u)", seed);
  float *y = (float *)dy + GUARD;
  if (tiled)
    CHECK(nr_cuda_attention_tiled_ok(&g), "the tiled kernel refuses d %lld", (long long)c->d);
  cudaError_t e = tiled ? nr_cuda_attention_tiled(&g, dq, dk, dv, dmask, y, 0)
                        : nr_cuda_attention(&g, dq, dk, dv, dmask, y, 0);
  if (!e)
    e = cudaDeviceSynchronize();
  CHECK(!e, "launch: %s", cudaGetErrorString(e));
  if (!e && !cudaMemcpy(got, dy, ybytes, cudaMemcpyDeviceToHost)) {
    reference(c, &g, q, k, v, mask, want);
    int bad = 0;
    for (int64_t i = 0; i < nq && bad < 5; i++) {
      if (!gt_close(got[GUARD + i], want[i], 2e-5, 1e-4)) {
        CHECK(false, "%s b %lld hq %lld s %lld t %lld d %lld: y[%lld] = %.9g, want %.9g "
              "(seed %u)", tiled ? "tiled" : "rowwise", (long long)c->b, (long long)c->hq,
              (long long)c->s, (long long)c->t, (long long)c->d, (long long)i, got[GUARD + i],
              want[i], seed);
        bad++;
      }
    }
    const uint8_t *gb = (const uint8_t *)got;
    for (size_t i = 0; i < GUARD * 4; i++)
      CHECK(gb[i] == 0x5a && gb[ybytes - 1 - i] == 0x5a, "guard byte %zu overwritten", i);
  }
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dy), cudaFree(dmask);
  free(q), free(k), free(v), free(mask), free(want), free(got);
}

static const f32_case CASES[] = {
    {4, 12, 12, 128, 128, 64, 0, 0, 0}, /* a BERT-base layer at batch 4 */
    {2, 12, 12, 128, 128, 64, 1, 0, 0}, /* with a float mask */
    {2, 4, 2, 100, 77, 32, 1, 0, 0},    /* grouped heads, 77 keys, rows past 3 blocks */
    {1, 2, 2, 17, 200, 128, 2, 0, 1},   /* 4-D, bool mask with an empty row, D 128 */
    {3, 8, 8, 33, 33, 64, 0, 1, 0},     /* causal, one key and one row past a tile */
    {1, 1, 1, 1, 1, 64, 0, 0, 0},       /* one query, one key */
    {2, 3, 3, 31, 31, 32, 2, 1, 1},     /* causal with a bool mask, 31 rows and keys */
};

NR_TEST(gpu_attention_f32_rowwise) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    run_case(t, &CASES[i], false);
}

NR_TEST(gpu_attention_f32_tiled) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    run_case(t, &CASES[i], true);
  nr_cuda_attn odd = {.b = 1, .hq = 1, .hkv = 1, .s = 4, .t = 4, .d = 48, .dv = 48};
  CHECK(!nr_cuda_attention_tiled_ok(&odd), "the tiled kernel has no D 48 instance");
  odd.d = 64, odd.dv = 32;
  CHECK(!nr_cuda_attention_tiled_ok(&odd), "the tiled kernel needs D == Dv");
}
