/* kernels_attn_f32.cu - the register-tiled fp32 attention kernel
 * (nr_cuda_attention_tiled), the `tiled` value of cuda.attention.fp32: exact fp32
 * attention for many (batch, head) pairs, where the row-wise kernel of kernels_attn.cu
 * is bound by shared-memory reads (one operand read per multiply-add).
 *
 * Key decision: reuse every shared-memory read across 8 query rows. A block of 4 warps
 * takes 32 query rows of one (batch, head), 8 per warp, and walks the keys in tiles of
 * 32 (K rows padded by one float so lane j reading key j hits its own bank). For the
 * scores, lane j holds key j's column and reads each Q row's next 4 dims as one float4
 * broadcast, so 4 K reads and 8 Q reads feed 32 multiply-adds; for P V, each warp
 * writes its 8 x 32 probabilities to shared memory and lane c reads V's dims c,
 * c + 32, ... of 4 keys and the 8 rows' 4 probabilities as float4 broadcasts, so
 * 4 * D/32 V reads and 8 P reads feed 32 * D/32 multiply-adds. D == Dv is a template
 * parameter (32, 64 or 128) so every loop unrolls; other head sizes stay on the
 * row-wise kernel. Online softmax as there: the running maximum rescales the partial
 * output, the scores never leave registers, any key count works, and a row whose keys
 * are all masked gives zeros. Each warp reduces its 8 rows' maxima and sums with
 * interleaved shuffles (8 independent chains), which is why 8 rows a warp and not 16:
 * more rows would need more registers than the 4-blocks-a-multiprocessor target. */
#include "backends/cuda/kernels_common.cuh"

namespace {

constexpr int kW = 4, kR = 8, kRows = kW * kR, kKeys = 32;

__host__ __device__ constexpr int64_t tiled_floats(int d) {
  return (int64_t)kRows * d + kKeys * (d + 1) + kKeys * d + kW * kR * kKeys;
}

template <int D>
__global__ void __launch_bounds__(kW * 32)
    attn_tiled_kernel(const nr_cuda_attn g, const float *q, const float *k, const float *v,
                      const void *mask, float *y) {
  constexpr int DC = D / 32, LDK = D + 1;
  extern __shared__ __align__(16) float sm[];
  float *qs = sm, *ks = qs + kRows * D, *vs = ks + kKeys * LDK, *ps = vs + kKeys * D;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (g.hq / g.hkv);
  int64_t row0 = (int64_t)blockIdx.x * kRows;
  const float *qb = q + b * g.qs[0] + h * g.qs[1];
  const float *kb = k + b * g.ks[0] + kvh * g.ks[1];
  const float *vb = v + b * g.vs[0] + kvh * g.vs[1];
  int64_t qrs = g.qs[2], krs = g.ks[2], vrs = g.vs[2];
#pragma unroll 4
  for (int e = threadIdx.x; e < kRows * D; e += kW * 32) { /* scaled Q rows */
    int r = e / D, c = e % D;
    qs[e] = row0 + r < g.s ? qb[(row0 + r) * qrs + c] * g.scale : 0.0f;
  }
  float m[kR], l[kR], acc[kR][DC];
#pragma unroll
  for (int r = 0; r < kR; r++) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < DC; c++)
      acc[r][c] = 0.0f;
  }
  const float *qw = qs + warp * kR * D, *kr = ks + lane * LDK;
  float *pw = ps + warp * kR * kKeys;
  for (int64_t j0 = 0; j0 < g.t; j0 += kKeys) {
    __syncthreads(); /* the previous tile is consumed (and Q is staged) */
    int nt = g.t - j0 < kKeys ? (int)(g.t - j0) : kKeys;
#pragma unroll 4
    for (int e = threadIdx.x; e < kKeys * D; e += kW * 32) {
      int j = e / D, c = e % D;
      bool in = j < nt;
      ks[j * LDK + c] = in ? kb[(j0 + j) * krs + c] : 0.0f;
      vs[e] = in ? vb[(j0 + j) * vrs + c] : 0.0f;
    }
    __syncthreads();
    float s[kR];
#pragma unroll
    for (int r = 0; r < kR; r++)
      s[r] = 0.0f;
#pragma unroll 4
    for (int c = 0; c < D; c += 4) {
      float k0 = kr[c], k1 = kr[c + 1], k2 = kr[c + 2], k3 = kr[c + 3];
#pragma unroll
      for (int r = 0; r < kR; r++) {
        float4 qv = *(const float4 *)(qw + r * D + c);
        s[r] = fmaf(qv.x, k0, s[r]);
        s[r] = fmaf(qv.y, k1, s[r]);
        s[r] = fmaf(qv.z, k2, s[r]);
        s[r] = fmaf(qv.w, k3, s[r]);
      }
    }
    int64_t j = j0 + lane;
    float tm[kR];
#pragma unroll
    for (int r = 0; r < kR; r++) {
      int64_t i = row0 + warp * kR + r;
      float sc = s[r];
      if (lane >= nt || (g.causal && j > i)) {
        sc = -INFINITY;
      } else if (g.mask && i < g.s) {
        int64_t at = b * g.ms[0] + h * g.ms[1] + i * g.ms[2] + j;
        if (g.mask == 2)
          sc = ((const unsigned char *)mask)[at] ? sc : -INFINITY;
        else
          sc += ((const float *)mask)[at];
      }
      s[r] = sc;
      tm[r] = sc;
    }
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int r = 0; r < kR; r++)
        tm[r] = fmaxf(tm[r], __shfl_xor_sync(0xffffffffu, tm[r], o));
    float alpha[kR], psum[kR];
#pragma unroll
    for (int r = 0; r < kR; r++) {
      float mn = fmaxf(m[r], tm[r]); /* -inf only when every key so far is masked */
      float p = s[r] == -INFINITY ? 0.0f : expf(s[r] - mn);
      alpha[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - mn);
      m[r] = mn;
      psum[r] = p;
      pw[r * kKeys + lane] = p;
    }
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int r = 0; r < kR; r++)
        psum[r] += __shfl_xor_sync(0xffffffffu, psum[r], o);
#pragma unroll
    for (int r = 0; r < kR; r++) {
      l[r] = l[r] * alpha[r] + psum[r];
#pragma unroll
      for (int c = 0; c < DC; c++)
        acc[r][c] *= alpha[r];
    }
    __syncwarp(); /* the warp's probabilities are visible to all its lanes */
#pragma unroll 2
    for (int jj = 0; jj < kKeys; jj += 4) {
      float vv[4][DC];
#pragma unroll
      for (int u = 0; u < 4; u++)
#pragma unroll
        for (int c = 0; c < DC; c++)
          vv[u][c] = vs[(jj + u) * D + lane + 32 * c];
#pragma unroll
      for (int r = 0; r < kR; r++) {
        float4 pv = *(const float4 *)(pw + r * kKeys + jj);
#pragma unroll
        for (int c = 0; c < DC; c++) {
          acc[r][c] = fmaf(pv.x, vv[0][c], acc[r][c]);
          acc[r][c] = fmaf(pv.y, vv[1][c], acc[r][c]);
          acc[r][c] = fmaf(pv.z, vv[2][c], acc[r][c]);
          acc[r][c] = fmaf(pv.w, vv[3][c], acc[r][c]);
        }
      }
    }
    __syncwarp(); /* read before the next tile's probabilities overwrite them */
  }
#pragma unroll
  for (int r = 0; r < kR; r++) {
    int64_t i = row0 + warp * kR + r;
    if (i >= g.s)
      continue;
    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    float *yr = y + b * g.ys[0] + h * g.ys[1] + i * g.ys[2];
#pragma unroll
    for (int c = 0; c < DC; c++)
      yr[lane + 32 * c] = acc[r][c] * inv;
  }
}

template <int D>
cudaError_t launch_tiled(const nr_cuda_attn *g, const float *q, const float *k, const float *v,
                         const void *mask, float *y, cudaStream_t s) {
  int64_t bytes = tiled_floats(D) * (int64_t)sizeof(float);
  if (bytes > 48 * 1024) {
    cudaError_t e = cudaFuncSetAttribute(attn_tiled_kernel<D>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
      return e;
  }
  dim3 grid((unsigned)((g->s + kRows - 1) / kRows), (unsigned)g->hq, (unsigned)g->b);
  attn_tiled_kernel<D><<<grid, kW * 32, (size_t)bytes, s>>>(*g, q, k, v, mask, y);
  return cudaGetLastError();
}

} // namespace

extern "C" bool nr_cuda_attention_tiled_ok(const nr_cuda_attn *g) {
  return g->d == g->dv && (g->d == 32 || g->d == 64 || g->d == 128) && g->s <= 65535LL * kRows &&
         g->hq <= 65535 && g->b <= 65535;
}

extern "C" int64_t nr_cuda_attention_tiled_blocks(const nr_cuda_attn *g) {
  return (g->s + kRows - 1) / kRows * g->hq * g->b;
}

extern "C" cudaError_t nr_cuda_attention_tiled(const nr_cuda_attn *g, const float *q,
                                               const float *k, const float *v, const void *mask,
                                               float *y, cudaStream_t s) {
  if (g->b <= 0 || g->hq <= 0 || g->s <= 0)
    return cudaSuccess;
  if (!nr_cuda_attention_tiled_ok(g))
    return cudaErrorInvalidValue;
  switch (g->d) {
  case 32: return launch_tiled<32>(g, q, k, v, mask, y, s);
  case 64: return launch_tiled<64>(g, q, k, v, mask, y, s);
  default: return launch_tiled<128>(g, q, k, v, mask, y, s);
  }
}
