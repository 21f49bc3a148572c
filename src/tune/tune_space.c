/* tune_space.c - the search space of a session: knob instances turned into the
 * dimensions a search algorithm walks, and points turned back into routes.
 *
 * Default space: every global knob is a dimension, and every per-node knob is ONE
 * dimension whose value is set on every node where that value is valid. A model like
 * resnet50 has ~500 per-node instances; enumerating each would make even the `fast`
 * search hundreds of builds, while the grouped dimension asks the question that
 * matters first ("does winograd pay on this model?"). Per-node choices are searched
 * when the user asks for them in the expression (`-conv.algo@*=*`): there every
 * instance the expression leaves free is its own dimension. Precision knobs are the
 * exception to one-dimension-per-knob: they are grouped per op type
 * ("precision@<Gemm>", "precision@<Conv>"), because a network's layers of one type
 * share a bottleneck and a tolerance story: fp16 weights pay on a memory-bound
 * classifier Gemm (mobilenet_v2's 1280 x 1000: half its bytes) and lose on
 * compute-bound convolutions, so one all-or-nothing dimension would never find the
 * classifier alone.
 *
 * Knobs that act only when a context runs two or more threads (flag C) are no
 * dimension of a session at --threads 1: it measures on one thread, where they change
 * nothing it could see.
 *
 * Which routes build the same plan is decided here too (tune_same_build): a build
 * reports, per knob instance, whether it read it and whether the value acted; two
 * routes that differ only where one's build never read, or read without effect where
 * the other has the default, build the same plan. */
#include "tune/tune_internal.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int popcount64(uint64_t m) { return __builtin_popcountll(m); }

static nr_status add_dim(tune_space *s, const char *name, nr_error *err) {
  tune_dim *d = realloc(s->dims, sizeof *d * (size_t)(s->n_dims + 1));
  if (!d)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for the search space");
  s->dims = d;
  d = &s->dims[s->n_dims++];
  memset(d, 0, sizeof *d);
  d->name = strdup(name);
  d->values = calloc(NR_KNOB_LIST_MAX_VALUES, sizeof *d->values);
  d->insts = malloc(sizeof *d->insts * (size_t)(s->knobs.n ? s->knobs.n : 1));
  if (!d->name || !d->values || !d->insts)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for the search space");
  return NR_OK;
}

static nr_status add_value(tune_dim *d, const char *v, nr_error *err) {
  for (int i = 0; i < d->n_values; i++)
    if (!strcmp(d->values[i], v))
      return NR_OK;
  if (d->n_values >= NR_KNOB_LIST_MAX_VALUES)
    return nr_errorf(err, NR_ERR_INTERNAL, "dimension %s: too many values", d->name);
  d->values[d->n_values] = strdup(v);
  if (!d->values[d->n_values])
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for the search space");
  d->n_values++;
  return NR_OK;
}

/* An expression: each instance with more than one allowed value is a dimension;
 * one allowed value that is not the default pins it in the base route. */
/* A knob a session at one thread cannot see act (NR_KNOB_INFO_THREADS). */
static bool idle_here(const tune_space *s, const nr_knob_info *k) {
  return s->threads == 1 && (k->flags & NR_KNOB_INFO_THREADS);
}

static nr_status dims_from_expr(tune_space *s, const char *expr, nr_error *err) {
  uint64_t *allowed = malloc(sizeof *allowed * (size_t)(s->knobs.n ? s->knobs.n : 1));
  nr_status st = allowed ? nr_knob_list_parse_expr(&s->knobs, expr, allowed, err)
                         : nr_errorf(err, NR_ERR_NOMEM, "out of memory for the search space");
  for (int i = 0; !st && i < s->knobs.n; i++) {
    const nr_knob_info *k = &s->knobs.knobs[i];
    uint64_t m = allowed[i];
    if (popcount64(m) == 1 || idle_here(s, k)) {
      s->base[i] = m >> k->dflt & 1 ? k->dflt : __builtin_ctzll(m);
      continue;
    }
    if (!(st = add_dim(s, k->id, err))) {
      tune_dim *d = &s->dims[s->n_dims - 1];
      d->insts[d->n_insts++] = i;
      for (int v = 0; !st && v < k->n_values; v++)
        if (m >> v & 1) {
          if (v == k->dflt)
            d->dflt = d->n_values;
          st = add_value(d, k->values[v], err);
        }
      s->base[i] = __builtin_ctzll(m);
      if (m >> k->dflt & 1)
        s->base[i] = k->dflt;
    }
  }
  free(allowed);
  return st;
}

static int find_dim(const tune_space *s, const char *name) {
  for (int d = 0; d < s->n_dims; d++)
    if (!strcmp(s->dims[d].name, name))
      return d;
  return -1;
}

/* The default space: globals one by one, per-node knobs grouped by definition (the
 * precision knobs by definition and op type), the group's values in table order (those
 * valid on at least one node of the group). A knob that only
 * matters under another choice (its `needs` route: quant.calibration needs int8
 * nodes) is left out, since alone it would only rebuild the default route; an
 * expression that names it searches it. */
static nr_status dims_default(tune_space *s, nr_error *err) {
  nr_status st = NR_OK;
  for (int i = 0; !st && i < s->knobs.n; i++) {
    const nr_knob_info *k = &s->knobs.knobs[i];
    if (k->needs || idle_here(s, k))
      continue;
    char name[160];
    if (k->node && (k->flags & NR_KNOB_INFO_PRECISION) && k->op_type)
      snprintf(name, sizeof name, "%s@<%s>", k->name, k->op_type);
    else
      snprintf(name, sizeof name, k->node ? "%s@*" : "%s", k->node ? k->name : k->id);
    int d = find_dim(s, name);
    if (d < 0 && !(st = add_dim(s, name, err)))
      d = s->n_dims - 1;
    if (st)
      break;
    s->dims[d].insts[s->dims[d].n_insts++] = i;
  }
  for (int d = 0; !st && d < s->n_dims; d++) {
    tune_dim *dim = &s->dims[d];
    const nr_knob_info *first = &s->knobs.knobs[dim->insts[0]];
    /* An instance's default is its definition's: the default is always valid. */
    const char *dflt = first->values[first->dflt];
    for (int t = 0; !st && t < first->n_def_values; t++) {
      const char *val = first->def_values[t];
      for (int j = 0; j < dim->n_insts; j++)
        if (nr_knob_info_value_index(&s->knobs.knobs[dim->insts[j]], val) >= 0) {
          if (!strcmp(val, dflt))
            dim->dflt = dim->n_values;
          st = add_value(dim, val, err);
          break;
        }
    }
  }
  return st;
}

/* Dimensions with a single value choose nothing; drop them. */
static void drop_fixed(tune_space *s) {
  int n = 0;
  for (int d = 0; d < s->n_dims; d++) {
    if (s->dims[d].n_values > 1) {
      s->dims[n++] = s->dims[d];
      continue;
    }
    for (int v = 0; v < s->dims[d].n_values; v++)
      free(s->dims[d].values[v]);
    free(s->dims[d].values);
    free(s->dims[d].insts);
    free(s->dims[d].name);
  }
  s->n_dims = n;
}

nr_status tune_space_build(nr_model *m, const char *expr, nr_device device, int threads,
                           tune_space *s, nr_error *err) {
  memset(s, 0, sizeof *s);
  s->threads = threads;
  nr_knob_list_options o = {.size = sizeof o, .device = device};
  nr_status st = nr_knob_list_build(m, &o, &s->knobs, err);
  if (!st && !(s->base = malloc(sizeof *s->base * (size_t)(s->knobs.n ? s->knobs.n : 1))))
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory for the search space");
  if (!st)
    st = nr_knob_list_parse_route(&s->knobs, "", s->base, err);
  if (!st)
    st = expr && *expr ? dims_from_expr(s, expr, err) : dims_default(s, err);
  if (!st)
    drop_fixed(s);
  if (st)
    tune_space_free(s);
  return st;
}

void tune_space_free(tune_space *s) {
  for (int d = 0; d < s->n_dims; d++) {
    for (int v = 0; v < s->dims[d].n_values; v++)
      free(s->dims[d].values[v]);
    free(s->dims[d].values);
    free(s->dims[d].insts);
    free(s->dims[d].name);
  }
  free(s->dims);
  free(s->base);
  nr_knob_list_free(&s->knobs);
  memset(s, 0, sizeof *s);
}

void tune_space_choice(const tune_space *s, const int *point, int *choice) {
  memcpy(choice, s->base, sizeof *choice * (size_t)s->knobs.n);
  for (int d = 0; d < s->n_dims; d++) {
    const tune_dim *dim = &s->dims[d];
    const char *val = dim->values[point[d]];
    for (int j = 0; j < dim->n_insts; j++) {
      int v = nr_knob_info_value_index(&s->knobs.knobs[dim->insts[j]], val);
      if (v >= 0)
        choice[dim->insts[j]] = v;
    }
  }
}

char *tune_space_route(const tune_space *s, const int *point) {
  int *choice = malloc(sizeof *choice * (size_t)(s->knobs.n ? s->knobs.n : 1));
  if (!choice)
    return NULL;
  tune_space_choice(s, point, choice);
  char *text = nr_knob_list_route_text(&s->knobs, choice);
  free(choice);
  return text;
}

/* ---- builds that are the same ------------------------------------------------------ */

bool tune_same_build(const nr_knob_list *l, const int *q, const int *r,
                     const uint8_t *use) {
  for (int i = 0; i < l->n; i++) {
    if (!(use[i] & NR_KNOB_USE_READ) || q[i] == r[i])
      continue;
    if ((use[i] & NR_KNOB_USE_EFFECTIVE) || q[i] != l->knobs[i].dflt)
      return false;
  }
  return true;
}

void tune_effective_choice(const nr_knob_list *l, const int *r, const uint8_t *use,
                           int *out) {
  for (int i = 0; i < l->n; i++)
    out[i] = use[i] & NR_KNOB_USE_EFFECTIVE ? r[i] : l->knobs[i].dflt;
}

char *tune_point_text(const int *point, int n) {
  char *s = malloc((size_t)n * 12 + 1);
  if (!s)
    return NULL;
  size_t used = 0;
  s[0] = '\0';
  for (int i = 0; i < n; i++)
    used += (size_t)sprintf(s + used, "%s%d", i ? "," : "", point[i]);
  return s;
}

bool tune_point_parse(const char *text, int *point, int n) {
  const char *p = text ? text : "";
  for (int i = 0; i < n; i++) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > NR_KNOB_LIST_MAX_VALUES || (*end != ',' && i + 1 < n))
      return false;
    point[i] = (int)v;
    p = *end == ',' ? end + 1 : end;
  }
  return *p == '\0';
}

int tune_point_distance(const int *a, const int *b, int n) {
  int k = 0;
  for (int i = 0; i < n; i++)
    k += a[i] != b[i];
  return k;
}

char *tune_space_describe(const tune_space *s, const int *point) {
  size_t cap = 1;
  for (int d = 0; d < s->n_dims; d++)
    if (point[d] != s->dims[d].dflt)
      cap += strlen(s->dims[d].name) + strlen(s->dims[d].values[point[d]]) + 3;
  char *t = malloc(cap);
  if (!t)
    return NULL;
  size_t used = 0;
  t[0] = '\0';
  for (int d = 0; d < s->n_dims; d++)
    if (point[d] != s->dims[d].dflt)
      used += (size_t)snprintf(t + used, cap - used, "%s-%s=%s", used ? " " : "",
                               s->dims[d].name, s->dims[d].values[point[d]]);
  return t;
}
