#!/usr/bin/python3
"""Layering check: the folders of src/ are floors, and every #include points down.

Reads every `#include "..."` in src/ (.c, .h, .cu, .cuh, .inc), maps the including file
and the included file to their top-level folder under src/ (src/kernels/cpu/gemm/gemm.c
is in `kernels`, src/backends/cuda/cuda_gemm.c in `backends`), and fails on:
  - an include cycle between folders (a strongly connected set of two or more folders);
  - an upward include: a folder including a folder on a higher floor than its own;
  - a cross-folder internal include: a file including another folder's *_internal.h;
  - a tools include off the allow-list: the tuner and the command (TOOLS_FLOORS) see
    the library through include/nnroute.h and api/'s tools API (api/nnroute_tools.h);
    from the floors below api/ they may include only the headers in TOOLS_ALLOWED.
An include that resolves outside src/ (include/nnroute.h, system headers) is not a
layer edge. A folder missing from FLOORS is an error, so a new folder needs a floor.

Run: /usr/bin/python3 scripts/check_layers.py [SRC_DIR]   (stdlib only; exit 1 on failure)
"""
import os
import re
import sys

# Lowest floor first. A folder may include its own files and any folder listed before it.
FLOORS = [
    "util",      # errors, thread pool, CPU/ISA detection, sha256, small helpers
    "ir",        # graph, values, ops, dtypes, activations, fused-op domain
    "onnx",      # protobuf schema and model loading into the IR
    "io",        # .npy / .pb tensor files, test-data folders
    "plan",      # plan, tactic, pass, knob, route, calibration and engine records
    "passes",    # graph rewrites and tactic-independent plan passes
    "kernels",   # reference executor and CPU kernels (kernels/ref, kernels/cpu/*)
    "backends",  # device backends as function tables (cuda/ behind a build switch)
    "compiler",  # the build driver: pass pipeline, tactic selection, layout, weights
    "runtime",   # execution context, stats, profiling
    "engine",    # engine format, save, load, fingerprint
    "api",       # the public API's implementations (model, engine build, calibration)
    "tune",      # the tuner: search, isolation, database, report
    "cli",       # the command, one file per subcommand
]
# The floors above api/ and what they may include from the floors below it: a path
# relative to src/, or a folder ending in "/" for all of it. Everything else they need
# comes through the tools API (src/api/nnroute_tools.h), so the plan, tactic, knob and
# engine records can change shape without touching a command.
TOOLS_FLOORS = ("tune", "cli")
TOOLS_ALLOWED = [
    "util/",       # errors, thread pool, statistics, SHA-256, device names
    "io/",         # .npy / .pb tensor files, test-data folders
    "ir/ir.h",     # graphs the commands walk (check-routes counts products) and values
    "ir/dtype.h",  # element loads and stores of tensors
    "ir/op.h",     # `nnroute ops` prints the operator tables
]
EXTENSIONS = (".c", ".h", ".cu", ".cuh", ".inc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder_of(rel):
    """Top-level folder of a path relative to src/, or None for a file at src/'s root."""
    parts = rel.split("/")
    return parts[0] if len(parts) > 1 else None


def resolve(src, including_rel, target):
    """Path of an include relative to src/, or None when it lies outside src/."""
    here = os.path.dirname(including_rel)
    for cand in (os.path.join(here, target), target):
        norm = os.path.normpath(cand)
        if not norm.startswith("..") and os.path.exists(os.path.join(src, norm)):
            return norm
    # Generated headers (onnx/onnx.pb-c.h) are not in the tree but name their folder.
    first = target.split("/")[0]
    if "/" in target and first in FLOORS:
        return os.path.normpath(target)
    return None


def tools_allowed(to_rel):
    """Whether a tools floor may include to_rel (a path relative to src/)."""
    return any(to_rel.startswith(a) if a.endswith("/") else to_rel == a
               for a in TOOLS_ALLOWED)


def scan(src):
    """List of (file, line, from_folder, to_folder, target, target_rel) and the number
    of files."""
    edges, nfiles = [], 0
    for root, _, names in os.walk(src):
        for name in sorted(names):
            if not name.endswith(EXTENSIONS):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            nfiles += 1
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    to_rel = resolve(src, rel, m.group(1))
                    to = folder_of(to_rel) if to_rel else None
                    edges.append((rel, lineno, folder_of(rel), to, m.group(1), to_rel))
    return edges, nfiles


def strongly_connected(nodes, succ):
    """Tarjan's algorithm; returns the components as lists of nodes."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "src")
    floor = {name: i for i, name in enumerate(FLOORS)}
    edges, nfiles = scan(src)
    cross = [e for e in edges if e[3] is not None and e[2] != e[3]]

    unknown = sorted({f for e in edges for f in (e[2], e[3]) if f and f not in floor})
    for f in unknown:
        print(f"layers: folder src/{f}/ has no floor in FLOORS (scripts/check_layers.py)")

    succ = {}
    for e in cross:
        succ.setdefault(e[2], set()).add(e[3])
    cycles = [c for c in strongly_connected(set(succ) | {e[3] for e in cross}, succ)
              if len(c) > 1]
    for comp in cycles:
        members = set(comp)
        print(f"cycle between folders: {' '.join(comp)}")
        for e in cross:
            if e[2] in members and e[3] in members:
                print(f"  src/{e[0]}:{e[1]}: {e[2]} -> {e[3]} ({e[4]})")

    upward = [e for e in cross if e[2] in floor and e[3] in floor and floor[e[3]] > floor[e[2]]]
    for e in upward:
        print(f"upward include: src/{e[0]}:{e[1]}: {e[2]} -> {e[3]} ({e[4]})")

    internal = [e for e in cross if os.path.basename(e[4]).endswith("_internal.h")]
    for e in internal:
        print(f"cross-folder internal include: src/{e[0]}:{e[1]}: {e[2]} -> {e[4]}")

    below_api = {f for f in FLOORS[:floor["api"]]}
    tools = [e for e in cross if e[2] in TOOLS_FLOORS and e[3] in below_api]
    off_list = [e for e in tools if not tools_allowed(e[5])]
    for e in off_list:
        print(f"tools include off the allow-list: src/{e[0]}:{e[1]}: {e[2]} -> {e[5]} "
              f"(use api/nnroute_tools.h, or extend TOOLS_ALLOWED)")

    print(f"layers: {len(cycles)} cycles, {len(upward)} upward includes, "
          f"{len(internal)} cross-folder internal includes, "
          f"{len(off_list)} tools includes off the allow-list "
          f"({len(edges)} includes in {nfiles} files; tune/ and cli/ include "
          f"{len(tools)} headers below api/)")
    return 1 if cycles or upward or internal or off_list or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
