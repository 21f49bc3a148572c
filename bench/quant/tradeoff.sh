#!/usr/bin/env bash
# tradeoff.sh - the 16-route experiment of issue 6, as one command. The Fashion-MNIST
# classifier has exactly four layers whose precision can change (/conv1/Conv,
# /conv2/Conv, /fc1/Gemm, /fc2/Gemm); each is fp32 or int8, so there are 16 routes.
# `nnroute tune --search full` builds and measures all 16 (each calibrated on the
# reference pairs, i.e. training images; the holdout pairs are test images), and
# bench/quant/tradeoff.py reads the report, sweeps the tolerance from infinity down
# to 0 and draws latency against loss with the Pareto frontier. Key decision: the
# tuner's search decides nothing here - full search measures every route - so the
# sweep is over recorded numbers and can be redrawn at any metric without tuning again.
#
#   bash bench/quant/tradeoff.sh [--doc]
#
# Writes build/quant/tradeoff/{report.json,tradeoff.md,tradeoff.svg,tradeoff.json};
# --doc also copies the plot to docs/accuracy-tradeoff.svg (the table in
# docs/accuracy-tradeoff.md is pasted from tradeoff.md with the run's date).
# Environment: NNROUTE (default build/nnroute), NR_TRADEOFF_THREADS (default 1: the
# machine is shared, and one thread is the steadiest ratio), NR_TRADEOFF_ROUTES
# (another 16-route expression, e.g. fp32|fp16, for development),
# NR_TRADEOFF_CALIBRATION (minmax, percentile, entropy, or default: the knob's own
# default; minmax unless set), NR_TRADEOFF_ROUNDS (re-timing rounds, default 5),
# NR_TRADEOFF_ARGS (more options for nnroute tune). Trains the model first when it is missing
# (bench/models/fashion_mnist.py, a few minutes).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nnroute=$(realpath "${NNROUTE:-$repo/build/nnroute}")
python=$repo/.venv/bin/python
data=$repo/build/models/fashion_mnist
out=$repo/build/quant/tradeoff
threads=${NR_TRADEOFF_THREADS:-1}
sites=(/conv1/Conv /conv2/Conv /fc1/Gemm /fc2/Gemm)
routes=${NR_TRADEOFF_ROUTES:-}
if [[ -z $routes ]]; then
  for s in "${sites[@]}"; do routes+="-precision@$s=[fp32|int8] "; done
fi
# Pinned, not searched: activation ranges by min/max, the method ONNX Runtime's
# quantize_static uses in the peer comparison (bench/quant/ort_quantize.py).
calibration=${NR_TRADEOFF_CALIBRATION:-minmax}
[[ $calibration == default ]] || routes+="-quant.calibration=$calibration "
rounds=${NR_TRADEOFF_ROUNDS:-5}

[[ -x $nnroute ]] || { echo "tradeoff: no $nnroute (build nnroute or set NNROUTE)"; exit 1; }
[[ -f $data/fashion_mnist.onnx ]] || /usr/bin/python3 "$repo/bench/models/fashion_mnist.py" "$data"
mkdir -p "$out"
rm -rf "$out/tune.db" "$out/tune.db-wal" "$out/tune.db-shm" "$out/tune.db.engines"

# The tuner calibrates int8 routes on its reference inputs (training images here),
# never on the holdout ones.
cmd=("$nnroute" tune "$data/fashion_mnist.onnx" --search full --routes "${routes% }"
     --shape input=256x1x28x28 --reference "$data/calib" --holdout "$data/holdout"
     --metric top1 --tolerance 0.01 --threads "$threads" --screen-ms 300
     --db "$out/tune.db" --report "$out/report.json" -o "$out/winner.nre")
# shellcheck disable=SC2206
cmd+=(${NR_TRADEOFF_ARGS:-})
echo "tradeoff: $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads thread(s)"
printf 'tradeoff:'; printf ' %q' "${cmd[@]}"; echo
"${cmd[@]}" >"$out/tune.out" 2>&1 || { tail -5 "$out/tune.out"; echo "tradeoff: nnroute tune failed (log: $out/tune.out)"; exit 1; }
grep -E '^\[[0-9]+/[0-9]+\]' "$out/tune.out" | sed 's/^/  /' || true

# Screening medians are single processes at different moments; the plot and the sweep
# use all 16 engines re-timed in interleaved rounds instead (ratios to the default).
"$python" "$repo/bench/quant/tradeoff.py" "$out/report.json" --metric rel_l2 --also top1 \
  --retime "$rounds" --shape input=256x1x28x28 --nnroute "$nnroute" \
  --svg "$out/tradeoff.svg" --markdown "$out/tradeoff.md" --json "$out/tradeoff.json"
if [[ ${1:-} == --doc ]]; then
  cp "$out/tradeoff.svg" "$repo/docs/accuracy-tradeoff.svg"
  echo "tradeoff: wrote docs/accuracy-tradeoff.svg"
fi
