/* test_memory_plan.c - the memory pass on hand-built plans: on random plans, for every
 * value of memory.plan and memory.inplace, no two slots whose lifetimes overlap share
 * bytes, offsets are aligned and inside the arena, naive is never smaller than the
 * greedy plans, and every alias is legal; then the in-place rule case by case. */
#include "plan/tactic.h"
#include "rng.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

nr_status nr_memory_plan(nr_plan *p, int strategy, bool inplace, nr_error *err);
nr_status nr_memory_plan_aligned(nr_plan *p, int strategy, bool inplace, uint64_t align,
                                 nr_error *err);

static const nr_tactic fast = {"test_fast", "", NULL, "nnroute"};
static const nr_tactic dnnl = {"test_dnnl", "", NULL, "onednn"};

/* A plan with room for n slots and n steps over a graph of n nodes of op_type. */
static nr_plan *plan_new(int n) {
  nr_plan *p = calloc(1, sizeof *p);
  p->graph = nr_graph_create(NULL);
  p->slots = calloc((size_t)n, sizeof *p->slots);
  p->steps = calloc((size_t)n, sizeof *p->steps);
  p->inputs = calloc((size_t)n, sizeof(int));
  p->outputs = calloc((size_t)n, sizeof(int));
  p->cap_slots = p->cap_steps = n;
  return p;
}

static int add_slot(nr_plan *p, nr_slot_kind kind, int64_t elems) {
  nr_slot *s = &p->slots[p->n_slots];
  s->name = strdup("s");
  s->dtype = NR_DTYPE_FLOAT;
  s->rank = 1;
  s->dims[0] = elems;
  s->kind = kind;
  s->nbytes = (uint64_t)elems * 4;
  s->alias_of = -1;
  return p->n_slots++;
}

static nr_step *add_step(nr_plan *p, const char *op, const nr_tactic *tac, int n_in,
                         const int *in, int out) {
  nr_node *n = nr_graph_add_node(p->graph);
  n->name = strdup("n");
  n->op_type = strdup(op);
  n->domain = strdup("");
  nr_step *st = &p->steps[p->n_steps++];
  st->tactic = tac;
  st->node = p->graph->n_nodes - 1;
  st->n_in = n_in;
  memcpy(st->in, in, sizeof(int) * (size_t)n_in);
  st->n_out = 1;
  st->out[0] = out;
  return st;
}

/* Lifetimes recomputed independently of the pass. */
static void lifetimes(const nr_plan *p, int *first, int *last) {
  for (int i = 0; i < p->n_slots; i++)
    first[i] = INT32_MAX, last[i] = -1;
  for (int k = 0; k < p->n_steps; k++)
    for (int j = 0; j < p->steps[k].n_in + p->steps[k].n_out; j++) {
      const nr_step *st = &p->steps[k];
      int s = j < st->n_in ? st->in[j] : st->out[j - st->n_in];
      if (s < 0)
        continue;
      first[s] = k < first[s] ? k : first[s];
      last[s] = k > last[s] ? k : last[s];
    }
  for (int i = 0; i < p->n_outputs; i++)
    last[p->outputs[i]] = p->n_steps;
}

static int root(const nr_plan *p, int s) {
  while (p->slots[s].alias_of >= 0)
    s = p->slots[s].alias_of;
  return s;
}

/* Every invariant of a planned arena; returns the number of violations. */
static int check_plan(nr_test_state *t, const nr_plan *p, const char *what) {
  int bad = 0, *first = malloc(sizeof(int) * (size_t)p->n_slots),
      *last = malloc(sizeof(int) * (size_t)p->n_slots);
  lifetimes(p, first, last);
  for (int a = 0; a < p->n_slots; a++) {
    const nr_slot *x = &p->slots[a];
    if (x->kind != NR_SLOT_ARENA)
      continue;
    if (x->first_use != first[a] || x->last_use != last[a] || x->offset % 64 ||
        x->offset + x->nbytes > p->arena_size) {
      CHECK(0,
            "%s: slot %d lifetime [%d,%d] (want [%d,%d]) offset %llu size %llu arena "
            "%llu",
            what, a, x->first_use, x->last_use, first[a], last[a],
            (unsigned long long)x->offset, (unsigned long long)x->nbytes,
            (unsigned long long)p->arena_size);
      bad++;
    }
    if (x->alias_of >= 0) { /* legal only as output 0 over a dying input 0 (or 1 of
                               Add/Mul) */
      const nr_slot *in = &p->slots[x->alias_of];
      const nr_step *st = &p->steps[first[a]];
      const char *op = p->graph->nodes[st->node].op_type;
      bool which = st->in[0] == x->alias_of || (st->n_in > 1 && st->in[1] == x->alias_of &&
                                                (!strcmp(op, "Add") || !strcmp(op, "Mul")));
      bool ok = in->kind == NR_SLOT_ARENA && last[x->alias_of] == first[a] &&
                st->out[0] == a && which && in->nbytes == x->nbytes &&
                st->tactic != &dnnl && in->offset == x->offset;
      CHECK(ok, "%s: slot %d aliases slot %d illegally", what, a, x->alias_of);
      bad += !ok;
    }
    for (int b = a + 1; b < p->n_slots; b++) {
      const nr_slot *y = &p->slots[b];
      if (y->kind != NR_SLOT_ARENA || root(p, a) == root(p, b) || !x->nbytes || !y->nbytes)
        continue;
      bool live = first[a] <= last[b] && first[b] <= last[a];
      bool mem = x->offset < y->offset + y->nbytes && y->offset < x->offset + x->nbytes;
      if (live && mem) {
        CHECK(0, "%s: slots %d [%d,%d] and %d [%d,%d] share bytes", what, a, first[a],
              last[a], b, first[b], last[b]);
        bad++;
      }
    }
  }
  free(first);
  free(last);
  return bad;
}

/* A random DAG: each step reads 1-2 live earlier values and writes one new one. */
static nr_plan *random_plan(nr_rng *rs, int steps) {
  static const char *ops[] = {"Relu", "Add", "Conv", "Sigmoid", "Mul", "MatMul"};
  static const int64_t sizes[] = {16, 100, 1000, 1000, 4096, 20000};
  nr_plan *p = plan_new(steps + 4);
  p->inputs[p->n_inputs++] = add_slot(p, NR_SLOT_INPUT, 1000);
  add_slot(p, NR_SLOT_CONST, 1000);
  for (int k = 0; k < steps; k++) {
    int in[2] = {(int)(nr_rng_u32(rs) % (uint64_t)p->n_slots),
                 (int)(nr_rng_u32(rs) % (uint64_t)p->n_slots)};
    if (nr_rng_u32(rs) % 2) /* favour chains: read the latest value */
      in[0] = p->n_slots - 1;
    int out = add_slot(p, NR_SLOT_ARENA, sizes[nr_rng_u32(rs) % 6]);
    if (nr_rng_u32(rs) % 2) /* same size as input 0, so in-place has chances */
      p->slots[out].dims[0] = p->slots[in[0]].dims[0],
      p->slots[out].nbytes = p->slots[in[0]].nbytes;
    const char *op = ops[nr_rng_u32(rs) % 6];
    add_step(p, op, nr_rng_u32(rs) % 5 ? &fast : &dnnl, strcmp(op, "Relu") ? 2 : 1, in, out);
  }
  for (int i = 0; i < 2; i++)
    p->outputs[p->n_outputs++] = p->n_slots - 1 - (int)(nr_rng_u32(rs) % 3);
  return p;
}

NR_TEST(memory_random_plans_never_overlap_live_slots) {
  static const char *names[] = {"naive", "greedy_size", "greedy_first_use"};
  for (uint64_t seed = 1; seed <= 60; seed++) {
    nr_rng rs = nr_rng_make(seed);
    nr_plan *p = random_plan(&rs, 5 + (int)(seed % 40));
    uint64_t size[3][2];
    int aliases = 0;
    for (int s = 0; s < 3; s++)
      for (int ip = 0; ip < 2; ip++) {
        nr_error err = {0};
        REQUIRE(nr_memory_plan(p, s, ip, &err) == NR_OK, "seed %llu: %s",
                (unsigned long long)seed, err.message);
        char what[96];
        snprintf(what, sizeof what, "seed %llu plan=%s inplace=%s",
                 (unsigned long long)seed, names[s], ip ? "on" : "off");
        if (check_plan(t, p, what))
          break;
        size[s][ip] = p->arena_size;
        for (int i = 0; i < p->n_slots; i++)
          aliases += ip && p->slots[i].alias_of >= 0;
        if (!ip)
          for (int i = 0; i < p->n_slots; i++)
            CHECK(p->slots[i].alias_of < 0, "%s: alias with in-place off", what);
      }
    for (int ip = 0; ip < 2; ip++)
      CHECK(size[0][ip] >= size[1][ip] && size[0][ip] >= size[2][ip],
            "seed %llu: naive %llu < greedy %llu / %llu", (unsigned long long)seed,
            (unsigned long long)size[0][ip], (unsigned long long)size[1][ip],
            (unsigned long long)size[2][ip]);
    (void)aliases;
    nr_plan_destroy(p);
  }
}

/* x -> Relu -> a -> Relu -> b -> Add(b, c) -> y(output): a reuses nothing (x is an
 * input), b reuses a, y reuses b; the arena then holds one block. */
NR_TEST(memory_inplace_chain) {
  nr_plan *p = plan_new(8);
  int x = add_slot(p, NR_SLOT_INPUT, 1000), c = add_slot(p, NR_SLOT_CONST, 1000);
  int a = add_slot(p, NR_SLOT_ARENA, 1000), b = add_slot(p, NR_SLOT_ARENA, 1000),
      y = add_slot(p, NR_SLOT_ARENA, 1000);
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = y;
  add_step(p, "Relu", &fast, 1, (int[]){x}, a);
  add_step(p, "Relu", &fast, 1, (int[]){a}, b);
  add_step(p, "Add", &fast, 2, (int[]){b, c}, y);
  nr_error err = {0};
  for (int s = 0; s < 3; s++) {
    REQUIRE(nr_memory_plan(p, s, true, &err) == NR_OK, "%s", err.message);
    CHECK(p->slots[a].alias_of == -1 && p->slots[b].alias_of == a &&
              p->slots[y].alias_of == b,
          "strategy %d: aliases %d %d %d", s, p->slots[a].alias_of, p->slots[b].alias_of,
          p->slots[y].alias_of);
    CHECK(p->arena_size == 4032, "strategy %d: arena %llu", s,
          (unsigned long long)p->arena_size);
    CHECK(check_plan(t, p, "chain") == 0);
  }
  REQUIRE(nr_memory_plan(p, 0, false, &err) == NR_OK);
  CHECK(p->arena_size == 3 * 4032, "naive without in-place: %llu",
        (unsigned long long)p->arena_size);
  REQUIRE(nr_memory_plan(p, 1, false, &err) == NR_OK);
  CHECK(p->arena_size == 2 * 4032, "greedy without in-place: %llu",
        (unsigned long long)p->arena_size);
  nr_plan_destroy(p);
}

/* The layout pass appends reorder outputs as new slots, so an in-place step can alias
 * a root whose slot index is higher than its own; the group must still count every
 * member's lifetime (a regression: a later step was once placed over such a group). */
NR_TEST(memory_alias_root_after_member) {
  nr_plan *p = plan_new(8);
  int x = add_slot(p, NR_SLOT_INPUT, 1000);
  int clip = add_slot(p, NR_SLOT_ARENA, 1000); /* aliases `reordered`, added later */
  int y = add_slot(p, NR_SLOT_ARENA, 250), z = add_slot(p, NR_SLOT_ARENA, 1000);
  int reordered = add_slot(p, NR_SLOT_ARENA, 1000);
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = z;
  add_step(p, "Neg", &dnnl, 1, (int[]){x}, reordered);  /* not in place: onednn */
  add_step(p, "Relu", &fast, 1, (int[]){reordered}, clip);
  add_step(p, "Conv", &fast, 1, (int[]){clip}, y);        /* reads the group */
  add_step(p, "Neg", &dnnl, 1, (int[]){y}, z);
  nr_error err = {0};
  for (int s = 0; s < 3; s++) {
    REQUIRE(nr_memory_plan(p, s, true, &err) == NR_OK, "%s", err.message);
    CHECK(p->slots[clip].alias_of == reordered, "strategy %d", s);
    uint64_t g = p->slots[clip].offset, o = p->slots[y].offset;
    CHECK(o >= g + 4000 || o + 1000 <= g, "strategy %d: y at %llu overlaps the group at %llu",
          s, (unsigned long long)o, (unsigned long long)g);
    CHECK(check_plan(t, p, "alias root after member") == 0);
  }
  nr_plan_destroy(p);
}

/* Each case where in-place would be wrong or is not allowed. */
NR_TEST(memory_inplace_only_when_legal) {
  nr_plan *p = plan_new(16);
  int x = add_slot(p, NR_SLOT_INPUT, 64);
  int a = add_slot(p, NR_SLOT_ARENA, 64);
  int b = add_slot(p, NR_SLOT_ARENA, 64);  /* Relu(a) but a is read again later */
  int c = add_slot(p, NR_SLOT_ARENA, 64);  /* Add(a, b): a dies here, fine */
  int d = add_slot(p, NR_SLOT_ARENA, 64);  /* Conv(c): not an in-place op */
  int e = add_slot(p, NR_SLOT_ARENA, 64);  /* Relu(d) with the onednn tactic */
  int f = add_slot(p, NR_SLOT_ARENA, 128); /* Add(e, x) broadcast to a larger shape */
  int g = add_slot(p, NR_SLOT_ARENA, 128); /* Relu(f): f is a graph output */
  p->slots[f].dims[0] = 2, p->slots[f].rank = 2, p->slots[f].dims[1] = 64;
  p->slots[g].dims[0] = 2, p->slots[g].rank = 2, p->slots[g].dims[1] = 64;
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = f;
  p->outputs[p->n_outputs++] = g;
  add_step(p, "Relu", &fast, 1, (int[]){x}, a); /* x is a graph input */
  add_step(p, "Relu", &fast, 1, (int[]){a}, b);
  add_step(p, "Add", &fast, 2, (int[]){a, b}, c);
  add_step(p, "Conv", &fast, 1, (int[]){c}, d);
  add_step(p, "Relu", &dnnl, 1, (int[]){d}, e);
  add_step(p, "Add", &fast, 2, (int[]){e, x}, f);
  add_step(p, "Relu", &fast, 1, (int[]){f}, g);
  nr_error err = {0};
  REQUIRE(nr_memory_plan(p, 1, true, &err) == NR_OK, "%s", err.message);
  int want[] = {-1, -1, -1, a, -1, -1, -1, -1};
  for (int s = 0; s < p->n_slots; s++)
    CHECK(p->slots[s].alias_of == want[s], "slot %d aliases %d, want %d", s,
          p->slots[s].alias_of, want[s]);
  CHECK(check_plan(t, p, "legal") == 0);
  CHECK(p->slots[f].last_use == p->n_steps && p->slots[x].first_use == -1);
  nr_plan_destroy(p);
}

/* Mul(scale, x) as squeeze-excitation blocks write it: output over input 1; Sub
 * never swaps. */
NR_TEST(memory_inplace_commutative_input1) {
  nr_plan *p = plan_new(8);
  int x = add_slot(p, NR_SLOT_INPUT, 64), s = add_slot(p, NR_SLOT_ARENA, 4);
  int a = add_slot(p, NR_SLOT_ARENA, 64), m = add_slot(p, NR_SLOT_ARENA, 64);
  int b = add_slot(p, NR_SLOT_ARENA, 64), d = add_slot(p, NR_SLOT_ARENA, 64);
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = d;
  add_step(p, "Relu", &fast, 1, (int[]){x}, a);
  add_step(p, "ReduceMean", &fast, 1, (int[]){a}, s);
  add_step(p, "Mul", &fast, 2, (int[]){s, a}, m);
  add_step(p, "Relu", &fast, 1, (int[]){x}, b);
  add_step(p, "Sub", &fast, 2, (int[]){x, b}, d);
  nr_error err = {0};
  REQUIRE(nr_memory_plan(p, 1, true, &err) == NR_OK, "%s", err.message);
  CHECK(p->slots[m].alias_of == a, "Mul: alias %d", p->slots[m].alias_of);
  CHECK(p->slots[d].alias_of == -1, "Sub: alias %d", p->slots[d].alias_of);
  CHECK(check_plan(t, p, "commutative") == 0);
  nr_plan_destroy(p);
}

/* nnroute.EltwiseChain runs in place; an op of another domain does not. */
NR_TEST(memory_inplace_domains) {
  nr_plan *p = plan_new(8);
  int x = add_slot(p, NR_SLOT_INPUT, 64);
  int a = add_slot(p, NR_SLOT_ARENA, 64), b = add_slot(p, NR_SLOT_ARENA, 64),
      c = add_slot(p, NR_SLOT_ARENA, 64);
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = c;
  add_step(p, "Relu", &fast, 1, (int[]){x}, a);
  add_step(p, "EltwiseChain", &fast, 1, (int[]){a}, b);
  add_step(p, "Relu", &fast, 1, (int[]){b}, c);
  free(p->graph->nodes[1].domain);
  p->graph->nodes[1].domain = strdup("nnroute");
  free(p->graph->nodes[2].domain);
  p->graph->nodes[2].domain = strdup("com.example");
  nr_error err = {0};
  REQUIRE(nr_memory_plan(p, 2, true, &err) == NR_OK, "%s", err.message);
  CHECK(p->slots[b].alias_of == a && p->slots[c].alias_of == -1);
  nr_plan_destroy(p);
}

/* memory.align: every value keeps the no-overlap invariants, aligns every offset, and
 * (sizes here are not multiples of 256) changes the arena - not always upwards: the
 * greedy placement is a heuristic. */
NR_TEST(memory_align_values) {
  static const uint64_t aligns[] = {64, 256, 4096};
  for (uint64_t seed = 1; seed <= 20; seed++) {
    uint64_t arena[3];
    for (int a = 0; a < 3; a++)
      for (int s = 0; s < 3; s++) {
        nr_rng rs = nr_rng_make(seed);
        nr_plan *p = random_plan(&rs, 5 + (int)(seed % 30));
        nr_error err = {0};
        REQUIRE(nr_memory_plan_aligned(p, s, true, aligns[a], &err) == NR_OK, "%s",
                err.message);
        char what[96];
        snprintf(what, sizeof what, "seed %llu align %llu plan %d",
                 (unsigned long long)seed, (unsigned long long)aligns[a], s);
        check_plan(t, p, what);
        for (int i = 0; i < p->n_slots; i++)
          CHECK(p->slots[i].kind != NR_SLOT_ARENA || p->slots[i].offset % aligns[a] == 0,
                "%s: slot %d at %llu", what, i, (unsigned long long)p->slots[i].offset);
        if (s == 1)
          arena[a] = p->arena_size;
        nr_plan_destroy(p);
      }
    CHECK(arena[1] != arena[0] && arena[2] != arena[0] && arena[2] % 4096 == 0,
          "seed %llu: arenas %llu %llu %llu",
          (unsigned long long)seed, (unsigned long long)arena[0],
          (unsigned long long)arena[1], (unsigned long long)arena[2]);
  }
  nr_plan *p = plan_new(4);
  nr_error err = {0};
  CHECK(nr_memory_plan_aligned(p, 1, true, 100, &err) == NR_ERR_INVALID_ARGUMENT);
  nr_plan_destroy(p);
}
