/* cpuop.c - see cpuop.h: one-node CPU steps run by hand, with guard bytes. */
#include "cpuop.h"

#include "plan/knob_internal.h"
#include "kernels/ref/executor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const nr_knob_def nr_knobs_cpu_eltwise[], nr_knobs_cpu_norm[], nr_knobs_cpu_attn[];

#define GUARD 64



static uint8_t *guarded(size_t bytes) {
  uint8_t *b = malloc(bytes + 2 * GUARD);
  memset(b, 0xA5, bytes + 2 * GUARD);
  return b + GUARD;
}

static bool guards_ok(const void *p, size_t bytes) {
  const uint8_t *b = (const uint8_t *)p - GUARD;
  for (size_t i = 0; i < GUARD; i++)
    if (b[i] != 0xA5 || b[GUARD + bytes + i] != 0xA5)
      return false;
  return true;
}

static size_t vbytes(const nr_value *v) { return nr_value_nbytes(v) ? nr_value_nbytes(v) : 0; }

/* Builds graph, knob space and route (route text may be ""), plan slots and step.
 * ins[i] NULL: absent optional input; consts[i]: input i is a constant. */
nr_status cpuop_init(cpuop *o, const char *op, int opset, int n_attrs, const nr_attr *attrs,
                     int n_in, const nr_value *const *ins, const bool *consts, int n_out,
                     const nr_value *outs, const char *route) {
  memset(o, 0, sizeof *o);
  o->n_in = n_in;
  o->n_out = n_out;
  o->g = nr_graph_create(NULL);
  nr_node *nd = nr_graph_add_node(o->g);
  nd->name = strdup("n0");
  bool fused = !strncmp(op, "nnroute.", 8); /* an op of the nnroute domain */
  nd->op_type = strdup(fused ? op + 8 : op);
  nd->domain = strdup(fused ? "nnroute" : "");
  nd->opset = opset;
  nd->n_inputs = n_in;
  nd->n_outputs = n_out;
  nd->inputs = malloc(sizeof(int) * (size_t)(n_in + 1));
  nd->outputs = malloc(sizeof(int) * (size_t)(n_out + 1));
  nd->attrs = calloc((size_t)n_attrs + 1, sizeof(nr_attr));
  for (int i = 0; i < n_attrs; i++)
    nr_attr_copy(&nd->attrs[i], &attrs[i], NULL);
  nd->n_attrs = n_attrs;
  o->plan.slots = o->slots;
  o->step.n_in = n_in;
  o->step.n_out = n_out;
  for (int i = 0; i < n_in; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    nd->inputs[i] = o->step.in[i] = -1;
    if (!ins[i])
      continue;
    int t = nr_graph_add_tensor(o->g, name, 0);
    o->g->tensors[t].value = *ins[i];
    o->g->tensors[t].value.data = NULL;
    nd->inputs[i] = t;
    o->in[i] = *ins[i];
    size_t b = vbytes(ins[i]);
    o->in[i].data = guarded(b);
    memcpy(o->in[i].data, ins[i]->data, b);
    nr_slot *s = &o->slots[o->plan.n_slots];
    s->dtype = ins[i]->dtype;
    s->rank = ins[i]->rank;
    memcpy(s->dims, ins[i]->dims, sizeof s->dims);
    s->kind = consts && consts[i] ? NR_SLOT_CONST : NR_SLOT_INPUT;
    s->nbytes = b;
    o->step.in[i] = o->plan.n_slots++;
  }
  for (int i = 0; i < n_out; i++) {
    char name[16];
    snprintf(name, sizeof name, "y%d", i);
    int t = nr_graph_add_tensor(o->g, name, 0);
    o->g->tensors[t].value = outs[i]; /* knobs read output shapes */
    o->g->tensors[t].value.data = NULL;
    nd->outputs[i] = t;
    o->out[i] = outs[i];
    o->out[i].data = guarded(vbytes(&outs[i]));
    nr_slot *s = &o->slots[o->plan.n_slots];
    s->dtype = outs[i].dtype;
    s->rank = outs[i].rank;
    memcpy(s->dims, outs[i].dims, sizeof s->dims);
    s->nbytes = vbytes(&outs[i]);
    o->step.out[i] = o->plan.n_slots++;
  }
  const nr_knob_def *tables[] = {nr_knobs_cpu_eltwise, nr_knobs_cpu_norm,
                                 nr_knobs_cpu_attn};
  nr_status st = nr_knob_space_build_tables(tables, 3, o->g, false, &o->space, &o->err);
  if (!st)
    st = nr_route_init(&o->route, &o->space, &o->err);
  if (!st && route && route[0])
    st = nr_route_parse(&o->route, route, &o->err);
  return st;
}

void cpuop_free(cpuop *o) {
  for (int i = 0; i < o->n_in; i++)
    if (o->in[i].data)
      free((uint8_t *)o->in[i].data - GUARD);
  for (int i = 0; i < o->n_out; i++)
    if (o->out[i].data)
      free((uint8_t *)o->out[i].data - GUARD);
  free(o->plan.weights);
  nr_route_free(&o->route);
  nr_knob_space_free(&o->space);
  nr_graph_destroy(o->g);
}

cpuop *cpuop_new(void) { return calloc(1, sizeof(cpuop)); }
void *cpuop_out(cpuop *o, int i) { return o->out[i].data; }

static nr_tactic_ctx cpuop_ctx(cpuop *o) {
  return (nr_tactic_ctx){&o->plan, &o->g->nodes[0], &o->step, &o->route, &o->err};
}

/* Whether tactic id supports the node (constants are copied into the weights). */
bool cpuop_supports(cpuop *o, const char *id) {
  o->t = nr_tactic_find(id);
  if (!o->t || (o->t->isa & ~nr_cpu_isa()))
    return false;
  if (!o->plan.weights)
    for (int i = 0; i < o->n_in; i++)
      if (o->step.in[i] >= 0 && o->slots[o->step.in[i]].kind == NR_SLOT_CONST)
        nr_plan_add_weights(&o->plan, o->in[i].data, vbytes(&o->in[i]),
                            &o->slots[o->step.in[i]].offset, NULL);
  nr_tactic_ctx c = cpuop_ctx(o);
  o->step.tactic = o->t;
  return !o->t->supports || o->t->supports(&c);
}

/* prepare() and run() of the tactic chosen by cpuop_supports, with the data prepare()
 * packed into the plan's weights (for conv rows); checks guards. */
nr_status cpuop_run(cpuop *o, nr_threadpool *pool, bool *guards) {
  nr_tactic_ctx c = cpuop_ctx(o);
  memset(o->step.params, 0, sizeof o->step.params);
  nr_status st = o->t->prepare ? o->t->prepare(&c, &o->plan, &o->step) : NR_OK;
  if (st)
    return st;
  void *in[MAXIO] = {0}, *out[MAXIO] = {0};
  const nr_slot *ins[MAXIO] = {0}, *outs[MAXIO] = {0};
  for (int i = 0; i < o->n_in; i++) {
    in[i] = o->in[i].data;
    ins[i] = o->step.in[i] >= 0 ? &o->slots[o->step.in[i]] : NULL;
  }
  for (int i = 0; i < o->n_out; i++) {
    out[i] = o->out[i].data;
    outs[i] = &o->slots[o->step.out[i]];
  }
  /* scratch the tactic asked for, 64-byte aligned, guarded on both sides */
  uint8_t *scratch = NULL;
  if (o->step.scratch) {
    size_t sb = (size_t)o->step.scratch;
    scratch = aligned_alloc(64, (sb + 3 * GUARD + 63) / 64 * 64);
    memset(scratch, 0xA5, sb + 2 * GUARD);
  }
  const void *packed =
      o->step.packed_size ? (const uint8_t *)o->plan.weights + o->step.packed_offset : NULL;
  nr_exec_args a = {&o->plan, &o->step, &o->g->nodes[0], in, out, ins, outs,
                    packed, scratch ? scratch + GUARD : NULL, pool, &o->err};
  st = o->t->run(&a);
  *guards = !scratch || guards_ok(scratch + GUARD, (size_t)o->step.scratch);
  free(scratch);
  for (int i = 0; i < o->n_in; i++)
    if (in[i] && !guards_ok(in[i], vbytes(&o->in[i])))
      *guards = false;
  for (int i = 0; i < o->n_out; i++)
    if (!guards_ok(out[i], vbytes(&o->out[i])))
      *guards = false;
  return st;
}

/* The reference outputs (owned values the caller frees). */
nr_status cpuop_ref(cpuop *o, int n_attrs, const nr_attr *attrs, nr_value *ref) {
  const nr_value *ins[MAXIO];
  for (int i = 0; i < o->n_in; i++)
    ins[i] = o->in[i].data ? &o->in[i] : NULL;
  memset(ref, 0, sizeof(nr_value) * (size_t)o->n_out);
  return nr_ref_exec_node(o->g->nodes[0].op_type, o->g->nodes[0].domain,
                          o->g->nodes[0].opset, n_attrs, attrs,
                          o->n_in, ins, o->n_out, ref, &o->err);
}

/* Max of |got - want| / (atol + rtol |want|) over n floats; NaN must match NaN. */
double cpuop_err(const float *got, const float *want, int64_t n, double atol, double rtol) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isnan(want[i]) || isnan(got[i])) {
      if (isnan(want[i]) != isnan(got[i]))
        return INFINITY;
      continue;
    }
    if (want[i] == got[i])
      continue;
    double e = fabs((double)got[i] - want[i]) / (atol + rtol * fabs((double)want[i]));
    worst = e > worst ? e : worst;
  }
  return worst;
}
