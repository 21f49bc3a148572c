/* worker.c - one candidate evaluated in a forked child (worker.h has the contract).
 *
 * Key decision: the child reports through one binary record on a pipe, and anything
 * short of a complete, well-formed record is a crash. The record is a fixed header
 * (magic, version, the child's own classification, counts, build time, engine size,
 * message), then the losses and the run times as doubles, the sequence's run counts,
 * the knob use bytes (one per knob row of the job), then a trailing magic; the
 * parent checks every count against what the job allows before copying anything out.
 * The child allocates its whole record before it lowers its memory limit, so running
 * out of memory can still be reported. The parent owns every way the child can end:
 * it reads with poll() against one wall-clock deadline, kills the child's process
 * group (the child makes itself a group leader, so threads and anything it spawned go
 * too) when the deadline passes, and always reaps it, so no run leaves a zombie or a
 * descriptor behind. The child never returns into the caller: it leaves with _exit,
 * skipping atexit handlers and the parent's unflushed stdio buffers.
 *
 * Caveat for callers: the parent must not have run oneDNN (an OpenMP parallel region)
 * before forking. GNU libgomp's thread pool does not survive fork, and a child's first
 * parallel region then waits forever (it is reported as a timeout). The tuner's parent
 * only loads the model and runs the reference executor, which uses no OpenMP. */
#include "tune/worker.h"
#include "api/nnroute_tools.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REC_MAGIC 0x5257524eu     /* "NRWR" */
#define REC_END_MAGIC 0x444e4557u /* "WEND" */
#define REC_VERSION 3u

typedef struct rec_header {
  uint32_t magic, version;
  int32_t status; /* the child's classification (never timeout or crash) */
  int32_t n_pairs, n_outputs, n_times;
  int32_t n_seq;  /* sequence mode: per-slot run counts follow the times */
  int32_t n_use;  /* knob use bytes after those (job.knobs' rows; 0 without) */
  int32_t use_valid, same; /* the use bytes hold the build's; job.same_as said yes */
  double build_ms;
  uint64_t engine_bytes;
  char message[512];
} rec_header;

/* The child of the run in progress (0: none), and whether an abort was asked for
 * since the run began; both read by nr_worker_abort in a signal handler. */
static volatile sig_atomic_t current_child;
static volatile sig_atomic_t abort_requested;

static const char *const status_names[NR_CAND_STATUS_COUNT] = {
    "ok", "build_error", "crash", "timeout", "oom", "nonfinite", "accuracy_fail",
    "run_error", "shape_mismatch"};

const char *nr_cand_status_name(nr_cand_status s) {
  return (unsigned)s < NR_CAND_STATUS_COUNT ? status_names[s] : "unknown";
}

bool nr_cand_status_parse(const char *text, nr_cand_status *out) {
  for (int i = 0; text && i < NR_CAND_STATUS_COUNT; i++)
    if (!strcmp(text, status_names[i])) {
      *out = (nr_cand_status)i;
      return true;
    }
  return false;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the job with its defaults ------------------------------------------------------ */

typedef struct job_plan {
  int warmup, min_runs, max_runs;
  int n_seq, max_times; /* sequence slots (0: one engine); room for all timed runs */
  double min_time_ms, timeout_ms;
  int n_pairs, n_losses; /* losses: n_pairs * outputs * NR_METRIC_COUNT */
  int n_outputs;         /* of the pairs; -1 when there are none (the engine's) */
  int n_use;             /* knob use bytes: job.knobs' rows when building, else 0 */
} job_plan;

static job_plan plan_job(const nr_worker_job *j) {
  job_plan p;
  p.warmup = j->warmup_runs > 0 ? j->warmup_runs : 2;
  p.max_runs = j->max_runs > 0 ? j->max_runs : 1000;
  p.min_runs = j->min_runs > 0 ? j->min_runs : 5;
  if (p.min_runs > p.max_runs)
    p.min_runs = p.max_runs;
  p.min_time_ms = j->min_time_ms > 0 ? j->min_time_ms : 50;
  p.n_seq = j->n_sequence > 0 ? j->n_sequence : 0;
  p.max_times = p.max_runs * (p.n_seq ? p.n_seq : 1);
  p.timeout_ms = (j->timeout_s > 0 ? j->timeout_s : 600) * 1e3;
  bool pairs = !p.n_seq && j->pairs && j->pairs->n > 0;
  p.n_pairs = pairs ? j->pairs->n : 0;
  p.n_outputs = pairs ? j->pairs->n_outputs : -1;
  p.n_losses = pairs ? p.n_pairs * p.n_outputs * NR_METRIC_COUNT : 0;
  p.n_use = !p.n_seq && !j->engine_in && j->knobs ? j->knobs->n : 0;
  return p;
}

static size_t record_size(const job_plan *p, int n_times) {
  return sizeof(rec_header) +
         sizeof(double) * ((size_t)p->n_losses + (size_t)n_times + (size_t)p->n_seq) +
         (size_t)p->n_use + sizeof(uint32_t);
}

/* ---- the child ---------------------------------------------------------------------- */

typedef struct child {
  const nr_worker_job *job;
  job_plan plan;
  rec_header *h;     /* the record, allocated before the memory limit */
  double *losses;    /* inside the record */
  double *times;     /* inside the record, room for max_times */
  double *seq;       /* sequence mode: runs per slot (n_seq) */
  uint8_t *use;      /* knob use bytes (n_use), allocated with the record */
  nr_engine *engine;
  nr_context *ctx;
  nr_buffer *outs;   /* one set of output buffers (engine output count) */
  int n_engine_outputs;
} child;

/* Records a failure: NOMEM anywhere means oom; otherwise the given status. */
static void child_fail(child *c, nr_status st, nr_cand_status otherwise,
                       const nr_error *err, const char *what) {
  c->h->status = st == NR_ERR_NOMEM ? NR_CAND_OOM : otherwise;
  snprintf(c->h->message, sizeof c->h->message, "%s: %.490s", what, /* the start */
           err && err->message[0] ? err->message : nr_status_str(st));
}

static bool child_build(child *c) {
  const nr_worker_job *j = c->job;
  nr_error err = {0};
  double t0 = now_ms();
  nr_status st;
  if (j->engine_in) {
    st = nr_engine_load(j->engine_in, NULL, &c->engine, &err);
  } else {
    nr_build_options o = {sizeof o, j->route, j->threads, j->device, j->calibration};
    st = nr_engine_build(j->model, &o, &c->engine, &err);
  }
  c->h->build_ms = now_ms() - t0;
  if (st)
    child_fail(c, st, NR_CAND_BUILD_ERROR, &err, j->engine_in ? "loading" : "building");
  if (!st && c->plan.n_use)
    c->h->use_valid = !nr_engine_knob_use(c->engine, j->knobs, c->use, NULL);
  return !st;
}

/* Whether the caller has measured this build already (job.same_as). */
static bool child_same(child *c) {
  const nr_worker_job *j = c->job;
  c->h->same = c->h->use_valid && j->same_as && j->same_as(j->same_user, c->use);
  return c->h->same;
}

static bool child_save(child *c) {
  nr_error err = {0};
  struct stat sb;
  nr_status st = nr_engine_save(c->engine, c->job->engine_out, &err);
  if (!st && stat(c->job->engine_out, &sb))
    st = nr_errorf(&err, NR_ERR_IO, "'%s': %s", c->job->engine_out, strerror(errno));
  if (st) {
    child_fail(c, st, NR_CAND_BUILD_ERROR, &err, "saving");
    return false;
  }
  c->h->engine_bytes = (uint64_t)sb.st_size;
  return true;
}

static bool child_context(child *c) {
  nr_error err = {0};
  c->n_engine_outputs = nr_engine_output_count(c->engine);
  c->h->n_outputs = c->n_engine_outputs;
  if (c->plan.n_outputs >= 0 && c->plan.n_outputs != c->n_engine_outputs) {
    c->h->status = NR_CAND_BUILD_ERROR;
    snprintf(c->h->message, sizeof c->h->message,
             "the engine has %d outputs, the reference pairs %d", c->n_engine_outputs,
             c->plan.n_outputs);
    return false;
  }
  c->outs = calloc((size_t)c->n_engine_outputs + 1, sizeof *c->outs);
  nr_status st = c->outs ? nr_context_create(c->engine, c->job->threads, &c->ctx, &err)
                         : nr_errorf(&err, NR_ERR_NOMEM, "output list");
  if (st)
    child_fail(c, st, NR_CAND_BUILD_ERROR, &err, "creating a context");
  return !st;
}

/* Runs once into c->outs (allocated by the first run, then written in place). */
static bool child_run(child *c, const nr_buffer *inputs) {
  nr_error err = {0};
  nr_status st = nr_context_run(c->ctx, inputs, c->outs, &err);
  if (st)
    child_fail(c, st, NR_CAND_RUN_ERROR, &err, "running");
  return !st;
}

/* Runs every pair and records every loss; false when the run failed or an output is
 * not finite (the remaining losses are still recorded). */
static bool child_accuracy(child *c) {
  const nr_worker_job *j = c->job;
  double atol = j->tol ? j->tol->atol : 0, rtol = j->tol ? j->tol->rtol : 0;
  bool finite = true, any_mismatch = false;
  for (int p = 0; p < c->plan.n_pairs; p++) {
    if (!child_run(c, j->pairs->pairs[p].inputs))
      return false;
    for (int o = 0; o < c->n_engine_outputs; o++) {
      double *l = c->losses + ((size_t)p * (size_t)c->n_engine_outputs + (size_t)o) *
                                  NR_METRIC_COUNT;
      bool mismatch = false;
      if (!nr_losses_compute(&c->outs[o], &j->pairs->pairs[p].outputs[o], atol, rtol, l,
                             &mismatch) && finite) {
        finite = false;
        any_mismatch = mismatch;
        snprintf(c->h->message, sizeof c->h->message, "output %d of pair %d %s", o, p,
                 mismatch ? "differs in shape or dtype from the reference"
                          : "holds a NaN or Inf");
      }
    }
  }
  if (!finite)
    c->h->status = any_mismatch ? NR_CAND_SHAPE_MISMATCH : NR_CAND_NONFINITE;
  else if (j->tol && !nr_tolerance_check(j->tol, c->losses, c->plan.n_pairs,
                                         c->n_engine_outputs, j->output_names, NULL))
    c->h->status = NR_CAND_ACCURACY_FAIL;
  return finite;
}

/* Zero-filled inputs of the engine's shapes (when there is no pair to time on). */
static nr_buffer *zero_inputs(const nr_engine *e) {
  int n = nr_engine_input_count(e);
  nr_buffer *in = calloc((size_t)n + 1, sizeof *in);
  for (int i = 0; in && i < n; i++) {
    nr_io_info info;
    nr_engine_input_info(e, i, &info);
    in[i].dtype = info.dtype;
    in[i].rank = info.rank;
    memcpy(in[i].dims, info.dims, sizeof in[i].dims);
    size_t bytes = nr_buffer_count(&in[i]) * nr_dtype_size(info.dtype);
    if (!(in[i].data = calloc(bytes ? bytes : 1, 1)))
      return NULL; /* the child exits soon; nothing to free */
  }
  return in;
}

/* Without pairs nothing else looks at the outputs: still, no NaN may be timed. */
static bool outputs_finite(child *c) {
  for (int o = 0; o < c->n_engine_outputs; o++) {
    const nr_buffer *b = &c->outs[o];
    size_t n = nr_buffer_count(b);
    for (size_t i = 0; i < n; i++) {
      double v = b->dtype == NR_DTYPE_FLOAT    ? ((const float *)b->data)[i]
                 : b->dtype == NR_DTYPE_DOUBLE ? ((const double *)b->data)[i]
                                               : 0;
      if (!isfinite(v)) {
        c->h->status = NR_CAND_NONFINITE;
        snprintf(c->h->message, sizeof c->h->message,
                 "output %d holds a NaN or Inf (on the timing inputs)", o);
        return false;
      }
    }
  }
  return true;
}

/* The pair set timed runs rotate over (worker.h, `timing`); NULL: zeros. */
static const nr_pair_set *timing_set(const nr_worker_job *j) {
  if (j->timing && j->timing->n > 0)
    return j->timing;
  return !j->n_sequence && j->pairs && j->pairs->n > 0 ? j->pairs : NULL;
}

/* The inputs of timed run k (0 also for the warm-up runs). */
static const nr_buffer *timing_inputs(const child *c, const nr_pair_set *set,
                                      const nr_buffer *zeros, int k) {
  if (!set)
    return zeros;
  int first = c->job->timing_first > 0 ? c->job->timing_first : 0;
  return set->pairs[(int)(((long long)first + k) % set->n)].inputs;
}

/* Times c->engine from c->times[base] on; the record's n_times follows, so the runs
 * before a failure are still sent. Returns the runs timed, -1 on failure. */
static int child_measure(child *c, int base) {
  const job_plan *p = &c->plan;
  const nr_pair_set *set = timing_set(c->job);
  const nr_buffer *zeros = set ? NULL : zero_inputs(c->engine);
  if (!set && !zeros) {
    nr_error err = {0};
    child_fail(c, nr_errorf(&err, NR_ERR_NOMEM, "zero inputs"), NR_CAND_OOM, &err, "timing");
    return -1;
  }
  for (int i = 0; i < p->warmup; i++)
    if (!child_run(c, timing_inputs(c, set, zeros, 0)))
      return -1;
  if (!p->n_pairs && !outputs_finite(c))
    return -1;
  double total = 0;
  int n = 0;
  while (n < p->max_runs && (n < p->min_runs || total < p->min_time_ms)) {
    const nr_buffer *in = timing_inputs(c, set, zeros, n);
    double t0 = now_ms();
    if (!child_run(c, in))
      return -1;
    c->times[base + n] = now_ms() - t0;
    total += c->times[base + n++];
    c->h->n_times = base + n;
  }
  return n;
}

/* Sequence mode: every distinct file loaded and given a context first (build_ms is
 * that time), then the slots timed in order. A failure stops the sequence with the
 * status and message of the slot that failed. */
static void child_sequence(child *c) {
  const nr_worker_job *j = c->job;
  int n = c->plan.n_seq;
  nr_engine *eng[NR_WORKER_MAX_SEQUENCE] = {0};
  nr_context *ctx[NR_WORKER_MAX_SEQUENCE] = {0};
  nr_buffer *outs[NR_WORKER_MAX_SEQUENCE] = {0};
  int slot_of[NR_WORKER_MAX_SEQUENCE], n_outs[NR_WORKER_MAX_SEQUENCE] = {0};
  double t0 = now_ms();
  for (int k = 0; k < n; k++) {
    slot_of[k] = k;
    for (int e = 0; e < k; e++)
      if (!strcmp(j->sequence[e], j->sequence[k])) {
        slot_of[k] = slot_of[e];
        break;
      }
    if (slot_of[k] != k)
      continue;
    nr_error err = {0};
    nr_status st = nr_engine_load(j->sequence[k], NULL, &eng[k], &err);
    if (st) {
      child_fail(c, st, NR_CAND_BUILD_ERROR, &err, "loading");
      return;
    }
    c->engine = eng[k];
    if (!child_context(c))
      return;
    ctx[k] = c->ctx, outs[k] = c->outs, n_outs[k] = c->n_engine_outputs;
  }
  c->h->build_ms = now_ms() - t0;
  int done = 0;
  for (int k = 0; k < n; k++) {
    int e = slot_of[k];
    c->engine = eng[e], c->ctx = ctx[e], c->outs = outs[e], c->n_engine_outputs = n_outs[e];
    int runs = child_measure(c, done);
    if (runs < 0)
      return;
    c->seq[k] = runs;
    done += runs;
  }
}

static void write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(3); /* the parent is gone or broke the pipe: it will see a crash */
    p += w;
    n -= (size_t)w;
  }
}

static void child_send(child *c, int fd) {
  int n_times = c->h->n_times;
  size_t body = sizeof(double) * (size_t)c->plan.n_losses;
  uint32_t end = REC_END_MAGIC;
  write_all(fd, c->h, sizeof *c->h);
  write_all(fd, c->losses, body + sizeof(double) * (size_t)n_times);
  if (c->plan.n_seq)
    write_all(fd, c->seq, sizeof(double) * (size_t)c->plan.n_seq);
  write_all(fd, c->use, (size_t)c->plan.n_use);
  write_all(fd, &end, sizeof end);
}

static bool child_alloc(child *c) {
  size_t n = (size_t)c->plan.n_losses + (size_t)c->plan.max_times + (size_t)c->plan.n_seq;
  c->h = calloc(1, sizeof *c->h);
  c->losses = calloc(n ? n : 1, sizeof(double));
  c->use = calloc((size_t)c->plan.n_use + 1, 1);
  if (!c->h || !c->losses || !c->use)
    return false;
  c->h->n_use = c->plan.n_use;
  c->times = c->losses + c->plan.n_losses;
  c->seq = c->times + c->plan.max_times; /* zero: a slot never reached ran 0 times */
  c->h->n_seq = c->plan.n_seq;
  for (int i = 0; i < c->plan.n_losses; i++)
    c->losses[i] = INFINITY; /* a pair a run error cut short was not judged */
  c->h->magic = REC_MAGIC;
  c->h->version = REC_VERSION;
  c->h->n_pairs = c->plan.n_pairs;
  c->h->n_outputs = c->plan.n_outputs;
  return true;
}

static void child_limit_memory(uint64_t bytes) {
  struct rlimit rl;
  if (!bytes || getrlimit(RLIMIT_AS, &rl))
    return;
  rl.rlim_cur = (rlim_t)bytes;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
    rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_AS, &rl);
}

static _Noreturn void child_main(const nr_worker_job *job, pid_t parent, int fd) {
  setpgid(0, 0);
  /* The child has its own process group, so a tuner killed with SIGKILL would leave a
   * hanging candidate behind: have the kernel kill it when the parent dies. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(3);
  signal(SIGPIPE, SIG_IGN);
  child c = {.job = job, .plan = plan_job(job)};
  if (!child_alloc(&c))
    _exit(2);
  child_limit_memory(job->mem_limit);
  if (c.plan.n_seq) {
    child_sequence(&c);
    child_send(&c, fd);
    _exit(0);
  }
  bool ok = child_build(&c) && !child_same(&c) && (!job->engine_out || child_save(&c)) &&
            child_context(&c) && (c.plan.n_pairs == 0 || child_accuracy(&c));
  if (ok && job->measure)
    child_measure(&c, 0);
  child_send(&c, fd);
  _exit(0);
}

/* ---- the parent --------------------------------------------------------------------- */

typedef struct reader {
  char *buf;
  size_t len, cap;
  bool timed_out; /* the deadline passed and the group was killed */
  bool broken;    /* poll failed: the group was killed */
} reader;

static void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL); /* in case the group does not exist (yet) */
}

/* Reads the child's record until EOF or the deadline (then kills the group). */
static void read_record(int fd, pid_t pid, double deadline, reader *r) {
  for (;;) {
    double left = deadline - now_ms();
    if (left <= 0) {
      kill_group(pid);
      r->timed_out = true;
      return;
    }
    struct pollfd pfd = {fd, POLLIN, 0};
    int n = poll(&pfd, 1, left > 1e6 ? 1000000 : (int)left + 1);
    if (n < 0 && errno != EINTR) {
      kill_group(pid); /* never wait on a child nobody watches */
      r->broken = true;
      return;
    }
    if (n <= 0)
      continue;
    char tmp[4096];
    char *dst = r->len < r->cap ? r->buf + r->len : tmp;
    size_t room = r->len < r->cap ? r->cap - r->len : sizeof tmp;
    ssize_t got = read(fd, dst, room);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return; /* EOF (or an error): the child is done with the pipe */
    r->len += (size_t)got; /* past cap: too long, rejected when parsed */
  }
}

static pid_t wait_child(pid_t pid, int *status) {
  pid_t w;
  while ((w = waitpid(pid, status, 0)) < 0 && errno == EINTR) {
  }
  return w;
}

/* Copies a validated record into res; false when it is incomplete or malformed. */
static bool parse_record(const reader *r, const job_plan *p, nr_worker_result *res) {
  rec_header h;
  if (r->len < sizeof h || r->len > r->cap)
    return false;
  memcpy(&h, r->buf, sizeof h);
  if (h.magic != REC_MAGIC || h.version != REC_VERSION || h.n_times < 0 ||
      h.n_times > p->max_times || h.n_seq != p->n_seq || h.n_pairs != p->n_pairs ||
      h.n_use != p->n_use || (h.same && h.status != NR_CAND_OK) ||
      (p->n_outputs >= 0 && h.n_outputs != p->n_outputs) || h.status < NR_CAND_OK ||
      h.status >= NR_CAND_STATUS_COUNT || h.status == NR_CAND_CRASH ||
      h.status == NR_CAND_TIMEOUT || r->len != record_size(p, h.n_times))
    return false;
  uint32_t end;
  memcpy(&end, r->buf + r->len - sizeof end, sizeof end);
  if (end != REC_END_MAGIC)
    return false;
  const char *body = r->buf + sizeof h;
  /* Losses exist once the engine ran the pairs: ok, accuracy_fail, nonfinite,
   * shape_mismatch, and run_error (a run of the pairs failed); not for a known build. */
  bool judged = !h.same &&
                (h.status == NR_CAND_OK || h.status == NR_CAND_ACCURACY_FAIL ||
                 h.status == NR_CAND_NONFINITE || h.status == NR_CAND_SHAPE_MISMATCH ||
                 h.status == NR_CAND_RUN_ERROR);
  int n_losses = judged ? p->n_losses : 0;
  if (n_losses && !(res->losses = malloc(sizeof(double) * (size_t)n_losses)))
    return false;
  if (h.n_times && !(res->times_ms = malloc(sizeof(double) * (size_t)h.n_times)))
    return false;
  if (n_losses)
    memcpy(res->losses, body, sizeof(double) * (size_t)n_losses);
  if (h.n_times)
    memcpy(res->times_ms, body + sizeof(double) * (size_t)p->n_losses,
           sizeof(double) * (size_t)h.n_times);
  if (p->n_seq) { /* counts: whole, within max_runs each, adding up to n_times */
    if (!(res->seq_runs = calloc((size_t)p->n_seq, sizeof *res->seq_runs)))
      return false;
    const char *at = body + sizeof(double) * ((size_t)p->n_losses + (size_t)h.n_times);
    int64_t sum = 0;
    for (int k = 0; k < p->n_seq; k++) {
      double v;
      memcpy(&v, at + sizeof v * (size_t)k, sizeof v);
      if (!(v >= 0 && v <= p->max_runs && v == (double)(int)v))
        return false;
      res->seq_runs[k] = (int)v;
      sum += (int)v;
    }
    bool whole = h.status != NR_CAND_OK || sum == h.n_times;
    if (sum > h.n_times || !whole)
      return false;
    res->n_seq = p->n_seq;
  }
  if (h.use_valid && p->n_use) {
    const char *at = body + sizeof(double) * ((size_t)p->n_losses + (size_t)h.n_times +
                                              (size_t)p->n_seq);
    if (!(res->knob_use = malloc((size_t)p->n_use)))
      return false;
    memcpy(res->knob_use, at, (size_t)p->n_use);
    res->n_knob_use = p->n_use;
  }
  res->same = h.same != 0;
  res->status = (nr_cand_status)h.status;
  res->build_ms = h.build_ms;
  res->engine_bytes = h.engine_bytes;
  res->n_pairs = n_losses ? h.n_pairs : 0;
  res->n_outputs = h.n_outputs > 0 ? h.n_outputs : 0;
  res->n_times = h.n_times;
  memcpy(res->message, h.message, sizeof res->message);
  res->message[sizeof res->message - 1] = '\0';
  return true;
}

static void classify(const reader *r, const job_plan *p, int wstatus, bool aborted,
                     nr_worker_result *res) {
  int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
  if (aborted || r->broken) {
    res->status = NR_CAND_CRASH;
    res->signal = aborted ? SIGINT : 0;
    snprintf(res->message, sizeof res->message, "%s",
             aborted ? "interrupted" : "waiting for the result failed; killed");
  } else if (r->timed_out) {
    res->status = NR_CAND_TIMEOUT;
    snprintf(res->message, sizeof res->message, "no result within %.1f s; killed",
             p->timeout_ms / 1e3);
  } else if (sig == SIGKILL) {
    res->status = NR_CAND_OOM;
    snprintf(res->message, sizeof res->message, "killed by SIGKILL that nnroute did not "
             "send (the kernel's OOM killer?)");
  } else if (sig) {
    res->status = NR_CAND_CRASH;
    res->signal = sig;
    snprintf(res->message, sizeof res->message, "killed by signal %d (%s)", sig,
             strsignal(sig));
  } else if (!parse_record(r, p, res)) {
    nr_worker_result_free(res);
    res->status = NR_CAND_CRASH;
    snprintf(res->message, sizeof res->message, "exited with status %d without a "
             "complete result (%zu bytes)", WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
             r->len);
  }
}

static nr_status check_job(const nr_worker_job *job, nr_worker_result *res, nr_error *err) {
  if (!res)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_worker_run: res is NULL");
  memset(res, 0, sizeof *res);
  if (job && (job->n_sequence < 0 || job->n_sequence > NR_WORKER_MAX_SEQUENCE ||
              (job->n_sequence && !job->sequence)))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_worker_run: a sequence of %d engine "
                     "files (at most %d)", job->n_sequence, NR_WORKER_MAX_SEQUENCE);
  for (int k = 0; job && k < job->n_sequence; k++)
    if (!job->sequence[k])
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_worker_run: sequence slot %d "
                       "names no file", k);
  if (!job || (!job->model && !job->engine_in && !job->n_sequence))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "nr_worker_run: the job needs a model or an engine file");
  const nr_pair_set *ps = job->pairs;
  if (ps && ps->n > 0 && (!ps->pairs || ps->n_outputs < 0 ||
                          (size_t)ps->n * (size_t)ps->n_outputs > (1u << 24)))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_worker_run: malformed pair set "
                     "(%d pairs, %d outputs)", ps->n, ps->n_outputs);
  const nr_pair_set *ts = job->timing;
  if (ts && ts->n > 0 && !ts->pairs)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_worker_run: the timing pair set "
                     "has %d pairs and no data", ts->n);
  return NR_OK;
}

/* Forks; in the parent returns the child's pid with the read end in *fd, or -1. */
static pid_t spawn(const nr_worker_job *job, int *fd, nr_error *err) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC)) {
    nr_errorf(err, NR_ERR_RUNTIME, "nr_worker_run: pipe: %s", strerror(errno));
    return -1;
  }
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child_main(job, parent, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    nr_errorf(err, NR_ERR_RUNTIME, "nr_worker_run: fork: %s", strerror(errno));
    close(fds[0]);
    return -1;
  }
  setpgid(pid, pid); /* also here: kill(-pid) must work before the child runs */
  *fd = fds[0];
  return pid;
}

nr_status nr_worker_run(const nr_worker_job *job, nr_worker_result *res, nr_error *err) {
  nr_status st = check_job(job, res, err);
  if (st)
    return st;
  job_plan p = plan_job(job);
  reader r = {NULL, 0, record_size(&p, p.max_times), false};
  if (!(r.buf = malloc(r.cap)))
    return nr_errorf(err, NR_ERR_NOMEM, "nr_worker_run: %zu bytes for the result", r.cap);
  abort_requested = 0;
  double t0 = now_ms();
  int fd = -1, wstatus = 0;
  pid_t pid = spawn(job, &fd, err);
  if (pid < 0) {
    free(r.buf);
    return NR_ERR_RUNTIME;
  }
  current_child = (sig_atomic_t)pid;
  if (abort_requested)
    nr_worker_abort();
  read_record(fd, pid, t0 + p.timeout_ms, &r);
  close(fd);
  if (wait_child(pid, &wstatus) < 0)
    wstatus = 0;
  current_child = 0;
  res->wall_ms = now_ms() - t0;
  classify(&r, &p, wstatus, abort_requested != 0, res);
  free(r.buf);
  return NR_OK;
}

void nr_worker_result_free(nr_worker_result *res) {
  if (!res)
    return;
  free(res->losses);
  free(res->times_ms);
  free(res->seq_runs);
  free(res->knob_use);
  res->losses = NULL;
  res->times_ms = NULL;
  res->seq_runs = NULL;
  res->knob_use = NULL;
  res->n_knob_use = 0;
  res->n_times = 0;
  res->n_seq = 0;
}

void nr_worker_abort(void) {
  pid_t pid = (pid_t)current_child;
  abort_requested = 1;
  if (pid > 0)
    kill_group(pid);
}
