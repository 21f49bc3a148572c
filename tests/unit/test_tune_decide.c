/* test_tune_decide.c - the tuner's decision statistics (src/tune/decide.c) against
 * values from published tables and worked examples, not from the code under test:
 * the signed-rank critical values of the usual two-sided 5% table, R's documented
 * wilcox.test example (Hollander & Wolfe's depression scores), Holm's adjustment as
 * R's p.adjust prints it, the minimum confirmation rounds that an all-one-sided run
 * needs, and the preference order of the finalists being a total order. */
#include "tune/decide.h"
#include "tune/tune_internal.h"
#include "unit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Two-sided alpha = 0.05 lower critical values T for n = 5..20 (any table of the
 * Wilcoxon signed-rank test; n = 5 has none). */
NR_TEST(decide_signrank_critical_values_match_the_table) {
  static const int table[] = {-1, 0, 2, 3, 5, 8, 10, 13, 17, 21, 25, 29, 34, 40, 46, 52};
  for (int n = 5; n <= 20; n++)
    CHECK(nr_signrank_critical(n, 0.05) == table[n - 5], "n = %d: %d, the table says %d", n,
          nr_signrank_critical(n, 0.05), table[n - 5]);
  /* P(W+ <= 5 | n = 9) = 10/512: the subsets of 1..9 summing to at most 5 */
  CHECK(fabs(nr_signrank_cdf(9, 5) - 10.0 / 512) < 1e-15, "%.17g", nr_signrank_cdf(9, 5));
  CHECK(nr_signrank_cdf(9, -1) == 0 && nr_signrank_cdf(9, 45) == 1);
}

/* R: x <- c(1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30);
 *    y <- c(0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29);
 *    wilcox.test(x, y, paired = TRUE)  ->  V = 40, p-value = 0.03906 (= 20/512). */
NR_TEST(decide_signrank_p_matches_r_paired_example) {
  static const double x[] = {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30};
  static const double y[] = {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29};
  double d[9], v;
  for (int i = 0; i < 9; i++)
    d[i] = x[i] - y[i];
  double p = nr_signrank_p(d, 9, &v);
  CHECK(v == 40, "V = %g", v);
  CHECK(fabs(p - 20.0 / 512) < 1e-12, "p = %.6f, R says 0.03906", p);
  /* all of 9 on one side: 2 / 2^9; the sign of the data does not matter */
  double up[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, down[9];
  for (int i = 0; i < 9; i++)
    down[i] = -up[i];
  CHECK(fabs(nr_signrank_p(up, 9, NULL) - 2.0 / 512) < 1e-15);
  CHECK(fabs(nr_signrank_p(down, 9, NULL) - 2.0 / 512) < 1e-15);
  /* zeros are dropped (Wilcoxon's rule), NaN too: 5 positive values left */
  double z[8] = {0, 1, NAN, 2, 0, 3, 4, 5};
  CHECK(fabs(nr_signrank_p(z, 8, NULL) - 2.0 / 32) < 1e-15, "%.6f", nr_signrank_p(z, 8, NULL));
  /* ties: |d| = 1,1,2 with signs +,-,+ : midranks 1.5,1.5,3, W+ = 4.5; the 8 sign
   * patterns give W+ = 0,1.5,1.5,3,3,4.5,4.5,6, so P(W+ >= 4.5) = 3/8 and p = 6/8 */
  double t3[3] = {1, -1, 2};
  double pt = nr_signrank_p(t3, 3, &v);
  CHECK(pt == 0.75 && v == 4.5, "p = %g, v = %g", pt, v);
  double none[2] = {0, NAN};
  CHECK(nr_signrank_p(none, 2, NULL) == 1, "nothing left: no evidence");
}

/* The Walsh averages of the R example, worked out by hand: the 95% interval runs from
 * the 6th smallest, (0.01 + 0.01)/2, to the 6th largest, (0.952 + 0.62)/2, of the 45
 * (T = 5), around their median 0.46 (R's "(pseudo)median"). */
NR_TEST(decide_hodges_lehmann_interval_of_r_example) {
  static const double d[] = {0.952, -0.147, 1.022, 0.43, 0.62, 0.59, 0.49, -0.08, 0.01};
  double est, lo, hi;
  REQUIRE(nr_signrank_interval(d, 9, 0.05, &est, &lo, &hi) == 0);
  CHECK(fabs(est - 0.46) < 1e-9, "estimate %.6f, by hand 0.46", est);
  CHECK(fabs(lo - 0.01) < 1e-9 && fabs(hi - 0.786) < 1e-9, "[%.6f, %.6f], by hand "
        "[0.01, 0.786]", lo, hi);
  double two[2] = {1, 2};
  REQUIRE(nr_signrank_interval(two, 2, 0.05, &est, &lo, &hi) == 0);
  CHECK(isinf(lo) && isinf(hi) && est == 1.5, "2 values give no 95%% interval");
}

/* R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") -> 0.03 0.06 0.06 0.02 */
NR_TEST(decide_holm_matches_p_adjust) {
  const double p[4] = {0.01, 0.04, 0.03, 0.005}, want[4] = {0.03, 0.06, 0.06, 0.02};
  double adj[4];
  nr_holm_adjust(p, 4, adj);
  for (int i = 0; i < 4; i++)
    CHECK(fabs(adj[i] - want[i]) < 1e-12, "p[%d]: %.4f, R says %.4f", i, adj[i], want[i]);
  const double one[1] = {0.7};
  nr_holm_adjust(one, 1, adj);
  CHECK(adj[0] == 0.7);
}

/* All rounds on one side give p = 2/2^m: 6 rounds for one finalist (2/64 <= 0.05,
 * 2/32 is not), 7 for three (0.05/3), 9 for eight (0.05/8 = 0.00625 > 2/512). */
NR_TEST(decide_min_rounds_match_the_two_sided_rate) {
  CHECK(nr_decide_min_rounds(1, 0.05) == 6, "%d", nr_decide_min_rounds(1, 0.05));
  CHECK(nr_decide_min_rounds(2, 0.05) == 7, "%d", nr_decide_min_rounds(2, 0.05));
  CHECK(nr_decide_min_rounds(3, 0.05) == 7, "%d", nr_decide_min_rounds(3, 0.05));
  CHECK(nr_decide_min_rounds(8, 0.05) == 9, "%d", nr_decide_min_rounds(8, 0.05));
}

/* The planned rounds never fall below what an all-one-side result needs, and grow
 * with the finalists. Eight finalists, each 5% faster in every round but one (1%
 * slower there): with the rounds planned for eight, every one is accepted after
 * Holm (W+ = 1 of 11: p = 4/2048, x 8 = 0.016); at 9 rounds none is (4/512 x 8 =
 * 0.0625), which is why eight finalists are not given 9. */
NR_TEST(decide_planned_rounds_keep_power_with_many_finalists) {
  for (int k = 1; k <= 8; k++) {
    CHECK(nr_decide_planned_rounds(k) >= nr_decide_min_rounds(k, NR_DECIDE_ALPHA), "k %d", k);
    CHECK(k == 1 || nr_decide_planned_rounds(k) >= nr_decide_planned_rounds(k - 1), "k %d", k);
  }
  enum { K = 8 };
  int planned = nr_decide_planned_rounds(K);
  REQUIRE(planned <= 32);
  double r[32 * K];
  for (int round = 0; round < planned; round++)
    for (int i = 0; i < K; i++)
      r[round * K + i] = round == (i % planned) ? 1.01 : 0.95;
  nr_decision d[K];
  REQUIRE(nr_decide_finalists(r, planned, K, d) == 0);
  for (int i = 0; i < K; i++)
    CHECK(d[i].accepted, "finalist %d at %d rounds: p_holm %.4f", i, planned, d[i].p_holm);
  for (int round = 0; round < 9; round++)
    for (int i = 0; i < K; i++)
      r[round * K + i] = round == i ? 1.01 : 0.95;
  REQUIRE(nr_decide_finalists(r, 9, K, d) == 0);
  for (int i = 0; i < K; i++)
    CHECK(!d[i].accepted, "finalist %d at 9 rounds: p_holm %.4f", i, d[i].p_holm);
}

/* Five rounds, all 20% faster: one-sided 1/32, two-sided 1/16 > 0.05: not accepted;
 * six rounds are. With three such finalists seven rounds are needed. */
NR_TEST(decide_finalists_needs_the_rounds_its_rate_needs) {
  double r[24];
  nr_decision d[3];
  for (int i = 0; i < 24; i++)
    r[i] = 0.80 + 0.001 * i;
  REQUIRE(nr_decide_finalists(r, 5, 1, d) == 0);
  CHECK(!d[0].accepted && fabs(d[0].p - 2.0 / 32) < 1e-12, "5 rounds: p %.4f", d[0].p);
  REQUIRE(nr_decide_finalists(r, 6, 1, d) == 0);
  CHECK(d[0].accepted && d[0].ratio < 1 && d[0].hi < 1, "6 rounds: p %.4f", d[0].p);
  REQUIRE(nr_decide_finalists(r, 6, 3, d) == 0);
  CHECK(!d[0].accepted && fabs(d[0].p_holm - 3 * 2.0 / 64) < 1e-12, "p_holm %.4f",
        d[0].p_holm);
  /* significant but under the 1% minimum gain: not worth a non-default route */
  for (int i = 0; i < 9; i++)
    r[i] = 0.996 - 0.0001 * i;
  REQUIRE(nr_decide_finalists(r, 9, 1, d) == 0);
  CHECK(!d[0].accepted && d[0].p < 0.01 && d[0].ratio > 0.99, "0.4%% faster: p %.4f",
        d[0].p);
  /* a slower finalist is significant but never accepted */
  for (int i = 0; i < 9; i++)
    r[i] = 1.3 + 0.01 * i;
  REQUIRE(nr_decide_finalists(r, 9, 1, d) == 0);
  CHECK(!d[0].accepted && d[0].p < 0.01 && d[0].ratio > 1);
}

/* The preference order is a total order: three finalists whose intervals overlap
 * pairwise in a chain (A~B, B~C, not A~C) must still sort the same from every
 * starting order, and the order must be transitive. */
NR_TEST(decide_finalist_order_is_total) {
  tune_cand c[3] = {{.route = "-a=1", .changes = 1}, {.route = "-a=1 -b=1", .changes = 2},
                    {.route = "-a=1 -b=1 -c=1", .changes = 3}};
  tune_entry e[3] = {{&c[0], 0, 0.98, 0.96, 0.99, 0.01, 0.01, true},
                     {&c[1], 0, 0.94, 0.91, 0.97, 0.01, 0.01, true},
                     {&c[2], 0, 0.90, 0.85, 0.95, 0.01, 0.01, true}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) {
        int ij = tune_entry_cmp(&e[i], &e[j]), jk = tune_entry_cmp(&e[j], &e[k]);
        int ik = tune_entry_cmp(&e[i], &e[k]);
        if (ij < 0 && jk < 0)
          CHECK(ik < 0, "%s before %s before %s, but not %s before %s", c[i].route,
                c[j].route, c[k].route, c[i].route, c[k].route);
      }
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                  {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  const tune_cand *first = NULL;
  for (int q = 0; q < 6; q++) {
    tune_entry v[3] = {e[perms[q][0]], e[perms[q][1]], e[perms[q][2]]};
    qsort(v, 3, sizeof *v, tune_entry_cmp);
    if (!first)
      first = v[0].c;
    CHECK(v[0].c == first, "order %d%d%d: '%s' first, order 012: '%s'", perms[q][0],
          perms[q][1], perms[q][2], v[0].c->route, first->route);
  }
}
