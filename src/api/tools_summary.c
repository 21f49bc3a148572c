/* tools_summary.c - the plan summary of the tools API (nnroute_tools.h): what a plan
 * does, as text, for `check-knobs` to compare two builds by meaning rather than by
 * their bytes.
 *
 * Key decision: the summary describes every step by what its kernel is given (op,
 * attributes, tactic, the parameters it reads, its packed data, thread cap, scratch)
 * and every tensor it touches by its contents and place (dtype, shape, layout, size,
 * arena offset, or a digest of a constant's bytes), and leaves out whatever only
 * names or numbers things: node and tensor names, slot indices, where a constant
 * sits in the weights, alignment padding, the route text. A knob value that changes
 * only those builds the same summary, so check-knobs reports it dead; one that
 * changes a step, a layout, a fused op, the memory plan or a parameter a kernel reads
 * does not. Which params fields a kernel reads is its tactic's describe hook; a
 * tactic without one counts every byte of the record. Knobs a context reads from
 * the engine's route when it is created (cuda.graphs) are listed by value. */
#include "api/nnroute_tools.h"
#include "engine/engine.h"
#include "plan/knob.h"
#include "plan/tactic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct text {
  char *s;
  size_t n, cap;
  bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  for (int pass = 0; !t->oom && pass < 2; pass++) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
    va_end(ap);
    if (w < 0) {
      t->oom = true;
      return;
    }
    if (t->s && t->n + (size_t)w < t->cap) {
      t->n += (size_t)w;
      return;
    }
    size_t cap = (t->cap ? t->cap : 4096) * 2 + (size_t)w;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->oom = true;
      return;
    }
    t->s = s;
    t->cap = cap;
  }
}

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; p && i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

#define FNV0 1469598103934665603ull

static uint64_t fnv_str(uint64_t h, const char *s) {
  return fnv(h, s ? s : "", strlen(s ? s : "") + 1);
}

/* A digest of everything the node's attributes hold (subgraphs by their node list). */
static uint64_t attrs_digest(const nr_node *n) {
  uint64_t h = FNV0;
  for (int a = 0; a < n->n_attrs; a++) {
    const nr_attr *at = &n->attrs[a];
    h = fnv(fnv_str(h, at->name), &at->type, sizeof at->type);
    h = fnv(fnv(h, &at->f, sizeof at->f), &at->i, sizeof at->i);
    h = fnv(h, at->s, at->s ? at->s_len : 0);
    h = fnv(h, at->floats, at->floats ? at->n * sizeof(float) : 0);
    h = fnv(h, at->ints, at->ints ? at->n * sizeof(int64_t) : 0);
    for (size_t i = 0; at->strings && i < at->n; i++)
      h = fnv_str(h, at->strings[i]);
    h = fnv(h, at->t.dims, sizeof(int64_t) * (size_t)at->t.rank);
    h = fnv(h, at->t.data, at->t.data ? nr_value_nbytes(&at->t) : 0);
    for (int k = 0; at->g && k < at->g->n_nodes; k++)
      h = fnv_str(fnv_str(h, at->g->nodes[k].op_type), at->g->nodes[k].domain);
  }
  return h;
}

static void put_dims(text *t, const nr_slot *s) {
  put(t, "[");
  for (int d = 0; d < s->rank; d++)
    put(t, "%s%lld", d ? "x" : "", (long long)s->dims[d]);
  put(t, "]");
}

static void put_slot(text *t, const nr_plan *p, int idx) {
  if (idx < 0) {
    put(t, " -");
    return;
  }
  const nr_slot *s = &p->slots[idx];
  put(t, " %s", nr_dtype_name(s->dtype));
  put_dims(t, s);
  put(t, " %s %llub", nr_layout_name(s->layout), (unsigned long long)s->nbytes);
  switch (s->kind) {
  case NR_SLOT_ARENA:
    put(t, " arena@%llu%s", (unsigned long long)s->offset,
        s->alias_of >= 0 ? " in-place" : "");
    break;
  case NR_SLOT_INPUT: put(t, " input#%llu", (unsigned long long)s->offset); break;
  case NR_SLOT_ABSORBED: put(t, " absorbed"); break;
  case NR_SLOT_CONST:
    put(t, " const:%016llx",
        (unsigned long long)fnv(FNV0, nr_slot_data(p, s), (size_t)s->nbytes));
    break;
  }
}

static void put_params(text *t, const nr_step *st) {
  if (st->tactic->describe) {
    char buf[1024];
    buf[0] = '\0';
    st->tactic->describe(st, buf, sizeof buf);
    put(t, " params{%s}", buf);
    return;
  }
  int last = NR_TACTIC_PARAMS - 1;
  while (last >= 0 && !st->params[last])
    last--;
  put(t, " params=");
  for (int i = 0; i <= last; i++)
    put(t, "%02x", st->params[i]);
}

static void put_step(text *t, const nr_plan *p, int k) {
  const nr_step *st = &p->steps[k];
  const nr_node *n = st->node >= 0 ? &p->graph->nodes[st->node] : NULL;
  put(t, "step %d: ", k);
  if (n)
    put(t, "%s:%s attrs:%016llx ", n->domain, n->op_type,
        (unsigned long long)attrs_digest(n));
  else
    put(t, "(no node) ");
  put(t, "%s %s threads=%d scratch=%llu packed=%llu:%016llx", st->tactic->id,
      nr_precision_name(st->tactic->precision), st->threads,
      (unsigned long long)st->scratch, (unsigned long long)st->packed_size,
      (unsigned long long)fnv(FNV0,
                              st->packed_size ? p->weights + st->packed_offset : NULL,
                              (size_t)st->packed_size));
  put_params(t, st);
  put(t, "\n  in:");
  for (int i = 0; i < st->n_in; i++)
    put_slot(t, p, st->in[i]);
  put(t, "\n  out:");
  for (int o = 0; o < st->n_out; o++)
    put_slot(t, p, st->out[o]);
  put(t, "\n");
}

/* The tokens of the plan's route whose knob is read when a context is created
 * (knob.h, NR_KNOB_RUNTIME): no step shows them, yet the context runs differently. */
static void put_runtime_knobs(text *t, const char *route) {
  put(t, "runtime knobs:");
  for (const char *s = route ? route : ""; *s;) {
    size_t n = strcspn(s, " ");
    char name[128];
    size_t m = strcspn(s, "=@");
    if (s[0] == '-' && m > 1 && m <= n && m - 1 < sizeof name) {
      memcpy(name, s + 1, m - 1);
      name[m - 1] = '\0';
      const nr_knob_def *d = nr_knob_find(name);
      if (d && (d->flags & NR_KNOB_RUNTIME))
        put(t, " %.*s", (int)n, s);
    }
    s += n;
    s += strspn(s, " ");
  }
  put(t, "\n");
}

char *nr_engine_plan_summary(const nr_engine *e) {
  if (!e || !e->plan)
    return NULL;
  const nr_plan *p = e->plan;
  text t = {0};
  put(&t, "device %s, engine threads %d, arena %llu bytes, %d steps\n",
      nr_device_name(p->device), e->threads, (unsigned long long)p->arena_size,
      p->n_steps);
  put_runtime_knobs(&t, p->route);
  for (int k = 0; k < p->n_steps; k++)
    put_step(&t, p, k);
  put(&t, "outputs:");
  for (int o = 0; o < p->n_outputs; o++)
    put_slot(&t, p, p->outputs[o]);
  put(&t, "\n");
  if (t.oom) {
    free(t.s);
    return NULL;
  }
  return t.s;
}
