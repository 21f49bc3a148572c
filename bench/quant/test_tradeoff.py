"""test_tradeoff.py - checks tradeoff.py's sweep, Pareto frontier, de-duplication and
SVG on a synthetic tune report whose answers are known, so a change to the report's
shape or to the sweep's rules fails here rather than in a doc table.

Key decision: the report is built in the test from four precision dimensions with
losses and latencies chosen so that every rule has a case that breaks it: a slower
route with a larger loss (never on the frontier), two routes with equal loss, a
build_error (not measured), and the tuner's duplicate all-default candidate that a
pinned knob produces.

usage: .venv/bin/python bench/quant/test_tradeoff.py     (exit 0: all passed)
"""
import itertools
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tradeoff as t  # noqa: E402

SITES = ["/conv1/Conv", "/conv2/Conv", "/fc1/Gemm", "/fc2/Gemm"]


def synthetic_report():
    """16 routes: int8 at site i costs loss 10^-(4-i) and saves 10 ms * (i + 1)."""
    space = [{"name": f"precision@{s}", "values": ["fp32", "int8"], "default": "fp32"}
             for s in SITES]
    cands = [{"seq": 0, "route": "", "phase": "default", "status": "ok",
              "screening": {"median_ms": 100.0},
              "losses": [{"logits": {"rel_l2": 1e-7, "top1": 0.0}}]}]
    for bits in itertools.product([0, 1], repeat=4):
        on = [i for i, b in enumerate(bits) if b]
        route = " ".join(f"-precision@{SITES[i]}=int8" for i in on)
        route = (route + " -quant.calibration=minmax").strip()
        loss = 1e-7 + sum(10.0 ** -(4 - i) for i in on)
        ms = 100.0 - sum(10 * (i + 1) for i in on) + (25 if on == [0, 1] else 0)
        c = {"seq": len(cands), "route": route, "phase": "search", "status": "ok",
             "screening": {"median_ms": ms},
             "losses": [{"logits": {"rel_l2": loss, "top1": 0.01 * len(on)}}]}
        if on == [0, 2]:
            c = {"seq": c["seq"], "route": route, "phase": "search",
                 "status": "build_error", "message": "no int8 tactic"}
        cands.append(c)
    return {"space": space, "candidates": cands, "model": "m.onnx",
            "settings": {"routes": "x", "search": "full", "threads": 1}}


def main():
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    routes = t.load_routes(synthetic_report(), ["rel_l2", "top1"])
    check(len(routes) == 16, f"16 routes after de-duplication, got {len(routes)}")
    base = t.default_route(routes)
    check(base is not None and base["code"] == "FFFF" and base["phase"] == "search",
          "the pinned all-fp32 candidate is the one kept")
    timed = [r for r in routes if r["timed"]]
    check(len(timed) == 15, "the build_error route is not measured")

    rows = t.sweep(routes, "rel_l2")
    check(rows[0]["tolerance"] == math.inf and rows[0]["feasible"] == 15, "inf: all 15")
    check(rows[-1]["tolerance"] == 0 and rows[-1]["feasible"] == 0,
          "0: none (even fp32 has 1e-7)")
    check(rows[-2]["routes"] == ["FFFF"], "the smallest loss step holds only FFFF")
    check(all(a["feasible"] >= b["feasible"] for a, b in zip(rows, rows[1:])),
          "the feasible count never grows as the tolerance shrinks")
    check(rows[0]["best"]["code"] == "FIII" or rows[0]["best"]["code"] == "IIII",
          f"fastest overall, got {rows[0]['best']['code']}")
    for r in rows:  # the fastest feasible is feasible and no feasible one is faster
        feas = [x for x in timed if x["worst"]["rel_l2"] <= r["tolerance"]]
        if feas:
            check(r["best"]["median_ms"] == min(x["median_ms"] for x in feas),
                  f"fastest at {r['tolerance']}")

    front = t.pareto(routes, "rel_l2")
    codes = [r["code"] for r in front]
    check(codes[-1] == "FFFF", "the all-fp32 route ends the frontier")
    check("IIFF" not in codes, "a slower route with a larger loss is off the frontier")
    check(all(a["median_ms"] <= b["median_ms"] and a["worst"]["rel_l2"] >
              b["worst"]["rel_l2"] for a, b in zip(front, front[1:])),
          "frontier: latency rises while loss falls")
    for r in timed:  # nothing dominates a frontier point
        for f in front:
            check(not (r["median_ms"] < f["median_ms"] and
                       r["worst"]["rel_l2"] < f["worst"]["rel_l2"]),
                  f"{r['code']} dominates frontier point {f['code']}")

    with tempfile.TemporaryDirectory() as tmp:
        svg = t.svg(routes, "rel_l2", "test", "ms")
        Path(tmp, "x.svg").write_text(svg)
        check(svg.startswith("<svg") and svg.rstrip().endswith("</svg>"), "svg document")
        check(svg.count("<circle") == 15, "one dot per measured route")
        check(svg.count('fill="#c33"') == len(front), "frontier dots filled")

    for f in fails:
        print(f"FAIL: {f}")
    print(f"{1 if not fails else 0} passed, {1 if fails else 0} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
