"""rel_l2.py - the relative L2 check of tests/gpu/run.sh's reduced-precision routes.

    rel_l2.py REFDIR OUTDIR TOL

Every REFDIR/<name>.npy must have an OUTDIR/<name>.npy of the same shape and dtype
class. Non-finite values are decided first and on purpose: each NaN of either side
must face a NaN, each infinity the same infinity, or the output fails as `nonfinite`
whatever its error (np.linalg.norm of a difference holding NaN is NaN, and
`max(worst, nan)` keeps worst, so a NaN output would otherwise pass). The error of an
output is ||out - ref|| / ||ref|| over its finite elements; the worst over the
outputs must be a number <= TOL.

Prints one line (the worst error, or what failed) and exits 0 within TOL, 1 beyond it
or on a non-finite mismatch, 2 when the check itself cannot be made (no reference
outputs, a missing or unreadable file, a bad TOL), so a caller that tests the exit
status never mistakes a failed check for a pass.
"""
import glob
import math
import os
import sys

import numpy as np


def nonfinite_mismatch(ref, out):
    """A description of the first disagreement among non-finite values, or None."""
    for what, bad in (("NaN", np.isnan(out) != np.isnan(ref)),
                      ("+inf", np.isposinf(out) != np.isposinf(ref)),
                      ("-inf", np.isneginf(out) != np.isneginf(ref))):
        n = int(np.count_nonzero(bad))
        if n:
            i = int(np.flatnonzero(bad)[0])
            return (f"{n} elements disagree on {what} (first at flat index {i}: "
                    f"out={out.ravel()[i]:.6g} ref={ref.ravel()[i]:.6g})")
    return None


def rel_l2(ref, out):
    """(error, None) over the finite elements, or (None, why) for a mismatch."""
    if ref.shape != out.shape:
        return None, f"shape {list(out.shape)}, expected {list(ref.shape)}"
    if ref.dtype.kind != out.dtype.kind:
        return None, f"dtype {out.dtype}, expected {ref.dtype}"
    a, b = ref.astype(np.float64), out.astype(np.float64)
    why = nonfinite_mismatch(a, b)
    if why:
        return None, "nonfinite: " + why
    finite = np.isfinite(a)
    a, b = a[finite], b[finite]
    if a.size == 0:
        return 0.0, None
    with np.errstate(over="ignore", invalid="ignore"):
        e = float(np.linalg.norm(b - a) / max(float(np.linalg.norm(a)), 1e-30))
    if not math.isfinite(e):
        return None, f"nonfinite: the error itself is {e} (overflow)"
    return e, None


def main(argv):
    if len(argv) != 4:
        print("usage: rel_l2.py REFDIR OUTDIR TOL")
        return 2
    try:
        tol = float(argv[3])
    except ValueError:
        tol = math.nan
    if not math.isfinite(tol) or tol < 0:
        print(f"error: TOL '{argv[3]}' is not a finite number >= 0")
        return 2
    refs = sorted(glob.glob(os.path.join(argv[1], "*.npy")))
    if not refs:
        print(f"error: no reference outputs in {argv[1]}")
        return 2
    worst, worst_name = 0.0, None
    for ref_path in refs:
        name = os.path.basename(ref_path)
        out_path = os.path.join(argv[2], name)
        try:
            ref, out = np.load(ref_path), np.load(out_path)
        except (OSError, ValueError) as ex:
            print(f"error: {name}: {ex}")
            return 2
        e, why = rel_l2(ref, out)
        if why:
            print(f"{name}: {why}")
            return 1
        if worst_name is None or e > worst:
            worst, worst_name = e, name
    print(f"{worst:.3g}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
