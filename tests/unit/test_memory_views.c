/* test_memory_views.c - memory.views end to end: a graph of Slices, a Concat, a Reshape
 * and a Split around elementwise ops is compiled with views on and off, run in a
 * context, and compared with the reference executor byte for byte; with views on, the
 * pieces must sit inside the tensors they are pieces of (and the copy steps then move
 * nothing), a tensor concatenated twice must keep its own bytes, and in-place reuse
 * must never write over a group of slots that is still read. */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "plan/knob.h"
#include "plan/tactic.h"
#include "graph_build.h"
#include "kernels/ref/executor.h"
#include "rng.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

static int ints(nr_graph *g, const char *name, int n, const int64_t *v) {
  int64_t len = n;
  int t = tg_tensor(g, name, NR_TENSOR_CONST, 1, &len);
  nr_value_alloc(&g->tensors[t].value, NR_DTYPE_INT64, 1, &len, NULL);
  memcpy(g->tensors[t].value.data, v, sizeof(int64_t) * (size_t)n);
  return t;
}

#define NODE(g, op, name, ...)                                                         \
  tg_node(g, op, name, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)),              \
          (int[]){__VA_ARGS__})
#define LAST(g) ((g)->n_nodes - 1)

/* X [1,4,5,6] -> Relu -> A; A[:, 1:4] -> Neg -> N1; A[:, 0:1] -> Abs -> N2;
 * C = Concat(N1, N2, N1?) on channels; R = Reshape(C, [1, -]); Split(R) in two ->
 * Relu, Neg -> two outputs (exact ops: results compare bit for bit); and Flatten(A),
 * read only at the end, beside Neg(A), A's last reader, which must not run in place
 * over the bytes the Flatten view shares. twice: C = Concat(N1, N2, N1). */
static nr_graph *views_graph(bool twice) {
  int64_t xd[4] = {1, 4, 5, 6};
  nr_graph *g = tg_graph(13);
  int x = tg_input(g, "x", 4, xd);
  int a = NODE(g, "Relu", "relu", x);
  int f = NODE(g, "Flatten", "flatten", a); /* a view of A, read at the very end */
  int s1 = NODE(g, "Slice", "slice1", a, ints(g, "s1s", 1, (int64_t[]){1}),
                ints(g, "s1e", 1, (int64_t[]){4}), ints(g, "s1a", 1, (int64_t[]){1}));
  int s2 = NODE(g, "Slice", "slice2", a, ints(g, "s2s", 1, (int64_t[]){0}),
                ints(g, "s2e", 1, (int64_t[]){1}), ints(g, "s2a", 1, (int64_t[]){1}));
  int n1 = NODE(g, "Neg", "neg", s1), n2 = NODE(g, "Abs", "abs", s2);
  int e = NODE(g, "Neg", "neg_a", a); /* A's last reader: must not run in place */
  int c = twice ? NODE(g, "Concat", "concat", n1, n2, n1) : NODE(g, "Concat", "concat", n1, n2);
  nr_pu_set_attr_int(g, LAST(g), "axis", 1, NULL);
  int64_t total = twice ? 210 : 120;
  int r = NODE(g, "Reshape", "reshape", c, ints(g, "shape", 2, (int64_t[]){1, total}));
  int outs[2] = {nr_graph_add_tensor(g, "p0", 0), nr_graph_add_tensor(g, "p1", 0)};
  int sp = ints(g, "split", 2, (int64_t[]){30, total - 30});
  nr_pu_add_node(g, "split", "Split", "", 2, (int[]){r, sp}, 2, outs);
  nr_pu_set_attr_int(g, LAST(g), "axis", 1, NULL);
  int y1 = NODE(g, "Relu", "relu2", outs[0]);
  int y2 = NODE(g, "Neg", "neg2", outs[1]);
  int y3 = NODE(g, "Add", "add", f, NODE(g, "Flatten", "flatten_e", e));
  g->outputs = malloc(3 * sizeof(int));
  g->outputs[0] = y1, g->outputs[1] = y2, g->outputs[2] = y3, g->n_outputs = 3;
  for (int i = 0; i < 3; i++)
    g->tensors[g->outputs[i]].flags |= NR_TENSOR_OUTPUT;
  return g;
}

static const nr_slot *slot_named(const nr_plan *p, const char *name) {
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].name && !strcmp(p->slots[i].name, name))
      return &p->slots[i];
  return NULL;
}

static bool inside(const nr_slot *piece, const nr_slot *whole, uint64_t at) {
  return piece && whole && piece->offset == whole->offset + at;
}

static void run_route(nr_test_state *t, nr_graph *g, const nr_knob_space *space,
                      const char *text, const nr_value *x, const nr_value *want,
                      bool twice) {
  nr_error err = {0};
  nr_route r = {0};
  nr_plan *p = NULL;
  nr_context *ctx = NULL;
  REQUIRE(!nr_route_init(&r, space, &err) && !nr_route_parse(&r, text, &err) &&
              !nr_compile(g, &r, 2, NULL, &p, &err),
          "'%s': %s", text, err.message);
  bool views = !strstr(text, "views=off");
  const nr_slot *a = slot_named(p, "relu_out"), *s1 = slot_named(p, "slice1_out"),
                *s2 = slot_named(p, "slice2_out"), *n1 = slot_named(p, "neg_out"),
                *n2 = slot_named(p, "abs_out"), *c = slot_named(p, "concat_out"),
                *rs = slot_named(p, "reshape_out"), *p1 = slot_named(p, "p1");
  /* slices of A, the Neg inside the Concat (not when it is there twice), the Abs after
   * it, the Reshape and the Split's second piece inside the Concat's bytes */
  CHECK(inside(s1, a, 30 * 4) == views && inside(s2, a, 0) == views, "'%s': slice views",
        text);
  CHECK(inside(n1, c, 0) == (views && !twice), "'%s': Neg inside the Concat", text);
  CHECK(inside(n2, c, 90 * 4) == views, "'%s': Abs inside the Concat", text);
  CHECK(inside(rs, c, 0) == views && inside(p1, c, 30 * 4) == views, "'%s': reshape, split",
        text);
  nr_engine e = {.plan = p, .threads = 2};
  nr_buffer bin = {NR_DTYPE_FLOAT, 4, {1, 4, 5, 6}, x->data}, out[3] = {{0}, {0}, {0}};
  CHECK(!nr_context_create(&e, 2, &ctx, &err) && !nr_context_run(ctx, &bin, out, &err),
        "'%s': %s", text, err.message);
  for (int i = 0; i < 3; i++) {
    int64_t n = nr_value_count(&want[i]), bad = -1;
    for (int64_t j = 0; out[i].data && j < n && bad < 0; j++)
      if (((float *)out[i].data)[j] != ((float *)want[i].data)[j])
        bad = j;
    CHECK(out[i].data && bad < 0, "'%s': output %d differs from the reference at %lld: %g %g",
          text, i, (long long)bad, bad < 0 ? 0.0 : ((float *)out[i].data)[bad],
          bad < 0 ? 0.0 : ((float *)want[i].data)[bad]);
    nr_buffer_free(&out[i]);
  }
  nr_context_destroy(ctx);
  nr_plan_destroy(p);
  nr_route_free(&r);
}

NR_TEST(memory_views_end_to_end) {
  for (int twice = 0; twice < 2; twice++) {
    nr_graph *g = views_graph(twice);
    nr_error err = {0};
    REQUIRE(!nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
                !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err),
            "%s", err.message);
    int64_t xd[4] = {1, 4, 5, 6};
    nr_value x = {0}, want[3] = {{0}, {0}, {0}};
    nr_value_alloc(&x, NR_DTYPE_FLOAT, 4, xd, NULL);
    nr_rng rng = nr_rng_make(77);
    for (int i = 0; i < 120; i++)
      ((float *)x.data)[i] = (float)nr_rng_int(&rng, 0, 2000) / 500.0f - 2.0f;
    REQUIRE(!nr_ref_exec(g, &x, want, &err), "%s", err.message);
    nr_knob_space space = {0};
    REQUIRE(!nr_knob_space_build(g, &space, &err), "%s", err.message);
    CHECK(nr_knob_space_find(&space, "memory.views") >= 0, "memory.views is not listed");
    run_route(t, g, &space, "", &x, want, twice);
    run_route(t, g, &space, "-memory.views=off", &x, want, twice);
    run_route(t, g, &space, "-memory.views=on -memory.inplace=off", &x, want, twice);
    nr_knob_space_free(&space);
    nr_value_free(&x);
    for (int i = 0; i < 3; i++)
      nr_value_free(&want[i]);
    nr_graph_destroy(g);
  }
}

/* A Slice with step 2 along channels, or one that reverses the last axis, is a strided
 * piece of its input: its output keeps its own bytes with views on, and the engine
 * still computes what the reference does. */
NR_TEST(memory_views_strided_slice) {
  static const int64_t cases[2][4] = {{1, 4, 1, 2}, {-1, -100, 3, -1}}; /* s, e, axis, step */
  for (int c = 0; c < 2; c++) {
    int64_t xd[4] = {1, 4, 5, 6};
    nr_graph *g = tg_graph(13);
    int x = tg_input(g, "x", 4, xd);
    int a = NODE(g, "Relu", "relu", x);
    int s = NODE(g, "Slice", "slice", a, ints(g, "ss", 1, &cases[c][0]),
                 ints(g, "se", 1, &cases[c][1]), ints(g, "sa", 1, &cases[c][2]),
                 ints(g, "st", 1, &cases[c][3]));
    int y = NODE(g, "Neg", "neg", s);
    g->outputs = malloc(sizeof(int));
    g->outputs[0] = y, g->n_outputs = 1;
    g->tensors[y].flags |= NR_TENSOR_OUTPUT;
    nr_error err = {0};
    REQUIRE(!nr_graph_toposort(g, &err) && !nr_graph_bind_ops(g, &err) &&
                !nr_graph_infer(g, &err) && !nr_compiler_name_nodes(g, &err),
            "%s", err.message);
    nr_value xv = {0}, want = {0};
    nr_value_alloc(&xv, NR_DTYPE_FLOAT, 4, xd, NULL);
    nr_rng rng = nr_rng_make(78);
    for (int i = 0; i < 120; i++)
      ((float *)xv.data)[i] = (float)nr_rng_int(&rng, 0, 2000) / 500.0f - 2.0f;
    REQUIRE(!nr_ref_exec(g, &xv, &want, &err), "%s", err.message);
    nr_route r = {0};
    nr_knob_space space = {0};
    nr_plan *p = NULL;
    nr_context *ctx = NULL;
    REQUIRE(!nr_knob_space_build(g, &space, &err) && !nr_route_init(&r, &space, &err) &&
                !nr_compile(g, &r, 1, NULL, &p, &err),
            "case %d: %s", c, err.message);
    const nr_slot *as = slot_named(p, "relu_out"), *ss = slot_named(p, "slice_out");
    int k = 0;
    while (k < p->n_steps && strcmp(p->steps[k].tactic->op_type, "Slice"))
      k++;
    CHECK(k < p->n_steps && !strcmp(p->steps[k].tactic->id, "nr_copy_slice"),
          "case %d: the Slice is not on nr_copy_slice", c);
    CHECK(as && ss && ss->alias_of < 0 && (ss->offset >= as->offset + as->nbytes ||
                                           ss->offset + ss->nbytes <= as->offset),
          "case %d: a strided slice shares its input's bytes", c);
    nr_engine e = {.plan = p, .threads = 1};
    nr_buffer bin = {NR_DTYPE_FLOAT, 4, {1, 4, 5, 6}, xv.data}, out = {0};
    CHECK(!nr_context_create(&e, 1, &ctx, &err) && !nr_context_run(ctx, &bin, &out, &err),
          "case %d: %s", c, err.message);
    CHECK(out.data && nr_value_count(&want) == (int64_t)(out.dims[0] * out.dims[1] *
                                                          out.dims[2] * out.dims[3]) &&
              !memcmp(out.data, want.data, nr_value_nbytes(&want)),
          "case %d: output differs from the reference", c);
    nr_buffer_free(&out);
    nr_context_destroy(ctx);
    nr_plan_destroy(p);
    nr_route_free(&r);
    nr_knob_space_free(&space);
    nr_value_free(&xv);
    nr_value_free(&want);
    nr_graph_destroy(g);
  }
}
