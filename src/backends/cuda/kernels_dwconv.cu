/* kernels_dwconv.cu - depthwise convolution with the bias and activation fused
 * (cuda_kernels.h: nr_cuda_dwconv_run), NCHW and NHWC, fp32 or fp16 activations.
 *
 * Key decision: one thread computes 4 neighbouring outputs of one row of one channel,
 * so each kernel row's input span ((4 - 1) * S + K values) is loaded once into
 * registers and used by all four: 6 loads instead of 12 for a 3x3 at stride 1. The
 * index order makes neighbouring threads read neighbouring memory: along W in NCHW
 * (a warp covers a row segment of one channel, the weights are a broadcast), along C
 * in NHWC (a warp covers 32 channels of one pixel group, weights [K*K][C] coalesced).
 * K and S are template parameters (3/5, 1/2) so the window loops unroll; there is no
 * shared-memory tiling: mobilenet-sized planes fit in L1/L2 and the kernel is bound
 * by launch latency at batch 1. */
#include "backends/cuda/kernels_common.cuh"

namespace {

constexpr int kOut = 4; /* outputs per thread along W */

template <int K, int S, bool NHWC>
__global__ void dw_kernel(const nr_cuda_dwconv p, const void *x, const float *w,
                          const float *bias, void *y) {
  constexpr int kSpan = (kOut - 1) * S + K;
  int64_t owg_n = (p.ow + kOut - 1) / kOut;
  int64_t total = (int64_t)p.n * p.c * p.oh * owg_n;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    int64_t c, owg, oh, n, t = i;
    if (NHWC) {
      c = t % p.c, t /= p.c;
      owg = t % owg_n, t /= owg_n;
      oh = t % p.oh, n = t / p.oh;
    } else {
      owg = t % owg_n, t /= owg_n;
      oh = t % p.oh, t /= p.oh;
      c = t % p.c, n = t / p.c;
    }
    float b = bias ? bias[c] : 0.0f;
    float acc[kOut];
#pragma unroll
    for (int j = 0; j < kOut; j++)
      acc[j] = b;
    int64_t ix0 = owg * kOut * S - p.pad_l;
#pragma unroll
    for (int ky = 0; ky < K; ky++) {
      int64_t iy = oh * S - p.pad_t + ky;
      if (iy < 0 || iy >= p.h)
        continue;
      float v[kSpan];
#pragma unroll
      for (int u = 0; u < kSpan; u++) {
        int64_t ix = ix0 + u;
        int64_t at = NHWC ? ((n * p.h + iy) * p.w + ix) * p.c + c
                          : ((n * p.c + c) * p.h + iy) * p.w + ix;
        v[u] = ix >= 0 && ix < p.w ? nr_ld(x, at, p.x_half) : 0.0f;
      }
#pragma unroll
      for (int kx = 0; kx < K; kx++) {
        float wk = NHWC ? w[(ky * K + kx) * (int64_t)p.c + c] : w[c * K * K + ky * K + kx];
#pragma unroll
        for (int j = 0; j < kOut; j++)
          acc[j] += wk * v[j * S + kx];
      }
    }
#pragma unroll
    for (int j = 0; j < kOut; j++) {
      int64_t ow = owg * kOut + j;
      int64_t at = NHWC ? ((n * p.oh + oh) * p.ow + ow) * p.c + c
                        : ((n * p.c + c) * p.oh + oh) * p.ow + ow;
      if (ow < p.ow)
        nr_st(y, at, nr_unary(p.act, acc[j], p.p0, p.p1), p.y_half);
    }
  }
}

template <int K, int S>
cudaError_t launch(const nr_cuda_dwconv *p, const void *x, const float *w, const float *bias,
                   void *y, cudaStream_t s) {
  int64_t total = (int64_t)p->n * p->c * p->oh * ((p->ow + kOut - 1) / kOut);
  int64_t blocks = (total + 255) / 256;
  unsigned b = (unsigned)(blocks > 65535 * 8 ? 65535 * 8 : blocks);
  if (p->nhwc)
    dw_kernel<K, S, true><<<b, 256, 0, s>>>(*p, x, w, bias, y);
  else
    dw_kernel<K, S, false><<<b, 256, 0, s>>>(*p, x, w, bias, y);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t nr_cuda_dwconv_run(const nr_cuda_dwconv *p, const void *x, const float *w,
                                          const float *bias, void *y, cudaStream_t s) {
  if ((int64_t)p->n * p->c * p->oh * p->ow <= 0)
    return cudaSuccess;
  if (p->k == 3 && p->stride == 1)
    return launch<3, 1>(p, x, w, bias, y, s);
  if (p->k == 3 && p->stride == 2)
    return launch<3, 2>(p, x, w, bias, y, s);
  if (p->k == 5 && p->stride == 1)
    return launch<5, 1>(p, x, w, bias, y, s);
  if (p->k == 5 && p->stride == 2)
    return launch<5, 2>(p, x, w, bias, y, s);
  return cudaErrorInvalidValue;
}
