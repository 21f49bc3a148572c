"""ort_quantize.py - ONNX Runtime's own static QDQ quantization of the model suite and
the Fashion-MNIST classifier (the peer of issue 6), and a check of which of the
quantized models nnroute runs today.

For every model it
  1. writes seeded calibration pairs (build/quant/data/<model>/calib/test_data_set_K/)
     and holdout pairs (.../holdout/) unless they exist; Fashion-MNIST brings its own
     (training images for calibration, test images for holdout, fashion_mnist.py);
  2. runs `quant_pre_process` (shape inference and ORT's graph optimizations, the step
     ORT's documentation asks for before quantizing; a model it fails on is quantized
     as it is, and the table says so);
  3. runs `quantize_static` - QuantFormat.QDQ, per-channel int8 weights, MinMax ranges
     from a CalibrationDataReader over the calibration pairs - into
     build/quant/qdq/<model>_qdq.onnx;
  4. runs that model with `nnroute run --reference` (the reference executor) and
     `nnroute build` (an engine along the default route, then run), records the
     first error line of each, and compares on the first holdout pair: ORT's QDQ
     model against ORT fp32 (ORT's own quantization error), nnroute's reference
     against ORT's QDQ model as ORT runs it (fused into int8 kernels) and unfused
     (ORT_DISABLE_ALL: every Q/DQ node in float, the semantics nnroute's reference
     implements), and the engine against the reference. ORT's fused model against
     its unfused one gives the scale these differences have by rounding alone.
  5. builds it again with `-precision@*=int8` (the qdq pass takes each Q/DQ pair's
     grid into the int8 kernel; nodes without a pair are calibrated on the
     calibration pairs), and compares that engine with ORT's QDQ model.

Key decision: the calibration pairs are written in the folder layout `nnroute tune
--reference` reads, and nnroute is calibrated from the same folders
(bench/quant/compare.py), so both systems see identical calibration tensors. The
activation type defaults to uint8 with int8 weights (U8S8), the operand types the x86
int8 instructions take natively (VPMADDUBSW and VNNI's VPDPBUSD multiply unsigned by
signed bytes) and nnroute's own int8 grid; --activation-type int8 gives S8S8.

usage: .venv/bin/python bench/quant/ort_quantize.py [--models M,...] [--opsets 13]
       [--calib N] [--holdout N] [--activation-type uint8|int8] [--force]
       [--nnroute PATH] [--json FILE]
Prints a markdown table; --json also writes the rows.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod,
                                      QuantFormat, QuantType, quant_pre_process,
                                      quantize_static)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qcommon as q  # noqa: E402

QDQ_DIR = q.WORK_DIR / "qdq"


class PairReader(CalibrationDataReader):
    """ORT's calibration reader over test_data_set_K folders."""

    def __init__(self, folder, input_names):
        self.dirs = q.pair_dirs(folder)
        self.names = input_names
        self.i = 0

    def get_next(self):
        if self.i >= len(self.dirs):
            return None
        self.i += 1
        return q.read_pair(self.dirs[self.i - 1], self.names)

    def rewind(self):
        self.i = 0


def ensure_pairs(model, path, n_calib, n_holdout):
    """Calibration and holdout pairs of a suite model (generated once, seeded by the
    model's name); Fashion-MNIST's come from fashion_mnist.py and must exist."""
    base = q.model_data_dir(model)
    if model == "fashion_mnist":
        if not q.pair_dirs(base / "calib"):
            sys.exit(f"{base}/calib is empty: run /usr/bin/python3 "
                     "bench/models/fashion_mnist.py first")
        return
    specs = q.ort_runner.graph_input_specs(str(path))
    for sub, count in (("calib", n_calib), ("holdout", n_holdout)):
        have = q.pair_dirs(base / sub)
        for k in range(len(have), count):
            feeds = q.generated_inputs(model, specs, q.name_seed(model, f"{sub}{k}"))
            q.write_pair(base / sub / f"test_data_set_{k}", feeds)


def preprocess(src, dst):
    """quant_pre_process into dst; returns a note ('' when it worked)."""
    try:
        quant_pre_process(str(src), str(dst), skip_symbolic_shape=False)
        return ""
    except Exception as e:  # a model ORT's preprocessing rejects is quantized as-is
        try:
            quant_pre_process(str(src), str(dst), skip_symbolic_shape=True)
            return "pre-process without symbolic shape inference"
        except Exception:
            onnx.save(onnx.load(str(src)), str(dst))
            return f"pre-process failed ({type(e).__name__}: {str(e).splitlines()[0][:80]})"


def quantize(model, path, out, act_type):
    names = [s[0] for s in q.ort_runner.graph_input_specs(str(path))]
    reader = PairReader(q.model_data_dir(model) / "calib", names)
    with tempfile.TemporaryDirectory(prefix="nr_qdq_") as tmp:
        pre = Path(tmp) / "pre.onnx"
        note = preprocess(path, pre)
        quantize_static(str(pre), str(out), reader, quant_format=QuantFormat.QDQ,
                        per_channel=True, reduce_range=False,
                        activation_type=act_type, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
    return note, len(reader.dirs)


def op_counts(path):
    m = onnx.load(str(path), load_external_data=False)
    counts = {}
    for n in m.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def ort_outputs(path, feeds, optimize=True):
    """ORT's outputs; optimize=False runs every Q/DQ node as written (float math), the
    semantics nnroute's reference executor implements, where optimize=True fuses
    them into ORT's int8 kernels."""
    o = ort.SessionOptions()
    if not optimize:
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])
    return dict(zip([q.safe_name(x.name) for x in s.get_outputs()], s.run(None, feeds)))


def worst_rel_l2(got, ref):
    return max(q.rel_l2(got[k], v) for k, v in ref.items())


def engine_steps(nr, engine):
    """Steps, Q/DQ steps left and their tactics of an engine (`nnroute inspect`)."""
    info = q.run_perf.inspect(nr, engine)
    if not info:
        return None
    steps = info.get("steps", [])
    qdq = [st for st in steps if st.get("op") in ("QuantizeLinear", "DequantizeLinear")]
    return {"steps": len(steps), "qdq_steps": len(qdq),
            "qdq_tactics": sorted({st.get("tactic", "?") for st in qdq})}


def check_nnroute(nr, model, path, qdq):
    """ORT's own quantization error, nnroute's reference run and default-route engine
    of the QDQ model, each compared on the first holdout pair: a dict of results."""
    res = {}
    specs = q.input_specs(model, qdq)
    holdout = q.pair_dirs(q.model_data_dir(model) / "holdout")[0]
    feeds = q.read_pair(holdout, [s[0] for s in specs])
    ort_q, ort_unfused = ort_outputs(qdq, feeds), ort_outputs(qdq, feeds, False)
    res["ort_qdq_vs_fp32"] = worst_rel_l2(ort_q, ort_outputs(path, feeds))
    # The scale of "same model, other rounding": a value next to a rounding boundary
    # of a QuantizeLinear lands one step away when the float sum before it is added
    # in another order, and deep networks pass such steps on.
    res["ort_fused_vs_unfused"] = worst_rel_l2(ort_q, ort_unfused)
    t = time.monotonic()
    ref, err = q.nnroute_run(nr, qdq, feeds, ["--reference"])
    res["run_s"] = round(time.monotonic() - t, 1)
    res["run_reference"] = "ok" if ref is not None else err
    if ref is not None:
        res["ref_vs_ort_qdq"] = worst_rel_l2(ref, ort_q)
        res["ref_vs_ort_unfused"] = worst_rel_l2(ref, ort_unfused)
    res.update(check_engine(nr, qdq, specs, feeds, ref, ort_q, None, ""))
    calib = q.model_data_dir(model) / "calib"
    res.update(check_engine(nr, qdq, specs, feeds, ref, ort_q, "-precision@*=int8", "int8_",
                            ["--calibration", calib]))
    return res


def check_engine(nr, qdq, specs, feeds, ref, ort_q, route, prefix, extra=()):
    """Builds the QDQ model along route (None: the default route), runs it on feeds
    and compares with nnroute's reference and ORT's QDQ outputs; keys get prefix."""
    res = {}
    with tempfile.TemporaryDirectory(prefix="nr_qdq_") as tmp:
        engine = Path(tmp) / "e.nre"
        cmd = [nr, "build", qdq, *q.shape_args(specs), "-o", engine, *extra]
        cmd += ["--route", route] if route else []
        rc, so, se = q.sh(cmd, 900)
        res["build"] = "ok" if rc == 0 else q.error_line(rc, se, so)
        if rc == 0:
            res.update(engine_steps(nr, engine) or {})
            got, err = q.nnroute_run(nr, engine, feeds)
            res["engine_run"] = "ok" if got is not None else err
            if got is not None and ref is not None:
                res["engine_vs_ref"] = worst_rel_l2(got, ref)
            if got is not None:
                res["engine_vs_ort_qdq"] = worst_rel_l2(got, ort_q)
    return {prefix + k: v for k, v in res.items()}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(q.SUITE + ["fashion_mnist"]),
                    help="suite names (every --opsets), NAME_opNN, or fashion_mnist")
    ap.add_argument("--opsets", default="13")
    ap.add_argument("--calib", type=int, default=8, help="calibration pairs per model")
    ap.add_argument("--holdout", type=int, default=4, help="holdout pairs per model")
    ap.add_argument("--activation-type", choices=["uint8", "int8"], default="uint8")
    ap.add_argument("--force", action="store_true", help="quantize again when present")
    ap.add_argument("--no-check", action="store_true", help="skip the nnroute checks")
    ap.add_argument("--nnroute", default=q.default_nnroute())
    ap.add_argument("--json", help="write the rows here too")
    a = ap.parse_args()
    a.models = q.expand_models(a.models.split(","), [int(x) for x in a.opsets.split(",")])
    return a


def one_model(a, model, act_type):
    row = {"model": model}
    path = q.model_path(model)
    if not path.exists():
        row["error"] = f"no {path} (bench/models/export_models.py or fashion_mnist.py)"
        return row
    ensure_pairs(model, path, a.calib, a.holdout)
    out = QDQ_DIR / f"{model}_qdq.onnx"
    if a.force or not out.exists() or out.stat().st_mtime < path.stat().st_mtime:
        t = time.monotonic()
        try:
            row["note"], row["calib_pairs"] = quantize(model, path, out, act_type)
        except Exception as e:
            row["error"] = f"quantize_static: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            return row
        row["quantize_s"] = round(time.monotonic() - t, 1)
    row["qdq"] = str(out.relative_to(q.ROOT))
    counts = op_counts(out)
    row["qdq_ops"] = {k: counts.get(k, 0) for k in ("QuantizeLinear", "DequantizeLinear")}
    if not a.no_check:
        row.update(check_nnroute(a.nnroute, model, path, out))
    return row


def cell(v):
    return "-" if v is None else str(v).replace("|", "\\|")


def fmt(v):
    return "-" if v is None else f"{v:.2e}"


def build_cells(r, prefix):
    """(build status, steps, rel_l2 cell) of one engine variant of a row."""
    build = r.get(prefix + "build")
    if build == "ok" and r.get(prefix + "engine_run", "ok") != "ok":
        build = f"ok; run: {r[prefix + 'engine_run']}"
    steps = "-" if prefix + "steps" not in r else \
        f"{r[prefix + 'steps']} ({r[prefix + 'qdq_steps']})"
    key = "engine_vs_ref" if prefix == "" else "engine_vs_ort_qdq"
    return cell(build), steps, fmt(r.get(prefix + key))


def table(rows):
    """Quantization and run status, then the rel_l2 of each comparison (holdout pair 0)."""
    lines = ["| model | Q / DQ nodes | quantize | ORT QDQ vs ORT fp32 | ORT fused vs "
             "unfused | nnroute run --reference | vs ORT QDQ | vs ORT QDQ unfused | "
             "build, default route | steps (Q/DQ) | vs reference | build, "
             "-precision@*=int8 | steps (Q/DQ) | vs ORT QDQ |", "|---" * 14 + "|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | - | {cell(r['error'])} |" + " - |" * 11)
            continue
        ops = r["qdq_ops"]
        quant = "cached" if "quantize_s" not in r else f"{r['quantize_s']} s"
        if r.get("note"):
            quant += f" ({r['note']})"
        lines.append(f"| {r['model']} | {ops['QuantizeLinear']} / {ops['DequantizeLinear']} "
                     f"| {cell(quant)} | {fmt(r.get('ort_qdq_vs_fp32'))} | "
                     f"{fmt(r.get('ort_fused_vs_unfused'))} | "
                     f"{cell(r.get('run_reference'))} | {fmt(r.get('ref_vs_ort_qdq'))} | "
                     f"{fmt(r.get('ref_vs_ort_unfused'))} | "
                     + " | ".join(build_cells(r, "")) + " | "
                     + " | ".join(build_cells(r, "int8_")) + " |")
    return "\n".join(lines)


def main():
    a = parse_args()
    QDQ_DIR.mkdir(parents=True, exist_ok=True)
    act_type = QuantType.QUInt8 if a.activation_type == "uint8" else QuantType.QInt8
    rows = []
    for model in a.models:
        q.log(f"{model}: quantizing and checking")
        rows.append(one_model(a, model, act_type))
        q.log(f"{model}: {json.dumps({k: v for k, v in rows[-1].items() if k != 'model'})}")
    print(f"ONNX Runtime {ort.__version__} quantize_static (QDQ, per-channel int8 weights, "
          f"{a.activation_type} activations, MinMax over {a.calib} calibration pairs), "
          f"{q.today()}, nnroute {a.nnroute}, {q.git_describe()}\n")
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
