#!/usr/bin/env python3
"""export_legacy.py - bench/models/export_models.py on a GPU machine's newer PyTorch.

The GPU machines carry PyTorch 2.9+, whose torch.onnx.export defaults to the dynamo
exporter (opset 18 and up, a different graph). The model suite is defined by the
TorchScript exporter at opsets 13 and 17, so this wrapper passes dynamo=False to every
export and otherwise runs export_models.py unchanged (same seeds, same BatchNorm
re-estimation, same file names). Where the legacy exporter is gone it says so and
exits non-zero.

    python3 bench/gpu/export_legacy.py OUTDIR [export_models.py options]
"""
import inspect
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export_models  # noqa: E402

_export = torch.onnx.export


def legacy_export(*args, **kwargs):
    if "dynamo" in inspect.signature(_export).parameters:
        kwargs.setdefault("dynamo", False)
    return _export(*args, **kwargs)


if __name__ == "__main__":
    torch.onnx.export = legacy_export
    sys.argv[0] = "export_models.py"
    try:
        export_models.main()
    except Exception as e:  # a torch without the TorchScript exporter
        print(f"export_legacy: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
