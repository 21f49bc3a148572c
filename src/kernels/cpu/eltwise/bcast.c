/* bcast.c - the broadcasting geometry of the elementwise tactics (bcast.h). */
#include "kernels/cpu/eltwise/bcast.h"

#include <string.h>

/* Whether each input varies along output dim d (false: broadcast); false overall
 * when an input's dim neither matches nor is 1. */
static bool dim_flags(const nr_slot *out, int d, int n_in, const nr_slot *const *in,
                      bool *f) {
  int64_t od = out->dims[d];
  for (int k = 0; k < n_in; k++) {
    int id = d - (out->rank - in[k]->rank);
    int64_t v = id < 0 ? 1 : in[k]->dims[id];
    if (v != od && v != 1)
      return false;
    f[k] = v == od;
  }
  return true;
}

bool nr_bc_build(nr_bc_geom *g, const nr_slot *out, int n_in, const nr_slot *const *in) {
  int64_t dims[NR_MAX_RANK];
  bool full[NR_BC_MAX_IN][NR_MAX_RANK];
  int nd = 0;
  memset(g, 0, sizeof *g);
  if (n_in < 1 || n_in > NR_BC_MAX_IN)
    return false;
  g->n_in = n_in;
  g->count = 1;
  for (int d = 0; d < out->rank; d++) {
    int64_t od = out->dims[d];
    bool f[NR_BC_MAX_IN];
    g->count *= od;
    if (od == 1)
      continue;
    if (!dim_flags(out, d, n_in, in, f))
      return false;
    bool merge = nd > 0;
    for (int k = 0; k < n_in && merge; k++)
      merge = full[k][nd - 1] == f[k];
    if (merge) {
      dims[nd - 1] *= od;
      continue;
    }
    for (int k = 0; k < n_in; k++)
      full[k][nd] = f[k];
    dims[nd++] = od;
  }
  if (nd == 0) { /* a single element */
    dims[nd] = 1;
    for (int k = 0; k < n_in; k++)
      full[k][nd] = true;
    nd = 1;
  }
  for (int k = 0; k < n_in; k++) {
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
      g->st[k][d] = full[k][d] ? s : 0;
      s *= full[k][d] ? dims[d] : 1;
    }
    g->rs[k] = full[k][nd - 1];
  }
  g->run = dims[nd - 1];
  g->nd = nd - 1;
  memcpy(g->dims, dims, sizeof(int64_t) * (size_t)g->nd);
  return true;
}

void nr_bc_flat(nr_bc_geom *g, int n_in, int64_t n) {
  memset(g, 0, sizeof *g);
  g->n_in = n_in;
  g->run = n;
  g->count = n;
  for (int k = 0; k < n_in; k++)
    g->rs[k] = 1;
}

/* Input offsets of run r. */
static void bc_offsets(const nr_bc_geom *g, int64_t r, int64_t *off) {
  for (int k = 0; k < g->n_in; k++)
    off[k] = 0;
  for (int d = g->nd - 1; d >= 0; d--) {
    int64_t i = r % g->dims[d];
    r /= g->dims[d];
    for (int k = 0; k < g->n_in; k++)
      off[k] += i * g->st[k][d];
  }
}

void nr_bc_walk(const nr_bc_geom *g, int64_t begin, int64_t end, nr_bc_fn fn, void *arg) {
  int64_t r = g->run ? begin / g->run : 0, pos = g->run ? begin % g->run : 0;
  while (begin < end) {
    int64_t off[NR_BC_MAX_IN], len = g->run - pos;
    if (len > end - begin)
      len = end - begin;
    bc_offsets(g, r, off);
    for (int k = 0; k < g->n_in; k++)
      off[k] += pos * g->rs[k];
    fn(arg, off, begin, len);
    begin += len;
    r++;
    pos = 0;
  }
}
