/* test_int8_chain.c - uint8 tensors between consecutive int8 layers (the int8_chain
 * pass, src/passes/int8_chain.c, and the 8-bit paths of nnroute's int8 GEMM).
 *
 * Two levels. The kernel: nr_qgemm_to_u8 must give exactly the bytes that quantizing
 * nr_qgemm's float result gives (both rounding kinds), on shapes around every
 * micro-kernel's tile, one and several k blocks, with a residual and an activation,
 * and touch nothing outside its rows (guard bytes). The compiler: a small network
 * with every case the pass must judge (1x1, 3x3, strided, grouped convs; a residual
 * Add fused into a conv; a tensor with two int8 readers; one that is also a graph
 * output; one that an fp32 MaxPool reads) is built with quant.chain=on and off for
 * each int8 source, and a nnroute conv feeding a oneDNN depthwise one. The plan
 * must hold uint8 slots exactly where the rules allow them, the outputs of both builds must be bitwise equal (the producer rounds as the
 * reader's quantizer would have, from the same floats), and an engine file with
 * uint8 slots must load and compute the same bits. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "plan/knob.h"
#include "plan/quant.h"
#include "plan/tactic.h"
#include "graph_build.h"
#include "kernels/cpu/onednn_q/onednn_q.h"
#include "kernels/cpu/qgemm/qgemm_impl.h"
#include "kernels/ref/executor.h"
#include "op_test.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64

/* ---- the kernel ------------------------------------------------------------------ */

typedef struct u8_case {
  int64_t m, n, k;
  int kc; /* 0: the default blocking */
  bool res, fma;
  nr_act act;
} u8_case;

/* Packs random weights for uk: W is A (m x k) or B (k x n) as the kernel's side says;
 * the dequantization arrays for activation grid (x_scale, zp). */
typedef struct u8_fixture {
  nr_qgemm_cfg cfg;
  void *w;
  float *scale, *bias;
  int32_t *corr;
  float *x, *res;
} u8_fixture;

static bool fixture_init(u8_fixture *f, int uk, const u8_case *c, float x_scale, int32_t zp,
                         unsigned *seed) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  int64_t ch = u->wside == NR_QGEMM_W_A ? c->m : c->n;
  f->cfg = nr_qgemm_default_cfg(uk, c->m, c->n, c->k);
  if (c->kc)
    f->cfg.kc = (uint16_t)c->kc;
  float *wf = random_floats(ch * c->k, seed);
  int8_t *q = malloc((size_t)(ch * c->k) + 1);
  float *ws = malloc(sizeof(float) * (size_t)ch);
  int32_t *wsum = malloc(sizeof(int32_t) * (size_t)ch);
  float *b = random_floats(ch, seed);
  f->w = aligned_alloc(64, (nr_qgemm_packed_w_size(f->cfg, ch, c->k) + 63) / 64 * 64);
  f->scale = malloc(sizeof(float) * (size_t)ch);
  f->bias = malloc(sizeof(float) * (size_t)ch);
  f->corr = malloc(sizeof(int32_t) * (size_t)ch);
  f->x = random_floats(c->m * c->n + c->m * c->k + c->k * c->n, seed);
  f->res = random_floats(c->m * c->n, seed);
  bool ok = wf && q && ws && wsum && b && f->w && f->scale && f->bias && f->corr &&
            f->x && f->res && nr_qgemm_quantize_w(ch, c->k, wf, c->k, 1, q, ws, wsum);
  if (ok) {
    nr_qgemm_pack_w(f->cfg, ch, c->k, q, f->w);
    nr_qgemm_dequant_build(ch, ws, wsum, x_scale, zp, 1.0f, b, ch, 1.0f, f->scale, f->corr,
                           f->bias);
  }
  free(wf), free(q), free(ws), free(wsum), free(b);
  return ok;
}

static void fixture_free(u8_fixture *f) {
  free(f->w), free(f->scale), free(f->bias), free(f->corr), free(f->x), free(f->res);
}

/* One case on one micro-kernel: float C quantized element by element against the
 * 8-bit result, rows ldc = n + 3 bytes apart inside guard bytes. */
static void u8_case_run(nr_test_state *t, int uk, const u8_case *c, unsigned seed,
                        nr_threadpool *pool) {
  const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
  float x_scale = 2.0f / (float)u->qmax;
  int32_t zp = u->qmax / 2;
  u8_fixture f = {0};
  unsigned seed0 = seed;
  REQUIRE(fixture_init(&f, uk, c, x_scale, zp, &seed), "%s: fixture, seed %u", u->name,
          seed0);
  bool wa = u->wside == NR_QGEMM_W_A;
  nr_qgemm_act x = {f.x, wa ? c->n : c->k, false, false, 1.0f / x_scale, zp, NULL};
  nr_qgemm_dequant dq = {f.scale, f.corr, f.bias};
  nr_epilogue ep = {.residual = c->res ? f.res : NULL, .ldr = c->n, .beta = 1.0f,
                    .act = c->act, .act_a = -0.5f, .act_b = 0.75f};
  int threads = nr_threadpool_size(pool);
  size_t s1 = nr_qgemm_scratch_size(f.cfg, c->m, c->n, c->k, threads);
  size_t s2 = nr_qgemm_u8_scratch_size(f.cfg, c->m, c->n, c->k, threads);
  void *scratch = aligned_alloc(64, ((s1 > s2 ? s1 : s2) + 63) / 64 * 64);
  float *cf = malloc(sizeof(float) * (size_t)(c->m * c->n));
  int64_t ldc = c->n + 3, bytes = c->m * ldc;
  uint8_t *buf = malloc((size_t)(bytes + 2 * GUARD));
  REQUIRE(scratch && cf && buf);
  memset(buf, 0xA5, (size_t)(bytes + 2 * GUARD));
  nr_qgemm(f.cfg, c->m, c->n, c->k, f.w, x, &dq, cf, c->n, &ep, scratch, pool, threads);
  float y_scale = 3.0f / 255.0f;
  int32_t y_zp = 40, y_qmax = c->fma ? 255 : u->qmax;
  nr_qgemm_y8 y = {buf + GUARD, ldc, 1.0f / y_scale, y_zp, y_qmax, c->fma};
  nr_qgemm_to_u8(f.cfg, c->m, c->n, c->k, f.w, x, &dq, &y, &ep, scratch, pool, threads);
  int bad = 0;
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < ldc; j++) {
      uint8_t got = buf[GUARD + i * ldc + j], want = 0xA5;
      if (j < c->n && c->fma)
        nr_quantize_u8_portable(&cf[i * c->n + j], &want, 1, y.inv_scale, y_zp);
      else if (j < c->n)
        want = nr_qgemm_quantize_x(cf[i * c->n + j], y.inv_scale, y_zp, y_qmax);
      bad += got != want;
    }
  for (int64_t i = 0; i < GUARD; i++)
    bad += (buf[i] != 0xA5) + (buf[GUARD + bytes + i] != 0xA5);
  CHECK(!bad, "%s: m %lld n %lld k %lld kc %d res %d fma %d act %d threads %d: %d bytes "
        "differ (seed %u)", u->name, (long long)c->m, (long long)c->n, (long long)c->k,
        c->kc, c->res, c->fma, (int)c->act, threads, bad, seed0);
  free(scratch), free(cf), free(buf);
  fixture_free(&f);
}

/* Every micro-kernel this CPU runs, shapes around its tile, one and three k blocks. */
NR_TEST(int8_chain_qgemm_to_u8_is_the_quantized_float_result) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int ran = 0;
  for (int uk = 0; uk < nr_qgemm_ukernel_count(); uk++) {
    const nr_qgemm_ukernel *u = nr_qgemm_ukernel_get(uk);
    if (u->isa & ~nr_cpu_isa())
      continue;
    int64_t ms[] = {1, u->mr, u->mr + 1, 2 * u->mr + 3};
    int64_t ns[] = {u->nr - 1, u->nr, u->nr + 5, 3 * u->nr + 1};
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) {
        unsigned seed = 1000u + (unsigned)(uk * 16 + a * 4 + b);
        u8_case c1 = {ms[a], ns[b], 37, 0, a & 1, b & 1, (a + b) % 3 ? NR_ACT_RELU : NR_ACT_CLIP};
        u8_case c3 = {ms[a], ns[b], 150, 64, (a + 1) & 1, false, NR_ACT_NONE};
        u8_case_run(t, uk, &c1, seed, NULL);
        u8_case_run(t, uk, &c3, seed + 7, a == 3 ? pool : NULL);
        ran += 2;
      }
    /* enough rows and columns for the threads to split */
    u8_case big = {6 * u->mr + 1, 9 * u->nr + 2, 300, 128, true, false, NR_ACT_RELU};
    u8_case_run(t, uk, &big, 77u + (unsigned)uk, pool);
  }
  CHECK(ran >= 32, "only %d cases ran", ran);
  nr_threadpool_destroy(pool);
}

/* ---- the compiler ------------------------------------------------------------------ */

static int c_const(nr_graph *g, const char *name, int rank, const int64_t *dims, float lo,
                   float span, unsigned seed) {
  int t = tg_tensor(g, name, NR_TENSOR_CONST, rank, dims);
  nr_value *v = &g->tensors[t].value;
  nr_value_alloc(v, NR_DTYPE_FLOAT, rank, dims, NULL);
  nr_rng rng = nr_rng_make(seed);
  for (int64_t i = 0; i < nr_value_count(v); i++)
    ((float *)v->data)[i] = lo + span * (float)nr_rng_int(&rng, 0, 999) / 1000.0f;
  return t;
}

/* Conv `name` (k x k, stride, pad k / 2, group) of x with cin -> cout channels. */
static int c_conv(nr_graph *g, const char *name, int x, int64_t cin, int64_t cout, int k,
                  int stride, int group, unsigned seed) {
  char wn[64], bn[64];
  int64_t wd[4] = {cout, cin / group, k, k};
  snprintf(wn, sizeof wn, "%s_w", name);
  snprintf(bn, sizeof bn, "%s_b", name);
  int ins[3] = {x, c_const(g, wn, 4, wd, -0.5f, 1.0f, seed),
                c_const(g, bn, 1, &cout, -0.2f, 0.4f, seed + 1)};
  int y = tg_node(g, "Conv", name, 3, ins);
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, st[2] = {stride, stride};
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "pads", 4, pads, NULL);
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "strides", 2, st, NULL);
  nr_pu_set_attr_int(g, g->n_nodes - 1, "group", group, NULL);
  return y;
}

static int c_relu(nr_graph *g, const char *name, int x) {
  return tg_node(g, "Relu", name, 1, &x);
}

#define N_OUT 4

/* The network (N = 2, 8 x 12 x 12 in):
 *   c1 = relu(conv1x1(x))             read by c2 only                 -> uint8
 *   c2 = relu(conv3x3(c1))            read by c3 and as c3's residual -> fp32
 *   s  = relu(conv1x1(c2) + c2)       read by c4 and c5 (two int8)    -> uint8
 *   c4 = relu(conv3x3 stride 2(s))    read by c6 and an fp32 MaxPool  -> fp32
 *   c5 = relu(grouped conv3x3(s))     read by c7 only                 -> uint8
 *   c7 = conv1x1(c5)                  a graph output, read by c8      -> fp32
 * outputs: c7, c8 = conv1x1(c7), MaxPool(c4), c6 = conv1x1(c4). */
static nr_graph *chain_graph(nr_test_state *t, int64_t *xd) {
  nr_graph *g = tg_graph(13);
  int x = tg_input(g, "x", 4, xd);
  int c1 = c_relu(g, "r1", c_conv(g, "c1", x, 8, 16, 1, 1, 1, 11));
  int c2 = c_relu(g, "r2", c_conv(g, "c2", c1, 16, 16, 3, 1, 1, 13));
  int c3 = c_conv(g, "c3", c2, 16, 16, 1, 1, 1, 15);
  int s = c_relu(g, "r3", tg_node(g, "Add", "add3", 2, (int[]){c3, c2}));
  int c4 = c_relu(g, "r4", c_conv(g, "c4", s, 16, 24, 3, 2, 1, 17));
  int c5 = c_relu(g, "r5", c_conv(g, "c5", s, 16, 16, 3, 1, 4, 19));
  int c7 = c_conv(g, "c7", c5, 16, 8, 1, 1, 1, 21);
  int c8 = c_conv(g, "c8", c7, 8, 8, 1, 1, 1, 23);
  int mp = tg_node(g, "MaxPool", "pool4", 1, &c4);
  int64_t kernel[2] = {2, 2};
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "kernel_shape", 2, kernel, NULL);
  nr_pu_set_attr_ints(g, g->n_nodes - 1, "strides", 2, kernel, NULL);
  int c6 = c_conv(g, "c6", c4, 24, 8, 1, 1, 1, 25);
  int outs[N_OUT] = {c7, c8, mp, c6};
  nr_error err = {0};
  g->outputs = malloc(sizeof outs);
  memcpy(g->outputs, outs, sizeof outs);
  g->n_outputs = N_OUT;
  for (int i = 0; i < N_OUT; i++)
    g->tensors[outs[i]].flags |= NR_TENSOR_OUTPUT;
  nr_status st = nr_graph_toposort(g, &err);
  if (!st)
    st = nr_graph_bind_ops(g, &err);
  if (!st)
    st = nr_graph_infer(g, &err);
  if (!st)
    st = nr_compiler_name_nodes(g, &err);
  CHECK(!st, "building the test graph: %s", err.message);
  if (st) {
    nr_graph_destroy(g);
    return NULL;
  }
  return g;
}

static nr_status observe(void *user, const nr_graph *g, int t, const nr_value *v) {
  nr_error err = {0};
  if (v->dtype != NR_DTYPE_FLOAT || !v->data)
    return NR_OK;
  return nr_calib_observe(user, g->tensors[t].name, v->data, (size_t)nr_value_count(v),
                          &err);
}

/* Under auto, oneDNN's NHWC c7 writes the graph output through a reorder and c8
 * reads the renamed copy 'c7_out.nhwc', which the calibration lookup
 * (plan/quant.c) traces forward to c7_out through that reorder. */
static nr_plan *chain_build(nr_test_state *t, const nr_graph *g, const nr_calib *calib,
                            const char *source, const char *chain) {
  char route[256];
  snprintf(route, sizeof route, "-precision@<Conv>=int8 -precision.int8_source=%s "
           "-quant.chain=%s", source, chain);
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_error err = {0};
  CHECK(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err) &&
            !nr_route_parse(&r, route, &err) && !nr_compile(g, &r, 2, calib, &p, &err),
        "%s: %s", route, err.message);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  return p;
}

/* The dtype of output 0 of the step whose node is called `node`, or UNDEFINED. */
static nr_dtype out_dtype(const nr_plan *p, const char *node) {
  for (int k = 0; k < p->n_steps; k++) {
    const nr_step *st = &p->steps[k];
    if (st->node >= 0 && !strcmp(p->graph->nodes[st->node].name, node))
      return p->slots[st->out[0]].dtype;
  }
  return NR_DTYPE_UNDEFINED;
}

static int count_u8(const nr_plan *p) {
  int n = 0;
  for (int s = 0; s < p->n_slots; s++)
    n += p->slots[s].dtype == NR_DTYPE_UINT8;
  return n;
}

/* Runs engine e on x; out[N_OUT] receives the outputs. */
static bool chain_run(nr_test_state *t, const nr_engine *e, const float *x,
                      const int64_t *xd, nr_buffer *out) {
  nr_buffer in = {NR_DTYPE_FLOAT, 4, {xd[0], xd[1], xd[2], xd[3]}, (void *)x};
  nr_context *c = NULL;
  nr_error err = {0};
  memset(out, 0, sizeof(nr_buffer) * N_OUT);
  bool ok = !nr_context_create(e, 2, &c, &err) && !nr_context_run(c, &in, out, &err);
  CHECK(ok, "%s", err.message);
  nr_context_destroy(c);
  return ok;
}

static bool same_outputs(const nr_buffer *a, const nr_buffer *b, int64_t *bytes) {
  *bytes = 0;
  for (int i = 0; i < N_OUT; i++) {
    int64_t n = (int64_t)sizeof(float);
    for (int d = 0; d < a[i].rank; d++)
      n *= a[i].dims[d];
    *bytes += n;
    if (a[i].rank != b[i].rank || !a[i].data || !b[i].data ||
        memcmp(a[i].data, b[i].data, (size_t)n))
      return false;
  }
  return true;
}

static void free_outputs(nr_buffer *o) {
  for (int i = 0; i < N_OUT; i++)
    nr_buffer_free(&o[i]);
}

/* Where the rules allow uint8. nnroute's convs write it with their residual too;
 * oneDNN's (auto) only without one, so c3's sum stays fp32 there. */
static void check_slots(nr_test_state *t, const nr_plan *on, const char *source) {
  static const struct {
    const char *node;
    bool u8;
  } want[] = {{"c1", true},  {"c2", false}, {"c3", true},  {"c4", false}, {"c5", true},
              {"c7", false}, {"c8", false}, {"c6", false}, {"pool4", false}};
  bool onednn = !strcmp(source, "auto");
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    bool u8 = want[i].u8 && !(onednn && !strcmp(want[i].node, "c3"));
    nr_dtype d = out_dtype(on, want[i].node);
    CHECK(d == (u8 ? NR_DTYPE_UINT8 : NR_DTYPE_FLOAT), "%s: output of %s is %s", source,
          want[i].node, nr_dtype_name(d));
  }
  CHECK(count_u8(on) == (onednn ? 2 : 3), "%s: %d uint8 slots", source, count_u8(on));
}

static void chain_source(nr_test_state *t, const nr_graph *g, const nr_calib *calib,
                         const char *source, const float *x, const int64_t *xd) {
  nr_plan *on = chain_build(t, g, calib, source, "on");
  nr_plan *off = chain_build(t, g, calib, source, "off");
  if (!on || !off) {
    nr_plan_destroy(on), nr_plan_destroy(off);
    return;
  }
  CHECK(count_u8(off) == 0, "%s: quant.chain=off made %d uint8 slots", source,
        count_u8(off));
  check_slots(t, on, source);
  CHECK(on->arena_size <= off->arena_size, "%s: arena %llu > %llu", source,
        (unsigned long long)on->arena_size, (unsigned long long)off->arena_size);
  nr_engine e_on = {.plan = on, .threads = 2}, e_off = {.plan = off, .threads = 2};
  nr_buffer o_on[N_OUT], o_off[N_OUT], o_file[N_OUT];
  int64_t bytes;
  if (chain_run(t, &e_on, x, xd, o_on) && chain_run(t, &e_off, x, xd, o_off))
    CHECK(same_outputs(o_on, o_off, &bytes), "%s: quant.chain=on and off compute otherwise",
          source);
  /* the engine file: uint8 slots saved and loaded, the same bits computed */
  uint8_t *file = NULL;
  size_t len = 0;
  nr_engine *back = NULL;
  nr_error err = {0};
  CHECK(!nr_engine_serialize(&e_on, &file, &len, &err) &&
            !nr_engine_parse(file, len, false, &back, &err),
        "%s: %s", source, err.message);
  if (back) {
    CHECK(count_u8(back->plan) == count_u8(on), "%s: %d uint8 slots after loading",
          source, count_u8(back->plan));
    if (chain_run(t, back, x, xd, o_file))
      CHECK(same_outputs(o_on, o_file, &bytes), "%s: the engine file computes otherwise",
            source);
    free_outputs(o_file);
  }
  free_outputs(o_on), free_outputs(o_off);
  nr_engine_free(back);
  free(file);
  nr_plan_destroy(on), nr_plan_destroy(off);
}

NR_TEST(int8_chain_plans_and_outputs_per_source) {
  int64_t xd[4] = {2, 8, 12, 12};
  nr_graph *g = chain_graph(t, xd);
  REQUIRE(g);
  unsigned seed = 4242;
  float *x = random_floats(2 * 8 * 12 * 12, &seed);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, x);
  nr_value *want = calloc(N_OUT, sizeof *want);
  nr_calib *calib = calloc(1, sizeof *calib);
  nr_error err = {0};
  REQUIRE(!nr_ref_exec_observed(g, &in, want, observe, calib, &err), "%s", err.message);
  /* "onednn" is what auto picks for every conv here, so the knob does not list it */
  const char *sources[] = {"auto", "nnroute"};
  for (int i = 0; i < 2; i++)
    chain_source(t, g, calib, sources[i], x, xd);
  free_values(want, N_OUT);
  nr_calib_destroy(calib);
  free(x);
  nr_graph_destroy(g);
}

/* Across the families: c1 = relu(conv1x1(x)) on nnroute's NHWC kernel, c2 =
 * relu(depthwise conv3x3(c1)) on oneDNN's, c3 = conv1x1(c2) fp32. */
NR_TEST(int8_chain_nnroute_conv_feeds_onednn_depthwise) {
  int64_t xd[4] = {2, 8, 10, 10};
  nr_graph *g = tg_graph(13);
  int x = tg_input(g, "x", 4, xd);
  int c1 = c_relu(g, "r1", c_conv(g, "c1", x, 8, 32, 1, 1, 1, 31));
  int c2 = c_relu(g, "r2", c_conv(g, "c2", c1, 32, 32, 3, 1, 32, 33));
  int y = c_conv(g, "c3", c2, 32, 8, 1, 1, 1, 35);
  REQUIRE(tg_finish(t, g, y));
  unsigned seed = 99;
  float *xin = random_floats(2 * 8 * 10 * 10, &seed);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, xin), want = {0};
  nr_calib *calib = calloc(1, sizeof *calib);
  nr_error err = {0};
  REQUIRE(!nr_ref_exec_observed(g, &in, &want, observe, calib, &err), "%s", err.message);
  const char *routes[2] = {"-precision@c1=int8 -precision@c2=int8 "
                           "-precision.int8_source=nnroute -conv.layout@c1=nhwc",
                           NULL};
  nr_plan *p[2] = {NULL, NULL};
  nr_buffer out[2] = {{0}, {0}};
  for (int i = 0; i < 2; i++) {
    char route[256];
    snprintf(route, sizeof route, "%s -quant.chain=%s", routes[0], i ? "off" : "on");
    nr_knob_space space = {0};
    nr_route r = {0};
    CHECK(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err) &&
              !nr_route_parse(&r, route, &err) && !nr_compile(g, &r, 2, calib, &p[i], &err),
          "%s: %s", route, err.message);
    nr_route_free(&r);
    nr_knob_space_free(&space);
    if (!p[i])
      continue;
    nr_engine e = {.plan = p[i], .threads = 2};
    nr_buffer bin = {NR_DTYPE_FLOAT, 4, {2, 8, 10, 10}, xin};
    nr_context *c = NULL;
    CHECK(!nr_context_create(&e, 2, &c, &err) && !nr_context_run(c, &bin, &out[i], &err),
          "%s", err.message);
    nr_context_destroy(c);
  }
  if (p[0] && p[1]) {
    CHECK(out_dtype(p[0], "c1") == NR_DTYPE_UINT8 && count_u8(p[0]) == 1,
          "c1 writes %s, %d uint8 slots", nr_dtype_name(out_dtype(p[0], "c1")),
          count_u8(p[0]));
    CHECK(count_u8(p[1]) == 0, "quant.chain=off: %d uint8 slots", count_u8(p[1]));
    for (int k = 0; k < p[0]->n_steps; k++) {
      const nr_step *st = &p[0]->steps[k];
      const char *node = st->node >= 0 ? p[0]->graph->nodes[st->node].name : "(reorder)";
      if (!strcmp(node, "c1") || !strcmp(node, "c2"))
        CHECK(!strcmp(st->tactic->source, node[1] == '1' ? "nnroute" : "onednn"),
              "%s runs %s", node, st->tactic->id);
    }
  }
  CHECK(out[0].data && out[1].data &&
            !memcmp(out[0].data, out[1].data, sizeof(float) * 2 * 8 * 10 * 10),
        "quant.chain=on and off compute otherwise");
  nr_buffer_free(&out[0]), nr_buffer_free(&out[1]);
  nr_plan_destroy(p[0]), nr_plan_destroy(p[1]);
  nr_calib_destroy(calib);
  nr_value_free(&want);
  free(xin);
  nr_graph_destroy(g);
}

/* A uint8 slot is what its readers would have quantized: nnroute's qgemm conv with a
 * grid other than the one the pass recorded is refused by prepare() rather than run
 * on wrong bytes. The pass itself never makes one: every reader agrees. Here the
 * readers disagree (one reads through a QDQ-folded grid of its own), so the tensor
 * stays fp32. */
NR_TEST(int8_chain_readers_on_different_grids_keep_fp32) {
  int64_t xd[4] = {1, 8, 12, 12};
  nr_graph *g = chain_graph(t, xd);
  REQUIRE(g);
  /* c4 reads s on the grid of a pre-quantized model (the qdq pass's attributes) */
  for (int k = 0; k < g->n_nodes; k++)
    if (!strcmp(g->nodes[k].name, "c4")) {
      nr_pu_set_attr_float(g, k, "nr_x_scale", 0.5f, NULL);
      nr_pu_set_attr_int(g, k, "nr_x_zero_point", 3, NULL);
    }
  unsigned seed = 7;
  float *x = random_floats(8 * 12 * 12, &seed);
  nr_value in = make_value(NR_DTYPE_FLOAT, 4, xd, x);
  nr_value *want = calloc(N_OUT, sizeof *want);
  nr_calib *calib = calloc(1, sizeof *calib);
  nr_error err = {0};
  REQUIRE(!nr_ref_exec_observed(g, &in, want, observe, calib, &err), "%s", err.message);
  nr_plan *on = chain_build(t, g, calib, "nnroute", "on");
  if (on) {
    CHECK(out_dtype(on, "c3") == NR_DTYPE_FLOAT, "s is %s",
          nr_dtype_name(out_dtype(on, "c3")));
    CHECK(out_dtype(on, "c1") == NR_DTYPE_UINT8 && out_dtype(on, "c5") == NR_DTYPE_UINT8,
          "the other chains stay");
  }
  nr_plan_destroy(on);
  free_values(want, N_OUT);
  nr_calib_destroy(calib);
  free(x);
  nr_graph_destroy(g);
}
