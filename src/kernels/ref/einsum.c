/* einsum.c - the reference Einsum: a general sum of products over labels.
 *
 * The equation is parsed into one label per dimension of every operand ('...'
 * expands to pseudo-labels, right-aligned and broadcast like numpy), and the result
 * is computed the plain way: for each output position, sum over every value of the
 * contracted labels the product of the operands' elements. That one loop covers the
 * forms exporters emit (batched matmul, transposes, diagonals, reductions, outer
 * products) and the implicit-output form. It is O(output x contracted) with no
 * blocking: an oracle, not a fast kernel. Floats accumulate in double, integers in
 * int64. */
#include "kernels/ref/einsum.h"

#include "kernels/ref/ref_util.h"

#include <ctype.h>
#include <string.h>

enum {
  EIN_LETTERS = 52,                       /* A-Z then a-z, numbered by ein_label_id */
  EIN_LABELS = EIN_LETTERS + NR_MAX_RANK, /* then the ellipsis pseudo-labels */
  EIN_MAX_INPUTS = 16,
};

typedef struct ein_term {
  int rank;
  int labels[NR_MAX_RANK];
} ein_term;

typedef struct ein_plan {
  int n_in;
  ein_term in[EIN_MAX_INPUTS];
  ein_term out;
  int n_ell;                /* broadcast rank of the ellipsis */
  int64_t size[EIN_LABELS]; /* NR_DIM_UNKNOWN until seen */
  int uses[EIN_LABELS];     /* how many input dims carry the label */
} ein_plan;

/* Label ids keep ASCII order ('A'..'Z' before 'a'..'z'), the implicit output order. */
static int ein_label_id(char c) {
  return isupper((unsigned char)c) ? c - 'A' : c - 'a' + 26;
}

static char ein_label_char(int id) {
  return id < 26 ? (char)('A' + id) : id < EIN_LETTERS ? (char)('a' + id - 26) : '.';
}

/* Parses one term ("ij", "...k") into letters; *ell is the letter position of the
 * ellipsis or -1. */
static nr_status ein_parse_term(nr_op_ctx *ctx, const char *s, size_t len, ein_term *t,
                                int *ell) {
  t->rank = 0;
  *ell = -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ' ')
      continue;
    if (s[i] == '.' && i + 3 <= len && !strncmp(s + i, "...", 3) && *ell < 0) {
      *ell = t->rank;
      i += 2;
    } else if (isalpha((unsigned char)s[i]) && t->rank < NR_MAX_RANK) {
      t->labels[t->rank++] = ein_label_id(s[i]);
    } else {
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "bad einsum term '%.*s'", (int)len, s);
    }
  }
  return NR_OK;
}

/* Expands the ellipsis of a term whose operand has rank `rank`. */
static nr_status ein_expand(nr_op_ctx *ctx, ein_term *t, int ell, int rank, int n_ell) {
  int letters = t->rank, e = ell < 0 ? 0 : rank - letters;
  if (e < 0 || (ell < 0 && rank != letters) || rank > NR_MAX_RANK)
    return nr_op_fail(ctx, NR_ERR_SHAPE,
                      "einsum term with %d labels%s does not fit an "
                      "operand of rank %d",
                      letters, ell < 0 ? "" : " and '...'", rank);
  ein_term x = {0};
  for (int i = 0; i < letters + 1; i++) {
    if (i == ell)
      for (int j = 0; j < e; j++)
        x.labels[x.rank++] = EIN_LETTERS + (n_ell - e) + j;
    if (i < letters)
      x.labels[x.rank++] = t->labels[i];
  }
  *t = x;
  return NR_OK;
}

/* Records each input dim's size under its label; size-1 dims broadcast. */
static nr_status ein_sizes(nr_op_ctx *ctx, ein_plan *p) {
  for (int l = 0; l < EIN_LABELS; l++)
    p->size[l] = NR_DIM_UNKNOWN;
  for (int i = 0; i < p->n_in; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    for (int d = 0; d < p->in[i].rank; d++) {
      int l = p->in[i].labels[d];
      int64_t have = p->size[l], dim = v->dims[d];
      p->uses[l]++;
      if (have < 0 || have == 1)
        p->size[l] = dim < 0 && have == 1 ? have : dim;
      else if (dim >= 0 && dim != 1 && dim != have)
        return nr_op_fail(ctx, NR_ERR_SHAPE, "einsum label '%c' has sizes %lld and %lld",
                          ein_label_char(l), (long long)have, (long long)dim);
    }
  }
  return NR_OK;
}

/* Explicit output: letters and '...' (all pseudo-labels, in order). */
static nr_status ein_output(nr_op_ctx *ctx, ein_plan *p, const char *s, size_t len) {
  int ell;
  nr_status st = ein_parse_term(ctx, s, len, &p->out, &ell);
  if (!st)
    st = ein_expand(ctx, &p->out, ell, p->out.rank + (ell < 0 ? 0 : p->n_ell), p->n_ell);
  bool seen[EIN_LABELS] = {0};
  for (int d = 0; !st && d < p->out.rank; d++) {
    int l = p->out.labels[d];
    if (seen[l] || !p->uses[l])
      st = nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "einsum output label '%c' is %s",
                      ein_label_char(l), seen[l] ? "repeated" : "not in any input");
    seen[l] = true;
  }
  return st;
}

/* Implicit output: the ellipsis dims, then letters used once, in ASCII order. */
static void ein_implicit_output(ein_plan *p) {
  p->out.rank = 0;
  for (int j = 0; j < p->n_ell; j++)
    p->out.labels[p->out.rank++] = EIN_LETTERS + j;
  for (int l = 0; l < EIN_LETTERS && p->out.rank < NR_MAX_RANK; l++)
    if (p->uses[l] == 1)
      p->out.labels[p->out.rank++] = l;
}

static nr_status ein_parse_inputs(nr_op_ctx *ctx, ein_plan *p, const char *eq,
                                  size_t lhs_len, int *ells) {
  const char *s = eq;
  p->n_in = 0;
  p->n_ell = 0;
  for (size_t start = 0, i = 0; i <= lhs_len; i++) {
    if (i < lhs_len && eq[i] != ',')
      continue;
    if (p->n_in == EIN_MAX_INPUTS)
      return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "Einsum with more than %d operands",
                        EIN_MAX_INPUTS);
    if (p->n_in == ctx->n_inputs)
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                        "equation '%s' has more terms than the "
                        "%d inputs",
                        eq, ctx->n_inputs);
    int k = p->n_in++;
    nr_status st = ein_parse_term(ctx, s + start, i - start, &p->in[k], &ells[k]);
    if (st)
      return st;
    int rank = nr_op_in(ctx, k)->rank, e = rank - p->in[k].rank;
    if (ells[k] >= 0 && e > p->n_ell)
      p->n_ell = e;
    start = i + 1;
  }
  if (p->n_in != ctx->n_inputs)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "equation '%s' has %d terms for %d inputs", eq, p->n_in,
                      ctx->n_inputs);
  return NR_OK;
}

/* Builds the plan; *known is false when an input's rank is not known yet. */
static nr_status ein_plan_build(nr_op_ctx *ctx, ein_plan *p, bool *known) {
  memset(p, 0, sizeof *p);
  const char *eq = nr_attr_string(ctx->node, "equation", NULL);
  if (!eq)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "attribute equation is required");
  *known = true;
  for (int i = 0; i < ctx->n_inputs; i++)
    if (!nr_op_in(ctx, i) || nr_op_in(ctx, i)->rank < 0)
      *known = false;
  if (!*known)
    return NR_OK;
  const char *arrow = strstr(eq, "->");
  int ells[EIN_MAX_INPUTS];
  nr_status st =
      ein_parse_inputs(ctx, p, eq, arrow ? (size_t)(arrow - eq) : strlen(eq), ells);
  for (int i = 0; !st && i < p->n_in; i++)
    st = ein_expand(ctx, &p->in[i], ells[i], nr_op_in(ctx, i)->rank, p->n_ell);
  if (!st)
    st = ein_sizes(ctx, p);
  if (st)
    return st;
  if (arrow)
    return ein_output(ctx, p, arrow + 2, strlen(arrow + 2));
  ein_implicit_output(p);
  return NR_OK;
}

nr_status nr_ref_einsum_infer(nr_op_ctx *ctx) {
  if (ctx->n_inputs < 1)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "Einsum needs at least one input");
  nr_dtype t = nr_op_in(ctx, 0) ? nr_op_in(ctx, 0)->dtype : NR_DTYPE_UNDEFINED;
  for (int i = 0; i < ctx->n_inputs; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    if (!v || (v->dtype && t && v->dtype != t))
      return nr_op_fail(ctx, NR_ERR_SHAPE, "input %d is missing or not of type %s", i,
                        nr_dtype_name(t));
  }
  if (t && !nr_dtype_is_float(t) && !nr_dtype_is_int(t))
    return nr_op_fail(ctx, nr_dtype_size(t) ? NR_ERR_SHAPE : NR_ERR_UNSUPPORTED,
                      "Einsum does not take dtype %s", nr_dtype_name(t));
  ein_plan p;
  bool known;
  nr_status st = ein_plan_build(ctx, &p, &known);
  if (st || !known)
    return st ? st : nr_op_set_output(ctx, 0, t, -1, NULL);
  int64_t dims[NR_MAX_RANK];
  for (int d = 0; d < p.out.rank; d++)
    dims[d] = p.size[p.out.labels[d]];
  return nr_op_set_output(ctx, 0, t, p.out.rank, dims);
}

/* ---- evaluation ----------------------------------------------------------------- */

typedef struct ein_loop {
  int n; /* labels walked */
  int labels[EIN_LABELS];
  int64_t sizes[EIN_LABELS];
  int64_t strides[EIN_MAX_INPUTS][EIN_LABELS]; /* per input, per walked label */
} ein_loop;

/* Per input, the element stride of each label (summed over repeated labels, zero
 * where a size-1 dim broadcasts). */
static void ein_input_strides(nr_op_ctx *ctx, const ein_plan *p,
                              int64_t (*st)[EIN_LABELS]) {
  for (int i = 0; i < p->n_in; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    int64_t strides[NR_MAX_RANK];
    nr_strides(v->rank, v->dims, strides);
    memset(st[i], 0, sizeof(int64_t) * EIN_LABELS);
    for (int d = 0; d < v->rank; d++)
      if (v->dims[d] != 1)
        st[i][p->in[i].labels[d]] += strides[d];
  }
}

static void ein_loop_add(ein_loop *lp, const ein_plan *p, int64_t (*st)[EIN_LABELS],
                         int l) {
  int k = lp->n++;
  lp->labels[k] = l;
  lp->sizes[k] = p->size[l];
  for (int i = 0; i < p->n_in; i++)
    lp->strides[i][k] = st[i][l];
}

/* Sum over the reduced labels of the product of the inputs, from base offsets. */
static void ein_reduce(nr_op_ctx *ctx, const ein_loop *red, const int64_t *base,
                       bool is_float, double *fsum, int64_t *isum) {
  int n_in = ctx->n_inputs;
  int64_t idx[EIN_LABELS] = {0};
  for (int k = 0; k < red->n; k++)
    if (red->sizes[k] == 0)
      return;
  for (;;) {
    double fp = 1;
    uint64_t ip = 1;
    for (int i = 0; i < n_in; i++) {
      int64_t off = base[i];
      for (int k = 0; k < red->n; k++)
        off += idx[k] * red->strides[i][k];
      const nr_value *v = nr_op_in(ctx, i);
      if (is_float)
        fp *= nr_load_f64(v->dtype, v->data, off);
      else
        ip *= (uint64_t)nr_load_i64(v->dtype, v->data, off);
    }
    *fsum += fp;
    *isum = (int64_t)((uint64_t)*isum + ip);
    int k = red->n - 1;
    for (; k >= 0 && ++idx[k] == red->sizes[k]; k--)
      idx[k] = 0;
    if (k < 0)
      return;
  }
}

nr_status nr_ref_einsum_run(nr_op_ctx *ctx) {
  ein_plan p;
  bool known;
  nr_status st = ein_plan_build(ctx, &p, &known);
  if (st)
    return st;
  int64_t strides[EIN_MAX_INPUTS][EIN_LABELS];
  int64_t(*stv)[EIN_LABELS] = strides;
  ein_input_strides(ctx, &p, stv);
  ein_loop out = {0}, red = {0};
  bool in_out[EIN_LABELS] = {0};
  for (int d = 0; d < p.out.rank; d++) {
    ein_loop_add(&out, &p, stv, p.out.labels[d]);
    in_out[p.out.labels[d]] = true;
  }
  for (int l = 0; l < EIN_LABELS; l++)
    if (p.uses[l] && !in_out[l])
      ein_loop_add(&red, &p, stv, l);
  nr_value *y = nr_op_out(ctx, 0);
  bool is_float = nr_dtype_is_float(y->dtype);
  int64_t idx[NR_MAX_RANK] = {0};
  for (int64_t j = 0, n = nr_value_count(y); j < n; j++) {
    int64_t base[EIN_MAX_INPUTS];
    for (int i = 0; i < p.n_in; i++) {
      base[i] = 0;
      for (int k = 0; k < out.n; k++)
        base[i] += idx[k] * out.strides[i][k];
    }
    double fsum = 0;
    int64_t isum = 0;
    ein_reduce(ctx, &red, base, is_float, &fsum, &isum);
    if (is_float)
      nr_store_f64(y->dtype, y->data, j, fsum);
    else
      nr_store_i64(y->dtype, y->data, j, isum);
    for (int k = out.n - 1; k >= 0 && ++idx[k] == out.sizes[k]; k--)
      idx[k] = 0;
  }
  return NR_OK;
}
