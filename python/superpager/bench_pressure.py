"""`superpager bench --pressure`: simulation speed while memory is short and the replacement
policy chooses victims, on AMSQM's heavy traces (docs/AMSQM.md). Issue 22's target: at least
10M refs/s. Each run is timed whole (trace decoding on a second thread), medians over
`--repeats` rounds, each round visiting every case."""
from __future__ import annotations

import statistics
import sys

from .hostinfo import machine_line
from .reproduce_amsqm import CONFIGS, HEAVY, MACHINE, SWAP, Run, footprint, heavy_trace, memory_for, simulate

START = "<!-- bench --pressure: start -->"
END = "<!-- bench --pressure: end -->"
TRACES = list(HEAVY)
TARGET = 10e6


AGAINST_START = "<!-- bench --pressure --against: start -->"
AGAINST_END = "<!-- bench --pressure --against: end -->"


def main_against(a) -> int:
    """`bench --pressure --against DIR`: the same cases under this build and another,
    interleaved as `bench --against` does, each run in a fresh process."""
    from . import bench_builds

    builds = bench_builds.builds_from(a)
    if builds is None:
        return 2
    runs = []
    for n in TRACES:
        t = heavy_trace(n, lambda m: print(f"bench: {m}", file=sys.stderr, flush=True))
        mem = memory_for(footprint(t))
        for label, pol, rep in CONFIGS:
            runs.append((f"{n} ({' + '.join(HEAVY[n])}), {label}", t, MACHINE, pol, {"memory": mem, "swap": SWAP, "replacement": rep}))
    times, refs, files, differ = bench_builds.interleave(builds, runs, a.repeats)
    lines, geo = bench_builds.ratio_rows([r[0] for r in runs], times, refs)
    slowest = min(refs[r[0]] / statistics.median(times[(r[0], "new")]) for r in runs)
    intro = (f"Produced by `superpager bench --pressure --against DIR --repeats {a.repeats}` on {machine_line()}: the cases of `bench --pressure` "
             f"(`{MACHINE}`, swap {SWAP}, memory at 75% of each trace's footprint), {a.repeats} rounds, each running every case "
             "once under each build in alternating order, each run in a fresh process timing only the simulation.")
    verdict = f"- at least 10M refs/s under pressure (new build): {'met' if slowest >= TARGET else 'NOT met'} (slowest median {slowest / 1e6:.1f}M refs/s)"
    return bench_builds.write_report(a, AGAINST_START, AGAINST_END, "Replacement under memory pressure, this build against another (`bench --pressure --against`)",
                                     intro, files, lines, geo, differ, ["", verdict])


def main(a) -> int:
    if a.against:
        return main_against(a)

    def say(m: str) -> None:
        print(f"bench: {m}", file=sys.stderr, flush=True)

    cases = []
    for n in TRACES:
        t = heavy_trace(n, say)
        pages = footprint(t)
        cases.append((n, t, memory_for(pages), pages))
    times: dict[tuple[int, str], list[float]] = {}
    info: dict[tuple[int, str], Run] = {}
    for rnd in range(a.repeats):
        for n, t, mem, pages in cases:
            for label, pol, rep in CONFIGS:
                run = simulate(t, pol, rep, mem, pages)
                times.setdefault((n, label), []).append(run.seconds)
                info[(n, label)] = run
        say(f"round {rnd + 1}/{a.repeats} done")
    lines = [START, "## Replacement under memory pressure (`bench --pressure`)", "",
             f"Produced by `superpager bench --pressure --repeats {a.repeats}` on {machine_line()}: AMSQM's heavy traces on `{MACHINE}` with "
             f"swap {SWAP} and memory at 75% of each trace's footprint (docs/AMSQM_RESULTS.md), each configuration "
             f"timed whole in this process, median of {a.repeats} rounds. Target (issue 22): at least 10M refs/s.", "",
             "| trace | configuration | memory | refs | refs/s (median) | slowest – fastest | swap-ins | swap-outs |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    slowest = float("inf")
    for n, _t, mem, _pages in cases:
        for label, pol, rep in CONFIGS:
            r = info[(n, label)].r
            ts = times[(n, label)]
            acc = r["accesses"]
            med = acc / statistics.median(ts)
            slowest = min(slowest, med)
            lines.append(f"| {n} ({' + '.join(HEAVY[n])}) | {label} (`{pol}`, `{rep}`) | {mem} | {acc / 1e6:.1f}M | {med / 1e6:.1f}M | "
                         f"{acc / max(ts) / 1e6:.1f}M – {acc / min(ts) / 1e6:.1f}M | {r['faults.major']:,} | {r['swap.out']:,} |")
    lines += ["", f"- at least 10M refs/s under pressure: {'met' if slowest >= TARGET else 'NOT met'} (slowest median {slowest / 1e6:.1f}M refs/s)", END]
    report = "\n".join(lines)
    if a.out:
        from .bench_capture import write_section

        write_section(a.out, report, START, END)
        print(f"wrote {a.out}", file=sys.stderr)
    print(report)
    return 0
