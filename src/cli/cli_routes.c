/* cli_routes.c - seeded random build routes and the error they may add, shared by the
 * two commands that check engines along routes: `check-routes` (a model against the
 * reference executor or ONNX Runtime) and `conformance --routes` (the ONNX node tests).
 *
 * Key decision: a route is drawn from the model's knob list alone (knob instances,
 * their valid values and flags) and a seed, so the same seed gives the same routes
 * wherever the same model is checked, and a failure can be replayed by its printed
 * route text. The bound of a route is data of the knob tables (error_bound, or a bound
 * per value for the precision knob); this file only adds it up. */
#include "api/nnroute_tools.h"
#include "cli/cli.h"
#include "ir/dtype.h"

#include <math.h>
#include <string.h>

/* Bounded precision rows (precision@NODE) draw with their own probability. */
static bool bounded_precision(const nr_knob_info *k) {
  return (k->flags & NR_KNOB_INFO_PRECISION) && k->def_bounds;
}

/* Each instance leaves its default with probability p, to a uniformly drawn value.
 * A knob of reduced precision without documented per-value bounds (quant.calibration,
 * cuda.precision) stays at its default: nothing bounds what it may change. The bounded
 * ones leave it with probability min(p, precision_changes / their count): a node in
 * reduced precision may add far more error than any other knob (docs/precision.md),
 * and with a few such nodes per route, whatever the model's size, the route's bound
 * stays small enough to tell a wrong kernel from rounding. */
void nr_cli_draw_route(const nr_knob_list *l, int *choice, double p,
                       double precision_changes, uint64_t *state) {
  int n_prec = 0;
  for (int i = 0; i < l->n; i++)
    n_prec += bounded_precision(&l->knobs[i]);
  double q = n_prec && precision_changes / n_prec < p ? precision_changes / n_prec : p;
  for (int i = 0; i < l->n; i++) {
    const nr_knob_info *k = &l->knobs[i];
    choice[i] = k->dflt;
    if ((k->flags & NR_KNOB_INFO_PRECISION) && !k->def_bounds)
      continue;
    double pk = bounded_precision(k) ? q : p;
    if (k->n_values < 2 || (double)(nr_cli_random_u64(state) >> 11) * 0x1p-53 >= pk)
      continue;
    int v = (int)(nr_cli_random_u64(state) % (uint64_t)(k->n_values - 1));
    choice[i] = v >= k->dflt ? v + 1 : v;
  }
}

double nr_cli_route_bound(const nr_knob_list *l, const int *choice, double base) {
  double b = base;
  const char *counted[64]; /* knob names, unique per knob */
  int n_counted = 0;
  for (int i = 0; i < l->n; i++) {
    const nr_knob_info *k = &l->knobs[i];
    if (!(k->flags & NR_KNOB_INFO_ACCURACY))
      continue;
    if (choice[i] != k->dflt) {
      b += nr_knob_info_value_bound(k, choice[i]);
      continue;
    }
    if (!(k->flags & NR_KNOB_INFO_APPROX_DEFAULT))
      continue;
    bool seen = false;
    for (int j = 0; j < n_counted && !seen; j++)
      seen = !strcmp(counted[j], k->name);
    if (!seen && n_counted < 64) {
      counted[n_counted++] = k->name;
      b += k->error_bound;
    }
  }
  return b;
}

bool nr_cli_route_needs_calibration(const nr_knob_list *l, const int *choice) {
  for (int i = 0; i < l->n; i++) {
    const nr_knob_info *k = &l->knobs[i];
    if ((k->flags & NR_KNOB_INFO_NODE_PRECISION) && !strcmp(k->values[choice[i]], "int8"))
      return true;
  }
  return false;
}

double nr_cli_rel_l2(const nr_buffer *got, const nr_buffer *want) {
  size_t n = nr_buffer_count(want);
  if (got->dtype != want->dtype || got->rank != want->rank || nr_buffer_count(got) != n)
    return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double x = nr_load_f64(got->dtype, got->data, (int64_t)i);
    double y = nr_load_f64(want->dtype, want->data, (int64_t)i);
    if (!isfinite(x) && !(isnan(x) && isnan(y)) && x != y)
      return INFINITY;
    if (isfinite(x) && isfinite(y)) {
      num += (x - y) * (x - y);
      den += y * y;
    }
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}
