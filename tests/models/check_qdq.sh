#!/usr/bin/env bash
# check_qdq.sh - pre-quantized models from ONNX Runtime's own quantizer run in nnroute.
#
#   NNROUTE=build/nnroute bash tests/models/check_qdq.sh MODELS_DIR
#
# bench/quant/ort_quantize.py quantizes a few suite models with onnxruntime's
# quantize_static (QDQ, per-channel int8 weights, uint8 activations, MinMax) and runs
# each QDQ model on the reference executor, as an engine along the default route and
# as an engine with `-precision@*=int8` (the qdq pass running each pair's grid in the
# int8 kernels). Every one of those must succeed, and each engine must agree with ONNX
# Runtime's own run of the QDQ model within twice the gap between ORT's fused and
# unfused runs of it (a value that lands on the other side of a rounding boundary
# moves a whole grid step, and ORT's two runs show how much that alone moves the
# output), or 1e-3 when that gap is smaller. Prints `N passed, N failed`.
set -uo pipefail

models=${1:?usage: check_qdq.sh MODELS_DIR}
nnroute=$(realpath "${NNROUTE:-build/nnroute}")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
list=${NR_QDQ_MODELS:-mlp_op13,squeezenet1_1_op13,bert_tiny_op13}

cd "$repo" || exit 1
if ! .venv/bin/python bench/quant/ort_quantize.py --models "$list" --force \
    --nnroute "$nnroute" --json "$work/rows.json" >"$work/out.txt" 2>&1; then
  tail -n 20 "$work/out.txt"
  echo "0 passed, 1 failed"
  exit 1
fi
.venv/bin/python - "$work/rows.json" "$list" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
passed = failed = 0
def check(ok, what):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + what)
    passed, failed = passed + ok, failed + (not ok)
# every listed model has its row: zero rows is a failure, not an empty pass
have = {r.get("model") for r in rows}
for m in [m for m in sys.argv[2].split(",") if m]:
    check(any(h == m or (h or "").startswith(m) for h in have), f"{m}: a row was written")
for r in rows:
    m = r["model"]
    for key in ("run_reference", "build", "engine_run", "int8_build", "int8_engine_run"):
        check(r.get(key) == "ok", f"{m}: {key} is {r.get(key)!r}")
    bound = max(2 * (r.get("ort_fused_vs_unfused") or 0.0), 1e-3)
    for key in ("engine_vs_ort_qdq", "int8_engine_vs_ort_qdq"):
        v = r.get(key)
        check(v is not None and v <= bound, f"{m}: {key} {v} <= {bound:.3g}")
    check(r.get("int8_qdq_steps", 1e9) < r.get("qdq_steps", 0),
          f"{m}: int8 removes Q/DQ steps ({r.get('qdq_steps')} -> {r.get('int8_qdq_steps')})")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
