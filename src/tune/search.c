/* search.c - the tuner's search algorithms (fast, full, mixed, random, evolve, greedy) as
 * ask/tell state machines over a discrete space of value indices.
 *
 * Key design decision: every point ever proposed is stored, in proposal order, with
 * the result told for it, behind a hash set. That one record gives the "never propose
 * a point twice" guarantee to every algorithm (the hash set), and it is the only
 * input besides the seed that any choice depends on: the random generator is a
 * single splitmix64 stream consumed in proposal order, ties are broken by proposal
 * index, and nothing depends on the hash set's layout. A second search with the same
 * config, told the same results, therefore proposes the same sequence, which is what
 * `nnroute tune --continue` replays. Mixed's third phase keeps no state of its own for
 * the same reason: its current point is recomputed from the record at every step.
 *
 * The contract (default first, untold points, out of memory, NaN) is in search.h; the
 * algorithms and their benchmark in docs/tuner-search.md. */
#include "tune/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  EVOLVE_MAX_TRIES = 64, /* breeding attempts before falling back to a random point */
  EVOLVE_TOURNAMENT = 3, /* candidates per tournament */
};
#define EVOLVE_CLIMB 0.5 /* share of evolve's children that are neighbours of the best */

typedef struct result {
  bool told, feasible;
  bool same; /* nr_search_tell_same: another point's build, not a build of its own */
  double cost, lo, hi;
  double loss; /* nr_search_tell_loss; NaN until told */
} result;

/* One of greedy's changes: dimension d to value v, which alone cost `cost` and lost
 * `loss`. */
typedef struct change {
  double loss, cost;
  int d, v;
} change;

/* A (dimension, value) pair; sorted, the order of fast's one-change points and of
 * mixed's climbing steps. */
typedef struct move {
  double key; /* prior score (0 without priors) */
  int d, v;
} move;

/* A feasible point and its cost, for ranking evolve's parents. */
typedef struct ranked {
  double cost;
  int64_t k;
} ranked;

/* Mixed-radix counter over per-dimension value lists; the first entry of every list
 * is the start point's value, the last dimension turns fastest. */
typedef struct odometer {
  int *vals; /* all lists, concatenated (dimension d's list starts at vals + off[d]) */
  int *off, *len, *digit;
  bool done;
} odometer;

struct nr_search {
  nr_search_kind kind;
  int n_dims;
  int *n_values, *dflt;
  int *voff;     /* offset of dimension d's values in the flat per-value arrays */
  int n_flat;    /* sum of n_values */
  double *prior; /* flat [voff[d] + v], NULL without priors */
  bool *late;    /* per dimension (nr_search_config.late), NULL: none */
  uint64_t rng;
  int max_points;
  int64_t n_same; /* points told nr_search_tell_same */
  double min_gain;
  int64_t space; /* number of points; INT64_MAX when that does not fit */

  /* Every proposed point in order (n_dims ints each) with its result. */
  int *pts;
  result *res;
  int64_t n_pts, cap_pts;
  int64_t *slots; /* hash set: indices into pts, -1 empty; n_slots a power of two */
  int64_t n_slots;
  int *tmp; /* scratch points */
  int *tmp2;

  move *moves; /* every (dimension, value): fast, mixed phases 1 and 3 */
  int64_t n_moves, next_move;
  odometer odo;  /* full and mixed phase 2 */
  int stage;     /* mixed: 1, 2 or 3 */
  int64_t total; /* nr_search_total's answer */

  int64_t *remaining; /* random fallback: unproposed point indices (lazy, see below) */
  int64_t n_remaining;
  bool enumerating;

  change *chg;  /* greedy: the sorted changes, and the binary search over prefixes */
  int n_chg, g_lo, g_hi, g_last; /* prefix lengths: g_lo feasible, g_hi infeasible (or
                                    n_chg + 1: not known), g_last proposed (-1: none) */
  int *g_cur;                    /* phase 3: the point being extended */
  int g_next, g_tried;           /* phase 3: next change to add; the one pending (-1) */

  int pop;      /* evolve: population (and generation) size */
  ranked *pool; /* evolve: scratch for ranking feasible points */
  char phase[32]; /* "evolve:" and a 64-bit generation fit */
};

/* ---- small helpers ---------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n) for n >= 1; the multiply-shift bias is below 2^-32 here. */
static int64_t rng_below(uint64_t *s, int64_t n) {
  return (int64_t)(((unsigned __int128)rng_next(s) * (uint64_t)n) >> 64);
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }

static int64_t mul_sat(int64_t a, int64_t b) {
  return (b != 0 && a > INT64_MAX / b) ? INT64_MAX : a * b;
}

static int64_t add_sat(int64_t a, int64_t b) {
  return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static const int *point_at(const nr_search *s, int64_t i) { return s->pts + i * s->n_dims; }

/* The point of index idx in [0, space), dimension 0 least significant. */
static void index_point(const nr_search *s, int64_t idx, int *p) {
  for (int d = 0; d < s->n_dims; d++) {
    p[d] = (int)(idx % s->n_values[d]);
    idx /= s->n_values[d];
  }
}

/* ---- the proposed points: an arena in order plus an open-addressing hash set ---- */

static uint64_t hash_point(const int *p, int n) {
  uint64_t h = 0x243f6a8885a308d3ull;
  for (int i = 0; i < n; i++) {
    uint64_t x = h ^ (uint32_t)p[i];
    h = rng_next(&x);
  }
  return h;
}

/* Index of p among the proposed points, or -1. */
static int64_t find_point(const nr_search *s, const int *p) {
  if (!s->n_slots)
    return -1;
  size_t bytes = (size_t)s->n_dims * sizeof(int);
  for (uint64_t i = hash_point(p, s->n_dims);; i++) {
    int64_t k = s->slots[i & (uint64_t)(s->n_slots - 1)];
    if (k < 0)
      return -1;
    if (!memcmp(point_at(s, k), p, bytes))
      return k;
  }
}

static void slot_insert(int64_t *slots, int64_t n_slots, uint64_t h, int64_t k) {
  while (slots[h & (uint64_t)(n_slots - 1)] >= 0)
    h++;
  slots[h & (uint64_t)(n_slots - 1)] = k;
}

/* Keeps the load factor at or below one half. */
static bool grow_slots(nr_search *s) {
  if (2 * (s->n_pts + 1) <= s->n_slots)
    return true;
  int64_t n = s->n_slots ? 2 * s->n_slots : 64;
  int64_t *slots = malloc((size_t)n * sizeof *slots);
  if (!slots)
    return false;
  memset(slots, 0xff, (size_t)n * sizeof *slots);
  for (int64_t k = 0; k < s->n_pts; k++)
    slot_insert(slots, n, hash_point(point_at(s, k), s->n_dims), k);
  free(s->slots);
  s->slots = slots;
  s->n_slots = n;
  return true;
}

static bool grow_points(nr_search *s) {
  if (s->n_pts < s->cap_pts)
    return true;
  int64_t cap = s->cap_pts ? 2 * s->cap_pts : 64;
  int *pts = realloc(s->pts, (size_t)(cap * (s->n_dims ? s->n_dims : 1)) * sizeof *pts);
  if (!pts)
    return false;
  s->pts = pts;
  result *res = realloc(s->res, (size_t)cap * sizeof *res);
  if (!res)
    return false;
  s->res = res;
  s->cap_pts = cap;
  return true;
}

/* Records p as proposed (the caller checked it is new); false when out of memory. */
static bool add_point(nr_search *s, const int *p) {
  if (!grow_points(s) || !grow_slots(s))
    return false;
  memcpy(s->pts + s->n_pts * s->n_dims, p, (size_t)s->n_dims * sizeof *p);
  s->res[s->n_pts] = (result){.loss = NAN};
  slot_insert(s->slots, s->n_slots, hash_point(p, s->n_dims), s->n_pts);
  s->n_pts++;
  return true;
}

static bool proposed(const nr_search *s, const int *p) { return find_point(s, p) >= 0; }

static bool told_feasible(const nr_search *s, int64_t k) {
  return k >= 0 && s->res[k].told && s->res[k].feasible;
}

/* ---- odometer (full, mixed phase 2) ----------------------------------------------- */

static void odo_free(odometer *o) {
  free(o->vals);
  free(o->off);
  free(o->len);
  free(o->digit);
  *o = (odometer){0};
}

/* Allocates room for n_vals list entries; the caller fills vals, off and len. */
static bool odo_alloc(odometer *o, int n_dims, int n_vals) {
  o->vals = malloc((size_t)(n_vals ? n_vals : 1) * sizeof *o->vals);
  o->off = calloc((size_t)(n_dims ? n_dims : 1), sizeof *o->off);
  o->len = calloc((size_t)(n_dims ? n_dims : 1), sizeof *o->len);
  o->digit = calloc((size_t)(n_dims ? n_dims : 1), sizeof *o->digit);
  o->done = false;
  return o->vals && o->off && o->len && o->digit;
}

static void odo_point(const odometer *o, int n_dims, int *p) {
  for (int d = 0; d < n_dims; d++)
    p[d] = o->vals[o->off[d] + o->digit[d]];
}

static void odo_step(odometer *o, int n_dims) {
  for (int d = n_dims - 1; d >= 0; d--) {
    if (++o->digit[d] < o->len[d])
      return;
    o->digit[d] = 0;
  }
  o->done = true; /* carried out of dimension 0 (or there are no dimensions) */
}

/* The whole space, each list starting at the default and wrapping around. */
static bool odo_init_full(nr_search *s) {
  if (!odo_alloc(&s->odo, s->n_dims, s->n_flat))
    return false;
  for (int d = 0; d < s->n_dims; d++) {
    s->odo.off[d] = s->voff[d];
    s->odo.len[d] = s->n_values[d];
    for (int i = 0; i < s->n_values[d]; i++)
      s->odo.vals[s->voff[d] + i] = (s->dflt[d] + i) % s->n_values[d];
  }
  return true;
}

/* Next odometer point not proposed yet, or false when the odometer is done. */
static bool odo_next_new(nr_search *s, int *p) {
  while (!s->odo.done) {
    odo_point(&s->odo, s->n_dims, p);
    odo_step(&s->odo, s->n_dims);
    if (!proposed(s, p))
      return true;
  }
  return false;
}

/* ---- fast (and mixed phase 1) ----------------------------------------------------- */

/* Added to a late dimension's keys: above any prior (latency ratios, near 1). */
#define LATE_KEY 1e6

static int by_key(const void *a, const void *b) {
  const move *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  if (x->d != y->d)
    return x->d < y->d ? -1 : 1;
  return (x->v > y->v) - (x->v < y->v);
}

/* Every (dimension, value), defaults included, ordered by prior score (ties, and no
 * priors: by dimension, then value), the late dimensions' after all others. Fast
 * skips the defaults; mixed's climb skips the current point's values. */
static bool init_moves(nr_search *s) {
  s->moves = malloc((size_t)(s->n_flat ? s->n_flat : 1) * sizeof *s->moves);
  if (!s->moves)
    return false;
  for (int d = 0; d < s->n_dims; d++)
    for (int v = 0; v < s->n_values[d]; v++) {
      double key = s->prior ? s->prior[s->voff[d] + v] : 0;
      key = isnan(key) ? INFINITY : key;
      if (s->late && s->late[d])
        key = key < INFINITY ? key + LATE_KEY : INFINITY;
      s->moves[s->n_moves++] = (move){key, d, v};
    }
  qsort(s->moves, (size_t)s->n_moves, sizeof *s->moves, by_key);
  return true;
}

/* The default and its one-change points. */
static int64_t fast_size(const nr_search *s) { return 1 + s->n_flat - s->n_dims; }

static bool next_fast(nr_search *s, int *p) {
  if (s->n_pts == 0) {
    memcpy(p, s->dflt, (size_t)s->n_dims * sizeof *p);
    return true;
  }
  while (s->next_move < s->n_moves) {
    const move *m = &s->moves[s->next_move++];
    if (m->v == s->dflt[m->d])
      continue;
    memcpy(p, s->dflt, (size_t)s->n_dims * sizeof *p);
    p[m->d] = m->v;
    return true;
  }
  return false;
}

/* ---- mixed phase 2 ---------------------------------------------------------------- */

/* The result of the one-change point (d, v), or NULL when it was not measured. */
static const result *one_change(nr_search *s, int d, int v) {
  memcpy(s->tmp2, s->dflt, (size_t)s->n_dims * sizeof *s->tmp2);
  s->tmp2[d] = v;
  int64_t k = find_point(s, s->tmp2);
  return k >= 0 && s->res[k].told ? &s->res[k] : NULL;
}

/* Feasible and faster than the default beyond both confidence intervals and the
 * minimum gain: the test that keeps noise from multiplying phase 2's size. */
static bool improves(const nr_search *s, const result *r, const result *def) {
  return r && r->feasible && r->hi < def->lo && r->cost < (1 - s->min_gain) * def->cost;
}

/* Dimension d's phase-2 list: the default, then the improving values by measured
 * cost, so that a point with a better value comes before the same point with a worse
 * one if the driver's budget cuts phase 2 short. */
static int phase2_list(nr_search *s, int d, const result *def, int *out) {
  int n = 0;
  out[n++] = s->dflt[d];
  for (int v = 0; v < s->n_values[d]; v++) {
    const result *r = v == s->dflt[d] ? NULL : one_change(s, d, v);
    if (!improves(s, r, def))
      continue;
    int i = n++;
    for (; i > 1 && one_change(s, d, out[i - 1])->cost > r->cost; i--)
      out[i] = out[i - 1];
    out[i] = v;
  }
  return n;
}

/* Phase 2's product stays at most this many points: on a noisy machine, or against a
 * default route that happened to be measured slow, many values pass the test, and an
 * uncapped product (hundreds of points) would spend the whole budget before phase 3.
 * The values dropped first are those with the smallest measured gain. */
#define PHASE2_CAP 96

static int64_t phase2_product(const nr_search *s) {
  int64_t prod = 1;
  for (int d = 0; d < s->n_dims; d++)
    prod = mul_sat(prod, s->odo.len[d]);
  return prod;
}

static void cap_phase2(nr_search *s, int64_t *prod) {
  for (*prod = phase2_product(s); *prod > PHASE2_CAP; *prod = phase2_product(s)) {
    int worst = -1;
    double worst_cost = -1;
    for (int d = 0; d < s->n_dims; d++) {
      int len = s->odo.len[d];
      if (len < 2)
        continue;
      double c = one_change(s, d, s->odo.vals[s->odo.off[d] + len - 1])->cost;
      if (c > worst_cost) {
        worst_cost = c;
        worst = d;
      }
    }
    if (worst < 0)
      return;
    s->odo.len[worst]--;
  }
}

/* Sets up phase 2; its points with at most one non-default value were phase-1
 * points, so the new ones number prod(len) - 1 - sum(len - 1). False on OOM. */
static bool mixed_begin_phase2(nr_search *s) {
  s->stage = 2;
  if (!odo_alloc(&s->odo, s->n_dims, s->n_flat)) {
    odo_free(&s->odo);
    s->odo.done = true; /* nothing more to propose rather than a half-built odometer */
    return false;
  }
  const result *def = s->n_pts > 0 && s->res[0].told ? &s->res[0] : NULL;
  int64_t prod = 1, sum = 0;
  for (int d = 0; d < s->n_dims; d++) {
    s->odo.off[d] = s->voff[d];
    s->odo.vals[s->voff[d]] = s->dflt[d];
    s->odo.len[d] =
        def && def->feasible ? phase2_list(s, d, def, s->odo.vals + s->voff[d]) : 1;
    prod = mul_sat(prod, s->odo.len[d]);
  }
  cap_phase2(s, &prod);
  for (int d = 0; d < s->n_dims; d++)
    sum += s->odo.len[d] - 1;
  s->total = prod == INT64_MAX ? INT64_MAX : add_sat(fast_size(s), prod - 1 - sum);
  return true;
}

/* ---- mixed phase 3 ---------------------------------------------------------------- */

/* The feasible told point with the lowest cost, ties to the earlier proposal; -1 when
 * there is none. */
static int64_t best_feasible(const nr_search *s) {
  int64_t best = -1;
  for (int64_t k = 0; k < s->n_pts; k++)
    if (told_feasible(s, k) && (best < 0 || s->res[k].cost < s->res[best].cost))
      best = k;
  return best;
}

/* Hill climbing from the best point so far: its first unproposed one-change neighbour
 * in the moves' order. Moving needs no state: a neighbour told a lower cost is the new
 * best, and the next step scans around it. A plain comparison, not phase 2's test:
 * under noise that test only passes gains of several percent, the very gains this
 * phase exists to combine; a lucky measurement costs at most a few wasted steps, and
 * the driver re-measures the finalists. The total counts the best's unproposed
 * neighbours, what remains if the climb makes no further move. */
static bool next_refine(nr_search *s, int *p) {
  int64_t best = best_feasible(s), n_free = 0;
  for (int64_t i = 0; best >= 0 && i < s->n_moves; i++) {
    const move *m = &s->moves[i];
    const int *b = point_at(s, best);
    if (m->v == b[m->d])
      continue;
    memcpy(s->tmp2, b, (size_t)s->n_dims * sizeof *s->tmp2);
    s->tmp2[m->d] = m->v;
    if (!proposed(s, s->tmp2) && n_free++ == 0)
      memcpy(p, s->tmp2, (size_t)s->n_dims * sizeof *p);
  }
  s->total = add_sat(s->n_pts, n_free);
  return n_free > 0;
}

/* ---- greedy ------------------------------------------------------------------------ */

static int by_loss(const void *a, const void *b) {
  const change *x = a, *y = b;
  if (x->loss != y->loss)
    return x->loss < y->loss ? -1 : 1;
  if (x->cost != y->cost)
    return x->cost < y->cost ? -1 : 1;
  return (x->d > y->d) - (x->d < y->d);
}

/* Phase 2's list; every change in it was feasible alone, so prefix 1 is feasible.
 * Every change feasible alone enters, whatever its screening time: greedy is for
 * choices that trade accuracy for speed (precision), where one layer moves a whole
 * model's time by a few percent, below the screening noise of a shared machine, and
 * load spikes make whole runs of screenings look 1.5-2x slow. "Faster than the
 * default at screening" admitted a random 10 of resnet50's 53 int8 layers, and "not
 * significantly slower" 10 again when the machine was loaded (2026-11-29). Whether
 * the combination is faster is the confirmation's question. Of two feasible values
 * of a dimension the one that screened faster is kept. */
static bool greedy_begin(nr_search *s) {
  s->stage = 2;
  s->chg = malloc((size_t)(s->n_dims ? s->n_dims : 1) * sizeof *s->chg);
  if (!s->chg)
    return false;
  const result *def = s->n_pts > 0 && s->res[0].told ? &s->res[0] : NULL;
  for (int d = 0; def && def->feasible && d < s->n_dims; d++) {
    change best = {INFINITY, INFINITY, d, -1};
    for (int v = 0; v < s->n_values[d]; v++) {
      const result *r = v == s->dflt[d] ? NULL : one_change(s, d, v);
      if (r && r->feasible && r->cost < best.cost)
        best = (change){isnan(r->loss) ? INFINITY : r->loss, r->cost, d, v};
    }
    if (best.v >= 0)
      s->chg[s->n_chg++] = best;
  }
  qsort(s->chg, (size_t)s->n_chg, sizeof *s->chg, by_loss);
  s->g_lo = s->n_chg > 0;
  s->g_hi = s->n_chg + 1;
  s->g_last = -1;
  return true;
}

static void greedy_prefix(const nr_search *s, int k, int *p) {
  memcpy(p, s->dflt, (size_t)s->n_dims * sizeof *p);
  for (int i = 0; i < k; i++)
    p[s->chg[i].d] = s->chg[i].v;
}

/* The next prefix to try: all of them first, then bisection between the longest
 * known-feasible and the shortest known-infeasible prefix. A prefix proposed before
 * (prefix 1 is a phase-1 point) is judged by its recorded result. */
static bool next_greedy(nr_search *s, int *p) {
  for (;;) {
    if (s->g_last >= 0) {
      greedy_prefix(s, s->g_last, s->tmp2);
      int64_t k = find_point(s, s->tmp2);
      if (k >= 0 && told_feasible(s, k))
        s->g_lo = s->g_last;
      else
        s->g_hi = s->g_last;
      s->g_last = -1;
    }
    int k = s->g_hi == s->n_chg + 1 ? s->n_chg : (s->g_lo + s->g_hi) / 2;
    if (k <= s->g_lo || k >= s->g_hi)
      return false;
    s->g_last = k;
    greedy_prefix(s, k, p);
    int left = 0; /* bisection steps after this one, at most */
    for (int w = s->g_hi - s->g_lo; w > 2; w = (w + 1) / 2)
      left++;
    s->total = add_sat(s->n_pts + 1, left);
    if (!proposed(s, p))
      return true;
  }
}

/* Phase 3: from the longest feasible prefix, every later change in the list is added
 * in turn and kept when the point stays feasible. Feasibility alone decides: each
 * change was faster by itself, and the tolerance is a steadier guide than screening
 * times taken at different moments of a shared machine (a climb toward the point
 * with the lowest screening time follows the noise). */
static bool next_extend(nr_search *s, int *p) {
  for (;;) {
    if (s->g_tried >= 0) {
      memcpy(s->tmp2, s->g_cur, (size_t)s->n_dims * sizeof *s->tmp2);
      s->tmp2[s->chg[s->g_tried].d] = s->chg[s->g_tried].v;
      int64_t k = find_point(s, s->tmp2);
      if (k >= 0 && told_feasible(s, k))
        memcpy(s->g_cur, s->tmp2, (size_t)s->n_dims * sizeof *s->g_cur);
      s->g_tried = -1;
    }
    if (s->g_next >= s->n_chg)
      return false;
    int i = s->g_next++;
    s->total = add_sat(s->n_pts + 1, s->n_chg - s->g_next);
    memcpy(p, s->g_cur, (size_t)s->n_dims * sizeof *p);
    p[s->chg[i].d] = s->chg[i].v;
    s->g_tried = i;
    if (!proposed(s, p))
      return true;
  }
}

static bool next_greedy_all(nr_search *s, int *p) {
  if (s->stage == 1) {
    if (next_fast(s, p))
      return true;
    if (!greedy_begin(s))
      return false;
  }
  if (s->stage == 2) {
    if (next_greedy(s, p))
      return true;
    s->stage = 3;
    if (!(s->g_cur = malloc((size_t)(s->n_dims ? s->n_dims : 1) * sizeof *s->g_cur)))
      return false;
    greedy_prefix(s, s->g_lo, s->g_cur);
    s->g_next = s->g_lo;
    s->g_tried = -1;
  }
  return next_extend(s, p);
}

static bool next_mixed(nr_search *s, int *p) {
  if (s->stage == 1) {
    if (next_fast(s, p))
      return true;
    if (!mixed_begin_phase2(s))
      return false;
  }
  if (s->stage == 2) {
    if (odo_next_new(s, p))
      return true;
    s->stage = 3;
  }
  return next_refine(s, p);
}

/* ---- random ------------------------------------------------------------------------ */

/* When half the space is taken, rejection sampling would start to spin: switch, once,
 * to a list of the points that were unproposed at the switch (at most half the space,
 * and never more than twice max_points). Points proposed later by other means
 * (evolve's breeding) are dropped from it when drawn. */
static bool start_enumerating(nr_search *s) {
  s->enumerating = true;
  s->remaining = malloc((size_t)(s->space - s->n_pts + 1) * sizeof *s->remaining);
  if (!s->remaining)
    return false;
  for (int64_t i = 0; i < s->space; i++) {
    index_point(s, i, s->tmp2);
    if (!proposed(s, s->tmp2))
      s->remaining[s->n_remaining++] = i;
  }
  return true;
}

static bool draw_enumerated(nr_search *s, int *p) {
  while (s->n_remaining > 0) {
    int64_t j = rng_below(&s->rng, s->n_remaining);
    index_point(s, s->remaining[j], p);
    s->remaining[j] = s->remaining[--s->n_remaining];
    if (!proposed(s, p))
      return true;
  }
  return false;
}

/* A uniformly random point not proposed yet; false when the space is exhausted. While
 * less than half the space is taken each draw succeeds with probability > 1/2. */
static bool random_unproposed(nr_search *s, int *p) {
  if (s->space != INT64_MAX && s->n_pts >= s->space)
    return false;
  if (!s->enumerating && (s->space == INT64_MAX || 2 * s->n_pts < s->space)) {
    for (;;) {
      for (int d = 0; d < s->n_dims; d++)
        p[d] = (int)rng_below(&s->rng, s->n_values[d]);
      if (!proposed(s, p))
        return true;
    }
  }
  if (!s->enumerating && !start_enumerating(s))
    return false;
  return draw_enumerated(s, p);
}

static bool next_random(nr_search *s, int *p) {
  if (s->n_pts == 0) {
    memcpy(p, s->dflt, (size_t)s->n_dims * sizeof *p);
    return true;
  }
  return random_unproposed(s, p);
}

/* ---- evolve ------------------------------------------------------------------------ */

/* Population (and generation) size: a sixth of the budget, so that at least five
 * generations follow the first; at least 4 for the tournaments to choose from, at most
 * 24 so that large budgets keep selecting from the best few. */
static int evolve_pop(const nr_search *s) {
  int pop = s->max_points / 6;
  if (pop < 4)
    pop = 4;
  return pop > 24 ? 24 : pop;
}

static int by_cost(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->cost != y->cost)
    return x->cost < y->cost ? -1 : 1;
  return (x->k > y->k) - (x->k < y->k); /* ties: the earlier proposal */
}

/* The best feasible told points (not nr_search_tell_same's), at most pop, best first. */
static int64_t evolve_parents(nr_search *s) {
  int64_t n = 0;
  for (int64_t k = 0; k < s->n_pts; k++)
    if (told_feasible(s, k) && !s->res[k].same)
      s->pool[n++] = (ranked){s->res[k].cost, k};
  qsort(s->pool, (size_t)n, sizeof *s->pool, by_cost);
  return n < s->pop ? n : s->pop;
}

static int64_t tournament(nr_search *s, int64_t n_parents) {
  int64_t best = rng_below(&s->rng, n_parents);
  for (int i = 1; i < EVOLVE_TOURNAMENT; i++) {
    int64_t c = rng_below(&s->rng, n_parents);
    best = c < best ? c : best; /* the pool is sorted: lower rank is better */
  }
  return s->pool[best].k;
}

/* Rate 1/(dimensions that have a choice), and at least one change when any has. */
static void mutate(nr_search *s, int *p) {
  int n_mut = 0;
  for (int d = 0; d < s->n_dims; d++)
    n_mut += s->n_values[d] > 1;
  bool changed = false;
  for (int d = 0; d < s->n_dims; d++)
    if (s->n_values[d] > 1 && rng_unit(&s->rng) * n_mut < 1) {
      p[d] = (p[d] + 1 + (int)rng_below(&s->rng, s->n_values[d] - 1)) % s->n_values[d];
      changed = true;
    }
  if (changed || !n_mut)
    return;
  for (int pick = (int)rng_below(&s->rng, n_mut), d = 0; d < s->n_dims; d++)
    if (s->n_values[d] > 1 && pick-- == 0)
      p[d] = (p[d] + 1 + (int)rng_below(&s->rng, s->n_values[d] - 1)) % s->n_values[d];
}

/* An unproposed one-change neighbour of point k: the neighbours are numbered
 * (dimension, then value) and scanned from a random one; false when all are taken. */
static bool neighbour(nr_search *s, int64_t k, int *p) {
  int64_t n = 0;
  for (int d = 0; d < s->n_dims; d++)
    n += s->n_values[d] - 1;
  for (int64_t j = 0, start = n ? rng_below(&s->rng, n) : 0; j < n; j++) {
    int64_t m = (start + j) % n;
    int d = 0;
    for (; m >= s->n_values[d] - 1; d++)
      m -= s->n_values[d] - 1;
    memcpy(p, point_at(s, k), (size_t)s->n_dims * sizeof *p);
    p[d] = (p[d] + 1 + (int)m) % s->n_values[d];
    if (!proposed(s, p))
      return true;
  }
  return false;
}

static void crossover(nr_search *s, const int *a, const int *b, int *child) {
  for (int d = 0; d < s->n_dims; d++)
    child[d] = (rng_next(&s->rng) >> 63) ? a[d] : b[d];
}

/* Half the children climb: a one-change neighbour of the best point so far (when it
 * has an unproposed one). The others are bred: two tournament winners, uniform
 * crossover, mutation. Breeding finds good regions, but its children rarely land on
 * the one change that finishes the best point; climbing does exactly that. Without
 * it evolve came 4 points lower on the benchmark; any share from 1/4 to 1 scored
 * the same within noise (docs/tuner-search.md). */
static bool breed(nr_search *s, int *p) {
  int64_t n_parents = evolve_parents(s);
  if (n_parents > 0 && rng_unit(&s->rng) < EVOLVE_CLIMB && neighbour(s, s->pool[0].k, p))
    return true;
  for (int t = 0; n_parents > 0 && t < EVOLVE_MAX_TRIES; t++) {
    int64_t a = tournament(s, n_parents), b = tournament(s, n_parents);
    crossover(s, point_at(s, a), point_at(s, b), p);
    mutate(s, p);
    if (!proposed(s, p))
      return true;
  }
  return random_unproposed(s, p);
}

/* Per dimension, the best-prior value with probability 1/2, else a uniform one; the
 * first prior point takes the best value everywhere. */
static void prior_point(nr_search *s, int *p, bool pure) {
  for (int d = 0; d < s->n_dims; d++) {
    int best = 0;
    for (int v = 1; v < s->n_values[d]; v++)
      if (s->prior[s->voff[d] + v] < s->prior[s->voff[d] + best])
        best = v;
    bool take = pure || (rng_next(&s->rng) >> 63);
    p[d] = take ? best : (int)rng_below(&s->rng, s->n_values[d]);
  }
}

/* Generation 0: the default, up to half the rest from the priors, then random. */
static bool initial_member(nr_search *s, int *p) {
  if (s->n_pts == 0) {
    memcpy(p, s->dflt, (size_t)s->n_dims * sizeof *p);
    return true;
  }
  for (int t = 0; s->prior && s->n_pts <= s->pop / 2 && t < EVOLVE_MAX_TRIES; t++) {
    prior_point(s, p, t == 0 && s->n_pts == 1);
    if (!proposed(s, p))
      return true;
  }
  return random_unproposed(s, p);
}

/* Generation 0 is the first `pop` points, each later generation the next `pop`. */
static bool next_evolve(nr_search *s, int *p) {
  int64_t gen = s->n_pts < s->pop ? 0 : 1 + (s->n_pts - s->pop) / s->pop;
  if (!(gen == 0 ? initial_member(s, p) : breed(s, p)))
    return false;
  snprintf(s->phase, sizeof s->phase, "evolve:%lld", (long long)gen);
  return true;
}

/* ---- public ------------------------------------------------------------------------ */

static const char *const names[NR_SEARCH_COUNT] = {"fast", "full", "mixed", "random",
                                                   "evolve", "greedy"};

const char *nr_search_name(nr_search_kind k) {
  return (unsigned)k < NR_SEARCH_COUNT ? names[k] : "unknown";
}

bool nr_search_parse(const char *text, nr_search_kind *out) {
  for (int k = 0; text && k < NR_SEARCH_COUNT; k++)
    if (!strcmp(text, names[k])) {
      *out = (nr_search_kind)k;
      return true;
    }
  return false;
}

static bool config_ok(const nr_search_config *c) {
  if (!c || (unsigned)c->kind >= NR_SEARCH_COUNT || c->n_dims < 0)
    return false;
  if (c->n_dims > 0 && (!c->n_values || !c->dflt))
    return false;
  if (!(c->min_gain >= 0 && c->min_gain < 1))
    return false;
  for (int d = 0; d < c->n_dims; d++)
    if (c->n_values[d] < 1 || c->dflt[d] < 0 || c->dflt[d] >= c->n_values[d] ||
        (c->prior && !c->prior[d]))
      return false;
  return true;
}

static bool copy_config(nr_search *s, const nr_search_config *c) {
  size_t nd = (size_t)(c->n_dims ? c->n_dims : 1);
  s->n_values = malloc(nd * sizeof(int));
  s->dflt = malloc(nd * sizeof(int));
  s->voff = malloc(nd * sizeof(int));
  s->tmp = malloc(nd * sizeof(int));
  s->tmp2 = malloc(nd * sizeof(int));
  if (!s->n_values || !s->dflt || !s->voff || !s->tmp || !s->tmp2)
    return false;
  s->space = 1;
  for (int d = 0; d < c->n_dims; d++) {
    s->n_values[d] = c->n_values[d];
    s->dflt[d] = c->dflt[d];
    s->voff[d] = s->n_flat;
    s->n_flat += c->n_values[d];
    s->space = mul_sat(s->space, c->n_values[d]);
  }
  if (c->late) {
    s->late = malloc(nd * sizeof(bool));
    if (!s->late)
      return false;
    memcpy(s->late, c->late, (size_t)c->n_dims * sizeof(bool));
  }
  if (!c->prior)
    return true;
  s->prior = malloc((size_t)(s->n_flat ? s->n_flat : 1) * sizeof *s->prior);
  if (!s->prior)
    return false;
  for (int d = 0; d < c->n_dims; d++)
    for (int v = 0; v < c->n_values[d]; v++) {
      double x = c->prior[d][v];
      s->prior[s->voff[d] + v] = isnan(x) ? INFINITY : x;
    }
  return true;
}

/* Per-kind state and the total known in advance. */
static bool init_kind(nr_search *s) {
  switch (s->kind) {
  case NR_SEARCH_FAST:
  case NR_SEARCH_MIXED:
  case NR_SEARCH_GREEDY:
    s->stage = 1;
    if (!init_moves(s))
      return false;
    s->total = fast_size(s);
    return true;
  case NR_SEARCH_FULL:
    s->total = s->space;
    return odo_init_full(s);
  case NR_SEARCH_RANDOM:
    s->total = -1;
    return true;
  case NR_SEARCH_EVOLVE:
    s->total = -1;
    s->pop = evolve_pop(s);
    s->pool = malloc((size_t)s->max_points * sizeof *s->pool);
    return s->pool != NULL;
  default:
    return false;
  }
}

nr_search *nr_search_create(const nr_search_config *cfg) {
  if (!config_ok(cfg))
    return NULL;
  nr_search *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  s->kind = cfg->kind;
  s->n_dims = cfg->n_dims;
  s->rng = cfg->seed;
  s->max_points = cfg->max_points > 0 ? cfg->max_points : 64;
  s->min_gain = cfg->min_gain > 0 ? cfg->min_gain : 0.01;
  if (!copy_config(s, cfg) || !init_kind(s))
    goto fail;
  strcpy(s->phase, s->kind == NR_SEARCH_EVOLVE                              ? "evolve:0"
                   : s->kind == NR_SEARCH_MIXED || s->kind == NR_SEARCH_GREEDY ? "fast"
                                                                            : nr_search_name(s->kind));
  return s;
fail:
  nr_search_destroy(s);
  return NULL;
}

void nr_search_destroy(nr_search *s) {
  if (!s)
    return;
  free(s->n_values);
  free(s->dflt);
  free(s->voff);
  free(s->prior);
  free(s->late);
  free(s->pts);
  free(s->res);
  free(s->slots);
  free(s->tmp);
  free(s->tmp2);
  free(s->moves);
  free(s->chg);
  free(s->g_cur);
  odo_free(&s->odo);
  free(s->remaining);
  free(s->pool);
  free(s);
}

/* Random, evolve: max_points builds of their own, at most SAME_CAP x max_points points
 * in all (a space of mostly ignored values must still end). */
#define SAME_CAP 8
static bool builds_left(const nr_search *s) {
  return s->n_pts - s->n_same < s->max_points &&
         s->n_pts < (int64_t)SAME_CAP * s->max_points;
}

/* The algorithm's candidate (new, as each generator guarantees) into s->tmp. */
static bool propose(nr_search *s) {
  switch (s->kind) {
  case NR_SEARCH_FAST:
    return next_fast(s, s->tmp);
  case NR_SEARCH_FULL:
    return odo_next_new(s, s->tmp);
  case NR_SEARCH_MIXED:
    if (!next_mixed(s, s->tmp))
      return false;
    strcpy(s->phase, s->stage == 1 ? "fast" : s->stage == 2 ? "full" : "refine");
    return true;
  case NR_SEARCH_GREEDY:
    if (!next_greedy_all(s, s->tmp))
      return false;
    strcpy(s->phase, s->stage == 1 ? "fast" : s->stage == 2 ? "greedy" : "extend");
    return true;
  case NR_SEARCH_RANDOM: return builds_left(s) && next_random(s, s->tmp);
  case NR_SEARCH_EVOLVE: return builds_left(s) && next_evolve(s, s->tmp);
  default:
    return false;
  }
}

int nr_search_next(nr_search *s, int *point) {
  if (!s)
    return 0;
  if (!propose(s) || !add_point(s, s->tmp))
    return 0;
  memcpy(point, s->tmp, (size_t)s->n_dims * sizeof *point);
  return 1;
}

void nr_search_tell(nr_search *s, const int *point, bool feasible, double cost,
                    double cost_lo, double cost_hi) {
  int64_t k = s && point ? find_point(s, point) : -1;
  if (k < 0)
    return;
  /* A NaN cost would make rankings depend on the sort's internals: call it endless. */
  s->res[k] = (result){true,
                       feasible,
                       s->res[k].same,
                       isnan(cost) ? INFINITY : cost,
                       isnan(cost_lo) ? INFINITY : cost_lo,
                       isnan(cost_hi) ? INFINITY : cost_hi,
                       s->res[k].loss};
}

void nr_search_tell_same(nr_search *s, const int *point) {
  int64_t k = s && point ? find_point(s, point) : -1;
  if (k >= 0 && !s->res[k].same)
    s->res[k].same = true, s->n_same++;
}

void nr_search_tell_loss(nr_search *s, const int *point, double loss) {
  int64_t k = s && point ? find_point(s, point) : -1;
  if (k >= 0)
    s->res[k].loss = loss;
}

int64_t nr_search_total(const nr_search *s) { return s ? s->total : -1; }

const char *nr_search_phase(const nr_search *s) { return s ? s->phase : ""; }
