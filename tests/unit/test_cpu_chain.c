/* test_cpu_chain.c - the fast EltwiseChain tactics (nr_f32_vchain__{avx2,portable})
 * against the reference EltwiseChain kernel, on the mixes real models fuse (the
 * HardSwish, SiLU and GELU decompositions, Clip with constant bounds, Div and Pow by
 * constants, the chain-only ops) with side operands broadcast over every axis and
 * sizes around the kernel's tile; then the eltwise_fuse pass end to end: it fuses
 * only where a fast tactic runs the chain, and the built engine matches the unfused
 * graph on the reference executor with no step on the reference tactic.
 *
 * Tactics run through cpuop.h's harness (guard bytes around every buffer); data
 * comes from printed seeds. */
#include "cpuop.h"
#include "engine/engine.h"
#include "graph_build.h"
#include "ir/fused.h"
#include "kernels/ref/executor.h"
#include "plan/pass.h"
#include "rng.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSTEPS 8

/* One chain: steps "Op" or "Op@k" (binary, operand input k) or "Op@k~" (swapped),
 * with two params each. */
typedef struct chain_spec {
  const char *name;
  const char *steps[MAXSTEPS];
  float params[2 * MAXSTEPS];
  double rtol, atol; /* atol 0: 1e-6 */
} chain_spec;

static int spec_steps(const chain_spec *c, char **ops, int64_t *operand, int64_t *swapped) {
  int n = 0;
  for (; n < MAXSTEPS && c->steps[n]; n++) {
    const char *at = strchr(c->steps[n], '@');
    size_t len = at ? (size_t)(at - c->steps[n]) : strlen(c->steps[n]);
    ops[n] = strndup(c->steps[n], len);
    operand[n] = at ? at[1] - '0' : -1;
    swapped[n] = at && at[2] == '~';
  }
  return n;
}

/* Runs chain c on inputs of the given shapes (input 1.. constant when consts[k])
 * through both ISAs and compares with the reference. */
static void check_chain(nr_test_state *t, const chain_spec *c, int n_in, const int *ranks,
                        const int64_t (*dims)[4], const bool *consts, int out_rank,
                        const int64_t *out_dims, nr_threadpool *pool) {
  char *ops[MAXSTEPS];
  int64_t operand[MAXSTEPS], swapped[MAXSTEPS];
  int n = spec_steps(c, ops, operand, swapped);
  nr_attr attrs[4] = {{.name = "ops", .type = NR_ATTR_STRINGS, .n = (size_t)n, .strings = ops},
                      {.name = "operand", .type = NR_ATTR_INTS, .n = (size_t)n, .ints = operand},
                      {.name = "swapped", .type = NR_ATTR_INTS, .n = (size_t)n, .ints = swapped},
                      {.name = "params", .type = NR_ATTR_FLOATS, .n = 2 * (size_t)n,
                       .floats = (float *)c->params}};
  unsigned seed = (unsigned)(strlen(c->name) * 131 + (unsigned)out_dims[out_rank - 1]), s0 = seed;
  nr_value vin[MAXIO];
  const nr_value *ins[MAXIO];
  for (int k = 0; k < n_in; k++) {
    int64_t cnt = 1;
    for (int d = 0; d < ranks[k]; d++)
      cnt *= dims[k][d];
    vin[k] = cpuop_fval(ranks[k], dims[k], nr_rng_floats_u32(cnt ? cnt : 1, &seed, -3, 3));
    ins[k] = &vin[k];
  }
  nr_value yo = cpuop_fval(out_rank, out_dims, NULL);
  int64_t count = 1;
  for (int d = 0; d < out_rank; d++)
    count *= out_dims[d];
  static const char *const isas[] = {"nr_f32_vchain__avx2", "nr_f32_vchain__portable"};
  for (int k = 0; k < 2; k++) {
    cpuop o;
    nr_status st = cpuop_init(&o, "nnroute.EltwiseChain", 1, 4, attrs, n_in, ins, consts, 1,
                              &yo, "");
    CHECK(!st, "%s: init: %s", c->name, o.err.message);
    if (!st && cpuop_supports(&o, isas[k])) {
      bool guards;
      nr_value ref;
      st = cpuop_run(&o, pool, &guards);
      CHECK(!st && guards, "%s %s seed=%u: run %d (%s) guards %d", isas[k], c->name, s0, st,
            o.err.message, guards);
      REQUIRE(!cpuop_ref(&o, 4, attrs, &ref), "ref: %s", o.err.message);
      double e = cpuop_err(o.out[0].data, ref.data, count, c->atol ? c->atol : 1e-6,
                          c->rtol);
      CHECK(e <= 1.0, "%s %s (%lld elements) seed=%u: error %.3g of tolerance", isas[k],
            c->name, (long long)count, s0, e);
      nr_value_free(&ref);
    } else if (!st) {
      CHECK(k == 0 && !(nr_cpu_isa() & NR_ISA_AVX2), "%s does not run %s", isas[k], c->name);
    }
    cpuop_free(&o);
  }
  for (int k = 0; k < n_in; k++)
    free(vin[k].data);
  for (int s = 0; s < n; s++)
    free(ops[s]);
}

static const chain_spec CHAINS[] = {
    /* x * clip(x + c1, 0, 6) / c2: HardSwish as exporters write it */
    {"hardswish", {"Add@1", "Clip", "Mul@0", "Div@2"}, {0, 0, 0, 6, 0, 0, 0, 0}, 2e-6},
    {"hardswish_op", {"HardSwish", "HardSigmoid", "Mul@1"}, {0, 0, 0.2f, 0.5f}, 2e-6},
    {"silu", {"Sigmoid", "Mul@0"}, {0}, 2e-6},
    /* 0.5 x (1 + erf(x / c1)): GELU from its pieces */
    {"gelu_pieces", {"Div@1", "Erf", "Add@2", "Mul@0", "Mul@2"}, {0}, 2e-6},
    {"gelu", {"Add@1", "Gelu"}, {0, 0, 0, 0}, 2e-6, 3e-6}, /* erf's 4e-7 times x in the tail */
    {"gelu_tanh", {"Mul@1", "Gelu"}, {0, 0, 1, 0}, 2e-6, 3e-6},
    {"pow_const", {"Pow@1", "Sub@2~", "Tanh", "Exp"}, {0}, 2e-6},
    {"pow_general", {"Abs", "Pow@1", "Pow@2~"}, {0}, 2e-6},
    {"extras", {"Max@1", "Min@2", "PRelu@1", "Abs", "Log", "Softplus"}, {0}, 2e-6},
    {"extras2", {"Elu", "Reciprocal", "Floor", "Neg", "Ceil", "LeakyRelu", "Relu", "Sqrt"},
     {1.3f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.1f, 0, 0, 0, 0, 0}, 2e-6},
};
#define NCHAINS (int)(sizeof CHAINS / sizeof CHAINS[0])

/* Operand shapes broadcasting over each axis of X0 [2, 3, R, W]. */
NR_TEST(cpu_chain_matches_reference) {
  nr_threadpool *pool = nr_threadpool_create(2);
  static const int64_t rows[] = {1, 5, 40};
  static const int64_t widths[] = {1, 7, 8, 9, 33, 600};
  for (int c = 0; c < NCHAINS; c++)
    for (int r = 0; r < 3; r++)
      for (int w = 0; w < 6; w++) {
        int64_t R = rows[r], W = widths[w];
        int64_t dims[3][4] = {{2, 3, R, W}, {3, 1, 1}, {1}};
        int ranks[3] = {4, 3, 0};
        bool consts[3] = {false, true, true};
        int64_t y[4] = {2, 3, R, W};
        check_chain(t, &CHAINS[c], 3, ranks, (const int64_t(*)[4])dims, consts, 4, y, pool);
        int64_t d2[3][4] = {{2, 3, R, W}, {1, 1, W}, {2, 1, R, 1}}; /* last, middle axes */
        ranks[1] = 3, ranks[2] = 4;
        consts[1] = consts[2] = false;
        check_chain(t, &CHAINS[c], 3, ranks, (const int64_t(*)[4])d2, consts, 4, y, pool);
      }
  nr_threadpool_destroy(pool);
}

/* X0 itself broadcast: the running value starts as a repeated element. */
NR_TEST(cpu_chain_broadcast_x0) {
  nr_threadpool *pool = nr_threadpool_create(2);
  int64_t dims[3][4] = {{3, 1, 700}, {2, 3, 5, 700}, {1}};
  int ranks[3] = {3, 4, 0};
  bool consts[3] = {false, false, true};
  int64_t y[4] = {2, 3, 5, 700};
  for (int c = 0; c < NCHAINS; c++)
    check_chain(t, &CHAINS[c], 3, ranks, (const int64_t(*)[4])dims, consts, 4, y, pool);
  int64_t d1[3][4] = {{1}, {4, 9000}, {4, 1}};
  int r1[3] = {0, 2, 2};
  int64_t y1[2] = {4, 9000}; /* 36000 elements: split over the pool */
  for (int c = 0; c < NCHAINS; c++)
    check_chain(t, &CHAINS[c], 3, r1, (const int64_t(*)[4])d1, consts, 2, y1, pool);
  nr_threadpool_destroy(pool);
}

/* ---- the pass and the engine ------------------------------------------------------- */

extern const nr_pass nr_pass_eltwise_fuse;

/* x -> Add 3 -> Clip [0, 6] (constant inputs) -> Mul x -> Div 6 -> Pow 2 -> Mul b, with b
 * [C, 1, 1]. */
static nr_graph *chain_graph(nr_test_state *t, int64_t c, int64_t hw) {
  static float three = 3, zero = 0, six = 6, two = 2;
  static float bvals[64];
  for (int i = 0; i < 64; i++)
    bvals[i] = 0.1f * (float)(i % 9) - 0.4f;
  nr_graph *g = tg_graph(13);
  int64_t xd[4] = {1, c, hw, hw}, bd[3] = {c, 1, 1};
  int x = tg_input(g, "x", 4, xd);
  int v = tg_node(g, "Add", "add", 2, (int[]){x, tg_borrowed(g, "three", 0, NULL, &three)});
  v = tg_node(g, "Clip", "clip", 3, (int[]){v, tg_borrowed(g, "lo", 0, NULL, &zero),
                                             tg_borrowed(g, "hi", 0, NULL, &six)});
  v = tg_node(g, "Mul", "mulx", 2, (int[]){v, x});
  v = tg_node(g, "Div", "div", 2, (int[]){v, tg_borrowed(g, "six", 0, NULL, &six)});
  v = tg_node(g, "Pow", "pow", 2, (int[]){v, tg_borrowed(g, "two", 0, NULL, &two)});
  v = tg_node(g, "Mul", "mulb", 2, (int[]){v, tg_borrowed(g, "b", 3, bd, bvals)});
  return tg_finish(t, g, v) ? g : NULL;
}

static int count_op(const nr_graph *g, const char *op) {
  int n = 0;
  for (int k = 0; k < g->n_nodes; k++)
    n += !strcmp(g->nodes[k].op_type, op);
  return n;
}

/* The pass keeps a chain only where a fast tactic of the build's device runs it: a
 * CPU build has one; a device without tactics for it (CUDA in a CPU-only build) keeps
 * the ops apart. */
NR_TEST(cpu_chain_fused_only_where_fast) {
  nr_graph *g = chain_graph(t, 3, 4);
  REQUIRE(g, "graph");
  nr_error err = {0};
  nr_knob_space space;
  nr_route r = {0};
  REQUIRE(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err), "%s",
          err.message);
  CHECK(nr_node_has_fast_tactic(g, &g->nodes[0], NR_DEVICE_CPU), "Add has a fast tactic");
  for (int dev = 0; dev < 2; dev++) {
    nr_graph *c = NULL;
    REQUIRE(!nr_graph_clone(g, NULL, &c, &err), "%s", err.message);
    nr_compile_ctx ctx = {.graph = c, .route = &r, .threads = 1, .err = &err,
                          .device = dev ? NR_DEVICE_CUDA : NR_DEVICE_CPU};
    CHECK(!nr_pass_eltwise_fuse.run(&ctx), "%s", err.message);
#ifdef NR_HAVE_CUDA
    bool fast = true;
#else
    bool fast = dev == 0;
#endif
    CHECK(count_op(c, "EltwiseChain") == (fast ? 1 : 0), "device %d: %d chains", dev,
          count_op(c, "EltwiseChain"));
    CHECK(count_op(c, "Pow") == (fast ? 0 : 1), "device %d: Pow kept %d", dev,
          count_op(c, "Pow"));
    nr_graph_destroy(c);
  }
  nr_route_free(&r);
  nr_knob_space_free(&space);
  nr_graph_destroy(g);
}

/* The default build runs the chain on the fast tactic, nothing on the reference one,
 * and matches the unfused graph on the reference executor. */
NR_TEST(cpu_chain_engine_matches_unfused) {
  nr_graph *g = chain_graph(t, 16, 24);
  REQUIRE(g, "graph");
  nr_error err = {0};
  int64_t xd[4] = {1, 16, 24, 24}, n = 16 * 24 * 24;
  unsigned seed = 17;
  float *x = nr_rng_floats_u32(n, &seed, -5, 5);
  nr_value in = cpuop_fval(4, xd, x), want = {0};
  REQUIRE(!nr_ref_exec(g, &in, &want, &err), "%s", err.message);
  tg_built b;
  REQUIRE(!tg_compile(g, "", 2, NULL, &b, &err), "%s", err.message);
  nr_engine e = {.plan = b.plan, .threads = 2};
  CHECK(nr_engine_reference_steps(&e) == 0, "%d steps on the reference tactic",
        nr_engine_reference_steps(&e));
  bool chain = false;
  for (int k = 0; k < nr_engine_step_count(&e); k++) {
    nr_step_info s;
    REQUIRE(!nr_engine_step_info(&e, k, &s), "step %d", k);
    chain |= !strcmp(s.op_type, "EltwiseChain") && !strncmp(s.tactic, "nr_f32_vchain__", 15);
  }
  CHECK(chain, "no EltwiseChain step on nr_f32_vchain");
  CHECK(nr_engine_step_info(&e, -1, &(nr_step_info){0}) == NR_ERR_INVALID_ARGUMENT, "index");
  nr_context *ctx = NULL;
  nr_buffer bi = {NR_DTYPE_FLOAT, 4, {1, 16, 24, 24}, x}, bo = {0};
  REQUIRE(!nr_context_create(&e, 2, &ctx, &err), "%s", err.message);
  CHECK(!nr_context_run(ctx, &bi, &bo, &err), "%s", err.message);
  double worst = bo.data ? cpuop_err(bo.data, want.data, n, 1e-5, 1e-5) : INFINITY;
  CHECK(worst <= 1.0, "engine vs reference: %.3g of tolerance (seed 17)", worst);
  nr_buffer_free(&bo);
  nr_context_destroy(ctx);
  nr_value_free(&want);
  tg_built_free(&b);
  nr_graph_destroy(g);
  free(x);
}
