/* ops_pool.c - reference pooling: MaxPool, AveragePool, LpPool, their Global forms,
 * and MaxUnpool.
 *
 * One window walker serves every pooling kind: for each (n, c) plane and each output
 * position it visits the dilated kernel positions, skipping those in the padding,
 * and folds them with the kind's reduction (max with argmax, sum, or sum of |x|^p).
 * Values are read and written through the dtype-generic loaders and reduced in
 * double: exact for the 8-bit types MaxPool allows, and cheap enough for float32 at
 * resnet sizes (pooling is a sliver of the network's work). */
#include "ir/op.h"
#include "kernels/ref/conv_util.h"
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <string.h>

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

typedef struct pool_job {
  pool_kind kind;
  nr_window win;
  bool count_pad; /* AveragePool: padded positions count in the divisor */
  bool col_major; /* MaxPool storage_order 1: Indices in column-major order */
  double p;       /* LpPool exponent */
  int64_t planes; /* N * C */
  int64_t in_size, out_size;
} pool_job;

/* The reduction of one window. */
typedef struct pool_acc {
  double v;
  int64_t best; /* spatial C-order index of the max so far, -1 before any */
  int64_t n_valid, n_padded;
} pool_acc;

static bool pool_allows(pool_kind kind, nr_dtype t) {
  if (nr_dtype_is_float(t))
    return true;
  return kind == POOL_MAX && (t == NR_DTYPE_INT8 || t == NR_DTYPE_UINT8);
}

static const char *pool_name(pool_kind kind) {
  return kind == POOL_MAX ? "MaxPool" : kind == POOL_AVG ? "AveragePool" : "LpPool";
}

/* ---- the window walker ---------------------------------------------------------- */

static void pool_visit(const pool_job *job, pool_acc *acc, const nr_value *x,
                       int64_t base, int64_t idx) {
  double v = nr_load_f64(x->dtype, x->data, base + idx);
  switch (job->kind) {
  case POOL_MAX:
    if (acc->best < 0 || v > acc->v || (isnan(acc->v) && !isnan(v))) {
      acc->v = v;
      acc->best = idx;
    }
    break;
  case POOL_AVG:
    acc->v += v;
    break;
  case POOL_LP:
    acc->v += pow(fabs(v), job->p);
    break;
  }
}

/* Folds the window at output position o of the plane starting at base. */
static pool_acc pool_window(const pool_job *job, const nr_value *x, int64_t base,
                            const int64_t *o) {
  const nr_window *w = &job->win;
  pool_acc acc = {0, -1, 0, 0};
  int64_t k[NR_MAX_RANK] = {0};
  do {
    bool valid = true, padded = true;
    int64_t idx = 0;
    for (int d = 0; d < w->nsp; d++) {
      int64_t i = o[d] * w->stride[d] - w->pad_b[d] + k[d] * w->dil[d];
      valid = valid && i >= 0 && i < w->in[d];
      padded = padded && i >= -w->pad_b[d] && i < w->in[d] + w->pad_e[d];
      idx = idx * w->in[d] + i;
    }
    acc.n_padded += padded;
    acc.n_valid += valid;
    if (valid)
      pool_visit(job, &acc, x, base, idx);
  } while (nr_index_next(w->nsp, w->kernel, k));
  return acc;
}

/* Converts a C-order spatial index to storage_order 1 (column-major). */
static int64_t col_major_index(const nr_window *w, int64_t idx) {
  int64_t out = 0, scale = 1;
  int64_t pos[NR_MAX_RANK];
  for (int d = w->nsp - 1; d >= 0; d--) {
    pos[d] = idx % w->in[d];
    idx /= w->in[d];
  }
  for (int d = 0; d < w->nsp; d++) {
    out += pos[d] * scale;
    scale *= w->in[d];
  }
  return out;
}

static double pool_result(const pool_job *job, const pool_acc *acc) {
  switch (job->kind) {
  case POOL_MAX:
    return acc->best < 0 ? -INFINITY : acc->v;
  case POOL_AVG: {
    int64_t n = job->count_pad ? acc->n_padded : acc->n_valid;
    return n ? acc->v / (double)n : NAN;
  }
  default:
    return pow(acc->v, 1.0 / job->p);
  }
}

static void pool_run_job(const pool_job *job, const nr_value *x, nr_value *y,
                         nr_value *indices) {
  for (int64_t plane = 0; plane < job->planes; plane++) {
    int64_t o[NR_MAX_RANK] = {0}, j = plane * job->out_size;
    do {
      pool_acc acc = pool_window(job, x, plane * job->in_size, o);
      nr_store_f64(y->dtype, y->data, j, pool_result(job, &acc));
      if (indices) {
        int64_t idx = acc.best < 0 ? 0 : acc.best;
        if (job->col_major)
          idx = col_major_index(&job->win, idx);
        ((int64_t *)indices->data)[j] = plane * job->in_size + idx;
      }
      j++;
    } while (nr_index_next(job->win.nsp, job->win.out, o));
  }
}

/* ---- MaxPool, AveragePool, LpPool ----------------------------------------------- */

/* Reads the node's attributes into job and the output dims; *rank -1 if unknown. */
static nr_status pool_prepare(nr_op_ctx *ctx, pool_kind kind, pool_job *job, int *rank,
                              int64_t *dims) {
  const nr_value *x = nr_op_in(ctx, 0);
  if (x->dtype && !pool_allows(kind, x->dtype))
    return nr_op_fail(ctx, nr_dtype_size(x->dtype) ? NR_ERR_SHAPE : NR_ERR_UNSUPPORTED,
                      "%s does not take dtype %s", pool_name(kind),
                      nr_dtype_name(x->dtype));
  int nsp;
  nr_status st = nr_window_check_input(ctx, x, "X", &nsp);
  *rank = nsp < 0 ? -1 : nsp + 2;
  if (st || nsp < 0)
    return st;
  memset(job, 0, sizeof *job);
  job->kind = kind;
  st = nr_window_read(ctx, nsp, NULL, &job->win);
  if (!st)
    st = nr_window_forward(ctx, &job->win, x->dims + 2);
  if (st)
    return st;
  job->count_pad = nr_attr_int(ctx->node, "count_include_pad", 0) != 0;
  job->col_major = nr_attr_int(ctx->node, "storage_order", 0) == 1;
  const nr_attr *p = nr_node_attr(ctx->node, "p");
  job->p = !p ? 2.0 : p->type == NR_ATTR_FLOAT ? p->f : (double)p->i;
  if (kind == POOL_LP && !(job->p > 0))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "p = %g must be positive", job->p);
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  memcpy(dims + 2, job->win.out, sizeof(int64_t) * nsp);
  job->planes = x->dims[0] * x->dims[1];
  job->in_size = nr_dims_prod(nsp, job->win.in);
  job->out_size = nr_dims_prod(nsp, job->win.out);
  return NR_OK;
}

static nr_status pool_infer(nr_op_ctx *ctx, pool_kind kind) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  pool_job job;
  int rank;
  int64_t dims[NR_MAX_RANK];
  if (!st)
    st = pool_prepare(ctx, kind, &job, &rank, dims);
  if (!st)
    st = nr_op_set_output(ctx, 0, nr_op_in(ctx, 0)->dtype, rank, dims);
  if (!st && kind == POOL_MAX)
    st = nr_op_set_output(ctx, 1, NR_DTYPE_INT64, rank, dims);
  return st;
}

static nr_status pool_run(nr_op_ctx *ctx, pool_kind kind) {
  pool_job job;
  int rank;
  int64_t dims[NR_MAX_RANK];
  nr_status st = pool_prepare(ctx, kind, &job, &rank, dims);
  if (st)
    return st;
  pool_run_job(&job, nr_op_in(ctx, 0), nr_op_out(ctx, 0), nr_op_out(ctx, 1));
  return NR_OK;
}

static nr_status max_pool_infer(nr_op_ctx *ctx) {
  return pool_infer(ctx, POOL_MAX);
}
static nr_status max_pool_run(nr_op_ctx *ctx) {
  return pool_run(ctx, POOL_MAX);
}
static nr_status avg_pool_infer(nr_op_ctx *ctx) {
  return pool_infer(ctx, POOL_AVG);
}
static nr_status avg_pool_run(nr_op_ctx *ctx) {
  return pool_run(ctx, POOL_AVG);
}
static nr_status lp_pool_infer(nr_op_ctx *ctx) {
  return pool_infer(ctx, POOL_LP);
}
static nr_status lp_pool_run(nr_op_ctx *ctx) {
  return pool_run(ctx, POOL_LP);
}

/* ---- Global pools --------------------------------------------------------------- */

static nr_status global_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  const nr_value *x = nr_op_in(ctx, 0);
  int nsp;
  if (!st && x->dtype && !nr_dtype_is_float(x->dtype))
    st = nr_op_fail(ctx, nr_dtype_size(x->dtype) ? NR_ERR_SHAPE : NR_ERR_UNSUPPORTED,
                    "dtype %s is not a float type", nr_dtype_name(x->dtype));
  if (!st)
    st = nr_window_check_input(ctx, x, "X", &nsp);
  if (st || nsp < 0)
    return st ? st : nr_op_set_output(ctx, 0, x->dtype, -1, NULL);
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    dims[d] = d < 2 ? x->dims[d] : 1;
  return nr_op_set_output(ctx, 0, x->dtype, x->rank, dims);
}

/* Reduces each (n, c) plane with kind; LpPool's p comes from the node. */
static nr_status global_run(nr_op_ctx *ctx, pool_kind kind) {
  const nr_value *x = nr_op_in(ctx, 0);
  nr_value *y = nr_op_out(ctx, 0);
  int64_t planes = x->dims[0] * x->dims[1];
  int64_t size = nr_dims_prod(x->rank - 2, x->dims + 2);
  const nr_attr *pa = nr_node_attr(ctx->node, "p");
  double p = !pa ? 2.0 : pa->type == NR_ATTR_FLOAT ? pa->f : (double)pa->i;
  for (int64_t c = 0; c < planes; c++) {
    double acc = kind == POOL_MAX ? -INFINITY : 0;
    for (int64_t i = 0; i < size; i++) {
      double v = nr_load_f64(x->dtype, x->data, c * size + i);
      if (kind == POOL_MAX)
        acc = (v > acc || isnan(v)) ? v : acc;
      else
        acc += kind == POOL_AVG ? v : pow(fabs(v), p);
    }
    double r = kind == POOL_MAX   ? acc
               : kind == POOL_AVG ? acc / (double)size
                                  : pow(acc, 1.0 / p);
    nr_store_f64(y->dtype, y->data, c, r);
  }
  return NR_OK;
}

static nr_status global_max_run(nr_op_ctx *ctx) {
  return global_run(ctx, POOL_MAX);
}
static nr_status global_avg_run(nr_op_ctx *ctx) {
  return global_run(ctx, POOL_AVG);
}
static nr_status global_lp_run(nr_op_ctx *ctx) {
  return global_run(ctx, POOL_LP);
}

/* ---- MaxUnpool ------------------------------------------------------------------ */

/* The shape MaxPool's input had: (in - 1) * stride - pads + kernel per spatial dim. */
static nr_status unpool_default_shape(nr_op_ctx *ctx, const nr_value *x, int64_t *dims) {
  int nsp = x->rank - 2;
  nr_window w;
  nr_status st = nr_window_read(ctx, nsp, NULL, &w);
  if (st)
    return st;
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int i = 0; i < nsp; i++) {
    int64_t in = x->dims[2 + i];
    dims[2 + i] = in < 0 ? NR_DIM_UNKNOWN
                         : (in - 1) * w.stride[i] - w.pad_b[i] - w.pad_e[i] + w.kernel[i];
    if (in >= 0 && dims[2 + i] < 1)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "spatial dim %d of the output would be %lld",
                        i, (long long)dims[2 + i]);
  }
  return NR_OK;
}

/* Output dims: output_shape's values when known, else the default shape. */
static nr_status unpool_shape(nr_op_ctx *ctx, int64_t *deflt, int *rank, int64_t *dims) {
  const nr_value *x = nr_op_in(ctx, 0), *os = nr_op_in(ctx, 2);
  int nsp;
  nr_status st = nr_window_check_input(ctx, x, "X", &nsp);
  *rank = nsp < 0 ? -1 : nsp + 2;
  if (st || nsp < 0)
    return st;
  st = unpool_default_shape(ctx, x, deflt);
  memcpy(dims, deflt, sizeof(int64_t) * (size_t)*rank);
  if (st || !os)
    return st;
  if (os->rank >= 0 && (os->rank != 1 || (os->dims[0] >= 0 && os->dims[0] != *rank)))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "output_shape must be 1-D with %d values",
                      *rank);
  for (int d = 0; d < *rank; d++)
    dims[d] = os->data ? nr_load_i64(os->dtype, os->data, d) : NR_DIM_UNKNOWN;
  return NR_OK;
}

static nr_status unpool_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 2, 3);
  const nr_value *ind = nr_op_in(ctx, 1);
  if (!st && ind->dtype && ind->dtype != NR_DTYPE_INT64)
    st = nr_op_fail(ctx, NR_ERR_SHAPE, "I has dtype %s, expected int64",
                    nr_dtype_name(ind->dtype));
  int rank;
  int64_t deflt[NR_MAX_RANK], dims[NR_MAX_RANK];
  if (!st)
    st = unpool_shape(ctx, deflt, &rank, dims);
  return st ? st : nr_op_set_output(ctx, 0, nr_op_in(ctx, 0)->dtype, rank, dims);
}

/* Indices address MaxPool's input, whose shape is the default one; output_shape
 * only pads (or crops) that tensor at the end of each dim, as the ONNX reference
 * does. */
static nr_status unpool_run(nr_op_ctx *ctx) {
  const nr_value *x = nr_op_in(ctx, 0), *ind = nr_op_in(ctx, 1);
  nr_value *y = nr_op_out(ctx, 0);
  int rank;
  int64_t deflt[NR_MAX_RANK], dims[NR_MAX_RANK];
  nr_status st = unpool_shape(ctx, deflt, &rank, dims);
  if (st)
    return st;
  if (nr_value_count(ind) != nr_value_count(x))
    return nr_op_fail(ctx, NR_ERR_SHAPE, "I has %lld elements, X has %lld",
                      (long long)nr_value_count(ind), (long long)nr_value_count(x));
  int64_t total = nr_dims_prod(rank, deflt);
  for (int64_t j = 0, n = nr_value_count(x); j < n; j++) {
    int64_t idx = ((const int64_t *)ind->data)[j], off = 0, rest = idx;
    if (idx < 0 || idx >= total)
      return nr_op_fail(ctx, NR_ERR_RUNTIME, "index %lld is outside [0, %lld)",
                        (long long)idx, (long long)total);
    bool inside = true;
    int64_t scale = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t pos = rest % deflt[d];
      rest /= deflt[d];
      inside = inside && pos < y->dims[d];
      off += pos * scale;
      scale *= y->dims[d];
    }
    if (inside)
      nr_store_f64(y->dtype, y->data, off, nr_load_f64(x->dtype, x->data, j));
  }
  return NR_OK;
}

const nr_op_def nr_ref_ops_pool[] = {
    {"", "MaxPool", 1, max_pool_infer, max_pool_run, 0},
    {"", "AveragePool", 1, avg_pool_infer, avg_pool_run, 0},
    {"", "LpPool", 1, lp_pool_infer, lp_pool_run, 0},
    {"", "GlobalMaxPool", 1, global_infer, global_max_run, 0},
    {"", "GlobalAveragePool", 1, global_infer, global_avg_run, 0},
    {"", "GlobalLpPool", 1, global_infer, global_lp_run, 0},
    {"", "MaxUnpool", 9, unpool_infer, unpool_run, 0},
    {0},
};
