/* test_engine_tamper.c - structure-aware tampering of compiled engines: random edits of
 * the PLAN section's step and slot fields and of its header sizes, the checksum
 * recomputed, then load, create a context and run on zeros. Every mutation must load
 * and run, or be refused with a message; none may crash or hang.
 *
 * Key decision: each mutation runs in a forked child with an alarm, so a crash or hang
 * is counted (with the seed that repeats it) instead of taking the test runner down.
 * The walker below knows the PLAN layout (engine_format.c's specification) and lists
 * every field with its file offset, so mutations land on numbers kernels use rather
 * than on names. Engines: examples/tiny_cnn along several routes (conv layouts and
 * algorithms, GEMM libraries, no prepacking), plus any models named in
 * NR_TAMPER_MODELS (colon-separated .onnx paths, e.g. ONNX node tests).
 * NR_TAMPER_MUTATIONS sets the count per engine (scripts/engine_tamper.sh runs the
 * long campaign), NR_TAMPER_SEED the seed, NR_TAMPER_ONLY=SEED one failing mutation
 * again (with its model's route first in the list); NR_TAMPER_INPROC=1 runs them in this process
 * (to debug one). */
#include "engine/engine.h"
#include "plan/plan.h"
#include "rng.h"
#include "unit.h"
#include "util/sha256.h"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"
#define TAMPER_DEFAULT 600 /* mutations per engine in nr_unit */
#define TAMPER_ALARM_S 20  /* a child still running after this is a hang */
#define MAX_FIELDS 8192

typedef struct field {
  uint32_t off;  /* file offset */
  uint8_t size;  /* 4 or 8 (a params byte: 1) */
  int16_t record; /* slot or step index (-1: the plan's sizes) */
  char what;     /* 's' slot, 't' step, 'p' plan */
} field;

typedef struct walker {
  const uint8_t *p;
  size_t pos, end;
  field *f;
  int n;
  bool bad;
  int record;
  char what;
} walker;

static uint32_t rd32(const uint8_t *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Notes the field at the cursor (when keep) and steps over it. */
static uint64_t take(walker *w, uint8_t size, bool keep) {
  if (w->bad || w->pos + size > w->end) {
    w->bad = true;
    return 0;
  }
  uint64_t v = size == 8 ? rd32(w->p + w->pos) | (uint64_t)rd32(w->p + w->pos + 4) << 32
               : size == 4 ? rd32(w->p + w->pos)
                           : w->p[w->pos];
  if (keep && w->n < MAX_FIELDS)
    w->f[w->n++] = (field){(uint32_t)w->pos, size, (int16_t)w->record, w->what};
  w->pos += size;
  return v;
}

static void skip_bytes(walker *w, uint64_t n) {
  if (w->bad || n > w->end - w->pos)
    w->bad = true;
  else
    w->pos += (size_t)n;
}

static void walk_slot(walker *w) {
  skip_bytes(w, take(w, 4, false)); /* name */
  take(w, 4, true);                 /* dtype */
  uint32_t rank = (uint32_t)take(w, 4, true);
  for (uint32_t d = 0; d < rank && d < 8 && !w->bad; d++)
    take(w, 8, true);
  for (int i = 0; i < 2; i++)
    take(w, 4, true); /* layout, kind */
  for (int i = 0; i < 2; i++)
    take(w, 8, true); /* nbytes, offset */
  for (int i = 0; i < 3; i++)
    take(w, 4, true); /* first use, last use, alias */
}

static void walk_step(walker *w) {
  skip_bytes(w, take(w, 4, false)); /* tactic id */
  take(w, 4, true);                 /* node */
  uint32_t n_in = (uint32_t)take(w, 4, true), n_out = (uint32_t)take(w, 4, true);
  for (uint32_t k = 0; k < n_in + n_out && k < 2 * NR_STEP_MAX_IO && !w->bad; k++)
    take(w, 4, true);
  for (int i = 0; i < 3; i++)
    take(w, 8, true); /* packed offset, packed size, scratch */
  take(w, 4, true);   /* threads */
  for (int i = 0; i < NR_TACTIC_PARAMS; i++)
    take(w, 1, true); /* params */
}

/* Every numeric field of the PLAN section of engine file d; the count, or -1. */
static int plan_fields(const uint8_t *d, size_t len, field *out) {
  uint32_t n = rd32(d + 16);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *e = d + 32 + 24 * i;
    if (rd32(e) != 3)
      continue;
    uint64_t off = rd32(e + 8) | (uint64_t)rd32(e + 12) << 32;
    uint64_t size = rd32(e + 16) | (uint64_t)rd32(e + 20) << 32;
    walker w = {d, (size_t)off, (size_t)(off + size), out, 0, off + size > len, -1, 'p'};
    uint32_t n_slots = (uint32_t)take(&w, 4, false), n_steps = (uint32_t)take(&w, 4, false);
    take(&w, 4, false), take(&w, 4, false), take(&w, 4, false), take(&w, 4, false);
    for (int k = 0; k < 3; k++)
      take(&w, 8, true); /* arena, scratch, weights sizes */
    w.what = 's';
    for (uint32_t s = 0; s < n_slots && !w.bad; s++, w.record++)
      walk_slot(&w);
    w.what = 't';
    w.record = 0;
    for (uint32_t s = 0; s < n_steps && !w.bad; s++, w.record++)
      walk_step(&w);
    return w.bad ? -1 : w.n;
  }
  return -1;
}

/* One mutation: 1-3 fields get a boundary value, a nearby value or a flipped bit. */
static void mutate(uint8_t *d, const field *f, int n, nr_rng *r) {
  int edits = 1 + (int)(nr_rng_u32(r) % 3);
  for (int e = 0; e < edits; e++) {
    const field *x = &f[nr_rng_u32(r) % (uint32_t)n];
    uint64_t v = 0;
    memcpy(&v, d + x->off, x->size);
    switch (nr_rng_u32(r) % 6) {
    case 0: v = 0; break;
    case 1: v = ~(uint64_t)0; break; /* -1 */
    case 2: v += 1 + nr_rng_u32(r) % 8; break;
    case 3: v -= 1 + nr_rng_u32(r) % 8; break;
    case 4: v ^= (uint64_t)1 << (nr_rng_u32(r) % (8 * x->size)); break;
    default: v = nr_rng_u32(r) % 4096; break;
    }
    if (getenv("NR_TAMPER_INPROC"))
      fprintf(stderr, "  %c%d field at file offset %u (%u bytes) -> 0x%llx\n", x->what,
              x->record, x->off, x->size, (unsigned long long)v);
    memcpy(d + x->off, &v, x->size); /* little-endian host */
  }
}

/* Child: load, context, run on zeros. 0: refused with a message; 2: loaded and ran;
 * 1: a status without a message. */
static int child_run(const uint8_t *d, size_t len) {
  alarm(TAMPER_ALARM_S);
  nr_engine *e = NULL;
  nr_context *c = NULL;
  nr_error err = {0};
  nr_buffer in[16] = {{0}}, out[16] = {{0}};
  nr_status st = nr_engine_parse(d, len, true, &e, &err);
  if (!st)
    st = nr_context_create(e, 1, &c, &err);
  int n_in = e ? nr_engine_input_count(e) : 0, n_out = e ? nr_engine_output_count(e) : 0;
  for (int i = 0; !st && i < n_in && i < 16; i++) {
    nr_io_info info;
    nr_engine_input_info(e, i, &info);
    in[i] = (nr_buffer){info.dtype, info.rank, {0}, NULL};
    memcpy(in[i].dims, info.dims, sizeof info.dims);
    in[i].data = calloc(nr_buffer_count(&in[i]) + 1, nr_dtype_size(info.dtype) + 1);
  }
  if (!st && n_in <= 16 && n_out <= 16)
    st = nr_context_run(c, in, out, &err);
  for (int i = 0; i < 16; i++) {
    free(in[i].data);
    nr_buffer_free(&out[i]);
  }
  nr_context_destroy(c);
  nr_engine_free(e);
  return st ? !err.message[0] : 2;
}

typedef struct tally {
  int ran, refused, crashed, hung, silent;
} tally;

static void one_mutation(nr_test_state *t, const char *label, const uint8_t *d, size_t len,
                         uint64_t seed, tally *n) {
  if (getenv("NR_TAMPER_INPROC")) { /* for a debugger: NR_TAMPER_MUTATIONS=1 too */
    int rc = child_run(d, len);
    fprintf(stderr, "%s seed 0x%llx: %s\n", label, (unsigned long long)seed,
            rc == 2 ? "ran" : rc ? "error without a message" : "refused");
    return;
  }
  pid_t pid = fork();
  if (pid == 0)
    _exit(child_run(d, len));
  int ws = 0;
  if (pid < 0 || waitpid(pid, &ws, 0) != pid) {
    CHECK(false, "%s seed 0x%llx: fork/wait failed", label, (unsigned long long)seed);
    return;
  }
  if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGALRM)
    n->hung++;
  else if (WIFSIGNALED(ws))
    n->crashed++;
  else if (WEXITSTATUS(ws) == 2)
    n->ran++;
  else if (WEXITSTATUS(ws))
    n->silent++;
  else
    n->refused++;
  if (WIFSIGNALED(ws))
    CHECK(false, "%s seed 0x%llx: %s (signal %d); repeat with NR_TAMPER_SEED", label,
          (unsigned long long)seed, WTERMSIG(ws) == SIGALRM ? "hang" : "crash",
          WTERMSIG(ws));
  CHECK(!WIFEXITED(ws) || WEXITSTATUS(ws) != 1, "%s seed 0x%llx: error without a message",
        label, (unsigned long long)seed);
}

static long env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 0) : dflt;
}

static void tamper_engine(nr_test_state *t, const char *label, const nr_engine *e,
                          uint64_t seed, tally *n) {
  uint8_t *data = NULL, *copy = NULL;
  size_t len = 0;
  nr_error err = {0};
  field *f = malloc(sizeof *f * MAX_FIELDS);
  REQUIRE(f && !nr_engine_serialize(e, &data, &len, &err), "%s: %s", label, err.message);
  int nf = plan_fields(data, len, f);
  copy = malloc(len);
  REQUIRE(copy && nf > 0, "%s: PLAN walk failed", label);
  long count = env_long("NR_TAMPER_MUTATIONS", TAMPER_DEFAULT);
  const char *only = getenv("NR_TAMPER_ONLY"); /* one mutation, by its printed seed */
  for (long m = 0; m < (only ? 1 : count) && t->failures < 20; m++) {
    uint64_t s = only ? strtoull(only, NULL, 0) : seed ^ ((uint64_t)m * 0x9e3779b97f4a7c15ull);
    nr_rng r = nr_rng_make(s);
    memcpy(copy, data, len);
    mutate(copy, f, nf, &r);
    nr_sha256(copy, len - 32, copy + len - 32);
    one_mutation(t, label, copy, len, s, n);
  }
  free(copy);
  free(data);
  free(f);
}

static void tamper_model(nr_test_state *t, const char *path, const char *route,
                         uint64_t seed, tally *n) {
  nr_model *m = NULL;
  nr_engine *e = NULL;
  nr_error err = {0};
  nr_build_options o = {sizeof o, route, 1, NR_DEVICE_CPU, NULL};
  if (nr_model_load(path, NULL, &m, &err) || nr_engine_build(m, &o, &e, &err)) {
    CHECK(false, "%s [%s]: %s", path, route, err.message);
  } else {
    char label[512];
    snprintf(label, sizeof label, "%s [%s]", path, route);
    tamper_engine(t, label, e, seed, n);
  }
  nr_engine_free(e);
  nr_model_destroy(m);
}

static const char *const routes[] = {
    "",
    "-conv.layout=nchw8c -gemm.tactic=openblas_sgemm",
    "-conv.layout=nhwc -conv.algo@/4/Conv=winograd23 -pool.tactic@/3/MaxPool=ref "
    "-gemm.prepack=off",
    "-conv.algo=direct -memory.plan=naive -gemm.epilogue=separate -gemm.threads=n",
};

/* The campaign runs in a worker: this process spawned again (posix_spawn runs no fork
 * handlers here, so OpenBLAS and OpenMP state of this process stays as it was for the
 * tests after this one), which forks a child per mutation. */
static void tamper_all(nr_test_state *t);

NR_TEST(engine_tamper_never_crashes) {
  if (getenv("NR_TAMPER_WORKER") || getenv("NR_TAMPER_INPROC")) {
    tamper_all(t);
    return;
  }
  extern char **environ;
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + 2, sizeof *env);
  REQUIRE(env);
  memcpy(env, environ, n * sizeof *env);
  env[n] = "NR_TAMPER_WORKER=1";
  char exe[] = "/proc/self/exe", name[] = "engine_tamper_never_crashes";
  char *argv[] = {exe, name, NULL};
  pid_t pid;
  int ws = 0;
  int rc = posix_spawn(&pid, exe, NULL, NULL, argv, env);
  free(env);
  REQUIRE(rc == 0, "posix_spawn: %s", strerror(rc));
  REQUIRE(waitpid(pid, &ws, 0) == pid, "waitpid");
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the tamper worker failed (status 0x%x; its "
        "FAIL lines are above)", ws);
}

static void tamper_all(nr_test_state *t) {
  uint64_t seed = (uint64_t)env_long("NR_TAMPER_SEED", 0x7a3be11e);
  tally n = {0};
  for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
    tamper_model(t, TINY_CNN, routes[i], seed + i, &n);
  const char *extra = getenv("NR_TAMPER_MODELS");
  char *list = extra ? strdup(extra) : NULL, *save = NULL;
  for (char *p = list ? strtok_r(list, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
    tamper_model(t, p, "", seed, &n);
  free(list);
  fprintf(stderr, "engine_tamper: %d refused, %d loaded and ran, %d crashed, %d hung, "
          "%d errors without a message\n", n.refused, n.ran, n.crashed, n.hung, n.silent);
}
