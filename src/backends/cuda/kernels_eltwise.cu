/* kernels_eltwise.cu - the elementwise program kernel (cuda_kernels.h) and the
 * fp32 <-> fp16 casts.
 *
 * Key decision: one kernel interprets a short program per element instead of one
 * kernel per op or per chain. The program (at most 16 steps, 8 operands) is a kernel
 * parameter, so every thread reads the same step at the same time (no divergence),
 * and the interpretation costs a few integer instructions per step against a memory
 * bound loop. Operand offsets come from the output index through per-dim strides
 * (0 for a broadcast dim); when the program has one merged dim and unit strides the
 * index is the offset. Each operand and the output are fp32 or fp16 (a bit each in
 * the program); math is fp32 in the reference's formulas (kernels_common.cuh). */
#include "backends/cuda/kernels_common.cuh"

namespace {

__device__ __forceinline__ float ew_binary(int op, float a, float b) {
  switch (op) {
  case NR_EW_ADD: return a + b;
  case NR_EW_SUB: return a - b;
  case NR_EW_MUL: return a * b;
  case NR_EW_DIV: return a / b;
  case NR_EW_POW: return powf(a, b);
  case NR_EW_MAX: return fmaxf(a, b);
  case NR_EW_MIN: return fminf(a, b);
  case NR_EW_PRELU: return a < 0.0f ? a * b : a;
  default: return a;
  }
}

__device__ __forceinline__ float load_op(const nr_cuda_ew_prog &p, const void *const *ops,
                                         int i, int64_t off) {
  return nr_ld(ops[i], off, (p.half_mask >> i) & 1);
}

struct ew_ptrs {
  const void *p[NR_CUDA_EW_MAX_OPS];
};

template <bool LINEAR>
__global__ void ew_kernel(const nr_cuda_ew_prog p, const ew_ptrs ptrs, void *y) {
  const void *const *ops = ptrs.p;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
    int64_t off[NR_CUDA_EW_MAX_OPS];
    if (LINEAR) {
      for (int k = 0; k < NR_CUDA_EW_MAX_OPS; k++)
        off[k] = p.stride[k][0] ? i : 0;
    } else {
      for (int k = 0; k < NR_CUDA_EW_MAX_OPS; k++)
        off[k] = 0;
      int64_t r = i;
      for (int d = p.rank - 1; d >= 0; d--) {
        int64_t c = r % p.dims[d];
        r /= p.dims[d];
        for (int k = 0; k < p.n_ops; k++)
          off[k] += c * p.stride[k][d];
      }
    }
    float v = load_op(p, ops, 0, off[0]);
    for (int s = 0; s < p.n_steps; s++) {
      const nr_cuda_ew_step &st = p.step[s];
      if (st.op < NR_EW_RELU) {
        float o = st.operand == 0 ? load_op(p, ops, 0, off[0])
                                  : load_op(p, ops, st.operand, off[st.operand]);
        v = st.swapped ? ew_binary(st.op, o, v) : ew_binary(st.op, v, o);
      } else {
        v = nr_unary(st.op, v, st.p0, st.p1);
      }
    }
    nr_st(y, i, v, p.y_half);
  }
}

__global__ void to_half(const float *x, __half *y, int64_t n) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __float2half_rn(x[i]);
}

__global__ void to_float(const __half *x, float *y, int64_t n) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __half2float(x[i]);
}

unsigned blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* One merged dim and every operand either contiguous along it or a scalar. */
bool linear(const nr_cuda_ew_prog *p) {
  if (p->rank != 1)
    return false;
  for (int k = 0; k < p->n_ops; k++)
    if (p->stride[k][0] != 0 && p->stride[k][0] != 1)
      return false;
  return true;
}

} // namespace

extern "C" cudaError_t nr_cuda_ew_launch(const nr_cuda_ew_prog *prog, const void *const *ops,
                                         void *y, cudaStream_t s) {
  if (prog->n <= 0)
    return cudaSuccess;
  ew_ptrs o = {};
  for (int k = 0; k < prog->n_ops && k < NR_CUDA_EW_MAX_OPS; k++)
    o.p[k] = ops[k];
  nr_cuda_ew_prog p = *prog;
  for (int k = prog->n_ops; k < NR_CUDA_EW_MAX_OPS; k++) /* unused: keep offsets 0 */
    for (int d = 0; d < NR_CUDA_EW_MAX_DIMS; d++)
      p.stride[k][d] = 0;
  unsigned b = blocks_for(p.n, 256);
  if (linear(&p))
    ew_kernel<true><<<b, 256, 0, s>>>(p, o, y);
  else
    ew_kernel<false><<<b, 256, 0, s>>>(p, o, y);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_f32_to_f16(const float *x, void *y, int64_t n,
                                          cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  to_half<<<blocks_for(n, 256), 256, 0, s>>>(x, (__half *)y, n);
  return cudaGetLastError();
}

extern "C" cudaError_t nr_cuda_f16_to_f32(const void *x, float *y, int64_t n,
                                          cudaStream_t s) {
  if (n <= 0)
    return cudaSuccess;
  to_float<<<blocks_for(n, 256), 256, 0, s>>>((const __half *)x, y, n);
  return cudaGetLastError();
}
