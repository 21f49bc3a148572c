"""ort_reference.py - seeded inputs and ONNX Runtime's outputs for the real-model suite.

For every OUTDIR/<model>.onnx (as written by export_models.py) this writes
    OUTDIR/<model>/<input>.npy        the inputs, drawn from a seed derived from the name
    OUTDIR/<model>/ref/<output>.npy   ONNX Runtime's outputs (CPU EP, all optimizations)
with tensor names sanitized the way `nnroute run` names its files (every character
outside [A-Za-z0-9._-] becomes '_'), so `nnroute run --inputs-dir OUTDIR/<model>` reads
the inputs and its --output-dir can be compared file by file with ref/.

Float inputs are standard normal; integer inputs are token ids, uniform over the vocabulary
found in the first Gather that consumes them (the embedding table's row count). The seed
depends only on the model name, so inputs are the same on every machine and run.

A zoo model (bench/models/zoo.py, zoo_packaged.py) may have a sidecar OUTDIR/<model>.zoo.json.
Its "inputs" give the shapes of inputs the file leaves dynamic (what `nnroute build
--shape` pins), and its "feeds" say how an input is drawn where the default would be
wrong: {"kind": "mask", "valid_fraction": F} (ones, then zeros: an attention mask with
trailing padding), "segments" (zeros, then ones from "split"), "zeros", or "const"
(every element "value", e.g. a sample rate). Models without a sidecar are drawn as above.

Run with the project's venv: .venv/bin/python bench/models/ort_reference.py OUTDIR
[--force]. A model whose ref/ folder is complete is skipped unless --force is given.
"""
import argparse
import glob
import json
import os
import re
import sys
import time
import zlib

import numpy as np
import onnx
import onnxruntime as ort

DEFAULT_VOCAB = 1000


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def vocab_size(model, input_name):
    """Row count of the embedding table a token-id input indexes, so every id is valid."""
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == input_name:
            table = inits.get(node.input[0])
            if table is not None and table.dims:
                return int(table.dims[0])
    return DEFAULT_VOCAB


def zoo_sidecar(path):
    """The zoo's sidecar of a model file, or {} for a suite model."""
    side = path[: -len(".onnx")] + ".zoo.json"
    if not os.path.exists(side):
        return {}
    with open(side) as f:
        return json.load(f)


def special_feed(spec, shape, dtype):
    """An input drawn as the sidecar's "feeds" entry says (see the docstring)."""
    kind = spec["kind"]
    if kind == "const":
        return np.full(shape, spec["value"], dtype=dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype=dtype)
    if kind in ("mask", "segments"):
        n = shape[-1] if shape else 1
        cut = int(round(n * spec.get("valid_fraction", spec.get("split", 0.5))))
        row = (np.arange(n) < cut) if kind == "mask" else (np.arange(n) >= cut)
        return np.broadcast_to(row.astype(dtype), shape).copy()
    raise SystemExit(f"ort_reference: unknown feed kind {kind!r}")


def make_inputs(model, session, rng, side=None):
    side = side or {}
    shapes, specs = side.get("inputs", {}), side.get("feeds", {})
    feeds = {}
    for inp in session.get_inputs():
        shape = shapes.get(inp.name)
        if shape is None:
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
        dtype = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
                 "tensor(int32)": np.int32}.get(inp.type)
        if dtype is None:
            raise SystemExit(f"ort_reference: input {inp.name!r} has type {inp.type}, "
                             "which this script does not know how to draw")
        if inp.name in specs:
            feeds[inp.name] = special_feed(specs[inp.name], shape, dtype)
        elif dtype is np.float32:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            high = vocab_size(model, inp.name)
            feeds[inp.name] = rng.integers(0, high, size=shape).astype(dtype)
    return feeds


def reference(path, force):
    name = os.path.basename(path)[: -len(".onnx")]
    outdir = os.path.join(os.path.dirname(path), name)
    refdir = os.path.join(outdir, "ref")
    t0 = time.time()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    done = all(os.path.exists(os.path.join(refdir, sanitize(o) + ".npy")) for o in outputs)
    if done and not force:
        return name, None
    model = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    feeds = make_inputs(model, session, rng, zoo_sidecar(path))
    results = session.run(outputs, feeds)
    os.makedirs(refdir, exist_ok=True)
    for key, value in feeds.items():
        np.save(os.path.join(outdir, sanitize(key) + ".npy"), value)
    for key, value in zip(outputs, results):
        np.save(os.path.join(refdir, sanitize(key) + ".npy"), value)
    return name, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--force", action="store_true", help="recompute existing references")
    args = ap.parse_args()
    models = sorted(glob.glob(os.path.join(args.outdir, "*.onnx")))
    if not models:
        sys.exit(f"ort_reference: no .onnx files in {args.outdir}")
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
    for path in models:
        name, secs = reference(path, args.force)
        print(f"{name}: " + ("up to date" if secs is None else f"{secs:.1f} s"), flush=True)


if __name__ == "__main__":
    main()
