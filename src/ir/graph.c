/* graph.c - building and querying nr_graph: tensors by name (hashed, since exported
 * transformers have thousands), nodes, topological order, operator binding, and
 * attribute access. */
#include "ir/ir.h"
#include "ir/op.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name index lives beside the graph: open addressing over tensor indices. */
typedef struct name_index {
  int *slots; /* tensor index + 1; 0 = empty */
  int cap;
} name_index;

static name_index *graph_index(const nr_graph *g);

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Index storage keyed by graph pointer would need a map; keep it simple: a hidden
 * allocation placed right after the graph struct. */
typedef struct graph_box {
  nr_graph g;
  name_index idx;
} graph_box;

static name_index *graph_index(const nr_graph *g) {
  return &((graph_box *)g)->idx;
}

nr_graph *nr_graph_create(nr_graph *parent) {
  graph_box *box = calloc(1, sizeof *box);
  if (!box)
    return NULL;
  box->g.parent = parent;
  if (parent) {
    box->g.opsets = parent->opsets;
    box->g.n_opsets = parent->n_opsets;
    box->g.ir_version = parent->ir_version;
  }
  return &box->g;
}

void nr_attr_free(nr_attr *a) {
  free(a->name);
  free(a->s);
  free(a->floats);
  free(a->ints);
  for (size_t i = 0; a->strings && i < a->n; i++)
    free(a->strings[i]);
  free(a->strings);
  nr_value_free(&a->t);
  nr_graph_destroy(a->g);
}

void nr_node_free(nr_node *n) {
  free(n->name);
  free(n->op_type);
  free(n->domain);
  free(n->inputs);
  free(n->outputs);
  for (int i = 0; i < n->n_attrs; i++)
    nr_attr_free(&n->attrs[i]);
  free(n->attrs);
}

void nr_graph_destroy(nr_graph *g) {
  if (!g)
    return;
  for (int i = 0; i < g->n_tensors; i++) {
    nr_tensor *t = &g->tensors[i];
    free(t->name);
    nr_value_free(&t->value);
    for (int d = 0; d < NR_MAX_RANK; d++)
      free(t->dim_params[d]);
  }
  free(g->tensors);
  for (int i = 0; i < g->n_nodes; i++)
    nr_node_free(&g->nodes[i]);
  free(g->nodes);
  free(g->inputs);
  free(g->outputs);
  if (g->owns_opsets) {
    for (int i = 0; i < g->n_opsets; i++)
      free(g->opsets[i].domain);
    free(g->opsets);
  }
  free(g->name);
  free(graph_index(g)->slots);
  free(g);
}

static int index_lookup(const nr_graph *g, const char *name) {
  const name_index *ix = graph_index(g);
  if (!ix->cap)
    return -1;
  for (uint64_t h = hash_name(name) & (uint64_t)(ix->cap - 1);;
       h = (h + 1) & (uint64_t)(ix->cap - 1)) {
    int s = ix->slots[h];
    if (!s)
      return -1;
    if (!strcmp(g->tensors[s - 1].name, name))
      return s - 1;
  }
}

static void index_put(name_index *ix, const char *name, int tensor) {
  uint64_t h = hash_name(name) & (uint64_t)(ix->cap - 1);
  while (ix->slots[h])
    h = (h + 1) & (uint64_t)(ix->cap - 1);
  ix->slots[h] = tensor + 1;
}

static bool index_grow(nr_graph *g) {
  name_index *ix = graph_index(g);
  if ((g->n_tensors + 1) * 2 <= ix->cap)
    return true;
  int cap = ix->cap ? ix->cap * 2 : 64;
  int *slots = calloc((size_t)cap, sizeof *slots);
  if (!slots)
    return false;
  free(ix->slots);
  ix->slots = slots;
  ix->cap = cap;
  for (int i = 0; i < g->n_tensors; i++)
    index_put(ix, g->tensors[i].name, i);
  return true;
}

int nr_graph_find_tensor(const nr_graph *g, const char *name) {
  return index_lookup(g, name);
}

int nr_graph_add_tensor(nr_graph *g, const char *name, unsigned flags) {
  if (g->n_tensors == g->cap_tensors) {
    int cap = g->cap_tensors ? g->cap_tensors * 2 : 32;
    nr_tensor *t = realloc(g->tensors, sizeof *t * (size_t)cap);
    if (!t)
      return -1;
    g->tensors = t;
    g->cap_tensors = cap;
  }
  if (!index_grow(g))
    return -1;
  nr_tensor *t = &g->tensors[g->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  if (!t->name)
    return -1;
  t->flags = flags;
  t->value.rank = -1;
  t->producer = -1;
  index_put(graph_index(g), t->name, g->n_tensors);
  return g->n_tensors++;
}

nr_node *nr_graph_add_node(nr_graph *g) {
  if (g->n_nodes == g->cap_nodes) {
    int cap = g->cap_nodes ? g->cap_nodes * 2 : 32;
    nr_node *n = realloc(g->nodes, sizeof *n * (size_t)cap);
    if (!n)
      return NULL;
    g->nodes = n;
    g->cap_nodes = cap;
  }
  nr_node *n = &g->nodes[g->n_nodes++];
  memset(n, 0, sizeof *n);
  return n;
}

int nr_graph_opset(const nr_graph *g, const char *domain) {
  if (!domain || !strcmp(domain, "ai.onnx"))
    domain = "";
  for (int i = 0; i < g->n_opsets; i++) {
    const char *d = g->opsets[i].domain ? g->opsets[i].domain : "";
    if (!strcmp(d, "ai.onnx"))
      d = "";
    if (!strcmp(d, domain))
      return g->opsets[i].version;
  }
  return 0;
}

const char *nr_node_describe(const nr_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "node '%s' (%s%s%s, opset %d)", n->name ? n->name : "",
           n->domain && *n->domain ? n->domain : "", n->domain && *n->domain ? "." : "",
           n->op_type, n->opset);
  return buf;
}

static char *dup_bytes(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

nr_status nr_attr_copy(nr_attr *dst, const nr_attr *src, nr_error *err) {
  memset(dst, 0, sizeof *dst);
  dst->name = strdup(src->name);
  dst->type = src->type;
  dst->f = src->f;
  dst->i = src->i;
  dst->n = src->n;
  dst->s_len = src->s_len;
  bool ok = dst->name != NULL;
  if (ok && src->s)
    ok = (dst->s = dup_bytes(src->s, src->s_len)) != NULL;
  if (ok && src->floats && src->n) {
    ok = (dst->floats = malloc(sizeof(float) * src->n)) != NULL;
    if (ok)
      memcpy(dst->floats, src->floats, sizeof(float) * src->n);
  }
  if (ok && src->ints && src->n) {
    ok = (dst->ints = malloc(sizeof(int64_t) * src->n)) != NULL;
    if (ok)
      memcpy(dst->ints, src->ints, sizeof(int64_t) * src->n);
  }
  if (ok && src->strings && src->n) {
    ok = (dst->strings = calloc(src->n, sizeof(char *))) != NULL;
    for (size_t k = 0; ok && k < src->n; k++)
      ok = (dst->strings[k] = strdup(src->strings[k] ? src->strings[k] : "")) != NULL;
  }
  if (ok && src->t.data)
    ok = nr_value_copy(&dst->t, &src->t, err) == NR_OK;
  else
    dst->t = src->t;
  if (!ok) {
    nr_attr_free(dst);
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory copying attribute '%s'",
                     src->name);
  }
  return NR_OK;
}
