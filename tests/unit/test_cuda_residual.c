/* test_cuda_residual.c - residual Adds in CUDA plans on whole compiles, without a GPU:
 * which product takes the Add behind it as its residual input (fuse_act, the knob
 * fuse.gemm_act), which pairs it must leave alone, the knob values that keep the
 * Adds, the fp16 pass on the fused step, and an engine file round trip of a step
 * whose inputs have a hole (-1) before the residual.
 *
 * Like test_cuda_half.c the products run through cuBLAS (cuda.gemm.tactic=cublas),
 * whose prepare asks no library, so this runs in CI (nvcc, no GPU); without the
 * backend it is skipped. The numbers are checked on a GPU by tests/gpu/gpu_ops.c
 * (gpu_residual_gemm). */
#include "unit.h"

#include "compiler/compile.h"
#include "engine/engine_internal.h"
#include "ir/ir.h"
#include "plan/knob.h"
#include "plan/tactic.h"

#include <stdlib.h>
#include <string.h>

#ifdef NR_HAVE_CUDA

#define S 8  /* rows */
#define E 16 /* width */

typedef struct net {
  nr_graph *g;
  float *w;
} net;

static int tensor(nr_graph *g, const char *name, unsigned flags, int rank, const int64_t *d,
                  void *data) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, rank, {0}, data, false};
  memcpy(g->tensors[t].value.dims, d, sizeof(int64_t) * (size_t)rank);
  return t;
}

static void node(nr_graph *g, const char *name, const char *op, int opset, int n_in,
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
}

/* x [S,E] (input)
 *   ma: a = x Wa + ba;  ra = a + x            (merges: bias, then the residual)
 *   ln: l = LayerNorm(ra)
 *   md: d = ra Wd; rd = x + d -> output       (addend first: merges)
 *   mb: b = Relu(l Wb); rb = b + l -> output  (activation before the Add: stays)
 *   mc: c = rb Wc -> output; rc = c + l -> output (c is a graph output: stays)
 * No two products read the same tensor, so the horizontal pass merges none. */
static bool net_make(nr_test_state *t, net *m) {
  nr_graph *g = m->g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 17;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int64_t xd[2] = {S, E}, wd[2] = {E, E}, ed[1] = {E};
  m->w = malloc(sizeof(float) * E * E);
  for (int j = 0; j < E * E; j++)
    m->w[j] = (float)((j * 5) % 11) / 11.0f - 0.5f;
  int x = tensor(g, "x", NR_TENSOR_INPUT, 2, xd, NULL);
  int wa = tensor(g, "wa", NR_TENSOR_CONST, 2, wd, m->w);
  int wb = tensor(g, "wb", NR_TENSOR_CONST, 2, wd, m->w);
  int wc = tensor(g, "wc", NR_TENSOR_CONST, 2, wd, m->w);
  int wdd = tensor(g, "wd", NR_TENSOR_CONST, 2, wd, m->w);
  int ba = tensor(g, "ba", NR_TENSOR_CONST, 1, ed, m->w);
  int sc = tensor(g, "ln_scale", NR_TENSOR_CONST, 1, ed, m->w + E);
  const char *names[] = {"a0", "a", "ra", "l", "b0", "b", "rb", "c", "rc", "d", "rd"};
  int v[11];
  for (int i = 0; i < 11; i++) {
    bool out = !strcmp(names[i], "rb") || !strcmp(names[i], "c") || !strcmp(names[i], "rc") ||
               !strcmp(names[i], "rd");
    v[i] = nr_graph_add_tensor(g, names[i], out ? NR_TENSOR_OUTPUT : 0);
  }
  node(g, "ma", "MatMul", 13, 2, (int[]){x, wa}, v[0]);
  node(g, "ba_add", "Add", 14, 2, (int[]){v[0], ba}, v[1]);
  node(g, "res_a", "Add", 14, 2, (int[]){v[1], x}, v[2]);
  node(g, "ln", "LayerNormalization", 17, 2, (int[]){v[2], sc}, v[3]);
  node(g, "mb", "MatMul", 13, 2, (int[]){v[3], wb}, v[4]);
  node(g, "relu_b", "Relu", 14, 1, (int[]){v[4]}, v[5]);
  node(g, "res_b", "Add", 14, 2, (int[]){v[5], v[3]}, v[6]);
  node(g, "mc", "MatMul", 13, 2, (int[]){v[6], wc}, v[7]);
  node(g, "res_c", "Add", 14, 2, (int[]){v[7], v[3]}, v[8]);
  node(g, "md", "MatMul", 13, 2, (int[]){v[2], wdd}, v[9]);
  node(g, "res_d", "Add", 14, 2, (int[]){x, v[9]}, v[10]);
  g->inputs = malloc(sizeof(int));
  g->inputs[g->n_inputs++] = x;
  g->outputs = malloc(sizeof(int) * 4);
  g->outputs[g->n_outputs++] = v[6];
  g->outputs[g->n_outputs++] = v[7];
  g->outputs[g->n_outputs++] = v[8];
  g->outputs[g->n_outputs++] = v[10];
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
  free(m->w);
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

/* The step running the node that writes graph tensor `name` (its node, when fused, is
 * the product's), or NULL. */
static const nr_step *step_writing(const nr_plan *p, const char *name) {
  for (int k = 0; k < p->n_steps; k++)
    for (int o = 0; o < p->steps[k].n_out; o++)
      if (p->steps[k].out[o] >= 0 && !strcmp(p->slots[p->steps[k].out[o]].name, name))
        return &p->steps[k];
  return NULL;
}

static bool is_gemm(const nr_step *st) {
  return st && !strncmp(st->tactic->id, "cublas_", 7);
}

static const char *slot_name(const nr_plan *p, int s) {
  return s >= 0 ? p->slots[s].name : "-";
}

static int count_adds(const nr_plan *p) {
  int n = 0;
  for (int k = 0; k < p->n_steps; k++)
    n += p->steps[k].node >= 0 && !strcmp(p->graph->nodes[p->steps[k].node].op_type, "Add");
  return n;
}

#define GEMMS "-cuda.gemm.tactic@*=cublas"

static void check_merged(nr_test_state *t, const nr_plan *p) {
  /* ra = (x Wa + ba) + x: one step, the product with the bias and x as input 3 */
  const nr_step *ra = step_writing(p, "ra");
  REQUIRE(ra, "no step writes ra");
  CHECK(is_gemm(ra), "ra written by %s", ra->tactic->id);
  CHECK(ra->n_in == 4 && !strcmp(slot_name(p, ra->in[3]), "x"), "n_in %d, in[3] %s", ra->n_in,
        slot_name(p, ra->in[3]));
  CHECK(!strcmp(slot_name(p, ra->in[0]), "x") && p->slots[ra->in[2]].kind == NR_SLOT_CONST,
        "the bias stays input 2");
  /* rd = x + (ra Wd): merged although the product is the Add's second input */
  const nr_step *rd = step_writing(p, "rd");
  REQUIRE(rd);
  CHECK(is_gemm(rd) && rd->n_in == 4 && rd->in[2] == -1 && !strcmp(slot_name(p, rd->in[3]), "x"),
        "rd: %s n_in %d in[2] %d", rd->tactic->id, rd->n_in, rd->in[2]);
  /* rb (activation before the Add) and rc (c is a graph output) keep their Adds */
  CHECK(!is_gemm(step_writing(p, "rb")) && !is_gemm(step_writing(p, "rc")));
  CHECK(count_adds(p) == 2, "%d Add steps left", count_adds(p));
  /* nobody reads or writes the products' old outputs */
  for (int k = 0; k < p->n_steps; k++) {
    for (int i = 0; i < p->steps[k].n_in; i++)
      CHECK(strcmp(slot_name(p, p->steps[k].in[i]), "a") &&
            strcmp(slot_name(p, p->steps[k].in[i]), "d"), "step %d reads a dead slot", k);
  }
}

NR_TEST(cuda_residual_into_product) {
  net m;
  REQUIRE(net_make(t, &m));
  nr_plan *p = compile(t, &m, GEMMS);
  if (p)
    check_merged(t, p);
  nr_plan_destroy(p);
  net_free(&m);
}

NR_TEST(cuda_residual_kept_by_fuse_gemm_act) {
  net m;
  REQUIRE(net_make(t, &m));
  /* bias_act and none leave res_a and res_d Adds of their own */
  nr_plan *p = compile(t, &m, GEMMS " -fuse.gemm_act@ma=bias_act -fuse.gemm_act@md=none");
  if (p) {
    CHECK(count_adds(p) == 4, "%d Add steps", count_adds(p));
    for (int k = 0; k < p->n_steps; k++)
      CHECK(!is_gemm(&p->steps[k]) || p->steps[k].n_in <= 3);
  }
  nr_plan_destroy(p);
  net_free(&m);
}

NR_TEST(cuda_residual_fp16) {
  /* the fp16 pass decides the merged step's dtypes like any product's: ra feeds only
   * LayerNorm (an fp16 follower), so it is fp16; x is the fp32 graph input */
  net m;
  REQUIRE(net_make(t, &m));
  nr_plan *p = compile(t, &m, "-cuda.precision@*=fp16 " GEMMS);
  if (p) {
    check_merged(t, p);
    const nr_step *ra = step_writing(p, "ra");
    REQUIRE(ra);
    CHECK(!strcmp(ra->tactic->id, "cublas_f16_gemm"), "%s", ra->tactic->id);
    CHECK(p->slots[ra->out[0]].dtype == NR_DTYPE_FLOAT16);
    CHECK(p->slots[ra->in[3]].dtype == NR_DTYPE_FLOAT && p->slots[ra->in[3]].kind == NR_SLOT_INPUT);
    const nr_step *rd = step_writing(p, "rd");
    CHECK(rd && p->slots[rd->out[0]].dtype == NR_DTYPE_FLOAT, "a graph output stays fp32");
    CHECK(rd && p->slots[rd->in[0]].dtype == NR_DTYPE_FLOAT16, "ra is read as fp16");
  }
  nr_plan_destroy(p);
  net_free(&m);
}

NR_TEST(cuda_residual_engine_file_round_trip) {
  net m;
  REQUIRE(net_make(t, &m));
  nr_engine *e = calloc(1, sizeof *e);
  REQUIRE(e);
  e->plan = compile(t, &m, GEMMS);
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
    CHECK(b && b->n_steps == a->n_steps);
    for (int k = 0; b && k < a->n_steps && k < b->n_steps; k++) {
      CHECK(a->steps[k].n_in == b->steps[k].n_in, "step %d", k);
      for (int i = 0; i < a->steps[k].n_in && i < b->steps[k].n_in; i++)
        CHECK(a->steps[k].in[i] == b->steps[k].in[i], "step %d input %d", k, i);
    }
    if (b)
      check_merged(t, b);
    nr_engine_free(back);
    free(data);
  }
  nr_engine_free(e);
  net_free(&m);
}

#endif
