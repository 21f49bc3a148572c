#!/usr/bin/python3
"""fashion_mnist.py - trains the Fashion-MNIST classifier that gives issue 6 a real
task metric (top-1 accuracy) and writes everything the quantization benches read.

The network has exactly four layers whose precision nnroute can change - two Conv and
two Gemm (Conv-ReLU-MaxPool twice, then Gemm-ReLU-Gemm) - so the same model serves
the top-1 benchmark (bench/quant/top1.py) and the 16-route experiment
(bench/quant/tradeoff.sh). Key decision: the data comes from Debian's
dataset-fashion-mnist package and the batch dimension is exported as symbolic
("batch"), because one model then runs at whatever batch a command asks for with
`--shape input=Nx1x28x28`; the reference pairs fix the batch the tuner uses
(PAIR_BATCH images per pair, so a top-1 loss counts in steps of 1/PAIR_BATCH).

Outputs in OUTDIR (default build/models/fashion_mnist):
  fashion_mnist.onnx         opset 13; input `input` Nx1x28x28 float32 (pixels / 255),
                             output `logits` Nx10
  test_images.npy            10000x1x28x28 float32, the test set, same scaling
  test_labels.npy            10000 int64
  calib/test_data_set_K/input.npy    K < --calib-pairs; training images (the tuner's
                             --reference folder, also its int8 calibration inputs)
  holdout/test_data_set_K/input.npy  K < --holdout-pairs; test images (--holdout)
  train.json                 settings, per-epoch loss, torch's own test accuracy, times
The pair folders hold inputs only: nnroute computes their reference outputs with its
reference executor, so a loss of 0 means "agrees with nnroute's own fp32 oracle".
Calibration and holdout images never overlap (different sets); which training images
become calibration pairs is drawn with the seed.

Run with Debian's interpreter (python3-torch), on at most two threads:
    /usr/bin/python3 bench/models/fashion_mnist.py [OUTDIR] [--epochs 6] [--threads 2]
An OUTDIR whose train.json matches the settings is left alone unless --force is given.
Training is seeded (torch and numpy) and runs under torch.use_deterministic_algorithms,
so the same machine and thread count should give the same weights; that has not been
checked bit for bit, and another CPU or torch build may round differently.
"""
import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = Path("/usr/share/datasets/fashion-mnist")  # dataset-fashion-mnist's files
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot"]
PAIR_BATCH = 256
ROOT = Path(__file__).resolve().parents[2]


class FashionCnn(nn.Module):
    """Four precision sites: conv1, conv2, fc1, fc2 (ONNX names /conv1/Conv, ...)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)
        self.drop = nn.Dropout(0.3)  # training only; the export is in eval mode

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.drop(F.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


def read_idx(path, magic, ndim):
    """An IDX file (the MNIST format) as a uint8 array, its header checked."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    head = np.frombuffer(raw, ">u4", count=1 + ndim)
    if head[0] != magic:
        sys.exit(f"{path}: magic {head[0]:#x}, expected {magic:#x} (not an IDX file?)")
    dims = [int(d) for d in head[1:]]
    body = np.frombuffer(raw, np.uint8, offset=4 * (1 + ndim))
    if body.size != int(np.prod(dims)):
        sys.exit(f"{path}: header says {dims}, the file holds {body.size} bytes")
    return body.reshape(dims)


def load_split(kind):
    """(images Nx1x28x28 float32 in [0, 1], labels N int64) of 'train' or 't10k'."""
    img = DATA_DIR / f"{kind}-images-idx3-ubyte.gz"
    lab = DATA_DIR / f"{kind}-labels-idx1-ubyte.gz"
    if not img.exists():
        sys.exit(f"{img} is missing: install Debian's dataset-fashion-mnist "
                 "(scripts/bootstrap.sh does)")
    x = read_idx(img, 0x803, 3).astype(np.float32)[:, None] / np.float32(255)
    y = read_idx(lab, 0x801, 1).astype(np.int64)
    if len(x) != len(y):
        sys.exit(f"{kind}: {len(x)} images but {len(y)} labels")
    return x, y


def evaluate(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(torch.from_numpy(x[i:i + batch]))
            correct += int((logits.argmax(1).numpy() == y[i:i + batch]).sum())
    return correct / len(x)


def train(a, x, y, xt, yt):
    torch.manual_seed(a.seed)
    model = FashionCnn()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs)
    gen = np.random.default_rng(a.seed)
    history = []
    for epoch in range(a.epochs):
        model.train()
        t0, total, order = time.monotonic(), 0.0, gen.permutation(len(x))
        for i in range(0, len(x), a.batch):
            idx = order[i:i + a.batch]
            xb = torch.from_numpy(x[idx])
            flip = torch.from_numpy(gen.random(len(idx)) < 0.5)  # horizontal flips
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
            loss = F.cross_entropy(model(xb), torch.from_numpy(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        sched.step()
        acc = evaluate(model, xt, yt)
        history.append({"epoch": epoch + 1, "train_loss": total / len(x),
                        "test_top1": acc, "seconds": time.monotonic() - t0})
        print(f"epoch {epoch + 1}/{a.epochs}: loss {total / len(x):.4f}, test top-1 "
              f"{acc:.4f}, {time.monotonic() - t0:.0f} s", flush=True)
    return model.eval(), history


def export(model, path):
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), str(path), opset_version=13,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=True)


def write_pairs(folder, images, count):
    """count folders test_data_set_K/input.npy of PAIR_BATCH images each."""
    for k in range(count):
        d = folder / f"test_data_set_{k}"
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "input.npy", np.ascontiguousarray(images[k * PAIR_BATCH:
                                                             (k + 1) * PAIR_BATCH]))


def settings(a):
    return {"seed": a.seed, "epochs": a.epochs, "batch": a.batch, "lr": a.lr,
            "threads": a.threads, "calib_pairs": a.calib_pairs,
            "holdout_pairs": a.holdout_pairs, "pair_batch": PAIR_BATCH}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?", default=str(ROOT / "build/models/fashion_mnist"))
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (shared machine)")
    ap.add_argument("--calib-pairs", type=int, default=4,
                    help=f"reference/calibration pairs of {PAIR_BATCH} training images")
    ap.add_argument("--holdout-pairs", type=int, default=2,
                    help=f"holdout pairs of {PAIR_BATCH} test images")
    ap.add_argument("--force", action="store_true", help="train again even when current")
    return ap.parse_args()


def main():
    a = parse_args()
    out = Path(a.outdir)
    meta_path = out / "train.json"
    if not a.force and meta_path.exists() and (out / "fashion_mnist.onnx").exists():
        if json.loads(meta_path.read_text()).get("settings") == settings(a):
            print(f"{out}: up to date (--force trains again)")
            return 0
    if a.calib_pairs < 1 or a.holdout_pairs < 1 or a.holdout_pairs * PAIR_BATCH > 10000:
        sys.exit("need at least one calibration and one holdout pair, and at most "
                 f"{10000 // PAIR_BATCH} holdout pairs")
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    x, y = load_split("train")
    xt, yt = load_split("t10k")
    t0 = time.monotonic()
    model, history = train(a, x, y, xt, yt)
    train_s = time.monotonic() - t0

    out.mkdir(parents=True, exist_ok=True)
    for sub in ("calib", "holdout"):
        for old in (out / sub).glob("test_data_set_*/input.npy"):
            old.unlink()  # a smaller --calib-pairs must not leave stale pairs behind
    export(model, out / "fashion_mnist.onnx")
    np.save(out / "test_images.npy", xt)
    np.save(out / "test_labels.npy", yt)
    pick = np.random.default_rng(a.seed + 1).permutation(len(x))[:a.calib_pairs * PAIR_BATCH]
    write_pairs(out / "calib", x[pick], a.calib_pairs)
    # Holdout: the first test images, in order; the calibration images are training
    # images, so the two sets cannot share an image.
    write_pairs(out / "holdout", xt, a.holdout_pairs)
    meta = {"settings": settings(a), "torch": torch.__version__,
            "train_seconds": round(train_s, 1), "test_top1_torch": history[-1]["test_top1"],
            "history": history, "classes": CLASSES,
            "calib_train_indices": pick.tolist(),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{out}: torch test top-1 {meta['test_top1_torch']:.4f} after {train_s:.0f} s of "
          f"training; {a.calib_pairs} calibration and {a.holdout_pairs} holdout pairs of "
          f"{PAIR_BATCH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
