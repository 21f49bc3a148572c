"""top1.py - top-1 accuracy of the Fashion-MNIST classifier on its 10,000 test images,
as ONNX Runtime runs it (fp32, and the QDQ model of ort_quantize.py when present), as
nnroute's default-route engine runs it, and as the engines `nnroute tune --metric
top1` picks at several tolerances run it (issue 6's task-level metric).

Each tuned engine is the tuner's own output (-o), exactly the engine it validated on
the holdout pairs, so it has the batch of the reference pairs (256). The test set goes
through an engine in chunks of the engine's batch with `nnroute run ENGINE --input`,
one process per chunk; the last chunk is padded with zero images whose rows are
dropped. Key decision: run the engine the tuner wrote rather than re-building its route
at a larger batch - a route applies at any batch (knobs address nodes by name), but
an int8 engine re-built elsewhere is only the same engine when its calibration is,
and the point of this table is the accuracy of what a user deploys.

For every engine the table gives top-1 against the labels, the change in percentage
points against the nnroute fp32 default engine, and the fraction of test images whose
predicted class differs from ONNX Runtime fp32's (the disagreement the tuner's top1
metric bounds on its reference pairs).

usage: .venv/bin/python bench/quant/top1.py [--tolerances 0.001,0.005,0.01,0.05]
       [--routes EXPR] [--search full] [--budget-time S] [--threads N] [--retune]
       [--nnroute PATH]
       [--tune-args "..."] [--json FILE]
The tuner's space is, unless --routes gives another, DEFAULT_ROUTES: fp32 or int8 at
each of the four layers and the calibration method, 48 routes, searched in full (the
question here is which precision a tolerance allows; the other knobs move latency, not
accuracy, and docs/tuner.md covers them). Tuned engines are cached in build/quant/top1/
and reused while `nnroute inspect` accepts them and they were tuned with the same
arguments.
"""
import argparse
import hashlib
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qcommon as q  # noqa: E402

WORK = q.WORK_DIR / "top1"
MODEL = q.FASHION_DIR / "fashion_mnist.onnx"
PAIR_SHAPE = "256x1x28x28"  # the batch of fashion_mnist.py's reference pairs
DEFAULT_ROUTES = ("-precision@*=[fp32|int8] "
                  "-quant.calibration=[minmax|percentile|entropy]")


def ort_predict(path, images, threads):
    s = ort.InferenceSession(str(path), q.ort_runner.session_options(threads),
                             providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: images[i:i + 1000]})[0]
                           for i in range(0, len(images), 1000)])


def engine_batch(nr, engine):
    info = q.run_perf.inspect(nr, engine)
    if not info:
        return None, f"`nnroute inspect` refuses {engine}"
    return info["inputs"][0]["shape"][0], None


def nnroute_predict(nr, engine, images, threads):
    """Logits of all images through an engine of fixed batch, or (None, error)."""
    batch, err = engine_batch(nr, engine)
    if err:
        return None, err
    logits = []
    with tempfile.TemporaryDirectory(prefix="nr_top1_") as tmp:
        for i in range(0, len(images), batch):
            chunk = images[i:i + batch]
            n = len(chunk)
            if n < batch:
                chunk = np.concatenate([chunk, np.zeros((batch - n,) + chunk.shape[1:],
                                                        chunk.dtype)])
            np.save(Path(tmp) / "chunk.npy", chunk)
            rc, so, se = q.sh([nr, "run", engine, "--input", f"input={tmp}/chunk.npy",
                               "--threads", threads, "--output-dir", tmp], 600)
            if rc:
                return None, "run " + q.error_line(rc, se, so)
            logits.append(np.load(Path(tmp) / "logits.npy")[:n])
    return np.concatenate(logits), None


def build_default(a):
    out = WORK / "default.nre"
    rc, so, se = q.sh([a.nnroute, "build", MODEL, "--shape", f"input={PAIR_SHAPE}",
                       "--threads", a.threads, "-o", out], 600)
    return (out, None) if rc == 0 else (None, "build " + q.error_line(rc, se, so))


def tune_cmd(a, tol, out, report):
    """The tuner calibrates int8 routes on its reference pairs (training images)."""
    cmd = [a.nnroute, "tune", MODEL, "--shape", f"input={PAIR_SHAPE}",
           "--reference", q.FASHION_DIR / "calib", "--holdout", q.FASHION_DIR / "holdout",
           "--metric", "top1", "--tolerance", tol, "--threads", a.threads,
           "--budget-time", f"{a.budget_time:g}", "--db", WORK / "tune.db",
           "--report", report, "-o", out]
    cmd += ["--routes", a.routes, "--search", a.search]
    return [str(c) for c in cmd] + shlex.split(a.tune_args)


def tuned_engine(a, tol):
    """(engine, report dict, cached?, error) for one tolerance."""
    out, report = WORK / f"tuned_{tol}.nre", WORK / f"tuned_{tol}.json"
    cmd = tune_cmd(a, tol, WORK / f"tuned_{tol}.tmp.nre", report)
    key = hashlib.sha256(json.dumps([cmd[2:], q.run_perf.sha256(MODEL)]).encode()).hexdigest()
    stamp = WORK / f"tuned_{tol}.key"
    if (not a.retune and out.exists() and report.exists() and stamp.exists()
            and stamp.read_text() == key and q.run_perf.inspect(a.nnroute, out)):
        return out, json.loads(report.read_text()), True, None
    q.log(f"tolerance {tol}: {' '.join(shlex.quote(c) for c in cmd)}")
    t = time.monotonic()
    rc, so, se = q.sh(cmd, a.budget_time * 4 + 900)
    tmp = WORK / f"tuned_{tol}.tmp.nre"
    if rc or not tmp.exists():
        (WORK / f"tuned_{tol}.log").write_text(so + se)
        return None, None, False, "tune " + q.error_line(rc, se, so)
    tmp.replace(out)
    stamp.write_text(key)
    q.log(f"tolerance {tol}: tuned in {time.monotonic() - t:.0f} s")
    return out, json.loads(report.read_text()), False, None


def row_from(name, logits, labels, ort_pred, err=None, **extra):
    if logits is None:
        return {"engine": name, "error": err, **extra}
    pred = logits.argmax(1)
    return {"engine": name, "top1": float((pred == labels).mean()),
            "disagree_ort_fp32": float((pred != ort_pred).mean()), **extra}


def winner_info(report):
    w = report.get("winner", {})
    conf = report.get("confirmation", {})
    return {"route": w.get("route") or "(default route)",
            "confirmed_speedup": w.get("confirmed_speedup"),
            "candidates": len(report.get("candidates", [])),
            "reference_margin": w.get("reference_margin"),
            "confirm_rounds": conf.get("rounds")}


def fmt_pct(v):
    return "-" if v is None else f"{100 * v:.2f}%"


def table(rows, base):
    lines = ["| engine | top-1 | vs nnroute fp32 (pp) | disagrees with ORT fp32 | "
             "winner route | confirmed speedup |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['engine']} | error: {r['error']} | | | | |")
            continue
        delta = "-" if base is None else f"{100 * (r['top1'] - base):+.2f}"
        sp = r.get("confirmed_speedup")
        route = r.get("route", "")
        lines.append(f"| {r['engine']} | {fmt_pct(r['top1'])} | {delta} | "
                     f"{fmt_pct(r['disagree_ort_fp32'])} | {f'`{route}`' if route else ''} | "
                     f"{'' if sp is None else f'{sp:.3f}'} |")
    return "\n".join(lines)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tolerances", default="0.001,0.005,0.01,0.05",
                    help="top1 tolerances, one tuning session each")
    ap.add_argument("--routes", default=DEFAULT_ROUTES, help="the tuner's --routes")
    ap.add_argument("--search", default="full", help="the tuner's --search")
    ap.add_argument("--budget-time", type=float, default=300, help="seconds of search each")
    ap.add_argument("--threads", default="1", help="engine and ORT threads")
    ap.add_argument("--tune-args", default="", help="more options for every nnroute tune")
    ap.add_argument("--retune", action="store_true", help="ignore cached tuned engines")
    ap.add_argument("--no-tune", action="store_true", help="fp32 rows only")
    ap.add_argument("--nnroute", default=q.default_nnroute())
    ap.add_argument("--json", default=str(WORK / "top1.json"))
    return ap.parse_args()


def main():
    a = parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if not MODEL.exists():
        sys.exit(f"{MODEL} is missing: /usr/bin/python3 bench/models/fashion_mnist.py")
    images = np.load(q.FASHION_DIR / "test_images.npy")
    labels = np.load(q.FASHION_DIR / "test_labels.npy")
    ort_logits = ort_predict(MODEL, images, int(a.threads))
    ort_pred = ort_logits.argmax(1)
    rows = [row_from("ONNX Runtime fp32", ort_logits, labels, ort_pred)]
    qdq = q.WORK_DIR / "qdq" / "fashion_mnist_qdq.onnx"
    if qdq.exists():
        rows.append(row_from("ONNX Runtime int8 QDQ (ort_quantize.py)",
                             ort_predict(qdq, images, int(a.threads)), labels, ort_pred))
    engine, err = build_default(a)
    logits, err = nnroute_predict(a.nnroute, engine, images, a.threads) if engine else (None, err)
    rows.append(row_from("nnroute fp32 default route", logits, labels, ort_pred, err))
    base = rows[-1].get("top1")
    for tol in ([] if a.no_tune else a.tolerances.split(",")):
        name = f"nnroute tune --metric top1 --tolerance {tol}"
        eng, report, cached, err = tuned_engine(a, tol)
        if eng is None:
            rows.append(row_from(name, None, labels, ort_pred, err))
            continue
        logits, err = nnroute_predict(a.nnroute, eng, images, a.threads)
        rows.append(row_from(name, logits, labels, ort_pred, err, cached=cached,
                             **winner_info(report)))
    meta = {"date": q.today(), "command": "bench/quant/top1.py " + " ".join(
                shlex.quote(x) for x in sys.argv[1:]),
            "nnroute": a.nnroute, "git": q.git_describe(), "onnxruntime": ort.__version__,
            "images": int(len(images)), "tune_budget_s": a.budget_time,
            "routes": a.routes, "search": a.search, "threads": a.threads,
            "train": json.loads((q.FASHION_DIR / "train.json").read_text())["settings"]}
    text = (f"Fashion-MNIST top-1 on {len(images)} test images, {meta['date']}, "
            f"{meta['git']}, onnxruntime {ort.__version__}; tuning: --routes "
            f"'{a.routes}' --search {a.search} --budget-time {a.budget_time:g}, "
            f"{a.threads} thread(s)\n\n" + table(rows, base))
    print(text)
    Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    q.log(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
