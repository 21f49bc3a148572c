/* fault.c - the pass fault: test-only fault injection, so the tuner's isolation
 * (worker.h) and its accuracy and timing logic can be tested on real engines that fail
 * on demand: a build error, a crash, a hang, NaN or Inf outputs, running out of
 * memory, a known relative error, a known slowdown, or a NaN only when the first
 * graph input is all zeros (so a test can tell whether a timing ran on real inputs).
 *
 * The knobs are NR_KNOB_TEST rows, so they exist only when NNROUTE_TEST_KNOBS=1 (the
 * knob space leaves them out otherwise, nr_route_get answers NULL, and this pass does
 * nothing). Key decision: faults are steps of the plan, not code paths of the
 * runtime. The pass runs last and appends one step per graph output running the
 * tactic nr_test_fault (node -1, like the layout pass's reorders) that rewrites the
 * output in place; what to do is in the step's params record, so the fault survives
 * engine save and load, and the runtime knows nothing about it. An output that does
 * not live in the arena (a graph input or a constant passed through) is first copied
 * to a new arena slot placed past the planned arena, so the engine's weights and the
 * caller's inputs are never written. Once-per-run faults (delay, crash, hang, oom)
 * sit on the first of these steps only. */
#include "passes/pass_knobs.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef enum fault_kind {
  FAULT_NONE = 0,
  FAULT_BUILD_ERROR,
  FAULT_CRASH,
  FAULT_HANG,
  FAULT_NAN,
  FAULT_INF,
  FAULT_OOM,
  FAULT_RUN_ERROR,
} fault_kind;

/* Indexed by fault_kind; the same order as the knob's values. */
static const char *const fault_names[] = {"none", "build_error", "crash", "hang",
                                          "nan",  "inf",         "oom",   "run_error"};

/* The step's params record (host byte order, as every tactic's record). */
typedef struct fault_params {
  uint32_t kind;     /* fault_kind */
  uint32_t once;     /* 1 on the first fault step: delay and process-wide faults */
  uint32_t delay_ms; /* sleep per inference */
  uint32_t on_zeros; /* 1: NaN in output element 0 when graph input 0 is all zeros */
  double perturb;    /* every float output is multiplied by 1 + perturb */
} fault_params;

_Static_assert(sizeof(fault_params) <= NR_TACTIC_PARAMS, "fault params too large");

#define OOM_CHUNK ((size_t)64 << 20)
#define OOM_CAP ((rlim_t)1 << 40) /* never try to fill more than 1 TiB */

/* ---- run time ------------------------------------------------------------------- */

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* Grabs and touches memory until malloc fails, so the address-space limit (or the
 * kernel's OOM killer) is really reached, then gives it all back. Without a finite
 * limit that would take the machine down, so it only reports. */
static nr_status fault_oom(nr_error *err) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > OOM_CAP)
    return nr_errorf(err, NR_ERR_NOMEM, "test.fault=oom: injected out of memory "
                     "(RLIMIT_AS unlimited or above 1 TiB: nothing allocated)");
  void *head = NULL;
  size_t chunks = 0;
  for (void *p; (p = malloc(OOM_CHUNK)) != NULL; chunks++) {
    memset(p, 0xa5, OOM_CHUNK);
    *(void **)p = head;
    head = p;
  }
  while (head) {
    void *next = *(void **)head;
    free(head);
    head = next;
  }
  return nr_errorf(err, NR_ERR_NOMEM, "test.fault=oom: injected out of memory after "
                   "%zu MiB", chunks * (OOM_CHUNK >> 20));
}

static nr_status once_per_run(const fault_params *fp, nr_error *err) {
  if (fp->delay_ms)
    sleep_ms(fp->delay_ms);
  switch ((fault_kind)fp->kind) {
  case FAULT_CRASH:
    /* A sanitizer's SIGSEGV handler would turn the signal into an exit code; the
     * crash must stay a death by signal. */
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    return nr_errorf(err, NR_ERR_INTERNAL, "test.fault=crash: raise(SIGSEGV) returned");
  case FAULT_HANG:
    for (;;)
      sleep_ms(1000);
  case FAULT_OOM:
    return fault_oom(err);
  case FAULT_RUN_ERROR:
    return nr_errorf(err, NR_ERR_RUNTIME, "test.fault=run_error: injected run failure");
  default:
    return NR_OK;
  }
}

/* The product is taken in double, so the relative error is p up to float rounding
 * (2^-24), even for p = 1e-6, where (float)(1 + p) alone would be 5% off. */
static void alter_f32(float *x, size_t n, const fault_params *fp) {
  for (size_t i = 0; fp->perturb != 0 && i < n; i++)
    x[i] = (float)((double)x[i] * (1.0 + fp->perturb));
  if (n && fp->kind == FAULT_NAN)
    x[0] = NAN;
  if (n && fp->kind == FAULT_INF)
    x[0] = INFINITY;
}

static void alter_f64(double *x, size_t n, const fault_params *fp) {
  for (size_t i = 0; fp->perturb != 0 && i < n; i++)
    x[i] *= 1.0 + fp->perturb;
  if (n && fp->kind == FAULT_NAN)
    x[0] = NAN;
  if (n && fp->kind == FAULT_INF)
    x[0] = INFINITY;
}

static size_t elements(const nr_slot *s) {
  size_t n = 1;
  for (int d = 0; d < s->rank; d++)
    n *= (size_t)s->dims[d];
  return n;
}

static bool all_zero(const void *data, const nr_slot *s) {
  const unsigned char *b = data;
  size_t n = data && s ? elements(s) * nr_dtype_size(s->dtype) : 0;
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return false;
  return data != NULL;
}

static nr_status fault_run(const nr_exec_args *a) {
  fault_params fp;
  memcpy(&fp, a->step->params, sizeof fp);
  if (fp.once) {
    nr_status st = once_per_run(&fp, a->err);
    if (st)
      return st;
  }
  if (a->step->n_out < 1)
    return NR_OK;
  const nr_slot *s = a->out_slot[0];
  if (a->in[0] != a->out[0])
    memcpy(a->out[0], a->in[0], elements(s) * nr_dtype_size(s->dtype));
  if (fp.on_zeros && a->step->n_in > 1 && all_zero(a->in[1], a->in_slot[1]))
    fp.kind = FAULT_NAN;
  if (s->dtype == NR_DTYPE_FLOAT)
    alter_f32(a->out[0], elements(s), &fp);
  else if (s->dtype == NR_DTYPE_DOUBLE)
    alter_f64(a->out[0], elements(s), &fp);
  return NR_OK;
}

/* op_type NULL: selection never offers it for a node; only this pass places it.
 * prepare is NULL because the pass fills the params record itself (it runs after
 * the prepare pass). */
const nr_tactic nr_tactics_fault[] = {
    {"nr_test_fault", "", NULL, "nnroute", "fault", NR_LAYOUT_PLAIN, 0, 0, NULL, NULL,
     fault_run},
    {0},
};

/* ---- build time ----------------------------------------------------------------- */

static nr_status read_knobs(const nr_route *r, fault_params *fp, nr_error *err) {
  const char *kind = r ? nr_route_get(r, NR_KNOB_TEST_FAULT, NULL) : NULL;
  const char *perturb = r ? nr_route_get(r, NR_KNOB_TEST_PERTURB, NULL) : NULL;
  const char *delay = r ? nr_route_get(r, NR_KNOB_TEST_DELAY_MS, NULL) : NULL;
  const char *zeros = r ? nr_route_get(r, NR_KNOB_TEST_ON_ZEROS, NULL) : NULL;
  memset(fp, 0, sizeof *fp);
  for (int k = 0; kind && k < (int)(sizeof fault_names / sizeof *fault_names); k++)
    if (!strcmp(kind, fault_names[k]))
      fp->kind = (uint32_t)k;
  fp->perturb = perturb ? strtod(perturb, NULL) : 0;
  fp->delay_ms = delay ? (uint32_t)strtoul(delay, NULL, 10) : 0;
  fp->on_zeros = zeros && !strcmp(zeros, "nan");
  if (fp->kind == FAULT_BUILD_ERROR)
    return nr_errorf(err, NR_ERR_RUNTIME, "test.fault=build_error: injected build failure");
  return NR_OK;
}

/* A new arena slot past the planned arena holding a copy of slot s; -1 on no memory. */
static int arena_copy(nr_plan *p, int s) {
  int i = nr_plan_add_slot(p);
  if (i < 0)
    return -1;
  nr_slot *d = &p->slots[i], *o = &p->slots[s];
  *d = *o;
  d->name = malloc(strlen(o->name ? o->name : "") + 8); /* never o's: freed per slot */
  if (!d->name)
    return -1;
  sprintf(d->name, "%s.fault", o->name ? o->name : "");
  d->kind = NR_SLOT_ARENA;
  d->layout = NR_LAYOUT_PLAIN;
  d->nbytes = nr_slot_bytes(d, NR_LAYOUT_PLAIN);
  d->offset = (p->arena_size + 63) & ~(uint64_t)63;
  d->alias_of = -1;
  p->arena_size = d->offset + ((d->nbytes + 63) & ~(uint64_t)63);
  return i;
}

static bool seen_before(const nr_plan *p, int i) {
  for (int j = 0; j < i; j++)
    if (p->outputs[j] == p->outputs[i])
      return true;
  return false;
}

/* Appends the fault step for graph output i. */
static nr_status add_fault_step(nr_plan *p, int i, const fault_params *fp, nr_error *err) {
  int src = p->outputs[i], dst = src;
  if (p->slots[src].kind != NR_SLOT_ARENA && (dst = arena_copy(p, src)) < 0)
    return nr_errorf(err, NR_ERR_NOMEM, "fault pass: out of memory");
  nr_step *st = nr_plan_insert_step(p, p->n_steps);
  if (!st)
    return nr_errorf(err, NR_ERR_NOMEM, "fault pass: out of memory");
  st->tactic = &nr_tactics_fault[0];
  st->node = -1;
  st->n_in = st->n_out = 1;
  st->in[0] = src;
  st->out[0] = dst;
  if (fp->once && fp->on_zeros && p->n_inputs > 0) { /* the input the fault looks at */
    st->n_in = 2;
    st->in[1] = p->inputs[0];
  }
  memcpy(st->params, fp, sizeof *fp);
  if (dst != src)
    p->slots[dst].first_use = p->n_steps - 1;
  p->outputs[i] = dst;
  return NR_OK;
}

/* Graph outputs live past the last step (memory.c); keep that true of the new ones. */
static void extend_output_lives(nr_plan *p) {
  for (int i = 0; i < p->n_outputs; i++)
    p->slots[p->outputs[i]].last_use = p->n_steps;
}

static nr_status run_fault(nr_compile_ctx *c) {
  fault_params fp;
  nr_status st = read_knobs(c->route, &fp, c->err);
  if (st || (fp.kind == FAULT_NONE && fp.perturb == 0 && fp.delay_ms == 0 && !fp.on_zeros))
    return st;
  nr_plan *p = c->plan;
  fp.once = 1;
  for (int i = 0; i < p->n_outputs; i++) {
    if (seen_before(p, i))
      continue; /* one tensor listed twice: alter it once */
    if ((st = add_fault_step(p, i, &fp, c->err)))
      return st;
    fp.once = 0;
  }
  if (fp.once) { /* no outputs: still one step for the once-per-run faults */
    nr_step *s = nr_plan_insert_step(p, p->n_steps);
    if (!s)
      return nr_errorf(c->err, NR_ERR_NOMEM, "fault pass: out of memory");
    *s = (nr_step){.tactic = &nr_tactics_fault[0], .node = -1};
    memcpy(s->params, &fp, sizeof fp);
  }
  extend_output_lives(p);
  return NR_OK;
}

const nr_pass nr_pass_fault = {"fault", run_fault};

/* ---- knobs ---------------------------------------------------------------------- */

/* test.delay_ms defaults to 5: with test knobs on, the default route is artificially
 * slow, so tuner tests get a deterministic landscape in which -test.delay_ms=0 is a
 * clear, real winner. */
const nr_knob_def nr_knobs_fault[] = {
    [NR_KNOB_ROW(NR_KNOB_TEST_FAULT)] =
    {"test.fault", "none|build_error|crash|hang|nan|inf|oom|run_error", "none", NR_KNOB_GLOBAL,
     NR_KNOB_TEST, 0,
     "inject a fault: fail the build, or at run time SIGSEGV, hang, NaN/Inf in output "
     "element 0, or exhaust RLIMIT_AS",
     NULL, NULL},
    [NR_KNOB_ROW(NR_KNOB_TEST_PERTURB)] =
    {"test.perturb", "0|1e-6|1e-4|1e-2|1e-1|1", "0", NR_KNOB_GLOBAL,
     NR_KNOB_TEST | NR_KNOB_ACCURACY, 1,
     "multiply every float output by 1 + p (a relative L2 error of exactly p)", NULL,
     NULL},
    [NR_KNOB_ROW(NR_KNOB_TEST_DELAY_MS)] =
    {"test.delay_ms", "0|1|2|5|10|20", "5", NR_KNOB_GLOBAL, NR_KNOB_TEST, 0,
     "sleep this many milliseconds per inference (the default 5 makes 0 the winner)",
     NULL, NULL},
    [NR_KNOB_ROW(NR_KNOB_TEST_ON_ZEROS)] =
    {"test.on_zeros", "none|nan", "none", NR_KNOB_GLOBAL, NR_KNOB_TEST, 0,
     "nan: NaN in output element 0 whenever graph input 0 is all zeros (tells a run on "
     "real inputs from one on zeros)",
     NULL, NULL},
    [NR_KNOB_ROW(NR_KNOB_FAULT_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_fault, NR_KNOB_FAULT_END);
