/* memory.c - the memory planning pass: lifetimes, in-place reuse and arena offsets.
 *
 * Every ARENA slot gets a lifetime [first_use, last_use] in step indices (graph
 * outputs live to n_steps, past the last step, because the context copies them out
 * at the end) and then an arena offset aligned to memory.align (64 bytes by default;
 * 256 keeps tensors off shared cache-line pairs and prefetch streams, 4096 starts
 * every block on its own page offset). Two slots whose lifetimes
 * overlap (inclusively: a step's inputs and outputs are live together) never share
 * bytes. In-place reuse runs first and merges a step's output 0 into its dying input
 * 0; each merged group is placed as one block with the union of the lifetimes.
 *
 * Knobs:
 *   memory.plan     naive: one region per block, in slot order (arena = sum).
 *                   greedy_size: blocks by decreasing size, each at the lowest offset
 *                   free over its lifetime. greedy_first_use: the same, in order of
 *                   first use (ties: larger first).
 *   memory.align    alignment of every block's offset and size (64|256|4096).
 *   memory.inplace  on: a step whose op can run in place writes output 0 over input
 *                   0 (for Add and Mul, else input 1) when that is an ARENA slot read
 *                   for the last time there and of the same dtype, shape, layout and
 *                   size as the output. The op decides (the tactic
 *                   table has no in-place flag): unary elementwise ops, Clip,
 *                   Add/Sub/Mul/Div, nnroute.EltwiseChain; and never for tactics whose
 *                   source is "onednn" (its primitives may read ahead of writes) or
 *                   "ref" (the reference tactic clears its outputs before running
 *                   the kernel, which would erase the input). Tactics of those ops
 *                   must read element i of a same-shaped input only to compute
 *                   output element i, and must not clear the output first.
 *   memory.views    on: a data-movement step whose output (or input) is a contiguous
 *                   piece of another tensor places it inside that tensor's bytes, so
 *                   the step moves nothing: the copy tactics (nr_copy_*, and
 *                   nr_cuda_copy_* on the GPU) skip a copy whose source and
 *                   destination coincide. Reshape-like outputs are their
 *                   input; the inputs of a Concat whose axis has nothing outer to it
 *                   (batch-1 channel concat) are pieces of its output; such outputs of
 *                   a Split or Slice are pieces of its input. In-place reuse
 *                   then asks the whole group of slots sharing bytes to die, not one.
 *
 * The functions below are reachable from tests through nr_memory_plan(). */
#include "ir/fused.h"
#include "passes/fate.h"
#include "passes/pass_knobs.h"
#include "plan/pass.h"
#include "plan/tactic.h"
#include "util/error.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 64u /* the minimum: every tactic's vector loads assume it */

typedef enum mem_strategy {
  MEM_NAIVE = 0,
  MEM_GREEDY_SIZE = 1,
  MEM_GREEDY_FIRST_USE = 2,
} mem_strategy;

/* For tests: plans p with a strategy (0 naive, 1 greedy_size, 2 greedy_first_use),
 * 64-byte alignment. */
nr_status nr_memory_plan(nr_plan *p, int strategy, bool inplace, nr_error *err);
/* The same with the offsets (and block sizes) aligned to align, a power of two >= 64
 * (views on), and with views chosen too. */
nr_status nr_memory_plan_aligned(nr_plan *p, int strategy, bool inplace, uint64_t align,
                                 nr_error *err);
nr_status nr_memory_plan_views(nr_plan *p, int strategy, bool inplace, bool views,
                               uint64_t align, nr_error *err);

/* ---- lifetimes ------------------------------------------------------------------ */

static void touch(nr_slot *s, int step) {
  if (s->first_use < -1 || step < s->first_use)
    s->first_use = step;
  if (step > s->last_use)
    s->last_use = step;
}

static nr_status compute_lifetimes(nr_plan *p, nr_error *err) {
  for (int i = 0; i < p->n_slots; i++) {
    nr_slot *s = &p->slots[i];
    s->first_use = s->kind == NR_SLOT_ARENA ? -2 : -1; /* -2: not yet seen */
    s->last_use = -1;
    s->alias_of = -1;
  }
  for (int k = 0; k < p->n_steps; k++) {
    const nr_step *st = &p->steps[k];
    for (int j = 0; j < st->n_in + st->n_out; j++) {
      int idx = j < st->n_in ? st->in[j] : st->out[j - st->n_in];
      if (idx < 0)
        continue;
      if (idx >= p->n_slots)
        return nr_errorf(err, NR_ERR_INTERNAL, "memory: step %d refers to slot %d of %d",
                         k, idx, p->n_slots);
      touch(&p->slots[idx], k);
    }
  }
  for (int i = 0; i < p->n_outputs; i++)
    if (p->outputs[i] >= 0 && p->outputs[i] < p->n_slots)
      touch(&p->slots[p->outputs[i]], p->n_steps);
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].first_use == -2) /* an unused arena slot: a point lifetime */
      p->slots[i].first_use = p->slots[i].last_use = 0;
  return NR_OK;
}

/* ---- in-place ------------------------------------------------------------------- */

static const char *const inplace_ops[] = {
    "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu",
    "Softplus", "Softsign", "Elu", "Selu", "Celu", "ThresholdedRelu", "Shrink", "Mish",
    "Swish", "Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Neg", "Floor", "Ceil", "Round",
    "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
    "Acosh", "Atanh", "Not", "BitwiseNot", "Clip", "Add", "Sub", "Mul", "Div", NULL,
};

static bool op_inplace(const nr_node *n) {
  if (!strcmp(n->domain, NR_DOMAIN))
    return !strcmp(n->op_type, "EltwiseChain");
  if (n->domain[0])
    return false;
  for (int i = 0; inplace_ops[i]; i++)
    if (!strcmp(n->op_type, inplace_ops[i]))
      return true;
  return false;
}

static bool same_storage(const nr_slot *a, const nr_slot *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->layout != b->layout ||
      a->nbytes != b->nbytes)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

static int root_of(const nr_plan *p, int s) {
  while (p->slots[s].alias_of >= 0)
    s = p->slots[s].alias_of;
  return s;
}

/* Byte offset of slot s inside its root: delta[] holds each slot's offset inside the
 * slot it aliases (0 for in-place reuse and reshapes). */
static uint64_t delta_to_root(const nr_plan *p, const uint64_t *delta, int s) {
  uint64_t d = 0;
  for (; p->slots[s].alias_of >= 0; s = p->slots[s].alias_of)
    d += delta[s];
  return d;
}

/* Last use of any slot sharing root r's bytes, and the extent of those bytes. */
static int group_last(const nr_plan *p, int r) {
  int last = p->slots[r].last_use;
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].kind == NR_SLOT_ARENA && root_of(p, i) == r && p->slots[i].last_use > last)
      last = p->slots[i].last_use;
  return last;
}

static uint64_t group_extent(const nr_plan *p, const uint64_t *delta, int r) {
  uint64_t end = p->slots[r].nbytes;
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].kind == NR_SLOT_ARENA && root_of(p, i) == r) {
      uint64_t e = delta_to_root(p, delta, i) + p->slots[i].nbytes;
      end = e > end ? e : end;
    }
  return end;
}

/* Can step k write output 0 over input i: an ARENA slot read for the last time here,
 * not also an output, with the output's dtype, shape, layout and size? */
static bool input_reusable(const nr_plan *p, int k, int i) {
  const nr_step *st = &p->steps[k];
  if (i >= st->n_in || st->in[i] < 0)
    return false;
  const nr_slot *in = &p->slots[st->in[i]], *out = &p->slots[st->out[0]];
  if (in->kind != NR_SLOT_ARENA || in->last_use != k ||
      group_last(p, root_of(p, st->in[i])) != k || p->slots[st->out[0]].alias_of >= 0)
    return false;
  for (int j = 0; j < st->n_out; j++)
    if (st->out[j] == st->in[i])
      return false;
  return same_storage(in, out);
}

/* The input step k's output 0 may reuse, or -1. Input 0 first; for the commutative
 * Add and Mul also input 1 (squeeze-excitation blocks compute Mul(scale, x) with the
 * broadcast operand first). */
static int inplace_input(const nr_plan *p, int k) {
  const nr_step *st = &p->steps[k];
  if (st->node < 0 || !p->graph || st->node >= p->graph->n_nodes)
    return -1;
  if (!st->tactic || !st->tactic->source || !strcmp(st->tactic->source, "onednn") ||
      !strcmp(st->tactic->source, "ref"))
    return -1;
  if (st->n_out < 1 || st->out[0] < 0 || p->slots[st->out[0]].kind != NR_SLOT_ARENA)
    return -1;
  const nr_node *n = &p->graph->nodes[st->node];
  if (!op_inplace(n))
    return -1;
  if (input_reusable(p, k, 0))
    return 0;
  bool commutative = !n->domain[0] && (!strcmp(n->op_type, "Add") ||
                                       !strcmp(n->op_type, "Mul"));
  return commutative && input_reusable(p, k, 1) ? 1 : -1;
}

static void plan_inplace(nr_plan *p) {
  for (int k = 0; k < p->n_steps; k++) {
    int i = inplace_input(p, k);
    if (i >= 0)
      p->slots[p->steps[k].out[0]].alias_of = p->steps[k].in[i];
  }
}

/* ---- views ---------------------------------------------------------------------- */

static const char *const reshaping_ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                           "Identity", NULL};

typedef enum move_kind { MOVE_NONE, MOVE_RESHAPE, MOVE_CONCAT, MOVE_SPLIT, MOVE_SLICE } move_kind;

/* What step st moves, when its tactic is a plain-layout copy (algo "copy": the CPU's
 * nr_copy_* and the GPU's nr_cuda_copy_*, which skip a piece whose source is its
 * destination) of an ONNX reshaping op, Concat, Split or Slice; else MOVE_NONE. */
static move_kind move_of(const nr_plan *p, const nr_step *st) {
  const nr_tactic *t = st->tactic;
  if (!t || !t->algo || strcmp(t->algo, "copy") || t->layout != NR_LAYOUT_PLAIN ||
      st->node < 0 || !p->graph || p->graph->nodes[st->node].domain[0])
    return MOVE_NONE;
  const char *op = p->graph->nodes[st->node].op_type;
  for (int i = 0; reshaping_ops[i]; i++)
    if (!strcmp(op, reshaping_ops[i]))
      return MOVE_RESHAPE;
  return !strcmp(op, "Concat") ? MOVE_CONCAT
         : !strcmp(op, "Split") ? MOVE_SPLIT
         : !strcmp(op, "Slice") ? MOVE_SLICE
                                : MOVE_NONE;
}

static bool fresh(const nr_plan *p, int s, int k) {
  return s >= 0 && p->slots[s].kind == NR_SLOT_ARENA && p->slots[s].alias_of < 0 &&
         p->slots[s].first_use == k && p->slots[s].layout == NR_LAYOUT_PLAIN;
}

static bool arena_plain(const nr_plan *p, int s) {
  return s >= 0 && p->slots[s].kind == NR_SLOT_ARENA &&
         p->slots[s].layout == NR_LAYOUT_PLAIN;
}

static uint64_t prod_dims(const nr_slot *s, int from, int to) {
  uint64_t n = 1;
  for (int d = from; d < to; d++)
    n *= (uint64_t)s->dims[d];
  return n;
}

static int copy_axis(const nr_plan *p, const nr_step *st, int rank) {
  int64_t a = nr_attr_int(&p->graph->nodes[st->node], "axis", 0);
  return (int)(a < 0 ? a + rank : a);
}

/* Concat at step k: inputs whose bytes are a group of their own, exactly as large, go
 * inside the output at their offsets (only when the axis has nothing outer to it). */
static void view_concat(nr_plan *p, uint64_t *delta, int k) {
  const nr_step *st = &p->steps[k];
  int y = st->out[0];
  if (!fresh(p, y, k))
    return;
  const nr_slot *ys = &p->slots[y];
  int axis = copy_axis(p, st, ys->rank);
  if (axis < 0 || axis >= ys->rank || prod_dims(ys, 0, axis) != 1)
    return;
  uint64_t at = 0;
  for (int i = 0; i < st->n_in; i++) {
    int x = st->in[i];
    const nr_slot *xs = &p->slots[x];
    uint64_t bytes = xs->nbytes;
    int r = arena_plain(p, x) ? root_of(p, x) : -1;
    bool once = true;
    for (int j = 0; j < st->n_in; j++)
      once &= j == i || st->in[j] < 0 || r < 0 || root_of(p, st->in[j]) != r;
    if (r >= 0 && r != y && once && delta_to_root(p, delta, x) == 0 &&
        group_extent(p, delta, r) == bytes && p->slots[r].layout == NR_LAYOUT_PLAIN) {
      p->slots[r].alias_of = y;
      delta[r] = at;
    }
    at += bytes;
  }
}

/* Split / Slice at step k: an output that is one contiguous run of the input's bytes
 * goes inside the input. */
static void view_pieces(nr_plan *p, uint64_t *delta, int k) {
  const nr_step *st = &p->steps[k];
  int x = st->in[0];
  if (!arena_plain(p, x))
    return;
  const nr_slot *xs = &p->slots[x];
  size_t es = nr_dtype_size(xs->dtype);
  uint64_t at = 0;
  for (int o = 0; o < st->n_out; o++) {
    int y = st->out[o];
    if (y < 0)
      continue;
    const nr_slot *ys = &p->slots[y];
    uint64_t off = 0;
    bool run = false;
    if (move_of(p, st) == MOVE_SPLIT) {
      int axis = copy_axis(p, st, xs->rank);
      run = axis >= 0 && axis < xs->rank && prod_dims(xs, 0, axis) == 1;
      off = at;
      at += ys->nbytes;
    } else { /* Slice: nr_slice_params (nr_step_slice_prepare); contiguous when
              * every axis of more than one element steps by 1, every dim before the
              * first sliced one is 1 and every dim after it is whole */
      nr_slice_params sp;
      memcpy(&sp, st->params, sizeof sp);
      int first = -1;
      run = ys->rank == xs->rank;
      for (int d = 0; run && d < xs->rank; d++) {
        if (ys->dims[d] > 1 && nr_slice_step(&sp, d) != 1)
          run = false;
        else if (first < 0 && ys->dims[d] != xs->dims[d])
          first = d;
        else if (first >= 0 && ys->dims[d] != xs->dims[d])
          run = false;
        off += (uint64_t)sp.start[d] * prod_dims(xs, d + 1, xs->rank) * es;
      }
      run = run && (first < 0 || prod_dims(xs, 0, first) == 1);
    }
    if (run && fresh(p, y, k)) {
      p->slots[y].alias_of = x;
      delta[y] = off;
    }
  }
}

static void plan_views(nr_plan *p, uint64_t *delta) {
  for (int k = 0; k < p->n_steps; k++) {
    const nr_step *st = &p->steps[k];
    if (st->node < 0 || !p->graph || st->n_in < 1 || st->n_out < 1)
      continue;
    move_kind m = move_of(p, st);
    if (m == MOVE_RESHAPE && arena_plain(p, st->in[0]) &&
        fresh(p, st->out[0], k) && p->slots[st->out[0]].nbytes == p->slots[st->in[0]].nbytes) {
      p->slots[st->out[0]].alias_of = st->in[0];
      delta[st->out[0]] = 0;
    } else if (m == MOVE_CONCAT) {
      view_concat(p, delta, k);
    } else if (m == MOVE_SPLIT || m == MOVE_SLICE) {
      view_pieces(p, delta, k);
    }
  }
}

/* ---- placement ------------------------------------------------------------------ */

typedef struct block {
  int slot;             /* the root slot */
  int first, last;      /* union of the group's lifetimes */
  uint64_t size;        /* aligned */
  uint64_t offset;
} block;

static uint64_t align_to(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }
static uint64_t align_up(uint64_t x) { return align_to(x, ALIGN); }

static int cmp_size(const void *a, const void *b) {
  const block *x = a, *y = b;
  if (x->size != y->size)
    return x->size > y->size ? -1 : 1;
  if (x->first != y->first)
    return x->first < y->first ? -1 : 1;
  return x->slot - y->slot;
}

static int cmp_first_use(const void *a, const void *b) {
  const block *x = a, *y = b;
  if (x->first != y->first)
    return x->first < y->first ? -1 : 1;
  if (x->size != y->size)
    return x->size > y->size ? -1 : 1;
  return x->slot - y->slot;
}

static int cmp_offset(const void *a, const void *b) {
  const block *x = *(const block *const *)a, *y = *(const block *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Lowest offset for b that avoids every placed block live at the same time. live is
 * scratch room for n pointers. */
static uint64_t lowest_fit(const block *b, block *placed, int n, const block **live) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (placed[i].first <= b->last && b->first <= placed[i].last)
      live[m++] = &placed[i];
  qsort(live, (size_t)m, sizeof *live, cmp_offset);
  uint64_t off = 0;
  for (int i = 0; i < m; i++) {
    if (live[i]->offset >= off + b->size)
      break; /* the gap before this block fits */
    if (live[i]->offset + live[i]->size > off)
      off = live[i]->offset + live[i]->size;
  }
  return off;
}

/* Groups slots by alias root into blocks (a block spans every member's bytes); returns
 * the count or -1 (no memory). */
static int collect_blocks(nr_plan *p, uint64_t align, const uint64_t *delta, block **out) {
  int *index = malloc(((size_t)p->n_slots + 1) * sizeof *index);
  block *b = malloc(((size_t)p->n_slots + 1) * sizeof *b);
  if (!index || !b) {
    free(index);
    free(b);
    return -1;
  }
  int n = 0;
  /* All entries first: a slot's alias root may come later in slot order. */
  for (int i = 0; i < p->n_slots; i++)
    index[i] = -1;
  for (int i = 0; i < p->n_slots; i++) {
    const nr_slot *s = &p->slots[i];
    if (s->kind != NR_SLOT_ARENA)
      continue;
    int r = root_of(p, i);
    if (index[r] < 0) {
      index[r] = n;
      b[n++] = (block){r, s->first_use, s->last_use, 0, 0};
    }
    block *g = &b[index[r]];
    if (s->first_use < g->first)
      g->first = s->first_use;
    if (s->last_use > g->last)
      g->last = s->last_use;
    uint64_t end = align_to(delta_to_root(p, delta, i) + s->nbytes, align);
    if (end > g->size)
      g->size = end;
  }
  free(index);
  *out = b;
  return n;
}

/* Gives every block an offset; returns the arena end, or UINT64_MAX when out of
 * memory. Sorts b. */
static uint64_t place(block *b, int n, mem_strategy how) {
  uint64_t end = 0;
  if (how == MEM_NAIVE) {
    for (int i = 0; i < n; i++) {
      b[i].offset = end;
      end += b[i].size;
    }
    return end;
  }
  qsort(b, (size_t)n, sizeof *b, how == MEM_GREEDY_SIZE ? cmp_size : cmp_first_use);
  const block **live = malloc(((size_t)n + 1) * sizeof *live);
  if (!live)
    return UINT64_MAX;
  for (int i = 0; i < n; i++) {
    b[i].offset = b[i].size ? lowest_fit(&b[i], b, i, live) : 0;
    if (b[i].offset + b[i].size > end)
      end = b[i].offset + b[i].size;
  }
  free(live);
  return end;
}

static nr_status place_blocks(nr_plan *p, block *b, int n, mem_strategy how,
                              const uint64_t *delta, nr_error *err) {
  uint64_t end = place(b, n, how);
  if (end == UINT64_MAX)
    return nr_errorf(err, NR_ERR_NOMEM, "memory: planning %d blocks", n);
  for (int i = 0; i < n; i++) {
    assert(b[i].offset + b[i].size <= end);
    p->slots[b[i].slot].offset = b[i].offset;
  }
  for (int i = 0; i < p->n_slots; i++)
    if (p->slots[i].kind == NR_SLOT_ARENA && p->slots[i].alias_of >= 0) {
      p->slots[i].offset = p->slots[root_of(p, i)].offset + delta_to_root(p, delta, i);
      /* a block spans every member of its alias group */
      assert(p->slots[i].offset + p->slots[i].nbytes <= end);
    }
  p->arena_size = end;
  return NR_OK;
}

nr_status nr_memory_plan_views(nr_plan *p, int strategy, bool inplace, bool views,
                               uint64_t align, nr_error *err) {
  if (align < ALIGN || (align & (align - 1)))
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT,
                     "memory: alignment %llu is not a power of two >= %u",
                     (unsigned long long)align, ALIGN);
  assert(strategy >= MEM_NAIVE && strategy <= MEM_GREEDY_FIRST_USE);
  nr_status st = compute_lifetimes(p, err);
  if (st != NR_OK)
    return st;
  uint64_t *delta = calloc((size_t)p->n_slots + 1, sizeof *delta);
  if (!delta)
    return nr_errorf(err, NR_ERR_NOMEM, "memory: planning %d slots", p->n_slots);
  if (views)
    plan_views(p, delta);
  if (inplace)
    plan_inplace(p);
  block *b = NULL;
  int n = collect_blocks(p, align, delta, &b);
  if (n < 0) {
    free(delta);
    return nr_errorf(err, NR_ERR_NOMEM, "memory: planning %d slots", p->n_slots);
  }
  st = place_blocks(p, b, n, (mem_strategy)strategy, delta, err);
  free(b);
  free(delta);
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].scratch > p->scratch_size)
      p->scratch_size = align_up(p->steps[k].scratch);
  p->scratch_size = align_up(p->scratch_size);
  return st;
}

nr_status nr_memory_plan_aligned(nr_plan *p, int strategy, bool inplace, uint64_t align,
                                 nr_error *err) {
  return nr_memory_plan_views(p, strategy, inplace, true, align, err);
}

nr_status nr_memory_plan(nr_plan *p, int strategy, bool inplace, nr_error *err) {
  return nr_memory_plan_aligned(p, strategy, inplace, ALIGN, err);
}

static nr_status run_memory(nr_compile_ctx *c) {
  const char *how = c->route ? nr_route_get(c->route, NR_KNOB_MEMORY_PLAN, NULL) : NULL;
  const char *inplace = c->route ? nr_route_get(c->route, NR_KNOB_MEMORY_INPLACE, NULL) : NULL;
  const char *align = c->route ? nr_route_get(c->route, NR_KNOB_MEMORY_ALIGN, NULL) : NULL;
  const char *views = c->route ? nr_route_get(c->route, NR_KNOB_MEMORY_VIEWS, NULL) : NULL;
  mem_strategy s = MEM_GREEDY_SIZE;
  if (how && !strcmp(how, "naive"))
    s = MEM_NAIVE;
  else if (how && !strcmp(how, "greedy_first_use"))
    s = MEM_GREEDY_FIRST_USE;
  return nr_memory_plan_views(c->plan, s, !inplace || strcmp(inplace, "off") != 0,
                              !views || strcmp(views, "off") != 0,
                              align ? strtoull(align, NULL, 10) : ALIGN, c->err);
}

const nr_pass nr_pass_memory = {"memory", run_memory};

/* ---- which values can matter for a graph ---------------------------------------- */

/* The knobs' listing simulates the allocator on the graph: one block per activation of
 * a node that keeps its step at the default route (fate.h), alive from its producer to
 * its last reader, in node order. That stands in for the plan's slots (fusions drop
 * some tensors, layouts add some), so it is an estimate; a value whose simulated
 * offsets equal the default's is not listed. */
static int graph_blocks(const nr_graph *g, uint64_t align, block *b) {
  int n = 0;
  for (int k = 0; k < g->n_nodes; k++) {
    const nr_node *nd = &g->nodes[k];
    if (!nr_fate_survives(g, nd))
      continue;
    for (int o = 0; o < nd->n_outputs; o++) {
      int t = nd->outputs[o];
      if (t < 0 || !nr_value_nbytes(&g->tensors[t].value))
        continue;
      int last = k;
      for (int j = k + 1; j < g->n_nodes; j++)
        for (int i = 0; i < g->nodes[j].n_inputs; i++)
          if (g->nodes[j].inputs[i] == t)
            last = j;
      if (g->tensors[t].flags & NR_TENSOR_OUTPUT)
        last = g->n_nodes;
      b[n++] = (block){t, k, last, align_to(nr_value_nbytes(&g->tensors[t].value), align), 0};
    }
  }
  return n;
}

/* Simulated offsets per tensor for a strategy and alignment; false on no memory. */
static bool simulate(const nr_graph *g, mem_strategy how, uint64_t align, uint64_t *off,
                     uint64_t *end) {
  block *b = malloc(sizeof *b * ((size_t)g->n_tensors + 1));
  if (!b)
    return false;
  int n = graph_blocks(g, align, b);
  *end = place(b, n, how);
  for (int t = 0; t < g->n_tensors; t++)
    off[t] = UINT64_MAX;
  for (int i = 0; i < n; i++)
    off[b[i].slot] = b[i].offset;
  free(b);
  return *end != UINT64_MAX;
}

/* Bit i set when (strategy, align) of value i simulates differently from the default
 * (greedy_size at 64 bytes); the default's own bit always. */
static uint64_t differs(const nr_graph *g, const mem_strategy *how, const uint64_t *align,
                        int nv, int dflt) {
  uint64_t bits = 1ull << dflt, e0, e1;
  uint64_t *a = malloc(sizeof *a * ((size_t)g->n_tensors + 1));
  uint64_t *c = malloc(sizeof *c * ((size_t)g->n_tensors + 1));
  if (!a || !c || !simulate(g, MEM_GREEDY_SIZE, ALIGN, a, &e0)) {
    free(a);
    free(c);
    return (1ull << nv) - 1;
  }
  for (int i = 0; i < nv; i++)
    if (i != dflt && (!simulate(g, how[i], align[i], c, &e1) || e1 != e0 ||
                      memcmp(a, c, sizeof *a * (size_t)g->n_tensors)))
      bits |= 1ull << i;
  free(a);
  free(c);
  return bits;
}

static uint64_t plan_valid(const nr_graph *g, const nr_node *n) {
  static const mem_strategy how[] = {MEM_NAIVE, MEM_GREEDY_SIZE, MEM_GREEDY_FIRST_USE};
  static const uint64_t align[] = {ALIGN, ALIGN, ALIGN};
  (void)n;
  return g ? differs(g, how, align, 3, 1) : 7;
}

static uint64_t align_valid(const nr_graph *g, const nr_node *n) {
  static const mem_strategy how[] = {MEM_GREEDY_SIZE, MEM_GREEDY_SIZE, MEM_GREEDY_SIZE};
  static const uint64_t align[] = {64, 256, 4096};
  (void)n;
  return g ? differs(g, how, align, 3, 0) : 7;
}

/* In-place needs an elementwise step that keeps its own step by default. */
static bool inplace_applies(const nr_graph *g, const nr_node *unused) {
  (void)unused;
  for (int k = 0; g && k < g->n_nodes; k++)
    if (op_inplace(&g->nodes[k]) && nr_fate_survives(g, &g->nodes[k]))
      return true;
  return !g;
}

/* Views need a data-movement node that keeps its step by default and reads a tensor a
 * node produced: a reshaping op, or a Concat / Split / Slice whose axis has nothing
 * outer to it (the rule plan_views applies to the plan). */
static bool made_by_node(const nr_graph *g, int t) {
  return t >= 0 && g->tensors[t].producer >= 0 && !(g->tensors[t].flags & NR_TENSOR_CONST);
}

static bool view_node(const nr_graph *g, const nr_node *n) {
  if (n->domain[0] || n->n_inputs < 1 || n->n_outputs < 1 || !nr_fate_survives(g, n))
    return false;
  for (int i = 0; reshaping_ops[i]; i++)
    if (!strcmp(n->op_type, reshaping_ops[i]))
      return made_by_node(g, n->inputs[0]);
  bool concat = !strcmp(n->op_type, "Concat");
  if (!concat && strcmp(n->op_type, "Split") && strcmp(n->op_type, "Slice"))
    return false;
  const nr_value *v = &g->tensors[concat ? n->outputs[0] : n->inputs[0]].value;
  int64_t axis = nr_attr_int(n, "axis", 0), outer = 1;
  axis += axis < 0 ? v->rank : 0;
  for (int d = 0; d < axis && d < v->rank; d++)
    outer *= v->dims[d];
  if (!strcmp(n->op_type, "Slice")) /* batch-1 slices along any axis may be runs */
    outer = v->rank > 0 ? v->dims[0] : 0;
  return outer == 1 && made_by_node(g, n->inputs[0]);
}

static bool views_apply(const nr_graph *g, const nr_node *unused) {
  (void)unused;
  for (int k = 0; g && k < g->n_nodes; k++)
    if (view_node(g, &g->nodes[k]))
      return true;
  return !g;
}

const nr_knob_def nr_knobs_memory[] = {
    [NR_KNOB_ROW(NR_KNOB_MEMORY_PLAN)] =
    {"memory.plan", "naive|greedy_size|greedy_first_use", "greedy_size", NR_KNOB_GLOBAL,
     NR_KNOB_MEMORY, 0,
     "arena offsets: one region per tensor, or greedy reuse by size or by first use",
     NULL, plan_valid},
    [NR_KNOB_ROW(NR_KNOB_MEMORY_INPLACE)] =
    {"memory.inplace", "off|on", "on", NR_KNOB_GLOBAL, NR_KNOB_MEMORY, 0,
     "let elementwise steps write their output over a dying input 0", inplace_applies,
     NULL},
    [NR_KNOB_ROW(NR_KNOB_MEMORY_ALIGN)] =
    {"memory.align", "64|256|4096", "64", NR_KNOB_GLOBAL, NR_KNOB_MEMORY, 0,
     "alignment of every arena tensor's offset and size in bytes (4096: page-aligned "
     "offsets)",
     NULL, align_valid},
    [NR_KNOB_ROW(NR_KNOB_MEMORY_VIEWS)] =
    {"memory.views", "off|on", "on", NR_KNOB_GLOBAL, NR_KNOB_MEMORY, 0,
     "place reshaped tensors, batch-1 Concat inputs and Split/Slice outputs inside the "
     "tensor they are a contiguous piece of, so those steps copy nothing",
     views_apply, NULL},
    [NR_KNOB_ROW(NR_KNOB_MEMORY_END)] = {0},
};
NR_KNOB_TABLE_CHECK(nr_knobs_memory, NR_KNOB_MEMORY_END);
