"""compare.py - checks the outputs of one model run against reference outputs.

    compare.py REFDIR OUTDIR [--rtol R] [--atol A] [--label NAME] [--show]

Every REFDIR/<name>.npy must have an OUTDIR/<name>.npy of the same shape and dtype
class, and every element must satisfy |out - ref| <= atol + rtol * |ref| (numpy's
isclose rule). Non-finite values are decided explicitly: NaN matches NaN only, and an
infinity only the same infinity; either is a mismatch against anything else. One line
per output with the largest absolute and relative errors, then `PASS NAME` or
`FAIL NAME`; exit status 0 only on PASS. The largest errors are printed even on a
pass, so a slow drift shows up in logs long before it crosses the tolerance. --show
also prints both tensors when they are small (at most SHOW_MAX elements), with their
argmax: what the example script shows a newcomer.
"""
import argparse
import glob
import os
import sys

import numpy as np

SHOW_MAX = 32


def compare_one(ref_path, out_path, rtol, atol):
    """Returns (ok, message) for one output tensor."""
    name = os.path.basename(ref_path)[: -len(".npy")]
    if not os.path.exists(out_path):
        return False, f"  {name}: missing output {out_path}"
    ref, out = np.load(ref_path), np.load(out_path)
    if ref.shape != out.shape:
        return False, f"  {name}: shape {list(out.shape)}, expected {list(ref.shape)}"
    if ref.dtype.kind != out.dtype.kind:
        return False, f"  {name}: dtype {out.dtype}, expected {ref.dtype}"
    if ref.size == 0:
        return True, f"  {name}: empty, shape {list(ref.shape)}"
    if ref.dtype.kind in "biu":
        bad = int(np.count_nonzero(ref != out))
        return bad == 0, f"  {name}: {ref.dtype} {list(ref.shape)} mismatches={bad}"
    r, o = ref.astype(np.float64), out.astype(np.float64)
    # Same NaN or same infinity: no error. Any other pair with a non-finite side: an
    # infinite error, never NaN (a NaN difference would compare false and pass).
    same = (np.isnan(r) & np.isnan(o)) | (np.isinf(r) & (o == r))
    finite = np.isfinite(r) & np.isfinite(o)
    with np.errstate(over="ignore", invalid="ignore"):
        diff = np.where(same, 0.0, np.where(finite, np.abs(o - r), np.inf))
        tol = atol + rtol * np.abs(np.where(np.isfinite(r), r, 0.0))
        rel = np.where(diff == 0, 0.0,
                       diff / np.maximum(np.abs(r), np.finfo(np.float32).tiny))
    bad = int(np.count_nonzero(~(diff <= tol)))
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    msg = (f"  {name}: {ref.dtype} {list(ref.shape)} max_abs={diff.max():.3e} "
           f"max_rel={rel.max():.3e} at_max_abs={list(map(int, worst))} "
           f"(out={o[worst]:.6g} ref={r[worst]:.6g}) mismatches={bad}/{ref.size}")
    return bad == 0, msg


def show(ref_path, out_path):
    ref = np.load(ref_path)
    out = np.load(out_path) if os.path.exists(out_path) else None
    if ref.size > SHOW_MAX:
        return
    with np.printoptions(precision=5, suppress=True, linewidth=100):
        for who, arr in (("nnroute", out), ("expected", ref)):
            if arr is not None:
                print(f"    {who:8} {arr.ravel()}  argmax={int(np.argmax(arr))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("refdir")
    ap.add_argument("outdir")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--label", help="name printed with PASS/FAIL (default: OUTDIR)")
    ap.add_argument("--show", action="store_true", help="print small tensors in full")
    args = ap.parse_args()
    label = args.label or args.outdir

    refs = sorted(glob.glob(os.path.join(args.refdir, "*.npy")))
    if not refs:
        print(f"  no reference outputs in {args.refdir}")
        print(f"FAIL {label}")
        return 1
    ok = True
    for ref_path in refs:
        out_path = os.path.join(args.outdir, os.path.basename(ref_path))
        good, msg = compare_one(ref_path, out_path, args.rtol, args.atol)
        print(msg)
        if args.show:
            show(ref_path, out_path)
        ok = ok and good
    print(f"{'PASS' if ok else 'FAIL'} {label} (rtol={args.rtol:g}, atol={args.atol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
