/* ref_util.c - the broadcast walker and C-order strides shared by the reference
 * kernels (see ref_util.h). */
#include "kernels/ref/ref_util.h"

#include <math.h>
#include <string.h>

void nr_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

void nr_bcast_init(nr_bcast *it, const nr_value *out, int n, const nr_value *const *ins) {
  memset(it, 0, sizeof *it);
  it->rank = out->rank;
  it->n = n;
  it->count = 1;
  for (int d = 0; d < out->rank; d++) {
    it->dims[d] = out->dims[d];
    it->count *= out->dims[d];
  }
  for (int k = 0; k < n; k++) {
    const nr_value *v = ins[k];
    int64_t s = 1;
    /* Align trailing dims; a dim of 1 (or a missing leading dim) has stride 0. */
    for (int d = out->rank - 1, e = v->rank - 1; d >= 0; d--, e--) {
      if (e >= 0 && v->dims[e] != 1) {
        it->strides[k][d] = s;
        s *= v->dims[e];
      } else {
        it->strides[k][d] = 0;
      }
    }
  }
}

void nr_bcast_next(nr_bcast *it) {
  for (int d = it->rank - 1; d >= 0; d--) {
    it->idx[d]++;
    for (int k = 0; k < it->n; k++)
      it->off[k] += it->strides[k][d];
    if (it->idx[d] < it->dims[d])
      return;
    for (int k = 0; k < it->n; k++)
      it->off[k] -= it->strides[k][d] * it->dims[d];
    it->idx[d] = 0;
  }
}
