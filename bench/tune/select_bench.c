/* select_bench.c - how often the tuner's decision ships a route that is not really
 * faster, and how often it finds one that is: simulated confirmation sessions run
 * through the production decision code (src/tune/decide.c, the round loop's early
 * stop, and the finalists' preference order tune_entry_cmp), printing a table.
 *
 * A benchmark, not a test (no assertion): its targets are at most 5% of no-gain
 * sessions shipping a non-default route, and at least 80% of sessions finding a true
 * 5% gain at the default budget. Noise model: every slot of a round (D F1 D F2 .. D,
 * finalists reversed on odd rounds, as tune_measure.c times them) is log-normal, so a
 * per-round ratio F / sqrt(D_before * D_after) has log-sd sigma; the slots get
 * sigma / sqrt(1.5) each and adjacent finalists share a default timing, as in a real
 * round. Finalist 0 has the true gain (latency ratio 1 - gain), every other finalist
 * none; a session "finds" the gain when finalist 0 is chosen. sigma comes from the
 * command line; bench/tune/measured_sigma.py reads it from a real session's database.
 *
 *   build/bench/nr_select_bench [--sigma 0.03] [--sessions 4000] [--rounds R]
 *                               [--max-finalists 8] [--seed 1]
 *
 * Without --rounds each column runs the rounds the tuner plans for that many
 * finalists (nr_decide_planned_rounds, the default budget); --rounds R runs R for all. */
#include "tune/decide.h"
#include "tune/tune_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next_u64(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double normal(rng *r) { /* Box-Muller */
  double u = ((double)(next_u64(r) >> 11) + 0.5) / 9007199254740992.0;
  double v = ((double)(next_u64(r) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* One round of n finalists with true latency ratios mu[], into ratio[]. */
static void sim_round(rng *g, int n, int r, const double *mu, double slot_sigma,
                      double *ratio) {
  double before = exp(slot_sigma * normal(g));
  for (int k = 0; k < n; k++) {
    int i = r % 2 == 0 ? k : n - 1 - k;
    double f = mu[i] * exp(slot_sigma * normal(g));
    double after = exp(slot_sigma * normal(g));
    ratio[i] = f / sqrt(before * after);
    before = after;
  }
}

/* One session; the index of the chosen finalist, -1 for the default route. */
static int sim_session(rng *g, int n, int rounds, const double *mu, double sigma,
                       double *ratios, int *used) {
  int done = 0;
  for (int r = 0; r < rounds; r++) {
    sim_round(g, n, r, mu, sigma / sqrt(1.5), ratios + (size_t)r * n);
    done = r + 1;
    if (r + 1 < rounds && nr_decide_settled(ratios, done, n))
      break;
  }
  *used = done;
  nr_decision d[8];
  tune_cand c[8];
  tune_entry v[8];
  char routes[8][16];
  if (nr_decide_finalists(ratios, done, n, d))
    return -1;
  for (int i = 0; i < n; i++) {
    snprintf(routes[i], sizeof routes[i], "-f=%d", i);
    c[i] = (tune_cand){.route = routes[i], .changes = 1 + i % 3};
    v[i] = (tune_entry){&c[i], 0, d[i].ratio, d[i].lo, d[i].hi, d[i].p, d[i].p_holm,
                        d[i].accepted};
  }
  qsort(v, (size_t)n, sizeof *v, tune_entry_cmp);
  return v[0].accepted ? (int)(v[0].c - c) : -1;
}

typedef struct opts {
  double sigma;
  int sessions, rounds, max_fin;
  uint64_t seed;
} opts;

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){0.03, 4000, 0, 8, 1};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v)
      return fprintf(stderr, "select_bench: %s needs a value\n", argv[i]), -1;
    if (!strcmp(argv[i], "--sigma")) o->sigma = atof(v);
    else if (!strcmp(argv[i], "--sessions")) o->sessions = atoi(v);
    else if (!strcmp(argv[i], "--rounds")) o->rounds = atoi(v);
    else if (!strcmp(argv[i], "--max-finalists")) o->max_fin = atoi(v);
    else if (!strcmp(argv[i], "--seed")) o->seed = strtoull(v, NULL, 10);
    else return fprintf(stderr, "select_bench: unknown option '%s'\n", argv[i]), -1;
    i++;
  }
  if (o->sigma <= 0 || o->sessions < 1 || o->rounds < 0 || o->rounds > NR_DECIDE_MAX_ROUNDS ||
      o->max_fin < 1 || o->max_fin > 8)
    return fprintf(stderr, "select_bench: need sigma > 0, sessions >= 1, 0 <= rounds <= %d, "
                   "1 <= max-finalists <= 8\n", NR_DECIDE_MAX_ROUNDS), -1;
  return 0;
}

int main(int argc, char **argv) {
  opts o;
  if (parse(argc, argv, &o))
    return 2;
  static const double gains[] = {0, 0.02, 0.05, 0.10};
  double *ratios = malloc(sizeof *ratios * (size_t)NR_DECIDE_MAX_ROUNDS * 8);
  if (!ratios)
    return 1;
  printf("select_bench: sigma %.4f per-round log-ratio, %d sessions a cell, alpha %.2f "
         "family-wise, seed %llu\n", o.sigma, o.sessions, NR_DECIDE_ALPHA,
         (unsigned long long)o.seed);
  printf("gain 0: sessions shipping a non-default route (false accepts; target <= 5%%)\n"
         "gain > 0: sessions choosing the faster finalist (power; target >= 80%% at 5%%)\n\n");
  printf("%-6s", "gain");
  for (int n = 1; n <= o.max_fin; n++)
    printf("  %3d fin.", n);
  printf("   mean rounds\n%-6s", "rounds");
  for (int n = 1; n <= o.max_fin; n++)
    printf("  %8d", o.rounds ? o.rounds : nr_decide_planned_rounds(n));
  printf("   (planned)\n");
  for (size_t gi = 0; gi < sizeof gains / sizeof *gains; gi++) {
    char label[16];
    snprintf(label, sizeof label, "%.0f%%", 100 * gains[gi]);
    printf("%-6s", label);
    long total_rounds = 0, cells = 0;
    for (int n = 1; n <= o.max_fin; n++) {
      rng g = {o.seed * 1000003u + gi * 101u + (uint64_t)n};
      double mu[8];
      for (int i = 0; i < n; i++)
        mu[i] = i == 0 ? 1 - gains[gi] : 1;
      int hits = 0;
      for (int s = 0; s < o.sessions; s++) {
        int rounds = o.rounds ? o.rounds : nr_decide_planned_rounds(n);
        int used, w = sim_session(&g, n, rounds, mu, o.sigma, ratios, &used);
        hits += gains[gi] == 0 ? w >= 0 : w == 0;
        total_rounds += used;
        cells++;
      }
      printf("  %7.1f%%", 100.0 * hits / o.sessions);
    }
    printf("   %.1f\n", (double)total_rounds / (double)cells);
  }
  free(ratios);
  return 0;
}
