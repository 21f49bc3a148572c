/* cuda_conv.c - Conv and FusedConv (2-D, grouped and depthwise included) through
 * cuDNN 9's convolution API, in NCHW or NHWC, fp32 / tf32 / fp16, with the bias, the
 * residual and the activation fused by cuDNN (ReLU or identity:
 * cudnnConvolutionBiasActivationForward) or applied by one epilogue pass.
 *
 * Key decision: the algorithm is chosen at build time and stored in the step's
 * params, so a context only builds descriptors: cuda.conv.algo@node names one
 * (checked against cuDNN for this shape and the workspace limit, cuda.workspace;
 * when cuDNN refuses it the build uses the heuristic's choice and counts the knob as
 * ignored), `auto` takes cuDNN's heuristic (cudnnGetConvolutionForwardAlgorithm_v7),
 * and compile.tactic_selection=profile times them (cudnnFindConvolutionForwardAlgorithm,
 * which runs each alone, as the tuner's profile mode does for tactics). The math type
 * is the precision: fp32 forbids tensor cores (FMA math), tf32 allows them on fp32
 * data, fp16 converts X and the weights to half, accumulates in fp32 and converts
 * the result back in the epilogue. Weights for NHWC are packed [M, kh, kw, C/g].
 *
 * fp16 tactics read an fp16 X in place and write an fp16 Y directly where the fp16
 * pass (cuda_half.c) made those slots fp16; cuDNN then fuses bias + ReLU (+ an fp16
 * residual) in half precision too (its half-config bias is fp16, packed after the
 * weights), and a call cuDNN refuses falls back to convolution + epilogue. */
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/cuda_knobs.h"
#include "plan/compile_knobs.h"

#include <stdlib.h>
#include <string.h>

typedef struct conv_params {
  int32_t n, c, h, w, m, oh, ow, group;
  int16_t kh, kw, sh, sw, ph, pw, dh, dw;
  float act_a, act_b;
  uint8_t algo, act, has_bias, has_res, fused, packed_w;
  uint8_t io;        /* CONV_*_HALF: which activations are fp16 */
  uint8_t half_bias; /* an fp16 copy of the bias follows the packed weights */
} conv_params;

enum { CONV_X_HALF = 1, CONV_Y_HALF = 2, CONV_R_HALF = 4 };

_Static_assert(sizeof(conv_params) <= NR_TACTIC_PARAMS, "conv params too big");

static const char *const algo_names[] = {
    "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
    "fft",           "fft_tiling",            "winograd", "winograd_nonfused"};

static bool fits16(int64_t v) { return v >= 0 && v <= INT16_MAX; }

static bool fl(const nr_slot *s, bool half) {
  return s && (s->dtype == NR_DTYPE_FLOAT || (half && s->dtype == NR_DTYPE_FLOAT16));
}

static bool is_half(const nr_slot *s) { return s && s->dtype == NR_DTYPE_FLOAT16; }

/* ---- geometry ------------------------------------------------------------------------ */

/* cuDNN's 2-D descriptors: symmetric pads, every size within int16. */
static bool window_fits(const nr_window *w) {
  for (int d = 0; d < 2; d++)
    if (w->pad_b[d] != w->pad_e[d] || !fits16(w->pad_b[d]) || !fits16(w->stride[d]) ||
        !fits16(w->dil[d]) || !fits16(w->kernel[d]))
      return false;
  return true;
}

static bool geom_of(const nr_tactic_ctx *c, conv_params *p) {
  const nr_node *n = c->node;
  const nr_slot *x = nr_step_in(c, 0), *w = nr_step_in(c, 1), *y = nr_step_out(c, 0);
  const nr_slot *b = nr_step_in(c, 2), *r = nr_step_in(c, 3);
  /* fp16 activations only once the step has its fp16 tactic (prepare, run) */
  bool h = c->step->tactic && c->step->tactic->precision == NR_PREC_FP16;
  memset(p, 0, sizeof *p);
  if (!n || !x || !w || !y || x->rank != 4 || w->rank != 4 || y->rank != 4 ||
      !fl(x, h) || w->dtype != NR_DTYPE_FLOAT || !fl(y, h) || !nr_step_const(c, 1))
    return false;
  if ((b && (b->dtype != NR_DTYPE_FLOAT || !nr_step_const(c, 2))) || (r && !fl(r, h)))
    return false;
  nr_node_io io;
  nr_node_io_from_ctx(c, &io);
  nr_conv_desc d;
  if (nr_conv_desc_parse(n, &io, &d, NULL) || !window_fits(&d.win))
    return false;
  const nr_window *win = &d.win;
  *p = (conv_params){
      .n = (int32_t)d.batch, .c = (int32_t)d.in_c, .h = (int32_t)win->in[0],
      .w = (int32_t)win->in[1], .m = (int32_t)d.out_c, .oh = (int32_t)win->out[0],
      .ow = (int32_t)win->out[1], .group = (int32_t)d.group,
      .kh = (int16_t)win->kernel[0], .kw = (int16_t)win->kernel[1],
      .sh = (int16_t)win->stride[0], .sw = (int16_t)win->stride[1],
      .ph = (int16_t)win->pad_b[0], .pw = (int16_t)win->pad_b[1],
      .dh = (int16_t)win->dil[0], .dw = (int16_t)win->dil[1],
      .act_a = d.act_a, .act_b = d.act_b, .act = (uint8_t)d.act,
      .has_bias = d.bias, .has_res = d.residual};
  p->io = (uint8_t)((is_half(x) ? CONV_X_HALF : 0) | (is_half(y) ? CONV_Y_HALF : 0) |
                    (is_half(r) ? CONV_R_HALF : 0));
  return true;
}

static bool conv_supports(const nr_tactic_ctx *c) {
  conv_params p;
  return geom_of(c, &p);
}

/* ---- descriptors ---------------------------------------------------------------------- */

typedef struct conv_desc {
  cudnnTensorDescriptor_t x, y, bias;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnActivationDescriptor_t act;
  bool unfused; /* the fused call was refused once: conv + epilogue from then on */
} conv_desc;

static void desc_free(void *v) {
  conv_desc *d = v;
  if (d->x)
    cudnnDestroyTensorDescriptor(d->x);
  if (d->y)
    cudnnDestroyTensorDescriptor(d->y);
  if (d->bias)
    cudnnDestroyTensorDescriptor(d->bias);
  if (d->w)
    cudnnDestroyFilterDescriptor(d->w);
  if (d->conv)
    cudnnDestroyConvolutionDescriptor(d->conv);
  if (d->act)
    cudnnDestroyActivationDescriptor(d->act);
  free(d);
}

static cudnnStatus_t describe(const conv_params *p, nr_precision prec, nr_layout l,
                              conv_desc *d) {
  cudnnDataType_t t = prec == NR_PREC_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t f = l == NR_LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  cudnnMathType_t math = prec == NR_PREC_FP32   ? CUDNN_FMA_MATH
                         : prec == NR_PREC_TF32 ? CUDNN_DEFAULT_MATH
                                                : CUDNN_TENSOR_OP_MATH;
  cudnnStatus_t s = cudnnCreateTensorDescriptor(&d->x);
  if (!s)
    s = cudnnCreateTensorDescriptor(&d->y);
  if (!s)
    s = cudnnCreateTensorDescriptor(&d->bias);
  if (!s)
    s = cudnnCreateFilterDescriptor(&d->w);
  if (!s)
    s = cudnnCreateConvolutionDescriptor(&d->conv);
  if (!s)
    s = cudnnCreateActivationDescriptor(&d->act);
  if (!s)
    s = cudnnSetTensor4dDescriptor(d->x, f, t, p->n, p->c, p->h, p->w);
  if (!s)
    s = cudnnSetTensor4dDescriptor(d->y, f, t, p->n, p->m, p->oh, p->ow);
  if (!s) /* cuDNN's half configurations take an fp16 bias */
    s = cudnnSetTensor4dDescriptor(d->bias, CUDNN_TENSOR_NCHW, t, 1, p->m, 1, 1);
  if (!s)
    s = cudnnSetFilter4dDescriptor(d->w, t, f, p->m, p->c / p->group, p->kh, p->kw);
  if (!s)
    s = cudnnSetConvolution2dDescriptor(d->conv, p->ph, p->pw, p->sh, p->sw, p->dh, p->dw,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  if (!s)
    s = cudnnSetConvolutionGroupCount(d->conv, p->group);
  if (!s)
    s = cudnnSetConvolutionMathType(d->conv, math);
  if (!s)
    s = cudnnSetActivationDescriptor(d->act, p->act == NR_ACT_RELU ? CUDNN_ACTIVATION_RELU
                                                                  : CUDNN_ACTIVATION_IDENTITY,
                                     CUDNN_NOT_PROPAGATE_NAN, 0.0);
  return s;
}

/* ---- build time: the algorithm ------------------------------------------------------------ */

/* Read without effect (route.h, knob use): choose_algo marks it once cuDNN runs it. */
static int knob_algo(const nr_tactic_ctx *c) {
  const char *v = nr_route_peek_def(c->route, nr_knob_def_of(NR_KNOB_CUDA_CONV_ALGO),
                                    c->node);
  for (int i = 0; v && i < (int)(sizeof algo_names / sizeof algo_names[0]); i++)
    if (!strcmp(v, algo_names[i]))
      return i;
  return -1;
}

/* Workspace of algo, or SIZE_MAX when cuDNN cannot run it here. */
static size_t algo_workspace(cudnnHandle_t h, const conv_desc *d, int algo) {
  size_t ws = 0;
  cudnnStatus_t s = cudnnGetConvolutionForwardWorkspaceSize(
      h, d->x, d->w, d->conv, d->y, (cudnnConvolutionFwdAlgo_t)algo, &ws);
  return s ? SIZE_MAX : ws;
}

/* The first usable algorithm of a heuristic or a timed search, within limit. */
static int pick_algo(cudnnHandle_t h, const conv_desc *d, uint64_t limit, bool profile,
                     bool need_precomp) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0;
  cudnnStatus_t s = profile ? cudnnFindConvolutionForwardAlgorithm(
                                  h, d->x, d->w, d->conv, d->y,
                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf)
                            : cudnnGetConvolutionForwardAlgorithm_v7(
                                  h, d->x, d->w, d->conv, d->y,
                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf);
  for (int i = 0; !s && i < n; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit &&
        (!need_precomp || perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM))
      return (int)perf[i].algo;
  return -1;
}

/* Chooses params->algo and whether cuDNN fuses the epilogue; *ws its workspace. */
static nr_status choose_algo(const nr_tactic_ctx *c, nr_plan *plan, conv_params *p,
                             nr_precision prec, nr_layout l, uint64_t *ws) {
  nr_error herr = {0};
  cudnnHandle_t h = nr_cuda_build_cudnn(&herr);
  if (!h)
    return nr_errorf(c->err, herr.status ? herr.status : NR_ERR_UNSUPPORTED, "%s",
                     herr.message);
  conv_desc *d = calloc(1, sizeof *d);
  if (!d)
    return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory");
  nr_status st = nr_cudnn_check(describe(p, prec, l, d), c->err, "cuDNN descriptors");
  uint64_t limit = nr_cuda_workspace_limit(c);
  bool profile = nr_route_is(c->route, NR_KNOB_COMPILE_TACTIC_SELECTION, NULL, "profile");
  int want = knob_algo(c), algo = want;
  if (!st && (algo < 0 || algo_workspace(h, d, algo) > limit))
    algo = pick_algo(h, d, limit, profile, false); /* a refused one is ignored */
  else if (!st && (profile || pick_algo(h, d, limit, false, false) != algo))
    /* the heuristic's own pick asked for by name builds auto's plan: ignored */
    nr_route_mark_effective(c->route, nr_knob_def_of(NR_KNOB_CUDA_CONV_ALGO), c->node);
  if (!st && algo < 0)
    st = nr_errorf(c->err, NR_ERR_UNSUPPORTED, "cuDNN offers no convolution algorithm "
                   "within the %llu-byte workspace limit", (unsigned long long)limit);
  if (!st) {
    p->algo = (uint8_t)algo;
    *ws = algo_workspace(h, d, algo);
    /* cuDNN fuses bias + (ReLU | identity) + residual, all in Y's type (fp16: only
     * when Y and the residual are fp16 slots); identity needs the precomputed
     * implicit GEMM */
    bool types = prec != NR_PREC_FP16 ||
                 ((p->io & CONV_Y_HALF) && (!p->has_res || (p->io & CONV_R_HALF)));
    p->fused = types && p->has_bias &&
               (p->act == NR_ACT_RELU ||
                (p->act == NR_ACT_NONE && algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM));
    p->half_bias = p->fused && prec == NR_PREC_FP16;
  }
  desc_free(d);
  return st;
}

/* ---- build time: packing ---------------------------------------------------------------- */

static uint64_t align256(uint64_t v) { return (v + 255) & ~(uint64_t)255; }

static uint16_t half_bits(float f);

/* Bytes of the packed weights; an fp16 bias (half_bias) follows at this offset. */
static uint64_t weights_bytes(const conv_params *p, nr_precision prec) {
  int64_t total = (int64_t)p->m * (p->c / p->group) * p->kh * p->kw;
  return align256((uint64_t)total * (prec == NR_PREC_FP16 ? 2 : 4));
}

/* The weights as the tactic reads them: NHWC order and/or fp16 (NULL: the constant
 * slot is used as it is), then the fp16 bias when cuDNN fuses in half precision. */
static nr_status pack_weights(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step,
                              const conv_params *p, nr_precision prec, nr_layout l) {
  bool half = prec == NR_PREC_FP16, nhwc = l == NR_LAYOUT_NHWC;
  if (!half && !nhwc)
    return NR_OK;
  const float *w = nr_step_const(c, 1);
  int64_t cg = p->c / p->group, kk = (int64_t)p->kh * p->kw, total = (int64_t)p->m * cg * kk;
  size_t es = half ? 2 : 4;
  uint64_t size = p->half_bias ? weights_bytes(p, prec) + (uint64_t)p->m * 2 : total * es;
  uint8_t *buf = calloc(1, (size_t)size + 1);
  if (!buf)
    return nr_errorf(c->err, NR_ERR_NOMEM, "out of memory packing weights");
  for (int64_t o = 0; o < p->m; o++)
    for (int64_t i = 0; i < cg; i++)
      for (int64_t k = 0; k < kk; k++) {
        float v = w[(o * cg + i) * kk + k];
        int64_t at = nhwc ? (o * kk + k) * cg + i : (o * cg + i) * kk + k;
        if (half) {
          uint16_t h = half_bits(v);
          memcpy(buf + at * 2, &h, 2);
        } else {
          memcpy(buf + at * 4, &v, 4);
        }
      }
  const float *bias = p->half_bias ? nr_step_const(c, 2) : NULL;
  for (int64_t o = 0; bias && o < p->m; o++) {
    uint16_t h = half_bits(bias[o]);
    memcpy(buf + weights_bytes(p, prec) + o * 2, &h, 2);
  }
  nr_status st = nr_plan_add_weights(plan, buf, size, &step->packed_offset, c->err);
  step->packed_size = size;
  free(buf);
  if (!st) /* conv_run takes W from the packed data whenever there is one */
    nr_step_absorb(step, 1);
  return st;
}

/* fp16 needs X and Y in half precision: in scratch ahead of the workspace, unless
 * their slots are fp16 already. */
static uint64_t x_half_bytes(const conv_params *p, nr_precision prec) {
  if (prec != NR_PREC_FP16 || (p->io & CONV_X_HALF))
    return 0;
  return align256((uint64_t)p->n * p->c * p->h * p->w * 2);
}

static uint64_t half_io_bytes(const conv_params *p, nr_precision prec) {
  if (prec != NR_PREC_FP16)
    return 0;
  uint64_t y = p->io & CONV_Y_HALF ? 0 : align256((uint64_t)p->n * p->m * p->oh * p->ow * 2);
  return x_half_bytes(p, prec) + y;
}

static nr_status conv_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  conv_params p;
  if (!geom_of(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "node no longer supported");
  nr_precision prec = step->tactic->precision;
  nr_layout l = step->tactic->layout;
  uint64_t ws = 0;
  nr_status st = choose_algo(c, plan, &p, prec, l, &ws);
  if (!st)
    st = pack_weights(c, plan, step, &p, prec, l);
  p.packed_w = step->packed_size > 0;
  step->scratch = half_io_bytes(&p, prec) + align256(ws);
  memcpy(step->params, &p, sizeof p);
  return st;
}

static uint16_t half_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu, ex = (x >> 23) & 0xff;
  int32_t e = (int32_t)ex - 127 + 15;
  if (ex == 0xff)
    return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10)
      return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e), h = mant >> shift, rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    h += rem > half || (rem == half && (h & 1));
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  h += rem > 0x1000u || (rem == 0x1000u && (h & 1));
  return (uint16_t)(sign | h);
}

/* ---- run ------------------------------------------------------------------------------- */

static nr_status epilogue(const nr_exec_args *a, const conv_params *p, nr_layout l,
                          const void *x, bool x_half) {
  bool nhwc = l == NR_LAYOUT_NHWC;
  int64_t plane = (int64_t)p->oh * p->ow;
  nr_cuda_epi e = {nhwc ? p->n * plane : p->n, p->m, nhwc ? 1 : plane, x_half,
                   (nr_act)p->act, p->act_a, p->act_b, (p->io & CONV_Y_HALF) != 0,
                   (p->io & CONV_R_HALF) != 0};
  return nr_cuda_epilogue(&e, x, p->has_bias ? a->in[2] : NULL, p->has_res ? a->in[3] : NULL,
                          a->out[0], nr_cuda_stream(a), a->err);
}

/* The fused call in Y's type; false when cuDNN refuses it (for good, in this
 * context), with *st set for any other failure. */
static bool fused_run(const nr_exec_args *a, const conv_params *p, conv_desc *d,
                      const void *x, const void *w, const void *bias, void *ws,
                      size_t ws_size, nr_status *st) {
  float one = 1.0f, alpha2 = p->has_res ? 1.0f : 0.0f;
  const void *z = p->has_res ? a->in[3] : a->out[0];
  *st = NR_OK;
  if (!p->fused || d->unfused)
    return false;
  cudnnStatus_t s = cudnnConvolutionBiasActivationForward(
      nr_cuda_of(a)->dnn, &one, d->x, x, d->w, w, d->conv, (cudnnConvolutionFwdAlgo_t)p->algo,
      ws, ws_size, &alpha2, d->y, z, d->bias, bias, d->act, d->y, a->out[0]);
  if (s == CUDNN_STATUS_SUCCESS)
    return true;
  if (s != CUDNN_STATUS_NOT_SUPPORTED && s != CUDNN_STATUS_BAD_PARAM) {
    *st = nr_cudnn_check(s, a->err, "cudnnConvolutionBiasActivationForward");
    return true;
  }
  d->unfused = true; /* refused for this shape: the two-pass path from now on */
  return false;
}

/* fp16: X converted into scratch unless it is an fp16 slot; Y written in place when it
 * is one (the epilogue then runs in place), else into scratch and converted by the
 * epilogue. */
static nr_status half_run(const nr_exec_args *a, const conv_params *p, conv_desc *d,
                          const void *w, void *ws, size_t ws_size) {
  nr_layout l = a->step->tactic->layout;
  const void *x = a->in[0];
  nr_status st = NR_OK;
  if (!(p->io & CONV_X_HALF)) {
    x = a->scratch;
    st = nr_cuda_check(nr_cuda_f32_to_f16(a->in[0], a->scratch,
                                          (int64_t)p->n * p->c * p->h * p->w, nr_cuda_stream(a)),
                       a->err, "converting X to fp16");
  }
  if (st)
    return st;
  const void *hb = (const uint8_t *)a->packed + weights_bytes(p, NR_PREC_FP16);
  if (fused_run(a, p, d, x, w, hb, ws, ws_size, &st))
    return st;
  void *y = p->io & CONV_Y_HALF ? a->out[0] : (uint8_t *)a->scratch + x_half_bytes(p, NR_PREC_FP16);
  float one = 1.0f, zero = 0.0f;
  st = nr_cudnn_check(cudnnConvolutionForward(nr_cuda_of(a)->dnn, &one, d->x, x, d->w, w,
                                              d->conv, (cudnnConvolutionFwdAlgo_t)p->algo, ws,
                                              ws_size, &zero, d->y, y),
                      a->err, "cudnnConvolutionForward");
  if (st || (y == a->out[0] && !p->has_bias && !p->has_res && p->act == NR_ACT_NONE))
    return st;
  return epilogue(a, p, l, y, true);
}

static nr_status conv_run(const nr_exec_args *a) {
  conv_params p;
  memcpy(&p, a->step->params, sizeof p);
  nr_precision prec = a->step->tactic->precision;
  nr_layout l = a->step->tactic->layout;
  nr_cuda_step_state *ss = nr_cuda_step(a);
  if (!ss->p) {
    conv_desc *d = calloc(1, sizeof *d);
    if (!d)
      return nr_errorf(a->err, NR_ERR_NOMEM, "out of memory");
    ss->p = d, ss->free_fn = desc_free;
    nr_status st = nr_cudnn_check(describe(&p, prec, l, d), a->err, "cuDNN descriptors");
    if (st)
      return st;
  }
  conv_desc *d = ss->p;
  cudnnHandle_t h = nr_cuda_of(a)->dnn;
  const void *w = p.packed_w ? a->packed : a->in[1];
  uint64_t io = half_io_bytes(&p, prec);
  void *ws = (uint8_t *)a->scratch + io;
  size_t ws_size = (size_t)(a->step->scratch - io);
  float one = 1.0f, zero = 0.0f;
  cudnnConvolutionFwdAlgo_t algo = (cudnnConvolutionFwdAlgo_t)p.algo;
  if (prec == NR_PREC_FP16)
    return half_run(a, &p, d, w, ws, ws_size);
  nr_status fst;
  if (fused_run(a, &p, d, a->in[0], w, p.has_bias ? a->in[2] : NULL, ws, ws_size, &fst))
    return fst;
  nr_status st = nr_cudnn_check(cudnnConvolutionForward(h, &one, d->x, a->in[0], d->w, w,
                                                        d->conv, algo, ws, ws_size, &zero,
                                                        d->y, a->out[0]),
                                a->err, "cudnnConvolutionForward");
  if (st || (!p.has_bias && !p.has_res && p.act == NR_ACT_NONE))
    return st;
  return epilogue(a, &p, l, a->out[0], false);
}

#define CONV_ROW(id, dom, op, layout, prec, prio)                                       \
  {id, dom, op, "cudnn", "cudnn", layout, 0, prio, conv_supports, conv_prepare, conv_run,  \
   prec, NR_DEVICE_CUDA},
#define CONV_ROWS(id, layout, prec, prio)                                               \
  CONV_ROW(id, "", "Conv", layout, prec, prio)                                          \
  CONV_ROW(id, "nnroute", "FusedConv", layout, prec, prio)

#define DW_ROW(id, dom, op, layout, sup, prec, prio)                                    \
  {id, dom, op, "nnroute", "depthwise", layout, 0, prio, sup, nr_cuda_dw_prepare,            \
   nr_cuda_dw_run, prec, NR_DEVICE_CUDA},
#define DW_ROWS(id, layout, sup, prec, prio)                                             \
  DW_ROW(id, "", "Conv", layout, sup, prec, prio)                                        \
  DW_ROW(id, "nnroute", "FusedConv", layout, sup, prec, prio)

const nr_tactic nr_tactics_cuda_conv[] = {
    /* depthwise (cuda_dwconv.c): in each layout at or above cuDNN's row, and below
     * the other layout's preferred row, so each precision keeps cuDNN's preferred
     * layout (fp32 NCHW, fp16 NHWC) and ties go to this kernel (listed first) */
    DW_ROWS("nr_cuda_f32_dwconv", NR_LAYOUT_PLAIN, nr_cuda_dw_supports, NR_PREC_FP32, 21)
    DW_ROWS("nr_cuda_f32_dwconv_nhwc", NR_LAYOUT_NHWC, nr_cuda_dw_supports, NR_PREC_FP32, 19)
    DW_ROWS("nr_cuda_f16_dwconv", NR_LAYOUT_PLAIN, nr_cuda_dw_supports_f16, NR_PREC_FP16, 19)
    DW_ROWS("nr_cuda_f16_dwconv_nhwc", NR_LAYOUT_NHWC, nr_cuda_dw_supports_f16, NR_PREC_FP16, 21)
    /* tf32 permits tensor cores, it does not require them: the fp32 kernel meets it */
    DW_ROWS("nr_cuda_tf32_dwconv", NR_LAYOUT_PLAIN, nr_cuda_dw_supports, NR_PREC_TF32, 19)
    DW_ROWS("nr_cuda_tf32_dwconv_nhwc", NR_LAYOUT_NHWC, nr_cuda_dw_supports, NR_PREC_TF32, 21)
    CONV_ROWS("cudnn_f32_conv", NR_LAYOUT_PLAIN, NR_PREC_FP32, 20)
    CONV_ROWS("cudnn_f32_conv_nhwc", NR_LAYOUT_NHWC, NR_PREC_FP32, 19)
    /* tf32 and fp16 prefer NHWC: cuDNN's tensor-core kernels want channels last
     * (H200, resnet50 tf32: 0.517 ms NHWC against 0.799 NCHW at batch 1, 3.41 against
     * 5.10 at batch 32; NCHW fp16 ran batch 32 slower than fp32) */
    CONV_ROWS("cudnn_tf32_conv", NR_LAYOUT_PLAIN, NR_PREC_TF32, 19)
    CONV_ROWS("cudnn_tf32_conv_nhwc", NR_LAYOUT_NHWC, NR_PREC_TF32, 20)
    CONV_ROWS("cudnn_f16_conv", NR_LAYOUT_PLAIN, NR_PREC_FP16, 19)
    CONV_ROWS("cudnn_f16_conv_nhwc", NR_LAYOUT_NHWC, NR_PREC_FP16, 20)
    {0},
};
