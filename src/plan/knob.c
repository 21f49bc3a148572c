/* knob.c - the knob registry: the list of knob tables, their validation and schema
 * hash, the knob space of a graph, and the naming of nodes that per-node knobs use.
 *
 * families.h lists the tables; this file expands it into declarations and one array,
 * the only place that knows them all. A space is built in a fixed order (global knobs
 * in family and table order, then per node in node order its per-node knobs), and
 * keeps an id -> index hash in a hidden header allocated in front of its instance
 * array, so the per-node lookups every pass makes (nr_route_get) stay O(1) on graphs
 * with thousands of instances. */
#include "plan/families.h"
#include "plan/knob_internal.h"
#include "util/error.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NR_DECLARE(f) extern const nr_knob_def nr_knobs_##f[];
NR_KNOB_FAMILIES(NR_DECLARE)
#undef NR_DECLARE

static const nr_knob_def *const real_tables[] = {
#define NR_LIST(f) nr_knobs_##f,
    NR_KNOB_FAMILIES(NR_LIST)
#undef NR_LIST
};
#define N_REAL_TABLES ((int)(sizeof real_tables / sizeof real_tables[0]))

static const nr_knob_def *const cpu_tables[] = {
#define NR_LIST(f) nr_knobs_##f,
    NR_KNOB_CPU_FAMILIES(NR_LIST)
#undef NR_LIST
};

/* ---- devices -------------------------------------------------------------------- */

#define ALL_DEVICES (NR_KNOB_DEVICE(NR_DEVICE_CPU) | NR_KNOB_DEVICE(NR_DEVICE_CUDA))

/* The mask rows of table get when they name none. */
static unsigned table_devices(const nr_knob_def *table) {
  for (size_t i = 0; i < sizeof cpu_tables / sizeof cpu_tables[0]; i++)
    if (cpu_tables[i] == table)
      return NR_KNOB_DEVICE(NR_DEVICE_CPU);
  return ALL_DEVICES;
}

static unsigned row_devices(const nr_knob_def *table, const nr_knob_def *d) {
  return d->devices ? d->devices : table_devices(table);
}

unsigned nr_knob_devices(const nr_knob_def *def) {
  for (int t = 0; def && t < N_REAL_TABLES; t++)
    for (const nr_knob_def *d = real_tables[t]; d->name; d++)
      if (d == def)
        return row_devices(real_tables[t], d);
  return def && def->devices ? def->devices : ALL_DEVICES;
}

/* ---- value lists ---------------------------------------------------------------- */

bool nr_knob_value_at(const char *values, int i, const char **start, size_t *len) {
  const char *p = values;
  for (int k = 0; k < i; k++) {
    p = strchr(p, '|');
    if (!p)
      return false;
    p++;
  }
  const char *end = strchr(p, '|');
  *start = p;
  *len = end ? (size_t)(end - p) : strlen(p);
  return true;
}

int nr_knob_value_count(const char *values) {
  int n = 1;
  for (const char *p = values; *p; p++)
    n += *p == '|';
  return n;
}

/* Entry i of a value_bounds list as a number; false when it is missing or is not
 * one finite number. */
static bool bound_at(const char *list, int i, double *out) {
  const char *s;
  size_t len;
  char buf[32], *end;
  if (!list || !nr_knob_value_at(list, i, &s, &len) || !len || len >= sizeof buf)
    return false;
  snprintf(buf, sizeof buf, "%.*s", (int)len, s);
  *out = strtod(buf, &end);
  return !*end && isfinite(*out);
}

double nr_knob_value_bound(const nr_knob_def *d, int i) {
  double b;
  if (d->value_bounds)
    return bound_at(d->value_bounds, i, &b) ? b : 0;
  const char *s;
  size_t len;
  bool dflt = nr_knob_value_at(d->values, i, &s, &len) && len == strlen(d->dflt) &&
              !memcmp(s, d->dflt, len);
  return dflt ? 0 : d->error_bound;
}

/* Index of value v[0..vlen) in a '|' list, or -1. */
static int value_index(const char *values, const char *v, size_t vlen) {
  const char *s;
  size_t len;
  for (int i = 0; nr_knob_value_at(values, i, &s, &len); i++)
    if (len == vlen && !memcmp(s, v, len))
      return i;
  return -1;
}

/* ---- validation ----------------------------------------------------------------- */

static bool bad_char(char c, const char *extra) {
  return c <= ' ' || c == '=' || strchr(extra, c) != NULL;
}

static bool well_formed(const char *s, size_t len, const char *extra) {
  if (!len)
    return false;
  for (size_t i = 0; i < len; i++)
    if (bad_char(s[i], extra))
      return false;
  return true;
}

static nr_status validate_values(const nr_knob_def *d, nr_error *err) {
  if (!d->values || !*d->values)
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s' has no values", d->name);
  int n = nr_knob_value_count(d->values);
  if (n > NR_KNOB_MAX_VALUES)
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s' has %d values (at most %d)",
                     d->name, n, NR_KNOB_MAX_VALUES);
  const char *s;
  size_t len;
  for (int i = 0; nr_knob_value_at(d->values, i, &s, &len); i++) {
    if (!well_formed(s, len, "|[]*@"))
      return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': value %d of '%s' is empty or "
                       "holds a space or one of =|[]*@", d->name, i, d->values);
    if (value_index(d->values, s, len) != i)
      return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': value '%.*s' is listed twice",
                       d->name, (int)len, s);
  }
  if (!d->dflt || value_index(d->values, d->dflt, strlen(d->dflt)) < 0)
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': default '%s' is not among %s",
                     d->name, d->dflt ? d->dflt : "(null)", d->values);
  return NR_OK;
}

/* value_bounds: on a precision knob only, one number per value, 0 exactly at the
 * default and > 0 at every other value. */
static nr_status validate_bounds(const nr_knob_def *d, nr_error *err) {
  if (!d->value_bounds)
    return NR_OK;
  if (!(d->flags & NR_KNOB_PRECISION))
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': value_bounds belong to precision "
                     "knobs (P); others have one error_bound", d->name);
  int n = nr_knob_value_count(d->values), nb = nr_knob_value_count(d->value_bounds);
  if (nb != n)
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': value_bounds '%s' has %d entries "
                     "for %d values", d->name, d->value_bounds, nb, n);
  int dflt = value_index(d->values, d->dflt, strlen(d->dflt));
  for (int i = 0; i < n; i++) {
    double b;
    if (!bound_at(d->value_bounds, i, &b) || b < 0 || (i == dflt) != (b == 0))
      return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': value_bounds entry %d of '%s' "
                       "is not a bound (a number: 0 for the default, > 0 for the others)",
                       d->name, i, d->value_bounds);
  }
  return NR_OK;
}

static nr_status validate_row(const nr_knob_def *d, nr_error *err) {
  if (!well_formed(d->name, strlen(d->name), "@|[]*"))
    return nr_errorf(err, NR_ERR_INTERNAL, "knob name '%s' is empty or holds a space or "
                     "one of =@|[]*", d->name);
  if (d->scope != NR_KNOB_GLOBAL && d->scope != NR_KNOB_NODE)
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s' has scope %d", d->name, (int)d->scope);
  nr_status st = validate_values(d, err);
  if (st)
    return st;
  bool acc = (d->flags & NR_KNOB_ACCURACY) && !(d->flags & NR_KNOB_PRECISION);
  if ((d->flags & NR_KNOB_PRECISION) && !(d->flags & NR_KNOB_ACCURACY))
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': a precision knob is an accuracy "
                     "knob", d->name);
  if (!isfinite(d->error_bound) || d->error_bound < 0 || acc != (d->error_bound > 0))
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': error_bound %g does not fit its "
                     "flags (accuracy knobs need a bound > 0, others 0)", d->name,
                     d->error_bound);
  return validate_bounds(d, err);
}

static nr_status check_unique(const nr_knob_def *const *tables, int n, int t,
                              const nr_knob_def *d, nr_error *err) {
  for (int u = 0; u <= t; u++)
    for (const nr_knob_def *e = tables[u]; e->name && e != d; e++)
      if (!strcmp(e->name, d->name))
        return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s' is defined twice", d->name);
  return NR_OK;
}

nr_status nr_knob_tables_validate(const nr_knob_def *const *tables, int n, nr_error *err) {
  for (int t = 0; t < n; t++) {
    if (!tables[t])
      return nr_errorf(err, NR_ERR_INTERNAL, "knob table %d is missing", t);
    for (const nr_knob_def *d = tables[t]; d->name; d++) {
      nr_status st = validate_row(d, err);
      if (!st)
        st = check_unique(tables, n, t, d, err);
      if (st)
        return st;
    }
  }
  return NR_OK;
}

/* The real tables are validated once; a failure is re-derived for its message. */
static nr_status validate_real(nr_error *err) {
  static atomic_int state; /* 0 unknown, 1 valid, 2 invalid */
  if (atomic_load(&state) == 1)
    return NR_OK;
  nr_status st = nr_knob_tables_validate(real_tables, N_REAL_TABLES, err);
  atomic_store(&state, st ? 2 : 1);
  return st;
}

/* ---- schema hash ---------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (h ^ 0xffu) * 1099511628211ull; /* field separator */
}

uint64_t nr_knob_hash_tables(const nr_knob_def *const *tables, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int t = 0; t < n; t++) {
    for (const nr_knob_def *d = tables[t]; d && d->name; d++) {
      char num[96];
      snprintf(num, sizeof num, "%d %u %.17g %u", (int)d->scope, d->flags, d->error_bound,
               row_devices(tables[t], d));
      h = fnv(h, d->name);
      h = fnv(h, d->values ? d->values : "");
      h = fnv(h, d->dflt ? d->dflt : "");
      h = fnv(h, num);
      if (d->value_bounds) /* absent adds nothing: tables without any hash as before */
        h = fnv(h, d->value_bounds);
    }
    h = fnv(h, "\n"); /* table separator */
  }
  return h;
}

const char *nr_knob_schema(char buf[17]) {
  snprintf(buf, 17, "%016llx",
           (unsigned long long)nr_knob_hash_tables(real_tables, N_REAL_TABLES));
  return buf;
}

/* ---- registry ------------------------------------------------------------------- */

void nr_knob_foreach(void (*fn)(const nr_knob_def *def, void *user), void *user) {
  for (int t = 0; t < N_REAL_TABLES; t++)
    for (const nr_knob_def *d = real_tables[t]; d->name; d++)
      fn(d, user);
}

static const nr_knob_def *find_def(const nr_knob_def *const *tables, int n,
                                   const char *name, size_t len) {
  for (int t = 0; t < n; t++)
    for (const nr_knob_def *d = tables[t]; d && d->name; d++)
      if (strlen(d->name) == len && !memcmp(d->name, name, len))
        return d;
  return NULL;
}

const nr_knob_def *nr_knob_find(const char *name) {
  return name ? find_def(real_tables, N_REAL_TABLES, name, strlen(name)) : NULL;
}

int nr_knob_restricting(const nr_knob_def **out, int cap) {
  int n = 0;
  for (int t = 0; t < N_REAL_TABLES; t++)
    for (const nr_knob_def *d = real_tables[t]; d->name; d++)
      if (d->restricts != NR_RESTRICTS_NONE && n++ < cap)
        out[n - 1] = d;
  return n;
}

/* ---- ids ------------------------------------------------------------------------ */

_Static_assert(N_REAL_TABLES == NR_KNOB_FAMILY_COUNT, "one knob table per family");

const nr_knob_def *nr_knob_def_of(nr_knob_id id) {
  int t = id >> 8, row = NR_KNOB_ROW(id);
  if (id < 0 || t >= N_REAL_TABLES)
    return NULL;
  for (int i = 0; i < row; i++) /* an id past the table's end has no row */
    if (!real_tables[t][i].name)
      return NULL;
  return real_tables[t][row].name ? &real_tables[t][row] : NULL;
}

nr_knob_id nr_knob_id_of(const nr_knob_def *def) {
  for (int t = 0; def && t < N_REAL_TABLES; t++)
    for (const nr_knob_def *d = real_tables[t]; d->name; d++)
      if (d == def)
        return t << 8 | (int)(d - real_tables[t]);
  return -1;
}

const char *nr_knob_name(nr_knob_id id) {
  const nr_knob_def *d = nr_knob_def_of(id);
  return d ? d->name : "?";
}

bool nr_knob_test_knobs_enabled(void) {
  const char *e = getenv("NNROUTE_TEST_KNOBS");
  return e && !strcmp(e, "1");
}

/* ---- the space and its hidden index --------------------------------------------- */

typedef struct space_box {
  const nr_knob_def *const *tables;
  int n_tables;
  int *slots; /* open addressing: instance index + 1, 0 = empty */
  int cap;    /* power of two */
  int n_alloc;
  nr_knob_inst inst[];
} space_box;

static space_box *box_of(const nr_knob_space *s) {
  return s && s->inst ? (space_box *)((char *)s->inst - offsetof(space_box, inst)) : NULL;
}

/* FNV-1a of "name" or "name@node" without building the string. */
static uint64_t id_hash(const char *name, size_t len, const char *node) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (unsigned char)name[i]) * 1099511628211ull;
  if (!node)
    return h;
  h = (h ^ (unsigned char)'@') * 1099511628211ull;
  for (; *node; node++)
    h = (h ^ (unsigned char)*node) * 1099511628211ull;
  return h;
}

static bool id_equals(const char *id, const char *name, size_t len, const char *node) {
  if (strncmp(id, name, len))
    return false;
  if (!node)
    return id[len] == '\0';
  return id[len] == '@' && !strcmp(id + len + 1, node);
}

int nr_knob_space_find_parts(const nr_knob_space *s, const char *name, size_t len,
                             const char *node) {
  space_box *b = box_of(s);
  if (!b || !b->cap || !name)
    return -1;
  size_t mask = (size_t)b->cap - 1;
  for (size_t h = id_hash(name, len, node) & mask;; h = (h + 1) & mask) {
    int i = b->slots[h] - 1;
    if (i < 0)
      return -1;
    if (id_equals(s->inst[i].id, name, len, node))
      return i;
  }
}

int nr_knob_space_find(const nr_knob_space *s, const char *id) {
  if (!id)
    return -1;
  const char *at = strchr(id, '@');
  return at ? nr_knob_space_find_parts(s, id, (size_t)(at - id), at + 1)
            : nr_knob_space_find_parts(s, id, strlen(id), NULL);
}

int nr_knob_value_index(const nr_knob_inst *k, const char *value) {
  for (int i = 0; k && value && i < k->n_values; i++)
    if (!strcmp(k->values[i], value))
      return i;
  return -1;
}

static nr_status build_index(space_box *b, int n, nr_error *err) {
  int cap = 16;
  while (cap < 2 * n)
    cap *= 2;
  b->slots = calloc((size_t)cap, sizeof *b->slots);
  if (!b->slots)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory indexing %d knob instances", n);
  b->cap = cap;
  for (int i = 0; i < n; i++) {
    const nr_knob_inst *k = &b->inst[i];
    size_t len = k->node ? (size_t)(k->node - 1 - k->id) : strlen(k->id);
    size_t h = id_hash(k->id, len, k->node) & (size_t)(cap - 1);
    while (b->slots[h])
      h = (h + 1) & (size_t)(cap - 1);
    b->slots[h] = i + 1;
  }
  return NR_OK;
}

static void inst_free(nr_knob_inst *k) {
  free(k->id);
  for (int v = 0; v < k->n_values; v++)
    free(k->values[v]);
  memset(k, 0, sizeof *k);
}

void nr_knob_space_free(nr_knob_space *s) {
  space_box *b = box_of(s);
  if (!b)
    return;
  for (int i = 0; i < s->n; i++)
    inst_free(&s->inst[i]);
  free(b->slots);
  free(b);
  s->inst = NULL;
  s->n = 0;
}

/* ---- building ------------------------------------------------------------------- */

typedef struct builder {
  space_box *box;
  int n;
  const nr_graph *g;
  bool test_knobs;
  nr_device device;
} builder;

static nr_status grow(builder *b, nr_error *err) {
  if (b->n < b->box->n_alloc)
    return NR_OK;
  int cap = b->box->n_alloc * 2;
  space_box *nb = realloc(b->box, sizeof *nb + sizeof nb->inst[0] * (size_t)cap);
  if (!nb)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory building the knob space");
  nb->n_alloc = cap;
  b->box = nb;
  return NR_OK;
}

/* id "name" or "name@node", then the op type after the id's NUL: one allocation. */
static nr_status set_id(nr_knob_inst *k, const nr_knob_def *d, const nr_node *n,
                        nr_error *err) {
  size_t ln = strlen(d->name), lnode = n ? strlen(n->name) : 0;
  size_t lop = n ? strlen(n->op_type) : 0;
  k->id = malloc(ln + lnode + lop + 3);
  if (!k->id)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory naming knob '%s'", d->name);
  memcpy(k->id, d->name, ln + 1);
  if (!n)
    return NR_OK;
  k->id[ln] = '@';
  memcpy(k->id + ln + 1, n->name, lnode + 1);
  k->node = k->id + ln + 1;
  k->op_type = k->node + lnode + 1;
  memcpy((char *)k->op_type, n->op_type, lop + 1);
  return NR_OK;
}

static nr_status set_values(nr_knob_inst *k, const nr_knob_def *d, uint64_t mask,
                            nr_error *err) {
  const char *s;
  size_t len;
  k->dflt = -1;
  for (int i = 0; nr_knob_value_at(d->values, i, &s, &len); i++) {
    if (!(mask >> i & 1))
      continue;
    if (!(k->values[k->n_values] = strndup(s, len)))
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing values of '%s'", d->name);
    if (!strcmp(k->values[k->n_values], d->dflt))
      k->dflt = k->n_values;
    k->n_values++;
  }
  if (k->dflt < 0)
    return nr_errorf(err, NR_ERR_INTERNAL, "knob '%s': valid() excludes the default '%s'",
                     k->id, d->dflt);
  return NR_OK;
}

/* Adds the instance of d on node n (NULL: global); one that has a single valid value
 * on a given graph could not change the plan, so it is left out. */
static nr_status add_inst(builder *b, const nr_knob_def *d, const nr_node *n,
                          nr_error *err) {
  uint64_t mask = d->valid && b->g ? d->valid(b->g, n) : ~0ull;
  nr_status st = grow(b, err);
  if (st)
    return st;
  nr_knob_inst *k = &b->box->inst[b->n];
  memset(k, 0, sizeof *k);
  k->def = d;
  st = set_id(k, d, n, err);
  if (!st)
    st = set_values(k, d, mask, err);
  if (st || (b->g && k->n_values < 2)) {
    inst_free(k);
    return st;
  }
  k->alias = d->same_as_dflt && b->g && n ? d->same_as_dflt(b->g, n) & ~mask : 0;
  b->n++;
  return NR_OK;
}

static bool listed(const builder *b, int t, const nr_knob_def *d) {
  if (!(row_devices(b->box->tables[t], d) & NR_KNOB_DEVICE(b->device)))
    return false;
  return !(d->flags & NR_KNOB_TEST) || b->test_knobs;
}

static nr_status add_globals(builder *b, nr_error *err) {
  for (int t = 0; t < b->box->n_tables; t++) {
    for (const nr_knob_def *d = b->box->tables[t]; d->name; d++) {
      if (d->scope != NR_KNOB_GLOBAL || !listed(b, t, d))
        continue;
      if (b->g && d->applies && !d->applies(b->g, NULL))
        continue;
      nr_status st = add_inst(b, d, NULL, err);
      if (st)
        return st;
    }
  }
  return NR_OK;
}

static nr_status add_node_knobs(builder *b, const nr_node *n, nr_error *err) {
  if (!n->name || !*n->name)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "node of type %s has no name; call "
                     "nr_compiler_name_nodes before building the knob space", n->op_type);
  for (int t = 0; t < b->box->n_tables; t++) {
    for (const nr_knob_def *d = b->box->tables[t]; d->name; d++) {
      if (d->scope != NR_KNOB_NODE || !listed(b, t, d))
        continue;
      if (d->applies && !d->applies(b->g, n))
        continue;
      nr_status st = add_inst(b, d, n, err);
      if (st)
        return st;
    }
  }
  return NR_OK;
}

static nr_status fill_space(builder *b, nr_error *err) {
  nr_status st = add_globals(b, err);
  for (int i = 0; !st && b->g && i < b->g->n_nodes; i++)
    st = add_node_knobs(b, &b->g->nodes[i], err);
  if (!st)
    st = build_index(b->box, b->n, err);
  return st;
}

nr_status nr_knob_space_build_tables(const nr_knob_def *const *tables, int n,
                                     const nr_graph *g, bool test_knobs,
                                     nr_knob_space *out, nr_error *err) {
  return nr_knob_space_build_tables_for(tables, n, g, test_knobs, NR_DEVICE_CPU, out,
                                        err);
}

nr_status nr_knob_space_build_tables_for(const nr_knob_def *const *tables, int n,
                                         const nr_graph *g, bool test_knobs,
                                         nr_device device, nr_knob_space *out,
                                         nr_error *err) {
  if (!out)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_knob_space_build: out is NULL");
  memset(out, 0, sizeof *out);
  nr_status st = tables == real_tables ? validate_real(err)
                                       : nr_knob_tables_validate(tables, n, err);
  if (st)
    return st;
  builder b = {calloc(1, sizeof *b.box + sizeof b.box->inst[0] * 16), 0, g, test_knobs,
               device};
  if (!b.box)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory building the knob space");
  b.box->tables = tables;
  b.box->n_tables = n;
  b.box->n_alloc = 16;
  st = fill_space(&b, err);
  out->inst = b.box->inst;
  out->n = b.n;
  out->device = device;
  if (st)
    nr_knob_space_free(out);
  return st;
}

nr_status nr_knob_space_build(const nr_graph *g, nr_knob_space *out, nr_error *err) {
  return nr_knob_space_build_for(g, NR_DEVICE_CPU, out, err);
}

nr_status nr_knob_space_build_for(const nr_graph *g, nr_device d, nr_knob_space *out,
                                  nr_error *err) {
  return nr_knob_space_build_tables_for(real_tables, N_REAL_TABLES, g,
                                        nr_knob_test_knobs_enabled(), d, out, err);
}

const nr_knob_def *nr_knob_space_def(const nr_knob_space *s, const char *name,
                                     size_t len) {
  space_box *b = box_of(s);
  return b ? find_def(b->tables, b->n_tables, name, len) : NULL;
}

/* ---- suggestions ---------------------------------------------------------------- */

/* Levenshtein distance, capped for long names. */
static int distance(const char *a, size_t la, const char *b) {
  size_t lb = strlen(b);
  if (la > 63 || lb > 63)
    return 99;
  int row[64];
  for (size_t j = 0; j <= lb; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

static bool close_name(const char *name, size_t len, const char *cand) {
  const char *dot = memchr(name, '.', len), *cdot = strchr(cand, '.');
  if (dot && cdot && dot - name == cdot - cand && !memcmp(name, cand, (size_t)(dot - name)))
    return true; /* same family */
  int limit = len < 6 ? 1 : (int)len / 4 + 1;
  return distance(name, len, cand) <= limit;
}

void nr_knob_space_suggest(const nr_knob_space *s, const char *name, size_t len,
                           char *buf, size_t cap) {
  space_box *b = box_of(s);
  size_t used = 0;
  int found = 0;
  buf[0] = '\0';
  for (int t = 0; b && t < b->n_tables && found < 6; t++) {
    for (const nr_knob_def *d = b->tables[t]; d->name && found < 6; d++) {
      if ((d->flags & NR_KNOB_TEST) || !close_name(name, len, d->name))
        continue;
      int w = snprintf(buf + used, cap - used, "%s%s", found ? ", " : "", d->name);
      if (w < 0 || (size_t)w >= cap - used)
        return;
      used += (size_t)w;
      found++;
    }
  }
}

/* ---- node naming ---------------------------------------------------------------- */

typedef struct name_set {
  const char **slots;
  size_t cap, n;
} name_set;

static bool set_has(const name_set *s, const char *name) {
  if (!s->cap)
    return false;
  for (size_t h = id_hash(name, strlen(name), NULL) & (s->cap - 1); s->slots[h];
       h = (h + 1) & (s->cap - 1))
    if (!strcmp(s->slots[h], name))
      return true;
  return false;
}

static bool set_put_raw(name_set *s, const char *name) {
  size_t h = id_hash(name, strlen(name), NULL) & (s->cap - 1);
  while (s->slots[h])
    h = (h + 1) & (s->cap - 1);
  s->slots[h] = name;
  s->n++;
  return true;
}

static bool set_add(name_set *s, const char *name) {
  if (2 * (s->n + 1) > s->cap) {
    name_set bigger = {calloc(s->cap ? s->cap * 2 : 64, sizeof(char *)),
                       s->cap ? s->cap * 2 : 64, 0};
    if (!bigger.slots)
      return false;
    for (size_t i = 0; i < s->cap; i++)
      if (s->slots[i])
        set_put_raw(&bigger, s->slots[i]);
    free(s->slots);
    *s = bigger;
  }
  return set_put_raw(s, name);
}

/* base, base_2, base_3, ...: the first not yet taken (malloc'ed). */
static char *unique_name(const name_set *s, const char *base) {
  size_t len = strlen(base) + 24;
  char *name = malloc(len);
  if (!name)
    return NULL;
  snprintf(name, len, "%s", base);
  for (long k = 2; set_has(s, name); k++)
    snprintf(name, len, "%s_%ld", base, k);
  return name;
}

/* Routes split tokens on whitespace, so names keep none. */
static bool has_space(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s <= ' ')
      return true;
  return false;
}

static nr_status rename_node(name_set *s, nr_node *n, int index, nr_error *err) {
  char base[256];
  if (*n->name)
    snprintf(base, sizeof base, "%s", n->name);
  else
    snprintf(base, sizeof base, "%s_%d", n->op_type ? n->op_type : "node", index);
  for (char *c = base; *c; c++)
    if ((unsigned char)*c <= ' ')
      *c = '_';
  char *name = unique_name(s, base);
  if (!name || !set_add(s, name)) {
    free(name);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory naming node %d", index);
  }
  free(n->name);
  n->name = name;
  return NR_OK;
}

static nr_status name_graph(nr_graph *g, name_set *s, nr_error *err);

static nr_status name_subgraphs(nr_graph *g, name_set *s, nr_error *err) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int a = 0; a < g->nodes[i].n_attrs; a++) {
      nr_graph *sub = g->nodes[i].attrs[a].g;
      nr_status st = sub ? name_graph(sub, s, err) : NR_OK;
      if (st)
        return st;
    }
  return NR_OK;
}

/* Explicit names are kept first (the first of duplicates keeps its name), then
 * unnamed and duplicate nodes get fresh names (whitespace becomes '_'), then
 * subgraphs, sharing one set. */
static nr_status name_graph(nr_graph *g, name_set *s, nr_error *err) {
  bool *redo = calloc((size_t)g->n_nodes + 1, sizeof *redo);
  if (!redo)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory naming nodes");
  nr_status st = NR_OK;
  for (int i = 0; i < g->n_nodes && !st; i++) {
    nr_node *n = &g->nodes[i];
    if (!n->name && !(n->name = strdup("")))
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory naming nodes");
    else if (!*n->name || has_space(n->name) || set_has(s, n->name))
      redo[i] = true;
    else if (!set_add(s, n->name))
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory naming nodes");
  }
  for (int i = 0; i < g->n_nodes && !st; i++)
    if (redo[i])
      st = rename_node(s, &g->nodes[i], i, err);
  free(redo);
  return st ? st : name_subgraphs(g, s, err);
}

nr_status nr_compiler_name_nodes(nr_graph *g, nr_error *err) {
  if (!g)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_compiler_name_nodes: graph is NULL");
  name_set s = {0};
  nr_status st = name_graph(g, &s, err);
  free(s.slots);
  return st;
}
