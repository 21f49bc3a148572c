#!/bin/sh
# perf.sh - the shell entry point of the CPU benchmark against ONNX Runtime: runs
# bench/perf/run_perf.py with the project's venv (the only Python that has onnxruntime),
# from any directory, passing every argument through. `bench/perf/perf.sh --quick` after
# a kernel change; `bench/perf/perf.sh` for the full table in docs/performance.md.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
py="$root/.venv/bin/python"
if [ ! -x "$py" ]; then
  echo "perf.sh: no $py; run scripts/bootstrap.sh first" >&2
  exit 1
fi
# The doc records the command that made it; this names the entry point that was used.
NR_PERF_ENTRY="bench/perf/perf.sh" exec "$py" "$root/bench/perf/run_perf.py" "$@"
