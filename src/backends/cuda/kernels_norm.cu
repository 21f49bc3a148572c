/* kernels_norm.cu - row kernels (softmax, LayerNormalization, mean/max of rows) and
 * 2-D pooling over NCHW planes (cuda_kernels.h).
 *
 * Key decision: a row is one warp when it is short (<= 1024 floats: bert's rows are
 * 128 to 768) and one 256-thread block otherwise, picked per launch; both walk the
 * row in strided order and reduce with shuffles, so one code path (templated on the
 * group size) serves both. Sums are float and pairwise by construction (per-lane
 * partials, then a tree), which keeps the error far below the tests' tolerance
 * without the reference's double sums. LayerNorm makes two passes over the row
 * (mean, then variance of x - mean), like the reference, rather than E[x^2] - E[x]^2. */
#include "backends/cuda/cuda_kernels.h"

#include <float.h>
#include <math.h>

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
__global__ void softmax_kernel(const float *x, float *y, int64_t rows, int64_t n, int log) {
  int lane;
  int64_t r = row_of<G>(&lane);
  if (r >= rows) /* whole warps (G 32) or whole blocks leave together */
    return;
  const float *xr = x + r * n;
  float *yr = y + r * n;
  float m = -INFINITY;
  for (int64_t j = lane; j < n; j += G)
    m = fmaxf(m, xr[j]);
  m = group_reduce<G>(m, true);
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += G)
    s += expf(xr[j] - m);
  s = group_reduce<G>(s, false);
  if (log) {
    float ls = logf(s);
    for (int64_t j = lane; j < n; j += G)
      yr[j] = xr[j] - m - ls;
  } else {
    float inv = 1.0f / s;
    for (int64_t j = lane; j < n; j += G)
      yr[j] = expf(xr[j] - m) * inv;
  }
}

template <int G>
__global__ void layernorm_kernel(const float *x, const float *scale, const float *bias,
                                 float *y, int64_t rows, int64_t n, float eps) {
  int lane;
  int64_t r = row_of<G>(&lane);
  if (r >= rows)
    return;
  const float *xr = x + r * n;
  float *yr = y + r * n;
  float s = 0.0f;
  for (int64_t j = lane; j < n; j += G)
    s += xr[j];
  float mean = group_reduce<G>(s, false) / (float)n;
  float v = 0.0f;
  for (int64_t j = lane; j < n; j += G) {
    float d = xr[j] - mean;
    v += d * d;
  }
  float var = group_reduce<G>(v, false) / (float)n;
  float inv = 1.0f / sqrtf(var + eps);
  for (int64_t j = lane; j < n; j += G) {
    float o = (xr[j] - mean) * inv * scale[j];
    yr[j] = bias ? o + bias[j] : o;
  }
}

template <int G>
__global__ void reduce_kernel(const float *x, float *y, int64_t rows, int64_t n, int max) {
  int lane;
  int64_t r = row_of<G>(&lane);
  if (r >= rows)
    return;
  const float *xr = x + r * n;
  float a = max ? -INFINITY : 0.0f;
  for (int64_t j = lane; j < n; j += G)
    a = max ? fmaxf(a, xr[j]) : a + xr[j];
  a = group_reduce<G>(a, max != 0);
  if (lane == 0)
    y[r] = max ? a : a / (float)n;
}

__global__ void pool_kernel(const nr_cuda_pool2d p, const float *x, float *y) {
  int64_t total = (int64_t)p.planes * p.oh * p.ow;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    int64_t ox = i % p.ow, oy = (i / p.ow) % p.oh, plane = i / ((int64_t)p.ow * p.oh);
    const float *xp = x + plane * (int64_t)p.ih * p.iw;
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
        float v = xp[iy * p.iw + ix];
        if (p.max) { /* the reference's rule: a NaN is replaced by a later number */
          if (valid == 1 || v > acc || (acc != acc && v == v))
            acc = v;
        } else {
          acc += v;
        }
      }
    }
    if (p.max)
      y[i] = valid ? acc : -INFINITY;
    else {
      int cnt = p.count_pad ? padded : valid;
      y[i] = cnt ? acc / (float)cnt : NAN;
    }
  }
}

unsigned warp_blocks(int64_t rows) {
  return (unsigned)((rows + kBlock / 32 - 1) / (kBlock / 32));
}

} // namespace

extern "C" cudaError_t nr_cuda_softmax(const float *x, float *y, int64_t rows, int64_t n,
                                       int log, cudaStream_t s) {
  if (rows <= 0 || n <= 0)
    return cudaSuccess;
  if (n <= 1024)
    softmax_kernel<32><<<warp_blocks(rows), kBlock, 0, s>>>(x, y, rows, n, log);
  else
    softmax_kernel<kBlock><<<(unsigned)rows, kBlock, 0, s>>>(x, y, rows, n, log);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_layernorm(const float *x, const float *scale,
                                         const float *bias, float *y, int64_t rows,
                                         int64_t n, float eps, cudaStream_t s) {
  if (rows <= 0 || n <= 0)
    return cudaSuccess;
  if (n <= 1024)
    layernorm_kernel<32><<<warp_blocks(rows), kBlock, 0, s>>>(x, scale, bias, y, rows, n,
                                                              eps);
  else
    layernorm_kernel<kBlock><<<(unsigned)rows, kBlock, 0, s>>>(x, scale, bias, y, rows, n,
                                                               eps);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_reduce_rows(const float *x, float *y, int64_t rows, int64_t n,
                                           int max, cudaStream_t s) {
  if (rows <= 0)
    return cudaSuccess;
  if (n <= 1024)
    reduce_kernel<32><<<warp_blocks(rows), kBlock, 0, s>>>(x, y, rows, n, max);
  else
    reduce_kernel<kBlock><<<(unsigned)rows, kBlock, 0, s>>>(x, y, rows, n, max);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_pool2d_run(const nr_cuda_pool2d *p, const float *x, float *y,
                                      cudaStream_t s) {
  int64_t total = (int64_t)p->planes * p->oh * p->ow;
  if (total <= 0)
    return cudaSuccess;
  int64_t b = (total + 255) / 256;
  pool_kernel<<<(unsigned)(b > 65535 * 8 ? 65535 * 8 : b), 256, 0, s>>>(*p, x, y);
  return cudaGetLastError();
}
