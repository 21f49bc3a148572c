"""report.py - turns run_perf.py's measurements into the text it prints and the file
docs/performance.md it writes.

Key decision: the report text is made once and used twice. run_perf.py prints
`report_text()` and `write_doc()` embeds that very string (plus prose before it and
the raw JSON after it), so the numbers in the doc are the ones the command printed, by
construction rather than by care. All statistics over rounds are computed here from the
per-round medians that run_perf.py records: the value of a system is the median of its
round medians; a ratio is the median of the per-round ratios (each round's systems ran
back to back, so a ratio cancels the machine's slow drifts), shown with its min-max over
rounds.
"""
import json
import math
import statistics

SYSTEMS = ("ort", "default", "tuned")
TARGETS = {"default_geomean": 1.0, "default_worst": 1.25, "tuned_geomean": 0.85}


def summarize(row):
    """Adds medians and ratios to a row whose systems hold per-round `rounds` lists."""
    for s in SYSTEMS:
        sysd = row[s]
        ok = [v for v in sysd.get("rounds", []) if v is not None]
        sysd["median_ms"] = statistics.median(ok) if ok and not sysd.get("error") else None
    ort_rounds = row["ort"].get("rounds", [])
    for s in ("default", "tuned"):
        pairs = zip(ort_rounds, row[s].get("rounds", []))
        ratios = [b / a for a, b in pairs if a and b]
        usable = ratios and row["ort"]["median_ms"] and row[s]["median_ms"]
        row["ratio_" + s] = ({"median": statistics.median(ratios), "min": min(ratios),
                              "max": max(ratios), "rounds": ratios} if usable else None)
    return row


def geomeans(rows, threads):
    """Per thread count: geometric mean and worst of each ratio over the rows that have it."""
    out = {}
    for t in threads:
        entry = {"threads": t}
        for s in ("default", "tuned"):
            rs = [(r["model"], r["ratio_" + s]["median"]) for r in rows
                  if r["threads"] == t and r["ratio_" + s]]
            entry[s] = ({"geomean": math.exp(statistics.fmean(math.log(v) for _, v in rs)),
                         "n": len(rs), "worst": max(v for _, v in rs),
                         "worst_model": max(rs, key=lambda p: p[1])[0]} if rs else None)
        entry["models"] = sum(1 for r in rows if r["threads"] == t)
        out[t] = entry
    return out


def fmt_ms(v):
    """Four significant digits or so, from resnet50's 100+ ms to mlp's 0.05 ms."""
    if v is None:
        return "n/a"
    for limit, digits in ((100, 1), (10, 2), (1, 3)):
        if v >= limit:
            return f"{v:.{digits}f}"
    return f"{v:.4f}"


def _system_cell(row, s):
    d = row[s]
    if d.get("error"):
        return "error"
    if d.get("status") == "n/a":
        return "n/a"
    return fmt_ms(d.get("median_ms"))


def _ratio_cell(row, s):
    r = row["ratio_" + s]
    if r is None:
        return "error" if row[s].get("error") or row["ort"].get("error") else "n/a"
    text = f"{r['median']:.2f}"
    if s == "default" and r["median"] > TARGETS["default_worst"]:
        text = f"**{text}**"  # above the per-model limit
    return f"{text} ({r['min']:.2f}-{r['max']:.2f})"


def _gflops_cell(row, s, peaks):
    ms = row[s].get("median_ms")
    if ms is None or not row.get("flops"):
        return "n/a"
    g = row["flops"] / (ms * 1e6)
    peak = peaks.get(row["threads"])
    return f"{g:.1f} ({100 * g / peak:.0f}%)" if peak else f"{g:.1f}"


def table(rows, peaks):
    head = ("| model | thr | ORT ms | default ms | default/ORT (min-max) | tuned ms "
            "| tuned/ORT (min-max) | GFLOP | default GFLOP/s (% peak) "
            "| ORT GFLOP/s (% peak) |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        gflop = f"{r['flops'] / 1e9:.3f}" if r.get("flops") else "n/a"
        lines.append(
            f"| {r['model']} | {r['threads']} | {_system_cell(r, 'ort')} "
            f"| {_system_cell(r, 'default')} | {_ratio_cell(r, 'default')} "
            f"| {_system_cell(r, 'tuned')} | {_ratio_cell(r, 'tuned')} | {gflop} "
            f"| {_gflops_cell(r, 'default', peaks)} | {_gflops_cell(r, 'ort', peaks)} |")
    return "\n".join(lines)


def _target_line(name, entry, key, models, limit):
    """A target is judged only when every model has the ratio: a geomean that silently
    leaves out the model that failed would flatter the run."""
    value = entry and entry[key]
    if value is None:
        verdict, shown = "n/a", "n/a"
    else:
        shown = f"{value:.2f}"
        verdict = ("met" if value <= limit else "NOT met") if entry["n"] == models else \
            f"not judged ({entry['n']} of {models} models have it)"
    return f"- {name}: {shown} (target <= {limit:.2f}): {verdict}"


def geomean_text(gm, full_suite):
    lines = ["| threads | models | default/ORT geomean | worst default/ORT "
             "| tuned/ORT geomean |", "|---|---|---|---|---|"]
    for t, e in gm.items():
        d, tu = e["default"], e["tuned"]
        cells = [str(t), str(e["models"]),
                 f"{d['geomean']:.3f} (n={d['n']})" if d else "n/a",
                 f"{d['worst']:.2f} ({d['worst_model']})" if d else "n/a",
                 f"{tu['geomean']:.3f} (n={tu['n']})" if tu else "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    scope = "the full suite" if full_suite else "this subset only (not the suite)"
    lines.append(f"The CPU targets, over {scope}:")
    for t, e in gm.items():
        d, tu = e["default"], e["tuned"]
        n = e["models"]
        lines.append(_target_line(f"{t} thr, default/ORT geomean", d, "geomean", n,
                                  TARGETS["default_geomean"]))
        lines.append(_target_line(f"{t} thr, worst default/ORT", d, "worst", n,
                                  TARGETS["default_worst"]))
        lines.append(_target_line(f"{t} thr, tuned/ORT geomean", tu, "geomean", n,
                                  TARGETS["tuned_geomean"]))
    return "\n".join(lines)


def errors_text(rows):
    lines = []
    for r in rows:
        errs = {s: r[s]["error"] for s in SYSTEMS if r[s].get("error")}
        if len(errs) == len(SYSTEMS) and len(set(errs.values())) == 1:
            errs = {"all systems": errs["ort"]}  # e.g. a missing model file: say it once
        lines += [f"- {r['model']} at {r['threads']} thr, {s}: {e}" for s, e in errs.items()]
    return "\n".join(["Errors:"] + lines) if lines else "Errors: none."


def run_info_text(meta):
    m, v, st = meta["machine"], meta["versions"], meta["settings"]
    peaks = "; ".join(f"{p['isa']} {p['threads']} thr {p['gflops']:.1f} GFLOP/s"
                      for p in meta["peak"]["results"]) or "n/a"
    floor = ", ".join(f"{ms * 1e3:.1f} us at {t} thr"
                      for t, ms in meta["ort_call_floor_ms"].items())
    tune = st["tune"]
    noisy = []
    load = float(m["load_start"].split()[0])
    if load >= 0.5 * m["cpus"]:
        noisy = [f"- **noisy machine**: 1-minute load average {load:.2f} on {m['cpus']} CPUs "
                 "before this run started; other work shares the cores, multi-thread "
                 "results suffer most, and only the per-round ratios are comparable"]
    return "\n".join(noisy + [
        f"- mode: {meta['mode']}; date: {meta['date']}",
        f"- command: `{meta['command']}`",
        f"- CPU: {m['cpu_model']}, {m['cpus']} CPUs ({m['isa']}); "
        f"load average {m['load_start']} at start, {m['load_end']} at end",
        f"- nnroute {v['nnroute']} ({v['nnroute_binary']}; {v['nnroute_git']}), "
        f"{v['nnroute_libs']}",
        f"- onnxruntime {v['onnxruntime']} (CPU EP, ORT_ENABLE_ALL, intra-op = threads, "
        f"inter-op 1, sequential); onnx {v['onnx']}, numpy {v['numpy']}, python {v['python']}",
        f"- threads {', '.join(map(str, st['threads']))}; batch 1"
        + (f"; {st['jobs']} models at a time, each process pinned to its own cores"
           if st.get("jobs", 1) > 1 else "") + f"; {st['rounds']} rounds "
        f"of ORT, default, tuned; each {st['warmup_ms']:g} ms warm-up + "
        f"{st['duration_ms']:g} ms (at least {st['min_iters']} runs); inputs: nnroute "
        f"bench's seed {st['seed']} (zoo models with saved inputs: those), the same "
        f"tensors for both runtimes",
        f"- tuned engines: {tune}",
        f"- measured peak (bench/perf/peak_flops.c, best of start and end): {peaks}; "
        f"\"% peak\" is against {meta['peak']['isa_reference']}",
        f"- ORT Python call floor (one-float Identity, included in every ORT time): {floor}",
    ])


def report_text(meta, rows, gm, peaks):
    return "\n\n".join([run_info_text(meta), table(rows, peaks),
                        geomean_text(gm, meta["full_suite"]), errors_text(rows)])


def _json_block(meta, rows, gm):
    """One line per row so the doc's JSON stays diffable and readable."""
    head = {**meta, "geomean": {str(k): v for k, v in gm.items()}}
    body = ",\n".join("  " + json.dumps(r, sort_keys=True) for r in rows)
    text = json.dumps(head, indent=1, sort_keys=True)
    return text[:-1].rstrip() + ',\n "rows": [\n' + body + "\n ]\n}"


DOC_INTRO = """# CPU performance: nnroute against ONNX Runtime

{label}This file is written by `bench/perf/run_perf.py` (see bench/perf/README.md); do not
edit it by hand. The section "Results" is exactly what the command printed.

The machines these runs come from are shared and virtualised (other work runs while
this one does), so **absolute milliseconds are noisy and only ratios measured in the same run
count**. Each round runs ONNX Runtime, the nnroute default engine and the nnroute tuned
engine back to back on the same model and thread count; a ratio is computed per round
and the table shows the median of those ratios with their min-max over rounds. A
system's ms is the median of its per-round medians. GFLOP/s count Conv, ConvTranspose,
Gemm and MatMul only (bench/perf/flops.py); "% peak" is against the AVX2 FMA peak
measured at the same thread count (bench/perf/peak_flops.c), the ISA of nnroute's own
kernels. ONNX Runtime's MLAS (and OpenBLAS SkylakeX) use AVX-512 where the CPU has it,
whose measured peak is listed too; that is how ORT can pass 100%. Bold ratios exceed
the per-model limit of 1.25.
"""


def write_doc(path, meta, text, rows, gm):
    label = ("**Quick mode** (`--quick`): a subset of the suite, fewer rounds; not the "
             "acceptance run.\n\n" if meta["mode"] == "quick" else "")
    doc = (DOC_INTRO.format(label=label) + "\n## Results\n\n" + text +
           "\n\n## Raw data\n\nPer-round medians (ms) and ratios of every row:\n\n```json\n" +
           _json_block(meta, rows, gm) + "\n```\n")
    with open(path, "w") as f:
        f.write(doc)
