/* normreduce.h - private tools shared by the normalization, reduction and attention
 * reference kernels (ops_norm.c, ops_reduce.c, ops_attention.c); nothing else uses it.
 *
 * Key decision: every kernel of these families works on "lanes" of double values. A
 * lane is a set of input elements that are combined together (a softmax row, the
 * elements reduced into one output, a LayerNorm row); it is gathered into a double
 * scratch buffer with the dtype switch outside the loop (a fast float32 case), computed
 * in double, and scattered back. A reduction plan (nr_ref_rplan) describes the lanes
 * of any set of reduced axes as "base offset of output o" + "one offset table shared
 * by every lane", so non-contiguous axis sets cost one indirect load per element. */
#ifndef NR_KERNELS_REF_NORMREDUCE_H
#define NR_KERNELS_REF_NORMREDUCE_H

#include "ir/op.h"

/* ---- strided and indexed lanes -------------------------------------------------- */

/* dst[i] = v[base + i * stride] as double, i < n. */
void nr_ref_gather_f64(const nr_value *v, int64_t base, int64_t stride, int64_t n,
                       double *dst);
/* v[base + i * stride] = src[i] converted to v's dtype. */
void nr_ref_scatter_f64(nr_value *v, int64_t base, int64_t stride, int64_t n,
                        const double *src);
/* dst[i] = v[base + off[i]] as double / as int64. */
void nr_ref_gather_idx_f64(const nr_value *v, int64_t base, const int64_t *off,
                           int64_t n, double *dst);
void nr_ref_gather_idx_i64(const nr_value *v, int64_t base, const int64_t *off,
                           int64_t n, int64_t *dst);
void nr_ref_scatter_idx_f64(nr_value *v, int64_t base, const int64_t *off, int64_t n,
                            const double *src);

/* ---- reduction plans ------------------------------------------------------------ */

typedef struct nr_ref_rplan {
  int64_t n_out;   /* number of lanes (product of kept dims) */
  int64_t n_red;   /* elements per lane (product of reduced dims) */
  int64_t *roff;   /* n_red offsets into the input, relative to a lane's base */
  int n_kept;
  int64_t kdims[NR_MAX_RANK];    /* kept dims in order */
  int64_t kstrides[NR_MAX_RANK]; /* their strides in the input */
} nr_ref_rplan;

/* Plans the lanes of a tensor of shape (rank, dims) reduced over the axes where
 * reduced[d] is true. Fails only on allocation failure. */
nr_status nr_ref_rplan_init(nr_ref_rplan *p, int rank, const int64_t *dims,
                            const bool *reduced, nr_error *err);
/* Input offset of lane o's first element (o in C order over the kept dims). */
int64_t nr_ref_rplan_base(const nr_ref_rplan *p, int64_t o);
void nr_ref_rplan_free(nr_ref_rplan *p);

/* ---- small shared pieces ---------------------------------------------------------- */

/* Product of dims[from..to). */
int64_t nr_ref_dims_prod(const int64_t *dims, int from, int to);
/* Index of the greatest (want_max) or least element; NaN counts as the extreme, the
 * first one wins unless last is set. n must be > 0. */
int64_t nr_ref_arg_best_f64(const double *x, int64_t n, bool want_max, bool last);
/* Allocates n doubles or records NR_ERR_NOMEM on ctx. */
double *nr_ref_scratch(nr_op_ctx *ctx, int64_t n);

/* Attention lives in ops_attention.c; its rows join nr_ref_ops_norm[]. */
nr_status nr_ref_attention_infer(nr_op_ctx *ctx);
nr_status nr_ref_attention_run(nr_op_ctx *ctx);
#define NR_REF_ATTENTION_ROWS {"", "Attention", 23, nr_ref_attention_infer, nr_ref_attention_run, 0},

#endif
