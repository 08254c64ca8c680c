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
trace, machine, policy = sys.argv[2:5]
t0 = time.perf_counter()
r = superpager.run(trace, [(machine, policy)], memory="8GiB", progress=False)[0]
print(json.dumps({"seconds": time.perf_counter() - t0, "accesses": r.counters["accesses"],
                  "file": superpager.__file__}))
"""


def _time(pkg_parent: str, trace: str, machine: str, policy: str) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=pkg_parent)
    p = subprocess.run([sys.executable, "-c", _CHILD, pkg_parent, trace, machine, policy], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"bench --against: the build in {pkg_parent} failed on {trace} {machine} {policy}: {tail}")
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return d["seconds"], d["accesses"], d["file"]


def main(a) -> int:
    against = os.path.abspath(a.against)
    if not os.path.isfile(os.path.join(against, "superpager", "__init__.py")):
        print(f"superpager bench: --against {a.against}: no superpager package there (expected {against}/superpager/__init__.py)", file=sys.stderr)
        return 2
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    builds = [("old", against), ("new", here)]
    traces = []
    for label, kind, size, machine, policy in CASES:
        path = os.path.join(a.workdir, f"{kind}-{size}.spt")
        if not os.path.exists(path):
            print(f"bench: generating {kind} {size}", file=sys.stderr, flush=True)
            api.gen(kind, path, size=size, accesses=a.accesses if kind != "rbtree" else 0, seed=42, progress=False)
        traces.append((label, path, machine, policy))
    times: dict[tuple[str, str], list[float]] = {}
    refs: dict[str, int] = {}
    files: dict[str, str] = {}
    t0 = time.monotonic()
    for rnd in range(a.repeats):
        for i, (label, path, machine, policy) in enumerate(traces):
            order = builds if (rnd + i) % 2 == 0 else builds[::-1]
            for name, parent in order:
                secs, n, f = _time(parent, path, machine, policy)
                times.setdefault((label, name), []).append(secs)
                refs[label] = n
                files[name] = f
        print(f"bench: round {rnd + 1}/{a.repeats} done ({time.monotonic() - t0:.0f}s)", file=sys.stderr, flush=True)
    lines = [
        "| case | refs | old build (refs/s, median) | new build (refs/s, median) | new / old | old: slowest – fastest | new: slowest – fastest |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for label, _path, _m, _p in traces:
        n = refs[label]
        old, new = times[(label, "old")], times[(label, "new")]
        r_old, r_new = n / statistics.median(old), n / statistics.median(new)
        ratios.append(r_new / r_old)
        lines.append(f"| {label} | {n / 1e6:.2f}M | {r_old / 1e6:.2f}M | {r_new / 1e6:.2f}M | {r_new / r_old:.3f} | "
                     f"{n / max(old) / 1e6:.2f}M – {n / min(old) / 1e6:.2f}M | {n / max(new) / 1e6:.2f}M – {n / min(new) / 1e6:.2f}M |")
    geo = statistics.geometric_mean(ratios)
    report = "\n".join([
        START,
        "## This build against another (`bench --against`)",
        "",
        f"Produced by `superpager bench --against DIR --repeats {a.repeats} --accesses {a.accesses}`: "
        f"{a.repeats} rounds, each running every case once under each build in alternating order, "
        "each run in a fresh process timing only the simulation.",
        "",
        f"- old build: `{files['old']}`",
        f"- new build: `{files['new']}`",
        "",
        *lines,
        "",
        f"Geometric mean of new / old: {geo:.3f} (above 1: the new build is faster).",
        END,
    ])
    if a.out:
        from .bench_capture import write_section

        # A section of its own: `make bench` and `bench --capture` keep it.
        write_section(a.out, report, START, END)
        print(f"wrote {a.out}", file=sys.stderr)
    print(report)
    return 0
