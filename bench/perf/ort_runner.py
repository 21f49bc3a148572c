"""ort_runner.py - ONNX Runtime's side of the side-by-side benchmark: the inputs nnroute
bench uses, an ORT session configured as issue 5 asks, and a timing loop shaped like
`nnroute bench`'s (warm-up for a time, then measure for a time and a minimum count).

Key decision: ORT gets *bit-identical* inputs to nnroute without any file exchange.
`nnroute bench` draws its inputs with splitmix64 from --seed (src/cli/cli_util.c:
floats uniform in [-1, 1), integers in [0, 16) - valid token ids for the suite's BERT,
whose vocabulary is 8192 - booleans a fair coin), one stream over the inputs in engine
order. This file reproduces that stream in numpy, so the two runtimes see the same
tensors and no option has to be added to `nnroute bench`. If the C generator ever
changes, change `bench_inputs` with it.

Timing runs in-process through IOBinding with preallocated outputs, so the timed call
does what nnroute's timed nr_context_run does (no output allocation, no copies). What is
left is the Python-to-C call, a few microseconds; `call_floor_ms` measures it so a
report can say how much of a tiny model's time it is.

Run alone: .venv/bin/python bench/perf/ort_runner.py MODEL.onnx --threads N [--json]
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

GOLDEN = 0x9E3779B97F4A7C15
_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
           "int64": np.int64, "int32": np.int32, "int8": np.int8, "uint8": np.uint8,
           "bool": np.bool_}


def _splitmix64(seed, first, count):
    """Outputs first+1 .. first+count of splitmix64 started at `seed` (uint64 array)."""
    with np.errstate(over="ignore"):
        k = np.arange(first + 1, first + count + 1, dtype=np.uint64)
        z = np.uint64(seed) + k * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def bench_inputs(specs, seed=0):
    """The tensors `nnroute bench --seed SEED` feeds, for specs = [(name, dtype, shape)]
    in engine input order (as `nnroute inspect --json` lists them)."""
    feeds, drawn = {}, 0
    for name, dtype, shape in specs:
        n = int(np.prod(shape, dtype=np.int64))
        r = _splitmix64(seed, drawn, n)
        drawn += n
        np_type = _DTYPES[dtype]
        if np.issubdtype(np_type, np.floating):
            v = (r >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1.0
        elif np_type is np.bool_:
            v = (r & np.uint64(1)).astype(np.bool_)
        else:
            v = (r % np.uint64(16)).astype(np.int64)
        feeds[name] = v.astype(np_type).reshape(shape)
    return feeds


def graph_input_specs(path):
    """(name, dtype, shape) of a model's non-initializer inputs, symbolic dims as 1."""
    model = onnx.load(path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)).name
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                 for d in t.shape.dim]
        specs.append((vi.name, dtype, shape))
    return specs


def session_options(threads):
    """The configuration issue 5 fixes: CPU EP, all graph optimisations, N intra-op
    threads, one inter-op thread, sequential execution. Spinning is left at ORT's
    default, as a user would run it."""
    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return o


class OrtTimer:
    """One session with its inputs and outputs bound once; measure() may be called many
    times (once per round)."""

    def __init__(self, model, threads, feeds):
        self.session = ort.InferenceSession(model, session_options(threads),
                                            providers=["CPUExecutionProvider"])
        self.binding = self.session.io_binding()
        self._keep = []  # bound numpy buffers must outlive the binding
        for inp in self.session.get_inputs():
            arr = np.ascontiguousarray(feeds[inp.name])
            self._keep.append(arr)
            self.binding.bind_cpu_input(inp.name, arr)
        first = self.session.run(None, feeds)  # also the first warm-up run
        for out, value in zip(self.session.get_outputs(), first):
            buf = np.empty_like(value)
            self._keep.append(buf)
            self.binding.bind_output(out.name, "cpu", 0, buf.dtype, list(buf.shape),
                                     buf.ctypes.data)

    def run(self):
        self.session.run_with_iobinding(self.binding)

    def measure(self, warmup_ms, duration_ms, min_iters):
        """Warm-up, then timed runs; returns stats like `nnroute bench --json`'s."""
        clock = time.perf_counter
        start = clock()
        self.run()
        while (clock() - start) * 1e3 < warmup_ms:
            self.run()
        times = []
        start = clock()
        while (clock() - start) * 1e3 < duration_ms or len(times) < min_iters:
            t0 = clock()
            self.run()
            times.append((clock() - t0) * 1e3)
        return {"median_ms": statistics.median(times), "mean_ms": statistics.fmean(times),
                "min_ms": min(times), "max_ms": max(times), "iterations": len(times)}


def call_floor_ms(threads, duration_ms=300):
    """Median time of a run of a one-float Identity model through the same path: the
    fixed cost every ORT number here includes and nnroute's numbers do not."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])],
                                   "floor", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    model.ir_version = 8
    t = OrtTimer(model.SerializeToString(), threads, {"x": np.zeros(1, np.float32)})
    return t.measure(100, duration_ms, 100)["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup-ms", type=float, default=200)
    ap.add_argument("--duration-ms", type=float, default=1000)
    ap.add_argument("--min-iters", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    feeds = bench_inputs(graph_input_specs(a.model), a.seed)
    stats = OrtTimer(a.model, a.threads, feeds).measure(a.warmup_ms, a.duration_ms,
                                                         a.min_iters)
    stats["threads"] = a.threads
    if a.json:
        print(json.dumps(stats))
    else:
        print(f"onnxruntime {ort.__version__}, {a.threads} threads: median "
              f"{stats['median_ms']:.3f} ms over {stats['iterations']} runs")


if __name__ == "__main__":
    sys.exit(main())
