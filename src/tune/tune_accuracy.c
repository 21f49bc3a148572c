/* tune_accuracy.c - the accuracy statement of the report: how far a candidate stays
 * from its tolerance on the reference and the holdout pairs, and what the holdout
 * pairs say with a stated confidence (tune_internal.h).
 *
 * Key decision: only the holdout pairs give a confidence bound. The reference pairs
 * chose the candidate, so the best of many routes on them is optimistic by
 * construction; their margin is shown, but a bound computed from them would claim
 * more than the data supports. The rates (top1, l0) get a one-sided 95%
 * Clopper-Pearson upper bound from the disagreements counted over every held-out
 * row or element (confidence.h); the continuous metrics get the largest and the
 * 95th-percentile pair, with the number of pairs, since one bad pair is what a
 * tolerance on them is about. The JSON and the text are built from the same
 * tune_accuracy, so they never disagree. Non-finite numbers are JSON null. */
#include "tune/confidence.h"
#include "tune/tune_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_rate(nr_metric m) { return m == NR_METRIC_TOP1 || m == NR_METRIC_L0; }

static nr_output_accuracy *per_output(const nr_tolerance *tol, int n_outputs,
                                      const char *const *names, const double *losses,
                                      int n_pairs, int64_t *const *trials) {
  nr_output_accuracy *v = calloc((size_t)(n_outputs ? n_outputs : 1), sizeof *v);
  int kind = tol->metric == NR_METRIC_TOP1 ? NR_TRIALS_ROWS : NR_TRIALS_ELEMENTS;
  for (int o = 0; v && o < n_outputs; o++) {
    int64_t per_pair = trials && trials[kind] && is_rate(tol->metric) ? trials[kind][o]
                                                                      : 0;
    nr_output_accuracy_compute(tol, losses, n_pairs, n_outputs, o,
                               names ? names[o] : NULL, per_pair, &v[o]);
  }
  return v;
}

bool tune_accuracy_make(tune_accuracy *a, const nr_tolerance *tol, int n_outputs,
                        const char *const *names, const double *ref, int n_ref,
                        const double *hold, int n_hold, int64_t *const *trials) {
  *a = (tune_accuracy){.tol = tol,
                       .n_outputs = n_outputs,
                       .names = names,
                       .n_ref = ref ? n_ref : 0,
                       .n_hold = hold ? n_hold : 0};
  a->ref = per_output(tol, n_outputs, names, ref, a->n_ref, trials);
  a->ref_ok = nr_tolerance_margins(tol, ref, a->n_ref, n_outputs, names, &a->ref_margin,
                                   &a->ref_frac);
  if (a->n_hold > 0) {
    a->hold = per_output(tol, n_outputs, names, hold, n_hold, trials);
    a->hold_ok = nr_tolerance_margins(tol, hold, n_hold, n_outputs, names,
                                      &a->hold_margin, &a->hold_frac);
    if (!a->hold) {
      tune_accuracy_free(a);
      return false;
    }
  }
  return a->ref != NULL;
}

void tune_accuracy_free(tune_accuracy *a) {
  free(a->ref);
  free(a->hold);
  a->ref = a->hold = NULL;
}

/* ---- the bound in words --------------------------------------------------------- */

void tune_accuracy_bound_text(const nr_output_accuracy *r, nr_metric m, char *out,
                              size_t cap) {
  out[0] = '\0';
  if (!is_rate(m) || r->trials <= 0 || isnan(r->upper) || r->n_pairs <= 0)
    return;
  int64_t per_pair = r->trials / r->n_pairs;
  const char *what = m == NR_METRIC_TOP1 ? "disagreement" : "elements outside atol/rtol";
  int n = snprintf(out, cap, "%s <= %.3g%% with %.0f%% confidence on %lld held-out ",
                   what, 100 * r->upper, 100 * NR_CONFIDENCE_LEVEL, (long long)r->trials);
  if (n < 0 || (size_t)n >= cap)
    return;
  if (m == NR_METRIC_TOP1 && per_pair == 1)
    snprintf(out + n, cap - (size_t)n, "%s", r->trials == 1 ? "input" : "inputs");
  else
    snprintf(out + n, cap - (size_t)n, "%s (%d input%s)",
             m == NR_METRIC_TOP1 ? "rows" : "elements", r->n_pairs,
             r->n_pairs == 1 ? "" : "s");
}

/* ---- JSON ----------------------------------------------------------------------- */

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *output_set_json(const nr_output_accuracy *r, nr_metric m, bool bound) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "pairs", r->n_pairs);
  add_num(j, "loss", r->loss);
  add_num(j, "margin", r->margin);
  add_num(j, "margin_fraction", r->fraction);
  add_num(j, "max", r->max);
  add_num(j, "p95", r->p95);
  if (is_rate(m) && r->trials > 0) {
    cJSON_AddStringToObject(j, "trial", m == NR_METRIC_TOP1 ? "row" : "element");
    cJSON_AddNumberToObject(j, "trials", (double)r->trials);
    cJSON_AddNumberToObject(j, "disagreeing", (double)r->errors);
  }
  if (bound && is_rate(m)) {
    char text[256];
    tune_accuracy_bound_text(r, m, text, sizeof text);
    add_num(j, "upper_bound", r->trials > 0 ? r->upper : NAN);
    if (*text)
      cJSON_AddStringToObject(j, "statement", text);
  }
  return j;
}

static cJSON *set_json(int pairs, bool ok, double margin, double frac) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "pairs", pairs);
  cJSON_AddBoolToObject(j, "within", ok);
  add_num(j, "margin", margin);
  add_num(j, "margin_fraction", frac);
  return j;
}

cJSON *tune_accuracy_json(const tune_accuracy *a) {
  cJSON *j = cJSON_CreateObject();
  nr_metric m = a->tol->metric;
  cJSON_AddStringToObject(j, "metric", nr_metric_name(m));
  add_num(j, "tolerance", a->tol->eps);
  cJSON_AddNumberToObject(j, "min_margin", a->tol->min_margin);
  cJSON_AddNumberToObject(j, "confidence", NR_CONFIDENCE_LEVEL);
  cJSON_AddItemToObject(j, "reference",
                        set_json(a->n_ref, a->ref_ok, a->ref_margin, a->ref_frac));
  if (a->hold)
    cJSON_AddItemToObject(j, "holdout",
                          set_json(a->n_hold, a->hold_ok, a->hold_margin, a->hold_frac));
  else
    cJSON_AddNullToObject(j, "holdout");
  cJSON *outs = cJSON_AddArrayToObject(j, "outputs");
  for (int o = 0; o < a->n_outputs; o++) {
    cJSON *e = cJSON_CreateObject();
    char fallback[32];
    snprintf(fallback, sizeof fallback, "output_%d", o);
    cJSON_AddStringToObject(e, "name", a->names && a->names[o] ? a->names[o] : fallback);
    add_num(e, "tolerance", a->ref[o].bound);
    cJSON_AddItemToObject(e, "reference", output_set_json(&a->ref[o], m, false));
    if (a->hold)
      cJSON_AddItemToObject(e, "holdout", output_set_json(&a->hold[o], m, true));
    else
      cJSON_AddNullToObject(e, "holdout");
    cJSON_AddItemToArray(outs, e);
  }
  return j;
}

/* ---- text ----------------------------------------------------------------------- */

static void print_set(const nr_output_accuracy *r, nr_metric m, const char *what,
                      const char *indent) {
  char loss[128];
  if (is_rate(m) && r->trials > 0)
    snprintf(loss, sizeof loss, "%.3g (%lld of %lld %ss)", r->loss, (long long)r->errors,
             (long long)r->trials, m == NR_METRIC_TOP1 ? "row" : "element");
  else if (is_rate(m))
    snprintf(loss, sizeof loss, "%.3g", r->loss);
  else
    snprintf(loss, sizeof loss, "worst %.3g, p95 %.3g", r->max, r->p95);
  printf("%s  %s (%d pair%s): %s; margin %.3g (%.1f%% of the tolerance)\n", indent, what,
         r->n_pairs, r->n_pairs == 1 ? "" : "s", loss, r->margin, 100 * r->fraction);
}

void tune_accuracy_print(const tune_accuracy *a, const char *indent) {
  nr_metric m = a->tol->metric;
  printf("%saccuracy: %s within %.3g", indent, nr_metric_name(m), a->tol->eps);
  if (a->tol->min_margin > 0)
    printf(", keeping %.3g%% of it in reserve (--min-margin %g)",
           100 * a->tol->min_margin, a->tol->min_margin);
  printf("\n");
  for (int o = 0; o < a->n_outputs; o++) {
    if (a->n_outputs > 1 || (a->names && a->ref[o].bound != a->tol->eps))
      printf("%s output '%s' (bound %.3g):\n", indent,
             a->names && a->names[o] ? a->names[o] : "?", a->ref[o].bound);
    print_set(&a->ref[o], m, "reference", indent);
    if (!a->hold) {
      printf("%s  holdout: not checked\n", indent);
      continue;
    }
    print_set(&a->hold[o], m, "holdout", indent);
    char text[256];
    tune_accuracy_bound_text(&a->hold[o], m, text, sizeof text);
    if (*text)
      printf("%s    %s\n", indent, text);
  }
  if (a->tol->min_margin > 0)
    printf("%s  %s the reserve on the reference pairs%s\n", indent,
           a->ref_ok ? "within" : "OUTSIDE",
           !a->hold     ? ""
           : a->hold_ok ? " and on the holdout pairs"
                        : ", OUTSIDE it on the holdout pairs");
}
