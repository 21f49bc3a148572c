#!/usr/bin/env python3
"""measured_sigma.py - the per-round noise of a real tuning session, for select_bench.

Reads the confirmation rounds a tuning database recorded (stage 'confirm': in each
round the default route D and the finalists F in timing order, D F1 D F2 .. D) and
prints the standard deviation of the per-round log latency ratio
log F - (log D_before + log D_after) / 2 around each finalist's own mean, pooled over
the finalists: the sigma that build/bench/nr_select_bench --sigma takes.

    python3 bench/tune/measured_sigma.py DB [DB ...]
"""
import math
import sqlite3
import sys


def session_logratios(path):
    """{(db, candidate): [log ratio per round]} for every finalist in the file."""
    con = sqlite3.connect(path)
    default = {row[0] for row in con.execute("select id from candidates where route = ''")}
    rows = con.execute(
        "select m.round, m.candidate_id, m.median_ms, c.session_id from measurements m "
        "join candidates c on c.id = m.candidate_id where m.stage = 'confirm' "
        "order by m.id").fetchall()
    rounds = {}
    for rnd, cand, med, sess in rows:
        rounds.setdefault((sess, rnd), []).append((cand, med))
    out = {}
    for slots in rounds.values():
        for k in range(1, len(slots) - 1):
            cand, med = slots[k]
            d0, d1 = slots[k - 1], slots[k + 1]
            if cand in default or d0[0] not in default or d1[0] not in default:
                continue
            if med and d0[1] and d1[1] and med > 0 and d0[1] > 0 and d1[1] > 0:
                lr = math.log(med) - 0.5 * (math.log(d0[1]) + math.log(d1[1]))
                out.setdefault((path, cand), []).append(lr)
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ss, dof = 0.0, 0
    for path in sys.argv[1:]:
        for x in session_logratios(path).values():
            if len(x) >= 2:
                m = sum(x) / len(x)
                ss += sum((v - m) ** 2 for v in x)
                dof += len(x) - 1
    if dof == 0:
        sys.exit("measured_sigma: no confirmation rounds with finalists in these files")
    print(f"{math.sqrt(ss / dof):.4f}  (pooled over {dof} degrees of freedom)")


if __name__ == "__main__":
    main()
