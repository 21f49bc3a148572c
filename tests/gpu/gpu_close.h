/* gpu_close.h - the one closeness rule of the GPU tests, with NaN and infinity decided
 * on purpose rather than by what a comparison with NaN happens to give:
 *
 *   both NaN                          match
 *   exactly one NaN                   differ
 *   an infinity on either side        match only the same infinity (same sign)
 *   both finite                       |got - want| <= atol + rtol |want|
 *
 * Key decision: the rule is one header of static functions that needs no GPU, so the
 * CPU unit tests check the rule itself (tests/unit/test_gpu_close.c); a plain
 * `fabs(got - want) <= atol + rtol * fabs(want)` passes any finite got against an
 * infinite want (inf <= inf), and `r > worst` never records a NaN ratio. */
#ifndef NR_TESTS_GPU_CLOSE_H
#define NR_TESTS_GPU_CLOSE_H

#include <math.h>
#include <stdbool.h>

/* How far got is from want in units of the tolerance: 0 for matching NaNs or equal
 * infinities, INFINITY for any mismatch involving NaN or infinity, otherwise
 * |got - want| / (atol + rtol |want|) (INFINITY when that tolerance is 0 and the
 * values differ). Never NaN. */
static inline double gt_excess(double got, double want, double atol, double rtol) {
  if (isnan(got) || isnan(want))
    return isnan(got) && isnan(want) ? 0.0 : INFINITY;
  if (isinf(got) || isinf(want))
    return got == want ? 0.0 : INFINITY;
  if (got == want)
    return 0.0;
  double tol = atol + rtol * fabs(want), d = fabs(got - want);
  if (!(tol > 0.0))
    return INFINITY;
  return d / tol; /* both finite, tol > 0: finite or +inf, never NaN */
}

/* got is within atol + rtol |want| of want, under the rule above. */
static inline bool gt_close(double got, double want, double atol, double rtol) {
  return gt_excess(got, want, atol, rtol) <= 1.0;
}

#endif
