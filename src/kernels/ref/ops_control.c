/* ops_control.c - control flow: If, Loop and Scan, whose bodies are subgraphs run by
 * the reference executor in a child scope.
 *
 * Output shapes of control flow depend on what the body computes (and, for Loop, on
 * how many iterations run), so at run time these ops allocate their own outputs
 * (NR_OP_ALLOCATES_OUTPUTS); statically they infer what the bodies tell. */
#include "ir/op.h"
#include "kernels/ref/ref_util.h"

#include <stdlib.h>
#include <string.h>

#define MAX_VALUES 64

static nr_graph *graph_attr(const nr_op_ctx *ctx, const char *name) {
  const nr_attr *a = nr_node_attr(ctx->node, name);
  return a && a->type == NR_ATTR_GRAPH ? a->g : NULL;
}

/* Moves src into dst (dst's old data freed). */
static void move_value(nr_value *dst, nr_value *src) {
  nr_value_free(dst);
  *dst = *src;
  src->data = NULL;
  src->owned = false;
}

static void free_values(nr_value *v, int n) {
  for (int i = 0; i < n; i++)
    nr_value_free(&v[i]);
}

/* ---- If ------------------------------------------------------------------------- */

static nr_status if_infer(nr_op_ctx *ctx) {
  nr_status st = nr_op_check_arity(ctx, 1, 1);
  nr_graph *then_g = graph_attr(ctx, "then_branch"), *else_g = graph_attr(ctx, "else_branch");
  if (!st && (!then_g || !else_g))
    st = nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "needs then_branch and else_branch graphs");
  if (st || ctx->runtime)
    return st;
  if (then_g->n_outputs != ctx->n_outputs || else_g->n_outputs != ctx->n_outputs)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "branches give %d and %d outputs, the node has %d",
                      then_g->n_outputs, else_g->n_outputs, ctx->n_outputs);
  nr_value a[MAX_VALUES], b[MAX_VALUES];
  if (ctx->n_outputs > MAX_VALUES)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "more than %d outputs", MAX_VALUES);
  st = nr_op_infer_subgraph(ctx, then_g, 0, NULL, a);
  if (!st)
    st = nr_op_infer_subgraph(ctx, else_g, 0, NULL, b);
  for (int o = 0; !st && o < ctx->n_outputs; o++) {
    /* Keep what both branches agree on. */
    int rank = a[o].rank == b[o].rank ? a[o].rank : -1;
    int64_t dims[NR_MAX_RANK];
    for (int d = 0; d < rank; d++)
      dims[d] = a[o].dims[d] == b[o].dims[d] ? a[o].dims[d] : NR_DIM_UNKNOWN;
    st = nr_op_set_output(ctx, o, a[o].dtype ? a[o].dtype : b[o].dtype, rank, dims);
  }
  return st;
}

static nr_status if_run(nr_op_ctx *ctx) {
  const nr_value *cond = nr_op_in(ctx, 0);
  if (nr_value_count(cond) != 1)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "the condition must hold one element");
  bool c = nr_load_i64(cond->dtype, cond->data, 0) != 0;
  nr_graph *body = graph_attr(ctx, c ? "then_branch" : "else_branch");
  nr_value outs[MAX_VALUES] = {0};
  if (body->n_outputs != ctx->n_outputs || ctx->n_outputs > MAX_VALUES)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "branch gives %d outputs, node has %d",
                      body->n_outputs, ctx->n_outputs);
  nr_status st = nr_op_run_subgraph(ctx, body, 0, NULL, outs);
  for (int o = 0; !st && o < ctx->n_outputs; o++)
    if (ctx->outputs[o])
      move_value(ctx->outputs[o], &outs[o]);
  free_values(outs, ctx->n_outputs);
  return st;
}

/* ---- stacking per-iteration values ---------------------------------------------- */

typedef struct stack {
  nr_value *items;
  int n, cap;
} stack;

static nr_status stack_push(nr_op_ctx *ctx, stack *s, nr_value *v) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 16;
    nr_value *items = realloc(s->items, sizeof *items * (size_t)cap);
    if (!items)
      return nr_op_fail(ctx, NR_ERR_NOMEM, "out of memory collecting scan outputs");
    s->items = items;
    s->cap = cap;
  }
  memset(&s->items[s->n], 0, sizeof s->items[s->n]);
  move_value(&s->items[s->n++], v);
  return NR_OK;
}

static void stack_free(stack *s) {
  free_values(s->items, s->n);
  free(s->items);
}

/* Stacks s's items along a new axis (reversed order when reverse) into out. When s is
 * empty, proto describes the element (dtype and shape, maybe unknown). */
static nr_status stack_into(nr_op_ctx *ctx, const stack *s, int axis, bool reverse,
                            const nr_value *proto, nr_value *out) {
  const nr_value *e = s->n ? &s->items[0] : proto;
  int rank = e->rank >= 0 ? e->rank + 1 : 1;
  int64_t dims[NR_MAX_RANK + 1];
  if (rank > NR_MAX_RANK || axis < 0 || axis >= rank)
    return nr_op_fail(ctx, NR_ERR_SHAPE, "cannot stack scan outputs on axis %d", axis);
  for (int d = 0, k = 0; d < rank; d++) {
    if (d == axis) {
      dims[d] = s->n;
      continue;
    }
    dims[d] = e->dims[k] < 0 ? 0 : e->dims[k]; /* unknown only when nothing ran */
    k++;
  }
  nr_dtype dt = e->dtype ? e->dtype : NR_DTYPE_FLOAT;
  nr_status st = nr_value_alloc(out, dt, rank, dims, ctx->err);
  if (st || !s->n)
    return st;
  size_t esize = nr_dtype_size(dt);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; d++)
    outer *= dims[d];
  for (int d = axis + 1; d < rank; d++)
    inner *= dims[d];
  for (int t = 0; t < s->n; t++) {
    const nr_value *v = &s->items[t];
    if (v->dtype != dt || nr_value_count(v) != outer * inner)
      return nr_op_fail(ctx, NR_ERR_SHAPE, "scan output changes shape between iterations");
    int p = reverse ? s->n - 1 - t : t;
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)out->data + (size_t)((o * s->n + p) * inner) * esize,
             (const char *)v->data + (size_t)(o * inner) * esize, (size_t)inner * esize);
  }
  return NR_OK;
}

/* ---- Loop ----------------------------------------------------------------------- */

static nr_status loop_infer(nr_op_ctx *ctx) {
  nr_graph *body = graph_attr(ctx, "body");
  if (!body)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "needs a body graph");
  int n_carried = ctx->n_inputs - 2;
  if (n_carried < 0 || body->n_inputs != n_carried + 2 ||
      body->n_outputs < n_carried + 1 || ctx->n_outputs != body->n_outputs - 1)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL,
                      "body takes %d inputs and gives %d outputs; the node has %d and %d",
                      body->n_inputs, body->n_outputs, ctx->n_inputs, ctx->n_outputs);
  if (ctx->runtime || ctx->n_inputs > MAX_VALUES || body->n_outputs > MAX_VALUES)
    return NR_OK;
  nr_value in[MAX_VALUES] = {0}, out[MAX_VALUES] = {0};
  in[0] = (nr_value){NR_DTYPE_INT64, 0, {0}, NULL, false};
  in[1] = (nr_value){NR_DTYPE_BOOL, 0, {0}, NULL, false};
  for (int i = 0; i < n_carried; i++) {
    const nr_value *v = nr_op_in(ctx, i + 2);
    in[i + 2] = v ? *v : (nr_value){.rank = -1};
    in[i + 2].data = NULL;
    in[i + 2].owned = false;
  }
  nr_status st = nr_op_infer_subgraph(ctx, body, n_carried + 2, in, out);
  for (int o = 0; !st && o < ctx->n_outputs; o++) {
    const nr_value *b = &out[o + 1];
    if (o < n_carried) { /* carried values may change shape across iterations */
      int64_t dims[NR_MAX_RANK];
      for (int d = 0; d < b->rank; d++)
        dims[d] = b->dims[d] == in[o + 2].dims[d] ? b->dims[d] : NR_DIM_UNKNOWN;
      st = nr_op_set_output(ctx, o, b->dtype, b->rank == in[o + 2].rank ? b->rank : -1,
                            dims);
    } else {
      int64_t dims[NR_MAX_RANK] = {NR_DIM_UNKNOWN};
      for (int d = 0; d < b->rank && d + 1 < NR_MAX_RANK; d++)
        dims[d + 1] = b->dims[d];
      st = nr_op_set_output(ctx, o, b->dtype, b->rank >= 0 ? b->rank + 1 : -1, dims);
    }
  }
  return st;
}

static nr_status loop_iterate(nr_op_ctx *ctx, nr_graph *body, nr_value *carried,
                              int n_carried, stack *scans, int n_scans) {
  const nr_value *m = nr_op_in(ctx, 0), *c = nr_op_in(ctx, 1);
  int64_t trip = m ? nr_load_i64(m->dtype, m->data, 0) : INT64_MAX;
  bool cond = c ? nr_load_i64(c->dtype, c->data, 0) != 0 : true;
  nr_value in[MAX_VALUES] = {0}, out[MAX_VALUES] = {0};
  int64_t iter = 0;
  uint8_t cond_byte;
  nr_status st = NR_OK;
  for (; !st && iter < trip && cond; iter++) {
    cond_byte = cond;
    in[0] = (nr_value){NR_DTYPE_INT64, 0, {0}, &iter, false};
    in[1] = (nr_value){NR_DTYPE_BOOL, 0, {0}, &cond_byte, false};
    for (int i = 0; i < n_carried; i++)
      in[i + 2] = carried[i], in[i + 2].owned = false;
    st = nr_op_run_subgraph(ctx, body, n_carried + 2, in, out);
    if (st)
      break;
    cond = nr_load_i64(out[0].dtype, out[0].data, 0) != 0;
    for (int i = 0; i < n_carried; i++)
      move_value(&carried[i], &out[i + 1]);
    for (int k = 0; !st && k < n_scans; k++)
      st = stack_push(ctx, &scans[k], &out[1 + n_carried + k]);
    free_values(out, body->n_outputs);
  }
  free_values(out, body->n_outputs);
  return st;
}

static nr_status loop_run(nr_op_ctx *ctx) {
  nr_graph *body = graph_attr(ctx, "body");
  int n_carried = ctx->n_inputs - 2, n_scans = ctx->n_outputs - n_carried;
  if (body->n_outputs > MAX_VALUES)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "more than %d body outputs", MAX_VALUES);
  nr_value carried[MAX_VALUES] = {0};
  stack scans[MAX_VALUES] = {0};
  nr_status st = NR_OK;
  for (int i = 0; !st && i < n_carried; i++)
    st = nr_value_copy(&carried[i], nr_op_in(ctx, i + 2), ctx->err);
  if (!st)
    st = loop_iterate(ctx, body, carried, n_carried, scans, n_scans);
  for (int i = 0; !st && i < n_carried; i++)
    if (ctx->outputs[i])
      move_value(ctx->outputs[i], &carried[i]);
  for (int k = 0; !st && k < n_scans; k++) {
    const nr_value *proto = &body->tensors[body->outputs[1 + n_carried + k]].value;
    if (ctx->outputs[n_carried + k])
      st = stack_into(ctx, &scans[k], 0, false, proto, ctx->outputs[n_carried + k]);
  }
  free_values(carried, n_carried);
  for (int k = 0; k < n_scans; k++)
    stack_free(&scans[k]);
  return st;
}

/* ---- Scan (opset 9+) ------------------------------------------------------------ */

/* Reads the per-input axis or direction list attribute (default 0). */
static int64_t list_attr(const nr_op_ctx *ctx, const char *name, int i) {
  size_t n;
  const int64_t *v = nr_attr_ints(ctx->node, name, &n);
  return v && (size_t)i < n ? v[i] : 0;
}

/* The t-th slice of v along axis, as a new value. */
static nr_status slice_at(nr_op_ctx *ctx, const nr_value *v, int axis, int64_t t,
                          nr_value *out) {
  int64_t dims[NR_MAX_RANK];
  for (int d = 0, k = 0; d < v->rank; d++)
    if (d != axis)
      dims[k++] = v->dims[d];
  nr_status st = nr_value_alloc(out, v->dtype, v->rank - 1, dims, ctx->err);
  if (st)
    return st;
  size_t esize = nr_dtype_size(v->dtype);
  int64_t outer = 1, inner = 1, len = v->dims[axis];
  for (int d = 0; d < axis; d++)
    outer *= v->dims[d];
  for (int d = axis + 1; d < v->rank; d++)
    inner *= v->dims[d];
  for (int64_t o = 0; o < outer; o++)
    memcpy((char *)out->data + (size_t)(o * inner) * esize,
           (const char *)v->data + (size_t)((o * len + t) * inner) * esize,
           (size_t)inner * esize);
  return NR_OK;
}

static nr_status scan_check(nr_op_ctx *ctx, nr_graph **body, int *n_state, int *n_scan_in) {
  *body = graph_attr(ctx, "body");
  int64_t m = nr_attr_int(ctx->node, "num_scan_inputs", -1);
  if (ctx->node->opset < 9)
    return nr_op_fail(ctx, NR_ERR_UNSUPPORTED, "Scan before opset 9 (batched form)");
  if (!*body || m < 1 || m > ctx->n_inputs)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "needs a body and num_scan_inputs >= 1");
  *n_scan_in = (int)m;
  *n_state = ctx->n_inputs - (int)m;
  if ((*body)->n_inputs != ctx->n_inputs || (*body)->n_outputs != ctx->n_outputs ||
      ctx->n_outputs > MAX_VALUES || ctx->n_inputs > MAX_VALUES)
    return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "body and node disagree on arity");
  for (int i = 0; i < ctx->n_inputs; i++)
    if (!nr_op_in(ctx, i))
      return nr_op_fail(ctx, NR_ERR_INVALID_MODEL, "input %d is missing; every Scan "
                        "input is a state or a scanned sequence", i);
  return NR_OK;
}

static nr_status scan_infer(nr_op_ctx *ctx) {
  nr_graph *body;
  int n_state, n_in;
  nr_status st = scan_check(ctx, &body, &n_state, &n_in);
  if (st || ctx->runtime)
    return st;
  nr_value in[MAX_VALUES] = {0}, out[MAX_VALUES] = {0};
  int64_t len = NR_DIM_UNKNOWN;
  for (int i = 0; i < ctx->n_inputs; i++) {
    const nr_value *v = nr_op_in(ctx, i);
    in[i] = *v;
    in[i].data = NULL;
    in[i].owned = false;
    if (i >= n_state && v->rank > 0) {
      int axis;
      if ((st = nr_op_axis(ctx, list_attr(ctx, "scan_input_axes", i - n_state), v->rank,
                           &axis)))
        return st;
      len = v->dims[axis];
      for (int d = axis; d + 1 < v->rank; d++)
        in[i].dims[d] = v->dims[d + 1];
      in[i].rank = v->rank - 1;
    }
  }
  st = nr_op_infer_subgraph(ctx, body, ctx->n_inputs, in, out);
  for (int o = 0; !st && o < ctx->n_outputs; o++) {
    if (o < n_state) {
      st = nr_op_set_output(ctx, o, out[o].dtype, out[o].rank, out[o].dims);
      continue;
    }
    int rank = out[o].rank >= 0 ? out[o].rank + 1 : -1, axis = 0;
    if (rank > 0 && (st = nr_op_axis(ctx, list_attr(ctx, "scan_output_axes", o - n_state),
                                     rank, &axis)))
      return st;
    int64_t dims[NR_MAX_RANK];
    for (int d = 0, k = 0; d < rank; d++)
      dims[d] = d == axis ? len : out[o].dims[k++];
    st = nr_op_set_output(ctx, o, out[o].dtype, rank, dims);
  }
  return st;
}

static nr_status scan_steps(nr_op_ctx *ctx, nr_graph *body, int n_state, int n_in,
                            nr_value *state, stack *outs, int64_t len) {
  nr_value in[MAX_VALUES] = {0}, out[MAX_VALUES] = {0};
  nr_status st = NR_OK;
  int n_out_scan = ctx->n_outputs - n_state;
  for (int64_t t = 0; !st && t < len; t++) {
    for (int i = 0; i < n_state; i++)
      in[i] = state[i], in[i].owned = false;
    for (int j = 0; !st && j < n_in; j++) {
      const nr_value *v = nr_op_in(ctx, n_state + j);
      int axis;
      st = nr_op_axis(ctx, list_attr(ctx, "scan_input_axes", j), v->rank, &axis);
      int64_t pos = list_attr(ctx, "scan_input_directions", j) ? len - 1 - t : t;
      if (!st)
        st = slice_at(ctx, v, axis, pos, &in[n_state + j]);
    }
    if (!st)
      st = nr_op_run_subgraph(ctx, body, n_state + n_in, in, out);
    for (int i = 0; !st && i < n_state; i++)
      move_value(&state[i], &out[i]);
    for (int k = 0; !st && k < n_out_scan; k++)
      st = stack_push(ctx, &outs[k], &out[n_state + k]);
    free_values(in + n_state, n_in);
    free_values(out, ctx->n_outputs);
  }
  return st;
}

static nr_status scan_run(nr_op_ctx *ctx) {
  nr_graph *body;
  int n_state, n_in;
  nr_status st = scan_check(ctx, &body, &n_state, &n_in);
  if (st)
    return st;
  const nr_value *first = nr_op_in(ctx, n_state);
  int axis0;
  if ((st = nr_op_axis(ctx, list_attr(ctx, "scan_input_axes", 0), first->rank, &axis0)))
    return st;
  int64_t len = first->dims[axis0];
  nr_value state[MAX_VALUES] = {0};
  stack outs[MAX_VALUES] = {0};
  for (int i = 0; !st && i < n_state; i++)
    st = nr_value_copy(&state[i], nr_op_in(ctx, i), ctx->err);
  if (!st)
    st = scan_steps(ctx, body, n_state, n_in, state, outs, len);
  for (int i = 0; !st && i < n_state; i++)
    if (ctx->outputs[i])
      move_value(ctx->outputs[i], &state[i]);
  for (int k = 0; !st && k < ctx->n_outputs - n_state; k++) {
    nr_value *o = ctx->outputs[n_state + k];
    const nr_value *proto = &body->tensors[body->outputs[n_state + k]].value;
    int rank = (outs[k].n ? outs[k].items[0].rank : proto->rank) + 1, axis = 0;
    if (o && !(st = nr_op_axis(ctx, list_attr(ctx, "scan_output_axes", k), rank, &axis)))
      st = stack_into(ctx, &outs[k], axis, list_attr(ctx, "scan_output_directions", k),
                      proto, o);
  }
  free_values(state, n_state);
  for (int k = 0; k < ctx->n_outputs - n_state; k++)
    stack_free(&outs[k]);
  return st;
}

const nr_op_def nr_ref_ops_control[] = {
    {"", "If", 1, if_infer, if_run, NR_OP_ALLOCATES_OUTPUTS},
    {"", "Loop", 1, loop_infer, loop_run, NR_OP_ALLOCATES_OUTPUTS},
    {"", "Scan", 8, scan_infer, scan_run, NR_OP_ALLOCATES_OUTPUTS},
    {0},
};
