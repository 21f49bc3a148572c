/* search.h - search algorithms over a discrete space of build routes, as ask/tell
 * state machines that know nothing about models or engines.
 *
 * The space is a list of dimensions, each with n_values values and a default index;
 * a point is one value index per dimension (int[n_dims]); the all-default point is
 * the default route, and every algorithm proposes it first (each session needs its
 * baseline: the report and the priors are ratios to it). The driver asks for a point
 * (nr_search_next), evaluates it and tells the result (nr_search_tell). Every
 * algorithm is deterministic given its seed and the sequence of results it is told,
 * which is what makes `nnroute tune --continue` exact: the driver replays recorded
 * results and the search proposes the same points again. No algorithm proposes a
 * point twice.
 *
 * Results: feasible (within the accuracy tolerance) and, when feasible, a cost
 * (median latency) with the bounds of its 95% confidence interval; a NaN cost counts
 * as +infinity. Infeasible points are never "better" than anything; algorithms may
 * still use them to learn which values break accuracy. A point asked for but never
 * told (its build crashed before a result) counts as unmeasured: never better, never
 * a parent.
 *
 *   fast   the default point, then every one-dimension change from it
 *   full   the Cartesian product, in odometer order starting from the default
 *   mixed  three phases, reported by nr_search_phase:
 *          "fast"   phase 1, fast;
 *          "full"   phase 2, full over the values that were feasible and
 *                   significantly faster than the default in phase 1 (cost_hi below
 *                   the default's cost_lo and cost below (1 - min_gain) x the
 *                   default's), skipping points already measured; at most 96
 *                   points (the values with the smallest gains are dropped first);
 *          "refine" phase 3, hill climbing from the best feasible point so far: its
 *                   unproposed one-change neighbours in a fixed order (by prior when
 *                   given, else by dimension, then value), moving to a neighbour as
 *                   soon as one is told a lower cost; it ends when the best point has
 *                   no unproposed neighbour. It combines the gains too small for
 *                   phase 2's test under noise.
 *   random the default, then uniform points (each dimension drawn independently),
 *          no repeats, until max_points builds
 *   evolve the default point and a random population, then generations: half the
 *          children climb (an unproposed one-change neighbour of the best feasible
 *          point so far), the others come from tournament selection, uniform
 *          crossover and mutation of the best feasible points; no repeats
 *   greedy for choices that trade accuracy for speed (per-node precision): three
 *          phases. "fast" as above. "greedy": per dimension, its fastest one-change
 *          value that was feasible and faster than the default; these changes
 *          sorted by the loss they caused alone (nr_search_tell_loss), lowest
 *          first; then a binary search for the longest prefix of that list that is
 *          feasible when applied together (all of them first). "extend": every
 *          later change of the list added to that prefix in turn, kept when the
 *          point stays feasible. This is layer-wise sensitivity analysis: changes
 *          that hurt accuracy least are combined first, and the tolerance, not a
 *          screening time, decides what joins. */
#ifndef NR_TUNE_SEARCH_H
#define NR_TUNE_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

typedef enum nr_search_kind {
  NR_SEARCH_FAST = 0,
  NR_SEARCH_FULL,
  NR_SEARCH_MIXED,
  NR_SEARCH_RANDOM,
  NR_SEARCH_EVOLVE,
  NR_SEARCH_GREEDY,
  NR_SEARCH_COUNT
} nr_search_kind;

const char *nr_search_name(nr_search_kind k); /* "fast", ...; static storage */
bool nr_search_parse(const char *text, nr_search_kind *out);

typedef struct nr_search_config {
  nr_search_kind kind;
  int n_dims;
  const int *n_values;  /* per dimension, >= 1 (copied) */
  const int *dflt;      /* per dimension, the default value index (copied) */
  uint64_t seed;
  /* random/evolve: stop after this many points that are builds of their own (they
   * are otherwise endless; points told nr_search_tell_same do not count, but at most
   * 8 x max_points points are proposed in all); fast/full/mixed ignore it (the
   * driver's budgets cut them). 0: 64. */
  int max_points;
  double min_gain;      /* mixed: significance threshold; 0: 0.01 */
  /* Optional priors (may be NULL): prior[d][v] is a score where lower is more
   * promising (e.g. a latency ratio recorded on another machine). They only order
   * the points fast/mixed propose and seed evolve's first population; they never
   * stand in for a measurement. A NaN prior counts as +infinity (least promising). */
  const double *const *prior;
  /* Optional (may be NULL): late[d] puts dimension d's one-change points after every
   * other's in fast and mixed's first phase, whatever the priors say: dimensions whose
   * builds are slow (compile.tactic_selection=profile times every tactic of every
   * node), which a short budget should not spend itself on first. */
  const bool *late;
} nr_search_config;

typedef struct nr_search nr_search;

/* NULL when out of memory or the config is unusable (n_dims < 0, n_values < 1,
 * default out of range). */
nr_search *nr_search_create(const nr_search_config *cfg);
void nr_search_destroy(nr_search *s);
/* Writes the next point to evaluate into point[n_dims]; returns 1, or 0 when the
 * algorithm has nothing more to propose, and also when it runs out of memory. */
int nr_search_next(nr_search *s, int *point);
/* The result of a point: any point nr_search_next returned, not only the last one
 * (results may come late or out of order); telling a point again replaces its result,
 * and a point never proposed is ignored. point is read during the call only. */
void nr_search_tell(nr_search *s, const int *point, bool feasible, double cost,
                    double cost_lo, double cost_hi);
/* Tells that point (one nr_search_next returned) builds the plan of a point evaluated
 * before: the values where they differ were ignored by the build, so it cost no build
 * and its result (told as usual) is that point's. Random and evolve do not count it
 * against max_points, and evolve does not breed from it twice; every algorithm still
 * never proposes it again. Told once per point; told again it changes nothing. */
void nr_search_tell_same(nr_search *s, const int *point);
/* The accuracy loss measured at a point (lower is better; NaN: unknown), told before
 * or after its nr_search_tell. Only greedy uses it, to order its changes. */
void nr_search_tell_loss(nr_search *s, const int *point, double loss);
/* Number of points the algorithm will propose in all, when known: fast, full; for
 * mixed, the count through its current phase (phase 1's size, then phases 1-2's, then
 * in phase 3 the points so far plus the best point's unproposed neighbours, which
 * changes when the climb moves), exact once nr_search_next has returned 0. -1 for
 * random and evolve. Saturates at INT64_MAX. */
int64_t nr_search_total(const nr_search *s);
/* The phase name of the last proposed point ("fast", "full", "refine", "random",
 * "evolve:3"), recorded with each candidate; static or owned by s. */
const char *nr_search_phase(const nr_search *s);

#endif
