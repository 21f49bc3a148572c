#!/usr/bin/env bash
# run.sh - build the libFuzzer harnesses, make their seed corpora, replay the saved
# regression inputs and fuzz each harness for a bounded time.
#
#   tests/fuzz/run.sh [HARNESS...]      (default: every harness; names without fuzz_)
#
# Environment:
#   NR_FUZZ_SECONDS  seconds per harness (default 60); 0 only replays tests/fuzz/regress
#   NR_FUZZ_BUILD    the clang build tree (default build-fuzz)
#   NR_FUZZ_NODE     unpacked ONNX node tests (default: unpacked into NR_FUZZ_BUILD)
#   NR_FUZZ_ARGS     more libFuzzer flags (e.g. "-jobs=4 -workers=4")
#   NR_JOBS          build parallelism (default 2)
#   NR_FUZZ_STRICT   1: a new finding of this run fails it (default 0: it is listed
#                    with its file and the run fails only when a harness does not
#                    build or run, exits without a finding, or a regression input
#                    fails again)
# The working corpus of each harness grows in NR_FUZZ_BUILD/corpus/<harness> across
# runs; crashes, leaks and hangs land in NR_FUZZ_BUILD/crashes/<harness>/ and fail
# the run. A finding that is fixed goes to tests/fuzz/regress/<harness>/ (small
# files), which every run replays first. The last line is a table row per harness:
# seconds, executions, result.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo" || exit 1
fb=${NR_FUZZ_BUILD:-build-fuzz}
secs=${NR_FUZZ_SECONDS:-60}
strict=${NR_FUZZ_STRICT:-0}
harnesses=(${@:-onnx engine npy pb route db})
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

command -v clang >/dev/null || { echo "fuzz: clang is missing (apt-get install clang)"; exit 1; }
CC=clang cmake -S . -B "$fb" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNR_CUDA=OFF \
  -DNR_FUZZ=ON -DNR_BUILD_TESTS=OFF >/dev/null &&
  cmake --build "$fb" -j"${NR_JOBS:-2}" --target fuzz || { echo "fuzz: build failed"; exit 1; }

node=${NR_FUZZ_NODE:-}
[[ -n $node ]] || node=$fb/node
if [[ ! -d $node ]]; then
  tar -xJf tests/data/onnx-node/node.tar.xz -C "$fb" || exit 1
  node=$fb/node
fi
# Seed engines carry the build's version and sources hash, which the environment check
# compares: seeds older than the harnesses are made again.
if [[ ! $fb/seeds/.done -nt $fb/tests/fuzz/fuzz_engine ]]; then
  rm -rf "$fb/seeds"
  bash tests/fuzz/make_seeds.sh "$fb" "$node" "$fb/seeds" && touch "$fb/seeds/.done" ||
    { echo "fuzz: making the seed corpora failed"; exit 1; }
fi

rc=0 rows=()
for h in "${harnesses[@]}"; do
  bin=$fb/tests/fuzz/fuzz_$h
  [[ -x $bin ]] || { echo "fuzz: no harness fuzz_$h"; rc=1; continue; }
  mkdir -p "$fb/corpus/$h" "$fb/crashes/$h"
  shopt -s nullglob
  regress=(tests/fuzz/regress/$h/*)
  shopt -u nullglob
  if ((${#regress[@]})); then
    echo "== fuzz_$h: replaying ${#regress[@]} regression inputs"
    if ! "$bin" -timeout=30 "${regress[@]}" >"$fb/crashes/$h/replay.log" 2>&1; then
      tail -n 40 "$fb/crashes/$h/replay.log"
      rows+=("fuzz_$h replay FAILED")
      rc=1
      continue
    fi
  fi
  ((secs > 0)) || { rows+=("fuzz_$h replay ok"); continue; }
  echo "== fuzz_$h: $secs s"
  # Findings of earlier runs move aside, so what is left after this one is its own.
  mkdir -p "$fb/crashes/$h/earlier"
  find "$fb/crashes/$h" -maxdepth 1 -type f -name '*-*' -exec mv -t "$fb/crashes/$h/earlier" {} +
  log=$fb/crashes/$h/fuzz.log
  # shellcheck disable=SC2086
  "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$fb/crashes/$h/" ${NR_FUZZ_ARGS:-} "$fb/corpus/$h" "$fb/seeds/$h" \
    >"$log" 2>&1
  st=$?
  # Executions: the final stats, or in fork mode (-fork=N) the last status line "#N: ...".
  execs=$(grep -h 'stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
  ((execs > 0)) || execs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
  found=$(find "$fb/crashes/$h" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  # An input that ran over libFuzzer's -report_slow_units (10 s) but within -timeout is
  # reported, not counted as a finding: under the sanitizers a legitimate model of a few
  # tens of millions of operations takes that long.
  slow=$(find "$fb/crashes/$h" -maxdepth 1 -type f -name 'slow-unit-*' | wc -l)
  ((slow == 0)) || echo "fuzz_$h: $slow inputs over 10 s (slow-unit-* in $fb/crashes/$h/), not findings"
  if ((st || found)); then
    echo "fuzz_$h: $found findings in $fb/crashes/$h/"
    grep -E '^==[0-9]+==ERROR|^SUMMARY|runtime error|Test unit written' "$log" | head -n 8
    if ((found == 0 || strict)); then
      rows+=("fuzz_$h ${secs}s ${execs:-0} FAILED ($found findings, exit $st, log $log)")
      rc=1
    else
      rows+=("fuzz_$h ${secs}s ${execs:-0} NEW FINDINGS ($found, not failing the run without NR_FUZZ_STRICT=1; log $log)")
    fi
  else
    rows+=("fuzz_$h ${secs}s ${execs:-0} ok")
  fi
done
echo "== fuzz summary (harness, seconds, executions, result)"
printf '  %s\n' "${rows[@]}"
exit $rc
