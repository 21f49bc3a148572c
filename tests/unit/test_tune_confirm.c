/* test_tune_confirm.c - when the tuner's confirmation may stop before its 9 rounds
 * (tune_confirm_settled, src/tune/tune_measure.c): only after the rounds at which an
 * all-one-sided run is significant at a two-sided 5% after Holm's correction over the
 * finalists (6 for one finalist, 7 for two or three), and only when
 * every finalist was at least 10% faster or at least 10% slower than the default
 * route in every round so far. One round inside the margin, a NaN round (a failed
 * timing), or one undecided finalist among decided ones keeps it going. */
#include "tune/tune_internal.h"
#include "unit.h"

#include <math.h>

/* ratios[r * n + i] from per-finalist columns. */
static void fill(double *ratios, int rounds, int n, const double *cols) {
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < n; i++)
      ratios[r * n + i] = cols[i * rounds + r];
}

NR_TEST(tune_confirm_stops_only_when_every_finalist_is_clear) {
  double ratios[64];
  const double fast[] = {0.41, 0.43, 0.41, 0.42, 0.44, 0.41, 0.43, 0.41, 0.42};
  fill(ratios, 9, 1, fast);
  CHECK(!tune_confirm_settled(ratios, 4, 1), "4 rounds are too few");
  CHECK(!tune_confirm_settled(ratios, 5, 1), "5 rounds: two-sided p = 1/16 > 0.05");
  CHECK(tune_confirm_settled(ratios, 6, 1));
  CHECK(tune_confirm_settled(ratios, 9, 1));

  const double mixed[] = {0.60, 0.62, 0.58, 0.61, 0.60, 0.61, 0.60, /* faster */
                          1.30, 1.25, 1.40, 1.22, 1.31, 1.30, 1.28}; /* slower */
  fill(ratios, 7, 2, mixed);
  CHECK(!tune_confirm_settled(ratios, 6, 2), "two finalists: 6 rounds are too few");
  CHECK(tune_confirm_settled(ratios, 7, 2), "faster and slower finalists are both decided");

  const double edge[] = {0.60, 0.62, 0.58, 0.61, 0.60, 0.60, 0.61,
                         0.85, 0.86, 0.91, 0.84, 0.83, 0.85, 0.84};
  fill(ratios, 7, 2, edge);
  CHECK(!tune_confirm_settled(ratios, 7, 2), "one round of the second finalist at 0.91");

  const double flip[] = {0.70, 0.72, 1.20, 0.71, 0.70, 0.71};
  fill(ratios, 6, 1, flip);
  CHECK(!tune_confirm_settled(ratios, 6, 1), "rounds on both sides of 1");

  const double gap[] = {0.70, 0.72, NAN, 0.71, 0.70, 0.71};
  fill(ratios, 6, 1, gap);
  CHECK(!tune_confirm_settled(ratios, 6, 1), "a failed round");

  const double near[] = {0.95, 0.97, 0.96, 0.95, 0.94, 0.95};
  fill(ratios, 6, 1, near);
  CHECK(!tune_confirm_settled(ratios, 6, 1), "a 5 percent gain needs all 9 rounds");
}
