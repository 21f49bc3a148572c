#!/usr/bin/env bash
# run.sh - the GPU test suite, for a machine with an NVIDIA GPU (CI has none):
#
#   tests/gpu/run.sh [BUILD_DIR] [MODELS_DIR]     (defaults: build, build/models)
#
# 1. BUILD_DIR/tests/nr_gpu_test: every CUDA tactic against the reference executor
#    (tests/gpu/gpu_ops.c), each test counted once.
# 2. The model suite: every MODELS_DIR/*.onnx (NR_GPU_MODELS filters with grep -E) runs
#    on the reference executor and through `nnroute run --device cuda` on the same
#    seeded inputs; exact fp32 (-cuda.precision@*=fp32) must match |gpu - ref| <=
#    1e-4 + 1e-3 |ref| everywhere (tests/models/compare.py); the default route (tf32
#    convolutions, exact products) must stay within a relative L2 error of
#    NR_GPU_TF32_TOL (default 2e-2); and the route with every Conv/Gemm/MatMul in fp16
#    (activations fp16 between the steps too: the CUDA plan's fp16 pass) must stay
#    within a relative L2 error of NR_GPU_FP16_TOL (default 3e-2: through 50
#    random-weight layers it measured 1.1e-2 on mobilenet_v2, 1.5e-2 on resnet50 and
#    8e-4 on bert_tiny).
# 3. A CUDA engine file of the first model: build -o, inspect (device fields), run
#    from the file (same outputs as the direct run of the default route), bench (a
#    finite GPU time reported).
# 4. `nnroute check-knobs --device cuda` on the first model: no dead CUDA knob value.
#
# Every check prints PASS/FAIL NAME; the last line is `N passed, N failed`, and the
# exit status is non-zero when anything failed. A check passes only on its command's
# exit status: a comparison that could not be made (a helper that crashed, a missing
# output, no models at all) is a failure, and NaN or infinity in an output passes only
# where the reference has the same value (tests/gpu/rel_l2.py, tests/models/compare.py).
# tests/gpu/check_run.sh runs this script on the CPU against a stub nnroute to keep
# that so. Environment: NR_PYTHON (an interpreter with numpy; default python3),
# NR_GPU_OUT (scratch; default $TMPDIR/nr-gpu-test).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$repo/build}
models=${2:-$repo/build/models}
python=${NR_PYTHON:-python3}
out=${NR_GPU_OUT:-${TMPDIR:-/tmp}/nr-gpu-test}
filter=${NR_GPU_MODELS:-.}
fp16_tol=${NR_GPU_FP16_TOL:-3e-2}
tf32_tol=${NR_GPU_TF32_TOL:-2e-2}
nnroute=$build/nnroute
passed=0 failed=0 failures=()

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); failures+=("$1"); }

mkdir -p "$out" || { echo "cannot create the scratch folder $out"; exit 1; }

# ---- 1. tactics ---------------------------------------------------------------------
if [[ -x $build/tests/nr_gpu_test ]]; then
  "$build/tests/nr_gpu_test" >"$out/ops.log" 2>&1
  ops_rc=$?
  grep '^FAIL' "$out/ops.log" | head -n 40
  line=$(tail -n 1 "$out/ops.log")
  # nr_gpu_test closes with `N passed, N failed, N skipped` (tests/unit/main.c); its
  # exit status must agree with that line.
  if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ [0-9]+\ skipped)?$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
    ((BASH_REMATCH[2] > 0)) && failures+=("nr_gpu_test")
    echo "nr_gpu_test: $line"
    if ((BASH_REMATCH[2] == 0 && ops_rc != 0)); then
      fail "nr_gpu_test (exit status $ops_rc after '$line')"
    fi
  else
    tail -n 5 "$out/ops.log"
    fail "nr_gpu_test (crashed: no summary line)"
  fi
else
  fail "nr_gpu_test (not built: configure with the CUDA backend)"
fi

# ---- 2. models ------------------------------------------------------------------------
# rel_l2_check NAME REFDIR OUTDIR TOL: one PASS/FAIL from tests/gpu/rel_l2.py's exit
# status (0 within TOL; 1 beyond it or a NaN/inf the reference lacks; 2 no comparison).
rel_l2_check() {
  local msg rc
  msg=$("$python" "$repo/tests/gpu/rel_l2.py" "$2" "$3" "$4" 2>&1)
  rc=$?
  msg=${msg//$'\n'/ }
  if ((rc == 0)); then
    pass "$1 (rel_l2 $msg)"
  elif ((rc == 1)); then
    fail "$1 (rel_l2 ${msg:-?}, tolerance $4)"
  else
    fail "$1 (rel_l2 could not compare: ${msg:-exit status $rc})"
  fi
}

first_model=
shopt -s nullglob
for model in "$models"/*.onnx; do
  name=$(basename "$model" .onnx)
  grep -Eq -- "$filter" <<<"$name" || continue
  first_model=${first_model:-$model}
  d=$out/$name
  if ! { rm -rf "$d" && mkdir -p "$d"; }; then
    fail "$name (cannot make the folder $d)"
    continue
  fi
  if ! "$nnroute" run "$model" --reference --output-dir "$d/ref" >"$d/ref.log" 2>&1; then
    tail -n 5 "$d/ref.log"
    fail "$name reference"
    continue
  fi
  start=$(date +%s.%N)
  if "$nnroute" run "$model" --device cuda --route '-cuda.precision@*=fp32' \
       --output-dir "$d/fp32" >"$d/fp32.log" 2>&1 &&
     "$python" "$repo/tests/models/compare.py" "$d/ref" "$d/fp32" --label "$name/cuda/fp32"; then
    pass "$name cuda fp32 ($(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s)"
  elif grep -q "has no instance\|applies to no node" "$d/fp32.log" &&
       "$nnroute" run "$model" --device cuda --output-dir "$d/fp32" >"$d/fp32.log" 2>&1 &&
       "$python" "$repo/tests/models/compare.py" "$d/ref" "$d/fp32" --label "$name/cuda/fp32"; then
    pass "$name cuda fp32 (no Conv/Gemm/MatMul: the default route)"
  else
    tail -n 8 "$d/fp32.log"
    fail "$name cuda fp32"
  fi
  if "$nnroute" run "$model" --device cuda --output-dir "$d/default" >"$d/default.log" 2>&1; then
    rel_l2_check "$name cuda default route" "$d/ref" "$d/default" "$tf32_tol"
  else
    tail -n 5 "$d/default.log"
    fail "$name cuda default route"
  fi
  if "$nnroute" run "$model" --device cuda --route '-cuda.precision@*=fp16' \
       --output-dir "$d/fp16" >"$d/fp16.log" 2>&1; then
    rel_l2_check "$name cuda fp16" "$d/ref" "$d/fp16" "$fp16_tol"
  elif grep -q "has no instance\|applies to no node" "$d/fp16.log"; then
    pass "$name cuda fp16 (no Conv/Gemm/MatMul to put in fp16)"
  else
    tail -n 5 "$d/fp16.log"
    fail "$name cuda fp16"
  fi
done

[[ -n $first_model ]] || fail "models (no $models/*.onnx matches NR_GPU_MODELS='$filter')"

# ---- 3. an engine file ----------------------------------------------------------------
if [[ -n $first_model ]]; then
  name=$(basename "$first_model" .onnx)
  d=$out/$name
  eng=$d/engine.nre
  if "$nnroute" build "$first_model" --device cuda -o "$eng" >"$d/build.log" 2>&1 &&
     "$nnroute" inspect "$eng" >"$d/inspect.log" 2>&1 &&
     grep -q "^device       cuda: " "$d/inspect.log" &&
     "$nnroute" run "$eng" --output-dir "$d/engine" >"$d/engine.log" 2>&1 &&
     "$python" "$repo/tests/models/compare.py" "$d/default" "$d/engine" --rtol 1e-5 --atol 1e-6 \
       --label "$name/engine-file" >/dev/null; then
    pass "$name cuda engine file (build, inspect, run)"
  else
    tail -n 5 "$d"/build.log "$d"/inspect.log "$d"/engine.log 2>/dev/null
    fail "$name cuda engine file"
  fi
  # cJSON writes a NaN or infinite time as null: the GPU time must be a finite number > 0.
  if "$nnroute" bench "$eng" --duration-ms 300 --json >"$d/bench.json" 2>"$d/bench.log" &&
     "$python" -c 'import json, math, sys
v = json.load(open(sys.argv[1])).get("gpu_median_ms")
sys.exit(0 if type(v) in (int, float) and math.isfinite(v) and v > 0 else 1)' \
       "$d/bench.json" 2>>"$d/bench.log"; then
    pass "$name cuda bench ($(tr -d '\n' <"$d/bench.json" | cut -c1-160))"
  else
    tail -n 3 "$d/bench.log"
    fail "$name cuda bench"
  fi
fi

# ---- 4. no dead CUDA knob values ------------------------------------------------------
# `nnroute check-knobs --device cuda` on the first model: every non-default value of
# every CUDA-build knob instance must change what the plan does (its exit status and
# closing `N passed, 0 failed` line).
if [[ -n $first_model ]]; then
  name=$(basename "$first_model" .onnx)
  d=$out/$name
  "$nnroute" check-knobs "$first_model" --device cuda >"$d/check-knobs.log" 2>&1
  knobs_rc=$?
  line=$(tail -n 1 "$d/check-knobs.log")
  if ((knobs_rc == 0)) && [[ $line =~ ^[0-9]+\ passed,\ 0\ failed$ ]]; then
    pass "$name cuda check-knobs ($line)"
  else
    grep -E '^(DEAD|FAIL)' "$d/check-knobs.log" | head -n 10
    fail "$name cuda check-knobs (${line:-no summary}; exit status $knobs_rc)"
  fi
fi

((failed > 0)) && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0 && passed > 0))
