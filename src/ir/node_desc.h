/* node_desc.h - backend-neutral descriptions of what a node computes, read by the CPU
 * tactics (src/kernels/cpu/) and the CUDA backend (src/backends/cuda/) alike: a
 * Gemm / MatMul / nnroute.FusedGemm / nnroute.FusedMatMul as products plus an
 * epilogue (nr_gemm_desc), an ONNX Attention (nr_attn_desc), a Concat or a Split as
 * pieces along one axis (nr_concat_desc), a Conv / nnroute.FusedConv as a resolved
 * window plus an epilogue (nr_conv_desc).
 *
 * Key decision: a description is derived from the node's attributes and its operands'
 * shapes only (nr_node_io: dtype, rank, dims; no data, no constness, no layout), so it
 * says what the ONNX operator means and nothing about how a backend runs it. Each
 * backend then checks what it can run (dtypes, constant operands, layouts, limits of
 * its kernels) and fills its own params record from the description; the records
 * stored in engines are those, unchanged. Every parse function returns NR_OK, or
 * NR_ERR_INVALID_MODEL for a node that breaks the operator's rules (shapes that do not
 * fit, a bad attribute) and NR_ERR_UNSUPPORTED for valid ONNX outside what the
 * descriptions cover (unknown shapes, attention's KV cache), with a message naming
 * the node. */
#ifndef NR_IR_NODE_DESC_H
#define NR_IR_NODE_DESC_H

#include "ir/act.h"
#include "ir/ir.h"
#include "ir/op.h"
#include "ir/window.h"

#define NR_DESC_MAX_IO NR_OP_MAX_IO /* inputs or outputs a description reads */

/* The shapes of a node's operands. An absent operand (index past the count, or an
 * empty name) has has_in / has_out false. */
typedef struct nr_node_io {
  int n_in, n_out; /* the node's counts (may exceed NR_DESC_MAX_IO: parse refuses) */
  bool has_in[NR_DESC_MAX_IO], has_out[NR_DESC_MAX_IO];
  nr_value in[NR_DESC_MAX_IO], out[NR_DESC_MAX_IO]; /* dtype, rank, dims; data NULL */
} nr_node_io;

/* The shapes of node n's tensors in g. */
void nr_node_io_from_graph(const nr_graph *g, const nr_node *n, nr_node_io *io);
/* Operand i, or NULL when absent. */
const nr_value *nr_node_io_in(const nr_node_io *io, int i);
const nr_value *nr_node_io_out(const nr_node_io *io, int i);

/* A fused op's activation: "activation" (default "none"), act_alpha and act_beta with
 * the defaults of ir/fused.h's reference (clip: -FLT_MAX, FLT_MAX; leaky_relu: 0.01;
 * hard_sigmoid: 0.2, 0.5; else 0). False for an unknown activation name. */
bool nr_fused_act_read(const nr_node *n, nr_act *act, float *a, float *b);

/* ---- Gemm, MatMul, FusedGemm, FusedMatMul -------------------------------------------- */

typedef enum nr_gemm_op {
  NR_GEMM_OP_GEMM,
  NR_GEMM_OP_MATMUL,
  NR_GEMM_OP_FUSED_GEMM,
  NR_GEMM_OP_FUSED_MATMUL,
} nr_gemm_op;

/* How input 2 (Gemm's C, FusedMatMul's Bias) broadcasts over one m x n product. */
typedef enum nr_gemm_addend {
  NR_GEMM_ADD_NONE,
  NR_GEMM_ADD_COL,  /* varies along N only: a scalar, [1], [N], [1, 1], [1, N]; Bias */
  NR_GEMM_ADD_ROW,  /* [M, 1] (M > 1 or N == 1: COL wins where both fit) */
  NR_GEMM_ADD_FULL, /* [M, N] */
} nr_gemm_addend;

/* Y = act(alpha * op(A) op(B) + beta * C + R), one m x n product per batch element.
 * Batch dims are Y's leading dims (MatMul's broadcast of A's and B's dims before the
 * last two; none for Gemm). A 1-D A is [1, K] with that 1 dropped from Y, a 1-D B is
 * [K, 1] likewise. */
typedef struct nr_gemm_desc {
  nr_gemm_op op;
  int64_t m, n, k;       /* op(A) is m x k, op(B) is k x n */
  bool trans_a, trans_b; /* Gemm's transA / transB (always false for MatMul) */
  int a_rank, b_rank;    /* the operands' own ranks */
  int batch_rank;        /* Y's batch dims */
  int64_t batch_dims[NR_MAX_RANK];
  int64_t a_batch[NR_MAX_RANK], b_batch[NR_MAX_RANK];   /* A's / B's extent along each
                                                       * batch dim (1: broadcast) */
  int64_t a_stride[NR_MAX_RANK], b_stride[NR_MAX_RANK]; /* elements per step along
                                                         * each batch dim; 0: broadcast */
  int64_t batch;                                        /* product of batch_dims */
  int64_t a_batch_count, b_batch_count;                 /* products of a_batch, b_batch */
  float alpha, beta;                                    /* 1, 1 for MatMul */
  nr_gemm_addend add;                                   /* input 2 */
  int64_t add_rows, add_cols; /* its extents over the product: 1 or m, 1 or n */
  bool residual;              /* input 3 (fused ops): R, Y's shape */
  nr_act act;                 /* fused ops' activation (NONE otherwise) */
  float act_a, act_b;
} nr_gemm_desc;

bool nr_gemm_desc_is_node(const nr_node *n);
nr_status nr_gemm_desc_parse(const nr_node *n, const nr_node_io *io, nr_gemm_desc *d,
                             nr_error *err);

/* ---- Attention ------------------------------------------------------------------------ */

enum { NR_ATTN_DESC_MASK_NONE, NR_ATTN_DESC_MASK_FLOAT, NR_ATTN_DESC_MASK_BOOL };

/* Y = softmax(Q K^T * scale + mask) V per (batch, query head), grouped-query heads
 * (query head h reads kv head h / (hq / hkv)). Q, K, V and Y are 4-D [B, H, S, D] or
 * 3-D [B, S, H * D] (heads from q_num_heads / kv_num_heads); the strides say where row
 * i of head h of batch b starts either way. What it covers: opset 23+, no KV cache
 * (past_*, present_*, nonpad_kv_seqlen), no softcap or sliding window, no
 * qk_matmul_output, an optional float (additive) or bool mask that broadcasts to
 * [B, Hq, S, T] and has T as its last dim, is_causal; no empty dims. */
typedef struct nr_attn_desc {
  int rank; /* 3 or 4 */
  int64_t b, hq, hkv, s, t, d, dv;
  int64_t qs[3], ks[3], vs[3], ys[3]; /* batch, head, row strides (elements) */
  int mask;                           /* NR_ATTN_DESC_MASK_* */
  int64_t ms[4];                      /* mask strides over batch, q head, row, key */
  float scale;                        /* the attribute, default 1 / sqrt(d) */
  bool causal;
} nr_attn_desc;

nr_status nr_attn_desc_parse(const nr_node *n, const nr_node_io *io, nr_attn_desc *d,
                             nr_error *err);

/* ---- Concat, Split -------------------------------------------------------------------- */

/* The whole (Concat's output, Split's input) as [outer, total, inner] around the axis,
 * and piece i as [outer, extent[i], inner] starting at offset[i] along it. */
typedef struct nr_concat_desc {
  int axis; /* normalized, 0 <= axis < rank */
  int rank;
  int64_t outer, total, inner;
  int n_pieces;
  int64_t extent[NR_DESC_MAX_IO], offset[NR_DESC_MAX_IO];
} nr_concat_desc;

typedef nr_concat_desc nr_split_desc;

/* Concat: the inputs are the pieces, output 0 the whole (axis, read as 0 if absent). */
nr_status nr_concat_desc_parse(const nr_node *n, const nr_node_io *io, nr_concat_desc *d,
                               nr_error *err);
/* Split: input 0 is the whole, the outputs the pieces (axis default 0). */
nr_status nr_split_desc_parse(const nr_node *n, const nr_node_io *io, nr_split_desc *d,
                              nr_error *err);

/* ---- Conv, FusedConv ------------------------------------------------------------------ */

/* Y = act(Conv(X, W) + B + R) over X [N, C, in...], W [M, C / group, kernel...], Y
 * [N, M, out...], with nsp = win.nsp spatial dims (1 or more). The window is resolved
 * (ir/window.h): auto_pad turned into concrete begin / end pads, out[] the output
 * sizes, which Y's dims match. B (input 2) has M values; R (input 3, FusedConv only)
 * Y's count; act, act_a, act_b are FusedConv's (nr_fused_act_read; NONE for Conv).
 * What it covers: known shapes of every present operand. */
typedef struct nr_conv_desc {
  bool fused;                    /* nnroute.FusedConv */
  int64_t batch, in_c, out_c;    /* N, C, M */
  int64_t group;                 /* C and M split into group groups */
  nr_window win;                 /* kernel, stride, dil, pad_b, pad_e, in, out */
  bool bias, residual;           /* inputs 2 and 3 present */
  nr_act act;
  float act_a, act_b;
} nr_conv_desc;

bool nr_conv_desc_is_node(const nr_node *n);
nr_status nr_conv_desc_parse(const nr_node *n, const nr_node_io *io, nr_conv_desc *d,
                             nr_error *err);

#endif
