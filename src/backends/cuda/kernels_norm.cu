/* kernels_norm.cu - row kernels (softmax, LayerNormalization, mean/max of rows) and
 * 2-D pooling over NCHW planes (cuda_kernels.h).
 *
 * Key decision: a row is one warp when it is short (<= 1024 floats: bert's rows are
 * 128 to 768) and one 256-thread block otherwise, picked per launch. A short softmax
 * or LayerNorm row sits in the warp's registers (all its loads issued at once); the
 * other kernels walk the row in strided order, and all reduce with shuffles. Sums are float and pairwise by construction (per-lane
 * partials, then a tree), which keeps the error far below the tests' tolerance
 * without the reference's double sums. LayerNorm makes two passes over the row
 * (mean, then variance of x - mean), like the reference, rather than E[x^2] - E[x]^2.
 * x and y are fp32 or fp16 each (run-time flags, kernels_common.cuh); math is fp32. */
#include "backends/cuda/kernels_common.cuh"

#include <float.h>

namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Sum (or max) over a group of G threads (32: one warp; kBlock: the block). */
template <int G> __device__ float group_reduce(float v, bool max) {
  v = max ? warp_max(v) : warp_sum(v);
  if (G == 32)
    return v;
  __shared__ float part[kBlock / 32];
  __shared__ float total;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* part[] may still be read by a previous call */
  if (lane == 0)
    part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < G / 32 ? part[lane] : (max ? -INFINITY : 0.0f);
    w = max ? warp_max(w) : warp_sum(w);
    if (lane == 0)
      total = w;
  }
  __syncthreads();
  return total;
}

/* Row index and lane of this thread for groups of G threads per row. */
template <int G> __device__ int64_t row_of(int *lane) {
  if (G == 32) {
    *lane = threadIdx.x & 31;
    return (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  }
  *lane = threadIdx.x;
  return blockIdx.x;
}

template <int G>
__global__ void softmax_kernel(const void *x, void *y, int64_t rows, int64_t n, int log,
                               int half) {
  int lane;
  int64_t r = row_of<G>(&lane);
  if (r >= rows) /* whole warps (G 32) or whole blocks leave together */
    return;
  bool xh = half & NR_CUDA_X_HALF, yh = half & NR_CUDA_Y_HALF;
  int64_t at = r * n;
  float m = -INFINITY;
  for (int64_t j = lane; j < n; j += G)
    m = fmaxf(m, nr_ld(x, at + j, xh));
  m = group_reduce<G>(m, true);
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += G)
    s += expf(nr_ld(x, at + j, xh) - m);
  s = group_reduce<G>(s, false);
  if (log) {
    float ls = logf(s);
    for (int64_t j = lane; j < n; j += G)
      nr_st(y, at + j, nr_ld(x, at + j, xh) - m - ls, yh);
  } else {
    float inv = 1.0f / s;
    for (int64_t j = lane; j < n; j += G)
      nr_st(y, at + j, expf(nr_ld(x, at + j, xh) - m) * inv, yh);
  }
}

template <int G>
__global__ void layernorm_kernel(const void *x, const float *scale, const float *bias,
                                 void *y, int64_t rows, int64_t n, float eps, int half) {
  int lane;
  int64_t r = row_of<G>(&lane);
  if (r >= rows)
    return;
  bool xh = half & NR_CUDA_X_HALF, yh = half & NR_CUDA_Y_HALF;
  int64_t at = r * n;
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += G)
    s += nr_ld(x, at + j, xh);
  float mean = group_reduce<G>(s, false) / (float)n;
  float v = 0.0f;
  for (int64_t j = lane; j < n; j += G) {
    float d = nr_ld(x, at + j, xh) - mean;
    v += d * d;
  }
  float var = group_reduce<G>(v, false) / (float)n;
  float inv = 1.0f / sqrtf(var + eps);
  for (int64_t j = lane; j < n; j += G) {
    float o = (nr_ld(x, at + j, xh) - mean) * inv * scale[j];
    nr_st(y, at + j, bias ? o + bias[j] : o, yh);
  }
}

template <int G>
__global__ void reduce_kernel(const void *x, void *y, int64_t rows, int64_t n, int max,
                              int half) {
  int lane;
  int64_t r = row_of<G>(&lane);
  if (r >= rows)
    return;
  bool xh = half & NR_CUDA_X_HALF;
  float a = max ? -INFINITY : 0.0f;
  for (int64_t j = lane; j < n; j += G) {
    float v = nr_ld(x, r * n + j, xh);
    a = max ? fmaxf(a, v) : a + v;
  }
  a = group_reduce<G>(a, max != 0);
  if (lane == 0)
    nr_st(y, r, max ? a : a / (float)n, half & NR_CUDA_Y_HALF);
}

/* Rows of at most 32 * V elements, one warp each, held in registers: every load of a
 * row is issued at once (the strided loops above wait on one load per iteration and
 * walk the row three times), then mean/variance or max/sum come from shuffles. */
template <int V>
__global__ void layernorm_regs(const void *x, const float *scale, const float *bias, void *y,
                               int64_t rows, int64_t n, float eps, int half) {
  int lane = threadIdx.x & 31;
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  bool xh = half & NR_CUDA_X_HALF, yh = half & NR_CUDA_Y_HALF;
  float v[V], sc[V], bi[V], s = 0.0f;
#pragma unroll
  for (int i = 0; i < V; i++) { /* scale and bias load with x, not after the sums */
    int64_t j = lane + 32 * i;
    v[i] = j < n ? nr_ld(x, r * n + j, xh) : 0.0f;
    sc[i] = j < n ? scale[j] : 0.0f;
    bi[i] = j < n && bias ? bias[j] : 0.0f;
    s += v[i];
  }
  float mean = warp_sum(s) / (float)n, q = 0.0f;
#pragma unroll
  for (int i = 0; i < V; i++) {
    float d = v[i] - mean;
    q += lane + 32 * i < n ? d * d : 0.0f;
  }
  float inv = 1.0f / sqrtf(warp_sum(q) / (float)n + eps);
#pragma unroll
  for (int i = 0; i < V; i++) {
    int64_t j = lane + 32 * i;
    if (j < n)
      nr_st(y, r * n + j, (v[i] - mean) * inv * sc[i] + bi[i], yh);
  }
}

template <int V>
__global__ void softmax_regs(const void *x, void *y, int64_t rows, int64_t n, int log,
                             int half) {
  int lane = threadIdx.x & 31;
  int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (r >= rows)
    return;
  bool xh = half & NR_CUDA_X_HALF, yh = half & NR_CUDA_Y_HALF;
  float v[V], m = -INFINITY;
#pragma unroll
  for (int i = 0; i < V; i++) {
    int64_t j = lane + 32 * i;
    v[i] = j < n ? nr_ld(x, r * n + j, xh) : -INFINITY;
    m = fmaxf(m, v[i]);
  }
  m = warp_max(m);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < V; i++)
    s += lane + 32 * i < n ? expf(v[i] - m) : 0.0f;
  s = warp_sum(s);
  float ls = logf(s), inv = 1.0f / s;
#pragma unroll
  for (int i = 0; i < V; i++) {
    int64_t j = lane + 32 * i;
    if (j < n)
      nr_st(y, r * n + j, log ? v[i] - m - ls : expf(v[i] - m) * inv, yh);
  }
}

__global__ void pool_kernel(const nr_cuda_pool2d p, const void *x, void *y) {
  int64_t total = (int64_t)p.planes * p.oh * p.ow;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    int64_t ox = i % p.ow, oy = (i / p.ow) % p.oh, plane = i / ((int64_t)p.ow * p.oh);
    int64_t xp = plane * (int64_t)p.ih * p.iw;
    float acc = p.max ? -INFINITY : 0.0f;
    int valid = 0, padded = 0;
    for (int ky = 0; ky < p.kh; ky++) {
      int64_t iy = oy * p.sh - p.pt + (int64_t)ky * p.dh;
      bool vy = iy >= 0 && iy < p.ih, py = iy >= -p.pt && iy < p.ih + p.pb;
      for (int kx = 0; kx < p.kw; kx++) {
        int64_t ix = ox * p.sw - p.pl + (int64_t)kx * p.dw;
        bool vx = ix >= 0 && ix < p.iw, px = ix >= -p.pl && ix < p.iw + p.pr;
        padded += py && px;
        if (!(vy && vx))
          continue;
        valid++;
        float v = nr_ld(x, xp + iy * p.iw + ix, p.x_half);
        if (p.max) { /* the reference's rule: a NaN is replaced by a later number */
          if (valid == 1 || v > acc || (acc != acc && v == v))
            acc = v;
        } else {
          acc += v;
        }
      }
    }
    int cnt = p.count_pad ? padded : valid;
    float out = p.max ? (valid ? acc : -INFINITY) : (cnt ? acc / (float)cnt : NAN);
    nr_st(y, i, out, p.y_half);
  }
}

unsigned warp_blocks(int64_t rows) {
  return (unsigned)((rows + kBlock / 32 - 1) / (kBlock / 32));
}

} // namespace

extern "C" cudaError_t nr_cuda_softmax(const void *x, void *y, int64_t rows, int64_t n,
                                       int log, int half, cudaStream_t s) {
  if (rows <= 0 || n <= 0)
    return cudaSuccess;
  unsigned wb = warp_blocks(rows);
  if (n <= 128)
    softmax_regs<4><<<wb, kBlock, 0, s>>>(x, y, rows, n, log, half);
  else if (n <= 256)
    softmax_regs<8><<<wb, kBlock, 0, s>>>(x, y, rows, n, log, half);
  else if (n <= 512)
    softmax_regs<16><<<wb, kBlock, 0, s>>>(x, y, rows, n, log, half);
  else if (n <= 1024)
    softmax_regs<32><<<wb, kBlock, 0, s>>>(x, y, rows, n, log, half);
  else
    softmax_kernel<kBlock><<<(unsigned)rows, kBlock, 0, s>>>(x, y, rows, n, log, half);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_layernorm(const void *x, const float *scale,
                                         const float *bias, void *y, int64_t rows,
                                         int64_t n, float eps, int half, cudaStream_t s) {
  if (rows <= 0 || n <= 0)
    return cudaSuccess;
  unsigned wb = warp_blocks(rows);
  if (n <= 128)
    layernorm_regs<4><<<wb, kBlock, 0, s>>>(x, scale, bias, y, rows, n, eps, half);
  else if (n <= 256)
    layernorm_regs<8><<<wb, kBlock, 0, s>>>(x, scale, bias, y, rows, n, eps, half);
  else if (n <= 512)
    layernorm_regs<16><<<wb, kBlock, 0, s>>>(x, scale, bias, y, rows, n, eps, half);
  else if (n <= 1024)
    layernorm_regs<32><<<wb, kBlock, 0, s>>>(x, scale, bias, y, rows, n, eps, half);
  else
    layernorm_kernel<kBlock><<<(unsigned)rows, kBlock, 0, s>>>(x, scale, bias, y, rows, n,
                                                               eps, half);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_reduce_rows(const void *x, void *y, int64_t rows, int64_t n,
                                           int max, int half, cudaStream_t s) {
  if (rows <= 0)
    return cudaSuccess;
  if (n <= 1024)
    reduce_kernel<32><<<warp_blocks(rows), kBlock, 0, s>>>(x, y, rows, n, max, half);
  else
    reduce_kernel<kBlock><<<(unsigned)rows, kBlock, 0, s>>>(x, y, rows, n, max, half);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_pool2d_run(const nr_cuda_pool2d *p, const void *x, void *y,
                                          cudaStream_t s) {
  int64_t total = (int64_t)p->planes * p->oh * p->ow;
  if (total <= 0)
    return cudaSuccess;
  int64_t b = (total + 255) / 256;
  pool_kernel<<<(unsigned)(b > 65535 * 8 ? 65535 * 8 : b), 256, 0, s>>>(*p, x, y);
  return cudaGetLastError();
}
