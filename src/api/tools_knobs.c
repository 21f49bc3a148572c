/* tools_knobs.c - knob lists of the tools API (nnroute_tools.h): the knob space of a
 * model, or the knob definitions, as plain rows, and routes over them as choice
 * vectors.
 *
 * Key decision: a list keeps the knob space it was made from (its impl), and a choice
 * vector is exactly an nr_route's choice array, so parsing, expressions and canonical
 * text are the route parser's own (plan/route.c) with no second copy of the syntax. */
#include "api/nnroute_tools.h"
#include "plan/compile_knobs.h"
#include "plan/route.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tools flags are the tables' own bits: rows are copied, not translated. */
#define SAME(a, b) ((unsigned)(a) == (unsigned)(b))
_Static_assert(SAME(NR_KNOB_INFO_ACCURACY, NR_KNOB_ACCURACY) &&
                   SAME(NR_KNOB_INFO_LAYOUT, NR_KNOB_LAYOUT) &&
                   SAME(NR_KNOB_INFO_MEMORY, NR_KNOB_MEMORY) &&
                   SAME(NR_KNOB_INFO_TEST, NR_KNOB_TEST) &&
                   SAME(NR_KNOB_INFO_PRECISION, NR_KNOB_PRECISION) &&
                   SAME(NR_KNOB_INFO_DATA, NR_KNOB_DATA) &&
                   SAME(NR_KNOB_INFO_SLOW_BUILD, NR_KNOB_SLOW_BUILD) &&
                   SAME(NR_KNOB_INFO_APPROX_DEFAULT, NR_KNOB_APPROX_DEFAULT) &&
                   SAME(NR_KNOB_INFO_THREADS, NR_KNOB_THREADS) &&
                   SAME(NR_KNOB_INFO_RUNTIME, NR_KNOB_RUNTIME),
               "nnroute_tools.h's knob flags match plan/knob.h's");
#undef SAME
_Static_assert(NR_KNOB_LIST_MAX_VALUES == NR_KNOB_MAX_VALUES, "one value limit");

#define TABLE_FLAGS 0xffffu

/* A definition's values, split out of its '|' list. */
typedef struct def_values {
  const char *ptr[NR_KNOB_MAX_VALUES];
  char buf[NR_KNOB_MAX_VALUES][64];
  double bound[NR_KNOB_MAX_VALUES]; /* the definition's value_bounds, when it has them */
  int n, dflt;
  bool has_bounds;
} def_values;

struct nr_knob_list_impl {
  nr_knob_space space; /* empty for a definition list */
  bool has_space;
  nr_knob_info *rows;
  def_values *defs;    /* per row: its definition's values */
  int n, cap;
};

static void split_values(const nr_knob_def *d, def_values *dv) {
  const char *s;
  size_t len;
  dv->n = dv->dflt = 0;
  for (int v = 0; v < NR_KNOB_MAX_VALUES && nr_knob_value_at(d->values, v, &s, &len); v++) {
    snprintf(dv->buf[v], sizeof dv->buf[v], "%.*s", (int)len, s);
    if (!strcmp(dv->buf[v], d->dflt))
      dv->dflt = v;
    dv->bound[v] = nr_knob_value_bound(d, v);
    dv->n++;
  }
  dv->has_bounds = d->value_bounds != NULL;
}

static unsigned info_flags(const nr_knob_def *d) {
  unsigned f = d->flags & TABLE_FLAGS;
  if (nr_knob_id_of(d) == NR_KNOB_PREC)
    f |= NR_KNOB_INFO_NODE_PRECISION;
  if (d->restricts == NR_RESTRICTS_PRECISION)
    f |= NR_KNOB_INFO_SETS_PRECISION;
  else if (d->restricts)
    f |= NR_KNOB_INFO_NARROWS_TACTIC;
  return f;
}

/* Appends the row of definition d; its values are the definition's until the caller
 * points them at an instance's. NULL when out of memory. */
static nr_knob_info *push_row(struct nr_knob_list_impl *im, const nr_knob_def *d) {
  if (im->n == im->cap) {
    int cap = im->cap ? im->cap * 2 : 64;
    nr_knob_info *r = realloc(im->rows, sizeof *r * (size_t)cap);
    if (r)
      im->rows = r;
    def_values *v = r ? realloc(im->defs, sizeof *v * (size_t)cap) : NULL;
    if (!v)
      return NULL;
    im->defs = v;
    im->cap = cap;
  }
  def_values *dv = &im->defs[im->n];
  split_values(d, dv);
  nr_knob_info *k = &im->rows[im->n++];
  *k = (nr_knob_info){.id = d->name, .name = d->name, .global = d->scope == NR_KNOB_GLOBAL,
                      .n_values = dv->n, .dflt = dv->dflt, .n_def_values = dv->n, .flags = info_flags(d),
                      .error_bound = d->error_bound, .help = d->help ? d->help : "",
                      .needs = d->needs};
  return k;
}

/* Definition values live in defs[], which moves while the list grows: rows point at
 * them once the list is complete. */
static void fix_value_pointers(struct nr_knob_list_impl *im) {
  for (int i = 0; i < im->n; i++) {
    for (int v = 0; v < im->defs[i].n; v++)
      im->defs[i].ptr[v] = im->defs[i].buf[v];
    im->rows[i].def_values = im->defs[i].ptr;
    im->rows[i].def_bounds = im->defs[i].has_bounds ? im->defs[i].bound : NULL;
    if (!im->has_space)
      im->rows[i].values = im->defs[i].ptr;
  }
}

static nr_status finish(struct nr_knob_list_impl *im, nr_knob_list *out, nr_error *err) {
  if (im->n && !im->rows)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing knobs");
  fix_value_pointers(im);
  *out = (nr_knob_list){im->n, im->rows, im};
  return NR_OK;
}

static nr_status fill_instances(struct nr_knob_list_impl *im, nr_error *err) {
  for (int i = 0; i < im->space.n; i++) {
    const nr_knob_inst *in = &im->space.inst[i];
    nr_knob_info *k = push_row(im, in->def);
    if (!k)
      return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing knobs");
    k->id = in->id;
    k->node = in->node;
    k->op_type = in->op_type;
    k->n_values = in->n_values;
    k->values = (const char *const *)in->values;
    k->dflt = in->dflt;
  }
  return NR_OK;
}

nr_status nr_knob_list_build(nr_model *m, const nr_knob_list_options *o, nr_knob_list *out,
                             nr_error *err) {
  *out = (nr_knob_list){0};
  struct nr_knob_list_impl *im = calloc(1, sizeof *im);
  if (!im)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing knobs");
  im->has_space = true;
  nr_graph *g = m ? nr_model_graph(m) : NULL;
  nr_status st = m ? nr_model_prepare(m, err) : NR_OK;
  if (!st && g)
    st = nr_compiler_name_nodes(g, err);
  if (!st)
    st = nr_knob_space_build_for(g, o ? o->device : NR_DEVICE_CPU, &im->space, err);
  if (!st)
    st = fill_instances(im, err);
  if (!st)
    st = finish(im, out, err);
  if (st) {
    nr_knob_list l = {0, NULL, im};
    nr_knob_list_free(&l);
  }
  return st;
}

typedef struct def_walk {
  struct nr_knob_list_impl *im;
  const nr_knob_list_options *o;
  bool test_knobs, oom;
} def_walk;

static void add_def(const nr_knob_def *d, void *user) {
  def_walk *w = user;
  if ((d->flags & NR_KNOB_TEST) && !w->test_knobs)
    return;
  if (w->o->node_only && d->scope != NR_KNOB_NODE)
    return;
  if (!w->o->all_devices && !(nr_knob_devices(d) & NR_KNOB_DEVICE(w->o->device)))
    return;
  w->oom |= !push_row(w->im, d);
}

nr_status nr_knob_list_definitions(const nr_knob_list_options *o, nr_knob_list *out,
                                   nr_error *err) {
  *out = (nr_knob_list){0};
  struct nr_knob_list_impl *im = calloc(1, sizeof *im);
  if (!im)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory listing knobs");
  nr_knob_list_options dflt = {sizeof dflt, NR_DEVICE_CPU, false, false};
  def_walk w = {im, o ? o : &dflt, nr_knob_test_knobs_enabled(), false};
  nr_knob_foreach(add_def, &w);
  nr_status st = w.oom ? nr_errorf(err, NR_ERR_NOMEM, "out of memory listing knobs")
                       : finish(im, out, err);
  if (st) {
    nr_knob_list l = {0, NULL, im};
    nr_knob_list_free(&l);
  }
  return st;
}

void nr_knob_list_free(nr_knob_list *l) {
  if (!l)
    return;
  struct nr_knob_list_impl *im = l->impl;
  if (im) {
    nr_knob_space_free(&im->space);
    free(im->rows);
    free(im->defs);
    free(im);
  }
  *l = (nr_knob_list){0};
}

int nr_knob_info_value_index(const nr_knob_info *k, const char *value) {
  for (int v = 0; value && v < k->n_values; v++)
    if (!strcmp(k->values[v], value))
      return v;
  return -1;
}

int nr_knob_list_find(const nr_knob_list *l, const char *id) {
  if (!l || !l->impl || !id)
    return -1;
  if (l->impl->has_space)
    return nr_knob_space_find(&l->impl->space, id);
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->knobs[i].id, id))
      return i;
  return -1;
}

double nr_knob_info_value_bound(const nr_knob_info *k, int v) {
  if (v < 0 || v >= k->n_values || v == k->dflt)
    return 0;
  for (int d = 0; k->def_bounds && d < k->n_def_values; d++)
    if (!strcmp(k->def_values[d], k->values[v]))
      return k->def_bounds[d];
  return k->error_bound;
}

const char *nr_knob_list_schema(char buf[17]) { return nr_knob_schema(buf); }

/* ---- routes ------------------------------------------------------------------------ */

static nr_status need_space(const nr_knob_list *l, nr_error *err) {
  if (l && l->impl && l->impl->has_space)
    return NR_OK;
  return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                   "routes need the knob instances of a model, not definitions");
}

nr_status nr_knob_list_parse_route(const nr_knob_list *l, const char *route, int *choice,
                                   nr_error *err) {
  nr_status st = need_space(l, err);
  if (st)
    return st;
  for (int i = 0; i < l->n; i++)
    choice[i] = l->knobs[i].dflt;
  nr_route r = {&l->impl->space, choice};
  return nr_route_parse(&r, route ? route : "", err);
}

nr_status nr_knob_list_parse_expr(const nr_knob_list *l, const char *expr,
                                  uint64_t *allowed, nr_error *err) {
  nr_status st = need_space(l, err);
  if (st)
    return st;
  nr_route_expr e = {0};
  st = nr_route_expr_parse(&e, &l->impl->space, expr ? expr : "", err);
  if (!st)
    memcpy(allowed, e.allowed, sizeof *allowed * (size_t)l->n);
  nr_route_expr_free(&e);
  return st;
}

char *nr_knob_list_route_text(const nr_knob_list *l, const int *choice) {
  if (need_space(l, NULL))
    return NULL;
  nr_route r = {&l->impl->space, (int *)choice}; /* read only: nr_route_canonical */
  return nr_route_canonical(&r);
}

nr_status nr_knob_list_canonical(const nr_knob_list *l, const char *route, char **out,
                                 nr_error *err) {
  *out = NULL;
  nr_status st = need_space(l, err);
  int *choice = st ? NULL : malloc(sizeof *choice * (size_t)(l->n ? l->n : 1));
  if (!st && !choice)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory parsing a route");
  if (!st)
    st = nr_knob_list_parse_route(l, route, choice, err);
  if (!st && !(*out = nr_knob_list_route_text(l, choice)))
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory printing a route");
  free(choice);
  return st;
}

int nr_knob_list_changes(const nr_knob_list *l, const int *choice) {
  int n = 0;
  for (int i = 0; l && choice && i < l->n; i++)
    n += choice[i] != l->knobs[i].dflt;
  return n;
}
