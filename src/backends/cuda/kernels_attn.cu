/* kernels_attn.cu - fused attention: fp32 (nr_cuda_attention) and on fp16 tensor
 * cores (nr_cuda_attention_tc): a staged kernel and a register-resident one, each
 * described where it starts below; nr_cuda_attention_tc picks the register kernel
 * whenever its conditions hold (about 3.4x faster at BERT-base's batch-1 shape).
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
#include "backends/cuda/kernels_common.cuh"

#include <mma.h>

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

/* ---- the tensor-core kernel (nr_cuda_attention_tc) ------------------------------------
 * A block of 2 warps takes 32 query rows of one (batch, head), 16 per warp. Phase 1:
 * the keys pass through shared memory in tiles of 64 (converted to fp16 on the way
 * in), and each warp computes its 16 x 64 scores per tile with WMMA (16x16x16 fp16
 * products, fp32 accumulators) into its own fp32 score rows, so all T scores of its
 * rows end up in shared memory. Phase 2: per row (two lanes a row, all 16 rows at
 * once), scale, mask and causality, the maximum, exp and sum in fp32; the unnormalized probabilities (in
 * [0, 1]) are stored as fp16, the reciprocal of the sum kept per row. Phase 3: the
 * values pass through a tile buffer of their own (the first tile loads while the
 * softmax runs) and P V accumulates in WMMA fragments held for the whole walk (no
 * online rescaling: the softmax was exact); the result is
 * scaled by the reciprocal sum on the way out. Padded keys (past T) are zero in V and
 * have probability zero; padded query rows are computed on zeros and not written. */
namespace {

constexpr int kTcWarps = 2, kTcRows = 16 * kTcWarps, kTcKeys = 64;

struct tc_layout {
  int ldq, ldk, lds, ldp;
  int64_t tp, q_off, k_off, v_off, s_off, p_off, l_off, bytes;
};

__host__ __device__ inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

__host__ __device__ inline tc_layout tc_layout_of(int64_t d, int64_t dv, int64_t t) {
  tc_layout L;
  L.tp = round_up(t, kTcKeys);
  int64_t wide = d > dv ? d : dv;
  L.ldq = (int)d + 8;
  L.ldk = (int)wide + 8;
  L.lds = (int)((L.tp > dv ? L.tp : dv) + 4); /* scores, then the output staging */
  L.ldp = (int)L.tp + 8;
  L.q_off = 0;
  L.k_off = round_up(L.q_off + (int64_t)kTcRows * L.ldq * 2, 128);
  L.v_off = round_up(L.k_off + (int64_t)kTcKeys * L.ldk * 2, 128);
  L.s_off = round_up(L.v_off + (int64_t)kTcKeys * L.ldk * 2, 128);
  L.p_off = round_up(L.s_off + (int64_t)kTcRows * L.lds * 4, 128);
  L.l_off = round_up(L.p_off + (int64_t)kTcRows * L.ldp * 2, 128);
  L.bytes = L.l_off + (int64_t)kTcRows * 4;
  return L;
}

/* One chunk of 8 elements of row r (fp16 when half) as fp16; zeros past `valid`. */
template <bool VEC>
__device__ __forceinline__ uint4 load8(const void *src, int64_t rs, int r, int c, int64_t valid,
                                       bool half) {
  __align__(16) __half v[8];
  if (r >= valid) {
    return make_uint4(0, 0, 0, 0);
  } else if (VEC && half) {
    return *(const uint4 *)((const __half *)src + r * rs + c);
  } else if (VEC) {
    const float4 *f = (const float4 *)((const float *)src + r * rs + c);
    float4 a = f[0], b = f[1];
    v[0] = __float2half_rn(a.x), v[1] = __float2half_rn(a.y);
    v[2] = __float2half_rn(a.z), v[3] = __float2half_rn(a.w);
    v[4] = __float2half_rn(b.x), v[5] = __float2half_rn(b.y);
    v[6] = __float2half_rn(b.z), v[7] = __float2half_rn(b.w);
  } else {
    for (int i = 0; i < 8; i++)
      v[i] = __float2half_rn(nr_ld(src, r * rs + c + i, half));
  }
  return *(const uint4 *)v;
}

/* rows x cols (cols a multiple of 8) of src (row stride rs, fp16 when half) into dst
 * as fp16 with row stride ld; rows from `valid` on are zeros. VEC: 16-byte loads.
 * Each thread issues kBatch loads before it stores any, so a tile costs about one
 * memory latency instead of one per chunk (the loads are independent). */
constexpr int kBatch = 8;

template <bool VEC>
__device__ void stage(__half *dst, int ld, const void *src, int64_t rs, int rows, int64_t valid,
                      int cols, bool half) {
  int chunks = cols / 8, total = rows * chunks;
  for (int e0 = threadIdx.x; e0 < total; e0 += kBatch * blockDim.x) {
    uint4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; u++) {
      int e = e0 + u * blockDim.x;
      v[u] = e < total ? load8<VEC>(src, rs, e / chunks, (e % chunks) * 8, valid, half)
                       : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kBatch; u++) {
      int e = e0 + u * blockDim.x;
      if (e < total)
        *(uint4 *)(dst + (e / chunks) * ld + (e % chunks) * 8) = v[u];
    }
  }
}

/* Phase 2 for the warp's 16 rows at once (the first is query row i0): P and the
 * reciprocal sums. Lanes 2r and 2r + 1 share row r, taking alternate keys, so all
 * rows advance together and a row costs one shuffle per reduction (16 rows one after
 * another, each reduced across the warp, left the kernel waiting on latencies). */
__device__ void tc_softmax(const nr_cuda_attn &g, const tc_layout &L, float *ss, __half *ps,
                           float *inv, int64_t i0, int64_t b, int64_t h, const void *mask) {
  int lane = threadIdx.x & 31, r = lane >> 1, part = lane & 1;
  int64_t i = i0 + r;
  float *sr = ss + r * L.lds;
  __half *pr = ps + r * L.ldp;
  bool row = i < g.s;
  int t = (int)g.t, tp = (int)L.tp;
  float m = -INFINITY;
  int64_t at = b * g.ms[0] + h * g.ms[1] + i * g.ms[2];
#pragma unroll 4
  for (int j = part; row && j < t; j += 2) {
    float sc = sr[j] * g.scale;
    if (g.causal && j > i)
      sc = -INFINITY;
    else if (g.mask == 2)
      sc = ((const unsigned char *)mask)[at + j] ? sc : -INFINITY;
    else if (g.mask)
      sc += ((const float *)mask)[at + j];
    sr[j] = sc;
    m = fmaxf(m, sc);
  }
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  float sum = 0.0f;
#pragma unroll 4
  for (int j = part; j < tp; j += 2) {
    float e = 0.0f;
    if (row && j < t && m != -INFINITY && sr[j] != -INFINITY)
      e = expf(sr[j] - m);
    __half eh = __float2half_rn(e);
    sum += __half2float(eh); /* normalize what the products will see */
    pr[j] = eh;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  if (part == 0)
    inv[r] = row && sum > 0.0f ? 1.0f / sum : 0.0f;
}

template <int NT, bool VEC> /* NT: 16-wide output tiles, NT * 16 >= dv */
__global__ void __launch_bounds__(kTcWarps * 32)
    attn_tc_kernel(const nr_cuda_attn g, const void *q, const void *k, const void *v,
                   const void *mask, void *y, int io) {
  using namespace nvcuda;
  extern __shared__ __align__(128) unsigned char smem[];
  tc_layout L = tc_layout_of(g.d, g.dv, g.t);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __half *qs = (__half *)(smem + L.q_off), *ks = (__half *)(smem + L.k_off);
  __half *vs = (__half *)(smem + L.v_off);
  float *ss = (float *)(smem + L.s_off) + (int64_t)warp * 16 * L.lds;
  __half *ps = (__half *)(smem + L.p_off) + (int64_t)warp * 16 * L.ldp;
  float *inv = (float *)(smem + L.l_off) + warp * 16;
  int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (g.hq / g.hkv);
  int64_t row0 = (int64_t)blockIdx.x * kTcRows;
  int esq = io & NR_CUDA_ATTN_Q_HALF ? 2 : 4, esk = io & NR_CUDA_ATTN_K_HALF ? 2 : 4;
  int esv = io & NR_CUDA_ATTN_V_HALF ? 2 : 4;
  const char *qb = (const char *)q + (b * g.qs[0] + h * g.qs[1] + row0 * g.qs[2]) * esq;
  const char *kb = (const char *)k + (b * g.ks[0] + kvh * g.ks[1]) * esk;
  const char *vb = (const char *)v + (b * g.vs[0] + kvh * g.vs[1]) * esv;
  stage<VEC>(qs, L.ldq, qb, g.qs[2], kTcRows, g.s - row0, (int)g.d, esq == 2);
  /* phase 1: scores (Q's loads and the first tile's are in flight together) */
  for (int64_t j0 = 0; j0 < L.tp; j0 += kTcKeys) {
    if (j0 > 0)
      __syncthreads(); /* the previous tile consumed */
    stage<VEC>(ks, L.ldk, kb + j0 * g.ks[2] * esk, g.ks[2], kTcKeys, g.t - j0, (int)g.d,
               esk == 2);
    __syncthreads();
    for (int n = 0; n < kTcKeys / 16; n++) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < g.d; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, qs + warp * 16 * L.ldq + kk, L.ldq);
        wmma::load_matrix_sync(fb, ks + n * 16 * L.ldk + kk, L.ldk);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ss + j0 + n * 16, acc, L.lds, wmma::mem_row_major);
    }
  }
  /* the first value tile loads while the softmax runs (its own buffer) */
  stage<VEC>(vs, L.ldk, vb, g.vs[2], kTcKeys, g.t, (int)g.dv, esv == 2);
  __syncwarp();
  /* phase 2: softmax rows */
  tc_softmax(g, L, ss, ps, inv, row0 + warp * 16, b, h, mask);
  __syncwarp();
  /* phase 3: P V */
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> o[NT];
#pragma unroll
  for (int t = 0; t < NT; t++)
    wmma::fill_fragment(o[t], 0.0f);
  for (int64_t j0 = 0; j0 < L.tp; j0 += kTcKeys) {
    if (j0 > 0) {
      __syncthreads(); /* the previous tile consumed */
      stage<VEC>(vs, L.ldk, vb + j0 * g.vs[2] * esv, g.vs[2], kTcKeys, g.t - j0, (int)g.dv,
                 esv == 2);
    }
    __syncthreads();
    for (int kk = 0; kk < kTcKeys; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
      wmma::load_matrix_sync(fa, ps + j0 + kk, L.ldp);
#pragma unroll
      for (int t = 0; t < NT; t++) {
        if (t * 16 < g.dv) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
          wmma::load_matrix_sync(fb, vs + kk * L.ldk + t * 16, L.ldk);
          wmma::mma_sync(o[t], fa, fb, o[t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; t++)
    if (t * 16 < g.dv)
      wmma::store_matrix_sync(ss + t * 16, o[t], L.lds, wmma::mem_row_major);
  __syncwarp();
  bool yh = io & NR_CUDA_ATTN_Y_HALF;
  for (int r = 0; r < 16; r++) {
    int64_t i = row0 + warp * 16 + r;
    if (i >= g.s)
      break;
    int64_t at = b * g.ys[0] + h * g.ys[1] + i * g.ys[2];
    for (int64_t c = lane; c < g.dv; c += 32)
      nr_st(y, at + c, ss[r * L.lds + c] * inv[r], yh);
  }
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

template <int NT, bool VEC>
cudaError_t launch_tc(const nr_cuda_attn *g, const void *q, const void *k, const void *v,
                      const void *mask, void *y, int io, cudaStream_t s) {
  tc_layout L = tc_layout_of(g->d, g->dv, g->t);
  static int allowed = 0; /* the largest size set so far (a race only sets it again) */
  if (L.bytes > allowed) {
    cudaError_t e = cudaFuncSetAttribute(attn_tc_kernel<NT, VEC>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)L.bytes);
    if (e != cudaSuccess)
      return e;
    allowed = (int)L.bytes;
  }
  dim3 grid((unsigned)((g->s + kTcRows - 1) / kTcRows), (unsigned)g->hq, (unsigned)g->b);
  attn_tc_kernel<NT, VEC><<<grid, kTcWarps * 32, (size_t)L.bytes, s>>>(*g, q, k, v, mask, y, io);
  return cudaGetLastError();
}

template <bool VEC>
cudaError_t launch_tc_nt(const nr_cuda_attn *g, const void *q, const void *k, const void *v,
                         const void *mask, void *y, int io, cudaStream_t s) {
  if (g->dv <= 32)
    return launch_tc<2, VEC>(g, q, k, v, mask, y, io, s);
  if (g->dv <= 64)
    return launch_tc<4, VEC>(g, q, k, v, mask, y, io, s);
  return launch_tc<8, VEC>(g, q, k, v, mask, y, io, s);
}

} // namespace

extern "C" int64_t nr_cuda_attention_tc_smem(int64_t d, int64_t dv, int64_t t) {
  return tc_layout_of(d, dv, t).bytes;
}

/* ---- the register-resident kernel (attn_fl_kernel) ---------------------------------------
 * For fp16 Q, K, V with D == Dv in {32, 64, 128}, 16-byte aligned rows: a warp owns 16
 * query rows and keeps everything of them in registers, in the layouts of the
 * m16n8k16 tensor-core instruction (mma.sync): Q as A fragments (loaded once with
 * ldmatrix), the 16 x 64 scores of one key tile as accumulators, and P as A
 * fragments made from those accumulators in place (the accumulator of an m16n8 tile
 * pair holds exactly the A fragment of the 16 x 16 chunk), so the softmax is online
 * (running maximum and sum per row, the output rescaled when the maximum grows) and
 * no score touches shared memory. The W warps of a block share K and V tiles of 64
 * keys, which cp.async brings into two buffers (the next tile loads while this one
 * is used; padded keys are zero-filled), B fragments come from ldmatrix (V
 * transposed on the way). Row statistics need only the four lanes of a quad. W is
 * picked per launch so that a batch-1 model still has about one block per SM. */
namespace {

constexpr int kFlKeys = 64;

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }

template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t *r, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

/* c += a b for one m16n8k16 tile (fp16 operands, fp32 accumulators). */
__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi, float *sum) {
  __half2 h = __floats2half2_rn(lo, hi);
  float2 f = __half22float2(h);
  *sum += f.x + f.y; /* normalize by what the product sees */
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}

__host__ __device__ constexpr int fl_ld(int d) { return d + 8; } /* halves a smem row */

__host__ __device__ inline int64_t fl_bytes(int d, int w) {
  return (int64_t)(w * 16 + 4 * kFlKeys) * fl_ld(d) * 2;
}

/* The score of (query row i, key j) after scale (in log2 units), mask and causality;
 * padded rows and keys (i >= S, j >= T) are -inf and read no mask. */
__device__ __forceinline__ float fl_score(const nr_cuda_attn &g, float s, int64_t mrow, int64_t i,
                                          int64_t j, const void *mask) {
  if (i >= g.s || j >= g.t || (g.causal && j > i))
    return -INFINITY;
  if (g.mask == 2)
    return ((const unsigned char *)mask)[mrow + j] ? s : -INFINITY;
  if (g.mask)
    return s + ((const float *)mask)[mrow + j] * 1.4426950408889634f;
  return s;
}

template <int D, int W>
__global__ void __launch_bounds__(W * 32)
    attn_fl_kernel(const nr_cuda_attn g, const __half *q, const __half *k, const __half *v,
                   const void *mask, void *y, int y_half) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LD = fl_ld(D), NK = D / 16, NO = D / 8, CH = D / 8;
  __half *qs = (__half *)smem, *ks = qs + W * 16 * LD, *vs = ks + 2 * kFlKeys * LD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
  const int lm = lane >> 3, lr = lane & 7; /* ldmatrix: which 8x8 matrix, which row */
  const int64_t b = blockIdx.z, h = blockIdx.y, kvh = h / (g.hq / g.hkv);
  const int64_t row0 = (int64_t)blockIdx.x * (W * 16);
  const __half *qb = q + b * g.qs[0] + h * g.qs[1];
  const __half *kb = k + b * g.ks[0] + kvh * g.ks[1];
  const __half *vb = v + b * g.vs[0] + kvh * g.vs[1];
  for (int e = threadIdx.x; e < W * 16 * CH; e += W * 32) {
    int r = e / CH, c = (e % CH) * 8;
    bool ok = row0 + r < g.s;
    cp_async16(qs + r * LD + c, qb + (ok ? row0 + r : 0) * g.qs[2] + c, ok);
  }
  auto load_kv = [&](int tile, int buf) {
    __half *kd = ks + buf * kFlKeys * LD, *vd = vs + buf * kFlKeys * LD;
    int64_t j0 = (int64_t)tile * kFlKeys;
    for (int e = threadIdx.x; e < kFlKeys * CH; e += W * 32) {
      int r = e / CH, c = (e % CH) * 8;
      bool ok = j0 + r < g.t;
      int64_t j = ok ? j0 + r : 0;
      cp_async16(kd + r * LD + c, kb + j * g.ks[2] + c, ok);
      cp_async16(vd + r * LD + c, vb + j * g.vs[2] + c, ok);
    }
  };
  const int tiles = (int)((g.t + kFlKeys - 1) / kFlKeys);
  load_kv(0, 0);
  cp_async_commit();
  const float sl2 = g.scale * 1.4426950408889634f; /* exp(x) = exp2(x log2 e) */
  const int64_t i0 = row0 + warp * 16 + gq, i1 = i0 + 8;
  const int64_t mr0 = b * g.ms[0] + h * g.ms[1] + i0 * g.ms[2], mr1 = mr0 + 8 * g.ms[2];
  uint32_t qf[NK][4];
  float o[NO][4];
#pragma unroll
  for (int t = 0; t < NO; t++)
    o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  for (int tile = 0; tile < tiles; tile++) {
    const int buf = tile & 1;
    if (tile + 1 < tiles) {
      load_kv(tile + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kc = 0; kc < NK; kc++)
        ldsm_x4(qf[kc], qs + (warp * 16 + lr + 8 * (lm & 1)) * LD + kc * 16 + 8 * (lm >> 1));
    }
    const __half *kt = ks + buf * kFlKeys * LD, *vt = vs + buf * kFlKeys * LD;
    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < NK; kc++) {
#pragma unroll
      for (int np = 0; np < 4; np++) {
        uint32_t bf[4];
        ldsm_x4(bf, kt + (np * 16 + lr + 8 * (lm >> 1)) * LD + kc * 16 + 8 * (lm & 1));
        mma16816(s[2 * np], qf[kc], bf[0], bf[1]);
        mma16816(s[2 * np + 1], qf[kc], bf[2], bf[3]);
      }
    }
    const int64_t j0 = (int64_t)tile * kFlKeys;
    float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; n++) {
#pragma unroll
      for (int c = 0; c < 2; c++) {
        int64_t j = j0 + n * 8 + 2 * tq + c;
        s[n][c] = fl_score(g, s[n][c] * sl2, mr0, i0, j, mask);
        s[n][2 + c] = fl_score(g, s[n][2 + c] * sl2, mr1, i1, j, mask);
        x0 = fmaxf(x0, s[n][c]);
        x1 = fmaxf(x1, s[n][2 + c]);
      }
    }
#pragma unroll
    for (int o2 = 1; o2 < 4; o2 <<= 1) {
      x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, o2));
      x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, o2));
    }
    const float n0 = fmaxf(m0, x0), n1 = fmaxf(m1, x1);
    const float z0 = n0 == -INFINITY ? 0.0f : n0, z1 = n1 == -INFINITY ? 0.0f : n1;
    const float a0 = exp2f(m0 - z0), a1 = exp2f(m1 - z1); /* 0 while m was -inf */
    m0 = n0, m1 = n1;
    float r0 = 0.0f, r1 = 0.0f;
    uint32_t pf[4][4];
#pragma unroll
    for (int n = 0; n < 8; n++) {
      pf[n >> 1][(n & 1) * 2] = pack_half2(exp2f(s[n][0] - z0), exp2f(s[n][1] - z0), &r0);
      pf[n >> 1][(n & 1) * 2 + 1] = pack_half2(exp2f(s[n][2] - z1), exp2f(s[n][3] - z1), &r1);
    }
    l0 = l0 * a0 + r0, l1 = l1 * a1 + r1;
#pragma unroll
    for (int t = 0; t < NO; t++)
      o[t][0] *= a0, o[t][1] *= a0, o[t][2] *= a1, o[t][3] *= a1;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
#pragma unroll
      for (int tp = 0; tp < NO / 2; tp++) {
        uint32_t bf[4];
        ldsm_x4_t(bf, vt + (kc * 16 + lr + 8 * (lm & 1)) * LD + tp * 16 + 8 * (lm >> 1));
        mma16816(o[2 * tp], pf[kc], bf[0], bf[1]);
        mma16816(o[2 * tp + 1], pf[kc], bf[2], bf[3]);
      }
    }
    __syncthreads(); /* this buffer is refilled by the next iteration's prefetch */
  }
#pragma unroll
  for (int o2 = 1; o2 < 4; o2 <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o2);
  }
  const float v0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, v1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  const int64_t y0 = b * g.ys[0] + h * g.ys[1] + i0 * g.ys[2], y1 = y0 + 8 * g.ys[2];
#pragma unroll
  for (int t = 0; t < NO; t++) {
    int c = t * 8 + 2 * tq;
    if (y_half) {
      if (i0 < g.s)
        *(__half2 *)((__half *)y + y0 + c) = __floats2half2_rn(o[t][0] * v0, o[t][1] * v0);
      if (i1 < g.s)
        *(__half2 *)((__half *)y + y1 + c) = __floats2half2_rn(o[t][2] * v1, o[t][3] * v1);
    } else {
      if (i0 < g.s)
        *(float2 *)((float *)y + y0 + c) = make_float2(o[t][0] * v0, o[t][1] * v0);
      if (i1 < g.s)
        *(float2 *)((float *)y + y1 + c) = make_float2(o[t][2] * v1, o[t][3] * v1);
    }
  }
}

template <int D, int W>
cudaError_t launch_fl(const nr_cuda_attn *g, const void *q, const void *k, const void *v,
                      const void *mask, void *y, int y_half, cudaStream_t s) {
  int64_t bytes = fl_bytes(D, W);
  static int allowed = 0;
  if (bytes > 48 * 1024 && bytes > allowed) {
    cudaError_t e = cudaFuncSetAttribute(attn_fl_kernel<D, W>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e != cudaSuccess)
      return e;
    allowed = (int)bytes;
  }
  dim3 grid((unsigned)((g->s + W * 16 - 1) / (W * 16)), (unsigned)g->hq, (unsigned)g->b);
  attn_fl_kernel<D, W><<<grid, W * 32, (size_t)bytes, s>>>(
      *g, (const __half *)q, (const __half *)k, (const __half *)v, mask, y, y_half);
  return cudaGetLastError();
}

/* Warps a block: 4 when that still gives two blocks an SM (132 on an H200; the exact
 * count matters little), else fewer, so short sequences at batch 1 spread out. */
template <int D>
cudaError_t launch_fl_w(const nr_cuda_attn *g, const void *q, const void *k, const void *v,
                        const void *mask, void *y, int y_half, cudaStream_t s) {
  int64_t heads = g->b * g->hq;
  if (heads * ((g->s + 63) / 64) >= 264)
    return launch_fl<D, 4>(g, q, k, v, mask, y, y_half, s);
  if (heads * ((g->s + 31) / 32) >= 132)
    return launch_fl<D, 2>(g, q, k, v, mask, y, y_half, s);
  return launch_fl<D, 1>(g, q, k, v, mask, y, y_half, s);
}

} // namespace

extern "C" bool nr_cuda_attention_fl_ok(const nr_cuda_attn *g, const void *q, const void *k,
                                        const void *v, const void *y, int io) {
  bool half_in = (io & 7) == 7;
  bool ok = half_in && g->d == g->dv && (g->d == 32 || g->d == 64 || g->d == 128) &&
            aligned16(q) && aligned16(k) && aligned16(v) && aligned16(y);
  for (int i = 0; i < 3; i++)
    ok = ok && g->qs[i] % 8 == 0 && g->ks[i] % 8 == 0 && g->vs[i] % 8 == 0 && g->ys[i] % 4 == 0;
  return ok;
}

extern "C" cudaError_t nr_cuda_attention_tc(const nr_cuda_attn *g, const void *q, const void *k,
                                            const void *v, const void *mask, void *y, int io,
                                            cudaStream_t s) {
  if (g->b <= 0 || g->hq <= 0 || g->s <= 0)
    return cudaSuccess;
  if (!(io & NR_CUDA_ATTN_STAGED) && g->t >= 1 && nr_cuda_attention_fl_ok(g, q, k, v, y, io)) {
    int yh = (io & NR_CUDA_ATTN_Y_HALF) != 0;
    if (g->d == 32)
      return launch_fl_w<32>(g, q, k, v, mask, y, yh, s);
    if (g->d == 64)
      return launch_fl_w<64>(g, q, k, v, mask, y, yh, s);
    return launch_fl_w<128>(g, q, k, v, mask, y, yh, s);
  }
  if (g->d % 16 || g->dv % 16 || g->d > 128 || g->dv > 128 || g->t < 1 ||
      nr_cuda_attention_tc_smem(g->d, g->dv, g->t) > NR_CUDA_ATTN_TC_SMEM_MAX)
    return cudaErrorInvalidValue;
  bool vec = aligned16(q) && aligned16(k) && aligned16(v);
  for (int i = 0; i < 3; i++)
    vec = vec && g->qs[i] % 8 == 0 && g->ks[i] % 8 == 0 && g->vs[i] % 8 == 0;
  return vec ? launch_tc_nt<true>(g, q, k, v, mask, y, io, s)
             : launch_tc_nt<false>(g, q, k, v, mask, y, io, s);
}
