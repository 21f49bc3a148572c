#!/usr/bin/python3
"""export_models.py - writes the real-model suite as ONNX files.

The suite is what nnroute is checked against as a whole compiler: seven torchvision
image classifiers, a small BERT-like encoder and an MLP, each exported at opset 13 and
at opset 17 as OUTDIR/<name>_op<N>.onnx (batch 1, images 1x3x224x224).

Weights are random (fixed torch seed), never downloaded. Random weights alone give
activations that explode or vanish through fifty layers, which would make a numerical
comparison meaningless, so every BatchNorm's running statistics are re-estimated on
random normal inputs first (train mode, momentum=None for a plain cumulative average,
a few forward passes under no_grad), then the model is put in eval mode and exported.

Run with Debian's interpreter, which carries python3-torch 1.13 and torchvision 0.14:
    /usr/bin/python3 bench/models/export_models.py OUTDIR [--only NAME,...] [--opsets 13,17]
A model whose file already exists is skipped unless --force is given.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

SEED = 20240601
OPSETS = (13, 17)
IMAGE_SHAPE = (1, 3, 224, 224)
BN_BATCHES = 4      # forward passes used to re-estimate BatchNorm statistics
BN_BATCH_SIZE = 8


class EncoderLayer(nn.Module):
    """Post-norm transformer encoder layer written out by hand, as BERT has it, so the
    exported graph shows the plain MatMul/Softmax/LayerNorm/GELU pattern rather than
    whatever fused path nn.TransformerEncoderLayer picks."""

    def __init__(self, width, heads, ffn):
        super().__init__()
        self.heads = heads
        self.head_dim = width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm1 = nn.LayerNorm(width, eps=1e-12)
        self.ffn_in = nn.Linear(width, ffn)
        self.ffn_out = nn.Linear(ffn, width)
        self.norm2 = nn.LayerNorm(width, eps=1e-12)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(x).split(w, dim=-1)
        q = q.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(scores.softmax(dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(b, s, w)
        x = self.norm1(x + self.proj(ctx))
        return self.norm2(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class BertLike(nn.Module):
    """Token + learned position embeddings, LayerNorm, N encoder layers; returns the
    last hidden states (1 x seq x width)."""

    def __init__(self, vocab=8192, seq=128, width=256, heads=4, ffn=1024, layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq, width)
        self.norm = nn.LayerNorm(width, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(width, heads, ffn) for _ in range(layers))
        self.register_buffer("positions", torch.arange(seq).unsqueeze(0), persistent=False)
        for p in self.parameters():  # BERT's initializer range keeps activations sane
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, input_ids):
        x = self.norm(self.tok(input_ids) + self.pos(self.positions))
        for layer in self.layers:
            x = layer(x)
        return x


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def vision(ctor):
    return lambda: ctor(weights=None)


# name -> (constructor, input kind); IO_NAMES maps the kind to graph input/output names
BERT_VOCAB, BERT_SEQ = 8192, 128
MODELS = {
    "resnet18": (vision(torchvision.models.resnet18), "image"),
    "resnet50": (vision(torchvision.models.resnet50), "image"),
    "mobilenet_v2": (vision(torchvision.models.mobilenet_v2), "image"),
    "mobilenet_v3_small": (vision(torchvision.models.mobilenet_v3_small), "image"),
    "efficientnet_b0": (vision(torchvision.models.efficientnet_b0), "image"),
    "squeezenet1_1": (vision(torchvision.models.squeezenet1_1), "image"),
    "shufflenet_v2_x1_0": (vision(torchvision.models.shufflenet_v2_x1_0), "image"),
    "bert_tiny": (lambda: BertLike(vocab=BERT_VOCAB, seq=BERT_SEQ), "tokens"),
    "mlp": (mlp, "vector"),
}
IO_NAMES = {
    "image": (["input"], ["logits"]),
    "tokens": (["input_ids"], ["last_hidden_state"]),
    "vector": (["input"], ["logits"]),
}


def example_input(kind, batch=1):
    if kind == "image":
        return torch.randn(batch, *IMAGE_SHAPE[1:])
    if kind == "tokens":
        return torch.randint(0, BERT_VOCAB, (batch, BERT_SEQ), dtype=torch.int64)
    return torch.randn(batch, 784)


def reestimate_batchnorm(model, kind):
    """Replaces the BatchNorm running statistics by averages over random batches, so the
    eval-mode network sees normalized activations at every depth."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average over all batches seen
    model.train()
    with torch.no_grad():
        for _ in range(BN_BATCHES):
            model(example_input(kind, BN_BATCH_SIZE))


def build(name):
    ctor, kind = MODELS[name]
    torch.manual_seed(SEED)
    model = ctor()
    reestimate_batchnorm(model, kind)
    model.eval()
    return model, kind


def export(model, kind, path, opset):
    inputs, outputs = IO_NAMES[kind]
    torch.manual_seed(SEED + 1)
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (example_input(kind),), tmp, opset_version=opset,
                          input_names=inputs, output_names=outputs,
                          do_constant_folding=True)
    os.replace(tmp, path)  # a killed export never leaves a half file behind


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", help="comma-separated model names (default: all)")
    ap.add_argument("--opsets", default=",".join(map(str, OPSETS)))
    ap.add_argument("--force", action="store_true", help="re-export existing files")
    args = ap.parse_args()

    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"export_models: unknown model(s) {', '.join(unknown)}; "
                 f"known: {', '.join(MODELS)}")
    opsets = [int(o) for o in args.opsets.split(",")]
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    for name in names:
        todo = [o for o in opsets
                if args.force or not os.path.exists(f"{args.outdir}/{name}_op{o}.onnx")]
        if not todo:
            print(f"{name}: up to date")
            continue
        t0 = time.time()
        model, kind = build(name)
        for opset in todo:
            path = f"{args.outdir}/{name}_op{opset}.onnx"
            export(model, kind, path, opset)
            print(f"{name}_op{opset}: {os.path.getsize(path) / 1e6:.1f} MB")
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
