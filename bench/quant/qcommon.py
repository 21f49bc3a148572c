"""qcommon.py - what the quantization benches (bench/quant/*.py) share: paths, the model
list, reading reference-pair folders, running nnroute, and the accuracy metrics.

Key decision: one folder layout for data on both sides. A pair is a folder
test_data_set_K/ holding <input>.npy per model input (the layout `nnroute tune
--reference/--holdout` reads, src/tune/pairs.c), and the same folders feed ONNX
Runtime's calibration reader, nnroute's calibration and the accuracy checks, so the
two systems are calibrated and judged on the same tensors bit for bit. Process and
timing helpers come from bench/perf (run_perf.py, ort_runner.py) rather than being
written twice; the venv interpreter (.venv/bin/python) runs all of it.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench/perf"))
import ort_runner  # noqa: E402,F401  (re-exported for the scripts)
import run_perf  # noqa: E402,F401

MODELS_DIR = ROOT / "build/models"
WORK_DIR = ROOT / "build/quant"
FASHION_DIR = MODELS_DIR / "fashion_mnist"
# The suite of bench/models/export_models.py, and the Fashion-MNIST classifier.
SUITE = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
         "squeezenet1_1", "shufflenet_v2_x1_0", "bert_tiny", "mlp"]
CLASSIFIERS = {"resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small",
               "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0", "mlp",
               "fashion_mnist"}
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.0f} s] {msg}", file=sys.stderr, flush=True)


def default_nnroute():
    return os.environ.get("NNROUTE", str(ROOT / "build/nnroute"))


def sh(cmd, timeout):
    """(rc, stdout, stderr): rc 124 on timeout, 127 when the program is missing."""
    return run_perf.sh([str(c) for c in cmd], timeout)


def error_line(rc, err, out=""):
    return run_perf.first_error_line(rc, err, out)


def base_name(model):
    """'resnet50_op13' -> 'resnet50'."""
    return re.sub(r"_op\d+$", "", model)


def model_path(model):
    """ONNX file of a suite name (NAME_opNN) or 'fashion_mnist'."""
    if model == "fashion_mnist":
        return FASHION_DIR / "fashion_mnist.onnx"
    return MODELS_DIR / f"{model}.onnx"


def expand_models(names, opsets=(13,)):
    """Suite names get every opset; NAME_opNN and fashion_mnist stay as they are."""
    out = []
    for n in names:
        if n == "fashion_mnist" or "_op" in n:
            out.append(n)
        else:
            out += [f"{n}_op{o}" for o in opsets]
    return out


def safe_name(name):
    """A tensor name as nnroute writes it in a file name (src/tune/pairs.c)."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" if s in (".", "..") else s


def pair_dirs(folder):
    """test_data_set_K folders of `folder`, in numeric order of K."""
    dirs = [d for d in Path(folder).glob("test_data_set_*") if d.is_dir()
            and d.name[len("test_data_set_"):].isdigit()]
    return sorted(dirs, key=lambda d: int(d.name[len("test_data_set_"):]))


def read_pair(d, input_names):
    return {n: np.load(Path(d) / f"{safe_name(n)}.npy") for n in input_names}


def write_pair(d, feeds):
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    for name, value in feeds.items():
        np.save(d / f"{safe_name(name)}.npy", np.ascontiguousarray(value))


def model_data_dir(model):
    """Where a model's calibration and holdout pairs live (calib/, holdout/)."""
    return FASHION_DIR if model == "fashion_mnist" else WORK_DIR / "data" / model


def input_specs(model, path):
    """[(name, dtype, shape)] of the model's inputs: the shapes of its calibration
    pairs when it has some (fashion_mnist: batch 256), else the graph's (symbolic dims
    as 1)."""
    specs = ort_runner.graph_input_specs(str(path))
    dirs = pair_dirs(model_data_dir(model) / "calib")
    if dirs:
        feeds = read_pair(dirs[0], [s[0] for s in specs])
        specs = [(n, str(feeds[n].dtype), list(feeds[n].shape)) for n, _, _ in specs]
    return specs


def shape_args(specs):
    """--shape NAME=DIMS for every input of a model (a no-op for fixed shapes)."""
    args = []
    for name, _, shape in specs:
        args += ["--shape", f"{name}=" + "x".join(str(d) for d in shape)]
    return args


def generated_inputs(model, specs, seed):
    """Seeded inputs like bench/models/export_models.py's: standard normal images,
    token ids uniform over the embedding table (8192 rows for bert_tiny)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, shape in specs:
        if np.issubdtype(np.dtype(dtype), np.integer):
            feeds[name] = rng.integers(0, 8192, size=shape).astype(dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def name_seed(model, salt):
    return zlib.crc32(f"{model}/{salt}".encode())


# ---- nnroute -----------------------------------------------------------------------

def nnroute_help(nr, command):
    """The help text of `nnroute COMMAND` ('' when the command is missing): options
    that other engineers are still adding are passed only when the help names them."""
    rc, out, err = sh([nr, command, "--help"], 30)
    return "" if rc else out + err


def nnroute_run(nr, target, feeds, extra=(), timeout=600):
    """Runs `nnroute run TARGET` (a model or an engine) on feeds; returns
    ({output name: array}, None) or (None, error line). Output files are read back
    by the names in the folder, so the caller maps them to the model's outputs."""
    with tempfile.TemporaryDirectory(prefix="nr_quant_") as tmp:
        ind, outd = Path(tmp) / "in", Path(tmp) / "out"
        write_pair(ind, feeds)
        outd.mkdir()
        rc, so, se = sh([nr, "run", target, "--inputs-dir", ind, "--output-dir", outd,
                         *extra], timeout)
        if rc:
            return None, error_line(rc, se, so)
        return {p.stem: np.load(p) for p in outd.glob("*.npy")}, None


# ---- accuracy ----------------------------------------------------------------------

def rel_l2(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(got - ref) / den) if den > 0 else float(
        np.linalg.norm(got - ref))


def top1_disagreement(got, ref):
    """Fraction of rows (last axis = classes) whose argmax differs."""
    g = np.asarray(got).reshape(-1, np.shape(got)[-1]).argmax(1)
    r = np.asarray(ref).reshape(-1, np.shape(ref)[-1]).argmax(1)
    return float((g != r).mean())


def git_describe():
    return run_perf.git_describe()


def today():
    return time.strftime("%Y-%m-%d")
