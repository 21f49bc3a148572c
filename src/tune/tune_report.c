/* tune_report.c - the end of a session (the winner's engine, the JSON report, the
 * database's closing row, the summary table) and `nnroute report`, which chooses
 * again from what a session recorded.
 *
 * The report is built from the database rows, not from the session's memory, so a
 * resumed session reports every candidate of the whole session, and `nnroute report`
 * on the database and on the JSON report see the same data. Non-finite losses are
 * written as JSON null (JSON has no Inf/NaN) and read back as +inf. The winner's
 * accuracy statement (tune_accuracy.c) is built from its row too, holdout losses
 * included; choosing again skips a candidate whose recorded holdout check fails at
 * the new tolerance, as the session rejects such a finalist. */
#include "tune/tune_internal.h"
#include "util/version.h"
#include "util/error.h"
#include "util/file_out.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- candidates and the frontier ------------------------------------------------ */

static cJSON *loss_json(const double *l, int n_pairs, int n_outputs,
                        const char *const *names) {
  cJSON *pairs = cJSON_CreateArray();
  for (int p = 0; p < n_pairs; p++) {
    cJSON *outs = cJSON_CreateObject();
    for (int o = 0; o < n_outputs; o++) {
      cJSON *m = cJSON_CreateObject();
      for (int k = 0; k < NR_METRIC_COUNT; k++) {
        double v = l[((size_t)p * n_outputs + o) * NR_METRIC_COUNT + k];
        if (isfinite(v))
          cJSON_AddNumberToObject(m, nr_metric_name((nr_metric)k), v);
        else
          cJSON_AddNullToObject(m, nr_metric_name((nr_metric)k));
      }
      char fallback[32];
      snprintf(fallback, sizeof fallback, "output_%d", o);
      cJSON_AddItemToObject(outs, names ? names[o] : fallback, m);
    }
    cJSON_AddItemToArray(pairs, outs);
  }
  return pairs;
}

typedef struct cand_list {
  cJSON *arr;
  const char *const *names;
} cand_list;

static int add_cand_json(const nr_db_candidate *c, void *user) {
  cand_list *l = user;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "seq", c->seq);
  cJSON_AddStringToObject(j, "route", c->route);
  cJSON_AddStringToObject(j, "phase", c->phase ? c->phase : "");
  cJSON_AddStringToObject(j, "status", c->status);
  if (c->signal)
    cJSON_AddNumberToObject(j, "signal", c->signal);
  if (c->message && *c->message)
    cJSON_AddStringToObject(j, "message", c->message);
  if (c->ignored && *c->ignored) /* the asked route's values its build ignored */
    cJSON_AddStringToObject(j, "ignored", c->ignored);
  cJSON_AddNumberToObject(j, "build_ms", c->build_ms);
  cJSON_AddNumberToObject(j, "engine_bytes", (double)c->engine_bytes);
  cJSON *t = cJSON_AddObjectToObject(j, "screening");
  cJSON_AddNumberToObject(t, "median_ms", c->median_ms);
  double ci[2] = {c->ci_lo_ms, c->ci_hi_ms};
  cJSON_AddItemToObject(t, "ci95_ms", cJSON_CreateDoubleArray(ci, 2));
  cJSON_AddNumberToObject(t, "runs", c->n_times);
  if (c->losses)
    cJSON_AddItemToObject(j, "losses", loss_json(c->losses, c->n_pairs, c->n_outputs,
                                                 l->names));
  if (c->holdout_losses)
    cJSON_AddItemToObject(j, "holdout_losses",
                          loss_json(c->holdout_losses, c->n_holdout_pairs, c->n_outputs,
                                    l->names));
  cJSON_AddItemToArray(l->arr, j);
  return 0;
}

cJSON *tune_candidates_json(tune_session *s, nr_error *err) {
  cand_list l = {cJSON_CreateArray(), s->output_names};
  if (l.arr && nr_db_candidate_foreach(s->db, s->session_id, add_cand_json, &l, err)) {
    cJSON_Delete(l.arr);
    return NULL;
  }
  return l.arr;
}

static int cand_ptr_cmp(const void *a, const void *b) {
  const tune_cand *x = *(tune_cand *const *)a, *y = *(tune_cand *const *)b;
  if (x->median != y->median)
    return (x->median > y->median) - (x->median < y->median);
  return (x->worst_loss > y->worst_loss) - (x->worst_loss < y->worst_loss);
}

/* Measured candidates sorted by latency; a candidate is on the frontier when its
 * worst loss is below that of every faster one. */
static int frontier(const tune_cand *c, int n, const tune_cand **out) {
  const tune_cand **v = malloc(sizeof *v * (size_t)(n ? n : 1));
  int m = 0, k = 0;
  for (int i = 0; v && i < n; i++)
    if (c[i].median > 0 && isfinite(c[i].worst_loss))
      v[m++] = &c[i];
  if (v)
    qsort(v, (size_t)m, sizeof *v, cand_ptr_cmp);
  double best = INFINITY;
  for (int i = 0; i < m; i++)
    if (v[i]->worst_loss < best) {
      best = v[i]->worst_loss;
      out[k++] = v[i];
    }
  free(v);
  return k;
}

cJSON *tune_pareto_json(const tune_cand *c, int n) {
  const tune_cand **f = malloc(sizeof *f * (size_t)(n ? n : 1));
  cJSON *a = cJSON_CreateArray();
  int k = f ? frontier(c, n, f) : 0;
  for (int i = 0; i < k; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "route", f[i]->route);
    cJSON_AddNumberToObject(e, "median_ms", f[i]->median);
    cJSON_AddNumberToObject(e, "worst_loss", f[i]->worst_loss);
    cJSON_AddStringToObject(e, "status", nr_cand_status_name(f[i]->status));
    cJSON_AddItemToArray(a, e);
  }
  free(f);
  return a;
}

/* ---- finishing a session -------------------------------------------------------- */

/* Interrupted before the choice: nothing was confirmed and holdout-checked, so the
 * default route is shipped, never a screening winner. */
static void unconfirmed_winner(tune_session *s) { s->winner_route = strdup(""); }

/* Through a temporary beside `to` (util/file_out.h): a failed copy leaves no half
 * engine under the name the user asked for. */
static nr_status copy_file(const char *from, const char *to, nr_error *err) {
  FILE *in = fopen(from, "rb");
  if (!in)
    return nr_errorf(err, NR_ERR_IO, "cannot copy the engine %s to %s: %s", from, to,
                     strerror(errno));
  nr_file_out out;
  nr_status st = nr_file_out_open(&out, to, "engine", err);
  char buf[1 << 16];
  size_t n;
  bool ok = !st;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
    ok = fwrite(buf, 1, n, out.f) == n;
  if (ok && ferror(in))
    ok = false;
  fclose(in);
  if (st)
    return st;
  if (!ok) {
    nr_file_out_abort(&out);
    return nr_errorf(err, NR_ERR_IO, "cannot copy the engine %s to %s", from, to);
  }
  return nr_file_out_commit(&out, err);
}

/* The winner's kept engine file, or a rebuild (checked on the reference pairs again)
 * when the file is gone. */
static nr_status write_engine(tune_session *s, const tune_cand *w, nr_error *err) {
  if (w->engine_path)
    return copy_file(w->engine_path, s->o->engine_out, err);
  nr_worker_job job = tune_job(s, w->route);
  job.engine_out = s->o->engine_out;
  job.measure = false;
  nr_worker_result r = {0};
  nr_status st = nr_worker_run(&job, &r, err);
  if (!st && r.status != NR_CAND_OK)
    st = nr_errorf(err, NR_ERR_RUNTIME, "rebuilding the chosen route failed (%s: %s)",
                   nr_cand_status_name(r.status), r.message);
  nr_worker_result_free(&r);
  return st;
}

/* A number, or null when it is not finite (JSON has no Inf or NaN). */
static void add_finite(cJSON *j, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(j, key, v);
  else
    cJSON_AddNullToObject(j, key);
}

static void add_winner(tune_session *s, cJSON *report, const tune_cand *w,
                       const tune_accuracy *acc, double wall_s) {
  const tune_cand *d = &s->cands[s->default_idx];
  cJSON *j = cJSON_AddObjectToObject(report, "winner");
  cJSON_AddStringToObject(j, "route", w->route);
  char *dims = w->point ? tune_space_describe(&s->space, w->point) : NULL;
  cJSON_AddStringToObject(j, "dimensions", dims ? dims : "");
  free(dims);
  cJSON_AddNumberToObject(j, "non_default_knobs", w->changes);
  cJSON_AddNumberToObject(j, "screening_median_ms", w->median);
  cJSON_AddNumberToObject(j, "screening_speedup", w->median > 0 ? d->median / w->median : 1);
  double speedup = 1;
  cJSON *fin = cJSON_GetObjectItem(cJSON_GetObjectItem(report, "confirmation"), "finalists");
  cJSON *e;
  cJSON_ArrayForEach(e, fin) {
    cJSON *r = cJSON_GetObjectItem(e, "route");
    if (cJSON_IsString(r) && !strcmp(r->valuestring, w->route)) {
      speedup = cJSON_GetObjectItem(e, "confirmed_speedup")->valuedouble;
      cJSON_AddItemReferenceToObject(j, "confirmed", e);
    }
  }
  cJSON_AddNumberToObject(j, "confirmed_speedup", speedup);
  cJSON_AddNumberToObject(j, "reference_margin", w->margin);
  add_finite(j, "reference_margin_fraction", w->margin_frac);
  add_finite(j, "holdout_margin", acc && acc->hold ? acc->hold_margin : NAN);
  add_finite(j, "holdout_margin_fraction", acc && acc->hold ? acc->hold_frac : NAN);
  if (acc)
    cJSON_AddItemToObject(j, "accuracy", tune_accuracy_json(acc));
  double gain_ms = d->median * (1 - 1 / speedup);
  cJSON_AddNumberToObject(report, "tuning_wall_s", wall_s);
  if (gain_ms > 0)
    cJSON_AddNumberToObject(report, "break_even_inferences", ceil(wall_s * 1000 / gain_ms));
  else
    cJSON_AddNullToObject(report, "break_even_inferences");
}

static void add_header(tune_session *s, cJSON *report) {
  const tune_cand *d = &s->cands[s->default_idx];
  cJSON_AddStringToObject(report, "nnroute_version", NR_VERSION_STRING);
  cJSON_AddStringToObject(report, "nnroute_sources", nr_version_sources());
  cJSON_AddStringToObject(report, "model", s->o->model_path ? s->o->model_path : "");
  cJSON_AddNumberToObject(report, "session", (double)s->session_id);
  cJSON_AddStringToObject(report, "database", s->o->db_path);
  cJSON_AddBoolToObject(report, "interrupted", nr_tune_stop != 0);
  cJSON_AddNumberToObject(report, "builds", s->builds);
  cJSON *set = s->settings ? cJSON_Parse(s->settings) : NULL;
  if (set)
    cJSON_AddItemToObject(report, "settings", set);
  cJSON *space = cJSON_AddArrayToObject(report, "space");
  for (int k = 0; k < s->space.n_dims; k++) {
    cJSON *dj = cJSON_CreateObject();
    cJSON_AddStringToObject(dj, "name", s->space.dims[k].name);
    cJSON_AddItemToObject(dj, "values", cJSON_CreateStringArray(
                                            (const char *const *)s->space.dims[k].values,
                                            s->space.dims[k].n_values));
    cJSON_AddStringToObject(dj, "default", s->space.dims[k].values[s->space.dims[k].dflt]);
    cJSON_AddItemToArray(space, dj);
  }
  cJSON *dj = cJSON_AddObjectToObject(report, "default");
  cJSON_AddNumberToObject(dj, "screening_median_ms", d->median);
  double ci[2] = {d->lo, d->hi};
  cJSON_AddItemToObject(dj, "screening_ci95_ms", cJSON_CreateDoubleArray(ci, 2));
  cJSON_AddNumberToObject(dj, "reference_margin", d->margin);
  add_finite(dj, "reference_margin_fraction", d->margin_frac);
}

static void summary(const tune_session *s, const tune_cand *w, const tune_accuracy *acc,
                    const cJSON *report) {
  int count[NR_CAND_STATUS_COUNT] = {0};
  for (int i = 0; i < s->n_cands; i++)
    count[s->cands[i].status]++;
  printf("\n%-14s %s\n", "status", "candidates");
  for (int k = 0; k < NR_CAND_STATUS_COUNT; k++)
    if (count[k])
      printf("%-14s %d\n", nr_cand_status_name((nr_cand_status)k), count[k]);
  if (s->n_aliases)
    printf(
        "%-14s %d (routes that built a candidate's plan: their other values were "
        "ignored; not built or timed again)\n",
        "same", s->n_aliases);
  const tune_cand *d = &s->cands[s->default_idx];
  const tune_cand **f = malloc(sizeof *f * (size_t)s->n_cands);
  int k = f ? frontier(s->cands, s->n_cands, f) : 0;
  printf("\nPareto frontier (screening median vs worst %s loss):\n",
         nr_metric_name(s->o->tol.metric));
  printf("  %10s %12s  %s\n", "median ms", "worst loss", "route");
  for (int i = 0; i < k && i < 12; i++)
    printf("  %10.3f %12.3g  %s\n", f[i]->median, f[i]->worst_loss,
           *f[i]->route ? f[i]->route : "(default route)");
  free(f);
  cJSON *wj = cJSON_GetObjectItem(report, "winner");
  double cs = cJSON_GetObjectItem(wj, "confirmed_speedup")->valuedouble;
  printf("\ndefault route: %.3f ms\n", d->median);
  if (*w->route)
    printf("winner: %s\n  screening speedup %.3fx, confirmed speedup %.3fx\n", w->route,
           d->median / w->median, cs);
  else
    printf("winner: the default route (%s)\n",
           nr_tune_stop ? "interrupted before a confirmed gain"
                        : "no route was significantly faster within the tolerance");
  if (acc)
    tune_accuracy_print(acc, "  ");
}

/* The winner's accuracy statement from its database row (its holdout losses are
 * there once it was checked). False, with *a untouched, when the row is missing. */
static bool winner_accuracy(tune_session *s, const tune_cand *w, tune_accuracy *a) {
  nr_db_candidate row;
  bool found = false, ok = false;
  if (nr_db_candidate_get(s->db, s->session_id, w->route, &row, &found, NULL) || !found)
    return false;
  if (row.n_outputs == s->n_outputs)
    ok = tune_accuracy_make(a, &s->o->tol, s->n_outputs, s->output_names, row.losses,
                            row.n_pairs, row.holdout_losses, row.n_holdout_pairs,
                            s->hold_trials);
  nr_db_candidate_free(&row);
  return ok;
}

nr_status tune_finish(tune_session *s, cJSON *report, nr_error *err) {
  if (!s->winner_route)
    unconfirmed_winner(s);
  int wi = s->winner_route ? tune_find_cand(s, s->winner_route) : -1;
  if (wi < 0 && nr_tune_stop) { /* Ctrl-C before the default route was measured */
    fprintf(stderr, "nnroute tune: interrupted before the default route was measured; "
            "no engine written\n");
    return nr_db_session_end(s->db, s->session_id, "interrupted", NULL, NULL, err);
  }
  if (wi < 0)
    return nr_errorf(err, NR_ERR_INTERNAL, "the chosen route has no candidate");
  const tune_cand *w = &s->cands[wi];
  double wall_s = s->prior_elapsed + tune_now() - s->t0;
  tune_accuracy acc;
  bool have_acc = winner_accuracy(s, w, &acc);
  add_header(s, report);
  add_winner(s, report, w, have_acc ? &acc : NULL, wall_s);
  cJSON_AddItemToObject(report, "pareto", tune_pareto_json(s->cands, s->n_cands));
  cJSON *cands = tune_candidates_json(s, err);
  if (!cands) {
    if (have_acc)
      tune_accuracy_free(&acc);
    return err->status ? err->status : NR_ERR_NOMEM;
  }
  cJSON_AddItemToObject(report, "candidates", cands);
  cJSON *same = cJSON_AddArrayToObject(report, "same_routes");
  for (int i = 0; i < s->n_aliases; i++) { /* asked for, built another's plan */
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "route", s->aliases[i].route);
    cJSON_AddStringToObject(a, "same_as", s->cands[s->aliases[i].cand].route);
    cJSON_AddItemToArray(same, a);
  }
  /* the default route is the only one that can be shipped unchecked: refuse it when
   * the holdout check said no, unless asked */
  s->engine_refused = !*w->route && s->default_holdout < 0 && !s->o->write_unchecked;
  cJSON_AddBoolToObject(report, "engine_written", s->o->engine_out && !s->engine_refused);
  nr_status st = s->o->engine_out && !s->engine_refused ? write_engine(s, w, err) : NR_OK;
  char *text = st ? NULL : cJSON_Print(report);
  if (!st && !text)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory writing the report");
  if (!st && s->o->report_path)
    st = nr_file_write_whole(s->o->report_path, text, strlen(text), "report", err);
  if (!st)
    st = nr_db_session_end(s->db, s->session_id, nr_tune_stop ? "interrupted" : "done",
                           w->route, text, err);
  if (!st)
    summary(s, w, have_acc ? &acc : NULL, report);
  if (have_acc)
    tune_accuracy_free(&acc);
  free(text);
  return st;
}

/* ---- nnroute report: choosing again --------------------------------------------- */

typedef struct rec {
  char *route, *status;
  double median, worst, hold_worst;
  bool feasible, have_acc;
  tune_accuracy acc; /* margins, and the holdout statement when it was checked */
} rec;

typedef struct rec_list {
  rec *v;
  int n, cap;
  nr_tolerance tol;
  const char **names;
  int n_names;
  int64_t *trials[NR_TRIALS_KINDS]; /* per output, from the settings; NULL: unknown */
} rec_list;

static void rec_push(rec_list *l, const char *route, const char *status, double median,
                     const double *losses, int n_pairs, int n_outputs, const double *hold,
                     int n_hold) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    rec *v = realloc(l->v, sizeof *v * (size_t)cap);
    if (!v)
      return;
    l->v = v;
    l->cap = cap;
  }
  rec *r = &l->v[l->n++];
  *r = (rec){.route = strdup(route ? route : ""),
             .status = strdup(status ? status : ""),
             .median = median,
             .worst = INFINITY,
             .hold_worst = NAN};
  bool measured = status && (!strcmp(status, "ok") || !strcmp(status, "accuracy_fail"));
  if (losses && n_pairs > 0 && n_outputs == l->n_names) {
    r->have_acc = tune_accuracy_make(&r->acc, &l->tol, n_outputs, l->names, losses,
                                     n_pairs, hold, n_hold, l->trials);
    r->feasible = r->have_acc && r->acc.ref_ok && measured;
    r->worst = tune_worst_loss(losses, n_pairs, n_outputs, l->tol.metric);
    if (hold && n_hold > 0)
      r->hold_worst = tune_worst_loss(hold, n_hold, n_outputs, l->tol.metric);
  } else if (status && !strcmp(status, "ok")) {
    r->feasible = true;
    r->worst = 0;
  }
}

static int db_rec(const nr_db_candidate *c, void *user) {
  rec_push(user, c->route, c->status, c->median_ms, c->losses, c->n_pairs, c->n_outputs,
           c->holdout_losses, c->n_holdout_pairs);
  return 0;
}

/* A setting a session recorded, or dflt when an older session lacks it. */
static double setting_num(const cJSON *set, const char *key, double dflt) {
  const cJSON *v = cJSON_GetObjectItem(set, key);
  return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* Per output counts from the settings (holdout_rows, holdout_elements); NULL when the
 * session did not record them or they do not match the outputs. */
static int64_t *trials_from_settings(const cJSON *set, const char *key, int n) {
  const cJSON *a = cJSON_GetObjectItem(set, key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
    return NULL;
  int64_t *v = calloc((size_t)(n ? n : 1), sizeof *v);
  for (int i = 0; v && i < n; i++) {
    const cJSON *x = cJSON_GetArrayItem(a, i);
    v[i] = cJSON_IsNumber(x) && x->valuedouble > 0 ? (int64_t)x->valuedouble : 0;
  }
  return v;
}

/* The session's tolerance from its settings JSON, with the caller's overrides
 * (metric NULL, eps < 0, min_margin < 0: the session's). */
static nr_status tol_from_settings(const cJSON *set, rec_list *l, const char *metric,
                                   double eps, double min_margin, nr_error *err) {
  const cJSON *m = cJSON_GetObjectItem(set, "metric");
  if (!cJSON_IsString(m) || !nr_metric_parse(m->valuestring, &l->tol.metric))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "the recorded session has no metric");
  l->tol.eps = cJSON_GetNumberValue(cJSON_GetObjectItem(set, "tolerance"));
  l->tol.atol = cJSON_GetNumberValue(cJSON_GetObjectItem(set, "atol"));
  l->tol.rtol = cJSON_GetNumberValue(cJSON_GetObjectItem(set, "rtol"));
  l->tol.min_margin = min_margin >= 0 ? min_margin : setting_num(set, "min_margin", 0);
  if (!(l->tol.min_margin >= 0 && l->tol.min_margin < 1))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "--min-margin %g: the margin is a "
                     "fraction of the tolerance, 0 <= F < 1",
                     l->tol.min_margin);
  if (metric && !nr_metric_parse(metric, &l->tol.metric))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "unknown metric '%s' (l0, l1, l2, linf, "
                     "rel_l2, cos, top1)", metric);
  if (eps >= 0)
    l->tol.eps = eps;
  const cJSON *o;
  if (!metric && eps < 0)
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(set, "output_tolerance")) {
      if (l->tol.n_overrides < NR_TOL_MAX_OVERRIDES && cJSON_IsNumber(o)) {
        l->tol.override_name[l->tol.n_overrides] = o->string;
        l->tol.override_eps[l->tol.n_overrides++] = o->valuedouble;
      }
    }
  const cJSON *outs = cJSON_GetObjectItem(set, "outputs");
  l->n_names = cJSON_GetArraySize(outs);
  l->names = calloc((size_t)(l->n_names ? l->n_names : 1), sizeof *l->names);
  for (int i = 0; l->names && i < l->n_names; i++)
    l->names[i] = cJSON_GetStringValue(cJSON_GetArrayItem(outs, i));
  l->trials[NR_TRIALS_ROWS] = trials_from_settings(set, "holdout_rows", l->n_names);
  l->trials[NR_TRIALS_ELEMENTS] = trials_from_settings(set, "holdout_elements",
                                                       l->n_names);
  return l->names ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
}

/* Loss table [pair][output][metric] back from the report's JSON (null = +inf). */
static double *losses_from_json(const cJSON *pairs, const rec_list *l, int *n_pairs) {
  *n_pairs = cJSON_GetArraySize(pairs);
  double *v = malloc(sizeof *v * (size_t)(*n_pairs * l->n_names * NR_METRIC_COUNT + 1));
  for (int p = 0; v && p < *n_pairs; p++)
    for (int o = 0; o < l->n_names; o++) {
      const cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(pairs, p), l->names[o]);
      for (int k = 0; k < NR_METRIC_COUNT; k++) {
        const cJSON *x = cJSON_GetObjectItem(m, nr_metric_name((nr_metric)k));
        v[((size_t)p * l->n_names + o) * NR_METRIC_COUNT + k] =
            cJSON_IsNumber(x) ? x->valuedouble : INFINITY;
      }
    }
  return v;
}

static void json_recs(const cJSON *report, rec_list *l) {
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(report, "candidates")) {
    int np = 0, nh = 0;
    const cJSON *losses = cJSON_GetObjectItem(c, "losses");
    const cJSON *hold = cJSON_GetObjectItem(c, "holdout_losses");
    double *v = losses ? losses_from_json(losses, l, &np) : NULL;
    double *h = hold ? losses_from_json(hold, l, &nh) : NULL;
    rec_push(l, cJSON_GetStringValue(cJSON_GetObjectItem(c, "route")),
             cJSON_GetStringValue(cJSON_GetObjectItem(c, "status")),
             cJSON_GetNumberValue(
                 cJSON_GetObjectItem(cJSON_GetObjectItem(c, "screening"), "median_ms")),
             v, np, l->n_names, h, nh);
    free(v);
    free(h);
  }
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *t = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (t && fread(t, 1, (size_t)n, f) != (size_t)n) {
    free(t);
    t = NULL;
  }
  if (t)
    t[n] = '\0';
  fclose(f);
  return t;
}

/* The holdout column of a shown candidate: the rates' bound, else the worst output's
 * 95th-percentile pair ("-" when it was not checked). */
static void holdout_cells(const rec *r, nr_metric m, char *worst, char *margin,
                          char *spread, size_t cap) {
  snprintf(worst, cap, "-");
  snprintf(margin, cap, "-");
  snprintf(spread, cap, "-");
  if (!r->have_acc || !r->acc.hold)
    return;
  snprintf(worst, cap, "%.3g", r->hold_worst);
  snprintf(margin, cap, "%.1f%%", 100 * r->acc.hold_frac);
  double v = -INFINITY;
  bool rate = m == NR_METRIC_TOP1 || m == NR_METRIC_L0;
  for (int o = 0; o < r->acc.n_outputs; o++)
    v = fmax(v, rate ? r->acc.hold[o].upper : r->acc.hold[o].p95);
  if (rate && !isnan(v) && v > -INFINITY)
    snprintf(spread, cap, "<=%.3g%%", 100 * v);
  else if (!rate)
    snprintf(spread, cap, "%.3g", v);
}

static void print_frontier(const rec_list *l) {
  printf("\n  %10s %11s %8s %11s %9s %10s %9s  %s\n", "median ms", "worst loss", "margin",
         "holdout", "h.margin",
         l->tol.metric == NR_METRIC_TOP1 || l->tol.metric == NR_METRIC_L0 ? "h.bound95"
                                                                          : "h.p95",
         "feasible", "route");
  double best = INFINITY;
  for (int pass = 0; pass < l->n; pass++) { /* frontier by increasing latency */
    const rec *next = NULL;
    for (int i = 0; i < l->n; i++) {
      const rec *r = &l->v[i];
      if (r->median > 0 && r->worst < best &&
          (!next || r->median < next->median))
        next = r;
    }
    if (!next)
      break;
    best = next->worst;
    char margin[32] = "-", hw[32], hm[32], hs[32];
    if (next->have_acc)
      snprintf(margin, sizeof margin, "%.1f%%", 100 * next->acc.ref_frac);
    holdout_cells(next, l->tol.metric, hw, hm, hs, sizeof hw);
    printf("  %10.3f %11.3g %8s %11s %9s %10s %9s  %s\n", next->median, next->worst,
           margin, hw, hm, hs, next->feasible ? "yes" : "no",
           *next->route ? next->route : "(default route)");
  }
}

/* Chooses the fastest feasible candidate that did not fail a recorded holdout check
 * at this tolerance (the tuner rejects such a finalist too). */
static void print_choice(const rec_list *l) {
  const rec *d = NULL, *b = NULL;
  int feasible = 0;
  for (int i = 0; i < l->n; i++) {
    const rec *r = &l->v[i];
    if (r->route && !*r->route)
      d = r;
    feasible += r->feasible;
    bool held_out = r->have_acc && r->acc.hold && !r->acc.hold_ok;
    if (r->feasible && r->median > 0 && !held_out && (!b || r->median < b->median))
      b = r;
  }
  printf("metric %s, tolerance %g", nr_metric_name(l->tol.metric), l->tol.eps);
  if (l->tol.min_margin > 0)
    printf(", min margin %g (loss <= %g)", l->tol.min_margin,
           (1 - l->tol.min_margin) * l->tol.eps);
  printf(": %d of %d candidates feasible\n", feasible, l->n);
  print_frontier(l);
  for (int i = 0; i < l->n; i++) {
    const rec *r = &l->v[i];
    if (r->feasible && r->have_acc && r->acc.hold && !r->acc.hold_ok)
      printf(
          "\nnot chosen: %s fails the holdout pairs at this tolerance (%.1f%% of it "
          "left)\n",
          *r->route ? r->route : "(default route)", 100 * r->acc.hold_frac);
  }
  if (!b) {
    printf("\nno candidate is feasible at this tolerance\n");
    return;
  }
  printf("\nchoice: %s\n", *b->route ? b->route : "(default route)");
  if (d && d->median > 0)
    printf("  screening speedup over the default route %.3fx (not confirmed: run `nnroute "
           "tune` with this tolerance to confirm it)\n", d->median / b->median);
  if (b->have_acc)
    tune_accuracy_print(&b->acc, "  ");
}

static nr_status rechoose_db(const char *path, int64_t session, rec_list *l,
                             const char *metric, double eps, double min_margin,
                             nr_error *err) {
  nr_db *db = NULL;
  nr_db_session ses = {0};
  bool found = false;
  struct stat sb;
  nr_status st = stat(path, &sb) ? nr_errorf(err, NR_ERR_IO, "cannot read %s", path)
                                 : nr_db_open(path, &db, err);
  if (!st)
    st = nr_db_session_get(db, session, &ses, &found, err);
  if (!st && !found)
    st = nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s holds no tuning session%s", path,
                   session ? " with that id" : "");
  cJSON *set = st ? NULL : cJSON_Parse(ses.settings);
  if (!st && !set)
    st = nr_errorf(err, NR_ERR_INVALID_MODEL, "session %lld: unreadable settings",
                   (long long)ses.id);
  if (!st)
    st = tol_from_settings(set, l, metric, eps, min_margin, err);
  if (!st) {
    printf("session %lld (%s): %s\n", (long long)ses.id, ses.state ? ses.state : "?",
           ses.argv ? ses.argv : "");
    st = nr_db_candidate_foreach(db, ses.id, db_rec, l, err);
  }
  cJSON_Delete(set);
  nr_db_session_free(&ses);
  nr_db_close(db);
  return st;
}

static nr_status rechoose_json(const char *path, rec_list *l, const char *metric,
                               double eps, double min_margin, nr_error *err) {
  char *text = read_text(path);
  cJSON *rep = text ? cJSON_Parse(text) : NULL;
  free(text);
  nr_status st = NR_OK;
  if (!rep)
    st = nr_errorf(err, NR_ERR_IO, "%s is neither a tuning database nor a readable JSON "
                   "report", path);
  const cJSON *set = rep ? cJSON_GetObjectItem(rep, "settings") : NULL;
  if (!st && !set)
    st = nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "%s: not an nnroute tuning report (no "
                   "settings)", path);
  if (!st)
    st = tol_from_settings(set, l, metric, eps, min_margin, err);
  if (!st)
    json_recs(rep, l);
  cJSON_Delete(rep);
  return st;
}

nr_status nr_tune_rechoose(const char *path, int64_t session, const char *metric,
                           double tolerance, double min_margin, nr_error *err) {
  rec_list l = {0};
  const char *dot = strrchr(path, '.');
  nr_status st = dot && !strcmp(dot, ".json")
                     ? rechoose_json(path, &l, metric, tolerance, min_margin, err)
                     : rechoose_db(path, session, &l, metric, tolerance, min_margin, err);
  if (!st)
    print_choice(&l);
  for (int i = 0; i < l.n; i++) {
    free(l.v[i].route);
    free(l.v[i].status);
    if (l.v[i].have_acc)
      tune_accuracy_free(&l.v[i].acc);
  }
  free(l.v);
  free(l.names);
  for (int k = 0; k < NR_TRIALS_KINDS; k++)
    free(l.trials[k]);
  return st;
}
