/* test_context.c - contexts on hand-built engines: results of test tactics (which use
 * the pool) and of the reference tactic, input and output checks with their
 * messages, a failing step's message, and one engine shared by four contexts on four
 * threads at once giving the single-threaded results bit for bit. */
#include "engine/engine.h"
#include "rng.h"
#include "util/threadpool.h"
#include "unit.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

nr_status nr_memory_plan(nr_plan *p, int strategy, bool inplace, nr_error *err);

/* ---- test tactics ---------------------------------------------------------------- */

typedef struct ew_job {
  const float *a, *b;
  float *y;
} ew_job;

static void scale2_task(void *p, int64_t b, int64_t e, int thread) {
  ew_job *j = p;
  for (int64_t i = b; i < e; i++)
    j->y[i] = 2 * j->a[i];
}

static void add_task(void *p, int64_t b, int64_t e, int thread) {
  ew_job *j = p;
  for (int64_t i = b; i < e; i++)
    j->y[i] = j->a[i] + j->b[i];
}

static nr_status scale2_run(const nr_exec_args *a) {
  ew_job j = {a->in[0], NULL, a->out[0]};
  nr_parallel_for(a->pool, (int64_t)(a->out_slot[0]->nbytes / 4), 256, a->step->threads,
                  scale2_task, &j);
  return NR_OK;
}

static nr_status add_run(const nr_exec_args *a) {
  ew_job j = {a->in[0], a->in[1], a->out[0]};
  nr_parallel_for(a->pool, (int64_t)(a->out_slot[0]->nbytes / 4), 256, a->step->threads,
                  add_task, &j);
  return NR_OK;
}

static nr_status fail_run(const nr_exec_args *a) {
  snprintf(a->err->message, sizeof a->err->message, "boom");
  a->err->status = NR_ERR_RUNTIME;
  return NR_ERR_RUNTIME;
}

static const nr_tactic t_scale2 = {"test_scale2",   "", "Relu", "nnroute", "",
                                   NR_LAYOUT_PLAIN, 0,  0,      NULL,      NULL,
                                   scale2_run};
static const nr_tactic t_add = {"test_add", "", "Add", "nnroute", "",     NR_LAYOUT_PLAIN,
                                0,          0,  NULL,  NULL,      add_run};
static const nr_tactic t_fail = {
    "test_fail", "", "Relu", "nnroute", "", NR_LAYOUT_PLAIN, 0, 0, NULL, NULL, fail_run};

/* ---- hand-built plans ------------------------------------------------------------ */

#define N 4000

static int add_slot(nr_plan *p, const char *name, nr_slot_kind kind, int rank,
                    const int64_t *dims) {
  int i = nr_plan_add_slot(p);
  nr_slot *s = &p->slots[i];
  s->name = strdup(name);
  s->dtype = NR_DTYPE_FLOAT;
  s->rank = rank;
  memcpy(s->dims, dims, sizeof(int64_t) * (size_t)rank);
  s->kind = kind;
  s->nbytes = nr_slot_bytes(s, NR_LAYOUT_PLAIN);
  return i;
}

static void add_step(nr_plan *p, const char *name, const char *op, const nr_tactic *tac,
                     int n_in, const int *in, int out) {
  nr_node *n = nr_graph_add_node(p->graph);
  n->name = strdup(name);
  n->op_type = strdup(op);
  n->domain = strdup("");
  n->opset = 13;
  nr_step *st = nr_plan_insert_step(p, p->n_steps);
  st->tactic = tac;
  st->node = p->graph->n_nodes - 1;
  st->n_in = n_in;
  memcpy(st->in, in, sizeof(int) * (size_t)n_in);
  st->n_out = 1;
  st->out[0] = out;
}

static nr_engine *engine_of(nr_plan *p, int threads) {
  nr_engine *e = calloc(1, sizeof *e);
  e->plan = p;
  e->threads = threads;
  return e;
}

static void engine_free(nr_engine *e) {
  nr_plan_destroy(e->plan);
  free(e);
}

/* x[2x2000] -> Relu(scale2) -> a -> Add(a, c) -> b -> Relu(scale2) -> y
 *           \-> Add(x, c) -> w                        outputs: y, w
 * With in-place on, b reuses a and y reuses b. */
static nr_engine *make_engine(bool inplace, int threads) {
  nr_plan *p = calloc(1, sizeof *p);
  p->graph = nr_graph_create(NULL);
  int64_t dims[2] = {2, N / 2};
  int x = add_slot(p, "x", NR_SLOT_INPUT, 2, dims),
      c = add_slot(p, "c", NR_SLOT_CONST, 2, dims);
  int a = add_slot(p, "a", NR_SLOT_ARENA, 2, dims),
      b = add_slot(p, "b", NR_SLOT_ARENA, 2, dims);
  int y = add_slot(p, "y", NR_SLOT_ARENA, 2, dims),
      w = add_slot(p, "w", NR_SLOT_ARENA, 2, dims);
  float cdata[N];
  for (int i = 0; i < N; i++)
    cdata[i] = (float)(i % 7) - 3.0f;
  nr_plan_add_weights(p, cdata, sizeof cdata, &p->slots[c].offset, NULL);
  p->inputs = malloc(sizeof(int));
  p->outputs = malloc(2 * sizeof(int));
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = y;
  p->outputs[p->n_outputs++] = w;
  add_step(p, "scale_a", "Relu", &t_scale2, 1, (int[]){x}, a);
  add_step(p, "add_b", "Add", &t_add, 2, (int[]){a, c}, b);
  add_step(p, "scale_y", "Relu", &t_scale2, 1, (int[]){b}, y);
  add_step(p, "add_w", "Add", &t_add, 2, (int[]){x, c}, w);
  nr_memory_plan(p, 1, inplace, NULL);
  return engine_of(p, threads);
}

static void fill(float *x, uint64_t seed) {
  nr_rng r = nr_rng_make(seed);
  nr_rng_fill(&r, x, N, -1.0f, 1.0f);
}

static nr_buffer buffer(float *data) {
  nr_buffer b = {NR_DTYPE_FLOAT, 2, {2, N / 2}, data};
  return b;
}

NR_TEST(context_runs_hand_built_plan) {
  for (int ip = 0; ip < 2; ip++) {
    nr_engine *e = make_engine(ip, 2);
    CHECK(ip ? e->plan->slots[4].alias_of == 3 : e->plan->slots[4].alias_of == -1);
    nr_context *ctx = NULL;
    nr_error err = {0};
    REQUIRE(nr_context_create(e, 0, &ctx, &err) == NR_OK, "%s", err.message);
    static float x[N];
    fill(x, 42);
    nr_buffer in = buffer(x), out[2] = {{0}, {0}};
    for (int rep = 0; rep < 3; rep++) {
      REQUIRE(nr_context_run(ctx, &in, out, &err) == NR_OK, "%s", err.message);
      REQUIRE(out[0].data && out[1].data);
      CHECK(out[0].dtype == NR_DTYPE_FLOAT && out[0].rank == 2 && out[0].dims[1] == N / 2);
      const float *y = out[0].data, *w = out[1].data;
      int bad = -1;
      for (int i = 0; i < N && bad < 0; i++) {
        float c = (float)(i % 7) - 3.0f;
        if (y[i] != 2 * (2 * x[i] + c) || w[i] != x[i] + c)
          bad = i;
      }
      CHECK(bad < 0, "inplace=%d rep %d: element %d wrong", ip, rep, bad);
      if (rep < 2) { /* the last run writes into the buffers it was given */
        nr_buffer_free(&out[0]);
        nr_buffer_free(&out[1]);
      }
    }
    nr_buffer_free(&out[0]);
    nr_buffer_free(&out[1]);
    nr_context_destroy(ctx);
    engine_free(e);
  }
  nr_context_destroy(NULL);
}

NR_TEST(context_checks_inputs_and_outputs) {
  nr_engine *e = make_engine(true, 1);
  nr_context *ctx = NULL;
  nr_error err = {0};
  REQUIRE(nr_context_create(e, 1, &ctx, &err) == NR_OK, "%s", err.message);
  static float x[N], y[N];
  nr_buffer in = buffer(x), out[2] = {{0}, {0}};
  in.dims[1] = 7;
  CHECK(nr_context_run(ctx, &in, out, &err) == NR_ERR_SHAPE);
  CHECK(strstr(err.message, "'x'") && strstr(err.message, "float32[2x2000]") &&
            strstr(err.message, "float32[2x7]"),
        "message: %s", err.message);
  in = buffer(x);
  in.dtype = NR_DTYPE_INT32;
  CHECK(nr_context_run(ctx, &in, out, &err) == NR_ERR_SHAPE && strstr(err.message, "int32"),
        "message: %s", err.message);
  in = buffer(NULL);
  CHECK(nr_context_run(ctx, &in, out, &err) == NR_ERR_SHAPE, "message: %s", err.message);
  CHECK(nr_context_run(ctx, NULL, out, &err) == NR_ERR_INVALID_ARGUMENT);
  /* a caller buffer of the wrong shape is refused before anything runs */
  in = buffer(x);
  out[0] = buffer(y);
  out[0].dims[0] = 1;
  CHECK(nr_context_run(ctx, &in, out, &err) == NR_ERR_SHAPE && strstr(err.message, "'y'"),
        "message: %s", err.message);
  CHECK(out[1].data == NULL);
  /* the right shape is written in place; the other output is allocated */
  fill(x, 7);
  out[0] = buffer(y);
  REQUIRE(nr_context_run(ctx, &in, out, &err) == NR_OK, "%s", err.message);
  CHECK(out[0].data == y && y[5] == 2 * (2 * x[5] + (float)(5 % 7) - 3.0f));
  nr_buffer_free(&out[1]);
  nr_context_destroy(ctx);
  engine_free(e);
  CHECK(nr_context_create(NULL, 1, &ctx, &err) == NR_ERR_INVALID_ARGUMENT);
}

NR_TEST(context_step_error_names_node_and_tactic) {
  nr_plan *p = calloc(1, sizeof *p);
  p->graph = nr_graph_create(NULL);
  int64_t dims[1] = {8};
  int x = add_slot(p, "x", NR_SLOT_INPUT, 1, dims),
      y = add_slot(p, "y", NR_SLOT_ARENA, 1, dims);
  p->inputs = malloc(sizeof(int));
  p->outputs = malloc(sizeof(int));
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = y;
  add_step(p, "boom_node", "Relu", &t_fail, 1, (int[]){x}, y);
  nr_memory_plan(p, 1, true, NULL);
  nr_engine *e = engine_of(p, 1);
  nr_context *ctx = NULL;
  nr_error err = {0};
  REQUIRE(nr_context_create(e, 1, &ctx, &err) == NR_OK, "%s", err.message);
  float xd[8] = {0};
  nr_buffer in = {NR_DTYPE_FLOAT, 1, {8}, xd}, out = {0};
  CHECK(nr_context_run(ctx, &in, &out, &err) == NR_ERR_RUNTIME);
  CHECK(strstr(err.message, "boom_node") && strstr(err.message, "test_fail") &&
            strstr(err.message, "boom"),
        "message: %s", err.message);
  CHECK(out.data == NULL);
  nr_context_destroy(ctx);
  /* a plan whose offsets leave the arena is refused at creation */
  p->slots[y].offset = p->arena_size;
  CHECK(nr_context_create(e, 1, &ctx, &err) == NR_ERR_INTERNAL &&
            strstr(err.message, "'y'"),
        "message: %s", err.message);
  engine_free(e);
}

/* ---- the reference tactic -------------------------------------------------------- */

NR_TEST(context_runs_reference_tactic) {
  const nr_tactic *ref = nr_tactic_find("ref");
  REQUIRE(ref, "no 'ref' tactic registered");
  nr_plan *p = calloc(1, sizeof *p);
  p->graph = nr_graph_create(NULL);
  int64_t dims[2] = {2, N / 2};
  int x = add_slot(p, "x", NR_SLOT_INPUT, 2, dims),
      c = add_slot(p, "c", NR_SLOT_CONST, 2, dims);
  int a = add_slot(p, "a", NR_SLOT_ARENA, 2, dims),
      b = add_slot(p, "b", NR_SLOT_ARENA, 2, dims);
  int y = add_slot(p, "y", NR_SLOT_ARENA, 2, dims);
  static float cdata[N];
  fill(cdata, 3);
  nr_plan_add_weights(p, cdata, sizeof cdata, &p->slots[c].offset, NULL);
  p->inputs = malloc(sizeof(int));
  p->outputs = malloc(sizeof(int));
  p->inputs[p->n_inputs++] = x;
  p->outputs[p->n_outputs++] = y;
  add_step(p, "relu", "Relu", ref, 1, (int[]){x}, a);
  add_step(p, "add", "Add", ref, 2, (int[]){a, c}, b);
  add_step(p, "sigmoid", "Sigmoid", ref, 1, (int[]){b}, y);
  for (int k = 0; k < p->graph->n_nodes; k++)
    p->graph->nodes[k].def = nr_op_find("", p->graph->nodes[k].op_type, 13);
  nr_memory_plan(p, 2, true, NULL);
  nr_engine *e = engine_of(p, 2);
  nr_context *ctx = NULL;
  nr_error err = {0};
  REQUIRE(nr_context_create(e, 2, &ctx, &err) == NR_OK, "%s", err.message);
  static float xd[N];
  fill(xd, 11);
  nr_buffer in = buffer(xd), out = {0};
  REQUIRE(nr_context_run(ctx, &in, &out, &err) == NR_OK, "%s", err.message);
  const float *yd = out.data;
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double want = 1 / (1 + exp(-((xd[i] > 0 ? xd[i] : 0) + cdata[i])));
    worst = fmax(worst, fabs(yd[i] - want));
  }
  CHECK(worst < 1e-6, "max error %g", worst);
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  engine_free(e);
}

/* ---- concurrency ------------------------------------------------------------------ */

typedef struct conc_arg {
  const nr_engine *e;
  int id, reps, failures;
  float (*want_y)[N], (*want_w)[N];
  const float (*inputs)[N];
} conc_arg;

#define CONC_INPUTS 8

static void *conc_main(void *p) {
  conc_arg *a = p;
  nr_context *ctx = NULL;
  if (nr_context_create(a->e, 2, &ctx, NULL)) {
    a->failures++;
    return NULL;
  }
  static _Thread_local float y[N], w[N];
  for (int r = 0; r < a->reps; r++) {
    int k = (a->id + r) % CONC_INPUTS;
    nr_buffer in = buffer((float *)a->inputs[k]), out[2] = {buffer(y), buffer(w)};
    if (nr_context_run(ctx, &in, out, NULL) || memcmp(y, a->want_y[k], sizeof y) ||
        memcmp(w, a->want_w[k], sizeof w))
      a->failures++;
  }
  nr_context_destroy(ctx);
  return NULL;
}

NR_TEST(context_one_engine_four_threads) {
  nr_engine *e = make_engine(true, 2);
  static float inputs[CONC_INPUTS][N], want_y[CONC_INPUTS][N], want_w[CONC_INPUTS][N];
  nr_context *ctx = NULL;
  REQUIRE(nr_context_create(e, 1, &ctx, NULL) == NR_OK);
  for (int k = 0; k < CONC_INPUTS; k++) {
    fill(inputs[k], 100 + (uint64_t)k);
    nr_buffer in = buffer(inputs[k]), out[2] = {buffer(want_y[k]), buffer(want_w[k])};
    REQUIRE(nr_context_run(ctx, &in, out, NULL) == NR_OK);
  }
  nr_context_destroy(ctx);
  pthread_t th[4];
  conc_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (conc_arg){e, i, 300, 0, want_y, want_w, (const float(*)[N])inputs};
    REQUIRE(pthread_create(&th[i], NULL, conc_main, &args[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].failures == 0, "thread %d: %d of %d runs differ", i, args[i].failures,
          args[i].reps);
  }
  engine_free(e);
}
