/* test_node_desc.c - the backend-neutral node descriptions (src/ir/node_desc.h).
 *
 * Key decision: a description is checked by using it, not by restating its code. For
 * each Gemm / MatMul / FusedGemm / FusedMatMul case, random operands go through two
 * independent computations of Y: one straight from the ONNX definition on the
 * operands' own shapes (transposes, numpy batch broadcasting, 1-D operands promoted
 * and their dim dropped, C unidirectionally broadcast to [M, N]), the other reading
 * nothing but the description (products at a_stride/b_stride offsets, the addend at
 * add_rows x add_cols, alpha, beta, R, the activation). They must agree on every
 * element, and Y's element count must be the description's. Attention strides are
 * checked against the element formula of the 3-D and 4-D layouts, Concat / Split
 * pieces against a direct walk, Conv / FusedConv windows against pads and sizes
 * worked out by hand (auto_pad, 1-D, dilation, groups). Malformed nodes must be refused with
 * NR_ERR_INVALID_MODEL and a message naming the node; valid ONNX outside what the
 * descriptions cover with NR_ERR_UNSUPPORTED. */
#include "ir/fused.h"
#include "ir/node_desc.h"
#include "op_test.h"
#include "rng.h"
#include "unit.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- building nodes and operand lists ---------------------------------------------- */

static nr_node make_node(const char *op, const char *domain, int opset, nr_attr *attrs,
                         int n_attrs) {
  nr_node n = {.name = (char *)"n0", .op_type = (char *)op, .domain = (char *)domain};
  n.opset = opset, n.n_attrs = n_attrs, n.attrs = attrs;
  return n;
}

/* shapes[i] = {rank, d0, d1, ...}; rank -1: absent. */
static void set_value(nr_value *v, const int64_t *s) {
  memset(v, 0, sizeof *v);
  v->dtype = NR_DTYPE_FLOAT;
  v->rank = (int)s[0];
  for (int d = 0; d < v->rank; d++)
    v->dims[d] = s[1 + d];
}

static void make_io(nr_node_io *io, int n_in, const int64_t (*in)[9], int n_out,
                    const int64_t (*out)[9]) {
  memset(io, 0, sizeof *io);
  io->n_in = n_in, io->n_out = n_out;
  for (int i = 0; i < n_in; i++)
    if ((io->has_in[i] = in[i][0] >= 0))
      set_value(&io->in[i], in[i]);
  for (int o = 0; o < n_out; o++)
    if ((io->has_out[o] = out[o][0] >= 0))
      set_value(&io->out[o], out[o]);
}

static int64_t count(const nr_value *v) {
  int64_t c = 1;
  for (int d = 0; d < v->rank; d++)
    c *= v->dims[d];
  return c;
}

/* ---- GEMM: the ONNX definition -------------------------------------------------------- */

typedef struct gemm_case {
  const char *op;     /* Gemm, MatMul, FusedGemm, FusedMatMul */
  int64_t a[9], b[9]; /* {rank, dims...} */
  int64_t c[9];       /* input 2 ({-1}: absent) */
  bool ta, tb, res;
  float alpha, beta;
  nr_act act;
  nr_gemm_addend add; /* expected classification */
} gemm_case;

typedef struct ref_shape {
  int rank;
  int64_t dims[NR_MAX_RANK];
} ref_shape;

/* Y's shape and element count by the ONNX rules, from the operands' shapes alone. */
static ref_shape onnx_y_shape(const gemm_case *g) {
  ref_shape y = {0};
  bool gemm = strstr(g->op, "Gemm") != NULL;
  if (gemm) {
    y.rank = 2;
    y.dims[0] = g->a[1 + (g->ta ? 1 : 0)];
    y.dims[1] = g->b[1 + (g->tb ? 0 : 1)];
    return y;
  }
  int ab = g->a[0] > 2 ? (int)g->a[0] - 2 : 0, bb = g->b[0] > 2 ? (int)g->b[0] - 2 : 0;
  int r = ab > bb ? ab : bb;
  for (int d = 0; d < r; d++) {
    int64_t x = d >= r - ab ? g->a[1 + d - (r - ab)] : 1;
    int64_t z = d >= r - bb ? g->b[1 + d - (r - bb)] : 1;
    y.dims[y.rank++] = x > z ? x : z;
  }
  if (g->a[0] > 1)
    y.dims[y.rank++] = g->a[g->a[0] - 1];
  if (g->b[0] > 1)
    y.dims[y.rank++] = g->b[g->b[0]];
  return y;
}

static int64_t shape_count(const ref_shape *s) {
  int64_t c = 1;
  for (int d = 0; d < s->rank; d++)
    c *= s->dims[d];
  return c;
}

/* Flat index into an operand of shape s (rank r, dims) of the broadcast coordinate
 * idx over shape y (right-aligned; size-1 dims read index 0). */
static int64_t bcast_index(const int64_t *s, const ref_shape *y, const int64_t *idx) {
  int r = (int)s[0];
  int64_t at = 0;
  for (int d = 0; d < r; d++) {
    int64_t dim = s[1 + d], i = idx[y->rank - r + d];
    at = at * dim + (dim == 1 ? 0 : i);
  }
  return at;
}

static float act_ref(nr_act act, float x) {
  switch (act) {
  case NR_ACT_RELU: return x > 0 ? x : 0;
  case NR_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
  case NR_ACT_TANH: return tanhf(x);
  default: return x;
  }
}

/* Y element by element from the definition: Gemm on op(A), op(B) and C broadcast to
 * [M, N]; MatMul over broadcast batch coordinates, 1-D operands promoted. */
static void onnx_eval(const gemm_case *g, const float *a, const float *b, const float *c,
                      const float *r, float *y) {
  ref_shape ys = onnx_y_shape(g);
  bool gemm = strstr(g->op, "Gemm") != NULL;
  int64_t k = gemm ? g->a[1 + (g->ta ? 0 : 1)] : g->a[g->a[0]];
  int64_t total = shape_count(&ys), idx[NR_MAX_RANK];
  for (int64_t e = 0; e < total; e++) {
    int64_t rem = e;
    for (int d = ys.rank - 1; d >= 0; d--) {
      idx[d] = rem % ys.dims[d];
      rem /= ys.dims[d];
    }
    double s = 0;
    int64_t i = 0, j = 0;
    if (gemm) {
      i = idx[0], j = idx[1];
      int64_t m = ys.dims[0], n = ys.dims[1];
      for (int64_t p = 0; p < k; p++)
        s += (double)a[g->ta ? p * m + i : i * k + p] * b[g->tb ? j * k + p : p * n + j];
    } else {
      /* promote: A [K] -> [1, K], B [K] -> [K, 1]; coordinates over Y with the dropped
       * dims put back as 0 */
      int64_t full[NR_MAX_RANK + 2];
      ref_shape fs = {0};
      int nb = ys.rank - (g->a[0] > 1) - (g->b[0] > 1);
      for (int d = 0; d < nb; d++)
        full[d] = idx[d], fs.dims[fs.rank++] = ys.dims[d];
      i = g->a[0] > 1 ? idx[nb] : 0;
      j = g->b[0] > 1 ? idx[ys.rank - 1] : 0;
      int64_t ap[9], bp[9];
      memcpy(ap, g->a, sizeof ap), memcpy(bp, g->b, sizeof bp);
      if (g->a[0] == 1)
        ap[0] = 2, ap[1] = 1, ap[2] = g->a[1];
      if (g->b[0] == 1)
        bp[0] = 2, bp[1] = g->b[1], bp[2] = 1;
      fs.rank = nb + 2;
      for (int64_t p = 0; p < k; p++) {
        full[nb] = i, full[nb + 1] = p;
        int64_t ai = bcast_index(ap, &fs, full);
        full[nb] = p, full[nb + 1] = j;
        int64_t bi = bcast_index(bp, &fs, full);
        s += (double)a[ai] * b[bi];
      }
    }
    double v = gemm ? g->alpha * s : s;
    if (c && g->c[0] >= 0 && gemm) { /* C broadcast to [M, N] */
      ref_shape mn = {2, {ys.dims[0], ys.dims[1]}};
      int64_t ij[2] = {i, j};
      v += g->beta * c[bcast_index(g->c, &mn, ij)];
    } else if (c && g->c[0] >= 0) { /* FusedMatMul's Bias along the last axis */
      v += c[j];
    }
    if (r)
      v += r[e];
    y[e] = act_ref(g->act, (float)v);
  }
}

/* Y from the description alone. */
static void desc_eval(const nr_gemm_desc *d, const float *a, const float *b,
                      const float *c, const float *r, float *y) {
  for (int64_t bt = 0; bt < d->batch; bt++) {
    int64_t ao = 0, bo = 0;
    int64_t rem = bt;
    for (int e = d->batch_rank - 1; e >= 0; e--) {
      int64_t x = rem % d->batch_dims[e];
      rem /= d->batch_dims[e];
      ao += x * d->a_stride[e], bo += x * d->b_stride[e];
    }
    for (int64_t i = 0; i < d->m; i++)
      for (int64_t j = 0; j < d->n; j++) {
        double s = 0;
        for (int64_t p = 0; p < d->k; p++)
          s += (double)a[ao + (d->trans_a ? p * d->m + i : i * d->k + p)] *
               b[bo + (d->trans_b ? j * d->k + p : p * d->n + j)];
        double v = d->alpha * s;
        if (d->add != NR_GEMM_ADD_NONE)
          v += d->beta *
               c[(d->add_rows == 1 ? 0 : i) * d->add_cols + (d->add_cols == 1 ? 0 : j)];
        int64_t e = (bt * d->m + i) * d->n + j;
        if (d->residual)
          v += r[e];
        y[e] = act_ref(d->act, (float)v);
      }
  }
}

static nr_node gemm_node(const gemm_case *g, nr_attr *attrs) {
  bool fused = !strncmp(g->op, "Fused", 5);
  int n = 0;
  attrs[n++] = attr_i("transA", g->ta);
  attrs[n++] = attr_i("transB", g->tb);
  attrs[n++] = attr_f("alpha", g->alpha);
  attrs[n++] = attr_f("beta", g->beta);
  if (fused)
    attrs[n++] = attr_s("activation", nr_act_name(g->act));
  return make_node(g->op, fused ? "nnroute" : "", fused ? 1 : 13, attrs, n);
}

static void gemm_io(const gemm_case *g, nr_node_io *io) {
  int64_t in[4][9] = {{-1}, {-1}, {-1}, {-1}}, out[1][9];
  ref_shape ys = onnx_y_shape(g);
  memcpy(in[0], g->a, sizeof in[0]);
  memcpy(in[1], g->b, sizeof in[1]);
  memcpy(in[2], g->c, sizeof in[2]);
  out[0][0] = ys.rank;
  memcpy(&out[0][1], ys.dims, sizeof(int64_t) * (size_t)ys.rank);
  if (g->res)
    memcpy(in[3], out[0], sizeof in[3]);
  int n_in = g->res ? 4 : 2 + (g->c[0] >= 0);
  make_io(io, n_in, (const int64_t(*)[9])in, 1, (const int64_t(*)[9])out);
}

/* clang-format off */
#define S0 {0}
#define S1(a) {1, a}
#define S2(a, b) {2, a, b}
#define S3(a, b, c) {3, a, b, c}
#define S4(a, b, c, d) {4, a, b, c, d}
#define NONE {-1}

/* M = 3, K = 4, N = 5 unless the shapes say otherwise. */
static const gemm_case gemm_cases[] = {
    /* Gemm: every transpose, every C broadcast */
    {"Gemm", S2(3, 4), S2(4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_NONE},
    {"Gemm", S2(4, 3), S2(4, 5), S0, 1, 0, 0, 0.5f, 2.0f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"Gemm", S2(3, 4), S2(5, 4), S1(1), 0, 1, 0, 1.5f, -1.0f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"Gemm", S2(4, 3), S2(5, 4), S1(5), 1, 1, 0, 1.0f, 0.25f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"Gemm", S2(3, 4), S2(4, 5), S2(1, 5), 0, 0, 0, 2.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"Gemm", S2(3, 4), S2(4, 5), S2(1, 1), 0, 0, 0, 1.0f, 3.0f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"Gemm", S2(3, 4), S2(5, 4), S2(3, 1), 0, 1, 0, 1.0f, 0.5f, NR_ACT_NONE, NR_GEMM_ADD_ROW},
    {"Gemm", S2(4, 3), S2(4, 5), S2(3, 5), 1, 0, 0, -1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_FULL},
    {"Gemm", S2(1, 4), S2(4, 5), S2(1, 5), 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"Gemm", S2(3, 4), S2(4, 1), S2(3, 1), 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_ROW},
    {"Gemm", S2(3, 4), S2(1, 4), S1(1), 0, 1, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_COL},
    {"FusedGemm", S2(3, 4), S2(5, 4), S1(5), 0, 1, 1, 1.0f, 1.0f, NR_ACT_RELU, NR_GEMM_ADD_COL},
    {"FusedGemm", S2(4, 3), S2(4, 5), S2(3, 5), 1, 0, 0, 2.0f, 0.5f, NR_ACT_SIGMOID,
     NR_GEMM_ADD_FULL},
    /* MatMul: 1-D operands, batch folding and broadcasting */
    {"MatMul", S1(4), S1(4), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_NONE},
    {"MatMul", S1(4), S2(4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_NONE},
    {"MatMul", S2(3, 4), S1(4), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_NONE},
    {"MatMul", S2(3, 4), S2(4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE, NR_GEMM_ADD_NONE},
    {"MatMul", S4(2, 3, 3, 4), S2(4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S4(2, 1, 3, 4), S3(3, 4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S2(3, 4), S3(2, 4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S3(1, 3, 4), S3(4, 4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S4(2, 3, 3, 4), S1(4), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S1(4), S4(2, 3, 4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S4(3, 1, 3, 4), S4(1, 2, 4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S3(2, 3, 4), S3(2, 4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"MatMul", S3(2, 0, 4), S2(4, 5), NONE, 0, 0, 0, 1.0f, 1.0f, NR_ACT_NONE,
     NR_GEMM_ADD_NONE},
    {"FusedMatMul", S3(2, 3, 4), S2(4, 5), S1(5), 0, 0, 1, 1.0f, 1.0f, NR_ACT_TANH,
     NR_GEMM_ADD_COL},
    {"FusedMatMul", S4(2, 1, 3, 4), S3(2, 4, 5), S2(1, 5), 0, 0, 1, 1.0f, 1.0f, NR_ACT_RELU,
     NR_GEMM_ADD_COL},
};

static float *rand_buf(nr_rng *r, int64_t n) {
  float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; p && i < n; i++)
    p[i] = nr_rng_uniform(r, -1.0f, 1.0f);
  return p;
}

NR_TEST(node_desc_gemm_grid_matches_onnx) {
  nr_rng rng = nr_rng_make(19);
  for (size_t ci = 0; ci < sizeof gemm_cases / sizeof gemm_cases[0]; ci++) {
    const gemm_case *g = &gemm_cases[ci];
    nr_attr attrs[8];
    nr_node n = gemm_node(g, attrs);
    nr_node_io io;
    gemm_io(g, &io);
    nr_gemm_desc d;
    nr_error err = {0};
    nr_status st = nr_gemm_desc_parse(&n, &io, &d, &err);
    REQUIRE(st == NR_OK, "case %zu (%s): %s", ci, g->op, err.message);
    CHECK(d.add == g->add, "case %zu: addend %d, want %d", ci, d.add, g->add);
    CHECK(d.act == g->act && d.residual == g->res, "case %zu: epilogue", ci);
    ref_shape ys = onnx_y_shape(g);
    int64_t ny = shape_count(&ys);
    CHECK(d.batch * d.m * d.n == ny, "case %zu: %lld products' values, Y has %lld", ci,
          (long long)(d.batch * d.m * d.n), (long long)ny);
    const nr_value *c = nr_node_io_in(&io, 2);
    float *a = rand_buf(&rng, count(&io.in[0])), *b = rand_buf(&rng, count(&io.in[1]));
    float *cv = c ? rand_buf(&rng, count(c)) : NULL;
    float *rv = g->res ? rand_buf(&rng, ny) : NULL;
    float *want = rand_buf(&rng, ny), *got = rand_buf(&rng, ny);
    onnx_eval(g, a, b, cv, rv, want);
    desc_eval(&d, a, b, cv, rv, got);
    for (int64_t e = 0; e < ny; e++)
      if (fabsf(want[e] - got[e]) > 1e-5f * (1.0f + fabsf(want[e]))) {
        CHECK(false, "case %zu (%s): Y[%lld] = %g from the description, %g by ONNX", ci,
              g->op, (long long)e, got[e], want[e]);
        break;
      }
    free(a), free(b), free(cv), free(rv), free(want), free(got);
  }
}

NR_TEST(node_desc_gemm_fields) {
  /* B [3, K, N] under A [2, 1, M, K]: Y batch [2, 3]; A steps along dim 0 only. */
  const gemm_case *g = &gemm_cases[18];
  nr_attr attrs[8];
  nr_node n = gemm_node(g, attrs);
  nr_node_io io;
  nr_gemm_desc d;
  gemm_io(g, &io);
  REQUIRE(nr_gemm_desc_parse(&n, &io, &d, NULL) == NR_OK);
  CHECK(d.m == 3 && d.k == 4 && d.n == 5 && d.batch == 6 && d.batch_rank == 2);
  CHECK(d.a_stride[0] == 12 && d.a_stride[1] == 0 && d.b_stride[0] == 0 &&
        d.b_stride[1] == 20);
  CHECK(d.a_batch_count == 2 && d.b_batch_count == 3 && d.a_rank == 4 && d.b_rank == 3);
  /* FusedGemm's activation parameters default as the reference's (ir/fused.h). */
  nr_attr fa[2] = {attr_s("activation", "leaky_relu")};
  nr_node f = make_node("FusedGemm", "nnroute", 1, fa, 1);
  int64_t in[2][9] = {S2(3, 4), S2(4, 5)}, out[1][9] = {S2(3, 5)};
  make_io(&io, 2, (const int64_t(*)[9])in, 1, (const int64_t(*)[9])out);
  REQUIRE(nr_gemm_desc_parse(&f, &io, &d, NULL) == NR_OK);
  CHECK(d.act == NR_ACT_LEAKY_RELU && d.act_a == 0.01f && d.act_b == 0.0f);
}

typedef struct bad_case {
  const char *op;
  int n_in;
  int64_t in[4][9];
  int64_t y[9];
  const char *attr_name; /* a string attribute, or NULL */
  const char *attr_value;
  nr_status want;
} bad_case;

/* clang-format off */
static const bad_case bad_gemm[] = {
    {"Gemm", 2, {S3(1, 3, 4), S2(4, 5)}, S2(3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"Gemm", 2, {S2(3, 4), S2(3, 5)}, S2(3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"Gemm", 3, {S2(3, 4), S2(4, 5), S2(4, 5)}, S2(3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"Gemm", 3, {S2(3, 4), S2(4, 5), S1(3)}, S2(3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"Gemm", 3, {S2(3, 4), S2(4, 5), S3(1, 3, 5)}, S2(3, 5), NULL, NULL,
     NR_ERR_INVALID_MODEL},
    {"Gemm", 1, {S2(3, 4)}, S2(3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"Gemm", 2, {S2(3, 4), S2(4, 5)}, S2(3, 6), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"Gemm", 4, {S2(3, 4), S2(4, 5), NONE, S2(3, 5)}, S2(3, 5), NULL, NULL,
     NR_ERR_INVALID_MODEL},
    {"MatMul", 2, {S3(2, 3, 4), S3(3, 4, 5)}, S3(2, 3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"MatMul", 2, {S2(3, 4), S2(5, 4)}, S2(3, 4), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"MatMul", 2, {S0, S2(4, 5)}, S1(5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"MatMul", 3, {S2(3, 4), S2(4, 5), S1(5)}, S2(3, 5), NULL, NULL, NR_ERR_INVALID_MODEL},
    {"FusedGemm", 2, {S2(3, 4), S2(4, 5)}, S2(3, 5), "activation", "swish-ish",
     NR_ERR_INVALID_MODEL},
    {"FusedGemm", 4, {S2(3, 4), S2(4, 5), NONE, S2(3, 4)}, S2(3, 5), NULL, NULL,
     NR_ERR_INVALID_MODEL},
    {"FusedMatMul", 3, {S2(3, 4), S2(4, 5), S1(3)}, S2(3, 5), NULL, NULL,
     NR_ERR_UNSUPPORTED},
    {"MatMul", 2, {S2(-1, 4), S2(4, 5)}, S2(-1, 5), NULL, NULL, NR_ERR_UNSUPPORTED},
};
/* clang-format on */

NR_TEST(node_desc_gemm_refuses_malformed) {
  for (size_t ci = 0; ci < sizeof bad_gemm / sizeof bad_gemm[0]; ci++) {
    const bad_case *b = &bad_gemm[ci];
    bool fused = !strncmp(b->op, "Fused", 5);
    nr_attr attrs[1];
    int na = 0;
    if (b->attr_name)
      attrs[na++] = attr_s(b->attr_name, b->attr_value);
    nr_node n = make_node(b->op, fused ? "nnroute" : "", fused ? 1 : 13, attrs, na);
    nr_node_io io;
    int64_t out[1][9];
    memcpy(out[0], b->y, sizeof out[0]);
    make_io(&io, b->n_in, b->in, 1, (const int64_t(*)[9])out);
    nr_gemm_desc d;
    nr_error err = {0};
    nr_status st = nr_gemm_desc_parse(&n, &io, &d, &err);
    CHECK(st == b->want, "case %zu (%s): status %d, want %d (%s)", ci, b->op, st, b->want,
          err.message);
    CHECK(strstr(err.message, "node 'n0'") != NULL, "case %zu: message '%s'", ci,
          err.message);
  }
  nr_node other = make_node("Conv", "", 13, NULL, 0);
  nr_node_io io = {0};
  nr_gemm_desc d;
  CHECK(nr_gemm_desc_parse(&other, &io, &d, NULL) == NR_ERR_INVALID_ARGUMENT);
}

/* ---- Attention --------------------------------------------------------------------- */

static nr_status attn_parse(int opset, nr_attr *attrs, int n_attrs, int n_in,
                            const int64_t (*in)[9], const int64_t *y, nr_attn_desc *d,
                            nr_error *err) {
  nr_node n = make_node("Attention", "", opset, attrs, n_attrs);
  nr_node_io io;
  int64_t out[1][9];
  memcpy(out[0], y, sizeof out[0]);
  make_io(&io, n_in, in, 1, (const int64_t(*)[9])out);
  return nr_attn_desc_parse(&n, &io, d, err);
}

NR_TEST(node_desc_attention_layouts) {
  /* 4-D, grouped-query (4 query heads on 2 kv heads), mask [S, T] */
  int64_t in4[4][9] = {S4(2, 4, 6, 8), S4(2, 2, 7, 8), S4(2, 2, 7, 16), S2(6, 7)};
  int64_t y4[9] = S4(2, 4, 6, 16);
  nr_attn_desc d;
  nr_error err = {0};
  REQUIRE(attn_parse(23, NULL, 0, 4, (const int64_t(*)[9])in4, y4, &d, &err) == NR_OK,
          "%s", err.message);
  CHECK(d.b == 2 && d.hq == 4 && d.hkv == 2 && d.s == 6 && d.t == 7 && d.d == 8 &&
        d.dv == 16);
  CHECK(d.mask == NR_ATTN_DESC_MASK_FLOAT && d.ms[0] == 0 && d.ms[1] == 0 &&
        d.ms[2] == 7 && d.ms[3] == 1);
  CHECK(fabsf(d.scale - 1.0f / sqrtf(8.0f)) < 1e-7f && !d.causal);
  /* element (b, h, i, e) of a 4-D [B, H, S, D] tensor */
  for (int64_t b = 0; b < 2; b++)
    for (int64_t h = 0; h < 4; h++)
      for (int64_t i = 0; i < 6; i++)
        CHECK(b * d.qs[0] + h * d.qs[1] + i * d.qs[2] == ((b * 4 + h) * 6 + i) * 8);
  /* 3-D [B, S, H * D] with heads from attributes: element (b, h, i, e) sits at
   * ((b * S + i) * H + h) * D + e */
  nr_attr at[3] = {attr_i("q_num_heads", 4), attr_i("kv_num_heads", 4),
                   attr_i("is_causal", 1)};
  int64_t in3[3][9] = {S3(2, 6, 32), S3(2, 5, 32), S3(2, 5, 32)};
  int64_t y3[9] = S3(2, 6, 32);
  REQUIRE(attn_parse(23, at, 3, 3, (const int64_t(*)[9])in3, y3, &d, &err) == NR_OK, "%s",
          err.message);
  CHECK(d.d == 8 && d.dv == 8 && d.t == 5 && d.causal && d.mask == NR_ATTN_DESC_MASK_NONE);
  for (int64_t b = 0; b < 2; b++)
    for (int64_t h = 0; h < 4; h++)
      for (int64_t i = 0; i < 5; i++) {
        CHECK(b * d.qs[0] + h * d.qs[1] + i * d.qs[2] == ((b * 6 + i) * 4 + h) * 8);
        CHECK(b * d.ks[0] + h * d.ks[1] + i * d.ks[2] == ((b * 5 + i) * 4 + h) * 8);
      }
}

NR_TEST(node_desc_attention_refuses) {
  nr_attn_desc d;
  nr_error err = {0};
  int64_t y[9] = S4(1, 4, 3, 8);
  int64_t gqa[3][9] = {S4(1, 4, 3, 8), S4(1, 3, 5, 8), S4(1, 3, 5, 8)}; /* 4 % 3 */
  CHECK(attn_parse(23, NULL, 0, 3, (const int64_t(*)[9])gqa, y, &d, &err) ==
        NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "node 'n0'") != NULL, "%s", err.message);
  int64_t kd[3][9] = {S4(1, 4, 3, 8), S4(1, 2, 5, 4), S4(1, 2, 5, 8)}; /* K's D */
  CHECK(attn_parse(23, NULL, 0, 3, (const int64_t(*)[9])kd, y, &d, NULL) ==
        NR_ERR_INVALID_MODEL);
  int64_t ok[5][9] = {S4(1, 4, 3, 8), S4(1, 2, 5, 8), S4(1, 2, 5, 8), NONE,
                      S4(1, 2, 2, 8)}; /* past_key */
  CHECK(attn_parse(23, NULL, 0, 5, (const int64_t(*)[9])ok, y, &d, NULL) ==
        NR_ERR_UNSUPPORTED);
  CHECK(attn_parse(23, NULL, 0, 3, (const int64_t(*)[9])ok, y, &d, NULL) == NR_OK);
  CHECK(attn_parse(22, NULL, 0, 3, (const int64_t(*)[9])ok, y, &d, NULL) ==
        NR_ERR_UNSUPPORTED);
  nr_attr sc[1] = {attr_f("softcap", 30.0f)};
  CHECK(attn_parse(23, sc, 1, 3, (const int64_t(*)[9])ok, y, &d, NULL) ==
        NR_ERR_UNSUPPORTED);
  int64_t mask[4][9] = {S4(1, 4, 3, 8), S4(1, 2, 5, 8), S4(1, 2, 5, 8), S2(2, 5)};
  CHECK(attn_parse(23, NULL, 0, 4, (const int64_t(*)[9])mask, y, &d, NULL) ==
        NR_ERR_INVALID_MODEL); /* 2 rows do not broadcast to S = 3 */
  int64_t y3[9] = S4(1, 4, 3, 7);
  CHECK(attn_parse(23, NULL, 0, 3, (const int64_t(*)[9])ok, y3, &d, NULL) ==
        NR_ERR_INVALID_MODEL);
}

/* ---- Concat, Split ---------------------------------------------------------------- */

NR_TEST(node_desc_concat_split_pieces) {
  /* Concat of [2, 1, 5], [2, 3, 5], [2, 0, 5] along axis -2 */
  nr_attr ax[1] = {attr_i("axis", -2)};
  nr_node n = make_node("Concat", "", 13, ax, 1);
  int64_t in[3][9] = {S3(2, 1, 5), S3(2, 3, 5), S3(2, 0, 5)}, out[1][9] = {S3(2, 4, 5)};
  nr_node_io io;
  make_io(&io, 3, (const int64_t(*)[9])in, 1, (const int64_t(*)[9])out);
  nr_concat_desc d;
  nr_error err = {0};
  REQUIRE(nr_concat_desc_parse(&n, &io, &d, &err) == NR_OK, "%s", err.message);
  CHECK(d.axis == 1 && d.outer == 2 && d.inner == 5 && d.total == 4 && d.n_pieces == 3);
  int64_t at = 0;
  for (int i = 0; i < 3; i++) {
    CHECK(d.offset[i] == at && d.extent[i] == in[i][2], "piece %d", i);
    at += in[i][2];
  }
  /* Split of [6, 4] along 0 into 1, 5 (the same walk from the other side) */
  nr_node s = make_node("Split", "", 18, NULL, 0);
  int64_t sin[2][9] = {S2(6, 4), S1(2)}, sout[2][9] = {S2(1, 4), S2(5, 4)};
  make_io(&io, 2, (const int64_t(*)[9])sin, 2, (const int64_t(*)[9])sout);
  REQUIRE(nr_split_desc_parse(&s, &io, &d, &err) == NR_OK, "%s", err.message);
  CHECK(d.axis == 0 && d.outer == 1 && d.inner == 4 && d.total == 6);
  CHECK(d.offset[1] == 1 && d.extent[1] == 5);
  /* refused: an off-axis dim differs, the pieces do not add up, the axis is out of
   * range */
  int64_t off[2][9] = {S3(2, 1, 5), S3(3, 3, 5)};
  make_io(&io, 2, (const int64_t(*)[9])off, 1, (const int64_t(*)[9])out);
  CHECK(nr_concat_desc_parse(&n, &io, &d, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "node 'n0'") != NULL, "%s", err.message);
  int64_t sum[2][9] = {S3(2, 1, 5), S3(2, 2, 5)};
  make_io(&io, 2, (const int64_t(*)[9])sum, 1, (const int64_t(*)[9])out);
  CHECK(nr_concat_desc_parse(&n, &io, &d, NULL) == NR_ERR_INVALID_MODEL);
  nr_attr far[1] = {attr_i("axis", 3)};
  nr_node nf = make_node("Concat", "", 13, far, 1);
  make_io(&io, 3, (const int64_t(*)[9])in, 1, (const int64_t(*)[9])out);
  CHECK(nr_concat_desc_parse(&nf, &io, &d, NULL) == NR_ERR_INVALID_MODEL);
  CHECK(nr_split_desc_parse(&n, &io, &d, NULL) == NR_ERR_INVALID_ARGUMENT);
}

/* ---- Conv, FusedConv -------------------------------------------------------------- */

/* parse of node n on X, W, B?, R? (rank -1: absent) into Y. */
static nr_status conv_parse(const nr_node *n, int n_in, const int64_t (*in)[9],
                            const int64_t *y, nr_conv_desc *d, nr_error *err) {
  nr_node_io io;
  make_io(&io, n_in, in, 1, (const int64_t(*)[9])y);
  return nr_conv_desc_parse(n, &io, d, err);
}

NR_TEST(node_desc_conv_window_and_epilogue) {
  /* FusedConv, 2 groups, SAME_UPPER at stride 2: H 9 -> 5 with pads 1 + 1, W 10 -> 5
   * with 0 + 1 (the odd pad at the end); an unbounded clip */
  int64_t st[2] = {2, 2};
  nr_attr at[4] = {attr_ints("strides", 2, st), attr_i("group", 2),
                   attr_s("auto_pad", "SAME_UPPER"), attr_s("activation", "clip")};
  nr_node n = make_node("FusedConv", NR_DOMAIN, 1, at, 4);
  int64_t in[4][9] = {S4(2, 8, 9, 10), S4(12, 4, 3, 3), S1(12), S4(2, 12, 5, 5)};
  int64_t y[9] = S4(2, 12, 5, 5);
  nr_conv_desc d;
  nr_error err = {0};
  REQUIRE(conv_parse(&n, 4, (const int64_t(*)[9])in, y, &d, &err) == NR_OK, "%s",
          err.message);
  const nr_window *w = &d.win;
  CHECK(d.fused && d.batch == 2 && d.in_c == 8 && d.out_c == 12 && d.group == 2);
  CHECK(w->nsp == 2 && w->in[0] == 9 && w->in[1] == 10 && w->out[0] == 5 && w->out[1] == 5);
  CHECK(w->kernel[0] == 3 && w->kernel[1] == 3 && w->stride[0] == 2 && w->dil[1] == 1);
  CHECK(w->pad_b[0] == 1 && w->pad_e[0] == 1 && w->pad_b[1] == 0 && w->pad_e[1] == 1,
        "pads %lld+%lld, %lld+%lld", (long long)w->pad_b[0], (long long)w->pad_e[0],
        (long long)w->pad_b[1], (long long)w->pad_e[1]);
  CHECK(d.bias && d.residual && d.act == NR_ACT_CLIP && d.act_a == -FLT_MAX &&
        d.act_b == FLT_MAX);
  /* Conv 1-D, dilation 2, pads 1 + 2: L 10 -> 10 + 3 - 5 + 1 = 9; no B, no activation */
  int64_t dl[1] = {2}, pads[2] = {1, 2};
  nr_attr a1[2] = {attr_ints("dilations", 1, dl), attr_ints("pads", 2, pads)};
  nr_node c1 = make_node("Conv", "", 11, a1, 2);
  int64_t in1[2][9] = {S3(1, 3, 10), S3(4, 3, 3)}, y1[9] = S3(1, 4, 9);
  REQUIRE(conv_parse(&c1, 2, (const int64_t(*)[9])in1, y1, &d, &err) == NR_OK, "%s",
          err.message);
  CHECK(!d.fused && d.win.nsp == 1 && d.win.out[0] == 9 && d.win.pad_b[0] == 1 &&
        d.win.pad_e[0] == 2 && d.win.dil[0] == 2 && !d.bias && !d.residual &&
        d.act == NR_ACT_NONE);
}

NR_TEST(node_desc_conv_refuses) {
  nr_attr g3[1] = {attr_i("group", 3)};
  nr_node n = make_node("Conv", "", 11, g3, 1), plain = make_node("Conv", "", 11, NULL, 0);
  int64_t in[3][9] = {S4(1, 8, 6, 6), S4(4, 4, 3, 3), S1(4)}, y[9] = S4(1, 4, 4, 4);
  nr_conv_desc d;
  nr_error err = {0};
  /* 8 channels do not split into 3 groups of 4 */
  CHECK(conv_parse(&n, 3, (const int64_t(*)[9])in, y, &d, &err) == NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "node 'n0'") != NULL, "%s", err.message);
  /* W expects 4 channels per group, X has 8 in one group */
  CHECK(conv_parse(&plain, 3, (const int64_t(*)[9])in, y, &d, NULL) ==
        NR_ERR_INVALID_MODEL);
  /* with 2 groups it fits; then a wrong Y, a wrong B, a 4th input on Conv */
  nr_attr g2[1] = {attr_i("group", 2)};
  nr_node ok = make_node("Conv", "", 11, g2, 1);
  REQUIRE(conv_parse(&ok, 3, (const int64_t(*)[9])in, y, &d, &err) == NR_OK, "%s",
          err.message);
  int64_t y5[9] = S4(1, 4, 5, 4);
  CHECK(conv_parse(&ok, 3, (const int64_t(*)[9])in, y5, &d, NULL) == NR_ERR_INVALID_MODEL);
  int64_t bad_b[3][9] = {S4(1, 8, 6, 6), S4(4, 4, 3, 3), S1(5)};
  CHECK(conv_parse(&ok, 3, (const int64_t(*)[9])bad_b, y, &d, NULL) ==
        NR_ERR_INVALID_MODEL);
  int64_t four[4][9] = {S4(1, 8, 6, 6), S4(4, 4, 3, 3), S1(4), S4(1, 4, 4, 4)};
  CHECK(conv_parse(&ok, 4, (const int64_t(*)[9])four, y, &d, NULL) ==
        NR_ERR_INVALID_MODEL);
  /* a kernel larger than the padded input; W of another rank */
  int64_t big[2][9] = {S4(1, 8, 2, 2), S4(4, 4, 3, 3)}, ybig[9] = S4(1, 4, 1, 1);
  CHECK(conv_parse(&ok, 2, (const int64_t(*)[9])big, ybig, &d, &err) ==
        NR_ERR_INVALID_MODEL);
  CHECK(strstr(err.message, "node 'n0'") != NULL, "%s", err.message);
  int64_t r3[2][9] = {S4(1, 8, 6, 6), S3(4, 4, 3)};
  CHECK(conv_parse(&ok, 2, (const int64_t(*)[9])r3, y, &d, NULL) == NR_ERR_INVALID_MODEL);
  /* unknown shapes are outside what it covers; an unknown activation is malformed */
  int64_t unk[2][9] = {S4(1, 8, -1, 6), S4(4, 4, 3, 3)};
  CHECK(conv_parse(&ok, 2, (const int64_t(*)[9])unk, y, &d, NULL) == NR_ERR_UNSUPPORTED);
  nr_attr act[2] = {attr_i("group", 2), attr_s("activation", "wobble")};
  nr_node fa = make_node("FusedConv", NR_DOMAIN, 1, act, 2);
  CHECK(conv_parse(&fa, 3, (const int64_t(*)[9])in, y, &d, NULL) == NR_ERR_INVALID_MODEL);
  nr_node gemm = make_node("Gemm", "", 13, NULL, 0);
  CHECK(conv_parse(&gemm, 3, (const int64_t(*)[9])in, y, &d, NULL) ==
        NR_ERR_INVALID_ARGUMENT);
}
