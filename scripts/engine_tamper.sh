#!/bin/sh
# engine_tamper.sh - the long structure-aware tampering campaign over compiled engines
# (tests/unit/test_engine_tamper.c): MUTATIONS edits per engine (default 250000, four
# tiny_cnn engines: 10^6 in all), each loaded, given a context and run in a child
# process. Extra models: NR_TAMPER_MODELS=a.onnx:b.onnx. Prints the tally line; the
# exit status is non-zero on any crash, hang or error without a message.
# Usage: scripts/engine_tamper.sh [BUILD_DIR] [MUTATIONS] [SEED]
set -eu
build=${1:-build-cpu}
export NR_TAMPER_MUTATIONS=${2:-250000}
export NR_TAMPER_SEED=${3:-0x7a3be11e}
exec "$build/tests/nr_unit" engine_tamper_never_crashes
