#!/usr/bin/env bash
# check_routes.sh - the route property test on the real-model suite: for every model,
# `nnroute check-routes` builds and runs the default route and seeded random routes
# and compares each output with ONNX Runtime's (MODELS_DIR/<model>/ref/*.npy) within
# the error bound of the route's knobs. A failing route is printed for replay.
#
#   tests/models/check_routes.sh [MODELS_DIR]        (default: build/models)
#
# Environment: NNROUTE (default build/nnroute), NR_ROUTES_COUNT (routes per model,
# default 20), NR_ROUTES_SEED (default 1), NR_MODELS_FILTER (grep -E on model names),
# NR_ROUTES_TOLERANCE (base relative L2 allowed against ONNX Runtime; default 1e-4,
# since ONNX Runtime itself reassociates), NR_ROUTES_EACH (a knob name: instead of
# random routes, every instance of it at each other value, one change per route, with
# the largest error per value; `precision` measures the bounds docs/precision.md
# gives fp16, bf16 and int8).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
models=${1:-$repo/build/models}
nnroute=${NNROUTE:-$repo/build/nnroute}
count=${NR_ROUTES_COUNT:-20}
seed=${NR_ROUTES_SEED:-1}
filter=${NR_MODELS_FILTER:-.}
base=${NR_ROUTES_TOLERANCE:-1e-4}
each=()
[[ -n ${NR_ROUTES_EACH:-} ]] && each=(--each "$NR_ROUTES_EACH")

shopt -s nullglob
files=("$models"/*.onnx)
if [[ ! -x $nnroute ]] || ((${#files[@]} == 0)); then
  echo "check_routes: need $nnroute and exported models in $models"
  echo "0 passed, 1 failed"
  exit 1
fi
passed=0 failed=0
for model in "${files[@]}"; do
  name=$(basename "$model" .onnx)
  grep -Eq -- "$filter" <<<"$name" || continue
  echo "== $name"
  log=$(mktemp)
  "$nnroute" check-routes "$model" --count "$count" --seed "$seed" \
    --inputs-dir "$models/$name" --expect-dir "$models/$name/ref" \
    --base-tolerance "$base" "${each[@]}" >"$log" 2>&1
  rc=$?
  sed 's/^/  /' "$log"
  p=$(grep -Eo '^[0-9]+ passed' "$log" | grep -Eo '[0-9]+' || echo 0)
  f=$(grep -Eo ', [0-9]+ failed' "$log" | grep -Eo '[0-9]+' || echo 0)
  ((rc != 0 && f == 0)) && f=1
  passed=$((passed + p)) failed=$((failed + f))
  rm -f "$log"
done
echo "routes: $passed passed, $failed failed"
((failed == 0))
