#!/usr/bin/env bash
# check_run.sh - the decisions of tests/gpu/run.sh, checked on a machine without a GPU:
#
#   tests/gpu/check_run.sh        (NR_PYTHON: an interpreter with numpy; default python3)
#
# run.sh runs here against a stub build folder: an `nnroute` script that writes
# crafted .npy outputs (and engine, inspect and bench answers) and an `nr_gpu_test`
# script that prints a summary line. Each case names what the stub does wrong and
# whether run.sh must pass or fail, and, when it must fail, the FAIL line it must
# print. The cases are what a comparison must not let through: a NaN or an infinity
# the reference does not have, a comparison helper that cannot read an output, a
# missing output, a NaN GPU time, a test program whose exit status contradicts its
# summary, and no models at all; and what it must let through: all outputs within
# tolerance, and a NaN or infinity where the reference has the same one.
#
# Key decision: the stub, not a mock of run.sh's internals, so the checked code is
# the script itself, its helpers (tests/gpu/rel_l2.py, tests/models/compare.py) and
# the way it reads their exit statuses. Prints PASS/FAIL per case and `N passed, N
# failed`; the exit status is non-zero when any case failed.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
python=${NR_PYTHON:-python3}
passed=0 failed=0
scratch=$(mktemp -d "${TMPDIR:-/tmp}/nr-check-gpu-run.XXXXXX") || exit 1
trap '[[ -n ${NR_KEEP:-} ]] || rm -rf "$scratch"' EXIT

if ! "$python" -c 'import numpy' 2>/dev/null; then
  echo "FAIL $python has no numpy (set NR_PYTHON)"
  exit 1
fi

# ---- the stub build folder ----------------------------------------------------------
mkdir -p "$scratch/build/tests" "$scratch/models" "$scratch/empty"
: >"$scratch/models/m.onnx"

# nr_gpu_test: a clean summary; STUB_OPS_RC is its exit status.
cat >"$scratch/build/tests/nr_gpu_test" <<'EOF'
#!/usr/bin/env bash
echo "PASS gpu_stub"
echo "3 passed, 0 failed, 0 skipped"
exit "${STUB_OPS_RC:-0}"
EOF

# nnroute: the reference output is 1..6 (2x3 float32). STUB_BAD names the route whose
# output goes wrong (ref, fp32, default, fp16) and STUB_HOW how (nan, inf, missing,
# garbage, off: 10% away), or STUB_HOW=ref_nan (ref_inf) puts a NaN (+inf) at element
# 4 of the reference and of every route's output alike. STUB_BENCH is the bench GPU time;
# STUB_KNOBS and STUB_KNOBS_RC are check-knobs' last line and exit status.
cat >"$scratch/build/nnroute" <<'EOF'
#!/usr/bin/env bash
cmd=$1 src=$2
shift 2
route=default dir= eng=
while (($#)); do
  case $1 in
    --reference) route=ref ;;
    --route) [[ $2 == *fp32* ]] && route=fp32; [[ $2 == *fp16* ]] && route=fp16; shift ;;
    --output-dir) dir=$2; shift ;;
    -o) eng=$2; shift ;;
  esac
  shift
done
case $cmd in
  build) : >"$eng"; exit 0 ;;
  inspect) echo "device       cuda: stub GPU"; exit 0 ;;
  bench) echo "{\"median_ms\": 1.0, \"gpu_median_ms\": ${STUB_BENCH:-0.5}}"; exit 0 ;;
  check-knobs) echo "${STUB_KNOBS:-3 passed, 0 failed}"; exit "${STUB_KNOBS_RC:-0}" ;;
esac
[[ $src == *.nre ]] && route=engine
mkdir -p "$dir"
how=
[[ $route == "${STUB_BAD:-}" || ${STUB_HOW:-} == ref_* ]] && how=${STUB_HOW:-}
case $how in
  missing) exit 0 ;;
  garbage) echo "not an npy file" >"$dir/y.npy"; exit 0 ;;
esac
exec "$STUB_PYTHON" - "$dir/y.npy" "$how" <<'PY'
import sys
import numpy as np
y = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
how = sys.argv[2]
if how in ("nan", "ref_nan"):
    y.flat[4] = np.nan
elif how in ("inf", "ref_inf"):
    y.flat[4] = np.inf
elif how == "off":
    y *= 1.1
np.save(sys.argv[1], y)
PY
EOF
chmod +x "$scratch/build/nnroute" "$scratch/build/tests/nr_gpu_test"

# ---- the cases ----------------------------------------------------------------------
# case NAME WANT MODELS [FAIL_LINE] -- VAR=VALUE...: runs run.sh with the stub's
# variables; WANT is pass or fail; a failing run must print a line starting with
# "FAIL FAIL_LINE".
case_() {
  local name=$1 want=$2 models=$3 line=$4 log rc=0
  shift 5
  log=$scratch/$name.log
  env STUB_PYTHON="$python" NR_PYTHON="$python" NR_GPU_OUT="$scratch/out-$name" "$@" \
    bash "$repo/tests/gpu/run.sh" "$scratch/build" "$models" >"$log" 2>&1 || rc=$?
  local ok=true
  if [[ $want == pass ]]; then
    ((rc == 0)) || ok=false
  else
    if ((rc == 0)) || ! grep -q -- "^FAIL $line" "$log"; then
      ok=false
    fi
  fi
  if $ok; then
    echo "PASS $name (run.sh exit $rc)"
    passed=$((passed + 1))
  else
    local wanted=$want
    [[ -n $line ]] && wanted+=" with the line FAIL $line"
    echo "FAIL $name (wanted $wanted; run.sh exit $rc):"
    sed 's/^/    /' "$log"
    failed=$((failed + 1))
  fi
}

m=$scratch/models
case_ all_within_tolerance pass "$m" "" --
case_ reference_nan_matched pass "$m" "" -- STUB_HOW=ref_nan
case_ reference_inf_matched pass "$m" "" -- STUB_HOW=ref_inf
case_ default_route_nan fail "$m" "m cuda default route" -- STUB_BAD=default STUB_HOW=nan
case_ fp16_nan fail "$m" "m cuda fp16" -- STUB_BAD=fp16 STUB_HOW=nan
case_ fp16_inf fail "$m" "m cuda fp16" -- STUB_BAD=fp16 STUB_HOW=inf
case_ fp16_beyond_tolerance fail "$m" "m cuda fp16" -- STUB_BAD=fp16 STUB_HOW=off
case_ fp32_nan fail "$m" "m cuda fp32" -- STUB_BAD=fp32 STUB_HOW=nan
case_ fp32_inf fail "$m" "m cuda fp32" -- STUB_BAD=fp32 STUB_HOW=inf
case_ default_route_missing_output fail "$m" "m cuda default route" -- \
  STUB_BAD=default STUB_HOW=missing
case_ default_route_unreadable_output fail "$m" "m cuda default route" -- \
  STUB_BAD=default STUB_HOW=garbage
case_ engine_file_nan fail "$m" "m cuda engine file" -- STUB_BAD=engine STUB_HOW=nan
case_ bench_time_nan fail "$m" "m cuda bench" -- STUB_BENCH=null
case_ gpu_test_exit_status fail "$m" "nr_gpu_test" -- STUB_OPS_RC=1
case_ dead_knob_value fail "$m" "m cuda check-knobs" -- STUB_KNOBS="2 passed, 1 failed" \
  STUB_KNOBS_RC=1
case_ check_knobs_status_alone fail "$m" "m cuda check-knobs" -- STUB_KNOBS_RC=1
case_ no_models fail "$scratch/empty" "models" --

echo "$passed passed, $failed failed"
((failed == 0))
