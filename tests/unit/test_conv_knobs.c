/* test_conv_knobs.c - the conv family's per-node tuning knobs (conv.gemm_kc/mc/nc,
 * conv.ukernel, conv.prepack, conv.epilogue, conv.winograd_from, conv.threads).
 *
 * For a few real shapes (resnet's 3x3 64ch, a 1x1 256->64, a FusedConv with residual
 * and relu), a one-node graph gives the knob space; every listed value of every conv
 * knob is then built the way the compiler does (heuristic pick among the supporting
 * tactics under the route, prepare) and run on a 2-thread pool with guard bytes. Each
 * result must match the reference executor within the knob's error bound (relative
 * L2), and each non-default value must leave a different step (tactic, params,
 * threads or packed data) than the default route: no dead values.
 *
 * On AVX-512 machines a 3x3 node's default is nr_f32_conv_igemm__avx512 and a 1x1
 * node's nr_f32_conv_pw__avx512, on AVX2 machines (NNROUTE_ISA=avx2) a 3x3 node's is
 * nr_f32_conv_igemm__avx2 and a 1x1 node's nr_f32_conv_pw__avx2; none of them has a GEMM: there the GEMM knobs must not be
 * listed (they would be dead values), and conv.algo must offer im2col, the GEMM the
 * knobs act on. */
#include "ir/fused.h"
#include "kernels/act.h"
#include "kernels/cpu/conv/conv_internal.h"
#include "plan/route.h"
#include "plan/tactic.h"
#include "op_test.h"
#include "util/threadpool.h"
#include "unit.h"

extern const nr_tactic nr_tactics_conv[];

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
static const float SENTINEL = -9876.5f;

typedef struct kcase {
  const char *what;
  int c, h, w, m, k, pad;
  bool bias, res;
  nr_act act;             /* FusedConv when res or act */
  const char *must_list;  /* knobs the case must list, space separated */
} kcase;

static const kcase cases[] = {
    {"resnet 3x3 64->64", 64, 28, 28, 64, 3, 1, true, false, NR_ACT_NONE,
     "conv.gemm_kc conv.gemm_mc conv.gemm_nc conv.ukernel conv.prepack conv.epilogue "
     "conv.winograd_from conv.threads"},
    {"1x1 256->64", 256, 28, 28, 64, 1, 0, true, false, NR_ACT_NONE,
     "conv.gemm_kc conv.gemm_mc conv.gemm_nc conv.ukernel conv.prepack conv.epilogue conv.threads"},
    {"3x3 32->48 residual+relu", 32, 10, 12, 48, 3, 1, true, true, NR_ACT_RELU,
     "conv.gemm_kc conv.ukernel conv.prepack conv.epilogue conv.winograd_from "
     "conv.threads"},
};

static const char *const conv_knobs[] = {"conv.gemm_kc", "conv.gemm_mc", "conv.gemm_nc",
                                         "conv.ukernel", "conv.prepack", "conv.epilogue",
                                         "conv.winograd_from", "conv.threads"};

static float *guarded(int64_t n) { return guarded_floats(n, GUARD, SENTINEL); }
static bool guard_ok(const float *p, int64_t n) { return guard_intact(p, n, GUARD, SENTINEL); }

static bool fused(const kcase *k) { return k->res || k->act != NR_ACT_NONE; }
static int64_t out_hw(const kcase *k, int d) { return (d ? k->w : k->h) + 2 * k->pad - k->k + 1; }

/* Everything one case needs: graph (knob space), hand-built plan of one step. */
typedef struct fixture {
  nr_graph *g;
  nr_attr attrs[4];
  int64_t pads[4];
  nr_plan plan;
  nr_slot slots[5];
  nr_step step;
  float *x, *w, *b, *r, *want;
  int64_t xn, yn, yd[4];
} fixture;

static int add_tensor(nr_graph *g, const char *name, unsigned flags, int rank,
                      const int64_t *dims) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = make_value(NR_DTYPE_FLOAT, rank, dims, NULL);
  return t;
}

static void build_graph(fixture *f, const kcase *k) {
  int64_t xd[4] = {1, k->c, k->h, k->w}, wd[4] = {k->m, k->c, k->k, k->k}, bd[1] = {k->m};
  nr_graph *g = f->g = nr_graph_create(NULL);
  int ins[4] = {add_tensor(g, "X", NR_TENSOR_INPUT, 4, xd),
                add_tensor(g, "W", NR_TENSOR_CONST, 4, wd),
                k->bias ? add_tensor(g, "B", NR_TENSOR_CONST, 1, bd) : -1,
                k->res ? add_tensor(g, "R", NR_TENSOR_INPUT, 4, f->yd) : -1};
  int y = add_tensor(g, "Y", NR_TENSOR_OUTPUT, 4, f->yd);
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup("conv");
  n->op_type = strdup(fused(k) ? "FusedConv" : "Conv");
  n->domain = strdup(fused(k) ? NR_DOMAIN : "");
  n->opset = fused(k) ? 1 : 13;
  n->n_inputs = fused(k) ? 4 : 3;
  n->inputs = malloc(sizeof(int) * 4);
  memcpy(n->inputs, ins, sizeof ins);
  n->n_outputs = 1;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = y;
  for (int i = 0; i < 4; i++)
    f->pads[i] = k->pad;
  f->attrs[0] = attr_ints("pads", 4, f->pads);
  f->attrs[1] = attr_i("group", 1);
  f->attrs[2] = attr_s("activation", nr_act_name(k->act));
  n->attrs = f->attrs; /* borrowed: detached before nr_graph_destroy */
  n->n_attrs = fused(k) ? 3 : 2;
}

/* Reference: Conv through the reference executor, then residual and activation. */
static bool reference(fixture *f, const kcase *k) {
  int64_t xd[4] = {1, k->c, k->h, k->w}, wd[4] = {k->m, k->c, k->k, k->k}, bd[1] = {k->m};
  nr_value vx = make_value(NR_DTYPE_FLOAT, 4, xd, f->x), vw = make_value(NR_DTYPE_FLOAT, 4, wd, f->w);
  nr_value vb = make_value(NR_DTYPE_FLOAT, 1, bd, f->b), out;
  const nr_value *in[3] = {&vx, &vw, k->bias ? &vb : NULL};
  nr_error err = {0};
  if (run_one("Conv", 13, 1, f->attrs, k->bias ? 3 : 2, in, &out, &err))
    return false;
  memcpy(f->want, out.data, sizeof(float) * (size_t)f->yn);
  nr_value_free(&out);
  for (int64_t i = 0; k->res && i < f->yn; i++)
    f->want[i] += f->r[i];
  nr_act_apply(k->act, 0.0f, 0.0f, f->want, f->yn);
  return true;
}

static void build_plan(fixture *f, const kcase *k) {
  nr_plan *p = &f->plan;
  nr_slot *s = f->slots;
  const nr_graph *g = f->g;
  /* slots in the order X, W, B, R, Y whatever the tensor indices */
  const nr_node *n = &g->nodes[0];
  nr_step *st = &f->step;
  st->node = 0;
  st->n_in = n->n_inputs;
  st->n_out = 1;
  for (int i = 0; i < 4; i++) {
    st->in[i] = i < n->n_inputs && n->inputs[i] >= 0 ? i : -1;
    if (st->in[i] >= 0) {
      const nr_tensor *t = &g->tensors[n->inputs[i]];
      s[i] = (nr_slot){.name = t->name, .dtype = NR_DTYPE_FLOAT, .rank = t->value.rank,
                       .kind = (t->flags & NR_TENSOR_CONST) ? NR_SLOT_CONST : NR_SLOT_ARENA};
      memcpy(s[i].dims, t->value.dims, sizeof s[i].dims);
    }
  }
  s[4] = (nr_slot){.name = "Y", .dtype = NR_DTYPE_FLOAT, .rank = 4};
  memcpy(s[4].dims, f->yd, sizeof f->yd);
  st->out[0] = 4;
  int64_t wn = (int64_t)k->m * k->c * k->k * k->k;
  nr_plan_add_weights(p, f->w, sizeof(float) * (size_t)wn, &s[1].offset, NULL);
  if (k->bias)
    nr_plan_add_weights(p, f->b, sizeof(float) * (size_t)k->m, &s[2].offset, NULL);
  p->slots = s;
  p->n_slots = 5;
  p->graph = f->g;
}

/* What the route makes of the step: select.c's heuristic (no restricting knob is
 * set here), then prepare(). */
typedef struct built {
  const nr_tactic *tactic;
  nr_step step;
  uint64_t weights_mark;
} built;

static bool build_step(fixture *f, const nr_route *r, built *out, nr_error *err) {
  nr_tactic_ctx c = {&f->plan, &f->g->nodes[0], &f->step, r, err};
  const nr_tactic *best = NULL;
  for (const nr_tactic *t = nr_tactics_conv; t->id; t++)
    if (!(t->isa & ~nr_cpu_isa()) && !strcmp(t->op_type, f->g->nodes[0].op_type) &&
        t->supports(&c) && (!best || t->priority > best->priority))
      best = t;
  if (!best)
    return false;
  out->weights_mark = f->plan.weights_size;
  nr_step st = f->step;
  st.tactic = best;
  c.step = &st;
  if (best->prepare(&c, &f->plan, &st))
    return false;
  out->tactic = best;
  out->step = st;
  return true;
}

/* Runs the built step (in the tactic's layout); relative L2 error against want. */
static double run_step(nr_test_state *t, fixture *f, const kcase *k, built *b,
                       nr_threadpool *pool, const char *label) {
  nr_layout l = b->tactic->layout;
  nr_slot sl[5];
  memcpy(sl, f->slots, sizeof sl);
  sl[0].layout = sl[3].layout = sl[4].layout = l;
  float *px = guarded(f->xn), *pr = guarded(f->yn), *py = guarded(f->yn);
  float *back = malloc(sizeof(float) * (size_t)f->yn);
  int64_t sfl = (int64_t)(b->step.scratch / 4 + 1);
  float *scratch = guarded(sfl);
  nr_reorder_f32(f->x, NR_LAYOUT_PLAIN, px, l, sl[0].dims, NULL);
  nr_reorder_f32(f->r, NR_LAYOUT_PLAIN, pr, l, f->yd, NULL);
  void *in[4] = {px, f->plan.weights + sl[1].offset,
                 k->bias ? f->plan.weights + sl[2].offset : NULL, k->res ? pr : NULL};
  void *out[1] = {py};
  const nr_slot *ins[4] = {&sl[0], &sl[1], k->bias ? &sl[2] : NULL, k->res ? &sl[3] : NULL};
  const nr_slot *outs[1] = {&sl[4]};
  nr_error err = {0};
  nr_exec_args a = {&f->plan, &b->step, &f->g->nodes[0], in, out, ins, outs,
                    b->step.packed_size ? f->plan.weights + b->step.packed_offset : NULL,
                    scratch, pool, &err};
  CHECK(b->tactic->run(&a) == NR_OK, "%s %s: run failed", k->what, label);
  CHECK(guard_ok(py, f->yn) && guard_ok(px, f->xn) && guard_ok(pr, f->yn) &&
            guard_ok(scratch, sfl),
        "%s %s (%s): wrote past a buffer", k->what, label, b->tactic->id);
  nr_reorder_f32(py, l, back, NR_LAYOUT_PLAIN, f->yd, NULL);
  double num = 0, den = 0;
  for (int64_t i = 0; i < f->yn; i++) {
    double d = (double)back[i] - f->want[i];
    num += isfinite(d) ? d * d : 1e30;
    den += (double)f->want[i] * f->want[i];
  }
  free(px), free(pr), free(py), free(back), free(scratch);
  return sqrt(num / (den > 0 ? den : 1));
}

static bool same_step(const built *a, const built *b) {
  return a->tactic == b->tactic && a->step.threads == b->step.threads &&
         a->step.packed_size == b->step.packed_size && a->step.scratch == b->step.scratch &&
         !memcmp(a->step.params, b->step.params, sizeof a->step.params);
}

/* The default tactic of the case is igemm, pw or the AVX-512 Winograd (no GEMM knobs)
 * on this machine. */
static bool igemm_default(const kcase *k) {
  return (nr_cpu_isa() & (NR_ISA_AVX512 | NR_ISA_AVX2)) != 0;
}
/* conv.winograd_from=auto puts the case on the AVX-512 Winograd F(4,3): 3x3 stride 1,
 * 16+ input channels, 400+ output pixels. */
static bool wino_default(const kcase *k) {
  return (nr_cpu_isa() & NR_ISA_AVX512) && k->k == 3 && k->c >= 16 && out_hw(k, 0) * out_hw(k, 1) >= 400;
}
/* GEMM knobs the default tactic does not take: pw (1x1) takes conv.epilogue. */
static bool is_gemm_knob(const kcase *k, const char *name) {
  return !strncmp(name, "conv.gemm_", 10) || !strcmp(name, "conv.ukernel") ||
         !strcmp(name, "conv.prepack") || (!strcmp(name, "conv.epilogue") && k->k > 1);
}

static void check_listed(nr_test_state *t, const nr_knob_space *sp, const kcase *k) {
  for (size_t i = 0; i < sizeof conv_knobs / sizeof conv_knobs[0]; i++) {
    char id[64];
    snprintf(id, sizeof id, "%s@conv", conv_knobs[i]);
    bool want = strstr(k->must_list, conv_knobs[i]) != NULL &&
                !(igemm_default(k) && is_gemm_knob(k, conv_knobs[i]));
    CHECK((nr_knob_space_find(sp, id) >= 0) == want, "%s: %s %s listed", k->what, id,
          want ? "not" : "wrongly");
  }
}

static void run_case(nr_test_state *t, const kcase *k, unsigned seed, nr_threadpool *pool) {
  fixture f;
  memset(&f, 0, sizeof f);
  f.yd[0] = 1, f.yd[1] = k->m, f.yd[2] = out_hw(k, 0), f.yd[3] = out_hw(k, 1);
  f.xn = (int64_t)k->c * k->h * k->w;
  f.yn = f.yd[1] * f.yd[2] * f.yd[3];
  unsigned sd = seed;
  f.x = random_floats(f.xn, &sd);
  f.w = random_floats((int64_t)k->m * k->c * k->k * k->k, &sd);
  f.b = random_floats(k->m, &sd);
  f.r = random_floats(f.yn, &sd);
  f.want = malloc(sizeof(float) * (size_t)f.yn);
  build_graph(&f, k);
  nr_knob_space sp = {0};
  nr_route r = {0};
  nr_error err = {0};
  REQUIRE(reference(&f, k), "%s: reference failed, seed %u", k->what, seed);
  REQUIRE(nr_knob_space_build(f.g, &sp, &err) == NR_OK, "%s", err.message);
  check_listed(t, &sp, k);
  build_plan(&f, k);
  built dflt;
  REQUIRE(nr_route_init(&r, &sp, &err) == NR_OK, "%s", err.message);
  REQUIRE(build_step(&f, &r, &dflt, &err), "%s: default route: %s", k->what, err.message);
  double e0 = run_step(t, &f, k, &dflt, pool, "default");
  if (igemm_default(k)) {
    bool a512 = nr_cpu_isa() & NR_ISA_AVX512;
    CHECK(!strcmp(dflt.tactic->id, wino_default(k) ? "nr_f32_conv_winograd_f43__avx512"
                                   : k->k > 1 && a512 ? "nr_f32_conv_igemm__avx512"
                                   : k->k > 1         ? "nr_f32_conv_igemm__avx2"
                                   : a512             ? "nr_f32_conv_pw__avx512"
                                                      : "nr_f32_conv_pw__avx2"),
          "%s: default is %s", k->what, dflt.tactic->id);
    int ai = nr_knob_space_find(&sp, "conv.algo@conv");
    bool im2col = false;
    for (int v = 0; ai >= 0 && v < sp.inst[ai].n_values; v++)
      im2col |= !strcmp(sp.inst[ai].values[v], "im2col");
    CHECK(im2col, "%s: conv.algo does not offer im2col", k->what);
  }
  CHECK(e0 <= 1e-5, "%s: default route error %g, seed %u", k->what, e0, seed);
  int tried = 0;
  for (int i = 0; i < sp.n; i++) {
    const nr_knob_inst *ki = &sp.inst[i];
    if (strncmp(ki->id, "conv.", 5) || !strcmp(ki->def->name, "conv.algo") ||
        !strcmp(ki->def->name, "conv.layout"))
      continue;
    for (int v = 0; v < ki->n_values; v++) {
      if (v == ki->dflt)
        continue;
      char label[160];
      snprintf(label, sizeof label, "-%s=%s", ki->id, ki->values[v]);
      nr_route_free(&r);
      REQUIRE(nr_route_init(&r, &sp, &err) == NR_OK, "%s", err.message);
      REQUIRE(nr_route_parse(&r, label, &err) == NR_OK, "%s: %s", label, err.message);
      built b;
      if (!build_step(&f, &r, &b, &err)) {
        CHECK(false, "%s %s: build failed: %s", k->what, label, err.message);
        continue;
      }
      CHECK(!same_step(&b, &dflt), "%s %s: step equals the default route's (dead value)",
            k->what, label);
      double e = run_step(t, &f, k, &b, pool, label);
      double bound = 1e-5 + ki->def->error_bound;
      CHECK(e <= bound, "%s %s (%s): relative L2 error %g over %g, seed %u", k->what,
            label, b.tactic->id, e, bound, seed);
      if (!strcmp(ki->def->name, "conv.prepack"))
        CHECK(b.step.packed_size == 0 && dflt.step.packed_size > 0 &&
                  b.step.scratch > dflt.step.scratch,
              "%s %s: engine still holds packed weights", k->what, label);
      if (!strcmp(ki->def->name, "conv.threads"))
        CHECK(b.step.threads == 1, "%s %s: step->threads %d", k->what, label, b.step.threads);
      if (!strcmp(ki->def->name, "conv.winograd_from")) /* never: off it; else onto it */
        CHECK(!strncmp(b.tactic->id, "nr_f32_conv_winograd", 20) ==
                  !!strcmp(ki->values[v], "never"),
              "%s %s picked %s", k->what, label, b.tactic->id);
      tried++;
      f.plan.weights_size = b.weights_mark; /* drop this build's packed data */
    }
  }
  CHECK(tried >= (igemm_default(k) ? 2 : 8), "%s: only %d knob values tried", k->what,
        tried);
  if (getenv("NR_TEST_VERBOSE"))
    fprintf(stderr, "%-28s %d knob values\n", k->what, tried);
  nr_route_free(&r);
  nr_knob_space_free(&sp);
  free(f.plan.weights);
  f.g->nodes[0].attrs = NULL;
  f.g->nodes[0].n_attrs = 0;
  nr_graph_destroy(f.g);
  free(f.x), free(f.w), free(f.b), free(f.r), free(f.want);
}

NR_TEST(test_conv_knobs_every_value) {
  nr_threadpool *pool = nr_threadpool_create(2);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(t, &cases[i], 4200u + (unsigned)i, pool);
  nr_threadpool_destroy(pool);
}

/* A depthwise node runs the dw kernel: only conv.threads of the new knobs applies. */
NR_TEST(test_conv_knobs_depthwise_lists_threads_only) {
  int64_t xd[4] = {1, 32, 14, 14}, wd[4] = {32, 1, 3, 3}, pads[4] = {1, 1, 1, 1};
  nr_graph *g = nr_graph_create(NULL);
  int x = add_tensor(g, "X", NR_TENSOR_INPUT, 4, xd);
  int w = add_tensor(g, "W", NR_TENSOR_CONST, 4, wd);
  int y = add_tensor(g, "Y", NR_TENSOR_OUTPUT, 4, xd);
  nr_attr at[2] = {attr_ints("pads", 4, pads), attr_i("group", 32)};
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup("dw");
  n->op_type = strdup("Conv");
  n->domain = strdup("");
  n->opset = 13;
  n->n_inputs = 2;
  n->inputs = malloc(sizeof(int) * 2);
  n->inputs[0] = x, n->inputs[1] = w;
  n->n_outputs = 1;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = y;
  n->attrs = at;
  n->n_attrs = 2;
  nr_knob_space sp = {0};
  nr_error err = {0};
  REQUIRE(nr_knob_space_build(g, &sp, &err) == NR_OK, "%s", err.message);
  for (size_t i = 0; i < sizeof conv_knobs / sizeof conv_knobs[0]; i++) {
    char id[64];
    snprintf(id, sizeof id, "%s@dw", conv_knobs[i]);
    bool want = !strcmp(conv_knobs[i], "conv.threads");
    CHECK((nr_knob_space_find(&sp, id) >= 0) == want, "depthwise: %s %s listed", id,
          want ? "not" : "wrongly");
  }
  nr_knob_space_free(&sp);
  g->nodes[0].attrs = NULL;
  g->nodes[0].n_attrs = 0;
  nr_graph_destroy(g);
}
