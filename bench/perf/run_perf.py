"""run_perf.py - the one command that measures nnroute against ONNX Runtime on the model
suite and writes docs/performance.md (issue 5's benchmark).

For every model and thread count it runs interleaved rounds - ONNX Runtime, the nnroute
default engine, the nnroute tuned engine, then again - and reports per system the median
of the round medians, per nnroute engine the median of the per-round ratios to ORT, the
geometric means of those ratios, and achieved GFLOP/s against the machine's FMA peak
measured in the same session (peak_flops.c).

Key decision: interleave instead of measuring each system in one block. The machine is
shared and its speed drifts by tens of percent within minutes (other builds, frequency,
noisy neighbours). Systems measured seconds apart in one round see the same machine, so
their ratio is stable even when the milliseconds are not; that is why ratios are taken
per round and only then summarised. ORT is timed in this process (ort_runner.py, the same
inputs bit for bit), nnroute in one `nnroute bench ENGINE --json` process per round,
whose JSON is in-process timing, so process start-up is not measured.

Engines: the default-route engine of each model and thread count is built once per run
(builds are quick and must reflect the current code). Tuned engines are expensive, so
they are cached in build/perf/tuned/<model>_t<N>.nre and reused while `nnroute inspect`
accepts them (the loader refuses an engine from another nnroute, knob schema or machine)
and they were tuned from the same model file (sha256); since the version names the
commit, a new commit tunes them again. Beside each, <model>_t<N>.tune.json records the
exact tune command, the nnroute version that ran it and the route it chose, and each
row's tuned.provenance carries it into the report. Without `nnroute tune` the column
says n/a. A model that fails to build, tune or run gets an error cell, never a crash.

usage: .venv/bin/python bench/perf/run_perf.py [--quick] [--models M,...] [--threads 1,2]
       [--rounds R] [--opsets 13,17] [--tune-budget S | --no-tune] [--output FILE] ...
Full mode (the default) is the issue's suite and writes docs/performance.md; --quick is
3 models at opset 13, and it and any other subset write build/perf/performance-<mode>.md
unless --output is given, so a developer's check never overwrites the committed table.

The model zoo (bench/models/zoo.py, zoo_packaged.py) is measured the same way:
`--models-dir build/zoo --models all` takes every NAME_opNN.onnx there. A zoo model's
sidecar NAME_opNN.zoo.json pins the shapes of inputs the file leaves dynamic; they are
passed to `nnroute build`/`tune` as --shape and given to ONNX Runtime. Where the zoo
saved a model's inputs (NAME_opNN/<input>.npy), both systems are timed on that data
(`nnroute bench --inputs-dir`) instead of random values, which would put token ids and
type ids out of range.

On a many-core host `--jobs N` measures N models at once, each in its own process pinned
(taskset) to its own max(--threads) cores; ratios are still taken per round inside each
process, and the parent measures the peak and writes the one report.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
import flops  # noqa: E402  (this folder's modules, found through the path above)
import ort_runner  # noqa: E402
import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SUITE = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
         "squeezenet1_1", "shufflenet_v2_x1_0", "bert_tiny", "mlp"]
# Rounds and durations are sized for this 2-core machine: full mode is 36 model/thread
# pairs x 7 rounds x ~3 s, about 15-20 minutes without tuning; quick mode about 2 minutes.
MODES = {
    "full": dict(models=SUITE, opsets=[13, 17], rounds=7, warmup_ms=250,
                 duration_ms=1000, min_iters=5, output=ROOT / "docs/performance.md"),
    "quick": dict(models=["mobilenet_v2", "resnet18", "bert_tiny"], opsets=[13], rounds=5,
                  warmup_ms=150, duration_ms=500, min_iters=5),
}
PEAK_ISA = "avx2+fma"   # the "% peak" reference: the ISA of nnroute's own kernels
BENCH_TIMEOUT_S = 300   # one `nnroute bench` round; a hung engine must not hang the run
BUILD_TIMEOUT_S = 900
T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.0f} s] {msg}", file=sys.stderr, flush=True)


def sh(cmd, timeout):
    """(rc, stdout, stderr); rc 124 on timeout, 127 when the program is missing."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout} s"
    except OSError as e:
        return 127, "", str(e)


def display(path):
    """A path as the doc shows it: relative to the repository when inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def first_error_line(rc, err, out=""):
    lines = [l for l in (err + "\n" + out).splitlines() if l.strip()]
    msg = lines[-1] if lines else "no message"
    return f"exit {rc}: {msg[:200]}"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 models, opset 13, 5 rounds")
    ap.add_argument("--models", help="comma list: suite names (all --opsets) or NAME_opNN; "
                                     "'all': every NAME_opNN.onnx in --models-dir")
    ap.add_argument("--opsets", help="comma list (default 13,17; quick 13)")
    ap.add_argument("--threads", default="1,2", help="comma list (default 1,2)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (full 7, quick 5)")
    ap.add_argument("--warmup-ms", type=float, help="per system per round")
    ap.add_argument("--duration-ms", type=float, help="per system per round")
    ap.add_argument("--min-iters", type=int, help="per system per round (default 5)")
    ap.add_argument("--seed", type=int, default=0, help="input seed (nnroute bench --seed)")
    ap.add_argument("--tune-budget", type=float, help="seconds, passed as --budget-time")
    ap.add_argument("--no-tune", action="store_true", help="leave the tuned column n/a")
    ap.add_argument("--retune", action="store_true", help="ignore cached tuned engines")
    ap.add_argument("--tune-models", help="comma list (suite names or NAME_opNN): tune only "
                                          "these; the other rows' tuned cells are n/a")
    ap.add_argument("--nnroute", default=os.environ.get("NNROUTE", str(ROOT / "build/nnroute")))
    ap.add_argument("--models-dir", default=str(ROOT / "build/models"))
    ap.add_argument("--work-dir", default=str(ROOT / "build/perf"), help="engines, caches")
    ap.add_argument("--peak-flops", help="nr_peak_flops binary (default: next to nnroute "
                                         "in bench/, else compiled into --work-dir)")
    ap.add_argument("--output", help="markdown file (full: docs/performance.md)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="measure models in N processes at once, each pinned to its own "
                         "max(--threads) cores (a many-core host); rounds stay interleaved "
                         "inside each process")
    ap.add_argument("--rows-out", help=argparse.SUPPRESS)  # a --jobs worker's rows
    a = ap.parse_args()
    mode = MODES["quick" if a.quick else "full"]
    a.opsets = [int(x) for x in a.opsets.split(",")] if a.opsets else mode["opsets"]
    if a.models == "all":
        a.models = ",".join(sorted(p.stem for p in Path(a.models_dir).glob("*_op*.onnx")))
        if not a.models:
            sys.exit(f"run_perf: no NAME_opNN.onnx files in {a.models_dir}")
    names = a.models.split(",") if a.models else mode["models"]
    a.models = [n if "_op" in n else f"{n}_op{o}" for n in names for o in
                ([None] if "_op" in n else a.opsets)]
    a.threads = [int(x) for x in a.threads.split(",")]
    a.tune_models = ({n if "_op" in n else f"{n}_op{o}" for n in a.tune_models.split(",")
                      for o in ([None] if "_op" in n else a.opsets)}
                     if a.tune_models else None)
    for key in ("rounds", "warmup_ms", "duration_ms", "min_iters"):
        if getattr(a, key) is None:
            setattr(a, key, mode[key])
    a.full_suite = (sorted(a.models) == sorted(f"{n}_op{o}" for n in SUITE for o in (13, 17))
                    and sorted(a.threads) == [1, 2])
    # Only a run of the whole suite may replace docs/performance.md unless asked to.
    a.mode = "quick" if a.quick else "full" if a.full_suite else "custom"
    if a.output is None:
        a.output = (MODES["full"]["output"] if a.mode == "full"
                    else Path(a.work_dir) / f"performance-{a.mode}.md")
    return a


# ---- the machine and the versions --------------------------------------------------------

def cpu_info():
    model, flags = "unknown", set()
    try:
        for line in open("/proc/cpuinfo"):
            key, _, val = line.partition(":")
            if key.strip() == "model name" and model == "unknown":
                model = val.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(val.split())
    except OSError:
        pass
    isa = " ".join(f for f in ("avx2", "fma", "avx512f") if f in flags) or "no avx2"
    return {"cpu_model": model, "cpus": os.cpu_count(), "isa": isa}


def git_describe():
    rc, out, _ = sh(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], 10)
    if rc:
        return "no git"
    rc2, dirty, _ = sh(["git", "-C", str(ROOT), "status", "--porcelain",
                        "--untracked-files=no"], 30)
    return f"commit {out.strip()}" + (", uncommitted changes" if dirty.strip() else "")


def versions(nr, sample_engine, git):
    _, out, _ = sh([nr, "--version"], 10)
    libs = "engine fingerprint n/a"
    if sample_engine:
        fp = sample_engine.get("fingerprint", {})
        libs = ", ".join(f"{k} {fp[k]}" for k in ("openblas", "onednn", "compiler") if k in fp)
    return {"nnroute": out.strip().replace("nnroute ", "") or "unknown",
            "nnroute_binary": display(nr), "nnroute_git": git,
            "nnroute_libs": libs,
            "onnxruntime": ort.__version__, "onnx": onnx.__version__,
            "numpy": np.__version__, "python": platform.python_version()}


def peak_binary(a):
    """nr_peak_flops from the build tree, or compiled here (it needs only a C compiler)."""
    if a.peak_flops:
        return a.peak_flops
    built = Path(a.nnroute).resolve().parent / "bench/nr_peak_flops"
    if built.exists():
        return str(built)
    src, exe = ROOT / "bench/perf/peak_flops.c", Path(a.work_dir) / "nr_peak_flops"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        cc = os.environ.get("CC", "cc")
        rc, _, err = sh([cc, "-O2", "-std=gnu17", "-o", str(exe), str(src), "-pthread"], 120)
        if rc:
            log(f"peak: could not compile {src}: {first_error_line(rc, err)}")
            return None
    return str(exe)


def measure_peak(exe, threads):
    if not exe:
        return None
    rc, out, err = sh([exe, "--threads", str(max(threads)), "--reps", "5", "--json"], 120)
    if rc:
        log(f"peak: {first_error_line(rc, err)}")
        return None
    return json.loads(out.strip().splitlines()[-1])


def merge_peaks(*runs):
    """Best of the runs per ISA and thread count: load only ever lowers a peak. Returns
    the merged results and {threads: GFLOP/s} of the AVX2 reference peak."""
    best = {}
    for run in filter(None, runs):
        for r in run["results"]:
            key = (r["isa"], r["threads"])
            best[key] = max(best.get(key, 0), r["gflops"])
    merged = [{"isa": i, "threads": t, "gflops": g} for (i, t), g in sorted(best.items())]
    return merged, {t: g for (i, t), g in best.items() if i == PEAK_ISA}


def peak_for(best, threads, cpus):
    """Measured peak at `threads`; unmeasured counts scale the 1-thread peak by cores."""
    if threads in best:
        return best[threads]
    return best[1] * min(threads, cpus) if 1 in best else None


# ---- engines -----------------------------------------------------------------------------

def inspect(nr, engine):
    """`nnroute inspect --json` of an engine, or None when the loader refuses it."""
    rc, out, _ = sh([nr, "inspect", str(engine), "--json"], 120)
    if rc:
        return None
    try:
        return json.loads(out)
    except ValueError:
        return None


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pinned_shapes(path):
    """{input: dims} from a zoo model's sidecar (NAME.zoo.json) for the inputs the model
    file leaves dynamic; {} for suite models, which have no sidecar."""
    side = Path(path).with_suffix(".zoo.json")
    if not side.exists():
        return {}
    pinned = json.loads(side.read_text()).get("inputs", {})
    model = onnx.load(str(path), load_external_data=False)
    dynamic = {vi.name for vi in model.graph.input
               if any(not (d.HasField("dim_value") and d.dim_value > 0)
                      for d in vi.type.tensor_type.shape.dim)}
    return {k: v for k, v in pinned.items() if k in dynamic and v}


def shape_args(path):
    return [x for k, v in pinned_shapes(path).items()
            for x in ("--shape", f"{k}={'x'.join(map(str, v))}")]


def safe_name(name):
    """nnroute's file-safe form of a tensor name (cli_util.c's nr_cli_safe_name)."""
    out = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" if out in (".", "..") else out


def data_dir(path, specs):
    """The folder of the model's own inputs (the zoo's NAME/<input>.npy beside
    NAME.onnx) when it holds every input, else None: both systems then time that data
    instead of random values (token ids and masks that random values put out of range)."""
    d = path.parent / path.stem
    ok = d.is_dir() and all((d / f"{safe_name(n)}.npy").exists() for n, _, _ in specs)
    return d if ok else None


def build_default(a, model, path, threads):
    """Returns (engine path, inspect dict, error)."""
    out = Path(a.work_dir) / "default" / f"{model}_t{threads}.nre"
    out.parent.mkdir(parents=True, exist_ok=True)
    rc, so, se = sh([a.nnroute, "build", str(path), "-o", str(out), "--threads",
                     str(threads)] + shape_args(path), BUILD_TIMEOUT_S)
    if rc:
        return None, None, "build " + first_error_line(rc, se, so)
    info = inspect(a.nnroute, out)
    return (out, info, None) if info else (None, None, "inspect refused the new engine")


def tune_support(a):
    """None when `nnroute tune` exists (with its help text kept), else why not."""
    if a.no_tune:
        return None, "skipped (--no-tune)"
    rc, out, err = sh([a.nnroute, "tune", "--help"], 30)
    if rc:
        return None, "n/a: `nnroute tune --help` fails (the tuner is not in this build)"
    return out + err, None


def tune_provenance(out, cmd=None, report_path=None, nnroute=None):
    """How a tuned engine was made, kept beside it (<engine>.tune.json): the exact
    command, the nnroute that ran it and the route it chose. With cmd None: read back
    (None when the engine predates the file)."""
    side = out.with_suffix(".tune.json")
    if cmd is None:
        try:
            return json.loads(side.read_text())
        except (OSError, ValueError):
            return None
    winner = None
    try:
        winner = json.loads(Path(report_path).read_text())["winner"]["route"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    _, ver, _ = sh([nnroute, "--version"], 10)
    prov = {"command": " ".join(shlex.quote(display(Path(x)) if os.path.isabs(x) else x)
                                for x in ["nnroute"] + cmd[1:]),
            "nnroute": ver.strip().replace("nnroute ", ""), "winner_route": winner}
    side.write_text(json.dumps(prov, indent=1) + "\n")
    return prov


def tuned_engine(a, help_text, model, path, threads):
    """Cached or freshly tuned engine: (engine path, cached?, error, provenance)."""
    out = Path(a.work_dir) / "tuned" / f"{model}_t{threads}.nre"
    out.parent.mkdir(parents=True, exist_ok=True)
    digest = sha256(path)
    if out.exists() and not a.retune:
        info = inspect(a.nnroute, out)
        if info and info.get("model_sha256") == digest and info.get("threads") == threads:
            log(f"tune {model} t{threads}: cached engine accepted")
            return out, True, None, tune_provenance(out)
        log(f"tune {model} t{threads}: cached engine stale, tuning again")
    tmp = out.with_suffix(".tmp.nre")
    cmd = [a.nnroute, "tune", str(path), "--threads", str(threads), "-o", str(tmp)]
    cmd += shape_args(path)
    if a.tune_budget:
        cmd += ["--budget-time", f"{a.tune_budget:g}"]
    # Options the tuner may not have yet are passed only when its help names them.
    if "--db" in help_text:
        cmd += ["--db", str(out.parent / "tune.db")]
    if "--report" in help_text:
        cmd += ["--report", str(out.with_suffix(".report.json"))]
    timeout = a.tune_budget * 3 + 300 if a.tune_budget else 1800
    t = time.monotonic()
    rc, so, se = sh(cmd, timeout)
    if rc or not tmp.exists():
        return None, False, "tune " + first_error_line(rc, se, so), None
    os.replace(tmp, out)  # only a finished engine takes the cache slot
    log(f"tune {model} t{threads}: {time.monotonic() - t:.0f} s")
    cmd[cmd.index(str(tmp))] = str(out)
    prov = tune_provenance(out, cmd, out.with_suffix(".report.json"), a.nnroute)
    return out, False, None, prov


# ---- measurement -------------------------------------------------------------------------

def nnroute_round(a, engine, threads, inputs):
    """One `nnroute bench` round: (median ms, error)."""
    cmd = [a.nnroute, "bench", str(engine), "--threads", str(threads), "--json",
           "--warmup-ms", f"{a.warmup_ms:g}", "--duration-ms", f"{a.duration_ms:g}",
           "--min-iters", str(a.min_iters), "--seed", str(a.seed)]
    if inputs:
        cmd += ["--inputs-dir", str(inputs)]
    rc, out, err = sh(cmd, BENCH_TIMEOUT_S)
    if rc:
        return None, "bench " + first_error_line(rc, err, out)
    try:
        return json.loads(out.strip().splitlines()[-1])["median_ms"], None
    except (ValueError, IndexError, KeyError):
        return None, "bench printed no JSON"


def ort_round(timer, a):
    try:
        return timer.measure(a.warmup_ms, a.duration_ms, a.min_iters)["median_ms"], None
    except Exception as e:  # an ORT failure is a cell, not the end of the run
        return None, f"ORT run: {str(e).splitlines()[0][:200]}"


def new_row(model, threads, flop_count):
    return {"model": model, "threads": threads, "flops": flop_count,
            "ort": {"rounds": []}, "default": {"rounds": []}, "tuned": {"rounds": []}}


def prepare(a, model, path, threads, tune_help, tune_why):
    """Engines and the ORT session of one model and thread count; errors go in the row."""
    row = new_row(model, threads, None)
    engine, info, err = build_default(a, model, path, threads)
    row["default"].update(engine=str(engine) if engine else None, error=err)
    if tune_help is None:
        row["tuned"].update(status="n/a", note=tune_why)
    elif a.tune_models is not None and model not in a.tune_models:
        row["tuned"].update(status="n/a", note="not in --tune-models")
    else:
        t_engine, cached, t_err, prov = tuned_engine(a, tune_help, model, path, threads)
        row["tuned"].update(engine=display(t_engine) if t_engine else None, cached=cached,
                            error=t_err, provenance=prov)
    pinned = pinned_shapes(path)
    specs = ([(i["name"], i["dtype"], i["shape"]) for i in info["inputs"]] if info
             else [(n, d, pinned.get(n, s))
                   for n, d, s in ort_runner.graph_input_specs(str(path))])
    timer = None
    inputs = data_dir(path, specs)
    row["inputs"] = str(inputs) if inputs else "random"
    try:
        feeds = ({n: np.load(inputs / f"{safe_name(n)}.npy") for n, _, _ in specs} if inputs
                 else ort_runner.bench_inputs(specs, a.seed))
        timer = ort_runner.OrtTimer(str(path), threads, feeds)
    except Exception as e:
        row["ort"]["error"] = f"ORT session: {str(e).splitlines()[0][:200]}"
    return row, timer, info


def measure_row(a, row, timer):
    """The interleaved rounds: ORT, default, tuned; a system that fails stops there."""
    threads = row["threads"]
    for _ in range(a.rounds):
        for s in report.SYSTEMS:
            d = row[s]
            if d.get("error") or d.get("status") == "n/a":
                continue
            if s == "ort":
                v, err = ort_round(timer, a)
            else:
                v, err = nnroute_round(a, ROOT / d["engine"], threads, row.get("inputs")
                                       if row.get("inputs") != "random" else None)
            d["rounds"].append(v)
            if err:
                d["error"] = err
    return report.summarize(row)


def progress(r, done, total, start):
    parts = []
    for s in report.SYSTEMS:
        ms, ratio = r[s]["median_ms"], r.get("ratio_" + s)
        parts.append(f"{s} " + ("error" if r[s].get("error") else "n/a" if ms is None
                                else f"{report.fmt_ms(ms)} ms")
                     + (f" ({ratio['median']:.2f}x)" if ratio else ""))
    eta = (time.monotonic() - start) / done * (total - done)
    log(f"[{done}/{total}] {r['model']} t{r['threads']}: {', '.join(parts)}; "
        f"about {eta / 60:.1f} min left")


def run_all(a, tune_help, tune_why):
    rows, sample = [], None
    configs = [(m, t) for m in a.models for t in a.threads]
    counts, start = {}, time.monotonic()
    for i, (model, threads) in enumerate(configs, 1):
        path = Path(a.models_dir) / f"{model}.onnx"
        if not path.exists():
            row = new_row(model, threads, None)
            for s in report.SYSTEMS:
                row[s]["error"] = f"no {path} (run bench/models/export_models.py)"
            rows.append(report.summarize(row))
            progress(row, i, len(configs), start)
            continue
        if model not in counts:
            counts[model] = count_flops(path)
        try:
            row, timer, info = prepare(a, model, path, threads, tune_help, tune_why)
            sample = sample or info
            row["flops"] = counts[model]
            rows.append(measure_row(a, row, timer))
            del timer  # free the session's memory before the next model
            drop_default_engine(row)
        except Exception as e:  # a harness bug on one model still leaves the others' table
            row = new_row(model, threads, counts[model])
            for s in report.SYSTEMS:
                row[s]["error"] = f"harness: {type(e).__name__}: {str(e)[:200]}"
            rows.append(report.summarize(row))
        progress(rows[-1], i, len(configs), start)
    return rows, sample


def drop_default_engine(row):
    """Default engines are rebuilt every run, so keeping them would only hold ~2 GB of
    disk for the full suite; the row keeps where it was built, relative to the repo."""
    engine = row["default"].get("engine")
    if engine:
        Path(engine).unlink(missing_ok=True)
        row["default"]["engine"] = display(engine)


def count_flops(path):
    try:
        c = flops.count_flops(str(path))
    except Exception as e:  # no FLOP count only costs the GFLOP/s columns
        log(f"flops {path.name}: {type(e).__name__}: {str(e)[:200]}")
        return None
    if c["skipped"]:
        log(f"flops {path.name}: {len(c['skipped'])} nodes with unknown shapes not counted")
    return c["flops"]


def run_jobs(a):
    """--jobs: the models dealt round-robin to a.jobs worker processes, each pinned with
    taskset to its own max(threads) cores; returns their rows and one inspect sample."""
    width = max(a.threads)
    cpus = sorted(os.sched_getaffinity(0))
    if a.jobs * width > len(cpus):
        sys.exit(f"run_perf: --jobs {a.jobs} x {width} threads needs {a.jobs * width} CPUs; "
                 f"this process may use {len(cpus)}")
    argv = [x for x in sys.argv[1:]]
    for opt in ("--jobs", "--models", "--work-dir", "--output"):
        while opt in argv:
            i = argv.index(opt)
            del argv[i:i + 2]
    procs = []
    for j in range(a.jobs):
        models = a.models[j::a.jobs]
        if not models:
            continue
        work = Path(a.work_dir) / f"job{j}"
        work.mkdir(parents=True, exist_ok=True)
        mine = ",".join(str(c) for c in cpus[j * width:(j + 1) * width])
        cmd = ["taskset", "-c", mine, sys.executable, __file__] + argv + [
            "--models", ",".join(models), "--work-dir", str(work),
            "--rows-out", str(work / "rows.json")]
        log(f"job {j}: cores {mine}: {len(models)} models")
        procs.append((subprocess.Popen(cmd), work / "rows.json"))
    rows, sample = [], None
    for proc, out in procs:
        proc.wait()
        if proc.returncode or not out.exists():
            sys.exit(f"run_perf: a --jobs worker failed (exit {proc.returncode})")
        got = json.loads(out.read_text())
        rows += got["rows"]
        sample = sample or got["sample"]
    order = {m: i for i, m in enumerate(a.models)}
    rows.sort(key=lambda r: (order.get(r["model"], 0), r["threads"]))
    return rows, sample


def main():
    a = parse_args()
    Path(a.work_dir).mkdir(parents=True, exist_ok=True)
    rc, _, _ = sh([a.nnroute, "bench", "--help"], 30)
    if rc:
        sys.exit(f"run_perf: {a.nnroute} has no working `bench` command; build nnroute "
                 "first (or pass --nnroute / set NNROUTE)")
    if a.rows_out:  # a --jobs worker: measure, hand the rows back, nothing else
        rows, sample = run_all(a, *tune_support(a))
        Path(a.rows_out).write_text(json.dumps({"rows": rows, "sample": sample}))
        return
    machine = cpu_info()
    if max(a.threads) > (machine["cpus"] or 1):
        log(f"warning: {max(a.threads)} threads on {machine['cpus']} CPUs oversubscribes")
    machine["load_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    git = git_describe()  # at the start: others may commit while a full run goes on
    peak_exe = peak_binary(a)
    peak_start = measure_peak(peak_exe, a.threads)
    floor = {t: ort_runner.call_floor_ms(t) for t in a.threads}
    tune_help, tune_why = tune_support(a)
    log(f"{len(a.models)} models x threads {a.threads}, {a.rounds} rounds; tuned: "
        f"{tune_why or 'nnroute tune'}")
    if tune_help is not None:
        budget = f"{a.tune_budget:g} s" if a.tune_budget else "the tuner's default budget"
        log(f"engines not cached in {display(Path(a.work_dir) / 'tuned')}/ are tuned first, "
            f"each for up to {budget}; --no-tune skips the column")
    rows, sample = run_jobs(a) if a.jobs > 1 else run_all(a, tune_help, tune_why)
    peak, best = merge_peaks(peak_start, measure_peak(peak_exe, a.threads))
    peak = {"isa_reference": PEAK_ISA, "results": peak}
    machine["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    tune_desc = tune_why or ("nnroute tune, " + (f"--budget-time {a.tune_budget:g}"
                             if a.tune_budget else "its default budget") +
                             f", cached in {display(Path(a.work_dir) / 'tuned')}/" +
                             " (each row's tuned.provenance: the exact command, the "
                             "nnroute version and the route chosen)" +
                             (f"; only {', '.join(sorted(a.tune_models))} (--tune-models)"
                              if a.tune_models is not None else ""))
    entry = os.environ.get("NR_PERF_ENTRY", "bench/perf/run_perf.py")
    meta = {
        "mode": a.mode, "full_suite": a.full_suite,
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "command": " ".join(([f"NNROUTE_ISA={shlex.quote(os.environ['NNROUTE_ISA'])}"]
                             if os.environ.get("NNROUTE_ISA") else []) +
                            [entry] + [shlex.quote(x) for x in sys.argv[1:]]),
        "machine": machine, "versions": versions(a.nnroute, sample, git),
        "settings": {"threads": a.threads, "jobs": a.jobs, "rounds": a.rounds,
                     "warmup_ms": a.warmup_ms,
                     "duration_ms": a.duration_ms, "min_iters": a.min_iters,
                     "seed": a.seed, "tune": tune_desc},
        "peak": peak, "ort_call_floor_ms": floor,
        "wall_s": round(time.monotonic() - T0),
    }
    peaks = {t: peak_for(best, t, machine["cpus"] or 1) for t in a.threads}
    gm = report.geomeans(rows, a.threads)
    text = report.report_text(meta, rows, gm, peaks)
    print(text)
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    report.write_doc(a.output, meta, text, rows, gm)
    log(f"wrote {a.output} ({meta['wall_s']} s)")


if __name__ == "__main__":
    main()
