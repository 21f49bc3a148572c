#!/usr/bin/env python3
"""ort_profile.py - ONNX Runtime's own per-node times for one model, to set beside
`nnroute bench MODEL --profile` when looking for the layers nnroute loses on.

    ort_profile.py MODEL.onnx [--threads N] [--runs N] [--warmup N] [--top N]

Runs the model with ORT's CPU execution provider configured as bench/perf/ort_runner.py
configures it (graph optimisation 'all', intra-op threads = N, sequential), with ORT's
profiler on, and prints the mean milliseconds per run of every node, slowest first,
then the totals per operator. ORT names a node after its output after its own
rewrites (a Conv in the NCHWc layout is "<output>_nchwc", and a fused Conv+Add+Relu is
named after the Relu's output), so the match to nnroute's node names is left to the
reader.

Key decision: ORT's profiler cannot be switched on after a warm-up, so every run is
profiled and a node's "<node>_kernel_time" events are summed and divided by the runs:
the first, cold run is inside the mean, which --runs (50 by default) dilutes.
Inputs are seeded: normal floats, integers in [0, 16) (token ids); free dimensions
become 1."""
import argparse
import collections
import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--top", type=int, default=0, help="nodes to print (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    tmp = tempfile.mkdtemp(prefix="ort_profile_")
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, "p")
    try:
        sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - ORT raises its own types
        sys.exit(f"ort_profile: {a.model}: ORT cannot load it: {e}")
    rng = np.random.default_rng(a.seed)
    feeds = {}
    for i in sess.get_inputs():
        dims = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        if i.type == "tensor(float)":
            feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
        elif i.type in ("tensor(int64)", "tensor(int32)"):
            dtype = np.int64 if i.type == "tensor(int64)" else np.int32
            feeds[i.name] = rng.integers(0, 16, dims).astype(dtype)
        else:
            sys.exit(f"ort_profile: input {i.name} is {i.type}; float and int inputs only")
    for _ in range(a.runs):
        sess.run(None, feeds)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    total = collections.defaultdict(float)
    count = collections.Counter()
    op = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        node = name[: -len("_kernel_time")]
        total[node] += e["dur"]
        count[node] += 1
        op[node] = e.get("args", {}).get("op_name", "?")
    if not count:
        sys.exit("ort_profile: the profile holds no node events")
    runs = max(count.values())
    per_op = collections.defaultdict(float)
    print(f"model {a.model}, {a.threads} threads, {runs} runs, onnxruntime {ort.__version__}")
    print(f"sum over nodes: {sum(total.values()) / runs / 1000:.3f} ms per run")
    print(f"{'ms/run':>9}  {'op':20s} node")
    rows = sorted(total.items(), key=lambda t: -t[1])
    for i, (node, us) in enumerate(rows):
        per_op[op[node]] += us
        if a.top == 0 or i < a.top:
            print(f"{us / runs / 1000:9.4f}  {op[node]:20s} {node}")
    print(f"\n{'ms/run':>9}  op")
    for name, us in sorted(per_op.items(), key=lambda t: -t[1]):
        print(f"{us / runs / 1000:9.4f}  {name}")


if __name__ == "__main__":
    main()
