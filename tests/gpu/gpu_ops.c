/* gpu_ops.c - every CUDA tactic against the reference executor, on shapes around
 * their tiles and edge cases (gpu_harness.h runs each graph through the compiler for
 * NR_DEVICE_CUDA, three times: direct, captured into a CUDA graph, replayed).
 *
 * Run on a GPU machine by tests/gpu/run.sh (`nr_gpu_test [FILTER]`); never by ctest.
 * Each test names the tactic it must see, so a route that silently fell back to
 * another tactic fails. */
#include "gpu_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F NR_DTYPE_FLOAT
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* ---- convolution ------------------------------------------------------------------ */

typedef struct conv_case {
  int64_t n, c, h, w, m, k, stride, pad, group, dil;
  const char *tail; /* "", "relu", "clip", "hardswish", "add_relu", "sigmoid" */
} conv_case;

/* Conv (+ bias) followed by the tail ops the fusion passes fold into FusedConv. */
static gt_graph conv_graph(const conv_case *cc, unsigned seed) {
  gt_graph b = gt_new(14);
  int64_t oh = (cc->h + 2 * cc->pad - cc->dil * (cc->k - 1) - 1) / cc->stride + 1;
  int64_t ow = (cc->w + 2 * cc->pad - cc->dil * (cc->k - 1) - 1) / cc->stride + 1;
  int x = gt_input(&b, "x", F, 4, DIMS(cc->n, cc->c, cc->h, cc->w));
  int w = gt_const_rand(&b, "w", 4, DIMS(cc->m, cc->c / cc->group, cc->k, cc->k), &seed,
                        -0.5f, 0.5f);
  int bias = gt_const_rand(&b, "b", 1, DIMS(cc->m), &seed, -0.5f, 0.5f);
  int64_t pads[4] = {cc->pad, cc->pad, cc->pad, cc->pad}, st[2] = {cc->stride, cc->stride};
  int64_t dl[2] = {cc->dil, cc->dil};
  nr_attr at[] = {gt_ints("pads", 4, pads), gt_ints("strides", 2, st),
                  gt_ints("dilations", 2, dl), gt_i("group", cc->group)};
  int y = gt_node(&b, "Conv", "c", 3, (int[]){x, w, bias}, 4, at);
  if (!strcmp(cc->tail, "relu")) {
    y = gt_node(&b, "Relu", "act", 1, (int[]){y}, 0, NULL);
  } else if (!strcmp(cc->tail, "clip")) {
    float lo = 0, hi = 6;
    int l = gt_const(&b, "lo", F, 0, NULL, &lo), h = gt_const(&b, "hi", F, 0, NULL, &hi);
    y = gt_node(&b, "Clip", "act", 3, (int[]){y, l, h}, 0, NULL);
  } else if (!strcmp(cc->tail, "hardswish")) {
    y = gt_node(&b, "HardSwish", "act", 1, (int[]){y}, 0, NULL);
  } else if (!strcmp(cc->tail, "sigmoid")) {
    y = gt_node(&b, "Sigmoid", "act", 1, (int[]){y}, 0, NULL);
  } else if (!strcmp(cc->tail, "add_relu")) {
    int r = gt_input(&b, "r", F, 4, DIMS(cc->n, cc->m, oh, ow));
    y = gt_node(&b, "Add", "add", 2, (int[]){y, r}, 0, NULL);
    y = gt_node(&b, "Relu", "act", 1, (int[]){y}, 0, NULL);
  }
  return b;
}

static bool depthwise_kernel_case(const conv_case *cc) {
  return cc->group == cc->c && cc->m == cc->c && (cc->k == 3 || cc->k == 5) &&
         (cc->stride == 1 || cc->stride == 2) && cc->dil == 1;
}

static void conv_check(nr_test_state *t, const conv_case *cc, const char *route, double atol,
                       double rtol, const char *want) {
  unsigned seed = (unsigned)(cc->c * 31 + cc->h * 7 + cc->m + cc->k);
  char r[256];
  if (depthwise_kernel_case(cc) && want && !strncmp(want, "cudnn", 5)) {
    snprintf(r, sizeof r, "%s -cuda.conv.tactic@c=cudnn", route); /* else the own kernel */
    route = r;
  }
  gt_graph b = conv_graph(cc, seed);
  int y = b.g->nodes[b.g->n_nodes - 1].outputs[0];
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, route, atol, rtol, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

static const conv_case CONVS[] = {
    {1, 3, 17, 17, 8, 3, 1, 1, 1, 1, "relu"},      /* odd plane, stem-like */
    {2, 16, 14, 14, 32, 3, 2, 1, 1, 1, "clip"},    /* stride 2, batch 2 */
    {1, 32, 9, 9, 32, 3, 1, 1, 32, 1, "clip"},     /* depthwise */
    {1, 24, 8, 8, 48, 1, 1, 0, 1, 1, "add_relu"},  /* 1x1 + residual */
    {1, 16, 12, 12, 16, 3, 1, 2, 4, 2, "hardswish"}, /* grouped, dilated */
    {1, 8, 7, 7, 5, 5, 1, 2, 1, 1, "sigmoid"},     /* 5x5, odd channels */
    {1, 8, 6, 6, 8, 3, 1, 1, 1, 1, ""},            /* plain Conv + bias */
};

/* Exact fp32 (cuda.precision=fp32; the default, auto, runs convolutions in tf32). */
NR_TEST(gpu_conv_fp32) {
  for (size_t i = 0; i < sizeof CONVS / sizeof CONVS[0]; i++) {
    conv_check(t, &CONVS[i], "-cuda.precision@c=fp32", GT_TOL_F32, "cudnn_f32_conv");
    conv_check(t, &CONVS[i], "-cuda.precision@c=fp32 -cuda.conv.layout@c=nhwc", GT_TOL_F32,
               "cudnn_f32_conv_nhwc");
    conv_check(t, &CONVS[i], "-cuda.precision@c=fp32 -cuda.graphs=off", GT_TOL_F32,
               "cudnn_f32_conv");
  }
}

NR_TEST(gpu_conv_algos) {
  static const char *const algos[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm",
                                      "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  const conv_case cc = {1, 16, 12, 12, 16, 3, 1, 1, 1, 1, "add_relu"};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
    char route[128];
    snprintf(route, sizeof route, "-cuda.precision@c=fp32 -cuda.conv.algo@c=%s", algos[a]);
    conv_check(t, &cc, route, 1e-3, 1e-3, "cudnn_f32_conv"); /* FFT/Winograd: 1e-4 bound */
  }
  conv_check(t, &cc, "-cuda.precision@c=fp32 -compile.tactic_selection=profile", GT_TOL_F32,
             "cudnn_f32_conv");
  conv_check(t, &cc, "-cuda.precision@c=fp32 -cuda.workspace=16", GT_TOL_F32,
             "cudnn_f32_conv");
}

/* The default route (cuda.precision=auto) runs convolutions in tf32, NHWC preferred
 * ("tf32" also matches the depthwise kernel's tf32 rows); tf32 is auto's precision
 * there, so the knob offers no tf32 value of its own. */
NR_TEST(gpu_conv_reduced_precision) {
  for (size_t i = 0; i < sizeof CONVS / sizeof CONVS[0]; i++) {
    conv_check(t, &CONVS[i], "", GT_TOL_TF32, "tf32");
    conv_check(t, &CONVS[i], "-cuda.conv.layout@c=plain", GT_TOL_TF32, "cudnn_tf32_conv");
    conv_check(t, &CONVS[i], "-cuda.precision@c=fp16", GT_TOL_F16, "cudnn_f16_conv");
    conv_check(t, &CONVS[i], "-cuda.precision@c=fp16 -cuda.conv.layout@c=nhwc", GT_TOL_F16,
               "cudnn_f16_conv_nhwc");
  }
}

/* ---- GEMM ----------------------------------------------------------------------------- */

static void gemm_case(nr_test_state *t, int64_t m, int64_t k, int64_t n, bool trans_b,
                      bool relu, const char *route, double atol, double rtol,
                      const char *want) {
  unsigned seed = (unsigned)(m * 131 + k * 7 + n);
  gt_graph b = gt_new(13);
  int x = gt_input(&b, "x", F, 2, DIMS(m, k));
  int w = gt_const_rand(&b, "w", 2, trans_b ? DIMS(n, k) : DIMS(k, n), &seed, -0.5f, 0.5f);
  int c = gt_const_rand(&b, "bias", 1, DIMS(n), &seed, -1, 1);
  nr_attr at[] = {gt_i("transB", trans_b), gt_f("alpha", 0.75f), gt_f("beta", 1.5f)};
  int y = gt_node(&b, "Gemm", "fc", 3, (int[]){x, w, c}, 3, at);
  if (relu)
    y = gt_node(&b, "Relu", "act", 1, (int[]){y}, 0, NULL);
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, route, atol, rtol, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

/* MatMul of two activations [B, M, K] x [B, K, N] (or a 2-D B), then + bias, GELU. */
static void matmul_case(nr_test_state *t, int64_t batch, int64_t m, int64_t k, int64_t n,
                        bool b_const, bool gelu, const char *route, double atol,
                        double rtol, const char *want) {
  unsigned seed = (unsigned)(batch * 977 + m * 31 + k + n);
  gt_graph b = gt_new(20);
  int x = gt_input(&b, "x", F, 3, DIMS(batch, m, k));
  int w = b_const ? gt_const_rand(&b, "w", 2, DIMS(k, n), &seed, -0.5f, 0.5f)
                  : gt_input(&b, "w", F, 3, DIMS(batch, k, n));
  int y = gt_node(&b, "MatMul", "mm", 2, (int[]){x, w}, 0, NULL);
  if (gelu) {
    int bias = gt_const_rand(&b, "bias", 1, DIMS(n), &seed, -1, 1);
    y = gt_node(&b, "Add", "add", 2, (int[]){y, bias}, 0, NULL);
    y = gt_node(&b, "Gelu", "gelu", 1, (int[]){y}, 0, NULL);
  }
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, route, atol, rtol, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

static const int64_t GEMM_SHAPES[][3] = {{1, 64, 10}, {7, 33, 19}, {32, 512, 1000},
                                         {128, 256, 768}, {5, 1, 3}};

NR_TEST(gpu_gemm) {
  static const char *const routes[] = {"", "-cuda.gemm.tactic@fc=cublas", "-cuda.gemm.algo@fc=1",
                                       "-cuda.graphs=off"};
  static const char *const want[] = {"cublaslt_f32", "cublas_f32", "cublaslt_f32",
                                     "cublaslt_f32"};
  for (size_t s = 0; s < sizeof GEMM_SHAPES / sizeof GEMM_SHAPES[0]; s++)
    for (size_t r = 0; r < 4; r++) {
      const int64_t *d = GEMM_SHAPES[s];
      gemm_case(t, d[0], d[1], d[2], true, true, routes[r], GT_TOL_F32, want[r]);
      gemm_case(t, d[0], d[1], d[2], false, false, routes[r], GT_TOL_F32, want[r]);
    }
  gemm_case(t, 32, 512, 1000, true, true, "-compile.tactic_selection=profile", GT_TOL_F32,
            "cublas");
}

NR_TEST(gpu_gemm_reduced_precision) {
  for (size_t s = 0; s < sizeof GEMM_SHAPES / sizeof GEMM_SHAPES[0]; s++) {
    const int64_t *d = GEMM_SHAPES[s];
    gemm_case(t, d[0], d[1], d[2], true, true, "-cuda.precision@fc=tf32", GT_TOL_TF32,
              "cublaslt_tf32");
    gemm_case(t, d[0], d[1], d[2], true, true, "-cuda.precision@fc=fp16", GT_TOL_F16,
              "cublaslt_f16");
    gemm_case(t, d[0], d[1], d[2], false, true,
              "-cuda.precision@fc=fp16 -cuda.gemm.tactic@fc=cublas", GT_TOL_F16,
              "cublas_f16");
  }
}

NR_TEST(gpu_matmul) {
  matmul_case(t, 4, 16, 24, 8, false, false, "", GT_TOL_F32, "cublaslt_f32");
  matmul_case(t, 3, 7, 9, 5, false, false, "-cuda.gemm.tactic@mm=cublas", GT_TOL_F32,
              "cublas_f32");
  matmul_case(t, 2, 128, 256, 1024, true, true, "", GT_TOL_F32, "cublaslt_f32");
  matmul_case(t, 2, 128, 256, 1024, true, true, "-cuda.precision@mm=fp16", GT_TOL_F16,
              "cublaslt_f16");
  matmul_case(t, 1, 3, 5, 7, true, true, "-cuda.gemm.tactic@mm=cublas", GT_TOL_F32,
              "cublas_f32");
  matmul_case(t, 4, 16, 24, 8, false, false, "-cuda.precision@mm=fp16", GT_TOL_F16,
              "cublaslt_f16");
}

/* ---- elementwise -------------------------------------------------------------------------- */

static void unary_case(nr_test_state *t, const char *op, int n_attrs, const nr_attr *at,
                       float lo, float hi) {
  unsigned seed = (unsigned)strlen(op) * 17u;
  gt_graph b = gt_new(20);
  int x = gt_input(&b, "x", F, 3, DIMS(3, 5, 67));
  int y = gt_node(&b, op, "u", 1, (int[]){x}, n_attrs, at);
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, lo, hi, &in);
    gt_check(t, &b, &in, "", 1e-6, 2e-6, "nr_cuda_f32_eltwise", seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

NR_TEST(gpu_eltwise_unary) {
  static const char *const ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Neg", "Abs",
                                    "HardSwish", "Softplus", "Floor", "Ceil", "Elu"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    unary_case(t, ops[i], 0, NULL, -6, 6);
  unary_case(t, "Sqrt", 0, NULL, 0, 9);
  unary_case(t, "Log", 0, NULL, 0.01f, 9);
  unary_case(t, "Reciprocal", 0, NULL, 0.5f, 9);
  nr_attr a[] = {gt_f("alpha", 0.3f)};
  unary_case(t, "LeakyRelu", 1, a, -3, 3);
  nr_attr hs[] = {gt_f("alpha", 0.25f), gt_f("beta", 0.4f)};
  unary_case(t, "HardSigmoid", 2, hs, -5, 5);
  nr_attr ge[] = {gt_s("approximate", "tanh")};
  unary_case(t, "Gelu", 0, NULL, -6, 6);
  unary_case(t, "Gelu", 1, ge, -6, 6);
}

/* x op y with y broadcasting over x (numpy rules), both inputs activations. */
static void binary_case(nr_test_state *t, const char *op, int rx, const int64_t *dx, int ry,
                        const int64_t *dy, bool y_const) {
  unsigned seed = (unsigned)(rx * 13 + ry * 5 + (int)op[0]);
  gt_graph b = gt_new(17);
  int x = gt_input(&b, "x", F, rx, dx);
  int y = y_const ? gt_const_rand(&b, "y", ry, dy, &seed, 0.5f, 2)
                  : gt_input(&b, "y", F, ry, dy);
  int z = gt_node(&b, op, "bin", 2, (int[]){x, y}, 0, NULL);
  if (gt_finish(t, &b, 1, &z)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, 0.5f, 2, &in);
    gt_check(t, &b, &in, "", 1e-6, 2e-6, "nr_cuda_f32_eltwise", seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

NR_TEST(gpu_eltwise_binary) {
  static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    binary_case(t, ops[i], 4, DIMS(2, 3, 4, 5), 4, DIMS(2, 3, 4, 5), false);
    binary_case(t, ops[i], 4, DIMS(2, 3, 4, 5), 1, DIMS(5), true);
    binary_case(t, ops[i], 4, DIMS(2, 3, 4, 5), 3, DIMS(3, 1, 1), false);
    binary_case(t, ops[i], 2, DIMS(7, 1), 3, DIMS(2, 1, 9), false); /* both broadcast */
    binary_case(t, ops[i], 3, DIMS(1, 40, 33), 0, DIMS(0), true);  /* scalar */
  }
  binary_case(t, "PRelu", 4, DIMS(2, 3, 4, 5), 3, DIMS(3, 1, 1), true);
}

/* Sigmoid(x) * x + c, Relu: eltwise_fuse makes one nnroute.EltwiseChain of it. */
NR_TEST(gpu_eltwise_chain) {
  unsigned seed = 5;
  gt_graph b = gt_new(17);
  int x = gt_input(&b, "x", F, 4, DIMS(2, 8, 9, 11));
  int c = gt_const_rand(&b, "c", 3, DIMS(8, 1, 1), &seed, -1, 1);
  int s = gt_node(&b, "Sigmoid", "s", 1, (int[]){x}, 0, NULL);
  int m = gt_node(&b, "Mul", "m", 2, (int[]){s, x}, 0, NULL);
  int a = gt_node(&b, "Add", "a", 2, (int[]){m, c}, 0, NULL);
  int y = gt_node(&b, "Tanh", "th", 1, (int[]){a}, 0, NULL);
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -4, 4, &in);
    gt_check(t, &b, &in, "", 1e-6, 4e-6, "nr_cuda_f32_eltwise", seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

/* ---- normalization, pooling, reductions --------------------------------------------------- */

static void one_input_case(nr_test_state *t, const char *op, int opset, int rank,
                           const int64_t *dims, int n_attrs, const nr_attr *at, int n_extra,
                           const int *extra_kind, const char *want, float lo, float hi) {
  unsigned seed = (unsigned)(dims[rank - 1] * 3 + rank + opset);
  gt_graph b = gt_new(opset);
  int x = gt_input(&b, "x", F, rank, dims), ins[4] = {x};
  for (int i = 0; i < n_extra; i++) /* LayerNorm's scale and bias: the last dim */
    ins[1 + i] = gt_const_rand(&b, i ? "bias" : "scale", 1, &dims[rank - 1], &seed, 0.5f, 1.5f);
  (void)extra_kind;
  int y = gt_node(&b, op, "n", 1 + n_extra, ins, n_attrs, at);
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, lo, hi, &in);
    gt_check(t, &b, &in, "", 2e-6, 2e-5, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

NR_TEST(gpu_norm_rows) {
  static const int64_t rows[] = {1, 31, 32, 33, 128, 1000, 1500, 4100};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const int64_t d[3] = {3, 5, rows[i]};
    one_input_case(t, "Softmax", 13, 3, d, 0, NULL, 0, NULL, "nr_cuda_f32_softmax", -12, 12);
    one_input_case(t, "LogSoftmax", 13, 3, d, 0, NULL, 0, NULL, "nr_cuda_f32_logsoftmax",
                   -12, 12);
    nr_attr eps[] = {gt_f("epsilon", 1e-12f)};
    one_input_case(t, "LayerNormalization", 17, 3, d, 1, eps, 2, NULL,
                   "nr_cuda_f32_layernorm", -3, 5);
    one_input_case(t, "LayerNormalization", 17, 3, d, 0, NULL, 1, NULL,
                   "nr_cuda_f32_layernorm", -3, 5);
  }
  nr_attr ax1[] = {gt_i("axis", 1)}; /* opset 11: flattened at axis 1 */
  one_input_case(t, "Softmax", 11, 3, DIMS(4, 6, 7), 1, ax1, 0, NULL, "nr_cuda_f32_softmax",
                 -5, 5);
}

NR_TEST(gpu_pool_and_reduce) {
  one_input_case(t, "GlobalAveragePool", 13, 4, DIMS(2, 7, 13, 11), 0, NULL, 0, NULL,
                 "nr_cuda_f32_reduce_rows", -1, 1);
  one_input_case(t, "GlobalAveragePool", 13, 4, DIMS(1, 16, 40, 40), 0, NULL, 0, NULL,
                 "nr_cuda_f32_reduce_rows", -1, 1);
  one_input_case(t, "GlobalMaxPool", 13, 4, DIMS(2, 7, 5, 5), 0, NULL, 0, NULL,
                 "nr_cuda_f32_reduce_rows", -1, 1);
  int64_t axes[2] = {2, 3};
  nr_attr ra[] = {gt_ints("axes", 2, axes), gt_i("keepdims", 0)};
  one_input_case(t, "ReduceMean", 13, 4, DIMS(2, 9, 7, 7), 2, ra, 0, NULL,
                 "nr_cuda_f32_reduce_rows", -1, 1);
  int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
  int64_t pa[4] = {0, 1, 1, 0};
  nr_attr mp[] = {gt_ints("kernel_shape", 2, k3), gt_ints("strides", 2, s2),
                  gt_ints("pads", 4, p1)};
  one_input_case(t, "MaxPool", 13, 4, DIMS(1, 8, 17, 16), 3, mp, 0, NULL,
                 "nr_cuda_f32_pool2d", -1, 1);
  nr_attr ap[] = {gt_ints("kernel_shape", 2, k3), gt_ints("strides", 2, s2),
                  gt_ints("pads", 4, p1), gt_i("count_include_pad", 1)};
  one_input_case(t, "AveragePool", 13, 4, DIMS(2, 4, 9, 10), 4, ap, 0, NULL,
                 "nr_cuda_f32_pool2d", -1, 1);
  nr_attr ap2[] = {gt_ints("kernel_shape", 2, k2), gt_ints("pads", 4, pa),
                   gt_i("ceil_mode", 1), gt_ints("strides", 2, s2)};
  one_input_case(t, "AveragePool", 13, 4, DIMS(1, 3, 7, 8), 4, ap2, 0, NULL,
                 "nr_cuda_f32_pool2d", -1, 1);
}

/* ---- attention ------------------------------------------------------------------------- */

static void attention_case(nr_test_state *t, int64_t batch, int64_t s, int64_t kv, int64_t hq,
                           int64_t hkv, int64_t d, int mask, bool causal) {
  unsigned seed = (unsigned)(s * 7 + kv * 3 + d + mask + causal);
  gt_graph b = gt_new(23);
  int q = gt_input(&b, "q", F, 3, DIMS(batch, s, hq * d));
  int k = gt_input(&b, "k", F, 3, DIMS(batch, kv, hkv * d));
  int v = gt_input(&b, "v", F, 3, DIMS(batch, kv, hkv * d));
  int ins[4] = {q, k, v, -1}, n_in = 3;
  if (mask == 1)
    ins[n_in++] = gt_input(&b, "mask", F, 2, DIMS(s, kv));
  else if (mask == 2)
    ins[n_in++] = gt_input(&b, "mask", NR_DTYPE_BOOL, 4, DIMS(batch, 1, s, kv));
  nr_attr at[] = {gt_i("q_num_heads", hq), gt_i("kv_num_heads", hkv),
                  gt_i("is_causal", causal)};
  int y = gt_node(&b, "Attention", "att", n_in, ins, 3, at);
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, "", 2e-5, 1e-4, "nr_cuda_f32_attention", seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

NR_TEST(gpu_attention) {
  attention_case(t, 1, 128, 128, 4, 4, 64, 0, false); /* bert_tiny */
  attention_case(t, 2, 33, 70, 4, 2, 32, 0, false);   /* grouped heads, odd lengths */
  attention_case(t, 1, 17, 17, 2, 2, 16, 0, true);
  attention_case(t, 2, 20, 45, 2, 1, 128, 1, false);  /* additive mask */
  attention_case(t, 1, 9, 40, 3, 3, 100, 2, false);   /* bool mask, D not a multiple */
  attention_case(t, 1, 5, 3, 1, 1, 256, 0, false);
}

/* ---- data movement ---------------------------------------------------------------------- */

NR_TEST(gpu_copies) {
  unsigned seed = 9;
  { /* Transpose + Reshape + Concat + Slice (step 2) + Split */
    gt_graph b = gt_new(13);
    int x = gt_input(&b, "x", F, 4, DIMS(2, 3, 4, 5));
    int64_t perm[4] = {0, 2, 3, 1};
    nr_attr pa[] = {gt_ints("perm", 4, perm)};
    int tr = gt_node(&b, "Transpose", "tr", 1, (int[]){x}, 1, pa);
    int64_t shape[3] = {2, 20, 3};
    int sh = gt_const(&b, "shape", NR_DTYPE_INT64, 1, DIMS(3), shape);
    int re = gt_node(&b, "Reshape", "re", 2, (int[]){tr, sh}, 0, NULL);
    nr_attr ca[] = {gt_i("axis", 2)};
    int cat = gt_node(&b, "Concat", "cat", 2, (int[]){re, re}, 1, ca);
    int64_t st[2] = {1, -1}, en[2] = {19, -7}, ax[2] = {1, 2}, sp[2] = {2, -1};
    int s0 = gt_const(&b, "s0", NR_DTYPE_INT64, 1, DIMS(2), st);
    int e0 = gt_const(&b, "e0", NR_DTYPE_INT64, 1, DIMS(2), en);
    int a0 = gt_const(&b, "a0", NR_DTYPE_INT64, 1, DIMS(2), ax);
    int p0 = gt_const(&b, "p0", NR_DTYPE_INT64, 1, DIMS(2), sp);
    int sl = gt_node(&b, "Slice", "sl", 5, (int[]){cat, s0, e0, a0, p0}, 0, NULL);
    nr_attr fa[] = {gt_i("axis", 1)};
    int y = gt_node(&b, "Flatten", "fl", 1, (int[]){sl}, 1, fa);
    if (gt_finish(t, &b, 1, &y)) {
      gt_inputs in;
      gt_inputs_make(&b, seed, -1, 1, &in);
      gt_check(t, &b, &in, "", 0, 0, "nr_cuda_copy_slice", seed);
      gt_inputs_free(&in);
    }
    gt_free(&b);
  }
  { /* Gather rows of a constant table by int64 ids (bert's embedding) */
    gt_graph b = gt_new(13);
    int ids = gt_input(&b, "ids", NR_DTYPE_INT64, 2, DIMS(1, 37));
    int tab = gt_const_rand(&b, "table", 2, DIMS(50, 24), &seed, -1, 1);
    int y = gt_node(&b, "Gather", "g", 2, (int[]){tab, ids}, 0, NULL);
    if (gt_finish(t, &b, 1, &y)) {
      gt_inputs in;
      gt_inputs_make(&b, seed, 0, 50, &in);
      gt_check(t, &b, &in, "", 0, 0, "nr_cuda_gather", seed);
      gt_inputs_free(&in);
    }
    gt_free(&b);
  }
  { /* Split into three along axis 1 (opset 13: split sizes as an input) */
    gt_graph b = gt_new(13);
    int x = gt_input(&b, "x", F, 3, DIMS(2, 9, 4));
    int64_t parts[3] = {2, 3, 4};
    int sp = gt_const(&b, "parts", NR_DTYPE_INT64, 1, DIMS(3), parts);
    nr_attr ax[] = {gt_i("axis", 1)};
    int y0 = gt_node(&b, "Split", "sp", 2, (int[]){x, sp}, 1, ax);
    int y1 = nr_graph_add_tensor(b.g, "sp_out1", 0), y2 = nr_graph_add_tensor(b.g, "sp_out2", 0);
    nr_node *n = &b.g->nodes[b.g->n_nodes - 1];
    n->outputs = realloc(n->outputs, sizeof(int) * 3);
    n->outputs[1] = y1, n->outputs[2] = y2, n->n_outputs = 3;
    int r = gt_node(&b, "Relu", "r", 1, (int[]){y1}, 0, NULL);
    if (gt_finish(t, &b, 3, (int[]){y0, r, y2})) {
      gt_inputs in;
      gt_inputs_make(&b, seed, -1, 1, &in);
      gt_check(t, &b, &in, "", 0, 0, "nr_cuda_copy_split", seed);
      gt_inputs_free(&in);
    }
    gt_free(&b);
  }
}

/* ---- depthwise convolution (the project's kernel) ---------------------------------------- */

static const conv_case DWS[] = {
    {1, 32, 9, 9, 32, 3, 1, 1, 32, 1, "clip"},
    {2, 24, 13, 11, 24, 3, 2, 1, 24, 1, "relu"},    /* odd planes, batch 2 */
    {1, 16, 7, 7, 16, 5, 1, 2, 16, 1, "hardswish"},
    {1, 40, 15, 14, 40, 5, 2, 2, 40, 1, ""},        /* plain Conv + bias */
    {1, 8, 4, 5, 8, 3, 1, 0, 8, 1, "sigmoid"},      /* no padding, tiny plane */
    {1, 96, 56, 56, 96, 3, 2, 1, 96, 1, "clip"},    /* mobilenet_v2's size */
};

NR_TEST(gpu_dwconv) {
  for (size_t i = 0; i < sizeof DWS / sizeof DWS[0]; i++) {
    conv_check(t, &DWS[i], "-cuda.precision@c=fp32", GT_TOL_F32, "nr_cuda_f32_dwconv");
    conv_check(t, &DWS[i], "-cuda.precision@c=fp32 -cuda.conv.layout@c=nhwc", GT_TOL_F32,
               "nr_cuda_f32_dwconv_nhwc");
    /* the default (tf32) runs the same fp32 kernel: exact tolerance */
    conv_check(t, &DWS[i], "", GT_TOL_F32, "nr_cuda_tf32_dwconv_nhwc");
    conv_check(t, &DWS[i], "-cuda.conv.layout@c=plain", GT_TOL_F32, "nr_cuda_tf32_dwconv");
    conv_check(t, &DWS[i], "-cuda.precision@c=fp16", GT_TOL_F16, "nr_cuda_f16_dwconv_nhwc");
    conv_check(t, &DWS[i], "-cuda.precision@c=fp16 -cuda.conv.layout@c=plain", GT_TOL_F16,
               "nr_cuda_f16_dwconv");
    conv_check(t, &DWS[i], "-cuda.precision@c=fp32 -cuda.conv.tactic@c=cudnn", GT_TOL_F32,
               "cudnn_f32_conv");
  }
}

/* ---- fp16 end to end (cuda_half.c): activations stay fp16 between steps ------------------ */

/* x -> Conv 3x3 + Relu -> MaxPool -> depthwise (dk, stride ds) + Clip -> Conv 1x1
 * (+ the pool's output, Relu, when ds is 1) -> GlobalAveragePool -> Flatten -> Gemm. */
static void cnn_case(nr_test_state *t, int64_t n, int64_t c, int64_t hw, int64_t dk, int64_t ds,
                     const char *route, double atol, double rtol, const char *want) {
  unsigned seed = (unsigned)(n * 101 + c * 7 + hw + dk * 3 + ds);
  gt_graph b = gt_new(14);
  int64_t c2 = 2 * c, p1[4] = {1, 1, 1, 1}, s1[2] = {1, 1}, k3[2] = {3, 3}, s2[2] = {2, 2};
  int64_t pd[4] = {dk / 2, dk / 2, dk / 2, dk / 2}, sd[2] = {ds, ds}, p0[4] = {0, 0, 0, 0};
  int x = gt_input(&b, "x", F, 4, DIMS(n, c, hw, hw));
  int w1 = gt_const_rand(&b, "w1", 4, DIMS(c2, c, 3, 3), &seed, -0.3f, 0.3f);
  int b1 = gt_const_rand(&b, "b1", 1, DIMS(c2), &seed, -0.3f, 0.3f);
  nr_attr a1[] = {gt_ints("pads", 4, p1), gt_ints("strides", 2, s1)};
  int y = gt_node(&b, "Conv", "c1", 3, (int[]){x, w1, b1}, 2, a1);
  y = gt_node(&b, "Relu", "r1", 1, (int[]){y}, 0, NULL);
  nr_attr mp[] = {gt_ints("kernel_shape", 2, k3), gt_ints("strides", 2, s2),
                  gt_ints("pads", 4, p1)};
  int pool = gt_node(&b, "MaxPool", "mp", 1, (int[]){y}, 3, mp);
  int w2 = gt_const_rand(&b, "w2", 4, DIMS(c2, 1, dk, dk), &seed, -0.5f, 0.5f);
  int b2 = gt_const_rand(&b, "b2", 1, DIMS(c2), &seed, -0.3f, 0.3f);
  nr_attr a2[] = {gt_ints("pads", 4, pd), gt_ints("strides", 2, sd), gt_i("group", c2)};
  y = gt_node(&b, "Conv", "c2", 3, (int[]){pool, w2, b2}, 3, a2);
  float lo = 0, hi = 6;
  int l = gt_const(&b, "lo", F, 0, NULL, &lo), h = gt_const(&b, "hi", F, 0, NULL, &hi);
  y = gt_node(&b, "Clip", "r2", 3, (int[]){y, l, h}, 0, NULL);
  int w3 = gt_const_rand(&b, "w3", 4, DIMS(c2, c2, 1, 1), &seed, -0.3f, 0.3f);
  int b3 = gt_const_rand(&b, "b3", 1, DIMS(c2), &seed, -0.3f, 0.3f);
  nr_attr a3[] = {gt_ints("pads", 4, p0), gt_ints("strides", 2, s1)};
  y = gt_node(&b, "Conv", "c3", 3, (int[]){y, w3, b3}, 2, a3);
  if (ds == 1) {
    y = gt_node(&b, "Add", "add", 2, (int[]){y, pool}, 0, NULL);
    y = gt_node(&b, "Relu", "r3", 1, (int[]){y}, 0, NULL);
  }
  y = gt_node(&b, "GlobalAveragePool", "gap", 1, (int[]){y}, 0, NULL);
  nr_attr fa[] = {gt_i("axis", 1)};
  y = gt_node(&b, "Flatten", "fl", 1, (int[]){y}, 1, fa);
  int wf = gt_const_rand(&b, "wf", 2, DIMS(c2, 10), &seed, -0.5f, 0.5f);
  int bf = gt_const_rand(&b, "bf", 1, DIMS(10), &seed, -0.5f, 0.5f);
  y = gt_node(&b, "Gemm", "fc", 3, (int[]){y, wf, bf}, 0, NULL);
  if (gt_finish(t, &b, 1, &y)) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, route, atol, rtol, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

NR_TEST(gpu_half_cnn) {
  static const int64_t shapes[][5] = {{1, 16, 20, 3, 1}, {2, 12, 17, 5, 2}, {1, 24, 15, 3, 2}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t *s = shapes[i];
    cnn_case(t, s[0], s[1], s[2], s[3], s[4], "-cuda.precision@*=fp32", GT_TOL_F32,
             "nr_cuda_f32_dwconv,nr_cuda_f32_pool2d");
    cnn_case(t, s[0], s[1], s[2], s[3], s[4], "", GT_TOL_TF32,
             "nr_cuda_tf32_dwconv_nhwc,cudnn_tf32_conv_nhwc,cublaslt_f32");
    cnn_case(t, s[0], s[1], s[2], s[3], s[4], "-cuda.precision@*=fp16", GT_TOL_F16,
             "nr_cuda_f16_dwconv_nhwc,nr_cuda_f16_pool2d,nr_cuda_f16_reduce_rows,cudnn_f16_conv_nhwc");
    cnn_case(t, s[0], s[1], s[2], s[3], s[4], "-cuda.precision@*=fp16 -cuda.conv.layout@*=plain",
             GT_TOL_F16, "nr_cuda_f16_dwconv,nr_cuda_f16_pool2d");
    cnn_case(t, s[0], s[1], s[2], s[3], s[4],
             "-cuda.precision@*=fp16 -cuda.conv.tactic@*=cudnn -cuda.graphs=off", GT_TOL_F16,
             "cudnn_f16_conv,nr_cuda_f16_pool2d");
    cnn_case(t, s[0], s[1], s[2], s[3], s[4], "-cuda.precision@*=fp16 -cuda.precision@c3=fp32",
             GT_TOL_F16, "cudnn_f32_conv"); /* fp32 reads fp16 producers' outputs */
  }
}

/* x (and a memory of t rows) -> q, k, v projections -> Attention -> Wo -> + x ->
 * LayerNorm -> MatMul, Gelu -> MatMul -> y; a second output is q transposed. */
typedef struct tf_case {
  int64_t batch, s, t, hq, hkv, d;
  int mask; /* 0 none, 1 float [s, t], 2 bool [batch, 1, s, t] */
  bool causal;
} tf_case;

static void transformer_case(nr_test_state *t, const tf_case *tc, const char *route,
                             double atol, double rtol, const char *want) {
  unsigned seed = (unsigned)(tc->s * 13 + tc->t * 5 + tc->d + tc->hq + tc->mask);
  gt_graph b = gt_new(23);
  int64_t e = tc->hq * tc->d, ekv = tc->hkv * tc->d, perm[3] = {0, 2, 1};
  float ws = 1.0f / (float)e;
  int x = gt_input(&b, "x", F, 3, DIMS(tc->batch, tc->s, e));
  int mem = tc->t != tc->s ? gt_input(&b, "mem", F, 3, DIMS(tc->batch, tc->t, e)) : x;
  int wq = gt_const_rand(&b, "wq", 2, DIMS(e, e), &seed, -2 * ws * 8, 2 * ws * 8);
  int wk = gt_const_rand(&b, "wk", 2, DIMS(e, ekv), &seed, -2 * ws * 8, 2 * ws * 8);
  int wv = gt_const_rand(&b, "wv", 2, DIMS(e, ekv), &seed, -0.3f, 0.3f);
  int wo = gt_const_rand(&b, "wo", 2, DIMS(e, e), &seed, -0.3f, 0.3f);
  int w1 = gt_const_rand(&b, "w1", 2, DIMS(e, 2 * e), &seed, -0.2f, 0.2f);
  int w2 = gt_const_rand(&b, "w2", 2, DIMS(2 * e, e), &seed, -0.2f, 0.2f);
  int sc = gt_const_rand(&b, "ln_s", 1, DIMS(e), &seed, 0.5f, 1.5f);
  int bi = gt_const_rand(&b, "ln_b", 1, DIMS(e), &seed, -0.5f, 0.5f);
  int q = gt_node(&b, "MatMul", "mq", 2, (int[]){x, wq}, 0, NULL);
  int k = gt_node(&b, "MatMul", "mk", 2, (int[]){mem, wk}, 0, NULL);
  int v = gt_node(&b, "MatMul", "mv", 2, (int[]){mem, wv}, 0, NULL);
  int ins[4] = {q, k, v, -1}, n_in = 3;
  if (tc->mask == 1)
    ins[n_in++] = gt_input(&b, "mask", F, 2, DIMS(tc->s, tc->t));
  else if (tc->mask == 2)
    ins[n_in++] = gt_input(&b, "mask", NR_DTYPE_BOOL, 4, DIMS(tc->batch, 1, tc->s, tc->t));
  nr_attr at[] = {gt_i("q_num_heads", tc->hq), gt_i("kv_num_heads", tc->hkv),
                  gt_i("is_causal", tc->causal)};
  int y = gt_node(&b, "Attention", "att", n_in, ins, 3, at);
  y = gt_node(&b, "MatMul", "mo", 2, (int[]){y, wo}, 0, NULL);
  y = gt_node(&b, "Add", "res", 2, (int[]){y, x}, 0, NULL);
  y = gt_node(&b, "LayerNormalization", "ln", 3, (int[]){y, sc, bi}, 0, NULL);
  y = gt_node(&b, "MatMul", "m1", 2, (int[]){y, w1}, 0, NULL);
  y = gt_node(&b, "Gelu", "gelu", 1, (int[]){y}, 0, NULL);
  y = gt_node(&b, "MatMul", "m2", 2, (int[]){y, w2}, 0, NULL);
  nr_attr pa[] = {gt_ints("perm", 3, perm)};
  int qt = gt_node(&b, "Transpose", "qt", 1, (int[]){q}, 1, pa);
  if (gt_finish(t, &b, 2, (int[]){y, qt})) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, route, atol, rtol, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

static const tf_case TFS[] = {
    {1, 128, 128, 2, 2, 64, 0, false}, /* bert_tiny's attention */
    {2, 37, 37, 2, 2, 32, 1, false},   /* additive mask, rows not a multiple of 32 */
    {1, 45, 45, 4, 2, 16, 0, true},    /* grouped heads, causal */
    {2, 20, 70, 2, 2, 64, 2, false},   /* cross attention: 70 keys, bool mask */
    {1, 33, 33, 1, 1, 128, 0, false},  /* D 128 */
    {1, 300, 300, 2, 1, 48, 0, false}, /* keys over several tiles */
};

NR_TEST(gpu_half_transformer) {
  for (size_t i = 0; i < sizeof TFS / sizeof TFS[0]; i++) {
    transformer_case(t, &TFS[i], "", 2e-4, 1e-3, "nr_cuda_f32_attention");
    transformer_case(t, &TFS[i], "-cuda.precision@*=fp16", GT_TOL_F16,
                     "nr_cuda_f16_attention,nr_cuda_f16_layernorm,nr_cuda_cast_f16_to_f32");
  }
  /* D 40: no tensor-core kernel; the fp32 kernel behind casts */
  const tf_case odd = {1, 20, 20, 2, 2, 40, 0, false};
  transformer_case(t, &odd, "-cuda.precision@*=fp16", GT_TOL_F16,
                   "nr_cuda_f32_attention,nr_cuda_cast_f16_to_f32");
  transformer_case(t, &TFS[0], "-cuda.precision@*=fp16 -cuda.gemm.tactic@*=cublas -cuda.graphs=off",
                   GT_TOL_F16, "cublas_f16_gemm,nr_cuda_f16_attention");
}

/* x -> MatMul -> Softmax -> MatMul -> LogSoftmax -> y, fp16 in between. */
NR_TEST(gpu_half_softmax) {
  static const int64_t ns[] = {40, 1000, 1500};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    unsigned seed = (unsigned)ns[i];
    gt_graph b = gt_new(13);
    int x = gt_input(&b, "x", F, 3, DIMS(2, 8, 64));
    int w = gt_const_rand(&b, "w", 2, DIMS(64, ns[i]), &seed, -0.5f, 0.5f);
    int w2 = gt_const_rand(&b, "w2", 2, DIMS(ns[i], 24), &seed, -1, 1);
    int y = gt_node(&b, "MatMul", "m1", 2, (int[]){x, w}, 0, NULL);
    y = gt_node(&b, "Softmax", "sm", 1, (int[]){y}, 0, NULL);
    y = gt_node(&b, "MatMul", "m2", 2, (int[]){y, w2}, 0, NULL);
    y = gt_node(&b, "LogSoftmax", "lsm", 1, (int[]){y}, 0, NULL);
    if (gt_finish(t, &b, 1, &y)) {
      gt_inputs in;
      gt_inputs_make(&b, seed, -1, 1, &in);
      gt_check(t, &b, &in, "-cuda.precision@*=fp16", GT_TOL_F16,
               "nr_cuda_f16_softmax,nr_cuda_f16_logsoftmax", seed);
      gt_inputs_free(&in);
    }
    gt_free(&b);
  }
}

/* ---- residual Adds in the products and the GELU epilogue --------------------------------- */

/* x -> h = x W0 + b0 -> r = h W1 + b1 -> r + h -> LayerNorm -> y (the second product
 * takes h as its residual); and a 2-D Gemm (transB, alpha, beta) whose + x2 it takes,
 * the Add's output a graph output. Both products have a constant B: fuse.gemm_act
 * decides their residuals. */
static void residual_case(nr_test_state *t, int64_t batch, int64_t m, int64_t k,
                          const char *route, double atol, double rtol, const char *want) {
  unsigned seed = (unsigned)(batch * 31 + m * 7 + k);
  gt_graph b = gt_new(17);
  int x = gt_input(&b, "x", F, 3, DIMS(batch, m, k));
  int x2 = gt_input(&b, "x2", F, 2, DIMS(m, k));
  int w0 = gt_const_rand(&b, "w0", 2, DIMS(k, k), &seed, -0.1f, 0.1f);
  int w1 = gt_const_rand(&b, "w1", 2, DIMS(k, k), &seed, -0.1f, 0.1f);
  int w2 = gt_const_rand(&b, "w2", 2, DIMS(k, k), &seed, -0.1f, 0.1f);
  int b0 = gt_const_rand(&b, "b0", 1, DIMS(k), &seed, -1, 1);
  int b1 = gt_const_rand(&b, "b1", 1, DIMS(k), &seed, -1, 1);
  int sc = gt_const_rand(&b, "ln_s", 1, DIMS(k), &seed, 0.5f, 1.5f);
  int h = gt_node(&b, "MatMul", "m0", 2, (int[]){x, w0}, 0, NULL);
  h = gt_node(&b, "Add", "b0_add", 2, (int[]){h, b0}, 0, NULL);
  int r = gt_node(&b, "MatMul", "m1", 2, (int[]){h, w1}, 0, NULL);
  r = gt_node(&b, "Add", "b1_add", 2, (int[]){r, b1}, 0, NULL);
  r = gt_node(&b, "Add", "res", 2, (int[]){r, h}, 0, NULL);
  int y = gt_node(&b, "LayerNormalization", "ln", 2, (int[]){r, sc}, 0, NULL);
  nr_attr at[] = {gt_i("transB", 1), gt_f("alpha", 0.75f), gt_f("beta", 1.5f)};
  int z = gt_node(&b, "Gemm", "fc", 3, (int[]){x2, w2, b1}, 3, at);
  z = gt_node(&b, "Add", "res2", 2, (int[]){x2, z}, 0, NULL);
  if (gt_finish(t, &b, 2, (int[]){y, z})) {
    gt_inputs in;
    gt_inputs_make(&b, seed, -1, 1, &in);
    gt_check(t, &b, &in, route, atol, rtol, want, seed);
    gt_inputs_free(&in);
  }
  gt_free(&b);
}

NR_TEST(gpu_residual_gemm) {
  static const int64_t shapes[][3] = {{1, 128, 768}, {2, 37, 96}, {4, 1, 64}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t *s = shapes[i];
    /* constant B: the residual Adds go into the products by fuse_act (fuse.gemm_act's
     * default); with fuse.gemm_act at bias_act or none they stay Adds */
    residual_case(t, s[0], s[1], s[2], "", GT_TOL_F32,
                  "cublaslt_f32_gemm,nr_cuda_f32_layernorm,!nr_cuda_f32_eltwise");
    residual_case(t, s[0], s[1], s[2], "-fuse.gemm_act@m1=bias_act -fuse.gemm_act@fc=none",
                  GT_TOL_F32, "cublaslt_f32_gemm,nr_cuda_f32_eltwise");
    residual_case(t, s[0], s[1], s[2], "-cuda.gemm.tactic@*=cublas -cuda.graphs=off", GT_TOL_F32,
                  "cublas_f32_gemm");
    /* fp16: h is fp16 (C of the second product); x2 is an fp32 input, the Gemm's output
     * a graph output (fp32) */
    residual_case(t, s[0], s[1], s[2], "-cuda.precision@*=fp16", GT_TOL_F16,
                  "cublaslt_f16_gemm,nr_cuda_f16_layernorm");
    residual_case(t, s[0], s[1], s[2], "-cuda.precision@*=fp16 -cuda.gemm.tactic@*=cublas",
                  GT_TOL_F16, "cublas_f16_gemm");
    /* m0 fp32 writes h fp32, m1 fp16 writes fp16: the residual's dtype differs from
     * the output's, so the epilogue pass adds it */
    residual_case(t, s[0], s[1], s[2], "-cuda.precision@m1=fp16", GT_TOL_F16,
                  "cublaslt_f16_gemm,cublaslt_f32_gemm");
  }
}

NR_TEST(gpu_gelu_epilogue) {
  /* fp16 products: erf GELU in cuBLASLt's tanh epilogue (default) or exact after it */
  matmul_case(t, 2, 128, 256, 1024, true, true, "-cuda.precision@mm=fp16", GT_TOL_F16,
              "cublaslt_f16");
  matmul_case(t, 2, 128, 256, 1024, true, true, "-cuda.precision@mm=fp16 -cuda.gemm.gelu=exact",
              GT_TOL_F16, "cublaslt_f16");
  matmul_case(t, 1, 7, 40, 24, true, true, "-cuda.precision@mm=fp16", GT_TOL_F16, "cublaslt_f16");
  matmul_case(t, 1, 7, 40, 24, true, true, "-cuda.precision@mm=fp16 -cuda.graphs=off", GT_TOL_F16,
              "cublaslt_f16");
}
