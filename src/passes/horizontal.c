/* horizontal.c - the horizontal pass: Conv, MatMul or Gemm nodes with constant weights
 * that read the same input become one node over concatenated weights followed by a
 * Split that hands every original reader its original tensor (Q/K/V projections,
 * Inception-style branches). One wide GEMM reads the input once and keeps the cores
 * busier than several narrow ones.
 *
 * Key decision: one knob instance per shared input tensor, anchored at the earliest
 * node of any group reading it; its values say which groups form. "on" merges nodes
 * whose attributes already agree (for Conv: same kernel, strides, pads, dilations);
 * "on_pad" also zero-pads smaller Conv kernels to the largest one (a 1x1 with pad 0
 * becomes a 3x3 with pad 1 whose border taps are zero), which costs extra FLOPs and so
 * is never the default. "off" is listed only where "on" merges something, "on_pad"
 * only where padding merges more, so every listed value builds a different graph.
 * Biases (Conv B, Gemm C, or a constant Add behind a MatMul) are concatenated too,
 * with zeros for members that have none. */
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HZ_MAX 32 /* nodes reading one tensor that the pass looks at */
#define HZ_SP 3   /* spatial dims of a Conv */

typedef enum hz_kind { HZ_CONV, HZ_MATMUL, HZ_GEMM } hz_kind;

/* One node that could join a group. */
typedef struct hz_cand {
  int node;
  hz_kind kind;
  int w, b;        /* weight, bias (Conv B / Gemm C / the Add's constant), -1 if none */
  int add;         /* MatMul: the bias Add behind it, -1 if none */
  int out;         /* the tensor the group's Split must produce */
  int cls;         /* exact class: index of the first candidate it agrees with */
  int nsp;         /* Conv spatial dims */
  int64_t kernel[HZ_SP], strides[HZ_SP], pads[2 * HZ_SP], dil[HZ_SP];
} hz_cand;

typedef struct hz_group {
  int m[HZ_MAX]; /* candidate indices, in node order */
  int n;
  int ref;       /* Conv: candidate whose kernel and pads the merged node takes */
} hz_group;

/* Everything the pass knows about one input tensor. */
typedef struct hz_info {
  int x;
  hz_cand c[HZ_MAX];
  int n;
  bool in_pad[HZ_MAX];
  int pad_ref;     /* largest Conv kernel, -1 when no pad group */
  bool has_exact;  /* some class has >= 2 members */
  bool has_pad;    /* padding groups >= 2 convs across >= 2 classes */
  int anchor;      /* node index, -1 when nothing can merge */
} hz_info;

static const nr_value *val(const nr_graph *g, int t) { return &g->tensors[t].value; }

static bool f32_const(const nr_graph *g, int t) {
  return nr_pu_is_const(g, t) && val(g, t)->dtype == NR_DTYPE_FLOAT;
}

static bool known(const nr_graph *g, int t) {
  return t >= 0 && nr_value_shape_known(val(g, t));
}

/* The node that alone reads t (t no graph output), or -1. */
static int sole_reader(const nr_graph *g, int t) {
  int k = nr_pu_next_reader(g, t, -1);
  if (k < 0 || nr_pu_is_output(g, t) || nr_pu_next_reader(g, t, k) >= 0)
    return -1;
  return k;
}

/* ---- candidates ----------------------------------------------------------------- */

static void ints_or(const nr_node *n, const char *name, int count, int64_t dflt,
                    int64_t *out) {
  size_t na = 0;
  const int64_t *v = nr_attr_ints(n, name, &na);
  for (int i = 0; i < count; i++)
    out[i] = (int)na == count ? v[i] : dflt;
}

static bool conv_cand(const nr_graph *g, const nr_node *n, hz_cand *c) {
  const char *ap = nr_attr_string(n, "auto_pad", "NOTSET");
  if (n->n_inputs < 2 || !f32_const(g, n->inputs[1]) || nr_attr_int(n, "group", 1) != 1 ||
      strcmp(ap, "NOTSET") != 0)
    return false;
  const nr_value *w = val(g, n->inputs[1]);
  if (w->rank < 3 || w->rank > 2 + HZ_SP || val(g, n->inputs[0])->rank != w->rank)
    return false;
  c->w = n->inputs[1];
  c->b = nr_pu_in(n, 2);
  if (c->b >= 0 && (!f32_const(g, c->b) || nr_value_count(val(g, c->b)) != w->dims[0]))
    return false;
  c->nsp = w->rank - 2;
  for (int d = 0; d < c->nsp; d++)
    c->kernel[d] = w->dims[2 + d];
  ints_or(n, "strides", c->nsp, 1, c->strides);
  ints_or(n, "pads", 2 * c->nsp, 0, c->pads);
  ints_or(n, "dilations", c->nsp, 1, c->dil);
  c->out = n->outputs[0];
  return true;
}

/* A constant Add of one value per output column behind the MatMul; -1 if none. */
static int bias_add(const nr_graph *g, const nr_node *n, int64_t cols, int *bias) {
  int k = sole_reader(g, n->outputs[0]);
  if (k < 0 || !nr_pu_is_op(&g->nodes[k], "Add") || g->nodes[k].n_inputs != 2)
    return -1;
  const nr_node *a = &g->nodes[k];
  int b = a->inputs[0] == n->outputs[0] ? a->inputs[1] : a->inputs[0];
  const nr_value *bv = f32_const(g, b) ? val(g, b) : NULL;
  if (!bv || nr_value_count(bv) != cols || bv->rank < 1 || bv->dims[bv->rank - 1] != cols ||
      bv->rank > val(g, n->outputs[0])->rank || !known(g, a->outputs[0]))
    return -1;
  *bias = b;
  return k;
}

static bool matmul_cand(const nr_graph *g, const nr_node *n, hz_cand *c) {
  if (n->n_inputs != 2 || !f32_const(g, n->inputs[1]) || val(g, n->inputs[1])->rank != 2 ||
      val(g, n->inputs[0])->rank < 2)
    return false;
  c->w = n->inputs[1];
  c->b = -1;
  c->add = bias_add(g, n, val(g, c->w)->dims[1], &c->b);
  c->out = n->outputs[0];
  return true;
}

static bool gemm_cand(const nr_graph *g, const nr_node *n, hz_cand *c) {
  if (n->n_inputs < 2 || !f32_const(g, n->inputs[1]) || val(g, n->inputs[1])->rank != 2 ||
      nr_attr_int(n, "transA", 0) != 0)
    return false;
  c->w = n->inputs[1];
  c->b = nr_pu_in(n, 2);
  int64_t cols = val(g, c->w)->dims[nr_attr_int(n, "transB", 0) ? 0 : 1];
  if (c->b >= 0) {
    const nr_value *bv = f32_const(g, c->b) ? val(g, c->b) : NULL;
    int64_t cnt = bv ? nr_value_count(bv) : -1;
    if (!bv || (cnt != 1 && cnt != cols) || bv->rank > 2 || (bv->rank == 2 && bv->dims[0] != 1))
      return false;
  }
  c->out = n->outputs[0];
  return true;
}

static bool make_cand(const nr_graph *g, int k, int x, hz_cand *c) {
  const nr_node *n = &g->nodes[k];
  memset(c, 0, sizeof *c);
  c->node = k;
  c->add = -1;
  if (n->n_inputs < 1 || n->inputs[0] != x || n->n_outputs != 1 || !known(g, n->outputs[0]) ||
      val(g, x)->dtype != NR_DTYPE_FLOAT)
    return false;
  if (nr_pu_is_op(n, "Conv"))
    return (c->kind = HZ_CONV, conv_cand(g, n, c));
  if (nr_pu_is_op(n, "MatMul"))
    return (c->kind = HZ_MATMUL, matmul_cand(g, n, c));
  if (nr_pu_is_op(n, "Gemm"))
    return (c->kind = HZ_GEMM, gemm_cand(g, n, c));
  return false;
}

/* ---- classes and the pad group -------------------------------------------------- */

static bool same_ints(const int64_t *a, const int64_t *b, int n) {
  return !memcmp(a, b, sizeof(int64_t) * (size_t)n);
}

static bool same_attr_f(const nr_node *a, const nr_node *b, const char *name) {
  return nr_attr_float(a, name, 1.0f) == nr_attr_float(b, name, 1.0f);
}

/* Members of one exact class merge without changing any weight's shape. */
static bool agree(const nr_graph *g, const hz_cand *a, const hz_cand *b) {
  const nr_node *na = &g->nodes[a->node], *nb = &g->nodes[b->node];
  if (a->kind != b->kind)
    return false;
  if (a->kind == HZ_GEMM)
    return nr_attr_int(na, "transB", 0) == nr_attr_int(nb, "transB", 0) &&
           same_attr_f(na, nb, "alpha") && same_attr_f(na, nb, "beta");
  if (a->kind == HZ_MATMUL)
    return true;
  const nr_value *wa = val(g, a->w), *wb = val(g, b->w);
  return a->nsp == b->nsp && same_ints(wa->dims + 1, wb->dims + 1, wa->rank - 1) &&
         same_ints(a->strides, b->strides, a->nsp) && same_ints(a->pads, b->pads, 2 * a->nsp) &&
         same_ints(a->dil, b->dil, a->nsp);
}

/* Where c's kernel sits inside ref's (per dim), or false when zero-padding c's kernel
 * to ref's cannot reproduce c's output exactly. */
static bool pad_offsets(const nr_graph *g, const hz_cand *ref, const hz_cand *c, int64_t *off) {
  if (c->kind != HZ_CONV || c->nsp != ref->nsp ||
      val(g, c->w)->dims[1] != val(g, ref->w)->dims[1] ||
      !same_ints(c->strides, ref->strides, c->nsp))
    return false;
  for (int d = 0; d < c->nsp; d++) {
    int64_t o = ref->pads[d] - c->pads[d];
    int64_t tail = ref->pads[c->nsp + d] - c->pads[c->nsp + d];
    if (c->dil[d] != 1 || ref->dil[d] != 1 || o < 0 || o + c->kernel[d] > ref->kernel[d] ||
        tail != ref->kernel[d] - c->kernel[d] - o)
      return false;
    off[d] = o;
  }
  return true;
}

static int64_t volume(const hz_cand *c) {
  int64_t v = 1;
  for (int d = 0; d < c->nsp; d++)
    v *= c->kernel[d];
  return v;
}

static void find_pad_group(const nr_graph *g, hz_info *h) {
  int ref = -1, n = 0, first_cls = -1;
  bool mixed = false;
  int64_t off[HZ_SP];
  for (int i = 0; i < h->n; i++)
    if (h->c[i].kind == HZ_CONV && (ref < 0 || volume(&h->c[i]) > volume(&h->c[ref])))
      ref = i;
  for (int i = 0; ref >= 0 && i < h->n; i++) {
    h->in_pad[i] = pad_offsets(g, &h->c[ref], &h->c[i], off);
    if (!h->in_pad[i])
      continue;
    n++;
    mixed |= first_cls >= 0 && h->c[i].cls != first_cls;
    first_cls = first_cls < 0 ? h->c[i].cls : first_cls;
  }
  h->pad_ref = ref;
  h->has_pad = n >= 2 && mixed;
}

static int class_size(const hz_info *h, int cls) {
  int n = 0;
  for (int i = 0; i < h->n; i++)
    n += h->c[i].cls == cls;
  return n;
}

/* Every merge possible on tensor x, and the anchor node of its knob. */
static bool analyze(const nr_graph *g, int x, hz_info *h) {
  memset(h, 0, sizeof *h);
  h->x = x;
  h->anchor = -1;
  if (x < 0 || !known(g, x))
    return false;
  for (int k = nr_pu_next_reader(g, x, -1); k >= 0 && h->n < HZ_MAX;
       k = nr_pu_next_reader(g, x, k)) {
    hz_cand *c = &h->c[h->n];
    if (!make_cand(g, k, x, c))
      continue;
    c->cls = h->n;
    for (int j = 0; j < h->n; j++)
      if (h->c[j].cls == j && agree(g, &h->c[j], c)) {
        c->cls = j;
        break;
      }
    h->n++;
  }
  find_pad_group(g, h);
  for (int i = 0; i < h->n; i++) {
    bool grouped = class_size(h, h->c[i].cls) >= 2;
    h->has_exact |= grouped;
    if ((grouped || (h->has_pad && h->in_pad[i])) && h->anchor < 0)
      h->anchor = h->c[i].node;
  }
  return h->anchor >= 0;
}

/* The groups a value forms: exact classes, or the pad group plus the classes it
 * leaves untouched. */
static int groups_for(const hz_info *h, bool pad, hz_group *out) {
  int n = 0;
  if (pad) {
    out[n] = (hz_group){.ref = h->pad_ref};
    for (int i = 0; i < h->n; i++)
      if (h->in_pad[i])
        out[n].m[out[n].n++] = i;
    n++;
  }
  for (int i = 0; i < h->n; i++) {
    if (h->c[i].cls != i || class_size(h, i) < 2)
      continue;
    bool touched = false;
    for (int j = 0; pad && j < h->n; j++)
      touched |= h->c[j].cls == i && h->in_pad[j];
    if (touched)
      continue;
    out[n] = (hz_group){.ref = i};
    for (int j = 0; j < h->n; j++)
      if (h->c[j].cls == i)
        out[n].m[out[n].n++] = j;
    n++;
  }
  return n;
}

/* ---- knobs ---------------------------------------------------------------------- */

bool nr_horizontal_absorbs(const nr_graph *g, const nr_node *n) {
  hz_info h;
  hz_group gr[HZ_MAX];
  int k = (int)(n - g->nodes);
  if (n->n_inputs < 1 || !analyze(g, n->inputs[0], &h))
    return false;
  /* The default value "on" merges the exact classes into their first member. */
  int ng = groups_for(&h, false, gr);
  for (int i = 0; i < ng; i++)
    for (int j = 1; j < gr[i].n; j++)
      if (h.c[gr[i].m[j]].node == k)
        return true;
  return false;
}

static bool applies_fuse(const nr_graph *g, const nr_node *n) {
  hz_info h;
  int k = (int)(n - g->nodes);
  return n->n_inputs >= 1 && analyze(g, n->inputs[0], &h) && h.anchor == k;
}

enum { HZ_V_OFF = 1u << 0, HZ_V_ON = 1u << 1, HZ_V_PAD = 1u << 2 };

static uint64_t valid_fuse(const nr_graph *g, const nr_node *n) {
  hz_info h;
  if (!analyze(g, n->inputs[0], &h))
    return HZ_V_ON;
  return HZ_V_ON | (h.has_exact ? HZ_V_OFF : 0) | (h.has_pad ? HZ_V_PAD : 0);
}

const nr_knob_def nr_knobs_horizontal[] = {
    [NR_KNOB_ROW(NR_KNOB_HORIZONTAL_FUSE)] =
    {"horizontal.fuse", "off|on|on_pad", "on", NR_KNOB_NODE, 0, 0,
     "merge Conv/MatMul/Gemm nodes that read this node's input into one node and a "
     "Split: on = those with identical attributes, on_pad = also convs whose smaller "
     "kernels are zero-padded to the largest",
     applies_fuse, valid_fuse},
    [NR_KNOB_ROW(NR_KNOB_HORIZONTAL_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_horizontal, NR_KNOB_HORIZONTAL_END);

/* ---- weights -------------------------------------------------------------------- */

/* Conv weights of the group stacked along output channels, each kernel placed at its
 * offset inside the reference kernel (zeros around it). */
static int conv_weights(nr_graph *g, const hz_info *h, const hz_group *gr, const char *base,
                        nr_error *err) {
  const hz_cand *ref = &h->c[gr->ref];
  const nr_value *rw = val(g, ref->w);
  int64_t dims[2 + HZ_SP], ci = rw->dims[1], kv = volume(ref), co = 0;
  for (int i = 0; i < gr->n; i++)
    co += val(g, h->c[gr->m[i]].w)->dims[0];
  memcpy(dims, rw->dims, sizeof(int64_t) * (size_t)rw->rank);
  dims[0] = co;
  nr_value v = {0};
  if (nr_value_alloc(&v, NR_DTYPE_FLOAT, rw->rank, dims, err))
    return -1;
  float *dst = v.data;
  for (int i = 0; i < gr->n; i++) {
    const hz_cand *c = &h->c[gr->m[i]];
    const nr_value *w = val(g, c->w);
    const float *src = w->data;
    int64_t off[HZ_SP] = {0}, kc = volume(c), rows = w->dims[0] * ci;
    pad_offsets(g, ref, c, off);
    for (int64_t r = 0; r < rows; r++, dst += kv)
      for (int64_t e = 0; e < kc; e++) {
        int64_t rest = e, at = 0;
        for (int d = 0; d < c->nsp; d++) { /* e in c's kernel -> position in ref's */
          int64_t stride_c = 1, stride_r = 1;
          for (int d2 = d + 1; d2 < c->nsp; d2++) {
            stride_c *= c->kernel[d2];
            stride_r *= ref->kernel[d2];
          }
          at += (rest / stride_c + off[d]) * stride_r;
          rest %= stride_c;
        }
        dst[at] = src[r * kc + e];
      }
  }
  int t = nr_pu_add_const(g, base, "/hz_weight", &v);
  nr_value_free(&v);
  return t;
}

/* MatMul [K, N_i] side by side; Gemm the same, or stacked when transB. */
static int gemm_weights(nr_graph *g, const hz_info *h, const hz_group *gr, bool stacked,
                        const char *base, nr_error *err) {
  const nr_value *w0 = val(g, h->c[gr->m[0]].w);
  int64_t inner = stacked ? w0->dims[1] : w0->dims[0], total = 0;
  for (int i = 0; i < gr->n; i++)
    total += val(g, h->c[gr->m[i]].w)->dims[stacked ? 0 : 1];
  int64_t dims[2] = {stacked ? total : inner, stacked ? inner : total};
  nr_value v = {0};
  if (nr_value_alloc(&v, NR_DTYPE_FLOAT, 2, dims, err))
    return -1;
  float *dst = v.data;
  for (int i = 0, col = 0; i < gr->n; i++) {
    const nr_value *w = val(g, h->c[gr->m[i]].w);
    if (stacked) {
      memcpy(dst, w->data, nr_value_nbytes(w));
      dst += nr_value_count(w);
      continue;
    }
    for (int64_t r = 0; r < inner; r++)
      memcpy((float *)v.data + r * total + col, (const float *)w->data + r * w->dims[1],
             sizeof(float) * (size_t)w->dims[1]);
    col += (int)w->dims[1];
  }
  int t = nr_pu_add_const(g, base, "/hz_weight", &v);
  nr_value_free(&v);
  return t;
}

/* Output width of member i (channels for Conv, columns otherwise). */
static int64_t width(const nr_graph *g, const hz_cand *c) {
  const nr_value *w = val(g, c->w);
  if (c->kind == HZ_GEMM && nr_attr_int(&g->nodes[c->node], "transB", 0))
    return w->dims[0];
  return c->kind == HZ_MATMUL || c->kind == HZ_GEMM ? w->dims[1] : w->dims[0];
}

/* The biases side by side (a one-element bias repeated, zeros where absent); -2 when
 * no member has one, -1 on failure. */
static int concat_bias(nr_graph *g, const hz_info *h, const hz_group *gr, const char *base,
                       nr_error *err) {
  int64_t total = 0;
  bool any = false;
  for (int i = 0; i < gr->n; i++) {
    total += width(g, &h->c[gr->m[i]]);
    any |= h->c[gr->m[i]].b >= 0;
  }
  if (!any)
    return -2;
  nr_value v = {0};
  if (nr_value_alloc(&v, NR_DTYPE_FLOAT, 1, &total, err))
    return -1;
  float *dst = v.data;
  for (int i = 0; i < gr->n; i++) {
    const hz_cand *c = &h->c[gr->m[i]];
    int64_t w = width(g, c), n = c->b >= 0 ? nr_value_count(val(g, c->b)) : 0;
    for (int64_t j = 0; j < w; j++)
      dst[j] = n ? (float)nr_value_get_f64(val(g, c->b), n == 1 ? 0 : j) : 0.0f;
    dst += w;
  }
  int t = nr_pu_add_const(g, base, "/hz_bias", &v);
  nr_value_free(&v);
  return t;
}

/* ---- rewriting ------------------------------------------------------------------ */

static int add_node_named(nr_graph *g, const char *name, const char *suffix, const char *op,
                          int n_in, const int *ins, int n_out, const int *outs) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s%s", name, suffix);
  return nr_pu_add_node(g, buf, op, "", n_in, ins, n_out, outs);
}

/* The merged node's attributes: the reference member's, with kernel_shape set. */
static nr_status copy_attrs(nr_graph *g, int k, int from, const hz_cand *ref, nr_error *err) {
  nr_status st = NR_OK;
  for (int a = 0; a < g->nodes[from].n_attrs && !st; a++) {
    nr_attr at = g->nodes[from].attrs[a];
    if (strcmp(at.name, "kernel_shape") && strcmp(at.name, "pads"))
      st = nr_pu_copy_attr(g, k, &at, err);
  }
  if (!st && ref->kind == HZ_CONV)
    st = nr_pu_set_attr_ints(g, k, "kernel_shape", ref->nsp, ref->kernel, err);
  if (!st && ref->kind == HZ_CONV)
    st = nr_pu_set_attr_ints(g, k, "pads", 2 * ref->nsp, ref->pads, err);
  return st;
}

/* Split of the wide tensor back into the members' tensors (opset 13: sizes input). */
static nr_status add_split(nr_graph *g, const hz_info *h, const hz_group *gr, int wide,
                           int axis, bool adds, const char *base, nr_error *err) {
  int64_t n = gr->n;
  int outs[HZ_MAX];
  nr_value sizes = {0};
  if (nr_value_alloc(&sizes, NR_DTYPE_INT64, 1, &n, err))
    return err->status;
  for (int i = 0; i < gr->n; i++) {
    ((int64_t *)sizes.data)[i] = width(g, &h->c[gr->m[i]]);
    const hz_cand *c = &h->c[gr->m[i]];
    outs[i] = adds ? g->nodes[c->add].outputs[0] : c->out;
  }
  int st_t = nr_pu_add_const(g, base, "/hz_split_sizes", &sizes);
  nr_value_free(&sizes);
  int ins[2] = {wide, st_t};
  int k = st_t < 0 ? -1 : add_node_named(g, base, "/hz_split", "Split", 2, ins, gr->n, outs);
  if (k < 0)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory splitting after '%s'", base);
  g->nodes[k].opset = 13;
  return nr_pu_set_attr_int(g, k, "axis", axis, err);
}

/* A new intermediate like t with its axis widened to `wide`. */
static int wide_tensor(nr_graph *g, int t, int axis, int64_t wide, const char *base,
                       const char *suffix) {
  const nr_value *v = val(g, t);
  int64_t dims[NR_MAX_RANK];
  memcpy(dims, v->dims, sizeof(int64_t) * (size_t)v->rank);
  dims[axis] = wide;
  return nr_pu_add_tensor(g, base, suffix, NR_DTYPE_FLOAT, v->rank, dims);
}

/* Replaces one group; marks its members (and absorbed Adds) for removal. */
static nr_status merge_group(nr_graph *g, const hz_info *h, const hz_group *gr, bool *mark,
                             nr_error *err) {
  const hz_cand *c0 = &h->c[gr->m[0]], *ref = &h->c[gr->ref];
  char *base = strdup(g->nodes[c0->node].name);
  bool adds = c0->kind == HZ_MATMUL;
  int64_t total = 0;
  for (int i = 0; i < gr->n; i++) {
    adds &= h->c[gr->m[i]].add >= 0;
    total += width(g, &h->c[gr->m[i]]);
  }
  nr_status st = base ? NR_OK : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  bool stacked = c0->kind == HZ_GEMM && nr_attr_int(&g->nodes[c0->node], "transB", 0);
  int w = st ? -1 : c0->kind == HZ_CONV ? conv_weights(g, h, gr, base, err)
                                        : gemm_weights(g, h, gr, stacked, base, err);
  int b = w < 0 || (c0->kind == HZ_MATMUL && !adds) ? -2 : concat_bias(g, h, gr, base, err);
  int axis = c0->kind == HZ_CONV ? 1 : val(g, c0->out)->rank - 1;
  int y = w < 0 || b == -1 ? -1 : wide_tensor(g, c0->out, axis, total, base, "/hz_out");
  if (!st && y < 0)
    st = err->status ? err->status : nr_errorf(err, NR_ERR_NOMEM, "out of memory");
  int mm_out = y, k = -1;
  if (!st && adds)
    mm_out = wide_tensor(g, c0->out, axis, total, base, "/hz_mm");
  int ins[3] = {h->x, w, b};
  if (!st && mm_out >= 0)
    k = nr_pu_add_node(g, base, g->nodes[c0->node].op_type, "", b >= 0 && !adds ? 3 : 2, ins, 1,
                       &mm_out);
  if (!st && k < 0)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory merging at '%s'", base);
  if (!st)
    st = copy_attrs(g, k, c0->node, ref, err);
  int add_ins[2] = {mm_out, b};
  if (!st && adds && add_node_named(g, base, "/hz_bias_add", "Add", 2, add_ins, 1, &y) < 0)
    st = nr_errorf(err, NR_ERR_NOMEM, "out of memory merging at '%s'", base);
  if (!st)
    st = add_split(g, h, gr, y, axis, adds, base, err);
  for (int i = 0; !st && i < gr->n; i++) {
    mark[h->c[gr->m[i]].node] = true;
    if (adds)
      mark[h->c[gr->m[i]].add] = true;
  }
  free(base);
  return st;
}

/* ---- the pass ------------------------------------------------------------------- */

static nr_status merge_at(nr_compile_ctx *c, int k, bool *mark) {
  nr_graph *g = c->graph;
  hz_info h;
  hz_group groups[HZ_MAX];
  if (g->nodes[k].n_inputs < 1 || !analyze(g, g->nodes[k].inputs[0], &h) || h.anchor != k)
    return NR_OK;
  const char *v = nr_route_get(c->route, NR_KNOB_HORIZONTAL_FUSE, &g->nodes[k]);
  if (v && !strcmp(v, "off"))
    return NR_OK;
  int n = groups_for(&h, v && !strcmp(v, "on_pad") && h.has_pad, groups);
  nr_status st = NR_OK;
  for (int i = 0; i < n && !st; i++)
    st = merge_group(g, &h, &groups[i], mark, c->err);
  return st;
}

/* Groups on different tensors never share a node (a member reads its group's tensor
 * as input 0), so each anchor merges its groups on the graph as it is; the members
 * go in one compaction at the end. */
static nr_status run_horizontal(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  int n0 = g->n_nodes;
  bool *mark = calloc((size_t)(n0 ? n0 : 1), sizeof *mark), any = false;
  if (!mark)
    return nr_errorf(c->err, NR_ERR_NOMEM, "horizontal: out of memory");
  nr_status st = NR_OK;
  for (int k = 0; k < n0 && !st; k++)
    st = merge_at(c, k, mark);
  for (int k = 0; k < n0; k++)
    any |= mark[k];
  if (!st && any) {
    bool *all = realloc(mark, sizeof *mark * (size_t)g->n_nodes);
    if (!all) {
      st = nr_errorf(c->err, NR_ERR_NOMEM, "horizontal: out of memory");
    } else {
      mark = all;
      memset(mark + n0, 0, sizeof *mark * (size_t)(g->n_nodes - n0));
      st = nr_pu_remove_marked(g, mark, c->err);
    }
  }
  free(mark);
  return st;
}

const nr_pass nr_pass_horizontal = {"horizontal", run_horizontal};
