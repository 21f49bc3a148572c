/* kernels_attn.cu - fused attention, fp32 (cuda_kernels.h: nr_cuda_attention).
 *
 * Key decision: flash-attention order without tensor cores. A block of 4 warps takes
 * 8 query rows of one (batch, head), 2 per warp (more blocks than rows per block: a
 * batch-1 BERT has few heads), and walks the keys in tiles of 32
 * staged in shared memory (K rows padded by one float so lane j reading key j hits
 * its own bank). Per tile, lane j computes the score of key j for each of the warp's
 * rows, the row maximum and sum come from shuffles, and every lane accumulates its
 * slice of the output (dims lane, lane + 32, ...) from P broadcast by shuffle and V
 * read row-wise from shared memory. The running maximum rescales the partial output
 * when it grows (online softmax), so the scores never leave registers and any key
 * count works. A row whose keys are all masked gives zeros, as in the reference. */
#include "backends/cuda/cuda_kernels.h"

#include <math.h>

namespace {

constexpr int kWarps = 4, kRowsPerWarp = 2, kTile = 32;
constexpr int kRows = kWarps * kRowsPerWarp;

struct smem_layout {
  int64_t k_off, v_off, q_off, bytes;
};

__host__ __device__ inline smem_layout layout_of(int64_t d, int64_t dv) {
  smem_layout l;
  l.k_off = 0;
  l.v_off = kTile * (d + 1);
  l.q_off = l.v_off + kTile * dv;
  l.bytes = (l.q_off + kRows * d) * (int64_t)sizeof(float);
  return l;
}

template <int DC> /* output dims per lane: DC * 32 >= dv */
__global__ void __launch_bounds__(kWarps * 32)
    attn_kernel(const nr_cuda_attn g, const float *q, const float *k, const float *v,
                const void *mask, float *y) {
  extern __shared__ float sm[];
  smem_layout L = layout_of(g.d, g.dv);
  float *ks = sm + L.k_off, *vs = sm + L.v_off, *qs = sm + L.q_off;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (g.hq / g.hkv);
  int64_t row0 = (int64_t)blockIdx.x * kRows;
  const float *qb = q + b * g.qs[0] + h * g.qs[1];
  const float *kb = k + b * g.ks[0] + kvh * g.ks[1];
  const float *vb = v + b * g.vs[0] + kvh * g.vs[1];
  for (int64_t e = threadIdx.x; e < kRows * g.d; e += blockDim.x) { /* scaled Q rows */
    int64_t r = e / g.d, c = e % g.d;
    qs[e] = row0 + r < g.s ? qb[(row0 + r) * g.qs[2] + c] * g.scale : 0.0f;
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DC];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < DC; c++)
      acc[r][c] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < g.t; j0 += kTile) {
    __syncthreads(); /* the previous tile is consumed (and Q is staged) */
    int64_t nt = g.t - j0 < kTile ? g.t - j0 : kTile;
    for (int64_t e = threadIdx.x; e < kTile * g.d; e += blockDim.x) {
      int64_t j = e / g.d, c = e % g.d;
      ks[j * (g.d + 1) + c] = j < nt ? kb[(j0 + j) * g.ks[2] + c] : 0.0f;
    }
    for (int64_t e = threadIdx.x; e < kTile * g.dv; e += blockDim.x) {
      int64_t j = e / g.dv, c = e % g.dv;
      vs[j * g.dv + c] = j < nt ? vb[(j0 + j) * g.vs[2] + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; r++) {
      int rr = warp * kRowsPerWarp + r;
      int64_t i = row0 + rr;
      if (i >= g.s) /* uniform over the warp */
        continue;
      float sc = -INFINITY;
      int64_t j = j0 + lane;
      if (lane < nt && !(g.causal && j > i)) {
        const float *qr = qs + rr * g.d, *kr = ks + lane * (g.d + 1);
        float dot = 0.0f;
        for (int64_t c = 0; c < g.d; c++)
          dot += qr[c] * kr[c];
        sc = dot;
        if (g.mask) {
          int64_t at = b * g.ms[0] + h * g.ms[1] + i * g.ms[2] + j;
          if (g.mask == 2)
            sc = ((const unsigned char *)mask)[at] ? sc : -INFINITY;
          else
            sc += ((const float *)mask)[at];
        }
      }
      float tm = sc;
      for (int o = 16; o > 0; o >>= 1)
        tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
      float mn = fmaxf(m[r], tm);
      if (mn == -INFINITY) /* every key so far masked: nothing to add */
        continue;
      float p = sc == -INFINITY ? 0.0f : expf(sc - mn);
      float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
      float ps = p;
      for (int o = 16; o > 0; o >>= 1)
        ps += __shfl_xor_sync(0xffffffffu, ps, o);
      l[r] = l[r] * alpha + ps;
      m[r] = mn;
#pragma unroll
      for (int c = 0; c < DC; c++)
        acc[r][c] *= alpha;
      for (int jj = 0; jj < nt; jj++) {
        float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int c = 0; c < DC; c++) {
          int64_t col = lane + 32 * c;
          if (col < g.dv)
            acc[r][c] += pj * vs[jj * g.dv + col];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; r++) {
    int64_t i = row0 + warp * kRowsPerWarp + r;
    if (i >= g.s)
      continue;
    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    float *yr = y + b * g.ys[0] + h * g.ys[1] + i * g.ys[2];
#pragma unroll
    for (int c = 0; c < DC; c++) {
      int64_t col = lane + 32 * c;
      if (col < g.dv)
        yr[col] = acc[r][c] * inv;
    }
  }
}

template <int DC>
cudaError_t launch(const nr_cuda_attn *g, const float *q, const float *k, const float *v,
                   const void *mask, float *y, cudaStream_t s) {
  smem_layout L = layout_of(g->d, g->dv);
  if (L.bytes > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(attn_kernel<DC>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)L.bytes);
    if (e != cudaSuccess)
      return e;
  }
  dim3 grid((unsigned)((g->s + kRows - 1) / kRows), (unsigned)g->hq, (unsigned)g->b);
  attn_kernel<DC><<<grid, kWarps * 32, (size_t)L.bytes, s>>>(*g, q, k, v, mask, y);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t nr_cuda_attention(const nr_cuda_attn *g, const float *q, const float *k,
                                         const float *v, const void *mask, float *y,
                                         cudaStream_t s) {
  if (g->b <= 0 || g->hq <= 0 || g->s <= 0)
    return cudaSuccess;
  if (g->dv <= 32)
    return launch<1>(g, q, k, v, mask, y, s);
  if (g->dv <= 64)
    return launch<2>(g, q, k, v, mask, y, s);
  if (g->dv <= 128)
    return launch<4>(g, q, k, v, mask, y, s);
  if (g->dv <= 256)
    return launch<8>(g, q, k, v, mask, y, s);
  return cudaErrorInvalidValue;
}
