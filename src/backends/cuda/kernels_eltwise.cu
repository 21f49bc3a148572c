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

/* ---- the epilogue kernel (nr_cuda_epi_launch) ----------------------------------------
 * A separate kernel from the program interpreter because it runs after every
 * convolution or product whose activation the library cannot fuse (cuDNN's ReLU6,
 * exact GELU), over the largest tensors of a CNN: there the interpreter's per-element
 * offsets (64-bit division per dim, an operand-offset array in local memory) and
 * 2-byte accesses ran at a few percent of the memory bandwidth. Here a thread takes 8
 * consecutive elements (one 16-byte access per fp16 operand, two per fp32 one), the
 * channel comes from 32-bit division once per group, and the bias is read per element
 * only when the channels are the contiguous axis (NHWC, GEMM rows). */
struct epi_k {
  uint32_t channels, inner, groups; /* groups: elements / V */
  int x_half, y_half, res_half, op;
  float p0, p1;
};

template <int V>
__device__ __forceinline__ void ld_v(const void *p, uint32_t i, bool half, float *v) {
  if (V == 8 && half) {
    uint4 u = *(const uint4 *)((const __half *)p + i);
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      float2 f = __half22float2(h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    }
  } else if (V == 8) {
    float4 a = *(const float4 *)((const float *)p + i), b = *((const float4 *)((const float *)p + i) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
#pragma unroll
    for (int k = 0; k < V; k++)
      v[k] = nr_ld(p, i + k, half);
  }
}

template <int V>
__device__ __forceinline__ void st_v(void *p, uint32_t i, bool half, const float *v) {
  if (V == 8 && half) {
    uint4 u;
    __half2 *h = (__half2 *)&u;
#pragma unroll
    for (int k = 0; k < 4; k++)
      h[k] = __floats2half2_rn(v[2 * k], v[2 * k + 1]);
    *(uint4 *)((__half *)p + i) = u;
  } else if (V == 8) {
    *(float4 *)((float *)p + i) = make_float4(v[0], v[1], v[2], v[3]);
    *((float4 *)((float *)p + i) + 1) = make_float4(v[4], v[5], v[6], v[7]);
  } else {
#pragma unroll
    for (int k = 0; k < V; k++)
      nr_st(p, i + k, v[k], half);
  }
}

template <int V>
__global__ void epi_kernel(const epi_k e, const void *x, const float *bias, const void *res,
                           void *y) {
  uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t g = blockIdx.x * blockDim.x + threadIdx.x; g < e.groups; g += stride) {
    uint32_t i = g * V;
    float v[V], r[V];
    ld_v<V>(x, i, e.x_half, v);
    if (bias) {
      if (e.inner == 1) { /* channels contiguous: V consecutive channels */
        uint32_t c = i % e.channels;
#pragma unroll
        for (int k = 0; k < V; k++)
          v[k] += bias[c + k];
      } else { /* V elements of one channel (inner is a multiple of V) */
        float b = bias[(i / e.inner) % e.channels];
#pragma unroll
        for (int k = 0; k < V; k++)
          v[k] += b;
      }
    }
    if (res) {
      ld_v<V>(res, i, e.res_half, r);
#pragma unroll
      for (int k = 0; k < V; k++)
        v[k] += r[k];
    }
    if (e.op != NR_EW_IDENTITY) {
#pragma unroll
      for (int k = 0; k < V; k++)
        v[k] = nr_unary(e.op, v[k], e.p0, e.p1);
    }
    st_v<V>(y, i, e.y_half, v);
  }
}

bool al16(const void *p) { return ((uintptr_t)p & 15) == 0; }

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

extern "C" cudaError_t nr_cuda_epi_launch(const nr_cuda_epi_args *a, const void *x,
                                          const float *bias, const void *res, void *y,
                                          cudaStream_t s) {
  int64_t n = a->outer * a->channels * a->inner;
  if (n <= 0)
    return cudaSuccess;
  if (n >= ((int64_t)1 << 31) || a->channels >= ((int64_t)1 << 31))
    return cudaErrorNotSupported;
  int64_t run = a->inner == 1 ? a->channels : a->inner; /* contiguous elements alike */
  bool vec = run % 8 == 0 && al16(x) && al16(y) && (!res || al16(res));
  epi_k e = {(uint32_t)a->channels, (uint32_t)a->inner, (uint32_t)(vec ? n / 8 : n),
             a->x_half, a->y_half, a->res_half, a->op, a->p0, a->p1};
  unsigned b = blocks_for(e.groups, 256);
  if (vec)
    epi_kernel<8><<<b, 256, 0, s>>>(e, x, bias, res, y);
  else
    epi_kernel<1><<<b, 256, 0, s>>>(e, x, bias, res, y);
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
