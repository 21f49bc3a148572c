/* test_cuda_half.c - the fp16 pass of CUDA plans (src/backends/cuda/cuda_half.c) on
 * whole compiles, without a GPU: which slots become fp16, which steps move onto their
 * fp16 twins, where casts are inserted, and that fp32 routes are left alone.
 *
 * A CUDA build compiles without a GPU as long as no tactic asks a library for a
 * heuristic at prepare time, so these graphs use MatMul through cuBLAS
 * (cuda.gemm.tactic=cublas) and the project's own kernels only. They run in CI
 * (nvcc, no GPU); without the backend they are skipped. The numbers the kernels
 * compute on fp16 slots are checked on a GPU by tests/gpu/gpu_ops.c. */
#include "unit.h"

#include "compiler/compile.h"
#include "engine/engine_internal.h"
#include "ir/ir.h"
#include "plan/knob.h"
#include "plan/tactic.h"

#include <stdlib.h>
#include <string.h>

#ifdef NR_HAVE_CUDA

#define S 16 /* sequence */
#define E 32 /* width: 2 heads of 16 */

typedef struct net {
  nr_graph *g;
  float *w[4];
} net;

static int tensor(nr_graph *g, const char *name, unsigned flags, int rank, const int64_t *d,
                  void *data) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, rank, {0}, data, false};
  memcpy(g->tensors[t].value.dims, d, sizeof(int64_t) * (size_t)rank);
  return t;
}

static nr_node *node(nr_graph *g, const char *name, const char *op, int opset, int n_in,
                     const int *in, int out) {
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = opset;
  n->inputs = malloc(sizeof(int) * (size_t)n_in);
  memcpy(n->inputs, in, sizeof(int) * (size_t)n_in);
  n->n_inputs = n_in;
  n->outputs = malloc(sizeof(int));
  n->outputs[0] = out;
  n->n_outputs = 1;
  return n;
}

static void attr_int(nr_node *n, const char *name, int64_t v) {
  n->attrs = realloc(n->attrs, sizeof(nr_attr) * (size_t)(n->n_attrs + 1));
  n->attrs[n->n_attrs++] = (nr_attr){.name = strdup(name), .type = NR_ATTR_INT, .i = v};
}

/* x [1,S,E] -> q, k, v = x Wq, x Wk, x Wv -> Attention (2 heads) -> + x -> LayerNorm
 * -> MatMul Wo -> Relu -> y (graph output); and Reshape(q) -> graph output `qr`. */
static bool net_make(nr_test_state *t, net *m) {
  nr_graph *g = m->g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 23;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int64_t xd[3] = {1, S, E}, wd[2] = {E, E}, ed[1] = {E}, shape[2] = {S, E};
  for (int i = 0; i < 4; i++) {
    m->w[i] = malloc(sizeof(float) * E * E);
    for (int j = 0; j < E * E; j++)
      m->w[i][j] = (float)((j * 7 + i) % 13) / 13.0f - 0.5f;
  }
  int x = tensor(g, "x", NR_TENSOR_INPUT, 3, xd, NULL), w[4];
  static const char *const wn[4] = {"wq", "wk", "wv", "wo"};
  for (int i = 0; i < 4; i++)
    w[i] = tensor(g, wn[i], NR_TENSOR_CONST, 2, wd, m->w[i]);
  int sc = tensor(g, "ln_scale", NR_TENSOR_CONST, 1, ed, m->w[0]);
  int sh = nr_graph_add_tensor(g, "shape", NR_TENSOR_CONST);
  g->tensors[sh].value = (nr_value){NR_DTYPE_INT64, 1, {2}, NULL, false};
  g->tensors[sh].value.data = malloc(sizeof shape);
  memcpy(g->tensors[sh].value.data, shape, sizeof shape);
  g->tensors[sh].value.owned = true;
  int q = nr_graph_add_tensor(g, "q", 0), k = nr_graph_add_tensor(g, "k", 0);
  int v = nr_graph_add_tensor(g, "v", 0), a = nr_graph_add_tensor(g, "a", 0);
  int r = nr_graph_add_tensor(g, "r", 0), l = nr_graph_add_tensor(g, "l", 0);
  int o = nr_graph_add_tensor(g, "o", 0);
  int y = nr_graph_add_tensor(g, "y", NR_TENSOR_OUTPUT);
  int qr = nr_graph_add_tensor(g, "qr", NR_TENSOR_OUTPUT);
  node(g, "mq", "MatMul", 13, 2, (int[]){x, w[0]}, q);
  node(g, "mk", "MatMul", 13, 2, (int[]){x, w[1]}, k);
  node(g, "mv", "MatMul", 13, 2, (int[]){x, w[2]}, v);
  nr_node *at = node(g, "att", "Attention", 23, 3, (int[]){q, k, v}, a);
  attr_int(at, "q_num_heads", 2);
  attr_int(at, "kv_num_heads", 2);
  node(g, "res", "Add", 14, 2, (int[]){a, x}, r);
  node(g, "ln", "LayerNormalization", 17, 2, (int[]){r, sc}, l);
  node(g, "mo", "MatMul", 13, 2, (int[]){l, w[3]}, o);
  node(g, "act", "Relu", 14, 1, (int[]){o}, y);
  node(g, "rs", "Reshape", 14, 2, (int[]){q, sh}, qr);
  g->inputs = malloc(sizeof(int));
  g->inputs[g->n_inputs++] = x;
  g->outputs = malloc(sizeof(int) * 2);
  g->outputs[g->n_outputs++] = y;
  g->outputs[g->n_outputs++] = qr;
  nr_error err = {0};
  bool ok = !nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
            !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err);
  CHECK(ok, "building the test graph: %s", err.message);
  return ok;
}

static void net_free(net *m) {
  for (int t = 0; m->g && t < m->g->n_tensors; t++)
    if ((m->g->tensors[t].flags & NR_TENSOR_CONST) && !m->g->tensors[t].value.owned)
      m->g->tensors[t].value.data = NULL; /* ours */
  nr_graph_destroy(m->g);
  for (int i = 0; i < 4; i++)
    free(m->w[i]);
}

static nr_plan *compile(nr_test_state *t, const net *m, const char *route) {
  nr_knob_space space = {0};
  nr_route r = {0};
  nr_error err = {0};
  nr_plan *p = NULL;
  nr_status st = nr_knob_space_build_for(m->g, NR_DEVICE_CUDA, &space, &err);
  if (!st)
    st = nr_route_init(&r, &space, &err);
  if (!st)
    st = nr_route_parse(&r, route, &err);
  if (!st)
    st = nr_compile(m->g, &r, 1, NULL, &p, &err);
  CHECK(!st, "route '%s': %s", route, err.message);
  nr_route_free(&r);
  nr_knob_space_free(&space);
  return st ? NULL : p;
}

/* The step whose node is named name (NULL: none). */
static const nr_step *step_of(const nr_plan *p, const char *name) {
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].node >= 0 && !strcmp(p->graph->nodes[p->steps[k].node].name, name))
      return &p->steps[k];
  return NULL;
}

static int count_tactic(const nr_plan *p, const char *id) {
  int n = 0;
  for (int k = 0; k < p->n_steps; k++)
    n += !strcmp(p->steps[k].tactic->id, id);
  return n;
}

static nr_dtype out_dtype(const nr_plan *p, const nr_step *st) {
  return p->slots[st->out[0]].dtype;
}

#define GEMMS "-cuda.gemm.tactic@*=cublas"

NR_TEST(cuda_half_fp32_route_untouched) {
  net m;
  REQUIRE(net_make(t, &m));
  nr_plan *p = compile(t, &m, GEMMS);
  if (p) {
    for (int s = 0; s < p->n_slots; s++)
      CHECK(p->slots[s].dtype != NR_DTYPE_FLOAT16, "slot '%s' is fp16", p->slots[s].name);
    CHECK(count_tactic(p, "nr_cuda_cast_f16_to_f32") + count_tactic(p, "nr_cuda_cast_f32_to_f16") == 0);
    const nr_step *at = step_of(p, "att");
    CHECK(at && !strcmp(at->tactic->id, "nr_cuda_f32_attention"));
  }
  nr_plan_destroy(p);
  net_free(&m);
}

NR_TEST(cuda_half_activations_between_fp16_steps) {
  net m;
  REQUIRE(net_make(t, &m));
  nr_plan *p = compile(t, &m, "-cuda.precision@*=fp16 " GEMMS);
  if (p) {
    const nr_step *mq = step_of(p, "mq"), *at = step_of(p, "att"), *res = step_of(p, "res");
    const nr_step *ln = step_of(p, "ln"), *rs = step_of(p, "rs");
    REQUIRE(mq && at && res && ln && rs);
    /* products write fp16 (the horizontal pass made one MatMul of q, k, v and a Split,
     * which moves fp16); their readers take it in place */
    CHECK(!strcmp(mq->tactic->id, "cublas_f16_gemm") && out_dtype(p, mq) == NR_DTYPE_FLOAT16);
    CHECK(!strcmp(at->tactic->id, "nr_cuda_f16_attention"), "%s", at->tactic->id);
    for (int i = 0; i < 3; i++)
      CHECK(p->slots[at->in[i]].dtype == NR_DTYPE_FLOAT16);
    CHECK(out_dtype(p, at) == NR_DTYPE_FLOAT16);
    /* the residual add mixes the fp16 attention output with the fp32 graph input */
    CHECK(!strcmp(res->tactic->id, "nr_cuda_f16_eltwise"), "%s", res->tactic->id);
    CHECK(p->slots[res->in[0]].dtype == NR_DTYPE_FLOAT16 &&
          p->slots[res->in[1]].dtype == NR_DTYPE_FLOAT && p->slots[res->in[1]].kind == NR_SLOT_INPUT);
    CHECK(!strcmp(ln->tactic->id, "nr_cuda_f16_layernorm") && out_dtype(p, ln) == NR_DTYPE_FLOAT16);
    CHECK(p->slots[ln->in[1]].dtype == NR_DTYPE_FLOAT, "constants stay fp32");
    /* graph outputs stay fp32: the last product writes fp32, the Reshape into an output
     * reads a converted copy of q */
    for (int i = 0; i < p->n_outputs; i++)
      CHECK(p->slots[p->outputs[i]].dtype == NR_DTYPE_FLOAT);
    CHECK(p->slots[rs->in[0]].dtype == NR_DTYPE_FLOAT && p->slots[rs->in[0]].kind == NR_SLOT_ARENA);
    int k = (int)(rs - p->steps);
    CHECK(k > 0 && !strcmp(p->steps[k - 1].tactic->id, "nr_cuda_cast_f16_to_f32") &&
              p->steps[k - 1].node == -1 && p->steps[k - 1].out[0] == rs->in[0] &&
              !strcmp(p->slots[p->steps[k - 1].in[0]].name, "q") &&
              p->slots[p->steps[k - 1].in[0]].dtype == NR_DTYPE_FLOAT16,
          "the cast of q sits right before the Reshape (step %d of %d)", k, p->n_steps);
    CHECK(count_tactic(p, "nr_cuda_cast_f16_to_f32") == 1, "%d casts to fp32",
          count_tactic(p, "nr_cuda_cast_f16_to_f32"));
    CHECK(count_tactic(p, "nr_cuda_cast_f32_to_f16") == 0);
    /* every fp16 slot has the size of its dtype, and no in-place reuse crosses dtypes */
    for (int s = 0; s < p->n_slots; s++) {
      const nr_slot *sl = &p->slots[s];
      CHECK(sl->nbytes == nr_slot_bytes(sl, sl->layout), "slot '%s'", sl->name);
      if (sl->alias_of >= 0)
        CHECK(p->slots[sl->alias_of].dtype == sl->dtype, "slot '%s' aliases another dtype",
              sl->name);
    }
  }
  nr_plan_destroy(p);
  net_free(&m);
}

NR_TEST(cuda_half_fp32_reader_gets_fp32) {
  /* LayerNorm's output feeds only a MatMul kept at fp32: the LayerNorm (fp16 twin, fp16
   * input) writes fp32 itself, so no cast runs before the MatMul */
  net m;
  REQUIRE(net_make(t, &m));
  nr_plan *p = compile(t, &m, "-cuda.precision@*=fp16 -cuda.precision@mo=fp32 " GEMMS);
  if (p) {
    const nr_step *mo = step_of(p, "mo"), *ln = step_of(p, "ln");
    REQUIRE(mo && ln);
    CHECK(!strncmp(mo->tactic->id, "cublas_f32_gemm", 15), "%s", mo->tactic->id);
    CHECK(!strcmp(ln->tactic->id, "nr_cuda_f16_layernorm"));
    CHECK(p->slots[ln->in[0]].dtype == NR_DTYPE_FLOAT16 && out_dtype(p, ln) == NR_DTYPE_FLOAT);
    CHECK(mo->in[0] == ln->out[0]);
    CHECK(count_tactic(p, "nr_cuda_cast_f16_to_f32") == 1, "only q's copy for the Reshape");
  }
  nr_plan_destroy(p);
  net_free(&m);
}

NR_TEST(cuda_half_only_fp32_readers_keep_fp32) {
  /* q feeds the fp16 attention and the Reshape into a graph output; with attention
   * unable to take fp16 (all other products fp32) nothing pays for fp16 */
  net m;
  REQUIRE(net_make(t, &m));
  nr_plan *p = compile(t, &m, "-cuda.precision@mo=fp16 " GEMMS);
  if (p) {
    const nr_step *mo = step_of(p, "mo"), *at = step_of(p, "att");
    REQUIRE(mo && at);
    CHECK(!strcmp(mo->tactic->id, "cublas_f16_gemm"));
    CHECK(out_dtype(p, mo) == NR_DTYPE_FLOAT, "a graph output stays fp32");
    CHECK(!strcmp(at->tactic->id, "nr_cuda_f32_attention"));
    for (int s = 0; s < p->n_slots; s++)
      CHECK(p->slots[s].dtype != NR_DTYPE_FLOAT16, "slot '%s' is fp16", p->slots[s].name);
  }
  nr_plan_destroy(p);
  net_free(&m);
}

/* An engine file keeps the fp16 slots and finds the twins and casts again by id. */
NR_TEST(cuda_half_engine_file_round_trip) {
  net m;
  REQUIRE(net_make(t, &m));
  nr_engine *e = calloc(1, sizeof *e);
  REQUIRE(e);
  e->plan = compile(t, &m, "-cuda.precision@*=fp16 " GEMMS);
  if (e->plan) {
    nr_fingerprint_current_for(&e->fingerprint, NR_DEVICE_CUDA);
    snprintf(e->nnroute_version, sizeof e->nnroute_version, "%s", NR_VERSION_STRING);
    nr_knob_schema(e->knob_schema);
    nr_error err = {0};
    uint8_t *data = NULL;
    size_t len = 0;
    nr_engine *back = NULL;
    REQUIRE(!nr_engine_serialize(e, &data, &len, &err), "%s", err.message);
    CHECK(!nr_engine_parse(data, len, false, &back, &err), "%s", err.message);
    const nr_plan *a = e->plan, *b = back ? back->plan : NULL;
    CHECK(b && b->n_slots == a->n_slots && b->n_steps == a->n_steps);
    for (int s = 0; b && s < a->n_slots && s < b->n_slots; s++)
      CHECK(a->slots[s].dtype == b->slots[s].dtype && a->slots[s].nbytes == b->slots[s].nbytes,
            "slot %d '%s'", s, a->slots[s].name);
    for (int k = 0; b && k < a->n_steps && k < b->n_steps; k++)
      CHECK(b->steps[k].tactic && !strcmp(a->steps[k].tactic->id, b->steps[k].tactic->id) &&
                b->steps[k].tactic->precision == a->steps[k].tactic->precision,
            "step %d: %s", k, a->steps[k].tactic->id);
    nr_engine_free(back);
    free(data);
  }
  nr_engine_free(e);
  net_free(&m);
}

#endif
