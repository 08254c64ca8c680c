"""`superpager calibrate`: measure the latencies the runtime model needs on this machine.

Method (docs/RUNTIME_MODEL.md): a dependent pointer chase (chase.c) over a random cycle of
64-byte lines, at footprints from 16KiB up, on 2MB pages (so the TLB stays out of the way)
and, for the report, on 4KB pages. Each point is the median of `repeats` runs. A level's
latency is the chase's time at a footprint well inside it and beyond the level above (a
quarter of its size, at least four times the level above); memory's is the time at the
largest footprint. A level whose chase slows to memory's latency before its CPUID size (a
virtual machine's share of a shared last-level cache) is given the size it was seen to hold.
Times become cycles at the clock the core runs at, measured by a chain of dependent adds (the
clock /proc/cpuinfo reports where chase.c has no add chain for the architecture). Then the TLB probe (`tlb_probe`):
whether the TLB holds 2MB pages whole, or as smaller pieces as a virtual machine whose host
backs guest memory with 4KB pages does. Last, the walk probe (`walk_probe`): k independent
chases at once at the largest footprint, on 4KB and 2MB pages, to measure how many misses and
how many page walks overlap (the model's `mlp` and `walkers`). Last of all, the last level's fit
(`fit_last_level`): the model itself is run on the chase from the largest footprint down to four
times the last level, with the last level at shrinking sizes and memory's latency fitted at each,
and keeps the pair at which it takes the times the chase measured there.
And the frame probe (`frame_probe`): how the kernel places a process's 4KB pages in physical
memory, read back from /proc/self/pagemap (the model's `[frames] scatter`); and the host-frames
probe (`host_frames_probe`): whether the caches see a 2MB page's 4KB pieces in order, or
scattered by a host that backs the guest with 4KB pages (a nested `host`'s
`[walker.nested] host_frames`). And the window probe (`window_probe`): independent loads with
a growing number of adds after each, which give the instructions the core holds behind an
outstanding load (the model's `rob`) and how much of a walk a full window hides (`walk_hiding`).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import json
import math
import mmap
import statistics
import struct
import subprocess
from pathlib import Path

from .. import _core
from ..cbuild import compiled


class CalibrateError(Exception):
    pass


def chase_binary() -> Path:
    return compiled(Path(__file__).with_name("chase.c"), "model", ["-O2"])


def chase(binary: Path, footprint: int, pages: str, steps: int, seed: int, layout: str = "dense") -> tuple[float, int]:
    """ns per step and the 2MB-page bytes the chase ran on."""
    f = _run_chase(binary, [str(footprint), pages, str(steps), str(seed), layout], f"the {layout} chase at {footprint} bytes on {pages} pages")
    return float(f["ns_per_step"]), int(f["huge_bytes"])


def chains(binary: Path, footprint: int, pages: str, steps: int, seed: int, ks: tuple[int, ...]) -> tuple[list[float], int]:
    """ns per load with k chases at once over one cycle, for each k in `ks`, and the 2MB-page
    bytes they ran on."""
    f = _run_chase(binary, [str(footprint), pages, str(steps), str(seed), "dense", ",".join(map(str, ks))],
                   f"the chase of {','.join(map(str, ks))} chains at {footprint} bytes on {pages} pages")
    return [float(f[f"ns_k{k}"]) for k in ks], int(f["huge_bytes"])


def _run_chase(binary: Path, args: list[str], what: str, absent: int | None = None) -> dict[str, str]:
    """chase.c's key=value output; {} when it exits with `absent` (a mode it does not have here)."""
    r = subprocess.run([str(binary), *args], capture_output=True, text=True)
    if absent is not None and r.returncode == absent:
        return {}
    if r.returncode != 0:
        raise CalibrateError(f"{what} failed: {r.stderr.strip() or r.returncode}")
    return dict(kv.split("=") for kv in r.stdout.split())


# Dependent adds per clock measurement, and how many measurements (the fastest is kept: a core
# only runs slower than its clock, while it ramps up or is interrupted). 50M adds take 15 ms at
# 3.3 GHz.
CLOCK_ADDS = 50_000_000
CLOCK_RUNS = 5
# No core clocks faster (the fastest shipped, Intel's i9-14900KS, boosts to 6.2 GHz): an add
# chain that reads faster was folded (as add-immediate chains are on Golden Cove, chase.c).
MAX_PLAUSIBLE_CLOCK_GHZ = 8.0


def measured_clock_ghz(binary: Path) -> float | None:
    """The clock the core runs at, from a chain of dependent adds (chase.c `clock`: one cycle
    each), the fastest of CLOCK_RUNS; None where chase.c has no add chain for the architecture.
    A virtual machine's /proc/cpuinfo gives the nominal clock: on the Zen 2 VM 2.246 GHz, where
    the adds run at 3.34 GHz, and the 16KiB chase's 1.23 ns is then 4.1 cycles, Zen 2's documented
    L1 latency (docs/RUNTIME_MODEL.md)."""
    best = None
    for _ in range(CLOCK_RUNS):
        f = _run_chase(binary, ["clock", str(CLOCK_ADDS)], "the clock measurement (chase clock)", absent=3)
        if not f:
            return None
        ns = float(f["ns_per_add"])
        best = ns if best is None else min(best, ns)
    if best is not None and (best <= 0 or 1.0 / best > MAX_PLAUSIBLE_CLOCK_GHZ):
        raise CalibrateError(f"the clock measurement (chase clock) read {best:.4f} ns an add, faster than any core clocks "
                             f"({MAX_PLAUSIBLE_CLOCK_GHZ:g} GHz): the core ran the adds in parallel, not as a chain; nothing was written")
    return round(1.0 / best, 3) if best else None


def clock_ghz() -> float:
    """The clock /proc/cpuinfo reports (cpu MHz of the first CPU), else 2.5 (ESTIMATE)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return round(float(line.split(":")[1]) / 1000.0, 3)
    except OSError:
        pass
    return 2.5


def footprints(largest: int) -> list[int]:
    out, f = [], 16 << 10
    while f <= largest:
        out.append(f)
        f *= 2
    return out


def measure(largest: int = 1 << 30, steps: int = 2_000_000, repeats: int = 3, pages=("2m", "4k"), progress=None) -> list[tuple[int, str, float]]:
    """(footprint, pages, median ns per step) for every footprint and page size. The runs go in
    `repeats` passes over every footprint, each footprint's page sizes in turn (as `alternated`
    has them), so one footprint's runs lie a pass apart, not back to back: a slow spell of a few
    seconds on this shared VM then lands on one of a point's runs, which the median leaves out,
    where before it landed on all of them (the sixty-sixth session's calibration read the L2 at
    twice its latency from two neighbouring footprints; docs/RUNTIME_MODEL.md, "A level's
    latency, read on either page size")."""
    b = chase_binary()
    fps = footprints(largest)
    runs: dict[tuple[int, str], list[float]] = {(fp, pg): [] for fp in fps for pg in pages}
    done, total = 0, repeats * len(fps)
    for seed in range(1, repeats + 1):
        for fp in fps:
            for pg in pages:
                runs[fp, pg].append(chase(b, fp, pg, steps, seed)[0])
            done += 1
            if progress:
                progress(done, total, f"pass {seed} of {repeats}, {fp >> 10} KiB: "
                         + ", ".join(f"{runs[fp, pg][-1]:.1f} ns on {pg}" for pg in pages))
    return [(fp, pg, statistics.median(runs[fp, pg])) for pg in pages for fp in fps]


def alternated(run, repeats: int, pages=("2m", "4k"), usable=None) -> dict[str, list] | None:
    """`run(pages, seed)` for seeds 1..`repeats`, the page sizes taking turns within each seed;
    None as soon as a run fails `usable(pages, result)` (no 2MB pages, a mode chase.c lacks), so
    a probe that cannot be read stops at its first run, not after all of them.
    A probe that compares the two page sizes must not run all of one and then all of the other:
    a shared host's load drifts within a minute, and the drift then lands on one page size. On
    the Zen 4 VM (2026-12-04) the window probe run so read 4KB loads at twice the 2MB loads'
    time with 16 in flight (30.1 against 15.1 ns), and a `walk_hiding` of 0; the same probe with
    the page sizes alternating, three hours later, 16.4-18.5 against 13.7 ns and 0.084
    (docs/RUNTIME_MODEL.md, "Probes that alternate")."""
    out: dict[str, list] = {pg: [] for pg in pages}
    for seed in range(1, repeats + 1):
        for pg in pages:
            r = run(pg, seed)
            if usable is not None and not usable(pg, r):
                return None
            out[pg].append(r)
    return out


# The TLB probe: one line in each 4KB page of PROBE_SPAN (8,192 lines, 512KiB of them) on 2MB
# pages, against the same number of lines packed together. 8,192 4KB translations are more than
# the second-level TLB of any x86-64 core we know holds (Zen 4: 3,072; Zen 5: 4,096; Golden
# Cove: 2,048 shared; AMD Software Optimization Guides, Intel Optimization Reference Manual),
# while 16 2MB translations fit every first-level DTLB, and 512KiB of lines fit every L2 above
# it. So on 2MB pages the two chases take the same time where the TLB holds 2MB pages whole.
PROBE_SPAN = 32 << 20
PROBE_LINES = PROBE_SPAN // 4096
# Above this ratio (sparse / packed, both on 2MB pages) the TLB is taken to hold the 2MB pages
# as smaller pieces. Where it holds them whole the ratio is 1 up to noise (a sparse line is
# still an L2 hit); where it does not, every sparse step pays a second-level TLB miss.
SPLINTER_RATIO = 1.5


def median_chase(binary: Path, footprint: int, pages: str, steps: int, repeats: int, layout: str = "dense") -> tuple[float, int]:
    """The chase's median ns a step over seeds 1..`repeats`, and the fewest 2MB-page bytes any
    of those runs had."""
    runs = [chase(binary, footprint, pages, steps, seed, layout) for seed in range(1, repeats + 1)]
    return statistics.median(ns for ns, _ in runs), min(h for _, h in runs)


def tlb_probe(binary: Path, steps: int, repeats: int) -> dict | None:
    """Whether the TLB holds 2MB pages whole (docs/RUNTIME_MODEL.md, "The TLB probe"); None when
    2MB pages are not to be had here."""
    def med(footprint: int, pages: str, layout: str) -> tuple[float, int]:
        return median_chase(binary, footprint, pages, steps, repeats, layout)

    packed, huge_packed = med(PROBE_LINES * 64, "2m", "dense")
    sparse, huge_sparse = med(PROBE_SPAN, "2m", "sparse")
    if huge_packed <= 0 or huge_sparse < PROBE_SPAN // 2:
        return None
    sparse_4k, _ = med(PROBE_SPAN, "4k", "sparse")
    return {"lines": PROBE_LINES, "span": PROBE_SPAN, "packed_2m_ns": round(packed, 3), "sparse_2m_ns": round(sparse, 3),
            "sparse_4k_ns": round(sparse_4k, 3), "splintered": sparse > SPLINTER_RATIO * packed}


# The walk probe: k chases at once (chase.c's CHAINS) over the largest footprint, on 4KB and on
# 2MB pages. A round's k loads are independent, so up to k misses, and on 4KB pages up to k
# walks, can be in flight. 32 is beyond the page walkers any x86-64 core documents (Zen 3/4: 6;
# Golden Cove: 4; AMD Software Optimization Guide for Family 19h, Intel Architecture Day 2021)
# and about where the data misses themselves stop overlapping (24 L1D misses in flight on Zen).
WALK_CHAINS = (1, 2, 4, 8, 16, 32)
# How `walkers` is read from the chases (`walkers_from`); host takes only walkers read by this
# rule (mmu/host.rs WALKERS_RULE, which must match). "busiest-walk" (thirty-eighth session): as
# "busiest" (the thirty-third session's), with one walk's time taken against a load that does not
# walk, which on a host that splinters 2MB pages is not the 2MB chase's.
WALKERS_RULE = "busiest-walk"


def overlap(ks: tuple[int, ...] | list[int], cost: list[float], one: float | None = None) -> int | None:
    """How many of something overlap, from its cost per load with k chases at once: with one
    chase each is waited out, so one / cost(k) is how many overlap at k, which cannot be more
    than k (a cost of zero or less at k: all of them, k). `one` is what one of them costs alone
    (default cost(1)). The most seen at any k, rounded. None without a positive cost at one
    chase (nothing to see)."""
    by_k = dict(zip(ks, cost))
    if one is None:
        one = by_k.get(1)
    if one is None or one <= 0 or 1 not in by_k:
        return None
    seen = [float(k) if c <= 0 else min(float(k), one / c) for k, c in by_k.items()]
    return max(1, round(max(seen)))


def walk_ns(ks: tuple[int, ...] | list[int], ns_4k: list[float], ns_2m: list[float], miss_ns: float | None = None) -> float | None:
    """How long one walk holds a walker: what a load costs on 4KB pages with one chase, less what
    a load that does not walk costs. That is the 2MB chase's load where the TLB holds 2MB pages
    whole; where it splinters them the 2MB chase walks too (a shorter walk, over the host's 4KB
    pages), so the load without a walk is `miss_ns`, memory's latency short of the TLB's reach
    (calibrate's `near_memory`). None without a chase at k = 1."""
    by_k = dict(zip(ks, zip(ns_4k, ns_2m)))
    if 1 not in by_k:
        return None
    four_k, two_m = by_k[1]
    return round(four_k - (two_m if miss_ns is None else miss_ns), 3)


def walkers_from(ks: tuple[int, ...] | list[int], ns_4k: list[float], ns_2m: list[float], miss_ns: float | None = None) -> int | None:
    """How many walks the machine overlaps, as the overlap model reads it (docs/RUNTIME_MODEL.md,
    "Overlap"): a walk holds a walker for `walk_ns`, so a load at k chases, ns_4k(k), takes at
    least walk_ns / walkers. `overlap` of ns_4k with walk_ns as one walk's cost: exact where the
    walkers are the bottleneck, a lower bound where the walks hide under the data misses. None
    when a walk costs nothing at one chase."""
    return overlap(ks, ns_4k, one=walk_ns(ks, ns_4k, ns_2m, miss_ns))


#: calibrate times one chase over --largest on 4KB pages twice: among its latency points, and as
#: the walk probe's single chase. Readings further apart than this share (of the smaller) say the
#: machine changed between them (ESTIMATE: the Zen 5 VM's six calibrations of 2026-12-03 were 3%,
#: 8%, 8%, 27%, 29% and 74% apart; docs/RUNTIME_MODEL.md, "A steady machine?").
STEADY_WITHIN = 0.15


def unsteady(footprint: int, points_ns: float | None, probe_ns: float | None) -> str | None:
    """The warning calibrate gives where its two timings of one chase over `footprint` on 4KB
    pages (`points_ns` among the latency points, `probe_ns` the walk probe's at one chase)
    differ by more than STEADY_WITHIN: the numbers it wrote rest on different states of the
    machine. None where they agree, or either is missing."""
    if not points_ns or not probe_ns or points_ns <= 0 or probe_ns <= 0:
        return None
    apart = max(points_ns, probe_ns) / min(points_ns, probe_ns) - 1
    if apart <= STEADY_WITHIN:
        return None
    return (f"the machine changed during calibration: one chase over {size_text(footprint)} on 4KB pages took {points_ns:.1f} ns a step "
            f"among the latency points and {probe_ns:.1f} in the walk probe, {apart:.0%} apart (more than {STEADY_WITHIN:.0%}); "
            "the latencies and the walkers rest on different states of it, so calibrate again when it is quieter")


def _size(f) -> int:
    """A footprint as calibrate returns it (bytes) or as a file records it ("1GiB")."""
    from ..workloads import parse_size
    return parse_size(f) if isinstance(f, str) else int(f)


def points_of(calibration: dict) -> list[tuple[int, str, float]] | None:
    """A calibration's latency points as (footprint bytes, pages, ns), as calibrate returns them
    ([fp, pages, ns]) or as a file records them (tables with "1GiB"-style footprints); None
    where one cannot be read."""
    from ..capture import CaptureError
    try:
        return [(_size(p["footprint"]), p["pages"], float(p["ns"])) if isinstance(p, dict) else (_size(p[0]), p[1], float(p[2]))
                for p in calibration.get("points") or []]
    except (KeyError, TypeError, ValueError, IndexError, CaptureError):
        return None


def unsteady_in(calibration: dict) -> str | None:
    """`unsteady` for a calibration, as calibrate returns it or as a file records it; None where
    it cannot be read (a malformed size too)."""
    from ..capture import CaptureError
    walk = calibration.get("walk_probe") or {}
    try:
        fp = _size(walk["footprint"])
        probe_ns = float(walk["ns_4k"][list(walk["chains"]).index(1)])
    except (KeyError, TypeError, ValueError, IndexError, CaptureError):
        return None
    pts = points_of(calibration)
    if pts is None:
        return None
    at = [ns for f, pg, ns in pts if pg == "4k" and f == fp]
    return unsteady(fp, at[0] if at else None, probe_ns)


def mlp_from(ks: tuple[int, ...] | list[int], ns_2m: list[float]) -> int | None:
    """How many misses the machine overlaps: `overlap` of the load's time on 2MB pages (where
    walks are fewest) at the footprint where every load misses to memory."""
    return overlap(ks, ns_2m)


def walk_probe(binary: Path, footprint: int, steps: int, repeats: int, miss_ns: float | None = None) -> dict | None:
    """The walk probe (docs/RUNTIME_MODEL.md, "The walk probe"): medians over `repeats` runs of
    k chases at once, on 4KB and 2MB pages; None when 2MB pages are not to be had here.
    `miss_ns`: a load's time without a walk where the TLB splinters 2MB pages (`walk_ns`)."""
    t = walk_times(binary, footprint, steps, repeats)
    if t is None:
        return None
    ks, ns_4k, ns_2m = t["chains"], t["ns_4k"], t["ns_2m"]
    return {**t, "walk_ns": walk_ns(ks, ns_4k, ns_2m, miss_ns), "walkers": walkers_from(ks, ns_4k, ns_2m, miss_ns),
            "walkers_rule": WALKERS_RULE, "mlp": mlp_from(ks, ns_2m)}


def walk_times(binary: Path, footprint: int, steps: int, repeats: int = 1) -> dict | None:
    """The walk probe's times over `footprint`: medians over `repeats` runs of WALK_CHAINS
    chases at once, the page sizes in turn (`alternated`); None where 2MB pages could not be
    had. One run of it is what `bench --model` reads again between its rounds for the share's
    fit (docs/RUNTIME_MODEL.md, "The share's probes through the bench")."""
    ks = WALK_CHAINS
    by_pages = alternated(lambda pg, seed: chains(binary, footprint, pg, steps, seed, ks), repeats,
                          usable=lambda pg, r: pg != "2m" or r[1] >= footprint // 2)
    if by_pages is None:
        return None
    out = {pg: [round(statistics.median(r[0][i] for r in runs), 3) for i in range(len(ks))] for pg, runs in by_pages.items()}
    return {"footprint": footprint, "chains": list(ks), "ns_4k": out["4k"], "ns_2m": out["2m"]}


#: The adds chase.c's window probe puts after each load (its WINDOW_PADS, in its output order).
WINDOW_PADS = (0, 16, 32, 64, 96, 192)
#: The window probe reads the window, and how much of a walk it hides, where at least this many
#: loads were in flight: below it the loads are nearly one at a time, and the shares are noise.
WINDOW_IN_FLIGHT_ABOVE = 1.5
#: Runs of the window probe on each page size, at least (more where calibrate's --repeats asks).
#: `walk_hiding` rests on what 4KB pages add to a load, a difference of two noisy times: on the
#: Zen 4 VM (2026-12-04) eight alternating pairs each read alone gave 0 to 4.0 (four of them
#: under 0.1), and three pairs in a calibrate read 0.0 where the eight's medians read 0.039.
WINDOW_PROBE_RUNS = 7


def window_from(pads: list[int] | tuple[int, ...], ns_2m: list[float], dep_2m: float, mlp: int | None = None) -> int | None:
    """Instructions the core holds behind an outstanding load, from the window probe on 2MB pages:
    with n loads in flight a load takes latency / n, and n = window / (instructions a loop), so
    ns grows with the adds P by latency / window. The least-squares slope of ns against P over
    the pads where more than WINDOW_IN_FLIGHT_ABOVE loads (and fewer than `mlp`, where it is
    known: beyond it the miss buffers bound them, not the window) were in flight; latency / slope.
    None with fewer than two such pads or a slope of zero or less."""
    pts = [(p, ns) for p, ns in zip(pads, ns_2m) if ns > 0 and WINDOW_IN_FLIGHT_ABOVE < dep_2m / ns < (mlp or float("inf"))]
    if len(pts) < 2 or dep_2m <= 0:
        return None
    mx, my = sum(p for p, _ in pts) / len(pts), sum(n for _, n in pts) / len(pts)
    sxx = sum((p - mx) ** 2 for p, _ in pts)
    slope = sum((p - mx) * (n - my) for p, n in pts) / sxx if sxx else 0.0
    return round(dep_2m / slope) if slope > 0 else None


def walk_hiding_from(pads: list[int] | tuple[int, ...], ns_4k: list[float], ns_2m: list[float], dep_4k: float, dep_2m: float) -> float | None:
    """How much of a walk a full window hides, from the window probe: at each pad with n =
    dep_2m / ns_2m loads in flight (more than WINDOW_IN_FLIGHT_ABOVE), the window's chain showed
    (ns_4k - ns_2m) x n of the dep_4k - dep_2m that 4KB pages add to one load alone. The k of
    1 / (1 + k (n - 1)) nearest those shares (least squares, k from 0 to 4 in steps of 0.001;
    cache::stall_cycles). None where 4KB pages added nothing to one load alone."""
    extra = dep_4k - dep_2m
    if extra <= 0 or dep_2m <= 0:
        return None
    pts = [(dep_2m / b, (a - b) * (dep_2m / b) / extra) for a, b in zip(ns_4k, ns_2m) if b > 0 and dep_2m / b > WINDOW_IN_FLIGHT_ABOVE]
    if not pts:
        return None
    _, k = min((sum((1 / (1 + k * (n - 1)) - shown) ** 2 for n, shown in pts), k) for k in (i / 1000 for i in range(4001)))
    return k


def window_probe(binary: Path, footprint: int, steps: int, repeats: int, mlp: int | None = None) -> dict | None:
    """The window probe (docs/RUNTIME_MODEL.md, "Walks in a full window"): medians over `repeats`
    runs (at least WINDOW_PROBE_RUNS) of chase.c `window` on 2MB and 4KB pages; None when 2MB
    pages are not to be had, or chase.c has no add chain for this architecture."""
    repeats = max(repeats, WINDOW_PROBE_RUNS)
    by_pages = alternated(lambda pg, seed: _run_chase(binary, ["window", str(footprint), pg, str(steps), str(seed)],
                                                     f"the window probe at {footprint} bytes on {pg} pages", absent=3), repeats,
                          usable=lambda pg, f: bool(f) and (pg != "2m" or int(f["huge_bytes"]) >= footprint // 2))
    if by_pages is None:
        return None
    out = {pg: {k: round(statistics.median(float(f[k]) for f in runs), 3) for k in runs[0] if k == "dep" or k.startswith("ns_p")}
           for pg, runs in by_pages.items()}
    pads = [int(k[4:]) for k in out["2m"] if k.startswith("ns_p")]
    ns = {pg: [out[pg][f"ns_p{p}"] for p in pads] for pg in out}
    dep_2m, dep_4k = out["2m"]["dep"], out["4k"]["dep"]
    return {"footprint": footprint, "pads": pads, "ns_4k": ns["4k"], "ns_2m": ns["2m"], "dep_4k": dep_4k, "dep_2m": dep_2m,
            "window": window_from(pads, ns["2m"], dep_2m, mlp), "walk_hiding": walk_hiding_from(pads, ns["4k"], ns["2m"], dep_4k, dep_2m)}


#: The scan probe (docs/RUNTIME_MODEL.md, "The last level's latency, read where it holds the
#: chase"): a hot cycle of 3/4 of the level above the last (768KiB for a 1MiB L2: it fits there
#: alone), stepped between SCAN_STREAMS random loads over `--largest`. With 8, 6.75MiB of lines
#: pass between two reads of a hot line for a 1MiB L2, more than an L2 and the shares of an L3
#: the fit finds hold, so an LRU hierarchy would miss every hot read.
SCAN_HOT_SHARE = 3 / 4
SCAN_STREAMS = 8


def scan_probe(binary: Path, region: int, above: int, steps: int, repeats: int) -> dict | None:
    """The scan probe: medians over `repeats` runs of chase.c `scan` with a hot cycle of
    SCAN_HOT_SHARE of `above` (the level above the last) and SCAN_STREAMS random loads over
    `region` (a power of two); None when 2MB pages are not to be had."""
    hot = max(128, int(above * SCAN_HOT_SHARE) // 64 * 64)
    runs = []
    for seed in range(1, repeats + 1):
        f = _run_chase(binary, ["scan", str(hot), str(region), str(SCAN_STREAMS), str(steps), str(seed)],
                       f"the scan probe with {hot} hot bytes over {region}")
        if int(f["huge_bytes"]) < region // 2:
            return None
        runs.append(f)
    med = {k: round(statistics.median(float(f[k]) for f in runs), 3) for k in ("ns_hot", "ns_alone")}
    return {"hot": hot, "region": region, "streams": SCAN_STREAMS, **med}


def size_text(n: int) -> str:
    """A byte count as the machine files write sizes: 2MiB, 768KiB (bytes where neither is exact)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def level_points(points: dict[tuple[int, str], float]) -> list[tuple[int, float]]:
    """The chase's time at each footprint with a 2MB point, as a cache level's latency is read:
    the faster of that point and the 4KB one at the same footprint. Each is a level's latency
    plus what the page size adds (nothing on 2MB pages; a second-level TLB hit, or a walk, on 4KB
    pages) plus whatever the machine's load added while it ran, which only ever adds; so the
    faster reading is the nearer one. On this shared VM a slow spell of a few seconds lands on a
    few footprints' 2MB runs and not always on their 4KB turns (the sixty-sixth session's
    calibration read 8.1 ns at 128KiB and 256KiB on both page sizes, the L2 twice the
    sixty-fifth's 3.9, and 24.4 ns at 2MiB on 2MB pages against 13.6 on 4KB pages; docs/
    RUNTIME_MODEL.md, "A level's latency, read on either page size"). A footprint with only a
    4KB point is not read (`points`: {(footprint, pages): ns})."""
    by_fp: dict[int, dict[str, float]] = {}
    for (fp, pg), ns in points.items():
        if ns > 0:
            by_fp.setdefault(fp, {})[pg] = ns
    return sorted((fp, min(t.values())) for fp, t in by_fp.items() if "2m" in t)


def fit(points: list[tuple[int, str, float]], levels: list[tuple[str, int, int, float]], clock: float, line: int = 64) -> dict:
    """Latencies (cycles) per level and memory, and the sizes the chase saw, from the 2MB
    points (each level's latency from `level_points`). `levels`: (name, bytes, ways, cycles) of
    the host's `[cache]`."""
    huge = sorted((fp, ns) for fp, pg, ns in points if pg == "2m")
    if not huge:
        raise CalibrateError("no 2MB-page points measured")
    fastest = level_points({(fp, pg): ns for fp, pg, ns in points})
    dram = huge[-1][1]
    memory = memory_ns(huge, levels[-1][1] if levels else 0)
    lat, sizes, read_short = [], [], []
    prev = 0
    for i, (_name, size, ways, _) in enumerate(levels):
        # Past four times the level above (which a cyclic chase then never hits) and up to half
        # this level: every such point reads this level's latency or more (a miss, a TLB miss, a
        # slow spell all add), so the fastest is the nearest.
        inside = ([ns for fp, ns in fastest if fp <= size // 2 and fp >= 4 * prev]
                  or [ns for fp, ns in fastest if fp <= size // 2 and fp > prev])
        if not inside:
            inside = [min(ns for fp, ns in fastest if fp > prev)] if any(fp > prev for fp, _ in fastest) else [dram]
        ns = min(inside)
        short = short_level_point(huge, prev, ns, memory)
        if short is not None:
            read_short.append({"level": i, "footprint": short[0], "ns": round(short[1], 3), "ns_inside": round(ns, 3)})
            ns = short[1]
        lat.append(ns)
        # The largest footprint this level still serves at well under memory's latency.
        seen = [fp for fp, t in huge if fp > prev and t < (ns + memory) / 2]
        eff = max(seen) if seen else size
        if eff < size // 2:
            sets = max(1, eff // line // ways)
            sizes.append(size_text(sets * ways * line))
        else:
            sizes.append("")
        prev = size if eff >= size // 2 else eff
    cyc = [round(x * clock, 2) for x in lat]
    for i in range(1, len(cyc)):  # a level is never faster than the one above it
        cyc[i] = max(cyc[i], cyc[i - 1])
    return {"level_cycles": cyc, "level_sizes": sizes, "dram_cycles": max(round(dram * clock, 2), cyc[-1]),
            "near_memory": near_memory(huge, prev, clock, cyc[-1]), "read_short": read_short}


#: A chase "reads as memory" at this share of memory's time (`memory_ns`) or more.
MEMORY_LIKE = 0.8


def memory_ns(huge: list[tuple[int, float]], last_level: int) -> float:
    """Memory's time as the level rules of `fit` compare against: the fastest 2MB point at or
    beyond the last level's size (CPUID's), where no cache serves; the largest point's where none
    is that far. Not simply the largest: where the TLB splinters 2MB pages the chase there pays
    walks too (the Zen 5 VM, thirty-eighth session: 209.5 ns at 1GiB against 153-169 from 8MiB
    to 64MiB), and a last level that leaves by 4MiB then read as a level of 156 ns."""
    beyond = [ns for fp, ns in huge if fp >= last_level]
    return min(beyond) if beyond else huge[-1][1]


def short_level_point(huge: list[tuple[int, float]], above: int, inside_ns: float, dram: float) -> tuple[int, float] | None:
    """Where a level below the first reads as memory already at four times the level above
    (`inside_ns` at least MEMORY_LIKE of memory's time, `dram`: `memory_ns`), it holds less than that here: a
    virtual machine's share of a shared last level, as on the Sapphire Rapids VM, whose 105MiB
    L3 the chase leaves by 4MiB. Its latency is then read at the largest footprint from the
    level above's size (`above`) up to four times it where the chase is still faster than
    MEMORY_LIKE of memory's: (footprint, ns), or None where the rule does not apply. That point
    mixes the level above's hits in, so it is a lower bound of the level's latency
    (docs/RUNTIME_MODEL.md, "A last level read short")."""
    if above == 0 or inside_ns < MEMORY_LIKE * dram:
        return None
    near = [(fp, ns) for fp, ns in huge if above <= fp < 4 * above and ns < MEMORY_LIKE * dram]
    return max(near) if near else None


def near_memory(huge: list[tuple[int, float]], last_seen: int, clock: float, floor: float) -> dict | None:
    """Memory's latency where the chase leaves the last cache level but not yet the TLB: the 2MB
    point at the smallest footprint at least twice what the last level was seen to hold (half
    of it or less still hits there). The `host` model uses it instead of the largest point's
    on a machine whose 2MB pages the TLB splinters, where the chase over `largest` also pays a
    4KB TLB miss and a two-dimensional walk on most steps, which the nested model then charges
    itself (docs/RUNTIME_MODEL.md, "The splintered host"). None: no point that far."""
    beyond = [(fp, ns) for fp, ns in huge if fp >= 2 * last_seen]
    if not beyond:
        return None
    fp, ns = beyond[0]
    return {"footprint": fp, "ns": round(ns, 3), "cycles": max(round(ns * clock, 2), floor)}


# The last level's fit (docs/RUNTIME_MODEL.md, "The last level's fit"). Sizes tried: the level's
# size times each scale, down to the level above's size; the chase trace the model runs has
# FIT_ACCESSES steps (2M: each of the 65,536 page-table lines of a 1GiB footprint is read about
# 60 times, so first reads are under 2% of them).
FIT_SCALES = (1, 3 / 4, 1 / 2, 3 / 8, 1 / 4, 3 / 16, 1 / 8, 3 / 32, 1 / 16, 3 / 64, 1 / 32)
FIT_ACCESSES = 2_000_000


def fit_sizes(size: int, above: int, ways: int, line: int = 64) -> list[int]:
    """The last level's sizes the fit tries, largest first: `size` times each of FIT_SCALES,
    rounded down to whole sets, none below `above` (the level above's size)."""
    unit = ways * line
    out: list[int] = []
    for s in FIT_SCALES:
        n = int(size * s) // unit * unit
        if n >= max(above, unit) and n not in out:
            out.append(n)
    return out


def model_chase_ns(machine_toml: str, trace: str, settings: str = "+dependence=1") -> tuple[float, float]:
    """ns a step the model gives for the chase `trace` (every step dependent) on 4KB and on 2MB
    pages, with `host` read from `machine_toml` (the faults and zeroing of first touches are left
    out: calibrate's chase touches its memory before it is timed). `settings`: the overlap
    model's modifiers (another reading of the trace, as `fit_bounds_norm`'s k chases)."""
    (a, b), _ = model_chase(machine_toml, trace, settings)
    return a, b


@contextlib.contextmanager
def host_from(machine_toml: str):
    """`host` read from `machine_toml` (a machine file calibrate is fitting) while in the block:
    SUPERPAGER_CALIBRATION points at a temporary copy, and is put back after."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory(prefix="superpager-fit-") as d:
        path = Path(d) / "host.toml"
        path.write_text(machine_toml)
        before = os.environ.get("SUPERPAGER_CALIBRATION")
        os.environ["SUPERPAGER_CALIBRATION"] = str(path)
        try:
            yield
        finally:
            if before is None:
                del os.environ["SUPERPAGER_CALIBRATION"]
            else:
                os.environ["SUPERPAGER_CALIBRATION"] = before


def model_chase(machine_toml: str, trace: str, settings: str = "+dependence=1") -> tuple[tuple[float, float], tuple[float, float]]:
    """`model_chase_ns`, and the lines the chase brought from memory a ns on each page size (its
    own fills of the last level: `tenant_fill_rate`)."""
    from .predict import predict
    with host_from(machine_toml):
        rows = predict(trace, f"host{settings}", ["base", "fixed:2MiB"], progress=False)
    step = [(r["seconds"] - r["faults"] - r["zeroing"] - r["copying"]) / r["accesses"] * 1e9 for r in rows]
    fills = [r["memory_lines"] / (step[i] * r["accesses"]) if step[i] > 0 else 0.0 for i, r in enumerate(rows)]
    return (step[0], step[1]), (fills[0], fills[1])


def tenant_fill_rate(whole: int, kept: int, fills: tuple[float, float]) -> float | None:
    """The rate (lines a ns) at which other tenants fill a last level of `whole` bytes that leaves
    a program filling it at F lines a ns `kept` bytes: under LRU each keeps the share of the ways
    its fills are of all fills, kept / whole = F / (F + R), so R = F (whole / kept - 1). `fills`:
    F of the chase the fit chose `kept` for, on 4KB and on 2MB pages; R is the mean of the two
    (they differ by what the walks bring in). None where the fit kept the whole level (no
    tenants to see) or the chase brought nothing from memory."""
    rates = [f * (whole / kept - 1) for f in fills if f > 0]
    if kept >= whole or not rates:
        return None
    return round(sum(rates) / len(rates), 6)


def relative_log_errors(got: tuple[float, float], at_ref: tuple[float, float], probe: dict, i: int, i_ref: int) -> list[float]:
    """The walk probes' fits' (`fit_bounds_norm`, `fit_share_exponent`) terms for one point: on
    4KB and on 2MB pages, the squared log of the model's time at the point relative to its time
    at the reference point (`got`, `at_ref`: 4KB, 2MB), over the probe's time at its `i`th k
    relative to its `i_ref`th. Taking both relative cancels what moved the whole probe (the
    minute's state of a noisy machine); a page size where a time is not positive gives no term."""
    return [math.log((got[j] / at_ref[j]) / (ns[i] / ns[i_ref])) ** 2
            for j, ns in enumerate((probe["ns_4k"], probe["ns_2m"])) if min(ns[i], ns[i_ref], got[j], at_ref[j]) > 0]


def rms(terms: list[float]) -> float:
    """Root mean square of squared-error terms, to 4 places; infinite where there are none (a
    candidate with no term is never the nearest)."""
    return round(math.sqrt(sum(terms) / len(terms)), 4) if terms else float("inf")


#: The norms the walk probe's fit tries (`fit_bounds_norm`): 0 is the largest bound alone.
BOUNDS_NORMS = (0.0, 4.0, 3.0, 2.0, 1.5, 1.0)


def fit_bounds_norm(machine_toml: str, walk: dict, progress=None) -> dict | None:
    """How the overlap's bounds combine (`[cache] bounds_norm`; docs/RUNTIME_MODEL.md, "Bounds
    near each other"), fitted to the walk probe. The model is run on calibrate's chase over the
    probe's footprint read as k chases at once (every load independent, a window of k loads:
    `+dependence=0+rob=k x instructions an access`) at each k the probe ran at which the window
    holds more walks or misses than the machine has walkers or fill buffers, with each norm of
    BOUNDS_NORMS. Each time is taken relative to the time at k0, the largest k the probe ran at
    which no resource is full (there every norm gives the same time), the probe's likewise, so
    the fit sees only how the time falls with k once resources fill, not how near the model's
    times are to the probe's where nothing is full (the window and the last level's share set
    those). The norm whose ratios are nearest the probe's (root mean square of the log ratios,
    on 4KB and 2MB pages) is taken. Returns {"bounds_norm": p (0: the largest alone),
    "bounds_norm_errors": [[p, error], ...]}, or None where the probe ran at no k past the
    resources, or at no k0."""
    import tempfile
    walkers, mlp, ipa = _machine_overlap(machine_toml)
    room = min(walkers, mlp)
    ks = [(i, k) for i, k in enumerate(walk["chains"]) if k > room]
    below = [(i, k) for i, k in enumerate(walk["chains"]) if k <= room]
    if not ks or not below:
        return None
    i0, k0 = max(below, key=lambda e: e[1])

    def settings(k: int, p: float) -> str:
        return f"+dependence=0+rob={k * ipa:g}+bounds_norm={p:g}"

    errors = []
    with tempfile.TemporaryDirectory(prefix="superpager-fit-") as d:
        trace = str(Path(d) / "chase.spt")
        chase_trace(trace, int(walk["footprint"]))
        done, runs = 0, len(BOUNDS_NORMS) * len(ks) + 1
        if progress:
            progress(done, runs, f"the bounds' norm: the model on the chase as {k0} chases at once")
        at_k0 = model_chase_ns(machine_toml, trace, settings(k0, 0.0))
        done += 1
        for p in BOUNDS_NORMS:
            sq = []
            for i, k in ks:
                if progress:
                    progress(done, runs, f"the bounds' norm: the model on the chase as {k} chases at once, norm {p:g}")
                got = model_chase_ns(machine_toml, trace, settings(k, p))
                done += 1
                sq += relative_log_errors(got, at_k0, walk, i, i0)
            errors.append([p, rms(sq)])
    best = min(errors, key=lambda e: e[1])  # min keeps the first of equals: the largest alone
    return {"bounds_norm": best[0], "bounds_norm_errors": errors}


#: The walk probe's second footprint, as a multiple of `--largest` (`walk_probe_far`): where a
#: program's share of a shared last level is smaller still, so the probe tells how the share
#: grows with the fills (over 1GiB alone it tells the exponent only weakly: docs/RUNTIME_MODEL.md,
#: "A share that grows slower than the fills").
FAR_FACTOR = 4
#: Memory the far probe leaves free beyond its footprint, at least (it maps the footprint twice
#: in turn, never at once; the rest is for everything else on the machine).
FAR_HEADROOM = 2 << 30
#: The exponents the share's fit tries, each with `walk_hiding` 0 (`fit_share_exponent`). Down
#: to 0.3 since the fifty-eighth session: under the reuse law both fits of the fifty-seventh
#: chose 0.5, the floor then, and 0.4 and 0.3 bracket the nearest (docs/RUNTIME_MODEL.md, "The
#: share's exponent, fitted").
SHARE_EXPONENTS = (1.0, 0.85, 0.7, 0.6, 0.5, 0.4, 0.3)


def memory_available() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes; None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_short(footprint: int) -> str | None:
    """Why a walk probe over `footprint` cannot run now, or None where it can: it needs that much
    memory free and FAR_HEADROOM more."""
    free = memory_available()
    if free is not None and free >= footprint + FAR_HEADROOM:
        return None
    return (f"needs {size_text(footprint + FAR_HEADROOM)} free, and "
            + ("MemAvailable could not be read" if free is None else f"{size_text(free)} is"))


def walk_probe_far(binary: Path, largest: int, steps: int, repeats: int) -> tuple[dict | None, str | None]:
    """The walk probe over FAR_FACTOR times `largest`, and why it did not run (None where it
    did): it needs that much memory free and more (FAR_HEADROOM), and 2MB pages."""
    far = FAR_FACTOR * largest
    short = memory_short(far)
    if short:
        return None, f"the far walk probe {short}"
    # Only its times are the fit's; walkers and misses in flight are the first probe's.
    p = walk_times(binary, far, steps, repeats)
    return (None, f"2MB pages could not be had over {size_text(far)}") if p is None else (p, None)


def median_walk_times(readings: list[dict]) -> dict:
    """The median, at each chain count and page size, of readings of one walk probe (each a
    `walk_times` dict over the same footprint and chains)."""
    first = readings[0]
    assert all(r["footprint"] == first["footprint"] and list(r["chains"]) == list(first["chains"]) for r in readings)
    return {"footprint": first["footprint"], "chains": list(first["chains"]),
            **{key: [round(statistics.median(r[key][i] for r in readings), 3) for i in range(len(first["chains"]))]
               for key in ("ns_4k", "ns_2m")}}


def share_rate(rate: float, whole: int, kept: int, a: float) -> float:
    """The tenants' rate with exponent `a` that leaves the chase the `kept` bytes of `whole` it
    keeps under `rate` with the exponent 1: F^a / (F^a + R_a^a) = kept / whole gives R_a = F
    (whole / kept - 1)^(1/a), and `rate` = F (whole / kept - 1), so R_a = `rate` (whole / kept -
    1)^(1/a - 1)."""
    return round(rate * (whole / kept - 1) ** (1 / a - 1), 6)


def fit_share_exponent(machine_toml: str, probes: list[dict], whole: int, kept: int, rate: float, progress=None) -> dict | None:
    """How a program's share of the shared last level grows with its fills (`[cache]
    share_exponent`; docs/RUNTIME_MODEL.md, "The share's exponent, fitted"), fitted to the walk
    probes `probes` (over `--largest` and FAR_FACTOR times it). The model is run on calibrate's
    chase over each probe's footprint read as k chases at once (`fit_bounds_norm`'s reading) at
    each k from 2, first as `machine_toml` is (the exponent 1, the window probe's `walk_hiding`),
    then with each exponent a of SHARE_EXPONENTS, `walk_hiding` 0 and the tenants' rate
    `share_rate` (so one chase keeps the `kept` bytes the last level's fit chose, and its time at
    k = 1 is every candidate's). Why `walk_hiding` 0 with them: the window probe reads as hidden
    what the share's shortening of a walk takes off it; over four times the footprint, where the
    share is small, it read 0.002 and 0.020 ("The window probe over 4GiB"). Each time is taken
    relative to the time at one chase over the same footprint, the probe's likewise (as
    `fit_bounds_norm` does), so that the fit sees how the time falls as chases are added, which
    the share sets, and not how far the machine moved between the chase points the model was
    fitted to and the probe (the fifty-fourth session's first calibrate read one chase over 1GiB
    on 4KB pages at 258.7 ns among the points and 211.2 in the walk probe). The candidate whose
    ratios are nearest the probes' (root mean square of the log ratios, 4KB and 2MB pages, every
    probe and k) is taken; the model as written where it is nearest or as near. Returns the
    `[calibration.share_fit]` table, or None where no probe ran at one chase and at a k from 2."""
    import tempfile
    _, _, ipa = _machine_overlap(machine_toml)
    probes = [p for p in probes if 1 in p["chains"]]
    runs = [(p, i, k) for p in probes for i, k in enumerate(p["chains"]) if k >= 2]
    if not runs:
        return None
    candidates = [("", None)] + [(f"+share_exponent={a:g}+walk_hiding=0+tenant_fill_rate={share_rate(rate, whole, kept, a):.6f}", a)
                                 for a in SHARE_EXPONENTS]
    errors = []
    with tempfile.TemporaryDirectory(prefix="superpager-fit-") as d:
        traces = {}
        for p in probes:
            traces[p["footprint"]] = str(Path(d) / f"chase-{p['footprint']}.spt")
            chase_trace(traces[p["footprint"]], int(p["footprint"]))
        done, total = 0, len(candidates) * len(runs) + len(probes)
        one = {}
        for p in probes:
            if progress:
                progress(done, total, f"the share's exponent: the model on the chase over {size_text(p['footprint'])}, one chase")
            one[p["footprint"]] = model_chase_ns(machine_toml, traces[p["footprint"]], f"+dependence=0+rob={ipa:g}")
            done += 1
        for extra, a in candidates:
            sq = []
            for p, i, k in runs:
                if progress:
                    what = "as written" if a is None else f"exponent {a:g}"
                    progress(done, total, f"the share's exponent: the model on the chase over {size_text(p['footprint'])} as {k} chases at once, {what}")
                got = model_chase_ns(machine_toml, traces[p["footprint"]], f"+dependence=0+rob={k * ipa:g}{extra}")
                done += 1
                sq += relative_log_errors(got, one[p["footprint"]], p, i, p["chains"].index(1))
            errors.append((a, rms(sq)))
    written = errors[0][1]
    tried = [(float(a), e) for a, e in errors[1:] if a is not None]
    best_a, best = min(tried, key=lambda e: e[1])  # min keeps the first of equals: the larger exponent
    out = {"exponent": 1.0, "as_written_error": written, "errors": [[a, e] for a, e in tried]}
    if best < written:
        out.update(exponent=best_a, walk_hiding=0.0, tenant_fill_rate=share_rate(rate, whole, kept, best_a))
    return out


def _machine_overlap(machine_toml: str) -> tuple[float, float, float]:
    """(walkers, mlp, instructions an access) of `host` as `machine_toml` makes it."""
    with host_from(machine_toml):
        c = _core.machine_info("host")["cache"]
    return float(c["walkers"]), float(c["mlp"]), float(c["instructions_per_access"])


def chase_trace(path: str, footprint: int) -> None:
    """calibrate's chase as a trace the model runs: one random cycle of 64-byte lines over
    `footprint`, FIT_ACCESSES steps, each load the address the one before read, after what
    chase.c does before it times (every page written, the cycle run once: `gen --warm`), so that
    the model's timed steps, like the measured ones, include no first touch."""
    from .. import api
    api.gen("chase", path, size=size_text(footprint), accesses=FIT_ACCESSES, seed=1, progress=False, warm=True)


def fit_skipped(wanted: bool, levels: list[tuple[str, int, int, float]], largest: int, at_largest: dict[str, float]) -> str | None:
    """Why the last level's fit does not run, or None where it does. It needs two levels, the
    chase on both page sizes at `largest`, and `largest` at least 4x the last level: below that
    the chase's own lines fit in the level, and the fit would measure them, not how long a
    page-table line stays."""
    if not wanted:
        return "--no-last-level-fit"
    if len(levels) < 2:
        return "one data-cache level"
    if "4k" not in at_largest or "2m" not in at_largest:
        return f"no chase on both 4KB and 2MB pages at {size_text(largest)}"
    if largest < 4 * levels[-1][1]:
        return f"--largest {size_text(largest)} is under 4x the {levels[-1][0]}'s {size_text(levels[-1][1])}"
    return None


#: The fit's footprints step down from `--largest` by this factor (1GiB, 256MiB, 64MiB, 16MiB).
FIT_FOOTPRINT_STEP = 4
#: Memory's latencies the fit tries, in cycles: from the last level's latency up to this many
#: times the slowest 2MB point, a cycle apart.
FIT_MEMORY_CEILING = 4


def fit_footprints(largest: int, last_level: int, measured: set[tuple[int, str]]) -> list[int]:
    """The chase's footprints the fit compares, ascending: `largest`, then a quarter of it, and so
    on while at least four times `last_level` (smaller, the chase's own lines fit in the level
    and the fit would measure them), each measured on both page sizes."""
    out = []
    fp = largest
    while fp >= 4 * last_level:
        if (fp, "4k") in measured and (fp, "2m") in measured:
            out.append(fp)
        fp //= FIT_FOOTPRINT_STEP
    return sorted(out)


def fit_memory(lines: list[tuple[float, float, float]], lo: float, hi: float) -> tuple[float, float]:
    """Memory's latency (cycles, a whole number from `lo` to `hi`) at which the model's times
    `a + b * cycles` come nearest the measured ones, each (a, b, measured) of `lines`: the smallest
    root mean square of the log ratios; the lower latency on a tie. Returns (cycles, rms)."""
    import math
    best = None
    for d in range(max(1, math.ceil(lo)), math.floor(hi) + 1):
        terms = [math.log(max(a + b * d, 1e-9) / m) ** 2 for a, b, m in lines]
        e = math.sqrt(sum(terms) / len(terms))
        if best is None or round(e, 12) < round(best[1], 12):
            best = (float(d), e)
    if best is None:
        raise CalibrateError(f"the last level's fit: no memory latency between {lo:.0f} and {hi:.0f} cycles to try")
    return best


#: A 2MB chase point past the level above that reads more than this many times the fastest such
#: point is not held whole by the last level, whatever size is tried: memory serves part of it.
#: A level's hits do not double in latency between footprints it holds (the Zen 4 VM's L3 read
#: 13.9, 16.1 and 18.2 ns at 2, 4 and 8MiB in the fifty-fourth session's bench), while memory
#: is about ten times slower, so a point at twice has about a tenth of its steps going to memory
#: (docs/RUNTIME_MODEL.md, "A point the level does not hold", fifty-fifth session).
HELD_WHOLE_SPREAD = 2.0


def held_whole_cycles(points: dict, above: int, size: int, clock: float, floor: float) -> float | None:
    """The last level's latency (cycles) at `size`: the chase (`level_points`: the faster page
    size's) at the largest footprint past the level above (`above` bytes) that `size` holds
    whole, at least `floor` (the level above's latency); None where no point lies between. A
    point read at more than HELD_WHOLE_SPREAD times the fastest past the level above is not held
    whole (other tenants of a shared level took part of it while it ran) and is passed over."""
    past = [(fp, ns) for fp, ns in level_points(points) if above < fp]
    if not past:
        return None
    fastest = min(ns for _, ns in past)
    held = [(fp, ns) for fp, ns in past if fp <= size and ns <= HELD_WHOLE_SPREAD * fastest]
    return max(max(held)[1] * clock, floor) if held else None


def with_memory(inp: dict, level_size: int, cycles: float, level_cycles: float | None = None) -> str:
    """The calibrated machine file for `inp` with the last level at `level_size` and memory's
    latency at `cycles` (where `host` takes it: the near point on a splintered host, else
    `dram_cycles`)."""
    # No fit of its own: a fitted latency there would stand in for `cycles` (host.rs `calibrated_toml`).
    changed = {**inp, "level_sizes": [*inp["level_sizes"][:-1], size_text(level_size)], "dram_cycles": cycles, "last_level_fit": None}
    if level_cycles is not None:
        changed["level_cycles"] = [*inp["level_cycles"][:-1], level_cycles]
    if inp.get("near_memory"):
        changed["near_memory"] = {**inp["near_memory"], "cycles": cycles}
    return _core.calibrated_host_toml(json.dumps(changed))


def fit_last_level(inp: dict, levels: list[tuple[str, int, int, float]], footprint: int, measured_4k: float, measured_2m: float,
                   progress=None) -> dict | None:
    """The last level's capacity, and memory's latency with it, at which the model, run on
    calibrate's own chase, takes the times the chase measured: at `footprint` (`--largest`) and at
    every quarter of it down to four times the last level (`fit_footprints`), on 4KB and 2MB
    pages. `inp`: calibrate's input to the machine file as it stands (the seen sizes in
    `level_sizes`, the points in `points`). None with fewer than two levels.
    Why the capacity: a virtual machine shares its host's last level with other tenants; the
    capacity that keeps a page-table line between two walks that read it is what is left to this
    machine, which neither CPUID nor the cyclic chase (whose lines all come back at once)
    measures. Why memory's latency too: read from one point it is either the largest point's,
    which pays walks, or a point just past the last level, where that level still serves part of
    the chase (the Zen 5 VM, forty-fourth session: 92 ns at 8MiB, 154 ns from 16MiB on), and a
    latency read short makes the fit shrink the level to make up the time. The model's time a step
    is affine in memory's latency (every miss of the chase is on its one chain), so each size
    costs two runs a footprint, and the latency is then searched a cycle at a time. Each size
    runs with the last level's latency read where that size holds the chase whole
    (`held_whole_cycles`; docs/RUNTIME_MODEL.md, "The last level's latency, read where it holds
    the chase")."""
    import tempfile
    if len(levels) < 2:
        return None
    name, size, ways, _ = levels[-1]
    seen = inp["level_sizes"][-1]
    if seen:
        from ..workloads import parse_size
        size = parse_size(seen)
    sizes = fit_sizes(size, levels[-2][1], ways)
    points = {(fp, pg): ns for fp, pg, ns in inp.get("points", [])}
    points[(footprint, "4k")], points[(footprint, "2m")] = measured_4k, measured_2m
    fps = fit_footprints(footprint, size, set(points)) or [footprint]
    clock = inp["clock_ghz"]
    # Two latencies a fit run: the one read (the near point's or the largest point's) and twice it.
    read = (inp.get("near_memory") or {}).get("cycles") or inp["dram_cycles"]
    hi = FIT_MEMORY_CEILING * max(ns for (fp, pg), ns in points.items() if pg == "2m") * clock
    d1, d2 = read, 2 * read
    ns_4k, ns_2m, memory, rms, level, fills = [], [], [], [], [], []
    runs, done = len(sizes) * (2 * len(fps) + 1), 0
    with tempfile.TemporaryDirectory(prefix="superpager-fit-") as d:
        traces = {}
        for fp in fps:
            traces[fp] = str(Path(d) / f"chase-{fp}.spt")
            chase_trace(traces[fp], fp)
        for n in sizes:
            lat = held_whole_cycles(points, levels[-2][1], n, clock, inp["level_cycles"][-2]) or inp["level_cycles"][-1]
            level.append(round(lat, 2))
            lines = []
            for fp in fps:
                got = []
                for cycles in (d1, d2):
                    if progress:
                        progress(done, runs, f"the last level's fit: the model on the chase at {size_text(fp)} with {name} at {size_text(n)}")
                    got.append(model_chase_ns(with_memory(inp, n, cycles, lat), traces[fp]))
                    done += 1
                for i, pg in enumerate(("4k", "2m")):
                    b = (got[1][i] - got[0][i]) / (d2 - d1)
                    lines.append((got[0][i] - b * d1, b, points[(fp, pg)]))
            cycles, e = fit_memory(lines, lat, hi)
            if progress:
                progress(done, runs, f"the last level's fit: the model on the chase at {size_text(footprint)} with {name} at {size_text(n)}, memory at {cycles:.0f} cycles")
            (a, b), f = model_chase(with_memory(inp, n, cycles, lat), traces[footprint])
            done += 1
            ns_4k.append(round(a, 3))
            ns_2m.append(round(b, 3))
            fills.append(f)
            memory.append(cycles)
            rms.append(round(e, 6))
    best = min(range(len(sizes)), key=lambda i: (round(rms[i], 6), i))
    rate = tenant_fill_rate(levels[-1][1], sizes[best], fills[best])
    out = {"footprint": footprint, "measured_4k_ns": measured_4k, "measured_2m_ns": measured_2m,
           "sizes": sizes, "ns_4k": ns_4k, "ns_2m": ns_2m, "chosen": sizes[best],
           "footprints": fps, "memory_cycles": memory, "rms": rms, "level_cycles": level,
           "tenant_fill_rate": rate}
    if rate is not None:
        out["share_law"] = SHARE_LAW
    return out


#: How a share of a shared last level keeps its hits in the machine files calibrate writes
#: (`[cache] share_law`; mmu/reuse.rs; docs/RUNTIME_MODEL.md, "A share that remembers when a
#: line was last used").
SHARE_LAW = "reuse"


#: The frame probe's region: large enough that a few thousand runs of frames show (65,536
#: pages), small enough to touch in well under a second.
FRAME_PROBE_BYTES = 256 << 20
PAGE = 4096
#: /proc/PID/pagemap: one u64 per virtual page, bit 63 "page present", bits 0-54 the frame
#: number (Documentation/admin-guide/mm/pagemap.rst); frame numbers read as zero without
#: CAP_SYS_ADMIN.
PAGEMAP_PRESENT = 1 << 63
PAGEMAP_PFN = (1 << 55) - 1


def new_run_share(pfns: list[int]) -> float | None:
    """Of the neighbouring pages both present, the share whose frames are not neighbours (a
    new run of frames starts there, ascending or descending); None if no frame number was read."""
    pairs = [(a, b) for a, b in zip(pfns, pfns[1:]) if a and b]
    if not pairs:
        return None
    return sum(1 for a, b in pairs if abs(b - a) != 1) / len(pairs)


#: Frames a host page-table line maps (eight 8-byte entries in a 64-byte line), and frames a host
#: page-table page maps (512 entries): on a nested machine whose host maps guest memory with 4KB
#: pages, the guest frames a process's pages lie in decide how many of each its walks read.
FRAMES_A_LINE = 8
FRAMES_A_TABLE = 512


def frame_groups(pfns: list[int], group: int) -> float | None:
    """Distinct aligned groups of `group` frames the present pages lie in, a page: 1 / group
    where the pages fill whole groups, up to 1 where each lies alone in its own; None if no
    frame number was read."""
    present = [p for p in pfns if p]
    if not present:
        return None
    return len({p // group for p in present}) / len(present)


def touched_frames(footprint: int) -> list[int]:
    """Map `footprint` bytes of anonymous memory on 4KB pages (MADV_NOHUGEPAGE), touch them page
    by page in address order (as a program filling an array does), and read their frame numbers
    back from /proc/self/pagemap (0 where absent or unreadable)."""
    m = mmap.mmap(-1, footprint, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            m.madvise(mmap.MADV_NOHUGEPAGE)
        for off in range(0, footprint, PAGE):
            m[off] = 1
        view = ctypes.c_char.from_buffer(m)
        addr = ctypes.addressof(view)
        del view  # the buffer export must end before the map can close
        pages = footprint // PAGE
        with open("/proc/self/pagemap", "rb") as f:
            f.seek((addr // PAGE) * 8)
            raw = f.read(pages * 8)
    finally:
        m.close()
    return [v & PAGEMAP_PFN if v & PAGEMAP_PRESENT else 0 for v in struct.unpack(f"{len(raw) // 8}Q", raw)]


def frame_probe(footprint: int = FRAME_PROBE_BYTES, repeats: int = 3) -> dict | None:
    """How scattered the kernel hands out a process's 4KB frames: `new_run_share` of
    `touched_frames`, `repeats` times (a fresh region each), and their median as `scatter`; and,
    per repeat, how close together they lie (`frame_groups` of FRAMES_A_LINE and
    FRAMES_A_TABLE frames: recorded, not used by the model; docs/RUNTIME_MODEL.md, "Does the
    machine care where the frames are?"). None where pagemap gives no frame numbers (not root) or cannot be read."""
    shares, lines, tables = [], [], []
    for _ in range(repeats):
        try:
            pfns = touched_frames(footprint)
        except OSError:
            return None
        share, line, table = new_run_share(pfns), frame_groups(pfns, FRAMES_A_LINE), frame_groups(pfns, FRAMES_A_TABLE)
        if share is None or line is None or table is None:
            return None
        shares.append(round(share, 4))
        lines.append(round(line, 4))
        tables.append(round(table, 4))
    return {"footprint": footprint, "new_runs": shares, "scatter": statistics.median(shares), "groups_8": lines, "groups_512": tables}


# The host-frames probe (docs/RUNTIME_MODEL.md, "Host frames"): 96 lines on 2MB pages, one every
# 64KiB, against as many one every 68KiB (17 4KB pages: their bits 12-15 take all 16 values).
# In a 16-way L2 indexed by bits 6-15 (1MiB) or 6-16 (2MiB), the strided lines crowd one or two
# sets if the host keeps the guest's 4KB pieces of a 2MB page in order; scattered, 96 lines over
# 16 sets average 6 a set and fit. In order the strided chase is served by the level past L2:
# about 3x L2's latency or more on every core in the core table (Zen 4: 14 against 50 cycles,
# AMD Software Optimization Guide for Family 19h; Golden Cove: 16 against 70 and more). Scattered
# it is served by L2, as the control is. HOST_SCATTERED_BELOW lies between (ESTIMATE: 1 and 3
# meet at 1.73 in log terms; 1.5 leans towards calling a partly crowded L2 in order).
HOST_FRAMES_LINES = 96
HOST_FRAMES_STRIDE = 64 << 10
HOST_FRAMES_CONTROL = 68 << 10
HOST_SCATTERED_BELOW = 1.5


#: The stream probe's footprint (`stream_probe`): four times a 32MiB last level, so a sweep's
#: page-table lines come from memory as a large array's do, and small enough that the model's
#: run of the same sweep takes a second or two.
STREAM_PROBE_BYTES = 256 << 20
#: Passes of the probe's timed sweep, and of the model's (after one untimed pass in both).
STREAM_PROBE_PASSES = 2
#: Runs of the probe on each page size, at least (`--repeats` where more). The fit reads a
#: difference of two times near 290 ns a page against the model's 50-90 ns of walks: in the
#: fifty-eighth session's first bench, 3 runs each read 295.7 against 285.0 ns (stream_ahead
#: 0.79) where a run by hand an hour before read 283.8 against 434.0 (1.0, held there), so one
#: run's noise moves the share by a fifth. A run takes about half a second.
STREAM_PROBE_RUNS = 9


def stream_probe(binary: Path, repeats: int) -> dict | None:
    """ns a 4KB page of a sequential read over STREAM_PROBE_BYTES on 4KB pages and on 2MB pages
    (chase.c `sweep`), the medians of `repeats` runs of each (STREAM_PROBE_RUNS at least),
    alternating; None where 2MB pages are not to be had. `fit_stream_ahead` reads it
    (docs/RUNTIME_MODEL.md, "Streams across pages")."""
    steps = STREAM_PROBE_PASSES * STREAM_PROBE_BYTES // 8
    runs: dict[str, list[float]] = {"4k": [], "2m": []}
    for _ in range(max(repeats, STREAM_PROBE_RUNS)):
        for pages in ("4k", "2m"):
            f = _run_chase(binary, ["sweep", str(STREAM_PROBE_BYTES), pages, str(steps)], f"the stream probe on {pages} pages (chase sweep)")
            if pages == "2m" and int(f["huge_bytes"]) < STREAM_PROBE_BYTES // 2:
                return None
            runs[pages].append(float(f["ns_page"]))
    return {"footprint": STREAM_PROBE_BYTES, "ns_4k": round(statistics.median(runs["4k"]), 3), "ns_2m": round(statistics.median(runs["2m"]), 3)}


def fit_stream_ahead(machine_toml: str, probe: dict) -> dict:
    """The share of a sequential stream's walks the machine does ahead of it (`[cache]
    stream_ahead`), from the stream probe `probe`: the model (the machine as written so far,
    `stream_ahead` 0) runs the same sweep (`gen seq`, one read a line, one untimed pass and
    STREAM_PROBE_PASSES timed ones, as chase.c's) on 4KB and on 2MB pages, and its walk stall a
    4KB page on each is set beside the probe's times. What the machine's 4KB pages add, over
    what the model's add, is the part of the walks it does not hide: stream_ahead = 1 -
    (ns_4k - ns_2m) / (model_4k - model_2m), within 0 and 1 (0 where the model's walks add
    nothing). Returns the probe with `model_4k`, `model_2m` and `stream_ahead`."""
    import tempfile
    from .. import api
    from .predict import predict
    fp = int(probe["footprint"])
    pages = fp // 4096
    with tempfile.TemporaryDirectory(prefix="superpager-fit-") as d:
        trace = str(Path(d) / "sweep.spt")
        api.gen("seq", trace, size=size_text(fp), elem=64, passes=1 + STREAM_PROBE_PASSES, seed=1, progress=False)
        with host_from(machine_toml):
            rows = predict(trace, "host+dependence=0+stream_ahead=0", ["base", "fixed:2MiB"], progress=False)
    # The whole run's walk stall over every pass's crossings: the first pass's walks are the
    # others' (the sweep's page-table lines come from memory in each pass alike).
    m4, m2 = (r["walk"] * 1e9 / (pages * (1 + STREAM_PROBE_PASSES)) for r in rows)
    added = m4 - m2
    ahead = 0.0 if added <= 0 else min(1.0, max(0.0, 1.0 - (probe["ns_4k"] - probe["ns_2m"]) / added))
    return {**probe, "model_4k": round(m4, 3), "model_2m": round(m2, 3), "stream_ahead": round(ahead, 3)}


def host_frames_probe(binary: Path, steps: int, repeats: int) -> dict | None:
    """Whether the caches see a guest 2MB page's 4KB pieces in order (the host keeps them so) or
    scattered; None when 2MB pages are not to be had here."""
    runs = []
    for stride in (HOST_FRAMES_STRIDE, HOST_FRAMES_CONTROL):
        ns, huge = median_chase(binary, HOST_FRAMES_LINES * stride, "2m", steps, repeats, f"strided:{stride}")
        if huge < HOST_FRAMES_LINES * stride // 2:
            return None
        runs.append(ns)
    strided, control = runs
    return {"lines": HOST_FRAMES_LINES, "strided_ns": round(strided, 3), "control_ns": round(control, 3),
            "scattered": strided < HOST_SCATTERED_BELOW * control}


def fit_and_write(inp: dict, levels: list[tuple[str, int, int, float]], largest: int, out: Path, last_level_fit: bool, progress=None,
                  bounds_norm_fit: bool = False, share_fit: bool = True, share_probes: list[dict] | None = None) -> tuple[str | None, str | None]:
    """The last level's fit on `inp` (calibrate's input to the machine file, its points in
    `points`) where it can run, then the share's exponent's (`share_fit`) and the bounds' norm's
    (`bounds_norm_fit`) where asked and they can, then the machine file written to `out` whole or
    not at all. `share_probes`: the two walk probes' times the share's fit reads in place of
    `inp`'s (`refit`'s). Returns why the last level's fit and why the share's fit did not run
    (None where each did)."""
    at_largest = {pg: ns for fp, pg, ns in inp["points"] if fp == largest}
    why = fit_skipped(last_level_fit, levels, largest, at_largest)
    if why is None:
        fitted = fit_last_level(inp, levels, largest, at_largest["4k"], at_largest["2m"], progress=progress)
        assert fitted is not None  # fit_skipped saw two levels
        inp["last_level_fit"] = fitted
        inp["level_sizes"] = [*inp["level_sizes"][:-1], size_text(fitted["chosen"])]
        # The chosen size's level latency reaches [cache] as memory's does: host.rs
        # `calibrated_toml` takes both from the fit; `level_cycles` stays as read.
    if isinstance(inp.get("walk_probe"), dict):
        # A norm is this run's fit or none, never one a refit file held from an earlier fit.
        inp["walk_probe"] = {k: v for k, v in inp["walk_probe"].items() if k not in ("bounds_norm", "bounds_norm_errors")}
    # Likewise the share's fit: this run's or none.
    inp.pop("share_fit", None)
    text = _core.calibrated_host_toml(json.dumps(inp))
    shared = inp.get("last_level_fit") or {}
    share_why = ("not asked for (--no-share-fit)" if not share_fit
                 else "the last level's fit found no tenants (the level is not shared)" if not shared.get("tenant_fill_rate")
                 else "no walk probe" if not inp.get("walk_probe")
                 else "no far walk probe" + (f" ({inp['walk_probe_far_skipped']})" if inp.get("walk_probe_far_skipped") else "")
                 if not inp.get("walk_probe_far") else None)
    if share_why is None:
        # Fitted on the machine as written so far (its last level, memory, walkers and window).
        got = fit_share_exponent(text, share_probes or [inp["walk_probe"], inp["walk_probe_far"]], levels[-1][1], int(shared["chosen"]),
                                 float(shared["tenant_fill_rate"]), progress)
        if got is None:
            share_why = "the walk probes ran at no k from 2"
        else:
            inp["share_fit"] = got
            text = _core.calibrated_host_toml(json.dumps(inp))
    if isinstance(inp.get("stream_probe"), dict):
        # Fitted on the machine as written so far; a refit file's earlier fit is not kept.
        measured = {k: inp["stream_probe"][k] for k in ("footprint", "ns_4k", "ns_2m")}
        if progress:
            progress(0, 1, f"stream ahead: the model on a sweep over {size_text(int(measured['footprint']))}")
        inp["stream_probe"] = fit_stream_ahead(text, measured)
        text = _core.calibrated_host_toml(json.dumps(inp))
    if bounds_norm_fit and inp.get("walk_probe"):
        # Fitted on the machine as written so far (its last level, memory, walkers and window).
        norm = fit_bounds_norm(text, inp["walk_probe"], progress)
        if norm is not None:
            inp["walk_probe"] = {**inp["walk_probe"], **norm}
            text = _core.calibrated_host_toml(json.dumps(inp))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return why, share_why


#: Keys of calibrate's probes that the machine file writes as sizes ("1GiB") and its input takes
#: as byte counts.
_SIZE_KEYS = ("footprint", "span", "hot", "region")


def _input_of(section: dict) -> dict:
    from ..workloads import parse_size
    return {k: parse_size(v) if k in _SIZE_KEYS and isinstance(v, str) else v for k, v in section.items()}


def refit(path: Path, out: Path, progress=None, last_level_fit: bool = True, bounds_norm_fit: bool = False,
          points: dict[tuple[int, str], float] | None = None, share_fit: bool = True,
          share_probes: list[dict] | None = None) -> dict:
    """Fit the machine file at `path` again from the measurements it holds (its chase points and
    probes; nothing is measured), by this version's rules, and write the result to `out`. For a
    file written before a rule changed (docs/RUNTIME_MODEL.md, "Memory's latency, fitted"), and to
    see what a rule makes of an earlier hour's measurements. `points`: chase points read since,
    {(footprint, "4k" or "2m"): ns a step}, which replace the file's at the same footprint and
    page size (`bench --model` gives the median of its readings over 1GiB: "The machine's state
    through the bench"). `share_probes`: the walk probe's and the far walk probe's times read
    since (`walk_times`: footprint, chains, ns_4k, ns_2m), which the share's fit reads in place
    of the file's (at the same footprints and chains; the file's walkers and mlp stay as they
    are). Errors name the file and the key."""
    import tomllib
    try:
        v = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise CalibrateError(f"{path}: not read ({e})") from None
    cal = v.get("calibration")
    if not isinstance(cal, dict) or not cal.get("points"):
        raise CalibrateError(f"{path}: no [calibration] points (a file superpager calibrate wrote has them)")
    clock = (v.get("cost") or {}).get("clock_ghz")
    if not isinstance(clock, (int, float)) or clock <= 0:
        raise CalibrateError(f"{path}: cost.clock_ghz is missing or not a positive number")
    try:
        pts = [(_input_of(p)["footprint"], p["pages"], float(p["ns"])) for p in cal["points"]]
    except (KeyError, TypeError, ValueError) as e:
        raise CalibrateError(f"{path}: calibration.points: an entry without a footprint, pages and ns ({e})") from None
    if points:
        held = {(fp, pg) for fp, pg, _ in pts}
        missing = [k for k in points if k not in held]
        if missing:
            fp, pg = missing[0]
            raise CalibrateError(f"{path}: calibration.points has no {pg} point at {size_text(fp)} to replace")
        pts = [(fp, pg, round(float(points.get((fp, pg), ns)), 3)) for fp, pg, ns in pts]
    levels = [(name, size, ways, 0.0) for name, size, ways in _core.host_cache_levels()]
    if not levels:
        raise CalibrateError("the host machine has no data caches (CPUID and sysfs gave none), so there is nothing to calibrate")
    f = fit(pts, levels, float(clock))
    probes = {k: _input_of(cal[k]) if isinstance(cal.get(k), dict) else None
              for k in ("tlb_probe", "walk_probe", "walk_probe_far", "frames", "host_frames", "window_probe", "scan_probe", "stream_probe")}
    inp = {"cpu": "", "date": cal.get("date", ""), "method": cal.get("method", ""), "clock_ghz": float(clock),
           "points": [[fp, pg, ns] for fp, pg, ns in pts], **probes, **f}
    if share_probes is not None:
        if len(share_probes) != 2:
            raise CalibrateError(f"{path}: the share's fit reads two walk probes, and {len(share_probes)} were given")
        for key, p in zip(("walk_probe", "walk_probe_far"), share_probes):
            had = probes.get(key)
            if not had or had.get("footprint") != p.get("footprint") or list(had.get("chains", [])) != list(p.get("chains", [])):
                raise CalibrateError(f"{path}: calibration.{key} is not over the footprint and chains of the times read since "
                                     f"({size_text(int(p.get('footprint') or 0))}, chains {p.get('chains')})")
    why, share_why = fit_and_write(inp, levels, max(fp for fp, _, _ in pts), out, last_level_fit, progress, bounds_norm_fit, share_fit,
                                   share_probes)
    return {**inp, "clock_how": f"measured nothing: refit from {path}, whose clock was {float(clock):.3f} GHz",
            "last_level_fit_skipped": why, "share_fit_skipped": share_why, "unsteady": unsteady_in(inp)}


def calibrate(out: Path, largest: int = 1 << 30, steps: int = 2_000_000, repeats: int = 3, progress=None,
              last_level_fit: bool = True, bounds_norm_fit: bool = False, share_fit: bool = True) -> dict:
    """Measure, fit, and write the calibrated host machine to `out`. Returns what was written."""
    levels = [(name, size, ways, 0.0) for name, size, ways in _core.host_cache_levels()]
    if not levels:
        raise CalibrateError("the host machine has no data caches (CPUID and sysfs gave none), so there is nothing to calibrate")
    nominal = clock_ghz()
    measured = measured_clock_ghz(chase_binary())
    clock = measured or nominal
    clock_how = (f"clock measured by a chain of dependent adds (model/chase.c clock), {measured} GHz; /proc/cpuinfo says {nominal} GHz"
                 if measured else f"clock from /proc/cpuinfo ({nominal} GHz)")
    pts = measure(largest, steps, repeats, progress=progress)
    f = fit(pts, levels, clock)
    if progress:
        progress(len(pts), len(pts), "the TLB probe (2MB pages held whole?)")
    probe = tlb_probe(chase_binary(), steps, repeats)
    if progress:
        progress(len(pts), len(pts), f"the walk probe ({len(WALK_CHAINS)} chain counts at {largest >> 20} MiB: how many misses and walks overlap)")
    # Where the TLB splinters 2MB pages, one walk is timed against memory short of the TLB's reach.
    near = f["near_memory"] if probe and probe["splintered"] else None
    walk = walk_probe(chase_binary(), largest, steps, repeats, miss_ns=near["ns"] if near else None)
    far: dict | None = None
    far_why: str | None = "not asked for (--no-share-fit)"
    if share_fit:
        if progress:
            progress(len(pts), len(pts), f"the far walk probe (the same chains at {FAR_FACTOR * largest >> 20} MiB: how the share of the last level grows with the fills)")
        far, far_why = walk_probe_far(chase_binary(), largest, steps, repeats)
    if progress:
        progress(len(pts), len(pts), f"the window probe (independent loads at {largest >> 20} MiB: how many instructions the core holds, how much of a walk it hides)")
    window = window_probe(chase_binary(), largest, steps, repeats, mlp=walk["mlp"] if walk else None)
    if progress:
        progress(len(pts), len(pts), f"the frame probe ({FRAME_PROBE_BYTES >> 20} MiB on 4KB pages read back from /proc/self/pagemap)")
    frames = frame_probe(repeats=repeats)
    if progress:
        progress(len(pts), len(pts), "the host-frames probe (does the L2 see a 2MB page's 4KB pieces in order?)")
    host_frames = host_frames_probe(chase_binary(), steps, repeats)
    if progress:
        progress(len(pts), len(pts), f"the stream probe (a sequential read over {STREAM_PROBE_BYTES >> 20} MiB: are a stream's walks done ahead of it?)")
    stream = stream_probe(chase_binary(), repeats)
    scan = None
    if len(levels) >= 2 and largest & (largest - 1) == 0:
        if progress:
            progress(len(pts), len(pts), f"the scan probe (a hot set between random loads over {largest >> 20} MiB: does the cache keep lines read again?)")
        scan = scan_probe(chase_binary(), largest, levels[-2][1], steps, repeats)
    inp = {
        "cpu": "",  # this CPU's model name, filled in by the core
        "date": datetime.date.today().isoformat(),
        "method": "dependent pointer chase over a random cycle of 64-byte lines (model/chase.c), 2MB pages, "
                  f"median of {repeats}, {steps} steps per point; {clock_how}",
        "clock_ghz": clock,
        "points": [[fp, pg, ns] for fp, pg, ns in pts],
        "tlb_probe": probe,
        "walk_probe": walk,
        "walk_probe_far": far,
        "walk_probe_far_skipped": far_why,
        "frames": frames,
        "host_frames": host_frames,
        "window_probe": window,
        "scan_probe": scan,
        "stream_probe": stream,
        **f,
    }
    for r in f["read_short"]:
        inp["method"] += (f"; {levels[r['level']][0]} read at {size_text(r['footprint'])}, {r['ns']} ns (it reads as memory, "
                          f"{r['ns_inside']} ns, from four times the level above on: a lower bound of its latency)")
    why, share_why = fit_and_write(inp, levels, largest, out, last_level_fit, progress, bounds_norm_fit, share_fit)
    return {**inp, "clock_how": clock_how, "last_level_fit_skipped": why, "share_fit_skipped": share_why, "unsteady": unsteady_in(inp)}
