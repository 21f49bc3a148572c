/* accuracy.c - the loss metrics and the tolerance check (accuracy.h).
 *
 * Losses decide which routes are kept, and tolerances are often tiny (1e-6 and
 * below), so the key decision is numerical: everything is computed in double, and
 * each output is walked three times rather than once. The first walk checks for
 * NaN/Inf and finds the largest magnitudes; the second sums values scaled by a power
 * of two (an exact scaling), so that squares neither overflow for huge outputs nor
 * underflow for tiny ones; the third takes the cosine distance as half the squared
 * distance between the two unit vectors, which stays precise when the outputs are
 * nearly identical, where 1 - cos would cancel to 0 or go negative. Sums are
 * compensated (Neumaier), so their error does not grow with the element count.
 *
 * Edge cases, all of them deliberate:
 *   - empty tensors (a zero dim): every loss is 0;
 *   - a NaN or Inf in ref while got is finite (a reference that overflowed): every
 *     loss is +inf but the result is true: the candidate is not "nonfinite", it just
 *     cannot be shown to be close;
 *   - rel_l2 with ref all zeros: the absolute ||got - ref||;
 *   - cos: 0 when both are all zeros, 1 (similarity 0) when exactly one is;
 *   - top1: a row agrees when got's argmax (its first maximum) is a maximum of ref's
 *     row, so a tie in the reference is not counted as a disagreement. */
#include "tune/accuracy.h"

#include "ir/dtype.h"
#include "tune/confidence.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const metric_names[NR_METRIC_COUNT] = {
    [NR_METRIC_L0] = "l0",         [NR_METRIC_L1] = "l1",   [NR_METRIC_L2] = "l2",
    [NR_METRIC_LINF] = "linf",     [NR_METRIC_REL_L2] = "rel_l2",
    [NR_METRIC_COS] = "cos",       [NR_METRIC_TOP1] = "top1",
};

const char *nr_metric_name(nr_metric m) {
  if ((int)m < 0 || m >= NR_METRIC_COUNT)
    return "unknown";
  return metric_names[m];
}

bool nr_metric_parse(const char *text, nr_metric *out) {
  for (int m = 0; text && m < NR_METRIC_COUNT; m++) {
    if (!strcmp(text, metric_names[m])) {
      if (out)
        *out = (nr_metric)m;
      return true;
    }
  }
  return false;
}

/* ---- compensated sums --------------------------------------------------------------- */

typedef struct ksum {
  double s, c;
} ksum;

static void ksum_add(ksum *k, double x) {
  double t = k->s + x;
  if (fabs(k->s) >= fabs(x))
    k->c += (k->s - t) + x;
  else
    k->c += (x - t) + k->s;
  k->s = t;
}

static double ksum_value(const ksum *k) { return k->s + k->c; }

/* A power of two that brings max (finite, >= 0) near 1. The exponent is clamped so
 * the factor itself stays finite and normal. */
static double scale_for(double max) {
  if (!(max > 0) || isinf(max))
    return 1.0;
  int e = ilogb(max);
  e = e < -1000 ? -1000 : e > 1000 ? 1000 : e;
  return ldexp(1.0, -e);
}

/* ---- the walks ---------------------------------------------------------------------- */

typedef struct walk {
  const nr_buffer *got, *ref;
  int64_t n;
  bool got_bad, ref_bad;  /* a NaN or Inf seen */
  double gmax, rmax, dmax; /* largest |got|, |ref|, |got - ref| */
  int64_t l0_count;
  double gnorm_s, rnorm_s; /* ||got||, ||ref|| in their scaled units */
  double sg, sr;           /* those scales */
} walk;

/* First walk: finiteness, maxima, linf and the l0 count. */
static void walk_extremes(walk *w, double atol, double rtol) {
  for (int64_t i = 0; i < w->n; i++) {
    double g = nr_load_f64(w->got->dtype, w->got->data, i);
    double r = nr_load_f64(w->ref->dtype, w->ref->data, i);
    if (!isfinite(g)) {
      w->got_bad = true;
      return;
    }
    if (!isfinite(r)) {
      w->ref_bad = true;
      continue;
    }
    double d = fabs(g - r);
    w->gmax = fmax(w->gmax, fabs(g));
    w->rmax = fmax(w->rmax, fabs(r));
    w->dmax = fmax(w->dmax, d);
    if (d > atol + rtol * fabs(r))
      w->l0_count++;
  }
}

/* Second walk: the l1 and l2 losses, rel_l2, and the scaled norms cos needs. */
static void walk_sums(walk *w, double out[NR_METRIC_COUNT]) {
  double sd = scale_for(w->dmax);
  w->sg = scale_for(w->gmax);
  w->sr = scale_for(w->rmax);
  ksum d1 = {0}, d2 = {0}, g2 = {0}, r2 = {0};
  for (int64_t i = 0; i < w->n; i++) {
    double g = nr_load_f64(w->got->dtype, w->got->data, i);
    double r = nr_load_f64(w->ref->dtype, w->ref->data, i);
    double d = (g - r) * sd;
    ksum_add(&d1, fabs(d));
    ksum_add(&d2, d * d);
    ksum_add(&g2, (g * w->sg) * (g * w->sg));
    ksum_add(&r2, (r * w->sr) * (r * w->sr));
  }
  double n = (double)w->n;
  out[NR_METRIC_L1] = ksum_value(&d1) / n / sd;
  out[NR_METRIC_L2] = ksum_value(&d2) / n / sd / sd;
  w->gnorm_s = sqrt(ksum_value(&g2));
  w->rnorm_s = sqrt(ksum_value(&r2));
  double dnorm = sqrt(ksum_value(&d2)) / sd;
  out[NR_METRIC_REL_L2] = w->rnorm_s > 0 ? dnorm / (w->rnorm_s / w->sr) : dnorm;
}

/* Third walk: 1 - cos = |u - v|^2 / 2 for the unit vectors u, v of got and ref. */
static double walk_cos(const walk *w) {
  if (w->gnorm_s == 0 || w->rnorm_s == 0)
    return w->gnorm_s == w->rnorm_s ? 0.0 : 1.0;
  double fg = w->sg / w->gnorm_s, fr = w->sr / w->rnorm_s;
  ksum s = {0};
  for (int64_t i = 0; i < w->n; i++) {
    double u = nr_load_f64(w->got->dtype, w->got->data, i) * fg;
    double v = nr_load_f64(w->ref->dtype, w->ref->data, i) * fr;
    ksum_add(&s, (u - v) * (u - v));
  }
  double loss = 0.5 * ksum_value(&s);
  return loss < 0 ? 0 : loss > 2 ? 2 : loss;
}

static int64_t row_argmax(const nr_buffer *b, int64_t start, int64_t len) {
  int64_t best = 0;
  double best_v = nr_load_f64(b->dtype, b->data, start);
  for (int64_t j = 1; j < len; j++) {
    double v = nr_load_f64(b->dtype, b->data, start + j);
    if (v > best_v) {
      best_v = v;
      best = j;
    }
  }
  return best;
}

/* Fraction of rows along the last axis where got's argmax is not a maximum of ref. */
static double top1_loss(const walk *w) {
  int64_t len = w->ref->rank > 0 ? w->ref->dims[w->ref->rank - 1] : 1;
  int64_t rows = w->n / len, wrong = 0;
  for (int64_t row = 0; row < rows; row++) {
    int64_t start = row * len;
    int64_t g = row_argmax(w->got, start, len), r = row_argmax(w->ref, start, len);
    double at_g = nr_load_f64(w->ref->dtype, w->ref->data, start + g);
    double at_r = nr_load_f64(w->ref->dtype, w->ref->data, start + r);
    if (at_g < at_r)
      wrong++;
  }
  return (double)wrong / (double)rows;
}

/* ---- nr_losses_compute -------------------------------------------------------------- */

static bool same_layout(const nr_buffer *got, const nr_buffer *ref) {
  if (!got || !ref || got->dtype != ref->dtype || nr_dtype_size(ref->dtype) == 0)
    return false;
  if (got->rank != ref->rank || ref->rank < 0 || ref->rank > NR_MAX_RANK)
    return false;
  for (int d = 0; d < ref->rank; d++)
    if (got->dims[d] != ref->dims[d] || ref->dims[d] < 0)
      return false;
  return nr_buffer_count(ref) == 0 || (got->data && ref->data);
}

static void fill(double out[NR_METRIC_COUNT], double v) {
  for (int m = 0; m < NR_METRIC_COUNT; m++)
    out[m] = v;
}

bool nr_losses_compute(const nr_buffer *got, const nr_buffer *ref, double atol,
                       double rtol, double out[NR_METRIC_COUNT], bool *shape_mismatch) {
  bool layout_ok = same_layout(got, ref);
  if (shape_mismatch)
    *shape_mismatch = !layout_ok;
  fill(out, INFINITY);
  if (!layout_ok)
    return false;
  walk w = {.got = got, .ref = ref, .n = (int64_t)nr_buffer_count(ref)};
  if (w.n == 0) {
    fill(out, 0.0);
    return true;
  }
  walk_extremes(&w, atol, rtol);
  if (w.got_bad)
    return false;
  if (w.ref_bad)
    return true;
  out[NR_METRIC_L0] = (double)w.l0_count / (double)w.n;
  out[NR_METRIC_LINF] = w.dmax;
  walk_sums(&w, out);
  out[NR_METRIC_COS] = walk_cos(&w);
  out[NR_METRIC_TOP1] = top1_loss(&w);
  return true;
}

/* ---- tolerances --------------------------------------------------------------------- */

double nr_tolerance_eps(const nr_tolerance *t, const char *output_name) {
  if (!t)
    return INFINITY; /* no tolerance: nothing is out of bounds */
  int n = t->n_overrides < 0 ? 0
          : t->n_overrides > NR_TOL_MAX_OVERRIDES ? NR_TOL_MAX_OVERRIDES
                                                  : t->n_overrides;
  for (int i = 0; output_name && i < n; i++)
    if (t->override_name[i] && !strcmp(t->override_name[i], output_name))
      return t->override_eps[i];
  return t->eps;
}

/* bound - loss, with NaN (a NaN loss or bound) as -inf and inf - inf as 0. */
static double margin_of(double eps, double loss) {
  if (isnan(eps) || isnan(loss))
    return -INFINITY;
  return loss == eps ? 0.0 : eps - loss;
}

double nr_losses_over_pairs(const double *losses, int n_pairs, int n_outputs, int output,
                            nr_metric m) {
  bool pool = m == NR_METRIC_L0 || m == NR_METRIC_TOP1;
  double acc = 0;
  for (int p = 0; p < n_pairs; p++) {
    double l = losses[((size_t)p * (size_t)n_outputs + (size_t)output) * NR_METRIC_COUNT +
                      (size_t)m];
    if (isnan(l))
      return NAN;
    acc = pool ? acc + l : (l > acc ? l : acc);
  }
  return pool && n_pairs > 0 ? acc / n_pairs : acc;
}

double nr_margin_fraction(double eps, double loss) {
  if (isnan(eps) || isnan(loss))
    return -INFINITY;
  if (loss == 0 || eps == INFINITY)
    return 1.0; /* nothing of the bound is used, or nothing can exceed it */
  if (eps == 0)
    return -INFINITY;
  return 1.0 - loss / eps;
}

bool nr_tolerance_margins(const nr_tolerance *t, const double *losses, int n_pairs,
                          int n_outputs, const char *const *output_names,
                          double *worst_margin, double *worst_fraction) {
  bool args_ok = t && (int)t->metric >= 0 && t->metric < NR_METRIC_COUNT &&
                 n_pairs >= 0 && n_outputs >= 0 && t->min_margin >= 0 &&
                 t->min_margin < 1 && (losses || n_pairs == 0 || n_outputs == 0);
  double worst = args_ok ? INFINITY : -INFINITY, frac = worst;
  bool ok = args_ok;
  for (int o = 0; args_ok && n_pairs > 0 && o < n_outputs; o++) {
    double eps = nr_tolerance_eps(t, output_names ? output_names[o] : NULL);
    double loss = nr_losses_over_pairs(losses, n_pairs, n_outputs, o, t->metric);
    ok = ok && loss <= (1 - t->min_margin) * eps; /* false for a NaN */
    worst = fmin(worst, margin_of(eps, loss));
    frac = fmin(frac, nr_margin_fraction(eps, loss));
  }
  if (worst_margin)
    *worst_margin = worst;
  if (worst_fraction)
    *worst_fraction = frac;
  return ok;
}

bool nr_tolerance_check(const nr_tolerance *t, const double *losses, int n_pairs,
                        int n_outputs, const char *const *output_names,
                        double *worst_margin) {
  return nr_tolerance_margins(t, losses, n_pairs, n_outputs, output_names, worst_margin,
                              NULL);
}

/* ---- what a set of pairs says about one output ---------------------------------- */

int64_t nr_metric_trials(nr_metric m, const nr_buffer *ref) {
  if (!ref || (m != NR_METRIC_TOP1 && m != NR_METRIC_L0))
    return 0;
  int64_t n = (int64_t)nr_buffer_count(ref);
  if (m == NR_METRIC_L0 || n == 0)
    return n;
  int64_t len = ref->rank > 0 ? ref->dims[ref->rank - 1] : 1;
  return n / len; /* n > 0, so len > 0 */
}

static int cmp_loss(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of the sorted v[0..n), interpolating between closest ranks. */
static double sorted_quantile(const double *v, int n, double q) {
  double pos = q * (double)(n - 1);
  int i = (int)pos;
  return i + 1 < n ? v[i] + (v[i + 1] - v[i]) * (pos - (double)i) : v[i];
}

/* max and p95 of the output's per-pair losses; NaN when one is NaN or memory runs
 * out. */
static void pair_spread(const double *losses, int n_pairs, int n_outputs, int output,
                        nr_metric m, nr_output_accuracy *out) {
  out->max = out->p95 = n_pairs > 0 ? NAN : 0;
  double *v = n_pairs > 0 ? malloc(sizeof *v * (size_t)n_pairs) : NULL;
  bool nan = false;
  for (int p = 0; v && p < n_pairs; p++) {
    v[p] = losses[((size_t)p * (size_t)n_outputs + (size_t)output) * NR_METRIC_COUNT +
                  (size_t)m];
    nan |= isnan(v[p]);
  }
  if (v && !nan) {
    qsort(v, (size_t)n_pairs, sizeof *v, cmp_loss);
    out->max = v[n_pairs - 1];
    out->p95 = sorted_quantile(v, n_pairs, 0.95);
  }
  free(v);
}

/* Disagreements over the pairs: each pair's rate times its trials, rounded. */
static int64_t count_errors(const double *losses, int n_pairs, int n_outputs, int output,
                            nr_metric m, int64_t per_pair) {
  int64_t errors = 0;
  for (int p = 0; p < n_pairs; p++) {
    double rate = losses[((size_t)p * (size_t)n_outputs + (size_t)output) * NR_METRIC_COUNT +
                         (size_t)m];
    errors += isfinite(rate) ? llround(fmin(fmax(rate, 0), 1) * (double)per_pair)
                             : per_pair;
  }
  return errors;
}

void nr_output_accuracy_compute(const nr_tolerance *t, const double *losses, int n_pairs,
                                int n_outputs, int output, const char *name,
                                int64_t trials_per_pair, nr_output_accuracy *out) {
  *out = (nr_output_accuracy){.n_pairs = n_pairs, .upper = NAN};
  nr_metric m = t->metric;
  out->bound = nr_tolerance_eps(t, name);
  out->loss = nr_losses_over_pairs(losses, n_pairs, n_outputs, output, m);
  out->margin = n_pairs > 0 ? margin_of(out->bound, out->loss) : INFINITY;
  out->fraction = n_pairs > 0 ? nr_margin_fraction(out->bound, out->loss) : INFINITY;
  pair_spread(losses, n_pairs, n_outputs, output, m, out);
  if ((m == NR_METRIC_TOP1 || m == NR_METRIC_L0) && trials_per_pair > 0 &&
      trials_per_pair <= INT64_MAX / (n_pairs > 0 ? n_pairs : 1)) {
    out->trials = trials_per_pair * n_pairs;
    out->errors = count_errors(losses, n_pairs, n_outputs, output, m, trials_per_pair);
    out->upper = nr_clopper_pearson_upper(out->errors, out->trials, NR_CONFIDENCE_LEVEL);
  }
}
