/* tune_cands.c - the candidates of a session: a route asked for becomes a candidate
 * (built and measured in an isolated child), a replayed row of the database, or an
 * alias of a candidate whose plan it builds; and the engine files kept for the
 * measurement stages.
 *
 * Key decision: a candidate is named by its canonical route, the route without the
 * values its build ignored (route.h, knob use), so two routes that differ only in
 * ignored values are one candidate, built and timed once. Three checks see to it:
 *   - before building, the route is compared with every candidate whose build told how
 *     it used each knob (tune_same_build): where they differ, that build never read
 *     the instance, or read it without effect and the route has the default there;
 *   - right after the build, in the child, its canonical route is looked up among the
 *     candidates (the worker's same_as): a match stops the child before any timing;
 *   - a route that turned out to be a candidate's is recorded as an alias of it, so a
 *     resumed session answers it again without building.
 * Engine files are named by the digest of the canonical route: a resumed session's
 * counter would give another route's engine the same name. */
#include "api/nnroute_tools.h"
#include "tune/tune_internal.h"
#include "util/error.h"
#include "util/sha256.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- lookups ---------------------------------------------------------------------- */

int tune_find_cand(const tune_session *s, const char *route) {
  for (int i = 0; i < s->n_cands; i++)
    if (!strcmp(s->cands[i].route, route))
      return i;
  for (int i = 0; i < s->n_aliases; i++)
    if (!strcmp(s->aliases[i].route, route))
      return s->aliases[i].cand;
  return -1;
}

double tune_worst_loss(const double *losses, int n_pairs, int n_outputs, nr_metric m) {
  double w = 0;
  for (int o = 0; o < n_outputs; o++) {
    double l = nr_losses_over_pairs(losses, n_pairs, n_outputs, o, m);
    if (!(l <= w))
      w = isnan(l) ? INFINITY : l;
  }
  return w;
}

static int *alloc_choice(const tune_session *s) {
  return malloc(sizeof(int) * (size_t)(s->space.knobs.n ? s->space.knobs.n : 1));
}

/* The choice vector of route text (malloc'ed), or NULL. */
static int *parse_choice(const tune_session *s, const char *route) {
  int *choice = alloc_choice(s);
  if (choice && nr_knob_list_parse_route(&s->space.knobs, route, choice, NULL)) {
    free(choice);
    return NULL;
  }
  return choice;
}

/* The canonical route of r built with use (malloc'ed), or of what differs between r
 * and it (ignored: the values of r the build ignored), or NULL. */
static char *effective_text(const tune_session *s, const int *r, const uint8_t *use,
                            bool ignored) {
  const nr_knob_list *l = &s->space.knobs;
  int *c = alloc_choice(s);
  if (!c)
    return NULL;
  tune_effective_choice(l, r, use, c);
  for (int i = 0; ignored && i < l->n; i++)
    c[i] = c[i] != r[i] ? r[i] : l->knobs[i].dflt;
  char *text = nr_knob_list_route_text(l, c);
  free(c);
  return text;
}

/* A candidate whose build q would repeat (tune_same_build), or -1. */
static int predict(const tune_session *s, const int *q) {
  for (int i = 0; q && i < s->n_cands; i++)
    if (s->cands[i].use && s->cands[i].asked &&
        tune_same_build(&s->space.knobs, q, s->cands[i].asked, s->cands[i].use))
      return i;
  return -1;
}

/* ---- in memory -------------------------------------------------------------------- */

static tune_cand *push_cand(tune_session *s, const char *route, const int *point,
                            const char *phase) {
  if (s->n_cands == s->cap_cands) {
    int cap = s->cap_cands ? 2 * s->cap_cands : 64;
    tune_cand *c = realloc(s->cands, sizeof *c * (size_t)cap);
    if (!c)
      return NULL;
    s->cands = c;
    s->cap_cands = cap;
  }
  tune_cand *c = &s->cands[s->n_cands];
  memset(c, 0, sizeof *c);
  c->route = strdup(route);
  c->phase = strdup(phase);
  if (point) {
    c->point = malloc(sizeof *c->point * (size_t)(s->space.n_dims ? s->space.n_dims : 1));
    if (c->point)
      memcpy(c->point, point, sizeof *c->point * (size_t)s->space.n_dims);
  }
  int *choice = parse_choice(s, route);
  if (!c->route || !c->phase || (point && !c->point) || !choice) {
    free(c->route);
    free(c->phase);
    free(c->point);
    free(choice);
    return NULL;
  }
  c->changes = nr_knob_list_changes(&s->space.knobs, choice);
  free(choice);
  s->n_cands++;
  return c;
}

/* Keeps how the candidate's build used the route asked for (owned copies). */
static void keep_use(tune_session *s, tune_cand *c, const int *asked, const uint8_t *use,
                     const char *ignored) {
  size_t n = (size_t)s->space.knobs.n;
  c->use = malloc(n ? n : 1);
  c->asked = alloc_choice(s);
  c->ignored = strdup(ignored ? ignored : "");
  if (!c->use || !c->asked || !c->ignored) { /* only a prediction is lost */
    free(c->use), free(c->asked), free(c->ignored);
    c->use = NULL, c->asked = NULL, c->ignored = NULL;
    return;
  }
  memcpy(c->use, use, n);
  memcpy(c->asked, asked, sizeof *asked * n);
}

/* The knob use a database row holds, one digit per knob row; NULL when it has none
 * or one for another knob list. */
static uint8_t *use_of_row(const tune_session *s, const nr_db_candidate *row) {
  size_t n = (size_t)s->space.knobs.n;
  if (!row->knob_use || strlen(row->knob_use) != n || !n)
    return NULL;
  uint8_t *use = malloc(n);
  for (size_t i = 0; use && i < n; i++)
    use[i] = (uint8_t)(row->knob_use[i] - '0') & 7u;
  return use;
}

/* Fills the in-memory summary from a database row. */
static void summarize(tune_session *s, tune_cand *c, const nr_db_candidate *row) {
  nr_cand_status_parse(row->status, &c->status);
  c->median = row->median_ms;
  c->lo = row->ci_lo_ms;
  c->hi = row->ci_hi_ms;
  c->build_ms = row->build_ms;
  c->engine_bytes = row->engine_bytes;
  c->db_id = row->id;
  c->worst_loss = INFINITY;
  c->margin = c->margin_frac = -INFINITY;
  if (row->losses && row->n_pairs > 0) {
    c->worst_loss = tune_worst_loss(row->losses, row->n_pairs, row->n_outputs,
                                    s->o->tol.metric);
    nr_tolerance_margins(&s->o->tol, row->losses, row->n_pairs, row->n_outputs,
                         s->output_names, &c->margin, &c->margin_frac);
  } else if (c->status == NR_CAND_OK) {
    c->worst_loss = 0; /* no reference data: nothing to lose */
    c->margin = 0;
    c->margin_frac = 1;
  }
  c->feasible = c->status == NR_CAND_OK;
  struct stat sb;
  if (row->engine_path && !stat(row->engine_path, &sb))
    c->engine_path = strdup(row->engine_path);
}

/* A replayed row; asked is the route its build was asked for, when known (the
 * row's own route otherwise: its SET bits still say where values were ignored). */
static int push_row(tune_session *s, const nr_db_candidate *row, const int *point,
                    const char *phase, const int *asked, nr_error *err) {
  tune_cand *c = push_cand(s, row->route, point, row->phase ? row->phase : phase);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory"), -1;
  summarize(s, c, row);
  uint8_t *use = use_of_row(s, row);
  int *own = use && !asked ? parse_choice(s, row->route) : NULL;
  if (use && (asked || own))
    keep_use(s, c, asked ? asked : own, use, row->ignored);
  free(use);
  free(own);
  return s->n_cands - 1;
}

static nr_status push_alias(tune_session *s, const char *route, int cand, bool record,
                            nr_error *err) {
  if (s->n_aliases == s->cap_aliases) {
    int cap = s->cap_aliases ? 2 * s->cap_aliases : 32;
    tune_alias *a = realloc(s->aliases, sizeof *a * (size_t)cap);
    if (!a)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    s->aliases = a;
    s->cap_aliases = cap;
  }
  char *r = strdup(route);
  if (!r)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  s->aliases[s->n_aliases++] = (tune_alias){r, cand};
  return record ? nr_db_alias_put(s->db, s->session_id, s->n_cands, route,
                                  s->cands[cand].route, err)
                : NR_OK;
}

/* ---- engine files ------------------------------------------------------------------ */

void tune_drop_engine(tune_session *s, tune_cand *c) {
  if (!c->engine_path)
    return;
  unlink(c->engine_path);
  nr_db_candidate_set_engine(s->db, c->db_id, NULL, NULL);
  free(c->engine_path);
  c->engine_path = NULL;
}

static int median_cmp(const void *a, const void *b) {
  const tune_cand *x = *(tune_cand *const *)a, *y = *(tune_cand *const *)b;
  return (x->median > y->median) - (x->median < y->median);
}

/* The greedy search's current answer: its latest feasible point of phase greedy or
 * extend (each supersedes the one before), or -1. */
static int greedy_answer(const tune_session *s) {
  for (int i = s->n_cands - 1; i >= 0; i--) {
    const char *ph = s->cands[i].phase ? s->cands[i].phase : "";
    if (s->cands[i].feasible && (!strcmp(ph, "greedy") || !strcmp(ph, "extend")))
      return i;
  }
  return -1;
}

/* Keeps the engine files of the s->keep fastest feasible candidates, the default
 * route's and the greedy search's answer; deletes the others' files. The answer is
 * kept whatever its screening time: on a loaded machine single-change points can
 * screen faster than a combination that is really faster, and the re-measurement
 * must see the combination to judge. */
static void prune_engines(tune_session *s) {
  tune_cand **v = malloc(sizeof *v * (size_t)(s->n_cands ? s->n_cands : 1));
  if (!v)
    return;
  int n = 0, answer = greedy_answer(s);
  for (int i = 0; i < s->n_cands; i++)
    if (s->cands[i].engine_path && i != s->default_idx && i != answer)
      v[n++] = &s->cands[i];
  qsort(v, (size_t)n, sizeof *v, median_cmp);
  for (int i = s->keep - (answer >= 0); i < n; i++)
    tune_drop_engine(s, v[i]);
  free(v);
}

static void engine_path(const tune_session *s, const char *route, char *path, size_t cap) {
  uint8_t md[32];
  nr_sha256(route, strlen(route), md);
  snprintf(path, cap, "%s/c%02x%02x%02x%02x%02x%02x%02x%02x.nre", s->engine_dir, md[0],
           md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
}

/* ---- evaluating ------------------------------------------------------------------- */

nr_worker_job tune_job(const tune_session *s, const char *route) {
  return (nr_worker_job){.model = s->model,
                         .route = route,
                         .threads = s->o->threads,
                         .pairs = &s->pairs,
                         .tol = &s->o->tol,
                         .output_names = s->output_names,
                         .timeout_s = s->timeout_s,
                         .mem_limit = s->mem_limit,
                         .measure = true,
                         .min_time_ms = s->o->screen_ms,
                         .calibration = s->calib,
                         .device = s->o->device};
}

typedef struct same_ctx {
  const tune_session *s;
  const int *asked;
} same_ctx;

/* The worker's same_as, run in the child: is the build's canonical route a candidate? */
static bool same_as_known(void *user, const uint8_t *use) {
  const same_ctx *x = user;
  char *canon = effective_text(x->s, x->asked, use, false);
  bool known = canon && tune_find_cand(x->s, canon) >= 0;
  free(canon);
  return known;
}

static nr_status record(tune_session *s, const char *route, const int *point,
                        const char *phase, const nr_worker_result *r, const char *path,
                        const char *ignored, nr_db_candidate *row, nr_error *err) {
  nr_stats st = {0};
  if (r->n_times)
    nr_stats_compute(r->times_ms, (size_t)r->n_times, 1, &st);
  char *pt = point ? tune_point_text(point, s->space.n_dims) : NULL;
  char *use = r->knob_use ? malloc((size_t)r->n_knob_use + 1) : NULL;
  for (int i = 0; use && i < r->n_knob_use; i++)
    use[i] = (char)('0' + (r->knob_use[i] & 7u));
  if (use)
    use[r->n_knob_use] = '\0';
  *row = (nr_db_candidate){.session_id = s->session_id,
                           .seq = s->n_cands,
                           .route = (char *)route,
                           .point = pt,
                           .phase = (char *)phase,
                           .status = (char *)nr_cand_status_name(r->status),
                           .signal = r->signal,
                           .message = (char *)r->message,
                           .build_ms = r->build_ms,
                           .engine_bytes = r->engine_bytes,
                           .engine_path = (char *)path,
                           .n_pairs = r->n_pairs,
                           .n_outputs = r->n_outputs,
                           .losses = r->losses,
                           .times_ms = r->times_ms,
                           .n_times = r->n_times,
                           .median_ms = st.median,
                           .ci_lo_ms = st.ci95_lo,
                           .ci_hi_ms = st.ci95_hi,
                           .ignored = (char *)ignored,
                           .knob_use = use};
  nr_status rc = nr_db_candidate_put(s->db, row, err);
  free(pt);
  free(use);
  row->point = NULL;
  row->knob_use = NULL;
  return rc;
}

/* A build that was a known candidate's after all: the route is its alias. The engine
 * file and measurements of this build, if any, are dropped. */
static int became_alias(tune_session *s, const char *route, const char *canon,
                        const int *point, const char *phase, const char *path,
                        tune_how *how, nr_error *err) {
  unlink(path);
  int i = tune_find_cand(s, canon);
  if (i < 0) { /* a resumed session: the candidate is a row not replayed yet */
    nr_db_candidate row;
    bool found = false;
    if (nr_db_candidate_get(s->db, s->session_id, canon, &row, &found, err))
      return -1;
    if (!found)
      return nr_errorf(err, NR_ERR_INTERNAL, "candidate '%s' vanished", canon), -1;
    i = push_row(s, &row, point, phase, NULL, err);
    nr_db_candidate_free(&row);
  }
  *how = TUNE_SAME;
  return i >= 0 && !push_alias(s, route, i, true, err) ? i : -1;
}

/* Builds and measures route in a child; the candidate is recorded under its canonical
 * route (the build's values that acted), the route as its alias when they differ. */
static int evaluate(tune_session *s, const char *route, const int *asked,
                    const int *point, const char *phase, tune_how *how, nr_error *err) {
  char path[4200];
  engine_path(s, route, path, sizeof path);
  same_ctx same = {s, asked};
  nr_worker_job job = tune_job(s, route);
  job.engine_out = path;
  job.knobs = asked ? &s->space.knobs : NULL;
  job.same_as = same_as_known;
  job.same_user = &same;
  nr_worker_result r = {0};
  if (nr_worker_run(&job, &r, err))
    return -1;
  if (nr_tune_stop) { /* the child was killed by Ctrl-C: not a result */
    unlink(path);
    nr_worker_result_free(&r);
    return -1;
  }
  bool known_use = r.knob_use && r.n_knob_use == s->space.knobs.n;
  char *canon = known_use ? effective_text(s, asked, r.knob_use, false) : strdup(route);
  char *ignored = known_use ? effective_text(s, asked, r.knob_use, true) : NULL;
  int i = -1;
  bool done = false; /* an alias, or a failure (err set) */
  if (!canon || (known_use && !ignored)) {
    nr_errorf(err, NR_ERR_NOMEM, "out of memory naming a candidate");
    done = true;
  } else if (r.same || strcmp(canon, route)) {
    /* a canonical route recorded already (this run, or a resumed session's row) */
    bool found = r.same || tune_find_cand(s, canon) >= 0;
    if (!found) {
      nr_db_candidate row;
      if (nr_db_candidate_get(s->db, s->session_id, canon, &row, &found, err))
        done = true;
      else if (found)
        nr_db_candidate_free(&row);
    }
    if (found) {
      i = became_alias(s, route, canon, point, phase, path, how, err);
      done = true;
    }
  }
  if (!done) {
    char final_path[4200];
    engine_path(s, canon, final_path, sizeof final_path);
    bool keep = r.status == NR_CAND_OK || r.status == NR_CAND_ACCURACY_FAIL;
    if (!keep || (strcmp(final_path, path) && rename(path, final_path)))
      unlink(path), keep = false;
    nr_db_candidate row;
    nr_status st = record(s, canon, point, phase, &r, keep ? final_path : NULL, ignored,
                          &row, err);
    tune_cand *c = st ? NULL : push_cand(s, canon, point, phase);
    if (c) {
      summarize(s, c, &row);
      if (known_use)
        keep_use(s, c, asked, r.knob_use, ignored);
      i = s->n_cands - 1;
      *how = TUNE_BUILT;
    } else if (!st) {
      nr_errorf(err, NR_ERR_NOMEM, "out of memory recording a candidate");
    }
    if (i >= 0 && strcmp(canon, route) && push_alias(s, route, i, true, err))
      i = -1;
    if (i >= 0 && !s->cands[i].feasible && i != s->default_idx)
      tune_drop_engine(s, &s->cands[i]); /* infeasible engines are never measured again */
    if (i >= 0)
      prune_engines(s);
  }
  free(canon);
  free(ignored);
  nr_worker_result_free(&r);
  return i;
}

/* The database's answer for route: its candidate row, or the candidate an alias
 * names; -2 when it has none. */
static int replay(tune_session *s, const char *route, const int *asked, const int *point,
                  const char *phase, nr_error *err) {
  nr_db_candidate row;
  bool found = false;
  if (nr_db_candidate_get(s->db, s->session_id, route, &row, &found, err))
    return -1;
  if (found) {
    int i = push_row(s, &row, point, phase, asked, err);
    nr_db_candidate_free(&row);
    return i;
  }
  char *same_as = NULL;
  if (nr_db_alias_get(s->db, s->session_id, route, &same_as, err))
    return -1;
  if (!same_as)
    return -2;
  int i = tune_find_cand(s, same_as);
  if (i < 0 && !nr_db_candidate_get(s->db, s->session_id, same_as, &row, &found, err)) {
    i = found ? push_row(s, &row, NULL, phase, NULL, err) : -2;
    if (found)
      nr_db_candidate_free(&row);
  }
  free(same_as);
  return i >= 0 && push_alias(s, route, i, false, err) ? -1 : i;
}

int tune_candidate(tune_session *s, const char *route, const int *point,
                   const char *phase, tune_how *how, nr_error *err) {
  *how = TUNE_REPLAYED;
  int i = tune_find_cand(s, route);
  if (i >= 0)
    return i;
  int *asked = parse_choice(s, route);
  i = replay(s, route, asked, point, phase, err);
  int same = i == -2 ? predict(s, asked) : -1;
  if (same >= 0) {
    *how = TUNE_SAME;
    i = push_alias(s, route, same, true, err) ? -1 : same;
  } else if (i == -2) {
    i = evaluate(s, route, asked, point, phase, how, err);
  }
  free(asked);
  return i;
}

void tune_cands_free(tune_session *s) {
  for (int i = 0; i < s->n_cands; i++) {
    tune_cand *c = &s->cands[i];
    free(c->route), free(c->point), free(c->engine_path), free(c->phase);
    free(c->use), free(c->asked), free(c->ignored);
  }
  for (int i = 0; i < s->n_aliases; i++)
    free(s->aliases[i].route);
  free(s->cands);
  free(s->aliases);
}
