/* tune.c - the tuning session: setup (space, data, database), the search loop over
 * isolated candidates (tune_cands.c evaluates them), and the end (winner engine,
 * report, summary).
 *
 * Resume is replay: the search is deterministic given its seed and the results it is
 * told, so a resumed session asks the same questions again and the database answers
 * those it already recorded; only new routes are built. Each candidate is committed
 * as one row the moment it is classified, so kill -9 loses at most the candidate in
 * flight, and no route is ever recorded twice (the table refuses it).
 *
 * Only the few best feasible candidates keep their engine file (in a folder beside
 * the database); the measurement stages re-time those files in fresh processes. */
#include "api/nnroute_tools.h"
#include "tune/tune_internal.h"
#include "util/device.h"
#include "util/error.h"
#include "util/sha256.h"
#include "util/threadpool.h"
#include "util/version.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t nr_tune_stop;

double tune_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_sigint(int sig) {
  (void)sig;
  nr_tune_stop = 1;
  nr_worker_abort();
}

/* ---- settings: everything that decides results, hashed to match a resume ------- */

static void add_dirs(cJSON *o, const char *key, const char *const *dirs, int n) {
  cJSON *a = cJSON_AddArrayToObject(o, key);
  for (int i = 0; i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateString(dirs[i]));
}

static cJSON *settings_json(const tune_session *s) {
  const nr_tune_options *o = s->o;
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "routes", o->routes ? o->routes : "");
  cJSON_AddStringToObject(j, "search", nr_search_name(o->search));
  cJSON_AddNumberToObject(j, "budget_builds", o->budget_builds);
  cJSON_AddNumberToObject(j, "budget_time_s", o->budget_time_s);
  cJSON_AddNumberToObject(j, "seed", (double)o->seed);
  cJSON_AddStringToObject(j, "metric", nr_metric_name(o->tol.metric));
  cJSON_AddNumberToObject(j, "tolerance", o->tol.eps);
  cJSON_AddNumberToObject(j, "atol", o->tol.atol);
  cJSON_AddNumberToObject(j, "rtol", o->tol.rtol);
  cJSON_AddNumberToObject(j, "min_margin", o->tol.min_margin);
  cJSON *ov = cJSON_AddObjectToObject(j, "output_tolerance");
  for (int i = 0; i < o->tol.n_overrides; i++)
    cJSON_AddNumberToObject(ov, o->tol.override_name[i], o->tol.override_eps[i]);
  cJSON_AddNumberToObject(j, "threads", o->threads);
  add_dirs(j, "reference", o->reference_dirs, o->n_reference_dirs);
  add_dirs(j, "holdout", o->holdout_dirs, o->n_holdout_dirs);
  char h[17];
  snprintf(h, sizeof h, "%016llx", (unsigned long long)nr_pairs_hash(&s->pairs));
  cJSON_AddStringToObject(j, "reference_hash", h);
  snprintf(h, sizeof h, "%016llx", (unsigned long long)nr_pairs_hash(&s->holdout));
  cJSON_AddStringToObject(j, "holdout_hash", h);
  cJSON_AddStringToObject(j, "calibration", s->calib_sha);
  cJSON_AddNumberToObject(j, "screen_ms", o->screen_ms);
  cJSON_AddNumberToObject(j, "finalists", o->finalists);
  cJSON_AddNumberToObject(j, "confirm_rounds", o->confirm_rounds);
  cJSON_AddBoolToObject(j, "priors", o->priors);
  cJSON *outs = cJSON_AddArrayToObject(j, "outputs");
  for (int i = 0; i < s->n_outputs; i++)
    cJSON_AddItemToArray(outs, cJSON_CreateString(s->output_names[i]));
  cJSON *rows = cJSON_AddArrayToObject(j, "holdout_rows");
  cJSON *elems = cJSON_AddArrayToObject(j, "holdout_elements");
  for (int i = 0; i < s->n_outputs; i++) {
    cJSON_AddItemToArray(rows,
                         cJSON_CreateNumber((double)s->hold_trials[NR_TRIALS_ROWS][i]));
    cJSON_AddItemToArray(
        elems, cJSON_CreateNumber((double)s->hold_trials[NR_TRIALS_ELEMENTS][i]));
  }
  cJSON_AddNumberToObject(j, "dimensions", s->space.n_dims);
  return j;
}

/* ---- setup ---------------------------------------------------------------------- */

/* Appends "; reason" to the message err holds. */
static void with_reason(nr_error *err, const char *reason) {
  if (!err)
    return;
  char what[sizeof err->message];
  snprintf(what, sizeof what, "%s", err->message);
  nr_errorf(err, err->status, "%s; %s", what, reason);
}

static nr_status holdout_trials(tune_session *s, nr_error *err);

/* A model that leaves input dimensions free takes them from the data it is given,
 * before the space is built (which prepares the model): the first reference folder,
 * else a holdout folder, else a calibration folder. Once one has fixed them the
 * others have nothing left to fix; their pairs are checked against those shapes when
 * they are read. */
static nr_status shapes_from_data(const nr_tune_options *o, nr_error *err) {
  nr_status st = NR_OK;
  for (int i = 0; !st && i < o->n_reference_dirs; i++)
    st = nr_pairs_fix_shapes(o->model, o->reference_dirs[i], err);
  for (int i = 0; !st && i < o->n_holdout_dirs; i++)
    st = nr_pairs_fix_shapes(o->model, o->holdout_dirs[i], err);
  struct stat sb;
  if (!st && o->calibration && !stat(o->calibration, &sb) && S_ISDIR(sb.st_mode))
    st = nr_pairs_fix_shapes(o->model, o->calibration, err);
  return st;
}

static nr_status setup_pairs(tune_session *s, nr_error *err) {
  const nr_tune_options *o = s->o;
  nr_status st = NR_OK;
  for (int i = 0; !st && i < o->n_reference_dirs; i++)
    st = nr_pairs_load_dir(s->model, o->reference_dirs[i], &s->pairs, err);
  if (!st && !o->n_reference_dirs)
    st = nr_pairs_generate(s->model, o->n_generated > 0 ? o->n_generated : 4, o->seed,
                           o->ranges, o->n_ranges, &s->pairs, err);
  for (int i = 0; !st && i < o->n_holdout_dirs; i++)
    st = nr_pairs_load_dir(s->model, o->holdout_dirs[i], &s->holdout, err);
  if (!st && !o->n_holdout_dirs)
    st = nr_pairs_generate(s->model, o->n_holdout_generated > 0 ? o->n_holdout_generated : 2,
                           o->seed ^ 0x5eedf00dull, o->ranges, o->n_ranges, &s->holdout,
                           err);
  if (!st && (st = nr_pairs_check_disjoint(&s->holdout, "holdout pair", &s->pairs,
                                           "reference pair", err)))
    with_reason(err,
                "holdout data must never be used to choose: give --holdout data "
                "that is not in --reference (or other --seed / --input-range for "
                "generated pairs)");
  if (!st)
    st = holdout_trials(s, err);
  return st;
}

/* Rows and elements one holdout pair gives each output (nr_metric_trials), the count
 * a rate's confidence bound needs; 0 for an output whose pairs differ in shape. */
static nr_status holdout_trials(tune_session *s, nr_error *err) {
  static const nr_metric by[NR_TRIALS_KINDS] = {
      [NR_TRIALS_ROWS] = NR_METRIC_TOP1, [NR_TRIALS_ELEMENTS] = NR_METRIC_L0};
  int n = s->holdout.n_outputs;
  for (int k = 0; k < NR_TRIALS_KINDS; k++) {
    s->hold_trials[k] = calloc((size_t)(n ? n : 1), sizeof *s->hold_trials[k]);
    if (!s->hold_trials[k])
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    for (int o = 0; o < n && s->holdout.n > 0; o++) {
      int64_t t = nr_metric_trials(by[k], &s->holdout.pairs[0].outputs[o]);
      for (int p = 1; p < s->holdout.n; p++)
        if (nr_metric_trials(by[k], &s->holdout.pairs[p].outputs[o]) != t)
          t = 0;
      s->hold_trials[k][o] = t;
    }
  }
  return NR_OK;
}

/* Realpath of a folder, or the path itself when it has none. */
static void real_or_same(const char *path, char out[PATH_MAX]) {
  if (!realpath(path, out))
    snprintf(out, PATH_MAX, "%s", path);
}

/* The first of a and b lies in (or is) the second. */
static bool path_within(const char *a, const char *b) {
  size_t n = strlen(b);
  return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/' || (n > 0 && b[n - 1] == '/'));
}

/* --calibration DIR must not name holdout data: neither a --holdout folder (by its
 * real path: a symlink or a "./x/../x" is the same folder) nor one inside or above
 * it. Checked whether or not the space calibrates; the samples themselves are
 * compared with the holdout pairs when they are read (setup_calibration). */
static nr_status calibration_not_holdout(const nr_tune_options *o, nr_error *err) {
  struct stat sb;
  if (!o->calibration || stat(o->calibration, &sb) || !S_ISDIR(sb.st_mode))
    return NR_OK;
  char cal[PATH_MAX], hold[PATH_MAX];
  real_or_same(o->calibration, cal);
  for (int i = 0; i < o->n_holdout_dirs; i++) {
    real_or_same(o->holdout_dirs[i], hold);
    bool same = !strcmp(cal, hold), inside = path_within(cal, hold);
    if (same || inside || path_within(hold, cal))
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                       "--calibration '%s' %s the --holdout "
                       "folder '%s' (%s); calibration data must never be holdout data",
                       o->calibration,
                       same     ? "is"
                       : inside ? "lies inside"
                                : "holds",
                       o->holdout_dirs[i], hold);
  }
  return NR_OK;
}

/* The user's calibration data: a table file as it is, input sets (a folder,
 * random:N) only when none of them is a holdout pair's inputs. */
static nr_status calibration_from_spec(tune_session *s, nr_error *err) {
  nr_pair_set cal = {0};
  bool table = false;
  nr_status st = nr_calibration_inputs(s->model, s->o->calibration, &cal, &table, err);
  if (!st && !table &&
      (st = nr_pairs_check_disjoint(&cal, "calibration sample", &s->holdout,
                                    "holdout pair", err)))
    with_reason(err, "calibration data must never be holdout data");
  if (!st)
    st = table ? nr_calibration_load(s->o->calibration, &s->calib, err)
               : nr_calibration_from_pairs(s->model, &cal, &s->calib, err);
  nr_pair_set_free(&cal);
  return st;
}

/* Calibrates once, in the parent, when some node can be put in int8: every candidate
 * is then built from the same table, which the database keeps under its digest. */
static nr_status setup_calibration(tune_session *s, nr_error *err) {
  bool precision = false;
  for (int i = 0; i < s->space.knobs.n; i++)
    precision |= (s->space.knobs.knobs[i].flags & NR_KNOB_INFO_NODE_PRECISION) != 0;
  if (!precision)
    return NR_OK;
  nr_status st = s->o->calibration
                     ? calibration_from_spec(s, err)
                     : nr_calibration_from_pairs(s->model, &s->pairs, &s->calib, err);
  if (st)
    return nr_error_prefix(err, "calibration: ");
  return nr_calibration_digest(s->calib, s->calib_sha, err);
}

static nr_status store_calibration(tune_session *s, nr_error *err) {
  if (!s->calib)
    return NR_OK;
  uint8_t *bytes;
  size_t len;
  nr_status st = nr_calibration_serialize(s->calib, &bytes, &len, err);
  if (st)
    return st;
  st = nr_db_calibration_put(s->db, s->calib_sha, bytes, len, err);
  free(bytes);
  return st;
}

static nr_status setup_outputs(tune_session *s, nr_error *err) {
  s->n_outputs = nr_model_output_count(s->model);
  s->output_names = calloc((size_t)(s->n_outputs ? s->n_outputs : 1), sizeof(char *));
  if (!s->output_names)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  for (int i = 0; i < s->n_outputs; i++) {
    nr_io_info info;
    nr_model_output_info(s->model, i, &info);
    s->output_names[i] = info.name;
  }
  for (int i = 0; i < s->o->tol.n_overrides; i++) {
    bool found = false;
    for (int k = 0; k < s->n_outputs; k++)
      found |= !strcmp(s->o->tol.override_name[i], s->output_names[k]);
    if (!found)
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "--output-tolerance names '%s', "
                       "which is not an output of the model", s->o->tol.override_name[i]);
  }
  return NR_OK;
}

/* A device session's environment adds the device's fingerprint fields, read in a
 * child process: this process forks the workers and must never initialize CUDA. */
static void env_text(nr_device d, char *out, size_t cap) {
  nr_environment fp = {sizeof fp};
  nr_environment_current_isolated(d, &fp);
  int n = snprintf(out, cap, "cpu_vendor=%s;cpu_model=%s;isa=%s;cores=%d;openblas=%s;"
                   "onednn=%s;compiler=%s", fp.cpu_vendor, fp.cpu_model, fp.isa, fp.cores,
                   fp.openblas, fp.onednn, fp.compiler);
  if (d != NR_DEVICE_CPU && n > 0 && (size_t)n < cap)
    snprintf(out + n, cap - (size_t)n, ";device=%s;gpu=%s;gpu_cc=%s;gpu_driver=%s;"
             "cuda_runtime=%s;cublas=%s;cudnn=%s", nr_device_name(d), fp.gpu, fp.gpu_cc,
             fp.gpu_driver, fp.cuda_runtime, fp.cublas, fp.cudnn);
}

static void shapes_text(nr_model *m, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < nr_model_input_count(m) && used < cap; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    used += (size_t)snprintf(out + used, cap - used, "%s%s=", i ? ";" : "", info.name);
    for (int d = 0; d < info.rank && used < cap; d++)
      used += (size_t)snprintf(out + used, cap - used, "%s%lld", d ? "x" : "",
                               (long long)info.dims[d]);
  }
}

static nr_status open_session(tune_session *s, nr_error *err) {
  const nr_tune_options *o = s->o;
  char env[1024], schema[17], sha[65], shapes[2048];
  env_text(s->o->device, env, sizeof env);
  nr_hex(nr_model_sha256(s->model), 32, sha);
  shapes_text(s->model, shapes, sizeof shapes);
  nr_db_env e = {env, nr_version_full(), nr_knob_list_schema(schema)};
  nr_status st = nr_db_open(o->db_path, &s->db, err);
  if (!st)
    st = nr_db_env_id(s->db, &e, &s->env_id, err);
  if (!st)
    st = nr_db_model_id(s->db, sha, shapes, &s->model_id, err);
  if (st)
    return st;
  cJSON *j = settings_json(s);
  char *text = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!text)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  uint8_t digest[32];
  nr_sha256(text, strlen(text), digest);
  nr_hex(digest, 32, s->settings_hash);
  int64_t id = 0;
  if (o->resume)
    st = nr_db_session_find_resumable(s->db, s->env_id, s->model_id, s->settings_hash, &id,
                                      err);
  if (!st && id) {
    s->session_id = id;
    st = nr_db_session_reopen(s->db, id, err);
    fprintf(stderr, "nnroute tune: resuming session %lld\n", (long long)id);
  } else if (!st) {
    if (o->resume)
      fprintf(stderr, "nnroute tune: --continue found no unfinished session with these "
              "settings on this machine; starting a new one\n");
    st = nr_db_session_begin(s->db, s->env_id, s->model_id, text, s->settings_hash,
                             o->argv ? o->argv : "", &s->session_id, err);
  }
  s->settings = text;
  return st;
}

static nr_status make_engine_dir(tune_session *s, nr_error *err) {
  char base[3900];
  snprintf(base, sizeof base, "%s.engines", s->o->db_path);
  snprintf(s->engine_dir, sizeof s->engine_dir, "%s/session%lld", base,
           (long long)s->session_id);
  if ((mkdir(base, 0755) && errno != EEXIST) ||
      (mkdir(s->engine_dir, 0755) && errno != EEXIST))
    return nr_errorf(err, NR_ERR_IO, "cannot create the engine folder %s: %s",
                     s->engine_dir, strerror(errno));
  return NR_OK;
}

/* ---- the search loop ------------------------------------------------------------ */

static int count_feasible(const tune_session *s) {
  int n = 0;
  for (int i = 0; i < s->n_cands; i++)
    n += s->cands[i].feasible;
  return n;
}

static const tune_cand *best_screened(const tune_session *s) {
  const tune_cand *b = NULL;
  for (int i = 0; i < s->n_cands; i++)
    if (s->cands[i].feasible && s->cands[i].median > 0 && (!b || s->cands[i].median < b->median))
      b = &s->cands[i];
  return b;
}

static double search_elapsed(const tune_session *s) {
  return s->prior_elapsed + tune_now() - s->t0;
}

/* Route tokens as people read them: "conv.layout@x=nhwc gemm.kc@*=128". */
static void plain_tokens(const char *route, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = route ? route : ""; *p && n + 1 < cap; p++)
    if (!(*p == '-' && (p == route || p[-1] == ' ')))
      out[n++] = *p;
  out[n] = '\0';
}

/* A route that builds a known candidate's plan: said once, with what was ignored. */
static void progress_same(const tune_session *s, int64_t total, const char *route,
                          const int *point, const tune_cand *c) {
  if (s->o->progress)
    return;
  char *what = point ? tune_space_describe(&s->space, point) : NULL;
  char tot[32], ign[512] = "", tok[256];
  snprintf(tot, sizeof tot, total > 0 ? "%lld" : "?", (long long)total);
  for (const char *p = route; *p;) { /* its tokens the candidate's route lacks */
    size_t n = strcspn(p, " ");
    snprintf(tok, sizeof tok, " %.*s ", (int)n, p);
    char have[4096];
    snprintf(have, sizeof have, " %s ", c->route);
    if (!strstr(have, tok) && strlen(ign) + n + 2 < sizeof ign)
      snprintf(ign + strlen(ign), sizeof ign - strlen(ign), "%s%.*s", *ign ? " " : "",
               (int)n - 1, p + 1);
    p += n + (p[n] == ' ');
  }
  fprintf(stderr, "[%d/%s] %-13s %s  = %s  ignored: %s\n", s->builds, tot, "same",
          what && *what ? what : route, *c->route ? c->route : "(default route)", ign);
  free(what);
}

static void progress(const tune_session *s, int64_t total, const tune_cand *last,
                     bool replayed) {
  const tune_cand *b = best_screened(s), *d = &s->cands[s->default_idx];
  double el = search_elapsed(s), eta = -1;
  int done = s->builds;
  if (s->o->budget_time_s > 0)
    eta = s->o->budget_time_s - el;
  if (total > 0 && done > 0) {
    double e2 = el / done * (double)(total - done);
    eta = eta < 0 || e2 < eta ? e2 : eta;
  }
  char tot[32], best[64] = "-";
  snprintf(tot, sizeof tot, total > 0 ? "%lld" : "?", (long long)total);
  if (b && d->median > 0)
    snprintf(best, sizeof best, "%.3f ms (%.2fx)", b->median, d->median / b->median);
  if (s->o->progress) {
    fprintf(stderr, "\r\033[K[%d/%s] feasible %d  best %s  elapsed %.0fs  eta %s%.0fs",
            done, tot, count_feasible(s), best, el, eta < 0 ? "?" : "", eta < 0 ? 0 : eta);
    return;
  }
  char *what = last->point ? tune_space_describe(&s->space, last->point) : NULL;
  const char *shown = what ? what : last->route;
  char ign[512] = "";
  if (last->ignored && *last->ignored) {
    snprintf(ign, sizeof ign, "  ignored: ");
    plain_tokens(last->ignored, ign + strlen(ign), sizeof ign - strlen(ign));
  }
  fprintf(stderr, "[%d/%s] %-13s %s%8.3f ms  %s  (best %s, %.0fs)%s\n", done, tot,
          nr_cand_status_name(last->status), replayed ? "(recorded) " : "", last->median,
          *shown ? shown : "(default route)", best, el, ign);
  free(what);
}

static bool budget_left(const tune_session *s) {
  const nr_tune_options *o = s->o;
  if (o->budget_builds > 0 && s->builds >= o->budget_builds)
    return false;
  return !(o->budget_time_s > 0 && search_elapsed(s) >= o->budget_time_s);
}

static nr_search *make_search(const tune_session *s, double **prior_rows) {
  int n = s->space.n_dims;
  int *nv = malloc(sizeof(int) * (size_t)(n ? n : 1));
  int *df = malloc(sizeof(int) * (size_t)(n ? n : 1));
  bool *late = malloc(sizeof(bool) * (size_t)(n ? n : 1));
  nr_search *r = NULL;
  if (nv && df && late) {
    for (int d = 0; d < n; d++) {
      const tune_dim *dim = &s->space.dims[d];
      nv[d] = dim->n_values;
      df[d] = dim->dflt;
      late[d] = false;
      for (int j = 0; j < dim->n_insts; j++)
        late[d] |= (s->space.knobs.knobs[dim->insts[j]].flags & NR_KNOB_INFO_SLOW_BUILD) != 0;
    }
    nr_search_config cfg = {.kind = s->o->search,
                            .n_dims = n,
                            .n_values = nv,
                            .dflt = df,
                            .seed = s->o->seed,
                            .max_points = s->o->budget_builds > 0 ? s->o->budget_builds
                                                                  : NR_TUNE_SEARCH_BUILDS,
                            .prior = (const double *const *)prior_rows,
                            .late = late};
    r = nr_search_create(&cfg);
  }
  free(nv);
  free(df);
  free(late);
  return r;
}

static nr_status search_loop(tune_session *s, nr_search *search, nr_error *err) {
  int *point = malloc(sizeof(int) * (size_t)(s->space.n_dims ? s->space.n_dims : 1));
  if (!point)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  nr_status st = NR_OK;
  while (!nr_tune_stop && budget_left(s) && nr_search_next(search, point)) {
    char *route = tune_space_route(&s->space, point);
    if (!route) {
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
      break;
    }
    tune_how how;
    int before = s->n_cands;
    int i = tune_candidate(s, route, point, nr_search_phase(search), &how, err);
    if (i < 0) {
      free(route);
      st = nr_tune_stop ? NR_OK : err->status;
      break;
    }
    const tune_cand *c = &s->cands[i];
    if (s->n_cands == before) /* an earlier candidate's plan: no build of its own */
      nr_search_tell_same(search, point);
    nr_search_tell_loss(search, point, c->worst_loss);
    nr_search_tell(search, point, c->feasible, c->median, c->lo, c->hi);
    if (s->n_cands > before) {
      s->builds++;
      progress(s, nr_search_total(search), c, how == TUNE_REPLAYED);
    } else if (how == TUNE_SAME) {
      progress_same(s, nr_search_total(search), route, point, c);
    }
    free(route);
  }
  if (s->o->progress)
    fprintf(stderr, "\n");
  free(point);
  return st;
}

/* ---- priors --------------------------------------------------------------------- */

typedef struct prior_ctx {
  tune_session *s;
  double **rows;
} prior_ctx;

/* A recorded route from another environment scores each (dimension, value) it uses:
 * the best ratio to that session's default route seen with it. */
static int add_prior(const char *route, double ratio, void *user) {
  prior_ctx *p = user;
  tune_space *sp = &p->s->space;
  for (int d = 0; d < sp->n_dims; d++)
    for (int v = 0; v < sp->dims[d].n_values; v++) {
      char tok[256];
      snprintf(tok, sizeof tok, "=%s", sp->dims[d].values[v]);
      const tune_dim *dim = &sp->dims[d];
      for (int j = 0; j < dim->n_insts; j++) {
        const char *id = sp->knobs.knobs[dim->insts[j]].id;
        const char *at = strstr(route, id);
        if (at && !strncmp(at + strlen(id), tok, strlen(tok)) && ratio < p->rows[d][v])
          p->rows[d][v] = ratio;
      }
    }
  return 0;
}

static double **load_priors(tune_session *s) {
  if (!s->o->priors)
    return NULL;
  int n = s->space.n_dims;
  double **rows = calloc((size_t)(n ? n : 1), sizeof *rows);
  for (int d = 0; rows && d < n; d++) {
    rows[d] = malloc(sizeof(double) * NR_KNOB_LIST_MAX_VALUES);
    for (int v = 0; rows[d] && v < NR_KNOB_LIST_MAX_VALUES; v++)
      rows[d][v] = 1.0;
  }
  char sha[65];
  nr_hex(nr_model_sha256(s->model), 32, sha);
  prior_ctx p = {s, rows};
  if (rows)
    nr_db_priors(s->db, sha, s->env_id, add_prior, &p, NULL);
  return rows;
}

static void free_priors(double **rows, int n) {
  for (int d = 0; rows && d < n; d++)
    free(rows[d]);
  free(rows);
}

/* ---- dry run -------------------------------------------------------------------- */

static nr_status dry_run(tune_session *s, nr_error *err) {
  const tune_space *sp = &s->space;
  uint64_t size = 1;
  for (int d = 0; d < sp->n_dims; d++)
    size = size > UINT64_MAX / (uint64_t)sp->dims[d].n_values
               ? UINT64_MAX : size * (uint64_t)sp->dims[d].n_values;
  printf("search space: %d dimensions, %s%llu routes\n", sp->n_dims,
         size == UINT64_MAX ? ">= " : "", (unsigned long long)size);
  for (int d = 0; d < sp->n_dims; d++) {
    printf("  %-40s", sp->dims[d].name);
    for (int v = 0; v < sp->dims[d].n_values; v++)
      printf("%s%s%s", v ? "|" : "", sp->dims[d].values[v], v == sp->dims[d].dflt ? "*" : "");
    printf("\n");
  }
  nr_search *search = make_search(s, NULL);
  if (!search)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  int64_t total = nr_search_total(search);
  printf("search %s proposes %s%lld routes%s\n", nr_search_name(s->o->search),
         total < 0 ? "up to " : "",
         (long long)(total < 0 ? (s->o->budget_builds > 0 ? s->o->budget_builds
                                                          : NR_TUNE_SEARCH_BUILDS)
                               : total),
         s->o->search == NR_SEARCH_MIXED ? " in its first phase" : "");
  int *point = malloc(sizeof(int) * (size_t)(sp->n_dims ? sp->n_dims : 1));
  for (int k = 0; point && k < 1000 && (total >= 0 && total <= 1000) &&
                  nr_search_next(search, point); k++) {
    char *r = tune_space_route(sp, point);
    printf("%s\n", r && *r ? r : "(default route)");
    free(r);
    nr_search_tell(search, point, true, 1.0, 1.0, 1.0);
  }
  free(point);
  nr_search_destroy(search);
  return NR_OK;
}

/* ---- the session ---------------------------------------------------------------- */

static uint64_t physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/* The search time a resumed session already spent: the gaps between consecutive
 * candidates' commit times, where a gap longer than any candidate may take is the
 * interruption itself and counts as nothing. */
typedef struct elapsed_ctx {
  double last, sum, max_gap;
} elapsed_ctx;

static int add_gap(const nr_db_candidate *c, void *user) {
  elapsed_ctx *e = user;
  double gap = c->created_at - e->last;
  if (gap > 0 && gap <= e->max_gap)
    e->sum += gap;
  if (c->created_at > e->last)
    e->last = c->created_at;
  return 0;
}

static void restore_elapsed(tune_session *s) {
  nr_db_session ses;
  bool found = false;
  if (nr_db_session_get(s->db, s->session_id, &ses, &found, NULL) || !found)
    return;
  elapsed_ctx e = {ses.started_at, 0, s->timeout_s + 60};
  if (!nr_db_candidate_foreach(s->db, s->session_id, add_gap, &e, NULL))
    s->prior_elapsed = e.sum;
  nr_db_session_free(&ses);
}

/* The default route first: the baseline every speedup is measured against, and the
 * cost that sets the other candidates' timeout. */
static nr_status run_default(tune_session *s, nr_error *err) {
  tune_how how;
  s->timeout_s = s->o->candidate_timeout_s > 0 ? s->o->candidate_timeout_s : 600;
  int i = tune_candidate(s, "", NULL, "default", &how, err);
  if (i < 0)
    return nr_tune_stop ? NR_OK : err->status;
  s->default_idx = i;
  s->builds++;
  tune_cand *d = &s->cands[i];
  if (d->status != NR_CAND_OK && d->status != NR_CAND_ACCURACY_FAIL)
    return nr_errorf(err, NR_ERR_RUNTIME, "the default route failed (%s); nothing to "
                     "compare against. `nnroute run MODEL --route ''` shows why",
                     nr_cand_status_name(d->status));
  if (d->status == NR_CAND_ACCURACY_FAIL && s->o->tol.min_margin > 0)
    fprintf(stderr,
            "nnroute tune: warning: the default route itself leaves less than "
            "--min-margin %g of the tolerance (worst %s loss %.3g, bound %.3g: %.1f%% of "
            "it left); only routes within (1 - %g) x the tolerance are kept\n",
            s->o->tol.min_margin, nr_metric_name(s->o->tol.metric), d->worst_loss,
            s->o->tol.eps, 100 * d->margin_frac, s->o->tol.min_margin);
  else if (d->status == NR_CAND_ACCURACY_FAIL)
    fprintf(stderr, "nnroute tune: warning: the default route itself is outside the "
            "tolerance (worst %s loss %.3g > %.3g); only routes within it are kept\n",
            nr_metric_name(s->o->tol.metric), d->worst_loss, s->o->tol.eps);
  if (s->o->candidate_timeout_s <= 0) {
    double cost_s = (d->build_ms + 50 * d->median) / 1000;
    s->timeout_s = 60 + 20 * cost_s;
  }
  if (how == TUNE_REPLAYED)
    restore_elapsed(s);
  return NR_OK;
}

static nr_status session_body(tune_session *s, cJSON *report, nr_error *err) {
  nr_status st = run_default(s, err);
  if (!st && !nr_tune_stop)
    st = tune_noise_check(s, report, err);
  double **priors = NULL;
  nr_search *search = NULL;
  if (!st && !nr_tune_stop) {
    priors = load_priors(s);
    search = make_search(s, priors);
    if (!search)
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory creating the search");
  }
  if (search)
    st = search_loop(s, search, err);
  nr_search_destroy(search);
  free_priors(priors, s->space.n_dims);
  if (!st && !nr_tune_stop)
    st = tune_measure_finalists(s, report, err);
  if (!st)
    st = tune_finish(s, report, err);
  return st;
}

static void session_free(tune_session *s) {
  tune_cands_free(s);
  free(s->winner_route);
  free(s->settings);
  free(s->output_names);
  for (int k = 0; k < NR_TRIALS_KINDS; k++)
    free(s->hold_trials[k]);
  nr_pair_set_free(&s->pairs);
  nr_pair_set_free(&s->holdout);
  nr_calibration_destroy(s->calib);
  tune_space_free(&s->space);
  nr_db_close(s->db);
}

nr_status nr_tune_run(const nr_tune_options *o, bool *interrupted, nr_error *err) {
  tune_session s = {.o = o, .model = o->model, .keep = 8};
  s.mem_limit = o->mem_limit ? o->mem_limit : physical_memory() / 4 * 3;
  s.t0 = tune_now();
  *interrupted = false;
  nr_tune_stop = 0;
  struct sigaction sa = {.sa_handler = on_sigint}, old_int, old_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  nr_status st = NR_OK;
  if (!(o->tol.min_margin >= 0 && o->tol.min_margin < 1))
    st = nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "--min-margin %g: the margin is a fraction of the tolerance, "
                   "0 <= F < 1", o->tol.min_margin);
  if (!st)
    st = calibration_not_holdout(o, err);
  if (!st)
    st = shapes_from_data(o, err);
  if (!st)
    st = tune_space_build(o->model, o->routes, o->device,
                          nr_threads_or_online(o->threads), &s.space, err);
  if (!st)
    st = setup_outputs(&s, err);
  if (!st && o->dry_run)
    st = dry_run(&s, err);
  if (!st && !o->dry_run) {
    fprintf(stderr, "nnroute tune: %d search dimensions; preparing reference data\n",
            s.space.n_dims);
    st = setup_pairs(&s, err);
    if (!st)
      st = setup_calibration(&s, err);
    if (!st)
      st = open_session(&s, err);
    if (!st)
      st = store_calibration(&s, err);
    if (!st)
      st = make_engine_dir(&s, err);
    cJSON *report = st ? NULL : cJSON_CreateObject();
    if (!st && !report)
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory");
    if (!st)
      st = session_body(&s, report, err);
    if (st && s.db && s.session_id)
      nr_db_session_end(s.db, s.session_id, nr_tune_stop ? "interrupted" : "failed", NULL,
                        NULL, NULL);
    cJSON_Delete(report);
  }
  if (!st && s.engine_refused && nr_tune_stop)
    fprintf(stderr, "nnroute tune: the default route fails the holdout pairs; no engine "
            "written (--write-unchecked writes it anyway)\n");
  else if (!st && s.engine_refused)
    st = nr_errorf(err, NR_ERR_RUNTIME, "the default route fails the holdout pairs and no "
                   "faster route passed them; no engine written (--write-unchecked writes "
                   "it anyway; a looser --tolerance or other holdout data may be needed)");
  *interrupted = nr_tune_stop != 0;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  session_free(&s);
  return st;
}
