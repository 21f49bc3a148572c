"""compare.py - ONNX Runtime's int8 QDQ models against nnroute's engines, in one run:
latency in interleaved rounds, and accuracy against the fp32 reference (issue 6's peer
comparison).

Systems, per model:
  ort_fp32    ONNX Runtime on the fp32 model
  ort_qdq     ONNX Runtime on ort_quantize.py's QDQ model (the peer; ratios are to it)
  nr_fp32     nnroute, default route (fp32)
  nr_qdq      nnroute on the same QDQ model with `-precision@*=int8`: the qdq pass
              takes each Q/DQ pair's grid into the int8 kernel (docs/precision.md);
              nodes without a pair are calibrated on the calibration pairs
  nr_int8     nnroute, `-precision@*=int8 -quant.calibration=minmax`, calibrated on
              the calibration pairs ORT calibrated on, by ORT's method (min/max):
              everything int8, the direct analogue of ort_qdq
  nr_tuned    the engine `nnroute tune` writes (default TUNE_ARGS: per-layer fp32 or
              int8 by greedy search, `--metric top1 --tolerance 0.01`; reference and
              calibration pairs = the calibration pairs, holdout = the holdout
              pairs), cached in build/quant/compare/tuned/
A system that fails to build, tune or run gets an error cell; the run goes on.

Latency: as bench/perf/run_perf.py measures it (its functions, reused): ORT in this
process with IOBinding (ort_runner.OrtTimer), nnroute by one `nnroute bench ENGINE
--json` process per round; both on the same seeded inputs bit for bit. Each round runs
every system back to back; a system's figure is the median of its round medians, a
ratio the median of the per-round ratios (min-max shown). Key decision, as in
run_perf.py: only ratios taken within a round count, because the machine is shared.

Accuracy: every system runs every holdout pair (never used to calibrate or to choose);
each output is compared with ONNX Runtime fp32's output on the same pair. rel_l2 is
the worst over pairs; top-1 (classifiers) is the fraction of rows over all pairs whose
argmax differs from fp32's. Fashion-MNIST's pairs hold 256 test images each, so its
top-1 disagreement means something; the suite's random-weight models have one image
per pair, so theirs is coarse (use rel_l2 there).

usage: .venv/bin/python bench/quant/compare.py [--models resnet50_op13,...]
       [--threads 1] [--rounds 5] [--tune-args "..."] [--tune-budget 300]
       [--no-tune] [--retune] [--nnroute PATH] [--output FILE.md]
Needs bench/quant/ort_quantize.py's QDQ models and pairs for the same models.
"""
import argparse
import hashlib
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qcommon as q  # noqa: E402

WORK = q.WORK_DIR / "compare"
SYSTEMS = ("ort_fp32", "ort_qdq", "nr_fp32", "nr_qdq", "nr_int8", "nr_tuned")
PEER = "ort_qdq"
# Per-layer precision searched by layer-wise sensitivity (docs/tuner-search.md, greedy),
# ranges by ORT's method; the tuner's default space has one precision for all layers.
TUNE_ARGS = ("--metric top1 --tolerance 0.01 --search greedy "
             "--routes '-precision@*=[fp32|int8] -quant.calibration=minmax'")
INT8_ROUTE = "-precision@*=int8 -quant.calibration=minmax"  # ORT's calibration method


# ---- engines ---------------------------------------------------------------------------

def build(a, src, specs, out, route=None, calib=None):
    cmd = [a.nnroute, "build", src, *q.shape_args(specs), "--threads", a.threads, "-o", out]
    if route:
        cmd += ["--route", route]
    if calib and "--calibration" in a.build_help:
        cmd += ["--calibration", calib]
    rc, so, se = q.sh(cmd, 900)
    return (out, None) if rc == 0 else (None, "build " + q.error_line(rc, se, so))


def tuned(a, model, path, specs, calib, holdout):
    out = WORK / "tuned" / f"{model}_t{a.threads}.nre"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.nre")
    cmd = [a.nnroute, "tune", path, *q.shape_args(specs), "--reference", calib,
           "--holdout", holdout, "--threads", a.threads, "--budget-time",
           f"{a.tune_budget:g}", "--db", out.parent / "tune.db",
           "--report", out.with_suffix(".json"), "-o", tmp]
    cmd = [str(c) for c in cmd] + shlex.split(a.tune_args)
    key = hashlib.sha256(json.dumps([cmd[2:], q.run_perf.sha256(path)]).encode()).hexdigest()
    stamp = out.with_suffix(".key")
    if (not a.retune and out.exists() and stamp.exists() and stamp.read_text() == key
            and q.run_perf.inspect(a.nnroute, out)):
        q.log(f"{model}: cached tuned engine")
        return out, None
    q.log(f"{model}: {' '.join(shlex.quote(c) for c in cmd)}")
    rc, so, se = q.sh(cmd, a.tune_budget * 4 + 900)
    if rc or not tmp.exists():
        out.with_suffix(".log").write_text(so + se)
        return None, "tune " + q.error_line(rc, se, so)
    tmp.replace(out)
    stamp.write_text(key)
    return out, None


def tuned_route(model, threads):
    p = WORK / "tuned" / f"{model}_t{threads}.json"
    try:
        w = json.loads(p.read_text())["winner"]
        return w.get("route") or "(default route)"
    except (OSError, ValueError, KeyError):
        return None


# ---- accuracy --------------------------------------------------------------------------

def ort_session(path, threads):
    return ort.InferenceSession(str(path), q.ort_runner.session_options(threads),
                                providers=["CPUExecutionProvider"])


def ort_outputs(session, feeds):
    return dict(zip([q.safe_name(o.name) for o in session.get_outputs()],
                    session.run(None, feeds)))


def accuracy(outs, refs, classifier):
    """Worst rel_l2 over pairs and outputs; pooled top-1 disagreement (classifiers)."""
    worst, wrong, rows = 0.0, 0, 0
    for got, ref in zip(outs, refs):
        for k, r in ref.items():
            worst = max(worst, q.rel_l2(got[k], r))
        if classifier:
            k = next(iter(ref))
            rows_here = int(np.prod(ref[k].shape[:-1]))
            wrong += round(q.top1_disagreement(got[k], ref[k]) * rows_here)
            rows += rows_here
    return {"rel_l2": worst, "top1": wrong / rows if rows else None}


def measure_accuracy(a, model, sysd, pairs, refs, sessions):
    classifier = q.base_name(model) in q.CLASSIFIERS
    for s in SYSTEMS:
        d = sysd[s]
        if d.get("error"):
            continue
        outs = []
        for feeds in pairs:
            if s.startswith("ort"):
                outs.append(ort_outputs(sessions[s], feeds))
                continue
            got, err = q.nnroute_run(a.nnroute, d["engine"], feeds, ["--threads", a.threads])
            if got is None:
                d["error"] = "run " + err
                break
            outs.append(got)
        if not d.get("error"):
            d["accuracy"] = accuracy(outs, refs, classifier)


# ---- latency ---------------------------------------------------------------------------

def measure_latency(a, sysd, timers):
    bench = SimpleNamespace(nnroute=a.nnroute, warmup_ms=a.warmup_ms,
                            duration_ms=a.duration_ms, min_iters=a.min_iters, seed=a.seed)
    for _ in range(a.rounds):
        for s in SYSTEMS:
            d = sysd[s]
            if d.get("error"):
                continue
            if s.startswith("ort"):
                v, err = q.run_perf.ort_round(timers[s], bench)
            else:
                v, err = q.run_perf.nnroute_round(bench, d["engine"], a.threads)
            d["rounds"].append(v)
            if err:
                d["error"] = err


def summarize(sysd):
    peer = sysd[PEER]["rounds"]
    base = sysd["nr_fp32"]["rounds"]
    for s in SYSTEMS:
        d = sysd[s]
        ok = [v for v in d["rounds"] if v]
        d["median_ms"] = statistics.median(ok) if ok and not d.get("error") else None
        for key, ref in (("ratio_to_peer", peer), ("speedup_vs_nr_fp32", base)):
            rs = [(v / r if key == "ratio_to_peer" else r / v)
                  for v, r in zip(d["rounds"], ref) if v and r]
            d[key] = ({"median": statistics.median(rs), "min": min(rs), "max": max(rs)}
                      if rs and d["median_ms"] else None)


# ---- one model ---------------------------------------------------------------------------

def one_model(a, model):
    path = q.model_path(model)
    qdq = q.WORK_DIR / "qdq" / f"{model}_qdq.onnx"
    data = q.model_data_dir(model)
    calib, holdout = data / "calib", data / "holdout"
    sysd = {s: {"rounds": []} for s in SYSTEMS}
    if not path.exists() or not qdq.exists() or not q.pair_dirs(holdout):
        for s in SYSTEMS:
            sysd[s]["error"] = f"missing {path.name}, its QDQ model or pairs: run ort_quantize.py"
        return sysd
    specs = q.input_specs(model, path)
    engines = WORK / "engines"
    engines.mkdir(parents=True, exist_ok=True)
    made = {
        "nr_fp32": lambda: build(a, path, specs, engines / f"{model}_fp32.nre"),
        "nr_qdq": lambda: build(a, qdq, specs, engines / f"{model}_qdq.nre",
                                "-precision@*=int8", calib),
        "nr_int8": lambda: build(a, path, specs, engines / f"{model}_int8.nre",
                                 INT8_ROUTE, calib),
        "nr_tuned": (lambda: (None, "skipped (--no-tune)")) if a.no_tune else
        (lambda: tuned(a, model, path, specs, calib, holdout)),
    }
    for s, make in made.items():
        engine, err = make()
        sysd[s].update(engine=str(engine) if engine else None, error=err)
    sessions, timers = {}, {}
    feeds = q.ort_runner.bench_inputs(specs, a.seed)
    for s, src in (("ort_fp32", path), ("ort_qdq", qdq)):
        try:
            sessions[s] = ort_session(src, int(a.threads))
            timers[s] = q.ort_runner.OrtTimer(str(src), int(a.threads), feeds)
        except Exception as e:
            sysd[s]["error"] = f"ORT: {str(e).splitlines()[0][:200]}"
    names = [n for n, _, _ in specs]
    pairs = [q.read_pair(d, names) for d in q.pair_dirs(holdout)]
    if "ort_fp32" in sessions:
        refs = [ort_outputs(sessions["ort_fp32"], f) for f in pairs]
        measure_accuracy(a, model, sysd, pairs, refs, sessions)
    measure_latency(a, sysd, timers)
    summarize(sysd)
    sysd["nr_tuned"]["route"] = None if a.no_tune else tuned_route(model, a.threads)
    return sysd


# ---- text ------------------------------------------------------------------------------

def ratio_cell(r):
    return "-" if r is None else f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"


def route_cell(route, model):
    """A short route in full; a long one as its int8 count (the report has it all)."""
    tokens = route.split()
    if len(tokens) <= 4:
        return f"`{route}`"
    int8 = sum(t.endswith("=int8") for t in tokens)
    return (f"{len(tokens)} changes, {int8} layers int8 "
            f"(build/quant/compare/tuned/{model}_t*.json)")


def table(results):
    lines = ["| model | system | median ms | ratio to ORT QDQ (min-max) | speedup vs nnroute "
             "fp32 | rel_l2 vs fp32 | top-1 disagreement | note |",
             "|---|---|---|---|---|---|---|---|"]
    for model, sysd in results.items():
        for s in SYSTEMS:
            d = sysd[s]
            acc = d.get("accuracy") or {}
            note = d.get("error") or ""
            if s == "nr_tuned" and d.get("route"):
                note = f"winner: {route_cell(d['route'], model)}" + (f"; {note}" if note else "")
            t1, rl2 = acc.get("top1"), acc.get("rel_l2")
            note = note.replace("|", "\\|")
            lines.append(
                f"| {model} | {s} | {q.run_perf.report.fmt_ms(d.get('median_ms'))} | "
                f"{ratio_cell(d.get('ratio_to_peer'))} | "
                f"{ratio_cell(d.get('speedup_vs_nr_fp32'))} | "
                f"{'-' if rl2 is None else f'{rl2:.2e}'} | "
                f"{'-' if t1 is None else f'{100 * t1:.2f}%'} | {note} |")
    return "\n".join(lines)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet50_op13,mobilenet_v2_op13,fashion_mnist")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup-ms", type=float, default=200)
    ap.add_argument("--duration-ms", type=float, default=800)
    ap.add_argument("--min-iters", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tune-args", default=TUNE_ARGS)
    ap.add_argument("--tune-budget", type=float, default=300)
    ap.add_argument("--no-tune", action="store_true")
    ap.add_argument("--retune", action="store_true")
    ap.add_argument("--nnroute", default=q.default_nnroute())
    ap.add_argument("--output", help="markdown file (default: build/quant/compare.md)")
    a = ap.parse_args()
    a.models = q.expand_models(a.models.split(","))
    a.output = a.output or str(q.WORK_DIR / "compare.md")
    return a


def main():
    a = parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    a.build_help = q.nnroute_help(a.nnroute, "build")
    if not q.nnroute_help(a.nnroute, "bench"):
        sys.exit(f"{a.nnroute} has no `bench` command: build nnroute (or --nnroute PATH)")
    t0 = time.monotonic()
    machine = q.run_perf.cpu_info()
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results = {}
    for model in a.models:
        q.log(f"{model}: engines, accuracy, {a.rounds} interleaved rounds")
        try:
            results[model] = one_model(a, model)
        except Exception as e:  # a harness bug on one model leaves the others' rows
            results[model] = {s: {"rounds": [], "error": f"harness: {type(e).__name__}: "
                                  f"{str(e)[:200]}"} for s in SYSTEMS}
    meta = {"date": q.today(), "git": q.git_describe(), "onnxruntime": ort.__version__,
            "command": "bench/quant/compare.py " + " ".join(shlex.quote(x) for x in sys.argv[1:]),
            "machine": machine, "load_start": load0, "threads": a.threads,
            "rounds": a.rounds, "warmup_ms": a.warmup_ms, "duration_ms": a.duration_ms,
            "tune": "skipped" if a.no_tune else f"{a.tune_args} --budget-time {a.tune_budget:g}",
            "wall_s": round(time.monotonic() - t0)}
    text = (f"{meta['date']}, {machine['cpu_model']} ({machine['cpus']} CPUs), "
            f"{a.threads} thread(s), {a.rounds} interleaved rounds of {a.warmup_ms:g} + "
            f"{a.duration_ms:g} ms; {meta['git']}; onnxruntime {ort.__version__}; tuned: "
            f"{meta['tune']}; load at start {load0}; {meta['wall_s']} s\n\n" + table(results))
    print(text)
    Path(a.output).write_text(text + "\n\n```json\n" + json.dumps(
        {"meta": meta, "results": results}, indent=1) + "\n```\n")
    q.log(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
