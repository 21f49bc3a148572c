#!/usr/bin/env bash
# check_conformance_routes.sh - `nnroute conformance --routes` fails a node test by the
# route that broke it, and that route replays.
#
#   tests/cli/check_conformance_routes.sh NNROUTE NODE_DIR     (the ctest entry
#                                                              conformance_route_faults)
#
# The faults come from the test knobs (src/passes/fault.c, NNROUTE_TEST_KNOBS=1): the
# random routes then also draw test.fault, so some build with an injected build error,
# crash, hang, fail at run time or write NaN or Inf. Checked: the clean suite passes;
# with the test knobs every kind of fault shows as a FAIL of its test whose reason
# names the route (a crash and a time-out by the stage the child had reached); running
# one failing test alone with the same seed prints the same line; `nnroute run` with a
# crashing route's text crashes the same way. Prints `N passed, N failed`; exit
# status non-zero when a check failed.
set -uo pipefail

nnroute=$(realpath "${1:?usage: check_conformance_routes.sh NNROUTE NODE_DIR}")
node=$(realpath "${2:?usage: check_conformance_routes.sh NNROUTE NODE_DIR}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "PASS $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

tests=()
for t in relu add sub mul div abs neg exp sigmoid tanh sqrt floor ceil reciprocal \
  softsign conv_with_strides_padding gemm_all_attributes matmul_2d maxpool_2d_pads \
  transpose_all_permutations_0; do
  tests+=("$node/test_$t")
done

"$nnroute" conformance "${tests[@]}" --routes 3 >"$work/clean" 2>&1
rc=$?
if ((rc == 0)) && grep -q "^${#tests[@]} passed, 0 failed" "$work/clean"; then
  ok "without faults all ${#tests[@]} tests pass along 3 random routes"
else
  bad "without faults (exit $rc): $(tail -n 3 "$work/clean")"
fi

# Two random routes per data set, each knob off its default with probability 0.9.
faulty=(--routes 2 --change-probability 0.9 --seed 7 --timeout 2)
NNROUTE_TEST_KNOBS=1 "$nnroute" conformance "${tests[@]}" "${faulty[@]}" >"$work/faults" 2>&1
rc=$?
((rc == 1)) && ok "faults: exit status 1" || bad "faults: exit status $rc, want 1"
expect_line() { # NAME REGEX: some FAIL line matches REGEX
  if grep -Eq -- "$2" "$work/faults"; then ok "$1"; else bad "$1: no line matches $2"; fi
}
route="route [0-9] on test_data_set_0(, inputs 1.. constant)?: --route '[^']*"
expect_line "a crash names its route" \
  "^FAIL [A-Za-z_0-9]+: crashed with signal 11 \(Segmentation fault\) in $route-test.fault=crash"
expect_line "a hang names its route" "^FAIL [A-Za-z_0-9]+: timed out after 2 s in $route-test.fault=hang"
expect_line "a build error names its route" \
  "^FAIL [A-Za-z_0-9]+: $route-test.fault=build_error[^']*': .*injected build failure"
expect_line "a run error names its route" \
  "^FAIL [A-Za-z_0-9]+: $route-test.fault=run_error[^']*': .*injected run failure"
expect_line "NaN outputs name their route" \
  "^FAIL [A-Za-z_0-9]+: $route-test.fault=nan[^']*': output '[^']*': element [0-9]+ is nan"
expect_line "Inf outputs name their route" \
  "^FAIL [A-Za-z_0-9]+: $route-test.fault=inf[^']*': output '[^']*': element [0-9]+ is inf"
unnamed=$(grep "^FAIL" "$work/faults" | grep -Ev "(default )?route [0-9]* ?on test_data_set_0.*--route '")
[[ -z $unnamed ]] && ok "every FAIL names a route" || bad "FAIL lines without a route: $unnamed"

# The same seed on the one test alone draws the same routes: the same line.
line=$(grep -m1 -E "^FAIL [A-Za-z_0-9]+: crashed with signal 11" "$work/faults")
name=$(sed -E 's/^FAIL ([A-Za-z_0-9]+):.*/\1/' <<<"$line")
if [[ -n $name ]]; then
  NNROUTE_TEST_KNOBS=1 "$nnroute" conformance "$node/$name" "${faulty[@]}" >"$work/one" 2>&1
  grep -qxF -- "$line" "$work/one" && ok "$name alone prints the same FAIL line" ||
    bad "$name alone: $(grep '^FAIL' "$work/one")"
  # A crash on the model as given replays with `nnroute run`.
  given=$(grep -E "^FAIL [A-Za-z_0-9]+: crashed with signal 11 .* on test_data_set_0: --route" \
    "$work/faults" | head -n 1)
  r=$(sed -E "s/.*--route '([^']*)'.*/\1/" <<<"$given")
  t=$(sed -E 's/^FAIL ([A-Za-z_0-9]+):.*/\1/' <<<"$given")
  (cd "$work" && NNROUTE_TEST_KNOBS=1 "$nnroute" run "$node/$t/model.onnx" \
    --inputs-dir "$node/$t/test_data_set_0" --route "$r" >/dev/null 2>&1) 2>/dev/null
  rc=$?
  ((rc == 139)) && ok "nnroute run $t --route '$r' crashes (signal 11)" ||
    bad "nnroute run $t --route '$r': exit $rc, want 139 (signal 11)"
else
  bad "no crash to replay"
fi
echo "$passed passed, $failed failed"
((failed == 0))
