#!/usr/bin/env bash
# tune_suite.sh - runs `nnroute tune` with its default budget on models of the suite
# and prints one table row per model: candidates built, statuses, tuning wall time,
# the winner, its screening and confirmed speedups over the default route (with the
# confirmation's 95% interval) and the break-even point. A benchmark, not a test.
#
#   bash bench/tune/tune_suite.sh [MODELS_DIR] [MODEL...]
#
# MODELS_DIR defaults to build/models (scripts/test.sh's models stage fills it);
# models default to resnet18_op13, mobilenet_v2_op13 and bert_tiny_op13. NNROUTE picks
# the binary (default build/nnroute), NR_TUNE_THREADS the threads (default: all),
# NR_TUNE_ARGS adds options to every run. Work files go to build/tune-suite/.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
models=${1:-$repo/build/models}
shift || true
names=("$@")
((${#names[@]})) || names=(resnet18_op13 mobilenet_v2_op13 bert_tiny_op13)
nnroute=$(realpath "${NNROUTE:-$repo/build/nnroute}")
out=$repo/build/tune-suite
mkdir -p "$out"
threads=${NR_TUNE_THREADS:-0}

echo "tune_suite $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), threads ${threads/#0/all}"
echo "command: nnroute tune MODEL --threads $threads ${NR_TUNE_ARGS:-} (default budget and search)"
echo
for m in "${names[@]}"; do
  rm -rf "$out/$m.db" "$out/$m.db.engines" "$out/$m.json"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$nnroute" tune "$models/$m.onnx" --threads "$threads" --db "$out/$m.db" \
    -o "$out/$m.engine" --report "$out/$m.json" ${NR_TUNE_ARGS:-} \
    >"$out/$m.out" 2>"$out/$m.err"
  rc=$?
  t1=$(date +%s.%N)
  /usr/bin/python3 - "$m" "$out/$m.json" "$rc" "$t0" "$t1" <<'PY'
import json, sys, collections
name, path, rc, t0, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
if rc != 0:
    print(f"| {name} | failed (exit {rc}, see build/tune-suite/{name}.err) |")
    sys.exit(0)
r = json.load(open(path))
st = collections.Counter(c["status"] for c in r["candidates"])
w = r["winner"]
conf = w.get("confirmed")
ci = conf["confirmed_speedup_ci95"] if conf else None
be = r.get("break_even_inferences")
print(f"| {name} | {len(r['candidates'])} | {dict(st)} | {t1 - t0:.0f} s | "
      f"{r['default']['screening_median_ms']:.2f} | {w.get('dimensions') or w['route'] or '(default route)'} | "
      f"{w['screening_speedup']:.3f} | {w['confirmed_speedup']:.3f}"
      + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + f" | {be if be is not None else '-'} | "
      f"{'yes' if r['noise']['noisy'] else 'no'} |")
PY
done | { echo "| model | candidates | statuses | wall | default ms | winner | screening speedup | confirmed speedup [95% CI] | break-even inferences | noisy |"; echo "|---|---|---|---|---|---|---|---|---|---|"; cat; }
