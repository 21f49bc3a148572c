#!/usr/bin/env bash
# check_models.sh - runs the real-model suite through `nnroute run` and compares every
# output with ONNX Runtime's (tests/models/compare.py, rtol 1e-3, atol 1e-4).
#
#   tests/models/check_models.sh [MODELS_DIR]        (default: build/models)
#
# MODELS_DIR holds <model>.onnx, <model>/<input>.npy and <model>/ref/<output>.npy, as
# bench/models/export_models.py and ort_reference.py write them. One model failing
# (crash, timeout, wrong numbers) does not stop the others; the last line is
# `N passed, N failed` and the exit status is non-zero when anything failed.
#
# Environment: NNROUTE (the binary; default build/nnroute), NR_PYTHON (an interpreter
# with numpy; default .venv/bin/python), NR_MODELS_OUT (where outputs go; default
# MODELS_DIR/../models-out), NR_MODELS_FILTER (a grep -E pattern on model names),
# NR_MODEL_TIMEOUT (seconds per model run; default 600), NR_RTOL, NR_ATOL, NR_RUN_ARGS
# (extra arguments for `nnroute run`, e.g. "--reference" or "--route '...'").
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
models=${1:-$repo/build/models}
nnroute=${NNROUTE:-$repo/build/nnroute}
python=${NR_PYTHON:-$repo/.venv/bin/python}
outroot=${NR_MODELS_OUT:-$(dirname "$models")/models-out}
filter=${NR_MODELS_FILTER:-.}
limit=${NR_MODEL_TIMEOUT:-600}
rtol=${NR_RTOL:-1e-3}
atol=${NR_ATOL:-1e-4}
read -r -a run_args <<<"${NR_RUN_ARGS:-}"

for need in "$nnroute" "$python"; do
  if [[ ! -x $need ]]; then
    echo "check_models: $need is missing (build nnroute and run scripts/bootstrap.sh first)"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
shopt -s nullglob
files=("$models"/*.onnx)
if ((${#files[@]} == 0)); then
  echo "check_models: no models in $models (run bench/models/export_models.py first)"
  echo "0 passed, 1 failed"
  exit 1
fi

passed=0 failed=0 failures=()
for model in "${files[@]}"; do
  name=$(basename "$model" .onnx)
  grep -Eq -- "$filter" <<<"$name" || continue
  out=$outroot/$name
  rm -rf "$out" && mkdir -p "$out"
  echo "== $name"
  start=$(date +%s.%N)
  timeout "$limit" "$nnroute" run "$model" "${run_args[@]}" --inputs-dir "$models/$name" --output-dir "$out" \
    >"$out/run.log" 2>&1
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if ((rc != 0)); then
    why="exit status $rc"
    ((rc == 124)) && why="timed out after ${limit} s"
    echo "  nnroute run failed ($why, ${secs} s); last lines of $out/run.log:"
    tail -n 15 "$out/run.log" | sed 's/^/    /'
    echo "FAIL $name"
    failed=$((failed + 1)) failures+=("$name")
    continue
  fi
  echo "  nnroute run: ${secs} s"
  if "$python" "$repo/tests/models/compare.py" "$models/$name/ref" "$out" \
      --rtol "$rtol" --atol "$atol" --label "$name"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1)) failures+=("$name")
  fi
done

((failed > 0)) && echo "failed models: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0 && passed > 0))
