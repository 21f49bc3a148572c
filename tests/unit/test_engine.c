/* test_engine.c - the engine file format on a plan built by hand: exact round trips
 * (bytes and fields, through memory and through a file), every truncation, seeded
 * bit flips with and without a repaired checksum, environment refusals naming the
 * field that differs, and unknown tactics. Compiled plans are covered where the
 * compiler's own tests save and load them. */
#include "rng.h"
#include "unit.h"

#include "engine/engine.h"
#include "ir/op.h"
#include "util/sha256.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a small plan: Z = Relu(X + W) with a Relu carrying every attribute type ------ */

static int add_tensor(nr_graph *g, const char *name, unsigned flags, int rank,
                      const int64_t *dims) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value.dtype = NR_DTYPE_FLOAT;
  g->tensors[t].value.rank = rank;
  for (int d = 0; d < rank; d++)
    g->tensors[t].value.dims[d] = dims[d];
  return t;
}

static nr_node *add_node(nr_graph *g, const char *op, const char *name, int n_in,
                         const int *ins, int n_out, const int *outs) {
  nr_node *n = nr_graph_add_node(g);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
  n->inputs = malloc(sizeof(int) * (size_t)(n_in ? n_in : 1));
  n->outputs = malloc(sizeof(int) * (size_t)(n_out ? n_out : 1));
  memcpy(n->inputs, ins, sizeof(int) * (size_t)n_in);
  memcpy(n->outputs, outs, sizeof(int) * (size_t)n_out);
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  for (int o = 0; o < n_out; o++)
    g->tensors[outs[o]].producer = (int)(n - g->nodes);
  return n;
}

/* A malloc'ed one-element index list (graph and plan I/O lists). */
static int *one_index(int a) {
  int *p = malloc(sizeof(int));
  p[0] = a;
  return p;
}

/* A subgraph reading outer tensor X, with one initializer. */
static nr_graph *make_subgraph(nr_graph *parent) {
  static const int64_t d4[] = {1, 4};
  nr_graph *s = nr_graph_create(parent);
  s->name = strdup("body");
  int x = add_tensor(s, "X", NR_TENSOR_OUTER, 2, d4);
  int c = add_tensor(s, "c", NR_TENSOR_CONST, 2, d4);
  nr_value_alloc(&s->tensors[c].value, NR_DTYPE_FLOAT, 2, d4, NULL);
  ((float *)s->tensors[c].value.data)[3] = 7.5f;
  int o = add_tensor(s, "sub_out", NR_TENSOR_OUTPUT, 2, d4);
  add_node(s, "Add", "sub_add", 2, (int[]){x, c}, 1, (int[]){o});
  s->outputs = one_index(o);
  s->n_outputs = 1;
  s->inputs = malloc(sizeof(int));
  return s;
}

static void set_attrs(nr_graph *g, nr_node *n) {
  n->attrs = calloc(8, sizeof *n->attrs);
  n->n_attrs = 8;
  nr_attr *a = n->attrs;
  a[0] = (nr_attr){.name = strdup("f"), .type = NR_ATTR_FLOAT, .f = -0.25f};
  a[1] = (nr_attr){.name = strdup("i"), .type = NR_ATTR_INT, .i = -1234567890123ll};
  a[2] = (nr_attr){.name = strdup("s"), .type = NR_ATTR_STRING, .s = malloc(4), .s_len = 3};
  memcpy(a[2].s, "a\0b", 4);
  a[3] = (nr_attr){.name = strdup("t"), .type = NR_ATTR_TENSOR};
  nr_value_alloc(&a[3].t, NR_DTYPE_INT64, 1, (int64_t[]){3}, NULL);
  ((int64_t *)a[3].t.data)[2] = 42;
  a[4] = (nr_attr){.name = strdup("g"), .type = NR_ATTR_GRAPH, .g = make_subgraph(g)};
  a[5] = (nr_attr){.name = strdup("fs"), .type = NR_ATTR_FLOATS, .n = 2,
                   .floats = malloc(2 * sizeof(float))};
  a[5].floats[0] = 1.5f;
  a[5].floats[1] = -2.0f;
  a[6] = (nr_attr){.name = strdup("is"), .type = NR_ATTR_INTS, .n = 2,
                   .ints = malloc(2 * sizeof(int64_t))};
  a[6].ints[0] = 5;
  a[6].ints[1] = -6;
  a[7] = (nr_attr){.name = strdup("ss"), .type = NR_ATTR_STRINGS, .n = 2,
                   .strings = malloc(2 * sizeof(char *))};
  a[7].strings[0] = strdup("x");
  a[7].strings[1] = strdup("");
}

static nr_graph *make_graph(void) {
  static const int64_t d4[] = {1, 4};
  nr_graph *g = nr_graph_create(NULL);
  g->name = strdup("main");
  g->ir_version = 8;
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int x = add_tensor(g, "X", NR_TENSOR_INPUT, 2, d4);
  int w = add_tensor(g, "W", NR_TENSOR_CONST, 2, d4);
  int y = add_tensor(g, "Y", 0, 2, d4);
  int z = add_tensor(g, "Z", NR_TENSOR_OUTPUT, 2, d4);
  g->tensors[x].dim_params[0] = strdup("batch");
  nr_value_alloc(&g->tensors[w].value, NR_DTYPE_FLOAT, 2, d4, NULL);
  for (int i = 0; i < 4; i++)
    ((float *)g->tensors[w].value.data)[i] = (float)i - 1.5f;
  add_node(g, "Add", "add0", 2, (int[]){x, w}, 1, (int[]){y});
  set_attrs(g, add_node(g, "Relu", "relu0", 1, (int[]){y}, 1, (int[]){z}));
  g->inputs = one_index(x);
  g->n_inputs = 1;
  g->outputs = one_index(z);
  g->n_outputs = 1;
  nr_graph_bind_ops(g, NULL);
  return g;
}

static void set_slot(nr_slot *s, const nr_tensor *t, nr_slot_kind kind, uint64_t off,
                     int first, int last) {
  s->name = strdup(t->name);
  s->dtype = t->value.dtype;
  s->rank = t->value.rank;
  memcpy(s->dims, t->value.dims, sizeof s->dims);
  s->layout = NR_LAYOUT_PLAIN;
  s->kind = kind;
  s->nbytes = 16;
  s->offset = off;
  s->first_use = first;
  s->last_use = last;
  s->alias_of = -1;
}

static nr_engine *make_engine(const nr_tactic *tactic) {
  nr_engine *e = calloc(1, sizeof *e);
  nr_plan *p = e->plan = calloc(1, sizeof *p);
  p->graph = make_graph();
  p->slots = calloc(4, sizeof *p->slots);
  p->n_slots = 4;
  nr_tensor *t = p->graph->tensors;
  set_slot(&p->slots[0], &t[0], NR_SLOT_INPUT, 0, -1, 0);
  set_slot(&p->slots[1], &t[1], NR_SLOT_CONST, 0, -1, 0);
  set_slot(&p->slots[2], &t[2], NR_SLOT_ARENA, 0, 0, 1);
  set_slot(&p->slots[3], &t[3], NR_SLOT_ARENA, 64, 1, 2);
  p->weights = aligned_alloc(64, 64);
  memset(p->weights, 0, 64);
  memcpy(p->weights, t[1].value.data, 16);
  p->weights_size = 16;
  p->weights_cap = 64;
  p->steps = calloc(2, sizeof *p->steps);
  p->n_steps = 2;
  p->steps[0] = (nr_step){tactic, 0, 2, 1, {0, 1}, {2}, 0, 16, 0, 1, {1, 2, 3}};
  p->steps[1] = (nr_step){tactic, 1, 1, 1, {2}, {3}, 0, 0, 32, 0, {0}};
  p->steps[1].params[63] = 0xab;
  p->inputs = one_index(0);
  p->n_inputs = 1;
  p->outputs = one_index(3);
  p->n_outputs = 1;
  p->arena_size = 128;
  p->scratch_size = 32;
  p->route = strdup("-memory.reuse=off");
  nr_fingerprint_current(&e->fingerprint);
  strcpy(e->nnroute_version, NR_VERSION_STRING);
  nr_knob_schema(e->knob_schema);
  nr_sha256("model bytes", 11, e->model_sha256);
  e->build_ms = 1234;
  e->threads = 2;
  return e;
}

static bool serialize(const nr_engine *e, uint8_t **data, size_t *len) {
  nr_error err = {0};
  nr_status st = nr_engine_serialize(e, data, len, &err);
  if (st)
    fprintf(stderr, "serialize: %s\n", err.message);
  return st == NR_OK;
}

/* ---- round trips -------------------------------------------------------------------- */

static void check_fields(nr_test_state *t, const nr_engine *a, const nr_engine *b) {
  const nr_plan *p = a->plan, *q = b->plan;
  CHECK(!memcmp(&a->fingerprint, &b->fingerprint, sizeof a->fingerprint));
  CHECK(!strcmp(a->knob_schema, b->knob_schema) && a->build_ms == b->build_ms);
  CHECK(a->threads == b->threads && !memcmp(a->model_sha256, b->model_sha256, 32));
  CHECK(!strcmp(nr_engine_route(b), "-memory.reuse=off"));
  REQUIRE(q->n_slots == p->n_slots && q->n_steps == p->n_steps);
  for (int i = 0; i < p->n_slots; i++) {
    CHECK(!strcmp(p->slots[i].name, q->slots[i].name), "slot %d", i);
    CHECK(p->slots[i].offset == q->slots[i].offset && p->slots[i].kind == q->slots[i].kind);
  }
  for (int i = 0; i < p->n_steps; i++) {
    CHECK(p->steps[i].tactic == q->steps[i].tactic);
    CHECK(!memcmp(p->steps[i].params, q->steps[i].params, NR_TACTIC_PARAMS));
  }
  CHECK(q->arena_size == 128 && q->scratch_size == 32 && q->weights_size == 16);
  CHECK(!memcmp(p->weights, q->weights, 16) && ((uintptr_t)q->weights & 63) == 0);
  const nr_graph *g = q->graph;
  REQUIRE(g->n_nodes == 2 && g->n_tensors == 4);
  CHECK(!strcmp(g->tensors[1].name, "W") && g->tensors[1].value.data == q->weights);
  CHECK(g->tensors[0].dim_params[0] && !strcmp(g->tensors[0].dim_params[0], "batch"));
  CHECK(g->tensors[3].producer == 1 && g->nodes[1].def != NULL);
  const nr_node *n = &g->nodes[1];
  REQUIRE(n->n_attrs == 8);
  CHECK(n->attrs[0].f == -0.25f && n->attrs[1].i == -1234567890123ll);
  CHECK(n->attrs[2].s_len == 3 && !memcmp(n->attrs[2].s, "a\0b", 3));
  CHECK(((int64_t *)n->attrs[3].t.data)[2] == 42);
  CHECK(n->attrs[5].floats[1] == -2.0f && n->attrs[6].ints[1] == -6);
  CHECK(!strcmp(n->attrs[7].strings[0], "x"));
  const nr_graph *s = n->attrs[4].g;
  REQUIRE(s && s->n_tensors == 3 && s->parent == g);
  CHECK(s->tensors[0].flags == NR_TENSOR_OUTER && ((float *)s->tensors[1].value.data)[3] == 7.5f);
}

NR_TEST(engine_round_trip_is_exact) {
  nr_engine *e = make_engine(nr_tactic_find("ref"));
  REQUIRE(e->plan->steps[0].tactic, "tactic 'ref' is registered");
  uint8_t *a = NULL, *b = NULL;
  size_t la = 0, lb = 0;
  REQUIRE(serialize(e, &a, &la));
  CHECK((la - 32 - 16) % 64 == 0 && !memcmp(a, "NRENGINE", 8), "len %zu", la);
  nr_engine *f = NULL;
  nr_error err = {0};
  nr_status st = nr_engine_parse(a, la, true, &f, &err);
  CHECK(st == NR_OK, "%s", err.message);
  if (f) {
    check_fields(t, e, f);
    CHECK(serialize(f, &b, &lb) && la == lb && !memcmp(a, b, la), "bytes differ");
    nr_io_info info;
    CHECK(nr_engine_input_count(f) == 1 && nr_engine_output_count(f) == 1);
    CHECK(nr_engine_input_info(f, 0, &info) == NR_OK && !strcmp(info.name, "X"));
    CHECK(nr_engine_output_info(f, 1, &info) == NR_ERR_INVALID_ARGUMENT);
  }
  nr_engine_free(f);
  nr_engine_free(e);
  free(a);
  free(b);
}

NR_TEST(engine_save_load_adopts_weights) {
  nr_engine *e = make_engine(nr_tactic_find("ref"));
  char path[] = "/tmp/nr_engine_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  nr_error err = {0};
  CHECK(nr_engine_save(e, path, &err) == NR_OK, "%s", err.message);
  nr_engine *f = NULL;
  CHECK(nr_engine_load(path, NULL, &f, &err) == NR_OK, "%s", err.message);
  if (f) {
    check_fields(t, e, f);
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    CHECK(serialize(e, &a, &la) && serialize(f, &b, &lb) && la == lb && !memcmp(a, b, la));
    free(a);
    free(b);
  }
  nr_engine_destroy(f);
  nr_engine_destroy(NULL);
  CHECK(nr_engine_load("/nonexistent/x.engine", NULL, &f, &err) == NR_ERR_IO);
  unlink(path);
  nr_engine_free(e);
}

/* ---- hostile bytes ------------------------------------------------------------------ */

static nr_status parse_quiet(const uint8_t *data, size_t len, bool env, nr_error *err) {
  nr_engine *f = NULL;
  memset(err, 0, sizeof *err);
  nr_status st = nr_engine_parse(data, len, env, &f, err);
  if (st == NR_OK) {
    uint8_t *b = NULL;
    size_t lb = 0;
    nr_error e2;
    if (nr_engine_serialize(f, &b, &lb, &e2) == NR_OK)
      free(b);
  }
  nr_engine_free(f);
  return st;
}

NR_TEST(engine_every_truncation_is_refused) {
  nr_engine *e = make_engine(nr_tactic_find("ref"));
  uint8_t *a = NULL;
  size_t la = 0;
  REQUIRE(serialize(e, &a, &la));
  for (size_t cut = 0; cut < la; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees any overread */
    memcpy(copy, a, cut);
    nr_error err;
    nr_status st = parse_quiet(copy, cut, true, &err);
    CHECK(st == NR_ERR_INVALID_MODEL && err.message[0], "cut at %zu: %d", cut, st);
    free(copy);
  }
  free(a);
  nr_engine_free(e);
}

/* With repair, the checksum is recomputed so the flip reaches the section parsers. */
static void flip_test(nr_test_state *t, uint64_t seed, int rounds, bool repair) {
  nr_engine *e = make_engine(nr_tactic_find("ref"));
  uint8_t *a = NULL;
  size_t la = 0;
  REQUIRE(serialize(e, &a, &la));
  nr_rng s = nr_rng_make(seed);
  uint8_t *copy = malloc(la);
  int accepted = 0;
  for (int r = 0; r < rounds; r++) {
    memcpy(copy, a, la);
    int flips = 1 + (int)(nr_rng_u32(&s) % 3);
    for (int k = 0; k < flips; k++) {
      size_t at = (size_t)(nr_rng_u32(&s) % (repair ? la - 32 : la));
      copy[at] ^= (uint8_t)(1u << (nr_rng_u32(&s) % 8));
    }
    if (repair)
      nr_sha256(copy, la - 32, copy + la - 32);
    nr_error err;
    nr_status st = parse_quiet(copy, la, true, &err);
    if (st == NR_OK) {
      accepted++;
      continue;
    }
    CHECK(err.message[0], "seed %llu round %d: no message", (unsigned long long)seed, r);
    if (!repair)
      CHECK(st == NR_ERR_INVALID_MODEL, "seed %llu round %d: %d %s",
            (unsigned long long)seed, r, st, err.message);
    else
      CHECK(st == NR_ERR_INVALID_MODEL || st == NR_ERR_INVALID_ARGUMENT,
            "seed %llu round %d: %d %s", (unsigned long long)seed, r, st, err.message);
  }
  if (!repair)
    CHECK(accepted == 0, "seed %llu: %d corrupt files accepted", (unsigned long long)seed,
          accepted);
  free(copy);
  free(a);
  nr_engine_free(e);
}

NR_TEST(engine_bit_flips_are_refused) {
  flip_test(t, 0x5eed1234abcdull, 3000, false);
}

NR_TEST(engine_bit_flips_behind_a_valid_checksum_never_crash) {
  flip_test(t, 0x9e3779b97f4a7c15ull, 6000, true);
}

/* ---- environment and tactics -------------------------------------------------------- */

static nr_status parse_modified(nr_engine *e, bool env, nr_error *err) {
  uint8_t *a = NULL;
  size_t la = 0;
  if (!serialize(e, &a, &la))
    return NR_ERR_INTERNAL;
  nr_status st = parse_quiet(a, la, env, err);
  free(a);
  return st;
}

NR_TEST(engine_other_environment_is_refused_naming_the_field) {
  nr_engine *e = make_engine(nr_tactic_find("ref"));
  nr_error err;
  strcpy(e->fingerprint.cpu_model, "Imaginary CPU 9000");
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "cpu_model: engine 'Imaginary CPU 9000'"), "%s", err.message);
  CHECK(strstr(err.message, "--unsafe-ignore-environment") && !strstr(err.message, "isa:"),
        "%s", err.message);
  CHECK(parse_modified(e, false, &err) == NR_OK, "%s", err.message);
  nr_fingerprint_current(&e->fingerprint);
  e->fingerprint.cores += 1;
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_ARGUMENT &&
        strstr(err.message, "cores:"), "%s", err.message);
  nr_fingerprint_current(&e->fingerprint);
  strcpy(e->nnroute_version, "0.0.0-old");
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_ARGUMENT &&
        strstr(err.message, "nnroute_version: engine '0.0.0-old'"), "%s", err.message);
  strcpy(e->nnroute_version, NR_VERSION_STRING);
  strcpy(e->knob_schema, "0123456789abcdef");
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_ARGUMENT &&
        strstr(err.message, "knob_schema"), "%s", err.message);

  /* the same through the file API and its unsafe option */
  char path[] = "/tmp/nr_engine_env_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  CHECK(nr_engine_save(e, path, &err) == NR_OK, "%s", err.message);
  nr_engine *f = NULL;
  CHECK(nr_engine_load(path, NULL, &f, &err) == NR_ERR_INVALID_ARGUMENT && !f);
  nr_engine_load_options opts = {sizeof opts, 1};
  CHECK(nr_engine_load(path, &opts, &f, &err) == NR_OK && f, "%s", err.message);
  nr_engine_destroy(f);
  unlink(path);
  nr_engine_free(e);
}

NR_TEST(engine_fingerprint_compare_names_each_field) {
  nr_fingerprint a, b;
  nr_fingerprint_current(&a);
  b = a;
  nr_error err = {0};
  CHECK(nr_fingerprint_compare(&a, &b, &err) == NR_OK);
  CHECK(a.cores >= 1 && a.compiler[0] && a.openblas[0] && a.onednn[0]);
  strcpy(b.isa, "sse4.2");
  strcpy(b.openblas, "OpenBLAS 0.0.1");
  CHECK(nr_fingerprint_compare(&a, &b, &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "isa: engine '") && strstr(err.message, "openblas: engine"),
        "%s", err.message);
  uint8_t h[32];
  nr_sha256("abc", 3, h);
  CHECK(h[0] == 0xba && h[1] == 0x78 && h[31] == 0xad);
}

static bool fake_supports(const nr_tactic_ctx *c) { return false; }

NR_TEST(engine_unknown_tactic_is_refused_by_name) {
  static const nr_tactic fake = {"nr_f32_imaginary_9x9__avx9", "", "Add", "nnroute",
                                 "x", NR_LAYOUT_PLAIN, 0, 0, fake_supports, NULL, NULL};
  nr_engine *e = make_engine(&fake);
  nr_error err;
  CHECK(parse_modified(e, false, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "nr_f32_imaginary_9x9__avx9") && strstr(err.message, "PLAN"),
        "%s", err.message);
  nr_engine_free(e);
}

NR_TEST(engine_bad_cross_references_are_refused) {
  nr_engine *e = make_engine(nr_tactic_find("ref"));
  nr_error err;
  e->plan->slots[3].offset = 120; /* 120 + 16 > arena 128 */
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_MODEL &&
        strstr(err.message, "outside the arena"), "%s", err.message);
  e->plan->slots[3].offset = 64;
  e->plan->steps[1].node = 7;
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_MODEL &&
        strstr(err.message, "node 7"), "%s", err.message);
  e->plan->steps[1].node = 1;
  e->plan->steps[1].in[0] = 9;
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_MODEL &&
        strstr(err.message, "slot 9"), "%s", err.message);
  e->plan->steps[1].in[0] = 2;
  e->plan->slots[1].offset = 8; /* CONST past the 16 weights bytes */
  CHECK(parse_modified(e, true, &err) == NR_ERR_INVALID_MODEL &&
        strstr(err.message, "WEIGHTS"), "%s", err.message);
  nr_engine_free(e);
}
