#!/usr/bin/env bash
# check_cli_inputs.sh - what a new user's data does to `run`, `build`, `bench` and
# `tune` on a model whose inputs leave dimensions free.
#
#   NNROUTE=build/nnroute bash tests/cli/check_cli_inputs.sh
#
# The model is made here with the venv's onnx package: x: float[N,3,8,W] through a
# 3x3 Conv, + bias:0 float[1,4,1,1], Relu (two inputs, so input_K.pb order matters,
# and a name that needs the file-safe rule). Its data is written in the ONNX
# test-data layout (a folder of input_K.pb, and test_data_set_N/ folders) and as
# name-based .npy, with ONNX Runtime's outputs beside it. Checked: `run --inputs-dir`
# reads input_K.pb in graph-input order and the first test_data_set_N, lets a
# name-based file win, and refuses a missing, extra or contradicting file naming it
# and the input; `build` and `bench` take the free dims from a --calibration folder,
# an explicit --shape wins and data that contradicts it is refused, and without data
# `--shape` is still the way; `bench --inputs-dir` times on name-based .npy files; `tune --reference` takes them from the pairs (a short
# fast search, and --dry-run). Prints `N passed, N failed`; exit status non-zero when
# any check failed.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nnroute=$(realpath "${NNROUTE:-$repo/build/nnroute}")
py=${NR_PYTHON:-$repo/.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

ok() { echo "PASS $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
# expect NAME RC_WANTED NEEDLE... -- COMMAND...: COMMAND exits RC_WANTED and its stderr
# holds every NEEDLE.
expect() {
  local name=$1 want=$2
  shift 2
  local needles=()
  while [[ $1 != -- ]]; do needles+=("$1"); shift; done
  shift
  "$@" >"$work/out" 2>"$work/err"
  local rc=$? miss=""
  for n in "${needles[@]}"; do grep -qF -- "$n" "$work/err" || miss+=" '$n'"; done
  if [[ $rc -eq $want && -z $miss ]]; then
    ok "$name"
  else
    bad "$name (exit $rc, want $want${miss:+; stderr lacks$miss})"
    tail -n 5 "$work/err"
  fi
}
# same NAME GOT.npy WANT.npy: the arrays agree (shape, and values within 1e-4).
same() {
  if "$py" - "$2" "$3" <<'EOF'; then ok "$1"; else bad "$1"; fi
import sys, numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4)
if not ok:
    print(f"  {sys.argv[1]}: {got.shape} vs {want.shape}", file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}

# ---- the model and its data ------------------------------------------------------
if ! "$py" - "$work" <<'EOF'; then
import os, sys
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

w = sys.argv[1]
rng = np.random.default_rng(18)
W = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
     helper.make_node("Add", ["c", "bias:0"], ["a"]),
     helper.make_node("Relu", ["a"], ["y"])],
    "free_dims",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, "W"]),
     helper.make_tensor_value_info("bias:0", TensorProto.FLOAT, [1, 4, 1, 1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, "W"])], [W])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, f"{w}/model.onnx")
sess = ort.InferenceSession(f"{w}/model.onnx", providers=["CPUExecutionProvider"])

def folder(d, x, b, expect=True):
    os.makedirs(d, exist_ok=True)
    for k, a in enumerate((x, b)):
        with open(f"{d}/input_{k}.pb", "wb") as f:
            f.write(numpy_helper.from_array(a).SerializeToString())
    if expect:
        np.save(f"{d}/expected.npy", sess.run(None, {"x": x, "bias:0": b})[0])

def draw(*shape):
    return rng.standard_normal(shape).astype(np.float32)

folder(f"{w}/flat", draw(2, 3, 8, 5), draw(1, 4, 1, 1))
for n in range(2):
    folder(f"{w}/sets/test_data_set_{n}", draw(2, 3, 8, 5), draw(1, 4, 1, 1))
# A name-based x.npy beside input_K.pb wins for x; bias:0 still comes from input_1.pb.
folder(f"{w}/named", draw(1, 3, 8, 6), draw(1, 4, 1, 1), expect=False)
xn, bn = draw(1, 3, 8, 7), numpy_helper.to_array(onnx.load_tensor(f"{w}/named/input_1.pb"))
np.save(f"{w}/named/x.npy", xn)
np.save(f"{w}/named/expected.npy", sess.run(None, {"x": xn, "bias:0": bn})[0])
# Refusals: 4 channels where the model fixes 3; a third input; no input_1.pb.
folder(f"{w}/contra", draw(2, 4, 8, 5), draw(1, 4, 1, 1), expect=False)
folder(f"{w}/extra", draw(2, 3, 8, 5), draw(1, 4, 1, 1), expect=False)
with open(f"{w}/extra/input_2.pb", "wb") as f:
    f.write(numpy_helper.from_array(draw(1)).SerializeToString())
folder(f"{w}/missing", draw(2, 3, 8, 5), draw(1, 4, 1, 1), expect=False)
os.remove(f"{w}/missing/input_1.pb")
EOF
  echo "0 passed, 1 failed (could not make the test model with $py)"
  exit 1
fi
m=$work/model.onnx
nr=("$nnroute")

# ---- run --inputs-dir --------------------------------------------------------------
expect "run: input_K.pb folder" 0 -- "${nr[@]}" run "$m" --inputs-dir "$work/flat" \
  --output-dir "$work/o_flat"
same "run: input_K.pb folder matches ONNX Runtime" "$work/o_flat/y.npy" "$work/flat/expected.npy"
expect "run --reference: test_data_set_0 of a sets folder" 0 "test_data_set_0" -- \
  "${nr[@]}" run "$m" --reference --inputs-dir "$work/sets" --output-dir "$work/o_sets"
same "run: test_data_set_0 matches ONNX Runtime" "$work/o_sets/y.npy" \
  "$work/sets/test_data_set_0/expected.npy"
expect "run: a name-based file wins over input_0.pb" 0 -- "${nr[@]}" run "$m" \
  --inputs-dir "$work/named" --output-dir "$work/o_named"
same "run: x.npy and input_1.pb match ONNX Runtime" "$work/o_named/y.npy" \
  "$work/named/expected.npy"
expect "run: a missing input_1.pb names the file and the input" 1 "input_1.pb" "'bias:0'" -- \
  "${nr[@]}" run "$m" --inputs-dir "$work/missing" --output-dir "$work/o_err"
expect "run: an extra input_2.pb is refused" 1 "input_2.pb" "only 2 inputs" -- \
  "${nr[@]}" run "$m" --inputs-dir "$work/extra" --output-dir "$work/o_err"
expect "run: a file that contradicts a fixed dim names file and input" 1 \
  "contra/input_0.pb" "'x'" -- \
  "${nr[@]}" run "$m" --inputs-dir "$work/contra" --output-dir "$work/o_err"
expect "run: a file that contradicts --shape is refused" 1 "flat/input_0.pb" "'x'" -- \
  "${nr[@]}" run "$m" --inputs-dir "$work/flat" --shape x=1x3x8x5 --output-dir "$work/o_err"

# ---- build and bench: shapes from --calibration DIR ---------------------------------
expect "build: without data, --shape is still asked for" 1 "give it a shape" -- \
  "${nr[@]}" build "$m" -o "$work/none.nre"
expect "build --shape" 0 -- "${nr[@]}" build "$m" --shape x=1x3x8x5 -o "$work/shape.nre"
expect "build: shapes from a --calibration folder" 0 -- "${nr[@]}" build "$m" \
  --calibration "$work/sets" -o "$work/calib.nre"
expect "run: that engine on the input_K.pb folder" 0 -- "${nr[@]}" run "$work/calib.nre" \
  --inputs-dir "$work/flat" --output-dir "$work/o_engine"
same "run: the engine matches ONNX Runtime" "$work/o_engine/y.npy" "$work/flat/expected.npy"
expect "run: the engine refuses a file of another shape, naming it" 1 "x.npy" "'x'" -- \
  "${nr[@]}" run "$work/calib.nre" --inputs-dir "$work/named" --output-dir "$work/o_err"
expect "build: calibration data that contradicts --shape is refused" 1 "input_0.pb" "'x'" -- \
  "${nr[@]}" build "$m" --shape x=1x3x8x5 --calibration "$work/sets" -o "$work/bad.nre"
expect "build: contradicting calibration data is refused" 1 "contra/input_0.pb" "'x'" -- \
  "${nr[@]}" build "$m" --calibration "$work/contra" -o "$work/bad.nre"
expect "bench: shapes from a --calibration folder" 0 -- "${nr[@]}" bench "$m" \
  --calibration "$work/flat" --warmup-ms 5 --duration-ms 20 --min-iters 2 --json
if grep -q '"median_ms"' "$work/out"; then ok "bench: JSON printed"; else bad "bench: JSON printed"; fi
mkdir -p "$work/npys"
"$py" -c 'import sys, numpy as np; w = sys.argv[1]
np.save(f"{w}/npys/x.npy", np.load(f"{w}/named/x.npy"))
np.save(f"{w}/npys/bias_0.npy", np.full((1, 4, 1, 1), 0.5, np.float32))' "$work"
expect "bench --inputs-dir: a model takes its shapes from the files" 0 -- "${nr[@]}" bench \
  "$m" --inputs-dir "$work/npys" --warmup-ms 5 --duration-ms 20 --min-iters 2 --json
if grep -q '"median_ms"' "$work/out"; then ok "bench --inputs-dir: JSON printed"
else bad "bench --inputs-dir: JSON printed"; fi
expect "bench --inputs-dir: an engine refuses files of another shape, naming the input" 1 \
  "'x'" "$work/npys" -- "${nr[@]}" bench "$work/calib.nre" --inputs-dir "$work/npys" \
  --warmup-ms 5 --duration-ms 20 --min-iters 2
expect "bench --inputs-dir: a missing file is named" 1 "bias_0.npy" -- "${nr[@]}" bench \
  "$m" --inputs-dir "$work/named" --warmup-ms 5 --duration-ms 20 --min-iters 2

# ---- tune --reference --------------------------------------------------------------
expect "tune --dry-run --reference" 0 -- "${nr[@]}" tune "$m" --reference "$work/sets" \
  --dry-run --db "$work/dry.db"
expect "tune --reference: a short fast search" 0 -- "${nr[@]}" tune "$m" \
  --reference "$work/sets" --search fast --budget-builds 2 --budget-time 30 --threads 1 \
  --candidate-timeout 20 --screen-ms 5 --confirm-rounds 9 --db "$work/t.db" \
  -o "$work/tuned.nre" --report "$work/t.json"
expect "run: the tuned engine on test_data_set_1" 0 -- "${nr[@]}" run "$work/tuned.nre" \
  --inputs-dir "$work/sets/test_data_set_1" --output-dir "$work/o_tuned"
same "run: the tuned engine matches ONNX Runtime" "$work/o_tuned/y.npy" \
  "$work/sets/test_data_set_1/expected.npy"
expect "tune: contradicting reference data is refused" 1 "contra/input_0.pb" "'x'" -- \
  "${nr[@]}" tune "$m" --reference "$work/contra" --dry-run --db "$work/bad.db"
expect "tune: reference data that contradicts --shape is refused" 1 "input_0.pb" "'x'" -- \
  "${nr[@]}" tune "$m" --reference "$work/sets" --shape x=1x3x8x6 --search fast \
  --budget-builds 1 --db "$work/bad2.db"

echo "$passed passed, $failed failed"
((failed == 0))
