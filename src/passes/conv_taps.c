/* conv_taps.c - the pass conv_taps: drops the rows and columns of a Conv's kernel
 * that only ever read padding, so the kernels never multiply them.
 *
 * A kernel tap reads padding at every output position when the dilation reaches
 * past the image: DeepLab's ASPP head runs 3x3 convolutions with dilations 12, 24
 * and 36 on a 20x20 map, where every tap but the centre of the last two lies outside
 * the image for every output pixel, so 8 of 9 multiply-adds of those convolutions
 * add zeros. The taps that can touch the image form a contiguous run per spatial
 * axis; the pass keeps that run, slices the weights to it and shifts the begin pad
 * by the taps dropped before it, choosing the end pad that keeps the output size.
 * The result is exact: the dropped products were products with padding zeros.
 *
 * Key decision: a graph rewrite in front of every backend rather than a case in
 * each kernel: the smaller Conv is an ordinary one (often a 1x1 that the pointwise
 * kernels take), for the CPU and CUDA alike. It needs constant weights, known
 * shapes, explicit pads (auto_pad NOTSET or VALID) and new pads that stay >= 0; the
 * knob (taps.trim, per node) is listed only where some tap can be dropped.
 *
 * Only group-1 convolutions are trimmed. A grouped or depthwise one does few products
 * per byte it reads, and its kernels take square windows: PP-OCR's direction
 * classifier runs 5x5 depthwise convs on a 2-row map, whose trimmed 3x5 windows fell
 * from the depthwise kernel to per-group im2col (its two largest, 200 channels, about
 * 0.3 ms each per run on im2col, 1 thread). */
#include "ir/dtype.h"
#include "passes/pass_knobs.h"
#include "passes/pass_util.h"
#include "plan/pass.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

#define TAPS_MAX_SPATIAL 3

/* The kept run of taps [first, first + count) per spatial axis and the new pads. */
typedef struct taps_plan {
  int spatial;
  int64_t first[TAPS_MAX_SPATIAL], count[TAPS_MAX_SPATIAL];
  int64_t pads[2 * TAPS_MAX_SPATIAL];
} taps_plan;

/* Does tap i of an axis (input extent h, output extent oh, stride s, dilation d,
 * begin pad pb) read the image at some output position? */
static bool tap_hits(int64_t i, int64_t h, int64_t oh, int64_t s, int64_t d, int64_t pb) {
  int64_t at = i * d - pb; /* input index at output 0 */
  int64_t y0 = at >= 0 ? 0 : (-at + s - 1) / s;
  return y0 < oh && at + y0 * s < h;
}

static int64_t attr_at(const int64_t *v, size_t n, size_t i, int64_t dflt) {
  return v && i < n ? v[i] : dflt;
}

/* One axis: the run of taps that hit and the new pads; false when the run is the
 * whole kernel, empty or not contiguous, or the new pads would be negative. */
static bool plan_axis(int64_t h, int64_t oh, int64_t k, int64_t s, int64_t d, int64_t pb,
                      int64_t pe, int64_t *first, int64_t *count, int64_t *npb,
                      int64_t *npe) {
  int64_t a = -1, b = -1;
  for (int64_t i = 0; i < k; i++) {
    if (!tap_hits(i, h, oh, s, d, pb))
      continue;
    if (a < 0)
      a = i;
    else if (b != i - 1)
      return false; /* a gap: not one run */
    b = i;
  }
  *first = a < 0 ? 0 : a;
  *count = a < 0 ? k : b - a + 1;
  *npb = pb - *first * d;
  /* the smallest end pad giving oh outputs: (h + pb' + pe' - d (k' - 1) - 1) / s + 1 */
  int64_t need = (oh - 1) * s + d * (*count - 1) + 1 - h - *npb;
  *npe = need < 0 ? 0 : need;
  bool same = (h + *npb + *npe - d * (*count - 1) - 1) / s + 1 == oh;
  (void)pe;
  return a >= 0 && *npb >= 0 && same;
}

/* Is node n a Conv whose kernel has taps the pass can drop? Fills *p. */
static bool taps_target(const nr_graph *g, const nr_node *n, taps_plan *p) {
  if (!nr_pu_is_op(n, "Conv") || n->n_inputs < 2 || n->n_outputs != 1)
    return false;
  int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
  if (x < 0 || w < 0 || y < 0 || !nr_pu_is_const(g, w) || nr_attr_int(n, "group", 1) != 1)
    return false;
  const nr_value *xv = &g->tensors[x].value, *wv = &g->tensors[w].value,
                 *yv = &g->tensors[y].value;
  int sp = wv->rank - 2;
  const char *ap = nr_attr_string(n, "auto_pad", "NOTSET");
  if (wv->dtype != NR_DTYPE_FLOAT || sp < 1 || sp > TAPS_MAX_SPATIAL ||
      xv->rank != wv->rank || yv->rank != wv->rank || !nr_value_shape_known(xv) ||
      !nr_value_shape_known(yv) || !wv->data || (strcmp(ap, "NOTSET") && strcmp(ap, "VALID")))
    return false;
  size_t ns = 0, nd = 0, np = 0;
  const int64_t *st = nr_attr_ints(n, "strides", &ns), *dil = nr_attr_ints(n, "dilations", &nd),
                *pads = nr_attr_ints(n, "pads", &np);
  bool valid = !strcmp(ap, "VALID");
  bool trims = false;
  p->spatial = sp;
  for (int a = 0; a < sp; a++) {
    int64_t k = wv->dims[2 + a], s = attr_at(st, ns, (size_t)a, 1),
            d = attr_at(dil, nd, (size_t)a, 1);
    int64_t pb = valid ? 0 : attr_at(pads, np, (size_t)a, 0),
            pe = valid ? 0 : attr_at(pads, np, (size_t)(a + sp), 0);
    if (s < 1 || d < 1 || pb < 0 || pe < 0 ||
        !plan_axis(xv->dims[2 + a], yv->dims[2 + a], k, s, d, pb, pe, &p->first[a],
                   &p->count[a], &p->pads[a], &p->pads[a + sp]))
      return false;
    trims = trims || p->count[a] < k;
  }
  return trims;
}

/* W[:, :, first..first+count) per spatial axis, as a new constant. */
static int sliced_weights(nr_graph *g, const nr_node *n, const taps_plan *p) {
  const nr_value *wv = &g->tensors[n->inputs[1]].value;
  int64_t dims[NR_MAX_RANK];
  memcpy(dims, wv->dims, sizeof(int64_t) * (size_t)wv->rank);
  for (int a = 0; a < p->spatial; a++)
    dims[2 + a] = p->count[a];
  nr_value nw = {0};
  if (nr_value_alloc(&nw, NR_DTYPE_FLOAT, wv->rank, dims, NULL))
    return -1;
  int64_t n_out = nr_value_count(&nw), idx[NR_MAX_RANK] = {0};
  const float *src = wv->data;
  float *dst = nw.data;
  for (int64_t o = 0; o < n_out; o++) {
    int64_t at = 0;
    for (int d = 0; d < wv->rank; d++) {
      int64_t i = d >= 2 ? idx[d] + p->first[d - 2] : idx[d];
      at = at * wv->dims[d] + i;
    }
    dst[o] = src[at];
    for (int d = wv->rank - 1; d >= 0 && ++idx[d] == dims[d]; d--)
      idx[d] = 0;
  }
  return nr_pu_add_const(g, n->name ? n->name : "conv", "/trimmed_weights", &nw);
}

static nr_status trim(nr_graph *g, int k, const taps_plan *p, nr_error *err) {
  int w = sliced_weights(g, &g->nodes[k], p);
  if (w < 0)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory trimming a Conv's kernel");
  g->nodes[k].inputs[1] = w;
  int64_t ks[TAPS_MAX_SPATIAL];
  for (int a = 0; a < p->spatial; a++)
    ks[a] = p->count[a];
  nr_status st = nr_pu_set_attr_ints(g, k, "kernel_shape", p->spatial, ks, err);
  if (!st)
    st = nr_pu_set_attr_ints(g, k, "pads", 2 * p->spatial, p->pads, err);
  if (!st)
    st = nr_pu_set_attr_string(g, k, "auto_pad", "NOTSET", err);
  return st;
}

static nr_status run_conv_taps(nr_compile_ctx *c) {
  nr_graph *g = c->graph;
  nr_status st = NR_OK;
  bool changed = false;
  for (int k = 0; !st && k < g->n_nodes; k++) {
    taps_plan p;
    if (!taps_target(g, &g->nodes[k], &p) ||
        !nr_route_is(c->route, NR_KNOB_TAPS_TRIM, &g->nodes[k], "on"))
      continue;
    st = trim(g, k, &p, c->err);
    changed = true;
  }
  return !st && changed ? nr_pu_finish(g, c->err) : st;
}

const nr_pass nr_pass_conv_taps = {"conv_taps", run_conv_taps};

static bool taps_applies(const nr_graph *g, const nr_node *n) {
  taps_plan p;
  return taps_target(g, n, &p);
}

const nr_knob_def nr_knobs_taps[] = {
    [NR_KNOB_ROW(NR_KNOB_TAPS_TRIM)] =
    {"taps.trim", "on|off", "on", NR_KNOB_NODE, 0, 0,
     "drop the kernel rows and columns of this Conv that read only padding at every "
     "output position (a dilation wider than the image)",
     taps_applies, NULL},
    [NR_KNOB_ROW(NR_KNOB_TAPS_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_taps, NR_KNOB_TAPS_END);
