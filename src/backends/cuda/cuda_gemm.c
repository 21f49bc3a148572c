/* cuda_gemm.c - Gemm, MatMul, FusedGemm and FusedMatMul on the GPU through cuBLASLt
 * (algorithm from its heuristic, bias and ReLU in its epilogue, the residual as its
 * C matrix) and through cuBLAS (cublasGemmStridedBatchedEx, then one epilogue pass),
 * each in fp32, tf32 (TF32 tensor cores, fp32 tensors) and fp16 (fp16 operands,
 * fp32 accumulation and output).
 *
 * Key decision: nnroute's tensors are row-major and cuBLAS is column-major, so every
 * product is computed transposed: D^T = op(B)^T op(A)^T, i.e. cuBLAS's "A" is our B
 * and its "B" is our A, and the bias runs along cuBLAS's rows. A node's description
 * (nr_gemm_desc, ir/node_desc.h, the one the CPU tactics read) is reduced once to
 * (M, N, K, batch, strides, transposes, alpha) plus an addend: a bias vector along
 * N (packed at build time, beta applied), a constant full matrix (packed likewise)
 * or a residual input. Constant operands for fp16 are converted at build time into
 * the packed data; activations are converted into scratch per run. Which of the
 * heuristic's algorithms cuBLASLt runs is the knob cuda.gemm.algo (index into the
 * list the heuristic returns for this shape; the build checks it exists). An fp16
 * product's GELU runs in cuBLASLt's GELU epilogue (its tanh form: the knob
 * cuda.gemm.gelu=exact keeps an erf GELU exact, as an epilogue pass), and the
 * residual Add fuse_act took into a FusedGemm or FusedMatMul arrives as input 3.
 *
 * fp16 tactics also take fp16 activations and write fp16 outputs where the fp16 pass
 * (cuda_half.c) made the slots fp16: an fp16 operand is read in place, an fp16 output
 * is cuBLAS's D (its C and the epilogue's bias are then fp16 too, packed at build
 * time); a residual whose dtype differs from the output's is added by the epilogue
 * pass instead of being cuBLAS's C. */
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_knobs.h"
#include "passes/pass_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { ADD_NONE, ADD_BIAS, ADD_CMAT, ADD_RES }; /* what is added to alpha*AB */

typedef struct cuda_gemm_params {
  int32_t m, n, k, batch;
  int32_t sa, sb, sd;     /* batch strides (elements); 0: shared operand */
  float alpha, act_a, act_b;
  uint8_t ta, tb, act, add;  /* add: ADD_* */
  uint8_t res_in;         /* input index of the residual (ADD_RES) */
  uint8_t b_const, a_const; /* operand is a constant (fp16: packed as half) */
  uint8_t algo;           /* cuBLASLt heuristic index */
  uint8_t has_bias;       /* a packed bias vector besides the addend */
  uint8_t io;             /* GEMM_*_HALF: which activations are fp16 */
  uint8_t gelu_epi;       /* cuBLASLt's GELU epilogue (tanh form) runs the GELU */
  uint8_t pad;
} cuda_gemm_params;

enum { GEMM_A_HALF = 1, GEMM_B_HALF = 2, GEMM_Y_HALF = 4, GEMM_R_HALF = 8 };

_Static_assert(sizeof(cuda_gemm_params) <= NR_TACTIC_PARAMS, "gemm params too big");

static uint64_t align256(uint64_t v) { return (v + 255) & ~(uint64_t)255; }

/* ---- geometry -------------------------------------------------------------------------- */

static bool fl_plain(const nr_slot *s, bool half) {
  return s && s->layout == NR_LAYOUT_PLAIN &&
         (s->dtype == NR_DTYPE_FLOAT || (half && s->dtype == NR_DTYPE_FLOAT16));
}

static bool f32_plain(const nr_slot *s) { return fl_plain(s, false); }

static bool is_half(const nr_slot *s) { return s && s->dtype == NR_DTYPE_FLOAT16; }

/* Whether the step's tactic (set from prepare on) reads and writes fp16 activations. */
static bool half_io(const nr_tactic_ctx *c) {
  return c->step->tactic && c->step->tactic->precision == NR_PREC_FP16;
}

/* MatMul batches: B shared (no batch of its own: A's batch folded into M, A being
 * contiguous), A shared, or equal batch dims of equal-rank operands; strided batches
 * are all cuBLAS runs. */
static bool matmul_geom(const nr_gemm_desc *d, cuda_gemm_params *p) {
  int64_t m = d->m, k = d->k, n = d->n;
  int64_t ba = d->a_batch_count, bb = d->b_batch_count;
  if (m * k == 0 || k * n == 0)
    return false;
  if (bb == 1) {
    m *= ba;
    p->batch = 1;
  } else if (ba == 1) {
    p->batch = (int32_t)bb, p->sa = 0, p->sb = (int32_t)(k * n);
  } else {
    if (d->a_rank != d->b_rank)
      return false;
    for (int i = 0; i < d->batch_rank; i++)
      if (d->a_batch[i] != d->b_batch[i])
        return false;
    p->batch = (int32_t)ba, p->sa = (int32_t)(m * k), p->sb = (int32_t)(k * n);
  }
  p->m = (int32_t)m, p->n = (int32_t)n, p->k = (int32_t)k;
  p->sd = (int32_t)(m * n);
  p->alpha = 1.0f;
  return m * n * (int64_t)p->batch < INT32_MAX;
}

static bool gemm_geom(const nr_gemm_desc *d, cuda_gemm_params *p) {
  if (d->m * d->n >= INT32_MAX)
    return false;
  p->ta = d->trans_a, p->tb = d->trans_b;
  p->m = (int32_t)d->m, p->n = (int32_t)d->n, p->k = (int32_t)d->k, p->batch = 1;
  p->alpha = d->alpha;
  return true;
}

/* The addend of a Gemm's C (const: packed later; non-const: full [M, N] with beta 1). */
static bool gemm_c(const nr_tactic_ctx *c, const nr_gemm_desc *d, cuda_gemm_params *p) {
  const nr_slot *cs = nr_step_in(c, 2);
  if (d->add == NR_GEMM_ADD_NONE || d->beta == 0.0f)
    return true;
  if (!fl_plain(cs, half_io(c) && !nr_step_const(c, 2)))
    return false;
  if (nr_step_const(c, 2)) {
    p->add = d->add_rows == 1 ? ADD_BIAS : ADD_CMAT;
    return true;
  }
  if (d->add_rows != d->m || d->add_cols != d->n || d->beta != 1.0f)
    return false;
  p->add = ADD_RES, p->res_in = 2;
  return true;
}

/* Reduces the step's node to its description and params; false when these tactics
 * cannot run it. */
static bool geom_of(const nr_tactic_ctx *c, nr_gemm_desc *d, cuda_gemm_params *p) {
  const nr_node *n = c->node;
  const nr_slot *a = nr_step_in(c, 0), *b = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  bool h = half_io(c);
  memset(p, 0, sizeof *p);
  if (!n || !fl_plain(a, h) || !fl_plain(b, h) || !fl_plain(y, h) || c->step->n_out != 1)
    return false;
  nr_node_io io;
  nr_node_io_from_ctx(c, &io);
  if (!nr_gemm_desc_is_node(n) || nr_gemm_desc_parse(n, &io, d, NULL))
    return false;
  bool gemm = d->op == NR_GEMM_OP_GEMM || d->op == NR_GEMM_OP_FUSED_GEMM;
  if (gemm ? !gemm_geom(d, p) : !matmul_geom(d, p))
    return false;
  p->a_const = nr_step_const(c, 0) != NULL;
  p->b_const = nr_step_const(c, 1) != NULL;
  const nr_slot *third = d->add != NR_GEMM_ADD_NONE ? nr_step_in(c, 2) : NULL;
  const nr_slot *r = d->residual ? nr_step_in(c, 3) : NULL;
  p->act = (uint8_t)d->act, p->act_a = d->act_a, p->act_b = d->act_b;
  if (gemm && !gemm_c(c, d, p))
    return false;
  if (!gemm && third) { /* FusedMatMul's Bias: N floats, constant */
    if (!f32_plain(third) || !nr_step_const(c, 2))
      return false;
    p->has_bias = 1;
  }
  if (r) {
    if (!fl_plain(r, h) || p->add == ADD_RES || p->add == ADD_CMAT)
      return false;
    if (p->add == ADD_BIAS)
      p->has_bias = 1;
    p->add = ADD_RES, p->res_in = 3;
  }
  if (p->add == ADD_BIAS)
    p->has_bias = 1, p->add = ADD_NONE;
  p->io = (uint8_t)((is_half(a) ? GEMM_A_HALF : 0) | (is_half(b) ? GEMM_B_HALF : 0) |
                    (is_half(y) ? GEMM_Y_HALF : 0) |
                    (p->add == ADD_RES && is_half(nr_step_in(c, p->res_in)) ? GEMM_R_HALF
                                                                            : 0));
  return true;
}

/* The residual is added by the epilogue pass, not as cuBLAS's C (whose type is D's). */
static bool res_apart(const cuda_gemm_params *p) {
  return p->add == ADD_RES && !(p->io & GEMM_R_HALF) != !(p->io & GEMM_Y_HALF);
}

/* ---- build time ------------------------------------------------------------------------- */

static size_t half_bytes(int64_t n) { return (size_t)n * 2; }

/* Packed data: [B or A as fp16 when constant and fp16][bias: N floats][bias: N halves
 * when the output is fp16][C matrix, in the output's type]. */
typedef struct packed_layout {
  uint64_t a_half, b_half, bias, bias_half, cmat, size;
} packed_layout;

static packed_layout packed_of(const cuda_gemm_params *p, nr_precision prec) {
  packed_layout l = {0};
  uint64_t at = 0;
  int64_t na = (int64_t)p->m * p->k * (p->sa ? p->batch : 1);
  int64_t nb = (int64_t)p->k * p->n * (p->sb ? p->batch : 1);
  bool half = prec == NR_PREC_FP16, yh = p->io & GEMM_Y_HALF;
  l.a_half = at, at += half && p->a_const ? align256(half_bytes(na)) : 0;
  l.b_half = at, at += half && p->b_const ? align256(half_bytes(nb)) : 0;
  l.bias = at, at += p->has_bias ? align256((uint64_t)p->n * 4) : 0;
  l.bias_half = at, at += p->has_bias && yh ? align256((uint64_t)p->n * 2) : 0;
  l.cmat = at, at += p->add == ADD_CMAT ? align256((uint64_t)p->m * p->n * (yh ? 2 : 4)) : 0;
  l.size = at;
  return l;
}

/* Per-run scratch: fp16 copies of the non-constant operands, then the workspace. */
typedef struct scratch_layout {
  uint64_t a_half, b_half, work, size;
} scratch_layout;

static scratch_layout scratch_of(const cuda_gemm_params *p, nr_precision prec,
                                 uint64_t work) {
  scratch_layout s = {0};
  uint64_t at = 0;
  bool half = prec == NR_PREC_FP16;
  int64_t na = (int64_t)p->m * p->k * (p->sa ? p->batch : 1);
  int64_t nb = (int64_t)p->k * p->n * (p->sb ? p->batch : 1);
  bool ah = half && !p->a_const && !(p->io & GEMM_A_HALF);
  bool bh = half && !p->b_const && !(p->io & GEMM_B_HALF);
  s.a_half = at, at += ah ? align256(half_bytes(na)) : 0;
  s.b_half = at, at += bh ? align256(half_bytes(nb)) : 0;
  s.work = at, at += work;
  s.size = at;
  return s;
}

static void to_half(const float *x, uint16_t *y, int64_t n);

/* The bias vector (beta * C broadcast to N, or FusedMatMul's Bias) into dst. */
static void pack_bias(const nr_tactic_ctx *c, const nr_gemm_desc *d,
                      const cuda_gemm_params *p, float *dst) {
  const float *src = nr_step_const(c, 2);
  bool gemm = d->op == NR_GEMM_OP_GEMM || d->op == NR_GEMM_OP_FUSED_GEMM;
  float beta = gemm ? d->beta : 1.0f;
  for (int64_t j = 0; j < p->n; j++)
    dst[j] = beta * src[d->add_cols == 1 ? 0 : j];
}

static void pack_cmat(const nr_tactic_ctx *c, const nr_gemm_desc *d,
                      const cuda_gemm_params *p, float *dst) {
  const float *src = nr_step_const(c, 2);
  int64_t rows = d->add_rows, cols = d->add_cols;
  for (int64_t i = 0; i < p->m; i++)
    for (int64_t j = 0; j < p->n; j++)
      dst[i * p->n + j] = d->beta * src[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
}

/* Read without effect (route.h, knob use): gemm_prepare marks it once it is used. */
static int32_t knob_algo(const nr_tactic_ctx *c) {
  const char *v = nr_route_peek_def(c->route, nr_knob_def_of(NR_KNOB_CUDA_GEMM_ALGO),
                                    c->node);
  return v ? (int32_t)strtol(v, NULL, 10) : 0;
}

static nr_status lt_count(const nr_tactic_ctx *c, const cuda_gemm_params *p,
                          uint64_t work, int *n_algos);

static nr_status gemm_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  cuda_gemm_params p;
  nr_gemm_desc d;
  if (!geom_of(c, &d, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "node no longer supported");
  nr_precision prec = step->tactic->precision;
  bool lt = !strcmp(step->tactic->algo, "cublaslt");
  uint64_t work = lt ? nr_cuda_workspace_limit(c) : 0;
  if (lt) {
    /* cuda.gemm.gelu: an fp16 product's GELU in cuBLASLt's epilogue (the tanh form;
     * exact for a tanh GELU, an approximation of the erf one) */
    p.gelu_epi = prec == NR_PREC_FP16 && !res_apart(&p) &&
                 (p.act == NR_ACT_GELU_TANH ||
                  (p.act == NR_ACT_GELU &&
                   !nr_route_is(c->route, NR_KNOB_CUDA_GEMM_GELU, NULL, "exact")));
    int n_algos = 0, want = knob_algo(c);
    nr_status st = lt_count(c, &p, work, &n_algos);
    if (st)
      return st;
    if (want >= n_algos) /* past the list's end: the first, as the default (ignored) */
      want = 0;
    else
      nr_route_mark_effective(c->route, nr_knob_def_of(NR_KNOB_CUDA_GEMM_ALGO), c->node);
    p.algo = (uint8_t)want;
  }
  packed_layout pl = packed_of(&p, prec);
  uint8_t *buf = pl.size ? calloc(1, pl.size) : NULL;
  if (pl.size && !buf)
    return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory packing a GEMM");
  int64_t na = (int64_t)p.m * p.k * (p.sa ? p.batch : 1);
  int64_t nb = (int64_t)p.k * p.n * (p.sb ? p.batch : 1);
  if (prec == NR_PREC_FP16 && p.a_const)
    to_half(nr_step_const(c, 0), (uint16_t *)(buf + pl.a_half), na);
  if (prec == NR_PREC_FP16 && p.b_const)
    to_half(nr_step_const(c, 1), (uint16_t *)(buf + pl.b_half), nb);
  if (p.has_bias)
    pack_bias(c, &d, &p, (float *)(buf + pl.bias));
  if (p.has_bias && (p.io & GEMM_Y_HALF))
    to_half((const float *)(buf + pl.bias), (uint16_t *)(buf + pl.bias_half), p.n);
  if (p.add == ADD_CMAT && !(p.io & GEMM_Y_HALF))
    pack_cmat(c, &d, &p, (float *)(buf + pl.cmat));
  if (p.add == ADD_CMAT && (p.io & GEMM_Y_HALF)) {
    float *tmp = malloc(sizeof(float) * (size_t)p.m * (size_t)p.n + 1);
    if (!tmp) {
      free(buf);
      return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory packing a GEMM");
    }
    pack_cmat(c, &d, &p, tmp);
    to_half(tmp, (uint16_t *)(buf + pl.cmat), (int64_t)p.m * p.n);
    free(tmp);
  }
  nr_status st = NR_OK;
  if (pl.size)
    st = nr_plan_add_weights(plan, buf, pl.size, &step->packed_offset, c->err);
  free(buf);
  if (!st && prec == NR_PREC_FP16 && p.a_const) /* half_operands reads the fp16 copies */
    nr_step_absorb(step, 0);
  if (!st && prec == NR_PREC_FP16 && p.b_const)
    nr_step_absorb(step, 1);
  step->packed_size = pl.size;
  step->scratch = scratch_of(&p, prec, work).size;
  memcpy(step->params, &p, sizeof p);
  return st;
}

/* Round to nearest even fp16 (build time, no F16C needed). */
static uint16_t half_of(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff) /* inf, nan */
    return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) { /* subnormal or zero */
    if (e < -10)
      return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
      h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
    h++; /* may carry into the exponent, which is right */
  return (uint16_t)(sign | h);
}

static void to_half(const float *x, uint16_t *y, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    y[i] = half_of(x[i]);
}

static bool gemm_supports(const nr_tactic_ctx *c) {
  cuda_gemm_params p;
  nr_gemm_desc d;
  return geom_of(c, &d, &p);
}

/* ---- cuBLASLt --------------------------------------------------------------------------- */

typedef struct lt_state {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  cublasLtMatmulAlgo_t algo;
  bool post_act; /* activation left for an epilogue pass */
} lt_state;

static void lt_free(void *v) {
  lt_state *s = v;
  if (s->desc)
    cublasLtMatmulDescDestroy(s->desc);
  if (s->la)
    cublasLtMatrixLayoutDestroy(s->la);
  if (s->lb)
    cublasLtMatrixLayoutDestroy(s->lb);
  if (s->lc)
    cublasLtMatrixLayoutDestroy(s->lc);
  if (s->ld)
    cublasLtMatrixLayoutDestroy(s->ld);
  free(s);
}

static cublasLtMatrixLayout_t lt_layout(cudaDataType t, uint64_t rows, uint64_t cols,
                                        int64_t ld, int32_t batch, int64_t stride,
                                        cublasStatus_t *st) {
  cublasLtMatrixLayout_t l = NULL;
  if (*st)
    return NULL;
  *st = cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld);
  if (!*st && batch > 1) {
    *st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                           sizeof batch);
    if (!*st)
      *st = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof stride);
  }
  return l;
}

/* Descriptors of the product; bias (device pointer or NULL) goes into the epilogue. */
static cublasStatus_t lt_describe(const cuda_gemm_params *p, nr_precision prec,
                                  const void *bias, bool has_c, lt_state *s) {
  cublasComputeType_t ct = prec == NR_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                : CUBLAS_COMPUTE_32F;
  cudaDataType in = prec == NR_PREC_FP16 ? CUDA_R_16F : CUDA_R_32F;
  cudaDataType out = p->io & GEMM_Y_HALF ? CUDA_R_16F : CUDA_R_32F;
  cublasStatus_t st = cublasLtMatmulDescCreate(&s->desc, ct, CUDA_R_32F);
  cublasOperation_t opa = p->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = p->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!st)
    st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
  if (!st)
    st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  bool relu = p->act == NR_ACT_RELU && !res_apart(p); /* ReLU after the residual */
  bool gelu = p->gelu_epi != 0;
  if (bias)
    epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS
          : gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  else if (relu || gelu)
    epi = relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_GELU;
  s->post_act = p->act != NR_ACT_NONE && !relu && !gelu;
  if (!st)
    st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                        sizeof epi);
  if (!st && bias)
    st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                        sizeof bias);
  int64_t n = p->n, m = p->m, k = p->k;
  s->la = lt_layout(in, p->tb ? k : n, p->tb ? n : k, p->tb ? k : n, p->batch, p->sb, &st);
  s->lb = lt_layout(in, p->ta ? m : k, p->ta ? k : m, p->ta ? m : k, p->batch, p->sa, &st);
  s->lc = lt_layout(out, n, m, n, p->batch, p->sd, &st);
  s->ld = lt_layout(out, n, m, n, p->batch, p->sd, &st);
  (void)has_c;
  return st;
}

/* The largest power of two (at most 256) dividing the address. */
static uint32_t align_of(const void *p) {
  uint32_t a = 256;
  while (a > 1 && ((uintptr_t)p & (a - 1)))
    a >>= 1;
  return a;
}

/* Asks the heuristic for up to 8 algorithms that work with operands aligned as
 * al[0..3] (A, B, C, D in cuBLAS's naming); *n how many it returned. */
static cublasStatus_t lt_heuristic(cublasLtHandle_t h, const lt_state *s, uint64_t work,
                                   const uint32_t *al, cublasLtMatmulHeuristicResult_t *res,
                                   int *n) {
  static const cublasLtMatmulPreferenceAttributes_t attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasLtMatmulPreference_t pref = NULL;
  cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
  size_t ws = (size_t)work;
  if (!st)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws, sizeof ws);
  for (int i = 0; i < 4 && !st; i++)
    st = cublasLtMatmulPreferenceSetAttribute(pref, attr[i], &al[i], sizeof al[i]);
  *n = 0;
  if (!st)
    st = cublasLtMatmulAlgoGetHeuristic(h, s->desc, s->la, s->lb, s->lc, s->ld, pref, 8, res, n);
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  return st;
}

/* Build time: how many algorithms the heuristic offers for this product (the bias
 * pointer is a placeholder: only its presence shapes the epilogue). */
static nr_status lt_count(const nr_tactic_ctx *c, const cuda_gemm_params *p,
                          uint64_t work, int *n_algos) {
  nr_error herr = {0};
  cublasLtHandle_t h = nr_cuda_build_lt(&herr);
  if (!h)
    return nr_errorf(c->err, herr.status ? herr.status : NR_ERR_UNSUPPORTED, "%s",
                     herr.message);
  lt_state s = {0};
  cublasLtMatmulHeuristicResult_t res[8];
  static const float dummy[64];
  cublasStatus_t st = lt_describe(p, c->step->tactic->precision,
                                  p->has_bias ? (const void *)dummy : NULL,
                                  p->add != ADD_NONE, &s);
  static const uint32_t al[4] = {16, 16, 16, 16};
  if (!st)
    st = lt_heuristic(h, &s, work, al, res, n_algos);
  lt_state *heap = malloc(sizeof *heap);
  if (heap) {
    *heap = s;
    lt_free(heap);
  }
  if (!st && *n_algos < 1)
    st = CUBLAS_STATUS_NOT_SUPPORTED;
  return nr_cublas_check(st, c->err, "cuBLASLt heuristic for this product");
}

static const void *packed_at(const nr_exec_args *a, uint64_t off) {
  return (const uint8_t *)a->packed + off;
}

/* The operands cuBLAS reads: for fp16, constants from the packed data and activations
 * converted into scratch (the conversion only with convert). */
static nr_status half_operands(const nr_exec_args *a, const cuda_gemm_params *p,
                               const void **pa, const void **pb, bool convert) {
  nr_precision prec = a->step->tactic->precision;
  *pa = a->in[0], *pb = a->in[1];
  if (prec != NR_PREC_FP16)
    return NR_OK;
  packed_layout pl = packed_of(p, prec);
  scratch_layout sl = scratch_of(p, prec, 0);
  int64_t na = (int64_t)p->m * p->k * (p->sa ? p->batch : 1);
  int64_t nb = (int64_t)p->k * p->n * (p->sb ? p->batch : 1);
  cudaError_t e = cudaSuccess;
  if (p->a_const) {
    *pa = packed_at(a, pl.a_half);
  } else if (p->io & GEMM_A_HALF) {
    *pa = a->in[0];
  } else {
    *pa = (uint8_t *)a->scratch + sl.a_half;
    if (convert)
      e = nr_cuda_f32_to_f16(a->in[0], (void *)*pa, na, nr_cuda_stream(a));
  }
  if (p->b_const) {
    *pb = packed_at(a, pl.b_half);
  } else if (p->io & GEMM_B_HALF) {
    *pb = a->in[1];
  } else if (e == cudaSuccess) {
    *pb = (uint8_t *)a->scratch + sl.b_half;
    if (convert)
      e = nr_cuda_f32_to_f16(a->in[1], (void *)*pb, nb, nr_cuda_stream(a));
  }
  return nr_cuda_check(e, a->err, "converting GEMM operands to fp16");
}

/* What cuBLASLt left undone, in place on the output: the residual when it is not
 * cuBLAS's C, and an activation its epilogue does not have. */
static nr_status post_act(const nr_exec_args *a, const cuda_gemm_params *p) {
  int yh = (p->io & GEMM_Y_HALF) != 0;
  nr_cuda_epi e = {(int64_t)p->m * p->batch, p->n, 1, yh, (nr_act)p->act, p->act_a, p->act_b,
                   yh, (p->io & GEMM_R_HALF) != 0};
  return nr_cuda_epilogue(&e, a->out[0], NULL, res_apart(p) ? a->in[p->res_in] : NULL,
                          a->out[0], nr_cuda_stream(a), a->err);
}

/* cuBLAS's C: the residual, the packed constant matrix, or D itself (beta 0). */
static const void *lt_c(const nr_exec_args *a, const cuda_gemm_params *p,
                        const packed_layout *pl) {
  if (p->add == ADD_RES && !res_apart(p))
    return a->in[p->res_in];
  return p->add == ADD_CMAT ? packed_at(a, pl->cmat) : a->out[0];
}

static const void *lt_bias(const nr_exec_args *a, const cuda_gemm_params *p,
                           const packed_layout *pl) {
  if (!p->has_bias)
    return NULL;
  return packed_at(a, p->io & GEMM_Y_HALF ? pl->bias_half : pl->bias);
}

static nr_status lt_run(const nr_exec_args *a) {
  cuda_gemm_params p;
  memcpy(&p, a->step->params, sizeof p);
  nr_precision prec = a->step->tactic->precision;
  nr_cuda_step_state *ss = nr_cuda_step(a);
  packed_layout pl = packed_of(&p, prec);
  scratch_layout sl = scratch_of(&p, prec, 0);
  uint64_t work = a->step->scratch - sl.size;
  if (!ss->p) {
    lt_state *s = calloc(1, sizeof *s);
    if (!s)
      return nr_errorf(a->err, NR_ERR_NOMEM, "out of memory");
    ss->p = s, ss->free_fn = lt_free;
    cublasLtMatmulHeuristicResult_t res[8];
    int n = 0;
    cublasStatus_t st = lt_describe(&p, prec, lt_bias(a, &p, &pl), p.add != ADD_NONE, s);
    const void *pa, *pb;
    nr_status r = half_operands(a, &p, &pa, &pb, false);
    if (r)
      return r;
    uint32_t al[4] = {align_of(pb), align_of(pa), align_of(lt_c(a, &p, &pl)),
                      align_of(a->out[0])};
    if (!st)
      st = lt_heuristic(nr_cuda_of(a)->lt, s, work, al, res, &n);
    if (!st && n < 1)
      st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (st)
      return nr_cublas_check(st, a->err, "cuBLASLt setup");
    s->algo = res[p.algo < n ? p.algo : n - 1].algo; /* fewer on odd alignments */
  }
  lt_state *s = ss->p;
  const void *pa, *pb;
  nr_status r = half_operands(a, &p, &pa, &pb, true);
  if (r)
    return r;
  const void *cm = lt_c(a, &p, &pl);
  float beta = p.add == ADD_NONE || res_apart(&p) ? 0.0f : 1.0f;
  cublasStatus_t st = cublasLtMatmul(nr_cuda_of(a)->lt, s->desc, &p.alpha, pb, s->la, pa,
                                     s->lb, &beta, cm, s->lc, a->out[0], s->ld, &s->algo,
                                     (uint8_t *)a->scratch + sl.work, work, nr_cuda_stream(a));
  r = nr_cublas_check(st, a->err, "cublasLtMatmul");
  if (!r && (s->post_act || res_apart(&p)))
    r = post_act(a, &p);
  return r;
}

/* ---- cuBLAS ------------------------------------------------------------------------------ */

static nr_status blas_run(const nr_exec_args *a) {
  cuda_gemm_params p;
  memcpy(&p, a->step->params, sizeof p);
  nr_precision prec = a->step->tactic->precision;
  const void *pa, *pb;
  nr_status r = half_operands(a, &p, &pa, &pb, true);
  if (r)
    return r;
  cublasComputeType_t ct = prec == NR_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                : CUBLAS_COMPUTE_32F;
  cudaDataType in = prec == NR_PREC_FP16 ? CUDA_R_16F : CUDA_R_32F;
  int yh = (p.io & GEMM_Y_HALF) != 0;
  float beta = 0.0f;
  int n = p.n, m = p.m, k = p.k;
  cublasStatus_t st = cublasGemmStridedBatchedEx(
      nr_cuda_of(a)->blas, p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, p.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
      n, m, k, &p.alpha, pb, in, p.tb ? k : n, p.sb, pa, in, p.ta ? m : k, p.sa, &beta,
      a->out[0], yh ? CUDA_R_16F : CUDA_R_32F, n, p.sd, p.batch, ct, CUBLAS_GEMM_DEFAULT);
  r = nr_cublas_check(st, a->err, "cublasGemmStridedBatchedEx");
  if (r || (!p.has_bias && p.add == ADD_NONE && p.act == NR_ACT_NONE))
    return r;
  packed_layout pl = packed_of(&p, prec);
  int rh = p.add == ADD_RES ? (p.io & GEMM_R_HALF) != 0 : yh; /* CMAT: packed as Y */
  nr_cuda_epi e = {(int64_t)p.m * p.batch, p.n, 1, yh, (nr_act)p.act, p.act_a, p.act_b, yh, rh};
  const void *res = p.add == ADD_RES    ? a->in[p.res_in]
                    : p.add == ADD_CMAT ? packed_at(a, pl.cmat)
                                        : NULL;
  return nr_cuda_epilogue(&e, a->out[0], p.has_bias ? packed_at(a, pl.bias) : NULL, res,
                          a->out[0], nr_cuda_stream(a), a->err);
}

/* ---- the rows ---------------------------------------------------------------------------- */

#define GEMM_ROW(id, dom, op, lib, run, prec, prio)                                   \
  {id, dom, op, lib, lib, NR_LAYOUT_PLAIN, 0, prio, gemm_supports, gemm_prepare, run,     \
   prec, NR_DEVICE_CUDA},
#define GEMM_ROWS(id, lib, run, prec, prio)                                            \
  GEMM_ROW(id, "", "Gemm", lib, run, prec, prio)                                        \
  GEMM_ROW(id, "", "MatMul", lib, run, prec, prio)                                      \
  GEMM_ROW(id, "nnroute", "FusedGemm", lib, run, prec, prio)                            \
  GEMM_ROW(id, "nnroute", "FusedMatMul", lib, run, prec, prio)

const nr_tactic nr_tactics_cuda_gemm[] = {
    GEMM_ROWS("cublaslt_f32_gemm", "cublaslt", lt_run, NR_PREC_FP32, 21)
    GEMM_ROWS("cublaslt_tf32_gemm", "cublaslt", lt_run, NR_PREC_TF32, 21)
    GEMM_ROWS("cublaslt_f16_gemm", "cublaslt", lt_run, NR_PREC_FP16, 21)
    GEMM_ROWS("cublas_f32_gemm", "cublas", blas_run, NR_PREC_FP32, 20)
    GEMM_ROWS("cublas_tf32_gemm", "cublas", blas_run, NR_PREC_TF32, 20)
    GEMM_ROWS("cublas_f16_gemm", "cublas", blas_run, NR_PREC_FP16, 20)
    {0},
};
