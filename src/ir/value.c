/* value.c - nr_value: a dtype, a shape and optionally the data, used both as a
 * tensor's static description and as a runtime value (see ir.h). Allocation is
 * overflow-checked because shapes come from untrusted files. */
#include "ir/dtype.h"
#include "ir/ir.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t nr_value_count(const nr_value *v) {
  if (v->rank < 0)
    return -1;
  int64_t n = 1;
  bool zero = false, over = false; /* a 0 dim makes 0 whatever the others multiply to */
  for (int i = 0; i < v->rank; i++) {
    if (v->dims[i] < 0)
      return -1;
    zero |= v->dims[i] == 0;
    over = over || __builtin_mul_overflow(n, v->dims[i], &n);
  }
  return zero ? 0 : over ? INT64_MAX : n;
}

size_t nr_value_nbytes(const nr_value *v) {
  int64_t n = nr_value_count(v);
  return n < 0 ? 0 : (size_t)n * nr_dtype_size(v->dtype);
}

bool nr_value_shape_known(const nr_value *v) {
  return v->dtype != NR_DTYPE_UNDEFINED && nr_value_count(v) >= 0;
}

void nr_value_free(nr_value *v) {
  if (v->owned)
    free(v->data);
  v->data = NULL;
  v->owned = false;
}

void nr_buffer_free(nr_buffer *b) {
  if (b) {
    free(b->data);
    b->data = NULL;
  }
}

/* Element count of a shape, failing on negative dims or overflow past 2^40
 * elements (a limit no real model reaches and every size_t multiply survives). */
static nr_status checked_count(int rank, const int64_t *dims, int64_t *out,
                               nr_error *err) {
  const int64_t limit = (int64_t)1 << 40;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return nr_errorf(err, NR_ERR_SHAPE, "dimension %d is %lld, not a size", i,
                       (long long)dims[i]);
    if (dims[i] != 0 && n > limit / dims[i])
      return nr_errorf(err, NR_ERR_NOMEM, "tensor of more than 2^40 elements");
    n *= dims[i];
  }
  *out = n;
  return NR_OK;
}

nr_status nr_value_alloc(nr_value *v, nr_dtype dtype, int rank, const int64_t *dims,
                         nr_error *err) {
  if (rank < 0 || rank > NR_MAX_RANK)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "rank %d is beyond nnroute's limit of %d",
                     rank, NR_MAX_RANK);
  size_t esize = nr_dtype_size(dtype);
  if (esize == 0)
    return nr_errorf(err, NR_ERR_UNSUPPORTED, "dtype %s is not supported",
                     nr_dtype_name(dtype));
  int64_t n = 0;
  nr_status st = checked_count(rank, dims, &n, err);
  if (st)
    return st;
  /* Copy dims first: dims may alias v->dims. */
  int64_t tmp[NR_MAX_RANK];
  if (rank > 0)
    memcpy(tmp, dims, sizeof(int64_t) * (size_t)rank);
  nr_value_free(v);
  v->dtype = dtype;
  v->rank = rank;
  if (rank > 0)
    memcpy(v->dims, tmp, sizeof(int64_t) * (size_t)rank);
  for (int i = rank; i < NR_MAX_RANK; i++)
    v->dims[i] = 0;
  /* calloc of at least one byte so that empty tensors still get a valid pointer. */
  v->data = calloc((size_t)n ? (size_t)n : 1, esize);
  if (!v->data)
    return nr_errorf(err, NR_ERR_NOMEM, "cannot allocate %lld elements of %s",
                     (long long)n, nr_dtype_name(dtype));
  v->owned = true;
  return NR_OK;
}

nr_status nr_value_copy(nr_value *dst, const nr_value *src, nr_error *err) {
  if (dst == src)
    return NR_OK;
  if (!src->data) {
    nr_value_free(dst);
    *dst = *src;
    dst->owned = false;
    return NR_OK;
  }
  nr_value tmp = {0};
  nr_status st = nr_value_alloc(&tmp, src->dtype, src->rank, src->dims, err);
  if (st)
    return st;
  memcpy(tmp.data, src->data, nr_value_nbytes(src));
  nr_value_free(dst);
  *dst = tmp;
  return NR_OK;
}

const char *nr_value_describe(const nr_value *v, char *buf, size_t cap) {
  size_t len = (size_t)snprintf(buf, cap, "%s", nr_dtype_name(v->dtype));
  if (v->rank < 0) {
    snprintf(buf + (len < cap ? len : cap), len < cap ? cap - len : 0, "[?]");
    return buf;
  }
  for (int i = 0; i <= v->rank && len < cap; i++) {
    const char *sep = i == 0 ? "[" : "x";
    if (i == v->rank)
      len += (size_t)snprintf(buf + len, cap - len, "%s]", i == 0 ? "[" : "");
    else if (v->dims[i] < 0)
      len += (size_t)snprintf(buf + len, cap - len, "%s?", sep);
    else
      len += (size_t)snprintf(buf + len, cap - len, "%s%lld", sep, (long long)v->dims[i]);
  }
  return buf;
}

int64_t nr_value_get_i64(const nr_value *v, int64_t i) {
  return nr_load_i64(v->dtype, v->data, i);
}

double nr_value_get_f64(const nr_value *v, int64_t i) {
  return nr_load_f64(v->dtype, v->data, i);
}
