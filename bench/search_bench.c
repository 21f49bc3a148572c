/* search_bench.c - how close the tuner's search algorithms (src/tune/search.h) get to
 * the exhaustive optimum, and with how many builds, on synthetic route spaces.
 *
 * A space looks like a real tuning problem: several knobs of 2-6 values, a
 * multiplicative latency model (per-value effects plus pairwise interactions), values
 * that break accuracy (infeasible, and tempting: they are fast), one interaction that
 * makes the best-looking feasible pair infeasible together, and seeded measurement
 * noise on the reported cost with a confidence interval around it. The key design
 * decision is to judge each algorithm by the TRUE (noise-free) cost of the point it
 * would choose - the feasible point with the lowest reported cost it evaluated - so
 * that noise shows up as the cost it really has: sometimes choosing the wrong point.
 *
 * Per space, `full` (exhaustive) gives the true optimum; then every run seed runs
 * mixed (all three phases: it ends on its own), and evolve and random both at mixed's
 * build count and at a fixed share of the space (15% unless --budget says otherwise).
 * Prints one table per shape and one over all runs: builds as a share of the space
 * (median and largest), the gap (median, worst, share of runs within 3%), and the
 * share of runs that meet the tuner's goal: within 3% with at most 15% of the builds.
 *
 *   search_bench [--spaces N] [--runs N] [--interaction SD] [--noise SD] [--budget PCT]
 *                [--cap PCT]
 *   (defaults: 10 spaces per shape, 5 runs, interaction sd 0.05, noise sd 0.015,
 *   evolve and random also at 15% of the space, and mixed uncapped; --cap stops mixed
 *   after PCT% of the space's builds, as the tuner's build budget would) */
#include "tune/search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DIMS 8
#define MAX_VALUES 6
#define CI_Z 1.96
#define GOAL_GAP_PCT 3.0     /* the tuner's goal: within 3% of the optimum ... */
#define GOAL_BUILDS_PCT 15.0 /* ... with at most 15% of the space's builds */

static double interaction_sd = 0.05; /* --interaction SD */
static double noise_sd = 0.015;      /* --noise SD: relative sd of a reported median */
static double budget_pct = 15;       /* --budget PCT: the fixed budget of evolve, random */
static double cap_pct = 0;           /* --cap PCT: mixed's build budget; 0: none */

typedef struct shape {
  const char *name;
  int n_dims;
  int n_values[MAX_DIMS];
} shape;

static const shape shapes[] = {
    {"6 knobs, 256 routes", 6, {4, 4, 2, 2, 2, 2}},
    {"6 knobs, 432 routes", 6, {6, 3, 2, 3, 2, 2}},
    {"7 knobs, 1440 routes", 7, {5, 4, 3, 3, 2, 2, 2}},
    {"8 knobs, 3456 routes", 8, {6, 4, 3, 3, 2, 2, 2, 2}},
};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };

/* One synthetic space: every route's true cost and feasibility, by point index. */
typedef struct space {
  const shape *sh;
  int dflt[MAX_DIMS];
  int64_t size;
  double *cost;
  bool *feasible;
  double opt; /* the true optimum over feasible routes */
} space;

/* ---- seeded numbers ---------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double unit(uint64_t *s) {
  *s += 0x9e3779b97f4a7c15ull;
  return ((double)(mix64(*s) >> 11) + 0.5) * 0x1p-53;
}

static double gauss(uint64_t *s) { /* Box-Muller; one value per call is enough here */
  double u = unit(s), v = unit(s);
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* ---- the latency model ------------------------------------------------------------- */

typedef struct model {
  double effect[MAX_DIMS][MAX_VALUES];
  double inter[MAX_DIMS][MAX_DIMS][MAX_VALUES][MAX_VALUES];
  bool bad[MAX_DIMS][MAX_VALUES];
  int pair[4]; /* (d, v, e, w): feasible alone, infeasible together */
} model;

static void index_point(const space *sp, int64_t idx, int *p) {
  for (int d = 0; d < sp->sh->n_dims; d++) {
    p[d] = (int)(idx % sp->sh->n_values[d]);
    idx /= sp->sh->n_values[d];
  }
}

static int64_t point_index(const space *sp, const int *p) {
  int64_t idx = 0;
  for (int d = sp->sh->n_dims - 1; d >= 0; d--)
    idx = idx * sp->sh->n_values[d] + p[d];
  return idx;
}

/* Per-value effects around 1 (some faster, some slower, a few much slower, like a
 * kernel that misses its fast path); about 8% of the non-default values break
 * accuracy, and those are made fast, as a low-precision kernel would be. */
static void draw_effects(model *m, const space *sp, uint64_t *r) {
  const shape *sh = sp->sh;
  bool any_bad = false;
  for (int d = 0; d < sh->n_dims; d++)
    for (int v = 0; v < sh->n_values[d]; v++) {
      if (v == sp->dflt[d]) {
        m->effect[d][v] = 1;
        continue;
      }
      m->effect[d][v] = exp(0.15 * gauss(r)) * (unit(r) < 0.15 ? 1.3 + 1.2 * unit(r) : 1);
      m->bad[d][v] = unit(r) < 0.08;
      any_bad |= m->bad[d][v];
      if (m->bad[d][v])
        m->effect[d][v] = exp(-fabs(0.15 * gauss(r)));
    }
  if (!any_bad) {
    int d = sh->n_dims - 1, v = (sp->dflt[d] + 1) % sh->n_values[d];
    m->bad[d][v] = true;
    m->effect[d][v] = 0.8;
  }
}

/* 40% of the knob pairs interact: each non-default combination of such a pair gets
 * its own factor, lognormal with sd `interaction_sd`. */
static void draw_interactions(model *m, const space *sp, uint64_t *r) {
  const shape *sh = sp->sh;
  for (int d = 0; d < sh->n_dims; d++)
    for (int e = d + 1; e < sh->n_dims; e++) {
      bool on = unit(r) < 0.4;
      for (int v = 0; v < sh->n_values[d]; v++)
        for (int w = 0; w < sh->n_values[e]; w++) {
          bool dflt = v == sp->dflt[d] || w == sp->dflt[e];
          m->inter[d][e][v][w] = on && !dflt ? exp(interaction_sd * gauss(r)) : 1;
        }
    }
}

/* The two best feasible single changes in different knobs break accuracy together. */
static void pick_bad_pair(model *m, const space *sp) {
  const shape *sh = sp->sh;
  int bd = -1, bv = 0, sd = -1, sv = 0;
  for (int d = 0; d < sh->n_dims; d++)
    for (int v = 0; v < sh->n_values[d]; v++) {
      if (v == sp->dflt[d] || m->bad[d][v])
        continue;
      double x = m->effect[d][v];
      if (bd < 0 || x < m->effect[bd][bv]) {
        if (bd != d)
          sd = bd, sv = bv;
        bd = d, bv = v;
      } else if (d != bd && (sd < 0 || x < m->effect[sd][sv])) {
        sd = d, sv = v;
      }
    }
  m->pair[0] = bd, m->pair[1] = bv, m->pair[2] = sd, m->pair[3] = sv;
}

static void evaluate(const model *m, const space *sp, const int *p, double *cost,
                     bool *feasible) {
  const shape *sh = sp->sh;
  double c = 10; /* ms */
  bool ok = !(m->pair[0] >= 0 && m->pair[2] >= 0 && p[m->pair[0]] == m->pair[1] &&
              p[m->pair[2]] == m->pair[3]);
  for (int d = 0; d < sh->n_dims; d++) {
    c *= m->effect[d][p[d]];
    ok &= !m->bad[d][p[d]];
    for (int e = d + 1; e < sh->n_dims; e++)
      c *= m->inter[d][e][p[d]][p[e]];
  }
  *cost = c;
  *feasible = ok;
}

static bool space_build(space *sp, const shape *sh, uint64_t seed) {
  static model m;
  memset(&m, 0, sizeof m);
  memset(sp, 0, sizeof *sp);
  sp->sh = sh;
  uint64_t r = mix64(seed * 0x632be59bd9b4e019ull + 1);
  sp->size = 1;
  for (int d = 0; d < sh->n_dims; d++) {
    sp->dflt[d] = unit(&r) < 0.5 ? 0 : (int)(unit(&r) * sh->n_values[d]);
    sp->size *= sh->n_values[d];
  }
  draw_effects(&m, sp, &r);
  draw_interactions(&m, sp, &r);
  pick_bad_pair(&m, sp);
  sp->cost = malloc((size_t)sp->size * sizeof *sp->cost);
  sp->feasible = malloc((size_t)sp->size * sizeof *sp->feasible);
  if (!sp->cost || !sp->feasible)
    return false;
  sp->opt = INFINITY;
  int p[MAX_DIMS];
  for (int64_t i = 0; i < sp->size; i++) {
    index_point(sp, i, p);
    evaluate(&m, sp, p, &sp->cost[i], &sp->feasible[i]);
    if (sp->feasible[i] && sp->cost[i] < sp->opt)
      sp->opt = sp->cost[i];
  }
  return true;
}

static void space_free(space *sp) {
  free(sp->cost);
  free(sp->feasible);
}

/* ---- one run of one algorithm ------------------------------------------------------ */

typedef struct outcome {
  int64_t builds;
  double gap; /* true cost of the chosen route over the optimum, minus 1 */
} outcome;

/* The reported median of route idx in this run: the true cost times seeded noise,
 * with a 95% interval whose width itself varies a little, as measured ones do. */
static void measure(const space *sp, uint64_t run_seed, int64_t idx, double *cost,
                    double *lo, double *hi) {
  uint64_t r = mix64(run_seed * 0x9e3779b97f4a7c15ull ^ mix64((uint64_t)idx + 17));
  *cost = sp->cost[idx] * exp(noise_sd * gauss(&r));
  double h = CI_Z * noise_sd * (0.7 + 0.6 * unit(&r));
  *lo = *cost * (1 - h);
  *hi = *cost * (1 + h);
}

/* max_points: random/evolve's budget; cap: a driver's build budget (0: none). */
static outcome run_search(const space *sp, nr_search_kind kind, uint64_t run_seed,
                          int max_points, int64_t cap) {
  nr_search_config c = {.kind = kind, .n_dims = sp->sh->n_dims,
                        .n_values = sp->sh->n_values, .dflt = sp->dflt,
                        .seed = run_seed, .max_points = max_points};
  nr_search *s = nr_search_create(&c);
  outcome o = {0, INFINITY};
  if (!s)
    return o;
  int p[MAX_DIMS];
  double best = INFINITY;
  while ((cap <= 0 || o.builds < cap) && nr_search_next(s, p)) {
    int64_t idx = point_index(sp, p);
    double cost, lo, hi;
    measure(sp, run_seed, idx, &cost, &lo, &hi);
    nr_search_tell(s, p, sp->feasible[idx], cost, lo, hi);
    o.builds++;
    if (sp->feasible[idx] && cost < best) {
      best = cost;
      o.gap = sp->cost[idx] / sp->opt - 1;
    }
  }
  nr_search_destroy(s);
  return o;
}

/* ---- tables ------------------------------------------------------------------------ */

enum {
  ROW_FULL,
  ROW_MIXED,
  ROW_EVOLVE_M,
  ROW_RANDOM_M,
  ROW_EVOLVE_B,
  ROW_RANDOM_B,
  N_ROWS
};
static char row_names[N_ROWS][32] = {"full (exhaustive)", "mixed",
                                     "evolve @ mixed's builds",
                                     "random @ mixed's builds"}; /* + the fixed budget */

typedef struct tally {
  int n;
  double *pct, *gap; /* per run: builds as % of exhaustive, gap in % */
} tally;

static void tally_add(tally *t, const space *sp, outcome o) {
  t->pct[t->n] = 100.0 * (double)o.builds / (double)sp->size;
  t->gap[t->n] = 100.0 * o.gap;
  t->n++;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *x, int n) {
  qsort(x, (size_t)n, sizeof *x, by_value);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Builds as a share of the space (the median and the largest), the gap, and the
 * issue's goal per run: within 3% of the optimum with at most 15% of the space's builds.
 * Counted before median() sorts the columns apart. */
static void print_table(const char *title, tally *rows) {
  printf("\n%s\n", title);
  printf("| %-25s | %4s | %10s | %10s | %10s | %10s | %9s | %9s |\n", "algorithm", "runs",
         "builds %", "max builds", "median gap", "worst gap", "within 3%", "goal met");
  printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", "---------------------------", "-----:",
         "-----------:", "-----------:", "-----------:", "-----------:", "----------:",
         "----------:");
  for (int k = 0; k < N_ROWS; k++) {
    tally *t = &rows[k];
    int within = 0, goal = 0;
    double worst = 0, max_pct = 0;
    for (int i = 0; i < t->n; i++) {
      within += t->gap[i] <= GOAL_GAP_PCT;
      goal += t->gap[i] <= GOAL_GAP_PCT && t->pct[i] <= GOAL_BUILDS_PCT;
      worst = t->gap[i] > worst ? t->gap[i] : worst;
      max_pct = t->pct[i] > max_pct ? t->pct[i] : max_pct;
    }
    double med_pct = median(t->pct, t->n), med_gap = median(t->gap, t->n);
    printf("| %-25s | %4d | %9.1f%% | %9.1f%% | %9.2f%% | %9.2f%% | %8.0f%% | %8.0f%% |\n",
           row_names[k], t->n, med_pct, max_pct, med_gap, worst, 100.0 * within / t->n,
           100.0 * goal / t->n);
  }
}

/* All runs of one space, added to the shape's rows and to the overall rows. */
static void bench_space(const space *sp, int n_runs, tally *shape_rows, tally *all_rows) {
  int fixed = (int)(budget_pct / 100 * (double)sp->size);
  int64_t cap = (int64_t)(cap_pct / 100 * (double)sp->size);
  for (int r = 1; r <= n_runs; r++) {
    uint64_t seed = (uint64_t)r;
    outcome o[N_ROWS];
    o[ROW_FULL] = run_search(sp, NR_SEARCH_FULL, seed, 0, 0);
    o[ROW_MIXED] = run_search(sp, NR_SEARCH_MIXED, seed, 0, cap);
    int budget = (int)o[ROW_MIXED].builds;
    o[ROW_EVOLVE_M] = run_search(sp, NR_SEARCH_EVOLVE, seed, budget, 0);
    o[ROW_RANDOM_M] = run_search(sp, NR_SEARCH_RANDOM, seed, budget, 0);
    o[ROW_EVOLVE_B] = run_search(sp, NR_SEARCH_EVOLVE, seed, fixed, 0);
    o[ROW_RANDOM_B] = run_search(sp, NR_SEARCH_RANDOM, seed, fixed, 0);
    for (int k = 0; k < N_ROWS; k++) {
      tally_add(&shape_rows[k], sp, o[k]);
      tally_add(&all_rows[k], sp, o[k]);
    }
  }
}

static bool tallies_alloc(tally *rows, int n) {
  for (int k = 0; k < N_ROWS; k++) {
    rows[k] =
        (tally){0, malloc((size_t)n * sizeof(double)), malloc((size_t)n * sizeof(double))};
    if (!rows[k].pct || !rows[k].gap)
      return false;
  }
  return true;
}

static void tallies_free(tally *rows) {
  for (int k = 0; k < N_ROWS; k++) {
    free(rows[k].pct);
    free(rows[k].gap);
  }
}

static int parse_args(int argc, char **argv, int *n_spaces, int *n_runs) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--spaces") && i + 1 < argc)
      *n_spaces = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
      *n_runs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--interaction") && i + 1 < argc)
      interaction_sd = atof(argv[++i]);
    else if (!strcmp(argv[i], "--noise") && i + 1 < argc)
      noise_sd = atof(argv[++i]);
    else if (!strcmp(argv[i], "--budget") && i + 1 < argc)
      budget_pct = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cap") && i + 1 < argc)
      cap_pct = atof(argv[++i]);
    else
      return -1;
  }
  return *n_spaces > 0 && *n_runs > 0 && interaction_sd >= 0 && noise_sd >= 0 &&
                 budget_pct > 0 && budget_pct <= 100 && cap_pct >= 0 && cap_pct <= 100
             ? 0
             : -1;
}

static void print_header(int argc, char **argv, int n_spaces, int n_runs) {
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  printf("search_bench, %s:", date);
  for (int i = 0; i < argc; i++)
    printf(" %s", argv[i]);
  printf("\n%d spaces per shape x %d runs; interaction sd %.1f%%; noise sd %.1f%%, 95%% "
         "intervals; gap = true cost of the chosen route over the true optimum\n",
         n_spaces, n_runs, 100 * interaction_sd, 100 * noise_sd);
}

int main(int argc, char **argv) {
  int n_spaces = 10, n_runs = 5;
  if (parse_args(argc, argv, &n_spaces, &n_runs)) {
    fprintf(stderr,
            "usage: search_bench [--spaces N] [--runs N] [--interaction SD] [--noise SD]\n"
            "                    [--budget PCT] [--cap PCT]\n");
    return 2;
  }
  print_header(argc, argv, n_spaces, n_runs);
  snprintf(row_names[ROW_EVOLVE_B], sizeof row_names[0], "evolve @ %g%%", budget_pct);
  snprintf(row_names[ROW_RANDOM_B], sizeof row_names[0], "random @ %g%%", budget_pct);
  if (cap_pct > 0)
    snprintf(row_names[ROW_MIXED], sizeof row_names[0], "mixed, capped @ %g%%", cap_pct);
  tally all[N_ROWS], per[N_ROWS];
  if (!tallies_alloc(all, N_SHAPES * n_spaces * n_runs) ||
      !tallies_alloc(per, n_spaces * n_runs))
    return 1;
  for (int sh = 0; sh < N_SHAPES; sh++) {
    for (int k = 0; k < N_ROWS; k++)
      per[k].n = 0;
    for (int i = 0; i < n_spaces; i++) {
      space sp;
      if (!space_build(&sp, &shapes[sh], (uint64_t)(sh * 1000 + i + 1)))
        return 1;
      bench_space(&sp, n_runs, per, all);
      space_free(&sp);
    }
    print_table(shapes[sh].name, per);
  }
  print_table("all shapes", all);
  tallies_free(all);
  tallies_free(per);
  return 0;
}
