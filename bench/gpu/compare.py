#!/usr/bin/env python3
"""compare.py - nnroute's CUDA engines against PyTorch on one GPU, in one run.

For each model (resnet50, mobilenet_v2, a BERT-base-like encoder: 12 layers, width 768,
12 heads, FFN 3072, sequence 128), batch size and precision it prints one row:

  eager        PyTorch eager, torch.no_grad, CUDA events around each forward
  graphs       the same forward captured once into torch.cuda.CUDAGraph and replayed
  autotune     torch.compile(mode="max-autotune") and its compile time (--max-autotune;
               off by default: it takes minutes per model; --autotune-rows
               MODEL:BATCH:PREC,... limits it to those rows)
  nr default   `nnroute bench --device cuda` of the ONNX export, default route (fp32
               rows: cuda.precision=auto, convolutions in TF32 and products exact, as
               PyTorch's defaults; fp16: every Conv/Gemm/MatMul at cuda.precision=fp16),
               its GPU time per inference (CUDA events) and host-visible latency
  nr tuned     `nnroute tune --device cuda` for --tune-s seconds (--tune-s 0: skipped;
               --tune-rows MODEL:BATCH:PREC,... limits it to those rows), then the
               tuned engine's bench, and the tuning wall time (the tuner's stderr, its
               phase log with each line's seconds since the start, goes to
               WORKDIR/tune_MODEL_bBATCH_PREC.log)

fp32 rows, like for like (--fp32-pairs; "-" in fp16 rows):
  graphs_strict  PyTorch with CUDA graphs under strict fp32 (cudnn.allow_tf32 and
               matmul.allow_tf32 both False)
  nr_exact     nnroute's GPU time with every Conv/Gemm/MatMul at cuda.precision=fp32
               (exact everywhere): the counterpart of graphs_strict

Times are medians in milliseconds. PyTorch fp16 runs the model in half precision
(model.half()); nnroute fp16 runs the products in fp16 with fp32 accumulation and keeps
the activations between steps in fp16 (the CUDA plan's fp16 pass), converting only at
the fp32 graph inputs and outputs and around steps with no fp16 kernel. Weights
are random (seeded); timing does not depend on them. Every framework sees the same
shapes; PyTorch's TF32 switches are left at their defaults (cuDNN convolutions may use
TF32 in fp32 rows, matmuls not) and printed.

    python3 bench/gpu/compare.py --nnroute build/nnroute [--models resnet50,...]
        [--batches 1,32] [--precisions fp32,fp16] [--iters 200] [--tune-s 0]
        [--tune-rows bert_base:1:fp16,...] [--max-autotune]
        [--autotune-rows bert_base:1:fp16,...] [--workdir DIR]
"""
import argparse
import inspect
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export_models  # noqa: E402  (BertLike, BatchNorm re-estimation)

SEQ = 128


def build_model(name):
    torch.manual_seed(20240601)
    if name == "bert_base":
        m = export_models.BertLike(vocab=30522, seq=SEQ, width=768, heads=12, ffn=3072,
                                   layers=12)
        return m.eval(), "tokens"
    import torchvision
    m = getattr(torchvision.models, name)(weights=None)
    return m.eval(), "image"


def example(kind, batch, device="cpu"):
    if kind == "tokens":
        return torch.randint(0, 30522, (batch, SEQ), device=device)
    return torch.randn(batch, 3, 224, 224, device=device)


def cuda_time(fn, iters, warmup=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def graphs_time(m, x, iters):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        m(x)
    return cuda_time(g.replay, iters)


def strict_graphs(model, kind, batch, iters):
    """PyTorch fp32 with CUDA graphs, TF32 off in cuDNN and in matmuls."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        m = model.cuda()
        with torch.no_grad():
            return graphs_time(m, example(kind, batch, "cuda"), iters)
    finally:
        model.cpu()
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def torch_rows(model, kind, batch, prec, iters, autotune):
    m = model.cuda()
    x = example(kind, batch, "cuda")
    if prec == "fp16":
        m = m.half()
        x = x if kind == "tokens" else x.half()
    out = {}
    with torch.no_grad():
        out["eager"] = cuda_time(lambda: m(x), iters)
        out["graphs"] = graphs_time(m, x, iters)
        if autotune:
            t0 = time.time()
            c = torch.compile(m, mode="max-autotune")
            c(x)
            torch.cuda.synchronize()
            out["autotune_compile_s"] = time.time() - t0
            out["autotune"] = cuda_time(lambda: c(x), iters)
    m.float().cpu()
    return out


def export_onnx(model, kind, batch, path):
    if os.path.exists(path):
        return
    x = example(kind, batch)
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (x,), path, opset_version=17, do_constant_folding=True,
                      input_names=["input"], output_names=["output"], **kw)


def nnroute_bench(nnroute, target, route, iters_ms):
    cmd = [nnroute, "bench", target, "--device", "cuda", "--json", "--duration-ms",
           str(iters_ms)]
    if route:
        cmd += ["--route", route]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1][:120]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def nnroute_tune(nnroute, onnx, prec, seconds, workdir):
    eng = onnx[:-5] + f"_{prec}_tuned.nre"
    cmd = [nnroute, "tune", onnx, "--device", "cuda", "--budget-time", str(seconds),
           "-o", eng, "--db", os.path.join(workdir, "tune.db")]
    if prec == "fp16":  # every product fp16; the knobs that exist for this model free
        free = ("-cuda.gemm.gelu=*" if "bert" in onnx
                else "-cuda.conv.layout@*=*")
        cmd += ["--routes", f"-cuda.precision@*=[fp16] {free} -cuda.gemm.tactic@*=* "
                            "-cuda.graphs=*",
                "--tolerance", "3e-2"]
    log = os.path.join(workdir, "tune_" + os.path.basename(onnx)[:-5] + f"_{prec}.log")
    t0 = time.time()
    with open(log, "w") as f:  # the tuner's stderr, each line stamped with seconds since start
        f.write(" ".join(cmd) + "\n")
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            f.write(f"[{time.time() - t0:7.1f} s] {line}")
        rc = p.wait()
    secs = time.time() - t0
    return (eng if rc == 0 else None), secs


def fmt(v):
    return f"{v:8.3f}" if isinstance(v, float) else f"{v!s:>8}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nnroute", default=os.path.join(HERE, "..", "..", "build", "nnroute"))
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--bench-ms", type=int, default=1000)
    ap.add_argument("--tune-s", type=int, default=0)
    ap.add_argument("--tune-rows", default="",
                    help="MODEL:BATCH:PREC rows to tune (default: every row)")
    ap.add_argument("--max-autotune", action="store_true")
    ap.add_argument("--autotune-rows", default="",
                    help="MODEL:BATCH:PREC rows to compile with max-autotune (default: every "
                         "row when --max-autotune is given)")
    ap.add_argument("--fp32-pairs", action="store_true",
                    help="fp32 rows: PyTorch strict fp32 and nnroute exact fp32 columns")
    ap.add_argument("--workdir", default="/tmp/nr-bench-gpu")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
          f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"# {' '.join(sys.argv)}")
    cols = ["model", "batch", "prec", "eager", "graphs", "autotune", "compile_s",
            "nr_gpu", "nr_host", "tuned_gpu", "tune_s", "graphs_strict", "nr_exact"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for name in a.models.split(","):
        model, kind = build_model(name)
        for batch in map(int, a.batches.split(",")):
            onnx = os.path.join(a.workdir, f"{name}_b{batch}.onnx")
            export_onnx(model, kind, batch, onnx)
            for prec in a.precisions.split(","):
                want_at = not a.autotune_rows or f"{name}:{batch}:{prec}" in a.autotune_rows.split(",")
                t = torch_rows(model, kind, batch, prec, a.iters,
                               (a.max_autotune or bool(a.autotune_rows)) and want_at)
                route = "-cuda.precision@*=fp16" if prec == "fp16" else ""
                nr = nnroute_bench(a.nnroute, onnx, route, a.bench_ms)
                tuned, tune_s = {}, "-"
                want_tune = not a.tune_rows or f"{name}:{batch}:{prec}" in a.tune_rows.split(",")
                if a.tune_s > 0 and want_tune:
                    eng, secs = nnroute_tune(a.nnroute, onnx, prec, a.tune_s, a.workdir)
                    tune_s = secs
                    tuned = nnroute_bench(a.nnroute, eng, "", a.bench_ms) if eng else {}
                strict, exact = "-", {}
                if a.fp32_pairs and prec == "fp32":
                    strict = strict_graphs(model, kind, batch, a.iters)
                    exact = nnroute_bench(a.nnroute, onnx, "-cuda.precision@*=fp32", a.bench_ms)
                row = [name, batch, prec, t["eager"], t["graphs"], t.get("autotune", "-"),
                       t.get("autotune_compile_s", "-"),
                       nr.get("gpu_median_ms", nr.get("error", "-")),
                       nr.get("median_ms", "-"), tuned.get("gpu_median_ms", "-"), tune_s,
                       strict, exact.get("gpu_median_ms", exact.get("error", "-"))]
                print("| " + " | ".join(fmt(v).strip() if not isinstance(v, str) else v
                                        for v in row) + " |", flush=True)


if __name__ == "__main__":
    main()
