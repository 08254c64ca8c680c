"""`superpager bench --against DIR`: this build's simulation speed beside another build's.

DIR is a directory that holds another build's `superpager` package (for example a copy of
python/superpager made by `make dev` at an older commit). Each round runs every case once
under each build, in alternating order, each in a fresh process that times only the
simulation (`superpager.run` on an already generated trace); a slow spell of the machine
falls on both builds alike. The report gives medians and the ratio new/old of throughput.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from . import api
from .hostinfo import machine_line

START = "<!-- bench --against: start -->"
END = "<!-- bench --against: end -->"

# (label, gen kind, footprint, machine, policy): the engine's fast path, a daemon policy, a
# reservation policy and a miss-driven policy, so that every hook the engine calls is timed.
CASES = [
    ("GUPS 1GiB, skylake, base", "gups", "1GiB", "skylake", "base"),
    ("Zipf 1GiB, skylake, linux-thp", "zipf", "1GiB", "skylake", "linux-thp"),
    ("GUPS 256MiB, alpha21264, navarro", "gups", "256MiB", "alpha21264", "navarro"),
    ("Zipf 256MiB, romer95, romer:online", "zipf", "256MiB", "romer95", "romer:online"),
    ("rbtree 8MiB, skylake, navarro", "rbtree", "8MiB", "skylake", "navarro"),
    # The runtime model's data caches (issue 24), and the same machine without them.
    ("Zipf 1GiB, host, base", "zipf", "1GiB", "host", "base"),
    ("Zipf 1GiB, host+nocache, base", "zipf", "1GiB", "host+nocache", "base"),
]

_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import superpager
trace, machine, policy, kw = sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
t0 = time.perf_counter()
r = superpager.run(trace, [(machine, policy)], progress=False, **kw)[0]
print(json.dumps({"seconds": time.perf_counter() - t0, "accesses": r.counters["accesses"],
                  "file": superpager.__file__, "counters": r.counters}))
"""

# `superpager.run`'s keywords for the cases above: memory enough for every trace.
RUN_KW = {"memory": "8GiB"}


def _time(pkg_parent: str, trace: str, machine: str, policy: str, kw: dict | None = None) -> tuple[float, int, str, dict]:
    env = dict(os.environ, PYTHONPATH=pkg_parent)
    p = subprocess.run([sys.executable, "-c", _CHILD, pkg_parent, trace, machine, policy, json.dumps(kw or RUN_KW)], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"bench --against: the build in {pkg_parent} failed on {trace} {machine} {policy}: {tail}")
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return d["seconds"], d["accesses"], d["file"], d["counters"]


def builds_from(a) -> list[tuple[str, str]] | None:
    """[("old", DIR), ("new", this build's package parent)], or None (said why) if DIR holds
    no superpager package."""
    against = os.path.abspath(a.against)
    if not os.path.isfile(os.path.join(against, "superpager", "__init__.py")):
        print(f"superpager bench: --against {a.against}: no superpager package there (expected {against}/superpager/__init__.py)", file=sys.stderr)
        return None
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [("old", against), ("new", here)]


def interleave(builds: list[tuple[str, str]], runs: list[tuple[str, str, str, str, dict]], repeats: int):
    """Time each run (label, trace, machine, policy, run keywords) under each build, `repeats`
    rounds, alternating which build goes first. Returns (seconds per (label, build), accesses
    per label, package file per build, labels whose counters differ between the builds)."""
    times: dict[tuple[str, str], list[float]] = {}
    refs: dict[str, int] = {}
    files: dict[str, str] = {}
    counters: dict[tuple[str, str], dict] = {}
    t0 = time.monotonic()
    for rnd in range(repeats):
        for i, (label, path, machine, policy, kw) in enumerate(runs):
            order = builds if (rnd + i) % 2 == 0 else builds[::-1]
            for name, parent in order:
                secs, n, f, c = _time(parent, path, machine, policy, kw)
                times.setdefault((label, name), []).append(secs)
                refs[label] = n
                files[name] = f
                counters[(label, name)] = c
        print(f"bench: round {rnd + 1}/{repeats} done ({time.monotonic() - t0:.0f}s)", file=sys.stderr, flush=True)
    # Counters both builds report: a speed change should not change them (new counters may appear).
    differ = [label for label, *_ in runs
              if any(counters[(label, "old")].get(k) != v for k, v in counters[(label, "new")].items() if k in counters[(label, "old")])]
    return times, refs, files, differ


def ratio_rows(labels: list[str], times, refs) -> tuple[list[str], float]:
    """The table's rows (case, refs, old and new medians, ratio, ranges) and the geometric mean
    of new / old."""
    lines = [
        "| case | refs | old build (refs/s, median) | new build (refs/s, median) | new / old | old: slowest – fastest | new: slowest – fastest |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for label in labels:
        n = refs[label]
        old, new = times[(label, "old")], times[(label, "new")]
        r_old, r_new = n / statistics.median(old), n / statistics.median(new)
        ratios.append(r_new / r_old)
        lines.append(f"| {label} | {n / 1e6:.2f}M | {r_old / 1e6:.2f}M | {r_new / 1e6:.2f}M | {r_new / r_old:.3f} | "
                     f"{n / max(old) / 1e6:.2f}M – {n / min(old) / 1e6:.2f}M | {n / max(new) / 1e6:.2f}M – {n / min(new) / 1e6:.2f}M |")
    return lines, statistics.geometric_mean(ratios)


def counters_line(differ: list[str]) -> str:
    if not differ:
        return "Counters both builds report: identical in every case."
    return f"Counters both builds report: DIFFERENT in {', '.join(differ)}."


def main(a) -> int:
    builds = builds_from(a)
    if builds is None:
        return 2
    traces = []
    for label, kind, size, machine, policy in CASES:
        path = os.path.join(a.workdir, f"{kind}-{size}.spt")
        if not os.path.exists(path):
            print(f"bench: generating {kind} {size}", file=sys.stderr, flush=True)
            api.gen(kind, path, size=size, accesses=a.accesses if kind != "rbtree" else 0, seed=42, progress=False)
        traces.append((label, path, machine, policy, RUN_KW))
    times, refs, files, differ = interleave(builds, traces, a.repeats)
    lines, geo = ratio_rows([t[0] for t in traces], times, refs)
    intro = (f"Produced by `superpager bench --against DIR --repeats {a.repeats} --accesses {a.accesses}` on {machine_line()}: "
             f"{a.repeats} rounds, each running every case once under each build in alternating order, "
             "each run in a fresh process timing only the simulation.")
    return write_report(a, START, END, "This build against another (`bench --against`)", intro, files, lines, geo, differ)


def write_report(a, start: str, end: str, title: str, intro: str, files: dict[str, str], lines: list[str], geo: float,
                 differ: list[str], tail: list[str] | None = None) -> int:
    """The section of a build-against-build report: print it, and put it into `a.out` (between
    its own markers, so that `make bench` and the other modes keep it)."""
    report = "\n".join([
        start, f"## {title}", "", intro, "",
        f"- old build: `{files['old']}`",
        f"- new build: `{files['new']}`",
        "", *lines, "",
        f"Geometric mean of new / old: {geo:.3f} (above 1: the new build is faster).",
        "", counters_line(differ), *(tail or []), end,
    ])
    if a.out:
        from .bench_capture import write_section

        write_section(a.out, report, start, end)
        print(f"wrote {a.out}", file=sys.stderr)
    print(report)
    return 0
