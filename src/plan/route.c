/* route.c - build routes and route expressions: parsing trtexec-style tokens against
 * a knob space, the canonical text, and lookups by the passes.
 *
 * Concrete routes and expressions share one parser: every token resolves to a list of
 * instances (its selector) and, per instance, a bit set of allowed value indices. A
 * concrete route needs exactly one value valid at every selected instance; an
 * expression keeps whatever of its values each instance allows. Parsing works on a
 * copy, so a route or expression is left untouched by a text that fails. This is the
 * one place that turns knob names into knobs; code reads a route by knob id, and every
 * read goes through the lookups at the end, which keep the record of how a build used
 * the route (route.h, knob use). */
#include "plan/knob_internal.h"
#include "plan/route.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokens --------------------------------------------------------------------- */

typedef struct token {
  char *text;         /* the whole token, for messages (owned) */
  const char *name;   /* knob name inside text */
  size_t name_len;
  const char *sel;    /* after '@', or NULL */
  size_t sel_len;
  const char *value;  /* after '=' (NUL-terminated: the token's end) */
} token;

/* Knob names and values never hold '=' (the tables are validated), node names may:
 * the value starts after the last '='. */
static nr_status split_token(token *t, nr_error *err) {
  char *eq = strrchr(t->text, '=');
  if (t->text[0] != '-' || !eq || eq == t->text + 1)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': expected -KNOB=VALUE, "
                     "-KNOB@NODE=VALUE, -KNOB@*=VALUE or -KNOB@OpType=VALUE", t->text);
  t->name = t->text + 1;
  const char *at = memchr(t->name, '@', (size_t)(eq - t->name));
  t->name_len = (size_t)((at ? at : eq) - t->name);
  t->sel = at ? at + 1 : NULL;
  t->sel_len = at ? (size_t)(eq - at - 1) : 0;
  t->value = eq + 1;
  if (!t->name_len || (at && !t->sel_len) || !*t->value)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': empty knob name, "
                     "node or value", t->text);
  return NR_OK;
}

/* Next whitespace-separated token of *p (malloc'ed into t->text); false at the end. */
static bool next_token(const char **p, token *t) {
  const char *s = *p;
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
    s++;
  const char *e = s;
  while (*e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r')
    e++;
  *p = e;
  memset(t, 0, sizeof *t);
  if (e == s)
    return false;
  t->text = strndup(s, (size_t)(e - s));
  return true;
}

/* ---- selectors ------------------------------------------------------------------ */

static bool inst_is(const nr_knob_inst *k, const token *t) {
  return !strncmp(k->id, t->name, t->name_len) &&
         (k->id[t->name_len] == '\0' || k->id[t->name_len] == '@');
}

static bool sel_is(const token *t, const char *s) {
  return s && strlen(s) == t->sel_len && !memcmp(t->sel, s, t->sel_len);
}

/* An op type written as <Conv> is always an op type; a bare word is a node name
 * first and an op type when no node of that name has the knob. */
static bool op_matches(const nr_knob_inst *k, const token *t) {
  if (!k->op_type)
    return false;
  if (t->sel_len > 2 && t->sel[0] == '<' && t->sel[t->sel_len - 1] == '>')
    return strlen(k->op_type) == t->sel_len - 2 &&
           !memcmp(k->op_type, t->sel + 1, t->sel_len - 2);
  return sel_is(t, k->op_type);
}

/* Fills idx with the instances token t selects; returns their count. */
static int select_insts(const nr_knob_space *s, const token *t, int *idx) {
  if (!t->sel || (t->sel_len == 1 && t->sel[0] == '*')) {
    int n = 0;
    for (int i = 0; i < s->n; i++)
      if (inst_is(&s->inst[i], t))
        idx[n++] = i;
    return n;
  }
  char node[1024];
  if (t->sel_len < sizeof node && t->sel[0] != '<') {
    memcpy(node, t->sel, t->sel_len);
    node[t->sel_len] = '\0';
    int i = nr_knob_space_find_parts(s, t->name, t->name_len, node);
    if (i >= 0) {
      idx[0] = i;
      return 1;
    }
  }
  int n = 0;
  for (int i = 0; i < s->n; i++)
    if (inst_is(&s->inst[i], t) && op_matches(&s->inst[i], t))
      idx[n++] = i;
  return n;
}

/* Up to a few instance ids of the token's knob, for messages. */
static void list_instances(const nr_knob_space *s, const token *t, char *buf, size_t cap) {
  size_t used = 0;
  int shown = 0, total = 0;
  buf[0] = '\0';
  for (int i = 0; i < s->n; i++) {
    if (!inst_is(&s->inst[i], t))
      continue;
    if (shown < 4 && used < cap) {
      int w = snprintf(buf + used, cap - used, "%s%s", shown ? ", " : "", s->inst[i].id);
      used += w > 0 ? (size_t)w : 0;
      shown++;
    }
    total++;
  }
  if (total > shown && used < cap)
    snprintf(buf + used, cap - used, ", ... (%d in all)", total);
}

static nr_status unknown_knob(const nr_knob_space *s, const token *t, nr_error *err) {
  char near[256];
  nr_knob_space_suggest(s, t->name, t->name_len, near, sizeof near);
  if (*near)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': unknown knob "
                     "'%.*s'; did you mean: %s? (`nnroute knobs MODEL` lists them)",
                     t->text, (int)t->name_len, t->name, near);
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': unknown knob '%.*s' "
                   "(`nnroute knobs MODEL` lists the knobs of a model)", t->text,
                   (int)t->name_len, t->name);
}

static nr_status no_instance(const nr_knob_def *d, const token *t, nr_error *err) {
  if (d->flags & NR_KNOB_TEST)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': '%s' is a test knob; "
                     "set NNROUTE_TEST_KNOBS=1 to use it", t->text, d->name);
  if (d->scope == NR_KNOB_GLOBAL)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': knob '%s' cannot "
                     "change anything for this graph, so it has no instance here",
                     t->text, d->name);
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': knob '%s' applies to "
                   "no node of this graph", t->text, d->name);
}

/* Resolves the selector of t into idx; *n_out instances, or an error naming t. */
static nr_status resolve(const nr_knob_space *s, const token *t, int *idx, int *n_out,
                         nr_error *err) {
  const nr_knob_def *d = nr_knob_space_def(s, t->name, t->name_len);
  if (!d)
    return unknown_knob(s, t, err);
  if (d->scope == NR_KNOB_GLOBAL && t->sel)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': knob '%s' is global "
                     "and takes no @NODE", t->text, d->name);
  *n_out = select_insts(s, t, idx);
  if (*n_out)
    return NR_OK;
  char some[512];
  list_instances(s, t, some, sizeof some);
  if (!*some && !(nr_knob_devices(d) & NR_KNOB_DEVICE(s->device)))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': knob '%s' does not "
                     "steer %s builds (`nnroute knobs MODEL --device %s` lists theirs)",
                     t->text, d->name, nr_device_name(s->device),
                     nr_device_name(s->device));
  if (!*some)
    return no_instance(d, t, err);
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': '@%.*s' matches no "
                   "node or op type that has knob '%s' (instances: %s)", t->text,
                   (int)t->sel_len, t->sel, d->name, some);
}

/* ---- values --------------------------------------------------------------------- */

static void allowed_text(const nr_knob_inst *k, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int v = 0; v < k->n_values && used < cap; v++) {
    int w = snprintf(buf + used, cap - used, "%s%s", v ? "|" : "", k->values[v]);
    used += w > 0 ? (size_t)w : 0;
  }
}

static nr_status bad_value(const token *t, const nr_knob_inst *k, const char *what,
                           nr_error *err) {
  char allowed[512];
  allowed_text(k, allowed, sizeof allowed);
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': %s at '%s'; "
                   "allowed there: %s", t->text, what, k->id, allowed);
}

/* Table bit set of the value text: one value, [a|b], or * (every value). Values the
 * knob does not have at all are an error, whatever the instance. */
static nr_status table_mask(const token *t, const nr_knob_def *d, bool expr, uint64_t *out,
                            nr_error *err) {
  const char *v = t->value;
  size_t len = strlen(v);
  if (!expr && (v[0] == '[' || !strcmp(v, "*")))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': [a|b] and * are "
                     "only allowed in route expressions; a route pins one value (one of %s)",
                     t->text, d->values);
  if (!strcmp(v, "*")) {
    int n = nr_knob_value_count(d->values);
    *out = n >= 64 ? ~0ull : (1ull << n) - 1;
    return NR_OK;
  }
  bool list = v[0] == '[' && len >= 2 && v[len - 1] == ']';
  if (list) {
    v++;
    len -= 2;
  }
  *out = 0;
  for (size_t i = 0; i <= len;) {
    size_t j = i;
    while (j < len && v[j] != '|')
      j++;
    int vi = -1;
    const char *s;
    size_t sl;
    for (int k = 0; vi < 0 && nr_knob_value_at(d->values, k, &s, &sl); k++)
      if (sl == j - i && !memcmp(s, v + i, sl))
        vi = k;
    if (vi < 0 || (!list && j < len))
      return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route token '%s': '%.*s' is not a "
                       "value of knob '%s' (values: %s)", t->text, (int)(list ? j - i : len),
                       v + i, d->name, d->values);
    *out |= 1ull << vi;
    i = j + 1;
  }
  return NR_OK;
}

/* Instance bit set of a table bit set (instances keep table order, minus invalid). */
static uint64_t inst_mask(const nr_knob_inst *k, uint64_t table) {
  uint64_t m = 0;
  const char *s;
  size_t len;
  for (int i = 0; nr_knob_value_at(k->def->values, i, &s, &len); i++) {
    if (!(table >> i & 1))
      continue;
    for (int v = 0; v < k->n_values; v++)
      if (strlen(k->values[v]) == len && !memcmp(k->values[v], s, len))
        m |= 1ull << v;
  }
  return m;
}

static int lowest_bit(uint64_t m) {
  int i = 0;
  while (!(m >> i & 1))
    i++;
  return i;
}

/* Applies one token to the per-instance masks (an expression) or choices (a route). */
static nr_status apply_token(const nr_knob_space *s, const token *t, int *idx,
                             uint64_t *allowed, int *choice, nr_error *err) {
  int n = 0;
  nr_status st = resolve(s, t, idx, &n, err);
  uint64_t table = 0;
  if (!st)
    st = table_mask(t, s->inst[idx[0]].def, allowed != NULL, &table, err);
  int taken = 0;
  for (int i = 0; !st && i < n; i++) {
    const nr_knob_inst *k = &s->inst[idx[i]];
    uint64_t m = inst_mask(k, table);
    if (!m && !allowed && (table & k->alias)) /* a value that means the default here */
      m = 1ull << k->dflt;
    if (!m && (n == 1 || (i == n - 1 && !taken)))
      return bad_value(t, k, allowed ? "none of these values is valid"
                                     : "this value is not valid", err);
    if (!m) /* a selector of several instances sets those that offer the value */
      continue;
    taken++;
    if (allowed)
      allowed[idx[i]] = m;
    else
      choice[idx[i]] = lowest_bit(m);
  }
  return st;
}

static nr_status apply_text(const nr_knob_space *s, const char *text, uint64_t *allowed,
                            int *choice, nr_error *err) {
  int *idx = malloc(sizeof *idx * (size_t)(s->n ? s->n : 1));
  if (!idx)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory parsing a route");
  nr_status st = NR_OK;
  token t;
  for (const char *p = text ? text : ""; !st && next_token(&p, &t); free(t.text)) {
    if (!t.text)
      st = nr_errorf(err, NR_ERR_NOMEM, "out of memory parsing a route");
    else if (!(st = split_token(&t, err)))
      st = apply_token(s, &t, idx, allowed, choice, err);
  }
  free(idx);
  return st;
}

/* ---- routes --------------------------------------------------------------------- */

static int *alloc_choices(int n) { return malloc(sizeof(int) * (size_t)(n ? n : 1)); }

nr_status nr_route_init(nr_route *r, const nr_knob_space *space, nr_error *err) {
  if (!r || !space)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_route_init: NULL route or space");
  r->space = space;
  r->use = NULL;
  r->choice = alloc_choices(space->n);
  if (!r->choice)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for a route");
  for (int i = 0; i < space->n; i++)
    r->choice[i] = space->inst[i].dflt;
  return NR_OK;
}

void nr_route_free(nr_route *r) {
  if (!r)
    return;
  free(r->choice);
  free(r->use);
  r->choice = NULL;
  r->use = NULL;
}

nr_status nr_route_track(nr_route *r, nr_error *err) {
  if (!r || !r->space)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "nr_route_track: route not initialised");
  free(r->use);
  r->use = calloc((size_t)(r->space->n ? r->space->n : 1), 1);
  return r->use ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory for a route record");
}

nr_status nr_route_copy(nr_route *dst, const nr_route *src, nr_error *err) {
  if (!dst || !src || !src->space)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_route_copy: NULL route");
  int *c = alloc_choices(src->space->n);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory copying a route");
  memcpy(c, src->choice, sizeof *c * (size_t)src->space->n);
  dst->space = src->space;
  dst->choice = c;
  dst->use = NULL; /* a copy is another route: it records its own reads, if asked */
  return NR_OK;
}

nr_status nr_route_parse(nr_route *r, const char *text, nr_error *err) {
  if (!r || !r->space || !r->choice)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "nr_route_parse: route not initialised");
  int n = r->space->n;
  int *c = alloc_choices(n);
  if (!c)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory parsing a route");
  memcpy(c, r->choice, sizeof *c * (size_t)n);
  nr_status st = apply_text(r->space, text, NULL, c, err);
  if (!st)
    memcpy(r->choice, c, sizeof *c * (size_t)n);
  free(c);
  return st;
}

char *nr_route_canonical(const nr_route *r) {
  size_t cap = 1, used = 0;
  for (int i = 0; r && i < r->space->n; i++)
    if (r->choice[i] != r->space->inst[i].dflt)
      cap += strlen(r->space->inst[i].id) + strlen(r->space->inst[i].values[r->choice[i]]) + 3;
  char *s = malloc(cap);
  if (!s)
    return NULL;
  s[0] = '\0';
  for (int i = 0; r && i < r->space->n; i++) {
    const nr_knob_inst *k = &r->space->inst[i];
    if (r->choice[i] != k->dflt)
      used += (size_t)snprintf(s + used, cap - used, "%s-%s=%s", used ? " " : "", k->id,
                               k->values[r->choice[i]]);
  }
  return s;
}

int nr_route_changes(const nr_route *r) {
  int n = 0;
  for (int i = 0; r && i < r->space->n; i++)
    n += r->choice[i] != r->space->inst[i].dflt;
  return n;
}

/* Index of def's instance for node in r's space, or -1. */
static int inst_of(const nr_route *r, const nr_knob_def *def, const nr_node *node) {
  if (!r || !r->space || !r->choice || !def)
    return -1;
  int i = nr_knob_space_find_parts(r->space, def->name, strlen(def->name),
                                   node ? node->name : NULL);
  return i < 0 || r->space->inst[i].def != def ? -1 : i;
}

static void mark(const nr_route *r, int i, unsigned bits) {
  if (r->use)
    r->use[i] |= (uint8_t)bits;
}

static bool at_default(const nr_route *r, int i) {
  return r->choice[i] == r->space->inst[i].dflt;
}

const char *nr_route_peek_def(const nr_route *r, const nr_knob_def *def,
                              const nr_node *node) {
  int i = inst_of(r, def, node);
  if (i < 0)
    return NULL;
  mark(r, i, NR_ROUTE_READ);
  return r->space->inst[i].values[r->choice[i]];
}

void nr_route_mark_effective(const nr_route *r, const nr_knob_def *def,
                             const nr_node *node) {
  int i = inst_of(r, def, node);
  if (i >= 0 && !at_default(r, i))
    mark(r, i, NR_ROUTE_READ | NR_ROUTE_EFFECTIVE);
}

const char *nr_route_get_def(const nr_route *r, const nr_knob_def *def,
                             const nr_node *node) {
  const char *v = nr_route_peek_def(r, def, node);
  if (v)
    nr_route_mark_effective(r, def, node);
  return v;
}

const char *nr_route_get(const nr_route *r, nr_knob_id id, const nr_node *node) {
  return nr_route_get_def(r, nr_knob_def_of(id), node);
}

bool nr_route_is(const nr_route *r, nr_knob_id id, const nr_node *node,
                 const char *value) {
  const nr_knob_def *def = nr_knob_def_of(id);
  int i = inst_of(r, def, node);
  if (i < 0 || !value)
    return false;
  const nr_knob_inst *k = &r->space->inst[i];
  bool is = !strcmp(k->values[r->choice[i]], value);
  mark(r, i,
       NR_ROUTE_READ |
           (is != !strcmp(k->values[k->dflt], value) ? NR_ROUTE_EFFECTIVE : 0));
  return is;
}

unsigned nr_route_use(const nr_route *r, const nr_knob_def *def, const nr_node *node) {
  int i = inst_of(r, def, node);
  return i >= 0 && r->use ? r->use[i] : 0;
}

bool nr_route_ignored(const nr_route *r, int i) {
  return r && r->use && i >= 0 && i < r->space->n && !at_default(r, i) &&
         !(r->use[i] & NR_ROUTE_EFFECTIVE);
}

/* ---- expressions ---------------------------------------------------------------- */

static nr_status expr_alloc(nr_route_expr *e, const nr_knob_space *space, bool all,
                            nr_error *err) {
  if (!e || !space)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "route expression: NULL argument");
  e->space = space;
  e->allowed = malloc(sizeof *e->allowed * (size_t)(space->n ? space->n : 1));
  if (!e->allowed)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory for a route expression");
  for (int i = 0; i < space->n; i++) {
    int nv = space->inst[i].n_values;
    e->allowed[i] = all ? (nv >= 64 ? ~0ull : (1ull << nv) - 1) : 1ull << space->inst[i].dflt;
  }
  return NR_OK;
}

nr_status nr_route_expr_parse(nr_route_expr *e, const nr_knob_space *space,
                              const char *text, nr_error *err) {
  nr_status st = expr_alloc(e, space, false, err);
  if (!st)
    st = apply_text(space, text, e->allowed, NULL, err);
  if (st && e)
    nr_route_expr_free(e);
  return st;
}

nr_status nr_route_expr_all(nr_route_expr *e, const nr_knob_space *space, nr_error *err) {
  return expr_alloc(e, space, true, err);
}

void nr_route_expr_free(nr_route_expr *e) {
  if (!e)
    return;
  free(e->allowed);
  e->allowed = NULL;
}

uint64_t nr_route_expr_count(const nr_route_expr *e) {
  uint64_t total = 1;
  for (int i = 0; e && e->allowed && i < e->space->n; i++) {
    uint64_t c = (uint64_t)__builtin_popcountll(e->allowed[i]);
    if (c && total > UINT64_MAX / c)
      return UINT64_MAX;
    total *= c;
  }
  return total;
}
