/* cuda_kernels.h - the CUDA kernels' C interface: parameter records and launchers,
 * shared by the kernels (*.cu, compiled as C++ by nvcc) and the tactics (C).
 *
 * Key decision: this header holds only plain records and extern "C" launchers, no
 * nnroute internals, so the .cu files stay free of the C-only compiler headers and
 * every launcher's contract (layouts, what "n" counts) is written next to it. Each
 * launcher enqueues on the given stream and returns the launch's error. */
#ifndef NR_BACKENDS_CUDA_KERNELS_H
#define NR_BACKENDS_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- elementwise programs (kernels_eltwise.cu) ------------------------------------------
 * One kernel evaluates a short program per output element: x0 is loaded (float or
 * half), then each step combines the running value with an operand (binary) or maps
 * it (unary). Operands are read through per-dim strides over the output's (merged)
 * dims, so broadcasting is never materialized. Unary ops, binary ops, EltwiseChain,
 * the bias + residual + activation epilogues and precision casts are all programs. */

#define NR_CUDA_EW_MAX_OPS 8   /* operands, x0 included */
#define NR_CUDA_EW_MAX_STEPS 16
#define NR_CUDA_EW_MAX_DIMS 6

typedef enum nr_cuda_ew_op {
  NR_EW_ADD = 1, NR_EW_SUB, NR_EW_MUL, NR_EW_DIV, NR_EW_POW, NR_EW_MAX, NR_EW_MIN,
  NR_EW_PRELU,
  /* unary */
  NR_EW_RELU = 32, NR_EW_SIGMOID, NR_EW_TANH, NR_EW_EXP, NR_EW_LOG, NR_EW_ERF, NR_EW_SQRT,
  NR_EW_NEG, NR_EW_ABS, NR_EW_RECIPROCAL, NR_EW_FLOOR, NR_EW_CEIL, NR_EW_SOFTPLUS,
  NR_EW_HARD_SWISH, NR_EW_CLIP, NR_EW_LEAKY_RELU, NR_EW_ELU, NR_EW_HARD_SIGMOID,
  NR_EW_GELU, NR_EW_GELU_TANH, NR_EW_SILU, NR_EW_SELU, NR_EW_IDENTITY,
} nr_cuda_ew_op;

typedef struct nr_cuda_ew_step {
  uint8_t op;      /* nr_cuda_ew_op */
  int8_t operand;  /* binary: operand index (0 = x0 itself), unary: -1 */
  uint8_t swapped; /* binary: the running value is the right-hand side */
  uint8_t pad;
  float p0, p1;
} nr_cuda_ew_step;

typedef struct nr_cuda_ew_prog {
  int n_steps, n_ops, rank;
  uint8_t half_mask;                            /* bit k: operand k is fp16 */
  uint8_t y_half;                               /* the output is fp16 */
  int64_t n;                                    /* output elements */
  int64_t dims[NR_CUDA_EW_MAX_DIMS];            /* merged output dims */
  int64_t stride[NR_CUDA_EW_MAX_OPS][NR_CUDA_EW_MAX_DIMS]; /* elements; 0 = broadcast */
  nr_cuda_ew_step step[NR_CUDA_EW_MAX_STEPS];
} nr_cuda_ew_prog;


#ifdef __cplusplus
extern "C" {
#endif
/* y[i] = program(ops...); ops[0] is x0. */
cudaError_t nr_cuda_ew_launch(const nr_cuda_ew_prog *prog, const void *const *ops, void *y,
                              cudaStream_t s);
/* The epilogue of a product: y = act(x + bias[c] + res) over y viewed as [outer,
 * channels, inner] (contiguous), c the channel; bias (fp32, channels) and res may be
 * NULL, x may be y. x, res and y are fp16 or fp32 each; act is an nr_cuda_ew_op
 * (NR_EW_IDENTITY: none) with parameters p0, p1. Eight elements a thread with 16-byte
 * accesses where the contiguous run (inner, or channels when inner is 1) is a multiple
 * of 8 and the pointers are aligned, else one; 32-bit index math. cudaErrorNotSupported
 * for 2^31 elements or more (the program kernel takes those). */
typedef struct nr_cuda_epi_args {
  int64_t outer, channels, inner;
  int x_half, y_half, res_half;
  int op;
  float p0, p1;
} nr_cuda_epi_args;
cudaError_t nr_cuda_epi_launch(const nr_cuda_epi_args *e, const void *x, const float *bias,
                               const void *res, void *y, cudaStream_t s);
/* fp32 <-> fp16 conversions of n elements. */
cudaError_t nr_cuda_f32_to_f16(const float *x, void *y, int64_t n, cudaStream_t s);
cudaError_t nr_cuda_f16_to_f32(const void *x, float *y, int64_t n, cudaStream_t s);
#ifdef __cplusplus
}
#endif

/* ---- normalization, pooling, reductions (kernels_norm.cu) ----------------------------- */

/* 2-D pooling over NCHW planes; windows as the reference resolves them (nr_window). */
typedef struct nr_cuda_pool2d {
  uint8_t max, count_pad, x_half, y_half; /* x_half, y_half: fp16 tensors */
  int32_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int32_t planes, ih, iw, oh, ow;
} nr_cuda_pool2d;

#ifdef __cplusplus
extern "C" {
#endif
/* x and y of the row kernels are fp16 when xh / yh (bit 0 of `half`: x, bit 1: y),
 * else fp32; scale and bias are fp32. */
enum { NR_CUDA_X_HALF = 1, NR_CUDA_Y_HALF = 2 };
/* Softmax (log: LogSoftmax) over rows of n contiguous elements. */
cudaError_t nr_cuda_softmax(const void *x, void *y, int64_t rows, int64_t n, int log,
                            int half, cudaStream_t s);
/* LayerNormalization over rows of n elements; scale/bias of n floats (bias may be NULL). */
cudaError_t nr_cuda_layernorm(const void *x, const float *scale, const float *bias, void *y,
                              int64_t rows, int64_t n, float eps, int half, cudaStream_t s);
/* Mean (or max, max != 0) of each of `rows` rows of n contiguous elements. */
cudaError_t nr_cuda_reduce_rows(const void *x, void *y, int64_t rows, int64_t n, int max,
                                int half, cudaStream_t s);
cudaError_t nr_cuda_pool2d_run(const nr_cuda_pool2d *p, const void *x, void *y, cudaStream_t s);
#ifdef __cplusplus
}
#endif

/* ---- attention (kernels_attn.cu) ------------------------------------------------------ */

typedef struct nr_cuda_attn {
  int64_t b, hq, hkv, s, t, d, dv;
  int64_t qs[3], ks[3], vs[3], ys[3]; /* batch, head, row strides */
  int64_t ms[3];                      /* mask strides: batch, q head, row */
  int mask;                           /* 0 none, 1 float (additive), 2 bool */
  int causal;
  float scale;
} nr_cuda_attn;

#ifdef __cplusplus
extern "C" {
#endif
/* Y = softmax(Q K^T * scale + mask) V, fp32, one pass over the keys (online softmax).
 * D and Dv at most 256. */
cudaError_t nr_cuda_attention(const nr_cuda_attn *g, const float *q, const float *k,
                              const float *v, const void *mask, float *y, cudaStream_t s);
/* The register-tiled fp32 kernel (kernels_attn_f32.cu; cuda.attention.fp32=tiled): the
 * same result for D == Dv in {32, 64, 128} (nr_cuda_attention_tiled_ok), 32 query rows
 * a block (nr_cuda_attention_tiled_blocks: its grid size); cudaErrorInvalidValue for
 * other shapes. */
bool nr_cuda_attention_tiled_ok(const nr_cuda_attn *g);
int64_t nr_cuda_attention_tiled_blocks(const nr_cuda_attn *g);
cudaError_t nr_cuda_attention_tiled(const nr_cuda_attn *g, const float *q, const float *k,
                                    const float *v, const void *mask, float *y,
                                    cudaStream_t s);
/* The tensor-core variant (nr_cuda_f16_attention): Q, K, V and Y each fp32 or fp16
 * (io: NR_CUDA_ATTN_*_HALF), products on fp16 tensor cores with fp32 accumulation.
 * Two kernels: when nr_cuda_attention_fl_ok (Q, K, V fp16, D == Dv in {32, 64, 128},
 * 16-byte aligned rows) the register-resident one (mma.sync, online softmax, any key
 * count), else, or with NR_CUDA_ATTN_STAGED in io, the staged one: an exact fp32
 * softmax over all keys held in shared memory, D and Dv multiples of 16, at most 128;
 * nr_cuda_attention_tc_smem is the shared memory it needs (bytes; tactics refuse
 * what does not fit, NR_CUDA_ATTN_TC_SMEM_MAX). */
enum {
  NR_CUDA_ATTN_Q_HALF = 1, NR_CUDA_ATTN_K_HALF = 2, NR_CUDA_ATTN_V_HALF = 4,
  NR_CUDA_ATTN_Y_HALF = 8, NR_CUDA_ATTN_STAGED = 16
};
bool nr_cuda_attention_fl_ok(const nr_cuda_attn *g, const void *q, const void *k,
                             const void *v, const void *y, int io);
#define NR_CUDA_ATTN_TC_SMEM_MAX (200 * 1024)
int64_t nr_cuda_attention_tc_smem(int64_t d, int64_t dv, int64_t t);
cudaError_t nr_cuda_attention_tc(const nr_cuda_attn *g, const void *q, const void *k,
                                 const void *v, const void *mask, void *y, int io,
                                 cudaStream_t s);
#ifdef __cplusplus
}
#endif

/* ---- depthwise convolution (kernels_dwconv.cu) -------------------------------------------- */

/* One filter per channel (group == C == M), a K x K window (K 3 or 5), one stride S
 * (1 or 2) on both axes, any pads, no dilation. Weights packed per layout (PLAIN:
 * [C][K*K], NHWC: [K*K][C]) as fp32; bias fp32 [C] or NULL; y = act(conv + bias) with
 * act an nr_cuda_ew_op (NR_EW_IDENTITY for none). */
typedef struct nr_cuda_dwconv {
  int32_t n, c, h, w, oh, ow;
  int16_t k, stride, pad_t, pad_l;
  uint8_t nhwc, x_half, y_half, act;
  float p0, p1;
} nr_cuda_dwconv;

#ifdef __cplusplus
extern "C" {
#endif
cudaError_t nr_cuda_dwconv_run(const nr_cuda_dwconv *p, const void *x, const float *w,
                               const float *bias, void *y, cudaStream_t s);
#ifdef __cplusplus
}
#endif

/* ---- data movement (kernels_copy.cu) --------------------------------------------------- */

#define NR_CUDA_COPY_MAX_DIMS 8

/* dst[sum i_d * os_d] = src[sum i_d * is_d] over dims (elements of es bytes). */
typedef struct nr_cuda_copy {
  int rank;
  int es;
  int64_t dims[NR_CUDA_COPY_MAX_DIMS], is[NR_CUDA_COPY_MAX_DIMS], os[NR_CUDA_COPY_MAX_DIMS];
} nr_cuda_copy;

#ifdef __cplusplus
extern "C" {
#endif
/* Merges the view (unit dims dropped, contiguous neighbours joined) and copies; a copy
 * whose source and destination are the same contiguous bytes does nothing. */
cudaError_t nr_cuda_copy_strided(nr_cuda_copy v, void *dst, const void *src,
                                 cudaStream_t s);
/* out[o, j, i] = table[o, idx[j], i] (idx int64 or int32, negative counts from the
 * end; an index out of range gives zeros). */
cudaError_t nr_cuda_gather(const void *table, const void *idx, int idx64, void *out,
                           int64_t outer, int64_t axis_dim, int64_t n_idx, int64_t inner,
                           int es, cudaStream_t s);
/* Fills a buffer with a byte (flush_caches). */
cudaError_t nr_cuda_touch(void *p, size_t n, cudaStream_t s);
#ifdef __cplusplus
}
#endif

#endif
