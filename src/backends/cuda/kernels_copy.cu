/* kernels_copy.cu - data movement on the device (cuda_kernels.h): strided copies
 * (Transpose, Concat, Split, Slice, layout reorders), Gather, and a cache flush.
 *
 * Key decision: every copy is one view (dims with source and destination strides),
 * merged on the host first (unit dims dropped, neighbours contiguous on both sides
 * joined) so a contiguous piece becomes one cudaMemcpyAsync and anything else one
 * kernel whose thread i decomposes i over at most 8 dims. Elements move as 1, 2, 4
 * or 8-byte words (the dtype's size), so the kernels are dtype-free. A copy whose
 * source and destination are the same bytes is skipped: the memory pass places
 * views (memory.views) exactly so that such copies move nothing. */
#include "backends/cuda/cuda_kernels.h"

#include <string.h>

namespace {

void merge(nr_cuda_copy *v) {
  int r = 0;
  for (int d = 0; d < v->rank; d++) {
    if (v->dims[d] == 1)
      continue;
    if (r > 0 && v->is[r - 1] == v->is[d] * v->dims[d] &&
        v->os[r - 1] == v->os[d] * v->dims[d]) {
      v->dims[r - 1] *= v->dims[d];
      v->is[r - 1] = v->is[d];
      v->os[r - 1] = v->os[d];
      continue;
    }
    v->dims[r] = v->dims[d], v->is[r] = v->is[d], v->os[r] = v->os[d];
    r++;
  }
  if (r == 0) {
    v->dims[0] = 1, v->is[0] = v->os[0] = 1;
    r = 1;
  }
  v->rank = r;
}

template <typename T>
__global__ void copy_kernel(const nr_cuda_copy v, T *dst, const T *src, int64_t n) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t r = i, si = 0, di = 0;
    for (int d = v.rank - 1; d >= 0; d--) {
      int64_t c = r % v.dims[d];
      r /= v.dims[d];
      si += c * v.is[d];
      di += c * v.os[d];
    }
    dst[di] = src[si];
  }
}

template <typename T>
__global__ void gather_kernel(const T *table, const void *idx, int idx64, T *out,
                              int64_t outer, int64_t axis_dim, int64_t n_idx, int64_t inner) {
  int64_t total = outer * n_idx * inner;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    int64_t c = i % inner, j = (i / inner) % n_idx, o = i / (inner * n_idx);
    int64_t k = idx64 ? ((const long long *)idx)[j] : ((const int *)idx)[j];
    if (k < 0)
      k += axis_dim;
    out[i] = k >= 0 && k < axis_dim ? table[(o * axis_dim + k) * inner + c] : T();
  }
}

__global__ void touch_kernel(unsigned *p, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] += 1u;
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

template <typename T>
cudaError_t copy_as(const nr_cuda_copy &v, void *dst, const void *src, int64_t n,
                    cudaStream_t s) {
  copy_kernel<T><<<blocks_for(n), 256, 0, s>>>(v, (T *)dst, (const T *)src, n);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t nr_cuda_copy_strided(nr_cuda_copy v, void *dst, const void *src,
                                            cudaStream_t s) {
  merge(&v);
  int64_t n = 1;
  for (int d = 0; d < v.rank; d++)
    n *= v.dims[d];
  if (n <= 0)
    return cudaSuccess;
  int last = v.rank - 1;
  if (v.rank == 1 && v.is[0] == 1 && v.os[0] == 1) {
    if (dst == src)
      return cudaSuccess;
    return cudaMemcpyAsync(dst, src, (size_t)n * (size_t)v.es, cudaMemcpyDeviceToDevice, s);
  }
  if (v.rank == 2 && v.is[last] == 1 && v.os[last] == 1) /* rows: one 2-D memcpy */
    return cudaMemcpy2DAsync(dst, (size_t)(v.os[0] * v.es), src, (size_t)(v.is[0] * v.es),
                             (size_t)(v.dims[1] * v.es), (size_t)v.dims[0],
                             cudaMemcpyDeviceToDevice, s);
  switch (v.es) {
  case 1: return copy_as<unsigned char>(v, dst, src, n, s);
  case 2: return copy_as<unsigned short>(v, dst, src, n, s);
  case 4: return copy_as<unsigned>(v, dst, src, n, s);
  case 8: return copy_as<unsigned long long>(v, dst, src, n, s);
  }
  return cudaErrorInvalidValue;
}

extern "C" cudaError_t nr_cuda_gather(const void *table, const void *idx, int idx64, void *out,
                                      int64_t outer, int64_t axis_dim, int64_t n_idx,
                                      int64_t inner, int es, cudaStream_t s) {
  int64_t total = outer * n_idx * inner;
  if (total <= 0)
    return cudaSuccess;
  unsigned b = blocks_for(total);
  switch (es) {
  case 1:
    gather_kernel<unsigned char><<<b, 256, 0, s>>>((const unsigned char *)table, idx, idx64,
                                                   (unsigned char *)out, outer, axis_dim,
                                                   n_idx, inner);
    break;
  case 2:
    gather_kernel<unsigned short><<<b, 256, 0, s>>>((const unsigned short *)table, idx,
                                                    idx64, (unsigned short *)out, outer,
                                                    axis_dim, n_idx, inner);
    break;
  case 4:
    gather_kernel<unsigned><<<b, 256, 0, s>>>((const unsigned *)table, idx, idx64,
                                              (unsigned *)out, outer, axis_dim, n_idx, inner);
    break;
  case 8:
    gather_kernel<unsigned long long><<<b, 256, 0, s>>>(
        (const unsigned long long *)table, idx, idx64, (unsigned long long *)out, outer,
        axis_dim, n_idx, inner);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_touch(void *p, size_t n, cudaStream_t s) {
  size_t words = n / sizeof(unsigned);
  if (!words)
    return cudaSuccess;
  touch_kernel<<<blocks_for((int64_t)words), 256, 0, s>>>((unsigned *)p, words);
  return cudaGetLastError();
}
