#!/usr/bin/env bash
# repeatability.sh - runs N independent tuning sessions of one model, each in a fresh
# process with its own database, and reports how often the winner lands within 2% of
# the best confirmed route and how often two sessions agree on the winner. A
# benchmark, not a test: the target is 9 of 10 sessions within 2%.
#
#   bash bench/tune/repeatability.sh MODEL [N] [-- TUNE ARGS...]
#
# N defaults to 10. Each route's confirmed speedup is averaged over the sessions that
# confirmed it (the default route is 1.0); the best confirmed route is the one with
# the highest average, and a session's winner is "within 2%" when its average is at
# least best / 1.02. The per-round noise of all the sessions (measured_sigma.py) is
# printed too, for bench/tune/select_bench.c's --sigma. NNROUTE picks the binary
# (default build/nnroute); work files go to build/repeatability/ (REPEAT_OUT).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
model=$(realpath "${1:?usage: repeatability.sh MODEL [N] [-- TUNE ARGS...]}")
shift
n=10
if [[ $# -gt 0 && $1 != -- ]]; then n=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
nnroute=$(realpath "${NNROUTE:-$repo/build/nnroute}")
out=${REPEAT_OUT:-$repo/build/repeatability}
rm -rf "$out" && mkdir -p "$out"

echo "repeatability $(date -u +%Y-%m-%dT%H:%MZ), $("$nnroute" --version), $(basename "$model")"
echo "command: nnroute tune MODEL --db SESSION.db --report SESSION.json $*"
for i in $(seq 1 "$n"); do
  t0=$(date +%s)
  "$nnroute" tune "$model" --db "$out/s$i.db" --report "$out/s$i.json" -o "$out/s$i.nre" \
    "$@" >"$out/s$i.out" 2>"$out/s$i.err"
  rc=$?
  echo "session $i: exit $rc, $(( $(date +%s) - t0 )) s"
done

/usr/bin/python3 - "$out" "$n" <<'EOF'
import itertools, json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
winners, speed = [], {}
for i in range(1, n + 1):
    try:
        r = json.load(open(os.path.join(out, f"s{i}.json")))
    except (OSError, ValueError):
        winners.append(None)
        continue
    winners.append(r.get("winner", {}).get("route", ""))
    speed.setdefault("", []).append(1.0)
    for f in r.get("confirmation", {}).get("finalists", []):
        s = f.get("confirmed_speedup")
        if isinstance(s, (int, float)) and s == s and s > 0:
            speed.setdefault(f["route"], []).append(s)
mean = {k: sum(v) / len(v) for k, v in speed.items()}
best = max(mean, key=mean.get) if mean else ""
ok = [w for w in winners if w is not None]
within = sum(1 for w in ok if mean.get(w, 1.0) >= mean.get(best, 1.0) / 1.02)
pairs = list(itertools.combinations(ok, 2))
agree = sum(1 for a, b in pairs if a == b)
print()
print(f"best confirmed route: '{best}' ({mean.get(best, 1.0):.3f}x, over "
      f"{len(speed.get(best, []))} sessions)")
for w in sorted(set(ok), key=lambda w: -ok.count(w)):
    print(f"  winner '{w}': {ok.count(w)} sessions, confirmed {mean.get(w, 1.0):.3f}x")
print(f"sessions finished: {len(ok)} of {n}")
print(f"winner within 2% of the best confirmed route: {within} of {len(ok)}")
print(f"session pairs agreeing on the winner: {agree} of {len(pairs)}")
EOF
echo "per-round log-ratio sigma: $(/usr/bin/python3 "$repo/bench/tune/measured_sigma.py" "$out"/s*.db 2>&1)"
