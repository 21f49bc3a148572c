/* test_layout.c - the layout pass on hand-built plans: conv(NCHW8C) -> Relu(ANY) ->
 * conv(NCHW8C) -> graph output must get exactly the reorders the rules ask for, with
 * layout.propagate on (2: in and out) and off (4: also around the Relu), and a
 * tensor read twice in one layout is converted once. */
#include "plan/pass.h"
#include "plan/route.h"
#include "plan/tactic.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

extern const nr_pass nr_pass_layout;

static nr_status any_run(const nr_exec_args *a) { return NR_OK; }
static const nr_tactic any_tactic = {"test_any", "", "Relu", "nnroute", "x", NR_LAYOUT_ANY,
                                     0, 0, NULL, NULL, any_run};
static const nr_tactic b8_tactic = {"test_b8", "", "Conv", "nnroute", "x", NR_LAYOUT_NCHW8C,
                                    0, 0, NULL, NULL, any_run};

static void add_slot(nr_plan *p, const char *name, nr_slot_kind kind, int c) {
  nr_slot *s = &p->slots[p->n_slots++];
  memset(s, 0, sizeof *s);
  s->name = strdup(name);
  s->dtype = NR_DTYPE_FLOAT;
  s->rank = 4;
  s->dims[0] = 1, s->dims[1] = c, s->dims[2] = 5, s->dims[3] = 5;
  s->kind = kind;
  s->nbytes = nr_slot_bytes(s, NR_LAYOUT_PLAIN);
}

static void add_step(nr_plan *p, const nr_tactic *t, int in0, int in1, int out) {
  nr_step *s = &p->steps[p->n_steps++];
  memset(s, 0, sizeof *s);
  s->tactic = t;
  s->node = p->n_steps - 1;
  s->n_in = in1 >= 0 ? 2 : 1;
  s->in[0] = in0, s->in[1] = in1;
  s->n_out = 1;
  s->out[0] = out;
}

/* X -> conv(W1) -> Y1 -> relu -> Y2 -> conv(W2) -> Y3 (output) */
static nr_plan *chain(void) {
  nr_plan *p = calloc(1, sizeof *p);
  p->slots = calloc(8, sizeof *p->slots);
  p->steps = calloc(8, sizeof *p->steps);
  add_slot(p, "X", NR_SLOT_INPUT, 3);
  add_slot(p, "W1", NR_SLOT_CONST, 3);
  add_slot(p, "Y1", NR_SLOT_ARENA, 12);
  add_slot(p, "Y2", NR_SLOT_ARENA, 12);
  add_slot(p, "W2", NR_SLOT_CONST, 12);
  add_slot(p, "Y3", NR_SLOT_ARENA, 12);
  add_step(p, &b8_tactic, 0, 1, 2);
  add_step(p, &any_tactic, 2, -1, 3);
  add_step(p, &b8_tactic, 3, 4, 5);
  p->inputs = malloc(sizeof(int));
  p->inputs[0] = 0, p->n_inputs = 1;
  p->outputs = malloc(sizeof(int));
  p->outputs[0] = 5, p->n_outputs = 1;
  return p;
}

static int count_reorders(const nr_plan *p) {
  int n = 0;
  for (int k = 0; k < p->n_steps; k++)
    n += p->steps[k].node < 0;
  return n;
}

static nr_status run_pass(nr_plan *p, const char *route_text) {
  nr_knob_space space = {0};
  nr_route route = {0};
  nr_error err = {0};
  nr_status st = nr_knob_space_build(NULL, &space, &err);
  if (!st)
    st = nr_route_init(&route, &space, &err);
  if (!st && route_text)
    st = nr_route_parse(&route, route_text, &err);
  nr_compile_ctx c = {NULL, p, st ? NULL : &route, 1, &err};
  if (!st)
    st = nr_pass_layout.run(&c);
  nr_route_free(&route);
  nr_knob_space_free(&space);
  return st;
}

NR_TEST(test_layout_propagate_on) {
  nr_plan *p = chain();
  REQUIRE(run_pass(p, NULL) == NR_OK);
  CHECK(p->n_steps == 5, "%d steps", p->n_steps);
  CHECK(count_reorders(p) == 2, "%d reorders", count_reorders(p));
  REQUIRE(p->n_steps == 5);
  CHECK(p->steps[0].node == -1 && !strcmp(p->steps[0].tactic->id, "nr_f32_reorder_plain_to_nchw8c"));
  CHECK(p->steps[1].tactic == &b8_tactic && p->steps[2].tactic == &any_tactic);
  CHECK(p->slots[2].layout == NR_LAYOUT_NCHW8C && p->slots[3].layout == NR_LAYOUT_NCHW8C);
  CHECK(p->slots[2].nbytes == 16 * 25 * 4, "padded size %llu", (unsigned long long)p->slots[2].nbytes);
  CHECK(!strcmp(p->steps[4].tactic->id, "nr_f32_reorder_nchw8c_to_plain"));
  CHECK(p->steps[4].out[0] == 5 && p->slots[5].layout == NR_LAYOUT_PLAIN,
        "graph output leaves PLAIN");
  CHECK(p->slots[0].layout == NR_LAYOUT_PLAIN && p->slots[1].layout == NR_LAYOUT_PLAIN);
  nr_plan_destroy(p);
}

NR_TEST(test_layout_propagate_off) {
  nr_plan *p = chain();
  REQUIRE(run_pass(p, "-layout.propagate=off") == NR_OK);
  CHECK(p->n_steps == 7, "%d steps", p->n_steps);
  CHECK(count_reorders(p) == 4, "%d reorders", count_reorders(p));
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].tactic == &any_tactic)
      CHECK(p->slots[p->steps[k].in[0]].layout == NR_LAYOUT_PLAIN &&
            p->slots[p->steps[k].out[0]].layout == NR_LAYOUT_PLAIN);
  nr_plan_destroy(p);
}

NR_TEST(test_layout_converts_once) {
  /* X feeds two NCHW8C convs: one reorder serves both; an ANY Add of two PLAIN inputs
   * stays PLAIN with no reorder. */
  nr_plan *p = calloc(1, sizeof *p);
  p->slots = calloc(8, sizeof *p->slots);
  p->steps = calloc(8, sizeof *p->steps);
  add_slot(p, "X", NR_SLOT_INPUT, 8);
  add_slot(p, "W", NR_SLOT_CONST, 8);
  add_slot(p, "A", NR_SLOT_ARENA, 8);
  add_slot(p, "B", NR_SLOT_ARENA, 8);
  add_slot(p, "S", NR_SLOT_ARENA, 8);
  add_step(p, &b8_tactic, 0, 1, 2);
  add_step(p, &b8_tactic, 0, 1, 3);
  add_step(p, &any_tactic, 2, 3, 4); /* stays NCHW8C: both inputs blocked */
  p->outputs = malloc(sizeof(int));
  p->outputs[0] = 4, p->n_outputs = 1;
  REQUIRE(run_pass(p, NULL) == NR_OK);
  CHECK(count_reorders(p) == 2, "%d reorders (one in, one out)", count_reorders(p));
  CHECK(p->n_steps == 5, "%d steps", p->n_steps);
  CHECK(p->steps[1].in[0] == p->steps[2].in[0], "X converted once");
  nr_plan_destroy(p);
}
