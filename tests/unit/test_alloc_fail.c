/* test_alloc_fail.c - every allocation along load, prepare, build, engine
 * serialization and parsing, context creation and run may fail, and each failure gives a clean error: a status and a message, no
 * crash, no leaked block (fault_alloc.h counts them; ASan's leak check in the asan
 * stage sees the rest), and no swallowed failure that changes the output.
 *
 * The model is built in memory: Conv(3x3 pad 1) -> Relu -> GlobalAveragePool ->
 * Flatten -> MatMul -> Add, small enough that the sweep over every N stays short and
 * wide enough to reach conv packing, elementwise fusion, pooling, GEMM and the
 * memory plan. */
#include "fault_alloc.h"
#include "loader_models.h"
#include "unit.h"

#include "engine/engine.h"
#include "nnroute.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define C_IN 2
#define C_OUT 4
#define HW 6
#define N_OUT 3

static uint8_t *model_bytes(lm_arena *a, size_t *len) {
  static const int64_t x_dims[] = {1, C_IN, HW, HW}, w_dims[] = {C_OUT, C_IN, 3, 3},
                       b_dims[] = {C_OUT}, m_dims[] = {C_OUT, N_OUT}, y_dims[] = {1, N_OUT},
                       c_dims[] = {N_OUT};
  static float w[C_OUT * C_IN * 9], b[C_OUT], m[C_OUT * N_OUT], c[N_OUT];
  for (int i = 0; i < C_OUT * C_IN * 9; i++)
    w[i] = (float)((i * 7) % 11 - 5) / 8.0f;
  for (int i = 0; i < C_OUT; i++)
    b[i] = 0.25f * (float)(i - 1);
  for (int i = 0; i < C_OUT * N_OUT; i++)
    m[i] = (float)((i * 5) % 7 - 3) / 4.0f;
  for (int i = 0; i < N_OUT; i++)
    c[i] = 0.5f * (float)i;
  Onnx__GraphProto *g = lm_graph(a, "alloc_fail");
  lm_add_input(g, lm_value_info(a, "X", 1, 4, x_dims));
  lm_add_init(g, lm_tensor(a, "W", 1, 4, w_dims, w, sizeof w));
  lm_add_init(g, lm_tensor(a, "B", 1, 1, b_dims, b, sizeof b));
  lm_add_init(g, lm_tensor(a, "M", 1, 2, m_dims, m, sizeof m));
  lm_add_init(g, lm_tensor(a, "C", 1, 1, c_dims, c, sizeof c));
  Onnx__NodeProto *conv = lm_node(a, "Conv", "conv", "X", "W", "conv_out");
  conv->input[conv->n_input++] = lm_str(a, "B");
  Onnx__AttributeProto *pads = lm_attr(a, conv, "pads", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  int64_t *p = lm_alloc(a, 4 * sizeof *p);
  p[0] = p[1] = p[2] = p[3] = 1;
  pads->n_ints = 4, pads->ints = p;
  lm_add_node(g, conv);
  lm_add_node(g, lm_node(a, "Relu", "relu", "conv_out", NULL, "relu_out"));
  lm_add_node(g, lm_node(a, "GlobalAveragePool", "pool", "relu_out", NULL, "pool_out"));
  lm_add_node(g, lm_node(a, "Flatten", "flatten", "pool_out", NULL, "flat"));
  lm_add_node(g, lm_node(a, "MatMul", "matmul", "flat", "M", "mm"));
  lm_add_node(g, lm_node(a, "Add", "add", "mm", "C", "Y"));
  lm_add_output(g, lm_value_info(a, "Y", 1, 2, y_dims));
  return lm_pack(a, lm_model(a, 8, 13, g), len);
}

/* Where the pipeline stopped. */
typedef enum { AT_LOAD, AT_PREPARE, AT_BUILD, AT_SAVE, AT_PARSE, AT_CONTEXT, AT_RUN, AT_DONE } stage;
static const char *const stage_name[] = {"load",    "prepare", "build", "save",
                                         "parse",   "context", "run",   "done"};

/* Load -> prepare -> build -> serialize -> parse -> context -> run on x; y receives the output on success.
 * Everything made is destroyed before returning. */
static nr_status pipeline(const uint8_t *bytes, size_t len, const float *x, float *y,
                          stage *at, nr_error *err) {
  nr_model *m = NULL;
  nr_engine *built = NULL, *e = NULL;
  nr_context *ctx = NULL;
  uint8_t *file = NULL;
  size_t file_len = 0;
  nr_buffer in = {NR_DTYPE_FLOAT, 4, {1, C_IN, HW, HW}, (void *)x}, out = {0};
  nr_build_options bo = {sizeof bo, NULL, 1, NR_DEVICE_CPU, NULL};
  nr_status st;
  *at = AT_LOAD;
  if ((st = nr_model_load_bytes(bytes, len, NULL, &m, err)))
    goto done;
  *at = AT_PREPARE;
  if ((st = nr_model_prepare(m, err)))
    goto done;
  *at = AT_BUILD;
  if ((st = nr_engine_build(m, &bo, &built, err)))
    goto done;
  *at = AT_SAVE;
  if ((st = nr_engine_serialize(built, &file, &file_len, err)))
    goto done;
  *at = AT_PARSE;
  if ((st = nr_engine_parse(file, file_len, true, &e, err)))
    goto done;
  *at = AT_CONTEXT;
  if ((st = nr_context_create(e, 1, &ctx, err)))
    goto done;
  *at = AT_RUN;
  if ((st = nr_context_run(ctx, &in, &out, err)))
    goto done;
  *at = AT_DONE;
  if (out.dtype != NR_DTYPE_FLOAT || nr_buffer_count(&out) != N_OUT) {
    st = NR_ERR_INTERNAL;
    goto done;
  }
  memcpy(y, out.data, sizeof(float) * N_OUT);
done:
  nr_buffer_free(&out);
  nr_context_destroy(ctx);
  nr_engine_destroy(e);
  free(file);
  nr_engine_destroy(built);
  nr_model_destroy(m);
  return st;
}

NR_TEST(alloc_fail_every_allocation_gives_a_clean_error) {
  lm_arena a = {0};
  size_t len = 0;
  uint8_t *bytes = model_bytes(&a, &len);
  float x[C_IN * HW * HW], want[N_OUT], got[N_OUT];
  for (int i = 0; i < C_IN * HW * HW; i++)
    x[i] = (float)((i * 3) % 13 - 6) / 6.0f;
  stage at;
  nr_error err = {0};
  /* Twice unarmed-but-counting: lazily built tables are made on the first pass, so
   * the second one is what every armed pass repeats. */
  int64_t total = 0, live = 0;
  for (int pass = 0; pass < 2; pass++) {
    fault_alloc_arm(0);
    nr_status st = pipeline(bytes, len, x, want, &at, &err);
    fault_alloc_disarm(&total, &live, NULL);
    REQUIRE(!st, "the unarmed pipeline failed at %s: %s", stage_name[at], err.message);
  }
  CHECK(live == 0, "the unarmed pipeline leaves %lld blocks", (long long)live);
  REQUIRE(total > 100, "only %lld allocations counted: is nr_unit linked with --wrap?",
          (long long)total);
  int by_stage[AT_DONE + 1] = {0}, reported = 0;
  for (int64_t n = 1; n <= total + 1; n++) {
    int failed = 0;
    memset(&err, 0, sizeof err);
    fault_alloc_arm(n);
    nr_status st = pipeline(bytes, len, x, got, &at, &err);
    fault_alloc_disarm(NULL, &live, &failed);
    if (!failed)
      break; /* past the last allocation */
    by_stage[at]++;
    bool bad = live != 0;
    if (st)
      bad |= st != NR_ERR_NOMEM || !err.message[0];
    else
      bad |= memcmp(got, want, sizeof want) != 0;
    if (bad && reported++ < 8)
      CHECK(0, "allocation %lld of %lld failed: %s at %s, status '%s' (%s), %lld blocks leaked",
            (long long)n, (long long)total, st ? "stopped" : "went on", stage_name[at],
            nr_status_str(st), err.message, (long long)live);
    if (bad && reported == 8)
      fprintf(stderr, "alloc_fail: further failures not printed\n");
  }
  CHECK(reported == 0, "%d of %lld injected failures were not clean", reported,
        (long long)total);
  fprintf(stderr, "alloc_fail: %lld allocations; failures stopped the pipeline at",
          (long long)total);
  for (int s = 0; s <= AT_DONE; s++)
    fprintf(stderr, " %s %d%s", s == AT_DONE ? "none (went on)" : stage_name[s], by_stage[s],
            s == AT_DONE ? "\n" : ",");
  lm_free(&a);
}
