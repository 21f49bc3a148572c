/* tune_measure.c - where measurement effort goes after the search: a noise check
 * before it, then successive halving over the best screened candidates, an
 * interleaved confirmation of the finalists against the default route, the holdout
 * check, the choice of the winner and the per-knob attribution of its gain.
 *
 * Every timing here is taken in a fresh process that loads kept engine files, so a
 * candidate is never favoured by a warm cache or allocator state left by the search.
 * The confirmation compares each finalist with the default route round by round; in a
 * round the default route is timed between every two finalists (D F1 D F2 D F3 D, the
 * finalists reversed on odd rounds), and each finalist is compared with the default
 * runs right before and after it, so load from elsewhere hits both sides of each
 * ratio. Every timing runs on the reference inputs, rotating over them (timed run k
 * of round r uses pair r + k), the same inputs for every slot of a round, never on
 * zeros. The decision (decide.h) is the exact Wilcoxon signed-rank test on the
 * per-round log-ratios over 9 rounds, Holm-corrected over the finalists, at a
 * family-wise two-sided 5%; when every finalist was at least 10% faster or slower
 * than the default in every round, the rounds stop as soon as that alone is
 * significant (6 rounds for one finalist, 7 for two or three, 9 for eight).
 *
 * A round is one process (the worker's sequence mode: the round's files loaded once,
 * then timed in the round's order, each with its own warm-up), not one per timing:
 * on a GPU a process start (driver, cuBLAS, loading an 85 M-parameter engine) took
 * about 1.4 s against 0.1 s of timing, so 9 rounds of D F1 D F2 D F3 D spent 77 of a
 * BERT-base session's 116 s starting processes. Rounds, order and the test are
 * unchanged; a round whose process fails is measured again one process per timing,
 * which also says which engine failed. A halving round is one process as well. */
#include "tune/decide.h"
#include "tune/tune_internal.h"
#include "util/error.h"
#include "util/threadpool.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Times a kept engine in a fresh process; records it; *median 0 when it failed. */
static nr_status measure(tune_session *s, tune_cand *c, double min_ms, const char *stage,
                         int round, double *median, nr_error *err) {
  nr_worker_job job = tune_job(s, c->route);
  job.engine_in = c->engine_path;
  job.pairs = NULL;
  job.timing = &s->pairs;
  job.timing_first = round;
  job.min_time_ms = min_ms;
  nr_worker_result r = {0};
  *median = 0;
  nr_status st = nr_worker_run(&job, &r, err);
  if (st || nr_tune_stop) {
    nr_worker_result_free(&r);
    return st;
  }
  nr_stats sts = {0};
  if (r.status == NR_CAND_OK && r.n_times) {
    nr_stats_compute(r.times_ms, (size_t)r.n_times, (uint64_t)round + 1, &sts);
    *median = sts.median;
    nr_db_measurement m = {c->db_id, (char *)stage, round, r.times_ms, r.n_times,
                           sts.median, sts.ci95_lo, sts.ci95_hi};
    st = nr_db_measurement_put(s->db, &m, err);
  } else {
    fprintf(stderr, "nnroute tune: re-measuring '%s' failed (%s: %s); it is dropped\n",
            c->route, nr_cand_status_name(r.status), r.message);
  }
  nr_worker_result_free(&r);
  return st;
}

/* ---- noise ---------------------------------------------------------------------- */

typedef struct noise_rec {
  double m[3];
  int n;
} noise_rec;

static int add_noise(const nr_db_measurement *m, void *user) {
  noise_rec *r = user;
  if (!strcmp(m->stage, "noise") && r->n < 3)
    r->m[r->n++] = m->median_ms;
  return 0;
}

static double median3(double a, double b, double c) {
  return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

/* The default route timed in two more fresh processes (a resumed session reuses the
 * recorded ones, so the search is told the same numbers again). From then on the
 * default route's figure is the median of the three processes and its interval their
 * range: one slow or fast process no longer decides what counts as a gain. */
nr_status tune_noise_check(tune_session *s, cJSON *json, nr_error *err) {
  tune_cand *d = &s->cands[s->default_idx];
  noise_rec rec = {{d->median, 0, 0}, 1};
  nr_status st = nr_db_measurement_foreach(s->db, d->db_id, add_noise, &rec, err);
  for (int i = rec.n; i < 3 && !st && d->engine_path; i++)
    st = measure(s, d, s->o->screen_ms, "noise", i, &rec.m[i], err);
  if (st || nr_tune_stop)
    return st;
  double *m = rec.m, lo = m[0], hi = m[0];
  for (int i = 1; i < 3; i++)
    if (m[i] > 0) {
      lo = m[i] < lo ? m[i] : lo;
      hi = m[i] > hi ? m[i] : hi;
    }
  double screened = d->median;
  if (m[1] > 0 && m[2] > 0) {
    d->median = median3(m[0], m[1], m[2]);
    d->lo = lo < d->lo ? lo : d->lo;
    d->hi = hi > d->hi ? hi : d->hi;
  }
  double load[1] = {0};
  getloadavg(load, 1);
  int cpus = nr_online_cpus();
  s->noise_spread = screened > 0 ? (hi - lo) / screened : 0;
  s->loadavg = load[0];
  s->noisy = s->noise_spread > 0.05 || load[0] > (double)cpus * 0.75;
  cJSON *n = cJSON_AddObjectToObject(json, "noise");
  cJSON_AddItemToObject(n, "default_medians_ms", cJSON_CreateDoubleArray(m, 3));
  cJSON_AddNumberToObject(n, "spread", s->noise_spread);
  cJSON_AddNumberToObject(n, "loadavg_1min", load[0]);
  cJSON_AddNumberToObject(n, "cpus", (double)cpus);
  cJSON_AddBoolToObject(n, "noisy", s->noisy);
  fprintf(stderr, "nnroute tune: noise check: default route %.3f ms, spread %.1f%% over "
          "three processes, load average %.2f on %d CPUs%s\n", d->median,
          100 * s->noise_spread, load[0], cpus,
          s->noisy ? " -- NOISY machine: expect wider intervals" : "");
  return NR_OK;
}

/* ---- successive halving --------------------------------------------------------- */

typedef tune_entry entry;

static int entry_cmp(const void *a, const void *b) {
  const entry *x = a, *y = b;
  return (x->median > y->median) - (x->median < y->median);
}

/* The pool: feasible kept candidates whose screening is not clearly slower than the
 * default route's. */
static int gather(tune_session *s, entry *v) {
  const tune_cand *d = &s->cands[s->default_idx];
  int n = 0;
  for (int i = 0; i < s->n_cands; i++) {
    tune_cand *c = &s->cands[i];
    if (i == s->default_idx || !c->feasible || !c->engine_path || c->median <= 0)
      continue;
    if (c->lo > d->hi && c->median > d->median * 1.02)
      continue;
    v[n++] = (entry){.c = c, .median = c->median};
  }
  qsort(v, (size_t)n, sizeof *v, entry_cmp);
  return n;
}

/* Times who[0..n) in one process, in that order, each with its own warm-up (the
 * worker's sequence mode), and records every slot under stage/round; med[k] is slot
 * k's median. False, with nothing recorded, when the process did not time every slot
 * (`what` names the batch in the message; the caller then times one process per
 * engine, which also says which engine failed). */
static bool time_in_one_process(tune_session *s, tune_cand *const *who, int n, double ms,
                                const char *stage, int round, const char *what,
                                double *med, nr_status *st, nr_error *err) {
  const char *files[NR_WORKER_MAX_SEQUENCE];
  if (n > NR_WORKER_MAX_SEQUENCE)
    return false;
  for (int k = 0; k < n; k++)
    if (!(files[k] = who[k]->engine_path))
      return false;
  nr_worker_job job = tune_job(s, "");
  job.pairs = NULL;
  job.timing = &s->pairs;
  job.timing_first = round;
  job.min_time_ms = ms;
  job.sequence = files;
  job.n_sequence = n;
  nr_worker_result res = {0};
  *st = nr_worker_run(&job, &res, err);
  bool ok = !*st && !nr_tune_stop && res.status == NR_CAND_OK && res.n_seq == n;
  nr_stats sts[NR_WORKER_MAX_SEQUENCE] = {{0}};
  for (int k = 0, at = 0; ok && k < n; at += res.seq_runs[k++]) {
    ok = res.seq_runs[k] > 0;
    if (ok)
      nr_stats_compute(res.times_ms + at, (size_t)res.seq_runs[k], (uint64_t)round + 1,
                       &sts[k]);
    med[k] = sts[k].median;
  }
  for (int k = 0, at = 0; ok && !*st && k < n; at += res.seq_runs[k++]) {
    nr_db_measurement m = {who[k]->db_id, (char *)stage, round, res.times_ms + at,
                           res.seq_runs[k], sts[k].median, sts[k].ci95_lo, sts[k].ci95_hi};
    *st = nr_db_measurement_put(s->db, &m, err);
  }
  if (!ok && !*st && !nr_tune_stop)
    fprintf(stderr, "nnroute tune: %s in one process failed (%s: %s); timing it one "
            "process per engine\n", what, nr_cand_status_name(res.status), res.message);
  nr_worker_result_free(&res);
  return ok;
}

/* Each round times the pool in one process (a process start and the engines' loads
 * cost more than the timing: 1.2 s a candidate for BERT-base on the GPU), one process
 * per candidate if that process fails, and keeps the faster half. */
static nr_status halving(tune_session *s, entry *v, int *n, cJSON *json, nr_error *err) {
  int fin = s->o->finalists > 0 ? s->o->finalists : 3;
  cJSON *rounds = cJSON_AddArrayToObject(json, "halving");
  double ms = s->o->screen_ms;
  double *meds = calloc((size_t)(*n > 0 ? *n : 1), sizeof *meds);
  if (!meds)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int r = 1; *n > fin && !nr_tune_stop; r++) {
    ms *= 2;
    char stage[32];
    snprintf(stage, sizeof stage, "halving:%d", r);
    cJSON *round = cJSON_CreateObject();
    cJSON_AddItemToArray(rounds, round);
    cJSON_AddNumberToObject(round, "round", r);
    cJSON_AddNumberToObject(round, "min_time_ms", ms);
    cJSON *list = cJSON_AddArrayToObject(round, "candidates");
    int kept = 0;
    nr_status st = NR_OK;
    tune_cand *who[NR_WORKER_MAX_SEQUENCE];
    for (int i = 0; i < *n && i < NR_WORKER_MAX_SEQUENCE; i++)
      who[i] = v[i].c;
    char what[48];
    snprintf(what, sizeof what, "halving round %d", r);
    bool one = time_in_one_process(s, who, *n, ms, stage, r, what, meds, &st, err);
    if (st || nr_tune_stop) {
      free(meds);
      return st;
    }
    for (int i = 0; i < *n; i++) {
      double med = meds[i];
      if (!one && (st = measure(s, v[i].c, ms, stage, r, &med, err))) {
        free(meds);
        return st;
      }
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "route", v[i].c->route);
      cJSON_AddNumberToObject(e, "median_ms", med);
      cJSON_AddItemToArray(list, e);
      if (med > 0)
        v[kept++] = (entry){.c = v[i].c, .median = med};
    }
    qsort(v, (size_t)kept, sizeof *v, entry_cmp);
    int half = (kept + 1) / 2;
    *n = half > fin ? half : (kept < fin ? kept : fin);
  }
  free(meds);
  return NR_OK;
}

/* ---- confirmation --------------------------------------------------------------- */

/* One round: D F1 D F2 .. Fn D (the finalists in reverse order on odd rounds). Each
 * finalist's ratio is its time over the geometric mean of the default route's times
 * measured just before and just after it, so a burst of load from elsewhere that
 * lasts a few seconds cannot make one side look faster. */
/* The round in one process: D F D F .. D in confirm_round's order. False (nothing
 * recorded) when the process did not time every slot. */
static bool confirm_round_one(tune_session *s, entry *v, int n, int r, double ms,
                              double *ratio, nr_status *st, nr_error *err) {
  tune_cand *d = &s->cands[s->default_idx];
  tune_cand *who[NR_WORKER_MAX_SEQUENCE];
  int slots = 0, fin[NR_WORKER_MAX_SEQUENCE];
  double med[NR_WORKER_MAX_SEQUENCE];
  if (2 * n + 1 > NR_WORKER_MAX_SEQUENCE)
    return false;
  who[slots] = d, fin[slots++] = -1;
  for (int k = 0; k < n; k++) {
    int i = r % 2 == 0 ? k : n - 1 - k;
    who[slots] = v[i].c, fin[slots++] = i;
    who[slots] = d, fin[slots++] = -1;
  }
  char what[48];
  snprintf(what, sizeof what, "confirmation round %d", r + 1);
  bool ok = time_in_one_process(s, who, slots, ms, "confirm", r, what, med, st, err);
  for (int k = 1; ok && !*st && k < slots; k += 2)
    ratio[fin[k]] = med[k] > 0 && med[k - 1] > 0 && med[k + 1] > 0
                        ? med[k] / sqrt(med[k - 1] * med[k + 1])
                        : NAN;
  return ok;
}

static nr_status confirm_round(tune_session *s, entry *v, int n, int r, double ms,
                               double *ratio, nr_error *err) {
  tune_cand *d = &s->cands[s->default_idx];
  double before = 0, after = 0, t = 0;
  nr_status one = NR_OK;
  if (confirm_round_one(s, v, n, r, ms, ratio, &one, err) || one || nr_tune_stop)
    return one;
  nr_status st = measure(s, d, ms, "confirm", r, &before, err);
  for (int k = 0; !st && k < n && !nr_tune_stop; k++) {
    int i = r % 2 == 0 ? k : n - 1 - k;
    st = measure(s, v[i].c, ms, "confirm", r, &t, err);
    if (!st)
      st = measure(s, d, ms, "confirm", r, &after, err);
    ratio[i] = t > 0 && before > 0 && after > 0 ? t / sqrt(before * after) : NAN;
    before = after;
  }
  return st;
}

bool tune_confirm_settled(const double *ratios, int done, int n) {
  return nr_decide_settled(ratios, done, n);
}

/* Up to `rounds` rounds; *done says how many ran. The rounds stop early once every
 * finalist is settled (nr_decide_settled: enough rounds for the error rate, every
 * one at least NR_DECIDE_MARGIN to one side): a BERT-base
 * session whose fp16 finalists ran at 0.41-0.44 of the fp32 default spent 4 of its
 * 9 rounds (11 of 55 s) confirming what round 5 already showed. */
static nr_status confirm_rounds(tune_session *s, entry *v, int n, int rounds,
                                double *ratios, int *done, nr_error *err) {
  double ms = s->o->screen_ms * 2;
  *done = 0;
  for (int r = 0; r < rounds && !nr_tune_stop; r++) {
    nr_status st = confirm_round(s, v, n, r, ms, ratios + (size_t)r * n, err);
    if (st)
      return st;
    *done = r + 1;
    fprintf(stderr, "nnroute tune: confirmation round %d/%d:", r + 1, rounds);
    for (int i = 0; i < n; i++)
      fprintf(stderr, " %.3f", ratios[(size_t)r * n + i]);
    fprintf(stderr, " (latency ratios to the default route)\n");
    if (r + 1 < rounds && tune_confirm_settled(ratios, r + 1, n)) {
      fprintf(stderr, "nnroute tune: in each of %d rounds every finalist was at least "
              "%.0f%% faster or slower than the default route; confirmation stops early\n",
              r + 1, 100 * NR_DECIDE_MARGIN);
      break;
    }
  }
  return NR_OK;
}

/* The decision (decide.h) over the rounds that ran: each finalist's latency ratio,
 * interval and Holm-adjusted p. */
static nr_status decide(entry *v, const double *ratios, int rounds, int n, nr_error *err) {
  nr_decision *d = calloc((size_t)(n ? n : 1), sizeof *d);
  if (!d || nr_decide_finalists(ratios, rounds, n, d)) {
    free(d);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory deciding the finalists");
  }
  for (int i = 0; i < n; i++) {
    v[i].ratio = d[i].ratio, v[i].lo = d[i].lo, v[i].hi = d[i].hi;
    v[i].p = d[i].p, v[i].p_holm = d[i].p_holm, v[i].accepted = d[i].accepted;
  }
  free(d);
  return NR_OK;
}

/* A total order, so the preference never depends on the order halving left the
 * finalists in: accepted first, then the faster estimate, then fewer non-default
 * knobs (effective ones: a candidate's canonical route leaves out the values its
 * build ignored), then the canonical route text. */
int tune_entry_cmp(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->accepted != y->accepted)
    return x->accepted ? -1 : 1;
  double rx = isnan(x->ratio) ? INFINITY : x->ratio, ry = isnan(y->ratio) ? INFINITY : y->ratio;
  if (rx != ry)
    return rx < ry ? -1 : 1;
  if (x->c->changes != y->c->changes)
    return x->c->changes - y->c->changes;
  return strcmp(x->c->route, y->c->route);
}

/* ---- holdout -------------------------------------------------------------------- */

/* The candidate on the holdout pairs, under the session's tolerance and --min-margin
 * (the worker's check): *ok when every output is within (1 - min_margin) x its
 * bound, as on the reference pairs. margin[0] is the smallest (bound - loss),
 * margin[1] the smallest fraction of the bound left. */
static nr_status holdout_check(tune_session *s, tune_cand *c, bool *ok, double margin[2],
                               nr_error *err) {
  nr_worker_job job = tune_job(s, c->route);
  job.engine_in = c->engine_path;
  job.pairs = &s->holdout;
  job.measure = false;
  fprintf(stderr, "nnroute tune: checking '%s' on %d holdout pairs\n", c->route,
          s->holdout.n);
  nr_worker_result r = {0};
  nr_status st = nr_worker_run(&job, &r, err);
  *ok = !st && r.status == NR_CAND_OK;
  margin[0] = margin[1] = -INFINITY;
  if (!st && r.losses) {
    nr_tolerance_margins(&s->o->tol, r.losses, r.n_pairs, r.n_outputs, s->output_names,
                         &margin[0], &margin[1]);
    st = nr_db_candidate_set_holdout(s->db, c->db_id, r.losses, r.n_pairs, r.n_outputs,
                                     err);
  }
  nr_worker_result_free(&r);
  return st;
}

static void add_margin(cJSON *j, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(j, key, v);
  else
    cJSON_AddNullToObject(j, key);
}

static cJSON *entry_json(const entry *e, const tune_cand *d, bool holdout_ok,
                         const double holdout_margin[2]) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "route", e->c->route);
  cJSON_AddNumberToObject(j, "non_default_knobs", e->c->changes);
  cJSON_AddNumberToObject(j, "screening_speedup", d->median / e->c->median);
  cJSON_AddNumberToObject(j, "confirmed_speedup", 1 / e->ratio);
  double ci[2] = {1 / e->hi, 1 / e->lo};
  cJSON_AddItemToObject(j, "confirmed_speedup_ci95", cJSON_CreateDoubleArray(ci, 2));
  cJSON_AddNumberToObject(j, "latency_ratio_to_default", e->ratio);
  cJSON_AddNumberToObject(j, "p_value", e->p);
  cJSON_AddNumberToObject(j, "p_holm", e->p_holm);
  cJSON_AddBoolToObject(j, "significant", e->accepted);
  cJSON_AddNumberToObject(j, "reference_margin", e->c->margin);
  add_margin(j, "reference_margin_fraction", e->c->margin_frac);
  cJSON_AddNumberToObject(j, "holdout_margin", holdout_margin[0]);
  add_margin(j, "holdout_margin_fraction", holdout_margin[1]);
  cJSON_AddBoolToObject(j, "holdout_ok", holdout_ok);
  return j;
}

/* "margin -0.0012" or, with --min-margin, "margin 0.0002, 18.0% of the tolerance;
 * --min-margin asks 25%". */
static void margin_words(const tune_session *s, const double margin[2], char *out,
                         size_t cap) {
  double f = s->o->tol.min_margin;
  if (f > 0)
    snprintf(out, cap, "margin %.3g, %.1f%% of the tolerance; --min-margin asks %.3g%%",
             margin[0], 100 * margin[1], 100 * f);
  else
    snprintf(out, cap, "margin %.3g", margin[0]);
}

/* The default route on the holdout pairs (s->default_holdout), so the route shipped
 * when no finalist wins is checked too. A Ctrl-C during the check leaves it 0. */
static nr_status check_default(tune_session *s, cJSON *conf, nr_error *err) {
  tune_cand *d = &s->cands[s->default_idx];
  bool ok = false;
  double margin[2] = {-INFINITY, -INFINITY};
  s->default_holdout = 0;
  if (s->holdout.n <= 0)
    return NR_OK;
  nr_status st = holdout_check(s, d, &ok, margin, err);
  if (st || nr_tune_stop)
    return st;
  s->default_holdout = ok ? 1 : -1;
  cJSON_AddBoolToObject(conf, "default_holdout_ok", ok);
  cJSON_AddNumberToObject(conf, "default_holdout_margin", margin[0]);
  add_margin(conf, "default_holdout_margin_fraction", margin[1]);
  if (!ok) {
    char why[160];
    margin_words(s, margin, why, sizeof why);
    fprintf(stderr,
            "nnroute tune: the default route itself fails the holdout pairs "
            "(%s)\n",
            why);
  }
  return NR_OK;
}

/* Validates the accepted finalists on the holdout pairs in preference order; the first
 * that passes wins. A check that Ctrl-C cut short rejects nobody: the choice stops
 * there, with the winner found so far or the default route. */
static nr_status choose(tune_session *s, entry *v, int n, cJSON *conf, nr_error *err) {
  qsort(v, (size_t)n, sizeof *v, tune_entry_cmp);
  const tune_cand *d = &s->cands[s->default_idx];
  nr_status st = check_default(s, conf, err);
  cJSON *list = cJSON_AddArrayToObject(conf, "finalists");
  const char *winner = NULL;
  for (int i = 0; !st && !nr_tune_stop && i < n; i++) {
    bool ok = false;
    double margin[2] = {-INFINITY, -INFINITY};
    st = v[i].accepted ? holdout_check(s, v[i].c, &ok, margin, err) : NR_OK;
    if (st || nr_tune_stop)
      break;
    if (v[i].accepted && !ok) {
      char why[160];
      margin_words(s, margin, why, sizeof why);
      fprintf(stderr,
              "nnroute tune: '%s' is faster but fails the holdout pairs "
              "(%s); rejected\n",
              v[i].c->route, why);
    }
    cJSON_AddItemToArray(list, entry_json(&v[i], d, ok, margin));
    if (!winner && v[i].accepted && ok)
      winner = v[i].c->route;
  }
  if (st)
    return st;
  cJSON_AddBoolToObject(conf, "significant_gain", winner != NULL);
  s->winner_route = strdup(winner ? winner : "");
  return s->winner_route ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
}

/* ---- attribution ---------------------------------------------------------------- */

/* Whether dimension d set any value in candidate c's build that acted (its knob use:
 * an instance the dimension sets that is SET and EFFECTIVE); true when unknown. */
static bool dim_acts(const tune_session *s, const tune_cand *c, int d) {
  if (!c->use)
    return true;
  const tune_dim *dim = &s->space.dims[d];
  for (int j = 0; j < dim->n_insts; j++) {
    uint8_t u = c->use[dim->insts[j]];
    if ((u & NR_KNOB_USE_SET) && (u & NR_KNOB_USE_EFFECTIVE))
      return true;
  }
  return false;
}

/* From the winner back to the default one knob (dimension) at a time: how much
 * slower the winner gets without each of its changes. Only changes that acted count:
 * a dimension whose values the winner's build ignored is listed under "ignored" and
 * not reverted. Bounded: at most 8 knobs and 15% over the time budget. */
static nr_status attribution(tune_session *s, cJSON *json, nr_error *err) {
  int w = -1;
  for (int i = 0; i < s->n_cands; i++)
    if (!strcmp(s->cands[i].route, s->winner_route) && s->cands[i].point)
      w = i;
  cJSON *list = cJSON_AddArrayToObject(json, "attribution");
  cJSON *ignored = cJSON_AddArrayToObject(json, "attribution_ignored");
  if (w < 0 || !*s->winner_route)
    return NR_OK;
  int nd = s->space.n_dims, done = 0;
  int *p = malloc(sizeof *p * (size_t)nd);
  if (!p)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  double limit = s->o->budget_time_s > 0 ? s->o->budget_time_s * 1.15 : INFINITY;
  for (int d = 0; d < nd && done < 8 && !nr_tune_stop; d++) {
    const int *wp = s->cands[w].point;
    if (wp[d] == s->space.dims[d].dflt || s->prior_elapsed + tune_now() - s->t0 > limit)
      continue;
    if (!dim_acts(s, &s->cands[w], d)) {
      char tok[512];
      snprintf(tok, sizeof tok, "%s=%s", s->space.dims[d].name,
               s->space.dims[d].values[wp[d]]);
      cJSON_AddItemToArray(ignored, cJSON_CreateString(tok));
      continue;
    }
    memcpy(p, wp, sizeof *p * (size_t)nd);
    p[d] = s->space.dims[d].dflt;
    char *route = tune_space_route(&s->space, p);
    tune_how how;
    int i = route ? tune_candidate(s, route, p, "attribution", &how, err) : -1;
    free(route);
    if (i < 0) {
      free(p);
      return nr_tune_stop ? NR_OK : err->status;
    }
    const tune_cand *c = &s->cands[i], *wc = &s->cands[w];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "knob", s->space.dims[d].name);
    cJSON_AddStringToObject(e, "value", s->space.dims[d].values[wp[d]]);
    cJSON_AddStringToObject(e, "without_it", c->route);
    cJSON_AddStringToObject(e, "status_without_it", nr_cand_status_name(c->status));
    if (c->median > 0 && wc->median > 0)
      cJSON_AddNumberToObject(e, "slowdown_without_it", c->median / wc->median);
    cJSON_AddItemToArray(list, e);
    done++;
  }
  free(p);
  return NR_OK;
}

nr_status tune_measure_finalists(tune_session *s, cJSON *json, nr_error *err) {
  entry *v = calloc((size_t)(s->n_cands ? s->n_cands : 1), sizeof *v);
  if (!v)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  int n = gather(s, v);
  fprintf(stderr, "nnroute tune: %d feasible candidates kept for re-measurement\n", n);
  nr_status st = halving(s, v, &n, json, err);
  /* The rounds planned for this many finalists, or the user's --confirm-rounds when
   * that is more; a machine the noise check found noisy gets twice the rounds. */
  int rounds = nr_decide_planned_rounds(n);
  if (s->o->confirm_rounds > rounds)
    rounds = s->o->confirm_rounds;
  rounds *= s->noisy ? 2 : 1;
  int done = 0;
  double *ratios = st ? NULL : calloc((size_t)(rounds * (n ? n : 1)), sizeof *ratios);
  if (!st && !ratios)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  if (!st && n)
    st = confirm_rounds(s, v, n, rounds, ratios, &done, err);
  cJSON *conf = cJSON_AddObjectToObject(json, "confirmation");
  cJSON_AddNumberToObject(conf, "rounds", done);
  cJSON_AddNumberToObject(conf, "planned_rounds", rounds);
  if (!st && n)
    st = decide(v, ratios, done, n, err);
  if (!st && !nr_tune_stop)
    st = choose(s, v, n, conf, err); /* also when Ctrl-C comes during it */
  if (!st && !nr_tune_stop)
    st = attribution(s, json, err);
  free(ratios);
  free(v);
  return st;
}
