/* fuzz_db.c - libFuzzer harness for the tuning database opened from a damaged file:
 * the input is written as the database file, opened (nr_db_open checks the schema),
 * and every reader `nnroute tune --continue` and `nnroute report` use walks it.
 *
 * Key decision: SQLite's own parser is not the target (it is fuzzed upstream); the
 * target is what db.c believes about the rows it reads back (lengths of loss blobs,
 * NULL columns, ids), so the seed is a real database that this harness writes
 * through the same API (NR_FUZZ_DB_SEED=FILE: write a seed and exit), and mutations
 * land in its rows. */
#include "tune/accuracy.h"
#include "tune/db.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[96], wal[112], shm[112];

static void remove_files(void) {
  unlink(path);
  unlink(wal);
  unlink(shm);
}

/* One session with two candidates (losses, timings, one holdout), measurements and a
 * calibration table. */
static int write_seed(const char *file) {
  nr_db *db = NULL;
  nr_error err = {0};
  int64_t env = 0, model = 0, session = 0;
  double losses[2 * NR_METRIC_COUNT] = {0.5, 1e-3, 0, 1}, times[3] = {1.5, 1.25, 1.75};
  nr_db_env e = {"cpu: fuzz seed", "0.1.0", "0123456789abcdef"};
  nr_db_candidate c[2] = {
      {.seq = 0, .route = "", .point = "0,0", .phase = "fast", .status = "ok",
       .build_ms = 12, .engine_bytes = 4096, .n_pairs = 1, .n_outputs = 2,
       .losses = losses, .times_ms = times, .n_times = 3, .median_ms = 1.5},
      {.seq = 1, .route = "-conv.algo=direct", .point = "1,0", .phase = "full",
       .status = "inaccurate", .message = "over tolerance", .n_pairs = 1, .n_outputs = 2,
       .losses = losses, .times_ms = times, .n_times = 2}};
  nr_db_measurement m = {0, "confirm", 1, times, 3, 1.5, 1.25, 1.75};
  if (nr_db_open(file, &db, &err) || nr_db_env_id(db, &e, &env, &err) ||
      nr_db_model_id(db, "ab12", "x=1x3x8x8", &model, &err) ||
      nr_db_session_begin(db, env, model, "{\"budget\":1}", "h1", "nnroute tune", &session,
                          &err))
    goto fail;
  for (int i = 0; i < 2; i++) {
    c[i].session_id = session;
    if (nr_db_candidate_put(db, &c[i], &err))
      goto fail;
  }
  m.candidate_id = c[0].id;
  if (nr_db_measurement_put(db, &m, &err) ||
      nr_db_candidate_set_holdout(db, c[0].id, losses, 1, 2, &err) ||
      nr_db_calibration_put(db, "cd34", "calib", 5, &err) ||
      nr_db_session_end(db, session, "done", "", "{\"winner\":\"\"}", &err))
    goto fail;
  nr_db_close(db);
  return 0;
fail:
  fprintf(stderr, "fuzz_db: writing the seed %s: %s\n", file, err.message);
  nr_db_close(db);
  return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *seed = getenv("NR_FUZZ_DB_SEED");
  if (seed)
    exit(write_seed(seed));
  snprintf(path, sizeof path, "/tmp/nnroute-fuzz-db-%d.sqlite", (int)getpid());
  snprintf(wal, sizeof wal, "%s-wal", path);
  snprintf(shm, sizeof shm, "%s-shm", path);
  return 0;
}

static int on_measurement(const nr_db_measurement *m, void *user) {
  return m->n_times < 0; /* read a field: the callback sees a whole row */
}

static int on_candidate(const nr_db_candidate *c, void *user) {
  nr_db *db = user;
  nr_db_candidate again = {0};
  bool found = false;
  if (c->route && !nr_db_candidate_get(db, c->session_id, c->route, &again, &found, NULL))
    nr_db_candidate_free(&again);
  nr_db_measurement_foreach(db, c->id, on_measurement, NULL, NULL);
  return 0;
}

static int on_prior(const char *route, double ratio, void *user) { return route == NULL; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  remove_files();
  FILE *f = fopen(path, "wb");
  if (!f)
    return 0;
  size_t wrote = fwrite(data, 1, size, f);
  if (fclose(f) || wrote != size)
    return 0;
  nr_db *db = NULL;
  if (!nr_db_open(path, &db, NULL)) {
    nr_db_session s = {0};
    bool found = false;
    int64_t id = 0;
    int count = 0, next_seq = 0;
    if (!nr_db_session_get(db, 0, &s, &found, NULL) && found) {
      nr_db_candidate_count(db, s.id, &count, &next_seq, NULL);
      nr_db_candidate_foreach(db, s.id, on_candidate, db, NULL);
      nr_db_session_find_resumable(db, s.env_id, s.model_id, s.settings_hash ? s.settings_hash : "",
                                   &id, NULL);
    }
    nr_db_session_free(&s);
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (!nr_db_calibration_get(db, "cd34", &bytes, &len, NULL))
      free(bytes);
    nr_db_priors(db, "ab12", -1, on_prior, NULL, NULL);
  }
  nr_db_close(db);
  remove_files();
  return 0;
}
