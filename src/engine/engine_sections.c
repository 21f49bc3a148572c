/* engine_sections.c - the META and PLAN sections of an engine file: writing them,
 * reading them with a bounds-checked cursor, and validating every cross-reference in
 * the plan before anything forms a pointer from it. The layouts are specified at the
 * top of engine_format.c.
 *
 * Key decision: a reader is a cursor that records the first failure (section name and
 * file offset) and turns every later read into a no-op, so parsing code reads like
 * the layout it parses and checks once at the end of each record. */
#include "engine/engine_internal.h"
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  META_VERSION = 1,
  META_KNOB_SCHEMA,
  META_ROUTE,
  META_MODEL_SHA256,
  META_BUILD_MS,
  META_THREADS,
  META_CPU_VENDOR,
  META_CPU_MODEL,
  META_ISA,
  META_CORES,
  META_OPENBLAS,
  META_ONEDNN,
  META_COMPILER,
  META_INPUTS,
  META_OUTPUTS,
  META_REQUIRED = META_OUTPUTS,
  /* optional, written for device engines only (absent: a CPU engine) */
  META_DEVICE = 16,
  META_GPU,
  META_GPU_CC,
  META_GPU_DRIVER,
  META_CUDA_RUNTIME,
  META_CUBLAS,
  META_CUDNN,
};

/* ---- writing ---------------------------------------------------------------------- */

void nr_wbuf_bytes(wbuf *w, const void *data, size_t n) {
  if (w->oom || !n)
    return;
  if (n > w->cap - w->len) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap - w->len < n)
      cap *= 2;
    uint8_t *p = realloc(w->p, cap);
    if (!p) {
      w->oom = true;
      return;
    }
    w->p = p;
    w->cap = cap;
  }
  if (data)
    memcpy(w->p + w->len, data, n);
  else
    memset(w->p + w->len, 0, n);
  w->len += n;
}

void nr_wbuf_u32(wbuf *w, uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  nr_wbuf_bytes(w, b, 4);
}

void nr_wbuf_u64(wbuf *w, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(v >> (8 * i));
  nr_wbuf_bytes(w, b, 8);
}

static void w_i32(wbuf *w, int32_t v) { nr_wbuf_u32(w, (uint32_t)v); }

static void w_str(wbuf *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  nr_wbuf_u32(w, (uint32_t)n);
  nr_wbuf_bytes(w, s, n);
}

static void w_shape(wbuf *w, nr_dtype dtype, int rank, const int64_t *dims) {
  nr_wbuf_u32(w, (uint32_t)dtype);
  w_i32(w, rank);
  for (int d = 0; d < rank && d < NR_MAX_RANK; d++)
    nr_wbuf_u64(w, (uint64_t)dims[d]);
}

/* A META record whose payload is written by the caller right after. */
static size_t meta_open(wbuf *w, uint32_t key) {
  nr_wbuf_u32(w, key);
  nr_wbuf_u32(w, 0);
  return w->len;
}

static void meta_close(wbuf *w, size_t start) {
  if (w->oom)
    return;
  uint32_t n = (uint32_t)(w->len - start);
  for (int i = 0; i < 4; i++)
    w->p[start - 4 + i] = (uint8_t)(n >> (8 * i));
}

static void meta_str(wbuf *w, uint32_t key, const char *s) {
  size_t at = meta_open(w, key);
  nr_wbuf_bytes(w, s, strlen(s));
  meta_close(w, at);
}

static void write_io(wbuf *w, uint32_t key, const nr_plan *p, const int *slots, int n) {
  size_t at = meta_open(w, key);
  nr_wbuf_u32(w, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    const nr_slot *s = &p->slots[slots[i]];
    w_str(w, s->name);
    w_shape(w, s->dtype, s->rank, s->dims);
  }
  meta_close(w, at);
}

void nr_engine_write_meta(wbuf *w, const nr_engine *e) {
  const nr_fingerprint *fp = &e->fingerprint;
  meta_str(w, META_VERSION, e->nnroute_version);
  meta_str(w, META_KNOB_SCHEMA, e->knob_schema);
  meta_str(w, META_ROUTE, e->plan->route ? e->plan->route : "");
  size_t at = meta_open(w, META_MODEL_SHA256);
  nr_wbuf_bytes(w, e->model_sha256, 32);
  meta_close(w, at);
  at = meta_open(w, META_BUILD_MS);
  nr_wbuf_u64(w, e->build_ms);
  meta_close(w, at);
  at = meta_open(w, META_THREADS);
  w_i32(w, e->threads);
  meta_close(w, at);
  meta_str(w, META_CPU_VENDOR, fp->cpu_vendor);
  meta_str(w, META_CPU_MODEL, fp->cpu_model);
  meta_str(w, META_ISA, fp->isa);
  at = meta_open(w, META_CORES);
  w_i32(w, fp->cores);
  meta_close(w, at);
  meta_str(w, META_OPENBLAS, fp->openblas);
  meta_str(w, META_ONEDNN, fp->onednn);
  meta_str(w, META_COMPILER, fp->compiler);
  write_io(w, META_INPUTS, e->plan, e->plan->inputs, e->plan->n_inputs);
  write_io(w, META_OUTPUTS, e->plan, e->plan->outputs, e->plan->n_outputs);
  if (e->plan->device == NR_DEVICE_CPU)
    return;
  meta_str(w, META_DEVICE, nr_device_name(e->plan->device));
  meta_str(w, META_GPU, fp->gpu);
  meta_str(w, META_GPU_CC, fp->gpu_cc);
  meta_str(w, META_GPU_DRIVER, fp->gpu_driver);
  meta_str(w, META_CUDA_RUNTIME, fp->cuda_runtime);
  meta_str(w, META_CUBLAS, fp->cublas);
  meta_str(w, META_CUDNN, fp->cudnn);
}

void nr_engine_write_plan(wbuf *w, const nr_plan *p) {
  nr_wbuf_u32(w, (uint32_t)p->n_slots);
  nr_wbuf_u32(w, (uint32_t)p->n_steps);
  nr_wbuf_u32(w, (uint32_t)p->n_inputs);
  nr_wbuf_u32(w, (uint32_t)p->n_outputs);
  nr_wbuf_u32(w, (uint32_t)p->graph->n_nodes);
  nr_wbuf_u32(w, (uint32_t)p->graph->n_tensors);
  nr_wbuf_u64(w, p->arena_size);
  nr_wbuf_u64(w, p->scratch_size);
  nr_wbuf_u64(w, p->weights_size);
  for (int i = 0; i < p->n_slots; i++) {
    const nr_slot *s = &p->slots[i];
    w_str(w, s->name);
    w_shape(w, s->dtype, s->rank, s->dims);
    nr_wbuf_u32(w, (uint32_t)s->layout);
    nr_wbuf_u32(w, (uint32_t)s->kind);
    nr_wbuf_u64(w, s->nbytes);
    nr_wbuf_u64(w, s->offset);
    w_i32(w, s->first_use);
    w_i32(w, s->last_use);
    w_i32(w, s->alias_of);
  }
  for (int i = 0; i < p->n_steps; i++) {
    const nr_step *st = &p->steps[i];
    w_str(w, st->tactic ? st->tactic->id : "");
    w_i32(w, st->node);
    nr_wbuf_u32(w, (uint32_t)st->n_in);
    nr_wbuf_u32(w, (uint32_t)st->n_out);
    for (int k = 0; k < st->n_in; k++)
      w_i32(w, st->in[k]);
    for (int k = 0; k < st->n_out; k++)
      w_i32(w, st->out[k]);
    nr_wbuf_u64(w, st->packed_offset);
    nr_wbuf_u64(w, st->packed_size);
    nr_wbuf_u64(w, st->scratch);
    w_i32(w, st->threads);
    nr_wbuf_bytes(w, st->params, NR_TACTIC_PARAMS);
  }
  for (int i = 0; i < p->n_inputs; i++)
    w_i32(w, p->inputs[i]);
  for (int i = 0; i < p->n_outputs; i++)
    w_i32(w, p->outputs[i]);
}

/* ---- reading ---------------------------------------------------------------------- */

nr_status nr_rbuf_fail(rbuf *r, const char *fmt, ...) {
  if (r->st)
    return r->st;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return r->st = nr_errorf(r->err, NR_ERR_INVALID_MODEL,
                           "engine: %s section (file offset %llu): %s", r->section,
                           (unsigned long long)(r->base + r->pos), msg);
}

static bool r_need(rbuf *r, size_t n) {
  if (r->st)
    return false;
  if (n > r->len - r->pos) {
    nr_rbuf_fail(r, "truncated: %zu bytes needed, %zu left", n, r->len - r->pos);
    return false;
  }
  return true;
}

static uint32_t r_u32(rbuf *r) {
  if (!r_need(r, 4))
    return 0;
  r->pos += 4;
  return nr_le32(r->p + r->pos - 4);
}

static uint64_t r_u64(rbuf *r) {
  if (!r_need(r, 8))
    return 0;
  r->pos += 8;
  return nr_le64(r->p + r->pos - 8);
}

static int32_t r_i32(rbuf *r) { return (int32_t)r_u32(r); }

/* A string of at most cap-1 bytes without NULs, copied into buf. */
static void r_str_into(rbuf *r, size_t n, char *buf, size_t cap, const char *what) {
  if (n >= cap) {
    nr_rbuf_fail(r, "%s is %zu bytes long (at most %zu)", what, n, cap - 1);
    return;
  }
  if (!r_need(r, n))
    return;
  if (memchr(r->p + r->pos, 0, n)) {
    nr_rbuf_fail(r, "%s contains a NUL byte", what);
    return;
  }
  memcpy(buf, r->p + r->pos, n);
  buf[n] = '\0';
  r->pos += n;
}

/* A length-prefixed string, malloc'ed; NULL on failure. */
static char *r_str(rbuf *r, const char *what) {
  uint32_t n = r_u32(r);
  if (!r_need(r, n))
    return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s) {
    r->st = nr_errorf(r->err, NR_ERR_NOMEM, "out of memory reading the engine");
    return NULL;
  }
  r_str_into(r, n, s, (size_t)n + 1, what);
  if (r->st) {
    free(s);
    return NULL;
  }
  return s;
}

/* dtype, rank and dims; dims must be known (>= 0). */
static void r_shape(rbuf *r, nr_dtype *dtype, int *rank, int64_t *dims, const char *what) {
  uint32_t dt = r_u32(r);
  int32_t rk = r_i32(r);
  if (r->st)
    return;
  if (dt > NR_DTYPE_BFLOAT16 || !nr_dtype_size((nr_dtype)dt)) {
    nr_rbuf_fail(r, "%s has dtype %u, which nnroute cannot hold", what, dt);
    return;
  }
  if (rk < 0 || rk > NR_MAX_RANK) {
    nr_rbuf_fail(r, "%s has rank %d", what, rk);
    return;
  }
  *dtype = (nr_dtype)dt;
  *rank = rk;
  memset(dims, 0, sizeof(int64_t) * NR_MAX_RANK);
  for (int d = 0; d < rk; d++) {
    int64_t v = (int64_t)r_u64(r);
    if (!r->st && v < 0) {
      nr_rbuf_fail(r, "%s has negative dim %lld", what, (long long)v);
      return;
    }
    dims[d] = v;
  }
}

/* ---- META ------------------------------------------------------------------------- */

void nr_engine_meta_free(meta *m) {
  free(m->route);
  for (int k = 0; k < 2; k++) {
    for (uint32_t i = 0; m->io[k] && i < m->n_io[k]; i++)
      free(m->io[k][i].name);
    free(m->io[k]);
  }
}

static void read_io_list(rbuf *r, meta *m, int k) {
  uint32_t n = r_u32(r);
  /* each entry needs at least 12 bytes: refuse counts the payload cannot hold */
  if (r->st || n > (r->len - r->pos) / 12) {
    nr_rbuf_fail(r, "%s count %u does not fit the record", k ? "output" : "input", n);
    return;
  }
  if (!(m->io[k] = calloc(n ? n : 1, sizeof *m->io[k]))) {
    r->st = nr_errorf(r->err, NR_ERR_NOMEM, "out of memory reading the engine");
    return;
  }
  m->n_io[k] = n;
  for (uint32_t i = 0; i < n && !r->st; i++) {
    meta_io *io = &m->io[k][i];
    io->name = r_str(r, "a tensor name");
    r_shape(r, &io->dtype, &io->rank, io->dims, k ? "an output" : "an input");
  }
}

/* META_DEVICE: "cuda"; a device this nnroute does not know is refused. */
static void read_device(rbuf *r, size_t n, nr_fingerprint *fp) {
  char name[16];
  r_str_into(r, n, name, sizeof name, "the device");
  if (!r->st && (!nr_device_parse(name, &fp->device) || fp->device == NR_DEVICE_CPU))
    nr_rbuf_fail(r, "unknown device '%s'", name);
}

static void read_meta_value(rbuf *r, uint32_t key, nr_engine *e, meta *m) {
  nr_fingerprint *fp = &e->fingerprint;
  size_t n = r->len - r->pos;
  switch (key) {
  case META_VERSION: r_str_into(r, n, e->nnroute_version, sizeof e->nnroute_version,
                                "the nnroute version"); break;
  case META_KNOB_SCHEMA: r_str_into(r, n, e->knob_schema, sizeof e->knob_schema,
                                    "the knob schema"); break;
  case META_ROUTE:
    if (!(m->route = malloc(n + 1)))
      r->st = nr_errorf(r->err, NR_ERR_NOMEM, "out of memory reading the engine");
    else
      r_str_into(r, n, m->route, n + 1, "the route");
    break;
  case META_MODEL_SHA256:
    if (n != 32) {
      nr_rbuf_fail(r, "the model SHA-256 is %zu bytes, not 32", n);
      break;
    }
    memcpy(e->model_sha256, r->p + r->pos, 32);
    r->pos += 32;
    break;
  case META_BUILD_MS: e->build_ms = r_u64(r); break;
  case META_THREADS: e->threads = r_i32(r); break;
  case META_CPU_VENDOR: r_str_into(r, n, fp->cpu_vendor, sizeof fp->cpu_vendor,
                                   "the cpu vendor"); break;
  case META_CPU_MODEL: r_str_into(r, n, fp->cpu_model, sizeof fp->cpu_model,
                                  "the cpu model"); break;
  case META_ISA: r_str_into(r, n, fp->isa, sizeof fp->isa, "the isa flags"); break;
  case META_CORES: fp->cores = r_i32(r); break;
  case META_OPENBLAS: r_str_into(r, n, fp->openblas, sizeof fp->openblas,
                                 "the OpenBLAS version"); break;
  case META_ONEDNN: r_str_into(r, n, fp->onednn, sizeof fp->onednn,
                               "the oneDNN version"); break;
  case META_COMPILER: r_str_into(r, n, fp->compiler, sizeof fp->compiler,
                                 "the compiler"); break;
  case META_INPUTS: read_io_list(r, m, 0); break;
  case META_OUTPUTS: read_io_list(r, m, 1); break;
  case META_DEVICE: read_device(r, n, fp); break;
  case META_GPU: r_str_into(r, n, fp->gpu, sizeof fp->gpu, "the GPU name"); break;
  case META_GPU_CC: r_str_into(r, n, fp->gpu_cc, sizeof fp->gpu_cc,
                               "the compute capability"); break;
  case META_GPU_DRIVER: r_str_into(r, n, fp->gpu_driver, sizeof fp->gpu_driver,
                                   "the GPU driver version"); break;
  case META_CUDA_RUNTIME: r_str_into(r, n, fp->cuda_runtime, sizeof fp->cuda_runtime,
                                     "the CUDA runtime version"); break;
  case META_CUBLAS: r_str_into(r, n, fp->cublas, sizeof fp->cublas,
                               "the cuBLAS version"); break;
  case META_CUDNN: r_str_into(r, n, fp->cudnn, sizeof fp->cudnn,
                              "the cuDNN version"); break;
  default: r->pos = r->len; break; /* a later minor addition: skipped */
  }
  if (!r->st && r->pos != r->len)
    nr_rbuf_fail(r, "record %u has %zu unread bytes", key, r->len - r->pos);
}

nr_status nr_engine_read_meta(rbuf *r, nr_engine *e, meta *m) {
  uint32_t last = 0, seen = 0;
  while (!r->st && r->pos < r->len) {
    uint32_t key = r_u32(r), n = r_u32(r);
    if (r->st)
      break;
    if (key <= last)
      return nr_rbuf_fail(r, "record key %u is not above the previous key %u", key, last);
    if (!r_need(r, n))
      break;
    rbuf sub = {r->p + r->pos, n, 0, r->base + r->pos, r->section, r->err, NR_OK};
    read_meta_value(&sub, key, e, m);
    if (sub.st)
      return r->st = sub.st;
    r->pos += n;
    last = key;
    if (key <= META_REQUIRED)
      seen++;
  }
  if (!r->st && seen != META_REQUIRED)
    nr_rbuf_fail(r, "%u of the %d required records are present", seen, META_REQUIRED);
  return r->st;
}

/* ---- PLAN ------------------------------------------------------------------------- */

static void read_slot(rbuf *r, nr_slot *s, int i) {
  char what[64];
  snprintf(what, sizeof what, "slot %d", i);
  s->name = r_str(r, "a slot name");
  r_shape(r, &s->dtype, &s->rank, s->dims, what);
  uint32_t layout = r_u32(r), kind = r_u32(r);
  s->nbytes = r_u64(r);
  s->offset = r_u64(r);
  s->first_use = r_i32(r);
  s->last_use = r_i32(r);
  s->alias_of = r_i32(r);
  if (!r->st && layout > NR_LAYOUT_NCHW8C)
    nr_rbuf_fail(r, "slot %d has layout %u", i, layout);
  if (!r->st && kind > NR_SLOT_ABSORBED)
    nr_rbuf_fail(r, "slot %d has kind %u", i, kind);
  s->layout = (nr_layout)layout;
  s->kind = (nr_slot_kind)kind;
}

static void read_step(rbuf *r, nr_step *st, int i) {
  char id[256];
  uint32_t n = r_u32(r);
  r_str_into(r, n, id, sizeof id, "a tactic id");
  st->node = r_i32(r);
  uint32_t n_in = r_u32(r), n_out = r_u32(r);
  if (r->st)
    return;
  if (n_in > NR_STEP_MAX_IO || n_out > NR_STEP_MAX_IO) {
    nr_rbuf_fail(r, "step %d has %u inputs and %u outputs (at most %d each)", i, n_in, n_out,
           NR_STEP_MAX_IO);
    return;
  }
  if (!(st->tactic = nr_tactic_find(id))) {
    nr_rbuf_fail(r, "step %d uses tactic '%s', which this nnroute does not have; rebuild the "
           "engine", i, id);
    return;
  }
  st->n_in = (int)n_in;
  st->n_out = (int)n_out;
  for (uint32_t k = 0; k < n_in; k++)
    st->in[k] = r_i32(r);
  for (uint32_t k = 0; k < n_out; k++)
    st->out[k] = r_i32(r);
  st->packed_offset = r_u64(r);
  st->packed_size = r_u64(r);
  st->scratch = r_u64(r);
  st->threads = r_i32(r);
  if (r_need(r, NR_TACTIC_PARAMS)) {
    memcpy(st->params, r->p + r->pos, NR_TACTIC_PARAMS);
    r->pos += NR_TACTIC_PARAMS;
  }
}

/* Minimum encoded sizes, to refuse counts the section cannot hold before allocating. */
#define SLOT_MIN_BYTES 60u
#define STEP_MIN_BYTES 104u

void nr_engine_read_plan(rbuf *r, nr_plan *p, plan_counts *c, uint64_t *weights_size) {
  uint32_t n_slots = r_u32(r), n_steps = r_u32(r), n_in = r_u32(r), n_out = r_u32(r);
  c->n_nodes = r_u32(r);
  c->n_tensors = r_u32(r);
  p->arena_size = r_u64(r);
  p->scratch_size = r_u64(r);
  *weights_size = r_u64(r);
  if (r->st)
    return;
  uint64_t left = r->len - r->pos;
  if (n_slots > left / SLOT_MIN_BYTES || n_steps > left / STEP_MIN_BYTES ||
      n_in > left / 4 || n_out > left / 4) {
    nr_rbuf_fail(r, "counts (%u slots, %u steps, %u inputs, %u outputs) do not fit the section",
           n_slots, n_steps, n_in, n_out);
    return;
  }
  p->slots = calloc(n_slots ? n_slots : 1, sizeof *p->slots);
  p->steps = calloc(n_steps ? n_steps : 1, sizeof *p->steps);
  p->inputs = calloc(n_in ? n_in : 1, sizeof *p->inputs);
  p->outputs = calloc(n_out ? n_out : 1, sizeof *p->outputs);
  if (!p->slots || !p->steps || !p->inputs || !p->outputs) {
    r->st = nr_errorf(r->err, NR_ERR_NOMEM, "out of memory reading the engine");
    return;
  }
  for (uint32_t i = 0; i < n_slots && !r->st; i++, p->n_slots++)
    read_slot(r, &p->slots[i], (int)i);
  for (uint32_t i = 0; i < n_steps && !r->st; i++, p->n_steps++)
    read_step(r, &p->steps[i], (int)i);
  for (uint32_t i = 0; i < n_in && !r->st; i++, p->n_inputs++)
    p->inputs[i] = r_i32(r);
  for (uint32_t i = 0; i < n_out && !r->st; i++, p->n_outputs++)
    p->outputs[i] = r_i32(r);
  if (!r->st && r->pos != r->len)
    nr_rbuf_fail(r, "%zu bytes follow the plan", r->len - r->pos);
}

/* Logical bytes of a slot, or UINT64_MAX when they overflow. */
static uint64_t logical_bytes(const nr_slot *s) {
  uint64_t n = nr_dtype_size(s->dtype);
  for (int d = 0; d < s->rank; d++) {
    uint64_t dim = (uint64_t)s->dims[d];
    if (dim && n > (UINT64_MAX >> 2) / dim)
      return UINT64_MAX;
    n *= dim;
  }
  return n;
}

static nr_status check_slot(rbuf *r, const nr_plan *p, int i) {
  const nr_slot *s = &p->slots[i];
  uint64_t need = logical_bytes(s);
  if (need != UINT64_MAX && s->layout != NR_LAYOUT_PLAIN)
    need = nr_slot_bytes(s, s->layout); /* NCHW8c pads channels */
  if (need == UINT64_MAX || s->nbytes < need)
    return nr_rbuf_fail(r, "slot %d '%.200s' has %llu bytes, less than its shape needs", i,
                  s->name, (unsigned long long)s->nbytes);
  if (s->kind == NR_SLOT_ARENA && !nr_inside(s->offset, s->nbytes, p->arena_size))
    return nr_rbuf_fail(r, "slot %d '%.200s' (arena offset %llu, %llu bytes) lies outside the "
                  "arena (%llu bytes)", i, s->name, (unsigned long long)s->offset,
                  (unsigned long long)s->nbytes, (unsigned long long)p->arena_size);
  size_t el = nr_dtype_size(s->dtype);
  if ((s->kind == NR_SLOT_ARENA || s->kind == NR_SLOT_CONST) && el > 1 && s->offset % el)
    return nr_rbuf_fail(r, "slot %d '%.200s' (offset %llu) is not aligned to its %zu-byte "
                  "elements", i, s->name, (unsigned long long)s->offset, el);
  if (s->kind == NR_SLOT_CONST && !nr_inside(s->offset, s->nbytes, p->weights_size))
    return nr_rbuf_fail(r, "slot %d '%.200s' (weights offset %llu, %llu bytes) lies outside "
                  "WEIGHTS (%llu bytes)", i, s->name, (unsigned long long)s->offset,
                  (unsigned long long)s->nbytes, (unsigned long long)p->weights_size);
  if (s->kind == NR_SLOT_INPUT && s->offset >= (uint64_t)p->n_inputs)
    return nr_rbuf_fail(r, "slot %d '%.200s' names input %llu of %d", i, s->name,
                  (unsigned long long)s->offset, p->n_inputs);
  if (s->kind == NR_SLOT_ABSORBED && (s->offset || s->layout != NR_LAYOUT_PLAIN))
    return nr_rbuf_fail(r, "slot %d '%.200s' is an absorbed constant with offset %llu and "
                  "layout %d (must be 0 and plain)", i, s->name,
                  (unsigned long long)s->offset, (int)s->layout);
  if (s->alias_of < -1 || s->alias_of >= p->n_slots || s->alias_of == i)
    return nr_rbuf_fail(r, "slot %d has alias %d", i, s->alias_of);
  if (s->first_use < -1 || s->first_use > p->n_steps || s->last_use < -1 ||
      s->last_use > p->n_steps)
    return nr_rbuf_fail(r, "slot %d has uses %d..%d outside the %d steps", i, s->first_use,
                  s->last_use, p->n_steps);
  return NR_OK;
}

static nr_status check_step(rbuf *r, const nr_plan *p, const plan_counts *c, int i) {
  const nr_step *st = &p->steps[i];
  if (st->node < -1 || st->node >= (int64_t)c->n_nodes)
    return nr_rbuf_fail(r, "step %d (%s) names node %d; the graph has %u", i, st->tactic->id,
                  st->node, c->n_nodes);
  for (int k = 0; k < st->n_in + st->n_out; k++) {
    int s = k < st->n_in ? st->in[k] : st->out[k - st->n_in];
    if (s < -1 || s >= p->n_slots)
      return nr_rbuf_fail(r, "step %d (%s) names slot %d; the plan has %d", i, st->tactic->id, s,
                    p->n_slots);
    nr_slot_kind kind = s >= 0 ? p->slots[s].kind : NR_SLOT_ARENA;
    if (k >= st->n_in && (kind == NR_SLOT_CONST || kind == NR_SLOT_ABSORBED))
      return nr_rbuf_fail(r, "step %d (%s) writes constant slot %d", i, st->tactic->id, s);
    if (k >= st->n_in && kind == NR_SLOT_INPUT)
      return nr_rbuf_fail(r, "step %d (%s) writes graph input slot %d", i, st->tactic->id,
                          s);
    /* An absorbed constant has no bytes: only a step with packed data can read it. */
    if (kind == NR_SLOT_ABSORBED && !st->packed_size)
      return nr_rbuf_fail(r, "step %d (%s) reads absorbed constant slot %d but has no packed "
                    "data", i, st->tactic->id, s);
  }
  if (st->packed_size && !nr_inside(st->packed_offset, st->packed_size, p->weights_size))
    return nr_rbuf_fail(r, "step %d (%s) has packed data (offset %llu, %llu bytes) outside "
                  "WEIGHTS (%llu bytes)", i, st->tactic->id,
                  (unsigned long long)st->packed_offset,
                  (unsigned long long)st->packed_size, (unsigned long long)p->weights_size);
  if (st->packed_size && st->packed_offset % 64)
    return nr_rbuf_fail(r, "step %d (%s) has packed data at offset %llu, not 64-byte aligned "
                  "as the compiler places it", i, st->tactic->id,
                  (unsigned long long)st->packed_offset);
  if (st->scratch > p->scratch_size || st->threads < 0)
    return nr_rbuf_fail(r, "step %d (%s) has scratch %llu over the plan's %llu or threads %d", i,
                  st->tactic->id, (unsigned long long)st->scratch,
                  (unsigned long long)p->scratch_size, st->threads);
  return NR_OK;
}

nr_status nr_engine_check_plan(rbuf *r, const nr_plan *p, const plan_counts *c) {
  r->pos = 0; /* cross-checks report the section start */
  for (int i = 0; i < p->n_slots && !r->st; i++)
    check_slot(r, p, i);
  for (int i = 0; i < p->n_steps && !r->st; i++)
    check_step(r, p, c, i);
  for (int i = 0; i < p->n_inputs + p->n_outputs && !r->st; i++) {
    bool in = i < p->n_inputs;
    int s = in ? p->inputs[i] : p->outputs[i - p->n_inputs];
    if (s < 0 || s >= p->n_slots)
      nr_rbuf_fail(r, "graph %s %d names slot %d; the plan has %d", in ? "input" : "output",
             in ? i : i - p->n_inputs, s, p->n_slots);
    else if (in && (p->slots[s].kind != NR_SLOT_INPUT || p->slots[s].offset != (uint64_t)i))
      nr_rbuf_fail(r, "graph input %d names slot %d, which is not input slot %d", i, s, i);
  }
  return r->st;
}

nr_status nr_engine_check_io(rbuf *r, const nr_plan *p, const meta *m) {
  for (int k = 0; k < 2; k++) {
    const int *slots = k ? p->outputs : p->inputs;
    int n = k ? p->n_outputs : p->n_inputs;
    if (m->n_io[k] != (uint32_t)n)
      return nr_rbuf_fail(r, "META lists %u %s, the plan %d", m->n_io[k], k ? "outputs" : "inputs",
                    n);
    for (int i = 0; i < n; i++) {
      const nr_slot *s = &p->slots[slots[i]];
      const meta_io *io = &m->io[k][i];
      if (strcmp(io->name, s->name ? s->name : "") || io->dtype != s->dtype ||
          io->rank != s->rank || memcmp(io->dims, s->dims, sizeof io->dims[0] * s->rank))
        return nr_rbuf_fail(r, "META %s %d ('%.200s') disagrees with its slot",
                      k ? "output" : "input", i, io->name);
    }
  }
  return NR_OK;
}

