#!/usr/bin/env bash
# example.sh - builds nnroute and runs the bundled example model end to end.
#
#   scripts/example.sh
#
# examples/tiny_cnn/ holds a small CNN (model.onnx, opset 13), its input (input.npy)
# and ONNX Runtime's output for that input (expected/logits.npy); see
# bench/models/make_example.py for how they were made. This script installs what is
# missing (without torch), builds build/nnroute, runs
#   nnroute run examples/tiny_cnn/model.onnx --inputs-dir examples/tiny_cnn \
#       --output-dir build/example-out
# and compares what it wrote with the expected output (rtol 1e-3, atol 1e-4). Then it
# tunes the model (`nnroute tune --search fast`: the default route and every one-knob
# change, each built and checked in its own process, the finalists confirmed against
# the default route), runs the tuned engine and compares its output the same way.
# NR_BUILD_DIR picks another build tree (default build), NR_JOBS the parallelism.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
example=examples/tiny_cnn
build=${NR_BUILD_DIR:-build}
out=$build/example-out

echo "== bootstrap"
NR_BOOTSTRAP_MODELS=0 bash scripts/bootstrap.sh
echo "== build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"${NR_JOBS:-2}" --target nnroute
echo "== run"
rm -rf "$out" && mkdir -p "$out"
set -x
"$build/nnroute" run "$example/model.onnx" --inputs-dir "$example" --output-dir "$out"
{ set +x; } 2>/dev/null
echo "== compare with ONNX Runtime"
compare() {
  if .venv/bin/python tests/models/compare.py "$example/expected" "$1" --show \
      --label "$example"; then
    echo "example: nnroute matches ONNX Runtime ($1/logits.npy)"
  else
    echo "example: nnroute's output differs from ONNX Runtime's (see above)"
    exit 1
  fi
}
compare "$out"
echo "== tune"
set -x
"$build/nnroute" tune "$example/model.onnx" --search fast --db "$out/tune.db" \
  -o "$out/tuned.engine" --report "$out/tune.json"
"$build/nnroute" run "$out/tuned.engine" --inputs-dir "$example" --output-dir "$out/tuned"
{ set +x; } 2>/dev/null
echo "== compare the tuned engine with ONNX Runtime"
compare "$out/tuned"
