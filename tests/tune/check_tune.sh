#!/usr/bin/env bash
# check_tune.sh - end-to-end tests of `nnroute tune` with the test-only fault knobs.
#
#   NNROUTE=build/nnroute bash tests/tune/check_tune.sh MODELS_DIR
#
# With NNROUTE_TEST_KNOBS=1 the compiler has three extra knobs (src/passes/fault.c):
# test.fault (none|build_error|crash|hang|nan|inf|oom), test.perturb (multiplies the
# outputs by 1+p) and test.delay_ms (a sleep per inference, 5 ms on the default
# route). They give the tuner a landscape whose answer is known: every failure status
# must be classified and survived, and the only winner is the route that removes the
# sleep without a fault or a perturbation (a 5 ms sleep against none, so the outcome
# does not hinge on timing noise).
#
# Tests: (1) every candidate status is seen and the session completes with the known
# winner, a loadable engine and a report; (2) `nnroute report` chooses again at a
# looser tolerance from the recorded losses; (3) kill -9 in the middle of a session,
# then --continue: every route is recorded exactly once and the winner is the same;
# (4) Ctrl-C ends cleanly (exit 130, session interrupted, best engine written), and a
# session recorded under another environment is never resumed; (5) reference pairs
# from files, a winner that fails the holdout pairs is rejected, and a default route
# that fails them fails the session and writes no engine; (6) --dry-run
# counts; (7) int8 routes: one calibration table per session, from the reference
# inputs, recorded under the digest the session's settings name, every int8
# candidate built, and an int8 engine carrying that table; (8) halving, confirmation
# and the noise check time the reference inputs, not zeros; (9) a Ctrl-C during the
# holdout check rejects nobody and ships the default route; (10) a finalist no faster
# than the default runs every planned confirmation round; (11) a Ctrl-C before the
# default route is measured exits 130 and writes no engine; (12) a holdout pair equal
# to a reference pair, a --calibration naming a holdout folder or holding a holdout
# pair's inputs, and --min-margin 1 are refused; --min-margin holds on the holdout
# check too; the report carries the margins and, for top1, the confidence bound.
# Prints `N passed, N failed`.
set -uo pipefail

models=${1:?usage: check_tune.sh MODELS_DIR}
nnroute=$(realpath "${NNROUTE:-build/nnroute}")
py=/usr/bin/python3
model=$(realpath "$models/mlp_op13.onnx")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export NNROUTE_TEST_KNOBS=1
passed=0 failed=0

ok() { echo "PASS $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

# interrupt_after PID LOG PATTERN DELAY: once LOG shows PATTERN (at most 60 s), waits
# DELAY seconds, sends PID a Ctrl-C and returns its exit status.
interrupt_after() {
  local pid=$1 log=$2 pattern=$3 delay=$4
  for _ in $(seq 1 1200); do
    grep -q "$pattern" "$log" 2>/dev/null && break
    sleep 0.05
  done
  sleep "$delay"
  kill -INT "$pid"
  wait "$pid"
}

routes='-test.fault=* -test.perturb=[0|1e-2] -test.delay_ms=[0|5]'
common=(--threads 1 --candidate-timeout 4 --mem-limit 2048 --screen-ms 20
        --confirm-rounds 9 --tolerance 1e-3 --metric rel_l2 --seed 3)

# sql DB QUERY: prints the rows of a query (values separated by '|').
sql() {
  "$py" - "$1" "$2" <<'EOF'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for row in con.execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in row))
EOF
}

# ---- (1) every status, the known winner -----------------------------------------
db1=$work/t1.db
"$nnroute" tune "$model" --routes "$routes" --search full --db "$db1" \
  -o "$work/t1.nre" --report "$work/t1.json" "${common[@]}" >"$work/t1.out" 2>"$work/t1.err"
rc=$?
check "tune completes (exit $rc)" test $rc -eq 0
[[ $rc -ne 0 ]] && tail -n 30 "$work/t1.err"
statuses=$(sql "$db1" "select distinct status from candidates order by status" | tr '\n' ' ')
for s in ok build_error crash timeout oom nonfinite accuracy_fail run_error; do
  check "status $s classified" grep -qw "$s" <<<"$statuses"
done
check "crash records SIGSEGV" test "$(sql "$db1" \
  "select count(*) from candidates where status='crash' and signal=11")" -ge 1
total=$(sql "$db1" "select count(*) from candidates")
distinct=$(sql "$db1" "select count(distinct route) from candidates")
# 7 faults x 2 perturbations x 2 delays, the default route among them.
check "all 32 routes recorded once ($total rows, $distinct distinct)" \
  test "$total" -eq 32 -a "$distinct" -eq 32
winner=$(sql "$db1" "select winner_route from sessions")
check "winner is the route without the sleep ('$winner')" test "$winner" = "-test.delay_ms=0"
check "session done" test "$(sql "$db1" "select state from sessions")" = done
check "engine written and loadable" \
  bash -c "'$nnroute' inspect '$work/t1.nre' | grep -q 'test.delay_ms=0'"
# Versions: the database keys its environment on the version (with the commit) and
# the sources hash `nnroute --version` prints, so a kernel change is another
# environment; the engine records the version.
ver=$("$nnroute" --version | sed -n 's/^nnroute \([^ ]*\) (sources \([0-9a-f]\{16\}\))$/\1 sources \2/p')
check "the database's environment is version and sources ('$ver')" \
  test -n "$ver" -a "$(sql "$db1" "select nnroute_version from environments")" = "$ver"
check "the engine records the version" test -n "$ver" -a "$("$nnroute" inspect "$work/t1.nre" \
  --json | "$py" -c 'import json, sys; print(json.load(sys.stdin)["nnroute_version"])')" = "${ver%% *}"
check "report names the winner, confirmation and frontier" "$py" - "$work/t1.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
w = r["winner"]
assert w["route"] == "-test.delay_ms=0", w
assert w["confirmed_speedup"] > 1, w
assert r["confirmation"]["significant_gain"] is True
c = r["confirmation"]  # 9 rounds, or at least 5 when every finalist was clear early
assert c["planned_rounds"] >= 9 and 5 <= c["rounds"] <= c["planned_rounds"], c
assert len(r["candidates"]) == 32
assert any(c["status"] == "nonfinite" for c in r["candidates"])
assert r["pareto"] and r["break_even_inferences"] is not None
att = r["attribution"]
assert att and att[0]["knob"] == "test.delay_ms" and att[0]["slowdown_without_it"] > 1
EOF

# ---- (2) choosing again at a looser tolerance -----------------------------------
feasible() { "$nnroute" report "$1" "${@:2}" | sed -n 's/.*: \([0-9]*\) of [0-9]* candidates feasible/\1/p'; }
f_tight=$(feasible "$db1")
f_loose=$(feasible "$db1" --tolerance 0.1)
f_json=$(feasible "$work/t1.json" --tolerance 0.1)
# perturb=1e-2 gives rel_l2 = 1e-2 exactly: feasible at 0.1, not at 1e-3 (two such
# routes run cleanly, delay 0 and 5).
check "report re-chooses: $f_tight feasible at 1e-3, $f_loose at 0.1" \
  test -n "$f_tight" -a "$f_loose" = "$((f_tight + 2))"
check "report reads the JSON report the same way ($f_json)" test "$f_json" = "$f_loose"

# ---- (3) kill -9 and --continue --------------------------------------------------
db2=$work/t2.db
"$nnroute" tune "$model" --routes "$routes" --search full --db "$db2" "${common[@]}" \
  >"$work/t2a.out" 2>"$work/t2a.err" &
pid=$!
for _ in $(seq 1 600); do
  n=$(sql "$db2" "select count(*) from candidates" 2>/dev/null || echo 0)
  [[ ${n:-0} -ge 10 ]] && break
  sleep 0.1
done
kill -9 $pid
wait $pid 2>/dev/null
before=$(sql "$db2" "select count(*) from candidates")
check "killed mid-session ($before of 32 recorded)" test "$before" -ge 10 -a "$before" -lt 32
"$nnroute" tune "$model" --routes "$routes" --search full --db "$db2" "${common[@]}" \
  --continue -o "$work/t2.nre" >"$work/t2b.out" 2>"$work/t2b.err"
rc=$?
check "--continue completes (exit $rc)" test $rc -eq 0
check "resumed the same session" grep -q "resuming session 1" "$work/t2b.err"
total=$(sql "$db2" "select count(*) from candidates")
distinct=$(sql "$db2" "select count(distinct route) from candidates")
check "every route exactly once after resume ($total rows, $distinct distinct)" \
  test "$total" -eq 32 -a "$distinct" -eq 32
check "one session in the database" test "$(sql "$db2" "select count(*) from sessions")" -eq 1
check "recorded candidates were replayed, not rebuilt" \
  test "$(grep -c '(recorded)' "$work/t2b.err")" -ge "$((before - 1))"
check "same winner after resume" \
  test "$(sql "$db2" "select winner_route from sessions")" = "$winner"

# ---- (4) Ctrl-C, then a changed environment ------------------------------------
db3=$work/t3.db
"$nnroute" tune "$model" --routes "$routes" --search full --db "$db3" "${common[@]}" \
  -o "$work/t3.nre" >"$work/t3a.out" 2>"$work/t3a.err" &
pid=$!
for _ in $(seq 1 600); do
  n=$(sql "$db3" "select count(*) from candidates" 2>/dev/null || echo 0)
  [[ ${n:-0} -ge 6 ]] && break
  sleep 0.1
done
kill -INT $pid
wait $pid
rc=$?
check "Ctrl-C exits 130 (exit $rc)" test $rc -eq 130
check "Ctrl-C marks the session interrupted" \
  test "$(sql "$db3" "select state from sessions")" = interrupted
check "Ctrl-C writes the best engine so far" test -s "$work/t3.nre"
# Nothing was confirmed and holdout-checked yet: the engine is the default route's,
# never a screening winner.
check "Ctrl-C before the choice ships the default route" \
  test "$(sql "$db3" "select winner_route from sessions")" = "" -a \
  "$(sql "$db3" "select count(*) from sessions where winner_route = ''")" = 1
# Results of another machine (here: the same file with its fingerprint edited) are
# never resumed: --continue starts a new session and builds everything again.
"$py" -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"update environments set fingerprint = fingerprint || ';edited'\"); c.commit()" "$db3"
"$nnroute" tune "$model" --routes "$routes" --search full --db "$db3" "${common[@]}" \
  --continue >"$work/t3b.out" 2>"$work/t3b.err"
check "another environment's session is not resumed" \
  grep -q "found no unfinished session" "$work/t3b.err"
check "nothing replayed from another environment" \
  test "$(grep -c '(recorded)' "$work/t3b.err")" -eq 0
check "a second session holds all 32 routes" \
  test "$(sql "$db3" "select count(*) from candidates where session_id = 2")" -eq 32

# --priors: the records of that other environment may order the search, nothing more.
# `fast` tries one-knob changes in dimension order (test.fault first), but with priors
# the value that was fastest there (test.delay_ms=0) comes first; with a budget of two
# builds it is the only change tried, and it is built, not copied.
"$nnroute" tune "$model" --routes "$routes" --search fast --db "$db3" "${common[@]}" \
  --priors --budget-builds 2 >"$work/t3c.out" 2>"$work/t3c.err"
check "--priors orders the search" test "$(sql "$db3" \
  "select route from candidates where session_id = 3 order by seq")" = \
  "$(printf '\n%s' '-test.delay_ms=0')"
check "--priors reuses no result" test "$(grep -c '(recorded)' "$work/t3c.err")" -eq 0

# ---- (5) reference data from files; a winner that fails the holdout is rejected ----
# Reference: the model's input and ONNX Runtime's output for it. Holdout: another
# input (the reference one halved) with the reference executor's output for it scaled
# by 1.5, so every route fails it: the fast route must be rejected after its
# confirmation and the default route kept.
ref=$work/ref hold=$work/hold
mkdir -p "$ref" "$hold"
cp "$models/mlp_op13/input.npy" "$models/mlp_op13/ref/"*.npy "$ref/"
# holdout_like DIR SCALE: DIR holds the halved reference input and the reference
# executor's output for it times SCALE.
holdout_like() {
  mkdir -p "$1"
  "$py" -c 'import numpy as np, sys; x = np.load(sys.argv[1]); np.save(sys.argv[2], (x * 0.5).astype(x.dtype))' \
    "$ref/input.npy" "$1/input.npy"
  "$nnroute" run "$model" --reference --inputs-dir "$1" --output-dir "$1" >/dev/null
  "$py" - "$1" "$2" <<'EOF2'
import numpy as np, pathlib, sys
for f in pathlib.Path(sys.argv[1]).glob("*.npy"):
    if f.name != "input.npy":
        y = np.load(f)
        np.save(f, (y * float(sys.argv[2])).astype(y.dtype))
EOF2
}
holdout_like "$hold" 1.5
# The default route fails the holdout as well: tune says so, exits non-zero and
# writes no engine, unless --write-unchecked asks for it.
"$nnroute" tune "$model" --routes '-test.delay_ms=[0|5]' --search full --db "$work/t5.db" \
  --reference "$ref" --holdout "$hold" "${common[@]}" --report "$work/t5.json" \
  -o "$work/t5.nre" >"$work/t5.out" 2>"$work/t5.err"
rc=$?
check "a default route failing the holdout fails the session (exit $rc)" test $rc -eq 1
check "it says the default route fails the holdout pairs" \
  grep -q "default route itself fails the holdout" "$work/t5.err"
check "no engine written when the default fails the holdout" test ! -e "$work/t5.nre"
"$nnroute" tune "$model" --routes '-test.delay_ms=[0|5]' --search full --db "$work/t5b.db" \
  --reference "$ref" --holdout "$hold" "${common[@]}" -o "$work/t5b.nre" \
  --write-unchecked >"$work/t5b.out" 2>"$work/t5b.err"
rc=$?
check "--write-unchecked writes it anyway (exit $rc)" test $rc -eq 0 -a -s "$work/t5b.nre"
check "the winner failing the holdout is rejected, the default kept" "$py" - "$work/t5.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
fin = r["confirmation"]["finalists"]
assert fin and fin[0]["route"] == "-test.delay_ms=0" and fin[0]["significant"], fin
assert fin[0]["holdout_ok"] is False and fin[0]["holdout_margin"] < 0, fin
assert fin[0]["reference_margin"] > 0, fin
assert r["winner"]["route"] == "" and r["confirmation"]["significant_gain"] is False
assert r["confirmation"]["default_holdout_ok"] is False and r["engine_written"] is False
EOF2

# ---- (6) dry runs ----------------------------------------------------------------
n_full=$("$nnroute" tune "$model" --routes "$routes" --search full --dry-run |
  sed -n 's/^search full proposes \([0-9]*\) routes.*/\1/p')
n_fast=$("$nnroute" tune "$model" --routes "$routes" --search fast --dry-run |
  sed -n 's/^search fast proposes \([0-9]*\) routes.*/\1/p')
# fast: the default plus every one-knob change: 1 + 6 + 1 + 1.
check "dry run counts full=$n_full fast=$n_fast" test "$n_full" = 32 -a "$n_fast" = 10

# ---- (7) int8 candidates and their calibration ------------------------------------
db7=$work/t7.db
"$nnroute" tune "$model" --routes '-precision@*=[fp32|int8]' --search full --db "$db7" \
  --threads 1 --screen-ms 20 --confirm-rounds 9 --metric rel_l2 --tolerance 1 \
  --report "$work/t7.json" >"$work/t7.out" 2>"$work/t7.err"
rc=$?
check "int8 tune completes (exit $rc)" test $rc -eq 0
[[ $rc -ne 0 ]] && tail -n 20 "$work/t7.err"
digest=$(sql "$db7" "select json_extract(settings, '$.calibration') from sessions")
check "one calibration table, the one the session names (${digest:0:12})" \
  test "$(sql "$db7" "select count(*) from calibrations where sha256 = '$digest'")" = 1 \
  -a "$(sql "$db7" "select count(*) from calibrations")" = 1 -a ${#digest} -eq 64
n_int8=$(sql "$db7" "select count(*) from candidates where route like '%int8%' and status = 'ok'")
n_all=$(sql "$db7" "select count(*) from candidates where route like '%int8%'")
check "every int8 candidate built and ran ($n_int8 of $n_all)" test "$n_int8" -ge 1 -a "$n_int8" = "$n_all"
"$nnroute" build "$model" --route '-precision@*=int8' --calibration random:3 \
  --save-calibration "$work/t7.calib" -o "$work/t7.nre" >/dev/null 2>"$work/t7b.err"
want=$("$py" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' \
  "$work/t7.calib" 2>/dev/null)
got=$("$nnroute" inspect "$work/t7.nre" --json 2>/dev/null | "$py" -c \
  'import json, sys; print(json.load(sys.stdin).get("calibration", {}).get("sha256", ""))')
check "an int8 engine carries its calibration table (${got:0:12})" test -n "$want" -a "$got" = "$want"
check "other calibration data, another table" test "$got" != "$digest"
"$nnroute" build "$model" --route '-precision@*=int8' -o "$work/t7c.nre" >/dev/null 2>"$work/t7c.err"
check "int8 without calibration data is refused, naming the flag" \
  grep -q -- "--calibration" "$work/t7c.err"

# ---- (8) every measurement times the reference inputs, never zeros ----------------
# test.on_zeros=nan returns a NaN exactly when the model's input is all zeros: the
# route is fast and feasible on the reference inputs, so it must win. A measurement
# that timed zeros (halving, confirmation, the noise check) would see the NaN and drop
# it, and the default route would be kept.
"$nnroute" tune "$model" --routes '-test.on_zeros=nan -test.delay_ms=0' --search full \
  --db "$work/t8.db" "${common[@]}" --report "$work/t8.json" >"$work/t8.out" 2>"$work/t8.err"
rc=$?
check "tune with a route that fails on zeros completes (exit $rc)" test $rc -eq 0
check "the route that fails only on zeros is confirmed and wins" "$py" - "$work/t8.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["winner"]["route"] == "-test.delay_ms=0 -test.on_zeros=nan", r["winner"]
fin = r["confirmation"]["finalists"]
assert fin and fin[0]["significant"] and fin[0]["p_holm"] <= 0.05, fin
EOF2
grep -q "re-measuring.*failed" "$work/t8.err" && tail -n 5 "$work/t8.err"

# ---- (9) Ctrl-C during the holdout check rejects nobody -----------------------------
# 1500 holdout pairs at 1 ms per inference give the finalist's check about 1.5 s (the
# default route's, at 5 ms, comes first); the interrupt lands in it. The finalist must not be reported as failing the holdout,
# and the engine written is the default route's (nothing confirmed passed yet).
"$nnroute" tune "$model" --routes '-test.delay_ms=1' --search full --db "$work/t9.db" \
  "${common[@]}" --candidate-timeout 60 --holdout-pairs 1500 -o "$work/t9.nre" \
  >"$work/t9.out" 2>"$work/t9.err" &
interrupt_after $! "$work/t9.err" "checking '-test.delay_ms=1' on" 0.3
rc=$?
check "Ctrl-C during the holdout check exits 130 (exit $rc)" test $rc -eq 130
check "the interrupted holdout check rejects nobody" \
  bash -c "! grep -q 'fails the holdout pairs' '$work/t9.err'"
check "after it the default route's engine is written" test -s "$work/t9.nre" -a \
  "$(sql "$work/t9.db" "select winner_route from sessions")" = ""

# ---- (11) Ctrl-C before the default route is measured ---------------------------------
# 20000 reference pairs keep the default candidate's accuracy runs going for a while;
# the interrupt lands there: exit 130, the session interrupted, no engine.
"$nnroute" tune "$model" --routes '-test.delay_ms=1' --search full --db "$work/t11.db" \
  "${common[@]}" --candidate-timeout 120 --pairs 20000 -o "$work/t11.nre" \
  >"$work/t11.out" 2>"$work/t11.err" &
interrupt_after $! "$work/t11.err" "preparing reference data" 0.5
rc=$?
check "Ctrl-C before the default route is measured exits 130 (exit $rc)" test $rc -eq 130
check "... marks the session interrupted and writes no engine" test ! -e "$work/t11.nre" -a \
  "$(sql "$work/t11.db" "select state from sessions")" = interrupted

# ---- (10) a finalist no faster than the default: every round runs ----------------------
# test.perturb=1e-6 changes nothing but the outputs' last bits: its per-round ratios
# stay within 10% of 1, so the confirmation cannot stop early and runs all its planned
# rounds (the decision itself is not asserted: it rests on timings).
"$nnroute" tune "$model" --routes '-test.perturb=1e-6' --search full --db "$work/t10.db" \
  "${common[@]}" --report "$work/t10.json" >"$work/t10.out" 2>"$work/t10.err"
rc=$?
check "tune with a no-gain finalist completes (exit $rc)" test $rc -eq 0
check "a no-gain finalist gets every planned confirmation round" "$py" - "$work/t10.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["confirmation"]
assert c["planned_rounds"] >= 9 and c["rounds"] == c["planned_rounds"], c
fin = c["finalists"]
assert len(fin) == 1 and fin[0]["route"] == "-test.perturb=1e-6", fin
assert 0 <= fin[0]["p_value"] <= 1 and fin[0]["p_holm"] == fin[0]["p_value"], fin
EOF2

# ---- (12) holdout data stays out of choosing; margins and confidence bounds --------
# A holdout pair with a reference pair's inputs is refused before anything is built,
# naming both; so is --calibration naming a holdout folder (here through a symlink),
# and a calibration sample equal to a holdout pair's inputs.
same=$work/same
mkdir -p "$same" && cp "$ref/input.npy" "$same/" && cp "$hold/logits.npy" "$same/"
"$nnroute" tune "$model" --routes '-test.delay_ms=[0|5]' --db "$work/t12a.db" \
  --reference "$ref" --holdout "$same" "${common[@]}" >"$work/t12a.out" 2>"$work/t12a.err"
rc=$?
check "a holdout pair equal to a reference pair is refused (exit $rc)" test $rc -eq 1 -a \
  ! -e "$work/t12a.db"
check "... naming both pairs" grep -q "holdout pair '$same' has the same inputs as reference pair '$ref'" \
  "$work/t12a.err"
ln -s "$hold" "$work/hold_link"
"$nnroute" tune "$model" --routes '-test.delay_ms=[0|5]' --db "$work/t12b.db" \
  --reference "$ref" --holdout "$hold" --calibration "$work/hold_link" "${common[@]}" \
  >"$work/t12b.out" 2>"$work/t12b.err"
rc=$?
check "--calibration naming the holdout folder by a symlink is refused (exit $rc)" \
  test $rc -eq 1 -a ! -e "$work/t12b.db"
check "... saying so" grep -q "is the --holdout folder '$hold'" "$work/t12b.err"
cal=$work/cal
mkdir -p "$cal" && cp "$hold/input.npy" "$cal/"
"$nnroute" tune "$model" --routes '-precision@*=[fp32|int8]' --db "$work/t12c.db" \
  --reference "$ref" --holdout "$hold" --calibration "$cal" "${common[@]}" \
  >"$work/t12c.out" 2>"$work/t12c.err"
rc=$?
check "a calibration sample equal to a holdout pair is refused (exit $rc)" test $rc -eq 1 \
  -a ! -e "$work/t12c.db"
check "... naming both" grep -q "calibration sample '$cal' has the same inputs as holdout pair '$hold'" \
  "$work/t12c.err"
"$nnroute" tune "$model" --min-margin 1 --dry-run >/dev/null 2>"$work/t12d.err"
rc=$?
check "--min-margin 1 is refused (exit $rc)" test $rc -eq 2
check "... saying what it takes" grep -q "0 <= F < 1" "$work/t12d.err"
# --min-margin on the holdout check too: test.perturb=1e-4 has rel_l2 1e-4 on the
# reference pairs (90% of 1e-3 left). The holdout outputs are scaled by 1 - 4.5e-4:
# there the route's loss is 5.5e-4 and the default route's 4.5e-4. With
# --min-margin 0.5 (losses up to 5e-4) the fast route passes the reference pairs but
# fails the holdout pairs and the default route is shipped; without, it wins.
mhold=$work/mhold
holdout_like "$mhold" 0.99955
for f in 0.5 0; do
  "$nnroute" tune "$model" --routes '-test.perturb=1e-4 -test.delay_ms=0' --search full \
    --db "$work/t12m$f.db" --reference "$ref" --holdout "$mhold" "${common[@]}" \
    --min-margin $f --report "$work/t12m$f.json" >"$work/t12m$f.out" 2>"$work/t12m$f.err"
  rc=$?
  check "tune --min-margin $f completes (exit $rc)" test $rc -eq 0
done
check "--min-margin 0.5 rejects a finalist short of it on the holdout pairs" \
  grep -q "fails the holdout pairs (margin .*--min-margin asks 50%); rejected" "$work/t12m0.5.err"
check "the margins in the report, and the same route winning without the margin" \
  "$py" - "$work/t12m0.5.json" "$work/t12m0.json" <<'EOF2'
import json, sys
strict, loose = (json.load(open(p)) for p in sys.argv[1:3])
fast = "-test.perturb=1e-4 -test.delay_ms=0"
assert strict["settings"]["min_margin"] == 0.5 and loose["settings"]["min_margin"] == 0
fin = strict["confirmation"]["finalists"][0]
assert fin["route"] == fast and fin["significant"] and not fin["holdout_ok"], fin
assert abs(fin["reference_margin_fraction"] - 0.9) < 1e-3, fin
assert abs(fin["holdout_margin_fraction"] - 0.45) < 2e-3, fin
w = strict["winner"]
assert w["route"] == "" and strict["confirmation"]["default_holdout_ok"] is True, w
acc = w["accuracy"]
assert acc["metric"] == "rel_l2" and acc["min_margin"] == 0.5 and acc["confidence"] == 0.95
assert acc["reference"]["within"] and acc["holdout"]["within"], acc
assert abs(acc["holdout"]["margin_fraction"] - 0.55) < 2e-3, acc
out = acc["outputs"][0]
assert out["holdout"]["pairs"] == 1 and out["holdout"]["max"] == out["holdout"]["p95"], out
assert abs(out["holdout"]["max"] - 4.5e-4) < 5e-6, out
lw = loose["winner"]
assert lw["route"] == fast and abs(lw["holdout_margin_fraction"] - 0.45) < 2e-3, lw
assert lw["accuracy"]["outputs"][0]["holdout"]["p95"] > 5e-4, lw
EOF2
# nnroute report honours the recorded margin, and another one.
check "report re-chooses with the recorded margin" \
  grep -q "1 of 2 candidates feasible" <("$nnroute" report "$work/t12m0.5.json" --min-margin 0.95)
check "report at --min-margin 0.5 skips the route that failed the holdout" \
  grep -q "not chosen: -test.perturb=1e-4 -test.delay_ms=0 fails the holdout pairs" \
  <("$nnroute" report "$work/t12m0.5.db")
# top1: 100 generated holdout pairs of one row each, none changed: the bound is the
# closed form 1 - 0.05^(1/100) = 2.95%, stated on 100 held-out inputs.
"$nnroute" tune "$model" --routes '-test.delay_ms=0' --search full --db "$work/t12t.db" \
  "${common[@]}" --metric top1 --tolerance 0.05 --holdout-pairs 100 \
  --report "$work/t12t.json" >"$work/t12t.out" 2>"$work/t12t.err"
rc=$?
check "top1 tune completes (exit $rc)" test $rc -eq 0
check "it states the bound" grep -q "disagreement <= 2.95% with 95% confidence on 100 held-out inputs" \
  "$work/t12t.out"
check "the bound in the report" "$py" - "$work/t12t.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
h = r["winner"]["accuracy"]["outputs"][0]["holdout"]
assert h["trials"] == 100 and h["disagreeing"] == 0 and h["trial"] == "row", h
assert abs(h["upper_bound"] - (1 - 0.05 ** (1 / 100))) < 1e-9, h
assert r["settings"]["holdout_rows"] == [1] and r["settings"]["holdout_elements"] == [10]
EOF2

echo "$passed passed, $failed failed"
((failed == 0))
