"""zoo_steps.py - what check_zoo.sh needs to know about a zoo model and its engine.

    zoo_steps.py info MODEL.onnx
        two lines for the shell: `shapes NAME=DIMS ...` (the sidecar's pinned input
        shapes as `nnroute build --shape` takes them; scalars and static inputs left out)
        and `marks M ...` (e.g. control-flow, dynamic: not expected to build today)
    zoo_steps.py steps INSPECT.json MODEL.onnx [--profile BENCH.json] [--json OUT]
        the steps of an engine (`nnroute inspect ENGINE --json`) that run on the
        reference tactic, grouped by op; a fused EltwiseChain is shown with the ONNX ops
        it covers (found by walking the graph back from the step's output to its first
        node). With the `nnroute bench --profile --json` of the same engine, each group's
        share of the measured time too. Prints one summary line and one line per group.

The sidecar is MODEL's <name>.zoo.json, written by bench/models/zoo.py or zoo_packaged.py;
a model without one has no pinned shapes and no marks.
"""
import argparse
import collections
import json
import os
import sys

import onnx

WALK_LIMIT = 256  # graph nodes visited per fused step at most
# What an EltwiseChain can hold; the walk back from a chain's output stops at anything else.
ELEMENTWISE = {
    "Abs", "Add", "And", "Cast", "Ceil", "Celu", "Clip", "Div",
    "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual",
    "HardSigmoid", "HardSwish", "Identity", "LeakyRelu", "Less", "LessOrEqual", "Log",
    "Max", "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "Pow", "PRelu", "Reciprocal",
    "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Cos", "Softplus", "Softsign",
    "Sqrt", "Sub", "Tanh", "ThresholdedRelu", "Where", "Xor"}


def sidecar(model_path):
    side = model_path[: -len(".onnx")] + ".zoo.json"
    if not os.path.exists(side):
        return {}
    with open(side) as f:
        return json.load(f)


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = all(d.HasField("dim_value") and d.dim_value > 0 for d in dims)
    return out


def cmd_info(args):
    side = sidecar(args.model)
    model = onnx.load(args.model, load_external_data=False)
    static = graph_inputs(model)
    shapes = [f"{name}={'x'.join(map(str, dims))}"
              for name, dims in side.get("inputs", {}).items()
              if dims and not static.get(name, True)]
    print("shapes " + " ".join(shapes))
    print("marks " + " ".join(side.get("marks", [])))
    return 0


def chain_ops(model, first_node, out_tensor, boundaries):
    """ONNX op types of a fused chain: the elementwise nodes reached walking back from
    the producer of out_tensor, not before the node named first_node in graph order and
    not through the first node of another step (in boundaries)."""
    nodes = list(model.graph.node)
    order = {id(n): i for i, n in enumerate(nodes)}
    producer = {o: n for n in nodes for o in n.output}
    start = next((n for n in nodes if n.name == first_node), None)
    end = producer.get(out_tensor)
    if start is None or end is None:
        return []
    lo = order[id(start)]
    seen, stack, ops = set(), [end], []
    while stack and len(seen) < WALK_LIMIT:
        n = stack.pop()
        if id(n) in seen or order[id(n)] < lo or n.op_type not in ELEMENTWISE or (
                n is not start and n.name in boundaries):
            continue
        seen.add(id(n))
        ops.append((order[id(n)], n.op_type))
        if n is start:
            continue
        stack.extend(producer[i] for i in n.input if i in producer)
    return [op for _, op in sorted(ops) if op != "Constant"]


def cmd_steps(args):
    with open(args.inspect) as f:
        info = json.load(f)
    model = onnx.load(args.model, load_external_data=False)
    share = {}
    if args.profile:
        with open(args.profile) as f:
            for p in json.load(f).get("profile", []):
                share[p["step"]] = p.get("pct", 0.0)
    steps = info["steps"]
    boundaries = {s["node"] for s in steps}
    groups = collections.OrderedDict()
    for s in steps:
        if s["tactic"] != "ref":
            continue
        label = s["op"]
        if s["op"] == "EltwiseChain":
            ops = chain_ops(model, s["node"], s["outputs"][0]["slot"],
                            boundaries) if s["outputs"] else []
            label = f"EltwiseChain({','.join(ops) or '?'})"
        g = groups.setdefault(label, {"count": 0, "pct": 0.0, "nodes": []})
        g["count"] += 1
        g["pct"] += share.get(s["index"], 0.0)
        g["nodes"].append(s["node"])
    n_ref = sum(g["count"] for g in groups.values())
    total_pct = sum(g["pct"] for g in groups.values())
    line = f"  reference tactic: {n_ref} of {len(steps)} steps"
    if args.profile:
        line += f", {total_pct:.1f}% of the profiled time"
    print(line)
    for label, g in sorted(groups.items(), key=lambda kv: (-kv[1]["pct"], -kv[1]["count"])):
        pct = f", {g['pct']:.1f}%" if args.profile else ""
        print(f"    {g['count']:3d} x {label}{pct} (first: {g['nodes'][0]})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": len(steps), "ref_steps": n_ref, "ref_pct": total_pct,
                       "groups": groups}, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("info")
    a.add_argument("model")
    b = sub.add_parser("steps")
    b.add_argument("inspect")
    b.add_argument("model")
    b.add_argument("--profile")
    b.add_argument("--json")
    args = ap.parse_args()
    return cmd_info(args) if args.cmd == "info" else cmd_steps(args)


if __name__ == "__main__":
    sys.exit(main())
