"""zoo_survey.py - one table of how nnroute does on the model zoo: default/ORT ratios from
a run_perf.py report, and the steps on the reference tactic with their share of the time
from check_zoo.sh runs with NR_ZOO_PROFILE=1.

    zoo_survey.py PERF.md T1_OUT [T2_OUT ...]

PERF.md is the file `bench/perf/perf.sh --models-dir build/zoo --models all` wrote (its
"Raw data" JSON block is read); each T*_OUT is an NR_ZOO_OUT folder of check_zoo.sh run
at one thread count (its <model>/steps.json and <model>/inspect.json; the thread count
is read from the engine). Prints a markdown table, one row per model: the median
default/ORT ratio per thread count, the reference-tactic steps of the default engine, the
share of the profiled time they take per thread count, the largest groups, and the
error when nnroute could not build or run the model. Nothing is measured here.
"""
import json
import os
import re
import sys

TOP_GROUPS = 3


def perf_rows(path):
    text = open(path).read()
    block = re.search(r"```json\n(.*?)\n```", text, re.S)
    if not block:
        sys.exit(f"zoo_survey: no raw-data JSON block in {path}")
    data = json.loads(block.group(1))
    out = {}
    for row in data["rows"]:
        r = row.get("ratio_default")
        err = row["default"].get("error") or row["ort"].get("error")
        out[(row["model"], row["threads"])] = (r["median"] if r else None, err)
    return out, sorted({t for _, t in out})


def check_dirs(dirs):
    """{(model, threads): steps dict} from check_zoo.sh output folders."""
    out = {}
    for d in dirs:
        for model in sorted(os.listdir(d)):
            steps, inspect = (os.path.join(d, model, f) for f in ("steps.json",
                                                                  "inspect.json"))
            if os.path.exists(steps) and os.path.exists(inspect):
                threads = json.load(open(inspect))["threads"]
                out[(model, threads)] = json.load(open(steps))
    return out


def short(err):
    err = re.sub(r"^(build|bench) exit \d+: nnroute: ", "", err or "")
    return err.replace("|", "/")[:110]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    perf, threads = perf_rows(sys.argv[1])
    steps = check_dirs(sys.argv[2:])
    models = sorted({m for m, _ in perf})
    head = ["model"] + [f"default/ORT {t} thr" for t in threads] + ["ref steps"] + \
        [f"ref share {t} thr" for t in threads] + ["largest reference groups / error"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for m in models:
        cells = [m]
        errs = []
        for t in threads:
            ratio, err = perf.get((m, t), (None, None))
            cells.append(f"{ratio:.2f}" if ratio else "error")
            if err and not ratio:
                errs.append(short(err))
        s = next((steps[(m, t)] for t in threads if (m, t) in steps), None)
        cells.append(f"{s['ref_steps']} of {s['steps']}" if s else "no engine")
        for t in threads:
            st = steps.get((m, t))
            has_pct = st and any(g["pct"] for g in st["groups"].values())
            cells.append(f"{st['ref_pct']:.0f}%" if has_pct or (st and not st["ref_steps"])
                         else "n/a")
        if s and s["groups"]:
            g = sorted(s["groups"].items(), key=lambda kv: (-kv[1]["pct"], -kv[1]["count"]))
            desc = ", ".join(f"{v['count']}x {k}" for k, v in g[:TOP_GROUPS])
        else:
            desc = ""
        if errs:
            desc = (desc + "; " if desc else "") + errs[0]
        cells.append(desc.replace("|", "/"))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
