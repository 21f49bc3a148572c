"""make_example.py - builds the bundled example, examples/tiny_cnn/.

The example is what a newcomer runs first (scripts/example.sh), so it must be small
enough to commit and exercise the common CNN operators: three Conv + BatchNorm + Relu
blocks with MaxPool, a global average pool and a Linear layer, 1x3x32x32 -> 1x10,
about 6,000 weights (27 KB). The exporter folds the first two BatchNorms into their
Conv; the third follows its Relu and stays a BatchNormalization node. It is written in
two steps because the two halves need different interpreters:

  /usr/bin/python3 bench/models/make_example.py export [DIR]
      Debian's torch: random weights (fixed seed), BatchNorm statistics re-estimated on
      random inputs, exported at opset 13 as DIR/model.onnx.
  .venv/bin/python bench/models/make_example.py reference [DIR]
      seeded standard-normal input DIR/input.npy and ONNX Runtime's output
      (CPU EP, all optimizations) DIR/expected/logits.npy.

DIR defaults to examples/tiny_cnn. `nnroute run DIR/model.onnx --inputs-dir DIR` reads
input.npy because the graph input is named "input"; DIR/expected/ holds what it should
write. Both steps are deterministic on one machine; re-running them after changing the
network is the only reason to touch the committed files.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "tiny_cnn"))
SEED = 1234
INPUT_SHAPE = (1, 3, 32, 32)


def export(outdir):
    import torch
    import torch.nn as nn

    def block(cin, cout, bn_last=False):
        # The exporter folds a BatchNorm that follows a Conv into its weights; the last
        # block normalizes after the Relu so one BatchNormalization node stays visible.
        layers = [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                  nn.ReLU()]
        return layers[0:1] + layers[2:0:-1] if bn_last else layers

    torch.manual_seed(SEED)
    model = nn.Sequential(*block(3, 8), nn.MaxPool2d(2), *block(8, 16), nn.MaxPool2d(2),
                          *block(16, 32, bn_last=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10))
    for m in model.modules():  # cumulative BatchNorm statistics over random batches
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(16, *INPUT_SHAPE[1:]))
    model.eval()
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(*INPUT_SHAPE),), path, opset_version=13,
                          input_names=["input"], output_names=["logits"])
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def reference(outdir):
    import numpy as np
    import onnxruntime as ort

    path = os.path.join(outdir, "model.onnx")
    x = np.random.default_rng(SEED).standard_normal(INPUT_SHAPE).astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    (logits,) = session.run(["logits"], {"input": x})
    os.makedirs(os.path.join(outdir, "expected"), exist_ok=True)
    np.save(os.path.join(outdir, "input.npy"), x)
    np.save(os.path.join(outdir, "expected", "logits.npy"), logits)
    print(f"onnxruntime {ort.__version__}: logits {logits.shape}, "
          f"argmax {int(logits.argmax())}, wrote {outdir}/input.npy and expected/logits.npy")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["export", "reference"])
    ap.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    args = ap.parse_args()
    export(args.dir) if args.step == "export" else reference(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
