"""tradeoff.py - reads the report of the 16-route experiment (bench/quant/tradeoff.sh,
`nnroute tune --search full --report FILE.json`), sweeps the tolerance from infinity
down to 0, prints how many routes stay feasible at each step and which feasible route
is fastest, and draws latency against loss with the Pareto frontier as an SVG.

The sweep's steps are the distinct worst losses of the measured routes (a route's
worst loss is its largest loss over every output of every reference pair, the number
the tuner compares with --tolerance, feasible when loss <= tolerance), so every row of
the table is a tolerance at which the feasible set changes. Latency is each route's
screening median from the same report. Key decision: the report is the only input -
no engine is built or timed here - so the table and the plot can be redrawn for any
metric the tuner recorded (all seven are recorded for every candidate) without
another tuning run, exactly as `nnroute report --tolerance` re-chooses.

With --retime R the script does build and time: every measured route is rebuilt
(`nnroute build --route ROUTE --calibration <the reference folder>`) and all of them
are timed in R interleaved rounds of `nnroute bench`, each round running every engine
once in turn; a route's latency is then the default route's median times the median
of its per-round ratios to the default route. Screening medians come from one process
each at different moments, so on a shared machine they carry the load of their
moment; ratios taken within a round do not.

The SVG is written by hand (no plotting library, no dependency): log-scale loss on x
with a separate "0" column for routes with no loss at all and empty stretches of two
decades or more cut out, linear latency on y, every route a dot labelled with its
per-site code, the frontier drawn as a staircase through filled dots.

usage: .venv/bin/python bench/quant/tradeoff.py REPORT.json [--metric rel_l2]
       [--also top1] [--svg FILE] [--markdown FILE] [--json FILE]
       [--retime R --shape NAME=DIMS... [--nnroute PATH]]
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TIMED = ("ok", "accuracy_fail")  # statuses whose losses and screening time exist


# ---- the report --------------------------------------------------------------------

def parse_route(route):
    """{'knob@node': value} of a canonical route string ('' is the default route)."""
    out = {}
    for tok in route.split():
        key, _, value = tok.lstrip("-").rpartition("=")
        out[key] = value
    return out


def site_label(dim_name):
    """'precision@/conv1/Conv' -> 'conv1': the node's scope when torch named it."""
    node = dim_name.split("@", 1)[-1]
    parts = [p for p in node.split("/") if p]
    return parts[0] if len(parts) > 1 else node


def short_value(v):
    return {"fp32": "F", "int8": "I", "fp16": "H", "bf16": "B"}.get(v, v[:1].upper())


def worst_loss(losses, metric):
    """Largest loss over pairs and outputs; NaN or a missing metric counts as inf."""
    worst = 0.0
    for pair in losses or []:
        for metrics in pair.values():
            v = metrics.get(metric)
            v = math.inf if v is None or (isinstance(v, float) and math.isnan(v)) else v
            worst = max(worst, v)
    return worst if losses else math.inf


def load_routes(report, metrics):
    """One dict per candidate: route, per-dimension values, status, latency, losses."""
    space = report["space"]
    routes = []
    for c in report["candidates"]:
        values = parse_route(c["route"])
        dims = {d["name"]: values.get(d["name"], d["default"]) for d in space}
        code = "".join(short_value(v) for v in dims.values())
        scr = c.get("screening") or {}
        r = {"route": c["route"], "dims": dims, "code": code, "status": c["status"],
             "message": c.get("message", ""), "median_ms": scr.get("median_ms"),
             "worst": {m: worst_loss(c.get("losses"), m) for m in metrics},
             "holdout_worst": {m: worst_loss(c["holdout_losses"], m) for m in metrics}
             if c.get("holdout_losses") else None}
        r["timed"] = c["status"] in TIMED and r["median_ms"] is not None
        r["is_base"] = all(dims[d["name"]] == d["default"] for d in space)
        r["changes"] = " ".join(f"{site_label(d['name'])}={dims[d['name']]}" for d in space
                                if dims[d["name"]] != d["default"]) or "(all default)"
        r["phase"] = c.get("phase", "")
        routes.append(r)
    return dedupe(routes)


def dedupe(routes):
    """One route per point of the space. The tuner always evaluates the true default
    route first; when the expression pins a knob (say -quant.calibration=minmax), the
    all-default point of the space is a second candidate that builds the same engine.
    The one inside the expression's space is kept."""
    by_code = {}
    for r in routes:
        other = by_code.get(r["code"])
        if other is None or (other["phase"] == "default" and r["phase"] != "default"):
            by_code[r["code"]] = r
    return [r for r in routes if by_code[r["code"]] is r]


# ---- sweep and frontier ------------------------------------------------------------

def sweep(routes, metric):
    """Rows (tolerance, feasible routes, fastest feasible) from inf down to 0."""
    timed = [r for r in routes if r["timed"] and math.isfinite(r["worst"][metric])]
    steps = sorted({r["worst"][metric] for r in timed}, reverse=True)
    tols = [math.inf] + steps + ([0.0] if not steps or steps[-1] > 0 else [])
    rows = []
    for t in tols:
        feas = [r for r in timed if r["worst"][metric] <= t]
        best = min(feas, key=lambda r: r["median_ms"]) if feas else None
        rows.append({"tolerance": t, "feasible": len(feas), "best": best,
                     "routes": sorted(r["code"] for r in feas)})
    return rows


def pareto(routes, metric):
    """Timed routes whose loss is below that of every faster route (the tuner's rule),
    fastest first."""
    pts = sorted((r for r in routes if r["timed"]), key=lambda r: (r["median_ms"],
                                                                    r["worst"][metric]))
    front, best = [], math.inf
    for r in pts:
        if r["worst"][metric] < best:
            front.append(r)
            best = r["worst"][metric]
    return front


# ---- text --------------------------------------------------------------------------

def fmt_tol(t):
    return "inf" if t == math.inf else "0" if t == 0 else f"{t:.3g}"


def default_route(routes):
    """The point of the space with every dimension at its default (all fp32)."""
    return next((r for r in routes if r["is_base"]), None)


def sweep_table(rows, routes, metric):
    base = default_route(routes)
    lines = [f"| {metric} tolerance | feasible routes | fastest feasible route | "
             "latency ms | speedup vs default route |", "|---|---|---|---|---|"]
    shown = [fmt_tol(r["tolerance"]) for r in rows]
    alike = {t for t in shown if shown.count(t) > 1}  # these get more digits
    shown = [f"{r['tolerance']:.6g}" if t in alike else t for r, t in zip(rows, shown)]
    for row, tol in zip(rows, shown):
        b = row["best"]
        if b is None:
            lines.append(f"| {tol} | 0 | (none) | | |")
            continue
        sp = (base["median_ms"] / b["median_ms"]) if base and base["timed"] else None
        lines.append(f"| {tol} | {row['feasible']} | `{b['code']}` {b['changes']} | "
                     f"{b['median_ms']:.3f} | "
                     f"{'' if sp is None else f'{sp:.2f}x'} |")
    return "\n".join(lines)


def routes_table(routes, metrics, front_codes):
    names = list(routes[0]["dims"]) if routes else []
    head = "| code | " + " | ".join(site_label(n) for n in names) + " | status | " + \
        "latency ms | " + " | ".join(f"worst {m}" for m in metrics) + \
        " | on frontier |"
    lines = [head, "|" + "---|" * (len(names) + 4 + len(metrics))]
    for r in sorted(routes, key=lambda r: (not r["timed"], r["median_ms"] or 0)):
        ms = f"{r['median_ms']:.3f}" if r["timed"] else "-"
        if r.get("ratio_range"):  # re-timed: the per-round ratios' spread
            ms += " ({:.2f}-{:.2f}x)".format(*r["ratio_range"])
        losses = " | ".join(f"{r['worst'][m]:.3g}" if r["timed"] else "-" for m in metrics)
        status = r["status"] if r["status"] in TIMED else \
            f"{r['status']}: {r['message'][:90]}".replace("|", "\\|")
        lines.append(f"| `{r['code']}` | " + " | ".join(r["dims"].values()) +
                     f" | {status} | {ms} | {losses} | "
                     f"{'yes' if r['code'] in front_codes else ''} |")
    return "\n".join(lines)


def checks(rows, routes, metric):
    """The experiment's two end points, said in words."""
    out = []
    timed = [r for r in routes if r["timed"]]
    top = rows[0]["feasible"] if rows else 0
    out.append(f"at tolerance inf: {top} of {len(routes)} routes feasible"
               + ("" if top == len(routes) else
                  f" ({len(routes) - len(timed)} not measured: see the route table)"))
    zero = rows[-1]
    base = default_route(routes)
    others = [c for c in zero["routes"] if not base or c != base["code"]]
    if zero["tolerance"] == 0:
        verdict = ("only the all-default route" if zero["routes"] == (
            [base["code"]] if base else []) else "none" if not zero["routes"] else
            f"{', '.join(zero['routes'])}" + (" - routes other than the all-default "
                                              "route have zero loss" if others else ""))
        out.append(f"at tolerance 0 ({metric}): {verdict}")
    if not zero["routes"] and len(rows) > 1 and rows[-2]["feasible"]:
        low = rows[-2]
        out.append(f"at the smallest loss any route has ({fmt_tol(low['tolerance'])}): "
                   f"{', '.join(low['routes'])}")
    return out


# ---- re-timing ---------------------------------------------------------------------

def bench_once(nnroute, engine, threads, ms):
    p = subprocess.run([nnroute, "bench", str(engine), "--threads", str(threads), "--json",
                        "--warmup-ms", str(ms // 4), "--duration-ms", str(ms),
                        "--min-iters", "5"], capture_output=True, text=True, timeout=300)
    if p.returncode:
        raise RuntimeError(f"nnroute bench {engine}: {p.stderr.strip()[-200:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def retime(routes, report, a):
    """Rebuilds every timed route and replaces its latency with the default route's
    median times its median per-round ratio; returns the rounds' spread per route."""
    timed = [r for r in routes if r["timed"]]
    base = default_route(routes)
    if not base or not base["timed"]:
        sys.exit("--retime needs the default route among the measured routes")
    s = report["settings"]
    threads = s.get("threads") or 0
    with tempfile.TemporaryDirectory(prefix="nr_tradeoff_") as tmp:
        for i, r in enumerate(timed):
            r["engine"] = Path(tmp) / f"r{i}.nre"
            cmd = [a.nnroute, "build", report["model"], "--threads", str(threads),
                   "-o", str(r["engine"])]
            cmd += ["--route", r["route"]] if r["route"] else []
            for sh in a.shape:
                cmd += ["--shape", sh]
            for d in s.get("reference", [])[:1]:  # the tuner calibrated on these
                cmd += ["--calibration", d]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if p.returncode:
                sys.exit(f"rebuilding `{r['route']}`: {p.stderr.strip()[-300:]}")
        ratios = {r["code"]: [] for r in timed}
        base_ms = []
        for k in range(a.retime):
            order = timed if k % 2 == 0 else timed[::-1]
            ms = {r["code"]: bench_once(a.nnroute, r["engine"], threads, a.retime_ms)
                  for r in order}
            base_ms.append(ms[base["code"]])
            for r in timed:
                ratios[r["code"]].append(ms[r["code"]] / ms[base["code"]])
            print(f"retime round {k + 1}/{a.retime} done", file=sys.stderr, flush=True)
    b = statistics.median(base_ms)
    for r in timed:
        rs = ratios[r["code"]]
        r["screening_ms"] = r["median_ms"]
        r["median_ms"] = b * statistics.median(rs)
        r["ratio_range"] = (min(rs), max(rs))
        r.pop("engine", None)


# ---- SVG ---------------------------------------------------------------------------

W, H, ML, MR, MT, MB = 760, 480, 70, 30, 40, 60
GAP_DECADES = 2  # an empty stretch of the loss axis this long is cut out


def _esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _nice_ticks(lo, hi, n=6):
    span = hi - lo if hi > lo else 1.0
    step = 10 ** math.floor(math.log10(span / n))
    for m in (1, 2, 5, 10):
        if span / (step * m) <= n:
            step *= m
            break
    first = math.floor(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 2)
            if first + i * step <= hi + 1e-12 * step]


class LossAxis:
    """Log-scale x axis in segments: a column for loss 0, then one segment per cluster
    of losses, an empty stretch of GAP_DECADES or more cut out between clusters (the
    fp32 routes' ~1e-7 and int8 routes' ~1e-3 would otherwise leave the plot empty in
    the middle and crowd every reduced-precision route into one corner)."""

    def __init__(self, losses, x0, x1):
        logs = sorted({math.log10(v) for v in losses if v > 0 and math.isfinite(v)}) or [0.0]
        groups = [[logs[0]]]
        for v in logs[1:]:
            if v - groups[-1][-1] >= GAP_DECADES:
                groups.append([])
            groups[-1].append(v)
        self.zero_x = x0 + 15
        left = x0 + 45
        # Each cluster gets width in proportion to its span (at least one decade).
        spans = [(g[-1] - g[0] + 0.6) * (0.5 if len(g) < 3 else 1.0) for g in groups]
        width = (x1 - left) - 25 * (len(groups) - 1)
        self.segs, x = [], left
        for g, sp in zip(groups, spans):
            w = width * sp / sum(spans)
            self.segs.append((g[0] - 0.3, g[-1] + 0.3, x, x + w))
            x += w + 25

    def x(self, v):
        if v <= 0:
            return self.zero_x
        lv = math.log10(v) if math.isfinite(v) else self.segs[-1][1]
        for lo, hi, a, b in self.segs:
            if lv <= hi or (lo, hi, a, b) == self.segs[-1]:
                return a + (min(max(lv, lo), hi) - lo) / (hi - lo) * (b - a)
        return self.segs[-1][3]

    def ticks(self):
        """(x, label) for 1, 2, 5 x 10^k inside each segment (1 x 10^k only when wide)."""
        out = []
        for lo, hi, a, b in self.segs:
            mults = (1, 2, 5) if hi - lo < 2.5 else (1,)
            for k in range(math.floor(lo), math.ceil(hi) + 1):
                for m in mults:
                    lv = k + math.log10(m)
                    if lo <= lv <= hi:
                        out.append((self.x(10.0 ** lv), f"{m}e{k}"))
        return out

    def breaks(self):
        return [(b + 12.5) for (_, _, _, b) in self.segs[:-1]]


def _place_labels(items):
    """Greedy label placement: each (x, y, text) tries a few offsets around its dot and
    takes the first that overlaps no dot and no label placed before; returns
    (x, y, anchor) per item."""
    placed = [(x - 5, y - 5, x + 5, y + 5) for x, y, _ in items]
    out = []
    offsets = [(7, -5, "start"), (7, 12, "start"), (-7, -5, "end"), (-7, 12, "end"),
               (7, 4, "start"), (-7, 4, "end"), (7, -16, "start"), (-7, -16, "end"),
               (7, 23, "start"), (-7, 23, "end"), (0, -9, "start"), (0, 20, "start")]
    for x, y, text in items:
        w = 6.1 * len(text)  # 10 px monospace
        for dx, dy, anchor in offsets + [offsets[0]]:
            lx = x + dx if anchor == "start" else x + dx - w
            box = (lx, y + dy - 9, lx + w, y + dy + 1)
            if all(box[2] < p[0] or box[0] > p[2] or box[3] < p[1] or box[1] > p[3]
                   for p in placed):
                break
        placed.append(box)
        out.append((x + dx, y + dy, anchor))
    return out


def svg(routes, metric, title, ylabel):
    pts = sorted((r for r in routes if r["timed"]), key=lambda r: r["median_ms"])
    front = pareto(routes, metric)
    ax = LossAxis([r["worst"][metric] for r in pts], ML, W - MR)
    ms = [r["median_ms"] for r in pts] or [0, 1]
    y0, y1 = 0.0, max(ms) * 1.12

    def y_of(v):
        return H - MB - (v - y0) / (y1 - y0) * (H - MT - MB)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">{_esc(title)}</text>',
         f'<line x1="{ML}" y1="{MT}" x2="{ML}" y2="{H - MB}" stroke="black"/>',
         f'<line x1="{ML}" y1="{H - MB}" x2="{W - MR}" y2="{H - MB}" stroke="black"/>']
    for x, label in ax.ticks():
        o.append(f'<line x1="{x:.1f}" y1="{H - MB}" x2="{x:.1f}" y2="{MT}" stroke="#ddd"/>')
        o.append(f'<text x="{x:.1f}" y="{H - MB + 16}" text-anchor="middle">{label}</text>')
    o.append(f'<text x="{ax.zero_x}" y="{H - MB + 16}" text-anchor="middle">0</text>')
    for x in ax.breaks():  # where an empty stretch of the axis was cut out
        o.append(f'<text x="{x:.1f}" y="{H - MB + 4}" text-anchor="middle" '
                 'font-size="14">//</text>')
    for t in _nice_ticks(y0, y1):
        y = y_of(t)
        o.append(f'<line x1="{ML}" y1="{y:.1f}" x2="{W - MR}" y2="{y:.1f}" stroke="#eee"/>')
        o.append(f'<text x="{ML - 6}" y="{y + 4:.1f}" text-anchor="end">{t:g}</text>')
    o.append(f'<text x="{(ML + W - MR) / 2}" y="{H - 18}" text-anchor="middle">worst '
             f'{_esc(metric)} loss over the reference pairs (log scale, // = axis cut)</text>')
    o.append(f'<text transform="translate(18 {(MT + H - MB) / 2}) rotate(-90)" '
             f'text-anchor="middle">{_esc(ylabel)}</text>')
    # The frontier as a staircase: from each frontier point up to the next one's latency.
    path = []
    for i, r in enumerate(front):
        x, y = ax.x(r["worst"][metric]), y_of(r["median_ms"])
        path.append(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}")
        if i + 1 < len(front):
            path.append(f"L{x:.1f},{y_of(front[i + 1]['median_ms']):.1f}")
    if path:
        o.append(f'<path d="{" ".join(path)}" fill="none" stroke="#c33" '
                 'stroke-width="1.5" stroke-dasharray="4 3"/>')
    codes = {r["code"] for r in front}
    xy = [(ax.x(r["worst"][metric]), y_of(r["median_ms"]), r["code"]) for r in pts]
    for (x, y, code), (lx, ly, anchor) in zip(xy, _place_labels(xy)):
        on = code in codes
        o.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if on else 4}" '
                 f'fill="{"#c33" if on else "white"}" stroke="{"#c33" if on else "#333"}"/>')
        o.append(f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}" '
                 f'font-family="monospace" font-size="10">{_esc(code)}</text>')
    names = [site_label(n) for n in (routes[0]["dims"] if routes else [])]
    legend = ("code: one letter per site (" + ", ".join(names) + "): F fp32, I int8, "
              "H fp16, B bf16; filled = Pareto frontier")
    o.append(f'<text x="{ML + 6}" y="{MT + 12}" fill="#555">{_esc(legend)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


# ---- main --------------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", help="nnroute tune --report JSON")
    ap.add_argument("--metric", default="rel_l2", help="the sweep's and the plot's metric")
    ap.add_argument("--also", default="top1", help="comma list: more sweeps ('' for none)")
    ap.add_argument("--svg", help="write the plot here")
    ap.add_argument("--markdown", help="write the tables here too")
    ap.add_argument("--json", help="write the sweeps as JSON")
    ap.add_argument("--retime", type=int, default=0, metavar="R",
                    help="rebuild every route and time them in R interleaved rounds")
    ap.add_argument("--retime-ms", type=int, default=400, help="timed ms per engine and round")
    ap.add_argument("--shape", action="append", default=[], help="NAME=DIMS for --retime")
    ap.add_argument("--nnroute", default="build/nnroute", help="for --retime")
    return ap.parse_args()


def main():
    a = parse_args()
    report = json.loads(Path(a.report).read_text())
    metrics = [a.metric] + [m for m in a.also.split(",") if m and m != a.metric]
    routes = load_routes(report, metrics)
    if not routes:
        sys.exit(f"{a.report}: no candidates")
    if a.retime:
        retime(routes, report, a)
    latency = (f"latency: default route's median x median per-round ratio over {a.retime} "
               "interleaved rounds of `nnroute bench` (--retime)" if a.retime else
               "latency: the tuner's screening medians")
    front = pareto(routes, a.metric)
    s = report.get("settings", {})
    model = Path(str(report.get("model", "?"))).resolve()
    root = Path(__file__).resolve().parents[2]
    model = model.relative_to(root) if model.is_relative_to(root) else model
    parts = [f"{len(routes)} routes of `{s.get('routes', '?')}` measured by `nnroute tune "
             f"--search {s.get('search', '?')}` on {model} "
             f"({s.get('threads', '?')} thread(s), {len(report['candidates'][0].get('losses') or [])}"
             " reference pairs); " + latency, "", "Routes:", "",
             routes_table(routes, metrics, {r["code"] for r in front}), ""]
    sweeps = {}
    for m in metrics:
        rows = sweep(routes, m)
        sweeps[m] = [{"tolerance": r["tolerance"] if math.isfinite(r["tolerance"]) else "inf",
                      "feasible": r["feasible"],
                      "fastest": r["best"]["route"] if r["best"] else None,
                      "fastest_code": r["best"]["code"] if r["best"] else None,
                      "median_ms": r["best"]["median_ms"] if r["best"] else None,
                      "routes": r["routes"]} for r in rows]
        parts += [f"Tolerance sweep ({m}):", "", sweep_table(rows, routes, m), ""]
        parts += [f"- {c}" for c in checks(rows, routes, m)] + [""]
    parts += ["Pareto frontier (" + a.metric + "): " +
              ", ".join(f"`{r['code']}` {r['median_ms']:.3f} ms / {r['worst'][a.metric]:.3g}"
                        for r in front)]
    text = "\n".join(parts)
    print(text)
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    if a.svg:
        title = f"{Path(str(report.get('model', 'model'))).stem}: latency against " \
                f"{a.metric} loss, {len(routes)} routes"
        ylabel = "latency (ms, re-timed)" if a.retime else "screening median latency (ms)"
        Path(a.svg).write_text(svg(routes, a.metric, title, ylabel))
    if a.json:
        Path(a.json).write_text(json.dumps(
            {"sweeps": sweeps, "frontier": [r["route"] for r in front]},
            indent=1, default=lambda v: None) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
