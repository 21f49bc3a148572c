/* slice.c - what a Slice step reads, worked out once for every backend: the first
 * index and the step along each axis, from constant starts, ends, axes and steps
 * (inputs since opset 10, attributes before), with ONNX's clamping rules for
 * negative and out-of-range values and for negative steps. The CPU and CUDA copy
 * tactics store the result as their params record, and the memory pass reads it back
 * to decide whether a Slice's output is a contiguous piece of its input. */
#include "plan/tactic.h"
#include "util/error.h"

#include <string.h>

/* List i (1 starts, 2 ends, 3 axes, 4 steps) as int64; *n = -1 when absent; false
 * when not readable (not constant, not an integer list, longer than a shape). */
static bool slice_list(const nr_tactic_ctx *c, int i, const char *attr, int64_t *out,
                       int *n) {
  *n = -1;
  if (c->node->opset < 10) {
    size_t cnt;
    const int64_t *a = nr_attr_ints(c->node, attr, &cnt);
    if (a && cnt <= NR_MAX_RANK) {
      memcpy(out, a, cnt * sizeof *a);
      *n = (int)cnt;
    }
    return !a || cnt <= NR_MAX_RANK;
  }
  const nr_slot *s = nr_step_in(c, i);
  if (!s)
    return true;
  const void *d = nr_step_const(c, i);
  int64_t cnt = s->rank == 1 ? s->dims[0] : -1;
  if (!d || cnt < 0 || cnt > NR_MAX_RANK ||
      (s->dtype != NR_DTYPE_INT64 && s->dtype != NR_DTYPE_INT32))
    return false;
  for (int64_t k = 0; k < cnt; k++)
    out[k] = s->dtype == NR_DTYPE_INT64 ? ((const int64_t *)d)[k] : ((const int32_t *)d)[k];
  *n = (int)cnt;
  return true;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* One axis of extent dim: the first index taken and how many are taken. */
static int64_t slice_axis(int64_t dim, int64_t s, int64_t e, int64_t step, int64_t *first) {
  s += s < 0 ? dim : 0;
  e += e < 0 ? dim : 0;
  if (step > 0) {
    s = clamp(s, 0, dim);
    e = clamp(e, 0, dim);
    *first = s;
    return e > s ? (e - s + step - 1) / step : 0;
  }
  s = clamp(s, -1, dim - 1);
  e = clamp(e, -1, dim - 1);
  *first = s < 0 ? 0 : s;
  return s > e ? (s - e - step - 1) / -step : 0;
}

bool nr_step_slice(const nr_tactic_ctx *c, nr_slice_params *p) {
  const nr_slot *x = nr_step_in(c, 0), *y = nr_step_out(c, 0);
  int64_t st[NR_MAX_RANK], en[NR_MAX_RANK], ax[NR_MAX_RANK], sp[NR_MAX_RANK];
  int ns, ne, na, nt;
  if (!c->node || !x || !y || y->rank != x->rank || c->step->n_out != 1 ||
      !slice_list(c, 1, "starts", st, &ns) || !slice_list(c, 2, "ends", en, &ne) ||
      !slice_list(c, 3, "axes", ax, &na) || !slice_list(c, 4, "steps", sp, &nt) ||
      ns < 0 || ne != ns || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return false;
  memset(p, 0, sizeof *p);
  for (int d = 0; d < x->rank; d++)
    p->step[d] = 1;
  int64_t want[NR_MAX_RANK];
  bool seen[NR_MAX_RANK] = {false};
  memcpy(want, x->dims, sizeof want);
  for (int i = 0; i < ns; i++) {
    int64_t a = na >= 0 ? ax[i] : i, step = nt >= 0 ? sp[i] : 1, first;
    a += a < 0 ? x->rank : 0;
    if (a < 0 || a >= x->rank || seen[a] || step == 0 || step > INT32_MAX ||
        step < -INT32_MAX)
      return false;
    seen[a] = true;
    want[a] = slice_axis(x->dims[a], st[i], en[i], step, &first);
    if (first > INT32_MAX)
      return false;
    p->start[a] = (int32_t)first;
    p->step[a] = (int32_t)step;
  }
  for (int d = 0; d < x->rank; d++) /* the plan's output is what these arguments give */
    if (want[d] != y->dims[d])
      return false;
  return true;
}

_Static_assert(sizeof(nr_slice_params) <= NR_TACTIC_PARAMS, "slice params too big");

nr_status nr_step_slice_prepare(const nr_tactic_ctx *c, nr_plan *plan, nr_step *step) {
  (void)plan;
  nr_slice_params p;
  if (!nr_step_slice(c, &p))
    return nr_errorf(c->err, NR_ERR_INTERNAL, "%s: slice no longer supported",
                     step->tactic->id);
  memcpy(step->params, &p, sizeof p);
  return NR_OK;
}

int32_t nr_slice_step(const nr_slice_params *p, int d) {
  return p->step[d] ? p->step[d] : 1;
}
