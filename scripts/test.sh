#!/usr/bin/env bash
# test.sh - the whole test suite, from a bare Debian 12 clone to one summary line.
#
#   scripts/test.sh
#
# Stages, in order; each prints a banner and its time, and a failed stage does not hide
# the later ones unless they need its output:
#   bootstrap   scripts/bootstrap.sh (Debian packages, .venv)
#   layers      scripts/check_layers.py: src/'s includes point down the floors (no folder
#               cycle, no upward include, no other folder's *_internal.h)
#   gpurun      tests/gpu/check_run.sh: the GPU suite's script against a stub nnroute
#               (no GPU needed): NaN and infinity in an output, a comparison that
#               cannot be made, a bad GPU time, a dead CUDA knob value, no models, all
#               fail it
#   build       Release build in build/
#   ctest       unit tests + ONNX node conformance (ctest --test-dir build)
#   cli         tests/cli/check_cli_inputs.sh: run/build/bench/tune on a generated model
#               with free input dims, inputs in every layout --inputs-dir reads, outputs
#               compared with ONNX Runtime, and the refusals of contradicting files
#   asan        ASan+UBSan build in build-asan/, nr_unit with NR_FUZZ_DIR naming the node
#               suite and the exported real models (truncated and bit-flipped copies)
#   fuzz        tests/fuzz/run.sh: the libFuzzer harnesses (clang, ASan + UBSan) in
#               build-fuzz/, each run NR_FUZZ_SECONDS (default 60) on its saved corpus
#               after replaying tests/fuzz/regress/; a crash, leak or hang fails it
#   models      export the real-model suite to build/models/ (cached) + ONNX Runtime refs
#   check       tests/models/check_models.sh: engines built along the default route vs
#               ONNX Runtime
#   reference   the same through the reference executor (nnroute run --reference)
#   zoo         the model zoo (bench/models/zoo.py, zoo_packaged.py: 34 files, cached in
#               NR_BUILD_DIR/zoo) with ONNX Runtime references; tests/models/check_zoo.sh:
#               every model built along the default route and compared with ONNX Runtime;
#               a step on the reference tactic fails it unless ZOO_REF_ALLOW names it
#   routes      tests/models/check_routes.sh: 20 seeded random routes per model, each
#               built, run and compared with ONNX Runtime within its knobs' error bound
#   knobs       docs/knobs.md matches `nnroute knobs --markdown`; nnroute check-knobs on
#               smaller models: every non-default knob value must change what the built
#               plan does (its plan summary; no dead knobs), and a value the build
#               reports ignored must not
#   tune        tests/tune/check_tune.sh: `nnroute tune` with the fault-injection knobs:
#               every candidate status, the known winner, `nnroute report`, kill -9 and
#               --continue, int8 candidates and their calibration
#   qdq         tests/models/check_qdq.sh: ONNX Runtime's QDQ quantization of three suite
#               models run in nnroute (reference, default route, int8) and agree with
#               ONNX Runtime; bench/quant/test_tradeoff.py (the 16-route sweep's rules)
#   fresh       scripts/fresh_root.sh: in a clean Debian 12 root (debootstrap minbase)
#               holding only the committed tree, scripts/example.sh and a CPU-only
#               build with ctest. It needs root and makes a root file system, so it runs
#               only with NR_FRESH=1 (CI sets it) and is counted as skipped otherwise.
# The last line is `N passed, N failed` over the stages (`, N skipped` when some were
# skipped); the exit status is non-zero when any stage failed.
#
# Environment: NR_BUILD_DIR / NR_ASAN_DIR (build trees, default build / build-asan; the
# models live in NR_BUILD_DIR/models), NR_JOBS (build parallelism, default 2), NR_SKIP
# (space-separated stage names to skip, e.g. "asan models check"), NR_BOOTSTRAP_MODELS=0
# (no torch: skips the model stages), NR_MODEL_TIMEOUT (seconds per model run, default
# 600), NR_FRESH=1 (run the fresh stage).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
jobs=${NR_JOBS:-2}
build=${NR_BUILD_DIR:-build}
asan=${NR_ASAN_DIR:-build-asan}
skip=" ${NR_SKIP:-} "
[[ ${NR_BOOTSTRAP_MODELS:-1} == 0 ]] && skip+=" models check "
declare -A skip_why=([fresh]="NR_FRESH=1 runs it: needs root and debootstrap")
[[ ${NR_FRESH:-0} == 1 ]] || skip+=" fresh "
tarball=$repo/tests/data/onnx-node/node.tar.xz

passed=0 failed=0 skipped=0
results=()
t_all=$(date +%s)

# stage NAME NEEDS COMMAND...: runs COMMAND unless NAME is skipped or a stage named in
# NEEDS (space-separated) did not pass.
declare -A status
stage() {
  local name=$1 needs=$2
  shift 2
  local why=""
  [[ $skip == *" $name "* ]] && why=${skip_why[$name]:-NR_SKIP}
  for n in $needs; do
    [[ ${status[$n]:-} == pass ]] || { why="needs $n"; break; }
  done
  echo
  echo "======== $name"
  if [[ -n $why ]]; then
    echo "-------- $name: SKIPPED ($why)"
    status[$name]=skip skipped=$((skipped + 1)) results+=("$name skipped")
    return
  fi
  local t0=$SECONDS
  if "$@"; then
    status[$name]=pass passed=$((passed + 1)) results+=("$name ok $((SECONDS - t0))s")
    echo "-------- $name: PASS ($((SECONDS - t0)) s)"
  else
    status[$name]=fail failed=$((failed + 1)) results+=("$name FAILED $((SECONDS - t0))s")
    echo "-------- $name: FAIL ($((SECONDS - t0)) s)"
  fi
}

do_bootstrap() { bash scripts/bootstrap.sh; }

do_layers() { /usr/bin/python3 scripts/check_layers.py; }

do_gpurun() { NR_PYTHON=/usr/bin/python3 bash tests/gpu/check_run.sh; }

do_build() {
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$build" -j"$jobs"
}

do_ctest() { ctest --test-dir "$build" --output-on-failure; }

do_asan() {
  # The loader fuzz test mutates model files: the unpacked node suite and, when the
  # models stage has run, the exported real models (files over 64 MiB are left out).
  # allocator_may_return_null: a tampered engine asking for an impossible size gets
  # NULL and a clean error, as from libc, instead of ASan's abort.
  if [[ ! -d $build/node ]]; then
    mkdir -p "$build" && tar -xJf "$tarball" -C "$build" || return 1
  fi
  local fuzz_dirs
  fuzz_dirs=$(cd "$build" && pwd)/node
  [[ -d $build/models ]] && fuzz_dirs+=:$(cd "$build" && pwd)/models
  cmake -S . -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DNR_SANITIZE=ON &&
    cmake --build "$asan" -j"$jobs" --target nr_unit &&
    NR_FUZZ_DIR=$fuzz_dirs ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
      UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} "$asan/tests/nr_unit"
}

do_fuzz() {
  local node_dir=
  [[ -d $build/node ]] && node_dir=$(cd "$build" && pwd)/node
  NR_FUZZ_NODE=${NR_FUZZ_NODE:-$node_dir} NR_JOBS=$jobs bash tests/fuzz/run.sh
}

do_cli() { NNROUTE=$build/nnroute bash tests/cli/check_cli_inputs.sh; }

do_models() {
  /usr/bin/python3 bench/models/export_models.py "$build/models" &&
    .venv/bin/python bench/models/ort_reference.py "$build/models"
}

# Steps the zoo may leave on the reference tactic: ops with no fast CPU tactic at all
# (Cast, Equal, ArgMax, ReduceSum, ReduceL2 on the small mask and pooling paths of the
# text encoders) and the int64 Add after CLIP's ArgMax (the elementwise tactics are
# float32). Any other op on the reference tactic fails the model.
ZOO_REF_ALLOW='^[^:]*:(Cast|Equal|ArgMax|ReduceSum|ReduceL2)$'
ZOO_REF_ALLOW+='|^clip_text_l4_op17:Add$'

do_zoo() {
  /usr/bin/python3 bench/models/zoo.py "$build/zoo" &&
    /usr/bin/python3 bench/models/zoo_packaged.py "$build/zoo" &&
    .venv/bin/python bench/models/ort_reference.py "$build/zoo" &&
    NNROUTE=$build/nnroute NR_ZOO_FAIL_ON_REF=1 NR_ZOO_REF_ALLOW="$ZOO_REF_ALLOW" \
      bash tests/models/check_zoo.sh "$build/zoo"
}

do_check() {
  NNROUTE=$build/nnroute NR_MODELS_OUT=$build/models-out \
    bash tests/models/check_models.sh "$build/models"
}

do_reference() {
  NNROUTE=$build/nnroute NR_MODELS_OUT=$build/models-out-ref NR_RUN_ARGS=--reference \
    bash tests/models/check_models.sh "$build/models"
}

do_routes() {
  NNROUTE=$build/nnroute NR_ROUTES_COUNT=${NR_ROUTES_COUNT:-20} \
    bash tests/models/check_routes.sh "$build/models"
}

# The models whose every knob value is built once (resnet50's 200-odd instances take
# longer than CI should; `nnroute check-knobs build/models/resnet50_op13.onnx` runs it).
do_knobs() {
  local m ok=0
  # The knob reference is generated: it must match what this build prints.
  echo "== nnroute knobs --markdown against docs/knobs.md"
  if ! "$build/nnroute" knobs --markdown | diff -u docs/knobs.md - >/dev/null; then
    echo "FAIL docs/knobs.md is stale or the command failed: nnroute knobs --markdown > docs/knobs.md"
    ok=1
  fi
  for m in squeezenet1_1_op13 mobilenet_v3_small_op17 bert_tiny_op13 mlp_op17; do
    echo "== check-knobs $m"
    "$build/nnroute" check-knobs "$build/models/$m.onnx" | tail -n 20 || ok=1
  done
  return $ok
}

do_tune() {
  NNROUTE=$build/nnroute bash tests/tune/check_tune.sh "$build/models"
}

do_qdq() {
  NNROUTE=$build/nnroute bash tests/models/check_qdq.sh "$build/models" &&
    .venv/bin/python bench/quant/test_tradeoff.py
}

# The fresh root needs debootstrap on the host (installed here when missing).
do_fresh() {
  if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        debootstrap || return 1
  fi
  bash scripts/fresh_root.sh
}

stage bootstrap "" do_bootstrap
stage layers "bootstrap" do_layers
stage gpurun "bootstrap" do_gpurun
stage build "bootstrap" do_build
stage ctest "build" do_ctest
stage cli "build bootstrap" do_cli
stage models "bootstrap" do_models
stage check "build models" do_check
stage reference "build models" do_reference
stage zoo "build models" do_zoo
stage routes "build models" do_routes
stage knobs "build models" do_knobs
stage tune "build models" do_tune
stage qdq "build models" do_qdq
stage asan "bootstrap" do_asan
stage fuzz "bootstrap" do_fuzz
stage fresh "" do_fresh

echo
echo "======== summary ($(( $(date +%s) - t_all )) s)"
printf '  %s\n' "${results[@]}"
line="$passed passed, $failed failed"
((skipped > 0)) && line+=", $skipped skipped"
echo "$line"
((failed == 0))
