"""flops.py - the floating-point work of one inference of an ONNX model, counted from
its graph, so run_perf.py can turn a latency into achieved GFLOP/s.

Key decision: count only the operators that carry the work (Conv, ConvTranspose, Gemm,
MatMul) and count them the textbook way (a multiply-add is 2 flops), the same for both
runtimes. Elementwise ops, norms and pooling are ignored: they are bandwidth, not FLOPs,
and counting them would flatter a runtime that fuses them no better. Shapes come from
onnx.shape_inference (with data propagation); where it gives up (shufflenet's channel
split slices at offsets computed from Shape -> Gather -> Div), the missing shapes are
observed by running the model once in ONNX Runtime with those tensors added as outputs.
A node whose shapes are still unknown is reported as skipped rather than guessed, so a
wrong count is visible instead of silent.

    Conv:       2 * N * Cout * prod(out spatial) * (Cin / group) * prod(kernel)
                = 2 * prod(output shape) * prod(weight shape[1:])
    ConvTranspose: 2 * prod(input shape) * prod(weight shape[1:])
    Gemm:       2 * M * N * K
    MatMul:     2 * prod(output shape) * K   (batch dimensions included)

Run alone: .venv/bin/python bench/perf/flops.py MODEL.onnx... prints GFLOP per model.
"""
import math
import sys

import numpy as np
import onnx
from onnx import shape_inference


def _shape_table(model):
    """name -> list of ints (None where a dimension is symbolic) for every known tensor."""
    shapes = {}
    g = model.graph
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                               for d in t.shape.dim]
    return shapes


def _known(*shapes):
    return all(s is not None and all(isinstance(d, int) and d > 0 for d in s)
               for s in shapes)


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _node_flops(node, shapes):
    """FLOPs of one node, 0 for ops that are not counted, None when shapes are unknown."""
    get = lambda i: shapes.get(node.input[i]) if i < len(node.input) else None
    out = shapes.get(node.output[0]) if node.output else None
    op = node.op_type
    if op == "Conv":
        w = get(1)
        return 2 * math.prod(out) * math.prod(w[1:]) if _known(out, w) else None
    if op == "ConvTranspose":
        x, w = get(0), get(1)
        return 2 * math.prod(x) * math.prod(w[1:]) if _known(x, w) else None
    if op == "Gemm":
        a, b = get(0), get(1)
        if not _known(a, b) or len(a) != 2 or len(b) != 2:
            return None
        m, k = (a[1], a[0]) if _attr(node, "transA", 0) else (a[0], a[1])
        n = b[0] if _attr(node, "transB", 0) else b[1]
        return 2 * m * n * k
    if op == "MatMul":
        a = get(0)
        return 2 * math.prod(out) * a[-1] if _known(a, out) and a else None
    return 0


_NP_DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


def _observe_shapes(model, names):
    """Runs `model` once in ONNX Runtime with `names` as extra outputs; returns their
    shapes. Inputs are zeros: shapes of these models do not depend on input values, and
    zero is a valid token id. Optimisations are off so every tensor keeps its name."""
    import onnxruntime as ort  # only this fallback needs it
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.helper.ValueInfoProto(name=n) for n in names if n not in have)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                for d in t.shape.dim]
        feeds[vi.name] = np.zeros(dims, dtype=_NP_DTYPES.get(t.elem_type, np.float32))
    outs = [o.name for o in sess.get_outputs()]
    values = sess.run(outs, feeds)
    return {n: list(v.shape) for n, v in zip(outs, values) if n in names}


def count_flops(path):
    """Returns {"flops": total, "by_op": {op: flops}, "skipped": [node names]}."""
    model = onnx.load(path)
    model = shape_inference.infer_shapes(model, data_prop=True)
    shapes = _shape_table(model)
    unknown = [n for n in model.graph.node if _node_flops(n, shapes) is None]
    if unknown:
        names = {t for n in unknown for t in list(n.input[:2]) + list(n.output[:1]) if t}
        shapes.update(_observe_shapes(model, names))
    by_op, skipped = {}, []
    for node in model.graph.node:
        f = _node_flops(node, shapes)
        if f is None:
            skipped.append(node.name or node.output[0])
        elif f:
            by_op[node.op_type] = by_op.get(node.op_type, 0) + f
    return {"flops": sum(by_op.values()), "by_op": by_op, "skipped": skipped}


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: flops.py MODEL.onnx...")
    for path in sys.argv[1:]:
        c = count_flops(path)
        parts = ", ".join(f"{op} {f / 1e9:.3f}" for op, f in sorted(c["by_op"].items()))
        note = f", {len(c['skipped'])} nodes skipped (unknown shapes)" if c["skipped"] else ""
        print(f"{path}: {c['flops'] / 1e9:.3f} GFLOP ({parts}){note}")


if __name__ == "__main__":
    main()
