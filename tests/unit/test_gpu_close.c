/* test_gpu_close.c - the GPU tests' closeness rule (tests/gpu/gpu_close.h), checked on
 * the CPU since CI has no GPU: NaN matches only NaN, an infinity only the same
 * infinity, finite values within atol + rtol |want|, and the excess is never NaN, so
 * a worst-of loop cannot skip a bad element. */
#include "../gpu/gpu_close.h"
#include "unit.h"

#include <math.h>

typedef struct close_case {
  double got, want, atol, rtol;
  bool close;
  const char *what;
} close_case;

static const close_case CASES[] = {
    {NAN, 1.0, 1e-4, 1e-4, false, "NaN against a number"},
    {1.0, NAN, 1e-4, 1e-4, false, "a number against NaN"},
    {NAN, NAN, 1e-4, 1e-4, true, "NaN against NaN"},
    {NAN, INFINITY, 1e-4, 1e-4, false, "NaN against inf"},
    {INFINITY, INFINITY, 1e-4, 1e-4, true, "inf against inf"},
    {-INFINITY, -INFINITY, 0, 0, true, "-inf against -inf, zero tolerance"},
    {-INFINITY, INFINITY, 1e-4, 1e-4, false, "-inf against inf"},
    {1.0, INFINITY, 1e-4, 1e-4, false, "a number against inf (inf <= inf)"},
    {1e300, INFINITY, 1e-4, 1.0, false, "a huge number against inf"},
    {INFINITY, 1.0, 1e-4, 1e-4, false, "inf against a number"},
    {1.00005, 1.0, 1e-4, 1e-4, true, "within the tolerance"},
    {1.001, 1.0, 1e-4, 1e-4, false, "beyond the tolerance"},
    {-2.0, 2.0, 1e-4, 1e-4, false, "the sign flipped"},
    {0.0, 0.0, 0, 0, true, "equal, zero tolerance"},
    {1e-300, 0.0, 0, 0, false, "different, zero tolerance"},
    {1e308, -1e308, 1e-4, 1e-4, false, "a difference that overflows"},
};

NR_TEST(gpu_close_nan_and_inf_are_explicit) {
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const close_case *c = &CASES[i];
    double r = gt_excess(c->got, c->want, c->atol, c->rtol);
    CHECK(gt_close(c->got, c->want, c->atol, c->rtol) == c->close,
          "%s: got %g want %g: close should be %d (excess %g)", c->what, c->got, c->want,
          (int)c->close, r);
    CHECK(!isnan(r), "%s: the excess is NaN", c->what);
  }
}

/* The harness keeps the worst excess with `r > worst`: a NaN excess would be skipped
 * there, so every mismatch must be a number larger than any within-tolerance one. */
NR_TEST(gpu_close_worst_of_sees_nonfinite) {
  const float got[] = {1.0f, 2.0f, NAN, 4.0f, INFINITY};
  const double want[] = {1.0, 2.0, 3.0, 4.0, 5.0};
  double worst = 0;
  int at = -1;
  for (int i = 0; i < 5; i++) {
    double r = gt_excess(got[i], want[i], 1e-4, 1e-4);
    if (r > worst)
      worst = r, at = i;
  }
  CHECK(worst > 1.0 && at == 2, "worst %g at %d: the NaN at 2 must be the first worst",
        worst, at);
}
