"""resnet50_top1.py - issue 6's resnet50 acceptance run, as one command: `nnroute tune
--metric top1 --tolerance 0.01` on a ResNet-50 with trained weights, then an independent
check of what it wrote.

The model is bench/models/fashion_resnet50.py's (torchvision ResNet-50 trained on
Fashion-MNIST at 224x224; the suite's random-weight resnet50 cannot say anything about
top-1, see that script). The tuner searches the precision of every Conv/Gemm
(`-precision@*=[fp32|int8]`, greedy: layer-wise sensitivity), calibrating on its
reference pairs (training images) and judging its winner on the holdout pairs (test
images, one per pair, so 0.01 allows one changed answer in 100).

Key decision: the tuner's own verdict is not taken on trust. Afterwards this script
runs, on the same holdout images, ONNX Runtime (fp32), the nnroute default engine and
the tuned engine, and counts the answers that differ from ONNX Runtime's and from the
labels; then it times the default and tuned engines in interleaved rounds
(`nnroute bench`, ratio per round, median of the ratios). The tuned engine is the file
the tuner wrote, not a rebuild of its route.

    .venv/bin/python bench/quant/resnet50_top1.py [--threads 1] [--budget 1200]

Needs build/models/fashion_resnet50/ (`fashion_resnet50.py export`; when only its
weights_fp16.pt is there, this script runs the export with /usr/bin/python3). Writes
build/quant/resnet50_top1/{tune.log,report.json,tuned.nre,default.nre,result.json} and
prints a markdown table. --skip-tune reuses the last tuned engine and report.
"""
import argparse
import gzip
import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort

import qcommon as q

MODEL_DIR = q.MODELS_DIR / "fashion_resnet50"
OUT = q.WORK_DIR / "resnet50_top1"
LABELS = Path("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz")


def ensure_model():
    onnx = MODEL_DIR / "fashion_resnet50.onnx"
    if onnx.exists():
        return onnx
    weights = MODEL_DIR / "weights_fp16.pt"
    if not weights.exists():
        sys.exit(f"{onnx} is missing and so is {weights}: train the model on a GPU with "
                 "`python3 bench/models/fashion_resnet50.py train --out W.pt` (about a "
                 "minute on an H200) and export it here with `/usr/bin/python3 "
                 "bench/models/fashion_resnet50.py export --weights W.pt`")
    subprocess.run(["/usr/bin/python3", str(q.ROOT / "bench/models/fashion_resnet50.py"),
                    "export", "--weights", str(weights), str(MODEL_DIR)], check=True)
    return onnx


def test_labels():
    with gzip.open(LABELS, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, np.uint8, offset=8).astype(np.int64)


def tune(a, onnx):
    cmd = [a.nnroute, "tune", str(onnx), "--metric", "top1", "--tolerance",
           f"{a.tolerance:g}", "--search", "greedy", "--routes", a.routes,
           "--reference", str(MODEL_DIR / "calib"), "--holdout", str(MODEL_DIR / "holdout"),
           "--holdout-pairs", str(a.holdout_pairs), "--threads", str(a.threads),
           "--budget-time", str(a.budget), "--db", str(OUT / "tune.db"),
           "--report", str(OUT / "report.json"), "-o", str(OUT / "tuned.nre")]
    q.log("tune: " + " ".join(shlex.quote(c) for c in cmd))
    for p in OUT.glob("tune.db*"):  # a fresh session: no older search mixed in
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    with open(OUT / "tune.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc:
        sys.exit(f"nnroute tune failed ({rc}); see {OUT / 'tune.log'}")


def argmaxes(outs):
    return np.array([int(np.asarray(o).reshape(-1).argmax()) for o in outs])


def run_engine(a, engine, pairs):
    outs = []
    for feeds in pairs:
        got, err = q.nnroute_run(a.nnroute, engine, feeds, ["--threads", str(a.threads)])
        if got is None:
            sys.exit(f"{engine}: {err}")
        outs.append(got["logits"])
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnroute", default=q.default_nnroute())
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=int, default=1200, help="tuner --budget-time (s)")
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--holdout-pairs", type=int, default=100)
    ap.add_argument("--routes", default="-precision@*=[fp32|int8]")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    ap.add_argument("--skip-tune", action="store_true")
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    onnx = ensure_model()
    if not a.skip_tune:
        tune(a, onnx)
    report = json.loads((OUT / "report.json").read_text())
    route = report.get("winner", {}).get("route") or ""
    int8 = len(re.findall(r"precision@[^=\s]+=int8", route))
    knobs = q.sh([a.nnroute, "knobs", onnx], 300)[1]
    layers = sum(1 for line in knobs.splitlines() if line.startswith("precision@"))

    default = OUT / "default.nre"
    rc, so, se = q.sh([a.nnroute, "build", onnx, "--threads", a.threads, "-o", default],
                      900)
    if rc:
        sys.exit("build: " + q.error_line(rc, se, so))

    holdout = q.pair_dirs(MODEL_DIR / "holdout")[:a.holdout_pairs]
    pairs = [q.read_pair(d, ["input"]) for d in holdout]
    idx = json.loads((MODEL_DIR / "export.json").read_text())["holdout_test_indices"]
    labels = test_labels()[idx[:len(pairs)]]
    sess = ort.InferenceSession(str(onnx), q.ort_runner.session_options(a.threads),
                                providers=["CPUExecutionProvider"])
    ort_top = argmaxes([sess.run(None, p)[0] for p in pairs])
    q.log(f"holdout: {len(pairs)} images; running the default and tuned engines")
    tops = {"default": argmaxes(run_engine(a, default, pairs)),
            "tuned": argmaxes(run_engine(a, OUT / "tuned.nre", pairs))}

    bench = SimpleNamespace(nnroute=a.nnroute, warmup_ms=300, duration_ms=1500,
                            min_iters=5, seed=0)
    ms = {"default": [], "tuned": []}
    for r in range(a.rounds):
        for s in ms:
            v, err = q.run_perf.nnroute_round(bench, OUT / f"{s}.nre", a.threads)
            if err:
                sys.exit(f"{s}: {err}")
            ms[s].append(v)
        q.log(f"round {r + 1}/{a.rounds}: default {ms['default'][-1]:.1f} ms, tuned "
              f"{ms['tuned'][-1]:.1f} ms")
    speedups = [d / t for d, t in zip(ms["default"], ms["tuned"])]

    result = {"date": q.today(), "commit": q.git_describe(), "threads": a.threads,
              "tolerance": a.tolerance, "routes": a.routes, "holdout_images": len(pairs),
              "winner_route": route or "(default route)", "int8_layers": int8,
              "precision_layers": layers,
              "changed_vs_ort": {s: int((t != ort_top).sum()) for s, t in tops.items()},
              "top1_labels": {"ort_fp32": float((ort_top == labels).mean()),
                              **{s: float((t == labels).mean()) for s, t in tops.items()}},
              "median_ms": {s: statistics.median(v) for s, v in ms.items()},
              "speedup": {"median": statistics.median(speedups), "min": min(speedups),
                          "max": max(speedups)},
              "tuner_winner": report.get("winner", {})}
    (OUT / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    sp = result["speedup"]
    print(f"resnet50 (trained on Fashion-MNIST), {a.threads} thread(s), {q.today()}, "
          f"{len(pairs)} holdout images, tolerance {a.tolerance:g}\n")
    print("| engine | int8 layers | answers changed vs ORT fp32 | top-1 vs labels | "
          "median ms | speedup vs default (min-max) |")
    print("|---|---|---|---|---|---|")
    print(f"| ORT fp32 | 0 | - | {result['top1_labels']['ort_fp32']:.2%} | - | - |")
    print(f"| nnroute default | 0 | {result['changed_vs_ort']['default']} | "
          f"{result['top1_labels']['default']:.2%} | {result['median_ms']['default']:.1f} "
          "| 1.00 |")
    print(f"| nnroute tuned | {int8} of {layers} | {result['changed_vs_ort']['tuned']} | "
          f"{result['top1_labels']['tuned']:.2%} | {result['median_ms']['tuned']:.1f} | "
          f"{sp['median']:.2f} ({sp['min']:.2f}-{sp['max']:.2f}) |")
    print(f"\nwinner: `{result['winner_route']}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
