/* lowp_bench.c - fp32 against fp16 and bf16 tactics (precision@NODE) on single-node
 * graphs through the compiler and runtime, the way an engine runs them: a batch-1
 * 1024x1024 Gemm (transB, bias), a 768x3072 MatMul at M = 128, and two resnet50 1x1
 * convolutions. Each variant is an engine built along its route; tactics the
 * heuristic does not pick (oneDNN, block widening) are swapped into the step and
 * prepared as the profiling selector does. Prints a table: the tactic, the bytes of
 * its packed weights, the best time warm (weights left in cache between runs) and
 * cold (64 MiB written between runs, so weights come from memory), each also as a
 * ratio to the fp32 default of the same shape.
 *
 * Variants are timed in interleaved rounds and the best of each counts, so a
 * neighbour's burst on the shared machine hits all of them alike.
 *
 *   OMP_NUM_THREADS=N lowp_bench [--threads N] [--rounds R] [--shape SUBSTRING]
 */
#include "compiler/compile.h"
#include "engine/engine.h"
#include "kernels/cpu/lpgemm/lpgemm_impl.h"
#include "passes/pass_util.h"
#include "plan/knob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum { K_GEMM, K_MATMUL, K_CONV } kind;

typedef struct shape {
  const char *what, *node;
  kind k;
  int64_t m, n, k_, hw; /* GEMM: M x N x K; conv: output channels n, input k_, hw x hw */
} shape;

static const shape shapes[] = {
    {"Gemm batch 1, 1024x1024 (transB, bias)", "fc", K_GEMM, 1, 1024, 1024, 0},
    {"MatMul 128 x 768 x 3072", "mm", K_MATMUL, 128, 3072, 768, 0},
    {"resnet50 layer4 conv1x1 2048->512 @7x7", "pw", K_CONV, 1, 512, 2048, 7},
    {"resnet50 layer3 conv1x1 256->1024 @14x14", "pw", K_CONV, 1, 1024, 256, 14},
};

typedef struct variant {
  const char *label, *precision;
  const char *swap_gemm, *swap_conv; /* tactic to swap in, NULL: the heuristic's */
  bool swap;
} variant;

static const variant variants[] = {
    {"fp32", "fp32", NULL, NULL, false},
    {"fp32 oneDNN", "fp32", "onednn_inner_product", "onednn_conv", true},
    {"fp16", "fp16", NULL, NULL, false},
    {"fp16 block-widen", "fp16", "nr_f16w_gemm_12x32_bw__avx512", NULL, true},
    {"bf16", "bf16", NULL, NULL, false},
    {"bf16 block-widen", "bf16", "nr_bf16w_gemm_12x32_bw__avx512", NULL, true},
    {"bf16 oneDNN", "bf16", "onednn_bf16_inner_product", "onednn_bf16_conv", true},
};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

/* With one thread, the thread's CPU time (as gemm_bench.c): a neighbour that takes
 * the core away does not count against the tactic. oneDNN runs its own OpenMP
 * threads: run with OMP_NUM_THREADS equal to --threads. */
static clockid_t timer = CLOCK_MONOTONIC;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(timer, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *rnd(int64_t n, unsigned *seed) {
  float *p = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    p[i] = (float)(rand_r(seed) % 2001 - 1000) / 1000.0f;
  return p;
}

static int tensor(nr_graph *g, const char *name, unsigned flags, int rank,
                  const int64_t *dims, float *data) {
  int t = nr_graph_add_tensor(g, name, flags);
  g->tensors[t].value = (nr_value){NR_DTYPE_FLOAT, rank, {0}, data, data != NULL};
  memcpy(g->tensors[t].value.dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

/* The one-node graph of shape s; its input dims go to in_dims / *in_rank. */
static nr_graph *build(const shape *s, int64_t *in_dims, int *in_rank, nr_error *err) {
  unsigned seed = 1;
  nr_graph *g = nr_graph_create(NULL);
  g->opsets = calloc(1, sizeof *g->opsets);
  g->opsets[0].domain = strdup("");
  g->opsets[0].version = 13;
  g->n_opsets = 1;
  g->owns_opsets = true;
  int x, w, b, y = nr_graph_add_tensor(g, "y", NR_TENSOR_OUTPUT), node;
  if (s->k == K_CONV) {
    int64_t xd[4] = {1, s->k_, s->hw, s->hw}, wd[4] = {s->n, s->k_, 1, 1};
    x = tensor(g, "x", NR_TENSOR_INPUT, 4, xd, NULL);
    w = tensor(g, "w", NR_TENSOR_CONST, 4, wd, rnd(s->n * s->k_, &seed));
    b = tensor(g, "b", NR_TENSOR_CONST, 1, (int64_t[]){s->n}, rnd(s->n, &seed));
    node = nr_pu_add_node(g, s->node, "Conv", "", 3, (int[]){x, w, b}, 1, &y);
    memcpy(in_dims, xd, sizeof xd), *in_rank = 4;
  } else if (s->k == K_GEMM) {
    int64_t xd[2] = {s->m, s->k_}, wd[2] = {s->n, s->k_};
    x = tensor(g, "x", NR_TENSOR_INPUT, 2, xd, NULL);
    w = tensor(g, "w", NR_TENSOR_CONST, 2, wd, rnd(s->n * s->k_, &seed));
    b = tensor(g, "b", NR_TENSOR_CONST, 1, (int64_t[]){s->n}, rnd(s->n, &seed));
    node = nr_pu_add_node(g, s->node, "Gemm", "", 3, (int[]){x, w, b}, 1, &y);
    nr_pu_set_attr_int(g, node, "transB", 1, err);
    memcpy(in_dims, xd, sizeof xd), *in_rank = 2;
  } else {
    int64_t xd[2] = {s->m, s->k_}, wd[2] = {s->k_, s->n};
    x = tensor(g, "x", NR_TENSOR_INPUT, 2, xd, NULL);
    w = tensor(g, "w", NR_TENSOR_CONST, 2, wd, rnd(s->n * s->k_, &seed));
    node = nr_pu_add_node(g, s->node, "MatMul", "", 2, (int[]){x, w}, 1, &y);
    memcpy(in_dims, xd, sizeof xd), *in_rank = 2;
  }
  g->inputs = malloc(sizeof(int));
  g->inputs[g->n_inputs++] = x;
  g->outputs = malloc(sizeof(int));
  g->outputs[g->n_outputs++] = y;
  if (node < 0 || nr_graph_toposort(g, err) || nr_graph_bind_ops(g, err) ||
      nr_graph_infer(g, err) || nr_compiler_name_nodes(g, err)) {
    nr_graph_destroy(g);
    return NULL;
  }
  return g;
}

typedef struct built {
  bool ok;
  nr_route route;
  nr_plan *plan;
  nr_context *ctx;
  const char *tactic;
  nr_buffer out;     /* allocated by the first run, written in place after */
  uint64_t weight_bytes;
  double warm, cold; /* best seconds */
} built;

typedef struct finder {
  const char *id;
  const nr_node *node;
  const nr_tactic *found;
} finder;

static void find_row(const nr_tactic *t, void *user) {
  finder *f = user;
  if (!f->found && t->op_type && !strcmp(t->id, f->id) &&
      !strcmp(t->op_type, f->node->op_type) && !strcmp(t->domain, f->node->domain))
    f->found = t;
}

/* Puts tactic id on the step of node `name` and prepares it; false when it cannot. */
static bool swap(nr_plan *p, const nr_route *r, const char *name, const char *id) {
  for (int k = 0; k < p->n_steps; k++) {
    nr_step *st = &p->steps[k];
    if (st->node < 0 || strcmp(p->graph->nodes[st->node].name, name))
      continue;
    finder f = {id, &p->graph->nodes[st->node], NULL};
    nr_tactic_foreach(find_row, &f);
    nr_error err = {0};
    nr_tactic_ctx c = {p, f.node, st, r, &err, 1};
    if (!f.found || (f.found->isa & ~nr_cpu_isa()) || !f.found->supports(&c))
      return false;
    st->tactic = f.found;
    st->scratch = 0;
    if (f.found->prepare(&c, p, st))
      return false;
    if (st->scratch > p->scratch_size)
      p->scratch_size = st->scratch;
    return true;
  }
  return false;
}

static void build_variant(const nr_graph *g, const nr_knob_space *space, const shape *s,
                          const variant *v, int threads, built *b) {
  memset(b, 0, sizeof *b);
  const char *id = s->k == K_CONV ? v->swap_conv : v->swap_gemm;
  if (v->swap && !id)
    return;
  char text[128] = "";
  if (strcmp(v->precision, "fp32"))
    snprintf(text, sizeof text, "-precision@%s=%s", s->node, v->precision);
  nr_error err = {0};
  if (nr_route_init(&b->route, space, &err) || nr_route_parse(&b->route, text, &err) ||
      nr_compile(g, &b->route, threads, NULL, &b->plan, &err)) {
    fprintf(stderr, "%s %s: %s\n", s->what, v->label, err.message);
    return;
  }
  if (id && !swap(b->plan, &b->route, s->node, id))
    return;
  for (int k = 0; k < b->plan->n_steps; k++)
    if (b->plan->steps[k].node >= 0 &&
        !strcmp(b->plan->graph->nodes[b->plan->steps[k].node].name, s->node)) {
      b->tactic = b->plan->steps[k].tactic->id;
      b->weight_bytes = b->plan->steps[k].packed_size;
    }
  nr_engine e = {.plan = b->plan, .threads = threads};
  b->ok = !nr_context_create(&e, threads, &b->ctx, &err);
  b->warm = b->cold = 1e30;
}

static void free_variant(built *b) {
  nr_buffer_free(&b->out);
  nr_context_destroy(b->ctx);
  nr_plan_destroy(b->plan);
  nr_route_free(&b->route);
}

#define FLUSH_BYTES (64u << 20)

/* Writes every cache line of a buffer larger than the caches. */
static void flush(char *buf) {
  for (size_t i = 0; i < FLUSH_BYTES; i += 64)
    buf[i]++;
}

static double time_run(built *b, const nr_buffer *in, char *flush_buf) {
  nr_error err = {0};
  if (flush_buf)
    flush(flush_buf);
  double t0 = now_s();
  nr_status s = nr_context_run(b->ctx, in, &b->out, &err);
  double dt = now_s() - t0;
  return s ? 1e30 : dt;
}

static void bench_shape(const shape *s, int threads, int rounds, char *flush_buf) {
  int64_t in_dims[4];
  int in_rank = 0;
  nr_error err = {0};
  nr_graph *g = build(s, in_dims, &in_rank, &err);
  nr_knob_space space = {0};
  if (!g || nr_knob_space_build(g, &space, &err)) {
    fprintf(stderr, "%s: %s\n", s->what, err.message);
    return;
  }
  nr_buffer in = {NR_DTYPE_FLOAT, in_rank, {0}, NULL};
  memcpy(in.dims, in_dims, sizeof(int64_t) * (size_t)in_rank);
  unsigned seed = 2;
  in.data = rnd((int64_t)nr_buffer_count(&in), &seed);
  built b[N_VARIANTS];
  for (int v = 0; v < N_VARIANTS; v++)
    build_variant(g, &space, s, &variants[v], threads, &b[v]);
  for (int r = 0; r < rounds; r++)
    for (int v = 0; v < N_VARIANTS; v++) {
      if (!b[v].ok)
        continue;
      for (int i = 0; i < 10; i++) {
        double w = time_run(&b[v], &in, NULL);
        b[v].warm = w < b[v].warm ? w : b[v].warm;
      }
      for (int i = 0; i < 3; i++) {
        double c = time_run(&b[v], &in, flush_buf);
        b[v].cold = c < b[v].cold ? c : b[v].cold;
      }
    }
  printf("-- %s (%d thread%s)\n", s->what, threads, threads > 1 ? "s" : "");
  printf("%-17s %-34s %10s %10s %6s %10s %6s\n", "variant", "tactic", "weights", "warm us",
         "x fp32", "cold us", "x fp32");
  for (int v = 0; v < N_VARIANTS; v++) {
    if (!b[v].ok)
      continue;
    printf("%-17s %-34s %10llu %10.1f %6.2f %10.1f %6.2f\n", variants[v].label, b[v].tactic,
           (unsigned long long)b[v].weight_bytes, b[v].warm * 1e6, b[0].warm / b[v].warm,
           b[v].cold * 1e6, b[0].cold / b[v].cold);
  }
  for (int v = 0; v < N_VARIANTS; v++)
    free_variant(&b[v]);
  free(in.data);
  nr_knob_space_free(&space);
  nr_graph_destroy(g);
}

int main(int argc, char **argv) {
  int threads = 1, rounds = 5;
  const char *filter = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
      filter = argv[++i];
    else {
      fprintf(stderr, "usage: lowp_bench [--threads N] [--rounds R] [--shape SUBSTRING]\n");
      return 2;
    }
  }
  if (threads == 1)
    timer = CLOCK_THREAD_CPUTIME_ID;
  const char *omp = getenv("OMP_NUM_THREADS");
  if (!omp || atoi(omp) != threads)
    fprintf(stderr, "note: OMP_NUM_THREADS is %s, oneDNN rows may use other threads than "
            "--threads %d\n", omp ? omp : "unset", threads);
  char *flush_buf = calloc(1, FLUSH_BYTES);
  if (!flush_buf)
    return 1;
  printf("x fp32: time of the fp32 default / time of the variant (above 1: faster)\n");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    if (!filter || strstr(shapes[i].what, filter))
      bench_shape(&shapes[i], threads, rounds, flush_buf);
  free(flush_buf);
  return 0;
}
