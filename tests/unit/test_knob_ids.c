/* test_knob_ids.c - knob ids: every id of every table's enum names a row whose name
 * round-trips (id -> row -> name -> row -> id) and every row has an id; the route
 * parser, the one place that reads knob names, rejects a misspelt one loudly; the
 * rows that restrict tactic choice (their `restricts` field) are the expected ones,
 * and the values that name tactics agree with the tactic rows.
 *
 * The id enums live next to their tables (compile_knobs.h, pass_knobs.h, the
 * kernel families' *_knobs.h, cuda_knobs.h); the list below names each family's
 * range once, and a static_assert keeps it in step with families.h. */
#include "unit.h"

#include "backends/cuda/cuda_knobs.h"
#include "plan/compile_knobs.h"
#include "plan/knob_internal.h"
#include "plan/tactic.h"
#include "plan/route.h"
#include "kernels/cpu/attn/attn_knobs.h"
#include "kernels/cpu/conv/conv_knobs.h"
#include "kernels/cpu/eltwise/eltwise_knobs.h"
#include "kernels/cpu/gemm/gemm_knobs.h"
#include "kernels/cpu/norm/norm_knobs.h"
#include "passes/pass_knobs.h"

#include <stdio.h>
#include <string.h>

/* One past each family's last id, in families.h order. */
static const nr_knob_id family_ends[] = {
    NR_KNOB_COMPILE_END,     NR_KNOB_FOLD_END,        NR_KNOB_FUSE_END,        NR_KNOB_TAPS_END,
    NR_KNOB_ELTWISE_FUSE_END, NR_KNOB_RECOGNIZE_END,  NR_KNOB_HORIZONTAL_END,
    NR_KNOB_TRANSPOSE_END,   NR_KNOB_LAYOUT_END,      NR_KNOB_MEMORY_END,
    NR_KNOB_PRECISION_END,   NR_KNOB_GEMM_END,        NR_KNOB_CONV_END,
    NR_KNOB_CPU_ELTWISE_END, NR_KNOB_CPU_NORM_END,    NR_KNOB_CPU_ATTN_END,
    NR_KNOB_CUDA_END,        NR_KNOB_INT8_CHAIN_END,  NR_KNOB_FAULT_END,
};
_Static_assert(sizeof family_ends / sizeof family_ends[0] == NR_KNOB_FAMILY_COUNT,
               "one entry per knob family");

static void count_row(const nr_knob_def *d, void *user) { ++*(int *)user; }

NR_TEST(knob_ids_round_trip) {
  int ids = 0;
  for (int f = 0; f < NR_KNOB_FAMILY_COUNT; f++) {
    CHECK(family_ends[f] >> 8 == f, "family %d: its END id is in family %d", f,
          family_ends[f] >> 8);
    for (nr_knob_id id = f << 8; id < family_ends[f]; id++, ids++) {
      const nr_knob_def *d = nr_knob_def_of(id);
      REQUIRE(d && d->name, "id %#x (family %d row %d) has no row", id, f, NR_KNOB_ROW(id));
      CHECK(nr_knob_find(d->name) == d, "%s", d->name);
      CHECK(nr_knob_id_of(d) == id, "%s: id %#x, back %#x", d->name, id, nr_knob_id_of(d));
      CHECK(!strcmp(nr_knob_name(id), d->name), "%s", d->name);
    }
    CHECK(nr_knob_def_of(family_ends[f]) == NULL, "family %d: a row past its enum", f);
  }
  int rows = 0;
  nr_knob_foreach(count_row, &rows);
  CHECK(rows == ids, "%d rows in the tables, %d ids in the enums", rows, ids);
  CHECK(nr_knob_def_of(-1) == NULL && nr_knob_def_of(NR_KNOB_FAMILY_COUNT << 8) == NULL);
  CHECK(!strcmp(nr_knob_name(-1), "?"));
  static const nr_knob_def stray = {"gemm.mc", "auto|48", "auto", NR_KNOB_NODE, 0, 0, "x"};
  CHECK(nr_knob_id_of(&stray) == -1 && nr_knob_id_of(NULL) == -1, "only real rows");
}

/* A few ids spelled out: the enum entry and the name agree. */
NR_TEST(knob_ids_name_their_rows) {
  static const struct {
    nr_knob_id id;
    const char *name;
  } some[] = {
      {NR_KNOB_COMPILE_TACTIC_SELECTION, "compile.tactic_selection"},
      {NR_KNOB_PREC, "precision"},
      {NR_KNOB_QUANT_CALIBRATION, "quant.calibration"},
      {NR_KNOB_GEMM_MC, "gemm.mc"},
      {NR_KNOB_GEMM_EPILOGUE, "gemm.epilogue"},
      {NR_KNOB_CONV_ALGO, "conv.algo"},
      {NR_KNOB_CONV_DW_KERNEL, "conv.dw_kernel"},
      {NR_KNOB_GELU_APPROX, "gelu.approx"},
      {NR_KNOB_REDUCE_REASSOC, "reduce.reassoc"},
      {NR_KNOB_ATTENTION_KV_BLOCK, "attention.kv_block"},
      {NR_KNOB_RECOGNIZE_ATTENTION_HEADS, "recognize.attention_heads"},
      {NR_KNOB_MEMORY_VIEWS, "memory.views"},
      {NR_KNOB_QUANT_CHAIN, "quant.chain"},
      {NR_KNOB_TEST_DELAY_MS, "test.delay_ms"},
      {NR_KNOB_CUDA_PRECISION, "cuda.precision"},
      {NR_KNOB_CUDA_WORKSPACE, "cuda.workspace"},
  };
  for (size_t i = 0; i < sizeof some / sizeof some[0]; i++)
    CHECK(!strcmp(nr_knob_name(some[i].id), some[i].name), "%s is %s", some[i].name,
          nr_knob_name(some[i].id));
}

NR_TEST(knob_ids_route_parser_rejects_unknown_names) {
  nr_knob_space s;
  nr_route r;
  nr_error err = {0};
  REQUIRE(nr_knob_space_build(NULL, &s, &err) == NR_OK, "%s", err.message);
  REQUIRE(nr_route_init(&r, &s, &err) == NR_OK);
  CHECK(nr_route_parse(&r, "-memory.plan=naive -memory.algn=256", &err) ==
        NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "unknown knob 'memory.algn'") &&
            strstr(err.message, "memory.align"),
        "%s", err.message);
  CHECK(nr_route_changes(&r) == 0, "a failed parse leaves the route as it was");
  CHECK(nr_route_parse(&r, "-gemm.mcc@*=48", &err) == NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "unknown knob 'gemm.mcc'"), "%s", err.message);
  REQUIRE(nr_route_parse(&r, "-memory.align=256", &err) == NR_OK, "%s", err.message);
  CHECK(nr_route_is(&r, NR_KNOB_MEMORY_ALIGN, NULL, "256"));
  nr_route_expr e;
  CHECK(nr_route_expr_parse(&e, &s, "-memory.plann=[naive|greedy_size]", &err) ==
        NR_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err.message, "unknown knob 'memory.plann'"), "%s", err.message);
  nr_route_free(&r);
  nr_knob_space_free(&s);
}

/* ---- restricting knobs and the tactic rows -------------------------------------- */

NR_TEST(knob_ids_restricting_rows) {
  static const nr_knob_id want[] = {
      NR_KNOB_PREC,           NR_KNOB_PRECISION_INT8_SOURCE, NR_KNOB_GEMM_TACTIC,
      NR_KNOB_CONV_ALGO,      NR_KNOB_CONV_LAYOUT,           NR_KNOB_ELTWISE_TACTIC,
      NR_KNOB_POOL_TACTIC,    NR_KNOB_ATTENTION_TACTIC,      NR_KNOB_CUDA_PRECISION,
      NR_KNOB_CUDA_GEMM_TACTIC, NR_KNOB_CUDA_CONV_TACTIC,   NR_KNOB_CUDA_CONV_LAYOUT,
  };
  const nr_knob_def *got[NR_KNOB_MAX_RESTRICTING];
  int n = nr_knob_restricting(got, NR_KNOB_MAX_RESTRICTING);
  REQUIRE(n == (int)(sizeof want / sizeof want[0]), "%d restricting rows", n);
  for (int i = 0; i < n; i++)
    CHECK(got[i] == nr_knob_def_of(want[i]), "row %d: %s, want %s", i, got[i]->name,
          nr_knob_name(want[i]));
}

typedef struct value_use {
  const nr_knob_def *def;
  uint64_t used; /* values some tactic allows */
  bool all_named;
  const char *family_op; /* the op whose tactics the knob steers, or NULL */
} value_use;

static bool steers(const value_use *u, const nr_tactic *t) {
  return u->family_op && t->op_type && !strcmp(t->op_type, u->family_op) &&
         t->device == NR_DEVICE_CPU && t->precision == NR_PREC_FP32;
}

static void use_tactic(const nr_tactic *t, void *user) {
  value_use *u = user;
  uint64_t bits = nr_knob_allowing(u->def, t);
  u->used |= bits;
  if (steers(u, t) && !bits)
    u->all_named = false;
}

static value_use uses(nr_knob_id id, const char *op) {
  value_use u = {nr_knob_def_of(id), 0, true, op};
  nr_tactic_foreach(use_tactic, &u);
  return u;
}

/* The values other than auto (bit i: value i). */
static uint64_t named_values(const nr_knob_def *d) {
  uint64_t bits = 0;
  const char *s;
  size_t len;
  for (int i = 0; nr_knob_value_at(d->values, i, &s, &len); i++)
    if (len != 4 || memcmp(s, "auto", 4))
      bits |= 1ull << i;
  return bits;
}

/* Every value of a restricting knob allows some tactic of the registry; for the
 * knobs whose values list a family's tactics (conv.algo, conv.layout: every fp32
 * Conv tactic; gemm.tactic: every fp32 Gemm tactic), every such tactic is named by
 * a value. The lists stay hand-written (deriving them from the tactic rows would
 * change their order, which the knob schema hash and docs/knobs.md pin). */
NR_TEST(knob_ids_values_agree_with_tactic_rows) {
  const nr_knob_def *rows[NR_KNOB_MAX_RESTRICTING];
  int n = nr_knob_restricting(rows, NR_KNOB_MAX_RESTRICTING);
  for (int i = 0; i < n; i++) {
    const nr_knob_def *d = rows[i];
#ifndef NR_HAVE_CUDA
    if (!(nr_knob_devices(d) & NR_KNOB_DEVICE(NR_DEVICE_CPU)))
      continue; /* the CUDA tactics are registered in CUDA builds only */
#endif
    value_use u = uses(nr_knob_id_of(d), NULL);
    uint64_t want = named_values(d);
    CHECK((u.used & want) == want, "%s: values %#llx name no tactic (values %s)", d->name,
          (unsigned long long)(want & ~u.used), d->values);
  }
  static const struct {
    nr_knob_id id;
    const char *op;
  } families[] = {{NR_KNOB_CONV_ALGO, "Conv"},
                  {NR_KNOB_CONV_LAYOUT, "Conv"},
                  {NR_KNOB_GEMM_TACTIC, "Gemm"},
                  {NR_KNOB_GEMM_TACTIC, "MatMul"}};
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    value_use u = uses(families[f].id, families[f].op);
    CHECK(u.all_named, "%s: a %s tactic no value names", nr_knob_name(families[f].id),
          families[f].op);
  }
}

/* nr_knob_allows reads the row's restricts field; "auto" allows everything. */
NR_TEST(knob_ids_allows_by_field) {
  const nr_tactic *im2col = nr_tactic_find("nr_f32_conv_im2col");
  REQUIRE(im2col);
  const nr_knob_def *algo = nr_knob_def_of(NR_KNOB_CONV_ALGO);
  const nr_knob_def *layout = nr_knob_def_of(NR_KNOB_CONV_LAYOUT);
  CHECK(nr_knob_allows(algo, "im2col", im2col) && !nr_knob_allows(algo, "direct", im2col));
  CHECK(nr_knob_allows(algo, "auto", im2col) && nr_knob_allows(algo, NULL, im2col));
  CHECK(nr_knob_allows(layout, "plain", im2col) && !nr_knob_allows(layout, "nhwc", im2col));
  CHECK(nr_knob_allows(nr_knob_def_of(NR_KNOB_GEMM_MC), "48", im2col), "not restricting");
  CHECK(nr_knob_allowing(algo, im2col) == 1ull << 1, "%#llx",
        (unsigned long long)nr_knob_allowing(algo, im2col));
  CHECK(!nr_route_pins(NULL, NR_KNOB_CONV_ALGO, NULL, im2col));
}

/* A row's `needs` route names knobs that exist (the route parser reads it when
 * check-knobs runs; a misspelt name would only show there). */
static void check_needs(const nr_knob_def *d, void *user) {
  int *bad = user;
  for (const char *p = d->needs; p && *p;) {
    const char *name = strchr(p, '-');
    if (!name)
      break;
    name++;
    size_t len = strcspn(name, "@= ");
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s", (int)len, name);
    *bad += nr_knob_find(buf) == NULL;
    p = name + len;
  }
}

NR_TEST(knob_ids_needs_name_real_knobs) {
  int bad = 0;
  nr_knob_foreach(check_needs, &bad);
  CHECK(bad == 0, "%d needs routes name unknown knobs", bad);
}
