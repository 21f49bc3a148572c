/* pass_util.c - the graph-editing tools of the passes (pass_util.h).
 *
 * Everything works on tensor and node indices rather than pointers, because adding a
 * node or tensor may move the arrays. Compaction is done once per pass: swallowed
 * nodes are marked, then freed together, and the graph is re-sorted and re-bound so
 * the next pass sees a valid, topologically ordered graph. */
#include "passes/pass_util.h"
#include "ir/fused.h"
#include "util/error.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void count_outer_reads(const nr_graph *sub, const nr_graph *g, int *uses) {
  for (int i = 0; i < sub->n_tensors; i++) {
    if (!(sub->tensors[i].flags & NR_TENSOR_OUTER))
      continue;
    int t = nr_graph_find_tensor(g, sub->tensors[i].name);
    if (t >= 0)
      uses[t]++;
  }
  for (int k = 0; k < sub->n_nodes; k++)
    for (int a = 0; a < sub->nodes[k].n_attrs; a++)
      if (sub->nodes[k].attrs[a].g)
        count_outer_reads(sub->nodes[k].attrs[a].g, g, uses);
}

int *nr_pu_readers(const nr_graph *g) {
  int *uses = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof(int));
  if (!uses)
    return NULL;
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *n = &g->nodes[k];
    for (int i = 0; i < n->n_inputs; i++)
      if (n->inputs[i] >= 0)
        uses[n->inputs[i]]++;
    for (int a = 0; a < n->n_attrs; a++)
      if (n->attrs[a].g)
        count_outer_reads(n->attrs[a].g, g, uses);
  }
  for (int o = 0; o < g->n_outputs; o++)
    if (g->outputs[o] >= 0)
      uses[g->outputs[o]]++;
  return uses;
}

bool nr_pu_is_output(const nr_graph *g, int t) {
  for (int o = 0; o < g->n_outputs; o++)
    if (g->outputs[o] == t)
      return true;
  return false;
}

int nr_pu_next_reader(const nr_graph *g, int t, int from) {
  for (int k = from + 1; k < g->n_nodes; k++)
    for (int i = 0; i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] == t)
        return k;
  return -1;
}

bool nr_pu_is_const(const nr_graph *g, int t) {
  return t >= 0 && (g->tensors[t].flags & NR_TENSOR_CONST) && g->tensors[t].value.data;
}

int nr_pu_in(const nr_node *n, int i) {
  return i >= 0 && i < n->n_inputs ? n->inputs[i] : -1;
}

nr_node *nr_pu_producer(nr_graph *g, int t) {
  if (t < 0 || g->tensors[t].producer < 0 || g->tensors[t].producer >= g->n_nodes)
    return NULL;
  return &g->nodes[g->tensors[t].producer];
}

const nr_node *nr_pu_cproducer(const nr_graph *g, int t) {
  return nr_pu_producer((nr_graph *)g, t);
}

bool nr_pu_is_op(const nr_node *n, const char *op_type) {
  return n && (!n->domain || !*n->domain || !strcmp(n->domain, "ai.onnx")) &&
         !strcmp(n->op_type, op_type);
}

/* ---- building ------------------------------------------------------------------- */

int nr_pu_add_node(nr_graph *g, const char *name, const char *op_type, const char *domain,
                   int n_in, const int *ins, int n_out, const int *outs) {
  nr_node *n = nr_graph_add_node(g);
  if (!n)
    return -1;
  n->name = strdup(name);
  n->op_type = strdup(op_type);
  n->domain = strdup(domain);
  n->opset = nr_graph_opset(g, domain);
  n->inputs = malloc(sizeof(int) * (size_t)(n_in + 1));
  n->outputs = malloc(sizeof(int) * (size_t)(n_out + 1));
  if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs) {
    nr_node_free(n);
    g->n_nodes--;
    return -1;
  }
  n->n_inputs = n_in;
  n->n_outputs = n_out;
  memcpy(n->inputs, ins, sizeof(int) * (size_t)n_in);
  memcpy(n->outputs, outs, sizeof(int) * (size_t)n_out);
  return g->n_nodes - 1;
}

nr_status nr_pu_copy_attr(nr_graph *g, int k, const nr_attr *a, nr_error *err) {
  nr_node *n = &g->nodes[k];
  for (int i = 0; i < n->n_attrs; i++) /* an attribute of that name: replaced */
    if (n->attrs[i].name && !strcmp(n->attrs[i].name, a->name)) {
      nr_attr copy;
      nr_status st = nr_attr_copy(&copy, a, err);
      if (!st) {
        nr_attr_free(&n->attrs[i]);
        n->attrs[i] = copy;
      }
      return st;
    }
  nr_attr *at = realloc(n->attrs, sizeof *at * (size_t)(n->n_attrs + 1));
  if (!at)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory adding attribute '%s'", a->name);
  n->attrs = at;
  nr_status st = nr_attr_copy(&at[n->n_attrs], a, err);
  if (!st)
    n->n_attrs++;
  return st;
}

nr_status nr_pu_set_attr_int(nr_graph *g, int k, const char *name, int64_t v, nr_error *err) {
  nr_attr a = {.name = (char *)name, .type = NR_ATTR_INT, .i = v};
  return nr_pu_copy_attr(g, k, &a, err);
}

nr_status nr_pu_set_attr_float(nr_graph *g, int k, const char *name, float v, nr_error *err) {
  nr_attr a = {.name = (char *)name, .type = NR_ATTR_FLOAT, .f = v};
  return nr_pu_copy_attr(g, k, &a, err);
}

nr_status nr_pu_set_attr_string(nr_graph *g, int k, const char *name, const char *v,
                                nr_error *err) {
  nr_attr a = {.name = (char *)name, .type = NR_ATTR_STRING, .s = (char *)v,
               .s_len = strlen(v)};
  return nr_pu_copy_attr(g, k, &a, err);
}

nr_status nr_pu_set_attr_ints(nr_graph *g, int k, const char *name, int n,
                              const int64_t *v, nr_error *err) {
  nr_attr a = {.name = (char *)name, .type = NR_ATTR_INTS, .n = (size_t)n,
               .ints = (int64_t *)v};
  return nr_pu_copy_attr(g, k, &a, err);
}

nr_status nr_pu_set_attr_floats(nr_graph *g, int k, const char *name, int n,
                                const float *v, nr_error *err) {
  nr_attr a = {.name = (char *)name, .type = NR_ATTR_FLOATS, .n = (size_t)n,
               .floats = (float *)v};
  return nr_pu_copy_attr(g, k, &a, err);
}

nr_status nr_pu_set_attr_strings(nr_graph *g, int k, const char *name, int n,
                                 const char *const *v, nr_error *err) {
  nr_attr a = {.name = (char *)name, .type = NR_ATTR_STRINGS, .n = (size_t)n,
               .strings = (char **)v};
  return nr_pu_copy_attr(g, k, &a, err);
}

/* "<base><suffix>", then "<base><suffix>_2", ... until unused. */
static int add_unique(nr_graph *g, const char *base, const char *suffix, unsigned flags) {
  char name[512];
  snprintf(name, sizeof name, "%s%s", base, suffix);
  for (int i = 2; nr_graph_find_tensor(g, name) >= 0; i++)
    snprintf(name, sizeof name, "%s%s_%d", base, suffix, i);
  return nr_graph_add_tensor(g, name, flags);
}

int nr_pu_add_const(nr_graph *g, const char *base, const char *suffix, nr_value *v) {
  int t = add_unique(g, base, suffix, NR_TENSOR_CONST);
  if (t < 0)
    return -1;
  g->tensors[t].value = *v;
  memset(v, 0, sizeof *v);
  v->rank = -1;
  return t;
}

int nr_pu_add_tensor(nr_graph *g, const char *base, const char *suffix, nr_dtype dt,
                     int rank, const int64_t *dims) {
  int t = add_unique(g, base, suffix, 0);
  if (t < 0)
    return -1;
  nr_value *v = &g->tensors[t].value;
  v->dtype = dt;
  v->rank = rank;
  for (int d = 0; d < rank; d++)
    v->dims[d] = dims[d];
  return t;
}

static void share_opsets(nr_graph *g, nr_opset *ops, int n) {
  for (int k = 0; k < g->n_nodes; k++)
    for (int a = 0; a < g->nodes[k].n_attrs; a++) {
      nr_graph *sub = g->nodes[k].attrs[a].g;
      if (sub && !sub->owns_opsets) {
        sub->opsets = ops;
        sub->n_opsets = n;
        share_opsets(sub, ops, n);
      }
    }
}

nr_status nr_pu_import_nnroute(nr_graph *g, nr_error *err) {
  if (nr_graph_opset(g, NR_DOMAIN) > 0)
    return NR_OK;
  if (!g->owns_opsets && g->n_opsets)
    return nr_errorf(err, NR_ERR_INTERNAL,
                     "cannot import domain '%s' into a subgraph", NR_DOMAIN);
  nr_opset *ops = realloc(g->owns_opsets ? g->opsets : NULL,
                          sizeof *ops * (size_t)(g->n_opsets + 1));
  if (!ops)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory importing domain '%s'", NR_DOMAIN);
  ops[g->n_opsets].domain = strdup(NR_DOMAIN);
  ops[g->n_opsets].version = 1;
  if (!ops[g->n_opsets].domain) {
    g->opsets = ops;
    g->owns_opsets = true;
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory importing domain '%s'", NR_DOMAIN);
  }
  g->opsets = ops;
  g->owns_opsets = true;
  g->n_opsets++;
  share_opsets(g, ops, g->n_opsets);
  return NR_OK;
}

/* ---- compaction ----------------------------------------------------------------- */

nr_status nr_pu_finish(nr_graph *g, nr_error *err) {
  nr_status st = nr_graph_toposort(g, err);
  if (!st)
    st = nr_graph_bind_ops(g, err);
  return st;
}

nr_status nr_pu_remove_marked(nr_graph *g, const bool *mark, nr_error *err) {
  int w = 0;
  for (int k = 0; k < g->n_nodes; k++) {
    if (mark && mark[k]) {
      for (int o = 0; o < g->nodes[k].n_outputs; o++) {
        int t = g->nodes[k].outputs[o];
        if (t >= 0 && g->tensors[t].producer == k)
          g->tensors[t].producer = -1;
      }
      nr_node_free(&g->nodes[k]);
      continue;
    }
    g->nodes[w++] = g->nodes[k];
  }
  g->n_nodes = w;
  return nr_pu_finish(g, err);
}

/* ---- activations ------------------------------------------------------------------ */

int nr_pu_reader_nodes(const nr_graph *g, const bool *dead, int t, int *out, int max) {
  int c = 0;
  for (int k = 0; k < g->n_nodes; k++) {
    if (dead && dead[k])
      continue;
    for (int i = 0; i < g->nodes[k].n_inputs; i++)
      if (g->nodes[k].inputs[i] == t) {
        if (c < max)
          out[c] = k;
        c++;
      }
  }
  return c;
}

bool nr_pu_const_scalar(const nr_graph *g, int t, float *v) {
  if (!nr_pu_is_const(g, t))
    return false;
  const nr_value *val = &g->tensors[t].value;
  nr_dtype dt = val->dtype;
  if (nr_value_count(val) != 1 ||
      (dt != NR_DTYPE_FLOAT && dt != NR_DTYPE_DOUBLE && dt != NR_DTYPE_FLOAT16))
    return false;
  *v = (float)nr_value_get_f64(val, 0);
  return true;
}

/* Clip's bounds: attributes before opset 11, optional constant inputs after. */
static bool clip_bounds(const nr_graph *g, const nr_node *n, float *lo, float *hi) {
  *lo = -FLT_MAX;
  *hi = FLT_MAX;
  if (n->opset < 11) {
    *lo = nr_attr_float(n, "min", -FLT_MAX);
    *hi = nr_attr_float(n, "max", FLT_MAX);
    return true;
  }
  int tmin = nr_pu_in(n, 1), tmax = nr_pu_in(n, 2);
  if (tmin >= 0 && !nr_pu_const_scalar(g, tmin, lo))
    return false;
  return tmax < 0 || nr_pu_const_scalar(g, tmax, hi);
}

/* A one-node activation reading t as its first (only) data input. */
static bool single_act(const nr_graph *g, const nr_node *n, int t, nr_pu_act *m) {
  if (n->n_outputs != 1 || nr_pu_in(n, 0) != t)
    return false;
  m->a = m->b = 0;
  if (nr_pu_is_op(n, "Relu")) {
    m->act = NR_ACT_RELU;
  } else if (nr_pu_is_op(n, "Clip")) {
    m->act = NR_ACT_CLIP;
    return clip_bounds(g, n, &m->a, &m->b);
  } else if (nr_pu_is_op(n, "LeakyRelu")) {
    m->act = NR_ACT_LEAKY_RELU;
    m->a = nr_attr_float(n, "alpha", 0.01f);
  } else if (nr_pu_is_op(n, "Sigmoid")) {
    m->act = NR_ACT_SIGMOID;
  } else if (nr_pu_is_op(n, "HardSigmoid")) {
    m->act = NR_ACT_HARD_SIGMOID;
    m->a = nr_attr_float(n, "alpha", 0.2f);
    m->b = nr_attr_float(n, "beta", 0.5f);
  } else if (nr_pu_is_op(n, "HardSwish")) {
    m->act = NR_ACT_HARD_SWISH;
  } else if (nr_pu_is_op(n, "Tanh")) {
    m->act = NR_ACT_TANH;
  } else if (!strcmp(n->op_type, "Gelu") && n->n_inputs == 1) {
    const char *approx = nr_attr_string(n, "approximate", "none");
    m->act = !strcmp(approx, "tanh") ? NR_ACT_GELU_TANH : NR_ACT_GELU;
  } else {
    return false;
  }
  return n->n_inputs == 1 || m->act == NR_ACT_CLIP;
}

/* x * Sigmoid(x) or x * HardSigmoid(x; 1/6, 1/2): readers r[0], r[1] of x. */
static bool gated_act(const nr_graph *g, const int *readers, const int *r, int t,
                      nr_pu_act *m) {
  for (int s = 0; s < 2; s++) {
    const nr_node *gate = &g->nodes[r[s]], *mul = &g->nodes[r[1 - s]];
    nr_pu_act one;
    if (!single_act(g, gate, t, &one) || !nr_pu_is_op(mul, "Mul") || mul->n_inputs != 2)
      continue;
    int go = gate->outputs[0];
    bool pair = (mul->inputs[0] == t && mul->inputs[1] == go) ||
                (mul->inputs[1] == t && mul->inputs[0] == go);
    if (!pair || readers[go] != 1)
      continue;
    if (one.act == NR_ACT_SIGMOID) {
      m->act = NR_ACT_SILU;
    } else if (one.act == NR_ACT_HARD_SIGMOID && fabsf(one.a - 1.0f / 6) < 1e-6f &&
               fabsf(one.b - 0.5f) < 1e-6f) {
      m->act = NR_ACT_HARD_SWISH;
    } else {
      continue;
    }
    m->a = m->b = 0;
    m->nodes[0] = r[s];
    m->nodes[1] = r[1 - s];
    m->n_nodes = 2;
    m->out = mul->outputs[0];
    return true;
  }
  return false;
}

bool nr_pu_match_act(const nr_graph *g, const int *readers, const bool *dead, int t,
                     nr_pu_act *m) {
  int r[3];
  if (t < 0 || g->tensors[t].value.dtype != NR_DTYPE_FLOAT || nr_pu_is_output(g, t))
    return false;
  int n = nr_pu_reader_nodes(g, dead, t, r, 3);
  if (n != readers[t])
    return false;
  if (n == 2 && r[0] != r[1])
    return gated_act(g, readers, r, t, m);
  if (n != 1 || !single_act(g, &g->nodes[r[0]], t, m))
    return false;
  m->nodes[0] = r[0];
  m->n_nodes = 1;
  m->out = g->nodes[r[0]].outputs[0];
  return m->out >= 0;
}
