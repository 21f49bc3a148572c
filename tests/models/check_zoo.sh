#!/usr/bin/env bash
# check_zoo.sh - builds the default-route engine of every zoo model, runs it on the zoo's
# inputs and compares the outputs with ONNX Runtime's (tests/models/compare.py, the
# suite's tolerances: rtol 1e-3, atol 1e-4). Per model it reports whether the engine
# builds (and the error when not), whether the numbers match (largest errors), and the
# steps on the reference tactic grouped by op (tests/models/zoo_steps.py; a fused
# EltwiseChain with the ONNX ops it covers), with their share of the time when
# NR_ZOO_PROFILE=1 adds a short `nnroute bench --profile` run.
#
#   tests/models/check_zoo.sh [ZOO_DIR]        (default: build/zoo)
#
# ZOO_DIR is what bench/models/zoo.py, zoo_packaged.py and ort_reference.py write:
# <model>.onnx, its sidecar <model>.zoo.json (pinned input shapes, marks), the inputs
# <model>/<input>.npy and the references <model>/ref/<output>.npy. A model whose sidecar
# marks it (control-flow, dynamic) and whose engine does not build is counted as
# skipped, with the error shown: the zoo keeps models nnroute cannot build yet. One
# model failing does not stop the others; the last line is `N passed, N failed,
# N skipped` and the exit status is non-zero when anything failed.
#
# Environment: NNROUTE (default build/nnroute), NR_PYTHON (an interpreter with numpy and
# onnx; default .venv/bin/python), NR_ZOO_OUT (default ZOO_DIR/../zoo-out),
# NR_ZOO_FILTER (grep -E on model names), NR_ZOO_THREADS (engine threads; default 1),
# NR_MODEL_TIMEOUT (seconds per build and per run; default 600), NR_RTOL, NR_ATOL,
# NR_ZOO_PROFILE=1 (profile every engine; adds about a second per model),
# NR_ZOO_FAIL_ON_REF=1 (a model with a step on the reference tactic fails, unless
# MODEL:OP, e.g. silero_vad_v5_op16:LSTM, matches the grep -E pattern NR_ZOO_REF_ALLOW).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
zoo=${1:-$repo/build/zoo}
nnroute=${NNROUTE:-$repo/build/nnroute}
python=${NR_PYTHON:-$repo/.venv/bin/python}
outroot=${NR_ZOO_OUT:-$(dirname "$zoo")/zoo-out}
filter=${NR_ZOO_FILTER:-.}
threads=${NR_ZOO_THREADS:-1}
limit=${NR_MODEL_TIMEOUT:-600}
rtol=${NR_RTOL:-1e-3}
atol=${NR_ATOL:-1e-4}
profile=${NR_ZOO_PROFILE:-0}
fail_on_ref=${NR_ZOO_FAIL_ON_REF:-0}
ref_allow=${NR_ZOO_REF_ALLOW:-^$}
helper=$repo/tests/models/zoo_steps.py

for need in "$nnroute" "$python"; do
  if [[ ! -x $need ]]; then
    echo "check_zoo: $need is missing (build nnroute and run scripts/bootstrap.sh first)"
    echo "0 passed, 1 failed"
    exit 1
  fi
done
shopt -s nullglob
files=("$zoo"/*.onnx)
if ((${#files[@]} == 0)); then
  echo "check_zoo: no models in $zoo (run bench/models/zoo.py and zoo_packaged.py first)"
  echo "0 passed, 1 failed"
  exit 1
fi

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# last_error LOG: the last non-empty line of a log, the one nnroute's error is on.
last_error() { grep -v '^[[:space:]]*$' "$1" | tail -n 1; }

passed=0 failed=0 skipped=0 failures=() skips=()
for model in "${files[@]}"; do
  name=$(basename "$model" .onnx)
  grep -Eq -- "$filter" <<<"$name" || continue
  out=$outroot/$name
  rm -rf "$out" && mkdir -p "$out"
  echo "== $name"
  if ! "$python" "$helper" info "$model" >"$out/info.txt" 2>"$out/info.err"; then
    echo "  cannot read the model: $(last_error "$out/info.err")"
    echo "FAIL $name"
    failed=$((failed + 1)) failures+=("$name")
    continue
  fi
  read -r -a shapes <<<"$(sed -n 's/^shapes *//p' "$out/info.txt")"
  marks=$(sed -n 's/^marks *//p' "$out/info.txt")
  shape_args=()
  for s in "${shapes[@]}"; do shape_args+=(--shape "$s"); done

  start=$(date +%s.%N)
  timeout "$limit" "$nnroute" build "$model" "${shape_args[@]}" --threads "$threads" \
    -o "$out/engine.nre" >"$out/build.log" 2>&1
  rc=$?
  secs=$(elapsed "$start")
  if ((rc != 0)); then
    why="exit status $rc"
    ((rc == 124)) && why="timed out after ${limit} s"
    echo "  build: FAILED ($why, ${secs} s): $(last_error "$out/build.log")"
    if [[ -n $marks ]]; then
      echo "SKIP $name (marked: $marks)"
      skipped=$((skipped + 1)) skips+=("$name")
    else
      echo "FAIL $name"
      failed=$((failed + 1)) failures+=("$name")
    fi
    continue
  fi
  echo "  build: ${secs} s, $(grep -m1 '^build:' "$out/build.log" | sed 's/^build: *//')"

  "$nnroute" inspect "$out/engine.nre" --json >"$out/inspect.json" 2>"$out/inspect.err"
  profile_args=()
  if [[ $profile == 1 ]] && timeout "$limit" "$nnroute" bench "$out/engine.nre" \
      --threads "$threads" --profile --json --warmup-ms 100 --duration-ms 300 \
      --min-iters 2 >"$out/bench.json" 2>"$out/bench.err"; then
    profile_args=(--profile "$out/bench.json")
  fi
  "$python" "$helper" steps "$out/inspect.json" "$model" "${profile_args[@]}" \
    --json "$out/steps.json" | tee "$out/steps.txt"

  start=$(date +%s.%N)
  timeout "$limit" "$nnroute" run "$out/engine.nre" --inputs-dir "$zoo/$name" \
    --output-dir "$out" >"$out/run.log" 2>&1
  rc=$?
  secs=$(elapsed "$start")
  if ((rc != 0)); then
    why="exit status $rc"
    ((rc == 124)) && why="timed out after ${limit} s"
    echo "  run: FAILED ($why, ${secs} s): $(last_error "$out/run.log")"
    echo "FAIL $name"
    failed=$((failed + 1)) failures+=("$name")
    continue
  fi
  echo "  run: ${secs} s"
  ok=1
  "$python" "$repo/tests/models/compare.py" "$zoo/$name/ref" "$out" \
    --rtol "$rtol" --atol "$atol" --label "$name" >"$out/compare.txt" 2>&1 || ok=0
  grep -v '^\(PASS\|FAIL\) ' "$out/compare.txt"
  if [[ $fail_on_ref == 1 ]]; then
    bad=$(sed -n "s/^ *[0-9]* x \([^ ,]*\).*/$name:\1/p" "$out/steps.txt" |
      grep -Ev -- "$ref_allow" | sed 's/^[^:]*://')
    if [[ -n $bad ]]; then
      echo "  steps on the reference tactic: $(tr '\n' ' ' <<<"$bad")"
      ok=0
    fi
  fi
  if ((ok)); then
    echo "PASS $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name"
    failed=$((failed + 1)) failures+=("$name")
  fi
done

((failed > 0)) && echo "failed models: ${failures[*]}"
((skipped > 0)) && echo "skipped (marked, do not build): ${skips[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0 && passed > 0))
